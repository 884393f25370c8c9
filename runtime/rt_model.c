/*
 * runtime/rt_model.c — the llama graph's view of a GGUF file: keys and
 * tensors read and checked before anything runs (rt.h).
 *
 * The file is untrusted. gguf_open() has already checked the container
 * (counts, strings, types, offsets, sizes inside the file); here every key
 * the graph uses is checked for its exact value type and range, every tensor
 * for presence, exact shape and a type the kernels handle, and every size
 * derived from them with checked arithmetic. Errors name the key or tensor.
 */
#define _GNU_SOURCE
#include "runtime/rt_int.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "quant/quant.h"

#define MAX_LAYERS RT_MAX_LAYERS
#define MAX_HEAD_DIM RT_MAX_HEAD_DIM
#define MAX_DIM RT_MAX_DIM

#include "runtime/rt_model_int.h"

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
    char key[128];
    snprintf(key, sizeof key, "%s.%s", L->arch, suffix);
    FAIL_KEY(L, key, MW_E_VALUE, MW_ERR_OFF_NONE, "value %u out of range [%u, %u]", v, lo, hi);
}

// --- hyper-parameters ---

/* The family keys, with llama.cpp's defaults (src/models/<arch>.cpp
 * load_arch_hparams, llama_hparams). */
static enum mw_status read_family(struct ld *L)
{
    struct rt_hparams *hp = &L->m->hp;
    enum mw_status s;
    char key[128];
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
                               MAX_LAYERS)))
                return s;
            if ((s = archkey_f32(L, "rope.freq_base_swa", false, hp->rope_base_swa,
                                 &hp->rope_base_swa)))
                return s;
            if (!(hp->rope_base_swa > 1.0f)) {
                snprintf(key, sizeof key, "%s.rope.freq_base_swa", L->arch);
                FAIL_KEY(L, key, MW_E_VALUE, MW_ERR_OFF_NONE, "%g (expected > 1)",
                         (double)hp->rope_base_swa);
            }
        }
        if (hp->arch == RT_ARCH_GEMMA2) {
            if ((s = archkey_f32(L, "attn_logit_softcapping", false, hp->attn_softcap,
                                 &hp->attn_softcap)))
                return s;
            if (!(hp->attn_softcap > 0.0f)) {
                snprintf(key, sizeof key, "%s.attn_logit_softcapping", L->arch);
                FAIL_KEY(L, key, MW_E_VALUE, MW_ERR_OFF_NONE, "%g (expected > 0)",
                         (double)hp->attn_softcap);
            }
        }
        if ((s = archkey_f32(L, "final_logit_softcapping", false, hp->final_softcap,
                             &hp->final_softcap)))
            return s;
        if (hp->final_softcap < 0.0f || (hp->arch == RT_ARCH_GEMMA2 && hp->final_softcap == 0.0f)) {
            snprintf(key, sizeof key, "%s.final_logit_softcapping", L->arch);
            FAIL_KEY(L, key, MW_E_VALUE, MW_ERR_OFF_NONE, "%g (expected > 0)",
                     (double)hp->final_softcap);
        }
        hp->attn_scale = hp->n_layer == big_layers
                             ? 1.0f / sqrtf((float)(hp->n_embd / hp->n_head))
                             : 1.0f / sqrtf((float)hp->head_dim);
        break;
    }
    case RT_ARCH_PHI3: {
        /* llama.cpp turns Phi's sliding window off (n_swa = 0) and so do we */
        if ((s = archkey_u32(L, "rope.scaling.original_context_length", false, hp->n_ctx_train,
                             &hp->n_ctx_orig, NULL)))
            return s;
        if ((s = range_u32(L, "rope.scaling.original_context_length", hp->n_ctx_orig, 1,
                           1u << 24)))
            return s;
        if ((s = archkey_f32(L, "rope.scaling.attn_factor", false, 1.0f, &hp->rope_attn_factor)))
            return s;
        if (!(hp->rope_attn_factor > 0.0f)) {
            snprintf(key, sizeof key, "%s.rope.scaling.attn_factor", L->arch);
            FAIL_KEY(L, key, MW_E_VALUE, MW_ERR_OFF_NONE, "%g (expected > 0)",
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
    char key[128];
    const bool moe_arch = rt__arch_is_moe(hp->arch);
    if ((s = archkey_u32(L, "expert_count", moe_arch, 0, &hp->n_expert, NULL))) return s;
    snprintf(key, sizeof key, "%s.expert_count", L->arch);
    if (hp->n_expert > 0 && !moe_arch && hp->arch != RT_ARCH_LLAMA && hp->arch != RT_ARCH_GEMMA4)
        FAIL_KEY(L, key, MW_E_UNSUPPORTED, MW_ERR_OFF_NONE,
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
            snprintf(key, sizeof key, "%s.expert_used_count", L->arch);
            FAIL_KEY(L, key, MW_E_VALUE, MW_ERR_OFF_NONE, "%u without experts (expert_count 0)",
                     used);
        }
        return MW_OK;
    }
    if ((s = range_u32(L, "expert_used_count", used, 1, hp->n_expert))) return s;
    hp->n_expert_used = used;
    uint32_t v = 0;
    if ((s = archkey_u32(L, "expert_group_count", false, 0, &v, NULL))) return s;
    if (v > 1) {
        snprintf(key, sizeof key, "%s.expert_group_count", L->arch);
        FAIL_KEY(L, key, MW_E_UNSUPPORTED, MW_ERR_OFF_NONE,
                 "%u expert groups (group-limited routing is not supported)", v);
    }
    /* llama_expert_gating_func_type: 1 softmax (0: none given) */
    if ((s = archkey_u32(L, "expert_gating_func", false, 1, &v, NULL))) return s;
    /* gpt-oss: llama.cpp's graph gates with softmax over the top k whatever the key says */
    if (v > 1 && hp->arch != RT_ARCH_GPTOSS) {
        snprintf(key, sizeof key, "%s.expert_gating_func", L->arch);
        if (v <= 4)
            FAIL_KEY(L, key, MW_E_UNSUPPORTED, MW_ERR_OFF_NONE,
                     "gating %s: the %s graph gates its experts with softmax",
                     v == 2 ? "sigmoid" : v == 3 ? "softmax_weight" : "sqrt_softplus", L->arch);
        FAIL_KEY(L, key, MW_E_VALUE, MW_ERR_OFF_NONE,
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
                       hp->n_ff_exp, 1, MAX_DIM)))
        return s;
    if (hp->arch == RT_ARCH_QWEN2MOE || hp->arch == RT_ARCH_QWEN35MOE ||
        hp->arch == RT_ARCH_QWEN3NEXT) {
        if ((s = archkey_u32(L, "expert_shared_feed_forward_length", false, hp->n_ff,
                             &hp->n_ff_shexp, NULL)))
            return s;
        if ((s = range_u32(L, "expert_shared_feed_forward_length", hp->n_ff_shexp, 1, MAX_DIM)))
            return s;
    }
    return MW_OK;
}

static enum mw_status read_hparams(struct ld *L)
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
    if ((s = range_u32(L, "embedding_length", hp->n_embd, 1, MAX_DIM))) return s;
    if ((s = range_u32(L, "block_count", hp->n_layer, 1, MAX_LAYERS))) return s;
    if ((s = read_nextn(L))) return s;
    if ((s = range_u32(L, "feed_forward_length", hp->n_ff, moe_arch ? 0 : 1, MAX_DIM))) return s;
    if ((s = read_moe(L))) return s;
    if ((s = range_u32(L, "attention.head_count", hp->n_head, 1, 65536))) return s;
    if ((s = archkey_u32(L, "attention.head_count_kv", false, hp->n_head, &hp->n_head_kv, NULL)))
        return s;
    if ((s = range_u32(L, "attention.head_count_kv", hp->n_head_kv, 1, hp->n_head))) return s;
    if (hp->n_head % hp->n_head_kv != 0) {
        char key[128];
        snprintf(key, sizeof key, "%s.attention.head_count_kv", L->arch);
        FAIL_KEY(L, key, MW_E_VALUE, MW_ERR_OFF_NONE,
                 "%u does not divide head_count %u (grouped-query attention)", hp->n_head_kv,
                 hp->n_head);
    }
    bool has_kl = false, has_vl = false;
    uint32_t kl = 0, vl = 0;
    if ((s = archkey_u32(L, "attention.key_length", false, 0, &kl, &has_kl))) return s;
    if ((s = archkey_u32(L, "attention.value_length", false, 0, &vl, &has_vl))) return s;
    if (!has_kl) {
        if (hp->n_embd % hp->n_head != 0) {
            char key[128];
            snprintf(key, sizeof key, "%s.attention.head_count", L->arch);
            FAIL_KEY(L, key, MW_E_VALUE, MW_ERR_OFF_NONE,
                     "%u does not divide embedding_length %u and no key_length is given",
                     hp->n_head, hp->n_embd);
        }
        kl = hp->n_embd / hp->n_head;
    }
    if (!has_vl) vl = kl;
    if (kl != vl) {
        char key[128];
        snprintf(key, sizeof key, "%s.attention.value_length", L->arch);
        FAIL_KEY(L, key, MW_E_UNSUPPORTED, MW_ERR_OFF_NONE,
                 "value_length %u differs from key_length %u", vl, kl);
    }
    hp->head_dim = kl;
    if ((s = range_u32(L, "attention.key_length", hp->head_dim, 2, MAX_HEAD_DIM))) return s;
    if (hp->head_dim % 2 != 0) {
        char key[128];
        snprintf(key, sizeof key, "%s.attention.key_length", L->arch);
        FAIL_KEY(L, key, MW_E_VALUE, MW_ERR_OFF_NONE, "head size %u is odd", hp->head_dim);
    }
    /* q rows = n_head * head_dim must stay a sane dimension */
    if ((uint64_t)hp->n_head * hp->head_dim > MAX_DIM) {
        char key[128];
        snprintf(key, sizeof key, "%s.attention.head_count", L->arch);
        FAIL_KEY(L, key, MW_E_VALUE, MW_ERR_OFF_NONE, "%u heads x %u is too large", hp->n_head,
                 hp->head_dim);
    }
    if ((s = archkey_u32(L, "rope.dimension_count", false, hp->head_dim, &hp->n_rot, NULL)))
        return s;
    if ((hp->arch == RT_ARCH_LLAMA || hp->arch == RT_ARCH_QWEN2MOE ||
         hp->arch == RT_ARCH_QWEN3MOE) && hp->n_rot != hp->head_dim) {
        char key[128];
        snprintf(key, sizeof key, "%s.rope.dimension_count", L->arch);
        FAIL_KEY(L, key, MW_E_VALUE, MW_ERR_OFF_NONE,
                 "%u differs from the head size %u (llama.cpp: invalid n_rot)", hp->n_rot,
                 hp->head_dim);
    }
    if (hp->n_rot == 0 || hp->n_rot > hp->head_dim || hp->n_rot % 2 != 0) {
        char key[128];
        snprintf(key, sizeof key, "%s.rope.dimension_count", L->arch);
        FAIL_KEY(L, key, MW_E_VALUE, MW_ERR_OFF_NONE,
                 "%u (expected an even number in 2..%u)", hp->n_rot, hp->head_dim);
    }

    if ((s = archkey_f32(L, "attention.layer_norm_rms_epsilon", true, 0, &hp->rms_eps))) return s;
    if (!(hp->rms_eps >= 0.0f && hp->rms_eps < 1.0f)) {
        char key[128];
        snprintf(key, sizeof key, "%s.attention.layer_norm_rms_epsilon", L->arch);
        FAIL_KEY(L, key, MW_E_VALUE, MW_ERR_OFF_NONE, "%g (expected 0 <= eps < 1)",
                 (double)hp->rms_eps);
    }
    if ((s = archkey_f32(L, "rope.freq_base", false, 10000.0f, &hp->rope_base))) return s;
    if (!(hp->rope_base > 1.0f)) {
        char key[128];
        snprintf(key, sizeof key, "%s.rope.freq_base", L->arch);
        FAIL_KEY(L, key, MW_E_VALUE, MW_ERR_OFF_NONE, "%g (expected > 1)", (double)hp->rope_base);
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
            snprintf(key, sizeof key, "%s.rope.scaling.factor", L->arch);
            FAIL_KEY(L, key, MW_E_VALUE, MW_ERR_OFF_NONE, "%g (expected > 0)", (double)factor);
        }
        hp->rope_freq_scale = 1.0f / factor;
    }
    return read_family(L);
}

// --- tensors ---

const char *type_name(uint32_t t)
{
    const struct gguf_type_info *ti = gguf_type_get(t);
    return ti && ti->name ? ti->name : "?";
}

static void shape_str(char *buf, size_t n, const uint64_t ne[GGUF_MAX_DIMS], uint32_t n_dims)
{
    size_t o = 0;
    buf[0] = '\0';
    for (uint32_t d = 0; d < n_dims && o < n; d++)
        o += (size_t)snprintf(buf + o, n - o, d ? "x%llu" : "%llu", (unsigned long long)ne[d]);
}

/* Find tensor name with shape [ne0] (ne1 == 0), [ne0, ne1] (ne2 == 0) or
 * [ne0, ne1, ne2]; NULL if absent and optional. */
static enum mw_status find_tensor3(struct ld *L, const char *name, bool required, uint64_t ne0,
                                   uint64_t ne1, uint64_t ne2, const struct gguf_tensor **out)
{
    *out = NULL;
    const int64_t i = gguf_tensor_find(L->f, name);
    if (i < 0) {
        if (required) FAIL_T(L, name, MW_E_FORMAT, MW_ERR_OFF_NONE, "missing (the %s graph needs it)",
                             L->arch);
        return MW_OK;
    }
    const struct gguf_tensor *t = gguf_tensor_get(L->f, (uint64_t)i);
    const uint64_t want[GGUF_MAX_DIMS] = {ne0, ne1 ? ne1 : 1, ne2 ? ne2 : 1, 1};
    for (int d = 0; d < GGUF_MAX_DIMS; d++) {
        if (t->ne[d] != want[d]) {
            char got[96], exp[64];
            shape_str(got, sizeof got, t->ne, t->n_dims);
            shape_str(exp, sizeof exp, want, ne2 ? 3 : ne1 ? 2 : 1);
            FAIL_T(L, name, MW_E_FORMAT, t->info_off, "shape %s, expected %s", got, exp);
        }
    }
    if (gguf_tensor_data(L->f, (uint64_t)i) == NULL)
        FAIL_T(L, name, MW_E_TRUNC, t->file_off, "data is not in the file");
    *out = t;
    return MW_OK;
}

enum mw_status find_tensor(struct ld *L, const char *name, bool required, uint64_t ne0,
                                  uint64_t ne1, const struct gguf_tensor **out)
{
    return find_tensor3(L, name, required, ne0, ne1, 0, out);
}

/* A weight matrix of n_out rows of n_in (n_exp == 0), or a 3-D stack of
 * n_exp such matrices (the experts; w describes expert 0, slab_bytes
 * apart): present, shaped, with a kernel. */
enum mw_status get_weight(struct ld *L, const char *name, bool required, uint64_t n_in,
                                 uint64_t n_out, uint64_t n_exp, struct rt_weight *w)
{
    const struct gguf_tensor *t;
    enum mw_status s = find_tensor3(L, name, required, n_in, n_out, n_exp, &t);
    if (s || !t) return s;
    const struct rt_kernel *k = rt_kernel_get(L->m->ks, t->type);
    if (!k || !k->dot) {
        FAIL_T(L, name, MW_E_UNSUPPORTED, t->info_off,
               "type %s has no mat-vec kernel (f32, f16, bf16, q8_0, q4_0, q4_1, q5_0, q5_1, "
               "q2_K..q6_K, iq4_nl, iq4_xs, iq3_s, iq3_xxs, iq2_s, iq2_xs, iq2_xxs, "
               "iq1_m, iq1_s, mxfp4)", type_name(t->type));
    }
    const struct rt_act_format *af = rt_kernel_act(L->m->ks, k);
    if (!af || !af->quantize || af->blck == 0 || n_in % af->blck != 0)
        FAIL_T(L, name, MW_E_UNSUPPORTED, t->info_off,
               "row length %llu does not fit the %s activation blocks of type %s",
               (unsigned long long)n_in, af ? type_name(af->type) : "?", type_name(t->type));
    const uint64_t rb = rt_row_bytes(t->type, n_in);
    uint64_t slab, total;
    if (rb == 0 || !mw_mul_u64(rb, n_out, &slab) ||
        !mw_mul_u64(slab, n_exp ? n_exp : 1, &total) || total != t->nbytes)
        FAIL_T(L, name, MW_E_FORMAT, t->info_off, "size %llu does not match %llu rows of %llu bytes",
               (unsigned long long)t->nbytes,
               (unsigned long long)(n_out * (n_exp ? n_exp : 1)), (unsigned long long)rb);
    w->data = gguf_tensor_data(L->f, (uint64_t)gguf_tensor_find(L->f, name));
    w->type = t->type;
    w->n_in = n_in;
    w->n_out = n_out;
    w->row_bytes = rb;
    w->k = k;
    w->name = t->name;
    w->slab_bytes = n_exp ? slab : 0;
    L->m->weight_bytes += t->nbytes;
    if (n_exp) {
        L->m->expert_bytes += t->nbytes;
        L->m->expert_slab_bytes += slab;
    }
    return MW_OK;
}

enum mw_status get_matrix(struct ld *L, const char *name, bool required, uint64_t n_in,
                                 uint64_t n_out, struct rt_weight *w)
{
    return get_weight(L, name, required, n_in, n_out, 0, w);
}

/* A tensor that the graph does not read must not be there (llama.cpp
 * refuses files with tensors it did not load). */
enum mw_status refuse_tensor(struct ld *L, const char *name, const char *why)
{
    if (gguf_tensor_find(L->f, name) >= 0)
        FAIL_T(L, name, MW_E_FORMAT, MW_ERR_OFF_NONE, "unexpected in a %s file (%s)", L->arch, why);
    return MW_OK;
}

/* One MoE layer's FFN tensors (llama.cpp's create_tensor calls of the
 * llama / qwen2moe / qwen3moe loaders). */
enum mw_status load_moe_layer(struct ld *L, uint32_t il, struct rt_layer *ly)
{
    const struct rt_hparams *hp = &L->m->hp;
    const uint64_t E = hp->n_embd, FE = hp->n_ff_exp, NE = hp->n_expert;
    enum mw_status s;
    char nm[96];
#define NAME(suffix) (snprintf(nm, sizeof nm, "blk.%u." suffix, il), nm)
    if ((s = get_matrix(L, NAME("ffn_gate_inp.weight"), true, E, NE, &ly->gate_inp))) return s;
    /* llama.cpp's llama loader takes a missing ffn_gate_exps as silu(up) alone; no
     * converter writes such a file and the runtime refuses it */
    if ((s = get_weight(L, NAME("ffn_gate_exps.weight"), true, E, FE, NE, &ly->gate_exps)))
        return s;
    if ((s = get_weight(L, NAME("ffn_up_exps.weight"), true, E, FE, NE, &ly->up_exps))) return s;
    if ((s = get_weight(L, NAME("ffn_down_exps.weight"), true, FE, E, NE, &ly->down_exps)))
        return s;
    static const char *const dense[] = {"ffn_gate.weight", "ffn_up.weight", "ffn_down.weight"};
    for (int j = 0; j < 3; j++) {
        snprintf(nm, sizeof nm, "blk.%u.%s", il, dense[j]);
        if ((s = refuse_tensor(L, nm, "a mixture-of-experts layer has no dense FFN"))) return s;
    }
    static const char *const sh[] = {"ffn_gate_inp_shexp.weight", "ffn_gate_shexp.weight",
                                     "ffn_up_shexp.weight", "ffn_down_shexp.weight"};
    if (hp->n_ff_shexp == 0) {
        for (int j = 0; j < 4; j++) {
            snprintf(nm, sizeof nm, "blk.%u.%s", il, sh[j]);
            if ((s = refuse_tensor(L, nm, "a shared expert is qwen2moe's, qwen35moe's and "
                                          "qwen3next's")))
                return s;
        }
        return MW_OK;
    }
    /* qwen2moe, qwen35moe, qwen3next: the shared expert, a dense SwiGLU FFN
     * scaled by sigmoid(ffn_gate_inp_shexp . x) */
    const uint64_t FS = hp->n_ff_shexp;
    if ((s = get_matrix(L, NAME("ffn_gate_inp_shexp.weight"), true, E, 1, &ly->gate_inp_shexp)))
        return s;
    if ((s = get_matrix(L, NAME("ffn_gate_shexp.weight"), true, E, FS, &ly->wgate))) return s;
    if ((s = get_matrix(L, NAME("ffn_up_shexp.weight"), true, E, FS, &ly->wup))) return s;
    if ((s = get_matrix(L, NAME("ffn_down_shexp.weight"), true, FS, E, &ly->wdown))) return s;
#undef NAME
    return MW_OK;
}

/* A table [ne0, ne1] (a vector [ne0] when ne1 is 0): present (if required),
 * f32/f16/bf16; converted into the model's float buffer at *pos (advanced),
 * or counted when fbuf is NULL. */
enum mw_status get_table(struct ld *L, const char *name, bool required, uint64_t ne0,
                         uint64_t ne1, const float **out, uint64_t *pos)
{
    *out = NULL;
    const struct gguf_tensor *t;
    enum mw_status s = find_tensor(L, name, required, ne0, ne1, &t);
    if (s || !t) return s;
    const uint64_t n = ne0 * (ne1 ? ne1 : 1); /* the file's shape, checked by find_tensor */
    if (t->type != GGUF_TYPE_F32 && t->type != GGUF_TYPE_F16 && t->type != GGUF_TYPE_BF16)
        FAIL_T(L, name, MW_E_UNSUPPORTED, t->info_off, "type %s (expected f32, f16 or bf16)",
               type_name(t->type));
    const struct quant_traits *qt = quant_traits_get(t->type);
    if (!qt) FAIL_T(L, name, MW_E_UNSUPPORTED, t->info_off, "type %s cannot be decoded",
                    type_name(t->type));
    if (L->m->fbuf) {
        float *dst = L->m->fbuf + *pos;
        qt->to_float(gguf_tensor_data(L->f, (uint64_t)gguf_tensor_find(L->f, name)), dst, n);
        *out = dst;
    }
    *pos += n;
    L->m->weight_bytes += t->nbytes;
    return MW_OK;
}

enum mw_status get_vector(struct ld *L, const char *name, bool required, uint64_t n,
                          const float **out, uint64_t *pos)
{
    return get_table(L, name, required, n, 0, out, pos);
}

static enum mw_status load_tensors(struct ld *L, uint64_t *n_floats)
{
    struct rt_model *m = L->m;
    struct rt_hparams *hp = &m->hp;
    const uint64_t E = hp->n_embd, hd = hp->head_dim;
    const uint64_t qdim = (uint64_t)hp->n_head * hd, kvdim = (uint64_t)hp->n_head_kv * hd;
    const uint64_t F = hp->n_ff;
    uint64_t pos = 0;
    enum mw_status s;
    char nm[96];

    m->weight_bytes = 0;
    m->expert_bytes = 0;
    m->expert_slab_bytes = 0;
    /* token_embd decides n_vocab; the tokenizer's count must agree */
    const int64_t ie = gguf_tensor_find(L->f, "token_embd.weight");
    if (ie < 0)
        FAIL_T(L, "token_embd.weight", MW_E_FORMAT, MW_ERR_OFF_NONE, "missing (the %s graph needs it)",
               L->arch);
    const struct gguf_tensor *te = gguf_tensor_get(L->f, (uint64_t)ie);
    if (te->n_dims != 2 || te->ne[0] != E || te->ne[1] < 1 || te->ne[1] > MAX_DIM) {
        char got[96];
        shape_str(got, sizeof got, te->ne, te->n_dims);
        FAIL_T(L, "token_embd.weight", MW_E_FORMAT, te->info_off,
               "shape %s, expected %llux<n_vocab> (n_vocab 1..%u)", got, (unsigned long long)E,
               MAX_DIM);
    }
    hp->n_vocab = (uint32_t)te->ne[1];
    uint64_t koff = 0;
    const struct gguf_value *toks = kv_find(L, "tokenizer.ggml.tokens", &koff);
    if (toks && toks->type == GGUF_VT_ARRAY && toks->n != hp->n_vocab)
        FAIL_T(L, "token_embd.weight", MW_E_FORMAT, te->info_off,
               "%u rows, but tokenizer.ggml.tokens has %llu tokens", hp->n_vocab,
               (unsigned long long)toks->n);
    uint32_t vs = 0;
    bool has_vs = false;
    if ((s = archkey_u32(L, "vocab_size", false, 0, &vs, &has_vs))) return s;
    if (has_vs && vs != hp->n_vocab)
        FAIL_T(L, "token_embd.weight", MW_E_FORMAT, te->info_off,
               "%u rows, but %s.vocab_size is %u", hp->n_vocab, L->arch, vs);
    /* rows are decoded with quant's to_float (get_rows) */
    if (!quant_traits_get(te->type))
        FAIL_T(L, "token_embd.weight", MW_E_UNSUPPORTED, te->info_off,
               "type %s cannot be decoded", type_name(te->type));
    {
        const uint64_t rb = rt_row_bytes(te->type, E);
        uint64_t total;
        if (rb == 0 || !mw_mul_u64(rb, hp->n_vocab, &total) || total != te->nbytes)
            FAIL_T(L, "token_embd.weight", MW_E_FORMAT, te->info_off, "unexpected size %llu",
                   (unsigned long long)te->nbytes);
        m->tok_embd = (struct rt_weight){.data = gguf_tensor_data(L->f, (uint64_t)ie),
                                         .type = te->type, .n_in = E, .n_out = hp->n_vocab,
                                         .row_bytes = rb, .k = rt_kernel_get(m->ks, te->type),
                                         .name = te->name};
        if (!m->tok_embd.data)
            FAIL_T(L, "token_embd.weight", MW_E_TRUNC, te->file_off, "data is not in the file");
    }

    /* (cleared first: pass 2 must not see pass 1's tied view) */
    memset(&m->output, 0, sizeof m->output);
    if ((s = get_matrix(L, "output.weight", false, E, hp->n_vocab, &m->output))) return s;
    hp->tied_output = m->output.data == NULL;
    if (hp->tied_output) {
        /* the embedding doubles as the output matrix: it needs a kernel too */
        if ((s = get_matrix(L, "token_embd.weight", true, E, hp->n_vocab, &m->output))) return s;
    } else {
        m->weight_bytes += te->nbytes; /* the embedding rows are read as well */
    }
    if ((s = get_vector(L, "output_norm.weight", true, E, &m->output_norm, &pos))) return s;
    if ((s = get_vector(L, "rope_freqs.weight", false, hp->n_rot / 2, &m->rope_freqs, &pos)))
        return s;
    hp->has_rope_freqs = gguf_tensor_find(L->f, "rope_freqs.weight") >= 0;
    const bool gemma = hp->arch == RT_ARCH_GEMMA2 || hp->arch == RT_ARCH_GEMMA3;
    if (hp->arch == RT_ARCH_QWEN2MOE && hp->tied_output)
        FAIL_T(L, "output.weight", MW_E_FORMAT, MW_ERR_OFF_NONE,
               "missing (qwen2moe has a separate output matrix; llama.cpp requires it)");
    if (hp->arch == RT_ARCH_GEMMA2 && !hp->tied_output)
        FAIL_T(L, "output.weight", MW_E_FORMAT, MW_ERR_OFF_NONE,
               "gemma2 ties its output to token_embd.weight (llama.cpp loads no output.weight)");
    if (hp->arch == RT_ARCH_PHI3) {
        /* LongRoPE: both factor vectors or neither (llama.cpp writes them in pairs) */
        const bool hl = gguf_tensor_find(L->f, "rope_factors_long.weight") >= 0;
        const bool hs = gguf_tensor_find(L->f, "rope_factors_short.weight") >= 0;
        if (hl != hs)
            FAIL_T(L, hl ? "rope_factors_short.weight" : "rope_factors_long.weight", MW_E_FORMAT,
                   MW_ERR_OFF_NONE, "missing (LongRoPE needs both the long and the short factors)");
        if (hl && hp->has_rope_freqs)
            FAIL_T(L, "rope_freqs.weight", MW_E_FORMAT, MW_ERR_OFF_NONE,
                   "present together with rope_factors_long/short");
        if ((s = get_vector(L, "rope_factors_long.weight", false, hp->n_rot / 2, &m->rope_long,
                            &pos)))
            return s;
        if ((s = get_vector(L, "rope_factors_short.weight", false, hp->n_rot / 2, &m->rope_short,
                            &pos)))
            return s;
        hp->has_rope_long = hl;
    } else {
        static const char *const phi_only[] = {"rope_factors_long.weight",
                                               "rope_factors_short.weight"};
        for (int j = 0; j < 2; j++)
            if (gguf_tensor_find(L->f, phi_only[j]) >= 0)
                FAIL_T(L, phi_only[j], MW_E_FORMAT, MW_ERR_OFF_NONE,
                       "unexpected in a %s file (LongRoPE factors are phi3's)", L->arch);
    }

    const bool qwen = hp->arch == RT_ARCH_QWEN2;
    uint32_t n_rec = 0;
    if (hp->arch == RT_ARCH_GEMMA4 && (s = load_gemma4_globals(L, &pos))) return s;
    for (uint32_t il = 0; il < hp->n_layer; il++) {
        struct rt_layer *ly = m->layers ? &m->layers[il] : NULL;
        struct rt_layer dummy;
        if (!ly) {
            memset(&dummy, 0, sizeof dummy);
            ly = &dummy;
        }
        if (hp->arch == RT_ARCH_GEMMA4) {
            if ((s = load_gemma4_layer(L, il, ly, &pos))) return s;
            continue;
        }
        if (rt__arch_is_ssm(hp->arch)) {
            if (rt_layer_is_recurrent(hp, il)) ly->rec = n_rec++;
            if ((s = load_hybrid_layer(L, il, ly, &pos))) return s;
            continue;
        }
        if (hp->arch == RT_ARCH_GPTOSS) {
            if ((s = load_gptoss_layer(L, il, ly, &pos))) return s;
            continue;
        }
#define NAME(suffix) (snprintf(nm, sizeof nm, "blk.%u." suffix, il), nm)
        if ((s = get_vector(L, NAME("attn_norm.weight"), true, E, &ly->attn_norm, &pos))) return s;
        if ((s = get_vector(L, NAME("ffn_norm.weight"), true, E, &ly->ffn_norm, &pos))) return s;
        /* phi3: q, k, v rows in one attn_qkv.weight (llama.cpp's create_tensor_qkv
         * takes it when present, else the three matrices); views of its rows */
        const bool fused_qkv = hp->arch == RT_ARCH_PHI3 &&
                               gguf_tensor_find(L->f, NAME("attn_qkv.weight")) >= 0;
        if (il == 0) hp->fused_qkv = fused_qkv;
        if (fused_qkv != hp->fused_qkv)
            FAIL_T(L, NAME("attn_qkv.weight"), MW_E_FORMAT, MW_ERR_OFF_NONE,
                   "layer %u %s a fused attn_qkv.weight while layer 0 %s", il,
                   fused_qkv ? "has" : "lacks", hp->fused_qkv ? "has one" : "does not");
        if (fused_qkv) {
            struct rt_weight w;
            if ((s = get_matrix(L, NAME("attn_qkv.weight"), true, E, qdim + 2 * kvdim, &w)))
                return s;
            ly->wq = ly->wk = ly->wv = w;
            ly->wq.n_out = qdim;
            ly->wk.n_out = ly->wv.n_out = kvdim;
            ly->wk.data = w.data + qdim * w.row_bytes;
            ly->wv.data = w.data + (qdim + kvdim) * w.row_bytes;
            const float *b = NULL;
            if ((s = get_vector(L, NAME("attn_qkv.bias"), false, qdim + 2 * kvdim, &b, &pos)))
                return s;
            if (b) ly->bq = b, ly->bk = b + qdim, ly->bv = b + qdim + kvdim;
            static const char *const sep[] = {"attn_q.weight", "attn_k.weight", "attn_v.weight"};
            for (int j = 0; j < 3; j++) {
                snprintf(nm, sizeof nm, "blk.%u.%s", il, sep[j]);
                if (gguf_tensor_find(L->f, nm) >= 0)
                    FAIL_T(L, nm, MW_E_FORMAT, MW_ERR_OFF_NONE,
                           "present together with blk.%u.attn_qkv.weight", il);
            }
        } else {
            if ((s = get_matrix(L, NAME("attn_q.weight"), true, E, qdim, &ly->wq))) return s;
            if ((s = get_matrix(L, NAME("attn_k.weight"), true, E, kvdim, &ly->wk))) return s;
            if ((s = get_matrix(L, NAME("attn_v.weight"), true, E, kvdim, &ly->wv))) return s;
        }
        if ((s = get_matrix(L, NAME("attn_output.weight"), true, qdim, E, &ly->wo))) return s;
        if (hp->n_expert > 0) {
            if ((s = load_moe_layer(L, il, ly))) return s;
        } else if ((s = refuse_tensor(L, NAME("ffn_gate_inp.weight"),
                                      "a router without expert_count"))) {
            return s;
        } else if (hp->fused_gate_up) {
            /* phi3: ffn_up.weight holds the gate rows, then the up rows
             * (ggml_swiglu over the fused output: silu(first half) * second half) */
            struct rt_weight w;
            if ((s = get_matrix(L, NAME("ffn_up.weight"), true, E, 2 * F, &w))) return s;
            ly->wgate = ly->wup = w;
            ly->wgate.n_out = ly->wup.n_out = F;
            ly->wup.data = w.data + F * w.row_bytes;
            if (gguf_tensor_find(L->f, NAME("ffn_gate.weight")) >= 0)
                FAIL_T(L, nm, MW_E_FORMAT, MW_ERR_OFF_NONE,
                       "phi3 fuses the gate into ffn_up.weight (%llu rows); a separate gate is "
                       "not expected", (unsigned long long)(2 * F));
        } else {
            if ((s = get_matrix(L, NAME("ffn_gate.weight"), true, E, F, &ly->wgate))) return s;
            if ((s = get_matrix(L, NAME("ffn_up.weight"), true, E, F, &ly->wup))) return s;
        }
        if (hp->n_expert == 0 &&
            (s = get_matrix(L, NAME("ffn_down.weight"), true, F, E, &ly->wdown)))
            return s;
        if (!fused_qkv) {
            if ((s = get_vector(L, NAME("attn_q.bias"), qwen, qdim, &ly->bq, &pos))) return s;
            if ((s = get_vector(L, NAME("attn_k.bias"), qwen, kvdim, &ly->bk, &pos))) return s;
            if ((s = get_vector(L, NAME("attn_v.bias"), qwen, kvdim, &ly->bv, &pos))) return s;
        }
        if ((s = get_vector(L, NAME("attn_q_norm.weight"), hp->qk_norm, hd, &ly->q_norm, &pos)))
            return s;
        if ((s = get_vector(L, NAME("attn_k_norm.weight"), hp->qk_norm, hd, &ly->k_norm, &pos)))
            return s;
        if ((s = get_vector(L, NAME("post_attention_norm.weight"), gemma, E, &ly->attn_post_norm,
                            &pos)))
            return s;
        if ((s = get_vector(L, NAME("post_ffw_norm.weight"), gemma, E, &ly->ffn_post_norm, &pos)))
            return s;
        if (!hp->qk_norm && (ly->q_norm || ly->k_norm))
            FAIL_T(L, NAME("attn_q_norm.weight"), MW_E_FORMAT, MW_ERR_OFF_NONE,
                   "unexpected in a %s file (the graph has no q/k norm)", L->arch);
        if (!gemma && (ly->attn_post_norm || ly->ffn_post_norm))
            FAIL_T(L, NAME("post_attention_norm.weight"), MW_E_FORMAT, MW_ERR_OFF_NONE,
                   "unexpected in a %s file (post norms are gemma's)", L->arch);
        if ((s = get_vector(L, NAME("attn_output.bias"), false, E, &ly->bo, &pos))) return s;
        if (hp->n_expert == 0) {
            if ((s = get_vector(L, NAME("ffn_gate.bias"), false, F, &ly->bgate, &pos))) return s;
            if ((s = get_vector(L, NAME("ffn_up.bias"), false, F, &ly->bup, &pos))) return s;
            if ((s = get_vector(L, NAME("ffn_down.bias"), false, E, &ly->bdown, &pos))) return s;
        }
#undef NAME
    }
    *n_floats = pos;
    return MW_OK;
}

static void pick_main_type(struct rt_model *m)
{
    uint64_t bytes[GGUF_TYPE_COUNT] = {0};
    const struct rt_weight *all[12];
    for (uint32_t il = 0; il < m->hp.n_layer; il++) {
        const struct rt_layer *ly = &m->layers[il];
        all[0] = &ly->wq, all[1] = &ly->wk, all[2] = &ly->wv, all[3] = &ly->wo;
        all[4] = &ly->wgate, all[5] = &ly->wup, all[6] = &ly->wdown;
        int n = 7;
        if (rt_layer_is_recurrent(&m->hp, il)) /* (wq..wo are its first four) */
            all[7] = &ly->ssm_out, n = 8;
        for (int j = 0; j < n; j++)
            if (all[j]->data) bytes[all[j]->type] += all[j]->row_bytes * all[j]->n_out;
        if (m->hp.n_expert == 0) continue;
        all[0] = &ly->gate_exps, all[1] = &ly->up_exps, all[2] = &ly->down_exps;
        for (int j = 0; j < 3; j++)
            bytes[all[j]->type] += all[j]->row_bytes * all[j]->n_out * m->hp.n_expert;
    }
    uint32_t best = m->output.type;
    for (uint32_t t = 0; t < GGUF_TYPE_COUNT; t++)
        if (bytes[t] > bytes[best]) best = t;
    m->main_type = best;
}

// --- public ---

enum mw_status rt_model_from_gguf(const struct gguf_file *f, struct rt_model **out,
                                  struct mw_err *err)
{
    *out = NULL;
    struct rt_model *m = calloc(1, sizeof *m);
    if (!m) return MW_FAIL(err, MW_E_NOMEM, MW_ERR_OFF_NONE, "model struct");
    m->f = f;
    /* the kernel table only decides which types have a kernel here; every
     * variant supports the same types */
    struct rt_cpu cpu = rt_cpu_detect();
    m->ks = rt_kernels_select(&cpu);
    struct ld L = {.f = f, .m = m, .err = err, .arch = ""};
    enum mw_status s = read_hparams(&L);
    if (s) goto fail;
    /* pass 1: validate everything and count the owned floats */
    uint64_t n_floats = 0;
    if ((s = load_tensors(&L, &n_floats))) goto fail;
    uint64_t fb;
    size_t nb;
    if (!mw_mul_u64(n_floats, sizeof(float), &fb) || !mw_u64_to_size(fb, &nb)) {
        s = MW_FAIL(err, MW_E_NOMEM, MW_ERR_OFF_NONE, "norm/bias vectors too large");
        goto fail;
    }
    m->layers = calloc(m->hp.n_layer, sizeof *m->layers);
    m->fbuf = malloc(nb ? nb : 1);
    if (!m->layers || !m->fbuf) {
        s = MW_FAIL(err, MW_E_NOMEM, MW_ERR_OFF_NONE, "%llu bytes of norm/bias vectors",
                    (unsigned long long)nb);
        goto fail;
    }
    m->fbuf_floats = n_floats;
    /* pass 2: the same walk fills the views (cannot fail differently) */
    uint64_t again = 0;
    if ((s = load_tensors(&L, &again))) goto fail;
    if (again != n_floats) {
        s = MW_FAIL(err, MW_E_FORMAT, MW_ERR_OFF_NONE, "internal: tensor walk changed");
        goto fail;
    }
    pick_main_type(m);
    *out = m;
    return MW_OK;
fail:
    rt_model_close(m);
    return s;
}

/* Access hints for a mapping the runtime owns (madvise: a hint, a failure
 * changes nothing and is ignored). A MoE token reads n_expert_used of the
 * n_expert slabs of each 3-D ffn_{gate,up,down}_exps tensor; the kernel's
 * default read-around (a page fault reads the pages around it, up to the
 * device's read-ahead window) would also read the neighbouring experts that
 * were not routed, so those byte ranges get MADV_RANDOM (a fault reads its
 * own page). Rounded outward to whole pages: the at most two pages an expert
 * tensor shares with a neighbouring tensor lose read-around too, which costs
 * a one-page read of a dense tensor; rounded inward, the first and last
 * expert's edge pages would keep read-around and read into the experts next
 * to them. Dense tensors keep the default advice (sequential read-around);
 * read-around works on the file, so a fault in the router or the attention
 * tensors next to an expert tensor still reads into its edge experts. The
 * price: a cold routed slab is read one page per fault. rt_model_from_gguf
 * (calibration, plan: every expert is read) sets no hint. */
static void advise_experts(const struct rt_model *m)
{
    const long ps = sysconf(_SC_PAGESIZE);
    if (m->hp.n_expert == 0 || !m->layers || ps <= 0) return;
    const uintptr_t page = (uintptr_t)ps;
    for (uint32_t il = 0; il < m->hp.n_layer; il++) {
        const struct rt_layer *ly = &m->layers[il];
        const struct rt_weight *w[3] = {&ly->gate_exps, &ly->up_exps, &ly->down_exps};
        for (int j = 0; j < 3; j++) {
            if (!w[j]->data) continue;
            /* slab_bytes * n_expert is the tensor's size, inside the mapping
             * (checked at load); the mapping ends on a page boundary */
            const uintptr_t lo = (uintptr_t)w[j]->data;
            const uintptr_t hi = lo + (uintptr_t)(w[j]->slab_bytes * m->hp.n_expert);
            const uintptr_t a = lo & ~(page - 1), b = (hi + page - 1) & ~(page - 1);
            if (b > a) (void)madvise((void *)a, (size_t)(b - a), MADV_RANDOM);
        }
    }
}

enum mw_status rt_model_open(const char *path, const struct rt_model_opts *o,
                             struct rt_model **out, struct mw_err *err)
{
    *out = NULL;
    struct gguf_file *f = NULL;
    enum mw_status s = gguf_open(path, GGUF_OPEN_DEFAULT, &f, err);
    if (s) return s;
    struct rt_model *m = NULL;
    if ((s = rt_model_from_gguf(f, &m, err))) {
        gguf_close(f);
        return s;
    }
    m->own = f;
    advise_experts(m);
    rt__g4_advise(m);
    if (!(o && o->map_only)) m->copied_bytes = rt__place_weights(m);
    if (o && o->mlock) {
        const uint64_t size = gguf_file_size(f);
        if (size > 0 && mlock(gguf_base(f), (size_t)size) != 0) {
            const int e = errno;
            mw_err_set_path(err, path);
            s = MW_FAIL(err, MW_E_IO, MW_ERR_OFF_NONE,
                        "mlock of %llu bytes failed: %s (raise RLIMIT_MEMLOCK: ulimit -l)",
                        (unsigned long long)size, strerror(e));
            rt_model_close(m);
            return s;
        }
        m->locked = true;
    }
    *out = m;
    return MW_OK;
}

void rt_model_close(struct rt_model *m)
{
    if (!m) return;
    if (m->locked && m->own) munlock(gguf_base(m->own), (size_t)gguf_file_size(m->own));
    rt__g4_free(m);
    free(m->layers);
    free(m->fbuf);
    gguf_close(m->own);
    free(m);
}

const struct rt_hparams *rt_model_hparams(const struct rt_model *m) { return &m->hp; }
const struct gguf_file *rt_model_gguf(const struct rt_model *m) { return m->f; }
uint64_t rt_model_weight_bytes(const struct rt_model *m) { return m->weight_bytes; }
uint64_t rt_model_mapped_bytes(const struct rt_model *m) { return gguf_file_size(m->f); }
uint64_t rt_model_copied_bytes(const struct rt_model *m) { return m->copied_bytes; }
uint64_t rt_model_owned_bytes(const struct rt_model *m)
{
    return m->fbuf_floats * sizeof(float) + (uint64_t)m->hp.n_layer * sizeof(struct rt_layer) +
           sizeof *m;
}
uint32_t rt_model_main_type(const struct rt_model *m) { return m->main_type; }

uint64_t rt_model_active_weight_bytes(const struct rt_model *m)
{
    /* n_expert_used <= n_expert, so this never exceeds weight_bytes */
    return m->weight_bytes - m->expert_bytes + (uint64_t)m->hp.n_expert_used * m->expert_slab_bytes;
}

uint64_t rt_active_weight_bytes(const struct rt_hparams *hp, uint64_t weight_bytes,
                                uint64_t expert_bytes)
{
    if (hp->n_expert == 0 || expert_bytes > weight_bytes) return weight_bytes;
    const uint32_t k = hp->n_expert_used < hp->n_expert ? hp->n_expert_used : hp->n_expert;
    /* expert_bytes / n_expert first: no overflow, exact for whole slabs */
    return weight_bytes - expert_bytes + expert_bytes / hp->n_expert * k +
           expert_bytes % hp->n_expert * k / hp->n_expert;
}

enum mw_status rt_model_verify(const struct rt_model *m, uint64_t *n_checked, struct mw_err *err)
{
    const struct gguf_file *f = m->f;
    *n_checked = 0;
    const int64_t ia = gguf_kv_find(f, GGUF_KEY_CK_ALGO);
    const int64_t it = gguf_kv_find(f, GGUF_KEY_CK_TENSORS);
    const int64_t ih = gguf_kv_find(f, GGUF_KEY_CK_HEADER);
    if (ia < 0 && it < 0 && ih < 0) return MW_OK;
    mw_err_set_path(err, gguf_path(f));
    if (ia < 0 || it < 0 || ih < 0) {
        mw_err_set_where(err, "key 'memwall.checksum.*'");
        return MW_FAIL(err, MW_E_FORMAT, MW_ERR_OFF_NONE,
                       "incomplete checksum keys (algorithm, tensors and header are all needed)");
    }
    const struct gguf_value *va = gguf_kv_value(f, (uint64_t)ia);
    if (va->type != GGUF_VT_STRING || va->n != strlen(GGUF_CK_ALGO_NAME) ||
        memcmp(va->data, GGUF_CK_ALGO_NAME, va->n) != 0) {
        mw_err_set_where(err, "key '%s'", GGUF_KEY_CK_ALGO);
        return MW_FAIL(err, MW_E_UNSUPPORTED, gguf_kv_off(f, (uint64_t)ia),
                       "checksum algorithm is not \"%s\"", GGUF_CK_ALGO_NAME);
    }
    const struct gguf_value *vt = gguf_kv_value(f, (uint64_t)it);
    if (vt->type != GGUF_VT_ARRAY || vt->elem_type != GGUF_VT_U64 ||
        vt->n != gguf_tensor_count(f)) {
        mw_err_set_where(err, "key '%s'", GGUF_KEY_CK_TENSORS);
        return MW_FAIL(err, MW_E_FORMAT, gguf_kv_off(f, (uint64_t)it),
                       "expected u64[%llu] (one per tensor)",
                       (unsigned long long)gguf_tensor_count(f));
    }
    const struct gguf_value *vh = gguf_kv_value(f, (uint64_t)ih);
    uint64_t h;
    if (vh->type != GGUF_VT_U64 || !gguf_hash_header(f, &h)) {
        mw_err_set_where(err, "key '%s'", GGUF_KEY_CK_HEADER);
        return MW_FAIL(err, MW_E_FORMAT, gguf_kv_off(f, (uint64_t)ih), "expected u64");
    }
    if (h != mw_le64(vh->data)) {
        mw_err_set_where(err, "header");
        return MW_FAIL(err, MW_E_CHECKSUM, 0,
                       "header checksum %016llx, stored %016llx (metadata or tensor table changed)",
                       (unsigned long long)h, (unsigned long long)mw_le64(vh->data));
    }
    for (uint64_t i = 0; i < gguf_tensor_count(f); i++) {
        const struct gguf_tensor *t = gguf_tensor_get(f, i);
        const uint8_t *p = gguf_tensor_data(f, i);
        size_t n;
        if (!p || !mw_u64_to_size(t->nbytes, &n)) {
            mw_err_set_where(err, "tensor '%.64s'", t->name);
            return MW_FAIL(err, MW_E_TRUNC, t->file_off, "data is not in the file");
        }
        const uint64_t got = gguf_hash_tensor(p, n);
        const uint64_t want = mw_le64(vt->data + 8 * i);
        if (got != want) {
            mw_err_set_where(err, "tensor '%.64s'", t->name);
            return MW_FAIL(err, MW_E_CHECKSUM, t->file_off,
                           "checksum mismatch: xxh3 %016llx, stored %016llx (data changed)",
                           (unsigned long long)got,
                           (unsigned long long)want);
        }
        (*n_checked)++;
    }
    return MW_OK;
}
