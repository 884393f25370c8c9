/* hf/hf_config.c — config.json (cJSON) of every family but the gated delta
 * net's (hf_config_qwen35.c), and the JSON readers the two share. */
#define _POSIX_C_SOURCE 200809L
#include "hf/hf_int.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

// --- config.json -------------------------------------------------------------

static const struct {
    const char *hf_name;
    enum hf_arch arch;
} arch_names[] = {
    {"LlamaForCausalLM", HF_ARCH_LLAMA},
    {"LLaMAForCausalLM", HF_ARCH_LLAMA},
    {"MistralForCausalLM", HF_ARCH_MISTRAL},
    {"Qwen2ForCausalLM", HF_ARCH_QWEN2},
    {"Qwen3ForCausalLM", HF_ARCH_QWEN3},
    {"Gemma2ForCausalLM", HF_ARCH_GEMMA2},
    {"Gemma3ForCausalLM", HF_ARCH_GEMMA3},
    {"Gemma3ForConditionalGeneration", HF_ARCH_GEMMA3},
    {"Phi3ForCausalLM", HF_ARCH_PHI3},
    {"Qwen2MoeForCausalLM", HF_ARCH_QWEN2MOE},
    {"Qwen3MoeForCausalLM", HF_ARCH_QWEN3MOE},
    {"MixtralForCausalLM", HF_ARCH_MIXTRAL},
    {"Qwen3_5ForCausalLM", HF_ARCH_QWEN35},
    {"Qwen3_5ForConditionalGeneration", HF_ARCH_QWEN35},
    {"Qwen3_5MoeForCausalLM", HF_ARCH_QWEN35MOE},
    {"Qwen3_5MoeForConditionalGeneration", HF_ARCH_QWEN35MOE},
    {"Qwen3NextForCausalLM", HF_ARCH_QWEN3NEXT},
    {"Gemma4ForCausalLM", HF_ARCH_GEMMA4},
    {"Gemma4ForConditionalGeneration", HF_ARCH_GEMMA4},
    {"GptOssForCausalLM", HF_ARCH_GPTOSS},
};

static const char *const arch_short[HF_ARCH_COUNT] = {
    [HF_ARCH_LLAMA] = "llama",
    [HF_ARCH_MISTRAL] = "mistral",
    [HF_ARCH_QWEN2] = "qwen2",
    [HF_ARCH_QWEN3] = "qwen3",
    [HF_ARCH_GEMMA2] = "gemma2",
    [HF_ARCH_GEMMA3] = "gemma3",
    [HF_ARCH_PHI3] = "phi3",
    [HF_ARCH_QWEN2MOE] = "qwen2moe",
    [HF_ARCH_QWEN3MOE] = "qwen3moe",
    [HF_ARCH_MIXTRAL] = "mixtral",
    [HF_ARCH_QWEN35] = "qwen35",
    [HF_ARCH_QWEN35MOE] = "qwen35moe",
    [HF_ARCH_QWEN3NEXT] = "qwen3next",
    [HF_ARCH_GEMMA4] = "gemma4",
    [HF_ARCH_GPTOSS] = "gptoss",
};

/* config.json model_type of each architecture (Gemma 3: see cfg_family) */
static const char *const arch_model_type[HF_ARCH_COUNT] = {
    [HF_ARCH_LLAMA] = "llama",
    [HF_ARCH_MISTRAL] = "mistral",
    [HF_ARCH_QWEN2] = "qwen2",
    [HF_ARCH_QWEN3] = "qwen3",
    [HF_ARCH_GEMMA2] = "gemma2",
    [HF_ARCH_GEMMA3] = "gemma3",
    [HF_ARCH_PHI3] = "phi3",
    [HF_ARCH_QWEN2MOE] = "qwen2_moe",
    [HF_ARCH_QWEN3MOE] = "qwen3_moe",
    [HF_ARCH_MIXTRAL] = "mixtral",
    [HF_ARCH_QWEN35] = "qwen3_5",
    [HF_ARCH_QWEN35MOE] = "qwen3_5_moe",
    [HF_ARCH_QWEN3NEXT] = "qwen3_next",
    [HF_ARCH_GEMMA4] = "gemma4",
    [HF_ARCH_GPTOSS] = "gpt_oss",
};

static const char *const arch_gguf[HF_ARCH_COUNT] = {
    [HF_ARCH_LLAMA] = "llama",
    [HF_ARCH_MISTRAL] = "llama",
    [HF_ARCH_QWEN2] = "qwen2",
    [HF_ARCH_QWEN3] = "qwen3",
    [HF_ARCH_GEMMA2] = "gemma2",
    [HF_ARCH_GEMMA3] = "gemma3",
    [HF_ARCH_PHI3] = "phi3",
    [HF_ARCH_QWEN2MOE] = "qwen2moe",
    [HF_ARCH_QWEN3MOE] = "qwen3moe",
    [HF_ARCH_MIXTRAL] = "llama",
    [HF_ARCH_QWEN35] = "qwen35",
    [HF_ARCH_QWEN35MOE] = "qwen35moe",
    [HF_ARCH_QWEN3NEXT] = "qwen3next",
    [HF_ARCH_GEMMA4] = "gemma4",
    [HF_ARCH_GPTOSS] = "gpt-oss",
};

bool hf_arch_is_moe(enum hf_arch a)
{
    return a == HF_ARCH_QWEN2MOE || a == HF_ARCH_QWEN3MOE || a == HF_ARCH_MIXTRAL ||
           a == HF_ARCH_QWEN35MOE || a == HF_ARCH_QWEN3NEXT || a == HF_ARCH_GPTOSS;
}

bool hf_arch_is_delta_net(enum hf_arch a)
{
    return a == HF_ARCH_QWEN35 || a == HF_ARCH_QWEN35MOE || a == HF_ARCH_QWEN3NEXT;
}

const char *hf_arch_name(enum hf_arch a)
{
    return ((unsigned)a < HF_ARCH_COUNT) ? arch_short[a] : "?";
}

/* Member lookup; JSON null counts as absent. */
static const cJSON *member(const cJSON *obj, const char *key)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(obj, key);
    return (v && !cJSON_IsNull(v)) ? v : NULL;
}

static enum mw_status cfg_fail(struct mw_err *err, enum mw_status code, const char *jpath,
                               const char *fmt, ...) __attribute__((format(printf, 4, 5)));
static enum mw_status cfg_fail(struct mw_err *err, enum mw_status code, const char *jpath,
                               const char *fmt, ...)
{
    char msg[320];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    mw_err_set_where(err, "%s", jpath);
    return MW_FAIL(err, code, MW_ERR_OFF_NONE, "%s", msg);
}

/* Integer key in [lo, hi]; absent: *out = def unless required. */
static enum mw_status cfg_u32(const cJSON *obj, const char *prefix, const char *key, bool required,
                              uint32_t def, uint32_t lo, uint32_t hi, uint32_t *out,
                              const char *why, struct mw_err *err)
{
    char jpath[96];
    snprintf(jpath, sizeof jpath, "%s%s", prefix, key);
    const cJSON *v = member(obj, key);
    if (!v) {
        if (required) {
            mw_err_set_where(err, "%s", jpath);
            return MW_FAIL(err, MW_E_FORMAT, MW_ERR_OFF_NONE, "missing (%s)", why);
        }
        *out = def;
        return MW_OK;
    }
    uint64_t u;
    if (!hf__util_json_u64(v, &u)) {
        mw_err_set_where(err, "%s", jpath);
        return MW_FAIL(err, MW_E_FORMAT, MW_ERR_OFF_NONE,
                       "expected a non-negative integer (%s)", why);
    }
    if (u < lo || u > hi) {
        mw_err_set_where(err, "%s", jpath);
        return MW_FAIL(err, MW_E_FORMAT, MW_ERR_OFF_NONE, "%llu is out of range [%u, %u] (%s)",
                       (unsigned long long)u, lo, hi, why);
    }
    *out = (uint32_t)u;
    return MW_OK;
}

/* Positive finite number; absent: *present = false (error if required). */
static enum mw_status cfg_num(const cJSON *obj, const char *prefix, const char *key, bool required,
                              double *out, bool *present, const char *why, struct mw_err *err)
{
    char jpath[96];
    snprintf(jpath, sizeof jpath, "%s%s", prefix, key);
    const cJSON *v = member(obj, key);
    *present = false;
    if (!v) {
        if (!required) return MW_OK;
        mw_err_set_where(err, "%s", jpath);
        return MW_FAIL(err, MW_E_FORMAT, MW_ERR_OFF_NONE, "missing (%s)", why);
    }
    if (!cJSON_IsNumber(v) || !isfinite(v->valuedouble) || !(v->valuedouble > 0.0) ||
        v->valuedouble > 3.0e38) {
        mw_err_set_where(err, "%s", jpath);
        return MW_FAIL(err, MW_E_FORMAT, MW_ERR_OFF_NONE,
                       "expected a positive number within f32 range (%s)", why);
    }
    *out = v->valuedouble;
    *present = true;
    return MW_OK;
}

static enum mw_status cfg_bool(const cJSON *obj, const char *key, bool def, bool *out,
                               struct mw_err *err)
{
    const cJSON *v = member(obj, key);
    if (!v) {
        *out = def;
        return MW_OK;
    }
    if (!cJSON_IsBool(v)) {
        mw_err_set_where(err, "%s", key);
        return MW_FAIL(err, MW_E_FORMAT, MW_ERR_OFF_NONE, "expected true or false");
    }
    *out = cJSON_IsTrue(v);
    return MW_OK;
}

const cJSON *hf__cfg_member(const cJSON *obj, const char *key) { return member(obj, key); }

enum mw_status hf__cfg_fail(struct mw_err *err, enum mw_status code, const char *jpath,
                            const char *fmt, ...)
{
    char msg[320];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    return cfg_fail(err, code, jpath, "%s", msg);
}

enum mw_status hf__cfg_u32(const cJSON *obj, const char *prefix, const char *key, bool required,
                           uint32_t def, uint32_t lo, uint32_t hi, uint32_t *out,
                           const char *why, struct mw_err *err)
{
    return cfg_u32(obj, prefix, key, required, def, lo, hi, out, why, err);
}

enum mw_status hf__cfg_num(const cJSON *obj, const char *prefix, const char *key, bool required,
                           double *out, bool *present, const char *why, struct mw_err *err)
{
    return cfg_num(obj, prefix, key, required, out, present, why, err);
}

static enum mw_status cfg_rope(const cJSON *root, struct hf_config *c, struct mw_err *err)
{
    double d;
    bool present;
    enum mw_status s = cfg_num(root, "", "rope_theta", false, &d, &present, "RoPE base", err);
    if (s != MW_OK) return s;
    c->has_rope_theta = present;
    c->rope_theta = present ? (float)d : 10000.0f;

    c->rope_scaling = HF_ROPE_NONE;
    const cJSON *rs = member(root, "rope_scaling");
    if (!rs) return MW_OK;
    if (!cJSON_IsObject(rs))
        return cfg_fail(err, MW_E_FORMAT, "rope_scaling", "expected an object or null");
    const cJSON *t1 = member(rs, "rope_type"), *t2 = member(rs, "type");
    if ((t1 && !cJSON_IsString(t1)) || (t2 && !cJSON_IsString(t2)))
        return cfg_fail(err, MW_E_FORMAT, t1 && !cJSON_IsString(t1) ? "rope_scaling.rope_type" : "rope_scaling.type",
                        "expected a string");
    if (t1 && t2 && strcmp(t1->valuestring, t2->valuestring) != 0)
        return cfg_fail(err, MW_E_FORMAT, "rope_scaling.type",
                        "'%s' contradicts rope_scaling.rope_type '%s'", t2->valuestring,
                        t1->valuestring);
    const cJSON *t = t1 ? t1 : t2;
    if (!t)
        return cfg_fail(err, MW_E_FORMAT, "rope_scaling.rope_type",
                        "missing (rope_scaling is present)");
    const char *type = t->valuestring;
    const char *tpath = t1 ? "rope_scaling.rope_type" : "rope_scaling.type";
    if (strcmp(type, "default") == 0) return MW_OK;
    if (strcmp(type, "linear") == 0) {
        s = cfg_num(rs, "rope_scaling.", "factor", true, &d, &present, "linear RoPE scaling", err);
        if (s != MW_OK) return s;
        c->rope_scaling = HF_ROPE_LINEAR;
        c->rope_factor = d;
        return MW_OK;
    }
    if (strcmp(type, "llama3") == 0) {
        if (c->arch == HF_ARCH_QWEN2 || c->arch == HF_ARCH_QWEN2MOE)
            return cfg_fail(err, MW_E_UNSUPPORTED, tpath,
                            "'%s' RoPE scaling is not supported for %s", type, c->hf_arch_name);
        c->rope_scaling = HF_ROPE_LLAMA3;
        s = cfg_num(rs, "rope_scaling.", "factor", false, &d, &present, "llama3 RoPE", err);
        if (s != MW_OK) return s;
        c->rope_factor = present ? d : 8.0;
        s = cfg_num(rs, "rope_scaling.", "low_freq_factor", false, &d, &present, "llama3 RoPE",
                    err);
        if (s != MW_OK) return s;
        c->rope_low_freq_factor = present ? d : 1.0;
        s = cfg_num(rs, "rope_scaling.", "high_freq_factor", false, &d, &present, "llama3 RoPE",
                    err);
        if (s != MW_OK) return s;
        c->rope_high_freq_factor = present ? d : 4.0;
        /* HF reads it from rope_scaling; convert_hf_to_gguf.py from the top
         * level (default 8192). Take rope_scaling's, else the top level's. */
        const cJSON *o = member(rs, "original_max_position_embeddings");
        s = cfg_u32(o ? rs : root, o ? "rope_scaling." : "", "original_max_position_embeddings",
                    false, 8192, 1, UINT32_MAX, &c->rope_orig_ctx, "llama3 RoPE", err);
        if (s != MW_OK) return s;
        if (c->rope_low_freq_factor == c->rope_high_freq_factor)
            return cfg_fail(err, MW_E_FORMAT, "rope_scaling.high_freq_factor",
                            "equals low_freq_factor (the llama3 formula divides by their "
                            "difference)");
        return MW_OK;
    }
    return cfg_fail(err, MW_E_UNSUPPORTED, tpath,
                    "RoPE scaling '%s' is not supported (linear, llama3)", type);
}

// --- the Qwen3 / Gemma 2-3 / Phi-3 families ------------------------------------------------

/* Keys that belong to one family only: one of them in another family's
 * config is a mixed-up config (MW_E_FORMAT naming it). */
static const struct {
    const char *key;
    unsigned families; /* bit (1 << hf_arch) of the families that may have it */
} family_keys[] = {
#define FB(a) (1u << (a))
    {"query_pre_attn_scalar", FB(HF_ARCH_GEMMA2) | FB(HF_ARCH_GEMMA3)},
    {"attn_logit_softcapping", FB(HF_ARCH_GEMMA2) | FB(HF_ARCH_GEMMA3)},
    {"final_logit_softcapping", FB(HF_ARCH_GEMMA2) | FB(HF_ARCH_GEMMA3)},
    {"hidden_activation", FB(HF_ARCH_GEMMA2) | FB(HF_ARCH_GEMMA3)},
    {"cache_implementation", FB(HF_ARCH_GEMMA2) | FB(HF_ARCH_GEMMA3)},
    {"rope_local_base_freq", FB(HF_ARCH_GEMMA3)},
    {"sliding_window_pattern", FB(HF_ARCH_GEMMA3)},
    {"layer_types", FB(HF_ARCH_GEMMA3) | FB(HF_ARCH_QWEN3) | FB(HF_ARCH_QWEN3MOE)},
    {"use_sliding_window", FB(HF_ARCH_QWEN3) | FB(HF_ARCH_QWEN3MOE)},
    {"max_window_layers", FB(HF_ARCH_QWEN3) | FB(HF_ARCH_QWEN3MOE)},
    {"shared_expert_intermediate_size", FB(HF_ARCH_QWEN2MOE) | FB(HF_ARCH_QWEN3MOE)},
    {"original_max_position_embeddings", FB(HF_ARCH_PHI3)},
    {"partial_rotary_factor", FB(HF_ARCH_PHI3)},
    {"embd_pdrop", FB(HF_ARCH_PHI3)},
    {"resid_pdrop", FB(HF_ARCH_PHI3)},
#undef FB
};

/* Gemma3TextConfig's defaults (transformers), for the keys a
 * Gemma3ForConditionalGeneration text_config may leave out. */
#define G3_VOCAB 262208u
#define G3_HEADS 8u
#define G3_KV_HEADS 4u
#define G3_HEAD_DIM 256u
#define G3_CTX 131072u
#define G3_RMS_EPS 1e-6
#define G3_THETA 1000000.0
#define G3_THETA_SWA 10000.0
#define G3_PATTERN 6u

/* An optional number that may be null (absent) or a number >= 0; 0 means
 * absent. */
static enum mw_status cfg_opt_nonneg(const cJSON *obj, const char *prefix, const char *key,
                                     float *out, struct mw_err *err)
{
    char jpath[96];
    snprintf(jpath, sizeof jpath, "%s%s", prefix, key);
    const cJSON *v = member(obj, key);
    *out = 0.0f;
    if (!v) return MW_OK;
    if (!cJSON_IsNumber(v) || !isfinite(v->valuedouble) || v->valuedouble < 0 ||
        v->valuedouble > 3.0e38)
        return cfg_fail(err, MW_E_FORMAT, jpath, "expected null or a non-negative number");
    *out = (float)v->valuedouble;
    return MW_OK;
}

static enum mw_status cfg_float_list(const cJSON *rs, const char *key, float *out, uint32_t *n,
                                     struct mw_err *err)
{
    char jpath[96];
    snprintf(jpath, sizeof jpath, "rope_scaling.%s", key);
    const cJSON *v = member(rs, key);
    if (!v) return cfg_fail(err, MW_E_FORMAT, jpath, "missing (LongRoPE needs both factor lists)");
    if (!cJSON_IsArray(v)) return cfg_fail(err, MW_E_FORMAT, jpath, "expected an array of numbers");
    uint32_t k = 0;
    for (const cJSON *e = v->child; e; e = e->next) {
        if (!cJSON_IsNumber(e) || !isfinite(e->valuedouble) || !(e->valuedouble > 0) ||
            e->valuedouble > 3.0e38)
            return cfg_fail(err, MW_E_FORMAT, jpath, "element %u: expected a positive number", k);
        if (k >= HF_MAX_ROPE_FACTORS)
            return cfg_fail(err, MW_E_UNSUPPORTED, jpath, "more than %u factors",
                            HF_MAX_ROPE_FACTORS);
        out[k++] = (float)e->valuedouble;
    }
    *n = k;
    return MW_OK;
}

/* The activation: hidden_act / hidden_activation (both: they must agree). */
static enum mw_status cfg_act(const cJSON *obj, const char *prefix, struct hf_config *c,
                              bool gemma, struct mw_err *err)
{
    char jpath[96];
    const cJSON *a1 = member(obj, "hidden_act"), *a2 = member(obj, "hidden_activation");
    if ((a1 && !cJSON_IsString(a1)) || (a2 && !cJSON_IsString(a2))) {
        snprintf(jpath, sizeof jpath, "%s%s", prefix,
                 a1 && !cJSON_IsString(a1) ? "hidden_act" : "hidden_activation");
        return cfg_fail(err, MW_E_FORMAT, jpath, "expected a string");
    }
    if (a1 && a2 && strcmp(a1->valuestring, a2->valuestring) != 0) {
        snprintf(jpath, sizeof jpath, "%shidden_activation", prefix);
        return cfg_fail(err, MW_E_FORMAT, jpath, "'%s' contradicts hidden_act '%s'",
                        a2->valuestring, a1->valuestring);
    }
    const cJSON *a = a2 ? a2 : a1;
    snprintf(jpath, sizeof jpath, "%s%s", prefix, a2 ? "hidden_activation" : "hidden_act");
    if (gemma) {
        c->act = HF_ACT_GELU_TANH;
        if (a && strcmp(a->valuestring, "gelu_pytorch_tanh") != 0 &&
            strcmp(a->valuestring, "gelu_new") != 0 && strcmp(a->valuestring, "gelu") != 0)
            return cfg_fail(err, MW_E_UNSUPPORTED, jpath,
                            "'%s' is not supported for %s (gelu_pytorch_tanh)", a->valuestring,
                            c->hf_arch_name);
        return MW_OK;
    }
    c->act = HF_ACT_SILU;
    if (a && strcmp(a->valuestring, "silu") != 0)
        return cfg_fail(err, MW_E_UNSUPPORTED, jpath, "'%s' is not supported for %s (silu)",
                        a->valuestring, c->hf_arch_name);
    return MW_OK;
}

/* rope_scaling of the new families: null, linear (gemma3), longrope / su (phi3). */
static enum mw_status cfg_family_rope(const cJSON *obj, const char *prefix, struct hf_config *c,
                                      struct mw_err *err)
{
    char jpath[96];
    snprintf(jpath, sizeof jpath, "%srope_scaling", prefix);
    c->rope_scaling = HF_ROPE_NONE;
    const cJSON *rs = member(obj, "rope_scaling");
    if (!rs) return MW_OK;
    if (!cJSON_IsObject(rs)) return cfg_fail(err, MW_E_FORMAT, jpath, "expected an object or null");
    const cJSON *t1 = member(rs, "rope_type"), *t2 = member(rs, "type");
    if ((t1 && !cJSON_IsString(t1)) || (t2 && !cJSON_IsString(t2)))
        return cfg_fail(err, MW_E_FORMAT, jpath, "rope_type / type: expected a string");
    if (t1 && t2 && strcmp(t1->valuestring, t2->valuestring) != 0)
        return cfg_fail(err, MW_E_FORMAT, jpath, "type '%s' contradicts rope_type '%s'",
                        t2->valuestring, t1->valuestring);
    const cJSON *t = t1 ? t1 : t2;
    if (!t) return cfg_fail(err, MW_E_FORMAT, jpath, "rope_type: missing (rope_scaling is present)");
    const char *type = t->valuestring;
    if (strcmp(type, "default") == 0) return MW_OK;
    if (strcmp(type, "linear") == 0 && c->arch == HF_ARCH_GEMMA3) {
        const cJSON *f = member(rs, "factor");
        snprintf(jpath, sizeof jpath, "%srope_scaling.factor", prefix);
        if (!f || !cJSON_IsNumber(f) || !isfinite(f->valuedouble) || !(f->valuedouble > 0) ||
            f->valuedouble > 3.0e38)
            return cfg_fail(err, MW_E_FORMAT, jpath, "expected a positive number (linear RoPE scaling)");
        c->rope_scaling = HF_ROPE_LINEAR;
        c->rope_factor = f->valuedouble;
        return MW_OK;
    }
    if ((strcmp(type, "longrope") == 0 || strcmp(type, "su") == 0) && c->arch == HF_ARCH_PHI3) {
        uint32_t nl = 0, ns = 0;
        enum mw_status s = cfg_float_list(rs, "long_factor", c->rope_long, &nl, err);
        if (s == MW_OK) s = cfg_float_list(rs, "short_factor", c->rope_short, &ns, err);
        if (s != MW_OK) return s;
        if (nl != ns || nl * 2 != c->n_rot)
            return cfg_fail(err, MW_E_FORMAT, nl * 2 != c->n_rot ? "rope_scaling.long_factor"
                                                                  : "rope_scaling.short_factor",
                            "%u long and %u short factors; the RoPE dimensions (%u) need %u each",
                            nl, ns, c->n_rot, c->n_rot / 2);
        c->rope_scaling = HF_ROPE_LONGROPE;
        c->n_rope_factors = nl;
        /* convert_hf_to_gguf.py Phi3MiniModel: scale = max_pos / orig (Python
         * floats), attn_factor = sqrt(1 + log(scale) / log(orig)) if scale > 1 */
        const double scale = (double)c->n_ctx / (double)c->rope_orig_ctx;
        c->rope_attn_factor =
            scale > 1.0 ? (float)sqrt(1.0 + log(scale) / log((double)c->rope_orig_ctx)) : 1.0f;
        return MW_OK;
    }
    return cfg_fail(err, MW_E_UNSUPPORTED, jpath, "RoPE scaling '%s' is not supported for %s (%s)",
                    type, c->hf_arch_name,
                    c->arch == HF_ARCH_GEMMA3 ? "linear" : c->arch == HF_ARCH_PHI3 ? "longrope" : "none");
}

/* Qwen3, Gemma 2, Gemma 3 (and its ConditionalGeneration text model), Phi-3. */
static enum mw_status cfg_family(const cJSON *root, struct hf_config *c, struct mw_err *err)
{
    enum mw_status s;
    const enum hf_arch A = c->arch;
    const bool gemma = A == HF_ARCH_GEMMA2 || A == HF_ARCH_GEMMA3;
    const bool mm = strcmp(c->hf_arch_name, "Gemma3ForConditionalGeneration") == 0;
    const cJSON *obj = root;
    const char *pre = "";
    char jpath[96];

    /* model_type, text_config */
    const cJSON *mt = member(root, "model_type");
    const char *want_mt = A == HF_ARCH_GEMMA3 ? (mm ? "gemma3" : "gemma3_text") : arch_model_type[A];
    if (mt && (!cJSON_IsString(mt) || strcmp(mt->valuestring, want_mt) != 0))
        return cfg_fail(err, MW_E_FORMAT, "model_type", "'%s' contradicts architectures[0] '%s' ('%s')",
                        cJSON_IsString(mt) ? mt->valuestring : "(not a string)", c->hf_arch_name,
                        want_mt);
    const cJSON *tc = member(root, "text_config");
    if (mm) {
        if (!tc) return cfg_fail(err, MW_E_FORMAT, "text_config", "missing (%s keeps the text model's keys there)", c->hf_arch_name);
        if (!cJSON_IsObject(tc)) return cfg_fail(err, MW_E_FORMAT, "text_config", "expected an object");
        const cJSON *tmt = member(tc, "model_type");
        if (tmt && (!cJSON_IsString(tmt) || strcmp(tmt->valuestring, "gemma3_text") != 0))
            return cfg_fail(err, MW_E_FORMAT, "text_config.model_type",
                            "'%s' contradicts architectures[0] '%s' ('gemma3_text')",
                            cJSON_IsString(tmt) ? tmt->valuestring : "(not a string)",
                            c->hf_arch_name);
        /* the text model's keys belong in text_config */
        static const char *const text_keys[] = {"hidden_size", "num_hidden_layers",
                                                "intermediate_size", "num_attention_heads",
                                                "vocab_size", "head_dim", "sliding_window"};
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
    for (size_t i = 0; i < sizeof family_keys / sizeof family_keys[0]; i++) {
        if (family_keys[i].families & (1u << A)) continue;
        if (!cJSON_GetObjectItemCaseSensitive(obj, family_keys[i].key)) continue;
        snprintf(jpath, sizeof jpath, "%s%s", pre, family_keys[i].key);
        return cfg_fail(err, MW_E_FORMAT, jpath, "is not a %s key (a config of another family?)",
                        c->hf_arch_name);
    }

    /* sizes: Gemma3TextConfig defaults where a ConditionalGeneration
     * text_config leaves them out */
    s = cfg_u32(obj, pre, "hidden_size", true, 0, 1, 1u << 20, &c->n_embd, "embedding width", err);
    if (s == MW_OK)
        s = cfg_u32(obj, pre, "num_hidden_layers", true, 0, 1, 512, &c->n_layer,
                    "layer count; llama.cpp allows at most 512", err);
    if (s == MW_OK)
        s = cfg_u32(obj, pre, "intermediate_size", true, 0, 1, 1u << 22, &c->n_ff, "FFN width", err);
    if (s == MW_OK)
        s = cfg_u32(obj, pre, "num_attention_heads", !mm, G3_HEADS, 1, 1u << 16, &c->n_head,
                    "attention heads", err);
    if (s == MW_OK)
        s = cfg_u32(obj, pre, "num_key_value_heads", gemma && !mm, mm ? G3_KV_HEADS : c->n_head, 1,
                    1u << 16, &c->n_head_kv, "KV heads", err);
    if (s == MW_OK)
        s = cfg_u32(obj, pre, "vocab_size", !mm, G3_VOCAB, 1, 1u << 26, &c->n_vocab,
                    "vocabulary size", err);
    if (s == MW_OK)
        s = cfg_u32(obj, pre, "max_position_embeddings", !mm, G3_CTX, 1, UINT32_MAX, &c->n_ctx,
                    "training context length", err);
    if (s != MW_OK) return s;
    /* head_dim: Qwen3 and Gemma have one (Qwen3Config's default, 128, is not
     * hidden/heads; Gemma's is independent of it); Phi-3 never does */
    c->head_dim_explicit = member(obj, "head_dim") != NULL;
    if (A == HF_ARCH_PHI3 && c->head_dim_explicit) {
        snprintf(jpath, sizeof jpath, "%shead_dim", pre);
        return cfg_fail(err, MW_E_FORMAT, jpath, "is not a %s key (its head size is "
                        "hidden_size / num_attention_heads)", c->hf_arch_name);
    }
    s = cfg_u32(obj, pre, "head_dim", A != HF_ARCH_PHI3 && !mm, mm ? G3_HEAD_DIM : 0, 2, 1u << 16,
                &c->head_dim, "head size", err);
    if (s != MW_OK) return s;
    if (mm) c->head_dim_explicit = true; /* transformers' to_dict() writes the default */
    if (A == HF_ARCH_PHI3) {
        if (c->n_embd % c->n_head != 0)
            return cfg_fail(err, MW_E_FORMAT, "hidden_size",
                            "%u is not a multiple of num_attention_heads %u", c->n_embd, c->n_head);
        c->head_dim = c->n_embd / c->n_head;
    }
    if (c->head_dim % 2 != 0) {
        snprintf(jpath, sizeof jpath, "%s%s", pre, c->head_dim_explicit ? "head_dim" : "hidden_size");
        return cfg_fail(err, MW_E_FORMAT, jpath, "head size %u is odd (RoPE rotates pairs)", c->head_dim);
    }
    if (c->n_head % c->n_head_kv != 0) {
        snprintf(jpath, sizeof jpath, "%snum_key_value_heads", pre);
        return cfg_fail(err, MW_E_FORMAT, jpath,
                        "num_attention_heads %u is not a multiple of num_key_value_heads %u",
                        c->n_head, c->n_head_kv);
    }
    double d;
    bool present;
    s = cfg_num(obj, pre, "rms_norm_eps", A != HF_ARCH_GEMMA3, &d, &present, "RMSNorm epsilon", err);
    if (s != MW_OK) return s;
    c->rms_eps = present ? (float)d : (float)G3_RMS_EPS;
    s = cfg_act(obj, pre, c, gemma, err);
    if (s != MW_OK) return s;

    /* biases: none of these families has any */
    bool ab = false;
    const cJSON *abv = member(obj, "attention_bias");
    if (abv && !cJSON_IsBool(abv)) {
        snprintf(jpath, sizeof jpath, "%sattention_bias", pre);
        return cfg_fail(err, MW_E_FORMAT, jpath, "expected true or false");
    }
    ab = abv && cJSON_IsTrue(abv);
    if (ab) {
        snprintf(jpath, sizeof jpath, "%sattention_bias", pre);
        return cfg_fail(err, MW_E_UNSUPPORTED, jpath, "true is not supported for %s", c->hf_arch_name);
    }

    /* RoPE */
    c->n_rot = c->head_dim;
    if (A == HF_ARCH_PHI3) {
        s = cfg_u32(obj, pre, "original_max_position_embeddings", true, 0, 1, UINT32_MAX,
                    &c->rope_orig_ctx, "LongRoPE's original context; llama.cpp's converter needs it", err);
        if (s != MW_OK) return s;
        const cJSON *pr = member(obj, "partial_rotary_factor");
        if (pr) {
            if (!cJSON_IsNumber(pr) || !(pr->valuedouble > 0) || pr->valuedouble > 1)
                return cfg_fail(err, MW_E_FORMAT, "partial_rotary_factor", "expected a number in (0, 1]");
            /* int(rot_pct * n_embd) // n_head, as the converter */
            c->n_rot = (uint32_t)(pr->valuedouble * (double)c->n_embd) / c->n_head;
            if (c->n_rot == 0 || c->n_rot % 2 != 0)
                return cfg_fail(err, MW_E_FORMAT, "partial_rotary_factor",
                                "gives %u RoPE dimensions (must be even and > 0)", c->n_rot);
        }
    }
    const bool theta_required = A == HF_ARCH_PHI3;
    s = cfg_num(obj, pre, "rope_theta", theta_required, &d, &present, "RoPE base", err);
    if (s != MW_OK) return s;
    c->has_rope_theta = present || A == HF_ARCH_GEMMA3;
    c->rope_theta = present ? (float)d : A == HF_ARCH_GEMMA3 ? (float)G3_THETA : 10000.0f;
    if (A == HF_ARCH_GEMMA2) c->has_rope_theta = false; /* its converter does not write it */
    s = cfg_family_rope(obj, pre, c, err);
    if (s != MW_OK) return s;
    if (A == HF_ARCH_GEMMA3) {
        s = cfg_num(obj, pre, "rope_local_base_freq", false, &d, &present, "RoPE base of the sliding layers", err);
        if (s != MW_OK) return s;
        c->has_rope_theta_swa = true;
        c->rope_theta_swa = present ? (float)d : (float)G3_THETA_SWA;
    }

    /* sliding window */
    const cJSON *sw = member(obj, "sliding_window");
    snprintf(jpath, sizeof jpath, "%ssliding_window", pre);
    if (gemma) {
        s = cfg_u32(obj, pre, "sliding_window", true, 0, 1, UINT32_MAX, &c->n_swa,
                    "the window of the local attention layers", err);
        if (s != MW_OK) return s;
        c->has_n_swa = true;
        c->swa_pattern = A == HF_ARCH_GEMMA2 ? 2 : G3_PATTERN;
        if (A == HF_ARCH_GEMMA3) {
            uint32_t pat = G3_PATTERN;
            s = cfg_u32(obj, pre, "sliding_window_pattern", false, G3_PATTERN, 1, 1u << 16, &pat,
                        "every n-th layer is global", err);
            if (s != MW_OK) return s;
            if (pat == 1) {
                c->has_n_swa = false; /* no sliding layers: no window key */
                c->swa_pattern = 1;
            } else if (pat != G3_PATTERN) {
                snprintf(jpath, sizeof jpath, "%ssliding_window_pattern", pre);
                return cfg_fail(err, MW_E_UNSUPPORTED, jpath,
                                "%u: llama.cpp's gemma3 runtime assumes 6 (its converter does not "
                                "write the pattern)", pat);
            }
            const cJSON *lt = member(obj, "layer_types");
            if (lt) {
                snprintf(jpath, sizeof jpath, "%slayer_types", pre);
                if (!cJSON_IsArray(lt) || (uint32_t)cJSON_GetArraySize(lt) != c->n_layer)
                    return cfg_fail(err, MW_E_FORMAT, jpath,
                                    "expected an array of num_hidden_layers (%u) strings", c->n_layer);
                uint32_t il = 0;
                for (const cJSON *e = lt->child; e; e = e->next, il++) {
                    const bool slide = c->swa_pattern > 1 && il % c->swa_pattern < c->swa_pattern - 1;
                    const char *want = slide ? "sliding_attention" : "full_attention";
                    if (!cJSON_IsString(e) || strcmp(e->valuestring, want) != 0) {
                        snprintf(jpath, sizeof jpath, "%slayer_types[%u]", pre, il);
                        return cfg_fail(err, MW_E_UNSUPPORTED, jpath,
                                        "expected '%s' (llama.cpp's gemma3 layout: every %u-th "
                                        "layer global)", want, c->swa_pattern);
                    }
                }
            }
        }
        if (A == HF_ARCH_GEMMA2 && member(obj, "layer_types")) {
            snprintf(jpath, sizeof jpath, "%slayer_types", pre);
            return cfg_fail(err, MW_E_FORMAT, jpath, "is not a %s key", c->hf_arch_name);
        }
    } else if (A == HF_ARCH_PHI3) {
        /* written as is, 0 when null (llama.cpp: Phi-4 has none) */
        s = cfg_u32(obj, pre, "sliding_window", false, 0, 0, UINT32_MAX, &c->n_swa, "sliding window", err);
        if (s != MW_OK) return s;
        c->has_n_swa = true;
        c->swa_pattern = 1;
    } else { /* qwen3: the window is off unless use_sliding_window */
        bool use = false;
        s = cfg_bool(obj, "use_sliding_window", false, &use, err);
        if (s != MW_OK) return s;
        if (use)
            return cfg_fail(err, MW_E_UNSUPPORTED, "use_sliding_window",
                            "true is not supported (llama.cpp's qwen3 ignores it)");
        (void)sw;
    }

    /* Gemma's attention scale and soft-capping */
    if (gemma) {
        float qs = 0;
        s = cfg_opt_nonneg(obj, pre, "query_pre_attn_scalar", &qs, err);
        if (s != MW_OK) return s;
        if (!member(obj, "query_pre_attn_scalar") && !mm) {
            snprintf(jpath, sizeof jpath, "%squery_pre_attn_scalar", pre);
            return cfg_fail(err, MW_E_FORMAT, jpath, "missing (the attention scale of %s)", c->hf_arch_name);
        }
        if (mm && !member(obj, "query_pre_attn_scalar")) qs = 256.0f;
        c->query_pre_attn_scalar = qs;
        /* llama.cpp ignores the key: it scales by 1/sqrt(head_dim), or for
         * the 27B models (46 / 62 layers) by 1/sqrt(hidden/heads) */
        const bool big = (A == HF_ARCH_GEMMA2 && c->n_layer == 46) || (A == HF_ARCH_GEMMA3 && c->n_layer == 62);
        const float used = big ? (float)(c->n_embd / c->n_head) : (float)c->head_dim;
        if (qs != used) {
            snprintf(jpath, sizeof jpath, "%squery_pre_attn_scalar", pre);
            return cfg_fail(err, MW_E_UNSUPPORTED, jpath,
                            "%g: llama.cpp scales queries by 1/sqrt(%g) for this model", (double)qs,
                            (double)used);
        }
        s = cfg_opt_nonneg(obj, pre, "final_logit_softcapping", &c->final_softcap, err);
        if (s == MW_OK) s = cfg_opt_nonneg(obj, pre, "attn_logit_softcapping", &c->attn_softcap, err);
        if (s != MW_OK) return s;
        if (A == HF_ARCH_GEMMA2) {
            static const char *const keys[] = {"attn_logit_softcapping", "final_logit_softcapping"};
            for (int i = 0; i < 2; i++)
                if (!member(obj, keys[i])) {
                    snprintf(jpath, sizeof jpath, "%s%s", pre, keys[i]);
                    return cfg_fail(err, MW_E_FORMAT, jpath, "missing (%s soft-caps its logits)", c->hf_arch_name);
                }
        }
        if (A == HF_ARCH_GEMMA3 && c->attn_softcap != 0.0f) {
            snprintf(jpath, sizeof jpath, "%sattn_logit_softcapping", pre);
            return cfg_fail(err, MW_E_FORMAT, jpath, "must be null for %s (Gemma 3 has no attention soft-capping)", c->hf_arch_name);
        }
    }

    /* tied embeddings: Gemma always (lm_head is never used); Qwen3 and Phi-3
     * per key (default false, as their transformers configs) */
    const cJSON *tie = member(obj, "tie_word_embeddings");
    if (!tie && mm) tie = member(root, "tie_word_embeddings");
    if (tie && !cJSON_IsBool(tie))
        return cfg_fail(err, MW_E_FORMAT, "tie_word_embeddings", "expected true or false");
    if (gemma) {
        if (tie && !cJSON_IsTrue(tie))
            return cfg_fail(err, MW_E_UNSUPPORTED, "tie_word_embeddings",
                            "false is not supported for %s (llama.cpp uses the embeddings as the "
                            "output matrix)", c->hf_arch_name);
        c->tie_embeddings = true;
    } else {
        c->tie_embeddings = tie && cJSON_IsTrue(tie);
    }
    const cJSON *td = member(root, "torch_dtype");
    if (td && cJSON_IsString(td)) snprintf(c->torch_dtype, sizeof c->torch_dtype, "%s", td->valuestring);
    return MW_OK;
}

/* The experts of Qwen2MoeForCausalLM, Qwen3MoeForCausalLM and
 * MixtralForCausalLM. Refused, naming the key, what llama.cpp's
 * converter or runtime would get wrong: dense layers among the sparse ones
 * (decoder_sparse_step > 1, mlp_only_layers: the converter cannot map their
 * mlp, the runtime has experts in every layer), a norm_topk_prob other than
 * what the arch's graph does (qwen3moe renormalizes the top-k weights,
 * qwen2moe does not), num_experts_per_tok > num_experts. */
#define HF_MAX_EXPERTS 1024u /* llama.cpp's LLAMA_MAX_EXPERTS */
static enum mw_status cfg_moe(const cJSON *obj, struct hf_config *c, struct mw_err *err)
{
    const enum hf_arch A = c->arch;
    const bool mixtral = A == HF_ARCH_MIXTRAL;
    const char *ne_key = mixtral ? "num_local_experts" : "num_experts";
    const char *other = mixtral ? "num_experts" : "num_local_experts";
    if (member(obj, other))
        return cfg_fail(err, MW_E_FORMAT, other, "is not a %s key (its expert count is %s)",
                        c->hf_arch_name, ne_key);
    enum mw_status s = cfg_u32(obj, "", ne_key, true, 0, 1, HF_MAX_EXPERTS, &c->n_expert,
                               "expert count; llama.cpp allows at most 1024", err);
    if (s == MW_OK)
        s = cfg_u32(obj, "", "num_experts_per_tok", true, 0, 1, HF_MAX_EXPERTS, &c->n_expert_used,
                    "experts used per token", err);
    if (s != MW_OK) return s;
    if (c->n_expert_used > c->n_expert)
        return cfg_fail(err, MW_E_FORMAT, "num_experts_per_tok",
                        "%u is more than %s %u (experts used per token out of the experts)",
                        c->n_expert_used, ne_key, c->n_expert);
    c->norm_topk_prob = true;
    if (mixtral) {
        c->n_ff_exp = c->n_ff; /* Mixtral's experts are intermediate_size wide */
        return MW_OK;
    }
    s = cfg_u32(obj, "", "moe_intermediate_size", true, 0, 1, 1u << 22, &c->n_ff_exp,
                "one expert's FFN width", err);
    if (s != MW_OK) return s;
    c->has_n_ff_exp = true;
    if (A == HF_ARCH_QWEN2MOE || member(obj, "shared_expert_intermediate_size")) {
        s = cfg_u32(obj, "", "shared_expert_intermediate_size", A == HF_ARCH_QWEN2MOE, 0, 1,
                    1u << 22, &c->n_ff_shexp, "the shared expert's FFN width", err);
        if (s != MW_OK) return s;
    }
    uint32_t step = 1;
    s = cfg_u32(obj, "", "decoder_sparse_step", false, 1, 1, 1u << 16, &step,
                "every n-th layer has experts", err);
    if (s != MW_OK) return s;
    if (step != 1) /* transformers: layer i has experts iff (i + 1) % step == 0 */
        return cfg_fail(err, MW_E_UNSUPPORTED, "decoder_sparse_step",
                        "%u: layer 0 and every layer i with (i + 1) %% %u != 0 would have a dense "
                        "MLP; llama.cpp's %s has experts in every layer (its converter cannot "
                        "map a dense layer)", step, step, arch_short[A]);
    const cJSON *mol = member(obj, "mlp_only_layers");
    if (mol) {
        if (!cJSON_IsArray(mol))
            return cfg_fail(err, MW_E_FORMAT, "mlp_only_layers", "expected an array of layer indices");
        int k = 0;
        for (const cJSON *e = mol->child; e; e = e->next, k++) {
            char jpath[64];
            snprintf(jpath, sizeof jpath, "mlp_only_layers[%d]", k);
            uint64_t u;
            if (!hf__util_json_u64(e, &u))
                return cfg_fail(err, MW_E_FORMAT, jpath, "expected a layer index");
            return cfg_fail(err, MW_E_UNSUPPORTED, jpath,
                            "layer %llu with a dense MLP: llama.cpp's %s has experts in every "
                            "layer (its converter cannot map a dense layer)",
                            (unsigned long long)u, arch_short[A]);
        }
    }
    const cJSON *nt = member(obj, "norm_topk_prob");
    if (nt && !cJSON_IsBool(nt))
        return cfg_fail(err, MW_E_FORMAT, "norm_topk_prob", "expected true or false");
    c->norm_topk_prob = nt && cJSON_IsTrue(nt); /* transformers' default: false */
    const bool want = A == HF_ARCH_QWEN3MOE;
    if (c->norm_topk_prob != want)
        return cfg_fail(err, MW_E_UNSUPPORTED, "norm_topk_prob",
                        "%s: llama.cpp's %s %s the top-k router weights", nt ? (want ? "false" : "true") : "absent (false)",
                        arch_short[A], want ? "always renormalizes" : "never renormalizes");
    return MW_OK;
}

enum mw_status hf_config_parse(const char *json, size_t len, const char *name,
                               struct hf_config *c, struct mw_err *err)
{
    memset(c, 0, sizeof *c);
    cJSON *root;
    enum mw_status s = hf__json_parse(json, len, name, false, &root, err);
    if (s != MW_OK) return s;
    if (!cJSON_IsObject(root)) {
        s = MW_FAIL(err, MW_E_FORMAT, 0, "expected a JSON object at the top level");
        goto out;
    }

    /* architecture */
    const cJSON *archs = member(root, "architectures");
    if (!archs) {
        s = cfg_fail(err, MW_E_FORMAT, "architectures", "missing (which model class is this?)");
        goto out;
    }
    if (!cJSON_IsArray(archs) || !cJSON_IsString(archs->child)) {
        s = cfg_fail(err, MW_E_FORMAT, "architectures", "expected a non-empty array of strings");
        goto out;
    }
    const char *an = archs->child->valuestring;
    bool found = false;
    for (size_t i = 0; i < sizeof arch_names / sizeof arch_names[0]; i++)
        if (strcmp(an, arch_names[i].hf_name) == 0) {
            c->arch = arch_names[i].arch;
            found = true;
        }
    if (!found) {
        s = cfg_fail(err, MW_E_UNSUPPORTED, "architectures[0]",
                     "'%s' is not supported (LlamaForCausalLM, MistralForCausalLM, "
                     "Qwen2ForCausalLM, Qwen3ForCausalLM, Gemma2ForCausalLM, Gemma3ForCausalLM, "
                     "Gemma3ForConditionalGeneration, Phi3ForCausalLM, Qwen2MoeForCausalLM, "
                     "Qwen3MoeForCausalLM, MixtralForCausalLM, Qwen3_5ForCausalLM, "
                     "Qwen3_5ForConditionalGeneration, Qwen3_5MoeForCausalLM, "
                     "Qwen3_5MoeForConditionalGeneration, Qwen3NextForCausalLM, "
                     "Gemma4ForCausalLM, Gemma4ForConditionalGeneration, GptOssForCausalLM)", an);
        goto out;
    }
    snprintf(c->hf_arch_name, sizeof c->hf_arch_name, "%s", an);
    c->has_n_ff = true; /* required by every family but qwen35moe's */
    c->gguf_arch = arch_gguf[c->arch];
    if (hf_arch_is_delta_net(c->arch)) {
        s = hf__cfg_qwen35(root, c, err);
        goto out;
    }
    if (c->arch == HF_ARCH_GEMMA4) {
        s = hf__cfg_gemma4(root, c, err);
        goto out;
    }
    if (c->arch == HF_ARCH_GPTOSS) {
        s = hf__cfg_gptoss(root, c, err);
        goto out;
    }
    if (c->arch == HF_ARCH_QWEN3 || c->arch == HF_ARCH_GEMMA2 || c->arch == HF_ARCH_GEMMA3 ||
        c->arch == HF_ARCH_PHI3 || c->arch == HF_ARCH_QWEN3MOE) {
        s = cfg_family(root, c, err);
        if (s == MW_OK && hf_arch_is_moe(c->arch)) s = cfg_moe(root, c, err);
        goto out;
    }
    if (member(root, "text_config")) {
        s = cfg_fail(err, MW_E_FORMAT, "text_config",
                     "present, but %s is not a multimodal architecture", an);
        goto out;
    }
    const cJSON *mt = member(root, "model_type");
    if (mt) {
        if (!cJSON_IsString(mt)) {
            s = cfg_fail(err, MW_E_FORMAT, "model_type", "expected a string");
            goto out;
        }
        if (strcmp(mt->valuestring, arch_model_type[c->arch]) != 0) {
            s = cfg_fail(err, MW_E_FORMAT, "model_type", "'%s' contradicts architectures[0] '%s'",
                         mt->valuestring, an);
            goto out;
        }
    }

    /* hyper-parameters */
    s = cfg_u32(root, "", "hidden_size", true, 0, 1, 1u << 20, &c->n_embd, "embedding width", err);
    if (s == MW_OK)
        s = cfg_u32(root, "", "num_hidden_layers", true, 0, 1, 512, &c->n_layer,
                    "layer count; llama.cpp allows at most 512", err);
    if (s == MW_OK)
        s = cfg_u32(root, "", "intermediate_size", true, 0, 1, 1u << 22, &c->n_ff, "FFN width", err);
    if (s == MW_OK)
        s = cfg_u32(root, "", "num_attention_heads", true, 0, 1, 1u << 16, &c->n_head,
                    "attention heads", err);
    if (s == MW_OK)
        s = cfg_u32(root, "", "num_key_value_heads", false, c->n_head, 1, 1u << 16, &c->n_head_kv,
                    "KV heads", err);
    if (s == MW_OK)
        s = cfg_u32(root, "", "vocab_size", true, 0, 1, 1u << 26, &c->n_vocab, "vocabulary size",
                    err);
    if (s == MW_OK)
        s = cfg_u32(root, "", "max_position_embeddings", true, 0, 1, UINT32_MAX, &c->n_ctx,
                    "training context length", err);
    if (s != MW_OK) goto out;
    c->head_dim_explicit = member(root, "head_dim") != NULL;
    s = cfg_u32(root, "", "head_dim", false, 0, 1, 1u << 16, &c->head_dim, "head size", err);
    if (s != MW_OK) goto out;
    char a[32], b[32];
    if (!c->head_dim_explicit) {
        if (c->n_embd % c->n_head != 0) {
            snprintf(a, sizeof a, "%u", c->n_embd);
            snprintf(b, sizeof b, "%u", c->n_head);
            s = cfg_fail(err, MW_E_FORMAT, "hidden_size",
                         "%s is not a multiple of num_attention_heads %s (and head_dim is absent)",
                         a, b);
            goto out;
        }
        c->head_dim = c->n_embd / c->n_head;
    }
    if (c->head_dim % 2 != 0) {
        snprintf(a, sizeof a, "%u", c->head_dim);
        s = cfg_fail(err, MW_E_FORMAT, c->head_dim_explicit ? "head_dim" : "hidden_size",
                     "head size %s is odd (RoPE rotates pairs)%s", a, "");
        goto out;
    }
    if (c->n_head % c->n_head_kv != 0) {
        snprintf(a, sizeof a, "%u", c->n_head);
        snprintf(b, sizeof b, "%u", c->n_head_kv);
        s = cfg_fail(err, MW_E_FORMAT, "num_key_value_heads",
                     "num_attention_heads %s is not a multiple of num_key_value_heads %s", a, b);
        goto out;
    }
    double d;
    bool present;
    s = cfg_num(root, "", "rms_norm_eps", true, &d, &present, "RMSNorm epsilon", err);
    if (s != MW_OK) goto out;
    c->rms_eps = (float)d;
    const cJSON *act = member(root, "hidden_act");
    if (act && (!cJSON_IsString(act) || strcmp(act->valuestring, "silu") != 0)) {
        s = cfg_fail(err, MW_E_UNSUPPORTED, "hidden_act", "'%s' is not supported (silu)",
                     cJSON_IsString(act) ? act->valuestring : "(not a string)");
        goto out;
    }
    c->n_rot = c->head_dim; /* as the families' (cfg_family) */
    s = cfg_rope(root, c, err);
    if (s != MW_OK) goto out;
    s = cfg_bool(root, "tie_word_embeddings", false, &c->tie_embeddings, err);
    if (s == MW_OK && c->tie_embeddings && c->arch == HF_ARCH_QWEN2MOE)
        s = cfg_fail(err, MW_E_UNSUPPORTED, "tie_word_embeddings",
                     "true is not supported for %s (llama.cpp's qwen2moe requires "
                     "output.weight)", c->hf_arch_name);
    if (s == MW_OK)
        s = cfg_bool(root, "attention_bias", c->arch == HF_ARCH_QWEN2 || c->arch == HF_ARCH_QWEN2MOE,
                     &c->attention_bias, err);
    if (s == MW_OK) s = cfg_bool(root, "mlp_bias", false, &c->mlp_bias, err);
    if (s != MW_OK) goto out;
    if (c->arch == HF_ARCH_QWEN2 || c->arch == HF_ARCH_QWEN2MOE) {
        /* Qwen2 always has q/k/v biases and never an o_proj or MLP bias. */
        c->attention_bias = true;
        if (c->mlp_bias) {
            s = cfg_fail(err, MW_E_UNSUPPORTED, "mlp_bias", "true is not supported for %s",
                         c->hf_arch_name);
            goto out;
        }
    }
    const cJSON *td = member(root, "torch_dtype");
    if (td && cJSON_IsString(td)) snprintf(c->torch_dtype, sizeof c->torch_dtype, "%s", td->valuestring);
    s = hf_arch_is_moe(c->arch) ? cfg_moe(root, c, err) : MW_OK;
out:
    if (s == MW_OK) s = hf__cfg_quant(root, c, err);
    cJSON_Delete(root);
    return s;
}

enum mw_status hf_config_load(const char *path, struct hf_config *cfg, struct mw_err *err)
{
    char *buf;
    size_t len;
    enum mw_status s = hf__util_read_file(path, 16u << 20, &buf, &len, err);
    if (s != MW_OK) return s;
    s = hf_config_parse(buf, len, path, cfg, err);
    free(buf);
    return s;
}
