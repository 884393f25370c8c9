/*
 * runtime/rt_kern_kquants.c — scalar references of the k-quant x Q8_K
 * kernels (docs/formats.md §3.4). One 256-element super-block at a time: decode
 * the quants to int8, integer dot per sub-block, times the sub-block's
 * integer scale, summed in int32 (isum); the mins of Q2_K/Q4_K/Q5_K go
 * through the activation's bsums (summs). Then the float combine shared by
 * every variant (rt_kern_int.h), with da the activation's f32 d:
 *
 *   Q2_K Q4_K Q5_K:  p[b % 4] += (da * dw) * (float)isum - (da * dmin) * (float)summs
 *   Q3_K Q6_K:       p[b % 4] += (da * dw) * (float)isum
 *
 * Integer ranges (|a| <= 128): Q2_K |isum| <= 256*3*15*128, Q3_K 256*4*32*128,
 * Q4_K 256*15*63*128, Q5_K 256*31*63*128 (< 2^27), Q6_K 256*32*128*128
 * (< 2^28); summs <= 16*63*2*128*16. All exact in int32.
 */
#include "runtime/rt_kern_int.h"

static inline int32_t idot(const int8_t *q, const int8_t *a, int len)
{
    int32_t s = 0;
    for (int j = 0; j < len; j++) s += (int32_t)q[j] * a[j];
    return s;
}

/* The 2-bit plane layout of Q2_K / Q3_K: element 128h + 32k + l is bits
 * 2k..2k+1 of qs[32h + l]. */
static inline void unpack_2bit(const uint8_t *qs, int8_t q[256])
{
    for (int h = 0; h < 2; h++)
        for (int k = 0; k < 4; k++)
            for (int l = 0; l < 32; l++) q[128 * h + 32 * k + l] = (int8_t)((qs[32 * h + l] >> (2 * k)) & 3);
}

void rt_dot_q2_k_q8_k_ref(uint64_t n, float *out, const void *wv, const void *av)
{
    const uint8_t *w = wv;
    const struct rt_block_q8_k *a = av;
    float p[RT_NACC] = {0};
    int8_t q[256];
    for (uint64_t b = 0; b < n / 256; b++, w += RT_BS_Q2_K) {
        const uint8_t *sc = w;
        unpack_2bit(w + 16, q);
        int32_t isum = 0, summs = 0;
        for (int s = 0; s < 16; s++) {
            isum += (sc[s] & 0x0F) * idot(q + 16 * s, a[b].qs + 16 * s, 16);
            summs += (sc[s] >> 4) * a[b].bsums[s];
        }
        const float dall = a[b].d * rt__f16(rt__ld16(w + 80));
        const float dmin = a[b].d * rt__f16(rt__ld16(w + 82));
        p[b % RT_NACC] += dall * (float)isum - dmin * (float)summs;
    }
    *out = rt__reduce4(p);
}

void rt_dot_q3_k_q8_k_ref(uint64_t n, float *out, const void *wv, const void *av)
{
    const uint8_t *w = wv;
    const struct rt_block_q8_k *a = av;
    float p[RT_NACC] = {0};
    int8_t q[256], sc[16];
    for (uint64_t b = 0; b < n / 256; b++, w += RT_BS_Q3_K) {
        const uint8_t *hm = w;
        unpack_2bit(w + 32, q);
        for (int e = 0; e < 256; e++) /* minus 4 where the hmask bit is clear */
            q[e] = (int8_t)(q[e] - 4 + (((hm[e % 32] >> (e / 32)) & 1) << 2));
        rt__k3_scales(w + 96, sc);
        int32_t isum = 0;
        for (int s = 0; s < 16; s++) isum += sc[s] * idot(q + 16 * s, a[b].qs + 16 * s, 16);
        const float d = a[b].d * rt__f16(rt__ld16(w + 108));
        p[b % RT_NACC] += d * (float)isum;
    }
    *out = rt__reduce4(p);
}

/* Q4_K / Q5_K: sub-block scales S and mins M; quants already in q. */
static inline void k45_sums(const int8_t q[256], const uint8_t *sc12, const struct rt_block_q8_k *a,
                            int32_t *isum, int32_t *summs)
{
    uint8_t S[8], M[8];
    rt__k4_scales(sc12, S, M);
    int32_t is = 0, ms = 0;
    for (int s = 0; s < 8; s++) {
        is += S[s] * idot(q + 32 * s, a->qs + 32 * s, 32);
        ms += M[s] * (a->bsums[2 * s] + a->bsums[2 * s + 1]);
    }
    *isum = is;
    *summs = ms;
}

void rt_dot_q4_k_q8_k_ref(uint64_t n, float *out, const void *wv, const void *av)
{
    const uint8_t *w = wv;
    const struct rt_block_q8_k *a = av;
    float p[RT_NACC] = {0};
    int8_t q[256];
    for (uint64_t b = 0; b < n / 256; b++, w += RT_BS_Q4_K) {
        const uint8_t *qs = w + 16;
        for (int c = 0; c < 4; c++)
            for (int l = 0; l < 32; l++) {
                q[64 * c + l] = (int8_t)(qs[32 * c + l] & 0x0F);
                q[64 * c + 32 + l] = (int8_t)(qs[32 * c + l] >> 4);
            }
        int32_t isum, summs;
        k45_sums(q, w + 4, &a[b], &isum, &summs);
        const float dall = a[b].d * rt__f16(rt__ld16(w));
        const float dmin = a[b].d * rt__f16(rt__ld16(w + 2));
        p[b % RT_NACC] += dall * (float)isum - dmin * (float)summs;
    }
    *out = rt__reduce4(p);
}

void rt_dot_q5_k_q8_k_ref(uint64_t n, float *out, const void *wv, const void *av)
{
    const uint8_t *w = wv;
    const struct rt_block_q8_k *a = av;
    float p[RT_NACC] = {0};
    int8_t q[256];
    for (uint64_t b = 0; b < n / 256; b++, w += RT_BS_Q5_K) {
        const uint8_t *qh = w + 16, *qs = w + 48;
        for (int c = 0; c < 4; c++)
            for (int l = 0; l < 32; l++) {
                q[64 * c + l] = (int8_t)((qs[32 * c + l] & 0x0F) | (((qh[l] >> (2 * c)) & 1) << 4));
                q[64 * c + 32 + l] = (int8_t)((qs[32 * c + l] >> 4) | (((qh[l] >> (2 * c + 1)) & 1) << 4));
            }
        int32_t isum, summs;
        k45_sums(q, w + 4, &a[b], &isum, &summs);
        const float dall = a[b].d * rt__f16(rt__ld16(w));
        const float dmin = a[b].d * rt__f16(rt__ld16(w + 2));
        p[b % RT_NACC] += dall * (float)isum - dmin * (float)summs;
    }
    *out = rt__reduce4(p);
}

void rt_dot_q6_k_q8_k_ref(uint64_t n, float *out, const void *wv, const void *av)
{
    const uint8_t *w = wv;
    const struct rt_block_q8_k *a = av;
    float p[RT_NACC] = {0};
    int8_t q[256];
    for (uint64_t b = 0; b < n / 256; b++, w += RT_BS_Q6_K) {
        const uint8_t *ql = w, *qh = w + 128;
        const int8_t *sc = (const int8_t *)(w + 192);
        for (int h = 0; h < 2; h++)
            for (int l = 0; l < 32; l++) {
                const uint8_t *L = ql + 64 * h, H = qh[32 * h + l];
                int8_t *o = q + 128 * h;
                o[l] = (int8_t)(((L[l] & 0x0F) | ((H & 3) << 4)) - 32);
                o[l + 32] = (int8_t)(((L[l + 32] & 0x0F) | (((H >> 2) & 3) << 4)) - 32);
                o[l + 64] = (int8_t)(((L[l] >> 4) | (((H >> 4) & 3) << 4)) - 32);
                o[l + 96] = (int8_t)(((L[l + 32] >> 4) | (((H >> 6) & 3) << 4)) - 32);
            }
        int32_t isum = 0;
        for (int s = 0; s < 16; s++) isum += sc[s] * idot(q + 16 * s, a[b].qs + 16 * s, 16);
        const float d = a[b].d * rt__f16(rt__ld16(w + 208));
        p[b % RT_NACC] += d * (float)isum;
    }
    *out = rt__reduce4(p);
}

/* IQ4_XS (docs/formats.md §3.5): f16 d, u16 scales_h, u8 scales_l[4], qs[128];
 * sub-block ib (32 values) has the 6-bit scale
 * (scales_l[ib/2] >> 4(ib%2) & 15) | ((scales_h >> 2ib) & 3) << 4, minus 32,
 * and IQ4_NL levels in nibble pairs (byte j: elements j and j + 16). The
 * integer sum over a super-block is exact in int32 (8 * 32 * 127 * 127 * 32). */
void rt_dot_iq4_xs_q8_k_ref(uint64_t n, float *out, const void *wv, const void *av)
{
    const uint8_t *w = wv;
    const struct rt_block_q8_k *a = av;
    float p[RT_NACC] = {0};
    int8_t q[32];
    for (uint64_t b = 0; b < n / RT_QK_K; b++, w += RT_BS_IQ4_XS) {
        const unsigned sh = rt__ld16(w + 2);
        const uint8_t *sl = w + 4, *qs = w + 8;
        int32_t isum = 0;
        for (int ib = 0; ib < 8; ib++, qs += 16) {
            const int ls = (((sl[ib / 2] >> (4 * (ib % 2))) & 0x0F) | (((sh >> (2 * ib)) & 3) << 4)) - 32;
            for (int j = 0; j < 16; j++) {
                q[j] = rt__iq4nl_values[qs[j] & 0x0F];
                q[j + 16] = rt__iq4nl_values[qs[j] >> 4];
            }
            isum += ls * idot(q, a[b].qs + 32 * ib, 32);
        }
        p[b % RT_NACC] += (rt__f16(rt__ld16(w)) * a[b].d) * (float)isum;
    }
    *out = rt__reduce4(p);
}
