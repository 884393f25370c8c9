/*
 * runtime/rt_ctx.c — the context of the forward pass (rt.h): its options'
 * defaults, every scratch buffer in one list (allocated by rt_ctx_init,
 * only counted by rt_mem_estimate), the KV cache, the thread pool, and its
 * accessors.
 */
#include "runtime/rt_int.h"
#include "runtime/rt_ops.h"

#include <stdlib.h>
#include <string.h>

#define RT_DEFAULT_BATCH 64
#define RT_DEFAULT_CTX_CAP 4096
/* pool polling rounds before a thread sleeps (~50-100 us of PAUSE): a
 * decoded token is ~60 short stages */
#define RT_POOL_SPIN 2048

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
    uint64_t CH, DI, Hv;  /* gated delta net: conv channels, d_inner, value heads (CH 0: none) */
    uint64_t PL;          /* gemma4: per-layer input floats per token (0: none) */
    bool gated;           /* gated full attention: q and gate rows */
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
        .kvdim = rt_kv_dim_max(hp), .hd = hp->head_dim,
        .n_rep = hp->n_head / hp->n_head_kv, .n_rot = hp->n_rot, .n_vocab = hp->n_vocab,
        .n_rope = hp->n_swa > 0 ? 2 : 1,
        .CH = hp->full_attn_interval ? rt_ssm_conv_channels(hp) : 0, .DI = hp->ssm_d_inner,
        .Hv = hp->ssm_dt_rank, .gated = hp->attn_out_gate,
        .PL = (uint64_t)hp->n_layer * hp->n_embd_per_layer,
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
    if (d->CH) { /* gated delta net rows */
        c->s_qkv = xcalloc(c, B * d->CH, sizeof(float), alloc, ok);
        c->s_conv = xcalloc(c, B * d->CH, sizeof(float), alloc, ok);
        c->s_z = xcalloc(c, B * d->DI, sizeof(float), alloc, ok);
        c->s_b = xcalloc(c, B * 2 * d->Hv, sizeof(float), alloc, ok);
        c->s_a = xcalloc(c, B * 2 * d->Hv, sizeof(float), alloc, ok);
        c->s_o = xcalloc(c, B * d->DI, sizeof(float), alloc, ok);
    }
    if (d->PL) c->ple = xcalloc(c, B * d->PL, sizeof(float), alloc, ok);
    if (d->gated) {
        c->qg = xcalloc(c, B * 2 * d->qdim, sizeof(float), alloc, ok);
        c->qgate = xcalloc(c, B * d->qdim, sizeof(float), alloc, ok);
    }
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
    if (hp->full_attn_interval) big = max_u64(big, hp->ssm_d_inner); /* ssm_out's input */
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
    uint64_t conv_f = 0, ssm_f = 0, st = 0;
    const bool st_ok = rt__ssm_state_bytes(hp, &conv_f, &ssm_f, &st);
    out->state_bytes = st;
    /* norms (2 per layer + output_norm) and biases as f32, views, the struct */
    uint64_t fl, ow, views;
    /* family vectors: post norms (2 per layer), q/k norms (2 per layer, head_dim),
     * LongRoPE factors (2 x n_rot/2); hybrid models: q/k norms in the full-attention
     * layers, and the conv taps, dt bias, A and output norm of each recurrent layer */
    const uint64_t n_norm = (hp->post_norms ? 4 : 2) * (uint64_t)hp->n_layer + 1;
    uint64_t n_full = hp->n_layer, ssm_vec = 0;
    if (hp->full_attn_interval) {
        n_full = hp->n_layer / hp->full_attn_interval;
        ssm_vec = ((uint64_t)hp->ssm_conv_kernel * rt_ssm_conv_channels(hp) +
                   2 * (uint64_t)hp->ssm_dt_rank + hp->ssm_d_state) *
                  (hp->n_layer - n_full); /* < 2^9 * (2^6 * 2^25 + ...): no overflow */
    }
    const uint64_t extra = (hp->qk_norm ? 2 * n_full * hp->head_dim : 0) +
                           (hp->has_rope_long ? hp->n_rot : 0) + ssm_vec;
    ok = ok && kv_ok && st_ok && mw_add_u64(out->kv_bytes, st, &out->kv_bytes) && qact_row != 0 &&
         d.kvdim <= UINT32_MAX &&
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
    const uint64_t kvdim = rt_kv_dim_max(hp);
    if ((s = rt__kv_init(&c->kv, opt.kv_type, hp, c->n_ctx, c->n_batch, (uint32_t)kvdim, err)))
        goto fail;
    c->kv.f16c = cpu.avx2;
    c->kv.avx512 = cpu.avx512;
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
        const struct rt_weight *all[18] = {
            &ly->wq,       &ly->wk,        &ly->wv,       &ly->wo,        &ly->wgate,
            &ly->wup,      &ly->wdown,     &m->output,    &ly->gate_inp,  &ly->gate_exps,
            &ly->up_exps,  &ly->down_exps, &ly->gate_inp_shexp, &ly->ssm_qkv, &ly->ssm_z,
            &ly->ssm_beta, &ly->ssm_alpha, &ly->ssm_out};
        for (int j = 0; j < 18; j++) {
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
    /* the recurrent layers' state (counted in kv_bytes, as rt_mem_estimate does) */
    if (hp->full_attn_interval) {
        uint64_t conv_f, ssm_f, st;
        size_t nc, ns;
        uint64_t bc, bs;
        for (uint32_t il = 0; il < hp->n_layer; il++) c->n_rec += rt_layer_is_recurrent(hp, il);
        if (!rt__ssm_state_bytes(hp, &conv_f, &ssm_f, &st) ||
            !mw_mul_u64(conv_f, sizeof(float), &bc) || !mw_mul_u64(ssm_f, sizeof(float), &bs) ||
            !mw_u64_to_size(bc, &nc) || !mw_u64_to_size(bs, &ns) ||
            !(c->conv_state = calloc(1, nc ? nc : 1)) || !(c->ssm_state = calloc(1, ns ? ns : 1))) {
            s = MW_FAIL(err, MW_E_NOMEM, MW_ERR_OFF_NONE,
                        "recurrent state of %llu bytes (%u layers)", (unsigned long long)st,
                        c->n_rec);
            goto fail;
        }
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
    free(c->conv_state);
    free(c->ssm_state);
    free(c->s_qkv);
    free(c->s_conv);
    free(c->s_z);
    free(c->s_b);
    free(c->s_a);
    free(c->s_o);
    free(c->qg);
    free(c->ple);
    free(c->qgate);
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
    out->copied_bytes = rt_model_copied_bytes(c->m);
    out->weight_bytes = rt_model_weight_bytes(c->m);
    out->owned_bytes = rt_model_owned_bytes(c->m);
    bool ok;
    out->kv_bytes = rt__kv_bytes(c->kv.type, &c->m->hp, c->n_ctx, c->n_batch, c->kv.kv_dim, &ok);
    uint64_t conv_f, ssm_f;
    if (rt__ssm_state_bytes(&c->m->hp, &conv_f, &ssm_f, &out->state_bytes))
        out->kv_bytes += out->state_bytes; /* allocated, so no overflow */
    out->scratch_bytes = c->scratch_bytes;
    out->n_ctx = c->n_ctx;
    out->n_threads = c->n_threads;
    out->kv_type = c->kv.type;
}

uint32_t rt_ctx_n_ctx(const struct rt_ctx *c) { return c->n_ctx; }
uint32_t rt_ctx_n_past(const struct rt_ctx *c) { return c->n_past; }
const struct rt_model *rt_ctx_model(const struct rt_ctx *c) { return c->m; }
const char *rt_ctx_kernels_name(const struct rt_ctx *c) { return c->ks->name; }
const float *rt_ctx_logits(const struct rt_ctx *c) { return c->logits_last; }

const uint64_t *rt_ctx_expert_hits(const struct rt_ctx *c, uint32_t il)
{
    const struct rt_hparams *hp = &c->m->hp;
    if (hp->n_expert == 0 || il >= hp->n_layer) return NULL;
    return c->moe_hits + (uint64_t)il * hp->n_expert;
}
