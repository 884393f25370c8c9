/*
 * runtime/rt_kern_iq2.c — IQ2_XXS, IQ2_XS and IQ2_S x Q8_K kernels
 * (docs/formats.md §3.6): the scalar references and, on aarch64, the NEON
 * variants compiled twice from rt_kern_iq2_neon.inc (baseline with an
 * emulated dot product, and +dotprod with SDOT), as rt_kern_neon.c does.
 *
 * Per 256-element super-block: each 8-vector's signed lattice values (grid
 * magnitude 8/25/43, negated where its sign bit is set) dot the
 * activation's int8 values; each 32-group (IQ2_XXS) or 16-group (IQ2_XS,
 * IQ2_S) sum times the odd integer scale 2s+1; summed in int32 (bsum).
 * Then the float combine of rt_kern_int.h, with dw the block's f16 d and
 * da the activation's f32 d, and ggml's factor 1/8 (d * (0.5 + s) / 4 =
 * d * (2s + 1) / 8) applied once at the end:
 *
 *   p[b % 4] += (dw * da) * (float)bsum;   result 0.125f * ((p0 + p1) + (p2 + p3))
 *
 * Integer range (|a| <= 128): |bsum| <= 256 * 43 * 128 * 31 < 2^26, exact
 * in int32, so the NEON sums (any grouping) equal the reference's and the
 * results are bit-identical.
 */
#include "runtime/rt_kern_int.h"

#include "quant/quant_grids.h"

// --- scalar references ---

/* sum_j (+-g_j) * a_j over one 8-vector: grid entry g, sign byte s (bit j
 * set: element j negative). */
static inline int32_t dot8(uint64_t g, unsigned s, const int8_t *a)
{
    int32_t sum = 0;
    for (int j = 0; j < 8; j++) {
        const int32_t v = (int32_t)((g >> (8 * j)) & 0xFF) * a[j];
        sum += (s >> j) & 1 ? -v : v;
    }
    return sum;
}

void rt_dot_iq2_xxs_q8_k_ref(uint64_t n, float *out, const void *wv, const void *av)
{
    const uint8_t *w = wv;
    const struct rt_block_q8_k *a = av;
    float p[RT_NACC] = {0};
    for (uint64_t b = 0; b < n / RT_QK_K; b++, w += RT_BS_IQ2_XXS) {
        const int8_t *q8 = a[b].qs;
        int32_t bsum = 0;
        for (int ib = 0; ib < 8; ib++) {
            const uint8_t *q = w + 2 + 8 * ib;
            const uint32_t aux = rt__ld32(q + 4);
            int32_t sumi = 0;
            for (int l = 0; l < 4; l++, q8 += 8)
                sumi += dot8(quant_iq2xxs_grid[q[l]], quant_ksigns_iq2xs[(aux >> (7 * l)) & 127], q8);
            bsum += sumi * (int32_t)(2 * (aux >> 28) + 1);
        }
        p[b % RT_NACC] += (rt__f16(rt__ld16(w)) * a[b].d) * (float)bsum;
    }
    *out = 0.125f * rt__reduce4(p);
}

void rt_dot_iq2_xs_q8_k_ref(uint64_t n, float *out, const void *wv, const void *av)
{
    const uint8_t *w = wv;
    const struct rt_block_q8_k *a = av;
    float p[RT_NACC] = {0};
    for (uint64_t b = 0; b < n / RT_QK_K; b++, w += RT_BS_IQ2_XS) {
        const int8_t *q8 = a[b].qs;
        int32_t bsum = 0;
        for (int g = 0; g < 16; g++) { /* 16-groups: scale nibble g % 2 of byte g / 2 */
            int32_t sumi = 0;
            for (int l = 0; l < 2; l++, q8 += 8) {
                const unsigned v = rt__ld16(w + 2 + 4 * g + 2 * l);
                sumi += dot8(quant_iq2xs_grid[v & 511], quant_ksigns_iq2xs[v >> 9], q8);
            }
            bsum += sumi * (int32_t)(2 * ((w[66 + g / 2] >> (4 * (g % 2))) & 0xF) + 1);
        }
        p[b % RT_NACC] += (rt__f16(rt__ld16(w)) * a[b].d) * (float)bsum;
    }
    *out = 0.125f * rt__reduce4(p);
}

void rt_dot_iq2_s_q8_k_ref(uint64_t n, float *out, const void *wv, const void *av)
{
    const uint8_t *w = wv;
    const struct rt_block_q8_k *a = av;
    float p[RT_NACC] = {0};
    for (uint64_t b = 0; b < n / RT_QK_K; b++, w += RT_BS_IQ2_S) {
        const uint8_t *qs = w + 2, *signs = w + 34, *qh = w + 66, *sc = w + 74;
        const int8_t *q8 = a[b].qs;
        int32_t bsum = 0;
        for (int g = 0; g < 16; g++) {
            int32_t sumi = 0;
            for (int l = 0; l < 2; l++, q8 += 8) {
                const int i8 = 2 * g + l; /* 8-vector index; high grid bits 2*(i8%4) of qh[i8/4] */
                const unsigned gi = qs[i8] | (((unsigned)qh[i8 / 4] >> (2 * (i8 % 4))) & 3) << 8;
                sumi += dot8(quant_iq2s_grid[gi], signs[i8], q8);
            }
            bsum += sumi * (int32_t)(2 * ((sc[g / 2] >> (4 * (g % 2))) & 0xF) + 1);
        }
        p[b % RT_NACC] += (rt__f16(rt__ld16(w)) * a[b].d) * (float)bsum;
    }
    *out = 0.125f * rt__reduce4(p);
}

// --- NEON ---

#if RT_HAVE_NEON
#include <arm_neon.h>

/* Two 8-vectors as 16 signed int8 lanes: grid entries g0 (lanes 0..7) and
 * g1 (8..15) negated where sign bytes s0 / s1 have the lane's bit set. */
static inline int8x16_t iq2_signed16(uint64_t g0, uint64_t g1, unsigned s0, unsigned s1)
{
    static const uint8_t bitsel[16] = {1, 2, 4, 8, 16, 32, 64, 128, 1, 2, 4, 8, 16, 32, 64, 128};
    const int8x16_t g = vreinterpretq_s8_u64(vcombine_u64(vcreate_u64(g0), vcreate_u64(g1)));
    const uint8x16_t neg =
        vtstq_u8(vcombine_u8(vdup_n_u8((uint8_t)s0), vdup_n_u8((uint8_t)s1)), vld1q_u8(bitsel));
    return vbslq_s8(neg, vnegq_s8(g), g);
}

#define RT_KERN_BODY "runtime/rt_kern_iq2_neon.inc"
#include "runtime/rt_kern_twice.inc"

#endif /* RT_HAVE_NEON */
