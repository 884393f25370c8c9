/* hf/hf_gemma4.c — Gemma 4 (Gemma4ForCausalLM, the text model of
 * Gemma4ForConditionalGeneration) to GGUF "gemma4", as llama.cpp's converter
 * writes it (conversion/gemma.py Gemma4Model on Gemma3Model and TextModel):
 * config.json (the text model's keys under text_config; layer_types, both
 * head dims, the shared-KV layer count, per-layer embeddings, the MoE
 * block), the tensor plan (norms as stored, no + 1; per_layer_* tensors;
 * the fused experts kept 3-D; router.scale / per_expert_scale as F32 .scale
 * tensors; the vision and audio towers skipped; rope_freqs generated first)
 * and the gemma4.* keys in the converter's order. Checked beyond what the
 * converter checks, each naming its JSON path or tensor: layer_types
 * against sliding_window_pattern and against the layers the shared-KV
 * layers read from, num_kv_shared_layers below the layer count, every
 * tensor's shape against the width of its layer. */
#include "hf/hf_int.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define member hf__cfg_member
#define cfg_fail hf__cfg_fail
#define cfg_u32 hf__cfg_u32
#define cfg_num hf__cfg_num

static bool ends_with(const char *s, const char *suffix)
{
    size_t a = strlen(s), b = strlen(suffix);
    return a >= b && memcmp(s + a - b, suffix, b) == 0;
}

static bool is_swa(const struct hf_config *c, uint64_t il)
{
    return il < 512 && (c->g4_swa[il / 64] >> (il % 64)) & 1;
}

/* Layers il >= n_layer - num_kv_shared_layers reuse an earlier layer's K/V. */
static bool is_shared(const struct hf_config *c, uint64_t il)
{
    return il >= (uint64_t)c->n_layer - c->g4_n_kv_shared;
}

static uint64_t head_dim_of(const struct hf_config *c, uint64_t il)
{
    return is_swa(c, il) ? c->head_dim : c->g4_head_dim_full;
}

static uint64_t kv_heads_of(const struct hf_config *c, uint64_t il)
{
    return !is_swa(c, il) && c->g4_n_head_kv_full ? c->g4_n_head_kv_full : c->n_head_kv;
}

static uint64_t ff_of(const struct hf_config *c, uint64_t il)
{
    return c->g4_double_wide_mlp && is_shared(c, il) ? 2 * (uint64_t)c->n_ff : c->n_ff;
}

static enum mw_status cfg_bool(const cJSON *obj, const char *pre, const char *key, bool def,
                               bool *out, struct mw_err *err)
{
    const cJSON *v = member(obj, key);
    *out = def;
    if (!v) return MW_OK;
    if (!cJSON_IsBool(v)) {
        char jpath[128];
        snprintf(jpath, sizeof jpath, "%s%s", pre, key);
        return cfg_fail(err, MW_E_FORMAT, jpath, "expected true or false");
    }
    *out = cJSON_IsTrue(v);
    return MW_OK;
}

/* rope_parameters: full_attention {rope_type "proportional",
 * partial_rotary_factor, rope_theta} and sliding_attention {rope_type
 * "default", rope_theta}, as the converter reads them. */
static enum mw_status cfg_rope(const cJSON *obj, const char *pre, struct hf_config *c,
                               struct mw_err *err)
{
    char jpath[256], rpre[160];
    const cJSON *rp = member(obj, "rope_parameters");
    snprintf(jpath, sizeof jpath, "%srope_parameters", pre);
    if (!rp || !cJSON_IsObject(rp))
        return cfg_fail(err, MW_E_FORMAT, jpath,
                        "expected an object with full_attention and sliding_attention");
    static const char *const kinds[2] = {"full_attention", "sliding_attention"};
    for (int k = 0; k < 2; k++) {
        const cJSON *o = member(rp, kinds[k]);
        snprintf(rpre, sizeof rpre, "%srope_parameters.%s", pre, kinds[k]);
        if (!o || !cJSON_IsObject(o)) return cfg_fail(err, MW_E_FORMAT, rpre, "expected an object");
        const cJSON *t = member(o, "rope_type");
        const char *want = k == 0 ? "proportional" : "default";
        snprintf(jpath, sizeof jpath, "%s.rope_type", rpre);
        if (!t || !cJSON_IsString(t) || strcmp(t->valuestring, want) != 0)
            return cfg_fail(err, MW_E_UNSUPPORTED, jpath,
                            "'%s': llama.cpp's gemma4 needs '%s' here",
                            t && cJSON_IsString(t) ? t->valuestring : "(absent)", want);
        snprintf(rpre, sizeof rpre, "%srope_parameters.%s.", pre, kinds[k]);
        double d;
        bool present;
        enum mw_status s = cfg_num(o, rpre, "rope_theta", true, &d, &present, "RoPE base", err);
        if (s != MW_OK) return s;
        if (k == 0) {
            c->rope_theta = (float)d;
            c->has_rope_theta = true;
            double prf;
            s = cfg_num(o, rpre, "partial_rotary_factor", true, &prf, &present,
                        "rotated part of a full layer's head", err);
            if (s != MW_OK) return s;
            /* int(head_dim_full * partial_rotary_factor / 2), as the converter */
            const double pairs = (double)c->g4_head_dim_full * prf / 2.0;
            if (prf > 1.0 || pairs < 1.0) {
                snprintf(jpath, sizeof jpath, "%spartial_rotary_factor", rpre);
                return cfg_fail(err, MW_E_FORMAT, jpath,
                                "%g of global_head_dim %u rotates no pair or more than the head",
                                prf, c->g4_head_dim_full);
            }
            c->g4_rope_pairs_full = (uint32_t)pairs;
        } else {
            c->rope_theta_swa = (float)d;
            c->has_rope_theta_swa = true;
        }
    }
    return MW_OK;
}

/* layer_types: one of "sliding_attention" / "full_attention" per layer,
 * agreeing with sliding_window_pattern when given, and the shared-KV layers
 * must find a layer of their kind to read from: llama.cpp gives a sliding
 * shared layer the K/V of layer n_layer - shared - 2, a full one that of
 * layer n_layer - shared - 1. */
static enum mw_status cfg_layer_types(const cJSON *obj, const char *pre, struct hf_config *c,
                                      struct mw_err *err)
{
    char jpath[160];
    const cJSON *lt = member(obj, "layer_types");
    snprintf(jpath, sizeof jpath, "%slayer_types", pre);
    if (!lt || !cJSON_IsArray(lt) || (uint32_t)cJSON_GetArraySize(lt) != c->n_layer)
        return cfg_fail(err, MW_E_FORMAT, jpath,
                        "expected an array of num_hidden_layers (%u) strings", c->n_layer);
    uint32_t pattern = 0;
    enum mw_status s = cfg_u32(obj, pre, "sliding_window_pattern", false, 0, 1, 512, &pattern,
                               "every n-th layer is full attention", err);
    if (s != MW_OK) return s;
    c->swa_pattern = pattern;
    uint32_t il = 0;
    for (const cJSON *e = lt->child; e; e = e->next, il++) {
        snprintf(jpath, sizeof jpath, "%slayer_types[%u]", pre, il);
        const bool swa = cJSON_IsString(e) && strcmp(e->valuestring, "sliding_attention") == 0;
        const bool full = cJSON_IsString(e) && strcmp(e->valuestring, "full_attention") == 0;
        if (!swa && !full)
            return cfg_fail(err, MW_E_FORMAT, jpath,
                            "'%s': expected 'sliding_attention' or 'full_attention'",
                            cJSON_IsString(e) ? e->valuestring : "(not a string)");
        if (pattern && swa == ((il + 1) % pattern == 0))
            return cfg_fail(err, MW_E_FORMAT, jpath,
                            "'%s' contradicts sliding_window_pattern %u (layer %u is %s)",
                            e->valuestring, pattern, il,
                            swa ? "full_attention" : "sliding_attention");
        if (swa) c->g4_swa[il / 64] |= (uint64_t)1 << (il % 64);
    }
    const uint32_t first = c->n_layer - c->g4_n_kv_shared;
    if (c->g4_n_kv_shared > 0) {
        bool need_swa = false, need_full = false;
        for (uint32_t l = first; l < c->n_layer; l++) {
            if (is_swa(c, l)) need_swa = true;
            else need_full = true;
        }
        if ((need_swa && (first < 2 || !is_swa(c, first - 2))) ||
            (need_full && (first < 1 || is_swa(c, first - 1)))) {
            const uint32_t src = need_swa && (first < 2 || !is_swa(c, first - 2)) ? first - 2 : first - 1;
            snprintf(jpath, sizeof jpath, "%slayer_types[%u]", pre, first >= 2 || src == first - 1 ? src : 0);
            return cfg_fail(err, MW_E_FORMAT, jpath,
                            "contradicts num_kv_shared_layers %u: the shared %s layers read the "
                            "K/V of layer %d, which must be %s", c->g4_n_kv_shared,
                            src == first - 2 ? "sliding" : "full", (int)src,
                            src == first - 2 ? "sliding_attention" : "full_attention");
        }
    }
    return MW_OK;
}

enum mw_status hf__cfg_gemma4(const cJSON *root, struct hf_config *c, struct mw_err *err)
{
    const bool cg = ends_with(c->hf_arch_name, "ForConditionalGeneration");
    const cJSON *obj = root;
    const char *pre = "";
    char jpath[160];
    const cJSON *mt = member(root, "model_type");
    const char *want_mt = cg ? "gemma4" : "gemma4_text";
    if (mt && (!cJSON_IsString(mt) || strcmp(mt->valuestring, want_mt) != 0))
        return cfg_fail(err, MW_E_FORMAT, "model_type", "'%s' contradicts architectures[0] '%s' ('%s')",
                        cJSON_IsString(mt) ? mt->valuestring : "(not a string)", c->hf_arch_name,
                        want_mt);
    if (cg) {
        obj = member(root, "text_config");
        if (!obj || !cJSON_IsObject(obj))
            return cfg_fail(err, MW_E_FORMAT, "text_config",
                            "expected an object (%s keeps the text model's keys there)",
                            c->hf_arch_name);
        pre = "text_config.";
        const cJSON *tmt = member(obj, "model_type");
        if (tmt && (!cJSON_IsString(tmt) || strcmp(tmt->valuestring, "gemma4_text") != 0))
            return cfg_fail(err, MW_E_FORMAT, "text_config.model_type",
                            "'%s' contradicts architectures[0] '%s' ('gemma4_text')",
                            cJSON_IsString(tmt) ? tmt->valuestring : "(not a string)",
                            c->hf_arch_name);
        c->multimodal = true;
    } else if (member(root, "text_config")) {
        return cfg_fail(err, MW_E_FORMAT, "text_config",
                        "present, but %s is the text model alone", c->hf_arch_name);
    }
    enum mw_status s =
        cfg_u32(obj, pre, "hidden_size", true, 0, 1, 1u << 20, &c->n_embd, "embedding width", err);
    if (s == MW_OK)
        s = cfg_u32(obj, pre, "num_hidden_layers", true, 0, 1, 512, &c->n_layer,
                    "layer count; llama.cpp allows at most 512", err);
    if (s == MW_OK)
        s = cfg_u32(obj, pre, "intermediate_size", true, 0, 1, 1u << 22, &c->n_ff, "FFN width", err);
    if (s == MW_OK)
        s = cfg_u32(obj, pre, "num_attention_heads", true, 0, 1, 1u << 16, &c->n_head,
                    "attention heads", err);
    if (s == MW_OK)
        s = cfg_u32(obj, pre, "num_key_value_heads", true, 0, 1, 1u << 16, &c->n_head_kv,
                    "KV heads of the sliding layers", err);
    if (s == MW_OK)
        s = cfg_u32(obj, pre, "num_global_key_value_heads", false, 0, 1, 1u << 16,
                    &c->g4_n_head_kv_full, "KV heads of the full layers", err);
    if (s == MW_OK)
        s = cfg_u32(obj, pre, "head_dim", true, 0, 2, 1u << 16, &c->head_dim,
                    "head size of the sliding layers", err);
    if (s == MW_OK)
        s = cfg_u32(obj, pre, "global_head_dim", true, 0, 2, 1u << 16, &c->g4_head_dim_full,
                    "head size of the full layers (per_layer_config is not read)", err);
    if (s == MW_OK)
        s = cfg_u32(obj, pre, "vocab_size", true, 0, 1, 1u << 26, &c->n_vocab, "vocabulary size", err);
    if (s == MW_OK)
        s = cfg_u32(obj, pre, "max_position_embeddings", true, 0, 1, UINT32_MAX, &c->n_ctx,
                    "training context length", err);
    if (s == MW_OK)
        s = cfg_u32(obj, pre, "num_kv_shared_layers", true, 0, 0, 512, &c->g4_n_kv_shared,
                    "layers reusing an earlier layer's K/V", err);
    if (s == MW_OK)
        s = cfg_u32(obj, pre, "hidden_size_per_layer_input", false, 0, 0, 1u << 16,
                    &c->g4_n_embd_per_layer, "per-layer embedding width", err);
    if (s == MW_OK)
        s = cfg_u32(obj, pre, "sliding_window", true, 0, 1, UINT32_MAX, &c->n_swa,
                    "sliding window", err);
    if (s != MW_OK) return s;
    c->head_dim_explicit = true;
    c->n_rot = c->g4_head_dim_full;
    c->has_n_swa = true;
    if (c->head_dim % 2 || c->g4_head_dim_full % 2) {
        snprintf(jpath, sizeof jpath, "%s%s", pre, c->head_dim % 2 ? "head_dim" : "global_head_dim");
        return cfg_fail(err, MW_E_FORMAT, jpath, "odd head size (RoPE rotates pairs)");
    }
    if (c->g4_n_kv_shared >= c->n_layer) {
        snprintf(jpath, sizeof jpath, "%snum_kv_shared_layers", pre);
        return cfg_fail(err, MW_E_FORMAT, jpath,
                        "%u is not below num_hidden_layers %u (some layer must own its K/V)",
                        c->g4_n_kv_shared, c->n_layer);
    }
    if (c->n_head % c->n_head_kv || (c->g4_n_head_kv_full && c->n_head % c->g4_n_head_kv_full)) {
        snprintf(jpath, sizeof jpath, "%s%s", pre,
                 c->n_head % c->n_head_kv ? "num_key_value_heads" : "num_global_key_value_heads");
        return cfg_fail(err, MW_E_FORMAT, jpath, "does not divide num_attention_heads %u", c->n_head);
    }
    if (c->g4_n_embd_per_layer) {
        uint32_t vpl = 0;
        s = cfg_u32(obj, pre, "vocab_size_per_layer_input", false, c->n_vocab, 1, 1u << 26, &vpl,
                    "per-layer embedding rows", err);
        if (s != MW_OK) return s;
        if (vpl != c->n_vocab) {
            snprintf(jpath, sizeof jpath, "%svocab_size_per_layer_input", pre);
            return cfg_fail(err, MW_E_UNSUPPORTED, jpath,
                            "%u differs from vocab_size %u (llama.cpp reads one row per token)",
                            vpl, c->n_vocab);
        }
    }
    double d;
    bool present;
    s = cfg_num(obj, pre, "rms_norm_eps", true, &d, &present, "RMSNorm epsilon", err);
    if (s != MW_OK) return s;
    c->rms_eps = (float)d;
    s = cfg_num(obj, pre, "final_logit_softcapping", false, &d, &present, "final soft-cap", err);
    if (s != MW_OK) return s;
    c->final_softcap = present ? (float)d : 0.0f;
    if (member(obj, "attn_logit_softcapping")) {
        snprintf(jpath, sizeof jpath, "%sattn_logit_softcapping", pre);
        return cfg_fail(err, MW_E_FORMAT, jpath, "expected null (Gemma 4 has no attention soft-cap)");
    }
    const cJSON *act = member(obj, "hidden_activation");
    if (act && (!cJSON_IsString(act) || strcmp(act->valuestring, "gelu_pytorch_tanh") != 0)) {
        snprintf(jpath, sizeof jpath, "%shidden_activation", pre);
        return cfg_fail(err, MW_E_UNSUPPORTED, jpath, "'%s' is not supported (gelu_pytorch_tanh)",
                        cJSON_IsString(act) ? act->valuestring : "(not a string)");
    }
    c->act = HF_ACT_GELU_TANH;
    bool moe = false;
    s = cfg_bool(obj, pre, "tie_word_embeddings", true, &c->tie_embeddings, err);
    if (s == MW_OK) s = cfg_bool(obj, pre, "use_double_wide_mlp", false, &c->g4_double_wide_mlp, err);
    if (s == MW_OK) s = cfg_bool(obj, pre, "attention_k_eq_v", false, &c->g4_k_eq_v, err);
    if (s == MW_OK) s = cfg_bool(obj, pre, "enable_moe_block", false, &moe, err);
    if (s != MW_OK) return s;
    if (!c->tie_embeddings) {
        snprintf(jpath, sizeof jpath, "%stie_word_embeddings", pre);
        return cfg_fail(err, MW_E_UNSUPPORTED, jpath, "false: llama.cpp's gemma4 ties the output to token_embd");
    }
    if (moe) {
        s = cfg_u32(obj, pre, "num_experts", true, 0, 1, 1024, &c->n_expert,
                    "expert count; llama.cpp allows at most 1024", err);
        if (s == MW_OK)
            s = cfg_u32(obj, pre, "top_k_experts", true, 0, 1, c->n_expert, &c->n_expert_used,
                        "experts used per token, at most num_experts", err);
        if (s != MW_OK) return s;
        c->norm_topk_prob = true;
    } else {
        static const char *const moe_keys[] = {"num_experts", "top_k_experts"};
        for (size_t i = 0; i < sizeof moe_keys / sizeof moe_keys[0]; i++)
            if (member(obj, moe_keys[i])) {
                snprintf(jpath, sizeof jpath, "%s%s", pre, moe_keys[i]);
                return cfg_fail(err, MW_E_FORMAT, jpath,
                                "present, but enable_moe_block is not true");
            }
    }
    /* written as expert_feed_forward_length whenever given (the converter
     * does so for a dense model too) */
    s = cfg_u32(obj, pre, "moe_intermediate_size", moe, 0, 1, 1u << 22, &c->n_ff_exp,
                "one expert's FFN width", err);
    if (s != MW_OK) return s;
    c->g4_has_n_ff_exp = member(obj, "moe_intermediate_size") != NULL;
    s = cfg_rope(obj, pre, c, err);
    if (s == MW_OK) s = cfg_layer_types(obj, pre, c, err);
    if (s != MW_OK) return s;
    const cJSON *td = member(obj, "dtype");
    if (!td) td = member(obj, "torch_dtype");
    if (!td) td = member(root, "torch_dtype");
    if (td && cJSON_IsString(td)) snprintf(c->torch_dtype, sizeof c->torch_dtype, "%s", td->valuestring);
    return MW_OK;
}

// --- tensors ---------------------------------------------------------------------

enum g4role {
    /* global */
    G_TOKEN_EMBD, G_PLE_EMBD, G_PLE_PROJ, G_PLE_NORM, G_OUTPUT_NORM,
    /* per layer */
    G_ATTN_NORM, G_POST_ATTN_NORM, G_FFN_NORM, G_POST_FFW_NORM, G_PRE_FFW_NORM_2,
    G_POST_FFW_NORM_1, G_POST_FFW_NORM_2, G_Q, G_K, G_V, G_O, G_Q_NORM, G_K_NORM, G_GATE, G_UP,
    G_DOWN, G_INP_GATE, G_PROJ, G_POST_NORM, G_SCALE, G_ROUTER, G_ROUTER_SCALE, G_EXPERT_SCALE,
    G_GATE_UP_EXPS, G_DOWN_EXPS, G_COUNT
};
#define G_FIRST_LAYER G_ATTN_NORM

static const struct {
    const char *hf;   /* global: full name; per layer: after "model.layers.N." */
    const char *gguf; /* global: full name; per layer: after "blk.N." */
} g4roles[G_COUNT] = {
    [G_TOKEN_EMBD] = {"model.embed_tokens.weight", "token_embd.weight"},
    [G_PLE_EMBD] = {"model.embed_tokens_per_layer.weight", "per_layer_token_embd.weight"},
    [G_PLE_PROJ] = {"model.per_layer_model_projection.weight", "per_layer_model_proj.weight"},
    [G_PLE_NORM] = {"model.per_layer_projection_norm.weight", "per_layer_proj_norm.weight"},
    [G_OUTPUT_NORM] = {"model.norm.weight", "output_norm.weight"},
    [G_ATTN_NORM] = {"input_layernorm.weight", "attn_norm.weight"},
    [G_POST_ATTN_NORM] = {"post_attention_layernorm.weight", "post_attention_norm.weight"},
    [G_FFN_NORM] = {"pre_feedforward_layernorm.weight", "ffn_norm.weight"},
    [G_POST_FFW_NORM] = {"post_feedforward_layernorm.weight", "post_ffw_norm.weight"},
    [G_PRE_FFW_NORM_2] = {"pre_feedforward_layernorm_2.weight", "pre_ffw_norm_2.weight"},
    [G_POST_FFW_NORM_1] = {"post_feedforward_layernorm_1.weight", "post_ffw_norm_1.weight"},
    [G_POST_FFW_NORM_2] = {"post_feedforward_layernorm_2.weight", "post_ffw_norm_2.weight"},
    [G_Q] = {"self_attn.q_proj.weight", "attn_q.weight"},
    [G_K] = {"self_attn.k_proj.weight", "attn_k.weight"},
    [G_V] = {"self_attn.v_proj.weight", "attn_v.weight"},
    [G_O] = {"self_attn.o_proj.weight", "attn_output.weight"},
    [G_Q_NORM] = {"self_attn.q_norm.weight", "attn_q_norm.weight"},
    [G_K_NORM] = {"self_attn.k_norm.weight", "attn_k_norm.weight"},
    [G_GATE] = {"mlp.gate_proj.weight", "ffn_gate.weight"},
    [G_UP] = {"mlp.up_proj.weight", "ffn_up.weight"},
    [G_DOWN] = {"mlp.down_proj.weight", "ffn_down.weight"},
    [G_INP_GATE] = {"per_layer_input_gate.weight", "inp_gate.weight"},
    [G_PROJ] = {"per_layer_projection.weight", "proj.weight"},
    [G_POST_NORM] = {"post_per_layer_input_norm.weight", "post_norm.weight"},
    [G_SCALE] = {"layer_scalar", "layer_output_scale.weight"},
    [G_ROUTER] = {"router.proj.weight", "ffn_gate_inp.weight"},
    [G_ROUTER_SCALE] = {"router.scale", "ffn_gate_inp.scale"},
    [G_EXPERT_SCALE] = {"router.per_expert_scale", "ffn_down_exps.scale"},
    [G_GATE_UP_EXPS] = {"experts.gate_up_proj", "ffn_gate_up_exps.weight"},
    [G_DOWN_EXPS] = {"experts.down_proj", "ffn_down_exps.weight"},
};

/* 0: not allowed, 1: optional, 2: required, in layer il (globals: il 0). */
static int role_need(const struct hf_config *c, enum g4role r, uint64_t il)
{
    const bool moe = c->n_expert > 0, ple = c->g4_n_embd_per_layer > 0;
    switch (r) {
    case G_PLE_EMBD: case G_PLE_PROJ: case G_PLE_NORM: case G_INP_GATE: case G_PROJ: case G_POST_NORM:
        return ple ? 2 : 0;
    case G_PRE_FFW_NORM_2: case G_POST_FFW_NORM_1: case G_POST_FFW_NORM_2: case G_ROUTER:
    case G_ROUTER_SCALE: case G_EXPERT_SCALE: case G_GATE_UP_EXPS: case G_DOWN_EXPS:
        return moe ? 2 : 0;
    case G_K: case G_K_NORM:
        return is_shared(c, il) ? 1 : 2;
    case G_V: /* attention_k_eq_v: a full layer's V is its K (llama.cpp loads a v_proj if any) */
        return (c->g4_k_eq_v && !is_swa(c, il)) || is_shared(c, il) ? 1 : 2;
    case G_SCALE:
        return 1;
    default:
        return 2;
    }
}

/* The expected HF shape of role r in layer il and what each dimension is. */
static uint32_t role_shape(const struct hf_config *c, enum g4role r, uint64_t il, uint64_t d[3],
                           const char *what[3])
{
    const uint64_t E = c->n_embd, V = c->n_vocab, P = c->g4_n_embd_per_layer;
    const uint64_t LP = (uint64_t)c->n_layer * P, hd = head_dim_of(c, il), kvh = kv_heads_of(c, il);
    const uint64_t H = c->n_head, X = c->n_expert, Fx = c->n_ff_exp;
    const bool swa = is_swa(c, il);
    const char *hdn = swa ? "head_dim" : "global_head_dim";
    const char *qn = swa ? "num_attention_heads*head_dim" : "num_attention_heads*global_head_dim";
    const char *kvn = swa ? "num_key_value_heads*head_dim"
                    : c->g4_n_head_kv_full ? "num_global_key_value_heads*global_head_dim"
                                           : "num_key_value_heads*global_head_dim";
    const char *ffn = ff_of(c, il) != c->n_ff ? "2*intermediate_size (a shared layer's double-wide MLP)"
                                              : "intermediate_size";
#define SH1(a, an) (d[0] = (a), what[0] = (an), 1u)
#define SH2(a, an, b, bn) (d[0] = (a), what[0] = (an), d[1] = (b), what[1] = (bn), 2u)
    switch (r) {
    case G_TOKEN_EMBD: return SH2(V, "vocab_size", E, "hidden_size");
    case G_PLE_EMBD: return SH2(V, "vocab_size_per_layer_input", LP, "num_hidden_layers*hidden_size_per_layer_input");
    case G_PLE_PROJ: return SH2(LP, "num_hidden_layers*hidden_size_per_layer_input", E, "hidden_size");
    case G_PLE_NORM: return SH1(P, "hidden_size_per_layer_input");
    case G_Q: return SH2(H * hd, qn, E, "hidden_size");
    case G_K: case G_V: return SH2(kvh * hd, kvn, E, "hidden_size");
    case G_O: return SH2(E, "hidden_size", H * hd, qn);
    case G_Q_NORM: case G_K_NORM: return SH1(hd, hdn);
    case G_GATE: case G_UP: return SH2(ff_of(c, il), ffn, E, "hidden_size");
    case G_DOWN: return SH2(E, "hidden_size", ff_of(c, il), ffn);
    case G_INP_GATE: return SH2(P, "hidden_size_per_layer_input", E, "hidden_size");
    case G_PROJ: return SH2(E, "hidden_size", P, "hidden_size_per_layer_input");
    case G_SCALE: return SH1(1, "1");
    case G_ROUTER: return SH2(X, "num_experts", E, "hidden_size");
    case G_EXPERT_SCALE: return SH1(X, "num_experts");
    case G_GATE_UP_EXPS:
        d[0] = X, what[0] = "num_experts", d[1] = 2 * Fx, what[1] = "2*moe_intermediate_size";
        d[2] = E, what[2] = "hidden_size";
        return 3;
    case G_DOWN_EXPS:
        d[0] = X, what[0] = "num_experts", d[1] = E, what[1] = "hidden_size";
        d[2] = Fx, what[2] = "moe_intermediate_size";
        return 3;
    default: return SH1(E, "hidden_size"); /* the norms, router.scale */
    }
#undef SH1
#undef SH2
}

/* Tensors of the text model only: the converter's multimodal filter
 * (vision and audio towers, their embedders and projectors). */
static bool skipped(const char *name)
{
    static const char *const sub[] = {"vision_", "audio_", "vision.", "audio.", "visual.",
                                      "projector.", ".rotary_emb.inv_freq"};
    for (size_t k = 0; k < sizeof sub / sizeof sub[0]; k++)
        if (strstr(name, sub[k])) return true;
    return false;
}

static enum mw_status finish(struct hf_plan_tensor *e, struct mw_err *err)
{
    if (!gguf_tensor_nbytes(e->type, e->ne, &e->nbytes)) {
        mw_err_set_where(err, "tensor '%s'", e->name);
        return MW_FAIL(err, MW_E_FORMAT, MW_ERR_OFF_NONE, "tensor size overflows");
    }
    return MW_OK;
}

static const uint32_t out_ggml[HF_OUT_COUNT] = {GGUF_TYPE_F32, GGUF_TYPE_F16, GGUF_TYPE_BF16,
                                                GGUF_TYPE_Q8_0};

/* One 3-D expert tensor [X, rows, cols]: X 2-D views of its slabs, written
 * one after the other as the converter writes the tensor. */
static void expert_views(struct hf_plan *p, size_t base, const struct hf_st *sh,
                         const struct hf_st_tensor *t)
{
    const uint64_t X = t->shape[0], rows = t->shape[1], cols = t->shape[2];
    const uint64_t es = hf_dtype_size(t->dtype);
    for (uint64_t x = 0; x < X; x++) {
        struct hf_st_tensor *v = &p->xview[base + x];
        *v = *t;
        v->n_dims = 2;
        v->shape[0] = rows;
        v->shape[1] = cols;
        v->n_elems = rows * cols;
        v->nbytes = v->n_elems * es;
        v->file_off = t->file_off + x * v->nbytes;
        v->data = t->data + x * v->nbytes;
        p->xsrc[base + x] = v;
        p->xshard[base + x] = sh;
    }
}

enum mw_status hf__gemma4_plan(const struct hf_model *m, enum hf_out_type ot, struct hf_plan **out,
                               struct mw_err *err)
{
    *out = NULL;
    const struct hf_config *c = &m->cfg;
    const uint64_t L = c->n_layer, X = c->n_expert;
    struct hf_plan *p = calloc(1, sizeof *p);
    uint8_t *seen = calloc((size_t)G_COUNT * L, 1);
    const size_t n_xslot = (size_t)L * 2 * X; /* L <= 512, X <= 1024 */
    if (p) {
        p->t = calloc((size_t)m->n + 1, sizeof *p->t);
        p->rope_freqs = malloc(sizeof(float) * (c->g4_head_dim_full / 2 + 1));
        if (X) {
            p->xsrc = calloc(n_xslot, sizeof *p->xsrc);
            p->xshard = calloc(n_xslot, sizeof *p->xshard);
            p->xview = calloc(n_xslot, sizeof *p->xview);
        }
    }
    if (!p || !seen || !p->t || !p->rope_freqs || (X && (!p->xsrc || !p->xshard || !p->xview)) ||
        !hf__plan_tables(p)) {
        free(seen);
        hf_plan_free(p);
        return MW_FAIL(err, MW_E_NOMEM, MW_ERR_OFF_NONE, "out of memory");
    }
    p->m = m;
    enum mw_status s = MW_OK;
    bool dt_seen[HF_DT_COUNT] = {false};

    /* Gemma4Model.generate_extra_tensors: the full layers' proportional
     * RoPE as freq factors, 1 for the rotated pairs, 1e30 for the others */
    const uint32_t half = c->g4_head_dim_full / 2;
    for (uint32_t i = 0; i < half; i++) p->rope_freqs[i] = i < c->g4_rope_pairs_full ? 1.0f : 1e30f;
    struct hf_plan_tensor *rf = &p->t[p->n++];
    snprintf(rf->name, sizeof rf->name, "rope_freqs.weight");
    rf->type = GGUF_TYPE_F32;
    rf->n_dims = 1;
    rf->ne[0] = half;
    rf->ne[1] = rf->ne[2] = rf->ne[3] = 1;
    rf->gen = p->rope_freqs;
    if ((s = finish(rf, err)) != MW_OK) goto out;

    for (uint64_t i = 0; i < m->n; i++) {
        const struct hf_st *sh;
        const struct hf_st_tensor *t = hf_model_tensor(m, i, &sh);
        if (skipped(t->name)) continue;
        /* TextModel.filter_tensors: "language_model." removed */
        char name[GGUF_MAX_NAME + 64];
        const char *lm = strstr(t->name, "language_model.");
        if (lm)
            snprintf(name, sizeof name, "%.*s%s", (int)(lm - t->name), t->name,
                     lm + strlen("language_model."));
        else
            snprintf(name, sizeof name, "%s", t->name);
        uint64_t il = 0;
        const char *rest = NULL;
        int role = -1;
        const bool per_layer = hf__parse_layer(name, &il, &rest);
        for (int r = per_layer ? G_FIRST_LAYER : 0; r < (per_layer ? G_COUNT : G_FIRST_LAYER); r++)
            if (strcmp(per_layer ? rest : name, g4roles[r].hf) == 0) role = r;
        if (role < 0) {
            s = hf__tensor_fail(err, MW_E_UNSUPPORTED, sh, t,
                                "not a tensor of the gemma4 text model (%s); cannot map it to GGUF",
                                c->hf_arch_name);
            goto out;
        }
        if (per_layer && il >= L) {
            s = hf__tensor_fail(err, MW_E_FORMAT, sh, t,
                                "layer %llu does not exist (config.json num_hidden_layers is %u)",
                                (unsigned long long)il, c->n_layer);
            goto out;
        }
        if (role_need(c, (enum g4role)role, il) == 0) {
            const bool moe_r = role >= G_ROUTER || role == G_PRE_FFW_NORM_2 ||
                               role == G_POST_FFW_NORM_1 || role == G_POST_FFW_NORM_2;
            s = hf__tensor_fail(err, MW_E_FORMAT, sh, t, "unexpected: config.json %s",
                                moe_r ? "enable_moe_block is not true"
                                      : "hidden_size_per_layer_input is 0 or absent");
            goto out;
        }
        uint8_t *sn = &seen[(size_t)role * L + il];
        if (*sn) {
            s = hf__tensor_fail(err, MW_E_FORMAT, sh, t,
                                "appears twice (after removing language_model.)");
            goto out;
        }
        *sn = 1;
        uint64_t want[3] = {0, 0, 0};
        const char *what[3] = {"", "", ""};
        const uint32_t nd = role_shape(c, (enum g4role)role, il, want, what);
        bool ok = t->n_dims == nd;
        for (uint32_t k = 0; ok && k < nd; k++) ok = t->shape[k] == want[k];
        if (!ok) {
            char got[96], exp[320];
            hf_st_shape_str(t, got, sizeof got);
            size_t k = (size_t)snprintf(exp, sizeof exp, "[");
            for (uint32_t j = 0; j < nd && k < sizeof exp; j++)
                k += (size_t)snprintf(exp + k, sizeof exp - k, "%s%llu", j ? ", " : "",
                                      (unsigned long long)want[j]);
            for (uint32_t j = 0; j < nd && k < sizeof exp; j++)
                k += (size_t)snprintf(exp + k, sizeof exp - k, "%s%s", j ? ", " : "] (", what[j]);
            if (k < sizeof exp) snprintf(exp + k, sizeof exp - k, ")");
            char lay[64] = "";
            if (per_layer)
                snprintf(lay, sizeof lay, " for layer %llu (%s)", (unsigned long long)il,
                         is_swa(c, il) ? "sliding_attention" : "full_attention");
            s = hf__tensor_fail(err, MW_E_FORMAT, sh, t,
                                "shape %s, expected %s from config.json%s", got,
                                exp, lay);
            goto out;
        }
        if (!hf_dtype_convertible(t->dtype)) {
            s = hf__tensor_fail(err, MW_E_UNSUPPORTED, sh, t,
                                "dtype %s cannot be converted (F16, BF16 or F32)",
                                hf_dtype_name(t->dtype));
            goto out;
        }
        dt_seen[t->dtype] = true;
        struct hf_plan_tensor *e = &p->t[p->n++];
        if (per_layer)
            snprintf(e->name, sizeof e->name, "blk.%llu.%s", (unsigned long long)il, g4roles[role].gguf);
        else
            snprintf(e->name, sizeof e->name, "%s", g4roles[role].gguf);
        e->src = t;
        e->shard = sh;
        e->n_dims = nd;
        e->ne[0] = e->ne[1] = e->ne[2] = e->ne[3] = 1;
        for (uint32_t k = 0; k < nd; k++) e->ne[k] = want[nd - 1 - k];
        if (nd == 3) {
            const size_t base = ((size_t)il * 2 + (role == G_DOWN_EXPS)) * X;
            expert_views(p, base, sh, t);
            e->n_src = (uint32_t)X;
            e->srcs = &p->xsrc[base];
            e->srcs_shard = &p->xshard[base];
            e->src = p->xsrc[base];
        }
        /* the converter's F32 rule: 1-D, *_norm.weight, the router, and
         * every name not ending in .weight (the .scale tensors) */
        if (nd == 1 || ends_with(e->name, "_norm.weight") || role == G_ROUTER ||
            !ends_with(e->name, ".weight")) {
            e->type = GGUF_TYPE_F32;
        } else {
            e->type = out_ggml[ot];
            if (ot == HF_OUT_Q8_0 && e->ne[0] % 32 != 0) e->type = GGUF_TYPE_F16;
        }
        if ((s = finish(e, err)) != MW_OK) goto out;
    }

    /* everything required is there */
    for (int r = 0; r < G_COUNT; r++) {
        const uint64_t nl = r >= G_FIRST_LAYER ? L : 1;
        for (uint64_t l = 0; l < nl; l++) {
            if (seen[(size_t)r * L + l] || role_need(c, (enum g4role)r, l) != 2) continue;
            mw_err_set_path(err, m->dir);
            const char *pfx = c->multimodal ? "model.language_model." : "model.";
            if (r >= G_FIRST_LAYER)
                mw_err_set_where(err, "tensor '%slayers.%llu.%s'", pfx, (unsigned long long)l,
                                 g4roles[r].hf);
            else
                mw_err_set_where(err, "tensor '%s%s'", pfx, g4roles[r].hf + strlen("model."));
            s = MW_FAIL(err, MW_E_FORMAT, MW_ERR_OFF_NONE, "missing (required by %s%s)",
                        c->hf_arch_name,
                        r == G_K || r == G_K_NORM || r == G_V ? " in a layer that owns its K/V" : "");
            goto out;
        }
    }
    s = hf__plan_totals(p, dt_seen, NULL, err);
out:
    free(seen);
    if (s != MW_OK) {
        hf_plan_free(p);
        return s;
    }
    *out = p;
    return MW_OK;
}

// --- keys ------------------------------------------------------------------------

/* TextModel's keys, Gemma3Model's (written over the base's in place), then
 * Gemma4Model's; the per-layer arrays take the place of the scalars they
 * replace, as GGUFWriter does for a key written twice. */
enum mw_status hf__gemma4_kvs(struct gguf_writer *w, const struct hf_config *c, enum hf_out_type ot,
                              struct mw_err *err)
{
    const uint32_t L = c->n_layer <= 512 ? c->n_layer : 512; /* config.json's limit */
    int32_t ff[512], kvh[512];
    uint8_t swa[512];
    for (uint32_t il = 0; il < L; il++) {
        ff[il] = (int32_t)ff_of(c, il);
        kvh[il] = (int32_t)kv_heads_of(c, il);
        swa[il] = is_swa(c, il) ? 1 : 0;
    }
    struct hf_kvs k;
    hf__kvs_init(&k, w, c->gguf_arch, err);
    hf__kv_u32(&k, "block_count", L);
    hf__kv_u32(&k, "context_length", c->n_ctx);
    hf__kv_u32(&k, "embedding_length", c->n_embd);
    if (c->g4_double_wide_mlp)
        hf__kv_arr(&k, "feed_forward_length", GGUF_VT_I32, ff, L);
    else
        hf__kv_u32(&k, "feed_forward_length", c->n_ff);
    hf__kv_u32(&k, "attention.head_count", c->n_head);
    if (c->g4_n_head_kv_full)
        hf__kv_arr(&k, "attention.head_count_kv", GGUF_VT_I32, kvh, L);
    else
        hf__kv_u32(&k, "attention.head_count_kv", c->n_head_kv);
    hf__kv_f32(&k, "rope.freq_base", c->rope_theta);
    hf__kv_f32(&k, "rope.freq_base_swa", c->rope_theta_swa);
    hf__kv_f32(&k, "attention.layer_norm_rms_epsilon", c->rms_eps);
    if (c->n_expert) {
        hf__kv_u32(&k, "expert_count", c->n_expert);
        hf__kv_u32(&k, "expert_used_count", c->n_expert_used);
    }
    hf__kv_u32(&k, "attention.key_length", c->g4_head_dim_full);
    hf__kv_u32(&k, "attention.value_length", c->g4_head_dim_full);
    hf__kv_file_type(&k, hf_out_type_ftype(ot));
    if (c->final_softcap != 0.0f) hf__kv_f32(&k, "final_logit_softcapping", c->final_softcap);
    if (c->swa_pattern != 1) hf__kv_u32(&k, "attention.sliding_window", c->n_swa);
    hf__kv_u32(&k, "attention.shared_kv_layers", c->g4_n_kv_shared);
    hf__kv_u32(&k, "embedding_length_per_layer_input", c->g4_n_embd_per_layer);
    hf__kv_arr(&k, "attention.sliding_window_pattern", GGUF_VT_BOOL, swa, L);
    hf__kv_u32(&k, "attention.key_length_swa", c->head_dim);
    hf__kv_u32(&k, "attention.value_length_swa", c->head_dim);
    if (c->g4_has_n_ff_exp) hf__kv_u32(&k, "expert_feed_forward_length", c->n_ff_exp);
    hf__kv_u32(&k, "rope.dimension_count", c->g4_head_dim_full);
    hf__kv_u32(&k, "rope.dimension_count_swa", c->head_dim);
    return k.s;
}
