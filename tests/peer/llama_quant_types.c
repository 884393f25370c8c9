/*
 * llama_quant_types — llama.cpp's own per-tensor type choice for a GGUF
 * header, through the helpers libllama exports for tools (src/llama-ext.h:
 * llama_quant_model_from_metadata, llama_quant_init,
 * llama_quant_compute_types). Used by tests/e2e/quant_peer.sh to compare
 * memwall's rules with llama.cpp's on shapes we have no weights for
 * (Llama-2-7B, Llama-3-8B, 70B, odd widths): the GGUF may be header-only.
 *
 *   llama_quant_types MODEL.gguf FTYPE [--pure] [--tt REGEX=TYPE]...
 *
 * Prints "name type" per tensor, in llama-quantize's order. FTYPE is a
 * llama_ftype number. Exit 0 ok, 2 usage, 3 failure, 77 when the pinned
 * libllama lacks the helpers.
 *
 * Those helpers are C++ functions (llama-ext.h is a C++ header); they take
 * only pointers, enums and a size_t, so they are called from C through their
 * mangled names (Itanium ABI, x86-64 SysV): resolved with dlsym, so a
 * libllama without them gives exit 77 instead of a link error.
 *
 * Build (the test does this):
 *   cc -std=c11 -I.peer/include llama_quant_types.c libllama.so libggml-base.so -ldl
 */
#define _GNU_SOURCE
#include "ggml.h"
#include "gguf.h"
#include "llama.h"

#include <dlfcn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

struct quant_model_desc { /* llama_quant_model_desc */
    const char *architecture;
    uint32_t n_embd, n_ff, n_layer, n_head, n_head_kv, n_expert, n_embd_head_k, n_embd_head_v;
};

typedef struct llama_model *(*from_metadata_fn)(const struct quant_model_desc *);
typedef void *(*init_fn)(const struct llama_model *, const struct llama_model_quantize_params *);
typedef void (*compute_fn)(void *, enum llama_ftype, struct ggml_tensor **, enum ggml_type *,
                           size_t);
typedef void (*free_fn)(void *);

static uint32_t get_u32(struct gguf_context *g, const char *arch, const char *suffix,
                        uint32_t dflt)
{
    char key[128];
    snprintf(key, sizeof key, "%s.%s", arch, suffix);
    const int64_t k = gguf_find_key(g, key);
    if (k < 0) return dflt;
    if (gguf_get_kv_type(g, k) == GGUF_TYPE_ARRAY) return dflt;
    return gguf_get_val_u32(g, k);
}

static int layer(const char *n)
{
    int l = -1;
    sscanf(n, "blk.%d.", &l);
    return l;
}

static int cmp(const void *a, const void *b)
{
    const char *x = ggml_get_name(*(struct ggml_tensor *const *)a);
    const char *y = ggml_get_name(*(struct ggml_tensor *const *)b);
    const int lx = layer(x), ly = layer(y);
    if (lx != ly) return lx < ly ? -1 : 1;
    return strcmp(x, y);
}

int main(int argc, char **argv)
{
    if (argc < 3) {
        fprintf(stderr, "usage: llama_quant_types MODEL.gguf FTYPE [--pure] [--tt REGEX=TYPE]...\n");
        return 2;
    }
    llama_log_set(NULL, NULL);
    struct llama_model_quantize_params qp = llama_model_quantize_default_params();
    char *end;
    const long ft = strtol(argv[2], &end, 10);
    if (*end || ft < 0 || ft > 1000) return 2;
    qp.ftype = (enum llama_ftype)ft;
    struct llama_model_tensor_override tt[16];
    int ntt = 0;
    for (int i = 3; i < argc; i++) {
        if (!strcmp(argv[i], "--pure")) {
            qp.pure = true;
        } else if (!strcmp(argv[i], "--tt") && i + 1 < argc && ntt < 15) {
            char *spec = argv[++i], *eq = strchr(spec, '=');
            if (!eq) return 2;
            *eq = 0;
            enum ggml_type t = GGML_TYPE_COUNT;
            for (int k = 0; k < GGML_TYPE_COUNT; k++) {
                const char *nm = ggml_type_name((enum ggml_type)k);
                if (nm && !strcasecmp(nm, eq + 1)) t = (enum ggml_type)k;
            }
            if (t == GGML_TYPE_COUNT) return 2;
            tt[ntt].pattern = spec;
            tt[ntt].type = t;
            ntt++;
        } else {
            return 2;
        }
    }
    tt[ntt].pattern = NULL;
    tt[ntt].type = GGML_TYPE_COUNT;
    if (ntt) qp.tt_overrides = tt;

    void *lib = dlopen(NULL, RTLD_NOW);
    from_metadata_fn from_md = (from_metadata_fn)dlsym(
        lib, "_Z31llama_quant_model_from_metadataPK22llama_quant_model_desc");
    init_fn qinit = (init_fn)dlsym(
        lib, "_Z16llama_quant_initPK11llama_modelPK27llama_model_quantize_params");
    compute_fn compute = (compute_fn)dlsym(
        lib, "_Z25llama_quant_compute_typesP19quantize_state_impl11llama_ftypePP11ggml_tensorP9ggml_typem");
    free_fn qfree = (free_fn)dlsym(lib, "_Z16llama_quant_freeP19quantize_state_impl");
    if (!from_md || !qinit || !compute || !qfree) {
        fprintf(stderr, "llama_quant_types: libllama lacks the llama_quant_* helpers\n");
        return 77;
    }

    struct ggml_context *ctx = NULL;
    struct gguf_init_params gp = {.no_alloc = true, .ctx = &ctx};
    struct gguf_context *g = gguf_init_from_file(argv[1], gp);
    if (!g) {
        fprintf(stderr, "llama_quant_types: cannot read %s\n", argv[1]);
        return 3;
    }
    const int64_t ka = gguf_find_key(g, "general.architecture");
    if (ka < 0) return 3;
    const char *arch = gguf_get_val_str(g, ka);
    struct quant_model_desc d = {
        .architecture = arch,
        .n_embd = get_u32(g, arch, "embedding_length", 0),
        .n_ff = get_u32(g, arch, "feed_forward_length", 0),
        .n_layer = get_u32(g, arch, "block_count", 0),
        .n_head = get_u32(g, arch, "attention.head_count", 0),
        .n_expert = get_u32(g, arch, "expert_count", 0),
    };
    d.n_head_kv = get_u32(g, arch, "attention.head_count_kv", d.n_head);
    d.n_embd_head_k = d.n_embd_head_v = d.n_head ? d.n_embd / d.n_head : 0;

    const int64_t n = gguf_get_n_tensors(g);
    struct ggml_tensor **t = calloc((size_t)n + 1, sizeof *t);
    enum ggml_type *types = calloc((size_t)n + 1, sizeof *types);
    for (int64_t i = 0; i < n; i++) t[i] = ggml_get_tensor(ctx, gguf_get_tensor_name(g, i));
    qsort(t, (size_t)n, sizeof *t, cmp);

    struct llama_model *model = from_md(&d);
    void *qs = qinit(model, &qp);
    compute(qs, qp.ftype, t, types, (size_t)n);
    for (int64_t i = 0; i < n; i++) printf("%s %s\n", ggml_get_name(t[i]), ggml_type_name(types[i]));
    qfree(qs);
    llama_model_free(model);
    gguf_free(g);
    ggml_free(ctx);
    free(t);
    free(types);
    return 0;
}
