/*
 * runtime/rt_kern_neon.c — NEON variants of the integer kernels. The kernel
 * bodies live in rt_kern_neon.inc and are compiled twice in this file:
 *
 *   *_neon  baseline AdvSIMD: the 8-bit dot product is emulated with
 *           SMULL/SMLAL2 into 16-bit lanes and SADALP into 32-bit lanes;
 *   *_sdot  the same bodies under `#pragma GCC target` with the dot-product
 *           extension: vdotq_s32 (SDOT). Only called when the CPU has it
 *           (rt_kernels_select), so one binary runs on every ARMv8-A.
 *
 * Each kernel's integer sums equal the scalar reference's exactly (integer
 * addition in any grouping; 16-bit intermediate lanes never overflow, see
 * the dot primitives in the .inc), and the float combine repeats the
 * reference's operations lane-wise (4 blocks per float32x4, block b in lane
 * b % 4), so the results are bit-identical to rt_kern_legacy.c /
 * rt_kern_kquants.c.
 */
#include "runtime/rt_kern_int.h"

#if RT_HAVE_NEON
#include <arm_neon.h>

// --- helpers shared by both variants (no dot-product instructions) ---

/* RT__NOSCHED1, RT__MLA_LANE, RT__MLA_LANEV: rt_kern_int.h */


/* Four f16 scales -> f32 lanes (exact). */
static inline float32x4_t f16x4(uint16_t h0, uint16_t h1, uint16_t h2, uint16_t h3)
{
    const uint16_t h[4] = {h0, h1, h2, h3};
    return vcvt_f32_f16(vreinterpret_f16_u16(vld1_u16(h)));
}

/* [sum s0, sum s1, sum s2, sum s3] */
static inline int32x4_t hsum4(int32x4_t s0, int32x4_t s1, int32x4_t s2, int32x4_t s3)
{
    return vpaddq_s32(vpaddq_s32(s0, s1), vpaddq_s32(s2, s3));
}

/* Q5_0/Q5_1 fifth bits as 0x10 bytes: elements 0..15 from qh bits 0..15
 * (lo), elements 16..31 from bits 16..31 (hi). */
static inline void q5_hbits(const uint8_t *qh, uint8x16_t *lo, uint8x16_t *hi)
{
    static const uint8_t bitsel[16] = {1, 2, 4, 8, 16, 32, 64, 128, 1, 2, 4, 8, 16, 32, 64, 128};
    const uint8x16_t sel = vld1q_u8(bitsel), b4 = vdupq_n_u8(0x10);
    const uint8x16_t v0 = vcombine_u8(vdup_n_u8(qh[0]), vdup_n_u8(qh[1]));
    const uint8x16_t v1 = vcombine_u8(vdup_n_u8(qh[2]), vdup_n_u8(qh[3]));
    *lo = vandq_u8(vtstq_u8(v0, sel), b4);
    *hi = vandq_u8(vtstq_u8(v1, sel), b4);
}

/* Q2_K/Q4_K/Q5_K min term: sum_s mins[s] * sums[s] over 8 int16 lanes. */
static inline int32_t dot_mins8(int16x8_t mins, int16x8_t sums)
{
    return vaddvq_s32(
        vmlal_high_s16(vmull_s16(vget_low_s16(mins), vget_low_s16(sums)), mins, sums));
}

/* Q4_K/Q5_K 12-byte scale packing -> 8 scales and 8 mins as u8 lanes: the
 * values of rt__k4_scales, computed four bytes at a time in 32-bit words. */
static inline void k4_scales_v(const uint8_t *q, uint8x8_t *sc, uint8x8_t *mn)
{
    const uint32_t u0 = rt__ld32(q), u1 = rt__ld32(q + 4), u2 = rt__ld32(q + 8);
    const uint32_t k1 = 0x3f3f3f3fu, k2 = 0x0f0f0f0fu, k3 = 0x03030303u;
    const uint32_t s_lo = u0 & k1, m_lo = u1 & k1;
    const uint32_t s_hi = (u2 & k2) | (((u0 >> 6) & k3) << 4);
    const uint32_t m_hi = ((u2 >> 4) & k2) | (((u1 >> 6) & k3) << 4);
    *sc = vcreate_u8((uint64_t)s_hi << 32 | s_lo);
    *mn = vcreate_u8((uint64_t)m_hi << 32 | m_lo);
}

/* The two f16 values at p -> f32 lanes 0 and 1 (exact, as rt__f16). */
static inline float32x4_t f16x2(const uint8_t *p)
{
    return vcvt_f32_f16(vreinterpret_f16_u32(vdup_n_u32(rt__ld32(p))));
}

/* u8 lanes 0..7 -> int32 lanes (lo: 0..3, hi: 4..7). */
static inline void widen8_u8(uint8x8_t v, int32x4_t *lo, int32x4_t *hi)
{
    const uint16x8_t w = vmovl_u8(v);
    *lo = vreinterpretq_s32_u32(vmovl_u16(vget_low_u16(w)));
    *hi = vreinterpretq_s32_u32(vmovl_high_u16(w));
}

/* Q6_K: 128 elements of one half (ql 64 bytes as l0..l3, qh 32 bytes as
 * h0, h1) -> the eight 16-element sub-blocks as 6-bit values u in [0, 63],
 * in element order. vsli(x, y, 4) = (y << 4) | (x & 0x0F); vsri(x, y, 4) =
 * (x & 0xF0) | (y >> 4). Two instructions per vector: t = h >> 2 serves
 * both the bits 2-3 (low nibble of t) and, as the high nibble of t, the
 * bits 6-7 (already in place, bits 6-7 of t are zero). */
static inline void q6_unpack(uint8x16_t l0, uint8x16_t l1, uint8x16_t l2, uint8x16_t l3,
                             uint8x16_t h0, uint8x16_t h1, uint8x16_t u[8])
{
    const uint8x16_t m6 = vdupq_n_u8(0x3F), m30 = vdupq_n_u8(0x30);
    const uint8x16_t t0 = vshrq_n_u8(h0, 2), t1 = vshrq_n_u8(h1, 2);
    /* (SLI and SRI overwrite their first operand: the reads of l0, l1 first) */
    u[4] = vsriq_n_u8(vandq_u8(h0, m30), l0, 4);
    u[5] = vsriq_n_u8(vandq_u8(h1, m30), l1, 4);
    u[0] = vandq_u8(vsliq_n_u8(l0, h0, 4), m6);
    u[1] = vandq_u8(vsliq_n_u8(l1, h1, 4), m6);
    u[2] = vandq_u8(vsliq_n_u8(l2, t0, 4), m6);
    u[3] = vandq_u8(vsliq_n_u8(l3, t1, 4), m6);
    u[6] = vsriq_n_u8(t0, l2, 4);
    u[7] = vsriq_n_u8(t1, l3, 4);
}

// --- the kernels: baseline (emulated dot products) and SDOT ---

#define RT_KERN_BODY "runtime/rt_kern_neon.inc"
#include "runtime/rt_kern_twice.inc"

#else
/* ISO C forbids an empty translation unit. */
typedef int rt_kern_neon_unused;
#endif /* RT_HAVE_NEON */
