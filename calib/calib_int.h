/*
 * calib/calib_int.h — internals shared by calib/'s files: the thread pool,
 * the model's weight source, the forward engine's state and steps, and a
 * few helpers. Not for use outside calib/ and its tests.
 */
#ifndef MW_CALIB_INT_H
#define MW_CALIB_INT_H

#include "calib/calib.h"
#include "calib/mw_blas.h"
#include "core/mw_pool.h"

#include <pthread.h>

// --- thread pool: core/mw_pool.h ---

/* [lo, hi) of n items for thread ith of nth (contiguous, balanced). */
static inline void calib__split(uint64_t n, unsigned ith, unsigned nth, uint64_t *lo, uint64_t *hi)
{
    *lo = n * ith / nth;
    *hi = n * (ith + 1) / nth;
}

// --- model (calib_model.c) ---

/* Tensors of one decoder layer the engine uses (GGUF short names). */
enum calib_tslot {
    CALIB_T_ATTN_NORM = 0,
    CALIB_T_FFN_NORM,
    CALIB_T_WQ, CALIB_T_WK, CALIB_T_WV, CALIB_T_WO, CALIB_T_WGATE, CALIB_T_WUP, CALIB_T_WDOWN,
    CALIB_T_BQ, CALIB_T_BK, CALIB_T_BV, CALIB_T_BO, CALIB_T_BGATE, CALIB_T_BUP, CALIB_T_BDOWN,
    /* family tensors (rt_hparams: qk_norm, post_norms, fused_qkv) */
    CALIB_T_Q_NORM, CALIB_T_K_NORM,        /* head_dim floats, applied per head */
    CALIB_T_ATTN_POST_NORM, CALIB_T_FFN_POST_NORM, /* n_embd: sandwich norms */
    CALIB_T_WQKV,                          /* attn_qkv.weight: q rows, k rows, v rows */
    /* mixture of experts (rt_hparams n_expert > 0): the router, the
     * stacked experts, qwen2moe's shared-expert gate. A MoE model's shared
     * expert (ffn_{gate,up,down}_shexp) sits in CALIB_T_WGATE/WUP/WDOWN,
     * n_ff_shexp wide; without one those slots are absent. */
    CALIB_T_GATE_INP,                      /* ffn_gate_inp.weight (n_expert, E), f32 */
    CALIB_T_GATE_EXPS, CALIB_T_UP_EXPS,    /* (n_expert, n_ff_exp, E) */
    CALIB_T_DOWN_EXPS,                     /* (n_expert, E, n_ff_exp) */
    CALIB_T_GATE_INP_SHEXP,                /* (E): the shared expert's sigmoid gate */
    /* gated delta net (rt_layer_is_recurrent layers of qwen35 / qwen35moe /
     * qwen3next): CALIB_T_WQKV holds attn_qkv (C = rt_ssm_conv_channels rows:
     * q, k of Hk heads, v of Hv heads), then these */
    CALIB_T_SSM_GATE,                      /* attn_gate.weight (Hv*S, E): z */
    CALIB_T_SSM_BETA, CALIB_T_SSM_ALPHA,   /* ssm_beta / ssm_alpha.weight (Hv, E) */
    CALIB_T_SSM_BA,                        /* qwen3next ssm_ba.weight (2 Hv, E): per key
                                            * head [beta (Hv/Hk) | alpha (Hv/Hk)] */
    CALIB_T_SSM_OUT,                       /* ssm_out.weight (E, Hv*S) */
    CALIB_T_SSM_CONV,                      /* ssm_conv1d.weight (C, K), f32 */
    CALIB_T_SSM_DT, CALIB_T_SSM_A,         /* ssm_dt.bias, ssm_a (Hv) */
    CALIB_T_SSM_NORM,                      /* ssm_norm.weight (S) */
    /* gemma4 (calib_g4fwd.c): the per-layer input's gate (P, E) and
     * projection (E, P), its output norm (E), layer_output_scale (1, optional) */
    CALIB_T_PLE_GATE, CALIB_T_PLE_PROJ, CALIB_T_PLE_NORM, CALIB_T_OUT_SCALE,
    /* gemma4 with experts beside the dense MLP (calib_g4moe.c; the dense
     * MLP sits in CALIB_T_WGATE/WUP/WDOWN, CALIB_T_UP_EXPS holds the fused
     * ffn_gate_up_exps (n_expert, 2 n_ff_exp, E): per expert gate rows, then
     * up rows): the router's input scale (E), the experts' input norm (E),
     * the two branches' output norms (E), the experts' output scales
     * (n_expert, optional) */
    CALIB_T_GATE_INP_S, CALIB_T_PRE_NORM_2, CALIB_T_POST_NORM_1, CALIB_T_POST_NORM_2,
    CALIB_T_DOWN_EXPS_S,
    CALIB_T_COUNT
};
/* slot sets as bit masks */
#define CALIB_SLOT_BIT(t) ((uint64_t)1 << (t))
/* With fused_gate_up, CALIB_T_WUP is ffn_up.weight of 2*n_ff rows (gate rows
 * first) and CALIB_T_WGATE is absent from the file; the engine hands the two
 * halves out as views. With fused_qkv, CALIB_T_WQ/WK/WV are views into
 * CALIB_T_WQKV. */

/* GGUF name of slot t of layer il of a model of hp into buf
 * ("blk.3.attn_q.weight"; a MoE model's CALIB_T_WGATE is
 * "blk.3.ffn_gate_shexp.weight"). */
void calib__tensor_name(const struct rt_hparams *hp, uint32_t il, enum calib_tslot t, char *buf,
                        size_t n);
/* Elements slot t must have for hp (0 for an absent optional bias is not
 * decided here: see calib__model_has). */
uint64_t calib__slot_elems(const struct rt_hparams *hp, enum calib_tslot t);
/* Whether layer il has slot t (weights and norms always; biases if present). */
bool calib__model_has(const struct calib_model *m, uint32_t il, enum calib_tslot t);
/* Load slot t of layer il as n f32 values into dst (n must equal
 * calib__slot_elems). Errors: MW_E_FORMAT (missing tensor, wrong size),
 * MW_E_IO, MW_E_NOMEM. */
enum mw_status calib__model_load(const struct calib_model *m, uint32_t il, enum calib_tslot t,
                                 float *dst, uint64_t n, struct mw_err *err);
/* Embedding rows: for every i < n_rows, dst[i*n_embd ..] = row ids[i] of
 * token_embd (ids sorted ascending, unique, < n_vocab), streaming the
 * tensor once. */
enum mw_status calib__model_embd_rows(const struct calib_model *m, const int32_t *ids,
                                      uint64_t n_rows, float *dst, struct mw_err *err);
/* rope_freqs.weight (n_rot/2 floats) into dst if the model has it; false
 * if not. */
bool calib__model_has_rope_freqs(const struct calib_model *m);
enum mw_status calib__model_rope_freqs(const struct calib_model *m, float *dst,
                                       struct mw_err *err);
/* LongRoPE (phi3): rope_factors_long.weight (long true) or
 * rope_factors_short.weight, n_rot/2 divisors, into dst; false / MW_E_FORMAT
 * when the model lacks it. */
bool calib__model_has_rope_factors(const struct calib_model *m, bool long_);
enum mw_status calib__model_rope_factors(const struct calib_model *m, bool long_, float *dst,
                                         struct mw_err *err);
/* Rows (ne[1]) of slot t's tensor in layer il (0 if absent): gemma4's FFN
 * width per layer. */
uint64_t calib__model_slot_rows(const struct calib_model *m, uint32_t il, enum calib_tslot t);
/* gemma4's per-layer embeddings: rows ids[i] (sorted, unique) of
 * per_layer_token_embd (n_layer * P floats each) into dst; k = 1:
 * per_layer_model_proj (n floats), k = 2: per_layer_proj_norm. Errors:
 * MW_E_FORMAT (missing, wrong size), MW_E_IO. */
enum mw_status calib__model_ple_rows(const struct calib_model *m, const int32_t *ids,
                                     uint64_t n_rows, float *dst, struct mw_err *err);
enum mw_status calib__model_ple_load(const struct calib_model *m, int k, float *dst, uint64_t n,
                                     struct mw_err *err);

// --- corpus (calib_corpus.c) ---

/* calib_corpus_parse with a cap on the decompressed size (fuzzing). */
enum mw_status calib__corpus_parse_capped(const void *buf, uint64_t n, const char *name,
                                          enum calib_corpus_fmt fmt, uint64_t max_bytes,
                                          struct calib_corpus **out, struct mw_err *err);
/* Offset of the first invalid UTF-8 sequence in s[0, n), or n if valid. */
size_t calib__utf8_check(const uint8_t *s, size_t n);

// --- the forward engine (calib_forward.c and its parts) ---
/*
 * calib_run's state, shared by the files of the engine:
 *   calib_forward.c  the run and the layer loop: row ops, GEMMs, attention,
 *                    SwiGLU, the fused and staged passes, embedding, RoPE
 *   calib_stats.c    the statistics handle, its imatrix entries, accumulation
 *   calib_layer.c    the per-layer callback API (calib_layer_*), Hessians
 *   calib_moe.c      the mixture-of-experts FFN
 *   calib_spill.c    lean mode (--max-memory): hidden states, attention
 *                    outputs and parked weights in unlinked scratch files
 *   calib_plan.c     memory planning: samples per batch, lean or not, peak bytes
 */

struct calib_stats {
    uint32_t n_layer, n_samples, n_pos;
    bool fused_qkv, fused_gate_up; /* names of the imatrix entries (calib_stats_entry) */
    struct rt_hparams hp;        /* the model's: which weights each layer has */
    uint32_t n_expert;           /* MoE: experts per layer (0: dense) */
    bool shexp;                  /* MoE: a shared expert (qwen2moe) */
    struct calib_group_stats *g; /* (n_layer, CALIB_G_COUNT) */
    double *buf;
    struct calib_group_stats *xg; /* MoE: (n_layer, 2 (FFN_IN, FFN_DOWN), n_expert) */
    double *xbuf;
    /* gemma4's per-layer inputs: (n_layer, 2) inp_gate's input (the residual, E)
     * and proj's (P), and per_layer_model_proj's (the scaled embedding, E) */
    struct calib_group_stats *pl, plm;
    double *plbuf;
    /* gemma4 with experts: (n_layer) the router's input, RMSNorm(x) / sqrt(E)
     * * ffn_gate_inp.scale (no stored norm makes it) */
    struct calib_group_stats *rtr;
    double *rtrbuf;
    bool *no_v; /* gemma4: (n_layer) no attn_v (attention_k_eq_v), or NULL */
    struct calib_timing tm;
};

#define CALIB_STAGE_NONE (-1)          /* outside callbacks (engine work, on_layer) */
#define CALIB_XCHUNK MW_BLAS_TILE_M    /* MoE: rows per expert chunk (a fixed tiling) */

struct calib_engine;

struct calib_layer {
    struct calib_engine *e;
    uint32_t il;
    int stage;            /* group whose callback runs, or CALIB_STAGE_NONE */
    bool ffn_phase;       /* hs already holds the attention output */
    uint64_t live;        /* slots handed out mutable in this callback (CALIB_SLOT_BIT) */
    bool xo_stale;
    float *H[CALIB_G_ALL];
    bool H_valid[CALIB_G_ALL];
    char names[CALIB_W_COUNT][GGUF_MAX_NAME + 1];
    int32_t expert;       /* MoE: the expert whose callback runs, or -1 */
    char xnames[3][GGUF_MAX_NAME + 1]; /* ffn_{gate,up,down}_exps.weight */
};

struct calib_engine {
    const struct calib_model *m;
    const struct rt_hparams *hp;
    const struct calib_samples *s;
    struct mw_pool *pool;
    uint32_t n_samples, n_pos, spb;
    uint64_t T, rows_b;
    uint64_t E, Q, KV, F, hd;  /* F: n_ff; a MoE model's shared expert's (0: none) */
    /* the current layer: a gated delta net (rec) or attention; AO: the width
     * of its ATTN_OUT group (Q, or the delta net's Hv*S); AOmax: the widest
     * over the layers (buffers) */
    bool rec;
    uint64_t AO, AOmax;
    /* gated delta net: conv channels C, key heads Hk, value heads Hv, head
     * width Sd, taps Kc; gated attention: the q rows hold 2 Q (q, gate per head) */
    uint64_t C, Hk, Hv, Sd, Kc;
    uint32_t n_rep;
    /* mixture of experts: experts, used per row, one expert's width;
     * per MoE layer the routing of every row, the FFN output summed before
     * the residual, the rows of the current expert, and chunk scratch */
    uint64_t NX, K, FX;
    int32_t *sel;    /* (T, K) routed experts */
    float *wt;       /* (T, K) their weights */
    float *sgate;    /* (T) qwen2moe: the shared expert's gate logit */
    float *acc;      /* (T, E) */
    float *acc2;     /* (T, E) gemma4: the dense MLP's output, normed */
    struct calib_group_stats *xall; /* gemma4: the experts' common input (CALIB_EXPERT_ALL) */
    uint64_t *xrow;  /* (T) rows routed to the current expert, ascending */
    float *xw;       /* (T) their weights */
    uint64_t xn;
    float *lg;       /* (rows_b, NX) router logits */
    float *xe, *ge, *ue, *ye; /* CALIB_XCHUNK rows: normed input, gate (then act), up, output */
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
    float *qg;    /* (rows_b, max(2Q, C)): gated q rows, or attn_qkv's output */
    float *gt;    /* (rows_b, AOmax): the attention gate, or the delta net's z */
    float *ba;    /* (rows_b, 2 Hv): beta logits | alpha, then the gates g | beta */
    float *cst;   /* (n_threads, C (K-1) + S S): conv state and recurrent state */
    float *one;   /* (n_pos, Q): one sample's attention output */
    float *w[CALIB_T_COUNT];   /* views (fused parts point into their tensor); NULL:
                                * parked (lean) */
    float *wown[CALIB_T_COUNT]; /* the buffers loaded from the model */
    /* lean mode (--max-memory): the hidden states (hs_file), the
     * attention outputs (xo_fd) and the layer's seven big weights (w_fd, f32
     * at woff[owner]) live in unlinked scratch files; the engine's GEMMs
     * stream a parked weight in panels of whole 256-column tiles of mw_gemm
     * (the same bits); a callback's calib_layer_weight makes one resident
     * until calib_layer_weight_release or the callback's end. */
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
    /* gemma4 (calib_g4fwd.c): hp is the current layer's copy hpl (its head
     * size, kv heads, FFN width and rotated dims); the per-layer inputs pl
     * (T, n_layer * P); the K/V of the layers the shared-KV layers read, by
     * kind (0 full, 1 sliding), (T, KV) each, kept for the run; mix_r0: the
     * first row of the samples the mixer runs on; pg: (rows_b, P) scratch */
    bool g4;
    bool ple_cb; /* calib_run_opts.ple_groups with callbacks, and per-layer inputs */
    struct rt_hparams hpl;
    uint64_t P;
    float *pl, *kv_k[2], *kv_v[2], *pg;
    uint64_t mix_r0;
};

static inline uint64_t calib__max3(uint64_t a, uint64_t b, uint64_t c)
{
    const uint64_t m = a > b ? a : b;
    return m > c ? m : c;
}

/* samples in the batch that starts at sample s0 */
static inline uint32_t calib__batch_samples(const struct calib_engine *e, uint32_t s0)
{
    return e->n_samples - s0 < e->spb ? e->n_samples - s0 : e->spb;
}

/* hidden-state row r0: in memory, or in the batch loaded from the scratch file */
static inline float *calib__hs_at(const struct calib_engine *e, uint64_t r0)
{
    return e->hs_file ? e->hsb + (r0 - e->hsb_r0) * e->E : e->hs + r0 * e->E;
}

// --- the engine's steps (calib_forward.c) ---

/* floats for n (a * b) elements, the product checked; NULL and *ok false on
 * failure, nothing allocated once *ok is false */
float *calib__alloc_f(uint64_t n, bool *ok);
float *calib__alloc_f2(uint64_t a, uint64_t b, bool *ok);

/* row-parallel small ops: RMSNorm, RoPE and SwiGLU are the runtime's own
 * (runtime/rt_ops.h) */
enum calib_row_op {
    CALIB_OP_NORM,   /* dst = rmsnorm(src) * w        (E) */
    CALIB_OP_ADD,    /* dst += src                     (n) */
    CALIB_OP_BIAS,   /* dst += w                       (n per row) */
    CALIB_OP_ROPE,   /* q/k norm (qk_norm), rope q and k rows (pos = row0 + r mod n_pos),
                      * queries times q_mul */
    CALIB_OP_SWIGLU, /* dst = act(dst) * src           (F; SiLU or GELU-tanh) */
    CALIB_OP_GNORM,  /* dst = rmsnorm(hs[idx[r]]) * w  (E; gathered rows, MoE) */
};
struct calib_row_job {
    struct calib_engine *e;
    enum calib_row_op op;
    uint64_t n_rows, n;   /* rows, elements per row */
    uint64_t row0;        /* first row's index within its sample sequence (ROPE) */
    float *dst;
    const float *src;
    const float *w;
    const uint64_t *idx;  /* CALIB_OP_GNORM */
};
/* a calib_row_job's rows split over the pool's threads (mw_pool_run) */
void calib__row_task(void *arg, unsigned ith, unsigned nth);
void calib__run_rows(struct calib_engine *e, enum calib_row_op op, uint64_t n_rows, uint64_t n,
                     float *dst, const float *src, const float *w, uint64_t row0);
/* Y (nr, n_out, row stride ldy) = X (nr, n_in) W^T in mw_gemm's fixed
 * tiles, row tiles of `tile` rows; timed in the statistics */
void calib__gemm(struct calib_engine *e, const float *X, uint64_t nr, uint64_t n_in,
                 const float *W, uint64_t n_out, float *Y, uint64_t ldy, uint64_t tile);
/* Y (nr, n_out) = X (nr, n_in) W^T (+ bias); X's first row starts a sample */
void calib__linear(struct calib_engine *e, const float *X, uint64_t nr, uint64_t n_in,
                   const float *W, const float *bias, uint64_t n_out, float *Y, uint64_t ldy);
/* the same with slot t's weight and slot b's bias, resident or parked (lean) */
enum mw_status calib__linear_w(struct calib_engine *e, const float *X, uint64_t nr, uint64_t n_in,
                               enum calib_tslot t, enum calib_tslot b, uint64_t n_out, float *Y,
                               uint64_t ldy, struct mw_err *err);
/* nr rows of hs from row r0 -> normed by slot norm into dst */
void calib__norm_rows(struct calib_engine *e, uint64_t r0, uint64_t nr, enum calib_tslot norm,
                      float *dst);
/* attention of ns whole samples whose normed input is X (ns*n_pos, E) ->
 * out (ns*n_pos rows, Q, row stride ldo) */
enum mw_status calib__attention(struct calib_engine *e, const float *X, uint32_t ns, float *out,
                                uint64_t ldo, struct mw_err *err);
/* the current layer's mixer over ns whole samples: attention, or the gated
 * delta net (calib_ssm.c) -> out (ns*n_pos rows, AO, row stride ldo) */
enum mw_status calib__mixer(struct calib_engine *e, const float *X, uint32_t ns, float *out,
                            uint64_t ldo, struct mw_err *err);
/* the current layer's output projection: attn_output, or ssm_out */
static inline enum calib_tslot calib__wo(const struct calib_engine *e)
{
    return e->rec ? CALIB_T_SSM_OUT : CALIB_T_WO;
}
/* SwiGLU of nr rows of normed input X -> e->g (nr, F) */
enum mw_status calib__swiglu(struct calib_engine *e, const float *X, uint64_t nr,
                             struct mw_err *err);
/* the sandwich norm (gemma) of the block whose output projection is w, in
 * place over nr rows of Y (E wide) */
void calib__post_norm(struct calib_engine *e, enum calib_tslot w, float *Y, uint64_t nr);
/* attn_qkv, ffn_up, the seven projections: the tensors lean mode parks */
bool calib__big_slot(enum calib_tslot t);
/* The tensor that holds slot t (fused parts: attn_qkv, ffn_up), and t's
 * first row in it */
enum calib_tslot calib__owner_of(const struct calib_engine *e, enum calib_tslot t,
                                 uint64_t *row0);
/* the views of the fused parts into their owner's buffer */
void calib__set_views(struct calib_engine *e);
/* on_stage's event (name, start or end) of a layer */
void calib__stage_ev(const struct calib_engine *e, const char *name, bool end, uint32_t layer);
/* The dimensions of a run of m over s with o (batch_rows's samples per
 * batch, no memory bound applied yet) */
void calib__engine_dims(struct calib_engine *e, const struct calib_model *m,
                        const struct calib_samples *s, const struct calib_run_opts *o);
/* The same from hyper-parameters and a sample count alone (e->m, e->s stay
 * unset: calib_run_need) */
void calib__engine_dims_hp(struct calib_engine *e, const struct rt_hparams *hp,
                           uint32_t n_samples, uint32_t n_pos, const struct calib_run_opts *o);

// --- gated delta net (calib_ssm.c) ---

/* the delta-net layer over ns whole samples whose normed input is X ->
 * out (ns*n_pos rows, Hv*S, row stride ldo) */
enum mw_status calib__ssm(struct calib_engine *e, const float *X, uint32_t ns, float *out,
                          uint64_t ldo, struct mw_err *err);
/* the engine's delta-net dimensions from hp (all zero for other models) */
void calib__ssm_dims(struct calib_engine *e);
/* floats of one thread's delta-net scratch (e->cst) */
uint64_t calib__ssm_thread_floats(const struct calib_engine *e);

// --- gemma4 (calib_g4fwd.c) ---

/* Buffers, RoPE tables and the per-layer inputs of every row; the
 * statistics of per_layer_model_proj's input (*ok false when a buffer
 * cannot be allocated) */
enum mw_status calib__g4_setup(struct calib_engine *e, bool *ok, struct mw_err *err);
/* e->hp and the engine's widths for layer il */
void calib__g4_layer(struct calib_engine *e, uint32_t il);
/* attention of layer il over ns whole samples (rows from e->mix_r0) */
enum mw_status calib__g4_attention(struct calib_engine *e, const float *X, uint32_t ns,
                                   float *out, uint64_t ldo, struct mw_err *err);
/* after the FFN's residual, hs rows [r0, r0 + nr): the per-layer input and
 * layer_output_scale. ALL: with inp_gate's and proj's statistics (no
 * callbacks); with callbacks, in steps: ACC_IN (inp_gate's input statistics
 * only), ACC_PROJ (proj's), APPLY (the tail, no statistics) */
enum calib_g4_tail_mode {
    CALIB_G4_TAIL_ALL, CALIB_G4_TAIL_ACC_IN, CALIB_G4_TAIL_ACC_PROJ, CALIB_G4_TAIL_APPLY
};
enum mw_status calib__g4_tail(struct calib_engine *e, uint64_t r0, uint64_t nr,
                              enum calib_g4_tail_mode mode, struct mw_err *err);
/* proj's input of rows [r0, r0 + nr) (x: their residual): gelu(inp_gate . x)
 * * pl_l, (nr, P) into dst */
void calib__g4_proj_in(struct calib_engine *e, const float *x, uint64_t r0, uint64_t nr,
                       float *dst);
void calib__g4_free(struct calib_engine *e);
/* the statistics' per-layer-input groups (st->pl, st->plm) */
enum mw_status calib__g4_stats_alloc(struct calib_engine *e, struct mw_err *err);
/* gemma4 with experts (calib_g4moe.c): batch rows [r0, r0 + nr) (their
 * residual in hs): the router's input (its statistics), logits and routing;
 * the dense MLP's output in y normed by post_ffw_norm_1 into acc2; the two
 * branches joined into the residual, then calib__g4_tail */
void calib__g4_route(struct calib_engine *e, uint64_t r0, uint64_t nr);
void calib__g4_dense_out(struct calib_engine *e, uint64_t r0, uint64_t nr);
enum mw_status calib__g4_join(struct calib_engine *e, uint64_t r0, uint64_t nr,
                              struct mw_err *err);
/* gemma4 with callbacks: the CALIB_EXPERT_ALL call (the experts' common
 * input's statistics, then on_group(FFN_IN)) */
enum mw_status calib__g4_experts_all(struct calib_engine *e, const struct calib_run_opts *o,
                                     struct mw_err *err);
/* the statistics of the router's input (st->rtr) */
enum mw_status calib__g4_moe_stats_alloc(struct calib_engine *e, struct mw_err *err);
/* causal softmax of a P x P score block (calib_forward.c) */
void calib__softmax_causal(const struct calib_engine *e, float *S, uint64_t P, float scale,
                           float cap);

// --- statistics (calib_stats.c) ---

/* e->st for the engine's dimensions, zeroed */
enum mw_status calib__stats_alloc(struct calib_engine *e, struct mw_err *err);
/* group g of the current layer (MoE: of expert ex) += nr rows of X */
void calib__accum(struct calib_engine *e, enum calib_group g, const float *X, uint64_t nr);
void calib__accum_x(struct calib_engine *e, enum calib_group g, uint64_t ex, const float *X,
                    uint64_t nr);
/* gs += nr rows of X */
void calib__accum_gs(struct calib_engine *e, struct calib_group_stats *gs, const float *X,
                     uint64_t nr);

// --- the layer callback API (calib_layer.c) ---

/* e->ly for layer il: no callback running, no expert, names set */
void calib__layer_reset(struct calib_engine *e, uint32_t il);
/* o->on_group for group g of the current layer (lean: what the callback
 * held is parked again afterwards) */
enum mw_status calib__call_group(struct calib_engine *e, const struct calib_run_opts *o,
                                 enum calib_group g, struct mw_err *err);

// --- mixture of experts (calib_moe.c) ---

/* The FFN of a MoE layer; cb: with on_group callbacks */
enum mw_status calib__moe_ffn(struct calib_engine *e, const struct calib_run_opts *o, bool cb,
                              struct mw_err *err);
/* the per-layer routing buffers freed */
void calib__moe_free(struct calib_engine *e);
/* the run's MoE batch and chunk scratch (*ok false on failure), freed with
 * the engine */
void calib__moe_scratch(struct calib_engine *e, bool *ok);
/* rows [c0, c0 + n) of the current expert's list: xe = their normed input;
 * with act also ge = act(xe Wgate^T) * (xe Wup^T) */
void calib__moe_expert_chunk(struct calib_engine *e, uint64_t c0, uint64_t n, bool act);

// --- lean mode (calib_spill.c) ---

/* n bytes at off of a scratch file <-> buf; what names the file's content */
enum mw_status calib__spill_io(int fd, const char *path, bool write, uint64_t off, void *buf,
                               uint64_t n, const char *what, struct mw_err *err);
/* read: hidden-state rows [r0, r0 + nr) of the scratch file -> hsb (the
 * window starts at r0); write: those rows, which must lie in the window,
 * back to the file */
enum mw_status calib__hs_io(struct calib_engine *e, bool write, uint64_t r0, uint64_t nr,
                            struct mw_err *err);
/* hidden-state rows [r0, r0 + nr) (nr <= rows_b) available through calib__hs_at */
enum mw_status calib__hs_need(struct calib_engine *e, uint64_t r0, uint64_t nr,
                              struct mw_err *err);
/* attention outputs X_o rows [r0, r0 + nr) <-> buf (the scratch file) */
enum mw_status calib__xo_io(struct calib_engine *e, bool write, uint64_t r0, uint64_t nr,
                            float *buf, struct mw_err *err);
/* owner slot o resident (read back from the weights file) / back to the
 * weights file (written if changed) and freed; no-ops outside lean mode */
enum mw_status calib__w_resident(struct calib_engine *e, enum calib_tslot o, struct mw_err *err);
enum mw_status calib__w_park(struct calib_engine *e, enum calib_tslot o, struct mw_err *err);
enum mw_status calib__park_all(struct calib_engine *e, struct mw_err *err);
/* Y = X W_t^T for parked slot t, streamed from the weights file in panels */
enum mw_status calib__spill_gemm(struct calib_engine *e, const float *X, uint64_t nr,
                                 uint64_t n_in, enum calib_tslot t, uint64_t n_out, float *Y,
                                 uint64_t ldy, struct mw_err *err);
/* floats of the panel buffer */
uint64_t calib__panel_floats(const struct calib_engine *e);
/* the scratch files (reserved now: a full disk fails here) and the lean
 * buffers (*ok false when one cannot be allocated) */
enum mw_status calib__spill_open(struct calib_engine *e, const struct calib_run_opts *o,
                                 bool *ok, struct mw_err *err);
void calib__spill_close(struct calib_engine *e);

// --- memory planning (calib_plan.c) ---

/* Samples per batch under o->max_memory, and whether the run is lean
 * (*file); 0: the bound cannot be met (err, which may be NULL, says why) */
uint32_t calib__plan_batch(const struct calib_engine *e, const struct calib_run_opts *o,
                           bool *file, struct mw_err *err);

#endif /* MW_CALIB_INT_H */
