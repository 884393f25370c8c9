/*
 * runtime/rt_kern_gemm.c — the batched k-quant products (rt_gemm_fn): the
 * portable reference of the decoded-block path and the x86-64 AVX2 variant.
 * The decoded block, the decoders and the driver: rt_kern_gemm.h.
 */
#include "runtime/rt_kern_gemm.h"

#if RT_HAVE_X86
#include <immintrin.h>
#endif

#define RT__GEMM_REF(t, mode, bs)                                                                \
    void rt_gemm_##t##_q8_k_ref(RT__GEMM_PARAMS) { RT__GEMM_K_BODY(kdot_ref, dec_##t, mode, bs); }
RT__KTYPES(RT__GEMM_REF)

// --- x86-64: AVX2 ---
#if RT_HAVE_X86

#define RT__AVX2 __attribute__((target("avx2,fma,f16c")))

static inline RT__AVX2 int32_t hsum8_avx2(__m256i v)
{
    __m128i s = _mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
    s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0x4E));
    s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0xB1));
    return _mm_cvtsi128_si32(s);
}


/* The integer vectors of one decoded block against one Q8_K block: isum
 * lanes (sum = isum) and msum lanes (sum = msum). */
static inline RT__AVX2 void kvec_avx2(const struct kdec *k, const struct rt_block_q8_k *a,
                                      __m256i *iv, __m256i *mv)
{
    __m256i acc0 = _mm256_setzero_si256(), acc1 = _mm256_setzero_si256();
    for (int j = 0; j < 8; j += 2) {
        const __m256i u0 = _mm256_load_si256((const __m256i *)(k->u + 32 * j));
        const __m256i u1 = _mm256_load_si256((const __m256i *)(k->u + 32 * j + 32));
        const __m256i a0 = _mm256_loadu_si256((const __m256i *)(a->qs + 32 * j));
        const __m256i a1 = _mm256_loadu_si256((const __m256i *)(a->qs + 32 * j + 32));
        const __m256i s0 = _mm256_load_si256((const __m256i *)(k->scx + 16 * j));
        const __m256i s1 = _mm256_load_si256((const __m256i *)(k->scx + 16 * j + 16));
        acc0 = _mm256_add_epi32(acc0, _mm256_madd_epi16(_mm256_maddubs_epi16(u0, a0), s0));
        acc1 = _mm256_add_epi32(acc1, _mm256_madd_epi16(_mm256_maddubs_epi16(u1, a1), s1));
    }
    *iv = _mm256_add_epi32(acc0, acc1);
    *mv = _mm256_madd_epi16(_mm256_load_si256((const __m256i *)k->mc),
                            _mm256_loadu_si256((const __m256i *)a->bsums));
}

static inline RT__AVX2 void kdot_avx2(const struct kdec *k, const struct rt_block_q8_k *a,
                                      int32_t *isum, int32_t *msum)
{
    __m256i iv, mv;
    kvec_avx2(k, a, &iv, &mv);
    *isum = hsum8_avx2(iv);
    *msum = hsum8_avx2(mv);
}

/* Lane sums of four vectors: [sum v0, sum v1, sum v2, sum v3]. */
static inline RT__AVX2 __m128i hsum4x8_avx2(__m256i v0, __m256i v1, __m256i v2, __m256i v3)
{
    const __m256i q = _mm256_hadd_epi32(_mm256_hadd_epi32(v0, v1), _mm256_hadd_epi32(v2, v3));
    return _mm_add_epi32(_mm256_castsi256_si128(q), _mm256_extracti128_si256(q, 1));
}

/* The AVX2 driver: as RT__GEMM_K_BODY, but four tokens at a time share the
 * reductions and the float combine, lane j = token j (the reference's
 * operations per lane: (da * d) * isum - (da * dmin) * msum, or
 * (da * d) * (isum - msum), then added to the partial of block b % 4).
 * Partials p[r][b % 4][j]; a panel's last tokens (pc % 4) go one by one. */
#define RT__GEMM_AVX2(t, mode, bs)                                                                \
    RT__AVX2 void rt_gemm_##t##_q8_k_avx2(RT__GEMM_PARAMS)                                        \
    {                                                                                             \
        const uint64_t nb = n / RT_QK_K;                                                          \
        const uint8_t *A = act;                                                                   \
        struct kdec *kd = scratch;                                                                \
        float(*p)[RT_NACC][RT_GEMM_PANEL] =                                                       \
            (float(*)[RT_NACC][RT_GEMM_PANEL])((uint8_t *)scratch + sizeof(struct kdec));         \
        for (uint64_t c0 = 0; c0 < nc; c0 += RT_GEMM_PANEL) {                                     \
            const int pc = nc - c0 < RT_GEMM_PANEL ? (int)(nc - c0) : RT_GEMM_PANEL;              \
            memset(p, 0, nr * sizeof *p);                                                         \
            for (uint64_t b = 0; b < nb; b++) {                                                   \
                const uint8_t *a0 = A + c0 * astride + b * sizeof(struct rt_block_q8_k);          \
                for (uint64_t r = 0; r < nr; r++) {                                               \
                    dec_##t##_x((const uint8_t *)w_rows + r * stride + b * (bs), kd);             \
                    float *pr = p[r][b % RT_NACC];                                                \
                    const __m128 d = _mm_set1_ps(kd->d), dmin = _mm_set1_ps(kd->dmin);            \
                    int j = 0;                                                                    \
                    for (; j + 4 <= pc; j += 4) {                                                 \
                        const struct rt_block_q8_k *a[4];                                         \
                        __m256i iv[4], mv[4];                                                     \
                        for (int q = 0; q < 4; q++) {                                             \
                            a[q] = (const struct rt_block_q8_k *)(a0 + (uint64_t)(j + q) * astride); \
                            kvec_avx2(kd, a[q], &iv[q], &mv[q]);                                  \
                        }                                                                         \
                        const __m128i is = hsum4x8_avx2(iv[0], iv[1], iv[2], iv[3]);              \
                        const __m128i ms = hsum4x8_avx2(mv[0], mv[1], mv[2], mv[3]);              \
                        const __m128 da = _mm_setr_ps(a[0]->d, a[1]->d, a[2]->d, a[3]->d);        \
                        __m128 v;                                                                 \
                        if ((mode) == KM_MIN)                                                     \
                            v = _mm_sub_ps(_mm_mul_ps(_mm_mul_ps(da, d), _mm_cvtepi32_ps(is)),    \
                                           _mm_mul_ps(_mm_mul_ps(da, dmin), _mm_cvtepi32_ps(ms))); \
                        else                                                                      \
                            v = _mm_mul_ps(_mm_mul_ps(da, d), _mm_cvtepi32_ps(_mm_sub_epi32(is, ms))); \
                        _mm_storeu_ps(pr + j, _mm_add_ps(_mm_loadu_ps(pr + j), v));               \
                    }                                                                             \
                    for (; j < pc; j++) {                                                         \
                        const struct rt_block_q8_k *a =                                           \
                            (const struct rt_block_q8_k *)(a0 + (uint64_t)j * astride);           \
                        int32_t is, ms;                                                           \
                        kdot_avx2(kd, a, &is, &ms);                                               \
                        kcombine(mode, kd, a->d, is, ms, &pr[j]);                                 \
                    }                                                                             \
                }                                                                                 \
            }                                                                                     \
            for (uint64_t r = 0; r < nr; r++)                                                     \
                for (int j = 0; j < pc; j++) {                                                    \
                    const float q4[RT_NACC] = {p[r][0][j], p[r][1][j], p[r][2][j], p[r][3][j]};   \
                    out[(c0 + (uint64_t)j) * ldo + r] = rt__reduce4(q4);                          \
                }                                                                                 \
        }                                                                                         \
    }

/* The decoders for kdot_avx2 (u, sc, mc and scx filled). Q4_K, Q5_K and
 * Q6_K unpack with vectors; Q2_K and Q3_K use the scalar decoders. */
static inline RT__AVX2 void dec_q2_k_x(const uint8_t *w, struct kdec *k)
{
    dec_q2_k(w, k);
    scx_fill(k);
}
static inline RT__AVX2 void dec_q3_k_x(const uint8_t *w, struct kdec *k)
{
    dec_q3_k(w, k);
    scx_fill(k);
}

/* Q4_K/Q5_K scales: sub-block j (32 elements = chunk j) has one scale S[j]
 * and min M[j] (the 6-bit fields of rt__k4_scales, four bytes per word).
 * The avx2 path reads scx and mc only. */
static inline RT__AVX2 void k45_scales_avx2(const uint8_t *q, struct kdec *k)
{
    const uint32_t u0 = rt__ld32(q), u1 = rt__ld32(q + 4), u2 = rt__ld32(q + 8);
    const uint32_t k1 = 0x3f3f3f3fu, k2 = 0x0f0f0f0fu, k3 = 0x03030303u;
    const uint64_t S = (uint64_t)((u2 & k2) | (((u0 >> 6) & k3) << 4)) << 32 | (u0 & k1);
    const uint64_t M = (uint64_t)(((u2 >> 4) & k2) | (((u1 >> 6) & k3) << 4)) << 32 | (u1 & k1);
    for (int j = 0; j < 8; j++)
        _mm256_store_si256((__m256i *)(k->scx + 16 * j), _mm256_set1_epi16((int16_t)((S >> (8 * j)) & 0xFF)));
    const __m128i m8 = _mm_cvtsi64_si128((long long)M);
    _mm256_store_si256((__m256i *)k->mc, _mm256_cvtepu8_epi16(_mm_unpacklo_epi8(m8, m8)));
}

static inline RT__AVX2 void dec_q4_k_x(const uint8_t *w, struct kdec *k)
{
    const __m256i m4 = _mm256_set1_epi8(0x0F);
    for (int c = 0; c < 4; c++) {
        const __m256i q = _mm256_loadu_si256((const __m256i *)(w + 16 + 32 * c));
        _mm256_store_si256((__m256i *)(k->u + 64 * c), _mm256_and_si256(q, m4));
        _mm256_store_si256((__m256i *)(k->u + 64 * c + 32), _mm256_and_si256(_mm256_srli_epi16(q, 4), m4));
    }
    k45_scales_avx2(w + 4, k);
    k->d = rt__f16(rt__ld16(w));
    k->dmin = rt__f16(rt__ld16(w + 2));
}

static inline RT__AVX2 void dec_q5_k_x(const uint8_t *w, struct kdec *k)
{
    const __m256i m4 = _mm256_set1_epi8(0x0F), b4 = _mm256_set1_epi8(0x10);
    const __m256i qh = _mm256_loadu_si256((const __m256i *)(w + 16));
    for (int c = 0; c < 4; c++) {
        const __m256i q = _mm256_loadu_si256((const __m256i *)(w + 48 + 32 * c));
        /* bit 2c of qh -> 0x10 of the low nibbles, bit 2c + 1 -> of the high */
        const __m256i hl = _mm256_and_si256(_mm256_slli_epi16(_mm256_srli_epi16(qh, 2 * c), 4), b4);
        const __m256i hh = _mm256_and_si256(_mm256_slli_epi16(_mm256_srli_epi16(qh, 2 * c + 1), 4), b4);
        _mm256_store_si256((__m256i *)(k->u + 64 * c), _mm256_or_si256(_mm256_and_si256(q, m4), hl));
        _mm256_store_si256((__m256i *)(k->u + 64 * c + 32),
                           _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(q, 4), m4), hh));
    }
    k45_scales_avx2(w + 4, k);
    k->d = rt__f16(rt__ld16(w));
    k->dmin = rt__f16(rt__ld16(w + 2));
}

static inline RT__AVX2 void dec_q6_k_x(const uint8_t *w, struct kdec *k)
{
    const __m256i m4 = _mm256_set1_epi8(0x0F), m3 = _mm256_set1_epi8(0x03);
    for (int h = 0; h < 2; h++) {
        const __m256i l0 = _mm256_loadu_si256((const __m256i *)(w + 64 * h));
        const __m256i l1 = _mm256_loadu_si256((const __m256i *)(w + 64 * h + 32));
        const __m256i H = _mm256_loadu_si256((const __m256i *)(w + 128 + 32 * h));
        /* (2-bit field of H) << 4: the field is masked first, so the 16-bit
         * shifts move no bits between bytes */
        const __m256i h0 = _mm256_slli_epi16(_mm256_and_si256(H, m3), 4);
        const __m256i h1 = _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(H, 2), m3), 4);
        const __m256i h2 = _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(H, 4), m3), 4);
        const __m256i h3 = _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(H, 6), m3), 4);
        uint8_t *o = k->u + 128 * h;
        _mm256_store_si256((__m256i *)o, _mm256_or_si256(_mm256_and_si256(l0, m4), h0));
        _mm256_store_si256((__m256i *)(o + 32), _mm256_or_si256(_mm256_and_si256(l1, m4), h1));
        _mm256_store_si256((__m256i *)(o + 64),
                           _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(l0, 4), m4), h2));
        _mm256_store_si256((__m256i *)(o + 96),
                           _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(l1, 4), m4), h3));
    }
    const __m256i sc = _mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i *)(w + 192)));
    _mm256_store_si256((__m256i *)k->sc, sc);
    _mm256_store_si256((__m256i *)k->mc, _mm256_slli_epi16(sc, 5)); /* 32 * sc, |.| <= 4096 */
    const int8_t *s8 = (const int8_t *)(w + 192);
    for (int j = 0; j < 8; j++)
        _mm256_store_si256((__m256i *)(k->scx + 16 * j),
                           _mm256_set_m128i(_mm_set1_epi16(s8[2 * j + 1]), _mm_set1_epi16(s8[2 * j])));
    k->d = rt__f16(rt__ld16(w + 208));
    k->dmin = 0.0f;
}

RT__KTYPES(RT__GEMM_AVX2)

#endif /* RT_HAVE_X86 */
