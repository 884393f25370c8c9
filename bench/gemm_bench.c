/*
 * bench/gemm_bench.c — the prompt's batched product against the mat-vec per
 * token: GMAC/s of rt_gemm and of rt_matvec on the same weight rows and
 * activation rows, for every kernel table this CPU runs (best of 3, one
 * thread, CPU time). Random blocks with finite f16 scales.
 *
 *   gemm_bench TYPE_ID [ROWS COLS TOKENS]     (default 512 2048 64)
 *
 * Run by bench/kernels_bench.sh after the mat-vec table.
 */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "runtime/rt_kern_int.h"

static double cpu_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

/* The offsets of a block's f16 scale fields. */
static int scale_offsets(uint32_t t, int off[2])
{
    switch (t) {
    case GGUF_TYPE_Q2_K: off[0] = 80, off[1] = 82; return 2;
    case GGUF_TYPE_Q3_K: off[0] = 108; return 1;
    case GGUF_TYPE_Q4_K:
    case GGUF_TYPE_Q5_K:
    case GGUF_TYPE_Q4_1:
    case GGUF_TYPE_Q5_1: off[0] = 0, off[1] = 2; return 2;
    case GGUF_TYPE_Q6_K: off[0] = 208; return 1;
    default: off[0] = 0; return 1;
    }
}

int main(int argc, char **argv)
{
    const uint32_t t = argc > 1 ? (uint32_t)atoi(argv[1]) : GGUF_TYPE_Q4_K;
    const uint64_t rows = argc > 2 ? strtoull(argv[2], NULL, 10) : 512;
    const uint64_t n = argc > 3 ? strtoull(argv[3], NULL, 10) : 2048;
    const uint64_t nc = argc > 4 ? strtoull(argv[4], NULL, 10) : 64;
    const int reps = argc > 5 ? atoi(argv[5]) : 3;
    const struct gguf_type_info *ti = gguf_type_get(t);
    const uint64_t rb = rt_row_bytes(t, n);
    if (!ti || !rb || ti->blck == 1 || rows == 0 || nc == 0) {
        fprintf(stderr, "usage: gemm_bench TYPE_ID(quantized) [ROWS COLS(multiple of the block) TOKENS [REPS]]\n");
        return 2;
    }
    uint8_t *w = malloc(rows * rb);
    float *x = malloc(n * sizeof *x), *out = malloc(rows * nc * sizeof *out);
    void *scratch = aligned_alloc(64, RT_GEMM_SCRATCH);
    if (!w || !x || !out || !scratch) return 3;
    uint64_t s = 1;
    for (uint64_t i = 0; i < rows * rb; i++) {
        s = s * 6364136223846793005ULL + 1442695040888963407ULL;
        w[i] = (uint8_t)(s >> 56);
    }
    int off[2];
    const int nf = scale_offsets(t, off);
    for (uint64_t b = 0; b < rows * (n / ti->blck); b++)
        for (int k = 0; k < nf; k++) mw_put_le16(w + b * ti->type_size + off[k], 0x2000); /* 2^-7 */
    for (uint64_t i = 0; i < n; i++) x[i] = (float)((int)(i * 7919 % 2001) - 1000) / 500.0f;
    const struct rt_kernels *v[6];
    const int nv = rt_kernels_variants(v, 6);
    printf("%s: %llu x %llu weights, %llu tokens, best of %d (GMAC/s)\n", ti->name, (unsigned long long)rows,
           (unsigned long long)n, (unsigned long long)nc, reps);
    for (int vi = 0; vi < nv; vi++) {
        const struct rt_kernel *k = rt_kernel_get(v[vi], t);
        if (!k) continue;
        const struct rt_act_format *af = rt_kernel_act(v[vi], k);
        const uint64_t astride = (rt_row_bytes(af->type, n) + 63) / 64 * 64;
        uint8_t *act = aligned_alloc(64, astride * nc);
        if (!act) return 3;
        for (uint64_t c = 0; c < nc; c++) af->quantize(x, act + c * astride, n);
        double best_mv = 1e30, best_mm = 1e30;
        for (int rep = 0; rep < reps; rep++) {
            const double t0 = cpu_s();
            for (uint64_t c = 0; c < nc; c++) rt_matvec(k, w, rows, n, act + c * astride, out + c * rows);
            const double t1 = cpu_s();
            rt_gemm(k, w, rows, n, act, astride, nc, out, rows, scratch);
            const double t2 = cpu_s();
            best_mv = t1 - t0 < best_mv ? t1 - t0 : best_mv;
            best_mm = t2 - t1 < best_mm ? t2 - t1 : best_mm;
        }
        const double macs = (double)rows * (double)n * (double)nc * 1e-9;
        printf("  %-11s mat-vec per token %7.2f   gemm %7.2f%s\n", v[vi]->name, macs / best_mv, macs / best_mm,
               k->gemm ? "" : "  (no batched kernel: the mat-vec)");
        free(act);
    }
    free(w);
    free(x);
    free(out);
    free(scratch);
    return 0;
}
