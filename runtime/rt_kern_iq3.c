/*
 * runtime/rt_kern_iq3.c — IQ3_XXS and IQ3_S x Q8_K kernels
 * (docs/formats.md §3.6): the scalar references and, on aarch64, the NEON
 * variants compiled twice from rt_kern_iq3_neon.inc (baseline with an
 * emulated dot product, and +dotprod with SDOT), as rt_kern_neon.c does.
 *
 * Per 256-element super-block: each 32-group's 32 signed lattice values
 * (grid magnitude, negated where the sign bit is set) dot the activation's
 * int8 values; times the group's odd integer scale 2s+1; summed in int32
 * (bsum). Then the float combine of rt_kern_int.h, with dw the block's f16
 * d and da the activation's f32 d:
 *
 *   p[b % 4] += (dw * da) * (float)bsum
 *   IQ3_XXS: result 0.25f * ((p0 + p1) + (p2 + p3))   (ggml's d/4 factor)
 *   IQ3_S:   result (p0 + p1) + (p2 + p3)
 *
 * Integer ranges (|a| <= 128): IQ3_XXS |bsum| <= 256 * 62 * 128 * 31,
 * IQ3_S 256 * 15 * 128 * 31; both < 2^26, exact in int32, so the NEON sums
 * (any grouping) equal the reference's and the results are bit-identical.
 */
#include "runtime/rt_kern_int.h"

#include "quant/quant_grids.h"

/* The 8 signed values of grid entries g1 (elements 0..3), g2 (4..7) under
 * sign byte s (bit j set: element j negative). */
static inline void iq3_signed8(uint32_t g1, uint32_t g2, unsigned s, int8_t *q)
{
    for (int j = 0; j < 4; j++) {
        const int m1 = (int)((g1 >> (8 * j)) & 0xFF), m2 = (int)((g2 >> (8 * j)) & 0xFF);
        q[j] = (int8_t)((s >> j) & 1 ? -m1 : m1);
        q[j + 4] = (int8_t)((s >> (j + 4)) & 1 ? -m2 : m2);
    }
}

static inline int32_t idot32(const int8_t *q, const int8_t *a)
{
    int32_t s = 0;
    for (int j = 0; j < 32; j++) s += (int32_t)q[j] * a[j];
    return s;
}

void rt_dot_iq3_xxs_q8_k_ref(uint64_t n, float *out, const void *wv, const void *av)
{
    const uint8_t *w = wv;
    const struct rt_block_q8_k *a = av;
    float p[RT_NACC] = {0};
    int8_t q[32];
    for (uint64_t b = 0; b < n / RT_QK_K; b++, w += RT_BS_IQ3_XXS) {
        const uint8_t *qs = w + 2;
        int32_t bsum = 0;
        for (int ib = 0; ib < 8; ib++, qs += 8) {
            const uint32_t aux = rt__ld32(w + 66 + 4 * ib);
            for (int l = 0; l < 4; l++)
                iq3_signed8(quant_iq3xxs_grid[qs[2 * l]], quant_iq3xxs_grid[qs[2 * l + 1]],
                            quant_ksigns_iq2xs[(aux >> (7 * l)) & 127], q + 8 * l);
            bsum += (int32_t)(2 * (aux >> 28) + 1) * idot32(q, a[b].qs + 32 * ib);
        }
        p[b % RT_NACC] += (rt__f16(rt__ld16(w)) * a[b].d) * (float)bsum;
    }
    *out = 0.25f * rt__reduce4(p);
}

void rt_dot_iq3_s_q8_k_ref(uint64_t n, float *out, const void *wv, const void *av)
{
    const uint8_t *w = wv;
    const struct rt_block_q8_k *a = av;
    float p[RT_NACC] = {0};
    int8_t q[32];
    for (uint64_t b = 0; b < n / RT_QK_K; b++, w += RT_BS_IQ3_S) {
        const uint8_t *qs = w + 2, *qh = w + 66, *signs = w + 74, *sc = w + 106;
        int32_t bsum = 0;
        for (int ib = 0; ib < 8; ib++, qs += 8, signs += 4) {
            for (int l = 0; l < 4; l++) {
                const unsigned i1 = qs[2 * l] | (((qh[ib] >> (2 * l)) & 1u) << 8);
                const unsigned i2 = qs[2 * l + 1] | (((qh[ib] >> (2 * l + 1)) & 1u) << 8);
                iq3_signed8(quant_iq3s_grid[i1], quant_iq3s_grid[i2], signs[l], q + 8 * l);
            }
            const int ls = ib % 2 ? sc[ib / 2] >> 4 : sc[ib / 2] & 0x0F;
            bsum += (2 * ls + 1) * idot32(q, a[b].qs + 32 * ib);
        }
        p[b % RT_NACC] += (rt__f16(rt__ld16(w)) * a[b].d) * (float)bsum;
    }
    *out = rt__reduce4(p);
}

#if RT_HAVE_NEON
#include <arm_neon.h>

/* sign byte s0 for lanes 0..7, s1 for lanes 8..15 -> 0xFF where negative */
static inline uint8x16_t iq3_signmask(uint8_t s0, uint8_t s1)
{
    static const uint8_t bitsel[16] = {1, 2, 4, 8, 16, 32, 64, 128, 1, 2, 4, 8, 16, 32, 64, 128};
    return vtstq_u8(vcombine_u8(vdup_n_u8(s0), vdup_n_u8(s1)), vld1q_u8(bitsel));
}

/* 16 magnitudes (four grid entries) with signs applied: (m ^ mask) - mask. */
static inline int8x16_t iq3_apply(uint32_t g0, uint32_t g1, uint32_t g2, uint32_t g3,
                                  uint8x16_t mask)
{
    const uint32_t g[4] = {g0, g1, g2, g3};
    const uint8x16_t m = vreinterpretq_u8_u32(vld1q_u32(g));
    return vreinterpretq_s8_u8(vsubq_u8(veorq_u8(m, mask), mask));
}

#define RT_KERN_BODY "runtime/rt_kern_iq3_neon.inc"
#include "runtime/rt_kern_twice.inc"

#endif /* RT_HAVE_NEON */
