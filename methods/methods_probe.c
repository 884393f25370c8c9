/*
 * methods/methods_probe.c — the probes of a budget under --corpus (see
 * quant_alloc.h "end-to-end sensitivity"): the model's output KL divergence
 * to the unquantized model when one tensor (or one group of tensors, on a
 * model with more than QUANT_PROBE_MAX_RUNS of them) is quantized to its
 * probe type, on the first QUANT_PROBE_TOKENS positions of the calibration
 * samples, through calib's own f32 forward.
 *
 * One base run keeps the hidden states entering each layer (every k-th
 * layer when they would exceed QUANT_PROBE_HIDDEN_BYTES) and the final
 * normalized hidden states Y0. A probe of a layer's tensor restarts the
 * forward at the nearest kept layer (calib_run's first_layer /
 * load_hidden), replaces the tensor's rows by their quantized-then-
 * dequantized values in its stage's callback (quant_rows with the plan's
 * importance: exactly what the file would hold under that type, before
 * any method), and at the last layer compares its logits with Y0's, row
 * by row. output.weight needs no forward (Y0 against the perturbed
 * matrix); token_embd perturbs the embedding rows entering layer 0 (and the
 * output matrix too when it is tied).
 *
 * Determinism: calib_run's results do not depend on n_threads; the logits
 * are mw_gemm products (fixed tiles); each row's divergence is a sum in
 * double in vocabulary order and the rows are summed in order.
 *
 * Library rules: nothing here prints; errors through struct mw_err.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "calib/mw_blas.h"
#include "core/mw_pool.h"
#include "methods/methods.h"
#include "quant/quant_alloc.h"

#define PROBE_ROWS 64 /* rows of logits per step */

struct probe {
    const struct quant_methods_opts *mo;
    const struct quant_source *src;
    struct quant_budget_probe *p;
    const struct rt_hparams *hp;
    struct mw_pool *pool;
    unsigned nt;
    uint64_t T, E, V;
    float *onorm;  /* (E) output_norm */
    float *wout;   /* (V, E) the output matrix (token_embd when tied) */
    float *woutq;  /* the perturbed output matrix of the current probe, or NULL */
    float *y0;     /* (T, E) base: rmsnorm(final hidden) * output_norm */
    float **hid;   /* [n_layer] (T, E) the hidden states entering layer l, or NULL */
    float *h0q;    /* the perturbed layer-0 input of the current probe, or NULL */
    float *l0, *l1, *yb; /* (PROBE_ROWS, V) x 2, (PROBE_ROWS, E) */
    double *rowkl;       /* (PROBE_ROWS) */
    /* the current run */
    bool base;
    uint32_t first_layer;
    const uint64_t *mem; /* members perturbed in it (indices into p) */
    uint64_t n_mem;
    uint64_t *hits;      /* (n) how many views of each item were perturbed */
    double kl;           /* mean KL divergence of the run */
};

/* Layer of "blk.N.", or -1. */
static int64_t layer_of(const char *name)
{
    if (strncmp(name, "blk.", 4) != 0) return -1;
    char *end;
    const unsigned long v = strtoul(name + 4, &end, 10);
    return end != name + 4 && *end == '.' ? (int64_t)v : -1;
}

static int64_t find_src(const struct quant_source *src, const char *name)
{
    for (uint64_t i = 0; i < src->n_tensors; i++)
        if (strcmp(src->tensors[i].name, name) == 0) return (int64_t)i;
    return -1;
}

/* x (rows x n) <- dequant(quant_t(x)) with importance imp (n floats or NULL). */
static enum mw_status perturb(uint32_t t, float *x, uint64_t rows, uint64_t n, const float *imp,
                              unsigned nt, struct mw_err *err)
{
    const struct gguf_type_info *ti = gguf_type_get(t);
    const struct quant_traits *qt = quant_traits_get(t);
    if (!ti || !qt || !qt->to_float || n % ti->blck)
        return MW_FAIL(err, MW_E_USAGE, MW_ERR_OFF_NONE, "probe type %u cannot hold rows of %llu",
                       t, (unsigned long long)n);
    const uint64_t rb = n / ti->blck * ti->type_size;
    if (rows && rb > UINT64_MAX / rows)
        return MW_FAIL(err, MW_E_NOMEM, MW_ERR_OFF_NONE, "probe buffer size overflows");
    uint8_t *q = malloc((rows * rb) != 0 ? (size_t)(rows * rb) : 1);
    if (!q) return MW_FAIL(err, MW_E_NOMEM, MW_ERR_OFF_NONE, "out of memory (%llu bytes)",
                           (unsigned long long)(rows * rb));
    enum mw_status s = quant_rows(t, x, rows, n, imp, q, nt, err);
    if (s == MW_OK)
        for (uint64_t r = 0; r < rows; r++) qt->to_float(q + r * rb, x + r * n, n);
    free(q);
    return s;
}

/* y (nr x E) <- rmsnorm(h) * output_norm, as the runtime does. */
static void final_norm(const struct probe *P, const float *h, uint64_t nr, float *y)
{
    for (uint64_t r = 0; r < nr; r++) {
        const float *x = h + r * P->E;
        double ss = 0;
        for (uint64_t j = 0; j < P->E; j++) ss += (double)x[j] * x[j];
        const float sc = (float)(1.0 / sqrt(ss / (double)P->E + (double)P->hp->rms_eps));
        for (uint64_t j = 0; j < P->E; j++) y[r * P->E + j] = x[j] * sc * P->onorm[j];
    }
}

struct klrows {
    const struct probe *P;
    uint64_t nr;
};

/* KL(softmax(l0) || softmax(l1)) of each row, in double, in vocabulary order. */
static void kl_task(void *arg, unsigned ith, unsigned nth)
{
    const struct klrows *K = arg;
    const struct probe *P = K->P;
    const float cap = P->hp->final_softcap;
    for (uint64_t r = ith; r < K->nr; r += nth) {
        float *a = P->l0 + r * P->V, *b = P->l1 + r * P->V;
        if (cap > 0)
            for (uint64_t v = 0; v < P->V; v++)
                a[v] = cap * tanhf(a[v] / cap), b[v] = cap * tanhf(b[v] / cap);
        double ma = a[0], mb = b[0];
        for (uint64_t v = 1; v < P->V; v++) {
            if (a[v] > ma) ma = a[v];
            if (b[v] > mb) mb = b[v];
        }
        double sa = 0, sb = 0, acc = 0;
        for (uint64_t v = 0; v < P->V; v++) {
            const double ea = exp((double)a[v] - ma);
            sa += ea;
            sb += exp((double)b[v] - mb);
            acc += ea * ((double)a[v] - (double)b[v]);
        }
        /* Σ p_a (a - b) - lse(a) + lse(b) */
        const double kl = acc / sa - (ma + log(sa)) + (mb + log(sb));
        P->rowkl[r] = kl > 0 ? kl : 0;
    }
}

/* Mean KL divergence over all T rows between the base logits (Y0 W^T) and
 * those of y (T x E, or Y0 when NULL) under the output matrix w. */
static double kl_all(struct probe *P, const float *h_final, const float *w)
{
    double sum = 0;
    for (uint64_t r0 = 0; r0 < P->T; r0 += PROBE_ROWS) {
        const uint64_t nr = P->T - r0 < PROBE_ROWS ? P->T - r0 : PROBE_ROWS;
        const float *y = P->y0 + r0 * P->E;
        if (h_final) {
            final_norm(P, h_final + r0 * P->E, nr, P->yb);
            y = P->yb;
        }
        mw_gemm(P->pool, false, true, nr, P->V, P->E, 1.0f, P->y0 + r0 * P->E, P->E, P->wout,
                P->E, 0.0f, P->l0, P->V, 0);
        mw_gemm(P->pool, false, true, nr, P->V, P->E, 1.0f, y, P->E, w, P->E, 0.0f, P->l1, P->V,
                0);
        struct klrows K = {.P = P, .nr = nr};
        if (P->pool)
            mw_pool_run(P->pool, kl_task, &K);
        else
            kl_task(&K, 0, 1);
        for (uint64_t r = 0; r < nr; r++) sum += P->rowkl[r];
    }
    return P->T ? sum / (double)P->T : 0;
}

static enum mw_status on_group(void *ud, struct calib_layer *ly, enum calib_group g,
                               struct mw_err *err)
{
    struct probe *P = ud;
    const uint32_t il = calib_layer_index(ly);
    enum mw_status s;
    if (P->base) {
        if (g != CALIB_G_ATTN_IN || !P->hid[il]) return MW_OK;
        const uint64_t step = calib_layer_max_rows(ly);
        for (uint64_t r0 = 0; r0 < P->T; r0 += step) {
            const uint64_t nr = P->T - r0 < step ? P->T - r0 : step;
            const float *x;
            if ((s = calib_layer_hidden(ly, r0, nr, &x, err)) != MW_OK) return s;
            memcpy(P->hid[il] + r0 * P->E, x, (size_t)(nr * P->E) * sizeof(float));
        }
        return MW_OK;
    }
    for (uint64_t k = 0; k < P->n_mem; k++) {
        const struct quant_budget_probe *q = &P->p[P->mem[k]];
        if (layer_of(q->t->name) != (int64_t)il) continue;
        for (int w = 0; w < CALIB_W_COUNT; w++) {
            if (calib_wkind_group((enum calib_wkind)w) != g) continue;
            struct calib_weight cw;
            struct mw_err e2;
            mw_err_clear(&e2);
            if (calib_layer_weight(ly, (enum calib_wkind)w, false, &cw, &e2) != MW_OK) continue;
            if (strcmp(cw.name, q->t->name) != 0) continue;
            if ((s = calib_layer_weight(ly, (enum calib_wkind)w, true, &cw, err)) != MW_OK)
                return s;
            const float *imp = q->imatrix;
            const int32_t ex = calib_layer_expert(ly);
            if (imp && ex >= 0 && q->t->ne[2] > 1) imp += (uint64_t)ex * cw.n_in;
            if ((s = perturb(q->type, cw.w, cw.n_out, cw.n_in, imp, P->nt, err)) != MW_OK) {
                mw_err_set_where(err, "probe of tensor '%s'", q->t->name);
                return s;
            }
            P->hits[P->mem[k]]++;
        }
    }
    return MW_OK;
}

static enum mw_status on_layer(void *ud, struct calib_layer *ly, struct mw_err *err)
{
    struct probe *P = ud;
    if (calib_layer_index(ly) + 1 != P->hp->n_layer) return MW_OK;
    float *h = malloc((size_t)(P->T * P->E) * sizeof(float));
    if (!h) return MW_FAIL(err, MW_E_NOMEM, MW_ERR_OFF_NONE, "out of memory");
    const uint64_t step = calib_layer_max_rows(ly);
    enum mw_status s = MW_OK;
    for (uint64_t r0 = 0; r0 < P->T && s == MW_OK; r0 += step) {
        const uint64_t nr = P->T - r0 < step ? P->T - r0 : step;
        const float *x;
        if ((s = calib_layer_hidden(ly, r0, nr, &x, err)) == MW_OK)
            memcpy(h + r0 * P->E, x, (size_t)(nr * P->E) * sizeof(float));
    }
    if (s == MW_OK) {
        if (P->base)
            final_norm(P, h, P->T, P->y0);
        else
            P->kl = kl_all(P, h, P->woutq ? P->woutq : P->wout);
    }
    free(h);
    return s;
}

static enum mw_status load_hidden(void *ud, uint64_t row0, uint64_t n_rows, float *dst,
                                  struct mw_err *err)
{
    (void)err;
    const struct probe *P = ud;
    const float *h = P->first_layer == 0 && P->h0q ? P->h0q : P->hid[P->first_layer];
    memcpy(dst, h + row0 * P->E, (size_t)(n_rows * P->E) * sizeof(float));
    return MW_OK;
}

/* The layer-0 input with token_embd's rows perturbed: hid[0] plus the
 * change of each row's embedding (times sqrt(n_embd) for gemma). */
static enum mw_status embd_input(struct probe *P, const struct calib_samples *smp,
                                 const struct quant_budget_probe *q, struct mw_err *err)
{
    int64_t ti = find_src(P->src, "token_embd.weight");
    float *e = NULL;
    uint64_t rows;
    enum mw_status s;
    if (ti < 0) return MW_OK;
    if ((s = quant_alloc_read_f32(P->src, (uint64_t)ti, &e, &rows, err)) != MW_OK) return s;
    float *eq = malloc((size_t)(rows * P->E) * sizeof(float));
    P->h0q = malloc((size_t)(P->T * P->E) * sizeof(float));
    if (!eq || !P->h0q) {
        s = MW_FAIL(err, MW_E_NOMEM, MW_ERR_OFF_NONE, "out of memory");
        goto out;
    }
    memcpy(eq, e, (size_t)(rows * P->E) * sizeof(float));
    if ((s = perturb(q->type, eq, rows, P->E, q->imatrix, P->nt, err)) != MW_OK) goto out;
    const float sc = P->hp->embd_scale ? sqrtf((float)P->E) : 1.0f;
    const uint32_t np = calib_samples_n_pos(smp);
    for (uint64_t r = 0; r < P->T; r++) {
        const int32_t tok = calib_samples_tokens(smp, (uint32_t)(r / np))[r % np];
        const float *a = e + (uint64_t)tok * P->E, *b = eq + (uint64_t)tok * P->E;
        for (uint64_t j = 0; j < P->E; j++)
            P->h0q[r * P->E + j] = P->hid[0][r * P->E + j] + sc * (b[j] - a[j]);
    }
    if (P->hp->tied_output) { /* the output matrix is the same tensor */
        P->woutq = eq;
        eq = NULL;
    }
out:
    free(e);
    free(eq);
    return s;
}

/* One probe run over the members mem[0..n_mem): *kl the mean divergence. */
static enum mw_status probe_run(struct probe *P, struct calib_model *m,
                                const struct calib_samples *smp, const uint64_t *mem,
                                uint64_t n_mem, double *kl, struct mw_err *err)
{
    enum mw_status s = MW_OK;
    int64_t lo = INT64_MAX;
    bool out_only = true;
    P->mem = mem, P->n_mem = n_mem, P->kl = 0;
    for (uint64_t k = 0; k < n_mem; k++) {
        const struct quant_budget_probe *q = &P->p[mem[k]];
        const int64_t l = layer_of(q->t->name);
        const bool is_out = strcmp(q->t->name, "output.weight") == 0;
        const bool is_emb = strcmp(q->t->name, "token_embd.weight") == 0;
        if (is_out) {
            if (!P->woutq) {
                if (!(P->woutq = malloc((size_t)(P->V * P->E) * sizeof(float))))
                    return MW_FAIL(err, MW_E_NOMEM, MW_ERR_OFF_NONE, "out of memory");
                memcpy(P->woutq, P->wout, (size_t)(P->V * P->E) * sizeof(float));
                if ((s = perturb(q->type, P->woutq, P->V, P->E, q->imatrix, P->nt, err)) !=
                    MW_OK) {
                    mw_err_set_where(err, "probe of tensor '%s'", q->t->name);
                    return s;
                }
            }
            P->hits[mem[k]]++;
            continue;
        }
        if (is_emb) {
            if ((s = embd_input(P, smp, q, err)) != MW_OK) return s;
            if (P->h0q) P->hits[mem[k]]++, lo = 0, out_only = false;
            continue;
        }
        if (l >= 0 && l < lo) lo = l;
        if (l >= 0) out_only = false;
    }
    if (out_only) {
        *kl = P->woutq ? kl_all(P, NULL, P->woutq) : 0;
        return MW_OK;
    }
    uint32_t start = calib_run_first_layer_floor(P->hp, (uint32_t)lo); /* gemma4's shared KV */
    while (start > 0 && !P->hid[start]) start--;
    P->first_layer = start;
    const struct calib_run_opts ro = {.n_threads = P->nt, .on_group = on_group, .on_group_ud = P,
                                      .on_layer = on_layer, .on_layer_ud = P,
                                      .first_layer = start, .load_hidden = load_hidden,
                                      .load_hidden_ud = P, .scratch_dir = P->mo->work_dir};
    struct calib_stats *st = NULL;
    s = calib_run(m, smp, &ro, &st, err);
    calib_stats_free(st);
    *kl = P->kl;
    return s;
}

/* Groups of items probed together: each item alone when there are at most
 * QUANT_PROBE_MAX_RUNS of them; else items of one kind (the name without
 * "blk.N.") in runs of `span` consecutive layers, span the smallest that
 * brings the runs within the bound. grp[k]: the group of item k. */
static uint64_t make_groups(const struct quant_budget_probe *p, uint64_t n, uint32_t n_layer,
                            uint64_t max_runs, uint64_t *grp)
{
    if (n <= max_runs) {
        for (uint64_t k = 0; k < n; k++) grp[k] = k;
        return n;
    }
    uint64_t n_grp = 0;
    for (uint32_t span = 2;; span *= 2) {
        n_grp = 0;
        for (uint64_t k = 0; k < n; k++) {
            const int64_t lk = layer_of(p[k].t->name);
            const char *kk = lk >= 0 ? strchr(p[k].t->name + 4, '.') : p[k].t->name;
            grp[k] = UINT64_MAX;
            for (uint64_t j = 0; j < k && lk >= 0; j++) {
                const int64_t lj = layer_of(p[j].t->name);
                if (lj < 0 || lj / span != lk / span) continue;
                if (strcmp(strchr(p[j].t->name + 4, '.'), kk) == 0) {
                    grp[k] = grp[j];
                    break;
                }
            }
            if (grp[k] == UINT64_MAX) grp[k] = n_grp++;
        }
        if (n_grp <= max_runs || span >= n_layer) break;
    }
    return n_grp;
}

enum mw_status quant_methods_probe(void *ud, struct quant_budget_probe *p, uint64_t n,
                                   struct mw_err *err)
{
    const struct quant_methods_probe_ctx *cx = ud;
    struct probe P = {.mo = cx->mo, .src = cx->src, .p = p,
                      .nt = cx->mo->n_threads ? cx->mo->n_threads : 1};
    struct calib_corpus *c = NULL;
    struct calib_model *m = NULL;
    struct calib_samples *smp = NULL;
    uint64_t *grp = NULL, *mem = NULL;
    enum mw_status s;
    if ((s = calib_corpus_load(P.mo->corpus_path, CALIB_CORPUS_AUTO, &c, err)) != MW_OK) goto out;
    if ((s = calib_model_open(P.mo->model_path, &m, err)) != MW_OK) goto out;
    P.hp = calib_model_hparams(m);
    struct calib_sample_opts so = P.mo->samples;
    so.n_ctx_max = P.hp->n_ctx_train;
    const uint32_t L = so.seq_len ? so.seq_len : CALIB_DEFAULT_SEQ_LEN;
    so.n_samples = (QUANT_PROBE_TOKENS + L - 1) / L;
    if (P.mo->samples.n_samples && so.n_samples > P.mo->samples.n_samples)
        so.n_samples = P.mo->samples.n_samples;
    if ((s = calib_samples_build(c, calib_model_tok(m), &so, &smp, err)) != MW_OK) goto out;
    P.T = (uint64_t)calib_samples_count(smp) * calib_samples_n_pos(smp);
    P.E = P.hp->n_embd;
    P.V = P.hp->n_vocab;
    /* the output matrix and the final norm, as the file holds them */
    const int64_t io = find_src(P.src, P.hp->tied_output ? "token_embd.weight" : "output.weight");
    const int64_t in = find_src(P.src, "output_norm.weight");
    uint64_t rows = 0;
    if (io < 0 || in < 0) goto out; /* nothing to compare logits with: no probe measured */
    if ((s = quant_alloc_read_f32(P.src, (uint64_t)io, &P.wout, &rows, err)) != MW_OK ||
        (s = quant_alloc_read_f32(P.src, (uint64_t)in, &P.onorm, &rows, err)) != MW_OK)
        goto out;
    /* memory: the output matrix twice (f32), Y0, the logits rows, the kept
     * hidden states: every layer, or every k-th within the bound (at least
     * layer 0's). Over the bound (--max-memory, else QUANT_PROBE_MAX_BYTES)
     * nothing is measured: the budget keeps its losses as they are. */
    const uint64_t per = P.T * P.E * sizeof(float);
    const uint64_t fixed = 2 * P.V * P.E * sizeof(float) + 2 * per +
                           2 * PROBE_ROWS * P.V * sizeof(float);
    const uint64_t bound = P.mo->max_memory ? P.mo->max_memory : QUANT_PROBE_MAX_BYTES;
    if (fixed + per > bound) goto out;
    uint64_t hid_bound = bound - fixed < QUANT_PROBE_HIDDEN_BYTES ? bound - fixed
                                                                   : QUANT_PROBE_HIDDEN_BYTES;
    uint32_t every = 1;
    while ((uint64_t)((P.hp->n_layer + every - 1) / every) * per > hid_bound &&
           every < P.hp->n_layer)
        every++;
    P.hid = calloc(P.hp->n_layer, sizeof *P.hid);
    P.y0 = malloc((size_t)per);
    P.l0 = malloc((size_t)(PROBE_ROWS * P.V) * sizeof(float));
    P.l1 = malloc((size_t)(PROBE_ROWS * P.V) * sizeof(float));
    P.yb = malloc((size_t)(PROBE_ROWS * P.E) * sizeof(float));
    P.rowkl = calloc(PROBE_ROWS, sizeof *P.rowkl);
    P.hits = calloc(n ? (size_t)n : 1, sizeof *P.hits);
    grp = calloc(n ? (size_t)n : 1, sizeof *grp);
    mem = calloc(n ? (size_t)n : 1, sizeof *mem);
    if (!P.hid || !P.y0 || !P.l0 || !P.l1 || !P.yb || !P.rowkl || !P.hits || !grp || !mem) {
        s = MW_FAIL(err, MW_E_NOMEM, MW_ERR_OFF_NONE, "out of memory");
        goto out;
    }
    for (uint32_t l = 0; l < P.hp->n_layer; l += every)
        if (!(P.hid[l] = malloc((size_t)per))) {
            s = MW_FAIL(err, MW_E_NOMEM, MW_ERR_OFF_NONE, "out of memory");
            goto out;
        }
    mw_blas_init();
    if (P.nt > 1 && (s = mw_pool_init(P.nt, &P.pool, err)) != MW_OK) goto out;
    /* the base run: embeddings (layer 0's input), kept hidden states, Y0 */
    {
        P.base = true;
        const struct calib_run_opts ro = {.n_threads = P.nt, .on_group = on_group,
                                          .on_group_ud = &P, .on_layer = on_layer,
                                          .on_layer_ud = &P, .scratch_dir = P.mo->work_dir};
        struct calib_stats *st = NULL;
        /* layer 0's input: the embedding rows, read in its ATTN_IN callback */
        s = calib_run(m, smp, &ro, &st, err);
        calib_stats_free(st);
        if (s != MW_OK) goto out;
        P.base = false;
    }
    const uint64_t n_grp =
        make_groups(p, n, P.hp->n_layer, cx->max_runs ? cx->max_runs : QUANT_PROBE_MAX_RUNS, grp);
    for (uint64_t g = 0; g < n_grp; g++) {
        uint64_t nm = 0;
        double lsum = 0;
        for (uint64_t k = 0; k < n; k++)
            if (grp[k] == g) mem[nm++] = k, lsum += p[k].loss;
        double kl = 0;
        if ((s = probe_run(&P, m, smp, mem, nm, &kl, err)) != MW_OK) goto out;
        free(P.woutq), P.woutq = NULL;
        free(P.h0q), P.h0q = NULL;
        for (uint64_t j = 0; j < nm; j++) {
            struct quant_budget_probe *q = &p[mem[j]];
            if (!P.hits[mem[j]]) continue; /* never met: not measured */
            q->kld = nm == 1 ? kl : lsum > 0 ? kl * q->loss / lsum : kl / (double)nm;
        }
    }
out:
    mw_pool_free(P.pool);
    if (P.hid)
        for (uint32_t l = 0; l < P.hp->n_layer; l++) free(P.hid[l]);
    free(P.hid);
    free(P.y0);
    free(P.l0);
    free(P.l1);
    free(P.yb);
    free(P.rowkl);
    free(P.hits);
    free(P.wout);
    free(P.woutq);
    free(P.h0q);
    free(P.onorm);
    free(grp);
    free(mem);
    calib_samples_free(smp);
    calib_corpus_free(c);
    calib_model_close(m);
    return s;
}
