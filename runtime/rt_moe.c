/*
 * runtime/rt_moe.c — the feed-forward of a mixture-of-experts layer
 * (qwen2moe, qwen3moe, Mixtral): llama.cpp's build_moe_ffn with softmax
 * gating, and qwen2moe's shared expert.
 *
 * The router and the routing run per token, then the step's (token, expert)
 * pairs are grouped by expert and every tile of a routed expert's matrices
 * is applied to all of its pairs; unrouted experts are never read.
 */
#define _DEFAULT_SOURCE /* madvise */
#include "runtime/rt_int.h"
#include "runtime/rt_ops.h"

#include <math.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

/* The MoE steps that run per token (route, combine) or per pair (act). */
enum moe_op {
    MOE_ROUTE,   /* softmax, top-k and weights of each token's router logits */
    MOE_ACT,     /* per pair: act(gate) * up; quantize into moe_act */
    MOE_COMBINE, /* x += sum_j w_j * down_j (+ sigmoid-gated shared expert) */
};

struct moe_tok_stage {
    struct rt_ctx *c;
    enum moe_op op;
    uint32_t n;                     /* items: tokens, or pairs (MOE_ACT) */
    const struct rt_act_plan *plan; /* MOE_ACT: the down matrices' activation format */
    bool shexp;                     /* MOE_COMBINE: add the shared expert's output (in xb) */
    const struct rt_layer *ly;      /* the layer (gpt-oss: its router and expert biases) */
};

static void moe_tok_task(void *arg, unsigned ith, unsigned nth)
{
    const struct moe_tok_stage *st = arg;
    struct rt_ctx *c = st->c;
    const struct rt_hparams *hp = &c->m->hp;
    const uint64_t E = hp->n_embd;
    uint64_t lo, hi;
    rt__split(st->n, ith, nth, &lo, &hi);
    for (uint64_t j = lo; j < hi; j++) {
        const uint32_t b = (uint32_t)j;
        switch (st->op) {
        case MOE_ROUTE: {
            const uint32_t K = hp->n_expert_used;
            float *lg = c->moe_probs + (uint64_t)b * hp->n_expert;
            if (hp->moe_softmax_w) { /* gpt-oss: biased logits, top k, softmax over k */
                if (st->ly->b_gate_inp)
                    for (uint32_t e = 0; e < hp->n_expert; e++) lg[e] = lg[e] + st->ly->b_gate_inp[e];
                rt_moe_route_softmax_w(lg, hp->n_expert, K, c->ts[ith].idx,
                                       c->moe_sel + (uint64_t)b * K, c->moe_w + (uint64_t)b * K);
                break;
            }
            rt_moe_route(lg, hp->n_expert, K, hp->moe_norm_w, c->ts[ith].idx,
                         c->moe_sel + (uint64_t)b * K, c->moe_w + (uint64_t)b * K);
            break;
        }
        case MOE_ACT: { /* here b is a pair */
            float *g = c->moe_hg + (uint64_t)b * hp->n_ff_exp;
            float *u = c->moe_hu + (uint64_t)b * hp->n_ff_exp;
            if (st->ly->bgate_exps) { /* gpt-oss: ggml_add_id of the expert's biases */
                const uint64_t off = (uint64_t)c->moe_sel[b] * hp->n_ff_exp;
                for (uint32_t i = 0; i < hp->n_ff_exp; i++) {
                    u[i] = u[i] + st->ly->bup_exps[off + i];
                    g[i] = g[i] + st->ly->bgate_exps[off + i];
                }
            }
            rt_ffn_act(hp, g, u, hp->n_ff_exp);
            st->plan->fmt[0]->quantize(g, c->moe_act + (uint64_t)b * c->act_stride, hp->n_ff_exp);
            break;
        }
        case MOE_COMBINE: {
            /* ggml: experts * weights, summed in top-k order (ffn_moe_out), +
             * shared expert * gate (qwen2moe), then + ffn_inp */
            const uint32_t K = hp->n_expert_used;
            float *x = c->x + (uint64_t)b * E;
            const float *w = c->moe_w + (uint64_t)b * K;
            const float *o = c->moe_out + (uint64_t)b * K * E;
            const float *sh = st->shexp ? c->xb + (uint64_t)b * c->xb_ld : NULL;
            /* qwen2moe: silu(g)/g; qwen35moe, qwen3next: ggml_sigmoid */
            float sg = 0.0f;
            if (sh)
                sg = hp->arch == RT_ARCH_QWEN2MOE ? rt_moe_shexp_gate(c->moe_sgate[b])
                                                  : 1.0f / (1.0f + expf(-c->moe_sgate[b]));
            if (st->ly->bdown_exps) { /* gpt-oss: (down + bias) * weight, summed */
                const int32_t *sel = c->moe_sel + (uint64_t)b * K;
                const float *bd = st->ly->bdown_exps;
                for (uint64_t i = 0; i < E; i++) {
                    float acc = (o[i] + bd[(uint64_t)sel[0] * E + i]) * w[0];
                    for (uint32_t e = 1; e < K; e++)
                        acc = acc + (o[(uint64_t)e * E + i] + bd[(uint64_t)sel[e] * E + i]) * w[e];
                    x[i] = acc + x[i];
                }
                break;
            }
            for (uint64_t i = 0; i < E; i++) {
                float acc = o[i] * w[0];
                for (uint32_t e = 1; e < K; e++) acc = acc + o[(uint64_t)e * E + i] * w[e];
                if (sh) acc = acc + sh[i] * sg;
                x[i] = acc + x[i];
            }
            break;
        }
        }
    }
}

static void run_moe_tok(struct rt_ctx *c, uint32_t il, enum moe_op op, uint32_t n,
                        const struct rt_act_plan *plan, bool shexp)
{
    struct moe_tok_stage st = {.c = c, .op = op, .n = n, .plan = plan, .shexp = shexp,
                               .ly = &c->m->layers[il]};
    mw_pool_run(c->pool, moe_tok_task, &st);
}

/* MoE: y[m][p*ldy + r] = W_m[e(p)] row r . act row of p, for every pair p
 * routed to an active expert e (llama.cpp's mul_mat_id). Work is split in
 * whole tiles of RT_TILE rows of (active expert, matrix); each tile is
 * applied to all of that expert's pairs while it is in cache, so each
 * routed expert's weights are read once per step and the others never.
 * Every output is one dot product: no thread or batch dependence. */
struct moe_stage {
    struct rt_ctx *c;
    int n_mat;                     /* 2 (gate, up) or 1 (down) */
    const struct rt_weight *w[2];  /* expert 0's matrices; same n_out */
    const uint8_t *act[2];         /* activation rows (act_stride apart) */
    bool by_pair;                  /* act row p (down), else token p / n_expert_used */
    float *y[2];
    uint64_t ldy;
};

static void moe_mm_task(void *arg, unsigned ith, unsigned nth)
{
    const struct moe_stage *st = arg;
    const struct rt_ctx *c = st->c;
    const uint32_t K = c->m->hp.n_expert_used;
    const uint64_t n_out = st->w[0]->n_out;
    const uint64_t tpm = (n_out + RT_TILE - 1) / RT_TILE;
    const uint64_t per_exp = tpm * (uint64_t)st->n_mat;
    struct rt_thread_scratch *ts = &c->ts[ith];
    uint32_t gat_e = UINT32_MAX; /* the expert whose rows ts->moe_gather holds */
    const uint8_t *gat_src = NULL;
    uint64_t lo, hi;
    rt__split((uint64_t)c->moe_n_active * per_exp, ith, nth, &lo, &hi);
    for (uint64_t ti = lo; ti < hi; ti++) {
        const uint32_t e = c->moe_active[ti / per_exp];
        const uint64_t rem = ti % per_exp;
        const int mi = (int)(rem / tpm);
        const uint64_t t0 = rem % tpm * RT_TILE;
        const uint64_t nt = n_out - t0 < RT_TILE ? n_out - t0 : RT_TILE;
        const struct rt_weight *w = st->w[mi];
        const uint8_t *W = w->data + (uint64_t)e * w->slab_bytes + t0 * w->row_bytes;
        const uint32_t q0 = c->moe_first[e], np = c->moe_first[e + 1] - q0;
        if (np > 1 && w->k->gemm) {
            /* the expert's activation rows gathered once per (expert,
             * input) into this thread's buffer, then one batched product */
            if (gat_e != e || gat_src != st->act[mi]) {
                for (uint32_t q = 0; q < np; q++) {
                    const uint32_t p = c->moe_order[q0 + q];
                    const uint64_t arow = st->by_pair ? p : p / K;
                    memcpy(ts->moe_gather + (uint64_t)q * c->act_stride,
                           st->act[mi] + arow * c->act_stride, c->act_stride);
                }
                gat_e = e;
                gat_src = st->act[mi];
            }
            rt_gemm(w->k, W, nt, w->n_in, ts->moe_gather, c->act_stride, np, ts->tile, RT_TILE,
                    ts->gemm);
            for (uint32_t q = 0; q < np; q++)
                memcpy(st->y[mi] + (uint64_t)c->moe_order[q0 + q] * st->ldy + t0,
                       ts->tile + (uint64_t)q * RT_TILE, nt * sizeof(float));
            continue;
        }
        for (uint32_t q = q0; q < q0 + np; q++) {
            const uint32_t p = c->moe_order[q];
            const uint64_t arow = st->by_pair ? p : p / K;
            rt_matvec(w->k, W, nt, w->n_in, st->act[mi] + arow * c->act_stride,
                      st->y[mi] + (uint64_t)p * st->ldy + t0);
        }
    }
}

/* Group the step's pairs by expert (counting sort: token order within an
 * expert) and count the hits of layer il. */
static void moe_group(struct rt_ctx *c, uint32_t il, uint32_t n_tok)
{
    const struct rt_hparams *hp = &c->m->hp;
    const uint32_t NE = hp->n_expert, n_pair = n_tok * hp->n_expert_used;
    uint32_t *first = c->moe_first, *cur = c->moe_active;
    uint64_t *hits = c->moe_hits + (uint64_t)il * NE;
    memset(first, 0, (NE + 1) * sizeof *first);
    for (uint32_t p = 0; p < n_pair; p++) first[c->moe_sel[p] + 1]++;
    for (uint32_t e = 0; e < NE; e++) {
        hits[e] += first[e + 1];
        first[e + 1] += first[e];
    }
    for (uint32_t e = 0; e < NE; e++) cur[e] = first[e];
    for (uint32_t p = 0; p < n_pair; p++) c->moe_order[cur[c->moe_sel[p]]++] = p;
    c->moe_n_active = 0;
    for (uint32_t e = 0; e < NE; e++) /* (overwrites cursors already used) */
        if (first[e + 1] > first[e]) c->moe_active[c->moe_n_active++] = e;
}

/* Start reading the matrices of the experts this step routes to for the
 * first time in this context (MADV_WILLNEED: the kernel reads each slab
 * whole, in the background, all of them at once). rt_model_open marks the
 * expert tensors MADV_RANDOM, so without this a cold slab would come in one
 * page per fault. Later steps find a slab resident (unless the kernel
 * dropped it: then its pages fault in one by one). A hint: failure ignored. */
static void moe_prefetch(const struct rt_ctx *c, uint32_t il)
{
    const struct rt_layer *ly = &c->m->layers[il];
    const uint32_t NE = c->m->hp.n_expert;
    const uint64_t *hits = c->moe_hits + (uint64_t)il * NE;
    const long ps = sysconf(_SC_PAGESIZE);
    if (ps <= 0) return;
    const uintptr_t page = (uintptr_t)ps;
    const struct rt_weight *w[3] = {&ly->gate_exps, &ly->up_exps, &ly->down_exps};
    for (uint32_t i = 0; i < c->moe_n_active; i++) {
        const uint32_t e = c->moe_active[i];
        if (hits[e] != c->moe_first[e + 1] - c->moe_first[e]) continue; /* read before */
        for (int j = 0; j < 3; j++) {
            const uintptr_t lo = (uintptr_t)(w[j]->data + (uint64_t)e * w[j]->slab_bytes);
            const uintptr_t a = lo & ~(page - 1);
            const uintptr_t b = (lo + (uintptr_t)w[j]->slab_bytes + page - 1) & ~(page - 1);
            (void)madvise((void *)a, (size_t)(b - a), MADV_WILLNEED);
        }
    }
}

/* The MoE FFN of layer il (llama.cpp's build_moe_ffn with softmax gating,
 * and qwen2moe's shared expert); x += its output. */
void rt__moe_ffn(struct rt_ctx *c, uint32_t il, uint32_t n_tok)
{
    const struct rt_model *m = c->m;
    const struct rt_hparams *hp = &m->hp;
    const struct rt_layer *ly = &m->layers[il];
    const uint32_t K = hp->n_expert_used;
    const bool shexp = ly->wdown.data != NULL;
    struct rt_act_plan plan;
    /* router logits (+ the shared expert's gate logit) */
    const struct rt_weight *rw[2] = {&ly->gate_inp, &ly->gate_inp_shexp};
    rt__plan_acts(c, rw, shexp ? 2 : 1, &plan);
    struct rt_tok_stage ts = {.op = RT_OP_NORM_QUANT, .n_tok = n_tok, .norm_w = ly->ffn_norm,
                              .plan = &plan};
    rt__run_tok(c, &ts);
    struct rt_mm_stage mm = {.n_tok = n_tok, .n_job = shexp ? 2 : 1};
    mm.job[0] = (struct rt_mm_job){&ly->gate_inp, c->act[plan.slot_of[0]], c->moe_probs,
                                   hp->n_expert, NULL, false};
    if (shexp)
        mm.job[1] = (struct rt_mm_job){&ly->gate_inp_shexp, c->act[plan.slot_of[1]], c->moe_sgate,
                                       1, NULL, false};
    rt__run_mm(c, &mm);
    run_moe_tok(c, il, MOE_ROUTE, n_tok, NULL, false);
    moe_group(c, il, n_tok);
    moe_prefetch(c, il);
    /* routed experts: gate and up, act, down */
    const struct rt_weight *gu[2] = {&ly->gate_exps, &ly->up_exps};
    rt__plan_acts(c, gu, 2, &plan);
    ts = (struct rt_tok_stage){.op = RT_OP_QUANT, .n_tok = n_tok, .src = c->xb, .ld_src = c->xb_ld,
                               .n = hp->n_embd, .plan = &plan};
    rt__run_tok(c, &ts);
    struct moe_stage ms = {.c = c, .n_mat = 2, .w = {&ly->gate_exps, &ly->up_exps},
                           .act = {c->act[plan.slot_of[0]], c->act[plan.slot_of[1]]},
                           .y = {c->moe_hg, c->moe_hu}, .ldy = hp->n_ff_exp};
    mw_pool_run(c->pool, moe_mm_task, &ms);
    const struct rt_weight *dn[1] = {&ly->down_exps};
    rt__plan_acts(c, dn, 1, &plan);
    run_moe_tok(c, il, MOE_ACT, n_tok * K, &plan, false);
    ms = (struct moe_stage){.c = c, .n_mat = 1, .w = {&ly->down_exps}, .act = {c->moe_act},
                            .by_pair = true, .y = {c->moe_out}, .ldy = hp->n_embd};
    mw_pool_run(c->pool, moe_mm_task, &ms);
    if (shexp) {
        /* qwen2moe's shared expert: a dense SwiGLU FFN into xb */
        const uint32_t FS = (uint32_t)ly->wgate.n_out;
        const struct rt_weight *sg[2] = {&ly->wgate, &ly->wup};
        rt__plan_acts(c, sg, 2, &plan);
        ts = (struct rt_tok_stage){.op = RT_OP_QUANT, .n_tok = n_tok, .src = c->xb,
                                   .ld_src = c->xb_ld, .n = hp->n_embd, .plan = &plan};
        rt__run_tok(c, &ts);
        mm = (struct rt_mm_stage){.n_tok = n_tok, .n_job = 2};
        mm.job[0] = (struct rt_mm_job){&ly->wgate, c->act[plan.slot_of[0]], c->hb, FS, NULL, false};
        mm.job[1] = (struct rt_mm_job){&ly->wup, c->act[plan.slot_of[1]], c->hb2, FS, NULL, false};
        rt__run_mm(c, &mm);
        const struct rt_weight *sd[1] = {&ly->wdown};
        rt__plan_acts(c, sd, 1, &plan);
        ts = (struct rt_tok_stage){.op = RT_OP_SWIGLU_QUANT, .n_tok = n_tok, .n = FS,
                                   .plan = &plan};
        rt__run_tok(c, &ts);
        mm = (struct rt_mm_stage){.n_tok = n_tok, .n_job = 1};
        mm.job[0] = (struct rt_mm_job){&ly->wdown, c->act[0], c->xb, c->xb_ld, NULL, false};
        rt__run_mm(c, &mm);
    }
    run_moe_tok(c, il, MOE_COMBINE, n_tok, NULL, shexp);
}
