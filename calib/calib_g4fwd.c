/*
 * calib/calib_g4fwd.c — Gemma 4's layers in the calibration engine, the
 * runtime's pass (runtime/rt_gemma4.c) over whole samples in FP32:
 *
 *   x = token_embd[t] * sqrt(E)
 *   per-layer inputs, once for every row before layer 0 (kept for the run):
 *     pl = (RMSNorm_P(per_layer_model_proj . x / sqrt(E)) * per_layer_proj_norm
 *           + per_layer_token_embd[t] * sqrt(P)) / sqrt(2), layer l reading pl[l*P ..]
 *   each layer, with its own head size, kv heads, FFN width and RoPE:
 *     q = RoPE(RMSNorm_hd(wq . h) * q_norm); a layer that owns its K/V:
 *     k = RoPE(RMSNorm(wk . h) * k_norm), v = RMSNorm(wv . h) (no weight); a
 *     shared-KV layer reads the K/V of rt_layer_kv_src, which the engine
 *     keeps past that layer (T rows of each, the two source layers);
 *     attention with scale 1, sliding layers over their window;
 *     x += RMSNorm(o . attn) * post_attention_norm            (calib_forward.c)
 *     x += RMSNorm(down . GEGLU(RMSNorm(x) * ffn_norm)) * post_ffw_norm  (idem)
 *     x += RMSNorm(proj . (gelu(inp_gate . x) * pl_l)) * post_norm   (here)
 *     x *= layer_output_scale                                          (here)
 * inp_gate's input (x after the FFN) and proj's (gelu(...) * pl_l) are the
 * groups PLE_IN and PLE_PROJ: with callbacks the tail runs in steps (their
 * statistics, each group's callback, then the tail with the weights they
 * left), so the methods take inp_gate and proj as any other matrix.
 * per_layer_model_proj's input (the scaled embedding) gets statistics (an
 * imatrix entry) before layer 0, outside the callbacks.
 * A full layer without attn_v (attention_k_eq_v: 26B-A4B, 31B) takes v
 * from wk's raw output, before k_norm. The experts beside the dense MLP
 * (26B-A4B): calib_g4moe.c.
 */
#include "calib/calib_int.h"
#include "runtime/rt_ops.h"

#include <cblas.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>


/* which kept K/V slot (0 full, 1 sliding) layer il writes as a source of the
 * shared-KV layers, or -1 */
static int keep_slot(const struct rt_hparams *hp, uint32_t il)
{
    if (!hp->n_kv_shared || !rt_layer_has_kv(hp, il)) return -1;
    for (uint32_t j = hp->n_layer - hp->n_kv_shared; j < hp->n_layer; j++)
        if (rt_layer_kv_src(hp, j) == il) return rt_layer_is_swa(hp, il) ? 1 : 0;
    return -1;
}

void calib__g4_layer(struct calib_engine *e, uint32_t il)
{
    const struct rt_hparams *mh = calib_model_hparams(e->m);
    struct rt_hparams *h = &e->hpl;
    *h = *mh;
    const bool swa = rt_layer_is_swa(mh, il);
    h->head_dim = rt_layer_head_dim(mh, il);
    h->n_head_kv = rt_layer_n_head_kv(mh, il);
    h->n_rot = swa ? mh->n_rot_swa : mh->n_rot;
    const uint64_t F = calib__model_slot_rows(e->m, il, CALIB_T_WGATE);
    h->n_ff = F ? (uint32_t)F : mh->n_ff;
    if (h->n_expert) h->n_ff_shexp = h->n_ff; /* the dense MLP beside the experts */
    e->hp = h;
    e->hd = h->head_dim;
    e->Q = (uint64_t)h->n_head * h->head_dim;
    e->KV = (uint64_t)h->n_head_kv * h->head_dim;
    e->F = h->n_ff;
    e->n_rep = h->n_head / h->n_head_kv;
}

enum mw_status calib__g4_stats_alloc(struct calib_engine *e, struct mw_err *err)
{
    struct calib_stats *st = e->st;
    const uint64_t E = e->E, P = e->hp->n_embd_per_layer, L = st->n_layer;
    uint64_t n;
    size_t sz;
    if (!(st->no_v = calloc((size_t)L, sizeof *st->no_v)))
        return MW_FAIL(err, MW_E_NOMEM, MW_ERR_OFF_NONE, "layer table");
    for (uint32_t il = 0; il < L; il++)
        st->no_v[il] = rt_layer_has_kv(e->hp, il) && !calib__model_has(e->m, il, CALIB_T_WV);
    if (e->NX) {
        enum mw_status s = calib__g4_moe_stats_alloc(e, err);
        if (s) return s;
    }
    if (!P) return MW_OK;
    /* per layer 2 (E + P) doubles (sum_sq, sum_abs), then 2 E for plm */
    if (!mw_mul_u64(2 * (E + P), L, &n) || !mw_add_u64(n, 2 * E, &n) ||
        !mw_mul_u64(n, sizeof(double), &n) || !mw_u64_to_size(n, &sz) ||
        !(st->pl = calloc((size_t)L * 2, sizeof *st->pl)) || !(st->plbuf = calloc(1, sz)))
        return MW_FAIL(err, MW_E_NOMEM, MW_ERR_OFF_NONE, "per-layer input statistics");
    double *p = st->plbuf;
    for (uint64_t i = 0; i < 2 * L; i++) {
        struct calib_group_stats *gs = &st->pl[i];
        gs->n_in = i % 2 ? P : E;
        gs->sum_sq = p;
        p += gs->n_in;
        gs->sum_abs = p;
        p += gs->n_in;
    }
    st->plm.n_in = E;
    st->plm.sum_sq = p;
    st->plm.sum_abs = p + E;
    return MW_OK;
}

/* the RoPE tables as the runtime's step makes them: full layers (n_rot, the
 * model's base and scale, rope_freqs), sliding ones (n_rot_swa, their base,
 * no factors) */
static enum mw_status rope_tables(struct calib_engine *e, bool *ok, struct mw_err *err)
{
    const struct rt_hparams *hp = e->hp;
    const struct rt_rope_params rp_full = {hp->rope_base, hp->rope_freq_scale, 1.0f, false};
    const struct rt_rope_params rp_swa = {hp->rope_base_swa, 1.0f, 1.0f, false};
    float *ff = NULL;
    e->rope_swa = calib__alloc_f2(e->n_pos, hp->n_rot_swa, ok);
    if (calib__model_has_rope_freqs(e->m)) ff = calib__alloc_f(hp->n_rot / 2, ok);
    if (!*ok) return MW_FAIL(err, MW_E_NOMEM, MW_ERR_OFF_NONE, "RoPE tables");
    enum mw_status s = ff ? calib__model_rope_freqs(e->m, ff, err) : MW_OK;
    for (uint32_t p = 0; !s && p < e->n_pos; p++) {
        rt_rope_cache_ex(hp->n_rot, &rp_full, ff, (int32_t)p, e->rope + (uint64_t)p * hp->n_rot);
        rt_rope_cache_ex(hp->n_rot_swa, &rp_swa, NULL, (int32_t)p,
                         e->rope_swa + (uint64_t)p * hp->n_rot_swa);
    }
    free(ff);
    return s;
}

/* pl for every row: the projection of the scaled embeddings, batch by batch
 * (the statistics of per_layer_model_proj's input on the way), then per row
 * and layer slice the runtime's G4_PLE step */
static enum mw_status ple(struct calib_engine *e, bool *ok, struct mw_err *err)
{
    const struct rt_hparams *hp = e->hp;
    const uint64_t E = e->E, P = e->P, LP = P * hp->n_layer;
    const uint32_t n_vocab = hp->n_vocab;
    enum mw_status s = MW_OK;
    int32_t *slot = malloc((size_t)n_vocab * sizeof *slot);
    int32_t *ids = malloc((size_t)n_vocab * sizeof *ids);
    float *W = calib__alloc_f2(LP, E, ok), *nw = calib__alloc_f(P, ok);
    float *rows = NULL, *tab = NULL;
    if (!slot || !ids || !*ok) {
        s = MW_FAIL(err, MW_E_NOMEM, MW_ERR_OFF_NONE, "per-layer input projection");
        goto done;
    }
    for (uint32_t i = 0; i < n_vocab; i++) slot[i] = -1;
    for (uint32_t sI = 0; sI < e->n_samples; sI++) {
        const int32_t *t = calib_samples_tokens(e->s, sI);
        for (uint32_t p = 0; p < e->n_pos; p++)
            if (t[p] < 0 || (uint32_t)t[p] >= n_vocab) {
                mw_err_set_where(err, "sample %u position %u", sI, p);
                s = MW_FAIL(err, MW_E_VALUE, MW_ERR_OFF_NONE,
                            "token id %d outside the vocabulary (%u)", t[p], n_vocab);
                goto done;
            } else {
                slot[t[p]] = 0;
            }
    }
    uint64_t n_ids = 0;
    for (uint32_t i = 0; i < n_vocab; i++)
        if (slot[i] == 0) {
            slot[i] = (int32_t)n_ids;
            ids[n_ids++] = (int32_t)i;
        }
    rows = calib__alloc_f2(n_ids, E, ok);
    tab = calib__alloc_f2(n_ids, LP, ok);
    if (!*ok) {
        s = MW_FAIL(err, MW_E_NOMEM, MW_ERR_OFF_NONE, "%llu per-layer embedding rows",
                    (unsigned long long)n_ids);
        goto done;
    }
    if ((s = calib__model_embd_rows(e->m, ids, n_ids, rows, err)) ||
        (s = calib__model_ple_rows(e->m, ids, n_ids, tab, err)) ||
        (s = calib__model_ple_load(e->m, 1, W, LP * E, err)) ||
        (s = calib__model_ple_load(e->m, 2, nw, P, err)))
        goto done;
    const float sc = sqrtf((float)E);
    for (uint64_t i = 0; i < n_ids * E; i++) rows[i] *= sc;
    const float sp = sqrtf((float)P), se = 1.0f / sqrtf((float)E), si = 1.0f / sqrtf(2.0f);
    for (uint32_t s0 = 0; s0 < e->n_samples; s0 += e->spb) {
        const uint64_t r0 = (uint64_t)s0 * e->n_pos;
        const uint64_t nr = (uint64_t)calib__batch_samples(e, s0) * e->n_pos;
        for (uint64_t r = 0; r < nr; r++) {
            const int32_t t = calib_samples_tokens(e->s, (uint32_t)((r0 + r) / e->n_pos))
                                  [(r0 + r) % e->n_pos];
            memcpy(e->xin + r * E, rows + (uint64_t)slot[t] * E, (size_t)E * sizeof(float));
        }
        calib__accum_gs(e, &e->st->plm, e->xin, nr);
        calib__linear(e, e->xin, nr, E, W, NULL, LP, e->pl + r0 * LP, LP);
        for (uint64_t r = 0; r < nr; r++) {
            const int32_t t = calib_samples_tokens(e->s, (uint32_t)((r0 + r) / e->n_pos))
                                  [(r0 + r) % e->n_pos];
            const float *a0 = tab + (uint64_t)slot[t] * LP;
            for (uint32_t l = 0; l < hp->n_layer; l++) {
                float *x = e->pl + (r0 + r) * LP + (uint64_t)l * P;
                const float *a = a0 + (uint64_t)l * P;
                for (uint64_t i = 0; i < P; i++) x[i] = x[i] * se;
                rt_rmsnorm(x, x, nw, P, hp->rms_eps);
                for (uint64_t i = 0; i < P; i++) x[i] = (x[i] + a[i] * sp) * si;
            }
        }
    }
done:
    free(tab);
    free(rows);
    free(nw);
    free(W);
    free(ids);
    free(slot);
    return s;
}

uint32_t calib_run_first_layer_floor(const struct rt_hparams *hp, uint32_t layer)
{
    uint32_t f = layer, was;
    do { /* the shared layers from f on read layers before f: start there */
        was = f;
        for (uint32_t j = hp->n_layer - hp->n_kv_shared; j < hp->n_layer; j++)
            if (j >= was && rt_layer_kv_src(hp, j) < f) f = rt_layer_kv_src(hp, j);
    } while (f != was);
    return f;
}

enum mw_status calib__g4_setup(struct calib_engine *e, bool *ok, struct mw_err *err)
{
    const struct rt_hparams *hp = e->hp;
    /* a resumed run has no K/V of the layers before it: a shared-KV layer
     * reading one of those cannot run */
    const uint32_t floor = calib_run_first_layer_floor(hp, e->first_layer);
    if (floor < e->first_layer) {
        mw_err_set_path(err, calib_model_path(e->m));
        return MW_FAIL(err, MW_E_UNSUPPORTED, MW_ERR_OFF_NONE,
                       "resuming at layer %u: a shared-KV layer reads the K/V of layer %u, "
                       "which only a run through that layer has (start again, not resumed)",
                       e->first_layer, floor);
    }
    e->P = hp->n_embd_per_layer;
    if (e->P) {
        e->pl = calib__alloc_f2(e->T, e->P * hp->n_layer, ok);
        e->pg = calib__alloc_f2(e->rows_b, e->P, ok);
    }
    for (uint32_t il = 0; il < hp->n_layer; il++) {
        const int k = keep_slot(hp, il);
        if (k < 0) continue;
        const uint64_t kv = (uint64_t)rt_layer_n_head_kv(hp, il) * rt_layer_head_dim(hp, il);
        e->kv_k[k] = calib__alloc_f2(e->T, kv, ok);
        e->kv_v[k] = calib__alloc_f2(e->T, kv, ok);
    }
    if (!*ok)
        return MW_FAIL(err, MW_E_NOMEM, MW_ERR_OFF_NONE,
                       "per-layer inputs and shared K/V of %llu rows", (unsigned long long)e->T);
    enum mw_status s = rope_tables(e, ok, err);
    if (!s && e->P) s = ple(e, ok, err);
    return s;
}

void calib__g4_free(struct calib_engine *e)
{
    free(e->pl);
    free(e->pg);
    for (int k = 0; k < 2; k++) {
        free(e->kv_k[k]);
        free(e->kv_v[k]);
        e->kv_k[k] = e->kv_v[k] = NULL;
    }
    e->pl = e->pg = NULL;
}

struct qk_job {
    struct calib_engine *e;
    uint64_t nr;
    bool kv;
};

/* per row: q norm and RoPE; with its own K/V also the k norm, v norm, k RoPE */
static void qk_task(void *arg, unsigned ith, unsigned nth)
{
    const struct qk_job *J = arg;
    struct calib_engine *e = J->e;
    const struct rt_hparams *hp = e->hp;
    const uint32_t hd = (uint32_t)e->hd;
    uint64_t lo, hi;
    calib__split(J->nr, ith, nth, &lo, &hi);
    for (uint64_t r = lo; r < hi; r++) {
        const float *rc = e->rope_l + (r % e->n_pos) * hp->n_rot;
        float *q = e->q + r * e->Q;
        for (uint32_t h = 0; h < hp->n_head; h++) {
            rt_rmsnorm(q + (uint64_t)h * hd, q + (uint64_t)h * hd, e->w[CALIB_T_Q_NORM], hd,
                       hp->rms_eps);
            rt_rope_neox_rows(rc, hp->n_rot, q + (uint64_t)h * hd);
        }
        if (!J->kv) continue;
        float *k = e->k + r * e->KV, *v = e->v + r * e->KV;
        for (uint32_t h = 0; h < hp->n_head_kv; h++) {
            rt_rmsnorm(k + (uint64_t)h * hd, k + (uint64_t)h * hd, e->w[CALIB_T_K_NORM], hd,
                       hp->rms_eps);
            rt_rmsnorm_nw(v + (uint64_t)h * hd, hd, hp->rms_eps);
            rt_rope_neox_rows(rc, hp->n_rot, k + (uint64_t)h * hd);
        }
    }
}

struct attn_job {
    struct calib_engine *e;
    uint32_t ns;
    const float *k, *v; /* the samples' K/V rows (stride KV) */
    float *out;
    uint64_t ldo;
};

/* (sample, head) pairs over the pool, each with single-threaded BLAS calls
 * of fixed shape: the same bits for any thread count */
static void attn_task(void *arg, unsigned ith, unsigned nth)
{
    const struct attn_job *J = arg;
    struct calib_engine *e = J->e;
    const uint64_t P = e->n_pos, n_head = e->hp->n_head;
    float *S = e->S + (uint64_t)ith * P * P;
    uint64_t lo, hi;
    calib__split((uint64_t)J->ns * n_head, ith, nth, &lo, &hi);
    for (uint64_t pi = lo; pi < hi; pi++) {
        const uint64_t sI = pi / n_head, h = pi % n_head, gi = h / e->n_rep;
        const float *qs = e->q + sI * P * e->Q;
        const float *ks = J->k + sI * P * e->KV, *vs = J->v + sI * P * e->KV;
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (int)P, (int)P, (int)e->hd,
                    e->kq_scale, qs + h * e->hd, (int)e->Q, ks + gi * e->hd, (int)e->KV, 0.0f,
                    S, (int)P);
        calib__softmax_causal(e, S, P, e->kq_scale, 0.0f);
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)P, (int)e->hd, (int)P, 1.0f,
                    S, (int)P, vs + gi * e->hd, (int)e->KV, 0.0f,
                    J->out + sI * P * J->ldo + h * e->hd, (int)J->ldo);
    }
}

enum mw_status calib__g4_attention(struct calib_engine *e, const float *X, uint32_t ns,
                                   float *out, uint64_t ldo, struct mw_err *err)
{
    const struct rt_hparams *hp = e->hp;
    const uint32_t il = e->ly.il;
    const uint64_t nr = (uint64_t)ns * e->n_pos;
    const bool own = rt_layer_has_kv(hp, il);
    enum mw_status s;
    if ((s = calib__linear_w(e, X, nr, e->E, CALIB_T_WQ, CALIB_T_BQ, e->Q, e->q, e->Q, err)))
        return s;
    if (own &&
        ((s = calib__linear_w(e, X, nr, e->E, CALIB_T_WK, CALIB_T_BK, e->KV, e->k, e->KV, err)) ||
         (e->w[CALIB_T_WV] && (s = calib__linear_w(e, X, nr, e->E, CALIB_T_WV, CALIB_T_BV, e->KV,
                                                   e->v, e->KV, err)))))
        return s;
    if (own && !e->w[CALIB_T_WV]) /* attention_k_eq_v: v is wk's raw output */
        memcpy(e->v, e->k, (size_t)(nr * e->KV) * sizeof(float));
    struct qk_job Q = {.e = e, .nr = nr, .kv = own};
    mw_pool_run(e->pool, qk_task, &Q);
    struct attn_job J = {.e = e, .ns = ns, .k = e->k, .v = e->v, .out = out, .ldo = ldo};
    const uint64_t kb = e->mix_r0 * e->KV, kn = nr * e->KV;
    const int keep = keep_slot(hp, il);
    if (keep >= 0) { /* the shared-KV layers read these rows later */
        memcpy(e->kv_k[keep] + kb, e->k, (size_t)kn * sizeof(float));
        memcpy(e->kv_v[keep] + kb, e->v, (size_t)kn * sizeof(float));
    }
    if (!own) {
        const int src = rt_layer_is_swa(hp, il) ? 1 : 0;
        if (!e->kv_k[src])
            return MW_FAIL(err, MW_E_FORMAT, MW_ERR_OFF_NONE,
                           "layer %u: no earlier layer's K/V to share", il);
        J.k = e->kv_k[src] + kb;
        J.v = e->kv_v[src] + kb;
    }
    mw_pool_run(e->pool, attn_task, &J);
    return MW_OK;
}

void calib__g4_proj_in(struct calib_engine *e, const float *x, uint64_t r0, uint64_t nr,
                       float *dst)
{
    const uint32_t il = e->ly.il;
    const uint64_t P = e->P, LP = P * e->hp->n_layer;
    calib__linear(e, x, nr, e->E, e->w[CALIB_T_PLE_GATE], NULL, P, dst, P);
    for (uint64_t r = 0; r < nr; r++) {
        float *g = dst + r * P;
        const float *pl = e->pl + (r0 + r) * LP + (uint64_t)il * P;
        for (uint64_t i = 0; i < P; i++) g[i] = rt_gelu_tanh(g[i]) * pl[i];
    }
}

enum mw_status calib__g4_tail(struct calib_engine *e, uint64_t r0, uint64_t nr,
                              enum calib_g4_tail_mode mode, struct mw_err *err)
{
    (void)err;
    const uint32_t il = e->ly.il;
    const uint64_t E = e->E, P = e->P;
    float *x = calib__hs_at(e, r0);
    const bool stats = mode == CALIB_G4_TAIL_ALL;
    if (P && mode == CALIB_G4_TAIL_ACC_IN) {
        calib__accum_gs(e, &e->st->pl[(uint64_t)il * 2], x, nr);
        return MW_OK;
    }
    if (P && mode == CALIB_G4_TAIL_ACC_PROJ) {
        calib__g4_proj_in(e, x, r0, nr, e->pg);
        calib__accum_gs(e, &e->st->pl[(uint64_t)il * 2 + 1], e->pg, nr);
        return MW_OK;
    }
    if (P) {
        if (stats) calib__accum_gs(e, &e->st->pl[(uint64_t)il * 2], x, nr);
        calib__g4_proj_in(e, x, r0, nr, e->pg);
        if (stats) calib__accum_gs(e, &e->st->pl[(uint64_t)il * 2 + 1], e->pg, nr);
        calib__linear(e, e->pg, nr, P, e->w[CALIB_T_PLE_PROJ], NULL, E, e->y, E);
        calib__run_rows(e, CALIB_OP_NORM, nr, E, e->y, e->y, e->w[CALIB_T_PLE_NORM], 0);
        calib__run_rows(e, CALIB_OP_ADD, nr, E, x, e->y, NULL, 0);
    }
    if (e->w[CALIB_T_OUT_SCALE]) {
        const float sc = e->w[CALIB_T_OUT_SCALE][0];
        for (uint64_t i = 0; i < nr * E; i++) x[i] = x[i] * sc;
    }
    return MW_OK;
}
