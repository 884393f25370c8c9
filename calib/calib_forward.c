/*
 * calib/calib_forward.c — the layer-by-layer FP32 forward over all samples
 * (OpenBLAS GEMM), the statistics, and the per-layer callback API
 * (calib.h). The calibrate -> quantize loop lives here and only here.
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
#define _POSIX_C_SOURCE 200809L
#include "calib/calib_int.h"
#include "core/mw_file.h"
#include "runtime/rt_ops.h"
#include "calib/mw_blas.h"

#include <cblas.h>
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

// --- statistics ---------------------------------------------------------------------

struct calib_stats {
    uint32_t n_layer, n_samples, n_pos;
    bool fused_qkv, fused_gate_up; /* names of the imatrix entries (calib_stats_entry) */
    uint32_t n_expert;           /* MoE: experts per layer (0: dense) */
    bool shexp;                  /* MoE: a shared expert (qwen2moe) */
    struct calib_group_stats *g; /* (n_layer, CALIB_G_COUNT) */
    double *buf;
    struct calib_group_stats *xg; /* MoE: (n_layer, 2 (FFN_IN, FFN_DOWN), n_expert) */
    double *xbuf;
    struct calib_timing tm;
};

const struct calib_timing *calib_stats_timing(const struct calib_stats *st) { return &st->tm; }

void calib_stats_free(struct calib_stats *st)
{
    if (!st) return;
    free(st->g);
    free(st->buf);
    free(st->xg);
    free(st->xbuf);
    free(st);
}

uint32_t calib_stats_n_layer(const struct calib_stats *st) { return st->n_layer; }
uint32_t calib_stats_n_samples(const struct calib_stats *st) { return st->n_samples; }
uint32_t calib_stats_n_pos(const struct calib_stats *st) { return st->n_pos; }

const struct calib_group_stats *calib_stats_group(const struct calib_stats *st, uint32_t layer,
                                                  enum calib_group g)
{
    if (layer >= st->n_layer || (unsigned)g >= CALIB_G_COUNT) return NULL;
    return &st->g[(uint64_t)layer * CALIB_G_COUNT + g];
}

uint32_t calib_stats_n_expert(const struct calib_stats *st) { return st->n_expert; }

const struct calib_group_stats *calib_stats_expert(const struct calib_stats *st, uint32_t layer,
                                                   enum calib_group g, uint32_t ex)
{
    if (layer >= st->n_layer || ex >= st->n_expert ||
        (g != CALIB_G_FFN_IN && g != CALIB_G_FFN_DOWN))
        return NULL;
    return &st->xg[((uint64_t)layer * 2 + (g == CALIB_G_FFN_DOWN)) * st->n_expert + ex];
}

static const char *const group_names[CALIB_G_COUNT] = {"attn_in", "attn_out", "ffn_in",
                                                       "ffn_down"};
static const char *const wkind_names[CALIB_W_COUNT] = {
    "attn_q", "attn_k", "attn_v", "attn_output", "ffn_gate", "ffn_up", "ffn_down"};
static const enum calib_group wkind_group[CALIB_W_COUNT] = {
    CALIB_G_ATTN_IN, CALIB_G_ATTN_IN, CALIB_G_ATTN_IN, CALIB_G_ATTN_OUT,
    CALIB_G_FFN_IN,  CALIB_G_FFN_IN,  CALIB_G_FFN_DOWN};
static const enum calib_tslot wkind_slot[CALIB_W_COUNT] = {
    CALIB_T_WQ, CALIB_T_WK, CALIB_T_WV, CALIB_T_WO, CALIB_T_WGATE, CALIB_T_WUP, CALIB_T_WDOWN};
static const enum calib_tslot wkind_bias[CALIB_W_COUNT] = {
    CALIB_T_BQ, CALIB_T_BK, CALIB_T_BV, CALIB_T_BO, CALIB_T_BGATE, CALIB_T_BUP, CALIB_T_BDOWN};

uint64_t calib_weight_tensor(const struct rt_hparams *hp, uint32_t il, enum calib_wkind w,
                             char *buf, size_t n, uint64_t *tensor_rows)
{
    const uint64_t Q = (uint64_t)hp->n_head * hp->head_dim;
    const uint64_t KV = (uint64_t)hp->n_head_kv * hp->head_dim;
    const uint64_t F = hp->n_expert ? hp->n_ff_shexp : hp->n_ff;
    uint64_t row0 = 0, rows = 0;
    const char *nm = (unsigned)w < CALIB_W_COUNT ? wkind_names[w] : "?";
    switch (w) {
    case CALIB_W_Q: rows = Q; break;
    case CALIB_W_K: rows = KV; row0 = Q; break;
    case CALIB_W_V: rows = KV; row0 = Q + KV; break;
    case CALIB_W_O: rows = hp->n_embd; break;
    case CALIB_W_GATE: rows = F; break;
    case CALIB_W_UP: rows = F; row0 = F; break;
    case CALIB_W_DOWN: rows = hp->n_embd; break;
    case CALIB_W_COUNT: break;
    }
    if (hp->fused_qkv && (w == CALIB_W_Q || w == CALIB_W_K || w == CALIB_W_V)) {
        nm = "attn_qkv";
        rows = Q + 2 * KV;
    } else if (hp->fused_gate_up && (w == CALIB_W_GATE || w == CALIB_W_UP)) {
        nm = "ffn_up";
        rows = 2 * F;
    } else {
        row0 = 0;
    }
    if (hp->n_expert && (w == CALIB_W_GATE || w == CALIB_W_UP || w == CALIB_W_DOWN))
        nm = w == CALIB_W_GATE ? "ffn_gate_shexp" : w == CALIB_W_UP ? "ffn_up_shexp"
                                                                    : "ffn_down_shexp";
    if (buf && n) snprintf(buf, n, "blk.%u.%s.weight", il, nm);
    if (tensor_rows) *tensor_rows = rows;
    return row0;
}

bool calib_stats_entry(const struct calib_stats *st, uint32_t il, enum calib_wkind w, char *buf,
                       size_t n)
{
    const struct rt_hparams hp = {.fused_qkv = st->fused_qkv,
                                  .fused_gate_up = st->fused_gate_up,
                                  .n_expert = st->n_expert};
    if ((unsigned)w >= CALIB_W_COUNT) return false;
    (void)calib_weight_tensor(&hp, il, w, buf, n, NULL);
    /* one entry per tensor: a fused tensor's is its first part's */
    if (st->fused_qkv && (w == CALIB_W_K || w == CALIB_W_V)) return false;
    if (st->fused_gate_up && w == CALIB_W_UP) return false;
    /* a MoE model's dense FFN is its shared expert, if it has one */
    if (st->n_expert && !st->shexp && wkind_group[w] >= CALIB_G_FFN_IN) return false;
    return true;
}

/* The entries of layer il in order (at most 12): the weights of
 * calib_stats_entry, and for a MoE layer the router, the shared expert's
 * gate, then the three stacked expert tensors. */
static unsigned layer_entries(const struct calib_stats *st, uint32_t il, struct calib_entry *out)
{
    unsigned k = 0;
    for (int w = 0; w < CALIB_W_COUNT; w++) {
        if (!calib_stats_entry(st, il, (enum calib_wkind)w, out[k].name, sizeof out[k].name))
            continue;
        out[k].n_mat = 1;
        out[k].gs = calib_stats_group(st, il, wkind_group[w]);
        k++;
    }
    if (!st->n_expert) return k;
    static const char *const moe_names[5] = {"ffn_gate_inp", "ffn_gate_inp_shexp",
                                             "ffn_gate_exps", "ffn_up_exps", "ffn_down_exps"};
    for (int i = 0; i < 5; i++) {
        if (i == 1 && !st->shexp) continue;
        snprintf(out[k].name, sizeof out[k].name, "blk.%u.%s.weight", il, moe_names[i]);
        out[k].n_mat = i >= 2 ? st->n_expert : 1;
        out[k].gs = i < 2 ? calib_stats_group(st, il, CALIB_G_FFN_IN)
                          : calib_stats_expert(st, il, i == 4 ? CALIB_G_FFN_DOWN : CALIB_G_FFN_IN,
                                               0);
        k++;
    }
    return k;
}

uint64_t calib_stats_n_entries(const struct calib_stats *st)
{
    struct calib_entry tmp[12];
    return st->n_layer ? (uint64_t)st->n_layer * layer_entries(st, 0, tmp) : 0;
}

bool calib_stats_entry_at(const struct calib_stats *st, uint64_t i, struct calib_entry *out)
{
    struct calib_entry tmp[12];
    const uint64_t per = st->n_layer ? layer_entries(st, 0, tmp) : 0;
    if (per == 0 || i / per >= st->n_layer) return false;
    (void)layer_entries(st, (uint32_t)(i / per), tmp);
    *out = tmp[i % per];
    return true;
}

const char *calib_group_name(enum calib_group g)
{
    return (unsigned)g < CALIB_G_COUNT ? group_names[g] : "?";
}
const char *calib_wkind_name(enum calib_wkind w)
{
    return (unsigned)w < CALIB_W_COUNT ? wkind_names[w] : "?";
}
enum calib_group calib_wkind_group(enum calib_wkind w)
{
    return (unsigned)w < CALIB_W_COUNT ? wkind_group[w] : CALIB_G_COUNT;
}

// --- the engine ---------------------------------------------------------------------

#define SLOT_BIT(t) (1u << (t))
/* what each stage's callback may change */
static const unsigned stage_mutable[CALIB_G_COUNT] = {
    [CALIB_G_ATTN_IN] = SLOT_BIT(CALIB_T_WQ) | SLOT_BIT(CALIB_T_WK) | SLOT_BIT(CALIB_T_WV) |
                        SLOT_BIT(CALIB_T_ATTN_NORM),
    [CALIB_G_ATTN_OUT] = SLOT_BIT(CALIB_T_WQ) | SLOT_BIT(CALIB_T_WK) | SLOT_BIT(CALIB_T_WV) |
                         SLOT_BIT(CALIB_T_WO) | SLOT_BIT(CALIB_T_ATTN_NORM),
    [CALIB_G_FFN_IN] = SLOT_BIT(CALIB_T_WGATE) | SLOT_BIT(CALIB_T_WUP) |
                       SLOT_BIT(CALIB_T_FFN_NORM),
    [CALIB_G_FFN_DOWN] = SLOT_BIT(CALIB_T_WGATE) | SLOT_BIT(CALIB_T_WUP) |
                         SLOT_BIT(CALIB_T_WDOWN) | SLOT_BIT(CALIB_T_FFN_NORM),
};
/* what each group's input depends on (a bias moves with its weight) */
static const unsigned group_deps[CALIB_G_COUNT] = {
    [CALIB_G_ATTN_IN] = SLOT_BIT(CALIB_T_ATTN_NORM),
    [CALIB_G_ATTN_OUT] = SLOT_BIT(CALIB_T_ATTN_NORM) | SLOT_BIT(CALIB_T_WQ) |
                         SLOT_BIT(CALIB_T_WK) | SLOT_BIT(CALIB_T_WV),
    [CALIB_G_FFN_IN] = SLOT_BIT(CALIB_T_FFN_NORM),
    [CALIB_G_FFN_DOWN] = SLOT_BIT(CALIB_T_FFN_NORM) | SLOT_BIT(CALIB_T_WGATE) |
                         SLOT_BIT(CALIB_T_WUP),
};

#define STAGE_NONE (-1)  /* outside callbacks (engine work, on_layer) */
#define XCHUNK MW_BLAS_TILE_M /* MoE: rows per expert chunk (a fixed tiling) */

struct engine;

struct calib_layer {
    struct engine *e;
    uint32_t il;
    int stage;            /* group whose callback runs, or STAGE_NONE */
    bool ffn_phase;       /* hs already holds the attention output */
    unsigned live;        /* slots handed out mutable in this callback */
    bool xo_stale;
    float *H[CALIB_G_COUNT];
    bool H_valid[CALIB_G_COUNT];
    char names[CALIB_W_COUNT][GGUF_MAX_NAME + 1];
    int32_t expert;       /* MoE: the expert whose callback runs, or -1 */
    char xnames[3][GGUF_MAX_NAME + 1]; /* ffn_{gate,up,down}_exps.weight */
};

struct engine {
    const struct calib_model *m;
    const struct rt_hparams *hp;
    const struct calib_samples *s;
    struct mw_pool *pool;
    uint32_t n_samples, n_pos, spb;
    uint64_t T, rows_b;
    uint64_t E, Q, KV, F, hd;  /* F: n_ff; a MoE model's shared expert's (0: none) */
    uint32_t n_rep;
    /* mixture of experts: experts, used per row, one expert's width;
     * per MoE layer the routing of every row, the FFN output summed before
     * the residual, the rows of the current expert, and chunk scratch */
    uint64_t NX, K, FX;
    int32_t *sel;    /* (T, K) routed experts */
    float *wt;       /* (T, K) their weights */
    float *sgate;    /* (T) qwen2moe: the shared expert's gate logit */
    float *acc;      /* (T, E) */
    uint64_t *xrow;  /* (T) rows routed to the current expert, ascending */
    float *xw;       /* (T) their weights */
    uint64_t xn;
    float *lg;       /* (rows_b, NX) router logits */
    float *xe, *ge, *ue, *ye; /* XCHUNK rows: normed input, gate (then act), up, output */
    int32_t *ridx;   /* (NX) argsort scratch */
    float kq_scale;
    uint64_t max_memory; /* 0: no bound; else at most one Hessian is cached */
    /* hidden states on disk (--max-memory, statistics-only runs): hs is NULL,
     * the (T, E) floats live in an unlinked scratch file, a batch at a time
     * in hsb (rows [hsb_r0, hsb_r0 + rows_b)) */
    bool hs_file;
    int hs_fd;
    float *hsb;
    uint64_t hsb_r0;
    char hs_path[256];
    float *hs;    /* (T, E) hidden states */
    float *xo;    /* (T, Q) attention output, staged mode only */
    float *rope;  /* (n_pos, n_rot) cos/sin of the layers that do not slide */
    float *rope_swa; /* (n_pos, n_rot) of sliding layers (own base/scale; NULL: none) */
    const float *rope_l; /* the current layer's table */
    bool swa_l;   /* the current layer slides (rt_layer_is_swa) */
    float q_mul;  /* queries times this after RoPE (0: no) — rt_attn_scales */
    /* batch scratch (rows_b rows) */
    float *xin, *q, *k, *v, *att, *g, *u, *y, *ubuf, *S;
    float *one;   /* (n_pos, Q): one sample's attention output */
    float *w[CALIB_T_COUNT];   /* views (fused parts point into their tensor); NULL:
                                * parked (lean) */
    float *wown[CALIB_T_COUNT]; /* the buffers loaded from the model */
    /* lean mode (--max-memory): the hidden states (hs_file), the
     * attention outputs (xo_fd) and the layer's seven big weights (w_fd, f32
     * at woff[owner]) live in unlinked scratch files; the engine's GEMMs
     * stream a parked weight in panels of panel_rows rows (whole 256-column
     * tiles of mw_gemm: the same bits); a callback's calib_layer_weight makes
     * one resident until calib_layer_weight_release or the callback's end. */
    bool lean;
    int xo_fd, w_fd;
    char xo_path[256], w_path[256];
    uint64_t woff[CALIB_T_COUNT];
    bool dirty[CALIB_T_COUNT];
    float *panel;
    uint64_t hsb_n;  /* rows of hsb that hold [hsb_r0, hsb_r0 + hsb_n) */
    float *hsv;      /* calib_layer_hidden's buffer (hs_file: rows_b x E) */
    const char *scratch_dir;
    calib_stage_fn on_stage;
    void *on_stage_ud;
    uint32_t first_layer, layers_done;
    double t_start; /* mw_now_s() at the start of the run */
    struct calib_stats *st;
    struct calib_layer ly;
};

static uint64_t panel_rows(uint64_t n_in);
static void moe_free(struct engine *e);

/* floats for a * b (* c) elements, the product checked */
static float *alloc_f(uint64_t n, bool *ok);
static float *alloc_f2(uint64_t a, uint64_t b, bool *ok)
{
    uint64_t n;
    if (!mw_mul_u64(a, b, &n)) *ok = false;
    return *ok ? alloc_f(n, ok) : NULL;
}
static float *alloc_f3(uint64_t a, uint64_t b, uint64_t c, bool *ok)
{
    uint64_t n;
    if (!mw_mul_u64(a, b, &n)) *ok = false;
    return *ok ? alloc_f2(n, c, ok) : NULL;
}

static float *alloc_f(uint64_t n, bool *ok)
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
// scale, attention soft-capping, the sliding window's first position). The softmax is not: the runtime's is llama.cpp's
// online flash-attention softmax over its KV cache, this one a plain causal
// softmax over whole samples (softmax_causal below).

enum row_op {
    OP_NORM,      /* dst = rmsnorm(src) * w        (E) */
    OP_ADD,       /* dst += src                     (n) */
    OP_BIAS,      /* dst += w                       (n per row) */
    OP_ROPE,      /* q/k norm (qk_norm), rope q and k rows (pos = row0 + r mod n_pos),
                   * queries times q_mul */
    OP_SWIGLU,    /* dst = act(dst) * src           (F; SiLU or GELU-tanh) */
    OP_GNORM,     /* dst = rmsnorm(hs[idx[r]]) * w  (E; gathered rows, MoE) */
};

struct row_job {
    struct engine *e;
    enum row_op op;
    uint64_t n_rows, n;   /* rows, elements per row */
    uint64_t row0;        /* first row's index within its sample sequence (ROPE) */
    float *dst;
    const float *src;
    const float *w;
    const uint64_t *idx;  /* OP_GNORM */
};

static void row_task(void *arg, unsigned ith, unsigned nth)
{
    const struct row_job *J = arg;
    const struct engine *e = J->e;
    const struct rt_hparams *hp = e->hp;
    uint64_t lo, hi;
    calib__split(J->n_rows, ith, nth, &lo, &hi);
    for (uint64_t r = lo; r < hi; r++) {
        switch (J->op) {
        case OP_NORM:
            rt_rmsnorm(J->dst + r * J->n, J->src + r * J->n, J->w, J->n, hp->rms_eps);
            break;
        case OP_ADD: {
            float *o = J->dst + r * J->n;
            const float *x = J->src + r * J->n;
            for (uint64_t i = 0; i < J->n; i++) o[i] += x[i];
            break;
        }
        case OP_BIAS: {
            float *o = J->dst + r * J->n;
            for (uint64_t i = 0; i < J->n; i++) o[i] += J->w[i];
            break;
        }
        case OP_ROPE: {
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
        case OP_SWIGLU:
            rt_ffn_act(hp, J->dst + r * J->n, J->src + r * J->n, J->n);
            break;
        case OP_GNORM:
            rt_rmsnorm(J->dst + r * J->n, e->hs + J->idx[r] * J->n, J->w, J->n, hp->rms_eps);
            break;
        }
    }
}

static void run_rows(struct engine *e, enum row_op op, uint64_t n_rows, uint64_t n, float *dst,
                     const float *src, const float *w, uint64_t row0)
{
    struct row_job J = {.e = e, .op = op, .n_rows = n_rows, .n = n, .row0 = row0,
                        .dst = dst, .src = src, .w = w};
    mw_pool_run(e->pool, row_task, &J);
}

/* Y (nr, n_out) = X (nr, n_in) W^T (+ bias); X's first row starts a sample */
static void linear(struct engine *e, const float *X, uint64_t nr, uint64_t n_in, const float *W,
                   const float *bias, uint64_t n_out, float *Y, uint64_t ldy)
{
    /* fixed tiles, row tiles per sample: the same bits for any thread count
     * and any samples per batch (mw_blas.h) */
    const double t0 = mw_now_s();
    mw_gemm(e->pool, false, true, nr, n_out, n_in, 1.0f, X, n_in, W, n_in, 0.0f, Y, ldy, e->n_pos);
    e->st->tm.gemm_s += mw_now_s() - t0;
    e->st->tm.gemm_flop += 2.0 * (double)nr * (double)n_in * (double)n_out;
    if (bias) {
        if (ldy == n_out) {
            run_rows(e, OP_BIAS, nr, n_out, Y, NULL, bias, 0);
        } else {
            for (uint64_t r = 0; r < nr; r++)
                for (uint64_t i = 0; i < n_out; i++) Y[r * ldy + i] += bias[i];
        }
    }
}

// --- statistics accumulation (threads split channels, never rows) ---

struct stat_job {
    const float *X;
    uint64_t nr, n_in;
    double *sq, *ab;
};

static void stat_task(void *arg, unsigned ith, unsigned nth)
{
    const struct stat_job *J = arg;
    uint64_t lo, hi;
    calib__split(J->n_in, ith, nth, &lo, &hi);
    for (uint64_t r = 0; r < J->nr; r++) {
        const float *x = J->X + r * J->n_in;
        for (uint64_t j = lo; j < hi; j++) {
            const double v = (double)x[j];
            J->sq[j] += v * v;
            J->ab[j] += fabs(v);
        }
    }
}

static void accum(struct engine *e, enum calib_group g, const float *X, uint64_t nr)
{
    struct calib_group_stats *gs = &e->st->g[(uint64_t)e->ly.il * CALIB_G_COUNT + g];
    struct stat_job J = {.X = X, .nr = nr, .n_in = gs->n_in, .sq = (double *)gs->sum_sq,
                         .ab = (double *)gs->sum_abs};
    mw_pool_run(e->pool, stat_task, &J);
    gs->count += nr;
}

/* MoE: expert ex's statistics of group g (FFN_IN / FFN_DOWN), rows in order */
static void accum_x(struct engine *e, enum calib_group g, uint64_t ex, const float *X, uint64_t nr)
{
    struct calib_group_stats *gs =
        (struct calib_group_stats *)calib_stats_expert(e->st, e->ly.il, g, (uint32_t)ex);
    struct stat_job J = {.X = X, .nr = nr, .n_in = gs->n_in, .sq = (double *)gs->sum_sq,
                         .ab = (double *)gs->sum_abs};
    mw_pool_run(e->pool, stat_task, &J);
    gs->count += nr;
}

// --- blocks -------------------------------------------------------------------------

/* hidden-state row r0: in memory, or in the batch loaded from the scratch file */
static float *hs_at(const struct engine *e, uint64_t r0)
{
    return e->hs_file ? e->hsb + (r0 - e->hsb_r0) * e->E : e->hs + r0 * e->E;
}

/* n bytes at off of a scratch file <-> buf; what names the file's content */
static enum mw_status fio(int fd, const char *path, bool write, uint64_t off, void *buf,
                          uint64_t n, const char *what, struct mw_err *err)
{
    mw_err_clear(err);
    enum mw_status s = write ? mw_pwrite_all(fd, buf, n, off, path, err)
                             : mw_pread_all(fd, buf, n, off, path, err);
    if (s) mw_err_set_where(err, "scratch file of %s (unlinked)", what);
    return s;
}

/* read: rows [r0, r0 + nr) of the scratch file -> hsb (the window starts
 * at r0); write: those rows, which must lie in the window, back to the file */
static enum mw_status hs_io(struct engine *e, bool write, uint64_t r0, uint64_t nr,
                            struct mw_err *err)
{
    if (write)
        return fio(e->hs_fd, e->hs_path, true, r0 * e->E * sizeof(float), hs_at(e, r0),
                   nr * e->E * sizeof(float), "hidden states", err);
    enum mw_status s = fio(e->hs_fd, e->hs_path, false, r0 * e->E * sizeof(float), e->hsb,
                           nr * e->E * sizeof(float), "hidden states", err);
    e->hsb_r0 = r0;
    e->hsb_n = s ? 0 : nr;
    return s;
}

/* hidden-state rows [r0, r0 + nr) (nr <= rows_b) available through hs_at */
static enum mw_status hs_need(struct engine *e, uint64_t r0, uint64_t nr, struct mw_err *err)
{
    if (!e->hs_file || (r0 >= e->hsb_r0 && r0 + nr <= e->hsb_r0 + e->hsb_n)) return MW_OK;
    return hs_io(e, false, r0, nr, err);
}

/* attention outputs X_o rows [r0, r0 + nr) <-> dst (lean: the scratch file) */
static enum mw_status xo_io(struct engine *e, bool write, uint64_t r0, uint64_t nr, float *buf,
                            struct mw_err *err)
{
    return fio(e->xo_fd, e->xo_path, write, r0 * e->Q * sizeof(float), buf,
               nr * e->Q * sizeof(float), "attention outputs", err);
}

static bool big_slot(enum calib_tslot t)
{
    return (t >= CALIB_T_WQ && t <= CALIB_T_WDOWN) || t == CALIB_T_WQKV;
}

/* The tensor that holds slot t (fused parts: attn_qkv, ffn_up), and t's
 * first row in it */
static enum calib_tslot owner_of(const struct engine *e, enum calib_tslot t, uint64_t *row0)
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

/* the views of the fused parts into their owner's buffer */
static void set_views(struct engine *e)
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

static uint64_t slot_bytes(const struct engine *e, enum calib_tslot t)
{
    return calib__slot_elems(e->hp, t) * sizeof(float);
}

/* lean: owner slot o resident (read back from the weights file) */
static enum mw_status w_resident(struct engine *e, enum calib_tslot o, struct mw_err *err)
{
    if (!e->lean || e->wown[o] || !calib__model_has(e->m, e->ly.il, o)) return MW_OK;
    bool ok = true;
    float *b = alloc_f(slot_bytes(e, o) / sizeof(float), &ok);
    if (!ok)
        return MW_FAIL(err, MW_E_NOMEM, MW_ERR_OFF_NONE, "layer %u: weight of %llu bytes",
                       e->ly.il, (unsigned long long)slot_bytes(e, o));
    enum mw_status s = fio(e->w_fd, e->w_path, false, e->woff[o], b, slot_bytes(e, o),
                           "parked weights", err);
    if (s) {
        free(b);
        return s;
    }
    e->wown[o] = e->w[o] = b;
    e->dirty[o] = false;
    set_views(e);
    return MW_OK;
}

/* lean: owner slot o back to the weights file (written if changed), freed */
static enum mw_status w_park(struct engine *e, enum calib_tslot o, struct mw_err *err)
{
    if (!e->lean || !e->wown[o] || !big_slot(o)) return MW_OK;
    if (e->dirty[o]) {
        enum mw_status s = fio(e->w_fd, e->w_path, true, e->woff[o], e->wown[o],
                               slot_bytes(e, o), "parked weights", err);
        if (s) return s;
        e->dirty[o] = false;
    }
    free(e->wown[o]);
    e->wown[o] = e->w[o] = NULL;
    set_views(e);
    return MW_OK;
}

static enum mw_status park_all(struct engine *e, struct mw_err *err)
{
    enum mw_status s = MW_OK;
    for (int t = 0; t < CALIB_T_COUNT && !s; t++) s = w_park(e, (enum calib_tslot)t, err);
    return s;
}

/* Y = X W_t^T (+ b) for slot t, resident or parked (lean: streamed from the
 * weights file in panels of panel_rows rows, each a whole number of
 * mw_gemm's 256-column tiles starting at a multiple of 256, so every tile
 * is the call the resident weight would make: the same bits). */
static enum mw_status linear_w(struct engine *e, const float *X, uint64_t nr, uint64_t n_in,
                               enum calib_tslot t, enum calib_tslot b, uint64_t n_out, float *Y,
                               uint64_t ldy, struct mw_err *err)
{
    if (e->w[t] || !e->lean) {
        linear(e, X, nr, n_in, e->w[t], e->w[b], n_out, Y, ldy);
        return MW_OK;
    }
    uint64_t row0;
    const enum calib_tslot o = owner_of(e, t, &row0);
    const uint64_t pr = panel_rows(n_in);
    for (uint64_t c0 = 0; c0 < n_out; c0 += pr) {
        const uint64_t c1 = c0 + pr < n_out ? c0 + pr : n_out;
        enum mw_status s = fio(e->w_fd, e->w_path, false,
                               e->woff[o] + (row0 + c0) * n_in * sizeof(float), e->panel,
                               (c1 - c0) * n_in * sizeof(float), "parked weights", err);
        if (s) return s;
        const double t0 = mw_now_s();
        mw_gemm(e->pool, false, true, nr, c1 - c0, n_in, 1.0f, X, n_in, e->panel, n_in, 0.0f,
                Y + c0, ldy, e->n_pos);
        e->st->tm.gemm_s += mw_now_s() - t0;
        e->st->tm.gemm_flop += 2.0 * (double)nr * (double)n_in * (double)(c1 - c0);
    }
    if (e->w[b]) {
        if (ldy == n_out) {
            run_rows(e, OP_BIAS, nr, n_out, Y, NULL, e->w[b], 0);
        } else {
            for (uint64_t r = 0; r < nr; r++)
                for (uint64_t i = 0; i < n_out; i++) Y[r * ldy + i] += e->w[b][i];
        }
    }
    return MW_OK;
}

/* X (nr rows of hs from row r0) -> normed into dst */
static void norm_rows(struct engine *e, uint64_t r0, uint64_t nr, enum calib_tslot norm, float *dst)
{
    run_rows(e, OP_NORM, nr, e->E, dst, hs_at(e, r0), e->w[norm], 0);
}

/* causal softmax of the P x P scores in place (row i keeps columns lo..i:
 * lo = 0, or in a sliding layer the first position within the window);
 * with a soft cap (gemma2) each kept raw dot s becomes rt_attn_score(s,
 * scale, cap) first (the scores were computed unscaled then). */
static void softmax_causal(const struct engine *e, float *S, uint64_t P, float scale, float cap)
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
    struct engine *e;
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
    struct engine *e = J->e;
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
        softmax_causal(e, S, P, e->kq_scale, cap);
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)P, (int)e->hd, (int)P, 1.0f,
                    S, (int)P, vs + gi * e->hd, (int)e->KV, 0.0f,
                    J->out + sI * P * J->ldo + h * e->hd, (int)J->ldo);
    }
}

/* attention of ns whole samples whose normed input is X (ns*n_pos, E) ->
 * out (ns*n_pos rows, Q, row stride ldo) */
static enum mw_status attention(struct engine *e, const float *X, uint32_t ns, float *out,
                                uint64_t ldo, struct mw_err *err)
{
    const uint64_t nr = (uint64_t)ns * e->n_pos;
    enum mw_status s;
    if ((s = linear_w(e, X, nr, e->E, CALIB_T_WQ, CALIB_T_BQ, e->Q, e->q, e->Q, err)) ||
        (s = linear_w(e, X, nr, e->E, CALIB_T_WK, CALIB_T_BK, e->KV, e->k, e->KV, err)) ||
        (s = linear_w(e, X, nr, e->E, CALIB_T_WV, CALIB_T_BV, e->KV, e->v, e->KV, err)))
        return s;
    run_rows(e, OP_ROPE, nr, 0, NULL, NULL, NULL, 0);
    struct attn_job J = {.e = e, .ns = ns, .out = out, .ldo = ldo};
    mw_pool_run(e->pool, attn_task, &J);
    return MW_OK;
}

/* SwiGLU of nr rows of normed input X -> e->g (nr, F) */
static enum mw_status swiglu(struct engine *e, const float *X, uint64_t nr, struct mw_err *err)
{
    enum mw_status s;
    if ((s = linear_w(e, X, nr, e->E, CALIB_T_WGATE, CALIB_T_BGATE, e->F, e->g, e->F, err)) ||
        (s = linear_w(e, X, nr, e->E, CALIB_T_WUP, CALIB_T_BUP, e->F, e->u, e->F, err)))
        return s;
    run_rows(e, OP_SWIGLU, nr, e->F, e->g, e->u, NULL, 0);
    return MW_OK;
}

/* the sandwich norm (gemma: post_attention_norm / post_ffw_norm) of the
 * block whose output projection is w, in place over nr rows of Y (E wide) */
static void post_norm(struct engine *e, enum calib_tslot w, float *Y, uint64_t nr)
{
    if (!e->hp->post_norms) return;
    const enum calib_tslot pn = w == CALIB_T_WO ? CALIB_T_ATTN_POST_NORM : CALIB_T_FFN_POST_NORM;
    run_rows(e, OP_NORM, nr, e->E, Y, Y, e->w[pn], 0);
}

/* hs rows [r0, r0+nr) += postnorm(X W^T (+ b)) */
static enum mw_status residual(struct engine *e, uint64_t r0, uint64_t nr, const float *X,
                               uint64_t n_in, enum calib_tslot w, enum calib_tslot b,
                               struct mw_err *err)
{
    enum mw_status s = linear_w(e, X, nr, n_in, w, b, e->E, e->y, e->E, err);
    if (s) return s;
    post_norm(e, w, e->y, nr);
    run_rows(e, OP_ADD, nr, e->E, hs_at(e, r0), e->y, NULL, 0);
    return MW_OK;
}

// --- batches ---

static uint32_t batch_samples(const struct engine *e, uint32_t s0)
{
    return e->n_samples - s0 < e->spb ? e->n_samples - s0 : e->spb;
}

/* attn_only (MoE): the attention half; moe_ffn does the FFN over all rows */
static enum mw_status pass_fused(struct engine *e, bool attn_only, struct mw_err *err)
{
    enum mw_status st;
    for (uint32_t s0 = 0; s0 < e->n_samples; s0 += e->spb) {
        const uint32_t ns = batch_samples(e, s0);
        const uint64_t r0 = (uint64_t)s0 * e->n_pos, nr = (uint64_t)ns * e->n_pos;
        if (e->hs_file && (st = hs_io(e, false, r0, nr, err))) return st;
        norm_rows(e, r0, nr, CALIB_T_ATTN_NORM, e->xin);
        accum(e, CALIB_G_ATTN_IN, e->xin, nr);
        if ((st = attention(e, e->xin, ns, e->att, e->Q, err))) return st;
        accum(e, CALIB_G_ATTN_OUT, e->att, nr);
        if ((st = residual(e, r0, nr, e->att, e->Q, CALIB_T_WO, CALIB_T_BO, err))) return st;
        if (attn_only) continue;
        norm_rows(e, r0, nr, CALIB_T_FFN_NORM, e->xin);
        accum(e, CALIB_G_FFN_IN, e->xin, nr);
        if ((st = swiglu(e, e->xin, nr, err))) return st;
        accum(e, CALIB_G_FFN_DOWN, e->g, nr);
        if ((st = residual(e, r0, nr, e->g, e->F, CALIB_T_WDOWN, CALIB_T_BDOWN, err))) return st;
        if (e->hs_file && (st = hs_io(e, true, r0, nr, err))) return st;
    }
    return MW_OK;
}

enum stage_pass { P_A, P_B, P_B_AGAIN, P_C, P_D, P_E, P_F };

/* One stage pass over all batches (lean: the hidden states read, and
 * written back after a residual; X_o through its scratch file). */
static enum mw_status pass_stage(struct engine *e, enum stage_pass p, struct mw_err *err)
{
    enum mw_status st = MW_OK;
    for (uint32_t s0 = 0; s0 < e->n_samples && !st; s0 += e->spb) {
        const uint32_t ns = batch_samples(e, s0);
        const uint64_t r0 = (uint64_t)s0 * e->n_pos, nr = (uint64_t)ns * e->n_pos;
        if ((st = hs_need(e, r0, nr, err))) break;
        float *xo = e->lean ? e->att : e->xo + r0 * e->Q;
        switch (p) {
        case P_A:
            norm_rows(e, r0, nr, CALIB_T_ATTN_NORM, e->xin);
            accum(e, CALIB_G_ATTN_IN, e->xin, nr);
            break;
        case P_B:
        case P_B_AGAIN:
            norm_rows(e, r0, nr, CALIB_T_ATTN_NORM, e->xin);
            if ((st = attention(e, e->xin, ns, xo, e->Q, err))) break;
            if (p == P_B) accum(e, CALIB_G_ATTN_OUT, xo, nr);
            if (e->lean) st = xo_io(e, true, r0, nr, xo, err);
            break;
        case P_C:
            if (e->lean && (st = xo_io(e, false, r0, nr, xo, err))) break;
            if ((st = residual(e, r0, nr, xo, e->Q, CALIB_T_WO, CALIB_T_BO, err))) break;
            if (e->hs_file) st = hs_io(e, true, r0, nr, err);
            break;
        case P_D:
            norm_rows(e, r0, nr, CALIB_T_FFN_NORM, e->xin);
            accum(e, CALIB_G_FFN_IN, e->xin, nr);
            break;
        case P_E:
        case P_F:
            norm_rows(e, r0, nr, CALIB_T_FFN_NORM, e->xin);
            if ((st = swiglu(e, e->xin, nr, err))) break;
            if (p == P_E) {
                accum(e, CALIB_G_FFN_DOWN, e->g, nr);
            } else {
                if ((st = residual(e, r0, nr, e->g, e->F, CALIB_T_WDOWN, CALIB_T_BDOWN, err)))
                    break;
                if (e->hs_file) st = hs_io(e, true, r0, nr, err);
            }
            break;
        }
    }
    return st;
}

// --- the layer API ----------------------------------------------------------------------

uint32_t calib_layer_index(const struct calib_layer *ly) { return ly->il; }
uint32_t calib_layer_n_samples(const struct calib_layer *ly) { return ly->e->n_samples; }
uint32_t calib_layer_n_pos(const struct calib_layer *ly) { return ly->e->n_pos; }
uint64_t calib_layer_n_rows(const struct calib_layer *ly) { return ly->e->T; }
uint64_t calib_layer_max_rows(const struct calib_layer *ly) { return ly->e->rows_b; }

uint64_t calib_layer_group_n_in(const struct calib_layer *ly, enum calib_group g)
{
    const struct engine *e = ly->e;
    switch (g) {
    case CALIB_G_ATTN_IN:
    case CALIB_G_FFN_IN: return e->E;
    case CALIB_G_ATTN_OUT: return e->Q;
    case CALIB_G_FFN_DOWN: return ly->expert >= 0 ? e->FX : e->F;
    case CALIB_G_COUNT: break;
    }
    return 0;
}

const struct calib_group_stats *calib_layer_stats(const struct calib_layer *ly,
                                                  enum calib_group g)
{
    if (ly->expert >= 0 && (g == CALIB_G_FFN_IN || g == CALIB_G_FFN_DOWN))
        return calib_stats_expert(ly->e->st, ly->il, g, (uint32_t)ly->expert);
    return calib_stats_group(ly->e->st, ly->il, g);
}

int32_t calib_layer_expert(const struct calib_layer *ly) { return ly->expert; }
uint32_t calib_layer_n_expert(const struct calib_layer *ly) { return (uint32_t)ly->e->NX; }
uint64_t calib_layer_expert_rows(const struct calib_layer *ly)
{
    return ly->expert >= 0 ? ly->e->xn : 0;
}

static enum mw_status no_expert(const struct calib_layer *ly, const char *what,
                                struct mw_err *err)
{
    return MW_FAIL(err, MW_E_USAGE, MW_ERR_OFF_NONE, "layer %u expert %d: %s", ly->il,
                   (int)ly->expert, what);
}

/* expert ex's gate, up or down: rows of the stacked tensor */
static enum mw_status expert_weight(struct calib_layer *ly, enum calib_wkind w, bool mutable_,
                                    struct calib_weight *out, struct mw_err *err)
{
    const struct engine *e = ly->e;
    if (w != CALIB_W_GATE && w != CALIB_W_UP && w != CALIB_W_DOWN)
        return no_expert(ly, "only ffn_gate, ffn_up and ffn_down belong to an expert", err);
    if (mutable_ && (ly->stage == STAGE_NONE || (w == CALIB_W_DOWN && ly->stage != CALIB_G_FFN_DOWN)))
        return no_expert(ly, "this weight may not be changed in this stage", err);
    const int k = w == CALIB_W_GATE ? 0 : w == CALIB_W_UP ? 1 : 2;
    const enum calib_tslot t = k == 0 ? CALIB_T_GATE_EXPS : k == 1 ? CALIB_T_UP_EXPS
                                                                   : CALIB_T_DOWN_EXPS;
    const uint64_t ex = (uint64_t)ly->expert;
    out->name = ly->xnames[k];
    out->n_out = k == 2 ? e->E : e->FX;
    out->n_in = k == 2 ? e->FX : e->E;
    out->row0 = ex * out->n_out;
    out->tensor_rows = e->NX * out->n_out;
    out->w = e->w[t] + ex * out->n_out * out->n_in;
    out->bias = NULL;
    return MW_OK;
}

static void invalidate(struct calib_layer *ly, unsigned bits)
{
    for (int g = 0; g < CALIB_G_COUNT; g++)
        if (group_deps[g] & bits) {
            ly->H_valid[g] = false;
            if (ly->e->lean) { /* stale: its memory goes back before anything new */
                free(ly->H[g]);
                ly->H[g] = NULL;
            }
        }
    if (bits & group_deps[CALIB_G_ATTN_OUT]) ly->xo_stale = true;
}

static enum mw_status hand_out(struct calib_layer *ly, enum calib_tslot t, bool mutable_,
                               const char *what, struct mw_err *err)
{
    struct engine *e = ly->e;
    if (mutable_ && (ly->stage == STAGE_NONE || !(stage_mutable[ly->stage] & SLOT_BIT(t))))
        return MW_FAIL(err, MW_E_USAGE, MW_ERR_OFF_NONE,
                       "layer %u: %s may not be changed %s%s", ly->il, what,
                       ly->stage == STAGE_NONE ? "outside an on_group callback" : "in stage ",
                       ly->stage == STAGE_NONE ? "" : group_names[ly->stage]);
    if (mutable_) { /* first: the Hessians this change makes stale go (lean: freed) */
        ly->live |= SLOT_BIT(t);
        invalidate(ly, SLOT_BIT(t));
    }
    uint64_t row0;
    const enum calib_tslot o = owner_of(e, t, &row0);
    if (big_slot(o)) {
        enum mw_status s = w_resident(e, o, err);
        if (s) return s;
        if (mutable_) e->dirty[o] = true;
    }
    return MW_OK;
}

enum mw_status calib_layer_weight(struct calib_layer *ly, enum calib_wkind w, bool mutable_,
                                  struct calib_weight *out, struct mw_err *err)
{
    if ((unsigned)w >= CALIB_W_COUNT)
        return MW_FAIL(err, MW_E_USAGE, MW_ERR_OFF_NONE, "weight kind %d", (int)w);
    if (ly->expert >= 0) return expert_weight(ly, w, mutable_, out, err);
    const enum calib_tslot t = wkind_slot[w];
    if (!calib__model_has(ly->e->m, ly->il, owner_of(ly->e, t, &(uint64_t){0})))
        return MW_FAIL(err, MW_E_USAGE, MW_ERR_OFF_NONE, "layer %u has no %s", ly->il,
                       wkind_names[w]);
    enum mw_status s = hand_out(ly, t, mutable_, wkind_names[w], err);
    if (s) return s;
    const struct engine *e = ly->e;
    const enum calib_group g = wkind_group[w];
    out->name = ly->names[w];
    out->n_in = calib_layer_group_n_in(ly, g);
    out->row0 = calib_weight_tensor(e->hp, ly->il, w, NULL, 0, &out->tensor_rows);
    out->n_out = calib__slot_elems(e->hp, w == CALIB_W_UP ? CALIB_T_WGATE : t) / out->n_in;
    out->w = e->w[t];
    out->bias = e->w[wkind_bias[w]];
    return MW_OK;
}

enum mw_status calib_layer_weight_release(struct calib_layer *ly, enum calib_wkind w,
                                          struct mw_err *err)
{
    if ((unsigned)w >= CALIB_W_COUNT)
        return MW_FAIL(err, MW_E_USAGE, MW_ERR_OFF_NONE, "weight kind %d", (int)w);
    if (ly->expert >= 0) return MW_OK; /* the stacked experts stay in memory */
    uint64_t row0;
    return w_park(ly->e, owner_of(ly->e, wkind_slot[w], &row0), err);
}

enum mw_status calib_layer_norm(struct calib_layer *ly, enum calib_norm which, bool mutable_,
                                float **out, struct mw_err *err)
{
    if (which != CALIB_NORM_ATTN && which != CALIB_NORM_FFN)
        return MW_FAIL(err, MW_E_USAGE, MW_ERR_OFF_NONE, "norm kind %d", (int)which);
    const enum calib_tslot t = which == CALIB_NORM_ATTN ? CALIB_T_ATTN_NORM : CALIB_T_FFN_NORM;
    if (mutable_ && t == CALIB_T_FFN_NORM && ly->e->NX)
        return MW_FAIL(err, MW_E_USAGE, MW_ERR_OFF_NONE,
                       "layer %u: ffn_norm of a mixture-of-experts layer may not be changed "
                       "(the router and every expert read it)", ly->il);
    enum mw_status s =
        hand_out(ly, t, mutable_, which == CALIB_NORM_ATTN ? "attn_norm" : "ffn_norm", err);
    if (s) return s;
    *out = ly->e->w[t];
    return MW_OK;
}

static enum mw_status check_group(const struct calib_layer *ly, enum calib_group g,
                                  struct mw_err *err)
{
    if ((unsigned)g >= CALIB_G_COUNT)
        return MW_FAIL(err, MW_E_USAGE, MW_ERR_OFF_NONE, "group %d", (int)g);
    const bool attn = g == CALIB_G_ATTN_IN || g == CALIB_G_ATTN_OUT;
    if (ly->stage == STAGE_NONE || (int)g > ly->stage || attn == ly->ffn_phase)
        return MW_FAIL(err, MW_E_USAGE, MW_ERR_OFF_NONE,
                       "layer %u: the %s input is not available %s%s", ly->il, group_names[g],
                       ly->stage == STAGE_NONE ? "outside an on_group callback" : "in stage ",
                       ly->stage == STAGE_NONE ? "" : group_names[ly->stage]);
    return MW_OK;
}

/* Rows [row0, row0+nr) of the input of g (ATTN_OUT or FFN_DOWN), computed
 * one whole sample at a time and copied out: the GEMMs' row tiles start at
 * sample starts (mw_blas.h), so any window, aligned or not, has the bits of
 * the layer pass. */
static enum mw_status sample_rows(struct engine *e, enum calib_group g, uint64_t row0,
                                  uint64_t nr, float *dst, struct mw_err *err)
{
    const bool attn = g == CALIB_G_ATTN_OUT;
    const uint64_t w = attn ? e->Q : e->F;
    enum mw_status s;
    for (uint64_t r = row0; r < row0 + nr;) {
        const uint64_t a = r / e->n_pos * e->n_pos;
        const uint64_t b = a + e->n_pos < row0 + nr ? a + e->n_pos : row0 + nr;
        if ((s = hs_need(e, a, e->n_pos, err))) return s;
        norm_rows(e, a, e->n_pos, attn ? CALIB_T_ATTN_NORM : CALIB_T_FFN_NORM, e->xin);
        s = attn ? attention(e, e->xin, 1, e->one, e->Q, err) : swiglu(e, e->xin, e->n_pos, err);
        if (s) return s;
        memcpy(dst + (r - row0) * w, (attn ? e->one : e->g) + (r - a) * w,
               (size_t)((b - r) * w) * sizeof(float));
        r = b;
    }
    return MW_OK;
}

/* Whether X_o as stored (memory, or lean: its file) is current. */
static bool xo_current(const struct calib_layer *ly)
{
    return !ly->xo_stale && !(ly->live & group_deps[CALIB_G_ATTN_OUT]);
}

/* Rows [row0, row0+nr) of group g's current input into dst (nr, n_in);
 * nr <= rows_b. May use xin/q/k/v/S/g/u/one scratch. */
static enum mw_status group_rows(struct engine *e, enum calib_group g, uint64_t row0, uint64_t nr,
                                 float *dst, struct mw_err *err)
{
    struct calib_layer *ly = &e->ly;
    enum mw_status s = MW_OK;
    switch (g) {
    case CALIB_G_ATTN_IN:
    case CALIB_G_FFN_IN:
        if ((s = hs_need(e, row0, nr, err))) return s;
        norm_rows(e, row0, nr, g == CALIB_G_ATTN_IN ? CALIB_T_ATTN_NORM : CALIB_T_FFN_NORM, dst);
        break;
    case CALIB_G_ATTN_OUT:
        if (xo_current(ly)) {
            if (e->lean) return xo_io(e, false, row0, nr, dst, err);
            memcpy(dst, e->xo + row0 * e->Q, (size_t)(nr * e->Q) * sizeof(float));
            break;
        }
        return sample_rows(e, g, row0, nr, dst, err); /* with the current weights */
    case CALIB_G_FFN_DOWN:
        return sample_rows(e, g, row0, nr, dst, err);
    case CALIB_G_COUNT:
        break;
    }
    return s;
}

enum mw_status calib_layer_input(struct calib_layer *ly, enum calib_group g, uint64_t row0,
                                 uint64_t n_rows, const float **x, struct mw_err *err)
{
    *x = NULL;
    enum mw_status s = check_group(ly, g, err);
    if (s) return s;
    if (ly->expert >= 0) return no_expert(ly, "calib_layer_input is not available", err);
    struct engine *e = ly->e;
    if (n_rows == 0 || n_rows > e->rows_b || row0 > e->T || n_rows > e->T - row0)
        return MW_FAIL(err, MW_E_USAGE, MW_ERR_OFF_NONE,
                       "rows [%llu, +%llu) outside [0, %llu) or above %llu per call",
                       (unsigned long long)row0, (unsigned long long)n_rows,
                       (unsigned long long)e->T, (unsigned long long)e->rows_b);
    if (g == CALIB_G_ATTN_OUT && !e->lean && xo_current(ly)) {
        *x = e->xo + row0 * e->Q; /* the stored rows, no copy */
        return MW_OK;
    }
    if ((s = group_rows(e, g, row0, n_rows, e->ubuf, err))) return s;
    *x = e->ubuf;
    return MW_OK;
}

enum mw_status calib_layer_forward(struct calib_layer *ly, enum calib_group g, uint32_t sample0,
                                   uint32_t n, float *out, struct mw_err *err)
{
    enum mw_status s = check_group(ly, g, err);
    if (s) return s;
    if (ly->expert >= 0) return no_expert(ly, "calib_layer_forward is not available", err);
    struct engine *e = ly->e;
    if (n == 0 || n > e->spb || sample0 > e->n_samples || n > e->n_samples - sample0)
        return MW_FAIL(err, MW_E_USAGE, MW_ERR_OFF_NONE,
                       "samples [%u, +%u) outside [0, %u) or above %u per call", sample0, n,
                       e->n_samples, e->spb);
    const uint64_t r0 = (uint64_t)sample0 * e->n_pos, nr = (uint64_t)n * e->n_pos;
    if (g != CALIB_G_ATTN_OUT && (s = hs_need(e, r0, nr, err))) return s;
    switch (g) {
    case CALIB_G_ATTN_IN:
        norm_rows(e, r0, nr, CALIB_T_ATTN_NORM, e->xin);
        s = attention(e, e->xin, n, out, e->Q, err);
        break;
    case CALIB_G_ATTN_OUT:
        if ((s = group_rows(e, g, r0, nr, e->ubuf, err))) break;
        if ((s = linear_w(e, e->ubuf, nr, e->Q, CALIB_T_WO, CALIB_T_BO, e->E, out, e->E, err)))
            break;
        post_norm(e, CALIB_T_WO, out, nr);
        break;
    case CALIB_G_FFN_IN:
        norm_rows(e, r0, nr, CALIB_T_FFN_NORM, e->xin);
        if ((s = swiglu(e, e->xin, nr, err))) break;
        memcpy(out, e->g, (size_t)(nr * e->F) * sizeof(float));
        break;
    case CALIB_G_FFN_DOWN:
        norm_rows(e, r0, nr, CALIB_T_FFN_NORM, e->xin);
        if ((s = swiglu(e, e->xin, nr, err))) break;
        if ((s = linear_w(e, e->g, nr, e->F, CALIB_T_WDOWN, CALIB_T_BDOWN, e->E, out, e->E,
                          err)))
            break;
        post_norm(e, CALIB_T_WDOWN, out, nr);
        break;
    case CALIB_G_COUNT:
        break;
    }
    return s;
}

enum mw_status calib_layer_hidden(struct calib_layer *ly, uint64_t row0, uint64_t n_rows,
                                  const float **x, struct mw_err *err)
{
    struct engine *e = ly->e;
    *x = NULL;
    if (row0 > e->T || n_rows > e->T - row0 || (e->hs_file && n_rows > e->rows_b))
        return MW_FAIL(err, MW_E_USAGE, MW_ERR_OFF_NONE,
                       "rows [%llu, +%llu) outside [0, %llu)%s", (unsigned long long)row0,
                       (unsigned long long)n_rows, (unsigned long long)e->T,
                       e->hs_file ? " or above calib_layer_max_rows()" : "");
    if (!e->hs_file) {
        *x = e->hs + row0 * e->E;
        return MW_OK;
    }
    enum mw_status s = fio(e->hs_fd, e->hs_path, false, row0 * e->E * sizeof(float), e->hsv,
                           n_rows * e->E * sizeof(float), "hidden states", err);
    if (s) return s;
    *x = e->hsv;
    return MW_OK;
}

static void expert_chunk(struct engine *e, uint64_t c0, uint64_t n, bool act);

/* H of the rows routed to the current expert (recomputed on every call:
 * the expert's weights are the callback's to change) */
static enum mw_status expert_hessian(struct calib_layer *ly, enum calib_group g,
                                     struct mw_err *err)
{
    struct engine *e = ly->e;
    if (g != CALIB_G_FFN_IN && g != CALIB_G_FFN_DOWN)
        return no_expert(ly, "only the gate/up and down inputs have a Hessian", err);
    const uint64_t n = g == CALIB_G_FFN_IN ? e->E : e->FX;
    free(ly->H[g]);
    bool ok = true;
    ly->H[g] = alloc_f2(n, n, &ok);
    ly->H_valid[g] = false;
    if (!ok)
        return MW_FAIL(err, MW_E_NOMEM, MW_ERR_OFF_NONE, "%llu x %llu Hessian of layer %u expert %d",
                       (unsigned long long)n, (unsigned long long)n, ly->il, (int)ly->expert);
    if (e->xn == 0) memset(ly->H[g], 0, (size_t)(n * n) * sizeof(float));
    for (uint64_t c0 = 0; c0 < e->xn; c0 += XCHUNK) {
        const uint64_t nr = e->xn - c0 < XCHUNK ? e->xn - c0 : XCHUNK;
        expert_chunk(e, c0, nr, g == CALIB_G_FFN_DOWN);
        const double t0 = mw_now_s();
        mw_gram_acc(e->pool, n, nr, g == CALIB_G_FFN_IN ? e->xe : e->ge, n, c0 == 0, ly->H[g],
                    XCHUNK);
        e->st->tm.hess_s += mw_now_s() - t0;
        const double nb = (double)((n + MW_BLAS_TILE_N - 1) / MW_BLAS_TILE_N);
        e->st->tm.hess_flop += nb * (nb + 1.0) * (double)MW_BLAS_TILE_N * MW_BLAS_TILE_N *
                               (double)nr;
    }
    if (e->xn) mw_sym_lower_from_upper(ly->H[g], n);
    return MW_OK;
}

static enum mw_status hessian(struct calib_layer *ly, enum calib_group g, struct mw_err *err)
{
    enum mw_status s = check_group(ly, g, err);
    if (s) return s;
    if (ly->expert >= 0) return expert_hessian(ly, g, err);
    struct engine *e = ly->e;
    const uint64_t n = calib_layer_group_n_in(ly, g);
    if (ly->H[g] && ly->H_valid[g] && !(ly->live & group_deps[g])) return MW_OK;
    if (!ly->H[g]) {
        /* under --max-memory the plan has room for ONE Hessian of the widest
         * group: release the others first (their views become invalid) */
        if (e->max_memory || e->lean)
            for (int o = 0; o < CALIB_G_COUNT; o++) {
                free(ly->H[o]);
                ly->H[o] = NULL;
                ly->H_valid[o] = false;
            }
        bool ok = true;
        uint64_t nn;
        if (!mw_mul_u64(n, n, &nn)) ok = false;
        ly->H[g] = alloc_f(nn, &ok);
        if (!ok)
            return MW_FAIL(err, MW_E_NOMEM, MW_ERR_OFF_NONE,
                           "%llu x %llu Hessian of layer %u %s", (unsigned long long)n,
                           (unsigned long long)n, ly->il, group_names[g]);
    }
    float *Hm = ly->H[g];
    for (uint32_t s0 = 0; s0 < e->n_samples; s0 += e->spb) {
        const uint32_t ns = batch_samples(e, s0);
        const uint64_t r0 = (uint64_t)s0 * e->n_pos, nr = (uint64_t)ns * e->n_pos;
        const float *X;
        if (g == CALIB_G_ATTN_OUT && !e->lean && xo_current(ly)) {
            X = e->xo + r0 * e->Q;
        } else {
            if ((s = group_rows(e, g, r0, nr, e->ubuf, err))) return s;
            X = e->ubuf;
        }
        const double t0 = mw_now_s();
        mw_gram_acc(e->pool, n, nr, X, n, s0 == 0, Hm, e->n_pos);
        e->st->tm.hess_s += mw_now_s() - t0;
        /* the upper 256-blocks: nb (nb + 1) / 2 tiles of 2 x 256² x nr */
        const double nb = (double)((n + MW_BLAS_TILE_N - 1) / MW_BLAS_TILE_N);
        e->st->tm.hess_flop += nb * (nb + 1.0) * (double)MW_BLAS_TILE_N * MW_BLAS_TILE_N *
                               (double)nr;
    }
    mw_sym_lower_from_upper(Hm, n);
    ly->H_valid[g] = !(ly->live & group_deps[g]);
    return MW_OK;
}

enum mw_status calib_layer_hessian(struct calib_layer *ly, enum calib_group g, const float **H,
                                   struct mw_err *err)
{
    *H = NULL;
    enum mw_status s = hessian(ly, g, err);
    if (s) return s;
    *H = ly->H[g];
    return MW_OK;
}

enum mw_status calib_layer_hessian_take(struct calib_layer *ly, enum calib_group g, float **H,
                                        struct mw_err *err)
{
    *H = NULL;
    enum mw_status s = hessian(ly, g, err);
    if (s) return s;
    *H = ly->H[g];
    ly->H[g] = NULL;
    ly->H_valid[g] = false;
    return MW_OK;
}

// --- run --------------------------------------------------------------------------------

static double since_start(const struct engine *e) { return mw_now_s() - e->t_start; }

static void stage_ev(const struct engine *e, const char *name, bool end, uint32_t layer)
{
    if (!e->on_stage) return;
    const struct calib_stage_event ev = {.stage = name, .end = end, .layer = layer,
                                         .n_layer = e->hp->n_layer,
                                         .first_layer = e->first_layer,
                                         .layers_done = e->layers_done,
                                         .seconds = since_start(e)};
    e->on_stage(e->on_stage_ud, &ev);
}

static enum mw_status call_group(struct engine *e, const struct calib_run_opts *o,
                                 enum calib_group g, struct mw_err *err)
{
    struct calib_layer *ly = &e->ly;
    ly->stage = (int)g;
    ly->live = 0;
    const double t0 = mw_now_s();
    enum mw_status s = o->on_group(o->on_group_ud, ly, g, err);
    e->st->tm.callback_s += mw_now_s() - t0;
    ly->stage = STAGE_NONE;
    ly->live = 0;
    if (!s) s = park_all(e, err); /* lean: what the callback held goes back */
    return s;
}

static void free_layer(struct engine *e)
{
    for (int t = 0; t < CALIB_T_COUNT; t++) {
        free(e->wown[t]);
        e->wown[t] = e->w[t] = NULL;
        e->dirty[t] = false;
    }
    for (int g = 0; g < CALIB_G_COUNT; g++) {
        free(e->ly.H[g]);
        e->ly.H[g] = NULL;
        e->ly.H_valid[g] = false;
    }
    free(e->xo);
    e->xo = NULL;
    moe_free(e);
}

/* The layer's tensors as f32: in memory, or (lean) the big weights written
 * to the weights file one at a time and freed. */
static enum mw_status load_layer(struct engine *e, uint32_t il, struct mw_err *err)
{
    enum mw_status s;
    for (int t = 0; t < CALIB_T_COUNT; t++) {
        if (!calib__model_has(e->m, il, (enum calib_tslot)t)) continue;
        const uint64_t n = calib__slot_elems(e->hp, (enum calib_tslot)t);
        bool ok = true;
        e->wown[t] = e->w[t] = alloc_f(n, &ok);
        if (!ok) return MW_FAIL(err, MW_E_NOMEM, MW_ERR_OFF_NONE, "layer %u weights", il);
        if ((s = calib__model_load(e->m, il, (enum calib_tslot)t, e->w[t], n, err))) return s;
        if (e->lean && big_slot((enum calib_tslot)t)) {
            e->dirty[t] = true;
            if ((s = w_park(e, (enum calib_tslot)t, err))) return s;
        }
    }
    /* fused tensors: the parts are row ranges (views) of the loaded tensor */
    set_views(e);
    return MW_OK;
}

// --- mixture of experts --------------------------------------------------
/*
 * A MoE layer's FFN (llama.cpp's build_moe_ffn, as runtime/rt.h): after the
 * attention residual, one pass over the batches normalizes every row
 * (statistics of ffn_gate_inp's input), runs the f32 router and routes each
 * row (rt_moe_route: softmax, top-k in ggml's argsort order, renormalized
 * for llama / qwen3moe); qwen2moe's shared expert adds sigmoid(gate) times
 * its output. Then expert by expert (ascending): the rows routed to it, in
 * row order, in chunks of XCHUNK rows (a fixed tiling: the same bits for any
 * batch size and thread count), their statistics (gate/up input, then
 * act(gate) * up), the expert's output times the row's routing weight added
 * to the FFN output. Only after the last expert does the FFN output join the
 * residual stream (every expert reads the same normed rows). Sums run in a
 * fixed order: the shared expert first, then the experts by index (llama.cpp
 * adds the k selected experts in slot order: the last bits may differ).
 * With an on_group callback, per expert: on_group(FFN_IN) with the expert's
 * statistics, then its down input, on_group(FFN_DOWN), then its output, from
 * the weights as the callbacks left them (calib_layer_expert tells which).
 */

/* Y (nr, n_out) = X W^T with the expert chunks' fixed tiling */
static void xlinear(struct engine *e, const float *X, uint64_t nr, uint64_t n_in, const float *W,
                    uint64_t n_out, float *Y)
{
    const double t0 = mw_now_s();
    mw_gemm(e->pool, false, true, nr, n_out, n_in, 1.0f, X, n_in, W, n_in, 0.0f, Y, n_out, XCHUNK);
    e->st->tm.gemm_s += mw_now_s() - t0;
    e->st->tm.gemm_flop += 2.0 * (double)nr * (double)n_in * (double)n_out;
}

/* rows [c0, c0 + n) of the current expert's list: xe = their normed input;
 * with act also ge = act(xe Wgate^T) * (xe Wup^T) */
static void expert_chunk(struct engine *e, uint64_t c0, uint64_t n, bool act)
{
    struct row_job J = {.e = e, .op = OP_GNORM, .n_rows = n, .n = e->E, .dst = e->xe,
                        .w = e->w[CALIB_T_FFN_NORM], .idx = e->xrow + c0};
    mw_pool_run(e->pool, row_task, &J);
    if (!act) return;
    const uint64_t ex = (uint64_t)e->ly.expert, m = e->FX * e->E;
    xlinear(e, e->xe, n, e->E, e->w[CALIB_T_GATE_EXPS] + ex * m, e->FX, e->ge);
    xlinear(e, e->xe, n, e->E, e->w[CALIB_T_UP_EXPS] + ex * m, e->FX, e->ue);
    run_rows(e, OP_SWIGLU, n, e->FX, e->ge, e->ue, NULL, 0);
}

/* acc[row] += weight * (ge Wdown^T) for chunk rows [c0, c0 + n) */
static void expert_out(struct engine *e, uint64_t c0, uint64_t n)
{
    const uint64_t ex = (uint64_t)e->ly.expert;
    xlinear(e, e->ge, n, e->FX, e->w[CALIB_T_DOWN_EXPS] + ex * e->E * e->FX, e->E, e->ye);
    for (uint64_t i = 0; i < n; i++) {
        float *o = e->acc + e->xrow[c0 + i] * e->E;
        const float *y = e->ye + i * e->E, w = e->xw[c0 + i];
        for (uint64_t j = 0; j < e->E; j++) o[j] += w * y[j];
    }
}

/* the rows routed to expert ex, ascending, with their weights */
static void expert_rows(struct engine *e, uint64_t ex)
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
static void moe_route(struct engine *e, uint64_t r0, uint64_t nr)
{
    linear(e, e->xin, nr, e->E, e->w[CALIB_T_GATE_INP], NULL, e->NX, e->lg, e->NX);
    for (uint64_t r = 0; r < nr; r++)
        rt_moe_route(e->lg + r * e->NX, (uint32_t)e->NX, (uint32_t)e->K, e->hp->moe_norm_w,
                     e->ridx, e->sel + (r0 + r) * e->K, e->wt + (r0 + r) * e->K);
    if (e->F) linear(e, e->xin, nr, e->E, e->w[CALIB_T_GATE_INP_SHEXP], NULL, 1, e->sgate + r0, 1);
}

/* the shared expert on batch rows [r0, r0 + nr) (normed in xin): its down
 * input's statistics (stats), and (out) its gated output into acc */
static enum mw_status shexp_rows(struct engine *e, uint64_t r0, uint64_t nr, bool stats, bool out,
                                 struct mw_err *err)
{
    enum mw_status s = swiglu(e, e->xin, nr, err);
    if (s) return s;
    if (stats) accum(e, CALIB_G_FFN_DOWN, e->g, nr);
    if (!out) return MW_OK;
    if ((s = linear_w(e, e->g, nr, e->F, CALIB_T_WDOWN, CALIB_T_BDOWN, e->E, e->y, e->E, err)))
        return s;
    for (uint64_t r = 0; r < nr; r++) {
        const float gt = rt_moe_shexp_gate(e->sgate[r0 + r]);
        float *o = e->acc + (r0 + r) * e->E;
        const float *y = e->y + r * e->E;
        for (uint64_t j = 0; j < e->E; j++) o[j] += gt * y[j];
    }
    return MW_OK;
}

static enum mw_status call_group(struct engine *e, const struct calib_run_opts *o,
                                 enum calib_group g, struct mw_err *err);

static void moe_free(struct engine *e)
{
    free(e->sel);
    free(e->wt);
    free(e->sgate);
    free(e->acc);
    free(e->xrow);
    free(e->xw);
    e->sel = NULL;
    e->wt = e->sgate = e->acc = e->xw = NULL;
    e->xrow = NULL;
    e->xn = 0;
}

/* The FFN of a MoE layer (see above); cb: with on_group callbacks. */
static enum mw_status moe_ffn(struct engine *e, const struct calib_run_opts *o, bool cb,
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
    e->wt = alloc_f(tk, &ok);
    if (shexp) e->sgate = alloc_f(e->T, &ok);
    e->xw = alloc_f(e->T, &ok);
    e->xrow = ok && e->T <= SIZE_MAX / sizeof(uint64_t) ? malloc((size_t)e->T * sizeof(uint64_t))
                                                        : NULL;
    if (!e->xrow) ok = false;
    uint64_t te = 0;
    if (!mw_mul_u64(e->T, e->E, &te) || te > SIZE_MAX / sizeof(float)) ok = false;
    if (ok) e->acc = calloc((size_t)te, sizeof(float));
    if (!ok || !e->acc) {
        moe_free(e);
        return MW_FAIL(err, MW_E_NOMEM, MW_ERR_OFF_NONE,
                       "layer %u: routing and FFN output of %llu rows", il,
                       (unsigned long long)e->T);
    }
    if (cb) stage_ev(e, "ffn_in", false, il);
    /* the router's input, the routing (and without callbacks the shared expert) */
    for (uint32_t s0 = 0; s0 < e->n_samples && !s; s0 += e->spb) {
        const uint64_t r0 = (uint64_t)s0 * e->n_pos, nr = (uint64_t)batch_samples(e, s0) * e->n_pos;
        norm_rows(e, r0, nr, CALIB_T_FFN_NORM, e->xin);
        accum(e, CALIB_G_FFN_IN, e->xin, nr);
        moe_route(e, r0, nr);
        if (shexp && !cb) s = shexp_rows(e, r0, nr, true, true, err);
    }
    if (!s && cb && shexp) s = call_group(e, o, CALIB_G_FFN_IN, err);
    if (cb) {
        stage_ev(e, "ffn_in", true, il);
        stage_ev(e, "ffn_down", false, il);
    }
    for (int pass = 0; cb && shexp && pass < 2 && !s; pass++) {
        for (uint32_t s0 = 0; s0 < e->n_samples && !s; s0 += e->spb) {
            const uint64_t r0 = (uint64_t)s0 * e->n_pos;
            const uint64_t nr = (uint64_t)batch_samples(e, s0) * e->n_pos;
            norm_rows(e, r0, nr, CALIB_T_FFN_NORM, e->xin);
            s = shexp_rows(e, r0, nr, pass == 0, pass == 1, err);
        }
        if (!s && pass == 0) s = call_group(e, o, CALIB_G_FFN_DOWN, err);
    }
    for (uint64_t ex = 0; ex < e->NX && !s; ex++) {
        expert_rows(e, ex);
        ly->expert = (int32_t)ex;
        if (!cb) {
            for (uint64_t c0 = 0; c0 < e->xn; c0 += XCHUNK) {
                const uint64_t n = e->xn - c0 < XCHUNK ? e->xn - c0 : XCHUNK;
                expert_chunk(e, c0, n, true);
                accum_x(e, CALIB_G_FFN_IN, ex, e->xe, n);
                accum_x(e, CALIB_G_FFN_DOWN, ex, e->ge, n);
                expert_out(e, c0, n);
            }
        } else {
            for (uint64_t c0 = 0; c0 < e->xn; c0 += XCHUNK) {
                const uint64_t n = e->xn - c0 < XCHUNK ? e->xn - c0 : XCHUNK;
                expert_chunk(e, c0, n, false);
                accum_x(e, CALIB_G_FFN_IN, ex, e->xe, n);
            }
            if ((s = call_group(e, o, CALIB_G_FFN_IN, err))) break;
            for (uint64_t c0 = 0; c0 < e->xn; c0 += XCHUNK) {
                const uint64_t n = e->xn - c0 < XCHUNK ? e->xn - c0 : XCHUNK;
                expert_chunk(e, c0, n, true);
                accum_x(e, CALIB_G_FFN_DOWN, ex, e->ge, n);
            }
            if ((s = call_group(e, o, CALIB_G_FFN_DOWN, err))) break;
            for (uint64_t c0 = 0; c0 < e->xn; c0 += XCHUNK) {
                const uint64_t n = e->xn - c0 < XCHUNK ? e->xn - c0 : XCHUNK;
                expert_chunk(e, c0, n, true);
                expert_out(e, c0, n);
            }
        }
        ly->expert = -1;
    }
    ly->expert = -1;
    if (!s) /* the FFN output joins the residual stream */
        for (uint32_t s0 = 0; s0 < e->n_samples; s0 += e->spb) {
            const uint64_t r0 = (uint64_t)s0 * e->n_pos;
            const uint64_t nr = (uint64_t)batch_samples(e, s0) * e->n_pos;
            run_rows(e, OP_ADD, nr, e->E, hs_at(e, r0), e->acc + r0 * e->E, NULL, 0);
        }
    if (cb && !s) stage_ev(e, "ffn_down", true, il);
    moe_free(e);
    return s;
}

static enum mw_status run_layer(struct engine *e, uint32_t il, const struct calib_run_opts *o,
                                struct mw_err *err)
{
    enum mw_status s = MW_OK;
    struct calib_layer *ly = &e->ly;
    memset(ly, 0, sizeof *ly);
    ly->e = e;
    ly->il = il;
    ly->stage = STAGE_NONE;
    ly->expert = -1;
    static const char *const xn[3] = {"ffn_gate_exps", "ffn_up_exps", "ffn_down_exps"};
    for (int k = 0; k < 3; k++)
        snprintf(ly->xnames[k], sizeof ly->xnames[k], "blk.%u.%s.weight", il, xn[k]);
    for (int w = 0; w < CALIB_W_COUNT; w++)
        calib_weight_tensor(e->hp, il, (enum calib_wkind)w, ly->names[w], sizeof ly->names[w],
                            NULL);
    if ((s = load_layer(e, il, err))) return s;
    e->swa_l = rt_layer_is_swa(e->hp, il);
    e->rope_l = e->swa_l && e->rope_swa ? e->rope_swa : e->rope;
    if (!o->on_group) {
        stage_ev(e, "forward", false, il);
        if ((s = pass_fused(e, e->NX > 0, err))) return s;
        ly->ffn_phase = true;
        if (e->NX && (s = moe_ffn(e, o, false, err))) return s;
        stage_ev(e, "forward", true, il);
    } else {
        stage_ev(e, "attn_in", false, il);
        if ((s = pass_stage(e, P_A, err))) return s;
        if ((s = call_group(e, o, CALIB_G_ATTN_IN, err))) return s;
        stage_ev(e, "attn_in", true, il);
        stage_ev(e, "attn_out", false, il);
        if (!e->lean) {
            bool ok = true;
            e->xo = alloc_f2(e->T, e->Q, &ok);
            if (!ok)
                return MW_FAIL(err, MW_E_NOMEM, MW_ERR_OFF_NONE,
                               "%llu x %llu attention outputs of layer %u",
                               (unsigned long long)e->T, (unsigned long long)e->Q, il);
        }
        if ((s = pass_stage(e, P_B, err))) return s;
        ly->xo_stale = false;
        if ((s = call_group(e, o, CALIB_G_ATTN_OUT, err))) return s;
        if (ly->xo_stale && (s = pass_stage(e, P_B_AGAIN, err))) return s;
        ly->xo_stale = false;
        if ((s = pass_stage(e, P_C, err))) return s;
        free(e->xo);
        e->xo = NULL;
        stage_ev(e, "attn_out", true, il);
        ly->ffn_phase = true;
        if (e->NX) {
            if ((s = moe_ffn(e, o, true, err))) return s;
            goto layer_end;
        }
        stage_ev(e, "ffn_in", false, il);
        if ((s = pass_stage(e, P_D, err))) return s;
        if ((s = call_group(e, o, CALIB_G_FFN_IN, err))) return s;
        stage_ev(e, "ffn_in", true, il);
        stage_ev(e, "ffn_down", false, il);
        if ((s = pass_stage(e, P_E, err))) return s;
        if ((s = call_group(e, o, CALIB_G_FFN_DOWN, err))) return s;
        if ((s = pass_stage(e, P_F, err))) return s;
        stage_ev(e, "ffn_down", true, il);
    }
layer_end:
    stage_ev(e, "layer", false, il);
    if (o->on_layer) {
        ly->stage = STAGE_NONE;
        if ((s = o->on_layer(o->on_layer_ud, ly, err))) return s;
    }
    return MW_OK;
}

static enum mw_status alloc_stats(struct engine *e, struct mw_err *err)
{
    struct calib_stats *st = calloc(1, sizeof *st);
    if (!st) return MW_FAIL(err, MW_E_NOMEM, MW_ERR_OFF_NONE, "statistics");
    e->st = st;
    st->n_layer = e->hp->n_layer;
    st->fused_qkv = e->hp->fused_qkv;
    st->fused_gate_up = e->hp->fused_gate_up;
    st->n_samples = e->n_samples;
    st->n_pos = e->n_pos;
    const uint64_t n_in[CALIB_G_COUNT] = {e->E, e->Q, e->E, e->F};
    uint64_t per_layer = 0;
    for (int g = 0; g < CALIB_G_COUNT; g++) per_layer += 2 * n_in[g];
    uint64_t total, bytes;
    size_t sz;
    st->g = calloc((size_t)st->n_layer * CALIB_G_COUNT, sizeof *st->g);
    if (!st->g || !mw_mul_u64(per_layer, st->n_layer, &total) ||
        !mw_mul_u64(total, sizeof(double), &bytes) || !mw_u64_to_size(bytes, &sz) ||
        !(st->buf = calloc(1, sz ? sz : 1)))
        return MW_FAIL(err, MW_E_NOMEM, MW_ERR_OFF_NONE, "statistics");
    double *p = st->buf;
    for (uint32_t il = 0; il < st->n_layer; il++)
        for (int g = 0; g < CALIB_G_COUNT; g++) {
            struct calib_group_stats *gs = &st->g[(uint64_t)il * CALIB_G_COUNT + g];
            gs->n_in = n_in[g];
            gs->sum_sq = p;
            p += n_in[g];
            gs->sum_abs = p;
            p += n_in[g];
        }
    /* MoE: per expert, the gate/up input (E) and the down input (FX) */
    st->n_expert = (uint32_t)e->NX;
    st->shexp = e->NX && e->F;
    if (e->NX) {
        uint64_t ng, xf, xb;
        if (!mw_mul_u64((uint64_t)st->n_layer * 2, e->NX, &ng) ||
            !mw_mul_u64(e->E + e->FX, 2 * e->NX, &xf) || !mw_mul_u64(xf, st->n_layer, &xf) ||
            !mw_mul_u64(xf, sizeof(double), &xb) || !mw_u64_to_size(xb, &sz) ||
            ng > SIZE_MAX / sizeof *st->xg || !(st->xg = calloc((size_t)ng, sizeof *st->xg)) ||
            !(st->xbuf = calloc(1, sz ? sz : 1)))
            return MW_FAIL(err, MW_E_NOMEM, MW_ERR_OFF_NONE, "expert statistics");
        double *q = st->xbuf;
        for (uint64_t i = 0; i < ng; i++) {
            struct calib_group_stats *gs = &st->xg[i];
            gs->n_in = (i / e->NX) % 2 ? e->FX : e->E;
            gs->sum_sq = q;
            q += gs->n_in;
            gs->sum_abs = q;
            q += gs->n_in;
        }
    }
    return MW_OK;
}

/* hs = token_embd[tokens]; the embedding is streamed once, only the rows
 * that occur are kept. */
static enum mw_status embed(struct engine *e, struct mw_err *err)
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
    float *rows = alloc_f2(n_ids, e->E, &ok);
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
            memcpy(hs_at(e, r0 + p), rows + (uint64_t)slot[t[p]] * e->E,
                   (size_t)e->E * sizeof(float));
        if (e->hs_file && (s = hs_io(e, true, r0, e->n_pos, err))) goto done;
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
static enum mw_status rope_tables(struct engine *e, bool *ok, struct mw_err *err)
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
        ff = alloc_f(hp->n_rot / 2, ok);
        if (!*ok) return MW_FAIL(err, MW_E_NOMEM, MW_ERR_OFF_NONE, "rope frequency factors");
        st = calib__model_has_rope_freqs(m) ? calib__model_rope_freqs(m, ff, err)
                                            : calib__model_rope_factors(m, pf.long_factors, ff,
                                                                        err);
        if (st) goto done;
    }
    if (two) {
        e->rope_swa = alloc_f2(e->n_pos, hp->n_rot, ok);
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

static void engine_free(struct engine *e)
{
    free_layer(e);
    mw_pool_free(e->pool);
    free(e->hs);
    free(e->hsb);
    free(e->hsv);
    free(e->panel);
    if (e->hs_fd >= 0) close(e->hs_fd);
    if (e->xo_fd >= 0) close(e->xo_fd);
    if (e->w_fd >= 0) close(e->w_fd);
    e->hs_fd = e->xo_fd = e->w_fd = -1;
    free(e->rope);
    free(e->rope_swa);
    free(e->xin);
    free(e->q);
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
    calib_stats_free(e->st);
}

static void engine_dims(struct engine *e, const struct calib_model *m,
                        const struct calib_samples *s, const struct calib_run_opts *o)
{
    const struct rt_hparams *hp = calib_model_hparams(m);
    e->m = m;
    e->hp = hp;
    e->s = s;
    e->n_samples = calib_samples_count(s);
    e->n_pos = calib_samples_n_pos(s);
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
    e->hs_fd = e->xo_fd = e->w_fd = -1;
    /* gemma / phi3 scale the queries after RoPE and give the softmax 1
     * (rt_attn_scales); llama / qwen: 1/sqrt(head_dim) in the softmax */
    rt_attn_scales(hp, &e->q_mul, &e->kq_scale);
}

static uint64_t max3(uint64_t a, uint64_t b, uint64_t c)
{
    const uint64_t m = a > b ? a : b;
    return m > c ? m : c;
}

/* What calib_run allocates, in bytes (long double: exact for any real
 * model, and absurd sizes are caught by the caller's range check). */
struct mem_plan {
    long double fixed;   /* statistics, RoPE table, one sample's attention output */
    long double hs;      /* hidden states T x E (in memory, or in the scratch file) */
    long double per_smp; /* batch scratch per sample of the batch */
    long double hsb;     /* per sample of the batch, lean: hidden states (hsb, and
                          * calib_layer_hidden's buffer when there are callbacks) */
    long double attn;    /* n_pos^2 attention scores per thread */
    long double embed;   /* transient, before the layers: vocabulary map, embedding rows */
    long double layer;   /* per layer: weights, norms, biases; X_o (T x Q) and one
                          * Hessian of the widest group when there is a callback */
    long double lean;    /* per layer, lean: norms, biases, the panel, the resident
                          * weights and one Hessian (see calib.h) */
};

/* Rows of a lean panel for a weight of n_in columns (a multiple of 256:
 * whole mw_gemm tiles), and the panel buffer's floats: 64 MiB, at least 256
 * rows of the widest input, no more than the largest weight needs. */
static uint64_t panel_rows(uint64_t n_in)
{
    const uint64_t r = (((uint64_t)64 << 20) / sizeof(float)) / n_in / MW_BLAS_TILE_N *
                       MW_BLAS_TILE_N;
    return r > MW_BLAS_TILE_N ? r : MW_BLAS_TILE_N;
}
static uint64_t panel_floats(const struct engine *e)
{
    const uint64_t shape[4][2] = {{e->Q > e->KV ? e->Q : e->KV, e->E}, /* q, k, v */
                                  {e->E, e->Q},                           /* o */
                                  {e->F, e->E},                           /* gate, up */
                                  {e->E, e->F}};                          /* down */
    uint64_t f = 0;
    for (int i = 0; i < 4; i++) {
        if (shape[i][0] == 0 || shape[i][1] == 0) continue; /* MoE without a shared expert */
        const uint64_t pr = panel_rows(shape[i][1]);
        const uint64_t rows = shape[i][0] < pr ? shape[i][0] : pr;
        if (rows * shape[i][1] > f) f = rows * shape[i][1];
    }
    return f;
}

static struct mem_plan mem_plan_of(const struct engine *e, const struct calib_run_opts *o)
{
    struct mem_plan p;
    const long double T = (long double)e->T, P = e->n_pos, E = (long double)e->E;
    const long double Q = (long double)e->Q, KV = (long double)e->KV, F = (long double)e->F;
    const long double L = e->hp->n_layer;
    const long double widest = (long double)max3(e->E, e->Q, e->F > e->FX ? e->F : e->FX);
    const long double NX = (long double)e->NX, FX = (long double)e->FX, K = (long double)e->K;
    const bool cb = o->on_group || o->on_layer;
    p.fixed = 8.0L * L * 2.0L * (2.0L * E + Q + F) +
              L * CALIB_G_COUNT * (long double)sizeof(struct calib_group_stats) +
              (long double)sizeof(struct calib_stats) +
              (e->hp->n_swa ? 8.0L : 4.0L) * P * e->hp->n_rot + 4.0L * P * Q;
    p.hs = 4.0L * T * E;
    /* xin, q, k, v, att, g, u, y, ubuf: rows_b rows each */
    p.per_smp = 4.0L * P * (E + Q + 2.0L * KV + Q + 2.0L * F + E + widest);
    p.hsb = 4.0L * P * E * (cb ? 2.0L : 1.0L);
    p.attn = 4.0L * P * P;
    const long double n_ids = T < e->hp->n_vocab ? T : (long double)e->hp->n_vocab;
    p.embed = 4.0L * e->hp->n_vocab + 4.0L * n_ids + 1.0L + 4.0L * n_ids * E + 2.0L * e->hp->n_rot;
    /* weights + every optional bias + the two norms */
    const long double small = 4.0L * ((Q + 2.0L * KV + E + 2.0L * F + E) + 2.0L * E +
                                      2.0L * e->hd + 2.0L * E);
    p.layer = 4.0L * (2.0L * Q * E + 2.0L * KV * E + 3.0L * F * E) + small;
    if (o->on_group) p.layer += 4.0L * T * Q + 4.0L * widest * widest;
    if (e->NX) {
        /* MoE: expert statistics, chunk scratch; per batch row the router
         * logits; per layer the router, the stacked experts, the shared gate,
         * and per row its routing, gate logit, FFN output and expert list */
        p.fixed += 16.0L * L * NX * (E + FX) +
                   L * 2.0L * NX * (long double)sizeof(struct calib_group_stats) +
                   4.0L * XCHUNK * (2.0L * E + 2.0L * FX) + 4.0L * NX;
        p.per_smp += 4.0L * P * NX;
        p.layer += 4.0L * (3.0L * NX * FX * E + NX * E + E) + T * (8.0L * K + 4.0L * E + 16.0L);
    }
    /* lean: the weights one tensor at a time (the largest two when a callback
     * holds a fold's pair), one Hessian with the largest weight reading it */
    long double w[4] = {e->hp->fused_qkv ? 4.0L * (Q + 2.0L * KV) * E : 4.0L * Q * E, /* q/k/v */
                        4.0L * E * Q,                                             /* o */
                        e->hp->fused_gate_up ? 8.0L * F * E : 4.0L * F * E,       /* gate/up */
                        4.0L * E * F};                                            /* down */
    const long double n_in[4] = {E, Q, E, F};
    long double w1 = 0, w2 = 0, hw = 0;
    for (int g = 0; g < 4; g++) {
        if (w[g] > w1) {
            w2 = w1;
            w1 = w[g];
        } else if (w[g] > w2) {
            w2 = w[g];
        }
        const long double x = 4.0L * n_in[g] * n_in[g] + w[g];
        if (x > hw) hw = x;
    }
    if (!e->hp->fused_gate_up && 4.0L * F * E > w2) w2 = 4.0L * F * E; /* gate + up */
    long double held = w1;
    if (o->on_group) {
        held = hw;
        if (w1 + w2 + 4.0L * E * E > held) held = w1 + w2 + 4.0L * E * E;
    }
    p.lean = small + 4.0L * (long double)panel_floats(e) + held;
    return p;
}

static long double mem_plan_bytes(const struct mem_plan *p, bool file, uint32_t spb,
                                  unsigned n_threads)
{
    const long double lay = file ? p->lean : p->layer;
    const long double phase = p->embed > lay ? p->embed : lay;
    return p->fixed + (file ? p->hsb * spb : p->hs) + p->per_smp * spb + p->attn * n_threads +
           phase;
}

static uint64_t ld_bytes(long double b) { return b >= 1.8e19L ? UINT64_MAX : (uint64_t)b; }

/* Largest spb <= want with the plan within max (1 thread), 0 if none. */
static uint32_t fit_spb(const struct mem_plan *p, bool file, uint32_t want, long double max)
{
    const long double room = max - mem_plan_bytes(p, file, 0, 1);
    const long double per = p->per_smp + (file ? p->hsb : 0);
    const long double fit = room > 0 ? room / per : 0;
    return fit >= want ? want : (uint32_t)fit;
}

/* Samples per batch under opt->max_memory, and whether the run is lean
 * (hidden states, attention outputs and weights in scratch files). In
 * memory first: the requested batch, else fewer samples per batch; then
 * lean (o->lean: lean at once). The choice ignores the thread count (the
 * results do not depend on it anyway); the per-thread attention scratch is
 * then checked on top. 0: the bound cannot be met (err, which may be NULL,
 * says why and what to change). */
static uint32_t choose_spb(const struct engine *e, const struct calib_run_opts *o, bool *file,
                           struct mw_err *err)
{
    const struct mem_plan p = mem_plan_of(e, o);
    const long double max = (long double)o->max_memory;
    const unsigned nt = o->n_threads ? o->n_threads : 1;
    *file = o->lean;
    if (!o->max_memory) return e->spb;
    uint32_t spb = 0;
    if (!o->lean) {
        if (mem_plan_bytes(&p, false, e->spb, nt) <= max) return e->spb;
        spb = fit_spb(&p, false, e->spb, max);
    }
    if (spb == 0) {
        spb = fit_spb(&p, true, e->spb, max);
        *file = true;
    }
    if (spb == 0 || mem_plan_bytes(&p, *file, spb, nt) > max) {
        mw_err_clear(err); /* not about a file read earlier */
        mw_err_set_path(err, calib_model_path(e->m));
    }
    if (spb == 0) {
        const long double least = mem_plan_bytes(&p, true, 1, 1);
        MW_FAIL(err, MW_E_NOMEM, MW_ERR_OFF_NONE,
                "calibration needs at least %llu bytes (%.1f MiB: tables %.1f MiB, a layer "
                "%.1f MiB (%s), a sample per batch %.1f MiB), above --max-memory %llu bytes: "
                "use fewer --samples or a shorter --seq-len, or raise --max-memory",
                (unsigned long long)ld_bytes(least), (double)(least / 1048576.0L),
                (double)(p.fixed / 1048576.0L), (double)(p.lean / 1048576.0L),
                o->on_group ? "lean: the largest Hessian and its weight" : "lean: one weight",
                (double)((p.per_smp + p.hsb) / 1048576.0L), (unsigned long long)o->max_memory);
        return 0;
    }
    if (mem_plan_bytes(&p, *file, spb, nt) > max) {
        MW_FAIL(err, MW_E_NOMEM, MW_ERR_OFF_NONE,
                "with %u threads the attention scratch (%.1f MiB) does not fit in --max-memory "
                "%llu bytes (%.1f MiB) next to %u samples per batch: use fewer --threads, or "
                "raise --max-memory to %llu bytes",
                nt, (double)(p.attn * nt / 1048576.0L), (unsigned long long)o->max_memory,
                (double)(max / 1048576.0L), spb,
                (unsigned long long)ld_bytes(mem_plan_bytes(&p, *file, spb, nt)));
        return 0;
    }
    return spb;
}

uint64_t calib_run_peak_bytes(const struct calib_model *m, const struct calib_samples *s,
                              const struct calib_run_opts *o)
{
    struct engine e = {0};
    struct calib_run_opts opt = {0};
    if (o) opt = *o;
    engine_dims(&e, m, s, &opt);
    bool file = false;
    const uint32_t spb = choose_spb(&e, &opt, &file, NULL);
    const struct mem_plan p = mem_plan_of(&e, &opt);
    if (spb == 0) file = opt.max_memory || opt.lean;
    return ld_bytes(
        mem_plan_bytes(&p, file, spb ? spb : 1, opt.n_threads ? opt.n_threads : 1));
}

uint32_t calib_run_batch_samples(const struct calib_model *m, const struct calib_samples *s,
                                 const struct calib_run_opts *o)
{
    struct engine e = {0};
    struct calib_run_opts opt = {0};
    if (o) opt = *o;
    engine_dims(&e, m, s, &opt);
    bool file = false;
    return choose_spb(&e, &opt, &file, NULL);
}

bool calib_run_hidden_on_disk(const struct calib_model *m, const struct calib_samples *s,
                              const struct calib_run_opts *o)
{
    struct engine e = {0};
    struct calib_run_opts opt = {0};
    if (o) opt = *o;
    engine_dims(&e, m, s, &opt);
    bool file = false;
    return choose_spb(&e, &opt, &file, NULL) && file;
}

/* An unlinked scratch file of `bytes` under dir (NULL: $TMPDIR or /tmp),
 * reserved with posix_fallocate (where the file system has it). */
static enum mw_status scratch_file(const char *dir, const char *what, uint64_t bytes, int *fd,
                                   char *path, size_t cap, struct mw_err *err)
{
    if (!dir || !*dir) dir = getenv("TMPDIR");
    if (!dir || !*dir) dir = "/tmp";
    const int k = snprintf(path, cap, "%s/memwall-calib-%s.XXXXXX", dir, what);
    if (k < 0 || (size_t)k >= cap)
        return MW_FAIL(err, MW_E_USAGE, MW_ERR_OFF_NONE, "scratch directory path too long");
    *fd = mkstemp(path);
    if (*fd < 0) {
        const int en = errno;
        mw_err_set_path(err, path);
        return MW_FAIL(err, MW_E_IO, MW_ERR_OFF_NONE, "cannot create a scratch file: %s",
                       strerror(en));
    }
    unlink(path);
    if (bytes > (uint64_t)INT64_MAX)
        return MW_FAIL(err, MW_E_UNSUPPORTED, MW_ERR_OFF_NONE, "scratch file of %llu bytes",
                       (unsigned long long)bytes);
    const int fe = bytes ? posix_fallocate(*fd, 0, (off_t)bytes) : 0;
    if (fe != 0 && fe != EOPNOTSUPP && fe != EINVAL) {
        mw_err_set_path(err, path);
        return MW_FAIL(err, fe == ENOSPC || fe == EFBIG ? MW_E_NOSPACE : MW_E_IO,
                       MW_ERR_OFF_NONE, "cannot reserve %llu bytes for a scratch file: %s",
                       (unsigned long long)bytes, strerror(fe));
    }
    return MW_OK;
}

/* Resume: the hidden states entering first_layer from the caller, batch by
 * batch of whole samples. */
static enum mw_status load_hidden(struct engine *e, const struct calib_run_opts *o,
                                  struct mw_err *err)
{
    enum mw_status s = MW_OK;
    for (uint32_t s0 = 0; s0 < e->n_samples && !s; s0 += e->spb) {
        const uint64_t r0 = (uint64_t)s0 * e->n_pos;
        const uint64_t nr = (uint64_t)batch_samples(e, s0) * e->n_pos;
        if (!e->hs_file) {
            s = o->load_hidden(o->load_hidden_ud, r0, nr, e->hs + r0 * e->E, err);
            continue;
        }
        e->hsb_r0 = r0;
        e->hsb_n = 0;
        if ((s = o->load_hidden(o->load_hidden_ud, r0, nr, e->hsb, err))) break;
        e->hsb_n = nr;
        s = hs_io(e, true, r0, nr, err);
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
    struct engine e = {0};
    e.t_start = mw_now_s();
    engine_dims(&e, m, s, &opt);
    const struct rt_hparams *hp = e.hp;
    e.on_stage = opt.on_stage;
    e.on_stage_ud = opt.on_stage_ud;
    e.first_layer = opt.first_layer;
    if (opt.first_layer && (opt.first_layer >= hp->n_layer || !opt.load_hidden))
        return MW_FAIL(err, MW_E_USAGE, MW_ERR_OFF_NONE,
                       opt.load_hidden ? "first layer %u of a model of %u layers"
                                       : "first layer %u (of %u) without load_hidden",
                       opt.first_layer, hp->n_layer);
    /* --max-memory: fewer samples per batch, or fail here, before anything
     * large is allocated */
    e.spb = choose_spb(&e, &opt, &e.hs_file, err);
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
    if (e.NX && (e.NX > RT_MAX_EXPERTS || e.K == 0 || e.K > e.NX || e.FX == 0))
        return MW_FAIL(err, MW_E_FORMAT, MW_ERR_OFF_NONE, "%llu experts, %llu used, width %llu",
                       (unsigned long long)e.NX, (unsigned long long)e.K,
                       (unsigned long long)e.FX);
    /* BLAS takes int sizes */
    if (e.rows_b > INT32_MAX || e.E > INT32_MAX || e.Q > INT32_MAX || e.F > INT32_MAX ||
        e.FX > INT32_MAX || e.n_pos > INT32_MAX / 2)
        return MW_FAIL(err, MW_E_UNSUPPORTED, MW_ERR_OFF_NONE, "dimensions too large for BLAS");
    mw_blas_init(); /* one-threaded OpenBLAS; the pool gives the parallelism */
    enum mw_status st = mw_pool_init(opt.n_threads, &e.pool, err);
    if (st) return st;
    if ((st = alloc_stats(&e, err))) goto fail;

    bool ok = true;
    const uint64_t rb = e.rows_b;
    e.lean = e.hs_file;
    if (e.lean) {
        /* the hidden states, the attention outputs (with callbacks) and the
         * layer's big weights in unlinked scratch files (page cache, not this
         * process's memory), reserved now: a full disk fails here */
        uint64_t hs_bytes, xo_bytes = 0, w_bytes = 0;
        if (!mw_mul_u64(e.T, e.E, &hs_bytes) || !mw_mul_u64(hs_bytes, sizeof(float), &hs_bytes) ||
            !mw_mul_u64(e.T, e.Q, &xo_bytes) || !mw_mul_u64(xo_bytes, sizeof(float), &xo_bytes) ||
            hs_bytes > (uint64_t)INT64_MAX || xo_bytes > (uint64_t)INT64_MAX) {
            st = MW_FAIL(err, MW_E_UNSUPPORTED, MW_ERR_OFF_NONE,
                         "hidden states of %u samples x %u positions overflow a file offset",
                         e.n_samples, e.n_pos);
            goto fail;
        }
        for (int t = 0; t < CALIB_T_COUNT; t++) {
            if (!big_slot((enum calib_tslot)t)) continue;
            e.woff[t] = w_bytes;
            w_bytes += calib__slot_elems(hp, (enum calib_tslot)t) * sizeof(float);
        }
        if ((st = scratch_file(opt.scratch_dir, "hs", hs_bytes, &e.hs_fd, e.hs_path,
                               sizeof e.hs_path, err)) ||
            (st = scratch_file(opt.scratch_dir, "w", w_bytes, &e.w_fd, e.w_path,
                               sizeof e.w_path, err)) ||
            (opt.on_group && (st = scratch_file(opt.scratch_dir, "xo", xo_bytes, &e.xo_fd,
                                                e.xo_path, sizeof e.xo_path, err))))
            goto fail;
        e.hsb = alloc_f2(rb, e.E, &ok);
        if (opt.on_group || opt.on_layer) e.hsv = alloc_f2(rb, e.E, &ok);
        e.panel = alloc_f(panel_floats(&e), &ok);
    } else {
        e.hs = alloc_f2(e.T, e.E, &ok);
    }
    e.rope = alloc_f2(e.n_pos, hp->n_rot, &ok);
    e.xin = alloc_f2(rb, e.E, &ok);
    e.q = alloc_f2(rb, e.Q, &ok);
    e.k = alloc_f2(rb, e.KV, &ok);
    e.v = alloc_f2(rb, e.KV, &ok);
    e.att = alloc_f2(rb, e.Q, &ok);
    e.g = alloc_f2(rb, e.F, &ok);
    e.u = alloc_f2(rb, e.F, &ok);
    e.y = alloc_f2(rb, e.E, &ok);
    e.ubuf = alloc_f2(rb, max3(e.E, e.Q, e.F), &ok);
    e.S = alloc_f3(opt.n_threads, e.n_pos, e.n_pos, &ok);
    e.one = alloc_f2(e.n_pos, e.Q, &ok);
    if (e.NX) {
        e.lg = alloc_f2(rb, e.NX, &ok);
        e.xe = alloc_f2(XCHUNK, e.E, &ok);
        e.ge = alloc_f2(XCHUNK, e.FX, &ok);
        e.ue = alloc_f2(XCHUNK, e.FX, &ok);
        e.ye = alloc_f2(XCHUNK, e.E, &ok);
        e.ridx = ok ? malloc((size_t)e.NX * sizeof(int32_t)) : NULL;
        if (!e.ridx) ok = false;
    }
    if (!ok) {
        st = MW_FAIL(err, MW_E_NOMEM, MW_ERR_OFF_NONE,
                     "activations for %u samples x %u positions (hidden %llu): about %llu MiB",
                     e.n_samples, e.n_pos, (unsigned long long)e.E,
                     (unsigned long long)(calib_run_peak_bytes(m, s, &opt) >> 20));
        goto fail;
    }
    if ((st = rope_tables(&e, &ok, err))) goto fail;
    const double t_run = mw_now_s();
    stage_ev(&e, "embed", false, e.first_layer);
    if ((st = e.first_layer || opt.load_hidden ? load_hidden(&e, &opt, err) : embed(&e, err)))
        goto fail;
    stage_ev(&e, "embed", true, e.first_layer);

    for (uint32_t il = e.first_layer; il < hp->n_layer; il++) {
        st = run_layer(&e, il, &opt, err);
        free_layer(&e);
        if (st) goto fail;
        e.layers_done++;
        stage_ev(&e, "layer", true, il);
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
