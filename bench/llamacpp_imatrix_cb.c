/*
 * bench/llamacpp_imatrix_cb.c — llama-imatrix's collection over llama.cpp's
 * own graph, linked to the peer's prebuilt libllama (tests/peer: commit
 * 80fb11ac), for models whose reference imatrix is wanted without building
 * llama.cpp's tools (bench/llamacpp_imatrix_qwen35.sh builds and runs it).
 *
 *   MW_GGML_CPU_LIB=.../libggml-cpu-VARIANT.so \
 *   llamacpp_imatrix_cb MODEL.gguf TEXT N_CTX N_CHUNKS OUT.imatrix.gguf [THREADS]
 *
 * What it mirrors of tools/imatrix/imatrix.cpp at that commit:
 *  - the text tokenized whole with add_special (a BOS only where the vocabulary
 *    adds one), cut into chunks of N_CTX tokens; a chunk's first token becomes
 *    BOS when the vocabulary adds one; each chunk one sequence, decoded in one
 *    batch of N_CTX tokens after the memory (KV cache, recurrent state) is
 *    cleared (llama-imatrix -c N_CTX -b N_CTX);
 *  - collect_imatrix: GGML_OP_MUL_MAT_ID always, GGML_OP_MUL_MAT when src1 has
 *    at least 16 F32 rows and src0 is a "blk." tensor (names filtered of
 *    their "#...#" wrappers); per input row x, acc[j] += x[j]*x[j] in float;
 *    counts per expert (MUL_MAT_ID: per routed slot) or rows / n_mat;
 *  - llama-imatrix's F16 KV cache and flash attention; MW_KV_F32=1 makes the
 *    cache F32 without flash attention (whose CPU kernel rounds Q to F16):
 *    the attention then rounds as memwall's FP32 calibration does;
 *  - save_imatrix: general.type "imatrix", imatrix.datasets [TEXT's basename],
 *    imatrix.chunk_count, imatrix.chunk_size, "<w>.in_sum2" F32 {ne0, n_mat}
 *    and "<w>.counts" F32 {1, n_mat}, sorted by name.
 * Not part of the build or the tests.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ggml-backend.h"
#include "ggml.h"
#include "gguf.h"
#include "llama.h"

#define MAX_ENT 4096

struct ent {
    char name[128];
    int64_t ne0, n_mat;
    float *values;  /* ne0 * n_mat */
    float *counts;  /* n_mat (llama-imatrix keeps ints; exact below 2^24) */
};

static struct ent g_ent[MAX_ENT];
static int g_n;

static void die(const char *msg)
{
    fprintf(stderr, "llamacpp_imatrix_cb: %s\n", msg);
    exit(1);
}

static void filter_name(const char *name, char *out, size_t n)
{
    const char *p = strchr(name, '#');
    if (p) {
        p++;
        const char *q = strchr(p, '#');
        const size_t len = q ? (size_t)(q - p) : strlen(p);
        snprintf(out, n, "%.*s", (int)len, p);
    } else {
        snprintf(out, n, "%s", name);
    }
}

static struct ent *entry(const char *name, int64_t ne0, int64_t n_mat)
{
    for (int i = 0; i < g_n; i++)
        if (!strcmp(g_ent[i].name, name)) {
            if (g_ent[i].ne0 != ne0 || g_ent[i].n_mat != n_mat) die("inconsistent entry size");
            return &g_ent[i];
        }
    if (g_n == MAX_ENT) die("too many entries");
    struct ent *e = &g_ent[g_n++];
    snprintf(e->name, sizeof e->name, "%s", name);
    e->ne0 = ne0;
    e->n_mat = n_mat;
    e->values = calloc((size_t)(ne0 * n_mat), sizeof(float));
    e->counts = calloc((size_t)n_mat, sizeof(float));
    if (!e->values || !e->counts) die("out of memory");
    return e;
}

static bool collect(struct ggml_tensor *t, bool ask, void *ud)
{
    (void)ud;
    const struct ggml_tensor *src0 = t->src[0], *src1 = t->src[1];
    char wname[128];
    filter_name(src0->name, wname, sizeof wname);
    if (ask) {
        if (t->op == GGML_OP_MUL_MAT_ID) return true;
        if (t->op != GGML_OP_MUL_MAT) return false;
        if (src1->ne[1] < 16 || src1->type != GGML_TYPE_F32) return false;
        return strncmp(wname, "blk.", 4) == 0;
    }
    if (!ggml_backend_buffer_is_host(src1->buffer)) die("activations not in host memory");
    const char *data = (const char *)src1->data;
    if (t->op == GGML_OP_MUL_MAT_ID) {
        const struct ggml_tensor *ids = t->src[2];
        const int64_t n_as = src0->ne[2], n_ids = ids->ne[0];
        const int64_t ne0 = src1->ne[0], n_tokens = src1->ne[2];
        struct ent *e = entry(wname, ne0, n_as);
        const char *idd = (const char *)ids->data;
        for (int64_t idx = 0; idx < n_ids; ++idx)
            for (int64_t row = 0; row < n_tokens; ++row) {
                const int32_t ex = *(const int32_t *)(idd + row * ids->nb[1] + idx * ids->nb[0]);
                if (ex < 0 || ex >= n_as) die("expert id out of range");
                const int64_t i11 = idx % src1->ne[1];
                const float *x = (const float *)(data + i11 * src1->nb[1] + row * src1->nb[2]);
                float *acc = e->values + ex * ne0;
                e->counts[ex] += 1.0f;
                for (int64_t j = 0; j < ne0; ++j) acc[j] += x[j] * x[j];
            }
        return true;
    }
    const int64_t n_mat = src0->ne[2] * src0->ne[3], ne0 = src1->ne[0];
    struct ent *e = entry(wname, ne0, 1);
    if (n_mat != 1) die("a 3-D dense weight");
    for (int64_t i3 = 0; i3 < src1->ne[3]; ++i3)
        for (int64_t i2 = 0; i2 < src1->ne[2]; ++i2)
            for (int64_t row = 0; row < src1->ne[1]; ++row) {
                const float *x = (const float *)(data + row * src1->nb[1] + i2 * src1->nb[2] +
                                                 i3 * src1->nb[3]);
                for (int64_t j = 0; j < ne0; ++j) e->values[j] += x[j] * x[j];
            }
    e->counts[0] += (float)(ggml_nrows(src1) / n_mat);
    return true;
}

static int cmp_ent(const void *a, const void *b)
{
    return strcmp(((const struct ent *)a)->name, ((const struct ent *)b)->name);
}

int main(int argc, char **argv)
{
    if (argc < 6 || argc > 7) {
        fprintf(stderr, "usage: llamacpp_imatrix_cb MODEL TEXT N_CTX N_CHUNKS OUT [THREADS]\n");
        return 2;
    }
    const int n_ctx = atoi(argv[3]), n_chunks = atoi(argv[4]);
    const int threads = argc == 7 ? atoi(argv[6]) : 2;
    FILE *f = fopen(argv[2], "rb");
    if (!f) die("cannot read the text");
    fseek(f, 0, SEEK_END);
    const long tn = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *text = malloc((size_t)tn + 1);
    if (!text || fread(text, 1, (size_t)tn, f) != (size_t)tn) die("cannot read the text");
    text[tn] = 0;
    fclose(f);

    llama_backend_init();
    /* the package's CPU backend is a libggml-cpu-<variant>.so: the one the peer
     * picks (it prints "cpu VARIANT"), named by the script */
    const char *cpu = getenv("MW_GGML_CPU_LIB");
    if (!cpu || !ggml_backend_load(cpu)) die("set MW_GGML_CPU_LIB to a loadable libggml-cpu-*.so");
    struct llama_model_params mp = llama_model_default_params();
    struct llama_model *model = llama_model_load_from_file(argv[1], mp);
    if (!model) die("llama.cpp could not load the model");
    const struct llama_vocab *vocab = llama_model_get_vocab(model);
    struct llama_context_params cp = llama_context_default_params();
    cp.n_ctx = (uint32_t)n_ctx;
    cp.n_batch = (uint32_t)n_ctx;
    cp.n_ubatch = (uint32_t)n_ctx;
    cp.n_seq_max = 1;
    cp.n_threads = cp.n_threads_batch = threads;
    if (getenv("MW_KV_F32")) { /* an F32 cache: no F16 rounding of K and V */
        cp.type_k = GGML_TYPE_F32;
        cp.type_v = GGML_TYPE_F32;
        cp.flash_attn_type = LLAMA_FLASH_ATTN_TYPE_DISABLED; /* its CPU kernel rounds Q to F16 */
    }
    cp.cb_eval = collect;
    cp.cb_eval_user_data = NULL;
    struct llama_context *ctx = llama_init_from_model(model, cp);
    if (!ctx) die("no context");

    const bool add_bos = llama_vocab_get_add_bos(vocab);
    int32_t cap = (int32_t)tn + 16;
    llama_token *tok = malloc((size_t)cap * sizeof *tok);
    const int32_t nt = llama_tokenize(vocab, text, (int32_t)tn, tok, cap, true, false);
    if (nt < 0) die("tokenize");
    if (nt < 2 * n_ctx) die("text too short");
    int n_chunk = nt / n_ctx;
    if (n_chunks > 0 && n_chunks < n_chunk) n_chunk = n_chunks;
    struct llama_batch batch = llama_batch_init(n_ctx, 0, 1);
    for (int i = 0; i < n_chunk; i++) {
        llama_memory_clear(llama_get_memory(ctx), true);
        batch.n_tokens = 0;
        for (int k = 0; k < n_ctx; k++) {
            llama_token t = tok[i * n_ctx + k];
            if (k == 0 && add_bos) t = llama_vocab_bos(vocab);
            batch.token[k] = t;
            batch.pos[k] = k;
            batch.n_seq_id[k] = 1;
            batch.seq_id[k][0] = 0;
            batch.logits[k] = 1;
            batch.n_tokens++;
        }
        if (llama_decode(ctx, batch)) die("decode");
        llama_synchronize(ctx);
    }
    llama_batch_free(batch);

    qsort(g_ent, (size_t)g_n, sizeof g_ent[0], cmp_ent);
    size_t data_size = 0;
    for (int i = 0; i < g_n; i++)
        data_size += ggml_tensor_overhead() * 2 + sizeof(float) * (size_t)(g_ent[i].ne0 + 1) *
                                                      (size_t)g_ent[i].n_mat + 2 * GGML_MEM_ALIGN;
    struct ggml_init_params ip = {data_size, NULL, false};
    struct ggml_context *gc = ggml_init(ip);
    struct gguf_context *gg = gguf_init_empty();
    const char *base = strrchr(argv[2], '/');
    const char *ds[1] = {base ? base + 1 : argv[2]};
    gguf_set_val_str(gg, "general.type", "imatrix");
    gguf_set_arr_str(gg, "imatrix.datasets", ds, 1);
    gguf_set_val_u32(gg, "imatrix.chunk_count", (uint32_t)n_chunk);
    gguf_set_val_u32(gg, "imatrix.chunk_size", (uint32_t)n_ctx);
    for (int i = 0; i < g_n; i++) {
        const struct ent *e = &g_ent[i];
        struct ggml_tensor *s2 = ggml_new_tensor_2d(gc, GGML_TYPE_F32, e->ne0, e->n_mat);
        struct ggml_tensor *c = ggml_new_tensor_2d(gc, GGML_TYPE_F32, 1, e->n_mat);
        ggml_format_name(s2, "%s.in_sum2", e->name);
        ggml_format_name(c, "%s.counts", e->name);
        memcpy(s2->data, e->values, sizeof(float) * (size_t)(e->ne0 * e->n_mat));
        memcpy(c->data, e->counts, sizeof(float) * (size_t)e->n_mat);
        gguf_add_tensor(gg, s2);
        gguf_add_tensor(gg, c);
    }
    if (!gguf_write_to_file(gg, argv[5], false)) die("cannot write the imatrix");
    printf("entries %d chunks %d chunk_size %d add_bos %d tokens %d\n", g_n, n_chunk, n_ctx,
           (int)add_bos, (int)nt);
    gguf_free(gg);
    ggml_free(gc);
    llama_free(ctx);
    llama_model_free(model);
    llama_backend_free();
    free(tok);
    free(text);
    return 0;
}
