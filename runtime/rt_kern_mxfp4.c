/*
 * runtime/rt_kern_mxfp4.c — MXFP4 x Q8_0 mat-vec kernels (gpt-oss experts;
 * docs/formats.md §3.7): the scalar reference, AVX2 and NEON.
 *
 * As ggml's vec_dot_mxfp4_q8_0, the activation is quantized to Q8_0 and a
 * block's 32 doubled E2M1 levels (int8, |q| <= 12) are dotted with its 32
 * int8 activations in integers; the block's float is then the product of
 * the half-E8M0 scale and the activation's f16 scale times that integer.
 * The float combine is the one every 32-element kernel here shares
 * (rt_kern_legacy.c): block b's value goes to partial b % 4,
 *
 *   p[b % 4] += (dw * da) * (float)isum,   result (p0 + p1) + (p2 + p3)
 *
 * dw = 2^(e-128) (ggml's GGML_E8M0_TO_FP32_HALF, quant__e8m0_half), da the
 * activation's f16 d. The integer sums are exact in every variant (|isum| <=
 * 32 * 12 * 128; AVX2 multiplies the levels plus 12 by VPMADDUBSW and
 * subtracts 12 x the activations' sum, NEON multiplies into 16 bits, so an
 * activation of -128 is exact too) and the float operations are the
 * reference's, in its order: the same bits on every CPU. The SIMD variants
 * vectorize the scales (the E8M0 exponents and the activations' f16 d of
 * four or eight blocks at once, bit-equal to e8m0_half and rt__f16).
 */
#include "runtime/rt_kern_int.h"

#define RT_BS_MXFP4 17

/* ggml's kvalues_mxfp4 (equal to quant's table: check_rt_kernels compares
 * the kernels with quant's dequantization) */
static const int8_t mx_values[16] = {0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12};

/* 2^(e-128): the float of exponent field e-1, or the subnormals 2^-127
 * (e = 1) and 2^-128 (e = 0) */
static inline float e8m0_half(uint8_t e)
{
    const uint32_t u = e < 2 ? 0x00200000u << e : (uint32_t)(e - 1) << 23;
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

void rt_dot_mxfp4_q8_0_ref(uint64_t n, float *out, const void *wv, const void *av)
{
    const uint8_t *w = wv;
    const struct rt_block_q8_0 *a = av;
    float p[RT_NACC] = {0};
    for (uint64_t b = 0; b < n / 32; b++, w += RT_BS_MXFP4) {
        int32_t isum = 0;
        for (int j = 0; j < 16; j++) {
            isum += (int32_t)mx_values[w[1 + j] & 0x0F] * a[b].qs[j];
            isum += (int32_t)mx_values[w[1 + j] >> 4] * a[b].qs[j + 16];
        }
        p[b % RT_NACC] += (e8m0_half(w[0]) * rt__f16(a[b].d)) * (float)isum;
    }
    *out = rt__reduce4(p);
}

#if RT_HAVE_X86
#include <immintrin.h>

#if defined(__clang__)
#pragma clang attribute push(__attribute__((target("avx2,fma,f16c"))), apply_to = function)
#else
#pragma GCC push_options
#pragma GCC target("avx2,fma,f16c")
#endif

/* ggml's levels plus 12, as unsigned bytes: {12..24, 12..0} */
static const uint8_t mx_values12[16] = {12, 13, 14, 15, 16, 18, 20, 24, 12, 11, 10, 9, 8, 6, 4, 0};

/* A block's 32 levels plus 12 (0..24) as unsigned bytes, element j in byte j. */
static inline __m256i lev12_avx2(const uint8_t *w)
{
    const __m128i tab = _mm_loadu_si128((const __m128i *)mx_values12);
    const __m128i qs = _mm_loadu_si128((const __m128i *)(w + 1));
    const __m128i m4 = _mm_set1_epi8(0x0F);
    const __m128i lo = _mm_shuffle_epi8(tab, _mm_and_si128(qs, m4));
    const __m128i hi = _mm_shuffle_epi8(tab, _mm_and_si128(_mm_srli_epi16(qs, 4), m4));
    return _mm256_inserti128_si256(_mm256_castsi128_si256(lo), hi, 1);
}

/* The integer dot of one block as eight int32 lanes: sum (q + 12) a - 12 a
 * by VPMADDUBSW (unsigned 0..24 times any int8: pairs within +-6144, no
 * saturation; 12 a pairs within +-3072), the difference of the int16 pairs
 * exact (|q a| pairs <= 3072), then VPMADDWD by 1. Any activation byte,
 * -128 included, gives the reference's integer. */
static inline __m256i dot12_avx2(__m256i w12, const int8_t *a)
{
    const __m256i av = _mm256_loadu_si256((const __m256i *)a);
    const __m256i p = _mm256_sub_epi16(_mm256_maddubs_epi16(w12, av),
                                       _mm256_maddubs_epi16(_mm256_set1_epi8(12), av));
    return _mm256_madd_epi16(p, _mm256_set1_epi16(1));
}

static inline __m256i blk8_avx2(const uint8_t *w, const int8_t *a)
{
    return dot12_avx2(lev12_avx2(w), a);
}

/* [sum s0, sum s1, sum s2, sum s3] (exact integer adds in any grouping) */
static inline __m128i hsum4_avx2(__m256i s0, __m256i s1, __m256i s2, __m256i s3)
{
    const __m256i t = _mm256_hadd_epi32(_mm256_hadd_epi32(s0, s1), _mm256_hadd_epi32(s2, s3));
    return _mm_add_epi32(_mm256_castsi256_si128(t), _mm256_extracti128_si256(t, 1));
}

static inline int32_t blk_avx2(const uint8_t *w, const int8_t *a)
{
    const __m256i s = blk8_avx2(w, a);
    const __m128i h = _mm_add_epi32(_mm256_castsi256_si128(s), _mm256_extracti128_si256(s, 1));
    const __m128i h2 = _mm_add_epi32(h, _mm_shuffle_epi32(h, 0x4E));
    return _mm_cvtsi128_si32(_mm_add_epi32(h2, _mm_shuffle_epi32(h2, 0xB1)));
}

/* Eight blocks' 32 levels plus 12, each as lev12_avx2's: the 16 bytes
 * broadcast to both halves, the upper half's dwords shifted right by 4
 * (VPSRLVD), the nibbles looked up in the table repeated in both halves. */
static inline __m256i lev12b_avx2(const uint8_t *w, __m256i tab, __m256i sh, __m256i m4)
{
    const __m256i qs = _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)(w + 1)));
    return _mm256_shuffle_epi8(tab, _mm256_and_si256(_mm256_srlv_epi32(qs, sh), m4));
}

/* The eight scales 2^(e-128) of blocks w, w + 17, ..., w + 119 (the first
 * byte of each dword gathered), as e8m0_half: (e - 1) << 23, or 2^21 << e
 * for e < 2. */
static inline __m256 e8m0x8_avx2(const uint8_t *w)
{
    const __m256i off = _mm256_setr_epi32(0, 17, 34, 51, 68, 85, 102, 119);
    const __m256i e = _mm256_and_si256(_mm256_i32gather_epi32((const int *)(const void *)w, off, 1),
                                       _mm256_set1_epi32(0xFF));
    const __m256i one = _mm256_set1_epi32(1);
    const __m256i nrm = _mm256_slli_epi32(_mm256_sub_epi32(e, one), 23);
    const __m256i sub = _mm256_sllv_epi32(_mm256_set1_epi32(0x00200000), e);
    return _mm256_castsi256_ps(_mm256_blendv_epi8(sub, nrm, _mm256_cmpgt_epi32(e, one)));
}

/* The eight f16 scales of activation blocks a .. a + 7 as floats (the
 * first two bytes of each gathered dword). */
static inline __m256 q8d8_avx2(const struct rt_block_q8_0 *a)
{
    const __m256i off = _mm256_setr_epi32(0, 34, 68, 102, 136, 170, 204, 238);
    const __m256i g = _mm256_i32gather_epi32((const int *)(const void *)a, off, 1);
    const __m256i lo = _mm256_shuffle_epi8(
        g, _mm256_setr_epi8(0, 1, 4, 5, 8, 9, 12, 13, -1, -1, -1, -1, -1, -1, -1, -1, 0, 1, 4, 5, 8, 9,
                            12, 13, -1, -1, -1, -1, -1, -1, -1, -1));
    return _mm256_cvtph_ps(_mm256_castsi256_si128(_mm256_permute4x64_epi64(lo, 0x08)));
}

/* [sum s0 .. sum s7] (exact integer adds in any grouping) */
static inline __m256i hsum8_avx2(const __m256i s[8])
{
    const __m256i t0 = _mm256_hadd_epi32(_mm256_hadd_epi32(s[0], s[1]), _mm256_hadd_epi32(s[2], s[3]));
    const __m256i t1 = _mm256_hadd_epi32(_mm256_hadd_epi32(s[4], s[5]), _mm256_hadd_epi32(s[6], s[7]));
    return _mm256_add_epi32(_mm256_permute2x128_si256(t0, t1, 0x20),
                            _mm256_permute2x128_si256(t0, t1, 0x31));
}

/* The end of a row's mat-vec from block b on: one group of four (the
 * scales of e8m0x8_avx2 and q8d8_avx2 at 128 bits), then block by block;
 * acc holds the four float partials so far. */
static inline float mx_finish_avx2(uint64_t b, uint64_t nb, const uint8_t *w,
                                   const struct rt_block_q8_0 *a, __m128 acc)
{
    if (b + 4 <= nb) {
        const __m128i e = _mm_and_si128(
            _mm_i32gather_epi32((const int *)(const void *)w, _mm_setr_epi32(0, 17, 34, 51), 1),
            _mm_set1_epi32(0xFF));
        const __m128i one = _mm_set1_epi32(1);
        const __m128i nrm = _mm_slli_epi32(_mm_sub_epi32(e, one), 23);
        const __m128i sub = _mm_sllv_epi32(_mm_set1_epi32(0x00200000), e);
        const __m128 dw = _mm_castsi128_ps(_mm_blendv_epi8(sub, nrm, _mm_cmpgt_epi32(e, one)));
        const __m128i g = _mm_i32gather_epi32((const int *)(const void *)(a + b),
                                              _mm_setr_epi32(0, 34, 68, 102), 1);
        const __m128 da = _mm_cvtph_ps(
            _mm_shuffle_epi8(g, _mm_setr_epi8(0, 1, 4, 5, 8, 9, 12, 13, -1, -1, -1, -1, -1, -1, -1, -1)));
        const __m128i is = hsum4_avx2(blk8_avx2(w, a[b].qs),
                                      blk8_avx2(w + RT_BS_MXFP4, a[b + 1].qs),
                                      blk8_avx2(w + 2 * RT_BS_MXFP4, a[b + 2].qs),
                                      blk8_avx2(w + 3 * RT_BS_MXFP4, a[b + 3].qs));
        acc = _mm_add_ps(acc, _mm_mul_ps(_mm_mul_ps(dw, da), _mm_cvtepi32_ps(is)));
        b += 4;
        w += 4 * RT_BS_MXFP4;
    }
    float p[RT_NACC];
    _mm_storeu_ps(p, acc);
    for (; b < nb; b++, w += RT_BS_MXFP4)
        p[b % RT_NACC] += (e8m0_half(w[0]) * rt__f16(a[b].d)) * (float)blk_avx2(w, a[b].qs);
    return rt__reduce4(p);
}

/* The mat-vec, eight blocks a step: blocks b .. b + 3 then b + 4 .. b + 7
 * added to the four float partials in that order, so each partial sees the
 * reference's additions in the reference's order. */
void rt_dot_mxfp4_q8_0_avx2(uint64_t n, float *out, const void *wv, const void *av)
{
    const uint8_t *w = wv;
    const struct rt_block_q8_0 *a = av;
    const uint64_t nb = n / 32;
    __m128 acc = _mm_setzero_ps();
    uint64_t b = 0;
    if (nb >= 8) { /* the constants only where a group of eight follows */
        const __m256i tab = _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)mx_values12));
        const __m256i sh = _mm256_setr_epi32(0, 0, 0, 0, 4, 4, 4, 4);
        const __m256i m4 = _mm256_set1_epi8(0x0F);
        for (; b + 8 <= nb; b += 8, w += 8 * RT_BS_MXFP4) {
            __m256i s[8];
            for (int j = 0; j < 8; j++)
                s[j] = dot12_avx2(lev12b_avx2(w + j * RT_BS_MXFP4, tab, sh, m4), a[b + (uint64_t)j].qs);
            const __m256 v = _mm256_mul_ps(_mm256_mul_ps(e8m0x8_avx2(w), q8d8_avx2(a + b)),
                                           _mm256_cvtepi32_ps(hsum8_avx2(s)));
            acc = _mm_add_ps(acc, _mm256_castps256_ps128(v));
            acc = _mm_add_ps(acc, _mm256_extractf128_ps(v, 1));
        }
    }
    *out = mx_finish_avx2(b, nb, w, a, acc);
}

/* Four rows at once (rt_dot4_fn): per group of eight blocks the activation
 * vectors, their 12 x a pair sums and scales are loaded once for the four
 * rows; each row then does rt_dot_mxfp4_q8_0_avx2's operations in its
 * order (the same integers, the same float partials): the same bits. */
void rt_dot4_mxfp4_q8_0_avx2(uint64_t n, uint64_t n4, float *out, const void *wv,
                             uint64_t stride, const void *av)
{
    const struct rt_block_q8_0 *a = av;
    const uint64_t nb = n / 32;
    const __m256i tab = _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)mx_values12));
    const __m256i sh = _mm256_setr_epi32(0, 0, 0, 0, 4, 4, 4, 4);
    const __m256i m4 = _mm256_set1_epi8(0x0F), twelve = _mm256_set1_epi8(12);
    const __m256i ones = _mm256_set1_epi16(1);
    for (uint64_t i4 = 0; i4 < n4; i4++, out += 4) {
        const uint8_t *w[4];
        __m128 acc[4];
        for (int r = 0; r < 4; r++) {
            w[r] = (const uint8_t *)wv + (4 * i4 + (uint64_t)r) * stride;
            acc[r] = _mm_setzero_ps();
        }
        uint64_t b = 0;
        for (; b + 8 <= nb; b += 8) {
            __m256i av8[8], a12[8];
            for (int j = 0; j < 8; j++) {
                av8[j] = _mm256_loadu_si256((const __m256i *)(const void *)a[b + (uint64_t)j].qs);
                a12[j] = _mm256_maddubs_epi16(twelve, av8[j]);
            }
            const __m256 da = q8d8_avx2(a + b);
            for (int r = 0; r < 4; r++) {
                const uint8_t *wb = w[r] + b * RT_BS_MXFP4;
                __m256i s[8];
                for (int j = 0; j < 8; j++)
                    s[j] = _mm256_madd_epi16(
                        _mm256_sub_epi16(_mm256_maddubs_epi16(lev12b_avx2(wb + j * RT_BS_MXFP4, tab, sh, m4), av8[j]),
                                         a12[j]),
                        ones);
                const __m256 v = _mm256_mul_ps(_mm256_mul_ps(e8m0x8_avx2(wb), da),
                                               _mm256_cvtepi32_ps(hsum8_avx2(s)));
                acc[r] = _mm_add_ps(acc[r], _mm256_castps256_ps128(v));
                acc[r] = _mm_add_ps(acc[r], _mm256_extractf128_ps(v, 1));
            }
        }
        for (int r = 0; r < 4; r++) out[r] = mx_finish_avx2(b, nb, w[r] + b * RT_BS_MXFP4, a, acc[r]);
    }
}

/* The batched product for rows too long for rt_gemm_mxfp4_q8_0_avx2's
 * per-token tables: a group of four blocks of a row decoded once and dotted
 * with every token's four activation blocks; each token keeps the
 * mat-vec's four float partials (block b in lane b % 4) in the scratch,
 * 1024 tokens at a time. */
static void gemm4_avx2(uint64_t n, uint64_t nr, uint64_t nc, float *out, uint64_t ldo,
                       const void *w_rows, uint64_t stride, const void *act, uint64_t astride,
                       void *scratch)
{
    const uint64_t nb = n / 32, nb4 = nb / 4 * 4;
    const uint8_t *A = act;
    float *accs = scratch; /* (1024, 4) */
    for (uint64_t c0 = 0; c0 < nc; c0 += 1024) {
        const uint64_t cn = nc - c0 < 1024 ? nc - c0 : 1024;
        for (uint64_t r = 0; r < nr; r++) {
            const uint8_t *wr = (const uint8_t *)w_rows + r * stride;
            for (uint64_t c = 0; c < cn; c++) _mm_storeu_ps(accs + 4 * c, _mm_setzero_ps());
            for (uint64_t b = 0; b < nb4; b += 4) {
                __m256i q[4];
                float dwv[4];
                for (int j = 0; j < 4; j++) {
                    const uint8_t *w = wr + (b + (uint64_t)j) * RT_BS_MXFP4;
                    q[j] = lev12_avx2(w);
                    dwv[j] = e8m0_half(w[0]);
                }
                const __m128 dw = _mm_loadu_ps(dwv);
                for (uint64_t c = 0; c < cn; c++) {
                    const struct rt_block_q8_0 *a =
                        (const struct rt_block_q8_0 *)(A + (c0 + c) * astride) + b;
                    __m256i sv[4];
                    for (int j = 0; j < 4; j++) sv[j] = dot12_avx2(q[j], a[j].qs);
                    const __m128i is = hsum4_avx2(sv[0], sv[1], sv[2], sv[3]);
                    const uint16_t hd[4] = {a[0].d, a[1].d, a[2].d, a[3].d};
                    const __m128 da = _mm_cvtph_ps(_mm_loadl_epi64((const __m128i *)hd));
                    const __m128 v = _mm_mul_ps(_mm_mul_ps(dw, da), _mm_cvtepi32_ps(is));
                    _mm_storeu_ps(accs + 4 * c, _mm_add_ps(_mm_loadu_ps(accs + 4 * c), v));
                }
            }
            for (uint64_t c = 0; c < cn; c++) {
                const struct rt_block_q8_0 *a = (const struct rt_block_q8_0 *)(A + (c0 + c) * astride);
                float *p = accs + 4 * c;
                for (uint64_t b = nb4; b < nb; b++) {
                    const uint8_t *w = wr + b * RT_BS_MXFP4;
                    p[b % RT_NACC] += (e8m0_half(w[0]) * rt__f16(a[b].d)) * (float)blk_avx2(w, a[b].qs);
                }
                out[(c0 + c) * ldo + r] = rt__reduce4(p);
            }
        }
    }
}

/* The batched product (rt_gemm_fn): out[c * ldo + r] = row r . token c for
 * nr rows and nc tokens, each the mat-vec's value bit for bit. Per token,
 * once per call, each block's 12 x (sum of its activations) and its f16
 * scale as a float go to tables in the scratch; a group of eight blocks of
 * a row is then decoded once (levels plus 12, the eight scales) and dotted
 * with every token's eight activation blocks by one VPMADDUBSW and one
 * VPMADDWD per block, the table's 12 sum a subtracted from the eight int32
 * sums (exact integers: the mat-vec's isum). Each token keeps the mat-vec's
 * four float partials (block b in lane b % 4, blocks b..b+3 before
 * b+4..b+7); the blocks past the last group of eight as the mat-vec's
 * tail. Rows too long for the tables take gemm4_avx2. */
void rt_gemm_mxfp4_q8_0_avx2(uint64_t n, uint64_t nr, uint64_t nc, float *out, uint64_t ldo,
                             const void *w_rows, uint64_t stride, const void *act,
                             uint64_t astride, void *scratch)
{
    const uint64_t nb = n / 32, nb8 = nb / 8 * 8;
    /* per token: 4 partials, nb8 int32 sums and nb8 float scales */
    uint64_t cmax = RT_GEMM_SCRATCH / (16 + 8 * nb8);
    if (cmax > 1024) cmax = 1024;
    if (cmax < 8) {
        gemm4_avx2(n, nr, nc, out, ldo, w_rows, stride, act, astride, scratch);
        return;
    }
    const uint8_t *A = act;
    float *accs = scratch;
    int32_t *cor = (int32_t *)(void *)(accs + 4 * cmax);
    float *das = (float *)(void *)(cor + cmax * nb8);
    const __m256i tab = _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)mx_values12));
    const __m256i sh = _mm256_setr_epi32(0, 0, 0, 0, 4, 4, 4, 4);
    const __m256i m4 = _mm256_set1_epi8(0x0F);
    const __m256i ones = _mm256_set1_epi16(1), twelve = _mm256_set1_epi8(12);
    for (uint64_t c0 = 0; c0 < nc; c0 += cmax) {
        const uint64_t cn = nc - c0 < cmax ? nc - c0 : cmax;
        for (uint64_t c = 0; c < cn; c++) {
            const struct rt_block_q8_0 *a = (const struct rt_block_q8_0 *)(A + (c0 + c) * astride);
            for (uint64_t b = 0; b < nb8; b += 8) {
                __m256i s[8];
                for (int j = 0; j < 8; j++)
                    s[j] = _mm256_madd_epi16(
                        _mm256_maddubs_epi16(twelve,
                                             _mm256_loadu_si256((const __m256i *)a[b + (uint64_t)j].qs)),
                        ones);
                _mm256_storeu_si256((__m256i *)(cor + c * nb8 + b), hsum8_avx2(s));
                _mm256_storeu_ps(das + c * nb8 + b, q8d8_avx2(a + b));
            }
        }
        for (uint64_t r = 0; r < nr; r++) {
            const uint8_t *wr = (const uint8_t *)w_rows + r * stride;
            for (uint64_t c = 0; c < cn; c++) _mm_storeu_ps(accs + 4 * c, _mm_setzero_ps());
            for (uint64_t b = 0; b < nb8; b += 8) {
                const uint8_t *wg = wr + b * RT_BS_MXFP4;
                __m256i q[8];
                for (int j = 0; j < 8; j++) q[j] = lev12b_avx2(wg + j * RT_BS_MXFP4, tab, sh, m4);
                const __m256 dw = e8m0x8_avx2(wg);
                for (uint64_t c = 0; c < cn; c++) {
                    const struct rt_block_q8_0 *a =
                        (const struct rt_block_q8_0 *)(A + (c0 + c) * astride) + b;
                    __m256i sv[8];
                    for (int j = 0; j < 8; j++)
                        sv[j] = _mm256_madd_epi16(
                            _mm256_maddubs_epi16(q[j], _mm256_loadu_si256((const __m256i *)a[j].qs)),
                            ones);
                    const __m256i is = _mm256_sub_epi32(
                        hsum8_avx2(sv), _mm256_loadu_si256((const __m256i *)(cor + c * nb8 + b)));
                    const __m256 v = _mm256_mul_ps(_mm256_mul_ps(dw, _mm256_loadu_ps(das + c * nb8 + b)),
                                                   _mm256_cvtepi32_ps(is));
                    __m128 p = _mm_add_ps(_mm_loadu_ps(accs + 4 * c), _mm256_castps256_ps128(v));
                    _mm_storeu_ps(accs + 4 * c, _mm_add_ps(p, _mm256_extractf128_ps(v, 1)));
                }
            }
            for (uint64_t c = 0; c < cn; c++) {
                const struct rt_block_q8_0 *a = (const struct rt_block_q8_0 *)(A + (c0 + c) * astride);
                float *p = accs + 4 * c;
                for (uint64_t b = nb8; b < nb; b++) {
                    const uint8_t *w = wr + b * RT_BS_MXFP4;
                    p[b % RT_NACC] += (e8m0_half(w[0]) * rt__f16(a[b].d)) * (float)blk_avx2(w, a[b].qs);
                }
                out[(c0 + c) * ldo + r] = rt__reduce4(p);
            }
        }
    }
}

#if defined(__clang__)
#pragma clang attribute pop
#else
#pragma GCC pop_options
#endif
#endif /* RT_HAVE_X86 */

#if RT_HAVE_NEON
#include <arm_neon.h>

/* One block's integer dot as four int32 lanes: SMULL/SMLAL2/SMLAL/SMLAL2
 * into one int16x8 (four products a lane, |lane| <= 4 * 12 * 128), then
 * pairwise into 32 bits. */
static inline int32x4_t dot4_neon(int8x16_t lo, int8x16_t hi, const int8_t *a)
{
    const int8x16_t a0 = vld1q_s8(a), a1 = vld1q_s8(a + 16);
    int16x8_t p = vmull_s8(vget_low_s8(lo), vget_low_s8(a0));
    p = vmlal_high_s8(p, lo, a0);
    p = vmlal_s8(p, vget_low_s8(hi), vget_low_s8(a1));
    p = vmlal_high_s8(p, hi, a1);
    return vpaddlq_s16(p);
}

/* A block's levels by TBL: low nibbles (elements 0..15), high (16..31). */
static inline void lev_neon(int8x16_t tab, const uint8_t *w, int8x16_t *lo, int8x16_t *hi)
{
    const uint8x16_t qs = vld1q_u8(w + 1);
    *lo = vqtbl1q_s8(tab, vandq_u8(qs, vdupq_n_u8(0x0F)));
    *hi = vqtbl1q_s8(tab, vshrq_n_u8(qs, 4));
}

static inline int32_t blk_neon(const uint8_t *w, const int8_t *a)
{
    int8x16_t lo, hi;
    lev_neon(vld1q_s8(mx_values), w, &lo, &hi);
    return vaddvq_s32(dot4_neon(lo, hi, a));
}

/* [sum t0, sum t1, sum t2, sum t3] (exact integer adds in any grouping) */
static inline int32x4_t hsum4_neon(int32x4_t t0, int32x4_t t1, int32x4_t t2, int32x4_t t3)
{
    return vpaddq_s32(vpaddq_s32(t0, t1), vpaddq_s32(t2, t3));
}

/* The scales 2^(e-128) of blocks w, w + 17, w + 34, w + 51, as e8m0_half:
 * (e - 1) << 23, or 2^21 << e for e < 2. */
static inline float32x4_t e8m0x4_neon(const uint8_t *w)
{
    uint8x16_t b = vdupq_n_u8(0);
    b = vld1q_lane_u8(w, b, 0);
    b = vld1q_lane_u8(w + RT_BS_MXFP4, b, 4);
    b = vld1q_lane_u8(w + 2 * RT_BS_MXFP4, b, 8);
    b = vld1q_lane_u8(w + 3 * RT_BS_MXFP4, b, 12);
    const uint32x4_t e = vreinterpretq_u32_u8(b), one = vdupq_n_u32(1);
    const uint32x4_t nrm = vshlq_n_u32(vsubq_u32(e, one), 23);
    const uint32x4_t sub = vshlq_u32(vdupq_n_u32(0x00200000), vreinterpretq_s32_u32(e));
    return vreinterpretq_f32_u32(vbslq_u32(vcgtq_u32(e, one), nrm, sub));
}

/* The f16 scales of activation blocks a .. a + 3 as floats. */
static inline float32x4_t q8d4_neon(const struct rt_block_q8_0 *a)
{
    uint16x4_t h = vdup_n_u16(0);
    h = vld1_lane_u16(&a[0].d, h, 0);
    h = vld1_lane_u16(&a[1].d, h, 1);
    h = vld1_lane_u16(&a[2].d, h, 2);
    h = vld1_lane_u16(&a[3].d, h, 3);
    return vcvt_f32_f16(vreinterpret_f16_u16(h));
}

void rt_dot_mxfp4_q8_0_neon(uint64_t n, float *out, const void *wv, const void *av)
{
    const uint8_t *w = wv;
    const struct rt_block_q8_0 *a = av;
    const uint64_t nb = n / 32;
    const int8x16_t tab = vld1q_s8(mx_values);
    float32x4_t acc = vdupq_n_f32(0.0f);
    uint64_t b = 0;
    for (; b + 4 <= nb; b += 4, w += 4 * RT_BS_MXFP4) {
        int32x4_t t[4];
        for (int j = 0; j < 4; j++) {
            int8x16_t lo, hi;
            lev_neon(tab, w + j * RT_BS_MXFP4, &lo, &hi);
            t[j] = dot4_neon(lo, hi, a[b + (uint64_t)j].qs);
        }
        const int32x4_t is = hsum4_neon(t[0], t[1], t[2], t[3]);
        acc = vaddq_f32(acc, vmulq_f32(vmulq_f32(e8m0x4_neon(w), q8d4_neon(a + b)), vcvtq_f32_s32(is)));
    }
    float p[RT_NACC];
    vst1q_f32(p, acc);
    for (; b < nb; b++, w += RT_BS_MXFP4)
        p[b % RT_NACC] += (e8m0_half(w[0]) * rt__f16(a[b].d)) * (float)blk_neon(w, a[b].qs);
    *out = rt__reduce4(p);
}
/* The batched product (rt_gemm_fn), as gemm4_avx2: a group of four blocks
 * of a row decoded once for every token, each token's partials the
 * mat-vec's (lane b % 4), 1024 tokens at a time in the scratch. */
void rt_gemm_mxfp4_q8_0_neon(uint64_t n, uint64_t nr, uint64_t nc, float *out, uint64_t ldo,
                             const void *w_rows, uint64_t stride, const void *act,
                             uint64_t astride, void *scratch)
{
    const uint64_t nb = n / 32, nb4 = nb / 4 * 4;
    const uint8_t *A = act;
    float *accs = scratch; /* (1024, 4) */
    const int8x16_t tab = vld1q_s8(mx_values);
    for (uint64_t c0 = 0; c0 < nc; c0 += 1024) {
        const uint64_t cn = nc - c0 < 1024 ? nc - c0 : 1024;
        for (uint64_t r = 0; r < nr; r++) {
            const uint8_t *wr = (const uint8_t *)w_rows + r * stride;
            for (uint64_t c = 0; c < cn; c++) vst1q_f32(accs + 4 * c, vdupq_n_f32(0.0f));
            for (uint64_t b = 0; b < nb4; b += 4) {
                int8x16_t lo[4], hi[4];
                const uint8_t *wg = wr + b * RT_BS_MXFP4;
                for (int j = 0; j < 4; j++) lev_neon(tab, wg + j * RT_BS_MXFP4, &lo[j], &hi[j]);
                const float32x4_t dw = e8m0x4_neon(wg);
                for (uint64_t c = 0; c < cn; c++) {
                    const struct rt_block_q8_0 *a =
                        (const struct rt_block_q8_0 *)(A + (c0 + c) * astride) + b;
                    const int32x4_t is = hsum4_neon(dot4_neon(lo[0], hi[0], a[0].qs),
                                                    dot4_neon(lo[1], hi[1], a[1].qs),
                                                    dot4_neon(lo[2], hi[2], a[2].qs),
                                                    dot4_neon(lo[3], hi[3], a[3].qs));
                    const float32x4_t v = vmulq_f32(vmulq_f32(dw, q8d4_neon(a)), vcvtq_f32_s32(is));
                    vst1q_f32(accs + 4 * c, vaddq_f32(vld1q_f32(accs + 4 * c), v));
                }
            }
            for (uint64_t c = 0; c < cn; c++) {
                const struct rt_block_q8_0 *a = (const struct rt_block_q8_0 *)(A + (c0 + c) * astride);
                float *p = accs + 4 * c;
                for (uint64_t b = nb4; b < nb; b++) {
                    const uint8_t *w = wr + b * RT_BS_MXFP4;
                    p[b % RT_NACC] += (e8m0_half(w[0]) * rt__f16(a[b].d)) * (float)blk_neon(w, a[b].qs);
                }
                out[(c0 + c) * ldo + r] = rt__reduce4(p);
            }
        }
    }
}
#endif /* RT_HAVE_NEON */
