/*
 * runtime/rt_gemma4.c — the forward pass of gemma4 (llama.cpp's
 * src/models/gemma4.cpp): one step of up to n_batch tokens.
 *
 *   x = token_embd[t] * sqrt(E)
 *   per-layer inputs (once per step): pl = (RMSNorm_P(per_layer_model_proj . x
 *     / sqrt(E)) * per_layer_proj_norm + per_layer_token_embd[t] * sqrt(P)) / sqrt(2),
 *     layer l reading the slice pl[l*P ..]; the table is mapped, one row per token
 *   each layer: q = RoPE(RMSNorm_hd(wq . h) * q_norm); a layer that owns a
 *     cache stores k = RoPE(RMSNorm(wk . h) * k_norm) and v = RMSNorm(wv . h)
 *     (no weight; wk . h when there is no wv), a shared layer reads the cache
 *     of rt_layer_kv_src; attention with scale 1, sliding layers over their
 *     window; head size, kv heads and RoPE (NEOX; full layers with the
 *     rope_freqs factors) per layer kind;
 *     x += RMSNorm(attn) * post_attention_norm;
 *     FFN: GEGLU(RMSNorm(x) * ffn_norm), or with a router the sum of
 *     RMSNorm(that) * post_ffw_norm_1 and RMSNorm(experts) * post_ffw_norm_2
 *     (router on RMSNorm(x) / sqrt(E) * ffn_gate_inp.scale, softmax, top-k,
 *     renormalised; expert e's output times ffn_down_exps.scale[e]);
 *     x += RMSNorm(f) * post_ffw_norm;
 *     x += RMSNorm(proj . (gelu(inp_gate . x) * pl_l)) * post_norm;
 *     x *= layer_output_scale
 *   logits = softcap(output . RMSNorm(x) * output_norm)
 *
 * Stages are rt_forward.c's (norm + quantize, mat-vec tiles) and its
 * attention (rt_attn.c on a per-layer view) where they fit, and this file's
 * per-token and per-(token, expert) stages otherwise. Every item is computed
 * by one thread: the same bits whatever the thread count.
 */
#include "runtime/rt_int.h"
#include "runtime/rt_ops.h"

#include <math.h>
#include <string.h>

#include "quant/quant.h"

enum g4_op {
    G4_PLE,       /* per token: the per-layer inputs from the projection in c->ple */
    G4_QK,        /* per token: q/k norms, v norm, RoPE, K/V into the cache */
    G4_NORM_XB,   /* per token: xb = RMSNorm(xb) * w */
    G4_ROUTER_IN, /* per token: q = RMSNorm(x) / sqrt(E) * scale; quantize */
    G4_NORM_Q,    /* per token: q = RMSNorm(x) * w; quantize */
    G4_ROUTE,     /* per token: softmax, top-k, weights */
    G4_EXPERT,    /* per (token, slot): one expert's GEGLU FFN into moe_out */
    G4_COMBINE,   /* per token: xb = xb + RMSNorm(sum of experts) * post_norm_2 */
    G4_PLE_GATE,  /* per token: hb = gelu(hb) * pl_l; quantize */
    G4_SCALE,     /* per token: x *= layer_output_scale */
};

struct g4_stage {
    struct rt_ctx *c;
    enum g4_op op;
    uint32_t n_tok, pos0, il;
    bool tiled;
    const int32_t *tok; /* G4_PLE: the step's tokens */
    const float *w;
    const struct rt_act_plan *plan;
};

static uint64_t qdim_max(const struct rt_hparams *hp)
{
    return (uint64_t)hp->n_head * hp->head_dim;
}

static void quantize_row(const struct rt_ctx *c, const struct rt_act_plan *p, const float *x,
                         uint32_t n, uint32_t b)
{
    for (int s = 0; s < p->n_slots; s++)
        p->fmt[s]->quantize(x, c->act[s] + (uint64_t)b * c->act_stride, n);
}


static void g4_task(void *arg, unsigned ith, unsigned nth)
{
    const struct g4_stage *st = arg;
    struct rt_ctx *c = st->c;
    const struct rt_model *m = c->m;
    const struct rt_hparams *hp = &m->hp;
    const struct rt_g4 *g4 = m->g4;
    const uint32_t il = st->il;
    const struct rt_layer *ly = &m->layers[il];
    const struct rt_g4_layer *gl = &g4->layers[il];
    const uint64_t E = hp->n_embd, QD = qdim_max(hp), KD = c->kv.kv_dim;
    const uint64_t P = hp->n_embd_per_layer, LP = P * hp->n_layer;
    const uint32_t hd = rt_layer_head_dim(hp, il), kvh = rt_layer_n_head_kv(hp, il);
    const uint32_t K = hp->n_expert_used;
    const uint64_t n_items = st->op == G4_EXPERT ? (uint64_t)st->n_tok * K : st->n_tok;
    uint64_t lo, hi;
    rt__split(n_items, ith, nth, &lo, &hi);
    for (uint64_t j = lo; j < hi; j++) {
        const uint32_t b = (uint32_t)j;
        switch (st->op) {
        case G4_PLE: {
            /* c->ple holds per_layer_model_proj . x; the table row is decoded
             * one layer slice at a time into xb */
            float *pl = c->ple + (uint64_t)b * LP;
            float *a = c->xb + (uint64_t)b * c->xb_ld;
            const struct quant_traits *qt = quant_traits_get(g4->ple_tok.type);
            const uint8_t *row =
                g4->ple_tok.data + (uint64_t)(uint32_t)st->tok[b] * g4->ple_tok.row_bytes;
            const float sp = sqrtf((float)P), se = 1.0f / sqrtf((float)E);
            const float si = 1.0f / sqrtf(2.0f);
            for (uint32_t l = 0; l < hp->n_layer; l++) {
                float *s = pl + (uint64_t)l * P;
                qt->to_float(row + rt_row_bytes(g4->ple_tok.type, (uint64_t)l * P), a, P);
                for (uint64_t i = 0; i < P; i++) s[i] = s[i] * se;
                rt_rmsnorm(s, s, g4->ple_norm, P, hp->rms_eps);
                for (uint64_t i = 0; i < P; i++) s[i] = (s[i] + a[i] * sp) * si;
            }
            break;
        }
        case G4_QK: {
            const uint32_t swa = rt_layer_is_swa(hp, il);
            const uint32_t n_rot = swa ? hp->n_rot_swa : hp->n_rot;
            const float *rc = c->rope + ((uint64_t)swa * c->n_batch + b) * hp->n_rot;
            float *q = c->q + (uint64_t)b * hp->n_head * hd; /* rt__attn's layout */
            for (uint32_t h = 0; h < hp->n_head; h++) {
                rt_rmsnorm(q + (uint64_t)h * hd, q + (uint64_t)h * hd, ly->q_norm, hd, hp->rms_eps);
                rt_rope_neox_rows(rc, n_rot, q + (uint64_t)h * hd);
            }
            if (!rt_layer_has_kv(hp, il)) break;
            float *k = c->k + (uint64_t)b * KD, *v = c->v + (uint64_t)b * KD;
            if (!ly->wv.data) memcpy(v, k, (uint64_t)kvh * hd * sizeof(float));
            for (uint32_t h = 0; h < kvh; h++) {
                rt_rmsnorm(k + (uint64_t)h * hd, k + (uint64_t)h * hd, ly->k_norm, hd, hp->rms_eps);
                rt_rmsnorm_nw(v + (uint64_t)h * hd, hd, hp->rms_eps);
                rt_rope_neox_rows(rc, n_rot, k + (uint64_t)h * hd);
            }
            rt__kv_store(&c->kv, rt__kv_k(&c->kv, il, st->pos0 + b), k);
            rt__kv_store(&c->kv, rt__kv_v(&c->kv, il, st->pos0 + b), v);
            break;
        }
        case G4_NORM_XB: {
            float *t = c->xb + (uint64_t)b * c->xb_ld;
            rt_rmsnorm(t, t, st->w, E, hp->rms_eps);
            break;
        }
        case G4_ROUTER_IN: {
            float *t = c->q + (uint64_t)b * QD;
            memcpy(t, c->x + (uint64_t)b * E, E * sizeof(float));
            rt_rmsnorm_nw(t, E, hp->rms_eps);
            const float se = 1.0f / sqrtf((float)E);
            for (uint64_t i = 0; i < E; i++) t[i] = t[i] * se * gl->gate_inp_s[i];
            quantize_row(c, st->plan, t, (uint32_t)E, b);
            break;
        }
        case G4_NORM_Q: {
            float *t = c->q + (uint64_t)b * QD;
            rt_rmsnorm(t, c->x + (uint64_t)b * E, st->w, E, hp->rms_eps);
            quantize_row(c, st->plan, t, (uint32_t)E, b);
            break;
        }
        case G4_ROUTE:
            rt_moe_route(c->moe_probs + (uint64_t)b * hp->n_expert, hp->n_expert, K, true,
                         c->ts[ith].idx, c->moe_sel + (uint64_t)b * K, c->moe_w + (uint64_t)b * K);
            break;
        case G4_EXPERT: { /* j = token * K + slot */
            const uint32_t t = (uint32_t)(j / K);
            const int32_t e = c->moe_sel[j];
            const uint64_t FE = hp->n_ff_exp;
            float *g = c->moe_hg + j * FE, *u = c->moe_hu + j * FE;
            const uint8_t *act = c->act[st->plan->slot_of[0]] + (uint64_t)t * c->act_stride;
            const uint8_t *actu = c->act[st->plan->slot_of[1]] + (uint64_t)t * c->act_stride;
            rt_matvec(ly->gate_exps.k, ly->gate_exps.data + (uint64_t)e * ly->gate_exps.slab_bytes,
                      FE, E, act, g);
            rt_matvec(ly->up_exps.k, ly->up_exps.data + (uint64_t)e * ly->up_exps.slab_bytes, FE,
                      E, actu, u);
            rt_geglu(g, u, FE);
            const struct rt_act_format *af = rt_kernel_act(c->ks, ly->down_exps.k);
            af->quantize(g, c->moe_act + j * c->act_stride, FE);
            float *o = c->moe_out + j * E;
            rt_matvec(ly->down_exps.k, ly->down_exps.data + (uint64_t)e * ly->down_exps.slab_bytes,
                      E, FE, c->moe_act + j * c->act_stride, o);
            if (gl->down_exps_s) {
                const float s = gl->down_exps_s[e];
                for (uint64_t i = 0; i < E; i++) o[i] = o[i] * s;
            }
            break;
        }
        case G4_COMBINE: {
            /* experts * weights summed in top-k order, RMSNorm * post_ffw_norm_2,
             * added to the dense branch (already normed in xb) */
            float *t = c->q + (uint64_t)b * QD;
            const float *w = c->moe_w + (uint64_t)b * K;
            const float *o = c->moe_out + (uint64_t)b * K * E;
            for (uint64_t i = 0; i < E; i++) {
                float acc = o[i] * w[0];
                for (uint32_t s = 1; s < K; s++) acc = acc + o[(uint64_t)s * E + i] * w[s];
                t[i] = acc;
            }
            rt_rmsnorm(t, t, gl->post_norm_2, E, hp->rms_eps);
            float *xb = c->xb + (uint64_t)b * c->xb_ld;
            for (uint64_t i = 0; i < E; i++) xb[i] = xb[i] + t[i];
            break;
        }
        case G4_PLE_GATE: {
            float *g = c->hb + (uint64_t)b * P;
            const float *pl = c->ple + (uint64_t)b * LP + (uint64_t)il * P;
            for (uint64_t i = 0; i < P; i++) g[i] = rt_gelu_tanh(g[i]) * pl[i];
            quantize_row(c, st->plan, g, (uint32_t)P, b);
            break;
        }
        case G4_SCALE: {
            float *x = c->x + (uint64_t)b * E;
            for (uint64_t i = 0; i < E; i++) x[i] = x[i] * gl->out_scale;
            break;
        }
        }
    }
}

static void run(struct rt_ctx *c, struct g4_stage *st)
{
    st->c = c;
    mw_pool_run(c->pool, g4_task, st);
}

static void mm1(struct rt_ctx *c, uint32_t n_tok, const struct rt_weight *w, const uint8_t *act,
                float *y, uint64_t ldy)
{
    struct rt_mm_stage mm = {.n_tok = n_tok, .n_job = 1};
    mm.job[0] = (struct rt_mm_job){w, act, y, ldy, NULL, false};
    rt__run_mm(c, &mm);
}

/* Attention of layer il through rt_attn.c (llama.cpp's CPU flash attention,
 * bit for bit) on a view of the model with this layer's head size and kv
 * heads, reading the cache of rt_layer_kv_src: queries in c->q at n_head *
 * hd per token, output in xb. The view shares every buffer; hd <= the full
 * layers' head and n_head / kv heads <= theirs (checked at load), which
 * the scratch is sized by. */
static void attention(struct rt_ctx *c, uint32_t il, uint32_t n_tok, uint32_t pos0, bool tiled)
{
    const struct rt_model *m = c->m;
    struct rt_model mv = *m;
    mv.hp.head_dim = rt_layer_head_dim(&m->hp, il);
    mv.hp.n_head_kv = rt_layer_n_head_kv(&m->hp, il);
    mv.hp.n_rot = rt_layer_is_swa(&m->hp, il) ? m->hp.n_rot_swa : m->hp.n_rot;
    struct rt_ctx cv = *c;
    cv.m = &mv;
    rt__attn(&cv, n_tok, pos0, rt_layer_kv_src(&m->hp, il), tiled);
}

/* The dense GEGLU MLP of layer il on RMSNorm(x) * ffn_norm into xb. */
static void dense_mlp(struct rt_ctx *c, const struct rt_layer *ly, uint32_t F, uint32_t n_tok)
{
    struct rt_act_plan plan;
    const struct rt_weight *gu[2] = {&ly->wgate, &ly->wup};
    rt__plan_acts(c, gu, 2, &plan);
    struct rt_tok_stage ts = {.op = RT_OP_NORM_QUANT, .n_tok = n_tok, .norm_w = ly->ffn_norm,
                              .plan = &plan};
    rt__run_tok(c, &ts);
    struct rt_mm_stage mm = {.n_tok = n_tok, .n_job = 2};
    mm.job[0] = (struct rt_mm_job){&ly->wgate, c->act[plan.slot_of[0]], c->hb, F, NULL, false};
    mm.job[1] = (struct rt_mm_job){&ly->wup, c->act[plan.slot_of[1]], c->hb2, F, NULL, false};
    rt__run_mm(c, &mm);
    const struct rt_weight *dn[1] = {&ly->wdown};
    rt__plan_acts(c, dn, 1, &plan);
    ts = (struct rt_tok_stage){.op = RT_OP_SWIGLU_QUANT, .n_tok = n_tok, .n = F, .plan = &plan};
    rt__run_tok(c, &ts);
    mm1(c, n_tok, &ly->wdown, c->act[0], c->xb, c->xb_ld);
}

void rt__g4_step(struct rt_ctx *c, const int32_t *tok, uint32_t n_tok, uint32_t lfrom, float *lout,
                 bool want_last, bool tiled)
{
    const struct rt_model *m = c->m;
    const struct rt_hparams *hp = &m->hp;
    const struct rt_g4 *g4 = m->g4;
    const uint64_t E = hp->n_embd, KD = c->kv.kv_dim;
    const uint64_t P = hp->n_embd_per_layer, LP = P * hp->n_layer;
    const uint32_t pos0 = c->n_past;
    const struct quant_traits *emb = quant_traits_get(m->tok_embd.type);
    const float escale = sqrtf((float)E);
    const struct rt_rope_params rp_full = {hp->rope_base, hp->rope_freq_scale, 1.0f, false};
    const struct rt_rope_params rp_swa = {hp->rope_base_swa, 1.0f, 1.0f, false};
    for (uint32_t b = 0; b < n_tok; b++) {
        float *x = c->x + (uint64_t)b * E;
        emb->to_float(m->tok_embd.data + (uint64_t)tok[b] * m->tok_embd.row_bytes, x, E);
        for (uint64_t i = 0; i < E; i++) x[i] *= escale;
        rt_rope_cache_ex(hp->n_rot, &rp_full, m->rope_freqs, (int32_t)(pos0 + b),
                         c->rope + (uint64_t)b * hp->n_rot);
        rt_rope_cache_ex(hp->n_rot_swa, &rp_swa, NULL, (int32_t)(pos0 + b),
                         c->rope + ((uint64_t)c->n_batch + b) * hp->n_rot);
    }
    struct rt_act_plan plan;
    struct rt_tok_stage ts;
    struct g4_stage gs;
    if (P) { /* the per-layer inputs of the step */
        const struct rt_weight *pw[1] = {&g4->ple_proj};
        rt__plan_acts(c, pw, 1, &plan);
        ts = (struct rt_tok_stage){.op = RT_OP_QUANT, .n_tok = n_tok, .src = c->x, .ld_src = E,
                                   .n = (uint32_t)E, .plan = &plan};
        rt__run_tok(c, &ts);
        mm1(c, n_tok, &g4->ple_proj, c->act[0], c->ple, LP);
        gs = (struct g4_stage){.op = G4_PLE, .n_tok = n_tok, .pos0 = pos0, .tok = tok};
        run(c, &gs);
    }
    /* rows whose logits are asked for: keep.. (the others end after the
     * last layer's attention) */
    const uint32_t keep = lout ? lfrom : want_last ? n_tok - 1 : n_tok;
    uint32_t nt = n_tok;
    for (uint32_t il = 0; il < hp->n_layer; il++) {
        const struct rt_layer *ly = &m->layers[il];
        const struct rt_g4_layer *gl = &g4->layers[il];
        const bool has_kv = rt_layer_has_kv(hp, il);
        /* attention */
        const struct rt_weight *qkv[3] = {&ly->wq, &ly->wk, &ly->wv};
        const int nw = !has_kv ? 1 : ly->wv.data ? 3 : 2;
        rt__plan_acts(c, qkv, nw, &plan);
        ts = (struct rt_tok_stage){.op = RT_OP_NORM_QUANT, .n_tok = n_tok, .norm_w = ly->attn_norm,
                                   .plan = &plan};
        rt__run_tok(c, &ts);
        struct rt_mm_stage mm = {.n_tok = n_tok, .n_job = nw};
        mm.job[0] = (struct rt_mm_job){&ly->wq, c->act[plan.slot_of[0]], c->q, ly->wq.n_out, NULL,
                                       false};
        if (nw > 1)
            mm.job[1] = (struct rt_mm_job){&ly->wk, c->act[plan.slot_of[1]], c->k, KD, NULL, false};
        if (nw > 2)
            mm.job[2] = (struct rt_mm_job){&ly->wv, c->act[plan.slot_of[2]], c->v, KD, NULL, false};
        rt__run_mm(c, &mm);
        gs = (struct g4_stage){.op = G4_QK, .n_tok = n_tok, .pos0 = pos0, .il = il};
        run(c, &gs);
        attention(c, il, n_tok, pos0, tiled);
        const struct rt_weight *wo[1] = {&ly->wo};
        rt__plan_acts(c, wo, 1, &plan);
        ts = (struct rt_tok_stage){.op = RT_OP_QUANT, .n_tok = n_tok, .src = c->xb,
                                   .ld_src = c->xb_ld, .n = (uint32_t)ly->wo.n_in, .plan = &plan};
        rt__run_tok(c, &ts);
        mm1(c, n_tok, &ly->wo, c->act[0], c->xb, c->xb_ld);
        ts = (struct rt_tok_stage){.op = RT_OP_POST_ADD, .n_tok = n_tok,
                                   .norm_w = ly->attn_post_norm};
        rt__run_tok(c, &ts);

        if (il == hp->n_layer - 1) {
            nt = rt__keep_out_rows(c, nt, keep, c->ple, LP);
            if (nt == 0) return;
        }
        /* feed-forward: the dense MLP, and the experts beside it */
        dense_mlp(c, ly, gl->n_ff, nt);
        if (ly->gate_inp.data) {
            gs = (struct g4_stage){.op = G4_NORM_XB, .n_tok = nt, .il = il,
                                   .w = gl->post_norm_1};
            run(c, &gs);
            const struct rt_weight *gi[1] = {&ly->gate_inp};
            rt__plan_acts(c, gi, 1, &plan);
            gs = (struct g4_stage){.op = G4_ROUTER_IN, .n_tok = nt, .il = il, .plan = &plan};
            run(c, &gs);
            mm1(c, nt, &ly->gate_inp, c->act[0], c->moe_probs, hp->n_expert);
            gs = (struct g4_stage){.op = G4_ROUTE, .n_tok = nt, .il = il};
            run(c, &gs);
            const struct rt_weight *ex[2] = {&ly->gate_exps, &ly->up_exps};
            rt__plan_acts(c, ex, 2, &plan);
            gs = (struct g4_stage){.op = G4_NORM_Q, .n_tok = nt, .il = il, .w = gl->pre_norm_2,
                                   .plan = &plan};
            run(c, &gs);
            gs = (struct g4_stage){.op = G4_EXPERT, .n_tok = nt, .il = il, .plan = &plan};
            run(c, &gs);
            gs = (struct g4_stage){.op = G4_COMBINE, .n_tok = nt, .il = il};
            run(c, &gs);
        }
        ts = (struct rt_tok_stage){.op = RT_OP_POST_ADD, .n_tok = nt,
                                   .norm_w = ly->ffn_post_norm};
        rt__run_tok(c, &ts);

        /* the per-layer input */
        if (P) {
            const struct rt_weight *ig[1] = {&gl->inp_gate};
            rt__plan_acts(c, ig, 1, &plan);
            ts = (struct rt_tok_stage){.op = RT_OP_QUANT, .n_tok = nt, .src = c->x, .ld_src = E,
                                       .n = (uint32_t)E, .plan = &plan};
            rt__run_tok(c, &ts);
            mm1(c, nt, &gl->inp_gate, c->act[0], c->hb, P);
            const struct rt_weight *pj[1] = {&gl->proj};
            rt__plan_acts(c, pj, 1, &plan);
            gs = (struct g4_stage){.op = G4_PLE_GATE, .n_tok = nt, .il = il, .plan = &plan};
            run(c, &gs);
            mm1(c, nt, &gl->proj, c->act[0], c->xb, c->xb_ld);
            ts = (struct rt_tok_stage){.op = RT_OP_POST_ADD, .n_tok = nt,
                                       .norm_w = gl->post_norm};
            rt__run_tok(c, &ts);
        }
        if (gl->out_scale != 1.0f) {
            gs = (struct g4_stage){.op = G4_SCALE, .n_tok = nt, .il = il};
            run(c, &gs);
        }
    }

    /* logits: only for the rows asked for */
    const uint32_t from = (lout ? lfrom : n_tok - 1) - keep;
    const uint32_t n_out = nt - from;
    const struct rt_weight *ow[1] = {&m->output};
    rt__plan_acts(c, ow, 1, &plan);
    ts = (struct rt_tok_stage){.op = RT_OP_NORM_QUANT, .n_tok = n_out, .norm_w = m->output_norm,
                               .plan = &plan, .row_from = from};
    rt__run_tok(c, &ts);
    float *dst = lout ? lout : c->logits_last;
    mm1(c, n_out, &m->output, c->act[0], dst, hp->n_vocab);
    if (hp->final_softcap > 0.0f) {
        ts = (struct rt_tok_stage){.op = RT_OP_SOFTCAP, .n_tok = n_out, .n = hp->n_vocab,
                                   .dst = dst};
        rt__run_tok(c, &ts);
    }
    if (lout && want_last)
        memcpy(c->logits_last, lout + (uint64_t)(n_out - 1) * hp->n_vocab,
               (uint64_t)hp->n_vocab * sizeof(float));
}
