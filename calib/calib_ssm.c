/*
 * calib/calib_ssm.c — the gated delta net (the recurrent layers of qwen35,
 * qwen35moe and qwen3next; llama.cpp's build_layer_attn_linear) in the
 * calibration engine, over whole samples.
 *
 * The projections run batched over every row of the batch with BLAS, as the
 * engine's other linears (calib__linear_w: the same fixed tiles, row tiles
 * per sample):
 *   qkv = X attn_qkv^T      (C = 2 Hk S + Hv S channels: q, k, v)
 *   z   = X attn_gate^T     (Hv S)
 *   b   = X ssm_beta^T, a = X ssm_alpha^T  (Hv each; qwen3next: one ssm_ba,
 *                           per key head [b (Hv/Hk) | a (Hv/Hk)])
 * then each sample's tokens in order, with the runtime's own scalar row ops
 * (runtime/rt_ops.h): the causal depthwise conv with SiLU (rt_ssm_conv_step,
 * the state starting at zero at the sample's first token), the L2 norm of
 * each q and k head (rt_l2norm_heads, eps = rms_eps), the gates
 * (rt_delta_net_gates: g = ssm_a softplus(a + ssm_dt), beta = sigmoid(b)),
 * then per value head the delta rule over its S x S state (rt_delta_net_step;
 * v head h reads key head h % Hk when the converter tiled the V heads,
 * qwen35 / qwen35moe, else h / (Hv / Hk), qwen3next) and the gated output
 * norm (rt_delta_net_out_norm: rmsnorm(o) ssm_norm silu(z)). The result is
 * the ATTN_OUT group's rows (Hv S wide), which ssm_out reads.
 *
 * Threads: the conv runs one sample per task, the recurrence one (sample,
 * value head) pair per task, each with its own state; every output value is
 * computed by one thread in a fixed order, so the bits do not depend on the
 * thread count or the samples per batch.
 */
#include "calib/calib_int.h"
#include "runtime/rt_ops.h"

#include <string.h>

/* The projections have no bias: CALIB_T_BQ, which a recurrent layer never
 * has, stands for "none" in calib__linear_w. */

void calib__ssm_dims(struct calib_engine *e)
{
    const struct rt_hparams *hp = e->hp;
    e->AO = e->Q;
    e->AOmax = e->Q;
    e->C = e->Hk = e->Hv = e->Sd = e->Kc = 0;
    if (!hp->full_attn_interval) return;
    e->C = rt_ssm_conv_channels(hp);
    e->Hk = hp->ssm_n_group;
    e->Hv = hp->ssm_dt_rank;
    e->Sd = hp->ssm_d_state;
    e->Kc = hp->ssm_conv_kernel;
    if (e->Hv * e->Sd > e->AOmax) e->AOmax = e->Hv * e->Sd;
}

struct ssm_job {
    struct calib_engine *e;
    uint32_t ns;
    float *out;
    uint64_t ldo;
};

uint64_t calib__ssm_thread_floats(const struct calib_engine *e)
{
    if (!e->C) return 0;
    uint64_t st, ss, n;
    /* sizes from a file: UINT64_MAX (no allocation can meet it) on overflow */
    if (!mw_mul_u64(e->C, e->Kc ? e->Kc - 1 : 0, &st) || !mw_mul_u64(e->Sd, e->Sd, &ss) ||
        !mw_add_u64(st, calib__max3(e->C, ss, 2 * e->Hv), &n))
        return UINT64_MAX;
    return n;
}

/* per-thread scratch: the conv state (C (K-1)), then one row of C floats (or
 * the 2 Hv gates) or one S x S state */
static float *conv_state(const struct calib_engine *e, unsigned ith)
{
    return e->cst + (uint64_t)ith * calib__ssm_thread_floats(e);
}

/* One sample per task: the conv over its tokens (qg -> the thread's row
 * scratch -> back into qg), the q/k L2 norms, the gates into ba (g | beta). */
static void conv_task(void *arg, unsigned ith, unsigned nth)
{
    const struct ssm_job *J = arg;
    struct calib_engine *e = J->e;
    const struct rt_hparams *hp = e->hp;
    const uint64_t P = e->n_pos, C = e->C, Hv = e->Hv, Hk = e->Hk, S = e->Sd;
    const uint64_t r = Hv / Hk;
    const bool ba = hp->arch == RT_ARCH_QWEN3NEXT;
    const float *wc = e->w[CALIB_T_SSM_CONV], *dt = e->w[CALIB_T_SSM_DT],
                *sa = e->w[CALIB_T_SSM_A];
    float *st = conv_state(e, ith), *y = st + C * (e->Kc - 1);
    uint64_t lo, hi;
    calib__split(J->ns, ith, nth, &lo, &hi);
    for (uint64_t sI = lo; sI < hi; sI++) {
        memset(st, 0, (size_t)(C * (e->Kc - 1)) * sizeof(float));
        for (uint64_t p = 0; p < P; p++) {
            const uint64_t row = sI * P + p;
            float *x = e->qg + row * C;
            rt_ssm_conv_step(st, wc, x, y, C, (uint32_t)e->Kc);
            memcpy(x, y, (size_t)C * sizeof(float));
            rt_l2norm_heads(x, (uint32_t)Hk, (uint32_t)S, hp->rms_eps);
            rt_l2norm_heads(x + Hk * S, (uint32_t)Hk, (uint32_t)S, hp->rms_eps);
            float *b = e->ba + row * 2 * Hv;
            float *gb = y; /* the row scratch is free again (room for 2 Hv) */
            for (uint64_t h = 0; h < Hv; h++) {
                /* ba: [beta logits | alpha], or qwen3next's per key head groups */
                const uint64_t ib = ba ? (h / r) * 2 * r + h % r : h;
                const uint64_t ia = ba ? (h / r) * 2 * r + r + h % r : Hv + h;
                rt_delta_net_gates(b[ia], dt[h], sa[h], b[ib], &gb[h], &gb[Hv + h]);
            }
            memcpy(b, gb, (size_t)(2 * Hv) * sizeof(float));
        }
    }
}

/* One (sample, value head) pair per task: the delta rule over the sample's
 * tokens, then the gated output norm, into out. */
static void rec_task(void *arg, unsigned ith, unsigned nth)
{
    const struct ssm_job *J = arg;
    struct calib_engine *e = J->e;
    const struct rt_hparams *hp = e->hp;
    const uint64_t P = e->n_pos, C = e->C, Hv = e->Hv, Hk = e->Hk, S = e->Sd;
    float *M = conv_state(e, ith) + e->C * (e->Kc - 1);
    const float *nw = e->w[CALIB_T_SSM_NORM];
    uint64_t lo, hi;
    calib__split((uint64_t)J->ns * Hv, ith, nth, &lo, &hi);
    for (uint64_t pi = lo; pi < hi; pi++) {
        const uint64_t sI = pi / Hv, h = pi % Hv;
        const uint64_t kh = hp->ssm_v_tiled ? h % Hk : h / (Hv / Hk);
        memset(M, 0, (size_t)(S * S) * sizeof(float));
        for (uint64_t p = 0; p < P; p++) {
            const uint64_t row = sI * P + p;
            const float *x = e->qg + row * C;
            const float *b = e->ba + row * 2 * Hv;
            float *o = J->out + row * J->ldo + h * S;
            rt_delta_net_step(M, (uint32_t)S, x + kh * S, x + (Hk + kh) * S,
                              x + 2 * Hk * S + h * S, b[h], b[Hv + h], o);
            rt_delta_net_out_norm(o, nw, e->gt + row * Hv * S + h * S, (uint32_t)S,
                                  hp->rms_eps);
        }
    }
}

enum mw_status calib__ssm(struct calib_engine *e, const float *X, uint32_t ns, float *out,
                          uint64_t ldo, struct mw_err *err)
{
    const uint64_t nr = (uint64_t)ns * e->n_pos, Hv = e->Hv;
    const bool ba = e->hp->arch == RT_ARCH_QWEN3NEXT;
    enum mw_status s;
    if ((s = calib__linear_w(e, X, nr, e->E, CALIB_T_WQKV, CALIB_T_BQ, e->C, e->qg, e->C,
                             err)) ||
        (s = calib__linear_w(e, X, nr, e->E, CALIB_T_SSM_GATE, CALIB_T_BQ, Hv * e->Sd, e->gt,
                             Hv * e->Sd, err)))
        return s;
    if (ba) {
        s = calib__linear_w(e, X, nr, e->E, CALIB_T_SSM_BA, CALIB_T_BQ, 2 * Hv, e->ba, 2 * Hv,
                            err);
    } else if (!(s = calib__linear_w(e, X, nr, e->E, CALIB_T_SSM_BETA, CALIB_T_BQ, Hv, e->ba,
                                     2 * Hv, err))) {
        s = calib__linear_w(e, X, nr, e->E, CALIB_T_SSM_ALPHA, CALIB_T_BQ, Hv, e->ba + Hv,
                            2 * Hv, err);
    }
    if (s) return s;
    struct ssm_job J = {.e = e, .ns = ns, .out = out, .ldo = ldo};
    mw_pool_run(e->pool, conv_task, &J);
    mw_pool_run(e->pool, rec_task, &J);
    return MW_OK;
}
