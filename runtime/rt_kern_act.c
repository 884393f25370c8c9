/*
 * runtime/rt_kern_act.c — activation rows: F32 (copy), F16, BF16, Q8_0,
 * Q8_1, Q8_K. Scalar references follow ggml's quantize_row_q8_{0,1,K}_ref;
 * the NEON versions produce the same bytes for finite inputs:
 *
 *  - Q8_0/Q8_1 round half away from zero (roundf) in both: NEON uses FCVTAS
 *    (vcvtaq_s32_f32), which rounds that way. ggml's own NEON path uses
 *    FCVTNS (half to even), so on an exact tie llama.cpp-on-ARM stores one
 *    step less in magnitude than ggml's reference and than we do.
 *  - Q8_K rounds half to even in both (ggml's nearest_int; FCVTNS).
 *  - x * (1/d) is clamped to [-127, 127] before rounding. For finite inputs
 *    whose block maximum is a normal float this changes nothing (the scaled
 *    values are within 127 * (1 + 2^-22)); it makes NaN, Inf and subnormal
 *    blocks deterministic where ggml's conversion is undefined behaviour.
 *    NaN scaled values become -127 in both variants (fmaxf / FMAXNM).
 *  - Q8_K blocks that are all zero get zero bsums (ggml leaves them unset).
 */
#include "runtime/rt_kern_int.h"

#include <math.h>

#if RT_HAVE_NEON
#include <arm_neon.h>
#endif

static inline float clamp127(float v) { return fminf(fmaxf(v, -127.0f), 127.0f); }

/* ggml's nearest_int (docs/formats.md §2.4): half to even for |v| <= 4194303. */
static inline int nint(float v)
{
    const float t = v + 12582912.0f;
    int32_t i;
    memcpy(&i, &t, sizeof i);
    return (i & 0x007fffff) - 0x00400000;
}

// --- scalar references ---

void rt_quantize_f32_ref(const float *x, void *out, uint64_t n) { memcpy(out, x, n * sizeof *x); }

void rt_quantize_f16_ref(const float *x, void *out, uint64_t n)
{
    uint16_t *y = out;
    for (uint64_t i = 0; i < n; i++) y[i] = mw_f32_to_f16(x[i]);
}

void rt_quantize_bf16_ref(const float *x, void *out, uint64_t n)
{
    uint16_t *y = out;
    for (uint64_t i = 0; i < n; i++) y[i] = mw_f32_to_bf16(x[i]);
}

/* max |x| over one 32-block, ggml's MAX(amax, fabsf(v)). */
static float amax32(const float *x)
{
    float amax = 0.0f;
    for (int j = 0; j < RT_QK8_0; j++) {
        const float v = fabsf(x[j]);
        amax = amax > v ? amax : v;
    }
    return amax;
}

void rt_quantize_q8_0_ref(const float *x, void *out, uint64_t n)
{
    struct rt_block_q8_0 *y = out;
    for (uint64_t b = 0; b < n / RT_QK8_0; b++, x += RT_QK8_0) {
        const float d = amax32(x) / 127.0f;
        const float id = d != 0.0f ? 1.0f / d : 0.0f;
        y[b].d = mw_f32_to_f16(d);
        for (int j = 0; j < RT_QK8_0; j++) y[b].qs[j] = (int8_t)roundf(clamp127(x[j] * id));
    }
}

void rt_quantize_q8_1_ref(const float *x, void *out, uint64_t n)
{
    struct rt_block_q8_1 *y = out;
    for (uint64_t b = 0; b < n / RT_QK8_0; b++, x += RT_QK8_0) {
        const float d = amax32(x) / 127.0f;
        const float id = d != 0.0f ? 1.0f / d : 0.0f;
        y[b].d = mw_f32_to_f16(d);
        int sum = 0;
        for (int j = 0; j < RT_QK8_0; j++) {
            y[b].qs[j] = (int8_t)roundf(clamp127(x[j] * id));
            sum += y[b].qs[j];
        }
        y[b].s = mw_f32_to_f16((float)sum * d);
    }
}

void rt_quantize_q8_k_ref(const float *x, void *out, uint64_t n)
{
    struct rt_block_q8_k *y = out;
    for (uint64_t b = 0; b < n / RT_QK_K; b++, x += RT_QK_K) {
        float max = 0.0f, amax = 0.0f;
        for (int j = 0; j < RT_QK_K; j++) {
            const float ax = fabsf(x[j]);
            if (ax > amax) { /* first of equal maxima wins; its sign matters */
                amax = ax;
                max = x[j];
            }
        }
        if (amax == 0.0f) {
            memset(&y[b], 0, sizeof y[b]);
            continue;
        }
        const float iscale = -127.0f / max;
        for (int j = 0; j < RT_QK_K; j++) y[b].qs[j] = (int8_t)nint(clamp127(iscale * x[j]));
        for (int g = 0; g < RT_QK_K / 16; g++) {
            int sum = 0;
            for (int j = 0; j < 16; j++) sum += y[b].qs[16 * g + j];
            y[b].bsums[g] = (int16_t)sum;
        }
        y[b].d = 1.0f / iscale;
    }
}

// --- NEON ---
#if RT_HAVE_NEON

void rt_quantize_f16_neon(const float *x, void *out, uint64_t n)
{
    uint16_t *y = out;
    uint64_t i = 0;
    for (; i + 4 <= n; i += 4)
        vst1_u16(y + i, vreinterpret_u16_f16(vcvt_f16_f32(vld1q_f32(x + i))));
    for (; i < n; i++) y[i] = mw_f32_to_f16(x[i]);
}

void rt_quantize_bf16_neon(const float *x, void *out, uint64_t n)
{
    uint16_t *y = out;
    uint64_t i = 0;
    const uint32x4_t one = vdupq_n_u32(1), bias = vdupq_n_u32(0x7fff);
    const uint32x4_t abs = vdupq_n_u32(0x7fffffff), inf = vdupq_n_u32(0x7f800000);
    for (; i + 4 <= n; i += 4) {
        const uint32x4_t u = vreinterpretq_u32_f32(vld1q_f32(x + i));
        /* (u + 0x7fff + ((u >> 16) & 1)) >> 16; NaN: (u >> 16) | 0x40 */
        const uint32x4_t r = vshrq_n_u32(vaddq_u32(vaddq_u32(u, bias), vandq_u32(vshrq_n_u32(u, 16), one)), 16);
        const uint32x4_t q = vorrq_u32(vshrq_n_u32(u, 16), vdupq_n_u32(0x40));
        const uint32x4_t isnan = vcgtq_u32(vandq_u32(u, abs), inf);
        vst1_u16(y + i, vmovn_u32(vbslq_u32(isnan, q, r)));
    }
    for (; i < n; i++) y[i] = mw_f32_to_bf16(x[i]);
}

/* One 32-block: the signed 8-bit values of x * id rounded half away from
 * zero (FCVTAS), clamped like the reference; returns their sum. */
static inline int q8_32_neon(const float *x, float id, int8_t *qs)
{
    int16x8_t h[4];
    for (int k = 0; k < 4; k++) {
        const float32x4_t lo = vmulq_n_f32(vld1q_f32(x + 8 * k), id);
        const float32x4_t hi = vmulq_n_f32(vld1q_f32(x + 8 * k + 4), id);
        const float32x4_t c127 = vdupq_n_f32(127.0f), m127 = vdupq_n_f32(-127.0f);
        const int32x4_t il = vcvtaq_s32_f32(vminnmq_f32(vmaxnmq_f32(lo, m127), c127));
        const int32x4_t ih = vcvtaq_s32_f32(vminnmq_f32(vmaxnmq_f32(hi, m127), c127));
        h[k] = vcombine_s16(vmovn_s32(il), vmovn_s32(ih));
    }
    const int8x16_t q0 = vcombine_s8(vmovn_s16(h[0]), vmovn_s16(h[1]));
    const int8x16_t q1 = vcombine_s8(vmovn_s16(h[2]), vmovn_s16(h[3]));
    vst1q_s8(qs, q0);
    vst1q_s8(qs + 16, q1);
    return vaddlvq_s8(q0) + vaddlvq_s8(q1);
}

static inline float amax32_neon(const float *x)
{
    float32x4_t m = vabsq_f32(vld1q_f32(x));
    for (int k = 1; k < 8; k++) m = vmaxq_f32(m, vabsq_f32(vld1q_f32(x + 4 * k)));
    return vmaxvq_f32(m);
}

void rt_quantize_q8_0_neon(const float *x, void *out, uint64_t n)
{
    struct rt_block_q8_0 *y = out;
    for (uint64_t b = 0; b < n / RT_QK8_0; b++, x += RT_QK8_0) {
        const float d = amax32_neon(x) / 127.0f;
        const float id = d != 0.0f ? 1.0f / d : 0.0f;
        y[b].d = mw_f32_to_f16(d);
        (void)q8_32_neon(x, id, y[b].qs);
    }
}

void rt_quantize_q8_1_neon(const float *x, void *out, uint64_t n)
{
    struct rt_block_q8_1 *y = out;
    for (uint64_t b = 0; b < n / RT_QK8_0; b++, x += RT_QK8_0) {
        const float d = amax32_neon(x) / 127.0f;
        const float id = d != 0.0f ? 1.0f / d : 0.0f;
        y[b].d = mw_f32_to_f16(d);
        const int sum = q8_32_neon(x, id, y[b].qs);
        y[b].s = mw_f32_to_f16((float)sum * d);
    }
}

void rt_quantize_q8_k_neon(const float *x, void *out, uint64_t n)
{
    struct rt_block_q8_k *y = out;
    for (uint64_t b = 0; b < n / RT_QK_K; b++, x += RT_QK_K) {
        float32x4_t m = vabsq_f32(vld1q_f32(x));
        for (int k = 1; k < RT_QK_K / 4; k++) m = vmaxq_f32(m, vabsq_f32(vld1q_f32(x + 4 * k)));
        const float amax = vmaxvq_f32(m);
        if (!(amax > 0.0f)) {
            memset(&y[b], 0, sizeof y[b]);
            continue;
        }
        /* the signed value of the first element reaching amax */
        int j = 0;
        while (fabsf(x[j]) != amax) j++;
        const float iscale = -127.0f / x[j];
        const float32x4_t c127 = vdupq_n_f32(127.0f), m127 = vdupq_n_f32(-127.0f);
        for (int g = 0; g < RT_QK_K / 16; g++) {
            int16x8_t h[2];
            for (int k = 0; k < 2; k++) {
                const float *xs = x + 16 * g + 8 * k;
                const float32x4_t lo = vmulq_n_f32(vld1q_f32(xs), iscale);
                const float32x4_t hi = vmulq_n_f32(vld1q_f32(xs + 4), iscale);
                const int32x4_t il = vcvtnq_s32_f32(vminnmq_f32(vmaxnmq_f32(lo, m127), c127));
                const int32x4_t ih = vcvtnq_s32_f32(vminnmq_f32(vmaxnmq_f32(hi, m127), c127));
                h[k] = vcombine_s16(vmovn_s32(il), vmovn_s32(ih));
            }
            const int8x16_t q = vcombine_s8(vmovn_s16(h[0]), vmovn_s16(h[1]));
            vst1q_s8(y[b].qs + 16 * g, q);
            y[b].bsums[g] = (int16_t)vaddlvq_s8(q);
        }
        y[b].d = 1.0f / iscale;
    }
}

#endif /* RT_HAVE_NEON */
