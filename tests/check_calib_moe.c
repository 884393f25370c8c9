/* Calibration of mixture-of-experts models on tiny GGUF fixtures
 * (tests/tools/rt_fixture: qwen3moe 8 experts top-3, qwen2moe 6 top-2 with a
 * gated shared expert, Mixtral-layout llama 4 top-2; f32 weights, random
 * routers that spread the tokens):
 *  - calib's forward equals the runtime's (logits through the final norm and
 *    output; the runtime is llama.cpp's build_moe_ffn);
 *  - the statistics: per layer the router sees every row, the experts'
 *    counts add up to rows x top-k, the entries and their shapes, and the
 *    imatrix read back by quant has each expert's count;
 *  - the same bits for 1 and 3 threads and for smaller batches;
 *  - the per-expert callbacks: every expert of every layer once per FFN
 *    stage, its weights a row range of the stacked tensor, its Hessian's
 *    diagonal the sum of squares of its rows, input/forward refused, ffn_norm
 *    not mutable; a callback that changes nothing changes no statistic. */
#define _GNU_SOURCE
#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "calib/calib.h"
#include "rt_fixture.h"

#define CALIB_TXT MW_DATASETS_DIR "/corpora/calib.txt"
#include "check_calib_common.h"
#include "check_common.h"

static void moe_spec(struct rt_fx_spec *s, int which)
{
    rt_fx_default(s);
    s->wtype = GGUF_TYPE_F32;
    switch (which) {
    case 0: s->arch = "qwen3moe", s->n_expert = 8, s->n_expert_used = 3; break;
    case 1: s->arch = "qwen2moe", s->n_expert = 6, s->n_expert_used = 2; break;
    default: s->arch = "llama", s->n_expert = 4, s->n_expert_used = 2; break;
    }
}

static char *fixture(int which)
{
    struct rt_fx_spec s;
    moe_spec(&s, which);
    char *p = NULL;
    ck_assert_int_ge(asprintf(&p, "%s/calib-moe-%d-%d.gguf", MW_TEST_TMPDIR, (int)getpid(), which),
                     0);
    struct mw_err err;
    mw_err_clear(&err);
    ck_assert_msg(rt_fx_write(p, &s, &err) == MW_OK, "fixture: %s", err.msg);
    return p;
}

START_TEST(forward_matches_runtime)
{
    char *p = fixture(_i);
    struct calib_model *m = open_model(p);
    ck_assert_uint_gt(calib_model_hparams(m)->n_expert, 0);
    const double r = logits_vs_runtime(m, p, 40);
    /* the runtime keeps an f16 KV cache: the families' bound */
    ck_assert_msg(r < 2e-3, "fixture %d: logits differ by %g of their scale", _i, r);
    calib_model_close(m);
    unlink(p);
    free(p);
}
END_TEST

START_TEST(statistics)
{
    char *p = fixture(_i);
    struct calib_model *m = open_model(p);
    const struct rt_hparams *hp = calib_model_hparams(m);
    struct calib_samples *s = samples_chunked(m, 3, 31, CALIB_CHUNK_BOS_PREPEND);
    const uint64_t T = 3 * 32;
    struct calib_run_opts o = {.n_threads = 1};
    struct calib_stats *st = run(m, s, &o);
    const bool shexp = hp->n_ff_shexp > 0;
    ck_assert_uint_eq(calib_stats_n_expert(st), hp->n_expert);
    ck_assert_uint_eq(calib_stats_n_entries(st), (uint64_t)hp->n_layer * (shexp ? 12 : 8));
    for (uint32_t il = 0; il < hp->n_layer; il++) {
        uint64_t in = 0, down = 0, used = 0;
        for (uint32_t x = 0; x < hp->n_expert; x++) {
            const struct calib_group_stats *a = calib_stats_expert(st, il, CALIB_G_FFN_IN, x);
            const struct calib_group_stats *d = calib_stats_expert(st, il, CALIB_G_FFN_DOWN, x);
            ck_assert_uint_eq(a->n_in, hp->n_embd);
            ck_assert_uint_eq(d->n_in, hp->n_ff_exp);
            ck_assert_uint_eq(a->count, d->count);
            in += a->count;
            down += d->count;
            used += a->count > 0;
        }
        ck_assert_uint_eq(in, T * hp->n_expert_used);
        ck_assert_uint_eq(down, T * hp->n_expert_used);
        ck_assert_uint_gt(used, hp->n_expert_used); /* the router spreads the rows */
        ck_assert_uint_eq(calib_stats_group(st, il, CALIB_G_FFN_IN)->count, T);
    }
    ck_assert_ptr_null(calib_stats_expert(st, 0, CALIB_G_ATTN_IN, 0));
    ck_assert_ptr_null(calib_stats_expert(st, 0, CALIB_G_FFN_IN, hp->n_expert));
    /* the entries: names and shapes as llama-imatrix writes them */
    bool saw_exps = false, saw_router = false, saw_sh = false;
    for (uint64_t i = 0; i < calib_stats_n_entries(st); i++) {
        struct calib_entry e;
        ck_assert(calib_stats_entry_at(st, i, &e));
        if (strstr(e.name, "_exps.")) {
            saw_exps = true;
            ck_assert_uint_eq(e.n_mat, hp->n_expert);
            ck_assert_uint_eq(e.gs[0].n_in,
                              strstr(e.name, "down") ? hp->n_ff_exp : hp->n_embd);
        } else {
            ck_assert_uint_eq(e.n_mat, 1);
        }
        saw_router |= strstr(e.name, ".ffn_gate_inp.weight") != NULL;
        saw_sh |= strstr(e.name, "ffn_down_shexp") != NULL;
        if (strstr(e.name, "ffn_down_shexp")) ck_assert_uint_eq(e.gs[0].n_in, hp->n_ff_shexp);
    }
    ck_assert(saw_exps && saw_router && saw_sh == shexp);
    ck_assert(!calib_stats_entry_at(st, calib_stats_n_entries(st), &(struct calib_entry){0}));
    /* the GGUF imatrix, read back by quant: each expert's count */
    void *buf = NULL;
    uint64_t size = 0;
    struct mw_err err;
    mw_err_clear(&err);
    const char *ds[1] = {"calib.txt"};
    const struct calib_imatrix_meta meta = {.datasets = ds, .n_datasets = 1};
    ck_assert_int_eq(calib_imatrix_write_mem(st, &meta, &buf, &size, &err), MW_OK);
    struct quant_imatrix *im = NULL;
    ck_assert_int_eq(quant_imatrix_load_mem(buf, size, "mem", &im, &err), MW_OK);
    const int64_t k = quant_imatrix_find(im, "blk.1.ffn_up_exps.weight");
    ck_assert_int_ge(k, 0);
    uint64_t nc = 0, nv = 0;
    const float *c = quant_imatrix_counts(im, (uint64_t)k, &nc);
    const float *v = quant_imatrix_values(im, (uint64_t)k, &nv);
    ck_assert_uint_eq(nc, hp->n_expert);
    ck_assert_uint_eq(nv, (uint64_t)hp->n_expert * hp->n_embd);
    for (uint32_t x = 0; x < hp->n_expert; x++) {
        const struct calib_group_stats *a = calib_stats_expert(st, 1, CALIB_G_FFN_IN, x);
        ck_assert_float_eq(c[x], (float)a->count);
        const double want = a->count ? a->sum_sq[5] / (double)a->count : 1.0;
        ck_assert_double_eq_tol(v[(uint64_t)x * hp->n_embd + 5], want, 1e-6 * (1 + want));
    }
    quant_imatrix_free(im);
    free(buf);
    /* threads and batches: the same bits */
    struct calib_run_opts o3 = {.n_threads = 3, .batch_rows = 32};
    struct calib_stats *st3 = run(m, s, &o3);
    ck_assert_msg(stats_entries_same(st, st3), "3 threads, one sample per batch: other statistics");
    calib_stats_free(st3);
    calib_stats_free(st);
    calib_samples_free(s);
    calib_model_close(m);
    unlink(p);
    free(p);
}
END_TEST

struct visit {
    const struct rt_hparams *hp;
    unsigned dense[CALIB_G_COUNT], expert[CALIB_G_COUNT];
    uint32_t last_ex;
    bool checked;
};

static enum mw_status visit_cb(void *ud, struct calib_layer *ly, enum calib_group g,
                               struct mw_err *err)
{
    struct visit *V = ud;
    const int32_t ex = calib_layer_expert(ly);
    ck_assert_uint_eq(calib_layer_n_expert(ly), V->hp->n_expert);
    if (ex < 0) {
        V->dense[g]++;
        return MW_OK;
    }
    V->expert[g]++;
    ck_assert(g == CALIB_G_FFN_IN || g == CALIB_G_FFN_DOWN);
    const struct calib_group_stats *gs = calib_layer_stats(ly, g);
    ck_assert_uint_eq(gs->count, calib_layer_expert_rows(ly));
    ck_assert_uint_eq(calib_layer_group_n_in(ly, g),
                      g == CALIB_G_FFN_IN ? V->hp->n_embd : V->hp->n_ff_exp);
    const enum calib_wkind wk = g == CALIB_G_FFN_IN ? CALIB_W_UP : CALIB_W_DOWN;
    struct calib_weight cw;
    ck_assert_int_eq(calib_layer_weight(ly, wk, true, &cw, err), MW_OK);
    const uint64_t rows = g == CALIB_G_FFN_IN ? V->hp->n_ff_exp : V->hp->n_embd;
    ck_assert_uint_eq(cw.n_out, rows);
    ck_assert_uint_eq(cw.row0, (uint64_t)ex * rows);
    ck_assert_uint_eq(cw.tensor_rows, (uint64_t)V->hp->n_expert * rows);
    ck_assert_ptr_null(cw.bias);
    char want[64];
    snprintf(want, sizeof want, "blk.%u.%s.weight", calib_layer_index(ly),
             g == CALIB_G_FFN_IN ? "ffn_up_exps" : "ffn_down_exps");
    ck_assert_str_eq(cw.name, want);
    /* a Hessian over the routed rows: its diagonal is the sum of squares */
    const float *H;
    ck_assert_int_eq(calib_layer_hessian(ly, g, &H, err), MW_OK);
    for (uint64_t j = 0; j < gs->n_in; j += 7)
        ck_assert_double_eq_tol(H[j * gs->n_in + j], gs->sum_sq[j], 1e-4 * (1 + gs->sum_sq[j]));
    /* what an expert's callback may not do */
    struct mw_err e2;
    mw_err_clear(&e2);
    const float *x;
    ck_assert_int_eq(calib_layer_input(ly, g, 0, 1, &x, &e2), MW_E_USAGE);
    float *norm;
    ck_assert_int_eq(calib_layer_norm(ly, CALIB_NORM_FFN, true, &norm, &e2), MW_E_USAGE);
    ck_assert_int_eq(calib_layer_weight(ly, CALIB_W_Q, false, &cw, &e2), MW_E_USAGE);
    if (g == CALIB_G_FFN_IN)
        ck_assert_int_eq(calib_layer_weight(ly, CALIB_W_DOWN, true, &cw, &e2), MW_E_USAGE);
    V->checked = true;
    return MW_OK;
}

START_TEST(expert_callbacks)
{
    char *p = fixture(_i);
    struct calib_model *m = open_model(p);
    const struct rt_hparams *hp = calib_model_hparams(m);
    struct calib_samples *s = samples_chunked(m, 2, 31, CALIB_CHUNK_BOS_PREPEND);
    struct calib_run_opts o = {.n_threads = 2};
    struct calib_stats *plain = run(m, s, &o);
    struct visit V = {.hp = hp};
    o.on_group = visit_cb;
    o.on_group_ud = &V;
    struct calib_stats *cb = run(m, s, &o);
    const unsigned L = hp->n_layer, sh = hp->n_ff_shexp > 0;
    ck_assert(V.checked);
    ck_assert_uint_eq(V.dense[CALIB_G_ATTN_IN], L);
    ck_assert_uint_eq(V.dense[CALIB_G_ATTN_OUT], L);
    ck_assert_uint_eq(V.dense[CALIB_G_FFN_IN], L * sh);   /* the shared expert's */
    ck_assert_uint_eq(V.dense[CALIB_G_FFN_DOWN], L * sh);
    ck_assert_uint_eq(V.expert[CALIB_G_FFN_IN], L * hp->n_expert);
    ck_assert_uint_eq(V.expert[CALIB_G_FFN_DOWN], L * hp->n_expert);
    ck_assert_msg(stats_entries_same(plain, cb), "callbacks that change nothing changed the statistics");
    calib_stats_free(plain);
    calib_stats_free(cb);
    calib_samples_free(s);
    calib_model_close(m);
    unlink(p);
    free(p);
}
END_TEST

int main(void)
{
    Suite *su = suite_create("calib_moe");
    TCase *tc = tcase_create("moe");
    tcase_set_timeout(tc, 120);
    tcase_add_loop_test(tc, forward_matches_runtime, 0, 3);
    tcase_add_loop_test(tc, statistics, 0, 3);
    tcase_add_loop_test(tc, expert_callbacks, 0, 3);
    suite_add_tcase(su, tc);
    return run_suite(su);
}
