/* Calibration on the Qwen3 / Gemma 2-3 / Phi-3 families (qwen3, gemma2,
 * gemma3, phi3) and Qwen3.5's gated delta net (qwen35, qwen35moe,
 * qwen3next), driven by tests/e2e/calib_family.sh, which makes the
 * fixture checkpoints (tests/fixtures/mk_family_fixture.py), converts them
 * with memwall convert (F32) and runs
 *     check_calib_family KIND HF_DIR F32_GGUF
 * Checks, from the HF directory and from the GGUF file:
 *  - calib's forward computes the runtime's model: its final hidden states,
 *    through output_norm, the (tied) output matrix and gemma2's final
 *    soft-capping, give memwall-run's logits (rt_eval) on a sample longer
 *    than gemma's sliding window (q/k norm, sandwich norms, embedding scale,
 *    GELU-tanh, soft-capping, per-layer RoPE base, fused qkv / gate_up);
 *  - the AWQ folds of methods/ (quant_awq_fold: norms, v rows of the fused or
 *    separate v under GQA, up rows of the fused or separate up) leave the
 *    float model unchanged: the final hidden states with random scales
 *    folded at every layer and group equal those without;
 *  - fold legality per family (quant_awq_fold_legal), and a family where a
 *    fold is not legal;
 *  - the statistics' entries: phi3's one attn_qkv and one ffn_up per layer;
 *    qwen35's per layer kind (attn_qkv, attn_gate, ssm_beta, ssm_alpha or
 *    qwen3next's ssm_ba, ssm_out in the delta-net layers; q (with its gate
 *    rows), k, v, o in the gated attention layers), with their widths;
 *  - qwen35 kinds: statistics and final hidden states the same bits for
 *    1 / 2 / 3 threads, 1 / 2 / 3 samples per batch, with and without
 *    callbacks;
 *  - plan's KV cache (calib_mem_estimate) equals the runtime's allocation
 *    (rt_ctx_mem) and its layout: gemma's sliding layers keep a ring of the
 *    window plus one batch, the other layers every position.
 * Exit 77 (skip) when an input is missing. */
#define _GNU_SOURCE
#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "calib/calib.h"
#include "methods/methods.h"
#include "quant/quant.h"
#include "runtime/rt_ops.h"

#define CALIB_TXT MW_DATASETS_DIR "/corpora/calib.txt"
#include "check_calib_common.h"
#include "check_common.h"

static const char *g_kind, *g_dir, *g_gguf;


static struct calib_samples *samples_of(const struct calib_model *m, uint32_t n, uint32_t L)
{
    return samples_chunked(m, n, L, CALIB_CHUNK_BOS_PREPEND);
}

struct fold_ud {
    struct last_ud last;
    const struct rt_hparams *hp;
    unsigned n_folds;
};

/* AWQ folds with arbitrary scales in every group (quant_awq_fold, the code
 * the methods run); scales equal across the query heads of a kv group for
 * ATTN_OUT, as the method makes them — in a delta-net layer equal across
 * the value heads (ssm_norm, one weight per channel, makes ssm_out's input).
 * A mixture-of-experts layer's ffn_norm also feeds the router: no fold
 * there (the methods skip it too). */
static enum mw_status fold_cb(void *ud, struct calib_layer *ly, enum calib_group g,
                              struct mw_err *err)
{
    struct fold_ud *F = ud;
    if (calib_layer_n_expert(ly) && g == CALIB_G_FFN_IN) return MW_OK;
    const uint64_t n = calib_layer_group_n_in(ly, g);
    float *sc = malloc((size_t)n * sizeof(float));
    const uint32_t hd = F->hp->head_dim, grp = F->hp->n_head / F->hp->n_head_kv;
    const bool rec = calib_layer_has_weight(ly, CALIB_W_SSM_OUT);
    const uint32_t S = F->hp->ssm_d_state;
    enum mw_status s;
    for (uint64_t j = 0; j < n; j++) {
        uint64_t key = j;
        if (g == CALIB_G_ATTN_OUT) key = rec ? j % S : (j / ((uint64_t)hd * grp)) * hd + j % hd;
        /* powers of two: the fold is exact in floats, any change is a wrong fold */
        sc[j] = ldexpf(1.0f, (int)((key * 7 + calib_layer_index(ly)) % 5) - 2);
    }
    s = quant_awq_fold(ly, g, sc, grp, rec && g == CALIB_G_ATTN_OUT ? S : hd, err);
    free(sc);
    F->n_folds++;
    return s;
}

/* the folds fold_cb makes in a run of the model of hp */
static unsigned folds_expected(const struct rt_hparams *hp)
{
    if (!hp->n_expert) return 4u * hp->n_layer;
    /* attn_in, attn_out; the shared expert's down; every expert's down */
    return hp->n_layer * (2u + (hp->n_ff_shexp ? 1u : 0u) + hp->n_expert);
}



/* logits_vs_runtime (check_calib_common.h) from src, a path */
static double logits_of(const char *src, const char *gguf, uint32_t L)
{
    struct calib_model *m = open_model(src);
    const double r = logits_vs_runtime(m, gguf, L);
    calib_model_close(m);
    return r;
}

/* the sample must be longer than gemma's window (the fixtures: 16) */
#define SAMPLE_LEN 40

START_TEST(logits_from_gguf)
{
    const double r = logits_of(g_gguf, g_gguf, SAMPLE_LEN);
    printf("%s (GGUF): logits differ from the runtime's by %.3g of their scale\n", g_kind, r);
    ck_assert_msg(r < 2e-3, "%s (GGUF): logits differ by %g of their scale", g_kind, r);
}
END_TEST

START_TEST(logits_from_hf)
{
    const double r = logits_of(g_dir, g_gguf, SAMPLE_LEN);
    printf("%s (HF dir): logits differ from the runtime's by %.3g of their scale\n", g_kind, r);
    ck_assert_msg(r < 2e-3, "%s (HF dir): logits differ by %g of their scale", g_kind, r);
}
END_TEST

/* _i: 0 the HF directory, 1 the GGUF file */
START_TEST(folds_leave_model_unchanged)
{
    struct calib_model *m = open_model(_i ? g_gguf : g_dir);
    struct calib_samples *s = samples_of(m, 2, SAMPLE_LEN);
    struct fold_ud a = {0}, b = {0};
    struct calib_run_opts o = {.n_threads = 2, .on_layer = grab_last, .on_layer_ud = &a.last};
    struct calib_stats *sa = run(m, s, &o);
    o.on_layer_ud = &b.last;
    b.hp = calib_model_hparams(m);
    o.on_group = fold_cb;
    o.on_group_ud = &b;
    struct calib_stats *sb = run(m, s, &o);
    const uint64_t E = calib_model_hparams(m)->n_embd;
    ck_assert_uint_eq(a.last.rows, b.last.rows);
    ck_assert_uint_eq(b.n_folds, folds_expected(calib_model_hparams(m)));
    double worst = 0, scale = 0, moved = 0;
    for (uint64_t i = 0; i < a.last.rows * E; i++) {
        worst = fmax(worst, fabs((double)a.last.h[i] - b.last.h[i]));
        scale = fmax(scale, fabs((double)a.last.h[i]));
    }
    /* the statistics of the folded groups did change (the inputs are x / s) */
    const struct calib_group_stats *x = calib_stats_group(sa, 0, CALIB_G_FFN_DOWN);
    const struct calib_group_stats *y = calib_stats_group(sb, 1, CALIB_G_FFN_DOWN);
    (void)y;
    for (uint64_t j = 0; j < x->n_in; j++) moved += x->sum_sq[j];
    ck_assert(moved > 0);
    ck_assert_msg(worst <= 1e-6 * (1.0 + scale), "%s: folds moved the output by %g (scale %g)",
                  g_kind, worst, scale);
    free(a.last.h);
    free(b.last.h);
    calib_stats_free(sa);
    calib_stats_free(sb);
    calib_samples_free(s);
    calib_model_close(m);
}
END_TEST

START_TEST(fold_legality)
{
    struct calib_model *m = open_model(g_gguf);
    const struct rt_hparams *hp = calib_model_hparams(m);
    char why[160];
    for (int g = 0; g < CALIB_G_COUNT; g++)
        ck_assert_msg(quant_awq_fold_legal(hp, (enum calib_group)g, why, sizeof why),
                      "%s: group %d not legal: %s", g_kind, g, why);
    /* the same structure with heads that do not group evenly: no v -> o */
    struct rt_hparams bad = *hp;
    bad.n_head_kv = 2;
    bad.n_head = 3;
    ck_assert(!quant_awq_fold_legal(&bad, CALIB_G_ATTN_OUT, why, sizeof why));
    ck_assert(strstr(why, "n_head_kv") != NULL);
    ck_assert(quant_awq_fold_legal(&bad, CALIB_G_ATTN_IN, why, sizeof why));
    /* what each family is */
    if (!strcmp(g_kind, "qwen3")) ck_assert(hp->qk_norm && !hp->post_norms && hp->act == RT_ACT_SILU);
    if (!strcmp(g_kind, "gemma3"))
        ck_assert(hp->qk_norm && hp->post_norms && hp->act == RT_ACT_GELU_TANH && hp->embd_scale &&
                  hp->n_swa > 0);
    if (!strcmp(g_kind, "gemma2"))
        ck_assert(!hp->qk_norm && hp->post_norms && hp->act == RT_ACT_GELU_TANH &&
                  hp->attn_softcap > 0 && hp->final_softcap > 0 && hp->n_swa > 0);
    if (!strncmp(g_kind, "phi3", 4)) ck_assert(hp->fused_qkv && hp->fused_gate_up);
    if (!strncmp(g_kind, "qwen35", 6) || !strcmp(g_kind, "qwen3next"))
        ck_assert(hp->full_attn_interval == 4 && hp->qk_norm && hp->attn_out_gate &&
                  !hp->post_norms && !hp->fused_qkv && hp->ssm_d_state > 0 &&
                  hp->ssm_dt_rank > hp->ssm_n_group && hp->n_rot < hp->head_dim &&
                  hp->ssm_v_tiled == (strcmp(g_kind, "qwen3next") != 0) &&
                  (hp->n_expert > 0) == (strcmp(g_kind, "qwen35") != 0));
    calib_model_close(m);
}
END_TEST

/* The imatrix entries of a model with gated delta-net layers (qwen35,
 * qwen35moe, qwen3next): every matrix llama.cpp quantizes and
 * llama-imatrix sees, per layer kind, with its input's width. */
static void ssm_entries(const struct rt_hparams *hp, const struct calib_stats *st)
{
    const bool next = hp->arch == RT_ARCH_QWEN3NEXT;
    uint64_t want = 0;
    for (uint32_t il = 0; il < hp->n_layer; il++) {
        /* delta net: attn_qkv, attn_gate, ssm_beta (ssm_ba), ssm_alpha, ssm_out;
         * gated attention: q, k, v, o */
        want += rt_layer_is_recurrent(hp, il) ? (next ? 4 : 5) : 4;
        /* the FFN: dense gate/up/down; MoE: the shared expert, its gate, the
         * router, the three stacked expert tensors */
        want += hp->n_expert ? 8 : 3;
    }
    ck_assert_uint_eq(calib_stats_n_entries(st), want);
    uint64_t seen_ssm_out = 0, seen_o = 0, seen_ba = 0, seen_alpha = 0;
    for (uint64_t i = 0; i < want; i++) {
        struct calib_entry en;
        ck_assert(calib_stats_entry_at(st, i, &en));
        unsigned il;
        char kind[64];
        ck_assert_int_eq(sscanf(en.name, "blk.%u.%63[a-z_]", &il, kind), 2);
        ck_assert_uint_lt(il, hp->n_layer);
        const bool rec = rt_layer_is_recurrent(hp, il);
        if (!strcmp(kind, "ssm_out")) {
            ck_assert(rec);
            ck_assert_uint_eq(en.gs->n_in, hp->ssm_d_inner);
            seen_ssm_out++;
        } else if (!strcmp(kind, "attn_output")) {
            ck_assert(!rec);
            ck_assert_uint_eq(en.gs->n_in, (uint64_t)hp->n_head * hp->head_dim);
            seen_o++;
        } else if (!strcmp(kind, "attn_qkv") || !strcmp(kind, "attn_gate") ||
                   !strcmp(kind, "ssm_beta") || !strcmp(kind, "ssm_alpha") ||
                   !strcmp(kind, "ssm_ba")) {
            ck_assert_msg(rec, "%s in an attention layer", en.name);
            ck_assert_uint_eq(en.gs->n_in, hp->n_embd);
            seen_ba += !strcmp(kind, "ssm_ba");
            seen_alpha += !strcmp(kind, "ssm_alpha");
        } else if (!strcmp(kind, "attn_q") || !strcmp(kind, "attn_k") || !strcmp(kind, "attn_v")) {
            ck_assert_msg(!rec, "%s in a delta-net layer", en.name);
        }
        if (en.n_mat == 1) /* every row (an expert's: the rows routed to it) */
            ck_assert_uint_eq(en.gs->count,
                              (uint64_t)calib_stats_n_samples(st) * calib_stats_n_pos(st));
    }
    uint64_t n_rec = 0;
    for (uint32_t il = 0; il < hp->n_layer; il++) n_rec += rt_layer_is_recurrent(hp, il);
    ck_assert_uint_eq(seen_ssm_out, n_rec);
    ck_assert_uint_eq(seen_o, hp->n_layer - n_rec);
    ck_assert_uint_eq(seen_ba, next ? n_rec : 0);
    ck_assert_uint_eq(seen_alpha, next ? 0 : n_rec);
    char nm[96];
    ck_assert(calib_stats_entry(st, 0, CALIB_W_QKV, nm, sizeof nm));
    ck_assert_str_eq(nm, "blk.0.attn_qkv.weight");
    ck_assert(!calib_stats_entry(st, 0, CALIB_W_Q, nm, sizeof nm));
    ck_assert(calib_stats_entry(st, 3, CALIB_W_Q, nm, sizeof nm));
    ck_assert_str_eq(nm, "blk.3.attn_q.weight");
    ck_assert(!calib_stats_entry(st, 3, CALIB_W_QKV, nm, sizeof nm));
    /* gated attention: attn_q holds q and gate rows */
    uint64_t rows = 0;
    calib_weight_tensor(hp, 3, CALIB_W_Q, nm, sizeof nm, &rows);
    ck_assert_uint_eq(rows, 2ull * hp->n_head * hp->head_dim);
}

START_TEST(stats_entries)
{
    struct calib_model *m = open_model(g_gguf);
    const struct rt_hparams *hp = calib_model_hparams(m);
    struct calib_samples *s = samples_of(m, 1, 24);
    struct calib_run_opts o = {.n_threads = 1};
    struct calib_stats *st = run(m, s, &o);
    if (hp->full_attn_interval) {
        ssm_entries(hp, st);
        calib_stats_free(st);
        calib_samples_free(s);
        calib_model_close(m);
        return;
    }
    const bool fused = !strncmp(g_kind, "phi3", 4);
    ck_assert_uint_eq(calib_stats_n_entries(st), (uint64_t)hp->n_layer * (fused ? 4 : 7));
    char nm[96];
    ck_assert(calib_stats_entry(st, 1, CALIB_W_Q, nm, sizeof nm));
    ck_assert_str_eq(nm, fused ? "blk.1.attn_qkv.weight" : "blk.1.attn_q.weight");
    ck_assert(calib_stats_entry(st, 1, CALIB_W_V, nm, sizeof nm) == !fused);
    ck_assert(calib_stats_entry(st, 1, CALIB_W_GATE, nm, sizeof nm));
    ck_assert_str_eq(nm, fused ? "blk.1.ffn_up.weight" : "blk.1.ffn_gate.weight");
    ck_assert(calib_stats_entry(st, 1, CALIB_W_UP, nm, sizeof nm) == !fused);
    /* the parts of a fused tensor: row ranges */
    uint64_t rows = 0;
    const uint64_t Q = (uint64_t)hp->n_head * hp->head_dim, KV = (uint64_t)hp->n_head_kv * hp->head_dim;
    const uint64_t r0 = calib_weight_tensor(hp, 0, CALIB_W_V, nm, sizeof nm, &rows);
    ck_assert_uint_eq(r0, fused ? Q + KV : 0);
    ck_assert_uint_eq(rows, fused ? Q + 2 * KV : KV);
    calib_stats_free(st);
    calib_samples_free(s);
    calib_model_close(m);
}
END_TEST

/* The recurrence runs per sample in token order whatever the threads and
 * the samples per batch: the statistics and the final hidden states are the
 * same bits with 1 thread and one sample per batch, 3 threads and all
 * samples in one batch, and with (no-op) callbacks, whose staged passes
 * recompute the delta net's output per sample. */
START_TEST(threads_batches_callbacks)
{
    struct calib_model *m = open_model(g_gguf);
    struct calib_samples *s = samples_of(m, 3, 20);
    struct last_ud la = {0}, lb = {0}, lc = {0};
    struct calib_run_opts o = {.n_threads = 1, .batch_rows = calib_samples_n_pos(s),
                               .on_layer = grab_last, .on_layer_ud = &la};
    struct calib_stats *a = run(m, s, &o);
    o = (struct calib_run_opts){.n_threads = 3, .on_layer = grab_last, .on_layer_ud = &lb};
    struct calib_stats *b = run(m, s, &o);
    o = (struct calib_run_opts){.n_threads = 2, .batch_rows = 2 * calib_samples_n_pos(s),
                                .on_group = noop_group, .on_layer = grab_last, .on_layer_ud = &lc};
    struct calib_stats *c = run(m, s, &o);
    ck_assert(stats_entries_same(a, b));
    ck_assert(stats_entries_same(a, c));
    const uint64_t n = la.rows * calib_model_hparams(m)->n_embd;
    ck_assert(memcmp(la.h, lb.h, (size_t)n * sizeof(float)) == 0);
    ck_assert(memcmp(la.h, lc.h, (size_t)n * sizeof(float)) == 0);
    free(la.h);
    free(lb.h);
    free(lc.h);
    calib_stats_free(a);
    calib_stats_free(b);
    calib_stats_free(c);
    calib_samples_free(s);
    calib_model_close(m);
}
END_TEST

/* plan's KV cache (calib_mem_estimate through rt_mem_estimate) = what the
 * runtime allocates (rt_ctx_mem) for the family: gemma's sliding layers keep
 * their window only; and the layout calib_mem_kv_layout reports */
START_TEST(plan_kv_matches_runtime)
{
    struct rt_model *rm = NULL;
    struct mw_err err;
    mw_err_clear(&err);
    ck_assert_int_eq(rt_model_open(g_gguf, NULL, &rm, &err), MW_OK);
    const struct rt_hparams *hp = rt_model_hparams(rm);
    struct calib_mem_arch a;
    calib_mem_arch_from_hparams(hp, 0, &a);
    const uint32_t ctxs[3] = {64, 512, 1000};
    for (int k = 0; k < 3; k++)
        for (int kv = 0; kv < 2; kv++) {
            struct rt_ctx *c = NULL;
            const struct rt_ctx_opts co = {.n_ctx = ctxs[k], .kv_type = (enum rt_kv_type)kv,
                                           .n_threads = 2};
            ck_assert_int_eq(rt_ctx_init(rm, &co, &c, &err), MW_OK);
            struct rt_mem rmem;
            rt_ctx_mem(c, &rmem);
            struct calib_mem cm;
            const struct calib_mem_opts mo = {.n_ctx = ctxs[k], .kv_type = (enum rt_kv_type)kv,
                                              .n_threads = 2,
                                              .weight_type = rt_model_main_type(rm)};
            ck_assert_int_eq(calib_mem_estimate(&a, &mo, &cm, &err), MW_OK);
            ck_assert_msg(cm.kv_bytes == rmem.kv_bytes, "%s ctx %u: plan KV %llu, runtime %llu",
                          g_kind, ctxs[k], (unsigned long long)cm.kv_bytes,
                          (unsigned long long)rmem.kv_bytes);
            ck_assert_uint_eq(cm.scratch_bytes, rmem.scratch_bytes);
            rt_ctx_free(c);
        }
    /* the layout, and the bytes it implies for an f16 cache */
    uint32_t n_sl = 0, rows = 0;
    const uint32_t ctx = 4096;
    calib_mem_kv_layout(&a, ctx, 0, &n_sl, &rows);
    uint32_t want_sl = 0;
    for (uint32_t il = 0; il < hp->n_layer; il++) want_sl += rt_layer_is_swa(hp, il);
    ck_assert_uint_eq(n_sl, want_sl);
    if (!strncmp(g_kind, "gemma", 5)) {
        ck_assert_uint_gt(n_sl, 0);
        ck_assert_uint_eq(rows, hp->n_swa - 1 + CALIB_MEM_DEFAULT_BATCH);
    } else {
        ck_assert_uint_eq(n_sl, 0); /* phi3: llama.cpp disables its window */
    }
    struct calib_mem cm;
    const struct calib_mem_opts mo = {.n_ctx = ctx};
    ck_assert_int_eq(calib_mem_estimate(&a, &mo, &cm, &err), MW_OK);
    const uint64_t row = (uint64_t)hp->n_head_kv * hp->head_dim * 2; /* f16 bytes per position */
    ck_assert_uint_eq(cm.kv_bytes, 2 * row * ((uint64_t)(hp->n_layer - n_sl) * ctx +
                                              (uint64_t)n_sl * rows));
    rt_model_close(rm);
}
END_TEST

int main(int argc, char **argv)
{
    if (argc != 4) {
        fprintf(stderr, "usage: check_calib_family KIND HF_DIR F32_GGUF\n");
        return 2;
    }
    g_kind = argv[1], g_dir = argv[2], g_gguf = argv[3];
    struct stat st;
    if (stat(g_dir, &st) != 0 || stat(g_gguf, &st) != 0) {
        fprintf(stderr, "SKIP: %s or %s missing\n", g_dir, g_gguf);
        return 77;
    }
    Suite *su = suite_create("calib_family");
    TCase *tc = tcase_create(g_kind);
    tcase_set_timeout(tc, 300);
    tcase_add_test(tc, logits_from_gguf);
    tcase_add_test(tc, logits_from_hf);
    tcase_add_loop_test(tc, folds_leave_model_unchanged, 0, 2);
    tcase_add_test(tc, fold_legality);
    tcase_add_test(tc, stats_entries);
    if (!strncmp(g_kind, "qwen35", 6) || !strcmp(g_kind, "qwen3next")) {
        /* the delta net's recurrence: per sample, in token order */
        tcase_add_test(tc, threads_batches_callbacks);
    } else {
        /* plan of the recurrent families (state, not KV, per delta-net layer) is
         * calib_mem's own test */
        tcase_add_test(tc, plan_kv_matches_runtime);
    }
    suite_add_tcase(su, tc);
    return run_suite(su);
}
