/*
 * runtime/rt_ssm.c — the gated delta net layer of qwen35, qwen35moe and
 * qwen3next (llama.cpp's build_layer_attn_linear, delta-net-base.cpp, and
 * ggml's ssm_conv / l2_norm / gated_delta_net CPU ops), over one step of
 * n_tok tokens:
 *
 *   h = rmsnorm(x) * attn_norm
 *   qkv = attn_qkv h; z = attn_gate h; beta_h = sigmoid(ssm_beta h);
 *   g_h = ssm_a_h * softplus(ssm_alpha h + dt_bias_h)   (qwen3next: one ssm_ba
 *         matrix, per key head [beta (Hv/Hk) | alpha (Hv/Hk)] rows)
 *   y = silu(causal depthwise conv of qkv over the last K tokens)  (conv state)
 *   q, k = L2-normalised heads of y's first 2*Hk*S channels, v = the rest
 *   per value head h (key head h % Hk, or h / (Hv/Hk) for qwen3next):
 *         the delta rule on its S x S state, output RMS-normed * ssm_norm * silu(z_h)
 *   x += ssm_out o
 *
 * The conv is sequential in time per channel and the recurrence per value
 * head, so the stages split channels and heads across threads and run the
 * step's tokens in order inside each: the state after a step, and every
 * output, are the same for any thread count and any way the prompt is cut
 * into steps (the projections are rt_gemm's, which equal the mat-vec).
 * The recurrence's dots and rank-1 updates are the kernel table's
 * (rt_kern_ssm.c: scalar = rt_delta_net_step's bits, AVX2, NEON).
 */
#include "runtime/rt_int.h"
#include "runtime/rt_ops.h"

#include <math.h>
#include <string.h>

bool rt__ssm_state_bytes(const struct rt_hparams *hp, uint64_t *conv_floats, uint64_t *ssm_floats,
                         uint64_t *bytes)
{
    *conv_floats = *ssm_floats = *bytes = 0;
    if (hp->full_attn_interval == 0) return true;
    uint64_t n_rec = 0;
    for (uint32_t il = 0; il < hp->n_layer; il++) n_rec += rt_layer_is_recurrent(hp, il);
    const uint64_t K = hp->ssm_conv_kernel ? hp->ssm_conv_kernel - 1 : 0;
    uint64_t cf, sf, all;
    if (!mw_mul_u64(K, rt_ssm_conv_channels(hp), &cf) || !mw_mul_u64(cf, n_rec, &cf) ||
        !mw_mul_u64(hp->ssm_d_state, hp->ssm_d_state, &sf) ||
        !mw_mul_u64(sf, hp->ssm_dt_rank, &sf) || !mw_mul_u64(sf, n_rec, &sf) ||
        !mw_add_u64(cf, sf, &all) || !mw_mul_u64(all, sizeof(float), &all))
        return false;
    *conv_floats = cf;
    *ssm_floats = sf;
    *bytes = all;
    return true;
}

void rt__delta_step(const struct rt_ssm_ops *k, float *M, uint32_t S, const float *q,
                    const float *kv, const float *v, float g, float beta, float *out)
{
    /* rt_delta_net_step's order (ggml's gated_delta_net: scale, then per value
     * row the dot with k and the rank-1 update, then the dots with q) */
    const float decay = expf(g);
    const float scale = 1.0f / sqrtf((float)S);
    k->scale((uint64_t)S * S, M, decay);
    for (uint32_t j = 0; j < S; j++) {
        float *row = M + (uint64_t)j * S;
        const float d = (v[j] - k->dot(S, row, kv)) * beta;
        k->axpy(S, row, kv, d);
    }
    for (uint32_t j = 0; j < S; j++) out[j] = k->dot(S, M + (uint64_t)j * S, q) * scale;
}

void rt__ssm_reset(struct rt_ctx *c)
{
    if (c->n_rec == 0) return;
    const struct rt_hparams *hp = &c->m->hp;
    uint64_t cf, sf, b;
    if (!rt__ssm_state_bytes(hp, &cf, &sf, &b)) return; /* checked at load */
    memset(c->conv_state, 0, (size_t)cf * sizeof(float));
    memset(c->ssm_state, 0, (size_t)sf * sizeof(float));
    c->state_lost = false;
}

enum ssm_op {
    SSM_CONV,   /* items: channels; the conv over the step's tokens in order */
    SSM_GATES,  /* items: tokens; L2 norm of q and k, g and beta of every value head */
    SSM_DELTA,  /* items: value heads; the delta rule over the tokens in order, gated norm */
};

struct ssm_stage {
    struct rt_ctx *c;
    enum ssm_op op;
    uint32_t il;
    uint32_t n_tok;
};

static void ssm_task(void *arg, unsigned ith, unsigned nth)
{
    const struct ssm_stage *st = arg;
    struct rt_ctx *c = st->c;
    const struct rt_hparams *hp = &c->m->hp;
    const struct rt_layer *ly = &c->m->layers[st->il];
    const uint64_t CH = rt_ssm_conv_channels(hp), S = hp->ssm_d_state, DI = hp->ssm_d_inner;
    const uint32_t Hk = hp->ssm_n_group, Hv = hp->ssm_dt_rank, K = hp->ssm_conv_kernel;
    uint64_t lo, hi;
    switch (st->op) {
    case SSM_CONV: {
        rt__split(CH, ith, nth, &lo, &hi);
        if (lo == hi) return;
        float *state = c->conv_state + (uint64_t)ly->rec * CH * (K - 1) + lo * (K - 1);
        for (uint32_t b = 0; b < st->n_tok; b++)
            rt_ssm_conv_step(state, ly->ssm_conv + lo * K, c->s_qkv + b * CH + lo,
                             c->s_conv + b * CH + lo, hi - lo, K);
        return;
    }
    case SSM_GATES: {
        rt__split(st->n_tok, ith, nth, &lo, &hi);
        const uint32_t r = Hv / Hk;
        for (uint64_t b = lo; b < hi; b++) {
            float *y = c->s_conv + b * CH;
            rt_l2norm_heads(y, 2 * Hk, (uint32_t)S, hp->rms_eps); /* q heads, then k heads */
            const float *bb = c->s_b + b * 2 * Hv;
            float *aa = c->s_a + b * 2 * Hv; /* out: g in [0, Hv), beta in [Hv, 2Hv) */
            for (uint32_t h = 0; h < Hv; h++) {
                float bv, av;
                if (hp->ssm_ba_fused) { /* per key head: beta rows, then alpha rows */
                    const uint32_t kh = h / r, j = h % r;
                    bv = bb[(uint64_t)kh * 2 * r + j];
                    av = bb[(uint64_t)kh * 2 * r + r + j];
                } else {
                    bv = bb[h];
                    av = aa[h];
                }
                float g, beta;
                rt_delta_net_gates(av, ly->ssm_dt[h], ly->ssm_a[h], bv, &g, &beta);
                aa[h] = g;
                aa[Hv + h] = beta;
            }
        }
        return;
    }
    case SSM_DELTA: {
        rt__split(Hv, ith, nth, &lo, &hi);
        const uint32_t r = Hv / Hk;
        for (uint64_t h = lo; h < hi; h++) {
            const uint64_t kh = hp->ssm_v_tiled ? h % Hk : h / r;
            float *M = c->ssm_state + ((uint64_t)ly->rec * Hv + h) * S * S;
            for (uint32_t b = 0; b < st->n_tok; b++) {
                const float *y = c->s_conv + (uint64_t)b * CH;
                const float *aa = c->s_a + (uint64_t)b * 2 * Hv;
                float *o = c->s_o + (uint64_t)b * DI + h * S;
                rt__delta_step(c->ks->ssm, M, (uint32_t)S, y + kh * S, y + (Hk + kh) * S,
                               y + (2 * (uint64_t)Hk + h) * S, aa[h], aa[Hv + h], o);
                rt_delta_net_out_norm(o, ly->ssm_norm, c->s_z + (uint64_t)b * DI + h * S,
                                      (uint32_t)S, hp->rms_eps);
            }
        }
        return;
    }
    }
}

static void run_ssm(struct rt_ctx *c, enum ssm_op op, uint32_t il, uint32_t n_tok)
{
    struct ssm_stage st = {.c = c, .op = op, .il = il, .n_tok = n_tok};
    mw_pool_run(c->pool, ssm_task, &st);
}

void rt__ssm_layer(struct rt_ctx *c, uint32_t il, uint32_t n_tok)
{
    const struct rt_model *m = c->m;
    const struct rt_hparams *hp = &m->hp;
    const struct rt_layer *ly = &m->layers[il];
    const uint64_t CH = rt_ssm_conv_channels(hp), DI = hp->ssm_d_inner, Hv = hp->ssm_dt_rank;
    struct rt_act_plan plan;
    /* the projections of the normed input: qkv and z, then beta and alpha (or ba) */
    const struct rt_weight *p1[2] = {&ly->ssm_qkv, &ly->ssm_z};
    rt__plan_acts(c, p1, 2, &plan);
    struct rt_tok_stage ts = {.op = RT_OP_NORM_QUANT, .n_tok = n_tok, .norm_w = ly->attn_norm,
                              .plan = &plan};
    rt__run_tok(c, &ts);
    struct rt_mm_stage mm = {.n_tok = n_tok, .n_job = 2};
    mm.job[0] = (struct rt_mm_job){&ly->ssm_qkv, c->act[plan.slot_of[0]], c->s_qkv, CH, NULL, false};
    mm.job[1] = (struct rt_mm_job){&ly->ssm_z, c->act[plan.slot_of[1]], c->s_z, DI, NULL, false};
    rt__run_mm(c, &mm);
    const bool fused = hp->ssm_ba_fused;
    const struct rt_weight *p2[2] = {&ly->ssm_beta, &ly->ssm_alpha};
    rt__plan_acts(c, p2, fused ? 1 : 2, &plan);
    ts = (struct rt_tok_stage){.op = RT_OP_QUANT, .n_tok = n_tok, .src = c->xb, .ld_src = c->xb_ld,
                               .n = hp->n_embd, .plan = &plan};
    rt__run_tok(c, &ts);
    mm = (struct rt_mm_stage){.n_tok = n_tok, .n_job = fused ? 1 : 2};
    mm.job[0] =
        (struct rt_mm_job){&ly->ssm_beta, c->act[plan.slot_of[0]], c->s_b, 2 * Hv, NULL, false};
    if (!fused)
        mm.job[1] =
            (struct rt_mm_job){&ly->ssm_alpha, c->act[plan.slot_of[1]], c->s_a, 2 * Hv, NULL, false};
    rt__run_mm(c, &mm);
    /* conv, gates, the recurrence with its gated norm */
    run_ssm(c, SSM_CONV, il, n_tok);
    run_ssm(c, SSM_GATES, il, n_tok);
    run_ssm(c, SSM_DELTA, il, n_tok);
    /* x += ssm_out o */
    const struct rt_weight *p3[1] = {&ly->ssm_out};
    rt__plan_acts(c, p3, 1, &plan);
    ts = (struct rt_tok_stage){.op = RT_OP_QUANT, .n_tok = n_tok, .src = c->s_o, .ld_src = DI,
                               .n = (uint32_t)DI, .plan = &plan};
    rt__run_tok(c, &ts);
    mm = (struct rt_mm_stage){.n_tok = n_tok, .n_job = 1};
    mm.job[0] = (struct rt_mm_job){&ly->ssm_out, c->act[0], c->x, hp->n_embd, NULL, true};
    rt__run_mm(c, &mm);
}
