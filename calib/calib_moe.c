/*
 * calib/calib_moe.c — the FFN of a mixture-of-experts layer in the
 * calibration engine.
 *
 * A MoE layer's FFN (llama.cpp's build_moe_ffn, as runtime/rt.h): after the
 * attention residual, one pass over the batches normalizes every row
 * (statistics of ffn_gate_inp's input), runs the f32 router and routes each
 * row (rt_moe_route: softmax, top-k in ggml's argsort order, renormalized
 * for llama / qwen3moe); qwen2moe's shared expert adds sigmoid(gate) times
 * its output. Then expert by expert (ascending): the rows routed to it, in
 * row order, in chunks of CALIB_XCHUNK rows (a fixed tiling: the same bits
 * for any batch size and thread count), their statistics (gate/up input, then
 * act(gate) * up), the expert's output times the row's routing weight added
 * to the FFN output. Only after the last expert does the FFN output join the
 * residual stream (every expert reads the same normed rows). Sums run in a
 * fixed order: the shared expert first, then the experts by index (llama.cpp
 * adds the k selected experts in slot order: the last bits may differ).
 * With an on_group callback, per expert: on_group(FFN_IN) with the expert's
 * statistics, then its down input, on_group(FFN_DOWN), then its output, from
 * the weights as the callbacks left them (calib_layer_expert tells which).
 * gemma4's experts beside a dense MLP take the same path with the dense MLP
 * in the shared expert's place: its router input, the experts' own input
 * norm and output scales, and the join of the two branches are
 * calib_g4moe.c's.
 */
#include "calib/calib_int.h"
#include "runtime/rt_ops.h"

#include <stdlib.h>
#include <string.h>

/* Y (nr, n_out) = X W^T with the expert chunks' fixed tiling */
static void xlinear(struct calib_engine *e, const float *X, uint64_t nr, uint64_t n_in,
                    const float *W, uint64_t n_out, float *Y)
{
    calib__gemm(e, X, nr, n_in, W, n_out, Y, n_out, CALIB_XCHUNK);
}

void calib__moe_expert_chunk(struct calib_engine *e, uint64_t c0, uint64_t n, bool act)
{
    /* gemma4: the experts read RMSNorm(x) * pre_ffw_norm_2 */
    struct calib_row_job J = {.e = e, .op = CALIB_OP_GNORM, .n_rows = n, .n = e->E, .dst = e->xe,
                              .w = e->w[e->g4 ? CALIB_T_PRE_NORM_2 : CALIB_T_FFN_NORM],
                              .idx = e->xrow + c0};
    mw_pool_run(e->pool, calib__row_task, &J);
    if (!act) return;
    const uint64_t ex = (uint64_t)e->ly.expert, m = e->FX * e->E;
    /* gemma4's ffn_gate_up_exps: per expert gate rows, then up rows */
    const float *wg = e->g4 ? e->w[CALIB_T_UP_EXPS] + ex * 2 * m : e->w[CALIB_T_GATE_EXPS] + ex * m;
    const float *wu = e->g4 ? wg + m : e->w[CALIB_T_UP_EXPS] + ex * m;
    xlinear(e, e->xe, n, e->E, wg, e->FX, e->ge);
    xlinear(e, e->xe, n, e->E, wu, e->FX, e->ue);
    calib__run_rows(e, CALIB_OP_SWIGLU, n, e->FX, e->ge, e->ue, NULL, 0);
}

/* acc[row] += weight * (ge Wdown^T) for chunk rows [c0, c0 + n) (gemma4:
 * the output times ffn_down_exps.scale[expert] first, as the runtime) */
static void expert_out(struct calib_engine *e, uint64_t c0, uint64_t n)
{
    const uint64_t ex = (uint64_t)e->ly.expert;
    xlinear(e, e->ge, n, e->FX, e->w[CALIB_T_DOWN_EXPS] + ex * e->E * e->FX, e->E, e->ye);
    const float *xs = e->w[CALIB_T_DOWN_EXPS_S];
    if (xs)
        for (uint64_t i = 0; i < n * e->E; i++) e->ye[i] = e->ye[i] * xs[ex];
    for (uint64_t i = 0; i < n; i++) {
        float *o = e->acc + e->xrow[c0 + i] * e->E;
        const float *y = e->ye + i * e->E, w = e->xw[c0 + i];
        for (uint64_t j = 0; j < e->E; j++) o[j] += w * y[j];
    }
}

/* the rows routed to expert ex, ascending, with their weights */
static void expert_rows(struct calib_engine *e, uint64_t ex)
{
    e->xn = 0;
    for (uint64_t r = 0; r < e->T; r++)
        for (uint64_t k = 0; k < e->K; k++)
            if ((uint64_t)e->sel[r * e->K + k] == ex) {
                e->xrow[e->xn] = r;
                e->xw[e->xn++] = e->wt[r * e->K + k];
                break;
            }
}

/* batch rows [r0, r0 + nr), normed in xin: router logits and routing, the
 * shared expert's gate logit */
static void moe_route(struct calib_engine *e, uint64_t r0, uint64_t nr)
{
    calib__linear(e, e->xin, nr, e->E, e->w[CALIB_T_GATE_INP], NULL, e->NX, e->lg, e->NX);
    for (uint64_t r = 0; r < nr; r++)
        rt_moe_route(e->lg + r * e->NX, (uint32_t)e->NX, (uint32_t)e->K, e->hp->moe_norm_w,
                     e->ridx, e->sel + (r0 + r) * e->K, e->wt + (r0 + r) * e->K);
    if (e->F)
        calib__linear(e, e->xin, nr, e->E, e->w[CALIB_T_GATE_INP_SHEXP], NULL, 1, e->sgate + r0, 1);
}

/* the shared expert on batch rows [r0, r0 + nr) (normed in xin): its down
 * input's statistics (stats), and (out) its gated output into acc */
static enum mw_status shexp_rows(struct calib_engine *e, uint64_t r0, uint64_t nr, bool stats,
                                 bool out, struct mw_err *err)
{
    enum mw_status s = calib__swiglu(e, e->xin, nr, err);
    if (s) return s;
    if (stats) calib__accum(e, CALIB_G_FFN_DOWN, e->g, nr);
    if (!out) return MW_OK;
    if ((s = calib__linear_w(e, e->g, nr, e->F, CALIB_T_WDOWN, CALIB_T_BDOWN, e->E, e->y, e->E,
                             err)))
        return s;
    if (e->g4) { /* gemma4's dense MLP: normed by post_ffw_norm_1, kept for the join */
        calib__g4_dense_out(e, r0, nr);
        return MW_OK;
    }
    for (uint64_t r = 0; r < nr; r++) {
        const float gt = rt_moe_shexp_gate(e->sgate[r0 + r]);
        float *o = e->acc + (r0 + r) * e->E;
        const float *y = e->y + r * e->E;
        for (uint64_t j = 0; j < e->E; j++) o[j] += gt * y[j];
    }
    return MW_OK;
}

void calib__moe_free(struct calib_engine *e)
{
    free(e->sel);
    free(e->wt);
    free(e->sgate);
    free(e->acc);
    free(e->acc2);
    free(e->xrow);
    free(e->xw);
    e->sel = NULL;
    e->wt = e->sgate = e->acc = e->acc2 = e->xw = NULL;
    e->xrow = NULL;
    e->xn = 0;
}

/* The FFN of a MoE layer (see above); cb: with on_group callbacks. */
enum mw_status calib__moe_ffn(struct calib_engine *e, const struct calib_run_opts *o, bool cb,
                              struct mw_err *err)
{
    struct calib_layer *ly = &e->ly;
    const uint32_t il = ly->il;
    const bool shexp = e->F > 0;
    enum mw_status s = MW_OK;
    bool ok = true;
    uint64_t tk = 0;
    if (!mw_mul_u64(e->T, e->K, &tk)) ok = false;
    e->sel = ok && tk <= SIZE_MAX / sizeof(int32_t) ? malloc((size_t)tk * sizeof(int32_t)) : NULL;
    if (!e->sel) ok = false;
    e->wt = calib__alloc_f(tk, &ok);
    if (shexp && !e->g4) e->sgate = calib__alloc_f(e->T, &ok);
    e->xw = calib__alloc_f(e->T, &ok);
    e->xrow = ok && e->T <= SIZE_MAX / sizeof(uint64_t) ? malloc((size_t)e->T * sizeof(uint64_t))
                                                        : NULL;
    if (!e->xrow) ok = false;
    uint64_t te = 0;
    if (!mw_mul_u64(e->T, e->E, &te) || te > SIZE_MAX / sizeof(float)) ok = false;
    if (ok) e->acc = calloc((size_t)te, sizeof(float));
    if (ok && e->g4) e->acc2 = calib__alloc_f(te, &ok);
    if (!ok || !e->acc) {
        calib__moe_free(e);
        return MW_FAIL(err, MW_E_NOMEM, MW_ERR_OFF_NONE,
                       "layer %u: routing and FFN output of %llu rows", il,
                       (unsigned long long)e->T);
    }
    if (cb) calib__stage_ev(e, "ffn_in", false, il);
    /* the router's input, the routing (and without callbacks the shared expert) */
    for (uint32_t s0 = 0; s0 < e->n_samples && !s; s0 += e->spb) {
        const uint64_t r0 = (uint64_t)s0 * e->n_pos;
        const uint64_t nr = (uint64_t)calib__batch_samples(e, s0) * e->n_pos;
        calib__norm_rows(e, r0, nr, CALIB_T_FFN_NORM, e->xin);
        calib__accum(e, CALIB_G_FFN_IN, e->xin, nr);
        if (e->g4)
            calib__g4_route(e, r0, nr);
        else
            moe_route(e, r0, nr);
        if (shexp && !cb) s = shexp_rows(e, r0, nr, true, true, err);
    }
    if (!s && cb && shexp) s = calib__call_group(e, o, CALIB_G_FFN_IN, err);
    if (cb) {
        calib__stage_ev(e, "ffn_in", true, il);
        calib__stage_ev(e, "ffn_down", false, il);
    }
    for (int pass = 0; cb && shexp && pass < 2 && !s; pass++) {
        for (uint32_t s0 = 0; s0 < e->n_samples && !s; s0 += e->spb) {
            const uint64_t r0 = (uint64_t)s0 * e->n_pos;
            const uint64_t nr = (uint64_t)calib__batch_samples(e, s0) * e->n_pos;
            calib__norm_rows(e, r0, nr, CALIB_T_FFN_NORM, e->xin);
            s = shexp_rows(e, r0, nr, pass == 0, pass == 1, err);
        }
        if (!s && pass == 0) s = calib__call_group(e, o, CALIB_G_FFN_DOWN, err);
    }
    /* gemma4: the experts' common input norm, once before them */
    if (!s && cb && e->g4) s = calib__g4_experts_all(e, o, err);
    for (uint64_t ex = 0; ex < e->NX && !s; ex++) {
        expert_rows(e, ex);
        ly->expert = (int32_t)ex;
        if (!cb) {
            for (uint64_t c0 = 0; c0 < e->xn; c0 += CALIB_XCHUNK) {
                const uint64_t n = e->xn - c0 < CALIB_XCHUNK ? e->xn - c0 : CALIB_XCHUNK;
                calib__moe_expert_chunk(e, c0, n, true);
                calib__accum_x(e, CALIB_G_FFN_IN, ex, e->xe, n);
                calib__accum_x(e, CALIB_G_FFN_DOWN, ex, e->ge, n);
                expert_out(e, c0, n);
            }
        } else {
            for (uint64_t c0 = 0; c0 < e->xn; c0 += CALIB_XCHUNK) {
                const uint64_t n = e->xn - c0 < CALIB_XCHUNK ? e->xn - c0 : CALIB_XCHUNK;
                calib__moe_expert_chunk(e, c0, n, false);
                calib__accum_x(e, CALIB_G_FFN_IN, ex, e->xe, n);
            }
            if ((s = calib__call_group(e, o, CALIB_G_FFN_IN, err))) break;
            for (uint64_t c0 = 0; c0 < e->xn; c0 += CALIB_XCHUNK) {
                const uint64_t n = e->xn - c0 < CALIB_XCHUNK ? e->xn - c0 : CALIB_XCHUNK;
                calib__moe_expert_chunk(e, c0, n, true);
                calib__accum_x(e, CALIB_G_FFN_DOWN, ex, e->ge, n);
            }
            if ((s = calib__call_group(e, o, CALIB_G_FFN_DOWN, err))) break;
            for (uint64_t c0 = 0; c0 < e->xn; c0 += CALIB_XCHUNK) {
                const uint64_t n = e->xn - c0 < CALIB_XCHUNK ? e->xn - c0 : CALIB_XCHUNK;
                calib__moe_expert_chunk(e, c0, n, true);
                expert_out(e, c0, n);
            }
        }
        ly->expert = -1;
    }
    ly->expert = -1;
    if (!s) /* the FFN output joins the residual stream (gemma4: the two branches) */
        for (uint32_t s0 = 0; s0 < e->n_samples && !s; s0 += e->spb) {
            const uint64_t r0 = (uint64_t)s0 * e->n_pos;
            const uint64_t nr = (uint64_t)calib__batch_samples(e, s0) * e->n_pos;
            if (e->g4)
                s = calib__g4_join(e, r0, nr, err);
            else
                calib__run_rows(e, CALIB_OP_ADD, nr, e->E, calib__hs_at(e, r0),
                                e->acc + r0 * e->E, NULL, 0);
        }
    if (cb && !s) calib__stage_ev(e, "ffn_down", true, il);
    calib__moe_free(e);
    return s;
}

void calib__moe_scratch(struct calib_engine *e, bool *ok)
{
    e->lg = calib__alloc_f2(e->rows_b, e->NX, ok);
    e->xe = calib__alloc_f2(CALIB_XCHUNK, e->E, ok);
    e->ge = calib__alloc_f2(CALIB_XCHUNK, e->FX, ok);
    e->ue = calib__alloc_f2(CALIB_XCHUNK, e->FX, ok);
    e->ye = calib__alloc_f2(CALIB_XCHUNK, e->E, ok);
    e->ridx = *ok ? malloc((size_t)e->NX * sizeof(int32_t)) : NULL;
    if (!e->ridx) *ok = false;
}
