/*
 * runtime/rt.h — memwall's device runtime: runs a llama-family GGUF file
 * (llama, mistral, qwen2, qwen3, gemma2, gemma3, phi3, the gated delta net
 * archs qwen35, qwen35moe and qwen3next, and the mixture-of-experts
 * qwen2moe, qwen3moe and Mixtral (llama with experts) as
 * memwall and llama.cpp's converters write them) on a CPU, the same code on
 * an ARM phone and on the desktop.
 *
 * What it reads: one GGUF v3 file through gguf/ (mmap, read-only; weights
 * are never copied). Before anything runs, rt_model_open() checks every key
 * the graph needs (types and ranges), every tensor it will touch (present,
 * exact shape, a type the kernels handle, data alignment), and every size
 * derived from them (overflow-checked): a hostile file gives an error that
 * names the key or tensor, never a crash.
 *
 * The graph (docs/formats.md §6, llama.cpp's llm_build_llama / llm_build_qwen2):
 *   x = token_embd[tok]
 *   per layer: h = rmsnorm(x)·attn_norm; q,k,v = Wq h (+bq), Wk h (+bk), Wv h (+bv)
 *              RoPE(q,k) at the token's position — "normal" mode (pairs 2i,2i+1;
 *              the converters permute HF q/k rows for it) for llama, NEOX mode
 *              (pairs i, i+n_rot/2) for qwen2; rope_freqs.weight divides the
 *              angles (Llama-3.1 scaling), rope.scaling.type linear scales them
 *              softmax(q·k/sqrt(hd)) over the cache, grouped-query (n_head/n_head_kv
 *              query heads share a kv head); x += Wo attn (+bo)
 *              h = rmsnorm(x)·ffn_norm; x += Wdown (silu(Wgate h) * Wup h)
 *   logits = output · rmsnorm(x)·output_norm   (output = token_embd when absent)
 *
 * The families (llama.cpp's src/models/{qwen3,gemma2,gemma3,phi3}.cpp), all NEOX RoPE:
 *   qwen3:  q and k RMS-normed per head (attn_q_norm / attn_k_norm) before RoPE.
 *   gemma2/3: x = token_embd[tok] * sqrtf(n_embd); sandwich norms: x += rmsnorm(
 *           attn_out)·post_attention_norm and x += rmsnorm(ffn_out)·post_ffw_norm (the
 *           GGUF norms are HF's w + 1); FFN gelu_tanh(gate)·up (ggml's f16 GELU table);
 *           q multiplied by attn_scale after RoPE (1/sqrt(head_dim), the 27B rule);
 *           sliding layers (rt_layer_is_swa) attend to the last n_swa positions
 *           (p - k < n_swa) with their own RoPE base (gemma3: rope.freq_base_swa,
 *           default 10000) and keep a KV ring of n_swa - 1 + n_batch rows; gemma2:
 *           attention scores c·tanh(s/c) (attn_logit_softcapping, default 50) and
 *           logits c·tanh(l/c) (final_logit_softcapping, default 30; gemma3 when set);
 *           gemma3 also has q/k norms. No context shift (MW_E_UNSUPPORTED).
 *   phi3:   attn_qkv.weight (q, k, v rows) or separate q/k/v; ffn_up.weight holds
 *           the gate rows then the up rows: silu(gate)·up; q multiplied by
 *           1/sqrt(head_dim) after RoPE; LongRoPE: rope_factors_long when the
 *           context padded to 256 exceeds rope.scaling.original_context_length,
 *           else rope_factors_short, cos/sin times rope.scaling.attn_factor.
 *           Its sliding_window key is ignored, as llama.cpp does.
 *
 * gpt-oss (llama.cpp's openai-moe.cpp; rt_model_gptoss.c, rt_gptoss.c): q/k/v/o
 * biases, NEOX RoPE under YaRN, per-head attention sinks (a logit in the softmax
 * denominator only), even layers sliding; the MoE input is post_attention_norm,
 * router logits + bias, the top k then softmax over those k, experts with
 * biases and the clamped SwiGLU min(g,7)*sigmoid(1.702*min(g,7))*(clamp(u,-7,7)+1).
 *
 * Mixture of experts (llama.cpp's build_moe_ffn; arch "qwen3moe" = qwen3's
 * attention, "qwen2moe" = qwen2's, "llama" with <arch>.expert_count = Mixtral):
 * every layer's FFN is
 *   p = softmax(ffn_gate_inp · h)                       (n_expert router logits, f32)
 *   sel = the first n_expert_used of argsort(p, descending) (ggml's argsort:
 *         libstdc++'s std::sort, ties broken as it breaks them; rt_ops.h)
 *   w_j = p[sel_j], divided by max(sum_j w_j, 2^-14) for llama and qwen3moe
 *         (qwen2moe keeps them as they are)
 *   out = sum_j w_j * down_e(silu(gate_e h) * up_e h), e = sel_j, summed in top-k order
 *   qwen2moe: out += sigmoid(ffn_gate_inp_shexp · h) * shared_expert(h) (a dense
 *         SwiGLU FFN of ffn_{gate,up,down}_shexp, n_ff_shexp wide)
 *   x += out
 * Expert e's matrices are the e-th slabs of the 3-D ffn_{gate,up,down}_exps
 * tensors, read in place with the same mat-vec kernels as 2-D weights. A
 * step groups its tokens by expert: each routed expert's matrices are read
 * once per step, the others not at all (tests/check_runtime.c counts the
 * resident pages with mincore()).
 *
 * Gated delta net (qwen35, qwen35moe, qwen3next; llama.cpp's qwen35.cpp,
 * qwen35moe.cpp, qwen3next.cpp, delta-net-base.cpp): layer il is recurrent
 * unless (il+1) % full_attention_interval == 0; the MTP blocks after n_layer
 * are not run. A recurrent layer (rt_ssm.c):
 *   qkv = attn_qkv h; z = attn_gate h; beta = sigmoid(ssm_beta h);
 *   g = ssm_a * softplus(ssm_alpha h + ssm_dt.bias)   (qwen3next: one ssm_ba)
 *   y = silu(causal depthwise conv of qkv, K taps, with the conv state)
 *   q, k = L2-normalised heads of y; per value head h (key head h % Hk, or
 *   h / (Hv/Hk) for qwen3next) on its S x S state M: M = e^g M;
 *   d = beta (v - M k); M += d k^T; o = M q / sqrt(S); o = rmsnorm(o)*ssm_norm*silu(z)
 *   x += ssm_out o
 * A full-attention layer: attn_q gives per head q then a gate; q/k norms;
 * NEOX RoPE on n_rot dims (qwen35: IMROPE, the same for text positions);
 * the attention output times sigmoid(gate) before attn_output. The FFN input
 * is post_attention_norm; qwen35moe/qwen3next: experts plus a shared expert
 * times sigmoid(ffn_gate_inp_shexp . h). The state ((K-1) x channels + S x S
 * x Hv floats per recurrent layer) is allocated with the context, constant
 * in n_ctx; it cannot be rewound except to position 0.
 *
 * Memory: the model is the mapping plus a few owned float vectors (norms,
 * biases); a context (rt_ctx) allocates its KV cache, activation scratch,
 * per-thread attention rows and worker threads once in rt_ctx_init(). After
 * that rt_eval() performs no allocation (a test counts malloc calls).
 *
 * Threads: work is split over independent outputs (matrix rows, heads,
 * tokens); no reduction is ever split, so results are bitwise identical for
 * every thread count.
 *
 * Nothing here prints; errors come back as enum mw_status + struct mw_err.
 * Depends on libc, libm and pthreads only (plus core/, gguf/, quant/ and the
 * kernels in rt_kernels.h).
 */
#ifndef MW_RT_H
#define MW_RT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/mw.h"
#include "gguf/gguf.h"

// --- model ---

enum rt_arch {
    RT_ARCH_LLAMA = 0,  /* llama (and mistral): "llama" */
    RT_ARCH_QWEN2 = 1,  /* "qwen2": q/k/v biases, NEOX RoPE */
    RT_ARCH_QWEN3 = 2,  /* "qwen3": per-head q/k RMSNorm, NEOX RoPE */
    RT_ARCH_GEMMA2 = 3, /* "gemma2": sandwich norms, GELU-tanh, soft-capping, SWA */
    RT_ARCH_GEMMA3 = 4, /* "gemma3": sandwich norms, q/k norm, GELU-tanh, SWA with own RoPE base */
    RT_ARCH_PHI3 = 5,   /* "phi3": fused qkv and gate_up, LongRoPE factors */
    RT_ARCH_QWEN2MOE = 6, /* "qwen2moe": qwen2 attention, routed experts + gated shared expert */
    RT_ARCH_QWEN3MOE = 7, /* "qwen3moe": qwen3 attention (q/k norm), routed experts */
    RT_ARCH_QWEN35 = 8,    /* "qwen35": gated delta net layers + gated full attention */
    RT_ARCH_QWEN35MOE = 9, /* "qwen35moe": qwen35 with routed experts + gated shared expert */
    RT_ARCH_QWEN3NEXT = 10, /* "qwen3next": qwen35moe's mixer, V heads not reordered, NEOX RoPE */
    RT_ARCH_GEMMA4 = 11,    /* "gemma4": per-layer embeddings, shared KV, two head sizes,
                             * experts beside the dense MLP (rt_model_gemma4.c, rt_gemma4.c) */
    RT_ARCH_GPTOSS = 12,    /* "gpt-oss": attention sinks, alternating sliding layers, YaRN,
                             * biased experts with softmax over the top-k logits and the
                             * clamped SwiGLU (rt_model_gptoss.c, rt_gptoss.c) */
};

/* FFN gate activation: act(gate) * up. */
enum rt_act { RT_ACT_SILU = 0, RT_ACT_GELU_TANH = 1, RT_ACT_SWIGLU_OAI = 2 /* gpt-oss */ };

/* Hyper-parameters as read and checked from the file. */
struct rt_hparams {
    enum rt_arch arch;
    char arch_name[16];   /* general.architecture */
    char name[64];        /* general.name ("" if absent), truncated */
    uint32_t n_vocab;     /* rows of token_embd (= tokenizer.ggml.tokens count) */
    uint32_t n_embd;      /* <arch>.embedding_length */
    uint32_t n_layer;     /* <arch>.block_count, 1..512 */
    uint32_t n_head;      /* query heads */
    uint32_t n_head_kv;   /* key/value heads; n_head % n_head_kv == 0 */
    uint32_t head_dim;    /* key_length = value_length (default n_embd / n_head) */
    uint32_t n_ff;        /* feed_forward_length */
    uint32_t n_rot;       /* rope.dimension_count (default head_dim; even, <= head_dim) */
    uint32_t n_ctx_train; /* context_length */
    float rms_eps;        /* attention.layer_norm_rms_epsilon */
    float rope_base;      /* rope.freq_base (default 10000) */
    float rope_freq_scale;/* 1 / rope.scaling.factor for linear scaling, else 1 */
    bool rope_neox;       /* qwen2: NEOX pairs */
    bool has_rope_freqs;  /* rope_freqs.weight present */
    bool tied_output;     /* no output.weight: token_embd is the output matrix */
    uint32_t file_type;   /* general.file_type, UINT32_MAX if absent */
    /* --- family features (all zero/false for llama and qwen2) --- */
    enum rt_act act;      /* FFN gate activation (gemma: GELU-tanh) */
    bool qk_norm;         /* qwen3, gemma3: attn_q_norm / attn_k_norm (head_dim) per head, before RoPE */
    bool post_norms;      /* gemma2/3: post_attention_norm on the attention output and
                           * post_ffw_norm on the FFN output, before each residual add */
    bool embd_scale;      /* gemma: embeddings times sqrtf(n_embd) */
    bool fused_qkv;       /* phi3: one attn_qkv.weight (q, then k, then v rows) */
    bool fused_gate_up;   /* phi3: ffn_up.weight holds gate rows then up rows (2*n_ff) */
    float attn_scale;     /* q multiplier before q.k (0: 1/sqrtf(head_dim)) */
    float attn_softcap;   /* gemma2: kq = c*tanh(kq/c) (0: none) */
    float final_softcap;  /* gemma2/3: logits = c*tanh(logits/c) (0: none) */
    uint32_t n_swa;       /* sliding window (0: every layer attends to everything) */
    uint32_t swa_pattern; /* llama.cpp's set_swa_pattern(n): layer il slides iff
                           * n_swa && (n == 0 || il % n < n - 1) (gemma2: 2, gemma3: 6) */
    float rope_base_swa;  /* RoPE base of sliding layers (gemma3: rope.freq_base_swa) */
    uint32_t n_ctx_orig;  /* rope.scaling.original_context_length (0 if absent) */
    bool has_rope_long;   /* phi3: rope_factors_long / rope_factors_short present */
    float rope_attn_factor; /* phi3 LongRoPE: rope.scaling.attn_factor (1 if absent) */
    float rope_freq_scale_swa; /* freq scale of sliding layers (0: 1; gemma2: rope_freq_scale,
                                * gemma3: 1 as llama.cpp's rope_freq_scale_train_swa) */
    /* --- mixture of experts (all zero for dense models; every layer of a MoE
     * model is a MoE layer, as in llama.cpp's llama / qwen2moe / qwen3moe) --- */
    uint32_t n_expert;      /* <arch>.expert_count (0: dense FFN), at most RT_MAX_EXPERTS */
    uint32_t n_expert_used; /* <arch>.expert_used_count, 1..n_expert (top-k) */
    uint32_t n_ff_exp;      /* rows of one expert's gate/up: qwen2moe/qwen3moe
                             * expert_feed_forward_length (default n_ff / n_expert_used),
                             * llama (Mixtral) feed_forward_length */
    uint32_t n_ff_shexp;    /* qwen2moe: the shared expert's width
                             * (expert_shared_feed_forward_length, default n_ff); else 0 */
    bool moe_norm_w;        /* top-k weights divided by their sum (llama, qwen3moe; not
                             * qwen2moe), as llama.cpp's build_moe_ffn norm_w */
    bool moe_softmax_w;     /* gpt-oss: the top k of the router logits, then softmax over
                             * those k (LLAMA_EXPERT_GATING_FUNC_TYPE_SOFTMAX_WEIGHT) */
    bool rope_yarn;         /* rope.scaling.type yarn (gpt-oss): ext_factor 1, beta_fast 32,
                             * beta_slow 1 over n_ctx_orig, cos/sin scaled as llama.cpp */
    /* --- gated delta net (qwen35, qwen35moe, qwen3next; all zero elsewhere).
     * Layer il is recurrent iff full_attn_interval && (il + 1) % full_attn_interval
     * != 0 (llama.cpp derives it so, it never reads layer_types); the other
     * layers are gated full attention (attn_out_gate). n_layer counts the
     * executed layers only: block_count - n_nextn. --- */
    uint32_t full_attn_interval; /* <arch>.full_attention_interval (0: no recurrent layers) */
    uint32_t n_nextn;        /* <arch>.nextn_predict_layers: trailing MTP blocks kept in
                              * the file (blk.n_layer ...), never executed */
    uint32_t ssm_conv_kernel;/* ssm.conv_kernel K: taps of the causal depthwise conv (4) */
    uint32_t ssm_d_state;    /* ssm.state_size S: key and value head width (128) */
    uint32_t ssm_n_group;    /* ssm.group_count Hk: key heads */
    uint32_t ssm_dt_rank;    /* ssm.time_step_rank Hv: value heads (Hv % Hk == 0) */
    uint32_t ssm_d_inner;    /* ssm.inner_size = Hv * S */
    bool attn_out_gate;      /* full-attention q rows carry a per-head sigmoid output
                              * gate: per head hd q values then hd gate values */
    bool ssm_v_tiled;        /* v head h uses k head h % Hk (qwen35: the converter
                              * reorders V heads); false: h / (Hv / Hk) (qwen3next) */
    bool ssm_ba_fused;       /* qwen3next: one ssm_ba.weight, per key head [beta (Hv/Hk) |
                              * alpha (Hv/Hk)] rows; else ssm_beta / ssm_alpha */
    uint32_t rope_sections[4]; /* qwen35/qwen35moe rope.dimension_sections (IMROPE); for
                              * text t = h = w = pos and e = 0: rotated pairs are those
                              * of the t/h/w sectors (all of them in the released models),
                              * a pair of the e sector keeps angle 0. All 0: plain NEOX */
    /* --- gemma4 (all zero elsewhere). head_dim, n_head_kv and n_rot above are
     * the full-attention layers'; n_ff the widest layer's (each layer's own
     * width is its ffn_gate's rows). Layers il >= n_layer - n_kv_shared
     * project only q and read the cache of rt_layer_kv_src. --- */
    bool swa_per_layer;      /* layer il slides iff bit il of swa_layers (sliding_window_pattern
                              * as a per-layer array) */
    uint8_t swa_layers[64];  /* 512 bits */
    uint32_t n_kv_shared;    /* attention.shared_kv_layers */
    uint32_t head_dim_swa;   /* attention.key_length_swa (sliding layers' head size) */
    uint32_t n_head_kv_swa;  /* head_count_kv of the sliding layers */
    uint32_t n_rot_swa;      /* rope.dimension_count_swa */
    uint32_t n_embd_per_layer; /* embedding_length_per_layer_input P (0: no per-layer
                              * embeddings); per_layer_token_embd has n_layer * P columns */
};

/* True when layer il of hp is a gated delta net layer (no KV cache). */
static inline bool rt_layer_is_recurrent(const struct rt_hparams *hp, uint32_t il)
{
    return hp->full_attn_interval != 0 && (il + 1) % hp->full_attn_interval != 0;
}
/* Channels of the causal conv of a recurrent layer: q, k (Hk*S each) and v (Hv*S). */
static inline uint64_t rt_ssm_conv_channels(const struct rt_hparams *hp)
{
    return 2 * (uint64_t)hp->ssm_n_group * hp->ssm_d_state + (uint64_t)hp->ssm_d_inner;
}

#define RT_MAX_EXPERTS 1024 /* llama.cpp's LLAMA_MAX_EXPERTS */

/* True when layer il of hp uses the sliding window (llama.cpp's is_swa). */
static inline bool rt_layer_is_swa(const struct rt_hparams *hp, uint32_t il)
{
    if (hp->n_swa == 0) return false;
    if (hp->swa_per_layer) return il < 512 && ((hp->swa_layers[il / 8] >> (il % 8)) & 1);
    return hp->swa_pattern == 0 || il % hp->swa_pattern < hp->swa_pattern - 1;
}

/* gemma4's shared KV (llama.cpp's n_layer_kv_from_start and its reuse
 * callback): layer il stores K/V of its own iff il < n_layer - n_kv_shared;
 * a shared layer reads layer (first shared - 2) when it slides, else
 * (first shared - 1). Every other arch: each layer its own. */
static inline bool rt_layer_has_kv(const struct rt_hparams *hp, uint32_t il)
{
    return il < hp->n_layer - hp->n_kv_shared;
}
static inline uint32_t rt_layer_kv_src(const struct rt_hparams *hp, uint32_t il)
{
    if (rt_layer_has_kv(hp, il)) return il;
    const uint32_t first = hp->n_layer - hp->n_kv_shared;
    return first - (rt_layer_is_swa(hp, il) ? 2 : 1);
}
/* Head size and kv heads of layer il (gemma4's sliding layers have their own). */
static inline uint32_t rt_layer_head_dim(const struct rt_hparams *hp, uint32_t il)
{
    return hp->head_dim_swa && rt_layer_is_swa(hp, il) ? hp->head_dim_swa : hp->head_dim;
}
static inline uint32_t rt_layer_n_head_kv(const struct rt_hparams *hp, uint32_t il)
{
    return hp->n_head_kv_swa && rt_layer_is_swa(hp, il) ? hp->n_head_kv_swa : hp->n_head_kv;
}

/* Elements of the widest layer's K (or V) row: n_head_kv * head_dim, or
 * gemma4's sliding layers' when wider. */
static inline uint64_t rt_kv_dim_max(const struct rt_hparams *hp)
{
    const uint64_t a = (uint64_t)hp->n_head_kv * hp->head_dim;
    const uint64_t b = (uint64_t)hp->n_head_kv_swa * hp->head_dim_swa;
    return a > b ? a : b;
}

struct rt_model_opts {
    bool mlock;    /* mlock() the whole mapping (fails with MW_E_IO on RLIMIT_MEMLOCK) */
    bool map_only; /* keep every weight in the file mapping: no copy of the dense
                    * weights into huge pages (runtime/rt_load.c) */
};

struct rt_model;

/* Open path (mmap, read-only), validate the container (gguf_open) and the
 * llama graph. On success *out owns the mapping; release with
 * rt_model_close(). o may be NULL. Errors: those of gguf_open, and
 * MW_E_FORMAT / MW_E_UNSUPPORTED / MW_E_VALUE naming the key or tensor
 * (missing, wrong type, wrong shape, unsupported ggml type, inconsistent
 * head counts ...), MW_E_IO (mlock), MW_E_NOMEM. */
enum mw_status rt_model_open(const char *path, const struct rt_model_opts *o,
                             struct rt_model **out, struct mw_err *err);
/* The same over an already open file (borrowed: f must outlive the model).
 * The graph builder alone; what the fuzz target runs. */
enum mw_status rt_model_from_gguf(const struct gguf_file *f, struct rt_model **out,
                                  struct mw_err *err);
void rt_model_close(struct rt_model *m); /* NULL-safe */

const struct rt_hparams *rt_model_hparams(const struct rt_model *m);
const struct gguf_file *rt_model_gguf(const struct rt_model *m);
/* Bytes of tensor data the graph reads per token (all its weights; the
 * embedding table counts when it is also the output matrix). */
uint64_t rt_model_weight_bytes(const struct rt_model *m);
/* Bytes of the whole mapping (the file). */
uint64_t rt_model_mapped_bytes(const struct rt_model *m);
/* Bytes of the mapping's dense weights held in anonymous huge pages
 * instead of mapped file pages (rt_model_opts.map_only: 0). */
uint64_t rt_model_copied_bytes(const struct rt_model *m);
/* Bytes the model owns besides the mapping (norm/bias vectors as f32). */
uint64_t rt_model_owned_bytes(const struct rt_model *m);
/* ggml type of the tensor most of the weight bytes use (for display). */
uint32_t rt_model_main_type(const struct rt_model *m);
/* Bytes of weights one token reads: rt_model_weight_bytes minus the 3-D
 * expert tensors (ffn_{gate,up,down}_exps), plus n_expert_used times one
 * expert's matrix of each of them (the router, a shared expert and every
 * dense tensor count whole; the embedding table counts whole, as in
 * rt_model_weight_bytes). Equal to rt_model_weight_bytes for a dense model. */
uint64_t rt_model_active_weight_bytes(const struct rt_model *m);
/* The same before a file exists (memwall plan): weight_bytes are all the
 * tensor bytes, expert_bytes those of the 3-D expert tensors among them
 * (each an n_expert stack of equal matrices); returns weight_bytes -
 * expert_bytes + expert_bytes * n_expert_used / n_expert (exact when every
 * expert tensor's size is a multiple of n_expert, as it always is), or
 * weight_bytes when hp->n_expert is 0 (or expert_bytes > weight_bytes). */
uint64_t rt_active_weight_bytes(const struct rt_hparams *hp, uint64_t weight_bytes,
                                uint64_t expert_bytes);

/* Check the memwall checksums (gguf.h: memwall.checksum.*): the header hash
 * and every tensor's xxh3 over its bytes in the mapping, tensor by tensor
 * (streamed; nothing is copied). *n_checked gets the number of tensors
 * hashed (0 and MW_OK when the file carries no memwall checksums, e.g. a
 * llama.cpp file). Errors: MW_E_CHECKSUM naming the tensor and its offset,
 * MW_E_FORMAT (checksum keys of the wrong type or length). */
enum mw_status rt_model_verify(const struct rt_model *m, uint64_t *n_checked,
                               struct mw_err *err);

// --- context: KV cache, scratch, threads ---

enum rt_kv_type { RT_KV_F16 = 0, RT_KV_Q8_0 = 1 };
/* "f16" / "q8_0" -> type; false if unknown. */
bool rt_kv_type_parse(const char *s, enum rt_kv_type *out);
const char *rt_kv_type_name(enum rt_kv_type t);

#define RT_MAX_CTX (1u << 20)
#define RT_MAX_THREADS 256

struct rt_ctx_opts {
    uint32_t n_ctx;           /* positions in the KV cache; 0: min(n_ctx_train, 4096) */
    enum rt_kv_type kv_type;  /* default RT_KV_F16 (llama.cpp's default) */
    unsigned n_threads;       /* 0: 1; at most RT_MAX_THREADS */
    uint32_t n_batch;         /* tokens per forward step; 0: 64 */
};

/* Memory a context uses, for the accounting printed at start. */
struct rt_mem {
    uint64_t mapped_bytes;   /* the file mapping */
    uint64_t copied_bytes;   /* of it, dense weights held in anonymous huge pages at the
                              * same addresses instead (rt_load.c); still counted in
                              * weight_bytes, not twice */
    uint64_t weight_bytes;   /* of which the graph's weights */
    uint64_t owned_bytes;    /* model-owned f32 vectors */
    uint64_t kv_bytes;       /* K and V caches at n_ctx (sliding layers: their window ring;
                              * recurrent layers none), plus state_bytes */
    uint64_t state_bytes;    /* of which the recurrent layers' state: per layer the conv
                              * state ((K-1) x conv channels) and the delta-net state
                              * (S x S x Hv), f32, whatever n_ctx */
    uint64_t scratch_bytes;  /* activations, quantized activations, logits, attention rows */
    uint32_t n_ctx;
    unsigned n_threads;
    enum rt_kv_type kv_type;
};

struct rt_ctx;

/* Allocate everything a forward pass needs for m (borrowed: m must outlive
 * the context) and start n_threads-1 worker threads. o may be NULL.
 * Errors: MW_E_USAGE (n_ctx above RT_MAX_CTX, n_threads above
 * RT_MAX_THREADS, q8_0 KV with a head size not a multiple of 32),
 * MW_E_NOMEM, MW_E_IO (thread creation). */
enum mw_status rt_ctx_init(const struct rt_model *m, const struct rt_ctx_opts *o,
                           struct rt_ctx **out, struct mw_err *err);
void rt_ctx_free(struct rt_ctx *c); /* NULL-safe; joins the workers */

void rt_ctx_mem(const struct rt_ctx *c, struct rt_mem *out);

/* The memory a context and its model would take, before any file exists
 * (memwall plan, quant --fit-ram): kv_bytes and scratch_bytes count the
 * very buffers rt_ctx_init allocates (one list, rt_ctx.c), with every
 * quantized activation row sized for weight_type's activation format
 * (rt_ctx_init sizes them for the model's actual weights; a type without a
 * kernel counts as Q8_K); owned_bytes bounds the model's own memory from
 * above: the 2*n_layer+1 norms (4*n_layer+1 with post_norms, plus
 * 2*n_layer*head_dim with qk_norm, n_rot with has_rope_long) and
 * n_bias_floats bias floats as f32, at most 1024 bytes of views per layer and
 * 2048 for the model struct. MoE (hp->n_expert > 0): the routing and
 * per-expert buffers for n_batch * n_expert_used (token, expert) pairs and
 * the per-layer routing counters, activation rows wide enough for the
 * experts (n_ff_exp) and for the router, which counts as f32 (llama.cpp never
 * quantizes ffn_gate_inp); the dense FFN buffers are n_ff_shexp wide (0
 * without a shared expert). kv_bytes: n_ctx rows per layer, a sliding layer
 * (rt_layer_is_swa) min(n_ctx, n_swa - 1 + n_batch) rows (its ring). From hp
 * it reads n_layer, n_embd, n_ff, n_head, n_head_kv, head_dim, n_rot,
 * n_vocab, n_swa, swa_pattern, post_norms, qk_norm, has_rope_long, n_expert,
 * n_expert_used, n_ff_exp, n_ff_shexp (and n_ctx_train when o->n_ctx is
 * 0). o: rt_ctx_init's defaults (NULL: all of them); the limits RT_MAX_CTX / RT_MAX_THREADS are not applied. Sets
 * n_ctx, n_threads and kv_type too; mapped_bytes and weight_bytes are 0.
 * Errors: MW_E_USAGE (n_head not a multiple of n_head_kv, head_dim 0, a
 * q8_0 cache with a head size not a multiple of 32), MW_E_VALUE (a size
 * overflows 64 bits). */
enum mw_status rt_mem_estimate(const struct rt_hparams *hp, uint64_t n_bias_floats,
                               const struct rt_ctx_opts *o, uint32_t weight_type,
                               struct rt_mem *out, struct mw_err *err);
uint32_t rt_ctx_n_ctx(const struct rt_ctx *c);
/* Positions filled in the KV cache. */
uint32_t rt_ctx_n_past(const struct rt_ctx *c);
const struct rt_model *rt_ctx_model(const struct rt_ctx *c);
/* Name of the kernel variant the context runs ("scalar", "neon", "neon+dotprod"). */
const char *rt_ctx_kernels_name(const struct rt_ctx *c);

/* Run n tokens at positions n_past .. n_past+n-1 and append them to the KV
 * cache. As llama.cpp does for its ubatch, a call of 64 tokens or more
 * takes the tiled f32 attention and a smaller one the f16-accumulating
 * single-query attention (rt_attn.c), so logits depend on how tokens are
 * grouped into calls; they never depend on the thread count or n_batch.
 * Logits of the last token are kept in the context
 * (rt_ctx_logits). If logits is not NULL, the rows of tokens
 * logits_from .. n-1 (n_vocab floats each) are written there as well.
 * No allocation. Errors: MW_E_USAGE (n == 0, n_past + n > n_ctx,
 * logits_from >= n with logits given), MW_E_VALUE (a token id outside the
 * vocabulary; nothing is evaluated). */
enum mw_status rt_eval(struct rt_ctx *c, const int32_t *tokens, uint32_t n,
                       uint32_t logits_from, float *logits, struct mw_err *err);
/* Logits (n_vocab floats) of the last token rt_eval ran; valid until the
 * next rt_eval. */
const float *rt_ctx_logits(const struct rt_ctx *c);
/* MoE: how many times each expert of layer il was routed (one count per
 * token and selected expert) since the context was created: n_expert
 * counters, or NULL for a dense model or il >= n_layer. The last layer's
 * FFN runs only for the tokens whose logits rt_eval returns (the last one
 * when logits is NULL), so only those count there. */
const uint64_t *rt_ctx_expert_hits(const struct rt_ctx *c, uint32_t il);

/* Forget everything (n_past = 0). */
void rt_ctx_reset(struct rt_ctx *c);
/* Forget positions >= n_past (rewind; n_past > current is a no-op). */
void rt_ctx_truncate(struct rt_ctx *c, uint32_t n_past);
/* Sliding window: drop the n_drop positions after the first n_keep (e.g.
 * BOS + system prompt), move the rest down and re-rotate their cached keys
 * to the new positions (llama.cpp's context shift). Afterwards n_past is
 * n_past - n_drop. Errors: MW_E_USAGE if n_keep + n_drop > n_past. No
 * allocation. */
enum mw_status rt_ctx_shift(struct rt_ctx *c, uint32_t n_keep, uint32_t n_drop,
                            struct mw_err *err);

// --- tokenizer (from the GGUF metadata, docs/formats.md §7) ---
/*
 * "llama": SentencePiece BPE as llama.cpp runs it (llm_tokenizer_spm):
 *   escape spaces as U+2581, a dummy-prefix space at the start of each text
 *   fragment that follows BOS/a special token (tokenizer.ggml.add_space_prefix,
 *   default true), merge adjacent symbols by the highest score (ties: leftmost),
 *   byte fallback to <0xNN> pieces. Same ids as llama.cpp.
 * "gpt2": byte-level BPE. Decoding is complete. Encoding: the pre-tokenizer
 *   regexes of "llama3"/"llama-bpe"/"llama-v3"/"falcon3"/"pixtral" (digits in
 *   runs of 1-3), "qwen2"/"deepseek-r1-qwen" (single digits) and "default"/"gpt-2"
 *   are implemented by hand (no regex library). \p{L}, \p{N} and \s are
 *   llama.cpp's own tables (rt_tok_pre.c), for every code point. Then merges
 *   by rank (lowest first; ties: leftmost), "ignore_merges" for the llama3
 *   group.
 * "gemma4", and "gpt2" with pre "gemma4" / "granite-embed-multi-311m" (what
 *   memwall and llama.cpp write for a tokenizer.json-only Gemma 3):
 *   SentencePiece-style BPE as llama.cpp runs it: spaces escaped as U+2581,
 *   the text cut into runs of newlines and runs of the rest, merges by rank
 *   over the raw UTF-8, <0xNN> byte fallback, BOS always added.
 * memwall.tokenizer.normalizer ("NFC", "NFD", "NFKC", "NFKD"; memwall's own
 *   key, written from tokenizer.json, e.g. Qwen's NFC): each text fragment
 *   between special tokens is normalized before the pre-tokenizer, as the
 *   Hugging Face tokenizer does. llama.cpp has no normalizer: on text that
 *   is not already in that form its ids differ from memwall's (and from
 *   the Hugging Face tokenizer's).
 * Special tokens: tokens of type user-defined (4) are always matched in the
 * text as whole units; control tokens (3) only when parse_special is set
 * (chat templates), as llama.cpp does.
 */
struct rt_tok;

/* Build the tokenizer of f (borrowed: f must outlive it). n_vocab: the
 * model's vocabulary (the token count must equal it). Errors: MW_E_FORMAT /
 * MW_E_VALUE / MW_E_UNSUPPORTED naming the key (missing tokens, wrong array
 * types or lengths, unknown tokenizer model or pre-tokenizer, special ids
 * out of range are ignored as llama.cpp does), MW_E_NOMEM. */
enum mw_status rt_tok_init(const struct gguf_file *f, uint32_t n_vocab, struct rt_tok **out,
                           struct mw_err *err);
void rt_tok_free(struct rt_tok *t); /* NULL-safe */

/* Tokenize len bytes of text. add_special: prepend BOS (and append EOS) if
 * the vocabulary asks for it (add_bos_token / add_eos_token), as
 * llama_tokenize(add_special) does. parse_special: recognise control tokens
 * spelled in the text. Writes at most cap ids to out; *n_out gets the
 * number of tokens the text needs (> cap: MW_E_NOSPACE, call again with a
 * bigger buffer). Allocates temporary memory (not for use in a token loop).
 * Errors: MW_E_NOSPACE, MW_E_NOMEM. Thread-safe (t is read only). */
enum mw_status rt_tok_encode(const struct rt_tok *t, const char *text, size_t len,
                             bool add_special, bool parse_special, int32_t *out, size_t cap,
                             size_t *n_out, struct mw_err *err);
/* The text of token id: SPM "▁" as a space and <0xNN> as the byte; GPT-2
 * byte characters as bytes. Control tokens give "" unless special. Writes
 * at most cap bytes (no NUL) and returns the piece's full length (0 for an
 * id out of range). No allocation. */
size_t rt_tok_piece(const struct rt_tok *t, int32_t id, bool special, char *buf, size_t cap);
/* The raw vocabulary string of id (as stored), or NULL if out of range. */
const char *rt_tok_text(const struct rt_tok *t, int32_t id, size_t *len);
/* Exact lookup of a vocabulary string; -1 if absent. */
int32_t rt_tok_find(const struct rt_tok *t, const char *text, size_t len);

uint32_t rt_tok_n_vocab(const struct rt_tok *t);
int32_t rt_tok_bos(const struct rt_tok *t);   /* -1 if none */
int32_t rt_tok_eos(const struct rt_tok *t);   /* -1 if none */
bool rt_tok_add_bos(const struct rt_tok *t);
bool rt_tok_add_space_prefix(const struct rt_tok *t);
/* End of generation, llama.cpp's rule (llama-vocab.cpp load): the FIM pad /
 * repo / file-separator ids (tokenizer.ggml.fim_{pad,rep,sep}_token_id, or
 * found by text: <|fim_pad|> <fim-pad> <fim_pad> <PAD> [PAD] / <|fim_repo|>
 * <|repo_name|> <fim-repo> <REPO> <reponame> / <|file_sep|>); every token
 * whose text is one of <|eot_id|> <|im_end|> <|end|> <|return|> <|call|>
 * <|flush|> <|calls|> <end_of_turn> <|endoftext|> </s> <|eom_id|> <EOT> _<EOT>
 * [EOT] [EOS] <|end_of_text|> <end_of_utterance> <eos> <turn|>
 * <|tool_response>, <｜end▁of▁sentence｜> or [e~[; and eos, eot, eom (eot and eom
 * found by text when the file has no id). Whatever its type in the file,
 * each of those tokens (and the FIM prefix/suffix/middle tokens) is a
 * control token, so it is matched in text only with parse_special. Then
 * llama.cpp's two exceptions: <|end|> is not one where <|return|> and
 * <|call|> (or <|calls|> and <|flush|>) are; </s> is not one (and is a
 * normal token) where <|tool_response> is. <|channel|> <|message|> <|start|>
 * <|constrain|> are user-defined tokens. Qwen3's vocabulary gives 6 ids:
 * <|endoftext|>, <|im_end|>, <|fim_pad|>, <|repo_name|>, <|file_sep|> and
 * </s> (128247). */
bool rt_tok_is_eog(const struct rt_tok *t, int32_t id);
/* The end-of-generation ids, ascending: writes min(n, cap) to ids, returns n. */
uint32_t rt_tok_eog_ids(const struct rt_tok *t, int32_t *ids, uint32_t cap);
/* Is id a control token (after the rules above)? */
bool rt_tok_is_control(const struct rt_tok *t, int32_t id);
/* "llama", "gpt2" or "gemma4". */
const char *rt_tok_model_name(const struct rt_tok *t);
/* The pre-tokenizer the encoder runs ("spm", "llama3", "qwen2", "qwen35", "gpt2",
 * "gpt-4o", "gemma4"). */
const char *rt_tok_pre_name(const struct rt_tok *t);

// --- chat templates ---
/*
 * The GGUF's tokenizer.chat_template (Jinja) is not interpreted; it is
 * recognised by marker substrings as one of a few simple formats, and the
 * prompt is built by hand for it. Unrecognised or absent: "none" (plain text
 * continuation, turns separated by newlines).
 */
enum rt_chat_fmt {
    RT_CHAT_NONE = 0,
    RT_CHAT_CHATML,  /* <|im_start|>role\n...<|im_end|>\n  (qwen2) */
    RT_CHAT_LLAMA2,  /* [INST] ... [/INST] (llama-2, mistral) */
    RT_CHAT_LLAMA3,  /* <|start_header_id|>role<|end_header_id|>\n\n...<|eot_id|> */
    RT_CHAT_ZEPHYR,  /* <|user|>\n...</s>\n<|assistant|>\n (TinyLlama chat) */
    RT_CHAT_GEMMA,   /* <start_of_turn>user\n...<end_of_turn>\n<start_of_turn>model\n */
    RT_CHAT_PHI3,    /* <|user|>\n...<|end|>\n<|assistant|>\n */
    RT_CHAT_CHATML_THINK,   /* Qwen3.5: ChatML, text trimmed, the assistant opens
                               with <think>\n (thinking) */
    RT_CHAT_CHATML_NOTHINK, /* the same with enable_thinking false: the assistant
                               opens with an empty <think>\n\n</think>\n\n */
    RT_CHAT_GEMMA4,  /* <|turn>user\n...<turn|>\n<|turn>model\n<|channel>thought\n<channel|> */
    RT_CHAT_HARMONY, /* gpt-oss: <|start|>user<|message|>...<|end|><|start|>assistant */
};
enum rt_chat_fmt rt_chat_detect(const struct gguf_file *f);
const char *rt_chat_fmt_name(enum rt_chat_fmt fmt);
/* fmt with thinking off where the format has the choice (chatml-think ->
 * chatml-nothink); any other format as it is. */
enum rt_chat_fmt rt_chat_no_thinking(enum rt_chat_fmt fmt);
/* Append the text of one turn (role "system", "user") followed by the
 * assistant prefix when role is "user", into buf (cap bytes, NUL-terminated).
 * first: no earlier turn in the conversation (llama2 and gemma put the system
 * prompt inside the first user turn; their "system" turn is empty). The text
 * is trimmed of leading and trailing ASCII white space where the model's
 * template does it and llama.cpp's built-in template does it too (llama3:
 * `| trim`; gemma; gemma4), and kept as it is elsewhere (chatml, zephyr,
 * llama2, phi3, harmony), as llama.cpp's llm_chat_apply_template. Returns
 * the length it needs (> cap - 1 means it was cut). The text is meant to be
 * tokenized with parse_special. */
size_t rt_chat_format(enum rt_chat_fmt fmt, const char *role, const char *text, bool first,
                      const char *system, char *buf, size_t cap);
/* The text that closes an assistant turn in the history (e.g. "<|im_end|>\n"). */
const char *rt_chat_turn_end(enum rt_chat_fmt fmt);

// --- sampling ---

struct rt_sampler_opts {
    float temp;      /* <= 0: greedy (the first maximum, as llama.cpp's greedy sampler) */
    uint32_t top_k;  /* 0: off */
    float top_p;     /* 0 or >= 1: off */
    float min_p;     /* <= 0: off */
    uint64_t seed;   /* the RNG seed; same seed + same logits -> same tokens */
};
struct rt_sampler;

/* Order: top-k, top-p, min-p, temperature, then a draw from the softmax.
 * All scratch (n_vocab entries) is allocated here. Errors: MW_E_USAGE (NaN
 * or negative parameters, min_p > 1), MW_E_NOMEM. */
enum mw_status rt_sampler_init(const struct rt_sampler_opts *o, uint32_t n_vocab,
                               struct rt_sampler **out, struct mw_err *err);
void rt_sampler_free(struct rt_sampler *s); /* NULL-safe */
/* Pick the next token from n_vocab logits. No allocation. */
int32_t rt_sample(struct rt_sampler *s, const float *logits);
/* Index of the first maximum (greedy). */
int32_t rt_argmax(const float *logits, uint32_t n);

// --- perplexity (llama.cpp's llama-perplexity protocol) ---
/*
 * The text (one trailing '\n' dropped, as llama-perplexity's -f does) is
 * tokenized once with add_special and without parse_special; cut into
 * n_chunk = n_tokens / n_ctx chunks (a trailing partial chunk is dropped);
 * each chunk's first token is replaced by BOS (when the vocab adds BOS), the
 * chunk is evaluated from an empty cache, and the logits of positions
 * n_ctx/2 .. n_ctx-2 score tokens n_ctx/2+1 .. n_ctx-1:
 * nll = log(sum exp(l - max)) + max - l[tok] (float logits, double sum).
 * ppl = exp(mean nll).
 *
 * Logit files (compatible with tests/peer's llama-peer):
 *   save_logits writes "MWPEERL1", u32 n_ctx, u32 n_vocab, u32 n_chunk,
 *   u32 first (= n_ctx/2), i32 tokens[n_chunk*n_ctx] (as tokenized, before
 *   the BOS substitution), then per chunk (n_ctx-1-first) rows of n_vocab
 *   float32 logits (positions first .. n_ctx-2). Little-endian.
 *   kld_base reads that format, or llama-perplexity's --kl-divergence-base
 *   file ("_logits_", u32 n_ctx, i32 n_vocab, i32 n_chunk, i32 tokens,
 *   per chunk rows of 2*((n_vocab+1)/2)+4 uint16: float scale, float min,
 *   quantized log-probs). As llama-perplexity does, the base file's tokens
 *   are scored (the text is only used when no base is given).
 */
struct rt_ppl_opts {
    uint32_t n_ctx;           /* chunk size (llama-perplexity -c); 0: 256 */
    uint32_t max_chunks;      /* 0: all */
    const char *save_logits;  /* NULL: none */
    const char *kld_base;     /* NULL: plain perplexity */
    /* Called after each chunk; may be NULL. */
    void (*progress)(void *ud, uint32_t chunk, uint32_t n_chunk, double ppl_so_far);
    void *progress_ud;
};

struct rt_ppl_result {
    double ppl;            /* exp(mean nll) */
    double ppl_unc;        /* llama.cpp's +/- estimate (ppl * stddev(nll)/sqrt(n)) */
    uint32_t n_chunk;
    uint64_t n_tokens;     /* tokens the text gave (BOS included), or of the base file */
    uint64_t n_scored;
    /* with kld_base: */
    bool has_kld;
    bool kld_exact;        /* base in float32 (exact KL) vs llama.cpp uint16 */
    double kld, kld_unc, kld_max;
    double ppl_base;       /* the base's perplexity on the same tokens */
    double same_top;       /* fraction where argmax agrees */
    double rms_dp;         /* RMS of p(tok) differences */
    double seconds;        /* evaluation time */
};

/* Run the protocol on c (whose n_ctx must be >= o->n_ctx; its cache is
 * cleared) with tokenizer t. Allocates its buffers once (n_ctx tokens,
 * n_batch rows of logits). Errors: MW_E_VALUE (fewer than 2*n_ctx tokens,
 * base file for another n_ctx/vocabulary), MW_E_FORMAT / MW_E_TRUNC (bad
 * base file), MW_E_IO, MW_E_NOMEM, and those of rt_eval. */
enum mw_status rt_perplexity(struct rt_ctx *c, const struct rt_tok *t, const char *text,
                             size_t len, const struct rt_ppl_opts *o, struct rt_ppl_result *res,
                             struct mw_err *err);

#endif /* MW_RT_H */
