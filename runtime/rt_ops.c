/*
 * runtime/rt_ops.c — the graph's row operations (rt_ops.h), shared by the
 * runtime's forward pass, its context shift and calib/'s forward pass.
 */
#include "runtime/rt_ops.h"

#include <math.h>
#include <string.h>

void rt_rope_cache(const struct rt_hparams *hp, const float *freq_factors, int32_t pos,
                   float *cache)
{
    const float theta_scale = powf(hp->rope_base, -2.0f / (float)hp->n_rot);
    float theta = (float)pos;
    for (uint32_t i0 = 0; i0 < hp->n_rot; i0 += 2) {
        const float ff = freq_factors ? freq_factors[i0 / 2] : 1.0f;
        const float t = hp->rope_freq_scale * (theta / ff);
        cache[i0] = cosf(t);
        cache[i0 + 1] = sinf(t);
        theta *= theta_scale;
    }
}

void rt_rope_apply(const struct rt_hparams *hp, const float *cache, float *x)
{
    const uint32_t n_rot = hp->n_rot;
    if (hp->rope_neox) {
        const uint32_t half = n_rot / 2;
        for (uint32_t i0 = 0; i0 < n_rot; i0 += 2) {
            const float c = cache[i0], s = cache[i0 + 1];
            const float x0 = x[i0 / 2], x1 = x[i0 / 2 + half];
            x[i0 / 2] = x0 * c - x1 * s;
            x[i0 / 2 + half] = x0 * s + x1 * c;
        }
    } else {
        for (uint32_t i0 = 0; i0 < n_rot; i0 += 2) {
            const float c = cache[i0], s = cache[i0 + 1];
            const float x0 = x[i0], x1 = x[i0 + 1];
            x[i0] = x0 * c - x1 * s;
            x[i0 + 1] = x0 * s + x1 * c;
        }
    }
}

void rt_rmsnorm(float *out, const float *x, const float *w, uint64_t n, float eps)
{
    double sum = 0.0;
    for (uint64_t i = 0; i < n; i++) sum += (double)(x[i] * x[i]);
    const float mean = (float)(sum / (double)n);
    const float scale = 1.0f / sqrtf(mean + eps);
    for (uint64_t i = 0; i < n; i++) out[i] = (x[i] * scale) * w[i];
}

void rt_swiglu(float *g, const float *u, uint64_t n)
{
    for (uint64_t i = 0; i < n; i++) g[i] = g[i] / (1.0f + expf(-g[i])) * u[i];
}

// --- family ops ---

struct rt_rope_params rt_rope_layer_params(const struct rt_hparams *hp, uint32_t il,
                                           uint32_t n_ctx)
{
    struct rt_rope_params p = {hp->rope_base, hp->rope_freq_scale, 1.0f, false};
    if (rt_layer_is_swa(hp, il)) {
        p.base = hp->rope_base_swa;
        p.freq_scale = hp->rope_freq_scale_swa != 0.0f ? hp->rope_freq_scale_swa : 1.0f;
    }
    if (hp->rope_attn_factor != 0.0f) p.attn_factor = hp->rope_attn_factor;
    /* llama.cpp pads the context to a multiple of 256 (llama_context:
     * cparams.n_ctx = GGML_PAD(n_ctx, 256)) before get_rope_factors compares
     * it (n_ctx_seq, one sequence) with the original context */
    const uint64_t padded = ((uint64_t)n_ctx + 255) / 256 * 256;
    const uint32_t orig = hp->n_ctx_orig ? hp->n_ctx_orig : hp->n_ctx_train;
    p.long_factors = hp->has_rope_long && padded > orig;
    return p;
}

void rt_rope_cache_ex(uint32_t n_rot, const struct rt_rope_params *p, const float *freq_factors,
                      int32_t pos, float *cache)
{
    const float theta_scale = powf(p->base, -2.0f / (float)n_rot);
    float theta = (float)pos;
    for (uint32_t i0 = 0; i0 < n_rot; i0 += 2) {
        const float ff = freq_factors ? freq_factors[i0 / 2] : 1.0f;
        const float t = p->freq_scale * (theta / ff);
        cache[i0] = cosf(t) * p->attn_factor;
        cache[i0 + 1] = sinf(t) * p->attn_factor;
        theta *= theta_scale;
    }
}

/* ggml_gelu_f32 (ggml-cpu/vec.h) */
static float gelu_f32(float x)
{
    const float coef_a = 0.044715f;
    const float sqrt_2_over_pi = 0.79788456080286535587989211986876f;
    return 0.5f * x * (1.0f + tanhf(sqrt_2_over_pi * x * (1.0f + coef_a * x * x)));
}

/* IEEE f32 -> f16 -> f32, round to nearest even (what the f16 table index
 * and entry go through); x is finite and |x| < 10 or a GELU value. */
static float round_f16(float f)
{
    uint32_t x;
    memcpy(&x, &f, sizeof x);
    const uint32_t sign = x & 0x80000000u;
    x ^= sign;
    uint32_t u;
    if (x >= 0x47800000u) { /* >= 65536 (not reached here): inf */
        u = 0x7f800000u;
    } else if (x < 0x38800000u) { /* below 2^-14: f16 subnormal, steps of 2^-24 */
        float a;
        memcpy(&a, &x, sizeof a);
        const float q = rintf(a * 16777216.0f); /* exact scaling; rint: nearest even */
        a = q * 5.9604644775390625e-08f;
        memcpy(&u, &a, sizeof u);
    } else { /* normal: keep 10 mantissa bits, nearest even */
        const uint32_t odd = (x >> 13) & 1;
        u = (x + 0xfffu + odd) & ~0x1fffu;
    }
    u |= sign;
    float r;
    memcpy(&r, &u, sizeof r);
    return r;
}

float rt_gelu_tanh(float x)
{
    if (x <= -10.0f) return 0.0f;
    if (x >= 10.0f) return x;
    return round_f16(gelu_f32(round_f16(x)));
}

void rt_geglu(float *g, const float *u, uint64_t n)
{
    for (uint64_t i = 0; i < n; i++) {
        const float x = g[i];
        if (x <= -10.0f) g[i] = 0.0f;
        else if (x >= 10.0f) g[i] = x * u[i];
        else g[i] = round_f16(gelu_f32(round_f16(x))) * u[i];
    }
}

void rt_ffn_act(const struct rt_hparams *hp, float *g, const float *u, uint64_t n)
{
    if (hp->act == RT_ACT_GELU_TANH) rt_geglu(g, u, n);
    else rt_swiglu(g, u, n);
}

void rt_softcap(float *x, uint64_t n, float cap)
{
    if (!(cap > 0.0f)) return;
    const float inv = 1.0f / cap;
    for (uint64_t i = 0; i < n; i++) x[i] = tanhf(x[i] * inv) * cap;
}

void rt_attn_scales(const struct rt_hparams *hp, float *q_mul, float *kq_scale)
{
    const float inv_sqrt = 1.0f / sqrtf((float)hp->head_dim);
    switch (hp->arch) {
    case RT_ARCH_GEMMA2:
    case RT_ARCH_GEMMA3:
    case RT_ARCH_PHI3:
        *q_mul = hp->attn_scale != 0.0f ? hp->attn_scale : inv_sqrt;
        *kq_scale = 1.0f;
        break;
    default:
        *q_mul = 0.0f;
        *kq_scale = hp->attn_scale != 0.0f ? hp->attn_scale : inv_sqrt;
        break;
    }
}

float rt_attn_score(float s, float scale, float cap)
{
    if (cap > 0.0f) return cap * tanhf(s * (scale / cap));
    return s * scale;
}

uint32_t rt_swa_first(const struct rt_hparams *hp, uint32_t il, uint32_t p)
{
    if (!rt_layer_is_swa(hp, il)) return 0;
    return p >= hp->n_swa ? p - hp->n_swa + 1 : 0;
}

void rt_rmsnorm_heads(float *x, const float *w, uint32_t n_head, uint32_t head_dim, float eps)
{
    for (uint32_t h = 0; h < n_head; h++) {
        float *v = x + (uint64_t)h * head_dim;
        rt_rmsnorm(v, v, w, head_dim, eps);
    }
}
