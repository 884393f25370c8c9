/* hf/hf_inspect.c — describe an HF checkpoint dir or a .safetensors file as
 * text or JSON, through a caller callback (library code never prints). */
#define _POSIX_C_SOURCE 200809L
#include "hf/hf_int.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

struct out {
    hf_emit_fn emit;
    void *ud;
};

static void put(struct out *o, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void put(struct out *o, const char *fmt, ...)
{
    char small[512];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(small, sizeof small, fmt, ap);
    va_end(ap);
    if (n < 0) return;
    if ((size_t)n < sizeof small) {
        o->emit(o->ud, small);
        return;
    }
    char *big = malloc((size_t)n + 1);
    if (!big) return;
    va_start(ap, fmt);
    vsnprintf(big, (size_t)n + 1, fmt, ap);
    va_end(ap);
    o->emit(o->ud, big);
    free(big);
}

/* JSON string literal of s (escaped; non-ASCII bytes passed through: the
 * inputs were validated as UTF-8 or come from cJSON). */
static void put_jstr(struct out *o, const char *s)
{
    char buf[256];
    size_t k = 0;
    buf[k++] = '"';
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        if (k > sizeof buf - 8) {
            buf[k] = '\0';
            o->emit(o->ud, buf);
            k = 0;
        }
        unsigned char ch = *p;
        if (ch == '"' || ch == '\\') {
            buf[k++] = '\\';
            buf[k++] = (char)ch;
        } else if (ch < 0x20) {
            k += (size_t)snprintf(buf + k, sizeof buf - k, "\\u%04x", ch);
        } else {
            buf[k++] = (char)ch;
        }
    }
    buf[k++] = '"';
    buf[k] = '\0';
    o->emit(o->ud, buf);
}

static void put_shape(struct out *o, const uint64_t *d, uint32_t n)
{
    put(o, "[");
    for (uint32_t i = 0; i < n; i++) put(o, "%s%llu", i ? ", " : "", (unsigned long long)d[i]);
    put(o, "]");
}

bool hf_inspect_accepts(const char *path)
{
    struct stat st;
    if (stat(path, &st) == 0 && S_ISDIR(st.st_mode)) return true;
    size_t n = strlen(path);
    static const char a[] = ".safetensors", b[] = ".safetensors.index.json";
    return (n >= sizeof a - 1 && strcmp(path + n - (sizeof a - 1), a) == 0) ||
           (n >= sizeof b - 1 && strcmp(path + n - (sizeof b - 1), b) == 0);
}

// --- one safetensors file ----------------------------------------------------------

static void st_tensors(struct out *o, const struct hf_st *st, bool json, const char *indent)
{
    uint64_t n = hf_st_count(st);
    for (uint64_t i = 0; i < n; i++) {
        const struct hf_st_tensor *t = hf_st_get(st, i);
        if (json) {
            put(o, "%s%s{\"name\": ", i ? ",\n" : "", indent);
            put_jstr(o, t->name);
            put(o, ", \"dtype\": \"%s\", \"shape\": ", hf_dtype_name(t->dtype));
            put_shape(o, t->shape, t->n_dims);
            put(o, ", \"offset\": %llu, \"nbytes\": %llu}", (unsigned long long)t->file_off,
                (unsigned long long)t->nbytes);
        } else {
            put(o, "%s%-48s %-5s ", indent, t->name, hf_dtype_name(t->dtype));
            put_shape(o, t->shape, t->n_dims);
            put(o, "  off %llu  %llu bytes\n", (unsigned long long)t->file_off,
                (unsigned long long)t->nbytes);
        }
    }
}

static enum mw_status inspect_file(struct out *o, const char *path, bool json, struct mw_err *err)
{
    struct hf_st *st;
    enum mw_status s = hf_st_open(path, &st, err);
    if (s != MW_OK) return s;
    const uint64_t data = hf_st_file_size(st) - 8 - hf_st_header_len(st);
    if (json) {
        put(o, "{\"format\": \"safetensors\", \"path\": ");
        put_jstr(o, path);
        put(o, ", \"file_size\": %llu, \"header_bytes\": %llu, \"data_bytes\": %llu, "
               "\"n_tensors\": %llu,\n \"metadata\": {",
            (unsigned long long)hf_st_file_size(st), (unsigned long long)hf_st_header_len(st),
            (unsigned long long)data, (unsigned long long)hf_st_count(st));
        for (uint64_t i = 0; i < hf_st_meta_count(st); i++) {
            const char *k, *v;
            hf_st_meta_get(st, i, &k, &v);
            put(o, "%s", i ? ", " : "");
            put_jstr(o, k);
            put(o, ": ");
            put_jstr(o, v);
        }
        put(o, "},\n \"tensors\": [\n");
        st_tensors(o, st, true, "  ");
        put(o, "\n ]}\n");
    } else {
        put(o, "safetensors: %s\n", path);
        put(o, "size: %llu bytes (header %llu, data %llu), %llu tensors\n",
            (unsigned long long)hf_st_file_size(st), (unsigned long long)hf_st_header_len(st),
            (unsigned long long)data, (unsigned long long)hf_st_count(st));
        if (hf_st_meta_count(st)) put(o, "metadata:\n");
        for (uint64_t i = 0; i < hf_st_meta_count(st); i++) {
            const char *k, *v;
            hf_st_meta_get(st, i, &k, &v);
            put(o, "  %s = %s\n", k, v);
        }
        put(o, "tensors (by name):\n");
        st_tensors(o, st, false, "  ");
    }
    hf_st_close(st);
    return MW_OK;
}

// --- a checkpoint directory --------------------------------------------------------

static const char *rope_name(enum hf_rope_scaling r)
{
    return r == HF_ROPE_LINEAR ? "linear" : r == HF_ROPE_LLAMA3 ? "llama3"
         : r == HF_ROPE_LONGROPE ? "longrope" : r == HF_ROPE_YARN ? "yarn" : "none";
}

/* The source of plan entry e: its tensor's name, or for stacked experts
 * "model.layers.N.mlp.experts.{0..K-1}.down_proj.weight" */
static void plan_src_name(const struct hf_plan_tensor *e, char *buf, size_t n)
{
    if (!e->src) {
        snprintf(buf, n, "(computed from rope_scaling)");
        return;
    }
    if (e->n_src == 0) {
        snprintf(buf, n, "%s", e->src->name);
        return;
    }
    /* "...experts.0.<proj>" -> "...experts.{0..K-1}.<proj>" */
    const char *nm = e->src->name, *x = strstr(nm, ".experts.0.");
    if (!x) { /* a fused 3-D source (transformers >= 5 layout) */
        snprintf(buf, n, "%s%s", nm,
                 !strstr(nm, "gate_up") ? "" : strstr(e->name, "gate_exps") ? " (gate half)"
                                                                             : " (up half)");
        return;
    }
    const int pre = (int)(x - nm) + (int)strlen(".experts.");
    snprintf(buf, n, "%.*s{0..%u}%s", pre, nm, e->n_src - 1, x + strlen(".experts.0"));
}

/* The scale layout of a quantized source (quantization_config and the
 * scale tensors): method, scale tensor suffix and dtype, block or
 * granularity, and the count of FP8 weights. */
struct qdesc {
    const char *method, *suffix, *sdtype;
    char layout[64];
    uint64_t n_fp8;
};

static void quant_desc(const struct hf_model *m, const struct hf_config *c, struct qdesc *d)
{
    const struct hf_quant_cfg *q = &c->quant;
    d->method = q->method == HF_QM_FP8 ? "fp8" : "compressed-tensors";
    d->suffix = q->method == HF_QM_FP8 ? "weight_scale_inv" : "weight_scale";
    d->sdtype = "?";
    d->n_fp8 = 0;
    for (uint64_t i = 0; i < hf_model_tensor_count(m); i++) {
        const struct hf_st_tensor *t = hf_model_tensor(m, i, NULL);
        if (t->dtype == HF_DT_F8_E4M3) d->n_fp8++;
        const size_t n = strlen(t->name), k = strlen(d->suffix);
        if (strcmp(d->sdtype, "?") == 0 && n > k && t->name[n - k - 1] == '.' &&
            strcmp(t->name + n - k, d->suffix) == 0)
            d->sdtype = hf_dtype_name(t->dtype);
    }
    if (q->method == HF_QM_MXFP4) { /* gpt-oss: *_blocks + *_scales, counted as weights */
        d->method = "mxfp4";
        d->suffix = "_scales";
        d->sdtype = "U8 (E8M0)";
        for (uint64_t i = 0; i < hf_model_tensor_count(m); i++) {
            const char *nm = hf_model_tensor(m, i, NULL)->name;
            const size_t n = strlen(nm);
            if (n > 7 && strcmp(nm + n - 7, "_blocks") == 0) d->n_fp8++;
        }
        snprintf(d->layout, sizeof d->layout, "one per 32 values");
    } else if (q->block[0])
        snprintf(d->layout, sizeof d->layout, "blocks [%u, %u]", q->block[0], q->block[1]);
    else if (strcmp(q->strategy, "tensor") == 0)
        snprintf(d->layout, sizeof d->layout, "per tensor");
    else if (strcmp(q->strategy, "channel") == 0)
        snprintf(d->layout, sizeof d->layout, "per channel");
    else
        snprintf(d->layout, sizeof d->layout, "per tensor or per row (each scale's shape)");
}

static enum mw_status inspect_dir(struct out *o, const char *dir, bool json, struct mw_err *err)
{
    struct hf_model *m;
    enum mw_status s = hf_model_open(dir, &m, err);
    if (s != MW_OK) return s;
    const struct hf_config *c = hf_model_config(m);
    struct hf_plan *p = NULL;
    struct mw_err perr;
    mw_err_clear(&perr);
    enum mw_status ps = hf_plan_build(m, HF_OUT_F16, &p, &perr);
    uint64_t total = 0;
    for (uint64_t i = 0; i < hf_model_tensor_count(m); i++)
        total += hf_model_tensor(m, i, NULL)->nbytes;

    if (json) {
        put(o, "{\"format\": \"hf\", \"path\": ");
        put_jstr(o, dir);
        put(o, ",\n \"config\": {\"architecture\": ");
        put_jstr(o, c->hf_arch_name);
        put(o, ", \"gguf_arch\": \"%s\", \"vocab_size\": %u, \"hidden_size\": %u, "
               "\"num_hidden_layers\": %u, \"intermediate_size\": %u, "
               "\"num_attention_heads\": %u, \"num_key_value_heads\": %u, \"head_dim\": %u, "
               "\"max_position_embeddings\": %u, \"rms_norm_eps\": %.9g, \"rope_theta\": %.9g, "
               "\"rope_scaling\": \"%s\", \"tie_word_embeddings\": %s",
            c->gguf_arch, c->n_vocab, c->n_embd, c->n_layer, c->n_ff, c->n_head, c->n_head_kv,
            c->head_dim, c->n_ctx, (double)c->rms_eps, (double)c->rope_theta,
            rope_name(c->rope_scaling), c->tie_embeddings ? "true" : "false");
        if (hf_arch_is_moe(c->arch))
            put(o, ", \"num_experts\": %u, \"num_experts_per_tok\": %u, "
                   "\"expert_intermediate_size\": %u, \"shared_expert_intermediate_size\": %u",
                c->n_expert, c->n_expert_used, c->n_ff_exp, c->n_ff_shexp);
        if (c->quant.method != HF_QM_NONE) {
            struct qdesc d;
            quant_desc(m, c, &d);
            const bool mx = c->quant.method == HF_QM_MXFP4;
            put(o, ", \"quantization\": {\"method\": \"%s\", \"weights\": \"%s\", "
                   "\"scale_tensor\": \"%s\", \"scale_dtype\": \"%s\", \"layout\": \"%s\", "
                   "\"%s\": %llu}", d.method, mx ? "MXFP4" : "F8_E4M3", d.suffix, d.sdtype,
                d.layout, mx ? "mxfp4_tensors" : "fp8_tensors", (unsigned long long)d.n_fp8);
        }
        put(o, "},\n");
        put(o, " \"shards\": [");
        for (uint64_t i = 0; i < hf_model_shard_count(m); i++) {
            put(o, "%s", i ? ", " : "");
            put_jstr(o, hf_st_path(hf_model_shard(m, i)));
        }
        put(o, "],\n \"n_tensors\": %llu, \"tensor_bytes\": %llu,\n \"tensors\": [\n",
            (unsigned long long)hf_model_tensor_count(m), (unsigned long long)total);
        for (uint64_t i = 0; i < hf_model_tensor_count(m); i++) {
            const struct hf_st *sh;
            const struct hf_st_tensor *t = hf_model_tensor(m, i, &sh);
            put(o, "%s  {\"name\": ", i ? ",\n" : "");
            put_jstr(o, t->name);
            put(o, ", \"dtype\": \"%s\", \"shape\": ", hf_dtype_name(t->dtype));
            put_shape(o, t->shape, t->n_dims);
            put(o, ", \"nbytes\": %llu}", (unsigned long long)t->nbytes);
        }
        put(o, "\n ],\n \"gguf\": ");
        if (ps == MW_OK) {
            put(o, "{\"source_dtype\": \"%s\", \"tensors\": [\n", hf_plan_source_dtype(p));
            for (uint64_t i = 0; i < hf_plan_count(p); i++) {
                const struct hf_plan_tensor *e = hf_plan_get(p, i);
                put(o, "%s  {\"name\": \"%s\", \"from\": ", i ? ",\n" : "", e->name);
                if (e->src && e->n_src) {
                    /* stacked experts: every source, in stacking order */
                    put(o, "[");
                    for (uint32_t x = 0; x < e->n_src; x++) {
                        put(o, "%s", x ? ", " : "");
                        put_jstr(o, e->srcs[x]->name);
                    }
                    put(o, "]");
                } else if (e->src) {
                    put_jstr(o, e->src->name);
                } else {
                    put(o, "null");
                }
                put(o, ", \"type\": \"%s\", \"ne\": ", gguf_type_get(e->type)->name);
                put_shape(o, e->ne, e->n_dims);
                put(o, ", \"permuted\": %s}", e->xform == HF_XFORM_PERMUTE ? "true" : "false");
            }
            put(o, "\n ]}}\n");
        } else {
            char msg[900];
            put(o, "{\"error\": ");
            put_jstr(o, mw_err_format(&perr, msg, sizeof msg));
            put(o, "}}\n");
        }
    } else {
        put(o, "hf checkpoint: %s\n", dir);
        put(o, "architecture: %s (GGUF %s)\n", c->hf_arch_name, c->gguf_arch);
        put(o, "config: vocab %u, hidden %u, layers %u, ffn %u, heads %u (kv %u), head_dim %u, "
               "ctx %u, rms_eps %g, rope_theta %g%s, rope_scaling %s, tied embeddings %s\n",
            c->n_vocab, c->n_embd, c->n_layer, c->n_ff, c->n_head, c->n_head_kv, c->head_dim,
            c->n_ctx, (double)c->rms_eps, (double)c->rope_theta,
            c->has_rope_theta ? "" : " (default)", rope_name(c->rope_scaling),
            c->tie_embeddings ? "yes" : "no");
        if (c->arch == HF_ARCH_QWEN3 || c->arch == HF_ARCH_GEMMA2 || c->arch == HF_ARCH_GEMMA3 ||
            c->arch == HF_ARCH_PHI3)
            put(o, "family: activation %s, rope dims %u, sliding window %u%s, rope_theta (sliding) "
                   "%g, attn softcap %g, final softcap %g%s\n",
                c->act == HF_ACT_GELU_TANH ? "gelu_pytorch_tanh" : "silu", c->n_rot, c->n_swa,
                c->swa_pattern > 1 ? (c->swa_pattern == 2 ? " (every 2nd layer global)"
                                                          : " (every 6th layer global)")
                                   : "",
                (double)(c->has_rope_theta_swa ? c->rope_theta_swa : c->rope_theta),
                (double)c->attn_softcap, (double)c->final_softcap,
                c->multimodal ? ", text model of a multimodal checkpoint (vision tensors skipped)"
                              : "");
        if (hf_arch_is_moe(c->arch)) {
            put(o, "experts: %u, %u used per token, expert ffn %u", c->n_expert, c->n_expert_used,
                c->n_ff_exp);
            if (c->n_ff_shexp) put(o, ", shared expert ffn %u (sigmoid-gated)", c->n_ff_shexp);
            put(o, ", top-k weights %s; stacked into ffn_{gate,up,down}_exps\n",
                c->norm_topk_prob ? "renormalized" : "not renormalized");
        }
        if (c->quant.method != HF_QM_NONE) {
            struct qdesc d;
            quant_desc(m, c, &d);
            if (c->quant.method == HF_QM_MXFP4)
                put(o, "quantization: mxfp4, E2M1 pairs in *_blocks with %s *%s %s (%llu "
                       "expert block tensors, repacked into ggml's MXFP4 without decoding)\n",
                    d.sdtype, d.suffix, d.layout, (unsigned long long)d.n_fp8);
            else
                put(o, "quantization: %s%s E4M3, %s %s, %s (%llu F8_E4M3 weights, dequantized "
                       "E4M3 x scale in F32)\n", d.method,
                    c->quant.method == HF_QM_CT_FP8 ? " FP8" : "", d.suffix, d.sdtype, d.layout,
                    (unsigned long long)d.n_fp8);
        }
        put(o, "weights: %llu file(s), %llu tensors, %llu bytes\n",
            (unsigned long long)hf_model_shard_count(m),
            (unsigned long long)hf_model_tensor_count(m), (unsigned long long)total);
        for (uint64_t i = 0; i < hf_model_shard_count(m); i++) {
            const struct hf_st *sh = hf_model_shard(m, i);
            put(o, "  %s: %llu tensors, header %llu bytes\n", hf_st_path(sh),
                (unsigned long long)hf_st_count(sh), (unsigned long long)hf_st_header_len(sh));
        }
        if (ps == MW_OK) {
            put(o, "source dtype: %s\n", hf_plan_source_dtype(p));
            put(o, "tensors (source order -> GGUF, as `convert --type f16` writes them):\n");
            for (uint64_t i = 0; i < hf_plan_count(p); i++) {
                const struct hf_plan_tensor *e = hf_plan_get(p, i);
                char shape[96], from[GGUF_MAX_NAME + 96];
                plan_src_name(e, from, sizeof from);
                size_t k = (size_t)snprintf(shape, sizeof shape, e->n_src ? "%ux[" : "[", e->n_src);
                for (uint32_t d = 0; d < (e->src ? e->src->n_dims : 0) && k < sizeof shape; d++)
                    k += (size_t)snprintf(shape + k, sizeof shape - k, "%s%llu", d ? "," : "",
                                          (unsigned long long)e->src->shape[d]);
                if (k < sizeof shape) snprintf(shape + k, sizeof shape - k, "]");
                put(o, "  %-44s %-4s %-12s -> %-26s %s%s\n",
                    from, e->src ? hf_dtype_name(e->src->dtype) : "", e->src ? shape : "",
                    e->name, gguf_type_get(e->type)->name,
                    e->xform == HF_XFORM_PERMUTE ? " (rows permuted)" : "");
            }
        } else {
            put(o, "tensors (source order):\n");
            for (uint64_t i = 0; i < hf_model_tensor_count(m); i++) {
                const struct hf_st_tensor *t = hf_model_tensor(m, i, NULL);
                put(o, "  %-44s %-5s ", t->name, hf_dtype_name(t->dtype));
                put_shape(o, t->shape, t->n_dims);
                put(o, "\n");
            }
        }
    }
    hf_plan_free(p);
    hf_model_close(m);
    if (ps != MW_OK && err) *err = perr; /* shown, but the checkpoint cannot be converted */
    return ps;
}

enum mw_status hf_inspect(const char *path, bool json, hf_emit_fn emit, void *ud,
                          struct mw_err *err)
{
    mw_err_clear(err);
    struct out o = {emit, ud};
    struct stat st;
    if (stat(path, &st) == 0 && S_ISDIR(st.st_mode)) return inspect_dir(&o, path, json, err);
    size_t n = strlen(path);
    static const char idx[] = "model.safetensors.index.json";
    if (n >= sizeof idx - 1 && strcmp(path + n - (sizeof idx - 1), idx) == 0) {
        /* the index names its directory */
        char *dir = strdup(path);
        if (!dir) return MW_FAIL(err, MW_E_NOMEM, MW_ERR_OFF_NONE, "out of memory");
        char *slash = strrchr(dir, '/');
        if (slash) *slash = '\0';
        else snprintf(dir, n + 1, ".");
        enum mw_status s = inspect_dir(&o, dir, json, err);
        free(dir);
        return s;
    }
    return inspect_file(&o, path, json, err);
}
