/*
 * runtime/rt_forward.c — the forward pass of llama / mistral / qwen2 and
 * the families qwen3, gemma2, gemma3, phi3 (rt.h): the graph of one step
 * and its per-token and mat-vec stages.
 *
 * One step runs up to n_batch tokens through the graph. Every stage is a
 * fork-join over the thread pool that splits independent outputs: tokens
 * (norms, RoPE, activation quantization), matrix rows (mat-vec), or (token,
 * kv head) pairs (attention). A matrix is read in tiles of RT_TILE rows and
 * each tile is applied to all tokens of the step while it is in cache.
 *
 * The feed-forward of a mixture-of-experts layer is rt_moe.c's, attention
 * rt_attn.c's and rt_attn_tiled.c's, the context and its scratch rt_ctx.c's.
 *
 * Numerics follow ggml's CPU ops for these graphs: RMSNorm, RoPE, SwiGLU,
 * GELU, soft-capping and the sliding window are rt_ops.h's (shared with
 * calib/); mat-vecs quantize the activation to the weight type's partner
 * format (rt_kernels.h); attention follows llama.cpp's CPU flash attention.
 */
#include "runtime/rt_int.h"
#include "runtime/rt_ops.h"

#include <math.h>
#include <string.h>

#include "quant/quant.h"

// --- activation slots ---

void rt__plan_acts(const struct rt_ctx *c, const struct rt_weight *const *ws, int n,
                   struct rt_act_plan *p)
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

static void quantize_row(const struct rt_ctx *c, const struct rt_act_plan *p, const float *x,
                         uint32_t n, uint32_t b)
{
    for (int s = 0; s < p->n_slots; s++)
        p->fmt[s]->quantize(x, c->act[s] + (uint64_t)b * c->act_stride, n);
}

// --- stages ---

static void tok_task(void *arg, unsigned ith, unsigned nth)
{
    const struct rt_tok_stage *st = arg;
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
        case RT_OP_NORM_QUANT: {
            float *xb = c->xb + (uint64_t)b * c->xb_ld;
            const float *x = c->x + (uint64_t)(st->row_from + b) * E;
            rt_rmsnorm(xb, x, st->norm_w, E, hp->rms_eps);
            quantize_row(c, st->plan, xb, (uint32_t)E, b);
            break;
        }
        case RT_OP_QUANT:
            quantize_row(c, st->plan, st->src + (uint64_t)b * st->ld_src, st->n, b);
            break;
        case RT_OP_ROPE_STORE: {
            const uint32_t tab = c->n_rope > 1 && rt_layer_is_swa(hp, st->il) ? 1 : 0;
            const float *rc = c->rope + ((uint64_t)tab * c->n_batch + b) * hp->n_rot;
            const struct rt_layer *ly = &m->layers[st->il];
            float *q = c->q + (uint64_t)b * qdim;
            float *k = c->k + (uint64_t)b * kvdim;
            if (hp->attn_out_gate) { /* per head: q, then its output gate */
                const float *qg = c->qg + (uint64_t)b * 2 * qdim;
                float *gt = c->qgate + (uint64_t)b * qdim;
                for (uint32_t h = 0; h < hp->n_head; h++) {
                    memcpy(q + (uint64_t)h * hp->head_dim, qg + 2 * (uint64_t)h * hp->head_dim,
                           hp->head_dim * sizeof(float));
                    memcpy(gt + (uint64_t)h * hp->head_dim,
                           qg + (2 * (uint64_t)h + 1) * hp->head_dim, hp->head_dim * sizeof(float));
                }
            }
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
        case RT_OP_SWIGLU_QUANT: {
            const uint32_t F = st->n ? st->n : hp->n_ff; /* n: qwen2moe's shared expert */
            float *g = c->hb + (uint64_t)b * F;
            const float *u = c->hb2 + (uint64_t)b * F;
            rt_ffn_act(hp, g, u, F);
            quantize_row(c, st->plan, g, F, b);
            break;
        }
        case RT_OP_POST_ADD: {
            float *x = c->x + (uint64_t)b * E;
            float *t = c->xb + (uint64_t)b * c->xb_ld;
            rt_rmsnorm(t, t, st->norm_w, E, hp->rms_eps);
            for (uint64_t i = 0; i < E; i++) x[i] = t[i] + x[i];
            break;
        }
        case RT_OP_SOFTCAP:
            rt_softcap(st->dst + (uint64_t)b * st->n, st->n, hp->final_softcap);
            break;
        case RT_OP_GATE_QUANT: { /* ggml_mul(attn, ggml_sigmoid(gate)) */
            float *xb = c->xb + (uint64_t)b * c->xb_ld;
            const float *gt = c->qgate + (uint64_t)b * qdim;
            for (uint64_t i = 0; i < qdim; i++) xb[i] = xb[i] * (1.0f / (1.0f + expf(-gt[i])));
            quantize_row(c, st->plan, xb, (uint32_t)qdim, b);
            break;
        }
        }
    }
}

void rt__run_tok(struct rt_ctx *c, struct rt_tok_stage *st)
{
    st->c = c;
    mw_pool_run(c->pool, tok_task, st);
}

static void mm_task(void *arg, unsigned ith, unsigned nth)
{
    const struct rt_mm_stage *st = arg;
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
        const struct rt_mm_job *J = &st->job[j];
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

void rt__run_mm(struct rt_ctx *c, struct rt_mm_stage *st)
{
    st->c = c;
    mw_pool_run(c->pool, mm_task, st);
}

// --- one step ---

uint32_t rt__keep_out_rows(struct rt_ctx *c, uint32_t n_tok, uint32_t keep, float *rows,
                           uint64_t row_len)
{
    if (keep == 0 || keep >= n_tok) return n_tok - (keep < n_tok ? keep : n_tok);
    const uint64_t E = c->m->hp.n_embd, n = n_tok - keep;
    memmove(c->x, c->x + (uint64_t)keep * E, n * E * sizeof(float));
    if (rows) memmove(rows, rows + (uint64_t)keep * row_len, n * row_len * sizeof(float));
    return (uint32_t)n;
}

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
        for (uint32_t t = 0; t < c->n_rope; t++) {
            float *rc = c->rope + ((uint64_t)t * c->n_batch + b) * hp->n_rot;
            if (hp->rope_yarn) /* gpt-oss */
                rt_rope_cache_yarn(hp, hp->n_rot, &c->rope_p[t], c->rope_ff, (int32_t)(pos0 + b), rc);
            else
                rt_rope_cache_ex(hp->n_rot, &c->rope_p[t], c->rope_ff, (int32_t)(pos0 + b), rc);
            rt_rope_text_sections(hp, rc);
        }
    }

    /* rows whose logits are asked for: keep.. (the others end after the
     * last layer's attention) */
    const uint32_t keep = lout ? lfrom : want_last ? n_tok - 1 : n_tok;
    uint32_t nt = n_tok;
    struct rt_act_plan plan;
    for (uint32_t il = 0; il < hp->n_layer; il++) {
        const struct rt_layer *ly = &m->layers[il];
        struct rt_tok_stage ts;
        struct rt_mm_stage mm;
        if (rt_layer_is_recurrent(hp, il)) {
            rt__ssm_layer(c, il, n_tok);
            goto ffn;
        }
        /* attention */
        const struct rt_weight *qkv[3] = {&ly->wq, &ly->wk, &ly->wv};
        rt__plan_acts(c, qkv, 3, &plan);
        ts = (struct rt_tok_stage){.op = RT_OP_NORM_QUANT, .n_tok = n_tok, .norm_w = ly->attn_norm,
                                   .plan = &plan};
        rt__run_tok(c, &ts);
        mm = (struct rt_mm_stage){.n_tok = n_tok, .n_job = 3};
        if (hp->attn_out_gate)
            mm.job[0] =
                (struct rt_mm_job){&ly->wq, c->act[plan.slot_of[0]], c->qg, 2 * qdim, NULL, false};
        else
            mm.job[0] =
                (struct rt_mm_job){&ly->wq, c->act[plan.slot_of[0]], c->q, qdim, ly->bq, false};
        mm.job[1] =
            (struct rt_mm_job){&ly->wk, c->act[plan.slot_of[1]], c->k, kvdim, ly->bk, false};
        mm.job[2] =
            (struct rt_mm_job){&ly->wv, c->act[plan.slot_of[2]], c->v, kvdim, ly->bv, false};
        rt__run_mm(c, &mm);
        ts = (struct rt_tok_stage){.op = RT_OP_ROPE_STORE, .n_tok = n_tok, .pos0 = pos0, .il = il};
        rt__run_tok(c, &ts);
        rt__attn(c, n_tok, pos0, il, tiled);
        const struct rt_weight *wo[1] = {&ly->wo};
        rt__plan_acts(c, wo, 1, &plan);
        ts = (struct rt_tok_stage){.op = hp->attn_out_gate ? RT_OP_GATE_QUANT : RT_OP_QUANT,
                                   .n_tok = n_tok, .src = c->xb, .ld_src = c->xb_ld,
                                   .n = (uint32_t)qdim, .plan = &plan};
        rt__run_tok(c, &ts);
        mm = (struct rt_mm_stage){.n_tok = n_tok, .n_job = 1};
        if (ly->attn_post_norm) {
            mm.job[0] = (struct rt_mm_job){&ly->wo, c->act[0], c->xb, c->xb_ld, ly->bo, false};
            rt__run_mm(c, &mm);
            ts = (struct rt_tok_stage){.op = RT_OP_POST_ADD, .n_tok = n_tok,
                                       .norm_w = ly->attn_post_norm};
            rt__run_tok(c, &ts);
        } else {
            mm.job[0] = (struct rt_mm_job){&ly->wo, c->act[0], c->x, E, ly->bo, true};
            rt__run_mm(c, &mm);
        }

        /* feed-forward */
    ffn:
        if (il == hp->n_layer - 1) {
            nt = rt__keep_out_rows(c, nt, keep, NULL, 0);
            if (nt == 0) return;
        }
        if (hp->n_expert > 0) {
            rt__moe_ffn(c, il, nt);
            continue;
        }
        const struct rt_weight *gu[2] = {&ly->wgate, &ly->wup};
        rt__plan_acts(c, gu, 2, &plan);
        ts = (struct rt_tok_stage){.op = RT_OP_NORM_QUANT, .n_tok = nt, .norm_w = ly->ffn_norm,
                                   .plan = &plan};
        rt__run_tok(c, &ts);
        mm = (struct rt_mm_stage){.n_tok = nt, .n_job = 2};
        mm.job[0] = (struct rt_mm_job){&ly->wgate, c->act[plan.slot_of[0]], c->hb, hp->n_ff,
                                       ly->bgate, false};
        mm.job[1] = (struct rt_mm_job){&ly->wup, c->act[plan.slot_of[1]], c->hb2, hp->n_ff, ly->bup,
                                       false};
        rt__run_mm(c, &mm);
        const struct rt_weight *dn[1] = {&ly->wdown};
        rt__plan_acts(c, dn, 1, &plan);
        ts = (struct rt_tok_stage){.op = RT_OP_SWIGLU_QUANT, .n_tok = nt, .plan = &plan};
        rt__run_tok(c, &ts);
        mm = (struct rt_mm_stage){.n_tok = nt, .n_job = 1};
        if (ly->ffn_post_norm) {
            mm.job[0] =
                (struct rt_mm_job){&ly->wdown, c->act[0], c->xb, c->xb_ld, ly->bdown, false};
            rt__run_mm(c, &mm);
            ts = (struct rt_tok_stage){.op = RT_OP_POST_ADD, .n_tok = nt,
                                       .norm_w = ly->ffn_post_norm};
            rt__run_tok(c, &ts);
        } else {
            mm.job[0] = (struct rt_mm_job){&ly->wdown, c->act[0], c->x, E, ly->bdown, true};
            rt__run_mm(c, &mm);
        }
    }

    /* logits: only for the rows asked for */
    const uint32_t from = (lout ? lfrom : n_tok - 1) - keep;
    const uint32_t n_out = nt - from;
    const struct rt_weight *ow[1] = {&m->output};
    rt__plan_acts(c, ow, 1, &plan);
    struct rt_tok_stage ts = {.op = RT_OP_NORM_QUANT, .n_tok = n_out, .norm_w = m->output_norm,
                              .plan = &plan, .row_from = from};
    rt__run_tok(c, &ts);
    struct rt_mm_stage mm = {.n_tok = n_out, .n_job = 1};
    mm.job[0] = (struct rt_mm_job){&m->output, c->act[0], lout ? lout : c->logits_last,
                                   hp->n_vocab, NULL, false};
    rt__run_mm(c, &mm);
    if (hp->final_softcap > 0.0f) {
        ts = (struct rt_tok_stage){.op = RT_OP_SOFTCAP, .n_tok = n_out, .n = hp->n_vocab,
                                   .dst = lout ? lout : c->logits_last};
        rt__run_tok(c, &ts);
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
    if (c->state_lost)
        return MW_FAIL(err, MW_E_USAGE, MW_ERR_OFF_NONE,
                       "the recurrent state cannot be rewound to position %u (only to 0: reset "
                       "the context)", c->n_past);
    if (c->n_past == 0) rt__ssm_reset(c); /* a fresh sequence */
    for (uint32_t i0 = 0; i0 < n; i0 += c->n_batch) {
        const uint32_t nb = n - i0 < c->n_batch ? n - i0 : c->n_batch;
        const bool last = i0 + nb == n;
        float *lout = NULL;
        uint32_t lfrom = 0;
        if (logits && i0 + nb > logits_from) {
            lfrom = logits_from > i0 ? logits_from - i0 : 0;
            lout = logits + (uint64_t)(i0 + lfrom - logits_from) * hp->n_vocab;
        }
        if (hp->arch == RT_ARCH_GEMMA4)
            rt__g4_step(c, tokens + i0, nb, lfrom, lout, last, n >= RT_FA_TILE);
        else
            step(c, tokens + i0, nb, lfrom, lout, last, n >= RT_FA_TILE);
        c->n_past += nb;
    }
    return MW_OK;
}
