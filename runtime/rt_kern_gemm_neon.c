/*
 * runtime/rt_kern_gemm_neon.c — the aarch64 batched k-quant products
 * (rt_gemm_fn; the design and the reference: rt_kern_gemm.h):
 *
 *   rt_gemm_<t>_q8_k_sdot  Q2_K..Q6_K with SDOT (vdotq_s32), 4 tokens at a
 *                          time per decoded row;
 *   rt_gemm_<t>_q8_k_i8mm  Q4_K Q5_K Q6_K with SMMLA (vmmlaq_s32): two
 *                          decoded rows times two tokens per instruction.
 *
 * Both decode a weight block once per panel of RT_NPANEL tokens into struct
 * ndec: int8 values (Q2_K/Q4_K/Q5_K: the unsigned quants, <= 31; Q3_K/Q6_K:
 * the signed values u - 4 / u - 32 of the reference, so that the reference's
 * isum - msum is the dot itself and no bsums term is needed), int32 scales
 * and the int16 min coefficients. The integer sums equal the reference's
 * exactly (integer addition in any grouping, no intermediate can overflow:
 * bounds below), and the float combine is the reference's per (row, token)
 * in the lanes of a float32x4 (no FMA: -ffp-contract=off, vmulq/vsubq/
 * vaddq only), so every result is bit-identical to rt_dot_<t>_q8_k_ref.
 *
 * Integer bounds (a Q8_K value is in [-128, 127]): one SDOT lane sums 4
 * products |u * a| <= 63 * 128; a 32-element group dot is <= 32 * 63 * 128
 * = 258048 in magnitude, times |scale| <= 128 (Q6_K int8 scales; Q4_K/Q5_K
 * <= 63, Q3_K <= 32, Q2_K <= 15) and over 256 elements the isum stays below
 * 2^31 / 8. The min term: coefficients <= 63 times pair sums of bsums
 * (|.| <= 32 * 128 = 4096, int16) over 8 pairs, or <= 15 times 16 sums.
 */
#include "runtime/rt_kern_gemm.h"

#if RT_HAVE_NEON
#include <arm_neon.h>

#define RT_NPANEL 16 /* tokens per panel: a decoded block serves all of them */

/* A decoded weight block (see the top of the file). */
struct ndec {
    int8_t q[256];
    int32_t sc[16]; /* per 16-element group; Q4_K/Q5_K: per 32 in sc[0..7] */
    int16_t mc[16]; /* min coefficients: Q2_K per 16; Q4_K/Q5_K per 32 in mc[0..7] */
    float d, dmin;
} __attribute__((aligned(64)));

#define RT__INL static inline __attribute__((always_inline))

// --- decoders (plain AdvSIMD; inlined into the dotprod / i8mm functions) ---

/* Two f16 at p -> d and dmin (exact, as rt__f16). */
RT__INL void ndec_d2(const uint8_t *p, struct ndec *k)
{
    vst1_f32(&k->d, vget_low_f32(vcvt_f32_f16(vreinterpret_f16_u32(vdup_n_u32(rt__ld32(p))))));
}

/* Eight u8 lanes -> int32 scales sc[0..7]. */
RT__INL void ndec_sc8(uint8x8_t s, int32_t *sc)
{
    const uint16x8_t w = vmovl_u8(s);
    vst1q_s32(sc, vreinterpretq_s32_u32(vmovl_u16(vget_low_u16(w))));
    vst1q_s32(sc + 4, vreinterpretq_s32_u32(vmovl_high_u16(w)));
}

/* Sixteen s8 lanes -> int32 scales sc[0..15]. */
RT__INL void ndec_sc16(int8x16_t s, int32_t *sc)
{
    const int16x8_t lo = vmovl_s8(vget_low_s8(s)), hi = vmovl_high_s8(s);
    vst1q_s32(sc, vmovl_s16(vget_low_s16(lo)));
    vst1q_s32(sc + 4, vmovl_high_s16(lo));
    vst1q_s32(sc + 8, vmovl_s16(vget_low_s16(hi)));
    vst1q_s32(sc + 12, vmovl_high_s16(hi));
}

/* Q4_K/Q5_K 12-byte scale packing -> 8 scales and 8 mins (the 6-bit fields
 * of rt__k4_scales, four at a time in 32-bit words). */
RT__INL void ndec_k45(const uint8_t *q, struct ndec *k)
{
    const uint32_t u0 = rt__ld32(q), u1 = rt__ld32(q + 4), u2 = rt__ld32(q + 8);
    const uint32_t k1 = 0x3f3f3f3fu, k2 = 0x0f0f0f0fu, k3 = 0x03030303u;
    const uint64_t S = (uint64_t)((u2 & k2) | (((u0 >> 6) & k3) << 4)) << 32 | (u0 & k1);
    const uint64_t M = (uint64_t)(((u2 >> 4) & k2) | (((u1 >> 6) & k3) << 4)) << 32 | (u1 & k1);
    ndec_sc8(vcreate_u8(S), k->sc);
    vst1q_s16(k->mc, vreinterpretq_s16_u16(vmovl_u8(vcreate_u8(M))));
}

RT__INL void ndec_q2_k(const uint8_t *w, struct ndec *k)
{
    const uint8x16x4_t v = vld1q_u8_x4(w + 16);
    const uint8x16_t m3 = vdupq_n_u8(3);
    /* element 128h + 32j + l = bits 2j..2j+1 of qs[32h + l] */
    for (int h = 0; h < 2; h++) {
        uint8x16_t a = v.val[2 * h], b = v.val[2 * h + 1];
        for (int j = 0; j < 4; j++) {
            vst1q_u8((uint8_t *)k->q + 128 * h + 32 * j, vandq_u8(a, m3));
            vst1q_u8((uint8_t *)k->q + 128 * h + 32 * j + 16, vandq_u8(b, m3));
            a = vshrq_n_u8(a, 2);
            b = vshrq_n_u8(b, 2);
        }
    }
    const uint8x16_t s = vld1q_u8(w);
    ndec_sc16(vreinterpretq_s8_u8(vandq_u8(s, vdupq_n_u8(0x0F))), k->sc);
    const uint8x16_t m = vshrq_n_u8(s, 4);
    vst1q_s16(k->mc, vreinterpretq_s16_u16(vmovl_u8(vget_low_u8(m))));
    vst1q_s16(k->mc + 8, vreinterpretq_s16_u16(vmovl_high_u8(m)));
    ndec_d2(w + 80, k);
}

/* Q3_K: u - 4 = (2-bit value) + 4 * (hmask bit) - 4, in [-4, 3]. */
RT__INL void ndec_q3_k(const uint8_t *w, struct ndec *k)
{
    const uint8x16x4_t v = vld1q_u8_x4(w + 32);
    const uint8x16x2_t hm = vld1q_u8_x2(w);
    const uint8x16_t m3 = vdupq_n_u8(3), four = vdupq_n_u8(4);
    uint8x16_t h0 = hm.val[0], h1 = hm.val[1]; /* bit 0: chunk j (32 elements) */
    for (int h = 0; h < 2; h++) {
        uint8x16_t a = v.val[2 * h], b = v.val[2 * h + 1];
        for (int j = 0; j < 4; j++) {
            /* (hm bit) << 2 - 4 is 0 or -4 */
            const uint8x16_t o0 = vsubq_u8(vshlq_n_u8(vandq_u8(h0, vdupq_n_u8(1)), 2), four);
            const uint8x16_t o1 = vsubq_u8(vshlq_n_u8(vandq_u8(h1, vdupq_n_u8(1)), 2), four);
            vst1q_u8((uint8_t *)k->q + 128 * h + 32 * j, vaddq_u8(vandq_u8(a, m3), o0));
            vst1q_u8((uint8_t *)k->q + 128 * h + 32 * j + 16, vaddq_u8(vandq_u8(b, m3), o1));
            a = vshrq_n_u8(a, 2);
            b = vshrq_n_u8(b, 2);
            h0 = vshrq_n_u8(h0, 1);
            h1 = vshrq_n_u8(h1, 1);
        }
    }
    int8_t s[16];
    rt__k3_scales(w + 96, s);
    ndec_sc16(vld1q_s8(s), k->sc);
    k->d = rt__f16(rt__ld16(w + 108));
    k->dmin = 0.0f;
}

RT__INL void ndec_q4_k(const uint8_t *w, struct ndec *k)
{
    const uint8x16x4_t A = vld1q_u8_x4(w + 16), B = vld1q_u8_x4(w + 80);
    const uint8x16_t m4 = vdupq_n_u8(0x0F);
    /* chunk c (64 elements) from qs[32c .. 32c + 31]: low nibbles, then high */
    for (int c = 0; c < 4; c++) {
        const uint8x16_t q0 = c < 2 ? A.val[2 * c] : B.val[2 * c - 4];
        const uint8x16_t q1 = c < 2 ? A.val[2 * c + 1] : B.val[2 * c - 3];
        const uint8x16x4_t o = {{vandq_u8(q0, m4), vandq_u8(q1, m4), vshrq_n_u8(q0, 4), vshrq_n_u8(q1, 4)}};
        vst1q_u8_x4((uint8_t *)k->q + 64 * c, o);
    }
    ndec_k45(w + 4, k);
    ndec_d2(w, k);
}

RT__INL void ndec_q5_k(const uint8_t *w, struct ndec *k)
{
    const uint8x16x4_t A = vld1q_u8_x4(w + 48), B = vld1q_u8_x4(w + 112);
    const uint8x16x2_t qh = vld1q_u8_x2(w + 16);
    const uint8x16_t one = vdupq_n_u8(1), b4 = vdupq_n_u8(0x10);
    uint8x16_t h0 = qh.val[0], h1 = qh.val[1]; /* bit 0: low nibbles of chunk c, bit 1: high */
    for (int c = 0; c < 4; c++) {
        const uint8x16_t q0 = c < 2 ? A.val[2 * c] : B.val[2 * c - 4];
        const uint8x16_t q1 = c < 2 ? A.val[2 * c + 1] : B.val[2 * c - 3];
        /* vsli: (bit << 4) | (q & 0x0F); vsri: (q >> 4) | ((qh << 3) & 0x10) */
        const uint8x16x4_t o = {{vsliq_n_u8(q0, vandq_u8(h0, one), 4), vsliq_n_u8(q1, vandq_u8(h1, one), 4),
                                 vsriq_n_u8(vandq_u8(vshlq_n_u8(h0, 3), b4), q0, 4),
                                 vsriq_n_u8(vandq_u8(vshlq_n_u8(h1, 3), b4), q1, 4)}};
        vst1q_u8_x4((uint8_t *)k->q + 64 * c, o);
        h0 = vshrq_n_u8(h0, 2);
        h1 = vshrq_n_u8(h1, 2);
    }
    ndec_k45(w + 4, k);
    ndec_d2(w, k);
}

/* Q6_K: u - 32 in [-32, 31]; element 128h + 32j + l from ql[64h + l] (j 0,
 * 2: low / high nibble) or ql[64h + 32 + l] (j 1, 3) and bits 2j..2j+1 of
 * qh[32h + l]. */
RT__INL void ndec_q6_k(const uint8_t *w, struct ndec *k)
{
    const uint8x16_t m3 = vdupq_n_u8(3), m30 = vdupq_n_u8(0x30), off = vdupq_n_u8(32);
    for (int h = 0; h < 2; h++) {
        const uint8x16x4_t L = vld1q_u8_x4(w + 64 * h);
        const uint8x16x2_t H = vld1q_u8_x2(w + 128 + 32 * h);
        for (int i = 0; i < 2; i++) {
            const uint8x16_t l0 = L.val[i], l1 = L.val[2 + i], hb = H.val[i];
            const uint8x16_t u0 = vsliq_n_u8(l0, vandq_u8(hb, m3), 4);
            const uint8x16_t u1 = vsliq_n_u8(l1, vandq_u8(vshrq_n_u8(hb, 2), m3), 4);
            const uint8x16_t u2 = vorrq_u8(vshrq_n_u8(l0, 4), vandq_u8(hb, m30));
            const uint8x16_t u3 = vsliq_n_u8(vshrq_n_u8(l1, 4), vshrq_n_u8(hb, 6), 4);
            uint8_t *o = (uint8_t *)k->q + 128 * h + 16 * i;
            vst1q_u8(o, vsubq_u8(u0, off));
            vst1q_u8(o + 32, vsubq_u8(u1, off));
            vst1q_u8(o + 64, vsubq_u8(u2, off));
            vst1q_u8(o + 96, vsubq_u8(u3, off));
        }
    }
    ndec_sc16(vld1q_s8((const int8_t *)(w + 192)), k->sc);
    k->d = rt__f16(rt__ld16(w + 208));
    k->dmin = 0.0f;
}

/* Which scale / min layout a type decodes to. */
enum nshape {
    NS_PAIR, /* Q4_K Q5_K: scale and min per 32 elements */
    NS_MIN16, /* Q2_K: scale and min per 16 */
    NS_OFF16, /* Q3_K Q6_K: signed values, scale per 16, no min term */
};
#define NSHAPE_q2_k NS_MIN16
#define NSHAPE_q3_k NS_OFF16
#define NSHAPE_q4_k NS_PAIR
#define NSHAPE_q5_k NS_PAIR
#define NSHAPE_q6_k NS_OFF16

/* The float combine of four (row, token) pairs, lanes as the caller puts
 * them: (da * d) * isum - (da * dmin) * msum, or (da * d) * isum with isum
 * already the reference's isum - msum (NS_OFF16); added to *p. The
 * reference's operations per lane, in its order. */
RT__INL float32x4_t ncombine(enum nshape sh, float32x4_t da, float32x4_t d, float32x4_t dmin,
                             int32x4_t is, int32x4_t ms, float32x4_t p)
{
    float32x4_t v = vmulq_f32(vmulq_f32(da, d), vcvtq_f32_s32(is));
    if (sh != NS_OFF16) v = vsubq_f32(v, vmulq_f32(vmulq_f32(da, dmin), vcvtq_f32_s32(ms)));
    return vaddq_f32(p, v);
}

/* [sum s0, sum s1, sum s2, sum s3] */
RT__INL int32x4_t nhsum4(int32x4_t s0, int32x4_t s1, int32x4_t s2, int32x4_t s3)
{
    return vpaddq_s32(vpaddq_s32(s0, s1), vpaddq_s32(s2, s3));
}

/* Output: out[(c0 + j) * ldo + r] = (p0 + p1) + (p2 + p3) over the four
 * block partials of (r, j), where P(r, k, j) locates partial k. */
#define RT__NOUT(P)                                                                               \
    for (uint64_t r = 0; r < nr; r++)                                                             \
        for (int j = 0; j < pc; j++) {                                                            \
            const float q4[RT_NACC] = {P(r, 0, j), P(r, 1, j), P(r, 2, j), P(r, 3, j)};           \
            out[(c0 + (uint64_t)j) * ldo + r] = rt__reduce4(q4);                                  \
        }

// --- SDOT: one decoded row, four tokens ---

#if defined(__clang__)
#pragma clang attribute push(__attribute__((target("dotprod"))), apply_to = function)
#else
#pragma GCC push_options
#pragma GCC target("arch=armv8.2-a+dotprod")
#endif

/* RT__NOSCHED1, RT__MLA_LANE, RT__MLA_LANEV: rt_kern_int.h */

/* Scale differences for kquad_sdot: e[g] = sc[g] - sc[g + 1], the last one
 * sc itself (8 groups for NS_PAIR, else 16). */
RT__INL void nscale_diff(enum nshape sh, const struct ndec *k, int32x4_t e[4])
{
    const int32x4_t z = vdupq_n_s32(0);
    const int ng = sh == NS_PAIR ? 2 : 4;
    int32x4_t s[4];
    for (int i = 0; i < ng; i++) s[i] = vld1q_s32(k->sc + 4 * i);
    for (int i = 0; i < ng; i++) e[i] = vsubq_s32(s[i], vextq_s32(s[i], i + 1 < ng ? s[i + 1] : z, 1));
}

/* isum (lane t = token t) and msum of one decoded block against four Q8_K
 * blocks. Per 128 elements the decoded values are loaded once, then each
 * token's 128 activations. The scaled sum sum_g sc_g * d_g by Abel
 * summation: one SDOT accumulator per token runs through the groups (its
 * prefix sums S_g) and after group g is multiplied into the token's isum
 * vector by e_g = sc_g - sc_{g+1} (nscale_diff): sum_g e_g S_g is the same
 * integer (two's complement, exact whatever the intermediates). */
RT__INL void kquad_sdot(enum nshape sh, const struct ndec *k, const int32x4_t e[4],
                        const struct rt_block_q8_k *const a[4], int32x4_t *isum, int32x4_t *msum)
{
    const int32x4_t z = vdupq_n_s32(0);
    int32x4_t acc[4] = {z, z, z, z}, iv[4];
#pragma GCC unroll 2
    for (int h = 0; h < 2; h++) {
        const int8x16x4_t u0 = vld1q_s8_x4(k->q + 128 * h), u1 = vld1q_s8_x4(k->q + 128 * h + 64);
#pragma GCC unroll 4
        for (int t = 0; t < 4; t++) {
            const int8x16x4_t x0 = vld1q_s8_x4(a[t]->qs + 128 * h), x1 = vld1q_s8_x4(a[t]->qs + 128 * h + 64);
            if (sh == NS_PAIR) {
                /* four 32-element groups 4h .. 4h + 3 */
                acc[t] = vdotq_s32(vdotq_s32(acc[t], u0.val[0], x0.val[0]), u0.val[1], x0.val[1]);
                if (h == 0) iv[t] = vmulq_laneq_s32(acc[t], e[0], 0);
                else RT__MLA_LANE(iv[t], acc[t], e[h], 0);
                acc[t] = vdotq_s32(vdotq_s32(acc[t], u0.val[2], x0.val[2]), u0.val[3], x0.val[3]);
                RT__MLA_LANE(iv[t], acc[t], e[h], 1);
                acc[t] = vdotq_s32(vdotq_s32(acc[t], u1.val[0], x1.val[0]), u1.val[1], x1.val[1]);
                RT__MLA_LANE(iv[t], acc[t], e[h], 2);
                acc[t] = vdotq_s32(vdotq_s32(acc[t], u1.val[2], x1.val[2]), u1.val[3], x1.val[3]);
                RT__MLA_LANE(iv[t], acc[t], e[h], 3);
            } else {
                /* eight 16-element groups 8h .. 8h + 7 */
#pragma GCC unroll 4
                for (int i = 0; i < 4; i++) {
                    acc[t] = vdotq_s32(acc[t], u0.val[i], x0.val[i]);
                    if (h == 0 && i == 0) iv[t] = vmulq_laneq_s32(acc[t], e[0], 0);
                    else RT__MLA_LANEV(iv[t], acc[t], e[2 * h], i);
                }
#pragma GCC unroll 4
                for (int i = 0; i < 4; i++) {
                    acc[t] = vdotq_s32(acc[t], u1.val[i], x1.val[i]);
                    RT__MLA_LANEV(iv[t], acc[t], e[2 * h + 1], i);
                }
            }
        }
    }
    *isum = nhsum4(iv[0], iv[1], iv[2], iv[3]);
    if (sh == NS_OFF16) {
        *msum = z;
        return;
    }
    int32x4_t m[4];
    const int16x8_t mc0 = vld1q_s16(k->mc), mc1 = vld1q_s16(k->mc + 8);
    for (int t = 0; t < 4; t++) {
        const int16x8x2_t bs = vld1q_s16_x2(a[t]->bsums);
        if (sh == NS_PAIR) {
            const int16x8_t s = vpaddq_s16(bs.val[0], bs.val[1]); /* sums per 32 */
            m[t] = vmlal_high_s16(vmull_s16(vget_low_s16(mc0), vget_low_s16(s)), mc0, s);
        } else {
            int32x4_t v = vmull_s16(vget_low_s16(mc0), vget_low_s16(bs.val[0]));
            v = vmlal_high_s16(v, mc0, bs.val[0]);
            v = vmlal_s16(v, vget_low_s16(mc1), vget_low_s16(bs.val[1]));
            m[t] = vmlal_high_s16(v, mc1, bs.val[1]);
        }
    }
    *msum = nhsum4(m[0], m[1], m[2], m[3]);
}

/* The SDOT driver: per panel of RT_NPANEL tokens and block column b, every
 * row's block b is decoded once and applied to the panel four tokens at a
 * time (lane j = token j; a panel's last quad repeats its last token in the
 * spare lanes, whose partials are never read). Partials p[r][b % 4][j]. */
struct sdot_scratch {
    struct ndec k;
    float da[RT_NPANEL];
    float p[RT_GEMM_MAX_ROWS][RT_NACC][RT_NPANEL];
};
_Static_assert(sizeof(struct sdot_scratch) <= RT_GEMM_SCRATCH, "sdot gemm scratch");

#define RT__GEMM_SDOT(t, mode, bs)                                                                \
    RT__NOSCHED1 void rt_gemm_##t##_q8_k_sdot(RT__GEMM_PARAMS)                                    \
    {                                                                                             \
        const enum nshape sh = NSHAPE_##t;                                                        \
        const uint64_t nb = n / RT_QK_K;                                                          \
        const uint8_t *A = act;                                                                   \
        struct sdot_scratch *s = scratch;                                                         \
        (void)(mode);                                                                             \
        for (uint64_t c0 = 0; c0 < nc; c0 += RT_NPANEL) {                                         \
            const int pc = nc - c0 < RT_NPANEL ? (int)(nc - c0) : RT_NPANEL;                      \
            const int nq = (pc + 3) / 4;                                                          \
            memset(s->p, 0, nr * sizeof s->p[0]);                                                 \
            for (uint64_t b = 0; b < nb; b++) {                                                   \
                const struct rt_block_q8_k *ap[RT_NPANEL];                                        \
                for (int j = 0; j < 4 * nq; j++) {                                                \
                    ap[j] = (const struct rt_block_q8_k *)(A + (c0 + (uint64_t)(j < pc ? j : pc - 1)) * astride) + b; \
                    s->da[j] = ap[j]->d;                                                          \
                }                                                                                 \
                for (uint64_t r = 0; r < nr; r++) {                                               \
                    ndec_##t((const uint8_t *)w_rows + r * stride + b * (bs), &s->k);             \
                    const float32x4_t d = vdupq_n_f32(s->k.d), dmin = vdupq_n_f32(s->k.dmin);     \
                    float *pr = s->p[r][b % RT_NACC];                                             \
                    int32x4_t e[4];                                                               \
                    nscale_diff(sh, &s->k, e);                                                    \
                    for (int q = 0; q < nq; q++) {                                                \
                        int32x4_t is, ms;                                                         \
                        kquad_sdot(sh, &s->k, e, ap + 4 * q, &is, &ms);                           \
                        vst1q_f32(pr + 4 * q, ncombine(sh, vld1q_f32(s->da + 4 * q), d, dmin, is, ms, \
                                                      vld1q_f32(pr + 4 * q)));                    \
                    }                                                                             \
                }                                                                                 \
            }                                                                                     \
            RT__NOUT(RT__SDOT_P)                                                                  \
        }                                                                                         \
    }
#define RT__SDOT_P(r, k, j) s->p[r][k][j]

RT__KTYPES(RT__GEMM_SDOT)

#if defined(__clang__)
#pragma clang attribute pop
#else
#pragma GCC pop_options
#endif

// --- SMMLA (i8mm): two decoded rows, two tokens ---

#if defined(__clang__)
#pragma clang attribute push(__attribute__((target("dotprod,i8mm"))), apply_to = function)
#else
#pragma GCC push_options
#pragma GCC target("arch=armv8.2-a+dotprod+i8mm")
#endif

/* Two rows' decoded blocks, interleaved for SMMLA: 16-byte vector v holds
 * elements 8v .. 8v + 7 of row 0, then the same of row 1 (a 2x8 operand);
 * sc[g] = [e0, e0, e1, e1] for scale group g, e = s_g - s_{g+1} of each
 * row (the last group: s itself; the lanes of an SMMLA result are [r0 t0,
 * r0 t1, r1 t0, r1 t1]); mn: row 0's 8 mins, then row 1's. */
struct pdec {
    int8_t q[512];
    int32_t sc[16][4];
    int8_t mn[16];
    float d[4], dmin[4];
} __attribute__((aligned(64)));

/* Two tokens' activation blocks, interleaved the same way (rows = tokens);
 * hi/lo: the 8 sums per 32 elements of each token as 64 * hi + lo with hi
 * in [-64, 63], lo in [0, 63] (int8, so that SMMLA forms the min term too);
 * da = [da_t0, da_t1, da_t0, da_t1]. */
struct apair {
    int8_t q[512];
    int8_t hi[16], lo[16];
    float da[4];
} __attribute__((aligned(64)));

struct i8mm_scratch {
    struct ndec k[2];
    struct pdec w;
    struct apair a[RT_NPANEL / 2];
    float p[RT_GEMM_MAX_ROWS / 2][RT_NACC][RT_NPANEL / 2][4]; /* row pair, partial, token pair, lane */
};
_Static_assert(sizeof(struct i8mm_scratch) <= RT_GEMM_SCRATCH, "i8mm gemm scratch");

/* Interleaves 8-byte halves: [x.lo, y.lo] and [x.hi, y.hi]. */
RT__INL int8x16_t zlo(int8x16_t x, int8x16_t y)
{
    return vreinterpretq_s8_s64(vzip1q_s64(vreinterpretq_s64_s8(x), vreinterpretq_s64_s8(y)));
}
RT__INL int8x16_t zhi(int8x16_t x, int8x16_t y)
{
    return vreinterpretq_s8_s64(vzip2q_s64(vreinterpretq_s64_s8(x), vreinterpretq_s64_s8(y)));
}

/* 256 values of x and of y -> 512 interleaved bytes at o. */
RT__INL void interleave256(const int8_t *x, const int8_t *y, int8_t *o)
{
    for (int c = 0; c < 4; c++) {
        const int8x16x4_t X = vld1q_s8_x4(x + 64 * c), Y = vld1q_s8_x4(y + 64 * c);
        const int8x16x4_t o0 = {{zlo(X.val[0], Y.val[0]), zhi(X.val[0], Y.val[0]), zlo(X.val[1], Y.val[1]),
                                 zhi(X.val[1], Y.val[1])}};
        const int8x16x4_t o1 = {{zlo(X.val[2], Y.val[2]), zhi(X.val[2], Y.val[2]), zlo(X.val[3], Y.val[3]),
                                 zhi(X.val[3], Y.val[3])}};
        vst1q_s8_x4(o + 128 * c, o0);
        vst1q_s8_x4(o + 128 * c + 64, o1);
    }
}

/* [a0 a0 b0 b0], [a1 a1 b1 b1], [a2 a2 b2 b2], [a3 a3 b3 b3] into o[0..3]. */
RT__INL void pair_scales4(int32x4_t a, int32x4_t b, int32_t (*o)[4])
{
    const int64x2_t a01 = vreinterpretq_s64_s32(vzip1q_s32(a, a)), a23 = vreinterpretq_s64_s32(vzip2q_s32(a, a));
    const int64x2_t b01 = vreinterpretq_s64_s32(vzip1q_s32(b, b)), b23 = vreinterpretq_s64_s32(vzip2q_s32(b, b));
    vst1q_s32(o[0], vreinterpretq_s32_s64(vzip1q_s64(a01, b01)));
    vst1q_s32(o[1], vreinterpretq_s32_s64(vzip2q_s64(a01, b01)));
    vst1q_s32(o[2], vreinterpretq_s32_s64(vzip1q_s64(a23, b23)));
    vst1q_s32(o[3], vreinterpretq_s32_s64(vzip2q_s64(a23, b23)));
}

/* Rows k0, k1 (decoded) -> the pair block. */
RT__INL void pdec_fill(enum nshape sh, const struct ndec *k0, const struct ndec *k1, struct pdec *w)
{
    interleave256(k0->q, k1->q, w->q);
    const int ng = sh == NS_PAIR ? 8 : 16;
    for (int g = 0; g < ng; g += 4) pair_scales4(vld1q_s32(k0->sc + g), vld1q_s32(k1->sc + g), w->sc + g);
    /* kpair_i8mm's Abel summation: sc[g] - sc[g + 1] (the last one stays) */
    for (int g = 0; g + 1 < ng; g++) vst1q_s32(w->sc[g], vsubq_s32(vld1q_s32(w->sc[g]), vld1q_s32(w->sc[g + 1])));
    if (sh == NS_PAIR) /* mins <= 63: int8 */
        vst1q_s8(w->mn, vcombine_s8(vmovn_s16(vld1q_s16(k0->mc)), vmovn_s16(vld1q_s16(k1->mc))));
    const float32x2_t d0 = vld1_f32(&k0->d), d1 = vld1_f32(&k1->d); /* [d, dmin] */
    vst1q_f32(w->d, vcombine_f32(vdup_lane_f32(d0, 0), vdup_lane_f32(d1, 0)));
    vst1q_f32(w->dmin, vcombine_f32(vdup_lane_f32(d0, 1), vdup_lane_f32(d1, 1)));
}

/* Tokens x, y -> the activation pair (hi/lo only for the min types). */
RT__INL void apair_fill(enum nshape sh, const struct rt_block_q8_k *x, const struct rt_block_q8_k *y,
                        struct apair *o)
{
    interleave256(x->qs, y->qs, o->q);
    if (sh == NS_PAIR) {
        const int16x8x2_t bx = vld1q_s16_x2(x->bsums), by = vld1q_s16_x2(y->bsums);
        /* |sum per 32| <= 4096: >> 6 (floor) in [-64, 63]; & 63 = s - 64 * (s >> 6) */
        const int16x8_t sx = vpaddq_s16(bx.val[0], bx.val[1]), sy = vpaddq_s16(by.val[0], by.val[1]);
        const int16x8_t m63 = vdupq_n_s16(63);
        vst1q_s8(o->hi, vcombine_s8(vmovn_s16(vshrq_n_s16(sx, 6)), vmovn_s16(vshrq_n_s16(sy, 6))));
        vst1q_s8(o->lo, vcombine_s8(vmovn_s16(vandq_s16(sx, m63)), vmovn_s16(vandq_s16(sy, m63))));
    }
    const float32x2_t dxy = vset_lane_f32(y->d, vdup_n_f32(x->d), 1);
    vst1q_f32(o->da, vcombine_f32(dxy, dxy));
}

/* isum and msum of a row pair against a token pair, lanes [r0 t0, r0 t1,
 * r1 t0, r1 t1]. One running SMMLA accumulator over the scale groups (its
 * prefix sums S_g, a 2x2 block each), multiplied into isum after group g
 * by the [e0 e0 e1 e1] differences (Abel summation: the same integers,
 * exact). msum (NS_PAIR): 64 * (mins . hi) + (mins . lo). */
#if defined(__GNUC__) && !defined(__clang__)
#define RT__MLA_V(iv, acc, e) __asm__("mla %0.4s, %1.4s, %2.4s" : "+w"(iv) : "w"(acc), "w"(e))
#else
#define RT__MLA_V(iv, acc, e) ((iv) = vmlaq_s32((iv), (acc), (e)))
#endif
RT__INL void kpair_i8mm(enum nshape sh, const struct pdec *w, const struct apair *a, int32x4_t *isum,
                        int32x4_t *msum)
{
    const int32x4_t z = vdupq_n_s32(0);
    int32x4_t acc = z, iv = z;
    for (int c = 0; c < 8; c++) { /* 64 bytes = 32 elements of both rows */
        const int8x16x4_t W = vld1q_s8_x4(w->q + 64 * c), X = vld1q_s8_x4(a->q + 64 * c);
        if (sh == NS_PAIR) {
            acc = vmmlaq_s32(vmmlaq_s32(acc, W.val[0], X.val[0]), W.val[1], X.val[1]);
            acc = vmmlaq_s32(vmmlaq_s32(acc, W.val[2], X.val[2]), W.val[3], X.val[3]);
            if (c == 0) iv = vmulq_s32(acc, vld1q_s32(w->sc[0]));
            else RT__MLA_V(iv, acc, vld1q_s32(w->sc[c]));
        } else {
            acc = vmmlaq_s32(vmmlaq_s32(acc, W.val[0], X.val[0]), W.val[1], X.val[1]);
            if (c == 0) iv = vmulq_s32(acc, vld1q_s32(w->sc[0]));
            else RT__MLA_V(iv, acc, vld1q_s32(w->sc[2 * c]));
            acc = vmmlaq_s32(vmmlaq_s32(acc, W.val[2], X.val[2]), W.val[3], X.val[3]);
            RT__MLA_V(iv, acc, vld1q_s32(w->sc[2 * c + 1]));
        }
    }
    *isum = iv;
    if (sh == NS_PAIR) {
        const int8x16_t mn = vld1q_s8(w->mn);
        const int32x4_t hi = vmmlaq_s32(z, mn, vld1q_s8(a->hi)); /* |.| <= 8 * 63 * 64 */
        *msum = vmmlaq_s32(vshlq_n_s32(hi, 6), mn, vld1q_s8(a->lo));
    } else {
        *msum = z;
    }
}

/* The SMMLA driver: per panel and block column b, the panel's tokens are
 * interleaved in pairs once, then every row pair's blocks b are decoded
 * and interleaved once and applied to every token pair. Odd counts repeat
 * the last row / token (never read back). Partials p[row pair][b % 4]
 * [token pair][lane]. */
#define RT__GEMM_I8MM(t, mode, bs)                                                                \
    RT__NOSCHED1 void rt_gemm_##t##_q8_k_i8mm(RT__GEMM_PARAMS)                                    \
    {                                                                                             \
        const enum nshape sh = NSHAPE_##t;                                                        \
        const uint64_t nb = n / RT_QK_K;                                                          \
        const uint8_t *A = act;                                                                   \
        struct i8mm_scratch *s = scratch;                                                         \
        const uint64_t nrp = (nr + 1) / 2;                                                        \
        (void)(mode);                                                                             \
        for (uint64_t c0 = 0; c0 < nc; c0 += RT_NPANEL) {                                         \
            const int pc = nc - c0 < RT_NPANEL ? (int)(nc - c0) : RT_NPANEL;                      \
            const int np = (pc + 1) / 2;                                                          \
            memset(s->p, 0, nrp * sizeof s->p[0]);                                                \
            for (uint64_t b = 0; b < nb; b++) {                                                   \
                for (int j = 0; j < np; j++) {                                                    \
                    const uint64_t t0 = c0 + 2 * (uint64_t)j, t1 = 2 * j + 1 < pc ? t0 + 1 : t0;   \
                    apair_fill(sh, (const struct rt_block_q8_k *)(A + t0 * astride) + b,          \
                               (const struct rt_block_q8_k *)(A + t1 * astride) + b, &s->a[j]);   \
                }                                                                                 \
                for (uint64_t rp = 0; rp < nrp; rp++) {                                           \
                    const uint8_t *w0 = (const uint8_t *)w_rows + 2 * rp * stride + b * (bs);     \
                    ndec_##t(w0, &s->k[0]);                                                       \
                    if (2 * rp + 1 < nr) ndec_##t(w0 + stride, &s->k[1]);                          \
                    else s->k[1] = s->k[0];                                                       \
                    pdec_fill(sh, &s->k[0], &s->k[1], &s->w);                                     \
                    const float32x4_t d = vld1q_f32(s->w.d), dmin = vld1q_f32(s->w.dmin);         \
                    float(*pr)[4] = s->p[rp][b % RT_NACC];                                        \
                    for (int j = 0; j < np; j++) {                                                \
                        int32x4_t is, ms;                                                         \
                        kpair_i8mm(sh, &s->w, &s->a[j], &is, &ms);                                \
                        vst1q_f32(pr[j], ncombine(sh, vld1q_f32(s->a[j].da), d, dmin, is, ms,     \
                                                  vld1q_f32(pr[j])));                             \
                    }                                                                             \
                }                                                                                 \
            }                                                                                     \
            RT__NOUT(RT__I8MM_P)                                                                  \
        }                                                                                         \
    }
#define RT__I8MM_P(r, k, j) s->p[(r) / 2][k][(j) / 2][2 * ((r) % 2) + (j) % 2]

RT__GEMM_I8MM(q4_k, KM_MIN, RT_BS_Q4_K)
RT__GEMM_I8MM(q5_k, KM_MIN, RT_BS_Q5_K)
RT__GEMM_I8MM(q6_k, KM_OFF, RT_BS_Q6_K)

#if defined(__clang__)
#pragma clang attribute pop
#else
#pragma GCC pop_options
#endif

#endif /* RT_HAVE_NEON */
