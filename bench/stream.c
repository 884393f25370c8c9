/*
 * bench/stream.c — a STREAM-like memory bandwidth measure (after John
 * McCalpin's STREAM): Copy c = a and Triad a = b + s*c over three arrays of
 * doubles far larger than the caches (default 256 MiB each), best of N
 * repetitions, at each requested thread count (pthreads, the arrays split
 * into equal contiguous slices, each slice first-touched by its thread).
 *
 *   stream [MIB_PER_ARRAY [REPS [THREADS...]]]     (default: 256 5 1 <all>)
 *
 * Prints one line per kernel and thread count:
 *   stream: copy  threads 1  best 12.34 GB/s  (avg 12.01)  bytes/iter 536870912
 * GB/s are 1e9 bytes per second; bytes counted as STREAM does (Copy: 2
 * arrays, Triad: 3 arrays per iteration; no write-allocate traffic).
 * The last line, "stream: peak triad X GB/s at T threads", is the figure
 * bench/stream.sh and the README compare memwall-run's effective GB/s with.
 */
#define _POSIX_C_SOURCE 200809L
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

enum kernel { K_COPY, K_TRIAD, K_N };
static const char *const k_name[K_N] = {"copy", "triad"};
static const int k_arrays[K_N] = {2, 3};

struct shared {
    double *a, *b, *c;
    size_t n;
    unsigned n_threads;
    pthread_barrier_t start, stop;
    enum kernel k;
    int quit;
};

struct worker {
    struct shared *sh;
    unsigned id;
    pthread_t th;
};

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static void slice(const struct shared *sh, unsigned id, size_t *lo, size_t *hi)
{
    *lo = sh->n * id / sh->n_threads;
    *hi = sh->n * (id + 1) / sh->n_threads;
}

static void run_kernel(struct shared *sh, unsigned id)
{
    size_t lo, hi;
    slice(sh, id, &lo, &hi);
    double *restrict a = sh->a, *restrict b = sh->b, *restrict c = sh->c;
    const double s = 3.0;
    switch (sh->k) {
    case K_COPY:
        for (size_t i = lo; i < hi; i++) c[i] = a[i];
        break;
    case K_TRIAD:
        for (size_t i = lo; i < hi; i++) a[i] = b[i] + s * c[i];
        break;
    default:
        break;
    }
}

static void *worker_main(void *arg)
{
    struct worker *w = arg;
    struct shared *sh = w->sh;
    /* first touch: each thread's slice lands in its own memory node */
    size_t lo, hi;
    slice(sh, w->id, &lo, &hi);
    for (size_t i = lo; i < hi; i++) {
        sh->a[i] = 1.0;
        sh->b[i] = 2.0;
        sh->c[i] = 0.0;
    }
    for (;;) {
        pthread_barrier_wait(&sh->start);
        if (sh->quit) break;
        run_kernel(sh, w->id);
        pthread_barrier_wait(&sh->stop);
    }
    return NULL;
}

static unsigned long num(const char *s, const char *what)
{
    char *end;
    const unsigned long v = strtoul(s, &end, 10);
    if (*end || v == 0) {
        fprintf(stderr, "stream: bad %s '%s'\n", what, s);
        exit(2);
    }
    return v;
}

/* One thread count: best and mean GB/s of each kernel over reps runs. */
static int measure(size_t n, unsigned n_threads, unsigned reps, double best[K_N])
{
    struct shared sh = {.n = n, .n_threads = n_threads};
    const size_t bytes = n * sizeof(double);
    sh.a = aligned_alloc(64, bytes);
    sh.b = aligned_alloc(64, bytes);
    sh.c = aligned_alloc(64, bytes);
    struct worker *w = calloc(n_threads, sizeof *w);
    if (!sh.a || !sh.b || !sh.c || !w) {
        fprintf(stderr, "stream: out of memory (3 x %zu bytes)\n", bytes);
        return 3;
    }
    /* the calling thread is worker 0 */
    pthread_barrier_init(&sh.start, NULL, n_threads);
    pthread_barrier_init(&sh.stop, NULL, n_threads);
    for (unsigned t = 1; t < n_threads; t++) {
        w[t] = (struct worker){.sh = &sh, .id = t};
        if (pthread_create(&w[t].th, NULL, worker_main, &w[t])) {
            fprintf(stderr, "stream: pthread_create failed\n");
            return 3;
        }
    }
    {
        size_t lo, hi;
        slice(&sh, 0, &lo, &hi);
        for (size_t i = lo; i < hi; i++) {
            sh.a[i] = 1.0;
            sh.b[i] = 2.0;
            sh.c[i] = 0.0;
        }
    }
    for (int k = 0; k < K_N; k++) {
        double sum = 0.0;
        best[k] = 0.0;
        sh.k = (enum kernel)k;
        const double moved = (double)k_arrays[k] * (double)bytes;
        for (unsigned r = 0; r < reps + 1; r++) { /* run 0 warms up */
            pthread_barrier_wait(&sh.start);
            const double t0 = now_s();
            run_kernel(&sh, 0);
            pthread_barrier_wait(&sh.stop);
            const double dt = now_s() - t0;
            if (r == 0) continue;
            const double gbs = moved / dt / 1e9;
            sum += gbs;
            if (gbs > best[k]) best[k] = gbs;
        }
        printf("stream: %-5s threads %-3u best %7.2f GB/s  (avg %.2f)  bytes/iter %.0f\n",
               k_name[k], n_threads, best[k], sum / reps, moved);
        fflush(stdout);
    }
    sh.quit = 1;
    pthread_barrier_wait(&sh.start);
    for (unsigned t = 1; t < n_threads; t++) pthread_join(w[t].th, NULL);
    pthread_barrier_destroy(&sh.start);
    pthread_barrier_destroy(&sh.stop);
    /* keep the result observable */
    volatile double sink = sh.a[n / 2] + sh.c[n / 3];
    (void)sink;
    free(sh.a);
    free(sh.b);
    free(sh.c);
    free(w);
    return 0;
}

int main(int argc, char **argv)
{
    const unsigned long mib = argc > 1 ? num(argv[1], "size") : 256;
    const unsigned reps = argc > 2 ? (unsigned)num(argv[2], "repetitions") : 5;
    const long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
    unsigned threads[64];
    unsigned n_counts = 0;
    for (int i = 3; i < argc && n_counts < 64; i++)
        threads[n_counts++] = (unsigned)num(argv[i], "thread count");
    if (n_counts == 0) {
        threads[n_counts++] = 1;
        if (ncpu > 1) threads[n_counts++] = (unsigned)ncpu;
    }
    const size_t n = (size_t)mib * 1024 * 1024 / sizeof(double);
    printf("stream: 3 arrays of %lu MiB (%zu doubles), best of %u, %ld CPUs online\n", mib, n,
           reps, ncpu);
    double peak = 0.0;
    unsigned peak_t = 0;
    for (unsigned i = 0; i < n_counts; i++) {
        double best[K_N];
        const int rc = measure(n, threads[i], reps, best);
        if (rc) return rc;
        if (best[K_TRIAD] > peak) {
            peak = best[K_TRIAD];
            peak_t = threads[i];
        }
    }
    printf("stream: peak triad %.2f GB/s at %u thread%s\n", peak, peak_t, peak_t == 1 ? "" : "s");
    return 0;
}
