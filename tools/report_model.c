/*
 * tools/report_model.c — what the report shows of one GGUF file, gathered
 * through the libraries (tools/report.h): the tensor table grouped by layer
 * and kind, the type mix, the provenance KVs (general.*, quantize.imatrix.*,
 * memwall.quant.*), and the memory plan of `memwall plan` (the runtime's
 * hyper-parameters, calib's memory formula) at a few contexts and device
 * tiers.
 */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "calib/calib.h"
#include "gguf/gguf.h"
#include "methods/methods.h"
#include "runtime/rt.h"
#include "tools/report.h"

const char *report_type_name(uint32_t type, char *buf, size_t cap)
{
    const struct gguf_type_info *ti = gguf_type_get(type);
    if (!ti || !ti->name) {
        snprintf(buf, cap, "type %u", type);
        return buf;
    }
    size_t i = 0;
    for (; ti->name[i] && i + 1 < cap; i++)
        buf[i] = (ti->name[i] >= 'a' && ti->name[i] <= 'z') ? (char)(ti->name[i] - 32)
                                                             : ti->name[i];
    buf[i] = '\0';
    return buf;
}

double report_type_bpw(uint32_t type)
{
    const struct gguf_type_info *ti = gguf_type_get(type);
    return ti && ti->blck ? (double)ti->type_size * 8.0 / (double)ti->blck : 0.0;
}

uint32_t report_types(const struct report_file *rf, uint32_t out[64])
{
    uint32_t n = 0;
    for (uint32_t ty = 0; ty < 64; ty++)
        if (rf->type_count[ty]) out[n++] = ty;
    for (uint32_t i = 1; i < n; i++) /* insertion sort by bits per weight, then id */
        for (uint32_t j = i; j > 0; j--) {
            const double a = report_type_bpw(out[j - 1]), b = report_type_bpw(out[j]);
            if (a < b || (a == b && out[j - 1] < out[j])) break;
            const uint32_t t = out[j];
            out[j] = out[j - 1];
            out[j - 1] = t;
        }
    return n;
}

double report_bpw(const struct report_file *rf)
{
    return rf->n_el ? (double)rf->data_bytes * 8.0 / (double)rf->n_el : 0.0;
}

/* A copy of string KV key, or NULL (absent or not a string). */
static char *kv_str(const struct gguf_file *f, const char *key)
{
    const int64_t i = gguf_kv_find(f, key);
    if (i < 0) return NULL;
    const struct gguf_value *v = gguf_kv_value(f, (uint64_t)i);
    if (v->type != GGUF_VT_STRING || v->nbytes > 1u << 20) return NULL;
    char *s = malloc((size_t)v->nbytes + 1);
    if (!s) return NULL;
    size_t n = 0;
    for (uint64_t j = 0; j < v->nbytes; j++)
        if (v->data[j]) s[n++] = (char)v->data[j]; /* no NULs inside */
    s[n] = '\0';
    return s;
}

static bool kv_u32(const struct gguf_file *f, const char *key, uint32_t *out)
{
    const int64_t i = gguf_kv_find(f, key);
    uint64_t u;
    if (i < 0 || !gguf_value_as_u64(gguf_kv_value(f, (uint64_t)i), &u) || u > UINT32_MAX)
        return false;
    *out = (uint32_t)u;
    return true;
}

/* "blk.N.rest" -> N and rest; other names: -1 and the name. */
static int split_name(const char *name, const char **rest)
{
    *rest = name;
    if (strncmp(name, "blk.", 4) != 0) return -1;
    const char *p = name + 4;
    long n = 0;
    if (*p < '0' || *p > '9') return -1;
    while (*p >= '0' && *p <= '9' && n < 100000) n = n * 10 + (*p++ - '0');
    if (*p != '.' || n >= 100000) return -1;
    *rest = p + 1;
    return (int)n;
}

static int kind_index(struct report_file *rf, const char *rest, bool in_layers, bool weight)
{
    for (uint32_t k = 0; k < rf->n_kinds; k++)
        if (rf->kinds[k].in_layers == in_layers && strcmp(rf->kinds[k].name, rest) == 0)
            return (int)k;
    uint32_t k = rf->n_kinds;
    if (k == REPORT_MAX_KINDS) k = REPORT_MAX_KINDS - 1; /* the last one collects the rest */
    else rf->n_kinds++;
    if (k == REPORT_MAX_KINDS - 1 && rf->kinds[k].name[0]) return (int)k;
    snprintf(rf->kinds[k].name, sizeof rf->kinds[k].name, "%s",
             k == REPORT_MAX_KINDS - 1 ? "(other)" : rest);
    rf->kinds[k].in_layers = in_layers;
    rf->kinds[k].weight = weight;
    return (int)k;
}

static void read_tensors(struct report_file *rf)
{
    for (uint64_t i = 0; i < rf->n_tensors; i++) {
        const struct gguf_tensor *gt = gguf_tensor_get(rf->gf, i);
        struct report_tensor *t = &rf->t[i];
        const char *rest;
        t->name = gt->name;
        t->layer = split_name(gt->name, &rest);
        t->type = gt->type;
        t->nbytes = gt->nbytes;
        t->n_el = 1;
        for (int d = 0; d < GGUF_MAX_DIMS; d++) t->n_el *= gt->ne[d];
        const bool weight = gt->n_dims >= 2;
        t->kind = kind_index(rf, rest, t->layer >= 0, weight);
        struct report_kind *k = &rf->kinds[t->kind];
        k->n_tensors++;
        k->n_el += t->n_el;
        k->bytes += t->nbytes;
        if (t->layer >= 0 && (uint32_t)t->layer + 1 > rf->n_layer)
            rf->n_layer = (uint32_t)t->layer + 1;
        if (t->type < 64) {
            rf->type_count[t->type]++;
            rf->type_bytes[t->type] += t->nbytes;
            rf->type_el[t->type] += t->n_el;
        }
        rf->data_bytes += t->nbytes;
        rf->n_el += t->n_el;
    }
}

static void read_kvs(struct report_file *rf)
{
    const struct gguf_file *f = rf->gf;
    rf->name = kv_str(f, "general.name");
    rf->arch = kv_str(f, "general.architecture");
    rf->basename = kv_str(f, "general.basename");
    rf->license = kv_str(f, "general.license");
    rf->base_model = kv_str(f, "general.base_model.0.name");
    rf->base_model_org = kv_str(f, "general.base_model.0.organization");
    rf->mw_version = kv_str(f, "memwall.version");
    rf->preset = kv_str(f, "memwall.quant.preset");
    rf->method = kv_str(f, "memwall.quant.method");
    rf->method_params = kv_str(f, "memwall.quant.method_params");
    rf->budget = kv_str(f, "memwall.quant.budget");
    rf->command = kv_str(f, "memwall.quant.command");
    rf->imatrix_xxh3 = kv_str(f, "memwall.quant.imatrix_xxh3");
    rf->im_file = kv_str(f, "quantize.imatrix.file");
    rf->im_dataset = kv_str(f, "quantize.imatrix.dataset");
    kv_u32(f, "quantize.imatrix.chunks_count", &rf->im_chunks);
    rf->has_file_type = kv_u32(f, "general.file_type", &rf->file_type);
    for (uint64_t i = 0; i < gguf_kv_count(f); i++) {
        const char *k = gguf_kv_key(f, i);
        if (strncmp(k, "memwall.", 8) == 0 && strncmp(k, "memwall.checksum.", 17) != 0)
            rf->memwall = true;
    }
    const int64_t pi = gguf_kv_find(f, "memwall.quant.pure");
    bool b = false;
    rf->pure = pi >= 0 && gguf_value_as_bool(gguf_kv_value(f, (uint64_t)pi), &b) && b;
    const int64_t ki = gguf_kv_find(f, "memwall.quant.probe_kld");
    const struct gguf_value *pv = ki >= 0 ? gguf_kv_value(f, (uint64_t)ki) : NULL;
    const bool probes = pv && pv->type == GGUF_VT_ARRAY && pv->n == rf->n_tensors;
    for (uint64_t i = 0; i < rf->n_tensors; i++) {
        struct gguf_value e;
        double d = -1;
        rf->t[i].probe_kld = probes && gguf_value_elem(pv, i, &e) && gguf_value_as_f64(&e, &d) &&
                                     d >= 0 ? d : -1;
        rf->n_probed += rf->t[i].probe_kld >= 0;
    }
    const int64_t oi = gguf_kv_find(f, "memwall.quant.type_overrides");
    if (oi >= 0 && gguf_kv_value(f, (uint64_t)oi)->type == GGUF_VT_ARRAY)
        rf->n_overrides = (uint32_t)gguf_kv_value(f, (uint64_t)oi)->n;
}

/* The memory plan: KV and overhead at each context, what fits each tier. */
static void read_plan(struct report_file *rf)
{
    struct report_plan *pl = &rf->plan;
    struct rt_model *rm = NULL;
    struct mw_err err;
    mw_err_clear(&err);
    if (rt_model_from_gguf(rf->gf, &rm, &err) != MW_OK) {
        mw_err_format(&err, pl->why, sizeof pl->why);
        return;
    }
    const struct rt_hparams *hp = rt_model_hparams(rm);
    uint64_t n_bias = 0;
    for (uint64_t i = 0; i < rf->n_tensors; i++)
        if (strstr(rf->t[i].name, ".bias")) n_bias += gguf_tensor_get(rf->gf, i)->ne[0];
    struct calib_mem_arch arch;
    calib_mem_arch_from_hparams(hp, n_bias, &arch);
    snprintf(pl->arch, sizeof pl->arch, "%s", hp->arch_name);
    pl->n_ctx_train = hp->n_ctx_train;
    pl->weight_bytes = rf->data_bytes;
    static const uint32_t ctxs[REPORT_N_CTX] = {512, 2048, 4096, 8192, 32768};
    static const uint32_t gib[REPORT_N_TIERS] = {4, 6, 8, 12, 16, 24};
    for (int t = 0; t < REPORT_N_TIERS; t++) pl->tiers[t] = (uint64_t)gib[t] << 30;
    pl->has = true;
    for (int c = 0; c < REPORT_N_CTX && pl->has; c++) {
        pl->ctx[c] = ctxs[c];
        struct calib_mem m16, m8;
        struct calib_mem_opts o = {.n_ctx = ctxs[c], .kv_type = RT_KV_F16,
                                   .weight_type = rt_model_main_type(rm)};
        if (calib_mem_estimate(&arch, &o, &m16, &err) != MW_OK) {
            mw_err_format(&err, pl->why, sizeof pl->why);
            pl->has = false;
            break;
        }
        o.kv_type = RT_KV_Q8_0;
        const bool q8 = calib_mem_estimate(&arch, &o, &m8, NULL) == MW_OK;
        pl->kv_f16[c] = m16.kv_bytes;
        pl->kv_q8[c] = q8 ? m8.kv_bytes : 0;
        pl->overhead[c] = m16.overhead_bytes;
        for (int t = 0; t < REPORT_N_TIERS; t++) {
            const uint64_t left = calib_mem_weight_budget(pl->tiers[t], &m16);
            pl->fits[c][t] = left > 0 && rf->data_bytes <= left;
            const uint64_t left8 = q8 ? calib_mem_weight_budget(pl->tiers[t], &m8) : 0;
            pl->fits_q8[c][t] = left8 > 0 && rf->data_bytes <= left8;
        }
    }
    rt_model_close(rm);
}

enum mw_status report_file_open(const char *path, struct report_file *rf, struct mw_err *err)
{
    memset(rf, 0, sizeof *rf);
    rf->path = path;
    enum mw_status s = gguf_open(path, GGUF_OPEN_DEFAULT, &rf->gf, err);
    if (s != MW_OK) return s;
    rf->file_bytes = gguf_file_size(rf->gf);
    rf->n_tensors = gguf_tensor_count(rf->gf);
    if (rf->n_tensors > SIZE_MAX / sizeof *rf->t ||
        !(rf->t = calloc((size_t)(rf->n_tensors ? rf->n_tensors : 1), sizeof *rf->t))) {
        report_file_close(rf);
        return MW_FAIL(err, MW_E_NOMEM, MW_ERR_OFF_NONE, "out of memory");
    }
    read_tensors(rf);
    read_kvs(rf);
    read_plan(rf);
    return MW_OK;
}

void report_file_close(struct report_file *rf)
{
    if (!rf) return;
    char **s[] = {&rf->name,   &rf->arch,          &rf->basename, &rf->license,
                  &rf->base_model, &rf->base_model_org, &rf->mw_version, &rf->preset,
                  &rf->method, &rf->method_params, &rf->budget,   &rf->command,
                  &rf->imatrix_xxh3, &rf->im_file,  &rf->im_dataset};
    for (size_t i = 0; i < sizeof s / sizeof s[0]; i++) {
        free(*s[i]);
        *s[i] = NULL;
    }
    free(rf->t);
    rf->t = NULL;
    gguf_close(rf->gf);
    rf->gf = NULL;
}

void report_budget(const struct report_file *rf, char *words, size_t cap, double *bpw,
                   uint64_t *file_bytes)
{
    *bpw = 0;
    *file_bytes = 0;
    words[0] = '\0';
    const char *b = rf->budget;
    if (!b) return;
    unsigned long long r = 0, w = 0;
    unsigned long ctx = 0;
    char kv[16] = "";
    if (strncmp(b, "bpw=", 4) == 0) {
        *bpw = strtod(b + 4, NULL);
        snprintf(words, cap, "--bpw %s: at most %s bits per weight of tensor data", b + 4, b + 4);
    } else if (sscanf(b, "size=%llu", &w) == 1) {
        *file_bytes = w;
        snprintf(words, cap, "--size %llu: a file of at most %llu bytes", w, w);
    } else if (sscanf(b, "fit-ram=%llu,ctx=%lu,kv=%15[^,],file=%llu", &r, &ctx, kv, &w) == 4) {
        *file_bytes = w;
        snprintf(words, cap,
                 "--fit-ram %llu --ctx %lu --kv %s: a device of %.3g GiB RAM with a %lu-token "
                 "context leaves a file of at most %llu bytes",
                 r, ctx, kv, (double)r / (1024.0 * 1024.0 * 1024.0), ctx, w);
    } else {
        snprintf(words, cap, "%s", b);
    }
}

const char *report_param(const struct report_file *rf, const char *key, char *buf, size_t cap)
{
    const char *p = rf->method_params;
    const size_t kl = strlen(key);
    while (p && *p) {
        while (*p == ' ') p++;
        if (strncmp(p, key, kl) == 0 && p[kl] == '=') {
            const char *v = p + kl + 1;
            size_t n = strcspn(v, " ");
            if (n >= cap) n = cap - 1;
            memcpy(buf, v, n);
            buf[n] = '\0';
            return buf;
        }
        p += strcspn(p, " ");
    }
    return NULL;
}

const char *report_tensor_method(const struct report_file *rf, const struct report_tensor *t,
                                 bool *fallback)
{
    *fallback = false;
    const struct report_kind *k = &rf->kinds[t->kind];
    if (!rf->method || !rf->method_params || !k->weight) return NULL; /* no --corpus */
    if (t->type == GGUF_TYPE_F32 || t->type == GGUF_TYPE_F16 || t->type == GGUF_TYPE_BF16)
        return "kept as it is";
    enum quant_method m;
    const bool known = quant_method_parse(rf->method, &m);
    const bool grid = quant_gptq_supported(t->type);
    const bool gptq_or_round =
        known && (quant_method_uses_gptq(m) || quant_method_uses_round(m));
    const bool linear = k->in_layers && (strncmp(k->name, "attn", 4) == 0 ||
                                         strncmp(k->name, "ffn", 3) == 0) &&
                        strncmp(k->name, "ffn_gate_inp", 12) != 0;
    if (linear || strcmp(k->name, "output.weight") == 0) {
        if (!gptq_or_round) return linear ? rf->method : "importance-weighted rounding";
        if (grid && linear) return rf->method;
        if (grid)
            return quant_method_uses_gptq(m) && quant_method_uses_round(m)
                       ? "GPTQ + learned rounding on the final hidden states"
                   : quant_method_uses_gptq(m) ? "GPTQ on the final hidden states"
                                               : "learned rounding on the final hidden states";
        *fallback = true;
        return "importance-weighted rounding (its type has no GPTQ grid)";
    }
    return "importance-weighted rounding";
}
