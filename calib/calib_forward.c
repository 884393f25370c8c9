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
#include "runtime/rt_ops.h"
#include "calib/mw_blas.h"

#include <cblas.h>
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

// --- statistics ---------------------------------------------------------------------

struct calib_stats {
    uint32_t n_layer, n_samples, n_pos;
    bool fused_qkv, fused_gate_up; /* names of the imatrix entries (calib_stats_entry) */
    struct calib_group_stats *g; /* (n_layer, CALIB_G_COUNT) */
    double *buf;
};

void calib_stats_free(struct calib_stats *st)
{
    if (!st) return;
    free(st->g);
    free(st->buf);
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
    const uint64_t KV = (uint64_t)hp->n_head_kv * hp->head_dim, F = hp->n_ff;
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
    if (buf && n) snprintf(buf, n, "blk.%u.%s.weight", il, nm);
    if (tensor_rows) *tensor_rows = rows;
    return row0;
}

bool calib_stats_entry(const struct calib_stats *st, uint32_t il, enum calib_wkind w, char *buf,
                       size_t n)
{
    const struct rt_hparams hp = {.fused_qkv = st->fused_qkv,
                                  .fused_gate_up = st->fused_gate_up};
    if ((unsigned)w >= CALIB_W_COUNT) return false;
    (void)calib_weight_tensor(&hp, il, w, buf, n, NULL);
    /* one entry per tensor: a fused tensor's is its first part's */
    if (st->fused_qkv && (w == CALIB_W_K || w == CALIB_W_V)) return false;
    if (st->fused_gate_up && w == CALIB_W_UP) return false;
    return true;
}

uint64_t calib_stats_n_entries(const struct calib_stats *st)
{
    const uint64_t per = CALIB_W_COUNT - (st->fused_qkv ? 2 : 0) - (st->fused_gate_up ? 1 : 0);
    return (uint64_t)st->n_layer * per;
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
};

struct engine {
    const struct calib_model *m;
    const struct rt_hparams *hp;
    const struct calib_samples *s;
    struct mw_pool *pool;
    uint32_t n_samples, n_pos, spb;
    uint64_t T, rows_b;
    uint64_t E, Q, KV, F, hd;
    uint32_t n_rep;
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
    float *w[CALIB_T_COUNT];   /* views (fused parts point into their tensor) */
    float *wown[CALIB_T_COUNT]; /* the buffers loaded from the model */
    struct calib_stats *st;
    struct calib_layer ly;
};

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
};

struct row_job {
    struct engine *e;
    enum row_op op;
    uint64_t n_rows, n;   /* rows, elements per row */
    uint64_t row0;        /* first row's index within its sample sequence (ROPE) */
    float *dst;
    const float *src;
    const float *w;
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
    mw_gemm(e->pool, false, true, nr, n_out, n_in, 1.0f, X, n_in, W, n_in, 0.0f, Y, ldy, e->n_pos);
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

// --- blocks -------------------------------------------------------------------------

/* hidden-state row r0: in memory, or in the batch loaded from the scratch file */
static float *hs_at(const struct engine *e, uint64_t r0)
{
    return e->hs_file ? e->hsb + (r0 - e->hsb_r0) * e->E : e->hs + r0 * e->E;
}

/* rows [r0, r0 + nr) of the scratch file <-> hsb */
static enum mw_status hs_io(struct engine *e, bool write, uint64_t r0, uint64_t nr,
                            struct mw_err *err)
{
    const uint64_t off0 = r0 * e->E * sizeof(float), n = nr * e->E * sizeof(float);
    uint8_t *b = (uint8_t *)e->hsb;
    for (uint64_t done = 0; done < n;) {
        const size_t want = n - done > ((size_t)1 << 30) ? (size_t)1 << 30 : (size_t)(n - done);
        const ssize_t k = write ? pwrite(e->hs_fd, b + done, want, (off_t)(off0 + done))
                                : pread(e->hs_fd, b + done, want, (off_t)(off0 + done));
        if (k < 0 && errno == EINTR) continue;
        if (k <= 0) {
            const int en = k < 0 ? errno : EIO;
            mw_err_clear(err);
            mw_err_set_path(err, e->hs_path);
            return MW_FAIL(err, en == ENOSPC || en == EFBIG ? MW_E_NOSPACE : MW_E_IO, off0 + done,
                           "%s the scratch file of hidden states (%llu bytes; unlinked, under "
                           "$TMPDIR or /tmp): %s",
                           write ? "writing" : "reading",
                           (unsigned long long)(e->T * e->E * sizeof(float)),
                           k < 0 ? strerror(en) : "short read");
        }
        done += (uint64_t)k;
    }
    e->hsb_r0 = r0;
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
static void attention(struct engine *e, const float *X, uint32_t ns, float *out, uint64_t ldo)
{
    const uint64_t nr = (uint64_t)ns * e->n_pos;
    linear(e, X, nr, e->E, e->w[CALIB_T_WQ], e->w[CALIB_T_BQ], e->Q, e->q, e->Q);
    linear(e, X, nr, e->E, e->w[CALIB_T_WK], e->w[CALIB_T_BK], e->KV, e->k, e->KV);
    linear(e, X, nr, e->E, e->w[CALIB_T_WV], e->w[CALIB_T_BV], e->KV, e->v, e->KV);
    run_rows(e, OP_ROPE, nr, 0, NULL, NULL, NULL, 0);
    struct attn_job J = {.e = e, .ns = ns, .out = out, .ldo = ldo};
    mw_pool_run(e->pool, attn_task, &J);
}

/* SwiGLU of nr rows of normed input X -> e->g (nr, F) */
static void swiglu(struct engine *e, const float *X, uint64_t nr)
{
    linear(e, X, nr, e->E, e->w[CALIB_T_WGATE], e->w[CALIB_T_BGATE], e->F, e->g, e->F);
    linear(e, X, nr, e->E, e->w[CALIB_T_WUP], e->w[CALIB_T_BUP], e->F, e->u, e->F);
    run_rows(e, OP_SWIGLU, nr, e->F, e->g, e->u, NULL, 0);
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
static void residual(struct engine *e, uint64_t r0, uint64_t nr, const float *X, uint64_t n_in,
                     enum calib_tslot w, enum calib_tslot b)
{
    linear(e, X, nr, n_in, e->w[w], e->w[b], e->E, e->y, e->E);
    post_norm(e, w, e->y, nr);
    run_rows(e, OP_ADD, nr, e->E, hs_at(e, r0), e->y, NULL, 0);
}

// --- batches ---

static uint32_t batch_samples(const struct engine *e, uint32_t s0)
{
    return e->n_samples - s0 < e->spb ? e->n_samples - s0 : e->spb;
}

static enum mw_status pass_fused(struct engine *e, struct mw_err *err)
{
    enum mw_status st;
    for (uint32_t s0 = 0; s0 < e->n_samples; s0 += e->spb) {
        const uint32_t ns = batch_samples(e, s0);
        const uint64_t r0 = (uint64_t)s0 * e->n_pos, nr = (uint64_t)ns * e->n_pos;
        if (e->hs_file && (st = hs_io(e, false, r0, nr, err))) return st;
        norm_rows(e, r0, nr, CALIB_T_ATTN_NORM, e->xin);
        accum(e, CALIB_G_ATTN_IN, e->xin, nr);
        attention(e, e->xin, ns, e->att, e->Q);
        accum(e, CALIB_G_ATTN_OUT, e->att, nr);
        residual(e, r0, nr, e->att, e->Q, CALIB_T_WO, CALIB_T_BO);
        norm_rows(e, r0, nr, CALIB_T_FFN_NORM, e->xin);
        accum(e, CALIB_G_FFN_IN, e->xin, nr);
        swiglu(e, e->xin, nr);
        accum(e, CALIB_G_FFN_DOWN, e->g, nr);
        residual(e, r0, nr, e->g, e->F, CALIB_T_WDOWN, CALIB_T_BDOWN);
        if (e->hs_file && (st = hs_io(e, true, r0, nr, err))) return st;
    }
    return MW_OK;
}

enum stage_pass { P_A, P_B, P_B_AGAIN, P_C, P_D, P_E, P_F };

static void pass_stage(struct engine *e, enum stage_pass p)
{
    for (uint32_t s0 = 0; s0 < e->n_samples; s0 += e->spb) {
        const uint32_t ns = batch_samples(e, s0);
        const uint64_t r0 = (uint64_t)s0 * e->n_pos, nr = (uint64_t)ns * e->n_pos;
        switch (p) {
        case P_A:
            norm_rows(e, r0, nr, CALIB_T_ATTN_NORM, e->xin);
            accum(e, CALIB_G_ATTN_IN, e->xin, nr);
            break;
        case P_B:
        case P_B_AGAIN:
            norm_rows(e, r0, nr, CALIB_T_ATTN_NORM, e->xin);
            attention(e, e->xin, ns, e->xo + r0 * e->Q, e->Q);
            if (p == P_B) accum(e, CALIB_G_ATTN_OUT, e->xo + r0 * e->Q, nr);
            break;
        case P_C:
            residual(e, r0, nr, e->xo + r0 * e->Q, e->Q, CALIB_T_WO, CALIB_T_BO);
            break;
        case P_D:
            norm_rows(e, r0, nr, CALIB_T_FFN_NORM, e->xin);
            accum(e, CALIB_G_FFN_IN, e->xin, nr);
            break;
        case P_E:
        case P_F:
            norm_rows(e, r0, nr, CALIB_T_FFN_NORM, e->xin);
            swiglu(e, e->xin, nr);
            if (p == P_E)
                accum(e, CALIB_G_FFN_DOWN, e->g, nr);
            else
                residual(e, r0, nr, e->g, e->F, CALIB_T_WDOWN, CALIB_T_BDOWN);
            break;
        }
    }
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
    case CALIB_G_FFN_DOWN: return e->F;
    case CALIB_G_COUNT: break;
    }
    return 0;
}

const struct calib_group_stats *calib_layer_stats(const struct calib_layer *ly,
                                                  enum calib_group g)
{
    return calib_stats_group(ly->e->st, ly->il, g);
}

static void invalidate(struct calib_layer *ly, unsigned bits)
{
    for (int g = 0; g < CALIB_G_COUNT; g++)
        if (group_deps[g] & bits) ly->H_valid[g] = false;
    if (bits & group_deps[CALIB_G_ATTN_OUT]) ly->xo_stale = true;
}

static enum mw_status hand_out(struct calib_layer *ly, enum calib_tslot t, bool mutable_,
                               const char *what, struct mw_err *err)
{
    if (!mutable_) return MW_OK;
    if (ly->stage == STAGE_NONE || !(stage_mutable[ly->stage] & SLOT_BIT(t)))
        return MW_FAIL(err, MW_E_USAGE, MW_ERR_OFF_NONE,
                       "layer %u: %s may not be changed %s%s", ly->il, what,
                       ly->stage == STAGE_NONE ? "outside an on_group callback" : "in stage ",
                       ly->stage == STAGE_NONE ? "" : group_names[ly->stage]);
    ly->live |= SLOT_BIT(t);
    invalidate(ly, SLOT_BIT(t));
    return MW_OK;
}

enum mw_status calib_layer_weight(struct calib_layer *ly, enum calib_wkind w, bool mutable_,
                                  struct calib_weight *out, struct mw_err *err)
{
    if ((unsigned)w >= CALIB_W_COUNT)
        return MW_FAIL(err, MW_E_USAGE, MW_ERR_OFF_NONE, "weight kind %d", (int)w);
    const enum calib_tslot t = wkind_slot[w];
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

enum mw_status calib_layer_norm(struct calib_layer *ly, enum calib_norm which, bool mutable_,
                                float **out, struct mw_err *err)
{
    if (which != CALIB_NORM_ATTN && which != CALIB_NORM_FFN)
        return MW_FAIL(err, MW_E_USAGE, MW_ERR_OFF_NONE, "norm kind %d", (int)which);
    const enum calib_tslot t = which == CALIB_NORM_ATTN ? CALIB_T_ATTN_NORM : CALIB_T_FFN_NORM;
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
static void sample_rows(struct engine *e, enum calib_group g, uint64_t row0, uint64_t nr,
                        float *dst)
{
    const bool attn = g == CALIB_G_ATTN_OUT;
    const uint64_t w = attn ? e->Q : e->F;
    for (uint64_t r = row0; r < row0 + nr;) {
        const uint64_t a = r / e->n_pos * e->n_pos;
        const uint64_t b = a + e->n_pos < row0 + nr ? a + e->n_pos : row0 + nr;
        norm_rows(e, a, e->n_pos, attn ? CALIB_T_ATTN_NORM : CALIB_T_FFN_NORM, e->xin);
        if (attn)
            attention(e, e->xin, 1, e->one, e->Q);
        else
            swiglu(e, e->xin, e->n_pos);
        memcpy(dst + (r - row0) * w, (attn ? e->one : e->g) + (r - a) * w,
               (size_t)((b - r) * w) * sizeof(float));
        r = b;
    }
}

/* Rows [row0, row0+nr) of group g's current input into dst (nr, n_in);
 * nr <= rows_b. May use xin/q/k/v/S/g/u/one scratch. */
static void group_rows(struct engine *e, enum calib_group g, uint64_t row0, uint64_t nr,
                       float *dst)
{
    struct calib_layer *ly = &e->ly;
    switch (g) {
    case CALIB_G_ATTN_IN:
        norm_rows(e, row0, nr, CALIB_T_ATTN_NORM, dst);
        break;
    case CALIB_G_FFN_IN:
        norm_rows(e, row0, nr, CALIB_T_FFN_NORM, dst);
        break;
    case CALIB_G_ATTN_OUT:
        if (!ly->xo_stale && !(ly->live & group_deps[CALIB_G_ATTN_OUT])) {
            memcpy(dst, e->xo + row0 * e->Q, (size_t)(nr * e->Q) * sizeof(float));
            break;
        }
        sample_rows(e, g, row0, nr, dst); /* with the current weights */
        break;
    case CALIB_G_FFN_DOWN:
        sample_rows(e, g, row0, nr, dst);
        break;
    case CALIB_G_COUNT:
        break;
    }
}

enum mw_status calib_layer_input(struct calib_layer *ly, enum calib_group g, uint64_t row0,
                                 uint64_t n_rows, const float **x, struct mw_err *err)
{
    *x = NULL;
    enum mw_status s = check_group(ly, g, err);
    if (s) return s;
    struct engine *e = ly->e;
    if (n_rows == 0 || n_rows > e->rows_b || row0 > e->T || n_rows > e->T - row0)
        return MW_FAIL(err, MW_E_USAGE, MW_ERR_OFF_NONE,
                       "rows [%llu, +%llu) outside [0, %llu) or above %llu per call",
                       (unsigned long long)row0, (unsigned long long)n_rows,
                       (unsigned long long)e->T, (unsigned long long)e->rows_b);
    if (g == CALIB_G_ATTN_OUT && !ly->xo_stale && !(ly->live & group_deps[g])) {
        *x = e->xo + row0 * e->Q; /* the stored rows, no copy */
        return MW_OK;
    }
    group_rows(e, g, row0, n_rows, e->ubuf);
    *x = e->ubuf;
    return MW_OK;
}

enum mw_status calib_layer_forward(struct calib_layer *ly, enum calib_group g, uint32_t sample0,
                                   uint32_t n, float *out, struct mw_err *err)
{
    enum mw_status s = check_group(ly, g, err);
    if (s) return s;
    struct engine *e = ly->e;
    if (n == 0 || n > e->spb || sample0 > e->n_samples || n > e->n_samples - sample0)
        return MW_FAIL(err, MW_E_USAGE, MW_ERR_OFF_NONE,
                       "samples [%u, +%u) outside [0, %u) or above %u per call", sample0, n,
                       e->n_samples, e->spb);
    const uint64_t r0 = (uint64_t)sample0 * e->n_pos, nr = (uint64_t)n * e->n_pos;
    switch (g) {
    case CALIB_G_ATTN_IN:
        norm_rows(e, r0, nr, CALIB_T_ATTN_NORM, e->xin);
        attention(e, e->xin, n, out, e->Q);
        break;
    case CALIB_G_ATTN_OUT:
        group_rows(e, g, r0, nr, e->ubuf);
        linear(e, e->ubuf, nr, e->Q, e->w[CALIB_T_WO], e->w[CALIB_T_BO], e->E, out, e->E);
        post_norm(e, CALIB_T_WO, out, nr);
        break;
    case CALIB_G_FFN_IN:
        norm_rows(e, r0, nr, CALIB_T_FFN_NORM, e->xin);
        swiglu(e, e->xin, nr);
        memcpy(out, e->g, (size_t)(nr * e->F) * sizeof(float));
        break;
    case CALIB_G_FFN_DOWN:
        norm_rows(e, r0, nr, CALIB_T_FFN_NORM, e->xin);
        swiglu(e, e->xin, nr);
        linear(e, e->g, nr, e->F, e->w[CALIB_T_WDOWN], e->w[CALIB_T_BDOWN], e->E, out, e->E);
        post_norm(e, CALIB_T_WDOWN, out, nr);
        break;
    case CALIB_G_COUNT:
        break;
    }
    return MW_OK;
}

enum mw_status calib_layer_hidden(const struct calib_layer *ly, uint64_t row0, uint64_t n_rows,
                                  const float **x, struct mw_err *err)
{
    const struct engine *e = ly->e;
    *x = NULL;
    if (row0 > e->T || n_rows > e->T - row0)
        return MW_FAIL(err, MW_E_USAGE, MW_ERR_OFF_NONE, "rows [%llu, +%llu) outside [0, %llu)",
                       (unsigned long long)row0, (unsigned long long)n_rows,
                       (unsigned long long)e->T);
    *x = e->hs + row0 * e->E;
    return MW_OK;
}

enum mw_status calib_layer_hessian(struct calib_layer *ly, enum calib_group g, const float **H,
                                   struct mw_err *err)
{
    *H = NULL;
    enum mw_status s = check_group(ly, g, err);
    if (s) return s;
    struct engine *e = ly->e;
    const uint64_t n = calib_layer_group_n_in(ly, g);
    if (ly->H_valid[g] && !(ly->live & group_deps[g])) {
        *H = ly->H[g];
        return MW_OK;
    }
    if (!ly->H[g]) {
        /* under --max-memory the plan has room for ONE Hessian of the widest
         * group: release the others first (their views become invalid) */
        if (e->max_memory)
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
        if (g == CALIB_G_ATTN_OUT && !ly->xo_stale && !(ly->live & group_deps[g])) {
            X = e->xo + r0 * e->Q;
        } else {
            group_rows(e, g, r0, nr, e->ubuf);
            X = e->ubuf;
        }
        mw_gram_acc(e->pool, n, nr, X, n, s0 == 0, Hm, e->n_pos);
    }
    mw_sym_lower_from_upper(Hm, n);
    ly->H_valid[g] = !(ly->live & group_deps[g]);
    *H = Hm;
    return MW_OK;
}

// --- run --------------------------------------------------------------------------------

static enum mw_status call_group(struct engine *e, const struct calib_run_opts *o,
                                 enum calib_group g, struct mw_err *err)
{
    struct calib_layer *ly = &e->ly;
    ly->stage = (int)g;
    ly->live = 0;
    enum mw_status s = o->on_group(o->on_group_ud, ly, g, err);
    ly->stage = STAGE_NONE;
    ly->live = 0;
    return s;
}

static void free_layer(struct engine *e)
{
    for (int t = 0; t < CALIB_T_COUNT; t++) {
        free(e->wown[t]);
        e->wown[t] = e->w[t] = NULL;
    }
    for (int g = 0; g < CALIB_G_COUNT; g++) {
        free(e->ly.H[g]);
        e->ly.H[g] = NULL;
        e->ly.H_valid[g] = false;
    }
    free(e->xo);
    e->xo = NULL;
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
    for (int w = 0; w < CALIB_W_COUNT; w++)
        calib_weight_tensor(e->hp, il, (enum calib_wkind)w, ly->names[w], sizeof ly->names[w],
                            NULL);
    for (int t = 0; t < CALIB_T_COUNT; t++) {
        if (!calib__model_has(e->m, il, (enum calib_tslot)t)) continue;
        const uint64_t n = calib__slot_elems(e->hp, (enum calib_tslot)t);
        bool ok = true;
        e->wown[t] = e->w[t] = alloc_f(n, &ok);
        if (!ok) return MW_FAIL(err, MW_E_NOMEM, MW_ERR_OFF_NONE, "layer %u weights", il);
        if ((s = calib__model_load(e->m, il, (enum calib_tslot)t, e->w[t], n, err))) return s;
    }
    /* fused tensors: the parts are row ranges (views) of the loaded tensor */
    if (e->hp->fused_qkv) {
        float *b = e->wown[CALIB_T_WQKV];
        e->w[CALIB_T_WQ] = b;
        e->w[CALIB_T_WK] = b + e->Q * e->E;
        e->w[CALIB_T_WV] = b + (e->Q + e->KV) * e->E;
    }
    if (e->hp->fused_gate_up) {
        float *b = e->wown[CALIB_T_WUP];
        e->w[CALIB_T_WGATE] = b;
        e->w[CALIB_T_WUP] = b + e->F * e->E;
    }
    e->swa_l = rt_layer_is_swa(e->hp, il);
    e->rope_l = e->swa_l && e->rope_swa ? e->rope_swa : e->rope;
    if (!o->on_group) {
        if ((s = pass_fused(e, err))) return s;
    } else {
        pass_stage(e, P_A);
        if ((s = call_group(e, o, CALIB_G_ATTN_IN, err))) return s;
        bool ok = true;
        e->xo = alloc_f2(e->T, e->Q, &ok);
        if (!ok)
            return MW_FAIL(err, MW_E_NOMEM, MW_ERR_OFF_NONE,
                           "%llu x %llu attention outputs of layer %u",
                           (unsigned long long)e->T, (unsigned long long)e->Q, il);
        pass_stage(e, P_B);
        ly->xo_stale = false;
        if ((s = call_group(e, o, CALIB_G_ATTN_OUT, err))) return s;
        if (ly->xo_stale) pass_stage(e, P_B_AGAIN);
        ly->xo_stale = false;
        pass_stage(e, P_C);
        free(e->xo);
        e->xo = NULL;
        ly->ffn_phase = true;
        pass_stage(e, P_D);
        if ((s = call_group(e, o, CALIB_G_FFN_IN, err))) return s;
        pass_stage(e, P_E);
        if ((s = call_group(e, o, CALIB_G_FFN_DOWN, err))) return s;
        pass_stage(e, P_F);
    }
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
        if (e->hs_file) e->hsb_r0 = r0; /* one sample at a time through hsb */
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
    if (e->hs_fd >= 0) close(e->hs_fd);
    e->hs_fd = -1;
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
    e->F = hp->n_ff;
    e->n_rep = hp->n_head / hp->n_head_kv;
    e->hs_fd = -1;
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
    long double hsb;     /* per sample of the batch, scratch-file mode: hidden states */
    long double attn;    /* n_pos^2 attention scores per thread */
    long double embed;   /* transient, before the layers: vocabulary map, embedding rows */
    long double layer;   /* per layer: weights, norms, biases; X_o (T x Q) and one
                          * Hessian of the widest group when there is a callback */
};

static struct mem_plan mem_plan_of(const struct engine *e, const struct calib_run_opts *o)
{
    struct mem_plan p;
    const long double T = (long double)e->T, P = e->n_pos, E = (long double)e->E;
    const long double Q = (long double)e->Q, KV = (long double)e->KV, F = (long double)e->F;
    const long double L = e->hp->n_layer, widest = (long double)max3(e->E, e->Q, e->F);
    p.fixed = 8.0L * L * 2.0L * (2.0L * E + Q + F) +
              L * CALIB_G_COUNT * (long double)sizeof(struct calib_group_stats) +
              (long double)sizeof(struct calib_stats) +
              (e->hp->n_swa ? 8.0L : 4.0L) * P * e->hp->n_rot + 4.0L * P * Q;
    p.hs = 4.0L * T * E;
    /* xin, q, k, v, att, g, u, y, ubuf: rows_b rows each */
    p.per_smp = 4.0L * P * (E + Q + 2.0L * KV + Q + 2.0L * F + E + widest);
    p.hsb = 4.0L * P * E;
    p.attn = 4.0L * P * P;
    const long double n_ids = T < e->hp->n_vocab ? T : (long double)e->hp->n_vocab;
    p.embed = 4.0L * e->hp->n_vocab + 4.0L * n_ids + 1.0L + 4.0L * n_ids * E + 2.0L * e->hp->n_rot;
    /* weights + every optional bias + the two norms */
    p.layer = 4.0L * (2.0L * Q * E + 2.0L * KV * E + 3.0L * F * E + (Q + 2.0L * KV + E + 2.0L * F + E) +
                      2.0L * E);
    if (o->on_group) p.layer += 4.0L * T * Q + 4.0L * widest * widest;
    return p;
}

static long double mem_plan_bytes(const struct mem_plan *p, bool file, uint32_t spb,
                                  unsigned n_threads)
{
    const long double phase = p->embed > p->layer ? p->embed : p->layer;
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

/* Samples per batch under opt->max_memory, and whether the hidden states go
 * to a scratch file. In memory first: the requested batch, else fewer
 * samples per batch; then, for statistics-only runs (no callbacks, which may
 * read any rows), the hidden states on disk. The choice ignores the thread
 * count (so the batches, which the Hessians depend on, are the same for
 * every --threads); the per-thread attention scratch is then checked on
 * top. 0: the bound cannot be met (err, which may be NULL, says why and what
 * to change). */
static uint32_t choose_spb(const struct engine *e, const struct calib_run_opts *o, bool *file,
                           struct mw_err *err)
{
    const struct mem_plan p = mem_plan_of(e, o);
    const long double max = (long double)o->max_memory;
    const unsigned nt = o->n_threads ? o->n_threads : 1;
    const bool file_ok = !o->on_group && !o->on_layer;
    *file = false;
    if (!o->max_memory || mem_plan_bytes(&p, false, e->spb, nt) <= max) return e->spb;
    uint32_t spb = fit_spb(&p, false, e->spb, max);
    if (spb == 0 && file_ok) {
        spb = fit_spb(&p, true, e->spb, max);
        *file = spb > 0;
    }
    if (spb == 0 || mem_plan_bytes(&p, *file, spb, nt) > max) {
        mw_err_clear(err); /* not about a file read earlier */
        mw_err_set_path(err, calib_model_path(e->m));
    }
    if (spb == 0) {
        const long double least = mem_plan_bytes(&p, file_ok, 1, 1);
        MW_FAIL(err, MW_E_NOMEM, MW_ERR_OFF_NONE,
                "calibration needs at least %llu bytes (%.1f MiB: %s %.1f MiB, one layer "
                "%.1f MiB, one sample per batch %.1f MiB), above --max-memory %llu bytes "
                "(%.1f MiB): use fewer --samples or a shorter --seq-len, or raise --max-memory",
                (unsigned long long)ld_bytes(least), (double)(least / 1048576.0L),
                file_ok ? "statistics and tables" : "hidden states",
                (double)((file_ok ? p.fixed : p.hs) / 1048576.0L), (double)(p.layer / 1048576.0L),
                (double)((p.per_smp + (file_ok ? p.hsb : 0)) / 1048576.0L),
                (unsigned long long)o->max_memory, (double)(max / 1048576.0L));
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
    if (spb == 0) file = opt.max_memory && !opt.on_group && !opt.on_layer;
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
    engine_dims(&e, m, s, &opt);
    const struct rt_hparams *hp = e.hp;
    /* --max-memory: fewer samples per batch, or fail here, before anything
     * large is allocated */
    e.spb = choose_spb(&e, &opt, &e.hs_file, err);
    if (e.spb == 0) return MW_E_NOMEM;
    e.rows_b = (uint64_t)e.spb * e.n_pos;
    e.max_memory = opt.max_memory;
    /* BLAS takes int sizes */
    if (e.rows_b > INT32_MAX || e.E > INT32_MAX || e.Q > INT32_MAX || e.F > INT32_MAX ||
        e.n_pos > INT32_MAX / 2)
        return MW_FAIL(err, MW_E_UNSUPPORTED, MW_ERR_OFF_NONE, "dimensions too large for BLAS");
    mw_blas_init(); /* one-threaded OpenBLAS; the pool gives the parallelism */
    enum mw_status st = mw_pool_init(opt.n_threads, &e.pool, err);
    if (st) return st;
    if ((st = alloc_stats(&e, err))) goto fail;

    bool ok = true;
    const uint64_t rb = e.rows_b;
    if (e.hs_file) {
        /* the hidden states in an unlinked scratch file (page cache, not
         * this process's memory), one batch at a time in hsb */
        const char *dir = getenv("TMPDIR");
        if (!dir || !*dir) dir = "/tmp";
        snprintf(e.hs_path, sizeof e.hs_path, "%s/memwall-calib-hs.XXXXXX", dir);
        e.hs_fd = mkstemp(e.hs_path);
        if (e.hs_fd < 0) {
            const int en = errno;
            mw_err_set_path(err, e.hs_path);
            st = MW_FAIL(err, MW_E_IO, MW_ERR_OFF_NONE,
                         "cannot create the scratch file for the hidden states: %s",
                         strerror(en));
            goto fail;
        }
        unlink(e.hs_path);
        /* reserve the space now: a full disk fails here, before any work */
        uint64_t hs_bytes;
        if (!mw_mul_u64(e.T, e.E, &hs_bytes) || !mw_mul_u64(hs_bytes, sizeof(float), &hs_bytes) ||
            hs_bytes > (uint64_t)INT64_MAX) {
            st = MW_FAIL(err, MW_E_UNSUPPORTED, MW_ERR_OFF_NONE,
                         "hidden states of %u samples x %u positions overflow a file offset",
                         e.n_samples, e.n_pos);
            goto fail;
        }
        const int fe = posix_fallocate(e.hs_fd, 0, (off_t)hs_bytes);
        if (fe != 0 && fe != EOPNOTSUPP && fe != EINVAL) {
            mw_err_set_path(err, e.hs_path);
            st = MW_FAIL(err, fe == ENOSPC || fe == EFBIG ? MW_E_NOSPACE : MW_E_IO,
                         MW_ERR_OFF_NONE,
                         "cannot reserve %llu bytes for the hidden states' scratch file: %s",
                         (unsigned long long)hs_bytes, strerror(fe));
            goto fail;
        }
        e.hsb = alloc_f2(rb, e.E, &ok);
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
    if (!ok) {
        st = MW_FAIL(err, MW_E_NOMEM, MW_ERR_OFF_NONE,
                     "activations for %u samples x %u positions (hidden %llu): about %llu MiB",
                     e.n_samples, e.n_pos, (unsigned long long)e.E,
                     (unsigned long long)(calib_run_peak_bytes(m, s, &opt) >> 20));
        goto fail;
    }
    if ((st = rope_tables(&e, &ok, err))) goto fail;
    if ((st = embed(&e, err))) goto fail;

    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    for (uint32_t il = 0; il < hp->n_layer; il++) {
        st = run_layer(&e, il, &opt, err);
        free_layer(&e);
        if (st) goto fail;
        if (opt.progress) {
            clock_gettime(CLOCK_MONOTONIC, &t1);
            opt.progress(opt.progress_ud, il + 1, hp->n_layer,
                         (double)(t1.tv_sec - t0.tv_sec) +
                             1e-9 * (double)(t1.tv_nsec - t0.tv_nsec));
        }
    }
    *out = e.st;
    e.st = NULL;
    engine_free(&e);
    return MW_OK;
fail:
    engine_free(&e);
    return st;
}
