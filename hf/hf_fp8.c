/* hf/hf_fp8.c — FP8 (E4M3) source weights: the scale tensor of each weight
 * (found by name, its shape checked against the weight and the configured
 * block, its values finite) and the dequantization of one row, E4M3 × F32
 * scale in F32 as llama.cpp's converter computes it (conversion/base.py
 * dequant_simple: weight.float() * scale.float() broadcast per block), so a
 * single rounding happens later, to the output type. Rows are dequantized
 * one at a time from the mapping: a tensor never needs more than its scale
 * grid and one row in memory. docs/formats.md §6.9. */
#include "hf/hf_int.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

/* E4M3 ("fn": no infinities; S.1111.111 is NaN), exact in F32. */
static float e4m3_value(unsigned b)
{
    const unsigned e = (b >> 3) & 15u, m = b & 7u;
    float v;
    if (e == 15 && m == 7) v = NAN;
    else if (e == 0) v = ldexpf((float)m, -9);          /* subnormal: m/8 * 2^-6 */
    else v = ldexpf((float)(8u + m), (int)e - 10);       /* (1 + m/8) * 2^(e-7) */
    return (b & 0x80u) ? -v : v;
}

static const char *scale_suffix(enum hf_quant_method q)
{
    return q == HF_QM_FP8 ? "_scale_inv" : "_scale";
}

static bool ends_with(const char *s, const char *suf)
{
    const size_t n = strlen(s), k = strlen(suf);
    return n >= k && strcmp(s + n - k, suf) == 0;
}

bool hf__fp8_is_scale(const struct hf_config *c, const char *name)
{
    if (c->quant.method == HF_QM_NONE) return false;
    /* the weight scales, and the activation scales llama.cpp drops too
     * (static activation schemes: input_scale, activation_scale) */
    return ends_with(name, c->quant.method == HF_QM_FP8 ? ".weight_scale_inv" : ".weight_scale") ||
           ends_with(name, ".input_scale") || ends_with(name, ".activation_scale") ||
           ends_with(name, "_activation_scale");
}

static float scale_at(const struct hf_fp8 *f, uint64_t i)
{
    const uint8_t *p = f->scale;
    uint32_t u;
    float v;
    switch (f->sdt) {
    case HF_DT_F32:
        u = mw_le32(p + 4 * i);
        break;
    case HF_DT_BF16:
        u = (uint32_t)mw_le16(p + 2 * i) << 16;
        break;
    default: /* F16 */
        return mw_f16_to_f32(mw_le16(p + 2 * i));
    }
    memcpy(&v, &u, sizeof v);
    return v;
}

static uint64_t cdiv(uint64_t a, uint64_t b) { return a / b + (a % b != 0); }

enum mw_status hf__fp8_open(const struct hf_model *m, const struct hf_st *sh,
                            const struct hf_st_tensor *t, struct hf_fp8 *f, struct mw_err *err)
{
    const struct hf_quant_cfg *q = &m->cfg.quant;
    memset(f, 0, sizeof *f);
    if (t->dtype == HF_DT_F8_E5M2)
        return hf__tensor_fail(err, MW_E_UNSUPPORTED, sh, t,
                               "dtype F8_E5M2 is not supported (FP8 sources "
                               "are read in E4M3 only)");
    if (q->method == HF_QM_NONE)
        return hf__tensor_fail(err, MW_E_FORMAT, sh, t, "dtype F8_E4M3, but config.json has no "
                               "quantization_config (where are its scales?)");
    if (t->n_dims != 2)
        return hf__tensor_fail(err, MW_E_UNSUPPORTED, sh, t,
                               "an F8_E4M3 tensor of %u dimensions (2-D "
                               "weights only)", t->n_dims);
    const uint64_t R = t->shape[0], C = t->shape[1];
    char sname[GGUF_MAX_NAME + 96];
    snprintf(sname, sizeof sname, "%s%s", t->name, scale_suffix(q->method));
    const int64_t si = hf_model_tensor_find(m, sname);
    if (si < 0)
        return hf__tensor_fail(err, MW_E_FORMAT, sh, t,
                               "F8_E4M3 weight without its scale tensor '%s'",
                               sname);
    const struct hf_st *ssh;
    const struct hf_st_tensor *s = hf_model_tensor(m, (uint64_t)si, &ssh);
    if (s->dtype != HF_DT_F32 && s->dtype != HF_DT_BF16 && s->dtype != HF_DT_F16)
        return hf__tensor_fail(err, MW_E_FORMAT, ssh, s,
                               "scale dtype %s (expected F32, BF16 or F16)",
                               hf_dtype_name(s->dtype));
    /* the grid the scale's shape must be */
    uint64_t gr, gc;
    bool ok;
    char want[128];
    const bool per_tensor_ct = q->method == HF_QM_CT_FP8 && strcmp(q->strategy, "tensor") == 0;
    const bool per_channel_ct = q->method == HF_QM_CT_FP8 && strcmp(q->strategy, "channel") == 0;
    if (q->block[0]) {
        f->b0 = q->block[0];
        f->b1 = q->block[1];
        gr = cdiv(R, f->b0);
        gc = cdiv(C, f->b1);
        ok = s->n_dims == 2 && s->shape[0] == gr && s->shape[1] == gc;
        snprintf(want, sizeof want, "[%llu, %llu] (weight [%llu, %llu] in blocks of [%u, %u])",
                 (unsigned long long)gr, (unsigned long long)gc, (unsigned long long)R,
                 (unsigned long long)C, q->block[0], q->block[1]);
    } else {
        /* per tensor: [], [1], [1, 1]; per row: [R], [R, 1] */
        const bool one = s->n_elems == 1 && s->n_dims <= 2;
        const bool rows = (s->n_dims == 1 && s->shape[0] == R) ||
                          (s->n_dims == 2 && s->shape[0] == R && s->shape[1] == 1);
        ok = per_tensor_ct ? one : per_channel_ct ? rows : (one || rows);
        if (one && ok) {
            f->b0 = R ? R : 1;
            gr = 1;
        } else {
            f->b0 = 1;
            gr = R;
        }
        f->b1 = C ? C : 1;
        gc = 1;
        snprintf(want, sizeof want, "%s (weight [%llu, %llu])",
                 per_tensor_ct ? "[] or [1] (strategy tensor)"
                 : per_channel_ct ? "[rows, 1] (strategy channel)"
                                  : "one per tensor ([] or [1]) or per row ([rows, 1])",
                 (unsigned long long)R, (unsigned long long)C);
        (void)gr;
    }
    if (!ok) {
        char got[96];
        hf_st_shape_str(s, got, sizeof got);
        return hf__tensor_fail(err, MW_E_FORMAT, ssh, s,
                               "scale shape %s does not cover its weight: "
                               "expected %s", got, want);
    }
    f->scale = s->data;
    f->sdt = s->dtype;
    f->scols = gc;
    for (uint64_t i = 0; i < s->n_elems; i++) {
        const float v = scale_at(f, i);
        if (!isfinite(v))
            return hf__tensor_fail(err, MW_E_FORMAT, ssh, s,
                                   "scale element %llu is %s", (unsigned long long)i,
                                   isnan(v) ? "NaN" : "infinite");
    }
    for (unsigned b = 0; b < 256; b++) f->lut[b] = e4m3_value(b);
    return MW_OK;
}

void hf__fp8_row(const struct hf_fp8 *f, const uint8_t *src, uint64_t sr, const uint32_t *cm,
                 float *dst, uint64_t n)
{
    const uint64_t base = (sr / f->b0) * f->scols;
    if (f->scols == 1) {
        const float s = scale_at(f, base);
        for (uint64_t k = 0; k < n; k++) dst[k] = f->lut[src[k]] * s;
        return;
    }
    for (uint64_t k = 0; k < n; k++) {
        const uint64_t c = cm ? cm[k] : k;
        dst[k] = f->lut[src[k]] * scale_at(f, base + c / f->b1);
    }
}

enum mw_status hf__src_dtype_ok(const struct hf_model *m, const struct hf_st *sh,
                                const struct hf_st_tensor *t, struct mw_err *err)
{
    if (hf_dtype_convertible(t->dtype)) return MW_OK;
    if (t->dtype == HF_DT_F8_E4M3 || t->dtype == HF_DT_F8_E5M2) {
        struct hf_fp8 f;
        return hf__fp8_open(m, sh, t, &f, err);
    }
    return hf__tensor_fail(err, MW_E_UNSUPPORTED, sh, t,
                           "dtype %s cannot be converted (F16, BF16, F32, or F8_E4M3 with scales)",
                           hf_dtype_name(t->dtype));
}

enum mw_status hf__fp8_scale_owner(const struct hf_model *m, const struct hf_st *sh,
                                   const struct hf_st_tensor *t, struct mw_err *err)
{
    const struct hf_quant_cfg *q = &m->cfg.quant;
    const char *suf = scale_suffix(q->method);
    const size_t n = strlen(t->name), k = strlen(suf);
    if (!ends_with(t->name, suf) || !ends_with(t->name, q->method == HF_QM_FP8
                                                            ? ".weight_scale_inv"
                                                            : ".weight_scale"))
        return MW_OK; /* an activation scale: unused */
    char wname[GGUF_MAX_NAME + 96];
    if (n - k >= sizeof wname)
        return hf__tensor_fail(err, MW_E_FORMAT, sh, t, "name too long");
    memcpy(wname, t->name, n - k);
    wname[n - k] = '\0';
    const int64_t wi = hf_model_tensor_find(m, wname);
    if (wi < 0) return hf__tensor_fail(err, MW_E_FORMAT, sh, t,
                                       "a scale without its weight '%s'", wname);
    const struct hf_st_tensor *w = hf_model_tensor(m, (uint64_t)wi, NULL);
    if (w->dtype != HF_DT_F8_E4M3 && w->dtype != HF_DT_F8_E5M2)
        return hf__tensor_fail(err, MW_E_FORMAT, sh, t,
                               "a scale of '%s', whose dtype is %s, not F8_E4M3",
                               wname, hf_dtype_name(w->dtype));
    return MW_OK;
}
