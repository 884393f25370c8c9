/* Unit tests for methods/methods.h:
 *  - GPTQ on a synthetic layer (correlated, unevenly scaled inputs) lowers
 *    the output error ||X Wᵀ - X Qᵀ||² below importance-weighted RTN
 *    (QUANT_MODE_BEST with imatrix diag(H), the same ggml grid) for every
 *    supported type; the blocks written decode to exactly the returned
 *    weights; bytes identical for 1 and 3 threads;
 *  - the same for act-order (static groups);
 *  - argument errors (unsupported type, bad row length);
 *  - AWQ: folding 1/s into the norm and s into the columns leaves the float
 *    outputs unchanged (float tolerance); the alpha search runs and picks
 *    a grid point;
 *  - quant_awq_fold in every stage (norms, v rows under GQA, up rows) of
 *    the real tinyllama-8m: inputs become x / s, block outputs unchanged;
 *  - quant_awq_fold_legal for each family's structure (llama, qwen2/3,
 *    gemma2/3, phi3/phi4-mini: all legal; uneven query groups: no v -> o;
 *    no gating activation: no up -> down). The families' real folds are
 *    checked on their fixtures by check_calib_family (calib_family.sh);
 *  - quant_methods_probe, the budget's output-KL probes, on tinyllama-8m;
 *  - learned rounding (quant_round_refine) from GPTQ's and from RTN's
 *    blocks, every supported type: the error it reports is the exact
 *    output error of the blocks it writes, lower than where it started
 *    (and lower with the sub-block scale passes than without for the
 *    k-quants); the blocks decode to the returned weights; bytes identical
 *    for 1 and 3 threads; a NaN in H or in the weights: the blocks come back
 *    unchanged, fell_back set, no non-finite value written. */
#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "gguf/gguf.h"
#include "quant/quant.h"
#include "methods/methods.h"
#include "quant/quant_alloc.h"

#include "check_common.h"

#define N_ROWS 1024 /* calibration rows */
#define N_IN 512
#define N_OUT 48

static uint64_t rng_next(uint64_t *s)
{
    *s ^= *s << 13;
    *s ^= *s >> 7;
    *s ^= *s << 17;
    return *s;
}
static float rng_gauss(uint64_t *s)
{
    double u1 = ((double)(rng_next(s) >> 11) + 0.5) / 9007199254740992.0;
    double u2 = ((double)(rng_next(s) >> 11) + 0.5) / 9007199254740992.0;
    return (float)(sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2));
}

/* X: low-rank-ish correlated inputs with per-channel scales and a few
 * outlier channels; H = Xᵀ X (double sums, rounded once). W gaussian. */
static void make_layer(float **W, float **H)
{
    uint64_t s = 0x9e3779b97f4a7c15ull;
    float *X = malloc(sizeof(float) * N_ROWS * N_IN);
    float *Z = malloc(sizeof(float) * N_ROWS * 32);
    float *M = malloc(sizeof(float) * 32 * N_IN);
    float *scale = malloc(sizeof(float) * N_IN);
    ck_assert(X && Z && M && scale);
    for (int i = 0; i < N_ROWS * 32; i++) Z[i] = rng_gauss(&s);
    for (int i = 0; i < 32 * N_IN; i++) M[i] = rng_gauss(&s);
    for (int j = 0; j < N_IN; j++) scale[j] = 0.2f + (float)(rng_next(&s) % 1000) / 500.0f;
    for (int j = 0; j < N_IN; j += 61) scale[j] *= 8.0f;
    for (int r = 0; r < N_ROWS; r++)
        for (int j = 0; j < N_IN; j++) {
            float v = 0.5f * rng_gauss(&s);
            for (int k = 0; k < 32; k++) v += Z[r * 32 + k] * M[k * N_IN + j] * 0.2f;
            X[(size_t)r * N_IN + j] = v * scale[j];
        }
    *H = malloc(sizeof(float) * N_IN * N_IN);
    *W = malloc(sizeof(float) * N_OUT * N_IN);
    ck_assert(*H && *W);
    for (int i = 0; i < N_IN; i++)
        for (int j = 0; j <= i; j++) {
            double a = 0;
            for (int r = 0; r < N_ROWS; r++)
                a += (double)X[(size_t)r * N_IN + i] * X[(size_t)r * N_IN + j];
            (*H)[i * N_IN + j] = (*H)[j * N_IN + i] = (float)a;
        }
    for (int i = 0; i < N_OUT * N_IN; i++) (*W)[i] = 0.05f * rng_gauss(&s);
    free(X);
    free(Z);
    free(M);
    free(scale);
}

static const uint32_t types[] = {GGUF_TYPE_Q4_0, GGUF_TYPE_Q8_0, GGUF_TYPE_Q3_K,
                                 GGUF_TYPE_Q4_K, GGUF_TYPE_Q5_K, GGUF_TYPE_Q6_K};

START_TEST(test_gptq_beats_rtn)
{
    const uint32_t t = types[_i];
    const struct gguf_type_info *ti = gguf_type_get(t);
    const struct quant_traits *tr = quant_traits_get(t);
    float *W, *H;
    make_layer(&W, &H);
    const size_t rb = (size_t)N_IN / ti->blck * ti->type_size;
    uint8_t *q_rtn = malloc(rb * N_OUT), *q1 = malloc(rb * N_OUT), *q3 = malloc(rb * N_OUT);
    float *deq = malloc(sizeof(float) * N_OUT * N_IN);
    float *w1 = malloc(sizeof(float) * N_OUT * N_IN), *w3 = malloc(sizeof(float) * N_OUT * N_IN);
    float *imp = malloc(sizeof(float) * N_IN);
    ck_assert(q_rtn && q1 && q3 && deq && w1 && w3 && imp);
    for (int j = 0; j < N_IN; j++) imp[j] = H[j * N_IN + j];
    struct mw_err err;
    ck_assert_int_eq(quant_rows_mode(t, QUANT_MODE_BEST, W, N_OUT, N_IN, imp, q_rtn, 1, &err),
                     MW_OK);
    tr->to_float(q_rtn, deq, (uint64_t)N_OUT * N_IN);
    const double e_rtn = quant_output_error(W, deq, N_OUT, N_IN, H);

    memcpy(w1, W, sizeof(float) * N_OUT * N_IN);
    memcpy(w3, W, sizeof(float) * N_OUT * N_IN);
    struct quant_gptq_opts o = {.n_threads = 1};
    ck_assert_int_eq(quant_gptq(t, w1, N_OUT, N_IN, H, &o, q1, &err), MW_OK);
    o.n_threads = 3;
    o.block = 0;
    ck_assert_int_eq(quant_gptq(t, w3, N_OUT, N_IN, H, &o, q3, &err), MW_OK);
    ck_assert(memcmp(q1, q3, rb * N_OUT) == 0);
    ck_assert(memcmp(w1, w3, sizeof(float) * N_OUT * N_IN) == 0);
    tr->to_float(q1, deq, (uint64_t)N_OUT * N_IN);
    ck_assert(memcmp(deq, w1, sizeof(float) * N_OUT * N_IN) == 0);
    const double e_gptq = quant_output_error(W, deq, N_OUT, N_IN, H);
    ck_assert_msg(e_gptq < 0.9 * e_rtn, "%s: GPTQ %.6g vs RTN %.6g", ti->name, e_gptq, e_rtn);

    /* act-order with static groups: same guarantees (decode = returned
     * weights, thread-independent bytes, below RTN) */
    memcpy(w1, W, sizeof(float) * N_OUT * N_IN);
    memcpy(w3, W, sizeof(float) * N_OUT * N_IN);
    o = (struct quant_gptq_opts){.act_order = true, .n_threads = 1};
    ck_assert_int_eq(quant_gptq(t, w1, N_OUT, N_IN, H, &o, q1, &err), MW_OK);
    o.n_threads = 3;
    ck_assert_int_eq(quant_gptq(t, w3, N_OUT, N_IN, H, &o, q3, &err), MW_OK);
    ck_assert(memcmp(q1, q3, rb * N_OUT) == 0);
    ck_assert(memcmp(w1, w3, sizeof(float) * N_OUT * N_IN) == 0);
    tr->to_float(q1, deq, (uint64_t)N_OUT * N_IN);
    ck_assert(memcmp(deq, w1, sizeof(float) * N_OUT * N_IN) == 0);
    const double e_act = quant_output_error(W, deq, N_OUT, N_IN, H);
    ck_assert_msg(e_act < 0.9 * e_rtn, "%s: GPTQ act-order %.6g vs RTN %.6g", ti->name, e_act,
                  e_rtn);
    fprintf(stderr, "%s: output error RTN %.6g GPTQ %.6g GPTQ act-order %.6g\n", ti->name, e_rtn,
            e_gptq, e_act);
    free(W);
    free(H);
    free(q_rtn);
    free(q1);
    free(q3);
    free(deq);
    free(w1);
    free(w3);
    free(imp);
}
END_TEST

START_TEST(test_gptq_errors)
{
    float w[64] = {0}, H[64 * 64] = {0};
    uint8_t out[256];
    struct mw_err err;
    ck_assert(!quant_gptq_supported(GGUF_TYPE_Q2_K));
    ck_assert_int_eq(quant_gptq(GGUF_TYPE_Q2_K, w, 1, 64, H, NULL, out, &err), MW_E_USAGE);
    ck_assert_int_eq(quant_gptq(GGUF_TYPE_Q4_K, w, 1, 64, H, NULL, out, &err), MW_E_USAGE);
    struct quant_gptq_opts o = {.act_order = true};
    ck_assert_int_eq(quant_gptq(GGUF_TYPE_Q4_K, w, 1, 64, H, &o, out, &err), MW_E_USAGE);
    /* all-zero H (dead inputs): quantized without compensation, no error */
    ck_assert_int_eq(quant_gptq(GGUF_TYPE_Q4_0, w, 1, 64, H, NULL, out, &err), MW_OK);
}
END_TEST

START_TEST(test_awq_fold)
{
    float *W, *H;
    make_layer(&W, &H);
    uint64_t st = 12345;
    enum { T = 64 };
    float *x = malloc(sizeof(float) * T * N_IN), *g = malloc(sizeof(float) * N_IN);
    float *s = malloc(sizeof(float) * N_IN), *W2 = malloc(sizeof(float) * N_OUT * N_IN);
    double *ma = calloc(N_IN, sizeof(double));
    ck_assert(x && g && s && W2 && ma);
    for (int j = 0; j < N_IN; j++) g[j] = 0.5f + (float)(rng_next(&st) % 100) / 50.0f;
    for (int i = 0; i < T * N_IN; i++) x[i] = rng_gauss(&st) * (1 + (i % N_IN) % 7);
    for (int r = 0; r < T; r++)
        for (int j = 0; j < N_IN; j++) ma[j] += fabs(x[r * N_IN + j] * g[j]) / T;
    quant_awq_scales(ma, N_IN, 0.5f, s);
    for (int r = 0; r < N_OUT; r++)
        for (int j = 0; j < N_IN; j++) W2[r * N_IN + j] = W[r * N_IN + j] * s[j];
    double maxd = 0, maxy = 0;
    for (int r = 0; r < T; r++)
        for (int o = 0; o < N_OUT; o++) {
            double y1 = 0, y2 = 0;
            for (int j = 0; j < N_IN; j++) {
                y1 += (double)(x[r * N_IN + j] * g[j]) * W[o * N_IN + j];
                y2 += (double)(x[r * N_IN + j] * (g[j] / s[j])) * W2[o * N_IN + j];
            }
            maxd = fmax(maxd, fabs(y1 - y2));
            maxy = fmax(maxy, fabs(y1));
        }
    ck_assert_msg(maxd <= 1e-5 * maxy, "fold changed outputs: %g of %g", maxd, maxy);

    /* the search: a grid point in [0, 1] */
    float *imp = malloc(sizeof(float) * N_IN);
    ck_assert(imp);
    for (int j = 0; j < N_IN; j++) imp[j] = H[j * N_IN + j];
    struct quant_awq_group G = {.n_in = N_IN, .n_w = 1, .w = {W}, .n_out = {N_OUT},
                                .type = {GGUF_TYPE_Q4_K}, .mean_abs = ma, .imp = imp, .H = H,
                                .n_grid = 4, .n_threads = 2};
    float alpha = -1;
    struct mw_err err;
    ck_assert_int_eq(quant_awq_group(&G, &alpha, &err), MW_OK);
    ck_assert(alpha == 0.0f || alpha == 0.25f || alpha == 0.5f || alpha == 0.75f || alpha == 1.0f);
    free(imp);
    free(W);
    free(H);
    free(x);
    free(g);
    free(s);
    free(W2);
    free(ma);
}
END_TEST


/* quant_awq_fold on the real tinyllama-8m (8 q heads, 4 kv heads): in every
 * stage of every layer, fold random scales (tied across the q heads of a
 * kv head for ATTN_OUT), then the group's input must be the old one / s
 * (so the fold really moved the producer: norm, v rows or up rows) and the
 * block's output the same up to float rounding. */
struct fold_ud {
    const struct rt_hparams *hp;
    double worst_out, worst_in;
    uint64_t rng;
    int folds;
};

static uint64_t out_dim(const struct rt_hparams *hp, enum calib_group g)
{
    return g == CALIB_G_ATTN_IN ? (uint64_t)hp->n_head * hp->head_dim
           : g == CALIB_G_FFN_IN ? hp->n_ff
                                 : hp->n_embd;
}

static enum mw_status fold_cb(void *ud, struct calib_layer *ly, enum calib_group g,
                              struct mw_err *err)
{
    struct fold_ud *f = ud;
    const struct rt_hparams *hp = f->hp;
    const uint64_t rows = calib_layer_n_rows(ly), n_in = calib_layer_group_n_in(ly, g);
    const uint64_t nout = out_dim(hp, g);
    float *o1 = malloc(sizeof(float) * rows * nout), *o2 = malloc(sizeof(float) * rows * nout);
    float *x1 = malloc(sizeof(float) * rows * n_in), *sc = malloc(sizeof(float) * n_in);
    ck_assert(o1 && o2 && x1 && sc);
    const float *x;
    ck_assert_int_eq(calib_layer_input(ly, g, 0, rows, &x, err), MW_OK);
    memcpy(x1, x, sizeof(float) * rows * n_in);
    ck_assert_int_eq(calib_layer_forward(ly, g, 0, calib_layer_n_samples(ly), o1, err), MW_OK);
    const uint32_t grp = hp->n_head / hp->n_head_kv, hd = hp->head_dim;
    for (uint64_t j = 0; j < n_in; j++) {
        uint64_t key = j;
        if (g == CALIB_G_ATTN_OUT) key = (j / hd) / grp * hd + j % hd; /* kv head, dim */
        uint64_t r = f->rng ^ (key * 0x9E3779B97F4A7C15ull);
        sc[j] = 0.25f + (float)(rng_next(&r) % 1000) / 270.0f; /* 0.25 .. 4 */
    }
    ck_assert_int_eq(quant_awq_fold(ly, g, sc, grp, hd, err), MW_OK);
    ck_assert_int_eq(calib_layer_input(ly, g, 0, rows, &x, err), MW_OK);
    double dmax = 0, xmax = 0;
    for (uint64_t r = 0; r < rows; r++)
        for (uint64_t j = 0; j < n_in; j++) {
            const double want = x1[r * n_in + j] / sc[j];
            dmax = fmax(dmax, fabs(x[r * n_in + j] - want));
            xmax = fmax(xmax, fabs(want));
        }
    f->worst_in = fmax(f->worst_in, dmax / xmax);
    ck_assert_int_eq(calib_layer_forward(ly, g, 0, calib_layer_n_samples(ly), o2, err), MW_OK);
    dmax = 0;
    xmax = 0;
    for (uint64_t i = 0; i < rows * nout; i++) {
        dmax = fmax(dmax, fabs((double)o1[i] - o2[i]));
        xmax = fmax(xmax, fabs((double)o1[i]));
    }
    f->worst_out = fmax(f->worst_out, dmax / xmax);
    f->folds++;
    free(o1);
    free(o2);
    free(x1);
    free(sc);
    return MW_OK;
}

START_TEST(test_awq_fold_model)
{
    struct mw_err err;
    struct calib_model *m = NULL;
    ck_assert_int_eq(calib_model_open(MW_DATASETS_DIR "/reference/tinyllama-8m.llamacpp-f16.gguf",
                                      &m, &err),
                     MW_OK);
    const struct rt_hparams *hp = calib_model_hparams(m);
    ck_assert_uint_gt(hp->n_head, hp->n_head_kv); /* GQA is exercised */
    enum { NS = 2, NP = 24 };
    int32_t tok[NS * NP];
    uint64_t r = 77;
    for (int i = 0; i < NS * NP; i++) tok[i] = (int32_t)(rng_next(&r) % hp->n_vocab);
    tok[0] = tok[NP] = 1;
    struct calib_samples *smp = NULL;
    ck_assert_int_eq(calib_samples_from_tokens(tok, NS, NP, &smp, &err), MW_OK);
    struct fold_ud f = {.hp = hp, .rng = 4242};
    struct calib_run_opts o = {.n_threads = 2, .on_group = fold_cb, .on_group_ud = &f};
    struct calib_stats *st = NULL;
    ck_assert_int_eq(calib_run(m, smp, &o, &st, &err), MW_OK);
    ck_assert_int_eq(f.folds, 4 * (int)hp->n_layer);
    ck_assert_msg(f.worst_in < 1e-5, "group input is not x / s: rel %g", f.worst_in);
    ck_assert_msg(f.worst_out < 1e-4, "fold changed a block's output: rel %g", f.worst_out);
    fprintf(stderr, "AWQ folds on tinyllama-8m: input rel err %.3g, output rel err %.3g\n",
            f.worst_in, f.worst_out);
    calib_stats_free(st);
    calib_samples_free(smp);
    calib_model_close(m);
}
END_TEST

/* quant_awq_fold_legal per family, from the structure alone (rt_hparams as
 * the runtime reads each family's GGUF): every fold is legal for llama,
 * qwen2/3, gemma2/3 and phi3 (the shapes of their real checkpoints);
 * v -> o is not when the query heads do not group evenly over the kv heads;
 * up -> down only for act(gate) * up. */
START_TEST(test_awq_fold_legal_families)
{
    struct fam {
        const char *name;
        struct rt_hparams hp;
    } fams[] = {
        {"llama", {.arch = RT_ARCH_LLAMA, .n_head = 32, .n_head_kv = 8, .head_dim = 128}},
        {"qwen2", {.arch = RT_ARCH_QWEN2, .n_head = 14, .n_head_kv = 2, .head_dim = 64}},
        {"qwen3", {.arch = RT_ARCH_QWEN3, .n_head = 16, .n_head_kv = 8, .head_dim = 128,
                   .qk_norm = true}},
        {"gemma2", {.arch = RT_ARCH_GEMMA2, .n_head = 8, .n_head_kv = 4, .head_dim = 256,
                    .post_norms = true, .embd_scale = true, .act = RT_ACT_GELU_TANH,
                    .attn_softcap = 50, .final_softcap = 30, .n_swa = 4096, .swa_pattern = 2}},
        {"gemma3", {.arch = RT_ARCH_GEMMA3, .n_head = 4, .n_head_kv = 1, .head_dim = 256,
                    .qk_norm = true, .post_norms = true, .embd_scale = true,
                    .act = RT_ACT_GELU_TANH, .n_swa = 512, .swa_pattern = 6}},
        {"phi3", {.arch = RT_ARCH_PHI3, .n_head = 32, .n_head_kv = 32, .head_dim = 96,
                  .fused_qkv = true, .fused_gate_up = true}},
        {"phi4-mini", {.arch = RT_ARCH_PHI3, .n_head = 24, .n_head_kv = 8, .head_dim = 128,
                       .fused_qkv = true, .fused_gate_up = true}},
    };
    char why[200];
    for (size_t f = 0; f < sizeof fams / sizeof fams[0]; f++)
        for (int g = 0; g < CALIB_G_COUNT; g++) {
            why[0] = 0;
            ck_assert_msg(quant_awq_fold_legal(&fams[f].hp, (enum calib_group)g, why, sizeof why),
                          "%s: group %d: %s", fams[f].name, g, why);
        }
    struct rt_hparams odd = fams[2].hp;
    odd.n_head = 12, odd.n_head_kv = 8; /* 1.5 query heads per kv head */
    ck_assert(!quant_awq_fold_legal(&odd, CALIB_G_ATTN_OUT, why, sizeof why));
    ck_assert_ptr_nonnull(strstr(why, "n_head_kv"));
    ck_assert(quant_awq_fold_legal(&odd, CALIB_G_ATTN_IN, NULL, 0));
    ck_assert(quant_awq_fold_legal(&odd, CALIB_G_FFN_DOWN, NULL, 0));
    struct rt_hparams noact = fams[4].hp;
    noact.act = (enum rt_act)7; /* not a gating activation */
    ck_assert(!quant_awq_fold_legal(&noact, CALIB_G_FFN_DOWN, why, sizeof why));
    ck_assert(quant_awq_fold_legal(&noact, CALIB_G_FFN_IN, NULL, 0));
    ck_assert(!quant_awq_fold_legal(&noact, CALIB_G_COUNT, NULL, 0));
}
END_TEST

/* quant_methods_probe (the budget's end-to-end sensitivity) on the real
 * tinyllama-8m and calib.txt: every probe is a positive, finite mean KL
 * divergence; the output matrix moves the output more than layer 0's
 * down projection, which moves it more than layer 7's v; coarser types
 * move it more (Q2_K > Q3_K > Q4_K > Q8_0); a name no layer holds is not
 * measured (-1); 1 and 3 threads give the same bits; grouped probes
 * (max_runs below the item count) share one divergence in proportion to
 * the items' losses. */
static struct quant_budget_probe probe_item(const struct quant_source *src, const char *name,
                                            uint32_t type, double loss)
{
    for (uint64_t i = 0; i < src->n_tensors; i++)
        if (strcmp(src->tensors[i].name, name) == 0)
            return (struct quant_budget_probe){.t = &src->tensors[i], .src_index = i,
                                               .type = type, .loss = loss, .kld = -1};
    ck_abort_msg("no tensor %s", name);
    return (struct quant_budget_probe){0};
}

START_TEST(test_probe_model)
{
    const char *path = MW_DATASETS_DIR "/reference/tinyllama-8m.llamacpp-f16.gguf";
    struct mw_err err;
    struct gguf_file *f = NULL;
    ck_assert_int_eq(gguf_open(path, 0, &f, &err), MW_OK);
    struct quant_source src;
    ck_assert_int_eq(quant_source_gguf(f, &src, &err), MW_OK);
    struct quant_methods_opts mo = {.method = QUANT_METHOD_GPTQ, .model_path = path,
                                    .corpus_path = MW_DATASETS_DIR "/corpora/calib.txt",
                                    .samples = {.n_samples = 4, .seq_len = 64}, .n_threads = 3};
    struct quant_methods_probe_ctx cx = {.mo = &mo, .src = &src};
    const uint32_t q3 = GGUF_TYPE_Q3_K;
    struct quant_budget_probe p[5] = {
        probe_item(&src, "output.weight", q3, 1), probe_item(&src, "token_embd.weight", q3, 1),
        probe_item(&src, "blk.0.ffn_down.weight", q3, 1),
        probe_item(&src, "blk.7.attn_v.weight", q3, 1), probe_item(&src, "blk.7.attn_v.weight", q3, 1)};
    struct quant_tensor_desc fake = *p[4].t;
    fake.name = "blk.7.not_in_a_layer.weight";
    p[4].t = &fake;
    ck_assert_msg(quant_methods_probe(&cx, p, 5, &err) == MW_OK, "%s", err.msg);
    for (int k = 0; k < 4; k++)
        ck_assert_msg(p[k].kld > 0 && isfinite(p[k].kld), "%s: %g", p[k].t->name, p[k].kld);
    ck_assert(p[4].kld == -1);
    ck_assert_msg(p[0].kld > p[2].kld && p[2].kld > p[3].kld, "%g %g %g", p[0].kld, p[2].kld,
                  p[3].kld);
    fprintf(stderr, "probes at Q3_K: output %.3e token_embd %.3e blk.0.ffn_down %.3e "
                    "blk.7.attn_v %.3e\n", p[0].kld, p[1].kld, p[2].kld, p[3].kld);
    struct quant_budget_probe q[5];
    memcpy(q, p, sizeof q);
    for (int k = 0; k < 5; k++) q[k].kld = -1;
    mo.n_threads = 1;
    ck_assert_int_eq(quant_methods_probe(&cx, q, 5, &err), MW_OK);
    for (int k = 0; k < 5; k++)
        ck_assert_msg(memcmp(&p[k].kld, &q[k].kld, sizeof(double)) == 0, "%s: %.17g vs %.17g",
                      p[k].t->name, p[k].kld, q[k].kld);
    /* coarser types move the output more */
    const uint32_t ty[4] = {GGUF_TYPE_Q2_K, GGUF_TYPE_Q3_K, GGUF_TYPE_Q4_K, GGUF_TYPE_Q8_0};
    for (int k = 0; k < 4; k++) q[k] = probe_item(&src, "blk.0.ffn_down.weight", ty[k], 1);
    ck_assert_int_eq(quant_methods_probe(&cx, q, 4, &err), MW_OK);
    ck_assert_msg(q[0].kld > q[1].kld && q[1].kld > q[2].kld && q[2].kld > q[3].kld &&
                      q[3].kld > 0,
                  "%g %g %g %g", q[0].kld, q[1].kld, q[2].kld, q[3].kld);
    ck_assert(memcmp(&q[1].kld, &p[2].kld, sizeof(double)) == 0); /* the same probe */
    /* grouped: one kind in runs of consecutive layers */
    const char *g[4] = {"blk.1.ffn_up.weight", "blk.2.ffn_up.weight", "blk.5.ffn_up.weight",
                        "blk.6.ffn_up.weight"};
    for (int k = 0; k < 4; k++) q[k] = probe_item(&src, g[k], q3, k == 1 ? 3 : 1);
    cx.max_runs = 2;
    ck_assert_int_eq(quant_methods_probe(&cx, q, 4, &err), MW_OK);
    ck_assert(q[0].kld > 0 && q[2].kld > 0);
    ck_assert_double_eq_tol(q[1].kld, 3 * q[0].kld, 1e-12 * q[1].kld);
    ck_assert(q[2].kld == q[3].kld);
    quant_source_gguf_free(&src);
    gguf_close(f);
}
END_TEST


START_TEST(test_round_refine)
{
    const uint32_t t = types[_i];
    const struct gguf_type_info *ti = gguf_type_get(t);
    const struct quant_traits *tr = quant_traits_get(t);
    float *W, *H;
    make_layer(&W, &H);
    const size_t rb = (size_t)N_IN / ti->blck * ti->type_size, nw = (size_t)N_OUT * N_IN;
    uint8_t *q0 = malloc(rb * N_OUT), *q1 = malloc(rb * N_OUT), *q3 = malloc(rb * N_OUT);
    float *w1 = malloc(sizeof(float) * nw), *w3 = malloc(sizeof(float) * nw);
    float *deq = malloc(sizeof(float) * nw), *imp = malloc(sizeof(float) * N_IN);
    ck_assert(q0 && q1 && q3 && w1 && w3 && deq && imp);
    struct mw_err err;
    for (int start = 0; start < 2; start++) {
        /* the starting blocks: GPTQ's (start 0) or importance-weighted RTN's */
        memcpy(w1, W, sizeof(float) * nw);
        if (start == 0) {
            struct quant_gptq_opts o = {.n_threads = 1};
            ck_assert_int_eq(quant_gptq(t, w1, N_OUT, N_IN, H, &o, q0, &err), MW_OK);
        } else {
            for (int j = 0; j < N_IN; j++) imp[j] = H[j * N_IN + j];
            ck_assert_int_eq(quant_rows_mode(t, QUANT_MODE_BEST, W, N_OUT, N_IN, imp, q0, 1, &err),
                             MW_OK);
        }
        tr->to_float(q0, deq, nw);
        const double e0 = quant_output_error(W, deq, N_OUT, N_IN, H);
        double e_levels = 0;
        for (int sc = 0; sc < 2; sc++) { /* sc 0: levels only; 1: with the scale passes */
            struct quant_round_opts ro = {.n_threads = 1, .no_scales = sc == 0};
            struct quant_round_stats rs1, rs3;
            memcpy(q1, q0, rb * N_OUT);
            memcpy(q3, q0, rb * N_OUT);
            ck_assert_int_eq(quant_round_refine(t, W, N_OUT, N_IN, H, &ro, q1, w1, &rs1, &err),
                             MW_OK);
            ro.n_threads = 3;
            ck_assert_int_eq(quant_round_refine(t, W, N_OUT, N_IN, H, &ro, q3, w3, &rs3, &err),
                             MW_OK);
            ck_assert(memcmp(q1, q3, rb * N_OUT) == 0);
            ck_assert(memcmp(w1, w3, sizeof(float) * nw) == 0);
            tr->to_float(q1, deq, nw);
            ck_assert(memcmp(deq, w1, sizeof(float) * nw) == 0);
            const double e1 = quant_output_error(W, deq, N_OUT, N_IN, H);
            ck_assert(!rs1.fell_back);
            ck_assert(rs1.flips > 0);
            ck_assert_msg(fabs(rs1.before - e0) <= 1e-3 * e0, "before %.9g exact %.9g",
                          rs1.before, e0);
            ck_assert_msg(fabs(rs1.after - e1) <= 1e-3 * e1, "after %.9g exact %.9g", rs1.after,
                          e1);
            /* from GPTQ a few percent lower; from RTN far lower */
            ck_assert_msg(e1 < (start == 0 ? 0.99 : 0.8) * e0, "%s from %s: %.6g -> %.6g",
                          ti->name, start ? "RTN" : "GPTQ", e0, e1);
            /* the sub-block scale passes: never worse; Q3_K's and Q6_K's
             * scales move here (GPTQ's Q4_K/Q5_K scales and mins are left:
             * one step of either raises the error on this layer) */
            if (sc == 0) e_levels = e1;
            else if (t == GGUF_TYPE_Q3_K || t == GGUF_TYPE_Q6_K)
                ck_assert_msg(e1 < e_levels, "%s: with scales %.6g, levels only %.6g", ti->name,
                              e1, e_levels);
            else
                ck_assert_msg(e1 <= e_levels * (1 + 1e-6), "%s: with scales %.6g, levels only "
                              "%.6g", ti->name, e1, e_levels);
            fprintf(stderr, "%s: learned rounding from %s: %.6g -> %.6g (%llu moves, %u sweeps)\n",
                    ti->name, start ? "RTN" : "GPTQ", e0, e1, (unsigned long long)rs1.flips,
                    rs1.sweeps);
        }
    }
    /* divergence: a NaN in H (or in the weights) — the blocks it came with */
    for (int k = 0; k < 2; k++) {
        float *Hb = k == 0 ? malloc(sizeof(float) * N_IN * N_IN) : H;
        float *Wb = k == 1 ? malloc(sizeof(float) * nw) : W;
        ck_assert(Hb && Wb);
        if (k == 0) {
            memcpy(Hb, H, sizeof(float) * N_IN * N_IN);
            Hb[5 * N_IN + 7] = Hb[7 * N_IN + 5] = NAN;
        } else {
            memcpy(Wb, W, sizeof(float) * nw);
            Wb[3 * N_IN + 100] = INFINITY;
        }
        struct quant_round_stats rs;
        memcpy(q1, q0, rb * N_OUT);
        ck_assert_int_eq(quant_round_refine(t, Wb, N_OUT, N_IN, Hb, NULL, q1, w1, &rs, &err),
                         MW_OK);
        ck_assert(rs.fell_back);
        ck_assert(memcmp(q1, q0, rb * N_OUT) == 0);
        for (size_t i = 0; i < nw; i++) ck_assert(isfinite(w1[i]));
        if (k == 0) free(Hb);
        else free(Wb);
    }
    free(W);
    free(H);
    free(q0);
    free(q1);
    free(q3);
    free(w1);
    free(w3);
    free(deq);
    free(imp);
}
END_TEST

START_TEST(test_round_errors)
{
    float w[64] = {0}, H[64 * 64] = {0}, v[64];
    uint8_t out[256] = {0};
    struct mw_err err;
    ck_assert_int_eq(quant_round_refine(GGUF_TYPE_Q2_K, w, 1, 256, H, NULL, out, v, NULL, &err),
                     MW_E_USAGE);
    ck_assert_int_eq(quant_round_refine(GGUF_TYPE_Q4_K, w, 1, 64, H, NULL, out, v, NULL, &err),
                     MW_E_USAGE);
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("quant_methods");
    TCase *tc = tcase_create("gptq");
    tcase_set_timeout(tc, 60);
    tcase_add_loop_test(tc, test_gptq_beats_rtn, 0, (int)(sizeof types / sizeof types[0]));
    tcase_add_test(tc, test_gptq_errors);
    tcase_add_loop_test(tc, test_round_refine, 0, (int)(sizeof types / sizeof types[0]));
    tcase_add_test(tc, test_round_errors);
    tcase_add_test(tc, test_awq_fold);
    tcase_add_test(tc, test_awq_fold_model);
    tcase_add_test(tc, test_awq_fold_legal_families);
    suite_add_tcase(s, tc);
    TCase *tp = tcase_create("probe");
    tcase_set_timeout(tp, 300);
    tcase_add_test(tp, test_probe_model);
    suite_add_tcase(s, tp);
    return s;
}


int main(void)
{
    return run_suite(suite());
}
