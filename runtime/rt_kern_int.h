/*
 * runtime/rt_kern_int.h — internals of the kernels (rt_kern_*.c and
 * tests/check_rt_kernels.c): byte loads, the f16/bf16 converters, block
 * geometry, and the declarations of every kernel variant so that tests can
 * also call them one by one.
 *
 * Naming: rt_dot_<w>_<act>_ref (portable scalar, always compiled),
 * rt_dot_<w>_<act>_neon (aarch64 AdvSIMD, SDOT emulated with SMULL/SADALP),
 * rt_dot_<w>_<act>_sdot (aarch64 AdvSIMD + dot-product extension). The
 * NEON-only names exist only when RT_HAVE_NEON is 1.
 *
 * Float-combine rule shared by all variants (so that they are bit-identical,
 * rt_kernels.h): block b's f32 contribution is added to partial sum b % 4
 * (RT_NACC), and the result is (p0 + p1) + (p2 + p3); float types add
 * product i to partial i % 16 and reduce by rt__reduce16().
 */
#ifndef MW_RT_KERN_INT_H
#define MW_RT_KERN_INT_H

#include <stdint.h>
#include <string.h>

#include "core/mw.h"
#include "runtime/rt_kernels.h"

#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "the kernels read little-endian block fields directly"
#endif

#if defined(__aarch64__) && defined(__ARM_NEON) && !defined(MW_FORCE_SCALAR)
#define RT_HAVE_NEON 1
#else
#define RT_HAVE_NEON 0
#endif

#if defined(__x86_64__) && defined(__GNUC__) && !defined(MW_FORCE_SCALAR)
#define RT_HAVE_X86 1
#else
#define RT_HAVE_X86 0
#endif

#define RT_NACC 4 /* float partial sums over blocks */

/* The delta net's row ops (rt_kern_ssm.c). */
extern const struct rt_ssm_ops rt_ssm_ops_ref;
#if RT_HAVE_X86
extern const struct rt_ssm_ops rt_ssm_ops_avx2;
#endif
#if RT_HAVE_NEON
extern const struct rt_ssm_ops rt_ssm_ops_neon;
#endif

/* Block sizes in bytes (docs/formats.md §3). */
#define RT_BS_Q4_0 18
#define RT_BS_Q4_1 20
#define RT_BS_Q5_0 22
#define RT_BS_Q5_1 24
#define RT_BS_Q8_0 34
#define RT_BS_IQ4_NL 18
#define RT_BS_IQ4_XS 136
#define RT_BS_Q2_K 84
#define RT_BS_Q3_K 110
#define RT_BS_Q4_K 144
#define RT_BS_Q5_K 176
#define RT_BS_Q6_K 210
#define RT_BS_IQ2_XXS 66 /* d:f16 | 8 x (grid:u8[4] | u32 signs 4x7 + scale:4) */
#define RT_BS_IQ2_XS 74  /* d:f16 | qs:u16[32] (grid:9 | signs:7) | scales[8] */
#define RT_BS_IQ2_S 82   /* d:f16 | grid_lo[32] | signs[32] | grid_hi[8] | scales[8] */
#define RT_BS_IQ3_XXS 98 /* d:f16 | qs[64] | u32[8] signs + scales */
#define RT_BS_IQ3_S 110  /* d:f16 | qs[64] | qh[8] | signs[32] | scales[4] */
#define RT_BS_IQ1_S 50   /* d:f16 | qs[32] | qh:u16[8] */
#define RT_BS_IQ1_M 56   /* qs[32] | qh[16] | scales:u16[4] (f16 in the top nibbles) */

_Static_assert(sizeof(struct rt_block_q8_0) == 34, "block_q8_0 is 34 bytes");
_Static_assert(sizeof(struct rt_block_q8_1) == 36, "block_q8_1 is 36 bytes");
_Static_assert(sizeof(struct rt_block_q8_k) == 292, "block_q8_K is 292 bytes");

/* IQ4_NL levels (docs/formats.md §3.5); equal to quant's table (tested). */
extern const int8_t rt__iq4nl_values[16];

static inline uint16_t rt__ld16(const uint8_t *p)
{
    uint16_t v;
    memcpy(&v, p, 2);
    return v;
}
static inline uint32_t rt__ld32(const uint8_t *p)
{
    uint32_t v;
    memcpy(&v, p, 4);
    return v;
}

/* f16 -> f32, exact, branch-free (the scalar kernels' inner loops; same
 * values as mw_f16_to_f32 for every non-NaN input — tested on all 65536;
 * NaNs stay NaNs). Normal and Inf/NaN inputs: shift the exponent and
 * mantissa into place and rescale by 2^-112; subnormals: place the mantissa
 * under the exponent of 0.5 and subtract 0.5 (exact). */
static inline float rt__f16(uint16_t h)
{
    const uint32_t w = (uint32_t)h << 16;
    const uint32_t sign = w & 0x80000000u;
    const uint32_t two_w = w + w;
    uint32_t u = (two_w >> 4) + (0xE0u << 23);
    float norm, den;
    memcpy(&norm, &u, 4);
    norm *= 0x1.0p-112f;
    u = (two_w >> 17) | (126u << 23);
    memcpy(&den, &u, 4);
    den -= 0.5f;
    uint32_t nb, db;
    memcpy(&nb, &norm, 4);
    memcpy(&db, &den, 4);
    const uint32_t sub = 0u - (uint32_t)(two_w < (1u << 27)); /* all ones: subnormal or zero */
    u = sign | (db & sub) | (nb & ~sub);
    float f;
    memcpy(&f, &u, 4);
    return f;
}

static inline float rt__bf16(uint16_t h)
{
    const uint32_t u = (uint32_t)h << 16;
    float f;
    memcpy(&f, &u, 4);
    return f;
}

/* (p0 + p1) + (p2 + p3) over the RT_NACC block partials. */
static inline float rt__reduce4(const float p[RT_NACC]) { return (p[0] + p[1]) + (p[2] + p[3]); }

/* The float kernels' 16 partials: r_j = (p_j + p_{4+j}) + (p_{8+j} + p_{12+j}),
 * result (r_0 + r_1) + (r_2 + r_3) — what four float32x4 accumulators
 * reduce to with vector adds then a pairwise tree. */
static inline float rt__reduce16(const float p[16])
{
    float r[4];
    for (int j = 0; j < 4; j++) r[j] = (p[j] + p[4 + j]) + (p[8 + j] + p[12 + j]);
    return rt__reduce4(r);
}

/* IQ1_M's f16 super-block scale from the top nibbles of its four u16
 * scales at sc (docs/formats.md §3.6). */
static inline uint16_t rt__iq1m_scale_bits(const uint8_t *sc)
{
    return (uint16_t)((rt__ld16(sc) >> 12) | ((rt__ld16(sc + 2) >> 8) & 0x00F0) |
                      ((rt__ld16(sc + 4) >> 4) & 0x0F00) | (rt__ld16(sc + 6) & 0xF000));
}

/* Q4_K / Q5_K 12-byte scale packing (docs/formats.md §3.4). */
static inline void rt__k4_scales(const uint8_t *sc, uint8_t S[8], uint8_t M[8])
{
    for (int s = 0; s < 4; s++) {
        S[s] = sc[s] & 63;
        M[s] = sc[s + 4] & 63;
    }
    for (int s = 4; s < 8; s++) {
        S[s] = (uint8_t)((sc[s + 4] & 0x0F) | ((sc[s - 4] >> 6) << 4));
        M[s] = (uint8_t)((sc[s + 4] >> 4) | ((sc[s] >> 6) << 4));
    }
}

/* Q3_K's 16 six-bit scales minus 32 (docs/formats.md §3.4). */
static inline void rt__k3_scales(const uint8_t *sc, int8_t out[16])
{
    for (int s = 0; s < 16; s++) {
        const int lo = s < 8 ? (sc[s] & 0x0F) : (sc[s - 8] >> 4);
        const int hi = (sc[8 + s % 4] >> (2 * (s / 4))) & 3;
        out[s] = (int8_t)((lo | (hi << 4)) - 32);
    }
}

// --- kernel declarations ---

#define RT__DECL_DOT(name) void rt_dot_##name(uint64_t n, float *out, const void *w, const void *a)
#define RT__DECL_ALL(X)                                                                            \
    X(q8_0_q8_0) X(q4_0_q8_0) X(q4_1_q8_1) X(q5_0_q8_0) X(q5_1_q8_1) X(iq4_nl_q8_0) X(q2_k_q8_k) \
        X(q3_k_q8_k) X(q4_k_q8_k) X(q5_k_q8_k) X(q6_k_q8_k)

#define RT__DECL_REF(nm) RT__DECL_DOT(nm##_ref);
#define RT__DECL_NEON(nm) RT__DECL_DOT(nm##_neon);
#define RT__DECL_SDOT(nm) RT__DECL_DOT(nm##_sdot);

RT__DECL_ALL(RT__DECL_REF)
RT__DECL_DOT(f32_f32_ref);
/* IQ4_XS x Q8_K: scalar on every CPU (no NEON variant yet) */
RT__DECL_DOT(iq4_xs_q8_k_ref);
/* IQ3_XXS / IQ3_S x Q8_K (rt_kern_iq3.c) */
RT__DECL_DOT(iq3_xxs_q8_k_ref);
RT__DECL_DOT(iq3_s_q8_k_ref);
#if RT_HAVE_NEON
RT__DECL_DOT(iq3_xxs_q8_k_neon);
RT__DECL_DOT(iq3_xxs_q8_k_sdot);
RT__DECL_DOT(iq3_s_q8_k_neon);
RT__DECL_DOT(iq3_s_q8_k_sdot);
#endif
/* IQ1_S / IQ1_M x Q8_K (rt_kern_iq1.c) */
RT__DECL_DOT(iq1_s_q8_k_ref);
RT__DECL_DOT(iq1_m_q8_k_ref);
#if RT_HAVE_NEON
RT__DECL_DOT(iq1_s_q8_k_neon);
RT__DECL_DOT(iq1_s_q8_k_sdot);
RT__DECL_DOT(iq1_m_q8_k_neon);
RT__DECL_DOT(iq1_m_q8_k_sdot);
#endif
/* IQ2_XXS / IQ2_XS / IQ2_S x Q8_K (rt_kern_iq2.c) */
#define RT__DECL_IQ2(X) X(iq2_xxs_q8_k) X(iq2_xs_q8_k) X(iq2_s_q8_k)
RT__DECL_IQ2(RT__DECL_REF)
#if RT_HAVE_NEON
RT__DECL_IQ2(RT__DECL_NEON)
RT__DECL_IQ2(RT__DECL_SDOT)
#endif
RT__DECL_DOT(f16_f16_ref);
RT__DECL_DOT(bf16_bf16_ref);
/* MXFP4 x Q8_0 (rt_kern_mxfp4.c) */
RT__DECL_DOT(mxfp4_q8_0_ref);
#if RT_HAVE_X86
RT__DECL_DOT(mxfp4_q8_0_avx2);
void rt_dot4_mxfp4_q8_0_avx2(uint64_t n, uint64_t n4, float *out, const void *w, uint64_t stride,
                             const void *a);
void rt_gemm_mxfp4_q8_0_avx2(uint64_t n, uint64_t nr, uint64_t nc, float *out, uint64_t ldo,
                             const void *w_rows, uint64_t stride, const void *act,
                             uint64_t astride, void *scratch);
#endif
#if RT_HAVE_NEON
RT__DECL_DOT(mxfp4_q8_0_neon);
void rt_gemm_mxfp4_q8_0_neon(uint64_t n, uint64_t nr, uint64_t nc, float *out, uint64_t ldo,
                             const void *w_rows, uint64_t stride, const void *act,
                             uint64_t astride, void *scratch);
#endif

void rt_quantize_f32_ref(const float *x, void *out, uint64_t n);
void rt_quantize_f16_ref(const float *x, void *out, uint64_t n);
void rt_quantize_bf16_ref(const float *x, void *out, uint64_t n);
void rt_quantize_q8_0_ref(const float *x, void *out, uint64_t n);
void rt_quantize_q8_1_ref(const float *x, void *out, uint64_t n);
void rt_quantize_q8_k_ref(const float *x, void *out, uint64_t n);

#if RT_HAVE_X86
/* rt_kern_x86.c: _avx2 (AVX2 + FMA + F16C) and _vnni (+ AVX-VNNI) */
#define RT__DECL_X86(V)                                                                            \
    RT__DECL_DOT(q8_0_q8_0_##V); RT__DECL_DOT(q4_0_q8_0_##V); RT__DECL_DOT(q4_1_q8_1_##V);         \
    RT__DECL_DOT(q5_0_q8_0_##V); RT__DECL_DOT(q5_1_q8_1_##V); RT__DECL_DOT(iq4_nl_q8_0_##V);       \
    RT__DECL_DOT(q2_k_q8_k_##V); RT__DECL_DOT(q3_k_q8_k_##V); RT__DECL_DOT(q4_k_q8_k_##V);         \
    RT__DECL_DOT(q5_k_q8_k_##V); RT__DECL_DOT(q6_k_q8_k_##V); RT__DECL_DOT(iq4_xs_q8_k_##V);       \
    RT__DECL_DOT(f32_f32_##V); RT__DECL_DOT(f16_f16_##V); RT__DECL_DOT(bf16_bf16_##V);             \
    RT__DECL_DOT(iq2_xxs_q8_k_##V); RT__DECL_DOT(iq2_xs_q8_k_##V); RT__DECL_DOT(iq2_s_q8_k_##V);   \
    RT__DECL_DOT(iq3_xxs_q8_k_##V); RT__DECL_DOT(iq3_s_q8_k_##V); RT__DECL_DOT(iq1_s_q8_k_##V);    \
    RT__DECL_DOT(iq1_m_q8_k_##V);                                                                  \
    void rt_dot4_q4_k_q8_k_##V(uint64_t n, uint64_t n4, float *out, const void *w,                 \
                               uint64_t stride, const void *a);                                    \
    void rt_dot4_f16_f16_##V(uint64_t n, uint64_t n4, float *out, const void *w,                   \
                             uint64_t stride, const void *a);                                      \
    void rt_dot4_bf16_bf16_##V(uint64_t n, uint64_t n4, float *out, const void *w,                 \
                               uint64_t stride, const void *a);                                    \
    void rt_quantize_f16_##V(const float *x, void *out, uint64_t n);                               \
    void rt_quantize_bf16_##V(const float *x, void *out, uint64_t n);                              \
    void rt_quantize_q8_0_##V(const float *x, void *out, uint64_t n);                              \
    void rt_quantize_q8_1_##V(const float *x, void *out, uint64_t n);                              \
    void rt_quantize_q8_k_##V(const float *x, void *out, uint64_t n);
RT__DECL_X86(avx2)
RT__DECL_X86(vnni)
void rt_dot4_f16_f16_avx512(uint64_t n, uint64_t n4, float *out, const void *w, uint64_t stride,
                            const void *a);
#endif

#if RT_HAVE_NEON
void rt_dot4_q4_k_q8_k_neon(uint64_t n, uint64_t n4, float *out, const void *w, uint64_t stride,
                            const void *a);
void rt_dot4_q4_k_q8_k_sdot(uint64_t n, uint64_t n4, float *out, const void *w, uint64_t stride,
                            const void *a);
void rt_dot4_q6_k_q8_k_neon(uint64_t n, uint64_t n4, float *out, const void *w, uint64_t stride,
                            const void *a);
void rt_dot4_q6_k_q8_k_sdot(uint64_t n, uint64_t n4, float *out, const void *w, uint64_t stride,
                            const void *a);
RT__DECL_ALL(RT__DECL_NEON)
RT__DECL_ALL(RT__DECL_SDOT)
RT__DECL_DOT(f32_f32_neon);
RT__DECL_DOT(f16_f16_neon);
RT__DECL_DOT(bf16_bf16_neon);
void rt_quantize_f16_neon(const float *x, void *out, uint64_t n);
void rt_quantize_bf16_neon(const float *x, void *out, uint64_t n);
void rt_quantize_q8_0_neon(const float *x, void *out, uint64_t n);
void rt_quantize_q8_1_neon(const float *x, void *out, uint64_t n);
void rt_quantize_q8_k_neon(const float *x, void *out, uint64_t n);
#endif

/* Batched k-quant x Q8_K products (rt_kern_gemm.c), rt_gemm_fn. */
#define RT__DECL_GEMM(nm)                                                                         \
    void rt_gemm_##nm(uint64_t n, uint64_t nr, uint64_t nc, float *out, uint64_t ldo,              \
                      const void *w_rows, uint64_t stride, const void *act, uint64_t astride,      \
                      void *scratch);
#define RT__GEMM_TYPES(X, V) X(q2_k_q8_k_##V) X(q3_k_q8_k_##V) X(q4_k_q8_k_##V) X(q5_k_q8_k_##V) X(q6_k_q8_k_##V)
RT__GEMM_TYPES(RT__DECL_GEMM, ref)
#if RT_HAVE_X86
RT__GEMM_TYPES(RT__DECL_GEMM, avx2)
RT__GEMM_TYPES(RT__DECL_GEMM, vnni)
RT__GEMM_TYPES(RT__DECL_GEMM, avx512)
/* the 32-element block types x Q8_0 / Q8_1 */
#define RT__LGEMM_DECLS(V)                                                                        \
    RT__DECL_GEMM(q8_0_##V) RT__DECL_GEMM(q4_0_##V) RT__DECL_GEMM(q5_0_##V)                       \
        RT__DECL_GEMM(iq4_nl_##V) RT__DECL_GEMM(q4_1_##V) RT__DECL_GEMM(q5_1_##V)
RT__LGEMM_DECLS(avx2)
RT__LGEMM_DECLS(vnni)
#endif
#if RT_HAVE_NEON
/* rt_kern_gemm_neon.c: _sdot (SDOT, every k-quant) and _i8mm (SMMLA; the
 * neon+i8mm table uses the _sdot ones for Q2_K and Q3_K) */
RT__GEMM_TYPES(RT__DECL_GEMM, sdot)
RT__DECL_GEMM(q4_k_q8_k_i8mm)
RT__DECL_GEMM(q5_k_q8_k_i8mm)
RT__DECL_GEMM(q6_k_q8_k_i8mm)
#endif


#if RT_HAVE_NEON
/* aarch64 helpers of the four-row mat-vecs (rt_kern_neon.c) and the SDOT /
 * SMMLA gemms (rt_kern_gemm_neon.c). Used where arm_neon.h is included. */
/* GCC's pre-allocation scheduling pass hoists the loads and SDOTs of the
 * four-row kernels ahead of the multiplies that read each accumulator, and
 * then has to copy (and spill) every intermediate accumulator: source order
 * needs about a third fewer instructions there. */
#if defined(__GNUC__) && !defined(__clang__)
#define RT__NOSCHED1 __attribute__((optimize("no-schedule-insns")))
#else
#define RT__NOSCHED1
#endif

/* iv += acc * e[lane]. GCC reassociates a chain of vmlaq_laneq_s32 into a
 * tree, which keeps every intermediate accumulator alive (a copy each, then
 * spills): as an asm statement the multiply stays where it is written. */
#if defined(__GNUC__) && !defined(__clang__)
#define RT__MLA_LANE(iv, acc, e, lane)                                                            \
    __asm__("mla %0.4s, %1.4s, %2.s[%3]" : "+w"(iv) : "w"(acc), "w"(e), "i"(lane))
#else
#define RT__MLA_LANE(iv, acc, e, lane) ((iv) = vmlaq_laneq_s32((iv), (acc), (e), (lane)))
#endif
/* The same with a lane that is a constant only once the loop around it is
 * unrolled (each case spells its lane: valid at any optimization level and
 * for clang; the switch folds away when unrolled). */
#define RT__MLA_LANEV(iv, acc, e, lane)                                                           \
    do {                                                                                          \
        switch ((lane) & 3) {                                                                     \
        case 0: RT__MLA_LANE(iv, acc, e, 0); break;                                               \
        case 1: RT__MLA_LANE(iv, acc, e, 1); break;                                               \
        case 2: RT__MLA_LANE(iv, acc, e, 2); break;                                               \
        default: RT__MLA_LANE(iv, acc, e, 3); break;                                              \
        }                                                                                         \
    } while (0)
#endif

#endif /* MW_RT_KERN_INT_H */
