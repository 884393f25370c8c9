/*
 * bench/sgemm_peak.c — this machine's OpenBLAS sgemm throughput, the yardstick
 * for calibration's GEMMs (bench/scale_bench.sh): C (M x N) = A (M x K) Bᵀ,
 * row-major, the shape of a calibration linear, best of R runs.
 *   usage: sgemm_peak M N K THREADS [R]
 * prints: "sgemm M N K threads T: best S s, G GFLOP/s"
 */
#define _POSIX_C_SOURCE 200809L
#include <cblas.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static double now_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

int main(int argc, char **argv)
{
    if (argc < 5) {
        fprintf(stderr, "usage: sgemm_peak M N K THREADS [RUNS]\n");
        return 2;
    }
    const long M = atol(argv[1]), N = atol(argv[2]), K = atol(argv[3]);
    const int T = atoi(argv[4]), R = argc > 5 ? atoi(argv[5]) : 3;
    if (M <= 0 || N <= 0 || K <= 0 || T <= 0 || R <= 0) return 2;
    float *A = malloc((size_t)M * (size_t)K * sizeof(float));
    float *B = malloc((size_t)N * (size_t)K * sizeof(float));
    float *C = malloc((size_t)M * (size_t)N * sizeof(float));
    if (!A || !B || !C) return 3;
    for (long i = 0; i < M * K; i++) A[i] = (float)((i * 7919) % 1000) * 1e-3f - 0.5f;
    for (long i = 0; i < N * K; i++) B[i] = (float)((i * 104729) % 1000) * 1e-3f - 0.5f;
    openblas_set_num_threads(T);
    double best = 1e30;
    for (int r = 0; r < R; r++) {
        const double t0 = now_s();
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (int)M, (int)N, (int)K, 1.0f, A,
                    (int)K, B, (int)K, 0.0f, C, (int)N);
        const double t = now_s() - t0;
        if (t < best) best = t;
    }
    printf("sgemm %ld %ld %ld threads %d: best %.3f s, %.1f GFLOP/s (C[0] %g)\n", M, N, K, T,
           best, 2.0 * (double)M * (double)N * (double)K / best * 1e-9, (double)C[0]);
    free(A);
    free(B);
    free(C);
    return 0;
}
