/*
 * calib/calib_g4moe.c — the FFN of a gemma4 layer with experts beside the
 * dense MLP (26B-A4B) in the calibration engine, the runtime's pass
 * (runtime/rt_gemma4.c, llama.cpp's src/models/gemma4.cpp):
 *
 *   x: the residual after the attention
 *   dense = RMSNorm(down . GEGLU(RMSNorm(x) * ffn_norm)) * post_ffw_norm_1
 *   router: softmax(ffn_gate_inp . (RMSNorm(x) / sqrt(E) * ffn_gate_inp.scale)),
 *           top-k, the k weights renormalised
 *   experts = sum over the k routed e of w_e * scale[e] * (down_e . GEGLU(
 *             gate_up_e . (RMSNorm(x) * pre_ffw_norm_2)))
 *   x += RMSNorm(dense + RMSNorm(experts) * post_ffw_norm_2) * post_ffw_norm
 *   x *= layer_output_scale                                  (calib__g4_tail)
 *
 * calib_moe.c runs it with the other MoE FFNs (the routing pass, the dense
 * MLP in the shared expert's place and with its callbacks, the experts one
 * by one); this file has what is gemma4's own: the router's input (its own
 * imatrix entry: no stored norm makes it, so no AWQ fold reaches the
 * router), and the join of the two branches into the residual. The experts
 * are summed by expert index (the runtime: in top-k order; with k = 2 the
 * same bits, addition being commutative).
 */
#include "calib/calib_int.h"
#include "runtime/rt_ops.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

struct g4x_job {
    struct calib_engine *e;
    uint64_t r0, nr;
    bool join;
};

static void g4x_task(void *arg, unsigned ith, unsigned nth)
{
    const struct g4x_job *J = arg;
    struct calib_engine *e = J->e;
    const uint64_t E = e->E;
    const float eps = e->hp->rms_eps;
    uint64_t lo, hi;
    calib__split(J->nr, ith, nth, &lo, &hi);
    for (uint64_t r = lo; r < hi; r++) {
        const float *x = calib__hs_at(e, J->r0) + r * E;
        if (!J->join) { /* the router's input into y */
            float *t = e->y + r * E;
            const float se = 1.0f / sqrtf((float)E), *sc = e->w[CALIB_T_GATE_INP_S];
            memcpy(t, x, (size_t)E * sizeof(float));
            rt_rmsnorm_nw(t, E, eps);
            for (uint64_t i = 0; i < E; i++) t[i] = t[i] * se * sc[i];
            continue;
        }
        /* the experts' sum normed, added to the dense branch, the sum normed
         * and added to the residual */
        float *t = e->acc + (J->r0 + r) * E, *xo = calib__hs_at(e, J->r0) + r * E;
        const float *d = e->acc2 + (J->r0 + r) * E;
        rt_rmsnorm(t, t, e->w[CALIB_T_POST_NORM_2], E, eps);
        for (uint64_t i = 0; i < E; i++) t[i] = d[i] + t[i];
        rt_rmsnorm(t, t, e->w[CALIB_T_FFN_POST_NORM], E, eps);
        for (uint64_t i = 0; i < E; i++) xo[i] = t[i] + xo[i];
    }
}

void calib__g4_route(struct calib_engine *e, uint64_t r0, uint64_t nr)
{
    struct g4x_job J = {.e = e, .r0 = r0, .nr = nr, .join = false};
    mw_pool_run(e->pool, g4x_task, &J);
    calib__accum_gs(e, &e->st->rtr[e->ly.il], e->y, nr);
    calib__linear(e, e->y, nr, e->E, e->w[CALIB_T_GATE_INP], NULL, e->NX, e->lg, e->NX);
    for (uint64_t r = 0; r < nr; r++)
        rt_moe_route(e->lg + r * e->NX, (uint32_t)e->NX, (uint32_t)e->K, true, e->ridx,
                     e->sel + (r0 + r) * e->K, e->wt + (r0 + r) * e->K);
}

void calib__g4_dense_out(struct calib_engine *e, uint64_t r0, uint64_t nr)
{
    calib__run_rows(e, CALIB_OP_NORM, nr, e->E, e->acc2 + r0 * e->E, e->y,
                    e->w[CALIB_T_POST_NORM_1], 0);
}

enum mw_status calib__g4_join(struct calib_engine *e, uint64_t r0, uint64_t nr,
                              struct mw_err *err)
{
    struct g4x_job J = {.e = e, .r0 = r0, .nr = nr, .join = true};
    mw_pool_run(e->pool, g4x_task, &J);
    return calib__g4_tail(e, r0, nr, CALIB_G4_TAIL_ALL, err);
}

enum mw_status calib__g4_experts_all(struct calib_engine *e, const struct calib_run_opts *o,
                                     struct mw_err *err)
{
    const uint64_t E = e->E;
    struct calib_group_stats gs = {.n_in = E};
    double *buf = calloc((size_t)(2 * E), sizeof(double));
    if (!buf)
        return MW_FAIL(err, MW_E_NOMEM, MW_ERR_OFF_NONE, "layer %u: the experts' input statistics",
                       e->ly.il);
    gs.sum_sq = buf;
    gs.sum_abs = buf + E;
    for (uint32_t s0 = 0; s0 < e->n_samples; s0 += e->spb) {
        const uint64_t r0 = (uint64_t)s0 * e->n_pos;
        const uint64_t nr = (uint64_t)calib__batch_samples(e, s0) * e->n_pos;
        calib__norm_rows(e, r0, nr, CALIB_T_PRE_NORM_2, e->xin);
        calib__accum_gs(e, &gs, e->xin, nr);
    }
    e->xall = &gs;
    e->ly.expert = CALIB_EXPERT_ALL;
    enum mw_status s = calib__call_group(e, o, CALIB_G_FFN_IN, err);
    e->ly.expert = -1;
    e->xall = NULL;
    free(buf);
    return s;
}

enum mw_status calib__g4_moe_stats_alloc(struct calib_engine *e, struct mw_err *err)
{
    struct calib_stats *st = e->st;
    const uint64_t E = e->E, L = st->n_layer;
    uint64_t n;
    size_t sz;
    if (!mw_mul_u64(2 * E, L, &n) || !mw_mul_u64(n, sizeof(double), &n) ||
        !mw_u64_to_size(n, &sz) || !(st->rtr = calloc((size_t)L, sizeof *st->rtr)) ||
        !(st->rtrbuf = calloc(1, sz)))
        return MW_FAIL(err, MW_E_NOMEM, MW_ERR_OFF_NONE, "router input statistics");
    for (uint64_t il = 0; il < L; il++) {
        st->rtr[il].n_in = E;
        st->rtr[il].sum_sq = st->rtrbuf + il * 2 * E;
        st->rtr[il].sum_abs = st->rtrbuf + il * 2 * E + E;
    }
    return MW_OK;
}
