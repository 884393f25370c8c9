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
        rt_rope_neox_rows(cache, n_rot, x);
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
    else if (hp->act == RT_ACT_SWIGLU_OAI) rt_swiglu_oai(g, u, n);
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

// --- mixture of experts ---

/* libstdc++'s std::sort (GCC's bits/stl_algo.h / stl_heap.h), which
 * ggml's CPU argsort calls, step for step over int32 indices with
 * comp(a, b) = x[a] > x[b]: the same permutation, ties included. */
struct sort_ctx {
    const float *x;
};
static bool cmp_gt(const struct sort_ctx *s, int32_t a, int32_t b) { return s->x[a] > s->x[b]; }

static void push_heap_(const struct sort_ctx *s, int32_t *first, long hole, long top, int32_t v)
{
    long parent = (hole - 1) / 2;
    while (hole > top && cmp_gt(s, first[parent], v)) {
        first[hole] = first[parent];
        hole = parent;
        parent = (hole - 1) / 2;
    }
    first[hole] = v;
}

static void adjust_heap_(const struct sort_ctx *s, int32_t *first, long hole, long len, int32_t v)
{
    const long top = hole;
    long child = hole;
    while (child < (len - 1) / 2) {
        child = 2 * (child + 1);
        if (cmp_gt(s, first[child], first[child - 1])) child--;
        first[hole] = first[child];
        hole = child;
    }
    if ((len & 1) == 0 && child == (len - 2) / 2) {
        child = 2 * (child + 1);
        first[hole] = first[child - 1];
        hole = child - 1;
    }
    push_heap_(s, first, hole, top, v);
}

static void heap_sort_(const struct sort_ctx *s, int32_t *first, int32_t *last)
{
    const long len = last - first;
    if (len >= 2) /* make_heap */
        for (long parent = (len - 2) / 2;; parent--) {
            adjust_heap_(s, first, parent, len, first[parent]);
            if (parent == 0) break;
        }
    while (last - first > 1) { /* sort_heap: pop_heap(first, last, last) */
        --last;
        const int32_t v = *last;
        *last = *first;
        adjust_heap_(s, first, 0, last - first, v);
    }
}

static void move_median_to_first_(const struct sort_ctx *s, int32_t *result, int32_t *a,
                                  int32_t *b, int32_t *c)
{
    int32_t *m;
    if (cmp_gt(s, *a, *b)) {
        if (cmp_gt(s, *b, *c)) m = b;
        else if (cmp_gt(s, *a, *c)) m = c;
        else m = a;
    } else if (cmp_gt(s, *a, *c)) {
        m = a;
    } else if (cmp_gt(s, *b, *c)) {
        m = c;
    } else {
        m = b;
    }
    const int32_t t = *result;
    *result = *m;
    *m = t;
}

/* The "unguarded" loops below carry bounds that a consistent order never
 * reaches (so the permutation is std::sort's); they only keep NaN inputs,
 * for which std::sort's behaviour is undefined, inside the array. */
static int32_t *unguarded_partition_(const struct sort_ctx *s, int32_t *first, int32_t *last,
                                     const int32_t *pivot)
{
    int32_t *const end = last;
    for (;;) {
        while (first < end && cmp_gt(s, *first, *pivot)) ++first;
        --last;
        while (last > pivot && cmp_gt(s, *pivot, *last)) --last;
        if (!(first < last)) return first;
        const int32_t t = *first;
        *first = *last;
        *last = t;
        ++first;
    }
}

static void introsort_loop_(const struct sort_ctx *s, int32_t *first, int32_t *last, int depth)
{
    while (last - first > 16) {
        if (depth == 0) {
            heap_sort_(s, first, last); /* std::__partial_sort(first, last, last) */
            return;
        }
        --depth;
        int32_t *mid = first + (last - first) / 2;
        move_median_to_first_(s, first, first + 1, mid, last - 1);
        int32_t *cut = unguarded_partition_(s, first + 1, last, first);
        introsort_loop_(s, cut, last, depth);
        last = cut;
    }
}

static void unguarded_linear_insert_(const struct sort_ctx *s, const int32_t *lo, int32_t *last)
{
    const int32_t v = *last;
    while (last > lo && cmp_gt(s, v, last[-1])) {
        *last = last[-1];
        --last;
    }
    *last = v;
}

static void insertion_sort_(const struct sort_ctx *s, int32_t *first, int32_t *last)
{
    if (first == last) return;
    for (int32_t *i = first + 1; i != last; ++i) {
        if (cmp_gt(s, *i, *first)) {
            const int32_t v = *i;
            memmove(first + 1, first, (size_t)(i - first) * sizeof *first);
            *first = v;
        } else {
            unguarded_linear_insert_(s, first, i);
        }
    }
}

void rt_argsort_desc(const float *x, uint32_t n, int32_t *idx)
{
    for (uint32_t i = 0; i < n; i++) idx[i] = (int32_t)i;
    if (n < 2) return;
    const struct sort_ctx s = {x};
    int lg = 0;
    while ((2ul << lg) <= n) lg++; /* std::__lg(n) = floor(log2 n) */
    introsort_loop_(&s, idx, idx + n, 2 * lg);
    if (n > 16) { /* __final_insertion_sort */
        insertion_sort_(&s, idx, idx + 16);
        for (int32_t *i = idx + 16; i != idx + n; ++i) unguarded_linear_insert_(&s, idx, i);
    } else {
        insertion_sort_(&s, idx, idx + n);
    }
}

void rt_moe_route(float *probs, uint32_t n_expert, uint32_t k, bool norm, int32_t *idx,
                  int32_t *sel, float *w)
{
    /* ggml_soft_max (no mask, scale 1): max, expf(l - max) summed in double,
     * then every value times (float)(1/sum) */
    float max = -INFINITY;
    for (uint32_t e = 0; e < n_expert; e++) max = probs[e] > max ? probs[e] : max;
    double sum = 0.0;
    for (uint32_t e = 0; e < n_expert; e++) {
        probs[e] = expf(probs[e] - max);
        sum += (double)probs[e];
    }
    const float inv = (float)(1.0 / sum);
    for (uint32_t e = 0; e < n_expert; e++) probs[e] *= inv;
    /* ggml_argsort_top_k: the first k of the descending argsort */
    rt_argsort_desc(probs, n_expert, idx);
    for (uint32_t j = 0; j < k; j++) {
        sel[j] = idx[j];
        w[j] = probs[idx[j]];
    }
    if (!norm) return;
    /* ggml_sum_rows (double sum, stored as float), ggml_clamp to the
     * smallest normal f16, ggml_div */
    double ws = 0.0;
    for (uint32_t j = 0; j < k; j++) ws += (double)w[j];
    float s = (float)ws;
    if (s < 6.103515625e-5f) s = 6.103515625e-5f;
    for (uint32_t j = 0; j < k; j++) w[j] = w[j] / s;
}

float rt_moe_shexp_gate(float x)
{
    /* ggml_div(ggml_silu(x), x): silu(x) = x/(1+expf(-x)); 0/0 is NaN there,
     * its limit 1/2 here */
    if (x == 0.0f) return 0.5f;
    return x / (1.0f + expf(-x)) / x;
}

// --- gated delta net ---

void rt_ssm_conv_step(float *state, const float *w, const float *x, float *y, uint64_t n,
                      uint32_t K)
{
    const uint32_t ks = K - 1;
    for (uint64_t c = 0; c < n; c++) {
        float *s = state + c * ks;
        const float *wc = w + c * K;
        float sum = 0.0f;
        for (uint32_t i = 0; i < ks; i++) sum += s[i] * wc[i];
        sum += x[c] * wc[ks];
        y[c] = sum / (1.0f + expf(-sum));
        if (ks > 0) {
            memmove(s, s + 1, (size_t)(ks - 1) * sizeof(float));
            s[ks - 1] = x[c];
        }
    }
}

void rt_l2norm_heads(float *x, uint32_t n_head, uint32_t d, float eps)
{
    for (uint32_t h = 0; h < n_head; h++) {
        float *v = x + (uint64_t)h * d;
        double sum = 0.0;
        for (uint32_t i = 0; i < d; i++) sum += (double)(v[i] * v[i]);
        const float scale = 1.0f / fmaxf(sqrtf((float)sum), eps);
        for (uint32_t i = 0; i < d; i++) v[i] *= scale;
    }
}

void rt_delta_net_step(float *M, uint32_t S, const float *q, const float *k, const float *v,
                       float g, float beta, float *out)
{
    const float decay = expf(g);
    const float scale = 1.0f / sqrtf((float)S);
    for (uint64_t t = 0; t < (uint64_t)S * S; t++) M[t] *= decay;
    for (uint32_t j = 0; j < S; j++) {
        float *row = M + (uint64_t)j * S;
        float sum = 0.0f;
        for (uint32_t i = 0; i < S; i++) sum += row[i] * k[i];
        const float d = (v[j] - sum) * beta;
        for (uint32_t i = 0; i < S; i++) row[i] += k[i] * d;
    }
    for (uint32_t j = 0; j < S; j++) {
        const float *row = M + (uint64_t)j * S;
        float sum = 0.0f;
        for (uint32_t i = 0; i < S; i++) sum += row[i] * q[i];
        out[j] = sum * scale;
    }
}

void rt_delta_net_gates(float alpha, float dt_bias, float ssm_a, float b, float *g,
                        float *beta)
{
    const float x = alpha + dt_bias;
    const float sp = x > 20.0f ? x : logf(1.0f + expf(x));
    *g = ssm_a * sp;
    *beta = 1.0f / (1.0f + expf(-b));
}

void rt_delta_net_out_norm(float *o, const float *w, const float *z, uint32_t S, float eps)
{
    rt_rmsnorm(o, o, w, S, eps);
    for (uint32_t i = 0; i < S; i++) o[i] *= z[i] / (1.0f + expf(-z[i]));
}

void rt_rope_text_sections(const struct rt_hparams *hp, float *cache)
{
    const uint32_t *sec = hp->rope_sections;
    const uint32_t n = sec[0] + sec[1] + sec[2] + sec[3];
    if (n == 0) return;
    for (uint32_t i = 0; i < hp->n_rot / 2; i++) {
        /* ggml_mrope_cache_init, is_imrope: t, h, w interleaved, the rest e */
        const uint32_t sector = i % n;
        const bool thw = (sector % 3 == 1 && sector < 3 * sec[1]) ||
                         (sector % 3 == 2 && sector < 3 * sec[2]) ||
                         (sector % 3 == 0 && sector < 3 * sec[0]);
        if (thw) continue;
        cache[2 * i] = 1.0f;
        cache[2 * i + 1] = 0.0f;
    }
}

void rt_rmsnorm_nw(float *x, uint64_t n, float eps)
{
    double sum = 0.0;
    for (uint64_t i = 0; i < n; i++) sum += (double)(x[i] * x[i]);
    const float mean = (float)(sum / (double)n);
    const float scale = 1.0f / sqrtf(mean + eps);
    for (uint64_t i = 0; i < n; i++) x[i] = x[i] * scale;
}

void rt_rope_neox_rows(const float *rc, uint32_t n_rot, float *x)
{
    const uint32_t half = n_rot / 2;
    for (uint32_t i0 = 0; i0 < n_rot; i0 += 2) {
        const float c = rc[i0], s = rc[i0 + 1];
        const float x0 = x[i0 / 2], x1 = x[i0 / 2 + half];
        x[i0 / 2] = x0 * c - x1 * s;
        x[i0 / 2 + half] = x0 * s + x1 * c;
    }
}
