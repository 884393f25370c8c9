/*
 * runtime/rt_model_tensor.c — the checked tensor readers of the model
 * loader (rt_model_int.h): a tensor found with its exact shape and its data
 * in the file, a weight matrix (or a 3-D stack of experts) with a mat-vec
 * kernel and the size its rows give, an f32/f16/bf16 table decoded into the
 * model's float buffer, a tensor that must be absent. Errors name the tensor.
 */
#include "runtime/rt_model_int.h"

#include <string.h>

#include "quant/quant.h"

const char *type_name(uint32_t t)
{
    const struct gguf_type_info *ti = gguf_type_get(t);
    return ti && ti->name ? ti->name : "?";
}

void shape_str(char *buf, size_t n, const uint64_t ne[GGUF_MAX_DIMS], uint32_t n_dims)
{
    size_t o = 0;
    buf[0] = '\0';
    for (uint32_t d = 0; d < n_dims && o < n; d++)
        o += (size_t)snprintf(buf + o, n - o, d ? "x%llu" : "%llu", (unsigned long long)ne[d]);
}

/* Find tensor name with shape [ne0] (ne1 == 0), [ne0, ne1] (ne2 == 0) or
 * [ne0, ne1, ne2]; NULL if absent and optional. */
static enum mw_status find_tensor3(struct ld *L, const char *name, bool required, uint64_t ne0,
                                   uint64_t ne1, uint64_t ne2, const struct gguf_tensor **out)
{
    *out = NULL;
    const int64_t i = gguf_tensor_find(L->f, name);
    if (i < 0) {
        if (required) FAIL_T(L, name, MW_E_FORMAT, MW_ERR_OFF_NONE, "missing (the %s graph needs it)",
                             L->arch);
        return MW_OK;
    }
    const struct gguf_tensor *t = gguf_tensor_get(L->f, (uint64_t)i);
    const uint64_t want[GGUF_MAX_DIMS] = {ne0, ne1 ? ne1 : 1, ne2 ? ne2 : 1, 1};
    for (int d = 0; d < GGUF_MAX_DIMS; d++) {
        if (t->ne[d] != want[d]) {
            char got[96], exp[64];
            shape_str(got, sizeof got, t->ne, t->n_dims);
            shape_str(exp, sizeof exp, want, ne2 ? 3 : ne1 ? 2 : 1);
            FAIL_T(L, name, MW_E_FORMAT, t->info_off, "shape %s, expected %s", got, exp);
        }
    }
    if (gguf_tensor_data(L->f, (uint64_t)i) == NULL)
        FAIL_T(L, name, MW_E_TRUNC, t->file_off, "data is not in the file");
    *out = t;
    return MW_OK;
}

enum mw_status find_tensor(struct ld *L, const char *name, bool required, uint64_t ne0,
                                  uint64_t ne1, const struct gguf_tensor **out)
{
    return find_tensor3(L, name, required, ne0, ne1, 0, out);
}

/* A weight matrix of n_out rows of n_in (n_exp == 0), or a 3-D stack of
 * n_exp such matrices (the experts; w describes expert 0, slab_bytes
 * apart): present, shaped, with a kernel. */
enum mw_status get_weight(struct ld *L, const char *name, bool required, uint64_t n_in,
                                 uint64_t n_out, uint64_t n_exp, struct rt_weight *w)
{
    const struct gguf_tensor *t;
    enum mw_status s = find_tensor3(L, name, required, n_in, n_out, n_exp, &t);
    if (s || !t) return s;
    const struct rt_kernel *k = rt_kernel_get(L->m->ks, t->type);
    if (!k || !k->dot) {
        FAIL_T(L, name, MW_E_UNSUPPORTED, t->info_off,
               "type %s has no mat-vec kernel (f32, f16, bf16, q8_0, q4_0, q4_1, q5_0, q5_1, "
               "q2_K..q6_K, iq4_nl, iq4_xs, iq3_s, iq3_xxs, iq2_s, iq2_xs, iq2_xxs, "
               "iq1_m, iq1_s, mxfp4)", type_name(t->type));
    }
    const struct rt_act_format *af = rt_kernel_act(L->m->ks, k);
    if (!af || !af->quantize || af->blck == 0 || n_in % af->blck != 0)
        FAIL_T(L, name, MW_E_UNSUPPORTED, t->info_off,
               "row length %llu does not fit the %s activation blocks of type %s",
               (unsigned long long)n_in, af ? type_name(af->type) : "?", type_name(t->type));
    const uint64_t rb = rt_row_bytes(t->type, n_in);
    uint64_t slab, total;
    if (rb == 0 || !mw_mul_u64(rb, n_out, &slab) ||
        !mw_mul_u64(slab, n_exp ? n_exp : 1, &total) || total != t->nbytes)
        FAIL_T(L, name, MW_E_FORMAT, t->info_off, "size %llu does not match %llu rows of %llu bytes",
               (unsigned long long)t->nbytes,
               (unsigned long long)(n_out * (n_exp ? n_exp : 1)), (unsigned long long)rb);
    w->data = gguf_tensor_data(L->f, (uint64_t)gguf_tensor_find(L->f, name));
    w->type = t->type;
    w->n_in = n_in;
    w->n_out = n_out;
    w->row_bytes = rb;
    w->k = k;
    w->name = t->name;
    w->slab_bytes = n_exp ? slab : 0;
    L->m->weight_bytes += t->nbytes;
    if (n_exp) {
        L->m->expert_bytes += t->nbytes;
        L->m->expert_slab_bytes += slab;
    }
    return MW_OK;
}

enum mw_status get_matrix(struct ld *L, const char *name, bool required, uint64_t n_in,
                                 uint64_t n_out, struct rt_weight *w)
{
    return get_weight(L, name, required, n_in, n_out, 0, w);
}

/* A tensor that the graph does not read must not be there (llama.cpp
 * refuses files with tensors it did not load). */
enum mw_status refuse_tensor(struct ld *L, const char *name, const char *why)
{
    if (gguf_tensor_find(L->f, name) >= 0)
        FAIL_T(L, name, MW_E_FORMAT, MW_ERR_OFF_NONE, "unexpected in a %s file (%s)", L->arch, why);
    return MW_OK;
}

/* A table [ne0, ne1] (a vector [ne0] when ne1 is 0): present (if required),
 * f32/f16/bf16; converted into the model's float buffer at *pos (advanced),
 * or counted when fbuf is NULL. */
enum mw_status get_table(struct ld *L, const char *name, bool required, uint64_t ne0,
                         uint64_t ne1, const float **out, uint64_t *pos)
{
    *out = NULL;
    const struct gguf_tensor *t;
    enum mw_status s = find_tensor(L, name, required, ne0, ne1, &t);
    if (s || !t) return s;
    const uint64_t n = ne0 * (ne1 ? ne1 : 1); /* the file's shape, checked by find_tensor */
    if (t->type != GGUF_TYPE_F32 && t->type != GGUF_TYPE_F16 && t->type != GGUF_TYPE_BF16)
        FAIL_T(L, name, MW_E_UNSUPPORTED, t->info_off, "type %s (expected f32, f16 or bf16)",
               type_name(t->type));
    const struct quant_traits *qt = quant_traits_get(t->type);
    if (!qt) FAIL_T(L, name, MW_E_UNSUPPORTED, t->info_off, "type %s cannot be decoded",
                    type_name(t->type));
    if (L->m->fbuf) {
        float *dst = L->m->fbuf + *pos;
        qt->to_float(gguf_tensor_data(L->f, (uint64_t)gguf_tensor_find(L->f, name)), dst, n);
        *out = dst;
    }
    *pos += n;
    L->m->weight_bytes += t->nbytes;
    return MW_OK;
}

enum mw_status get_vector(struct ld *L, const char *name, bool required, uint64_t n,
                          const float **out, uint64_t *pos)
{
    return get_table(L, name, required, n, 0, out, pos);
}
