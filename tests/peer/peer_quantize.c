/*
 * llama-peer quantize: llama-quantize through llama.h, with llama-imatrix's
 * GGUF imatrix.
 */
#define _GNU_SOURCE
#include "peer.h"
#include "gguf.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>

/* ------------------------------------------------------------- quantize */

/* llama-quantize IN OUT TYPE [--imatrix F] [--pure] through llama.h: same
 * library code, same defaults (including the quantize.imatrix.* metadata that
 * llama-quantize writes when given an imatrix). */
struct ftype_name { const char *name; enum llama_ftype ftype; };
static const struct ftype_name FTYPES[] = {
    {"Q4_0", LLAMA_FTYPE_MOSTLY_Q4_0}, {"Q4_1", LLAMA_FTYPE_MOSTLY_Q4_1},
    {"Q5_0", LLAMA_FTYPE_MOSTLY_Q5_0}, {"Q5_1", LLAMA_FTYPE_MOSTLY_Q5_1},
    {"Q8_0", LLAMA_FTYPE_MOSTLY_Q8_0}, {"Q2_K", LLAMA_FTYPE_MOSTLY_Q2_K},
    {"Q2_K_S", LLAMA_FTYPE_MOSTLY_Q2_K_S}, {"Q3_K", LLAMA_FTYPE_MOSTLY_Q3_K_M},
    {"Q3_K_S", LLAMA_FTYPE_MOSTLY_Q3_K_S}, {"Q3_K_M", LLAMA_FTYPE_MOSTLY_Q3_K_M},
    {"Q3_K_L", LLAMA_FTYPE_MOSTLY_Q3_K_L}, {"Q4_K", LLAMA_FTYPE_MOSTLY_Q4_K_M},
    {"Q4_K_S", LLAMA_FTYPE_MOSTLY_Q4_K_S}, {"Q4_K_M", LLAMA_FTYPE_MOSTLY_Q4_K_M},
    {"Q5_K", LLAMA_FTYPE_MOSTLY_Q5_K_M}, {"Q5_K_S", LLAMA_FTYPE_MOSTLY_Q5_K_S},
    {"Q5_K_M", LLAMA_FTYPE_MOSTLY_Q5_K_M}, {"Q6_K", LLAMA_FTYPE_MOSTLY_Q6_K},
    {"IQ2_XXS", LLAMA_FTYPE_MOSTLY_IQ2_XXS}, {"IQ2_XS", LLAMA_FTYPE_MOSTLY_IQ2_XS},
    {"IQ2_S", LLAMA_FTYPE_MOSTLY_IQ2_S}, {"IQ2_M", LLAMA_FTYPE_MOSTLY_IQ2_M},
    {"IQ1_S", LLAMA_FTYPE_MOSTLY_IQ1_S}, {"IQ1_M", LLAMA_FTYPE_MOSTLY_IQ1_M},
    {"IQ3_XXS", LLAMA_FTYPE_MOSTLY_IQ3_XXS}, {"IQ3_XS", LLAMA_FTYPE_MOSTLY_IQ3_XS},
    {"IQ3_S", LLAMA_FTYPE_MOSTLY_IQ3_S}, {"IQ3_M", LLAMA_FTYPE_MOSTLY_IQ3_M},
    {"IQ4_NL", LLAMA_FTYPE_MOSTLY_IQ4_NL}, {"IQ4_XS", LLAMA_FTYPE_MOSTLY_IQ4_XS},
    {"TQ1_0", LLAMA_FTYPE_MOSTLY_TQ1_0}, {"TQ2_0", LLAMA_FTYPE_MOSTLY_TQ2_0},
    {"MXFP4_MOE", LLAMA_FTYPE_MOSTLY_MXFP4_MOE},
    {"F16", LLAMA_FTYPE_MOSTLY_F16}, {"BF16", LLAMA_FTYPE_MOSTLY_BF16},
    {"F32", LLAMA_FTYPE_ALL_F32},
};

struct imatrix {
    struct llama_model_imatrix_data *entries; /* NULL-name terminated */
    int n;
    char dataset[128];
    int has_dataset;
    int64_t chunk_count;
};

/* GGUF imatrix (llama-imatrix's format): "<w>.in_sum2" and "<w>.counts" F32
 * tensors; value = in_sum2/count per expert row (1 where count is 0), as
 * tools/quantize/quantize.cpp load_imatrix() does. */
static void load_imatrix(const char *path, struct imatrix *im)
{
    struct ggml_context *gctx = NULL;
    struct gguf_init_params gp = {.no_alloc = false, .ctx = &gctx};
    struct gguf_context *g = gguf_init_from_file(path, gp);
    if (!g) {
        print_llama_errors();
        die(EXIT_FAIL, "%s: not a GGUF imatrix (legacy .dat imatrix files are not supported)", path);
    }
    memset(im, 0, sizeof *im);
    const int64_t kd = gguf_find_key(g, "imatrix.datasets");
    const int64_t kc = gguf_find_key(g, "imatrix.chunk_count");
    const int64_t ks = gguf_find_key(g, "imatrix.chunk_size");
    if (kd < 0 || kc < 0 || ks < 0) die(EXIT_FAIL, "%s: missing imatrix metadata", path);
    if (gguf_get_kv_type(g, kd) == GGUF_TYPE_ARRAY && gguf_get_arr_type(g, kd) == GGUF_TYPE_STRING &&
        gguf_get_arr_n(g, kd) > 0) {
        snprintf(im->dataset, sizeof im->dataset, "%s", gguf_get_arr_str(g, kd, 0));
        im->has_dataset = 1;
    }
    im->chunk_count = gguf_get_val_u32(g, kc);
    const int64_t nt = gguf_get_n_tensors(g);
    im->entries = xmalloc(sizeof *im->entries * (size_t)(nt + 1));
    for (struct ggml_tensor *t = ggml_get_first_tensor(gctx); t; t = ggml_get_next_tensor(gctx, t)) {
        const char *nm = ggml_get_name(t);
        size_t L = strlen(nm);
        if (L <= 8 || strcmp(nm + L - 8, ".in_sum2")) continue;
        char base[GGML_MAX_NAME + 16], cname[GGML_MAX_NAME + 16];
        xsnprintf(base, sizeof base, "%.*s", (int)(L - 8), nm);
        xsnprintf(cname, sizeof cname, "%s.counts", base);
        struct ggml_tensor *c = ggml_get_tensor(gctx, cname);
        if (!c) die(EXIT_FAIL, "%s: %s has no counts", path, base);
        if (t->type != GGML_TYPE_F32 || c->type != GGML_TYPE_F32) die(EXIT_FAIL, "%s: %s not F32", path, base);
        const int64_t nsum = ggml_nelements(t), ncnt = ggml_nelements(c);
        if (ncnt <= 0 || nsum % ncnt) die(EXIT_FAIL, "%s: %s: bad shapes", path, base);
        const int64_t ne0 = nsum / ncnt;
        float *v = xmalloc(sizeof(float) * (size_t)nsum);
        const float *s = (const float *)t->data, *cn = (const float *)c->data;
        for (int64_t j = 0; j < ncnt; ++j) {
            const float count = cn[j];
            for (int64_t i = 0; i < ne0; ++i) v[j * ne0 + i] = count > 0.0f ? s[j * ne0 + i] / count : 1.0f;
        }
        im->entries[im->n].name = strdup(base);
        im->entries[im->n].data = v;
        im->entries[im->n].size = (size_t)nsum;
        im->n++;
    }
    im->entries[im->n].name = NULL;
    im->entries[im->n].data = NULL;
    im->entries[im->n].size = 0;
    gguf_free(g);
    ggml_free(gctx);
    if (im->n == 0) die(EXIT_FAIL, "%s: no imatrix entries", path);
}

int cmd_quantize(const char *in, const char *out, const char *type, const char *imatrix_path, int pure,
                 int allow_requantize)
{
    enum llama_ftype ft = (enum llama_ftype)-1;
    for (size_t i = 0; i < sizeof FTYPES / sizeof FTYPES[0]; ++i)
        if (!strcasecmp(FTYPES[i].name, type)) ft = FTYPES[i].ftype;
    if ((int)ft == -1) die(EXIT_USAGE, "unknown quantization type '%s'", type);
    peer_init();
    struct llama_model_quantize_params qp = llama_model_quantize_default_params();
    qp.ftype = ft;
    qp.nthread = g_threads;
    qp.pure = pure != 0;
    qp.allow_requantize = allow_requantize != 0;
    struct imatrix im;
    struct llama_model_kv_override kvo[5];
    memset(kvo, 0, sizeof kvo);
    if (imatrix_path) {
        load_imatrix(imatrix_path, &im);
        qp.imatrix = im.entries;
        int k = 0;
        snprintf(kvo[k].key, sizeof kvo[k].key, "quantize.imatrix.file");
        kvo[k].tag = LLAMA_KV_OVERRIDE_TYPE_STR;
        snprintf(kvo[k].val_str, sizeof kvo[k].val_str, "%.127s", imatrix_path);
        k++;
        if (im.has_dataset) {
            snprintf(kvo[k].key, sizeof kvo[k].key, "quantize.imatrix.dataset");
            kvo[k].tag = LLAMA_KV_OVERRIDE_TYPE_STR;
            snprintf(kvo[k].val_str, sizeof kvo[k].val_str, "%.127s", im.dataset);
            k++;
        }
        snprintf(kvo[k].key, sizeof kvo[k].key, "quantize.imatrix.entries_count");
        kvo[k].tag = LLAMA_KV_OVERRIDE_TYPE_INT;
        kvo[k].val_i64 = im.n;
        k++;
        if (im.chunk_count > 0) {
            snprintf(kvo[k].key, sizeof kvo[k].key, "quantize.imatrix.chunks_count");
            kvo[k].tag = LLAMA_KV_OVERRIDE_TYPE_INT;
            kvo[k].val_i64 = im.chunk_count;
            k++;
        }
        kvo[k].key[0] = 0;
        qp.kv_overrides = kvo;
    }
    const double t0 = now_s();
    if (llama_model_quantize(in, out, &qp)) {
        print_llama_errors();
        die(EXIT_FAIL, "llama_model_quantize %s -> %s (%s) failed", in, out, type);
    }
    struct stat st;
    if (stat(out, &st) != 0) die(EXIT_FAIL, "%s was not written", out);
    printf("quantized %s bytes %lld seconds %.3f\n", out, (long long)st.st_size, now_s() - t0);
    if (imatrix_path) {
        for (int i = 0; i < im.n; ++i) {
            free((void *)im.entries[i].name);
            free((void *)im.entries[i].data);
        }
        free(im.entries);
    }
    llama_backend_free();
    return 0;
}
