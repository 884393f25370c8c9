/* Unit tests for calib/ (the corpus and the samples are check_calib_corpus's,
 * the memory bound check_calib_mem's):
 *  - mw_blas: products, Gram matrices, Cholesky and inverse equal for every
 *    thread count;
 *  - the forward: statistics bitwise identical for 1 and 2 threads, with
 *    and without a (no-op) callback, from the HF dir and from llama.cpp's
 *    F16 GGUF; the callback API: inputs re-summed equal the statistics,
 *    the Hessian, group forwards, AWQ-style scale folding leaves everything
 *    downstream unchanged, a changed weight is seen downstream, permission
 *    and stage errors, errors from callbacks abort the run; the final
 *    hidden states give the runtime's logits (F32 GGUF) closely;
 *  - imatrix files: GGUF and legacy written, read back through quant's
 *    reader, layout as llama.cpp's, atomic on failure. */
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
#include "calib/mw_blas.h"
#include "hf/hf.h"
#include "quant/quant.h"

#define TINY_DIR MW_DATASETS_DIR "/tinyllama-8m"
#define TINY_GGUF MW_DATASETS_DIR "/reference/tinyllama-8m.llamacpp-f16.gguf"
#define CALIB_TXT MW_DATASETS_DIR "/corpora/calib.txt"
#include "check_calib_common.h"
#include "check_common.h"

// --- forward ---

START_TEST(forward_threads_and_callback_deterministic)
{
    struct calib_model *m = open_model(TINY_DIR);
    struct calib_samples *s = samples_chunked(m, 5, 63, CALIB_CHUNK_BOS_PREPEND);
    /* 2 samples per batch: three batches, the last one short */
    struct calib_run_opts o = {.n_threads = 1, .batch_rows = 128};
    struct calib_stats *a = run(m, s, &o);
    o.n_threads = 2;
    struct calib_stats *b = run(m, s, &o);
    o.n_threads = 3;
    struct calib_stats *c = run(m, s, &o);
    assert_stats_equal(a, b);
    assert_stats_equal(a, c);
    ck_assert_uint_eq(calib_stats_group(a, 7, CALIB_G_FFN_DOWN)->count, 5 * 64);
    ck_assert_uint_eq(calib_stats_group(a, 0, CALIB_G_FFN_DOWN)->n_in, 768);
    calib_stats_free(c);
    calib_stats_free(b);
    calib_stats_free(a);
    calib_samples_free(s);
    calib_model_close(m);
}
END_TEST

static enum mw_status count_layer(void *ud, struct calib_layer *ly, struct mw_err *err)
{
    (void)err;
    ck_assert_uint_eq(calib_layer_index(ly), (uint32_t)*(int *)ud);
    (*(int *)ud)++;
    return MW_OK;
}

START_TEST(forward_noop_callback_and_gguf_source)
{
    struct calib_model *m = open_model(TINY_DIR);
    struct calib_model *g = open_model(TINY_GGUF);
    ck_assert(calib_model_is_gguf(g));
    ck_assert_uint_eq(calib_model_hparams(g)->n_vocab, calib_model_hparams(m)->n_vocab);
    struct calib_samples *s = samples_chunked(m, 3, 40, CALIB_CHUNK_BOS_PREPEND);
    struct calib_run_opts o = {.n_threads = 2, .batch_rows = 100};
    struct calib_stats *a = run(m, s, &o);
    int n_groups = 0, n_layers = 0;
    o.on_group = count_group;
    o.on_group_ud = &n_groups;
    o.on_layer = count_layer;
    o.on_layer_ud = &n_layers;
    struct calib_stats *b = run(m, s, &o);
    ck_assert_int_eq(n_groups, 8 * 4);
    ck_assert_int_eq(n_layers, 8);
    struct calib_run_opts o2 = {.n_threads = 1, .batch_rows = 100};
    struct calib_stats *c = run(g, s, &o2);
    assert_stats_equal(a, b);
    assert_stats_equal(a, c); /* llama.cpp's F16 GGUF = the HF dir, bit for bit */
    calib_stats_free(c);
    calib_stats_free(b);
    calib_stats_free(a);
    calib_samples_free(s);
    calib_model_close(g);
    calib_model_close(m);
}
END_TEST

/* --- the callback API under test --- */

struct probe {
    int fails;
    bool checked_hessian;
};

static enum mw_status probe_group(void *ud, struct calib_layer *ly, enum calib_group g,
                                  struct mw_err *err)
{
    struct probe *p = ud;
    const uint64_t T = calib_layer_n_rows(ly), n_in = calib_layer_group_n_in(ly, g);
    const uint64_t step = calib_layer_max_rows(ly) - 7; /* unaligned to samples on purpose */
    const struct calib_group_stats *gs = calib_layer_stats(ly, g);
    ck_assert_uint_eq(gs->count, T);
    double *sq = calloc(n_in, sizeof *sq);
    for (uint64_t r0 = 0; r0 < T; r0 += step) {
        const uint64_t n = T - r0 < step ? T - r0 : step;
        const float *x;
        ck_assert_int_eq(calib_layer_input(ly, g, r0, n, &x, err), MW_OK);
        for (uint64_t r = 0; r < n; r++)
            for (uint64_t j = 0; j < n_in; j++) sq[j] += (double)x[r * n_in + j] * x[r * n_in + j];
    }
    /* same rows, same order, same double sums: identical */
    for (uint64_t j = 0; j < n_in; j++)
        if (sq[j] != gs->sum_sq[j]) p->fails++;
    if (calib_layer_index(ly) == 1 && g == CALIB_G_ATTN_OUT) {
        const float *H;
        ck_assert_int_eq(calib_layer_hessian(ly, g, &H, err), MW_OK);
        for (uint64_t j = 0; j < n_in; j++) {
            ck_assert_msg(fabs(H[j * n_in + j] - sq[j]) <= 1e-4 * sq[j], "H diag %llu",
                          (unsigned long long)j);
            ck_assert_float_eq(H[j * n_in + (j + 5) % n_in], H[((j + 5) % n_in) * n_in + j]);
        }
        const float *H2;
        ck_assert_int_eq(calib_layer_hessian(ly, g, &H2, err), MW_OK);
        ck_assert_ptr_eq(H, H2); /* cached */
        p->checked_hessian = true;
        /* forward(ATTN_IN) of samples 1..2 = the ATTN_OUT input rows */
        const uint32_t P = calib_layer_n_pos(ly);
        float *out = malloc(2 * P * n_in * sizeof *out);
        ck_assert_int_eq(calib_layer_forward(ly, CALIB_G_ATTN_IN, 1, 2, out, err), MW_OK);
        const float *x;
        ck_assert_int_eq(calib_layer_input(ly, g, P, 2 * P, &x, err), MW_OK);
        for (uint64_t i = 0; i < 2 * P * n_in; i++)
            ck_assert_msg(fabsf(out[i] - x[i]) <= 1e-5f * (1.0f + fabsf(x[i])), "fwd %llu",
                          (unsigned long long)i);
        free(out);
        /* stage rules */
        struct calib_weight w;
        ck_assert_int_eq(calib_layer_weight(ly, CALIB_W_GATE, true, &w, err), MW_E_USAGE);
        ck_assert_int_eq(calib_layer_input(ly, CALIB_G_FFN_IN, 0, 1, &x, err), MW_E_USAGE);
        ck_assert_int_eq(calib_layer_input(ly, g, T - 1, 2, &x, err), MW_E_USAGE);
        ck_assert_int_eq(calib_layer_weight(ly, CALIB_W_GATE, false, &w, err), MW_OK);
        ck_assert_str_eq(w.name, "blk.1.ffn_gate.weight");
        ck_assert_uint_eq(w.n_out, 768);
        ck_assert_uint_eq(w.n_in, 256);
        ck_assert_ptr_null(w.bias);
    }
    free(sq);
    return MW_OK;
}

START_TEST(forward_layer_api)
{
    struct calib_model *m = open_model(TINY_DIR);
    struct calib_samples *s = samples_chunked(m, 4, 47, CALIB_CHUNK_BOS_PREPEND);
    struct probe p = {0};
    struct calib_run_opts o = {.n_threads = 2, .batch_rows = 96, .on_group = probe_group,
                               .on_group_ud = &p};
    struct calib_stats *a = run(m, s, &o);
    ck_assert_int_eq(p.fails, 0);
    ck_assert(p.checked_hessian);
    calib_stats_free(a);
    calib_samples_free(s);
    calib_model_close(m);
}
END_TEST

/* AWQ-style folds that leave the function unchanged: attn_norm *= s with
 * q/k/v columns / s (ATTN_IN), v rows / s with o columns * s (ATTN_OUT),
 * up rows * s with down columns / s (FFN_DOWN). */
static enum mw_status fold_group(void *ud, struct calib_layer *ly, enum calib_group g,
                                 struct mw_err *err)
{
    (void)ud;
    const uint64_t E = calib_layer_group_n_in(ly, CALIB_G_ATTN_IN);
    struct calib_weight w[3];
    enum mw_status s = MW_OK;
    if (g == CALIB_G_ATTN_IN) {
        float *nw;
        if ((s = calib_layer_norm(ly, CALIB_NORM_ATTN, true, &nw, err))) return s;
        for (int k = 0; k < 3; k++)
            if ((s = calib_layer_weight(ly, (enum calib_wkind)(CALIB_W_Q + k), true, &w[k], err)))
                return s;
        for (uint64_t j = 0; j < E; j++) {
            const float sc = 0.5f + (float)(j % 7) * 0.25f; /* powers of two and not */
            nw[j] *= sc;
            for (int k = 0; k < 3; k++)
                for (uint64_t r = 0; r < w[k].n_out; r++) w[k].w[r * E + j] /= sc;
        }
    } else if (g == CALIB_G_ATTN_OUT) {
        if ((s = calib_layer_weight(ly, CALIB_W_V, true, &w[0], err))) return s;
        if ((s = calib_layer_weight(ly, CALIB_W_O, true, &w[1], err))) return s;
        /* v row r feeds o column (h*hd + r % hd) of every query head h of its kv group */
        const uint64_t hd = 32, n_rep = 2, KV = w[0].n_out;
        for (uint64_t r = 0; r < KV; r++) {
            const float sc = 2.0f;
            for (uint64_t j = 0; j < w[0].n_in; j++) w[0].w[r * w[0].n_in + j] /= sc;
            const uint64_t kvh = r / hd, d = r % hd;
            for (uint64_t q = 0; q < n_rep; q++) {
                const uint64_t col = (kvh * n_rep + q) * hd + d;
                for (uint64_t o = 0; o < w[1].n_out; o++) w[1].w[o * w[1].n_in + col] *= sc;
            }
        }
    } else if (g == CALIB_G_FFN_DOWN) {
        if ((s = calib_layer_weight(ly, CALIB_W_UP, true, &w[0], err))) return s;
        if ((s = calib_layer_weight(ly, CALIB_W_DOWN, true, &w[1], err))) return s;
        for (uint64_t r = 0; r < w[0].n_out; r++) {
            const float sc = (r % 3) ? 4.0f : 0.25f;
            for (uint64_t j = 0; j < w[0].n_in; j++) w[0].w[r * w[0].n_in + j] *= sc;
            for (uint64_t o = 0; o < w[1].n_out; o++) w[1].w[o * w[1].n_in + r] /= sc;
        }
    }
    return MW_OK;
}

START_TEST(forward_fold_invariance)
{
    struct calib_model *m = open_model(TINY_DIR);
    struct calib_samples *s = samples_chunked(m, 3, 50, CALIB_CHUNK_BOS_PREPEND);
    struct calib_run_opts o = {.n_threads = 2};
    struct calib_stats *a = run(m, s, &o);
    o.on_group = fold_group;
    struct calib_stats *b = run(m, s, &o);
    /* statistics are taken before each callback, and every fold leaves the
     * layer's function unchanged: nothing may move beyond float rounding */
    double worst = 0;
    for (uint32_t il = 0; il < 8; il++)
        for (int g = 0; g < CALIB_G_COUNT; g++) {
            const struct calib_group_stats *x = calib_stats_group(a, il, (enum calib_group)g);
            const struct calib_group_stats *y = calib_stats_group(b, il, (enum calib_group)g);
            for (uint64_t j = 0; j < x->n_in; j++) {
                const double r = fabs(x->sum_sq[j] - y->sum_sq[j]) / (x->sum_sq[j] + 1e-12);
                worst = r > worst ? r : worst;
            }
        }
    ck_assert_msg(worst < 2e-4, "max rel change %g", worst);
    ck_assert_msg(worst > 0, "folds had no effect at all?");
    calib_stats_free(b);
    calib_stats_free(a);
    calib_samples_free(s);
    calib_model_close(m);
}
END_TEST

/* Zeroing o in layer 0's ATTN_OUT callback: layer 0's FFN input is then
 * rmsnorm(embedding) * ffn_norm, so per channel its Σx² is ATTN_IN's Σx²
 * times (ffn_norm / attn_norm)². */
struct zero_ud {
    float ratio[256];
};

static enum mw_status zero_o(void *ud, struct calib_layer *ly, enum calib_group g,
                             struct mw_err *err)
{
    struct zero_ud *z = ud;
    if (calib_layer_index(ly) != 0 || g != CALIB_G_ATTN_OUT) return MW_OK;
    struct calib_weight w;
    enum mw_status s = calib_layer_weight(ly, CALIB_W_O, true, &w, err);
    if (s) return s;
    memset(w.w, 0, w.n_out * w.n_in * sizeof(float));
    float *an, *fn;
    if ((s = calib_layer_norm(ly, CALIB_NORM_ATTN, false, &an, err))) return s;
    if ((s = calib_layer_norm(ly, CALIB_NORM_FFN, false, &fn, err))) return s;
    for (int j = 0; j < 256; j++) z->ratio[j] = (fn[j] / an[j]) * (fn[j] / an[j]);
    ck_assert_int_eq(calib_layer_norm(ly, CALIB_NORM_FFN, true, &fn, err), MW_E_USAGE);
    return MW_OK;
}

START_TEST(forward_change_propagates)
{
    struct calib_model *m = open_model(TINY_DIR);
    struct calib_samples *s = samples_chunked(m, 2, 30, CALIB_CHUNK_BOS_PREPEND);
    struct zero_ud z;
    struct calib_run_opts o = {.n_threads = 1, .on_group = zero_o, .on_group_ud = &z};
    struct calib_stats *a = run(m, s, &o);
    const struct calib_group_stats *ai = calib_stats_group(a, 0, CALIB_G_ATTN_IN);
    const struct calib_group_stats *fi = calib_stats_group(a, 0, CALIB_G_FFN_IN);
    for (int j = 0; j < 256; j++) {
        const double want = ai->sum_sq[j] * z.ratio[j];
        ck_assert_msg(fabs(fi->sum_sq[j] - want) <= 1e-5 * want, "channel %d: %g vs %g", j,
                      fi->sum_sq[j], want);
    }
    calib_stats_free(a);
    calib_samples_free(s);
    calib_model_close(m);
}
END_TEST

static enum mw_status fail_at_2(void *ud, struct calib_layer *ly, enum calib_group g,
                                struct mw_err *err)
{
    (void)ud;
    if (calib_layer_index(ly) == 2 && g == CALIB_G_FFN_IN)
        return MW_FAIL(err, MW_E_VALUE, MW_ERR_OFF_NONE, "stop here");
    return MW_OK;
}

START_TEST(forward_errors)
{
    struct calib_model *m = open_model(TINY_DIR);
    struct calib_samples *s = samples_chunked(m, 2, 20, CALIB_CHUNK_BOS_PREPEND);
    struct calib_stats *st = NULL;
    struct mw_err err;
    mw_err_clear(&err);
    struct calib_run_opts o = {.on_group = fail_at_2};
    ck_assert_int_eq(calib_run(m, s, &o, &st, &err), MW_E_VALUE);
    ck_assert_str_eq(err.msg, "stop here");
    ck_assert_ptr_null(st);
    o = (struct calib_run_opts){.n_threads = CALIB_MAX_THREADS + 1};
    ck_assert_int_eq(calib_run(m, s, &o, &st, &err), MW_E_USAGE);
    /* token ids outside the vocabulary */
    const int32_t bad[6] = {1, 5, 6, 4096, 7, 8};
    struct calib_samples *b = NULL;
    ck_assert_int_eq(calib_samples_from_tokens(bad, 2, 3, &b, &err), MW_OK);
    mw_err_clear(&err);
    o = (struct calib_run_opts){0};
    ck_assert_int_eq(calib_run(m, b, &o, &st, &err), MW_E_VALUE);
    ck_assert_str_eq(err.where, "sample 1 position 0");
    calib_samples_free(b);
    calib_samples_free(s);
    calib_model_close(m);
}
END_TEST

START_TEST(forward_matches_runtime_logits)
{
    /* the runtime rounds activations to f16 for F16 weights and keeps an
     * f16 KV cache (as llama.cpp): agreement to f16 precision */
    struct calib_model *m = open_model(TINY_GGUF);
    const double r = logits_vs_runtime(m, TINY_GGUF, 40);
    ck_assert_msg(r < 5e-3, "tinyllama: logits differ by %g of their scale", r);
    calib_model_close(m);
}
END_TEST

/* qwen2 (biases, NEOX RoPE, tied output), llama3 (rope_freqs), odd (head
 * dim 12, linear RoPE scaling): the HF directory through calib against the
 * runtime on its F32 conversion. */
static const char *const fixture_kinds[3] = {"qwen2", "llama3", "odd"};

START_TEST(forward_fixtures_match_runtime)
{
    const char *kind = fixture_kinds[_i];
    char dir[512], gguf[600];
    snprintf(dir, sizeof dir, MW_TEST_TMPDIR "/calib-fix-%s", kind);
    snprintf(gguf, sizeof gguf, "%s.gguf", dir);
    make_hf_fixture(kind, dir);
    struct mw_err err;
    mw_err_clear(&err);
    const struct hf_convert_opts co = {.type = HF_OUT_F32};
    ck_assert_msg(hf_convert(dir, gguf, &co, &err) == MW_OK, "convert: %s", err.msg);
    struct calib_model *m = open_model(dir);
    ck_assert(!calib_model_is_gguf(m));
    const double r = logits_vs_runtime(m, gguf, 24);
    ck_assert_msg(r < 2e-3, "%s: logits differ by %g of their scale", kind, r);
    calib_model_close(m);
    unlink(gguf);
}
END_TEST

// --- imatrix files ---

/* The statistics the imatrix tests write: tinyllama-8m, 2 samples of 32
 * tokens; freed with imatrix_stats_free. */
struct imatrix_fixture {
    struct calib_model *m;
    struct calib_samples *s;
    struct calib_stats *st;
    struct calib_imatrix_meta meta; /* one dataset, "calib.txt" */
    struct mw_err err;              /* cleared */
};

static const char *const imatrix_ds[1] = {"calib.txt"};

static struct calib_stats *imatrix_stats(struct imatrix_fixture *f)
{
    f->m = open_model(TINY_DIR);
    f->s = samples_chunked(f->m, 2, 32, CALIB_CHUNK_BOS_PREPEND);
    struct calib_run_opts o = {.n_threads = 2};
    f->meta = (struct calib_imatrix_meta){.datasets = imatrix_ds, .n_datasets = 1};
    mw_err_clear(&f->err);
    return f->st = run(f->m, f->s, &o);
}

static void imatrix_stats_free(struct imatrix_fixture *f)
{
    calib_stats_free(f->st);
    calib_samples_free(f->s);
    calib_model_close(f->m);
}

START_TEST(imatrix_write_read)
{
    struct imatrix_fixture fx;
    const struct calib_stats *st = imatrix_stats(&fx);
    struct mw_err *err = &fx.err;
    const char *paths[2] = {MW_TEST_TMPDIR "/calib-test.imatrix", MW_TEST_TMPDIR "/calib-test.dat"};
    for (int f = 0; f < 2; f++) {
        unlink(paths[f]);
        ck_assert_int_eq(
            calib_imatrix_write(st, &fx.meta, (enum calib_imatrix_fmt)f, paths[f], err), MW_OK);
        struct quant_imatrix *im = NULL;
        ck_assert_int_eq(quant_imatrix_load(paths[f], &im, err), MW_OK);
        ck_assert(quant_imatrix_is_legacy(im) == (f == 1));
        ck_assert_uint_eq(quant_imatrix_count(im), 56);
        ck_assert_uint_eq(quant_imatrix_chunk_count(im), 2);
        ck_assert_uint_eq(quant_imatrix_dataset_count(im), 1);
        ck_assert_str_eq(quant_imatrix_dataset(im, 0), "calib.txt");
        for (uint32_t il = 0; il < 8; il++)
            for (int w = 0; w < CALIB_W_COUNT; w++) {
                if (!calib_weight_in_layer(calib_model_hparams(fx.m), il, (enum calib_wkind)w))
                    continue; /* the delta net's kinds: not in a llama model */
                char nm[64];
                snprintf(nm, sizeof nm, "blk.%u.%s.weight", il,
                         calib_wkind_name((enum calib_wkind)w));
                const int64_t i = quant_imatrix_find(im, nm);
                ck_assert_int_ge(i, 0);
                uint64_t n;
                const float *v = quant_imatrix_values(im, (uint64_t)i, &n);
                const struct calib_group_stats *gs =
                    calib_stats_group(st, il, calib_wkind_group((enum calib_wkind)w));
                ck_assert_uint_eq(n, gs->n_in);
                for (uint64_t j = 0; j < n; j++) {
                    const double want = gs->sum_sq[j] / (double)gs->count;
                    ck_assert_msg(fabs(v[j] - want) <= 2e-7 * want, "%s[%llu]", nm,
                                  (unsigned long long)j);
                }
            }
        quant_imatrix_free(im);
    }
    /* GGUF layout as llama-imatrix writes it */
    struct gguf_file *g = NULL;
    ck_assert_int_eq(gguf_open(paths[0], GGUF_OPEN_DEFAULT, &g, err), MW_OK);
    ck_assert_uint_eq(gguf_tensor_count(g), 112);
    const char *type;
    uint64_t len;
    ck_assert_int_eq(gguf_get_str(g, "general.type", &type, &len, err), MW_OK);
    ck_assert(len == 7 && memcmp(type, "imatrix", 7) == 0);
    uint32_t v;
    ck_assert_int_eq(gguf_get_u32(g, "imatrix.chunk_size", &v, err), MW_OK);
    ck_assert_uint_eq(v, 33);
    for (uint64_t i = 0; i + 1 < gguf_tensor_count(g); i++) {
        const struct gguf_tensor *a = gguf_tensor_get(g, i), *b = gguf_tensor_get(g, i + 1);
        ck_assert_uint_eq(a->n_dims, 1);
        ck_assert_uint_eq(a->type, GGUF_TYPE_F32);
        if (i % 2 == 0) {
            ck_assert_ptr_nonnull(strstr(a->name, ".in_sum2"));
            ck_assert_ptr_nonnull(strstr(b->name, ".counts"));
            ck_assert_float_eq(*(const float *)gguf_tensor_data(g, i + 1), 66.0f);
        } else {
            ck_assert_int_lt(strcmp(a->name, b->name), 0);
        }
    }
    gguf_close(g);
    /* a directory that does not exist: an I/O error, nothing written */
    ck_assert_int_eq(calib_imatrix_write(st, &fx.meta, CALIB_IMATRIX_GGUF,
                                         MW_TEST_TMPDIR "/no/such/dir/x.imatrix", err),
                     MW_E_IO);
    ck_assert_int_eq(calib_imatrix_write(st, &fx.meta, CALIB_IMATRIX_LEGACY,
                                         MW_TEST_TMPDIR "/no/such/dir/x.dat", err),
                     MW_E_IO);
    unlink(paths[0]);
    unlink(paths[1]);
    imatrix_stats_free(&fx);
}
END_TEST

/* calib_imatrix_write_mem: the bytes calib_imatrix_write puts in the GGUF
 * file; the GGUF reader takes them back. */
START_TEST(imatrix_write_mem)
{
    struct imatrix_fixture fx;
    const struct calib_stats *st = imatrix_stats(&fx);
    struct mw_err *err = &fx.err;
    const char *path = MW_TEST_TMPDIR "/calib-test-mem.imatrix";
    unlink(path);
    ck_assert_int_eq(calib_imatrix_write(st, &fx.meta, CALIB_IMATRIX_GGUF, path, err), MW_OK);
    void *buf = NULL;
    uint64_t n = 0;
    ck_assert_int_eq(calib_imatrix_write_mem(st, &fx.meta, &buf, &n, err), MW_OK);
    struct mw_map fm;
    ck_assert_int_eq(mw_map_open(&fm, path, err), MW_OK);
    ck_assert_uint_eq(n, fm.size);
    ck_assert(memcmp(buf, fm.data, (size_t)n) == 0);
    mw_map_close(&fm);
    struct gguf_file *g = NULL;
    ck_assert_int_eq(gguf_open_mem(buf, n, "imatrix", GGUF_OPEN_DEFAULT, &g, err), MW_OK);
    ck_assert_uint_eq(gguf_tensor_count(g), 112);
    gguf_close(g);
    free(buf);
    unlink(path);
    imatrix_stats_free(&fx);
}
END_TEST
// --- mw_blas: thread-count-independent linear algebra ---------------------------

static float *rand_mat(uint64_t n, uint32_t seed)
{
    float *a = malloc(n * sizeof *a);
    uint32_t x = seed * 2654435761u + 1;
    for (uint64_t i = 0; i < n; i++) {
        x = x * 1664525u + 1013904223u;
        a[i] = (float)((int32_t)(x >> 8) - (1 << 23)) / (float)(1 << 23);
    }
    return a;
}

static struct mw_pool *pool_of(unsigned n)
{
    struct mw_pool *p = NULL;
    struct mw_err err;
    ck_assert_int_eq(mw_pool_init(n, &p, &err), MW_OK);
    return p;
}

/* C = op(A) op(B) for every transpose pair, shapes that cut tiles (and a
 * segment length that is not a tile multiple): within rounding of a double
 * reference, and bit for bit the same for 1, 2 and 3 threads */
START_TEST(blas_gemm)
{
    mw_blas_init();
    const uint64_t M = 2 * 301 + 17, N = 300, K = 70, seg = 301;
    const bool ta = _i & 1, tb = _i & 2;
    float *A = rand_mat(M * K, 1), *B = rand_mat(N * K, 2);
    float *C[3];
    for (unsigned t = 0; t < 3; t++) {
        struct mw_pool *p = pool_of(t + 1);
        C[t] = rand_mat(M * N, 3); /* beta = 0.5 reads it */
        mw_gemm(p, ta, tb, M, N, K, 1.5f, A, ta ? M : K, B, tb ? K : N, 0.5f, C[t], N, seg);
        mw_pool_free(p);
    }
    ck_assert(memcmp(C[0], C[1], M * N * sizeof(float)) == 0);
    ck_assert(memcmp(C[0], C[2], M * N * sizeof(float)) == 0);
    float *C0 = rand_mat(M * N, 3);
    for (uint64_t i = 0; i < M; i++)
        for (uint64_t j = 0; j < N; j++) {
            double acc = 0;
            for (uint64_t k = 0; k < K; k++)
                acc += (double)(ta ? A[k * M + i] : A[i * K + k]) *
                       (tb ? B[j * K + k] : B[k * N + j]);
            const double want = 1.5 * acc + 0.5 * C0[i * N + j];
            ck_assert_msg(fabs(C[0][i * N + j] - want) <= 1e-4 * (1 + fabs(want)),
                          "C[%llu,%llu] %g vs %g", (unsigned long long)i, (unsigned long long)j,
                          (double)C[0][i * N + j], want);
        }
    /* one segment at a time gives the bits of all segments at once */
    float *Cs = rand_mat(M * N, 3);
    for (uint64_t r = 0; r < M; r += seg) {
        const uint64_t n = M - r < seg ? M - r : seg;
        mw_gemm(NULL, ta, tb, n, N, K, 1.5f, ta ? A + r : A + r * K, ta ? M : K, B, tb ? K : N,
                0.5f, Cs + r * N, N, seg);
    }
    ck_assert(memcmp(C[0], Cs, M * N * sizeof(float)) == 0);
    free(Cs);
    free(C0);
    for (unsigned t = 0; t < 3; t++) free(C[t]);
    free(A);
    free(B);
}
END_TEST

/* Xᵀ X over batches of whole segments = one pass, bit for bit, for any
 * thread count; and close to a double reference */
START_TEST(blas_gram)
{
    mw_blas_init();
    const uint64_t n = 520, seg = 301, nr = 3 * seg;
    float *X = rand_mat(nr * n, 4);
    float *H1 = malloc(n * n * sizeof(float)), *H2 = malloc(n * n * sizeof(float));
    struct mw_pool *p3 = pool_of(3);
    mw_gram_acc(NULL, n, nr, X, n, true, H1, seg);
    mw_sym_lower_from_upper(H1, n);
    mw_gram_acc(p3, n, seg, X, n, true, H2, seg);
    mw_gram_acc(p3, n, 2 * seg, X + seg * n, n, false, H2, seg);
    mw_sym_lower_from_upper(H2, n);
    ck_assert(memcmp(H1, H2, n * n * sizeof(float)) == 0);
    for (uint64_t i = 0; i < n; i += 7)
        for (uint64_t j = 0; j < n; j += 5) {
            double acc = 0;
            for (uint64_t r = 0; r < nr; r++) acc += (double)X[r * n + i] * X[r * n + j];
            ck_assert_msg(fabs(H1[i * n + j] - acc) <= 1e-3 * (1 + fabs(acc)), "H[%llu,%llu]",
                          (unsigned long long)i, (unsigned long long)j);
        }
    mw_pool_free(p3);
    free(H1);
    free(H2);
    free(X);
}
END_TEST

/* fn (mw_chol_lower or mw_tri_inv_lower) on a copy of A with a pool of
 * `threads`; the lower triangle (the result), upper part zeroed */
static float *lower_of(int (*fn)(struct mw_pool *, float *, uint64_t), const float *A, uint64_t n,
                       unsigned threads)
{
    struct mw_pool *p = pool_of(threads);
    float *L = malloc(n * n * sizeof(float));
    memcpy(L, A, n * n * sizeof(float));
    ck_assert_int_eq(fn(p, L, n), 0);
    for (uint64_t i = 0; i < n; i++)
        for (uint64_t j = i + 1; j < n; j++) L[i * n + j] = 0.0f;
    mw_pool_free(p);
    return L;
}

/* Cholesky and triangular inverse over several blocks: L Lᵀ = A and
 * L^-1 L = I within rounding, the same bits for 1 and 3 threads */
START_TEST(blas_chol_inv)
{
    mw_blas_init();
    const uint64_t n = 2 * MW_BLAS_NB + 37, nr = 3 * n;
    float *X = rand_mat(nr * n, 5);
    float *A = malloc(n * n * sizeof(float));
    mw_gram_acc(NULL, n, nr, X, n, true, A, 0);
    mw_sym_lower_from_upper(A, n);
    for (uint64_t i = 0; i < n; i++) A[i * n + i] += 1.0f;
    float *L[2] = {lower_of(mw_chol_lower, A, n, 1), lower_of(mw_chol_lower, A, n, 3)};
    ck_assert(memcmp(L[0], L[1], n * n * sizeof(float)) == 0);
    for (uint64_t i = 0; i < n; i += 3)
        for (uint64_t j = 0; j <= i; j += 2) {
            double acc = 0;
            for (uint64_t k = 0; k <= j; k++) acc += (double)L[0][i * n + k] * L[0][j * n + k];
            ck_assert_msg(fabs(acc - A[i * n + j]) <= 1e-3 * (1 + fabs(A[i * n + j])),
                          "LLt[%llu,%llu]", (unsigned long long)i, (unsigned long long)j);
        }
    float *Li[2] = {lower_of(mw_tri_inv_lower, L[0], n, 1),
                    lower_of(mw_tri_inv_lower, L[0], n, 3)};
    ck_assert(memcmp(Li[0], Li[1], n * n * sizeof(float)) == 0);
    for (uint64_t i = 0; i < n; i += 3)
        for (uint64_t j = 0; j <= i; j += 2) {
            double acc = 0;
            for (uint64_t k = j; k <= i; k++) acc += (double)Li[0][i * n + k] * L[0][k * n + j];
            ck_assert_msg(fabs(acc - (i == j)) <= 1e-3, "Li L[%llu,%llu] = %g",
                          (unsigned long long)i, (unsigned long long)j, acc);
        }
    /* not positive definite: the LAPACK info, not a crash */
    A[5 * n + 5] = -1e6f;
    ck_assert_int_gt(mw_chol_lower(NULL, A, n), 0);
    for (unsigned t = 0; t < 2; t++) {
        free(L[t]);
        free(Li[t]);
    }
    free(A);
    free(X);
}
END_TEST

static Suite *calib_suite(void)
{
    Suite *s = suite_create("calib");
    TCase *tc = tcase_create("mw_blas");
    tcase_set_timeout(tc, 30);
    tcase_add_loop_test(tc, blas_gemm, 0, 4);
    tcase_add_test(tc, blas_gram);
    tcase_add_test(tc, blas_chol_inv);
    suite_add_tcase(s, tc);

    tc = tcase_create("forward");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, forward_threads_and_callback_deterministic);
    tcase_add_test(tc, forward_noop_callback_and_gguf_source);
    tcase_add_test(tc, forward_layer_api);
    tcase_add_test(tc, forward_fold_invariance);
    tcase_add_test(tc, forward_change_propagates);
    tcase_add_test(tc, forward_errors);
    tcase_add_test(tc, forward_matches_runtime_logits);
    tcase_add_loop_test(tc, forward_fixtures_match_runtime, 0, 3);
    suite_add_tcase(s, tc);

    tc = tcase_create("files");
    tcase_set_timeout(tc, 30);
    tcase_add_test(tc, imatrix_write_read);
    tcase_add_test(tc, imatrix_write_mem);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    return run_suite(calib_suite());
}
