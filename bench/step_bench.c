/*
 * bench/step_bench.c — the runtime's forward step, timed on its own:
 *   decode  one rt_eval of 1 token at depth D (the cache rewound to D after
 *           each), the best of R;
 *   prompt  one rt_eval of P tokens at depth 0 (tiled attention when P >= 64),
 *           the best of R, as tokens/s.
 * The best of many short repetitions is what the code costs when nothing
 * else runs; on a shared machine the mean mostly measures the other load
 * (bench/speed_bench.sh reports means, against llama-bench, and needs an
 * idle machine). Token ids are a fixed pseudo-random sequence (the
 * vocabulary's ids, not text): the cost of a step does not depend on them.
 *
 *   step_bench MODEL.gguf [THREADS [DEPTH [PROMPT [REPS]]]]   (1 512 512 20)
 *
 * Built and run by bench/step_bench.sh.
 */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <stdlib.h>

#include "core/mw.h"
#include "runtime/rt.h"

static int fail(const struct mw_err *err)
{
    fprintf(stderr, "step_bench: %s\n", err->msg);
    return 1;
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: step_bench MODEL.gguf [THREADS [DEPTH [PROMPT [REPS]]]]\n");
        return 2;
    }
    const unsigned nt = argc > 2 ? (unsigned)atoi(argv[2]) : 1;
    const uint32_t depth = argc > 3 ? (uint32_t)atoi(argv[3]) : 512;
    const uint32_t np = argc > 4 ? (uint32_t)atoi(argv[4]) : 512;
    const int reps = argc > 5 ? atoi(argv[5]) : 20;
    struct mw_err err = {0};
    struct rt_model *m = NULL;
    if (rt_model_open(argv[1], NULL, &m, &err) != MW_OK) return fail(&err);
    const uint32_t nv = rt_model_hparams(m)->n_vocab;
    const uint32_t n = (depth > np ? depth : np) + 1;
    struct rt_ctx_opts o = {.n_ctx = n, .n_threads = nt, .n_batch = np > 64 ? np : 64};
    struct rt_ctx *c = NULL;
    if (rt_ctx_init(m, &o, &c, &err) != MW_OK) return fail(&err);
    int32_t *tok = malloc(sizeof *tok * n);
    if (!tok) return 3;
    uint32_t s = 12345;
    for (uint32_t i = 0; i < n; i++) {
        s = s * 1103515245u + 12345u;
        tok[i] = (int32_t)((s >> 8) % nv);
    }
    double best_p = 1e30, best_d = 1e30;
    for (int r = 0; r < reps; r++) {
        rt_ctx_reset(c);
        double t0 = mw_now_s();
        if (rt_eval(c, tok, np, 0, NULL, &err) != MW_OK) return fail(&err);
        double t = mw_now_s() - t0;
        best_p = t < best_p ? t : best_p;
    }
    rt_ctx_reset(c);
    for (uint32_t i = 0; i < depth; i += 64) {
        const uint32_t k = depth - i < 64 ? depth - i : 64;
        if (rt_eval(c, tok + i, k, 0, NULL, &err) != MW_OK) return fail(&err);
    }
    for (int r = 0; r < 5 * reps; r++) {
        rt_ctx_truncate(c, depth);
        double t0 = mw_now_s();
        if (rt_eval(c, tok + depth, 1, 0, NULL, &err) != MW_OK) return fail(&err);
        double t = mw_now_s() - t0;
        best_d = t < best_d ? t : best_d;
    }
    printf("%s threads %u: prompt %u tokens %.1f tok/s, decode at depth %u %.3f ms (%.1f tok/s), "
           "best of %d / %d\n",
           rt_ctx_kernels_name(c), nt, np, np / best_p, depth, 1e3 * best_d, 1.0 / best_d, reps,
           5 * reps);
    free(tok);
    rt_ctx_free(c);
    rt_model_close(m);
    return 0;
}
