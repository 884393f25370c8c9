/*
 * calib/calib_forward.c — the layer-by-layer FP32 forward over all samples
 * (OpenBLAS GEMM): the run, the layer loop, the row ops, attention, SwiGLU,
 * the residual blocks, embedding and RoPE tables. The calibrate -> quantize
 * loop lives here and only here; the statistics (calib_stats.c), the
 * callback API (calib_layer.c), the mixture-of-experts FFN (calib_moe.c),
 * lean mode (calib_spill.c) and memory planning (calib_plan.c) are its
 * parts (calib_int.h).
 *
 * Without an on_group callback each layer is ONE pass over row batches
 * (norm, stats, q/k/v, attention, stats, o, residual, norm, stats,
 * gate/up, SwiGLU, stats, down, residual): only the hidden states of all
 * samples and one batch of scratch are alive. With a callback the same
 * steps run as stages (A: attn-in stats | B: attention -> X_o, stats | C:
 * o + residual | D: ffn-in stats | E: SwiGLU stats | F: down + residual)
 * with a callback after A, B, D and E. Both paths perform the same float
 * operations on the same batches, so a callback that changes nothing gives
 * bitwise the same statistics as no callback.
 */
#include "calib/calib_int.h"
#include "runtime/rt_ops.h"

#include <cblas.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

static float *alloc_f3(uint64_t a, uint64_t b, uint64_t c, bool *ok)
{
    uint64_t n;
    if (!mw_mul_u64(a, b, &n)) *ok = false;
    return *ok ? calib__alloc_f2(n, c, ok) : NULL;
}

float *calib__alloc_f2(uint64_t a, uint64_t b, bool *ok)
{
    uint64_t n;
    if (!mw_mul_u64(a, b, &n)) *ok = false;
    return *ok ? calib__alloc_f(n, ok) : NULL;
}

float *calib__alloc_f(uint64_t n, bool *ok)
{
    uint64_t bytes;
    size_t sz;
    if (!*ok || !mw_mul_u64(n ? n : 1, sizeof(float), &bytes) || !mw_u64_to_size(bytes, &sz)) {
        *ok = false;
        return NULL;
    }
    float *p = malloc(sz);
    if (!p) *ok = false;
    return p;
}

// --- row-parallel small ops -------------------------------------------------------------
// RMSNorm, RoPE and SwiGLU are the runtime's own (runtime/rt_ops.h): one model
// definition, bit for bit; so are the families' ops (per-head q/k RMSNorm,
// GELU-tanh gating, the per-layer RoPE parameters and LongRoPE, the query
// scale, attention soft-capping, the sliding window's first position). The
// softmax is not: the runtime's is llama.cpp's online flash-attention softmax
// over its KV cache, this one a plain causal softmax over whole samples
// (softmax_causal below).

void calib__row_task(void *arg, unsigned ith, unsigned nth)
{
    const struct calib_row_job *J = arg;
    const struct calib_engine *e = J->e;
    const struct rt_hparams *hp = e->hp;
    uint64_t lo, hi;
    calib__split(J->n_rows, ith, nth, &lo, &hi);
    for (uint64_t r = lo; r < hi; r++) {
        switch (J->op) {
        case CALIB_OP_NORM:
            rt_rmsnorm(J->dst + r * J->n, J->src + r * J->n, J->w, J->n, hp->rms_eps);
            break;
        case CALIB_OP_ADD: {
            float *o = J->dst + r * J->n;
            const float *x = J->src + r * J->n;
            for (uint64_t i = 0; i < J->n; i++) o[i] += x[i];
            break;
        }
        case CALIB_OP_BIAS: {
            float *o = J->dst + r * J->n;
            for (uint64_t i = 0; i < J->n; i++) o[i] += J->w[i];
            break;
        }
        case CALIB_OP_ROPE: {
            const uint64_t pos = (J->row0 + r) % e->n_pos;
            const float *rc = e->rope_l + pos * hp->n_rot;
            float *q = e->q + r * e->Q, *k = e->k + r * e->KV;
            if (hp->qk_norm) {
                rt_rmsnorm_heads(q, e->w[CALIB_T_Q_NORM], hp->n_head, hp->head_dim, hp->rms_eps);
                rt_rmsnorm_heads(k, e->w[CALIB_T_K_NORM], hp->n_head_kv, hp->head_dim,
                                 hp->rms_eps);
            }
            for (uint32_t h = 0; h < hp->n_head; h++) rt_rope_apply(hp, rc, q + h * e->hd);
            for (uint32_t h = 0; h < hp->n_head_kv; h++) rt_rope_apply(hp, rc, k + h * e->hd);
            if (e->q_mul != 0.0f)
                for (uint64_t i = 0; i < e->Q; i++) q[i] *= e->q_mul;
            break;
        }
        case CALIB_OP_SWIGLU:
            rt_ffn_act(hp, J->dst + r * J->n, J->src + r * J->n, J->n);
            break;
        case CALIB_OP_GNORM:
            rt_rmsnorm(J->dst + r * J->n, e->hs + J->idx[r] * J->n, J->w, J->n, hp->rms_eps);
            break;
        }
    }
}

void calib__run_rows(struct calib_engine *e, enum calib_row_op op, uint64_t n_rows, uint64_t n,
                     float *dst, const float *src, const float *w, uint64_t row0)
{
    struct calib_row_job J = {.e = e, .op = op, .n_rows = n_rows, .n = n, .row0 = row0,
                              .dst = dst, .src = src, .w = w};
    mw_pool_run(e->pool, calib__row_task, &J);
}

void calib__gemm(struct calib_engine *e, const float *X, uint64_t nr, uint64_t n_in,
                 const float *W, uint64_t n_out, float *Y, uint64_t ldy, uint64_t tile)
{
    const double t0 = mw_now_s();
    mw_gemm(e->pool, false, true, nr, n_out, n_in, 1.0f, X, n_in, W, n_in, 0.0f, Y, ldy, tile);
    e->st->tm.gemm_s += mw_now_s() - t0;
    e->st->tm.gemm_flop += 2.0 * (double)nr * (double)n_in * (double)n_out;
}

/* Y (nr rows, n_out, row stride ldy) += bias per row */
static void add_bias(struct calib_engine *e, float *Y, uint64_t nr, uint64_t n_out, uint64_t ldy,
                     const float *bias)
{
    if (!bias) return;
    if (ldy == n_out) {
        calib__run_rows(e, CALIB_OP_BIAS, nr, n_out, Y, NULL, bias, 0);
    } else {
        for (uint64_t r = 0; r < nr; r++)
            for (uint64_t i = 0; i < n_out; i++) Y[r * ldy + i] += bias[i];
    }
}

void calib__linear(struct calib_engine *e, const float *X, uint64_t nr, uint64_t n_in,
                   const float *W, const float *bias, uint64_t n_out, float *Y, uint64_t ldy)
{
    /* fixed tiles, row tiles per sample: the same bits for any thread count
     * and any samples per batch (mw_blas.h) */
    calib__gemm(e, X, nr, n_in, W, n_out, Y, ldy, e->n_pos);
    add_bias(e, Y, nr, n_out, ldy, bias);
}

enum mw_status calib__linear_w(struct calib_engine *e, const float *X, uint64_t nr, uint64_t n_in,
                               enum calib_tslot t, enum calib_tslot b, uint64_t n_out, float *Y,
                               uint64_t ldy, struct mw_err *err)
{
    if (e->w[t] || !e->lean) {
        calib__linear(e, X, nr, n_in, e->w[t], e->w[b], n_out, Y, ldy);
        return MW_OK;
    }
    enum mw_status s = calib__spill_gemm(e, X, nr, n_in, t, n_out, Y, ldy, err);
    if (s) return s;
    add_bias(e, Y, nr, n_out, ldy, e->w[b]);
    return MW_OK;
}

bool calib__big_slot(enum calib_tslot t)
{
    return (t >= CALIB_T_WQ && t <= CALIB_T_WDOWN) || t == CALIB_T_WQKV;
}

enum calib_tslot calib__owner_of(const struct calib_engine *e, enum calib_tslot t, uint64_t *row0)
{
    *row0 = 0;
    if (e->hp->fused_qkv && (t == CALIB_T_WQ || t == CALIB_T_WK || t == CALIB_T_WV)) {
        *row0 = t == CALIB_T_WQ ? 0 : t == CALIB_T_WK ? e->Q : e->Q + e->KV;
        return CALIB_T_WQKV;
    }
    if (e->hp->fused_gate_up && (t == CALIB_T_WGATE || t == CALIB_T_WUP)) {
        *row0 = t == CALIB_T_WGATE ? 0 : e->F;
        return CALIB_T_WUP;
    }
    return t;
}

void calib__set_views(struct calib_engine *e)
{
    if (e->hp->fused_qkv) {
        float *b = e->wown[CALIB_T_WQKV];
        e->w[CALIB_T_WQ] = b;
        e->w[CALIB_T_WK] = b ? b + e->Q * e->E : NULL;
        e->w[CALIB_T_WV] = b ? b + (e->Q + e->KV) * e->E : NULL;
    }
    if (e->hp->fused_gate_up) {
        float *b = e->wown[CALIB_T_WUP];
        e->w[CALIB_T_WGATE] = b;
        e->w[CALIB_T_WUP] = b ? b + e->F * e->E : NULL;
    }
}

/* X (nr rows of hs from row r0) -> normed into dst */
void calib__norm_rows(struct calib_engine *e, uint64_t r0, uint64_t nr, enum calib_tslot norm,
                      float *dst)
{
    calib__run_rows(e, CALIB_OP_NORM, nr, e->E, dst, calib__hs_at(e, r0), e->w[norm], 0);
}

/* causal softmax of the P x P scores in place (row i keeps columns lo..i:
 * lo = 0, or in a sliding layer the first position within the window);
 * with a soft cap (gemma2) each kept raw dot s becomes rt_attn_score(s,
 * scale, cap) first (the scores were computed unscaled then). */
void calib__softmax_causal(const struct calib_engine *e, float *S, uint64_t P, float scale,
                           float cap)
{
    for (uint64_t r = 0; r < P; r++) {
        float *srow = S + r * P;
        const uint64_t lo = e->swa_l ? rt_swa_first(e->hp, e->ly.il, (uint32_t)r) : 0;
        if (cap > 0.0f)
            for (uint64_t j = lo; j <= r; j++) srow[j] = rt_attn_score(srow[j], scale, cap);
        float mx = -INFINITY;
        for (uint64_t j = lo; j <= r; j++) mx = srow[j] > mx ? srow[j] : mx;
        float sum = 0.0f;
        for (uint64_t j = lo; j <= r; j++) {
            srow[j] = expf(srow[j] - mx);
            sum += srow[j];
        }
        const float inv = 1.0f / sum;
        for (uint64_t j = 0; j < lo; j++) srow[j] = 0.0f;
        for (uint64_t j = lo; j <= r; j++) srow[j] *= inv;
        for (uint64_t j = r + 1; j < P; j++) srow[j] = 0.0f;
    }
}

struct attn_job {
    struct calib_engine *e;
    uint32_t ns;
    float *out;
    uint64_t ldo;
};

/* (sample, head) pairs split over the pool; each pair is computed by one
 * thread with single-threaded BLAS calls of fixed shape, so the result does
 * not depend on which thread or how many */
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
        const float *ks = e->k + sI * P * e->KV, *vs = e->v + sI * P * e->KV;
        const float cap = e->hp->attn_softcap;
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (int)P, (int)P, (int)e->hd,
                    cap > 0.0f ? 1.0f : e->kq_scale, qs + h * e->hd, (int)e->Q, ks + gi * e->hd,
                    (int)e->KV, 0.0f, S, (int)P);
        calib__softmax_causal(e, S, P, e->kq_scale, cap);
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)P, (int)e->hd, (int)P, 1.0f,
                    S, (int)P, vs + gi * e->hd, (int)e->KV, 0.0f,
                    J->out + sI * P * J->ldo + h * e->hd, (int)J->ldo);
    }
}

/* attention of ns whole samples whose normed input is X (ns*n_pos, E) ->
 * out (ns*n_pos rows, Q, row stride ldo) */
enum mw_status calib__attention(struct calib_engine *e, const float *X, uint32_t ns, float *out,
                                uint64_t ldo, struct mw_err *err)
{
    const uint64_t nr = (uint64_t)ns * e->n_pos;
    const bool gated = e->hp->attn_out_gate;
    enum mw_status s;
    /* gated attention (qwen35, qwen3next): per head hd q values, then hd gate
     * values (llama.cpp's views of stride 2 hd into Qcur_full) */
    if ((s = calib__linear_w(e, X, nr, e->E, CALIB_T_WQ, CALIB_T_BQ, gated ? 2 * e->Q : e->Q,
                             gated ? e->qg : e->q, gated ? 2 * e->Q : e->Q, err)) ||
        (s = calib__linear_w(e, X, nr, e->E, CALIB_T_WK, CALIB_T_BK, e->KV, e->k, e->KV, err)) ||
        (s = calib__linear_w(e, X, nr, e->E, CALIB_T_WV, CALIB_T_BV, e->KV, e->v, e->KV, err)))
        return s;
    if (gated)
        for (uint64_t r = 0; r < nr; r++)
            for (uint64_t h = 0; h < e->hp->n_head; h++) {
                const float *src = e->qg + r * 2 * e->Q + h * 2 * e->hd;
                memcpy(e->q + r * e->Q + h * e->hd, src, (size_t)e->hd * sizeof(float));
                memcpy(e->gt + r * e->Q + h * e->hd, src + e->hd, (size_t)e->hd * sizeof(float));
            }
    calib__run_rows(e, CALIB_OP_ROPE, nr, 0, NULL, NULL, NULL, 0);
    struct attn_job J = {.e = e, .ns = ns, .out = out, .ldo = ldo};
    mw_pool_run(e->pool, attn_task, &J);
    if (gated) /* out *= sigmoid(gate), ggml_sigmoid's 1 / (1 + expf(-x)) */
        for (uint64_t r = 0; r < nr; r++) {
            float *o = out + r * ldo;
            const float *gr = e->gt + r * e->Q;
            for (uint64_t i = 0; i < e->Q; i++) o[i] *= 1.0f / (1.0f + expf(-gr[i]));
        }
    return MW_OK;
}

enum mw_status calib__mixer(struct calib_engine *e, const float *X, uint32_t ns, float *out,
                            uint64_t ldo, struct mw_err *err)
{
    if (e->g4) return calib__g4_attention(e, X, ns, out, ldo, err);
    return e->rec ? calib__ssm(e, X, ns, out, ldo, err) : calib__attention(e, X, ns, out, ldo, err);
}

/* SwiGLU of nr rows of normed input X -> e->g (nr, F) */
enum mw_status calib__swiglu(struct calib_engine *e, const float *X, uint64_t nr,
                             struct mw_err *err)
{
    enum mw_status s;
    if ((s = calib__linear_w(e, X, nr, e->E, CALIB_T_WGATE, CALIB_T_BGATE, e->F, e->g, e->F,
                             err)) ||
        (s = calib__linear_w(e, X, nr, e->E, CALIB_T_WUP, CALIB_T_BUP, e->F, e->u, e->F, err)))
        return s;
    calib__run_rows(e, CALIB_OP_SWIGLU, nr, e->F, e->g, e->u, NULL, 0);
    return MW_OK;
}

/* the sandwich norm (gemma: post_attention_norm / post_ffw_norm) of the
 * block whose output projection is w, in place over nr rows of Y (E wide) */
void calib__post_norm(struct calib_engine *e, enum calib_tslot w, float *Y, uint64_t nr)
{
    if (!e->hp->post_norms) return;
    enum calib_tslot pn = w == CALIB_T_WO ? CALIB_T_ATTN_POST_NORM : CALIB_T_FFN_POST_NORM;
    if (w == CALIB_T_WDOWN && e->g4 && e->NX) pn = CALIB_T_POST_NORM_1; /* beside experts */
    calib__run_rows(e, CALIB_OP_NORM, nr, e->E, Y, Y, e->w[pn], 0);
}

/* hs rows [r0, r0+nr) += postnorm(X W^T (+ b)) */
static enum mw_status residual(struct calib_engine *e, uint64_t r0, uint64_t nr, const float *X,
                               uint64_t n_in, enum calib_tslot w, enum calib_tslot b,
                               struct mw_err *err)
{
    enum mw_status s = calib__linear_w(e, X, nr, n_in, w, b, e->E, e->y, e->E, err);
    if (s) return s;
    calib__post_norm(e, w, e->y, nr);
    calib__run_rows(e, CALIB_OP_ADD, nr, e->E, calib__hs_at(e, r0), e->y, NULL, 0);
    return MW_OK;
}

// --- batches ---

/* attn_only (MoE): the attention half; calib__moe_ffn does the FFN over all rows */
static enum mw_status pass_fused(struct calib_engine *e, bool attn_only, struct mw_err *err)
{
    enum mw_status st;
    for (uint32_t s0 = 0; s0 < e->n_samples; s0 += e->spb) {
        const uint32_t ns = calib__batch_samples(e, s0);
        const uint64_t r0 = (uint64_t)s0 * e->n_pos, nr = (uint64_t)ns * e->n_pos;
        if (e->hs_file && (st = calib__hs_io(e, false, r0, nr, err))) return st;
        calib__norm_rows(e, r0, nr, CALIB_T_ATTN_NORM, e->xin);
        calib__accum(e, CALIB_G_ATTN_IN, e->xin, nr);
        e->mix_r0 = r0;
        if ((st = calib__mixer(e, e->xin, ns, e->att, e->AO, err))) return st;
        calib__accum(e, CALIB_G_ATTN_OUT, e->att, nr);
        if ((st = residual(e, r0, nr, e->att, e->AO, calib__wo(e), CALIB_T_BO, err))) return st;
        if (attn_only) continue;
        calib__norm_rows(e, r0, nr, CALIB_T_FFN_NORM, e->xin);
        calib__accum(e, CALIB_G_FFN_IN, e->xin, nr);
        if ((st = calib__swiglu(e, e->xin, nr, err))) return st;
        calib__accum(e, CALIB_G_FFN_DOWN, e->g, nr);
        if ((st = residual(e, r0, nr, e->g, e->F, CALIB_T_WDOWN, CALIB_T_BDOWN, err))) return st;
        if (e->g4 && (st = calib__g4_tail(e, r0, nr, CALIB_G4_TAIL_ALL, err))) return st;
        if (e->hs_file && (st = calib__hs_io(e, true, r0, nr, err))) return st;
    }
    return MW_OK;
}

/* P_G, P_H, P_I: gemma4's per-layer input in steps (PLE_IN's statistics,
 * PLE_PROJ's, then the tail), after P_F's residual */
enum stage_pass { P_A, P_B, P_B_AGAIN, P_C, P_D, P_E, P_F, P_G, P_H, P_I };

/* One stage pass over all batches (lean: the hidden states read, and
 * written back after a residual; X_o through its scratch file). */
static enum mw_status pass_stage(struct calib_engine *e, enum stage_pass p, struct mw_err *err)
{
    enum mw_status st = MW_OK;
    for (uint32_t s0 = 0; s0 < e->n_samples && !st; s0 += e->spb) {
        const uint32_t ns = calib__batch_samples(e, s0);
        const uint64_t r0 = (uint64_t)s0 * e->n_pos, nr = (uint64_t)ns * e->n_pos;
        if ((st = calib__hs_need(e, r0, nr, err))) break;
        float *xo = e->lean ? e->att : e->xo + r0 * e->AO;
        switch (p) {
        case P_A:
            calib__norm_rows(e, r0, nr, CALIB_T_ATTN_NORM, e->xin);
            calib__accum(e, CALIB_G_ATTN_IN, e->xin, nr);
            break;
        case P_B:
        case P_B_AGAIN:
            calib__norm_rows(e, r0, nr, CALIB_T_ATTN_NORM, e->xin);
            e->mix_r0 = r0;
            if ((st = calib__mixer(e, e->xin, ns, xo, e->AO, err))) break;
            if (p == P_B) calib__accum(e, CALIB_G_ATTN_OUT, xo, nr);
            if (e->lean) st = calib__xo_io(e, true, r0, nr, xo, err);
            break;
        case P_C:
            if (e->lean && (st = calib__xo_io(e, false, r0, nr, xo, err))) break;
            if ((st = residual(e, r0, nr, xo, e->AO, calib__wo(e), CALIB_T_BO, err))) break;
            if (e->hs_file) st = calib__hs_io(e, true, r0, nr, err);
            break;
        case P_D:
            calib__norm_rows(e, r0, nr, CALIB_T_FFN_NORM, e->xin);
            calib__accum(e, CALIB_G_FFN_IN, e->xin, nr);
            break;
        case P_E:
        case P_F:
            calib__norm_rows(e, r0, nr, CALIB_T_FFN_NORM, e->xin);
            if ((st = calib__swiglu(e, e->xin, nr, err))) break;
            if (p == P_E) {
                calib__accum(e, CALIB_G_FFN_DOWN, e->g, nr);
            } else {
                if ((st = residual(e, r0, nr, e->g, e->F, CALIB_T_WDOWN, CALIB_T_BDOWN, err)))
                    break;
                /* with per-layer inputs the tail waits for PLE_IN / PLE_PROJ */
                if (e->g4 && !e->ple_cb &&
                    (st = calib__g4_tail(e, r0, nr, CALIB_G4_TAIL_ALL, err)))
                    break;
                if (e->hs_file) st = calib__hs_io(e, true, r0, nr, err);
            }
            break;
        case P_G:
        case P_H:
        case P_I:
            st = calib__g4_tail(e, r0, nr,
                                p == P_G   ? CALIB_G4_TAIL_ACC_IN
                                : p == P_H ? CALIB_G4_TAIL_ACC_PROJ
                                           : CALIB_G4_TAIL_APPLY,
                                err);
            break;
        }
    }
    return st;
}

// --- run --------------------------------------------------------------------------------

static double since_start(const struct calib_engine *e) { return mw_now_s() - e->t_start; }

void calib__stage_ev(const struct calib_engine *e, const char *name, bool end, uint32_t layer)
{
    if (!e->on_stage) return;
    const struct calib_stage_event ev = {.stage = name, .end = end, .layer = layer,
                                         .n_layer = e->hp->n_layer,
                                         .first_layer = e->first_layer,
                                         .layers_done = e->layers_done,
                                         .seconds = since_start(e)};
    e->on_stage(e->on_stage_ud, &ev);
}

static void free_layer(struct calib_engine *e)
{
    for (int t = 0; t < CALIB_T_COUNT; t++) {
        free(e->wown[t]);
        e->wown[t] = e->w[t] = NULL;
        e->dirty[t] = false;
    }
    for (int g = 0; g < CALIB_G_ALL; g++) {
        free(e->ly.H[g]);
        e->ly.H[g] = NULL;
        e->ly.H_valid[g] = false;
    }
    free(e->xo);
    e->xo = NULL;
    calib__moe_free(e);
}

/* The layer's tensors as f32: in memory, or (lean) the big weights written
 * to the weights file one at a time and freed. */
static enum mw_status load_layer(struct calib_engine *e, uint32_t il, struct mw_err *err)
{
    enum mw_status s;
    for (int t = 0; t < CALIB_T_COUNT; t++) {
        if (!calib__model_has(e->m, il, (enum calib_tslot)t)) continue;
        const uint64_t n = calib__slot_elems(e->hp, (enum calib_tslot)t);
        bool ok = true;
        e->wown[t] = e->w[t] = calib__alloc_f(n, &ok);
        if (!ok) return MW_FAIL(err, MW_E_NOMEM, MW_ERR_OFF_NONE, "layer %u weights", il);
        if ((s = calib__model_load(e->m, il, (enum calib_tslot)t, e->w[t], n, err))) return s;
        if (e->lean && calib__big_slot((enum calib_tslot)t)) {
            e->dirty[t] = true;
            if ((s = calib__w_park(e, (enum calib_tslot)t, err))) return s;
        }
    }
    /* fused tensors: the parts are row ranges (views) of the loaded tensor */
    calib__set_views(e);
    return MW_OK;
}

static enum mw_status run_layer(struct calib_engine *e, uint32_t il,
                                const struct calib_run_opts *o, struct mw_err *err)
{
    enum mw_status s = MW_OK;
    struct calib_layer *ly = &e->ly;
    if (e->g4) calib__g4_layer(e, il); /* per-layer widths before the layer's tensors */
    calib__layer_reset(e, il);
    if ((s = load_layer(e, il, err))) return s;
    e->swa_l = rt_layer_is_swa(e->hp, il);
    e->rec = rt_layer_is_recurrent(e->hp, il);
    e->AO = e->rec ? e->Hv * e->Sd : e->Q;
    e->rope_l = e->swa_l && e->rope_swa ? e->rope_swa : e->rope;
    e->ple_cb = o->on_group && o->ple_groups && e->g4 && e->P;
    if (!o->on_group) {
        calib__stage_ev(e, "forward", false, il);
        if ((s = pass_fused(e, e->NX > 0, err))) return s;
        ly->ffn_phase = true;
        if (e->NX && (s = calib__moe_ffn(e, o, false, err))) return s;
        calib__stage_ev(e, "forward", true, il);
    } else {
        calib__stage_ev(e, "attn_in", false, il);
        if ((s = pass_stage(e, P_A, err))) return s;
        if ((s = calib__call_group(e, o, CALIB_G_ATTN_IN, err))) return s;
        calib__stage_ev(e, "attn_in", true, il);
        calib__stage_ev(e, "attn_out", false, il);
        if (!e->lean) {
            bool ok = true;
            e->xo = calib__alloc_f2(e->T, e->AO, &ok);
            if (!ok)
                return MW_FAIL(err, MW_E_NOMEM, MW_ERR_OFF_NONE,
                               "%llu x %llu attention outputs of layer %u",
                               (unsigned long long)e->T, (unsigned long long)e->AO, il);
        }
        if ((s = pass_stage(e, P_B, err))) return s;
        ly->xo_stale = false;
        if ((s = calib__call_group(e, o, CALIB_G_ATTN_OUT, err))) return s;
        if (ly->xo_stale && (s = pass_stage(e, P_B_AGAIN, err))) return s;
        ly->xo_stale = false;
        if ((s = pass_stage(e, P_C, err))) return s;
        free(e->xo);
        e->xo = NULL;
        calib__stage_ev(e, "attn_out", true, il);
        ly->ffn_phase = true;
        if (e->NX) {
            if ((s = calib__moe_ffn(e, o, true, err))) return s;
            goto layer_end;
        }
        calib__stage_ev(e, "ffn_in", false, il);
        if ((s = pass_stage(e, P_D, err))) return s;
        if ((s = calib__call_group(e, o, CALIB_G_FFN_IN, err))) return s;
        calib__stage_ev(e, "ffn_in", true, il);
        calib__stage_ev(e, "ffn_down", false, il);
        if ((s = pass_stage(e, P_E, err))) return s;
        if ((s = calib__call_group(e, o, CALIB_G_FFN_DOWN, err))) return s;
        if ((s = pass_stage(e, P_F, err))) return s;
        calib__stage_ev(e, "ffn_down", true, il);
        if (e->ple_cb) { /* gemma4's per-layer input: inp_gate, then proj */
            calib__stage_ev(e, "ple_in", false, il);
            if ((s = pass_stage(e, P_G, err))) return s;
            if ((s = calib__call_group(e, o, CALIB_G_PLE_IN, err))) return s;
            calib__stage_ev(e, "ple_in", true, il);
            calib__stage_ev(e, "ple_proj", false, il);
            if ((s = pass_stage(e, P_H, err))) return s;
            if ((s = calib__call_group(e, o, CALIB_G_PLE_PROJ, err))) return s;
            if ((s = pass_stage(e, P_I, err))) return s;
            calib__stage_ev(e, "ple_proj", true, il);
        }
    }
layer_end:
    calib__stage_ev(e, "layer", false, il);
    if (o->on_layer) {
        ly->stage = CALIB_STAGE_NONE;
        if ((s = o->on_layer(o->on_layer_ud, ly, err))) return s;
    }
    return MW_OK;
}

/* hs = token_embd[tokens]; the embedding is streamed once, only the rows
 * that occur are kept. */
static enum mw_status embed(struct calib_engine *e, struct mw_err *err)
{
    const uint32_t n_vocab = e->hp->n_vocab;
    int32_t *slot = malloc((size_t)n_vocab * sizeof *slot);
    if (!slot) return MW_FAIL(err, MW_E_NOMEM, MW_ERR_OFF_NONE, "vocabulary map");
    for (uint32_t i = 0; i < n_vocab; i++) slot[i] = -1;
    for (uint32_t sI = 0; sI < e->n_samples; sI++) {
        const int32_t *t = calib_samples_tokens(e->s, sI);
        for (uint32_t p = 0; p < e->n_pos; p++) {
            if (t[p] < 0 || (uint32_t)t[p] >= n_vocab) {
                free(slot);
                mw_err_set_where(err, "sample %u position %u", sI, p);
                return MW_FAIL(err, MW_E_VALUE, MW_ERR_OFF_NONE,
                               "token id %d outside the vocabulary (%u)", t[p], n_vocab);
            }
            slot[t[p]] = 0;
        }
    }
    uint64_t n_ids = 0;
    for (uint32_t i = 0; i < n_vocab; i++) n_ids += slot[i] == 0;
    int32_t *ids = malloc((size_t)n_ids * sizeof *ids + 1);
    bool ok = ids != NULL;
    float *rows = calib__alloc_f2(n_ids, e->E, &ok);
    enum mw_status s = MW_OK;
    if (!ok) {
        s = MW_FAIL(err, MW_E_NOMEM, MW_ERR_OFF_NONE, "%llu embedding rows",
                    (unsigned long long)n_ids);
        goto done;
    }
    n_ids = 0;
    for (uint32_t i = 0; i < n_vocab; i++)
        if (slot[i] == 0) {
            slot[i] = (int32_t)n_ids;
            ids[n_ids++] = (int32_t)i;
        }
    if ((s = calib__model_embd_rows(e->m, ids, n_ids, rows, err))) goto done;
    if (e->hp->embd_scale) { /* gemma: ggml_scale(inpL, sqrtf(n_embd)) */
        const float sc = sqrtf((float)e->E);
        for (uint64_t i = 0; i < n_ids * e->E; i++) rows[i] *= sc;
    }
    for (uint32_t sI = 0; sI < e->n_samples; sI++) {
        const int32_t *t = calib_samples_tokens(e->s, sI);
        const uint64_t r0 = (uint64_t)sI * e->n_pos;
        if (e->hs_file) e->hsb_r0 = r0, e->hsb_n = e->n_pos; /* one sample at a time via hsb */
        for (uint32_t p = 0; p < e->n_pos; p++)
            memcpy(calib__hs_at(e, r0 + p), rows + (uint64_t)slot[t[p]] * e->E,
                   (size_t)e->E * sizeof(float));
        if (e->hs_file && (s = calib__hs_io(e, true, r0, e->n_pos, err))) goto done;
    }
done:
    free(rows);
    free(ids);
    free(slot);
    return s;
}

/* The RoPE tables of the samples' positions, as the runtime picks them per
 * layer for a context of n_pos positions (rt_rope_layer_params): the layers
 * that do not slide, and (when they differ: gemma3's own base, gemma2 none)
 * the sliding ones. Frequency factors: rope_freqs.weight, or phi3's
 * LongRoPE short/long factors. */
static enum mw_status rope_tables(struct calib_engine *e, bool *ok, struct mw_err *err)
{
    const struct rt_hparams *hp = e->hp;
    const struct calib_model *m = e->m;
    enum mw_status st = MW_OK;
    float *ff = NULL;
    int32_t il_swa = -1, il_full = -1;
    for (uint32_t il = 0; il < hp->n_layer; il++) {
        if (rt_layer_is_swa(hp, il) && il_swa < 0) il_swa = (int32_t)il;
        if (!rt_layer_is_swa(hp, il) && il_full < 0) il_full = (int32_t)il;
    }
    const struct rt_rope_params pf = rt_rope_layer_params(hp, il_full >= 0 ? (uint32_t)il_full
                                                                        : 0, e->n_pos);
    const struct rt_rope_params ps = rt_rope_layer_params(hp, il_swa >= 0 ? (uint32_t)il_swa
                                                                       : 0, e->n_pos);
    const bool two = il_swa >= 0 && il_full >= 0 &&
                     (pf.base != ps.base || pf.freq_scale != ps.freq_scale ||
                      pf.attn_factor != ps.attn_factor);
    const bool factors = calib__model_has_rope_freqs(m) ||
                         (hp->has_rope_long && calib__model_has_rope_factors(m, pf.long_factors));
    if (factors) {
        ff = calib__alloc_f(hp->n_rot / 2, ok);
        if (!*ok) return MW_FAIL(err, MW_E_NOMEM, MW_ERR_OFF_NONE, "rope frequency factors");
        st = calib__model_has_rope_freqs(m) ? calib__model_rope_freqs(m, ff, err)
                                            : calib__model_rope_factors(m, pf.long_factors, ff,
                                                                        err);
        if (st) goto done;
    }
    if (two) {
        e->rope_swa = calib__alloc_f2(e->n_pos, hp->n_rot, ok);
        if (!*ok) {
            st = MW_FAIL(err, MW_E_NOMEM, MW_ERR_OFF_NONE, "RoPE table");
            goto done;
        }
    }
    for (uint32_t p = 0; p < e->n_pos; p++) {
        /* all layers alike (no sliding layer, or one table for both): the
         * parameters of layer 0 */
        const struct rt_rope_params *pp = two || il_full >= 0 ? &pf : &ps;
        rt_rope_cache_ex(hp->n_rot, pp, ff, (int32_t)p, e->rope + (uint64_t)p * hp->n_rot);
        if (two)
            rt_rope_cache_ex(hp->n_rot, &ps, ff, (int32_t)p,
                             e->rope_swa + (uint64_t)p * hp->n_rot);
    }
done:
    free(ff);
    return st;
}

static void engine_free(struct calib_engine *e)
{
    free_layer(e);
    mw_pool_free(e->pool);
    free(e->hs);
    calib__spill_close(e);
    free(e->rope);
    free(e->rope_swa);
    free(e->xin);
    free(e->q);
    free(e->qg);
    free(e->gt);
    free(e->ba);
    free(e->cst);
    free(e->k);
    free(e->v);
    free(e->att);
    free(e->g);
    free(e->u);
    free(e->y);
    free(e->ubuf);
    free(e->S);
    free(e->one);
    free(e->lg);
    free(e->xe);
    free(e->ge);
    free(e->ue);
    free(e->ye);
    free(e->ridx);
    calib__g4_free(e);
    calib_stats_free(e->st);
}

void calib__engine_dims(struct calib_engine *e, const struct calib_model *m,
                        const struct calib_samples *s, const struct calib_run_opts *o)
{
    calib__engine_dims_hp(e, calib_model_hparams(m), calib_samples_count(s),
                          calib_samples_n_pos(s), o);
    e->m = m;
    e->s = s;
}

void calib__engine_dims_hp(struct calib_engine *e, const struct rt_hparams *hp,
                           uint32_t n_samples, uint32_t n_pos, const struct calib_run_opts *o)
{
    e->hp = hp;
    e->n_samples = n_samples;
    e->n_pos = n_pos;
    e->T = (uint64_t)e->n_samples * e->n_pos;
    const uint32_t br = o->batch_rows ? o->batch_rows : CALIB_DEFAULT_BATCH_ROWS;
    e->spb = br / e->n_pos ? br / e->n_pos : 1;
    if (e->spb > e->n_samples) e->spb = e->n_samples;
    e->rows_b = (uint64_t)e->spb * e->n_pos;
    e->E = hp->n_embd;
    e->hd = hp->head_dim;
    e->Q = (uint64_t)hp->n_head * hp->head_dim;
    e->KV = (uint64_t)hp->n_head_kv * hp->head_dim;
    e->F = hp->n_expert ? hp->n_ff_shexp : hp->n_ff;
    e->NX = hp->n_expert;
    e->K = hp->n_expert_used;
    e->FX = hp->n_ff_exp;
    e->n_rep = hp->n_head / hp->n_head_kv;
    e->g4 = hp->arch == RT_ARCH_GEMMA4;
    if (e->g4) e->KV = rt_kv_dim_max(hp); /* buffers: the widest layer's */
    calib__ssm_dims(e);
    e->hs_fd = e->xo_fd = e->w_fd = -1;
    /* gemma / phi3 scale the queries after RoPE and give the softmax 1
     * (rt_attn_scales); llama / qwen: 1/sqrt(head_dim) in the softmax */
    rt_attn_scales(hp, &e->q_mul, &e->kq_scale);
}

/* Resume: the hidden states entering first_layer from the caller, batch by
 * batch of whole samples. */
static enum mw_status load_hidden(struct calib_engine *e, const struct calib_run_opts *o,
                                  struct mw_err *err)
{
    enum mw_status s = MW_OK;
    for (uint32_t s0 = 0; s0 < e->n_samples && !s; s0 += e->spb) {
        const uint64_t r0 = (uint64_t)s0 * e->n_pos;
        const uint64_t nr = (uint64_t)calib__batch_samples(e, s0) * e->n_pos;
        if (!e->hs_file) {
            s = o->load_hidden(o->load_hidden_ud, r0, nr, e->hs + r0 * e->E, err);
            continue;
        }
        e->hsb_r0 = r0;
        e->hsb_n = 0;
        if ((s = o->load_hidden(o->load_hidden_ud, r0, nr, e->hsb, err))) break;
        e->hsb_n = nr;
        s = calib__hs_io(e, true, r0, nr, err);
    }
    return s;
}

enum mw_status calib_run(struct calib_model *m, const struct calib_samples *s,
                         const struct calib_run_opts *o, struct calib_stats **out,
                         struct mw_err *err)
{
    *out = NULL;
    mw_err_clear(err); /* no path left over from calib_model_open's tokenizer file */
    struct calib_run_opts opt = {0};
    if (o) opt = *o;
    if (opt.n_threads == 0) opt.n_threads = 1;
    if (opt.n_threads > CALIB_MAX_THREADS)
        return MW_FAIL(err, MW_E_USAGE, MW_ERR_OFF_NONE, "--threads %u exceeds the limit %u",
                       opt.n_threads, CALIB_MAX_THREADS);
    struct calib_engine e = {0};
    e.t_start = mw_now_s();
    calib__engine_dims(&e, m, s, &opt);
    const struct rt_hparams *hp = e.hp;
    e.on_stage = opt.on_stage;
    e.on_stage_ud = opt.on_stage_ud;
    e.first_layer = opt.first_layer;
    if (opt.first_layer && (opt.first_layer >= hp->n_layer || !opt.load_hidden))
        return MW_FAIL(err, MW_E_USAGE, MW_ERR_OFF_NONE,
                       opt.load_hidden ? "first layer %u of a model of %u layers"
                                       : "first layer %u (of %u) without load_hidden",
                       opt.first_layer, hp->n_layer);
    /* the delta net's sizes, before the plan uses them */
    if (hp->full_attn_interval &&
        (e.Sd == 0 || e.Hk == 0 || e.Hv % e.Hk != 0 || e.Kc == 0 ||
         (uint64_t)hp->ssm_d_inner != e.Hv * e.Sd || e.Hv * e.Sd > INT32_MAX))
        return MW_FAIL(err, MW_E_FORMAT, MW_ERR_OFF_NONE,
                       "gated delta net: state size %llu, %llu key heads, %llu value heads, "
                       "inner size %u, conv kernel %llu (value heads must be a multiple of key "
                       "heads, inner size = value heads x state size)",
                       (unsigned long long)e.Sd, (unsigned long long)e.Hk,
                       (unsigned long long)e.Hv, hp->ssm_d_inner, (unsigned long long)e.Kc);
    /* --max-memory: fewer samples per batch, or fail here, before anything
     * large is allocated */
    e.spb = calib__plan_batch(&e, &opt, &e.hs_file, err);
    if (e.spb == 0) return MW_E_NOMEM;
    e.rows_b = (uint64_t)e.spb * e.n_pos;
    e.max_memory = opt.max_memory;
    if (e.NX && e.hs_file) {
        mw_err_clear(err);
        mw_err_set_path(err, calib_model_path(m));
        return MW_FAIL(err, MW_E_NOMEM, MW_ERR_OFF_NONE,
                       "a mixture-of-experts model is calibrated with its hidden states in "
                       "memory (%llu MiB for %u samples x %u positions), which --max-memory "
                       "%llu bytes does not allow: use fewer --samples or a shorter --seq-len, "
                       "or raise --max-memory",
                       (unsigned long long)(calib_run_peak_bytes(m, s, &opt) >> 20),
                       e.n_samples, e.n_pos, (unsigned long long)opt.max_memory);
    }
    if (e.g4 && e.hs_file) {
        mw_err_clear(err);
        mw_err_set_path(err, calib_model_path(m));
        return MW_FAIL(err, MW_E_NOMEM, MW_ERR_OFF_NONE,
                       "a gemma4 model is calibrated with its hidden states in memory (%llu MiB "
                       "for %u samples x %u positions), which --max-memory %llu bytes does not "
                       "allow: use fewer --samples or a shorter --seq-len, or raise --max-memory",
                       (unsigned long long)(calib_run_peak_bytes(m, s, &opt) >> 20),
                       e.n_samples, e.n_pos, (unsigned long long)opt.max_memory);
    }
    if (hp->full_attn_interval && e.hs_file) {
        mw_err_clear(err);
        mw_err_set_path(err, calib_model_path(m));
        return MW_FAIL(err, MW_E_NOMEM, MW_ERR_OFF_NONE,
                       "a model with gated delta-net layers is calibrated with its hidden states "
                       "in memory (%llu MiB for %u samples x %u positions), which --max-memory "
                       "%llu bytes does not allow: use fewer --samples or a shorter --seq-len, "
                       "or raise --max-memory",
                       (unsigned long long)(calib_run_peak_bytes(m, s, &opt) >> 20),
                       e.n_samples, e.n_pos, (unsigned long long)opt.max_memory);
    }
    if (e.NX && (e.NX > RT_MAX_EXPERTS || e.K == 0 || e.K > e.NX || e.FX == 0))
        return MW_FAIL(err, MW_E_FORMAT, MW_ERR_OFF_NONE, "%llu experts, %llu used, width %llu",
                       (unsigned long long)e.NX, (unsigned long long)e.K,
                       (unsigned long long)e.FX);
    /* BLAS takes int sizes */
    if (e.rows_b > INT32_MAX || e.E > INT32_MAX || 2 * e.Q > INT32_MAX || e.F > INT32_MAX ||
        e.AOmax > INT32_MAX || e.C > INT32_MAX ||
        e.FX > INT32_MAX || e.n_pos > INT32_MAX / 2)
        return MW_FAIL(err, MW_E_UNSUPPORTED, MW_ERR_OFF_NONE, "dimensions too large for BLAS");
    mw_blas_init(); /* one-threaded OpenBLAS; the pool gives the parallelism */
    enum mw_status st = mw_pool_init(opt.n_threads, &e.pool, err);
    if (st) return st;
    if ((st = calib__stats_alloc(&e, err))) goto fail;

    bool ok = true;
    const uint64_t rb = e.rows_b;
    e.lean = e.hs_file;
    if (e.lean) {
        if ((st = calib__spill_open(&e, &opt, &ok, err))) goto fail;
    } else {
        e.hs = calib__alloc_f2(e.T, e.E, &ok);
    }
    e.rope = calib__alloc_f2(e.n_pos, hp->n_rot, &ok);
    e.xin = calib__alloc_f2(rb, e.E, &ok);
    e.q = calib__alloc_f2(rb, e.Q, &ok);
    e.qg = calib__alloc_f2(rb, hp->attn_out_gate && 2 * e.Q > e.C ? 2 * e.Q : e.C, &ok);
    e.gt = calib__alloc_f2(rb, hp->attn_out_gate || e.C ? e.AOmax : 0, &ok);
    e.ba = calib__alloc_f2(rb, 2 * e.Hv, &ok);
    e.cst = calib__alloc_f2(opt.n_threads, calib__ssm_thread_floats(&e), &ok);
    e.k = calib__alloc_f2(rb, e.KV, &ok);
    e.v = calib__alloc_f2(rb, e.KV, &ok);
    e.att = calib__alloc_f2(rb, e.AOmax, &ok);
    e.g = calib__alloc_f2(rb, e.F, &ok);
    e.u = calib__alloc_f2(rb, e.F, &ok);
    e.y = calib__alloc_f2(rb, e.E, &ok);
    e.ubuf = calib__alloc_f2(rb, calib__max3(e.E, e.AOmax, e.F), &ok);
    e.S = alloc_f3(opt.n_threads, e.n_pos, e.n_pos, &ok);
    e.one = calib__alloc_f2(e.n_pos, e.AOmax, &ok);
    if (e.NX) calib__moe_scratch(&e, &ok);
    if (!ok) {
        st = MW_FAIL(err, MW_E_NOMEM, MW_ERR_OFF_NONE,
                     "activations for %u samples x %u positions (hidden %llu): about %llu MiB",
                     e.n_samples, e.n_pos, (unsigned long long)e.E,
                     (unsigned long long)(calib_run_peak_bytes(m, s, &opt) >> 20));
        goto fail;
    }
    if ((st = e.g4 ? calib__g4_setup(&e, &ok, err) : rope_tables(&e, &ok, err))) goto fail;
    const double t_run = mw_now_s();
    calib__stage_ev(&e, "embed", false, e.first_layer);
    if ((st = e.first_layer || opt.load_hidden ? load_hidden(&e, &opt, err) : embed(&e, err)))
        goto fail;
    calib__stage_ev(&e, "embed", true, e.first_layer);

    for (uint32_t il = e.first_layer; il < hp->n_layer; il++) {
        st = run_layer(&e, il, &opt, err);
        free_layer(&e);
        if (st) goto fail;
        e.layers_done++;
        calib__stage_ev(&e, "layer", true, il);
        if (opt.progress) opt.progress(opt.progress_ud, il + 1, hp->n_layer, since_start(&e));
    }
    e.st->tm.total_s = mw_now_s() - t_run;
    *out = e.st;
    e.st = NULL;
    engine_free(&e);
    return MW_OK;
fail:
    engine_free(&e);
    return st;
}
