/*
 * runtime/rt_kern_iq1.c — IQ1_S and IQ1_M x Q8_K kernels (docs/formats.md
 * §3.6): the scalar references and, on aarch64, the NEON variants compiled
 * twice from rt_kern_iq1_neon.inc (baseline with an emulated dot product,
 * and +dotprod with SDOT), as rt_kern_neon.c does.
 *
 * A weight is dl * (g + delta) with g in {-1, 0, 1} from quant_iq1s_grid,
 * delta = +-1/8 per 8-group and dl = d * (2m + 1). As ggml's
 * vec_dot_iq1_*_q8_K do, the lattice part and the shift part are summed
 * separately in integers, per super-block:
 *
 *   isum = sum_groups (2m + 1) * sum_j g_j a_j
 *   dsum = sum_groups (2m + 1) * (+-1) * sum_j a_j
 *
 * (IQ1_S takes the 32-element sums of a_j from the activation's bsums; IQ1_M
 * has a shift per 8 elements and sums them itself), then the float combine
 * of rt_kern_int.h, with dw the block's f16 scale and da the activation's d:
 *
 *   p[b % 4] += (dw * da) * ((float)isum + QUANT_IQ1S_DELTA * (float)dsum)
 *
 * Ranges (|a| <= 128): |isum|, |dsum| <= 256 * 15 * 128 < 2^19, so both are
 * exact in int32 in any grouping, and isum + dsum/8 (< 2^20 in steps of
 * 1/8) is exact in float: the NEON results are bit-identical, and the
 * reference equals ggml's formula (d * da) * (sumi + IQ1S_DELTA * sumi1).
 */
#include "runtime/rt_kern_int.h"

#include "quant/quant_grids.h"

/* The 8 lattice values of grid entry g, lanes 0..7. */
static inline void iq1_grid8(int g, int8_t *q)
{
    const uint64_t v = quant_iq1s_grid[g];
    memcpy(q, &v, 8); /* little-endian: byte j = element j */
}

static inline int32_t idot8(const int8_t *q, const int8_t *a)
{
    int32_t s = 0;
    for (int j = 0; j < 8; j++) s += (int32_t)q[j] * a[j];
    return s;
}

/* IQ1_M's f16 super-block scale (shared with rt_kern_x86.c). */
#define iq1m_scale_bits rt__iq1m_scale_bits

void rt_dot_iq1_s_q8_k_ref(uint64_t n, float *out, const void *wv, const void *av)
{
    const uint8_t *w = wv;
    const struct rt_block_q8_k *a = av;
    float p[RT_NACC] = {0};
    int8_t q[8];
    for (uint64_t b = 0; b < n / RT_QK_K; b++, w += RT_BS_IQ1_S) {
        const uint8_t *qs = w + 2;
        const int8_t *q8 = a[b].qs;
        int32_t isum = 0, dsum = 0;
        for (int ib = 0; ib < 8; ib++) {
            const unsigned qh = rt__ld16(w + 34 + 2 * ib);
            const int ls = 2 * ((qh >> 12) & 7) + 1;
            int32_t lsum = 0;
            for (int l = 0; l < 4; l++, q8 += 8) {
                iq1_grid8((int)(qs[4 * ib + l] | (((qh >> (3 * l)) & 7) << 8)), q);
                lsum += idot8(q, q8);
            }
            const int32_t s = a[b].bsums[2 * ib] + a[b].bsums[2 * ib + 1];
            isum += ls * lsum;
            dsum += qh & 0x8000 ? -ls * s : ls * s;
        }
        const float dw = rt__f16(rt__ld16(w));
        p[b % RT_NACC] += (dw * a[b].d) * ((float)isum + QUANT_IQ1S_DELTA * (float)dsum);
    }
    *out = rt__reduce4(p);
}

void rt_dot_iq1_m_q8_k_ref(uint64_t n, float *out, const void *wv, const void *av)
{
    const uint8_t *w = wv;
    const struct rt_block_q8_k *a = av;
    float p[RT_NACC] = {0};
    int8_t q[8];
    for (uint64_t b = 0; b < n / RT_QK_K; b++, w += RT_BS_IQ1_M) {
        const uint8_t *qs = w, *qh = w + 32, *sc = w + 48;
        const int8_t *q8 = a[b].qs;
        int32_t isum = 0, dsum = 0;
        for (int ib = 0; ib < 8; ib++) {
            const unsigned s = rt__ld16(sc + 2 * (ib / 2));
            const int ls[2] = {2 * ((s >> (6 * (ib % 2))) & 7) + 1,
                               2 * ((s >> (6 * (ib % 2) + 3)) & 7) + 1};
            for (int l = 0; l < 4; l++, q8 += 8) {
                const unsigned h = qh[2 * ib + l / 2] >> (4 * (l % 2));
                iq1_grid8((int)(qs[4 * ib + l] | ((h & 7) << 8)), q);
                int32_t asum = 0;
                for (int j = 0; j < 8; j++) asum += q8[j];
                isum += ls[l / 2] * idot8(q, q8);
                dsum += h & 8 ? -ls[l / 2] * asum : ls[l / 2] * asum;
            }
        }
        const float dw = rt__f16(iq1m_scale_bits(sc));
        p[b % RT_NACC] += (dw * a[b].d) * ((float)isum + QUANT_IQ1S_DELTA * (float)dsum);
    }
    *out = rt__reduce4(p);
}

#if RT_HAVE_NEON
#include <arm_neon.h>

/* Grid entries g0 (lanes 0..7) and g1 (lanes 8..15). */
static inline int8x16_t iq1_grid16(int g0, int g1)
{
    return vcombine_s8(vcreate_s8(quant_iq1s_grid[g0]), vcreate_s8(quant_iq1s_grid[g1]));
}

#define RT_KERN_BODY "runtime/rt_kern_iq1_neon.inc"
#include "runtime/rt_kern_twice.inc"

#endif /* RT_HAVE_NEON */
