/* Unit tests for hf/'s config.json reader: a valid llama config, a
 * catalogue of errors (each with its status, JSON path and message), the
 * Qwen2/3, Gemma 2-3, Phi-3 and mixture-of-experts families with theirs, and
 * the byte offset of a JSON syntax error. The checkpoints, the mapping and
 * whole conversions are check_hf's. */
#define _GNU_SOURCE
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hf/hf.h"

#include "check_common.h"

// --- config.json ---------------------------------------------------------------------

#define CFG_LLAMA                                                                          \
    "\"hidden_size\":64,\"num_hidden_layers\":2,\"intermediate_size\":128,"                \
    "\"num_attention_heads\":4,\"num_key_value_heads\":2,\"vocab_size\":100,"              \
    "\"max_position_embeddings\":256,\"rms_norm_eps\":1e-05"

START_TEST(test_config_valid)
{
    struct hf_config c;
    struct mw_err err;
    mw_err_clear(&err);
    const char *j = "{\"architectures\":[\"MistralForCausalLM\"],\"model_type\":\"mistral\"," CFG_LLAMA
                    ",\"rope_theta\":1000000.0,\"sliding_window\":4096,\"hidden_act\":\"silu\"}";
    ck_assert_int_eq(hf_config_parse(j, strlen(j), "c.json", &c, &err), MW_OK);
    ck_assert_int_eq(c.arch, HF_ARCH_MISTRAL);
    ck_assert_str_eq(c.gguf_arch, "llama");
    ck_assert_uint_eq(c.head_dim, 16);
    ck_assert(!c.head_dim_explicit);
    ck_assert_uint_eq(c.n_head_kv, 2);
    ck_assert(c.has_rope_theta);
    ck_assert(c.rope_theta == 1000000.0f);
    ck_assert(c.rms_eps == 1e-5f);
    ck_assert_int_eq(c.rope_scaling, HF_ROPE_NONE);

    j = "{\"architectures\":[\"Qwen2ForCausalLM\"]," CFG_LLAMA ",\"tie_word_embeddings\":true}";
    ck_assert_int_eq(hf_config_parse(j, strlen(j), "c.json", &c, &err), MW_OK);
    ck_assert_str_eq(c.gguf_arch, "qwen2");
    ck_assert(c.tie_embeddings && c.attention_bias && !c.has_rope_theta);

    j = "{\"architectures\":[\"LlamaForCausalLM\"]," CFG_LLAMA
        ",\"head_dim\":32,\"rope_scaling\":{\"type\":\"linear\",\"factor\":4.0}}";
    ck_assert_int_eq(hf_config_parse(j, strlen(j), "c.json", &c, &err), MW_OK);
    ck_assert_uint_eq(c.head_dim, 32);
    ck_assert(c.head_dim_explicit);
    ck_assert_int_eq(c.rope_scaling, HF_ROPE_LINEAR);
    ck_assert(c.rope_factor == 4.0);

    j = "{\"architectures\":[\"LlamaForCausalLM\"]," CFG_LLAMA
        ",\"rope_scaling\":{\"rope_type\":\"llama3\",\"factor\":32.0}}";
    ck_assert_int_eq(hf_config_parse(j, strlen(j), "c.json", &c, &err), MW_OK);
    ck_assert_int_eq(c.rope_scaling, HF_ROPE_LLAMA3);
    ck_assert(c.rope_factor == 32.0 && c.rope_low_freq_factor == 1.0 &&
              c.rope_high_freq_factor == 4.0 && c.rope_orig_ctx == 8192);
    j = "{\"architectures\":[\"LlamaForCausalLM\"]," CFG_LLAMA ",\"rope_scaling\":null}";
    ck_assert_int_eq(hf_config_parse(j, strlen(j), "c.json", &c, &err), MW_OK);
    ck_assert_int_eq(c.rope_scaling, HF_ROPE_NONE);
}
END_TEST

/* a llama config.json with quantization_config Q; compressed-tensors with the
 * config groups "g0": G...; the weights object of a group with extra keys K */
#define QCFG(Q) "{\"architectures\":[\"LlamaForCausalLM\"]," CFG_LLAMA ",\"quantization_config\":" Q "}"
#define QCT(G)                                                                                     \
    "{\"quant_method\":\"compressed-tensors\",\"format\":\"float-quantized\","                    \
    "\"config_groups\":{\"g0\":" G "}}"
#define QW(K) "\"weights\":{\"num_bits\":8,\"type\":\"float\"," K "}"

/* the FP8 layouts quantization_config describes */
START_TEST(test_config_quant)
{
    struct hf_config c;
    struct mw_err err;
    const char *j = "{\"architectures\":[\"LlamaForCausalLM\"]," CFG_LLAMA "}";
    ck_assert_int_eq(hf_config_parse(j, strlen(j), "c.json", &c, &err), MW_OK);
    ck_assert_int_eq(c.quant.method, HF_QM_NONE);
    j = QCFG("{\"quant_method\":\"fp8\",\"fmt\":\"e4m3\",\"activation_scheme\":\"dynamic\","
             "\"weight_block_size\":[128,64]}");
    ck_assert_int_eq(hf_config_parse(j, strlen(j), "c.json", &c, &err), MW_OK);
    ck_assert_int_eq(c.quant.method, HF_QM_FP8);
    ck_assert_uint_eq(c.quant.block[0], 128);
    ck_assert_uint_eq(c.quant.block[1], 64);
    j = QCFG("{\"quant_method\":\"fp8\"}");
    ck_assert_int_eq(hf_config_parse(j, strlen(j), "c.json", &c, &err), MW_OK);
    ck_assert_int_eq(c.quant.method, HF_QM_FP8);
    ck_assert_uint_eq(c.quant.block[0], 0);
    j = QCFG(QCT("{" QW("\"strategy\":\"channel\",\"symmetric\":true,\"group_size\":null") "}"));
    ck_assert_int_eq(hf_config_parse(j, strlen(j), "c.json", &c, &err), MW_OK);
    ck_assert_int_eq(c.quant.method, HF_QM_CT_FP8);
    ck_assert_str_eq(c.quant.strategy, "channel");
    ck_assert_uint_eq(c.quant.block[0], 0);
    j = QCFG(QCT("{" QW("\"strategy\":\"block\",\"block_structure\":[96,80]") "}"));
    ck_assert_int_eq(hf_config_parse(j, strlen(j), "c.json", &c, &err), MW_OK);
    ck_assert_str_eq(c.quant.strategy, "block");
    ck_assert_uint_eq(c.quant.block[0], 96);
    ck_assert_uint_eq(c.quant.block[1], 80);
}
END_TEST

static const struct cfg_case {
    const char *name;
    const char *json;
    enum mw_status want;
    const char *where; /* err.where, exactly */
    const char *msg;   /* substring of err.msg */
} cfg_cases[] = {
    {"syntax", "{\"architectures\":[\"LlamaForCausalLM\"],,}", MW_E_FORMAT, "", "JSON syntax"},
    {"not-object", "[1]", MW_E_FORMAT, "", "JSON object"},
    {"trailing", "{} x", MW_E_FORMAT, "", "after the JSON value"},
    {"no-arch", "{" CFG_LLAMA "}", MW_E_FORMAT, "architectures", "missing"},
    {"arch-type", "{\"architectures\":\"LlamaForCausalLM\"," CFG_LLAMA "}", MW_E_FORMAT,
     "architectures", "array of strings"},
    {"arch-unsupported", "{\"architectures\":[\"GPT2LMHeadModel\"]," CFG_LLAMA "}",
     MW_E_UNSUPPORTED, "architectures[0]", "GPT2LMHeadModel"},
    {"model-type-contradicts",
     "{\"architectures\":[\"LlamaForCausalLM\"],\"model_type\":\"qwen2\"," CFG_LLAMA "}",
     MW_E_FORMAT, "model_type", "contradicts"},
    {"missing-heads",
     "{\"architectures\":[\"LlamaForCausalLM\"],\"hidden_size\":64,\"num_hidden_layers\":2,"
     "\"intermediate_size\":128,\"vocab_size\":100,\"max_position_embeddings\":256,"
     "\"rms_norm_eps\":1e-5}",
     MW_E_FORMAT, "num_attention_heads", "missing"},
    {"heads-string",
     "{\"architectures\":[\"LlamaForCausalLM\"],\"hidden_size\":64,\"num_hidden_layers\":2,"
     "\"intermediate_size\":128,\"num_attention_heads\":\"4\",\"vocab_size\":100,"
     "\"max_position_embeddings\":256,\"rms_norm_eps\":1e-5}",
     MW_E_FORMAT, "num_attention_heads", "integer"},
    {"zero-layers",
     "{\"architectures\":[\"LlamaForCausalLM\"],\"hidden_size\":64,\"num_hidden_layers\":0,"
     "\"intermediate_size\":128,\"num_attention_heads\":4,\"vocab_size\":100,"
     "\"max_position_embeddings\":256,\"rms_norm_eps\":1e-5}",
     MW_E_FORMAT, "num_hidden_layers", "out of range"},
    {"kv-not-divisor",
     "{\"architectures\":[\"LlamaForCausalLM\"],\"hidden_size\":64,\"num_hidden_layers\":2,"
     "\"intermediate_size\":128,\"num_attention_heads\":4,\"num_key_value_heads\":3,"
     "\"vocab_size\":100,\"max_position_embeddings\":256,\"rms_norm_eps\":1e-5}",
     MW_E_FORMAT, "num_key_value_heads", "not a multiple"},
    {"hidden-not-multiple",
     "{\"architectures\":[\"LlamaForCausalLM\"],\"hidden_size\":66,\"num_hidden_layers\":2,"
     "\"intermediate_size\":128,\"num_attention_heads\":4,\"vocab_size\":100,"
     "\"max_position_embeddings\":256,\"rms_norm_eps\":1e-5}",
     MW_E_FORMAT, "hidden_size", "not a multiple"},
    {"dup-top-level", "{\"architectures\":[\"LlamaForCausalLM\"]," CFG_LLAMA ",\"rms_norm_eps\":-1}",
     MW_E_FORMAT, "rms_norm_eps", "duplicate"},
    {"eps-negative",
     "{\"architectures\":[\"LlamaForCausalLM\"],\"hidden_size\":64,\"num_hidden_layers\":2,"
     "\"intermediate_size\":128,\"num_attention_heads\":4,\"vocab_size\":100,"
     "\"max_position_embeddings\":256,\"rms_norm_eps\":-1e-5}",
     MW_E_FORMAT, "rms_norm_eps", "positive number"},
    {"eps-missing",
     "{\"architectures\":[\"LlamaForCausalLM\"],\"hidden_size\":64,\"num_hidden_layers\":2,"
     "\"intermediate_size\":128,\"num_attention_heads\":4,\"vocab_size\":100,"
     "\"max_position_embeddings\":256}",
     MW_E_FORMAT, "rms_norm_eps", "missing"},
    {"act", "{\"architectures\":[\"LlamaForCausalLM\"]," CFG_LLAMA ",\"hidden_act\":\"gelu\"}",
     MW_E_UNSUPPORTED, "hidden_act", "gelu"},
    {"rope-type-contradicts",
     "{\"architectures\":[\"LlamaForCausalLM\"]," CFG_LLAMA
     ",\"rope_scaling\":{\"type\":\"linear\",\"rope_type\":\"llama3\",\"factor\":2}}",
     MW_E_FORMAT, "rope_scaling.type", "contradicts"},
    {"rope-yarn",
     "{\"architectures\":[\"LlamaForCausalLM\"]," CFG_LLAMA
     ",\"rope_scaling\":{\"type\":\"yarn\",\"factor\":2}}",
     MW_E_UNSUPPORTED, "rope_scaling.type", "yarn"},
    {"rope-linear-no-factor",
     "{\"architectures\":[\"LlamaForCausalLM\"]," CFG_LLAMA ",\"rope_scaling\":{\"type\":\"linear\"}}",
     MW_E_FORMAT, "rope_scaling.factor", "missing"},
    {"rope-llama3-equal",
     "{\"architectures\":[\"LlamaForCausalLM\"]," CFG_LLAMA
     ",\"rope_scaling\":{\"rope_type\":\"llama3\",\"low_freq_factor\":2,\"high_freq_factor\":2}}",
     MW_E_FORMAT, "rope_scaling.high_freq_factor", "equals"},
    {"rope-not-object", "{\"architectures\":[\"LlamaForCausalLM\"]," CFG_LLAMA ",\"rope_scaling\":3}",
     MW_E_FORMAT, "rope_scaling", "object"},
    {"tie-not-bool",
     "{\"architectures\":[\"LlamaForCausalLM\"]," CFG_LLAMA ",\"tie_word_embeddings\":1}",
     MW_E_FORMAT, "tie_word_embeddings", "true or false"},
    {"dup-nested",
     "{\"architectures\":[\"LlamaForCausalLM\"]," CFG_LLAMA
     ",\"rope_scaling\":{\"type\":\"linear\",\"factor\":2,\"factor\":3}}",
     MW_E_FORMAT, "rope_scaling.factor", "duplicate"},
    {"qwen2-llama3",
     "{\"architectures\":[\"Qwen2ForCausalLM\"]," CFG_LLAMA ",\"rope_scaling\":{\"rope_type\":\"llama3\"}}",
     MW_E_UNSUPPORTED, "rope_scaling.rope_type", "not supported"},
    /* quantization_config (FP8 sources) */
    {"q-not-object", QCFG("3"), MW_E_FORMAT, "quantization_config", "expected an object"},
    {"q-no-method", QCFG("{}"), MW_E_FORMAT, "quantization_config.quant_method", "a string"},
    {"q-awq", QCFG("{\"quant_method\":\"awq\"}"), MW_E_UNSUPPORTED,
     "quantization_config.quant_method", "'awq' is not supported"},
    {"q-e5m2", QCFG("{\"quant_method\":\"fp8\",\"fmt\":\"e5m2\"}"), MW_E_UNSUPPORTED,
     "quantization_config.fmt", "'e5m2' is not supported"},
    {"q-block-one", QCFG("{\"quant_method\":\"fp8\",\"weight_block_size\":[128]}"), MW_E_FORMAT,
     "quantization_config.weight_block_size", "two positive integers"},
    {"q-block-zero", QCFG("{\"quant_method\":\"fp8\",\"weight_block_size\":[0,128]}"),
     MW_E_FORMAT, "quantization_config.weight_block_size", "two positive integers"},
    {"q-ct-format", QCFG("{\"quant_method\":\"compressed-tensors\",\"format\":\"pack-quantized\"}"),
     MW_E_UNSUPPORTED, "quantization_config.format", "float-quantized"},
    {"q-ct-groups", QCFG(QCT("{" QW("\"strategy\":\"tensor\"") "},\"g1\":{" QW("\"strategy\":\"tensor\"") "}")),
     MW_E_UNSUPPORTED, "quantization_config.config_groups", "one config group"},
    {"q-ct-bits", QCFG(QCT("{\"weights\":{\"num_bits\":4,\"type\":\"float\"}}")), MW_E_UNSUPPORTED,
     "quantization_config.config_groups.g0.weights.num_bits", "expected 8"},
    {"q-ct-int", QCFG(QCT("{\"weights\":{\"num_bits\":8,\"type\":\"int\"}}")), MW_E_UNSUPPORTED,
     "quantization_config.config_groups.g0.weights.type", "float"},
    {"q-ct-group-size", QCFG(QCT("{" QW("\"strategy\":\"group\",\"group_size\":128") "}")),
     MW_E_UNSUPPORTED, "quantization_config.config_groups.g0.weights.group_size", "group scales"},
    {"q-ct-strategy", QCFG(QCT("{" QW("\"strategy\":\"token\"") "}")), MW_E_UNSUPPORTED,
     "quantization_config.config_groups.g0.weights.strategy", "\"channel\""},
    {"q-ct-block", QCFG(QCT("{" QW("\"strategy\":\"block\"") "}")), MW_E_FORMAT,
     "quantization_config.config_groups.g0.weights.block_structure", "two positive integers"},
    {"q-ct-asym", QCFG(QCT("{" QW("\"strategy\":\"channel\",\"symmetric\":false") "}")),
     MW_E_UNSUPPORTED, "quantization_config.config_groups.g0.weights.symmetric", "zero points"},
};
#define N_CFG_CASES ((int)(sizeof cfg_cases / sizeof cfg_cases[0]))

/* c's JSON fails to parse with c's status, place and message. */
static void check_cfg_case(const struct cfg_case *c)
{
    struct hf_config cfg;
    struct mw_err err;
    mw_err_clear(&err);
    enum mw_status s = hf_config_parse(c->json, strlen(c->json), "m/config.json", &cfg, &err);
    char text[1024];
    mw_err_format(&err, text, sizeof text);
    ck_assert_msg(s == c->want, "%s: %s, want %s (%s)", c->name, mw_status_name(s),
                  mw_status_name(c->want), text);
    ck_assert_str_eq(err.path, "m/config.json");
    ck_assert_msg(strcmp(err.where, c->where) == 0, "%s: where '%s', want '%s'", c->name,
                  err.where, c->where);
    ck_assert_msg(strstr(err.msg, c->msg) != NULL, "%s: msg '%s' lacks '%s'", c->name, err.msg,
                  c->msg);
}

START_TEST(test_config_errors)
{
    check_cfg_case(&cfg_cases[_i]);
}
END_TEST

/* --- the Qwen3 / Gemma 2-3 / Phi-3 families --- */
#define CFG_QWEN3                                                                                  \
    "\"architectures\":[\"Qwen3ForCausalLM\"],\"model_type\":\"qwen3\",\"hidden_size\":64,"        \
    "\"num_hidden_layers\":2,\"intermediate_size\":128,\"num_attention_heads\":4,"                 \
    "\"num_key_value_heads\":2,\"head_dim\":32,\"vocab_size\":1000,"                               \
    "\"max_position_embeddings\":40960,\"rms_norm_eps\":1e-6,\"rope_theta\":1000000,"              \
    "\"hidden_act\":\"silu\",\"tie_word_embeddings\":true,\"use_sliding_window\":false,"           \
    "\"sliding_window\":null,\"max_window_layers\":2,\"attention_bias\":false"
#define CFG_GEMMA3_BODY                                                                            \
    "\"hidden_size\":64,\"num_hidden_layers\":6,\"intermediate_size\":128,"                        \
    "\"num_attention_heads\":4,\"num_key_value_heads\":1,\"head_dim\":32,\"vocab_size\":1000,"     \
    "\"max_position_embeddings\":32768,\"rms_norm_eps\":1e-6,\"rope_theta\":1000000,"              \
    "\"rope_local_base_freq\":10000,\"hidden_activation\":\"gelu_pytorch_tanh\","                   \
    "\"query_pre_attn_scalar\":32,\"sliding_window\":16,\"sliding_window_pattern\":6,"             \
    "\"attn_logit_softcapping\":null,\"final_logit_softcapping\":null"
#define CFG_GEMMA3 "\"architectures\":[\"Gemma3ForCausalLM\"],\"model_type\":\"gemma3_text\"," CFG_GEMMA3_BODY
#define CFG_GEMMA2                                                                                 \
    "\"architectures\":[\"Gemma2ForCausalLM\"],\"model_type\":\"gemma2\",\"hidden_size\":64,"      \
    "\"num_hidden_layers\":4,\"intermediate_size\":128,\"num_attention_heads\":4,"                 \
    "\"num_key_value_heads\":2,\"head_dim\":32,\"vocab_size\":1000,"                               \
    "\"max_position_embeddings\":8192,\"rms_norm_eps\":1e-6,\"rope_theta\":10000.0,"               \
    "\"hidden_act\":\"gelu_pytorch_tanh\",\"hidden_activation\":\"gelu_pytorch_tanh\","            \
    "\"query_pre_attn_scalar\":32,\"sliding_window\":16,\"attn_logit_softcapping\":50.0,"          \
    "\"final_logit_softcapping\":30.0"
#define CFG_PHI3                                                                                   \
    "\"architectures\":[\"Phi3ForCausalLM\"],\"model_type\":\"phi3\",\"hidden_size\":128,"         \
    "\"num_hidden_layers\":2,\"intermediate_size\":256,\"num_attention_heads\":4,"                 \
    "\"num_key_value_heads\":2,\"vocab_size\":32064,\"max_position_embeddings\":4096,"             \
    "\"original_max_position_embeddings\":4096,\"rms_norm_eps\":1e-5,\"rope_theta\":10000.0,"      \
    "\"hidden_act\":\"silu\",\"sliding_window\":2047,\"tie_word_embeddings\":false"
#define LONGROPE16                                                                                 \
    "[1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,2]"
/* mixture of experts: the dense keys (CORE), the experts' */
#define CFG_QWEN3MOE_CORE                                                                          \
    "\"architectures\":[\"Qwen3MoeForCausalLM\"],\"model_type\":\"qwen3_moe\",\"hidden_size\":64,"  \
    "\"num_hidden_layers\":2,\"intermediate_size\":192,\"num_attention_heads\":4,"                 \
    "\"num_key_value_heads\":2,\"head_dim\":32,\"vocab_size\":1000,"                               \
    "\"max_position_embeddings\":40960,\"rms_norm_eps\":1e-6,\"rope_theta\":1000000.0,"            \
    "\"hidden_act\":\"silu\",\"tie_word_embeddings\":false,\"use_sliding_window\":false"
#define CFG_QWEN3MOE                                                                               \
    CFG_QWEN3MOE_CORE ",\"num_experts\":8,\"moe_intermediate_size\":32,"                          \
                      "\"num_experts_per_tok\":2,\"norm_topk_prob\":true,"                        \
                      "\"decoder_sparse_step\":1,\"mlp_only_layers\":[]"
#define CFG_QWEN2MOE_CORE                                                                          \
    "\"architectures\":[\"Qwen2MoeForCausalLM\"],\"model_type\":\"qwen2_moe\",\"hidden_size\":64,"  \
    "\"num_hidden_layers\":2,\"intermediate_size\":160,\"num_attention_heads\":4,"                 \
    "\"num_key_value_heads\":4,\"vocab_size\":1000,\"max_position_embeddings\":8192,"              \
    "\"rms_norm_eps\":1e-6,\"rope_theta\":1000000.0,\"hidden_act\":\"silu\","                     \
    "\"num_experts\":6,\"num_experts_per_tok\":4,\"moe_intermediate_size\":48"
#define CFG_QWEN2MOE                                                                               \
    CFG_QWEN2MOE_CORE ",\"shared_expert_intermediate_size\":128,\"norm_topk_prob\":false,"        \
                      "\"tie_word_embeddings\":false"
#define CFG_MIXTRAL_CORE                                                                           \
    "\"architectures\":[\"MixtralForCausalLM\"],\"model_type\":\"mixtral\",\"hidden_size\":64,"    \
    "\"num_hidden_layers\":2,\"intermediate_size\":128,\"num_attention_heads\":4,"                 \
    "\"num_key_value_heads\":2,\"vocab_size\":32000,\"max_position_embeddings\":32768,"            \
    "\"rms_norm_eps\":1e-5,\"rope_theta\":1000000.0,\"hidden_act\":\"silu\""
#define CFG_MIXTRAL CFG_MIXTRAL_CORE ",\"num_local_experts\":4,\"num_experts_per_tok\":2"

START_TEST(test_config_families)
{
    struct hf_config c;
    struct mw_err err;
    mw_err_clear(&err);
    const char *j = "{" CFG_QWEN3 "}";
    ck_assert_int_eq(hf_config_parse(j, strlen(j), "c.json", &c, &err), MW_OK);
    ck_assert_int_eq(c.arch, HF_ARCH_QWEN3);
    ck_assert_str_eq(c.gguf_arch, "qwen3");
    ck_assert_uint_eq(c.head_dim, 32);
    ck_assert_uint_eq(c.n_rot, 32);
    ck_assert(c.tie_embeddings && !c.attention_bias && c.act == HF_ACT_SILU);

    j = "{" CFG_GEMMA3 "}";
    ck_assert_int_eq(hf_config_parse(j, strlen(j), "c.json", &c, &err), MW_OK);
    ck_assert_int_eq(c.arch, HF_ARCH_GEMMA3);
    ck_assert(!c.multimodal && c.tie_embeddings && c.act == HF_ACT_GELU_TANH);
    ck_assert(c.has_n_swa && c.n_swa == 16 && c.swa_pattern == 6);
    ck_assert(c.rope_theta == 1000000.0f && c.rope_theta_swa == 10000.0f);
    ck_assert(c.final_softcap == 0.0f && c.attn_softcap == 0.0f);

    /* the real gemma-3-4b-it layout: a sparse text_config (Gemma3TextConfig defaults) */
    j = "{\"architectures\":[\"Gemma3ForConditionalGeneration\"],\"model_type\":\"gemma3\","
        "\"text_config\":{\"hidden_size\":64,\"intermediate_size\":128,\"model_type\":\"gemma3_text\","
        "\"num_hidden_layers\":6,\"rope_scaling\":{\"factor\":8.0,\"rope_type\":\"linear\"},"
        "\"sliding_window\":16},\"vision_config\":{\"hidden_size\":32},\"eos_token_id\":[1,106]}";
    ck_assert_int_eq(hf_config_parse(j, strlen(j), "c.json", &c, &err), MW_OK);
    ck_assert(c.multimodal);
    ck_assert_uint_eq(c.n_vocab, 262208);
    ck_assert_uint_eq(c.n_head, 8);
    ck_assert_uint_eq(c.n_head_kv, 4);
    ck_assert_uint_eq(c.head_dim, 256);
    ck_assert_uint_eq(c.n_ctx, 131072);
    ck_assert_int_eq(c.rope_scaling, HF_ROPE_LINEAR);
    ck_assert(c.rope_factor == 8.0 && c.rms_eps == 1e-6f);

    j = "{" CFG_GEMMA2 "}";
    ck_assert_int_eq(hf_config_parse(j, strlen(j), "c.json", &c, &err), MW_OK);
    ck_assert_int_eq(c.arch, HF_ARCH_GEMMA2);
    ck_assert(c.attn_softcap == 50.0f && c.final_softcap == 30.0f);
    ck_assert(c.n_swa == 16 && c.swa_pattern == 2 && !c.has_rope_theta);

    j = "{" CFG_PHI3 "}";
    ck_assert_int_eq(hf_config_parse(j, strlen(j), "c.json", &c, &err), MW_OK);
    ck_assert_int_eq(c.arch, HF_ARCH_PHI3);
    ck_assert(c.head_dim == 32 && !c.head_dim_explicit && c.n_rot == 32);
    ck_assert(!c.tie_embeddings && c.rope_orig_ctx == 4096 && c.n_swa == 2047);
    ck_assert_int_eq(c.rope_scaling, HF_ROPE_NONE);

    /* LongRoPE: attn_factor = sqrt(1 + ln(131072/4096) / ln(4096)) */
    j = "{" CFG_PHI3 ",\"max_position_embeddings\":131072,\"rope_scaling\":{\"type\":\"longrope\","
        "\"long_factor\":" LONGROPE16 ",\"short_factor\":" LONGROPE16 "}}";
    /* (a duplicate key: expect the duplicate error, then build it without) */
    ck_assert_int_eq(hf_config_parse(j, strlen(j), "c.json", &c, &err), MW_E_FORMAT);
    j = "{\"architectures\":[\"Phi3ForCausalLM\"],\"model_type\":\"phi3\",\"hidden_size\":128,"
        "\"num_hidden_layers\":2,\"intermediate_size\":256,\"num_attention_heads\":4,"
        "\"num_key_value_heads\":2,\"vocab_size\":32064,\"max_position_embeddings\":131072,"
        "\"original_max_position_embeddings\":4096,\"rms_norm_eps\":1e-5,\"rope_theta\":10000.0,"
        "\"rope_scaling\":{\"type\":\"longrope\",\"long_factor\":" LONGROPE16
        ",\"short_factor\":" LONGROPE16 "}}";
    ck_assert_int_eq(hf_config_parse(j, strlen(j), "c.json", &c, &err), MW_OK);
    ck_assert_int_eq(c.rope_scaling, HF_ROPE_LONGROPE);
    ck_assert_uint_eq(c.n_rope_factors, 16);
    ck_assert(c.rope_long[15] == 2.0f);
    ck_assert(c.rope_attn_factor == (float)sqrt(1.0 + log(32.0) / log(4096.0)));
    ck_assert(c.n_swa == 0); /* absent: 0 */

    /* partial_rotary_factor (Phi-4-mini): int(0.75 * 128) // 4 = 24 */
    j = "{" CFG_PHI3 ",\"partial_rotary_factor\":0.75}";
    ck_assert_int_eq(hf_config_parse(j, strlen(j), "c.json", &c, &err), MW_OK);
    ck_assert_uint_eq(c.n_rot, 24);

    /* mixture of experts */
    j = "{" CFG_QWEN3MOE "}";
    ck_assert_int_eq(hf_config_parse(j, strlen(j), "c.json", &c, &err), MW_OK);
    ck_assert_int_eq(c.arch, HF_ARCH_QWEN3MOE);
    ck_assert_str_eq(c.gguf_arch, "qwen3moe");
    ck_assert(hf_arch_is_moe(c.arch) && c.head_dim == 32 && !c.tie_embeddings);
    ck_assert(c.n_expert == 8 && c.n_expert_used == 2 && c.n_ff_exp == 32 && c.has_n_ff_exp);
    ck_assert(c.n_ff_shexp == 0 && c.norm_topk_prob && c.n_ff == 192);
    j = "{" CFG_QWEN2MOE "}";
    ck_assert_int_eq(hf_config_parse(j, strlen(j), "c.json", &c, &err), MW_OK);
    ck_assert_int_eq(c.arch, HF_ARCH_QWEN2MOE);
    ck_assert_str_eq(c.gguf_arch, "qwen2moe");
    ck_assert(c.attention_bias && c.n_expert == 6 && c.n_expert_used == 4 && c.n_ff_exp == 48);
    ck_assert(c.n_ff_shexp == 128 && !c.norm_topk_prob && c.head_dim == 16);
    j = "{" CFG_MIXTRAL "}";
    ck_assert_int_eq(hf_config_parse(j, strlen(j), "c.json", &c, &err), MW_OK);
    ck_assert_int_eq(c.arch, HF_ARCH_MIXTRAL);
    ck_assert_str_eq(c.gguf_arch, "llama");
    ck_assert_str_eq(hf_arch_name(c.arch), "mixtral");
    ck_assert(c.n_expert == 4 && c.n_expert_used == 2 && c.n_ff_exp == 128 && !c.has_n_ff_exp);
    ck_assert(!c.attention_bias && c.norm_topk_prob);
    ck_assert(!hf_arch_is_moe(HF_ARCH_QWEN3) && !hf_arch_is_moe(HF_ARCH_LLAMA));
}
END_TEST

static const struct cfg_case fam_cases[] = {
    /* mixture of experts */
    {"qwen3moe-topk", "{" CFG_QWEN3MOE_CORE ",\"num_experts\":8,\"moe_intermediate_size\":32,"
     "\"num_experts_per_tok\":9,\"norm_topk_prob\":true}",
     MW_E_FORMAT, "num_experts_per_tok", "9 is more than num_experts 8"},
    {"qwen3moe-no-experts", "{" CFG_QWEN3MOE_CORE ",\"moe_intermediate_size\":32,"
     "\"num_experts_per_tok\":2,\"norm_topk_prob\":true}",
     MW_E_FORMAT, "num_experts", "missing"},
    {"qwen3moe-no-moe-ff", "{" CFG_QWEN3MOE_CORE ",\"num_experts\":8,"
     "\"num_experts_per_tok\":2,\"norm_topk_prob\":true}",
     MW_E_FORMAT, "moe_intermediate_size", "missing"},
    {"qwen3moe-sparse-step", "{" CFG_QWEN3MOE_CORE ",\"num_experts\":8,\"moe_intermediate_size\":32,"
     "\"num_experts_per_tok\":2,\"norm_topk_prob\":true,\"decoder_sparse_step\":2}",
     MW_E_UNSUPPORTED, "decoder_sparse_step", "dense MLP"},
    {"qwen3moe-mlp-only", "{" CFG_QWEN3MOE_CORE ",\"num_experts\":8,\"moe_intermediate_size\":32,"
     "\"num_experts_per_tok\":2,\"norm_topk_prob\":true,\"mlp_only_layers\":[1]}",
     MW_E_UNSUPPORTED, "mlp_only_layers[0]", "layer 1 with a dense MLP"},
    {"qwen3moe-mlp-only-type", "{" CFG_QWEN3MOE_CORE ",\"num_experts\":8,\"moe_intermediate_size\":32,"
     "\"num_experts_per_tok\":2,\"norm_topk_prob\":true,\"mlp_only_layers\":3}",
     MW_E_FORMAT, "mlp_only_layers", "expected an array"},
    {"qwen3moe-norm", "{" CFG_QWEN3MOE_CORE ",\"num_experts\":8,\"moe_intermediate_size\":32,"
     "\"num_experts_per_tok\":2,\"norm_topk_prob\":false}",
     MW_E_UNSUPPORTED, "norm_topk_prob", "always renormalizes"},
    {"qwen3moe-norm-absent", "{" CFG_QWEN3MOE_CORE ",\"num_experts\":8,\"moe_intermediate_size\":32,"
     "\"num_experts_per_tok\":2}",
     MW_E_UNSUPPORTED, "norm_topk_prob", "absent (false)"},
    {"qwen3moe-local-experts", "{" CFG_QWEN3MOE ",\"num_local_experts\":8}", MW_E_FORMAT,
     "num_local_experts", "not a Qwen3MoeForCausalLM key"},
    {"qwen3moe-model-type",
     "{\"architectures\":[\"Qwen3MoeForCausalLM\"],\"model_type\":\"qwen3\",\"hidden_size\":64}",
     MW_E_FORMAT, "model_type", "contradicts"},
    {"qwen2moe-norm", "{" CFG_QWEN2MOE_CORE ",\"shared_expert_intermediate_size\":128,"
     "\"norm_topk_prob\":true}", MW_E_UNSUPPORTED, "norm_topk_prob", "never renormalizes"},
    {"qwen2moe-no-shared", "{" CFG_QWEN2MOE_CORE "}", MW_E_FORMAT,
     "shared_expert_intermediate_size", "missing"},
    {"qwen2moe-tied", "{" CFG_QWEN2MOE_CORE ",\"shared_expert_intermediate_size\":128,"
     "\"tie_word_embeddings\":true}", MW_E_UNSUPPORTED, "tie_word_embeddings", "output.weight"},
    {"mixtral-topk0", "{" CFG_MIXTRAL_CORE ",\"num_local_experts\":4,\"num_experts_per_tok\":0}",
     MW_E_FORMAT, "num_experts_per_tok", "out of range"},
    {"mixtral-no-experts", "{" CFG_MIXTRAL_CORE ",\"num_experts_per_tok\":2}", MW_E_FORMAT,
     "num_local_experts", "missing"},
    {"mixtral-num-experts", "{" CFG_MIXTRAL ",\"num_experts\":4}", MW_E_FORMAT, "num_experts",
     "not a MixtralForCausalLM key"},
    {"mixtral-too-many", "{" CFG_MIXTRAL_CORE ",\"num_local_experts\":1025,\"num_experts_per_tok\":2}",
     MW_E_FORMAT, "num_local_experts", "at most 1024"},
    {"qwen3-gemma-key", "{" CFG_QWEN3 ",\"query_pre_attn_scalar\":32}", MW_E_FORMAT,
     "query_pre_attn_scalar", "not a Qwen3ForCausalLM key"},
    {"qwen3-no-head-dim",
     "{\"architectures\":[\"Qwen3ForCausalLM\"],\"hidden_size\":64,\"num_hidden_layers\":2,"
     "\"intermediate_size\":128,\"num_attention_heads\":4,\"vocab_size\":100,"
     "\"max_position_embeddings\":256,\"rms_norm_eps\":1e-6}",
     MW_E_FORMAT, "head_dim", "missing"},
    {"qwen3-bias",
     "{\"architectures\":[\"Qwen3ForCausalLM\"],\"hidden_size\":64,\"num_hidden_layers\":2,"
     "\"intermediate_size\":128,\"num_attention_heads\":4,\"head_dim\":32,\"vocab_size\":100,"
     "\"max_position_embeddings\":256,\"rms_norm_eps\":1e-6,\"attention_bias\":true}",
     MW_E_UNSUPPORTED, "attention_bias", "not supported"},
    {"qwen3-text-config", "{" CFG_QWEN3 ",\"text_config\":{}}", MW_E_FORMAT, "text_config",
     "not a multimodal"},
    {"qwen3-model-type",
     "{\"architectures\":[\"Qwen3ForCausalLM\"],\"model_type\":\"qwen2\",\"hidden_size\":64,"
     "\"num_hidden_layers\":2,\"intermediate_size\":128,\"num_attention_heads\":4,"
     "\"head_dim\":32,\"vocab_size\":100,\"max_position_embeddings\":256,\"rms_norm_eps\":1e-6}",
     MW_E_FORMAT, "model_type", "contradicts"},
    {"llama-text-config",
     "{\"architectures\":[\"LlamaForCausalLM\"]," CFG_LLAMA ",\"text_config\":{}}", MW_E_FORMAT,
     "text_config", "not a multimodal"},
    {"gemma3-model-type",
     "{\"architectures\":[\"Gemma3ForCausalLM\"],\"model_type\":\"gemma2\"," CFG_GEMMA3_BODY "}",
     MW_E_FORMAT, "model_type", "contradicts"},
    {"gemma3-phi-key", "{" CFG_GEMMA3 ",\"original_max_position_embeddings\":4096}", MW_E_FORMAT,
     "original_max_position_embeddings", "not a Gemma3ForCausalLM key"},
    {"gemma3-no-window",
     "{\"architectures\":[\"Gemma3ForCausalLM\"],\"hidden_size\":64,\"num_hidden_layers\":6,"
     "\"intermediate_size\":128,\"num_attention_heads\":4,\"num_key_value_heads\":1,"
     "\"head_dim\":32,\"vocab_size\":1000,\"max_position_embeddings\":32768,"
     "\"query_pre_attn_scalar\":32}",
     MW_E_FORMAT, "sliding_window", "missing"},
    {"gemma3-attn-softcap",
     "{\"architectures\":[\"Gemma3ForCausalLM\"],\"hidden_size\":64,\"num_hidden_layers\":6,"
     "\"intermediate_size\":128,\"num_attention_heads\":4,\"num_key_value_heads\":1,"
     "\"head_dim\":32,\"vocab_size\":1000,\"max_position_embeddings\":32768,"
     "\"query_pre_attn_scalar\":32,\"sliding_window\":16,\"attn_logit_softcapping\":50}",
     MW_E_FORMAT, "attn_logit_softcapping", "must be null"},
    {"gemma3-pattern",
     "{\"architectures\":[\"Gemma3ForCausalLM\"],\"hidden_size\":64,\"num_hidden_layers\":6,"
     "\"intermediate_size\":128,\"num_attention_heads\":4,\"num_key_value_heads\":1,"
     "\"head_dim\":32,\"vocab_size\":1000,\"max_position_embeddings\":32768,"
     "\"query_pre_attn_scalar\":32,\"sliding_window\":16,\"sliding_window_pattern\":4}",
     MW_E_UNSUPPORTED, "sliding_window_pattern", "assumes 6"},
    {"gemma3-layer-types",
     "{\"architectures\":[\"Gemma3ForCausalLM\"],\"hidden_size\":64,\"num_hidden_layers\":2,"
     "\"intermediate_size\":128,\"num_attention_heads\":4,\"num_key_value_heads\":1,"
     "\"head_dim\":32,\"vocab_size\":1000,\"max_position_embeddings\":32768,"
     "\"query_pre_attn_scalar\":32,\"sliding_window\":16,"
     "\"layer_types\":[\"full_attention\",\"full_attention\"]}",
     MW_E_UNSUPPORTED, "layer_types[0]", "sliding_attention"},
    {"gemma3-scalar",
     "{\"architectures\":[\"Gemma3ForCausalLM\"],\"hidden_size\":64,\"num_hidden_layers\":6,"
     "\"intermediate_size\":128,\"num_attention_heads\":4,\"num_key_value_heads\":1,"
     "\"head_dim\":32,\"vocab_size\":1000,\"max_position_embeddings\":32768,"
     "\"query_pre_attn_scalar\":64,\"sliding_window\":16}",
     MW_E_UNSUPPORTED, "query_pre_attn_scalar", "1/sqrt(32)"},
    {"gemma3mm-no-text-config",
     "{\"architectures\":[\"Gemma3ForConditionalGeneration\"],\"model_type\":\"gemma3\"}",
     MW_E_FORMAT, "text_config", "missing"},
    {"gemma3mm-top-level-key",
     "{\"architectures\":[\"Gemma3ForConditionalGeneration\"],\"hidden_size\":64,"
     "\"text_config\":{\"hidden_size\":64,\"intermediate_size\":128,\"num_hidden_layers\":6,"
     "\"sliding_window\":16}}",
     MW_E_FORMAT, "hidden_size", "text_config"},
    {"gemma3mm-text-model-type",
     "{\"architectures\":[\"Gemma3ForConditionalGeneration\"],"
     "\"text_config\":{\"model_type\":\"gemma2\",\"hidden_size\":64,\"intermediate_size\":128,"
     "\"num_hidden_layers\":6,\"sliding_window\":16}}",
     MW_E_FORMAT, "text_config.model_type", "contradicts"},
    {"gemma3mm-missing-layers",
     "{\"architectures\":[\"Gemma3ForConditionalGeneration\"],"
     "\"text_config\":{\"hidden_size\":64,\"intermediate_size\":128,\"sliding_window\":16}}",
     MW_E_FORMAT, "text_config.num_hidden_layers", "missing"},
    {"gemma3mm-qwen-key",
     "{\"architectures\":[\"Gemma3ForConditionalGeneration\"],"
     "\"text_config\":{\"hidden_size\":64,\"intermediate_size\":128,\"num_hidden_layers\":6,"
     "\"sliding_window\":16,\"use_sliding_window\":true}}",
     MW_E_FORMAT, "text_config.use_sliding_window", "not a Gemma3ForConditionalGeneration key"},
    {"gemma2-no-softcap",
     "{\"architectures\":[\"Gemma2ForCausalLM\"],\"hidden_size\":64,\"num_hidden_layers\":4,"
     "\"intermediate_size\":128,\"num_attention_heads\":4,\"num_key_value_heads\":2,"
     "\"head_dim\":32,\"vocab_size\":1000,\"max_position_embeddings\":8192,"
     "\"rms_norm_eps\":1e-6,\"query_pre_attn_scalar\":32,\"sliding_window\":16,"
     "\"final_logit_softcapping\":30.0}",
     MW_E_FORMAT, "attn_logit_softcapping", "missing"},
    {"gemma2-gemma3-key",
     "{\"architectures\":[\"Gemma2ForCausalLM\"],\"hidden_size\":64,\"num_hidden_layers\":4,"
     "\"intermediate_size\":128,\"num_attention_heads\":4,\"num_key_value_heads\":2,"
     "\"head_dim\":32,\"vocab_size\":1000,\"max_position_embeddings\":8192,"
     "\"rms_norm_eps\":1e-6,\"query_pre_attn_scalar\":32,\"sliding_window\":16,"
     "\"rope_local_base_freq\":10000}",
     MW_E_FORMAT, "rope_local_base_freq", "not a Gemma2ForCausalLM key"},
    {"gemma2-acts-contradict",
     "{\"architectures\":[\"Gemma2ForCausalLM\"],\"hidden_size\":64,\"num_hidden_layers\":4,"
     "\"intermediate_size\":128,\"num_attention_heads\":4,\"num_key_value_heads\":2,"
     "\"head_dim\":32,\"vocab_size\":1000,\"max_position_embeddings\":8192,"
     "\"rms_norm_eps\":1e-6,\"hidden_act\":\"silu\",\"hidden_activation\":\"gelu_pytorch_tanh\"}",
     MW_E_FORMAT, "hidden_activation", "contradicts"},
    {"gemma2-untied",
     "{\"architectures\":[\"Gemma2ForCausalLM\"],\"hidden_size\":64,\"num_hidden_layers\":4,"
     "\"intermediate_size\":128,\"num_attention_heads\":4,\"num_key_value_heads\":2,"
     "\"head_dim\":32,\"vocab_size\":1000,\"max_position_embeddings\":8192,"
     "\"rms_norm_eps\":1e-6,\"query_pre_attn_scalar\":32,\"sliding_window\":16,"
     "\"attn_logit_softcapping\":50.0,\"final_logit_softcapping\":30.0,"
     "\"tie_word_embeddings\":false}",
     MW_E_UNSUPPORTED, "tie_word_embeddings", "false"},
    {"phi3-no-orig",
     "{\"architectures\":[\"Phi3ForCausalLM\"],\"hidden_size\":128,\"num_hidden_layers\":2,"
     "\"intermediate_size\":256,\"num_attention_heads\":4,\"vocab_size\":32064,"
     "\"max_position_embeddings\":4096,\"rms_norm_eps\":1e-5,\"rope_theta\":10000.0}",
     MW_E_FORMAT, "original_max_position_embeddings", "missing"},
    {"phi3-head-dim", "{" CFG_PHI3 ",\"head_dim\":32}", MW_E_FORMAT, "head_dim",
     "not a Phi3ForCausalLM key"},
    {"phi3-gemma-key", "{" CFG_PHI3 ",\"hidden_activation\":\"silu\"}", MW_E_FORMAT,
     "hidden_activation", "not a Phi3ForCausalLM key"},
    {"phi3-longrope-short",
     "{\"architectures\":[\"Phi3ForCausalLM\"],\"hidden_size\":128,\"num_hidden_layers\":2,"
     "\"intermediate_size\":256,\"num_attention_heads\":4,\"vocab_size\":32064,"
     "\"max_position_embeddings\":131072,\"original_max_position_embeddings\":4096,"
     "\"rms_norm_eps\":1e-5,\"rope_theta\":10000.0,"
     "\"rope_scaling\":{\"type\":\"longrope\",\"long_factor\":" LONGROPE16 "}}",
     MW_E_FORMAT, "rope_scaling.short_factor", "missing"},
    {"phi3-longrope-len",
     "{\"architectures\":[\"Phi3ForCausalLM\"],\"hidden_size\":128,\"num_hidden_layers\":2,"
     "\"intermediate_size\":256,\"num_attention_heads\":4,\"vocab_size\":32064,"
     "\"max_position_embeddings\":131072,\"original_max_position_embeddings\":4096,"
     "\"rms_norm_eps\":1e-5,\"rope_theta\":10000.0,"
     "\"rope_scaling\":{\"type\":\"longrope\",\"long_factor\":[1,2],\"short_factor\":[1,2]}}",
     MW_E_FORMAT, "rope_scaling.long_factor", "need 16"},
    {"phi3-yarn",
     "{\"architectures\":[\"Phi3ForCausalLM\"],\"hidden_size\":128,\"num_hidden_layers\":2,"
     "\"intermediate_size\":256,\"num_attention_heads\":4,\"vocab_size\":32064,"
     "\"max_position_embeddings\":131072,\"original_max_position_embeddings\":4096,"
     "\"rms_norm_eps\":1e-5,\"rope_theta\":10000.0,\"rope_scaling\":{\"type\":\"yarn\"}}",
     MW_E_UNSUPPORTED, "rope_scaling", "yarn"},
};
#define N_FAM_CASES ((int)(sizeof fam_cases / sizeof fam_cases[0]))

START_TEST(test_config_family_errors)
{
    check_cfg_case(&fam_cases[_i]);
}
END_TEST

// --- the gated delta net families ------------------------------------------------------

/* Qwen3.5-0.8B's text_config key set (tiny values): 8 layers, key heads 2,
 * value heads 6 */
#define CFG_Q35_TEXT                                                                       \
    "\"attn_output_gate\":true,\"full_attention_interval\":4,\"head_dim\":64,"           \
    "\"hidden_act\":\"silu\",\"hidden_size\":64,\"intermediate_size\":128,"               \
    "\"linear_conv_kernel_dim\":4,\"linear_key_head_dim\":32,\"linear_num_key_heads\":2,"  \
    "\"linear_num_value_heads\":6,\"linear_value_head_dim\":32,"                          \
    "\"max_position_embeddings\":262144,\"model_type\":\"qwen3_5_text\","                 \
    "\"mtp_num_hidden_layers\":1,\"num_attention_heads\":4,\"num_hidden_layers\":8,"      \
    "\"num_key_value_heads\":2,\"rms_norm_eps\":1e-06,\"vocab_size\":1000,"               \
    "\"rope_parameters\":{\"mrope_interleaved\":true,\"mrope_section\":[3,3,2],"           \
    "\"partial_rotary_factor\":0.25,\"rope_theta\":10000000,\"rope_type\":\"default\"}"
#define CFG_Q35_CG(extra)                                                                  \
    "{\"architectures\":[\"Qwen3_5ForConditionalGeneration\"],\"model_type\":\"qwen3_5\","  \
    "\"tie_word_embeddings\":true,\"text_config\":{" CFG_Q35_TEXT extra "}}"
#define CFG_Q3NEXT(extra)                                                                  \
    "{\"architectures\":[\"Qwen3NextForCausalLM\"],\"model_type\":\"qwen3_next\","         \
    "\"full_attention_interval\":4,\"head_dim\":64,\"hidden_size\":64,"                     \
    "\"intermediate_size\":160,\"linear_conv_kernel_dim\":4,\"linear_key_head_dim\":32,"    \
    "\"linear_num_key_heads\":2,\"linear_num_value_heads\":6,\"linear_value_head_dim\":32,"  \
    "\"max_position_embeddings\":262144,\"moe_intermediate_size\":32,\"norm_topk_prob\":true," \
    "\"num_attention_heads\":4,\"num_experts\":8,\"num_experts_per_tok\":2,"               \
    "\"num_hidden_layers\":8,\"num_key_value_heads\":2,\"partial_rotary_factor\":0.25,"     \
    "\"rms_norm_eps\":1e-06,\"rope_theta\":10000000,\"shared_expert_intermediate_size\":64," \
    "\"vocab_size\":1000" extra "}"

START_TEST(test_config_delta_net)
{
    struct hf_config c;
    struct mw_err err;
    mw_err_clear(&err);
    const char *j = CFG_Q35_CG("");
    ck_assert_int_eq(hf_config_parse(j, strlen(j), "c.json", &c, &err), MW_OK);
    ck_assert_int_eq(c.arch, HF_ARCH_QWEN35);
    ck_assert_str_eq(c.gguf_arch, "qwen35");
    ck_assert(c.multimodal && c.tie_embeddings && hf_arch_is_delta_net(c.arch) &&
              !hf_arch_is_moe(c.arch));
    ck_assert_uint_eq(c.n_layer, 8);
    ck_assert_uint_eq(c.n_nextn, 1);
    ck_assert_uint_eq(c.n_rot, 16);
    ck_assert(c.has_rope_sections && c.rope_sections[0] == 3 && c.rope_sections[2] == 2 &&
              c.rope_sections[3] == 0);
    ck_assert_uint_eq(c.full_attn_interval, 4);
    ck_assert_uint_eq(c.ssm_conv_kernel, 4);
    ck_assert_uint_eq(c.ssm_d_state, 32);
    ck_assert_uint_eq(c.ssm_n_group, 2);
    ck_assert_uint_eq(c.ssm_dt_rank, 6);
    ck_assert_uint_eq(c.ssm_d_inner, 192);
    ck_assert(c.ssm_v_reorder);
    ck_assert_float_eq(c.rope_theta, 1e7f);

    j = CFG_Q3NEXT("");
    ck_assert_int_eq(hf_config_parse(j, strlen(j), "c.json", &c, &err), MW_OK);
    ck_assert_int_eq(c.arch, HF_ARCH_QWEN3NEXT);
    ck_assert(!c.multimodal && !c.ssm_v_reorder && !c.has_rope_sections && hf_arch_is_moe(c.arch));
    ck_assert(!c.n_nextn_from_config); /* counted from the mtp.layers.N tensors */
    ck_assert_uint_eq(c.n_rot, 16);
    ck_assert_uint_eq(c.n_expert, 8);
    ck_assert_uint_eq(c.n_ff_shexp, 64);
}
END_TEST

/* A delta net case: base with the first occurrence of from replaced by to. */
static const struct dn_case {
    const char *name, *base, *from, *to;
    enum mw_status want;
    const char *where, *msg;
} dn_cases[] = {
    {"q35-layer-types", CFG_Q35_CG(""), "\"vocab_size\"",
     "\"layer_types\":[\"linear_attention\",\"linear_attention\",\"full_attention\","
     "\"full_attention\",\"linear_attention\",\"linear_attention\",\"linear_attention\","
     "\"full_attention\"],\"vocab_size\"",
     MW_E_FORMAT, "text_config.layer_types[2]", "contradicts full_attention_interval 4"},
    {"q35-layer-types-len", CFG_Q35_CG(""), "\"vocab_size\"",
     "\"layer_types\":[\"linear_attention\"],\"vocab_size\"", MW_E_FORMAT,
     "text_config.layer_types", "num_hidden_layers (8)"},
    {"q35-value-heads", CFG_Q35_CG(""), "\"linear_num_value_heads\":6",
     "\"linear_num_value_heads\":5", MW_E_FORMAT, "text_config.linear_num_value_heads",
     "not a multiple of linear_num_key_heads 2"},
    {"q35-state-overflow", CFG_Q35_CG(""), "\"linear_key_head_dim\":32,\"linear_num_key_heads\":2,"
     "\"linear_num_value_heads\":6", "\"linear_key_head_dim\":4294967295,\"linear_num_key_heads\":2,"
     "\"linear_num_value_heads\":4294967294",
     MW_E_FORMAT, "text_config.linear_num_value_heads", "overflows"},
    {"q35-no-conv-kernel", CFG_Q35_CG(""), "\"linear_conv_kernel_dim\":4,", "", MW_E_FORMAT,
     "text_config.linear_conv_kernel_dim", "missing"},
    {"q35-mrope-sum", CFG_Q35_CG(""), "\"head_dim\":64", "\"head_dim\":128", MW_E_FORMAT,
     "text_config.rope_parameters.mrope_section", "16 pairs"},
    {"q35-gate-off", CFG_Q35_CG(""), "\"attn_output_gate\":true", "\"attn_output_gate\":false",
     MW_E_UNSUPPORTED, "text_config.attn_output_gate", "always gates"},
    {"q35-experts", CFG_Q35_CG(""), "\"vocab_size\"", "\"num_experts\":8,\"vocab_size\"",
     MW_E_FORMAT, "text_config.num_experts", "not a Qwen3_5ForConditionalGeneration key"},
    {"q35-top-level", CFG_Q35_CG(""), "\"text_config\"", "\"hidden_size\":64,\"text_config\"",
     MW_E_FORMAT, "hidden_size", "text_config"},
    {"q35-no-text-config", "{\"architectures\":[\"Qwen3_5ForConditionalGeneration\"]}", "", "",
     MW_E_FORMAT, "text_config", "missing"},
    {"q35-rope-yarn", CFG_Q35_CG(""), "\"rope_type\":\"default\"", "\"rope_type\":\"yarn\"",
     MW_E_UNSUPPORTED, "text_config.rope_parameters.rope_type", "'yarn'"},
    {"q3next-no-key-dim", CFG_Q3NEXT(""), "\"linear_key_head_dim\":32,", "", MW_E_FORMAT,
     "linear_key_head_dim", "missing"},
    {"q3next-mrope", CFG_Q3NEXT(""), "\"rope_theta\":10000000",
     "\"rope_theta\":10000000,\"rope_scaling\":{\"rope_type\":\"default\",\"mrope_section\":[4,4]}",
     MW_E_FORMAT, "rope_scaling.mrope_section", "not a Qwen3NextForCausalLM key"},
    {"q3next-no-shared", CFG_Q3NEXT(""), "\"shared_expert_intermediate_size\":64,", "", MW_E_FORMAT,
     "shared_expert_intermediate_size", "missing"},
    {"q3next-norm-topk", CFG_Q3NEXT(""), "\"norm_topk_prob\":true", "\"norm_topk_prob\":false",
     MW_E_UNSUPPORTED, "norm_topk_prob", "always renormalizes"},
};
#define N_DN_CASES ((int)(sizeof dn_cases / sizeof dn_cases[0]))

START_TEST(test_config_delta_net_errors)
{
    const struct dn_case *d = &dn_cases[_i];
    char json[4096];
    const char *at = *d->from ? strstr(d->base, d->from) : NULL;
    ck_assert_msg(!*d->from || at, "%s: '%s' not in the base config", d->name, d->from);
    if (at)
        snprintf(json, sizeof json, "%.*s%s%s", (int)(at - d->base), d->base, d->to,
                 at + strlen(d->from));
    else
        snprintf(json, sizeof json, "%s", d->base);
    const struct cfg_case c = {d->name, json, d->want, d->where, d->msg};
    check_cfg_case(&c);
}
END_TEST

/* Gemma 4: the E2B layout (text_config; 5 layers, the last 2 sharing K/V,
 * per-layer embeddings, double-wide MLP) and the 26B-A4B layout as
 * Gemma4ForCausalLM (experts beside the dense MLP, attention_k_eq_v). */
#define CFG_G4_TEXT                                                                        \
    "\"final_logit_softcapping\":30.0,\"global_head_dim\":64,\"head_dim\":32,"              \
    "\"hidden_activation\":\"gelu_pytorch_tanh\",\"hidden_size\":64,"                       \
    "\"hidden_size_per_layer_input\":16,\"intermediate_size\":128,"                         \
    "\"layer_types\":[\"sliding_attention\",\"sliding_attention\",\"full_attention\","       \
    "\"sliding_attention\",\"full_attention\"],\"max_position_embeddings\":131072,"          \
    "\"model_type\":\"gemma4_text\",\"num_attention_heads\":4,\"num_hidden_layers\":5,"      \
    "\"num_key_value_heads\":1,\"num_kv_shared_layers\":2,\"rms_norm_eps\":1e-06,"           \
    "\"rope_parameters\":{\"full_attention\":{\"partial_rotary_factor\":0.25,"               \
    "\"rope_theta\":1000000.0,\"rope_type\":\"proportional\"},\"sliding_attention\":"        \
    "{\"rope_theta\":10000.0,\"rope_type\":\"default\"}},\"sliding_window\":16,"            \
    "\"use_double_wide_mlp\":true,\"vocab_size\":1000,\"vocab_size_per_layer_input\":1000"
#define CFG_G4_E2B(extra)                                                                  \
    "{\"architectures\":[\"Gemma4ForConditionalGeneration\"],\"model_type\":\"gemma4\","   \
    "\"text_config\":{" CFG_G4_TEXT extra "}}"
#define CFG_G4_MOE                                                                         \
    "{\"architectures\":[\"Gemma4ForCausalLM\"],\"model_type\":\"gemma4_text\","           \
    "\"attention_k_eq_v\":true,\"enable_moe_block\":true,\"global_head_dim\":64,"           \
    "\"head_dim\":32,\"hidden_size\":64,\"intermediate_size\":128,"                         \
    "\"layer_types\":[\"sliding_attention\",\"sliding_attention\",\"sliding_attention\","    \
    "\"full_attention\"],\"max_position_embeddings\":131072,\"moe_intermediate_size\":32,"   \
    "\"num_attention_heads\":4,\"num_experts\":8,\"num_global_key_value_heads\":1,"         \
    "\"num_hidden_layers\":4,\"num_key_value_heads\":2,\"num_kv_shared_layers\":0,"          \
    "\"rms_norm_eps\":1e-06,\"rope_parameters\":{\"full_attention\":"                       \
    "{\"partial_rotary_factor\":0.25,\"rope_theta\":1000000.0,\"rope_type\":"               \
    "\"proportional\"},\"sliding_attention\":{\"rope_theta\":10000.0,\"rope_type\":"        \
    "\"default\"}},\"sliding_window\":16,\"top_k_experts\":2,\"vocab_size\":1000}"

START_TEST(test_config_gemma4)
{
    struct hf_config c;
    struct mw_err err;
    mw_err_clear(&err);
    const char *j = CFG_G4_E2B("");
    ck_assert_int_eq(hf_config_parse(j, strlen(j), "c.json", &c, &err), MW_OK);
    ck_assert_int_eq(c.arch, HF_ARCH_GEMMA4);
    ck_assert_str_eq(c.gguf_arch, "gemma4");
    ck_assert(c.multimodal && c.tie_embeddings && !hf_arch_is_moe(c.arch));
    ck_assert_uint_eq(c.n_layer, 5);
    ck_assert_uint_eq(c.g4_n_kv_shared, 2);
    ck_assert_uint_eq(c.g4_n_embd_per_layer, 16);
    ck_assert_uint_eq(c.head_dim, 32);
    ck_assert_uint_eq(c.g4_head_dim_full, 64);
    ck_assert_uint_eq(c.g4_rope_pairs_full, 8); /* int(64 * 0.25 / 2) */
    ck_assert(c.g4_double_wide_mlp && !c.g4_k_eq_v && c.n_expert == 0);
    ck_assert_uint_eq(c.g4_swa[0], 0x0bu); /* layers 0, 1, 3 slide */
    ck_assert_float_eq(c.rope_theta, 1e6f);
    ck_assert_float_eq(c.rope_theta_swa, 1e4f);
    ck_assert_float_eq(c.final_softcap, 30.0f);

    j = CFG_G4_MOE;
    ck_assert_int_eq(hf_config_parse(j, strlen(j), "c.json", &c, &err), MW_OK);
    ck_assert(!c.multimodal && c.g4_k_eq_v && c.g4_has_n_ff_exp);
    ck_assert_uint_eq(c.n_expert, 8);
    ck_assert_uint_eq(c.n_expert_used, 2);
    ck_assert_uint_eq(c.n_ff_exp, 32);
    ck_assert_uint_eq(c.g4_n_head_kv_full, 1);
    ck_assert_uint_eq(c.g4_n_embd_per_layer, 0);
}
END_TEST

static const struct dn_case g4_cases[] = {
    {"g4-layer-type-name", CFG_G4_E2B(""), "\"layer_types\":[\"sliding_attention\"",
     "\"layer_types\":[\"local\"", MW_E_FORMAT, "text_config.layer_types[0]",
     "expected 'sliding_attention' or 'full_attention'"},
    {"g4-layer-types-len", CFG_G4_E2B(""), "\"full_attention\"],",
     "\"full_attention\",\"full_attention\"],", MW_E_FORMAT, "text_config.layer_types",
     "num_hidden_layers (5)"},
    /* the full shared layer 4 reads layer 2's K/V: layer 2 must be full */
    {"g4-layer-types-shared", CFG_G4_E2B(""), "\"sliding_attention\",\"full_attention\",\"sl",
     "\"sliding_attention\",\"sliding_attention\",\"sl", MW_E_FORMAT,
     "text_config.layer_types[2]", "contradicts num_kv_shared_layers 2"},
    {"g4-swa-pattern", CFG_G4_E2B(",\"sliding_window_pattern\":2"), "", "", MW_E_FORMAT,
     "text_config.layer_types[1]", "contradicts sliding_window_pattern 2"},
    {"g4-kv-shared-all", CFG_G4_E2B(""), "\"num_kv_shared_layers\":2",
     "\"num_kv_shared_layers\":5", MW_E_FORMAT, "text_config.num_kv_shared_layers",
     "not below num_hidden_layers 5"},
    {"g4-no-global-head-dim", CFG_G4_E2B(""), "\"global_head_dim\":64,", "", MW_E_FORMAT,
     "text_config.global_head_dim", "missing"},
    {"g4-rope-type", CFG_G4_E2B(""), "\"proportional\"", "\"default\"", MW_E_UNSUPPORTED,
     "text_config.rope_parameters.full_attention.rope_type", "'proportional'"},
    {"g4-ple-rows", CFG_G4_E2B(""), "\"vocab_size_per_layer_input\":1000",
     "\"vocab_size_per_layer_input\":999", MW_E_UNSUPPORTED,
     "text_config.vocab_size_per_layer_input", "differs from vocab_size 1000"},
    {"g4-experts-off", CFG_G4_MOE, "\"enable_moe_block\":true", "\"enable_moe_block\":false",
     MW_E_FORMAT, "num_experts", "enable_moe_block is not true"},
    {"g4-top-k", CFG_G4_MOE, "\"top_k_experts\":2", "\"top_k_experts\":9", MW_E_FORMAT,
     "top_k_experts", ""},
    {"g4-untied", CFG_G4_MOE, "\"top_k_experts\":2", "\"top_k_experts\":2,\"tie_word_embeddings\":false",
     MW_E_UNSUPPORTED, "tie_word_embeddings", "ties the output"},
    {"g4-text-type", CFG_G4_E2B(""), "\"gemma4_text\"", "\"gemma3_text\"", MW_E_FORMAT,
     "text_config.model_type", "contradicts"},
};
#define N_G4_CASES ((int)(sizeof g4_cases / sizeof g4_cases[0]))

START_TEST(test_config_gemma4_errors)
{
    const struct dn_case *d = &g4_cases[_i];
    char json[4096];
    const char *at = *d->from ? strstr(d->base, d->from) : NULL;
    ck_assert_msg(!*d->from || at, "%s: '%s' not in the base config", d->name, d->from);
    if (at)
        snprintf(json, sizeof json, "%.*s%s%s", (int)(at - d->base), d->base, d->to,
                 at + strlen(d->from));
    else
        snprintf(json, sizeof json, "%s", d->base);
    const struct cfg_case c = {d->name, json, d->want, d->where, d->msg};
    check_cfg_case(&c);
}
END_TEST

/* A JSON syntax error names its byte offset. */
START_TEST(test_config_syntax_offset)
{
    const char *j = "{\"a\": 1,\n \"b\": tru}";
    struct hf_config cfg;
    struct mw_err err;
    mw_err_clear(&err);
    ck_assert_int_eq(hf_config_parse(j, strlen(j), "x.json", &cfg, &err), MW_E_FORMAT);
    ck_assert_uint_ge(err.off, 14);
    ck_assert_uint_le(err.off, 18);
}
END_TEST

static Suite *hf_config_suite(void)
{
    Suite *s = suite_create("hf_config");
    TCase *tc = tcase_create("config");
    tcase_add_test(tc, test_config_valid);
    tcase_add_loop_test(tc, test_config_errors, 0, N_CFG_CASES);
    tcase_add_test(tc, test_config_quant);
    tcase_add_test(tc, test_config_syntax_offset);
    tcase_add_test(tc, test_config_families);
    tcase_add_loop_test(tc, test_config_family_errors, 0, N_FAM_CASES);
    tcase_add_test(tc, test_config_delta_net);
    tcase_add_loop_test(tc, test_config_delta_net_errors, 0, N_DN_CASES);
    tcase_add_test(tc, test_config_gemma4);
    tcase_add_loop_test(tc, test_config_gemma4_errors, 0, N_G4_CASES);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    return run_suite(hf_config_suite());
}
