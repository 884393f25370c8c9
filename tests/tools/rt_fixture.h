/*
 * tests/tools/rt_fixture.h — tiny llama/qwen2 GGUF models for the runtime's
 * tests, written with memwall's gguf writer, deterministic (same spec, same
 * bytes): a valid model with random weights and a small tokenizer, and a
 * catalogue of hostile variants — one defect each — that the runtime must
 * reject with an error naming the key or tensor.
 *
 * The default model (rt_fx_default): llama, n_embd 64, n_ff 128, 2 layers,
 * 2 heads / 1 kv head (head size 32), F16 weights, untied output, context
 * 128, SentencePiece vocabulary of 3 control + 256 byte + 64 pieces.
 */
#ifndef MW_TEST_RT_FIXTURE_H
#define MW_TEST_RT_FIXTURE_H

#include <stdbool.h>
#include <stdint.h>

#include "core/mw.h"

#define RT_FX_DEFECTS(X)                                                                        \
    X(OK, MW_OK, "")                                                                            \
    X(MISSING_TENSOR, MW_E_FORMAT, "tensor 'blk.1.ffn_up.weight'")                              \
    X(WRONG_SHAPE, MW_E_FORMAT, "tensor 'blk.0.attn_q.weight'")                                 \
    X(THREE_DIMS, MW_E_FORMAT, "tensor 'blk.0.ffn_gate.weight'")                                \
    X(HEADS_ZERO, MW_E_VALUE, "key 'llama.attention.head_count'")                               \
    X(HEADS_WRONG, MW_E_FORMAT, "tensor 'blk.0.attn_k.weight'")                                 \
    X(HEADS_KV_NOT_DIVISOR, MW_E_VALUE, "key 'llama.attention.head_count_kv'")                  \
    X(HEADS_KV_ABOVE, MW_E_VALUE, "key 'llama.attention.head_count_kv'")                        \
    X(HEADS_PER_LAYER, MW_E_UNSUPPORTED, "key 'llama.attention.head_count'")                    \
    X(KEY_TYPE, MW_E_FORMAT, "key 'llama.attention.head_count'")                                \
    X(UNSUPPORTED_TYPE, MW_E_UNSUPPORTED, "tensor 'blk.0.attn_v.weight'")                       \
    X(NORM_QUANTIZED, MW_E_UNSUPPORTED, "tensor 'blk.0.attn_norm.weight'")                      \
    X(EMBD_TYPE, MW_E_UNSUPPORTED, "tensor 'token_embd.weight'")                                \
    X(HUGE_CTX, MW_E_VALUE, "key 'llama.context_length'")                                       \
    X(EMBD_MISMATCH, MW_E_FORMAT, "tensor 'token_embd.weight'")                                 \
    X(LAYERS_MORE, MW_E_FORMAT, "tensor 'blk.2.attn_norm.weight'")                              \
    X(LAYERS_HUGE, MW_E_VALUE, "key 'llama.block_count'")                                       \
    X(EPS_MISSING, MW_E_FORMAT, "key 'llama.attention.layer_norm_rms_epsilon'")                 \
    X(EPS_NAN, MW_E_VALUE, "key 'llama.attention.layer_norm_rms_epsilon'")                      \
    X(ARCH_UNKNOWN, MW_E_UNSUPPORTED, "key 'general.architecture'")                             \
    X(ARCH_MISSING, MW_E_FORMAT, "key 'general.architecture'")                                  \
    X(ROT_ODD, MW_E_VALUE, "key 'llama.rope.dimension_count'")                                  \
    X(ROPE_YARN, MW_E_UNSUPPORTED, "key 'llama.rope.scaling.type'")                             \
    X(KV_LENGTHS, MW_E_UNSUPPORTED, "key 'llama.attention.value_length'")                       \
    X(MOE, MW_E_FORMAT, "key 'llama.expert_used_count'")                                        \
    X(ROPE_FREQS_LEN, MW_E_FORMAT, "tensor 'rope_freqs.weight'")                                \
    X(OUTPUT_SHAPE, MW_E_FORMAT, "tensor 'output.weight'")                                      \
    X(QWEN2_NO_BIAS, MW_E_FORMAT, "tensor 'blk.0.attn_q.bias'")                                 \
    X(VOCAB_MISMATCH, MW_E_FORMAT, "tensor 'token_embd.weight'")                                \
    X(NO_TOKENIZER, MW_E_FORMAT, "key 'tokenizer.ggml.model'")                                  \
    X(TOKENIZER_UNKNOWN, MW_E_UNSUPPORTED, "key 'tokenizer.ggml.model'")                        \
    X(SCORES_TYPE, MW_E_FORMAT, "key 'tokenizer.ggml.scores'")                                  \
    X(BOS_TYPE, MW_E_FORMAT, "key 'tokenizer.ggml.bos_token_id'")                               \
    X(MERGES_MISSING, MW_E_FORMAT, "key 'tokenizer.ggml.merges'")                               \
    X(QWEN3_NO_QNORM, MW_E_FORMAT, "tensor 'blk.0.attn_q_norm.weight'")                         \
    X(QNORM_IN_LLAMA, MW_E_FORMAT, "tensor 'blk.0.attn_q_norm.weight'")                         \
    X(GEMMA_NO_POST_FFW, MW_E_FORMAT, "tensor 'blk.1.post_ffw_norm.weight'")                    \
    X(GEMMA2_OUTPUT, MW_E_FORMAT, "tensor 'output.weight'")                                     \
    X(GEMMA2_SOFTCAP_ZERO, MW_E_VALUE, "key 'gemma2.attn_logit_softcapping'")                   \
    X(GEMMA3_SWA_BASE, MW_E_VALUE, "key 'gemma3.rope.freq_base_swa'")                           \
    X(PHI3_ONE_FACTOR, MW_E_FORMAT, "tensor 'rope_factors_short.weight'")                       \
    X(PHI3_UP_ROWS, MW_E_FORMAT, "tensor 'blk.0.ffn_up.weight'")                                \
    X(PHI3_QKV_MIXED, MW_E_FORMAT, "tensor 'blk.1.attn_qkv.weight'")                            \
    X(PHI3_FACTORS_LEN, MW_E_FORMAT, "tensor 'rope_factors_long.weight'")                       \
    X(MOE_USED_ABOVE, MW_E_VALUE, "key 'qwen3moe.expert_used_count'")                           \
    X(MOE_NO_DOWN, MW_E_FORMAT, "tensor 'blk.1.ffn_down_exps.weight'")                          \
    X(MOE_EXPS_SHAPE, MW_E_FORMAT, "tensor 'blk.0.ffn_up_exps.weight'")                         \
    X(MOE_ROUTER_SHAPE, MW_E_FORMAT, "tensor 'blk.0.ffn_gate_inp.weight'")                      \
    X(MOE_GATING, MW_E_VALUE, "key 'qwen3moe.expert_gating_func'")                              \
    X(MOE_SIGMOID, MW_E_UNSUPPORTED, "key 'qwen3moe.expert_gating_func'")                       \
    X(MOE_DENSE_FFN, MW_E_FORMAT, "tensor 'blk.0.ffn_gate.weight'")                             \
    X(MOE_NO_SHEXP, MW_E_FORMAT, "tensor 'blk.0.ffn_gate_inp_shexp.weight'")                    \
    X(MOE_IN_QWEN2, MW_E_UNSUPPORTED, "key 'qwen2.expert_count'")                              \
    X(SSM_CONV_KERNEL, MW_E_FORMAT, "tensor 'blk.0.ssm_conv1d.weight'")                       \
    X(SSM_HEADS, MW_E_VALUE, "key 'qwen35.ssm.time_step_rank'")                                \
    X(SSM_STATE_HUGE, MW_E_VALUE, "key 'qwen35.ssm.state_size'")                               \
    X(SSM_INNER, MW_E_VALUE, "key 'qwen35.ssm.inner_size'")                                    \
    X(SSM_NO_ALPHA, MW_E_FORMAT, "tensor 'blk.1.ssm_alpha.weight'")                            \
    X(SSM_GATE_ROWS, MW_E_FORMAT, "tensor 'blk.3.attn_q.weight'")                              \
    X(SSM_NO_KEY, MW_E_FORMAT, "key 'qwen3next.ssm.conv_kernel'")                              \
    X(SSM_RECURRENT_LAYERS, MW_E_UNSUPPORTED, "key 'qwen35.attention.recurrent_layers'")

enum rt_fx_defect {
#define RT_FX__ENUM(name, code, where) RT_FX_##name,
    RT_FX_DEFECTS(RT_FX__ENUM)
#undef RT_FX__ENUM
    RT_FX_DEFECT_COUNT
};

struct rt_fx_defect_info {
    const char *name;      /* "MISSING_TENSOR" */
    enum mw_status code;   /* what rt_model_open + rt_tok_init return */
    const char *where;     /* what err.where must contain */
};
const struct rt_fx_defect_info *rt_fx_defect_get(enum rt_fx_defect d);

struct rt_fx_spec {
    const char *arch;      /* "llama" or "qwen2" (q/k/v biases, NEOX rope), or a later family
                            * in llama.cpp's layout: "qwen3" (q/k norms), "gemma2"
                            * (sandwich norms, tied, soft-capping 50/30), "gemma3" (sandwich
                            * and q/k norms), "phi3" (fused attn_qkv and ffn_up); MoE:
                            * "qwen3moe", "qwen2moe", "llama" with n_expert (below) */
    uint32_t n_swa;        /* gemma: attention.sliding_window (0: key absent) */
    uint32_t swa_pattern;  /* gemma: attention.sliding_window_pattern (0: key absent) */
    uint32_t n_ctx_orig;   /* phi3: write LongRoPE factors and this original context (0: none) */
    /* mixture of experts in llama.cpp's layout: arch "qwen3moe" (q/k norms), "qwen2moe"
     * (q/k/v biases, shared expert ffn_*_shexp gated by ffn_gate_inp_shexp), or "llama"
     * with n_expert > 0 (Mixtral: experts n_ff wide). Router f32 (U(+-5/sqrt(n_embd)):
     * different tokens pick different experts), 3-D expert tensors in wtype. */
    uint32_t n_expert;     /* 0: dense (qwen*moe: 4) */
    uint32_t n_expert_used;/* 0: 2 */
    uint32_t n_ff_exp;     /* qwen*moe expert_feed_forward_length (0: n_ff / 2) */
    uint32_t n_ff_shexp;   /* qwen2moe expert_shared_feed_forward_length (0: n_ff) */
    /* gated delta net (arch "qwen35": dense FFN, IMROPE sections [2,1,1,0], V heads
     * tiled; "qwen35moe": experts + sigmoid-gated shared expert; "qwen3next": the
     * same with one ssm_ba matrix and grouped V heads, plain NEOX): layer il is
     * recurrent unless (il+1) % full_attn_interval == 0; full-attention q rows carry
     * a per-head gate, q/k norms, n_rot = head_dim / 4; one MTP block blk.{n_layer}
     * (block_count = n_layer + 1) unless no_mtp. */
    uint32_t ssm_state;    /* S (0: 32) */
    uint32_t ssm_k_heads;  /* Hk (0: 2) */
    uint32_t ssm_v_heads;  /* Hv (0: 4) */
    uint32_t full_attn_interval; /* (0: 4) */
    bool no_mtp;
    uint32_t n_embd, n_ff, n_layer, n_head, n_head_kv, n_ctx_train;
    uint32_t wtype;        /* ggml type of the 2-D weights (F32, F16, BF16, Q8_0, Q4_0 ...) */
    bool tied;             /* no output.weight */
    bool rope_freqs;       /* write rope_freqs.weight (all 1.0 except a few) */
    bool gpt2;             /* byte-level BPE vocabulary instead of SentencePiece */
    bool checksums;        /* memwall.checksum.* (default true) */
    float qk_gain;         /* q/k norm weights times this (0: 1): wide attention scores, so
                            * that exp(s - max) falls below f32's normal range */
    uint64_t seed;
    enum rt_fx_defect defect;
};

void rt_fx_default(struct rt_fx_spec *s);
/* Write the model described by s to path. */
enum mw_status rt_fx_write(const char *path, const struct rt_fx_spec *s, struct mw_err *err);
/* Copy the GGUF file in to out with every 2-D tensor (and 3-D expert stack)
 * whose source type is F32/F16/BF16 re-encoded as type (round-to-nearest, no
 * imatrix; tensors whose rows do not fit type's blocks, and MoE routers
 * ffn_gate_inp*, are copied unchanged). */
enum mw_status rt_fx_requant(const char *in, const char *out, uint32_t type, struct mw_err *err);

#endif /* MW_TEST_RT_FIXTURE_H */
