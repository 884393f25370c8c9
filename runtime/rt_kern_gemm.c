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


/* Zeroes a panel's partials (n floats, n % 8 == 0) by vector stores: glibc's memset of
 * these few KiB is `rep stosb`, which valgrind's instruction counts
 * (bench/insn_x86.sh) take as one instruction per byte. */
static inline RT__AVX2 void zero_f32_avx2(float *p, size_t n)
{
    __m256 z = _mm256_setzero_ps();
    __asm__("" : "+x"(z)); /* hidden zero: GCC would make the loop a memset call */
    for (size_t i = 0; i < n; i += 8) _mm256_storeu_ps(p + i, z);
}

/* AVX-VNNI (VPDPBUSD, VPDPWSSD: no saturation in the non-S forms). */
#define RT__VNNI __attribute__((target("avx2,fma,f16c,avxvnni")))



/* 8x8 transpose of dwords: out[i] dword t = in[t] dword i. */
static inline RT__AVX2 void tr8x8(const __m256i in[8], __m256i out[8])
{
    __m256i a[8], b[8];
    for (int i = 0; i < 8; i += 2) {
        a[i] = _mm256_unpacklo_epi32(in[i], in[i + 1]);     /* t i, i+1: dw 0 1, 4 5 */
        a[i + 1] = _mm256_unpackhi_epi32(in[i], in[i + 1]); /* dw 2 3, 6 7 */
    }
    for (int i = 0; i < 8; i += 4) {
        b[i] = _mm256_unpacklo_epi64(a[i], a[i + 2]);     /* dw 0 (t i..i+3), dw 4 */
        b[i + 1] = _mm256_unpackhi_epi64(a[i], a[i + 2]); /* dw 1, 5 */
        b[i + 2] = _mm256_unpacklo_epi64(a[i + 1], a[i + 3]); /* dw 2, 6 */
        b[i + 3] = _mm256_unpackhi_epi64(a[i + 1], a[i + 3]); /* dw 3, 7 */
    }
    for (int i = 0; i < 4; i++) {
        out[i] = _mm256_permute2x128_si256(b[i], b[i + 4], 0x20);
        out[i + 4] = _mm256_permute2x128_si256(b[i], b[i + 4], 0x31);
    }
}

/* A panel's results: out[j * ldo + r] = rt__reduce4 of row r's four partials
 * of token j, the partials at p[(r * RT_NACC + k) * width + j]. Blocks of 8
 * rows x 8 tokens: the reductions with 8 lanes (the same two adds per lane),
 * transposed, 8 contiguous floats stored per token; the rest one by one.
 * With nb < RT_NACC block columns, partials k >= nb were never written and
 * stand for +0: a written partial starts as 0 + v and is never -0 (in round
 * to nearest only -0 + -0 gives -0), so adding +0 to it, or to a sum of
 * them, changes nothing and is left out: (p0 + p1) + p2, p0 + p1, p0. */
static inline RT__AVX2 float reduce_nb(const float *pr, size_t width, uint64_t nb)
{
    if (nb >= RT_NACC) {
        const float q4[RT_NACC] = {pr[0], pr[width], pr[2 * width], pr[3 * width]};
        return rt__reduce4(q4);
    }
    if (nb == 3) return (pr[0] + pr[width]) + pr[2 * width];
    if (nb == 2) return pr[0] + pr[width];
    return nb ? pr[0] : 0.0f;
}
static inline RT__AVX2 __m256 reduce_nb8(const float *pr, size_t width, uint64_t nb)
{
    if (nb >= RT_NACC)
        return _mm256_add_ps(_mm256_add_ps(_mm256_loadu_ps(pr), _mm256_loadu_ps(pr + width)),
                             _mm256_add_ps(_mm256_loadu_ps(pr + 2 * width), _mm256_loadu_ps(pr + 3 * width)));
    if (nb == 3)
        return _mm256_add_ps(_mm256_add_ps(_mm256_loadu_ps(pr), _mm256_loadu_ps(pr + width)),
                             _mm256_loadu_ps(pr + 2 * width));
    if (nb == 2) return _mm256_add_ps(_mm256_loadu_ps(pr), _mm256_loadu_ps(pr + width));
    return nb ? _mm256_loadu_ps(pr) : _mm256_setzero_ps();
}
static inline RT__AVX2 void panel_out(const float *p, size_t width, uint64_t nr, int pc,
                                      float *out, uint64_t ldo, uint64_t nb)
{
    const uint64_t nr8 = nr / 8 * 8;
    const int pc8 = pc / 8 * 8;
    for (uint64_t r0 = 0; r0 < nr8; r0 += 8)
        for (int j0 = 0; j0 < pc8; j0 += 8) {
            __m256i v[8], t[8];
            for (int i = 0; i < 8; i++)
                v[i] = _mm256_castps_si256(
                    reduce_nb8(p + (r0 + (uint64_t)i) * RT_NACC * width + (size_t)j0, width, nb));
            tr8x8(v, t);
            for (int i = 0; i < 8; i++)
                _mm256_storeu_ps(out + (uint64_t)(j0 + i) * ldo + r0, _mm256_castsi256_ps(t[i]));
        }
    for (uint64_t r = 0; r < nr; r++)
        for (int j = r < nr8 ? pc8 : 0; j < pc; j++)
            out[(uint64_t)j * ldo + r] = reduce_nb(p + r * RT_NACC * width + (size_t)j, width, nb);
}

/* The decoders of the tokens-in-lanes products below (u, sc, mc and scx filled). Q4_K, Q5_K and
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

/* --- AVX2: rows in the lanes ---
 * The product of a tile of 16 rows with a panel of up to 64 tokens. Per
 * block column, the rows' blocks are decoded once (u, sc, mc, d, dmin) and
 * transposed into two row octets: dword k of octet R holds, in lane i, row
 * 8R + i's bytes u[4k .. 4k + 3]. Per token, the activation's dword k is
 * broadcast (VPBROADCASTD from memory) and VPMADDUBSW against octet dword k
 * gives, per row lane, two int16 sums of two products; S consecutive dwords
 * of one scale group are added in int16 (S * 2 * umax * 128 < 2^15: Q4_K 8,
 * Q5_K 4, Q6_K 2, Q2_K/Q3_K 4; no saturation) before one VPMADDWD by the
 * group's scale (lane i: row i's sc[g] twice) widens them to int32. So the
 * scale multiply and the widening are paid once per S dwords instead of
 * once per 32-byte chunk, no activation is shuffled, and a token's eight
 * row results come out in the lanes of one vector. msum: VPMADDWD of the
 * transposed (mc[2j], mc[2j+1]) by the broadcast bsums pair. The integers
 * are exact in any order; the float combine is the reference's per lane
 * (row): (da * d) * isum - (da * dmin) * msum, or (da * d) * (isum - msum),
 * added to partial b % 4 of (token, row) — the same bits as the mat-vec.
 * Rows past nr read a zero block and are not stored. Also the short panels
 * (2..7 tokens) of the VNNI and AVX-512 products: even at 2 tokens it beats
 * a 4-token positions-in-lanes product. */
#define RT_RPANEL 64 /* tokens per panel: one decode of a block column for them */
struct rdec {
    __m256i w[2][64];  /* octet R, dword k: lane i = row 8R + i's u[4k .. 4k + 3] */
    __m256i sc[2][16]; /* group g (16 elements): lane i = row 8R + i's sc[g], both int16 halves */
    __m256i mc[2][8];  /* pair j: lane i = row 8R + i's (mc[2j], mc[2j + 1]) */
    float d[2][8], dmin[2][8];
};
#define RT_RDEC_KD (sizeof(struct rdec))                                 /* 9 struct kdec: 8 rows, a zero one */
#define RT_RDEC_P ((RT_RDEC_KD + 9 * sizeof(struct kdec) + 31) & ~(size_t)31) /* partials */
_Static_assert(RT_RDEC_P + RT_RPANEL * RT_NACC * RT_GEMM_MAX_ROWS * sizeof(float) <= RT_GEMM_SCRATCH,
               "the rows-in-lanes gemm's scratch");
_Static_assert(RT_GEMM_MAX_ROWS == 16, "two row octets per tile");

/* Row decoders for the rows-in-lanes product: u, sc, mc, d, dmin (no scx). */
static inline RT__AVX2 void dec_q2_k_r(const uint8_t *w, struct kdec *k) { dec_q2_k(w, k); }
static inline RT__AVX2 void dec_q3_k_r(const uint8_t *w, struct kdec *k) { dec_q3_k(w, k); }

/* Q4_K/Q5_K: sub-block s's scale and min as the int16 pairs sc[2s] = sc[2s + 1], mc likewise. */
static inline RT__AVX2 void k45_scales_r(const uint8_t *q, struct kdec *k)
{
    const uint32_t u0 = rt__ld32(q), u1 = rt__ld32(q + 4), u2 = rt__ld32(q + 8);
    const uint32_t k1 = 0x3f3f3f3fu, k2 = 0x0f0f0f0fu, k3 = 0x03030303u;
    const uint64_t S = (uint64_t)((u2 & k2) | (((u0 >> 6) & k3) << 4)) << 32 | (u0 & k1);
    const uint64_t M = (uint64_t)(((u2 >> 4) & k2) | (((u1 >> 6) & k3) << 4)) << 32 | (u1 & k1);
    const __m128i s8 = _mm_cvtsi64_si128((long long)S), m8 = _mm_cvtsi64_si128((long long)M);
    _mm256_storeu_si256((__m256i *)k->sc, _mm256_cvtepu8_epi16(_mm_unpacklo_epi8(s8, s8)));
    _mm256_storeu_si256((__m256i *)k->mc, _mm256_cvtepu8_epi16(_mm_unpacklo_epi8(m8, m8)));
}

static inline RT__AVX2 void dec_q4_k_r(const uint8_t *w, struct kdec *k)
{
    const __m256i m4 = _mm256_set1_epi8(0x0F);
    for (int c = 0; c < 4; c++) {
        const __m256i q = _mm256_loadu_si256((const __m256i *)(w + 16 + 32 * c));
        _mm256_storeu_si256((__m256i *)(k->u + 64 * c), _mm256_and_si256(q, m4));
        _mm256_storeu_si256((__m256i *)(k->u + 64 * c + 32), _mm256_and_si256(_mm256_srli_epi16(q, 4), m4));
    }
    k45_scales_r(w + 4, k);
    k->d = rt__f16(rt__ld16(w));
    k->dmin = rt__f16(rt__ld16(w + 2));
}

static inline RT__AVX2 void dec_q5_k_r(const uint8_t *w, struct kdec *k)
{
    const __m256i m4 = _mm256_set1_epi8(0x0F), b4 = _mm256_set1_epi8(0x10);
    const __m256i qh = _mm256_loadu_si256((const __m256i *)(w + 16));
    for (int c = 0; c < 4; c++) {
        const __m256i q = _mm256_loadu_si256((const __m256i *)(w + 48 + 32 * c));
        const __m256i hl = _mm256_and_si256(_mm256_slli_epi16(_mm256_srli_epi16(qh, 2 * c), 4), b4);
        const __m256i hh = _mm256_and_si256(_mm256_slli_epi16(_mm256_srli_epi16(qh, 2 * c + 1), 4), b4);
        _mm256_storeu_si256((__m256i *)(k->u + 64 * c), _mm256_or_si256(_mm256_and_si256(q, m4), hl));
        _mm256_storeu_si256((__m256i *)(k->u + 64 * c + 32),
                            _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(q, 4), m4), hh));
    }
    k45_scales_r(w + 4, k);
    k->d = rt__f16(rt__ld16(w));
    k->dmin = rt__f16(rt__ld16(w + 2));
}

static inline RT__AVX2 void dec_q6_k_r(const uint8_t *w, struct kdec *k)
{
    const __m256i m4 = _mm256_set1_epi8(0x0F), m3 = _mm256_set1_epi8(0x03);
    for (int h = 0; h < 2; h++) {
        const __m256i l0 = _mm256_loadu_si256((const __m256i *)(w + 64 * h));
        const __m256i l1 = _mm256_loadu_si256((const __m256i *)(w + 64 * h + 32));
        const __m256i H = _mm256_loadu_si256((const __m256i *)(w + 128 + 32 * h));
        const __m256i h0 = _mm256_slli_epi16(_mm256_and_si256(H, m3), 4);
        const __m256i h1 = _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(H, 2), m3), 4);
        const __m256i h2 = _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(H, 4), m3), 4);
        const __m256i h3 = _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(H, 6), m3), 4);
        uint8_t *o = k->u + 128 * h;
        _mm256_storeu_si256((__m256i *)o, _mm256_or_si256(_mm256_and_si256(l0, m4), h0));
        _mm256_storeu_si256((__m256i *)(o + 32), _mm256_or_si256(_mm256_and_si256(l1, m4), h1));
        _mm256_storeu_si256((__m256i *)(o + 64),
                            _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(l0, 4), m4), h2));
        _mm256_storeu_si256((__m256i *)(o + 96),
                            _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(l1, 4), m4), h3));
    }
    const __m256i sc = _mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i *)(w + 192)));
    _mm256_storeu_si256((__m256i *)k->sc, sc);
    _mm256_storeu_si256((__m256i *)k->mc, _mm256_slli_epi16(sc, 5)); /* 32 * sc, |.| <= 4096 */
    k->d = rt__f16(rt__ld16(w + 208));
    k->dmin = 0.0f;
}

/* Eight decoded rows (kp[i]: row i, or the zero block) into row octet R. */
static inline RT__AVX2 void rdec_put(struct rdec *D, int R, const struct kdec *const kp[8])
{
    __m256i in[8], lo[8], hi[8], o[8];
    for (int m = 0; m < 8; m++) {
        for (int i = 0; i < 8; i++) in[i] = _mm256_loadu_si256((const __m256i *)(kp[i]->u + 32 * m));
        tr8x8(in, D->w[R] + 8 * m);
    }
    for (int i = 0; i < 8; i++) {
        const __m256i v = _mm256_loadu_si256((const __m256i *)kp[i]->sc);
        lo[i] = _mm256_unpacklo_epi16(v, v); /* dwords: groups 0-3 | 8-11 */
        hi[i] = _mm256_unpackhi_epi16(v, v); /* groups 4-7 | 12-15 */
        in[i] = _mm256_loadu_si256((const __m256i *)kp[i]->mc);
        D->d[R][i] = kp[i]->d;
        D->dmin[R][i] = kp[i]->dmin;
    }
    tr8x8(in, D->mc[R]);
    tr8x8(lo, o);
    for (int k = 0; k < 4; k++) D->sc[R][k] = o[k], D->sc[R][8 + k] = o[4 + k];
    tr8x8(hi, o);
    for (int k = 0; k < 4; k++) D->sc[R][4 + k] = o[k], D->sc[R][12 + k] = o[4 + k];
}

static inline RT__AVX2 __m256i bcast32(const void *p)
{
    int32_t v;
    memcpy(&v, p, 4);
    return _mm256_set1_epi32(v);
}

/* Empty asm on an accumulator: GCC would otherwise reassociate a chain of
 * int16 adds into a tree whose products all stay live and spill. */
#define RT__KEEP(v) __asm__("" : "+x"(v))

/* NT tokens (a[t]) against the NR8 row octets of a block column: isum lanes
 * is[t][R] and msum lanes ms[t][R]. S: dwords added in int16 before the
 * scale; each octet dword is loaded once for the NT tokens. */
static inline __attribute__((always_inline)) RT__AVX2 void
rdot(const struct rdec *D, const struct rt_block_q8_k *const a[2], const int S, const int NT,
     const int NR8, __m256i is[2][2], __m256i ms[2][2])
{
    for (int k0 = 0; k0 < 64; k0 += S) {
        __m256i acc[2][2];
        for (int kk = 0; kk < S; kk++) {
            __m256i x[2];
            for (int t = 0; t < NT; t++) x[t] = bcast32(a[t]->qs + 4 * (k0 + kk));
            for (int R = 0; R < NR8; R++) {
                __m256i w = _mm256_load_si256(&D->w[R][k0 + kk]);
                RT__KEEP(w); /* one load for the NT tokens */
                for (int t = 0; t < NT; t++) {
                    const __m256i p = _mm256_maddubs_epi16(w, x[t]);
                    if (kk) {
                        acc[t][R] = _mm256_add_epi16(acc[t][R], p);
                        RT__KEEP(acc[t][R]);
                    } else
                        acc[t][R] = p;
                }
            }
        }
        for (int R = 0; R < NR8; R++) {
            const __m256i sc = _mm256_load_si256(&D->sc[R][k0 / 4]);
            for (int t = 0; t < NT; t++) {
                const __m256i v = _mm256_madd_epi16(acc[t][R], sc);
                is[t][R] = k0 ? _mm256_add_epi32(is[t][R], v) : v;
            }
        }
    }
    for (int j = 0; j < 8; j++) {
        __m256i x[2];
        for (int t = 0; t < NT; t++) x[t] = bcast32(a[t]->bsums + 2 * j);
        for (int R = 0; R < NR8; R++)
            for (int t = 0; t < NT; t++) {
                const __m256i v = _mm256_madd_epi16(D->mc[R][j], x[t]);
                ms[t][R] = j ? _mm256_add_epi32(ms[t][R], v) : v;
            }
    }
}

/* The reference's float combine of one token's NR8 octets into its partials pr. */
static inline __attribute__((always_inline)) RT__AVX2 void
rcombine(const struct rdec *D, float da_, const __m256i is[2], const __m256i ms[2], const int NR8,
         const int mode, bool first, float *pr)
{
    const __m256 da = _mm256_set1_ps(da_);
    for (int R = 0; R < NR8; R++) {
        const __m256 d = _mm256_load_ps(D->d[R]);
        __m256 v;
        if (mode == KM_MIN)
            v = _mm256_sub_ps(_mm256_mul_ps(_mm256_mul_ps(da, d), _mm256_cvtepi32_ps(is[R])),
                              _mm256_mul_ps(_mm256_mul_ps(da, _mm256_load_ps(D->dmin[R])),
                                            _mm256_cvtepi32_ps(ms[R])));
        else
            v = _mm256_mul_ps(_mm256_mul_ps(da, d), _mm256_cvtepi32_ps(_mm256_sub_epi32(is[R], ms[R])));
        _mm256_storeu_ps(pr + 8 * R, _mm256_add_ps(first ? _mm256_setzero_ps() : _mm256_loadu_ps(pr + 8 * R), v));
    }
}

/* The panel's tokens against the decoded block column b (NR8 octets), two at a time. */
static inline __attribute__((always_inline)) RT__AVX2 void
rpanel(const struct rdec *D, const uint8_t *a0, uint64_t astride, int pc, const int S, const int NR8,
       const int mode, bool first, float (*p)[RT_NACC][RT_GEMM_MAX_ROWS], uint64_t bk)
{
    int j = 0;
    for (; j + 2 <= pc; j += 2) {
        const struct rt_block_q8_k *a[2] = {(const struct rt_block_q8_k *)(a0 + (uint64_t)j * astride),
                                            (const struct rt_block_q8_k *)(a0 + (uint64_t)(j + 1) * astride)};
        __m256i is[2][2], ms[2][2];
        rdot(D, a, S, 2, NR8, is, ms);
        for (int t = 0; t < 2; t++) rcombine(D, a[t]->d, is[t], ms[t], NR8, mode, first, p[j + t][bk]);
    }
    if (j < pc) {
        const struct rt_block_q8_k *a[2] = {(const struct rt_block_q8_k *)(a0 + (uint64_t)j * astride), NULL};
        __m256i is[2][2], ms[2][2];
        rdot(D, a, S, 1, NR8, is, ms);
        rcombine(D, a[0]->d, is[0], ms[0], NR8, mode, first, p[j][bk]);
    }
}

#define RT__GEMM_ROWS(t, mode, bs)                                                                \
    RT__AVX2 void rt_gemm_##t##_q8_k_avx2(RT__GEMM_PARAMS)                                        \
    {                                                                                             \
        const uint64_t nb = n / RT_QK_K;                                                          \
        const int S = (bs) == RT_BS_Q4_K ? 8 : (bs) == RT_BS_Q6_K ? 2 : 4;                        \
        struct rdec *D = scratch;                                                                 \
        struct kdec *kd = (struct kdec *)((uint8_t *)scratch + RT_RDEC_KD), *kz = kd + 8;         \
        float(*p)[RT_NACC][RT_GEMM_MAX_ROWS] =                                                    \
            (float(*)[RT_NACC][RT_GEMM_MAX_ROWS])((uint8_t *)scratch + RT_RDEC_P);                \
        const int nr8 = (int)((nr + 7) / 8);                                                      \
        if (nr % 8) memset(kz, 0, sizeof *kz);                                                    \
        for (uint64_t c0 = 0; c0 < nc; c0 += RT_RPANEL) {                                         \
            const int pc = nc - c0 < RT_RPANEL ? (int)(nc - c0) : RT_RPANEL;                      \
            for (uint64_t b = 0; b < nb; b++) {                                                   \
                if (b + 1 < nb) /* the next block column of the rows, from memory meanwhile */    \
                    for (uint64_t r = 0; r < nr; r++)                                             \
                        for (uint64_t l = 0; l < (bs); l += 64)                                   \
                            _mm_prefetch((const char *)w_rows + r * stride + (b + 1) * (bs) + l,  \
                                         _MM_HINT_T0);                                            \
                for (int R = 0; R < nr8; R++) {                                                   \
                    const struct kdec *kp[8];                                                     \
                    for (int i = 0; i < 8; i++) {                                                 \
                        const uint64_t r = 8 * (uint64_t)R + (uint64_t)i;                         \
                        if (r < nr) {                                                             \
                            dec_##t##_r((const uint8_t *)w_rows + r * stride + b * (bs), &kd[i]); \
                            kp[i] = &kd[i];                                                       \
                        } else                                                                    \
                            kp[i] = kz;                                                           \
                    }                                                                             \
                    rdec_put(D, R, kp);                                                           \
                }                                                                                 \
                const uint8_t *a0 = (const uint8_t *)act + c0 * astride + b * sizeof(struct rt_block_q8_k); \
                const bool first = b < RT_NACC; /* partial b % 4 starts here: 0 + v */            \
                if (nr8 == 2)                                                                     \
                    rpanel(D, a0, astride, pc, S, 2, mode, first, p, b % RT_NACC);                \
                else                                                                              \
                    rpanel(D, a0, astride, pc, S, 1, mode, first, p, b % RT_NACC);                \
            }                                                                                     \
            for (int j = 0; j < pc; j++)                                                          \
                for (int R = 0; R < nr8; R++) {                                                   \
                    const __m256 v = reduce_nb8(&p[j][0][8 * R], RT_GEMM_MAX_ROWS, nb);           \
                    float *o = out + (c0 + (uint64_t)j) * ldo + 8 * (uint64_t)R;                  \
                    if (nr - 8 * (uint64_t)R >= 8)                                                \
                        _mm256_storeu_ps(o, v);                                                   \
                    else {                                                                        \
                        float tmp[8];                                                             \
                        _mm256_storeu_ps(tmp, v);                                                 \
                        memcpy(o, tmp, (size_t)(nr - 8 * (uint64_t)R) * sizeof(float));           \
                    }                                                                             \
                }                                                                                 \
        }                                                                                         \
    }
RT__KTYPES(RT__GEMM_ROWS)

/* --- AVX-VNNI: tokens in the lanes ---
 * VPDPBUSD multiplies 4 unsigned bytes by 4 signed bytes and adds the four
 * products to an int32 lane: one instruction per 32 products, with no
 * int16 step. Its lanes hold tokens: the panel's activations are
 * transposed once per block column into octets of 8 tokens (vector k of an
 * octet = bytes 4k..4k+3 of each token's qs, token t in lane t), and each
 * weight group of 4 bytes is broadcast to the 8 lanes, so one weight load
 * serves 8 tokens and the decoded block (struct kdec) is read 4 bytes at a
 * time. Per scale group (16 or 32 elements: Q4_K/Q5_K's pairs of groups
 * share a scale) the lanes' exact dot products are multiplied by the
 * group's scale (VPMULLD) and summed: isum per token, and msum from the
 * octet's bsums (transposed too: dword j = bsums 2j, 2j+1) by VPMADDWD
 * with the group pair's (mc[2j], mc[2j+1]). Integer sums in any order are
 * the same integers, and the float combine is the reference's per lane:
 * every result bit-identical to the mat-vec's (check_rt_gemm).
 * Bounds: a group's lane sum <= 32 * 63 * 128 < 2^18, times |sc| <= 128,
 * 16 groups: < 2^29; msum as in rt_kern_gemm.h. */
#define RT_OCT 8                          /* tokens per octet */
#define RT_VPANEL 32                      /* tokens per panel (one decoded block for them) */
#define RT_NOCT (RT_VPANEL / RT_OCT)      /* octets per panel */
struct act_oct {
    __m256i q[64];    /* vector k: dword t = token t's qs[4k .. 4k + 3] */
    __m256i bs[8];    /* vector j: dword t = token t's (bsums[2j], bsums[2j + 1]) */
    float d[RT_OCT];  /* token t's d (0 for a padding lane) */
};

/* Octet o of the panel: tokens c0 + 8o .. (pc tokens in the panel; lanes
 * past it read the zero block z and have d = 0). */
static inline RT__VNNI void act_oct_fill(struct act_oct *O, const uint8_t *a0, uint64_t astride,
                                         int o, int pc, const struct rt_block_q8_k *z)
{
    const struct rt_block_q8_k *a[RT_OCT];
    for (int t = 0; t < RT_OCT; t++) {
        const int j = RT_OCT * o + t;
        a[t] = j < pc ? (const struct rt_block_q8_k *)(a0 + (uint64_t)j * astride) : z;
        O->d[t] = a[t]->d;
    }
    for (int m = 0; m < 8; m++) {
        __m256i in[8];
        for (int t = 0; t < RT_OCT; t++) in[t] = _mm256_loadu_si256((const __m256i *)(a[t]->qs + 32 * m));
        tr8x8(in, O->q + 8 * m);
    }
    __m256i in[8];
    for (int t = 0; t < RT_OCT; t++) in[t] = _mm256_loadu_si256((const __m256i *)a[t]->bsums);
    tr8x8(in, O->bs);
}

/* One decoded block against the panel's octets: iv[o], mv[o] = the isum and
 * msum lanes of octet o. G: dwords per scale group (8: Q4_K, Q5_K; 4: the
 * 16-element groups). Two scale groups at a time: their 2 x NO accumulators,
 * the NO isums and the broadcast weight fit the 16 ymm registers (four
 * groups at a time spilled to the stack on every product). */
static inline __attribute__((always_inline)) RT__VNNI void
kdot_oct(const struct kdec *k, const struct act_oct *O, const int G, const int NO,
         __m256i iv[RT_NOCT], __m256i mv[RT_NOCT])
{
    for (int o = 0; o < NO; o++) iv[o] = mv[o] = _mm256_setzero_si256();
    const int ng = 64 / G; /* scale groups per block */
    for (int g0 = 0; g0 < ng; g0 += 2) {
        __m256i acc[2][RT_NOCT];
        for (int gi = 0; gi < 2; gi++)
            for (int o = 0; o < NO; o++) acc[gi][o] = _mm256_setzero_si256();
        for (int kk = 0; kk < G; kk++)
            for (int gi = 0; gi < 2; gi++) {
                const int kq = (g0 + gi) * G + kk; /* dword of the block */
                int32_t w4;
                memcpy(&w4, k->u + 4 * kq, 4);
                const __m256i w = _mm256_set1_epi32(w4);
                for (int o = 0; o < NO; o++)
                    acc[gi][o] = _mm256_dpbusd_avx_epi32(acc[gi][o], w, O[o].q[kq]);
            }
        for (int gi = 0; gi < 2; gi++) {
            /* the group's scale: scx holds sc[g] at lane 8 * (g % 2) of chunk g / 2 */
            const int g16 = (g0 + gi) * G / 4;
            const __m256i sc = _mm256_set1_epi32(k->scx[16 * (g16 / 2) + 8 * (g16 % 2)]);
            for (int o = 0; o < NO; o++)
                iv[o] = _mm256_add_epi32(iv[o], _mm256_mullo_epi32(acc[gi][o], sc));
        }
    }
    /* msum: VPDPWSSD adds the pair of int16 products to the lane, as
     * VPMADDWD then VPADDD would (no saturation; the bounds above) */
    for (int j = 0; j < 8; j++) {
        int32_t m2;
        memcpy(&m2, k->mc + 2 * j, 4);
        const __m256i mc = _mm256_set1_epi32(m2);
        for (int o = 0; o < NO; o++) mv[o] = _mm256_dpwssd_avx_epi32(mv[o], mc, O[o].bs[j]);
    }
}

/* The float combine of one lane group (octet or hexadectet) of a decoded
 * block, the reference's operations per lane: (da * d) * isum - (da * dmin)
 * * msum (KM_MIN) or (da * d) * (isum - msum), added to the partials pr. */
static inline __attribute__((always_inline)) RT__VNNI void
combine_oct(const float *da_, float d_, float dmin_, __m256i iv, __m256i mv, float *pr, int mode)
{
    const __m256 da = _mm256_load_ps(da_), d = _mm256_set1_ps(d_), dmin = _mm256_set1_ps(dmin_);
    __m256 v;
    if (mode == KM_MIN)
        v = _mm256_sub_ps(_mm256_mul_ps(_mm256_mul_ps(da, d), _mm256_cvtepi32_ps(iv)),
                          _mm256_mul_ps(_mm256_mul_ps(da, dmin), _mm256_cvtepi32_ps(mv)));
    else
        v = _mm256_mul_ps(_mm256_mul_ps(da, d), _mm256_cvtepi32_ps(_mm256_sub_epi32(iv, mv)));
    _mm256_storeu_ps(pr, _mm256_add_ps(_mm256_loadu_ps(pr), v));
}

/* The tokens-in-lanes driver, for octets (AVX-VNNI) and hexadectets
 * (AVX-512): per panel of PANEL tokens and block column, the panel's
 * activations transposed once into lane groups of LANES tokens (FILL), then
 * per row the decoded block against them (KDOT: the isum and msum lanes)
 * and the float combine (COMBINE) into the partials p[r][b % 4][token]. A
 * short panel computes only the lane groups it uses; one of fewer than 8
 * tokens takes the AVX2 rows-in-lanes path (same bits). */
#define RT__GEMM_LANES(t, mode, bs, SFX, ATTR, PANEL, LANES, ACT, VI, FILL, KDOT, COMBINE)         \
    ATTR void rt_gemm_##t##_q8_k_##SFX(RT__GEMM_PARAMS)                                           \
    {                                                                                             \
        enum { NG = (PANEL) / (LANES) }; /* lane groups per panel */                              \
        const uint64_t nb = n / RT_QK_K;                                                          \
        const int G = (bs) == RT_BS_Q4_K || (bs) == RT_BS_Q5_K ? 8 : 4;                           \
        struct kdec *kd = scratch;                                                                \
        float(*p)[RT_NACC][PANEL] =                                                               \
            (float(*)[RT_NACC][PANEL])((uint8_t *)scratch + sizeof(struct kdec));                 \
        ACT *O = (ACT *)((uint8_t *)scratch +                                                     \
                         ((sizeof(struct kdec) + RT_GEMM_MAX_ROWS * sizeof *p + 63) & ~(size_t)63)); \
        struct rt_block_q8_k *z = (struct rt_block_q8_k *)(O + NG);                               \
        for (uint64_t c0 = 0; c0 < nc; c0 += (PANEL)) {                                           \
            const int pc = nc - c0 < (PANEL) ? (int)(nc - c0) : (PANEL);                          \
            const int no = (pc + (LANES) - 1) / (LANES);                                          \
            if (pc < RT_OCT) {                                                                    \
                rt_gemm_##t##_q8_k_avx2(n, nr, (uint64_t)pc, out + c0 * ldo, ldo, w_rows, stride,  \
                                        (const uint8_t *)act + c0 * astride, astride, scratch);   \
                continue;                                                                         \
            }                                                                                     \
            zero_f32_avx2(&p[0][0][0], nr * sizeof *p / sizeof(float));                          \
            memset(z, 0, sizeof *z);                                                              \
            for (uint64_t b = 0; b < nb; b++) {                                                   \
                const uint8_t *a0 = (const uint8_t *)act + c0 * astride + b * sizeof(struct rt_block_q8_k); \
                if (b + 1 < nb) /* the next block column of the rows, from memory meanwhile */    \
                    for (uint64_t r = 0; r < nr; r++)                                             \
                        for (uint64_t l = 0; l < (bs); l += 64)                                   \
                            _mm_prefetch((const char *)w_rows + r * stride + (b + 1) * (bs) + l,  \
                                         _MM_HINT_T0);                                            \
                for (int o = 0; o < no; o++) FILL(&O[o], a0, astride, o, pc, z);                  \
                for (uint64_t r = 0; r < nr; r++) {                                               \
                    dec_##t##_x((const uint8_t *)w_rows + r * stride + b * (bs), kd);             \
                    VI iv[NG], mv[NG];                                                            \
                    switch (no) { /* lane groups in use: constants for KDOT's loops */            \
                    case 1: KDOT(kd, O, G, 1, iv, mv); break;                                     \
                    case 2: KDOT(kd, O, G, 2, iv, mv); break;                                     \
                    case 3: KDOT(kd, O, G, 3, iv, mv); break;                                     \
                    default: KDOT(kd, O, G, 4, iv, mv); break;                                    \
                    }                                                                             \
                    for (int o = 0; o < no; o++)                                                  \
                        COMBINE(O[o].d, kd->d, kd->dmin, iv[o], mv[o], p[r][b % RT_NACC] + (LANES) * o, mode); \
                }                                                                                 \
            }                                                                                     \
            panel_out(&p[0][0][0], sizeof p[0][0] / sizeof(float), nr, pc, out + c0 * ldo, ldo, RT_NACC); \
        }                                                                                         \
    }
_Static_assert(RT_NOCT == 4, "kdot_oct's cases: up to 4 octets");
#define RT__GEMM_VNNI(t, mode, bs)                                                                \
    RT__GEMM_LANES(t, mode, bs, vnni, RT__VNNI, RT_VPANEL, RT_OCT, struct act_oct, __m256i,       \
                   act_oct_fill, kdot_oct, combine_oct)
RT__KTYPES(RT__GEMM_VNNI)
_Static_assert(sizeof(struct kdec) + RT_GEMM_MAX_ROWS * RT_VPANEL * RT_NACC * sizeof(float) + 63 +
                       RT_NOCT * sizeof(struct act_oct) + sizeof(struct rt_block_q8_k) <=
                   RT_GEMM_SCRATCH,
               "the VNNI k-quant gemm's scratch");

/* --- AVX-512 VNNI: 16 tokens in the lanes of a zmm ---
 * The AVX-VNNI product above with 512-bit vectors: a hexadectet holds 16
 * tokens (vector k: dword t = token t's qs[4k .. 4k + 3]), a panel 64
 * tokens, so one broadcast weight group feeds four VPDPBUSD of 64 products
 * and a decoded block serves twice the tokens. 32 zmm registers hold four
 * scale groups' accumulators for four hexadectets. Lanes, integers and the
 * per-lane float combine are the octet path's: the same bits. */
#define RT__AVX512 __attribute__((target("avx2,fma,f16c,avxvnni,avx512f,avx512bw,avx512vl,avx512vnni")))
#define RT_HEX 16                        /* tokens per hexadectet */
#define RT_ZPANEL 64                     /* tokens per panel */
#define RT_NHEX (RT_ZPANEL / RT_HEX)     /* hexadectets per panel */
struct act_hex {
    __m512i q[64];   /* vector k: dword t = token t's qs[4k .. 4k + 3] */
    __m512i bs[8];   /* vector j: dword t = token t's (bsums[2j], bsums[2j + 1]) */
    float d[RT_HEX]; /* token t's d (0 for a padding lane) */
};

/* Hexadectet h of the panel: tokens 16h .. 16h + 15 (pc tokens in the panel;
 * lanes past it read the zero block z and have d = 0), as two octets: the
 * low and high 256 bits of each vector. */
static inline RT__AVX512 void act_hex_fill(struct act_hex *H, const uint8_t *a0, uint64_t astride,
                                           int h, int pc, const struct rt_block_q8_k *z)
{
    const struct rt_block_q8_k *a[RT_HEX];
    for (int t = 0; t < RT_HEX; t++) {
        const int j = RT_HEX * h + t;
        a[t] = j < pc ? (const struct rt_block_q8_k *)(a0 + (uint64_t)j * astride) : z;
        H->d[t] = a[t]->d;
    }
    for (int half = 0; half < 2; half++) {
        const struct rt_block_q8_k *const *ah = a + 8 * half;
        __m256i in[8], o[8];
        for (int m = 0; m < 8; m++) {
            for (int t = 0; t < 8; t++) in[t] = _mm256_loadu_si256((const __m256i *)(ah[t]->qs + 32 * m));
            tr8x8(in, o);
            for (int i = 0; i < 8; i++) _mm256_store_si256((__m256i *)&H->q[8 * m + i] + half, o[i]);
        }
        for (int t = 0; t < 8; t++) in[t] = _mm256_loadu_si256((const __m256i *)ah[t]->bsums);
        tr8x8(in, o);
        for (int i = 0; i < 8; i++) _mm256_store_si256((__m256i *)&H->bs[i] + half, o[i]);
    }
}

/* kdot_oct with hexadectets: iv[h], mv[h] = the isum and msum lanes of
 * hexadectet h. Four scale groups at a time (16 accumulators). */
static inline __attribute__((always_inline)) RT__AVX512 void
kdot_hex(const struct kdec *k, const struct act_hex *H, const int G, const int NH,
         __m512i iv[RT_NHEX], __m512i mv[RT_NHEX])
{
    for (int h = 0; h < NH; h++) iv[h] = mv[h] = _mm512_setzero_si512();
    const int ng = 64 / G;
    for (int g0 = 0; g0 < ng; g0 += 4) {
        __m512i acc[4][RT_NHEX];
        for (int gi = 0; gi < 4; gi++)
            for (int h = 0; h < NH; h++) acc[gi][h] = _mm512_setzero_si512();
        for (int kk = 0; kk < G; kk++)
            for (int gi = 0; gi < 4; gi++) {
                const int kq = (g0 + gi) * G + kk;
                int32_t w4;
                memcpy(&w4, k->u + 4 * kq, 4);
                const __m512i w = _mm512_set1_epi32(w4);
                for (int h = 0; h < NH; h++) acc[gi][h] = _mm512_dpbusd_epi32(acc[gi][h], w, H[h].q[kq]);
            }
        for (int gi = 0; gi < 4; gi++) {
            const int g16 = (g0 + gi) * G / 4;
            const __m512i sc = _mm512_set1_epi32(k->scx[16 * (g16 / 2) + 8 * (g16 % 2)]);
            for (int h = 0; h < NH; h++) iv[h] = _mm512_add_epi32(iv[h], _mm512_mullo_epi32(acc[gi][h], sc));
        }
    }
    for (int j = 0; j < 8; j++) {
        int32_t m2;
        memcpy(&m2, k->mc + 2 * j, 4);
        const __m512i mc = _mm512_set1_epi32(m2);
        for (int h = 0; h < NH; h++) mv[h] = _mm512_dpwssd_epi32(mv[h], mc, H[h].bs[j]);
    }
}

/* combine_oct on 16 lanes. */
static inline __attribute__((always_inline)) RT__AVX512 void
combine_hex(const float *da_, float d_, float dmin_, __m512i iv, __m512i mv, float *pr, int mode)
{
    const __m512 da = _mm512_load_ps(da_), d = _mm512_set1_ps(d_), dmin = _mm512_set1_ps(dmin_);
    __m512 v;
    if (mode == KM_MIN)
        v = _mm512_sub_ps(_mm512_mul_ps(_mm512_mul_ps(da, d), _mm512_cvtepi32_ps(iv)),
                          _mm512_mul_ps(_mm512_mul_ps(da, dmin), _mm512_cvtepi32_ps(mv)));
    else
        v = _mm512_mul_ps(_mm512_mul_ps(da, d), _mm512_cvtepi32_ps(_mm512_sub_epi32(iv, mv)));
    _mm512_storeu_ps(pr, _mm512_add_ps(_mm512_loadu_ps(pr), v));
}

_Static_assert(RT_NHEX == 4, "kdot_hex's cases: up to 4 hexadectets");
#define RT__GEMM_AVX512(t, mode, bs)                                                              \
    RT__GEMM_LANES(t, mode, bs, avx512, RT__AVX512, RT_ZPANEL, RT_HEX, struct act_hex, __m512i,   \
                   act_hex_fill, kdot_hex, combine_hex)
RT__KTYPES(RT__GEMM_AVX512)
_Static_assert(sizeof(struct kdec) + RT_GEMM_MAX_ROWS * RT_ZPANEL * RT_NACC * sizeof(float) + 63 +
                       RT_NHEX * sizeof(struct act_hex) + sizeof(struct rt_block_q8_k) <=
                   RT_GEMM_SCRATCH,
               "the AVX-512 k-quant gemm's scratch");

// --- x86-64 AVX2: the 32-element block types (x Q8_0 / Q8_1) ---
/*
 * Eight blocks (256 elements) of a row are decoded at a time to signed
 * bytes q (Q8_0 -128..127, Q4_0 -8..7, Q5_0 -16..15, IQ4_NL -127..113,
 * Q4_1 0..15, Q5_1 0..31) with |q| beside them and the f16 d (and m) as
 * f32. Per token: isum of block k = maddubs(|q|, sign(a, q)) summed by
 * madd — exact, each int16 pair <= 2 * 128 * 127 — the eight block sums in
 * one vector (lane k = block b + k), and the reference's float combine lane
 * by lane:
 *   x Q8_0:  p[b % 4] += (dw * da) * isum
 *   x Q8_1:  p[b % 4] += (dw * da) * isum + mw * sa
 * b is a multiple of 8, so lane k goes to partial k % 4: lanes 0-3 are
 * added before lanes 4-7, the reference's block order. Tail blocks (n / 32
 * not a multiple of 8) go one at a time, after.
 */
struct ldec {
    int8_t q[8][32];
    uint8_t aq[8][32];
    float d[8], m[8];
};

/* Bits 0..31 of v as 0x10 bytes (byte j = 0x10 when bit j is set). */
static inline RT__AVX2 __m256i bits_to_0x10(uint32_t v)
{
    const __m256i shuf = _mm256_setr_epi64x(0x0000000000000000, 0x0101010101010101,
                                            0x0202020202020202, 0x0303030303030303);
    const __m256i bytes = _mm256_shuffle_epi8(_mm256_set1_epi32((int)v), shuf);
    const __m256i sel = _mm256_set1_epi64x((long long)0x8040201008040201ULL);
    const __m256i on = _mm256_cmpeq_epi8(_mm256_and_si256(bytes, sel), sel);
    return _mm256_and_si256(on, _mm256_set1_epi8(0x10));
}

/* Nibble pairs (byte j: element j low, j + 16 high) as 32 bytes 0..15. */
static inline RT__AVX2 __m256i nibbles32(const uint8_t *qs)
{
    const __m128i v = _mm_loadu_si128((const __m128i *)qs);
    const __m256i x = _mm256_set_m128i(_mm_srli_epi16(v, 4), v);
    return _mm256_and_si256(x, _mm256_set1_epi8(0x0F));
}

static inline RT__AVX2 void ldec_put(struct ldec *L, int k, __m256i q, float d, float m)
{
    _mm256_store_si256((__m256i *)L->q[k], q);
    _mm256_store_si256((__m256i *)L->aq[k], _mm256_abs_epi8(q));
    L->d[k] = d;
    L->m[k] = m;
}

static inline RT__AVX2 void ldec_q8_0(const uint8_t *w, struct ldec *L, int k)
{
    ldec_put(L, k, _mm256_loadu_si256((const __m256i *)(w + 2)), rt__f16(rt__ld16(w)), 0.0f);
}
static inline RT__AVX2 void ldec_q4_0(const uint8_t *w, struct ldec *L, int k)
{
    ldec_put(L, k, _mm256_sub_epi8(nibbles32(w + 2), _mm256_set1_epi8(8)), rt__f16(rt__ld16(w)), 0.0f);
}
static inline RT__AVX2 void ldec_q5_0(const uint8_t *w, struct ldec *L, int k)
{
    const __m256i q = _mm256_or_si256(nibbles32(w + 6), bits_to_0x10(rt__ld32(w + 2)));
    ldec_put(L, k, _mm256_sub_epi8(q, _mm256_set1_epi8(16)), rt__f16(rt__ld16(w)), 0.0f);
}
static inline RT__AVX2 void ldec_iq4_nl(const uint8_t *w, struct ldec *L, int k)
{
    const __m128i tab = _mm_loadu_si128((const __m128i *)rt__iq4nl_values);
    ldec_put(L, k, _mm256_shuffle_epi8(_mm256_set_m128i(tab, tab), nibbles32(w + 2)),
             rt__f16(rt__ld16(w)), 0.0f);
}
static inline RT__AVX2 void ldec_q4_1(const uint8_t *w, struct ldec *L, int k)
{
    ldec_put(L, k, nibbles32(w + 4), rt__f16(rt__ld16(w)), rt__f16(rt__ld16(w + 2)));
}
static inline RT__AVX2 void ldec_q5_1(const uint8_t *w, struct ldec *L, int k)
{
    const __m256i q = _mm256_or_si256(nibbles32(w + 8), bits_to_0x10(rt__ld32(w + 4)));
    ldec_put(L, k, q, rt__f16(rt__ld16(w)), rt__f16(rt__ld16(w + 2)));
}

/* The int32 lane vector of block k against activation qs (sum = isum). */
static inline RT__AVX2 __m256i ldot_avx2(const struct ldec *L, int k, const int8_t *qs)
{
    const __m256i q = _mm256_load_si256((const __m256i *)L->q[k]);
    const __m256i aq = _mm256_load_si256((const __m256i *)L->aq[k]);
    const __m256i a = _mm256_loadu_si256((const __m256i *)qs);
    return _mm256_madd_epi16(_mm256_maddubs_epi16(aq, _mm256_sign_epi8(a, q)), _mm256_set1_epi16(1));
}

/* AVX-VNNI: VPDPBUSD does the four products and their sum in one exact step. */
static inline RT__VNNI __m256i ldot_vnni(const struct ldec *L, int k, const int8_t *qs)
{
    const __m256i q = _mm256_load_si256((const __m256i *)L->q[k]);
    const __m256i aq = _mm256_load_si256((const __m256i *)L->aq[k]);
    const __m256i a = _mm256_loadu_si256((const __m256i *)qs);
    return _mm256_dpbusd_avx_epi32(_mm256_setzero_si256(), aq, _mm256_sign_epi8(a, q));
}

/* [sum v0, ..., sum v7] */
static inline RT__AVX2 __m256i hsum8x8_avx2(const __m256i v[8])
{
    const __m256i a = _mm256_hadd_epi32(_mm256_hadd_epi32(v[0], v[1]), _mm256_hadd_epi32(v[2], v[3]));
    const __m256i b = _mm256_hadd_epi32(_mm256_hadd_epi32(v[4], v[5]), _mm256_hadd_epi32(v[6], v[7]));
    return _mm256_add_epi32(_mm256_permute2x128_si256(a, b, 0x20), _mm256_permute2x128_si256(a, b, 0x31));
}

#define RT__LGEMM_X86(t, AT, BS, Q81, SFX, ATTR)                                                  \
    ATTR void rt_gemm_##t##_##SFX(RT__GEMM_PARAMS)                                                \
    {                                                                                             \
        const uint64_t nb = n / 32, ng = nb / 8;                                                  \
        const uint8_t *A = act;                                                                   \
        struct ldec *L = scratch;                                                                 \
        float(*p)[RT_GEMM_PANEL][RT_NACC] =                                                       \
            (float(*)[RT_GEMM_PANEL][RT_NACC])((uint8_t *)scratch + sizeof(struct ldec));         \
        /* per token of the panel: the activation's da (and sa) of 8 blocks */                    \
        float(*da)[8] = (float(*)[8])((uint8_t *)p + RT_GEMM_MAX_ROWS * sizeof *p);               \
        float(*sa)[8] = da + RT_GEMM_PANEL;                                                       \
        for (uint64_t c0 = 0; c0 < nc; c0 += RT_GEMM_PANEL) {                                     \
            const int pc = nc - c0 < RT_GEMM_PANEL ? (int)(nc - c0) : RT_GEMM_PANEL;              \
            zero_f32_avx2(&p[0][0][0], nr * sizeof *p / sizeof(float));                          \
            for (uint64_t g = 0; g < ng; g++) {                                                   \
                for (int j = 0; j < pc; j++) {                                                    \
                    const AT *a = (const AT *)(A + (c0 + (uint64_t)j) * astride) + 8 * g;         \
                    for (int k = 0; k < 8; k++) {                                                 \
                        da[j][k] = rt__f16(a[k].d);                                               \
                        if (Q81) sa[j][k] = rt__f16(((const struct rt_block_q8_1 *)a)[k].s);      \
                    }                                                                             \
                }                                                                                 \
                for (uint64_t r = 0; r < nr; r++) {                                               \
                    const uint8_t *w = (const uint8_t *)w_rows + r * stride + 8 * g * (BS);       \
                    for (int k = 0; k < 8; k++) ldec_##t(w + (uint64_t)k * (BS), L, k);           \
                    const __m256 dw = _mm256_load_ps(L->d), mw = _mm256_load_ps(L->m);            \
                    for (int j = 0; j < pc; j++) {                                                \
                        const AT *a = (const AT *)(A + (c0 + (uint64_t)j) * astride) + 8 * g;     \
                        __m256i v[8];                                                             \
                        for (int k = 0; k < 8; k++) v[k] = ldot_##SFX(L, k, a[k].qs);             \
                        const __m256 is = _mm256_cvtepi32_ps(hsum8x8_avx2(v));                    \
                        __m256 x = _mm256_mul_ps(_mm256_mul_ps(dw, _mm256_loadu_ps(da[j])), is);  \
                        if (Q81) x = _mm256_add_ps(x, _mm256_mul_ps(mw, _mm256_loadu_ps(sa[j]))); \
                        __m128 acc = _mm_loadu_ps(p[r][j]);                                       \
                        acc = _mm_add_ps(acc, _mm256_castps256_ps128(x));                         \
                        acc = _mm_add_ps(acc, _mm256_extractf128_ps(x, 1));                       \
                        _mm_storeu_ps(p[r][j], acc);                                              \
                    }                                                                             \
                }                                                                                 \
            }                                                                                     \
            for (uint64_t b = ng * 8; b < nb; b++) /* tail blocks, in order */                    \
                for (uint64_t r = 0; r < nr; r++) {                                               \
                    ldec_##t((const uint8_t *)w_rows + r * stride + b * (BS), L, 0);              \
                    for (int j = 0; j < pc; j++) {                                                \
                        const AT *a = (const AT *)(A + (c0 + (uint64_t)j) * astride) + b;         \
                        const int32_t is = hsum8_avx2(ldot_##SFX(L, 0, a->qs));                   \
                        float x = (L->d[0] * rt__f16(a->d)) * (float)is;                          \
                        if (Q81) x = x + L->m[0] * rt__f16(((const struct rt_block_q8_1 *)a)->s); \
                        p[r][j][b % RT_NACC] += x;                                                \
                    }                                                                             \
                }                                                                                 \
            for (uint64_t r = 0; r < nr; r++)                                                     \
                for (int j = 0; j < pc; j++) out[(c0 + (uint64_t)j) * ldo + r] = rt__reduce4(p[r][j]); \
        }                                                                                         \
    }

_Static_assert(sizeof(struct ldec) + RT_GEMM_MAX_ROWS * RT_GEMM_PANEL * RT_NACC * sizeof(float) +
                       2 * RT_GEMM_PANEL * 8 * sizeof(float) <= RT_GEMM_SCRATCH,
               "gemm scratch holds the decoded blocks, the partials and the activation scales");
_Static_assert(offsetof(struct ldec, d) % 32 == 0 && offsetof(struct ldec, m) % 32 == 0,
               "32-byte aligned scales in struct ldec");

#define RT__LTYPES(X)                                                                             \
    X(q8_0, struct rt_block_q8_0, RT_BS_Q8_0, 0) X(q4_0, struct rt_block_q8_0, RT_BS_Q4_0, 0)     \
        X(q5_0, struct rt_block_q8_0, RT_BS_Q5_0, 0) X(iq4_nl, struct rt_block_q8_0, RT_BS_IQ4_NL, 0) \
            X(q4_1, struct rt_block_q8_1, RT_BS_Q4_1, 1) X(q5_1, struct rt_block_q8_1, RT_BS_Q5_1, 1)
#define RT__LGEMM_AVX2(t, AT, BS, Q81) RT__LGEMM_X86(t, AT, BS, Q81, avx2, RT__AVX2)
#define RT__LGEMM_VNNI(t, AT, BS, Q81) RT__LGEMM_X86(t, AT, BS, Q81, vnni, RT__VNNI)
RT__LTYPES(RT__LGEMM_AVX2)
RT__LTYPES(RT__LGEMM_VNNI)

#endif /* RT_HAVE_X86 */
