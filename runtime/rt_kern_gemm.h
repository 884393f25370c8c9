/*
 * runtime/rt_kern_gemm.h — internals of the batched product of the prompt (rt_gemm_fn,
 * rt_kernels.h): a tile of up to RT_GEMM_MAX_ROWS weight rows times a batch
 * of activation rows, every result bit-identical to the mat-vec kernel's.
 *
 * A mat-vec unpacks every weight block again for every token. Here a weight
 * block is unpacked once into a decoded form (struct kdec) that the integer
 * dot of each ISA reads directly, and that decoded block is applied to a
 * panel of RT_GEMM_PANEL tokens whose activation blocks stay in L1; the
 * tile's packed rows stay in L1/L2 while the panels go by.
 *
 * Decoded k-quant block (Q2_K Q3_K Q4_K Q5_K Q6_K; docs/formats.md §3.4):
 *   u[256]   every quant as an unsigned byte (Q2_K 0..3, Q3_K 0..7, Q4_K
 *            0..15, Q5_K 0..31, Q6_K 0..63);
 *   sc[16]   the integer scale of each 16-element group, and scx[] the same
 *            spread over the 16-bit lanes of a 32-byte multiply-add;
 *   mc[16]   the integer coefficient of each group's activation sum
 *            (bsums): the min (Q2_K, Q4_K, Q5_K) or offset * scale (Q3_K:
 *            values are u - 4, so 4 * sc; Q6_K: u - 32, so 32 * sc).
 * Then isum = sum_g sc[g] * dot(u_g, a_g) and msum = sum_g mc[g] * bsums[g]
 * are exact integers, and the reference's (rt_kern_kquants.c) integer
 * results are isum (with the min term msum apart) or isum - msum; the float
 * combine is the reference's expression, per (row, token), block b into
 * partial b % 4.
 *
 * The portable driver (RT__GEMM_K_BODY, kdot_ref) is here; rt_kern_gemm.c
 * instantiates it for the scalar reference and has the x86 (AVX2) variant,
 * rt_kern_gemm_neon.c the aarch64 ones.
 *
 * Integer bounds: a maddubs lane is u*a + u*a <= 2 * 63 * 127 = 16002 (no
 * int16 saturation; activations are ours, in [-127, 127]); times |sc| <=
 * 128 and summed over 8 lanes per group stays far inside int32; |mc| <= 32
 * * 128 = 4096 fits int16, |bsums| <= 16 * 127.
 */
#ifndef MW_RT_KERN_GEMM_H
#define MW_RT_KERN_GEMM_H

#include "runtime/rt_kern_int.h"

#include <stddef.h>

#define RT_GEMM_PANEL 16 /* tokens that share one decoded weight block */

enum kmode {
    KM_MIN, /* p += (da * d) * isum - (da * dmin) * msum  (Q2_K Q4_K Q5_K) */
    KM_OFF, /* p += (da * d) * (isum - msum)              (Q3_K Q6_K) */
};

struct kdec {
    uint8_t u[256];
    int16_t scx[128]; /* 32-byte chunk j, int16 lane l: sc[2j + l / 8] */
    int16_t sc[16];
    int16_t mc[16];
    float d, dmin; /* the weight block's f16 scales as f32 */
};

// --- decoders (scalar: once per block per panel, not per token) ---

static inline void scx_fill(struct kdec *k)
{
    for (int j = 0; j < 8; j++)
        for (int l = 0; l < 16; l++) k->scx[16 * j + l] = k->sc[2 * j + l / 8];
}

/* The 2-bit plane layout of Q2_K / Q3_K: element 128h + 32k + l is bits
 * 2k..2k+1 of qs[32h + l]. */
static inline void u_2bit(const uint8_t *qs, uint8_t *u)
{
    for (int h = 0; h < 2; h++)
        for (int k = 0; k < 4; k++)
            for (int l = 0; l < 32; l++) u[128 * h + 32 * k + l] = (uint8_t)((qs[32 * h + l] >> (2 * k)) & 3);
}

static inline void dec_q2_k(const uint8_t *w, struct kdec *k)
{
    u_2bit(w + 16, k->u);
    for (int g = 0; g < 16; g++) {
        k->sc[g] = (int16_t)(w[g] & 0x0F);
        k->mc[g] = (int16_t)(w[g] >> 4);
    }
    k->d = rt__f16(rt__ld16(w + 80));
    k->dmin = rt__f16(rt__ld16(w + 82));
}

static inline void dec_q3_k(const uint8_t *w, struct kdec *k)
{
    const uint8_t *hm = w;
    u_2bit(w + 32, k->u);
    for (int e = 0; e < 256; e++) k->u[e] = (uint8_t)(k->u[e] | (((hm[e % 32] >> (e / 32)) & 1) << 2));
    int8_t s[16];
    rt__k3_scales(w + 96, s);
    for (int g = 0; g < 16; g++) {
        k->sc[g] = s[g];
        k->mc[g] = (int16_t)(4 * s[g]);
    }
    k->d = rt__f16(rt__ld16(w + 108));
    k->dmin = 0.0f;
}

static inline void k45_scales(const uint8_t *sc12, struct kdec *k)
{
    uint8_t S[8], M[8];
    rt__k4_scales(sc12, S, M);
    for (int g = 0; g < 16; g++) {
        k->sc[g] = S[g / 2];
        k->mc[g] = M[g / 2];
    }
}

static inline void dec_q4_k(const uint8_t *w, struct kdec *k)
{
    const uint8_t *qs = w + 16;
    for (int c = 0; c < 4; c++)
        for (int l = 0; l < 32; l++) {
            k->u[64 * c + l] = qs[32 * c + l] & 0x0F;
            k->u[64 * c + 32 + l] = qs[32 * c + l] >> 4;
        }
    k45_scales(w + 4, k);
    k->d = rt__f16(rt__ld16(w));
    k->dmin = rt__f16(rt__ld16(w + 2));
}

static inline void dec_q5_k(const uint8_t *w, struct kdec *k)
{
    const uint8_t *qh = w + 16, *qs = w + 48;
    for (int c = 0; c < 4; c++)
        for (int l = 0; l < 32; l++) {
            k->u[64 * c + l] = (uint8_t)((qs[32 * c + l] & 0x0F) | (((qh[l] >> (2 * c)) & 1) << 4));
            k->u[64 * c + 32 + l] = (uint8_t)((qs[32 * c + l] >> 4) | (((qh[l] >> (2 * c + 1)) & 1) << 4));
        }
    k45_scales(w + 4, k);
    k->d = rt__f16(rt__ld16(w));
    k->dmin = rt__f16(rt__ld16(w + 2));
}

static inline void dec_q6_k(const uint8_t *w, struct kdec *k)
{
    const uint8_t *ql = w, *qh = w + 128;
    const int8_t *sc = (const int8_t *)(w + 192);
    for (int h = 0; h < 2; h++)
        for (int l = 0; l < 32; l++) {
            const uint8_t *L = ql + 64 * h, H = qh[32 * h + l];
            uint8_t *o = k->u + 128 * h;
            o[l] = (uint8_t)((L[l] & 0x0F) | ((H & 3) << 4));
            o[l + 32] = (uint8_t)((L[l + 32] & 0x0F) | (((H >> 2) & 3) << 4));
            o[l + 64] = (uint8_t)((L[l] >> 4) | (((H >> 4) & 3) << 4));
            o[l + 96] = (uint8_t)((L[l + 32] >> 4) | (((H >> 6) & 3) << 4));
        }
    for (int g = 0; g < 16; g++) {
        k->sc[g] = sc[g];
        k->mc[g] = (int16_t)(32 * sc[g]);
    }
    k->d = rt__f16(rt__ld16(w + 208));
    k->dmin = 0.0f;
}

// --- the integer dot of a decoded block with a Q8_K block, per ISA ---

static inline void kdot_ref(const struct kdec *k, const struct rt_block_q8_k *a, int32_t *isum,
                            int32_t *msum)
{
    int32_t is = 0, ms = 0;
    for (int g = 0; g < 16; g++) {
        int32_t s = 0;
        for (int j = 0; j < 16; j++) s += (int32_t)k->u[16 * g + j] * a->qs[16 * g + j];
        is += k->sc[g] * s;
        ms += k->mc[g] * a->bsums[g];
    }
    *isum = is;
    *msum = ms;
}

/* The float combine of the references: block b into p[b % 4]. */
static inline void kcombine(enum kmode mode, const struct kdec *k, float da, int32_t is, int32_t ms,
                            float *p)
{
    if (mode == KM_MIN)
        *p += (da * k->d) * (float)is - (da * k->dmin) * (float)ms;
    else
        *p += (da * k->d) * (float)(is - ms);
}

/* The driver, instantiated per ISA (KDOT and DEC inlined). For each panel
 * of RT_GEMM_PANEL tokens and each block column b, the panel's activation
 * blocks b stay in L1 while every row's block b is decoded once and dotted
 * with each of them; the partials p[r][j][b % 4] live in scratch. */
#define RT__GEMM_K_BODY(KDOT, DEC, MODE, BS)                                                      \
    do {                                                                                          \
        const uint64_t nb = n / RT_QK_K;                                                          \
        const uint8_t *A = act;                                                                   \
        struct kdec *kd = scratch;                                                                \
        float(*p)[RT_GEMM_PANEL][RT_NACC] =                                                       \
            (float(*)[RT_GEMM_PANEL][RT_NACC])((uint8_t *)scratch + sizeof(struct kdec));         \
        for (uint64_t c0 = 0; c0 < nc; c0 += RT_GEMM_PANEL) {                                     \
            const int pc = nc - c0 < RT_GEMM_PANEL ? (int)(nc - c0) : RT_GEMM_PANEL;              \
            memset(p, 0, nr * sizeof *p);                                                         \
            for (uint64_t b = 0; b < nb; b++) {                                                   \
                const struct rt_block_q8_k *a0 = (const struct rt_block_q8_k *)(A + c0 * astride) + b; \
                for (uint64_t r = 0; r < nr; r++) {                                               \
                    DEC((const uint8_t *)w_rows + r * stride + b * (BS), kd);                     \
                    for (int j = 0; j < pc; j++) {                                                \
                        const struct rt_block_q8_k *a =                                           \
                            (const struct rt_block_q8_k *)((const uint8_t *)a0 + (uint64_t)j * astride); \
                        int32_t is, ms;                                                           \
                        KDOT(kd, a, &is, &ms);                                                    \
                        kcombine(MODE, kd, a->d, is, ms, &p[r][j][b % RT_NACC]);                  \
                    }                                                                             \
                }                                                                                 \
            }                                                                                     \
            for (uint64_t r = 0; r < nr; r++)                                                     \
                for (int j = 0; j < pc; j++) out[(c0 + (uint64_t)j) * ldo + r] = rt__reduce4(p[r][j]); \
        }                                                                                         \
    } while (0)

_Static_assert(sizeof(struct kdec) + RT_GEMM_MAX_ROWS * RT_GEMM_PANEL * RT_NACC * sizeof(float) <=
                   RT_GEMM_SCRATCH,
               "gemm scratch holds the decoded block and the partials");
_Static_assert(offsetof(struct kdec, scx) % 32 == 0 && offsetof(struct kdec, sc) % 32 == 0 &&
                   offsetof(struct kdec, mc) % 32 == 0,
               "32-byte aligned vectors in struct kdec");

#define RT__GEMM_PARAMS                                                                           \
    uint64_t n, uint64_t nr, uint64_t nc, float *out, uint64_t ldo, const void *w_rows,           \
        uint64_t stride, const void *act, uint64_t astride, void *scratch

#define RT__KTYPES(X)                                                                             \
    X(q2_k, KM_MIN, RT_BS_Q2_K) X(q3_k, KM_OFF, RT_BS_Q3_K) X(q4_k, KM_MIN, RT_BS_Q4_K)            \
        X(q5_k, KM_MIN, RT_BS_Q5_K) X(q6_k, KM_OFF, RT_BS_Q6_K)

#endif /* MW_RT_KERN_GEMM_H */
