/* hf/hf_config_qwen35.c — config.json of the gated delta net families:
 * Qwen3_5ForCausalLM / Qwen3_5ForConditionalGeneration ("qwen35"),
 * Qwen3_5MoeForCausalLM / Qwen3_5MoeForConditionalGeneration ("qwen35moe")
 * and Qwen3NextForCausalLM ("qwen3next"), read as llama.cpp's converter
 * (conversion/qwen.py Qwen3NextModel, _LinearAttentionVReorderBase,
 * _Qwen35MRopeMixin, _QwenMtpMixin) reads them: the ConditionalGeneration
 * text model's keys under text_config, RoPE under rope_parameters (or the
 * top level), the linear_* keys of the delta net, the MTP block count.
 * Checked beyond what the converter checks, each naming its JSON path:
 * layer_types against full_attention_interval (llama.cpp derives the layer
 * kinds from the interval and never reads layer_types), value heads a
 * multiple of key heads, the recurrent state's size in 64 bits, the experts
 * llama.cpp's graph has (every layer, renormalized top-k, a shared expert). */
#include "hf/hf_int.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define member hf__cfg_member
#define cfg_fail hf__cfg_fail
#define cfg_u32 hf__cfg_u32
#define cfg_num hf__cfg_num

/* transformers' default mrope_section of Qwen3.5, which the converter writes
 * when a checkpoint has none (_Qwen35MRopeMixin) */
static const int32_t default_sections[4] = {11, 11, 10, 0};

static bool ends_with(const char *s, const char *suffix)
{
    size_t a = strlen(s), b = strlen(suffix);
    return a >= b && memcmp(s + a - b, suffix, b) == 0;
}

/* rope_parameters (or rope_scaling) and the top-level RoPE keys, as the
 * converter mirrors them: theta, partial_rotary_factor (default 0.25),
 * mrope_section (qwen35 / qwen35moe; padded to 4). */
static enum mw_status cfg_rope(const cJSON *obj, const char *pre, struct hf_config *c,
                               struct mw_err *err)
{
    char jpath[128];
    const char *rkey = member(obj, "rope_parameters") ? "rope_parameters" : "rope_scaling";
    const cJSON *rp = member(obj, rkey);
    snprintf(jpath, sizeof jpath, "%s%s", pre, rkey);
    if (rp && !cJSON_IsObject(rp)) return cfg_fail(err, MW_E_FORMAT, jpath, "expected an object or null");
    char rpre[96];
    snprintf(rpre, sizeof rpre, "%s%s.", pre, rkey);
    const cJSON *t = rp ? member(rp, "rope_type") : NULL;
    if (!t && rp) t = member(rp, "type");
    if (t && (!cJSON_IsString(t) || strcmp(t->valuestring, "default") != 0)) {
        snprintf(jpath, sizeof jpath, "%srope_type", rpre);
        return cfg_fail(err, MW_E_UNSUPPORTED, jpath,
                        "'%s' is not supported for %s (default: llama.cpp's graph has no RoPE "
                        "scaling here)", cJSON_IsString(t) ? t->valuestring : "(not a string)",
                        c->hf_arch_name);
    }
    double d;
    bool present = false;
    enum mw_status s = MW_OK;
    if (rp && member(rp, "rope_theta"))
        s = cfg_num(rp, rpre, "rope_theta", true, &d, &present, "RoPE base", err);
    else
        s = cfg_num(obj, pre, "rope_theta", false, &d, &present, "RoPE base", err);
    if (s != MW_OK) return s;
    c->has_rope_theta = present;
    c->rope_theta = present ? (float)d : 10000.0f;
    double prf = 0.25;
    if (rp && member(rp, "partial_rotary_factor"))
        s = cfg_num(rp, rpre, "partial_rotary_factor", true, &prf, &present, "rotated part of a head", err);
    else if (member(obj, "partial_rotary_factor"))
        s = cfg_num(obj, pre, "partial_rotary_factor", true, &prf, &present, "rotated part of a head", err);
    if (s != MW_OK) return s;
    /* int(head_dim * partial_rotary_factor), as the converter */
    const double rot = (double)c->head_dim * prf;
    c->n_rot = rot >= 0 && rot <= (double)c->head_dim ? (uint32_t)rot : 0;
    if (c->n_rot == 0 || c->n_rot % 2 != 0 || prf > 1.0) {
        snprintf(jpath, sizeof jpath, "%spartial_rotary_factor", rp && member(rp, "partial_rotary_factor") ? rpre : pre);
        return cfg_fail(err, MW_E_FORMAT, jpath,
                        "%g of head_dim %u gives %u rotated dimensions (must be even, > 0 and at "
                        "most head_dim)", prf, c->head_dim, c->n_rot);
    }
    const cJSON *ms = rp ? member(rp, "mrope_section") : NULL;
    if (c->arch == HF_ARCH_QWEN3NEXT) {
        if (ms) {
            snprintf(jpath, sizeof jpath, "%smrope_section", rpre);
            return cfg_fail(err, MW_E_FORMAT, jpath, "is not a %s key (its RoPE is plain NEOX)",
                            c->hf_arch_name);
        }
        return MW_OK;
    }
    memcpy(c->rope_sections, default_sections, sizeof c->rope_sections);
    if (!ms) return MW_OK;
    snprintf(jpath, sizeof jpath, "%smrope_section", rpre);
    if (!cJSON_IsArray(ms) || cJSON_GetArraySize(ms) > 4)
        return cfg_fail(err, MW_E_FORMAT, jpath, "expected an array of at most 4 integers");
    int k = 0;
    uint64_t sum = 0;
    int32_t sec[4] = {0, 0, 0, 0};
    for (const cJSON *e = ms->child; e; e = e->next, k++) {
        uint64_t u;
        if (!hf__util_json_u64(e, &u) || u > 1u << 16) {
            snprintf(jpath, sizeof jpath, "%smrope_section[%d]", rpre, k);
            return cfg_fail(err, MW_E_FORMAT, jpath, "expected an integer in [0, 65536]");
        }
        sec[k] = (int32_t)u;
        sum += u;
    }
    if (sum * 2 != c->n_rot)
        return cfg_fail(err, MW_E_FORMAT, jpath,
                        "sections sum to %llu rotated pairs; head_dim %u times "
                        "partial_rotary_factor gives %u pairs", (unsigned long long)sum,
                        c->head_dim, c->n_rot / 2);
    memcpy(c->rope_sections, sec, sizeof sec);
    c->has_rope_sections = true;
    return MW_OK;
}

/* The delta net's keys; the recurrent state of one layer, S*S*Hv + (K-1) *
 * (2*Hk*S + Hv*Sv) floats, must be representable. */
static enum mw_status cfg_delta_net(const cJSON *obj, const char *pre, struct hf_config *c,
                                    struct mw_err *err)
{
    static const char why[] = "the gated delta net's shape; llama.cpp's converter needs it";
    enum mw_status s = cfg_u32(obj, pre, "linear_conv_kernel_dim", true, 0, 2, 1u << 16,
                               &c->ssm_conv_kernel, why, err);
    if (s == MW_OK)
        s = cfg_u32(obj, pre, "linear_key_head_dim", true, 0, 1, UINT32_MAX, &c->ssm_d_state, why, err);
    if (s == MW_OK)
        s = cfg_u32(obj, pre, "linear_num_key_heads", true, 0, 1, UINT32_MAX, &c->ssm_n_group, why, err);
    if (s == MW_OK)
        s = cfg_u32(obj, pre, "linear_num_value_heads", true, 0, 1, UINT32_MAX, &c->ssm_dt_rank, why, err);
    if (s == MW_OK)
        s = cfg_u32(obj, pre, "linear_value_head_dim", true, 0, 1, UINT32_MAX, &c->ssm_head_v_dim, why, err);
    if (s != MW_OK) return s;
    char jpath[128];
    snprintf(jpath, sizeof jpath, "%slinear_num_value_heads", pre);
    if (c->ssm_dt_rank % c->ssm_n_group != 0)
        return cfg_fail(err, MW_E_FORMAT, jpath,
                        "%u is not a multiple of linear_num_key_heads %u (each key head serves "
                        "the same number of value heads)", c->ssm_dt_rank, c->ssm_n_group);
    uint64_t vd, kd, conv, ss, state, tail;
    const uint64_t S = c->ssm_d_state;
    if (!mw_mul_u64(c->ssm_dt_rank, c->ssm_head_v_dim, &vd) ||
        !mw_mul_u64(2 * (uint64_t)c->ssm_n_group, S, &kd) || !mw_add_u64(kd, vd, &conv) ||
        !mw_mul_u64(S, S, &ss) || !mw_mul_u64(ss, c->ssm_dt_rank, &state) ||
        !mw_mul_u64(conv, c->ssm_conv_kernel - 1, &tail) || !mw_add_u64(state, tail, &state) ||
        !mw_mul_u64(state, sizeof(float), &state) || vd > UINT32_MAX || conv > UINT32_MAX)
        return cfg_fail(err, MW_E_FORMAT, jpath,
                        "the recurrent state of a layer (linear_key_head_dim^2 * value heads + "
                        "(linear_conv_kernel_dim - 1) * conv channels, F32) or a projection "
                        "width overflows (key heads %u of %u, value heads %u of %u)",
                        c->ssm_n_group, c->ssm_d_state, c->ssm_dt_rank, c->ssm_head_v_dim);
    c->ssm_d_inner = (uint32_t)vd;
    c->ssm_v_reorder = c->arch != HF_ARCH_QWEN3NEXT && c->ssm_n_group != c->ssm_dt_rank;

    s = cfg_u32(obj, pre, "full_attention_interval", false, 4, 1, 512, &c->full_attn_interval,
                "every n-th layer is full attention", err);
    if (s != MW_OK) return s;
    const cJSON *lt = member(obj, "layer_types");
    if (lt) {
        snprintf(jpath, sizeof jpath, "%slayer_types", pre);
        if (!cJSON_IsArray(lt) || (uint32_t)cJSON_GetArraySize(lt) != c->n_layer)
            return cfg_fail(err, MW_E_FORMAT, jpath, "expected an array of num_hidden_layers (%u) strings",
                            c->n_layer);
        uint32_t il = 0;
        for (const cJSON *e = lt->child; e; e = e->next, il++) {
            const bool full = (il + 1) % c->full_attn_interval == 0;
            const char *want = full ? "full_attention" : "linear_attention";
            if (!cJSON_IsString(e) || strcmp(e->valuestring, want) != 0) {
                snprintf(jpath, sizeof jpath, "%slayer_types[%u]", pre, il);
                return cfg_fail(err, MW_E_FORMAT, jpath,
                                "'%s' contradicts full_attention_interval %u (layer %u is %s; "
                                "llama.cpp derives the layer kinds from the interval)",
                                cJSON_IsString(e) ? e->valuestring : "(not a string)",
                                c->full_attn_interval, il, want);
            }
        }
    }
    uint32_t mtp = 0;
    s = cfg_u32(obj, pre, "mtp_num_hidden_layers", false, 0, 0, 16, &mtp, "MTP blocks", err);
    if (s != MW_OK) return s;
    c->n_nextn = mtp;
    c->n_nextn_from_config = mtp > 0;
    if ((uint64_t)c->n_layer + mtp > 512) {
        snprintf(jpath, sizeof jpath, "%smtp_num_hidden_layers", pre);
        return cfg_fail(err, MW_E_FORMAT, jpath, "%u layers + %u MTP blocks: llama.cpp allows 512",
                        c->n_layer, mtp);
    }
    return MW_OK;
}

/* The experts of qwen35moe / qwen3next: in every layer, top-k renormalized,
 * with the sigmoid-gated shared expert (llama.cpp's graph, m/qwen35moe.cpp). */
static enum mw_status cfg_experts(const cJSON *obj, const char *pre, struct hf_config *c,
                                  struct mw_err *err)
{
    char jpath[128];
    if (!hf_arch_is_moe(c->arch)) {
        static const char *const moe_keys[] = {"num_experts", "num_experts_per_tok",
                                               "moe_intermediate_size",
                                               "shared_expert_intermediate_size"};
        for (size_t i = 0; i < sizeof moe_keys / sizeof moe_keys[0]; i++)
            if (member(obj, moe_keys[i])) {
                snprintf(jpath, sizeof jpath, "%s%s", pre, moe_keys[i]);
                return cfg_fail(err, MW_E_FORMAT, jpath,
                                "is not a %s key (a dense model; Qwen3_5Moe* has experts)",
                                c->hf_arch_name);
            }
        return MW_OK;
    }
    enum mw_status s = cfg_u32(obj, pre, "num_experts", true, 0, 1, 1024, &c->n_expert,
                               "expert count; llama.cpp allows at most 1024", err);
    if (s == MW_OK)
        s = cfg_u32(obj, pre, "num_experts_per_tok", true, 0, 1, 1024, &c->n_expert_used,
                    "experts used per token", err);
    if (s == MW_OK)
        s = cfg_u32(obj, pre, "moe_intermediate_size", true, 0, 1, 1u << 22, &c->n_ff_exp,
                    "one expert's FFN width", err);
    if (s == MW_OK)
        s = cfg_u32(obj, pre, "shared_expert_intermediate_size", true, 0, 1, 1u << 22,
                    &c->n_ff_shexp, "the shared expert's FFN width; llama.cpp's graph has one", err);
    if (s != MW_OK) return s;
    c->has_n_ff_exp = true;
    if (c->n_expert_used > c->n_expert) {
        snprintf(jpath, sizeof jpath, "%snum_experts_per_tok", pre);
        return cfg_fail(err, MW_E_FORMAT, jpath, "%u is more than num_experts %u",
                        c->n_expert_used, c->n_expert);
    }
    uint32_t step = 1;
    s = cfg_u32(obj, pre, "decoder_sparse_step", false, 1, 1, 1, &step,
                "llama.cpp's graph has experts in every layer", err);
    if (s != MW_OK) return s;
    const cJSON *mol = member(obj, "mlp_only_layers");
    if (mol && (!cJSON_IsArray(mol) || cJSON_GetArraySize(mol) != 0)) {
        snprintf(jpath, sizeof jpath, "%smlp_only_layers", pre);
        return cfg_fail(err, MW_E_UNSUPPORTED, jpath,
                        "expected []: llama.cpp's %s has experts in every layer", c->gguf_arch);
    }
    const cJSON *nt = member(obj, "norm_topk_prob");
    if (nt && !cJSON_IsTrue(nt)) {
        snprintf(jpath, sizeof jpath, "%snorm_topk_prob", pre);
        return cfg_fail(err, MW_E_UNSUPPORTED, jpath,
                        "expected true: llama.cpp's %s always renormalizes the top-k router weights",
                        c->gguf_arch);
    }
    c->norm_topk_prob = true;
    return MW_OK;
}

enum mw_status hf__cfg_qwen35(const cJSON *root, struct hf_config *c, struct mw_err *err)
{
    const enum hf_arch A = c->arch;
    const bool cg = ends_with(c->hf_arch_name, "ForConditionalGeneration");
    const cJSON *obj = root;
    const char *pre = "";
    char jpath[128];

    /* model_type; the ConditionalGeneration text model under text_config */
    const char *want_mt = A == HF_ARCH_QWEN3NEXT ? "qwen3_next"
                        : A == HF_ARCH_QWEN35 ? (cg ? "qwen3_5" : "qwen3_5_text")
                                              : (cg ? "qwen3_5_moe" : "qwen3_5_moe_text");
    const cJSON *mt = member(root, "model_type");
    if (mt && (!cJSON_IsString(mt) || strcmp(mt->valuestring, want_mt) != 0))
        return cfg_fail(err, MW_E_FORMAT, "model_type", "'%s' contradicts architectures[0] '%s' ('%s')",
                        cJSON_IsString(mt) ? mt->valuestring : "(not a string)", c->hf_arch_name,
                        want_mt);
    const cJSON *tc = member(root, "text_config");
    if (cg) {
        if (!tc)
            return cfg_fail(err, MW_E_FORMAT, "text_config", "missing (%s keeps the text model's keys there)",
                            c->hf_arch_name);
        if (!cJSON_IsObject(tc)) return cfg_fail(err, MW_E_FORMAT, "text_config", "expected an object");
        const char *want_tmt = A == HF_ARCH_QWEN35 ? "qwen3_5_text" : "qwen3_5_moe_text";
        const cJSON *tmt = member(tc, "model_type");
        if (tmt && (!cJSON_IsString(tmt) || strcmp(tmt->valuestring, want_tmt) != 0))
            return cfg_fail(err, MW_E_FORMAT, "text_config.model_type",
                            "'%s' contradicts architectures[0] '%s' ('%s')",
                            cJSON_IsString(tmt) ? tmt->valuestring : "(not a string)",
                            c->hf_arch_name, want_tmt);
        static const char *const text_keys[] = {"hidden_size", "num_hidden_layers",
                                                "num_attention_heads", "vocab_size",
                                                "linear_num_key_heads", "layer_types"};
        for (size_t i = 0; i < sizeof text_keys / sizeof text_keys[0]; i++)
            if (member(root, text_keys[i]))
                return cfg_fail(err, MW_E_FORMAT, text_keys[i],
                                "at the top level of a %s config (the text model's keys are in "
                                "text_config)", c->hf_arch_name);
        obj = tc;
        pre = "text_config.";
        c->multimodal = true;
    } else if (tc) {
        return cfg_fail(err, MW_E_FORMAT, "text_config",
                        "present, but %s is not a multimodal architecture", c->hf_arch_name);
    }

    /* sizes */
    enum mw_status s = cfg_u32(obj, pre, "hidden_size", true, 0, 1, 1u << 20, &c->n_embd,
                               "embedding width", err);
    if (s == MW_OK)
        s = cfg_u32(obj, pre, "num_hidden_layers", true, 0, 1, 512, &c->n_layer,
                    "layer count; llama.cpp allows at most 512", err);
    c->has_n_ff = member(obj, "intermediate_size") != NULL;
    if (s == MW_OK)
        s = cfg_u32(obj, pre, "intermediate_size", A == HF_ARCH_QWEN35, 0, 1, 1u << 22, &c->n_ff,
                    "FFN width", err);
    if (s == MW_OK)
        s = cfg_u32(obj, pre, "num_attention_heads", true, 0, 1, 1u << 16, &c->n_head,
                    "attention heads", err);
    if (s == MW_OK)
        s = cfg_u32(obj, pre, "num_key_value_heads", false, c->n_head, 1, 1u << 16, &c->n_head_kv,
                    "KV heads", err);
    if (s == MW_OK)
        s = cfg_u32(obj, pre, "vocab_size", true, 0, 1, 1u << 26, &c->n_vocab, "vocabulary size", err);
    if (s == MW_OK)
        s = cfg_u32(obj, pre, "max_position_embeddings", true, 0, 1, UINT32_MAX, &c->n_ctx,
                    "training context length", err);
    if (s != MW_OK) return s;
    c->head_dim_explicit = member(obj, "head_dim") != NULL;
    s = cfg_u32(obj, pre, "head_dim", false, 0, 2, 1u << 16, &c->head_dim, "head size", err);
    if (s != MW_OK) return s;
    if (!c->head_dim_explicit) {
        if (c->n_embd % c->n_head != 0) {
            snprintf(jpath, sizeof jpath, "%shidden_size", pre);
            return cfg_fail(err, MW_E_FORMAT, jpath,
                            "%u is not a multiple of num_attention_heads %u (and head_dim is absent)",
                            c->n_embd, c->n_head);
        }
        c->head_dim = c->n_embd / c->n_head;
    }
    if (c->n_head % c->n_head_kv != 0) {
        snprintf(jpath, sizeof jpath, "%snum_key_value_heads", pre);
        return cfg_fail(err, MW_E_FORMAT, jpath,
                        "num_attention_heads %u is not a multiple of num_key_value_heads %u",
                        c->n_head, c->n_head_kv);
    }
    double d;
    bool present;
    s = cfg_num(obj, pre, "rms_norm_eps", true, &d, &present, "RMSNorm epsilon", err);
    if (s != MW_OK) return s;
    c->rms_eps = (float)d;
    const cJSON *act = member(obj, "hidden_act");
    if (act && (!cJSON_IsString(act) || strcmp(act->valuestring, "silu") != 0)) {
        snprintf(jpath, sizeof jpath, "%shidden_act", pre);
        return cfg_fail(err, MW_E_UNSUPPORTED, jpath, "'%s' is not supported for %s (silu)",
                        cJSON_IsString(act) ? act->valuestring : "(not a string)", c->hf_arch_name);
    }
    c->act = HF_ACT_SILU;
    static const char *const off_keys[] = {"attention_bias", "use_sliding_window"};
    for (size_t i = 0; i < sizeof off_keys / sizeof off_keys[0]; i++) {
        const cJSON *v = member(obj, off_keys[i]);
        if (v && !cJSON_IsFalse(v)) {
            snprintf(jpath, sizeof jpath, "%s%s", pre, off_keys[i]);
            return cfg_fail(err, MW_E_UNSUPPORTED, jpath, "expected false (llama.cpp's %s has none)",
                            c->gguf_arch);
        }
    }
    const cJSON *gate = member(obj, "attn_output_gate");
    if (gate && !cJSON_IsTrue(gate)) {
        snprintf(jpath, sizeof jpath, "%sattn_output_gate", pre);
        return cfg_fail(err, MW_E_UNSUPPORTED, jpath,
                        "expected true (llama.cpp's %s always gates the attention output)",
                        c->gguf_arch);
    }
    s = cfg_rope(obj, pre, c, err);
    if (s == MW_OK) s = cfg_delta_net(obj, pre, c, err);
    if (s == MW_OK) s = cfg_experts(obj, pre, c, err);
    if (s != MW_OK) return s;

    /* tied embeddings: the text model's key, else the top level's (the
     * converter merges text_config over the top level) */
    const cJSON *tie = member(obj, "tie_word_embeddings");
    if (!tie && cg) tie = member(root, "tie_word_embeddings");
    if (tie && !cJSON_IsBool(tie))
        return cfg_fail(err, MW_E_FORMAT, "tie_word_embeddings", "expected true or false");
    c->tie_embeddings = tie && cJSON_IsTrue(tie);
    const cJSON *td = member(obj, "dtype");
    if (!td) td = member(root, "torch_dtype");
    if (td && cJSON_IsString(td)) snprintf(c->torch_dtype, sizeof c->torch_dtype, "%s", td->valuestring);
    return MW_OK;
}

/* "mtp.layers.<N>." or "model.mtp.layers.<N>.": N, else -1 */
static int64_t mtp_layer(const char *name)
{
    if (strncmp(name, "model.", 6) == 0) name += 6;
    if (strncmp(name, "mtp.layers.", 11) != 0) return -1;
    const char *p = name + 11;
    if (*p < '0' || *p > '9') return -1;
    int64_t v = 0;
    while (*p >= '0' && *p <= '9') {
        v = v * 10 + (*p - '0');
        if (v > 1000000) return -1;
        p++;
    }
    return *p == '.' ? v : -1;
}

void hf__qwen35_count_mtp(struct hf_model *m)
{
    struct hf_config *c = &m->cfg;
    if (!hf_arch_is_delta_net(c->arch) || c->n_nextn_from_config) return;
    int64_t n = 0;
    for (uint64_t i = 0; i < m->n; i++) {
        const int64_t l = mtp_layer(hf_model_tensor(m, i, NULL)->name);
        if (l >= 0 && l + 1 > n) n = l + 1;
    }
    /* more than the 512 layers llama.cpp allows: the plan refuses the
     * tensors beyond (layer out of range) */
    c->n_nextn = (uint32_t)(n > 16 ? 16 : n);
}
