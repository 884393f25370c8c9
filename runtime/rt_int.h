/*
 * runtime/rt_int.h — internals shared by the runtime's files (model,
 * forward pass, attention, context, KV cache, thread pool). Not for use
 * outside runtime/ and its tests.
 */
#ifndef MW_RT_INT_H
#define MW_RT_INT_H

#include <pthread.h>
#include <stdatomic.h>

#include "runtime/rt.h"
#include "runtime/rt_ops.h"
#include "core/mw_pool.h"
#include "runtime/rt_kernels.h"

// --- model ---

/* A 2-D weight: n_out rows of n_in elements of type `type`, row-major,
 * borrowed from the mapping. */
struct rt_weight {
    const uint8_t *data;
    uint32_t type;
    uint64_t n_in;      /* ne[0] */
    uint64_t n_out;     /* ne[1] */
    uint64_t row_bytes;
    const struct rt_kernel *k;  /* dot kernel for this type */
    const char *name;   /* the tensor's name (owned by the gguf file) */
    uint64_t slab_bytes;/* 3-D expert tensor {n_in, n_out, n_expert}: bytes of one expert's
                         * matrix (expert e starts at data + e * slab_bytes); else 0 */
};

struct rt_layer {
    const float *attn_norm; /* (n_embd) */
    const float *ffn_norm;  /* (n_embd) */
    /* optional biases (NULL when absent) */
    const float *bq;        /* (n_head*hd) */
    const float *bk, *bv;   /* (n_head_kv*hd) */
    const float *bo;        /* (n_embd) */
    const float *bgate, *bup; /* (n_ff) */
    const float *bdown;     /* (n_embd) */
    /* gpt-oss (NULL elsewhere) */
    const float *attn_sinks;  /* (n_head) per-head logit in the softmax denominator only */
    const float *b_gate_inp;  /* (n_expert) router bias */
    const float *bgate_exps, *bup_exps; /* (n_expert, n_ff_exp) expert biases */
    const float *bdown_exps;  /* (n_expert, n_embd) */
    const float *q_norm, *k_norm;  /* (head_dim) qwen3/gemma3, else NULL */
    const float *attn_post_norm;   /* (n_embd) gemma, else NULL */
    const float *ffn_post_norm;    /* (n_embd) gemma, else NULL */
    union {
        struct { /* attention (full-attention layers of the hybrid archs: wq has
                  * 2*n_head*hd rows, per head q then its gate) */
            struct rt_weight wq;    /* (n_head*hd rows, n_embd) */
            struct rt_weight wk;    /* (n_head_kv*hd rows, n_embd) */
            struct rt_weight wv;    /* (n_head_kv*hd rows, n_embd) */
            struct rt_weight wo;    /* (n_embd rows, n_head*hd) */
        };
        struct { /* gated delta net (rt_layer_is_recurrent) */
            struct rt_weight ssm_qkv;   /* attn_qkv: (conv channels rows, n_embd) q | k | v */
            struct rt_weight ssm_z;     /* attn_gate: (d_inner rows, n_embd) the output gate z */
            struct rt_weight ssm_beta;  /* (Hv rows, n_embd); qwen3next: ssm_ba (2*Hv rows) */
            struct rt_weight ssm_alpha; /* (Hv rows, n_embd); absent for qwen3next */
            struct rt_weight ssm_out;   /* (n_embd rows, d_inner) */
        };
    };
    struct rt_weight wgate; /* (n_ff rows, n_embd) */
    struct rt_weight wup;   /* (n_ff rows, n_embd) */
    struct rt_weight wdown; /* (n_embd rows, n_ff) */
    /* MoE (hp.n_expert > 0; wgate/wup/wdown are then qwen2moe's shared expert
     * ffn_*_shexp with n_ff_shexp rows, or absent: data NULL) */
    struct rt_weight gate_inp;       /* router: (n_expert rows, n_embd) */
    struct rt_weight gate_exps;      /* expert 0's (n_ff_exp rows, n_embd), slab_bytes apart */
    struct rt_weight up_exps;        /* (n_ff_exp rows, n_embd) per expert */
    struct rt_weight down_exps;      /* (n_embd rows, n_ff_exp) per expert */
    struct rt_weight gate_inp_shexp; /* qwen2moe: (1 row, n_embd), the shared expert's gate */
    /* gated delta net (rt_layer_is_recurrent; its matrices are in the union above) */
    const float *ssm_conv;      /* (conv channels, K) taps, tap 0 the oldest */
    const float *ssm_dt;        /* (Hv) dt bias */
    const float *ssm_a;         /* (Hv) -exp(A_log) */
    const float *ssm_norm;      /* (S) gated output norm */
    uint32_t rec;               /* index among the recurrent layers (its state) */
};

/* Gemma 4's pieces beside struct rt_layer (rt_model_gemma4.c). */
struct rt_g4_layer {
    struct rt_weight inp_gate;  /* (P rows, n_embd) per-layer input gate; data NULL without PLE */
    struct rt_weight proj;      /* (n_embd rows, P) per-layer projection */
    const float *post_norm;     /* (n_embd) after the projection */
    float out_scale;            /* layer_output_scale (1 when absent) */
    const float *pre_norm_2;    /* (n_embd) MoE layers: the experts' input norm */
    const float *post_norm_1;   /* (n_embd) the dense MLP's output norm */
    const float *post_norm_2;   /* (n_embd) the experts' output norm */
    const float *gate_inp_s;    /* (n_embd) router input scale */
    const float *down_exps_s;   /* (n_expert) per-expert output scale */
    uint32_t n_ff;              /* this layer's dense MLP width */
};
struct rt_g4 {
    struct rt_weight ple_tok;   /* per_layer_token_embd: n_vocab rows of n_layer * P, mapped,
                                 * one row decoded per token (data NULL without PLE) */
    struct rt_weight ple_proj;  /* per_layer_model_proj: (n_layer * P rows, n_embd) */
    const float *ple_norm;      /* (P) per_layer_proj_norm */
    struct rt_g4_layer *layers; /* (n_layer) */
};

struct rt_model {
    struct gguf_file *own;     /* opened by rt_model_open, else NULL */
    const struct gguf_file *f;
    struct rt_hparams hp;
    const struct rt_kernels *ks;
    struct rt_weight tok_embd; /* (n_vocab rows, n_embd); rows decoded with quant's to_float */
    struct rt_weight output;   /* (n_vocab rows, n_embd); == tok_embd when tied */
    const float *output_norm;  /* (n_embd) */
    const float *rope_freqs;   /* (n_rot/2) or NULL */
    const float *rope_long;    /* (n_rot/2) phi3 LongRoPE factors, or NULL */
    const float *rope_short;   /* (n_rot/2) */
    struct rt_layer *layers;   /* (n_layer) */
    float *fbuf;               /* every owned f32 vector, one allocation */
    uint64_t fbuf_floats;
    uint64_t weight_bytes;
    uint64_t expert_bytes;      /* of which the 3-D expert tensors */
    uint64_t expert_slab_bytes; /* one expert's matrix of each of them, summed */
    uint32_t main_type;
    bool locked;
    uint64_t copied_bytes;     /* dense weights moved to huge pages (rt_load.c) */
    struct rt_g4 *g4;          /* gemma4 only, else NULL */
};

/* Archs whose every layer is a mixture-of-experts FFN. */
static inline bool rt__arch_is_moe(enum rt_arch a)
{
    return a == RT_ARCH_QWEN2MOE || a == RT_ARCH_QWEN3MOE || a == RT_ARCH_QWEN35MOE ||
           a == RT_ARCH_QWEN3NEXT || a == RT_ARCH_GPTOSS;
}
/* Archs with gated delta net layers (rt_model_ssm.c's loader, rt_ssm.c). */
static inline bool rt__arch_is_ssm(enum rt_arch a)
{
    return a == RT_ARCH_QWEN35 || a == RT_ARCH_QWEN35MOE || a == RT_ARCH_QWEN3NEXT;
}

// --- thread pool: core/mw_pool.h ---

/* [lo, hi) of n items for thread ith of nth (contiguous, balanced). */
static inline void rt__split(uint64_t n, unsigned ith, unsigned nth, uint64_t *lo, uint64_t *hi)
{
    *lo = n * ith / nth;
    *hi = n * (ith + 1) / nth;
}

// --- KV cache (rt_kv.c) ---

struct rt_kv {
    enum rt_kv_type type;
    uint32_t n_ctx;
    uint32_t n_layer;
    uint32_t kv_dim;         /* n_head_kv * head_dim elements per position */
    uint64_t row_bytes;      /* bytes of one position's K (or V) row of one layer */
    uint8_t *k;              /* per layer cap[il] rows of kv_dim in `type`, layer after layer */
    uint8_t *v;              /* the same for V */
    uint64_t *row0;          /* (n_layer) first row of layer il */
    uint32_t *cap;           /* (n_layer) rows of layer il: n_ctx, or for a sliding layer
                              * the ring min(n_ctx, n_swa - 1 + n_batch); position p
                              * lives in row p % cap */
    const struct quant_traits *q8; /* Q8_0 traits (for q8_0 caches) */
    bool f16c;               /* x86-64 with AVX2/F16C (rt_cpu.avx2): vector f16 <-> f32 */
    bool avx512;             /* x86-64 with the AVX-512 table (rt_cpu.avx512): zmm attention */
};

/* Rows layer il keeps (see struct rt_kv). */
static inline uint32_t rt__kv_layer_cap(const struct rt_hparams *hp, uint32_t il, uint32_t n_ctx,
                                        uint32_t n_batch)
{
    if (rt_layer_is_recurrent(hp, il)) return 0; /* its state lives in rt_ctx */
    if (!rt_layer_has_kv(hp, il)) return 0;      /* gemma4: reads an earlier layer's */
    if (!rt_layer_is_swa(hp, il)) return n_ctx;
    const uint64_t ring = (uint64_t)hp->n_swa - 1 + n_batch;
    return ring < n_ctx ? (uint32_t)ring : n_ctx;
}
/* Bytes of the K and V caches together for hp at n_ctx positions, steps of
 * at most n_batch tokens (every sliding layer a ring). */
uint64_t rt__kv_bytes(enum rt_kv_type t, const struct rt_hparams *hp, uint32_t n_ctx,
                      uint32_t n_batch, uint32_t kv_dim, bool *ok);
enum mw_status rt__kv_init(struct rt_kv *kv, enum rt_kv_type t, const struct rt_hparams *hp,
                           uint32_t n_ctx, uint32_t n_batch, uint32_t kv_dim,
                           struct mw_err *err);
void rt__kv_free(struct rt_kv *kv);
/* Row of layer il at position pos. */
static inline uint64_t rt__kv_row(const struct rt_kv *kv, uint32_t il, uint32_t pos)
{
    const uint32_t cap = kv->cap[il];
    return kv->row0[il] + (pos < cap ? pos : pos % cap); /* (no division for full layers) */
}
static inline uint8_t *rt__kv_k(const struct rt_kv *kv, uint32_t il, uint32_t pos)
{
    return kv->k + rt__kv_row(kv, il, pos) * kv->row_bytes;
}
static inline uint8_t *rt__kv_v(const struct rt_kv *kv, uint32_t il, uint32_t pos)
{
    return kv->v + rt__kv_row(kv, il, pos) * kv->row_bytes;
}
/* Store kv_dim floats as a cache row. */
void rt__kv_store(const struct rt_kv *kv, uint8_t *row, const float *x);
/* Decode a cache row (elements [off, off+n), off and n multiples of 32 for
 * q8_0) to floats. */
void rt__kv_load(const struct rt_kv *kv, const uint8_t *row, uint32_t off, uint32_t n,
                 float *out);


// --- context (rt_ctx.c; the shift lives in rt_kv.c) ---

#define RT_ACT_SLOTS 3 /* distinct activation formats one input may need */

#define RT_FA_TILE 64 /* llama.cpp's GGML_FA_TILE_Q and GGML_FA_TILE_KV */
#define RT_FA_QT 16   /* query tokens that share one tile's converted K and V rows */

struct rt_thread_scratch {
    float *kq;      /* (RT_FA_QT * n_rep, RT_FA_TILE) attention scores of one KV tile */
    float *vt;      /* (RT_FA_TILE, head_dim) decoded V rows of one KV tile */
    float *kt;      /* (RT_FA_TILE, head_dim) decoded K rows of one KV tile */
    float *acc;     /* (RT_FA_QT * n_rep, head_dim) f32 attention output accumulators */
    uint16_t *acc16;/* (n_rep, head_dim) f16 accumulators (llama.cpp's VKQ16) */
    float *ms;      /* (2, RT_FA_QT * n_rep) running max and sum per query head */
    uint8_t *qact;  /* (n_rep) query heads in the K cache's activation format */
    uint64_t qact_stride;
    float *tile;    /* (n_batch, RT_TILE) products before they are added */
    uint8_t *gemm_raw; /* RT_GEMM_SCRATCH + 64 bytes; gemm is its 64-aligned start */
    void *gemm;     /* rt_gemm's scratch (decoded weight blocks, partial sums) */
    int32_t *idx;   /* (n_expert) MoE: the router's argsort */
    uint8_t *moe_gather; /* (n_batch, act_stride) MoE: one expert's activation rows */
};

struct rt_ctx {
    const struct rt_model *m;
    const struct rt_kernels *ks;
    struct mw_pool *pool;
    struct rt_kv kv;
    uint32_t n_ctx, n_batch, n_past;
    uint32_t kv_lost;  /* > 0: a sliding layer's ring no longer holds the positions below
                        * (after rt_ctx_truncate); rt_eval refuses a window that needs them */
    unsigned n_threads;
    /* activations of one step, B = n_batch rows each */
    float *x;      /* (B, n_embd) residual stream */
    float *xb;     /* (B, xb_ld) normed input / attention output */
    uint64_t xb_ld;/* max(n_embd, n_head*hd) */
    float *q;      /* (B, n_head*hd) */
    float *k, *v;  /* (B, n_head_kv*hd) */
    float *hb;     /* (B, n_ff) gate, then silu(gate)*up */
    float *hb2;    /* (B, n_ff) up */
    float *rope;   /* (n_rope, B, n_rot) cos/sin table per token, one per set of layer
                    * RoPE parameters (2 when sliding layers have their own) */
    uint32_t n_rope;
    struct rt_rope_params rope_p[2]; /* per table: [0] other layers, [1] sliding layers */
    const float *rope_ff;  /* frequency factors for this context (rope_freqs, or phi3's
                            * long/short LongRoPE factors as llama.cpp picks them) */
    float q_mul, kq_scale; /* rt_attn_scales */
    float *logits_last; /* (n_vocab) */
    uint8_t *act[RT_ACT_SLOTS]; /* (B, act_stride) quantized activations */
    uint32_t act_type[RT_ACT_SLOTS];
    uint64_t act_stride;
    struct rt_thread_scratch *ts; /* (n_threads) */
    /* MoE (hp.n_expert > 0; NULL otherwise). K = n_expert_used; a "pair" p =
     * b*K + j is token b's j-th selected expert (llama.cpp's top-k order) */
    float *moe_probs;    /* (B, n_expert) router logits, then softmax probabilities */
    int32_t *moe_sel;    /* (B*K) selected experts */
    float *moe_w;        /* (B*K) their weights */
    float *moe_sgate;    /* (B) qwen2moe: the shared expert's gate logit */
    uint32_t *moe_order; /* (B*K) pairs grouped by expert (token order within one) */
    uint32_t *moe_first; /* (n_expert+1) expert e's pairs: moe_order[first[e] .. first[e+1]) */
    uint32_t *moe_active;/* (n_expert) experts with at least one pair, ascending */
    uint32_t moe_n_active;
    float *moe_hg, *moe_hu; /* (B*K, n_ff_exp) gate and up outputs per pair */
    uint8_t *moe_act;    /* (B*K, act_stride) quantized down inputs per pair */
    float *moe_out;      /* (B*K, n_embd) down outputs per pair */
    uint64_t *moe_hits;  /* (n_layer, n_expert) routing counts (rt_ctx_expert_hits) */
    /* K rows are dotted with the query through the kernels: the K cache's
     * type has a kernel (F16: query rounded to f16; Q8_0: query quantized
     * to Q8_0, as llama.cpp's flash attention does) */
    const struct rt_kernel *kdot;
    const struct rt_act_format *kact;
    /* context shift */
    float *shift_row;  /* (kv_dim) */
    float *shift_rope; /* (n_rot) */
    /* gated delta net (hp.full_attn_interval > 0; NULL otherwise): the state of
     * each recurrent layer, and one step's rows */
    uint32_t n_rec;      /* recurrent layers */
    float *conv_state;   /* (n_rec, conv channels, K-1) */
    float *ssm_state;    /* (n_rec, Hv, S, S) M[j][i]: value j, key i */
    bool state_lost;     /* rewound (rt_ctx_truncate) past what the state can undo */
    float *s_qkv;        /* (B, conv channels) projections, then (after the conv) q | k | v */
    float *s_conv;       /* (B, conv channels) conv outputs */
    float *s_z;          /* (B, d_inner) gate z */
    float *s_b, *s_a;    /* (B, 2*Hv) beta (or ssm_ba's rows) and alpha; then beta, g */
    float *s_o;          /* (B, d_inner) delta-net outputs, normed and gated */
    float *qg;           /* (B, 2*n_head*hd) full attention: q and gate rows */
    float *qgate;        /* (B, n_head*hd) the gates */
    float *ple;          /* (B, n_layer * P) gemma4's per-layer inputs of the step */
    uint64_t scratch_bytes;
};

// --- forward pass: the graph (rt_forward.c), the MoE feed-forward (rt_moe.c),
// attention (rt_attn.c: one step's stage and the single-query path;
// rt_attn_tiled.c: the tiled path) ---

/* The vector paths of the attention: x86-64 with AVX2/F16C (function target
 * attributes, taken when rt_kv.f16c) and aarch64 NEON. */
#if defined(__aarch64__) && defined(__ARM_NEON) && !defined(MW_FORCE_SCALAR)
#define RT_FWD_NEON 1
#else
#define RT_FWD_NEON 0
#endif
#if defined(__x86_64__) && defined(__GNUC__) && !defined(MW_FORCE_SCALAR)
#define RT_FWD_X86 1
#else
#define RT_FWD_X86 0
#endif

#define RT_TILE 16 /* weight rows a mat-vec stage applies to every token of a step */

/* The activation slots an input needs for weights ws[0..n): slot_of[i] is
 * the slot of ws[i]; n_slots distinct formats (<= RT_ACT_SLOTS). */
struct rt_act_plan {
    int n_slots;
    const struct rt_act_format *fmt[RT_ACT_SLOTS];
    int slot_of[RT_ACT_SLOTS];
};
void rt__plan_acts(const struct rt_ctx *c, const struct rt_weight *const *ws, int n,
                   struct rt_act_plan *p);

/* Per-token stages: token b of the step is one item. */
enum rt_tok_op {
    RT_OP_NORM_QUANT,   /* xb = rmsnorm(x) * w; quantize xb */
    RT_OP_QUANT,        /* quantize src rows */
    RT_OP_ROPE_STORE,   /* rope q and k, store k and v into the cache */
    RT_OP_SWIGLU_QUANT, /* hb = act(hb) * hb2; quantize hb */
    RT_OP_POST_ADD,     /* x += rmsnorm(src) * w (gemma's post norms) */
    RT_OP_SOFTCAP,      /* dst rows (n floats each): final logit soft-capping */
    RT_OP_GATE_QUANT,   /* xb *= sigmoid(qgate) (gated attention); quantize xb */
};

struct rt_tok_stage {
    struct rt_ctx *c;
    enum rt_tok_op op;
    uint32_t n_tok;
    uint32_t pos0;
    uint32_t il;
    const float *norm_w;
    const float *src;
    uint64_t ld_src;
    uint32_t n;          /* elements per row */
    const struct rt_act_plan *plan;
    /* RT_OP_NORM_QUANT for the logits: rows rows_from .. of x, packed into xb */
    uint32_t row_from;
    float *dst;          /* RT_OP_SOFTCAP */
};
void rt__run_tok(struct rt_ctx *c, struct rt_tok_stage *st);
/* After the last layer's attention only the rows whose logits are asked for
 * go on (llama.cpp's inp_out_ids): rows keep..n_tok-1 of c->x (and of rows,
 * row_len floats each, when not NULL) move to the front; returns their
 * count (0: none is asked for). Every later op is per row, so the kept
 * rows' bits do not change. */
uint32_t rt__keep_out_rows(struct rt_ctx *c, uint32_t n_tok, uint32_t keep, float *rows,
                           uint64_t row_len);

/* y[b*ldy + r] (=|+=) W[r] . act[b] (+ bias[r]) for r < n_out, b < n_tok */
struct rt_mm_job {
    const struct rt_weight *w;
    const uint8_t *act;
    float *y;
    uint64_t ldy;
    const float *bias;
    bool add;
};

/* Up to three products over the same tokens, split in whole tiles of
 * RT_TILE rows across the threads. */
struct rt_mm_stage {
    struct rt_ctx *c;
    uint32_t n_tok;
    int n_job;
    struct rt_mm_job job[3];
};
void rt__run_mm(struct rt_ctx *c, struct rt_mm_stage *st);

/* The gated delta net of recurrent layer il for the step's n_tok tokens at
 * the state after the previous step: x += its output (rt_ssm.c). */
void rt__ssm_layer(struct rt_ctx *c, uint32_t il, uint32_t n_tok);
/* Bytes of the recurrent state of hp (conv + delta net, every recurrent
 * layer); false on overflow (rt_ssm.c). */
bool rt__ssm_state_bytes(const struct rt_hparams *hp, uint64_t *conv_floats,
                         uint64_t *ssm_floats, uint64_t *bytes);
/* rt_delta_net_step through a kernel table's row ops (the scalar ops give
 * its very bits). */
void rt__delta_step(const struct rt_ssm_ops *k, float *M, uint32_t S, const float *q,
                    const float *kv, const float *v, float g, float beta, float *out);
/* Zero the recurrent state (a fresh sequence). */
void rt__ssm_reset(struct rt_ctx *c);

/* gemma4: one step of n_tok tokens (rt_gemma4.c), as rt_forward.c's step;
 * the madvise of its per-layer table (rt_model_gemma4.c). */
void rt__g4_step(struct rt_ctx *c, const int32_t *tok, uint32_t n_tok, uint32_t lfrom, float *lout,
                 bool want_last, bool tiled);
void rt__g4_advise(const struct rt_model *m);
/* Move the runs of dense weights of an rt_model_open'ed model into anonymous
 * huge pages at the same addresses (rt_load.c); returns the bytes moved
 * (0: none, every weight stays mapped). */
uint64_t rt__place_weights(struct rt_model *m);
/* Does the kernel offer transparent huge pages to a region advised
 * MADV_HUGEPAGE (rt_load.c; /sys/kernel/mm/transparent_hugepage/enabled)? */
bool rt__thp_offered(void);
void rt__g4_free(struct rt_model *m);

/* The MoE feed-forward of layer il for the step's n_tok tokens: x += its
 * output (rt_moe.c). */
void rt__moe_ffn(struct rt_ctx *c, uint32_t il, uint32_t n_tok);

/* Attention of layer il for the step's n_tok tokens at positions pos0..,
 * queries in c->q, into c->xb; tiled: the rt_eval call has >= RT_FA_TILE
 * tokens (rt_attn.c). */
void rt__attn(struct rt_ctx *c, uint32_t n_tok, uint32_t pos0, uint32_t il, bool tiled);
/* The tiled path for query tokens b0 .. b0 + nq - 1 (nq <= RT_FA_QT) of the
 * step and kv head g (rt_attn_tiled.c). */
void rt__attn_tiled(const struct rt_ctx *c, struct rt_thread_scratch *ts, uint32_t il, uint32_t g,
                    uint32_t pos0, uint32_t b0, uint32_t nq, float scale);


// --- f16 <-> f32 for hot loops (inline; bit-identical to mw_f16_to_f32 /
// mw_f32_to_f16 — round to nearest even — except that aarch64's FCVT keeps
// NaN payloads where core makes every NaN sign|0x7e00; tested) ---

#include <string.h>

static inline float rt__h2f(uint16_t h)
{
#if defined(__aarch64__)
    __fp16 v;
    memcpy(&v, &h, sizeof v);
    return (float)v; /* FCVT */
#else
    const uint32_t sign = (uint32_t)(h & 0x8000) << 16;
    const uint32_t em = h & 0x7fff;
    uint32_t u;
    if (em >= 0x7c00) {
        u = sign | 0x7f800000u | ((em & 0x3ffu) << 13);
    } else if (em >= 0x0400) {
        u = sign | ((em + 0x1c000u) << 13);
    } else {
        const float v = (float)em * 5.9604644775390625e-08f; /* em * 2^-24, exact */
        memcpy(&u, &v, sizeof u);
        u |= sign;
    }
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
#endif
}

static inline uint16_t rt__f2h(float f)
{
#if defined(__aarch64__)
    const __fp16 v = (__fp16)f; /* FCVT, round to nearest even */
    uint16_t h;
    memcpy(&h, &v, sizeof h);
    return h;
#else
    uint32_t x;
    memcpy(&x, &f, sizeof x);
    const uint32_t sign = x & 0x80000000u;
    x ^= sign;
    uint16_t o;
    if (x >= 0x47800000u) { /* >= 65536: Inf, or NaN made quiet */
        o = x > 0x7f800000u ? 0x7e00 : 0x7c00;
    } else if (x < 0x38800000u) { /* below 2^-14: the f32 adder rounds the subnormal */
        const uint32_t magic_u = (uint32_t)((127 - 15) + (23 - 10) + 1) << 23;
        float fx, magic;
        memcpy(&fx, &x, sizeof fx);
        memcpy(&magic, &magic_u, sizeof magic);
        fx += magic;
        uint32_t r;
        memcpy(&r, &fx, sizeof r);
        o = (uint16_t)(r - magic_u);
    } else { /* normal: rebias, round the 13 dropped bits to nearest even */
        const uint32_t odd = (x >> 13) & 1;
        x += ((uint32_t)(15 - 127) << 23) + 0xfff + odd;
        o = (uint16_t)(x >> 13);
    }
    return (uint16_t)(o | (sign >> 16));
#endif
}

#endif /* MW_RT_INT_H */
