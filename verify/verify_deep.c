/* verify/verify_deep.c — `verify --deep`: decode blocks, require finite values. */
#include "verify/verify_int.h"

#include <math.h>

#include "quant/quant.h"

/* MXFP4: an E8M0 scale byte 0xFF is NaN in OCP MX. ggml decodes it as 2^127
 * (finite for small levels) and llama.cpp's converter never writes it, so a
 * block holding one is corrupt even where its decoded values are finite.
 * The runtime does not look at scale bytes when it loads a file (that would
 * read every expert byte); this is where a file is checked for them. */
static bool mxfp4_scales_ok(struct vctx *c, uint64_t i, const struct gguf_type_info *ti,
                            const uint8_t *data, uint64_t pos, uint64_t nblocks)
{
    const struct gguf_tensor *t = gguf_tensor_get(c->f, i);
    for (uint64_t b = 0; b < nblocks; b++) {
        if (data[pos + b * ti->type_size] != 0xFF) continue;
        const uint64_t block = pos / ti->type_size + b;
        verify__item(c, VERIFY_ERROR, MW_E_VALUE, t->file_off + pos + b * ti->type_size,
                     (int64_t)i, NULL,
                     "block %llu (elements %llu..%llu): E8M0 scale byte 0xFF (NaN in OCP MX)",
                     (unsigned long long)block, (unsigned long long)(block * ti->blck),
                     (unsigned long long)(block * ti->blck + ti->blck - 1));
        return false;
    }
    return true;
}

bool verify__deep_range(struct vctx *c, uint64_t i, const struct quant_traits *qt, uint64_t lo,
                        uint64_t hi)
{
    const struct gguf_tensor *t = gguf_tensor_get(c->f, i);
    const struct gguf_type_info *ti = gguf_type_get(t->type);
    const uint8_t *data = gguf_tensor_data(c->f, i);
    if (!ti || !data || ti->blck == 0 || ti->type_size == 0) return false;

    /* decode whole blocks, at most VERIFY_DECODE_ELEMS floats at a time */
    float buf[VERIFY_DECODE_ELEMS];
    const uint64_t blocks_per_step =
        ti->blck <= VERIFY_DECODE_ELEMS ? VERIFY_DECODE_ELEMS / ti->blck : 1;
    if (ti->blck > VERIFY_DECODE_ELEMS) return false; /* no such type today */
    const uint64_t step_bytes = blocks_per_step * ti->type_size;

    for (uint64_t pos = lo; pos < hi;) {
        uint64_t nbytes = hi - pos < step_bytes ? hi - pos : step_bytes;
        const uint64_t nblocks = nbytes / ti->type_size;
        if (nblocks == 0) break; /* a partial block cannot happen: sizes are checked */
        nbytes = nblocks * ti->type_size;
        const uint64_t n = nblocks * ti->blck;
        if (t->type == GGUF_TYPE_MXFP4 && !mxfp4_scales_ok(c, i, ti, data, pos, nblocks))
            return false;
        qt->to_float(data + pos, buf, n);
        for (uint64_t k = 0; k < n; k++) {
            if (isfinite(buf[k])) continue;
            /* element index within the tensor, and where it sits */
            const uint64_t elem = (pos / ti->type_size) * ti->blck + k;
            const uint64_t row = elem / t->ne[0], col = elem % t->ne[0];
            const uint64_t block_off = t->file_off + pos + (k / ti->blck) * ti->type_size;
            verify__item(c, VERIFY_ERROR, MW_E_VALUE, block_off, (int64_t)i, NULL,
                         "element %llu (row %llu, col %llu) is %s%s (decoded as %s)",
                         (unsigned long long)elem, (unsigned long long)row,
                         (unsigned long long)col, isnan(buf[k]) ? "" : (buf[k] < 0 ? "-" : "+"),
                         isnan(buf[k]) ? "NaN" : "Inf", ti->name);
            return false;
        }
        pos += nbytes;
    }
    return true;
}
