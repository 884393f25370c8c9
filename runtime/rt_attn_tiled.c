/*
 * runtime/rt_attn_tiled.c — the tiled attention path (llama.cpp's "tiled"
 * flash attention, taken by rt_eval calls of >= RT_FA_TILE tokens with an
 * f16 cache; rt_attn.c picks it), plain and with its x86 AVX2 and aarch64
 * NEON helpers, which do the plain operations in the same order: every CPU
 * gives the same bits.
 *
 * The path runs a group of up to RT_FA_QT query tokens (tokens b0 ..
 * b0 + nq - 1 of the step) and the n_rep query heads that share kv head g:
 * each tile's K and V rows are converted to f32 once for the whole group.
 * Every query does exactly its own operations, in the same order as if it
 * were alone (its own tiles, its own last tile length, its own masked
 * positions), so the result does not depend on the grouping — nor on the
 * thread count or the batch size.
 *
 * Sliding layers: tiles stay where llama.cpp's are (cache cell = position
 * while its cache has not wrapped, as in a perplexity chunk): the first tile
 * of a query starts at the multiple of RT_FA_TILE at or below its `first`
 * position, and its positions before `first` are masked (-inf, weight 0,
 * never accumulated), as whole tiles before it are skipped.
 */
#include "runtime/rt_int.h"
#include "runtime/rt_ops.h"

#include <math.h>
#include <string.h>

#if RT_FWD_NEON
#include <arm_neon.h>
#endif
#if RT_FWD_X86
#include <immintrin.h>
#endif

/* exp of the tiled softmax: x[i] = e^(x[i] - m), i < n. A fixed sequence of
 * f32 operations with fused multiply-adds, the same on the plain (fmaf),
 * AVX2 and NEON paths, so every CPU gives the same bits: Arm's
 * optimized-routines vector expf (as ggml's ggml_v_expf): n = round(y / ln 2)
 * by one fma and the 1.5 * 2^23 shift, r = y - n ln 2 in two fmas, 2^n from
 * the shifted value's bits, 2^n + 2^n poly(r) with a degree-5 polynomial in
 * five fmas. Within 1.96 ulp of e^y on [-87.3, 0], the softmax's range
 * (1.954 at most, checked on every float there); y < -87.3 (masked
 * positions: -inf) gives exactly 0, y > 88.3 is taken as 88.3, NaN stays
 * NaN. */
#define RT_EXP_LO -87.3f
#define RT_EXP_HI 88.3f
/* the constants, shared by the plain, AVX2 and NEON paths (the same bits
 * need the same constants and the same operations): */
#define RT_EXP_SHIFT 0x1.8p23f /* 1.5 * 2^23: adding it rounds to an integer */
#define RT_EXP_INV_LN2 0x1.715476p+0f
#define RT_EXP_NLN2_HI -0x1.62e4p-1f /* -ln 2 in two parts */
#define RT_EXP_NLN2_LO -0x1.7f7d1cp-20f
/* e = scale + scale * poly(r), poly(r) = C4 r + r^2 ((C2 r + C3) + r^2 (C0 r
 * + C1)): with the path's type T, fma FMA(a, b, c) = a * b + c (one
 * rounding), multiply and broadcast */
#define RT__EXP_POLY(T, e, r, scale, FMA, MUL, SET)                                               \
    do {                                                                                          \
        const T r2_ = MUL(r, r);                                                                  \
        const T p_ = FMA(SET(0x1.0e4020p-7f), r, SET(0x1.573e2ep-5f));                            \
        T q_ = FMA(SET(0x1.555e66p-3f), r, SET(0x1.fffdb6p-2f));                                  \
        q_ = FMA(p_, r2_, q_);                                                                    \
        (e) = FMA(FMA(q_, r2_, MUL(SET(0x1.ffffecp-1f), r)), scale, scale);                       \
    } while (0)
#define RT__FMUL(a, b) ((a) * (b))
#define RT__FSET(c) (c)
/* e^y for y in [-87.3, 88.3] */
static inline float exp_poly(float y)
{
    const float z = fmaf(y, RT_EXP_INV_LN2, RT_EXP_SHIFT);
    const float n = z - RT_EXP_SHIFT;
    const float r = fmaf(n, RT_EXP_NLN2_LO, fmaf(n, RT_EXP_NLN2_HI, y));
    uint32_t b;
    memcpy(&b, &z, 4);
    b = (b << 23) + 0x3f800000u; /* 2^n: n sits in z's low mantissa bits */
    float scale, e;
    memcpy(&scale, &b, 4);
    RT__EXP_POLY(float, e, r, scale, fmaf, RT__FMUL, RT__FSET);
    return e;
}

/* r_j = s_j + s_{j+4}, then (r_0 + r_1) + (r_2 + r_3): the reduction of the
 * tiled attention's 8 partials (its dot products and its sum of exps). */
static inline float tsum8_plain(const float *s)
{
    float r[4];
    for (int j = 0; j < 4; j++) r[j] = s[j] + s[j + 4];
    return (r[0] + r[1]) + (r[2] + r[3]);
}

/* exp_poly over a tile, n % 8 == 0 (the callers pad with -inf, whose exp is
 * 0); returns the sum of the exps: element i added to partial i % 8, the
 * partials reduced by tsum8_plain. */
static inline float exp_tile_plain(float *x, float m, uint32_t n)
{
    float s[8] = {0};
    for (uint32_t i = 0; i < n; i++) {
        float y = x[i] - m;
        if (y < RT_EXP_LO) {
            x[i] = 0.0f;
        } else {
            y = y > RT_EXP_HI ? RT_EXP_HI : y;
            x[i] = exp_poly(y);
        }
        s[i % 8] += x[i];
    }
    return tsum8_plain(s);
}

/* The largest of x[0..n) (-inf pads included, NaN ignored); exact, so the
 * vector paths' lane order does not matter (but for the sign of a zero
 * maximum, which no later operation sees). */
static inline float tile_max_plain(const float *x, uint32_t n)
{
    float m = -INFINITY;
    for (uint32_t i = 0; i < n; i++) m = x[i] > m ? x[i] : m;
    return m;
}

#if RT_FWD_X86
/* The tiled attention's AVX2 helpers (FMA: rt_cpu's avx2 includes it); each
 * does its plain twin's operations on every element, in the same order. */
#define RT__AVXF __attribute__((target("avx2,f16c,fma")))

/* acc_tile_plain's operations: the accumulators stay in registers, 64
 * elements at a time, across the tile. hd % 8 == 0. */
RT__AVXF static inline void acc_tile_avx(float *a, const float *v, const float *p, float ms,
                                         uint32_t t0, uint32_t t1, uint32_t hd)
{
    const __m256 vms = _mm256_set1_ps(ms);
    for (uint32_t c0 = 0; c0 < hd; c0 += 64) {
        const uint32_t nv = (hd - c0 < 64 ? hd - c0 : 64) / 8;
        __m256 acc[8];
        for (uint32_t j = 0; j < nv; j++) {
            acc[j] = _mm256_loadu_ps(a + c0 + 8 * j);
            if (ms != 1.0f) acc[j] = _mm256_mul_ps(acc[j], vms);
        }
        for (uint32_t tk = t0; tk < t1; tk++) {
            const __m256 pp = _mm256_set1_ps(p[tk]);
            const float *vr = v + (uint64_t)tk * hd + c0;
            for (uint32_t j = 0; j < nv; j++) acc[j] = _mm256_fmadd_ps(pp, _mm256_loadu_ps(vr + 8 * j), acc[j]);
        }
        for (uint32_t j = 0; j < nv; j++) _mm256_storeu_ps(a + c0 + 8 * j, acc[j]);
    }
}

/* exp_tile_plain's operations, eight lanes (= the eight partials) at a time;
 * n % 8 == 0. */
RT__AVXF static inline float exp_tile_avx(float *x, float m, uint32_t n)
{
    const __m256 vm = _mm256_set1_ps(m), lo = _mm256_set1_ps(RT_EXP_LO), hi = _mm256_set1_ps(RT_EXP_HI);
    const __m256 shift = _mm256_set1_ps(RT_EXP_SHIFT);
    __m256 s = _mm256_setzero_ps();
    for (uint32_t i = 0; i < n; i += 8) {
        __m256 y = _mm256_sub_ps(_mm256_loadu_ps(x + i), vm);
        const __m256 small = _mm256_cmp_ps(y, lo, _CMP_LT_OQ);
        y = _mm256_min_ps(hi, y); /* hi < y ? hi : y: NaN stays */
        const __m256 z = _mm256_fmadd_ps(y, _mm256_set1_ps(RT_EXP_INV_LN2), shift);
        const __m256 nf = _mm256_sub_ps(z, shift);
        const __m256 r = _mm256_fmadd_ps(nf, _mm256_set1_ps(RT_EXP_NLN2_LO),
                                         _mm256_fmadd_ps(nf, _mm256_set1_ps(RT_EXP_NLN2_HI), y));
        const __m256 scale = _mm256_castsi256_ps(
            _mm256_add_epi32(_mm256_slli_epi32(_mm256_castps_si256(z), 23), _mm256_set1_epi32(0x3f800000)));
        __m256 e;
        RT__EXP_POLY(__m256, e, r, scale, _mm256_fmadd_ps, _mm256_mul_ps, _mm256_set1_ps);
        e = _mm256_andnot_ps(small, e);
        _mm256_storeu_ps(x + i, e);
        s = _mm256_add_ps(s, e);
    }
    float t[8];
    _mm256_storeu_ps(t, s);
    return tsum8_plain(t);
}

/* tdot_plain's operations: lane j = partial j. */
RT__AVXF static inline float tdot_avx(const float *x, const float *y, uint32_t n)
{
    __m256 acc = _mm256_mul_ps(_mm256_loadu_ps(x), _mm256_loadu_ps(y));
    for (uint32_t i = 8; i < n; i += 8)
        acc = _mm256_fmadd_ps(_mm256_loadu_ps(x + i), _mm256_loadu_ps(y + i), acc);
    float t[8];
    _mm256_storeu_ps(t, acc);
    return tsum8_plain(t);
}

/* The scores of one head (query q) against the tile's K rows kt: kq[tk] =
 * -inf for tk < t0 (masked), else rt_attn_score(tdot_plain(q, K row tk),
 * scale, cap), for tk < qt. Eight K rows at a time, each row's partials in
 * one vector as tdot_avx keeps them; the eight are reduced together: the
 * halves of rows j and j + 4 added in one vector (tsum8_plain's r_j = s_j +
 * s_{j+4}), then two rounds of pairwise horizontal adds give (r_0 + r_1) +
 * (r_2 + r_3) for every row, tsum8_plain's order. Four rows the same way in
 * 128-bit vectors, the rest by tdot_avx. hd % 8 == 0. */
RT__AVXF static inline void kq_tile_avx(float *kq, const float *q, const float *kt, uint32_t t0, uint32_t qt,
                                        uint32_t hd, float scale, float cap)
{
    uint32_t tk = 0;
    for (; tk < t0 && tk < qt; tk++) kq[tk] = -INFINITY;
    for (; tk + 8 <= qt; tk += 8) {
        const float *k = kt + (uint64_t)tk * hd;
        __m256 s[8];
        const __m256 q0 = _mm256_loadu_ps(q);
        for (int j = 0; j < 8; j++) s[j] = _mm256_mul_ps(q0, _mm256_loadu_ps(k + (uint64_t)j * hd));
        for (uint32_t i = 8; i < hd; i += 8) {
            const __m256 qi = _mm256_loadu_ps(q + i);
            for (int j = 0; j < 8; j++) s[j] = _mm256_fmadd_ps(qi, _mm256_loadu_ps(k + (uint64_t)j * hd + i), s[j]);
        }
        __m256 b[4];
        for (int j = 0; j < 4; j++)
            b[j] = _mm256_add_ps(_mm256_permute2f128_ps(s[j], s[j + 4], 0x20),
                                 _mm256_permute2f128_ps(s[j], s[j + 4], 0x31));
        const __m256 d = _mm256_hadd_ps(_mm256_hadd_ps(b[0], b[1]), _mm256_hadd_ps(b[2], b[3]));
        if (cap > 0.0f) {
            float t[8];
            _mm256_storeu_ps(t, d);
            for (int j = 0; j < 8; j++) kq[tk + j] = rt_attn_score(t[j], scale, cap);
        } else {
            _mm256_storeu_ps(kq + tk, _mm256_mul_ps(d, _mm256_set1_ps(scale)));
        }
    }
    if (tk + 4 <= qt) {
        const float *k = kt + (uint64_t)tk * hd;
        __m256 s[4];
        const __m256 q0 = _mm256_loadu_ps(q);
        for (int j = 0; j < 4; j++) s[j] = _mm256_mul_ps(q0, _mm256_loadu_ps(k + (uint64_t)j * hd));
        for (uint32_t i = 8; i < hd; i += 8) {
            const __m256 qi = _mm256_loadu_ps(q + i);
            for (int j = 0; j < 4; j++) s[j] = _mm256_fmadd_ps(qi, _mm256_loadu_ps(k + (uint64_t)j * hd + i), s[j]);
        }
        __m128 r[4];
        for (int j = 0; j < 4; j++) r[j] = _mm_add_ps(_mm256_castps256_ps128(s[j]), _mm256_extractf128_ps(s[j], 1));
        const __m128 d = _mm_hadd_ps(_mm_hadd_ps(r[0], r[1]), _mm_hadd_ps(r[2], r[3]));
        if (cap > 0.0f) {
            float t[4];
            _mm_storeu_ps(t, d);
            for (int j = 0; j < 4; j++) kq[tk + j] = rt_attn_score(t[j], scale, cap);
        } else {
            _mm_storeu_ps(kq + tk, _mm_mul_ps(d, _mm_set1_ps(scale)));
        }
        tk += 4;
    }
    for (; tk < qt; tk++) kq[tk] = rt_attn_score(tdot_avx(q, kt + (uint64_t)tk * hd, hd), scale, cap);
}

/* acc_tile_plain for H (1 or 2) heads at once (heads a + e * hd, weights p
 * + e * RT_FA_TILE, ms[e]), columns c0 .. c0 + 8 NV, the accumulators in
 * registers across the tile. */
RT__AVXF static inline void acc_cols_avx(float *a, const float *v, const float *p, const float *ms, uint32_t t0,
                                         uint32_t t1, uint32_t hd, uint32_t c0, const int H, const int NV)
{
    __m256 acc[2][8];
    for (int e = 0; e < H; e++) {
        const __m256 vms = _mm256_set1_ps(ms[e]);
        for (int j = 0; j < NV; j++) {
            acc[e][j] = _mm256_loadu_ps(a + (uint64_t)e * hd + c0 + 8 * j);
            if (ms[e] != 1.0f) acc[e][j] = _mm256_mul_ps(acc[e][j], vms);
        }
    }
    const float *vr = v + (uint64_t)t0 * hd + c0;
    for (uint32_t tk = t0; tk < t1; tk++, vr += hd)
        for (int e = 0; e < H; e++) {
            const __m256 pp = _mm256_broadcast_ss(p + e * RT_FA_TILE + tk);
            for (int j = 0; j < NV; j++) acc[e][j] = _mm256_fmadd_ps(pp, _mm256_loadu_ps(vr + 8 * j), acc[e][j]);
        }
    for (int e = 0; e < H; e++)
        for (int j = 0; j < NV; j++) _mm256_storeu_ps(a + (uint64_t)e * hd + c0 + 8 * j, acc[e][j]);
}

/* The accumulators of H heads over a tile (acc_tile_plain's operations):
 * head_dim 32 takes both heads in eight registers, multiples of 64 one head
 * 64 columns at a time, other widths acc_tile_avx. */
RT__AVXF static inline void acc_tile_x86(float *a, const float *v, const float *p, const float *ms, uint32_t t0,
                                         uint32_t t1, uint32_t hd, const int H)
{
    if (hd == 32 && H == 2) {
        acc_cols_avx(a, v, p, ms, t0, t1, hd, 0, 2, 4);
    } else if (hd % 64 == 0) {
        for (int e = 0; e < H; e++)
            for (uint32_t c0 = 0; c0 < hd; c0 += 64)
                acc_cols_avx(a + (uint64_t)e * hd, v, p + e * RT_FA_TILE, ms + e, t0, t1, hd, c0, 1, 8);
    } else {
        for (int e = 0; e < H; e++)
            acc_tile_avx(a + (uint64_t)e * hd, v, p + e * RT_FA_TILE, ms[e], t0, t1, hd);
    }
}

/* acc[0 .. n) = 0 (n % 8 == 0) by vector stores: glibc's memset of a few
 * KiB is `rep stosb`, which valgrind's instruction counts (bench/insn_x86.sh)
 * take as one instruction per byte. */
RT__AVXF static inline void zero_avx(float *acc, uint64_t n)
{
    __m256 z = _mm256_setzero_ps();
    __asm__("" : "+x"(z)); /* hidden zero: GCC would make the loop a memset call */
    for (uint64_t i = 0; i < n; i += 8) _mm256_storeu_ps(acc + i, z);
}

/* One f16 cache row (n % 8 == 0 elements) to f32 by VCVTPH2PS: the exact
 * conversion rt__kv_load makes. */
RT__AVXF static inline void h2f_row_avx(const uint8_t *p, uint32_t n, float *out)
{
    for (uint32_t i = 0; i < n; i += 8)
        _mm256_storeu_ps(out + i, _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(p + 2 * (uint64_t)i))));
}

/* tile_max_plain (n % 8 == 0): _mm256_max_ps(x, m) is x > m ? x : m. */
RT__AVXF static inline float tile_max_avx(const float *x, uint32_t n)
{
    __m256 m = _mm256_set1_ps(-INFINITY);
    for (uint32_t i = 0; i < n; i += 8) m = _mm256_max_ps(_mm256_loadu_ps(x + i), m);
    float t[8];
    _mm256_storeu_ps(t, m);
    return tile_max_plain(t, 8);
}
#endif

/* The tiled attention's score dot x . y over n floats (a multiple of 8,
 * >= 8): partial j = x_j y_j, then product i fused into partial i % 8 (p =
 * fma(x_i, y_i, p)), the partials reduced by tsum8_plain — the same
 * operations with 8 float lanes (x86) or two float32x4 (aarch64), so every
 * path gives the same bits. */
static inline float tdot_plain(const float *x, const float *y, uint32_t n)
{
    float p[8];
    for (uint32_t i = 0; i < 8; i++) p[i] = x[i] * y[i];
    for (uint32_t i = 8; i < n; i++) p[i % 8] = fmaf(x[i], y[i], p[i % 8]);
    return tsum8_plain(p);
}

/* a[i] = a[i] * ms (when ms != 1), then a[i] = fma(p[tk], v[tk][i], a[i])
 * for tk = t0 .. t1 - 1 in that order, element by element. */
static inline void acc_tile_plain(float *a, const float *v, const float *p, float ms, uint32_t t0,
                                  uint32_t t1, uint32_t hd)
{
    if (ms != 1.0f)
        for (uint32_t i = 0; i < hd; i++) a[i] *= ms;
    for (uint32_t tk = t0; tk < t1; tk++)
        for (uint32_t i = 0; i < hd; i++) a[i] = fmaf(p[tk], v[(uint64_t)tk * hd + i], a[i]);
}

#if RT_FWD_NEON
#define RT__NFMA(a, b, c) vfmaq_f32(c, a, b) /* a * b + c, fused */
#define RT__TNEON static inline __attribute__((always_inline))

/* tsum8_plain of the partials s0 = (s_0..s_3), s1 = (s_4..s_7) */
RT__TNEON float tsum8_neon(float32x4_t s0, float32x4_t s1)
{
    const float32x4_t r = vaddq_f32(s0, s1);
    return (vgetq_lane_f32(r, 0) + vgetq_lane_f32(r, 1)) + (vgetq_lane_f32(r, 2) + vgetq_lane_f32(r, 3));
}

/* acc_tile_plain for H (1 or 2) heads at once, each V row loaded once for
 * both: heads a + e * hd, weights p + e * RT_FA_TILE, ms[e]. The
 * accumulators stay in registers across the tile, NV * 4 columns at a time
 * (NV 8 or 4; hd % 16 == 0); vfmaq_laneq_f32(a, v, P, L) is
 * fma(P[L], v, a) on every lane. */
RT__TNEON void acc_cols_neon(float *a, const float *v, const float *p, const float *ms, uint32_t t0,
                             uint32_t t1, uint32_t hd, uint32_t c0, const int H, const int NV)
{
    float32x4_t acc[2][8];
    for (int e = 0; e < H; e++) {
        const float32x4_t vms = vdupq_n_f32(ms[e]);
        for (int j = 0; j < NV; j++) {
            acc[e][j] = vld1q_f32(a + (uint64_t)e * hd + c0 + 4 * j);
            if (ms[e] != 1.0f) acc[e][j] = vmulq_f32(acc[e][j], vms);
        }
    }
    const float *vr = v + (uint64_t)t0 * hd + c0, *pp = p + t0;
    uint32_t tk = t0;
    for (; tk + 4 <= t1; tk += 4, vr += 4 * (uint64_t)hd, pp += 4) {
        float32x4_t pv[2];
        for (int e = 0; e < H; e++) pv[e] = vld1q_f32(pp + e * RT_FA_TILE);
#define RT__ACC_STEP(L)                                                                           \
    for (int j = 0; j < NV; j += 2) {                                                             \
        const float32x4_t v0 = vld1q_f32(vr + (L) * (uint64_t)hd + 4 * j);                        \
        const float32x4_t v1 = vld1q_f32(vr + (L) * (uint64_t)hd + 4 * j + 4);                    \
        for (int e = 0; e < H; e++) {                                                             \
            acc[e][j] = vfmaq_laneq_f32(acc[e][j], v0, pv[e], L);                                 \
            acc[e][j + 1] = vfmaq_laneq_f32(acc[e][j + 1], v1, pv[e], L);                         \
        }                                                                                         \
    }
        RT__ACC_STEP(0)
        RT__ACC_STEP(1)
        RT__ACC_STEP(2)
        RT__ACC_STEP(3)
#undef RT__ACC_STEP
    }
    for (; tk < t1; tk++, vr += hd, pp++) {
        for (int j = 0; j < NV; j++) {
            const float32x4_t vv = vld1q_f32(vr + 4 * j);
            for (int e = 0; e < H; e++) acc[e][j] = vfmaq_f32(acc[e][j], vv, vld1q_dup_f32(pp + e * RT_FA_TILE));
        }
    }
    for (int e = 0; e < H; e++)
        for (int j = 0; j < NV; j++) vst1q_f32(a + (uint64_t)e * hd + c0 + 4 * j, acc[e][j]);
}

RT__TNEON void acc_tile_neon(float *a, const float *v, const float *p, const float *ms, uint32_t t0,
                             uint32_t t1, uint32_t hd, const int H)
{
    uint32_t c0 = 0;
    for (; c0 + 32 <= hd; c0 += 32) acc_cols_neon(a, v, p, ms, t0, t1, hd, c0, H, 8);
    if (c0 < hd) acc_cols_neon(a, v, p, ms, t0, t1, hd, c0, H, 4); /* hd % 32 == 16 */
}

/* tdot_plain: partials 0..3 in a0, 4..7 in a1 */
RT__TNEON float tdot_neon(const float *x, const float *y, uint32_t n)
{
    float32x4_t a0 = vmulq_f32(vld1q_f32(x), vld1q_f32(y)), a1 = vmulq_f32(vld1q_f32(x + 4), vld1q_f32(y + 4));
    for (uint32_t i = 8; i < n; i += 8) {
        a0 = vfmaq_f32(a0, vld1q_f32(x + i), vld1q_f32(y + i));
        a1 = vfmaq_f32(a1, vld1q_f32(x + i + 4), vld1q_f32(y + i + 4));
    }
    return tsum8_neon(a0, a1);
}

/* The scores of H (1 or 2) heads (queries q + e * hd, scores kq + e *
 * RT_FA_TILE) against the tile's K rows: kq[tk] = rt_attn_score(tdot_plain(
 * q, K row tk), scale, cap) for t0 <= tk < qt, -inf for tk < t0 (masked).
 * Four K rows at a time, each loaded once for the H heads; the four rows'
 * final reductions as pairwise adds across their vectors, which are
 * tsum8_plain's additions in its order. hd % 8 == 0. */
RT__TNEON void kq_tile_neon(float *kq, const float *q, const float *kt, uint32_t t0, uint32_t qt,
                            uint32_t hd, float scale, float cap, const int H)
{
    const float32x4_t vs = vdupq_n_f32(scale);
    for (uint32_t tk = 0; tk < t0 && tk < qt; tk++)
        for (int e = 0; e < H; e++) kq[e * RT_FA_TILE + tk] = -INFINITY;
    uint32_t tk = t0;
    for (; tk + 4 <= qt; tk += 4) {
        float32x4_t s[2][4][2];
        const float *k = kt + (uint64_t)tk * hd, *qp = q;
        /* eight columns of the H queries and the four rows: OP(s, q, k) */
#define RT__KQ_CHUNK(OP0, OP1)                                                                    \
    do {                                                                                          \
        float32x4_t q0[2], q1[2];                                                                 \
        for (int e = 0; e < H; e++) {                                                             \
            q0[e] = vld1q_f32(qp + (uint64_t)e * hd);                                             \
            q1[e] = vld1q_f32(qp + (uint64_t)e * hd + 4);                                         \
        }                                                                                         \
        for (int j = 0; j < 4; j++) {                                                             \
            const float32x4_t k0 = vld1q_f32(k + (uint64_t)j * hd);                               \
            const float32x4_t k1 = vld1q_f32(k + (uint64_t)j * hd + 4);                           \
            for (int e = 0; e < H; e++) {                                                         \
                s[e][j][0] = OP0;                                                                 \
                s[e][j][1] = OP1;                                                                 \
            }                                                                                     \
        }                                                                                         \
    } while (0)
        RT__KQ_CHUNK(vmulq_f32(q0[e], k0), vmulq_f32(q1[e], k1));
        k += 8, qp += 8;
        for (uint32_t i = 8; i < hd; i += 8, k += 8, qp += 8)
            RT__KQ_CHUNK(vfmaq_f32(s[e][j][0], q0[e], k0), vfmaq_f32(s[e][j][1], q1[e], k1));
#undef RT__KQ_CHUNK
        for (int e = 0; e < H; e++) {
            float32x4_t r[4];
            for (int j = 0; j < 4; j++) r[j] = vaddq_f32(s[e][j][0], s[e][j][1]);
            const float32x4_t d = vpaddq_f32(vpaddq_f32(r[0], r[1]), vpaddq_f32(r[2], r[3]));
            float *o = kq + e * RT_FA_TILE + tk;
            if (cap > 0.0f) {
                float t[4];
                vst1q_f32(t, d);
                for (int j = 0; j < 4; j++) o[j] = rt_attn_score(t[j], scale, cap);
            } else {
                vst1q_f32(o, vmulq_f32(d, vs));
            }
        }
    }
    for (; tk < qt; tk++)
        for (int e = 0; e < H; e++)
            kq[e * RT_FA_TILE + tk] =
                rt_attn_score(tdot_neon(q + (uint64_t)e * hd, kt + (uint64_t)tk * hd, hd), scale, cap);
}

/* exp_tile_plain's operations, two vectors (= the eight partials) at a time
 * (the x86 exp_tile_avx's sequence: the same bits); n % 8 == 0. */
RT__TNEON float32x4_t exp4_neon(float32x4_t x, float32x4_t vm)
{
    const float32x4_t lo = vdupq_n_f32(RT_EXP_LO), hi = vdupq_n_f32(RT_EXP_HI);
    const float32x4_t shift = vdupq_n_f32(RT_EXP_SHIFT);
    float32x4_t y = vsubq_f32(x, vm);
    const uint32x4_t small = vcltq_f32(y, lo);
    y = vminq_f32(y, hi); /* FMIN: NaN stays */
    const float32x4_t z = RT__NFMA(y, vdupq_n_f32(RT_EXP_INV_LN2), shift);
    const float32x4_t nf = vsubq_f32(z, shift);
    const float32x4_t r = RT__NFMA(nf, vdupq_n_f32(RT_EXP_NLN2_LO), RT__NFMA(nf, vdupq_n_f32(RT_EXP_NLN2_HI), y));
    const float32x4_t scale = vreinterpretq_f32_u32(
        vaddq_u32(vshlq_n_u32(vreinterpretq_u32_f32(z), 23), vdupq_n_u32(0x3f800000)));
    float32x4_t e;
    RT__EXP_POLY(float32x4_t, e, r, scale, RT__NFMA, vmulq_f32, vdupq_n_f32);
    return vreinterpretq_f32_u32(vbicq_u32(vreinterpretq_u32_f32(e), small));
}

RT__TNEON float exp_tile_neon(float *x, float m, uint32_t n)
{
    const float32x4_t vm = vdupq_n_f32(m);
    float32x4_t s0 = vdupq_n_f32(0.0f), s1 = vdupq_n_f32(0.0f);
    for (uint32_t i = 0; i < n; i += 8) {
        const float32x4_t e0 = exp4_neon(vld1q_f32(x + i), vm), e1 = exp4_neon(vld1q_f32(x + i + 4), vm);
        vst1q_f32(x + i, e0);
        vst1q_f32(x + i + 4, e1);
        s0 = vaddq_f32(s0, e0);
        s1 = vaddq_f32(s1, e1);
    }
    return tsum8_neon(s0, s1);
}

/* tile_max_plain (n % 8 == 0): FMAXNM ignores a NaN operand, as the plain
 * comparison does */
RT__TNEON float tile_max_neon(const float *x, uint32_t n)
{
    float32x4_t m0 = vdupq_n_f32(-INFINITY), m1 = m0;
    for (uint32_t i = 0; i < n; i += 8) {
        m0 = vmaxnmq_f32(m0, vld1q_f32(x + i));
        m1 = vmaxnmq_f32(m1, vld1q_f32(x + i + 4));
    }
    return vmaxnmvq_f32(vmaxnmq_f32(m0, m1));
}
#endif

/* The tiled body, inlined into a plain and (x86) an AVX2 instance: simd
 * picks the vector helpers, whose operations are the plain ones'; NEON
 * always takes its own. KQ_TILE / ACC_TILE handle H (1 or 2) heads of one
 * query at once. */
#if RT_FWD_X86
#define KQ_ONE(q, k, hd) (simd ? tdot_avx(q, k, hd) : tdot_plain(q, k, hd))
#define ACC_ONE(a, v, p, ms, t0, t1, hd)                                                          \
    (simd ? acc_tile_avx(a, v, p, ms, t0, t1, hd) : acc_tile_plain(a, v, p, ms, t0, t1, hd))
#define EXP_TILE(x, m, n) (simd ? exp_tile_avx(x, m, n) : exp_tile_plain(x, m, n))
#define TILE_MAX(x, n) (simd ? tile_max_avx(x, n) : tile_max_plain(x, n))
/* the f16 cache rows of a tile: inline VCVTPH2PS on the AVX2 instances */
#define KV_LOAD(row, out)                                                                         \
    do {                                                                                          \
        if (simd && kv->type == RT_KV_F16 && hd % 8 == 0)                                         \
            h2f_row_avx((row) + 2 * (uint64_t)g * hd, hd, out);                                   \
        else                                                                                      \
            rt__kv_load(kv, row, g * hd, hd, out);                                                \
    } while (0)
#elif RT_FWD_NEON
#define EXP_TILE(x, m, n) exp_tile_neon(x, m, n)
#define TILE_MAX(x, n) tile_max_neon(x, n)
#define KV_LOAD(row, out) rt__kv_load(kv, row, g * hd, hd, out)
#else
#define KQ_ONE(q, k, hd) ((void)simd, tdot_plain(q, k, hd))
#define ACC_ONE(a, v, p, ms, t0, t1, hd) acc_tile_plain(a, v, p, ms, t0, t1, hd)
#define EXP_TILE(x, m, n) exp_tile_plain(x, m, n)
#define TILE_MAX(x, n) tile_max_plain(x, n)
#define KV_LOAD(row, out) ((void)simd, rt__kv_load(kv, row, g * hd, hd, out))
#endif

static inline __attribute__((always_inline)) void
attn_tiled_body(const struct rt_ctx *c, struct rt_thread_scratch *ts, uint32_t il, uint32_t g,
                uint32_t pos0, uint32_t b0, uint32_t nq, float scale, const bool simd, const uint32_t hdc)
{
    const struct rt_hparams *hp = &c->m->hp;
    const struct rt_kv *kv = &c->kv;
    /* hdc: head_dim as a constant in the specialised instances, 0 = read it */
    const uint32_t hd = hdc ? hdc : hp->head_dim, n_rep = hp->n_head / hp->n_head_kv, nh = nq * n_rep;
    const uint64_t qdim = (uint64_t)hp->n_head * hd;
    float *M = ts->ms, *S = ts->ms + nh;
    const float cap = hp->attn_softcap;
    uint32_t first[RT_FA_QT], n_kv[RT_FA_QT];
    uint32_t lo = UINT32_MAX, hi = 0; /* tiles any query of the group needs */
    for (uint32_t qi = 0; qi < nq; qi++) {
        first[qi] = rt_swa_first(hp, il, pos0 + b0 + qi);
        n_kv[qi] = pos0 + b0 + qi + 1; /* causal: positions 0 .. pos */
        const uint32_t t0 = first[qi] / RT_FA_TILE * RT_FA_TILE;
        lo = t0 < lo ? t0 : lo;
        hi = n_kv[qi] > hi ? n_kv[qi] : hi;
    }
    uint32_t fmin = UINT32_MAX;
    for (uint32_t qi = 0; qi < nq; qi++) fmin = first[qi] < fmin ? first[qi] : fmin;
    for (uint32_t h = 0; h < nh; h++) M[h] = -INFINITY, S[h] = 0.0f;
#if RT_FWD_X86
    if (simd)
        zero_avx(ts->acc, (uint64_t)nh * hd);
    else
#endif
        memset(ts->acc, 0, (uint64_t)nh * hd * sizeof *ts->acc);
    for (uint32_t ic = lo; ic < hi; ic += RT_FA_TILE) {
        const uint32_t kvt = hi - ic < RT_FA_TILE ? hi - ic : RT_FA_TILE;
        for (uint32_t tk = 0; tk < kvt; tk++) {
            if (ic + tk < fmin) continue; /* masked for every query */
            KV_LOAD(rt__kv_k(kv, il, ic + tk), ts->kt + (uint64_t)tk * hd);
            KV_LOAD(rt__kv_v(kv, il, ic + tk), ts->vt + (uint64_t)tk * hd);
        }
        for (uint32_t qi = 0; qi < nq; qi++) {
            if (ic < first[qi] / RT_FA_TILE * RT_FA_TILE || ic >= n_kv[qi]) continue;
            const uint32_t qt = n_kv[qi] - ic < RT_FA_TILE ? n_kv[qi] - ic : RT_FA_TILE;
            const float *q = c->q + (uint64_t)(b0 + qi) * qdim + (uint64_t)g * n_rep * hd;
            /* masked positions (before first) are a prefix of the tile; the
             * scores are padded with -inf to q8 for the 8-lane max and exp */
            const uint32_t tm = first[qi] > ic ? first[qi] - ic : 0, q8 = (qt + 7) & ~7u;
            for (uint32_t r = 0; r < n_rep; r += 2) {
                const int H = n_rep - r >= 2 ? 2 : 1;
                const uint32_t h0 = qi * n_rep + r;
                float *kq = ts->kq + (uint64_t)h0 * RT_FA_TILE, *a = ts->acc + (uint64_t)h0 * hd;
                const float *qr = q + (uint64_t)r * hd;
#if RT_FWD_NEON
                (void)simd;
                if (H == 2)
                    kq_tile_neon(kq, qr, ts->kt, tm, qt, hd, scale, cap, 2);
                else
                    kq_tile_neon(kq, qr, ts->kt, tm, qt, hd, scale, cap, 1);
#else
#if RT_FWD_X86
                if (simd) {
                    for (int e = 0; e < H; e++)
                        kq_tile_avx(kq + e * RT_FA_TILE, qr + (uint64_t)e * hd, ts->kt, tm, qt, hd, scale, cap);
                } else
#endif
                for (int e = 0; e < H; e++)
                    for (uint32_t tk = 0; tk < qt; tk++)
                        kq[e * RT_FA_TILE + tk] =
                            tk < tm ? -INFINITY
                                    : rt_attn_score(KQ_ONE(qr + (uint64_t)e * hd, ts->kt + (uint64_t)tk * hd, hd),
                                                    scale, cap);
#endif
                float ms[2];
                for (int e = 0; e < H; e++) {
                    const uint32_t h = h0 + (uint32_t)e;
                    float *ke = kq + e * RT_FA_TILE;
                    for (uint32_t tk = qt; tk < q8; tk++) ke[tk] = -INFINITY;
                    const float Mnew = fmaxf(M[h], TILE_MAX(ke, q8));
                    ms[e] = 1.0f;
                    if (Mnew > M[h]) {
                        ms[e] = expf(M[h] - Mnew);
                        S[h] *= ms[e];
                    }
                    M[h] = Mnew;
                    S[h] += EXP_TILE(ke, Mnew, q8);
                }
                /* the accumulators: a * ms (when ms != 1), then the tile */
#if RT_FWD_NEON
                if (H == 2)
                    acc_tile_neon(a, ts->vt, kq, ms, tm, qt, hd, 2);
                else
                    acc_tile_neon(a, ts->vt, kq, ms, tm, qt, hd, 1);
#else
#if RT_FWD_X86
                if (simd) {
                    if (H == 2)
                        acc_tile_x86(a, ts->vt, kq, ms, tm, qt, hd, 2);
                    else
                        acc_tile_x86(a, ts->vt, kq, ms, tm, qt, hd, 1);
                } else
#endif
                for (int e = 0; e < H; e++)
                    ACC_ONE(a + (uint64_t)e * hd, ts->vt, kq + e * RT_FA_TILE, ms[e], tm, qt, hd);
#endif
            }
        }
    }
    const float *sk = c->m->layers[il].attn_sinks; /* gpt-oss */
    for (uint32_t qi = 0; qi < nq; qi++) {
        float *out = c->xb + (uint64_t)(b0 + qi) * c->xb_ld + (uint64_t)g * n_rep * hd;
        for (uint32_t r = 0; r < n_rep; r++) {
            const uint32_t h = qi * n_rep + r;
            const float sm = sk ? rt_attn_sink(sk[g * n_rep + r], &M[h], &S[h]) : 1.0f;
            const float iv = S[h] == 0.0f ? 0.0f : 1.0f / S[h];
            for (uint32_t i = 0; i < hd; i++)
                out[(uint64_t)r * hd + i] = (ts->acc[(uint64_t)h * hd + i] * sm) * iv;
        }
    }
}

#undef KQ_ONE
#undef ACC_ONE
#undef EXP_TILE
#undef TILE_MAX
#undef KV_LOAD

/* aarch64: GCC's pre-allocation scheduling hoists the loads of the score
 * and accumulate loops ahead of their multiply-adds and then copies and
 * spills the accumulators (as in the gemms, rt_kern_int.h's RT__NOSCHED1):
 * source order is kept. */
#if RT_FWD_NEON && defined(__GNUC__) && !defined(__clang__)
__attribute__((optimize("no-schedule-insns")))
#endif
static void attn_tiled_plain(const struct rt_ctx *c, struct rt_thread_scratch *ts, uint32_t il,
                             uint32_t g, uint32_t pos0, uint32_t b0, uint32_t nq, float scale)
{
#if RT_FWD_NEON
    switch (c->m->hp.head_dim) {
    case 32: attn_tiled_body(c, ts, il, g, pos0, b0, nq, scale, false, 32); return;
    case 64: attn_tiled_body(c, ts, il, g, pos0, b0, nq, scale, false, 64); return;
    case 128: attn_tiled_body(c, ts, il, g, pos0, b0, nq, scale, false, 128); return;
    default: break;
    }
#endif
    attn_tiled_body(c, ts, il, g, pos0, b0, nq, scale, false, 0);
}
#if RT_FWD_X86
/* the AVX2 instance, head_dim 32/64/128 specialised; flatten inlines the
 * helpers (so their loops see the constant head_dim and keep the
 * accumulators in registers) */
RT__AVXF __attribute__((flatten)) static void attn_tiled_avx(const struct rt_ctx *c, struct rt_thread_scratch *ts,
                                                             uint32_t il, uint32_t g, uint32_t pos0, uint32_t b0,
                                                             uint32_t nq, float scale)
{
    switch (c->m->hp.head_dim) {
    case 32: attn_tiled_body(c, ts, il, g, pos0, b0, nq, scale, true, 32); return;
    case 64: attn_tiled_body(c, ts, il, g, pos0, b0, nq, scale, true, 64); return;
    case 128: attn_tiled_body(c, ts, il, g, pos0, b0, nq, scale, true, 128); return;
    default: break;
    }
    attn_tiled_body(c, ts, il, g, pos0, b0, nq, scale, true, 0);
}
#endif

void rt__attn_tiled(const struct rt_ctx *c, struct rt_thread_scratch *ts, uint32_t il, uint32_t g,
                    uint32_t pos0, uint32_t b0, uint32_t nq, float scale)
{
#if RT_FWD_X86
    if (c->kv.f16c) {
        attn_tiled_avx(c, ts, il, g, pos0, b0, nq, scale);
        return;
    }
#endif
    attn_tiled_plain(c, ts, il, g, pos0, b0, nq, scale);
}
