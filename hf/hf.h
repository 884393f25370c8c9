/*
 * hf/hf.h — Hugging Face checkpoints: safetensors, config.json, the mapping of
 * llama / mistral / qwen2 onto llama.cpp's GGUF names and keys, and the
 * streaming `convert` pipeline.
 *
 * What it reads (docs/formats.md §5–§6):
 *
 *   safetensors   u64 LE header length N, N bytes of JSON
 *                 {"name": {"dtype": "F16", "shape": [r, c],
 *                           "data_offsets": [begin, end]}, ...,
 *                  "__metadata__": {"k": "v"}}
 *                 then the data section; offsets are relative to it. The
 *                 header is validated completely before any tensor is handed
 *                 out: length vs file size, JSON syntax (cJSON), value types,
 *                 known dtype, shape product * dtype size == end - begin
 *                 (checked arithmetic), every range inside the data section,
 *                 ranges contiguous from 0 to the end of the file without
 *                 overlap or gap, no duplicate names, __metadata__ string ->
 *                 string only. Errors name the file, the tensor and a byte
 *                 offset (of the tensor's JSON key, or of its data).
 *   HF dir        config.json, and model.safetensors or
 *                 model.safetensors.index.json + the shards its weight_map
 *                 names (shards are opened lazily mapped; the weight map and
 *                 the shards must agree exactly).
 *   config.json   architectures[0] LlamaForCausalLM / MistralForCausalLM
 *                 (both -> GGUF "llama", with the Q/K row permutation),
 *                 Qwen2ForCausalLM (-> "qwen2"), Qwen3ForCausalLM ("qwen3"),
 *                 Gemma2ForCausalLM ("gemma2"), Gemma3ForCausalLM and the
 *                 text model of Gemma3ForConditionalGeneration ("gemma3"),
 *                 Phi3ForCausalLM ("phi3"), and the mixtures of experts
 *                 Qwen2MoeForCausalLM ("qwen2moe"), Qwen3MoeForCausalLM
 *                 ("qwen3moe"), MixtralForCausalLM ("llama" with experts:
 *                 expert counts, expert widths, refusing what llama.cpp
 *                 cannot represent), and the gated delta net families
 *                 Qwen3_5ForCausalLM / Qwen3_5ForConditionalGeneration
 *                 ("qwen35"), Qwen3_5MoeForCausalLM / ..ForConditionalGeneration
 *                 ("qwen35moe"), Qwen3NextForCausalLM ("qwen3next";
 *                 hf_config_qwen35.c, hf_arch_qwen35.c, docs/formats.md
 *                 §6.8), Gemma4* ("gemma4"; hf_gemma4.c, §6.10) and
 *                 GptOssForCausalLM ("gpt-oss"; hf_gptoss.c, §6.11: the
 *                 MXFP4 experts repacked, never decoded); the hyper-parameters, RoPE
 *                 (rope_theta, rope_scaling linear / llama3 / longrope), tied
 *                 embeddings, the families' keys (activation, sliding window,
 *                 soft-capping, ...). Missing, mistyped or contradictory keys,
 *                 and keys of another family, are errors naming the key's
 *                 JSON path.
 *
 * What `convert` writes: a GGUF v3 file through the atomic, checksummed
 * gguf writer — keys and tensors in the order llama.cpp's
 * convert_hf_to_gguf.py writes them (general.*, <arch>.*, file type,
 * quantization version, tokenizer.*, then memwall.* provenance:
 * memwall.version, memwall.source (source dir basename),
 * memwall.source_dtype, memwall.convert.type); tensors in source order
 * (shards by file name, tensors by name), rope_freqs.weight first when
 * rope_scaling is llama3 (rope_factors_long/short.weight first for phi3
 * LongRoPE); the families' keys are written key by key as their llama.cpp
 * converter classes do (gemma2: softcapping and sliding window, no
 * rope.freq_base; gemma3: rope.freq_base_swa, sliding window unless the
 * pattern is 1; phi3: rope.dimension_count, original context, sliding
 * window, rope.scaling.attn_factor second after general.architecture;
 * MoE: expert_count / expert_used_count after the RMS epsilon, the expert
 * widths after the file type). Experts are stacked into llama.cpp's 3-D
 * ffn_{gate,up,down}_exps tensors, placed where its converter emits them,
 * and streamed expert by expert (docs/formats.md §6.6). Gemma's norms are written as w + 1 (computed in F16 for an F16 source,
 * else in F32, as the converter does). Norms, biases and rope_freqs are F32; 2-D weights
 * take the requested type (Q8_0 is ggml's quantize_row_q8_0_ref bit for
 * bit; a row length that is not a multiple of 32 falls back to F16 as
 * llama.cpp's converter does). One tensor at a time through a bounded
 * buffer; consumed source pages are dropped from the mapping, so peak
 * memory does not grow with the model. Same input and options give a
 * byte-identical file.
 *
 * Library code never prints; progress is reported through a callback.
 * No global state; different handles may be used from different threads.
 */
#ifndef MW_HF_H
#define MW_HF_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/mw.h"
#include "gguf/gguf.h"

/* --- safetensors dtypes --------------------------------------------------- */

enum hf_dtype {
    HF_DT_BOOL,
    HF_DT_U8,
    HF_DT_I8,
    HF_DT_F8_E4M3,
    HF_DT_F8_E5M2,
    HF_DT_I16,
    HF_DT_U16,
    HF_DT_F16,
    HF_DT_BF16,
    HF_DT_I32,
    HF_DT_U32,
    HF_DT_F32,
    HF_DT_F64,
    HF_DT_I64,
    HF_DT_U64,
    HF_DT_COUNT
};

/* "F16", "BF16", ...; "?" for an invalid value. */
const char *hf_dtype_name(enum hf_dtype dt);
/* Bytes per element (1..8); 0 for an invalid value. */
uint32_t hf_dtype_size(enum hf_dtype dt);
/* true for the dtypes convert reads as they are: F16, BF16, F32 (F8_E4M3
 * weights are read with their scales, hf_fp8.c). */
bool hf_dtype_convertible(enum hf_dtype dt);

/* --- one safetensors file -------------------------------------------------- */

#define HF_ST_MAX_DIMS 8
#define HF_ST_MAX_HEADER (100u * 1000u * 1000u) /* the safetensors library's cap */

struct hf_st_tensor {
    const char *name;      /* NUL-terminated, owned by the hf_st */
    enum hf_dtype dtype;
    uint32_t n_dims;       /* 0 (a scalar) .. HF_ST_MAX_DIMS */
    uint64_t shape[HF_ST_MAX_DIMS]; /* PyTorch order: shape[n_dims-1] is contiguous */
    uint64_t n_elems;
    uint64_t nbytes;
    uint64_t file_off;     /* absolute file offset of the first data byte */
    uint64_t key_off;      /* file offset of the tensor's JSON key (best effort) */
    const uint8_t *data;   /* view into the mapping / caller buffer */
};

struct hf_st;

/* Map path read-only and validate its header (see top of file). On success
 * *out owns the mapping; release with hf_st_close(). Errors: MW_E_IO (cannot
 * open/map), MW_E_TRUNC, MW_E_FORMAT, MW_E_UNSUPPORTED (unknown dtype, too
 * many dims), MW_E_NOMEM; err names path, offset and tensor. */
enum mw_status hf_st_open(const char *path, struct hf_st **out, struct mw_err *err);
/* The same over a caller buffer (borrowed: it must outlive the hf_st). name
 * is used in error messages. This is the fuzzing entry point. */
enum mw_status hf_st_open_mem(const void *buf, uint64_t size, const char *name,
                              struct hf_st **out, struct mw_err *err);
void hf_st_close(struct hf_st *st); /* NULL-safe */

const char *hf_st_path(const struct hf_st *st);
uint64_t hf_st_file_size(const struct hf_st *st);
uint64_t hf_st_header_len(const struct hf_st *st);  /* JSON bytes (N above) */
/* Tensors sorted by name (bytewise); views valid until hf_st_close(). */
uint64_t hf_st_count(const struct hf_st *st);
const struct hf_st_tensor *hf_st_get(const struct hf_st *st, uint64_t i);
int64_t hf_st_find(const struct hf_st *st, const char *name); /* index or -1 */
/* __metadata__ entries (string -> string), in file order. */
uint64_t hf_st_meta_count(const struct hf_st *st);
bool hf_st_meta_get(const struct hf_st *st, uint64_t i, const char **key, const char **value);
/* Tell the kernel the bytes [off, off + n) of the file will not be needed
 * again (drops them from the mapping; a later access reads them back).
 * No-op for memory buffers. */
void hf_st_release(const struct hf_st *st, uint64_t off, uint64_t n);

/* --- config.json ---------------------------------------------------------- */

enum hf_arch {
    HF_ARCH_LLAMA,   /* LlamaForCausalLM   -> GGUF "llama" */
    HF_ARCH_MISTRAL, /* MistralForCausalLM -> GGUF "llama" */
    HF_ARCH_QWEN2,   /* Qwen2ForCausalLM   -> GGUF "qwen2" */
    HF_ARCH_QWEN3,   /* Qwen3ForCausalLM   -> GGUF "qwen3" */
    HF_ARCH_GEMMA2,  /* Gemma2ForCausalLM  -> GGUF "gemma2" */
    HF_ARCH_GEMMA3,  /* Gemma3ForCausalLM, and the text model of
                      * Gemma3ForConditionalGeneration -> GGUF "gemma3" */
    HF_ARCH_PHI3,    /* Phi3ForCausalLM (Phi-3, Phi-4) -> GGUF "phi3" */
    /* mixture of experts: experts stacked into 3-D tensors */
    HF_ARCH_QWEN2MOE, /* Qwen2MoeForCausalLM -> GGUF "qwen2moe" (shared expert) */
    HF_ARCH_QWEN3MOE, /* Qwen3MoeForCausalLM -> GGUF "qwen3moe" */
    HF_ARCH_MIXTRAL,  /* MixtralForCausalLM  -> GGUF "llama" with experts */
    /* gated delta net (3 of 4 layers linear attention) + gated full attention */
    HF_ARCH_QWEN35,    /* Qwen3_5ForCausalLM, Qwen3_5ForConditionalGeneration -> "qwen35" */
    HF_ARCH_QWEN35MOE, /* Qwen3_5MoeForCausalLM, ..ForConditionalGeneration -> "qwen35moe" */
    HF_ARCH_QWEN3NEXT, /* Qwen3NextForCausalLM -> "qwen3next" (fused in_proj_qkvz / ba) */
    HF_ARCH_GEMMA4,    /* Gemma4ForCausalLM, text model of Gemma4ForConditionalGeneration
                        * -> "gemma4" (convert only; hf_gemma4.c) */
    HF_ARCH_GPTOSS,    /* GptOssForCausalLM -> "gpt-oss" (MXFP4 experts; hf_gptoss.c) */
    HF_ARCH_COUNT
};

enum hf_rope_scaling {
    HF_ROPE_NONE,
    HF_ROPE_LINEAR,   /* llama.rope.scaling.type "linear" + factor */
    HF_ROPE_LLAMA3,   /* rope_freqs.weight tensor */
    HF_ROPE_LONGROPE, /* phi3: rope_factors_long/short.weight + rope.scaling.attn_factor */
    HF_ROPE_YARN,     /* gpt-oss: rope.scaling.type "yarn", factor, original context, betas */
};

/* FFN gate activation of a family. */
enum hf_act { HF_ACT_SILU, HF_ACT_GELU_TANH };

#define HF_MAX_ROPE_FACTORS 512 /* LongRoPE factors per list (rope dims / 2) */

/* config.json quantization_config: how quantized source weights are stored
 * (hf_config_quant.c, docs/formats.md §6.9). Each method names the suffix of
 * its scale tensors; a new source format (MXFP4 blocks) adds a method here
 * and a decoder beside hf_fp8.c. */
enum hf_quant_method {
    HF_QM_NONE,   /* plain F16/BF16/F32 weights */
    HF_QM_FP8,    /* quant_method "fp8": F8_E4M3 weights, "<w>_scale_inv" (blocks of
                   * weight_block_size, or one per tensor / row without it) */
    HF_QM_CT_FP8, /* quant_method "compressed-tensors", format "float-quantized", 8-bit
                   * float weights: "<w>_scale" per tensor, channel or block */
    HF_QM_MXFP4,  /* quant_method "mxfp4" (gpt-oss): the experts as "<w>_blocks" (U8, two
                   * E2M1 a byte) + "<w>_scales" (U8 E8M0, one per 32), repacked to ggml's
                   * MXFP4 blocks without decoding (hf_gptoss.c) */
};
struct hf_quant_cfg {
    enum hf_quant_method method;
    uint32_t block[2];     /* scale block [rows, cols]; {0, 0}: taken from the scale's shape */
    char strategy[16];     /* compressed-tensors: "tensor", "channel" or "block"; fp8: "block"
                            * or "" */
};

struct hf_config {
    enum hf_arch arch;
    char hf_arch_name[64];   /* architectures[0] */
    const char *gguf_arch;   /* "llama" / "qwen2" (static string) */
    uint32_t n_vocab;        /* vocab_size */
    uint32_t n_embd;         /* hidden_size */
    uint32_t n_layer;        /* num_hidden_layers */
    uint32_t n_ff;           /* intermediate_size */
    uint32_t n_head;         /* num_attention_heads */
    uint32_t n_head_kv;      /* num_key_value_heads (default n_head) */
    uint32_t head_dim;       /* head_dim, default n_embd / n_head */
    bool head_dim_explicit;  /* head_dim was in config.json */
    uint32_t n_ctx;          /* max_position_embeddings */
    float rms_eps;           /* rms_norm_eps */
    bool has_rope_theta;
    float rope_theta;
    enum hf_rope_scaling rope_scaling;
    double rope_factor;      /* linear and llama3 */
    double rope_low_freq_factor, rope_high_freq_factor; /* llama3 */
    uint32_t rope_orig_ctx;  /* llama3 original_max_position_embeddings */
    bool tie_embeddings;     /* tie_word_embeddings */
    bool attention_bias;     /* llama: q/k/v/o biases present */
    bool mlp_bias;           /* llama: gate/up/down biases present */
    char torch_dtype[16];    /* informational, "" if absent */
    /* --- the Qwen3 / Gemma 2-3 / Phi-3 families (zero for llama / mistral / qwen2) --- */
    bool multimodal;         /* Gemma3ForConditionalGeneration: the text model's keys
                              * are under text_config (Gemma3TextConfig defaults for
                              * the absent ones), its tensors under model.language_model. */
    enum hf_act act;         /* hidden_act / hidden_activation */
    uint32_t n_rot;          /* RoPE dimensions (phi3: partial_rotary_factor; else head_dim) */
    uint32_t n_swa;          /* sliding_window (0: none / not written) */
    bool has_n_swa;          /* <arch>.attention.sliding_window is written */
    uint32_t swa_pattern;    /* llama.cpp's pattern: gemma2 2, gemma3 6 (1: no sliding layers) */
    bool has_rope_theta_swa;
    float rope_theta_swa;    /* gemma3 rope_local_base_freq -> rope.freq_base_swa */
    float attn_softcap;      /* gemma2 attn_logit_softcapping (0: none) */
    float final_softcap;     /* gemma2/3 final_logit_softcapping (0: none) */
    float query_pre_attn_scalar; /* gemma (0: absent) */
    float rope_attn_factor;  /* phi3 LongRoPE: rope.scaling.attn_factor */
    uint32_t n_rope_factors; /* phi3 LongRoPE: entries of rope_long / rope_short */
    float rope_long[HF_MAX_ROPE_FACTORS];
    float rope_short[HF_MAX_ROPE_FACTORS];
    /* --- mixture of experts (zero for the dense families) --- */
    uint32_t n_expert;       /* num_experts (qwen) / num_local_experts (mixtral) */
    uint32_t n_expert_used;  /* num_experts_per_tok, 1 .. n_expert */
    uint32_t n_ff_exp;       /* one expert's FFN width: moe_intermediate_size (qwen);
                              * mixtral: intermediate_size (== n_ff) */
    bool has_n_ff_exp;       /* <arch>.expert_feed_forward_length is written (qwen) */
    uint32_t n_ff_shexp;     /* qwen2moe shared_expert_intermediate_size (0: none) */
    bool norm_topk_prob;     /* the top-k router weights are renormalized
                              * (qwen3moe, mixtral: true; qwen2moe: false) */
    /* --- gated delta net: qwen35, qwen35moe, qwen3next (zero elsewhere) --- */
    bool has_n_ff;           /* intermediate_size present (feed_forward_length written;
                              * the other families require it) */
    uint32_t n_nextn;        /* MTP blocks kept as blk.n_layer.. (mtp_num_hidden_layers;
                              * qwen3next: counted from the mtp.layers.N tensors) */
    bool n_nextn_from_config;/* mtp_num_hidden_layers was in config.json */
    uint32_t full_attn_interval; /* full_attention_interval (default 4) */
    uint32_t ssm_conv_kernel;    /* linear_conv_kernel_dim */
    uint32_t ssm_d_state;        /* linear_key_head_dim (key head width, ssm.state_size) */
    uint32_t ssm_n_group;        /* linear_num_key_heads */
    uint32_t ssm_dt_rank;        /* linear_num_value_heads (a multiple of the key heads) */
    uint32_t ssm_head_v_dim;     /* linear_value_head_dim */
    uint32_t ssm_d_inner;        /* value heads * value head width (ssm.inner_size) */
    bool ssm_v_reorder;      /* qwen35/qwen35moe with key heads != value heads: V heads
                              * reordered grouped -> tiled as llama.cpp's converter does */
    bool has_rope_sections;  /* rope_parameters.mrope_section was given */
    int32_t rope_sections[4];/* rope.dimension_sections (padded with 0; qwen35 default
                              * [11, 11, 10, 0] when absent) */
    struct hf_quant_cfg quant; /* quantization_config (HF_QM_NONE when absent) */
    /* --- gemma4 (zero elsewhere; hf_gemma4.c) --- */
    uint32_t g4_n_embd_per_layer; /* hidden_size_per_layer_input (0: no per-layer embeddings) */
    uint32_t g4_n_kv_shared;      /* num_kv_shared_layers: the last ones reuse earlier K/V */
    uint32_t g4_head_dim_full;    /* global_head_dim (full-attention layers; head_dim: sliding) */
    uint32_t g4_n_head_kv_full;   /* num_global_key_value_heads (0: absent, n_head_kv) */
    uint32_t g4_rope_pairs_full;  /* rotated pairs of a full layer (partial_rotary_factor) */
    bool g4_double_wide_mlp;      /* use_double_wide_mlp: 2 x intermediate_size in shared layers */
    bool g4_k_eq_v;               /* attention_k_eq_v: full layers have no v_proj */
    bool g4_has_n_ff_exp;         /* moe_intermediate_size present */
    uint64_t g4_swa[8];           /* bit il: layer il is sliding_attention */
    /* --- gpt-oss (zero elsewhere; hf_gptoss.c) --- */
    uint32_t yarn_has;            /* HF_ROPE_YARN: bits 1 extrapolation_factor, 2
                                   * attention_factor, 4 beta_fast, 8 beta_slow present */
    double yarn_ext_factor, yarn_attn_factor, yarn_beta_fast, yarn_beta_slow;
    float swiglu_limit;           /* swiglu_limit (llama.cpp's graph: 7.0) */
};

/* Parse config.json text (len bytes, need not be NUL-terminated); name is the
 * file name for messages. Errors: MW_E_FORMAT (syntax, wrong type, missing
 * or contradictory key; err->where holds the JSON path), MW_E_UNSUPPORTED
 * (architecture, rope_scaling type, hidden_act), MW_E_NOMEM. */
enum mw_status hf_config_parse(const char *json, size_t len, const char *name,
                               struct hf_config *cfg, struct mw_err *err);
/* Read and parse the file at path (MW_E_FORMAT if it does not exist,
 * MW_E_IO if it cannot be read). */
enum mw_status hf_config_load(const char *path, struct hf_config *cfg, struct mw_err *err);
const char *hf_arch_name(enum hf_arch a); /* "llama", "mistral", "qwen2", "qwen2moe", ... */
/* Does the architecture have experts (qwen2moe, qwen3moe, mixtral, qwen35moe,
 * qwen3next)? */
bool hf_arch_is_moe(enum hf_arch a);
/* Is it a gated delta net family (qwen35, qwen35moe, qwen3next)? */
bool hf_arch_is_delta_net(enum hf_arch a);

/* --- a checkpoint directory ---------------------------------------------- */

struct hf_model;

/* Open dir: config.json and the weights (model.safetensors, or the index and
 * every shard it names; a shard missing on disk is MW_E_FORMAT naming the
 * index file and the tensor). Shards are mapped, not read. Release with
 * hf_model_close(). */
enum mw_status hf_model_open(const char *dir, struct hf_model **out, struct mw_err *err);
void hf_model_close(struct hf_model *m); /* NULL-safe */

const char *hf_model_dir(const struct hf_model *m);
const struct hf_config *hf_model_config(const struct hf_model *m);
uint64_t hf_model_shard_count(const struct hf_model *m);
const struct hf_st *hf_model_shard(const struct hf_model *m, uint64_t i);
/* All tensors in source order: shards sorted by file name, tensors sorted by
 * name within a shard (the order llama.cpp's converter visits them). */
uint64_t hf_model_tensor_count(const struct hf_model *m);
const struct hf_st_tensor *hf_model_tensor(const struct hf_model *m, uint64_t i,
                                           const struct hf_st **shard);
int64_t hf_model_tensor_find(const struct hf_model *m, const char *name);

/* --- architecture mapping (HF names -> GGUF) ------------------------------ */

enum hf_xform {
    HF_XFORM_NONE,
    HF_XFORM_PERMUTE, /* rotate-half -> interleaved rows, docs/formats.md §6.3 */
    HF_XFORM_ADD_ONE, /* gemma norms: w + 1 as llama.cpp's converter computes it (in F16
                       * for an F16 source, else in F32), then the output type */
    HF_XFORM_NEG_EXP, /* qwen35 A_log -> ssm_a: -exp(w) in F32 with torch's float exp
                       * (SLEEF's expf_u10, FMA: hf__torch_expf) */
    HF_XFORM_MXFP4,   /* gpt-oss experts: src the U8 *_blocks [X, rows, n/32, 16], aux the
                       * *_scales [X, rows, n/32]; rows sel_first, +sel_step, ... repacked
                       * into ggml MXFP4 blocks (docs/formats.md §6.11) */
    HF_XFORM_SPLIT,   /* gpt-oss gate_up bias [X, 2F]: columns sel_first, +sel_step, ... as F32 */
};

/* One output tensor of a conversion. */
struct hf_plan_tensor {
    char name[GGUF_MAX_NAME + 1];      /* GGUF name */
    const struct hf_st_tensor *src;    /* NULL: generated (rope_freqs) */
    const struct hf_st *shard;         /* shard of src */
    enum hf_xform xform;
    uint32_t perm_heads;               /* HF_XFORM_PERMUTE: head count */
    uint32_t type;                     /* ggml type written */
    uint32_t n_dims;
    uint64_t ne[GGUF_MAX_DIMS];        /* GGUF order (ne[0] contiguous) */
    uint64_t nbytes;                   /* bytes written */
    const float *gen;                  /* generated data (n_dims == 1) */
    /* Gathers (qwen35's V-head reorder, qwen3next's qkvz de-interleave):
     * output row r is source row row_map[r] (a 1-D tensor: element r is
     * source element row_map[r]); element j of every row is source element
     * col_map[j] of that row. NULL: identity. Owned by the plan. */
    const uint32_t *row_map;
    const uint32_t *col_map;
    /* Stacked experts (n_dims == 3; n_src == ne[2] > 0): expert x's HF
     * tensor is srcs[x] in shard srcs_shard[x] (2-D, ne[0] x ne[1] in GGUF
     * order); src/shard are srcs[0]/srcs_shard[0]. The output is the experts'
     * converted bytes one after the other, streamed expert by expert, as
     * llama.cpp's converter writes torch.stack(experts). 0: one source. */
    uint32_t n_src;
    const struct hf_st_tensor *const *srcs;
    const struct hf_st *const *srcs_shard;
    /* HF_XFORM_MXFP4 / HF_XFORM_SPLIT (hf_gptoss.c) */
    const struct hf_st_tensor *aux;
    const struct hf_st *aux_shard;
    uint32_t sel_first, sel_step;
};

enum hf_out_type {
    HF_OUT_F32,
    HF_OUT_F16,
    HF_OUT_BF16,
    HF_OUT_Q8_0,
    HF_OUT_COUNT
};
/* "f32", "f16", "bf16", "q8_0" */
const char *hf_out_type_name(enum hf_out_type t);
/* Parse one of the names above (case-insensitive); false if unknown. */
bool hf_out_type_parse(const char *s, enum hf_out_type *out);
/* general.file_type value (docs/formats.md §8.1): F32 0, F16 1, Q8_0 7, BF16 32. */
uint32_t hf_out_type_ftype(enum hf_out_type t);

struct hf_plan;

/* Map every tensor of m to its GGUF name, shape and type for output type t,
 * and check the set against the architecture: every required tensor present
 * with the shape config.json implies, nothing unknown, layer indices in
 * range. Errors: MW_E_FORMAT (wrong shape, missing tensor, contradiction with
 * config.json), MW_E_UNSUPPORTED (a tensor the architecture does not use,
 * a dtype other than F16/BF16/F32 or F8_E4M3 with valid scales; bad scales are
 * MW_E_FORMAT naming the scale tensor), MW_E_NOMEM. The plan borrows m. */
enum mw_status hf_plan_build(const struct hf_model *m, enum hf_out_type t,
                             struct hf_plan **out, struct mw_err *err);
void hf_plan_free(struct hf_plan *p); /* NULL-safe */
uint64_t hf_plan_count(const struct hf_plan *p);
const struct hf_plan_tensor *hf_plan_get(const struct hf_plan *p, uint64_t i);
uint64_t hf_plan_total_bytes(const struct hf_plan *p); /* tensor data written */
/* "F16", "BF16", "F32", "F8_E4M3" or a '+'-joined set ("F16+F32",
 * "F8_E4M3+BF16") of the source dtypes. */
const char *hf_plan_source_dtype(const struct hf_plan *p);

/* Write the bytes of output tensor i of p (converted, permuted, quantized)
 * in chunks through sink, using at most about chunk_bytes of scratch memory
 * at a time (0: default 4 MiB). Source pages are released after use. */
typedef enum mw_status (*hf_sink_fn)(void *ud, const void *data, size_t n, struct mw_err *err);
enum mw_status hf_plan_stream_tensor(const struct hf_plan *p, uint64_t i, size_t chunk_bytes,
                                     hf_sink_fn sink, void *sink_ud, struct mw_err *err);
/* The same with the rows of each chunk converted by the threads of pool
 * (core/mw_pool.h; NULL: the calling thread only). The bytes are identical
 * for any pool size: each row depends on its source row alone. */
struct mw_pool;
enum mw_status hf_plan_stream_tensor_mt(const struct hf_plan *p, uint64_t i, size_t chunk_bytes,
                                        struct mw_pool *pool, hf_sink_fn sink, void *sink_ud,
                                        struct mw_err *err);

/* --- conversion ------------------------------------------------------------ */

/* Progress: called after each tensor (and within large tensors) with bytes of
 * tensor data written so far and in total. Must not call back into hf. */
typedef void (*hf_progress_fn)(void *ud, uint64_t done_bytes, uint64_t total_bytes,
                               uint64_t tensor_i, uint64_t n_tensors, const char *tensor_name);

struct hf_convert_opts {
    enum hf_out_type type;
    const char *name;          /* general.name; NULL: the source dir basename */
    size_t chunk_bytes;        /* scratch per chunk; 0: 4 MiB */
    unsigned n_threads;        /* threads converting rows; 0 or 1: the caller only */
    hf_progress_fn progress;   /* may be NULL */
    void *progress_ud;
};

/* Convert the checkpoint in hf_dir to a GGUF file at out_path. Everything is
 * validated (config, every safetensors header, the tensor set and shapes,
 * the tokenizer) before the output is created; the file appears under
 * out_path only when complete (temp file + fsync + rename). Errors carry the
 * offending file, place and reason; mw_status_exit_code() gives 1 for bad
 * input, 3 for I/O. */
enum mw_status hf_convert(const char *hf_dir, const char *out_path,
                          const struct hf_convert_opts *opts, struct mw_err *err);

/* The KVs hf_convert writes for m (opened from hf_dir, planned as p for type
 * ot; general.name the directory's name), with the tokenizer's, as an
 * in-memory GGUF file without tensors: *out reads the buffer *buf, which
 * the caller free()s after gguf_close(*out). The quant pipeline takes a
 * checkpoint's KVs from here. Errors: those of the tokenizer (a size other
 * than config.json's vocab_size: MW_E_FORMAT) and of the writer. */
enum mw_status hf_convert_kvs(const char *hf_dir, const struct hf_model *m,
                              const struct hf_plan *p, enum hf_out_type ot, void **buf,
                              struct gguf_file **out, struct mw_err *err);

/* --- the checkpoint as a quant pipeline source (hf_quant.c) --- */
struct quant_source;
struct hf_quant_src;
/* Open hf_dir and fill *src (valid until hf_quant_source_close(*h)): the
 * tensors of its F16 conversion plan in source order, each streamed from
 * the shards when read, and the KVs of hf_convert_kvs(.., HF_OUT_F16, ..),
 * so quantizing the directory writes what quantizing its `memwall convert`
 * output would. Errors: those of hf_model_open, hf_plan_build,
 * hf_convert_kvs; MW_E_NOMEM. */
enum mw_status hf_quant_source_open(const char *hf_dir, struct quant_source *src,
                                    struct hf_quant_src **h, struct mw_err *err);
const struct hf_config *hf_quant_source_config(const struct hf_quant_src *h);
void hf_quant_source_close(struct hf_quant_src *h); /* NULL-safe */

/* --- inspect ------------------------------------------------------------------ */

/* True when path looks like an HF input for inspect: a directory, or a file
 * whose name ends in ".safetensors" or ".safetensors.index.json". */
bool hf_inspect_accepts(const char *path);

typedef void (*hf_emit_fn)(void *ud, const char *text);
/* Describe an HF directory (config, weights, the GGUF mapping) or a single
 * .safetensors file (header, metadata, tensors) as text lines, or as one JSON
 * document when json is true, through emit (called with NUL-terminated
 * pieces, each ending in '\n'). Same errors as hf_model_open / hf_st_open. */
enum mw_status hf_inspect(const char *path, bool json, hf_emit_fn emit, void *ud,
                          struct mw_err *err);

/* --- numeric kernels (exposed for tests) --------------------------------- */

/* Fill out[0 .. head_dim/2) with llama3 rope frequency factors as
 * convert_hf_to_gguf.py computes them (float32 arithmetic). */
void hf_llama3_rope_factors(const struct hf_config *cfg, float *out);

#endif /* MW_HF_H */
