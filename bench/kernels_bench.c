/*
 * bench/kernels_bench.c — mat-vec throughput of every runtime kernel and
 * every variant this CPU runs (scalar / neon / neon+dotprod): a ROWS x COLS
 * weight matrix of random blocks (about 8 MiB of F16, i.e. beyond L2 for
 * the quantized types too), one thread, best of a few repetitions. Prints
 * ns per weight and weight bytes per second. Built and run by
 * bench/kernels_bench.sh.
 */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/rt_kernels.h"
#include "core/mw.h"

static uint64_t rs = 88172645463325252ull;
static uint64_t rnd(void)
{
    rs ^= rs << 13;
    rs ^= rs >> 7;
    rs ^= rs << 17;
    return rs;
}

int main(int argc, char **argv)
{
    const uint64_t rows = argc > 1 ? strtoull(argv[1], NULL, 10) : 2048;
    const uint64_t cols = argc > 2 ? strtoull(argv[2], NULL, 10) : 2048;
    const int reps = argc > 3 ? atoi(argv[3]) : 5;
    static const uint32_t types[] = {GGUF_TYPE_F32,  GGUF_TYPE_F16,  GGUF_TYPE_BF16, GGUF_TYPE_Q8_0,
                                     GGUF_TYPE_Q4_0, GGUF_TYPE_Q4_1, GGUF_TYPE_Q5_0, GGUF_TYPE_Q5_1,
                                     GGUF_TYPE_IQ4_NL, GGUF_TYPE_Q2_K, GGUF_TYPE_Q3_K, GGUF_TYPE_Q4_K,
                                     GGUF_TYPE_Q5_K, GGUF_TYPE_Q6_K, GGUF_TYPE_IQ4_XS,
                                     GGUF_TYPE_IQ2_XXS, GGUF_TYPE_IQ2_XS, GGUF_TYPE_IQ2_S,
                                     GGUF_TYPE_IQ3_XXS, GGUF_TYPE_IQ3_S, GGUF_TYPE_IQ1_S,
                                     GGUF_TYPE_IQ1_M};
    const struct rt_kernels *v[6];
    const int nv = rt_kernels_variants(v, 6);
    float *x = malloc(cols * sizeof *x), *out = malloc(rows * sizeof *out);
    void *act = malloc(cols * 4 + 64);
    for (uint64_t i = 0; i < cols; i++) x[i] = (float)((int64_t)(rnd() % 2001) - 1000) / 500.0f;
    printf("%llu x %llu, best of %d\n%-7s %-13s %10s %10s %10s\n", (unsigned long long)rows,
           (unsigned long long)cols, reps, "type", "variant", "ns/weight", "GB/s", "ms/matvec");
    for (size_t ti = 0; ti < sizeof types / sizeof types[0]; ti++) {
        const uint32_t t = types[ti];
        const uint64_t rb = rt_row_bytes(t, cols);
        if (!rb) continue;
        uint8_t *W = malloc(rows * rb);
        for (uint64_t i = 0; i < rows * rb; i++) W[i] = (uint8_t)rnd();
        /* keep f16 fields finite: clear bit 14 of every 16-bit word (exponent < 16) */
        if (t != GGUF_TYPE_F32 && t != GGUF_TYPE_BF16)
            for (uint64_t i = 1; i < rows * rb; i += 2) W[i] &= 0xBF;
        for (int vi = 0; vi < nv; vi++) {
            const struct rt_kernel *k = rt_kernel_get(v[vi], t);
            double best = 1e30;
            for (int r = 0; r < reps; r++) {
                const double t0 = mw_now_s();
                rt_quantize_act(v[vi], k, x, act, cols);
                rt_matvec(k, W, rows, cols, act, out);
                const double dt = mw_now_s() - t0;
                if (dt < best) best = dt;
            }
            printf("%-7s %-13s %10.3f %10.2f %10.3f\n", gguf_type_get(t)->name, v[vi]->name,
                   best * 1e9 / (double)(rows * cols), (double)(rows * rb) / best / 1e9, best * 1e3);
        }
        free(W);
    }
    free(x);
    free(out);
    free(act);
    return 0;
}
