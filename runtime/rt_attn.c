/*
 * runtime/rt_attn.c — attention of one step (a stage of the forward pass,
 * rt_forward.c): its split over (token, kv head) items and the single-query
 * path, with its x86 F16C and aarch64 NEON variants.
 *
 * llama.cpp's CPU flash attention (ggml-cpu/ops.cpp) has two paths and the
 * runtime follows the same split, so that greedy decoding reproduces its
 * tokens: steps of fewer than RT_FA_TILE tokens (decoding, short prompts) or
 * a q8_0 cache take "one_chunk" (attn_chunk below): the query in the K
 * cache's dot format (f16 / q8_0), an online softmax over positions, and for
 * an f16 cache an f16 accumulator (VKQ16); larger steps with an f16 cache
 * take "tiled" (rt_attn_tiled.c): f32 query and keys, tiles of RT_FA_TILE
 * positions, f32 accumulator. As in llama.cpp the choice follows the size of
 * the whole batch handed to rt_eval (llama.cpp's ubatch), not of our
 * internal steps; the result then depends on how tokens are grouped into
 * rt_eval calls (one call of >= 64 tokens vs. smaller calls), never on the
 * thread count or --batch.
 */
#include "runtime/rt_int.h"
#include "runtime/rt_ops.h"

#include <math.h>
#include <string.h>

/* One position of the online softmax: s its score, *m the running max.
 * *ms rescales what is accumulated so far (1 unless s is a new max), *vs
 * weighs this position (1 when s is the new max). */
static inline __attribute__((always_inline)) void softmax_step(float s, float *m, float *ms,
                                                               float *vs)
{
    const float Mold = *m;
    *ms = 1.0f;
    *vs = 1.0f;
    if (s > *m) {
        *m = s;
        *ms = expf(Mold - *m);
    } else {
        *vs = expf(s - *m);
    }
}

/* A softmax weight (ms or vs) as the f16 accumulator step takes it: a
 * subnormal f32 weight (exp(s - m) below 2^-126) becomes 2^-60. Exactly the
 * same bits: a weight below 2^-126 times an f16 value (|v| <= 65504) is
 * below 2^-110, and one of 2^-60 below 2^-44; either added to an f16 value
 * a != 0 (f32, then rounded to f16: half an f16 ulp is at least 2^-25)
 * leaves a, and to a zero gives the zero of the product's sign; the sum of
 * weights is at least 1 (the first position's weight), which neither
 * moves. Why: x86 takes a microcode assist (~100+ cycles) for every vector
 * product with a subnormal operand or result unless MXCSR flushes them,
 * and attention scale 1 (Gemma 4) leaves most positions of a head 87 or
 * more below its maximum score: its full layers' decode attention took 3x
 * as long. */
static inline float f16acc_weight(float w)
{
    return w > 0.0f && w < 0x1p-126f ? 0x1p-60f : w;
}

/* The softmax steps of one tile's nt scores sc for one head of an f16
 * accumulator: the running max *M and sum *S carried, each position's
 * rescale msv[t] and weight vsv[t] as f16acc_weight hands them over. */
static inline void f16acc_tile_softmax(const float *sc, uint32_t nt, float *M, float *S,
                                       float *msv, float *vsv)
{
    float m = *M, sum = *S;
    for (uint32_t t = 0; t < nt; t++) {
        float ms, vs;
        softmax_step(sc[t], &m, &ms, &vs);
        msv[t] = ms = f16acc_weight(ms);
        vsv[t] = vs = f16acc_weight(vs);
        sum = sum * ms + vs;
    }
    *M = m;
    *S = sum;
}

/* The n_rep heads' outputs from their f16 accumulators (ts->acc16), running
 * maxima M and sums S: out = (a * sink factor) / S, heads r0 .. of kv head
 * g of layer il. */
static void f16acc_out(const struct rt_ctx *c, const struct rt_thread_scratch *ts, uint32_t il,
                       uint32_t g, uint32_t r0, uint32_t n_rep, uint32_t hd, float *M, float *S,
                       float *out)
{
    const struct rt_hparams *hp = &c->m->hp;
    const uint32_t g_rep = hp->n_head / hp->n_head_kv;
    const float *sk = c->m->layers[il].attn_sinks; /* gpt-oss */
    for (uint32_t r = 0; r < n_rep; r++) {
        const float sm = sk ? rt_attn_sink(sk[g * g_rep + r0 + r], &M[r], &S[r]) : 1.0f;
        const float iv = S[r] == 0.0f ? 0.0f : 1.0f / S[r];
        const uint16_t *a = ts->acc16 + (uint64_t)r * hd;
        for (uint32_t i = 0; i < hd; i++) out[(uint64_t)r * hd + i] = (rt__h2f(a[i]) * sm) * iv;
    }
}

#if RT_FWD_NEON
#include <arm_neon.h>
#endif
#if RT_FWD_X86
#include <immintrin.h>
#define RT__AVX __attribute__((target("avx2,f16c")))

/* The x86 F16C lanes of acc16_update: VCVTPH2PS / VCVTPS2PH (round to nearest
 * even) are the exact conversions of rt__h2f / rt__f2h; products and sums
 * are separate instructions (never fused). Returns the elements done. */
RT__AVX static inline uint32_t acc16_update_f16c(uint16_t *a, const float *v, float ms, float vs, uint32_t n)
{
    uint32_t i = 0;
    const __m256 vms = _mm256_set1_ps(ms), vvs = _mm256_set1_ps(vs);
    for (; i + 8 <= n; i += 8) {
        __m256 x = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(a + i)));
        if (ms != 1.0f)
            x = _mm256_cvtph_ps(_mm256_cvtps_ph(_mm256_mul_ps(x, vms), _MM_FROUND_TO_NEAREST_INT));
        x = _mm256_add_ps(x, _mm256_mul_ps(_mm256_loadu_ps(v + i), vvs));
        _mm_storeu_si128((__m128i *)(a + i), _mm256_cvtps_ph(x, _MM_FROUND_TO_NEAREST_INT));
    }
    return i;
}

/* n (a multiple of 8) f16 values at src as f32 at dst (VCVTPH2PS: exact). */
RT__AVX static inline void h2f_row(float *dst, const uint8_t *src, uint32_t n)
{
    for (uint32_t i = 0; i < n; i += 8)
        _mm256_storeu_ps(dst + i, _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(src + 2 * i))));
}

/* The x86 bodies' start: the n_rep queries q in the K cache's dot format
 * (kact: f16) and as f32 in ts->acc, running maxima -inf and sums 0 in
 * ts->ms, the f16 accumulators zero. */
RT__AVX static inline void f16acc_begin(const struct rt_ctx *c, struct rt_thread_scratch *ts,
                                        const float *q, uint32_t n_rep, uint32_t hd)
{
    for (uint32_t r = 0; r < n_rep; r++) {
        uint8_t *qa = ts->qact + r * ts->qact_stride;
        c->kact->quantize(q + (uint64_t)r * hd, qa, hd);
        h2f_row(ts->acc + (uint64_t)r * hd, qa, hd);
        ts->ms[r] = -INFINITY;
        ts->ms[n_rep + r] = 0.0f;
    }
    memset(ts->acc16, 0, (uint64_t)n_rep * hd * sizeof *ts->acc16);
}

/* Cache rows t0 .. t0+nt-1 of layer il, kv head at byte koff, as f32: K
 * into kt, V into vt (nt x hd each). */
RT__AVX static inline void f16acc_tile_rows(const struct rt_kv *kv, uint32_t il, uint64_t koff,
                                            uint32_t t0, uint32_t nt, uint32_t hd, float *kt,
                                            float *vt)
{
    for (uint32_t t = 0; t < nt; t++) {
        h2f_row(kt + (uint64_t)t * hd, rt__kv_k(kv, il, t0 + t) + koff, hd);
        h2f_row(vt + (uint64_t)t * hd, rt__kv_v(kv, il, t0 + t) + koff, hd);
    }
}

/* attn_chunk for an f16 cache on an F16C CPU, hd % 16 == 0. The positions
 * go by tiles of RT_FA_TILE: their K and V rows are converted once for the
 * n_rep heads (the generic path converts K once per head, inside the F16
 * dot kernel); then per head the tile's scores, its softmax steps (the
 * running max, one expf per position, the sum) and its accumulator steps,
 * the f16 accumulator held in registers as exact f16 values across the
 * tile. Per head and position the operations are attn_chunk's, in the same
 * order: the query in f16 (kact), the F16 x F16 dot's 16 partials (product
 * i into partial i % 16, multiply then add) reduced as rt__reduce16, expf,
 * then a = f16(f32(a) * ms) when ms != 1 and a = f16(f32(a) + v * vs) — so
 * the bits are the same. hd: a constant in the specialised instances. */
RT__AVX static inline __attribute__((always_inline)) void
attn_chunk_f16_body(const struct rt_ctx *c, struct rt_thread_scratch *ts, uint32_t il, uint32_t g,
                    uint32_t r0, uint32_t nr, const float *q, uint32_t first, uint32_t n_kv,
                    float scale, float *out, const uint32_t hd)
{
    const struct rt_hparams *hp = &c->m->hp;
    const struct rt_kv *kv = &c->kv;
    const uint32_t n_rep = nr;
    const uint64_t koff = 2 * (uint64_t)g * hd;
    float *M = ts->ms, *S = ts->ms + n_rep;
    /* (n_rep, hd) f32 queries; (RT_FA_TILE, hd) K and V rows; per position
     * of the tile its score, ms and vs (kq holds RT_FA_QT * n_rep tiles) */
    float *qf = ts->acc, *kt = ts->kt, *vt = ts->vt;
    float *sc = ts->kq, *msv = ts->kq + RT_FA_TILE, *vsv = ts->kq + 2 * RT_FA_TILE;
    f16acc_begin(c, ts, q, n_rep, hd);
    const float cap = hp->attn_softcap;
    for (uint32_t t0 = first; t0 < n_kv; t0 += RT_FA_TILE) {
        const uint32_t nt = n_kv - t0 < RT_FA_TILE ? n_kv - t0 : RT_FA_TILE;
        f16acc_tile_rows(kv, il, koff, t0, nt, hd, kt, vt);
        for (uint32_t r = 0; r < n_rep; r++) {
            const float *qr = qf + (uint64_t)r * hd;
            for (uint32_t t = 0; t < nt; t++) {
                const float *kr = kt + (uint64_t)t * hd;
                __m256 s0 = _mm256_setzero_ps(), s1 = s0;
                for (uint32_t i = 0; i < hd; i += 16) {
                    s0 = _mm256_add_ps(s0, _mm256_mul_ps(_mm256_loadu_ps(kr + i), _mm256_loadu_ps(qr + i)));
                    s1 = _mm256_add_ps(s1, _mm256_mul_ps(_mm256_loadu_ps(kr + i + 8), _mm256_loadu_ps(qr + i + 8)));
                }
                /* rt__reduce16: r_j = (p_j + p_{4+j}) + (p_{8+j} + p_{12+j}),
                 * then (r_0 + r_1) + (r_2 + r_3) */
                const __m128 h = _mm_add_ps(_mm_add_ps(_mm256_castps256_ps128(s0), _mm256_extractf128_ps(s0, 1)),
                                            _mm_add_ps(_mm256_castps256_ps128(s1), _mm256_extractf128_ps(s1, 1)));
                const __m128 h2 = _mm_add_ss(h, _mm_movehdup_ps(h));             /* r0 + r1 */
                const __m128 h3 = _mm_movehl_ps(h, h);                            /* r2, r3 */
                const __m128 h4 = _mm_add_ss(h3, _mm_movehdup_ps(h3));           /* r2 + r3 */
                sc[t] = rt_attn_score(_mm_cvtss_f32(_mm_add_ss(h2, h4)), scale, cap);
            }
            f16acc_tile_softmax(sc, nt, &M[r], &S[r], msv, vsv);
            uint16_t *a16 = ts->acc16 + (uint64_t)r * hd;
            for (uint32_t c0 = 0; c0 < hd; c0 += 64) {
                const uint32_t nv = (hd - c0 < 64 ? hd - c0 : 64) / 8;
                __m256 acc[8];
                for (uint32_t j = 0; j < nv; j++)
                    acc[j] = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(a16 + c0 + 8 * j)));
                for (uint32_t t = 0; t < nt; t++) {
                    const float *vr = vt + (uint64_t)t * hd + c0;
                    const __m256 vs = _mm256_set1_ps(vsv[t]);
                    if (msv[t] != 1.0f) {
                        const __m256 ms = _mm256_set1_ps(msv[t]);
                        for (uint32_t j = 0; j < nv; j++)
                            acc[j] = _mm256_cvtph_ps(_mm256_cvtps_ph(_mm256_mul_ps(acc[j], ms), _MM_FROUND_TO_NEAREST_INT));
                    }
                    for (uint32_t j = 0; j < nv; j++)
                        acc[j] = _mm256_cvtph_ps(_mm256_cvtps_ph(
                            _mm256_add_ps(acc[j], _mm256_mul_ps(_mm256_loadu_ps(vr + 8 * j), vs)),
                            _MM_FROUND_TO_NEAREST_INT));
                }
                for (uint32_t j = 0; j < nv; j++)
                    _mm_storeu_si128((__m128i *)(a16 + c0 + 8 * j),
                                     _mm256_cvtps_ph(acc[j], _MM_FROUND_TO_NEAREST_INT));
            }
        }
    }
    f16acc_out(c, ts, il, g, r0, n_rep, hd, M, S, out);
}

RT__AVX static void attn_chunk_f16_avx(const struct rt_ctx *c, struct rt_thread_scratch *ts,
                                       uint32_t il, uint32_t g, uint32_t r0, uint32_t nr,
                                       const float *q, uint32_t first, uint32_t n_kv, float scale,
                                       float *out)
{
    const uint32_t hd = c->m->hp.head_dim;
    if (hd == 64)
        attn_chunk_f16_body(c, ts, il, g, r0, nr, q, first, n_kv, scale, out, 64);
    else if (hd == 128)
        attn_chunk_f16_body(c, ts, il, g, r0, nr, q, first, n_kv, scale, out, 128);
    else
        attn_chunk_f16_body(c, ts, il, g, r0, nr, q, first, n_kv, scale, out, hd);
}

#define RT__AVX512 __attribute__((target("avx2,f16c,avx512f,avx512bw,avx512vl")))

/* rt__reduce16 of the 16 partials in one zmm (lane j: products j, j + 16,
 * ...): r_j = (p_j + p_{4+j}) + (p_{8+j} + p_{12+j}), then
 * (r_0 + r_1) + (r_2 + r_3) */
RT__AVX512 static inline float reduce16_zmm(__m512 s)
{
    const __m128 h = _mm_add_ps(_mm_add_ps(_mm512_castps512_ps128(s), _mm512_extractf32x4_ps(s, 1)),
                                _mm_add_ps(_mm512_extractf32x4_ps(s, 2), _mm512_extractf32x4_ps(s, 3)));
    const __m128 h2 = _mm_add_ss(h, _mm_movehdup_ps(h));
    const __m128 h3 = _mm_movehl_ps(h, h);
    const __m128 h4 = _mm_add_ss(h3, _mm_movehdup_ps(h3));
    return _mm_cvtss_f32(_mm_add_ss(h2, h4));
}

/* attn_chunk_f16_body on AVX-512, hd a multiple of 16 * NV: the same tiles
 * and, per head and position, the same operations in the same order (a
 * zmm's lane j holds the dot's partial j; the accumulator step lane by
 * lane), so the bits are attn_chunk's. What zmm buys is room: the
 * accumulator is NV (up to 16) registers of 16 f16 values held as f32, 256
 * columns whose f16 round trips (VCVTPS2PH / VCVTPH2PS, the step's cost)
 * run side by side, against 64 columns in ymm; and the scores go four
 * positions at a time. */
RT__AVX512 static inline __attribute__((always_inline)) void
attn_chunk_f16_body512(const struct rt_ctx *c, struct rt_thread_scratch *ts, uint32_t il,
                       uint32_t g, uint32_t r0, uint32_t nr, const float *q, uint32_t first,
                       uint32_t n_kv, float scale, float *out, const uint32_t hd, const uint32_t NV)
{
    const struct rt_hparams *hp = &c->m->hp;
    const struct rt_kv *kv = &c->kv;
    const uint32_t n_rep = nr, bw = 16 * NV;
    const uint64_t koff = 2 * (uint64_t)g * hd;
    float *M = ts->ms, *S = ts->ms + n_rep;
    float *qf = ts->acc, *kt = ts->kt, *vt = ts->vt;
    float *sc = ts->kq, *msv = ts->kq + RT_FA_TILE, *vsv = ts->kq + 2 * RT_FA_TILE;
    f16acc_begin(c, ts, q, n_rep, hd);
    const float cap = hp->attn_softcap;
    for (uint32_t t0 = first; t0 < n_kv; t0 += RT_FA_TILE) {
        const uint32_t nt = n_kv - t0 < RT_FA_TILE ? n_kv - t0 : RT_FA_TILE;
        f16acc_tile_rows(kv, il, koff, t0, nt, hd, kt, vt);
        for (uint32_t r = 0; r < n_rep; r++) {
            const float *qr = qf + (uint64_t)r * hd;
            uint32_t t = 0;
            for (; t + 4 <= nt; t += 4) {
                const float *k0 = kt + (uint64_t)t * hd;
                __m512 s0 = _mm512_setzero_ps(), s1 = s0, s2 = s0, s3 = s0;
                for (uint32_t i = 0; i < hd; i += 16) {
                    const __m512 qv = _mm512_loadu_ps(qr + i);
                    s0 = _mm512_add_ps(s0, _mm512_mul_ps(_mm512_loadu_ps(k0 + i), qv));
                    s1 = _mm512_add_ps(s1, _mm512_mul_ps(_mm512_loadu_ps(k0 + hd + i), qv));
                    s2 = _mm512_add_ps(s2, _mm512_mul_ps(_mm512_loadu_ps(k0 + 2 * hd + i), qv));
                    s3 = _mm512_add_ps(s3, _mm512_mul_ps(_mm512_loadu_ps(k0 + 3 * hd + i), qv));
                }
                sc[t] = rt_attn_score(reduce16_zmm(s0), scale, cap);
                sc[t + 1] = rt_attn_score(reduce16_zmm(s1), scale, cap);
                sc[t + 2] = rt_attn_score(reduce16_zmm(s2), scale, cap);
                sc[t + 3] = rt_attn_score(reduce16_zmm(s3), scale, cap);
            }
            for (; t < nt; t++) {
                const float *kr = kt + (uint64_t)t * hd;
                __m512 s0 = _mm512_setzero_ps();
                for (uint32_t i = 0; i < hd; i += 16)
                    s0 = _mm512_add_ps(s0, _mm512_mul_ps(_mm512_loadu_ps(kr + i), _mm512_loadu_ps(qr + i)));
                sc[t] = rt_attn_score(reduce16_zmm(s0), scale, cap);
            }
            f16acc_tile_softmax(sc, nt, &M[r], &S[r], msv, vsv);
            uint16_t *a16 = ts->acc16 + (uint64_t)r * hd;
            for (uint32_t c0 = 0; c0 < hd; c0 += bw) {
                __m512 acc[16];
                for (uint32_t j = 0; j < NV; j++)
                    acc[j] = _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(a16 + c0 + 16 * j)));
                for (t = 0; t < nt; t++) {
                    const float *vr = vt + (uint64_t)t * hd + c0;
                    const __m512 vs = _mm512_set1_ps(vsv[t]);
                    if (msv[t] != 1.0f) {
                        const __m512 ms = _mm512_set1_ps(msv[t]);
                        for (uint32_t j = 0; j < NV; j++)
                            acc[j] = _mm512_cvtph_ps(_mm512_cvtps_ph(_mm512_mul_ps(acc[j], ms), _MM_FROUND_TO_NEAREST_INT));
                    }
                    for (uint32_t j = 0; j < NV; j++)
                        acc[j] = _mm512_cvtph_ps(_mm512_cvtps_ph(
                            _mm512_add_ps(acc[j], _mm512_mul_ps(_mm512_loadu_ps(vr + 16 * j), vs)),
                            _MM_FROUND_TO_NEAREST_INT));
                }
                for (uint32_t j = 0; j < NV; j++)
                    _mm256_storeu_si256((__m256i *)(a16 + c0 + 16 * j),
                                        _mm512_cvtps_ph(acc[j], _MM_FROUND_TO_NEAREST_INT));
            }
        }
    }
    f16acc_out(c, ts, il, g, r0, n_rep, hd, M, S, out);
}

/* The AVX-512 instances: head sizes 64, 128 and multiples of 256 (the
 * accumulator NV = hd / 16 registers, at most 16). Returns false for
 * other head sizes (attn_chunk_f16_avx takes them). */
RT__AVX512 static bool attn_chunk_f16_avx512(const struct rt_ctx *c, struct rt_thread_scratch *ts,
                                             uint32_t il, uint32_t g, uint32_t r0, uint32_t nr,
                                             const float *q, uint32_t first, uint32_t n_kv,
                                             float scale, float *out)
{
    const uint32_t hd = c->m->hp.head_dim;
    if (hd == 64)
        attn_chunk_f16_body512(c, ts, il, g, r0, nr, q, first, n_kv, scale, out, 64, 4);
    else if (hd == 128)
        attn_chunk_f16_body512(c, ts, il, g, r0, nr, q, first, n_kv, scale, out, 128, 8);
    else if (hd == 256)
        attn_chunk_f16_body512(c, ts, il, g, r0, nr, q, first, n_kv, scale, out, 256, 16);
    else if (hd == 512)
        attn_chunk_f16_body512(c, ts, il, g, r0, nr, q, first, n_kv, scale, out, 512, 16);
    else if (hd % 256 == 0)
        attn_chunk_f16_body512(c, ts, il, g, r0, nr, q, first, n_kv, scale, out, hd, 16);
    else
        return false;
    return true;
}

/* a[i] = a[i] * ms (when ms != 1), then a[i] += v[i] * p: element by element,
 * the scalar loop's operations. Returns the elements done. */
RT__AVX static inline uint32_t axpy_avx(float *a, const float *v, float ms, float p, uint32_t n)
{
    uint32_t i = 0;
    const __m256 vms = _mm256_set1_ps(ms), vp = _mm256_set1_ps(p);
    for (; i + 8 <= n; i += 8) {
        __m256 x = _mm256_loadu_ps(a + i);
        if (ms != 1.0f) x = _mm256_mul_ps(x, vms);
        _mm256_storeu_ps(a + i, _mm256_add_ps(x, _mm256_mul_ps(vp, _mm256_loadu_ps(v + i))));
    }
    return i;
}
#endif

static inline void axpy_plain(float *a, const float *v, float ms, float p, uint32_t n)
{
    for (uint32_t i = 0; i < n; i++) {
        if (ms != 1.0f) a[i] *= ms;
        a[i] += p * v[i];
    }
}

static void axpy(const struct rt_ctx *c, float *a, const float *v, float ms, float p, uint32_t n)
{
    uint32_t i = 0;
#if RT_FWD_X86
    if (c->kv.f16c) i = axpy_avx(a, v, ms, p, n);
#else
    (void)c;
#endif
    axpy_plain(a + i, v + i, ms, p, n - i);
}

/* The f16 accumulator step of one_chunk: a = f16(f32(a) * ms) when
 * ms != 1, then a = f16(f32(a) + v * vs), element by element (each
 * element's operations are its own, so the vector path is bit-identical:
 * the same IEEE conversions, round to nearest even, and f32 products/sums,
 * never fused). */
static void acc16_update(const struct rt_ctx *c, uint16_t *a, const float *v, float ms, float vs,
                         uint32_t n)
{
    uint32_t i = 0;
#if RT_FWD_X86
    if (c->kv.f16c) i = acc16_update_f16c(a, v, ms, vs, n);
#else
    (void)c;
#endif
#if RT_FWD_NEON
    const float32x4_t vms = vdupq_n_f32(ms), vvs = vdupq_n_f32(vs);
    if (ms == 1.0f)
        for (; i + 8 <= n; i += 8) {
            const float16x8_t h = vreinterpretq_f16_u16(vld1q_u16(a + i));
            const float32x4_t x0 =
                vaddq_f32(vcvt_f32_f16(vget_low_f16(h)), vmulq_f32(vld1q_f32(v + i), vvs));
            const float32x4_t x1 =
                vaddq_f32(vcvt_high_f32_f16(h), vmulq_f32(vld1q_f32(v + i + 4), vvs));
            vst1q_u16(a + i, vreinterpretq_u16_f16(vcvt_high_f16_f32(vcvt_f16_f32(x0), x1)));
        }
    for (; i + 4 <= n; i += 4) {
        float32x4_t x = vcvt_f32_f16(vreinterpret_f16_u16(vld1_u16(a + i)));
        if (ms != 1.0f) x = vcvt_f32_f16(vcvt_f16_f32(vmulq_f32(x, vms)));
        x = vaddq_f32(x, vmulq_f32(vld1q_f32(v + i), vvs));
        vst1_u16(a + i, vreinterpret_u16_f16(vcvt_f16_f32(x)));
    }
#endif
    for (; i < n; i++) {
        if (ms != 1.0f) a[i] = rt__f2h(rt__h2f(a[i]) * ms);
        a[i] = rt__f2h(rt__h2f(a[i]) + v[i] * vs);
    }
}

#if RT_FWD_NEON
/* acc16_update for n % 8 == 0, eight lanes at a time and inlined: per
 * element the same conversions (round to nearest even) and separate
 * products and sums. */
static inline __attribute__((always_inline)) void acc16_neon8(uint16_t *a, const float *v, float ms,
                                                              float vs, uint32_t n)
{
    const float32x4_t vms = vdupq_n_f32(ms), vvs = vdupq_n_f32(vs);
    const bool rescale = ms != 1.0f;
    for (uint32_t i = 0; i < n; i += 8) {
        const float16x8_t h = vreinterpretq_f16_u16(vld1q_u16(a + i));
        float32x4_t x0 = vcvt_f32_f16(vget_low_f16(h)), x1 = vcvt_high_f32_f16(h);
        if (rescale) {
            x0 = vcvt_f32_f16(vcvt_f16_f32(vmulq_f32(x0, vms)));
            x1 = vcvt_f32_f16(vcvt_f16_f32(vmulq_f32(x1, vms)));
        }
        x0 = vaddq_f32(x0, vmulq_f32(vld1q_f32(v + i), vvs));
        x1 = vaddq_f32(x1, vmulq_f32(vld1q_f32(v + i + 4), vvs));
        vst1q_u16(a + i, vreinterpretq_u16_f16(vcvt_high_f16_f32(vcvt_f16_f32(x0), x1)));
    }
}

/* attn_chunk for an f16 cache on aarch64, hd % 16 == 0: each position's K
 * and V rows are converted to f32 once for the n_rep heads, and the dot,
 * the softmax step and the accumulator step run inline. The operations are
 * attn_chunk's: the query in f16 (kact), the F16 x F16 dot's 16 partials
 * (product i into partial i % 16, multiply then add, from +0) reduced as
 * rt__reduce16, expf, acc16_update's steps (acc16_neon8) — so the bits are
 * the same. */
static void attn_chunk_f16_neon(const struct rt_ctx *c, struct rt_thread_scratch *ts, uint32_t il,
                                uint32_t g, uint32_t r0, uint32_t nr, const float *q,
                                uint32_t first, uint32_t n_kv, float scale, float *out)
{
    const struct rt_hparams *hp = &c->m->hp;
    const struct rt_kv *kv = &c->kv;
    const uint32_t hd = hp->head_dim, n_rep = nr;
    const uint64_t koff = 2 * (uint64_t)g * hd;
    float *M = ts->ms, *S = ts->ms + n_rep;
    float *qf = ts->acc, *kf = ts->kt, *vf = ts->vt; /* (n_rep, hd), (hd), (hd) */
    for (uint32_t r = 0; r < n_rep; r++) {
        uint8_t *qa = ts->qact + r * ts->qact_stride;
        c->kact->quantize(q + (uint64_t)r * hd, qa, hd);
        for (uint32_t i = 0; i < hd; i += 8) {
            const float16x8_t h = vreinterpretq_f16_u8(vld1q_u8(qa + 2 * i));
            vst1q_f32(qf + (uint64_t)r * hd + i, vcvt_f32_f16(vget_low_f16(h)));
            vst1q_f32(qf + (uint64_t)r * hd + i + 4, vcvt_high_f32_f16(h));
        }
        M[r] = -INFINITY;
        S[r] = 0.0f;
    }
    memset(ts->acc16, 0, (uint64_t)n_rep * hd * sizeof *ts->acc16);
    const float cap = hp->attn_softcap;
    for (uint32_t t = first; t < n_kv; t++) {
        const uint8_t *krow = rt__kv_k(kv, il, t) + koff, *vrow = rt__kv_v(kv, il, t) + koff;
        for (uint32_t i = 0; i < hd; i += 8) {
            const float16x8_t kh = vreinterpretq_f16_u8(vld1q_u8(krow + 2 * i));
            const float16x8_t vh = vreinterpretq_f16_u8(vld1q_u8(vrow + 2 * i));
            vst1q_f32(kf + i, vcvt_f32_f16(vget_low_f16(kh)));
            vst1q_f32(kf + i + 4, vcvt_high_f32_f16(kh));
            vst1q_f32(vf + i, vcvt_f32_f16(vget_low_f16(vh)));
            vst1q_f32(vf + i + 4, vcvt_high_f32_f16(vh));
        }
        for (uint32_t r = 0; r < n_rep; r++) {
            const float *qr = qf + (uint64_t)r * hd;
            float32x4_t p0 = vdupq_n_f32(0.0f), p1 = p0, p2 = p0, p3 = p0;
            for (uint32_t i = 0; i < hd; i += 16) {
                p0 = vaddq_f32(p0, vmulq_f32(vld1q_f32(kf + i), vld1q_f32(qr + i)));
                p1 = vaddq_f32(p1, vmulq_f32(vld1q_f32(kf + i + 4), vld1q_f32(qr + i + 4)));
                p2 = vaddq_f32(p2, vmulq_f32(vld1q_f32(kf + i + 8), vld1q_f32(qr + i + 8)));
                p3 = vaddq_f32(p3, vmulq_f32(vld1q_f32(kf + i + 12), vld1q_f32(qr + i + 12)));
            }
            /* rt__reduce16: r_j = (p_j + p_{4+j}) + (p_{8+j} + p_{12+j}), then
             * (r_0 + r_1) + (r_2 + r_3) */
            const float32x4_t h = vaddq_f32(vaddq_f32(p0, p1), vaddq_f32(p2, p3));
            float s = rt_attn_score((vgetq_lane_f32(h, 0) + vgetq_lane_f32(h, 1)) +
                                        (vgetq_lane_f32(h, 2) + vgetq_lane_f32(h, 3)),
                                    scale, cap);
            float ms, vs;
            softmax_step(s, &M[r], &ms, &vs);
            acc16_neon8(ts->acc16 + (uint64_t)r * hd, vf, ms, vs, hd);
            S[r] = S[r] * ms + vs;
        }
    }
    f16acc_out(c, ts, il, g, r0, n_rep, hd, M, S, out);
}
#endif

/* Attention of the nr query heads r0 .. r0+nr-1 (of the n_head / n_head_kv)
 * that share kv head g, q (nr x hd floats), over cache positions first ..
 * n_kv-1 of layer il, into out. Each head's operations are its own: which
 * heads a call takes never changes a head's bits. */
static void attn_chunk(const struct rt_ctx *c, struct rt_thread_scratch *ts, uint32_t il,
                       uint32_t g, uint32_t r0, uint32_t nr, const float *q, uint32_t first,
                       uint32_t n_kv, float scale, float *out)
{
    const struct rt_hparams *hp = &c->m->hp;
    const struct rt_kv *kv = &c->kv;
    const uint32_t hd = hp->head_dim, n_rep = nr, g_rep = hp->n_head / hp->n_head_kv;
    const bool f16 = kv->type == RT_KV_F16;
#if RT_FWD_X86
    if (f16 && kv->avx512 && attn_chunk_f16_avx512(c, ts, il, g, r0, nr, q, first, n_kv, scale, out))
        return;
    if (f16 && kv->f16c && hd % 16 == 0) {
        attn_chunk_f16_avx(c, ts, il, g, r0, nr, q, first, n_kv, scale, out);
        return;
    }
#endif
    const uint64_t koff = rt_row_bytes(f16 ? GGUF_TYPE_F16 : GGUF_TYPE_Q8_0, (uint64_t)g * hd);
#if RT_FWD_NEON
    if (f16 && hd % 16 == 0) {
        attn_chunk_f16_neon(c, ts, il, g, r0, nr, q, first, n_kv, scale, out);
        return;
    }
#endif
    float *M = ts->ms, *S = ts->ms + n_rep;
    for (uint32_t r = 0; r < n_rep; r++) {
        c->kact->quantize(q + (uint64_t)r * hd, ts->qact + r * ts->qact_stride, hd);
        M[r] = -INFINITY;
        S[r] = 0.0f;
    }
    memset(ts->acc16, 0, (uint64_t)n_rep * hd * sizeof *ts->acc16);
    memset(ts->acc, 0, (uint64_t)n_rep * hd * sizeof *ts->acc);
    float *v = ts->vt;
    const float cap = c->m->hp.attn_softcap;
    for (uint32_t t = first; t < n_kv; t++) {
        const uint8_t *krow = rt__kv_k(kv, il, t) + koff;
        rt__kv_load(kv, rt__kv_v(kv, il, t), g * hd, hd, v);
        for (uint32_t r = 0; r < n_rep; r++) {
            float s;
            c->kdot->dot(hd, &s, krow, ts->qact + r * ts->qact_stride);
            s = rt_attn_score(s, scale, cap);
            float ms, vs;
            softmax_step(s, &M[r], &ms, &vs);
            if (f16) {
                acc16_update(c, ts->acc16 + (uint64_t)r * hd, v, ms, vs, hd);
            } else {
                axpy(c, ts->acc + (uint64_t)r * hd, v, ms, vs, hd);
            }
            S[r] = S[r] * ms + vs;
        }
    }
    const float *sk = c->m->layers[il].attn_sinks; /* gpt-oss */
    for (uint32_t r = 0; r < n_rep; r++) {
        const float sm = sk ? rt_attn_sink(sk[g * g_rep + r0 + r], &M[r], &S[r]) : 1.0f;
        const float iv = S[r] == 0.0f ? 0.0f : 1.0f / S[r];
        float *o = out + (uint64_t)r * hd;
        if (f16) {
            const uint16_t *a = ts->acc16 + (uint64_t)r * hd;
            for (uint32_t i = 0; i < hd; i++) o[i] = (rt__h2f(a[i]) * sm) * iv;
        } else {
            const float *a = ts->acc + (uint64_t)r * hd;
            for (uint32_t i = 0; i < hd; i++) o[i] = (a[i] * sm) * iv;
        }
    }
}

struct attn_stage {
    struct rt_ctx *c;
    uint32_t n_tok;
    uint32_t pos0;
    uint32_t il;
    bool tiled; /* the rt_eval call has >= RT_FA_TILE tokens (llama.cpp's ubatch) */
};

static void attn_task(void *arg, unsigned ith, unsigned nth)
{
    const struct attn_stage *st = arg;
    const struct rt_ctx *c = st->c;
    const struct rt_hparams *hp = &c->m->hp;
    struct rt_thread_scratch *ts = &c->ts[ith];
    const uint32_t hd = hp->head_dim, n_rep = hp->n_head / hp->n_head_kv;
    const uint64_t qdim = (uint64_t)hp->n_head * hd;
    const float scale = c->kq_scale;
    const bool tiled = st->tiled && c->kv.type == RT_KV_F16 && hd % 16 == 0;
    uint64_t lo, hi;
    if (tiled) { /* items: (group of RT_FA_QT tokens, kv head) */
        const uint64_t n_grp = (st->n_tok + RT_FA_QT - 1) / RT_FA_QT;
        rt__split(n_grp * hp->n_head_kv, ith, nth, &lo, &hi);
        for (uint64_t item = lo; item < hi; item++) {
            const uint32_t b0 = (uint32_t)(item / hp->n_head_kv) * RT_FA_QT;
            const uint32_t g = (uint32_t)(item % hp->n_head_kv);
            const uint32_t nq = st->n_tok - b0 < RT_FA_QT ? st->n_tok - b0 : RT_FA_QT;
            rt__attn_tiled(c, ts, st->il, g, st->pos0, b0, nq, scale);
        }
        return;
    }
    /* items: (token, kv head), each cut into n_cut runs of its query heads
     * when there are fewer of them than threads (decoding a model with one
     * or few kv heads: Gemma 4 has one) */
    const uint64_t n_grp = (uint64_t)st->n_tok * hp->n_head_kv;
    uint32_t n_cut = 1;
    if (n_grp < nth) {
        const uint64_t want = (nth + n_grp - 1) / n_grp;
        n_cut = want < n_rep ? (uint32_t)want : n_rep;
    }
    rt__split(n_grp * n_cut, ith, nth, &lo, &hi);
    for (uint64_t item = lo; item < hi; item++) {
        const uint64_t grp = item / n_cut;
        const uint32_t cut = (uint32_t)(item % n_cut);
        const uint32_t b = (uint32_t)(grp / hp->n_head_kv);
        const uint32_t g = (uint32_t)(grp % hp->n_head_kv);
        const uint32_t r0 = cut * n_rep / n_cut, r1 = (cut + 1) * n_rep / n_cut;
        const uint32_t n_kv = st->pos0 + b + 1; /* causal: positions 0 .. pos */
        const uint32_t first = rt_swa_first(hp, st->il, st->pos0 + b);
        const uint64_t h0 = (uint64_t)g * n_rep + r0;
        attn_chunk(c, ts, st->il, g, r0, r1 - r0, c->q + (uint64_t)b * qdim + h0 * hd, first, n_kv,
                   scale, c->xb + (uint64_t)b * c->xb_ld + h0 * hd);
    }
}

void rt__attn(struct rt_ctx *c, uint32_t n_tok, uint32_t pos0, uint32_t il, bool tiled)
{
    struct attn_stage st = {.c = c, .n_tok = n_tok, .pos0 = pos0, .il = il, .tiled = tiled};
    mw_pool_run(c->pool, attn_task, &st);
}
