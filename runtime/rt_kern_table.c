/*
 * runtime/rt_kern_table.c — CPU detection, the dispatch tables (one per
 * variant, static const, filled with designated initializers), rt_matvec.
 */
#include "runtime/rt_kern_int.h"

#include <stdlib.h>
#include <string.h>

#if RT_HAVE_X86
#include <cpuid.h>
#endif
#if RT_HAVE_NEON
#include <sys/auxv.h>
#ifndef HWCAP_ASIMD
#define HWCAP_ASIMD (1UL << 1)
#endif
#ifndef HWCAP_ASIMDDP
#define HWCAP_ASIMDDP (1UL << 20)
#endif
#ifndef HWCAP2_I8MM
#define HWCAP2_I8MM (1UL << 13)
#endif
#endif

_Static_assert(GGUF_TYPE_COUNT == 43, "kernel tables must cover every ggml type id");

const int8_t rt__iq4nl_values[16] = {-127, -104, -83, -65, -49, -35, -22, -10,
                                     1,    13,   25,  38,  53,  69,  89,  113};

// --- CPU detection ---

/* What the hardware (and OS) offers, without the MW_RT_KERNELS cap. */
static struct rt_cpu cpu_hw(void)
{
    struct rt_cpu c = {0};
#if RT_HAVE_NEON
    const unsigned long hw = getauxval(AT_HWCAP), hw2 = getauxval(AT_HWCAP2);
    c.neon = (hw & HWCAP_ASIMD) != 0;
    c.dotprod = c.neon && (hw & HWCAP_ASIMDDP) != 0;
    c.i8mm = c.dotprod && (hw2 & HWCAP2_I8MM) != 0;
#elif RT_HAVE_X86
    /* CPUID and XGETBV directly (GCC's and clang's __builtin_cpu_supports
     * know different feature names): AVX2 + FMA + F16C with the OS saving
     * the xmm/ymm state; AVX-VNNI is the VEX form (VPDPBUSD/VPDPWSSD on ymm)
     * the vnni kernels use — AVX512-VNNI alone (Ice Lake, Cascade Lake) does
     * not provide it. */
    unsigned a, b, cx, d;
    if (__get_cpuid(1, &a, &b, &cx, &d)) {
        const bool fma = cx & (1u << 12), osxsave = cx & (1u << 27), f16c = cx & (1u << 29);
        bool ymm = false, zmm = false;
        if (osxsave) {
            unsigned lo, hi;
            __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
            ymm = (lo & 6u) == 6u;
            zmm = (lo & 0xE6u) == 0xE6u; /* + opmask, ZMM_Hi256, Hi16_ZMM state */
        }
        if (fma && f16c && ymm && __get_cpuid_max(0, NULL) >= 7) {
            __cpuid_count(7, 0, a, b, cx, d);
            c.avx2 = b & (1u << 5);
            /* AVX512F (b16), AVX512BW (b30), AVX512VL (b31), AVX512_VNNI (c11) */
            const bool avx512 = zmm && (b & (1u << 16)) && (b & (1u << 30)) && (b & (1u << 31)) &&
                                (cx & (1u << 11));
            __cpuid_count(7, 1, a, b, cx, d);
            c.avxvnni = c.avx2 && (a & (1u << 4));
            c.avx512 = c.avxvnni && avx512;
        }
    }
#endif
    return c;
}

struct rt_cpu rt_cpu_detect(void)
{
    struct rt_cpu c = cpu_hw();
    const char *e = getenv("MW_RT_KERNELS");
    if (e && strcmp(e, "scalar") == 0) {
        c = (struct rt_cpu){0};
    } else if (e && strcmp(e, "neon") == 0) {
        c.dotprod = false;
        c.i8mm = false;
    } else if (e && strcmp(e, "dotprod") == 0) {
        c.i8mm = false;
    } else if (e && strcmp(e, "avx2") == 0) {
        c.avxvnni = false;
        c.avx512 = false;
    } else if (e && strcmp(e, "vnni") == 0) {
        c.avx512 = false;
    }
    return c;
}

// --- tables ---

#define ACT(T, blck_, size_, fn) [GGUF_TYPE_##T] = {GGUF_TYPE_##T, blck_, size_, fn}
#define KER(W, A, fn) [GGUF_TYPE_##W] = {GGUF_TYPE_##W, GGUF_TYPE_##A, fn, NULL, NULL}
#define KER4(W, A, fn, fn4) [GGUF_TYPE_##W] = {GGUF_TYPE_##W, GGUF_TYPE_##A, fn, fn4, NULL}
#define KERG(W, A, fn, fn4, g) [GGUF_TYPE_##W] = {GGUF_TYPE_##W, GGUF_TYPE_##A, fn, fn4, g}

/* Batched (prompt) kernels (rt_gemm_fn) where a variant has them. The
 * scalar table has none: its decoded-block path (rt_gemm_*_ref, the
 * portable reference of rt_kern_gemm.c, tested against the mat-vec) is no
 * faster than its mat-vec, so rt_gemm runs the mat-vec per token there. */
#define RT__GEMM_ref(nm) NULL
#define RT__GEMM_neon(nm) NULL
#define RT__GEMM_sdot(nm) rt_gemm_##nm##_sdot
/* SMMLA for Q4_K Q5_K Q6_K; Q2_K and Q3_K (rare in the mixes we make) keep SDOT */
#define RT__GEMM_i8mm(nm) RT__GEMM_I8MM_##nm
#define RT__GEMM_I8MM_q2_k_q8_k rt_gemm_q2_k_q8_k_sdot
#define RT__GEMM_I8MM_q3_k_q8_k rt_gemm_q3_k_q8_k_sdot
#define RT__GEMM_I8MM_q4_k_q8_k rt_gemm_q4_k_q8_k_i8mm
#define RT__GEMM_I8MM_q5_k_q8_k rt_gemm_q5_k_q8_k_i8mm
#define RT__GEMM_I8MM_q6_k_q8_k rt_gemm_q6_k_q8_k_i8mm
#define RT__GEMM_avx2(nm) rt_gemm_##nm##_avx2
#define RT__GEMM_vnni(nm) rt_gemm_##nm##_vnni
#define RT__GEMM_avx512(nm) rt_gemm_##nm##_avx512

/* MXFP4 x Q8_0 (rt_kern_mxfp4.c): one NEON kernel for the neon tables */
#define RT__MXFP4_ref rt_dot_mxfp4_q8_0_ref
#define RT__MXFP4_neon rt_dot_mxfp4_q8_0_neon
#define RT__MXFP4G_ref NULL
#define RT__MXFP4G_neon rt_gemm_mxfp4_q8_0_neon

/* Four-row kernels (rt_dot4_fn) where a variant has them. */
#define RT__DOT4_ref(nm) NULL
#define RT__DOT4_neon(nm) rt_dot4_##nm##_neon
#define RT__DOT4_sdot(nm) rt_dot4_##nm##_sdot

/* Rows of every table: weight type -> (activation type, kernel name stem);
 * G names the batched kernels' variant. */
#define RT__KERNELS(V, FV) RT__KERNELS_G(V, FV, V)
#define RT__KERNELS_G(V, FV, G)                    \
    KER(F32, F32, rt_dot_f32_f32_##FV),            \
    KER(F16, F16, rt_dot_f16_f16_##FV),            \
    KER(BF16, BF16, rt_dot_bf16_bf16_##FV),        \
    KER(Q8_0, Q8_0, rt_dot_q8_0_q8_0_##V),         \
    KER(Q4_0, Q8_0, rt_dot_q4_0_q8_0_##V),         \
    KER(Q4_1, Q8_1, rt_dot_q4_1_q8_1_##V),         \
    KER(Q5_0, Q8_0, rt_dot_q5_0_q8_0_##V),         \
    KER(Q5_1, Q8_1, rt_dot_q5_1_q8_1_##V),         \
    KER(IQ4_NL, Q8_0, rt_dot_iq4_nl_q8_0_##V),     \
    KER(IQ4_XS, Q8_K, rt_dot_iq4_xs_q8_k_ref),     \
    KER(IQ2_XXS, Q8_K, rt_dot_iq2_xxs_q8_k_##V),   \
    KER(IQ2_XS, Q8_K, rt_dot_iq2_xs_q8_k_##V),     \
    KER(IQ2_S, Q8_K, rt_dot_iq2_s_q8_k_##V),       \
    KER(IQ3_XXS, Q8_K, rt_dot_iq3_xxs_q8_k_##V),   \
    KER(IQ3_S, Q8_K, rt_dot_iq3_s_q8_k_##V),       \
    KER(IQ1_S, Q8_K, rt_dot_iq1_s_q8_k_##V),       \
    KER(IQ1_M, Q8_K, rt_dot_iq1_m_q8_k_##V),       \
    KERG(MXFP4, Q8_0, RT__MXFP4_##FV, NULL, RT__MXFP4G_##FV), \
    KERG(Q2_K, Q8_K, rt_dot_q2_k_q8_k_##V, NULL, RT__GEMM_##G(q2_k_q8_k)), \
    KERG(Q3_K, Q8_K, rt_dot_q3_k_q8_k_##V, NULL, RT__GEMM_##G(q3_k_q8_k)), \
    KERG(Q4_K, Q8_K, rt_dot_q4_k_q8_k_##V, RT__DOT4_##V(q4_k_q8_k), RT__GEMM_##G(q4_k_q8_k)), \
    KERG(Q5_K, Q8_K, rt_dot_q5_k_q8_k_##V, NULL, RT__GEMM_##G(q5_k_q8_k)), \
    KERG(Q6_K, Q8_K, rt_dot_q6_k_q8_k_##V, RT__DOT4_##V(q6_k_q8_k), RT__GEMM_##G(q6_k_q8_k))

#define RT__ACTS(V)                                          \
    ACT(F32, 1, 4, rt_quantize_f32_ref),                       \
    ACT(F16, 1, 2, rt_quantize_f16_##V),                     \
    ACT(BF16, 1, 2, rt_quantize_bf16_##V),                   \
    ACT(Q8_0, RT_QK8_0, 34, rt_quantize_q8_0_##V),           \
    ACT(Q8_1, RT_QK8_0, 36, rt_quantize_q8_1_##V),           \
    ACT(Q8_K, RT_QK_K, 292, rt_quantize_q8_k_##V)

static const struct rt_kernels table_scalar = {
    .name = "scalar",
    .ssm = &rt_ssm_ops_ref,
    .kernel = {RT__KERNELS(ref, ref)},
    .act = {RT__ACTS(ref)},
};

#if RT_HAVE_NEON
static const struct rt_kernels table_neon = {
    .name = "neon",
    .ssm = &rt_ssm_ops_neon,
    .kernel = {RT__KERNELS(neon, neon)},
    .act = {RT__ACTS(neon)},
};
static const struct rt_kernels table_sdot = {
    .name = "neon+dotprod",
    .ssm = &rt_ssm_ops_neon,
    .kernel = {RT__KERNELS(sdot, neon)},
    .act = {RT__ACTS(neon)},
};
/* the SDOT mat-vec kernels (decode) with the SMMLA batched ones (prompt) */
static const struct rt_kernels table_i8mm = {
    .name = "neon+i8mm",
    .ssm = &rt_ssm_ops_neon,
    .kernel = {RT__KERNELS_G(sdot, neon, i8mm)},
    .act = {RT__ACTS(neon)},
};
#endif

#if RT_HAVE_X86
/* x86-64 tables (V = avx2 or vnni): the AVX2 / AVX-VNNI kernels and
 * quantizers of rt_kern_x86.c, every weight type included; KG: the k-quant
 * gemms' variant (V, or avx512 beside the vnni mat-vecs). */
#define RT__F16DOT4_avx2 rt_dot4_f16_f16_avx2
#define RT__F16DOT4_vnni rt_dot4_f16_f16_vnni
#define RT__F16DOT4_avx512 rt_dot4_f16_f16_avx512
#define RT__KERNELS_X86(V, KG)                              \
    KER(F32, F32, rt_dot_f32_f32_##V),                      \
    KERG(F16, F16, rt_dot_f16_f16_##V, RT__F16DOT4_##KG, NULL), \
    KERG(BF16, BF16, rt_dot_bf16_bf16_##V, rt_dot4_bf16_bf16_##V, NULL), \
    KERG(Q8_0, Q8_0, rt_dot_q8_0_q8_0_##V, NULL, rt_gemm_q8_0_##V), \
    KERG(Q4_0, Q8_0, rt_dot_q4_0_q8_0_##V, NULL, rt_gemm_q4_0_##V), \
    KERG(Q4_1, Q8_1, rt_dot_q4_1_q8_1_##V, NULL, rt_gemm_q4_1_##V), \
    KERG(Q5_0, Q8_0, rt_dot_q5_0_q8_0_##V, NULL, rt_gemm_q5_0_##V), \
    KERG(Q5_1, Q8_1, rt_dot_q5_1_q8_1_##V, NULL, rt_gemm_q5_1_##V), \
    KERG(IQ4_NL, Q8_0, rt_dot_iq4_nl_q8_0_##V, NULL, rt_gemm_iq4_nl_##V), \
    KER(IQ4_XS, Q8_K, rt_dot_iq4_xs_q8_k_##V),              \
    KER(IQ2_XXS, Q8_K, rt_dot_iq2_xxs_q8_k_##V),            \
    KER(IQ2_XS, Q8_K, rt_dot_iq2_xs_q8_k_##V),              \
    KER(IQ2_S, Q8_K, rt_dot_iq2_s_q8_k_##V),                \
    KER(IQ3_XXS, Q8_K, rt_dot_iq3_xxs_q8_k_##V),            \
    KER(IQ3_S, Q8_K, rt_dot_iq3_s_q8_k_##V),                \
    KER(IQ1_S, Q8_K, rt_dot_iq1_s_q8_k_##V),                \
    KER(IQ1_M, Q8_K, rt_dot_iq1_m_q8_k_##V),                \
    KERG(MXFP4, Q8_0, rt_dot_mxfp4_q8_0_avx2, rt_dot4_mxfp4_q8_0_avx2, rt_gemm_mxfp4_q8_0_avx2), \
    KERG(Q2_K, Q8_K, rt_dot_q2_k_q8_k_##V, NULL, RT__GEMM_##KG(q2_k_q8_k)), \
    KERG(Q3_K, Q8_K, rt_dot_q3_k_q8_k_##V, NULL, RT__GEMM_##KG(q3_k_q8_k)), \
    KERG(Q4_K, Q8_K, rt_dot_q4_k_q8_k_##V, rt_dot4_q4_k_q8_k_##V, RT__GEMM_##KG(q4_k_q8_k)), \
    KERG(Q5_K, Q8_K, rt_dot_q5_k_q8_k_##V, NULL, RT__GEMM_##KG(q5_k_q8_k)), \
    KERG(Q6_K, Q8_K, rt_dot_q6_k_q8_k_##V, NULL, RT__GEMM_##KG(q6_k_q8_k))

static const struct rt_kernels table_avx2 = {
    .name = "avx2",
    .ssm = &rt_ssm_ops_avx2,
    .kernel = {RT__KERNELS_X86(avx2, avx2)},
    .act = {RT__ACTS(avx2)},
};
static const struct rt_kernels table_avx2_vnni = {
    .name = "avx2+vnni",
    .ssm = &rt_ssm_ops_avx2,
    .kernel = {RT__KERNELS_X86(vnni, vnni)},
    .act = {RT__ACTS(vnni)},
};
/* AVX-512 (F, BW, VL, VNNI) beside AVX-VNNI (Sapphire Rapids, Zen 4 and
 * later): the AVX-VNNI table with the zmm k-quant gemms. */
static const struct rt_kernels table_avx512 = {
    .name = "avx512+vnni",
    .ssm = &rt_ssm_ops_avx2,
    .kernel = {RT__KERNELS_X86(vnni, avx512)},
    .act = {RT__ACTS(vnni)},
};
#endif

const struct rt_kernels *rt_kernels_select(const struct rt_cpu *cpu)
{
#if RT_HAVE_NEON
    if (cpu && cpu->neon && cpu->dotprod && cpu->i8mm) return &table_i8mm;
    if (cpu && cpu->neon && cpu->dotprod) return &table_sdot;
    if (cpu && cpu->neon) return &table_neon;
#elif RT_HAVE_X86
    if (cpu && cpu->avx2 && cpu->avxvnni && cpu->avx512) return &table_avx512;
    if (cpu && cpu->avx2 && cpu->avxvnni) return &table_avx2_vnni;
    if (cpu && cpu->avx2) return &table_avx2;
#else
    (void)cpu;
#endif
    return &table_scalar;
}

int rt_kernels_variants(const struct rt_kernels **v, int max)
{
    const struct rt_cpu hw = cpu_hw();
    const struct rt_kernels *all[6];
    int n = 0;
    all[n++] = &table_scalar;
#if RT_HAVE_NEON
    if (hw.neon) all[n++] = &table_neon;
    if (hw.neon && hw.dotprod) all[n++] = &table_sdot;
    if (hw.neon && hw.dotprod && hw.i8mm) all[n++] = &table_i8mm;
#elif RT_HAVE_X86
    if (hw.avx2) all[n++] = &table_avx2;
    if (hw.avx2 && hw.avxvnni) all[n++] = &table_avx2_vnni;
    if (hw.avx2 && hw.avxvnni && hw.avx512) all[n++] = &table_avx512;
#else
    (void)hw;
#endif
    int k = 0;
    for (; k < n && k < max; k++) v[k] = all[k];
    return k;
}

const struct rt_kernel *rt_kernel_get(const struct rt_kernels *ks, uint32_t wtype)
{
    if (!ks || wtype >= GGUF_TYPE_COUNT || ks->kernel[wtype].dot == NULL) return NULL;
    return &ks->kernel[wtype];
}

const struct rt_act_format *rt_kernel_act(const struct rt_kernels *ks, const struct rt_kernel *k)
{
    return &ks->act[k->act_type];
}

uint64_t rt_row_bytes(uint32_t t, uint64_t n)
{
    const struct gguf_type_info *ti = gguf_type_get(t);
    uint64_t bytes;
    if (!ti || ti->blck == 0 || n % ti->blck != 0) return 0;
    if (!mw_mul_u64(n / ti->blck, ti->type_size, &bytes)) return 0;
    return bytes;
}

void rt_quantize_act(const struct rt_kernels *ks, const struct rt_kernel *k, const float *x,
                     void *out, uint64_t n)
{
    ks->act[k->act_type].quantize(x, out, n);
}

void rt_matvec(const struct rt_kernel *k, const void *W, uint64_t rows, uint64_t cols,
               const void *act, float *out)
{
    const uint64_t stride = rt_row_bytes(k->wtype, cols);
    const uint8_t *w = W;
    const rt_dot_fn dot = k->dot;
    uint64_t r = 0;
    if (k->dot4 && rows >= 4) {
        k->dot4(cols, rows / 4, out, w, stride, act);
        r = rows / 4 * 4;
    }
    for (; r < rows; r++) dot(cols, &out[r], w + r * stride, act);
}

void rt_gemm(const struct rt_kernel *k, const void *W, uint64_t rows, uint64_t cols,
             const void *act, uint64_t astride, uint64_t ncols, float *out, uint64_t ldo,
             void *scratch)
{
    const uint8_t *a = act;
    /* one token: nothing to share a decoded block with; the mat-vec */
    if (!k->gemm || ncols < 2) {
        for (uint64_t c = 0; c < ncols; c++) rt_matvec(k, W, rows, cols, a + c * astride, out + c * ldo);
        return;
    }
    const uint64_t stride = rt_row_bytes(k->wtype, cols);
    const uint8_t *w = W;
    for (uint64_t r0 = 0; r0 < rows; r0 += RT_GEMM_MAX_ROWS) {
        const uint64_t nr = rows - r0 < RT_GEMM_MAX_ROWS ? rows - r0 : RT_GEMM_MAX_ROWS;
        k->gemm(cols, nr, ncols, out + r0, ldo, w + r0 * stride, stride, act, astride, scratch);
    }
}
