/* tests/check_calib_common.h — helpers shared by the calibration Check
 * suites (check_calib.c, check_calib_family.c): open a model, draw samples
 * from datasets/corpora/calib.txt, run the statistics pass, read a tensor as
 * floats. Each asserts success (ck_assert). Define CALIB_TXT before
 * including. Header-only, static: one copy per test binary. */
#ifndef MW_CHECK_CALIB_COMMON_H
#define MW_CHECK_CALIB_COMMON_H

#include <check.h>
#include <stdlib.h>

#include "calib/calib.h"
#include "gguf/gguf.h"
#include "quant/quant.h"

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

#endif /* MW_CHECK_CALIB_COMMON_H */
