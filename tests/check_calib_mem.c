/* Unit tests for calib/'s memory bound (the forward, imatrix files and
 * mw_blas are check_calib's):
 *  - the memory formula equals the runtime's own accounting (rt_ctx_mem);
 *  - --max-memory: a bound that forces smaller batches gives bitwise the
 *    same statistics (and thread-independent Hessians), so do hidden states
 *    in a scratch file and the lean mode (weights and inputs released after
 *    use); a run resumed after its first layer gives the same statistics;
 *    a bound below the least plan fails with MW_E_NOMEM naming bytes, bound
 *    and remedy; an unusable $TMPDIR is MW_E_IO. */
#define _GNU_SOURCE
#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "calib/calib.h"
#include "calib/calib_int.h"
#include "quant/quant.h"

#define TINY_DIR MW_DATASETS_DIR "/tinyllama-8m"
#define TINY_GGUF MW_DATASETS_DIR "/reference/tinyllama-8m.llamacpp-f16.gguf"
#define CALIB_TXT MW_DATASETS_DIR "/corpora/calib.txt"
#include "check_calib_common.h"
#include "check_common.h"

// --- memory formula ---

START_TEST(mem_matches_runtime)
{
    struct rt_model *rm = NULL;
    struct mw_err err;
    mw_err_clear(&err);
    ck_assert_int_eq(rt_model_open(TINY_GGUF, NULL, &rm, &err), MW_OK);
    struct calib_mem_arch a;
    calib_mem_arch_from_hparams(rt_model_hparams(rm), 0, &a);
    const uint32_t ctxs[3] = {64, 512, 1000};
    for (int k = 0; k < 3; k++)
        for (int kv = 0; kv < 2; kv++)
            for (unsigned th = 1; th <= 3; th++) {
                struct rt_ctx *c = NULL;
                const struct rt_ctx_opts co = {.n_ctx = ctxs[k], .kv_type = (enum rt_kv_type)kv,
                                               .n_threads = th};
                ck_assert_int_eq(rt_ctx_init(rm, &co, &c, &err), MW_OK);
                struct rt_mem rmem;
                rt_ctx_mem(c, &rmem);
                struct calib_mem cm;
                const struct calib_mem_opts mo = {.n_ctx = ctxs[k], .kv_type = (enum rt_kv_type)kv,
                                                  .n_threads = th,
                                                  .weight_type = rt_model_main_type(rm)};
                ck_assert_int_eq(calib_mem_estimate(&a, &mo, &cm, &err), MW_OK);
                ck_assert_uint_eq(cm.kv_bytes, rmem.kv_bytes);
                ck_assert_uint_eq(cm.scratch_bytes, rmem.scratch_bytes);
                const int64_t d = (int64_t)cm.owned_bytes - (int64_t)rmem.owned_bytes;
                ck_assert_msg(d >= 0 && d < 8192, "owned %llu vs %llu",
                              (unsigned long long)cm.owned_bytes,
                              (unsigned long long)rmem.owned_bytes);
                rt_ctx_free(c);
            }
    /* 2 * n_layer * n_ctx * n_head_kv * head_dim * 2 bytes */
    struct calib_mem cm;
    const struct calib_mem_opts mo = {.n_ctx = 4096};
    ck_assert_int_eq(calib_mem_estimate(&a, &mo, &cm, &err), MW_OK);
    ck_assert_uint_eq(cm.kv_bytes, 2ull * 8 * 4096 * 4 * 32 * 2);
    ck_assert_uint_eq(cm.overhead_bytes, cm.scratch_bytes + cm.owned_bytes + CALIB_MEM_BASE_BYTES);
    ck_assert_uint_eq(calib_mem_weight_budget(1000, &cm), 0);
    const uint64_t r16 = (uint64_t)16 << 30;
    ck_assert_uint_eq(calib_mem_weight_budget(r16, &cm),
                      calib_mem_app_budget(r16) - cm.kv_bytes - cm.overhead_bytes);
    /* q8_0 needs head_dim % 32 */
    a.head_dim = 12;
    const struct calib_mem_opts mq = {.n_ctx = 64, .kv_type = RT_KV_Q8_0};
    ck_assert_int_eq(calib_mem_estimate(&a, &mq, &cm, &err), MW_E_USAGE);
    rt_model_close(rm);
}
END_TEST

// --- --max-memory ---

/* FNV-1a over every Hessian the callback asks for, in order */
static enum mw_status hess_group(void *ud, struct calib_layer *ly, enum calib_group g,
                                 struct mw_err *err)
{
    const float *H;
    enum mw_status s = calib_layer_hessian(ly, g, &H, err);
    if (s) return s;
    const uint64_t n = calib_layer_group_n_in(ly, g);
    const uint8_t *b = (const uint8_t *)H;
    uint64_t *h = ud;
    for (uint64_t i = 0; i < n * n * sizeof(float); i++) *h = (*h ^ b[i]) * 1099511628211ull;
    return MW_OK;
}

START_TEST(max_memory_adapts_batch)
{
    struct calib_model *m = open_model(TINY_DIR);
    struct calib_samples *s = samples_chunked(m, 6, 63, CALIB_CHUNK_BOS_PREPEND);
    struct calib_run_opts o = {.n_threads = 1};
    ck_assert_uint_eq(calib_run_batch_samples(m, s, &o), 6); /* 4096 rows: all 6 */
    struct calib_stats *a = run(m, s, &o);
    const uint64_t full = calib_run_peak_bytes(m, s, &o);
    /* room for 2 samples per batch (+ a second thread's 64x64 scores) */
    struct calib_run_opts two = {.n_threads = 1, .batch_rows = 128};
    const uint64_t bound = calib_run_peak_bytes(m, s, &two) + 64 * 64 * 4;
    ck_assert_uint_lt(bound, full);
    o.max_memory = bound;
    ck_assert_uint_eq(calib_run_batch_samples(m, s, &o), 2);
    ck_assert_uint_le(calib_run_peak_bytes(m, s, &o), bound);
    struct calib_stats *b = run(m, s, &o);
    o.n_threads = 2; /* same batches for every thread count */
    ck_assert_uint_eq(calib_run_batch_samples(m, s, &o), 2);
    struct calib_stats *c = run(m, s, &o);
    assert_stats_equal(a, b); /* smaller batches: bitwise the same statistics */
    assert_stats_equal(a, c);
    calib_stats_free(c);
    calib_stats_free(b);
    calib_stats_free(a);

    /* with a callback: X_o and one Hessian are planned for; the Hessians
     * are the same for 1 and 2 threads under the bound */
    uint64_t h1 = 14695981039346656037ull, h2 = h1;
    struct calib_run_opts g = {.n_threads = 1, .on_group = hess_group, .on_group_ud = &h1};
    const uint64_t gfull = calib_run_peak_bytes(m, s, &g);
    ck_assert_uint_gt(gfull, full);
    g.batch_rows = 128;
    g.max_memory = calib_run_peak_bytes(m, s, &g) + 64 * 64 * 4;
    g.batch_rows = 0;
    ck_assert_uint_eq(calib_run_batch_samples(m, s, &g), 2);
    a = run(m, s, &g);
    g.n_threads = 2;
    g.on_group_ud = &h2;
    b = run(m, s, &g);
    ck_assert(h1 == h2);
    assert_stats_equal(a, b);
    calib_stats_free(b);
    calib_stats_free(a);
    calib_samples_free(s);
    calib_model_close(m);
}
END_TEST

START_TEST(max_memory_scratch_file)
{
    struct calib_model *m = open_model(TINY_DIR);
    struct calib_samples *s = samples_chunked(m, 6, 63, CALIB_CHUNK_BOS_PREPEND);
    struct calib_run_opts o = {.n_threads = 1};
    struct calib_stats *a = run(m, s, &o);
    /* the least in memory: one sample per batch */
    struct calib_run_opts one = {.n_threads = 1, .batch_rows = 1};
    const uint64_t least_mem = calib_run_peak_bytes(m, s, &one);
    /* a bound that cannot be met reports the least plan: hidden states on disk */
    o.max_memory = 1;
    const uint64_t least_file = calib_run_peak_bytes(m, s, &o);
    ck_assert_uint_lt(least_file, least_mem); /* lean: hidden states and weights on disk */
    o.max_memory = least_file;
    ck_assert(calib_run_hidden_on_disk(m, s, &o));
    ck_assert_uint_eq(calib_run_batch_samples(m, s, &o), 1);
    struct calib_stats *b = run(m, s, &o);
    o.n_threads = 2;
    o.max_memory = least_file + 64 * 64 * 4;
    struct calib_stats *c = run(m, s, &o);
    assert_stats_equal(a, b); /* the file holds the same floats */
    assert_stats_equal(a, c);
    calib_stats_free(c);
    calib_stats_free(b);
    /* with callbacks the lean mode holds a Hessian and a weight more */
    int n_groups = 0;
    struct calib_run_opts g = {.n_threads = 1, .on_group = count_group, .on_group_ud = &n_groups,
                               .max_memory = least_file};
    ck_assert_uint_eq(calib_run_batch_samples(m, s, &g), 0);
    g.max_memory = 1;
    g.max_memory = calib_run_peak_bytes(m, s, &g);
    ck_assert(calib_run_hidden_on_disk(m, s, &g));
    ck_assert_uint_eq(calib_run_batch_samples(m, s, &g), 1);
    /* an unwritable scratch directory: MW_E_IO naming it, before any work */
    const char *old = getenv("TMPDIR");
    char *saved = old ? strdup(old) : NULL;
    setenv("TMPDIR", "/nonexistent-memwall-dir", 1);
    struct calib_stats *st = NULL;
    struct mw_err err;
    mw_err_clear(&err);
    o.max_memory = least_file;
    o.n_threads = 1;
    ck_assert_int_eq(calib_run(m, s, &o, &st, &err), MW_E_IO);
    ck_assert_ptr_null(st);
    ck_assert_msg(strstr(err.path, "/nonexistent-memwall-dir/"), "%s", err.path);
    if (saved) setenv("TMPDIR", saved, 1);
    else unsetenv("TMPDIR");
    free(saved);
    calib_stats_free(a);
    calib_samples_free(s);
    calib_model_close(m);
}
END_TEST

/* --- the lean mode: everything a consumer sees is bitwise the
 * in-memory run's --- */
struct lean_ud {
    uint64_t h;      /* FNV-1a over everything seen */
    uint32_t stages; /* stage events */
};

static void lean_hash(struct lean_ud *u, const void *p, uint64_t n)
{
    const uint8_t *b = p;
    for (uint64_t i = 0; i < n; i++) u->h = (u->h ^ b[i]) * 1099511628211ull;
}

static enum mw_status lean_group(void *ud, struct calib_layer *ly, enum calib_group g,
                                 struct mw_err *err)
{
    struct lean_ud *u = ud;
    enum mw_status s;
    const uint64_t T = calib_layer_n_rows(ly), n_in = calib_layer_group_n_in(ly, g);
    const uint64_t step = calib_layer_max_rows(ly) - 3; /* unaligned windows */
    for (uint64_t r0 = 0; r0 < T; r0 += step) {
        const uint64_t n = T - r0 < step ? T - r0 : step;
        const float *x;
        if ((s = calib_layer_input(ly, g, r0, n, &x, err))) return s;
        lean_hash(u, x, n * n_in * sizeof(float));
    }
    const float *H;
    if ((s = calib_layer_hessian(ly, g, &H, err))) return s;
    lean_hash(u, H, n_in * n_in * sizeof(float));
    /* change every weight of the group (a quantizer would): round to bf16 */
    for (int wk = 0; wk < CALIB_W_COUNT; wk++) {
        if (calib_wkind_group((enum calib_wkind)wk) != g) continue;
        if (!calib_layer_has_weight(ly, (enum calib_wkind)wk)) continue;
        struct calib_weight w;
        if ((s = calib_layer_weight(ly, (enum calib_wkind)wk, true, &w, err))) return s;
        for (uint64_t i = 0; i < w.n_out * w.n_in; i++) {
            uint32_t b;
            memcpy(&b, &w.w[i], 4);
            b &= 0xFFFF0000u;
            memcpy(&w.w[i], &b, 4);
        }
        /* released and fetched again: the change is kept */
        const float first = w.w[w.n_in + 1];
        if ((s = calib_layer_weight_release(ly, (enum calib_wkind)wk, err))) return s;
        if ((s = calib_layer_weight(ly, (enum calib_wkind)wk, false, &w, err))) return s;
        ck_assert_float_eq(w.w[w.n_in + 1], first);
        lean_hash(u, w.w, w.n_out * w.n_in * sizeof(float));
    }
    /* the Hessian after the change, taken */
    float *Ht;
    if ((s = calib_layer_hessian_take(ly, g, &Ht, err))) return s;
    lean_hash(u, Ht, n_in * n_in * sizeof(float));
    free(Ht);
    const uint32_t P = calib_layer_n_pos(ly);
    const uint64_t out_w = g == CALIB_G_ATTN_IN ? n_in == 256 ? 256 : n_in
                           : g == CALIB_G_FFN_IN ? 768 : 256;
    float *out = malloc((size_t)(2 * P * out_w) * sizeof(float));
    if ((s = calib_layer_forward(ly, g, 1, 2, out, err)) == MW_OK)
        lean_hash(u, out, 2 * P * out_w * sizeof(float));
    free(out);
    return s;
}

static enum mw_status lean_layer(void *ud, struct calib_layer *ly, struct mw_err *err)
{
    struct lean_ud *u = ud;
    const uint64_t T = calib_layer_n_rows(ly), step = calib_layer_max_rows(ly);
    for (uint64_t r0 = 0; r0 < T; r0 += step) {
        const uint64_t n = T - r0 < step ? T - r0 : step;
        const float *x;
        enum mw_status s = calib_layer_hidden(ly, r0, n, &x, err);
        if (s) return s;
        lean_hash(u, x, n * 256 * sizeof(float));
    }
    return MW_OK;
}

static void lean_stage(void *ud, const struct calib_stage_event *ev)
{
    struct lean_ud *u = ud;
    u->stages++;
    ck_assert_uint_eq(ev->n_layer, 8);
    ck_assert(ev->seconds >= 0);
}

START_TEST(lean_equals_memory)
{
    struct calib_model *m = open_model(TINY_DIR);
    struct calib_samples *s = samples_chunked(m, 5, 47, CALIB_CHUNK_BOS_PREPEND);
    uint64_t want = 0;
    struct calib_stats *ref = NULL;
    for (int k = 0; k < 4; k++) {
        struct lean_ud u = {.h = 14695981039346656037ull};
        struct calib_run_opts o = {.n_threads = k == 3 ? 3 : 1 + (unsigned)(k & 1),
                                   .batch_rows = 100, .lean = k >= 1,
                                   .on_group = lean_group, .on_group_ud = &u,
                                   .on_layer = lean_layer, .on_layer_ud = &u,
                                   .on_stage = lean_stage, .on_stage_ud = &u};
        ck_assert(calib_run_hidden_on_disk(m, s, &o) == (k >= 1));
        struct calib_stats *st = run(m, s, &o);
        /* embed + per layer 4 groups and the layer, each start and end */
        ck_assert_uint_eq(u.stages, 2 + 8 * 10);
        if (k == 0) {
            want = u.h;
            ref = st;
            continue;
        }
        ck_assert_msg(u.h == want, "run %d differs from the in-memory run", k);
        assert_stats_equal(ref, st);
        calib_stats_free(st);
    }
    calib_stats_free(ref);
    calib_samples_free(s);
    calib_model_close(m);
}
END_TEST

/* Resume: layers 0..2, their output; then first_layer = 3 from it gives the
 * same statistics for layers 3.. as the whole run. */
struct resume_ud {
    float *hs;
    uint64_t E;
    uint32_t stop_after;
};

static enum mw_status resume_keep(void *ud, struct calib_layer *ly, struct mw_err *err)
{
    struct resume_ud *r = ud;
    if (calib_layer_index(ly) != r->stop_after) return MW_OK;
    const uint64_t T = calib_layer_n_rows(ly), step = calib_layer_max_rows(ly);
    for (uint64_t r0 = 0; r0 < T; r0 += step) {
        const uint64_t n = T - r0 < step ? T - r0 : step;
        const float *x;
        enum mw_status s = calib_layer_hidden(ly, r0, n, &x, err);
        if (s) return s;
        memcpy(r->hs + r0 * r->E, x, n * r->E * sizeof(float));
    }
    return MW_OK;
}

static enum mw_status resume_load(void *ud, uint64_t row0, uint64_t n, float *dst,
                                  struct mw_err *err)
{
    (void)err;
    struct resume_ud *r = ud;
    memcpy(dst, r->hs + row0 * r->E, n * r->E * sizeof(float));
    return MW_OK;
}

START_TEST(resume_first_layer)
{
    struct calib_model *m = open_model(TINY_DIR);
    struct calib_samples *s = samples_chunked(m, 4, 40, CALIB_CHUNK_BOS_PREPEND);
    const uint64_t T = 4 * 41;
    struct resume_ud r = {.hs = malloc(T * 256 * sizeof(float)), .E = 256, .stop_after = 2};
    for (int lean = 0; lean < 2; lean++) {
        struct calib_run_opts o = {.n_threads = 2, .batch_rows = 90, .lean = lean,
                                   .on_group = count_group, .on_layer = resume_keep,
                                   .on_layer_ud = &r};
        int ng = 0;
        o.on_group_ud = &ng;
        struct calib_stats *a = run(m, s, &o);
        o.first_layer = 3;
        o.load_hidden = resume_load;
        o.load_hidden_ud = &r;
        o.lean = !lean;
        struct calib_stats *b = run(m, s, &o);
        for (uint32_t il = 0; il < 8; il++)
            for (int g = 0; g < CALIB_G_COUNT; g++) {
                const struct calib_group_stats *x = calib_stats_group(a, il, (enum calib_group)g);
                const struct calib_group_stats *y = calib_stats_group(b, il, (enum calib_group)g);
                ck_assert_uint_eq(y->count, il < 3 ? 0 : x->count);
                if (il >= 3)
                    ck_assert(memcmp(x->sum_sq, y->sum_sq, x->n_in * sizeof(double)) == 0);
            }
        calib_stats_free(b);
        calib_stats_free(a);
    }
    struct calib_run_opts bad = {.n_threads = 1, .first_layer = 3};
    struct calib_stats *st = NULL;
    struct mw_err err;
    mw_err_clear(&err);
    ck_assert_int_eq(calib_run(m, s, &bad, &st, &err), MW_E_USAGE);
    bad.load_hidden = resume_load;
    bad.first_layer = 8;
    ck_assert_int_eq(calib_run(m, s, &bad, &st, &err), MW_E_USAGE);
    free(r.hs);
    calib_samples_free(s);
    calib_model_close(m);
}
END_TEST

START_TEST(max_memory_too_small)
{
    struct calib_model *m = open_model(TINY_DIR);
    struct calib_samples *s = samples_chunked(m, 6, 63, CALIB_CHUNK_BOS_PREPEND);
    struct calib_run_opts one = {.n_threads = 1, .max_memory = 1};
    const uint64_t least = calib_run_peak_bytes(m, s, &one); /* one sample per batch, on disk */
    struct calib_run_opts o = {.n_threads = 1, .max_memory = least - 1};
    ck_assert_uint_eq(calib_run_batch_samples(m, s, &o), 0);
    struct calib_stats *st = (struct calib_stats *)&o; /* must be reset to NULL */
    struct mw_err err;
    mw_err_clear(&err);
    ck_assert_int_eq(calib_run(m, s, &o, &st, &err), MW_E_NOMEM);
    ck_assert_ptr_null(st);
    ck_assert_int_eq(err.code, MW_E_NOMEM);
    char want[64];
    snprintf(want, sizeof want, "needs at least %llu bytes", (unsigned long long)least);
    ck_assert_msg(strstr(err.msg, want), "%s", err.msg);
    snprintf(want, sizeof want, "--max-memory %llu bytes", (unsigned long long)least - 1);
    ck_assert_msg(strstr(err.msg, want), "%s", err.msg);
    ck_assert_msg(strstr(err.msg, "--samples") && strstr(err.msg, "--seq-len"), "%s", err.msg);
    /* exactly the least: runs */
    o.max_memory = least;
    ck_assert_uint_eq(calib_run_batch_samples(m, s, &o), 1);
    st = run(m, s, &o);
    calib_stats_free(st);
    /* one sample per batch fits with 1 thread, not with 64 (64 x 64^2 x 4 bytes of scores) */
    o.n_threads = 64;
    mw_err_clear(&err);
    ck_assert_int_eq(calib_run(m, s, &o, &st, &err), MW_E_NOMEM);
    ck_assert_msg(strstr(err.msg, "--threads"), "%s", err.msg);
    calib_samples_free(s);
    calib_model_close(m);
}
END_TEST

static Suite *calib_mem_suite(void)
{
    Suite *s = suite_create("calib_mem");
    TCase *tc = tcase_create("max_memory");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, max_memory_adapts_batch);
    tcase_add_test(tc, max_memory_scratch_file);
    tcase_add_test(tc, lean_equals_memory);
    tcase_add_test(tc, resume_first_layer);
    tcase_add_test(tc, max_memory_too_small);
    suite_add_tcase(s, tc);

    tc = tcase_create("formula");
    tcase_set_timeout(tc, 30);
    tcase_add_test(tc, mem_matches_runtime);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    return run_suite(calib_mem_suite());
}
