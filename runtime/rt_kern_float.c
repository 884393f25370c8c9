/*
 * runtime/rt_kern_float.c — F32 x F32, F16 x F16, BF16 x BF16 dot products:
 * scalar reference and NEON, bit-identical (rt_kern_int.h: product i goes to
 * partial sum i % 16, reduced by rt__reduce16). The products of two f16 or
 * two bf16 values are exact in f32, so only the summation rounds; ggml sums
 * in double on its scalar path and in f32 vectors on NEON — either agrees
 * with this within ~n/16 * 2^-24 * sum|w*x|.
 */
#include "runtime/rt_kern_int.h"

#if RT_HAVE_NEON
#include <arm_neon.h>
#endif

// --- scalar references ---

void rt_dot_f32_f32_ref(uint64_t n, float *out, const void *wv, const void *av)
{
    const uint8_t *w = wv;
    const float *a = av;
    float p[16] = {0};
    uint64_t i = 0;
    for (; i + 16 <= n; i += 16) {
        for (int j = 0; j < 16; j++) {
            float wj;
            memcpy(&wj, w + 4 * (i + j), 4); /* weights: any alignment */
            p[j] += wj * a[i + j];
        }
    }
    for (int j = 0; i < n; i++, j++) {
        float wj;
        memcpy(&wj, w + 4 * i, 4);
        p[j] += wj * a[i];
    }
    *out = rt__reduce16(p);
}

/* F16 and BF16 share one body: bf selects the exact 16-bit -> f32
 * converter (a constant at each call, so the branch folds away). */
static inline float h16_to_f32(uint16_t h, int bf) { return bf ? rt__bf16(h) : rt__f16(h); }

static inline void dot_h16_ref(uint64_t n, float *out, const uint8_t *w, const uint16_t *a, int bf)
{
    float p[16] = {0};
    uint64_t i = 0;
    for (; i + 16 <= n; i += 16) {
        /* convert, then multiply-add: simple loops the compiler vectorizes */
        float wf[16], af[16];
        for (int j = 0; j < 16; j++) wf[j] = h16_to_f32(rt__ld16(w + 2 * (i + j)), bf);
        for (int j = 0; j < 16; j++) af[j] = h16_to_f32(a[i + j], bf);
        for (int j = 0; j < 16; j++) p[j] += wf[j] * af[j];
    }
    for (int j = 0; i < n; i++, j++)
        p[j] += h16_to_f32(rt__ld16(w + 2 * i), bf) * h16_to_f32(a[i], bf);
    *out = rt__reduce16(p);
}

void rt_dot_f16_f16_ref(uint64_t n, float *out, const void *wv, const void *av)
{
    dot_h16_ref(n, out, wv, av, 0);
}

void rt_dot_bf16_bf16_ref(uint64_t n, float *out, const void *wv, const void *av)
{
    dot_h16_ref(n, out, wv, av, 1);
}

// --- NEON ---
#if RT_HAVE_NEON

/* Four accumulators of 4 lanes = the 16 partials of the reference; the tail
 * continues on the stored partials with the reference's scalar code. */
/* rt__reduce16 of the partials s0..s3 hold (p[4k + j] = sk lane j) without
 * a round trip through memory: r = (s0 + s1) + (s2 + s3) lane-wise, then
 * (r0 + r1) + (r2 + r3) — the same additions in the same order. */
static inline float reduce16v(float32x4_t s0, float32x4_t s1, float32x4_t s2, float32x4_t s3)
{
    const float32x4_t r = vaddq_f32(vaddq_f32(s0, s1), vaddq_f32(s2, s3));
    const float32x2_t h = vpadd_f32(vget_low_f32(r), vget_high_f32(r));
    return vget_lane_f32(h, 0) + vget_lane_f32(h, 1);
}

static inline void store16(float p[16], float32x4_t s0, float32x4_t s1, float32x4_t s2,
                           float32x4_t s3)
{
    vst1q_f32(p, s0);
    vst1q_f32(p + 4, s1);
    vst1q_f32(p + 8, s2);
    vst1q_f32(p + 12, s3);
}

static inline float32x4_t ld_f32(const uint8_t *p) { return vreinterpretq_f32_u8(vld1q_u8(p)); }

void rt_dot_f32_f32_neon(uint64_t n, float *out, const void *wv, const void *av)
{
    const uint8_t *w = wv;
    const float *a = av;
    float32x4_t s0 = vdupq_n_f32(0.0f), s1 = s0, s2 = s0, s3 = s0;
    uint64_t i = 0;
    for (; i + 16 <= n; i += 16) {
        const uint8_t *wi = w + 4 * i;
        s0 = vaddq_f32(s0, vmulq_f32(ld_f32(wi), vld1q_f32(a + i)));
        s1 = vaddq_f32(s1, vmulq_f32(ld_f32(wi + 16), vld1q_f32(a + i + 4)));
        s2 = vaddq_f32(s2, vmulq_f32(ld_f32(wi + 32), vld1q_f32(a + i + 8)));
        s3 = vaddq_f32(s3, vmulq_f32(ld_f32(wi + 48), vld1q_f32(a + i + 12)));
    }
    if (i == n) {
        *out = reduce16v(s0, s1, s2, s3);
        return;
    }
    float p[16];
    store16(p, s0, s1, s2, s3);
    for (int j = 0; i < n; i++, j++) {
        float wj;
        memcpy(&wj, w + 4 * i, 4);
        p[j] += wj * a[i];
    }
    *out = rt__reduce16(p);
}

static inline float32x4_t f16lo(uint16x8_t v)
{
    return vcvt_f32_f16(vreinterpret_f16_u16(vget_low_u16(v)));
}
static inline float32x4_t f16hi(uint16x8_t v)
{
    return vcvt_f32_f16(vreinterpret_f16_u16(vget_high_u16(v)));
}

static inline float32x4_t bf16lo(uint16x8_t v)
{
    return vreinterpretq_f32_u32(vshll_n_u16(vget_low_u16(v), 16));
}
static inline float32x4_t bf16hi(uint16x8_t v)
{
    return vreinterpretq_f32_u32(vshll_high_n_u16(v, 16));
}
static inline float32x4_t h16lo(uint16x8_t v, int bf) { return bf ? bf16lo(v) : f16lo(v); }
static inline float32x4_t h16hi(uint16x8_t v, int bf) { return bf ? bf16hi(v) : f16hi(v); }

/* F16 / BF16 (bf as in dot_h16_ref). */
static inline void dot_h16_neon(uint64_t n, float *out, const uint8_t *w, const uint16_t *a, int bf)
{
    float32x4_t s0 = vdupq_n_f32(0.0f), s1 = s0, s2 = s0, s3 = s0;
    uint64_t i = 0;
    for (; i + 16 <= n; i += 16) {
        const uint16x8_t w0 = vreinterpretq_u16_u8(vld1q_u8(w + 2 * i));
        const uint16x8_t w1 = vreinterpretq_u16_u8(vld1q_u8(w + 2 * i + 16));
        const uint16x8_t a0 = vld1q_u16(a + i), a1 = vld1q_u16(a + i + 8);
        s0 = vaddq_f32(s0, vmulq_f32(h16lo(w0, bf), h16lo(a0, bf)));
        s1 = vaddq_f32(s1, vmulq_f32(h16hi(w0, bf), h16hi(a0, bf)));
        s2 = vaddq_f32(s2, vmulq_f32(h16lo(w1, bf), h16lo(a1, bf)));
        s3 = vaddq_f32(s3, vmulq_f32(h16hi(w1, bf), h16hi(a1, bf)));
    }
    if (i == n) {
        *out = reduce16v(s0, s1, s2, s3);
        return;
    }
    float p[16];
    store16(p, s0, s1, s2, s3);
    for (int j = 0; i < n; i++, j++)
        p[j] += h16_to_f32(rt__ld16(w + 2 * i), bf) * h16_to_f32(a[i], bf);
    *out = rt__reduce16(p);
}

void rt_dot_f16_f16_neon(uint64_t n, float *out, const void *wv, const void *av)
{
    dot_h16_neon(n, out, wv, av, 0);
}

void rt_dot_bf16_bf16_neon(uint64_t n, float *out, const void *wv, const void *av)
{
    dot_h16_neon(n, out, wv, av, 1);
}

#endif /* RT_HAVE_NEON */
