/*
 * tests/check_runtime_common.h — helpers shared by the runtime's Check
 * suites (check_runtime.c, check_runtime_model.c): a tiny fixture model
 * written to a scratch path of this process (tests/tools/rt_fixture),
 * open/close of a model with its tokenizer and context, and encoding.
 * Each asserts success (ck_assert). Header-only, static: one copy per test
 * binary.
 */
#ifndef MW_TESTS_CHECK_RUNTIME_COMMON_H
#define MW_TESTS_CHECK_RUNTIME_COMMON_H

#include <check.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "runtime/rt.h"
#include "tools/rt_fixture.h"

#include "check_common.h"

#define REF_F16 MW_DATASETS_DIR "/reference/tinyllama-8m.llamacpp-f16.gguf"

static inline char *write_fixture(const struct rt_fx_spec *s, const char *name)
{
    char *p = pid_path("rt", name);
    struct mw_err err;
    mw_err_clear(&err);
    const enum mw_status st = rt_fx_write(p, s, &err);
    char buf[1024];
    ck_assert_msg(st == MW_OK, "fixture: %s", mw_err_format(&err, buf, sizeof buf));
    return p;
}

struct loaded {
    struct rt_model *m;
    struct rt_tok *t;
    struct rt_ctx *c;
};

/* Open path (model options mo, may be NULL), its tokenizer and, when co,
 * a context. */
static inline void load_ex(const char *path, const struct rt_model_opts *mo,
                           const struct rt_ctx_opts *co, struct loaded *L)
{
    struct mw_err err;
    mw_err_clear(&err);
    char buf[1024];
    memset(L, 0, sizeof *L);
    ck_assert_msg(rt_model_open(path, mo, &L->m, &err) == MW_OK, "%s",
                  mw_err_format(&err, buf, sizeof buf));
    ck_assert_msg(rt_tok_init(rt_model_gguf(L->m), rt_model_hparams(L->m)->n_vocab, &L->t, &err) ==
                      MW_OK, "%s", mw_err_format(&err, buf, sizeof buf));
    if (co)
        ck_assert_msg(rt_ctx_init(L->m, co, &L->c, &err) == MW_OK, "%s",
                      mw_err_format(&err, buf, sizeof buf));
}

static inline void load(const char *path, const struct rt_ctx_opts *co, struct loaded *L)
{
    load_ex(path, NULL, co, L);
}

static inline void unload(struct loaded *L)
{
    rt_ctx_free(L->c);
    rt_tok_free(L->t);
    rt_model_close(L->m);
}

static inline size_t encode(const struct rt_tok *t, const char *s, bool add, bool special,
                            int32_t *out, size_t cap)
{
    size_t n = 0;
    struct mw_err err;
    mw_err_clear(&err);
    ck_assert_int_eq(rt_tok_encode(t, s, strlen(s), add, special, out, cap, &n, &err), MW_OK);
    return n;
}

#endif /* MW_TESTS_CHECK_RUNTIME_COMMON_H */
