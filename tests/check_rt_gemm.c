/*
 * tests/check_rt_gemm.c — the batched products (rt_gemm, rt_gemm_fn): for
 * every variant this CPU runs and every weight type, each output of a
 * (rows x tokens) product must be bit-identical to the scalar reference
 * mat-vec of that row and token (rt_kernels.h's contract), for tiles of 1..16
 * rows, panels that do not divide the token count, activation rows further
 * apart than one row, and output strides wider than the tile; and
 * rt_gemm must not allocate.
 */
#define _POSIX_C_SOURCE 200809L
#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/rt_kern_int.h"

#include "check_common.h"

static uint64_t rnd(uint64_t *s)
{
    *s ^= *s << 13;
    *s ^= *s >> 7;
    *s ^= *s << 17;
    return *s;
}

/* Offsets of a block's f16 fields (kept finite), or -1. */
static void f16_fields(uint32_t t, int f[2])
{
    f[0] = f[1] = -1;
    switch (t) {
    case GGUF_TYPE_Q2_K: f[0] = 80, f[1] = 82; break;
    case GGUF_TYPE_Q3_K: f[0] = 108; break;
    case GGUF_TYPE_Q4_K:
    case GGUF_TYPE_Q5_K: f[0] = 0, f[1] = 2; break;
    case GGUF_TYPE_Q6_K: f[0] = 208; break;
    case GGUF_TYPE_Q8_0:
    case GGUF_TYPE_Q4_0:
    case GGUF_TYPE_Q5_0:
    case GGUF_TYPE_IQ4_NL:
    case GGUF_TYPE_Q4_1:
    case GGUF_TYPE_Q5_1:
    case GGUF_TYPE_IQ4_XS: f[0] = 0; if (t == GGUF_TYPE_Q4_1 || t == GGUF_TYPE_Q5_1) f[1] = 2; break;
    default: break;
    }
}

static void make_rows(uint32_t t, uint64_t rows, uint64_t n, uint64_t *s, uint8_t *w)
{
    const struct gguf_type_info *ti = gguf_type_get(t);
    const uint64_t rb = rt_row_bytes(t, n);
    for (uint64_t i = 0; i < rows * rb; i++) w[i] = (uint8_t)rnd(s);
    if (t == GGUF_TYPE_F32 || t == GGUF_TYPE_F16) { /* finite values */
        for (uint64_t i = 0; i < rows * n; i++) {
            const float v = (float)((int64_t)(rnd(s) % 20001) - 10000) / 4096.0f;
            if (t == GGUF_TYPE_F32) memcpy(w + 4 * i, &v, 4);
            else mw_put_le16(w + 2 * i, mw_f32_to_f16(v));
        }
        return;
    }
    if (t == GGUF_TYPE_MXFP4) /* E8M0 exponents: finite scales 2^-68 .. 2^-8 */
        for (uint64_t b = 0; b < rows * (n / ti->blck); b++) w[b * ti->type_size] = (uint8_t)(60 + rnd(s) % 61);
    int f[2];
    f16_fields(t, f);
    for (uint64_t b = 0; b < rows * (n / ti->blck); b++)
        for (int k = 0; k < 2; k++)
            if (f[k] >= 0) {
                /* |scale| in [2^-14, 2^-2): finite, normal, any sign */
                const float v = ldexpf(1.0f + (float)(rnd(s) % 1000) / 1000.0f, -(int)(2 + rnd(s) % 12));
                mw_put_le16(w + b * ti->type_size + f[k], mw_f32_to_f16(rnd(s) & 1 ? -v : v));
            }
}

static const uint32_t types[] = {GGUF_TYPE_Q2_K, GGUF_TYPE_Q3_K, GGUF_TYPE_Q4_K, GGUF_TYPE_Q5_K,
                                 GGUF_TYPE_Q6_K, GGUF_TYPE_Q8_0, GGUF_TYPE_Q4_0, GGUF_TYPE_Q4_1,
                                 GGUF_TYPE_Q5_0, GGUF_TYPE_Q5_1, GGUF_TYPE_IQ4_NL, GGUF_TYPE_IQ4_XS,
                                 GGUF_TYPE_F16, GGUF_TYPE_F32, GGUF_TYPE_MXFP4};
#define N_TYPES (int)(sizeof types / sizeof types[0])

static uint32_t fbits(float f)
{
    uint32_t u;
    memcpy(&u, &f, 4);
    return u;
}

static rt_gemm_fn gemm_ref_of(uint32_t t)
{
    switch (t) {
    case GGUF_TYPE_Q2_K: return rt_gemm_q2_k_q8_k_ref;
    case GGUF_TYPE_Q3_K: return rt_gemm_q3_k_q8_k_ref;
    case GGUF_TYPE_Q4_K: return rt_gemm_q4_k_q8_k_ref;
    case GGUF_TYPE_Q5_K: return rt_gemm_q5_k_q8_k_ref;
    case GGUF_TYPE_Q6_K: return rt_gemm_q6_k_q8_k_ref;
    default: return NULL;
    }
}

START_TEST(test_gemm_vs_matvec)
{
    const uint32_t t = types[_i];
    const struct rt_kernels *v[6];
    const int nv = rt_kernels_variants(v, 6);
    const struct rt_kernels *ref = v[0];
    const struct rt_kernel *kr = rt_kernel_get(ref, t);
    ck_assert_ptr_nonnull(kr);
    const uint32_t blck = gguf_type_get(t)->blck == 1 ? 256 : gguf_type_get(t)->blck;
    static const uint64_t shapes[][3] = {/* blocks per row, rows, tokens */
                                         {1, 1, 1},  {1, 16, 9},  {2, 3, 8},   {3, 5, 17},
                                         {5, 16, 1}, {8, 7, 33},  {17, 16, 8}, {4, 1, 64},
                                         {2, 40, 3}, {9, 33, 12}};
    uint64_t seed = 0x9E3779B97F4A7C15ULL ^ t;
    void *scratch = aligned_alloc(64, RT_GEMM_SCRATCH);
    ck_assert_ptr_nonnull(scratch);
    for (size_t si = 0; si < sizeof shapes / sizeof shapes[0]; si++) {
        const uint64_t n = shapes[si][0] * blck, rows = shapes[si][1], nc = shapes[si][2];
        const uint64_t rb = rt_row_bytes(t, n);
        uint8_t *w = malloc(rows * rb + 1);
        make_rows(t, rows, n, &seed, w + 1); /* weights at an odd address */
        float *x = malloc(n * sizeof *x);
        const struct rt_act_format *af = rt_kernel_act(ref, kr);
        const uint64_t ab = rt_row_bytes(af->type, n), astride = (ab + 64 + 63) / 64 * 64;
        uint8_t *act = aligned_alloc(64, nc * astride);
        for (uint64_t c = 0; c < nc; c++) {
            for (uint64_t i = 0; i < n; i++) {
                const int64_t r = (int64_t)(rnd(&seed) % 20001) - 10000;
                x[i] = (float)r / 1000.0f * (c % 3 == 2 ? 100.0f : 1.0f);
            }
            af->quantize(x, act + c * astride, n);
        }
        const uint64_t ldo = rows + 3;
        float *want = malloc(nc * ldo * sizeof *want), *got = malloc(nc * ldo * sizeof *got);
        for (uint64_t i = 0; i < nc * ldo; i++) want[i] = -12345.0f;
        for (uint64_t c = 0; c < nc; c++) rt_matvec(kr, w + 1, rows, n, act + c * astride, want + c * ldo);
        for (int vi = 0; vi < nv; vi++) {
            const struct rt_kernel *k = rt_kernel_get(v[vi], t);
            ck_assert_ptr_nonnull(k);
            ck_assert_uint_eq(rt_kernel_act(v[vi], k)->type, af->type);
            for (uint64_t i = 0; i < nc * ldo; i++) got[i] = -12345.0f;
            rt_gemm(k, w + 1, rows, n, act, astride, nc, got, ldo, scratch);
            /* the portable decoded-block path too (no table uses it) */
            if (vi == 0 && gemm_ref_of(t)) {
                float *g2 = malloc(nc * ldo * sizeof *g2);
                for (uint64_t i = 0; i < nc * ldo; i++) g2[i] = -12345.0f;
                struct rt_kernel kk = *k;
                kk.gemm = gemm_ref_of(t);
                rt_gemm(&kk, w + 1, rows, n, act, astride, nc, g2, ldo, scratch);
                ck_assert_mem_eq(g2, want, nc * ldo * sizeof *g2);
                free(g2);
            }
            for (uint64_t c = 0; c < nc; c++) {
                for (uint64_t r = 0; r < rows; r++)
                    ck_assert_msg(fbits(got[c * ldo + r]) == fbits(want[c * ldo + r]),
                                  "%s %s n %llu rows %llu tokens %llu: row %llu token %llu: %.9g != %.9g",
                                  gguf_type_get(t)->name, v[vi]->name, (unsigned long long)n,
                                  (unsigned long long)rows, (unsigned long long)nc,
                                  (unsigned long long)r, (unsigned long long)c,
                                  (double)got[c * ldo + r], (double)want[c * ldo + r]);
                for (uint64_t r = rows; r < ldo; r++) ck_assert(got[c * ldo + r] == -12345.0f);
            }
        }
        free(want);
        free(got);
        free(act);
        free(x);
        free(w);
    }
    free(scratch);
}
END_TEST

/* The dispatch: which variants have a batched kernel for which type. */
START_TEST(test_gemm_table)
{
    const struct rt_kernels *v[6];
    const int nv = rt_kernels_variants(v, 6);
    for (int vi = 0; vi < nv; vi++) {
        printf("rt_gemm %-10s:", v[vi]->name);
        for (int i = 0; i < N_TYPES; i++) {
            const struct rt_kernel *k = rt_kernel_get(v[vi], types[i]);
            if (k && k->gemm) printf(" %s", gguf_type_get(types[i])->name);
        }
        printf("\n");
        /* the x86 SIMD tables have the k-quants' (and the scalar table, whose
         * reference is the mat-vec, none) */
        if (strncmp(v[vi]->name, "avx2", 4) == 0) {
            ck_assert_ptr_nonnull(rt_kernel_get(v[vi], GGUF_TYPE_Q4_K)->gemm);
            ck_assert_ptr_nonnull(rt_kernel_get(v[vi], GGUF_TYPE_Q6_K)->gemm);
        }
        if (vi == 0) ck_assert_ptr_null(rt_kernel_get(v[vi], GGUF_TYPE_Q4_K)->gemm);
        /* and the aarch64 SDOT / SMMLA tables every k-quant's */
        if (strcmp(v[vi]->name, "neon+dotprod") == 0 || strcmp(v[vi]->name, "neon+i8mm") == 0)
            for (uint32_t t = GGUF_TYPE_Q2_K; t <= GGUF_TYPE_Q6_K; t++)
                ck_assert_ptr_nonnull(rt_kernel_get(v[vi], t)->gemm);
    }
    /* MW_RT_EXPECT (the aarch64 cross build's qemu CPUs): the table this CPU
     * gets, so that a CPU model lacking a feature fails instead of skipping */
    const char *expect = getenv("MW_RT_EXPECT");
    const struct rt_cpu hw = rt_cpu_detect();
    if (expect) ck_assert_str_eq(rt_kernels_select(&hw)->name, expect);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("rt_gemm");
    TCase *tc = tcase_create("gemm");
    tcase_set_timeout(tc, 300);
    tcase_add_test(tc, test_gemm_table);
    tcase_add_loop_test(tc, test_gemm_vs_matvec, 0, N_TYPES);
    suite_add_tcase(s, tc);
    return run_suite(s);
}
