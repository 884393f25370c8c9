/*
 * runtime/rt_forward.c — the forward pass of llama / mistral / qwen2 and
 * the families qwen3, gemma2, gemma3, phi3 (rt.h) and the context that
 * holds its scratch.
 *
 * One step runs up to n_batch tokens through the graph. Every stage is a
 * fork-join over the thread pool that splits independent outputs: tokens
 * (norms, RoPE, activation quantization), matrix rows (mat-vec), or (token,
 * kv head) pairs (attention). A matrix is read in tiles of RT_TILE rows and
 * each tile is applied to all tokens of the step while it is in cache.
 *
 * Mixture of experts (qwen2moe, qwen3moe, Mixtral): the router and the
 * routing run per token, then the step's (token, expert) pairs are grouped
 * by expert and every tile of a routed expert's matrices is applied to all
 * of its pairs (moe_ffn); unrouted experts are never read.
 *
 * Numerics follow ggml's CPU ops for these graphs: RMSNorm, RoPE, SwiGLU,
 * GELU, soft-capping and the sliding window are rt_ops.h's (shared with
 * calib/); mat-vecs quantize the
 * activation to the weight type's partner format (rt_kernels.h); attention
 * follows llama.cpp's CPU flash attention (attn_chunk / attn_tiled below).
 */
#define _DEFAULT_SOURCE /* madvise */
#include "runtime/rt_int.h"
#include "runtime/rt_ops.h"

#if defined(__aarch64__) && defined(__ARM_NEON) && !defined(MW_FORCE_SCALAR)
#include <arm_neon.h>
#define RT_FWD_NEON 1
#else
#define RT_FWD_NEON 0
#endif

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "quant/quant.h"

#if defined(__x86_64__) && defined(__GNUC__) && !defined(MW_FORCE_SCALAR)
#include <immintrin.h>
#define RT_FWD_X86 1
#define RT__AVX __attribute__((target("avx2,f16c")))
#else
#define RT_FWD_X86 0
#endif

#define RT_TILE 16
#define RT_DEFAULT_BATCH 64
#define RT_DEFAULT_CTX_CAP 4096
/* pool polling rounds before a thread sleeps (~50-100 us of PAUSE): a
 * decoded token is ~60 short stages */
#define RT_POOL_SPIN 2048

// --- activation slots ---

/* The activation slots an input needs for weights ws[0..n): slot[i] gets
 * the slot of ws[i]; returns the number of distinct formats (<= RT_ACT_SLOTS). */
struct act_plan {
    int n_slots;
    const struct rt_act_format *fmt[RT_ACT_SLOTS];
    int slot_of[RT_ACT_SLOTS];
};

static void plan_acts(const struct rt_ctx *c, const struct rt_weight *const *ws, int n,
                      struct act_plan *p)
{
    p->n_slots = 0;
    for (int i = 0; i < n; i++) {
        const struct rt_act_format *af = rt_kernel_act(c->ks, ws[i]->k);
        int s = 0;
        while (s < p->n_slots && p->fmt[s]->type != af->type) s++;
        if (s == p->n_slots) p->fmt[p->n_slots++] = af;
        p->slot_of[i] = s;
    }
}

static void quantize_row(const struct rt_ctx *c, const struct act_plan *p, const float *x,
                         uint32_t n, uint32_t b)
{
    for (int s = 0; s < p->n_slots; s++)
        p->fmt[s]->quantize(x, c->act[s] + (uint64_t)b * c->act_stride, n);
}

// --- stages ---

enum tok_op {
    OP_NORM_QUANT,   /* xb = rmsnorm(x) * w; quantize xb */
    OP_QUANT,        /* quantize src rows */
    OP_ROPE_STORE,   /* rope q and k, store k and v into the cache */
    OP_SWIGLU_QUANT, /* hb = act(hb) * hb2; quantize hb */
    OP_POST_ADD,     /* x += rmsnorm(src) * w (gemma's post norms) */
    OP_SOFTCAP,      /* dst rows (n floats each): final logit soft-capping */
    OP_MOE_ROUTE,    /* MoE: softmax, top-k and weights of each token's router logits */
    OP_MOE_ACT,      /* MoE, per pair: act(gate) * up; quantize into moe_act */
    OP_MOE_COMBINE,  /* MoE: x += sum_j w_j * down_j (+ sigmoid-gated shared expert) */
};

struct tok_stage {
    struct rt_ctx *c;
    enum tok_op op;
    uint32_t n_tok;
    uint32_t pos0;
    uint32_t il;
    const float *norm_w;
    const float *src;
    uint64_t ld_src;
    uint32_t n;          /* elements per row */
    const struct act_plan *plan;
    /* OP_NORM_QUANT for the logits: rows rows_from .. of x, packed into xb */
    uint32_t row_from;
    float *dst;          /* OP_SOFTCAP */
    bool shexp;          /* OP_MOE_COMBINE: add the shared expert's output (in xb) */
};

static void tok_task(void *arg, unsigned ith, unsigned nth)
{
    const struct tok_stage *st = arg;
    struct rt_ctx *c = st->c;
    const struct rt_model *m = c->m;
    const struct rt_hparams *hp = &m->hp;
    uint64_t lo, hi;
    rt__split(st->n_tok, ith, nth, &lo, &hi);
    const uint64_t E = hp->n_embd, qdim = (uint64_t)hp->n_head * hp->head_dim;
    const uint64_t kvdim = (uint64_t)hp->n_head_kv * hp->head_dim;
    for (uint64_t j = lo; j < hi; j++) {
        const uint32_t b = (uint32_t)j;
        switch (st->op) {
        case OP_NORM_QUANT: {
            float *xb = c->xb + (uint64_t)b * c->xb_ld;
            const float *x = c->x + (uint64_t)(st->row_from + b) * E;
            rt_rmsnorm(xb, x, st->norm_w, E, hp->rms_eps);
            quantize_row(c, st->plan, xb, (uint32_t)E, b);
            break;
        }
        case OP_QUANT:
            quantize_row(c, st->plan, st->src + (uint64_t)b * st->ld_src, st->n, b);
            break;
        case OP_ROPE_STORE: {
            const uint32_t tab = c->n_rope > 1 && rt_layer_is_swa(hp, st->il) ? 1 : 0;
            const float *rc = c->rope + ((uint64_t)tab * c->n_batch + b) * hp->n_rot;
            const struct rt_layer *ly = &m->layers[st->il];
            float *q = c->q + (uint64_t)b * qdim;
            float *k = c->k + (uint64_t)b * kvdim;
            if (ly->q_norm) rt_rmsnorm_heads(q, ly->q_norm, hp->n_head, hp->head_dim, hp->rms_eps);
            if (ly->k_norm)
                rt_rmsnorm_heads(k, ly->k_norm, hp->n_head_kv, hp->head_dim, hp->rms_eps);
            for (uint32_t h = 0; h < hp->n_head; h++)
                rt_rope_apply(hp, rc, q + (uint64_t)h * hp->head_dim);
            for (uint32_t h = 0; h < hp->n_head_kv; h++)
                rt_rope_apply(hp, rc, k + (uint64_t)h * hp->head_dim);
            if (c->q_mul != 0.0f)
                for (uint64_t i = 0; i < qdim; i++) q[i] *= c->q_mul;
            rt__kv_store(&c->kv, rt__kv_k(&c->kv, st->il, st->pos0 + b), k);
            rt__kv_store(&c->kv, rt__kv_v(&c->kv, st->il, st->pos0 + b),
                         c->v + (uint64_t)b * kvdim);
            break;
        }
        case OP_SWIGLU_QUANT: {
            const uint32_t F = st->n ? st->n : hp->n_ff; /* n: qwen2moe's shared expert */
            float *g = c->hb + (uint64_t)b * F;
            const float *u = c->hb2 + (uint64_t)b * F;
            rt_ffn_act(hp, g, u, F);
            quantize_row(c, st->plan, g, F, b);
            break;
        }
        case OP_MOE_ROUTE: {
            const uint32_t K = hp->n_expert_used;
            rt_moe_route(c->moe_probs + (uint64_t)b * hp->n_expert, hp->n_expert, K,
                         hp->moe_norm_w, c->ts[ith].idx, c->moe_sel + (uint64_t)b * K,
                         c->moe_w + (uint64_t)b * K);
            break;
        }
        case OP_MOE_ACT: { /* here b is a pair */
            float *g = c->moe_hg + (uint64_t)b * hp->n_ff_exp;
            const float *u = c->moe_hu + (uint64_t)b * hp->n_ff_exp;
            rt_ffn_act(hp, g, u, hp->n_ff_exp);
            st->plan->fmt[0]->quantize(g, c->moe_act + (uint64_t)b * c->act_stride, hp->n_ff_exp);
            break;
        }
        case OP_MOE_COMBINE: {
            /* ggml: experts * weights, summed in top-k order (ffn_moe_out), +
             * shared expert * gate (qwen2moe), then + ffn_inp */
            const uint32_t K = hp->n_expert_used;
            float *x = c->x + (uint64_t)b * E;
            const float *w = c->moe_w + (uint64_t)b * K;
            const float *o = c->moe_out + (uint64_t)b * K * E;
            const float *sh = st->shexp ? c->xb + (uint64_t)b * c->xb_ld : NULL;
            const float sg = sh ? rt_moe_shexp_gate(c->moe_sgate[b]) : 0.0f;
            for (uint64_t i = 0; i < E; i++) {
                float acc = o[i] * w[0];
                for (uint32_t e = 1; e < K; e++) acc = acc + o[(uint64_t)e * E + i] * w[e];
                if (sh) acc = acc + sh[i] * sg;
                x[i] = acc + x[i];
            }
            break;
        }
        case OP_POST_ADD: {
            float *x = c->x + (uint64_t)b * E;
            float *t = c->xb + (uint64_t)b * c->xb_ld;
            rt_rmsnorm(t, t, st->norm_w, E, hp->rms_eps);
            for (uint64_t i = 0; i < E; i++) x[i] = t[i] + x[i];
            break;
        }
        case OP_SOFTCAP:
            rt_softcap(st->dst + (uint64_t)b * st->n, st->n, hp->final_softcap);
            break;
        }
    }
}

static void run_tok(struct rt_ctx *c, struct tok_stage *st)
{
    st->c = c;
    mw_pool_run(c->pool, tok_task, st);
}

/* y[b*ldy + r] (=|+=) W[r] . act[b] (+ bias[r]) for r < n_out, b < n_tok */
struct mm_job {
    const struct rt_weight *w;
    const uint8_t *act;
    float *y;
    uint64_t ldy;
    const float *bias;
    bool add;
};

struct mm_stage {
    struct rt_ctx *c;
    uint32_t n_tok;
    int n_job;
    struct mm_job job[3];
};

static void mm_task(void *arg, unsigned ith, unsigned nth)
{
    const struct mm_stage *st = arg;
    const struct rt_ctx *c = st->c;
    uint64_t total = 0;
    for (int j = 0; j < st->n_job; j++) total += st->job[j].w->n_out;
    /* split in whole tiles so that no tile is shared */
    const uint64_t n_tiles = (total + RT_TILE - 1) / RT_TILE;
    uint64_t tlo, thi;
    rt__split(n_tiles, ith, nth, &tlo, &thi);
    const uint64_t lo = tlo * RT_TILE, hi = thi * RT_TILE < total ? thi * RT_TILE : total;
    float *tile = c->ts[ith].tile;
    uint64_t base = 0;
    for (int j = 0; j < st->n_job; j++) {
        const struct mm_job *J = &st->job[j];
        const uint64_t n_out = J->w->n_out;
        const uint64_t r0 = lo > base ? lo - base : 0;
        const uint64_t r1 = hi < base + n_out ? hi - base : n_out;
        if (st->n_tok == 1 && !J->add && r0 < r1) {
            /* decoding, nothing to add: the whole range in one call, straight
             * into y (the same values the tile path stores) */
            float *y = J->y + r0;
            rt_matvec(J->w->k, J->w->data + r0 * J->w->row_bytes, r1 - r0, J->w->n_in, J->act, y);
            if (J->bias)
                for (uint64_t i = 0; i < r1 - r0; i++) y[i] += J->bias[r0 + i];
            base += n_out;
            if (base >= hi) break;
            continue;
        }
        for (uint64_t t0 = r0; t0 < r1; t0 += RT_TILE) {
            const uint64_t nt = r1 - t0 < RT_TILE ? r1 - t0 : RT_TILE;
            const uint8_t *W = J->w->data + t0 * J->w->row_bytes;
            /* the tile times every token of the step (rt_gemm: each weight
             * block decoded once per panel of tokens) */
            if (!J->add) {
                rt_gemm(J->w->k, W, nt, J->w->n_in, J->act, c->act_stride, st->n_tok, J->y + t0, J->ldy,
                        c->ts[ith].gemm);
                if (J->bias)
                    for (uint32_t b = 0; b < st->n_tok; b++) {
                        float *y = J->y + (uint64_t)b * J->ldy + t0;
                        for (uint64_t i = 0; i < nt; i++) y[i] += J->bias[t0 + i];
                    }
                continue;
            }
            rt_gemm(J->w->k, W, nt, J->w->n_in, J->act, c->act_stride, st->n_tok, tile, RT_TILE,
                    c->ts[ith].gemm);
            for (uint32_t b = 0; b < st->n_tok; b++) {
                float *y = J->y + (uint64_t)b * J->ldy + t0, *tb = tile + (uint64_t)b * RT_TILE;
                if (J->bias)
                    for (uint64_t i = 0; i < nt; i++) tb[i] += J->bias[t0 + i];
                for (uint64_t i = 0; i < nt; i++) y[i] += tb[i];
            }
        }
        base += n_out;
        if (base >= hi) break;
    }
}

static void run_mm(struct rt_ctx *c, struct mm_stage *st)
{
    st->c = c;
    mw_pool_run(c->pool, mm_task, st);
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
static void moe_ffn(struct rt_ctx *c, uint32_t il, uint32_t n_tok)
{
    const struct rt_model *m = c->m;
    const struct rt_hparams *hp = &m->hp;
    const struct rt_layer *ly = &m->layers[il];
    const uint32_t K = hp->n_expert_used;
    const bool shexp = ly->wdown.data != NULL;
    struct act_plan plan;
    /* router logits (+ the shared expert's gate logit) */
    const struct rt_weight *rw[2] = {&ly->gate_inp, &ly->gate_inp_shexp};
    plan_acts(c, rw, shexp ? 2 : 1, &plan);
    struct tok_stage ts = {.op = OP_NORM_QUANT, .n_tok = n_tok, .norm_w = ly->ffn_norm,
                           .plan = &plan};
    run_tok(c, &ts);
    struct mm_stage mm = {.n_tok = n_tok, .n_job = shexp ? 2 : 1};
    mm.job[0] = (struct mm_job){&ly->gate_inp, c->act[plan.slot_of[0]], c->moe_probs,
                                hp->n_expert, NULL, false};
    if (shexp)
        mm.job[1] = (struct mm_job){&ly->gate_inp_shexp, c->act[plan.slot_of[1]], c->moe_sgate,
                                    1, NULL, false};
    run_mm(c, &mm);
    ts = (struct tok_stage){.op = OP_MOE_ROUTE, .n_tok = n_tok};
    run_tok(c, &ts);
    moe_group(c, il, n_tok);
    moe_prefetch(c, il);
    /* routed experts: gate and up, act, down */
    const struct rt_weight *gu[2] = {&ly->gate_exps, &ly->up_exps};
    plan_acts(c, gu, 2, &plan);
    ts = (struct tok_stage){.op = OP_QUANT, .n_tok = n_tok, .src = c->xb, .ld_src = c->xb_ld,
                            .n = hp->n_embd, .plan = &plan};
    run_tok(c, &ts);
    struct moe_stage ms = {.c = c, .n_mat = 2, .w = {&ly->gate_exps, &ly->up_exps},
                           .act = {c->act[plan.slot_of[0]], c->act[plan.slot_of[1]]},
                           .y = {c->moe_hg, c->moe_hu}, .ldy = hp->n_ff_exp};
    mw_pool_run(c->pool, moe_mm_task, &ms);
    const struct rt_weight *dn[1] = {&ly->down_exps};
    plan_acts(c, dn, 1, &plan);
    ts = (struct tok_stage){.op = OP_MOE_ACT, .n_tok = n_tok * K, .plan = &plan};
    run_tok(c, &ts);
    ms = (struct moe_stage){.c = c, .n_mat = 1, .w = {&ly->down_exps}, .act = {c->moe_act},
                            .by_pair = true, .y = {c->moe_out}, .ldy = hp->n_embd};
    mw_pool_run(c->pool, moe_mm_task, &ms);
    if (shexp) {
        /* qwen2moe's shared expert: a dense SwiGLU FFN into xb */
        const uint32_t FS = (uint32_t)ly->wgate.n_out;
        const struct rt_weight *sg[2] = {&ly->wgate, &ly->wup};
        plan_acts(c, sg, 2, &plan);
        ts = (struct tok_stage){.op = OP_QUANT, .n_tok = n_tok, .src = c->xb,
                                .ld_src = c->xb_ld, .n = hp->n_embd, .plan = &plan};
        run_tok(c, &ts);
        mm = (struct mm_stage){.n_tok = n_tok, .n_job = 2};
        mm.job[0] = (struct mm_job){&ly->wgate, c->act[plan.slot_of[0]], c->hb, FS, NULL, false};
        mm.job[1] = (struct mm_job){&ly->wup, c->act[plan.slot_of[1]], c->hb2, FS, NULL, false};
        run_mm(c, &mm);
        const struct rt_weight *sd[1] = {&ly->wdown};
        plan_acts(c, sd, 1, &plan);
        ts = (struct tok_stage){.op = OP_SWIGLU_QUANT, .n_tok = n_tok, .n = FS, .plan = &plan};
        run_tok(c, &ts);
        mm = (struct mm_stage){.n_tok = n_tok, .n_job = 1};
        mm.job[0] = (struct mm_job){&ly->wdown, c->act[0], c->xb, c->xb_ld, NULL, false};
        run_mm(c, &mm);
    }
    ts = (struct tok_stage){.op = OP_MOE_COMBINE, .n_tok = n_tok, .shexp = shexp};
    run_tok(c, &ts);
}

struct attn_stage {
    struct rt_ctx *c;
    uint32_t n_tok;
    uint32_t pos0;
    uint32_t il;
    bool tiled; /* the rt_eval call has >= RT_FA_TILE tokens (llama.cpp's ubatch) */
};

/* Attention of the n_rep query heads q (n_rep x hd floats) that share kv
 * head g, over cache positions 0 .. n_kv-1 of layer il, into out.
 *
 * llama.cpp's CPU flash attention (ggml-cpu/ops.cpp) has two paths and the
 * runtime follows the same split, so that greedy decoding reproduces its
 * tokens: steps of fewer than RT_FA_TILE tokens (decoding, short prompts) or
 * a q8_0 cache take "one_chunk": the query in the K cache's dot format
 * (f16 / q8_0), an online softmax over positions, and for an f16 cache an
 * f16 accumulator (VKQ16); larger steps with an f16 cache take "tiled": f32
 * query and keys, tiles of RT_FA_TILE positions, f32 accumulator. As in
 * llama.cpp the choice follows the size of the whole batch handed to
 * rt_eval (llama.cpp's ubatch), not of our internal steps; the result then
 * depends on how tokens are grouped into rt_eval calls (one call of >= 64
 * tokens vs. smaller calls), never on the thread count or --batch. */
/* The f16 accumulator step of one_chunk: a = f16(f32(a) * ms) when
 * ms != 1, then a = f16(f32(a) + v * vs), element by element (each
 * element's operations are its own, so the vector path is bit-identical:
 * the same IEEE conversions, round to nearest even, and f32 products/sums,
 * never fused). */
/* exp of the tiled softmax: x[i] = e^(x[i] - m), i < n. A fixed sequence of
 * f32 operations with fused multiply-adds, the same on the plain (fmaf),
 * AVX2 and NEON paths, so every CPU gives the same bits: Arm's
 * optimized-routines vector expf (as ggml's ggml_v_expf): n = round(y / ln 2)
 * by one fma and the 1.5 * 2^23 shift, r = y - n ln 2 in two fmas, 2^n from
 * the shifted value's bits, 2^n + 2^n poly(r) with a degree-5 polynomial in
 * five fmas. Within 1.96 ulp of e^y on [-87.3, 0], the softmax's range
 * (1.954 at most, checked on every float there); y < -87.3 (masked
 * positions: -inf) gives exactly 0, y > 88.3 is taken as 88.3, NaN stays
 * NaN. */
#define RT_EXP_LO -87.3f
#define RT_EXP_HI 88.3f
/* the constants, shared by the plain, AVX2 and NEON paths (the same bits
 * need the same constants and the same operations): */
#define RT_EXP_SHIFT 0x1.8p23f /* 1.5 * 2^23: adding it rounds to an integer */
#define RT_EXP_INV_LN2 0x1.715476p+0f
#define RT_EXP_NLN2_HI -0x1.62e4p-1f /* -ln 2 in two parts */
#define RT_EXP_NLN2_LO -0x1.7f7d1cp-20f
/* e = scale + scale * poly(r), poly(r) = C4 r + r^2 ((C2 r + C3) + r^2 (C0 r
 * + C1)): with the path's type T, fma FMA(a, b, c) = a * b + c (one
 * rounding), multiply and broadcast */
#define RT__EXP_POLY(T, e, r, scale, FMA, MUL, SET)                                               \
    do {                                                                                          \
        const T r2_ = MUL(r, r);                                                                  \
        const T p_ = FMA(SET(0x1.0e4020p-7f), r, SET(0x1.573e2ep-5f));                            \
        T q_ = FMA(SET(0x1.555e66p-3f), r, SET(0x1.fffdb6p-2f));                                  \
        q_ = FMA(p_, r2_, q_);                                                                    \
        (e) = FMA(FMA(q_, r2_, MUL(SET(0x1.ffffecp-1f), r)), scale, scale);                       \
    } while (0)
#define RT__FMUL(a, b) ((a) * (b))
#define RT__FSET(c) (c)
/* e^y for y in [-87.3, 88.3] */
static inline float exp_poly(float y)
{
    const float z = fmaf(y, RT_EXP_INV_LN2, RT_EXP_SHIFT);
    const float n = z - RT_EXP_SHIFT;
    const float r = fmaf(n, RT_EXP_NLN2_LO, fmaf(n, RT_EXP_NLN2_HI, y));
    uint32_t b;
    memcpy(&b, &z, 4);
    b = (b << 23) + 0x3f800000u; /* 2^n: n sits in z's low mantissa bits */
    float scale, e;
    memcpy(&scale, &b, 4);
    RT__EXP_POLY(float, e, r, scale, fmaf, RT__FMUL, RT__FSET);
    return e;
}

/* r_j = s_j + s_{j+4}, then (r_0 + r_1) + (r_2 + r_3): the reduction of the
 * tiled attention's 8 partials (its dot products and its sum of exps). */
static inline float tsum8_plain(const float *s)
{
    float r[4];
    for (int j = 0; j < 4; j++) r[j] = s[j] + s[j + 4];
    return (r[0] + r[1]) + (r[2] + r[3]);
}

/* exp_poly over a tile, n % 8 == 0 (the callers pad with -inf, whose exp is
 * 0); returns the sum of the exps: element i added to partial i % 8, the
 * partials reduced by tsum8_plain. */
static inline float exp_tile_plain(float *x, float m, uint32_t n)
{
    float s[8] = {0};
    for (uint32_t i = 0; i < n; i++) {
        float y = x[i] - m;
        if (y < RT_EXP_LO) {
            x[i] = 0.0f;
        } else {
            y = y > RT_EXP_HI ? RT_EXP_HI : y;
            x[i] = exp_poly(y);
        }
        s[i % 8] += x[i];
    }
    return tsum8_plain(s);
}

/* The largest of x[0..n) (-inf pads included, NaN ignored); exact, so the
 * vector paths' lane order does not matter (but for the sign of a zero
 * maximum, which no later operation sees). */
static inline float tile_max_plain(const float *x, uint32_t n)
{
    float m = -INFINITY;
    for (uint32_t i = 0; i < n; i++) m = x[i] > m ? x[i] : m;
    return m;
}

#if RT_FWD_X86
/* The x86 F16C lanes of acc16_update: VCVTPH2PS / VCVTPS2PH (round to nearest
 * even) are the exact conversions of rt__h2f / rt__f2h; products and sums
 * are separate instructions (never fused). Returns the elements done. */
RT__AVX static inline uint32_t acc16_update_f16c(uint16_t *a, const float *v, float ms, float vs, uint32_t n)
{
    uint32_t i = 0;
    const __m256 vms = _mm256_set1_ps(ms), vvs = _mm256_set1_ps(vs);
    for (; i + 8 <= n; i += 8) {
        __m256 x = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(a + i)));
        if (ms != 1.0f)
            x = _mm256_cvtph_ps(_mm256_cvtps_ph(_mm256_mul_ps(x, vms), _MM_FROUND_TO_NEAREST_INT));
        x = _mm256_add_ps(x, _mm256_mul_ps(_mm256_loadu_ps(v + i), vvs));
        _mm_storeu_si128((__m128i *)(a + i), _mm256_cvtps_ph(x, _MM_FROUND_TO_NEAREST_INT));
    }
    return i;
}

/* attn_chunk for an f16 cache on an F16C CPU, hd % 16 == 0. The positions
 * go by tiles of RT_FA_TILE: their K and V rows are converted once for the
 * n_rep heads (the generic path converts K once per head, inside the F16
 * dot kernel); then per head the tile's scores, its softmax steps (the
 * running max, one expf per position, the sum) and its accumulator steps,
 * the f16 accumulator held in registers as exact f16 values across the
 * tile. Per head and position the operations are attn_chunk's, in the same
 * order: the query in f16 (kact), the F16 x F16 dot's 16 partials (product
 * i into partial i % 16, multiply then add) reduced as rt__reduce16, expf,
 * then a = f16(f32(a) * ms) when ms != 1 and a = f16(f32(a) + v * vs) — so
 * the bits are the same. hd: a constant in the specialised instances. */
RT__AVX static inline __attribute__((always_inline)) void
attn_chunk_f16_body(const struct rt_ctx *c, struct rt_thread_scratch *ts, uint32_t il, uint32_t g,
                    const float *q, uint32_t first, uint32_t n_kv, float scale, float *out,
                    const uint32_t hd)
{
    const struct rt_hparams *hp = &c->m->hp;
    const struct rt_kv *kv = &c->kv;
    const uint32_t n_rep = hp->n_head / hp->n_head_kv;
    const uint64_t koff = 2 * (uint64_t)g * hd;
    float *M = ts->ms, *S = ts->ms + n_rep;
    /* (n_rep, hd) f32 queries; (RT_FA_TILE, hd) K and V rows; per position
     * of the tile its score, ms and vs (kq holds RT_FA_QT * n_rep tiles) */
    float *qf = ts->acc, *kt = ts->kt, *vt = ts->vt;
    float *sc = ts->kq, *msv = ts->kq + RT_FA_TILE, *vsv = ts->kq + 2 * RT_FA_TILE;
    for (uint32_t r = 0; r < n_rep; r++) {
        uint8_t *qa = ts->qact + r * ts->qact_stride;
        c->kact->quantize(q + (uint64_t)r * hd, qa, hd);
        for (uint32_t i = 0; i < hd; i += 8)
            _mm256_storeu_ps(qf + (uint64_t)r * hd + i,
                             _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(qa + 2 * i))));
        M[r] = -INFINITY;
        S[r] = 0.0f;
    }
    memset(ts->acc16, 0, (uint64_t)n_rep * hd * sizeof *ts->acc16);
    const float cap = hp->attn_softcap;
    for (uint32_t t0 = first; t0 < n_kv; t0 += RT_FA_TILE) {
        const uint32_t nt = n_kv - t0 < RT_FA_TILE ? n_kv - t0 : RT_FA_TILE;
        for (uint32_t t = 0; t < nt; t++) {
            const uint8_t *kr = rt__kv_k(kv, il, t0 + t) + koff, *vr = rt__kv_v(kv, il, t0 + t) + koff;
            for (uint32_t i = 0; i < hd; i += 8) {
                _mm256_storeu_ps(kt + (uint64_t)t * hd + i,
                                 _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(kr + 2 * i))));
                _mm256_storeu_ps(vt + (uint64_t)t * hd + i,
                                 _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(vr + 2 * i))));
            }
        }
        for (uint32_t r = 0; r < n_rep; r++) {
            const float *qr = qf + (uint64_t)r * hd;
            for (uint32_t t = 0; t < nt; t++) {
                const float *kr = kt + (uint64_t)t * hd;
                __m256 s0 = _mm256_setzero_ps(), s1 = s0;
                for (uint32_t i = 0; i < hd; i += 16) {
                    s0 = _mm256_add_ps(s0, _mm256_mul_ps(_mm256_loadu_ps(kr + i), _mm256_loadu_ps(qr + i)));
                    s1 = _mm256_add_ps(s1, _mm256_mul_ps(_mm256_loadu_ps(kr + i + 8), _mm256_loadu_ps(qr + i + 8)));
                }
                /* rt__reduce16: r_j = (p_j + p_{4+j}) + (p_{8+j} + p_{12+j}),
                 * then (r_0 + r_1) + (r_2 + r_3) */
                const __m128 h = _mm_add_ps(_mm_add_ps(_mm256_castps256_ps128(s0), _mm256_extractf128_ps(s0, 1)),
                                            _mm_add_ps(_mm256_castps256_ps128(s1), _mm256_extractf128_ps(s1, 1)));
                const __m128 h2 = _mm_add_ss(h, _mm_movehdup_ps(h));             /* r0 + r1 */
                const __m128 h3 = _mm_movehl_ps(h, h);                            /* r2, r3 */
                const __m128 h4 = _mm_add_ss(h3, _mm_movehdup_ps(h3));           /* r2 + r3 */
                sc[t] = rt_attn_score(_mm_cvtss_f32(_mm_add_ss(h2, h4)), scale, cap);
            }
            float m = M[r], sum = S[r];
            for (uint32_t t = 0; t < nt; t++) {
                const float s = sc[t], Mold = m;
                float ms = 1.0f, vs = 1.0f;
                if (s > m) {
                    m = s;
                    ms = expf(Mold - m);
                } else {
                    vs = expf(s - m);
                }
                msv[t] = ms;
                vsv[t] = vs;
                sum = sum * ms + vs;
            }
            M[r] = m;
            S[r] = sum;
            uint16_t *a16 = ts->acc16 + (uint64_t)r * hd;
            for (uint32_t c0 = 0; c0 < hd; c0 += 64) {
                const uint32_t nv = (hd - c0 < 64 ? hd - c0 : 64) / 8;
                __m256 acc[8];
                for (uint32_t j = 0; j < nv; j++)
                    acc[j] = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(a16 + c0 + 8 * j)));
                for (uint32_t t = 0; t < nt; t++) {
                    const float *vr = vt + (uint64_t)t * hd + c0;
                    const __m256 vs = _mm256_set1_ps(vsv[t]);
                    if (msv[t] != 1.0f) {
                        const __m256 ms = _mm256_set1_ps(msv[t]);
                        for (uint32_t j = 0; j < nv; j++)
                            acc[j] = _mm256_cvtph_ps(_mm256_cvtps_ph(_mm256_mul_ps(acc[j], ms), _MM_FROUND_TO_NEAREST_INT));
                    }
                    for (uint32_t j = 0; j < nv; j++)
                        acc[j] = _mm256_cvtph_ps(_mm256_cvtps_ph(
                            _mm256_add_ps(acc[j], _mm256_mul_ps(_mm256_loadu_ps(vr + 8 * j), vs)),
                            _MM_FROUND_TO_NEAREST_INT));
                }
                for (uint32_t j = 0; j < nv; j++)
                    _mm_storeu_si128((__m128i *)(a16 + c0 + 8 * j),
                                     _mm256_cvtps_ph(acc[j], _MM_FROUND_TO_NEAREST_INT));
            }
        }
    }
    for (uint32_t r = 0; r < n_rep; r++) {
        const float iv = S[r] == 0.0f ? 0.0f : 1.0f / S[r];
        const uint16_t *a = ts->acc16 + (uint64_t)r * hd;
        for (uint32_t i = 0; i < hd; i++) out[(uint64_t)r * hd + i] = rt__h2f(a[i]) * iv;
    }
}

RT__AVX static void attn_chunk_f16_avx(const struct rt_ctx *c, struct rt_thread_scratch *ts,
                                       uint32_t il, uint32_t g, const float *q, uint32_t first,
                                       uint32_t n_kv, float scale, float *out)
{
    const uint32_t hd = c->m->hp.head_dim;
    if (hd == 64)
        attn_chunk_f16_body(c, ts, il, g, q, first, n_kv, scale, out, 64);
    else if (hd == 128)
        attn_chunk_f16_body(c, ts, il, g, q, first, n_kv, scale, out, 128);
    else
        attn_chunk_f16_body(c, ts, il, g, q, first, n_kv, scale, out, hd);
}

/* a[i] = a[i] * ms (when ms != 1), then a[i] += v[i] * p: element by element,
 * the scalar loop's operations. Returns the elements done. */
RT__AVX static inline uint32_t axpy_avx(float *a, const float *v, float ms, float p, uint32_t n)
{
    uint32_t i = 0;
    const __m256 vms = _mm256_set1_ps(ms), vp = _mm256_set1_ps(p);
    for (; i + 8 <= n; i += 8) {
        __m256 x = _mm256_loadu_ps(a + i);
        if (ms != 1.0f) x = _mm256_mul_ps(x, vms);
        _mm256_storeu_ps(a + i, _mm256_add_ps(x, _mm256_mul_ps(vp, _mm256_loadu_ps(v + i))));
    }
    return i;
}

/* The tiled attention's AVX2 helpers (FMA: rt_cpu's avx2 includes it); each
 * does its plain twin's operations on every element, in the same order. */
#define RT__AVXF __attribute__((target("avx2,f16c,fma")))

/* acc_tile_plain's operations: the accumulators stay in registers, 64
 * elements at a time, across the tile. hd % 8 == 0. */
RT__AVXF static inline void acc_tile_avx(float *a, const float *v, const float *p, float ms,
                                         uint32_t t0, uint32_t t1, uint32_t hd)
{
    const __m256 vms = _mm256_set1_ps(ms);
    for (uint32_t c0 = 0; c0 < hd; c0 += 64) {
        const uint32_t nv = (hd - c0 < 64 ? hd - c0 : 64) / 8;
        __m256 acc[8];
        for (uint32_t j = 0; j < nv; j++) {
            acc[j] = _mm256_loadu_ps(a + c0 + 8 * j);
            if (ms != 1.0f) acc[j] = _mm256_mul_ps(acc[j], vms);
        }
        for (uint32_t tk = t0; tk < t1; tk++) {
            const __m256 pp = _mm256_set1_ps(p[tk]);
            const float *vr = v + (uint64_t)tk * hd + c0;
            for (uint32_t j = 0; j < nv; j++) acc[j] = _mm256_fmadd_ps(pp, _mm256_loadu_ps(vr + 8 * j), acc[j]);
        }
        for (uint32_t j = 0; j < nv; j++) _mm256_storeu_ps(a + c0 + 8 * j, acc[j]);
    }
}

/* exp_tile_plain's operations, eight lanes (= the eight partials) at a time;
 * n % 8 == 0. */
RT__AVXF static inline float exp_tile_avx(float *x, float m, uint32_t n)
{
    const __m256 vm = _mm256_set1_ps(m), lo = _mm256_set1_ps(RT_EXP_LO), hi = _mm256_set1_ps(RT_EXP_HI);
    const __m256 shift = _mm256_set1_ps(RT_EXP_SHIFT);
    __m256 s = _mm256_setzero_ps();
    for (uint32_t i = 0; i < n; i += 8) {
        __m256 y = _mm256_sub_ps(_mm256_loadu_ps(x + i), vm);
        const __m256 small = _mm256_cmp_ps(y, lo, _CMP_LT_OQ);
        y = _mm256_min_ps(hi, y); /* hi < y ? hi : y: NaN stays */
        const __m256 z = _mm256_fmadd_ps(y, _mm256_set1_ps(RT_EXP_INV_LN2), shift);
        const __m256 nf = _mm256_sub_ps(z, shift);
        const __m256 r = _mm256_fmadd_ps(nf, _mm256_set1_ps(RT_EXP_NLN2_LO),
                                         _mm256_fmadd_ps(nf, _mm256_set1_ps(RT_EXP_NLN2_HI), y));
        const __m256 scale = _mm256_castsi256_ps(
            _mm256_add_epi32(_mm256_slli_epi32(_mm256_castps_si256(z), 23), _mm256_set1_epi32(0x3f800000)));
        __m256 e;
        RT__EXP_POLY(__m256, e, r, scale, _mm256_fmadd_ps, _mm256_mul_ps, _mm256_set1_ps);
        e = _mm256_andnot_ps(small, e);
        _mm256_storeu_ps(x + i, e);
        s = _mm256_add_ps(s, e);
    }
    float t[8];
    _mm256_storeu_ps(t, s);
    return tsum8_plain(t);
}

/* tdot_plain's operations: lane j = partial j. */
RT__AVXF static inline float tdot_avx(const float *x, const float *y, uint32_t n)
{
    __m256 acc = _mm256_mul_ps(_mm256_loadu_ps(x), _mm256_loadu_ps(y));
    for (uint32_t i = 8; i < n; i += 8)
        acc = _mm256_fmadd_ps(_mm256_loadu_ps(x + i), _mm256_loadu_ps(y + i), acc);
    float t[8];
    _mm256_storeu_ps(t, acc);
    return tsum8_plain(t);
}

/* tile_max_plain (n % 8 == 0): _mm256_max_ps(x, m) is x > m ? x : m. */
RT__AVXF static inline float tile_max_avx(const float *x, uint32_t n)
{
    __m256 m = _mm256_set1_ps(-INFINITY);
    for (uint32_t i = 0; i < n; i += 8) m = _mm256_max_ps(_mm256_loadu_ps(x + i), m);
    float t[8];
    _mm256_storeu_ps(t, m);
    return tile_max_plain(t, 8);
}
#endif

/* The tiled attention's score dot x . y over n floats (a multiple of 8,
 * >= 8): partial j = x_j y_j, then product i fused into partial i % 8 (p =
 * fma(x_i, y_i, p)), the partials reduced by tsum8_plain — the same
 * operations with 8 float lanes (x86) or two float32x4 (aarch64), so every
 * path gives the same bits. */
static inline float tdot_plain(const float *x, const float *y, uint32_t n)
{
    float p[8];
    for (uint32_t i = 0; i < 8; i++) p[i] = x[i] * y[i];
    for (uint32_t i = 8; i < n; i++) p[i % 8] = fmaf(x[i], y[i], p[i % 8]);
    return tsum8_plain(p);
}

/* a[i] = a[i] * ms (when ms != 1), then a[i] = fma(p[tk], v[tk][i], a[i])
 * for tk = t0 .. t1 - 1 in that order, element by element. */
static inline void acc_tile_plain(float *a, const float *v, const float *p, float ms, uint32_t t0,
                                  uint32_t t1, uint32_t hd)
{
    if (ms != 1.0f)
        for (uint32_t i = 0; i < hd; i++) a[i] *= ms;
    for (uint32_t tk = t0; tk < t1; tk++)
        for (uint32_t i = 0; i < hd; i++) a[i] = fmaf(p[tk], v[(uint64_t)tk * hd + i], a[i]);
}

static inline void axpy_plain(float *a, const float *v, float ms, float p, uint32_t n)
{
    for (uint32_t i = 0; i < n; i++) {
        if (ms != 1.0f) a[i] *= ms;
        a[i] += p * v[i];
    }
}

static void axpy(const struct rt_ctx *c, float *a, const float *v, float ms, float p, uint32_t n)
{
    uint32_t i = 0;
#if RT_FWD_X86
    if (c->kv.f16c) i = axpy_avx(a, v, ms, p, n);
#else
    (void)c;
#endif
    axpy_plain(a + i, v + i, ms, p, n - i);
}

static void acc16_update(const struct rt_ctx *c, uint16_t *a, const float *v, float ms, float vs,
                         uint32_t n)
{
    uint32_t i = 0;
#if RT_FWD_X86
    if (c->kv.f16c) i = acc16_update_f16c(a, v, ms, vs, n);
#else
    (void)c;
#endif
#if RT_FWD_NEON
    const float32x4_t vms = vdupq_n_f32(ms), vvs = vdupq_n_f32(vs);
    if (ms == 1.0f)
        for (; i + 8 <= n; i += 8) {
            const float16x8_t h = vreinterpretq_f16_u16(vld1q_u16(a + i));
            const float32x4_t x0 =
                vaddq_f32(vcvt_f32_f16(vget_low_f16(h)), vmulq_f32(vld1q_f32(v + i), vvs));
            const float32x4_t x1 =
                vaddq_f32(vcvt_high_f32_f16(h), vmulq_f32(vld1q_f32(v + i + 4), vvs));
            vst1q_u16(a + i, vreinterpretq_u16_f16(vcvt_high_f16_f32(vcvt_f16_f32(x0), x1)));
        }
    for (; i + 4 <= n; i += 4) {
        float32x4_t x = vcvt_f32_f16(vreinterpret_f16_u16(vld1_u16(a + i)));
        if (ms != 1.0f) x = vcvt_f32_f16(vcvt_f16_f32(vmulq_f32(x, vms)));
        x = vaddq_f32(x, vmulq_f32(vld1q_f32(v + i), vvs));
        vst1_u16(a + i, vreinterpret_u16_f16(vcvt_f16_f32(x)));
    }
#endif
    for (; i < n; i++) {
        if (ms != 1.0f) a[i] = rt__f2h(rt__h2f(a[i]) * ms);
        a[i] = rt__f2h(rt__h2f(a[i]) + v[i] * vs);
    }
}

#if RT_FWD_NEON
/* acc16_update for n % 8 == 0, eight lanes at a time and inlined: per
 * element the same conversions (round to nearest even) and separate
 * products and sums. */
static inline __attribute__((always_inline)) void acc16_neon8(uint16_t *a, const float *v, float ms,
                                                              float vs, uint32_t n)
{
    const float32x4_t vms = vdupq_n_f32(ms), vvs = vdupq_n_f32(vs);
    const bool rescale = ms != 1.0f;
    for (uint32_t i = 0; i < n; i += 8) {
        const float16x8_t h = vreinterpretq_f16_u16(vld1q_u16(a + i));
        float32x4_t x0 = vcvt_f32_f16(vget_low_f16(h)), x1 = vcvt_high_f32_f16(h);
        if (rescale) {
            x0 = vcvt_f32_f16(vcvt_f16_f32(vmulq_f32(x0, vms)));
            x1 = vcvt_f32_f16(vcvt_f16_f32(vmulq_f32(x1, vms)));
        }
        x0 = vaddq_f32(x0, vmulq_f32(vld1q_f32(v + i), vvs));
        x1 = vaddq_f32(x1, vmulq_f32(vld1q_f32(v + i + 4), vvs));
        vst1q_u16(a + i, vreinterpretq_u16_f16(vcvt_high_f16_f32(vcvt_f16_f32(x0), x1)));
    }
}

/* attn_chunk for an f16 cache on aarch64, hd % 16 == 0: each position's K
 * and V rows are converted to f32 once for the n_rep heads, and the dot,
 * the softmax step and the accumulator step run inline. The operations are
 * attn_chunk's: the query in f16 (kact), the F16 x F16 dot's 16 partials
 * (product i into partial i % 16, multiply then add, from +0) reduced as
 * rt__reduce16, expf, acc16_update's steps (acc16_neon8) — so the bits are
 * the same. */
static void attn_chunk_f16_neon(const struct rt_ctx *c, struct rt_thread_scratch *ts, uint32_t il,
                                uint32_t g, const float *q, uint32_t first, uint32_t n_kv,
                                float scale, float *out)
{
    const struct rt_hparams *hp = &c->m->hp;
    const struct rt_kv *kv = &c->kv;
    const uint32_t hd = hp->head_dim, n_rep = hp->n_head / hp->n_head_kv;
    const uint64_t koff = 2 * (uint64_t)g * hd;
    float *M = ts->ms, *S = ts->ms + n_rep;
    float *qf = ts->acc, *kf = ts->kt, *vf = ts->vt; /* (n_rep, hd), (hd), (hd) */
    for (uint32_t r = 0; r < n_rep; r++) {
        uint8_t *qa = ts->qact + r * ts->qact_stride;
        c->kact->quantize(q + (uint64_t)r * hd, qa, hd);
        for (uint32_t i = 0; i < hd; i += 8) {
            const float16x8_t h = vreinterpretq_f16_u8(vld1q_u8(qa + 2 * i));
            vst1q_f32(qf + (uint64_t)r * hd + i, vcvt_f32_f16(vget_low_f16(h)));
            vst1q_f32(qf + (uint64_t)r * hd + i + 4, vcvt_high_f32_f16(h));
        }
        M[r] = -INFINITY;
        S[r] = 0.0f;
    }
    memset(ts->acc16, 0, (uint64_t)n_rep * hd * sizeof *ts->acc16);
    const float cap = hp->attn_softcap;
    for (uint32_t t = first; t < n_kv; t++) {
        const uint8_t *krow = rt__kv_k(kv, il, t) + koff, *vrow = rt__kv_v(kv, il, t) + koff;
        for (uint32_t i = 0; i < hd; i += 8) {
            const float16x8_t kh = vreinterpretq_f16_u8(vld1q_u8(krow + 2 * i));
            const float16x8_t vh = vreinterpretq_f16_u8(vld1q_u8(vrow + 2 * i));
            vst1q_f32(kf + i, vcvt_f32_f16(vget_low_f16(kh)));
            vst1q_f32(kf + i + 4, vcvt_high_f32_f16(kh));
            vst1q_f32(vf + i, vcvt_f32_f16(vget_low_f16(vh)));
            vst1q_f32(vf + i + 4, vcvt_high_f32_f16(vh));
        }
        for (uint32_t r = 0; r < n_rep; r++) {
            const float *qr = qf + (uint64_t)r * hd;
            float32x4_t p0 = vdupq_n_f32(0.0f), p1 = p0, p2 = p0, p3 = p0;
            for (uint32_t i = 0; i < hd; i += 16) {
                p0 = vaddq_f32(p0, vmulq_f32(vld1q_f32(kf + i), vld1q_f32(qr + i)));
                p1 = vaddq_f32(p1, vmulq_f32(vld1q_f32(kf + i + 4), vld1q_f32(qr + i + 4)));
                p2 = vaddq_f32(p2, vmulq_f32(vld1q_f32(kf + i + 8), vld1q_f32(qr + i + 8)));
                p3 = vaddq_f32(p3, vmulq_f32(vld1q_f32(kf + i + 12), vld1q_f32(qr + i + 12)));
            }
            /* rt__reduce16: r_j = (p_j + p_{4+j}) + (p_{8+j} + p_{12+j}), then
             * (r_0 + r_1) + (r_2 + r_3) */
            const float32x4_t h = vaddq_f32(vaddq_f32(p0, p1), vaddq_f32(p2, p3));
            float s = rt_attn_score((vgetq_lane_f32(h, 0) + vgetq_lane_f32(h, 1)) +
                                        (vgetq_lane_f32(h, 2) + vgetq_lane_f32(h, 3)),
                                    scale, cap);
            const float Mold = M[r];
            float ms = 1.0f, vs = 1.0f;
            if (s > M[r]) {
                M[r] = s;
                ms = expf(Mold - M[r]);
            } else {
                vs = expf(s - M[r]);
            }
            acc16_neon8(ts->acc16 + (uint64_t)r * hd, vf, ms, vs, hd);
            S[r] = S[r] * ms + vs;
        }
    }
    for (uint32_t r = 0; r < n_rep; r++) {
        const float iv = S[r] == 0.0f ? 0.0f : 1.0f / S[r];
        const uint16_t *a = ts->acc16 + (uint64_t)r * hd;
        for (uint32_t i = 0; i < hd; i++) out[(uint64_t)r * hd + i] = rt__h2f(a[i]) * iv;
    }
}
#endif

static void attn_chunk(const struct rt_ctx *c, struct rt_thread_scratch *ts, uint32_t il,
                       uint32_t g, const float *q, uint32_t first, uint32_t n_kv, float scale,
                       float *out)
{
    const struct rt_hparams *hp = &c->m->hp;
    const struct rt_kv *kv = &c->kv;
    const uint32_t hd = hp->head_dim, n_rep = hp->n_head / hp->n_head_kv;
    const bool f16 = kv->type == RT_KV_F16;
#if RT_FWD_X86
    if (f16 && kv->f16c && hd % 16 == 0) {
        attn_chunk_f16_avx(c, ts, il, g, q, first, n_kv, scale, out);
        return;
    }
#endif
    const uint64_t koff = rt_row_bytes(f16 ? GGUF_TYPE_F16 : GGUF_TYPE_Q8_0, (uint64_t)g * hd);
#if RT_FWD_NEON
    if (f16 && hd % 16 == 0) {
        attn_chunk_f16_neon(c, ts, il, g, q, first, n_kv, scale, out);
        return;
    }
#endif
    float *M = ts->ms, *S = ts->ms + n_rep;
    for (uint32_t r = 0; r < n_rep; r++) {
        c->kact->quantize(q + (uint64_t)r * hd, ts->qact + r * ts->qact_stride, hd);
        M[r] = -INFINITY;
        S[r] = 0.0f;
    }
    memset(ts->acc16, 0, (uint64_t)n_rep * hd * sizeof *ts->acc16);
    memset(ts->acc, 0, (uint64_t)n_rep * hd * sizeof *ts->acc);
    float *v = ts->vt;
    const float cap = c->m->hp.attn_softcap;
    for (uint32_t t = first; t < n_kv; t++) {
        const uint8_t *krow = rt__kv_k(kv, il, t) + koff;
        rt__kv_load(kv, rt__kv_v(kv, il, t), g * hd, hd, v);
        for (uint32_t r = 0; r < n_rep; r++) {
            float s;
            c->kdot->dot(hd, &s, krow, ts->qact + r * ts->qact_stride);
            s = rt_attn_score(s, scale, cap);
            const float Mold = M[r];
            float ms = 1.0f, vs = 1.0f;
            if (s > M[r]) {
                M[r] = s;
                ms = expf(Mold - M[r]);
            } else {
                vs = expf(s - M[r]);
            }
            if (f16) {
                acc16_update(c, ts->acc16 + (uint64_t)r * hd, v, ms, vs, hd);
            } else {
                axpy(c, ts->acc + (uint64_t)r * hd, v, ms, vs, hd);
            }
            S[r] = S[r] * ms + vs;
        }
    }
    for (uint32_t r = 0; r < n_rep; r++) {
        const float iv = S[r] == 0.0f ? 0.0f : 1.0f / S[r];
        float *o = out + (uint64_t)r * hd;
        if (f16) {
            const uint16_t *a = ts->acc16 + (uint64_t)r * hd;
            for (uint32_t i = 0; i < hd; i++) o[i] = rt__h2f(a[i]) * iv;
        } else {
            const float *a = ts->acc + (uint64_t)r * hd;
            for (uint32_t i = 0; i < hd; i++) o[i] = a[i] * iv;
        }
    }
}

/* The tiled path for a group of up to RT_FA_QT query tokens (tokens b0 ..
 * b0 + nq - 1 of the step) and the n_rep query heads that share kv head g:
 * each tile's K and V rows are converted to f32 once for the whole group.
 * Every query does exactly its own operations, in the same order as if it
 * were alone (its own tiles, its own last tile length, its own masked
 * positions), so the result does not depend on the grouping — nor on the
 * thread count or the batch size.
 *
 * Sliding layers: tiles stay where llama.cpp's are (cache cell = position
 * while its cache has not wrapped, as in a perplexity chunk): the first tile
 * of a query starts at the multiple of RT_FA_TILE at or below its `first`
 * position, and its positions before `first` are masked (-inf, weight 0,
 * never accumulated), as whole tiles before it are skipped. */
#if RT_FWD_NEON
#define RT__NFMA(a, b, c) vfmaq_f32(c, a, b) /* a * b + c, fused */
#define RT__TNEON static inline __attribute__((always_inline))

/* tsum8_plain of the partials s0 = (s_0..s_3), s1 = (s_4..s_7) */
RT__TNEON float tsum8_neon(float32x4_t s0, float32x4_t s1)
{
    const float32x4_t r = vaddq_f32(s0, s1);
    return (vgetq_lane_f32(r, 0) + vgetq_lane_f32(r, 1)) + (vgetq_lane_f32(r, 2) + vgetq_lane_f32(r, 3));
}

/* acc_tile_plain for H (1 or 2) heads at once, each V row loaded once for
 * both: heads a + e * hd, weights p + e * RT_FA_TILE, ms[e]. The
 * accumulators stay in registers across the tile, NV * 4 columns at a time
 * (NV 8 or 4; hd % 16 == 0); vfmaq_laneq_f32(a, v, P, L) is
 * fma(P[L], v, a) on every lane. */
RT__TNEON void acc_cols_neon(float *a, const float *v, const float *p, const float *ms, uint32_t t0,
                             uint32_t t1, uint32_t hd, uint32_t c0, const int H, const int NV)
{
    float32x4_t acc[2][8];
    for (int e = 0; e < H; e++) {
        const float32x4_t vms = vdupq_n_f32(ms[e]);
        for (int j = 0; j < NV; j++) {
            acc[e][j] = vld1q_f32(a + (uint64_t)e * hd + c0 + 4 * j);
            if (ms[e] != 1.0f) acc[e][j] = vmulq_f32(acc[e][j], vms);
        }
    }
    const float *vr = v + (uint64_t)t0 * hd + c0, *pp = p + t0;
    uint32_t tk = t0;
    for (; tk + 4 <= t1; tk += 4, vr += 4 * (uint64_t)hd, pp += 4) {
        float32x4_t pv[2];
        for (int e = 0; e < H; e++) pv[e] = vld1q_f32(pp + e * RT_FA_TILE);
#define RT__ACC_STEP(L)                                                                           \
    for (int j = 0; j < NV; j += 2) {                                                             \
        const float32x4_t v0 = vld1q_f32(vr + (L) * (uint64_t)hd + 4 * j);                        \
        const float32x4_t v1 = vld1q_f32(vr + (L) * (uint64_t)hd + 4 * j + 4);                    \
        for (int e = 0; e < H; e++) {                                                             \
            acc[e][j] = vfmaq_laneq_f32(acc[e][j], v0, pv[e], L);                                 \
            acc[e][j + 1] = vfmaq_laneq_f32(acc[e][j + 1], v1, pv[e], L);                         \
        }                                                                                         \
    }
        RT__ACC_STEP(0)
        RT__ACC_STEP(1)
        RT__ACC_STEP(2)
        RT__ACC_STEP(3)
#undef RT__ACC_STEP
    }
    for (; tk < t1; tk++, vr += hd, pp++) {
        for (int j = 0; j < NV; j++) {
            const float32x4_t vv = vld1q_f32(vr + 4 * j);
            for (int e = 0; e < H; e++) acc[e][j] = vfmaq_f32(acc[e][j], vv, vld1q_dup_f32(pp + e * RT_FA_TILE));
        }
    }
    for (int e = 0; e < H; e++)
        for (int j = 0; j < NV; j++) vst1q_f32(a + (uint64_t)e * hd + c0 + 4 * j, acc[e][j]);
}

RT__TNEON void acc_tile_neon(float *a, const float *v, const float *p, const float *ms, uint32_t t0,
                             uint32_t t1, uint32_t hd, const int H)
{
    uint32_t c0 = 0;
    for (; c0 + 32 <= hd; c0 += 32) acc_cols_neon(a, v, p, ms, t0, t1, hd, c0, H, 8);
    if (c0 < hd) acc_cols_neon(a, v, p, ms, t0, t1, hd, c0, H, 4); /* hd % 32 == 16 */
}

/* tdot_plain: partials 0..3 in a0, 4..7 in a1 */
RT__TNEON float tdot_neon(const float *x, const float *y, uint32_t n)
{
    float32x4_t a0 = vmulq_f32(vld1q_f32(x), vld1q_f32(y)), a1 = vmulq_f32(vld1q_f32(x + 4), vld1q_f32(y + 4));
    for (uint32_t i = 8; i < n; i += 8) {
        a0 = vfmaq_f32(a0, vld1q_f32(x + i), vld1q_f32(y + i));
        a1 = vfmaq_f32(a1, vld1q_f32(x + i + 4), vld1q_f32(y + i + 4));
    }
    return tsum8_neon(a0, a1);
}

/* The scores of H (1 or 2) heads (queries q + e * hd, scores kq + e *
 * RT_FA_TILE) against the tile's K rows: kq[tk] = rt_attn_score(tdot_plain(
 * q, K row tk), scale, cap) for t0 <= tk < qt, -inf for tk < t0 (masked).
 * Four K rows at a time, each loaded once for the H heads; the four rows'
 * final reductions as pairwise adds across their vectors, which are
 * tsum8_plain's additions in its order. hd % 8 == 0. */
RT__TNEON void kq_tile_neon(float *kq, const float *q, const float *kt, uint32_t t0, uint32_t qt,
                            uint32_t hd, float scale, float cap, const int H)
{
    const float32x4_t vs = vdupq_n_f32(scale);
    for (uint32_t tk = 0; tk < t0 && tk < qt; tk++)
        for (int e = 0; e < H; e++) kq[e * RT_FA_TILE + tk] = -INFINITY;
    uint32_t tk = t0;
    for (; tk + 4 <= qt; tk += 4) {
        float32x4_t s[2][4][2];
        const float *k = kt + (uint64_t)tk * hd, *qp = q;
        /* eight columns of the H queries and the four rows: OP(s, q, k) */
#define RT__KQ_CHUNK(OP0, OP1)                                                                    \
    do {                                                                                          \
        float32x4_t q0[2], q1[2];                                                                 \
        for (int e = 0; e < H; e++) {                                                             \
            q0[e] = vld1q_f32(qp + (uint64_t)e * hd);                                             \
            q1[e] = vld1q_f32(qp + (uint64_t)e * hd + 4);                                         \
        }                                                                                         \
        for (int j = 0; j < 4; j++) {                                                             \
            const float32x4_t k0 = vld1q_f32(k + (uint64_t)j * hd);                               \
            const float32x4_t k1 = vld1q_f32(k + (uint64_t)j * hd + 4);                           \
            for (int e = 0; e < H; e++) {                                                         \
                s[e][j][0] = OP0;                                                                 \
                s[e][j][1] = OP1;                                                                 \
            }                                                                                     \
        }                                                                                         \
    } while (0)
        RT__KQ_CHUNK(vmulq_f32(q0[e], k0), vmulq_f32(q1[e], k1));
        k += 8, qp += 8;
        for (uint32_t i = 8; i < hd; i += 8, k += 8, qp += 8)
            RT__KQ_CHUNK(vfmaq_f32(s[e][j][0], q0[e], k0), vfmaq_f32(s[e][j][1], q1[e], k1));
#undef RT__KQ_CHUNK
        for (int e = 0; e < H; e++) {
            float32x4_t r[4];
            for (int j = 0; j < 4; j++) r[j] = vaddq_f32(s[e][j][0], s[e][j][1]);
            const float32x4_t d = vpaddq_f32(vpaddq_f32(r[0], r[1]), vpaddq_f32(r[2], r[3]));
            float *o = kq + e * RT_FA_TILE + tk;
            if (cap > 0.0f) {
                float t[4];
                vst1q_f32(t, d);
                for (int j = 0; j < 4; j++) o[j] = rt_attn_score(t[j], scale, cap);
            } else {
                vst1q_f32(o, vmulq_f32(d, vs));
            }
        }
    }
    for (; tk < qt; tk++)
        for (int e = 0; e < H; e++)
            kq[e * RT_FA_TILE + tk] =
                rt_attn_score(tdot_neon(q + (uint64_t)e * hd, kt + (uint64_t)tk * hd, hd), scale, cap);
}

/* exp_tile_plain's operations, two vectors (= the eight partials) at a time
 * (the x86 exp_tile_avx's sequence: the same bits); n % 8 == 0. */
RT__TNEON float32x4_t exp4_neon(float32x4_t x, float32x4_t vm)
{
    const float32x4_t lo = vdupq_n_f32(RT_EXP_LO), hi = vdupq_n_f32(RT_EXP_HI);
    const float32x4_t shift = vdupq_n_f32(RT_EXP_SHIFT);
    float32x4_t y = vsubq_f32(x, vm);
    const uint32x4_t small = vcltq_f32(y, lo);
    y = vminq_f32(y, hi); /* FMIN: NaN stays */
    const float32x4_t z = RT__NFMA(y, vdupq_n_f32(RT_EXP_INV_LN2), shift);
    const float32x4_t nf = vsubq_f32(z, shift);
    const float32x4_t r = RT__NFMA(nf, vdupq_n_f32(RT_EXP_NLN2_LO), RT__NFMA(nf, vdupq_n_f32(RT_EXP_NLN2_HI), y));
    const float32x4_t scale = vreinterpretq_f32_u32(
        vaddq_u32(vshlq_n_u32(vreinterpretq_u32_f32(z), 23), vdupq_n_u32(0x3f800000)));
    float32x4_t e;
    RT__EXP_POLY(float32x4_t, e, r, scale, RT__NFMA, vmulq_f32, vdupq_n_f32);
    return vreinterpretq_f32_u32(vbicq_u32(vreinterpretq_u32_f32(e), small));
}

RT__TNEON float exp_tile_neon(float *x, float m, uint32_t n)
{
    const float32x4_t vm = vdupq_n_f32(m);
    float32x4_t s0 = vdupq_n_f32(0.0f), s1 = vdupq_n_f32(0.0f);
    for (uint32_t i = 0; i < n; i += 8) {
        const float32x4_t e0 = exp4_neon(vld1q_f32(x + i), vm), e1 = exp4_neon(vld1q_f32(x + i + 4), vm);
        vst1q_f32(x + i, e0);
        vst1q_f32(x + i + 4, e1);
        s0 = vaddq_f32(s0, e0);
        s1 = vaddq_f32(s1, e1);
    }
    return tsum8_neon(s0, s1);
}

/* tile_max_plain (n % 8 == 0): FMAXNM ignores a NaN operand, as the plain
 * comparison does */
RT__TNEON float tile_max_neon(const float *x, uint32_t n)
{
    float32x4_t m0 = vdupq_n_f32(-INFINITY), m1 = m0;
    for (uint32_t i = 0; i < n; i += 8) {
        m0 = vmaxnmq_f32(m0, vld1q_f32(x + i));
        m1 = vmaxnmq_f32(m1, vld1q_f32(x + i + 4));
    }
    return vmaxnmvq_f32(vmaxnmq_f32(m0, m1));
}
#endif

/* The tiled body, inlined into a plain and (x86) an AVX2 instance: simd
 * picks the vector helpers, whose operations are the plain ones'; NEON
 * always takes its own. KQ_TILE / ACC_TILE handle H (1 or 2) heads of one
 * query at once. */
#if RT_FWD_X86
#define KQ_ONE(q, k, hd) (simd ? tdot_avx(q, k, hd) : tdot_plain(q, k, hd))
#define ACC_ONE(a, v, p, ms, t0, t1, hd)                                                          \
    (simd ? acc_tile_avx(a, v, p, ms, t0, t1, hd) : acc_tile_plain(a, v, p, ms, t0, t1, hd))
#define EXP_TILE(x, m, n) (simd ? exp_tile_avx(x, m, n) : exp_tile_plain(x, m, n))
#define TILE_MAX(x, n) (simd ? tile_max_avx(x, n) : tile_max_plain(x, n))
#elif RT_FWD_NEON
#define EXP_TILE(x, m, n) exp_tile_neon(x, m, n)
#define TILE_MAX(x, n) tile_max_neon(x, n)
#else
#define KQ_ONE(q, k, hd) ((void)simd, tdot_plain(q, k, hd))
#define ACC_ONE(a, v, p, ms, t0, t1, hd) acc_tile_plain(a, v, p, ms, t0, t1, hd)
#define EXP_TILE(x, m, n) exp_tile_plain(x, m, n)
#define TILE_MAX(x, n) tile_max_plain(x, n)
#endif

static inline __attribute__((always_inline)) void
attn_tiled_body(const struct rt_ctx *c, struct rt_thread_scratch *ts, uint32_t il, uint32_t g,
                uint32_t pos0, uint32_t b0, uint32_t nq, float scale, const bool simd, const uint32_t hdc)
{
    const struct rt_hparams *hp = &c->m->hp;
    const struct rt_kv *kv = &c->kv;
    /* hdc: head_dim as a constant in the specialised instances, 0 = read it */
    const uint32_t hd = hdc ? hdc : hp->head_dim, n_rep = hp->n_head / hp->n_head_kv, nh = nq * n_rep;
    const uint64_t qdim = (uint64_t)hp->n_head * hd;
    float *M = ts->ms, *S = ts->ms + nh;
    const float cap = hp->attn_softcap;
    uint32_t first[RT_FA_QT], n_kv[RT_FA_QT];
    uint32_t lo = UINT32_MAX, hi = 0; /* tiles any query of the group needs */
    for (uint32_t qi = 0; qi < nq; qi++) {
        first[qi] = rt_swa_first(hp, il, pos0 + b0 + qi);
        n_kv[qi] = pos0 + b0 + qi + 1; /* causal: positions 0 .. pos */
        const uint32_t t0 = first[qi] / RT_FA_TILE * RT_FA_TILE;
        lo = t0 < lo ? t0 : lo;
        hi = n_kv[qi] > hi ? n_kv[qi] : hi;
    }
    uint32_t fmin = UINT32_MAX;
    for (uint32_t qi = 0; qi < nq; qi++) fmin = first[qi] < fmin ? first[qi] : fmin;
    for (uint32_t h = 0; h < nh; h++) M[h] = -INFINITY, S[h] = 0.0f;
    memset(ts->acc, 0, (uint64_t)nh * hd * sizeof *ts->acc);
    for (uint32_t ic = lo; ic < hi; ic += RT_FA_TILE) {
        const uint32_t kvt = hi - ic < RT_FA_TILE ? hi - ic : RT_FA_TILE;
        for (uint32_t tk = 0; tk < kvt; tk++) {
            if (ic + tk < fmin) continue; /* masked for every query */
            rt__kv_load(kv, rt__kv_k(kv, il, ic + tk), g * hd, hd, ts->kt + (uint64_t)tk * hd);
            rt__kv_load(kv, rt__kv_v(kv, il, ic + tk), g * hd, hd, ts->vt + (uint64_t)tk * hd);
        }
        for (uint32_t qi = 0; qi < nq; qi++) {
            if (ic < first[qi] / RT_FA_TILE * RT_FA_TILE || ic >= n_kv[qi]) continue;
            const uint32_t qt = n_kv[qi] - ic < RT_FA_TILE ? n_kv[qi] - ic : RT_FA_TILE;
            const float *q = c->q + (uint64_t)(b0 + qi) * qdim + (uint64_t)g * n_rep * hd;
            /* masked positions (before first) are a prefix of the tile; the
             * scores are padded with -inf to q8 for the 8-lane max and exp */
            const uint32_t tm = first[qi] > ic ? first[qi] - ic : 0, q8 = (qt + 7) & ~7u;
            for (uint32_t r = 0; r < n_rep; r += 2) {
                const int H = n_rep - r >= 2 ? 2 : 1;
                const uint32_t h0 = qi * n_rep + r;
                float *kq = ts->kq + (uint64_t)h0 * RT_FA_TILE, *a = ts->acc + (uint64_t)h0 * hd;
                const float *qr = q + (uint64_t)r * hd;
#if RT_FWD_NEON
                (void)simd;
                if (H == 2)
                    kq_tile_neon(kq, qr, ts->kt, tm, qt, hd, scale, cap, 2);
                else
                    kq_tile_neon(kq, qr, ts->kt, tm, qt, hd, scale, cap, 1);
#else
                for (int e = 0; e < H; e++)
                    for (uint32_t tk = 0; tk < qt; tk++)
                        kq[e * RT_FA_TILE + tk] =
                            tk < tm ? -INFINITY
                                    : rt_attn_score(KQ_ONE(qr + (uint64_t)e * hd, ts->kt + (uint64_t)tk * hd, hd),
                                                    scale, cap);
#endif
                float ms[2];
                for (int e = 0; e < H; e++) {
                    const uint32_t h = h0 + (uint32_t)e;
                    float *ke = kq + e * RT_FA_TILE;
                    for (uint32_t tk = qt; tk < q8; tk++) ke[tk] = -INFINITY;
                    const float Mnew = fmaxf(M[h], TILE_MAX(ke, q8));
                    ms[e] = 1.0f;
                    if (Mnew > M[h]) {
                        ms[e] = expf(M[h] - Mnew);
                        S[h] *= ms[e];
                    }
                    M[h] = Mnew;
                    S[h] += EXP_TILE(ke, Mnew, q8);
                }
                /* the accumulators: a * ms (when ms != 1), then the tile */
#if RT_FWD_NEON
                if (H == 2)
                    acc_tile_neon(a, ts->vt, kq, ms, tm, qt, hd, 2);
                else
                    acc_tile_neon(a, ts->vt, kq, ms, tm, qt, hd, 1);
#else
                for (int e = 0; e < H; e++)
                    ACC_ONE(a + (uint64_t)e * hd, ts->vt, kq + e * RT_FA_TILE, ms[e], tm, qt, hd);
#endif
            }
        }
    }
    for (uint32_t qi = 0; qi < nq; qi++) {
        float *out = c->xb + (uint64_t)(b0 + qi) * c->xb_ld + (uint64_t)g * n_rep * hd;
        for (uint32_t r = 0; r < n_rep; r++) {
            const uint32_t h = qi * n_rep + r;
            const float iv = S[h] == 0.0f ? 0.0f : 1.0f / S[h];
            for (uint32_t i = 0; i < hd; i++) out[(uint64_t)r * hd + i] = ts->acc[(uint64_t)h * hd + i] * iv;
        }
    }
}

#undef KQ_ONE
#undef ACC_ONE
#undef EXP_TILE
#undef TILE_MAX

/* aarch64: GCC's pre-allocation scheduling hoists the loads of the score
 * and accumulate loops ahead of their multiply-adds and then copies and
 * spills the accumulators (as in the gemms, rt_kern_int.h's RT__NOSCHED1):
 * source order is kept. */
#if RT_FWD_NEON && defined(__GNUC__) && !defined(__clang__)
__attribute__((optimize("no-schedule-insns")))
#endif
static void attn_tiled_plain(const struct rt_ctx *c, struct rt_thread_scratch *ts, uint32_t il,
                             uint32_t g, uint32_t pos0, uint32_t b0, uint32_t nq, float scale)
{
#if RT_FWD_NEON
    switch (c->m->hp.head_dim) {
    case 32: attn_tiled_body(c, ts, il, g, pos0, b0, nq, scale, false, 32); return;
    case 64: attn_tiled_body(c, ts, il, g, pos0, b0, nq, scale, false, 64); return;
    case 128: attn_tiled_body(c, ts, il, g, pos0, b0, nq, scale, false, 128); return;
    default: break;
    }
#endif
    attn_tiled_body(c, ts, il, g, pos0, b0, nq, scale, false, 0);
}
#if RT_FWD_X86
RT__AVXF static void attn_tiled_avx(const struct rt_ctx *c, struct rt_thread_scratch *ts, uint32_t il,
                                    uint32_t g, uint32_t pos0, uint32_t b0, uint32_t nq, float scale)
{
    attn_tiled_body(c, ts, il, g, pos0, b0, nq, scale, true, 0);
}
#endif

static void attn_tiled(const struct rt_ctx *c, struct rt_thread_scratch *ts, uint32_t il,
                       uint32_t g, uint32_t pos0, uint32_t b0, uint32_t nq, float scale)
{
#if RT_FWD_X86
    if (c->kv.f16c) {
        attn_tiled_avx(c, ts, il, g, pos0, b0, nq, scale);
        return;
    }
#endif
    attn_tiled_plain(c, ts, il, g, pos0, b0, nq, scale);
}

static void attn_task(void *arg, unsigned ith, unsigned nth)
{
    const struct attn_stage *st = arg;
    const struct rt_ctx *c = st->c;
    const struct rt_hparams *hp = &c->m->hp;
    struct rt_thread_scratch *ts = &c->ts[ith];
    const uint32_t hd = hp->head_dim, n_rep = hp->n_head / hp->n_head_kv;
    const uint64_t qdim = (uint64_t)hp->n_head * hd;
    const float scale = c->kq_scale;
    const bool tiled = st->tiled && c->kv.type == RT_KV_F16 && hd % 16 == 0;
    uint64_t lo, hi;
    if (tiled) { /* items: (group of RT_FA_QT tokens, kv head) */
        const uint64_t n_grp = (st->n_tok + RT_FA_QT - 1) / RT_FA_QT;
        rt__split(n_grp * hp->n_head_kv, ith, nth, &lo, &hi);
        for (uint64_t item = lo; item < hi; item++) {
            const uint32_t b0 = (uint32_t)(item / hp->n_head_kv) * RT_FA_QT;
            const uint32_t g = (uint32_t)(item % hp->n_head_kv);
            const uint32_t nq = st->n_tok - b0 < RT_FA_QT ? st->n_tok - b0 : RT_FA_QT;
            attn_tiled(c, ts, st->il, g, st->pos0, b0, nq, scale);
        }
        return;
    }
    rt__split((uint64_t)st->n_tok * hp->n_head_kv, ith, nth, &lo, &hi);
    for (uint64_t item = lo; item < hi; item++) {
        const uint32_t b = (uint32_t)(item / hp->n_head_kv);
        const uint32_t g = (uint32_t)(item % hp->n_head_kv);
        const uint32_t n_kv = st->pos0 + b + 1; /* causal: positions 0 .. pos */
        const uint32_t first = rt_swa_first(hp, st->il, st->pos0 + b);
        const float *q = c->q + (uint64_t)b * qdim + (uint64_t)g * n_rep * hd;
        float *out = c->xb + (uint64_t)b * c->xb_ld + (uint64_t)g * n_rep * hd;
        attn_chunk(c, ts, st->il, g, q, first, n_kv, scale, out);
    }
}

// --- one step ---

/* Run n_tok (<= n_batch) tokens at positions n_past..; logits of tokens
 * lfrom..n_tok-1 into lout (when lout), and of the last token into
 * logits_last (when want_last). */
static void step(struct rt_ctx *c, const int32_t *tok, uint32_t n_tok, uint32_t lfrom, float *lout,
                 bool want_last, bool tiled)
{
    const struct rt_model *m = c->m;
    const struct rt_hparams *hp = &m->hp;
    const uint64_t E = hp->n_embd, qdim = (uint64_t)hp->n_head * hp->head_dim;
    const uint64_t kvdim = (uint64_t)hp->n_head_kv * hp->head_dim;
    const uint32_t pos0 = c->n_past;
    const struct quant_traits *emb = quant_traits_get(m->tok_embd.type);

    const float escale = sqrtf((float)E);
    for (uint32_t b = 0; b < n_tok; b++) {
        float *x = c->x + (uint64_t)b * E;
        emb->to_float(m->tok_embd.data + (uint64_t)tok[b] * m->tok_embd.row_bytes, x, E);
        if (hp->embd_scale)
            for (uint64_t i = 0; i < E; i++) x[i] *= escale;
        for (uint32_t t = 0; t < c->n_rope; t++)
            rt_rope_cache_ex(hp->n_rot, &c->rope_p[t], c->rope_ff, (int32_t)(pos0 + b),
                             c->rope + ((uint64_t)t * c->n_batch + b) * hp->n_rot);
    }

    struct act_plan plan;
    for (uint32_t il = 0; il < hp->n_layer; il++) {
        const struct rt_layer *ly = &m->layers[il];
        /* attention */
        const struct rt_weight *qkv[3] = {&ly->wq, &ly->wk, &ly->wv};
        plan_acts(c, qkv, 3, &plan);
        struct tok_stage ts = {.op = OP_NORM_QUANT, .n_tok = n_tok, .norm_w = ly->attn_norm,
                               .plan = &plan};
        run_tok(c, &ts);
        struct mm_stage mm = {.n_tok = n_tok, .n_job = 3};
        mm.job[0] = (struct mm_job){&ly->wq, c->act[plan.slot_of[0]], c->q, qdim, ly->bq, false};
        mm.job[1] = (struct mm_job){&ly->wk, c->act[plan.slot_of[1]], c->k, kvdim, ly->bk, false};
        mm.job[2] = (struct mm_job){&ly->wv, c->act[plan.slot_of[2]], c->v, kvdim, ly->bv, false};
        run_mm(c, &mm);
        ts = (struct tok_stage){.op = OP_ROPE_STORE, .n_tok = n_tok, .pos0 = pos0, .il = il};
        run_tok(c, &ts);
        struct attn_stage as = {.c = c, .n_tok = n_tok, .pos0 = pos0, .il = il, .tiled = tiled};
        mw_pool_run(c->pool, attn_task, &as);
        const struct rt_weight *wo[1] = {&ly->wo};
        plan_acts(c, wo, 1, &plan);
        ts = (struct tok_stage){.op = OP_QUANT, .n_tok = n_tok, .src = c->xb, .ld_src = c->xb_ld,
                                .n = (uint32_t)qdim, .plan = &plan};
        run_tok(c, &ts);
        mm = (struct mm_stage){.n_tok = n_tok, .n_job = 1};
        if (ly->attn_post_norm) {
            mm.job[0] = (struct mm_job){&ly->wo, c->act[0], c->xb, c->xb_ld, ly->bo, false};
            run_mm(c, &mm);
            ts = (struct tok_stage){.op = OP_POST_ADD, .n_tok = n_tok,
                                    .norm_w = ly->attn_post_norm};
            run_tok(c, &ts);
        } else {
            mm.job[0] = (struct mm_job){&ly->wo, c->act[0], c->x, E, ly->bo, true};
            run_mm(c, &mm);
        }

        /* feed-forward */
        if (hp->n_expert > 0) {
            moe_ffn(c, il, n_tok);
            continue;
        }
        const struct rt_weight *gu[2] = {&ly->wgate, &ly->wup};
        plan_acts(c, gu, 2, &plan);
        ts = (struct tok_stage){.op = OP_NORM_QUANT, .n_tok = n_tok, .norm_w = ly->ffn_norm,
                                .plan = &plan};
        run_tok(c, &ts);
        mm = (struct mm_stage){.n_tok = n_tok, .n_job = 2};
        mm.job[0] = (struct mm_job){&ly->wgate, c->act[plan.slot_of[0]], c->hb, hp->n_ff,
                                    ly->bgate, false};
        mm.job[1] = (struct mm_job){&ly->wup, c->act[plan.slot_of[1]], c->hb2, hp->n_ff, ly->bup,
                                    false};
        run_mm(c, &mm);
        const struct rt_weight *dn[1] = {&ly->wdown};
        plan_acts(c, dn, 1, &plan);
        ts = (struct tok_stage){.op = OP_SWIGLU_QUANT, .n_tok = n_tok, .plan = &plan};
        run_tok(c, &ts);
        mm = (struct mm_stage){.n_tok = n_tok, .n_job = 1};
        if (ly->ffn_post_norm) {
            mm.job[0] = (struct mm_job){&ly->wdown, c->act[0], c->xb, c->xb_ld, ly->bdown, false};
            run_mm(c, &mm);
            ts = (struct tok_stage){.op = OP_POST_ADD, .n_tok = n_tok,
                                    .norm_w = ly->ffn_post_norm};
            run_tok(c, &ts);
        } else {
            mm.job[0] = (struct mm_job){&ly->wdown, c->act[0], c->x, E, ly->bdown, true};
            run_mm(c, &mm);
        }
    }

    /* logits: only for the rows asked for */
    uint32_t from = lout ? lfrom : n_tok - 1;
    if (!lout && !want_last) return;
    const uint32_t n_out = n_tok - from;
    const struct rt_weight *ow[1] = {&m->output};
    plan_acts(c, ow, 1, &plan);
    struct tok_stage ts = {.op = OP_NORM_QUANT, .n_tok = n_out, .norm_w = m->output_norm,
                           .plan = &plan, .row_from = from};
    run_tok(c, &ts);
    struct mm_stage mm = {.n_tok = n_out, .n_job = 1};
    mm.job[0] = (struct mm_job){&m->output, c->act[0], lout ? lout : c->logits_last,
                                hp->n_vocab, NULL, false};
    run_mm(c, &mm);
    if (hp->final_softcap > 0.0f) {
        ts = (struct tok_stage){.op = OP_SOFTCAP, .n_tok = n_out, .n = hp->n_vocab,
                                .dst = lout ? lout : c->logits_last};
        run_tok(c, &ts);
    }
    if (lout && want_last)
        memcpy(c->logits_last, lout + (uint64_t)(n_out - 1) * hp->n_vocab,
               (uint64_t)hp->n_vocab * sizeof(float));
}

enum mw_status rt_eval(struct rt_ctx *c, const int32_t *tokens, uint32_t n, uint32_t logits_from,
                       float *logits, struct mw_err *err)
{
    const struct rt_hparams *hp = &c->m->hp;
    if (n == 0) return MW_FAIL(err, MW_E_USAGE, MW_ERR_OFF_NONE, "no tokens to evaluate");
    if ((uint64_t)c->n_past + n > c->n_ctx)
        return MW_FAIL(err, MW_E_USAGE, MW_ERR_OFF_NONE,
                       "context full: %u positions used + %u new > --ctx %u", c->n_past, n,
                       c->n_ctx);
    if (logits && logits_from >= n)
        return MW_FAIL(err, MW_E_USAGE, MW_ERR_OFF_NONE, "logits_from %u >= %u tokens",
                       logits_from, n);
    for (uint32_t i = 0; i < n; i++)
        if (tokens[i] < 0 || (uint32_t)tokens[i] >= hp->n_vocab)
            return MW_FAIL(err, MW_E_VALUE, MW_ERR_OFF_NONE,
                           "token %d at index %u is outside the vocabulary (%u)", tokens[i], i,
                           hp->n_vocab);
    if (c->kv_lost > 0) {
        const uint32_t ws = c->n_past >= hp->n_swa ? c->n_past - hp->n_swa + 1 : 0;
        if (ws < c->kv_lost)
            return MW_FAIL(err, MW_E_USAGE, MW_ERR_OFF_NONE,
                           "the sliding-window cache no longer holds positions %u..%u that "
                           "position %u needs (rewound too far; reset the context)",
                           ws, c->kv_lost - 1, c->n_past);
        c->kv_lost = 0;
    }
    for (uint32_t i0 = 0; i0 < n; i0 += c->n_batch) {
        const uint32_t nb = n - i0 < c->n_batch ? n - i0 : c->n_batch;
        const bool last = i0 + nb == n;
        float *lout = NULL;
        uint32_t lfrom = 0;
        if (logits && i0 + nb > logits_from) {
            lfrom = logits_from > i0 ? logits_from - i0 : 0;
            lout = logits + (uint64_t)(i0 + lfrom - logits_from) * hp->n_vocab;
        }
        step(c, tokens + i0, nb, lfrom, lout, last, n >= RT_FA_TILE);
        c->n_past += nb;
    }
    return MW_OK;
}

const float *rt_ctx_logits(const struct rt_ctx *c) { return c->logits_last; }

// --- context ---

/* Bounds of what rt_model_open allocates besides the f32 vectors
 * (rt_model_owned_bytes), for rt_mem_estimate. */
#define RT_LAYER_BOUND 1024
#define RT_MODEL_BOUND 2048
_Static_assert(sizeof(struct rt_layer) <= RT_LAYER_BOUND, "raise RT_LAYER_BOUND");
_Static_assert(sizeof(struct rt_model) <= RT_MODEL_BOUND, "raise RT_MODEL_BOUND");

/* rt_ctx_opts with every default filled in. */
static struct rt_ctx_opts ctx_opts(const struct rt_hparams *hp, const struct rt_ctx_opts *o)
{
    struct rt_ctx_opts opt = {0};
    if (o) opt = *o;
    if (opt.n_ctx == 0)
        opt.n_ctx = hp->n_ctx_train < RT_DEFAULT_CTX_CAP ? hp->n_ctx_train : RT_DEFAULT_CTX_CAP;
    if (opt.n_threads == 0) opt.n_threads = 1;
    if (opt.n_batch == 0) opt.n_batch = RT_DEFAULT_BATCH;
    if (opt.n_batch > opt.n_ctx) opt.n_batch = opt.n_ctx;
    return opt;
}

static uint64_t max_u64(uint64_t a, uint64_t b) { return a > b ? a : b; }

/* Width of the dense FFN buffers (hb, hb2): n_ff, or for a MoE model its
 * shared expert's (0 when it has none). */
static uint64_t dense_ff(const struct rt_hparams *hp)
{
    return hp->n_expert ? hp->n_ff_shexp : hp->n_ff;
}
static uint64_t round16(uint64_t x) { return (x + 15) & ~(uint64_t)15; }

/* The sizes the scratch list below depends on. */
struct ctx_dims {
    uint64_t B, E, F, qdim, kvdim, hd, n_rep, n_rot, n_vocab, n_rope;
    uint64_t NE, K, FE, n_layer; /* MoE: experts, used per token, expert width (NE 0: dense) */
    uint64_t act_stride; /* one quantized activation row, rounded to 16 bytes */
    uint64_t qact;       /* one query head in the K cache's format, rounded to 16 */
    unsigned n_threads;
};

static struct ctx_dims ctx_dims_of(const struct rt_hparams *hp, const struct rt_ctx_opts *opt,
                                   uint64_t act_row, uint64_t qact_row)
{
    return (struct ctx_dims){
        .B = opt->n_batch, .E = hp->n_embd, .F = dense_ff(hp),
        .NE = hp->n_expert, .K = hp->n_expert_used, .FE = hp->n_ff_exp, .n_layer = hp->n_layer,
        .qdim = (uint64_t)hp->n_head * hp->head_dim,
        .kvdim = (uint64_t)hp->n_head_kv * hp->head_dim, .hd = hp->head_dim,
        .n_rep = hp->n_head / hp->n_head_kv, .n_rot = hp->n_rot, .n_vocab = hp->n_vocab,
        .n_rope = hp->n_swa > 0 ? 2 : 1,
        .act_stride = round16(act_row), .qact = round16(qact_row),
        .n_threads = opt->n_threads};
}

/* n * size bytes, counted in c->scratch_bytes; allocated (zeroed) only when
 * alloc. A failure or an overflow clears *ok and makes later calls no-ops. */
static void *xcalloc(struct rt_ctx *c, uint64_t n, uint64_t size, bool alloc, bool *ok)
{
    uint64_t bytes;
    size_t sz;
    if (!*ok || !mw_mul_u64(n, size, &bytes) ||
        !mw_add_u64(c->scratch_bytes, bytes, &c->scratch_bytes)) {
        *ok = false;
        return NULL;
    }
    if (!alloc) return NULL;
    if (!mw_u64_to_size(bytes, &sz)) {
        *ok = false;
        return NULL;
    }
    void *p = calloc(1, sz ? sz : 1);
    if (!p) *ok = false;
    return p;
}

/* One thread's attention rows. */
static void thread_scratch(struct rt_ctx *c, const struct ctx_dims *d, struct rt_thread_scratch *ts,
                           bool alloc, bool *ok)
{
    ts->kq = xcalloc(c, RT_FA_QT * d->n_rep * RT_FA_TILE, sizeof(float), alloc, ok);
    ts->vt = xcalloc(c, (uint64_t)RT_FA_TILE * d->hd, sizeof(float), alloc, ok);
    ts->kt = xcalloc(c, (uint64_t)RT_FA_TILE * d->hd, sizeof(float), alloc, ok);
    ts->acc = xcalloc(c, RT_FA_QT * d->n_rep * d->hd, sizeof(float), alloc, ok);
    ts->acc16 = xcalloc(c, d->n_rep * d->hd, sizeof(uint16_t), alloc, ok);
    ts->ms = xcalloc(c, 2 * RT_FA_QT * d->n_rep, sizeof(float), alloc, ok);
    ts->qact = xcalloc(c, d->n_rep, d->qact, alloc, ok);
    ts->qact_stride = d->qact;
    ts->tile = xcalloc(c, (uint64_t)RT_TILE * d->B, sizeof(float), alloc, ok);
    ts->gemm_raw = xcalloc(c, RT_GEMM_SCRATCH + 64, 1, alloc, ok);
    if (ts->gemm_raw) ts->gemm = ts->gemm_raw + (64 - (uintptr_t)ts->gemm_raw % 64);
    if (d->NE) {
        ts->idx = xcalloc(c, d->NE, sizeof(int32_t), alloc, ok);
        /* an expert's pairs in one step: at most one per token */
        ts->moe_gather = xcalloc(c, d->B, d->act_stride, alloc, ok);
    }
}

/* Every scratch buffer of a context, the one list: rt_ctx_init allocates
 * it (alloc), rt_mem_estimate only counts it (c->scratch_bytes, which must
 * start at 0). */
static void ctx_scratch(struct rt_ctx *c, const struct ctx_dims *d, bool alloc, bool *ok)
{
    const uint64_t B = d->B;
    c->x = xcalloc(c, B * d->E, sizeof(float), alloc, ok);
    c->xb_ld = max_u64(d->E, d->qdim);
    c->xb = xcalloc(c, B * c->xb_ld, sizeof(float), alloc, ok);
    c->q = xcalloc(c, B * d->qdim, sizeof(float), alloc, ok);
    c->k = xcalloc(c, B * d->kvdim, sizeof(float), alloc, ok);
    c->v = xcalloc(c, B * d->kvdim, sizeof(float), alloc, ok);
    c->hb = xcalloc(c, B * d->F, sizeof(float), alloc, ok);
    c->hb2 = xcalloc(c, B * d->F, sizeof(float), alloc, ok);
    c->rope = xcalloc(c, d->n_rope * B * d->n_rot, sizeof(float), alloc, ok);
    c->n_rope = (uint32_t)d->n_rope;
    c->logits_last = xcalloc(c, d->n_vocab, sizeof(float), alloc, ok);
    c->shift_row = xcalloc(c, d->kvdim, sizeof(float), alloc, ok);
    c->shift_rope = xcalloc(c, d->n_rot, sizeof(float), alloc, ok);
    c->act_stride = d->act_stride;
    for (int i = 0; i < RT_ACT_SLOTS; i++) c->act[i] = xcalloc(c, B, c->act_stride, alloc, ok);
    if (d->NE) { /* MoE: B*K pairs */
        const uint64_t P = B * d->K;
        c->moe_probs = xcalloc(c, B * d->NE, sizeof(float), alloc, ok);
        c->moe_sel = xcalloc(c, P, sizeof(int32_t), alloc, ok);
        c->moe_w = xcalloc(c, P, sizeof(float), alloc, ok);
        c->moe_sgate = xcalloc(c, B, sizeof(float), alloc, ok);
        c->moe_order = xcalloc(c, P, sizeof(uint32_t), alloc, ok);
        c->moe_first = xcalloc(c, d->NE + 1, sizeof(uint32_t), alloc, ok);
        c->moe_active = xcalloc(c, d->NE, sizeof(uint32_t), alloc, ok);
        c->moe_hg = xcalloc(c, P * d->FE, sizeof(float), alloc, ok);
        c->moe_hu = xcalloc(c, P * d->FE, sizeof(float), alloc, ok);
        c->moe_act = xcalloc(c, P, c->act_stride, alloc, ok);
        c->moe_out = xcalloc(c, P * d->E, sizeof(float), alloc, ok);
        c->moe_hits = xcalloc(c, d->n_layer * d->NE, sizeof(uint64_t), alloc, ok);
    }
    c->ts = xcalloc(c, d->n_threads, sizeof *c->ts, alloc, ok);
    if (alloc) {
        for (unsigned t = 0; *ok && t < d->n_threads; t++) thread_scratch(c, d, &c->ts[t], true, ok);
        return;
    }
    /* counting: every thread has the same rows */
    const uint64_t before = c->scratch_bytes;
    struct rt_thread_scratch one;
    c->scratch_bytes = 0;
    thread_scratch(c, d, &one, false, ok);
    uint64_t all;
    if (!*ok || !mw_mul_u64(c->scratch_bytes, d->n_threads, &all) ||
        !mw_add_u64(before, all, &c->scratch_bytes))
        *ok = false;
}

enum mw_status rt_mem_estimate(const struct rt_hparams *hp, uint64_t n_bias_floats,
                               const struct rt_ctx_opts *o, uint32_t weight_type,
                               struct rt_mem *out, struct mw_err *err)
{
    memset(out, 0, sizeof *out);
    if (hp->n_head_kv == 0 || hp->n_head % hp->n_head_kv != 0 || hp->head_dim == 0)
        return MW_FAIL(err, MW_E_USAGE, MW_ERR_OFF_NONE,
                       "%u heads are not a multiple of %u kv heads", hp->n_head, hp->n_head_kv);
    const struct rt_ctx_opts opt = ctx_opts(hp, o);
    if (opt.kv_type == RT_KV_Q8_0 && hp->head_dim % 32 != 0)
        return MW_FAIL(err, MW_E_USAGE, MW_ERR_OFF_NONE,
                       "a q8_0 KV cache needs a head size that is a multiple of 32 "
                       "(this model: %u)",
                       hp->head_dim);
    /* the activation formats are the same in every kernel table */
    const struct rt_kernels *ks = rt_kernels_select(NULL);
    const struct rt_kernel *wk = rt_kernel_get(ks, weight_type);
    const struct rt_act_format *af = wk ? rt_kernel_act(ks, wk) : &ks->act[GGUF_TYPE_Q8_K];
    const struct rt_kernel *kk =
        rt_kernel_get(ks, opt.kv_type == RT_KV_Q8_0 ? GGUF_TYPE_Q8_0 : GGUF_TYPE_F16);
    /* the widest input any weight has (rt_ctx_init: the largest row its
     * weights need), in whole activation blocks */
    uint64_t big = max_u64(max_u64(hp->n_embd, dense_ff(hp)), (uint64_t)hp->n_head * hp->head_dim);
    if (hp->n_expert) big = max_u64(big, hp->n_ff_exp);
    uint64_t act_row = (big + af->blck - 1) / af->blck * af->type_size;
    /* MoE: the router stays f32 (llama.cpp never quantizes ffn_gate_inp) */
    if (hp->n_expert) act_row = max_u64(act_row, (uint64_t)hp->n_embd * sizeof(float));
    const uint64_t qact_row = kk ? rt_row_bytes(rt_kernel_act(ks, kk)->type, hp->head_dim) : 0;
    const struct ctx_dims d = ctx_dims_of(hp, &opt, act_row, qact_row);
    struct rt_ctx c = {0};
    bool ok = true;
    ctx_scratch(&c, &d, false, &ok);
    bool kv_ok;
    out->kv_bytes =
        rt__kv_bytes(opt.kv_type, hp, opt.n_ctx, opt.n_batch, (uint32_t)d.kvdim, &kv_ok);
    out->scratch_bytes = c.scratch_bytes;
    /* norms (2 per layer + output_norm) and biases as f32, views, the struct */
    uint64_t fl, ow, views;
    /* family vectors: post norms (2 per layer), q/k norms (2 per layer, head_dim),
     * LongRoPE factors (2 x n_rot/2) */
    const uint64_t n_norm = (hp->post_norms ? 4 : 2) * (uint64_t)hp->n_layer + 1;
    const uint64_t extra = (hp->qk_norm ? 2 * (uint64_t)hp->n_layer * hp->head_dim : 0) +
                           (hp->has_rope_long ? hp->n_rot : 0);
    ok = ok && kv_ok && qact_row != 0 && d.kvdim <= UINT32_MAX &&
         mw_mul_u64(n_norm, hp->n_embd, &fl) && mw_add_u64(fl, extra, &fl) &&
         mw_add_u64(fl, n_bias_floats, &fl) && mw_mul_u64(fl, sizeof(float), &ow) &&
         mw_mul_u64(hp->n_layer, RT_LAYER_BOUND, &views) && mw_add_u64(ow, views, &ow) &&
         mw_add_u64(ow, RT_MODEL_BOUND, &ow);
    if (!ok) {
        memset(out, 0, sizeof *out);
        return MW_FAIL(err, MW_E_VALUE, MW_ERR_OFF_NONE, "memory estimate overflows");
    }
    out->owned_bytes = ow;
    out->n_ctx = opt.n_ctx;
    out->n_threads = opt.n_threads;
    out->kv_type = opt.kv_type;
    return MW_OK;
}

enum mw_status rt_ctx_init(const struct rt_model *m, const struct rt_ctx_opts *o,
                           struct rt_ctx **out, struct mw_err *err)
{
    *out = NULL;
    const struct rt_hparams *hp = &m->hp;
    const struct rt_ctx_opts opt = ctx_opts(hp, o);
    if (opt.n_ctx > RT_MAX_CTX)
        return MW_FAIL(err, MW_E_USAGE, MW_ERR_OFF_NONE, "--ctx %u exceeds the limit %u",
                       opt.n_ctx, RT_MAX_CTX);
    if (opt.n_threads > RT_MAX_THREADS)
        return MW_FAIL(err, MW_E_USAGE, MW_ERR_OFF_NONE, "--threads %u exceeds the limit %u",
                       opt.n_threads, RT_MAX_THREADS);
    if (opt.kv_type == RT_KV_Q8_0 && hp->head_dim % 32 != 0)
        return MW_FAIL(err, MW_E_USAGE, MW_ERR_OFF_NONE,
                       "--kv-type q8_0 needs a head size that is a multiple of 32 (this model: %u)",
                       hp->head_dim);

    struct rt_ctx *c = calloc(1, sizeof *c);
    if (!c) return MW_FAIL(err, MW_E_NOMEM, MW_ERR_OFF_NONE, "context");
    c->m = m;
    struct rt_cpu cpu = rt_cpu_detect();
    c->ks = rt_kernels_select(&cpu);
    c->n_ctx = opt.n_ctx;
    c->n_batch = opt.n_batch;
    c->n_threads = opt.n_threads;
    enum mw_status s;
    const uint64_t kvdim = (uint64_t)hp->n_head_kv * hp->head_dim;
    if ((s = rt__kv_init(&c->kv, opt.kv_type, hp, c->n_ctx, c->n_batch, (uint32_t)kvdim, err)))
        goto fail;
    c->kv.f16c = cpu.avx2;
    const uint32_t kt = opt.kv_type == RT_KV_Q8_0 ? GGUF_TYPE_Q8_0 : GGUF_TYPE_F16;
    c->kdot = rt_kernel_get(c->ks, kt);
    c->kact = c->kdot ? rt_kernel_act(c->ks, c->kdot) : NULL;
    if (!c->kdot || !c->kact || !c->kact->quantize || hp->head_dim % c->kact->blck != 0) {
        s = MW_FAIL(err, MW_E_UNSUPPORTED, MW_ERR_OFF_NONE, "no %s kernel for the KV cache",
                    rt_kv_type_name(opt.kv_type));
        goto fail;
    }
    /* activation rows: the largest any weight needs (rounded to 16 bytes
     * so every row stays aligned for its block struct) */
    uint64_t act = 0;
    for (uint32_t il = 0; il < hp->n_layer; il++) {
        const struct rt_layer *ly = &m->layers[il];
        const struct rt_weight *all[13] = {
            &ly->wq,       &ly->wk,        &ly->wv,      &ly->wo,        &ly->wgate,
            &ly->wup,      &ly->wdown,     &m->output,   &ly->gate_inp,  &ly->gate_exps,
            &ly->up_exps,  &ly->down_exps, &ly->gate_inp_shexp};
        for (int j = 0; j < 13; j++) {
            if (!all[j]->data) continue; /* absent (MoE without a shared expert) */
            const struct rt_act_format *af = rt_kernel_act(c->ks, all[j]->k);
            act = max_u64(act, rt_row_bytes(af->type, all[j]->n_in));
        }
    }
    const struct ctx_dims d =
        ctx_dims_of(hp, &opt, act, rt_row_bytes(c->kact->type, hp->head_dim));
    bool ok = true;
    ctx_scratch(c, &d, true, &ok);
    if (!ok) {
        s = MW_FAIL(err, MW_E_NOMEM, MW_ERR_OFF_NONE,
                    "scratch for --ctx %u, batch %u, %u threads", c->n_ctx, c->n_batch,
                    c->n_threads);
        goto fail;
    }
    /* RoPE tables: [0] for the other layers, [1] for sliding layers */
    for (uint32_t t = 0; t < c->n_rope; t++) {
        uint32_t il = 0;
        while (il + 1 < hp->n_layer && rt_layer_is_swa(hp, il) != (t == 1)) il++;
        c->rope_p[t] = rt_rope_layer_params(hp, il, c->n_ctx);
    }
    c->rope_ff = m->rope_freqs;
    if (hp->has_rope_long) c->rope_ff = c->rope_p[0].long_factors ? m->rope_long : m->rope_short;
    rt_attn_scales(hp, &c->q_mul, &c->kq_scale);
    if ((s = mw_pool_init(c->n_threads, &c->pool, err))) goto fail;
    mw_pool_spin(c->pool, RT_POOL_SPIN);
    *out = c;
    return MW_OK;
fail:
    rt_ctx_free(c);
    return s;
}

void rt_ctx_free(struct rt_ctx *c)
{
    if (!c) return;
    mw_pool_free(c->pool);
    rt__kv_free(&c->kv);
    free(c->x);
    free(c->xb);
    free(c->q);
    free(c->k);
    free(c->v);
    free(c->hb);
    free(c->hb2);
    free(c->rope);
    free(c->logits_last);
    free(c->shift_row);
    free(c->shift_rope);
    for (int i = 0; i < RT_ACT_SLOTS; i++) free(c->act[i]);
    free(c->moe_probs);
    free(c->moe_sel);
    free(c->moe_w);
    free(c->moe_sgate);
    free(c->moe_order);
    free(c->moe_first);
    free(c->moe_active);
    free(c->moe_hg);
    free(c->moe_hu);
    free(c->moe_act);
    free(c->moe_out);
    free(c->moe_hits);
    if (c->ts) {
        for (unsigned t = 0; t < c->n_threads; t++) {
            free(c->ts[t].kq);
            free(c->ts[t].vt);
            free(c->ts[t].kt);
            free(c->ts[t].acc);
            free(c->ts[t].acc16);
            free(c->ts[t].ms);
            free(c->ts[t].qact);
            free(c->ts[t].tile);
            free(c->ts[t].gemm_raw);
            free(c->ts[t].idx);
            free(c->ts[t].moe_gather);
        }
        free(c->ts);
    }
    free(c);
}

void rt_ctx_mem(const struct rt_ctx *c, struct rt_mem *out)
{
    memset(out, 0, sizeof *out);
    out->mapped_bytes = rt_model_mapped_bytes(c->m);
    out->weight_bytes = rt_model_weight_bytes(c->m);
    out->owned_bytes = rt_model_owned_bytes(c->m);
    bool ok;
    out->kv_bytes = rt__kv_bytes(c->kv.type, &c->m->hp, c->n_ctx, c->n_batch, c->kv.kv_dim, &ok);
    out->scratch_bytes = c->scratch_bytes;
    out->n_ctx = c->n_ctx;
    out->n_threads = c->n_threads;
    out->kv_type = c->kv.type;
}

uint32_t rt_ctx_n_ctx(const struct rt_ctx *c) { return c->n_ctx; }
uint32_t rt_ctx_n_past(const struct rt_ctx *c) { return c->n_past; }
const struct rt_model *rt_ctx_model(const struct rt_ctx *c) { return c->m; }
const char *rt_ctx_kernels_name(const struct rt_ctx *c) { return c->ks->name; }

const uint64_t *rt_ctx_expert_hits(const struct rt_ctx *c, uint32_t il)
{
    const struct rt_hparams *hp = &c->m->hp;
    if (hp->n_expert == 0 || il >= hp->n_layer) return NULL;
    return c->moe_hits + (uint64_t)il * hp->n_expert;
}
