/*
 * calib/calib.h — calibration: read a text corpus, cut it into token
 * samples, run the model over them ONE DECODER LAYER AT A TIME in FP32
 * (OpenBLAS GEMM), collect per-linear-layer activation statistics, write
 * them as a llama.cpp importance matrix, and (for AWQ / GPTQ / mixed
 * precision in methods/) hand each layer's inputs, statistics and mutable
 * weights to a callback so that quantization error propagates to the next
 * layer. Also the memory-budget formula of `memwall plan` (and of quant's
 * --fit-ram).
 *
 * Data flow of calib_run():
 *
 *   samples (n_samples x n_pos token ids, BOS first)
 *     -> hs = token_embd rows                    (T x n_embd floats, T = n_samples*n_pos)
 *     for each layer il (only its weights are in memory, as f32):
 *       X_attn = rmsnorm(hs)*attn_norm           group ATTN_IN  (q, k, v read it)
 *       X_o    = attention(X_attn Wq/Wk/Wv^T)    group ATTN_OUT (o reads it)
 *       hs    += X_o Wo^T
 *       X_ffn  = rmsnorm(hs)*ffn_norm            group FFN_IN   (gate, up read it)
 *       X_down = silu(X_ffn Wgate^T)*(X_ffn Wup^T)  group FFN_DOWN (down reads it;
 *                                                streamed in row batches, never all T rows)
 *       hs    += X_down Wdown^T
 *     a mixture-of-experts layer replaces the FFN: every row of
 *       X_ffn goes through the f32 router (top-k, rt_moe_route), then each
 *       expert in turn over the rows routed to it (its own FFN_IN / FFN_DOWN
 *       statistics, see calib_stats_expert), the weighted outputs summed
 *       into a (T x n_embd) buffer that joins hs after the last expert
 *   Peak memory: hs, X_attn/X_ffn (one buffer), X_o (T x n_head*head_dim),
 *   one layer's f32 weights, the batch scratch (batch_rows x (qdim + 2 kvdim
 *   + 2 n_ff) floats, n_pos^2 attention scores) and the statistics.
 *   The embedding and output matrices are never loaded whole (embedding
 *   rows are picked while the tensor is streamed); the output head and the
 *   final norm are not evaluated (llama.cpp's imatrix skips output.weight).
 *
 * Graph (same as runtime/rt.h): llama/mistral/qwen2, GGUF tensor layout:
 * q/k rows permuted for "normal" RoPE (pairs 2i, 2i+1) on llama, NEOX pairs
 * on qwen2; RoPE tables as ggml_rope_cache_init computes them (theta by
 * repeated f32 multiplication, rope_freqs.weight divides, linear scaling);
 * RMSNorm sums squares in double; softmax(q.k/sqrt(hd)) causal within a
 * sample, grouped-query; SiLU x/(1+exp(-x)). No KV cache: every sample is
 * one full causal sequence.
 * The other families (rt_hparams' family fields, the ops of
 * runtime/rt_ops.h): qwen3/gemma3 per-head q/k RMSNorm before RoPE; gemma
 * embeddings times sqrtf(n_embd), sandwich norms (post_attention_norm on the
 * attention output, post_ffw_norm on the FFN output, before each residual
 * add; every gemma norm in its GGUF form w + 1, a plain multiplier),
 * GELU-tanh gating (ggml's f16 table), queries scaled by attn_scale after
 * RoPE (rt_attn_scales), gemma2's attention soft-capping, sliding layers
 * (rt_layer_is_swa) attending to the last n_swa positions only with their
 * own RoPE base/scale (rt_rope_layer_params for a context of n_pos); phi3
 * fused attn_qkv and ffn_up (gate|up) handed out as row views, LongRoPE
 * short/long factors (long when n_pos > the original context) with the
 * attention factor on cos/sin. Final soft-capping only touches logits,
 * which calib does not compute.
 * Qwen3.5 (qwen35, qwen35moe, qwen3next: rt_hparams full_attn_interval):
 * the layers rt_layer_is_recurrent names are a gated delta net instead of
 * attention (calib_ssm.c): attn_qkv, attn_gate (z), ssm_beta, ssm_alpha
 * (qwen3next: ssm_ba) read ATTN_IN and run batched; then per sample, token by
 * token from a zero state, the runtime's causal conv + SiLU, q/k L2 norms,
 * gates and delta rule per value head, and the gated norm rmsnorm(o) *
 * ssm_norm * silu(z): ATTN_OUT (ssm_d_inner wide), which ssm_out reads. The
 * other layers are gated attention: attn_q holds per head q then gate rows;
 * q/k norm, NEOX RoPE on the first n_rot dims, attention * sigmoid(gate). The
 * FFN norm is post_attention_norm; the MTP block (blk.n_layer) is not run.
 * No lean mode (hidden states on disk) for these models.
 *
 * Statistics (llama.cpp imatrix semantics, docs/formats.md §9.1): per group and
 * input channel j, over every row (every position of every sample, BOS
 * included): sum_sq[j] = Σ x_j², sum_abs[j] = Σ |x_j| (AWQ's mean |x| =
 * sum_abs / count), count = rows. Sums are in double, row by row in sample
 * order; threads split channels, never rows, so results are bitwise
 * identical for every thread count. q/k/v share ATTN_IN, gate/up share
 * FFN_IN (phi3's fused attn_qkv and ffn_up: one imatrix entry each, the
 * statistics of that shared input, as llama-imatrix records them). H = Σ x
 * xᵀ (GPTQ) on request, see calib_layer_hessian().
 *
 * Determinism: the same model, samples and batch_rows give bitwise
 * identical statistics and callbacks for every n_threads and every
 * --max-memory batch size: OpenBLAS runs single-threaded and every product
 * is cut into tiles fixed by its shape, row tiles per sample (mw_blas.h);
 * our threads split independent outputs. Tests check 1/2/3/8 threads bit
 * for bit under several OpenBLAS core types. Across CPUs (another OpenBLAS
 * kernel) the last bits may differ.
 *
 * Library rules: nothing here prints, exits or reads argv; errors come back
 * as enum mw_status + struct mw_err (naming file, byte offset / line,
 * tensor). No global mutable state (OpenBLAS's thread count is process
 * state: calib_run sets it to 1 on entry, whatever n_threads). Handles may be used
 * from one thread at a time.
 */
#ifndef MW_CALIB_H
#define MW_CALIB_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/mw.h"
#include "runtime/rt.h"

// --- corpus ---------------------------------------------------------------------
/*
 * Formats:
 *   TEXT   the whole file is ONE document (tokenized at once, as
 *          llama-imatrix and the reference protocol of models/README.md do).
 *   JSONL  one JSON object per line with a string field "text"; every
 *          non-blank line is one document (blank lines are skipped). A line
 *          that is not a JSON object, lacks "text" or has a non-string
 *          "text" is MW_E_FORMAT naming the line. Parsed with cJSON.
 *   Either may be gzip'd (detected by the magic 1f 8b, not the name;
 *   concatenated members are read; zlib).
 *   AUTO   JSONL when the name (without ".gz") ends in ".jsonl", else TEXT.
 * Every document must be valid UTF-8 (no overlongs, no surrogates, <=
 * U+10FFFF): else MW_E_FORMAT with err->off = byte offset of the bad byte
 * in the (decompressed) input and err->where = "line L" (JSONL whose
 * decoded "text" is not valid UTF-8: the offset of the line and "line L:
 * text byte B"; an escaped NUL, \u0000, ends the text). A corpus with no non-empty
 * document is MW_E_VALUE ("empty corpus"). Decompressed size is capped at
 * CALIB_MAX_CORPUS_BYTES (MW_E_UNSUPPORTED beyond).
 */
#define CALIB_MAX_CORPUS_BYTES ((uint64_t)4 << 30)

enum calib_corpus_fmt { CALIB_CORPUS_AUTO = 0, CALIB_CORPUS_TEXT = 1, CALIB_CORPUS_JSONL = 2 };

struct calib_corpus;

/* Read path (MW_E_IO if it cannot be read). *out owns the documents;
 * release with calib_corpus_free. */
enum mw_status calib_corpus_load(const char *path, enum calib_corpus_fmt fmt,
                                 struct calib_corpus **out, struct mw_err *err);
/* The same over n bytes of memory (copied; buf may be freed after). name is
 * used in messages and for AUTO. The fuzzing entry point. */
enum mw_status calib_corpus_parse(const void *buf, uint64_t n, const char *name,
                                  enum calib_corpus_fmt fmt, struct calib_corpus **out,
                                  struct mw_err *err);
void calib_corpus_free(struct calib_corpus *c); /* NULL-safe */

enum calib_corpus_fmt calib_corpus_format(const struct calib_corpus *c); /* TEXT or JSONL */
bool calib_corpus_gzip(const struct calib_corpus *c);
/* Documents in input order; views valid until calib_corpus_free. */
uint64_t calib_corpus_doc_count(const struct calib_corpus *c);
const char *calib_corpus_doc(const struct calib_corpus *c, uint64_t i, size_t *len);
uint64_t calib_corpus_doc_line(const struct calib_corpus *c, uint64_t i); /* 1-based */
uint64_t calib_corpus_text_bytes(const struct calib_corpus *c); /* sum of document bytes */
/* XXH3-64 of the bytes as given (before decompression), for provenance. */
uint64_t calib_corpus_hash(const struct calib_corpus *c);

// --- samples --------------------------------------------------------------------
/*
 * Documents are tokenized one by one (no BOS, parse_special off; the
 * runtime's tokenizer over the model's vocabulary) and their tokens
 * concatenated into one stream, which is cut into non-overlapping samples;
 * a trailing partial sample is dropped. The FIRST n_samples samples are
 * used (llama-imatrix --chunks semantics); documents past what they need
 * are not tokenized.
 *
 *   CALIB_CHUNK_BOS_PREPEND (default): sample k = [BOS] + stream[k*L ..
 *     k*L+L-1]; n_pos = L + 1. With L = 256 on calib.txt this is the
 *     protocol of models/README.md (345 samples, 257 positions each).
 *   CALIB_CHUNK_LLAMACPP: llama-imatrix -c L: the stream with a BOS in
 *     front, cut into L-token chunks whose first token is replaced by BOS;
 *     n_pos = L (chunk k = [BOS] + stream[k*L .. k*L+L-2]). A vocabulary
 *     that adds no BOS (tokenizer.ggml.add_bos_token false: qwen's) gets none,
 *     as llama-imatrix tokenizes it: chunk k = stream[k*L .. k*L+L-1].
 *
 * seq_len L: 0 -> CALIB_DEFAULT_SEQ_LEN; clamped so n_pos <= n_ctx_max
 * (the model's training context) when n_ctx_max > 0. n_samples 0 -> all
 * the corpus gives. A corpus too short for one sample is MW_E_VALUE
 * saying how many tokens it gave and how many one sample needs. A
 * vocabulary without BOS is MW_E_UNSUPPORTED.
 */
#define CALIB_DEFAULT_SAMPLES 128
#define CALIB_DEFAULT_SEQ_LEN 512

enum calib_chunking { CALIB_CHUNK_BOS_PREPEND = 0, CALIB_CHUNK_LLAMACPP = 1 };

struct calib_sample_opts {
    uint32_t n_samples;           /* 0: all */
    uint32_t seq_len;             /* 0: CALIB_DEFAULT_SEQ_LEN */
    uint32_t n_ctx_max;           /* 0: no clamp */
    enum calib_chunking chunking;
};

struct calib_samples;

enum mw_status calib_samples_build(const struct calib_corpus *c, const struct rt_tok *tok,
                                   const struct calib_sample_opts *o,
                                   struct calib_samples **out, struct mw_err *err);
/* Samples from given tokens: n_samples rows of n_pos ids (copied). Ids are
 * checked against the vocabulary by calib_run. */
enum mw_status calib_samples_from_tokens(const int32_t *tokens, uint32_t n_samples,
                                         uint32_t n_pos, struct calib_samples **out,
                                         struct mw_err *err);
void calib_samples_free(struct calib_samples *s); /* NULL-safe */

uint32_t calib_samples_count(const struct calib_samples *s);
uint32_t calib_samples_n_pos(const struct calib_samples *s);   /* positions per sample */
uint32_t calib_samples_seq_len(const struct calib_samples *s); /* L after clamping */
/* Sample i's n_pos token ids; valid until calib_samples_free. */
const int32_t *calib_samples_tokens(const struct calib_samples *s, uint32_t i);
/* Tokens the tokenized documents gave, and whether every document was
 * tokenized (false: tokenization stopped once n_samples were covered). */
uint64_t calib_samples_stream_tokens(const struct calib_samples *s);
bool calib_samples_exhausted(const struct calib_samples *s);

// --- model ----------------------------------------------------------------------

struct calib_model;

/* Open a model for calibration: a Hugging Face checkpoint directory
 * (hf_model_open; weights mapped to GGUF names, Q/K permuted, converted
 * to f32 one tensor at a time; tokenizer from tokenizer.model /
 * tokenizer.json through hf_tok, loaded into the runtime's tokenizer) or a
 * GGUF file (any tensor type quant/ can decode; graph checked and
 * hyper-parameters read by the runtime's rt_model_from_gguf; tokenizer
 * from its metadata). Nothing large is read here. Errors: those of
 * hf_model_open / hf_plan_build / hf_tok_load / gguf_open /
 * rt_model_from_gguf / rt_tok_init; MW_E_IO if the temporary file the
 * tokenizer passes through (under $TMPDIR or /tmp, removed at once)
 * cannot be written. */
enum mw_status calib_model_open(const char *path, struct calib_model **out, struct mw_err *err);
void calib_model_close(struct calib_model *m); /* NULL-safe */

const char *calib_model_path(const struct calib_model *m);
bool calib_model_is_gguf(const struct calib_model *m);
/* Hyper-parameters in the runtime's struct (arch, n_embd, n_layer, heads,
 * head_dim, n_ff, n_rot, n_ctx_train, rms_eps, rope_*, n_vocab). */
const struct rt_hparams *calib_model_hparams(const struct calib_model *m);

struct hf_config;
/* The runtime hyper-parameters a GGUF converted from Hugging Face config c
 * would carry (the one config.json -> rt_hparams mapping: arch, arch_name,
 * sizes, n_rot = head_dim, n_ctx_train, n_vocab = vocab_size, rms_eps,
 * rope_* (linear scaling only), tied_output; name "" and has_rope_freqs
 * false: the caller knows the path and the tensors; file_type UINT32_MAX).
 * *n_bias_floats (if not NULL) gets the f32 bias elements over all layers
 * the checkpoint must have (hf_plan_build's rule: attention_bias -> q/k/v,
 * and o except on qwen2; mlp_bias -> gate/up/down). */
void calib_hparams_from_hf(const struct hf_config *c, struct rt_hparams *hp,
                           uint64_t *n_bias_floats);
/* The runtime tokenizer over the model's vocabulary (owned by m). */
const struct rt_tok *calib_model_tok(const struct calib_model *m);

// --- groups, weights, statistics --------------------------------------------------

enum calib_group {
    CALIB_G_ATTN_IN = 0,  /* rmsnorm(hs)*attn_norm: input of q, k, v   (n_embd) */
    CALIB_G_ATTN_OUT = 1, /* attention output: input of o              (n_head*head_dim) */
    CALIB_G_FFN_IN = 2,   /* rmsnorm(hs)*ffn_norm: input of gate, up    (n_embd) */
    CALIB_G_FFN_DOWN = 3, /* silu(gate)*up: input of down               (n_ff) */
    CALIB_G_COUNT = 4,    /* the groups every layer has (AWQ folds, tallies) */
    /* gemma4's per-layer input (layers of a model with n_embd_per_layer),
     * after FFN_DOWN's residual; no other model has these groups: */
    CALIB_G_PLE_IN = 4,   /* the residual x: input of inp_gate          (n_embd) */
    CALIB_G_PLE_PROJ = 5, /* gelu(inp_gate . x) * pl_l: input of proj   (n_embd_per_layer) */
    CALIB_G_ALL = 6       /* every group: the size of arrays indexed by group */
};

enum calib_wkind {
    CALIB_W_Q = 0, CALIB_W_K, CALIB_W_V, CALIB_W_O, CALIB_W_GATE, CALIB_W_UP, CALIB_W_DOWN,
    /* the gated delta net's (qwen35, qwen35moe, qwen3next: the layers
     * rt_layer_is_recurrent names, which have no q, k, v, o): attn_qkv,
     * attn_gate (z), ssm_beta (qwen3next: ssm_ba, beta and alpha in one),
     * ssm_alpha read ATTN_IN; ssm_out reads ATTN_OUT, the gated norm's output
     * (Hv*S wide) */
    CALIB_W_QKV, CALIB_W_ZGATE, CALIB_W_BETA, CALIB_W_ALPHA, CALIB_W_SSM_OUT,
    /* gemma4's per-layer input gate (reads PLE_IN) and projection (PLE_PROJ) */
    CALIB_W_INP_GATE, CALIB_W_PROJ,
    CALIB_W_COUNT
};

/* CALIB_NORM_SSM: a delta-net layer's ssm_norm (ssm_d_state floats, one
 * weight per channel shared by every value head), which makes ssm_out's
 * input: rmsnorm(o_head) * ssm_norm * silu(z_head) */
enum calib_norm { CALIB_NORM_ATTN = 0, CALIB_NORM_FFN = 1, CALIB_NORM_SSM = 2 };

/* "attn_in", "attn_out", "ffn_in", "ffn_down" */
const char *calib_group_name(enum calib_group g);
/* GGUF short name: "attn_q", "attn_k", "attn_v", "attn_output", "ffn_gate",
 * "ffn_up", "ffn_down" (tensor "blk.N.<short>.weight"). */
const char *calib_wkind_name(enum calib_wkind w);
/* The group whose rows weight w reads. */
enum calib_group calib_wkind_group(enum calib_wkind w);
/* The GGUF tensor that holds weight w of layer il in a model of hp, into
 * buf (n bytes; may be NULL): "blk.<il>.<calib_wkind_name>.weight", except
 * with hp->fused_qkv (phi3) q, k and v are the row ranges [0, Q), [Q, Q+KV),
 * [Q+KV, Q+2KV) of "blk.<il>.attn_qkv.weight" and with hp->fused_gate_up
 * gate and up the ranges [0, n_ff), [n_ff, 2 n_ff) of "blk.<il>.ffn_up.weight"
 * (llama.cpp's layout). Returns w's first row there; *tensor_rows (may be
 * NULL) gets the tensor's rows. */
uint64_t calib_weight_tensor(const struct rt_hparams *hp, uint32_t il, enum calib_wkind w,
                             char *buf, size_t n, uint64_t *tensor_rows);
/* Whether layer il of a model of hp has weight w: q, k, v, o in attention
 * layers, the delta-net kinds in recurrent layers (ssm_alpha not with
 * qwen3next's ssm_ba), the FFN kinds unless a MoE model has no shared expert. */
bool calib_weight_in_layer(const struct rt_hparams *hp, uint32_t il, enum calib_wkind w);

struct calib_group_stats {
    uint64_t n_in;          /* input channels */
    uint64_t count;         /* rows accumulated (every position of every sample) */
    const double *sum_sq;   /* (n_in) Σ x_j² — llama.cpp's in_sum2 */
    const double *sum_abs;  /* (n_in) Σ |x_j| — AWQ: mean |x_j| = sum_abs[j] / count */
};

/* Statistics of a whole run: per layer and group. */
struct calib_stats;

uint32_t calib_stats_n_layer(const struct calib_stats *st);
/* NULL if layer >= n_layer or g is invalid. Views valid until
 * calib_stats_free. */
const struct calib_group_stats *calib_stats_group(const struct calib_stats *st, uint32_t layer,
                                                  enum calib_group g);
/* The importance-matrix entry of weight w of layer il (its tensor's name,
 * as calib_weight_tensor) into buf: false when w is a later part of a fused
 * tensor (k, v of attn_qkv; up of a fused ffn_up), whose entry is its first
 * part's (same input, same statistics). */
bool calib_stats_entry(const struct calib_stats *st, uint32_t il, enum calib_wkind w, char *buf,
                       size_t n);
/* Entries over all layers: n_layer * 7, less the fused parts; a MoE model
 * (see calib_stats_entry_at) n_layer * (4 + 4, + 4 with a shared expert). */
uint64_t calib_stats_n_entries(const struct calib_stats *st);
/* Every importance-matrix entry, layer by layer: a weight tensor and the
 * statistics of its input. A MoE layer has, after q, k, v, o:
 * ffn_gate_inp (the router: every row), with a shared expert (qwen2moe)
 * ffn_gate_shexp, ffn_up_shexp, ffn_down_shexp and ffn_gate_inp_shexp
 * (every row), then ffn_gate_exps, ffn_up_exps (n_mat = n_expert: expert
 * e's slice counts the rows routed to e, as llama-imatrix's
 * GGML_OP_MUL_MAT_ID collection does) and ffn_down_exps. */
struct calib_entry {
    char name[96];                      /* "blk.3.ffn_up_exps.weight" */
    uint32_t n_mat;                     /* 1, or n_expert for a stacked expert tensor */
    const struct calib_group_stats *gs; /* gs[0 .. n_mat): one per expert */
};
/* Entry i (< calib_stats_n_entries) into *out; false beyond. */
bool calib_stats_entry_at(const struct calib_stats *st, uint64_t i, struct calib_entry *out);
/* MoE: experts per layer (0: a dense model), and the statistics of expert
 * ex's input in layer `layer`: g = CALIB_G_FFN_IN (gate/up: the ffn_norm rows
 * routed to ex, gemma4's pre_ffw_norm_2 rows, n_embd wide) or
 * CALIB_G_FFN_DOWN (act(gate) * up of those rows, n_ff_exp wide); count =
 * rows routed to ex. NULL otherwise. */
uint32_t calib_stats_n_expert(const struct calib_stats *st);
const struct calib_group_stats *calib_stats_expert(const struct calib_stats *st, uint32_t layer,
                                                   enum calib_group g, uint32_t ex);
uint32_t calib_stats_n_samples(const struct calib_stats *st);
/* Where calib_run's time went (wall seconds, CLOCK_MONOTONIC):
 * the forward GEMMs (every linear of every pass, flop = 2 rows n_in n_out),
 * the Hessian accumulations (flop = the 256-blocks of the upper triangle,
 * 2 x 256² x rows each), the on_group callbacks in all (the methods: AWQ
 * search, GPTQ, and the Hessians they ask for — hess_s is inside it), and
 * the whole run from the embeddings to the last layer. */
struct calib_timing {
    double gemm_s, gemm_flop, hess_s, hess_flop, callback_s, total_s;
};
const struct calib_timing *calib_stats_timing(const struct calib_stats *st);
uint32_t calib_stats_n_pos(const struct calib_stats *st);
void calib_stats_free(struct calib_stats *st); /* NULL-safe */

// --- the per-layer callback API (for AWQ / GPTQ / mixed precision) ---------------
/*
 * calib_run calls on_group(ud, ly, g) once per layer and group, in the
 * order ATTN_IN, ATTN_OUT, FFN_IN, FFN_DOWN (gemma4 with per-layer
 * inputs: then PLE_IN, PLE_PROJ), after the group's statistics
 * over all samples are complete and before anything downstream of the
 * group is computed. Inside the callback the consumer may:
 *   - read the statistics (calib_layer_stats), the group's input rows
 *     (calib_layer_input), H = XᵀX (calib_layer_hessian);
 *   - evaluate the group's block with the current weights
 *     (calib_layer_forward), e.g. the reference output before quantizing;
 *   - change weights in place (calib_layer_weight / calib_layer_norm):
 *     quantize, then store the DEQUANTIZED values back so that everything
 *     computed afterwards — the rest of this layer and all later layers —
 *     sees the quantized layer (sequential error propagation); fold AWQ
 *     scales into the norm (ATTN_IN: attn_norm, FFN_IN: ffn_norm) or the
 *     producer (ATTN_OUT: v rows, FFN_DOWN: up rows).
 * Which weights a callback may change (else MW_E_USAGE from
 * calib_layer_weight / calib_layer_norm with mutable access):
 *   ATTN_IN:  q, k, v, attn_norm          ATTN_OUT: q, k, v, o, attn_norm
 *   FFN_IN:   gate, up, ffn_norm          FFN_DOWN: gate, up, down, ffn_norm
 *   PLE_IN:   inp_gate                    PLE_PROJ: inp_gate, proj   (gemma4)
 * Consistency: inputs and forward results are always computed from the
 * weights as they are at the time of the call; whatever the engine keeps
 * (X_o) is recomputed when a weight it depends on was handed out mutable
 * since. The callback runs on the calling thread of calib_run; it may use
 * OpenBLAS (set to n_threads) but must not call calib_run.
 * on_layer(ud, ly) runs after the layer's output is computed (all seven
 * weights final), before its weights are freed: the place to write the
 * layer's tensors. Returning an error from either aborts the run with it.
 *
 * Sketch of a GPTQ-style consumer (error handling elided):
 *
 *   static enum mw_status on_group(void *ud, struct calib_layer *ly,
 *                                  enum calib_group g, struct mw_err *err) {
 *       const float *H;
 *       calib_layer_hessian(ly, g, &H, err);          // (n_in, n_in)
 *       for (int w = 0; w < CALIB_W_COUNT; w++) {
 *           if (calib_wkind_group(w) != g) continue;
 *           struct calib_weight cw;
 *           calib_layer_weight(ly, w, true, &cw, err);
 *           quantize_with_H(cw.w, cw.n_out, cw.n_in, H, blocks_out);  // yours
 *           dequantize_into(blocks_out, cw.w);         // later layers see it
 *       }
 *       return MW_OK;
 *   }
 *   struct calib_run_opts o = {.n_threads = 16, .on_group = on_group,
 *                              .on_layer = write_layer_tensors};
 *   calib_run(model, samples, &o, &stats, &err);
 *
 * AWQ: in ATTN_IN read calib_layer_stats(ly, g)->sum_abs / count (mean
 * |x|), evaluate candidate scales with calib_layer_input +
 * calib_layer_forward (reference output first, then with scaled and
 * quantized weights restored after each try), then fold: norm /= s
 * (calib_layer_norm), q/k/v columns *= s — the kind of fold
 * tests/check_calib.c forward_fold_invariance checks is output-preserving.
 *
 * Rows: row r is position r % n_pos of sample r / n_pos; T = n_samples *
 * n_pos rows in all. Weights are f32 in GGUF layout: (n_out rows, n_in)
 * row-major, q/k rows permuted as in the GGUF file; biases (qwen2 q/k/v,
 * llama attention_bias / mlp_bias) (n_out) or NULL.
 */
struct calib_layer;

struct calib_weight {
    const char *name; /* GGUF tensor name, "blk.3.attn_q.weight"; for a part of a fused
                       * tensor (phi3) the fused tensor's, "blk.3.attn_qkv.weight" */
    uint64_t row0;        /* first row of this weight in that tensor (0 unless fused) */
    uint64_t tensor_rows; /* rows of that tensor (= n_out unless fused) */
    uint64_t n_out;   /* rows (ne[1]) of this weight */
    uint64_t n_in;    /* columns (ne[0]) */
    float *w;         /* (n_out, n_in) row-major; NULL-free; valid until the layer ends */
    float *bias;      /* (n_out) or NULL */
};

typedef enum mw_status (*calib_group_fn)(void *ud, struct calib_layer *ly, enum calib_group g,
                                         struct mw_err *err);
typedef enum mw_status (*calib_layer_fn)(void *ud, struct calib_layer *ly, struct mw_err *err);
/* After each layer: layers done so far and in all, seconds since the start. */
typedef void (*calib_progress_fn)(void *ud, uint32_t layers_done, uint32_t n_layer,
                                  double seconds);

/* Progress by stage: calib_run reports the start and the end of
 * each stage of each layer, in order:
 *   "embed"   (layer = first_layer; the embedding rows, or load_hidden on a
 *             resumed run)
 *   per layer: "attn_in", "attn_out", "ffn_in", "ffn_down" (with an
 *             on_group callback: the group's pass plus the callback — AWQ,
 *             GPTQ — run between start and end; without: one fused pass
 *             reported as "forward"), then "layer" (start: on_layer runs;
 *             end: the layer is complete, its memory released).
 * layers_done counts the layers finished in THIS run (a resumed run starts
 * at 0 with first_layer > 0); seconds since calib_run began. The callback
 * must not call back into calib. */
struct calib_stage_event {
    const char *stage;      /* one of the names above */
    bool end;               /* false: the stage starts; true: it is done */
    uint32_t layer;         /* the layer it belongs to */
    uint32_t n_layer;
    uint32_t first_layer;   /* where this run started (calib_run_opts.first_layer) */
    uint32_t layers_done;   /* layers finished in this run */
    double seconds;         /* since calib_run began */
};
typedef void (*calib_stage_fn)(void *ud, const struct calib_stage_event *ev);

/* Resume: fill rows [row0, row0 + n_rows) of the hidden states
 * that enter layer first_layer (n_rows x n_embd floats, row-major: what
 * calib_layer_hidden gave in the previous layer's on_layer), called in row
 * order, n_rows <= calib_layer_max_rows()-sized batches of whole samples. */
typedef enum mw_status (*calib_hidden_fn)(void *ud, uint64_t row0, uint64_t n_rows, float *dst,
                                          struct mw_err *err);

uint32_t calib_layer_index(const struct calib_layer *ly);
uint32_t calib_layer_n_samples(const struct calib_layer *ly);
uint32_t calib_layer_n_pos(const struct calib_layer *ly);
uint64_t calib_layer_n_rows(const struct calib_layer *ly); /* T */
/* Input channels of group g (n_embd, n_head*head_dim — a delta-net layer's
 * ATTN_OUT: ssm_d_inner —, n_embd, n_ff). */
uint64_t calib_layer_group_n_in(const struct calib_layer *ly, enum calib_group g);
/* The kinds a callback may ask for: calib_weight_in_layer for this layer,
 * or an expert's gate, up and down in an expert's call. */
bool calib_layer_has_weight(const struct calib_layer *ly, enum calib_wkind w);
/* Statistics of group g of this layer (complete for g and the groups
 * before it; zero counts for later groups). */
const struct calib_group_stats *calib_layer_stats(const struct calib_layer *ly,
                                                  enum calib_group g);

/* Mixture of experts (see calib_stats_entry_at). In a MoE layer
 * the FFN stages run per expert: on_group(FFN_IN) then on_group(FFN_DOWN)
 * once for each expert in turn (calib_layer_expert() >= 0), after the
 * shared expert's own FFN_IN / FFN_DOWN calls (qwen2moe; expert -1; a layer
 * without a shared expert has none). Inside an expert's callbacks
 * calib_layer_weight(GATE / UP / DOWN) gives that expert's matrix: a row
 * range of the stacked tensor (name "blk.N.ffn_gate_exps.weight", row0 =
 * expert * n_out, tensor_rows = n_expert * n_out), mutable as the dense
 * rules say; calib_layer_stats / calib_layer_group_n_in / calib_layer_hessian
 * (_take) describe the rows routed to the expert (its FFN_DOWN input is
 * n_ff_exp wide; a Hessian is recomputed on each call from the current
 * weights; all zero for an expert no row reached). calib_layer_input and
 * calib_layer_forward are MW_E_USAGE for an expert, and ffn_norm may not be
 * changed in a MoE layer (the router reads it). The routing is decided once
 * per layer, before any FFN callback, from the f32 router. */
/* gemma4 (experts beside a dense MLP): after the dense MLP's FFN_IN /
 * FFN_DOWN and before the first expert, one on_group(FFN_IN) with
 * calib_layer_expert() == CALIB_EXPERT_ALL for the experts' common input
 * RMSNorm(x) * pre_ffw_norm_2 over every row: calib_layer_stats /
 * calib_layer_hessian of those rows, calib_layer_norm(CALIB_NORM_FFN) is
 * pre_ffw_norm_2 (mutable), calib_layer_weight(GATE) the whole
 * ffn_gate_up_exps (every expert's gate and up rows; UP and DOWN absent): a
 * scale folded there is one for all experts. ffn_norm feeds the dense MLP
 * alone: mutable in its calls, refused in an expert's. */
#define CALIB_EXPERT_ALL (-2)
int32_t calib_layer_expert(const struct calib_layer *ly);   /* -1: no expert's callback */
uint32_t calib_layer_n_expert(const struct calib_layer *ly); /* 0: a dense model */
uint64_t calib_layer_expert_rows(const struct calib_layer *ly); /* rows routed to it */

/* Weight w of this layer. mutable_ true: a writable view (and permission
 * is checked as above; later reads recompute what depends on it). false:
 * the same view, to be treated as read-only. MW_E_USAGE on a weight the
 * current stage may not change. */
enum mw_status calib_layer_weight(struct calib_layer *ly, enum calib_wkind w, bool mutable_,
                                  struct calib_weight *out, struct mw_err *err);
/* Norm weight (n_embd floats; CALIB_NORM_SSM: ssm_d_state floats, recurrent
 * layers only, mutable in ATTN_OUT), same rules; *out gets the pointer. */
enum mw_status calib_layer_norm(struct calib_layer *ly, enum calib_norm which, bool mutable_,
                                float **out, struct mw_err *err);

/* Rows [row0, row0 + n_rows) of group g's input (n_rows x n_in floats,
 * row-major) under the current weights, into *x: a view valid until the
 * next calib_layer_* call. n_rows must not exceed calib_layer_max_rows()
 * (any row0: ranges need not align with samples). Available groups: the
 * current one and earlier ones of the same block (in ATTN_OUT: ATTN_IN and
 * ATTN_OUT; in FFN_DOWN: FFN_IN and FFN_DOWN; in PLE_PROJ: PLE_IN and
 * PLE_PROJ); others, and any group in
 * on_layer, are MW_E_USAGE. Cost: ATTN_IN / FFN_IN recompute the norm,
 * FFN_DOWN recomputes gate/up, ATTN_OUT is the stored X_o (recomputed per
 * sample while q/k/v/attn_norm are handed out mutable). Errors: MW_E_USAGE
 * (range, group). */
enum mw_status calib_layer_input(struct calib_layer *ly, enum calib_group g, uint64_t row0,
                                 uint64_t n_rows, const float **x, struct mw_err *err);
/* Most rows calib_layer_input / calib_layer_forward handle per call (the
 * run's batch_rows rounded to whole samples; >= n_pos). */
uint64_t calib_layer_max_rows(const struct calib_layer *ly);

/* The output of group g's block for samples [sample0, sample0 + n) under the
 * current weights, computed from the group's current input, into out
 * (n * n_pos rows, row-major, caller-allocated):
 *   ATTN_IN  -> attention output (n_head*head_dim per row; = ATTN_OUT input)
 *   ATTN_OUT -> X_o Wo^T (+bo)   (n_embd; without the residual; gemma:
 *               after post_attention_norm, what is added to the residual)
 *   FFN_IN   -> act(X Wgate^T)*(X Wup^T) (n_ff; = FFN_DOWN input; SiLU or GELU-tanh)
 *   FFN_DOWN -> X_down Wdown^T (+bdown) (n_embd; without the residual; gemma:
 *               after post_ffw_norm)
 *   PLE_IN   -> gelu(X Winp_gate^T) * pl_l (n_embd_per_layer; = PLE_PROJ input)
 *   PLE_PROJ -> RMSNorm(X Wproj^T) * post_norm (n_embd; what is added to the
 *               residual before layer_output_scale)
 * n * n_pos must not exceed calib_layer_max_rows(). Errors: MW_E_USAGE,
 * MW_E_NOMEM. */
enum mw_status calib_layer_forward(struct calib_layer *ly, enum calib_group g, uint32_t sample0,
                                   uint32_t n, float *out, struct mw_err *err);

/* Rows [row0, row0 + n_rows) of the residual stream (n_embd floats per row,
 * a read-only view): in the ATTN_IN / ATTN_OUT callbacks the layer's input,
 * in FFN_IN / FFN_DOWN the input plus the attention block's output, in
 * on_layer the layer's output (after the last layer: the model's final
 * hidden states, before output_norm). With the hidden states in memory the
 * view points into them and stays valid until the layer ends; when they
 * are in a scratch file (calib_run_hidden_on_disk) n_rows must not exceed
 * calib_layer_max_rows() and the rows are read into a buffer valid until
 * the next calib_layer_* call. Errors: MW_E_USAGE (range), MW_E_IO. */
enum mw_status calib_layer_hidden(struct calib_layer *ly, uint64_t row0, uint64_t n_rows,
                                  const float **x, struct mw_err *err);

/* H = Σ_rows x xᵀ over all T rows of group g's current input: (n_in, n_in)
 * row-major floats, both triangles filled, summed batch by batch in row
 * order (bitwise independent of n_threads). Computed on the first call
 * for (g, current weights) and cached until the weights it depends on
 * change or the layer ends; *H is valid until then. n_in² floats: 1 GiB
 * for n_in = 16384 — the caller decides whether it can afford it. Errors:
 * MW_E_USAGE (later group), MW_E_NOMEM. */
enum mw_status calib_layer_hessian(struct calib_layer *ly, enum calib_group g, const float **H,
                                   struct mw_err *err);

/* The lean mode (calib_run_hidden_on_disk): the big weights (q k v o gate up
 * down) live in a scratch file and calib_layer_weight reads the one asked
 * for into memory; it stays there (the same view) until
 * calib_layer_weight_release(ly, w) or the end of the callback, when it goes
 * back (written if it was handed out mutable). Releasing a part of a fused
 * tensor (phi3 attn_qkv, ffn_up) releases the whole tensor: the other
 * parts' views become invalid too. Outside the lean mode release does
 * nothing. Errors: MW_E_USAGE, MW_E_IO / MW_E_NOSPACE (the scratch file). */
enum mw_status calib_layer_weight_release(struct calib_layer *ly, enum calib_wkind w,
                                          struct mw_err *err);

/* In the lean mode a Hessian made stale (a weight or norm it depends on
 * handed out mutable) is freed at once, before the weight is read back:
 * its views become invalid then, not at the next calib_layer_hessian.
 * calib_layer_hessian, but the caller takes the buffer (free() it): no copy
 * when it overwrites H (GPTQ factors it in place). The engine computes the
 * next request afresh. */
enum mw_status calib_layer_hessian_take(struct calib_layer *ly, enum calib_group g, float **H,
                                        struct mw_err *err);

// --- the run ------------------------------------------------------------------------

#define CALIB_DEFAULT_BATCH_ROWS 4096
#define CALIB_MAX_THREADS 256

struct calib_run_opts {
    unsigned n_threads;        /* 0: 1; our pool and OpenBLAS */
    uint32_t batch_rows;       /* rows per GEMM batch, rounded down to whole samples
                                * (at least one); 0: CALIB_DEFAULT_BATCH_ROWS. Part of the
                                * result's identity (not n_threads). */
    calib_group_fn on_group;   /* may be NULL: statistics only (one pass per layer) */
    void *on_group_ud;
    calib_layer_fn on_layer;   /* may be NULL */
    void *on_layer_ud;
    calib_progress_fn progress; /* may be NULL */
    void *progress_ud;
    uint64_t max_memory;       /* bytes calib_run's own allocations may reach (activations,
                                * statistics, Hessians; not the mapped model, not the
                                * callbacks'); 0: no bound. (--max-memory) */
    calib_stage_fn on_stage;   /* progress per stage (may be NULL) */
    void *on_stage_ud;
    uint32_t first_layer;      /* resume: start here (0: from the embeddings); the layers
                                * before it are not run and their statistics stay zero */
    calib_hidden_fn load_hidden; /* required when first_layer > 0; with first_layer 0 it
                                  * replaces the embedding step (the rows entering layer 0:
                                  * methods_probe.c's perturbed embeddings) */
    void *load_hidden_ud;
    bool lean;                 /* the lean mode at once (what --max-memory switches to when
                                * nothing else fits; see max_memory below) */
    const char *scratch_dir;   /* directory of the file-backed scratch (hidden states,
                                * attention outputs, parked weights); NULL: $TMPDIR or /tmp.
                                * Files are unlinked as soon as they are created. */
    bool ple_groups;           /* gemma4 with per-layer inputs: on_group also runs for
                                * CALIB_G_PLE_IN (inp_gate) and CALIB_G_PLE_PROJ (proj)
                                * after FFN_DOWN; false: those two stay outside the
                                * callbacks (statistics only) */
};
/*
 * max_memory: calib_run plans its allocations before making any
 * (calib_run_peak_bytes: statistics, hidden states T x n_embd, RoPE table,
 * the batch scratch, n_threads x n_pos^2 attention scores, the larger of
 * the embedding step and one layer's f32 weights — plus, with an on_group
 * callback, X_o (T x n_head*head_dim) and ONE Hessian of the widest group).
 * Over the bound it first takes fewer samples per GEMM batch (chosen
 * without regard to n_threads). If one sample per batch is still too much
 * and the run has no callbacks (statistics only: memwall calib), the hidden
 * states (T x n_embd floats, the term that grows with the samples) move to
 * an unlinked scratch file under $TMPDIR (or /tmp), reserved with
 * posix_fallocate up front and read/written one batch at a time: page
 * cache, not process memory. If that is still too much, or the per-thread
 * attention scratch does not fit next to it, calib_run fails with
 * MW_E_NOMEM before allocating anything large, giving the bytes needed, the
 * bound and what to change (--samples, --seq-len, --threads). A full disk
 * for the scratch file is MW_E_NOSPACE (MW_E_IO for other I/O errors).
 * Under a bound at most one Hessian is cached: calib_layer_hessian
 * releases the others (views of them become invalid).
 * Results: the statistics are summed row by row in sample order, so fewer
 * rows per batch give bitwise the same statistics (tests compare them;
 * this relies on OpenBLAS computing each GEMM output row the same way for
 * any number of rows, which it does on the CPUs tested). The Hessians are
 * summed batch by batch, so a smaller batch changes their rounding: for a
 * given max_memory (and batch_rows) they are deterministic, for every
 * n_threads. Not counted: the mapped model, the samples, the callbacks'
 * own memory, thread stacks, and allocator overhead.
 */

/* Run the model over the samples, layer by layer (see the top of this
 * file). *out gets the statistics (release with calib_stats_free). Token
 * ids outside the vocabulary: MW_E_VALUE naming sample and position.
 * Errors: MW_E_USAGE (n_threads above CALIB_MAX_THREADS), MW_E_NOMEM
 * (with the bytes asked for), those of weight loading (MW_E_IO,
 * MW_E_FORMAT naming the tensor), of the callbacks. */
enum mw_status calib_run(struct calib_model *m, const struct calib_samples *s,
                         const struct calib_run_opts *o, struct calib_stats **out,
                         struct mw_err *err);
/* Bytes calib_run will hold at its peak for these samples (under
 * o->max_memory: with the batch it adapts to; one sample per batch when the
 * bound cannot be met), excluding the callbacks' own memory and the mapped
 * model pages. */
uint64_t calib_run_peak_bytes(const struct calib_model *m, const struct calib_samples *s,
                              const struct calib_run_opts *o);
/* Samples per GEMM batch calib_run will use under o->max_memory (the
 * requested batch_rows in whole samples when it fits), or 0 when the bound
 * cannot be met (calib_run then fails with MW_E_NOMEM). */
uint32_t calib_run_batch_samples(const struct calib_model *m, const struct calib_samples *s,
                                 const struct calib_run_opts *o);
/* Whether calib_run will keep the hidden states in a scratch file under
 * o->max_memory (see max_memory above). */
bool calib_run_hidden_on_disk(const struct calib_model *m, const struct calib_samples *s,
                              const struct calib_run_opts *o);
/* What calib_run will need for a model of hp over n_samples samples of
 * n_pos positions on n_threads threads, before any model or corpus is
 * opened (memwall plan): *peak in memory at the default batch, *least at
 * one sample per batch, lean where the model allows it (not MoE, not the
 * gated delta net). cb: with a per-group callback (quant --corpus; the
 * method's own buffers are quant_methods_peak_bytes). */
/* The latest layer at or before `layer` a run can start at (first_layer):
 * `layer`, except that gemma4's shared-KV layers read the K/V of an earlier
 * layer, which a run has only when it starts at or before that layer. */
uint32_t calib_run_first_layer_floor(const struct rt_hparams *hp, uint32_t layer);
void calib_run_need(const struct rt_hparams *hp, uint32_t n_samples, uint32_t n_pos, bool cb,
                    unsigned n_threads, uint64_t *peak, uint64_t *least);

// --- importance-matrix files (docs/formats.md §9.2, §9.3) --------------------------------
/*
 * GGUF (llama-imatrix's default): KVs general.type = "imatrix",
 * imatrix.datasets (string array), imatrix.chunk_count (u32),
 * imatrix.chunk_size (u32); for each of the 7 weights of every layer,
 * sorted by name (bytewise), "<w>.in_sum2" F32 [n_in] (Σx², rounded once
 * from double) and "<w>.counts" F32 [1]; written by the gguf writer (temp
 * file + fsync + rename; memwall.checksum.* keys included, which llama.cpp
 * ignores).
 * LEGACY (.dat): i32 n_entries; per entry (sorted): i32 name_len, name, i32
 * ncall = ceil(count / chunk_size), i32 nval, f32 values (sum_sq/count *
 * ncall); trailer i32 chunk_count, i32 len + first dataset name. Also
 * atomic (temp file beside path, fsync, rename).
 * chunk_size is n_pos (positions per sample; llama-imatrix's n_ctx),
 * chunk_count the number of samples.
 */
enum calib_imatrix_fmt { CALIB_IMATRIX_GGUF = 0, CALIB_IMATRIX_LEGACY = 1 };

struct calib_imatrix_meta {
    const char *const *datasets; /* dataset (corpus) names, usually basenames */
    uint64_t n_datasets;
    uint32_t chunk_count;        /* 0: calib_stats_n_samples */
    uint32_t chunk_size;         /* 0: calib_stats_n_pos */
};

/* Errors: MW_E_IO / MW_E_NOSPACE (nothing appears at path), MW_E_VALUE
 * (no rows accumulated, counts beyond i32 for LEGACY), MW_E_NOMEM. */
enum mw_status calib_imatrix_write(const struct calib_stats *st,
                                   const struct calib_imatrix_meta *meta,
                                   enum calib_imatrix_fmt fmt, const char *path,
                                   struct mw_err *err);
/* The GGUF bytes calib_imatrix_write(st, meta, CALIB_IMATRIX_GGUF, path)
 * writes, in a malloc'd buffer the caller free()s (*buf, *size). Errors:
 * MW_E_VALUE, MW_E_NOMEM as above. */
enum mw_status calib_imatrix_write_mem(const struct calib_stats *st,
                                       const struct calib_imatrix_meta *meta, void **buf,
                                       uint64_t *size, struct mw_err *err);

// --- memory budget (memwall plan; quant --fit-ram uses the same) ---------------------
/*
 * What the device runtime (runtime/rt_ctx.c rt_ctx_init, rt_model.c)
 * allocates for a model, as rt_ctx_mem() reports it at start; kv, scratch
 * and owned are the runtime's own estimate (rt_mem_estimate, runtime/rt.h),
 * which counts rt_ctx_init's allocation list. It amounts to:
 *   weights   the tensor data the graph reads (mmap'd; input)
 *   kv        2 * n_layer * n_ctx * row_bytes(kv_type, n_head_kv*head_dim)
 *             (F16: 2 bytes per element; Q8_0: 34 bytes per 32)
 *   scratch   B = n_batch rows (64), E = n_embd, F = n_ff, Q = n_head*hd,
 *             KV = n_head_kv*hd, R = n_head/n_head_kv, 4-byte floats:
 *               B*(E + max(E,Q) + Q + 2*KV + 2*F + n_rot) + n_vocab + KV + n_rot
 *             + 3 * B * act_row   (act_row = round16(row_bytes(partner, max(E, F, Q))),
 *               partner = the activation format of weight_type: F32/F16/BF16 as is,
 *               Q8_0 for Q4_0/Q5_0/Q8_0/IQ4_NL, Q8_1 for Q4_1/Q5_1, Q8_K for k-quants)
 *             + n_threads * (4*(64*R + 64*hd + hd + R*hd + 2*R + 16) + 2*R*hd
 *                            + R*round16(row_bytes(kvact, hd)) + 72)
 *             (flash-attention tiles of 64 positions; kvact: F16 for an F16
 *             cache, Q8_0 for Q8_0) — independent of n_ctx
 *   owned     f32 norms and biases: (2*n_layer + 1)*E (+ biases) floats
 *   base      CALIB_MEM_BASE_BYTES: code, libc, thread stacks in use, page
 *             tables, allocator slack (a fixed allowance, not measured)
 * overhead = scratch + owned + base. A device of R bytes gives an app
 * R * CALIB_MEM_APP_PERCENT / 100 (design.md: a 16 GB phone leaves an app
 * 9–12 GB); the weights may take app - kv - overhead.
 */
#define CALIB_MEM_BASE_BYTES ((uint64_t)64 << 20)
#define CALIB_MEM_APP_PERCENT 65
#define CALIB_MEM_DEFAULT_THREADS 4
#define CALIB_MEM_DEFAULT_BATCH 64

struct calib_mem_arch {
    uint32_t n_layer, n_embd, n_ff, n_head, n_head_kv, head_dim, n_rot, n_vocab;
    uint64_t n_bias_floats; /* f32 bias elements over all layers (qwen2: q/k/v) */
    /* The model's other hyper-parameters (the family fields: sliding window
     * and its layer pattern, q/k and sandwich norms ...), handed to
     * rt_mem_estimate with the sizes above written over its own. All zero
     * (a llama-style model) unless calib_mem_arch_from_hparams filled it.
     * Gemma's sliding layers keep only their window (the runtime's ring of
     * min(n_ctx, n_swa - 1 + n_batch) positions, calib_mem_kv_layout). */
    struct rt_hparams hp;
};

/* The KV cache's layout for n_ctx positions and steps of n_batch tokens
 * (0: CALIB_MEM_DEFAULT_BATCH): how many layers slide (*n_swa_layers) and
 * the positions each of them keeps (*swa_rows; the other layers keep
 * n_ctx). */
void calib_mem_kv_layout(const struct calib_mem_arch *a, uint32_t n_ctx, uint32_t n_batch,
                         uint32_t *n_swa_layers, uint32_t *swa_rows);

struct calib_mem_opts {
    uint32_t n_ctx;           /* required (> 0) */
    enum rt_kv_type kv_type;
    unsigned n_threads;       /* 0: CALIB_MEM_DEFAULT_THREADS */
    uint32_t n_batch;         /* 0: CALIB_MEM_DEFAULT_BATCH (clamped to n_ctx, as the runtime) */
    uint32_t weight_type;     /* ggml type most weights use (for the activation rows) */
};

struct calib_mem {
    uint64_t kv_bytes, scratch_bytes, owned_bytes, base_bytes;
    uint64_t overhead_bytes;  /* scratch + owned + base */
};

/* Architecture from runtime hyper-parameters (n_bias_floats from the
 * caller: the bias floats of every layer, calib_hparams_from_hf gives them
 * for a Hugging Face config; qwen2: n_layer * (Q + 2*KV)). */
void calib_mem_arch_from_hparams(const struct rt_hparams *hp, uint64_t n_bias_floats,
                                 struct calib_mem_arch *out);
/* The formula above. Errors: MW_E_USAGE (n_ctx 0, q8_0 cache with a head
 * size not a multiple of 32, n_head not a multiple of n_head_kv),
 * MW_E_VALUE (overflow). */
enum mw_status calib_mem_estimate(const struct calib_mem_arch *a, const struct calib_mem_opts *o,
                                  struct calib_mem *out, struct mw_err *err);
/* Device RAM -> what an app may use (CALIB_MEM_APP_PERCENT). */
uint64_t calib_mem_app_budget(uint64_t ram_bytes);
/* Bytes left for weights on a device with ram_bytes: app budget - kv -
 * overhead, or 0 when nothing is left. */
uint64_t calib_mem_weight_budget(uint64_t ram_bytes, const struct calib_mem *m);

// --- quant --fit-ram (calib_fit.c) ---------------------------------------------------

struct calib_fit {
    uint64_t ram_bytes;      /* the device */
    uint64_t app_bytes;      /* calib_mem_app_budget(ram_bytes) */
    uint64_t kv_bytes;       /* the KV cache of n_ctx positions */
    uint64_t overhead_bytes; /* the runtime's overhead */
    uint64_t weight_bytes;   /* left for the weights (the file): app - kv - overhead, or 0 */
    char budget[160];        /* the memwall.quant.budget record:
                              * "fit-ram=R,ctx=N,kv=T,file=W" */
};

struct gguf_file;
/* The memory formula above (weights mostly Q4_K, default threads and batch)
 * for the model of f (a GGUF file), or of Hugging Face config c when f is
 * NULL (calib_hparams_from_hf), on a device of ram_bytes with a context of
 * n_ctx positions in a kv cache. Errors: those of rt_model_from_gguf and
 * calib_mem_estimate (MW_E_USAGE: n_ctx 0, a q8_0 cache with a head size
 * not a multiple of 32, heads not a multiple of the kv heads), MW_E_USAGE
 * when nothing is left for the weights (*out filled; the message, worded
 * for `memwall quant --fit-ram`, gives the app share, KV cache and
 * overhead). */
enum mw_status calib_fit_ram(const struct gguf_file *f, const struct hf_config *c,
                             uint64_t ram_bytes, uint32_t n_ctx, enum rt_kv_type kv,
                             struct calib_fit *out, struct mw_err *err);

#endif /* MW_CALIB_H */
