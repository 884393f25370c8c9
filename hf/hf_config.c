/* hf/hf_config.c — config.json (cJSON), plus the small file and JSON helpers
 * the other hf/ sources share. */
#define _POSIX_C_SOURCE 200809L
#include "hf/hf_int.h"

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

// --- files -------------------------------------------------------------------

char *hf__util_path_join(const char *dir, const char *name)
{
    size_t a = strlen(dir), b = strlen(name);
    while (a > 1 && dir[a - 1] == '/') a--;
    if (a > SIZE_MAX - b - 2) return NULL;
    char *p = malloc(a + b + 2);
    if (!p) return NULL;
    memcpy(p, dir, a);
    p[a] = '/';
    memcpy(p + a + 1, name, b);
    p[a + b + 1] = '\0';
    return p;
}

bool hf__util_exists(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0;
}

void hf__util_basename(const char *path, char *buf, size_t n)
{
    if (n == 0) return;
    size_t len = strlen(path);
    while (len > 1 && path[len - 1] == '/') len--;
    size_t start = len;
    while (start > 0 && path[start - 1] != '/') start--;
    size_t k = len - start;
    if (k >= n) k = n - 1;
    memcpy(buf, path + start, k);
    buf[k] = '\0';
    if (k == 0 && n > 1) snprintf(buf, n, "%s", len ? "/" : "");
}

enum mw_status hf__util_read_file(const char *path, uint64_t max, char **buf, size_t *len,
                             struct mw_err *err)
{
    *buf = NULL;
    *len = 0;
    mw_err_set_path(err, path);
    /* open(O_NONBLOCK) + fdopen rather than fopen: fopen of a FIFO planted
     * as config.json (or tokenizer.json) blocks until a writer appears, i.e.
     * forever; this way the S_ISREG check below rejects it at once. */
    const int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
    FILE *f = fd >= 0 ? fdopen(fd, "rb") : NULL;
    if (!f) {
        const int e = errno;
        if (fd >= 0) close(fd);
        if (e == ENOENT) return MW_FAIL(err, MW_E_FORMAT, MW_ERR_OFF_NONE, "file does not exist");
        return MW_FAIL(err, MW_E_IO, MW_ERR_OFF_NONE, "cannot open: %s", strerror(e));
    }
    struct stat st;
    if (fstat(fileno(f), &st) != 0 || !S_ISREG(st.st_mode)) {
        fclose(f);
        return MW_FAIL(err, MW_E_FORMAT, MW_ERR_OFF_NONE, "not a regular file");
    }
    if ((uint64_t)st.st_size > max) {
        fclose(f);
        return MW_FAIL(err, MW_E_FORMAT, MW_ERR_OFF_NONE,
                       "file is %llu bytes, more than the %llu this file may have",
                       (unsigned long long)st.st_size, (unsigned long long)max);
    }
    size_t n = (size_t)st.st_size;
    char *p = malloc(n + 1);
    if (!p) {
        fclose(f);
        return MW_FAIL(err, MW_E_NOMEM, MW_ERR_OFF_NONE, "cannot allocate %zu bytes", n + 1);
    }
    size_t got = n ? fread(p, 1, n, f) : 0;
    int bad = ferror(f);
    fclose(f);
    if (bad || got != n) {
        free(p);
        return MW_FAIL(err, MW_E_IO, MW_ERR_OFF_NONE, "read error");
    }
    p[n] = '\0';
    *buf = p;
    *len = n;
    return MW_OK;
}

// --- config.json -------------------------------------------------------------

static const struct {
    const char *hf_name;
    enum hf_arch arch;
} arch_names[] = {
    {"LlamaForCausalLM", HF_ARCH_LLAMA},
    {"LLaMAForCausalLM", HF_ARCH_LLAMA},
    {"MistralForCausalLM", HF_ARCH_MISTRAL},
    {"Qwen2ForCausalLM", HF_ARCH_QWEN2},
};

static const char *const arch_short[HF_ARCH_COUNT] = {
    [HF_ARCH_LLAMA] = "llama",
    [HF_ARCH_MISTRAL] = "mistral",
    [HF_ARCH_QWEN2] = "qwen2",
};

static const char *const arch_gguf[HF_ARCH_COUNT] = {
    [HF_ARCH_LLAMA] = "llama",
    [HF_ARCH_MISTRAL] = "llama",
    [HF_ARCH_QWEN2] = "qwen2",
};

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
        if (c->arch == HF_ARCH_QWEN2)
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
                     "Qwen2ForCausalLM)", an);
        goto out;
    }
    snprintf(c->hf_arch_name, sizeof c->hf_arch_name, "%s", an);
    c->gguf_arch = arch_gguf[c->arch];
    const cJSON *mt = member(root, "model_type");
    if (mt) {
        if (!cJSON_IsString(mt)) {
            s = cfg_fail(err, MW_E_FORMAT, "model_type", "expected a string");
            goto out;
        }
        if (strcmp(mt->valuestring, arch_short[c->arch]) != 0) {
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
    s = cfg_rope(root, c, err);
    if (s != MW_OK) goto out;
    s = cfg_bool(root, "tie_word_embeddings", false, &c->tie_embeddings, err);
    if (s == MW_OK) s = cfg_bool(root, "attention_bias", c->arch == HF_ARCH_QWEN2, &c->attention_bias, err);
    if (s == MW_OK) s = cfg_bool(root, "mlp_bias", false, &c->mlp_bias, err);
    if (s != MW_OK) goto out;
    if (c->arch == HF_ARCH_QWEN2) {
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
    s = MW_OK;
out:
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
