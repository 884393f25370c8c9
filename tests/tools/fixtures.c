/* tests/tools/fixtures.c — see fixtures.h. */
#include "fixtures.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "gguf/gguf.h"

/* xorshift64*: fixed seed, same sequence everywhere */
/* uniform in [-1, 1), 24 bits */
static float rng_float(uint64_t *s)
{
    return (float)((int32_t)(fx_rng_next(s) >> 40) - (1 << 23)) / (float)(1 << 23);
}

#define TRY(expr)                       \
    do {                                \
        if ((st = (expr)) != MW_OK) goto out; \
    } while (0)

enum mw_status fx_write_small(const char *path, const struct fx_opts *opts, struct mw_err *err)
{
    static const struct fx_opts defaults = {0};
    if (!opts) opts = &defaults;
    enum mw_status st = MW_OK;
    struct gguf_writer *w = NULL;
    uint8_t *big = NULL;
    uint64_t s = 0x6d656d77616c6cULL; /* "memwall" */

    TRY(gguf_writer_init(&w, err));
    if (opts->no_checksums) TRY(gguf_writer_set_checksums(w, false, err));
    TRY(gguf_writer_set_str(w, "general.architecture", "llama", err));
    TRY(gguf_writer_set_str(w, "general.name", "mkgguf small", err));
    TRY(gguf_writer_set_u32(w, "llama.block_count", 1, err));
    const uint32_t u32s[5] = {1, 2, 3, 5, 8};
    TRY(gguf_writer_set_arr(w, "mkgguf.u32s", GGUF_VT_U32, u32s, 5, err));
    const float f32s[3] = {0.5f, -2.0f, 1e-3f};
    TRY(gguf_writer_set_arr(w, "mkgguf.f32s", GGUF_VT_F32, f32s, 3, err));
    const char *const strs[3] = {"a", "bc", "d\"e"};
    TRY(gguf_writer_set_arr_str(w, "mkgguf.strs", strs, NULL, 3, err));
    TRY(gguf_writer_set_bool(w, "mkgguf.flag", true, err));

    const uint64_t ne_f32[2] = {5, 3}, ne_f16[2] = {7, 2}, ne_bf16[1] = {9}, ne_q8[2] = {32, 2};
    const struct gguf_type_info *xti = opts->with_extra ? gguf_type_get(opts->extra_type) : NULL;
    if (opts->with_extra && (!xti || xti->type_size > 512)) {
        st = MW_FAIL(err, MW_E_USAGE, MW_ERR_OFF_NONE, "bad extra type %u", opts->extra_type);
        goto out;
    }
    const uint64_t ne_extra[1] = {xti ? xti->blck : 0}, ne_big[1] = {opts->big_elems};
    TRY(gguf_writer_add_tensor(w, "t.f32", GGUF_TYPE_F32, 2, ne_f32, err));
    TRY(gguf_writer_add_tensor(w, "t.f16", GGUF_TYPE_F16, 2, ne_f16, err));
    TRY(gguf_writer_add_tensor(w, "t.bf16", GGUF_TYPE_BF16, 1, ne_bf16, err));
    TRY(gguf_writer_add_tensor(w, "t.q8_0", GGUF_TYPE_Q8_0, 2, ne_q8, err));
    if (xti) TRY(gguf_writer_add_tensor(w, "t.extra", opts->extra_type, 1, ne_extra, err));
    if (opts->big_elems) TRY(gguf_writer_add_tensor(w, "t.big", GGUF_TYPE_F16, 1, ne_big, err));
    TRY(gguf_writer_open(w, path, err));

    uint8_t buf[512];
    for (int i = 0; i < 15; i++) {
        float x = rng_float(&s) * 4.0f;
        if (opts->poison == FX_INF_F32 && i == FX_POISON_ELEM_F32) x = INFINITY;
        uint32_t u;
        memcpy(&u, &x, 4);
        mw_put_le32(buf + 4 * i, u);
    }
    TRY(gguf_writer_write(w, buf, 60, err));
    for (int i = 0; i < 14; i++) mw_put_le16(buf + 2 * i, mw_f32_to_f16(rng_float(&s)));
    if (opts->poison == FX_NAN_F16) mw_put_le16(buf + 2 * FX_POISON_ELEM_F16, 0x7e00);
    TRY(gguf_writer_write(w, buf, 28, err));
    for (int i = 0; i < 9; i++) mw_put_le16(buf + 2 * i, mw_f32_to_bf16(rng_float(&s) * 100.0f));
    if (opts->poison == FX_NINF_BF16) mw_put_le16(buf + 2 * FX_POISON_ELEM_BF16, 0xff80);
    TRY(gguf_writer_write(w, buf, 18, err));
    for (int b = 0; b < 2; b++) {
        mw_put_le16(buf + 34 * b, mw_f32_to_f16(0.01f * (float)(b + 1)));
        for (int k = 0; k < 32; k++) buf[34 * b + 2 + k] = (uint8_t)(fx_rng_next(&s) >> 56);
    }
    if (opts->poison == FX_NAN_Q8_SCALE) mw_put_le16(buf + 34, 0x7e00);
    TRY(gguf_writer_write(w, buf, 68, err));
    if (xti) {
        for (uint32_t k = 0; k < xti->type_size; k++) buf[k] = (uint8_t)(fx_rng_next(&s) >> 56);
        TRY(gguf_writer_write(w, buf, xti->type_size, err));
    }
    if (opts->big_elems) {
        const size_t chunk = 1 << 16;
        big = malloc(chunk * 2);
        if (!big) {
            st = MW_FAIL(err, MW_E_NOMEM, MW_ERR_OFF_NONE, "out of memory");
            goto out;
        }
        for (uint64_t done = 0; done < opts->big_elems;) {
            const uint64_t k = opts->big_elems - done < chunk ? opts->big_elems - done : chunk;
            for (uint64_t i = 0; i < k; i++)
                mw_put_le16(big + 2 * i, (uint16_t)(fx_rng_next(&s) >> 48) & 0xbfff);
            TRY(gguf_writer_write(w, big, (size_t)(2 * k), err));
            done += k;
        }
    }
    TRY(gguf_writer_finish(w, err));
out:
    free(big);
    gguf_writer_free(w);
    return st;
}
