/*
 * runtime/rt_model_hparams.c — the model's hyper-parameters from the GGUF
 * keys (rt_model_int.h): the checked key readers every loader file uses, the
 * common keys (architecture, dimensions, heads, norm epsilon, RoPE and its
 * scaling), the expert keys, and the gemma2/gemma3/phi3 family keys (the
 * other archs' own keys: rt_model_{ssm,gemma4,gptoss}.c).
 *
 * The file is untrusted: every key is checked for its exact value type and
 * range, and an error names the key.
 */
#include "runtime/rt_model_int.h"

#include <math.h>
#include <string.h>

enum mw_status fail_key(struct ld *L, const char *key, enum mw_status code, uint64_t off,
                               const char *msg)
{
    mw_err_set_path(L->err, gguf_path(L->f));
    mw_err_set_where(L->err, "key '%.120s'", key);
    return MW_FAIL(L->err, code, off, "%s", msg);
}

// --- keys ---

const struct gguf_value *kv_find(const struct ld *L, const char *key, uint64_t *off)
{
    const int64_t i = gguf_kv_find(L->f, key);
    if (i < 0) return NULL;
    *off = gguf_kv_off(L->f, (uint64_t)i);
    return gguf_kv_value(L->f, (uint64_t)i);
}

/* A u32 key, or (per-layer form) an array of u32/i32 whose elements are all
 * equal. Absent: *out = def and *present = false, or an error if required. */
static enum mw_status get_u32(struct ld *L, const char *key, bool required, uint32_t def,
                              uint32_t *out, bool *present)
{
    uint64_t off = 0;
    const struct gguf_value *v = kv_find(L, key, &off);
    if (present) *present = v != NULL;
    if (!v) {
        if (required) FAIL_KEY(L, key, MW_E_FORMAT, MW_ERR_OFF_NONE, "missing (required, u32)");
        *out = def;
        return MW_OK;
    }
    if (v->type == GGUF_VT_U32) {
        *out = mw_le32(v->data);
        return MW_OK;
    }
    if (v->type == GGUF_VT_ARRAY && (v->elem_type == GGUF_VT_U32 || v->elem_type == GGUF_VT_I32)) {
        if (v->n == 0) FAIL_KEY(L, key, MW_E_FORMAT, off, "empty per-layer array");
        uint32_t first = 0, top = 0;
        for (uint64_t j = 0; j < v->n; j++) {
            const uint32_t x = mw_le32(v->data + 4 * j);
            if (v->elem_type == GGUF_VT_I32 && (int32_t)x < 0)
                FAIL_KEY(L, key, MW_E_VALUE, off, "element %llu is negative (%d)",
                         (unsigned long long)j, (int32_t)x);
            if (j == 0) first = x;
            else if (x != first && L->m->hp.arch == RT_ARCH_GEMMA4)
                top = x > top ? x : top; /* its loader reads every layer's own */
            else if (x != first)
                FAIL_KEY(L, key, MW_E_UNSUPPORTED, off,
                         "per-layer values differ (element %llu: %u, element 0: %u); "
                         "only uniform layers are supported", (unsigned long long)j, x, first);
        }
        *out = first > top ? first : top;
        return MW_OK;
    }
    FAIL_KEY(L, key, MW_E_FORMAT, off, "has type %s, expected u32", gguf_vtype_name(v->type));
}

static enum mw_status get_f32(struct ld *L, const char *key, bool required, float def, float *out)
{
    uint64_t off = 0;
    const struct gguf_value *v = kv_find(L, key, &off);
    if (!v) {
        if (required) FAIL_KEY(L, key, MW_E_FORMAT, MW_ERR_OFF_NONE, "missing (required, f32)");
        *out = def;
        return MW_OK;
    }
    if (v->type != GGUF_VT_F32)
        FAIL_KEY(L, key, MW_E_FORMAT, off, "has type %s, expected f32", gguf_vtype_name(v->type));
    const uint32_t u = mw_le32(v->data);
    memcpy(out, &u, sizeof u);
    if (!isfinite(*out)) FAIL_KEY(L, key, MW_E_VALUE, off, "value is not finite");
    return MW_OK;
}

/* A string key into buf (NUL-terminated); "" when absent. */
static enum mw_status get_str(struct ld *L, const char *key, bool required, char *buf, size_t cap,
                              bool *present)
{
    uint64_t off = 0;
    const struct gguf_value *v = kv_find(L, key, &off);
    buf[0] = '\0';
    if (present) *present = v != NULL;
    if (!v) {
        if (required) FAIL_KEY(L, key, MW_E_FORMAT, MW_ERR_OFF_NONE, "missing (required, string)");
        return MW_OK;
    }
    if (v->type != GGUF_VT_STRING)
        FAIL_KEY(L, key, MW_E_FORMAT, off, "has type %s, expected string", gguf_vtype_name(v->type));
    const size_t n = v->n < cap - 1 ? (size_t)v->n : cap - 1;
    memcpy(buf, v->data, n);
    buf[n] = '\0';
    /* an embedded NUL would make the copy lie about the value */
    if (memchr(v->data, 0, (size_t)(v->n < cap ? v->n : cap)) != NULL)
        FAIL_KEY(L, key, MW_E_VALUE, off, "string contains a NUL byte");
    return MW_OK;
}

enum mw_status archkey_u32(struct ld *L, const char *suffix, bool required, uint32_t def,
                                  uint32_t *out, bool *present)
{
    char key[128];
    snprintf(key, sizeof key, "%s.%s", L->arch, suffix);
    return get_u32(L, key, required, def, out, present);
}

enum mw_status archkey_f32(struct ld *L, const char *suffix, bool required, float def,
                                  float *out)
{
    char key[128];
    snprintf(key, sizeof key, "%s.%s", L->arch, suffix);
    return get_f32(L, key, required, def, out);
}

enum mw_status range_u32(struct ld *L, const char *suffix, uint32_t v, uint32_t lo,
                                uint32_t hi)
{
    if (v >= lo && v <= hi) return MW_OK;
    FAIL_ARCHKEY(L, suffix, MW_E_VALUE, "value %u out of range [%u, %u]", v, lo, hi);
}

// --- hyper-parameters ---

/* The family keys, with llama.cpp's defaults (src/models/<arch>.cpp
 * load_arch_hparams, llama_hparams). */
/* <arch>.rope.scaling.original_context_length into hp->n_ctx_orig (default
 * the training context), 1 .. 2^24 (Phi-3's LongRoPE, gpt-oss's YaRN). */
enum mw_status rt__ld_read_ctx_orig(struct ld *L)
{
    struct rt_hparams *hp = &L->m->hp;
    enum mw_status s = archkey_u32(L, "rope.scaling.original_context_length", false,
                                   hp->n_ctx_train, &hp->n_ctx_orig, NULL);
    if (s) return s;
    return range_u32(L, "rope.scaling.original_context_length", hp->n_ctx_orig, 1, 1u << 24);
}

static enum mw_status read_family(struct ld *L)
{
    struct rt_hparams *hp = &L->m->hp;
    enum mw_status s;
    hp->rope_attn_factor = 1.0f;
    hp->rope_base_swa = hp->rope_base;
    /* the 27B rule (gemma_pytorch config): query_pre_attn_scalar = n_embd / n_head */
    const uint32_t big_layers = hp->arch == RT_ARCH_GEMMA2 ? 46 : 62;
    switch (hp->arch) {
    case RT_ARCH_GEMMA2:
    case RT_ARCH_GEMMA3: {
        bool has_swa = false;
        if (hp->arch == RT_ARCH_GEMMA2) {
            hp->n_swa = 4096;
            hp->swa_pattern = 2;
            hp->attn_softcap = 50.0f;
            hp->final_softcap = 30.0f;
            hp->rope_freq_scale_swa = hp->rope_freq_scale;
        } else {
            hp->swa_pattern = 6;
            hp->rope_base_swa = 10000.0f; /* llama_hparams' default, not rope.freq_base */
            hp->rope_freq_scale_swa = 1.0f;
        }
        if ((s = archkey_u32(L, "attention.sliding_window", false, hp->n_swa, &hp->n_swa,
                             &has_swa)))
            return s;
        if ((s = range_u32(L, "attention.sliding_window", hp->n_swa, 0, 1u << 24))) return s;
        if (hp->arch == RT_ARCH_GEMMA3 && hp->n_swa == 0) hp->swa_pattern = 0;
        if (hp->n_swa > 0) {
            if ((s = archkey_u32(L, "attention.sliding_window_pattern", false, hp->swa_pattern,
                                 &hp->swa_pattern, NULL)))
                return s;
            if ((s = range_u32(L, "attention.sliding_window_pattern", hp->swa_pattern, 0,
                               RT_MAX_LAYERS)))
                return s;
            if ((s = archkey_f32(L, "rope.freq_base_swa", false, hp->rope_base_swa,
                                 &hp->rope_base_swa)))
                return s;
            if (!(hp->rope_base_swa > 1.0f)) {
                FAIL_ARCHKEY(L, "rope.freq_base_swa", MW_E_VALUE, "%g (expected > 1)",
                             (double)hp->rope_base_swa);
            }
        }
        if (hp->arch == RT_ARCH_GEMMA2) {
            if ((s = archkey_f32(L, "attn_logit_softcapping", false, hp->attn_softcap,
                                 &hp->attn_softcap)))
                return s;
            if (!(hp->attn_softcap > 0.0f)) {
                FAIL_ARCHKEY(L, "attn_logit_softcapping", MW_E_VALUE, "%g (expected > 0)",
                             (double)hp->attn_softcap);
            }
        }
        if ((s = archkey_f32(L, "final_logit_softcapping", false, hp->final_softcap,
                             &hp->final_softcap)))
            return s;
        if (hp->final_softcap < 0.0f || (hp->arch == RT_ARCH_GEMMA2 && hp->final_softcap == 0.0f)) {
            FAIL_ARCHKEY(L, "final_logit_softcapping", MW_E_VALUE, "%g (expected > 0)",
                         (double)hp->final_softcap);
        }
        hp->attn_scale = hp->n_layer == big_layers
                             ? 1.0f / sqrtf((float)(hp->n_embd / hp->n_head))
                             : 1.0f / sqrtf((float)hp->head_dim);
        break;
    }
    case RT_ARCH_PHI3: {
        /* llama.cpp turns Phi's sliding window off (n_swa = 0) and so do we */
        if ((s = read_ctx_orig(L)))
            return s;
        if ((s = archkey_f32(L, "rope.scaling.attn_factor", false, 1.0f, &hp->rope_attn_factor)))
            return s;
        if (!(hp->rope_attn_factor > 0.0f)) {
            FAIL_ARCHKEY(L, "rope.scaling.attn_factor", MW_E_VALUE, "%g (expected > 0)",
                         (double)hp->rope_attn_factor);
        }
        hp->attn_scale = 1.0f / sqrtf((float)hp->head_dim);
        break;
    }
    case RT_ARCH_QWEN35:
    case RT_ARCH_QWEN35MOE:
    case RT_ARCH_QWEN3NEXT:
        return read_ssm(L);
    case RT_ARCH_GEMMA4:
        return read_gemma4(L);
    case RT_ARCH_GPTOSS:
        return read_gptoss(L);
    default:
        break;
    }
    return MW_OK;
}

/* The expert keys (llama.cpp's llama_model::load_hparams and the archs'
 * load_arch_hparams): expert_count, expert_used_count (a uniform per-layer
 * array is accepted), expert_feed_forward_length,
 * expert_shared_feed_forward_length. The gating is softmax and the weight
 * normalization fixed per arch, as llama.cpp's graphs hard-code them;
 * expert_gating_func, when present, must say softmax, and expert groups
 * (DeepSeek's group-limited routing) are refused. */
static enum mw_status read_moe(struct ld *L)
{
    struct rt_hparams *hp = &L->m->hp;
    enum mw_status s;
    const bool moe_arch = rt__arch_is_moe(hp->arch);
    if ((s = archkey_u32(L, "expert_count", moe_arch, 0, &hp->n_expert, NULL))) return s;
    if (hp->n_expert > 0 && !moe_arch && hp->arch != RT_ARCH_LLAMA && hp->arch != RT_ARCH_GEMMA4)
        FAIL_ARCHKEY(L, "expert_count", MW_E_UNSUPPORTED,
                     "%u experts in a %s file (the runtime's mixture-of-experts graphs: llama "
                     "(Mixtral), qwen2moe, qwen3moe)", hp->n_expert, L->arch);
    if ((s = range_u32(L, "expert_count", hp->n_expert, moe_arch ? 1 : 0, RT_MAX_EXPERTS)))
        return s;
    uint32_t used = 0;
    bool has_used = false;
    if ((s = archkey_u32(L, "expert_used_count", hp->n_expert > 0, 0, &used, &has_used)))
        return s;
    if (hp->n_expert == 0) {
        if (has_used && used > 0) {
            FAIL_ARCHKEY(L, "expert_used_count", MW_E_VALUE, "%u without experts (expert_count 0)",
                         used);
        }
        return MW_OK;
    }
    if ((s = range_u32(L, "expert_used_count", used, 1, hp->n_expert))) return s;
    hp->n_expert_used = used;
    uint32_t v = 0;
    if ((s = archkey_u32(L, "expert_group_count", false, 0, &v, NULL))) return s;
    if (v > 1) {
        FAIL_ARCHKEY(L, "expert_group_count", MW_E_UNSUPPORTED,
                     "%u expert groups (group-limited routing is not supported)", v);
    }
    /* llama_expert_gating_func_type: 1 softmax (0: none given) */
    if ((s = archkey_u32(L, "expert_gating_func", false, 1, &v, NULL))) return s;
    /* gpt-oss: llama.cpp's graph gates with softmax over the top k whatever the key says */
    if (v > 1 && hp->arch != RT_ARCH_GPTOSS) {
        if (v <= 4)
            FAIL_ARCHKEY(L, "expert_gating_func", MW_E_UNSUPPORTED,
                         "gating %s: the %s graph gates its experts with softmax",
                         v == 2 ? "sigmoid" : v == 3 ? "softmax_weight" : "sqrt_softplus",
                         L->arch);
        FAIL_ARCHKEY(L, "expert_gating_func", MW_E_VALUE,
                     "unknown gating function %u (expected 1, softmax)", v);
    }
    hp->moe_norm_w = hp->arch != RT_ARCH_QWEN2MOE && hp->arch != RT_ARCH_GPTOSS;
    if (moe_arch || hp->arch == RT_ARCH_GEMMA4) {
        if ((s = archkey_u32(L, "expert_feed_forward_length", false, hp->n_ff / used,
                             &hp->n_ff_exp, NULL)))
            return s;
    } else {
        hp->n_ff_exp = hp->n_ff; /* Mixtral: the experts are feed_forward_length wide */
    }
    if ((s = range_u32(L, moe_arch ? "expert_feed_forward_length" : "feed_forward_length",
                       hp->n_ff_exp, 1, RT_MAX_DIM)))
        return s;
    if (hp->arch == RT_ARCH_QWEN2MOE || hp->arch == RT_ARCH_QWEN35MOE ||
        hp->arch == RT_ARCH_QWEN3NEXT) {
        if ((s = archkey_u32(L, "expert_shared_feed_forward_length", false, hp->n_ff,
                             &hp->n_ff_shexp, NULL)))
            return s;
        if ((s = range_u32(L, "expert_shared_feed_forward_length", hp->n_ff_shexp, 1, RT_MAX_DIM)))
            return s;
    }
    return MW_OK;
}

enum mw_status read_hparams(struct ld *L)
{
    struct rt_hparams *hp = &L->m->hp;
    enum mw_status s;
    char arch[64];
    if ((s = get_str(L, "general.architecture", true, arch, sizeof arch, NULL))) return s;
    if (strcmp(arch, "llama") == 0) {
        hp->arch = RT_ARCH_LLAMA;
    } else if (strcmp(arch, "qwen2") == 0) {
        hp->arch = RT_ARCH_QWEN2;
        hp->rope_neox = true;
    } else if (strcmp(arch, "qwen3") == 0) {
        hp->arch = RT_ARCH_QWEN3;
        hp->rope_neox = true;
        hp->qk_norm = true;
    } else if (strcmp(arch, "gemma2") == 0 || strcmp(arch, "gemma3") == 0) {
        hp->arch = arch[5] == '2' ? RT_ARCH_GEMMA2 : RT_ARCH_GEMMA3;
        hp->rope_neox = true;
        hp->qk_norm = hp->arch == RT_ARCH_GEMMA3;
        hp->post_norms = true;
        hp->embd_scale = true;
        hp->act = RT_ACT_GELU_TANH;
    } else if (strcmp(arch, "gemma4") == 0) {
        hp->arch = RT_ARCH_GEMMA4;
        hp->rope_neox = true;
        hp->qk_norm = true;
        hp->post_norms = true;
        hp->embd_scale = true;
        hp->act = RT_ACT_GELU_TANH;
    } else if (strcmp(arch, "phi3") == 0) {
        hp->arch = RT_ARCH_PHI3;
        hp->rope_neox = true;
        hp->fused_gate_up = true;
    } else if (strcmp(arch, "qwen2moe") == 0) {
        hp->arch = RT_ARCH_QWEN2MOE;
        hp->rope_neox = true;
    } else if (strcmp(arch, "qwen3moe") == 0) {
        hp->arch = RT_ARCH_QWEN3MOE;
        hp->rope_neox = true;
        hp->qk_norm = true;
    } else if (strcmp(arch, "qwen35") == 0 || strcmp(arch, "qwen35moe") == 0 ||
               strcmp(arch, "qwen3next") == 0) {
        hp->arch = strcmp(arch, "qwen35") == 0      ? RT_ARCH_QWEN35
                   : strcmp(arch, "qwen35moe") == 0 ? RT_ARCH_QWEN35MOE
                                                    : RT_ARCH_QWEN3NEXT;
        hp->rope_neox = true;
        hp->qk_norm = true;
        hp->attn_out_gate = true;
        hp->ssm_v_tiled = hp->arch != RT_ARCH_QWEN3NEXT;
        hp->ssm_ba_fused = hp->arch == RT_ARCH_QWEN3NEXT;
    } else if (strcmp(arch, "gpt-oss") == 0) {
        hp->arch = RT_ARCH_GPTOSS;
        hp->rope_neox = true;
        hp->act = RT_ACT_SWIGLU_OAI;
        hp->moe_softmax_w = true;
    } else {
        FAIL_KEY(L, "general.architecture", MW_E_UNSUPPORTED, MW_ERR_OFF_NONE,
                 "architecture '%.40s' (the runtime runs llama, mistral (as llama), mixtral "
                 "(llama with experts), qwen2, qwen2moe, qwen3, qwen3moe, qwen35, qwen35moe, "
                 "qwen3next, gemma2, gemma3, gemma4 and phi3)",
                 arch);
    }
    snprintf(hp->arch_name, sizeof hp->arch_name, "%.15s", arch);
    L->arch = hp->arch_name;
    if ((s = get_str(L, "general.name", false, hp->name, sizeof hp->name, NULL))) {
        /* a display name is not worth refusing the file for */
        hp->name[0] = '\0';
        mw_err_clear(L->err);
    }
    hp->file_type = UINT32_MAX;
    if ((s = get_u32(L, "general.file_type", false, UINT32_MAX, &hp->file_type, NULL))) return s;

    const bool moe_arch = rt__arch_is_moe(hp->arch);
    if ((s = archkey_u32(L, "context_length", true, 0, &hp->n_ctx_train, NULL))) return s;
    if ((s = archkey_u32(L, "embedding_length", true, 0, &hp->n_embd, NULL))) return s;
    if ((s = archkey_u32(L, "block_count", true, 0, &hp->n_layer, NULL))) return s;
    /* qwen2moe/qwen3moe: llama.cpp reads it as optional (the experts have their own) */
    if ((s = archkey_u32(L, "feed_forward_length", !moe_arch, 0, &hp->n_ff, NULL))) return s;
    if ((s = archkey_u32(L, "attention.head_count", true, 0, &hp->n_head, NULL))) return s;
    if ((s = range_u32(L, "context_length", hp->n_ctx_train, 1, 1u << 24))) return s;
    if ((s = range_u32(L, "embedding_length", hp->n_embd, 1, RT_MAX_DIM))) return s;
    if ((s = range_u32(L, "block_count", hp->n_layer, 1, RT_MAX_LAYERS))) return s;
    if ((s = read_nextn(L))) return s;
    if ((s = range_u32(L, "feed_forward_length", hp->n_ff, moe_arch ? 0 : 1, RT_MAX_DIM))) return s;
    if ((s = read_moe(L))) return s;
    if ((s = range_u32(L, "attention.head_count", hp->n_head, 1, 65536))) return s;
    if ((s = archkey_u32(L, "attention.head_count_kv", false, hp->n_head, &hp->n_head_kv, NULL)))
        return s;
    if ((s = range_u32(L, "attention.head_count_kv", hp->n_head_kv, 1, hp->n_head))) return s;
    if (hp->n_head % hp->n_head_kv != 0) {
        FAIL_ARCHKEY(L, "attention.head_count_kv", MW_E_VALUE,
                     "%u does not divide head_count %u (grouped-query attention)", hp->n_head_kv,
                     hp->n_head);
    }
    bool has_kl = false, has_vl = false;
    uint32_t kl = 0, vl = 0;
    if ((s = archkey_u32(L, "attention.key_length", false, 0, &kl, &has_kl))) return s;
    if ((s = archkey_u32(L, "attention.value_length", false, 0, &vl, &has_vl))) return s;
    if (!has_kl) {
        if (hp->n_embd % hp->n_head != 0) {
            FAIL_ARCHKEY(L, "attention.head_count", MW_E_VALUE,
                         "%u does not divide embedding_length %u and no key_length is given",
                         hp->n_head, hp->n_embd);
        }
        kl = hp->n_embd / hp->n_head;
    }
    if (!has_vl) vl = kl;
    if (kl != vl) {
        FAIL_ARCHKEY(L, "attention.value_length", MW_E_UNSUPPORTED,
                     "value_length %u differs from key_length %u", vl, kl);
    }
    hp->head_dim = kl;
    if ((s = range_u32(L, "attention.key_length", hp->head_dim, 2, RT_MAX_HEAD_DIM))) return s;
    if (hp->head_dim % 2 != 0) {
        FAIL_ARCHKEY(L, "attention.key_length", MW_E_VALUE, "head size %u is odd", hp->head_dim);
    }
    /* q rows = n_head * head_dim must stay a sane dimension */
    if ((uint64_t)hp->n_head * hp->head_dim > RT_MAX_DIM) {
        FAIL_ARCHKEY(L, "attention.head_count", MW_E_VALUE, "%u heads x %u is too large",
                     hp->n_head, hp->head_dim);
    }
    if ((s = archkey_u32(L, "rope.dimension_count", false, hp->head_dim, &hp->n_rot, NULL)))
        return s;
    if ((hp->arch == RT_ARCH_LLAMA || hp->arch == RT_ARCH_QWEN2MOE ||
         hp->arch == RT_ARCH_QWEN3MOE) && hp->n_rot != hp->head_dim) {
        FAIL_ARCHKEY(L, "rope.dimension_count", MW_E_VALUE,
                     "%u differs from the head size %u (llama.cpp: invalid n_rot)", hp->n_rot,
                     hp->head_dim);
    }
    if (hp->n_rot == 0 || hp->n_rot > hp->head_dim || hp->n_rot % 2 != 0) {
        FAIL_ARCHKEY(L, "rope.dimension_count", MW_E_VALUE,
                     "%u (expected an even number in 2..%u)", hp->n_rot, hp->head_dim);
    }

    if ((s = archkey_f32(L, "attention.layer_norm_rms_epsilon", true, 0, &hp->rms_eps))) return s;
    if (!(hp->rms_eps >= 0.0f && hp->rms_eps < 1.0f)) {
        FAIL_ARCHKEY(L, "attention.layer_norm_rms_epsilon", MW_E_VALUE,
                     "%g (expected 0 <= eps < 1)", (double)hp->rms_eps);
    }
    if ((s = archkey_f32(L, "rope.freq_base", false, 10000.0f, &hp->rope_base))) return s;
    if (!(hp->rope_base > 1.0f)) {
        FAIL_ARCHKEY(L, "rope.freq_base", MW_E_VALUE, "%g (expected > 1)", (double)hp->rope_base);
    }

    /* RoPE scaling: none or linear (rope.scaling.type, or the older
     * rope.scale_linear). YaRN/LongRoPE change the attention itself: refuse. */
    char key[128], stype[32];
    bool has_type = false;
    snprintf(key, sizeof key, "%s.rope.scaling.type", L->arch);
    if ((s = get_str(L, key, false, stype, sizeof stype, &has_type))) return s;
    float factor = 0.0f;
    if ((s = archkey_f32(L, "rope.scaling.factor", false, 0.0f, &factor))) return s;
    float lin = 0.0f;
    if ((s = archkey_f32(L, "rope.scale_linear", false, 0.0f, &lin))) return s;
    hp->rope_freq_scale = 1.0f;
    /* gpt-oss: YaRN (llama.cpp's ext_factor 1 for rope scaling type yarn) */
    hp->rope_yarn = has_type && strcmp(stype, "yarn") == 0 && hp->arch == RT_ARCH_GPTOSS;
    if (has_type && strcmp(stype, "none") != 0 && strcmp(stype, "linear") != 0 && !hp->rope_yarn)
        FAIL_KEY(L, key, MW_E_UNSUPPORTED, MW_ERR_OFF_NONE,
                 "rope scaling '%.20s' (supported: none, linear)", stype);
    if (lin != 0.0f) factor = lin;
    if ((!has_type || strcmp(stype, "linear") == 0 || hp->rope_yarn) && factor != 0.0f) {
        if (!(factor > 0.0f)) {
            FAIL_ARCHKEY(L, "rope.scaling.factor", MW_E_VALUE, "%g (expected > 0)", (double)factor);
        }
        hp->rope_freq_scale = 1.0f / factor;
    }
    return read_family(L);
}
