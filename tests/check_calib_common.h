/* tests/check_calib_common.h — helpers shared by the calibration Check
 * suites (check_calib.c, check_calib_mem.c, check_calib_corpus.c,
 * check_calib_family.c, check_calib_moe.c): open a model, draw samples from
 * datasets/corpora/calib.txt, run the statistics pass, read a tensor as
 * floats, compare calib's forward with the runtime's logits, compare two
 * runs' statistics, count a run's group callbacks. Each asserts
 * success (ck_assert). Define CALIB_TXT before including. Header-only,
 * static: one copy per test binary. */
#ifndef MW_CHECK_CALIB_COMMON_H
#define MW_CHECK_CALIB_COMMON_H

#include <check.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "calib/calib.h"
#include "gguf/gguf.h"
#include "quant/quant.h"
#include "runtime/rt.h"
#include "runtime/rt_ops.h"

static inline struct calib_model *open_model(const char *path)
{
    struct calib_model *m = NULL;
    struct mw_err err;
    mw_err_clear(&err);
    const enum mw_status s = calib_model_open(path, &m, &err);
    ck_assert_msg(s == MW_OK, "open %s: %s %s", path, err.msg, err.where);
    return m;
}

/* n samples of L text tokens from CALIB_TXT, chunked as ch */
static inline struct calib_samples *samples_chunked(const struct calib_model *m, uint32_t n,
                                                    uint32_t L, enum calib_chunking ch)
{
    struct calib_corpus *c = NULL;
    struct mw_err err;
    mw_err_clear(&err);
    ck_assert_int_eq(calib_corpus_load(CALIB_TXT, CALIB_CORPUS_AUTO, &c, &err), MW_OK);
    struct calib_samples *s = NULL;
    const struct calib_sample_opts o = {.n_samples = n, .seq_len = L, .chunking = ch,
                                        .n_ctx_max = calib_model_hparams(m)->n_ctx_train};
    ck_assert_msg(calib_samples_build(c, calib_model_tok(m), &o, &s, &err) == MW_OK, "%s",
                  err.msg);
    calib_corpus_free(c);
    return s;
}

static inline struct calib_stats *run(struct calib_model *m, const struct calib_samples *s,
                                      const struct calib_run_opts *o)
{
    struct calib_stats *st = NULL;
    struct mw_err err;
    mw_err_clear(&err);
    const enum mw_status r = calib_run(m, s, o, &st, &err);
    ck_assert_msg(r == MW_OK, "calib_run: %s %s", err.msg, err.where);
    return st;
}

/* tensor name of f decoded to floats (malloc'd), NULL if absent */
static inline float *tensor_f32(const struct gguf_file *f, const char *name)
{
    const int64_t i = gguf_tensor_find(f, name);
    if (i < 0) return NULL;
    const struct gguf_tensor *t = gguf_tensor_get(f, (uint64_t)i);
    const uint64_t n = t->ne[0] * t->ne[1];
    float *o = malloc(n * sizeof *o);
    quant_traits_get(t->type)->to_float(gguf_tensor_data(f, (uint64_t)i), o, n);
    return o;
}

/* the final hidden states of every row (on_layer after the last layer) */
struct last_ud {
    float *h;
    uint64_t rows;
};

static inline enum mw_status grab_last(void *ud, struct calib_layer *ly, struct mw_err *err)
{
    struct last_ud *L = ud;
    const uint64_t E = calib_layer_group_n_in(ly, CALIB_G_ATTN_IN);
    const uint64_t T = calib_layer_n_rows(ly);
    const float *x;
    enum mw_status s = calib_layer_hidden(ly, 0, T, &x, err);
    if (s) return s;
    free(L->h);
    L->h = malloc((size_t)(T * E) * sizeof(float));
    memcpy(L->h, x, (size_t)(T * E) * sizeof(float));
    L->rows = T;
    return MW_OK;
}

/* calib's forward (m over one sample of L corpus tokens: the final hidden
 * states, through output_norm, the (tied) output matrix and the final
 * soft-capping) against the runtime's logits on gguf, a file of the same
 * weights: max |ours - runtime| / (1 + max |runtime|) over the positions.
 * One definition of the model, two back ends. */
static inline double logits_vs_runtime(struct calib_model *m, const char *gguf, uint32_t L)
{
    struct calib_samples *s = samples_chunked(m, 1, L, CALIB_CHUNK_BOS_PREPEND);
    struct last_ud Lh = {0};
    struct calib_run_opts o = {.n_threads = 2, .on_layer = grab_last, .on_layer_ud = &Lh};
    struct calib_stats *st = run(m, s, &o);
    ck_assert_ptr_nonnull(Lh.h);
    struct rt_model *rm = NULL;
    struct rt_ctx *ctx = NULL;
    struct mw_err err;
    mw_err_clear(&err);
    ck_assert_msg(rt_model_open(gguf, NULL, &rm, &err) == MW_OK, "%s", err.msg);
    const struct rt_hparams *hp = rt_model_hparams(rm);
    const uint64_t E = hp->n_embd, V = hp->n_vocab;
    const uint32_t P = calib_samples_n_pos(s);
    const struct rt_ctx_opts co = {.n_ctx = P, .n_threads = 1, .n_batch = P};
    ck_assert_int_eq(rt_ctx_init(rm, &co, &ctx, &err), MW_OK);
    float *logits = malloc((size_t)P * V * sizeof(float));
    ck_assert_int_eq(rt_eval(ctx, calib_samples_tokens(s, 0), P, 0, logits, &err), MW_OK);
    float *onorm = tensor_f32(rt_model_gguf(rm), "output_norm.weight");
    float *out = tensor_f32(rt_model_gguf(rm), "output.weight");
    if (!out) out = tensor_f32(rt_model_gguf(rm), "token_embd.weight"); /* tied */
    ck_assert_ptr_nonnull(onorm);
    ck_assert_ptr_nonnull(out);
    double worst = 0, scale = 0;
    float *xn = malloc(E * sizeof *xn), *lg = malloc(V * sizeof *lg);
    for (uint32_t p = 0; p < P; p++) {
        rt_rmsnorm(xn, Lh.h + (uint64_t)p * E, onorm, E, hp->rms_eps);
        for (uint64_t v = 0; v < V; v++) {
            double d = 0;
            for (uint64_t i = 0; i < E; i++) d += (double)out[v * E + i] * xn[i];
            lg[v] = (float)d;
        }
        rt_softcap(lg, V, hp->final_softcap);
        for (uint64_t v = 0; v < V; v++) {
            const double ref = logits[(uint64_t)p * V + v];
            worst = fabs(lg[v] - ref) > worst ? fabs(lg[v] - ref) : worst;
            scale = fabs(ref) > scale ? fabs(ref) : scale;
        }
    }
    free(lg);
    free(xn);
    free(out);
    free(onorm);
    free(logits);
    rt_ctx_free(ctx);
    rt_model_close(rm);
    free(Lh.h);
    calib_stats_free(st);
    calib_samples_free(s);
    return worst / (1.0 + scale);
}

/* Two runs' statistics bitwise the same, group by group. */
static inline void assert_stats_equal(const struct calib_stats *a, const struct calib_stats *b)
{
    ck_assert_uint_eq(calib_stats_n_layer(a), calib_stats_n_layer(b));
    for (uint32_t il = 0; il < calib_stats_n_layer(a); il++)
        for (int g = 0; g < CALIB_G_COUNT; g++) {
            const struct calib_group_stats *x = calib_stats_group(a, il, (enum calib_group)g);
            const struct calib_group_stats *y = calib_stats_group(b, il, (enum calib_group)g);
            ck_assert_uint_eq(x->count, y->count);
            ck_assert_uint_eq(x->n_in, y->n_in);
            ck_assert_msg(memcmp(x->sum_sq, y->sum_sq, x->n_in * sizeof(double)) == 0,
                          "layer %u group %d sum_sq differ", il, g);
            ck_assert_msg(memcmp(x->sum_abs, y->sum_abs, x->n_in * sizeof(double)) == 0,
                          "layer %u group %d sum_abs differ", il, g);
        }
}

/* A group callback that only counts its calls (ud: an int). */
static inline enum mw_status count_group(void *ud, struct calib_layer *ly,
                                        enum calib_group g, struct mw_err *err)
{
    (void)ly, (void)g, (void)err;
    (*(int *)ud)++;
    return MW_OK;
}

/* Every entry's statistics bit for bit, in entry order (experts' entries:
 * every matrix's slice). */
static inline bool stats_entries_same(const struct calib_stats *a, const struct calib_stats *b)
{
    const uint64_t n = calib_stats_n_entries(a);
    if (n != calib_stats_n_entries(b)) return false;
    for (uint64_t i = 0; i < n; i++) {
        struct calib_entry x, y;
        if (!calib_stats_entry_at(a, i, &x) || !calib_stats_entry_at(b, i, &y)) return false;
        if (strcmp(x.name, y.name) || x.n_mat != y.n_mat) return false;
        for (uint32_t k = 0; k < x.n_mat; k++) {
            const struct calib_group_stats *p = &x.gs[k], *q = &y.gs[k];
            if (p->n_in != q->n_in || p->count != q->count ||
                memcmp(p->sum_sq, q->sum_sq, (size_t)p->n_in * sizeof(double)) ||
                memcmp(p->sum_abs, q->sum_abs, (size_t)p->n_in * sizeof(double)))
                return false;
        }
    }
    return true;
}

/* A group callback that does nothing (the staged passes run, nothing changes). */
static inline enum mw_status noop_group(void *ud, struct calib_layer *ly, enum calib_group g,
                                        struct mw_err *err)
{
    (void)ud, (void)ly, (void)g, (void)err;
    return MW_OK;
}

#endif /* MW_CHECK_CALIB_COMMON_H */
