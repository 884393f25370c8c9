/*
 * runtime/rt_kern_legacy.c — scalar references of the 32-element block
 * kernels (docs/formats.md §3.3, §3.5): Q8_0, Q4_0, Q5_0, IQ4_NL x Q8_0 and
 * Q4_1, Q5_1 x Q8_1. One block at a time: decode the 32 weights to small
 * integers, integer dot with the activation block, then the float combine
 * that every variant shares (rt_kern_int.h):
 *
 *   x Q8_0:  p[b % 4] += (dw * da) * (float)isum
 *   x Q8_1:  p[b % 4] += (dw * da) * (float)isum + mw * sa
 *
 * where dw, mw are the weight block's f16 scale and min, da, sa the
 * activation's f16 d and s. |isum| <= 32 * 128 * 128, exact in int32.
 */
#include "runtime/rt_kern_int.h"

static inline int32_t idot32(const int8_t *q, const int8_t *a)
{
    int32_t s = 0;
    for (int j = 0; j < 32; j++) s += (int32_t)q[j] * a[j];
    return s;
}

/* Nibble pairs: byte j holds element j (low) and j + 16 (high). */
static inline void unpack_nibbles(const uint8_t *qs, int8_t q[32], int bias)
{
    for (int j = 0; j < 16; j++) {
        q[j] = (int8_t)((qs[j] & 0x0F) - bias);
        q[j + 16] = (int8_t)((qs[j] >> 4) - bias);
    }
}

/* Q5 packing: nibble pairs plus bit k of the little-endian u32 qh. */
static inline void unpack_q5(const uint8_t *qh4, const uint8_t *qs, int8_t q[32], int bias)
{
    const uint32_t qh = rt__ld32(qh4);
    for (int j = 0; j < 16; j++) {
        q[j] = (int8_t)(((qs[j] & 0x0F) | (((qh >> j) & 1) << 4)) - bias);
        q[j + 16] = (int8_t)(((qs[j] >> 4) | (((qh >> (j + 16)) & 1) << 4)) - bias);
    }
}

void rt_dot_q8_0_q8_0_ref(uint64_t n, float *out, const void *wv, const void *av)
{
    const uint8_t *w = wv;
    const struct rt_block_q8_0 *a = av;
    float p[RT_NACC] = {0};
    for (uint64_t b = 0; b < n / 32; b++, w += RT_BS_Q8_0) {
        const int32_t isum = idot32((const int8_t *)(w + 2), a[b].qs);
        p[b % RT_NACC] += (rt__f16(rt__ld16(w)) * rt__f16(a[b].d)) * (float)isum;
    }
    *out = rt__reduce4(p);
}

void rt_dot_q4_0_q8_0_ref(uint64_t n, float *out, const void *wv, const void *av)
{
    const uint8_t *w = wv;
    const struct rt_block_q8_0 *a = av;
    float p[RT_NACC] = {0};
    int8_t q[32];
    for (uint64_t b = 0; b < n / 32; b++, w += RT_BS_Q4_0) {
        unpack_nibbles(w + 2, q, 8);
        const int32_t isum = idot32(q, a[b].qs);
        p[b % RT_NACC] += (rt__f16(rt__ld16(w)) * rt__f16(a[b].d)) * (float)isum;
    }
    *out = rt__reduce4(p);
}

void rt_dot_iq4_nl_q8_0_ref(uint64_t n, float *out, const void *wv, const void *av)
{
    const uint8_t *w = wv;
    const struct rt_block_q8_0 *a = av;
    float p[RT_NACC] = {0};
    int8_t q[32];
    for (uint64_t b = 0; b < n / 32; b++, w += RT_BS_IQ4_NL) {
        for (int j = 0; j < 16; j++) {
            q[j] = rt__iq4nl_values[w[2 + j] & 0x0F];
            q[j + 16] = rt__iq4nl_values[w[2 + j] >> 4];
        }
        const int32_t isum = idot32(q, a[b].qs);
        p[b % RT_NACC] += (rt__f16(rt__ld16(w)) * rt__f16(a[b].d)) * (float)isum;
    }
    *out = rt__reduce4(p);
}

void rt_dot_q5_0_q8_0_ref(uint64_t n, float *out, const void *wv, const void *av)
{
    const uint8_t *w = wv;
    const struct rt_block_q8_0 *a = av;
    float p[RT_NACC] = {0};
    int8_t q[32];
    for (uint64_t b = 0; b < n / 32; b++, w += RT_BS_Q5_0) {
        unpack_q5(w + 2, w + 6, q, 16);
        const int32_t isum = idot32(q, a[b].qs);
        p[b % RT_NACC] += (rt__f16(rt__ld16(w)) * rt__f16(a[b].d)) * (float)isum;
    }
    *out = rt__reduce4(p);
}

void rt_dot_q4_1_q8_1_ref(uint64_t n, float *out, const void *wv, const void *av)
{
    const uint8_t *w = wv;
    const struct rt_block_q8_1 *a = av;
    float p[RT_NACC] = {0};
    int8_t q[32];
    for (uint64_t b = 0; b < n / 32; b++, w += RT_BS_Q4_1) {
        unpack_nibbles(w + 4, q, 0);
        const int32_t isum = idot32(q, a[b].qs);
        p[b % RT_NACC] += (rt__f16(rt__ld16(w)) * rt__f16(a[b].d)) * (float)isum +
                          rt__f16(rt__ld16(w + 2)) * rt__f16(a[b].s);
    }
    *out = rt__reduce4(p);
}

void rt_dot_q5_1_q8_1_ref(uint64_t n, float *out, const void *wv, const void *av)
{
    const uint8_t *w = wv;
    const struct rt_block_q8_1 *a = av;
    float p[RT_NACC] = {0};
    int8_t q[32];
    for (uint64_t b = 0; b < n / 32; b++, w += RT_BS_Q5_1) {
        unpack_q5(w + 4, w + 8, q, 0);
        const int32_t isum = idot32(q, a[b].qs);
        p[b % RT_NACC] += (rt__f16(rt__ld16(w)) * rt__f16(a[b].d)) * (float)isum +
                          rt__f16(rt__ld16(w + 2)) * rt__f16(a[b].s);
    }
    *out = rt__reduce4(p);
}
