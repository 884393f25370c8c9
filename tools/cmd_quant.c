/*
 * tools/cmd_quant.c — `memwall quant SRC -o OUT.gguf --preset P`: quantize an
 * F16/BF16/F32 GGUF file (or, in full builds, a Hugging Face checkpoint
 * directory, converted on the fly) with llama-quantize's presets and type
 * rules. The work is quant/quant.h's plan + write; this file parses flags,
 * prints the library's notices and a progress line with an ETA when stderr
 * is a terminal, and maps the result to the exit status.
 */
#define _POSIX_C_SOURCE 200809L
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "quant/quant.h"
#include "quant/quant_alloc.h"
#if defined(MW_HAVE_FULL)
#include "methods/methods.h"
#include "calib/calib.h"
#include "runtime/rt.h"
#endif
#if defined(MW_HAVE_FULL)
#include "hf/hf.h"
#include "hf/hf_tok.h"
#endif
#include "tools/cmd.h"
#include "tools/json_writer.h"

static const char usage_text[] =
    "usage: memwall quant SRC -o OUT.gguf (--preset P | --bpw B | --size S"
#if defined(MW_HAVE_FULL)
    " | --fit-ram R --ctx N"
#endif
    ") [options]\n"
    "  Quantize SRC — an F16/BF16/F32 GGUF file"
#if defined(MW_HAVE_FULL)
    ", or a Hugging Face checkpoint directory\n"
    "  (converted to F16 on the fly, as `memwall convert` would)"
#endif
    " — with llama-quantize's\n"
    "  per-tensor type rules. The output is written to a temp file and renamed when\n"
    "  complete; its tensor data is what llama.cpp's llama-quantize writes.\n"
    "  -o, --output FILE          output file\n"
    "  --preset P                 Q8_0 Q6_K Q5_K_M Q5_K_S Q4_K_M Q4_K_S Q4_0 Q3_K_L Q3_K_M\n"
    "                             Q3_K_S Q2_K (also Q5_1 Q5_0 Q4_1 IQ4_NL)\n"
    "  --bpw B                    mixed precision: a type per tensor (Q2_K..Q8_0, F16)\n"
    "                             minimizing the estimated loss with tensor data of at\n"
    "                             most B bits per weight (hit within 1%)\n"
    "  --size S                   the same for the whole output file: at most S bytes\n"
    "                             (4500000, 4.5e6, K M G T, KiB MiB GiB: binary)\n"
#if defined(MW_HAVE_FULL)
    "  --fit-ram R --ctx N        the file that fits a device of R bytes RAM after the KV\n"
    "  [--kv f16|q8_0]            cache of N positions and the runtime overhead (the\n"
    "                             `memwall plan` formula)\n"
#endif
    "                             (--preset is then optional: its rules are not used,\n"
    "                             only its file type; default Q4_K_M)\n"
    "  --imatrix FILE             importance matrix (llama-imatrix .gguf or legacy .dat);\n"
    "                             mixed precision weighs each tensor's errors with it\n"
    "  --type-override REGEX=TYPE tensors whose name matches REGEX (POSIX extended,\n"
    "                             lower-cased, first match wins) get TYPE; repeatable\n"
    "  --output-tensor-type T     type of output.weight\n"
    "  --token-embedding-type T   type of token_embd.weight\n"
    "  --leave-output-tensor      keep output.weight as it is\n"
    "  --pure                     no per-tensor rules: every weight gets the preset's type\n"
    "  --allow-requantize         accept already quantized source tensors\n"
    "  -t, --threads N            worker threads (default: all CPUs); the output does\n"
    "                             not depend on N\n"
    "  --dry-run                  print the per-tensor plan, write nothing (SRC may be\n"
    "                             a header-only GGUF: tensor data is not read)\n"
    "  -q, --quiet                no progress, no notices (warnings still print)\n"
#if defined(MW_HAVE_FULL)
    "  --corpus FILE              calibration text (.txt/.jsonl[.gz]): quantize the layers\n"
    "                             with --method on the model's activations\n"
    "  --method M                 rtn | gptq | awq | awq+gptq | gptq-act | awq+gptq-act\n"
    "                             (with --corpus; default awq+gptq)\n"
    "  --samples N, --seq-len L   calibration samples (default 128) of L tokens (512)\n"
    "  --max-memory SIZE          with --corpus: bound on calibration + method buffers\n"
#endif
    "exit status: 0 ok, 1 bad input (no output written), 2 usage, 3 I/O error\n";

static const char *cmd = "quant";

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* A tensor name from an untrusted file, printable: control characters, DEL,
 * C1 controls and invalid UTF-8 as \xNN; at most cap-1 bytes (cut at a
 * character boundary). */
static void esc_name(const char *s, char *out, size_t cap)
{
    const unsigned char *p = (const unsigned char *)s;
    const size_t n = strlen(s);
    size_t i = 0, o = 0;
    while (i < n) {
        const unsigned char c = p[i];
        size_t len = c >= 0x20 && c < 0x7f ? 1 : (c >= 0x80 ? jw_utf8_len(p + i, n - i) : 0);
        if (len == 2 && c == 0xc2 && p[i + 1] < 0xa0) len = 0;
        if (len == 0) {
            if (o + 4 >= cap) break;
            snprintf(out + o, cap - o, "\\x%02x", c);
            o += 4;
            i++;
            continue;
        }
        if (o + len >= cap) break;
        memcpy(out + o, p + i, len);
        o += len;
        i += len;
    }
    out[o] = 0;
}

// --- callbacks ---

struct ui {
    bool quiet;
    bool progress_on;
    bool drawn;
    double t0, last;
};

static void on_log(void *ud, enum quant_log_level lvl, const char *msg)
{
    struct ui *u = ud;
    if (lvl != QUANT_LOG_WARN && u->quiet) return;
    if (u->drawn) {
        fputs("\r\033[K", stderr);
        u->drawn = false;
    }
    /* messages quote tensor names and strings from the input file: escaped */
    fprintf(stderr, "memwall quant: %s",
            lvl == QUANT_LOG_WARN ? "warning: " : (lvl == QUANT_LOG_NOTICE ? "note: " : ""));
    cmd_put_text(stderr, msg);
    fputc('\n', stderr);
}

static void on_progress(void *ud, uint64_t done, uint64_t total, uint64_t ti, uint64_t nt,
                        const char *name)
{
    struct ui *u = ud;
    const double t = now_s();
    if (done < total && t - u->last < 0.2) return;
    u->last = t;
    const double el = t - u->t0;
    const double frac = total ? (double)done / (double)total : 1.0;
    char eta[32] = "";
    if (frac > 0.01 && done < total) snprintf(eta, sizeof eta, " ETA %.0fs", el / frac - el);
    char nm[64];
    esc_name(name ? name : "", nm, 41);
    fprintf(stderr, "\r\033[Kquant: %3.0f%%  %.1f/%.1f MiB  tensor %llu/%llu %s%s",
            frac * 100.0, (double)done / 1048576.0, (double)total / 1048576.0,
            (unsigned long long)ti + 1, (unsigned long long)nt, nm, eta);
    fflush(stderr);
    u->drawn = true;
}

// --- Hugging Face source ---

#if defined(MW_HAVE_FULL)
struct hf_src {
    struct hf_model *m;
    struct hf_plan *p;
    struct gguf_file *kv;
    struct quant_tensor_desc *t;
};

static enum mw_status hfsrc_read(void *ud, uint64_t i, quant_sink_fn sink, void *sink_ud,
                                 struct mw_err *err)
{
    const struct hf_src *h = ud;
    return hf_plan_stream_tensor(h->p, i, 0, sink, sink_ud, err);
}

static void hf_src_close(struct hf_src *h)
{
    gguf_close(h->kv);
    free(h->t);
    hf_plan_free(h->p);
    hf_model_close(h->m);
    memset(h, 0, sizeof *h);
}

static void base_name(const char *path, char *out, size_t n)
{
    size_t len = strlen(path);
    while (len > 1 && path[len - 1] == '/') len--;
    size_t b = len;
    while (b > 0 && path[b - 1] != '/') b--;
    snprintf(out, n, "%.*s", (int)(len - b), path + b);
}

#define TRY(expr)                 \
    do {                          \
        s = (expr);               \
        if (s != MW_OK) goto out; \
    } while (0)

/* The KVs `memwall convert --type f16` writes (hf/hf_convert.c), minus
 * general.file_type and general.quantization_version, which the quant
 * pipeline writes itself: written to a metadata-only GGUF beside the output,
 * mapped, and unlinked at once. tests/e2e/quant_hf.sh checks that quantizing
 * the directory gives the same bytes as converting then quantizing. */
static enum mw_status hf_kvs(const char *dir, const struct hf_config *c, const struct hf_plan *p,
                             const char *out_path, struct gguf_file **kv, struct mw_err *err)
{
    enum mw_status s;
    struct hf_tok *tok = NULL;
    struct gguf_writer *w = NULL;
    char tmp[PATH_MAX], base[256], key[128];
    const char *a = c->gguf_arch;
    if ((size_t)snprintf(tmp, sizeof tmp, "%s.kv-%ld", out_path, (long)getpid()) >= sizeof tmp)
        return MW_FAIL(err, MW_E_USAGE, MW_ERR_OFF_NONE, "output path too long");
    TRY(hf_tok_load(dir, &tok, err));
    if (hf_tok_n_vocab(tok) != c->n_vocab) {
        mw_err_set_path(err, hf_tok_source(tok));
        mw_err_set_where(err, "tokenizer");
        s = MW_FAIL(err, MW_E_FORMAT, MW_ERR_OFF_NONE,
                    "%u tokens, but config.json vocab_size (the embedding rows) is %u",
                    hf_tok_n_vocab(tok), c->n_vocab);
        goto out;
    }
    base_name(dir, base, sizeof base);
    TRY(gguf_writer_init(&w, err));
    TRY(gguf_writer_set_str(w, "general.architecture", a, err));
    TRY(gguf_writer_set_str(w, "general.type", "model", err));
    TRY(gguf_writer_set_str(w, "general.name", base, err));
#define K(suffix) (snprintf(key, sizeof key, "%s.%s", a, suffix), key)
    TRY(gguf_writer_set_u32(w, K("block_count"), c->n_layer, err));
    TRY(gguf_writer_set_u32(w, K("context_length"), c->n_ctx, err));
    TRY(gguf_writer_set_u32(w, K("embedding_length"), c->n_embd, err));
    TRY(gguf_writer_set_u32(w, K("feed_forward_length"), c->n_ff, err));
    TRY(gguf_writer_set_u32(w, K("attention.head_count"), c->n_head, err));
    TRY(gguf_writer_set_u32(w, K("attention.head_count_kv"), c->n_head_kv, err));
    if (c->has_rope_theta) TRY(gguf_writer_set_f32(w, K("rope.freq_base"), c->rope_theta, err));
    TRY(gguf_writer_set_f32(w, K("attention.layer_norm_rms_epsilon"), c->rms_eps, err));
    if (c->head_dim_explicit) {
        TRY(gguf_writer_set_u32(w, K("attention.key_length"), c->head_dim, err));
        TRY(gguf_writer_set_u32(w, K("attention.value_length"), c->head_dim, err));
    }
    if (c->arch != HF_ARCH_QWEN2) {
        TRY(gguf_writer_set_u32(w, K("vocab_size"), c->n_vocab, err));
        TRY(gguf_writer_set_u32(w, K("rope.dimension_count"), c->head_dim, err));
    }
    if (c->rope_scaling == HF_ROPE_LINEAR) {
        TRY(gguf_writer_set_str(w, K("rope.scaling.type"), "linear", err));
        TRY(gguf_writer_set_f32(w, K("rope.scaling.factor"), (float)c->rope_factor, err));
    }
#undef K
    TRY(hf_tok_write_gguf(tok, w, hf_arch_name(c->arch), err));
    TRY(gguf_writer_set_str(w, "memwall.source", base, err));
    TRY(gguf_writer_set_str(w, "memwall.source_dtype", hf_plan_source_dtype(p), err));
    TRY(gguf_writer_set_str(w, "memwall.convert.type", hf_out_type_name(HF_OUT_F16), err));
    TRY(gguf_writer_open(w, tmp, err));
    TRY(gguf_writer_finish(w, err));
    s = gguf_open(tmp, GGUF_OPEN_DEFAULT, kv, err);
    unlink(tmp);
out:
    gguf_writer_free(w);
    hf_tok_free(tok);
    return s;
}

static enum mw_status hf_src_open(const char *dir, const char *out_path, struct hf_src *h,
                                  struct quant_source *src, struct mw_err *err)
{
    enum mw_status s;
    memset(h, 0, sizeof *h);
    memset(src, 0, sizeof *src);
    TRY(hf_model_open(dir, &h->m, err));
    TRY(hf_plan_build(h->m, HF_OUT_F16, &h->p, err));
    TRY(hf_kvs(dir, hf_model_config(h->m), h->p, out_path, &h->kv, err));
    const uint64_t n = hf_plan_count(h->p);
    if (!(h->t = calloc(n ? (size_t)n : 1, sizeof *h->t))) {
        s = MW_FAIL(err, MW_E_NOMEM, MW_ERR_OFF_NONE, "out of memory");
        goto out;
    }
    for (uint64_t i = 0; i < n; i++) {
        const struct hf_plan_tensor *e = hf_plan_get(h->p, i);
        h->t[i].name = e->name;
        h->t[i].type = e->type;
        h->t[i].n_dims = e->n_dims;
        memcpy(h->t[i].ne, e->ne, sizeof h->t[i].ne);
    }
    src->kv = h->kv;
    src->n_tensors = n;
    src->tensors = h->t;
    src->read = hfsrc_read;
    src->ud = h;
out:
    if (s != MW_OK) hf_src_close(h);
    return s;
}
#undef TRY
#endif

// --- flags ---

static bool parse_uint(const char *s, unsigned long max, unsigned long *out)
{
    if (!s || !*s || *s == '-' || *s == '+') return false;
    char *end;
    errno = 0;
    const unsigned long v = strtoul(s, &end, 10);
    if (errno || *end || v > max) return false;
    *out = v;
    return true;
}

static int parse_type(const char *flag, const char *v, int32_t *out)
{
    const int t = gguf_type_from_name(v);
    const struct gguf_type_info *ti = t >= 0 ? gguf_type_get((uint32_t)t) : NULL;
    if (!ti || !ti->name)
        return cmd_usage_error(cmd, usage_text, "%s: unknown type '%s'", flag, v);
    *out = t;
    return 0;
}

static const char *reason_name(enum quant_reason r, bool fb)
{
    if (fb) return "fallback";
    switch (r) {
    case QUANT_KEEP: return "keep";
    case QUANT_RULE: return "rule";
    case QUANT_PURE: return "pure";
    case QUANT_OVERRIDE: return "override";
    }
    return "?";
}

static const char *tname(uint32_t t)
{
    const struct gguf_type_info *ti = gguf_type_get(t);
    return ti && ti->name ? ti->name : "?";
}

static uint64_t n_elements(const struct quant_plan *p)
{
    uint64_t n = 0;
    for (uint64_t i = 0; i < quant_plan_count(p); i++) {
        const struct quant_tensor_desc *t = quant_plan_get(p, i)->src;
        n += t->ne[0] * t->ne[1] * t->ne[2] * t->ne[3];
    }
    return n;
}

static void print_plan(const struct quant_plan *p)
{
    printf("%5s  %-36s %-24s %-6s %-6s %-8s %s\n", "#", "name", "shape", "from", "to", "why",
           "imatrix");
    for (uint64_t i = 0; i < quant_plan_count(p); i++) {
        const struct quant_plan_entry *e = quant_plan_get(p, i);
        char shape[64];
        const uint64_t *ne = e->src->ne;
        int k = snprintf(shape, sizeof shape, "%llu", (unsigned long long)ne[0]);
        for (uint32_t d = 1; d < e->src->n_dims && k > 0 && (size_t)k < sizeof shape; d++)
            k += snprintf(shape + k, sizeof shape - (size_t)k, "x%llu", (unsigned long long)ne[d]);
        char nm[256];
        esc_name(e->src->name, nm, sizeof nm);
        printf("%5llu  %-36s %-24s %-6s %-6s %-8s %s\n", (unsigned long long)i, nm, shape,
               tname(e->src->type), tname(e->choice.type),
               reason_name(e->choice.reason, e->choice.fallback), e->imatrix ? "yes" : "-");
    }
    const uint64_t ne = n_elements(p);
    printf("tensor data: %llu -> %llu bytes (%.2f bpw)\n",
           (unsigned long long)quant_plan_src_bytes(p), (unsigned long long)quant_plan_out_bytes(p),
           ne ? (double)quant_plan_out_bytes(p) * 8.0 / (double)ne : 0.0);
}

// --- mixed precision to a budget (quant/quant_alloc.h) ---

enum budget_kind { BUDGET_NONE, BUDGET_BPW, BUDGET_SIZE, BUDGET_RAM };

struct alloc_req {
    enum budget_kind kind;
    double bpw;           /* --bpw */
    uint64_t file_bytes;  /* --size, or --fit-ram's weight budget */
    const char *budget;   /* the memwall.quant.budget value */
    bool quiet;
    unsigned n_threads;
};

/* Candidate types, cheapest first. */
static const uint32_t alloc_types[] = {GGUF_TYPE_Q2_K, GGUF_TYPE_Q3_K,  GGUF_TYPE_IQ4_XS,
                                       GGUF_TYPE_Q4_K, GGUF_TYPE_Q5_K,  GGUF_TYPE_Q6_K,
                                       GGUF_TYPE_Q8_0, GGUF_TYPE_F16};
#define N_ALLOC_TYPES (sizeof alloc_types / sizeof alloc_types[0])
/* Rows measured per tensor (evenly spaced) before the loss is scaled up. */
#define ALLOC_MAX_ROWS 4096

struct alloc_item {
    uint64_t plan_i;
    const struct quant_tensor_desc *t;
    struct quant_alloc_cand cand[N_ALLOC_TYPES];
    uint32_t n_cand;
};

static uint64_t pad_to(uint64_t v, uint64_t a) { return (v + a - 1) / a * a; }

/* "^name$=type" with the regex metacharacters of name escaped. */
static bool exact_spec(const char *name, uint32_t type, char *out, size_t cap)
{
    size_t o = 0;
    out[o++] = '^';
    for (const char *p = name; *p; p++) {
        if (o + 3 >= cap) return false;
        if (strchr(".[]()*+?{}|^$\\", *p)) out[o++] = '\\';
        out[o++] = *p;
    }
    const int k = snprintf(out + o, cap - o, "$=%s", tname(type));
    return k > 0 && (size_t)k < cap - o;
}

/* Loss of one tensor under type t (rows sampled when there are many). */
static enum mw_status tensor_loss(const struct quant_plan_entry *e, const float *x, uint64_t rows,
                                  const float *imp, uint32_t t, unsigned nt, double *loss,
                                  struct mw_err *err)
{
    const uint64_t n = e->src->ne[0], ne1 = e->src->ne[1], nex = rows / (ne1 ? ne1 : 1);
    enum mw_status s;
    if (nex > 1 && e->imatrix) { /* per-expert importance */
        double sum = 0;
        for (uint64_t ex = 0; ex < nex; ex++) {
            double l;
            if ((s = quant_alloc_loss(t, x + ex * ne1 * n, ne1, n, e->imatrix + ex * n,
                                      e->imatrix + ex * n, nt, &l, err)) != MW_OK)
                return s;
            sum += l;
        }
        *loss = sum;
        return MW_OK;
    }
    if (rows <= ALLOC_MAX_ROWS) return quant_alloc_loss(t, x, rows, n, e->imatrix, imp, nt, loss, err);
    const uint64_t stride = (rows + ALLOC_MAX_ROWS - 1) / ALLOC_MAX_ROWS;
    const uint64_t ns = (rows + stride - 1) / stride;
    float *sub = malloc((size_t)(ns * n) * sizeof *sub);
    if (!sub) return MW_FAIL(err, MW_E_NOMEM, MW_ERR_OFF_NONE, "out of memory");
    for (uint64_t r = 0; r < ns; r++) memcpy(sub + r * n, x + r * stride * n, (size_t)n * sizeof *x);
    s = quant_alloc_loss(t, sub, ns, n, e->imatrix, imp, nt, loss, err);
    free(sub);
    *loss *= (double)rows / (double)ns;
    return s;
}

/* Measure every allocatable tensor of p0 under every candidate type. */
static enum mw_status measure(const struct quant_source *src, const struct quant_plan *p0,
                              const struct alloc_req *rq, bool losses,
                              struct alloc_item **out_items, uint64_t *out_n, struct mw_err *err)
{
    const uint64_t np = quant_plan_count(p0);
    struct alloc_item *it = calloc(np ? (size_t)np : 1, sizeof *it);
    float *onorm = NULL, *x = NULL;
    uint64_t n = 0;
    enum mw_status s = MW_OK;
    if (!it) return MW_FAIL(err, MW_E_NOMEM, MW_ERR_OFF_NONE, "out of memory");
    /* output.weight reads rmsnorm(h) * output_norm (unit mean square before
     * the norm weight): importance output_norm_j^2 where no imatrix has it */
    for (uint64_t i = 0; i < src->n_tensors && !onorm && losses; i++) {
        if (strcmp(src->tensors[i].name, "output_norm.weight") != 0) continue;
        uint64_t r;
        if ((s = quant_alloc_read_f32(src, i, &onorm, &r, err)) != MW_OK) goto out;
        for (uint64_t j = 0; j < src->tensors[i].ne[0]; j++) onorm[j] *= onorm[j];
    }
    for (uint64_t i = 0; i < np; i++) {
        const struct quant_plan_entry *e = quant_plan_get(p0, i);
        if (e->choice.type == e->src->type || e->choice.reason == QUANT_OVERRIDE ||
            e->choice.reason == QUANT_KEEP)
            continue;
        struct alloc_item *a = &it[n];
        a->plan_i = i;
        a->t = e->src;
        uint64_t rows = 0;
        if (losses && (s = quant_alloc_read_f32(src, e->src_index, &x, &rows, err)) != MW_OK)
            goto out;
        const float *imp = e->imatrix;
        if (!imp && onorm && strcmp(e->src->name, "output.weight") == 0) imp = onorm;
        for (size_t k = 0; k < N_ALLOC_TYPES; k++) {
            const uint32_t t = alloc_types[k];
            const struct gguf_type_info *ti = gguf_type_get(t);
            uint64_t nb;
            if (!ti || e->src->ne[0] % ti->blck || !gguf_tensor_nbytes(t, e->src->ne, &nb))
                continue;
            double l = 0;
            if (losses && (s = tensor_loss(e, x, rows, imp, t, rq->n_threads, &l, err)) != MW_OK) {
                mw_err_set_where(err, "tensor '%s'", e->src->name);
                goto out;
            }
            a->cand[a->n_cand++] = (struct quant_alloc_cand){
                .type = t, .bytes = rq->kind == BUDGET_BPW ? nb : pad_to(nb, 32), .loss = l};
        }
        free(x);
        x = NULL;
        if (a->n_cand) n++;
    }
out:
    free(x);
    free(onorm);
    if (s != MW_OK) {
        free(it);
        return s;
    }
    *out_items = it;
    *out_n = n;
    return MW_OK;
}

static void fmt_bytes(char *b, size_t n, uint64_t v)
{
    snprintf(b, n, "%llu (%.2f MiB)", (unsigned long long)v, (double)v / 1048576.0);
}

/*
 * Choose a type per tensor for the budget in rq and express it as exact-name
 * overrides (after the user's own, which keep their tensors): *ov_out (the
 * caller frees) replaces o->rules.overrides. *predicted: the file size the
 * final plan gives. Returns 0 or an exit status (message printed).
 */
static int allocate(const struct quant_source *src, struct quant_opts *o,
                    const struct quant_overrides *user_ov, const struct alloc_req *rq,
                    struct quant_overrides **ov_out, uint64_t *predicted)
{
    struct mw_err err;
    mw_err_clear(&err);
    struct quant_plan *p0 = NULL, *p1 = NULL;
    struct alloc_item *it = NULL;
    struct quant_alloc_item *ai = NULL;
    uint32_t *choice = NULL;
    struct quant_overrides *ov = NULL;
    uint64_t n = 0;
    int rc = 0;
    enum mw_status s;
    o->rules.overrides = user_ov;
    /* the plans built here repeat the final plan's notices: not printed twice */
    const quant_log_fn log = o->log;
    o->log = NULL;
    if ((s = quant_plan_build(src, o, &p0, &err)) != MW_OK) goto fail;
    /* sizes first (cheap): an impossible budget is refused before the
     * losses are measured */
    if ((s = measure(src, p0, rq, false, &it, &n, &err)) != MW_OK) goto fail;
    if (n == 0) {
        rc = cmd_usage_error(cmd, usage_text, "no tensor left to allocate types to");
        goto done;
    }
    ai = calloc((size_t)n, sizeof *ai);
    choice = calloc((size_t)n, sizeof *choice);
    if (!ai || !choice) {
        s = MW_FAIL(&err, MW_E_NOMEM, MW_ERR_OFF_NONE, "out of memory");
        goto fail;
    }
    uint64_t fixed = 0, n_el = 0, min_items = 0, max_items = 0;
    for (uint64_t k = 0; k < n; k++) {
        ai[k] = (struct quant_alloc_item){.n_cand = it[k].n_cand, .cand = it[k].cand};
        min_items += it[k].cand[0].bytes;
        max_items += it[k].cand[it[k].n_cand - 1].bytes;
    }
    for (uint64_t i = 0, k = 0; i < quant_plan_count(p0); i++) {
        const struct quant_plan_entry *e = quant_plan_get(p0, i);
        const uint64_t *ne = e->src->ne;
        n_el += ne[0] * ne[1] * ne[2] * ne[3];
        if (k < n && it[k].plan_i == i) {
            k++;
            continue;
        }
        fixed += rq->kind == BUDGET_BPW ? e->out_bytes : pad_to(e->out_bytes, 32);
    }
    uint64_t target; /* what the items may take */
    uint64_t hdr = 0;
    if (rq->kind == BUDGET_BPW) {
        const double want = rq->bpw * (double)n_el / 8.0;
        if (!(want >= (double)(fixed + min_items))) {
            rc = cmd_usage_error(cmd, usage_text,
                                 "--bpw %g is below the smallest this model can have (%.4f bpw: "
                                 "Q2_K or the cheapest valid type everywhere)",
                                 rq->bpw, (double)(fixed + min_items) * 8.0 / (double)n_el);
            goto done;
        }
        target = (uint64_t)want - fixed;
    } else {
        uint64_t fs0, data0 = 0;
        if ((s = quant_plan_file_size(p0, &fs0, &err)) != MW_OK) goto fail;
        for (uint64_t i = 0; i < quant_plan_count(p0); i++)
            data0 += pad_to(quant_plan_get(p0, i)->out_bytes, 32);
        hdr = fs0 > data0 ? fs0 - data0 : 0;
        /* the exact-name overrides add to the header: ~ one string each */
        for (uint64_t k = 0; k < n; k++) hdr += 8 + strlen(it[k].t->name) + 12;
        if (rq->file_bytes < hdr + fixed + min_items) {
            char b[64];
            fmt_bytes(b, sizeof b, hdr + fixed + min_items);
            rc = cmd_usage_error(cmd, usage_text,
                                 "%s is below the smallest file this model can have: %s "
                                 "(Q2_K or the cheapest valid type everywhere)",
                                 rq->kind == BUDGET_SIZE ? "--size" : "--fit-ram's weight budget",
                                 b);
            goto done;
        }
        target = rq->file_bytes - hdr - fixed;
    }
    if (target > max_items) target = max_items;
    free(it);
    it = NULL;
    if ((s = measure(src, p0, rq, true, &it, &n, &err)) != MW_OK) goto fail;
    for (uint64_t k = 0; k < n; k++)
        ai[k] = (struct quant_alloc_item){.n_cand = it[k].n_cand, .cand = it[k].cand};
    struct quant_alloc_result res;
    uint64_t fs = 0;
    for (int iter = 0; iter < 8; iter++) {
        if ((s = quant_alloc_solve(ai, n, target, choice, &res, &err)) != MW_OK) {
            if (s == MW_E_VALUE) {
                rc = cmd_usage_error(cmd, usage_text, "budget too small: %s", err.msg);
                goto done;
            }
            goto fail;
        }
        quant_overrides_free(ov);
        ov = NULL;
        for (uint64_t i = 0; i < quant_overrides_count(user_ov); i++)
            if ((s = quant_overrides_add(&ov, quant_overrides_spec(user_ov, i), &err)) != MW_OK)
                goto fail;
        for (uint64_t k = 0; k < n; k++) {
            char spec[512];
            if (!exact_spec(it[k].t->name, it[k].cand[choice[k]].type, spec, sizeof spec)) {
                s = MW_FAIL(&err, MW_E_UNSUPPORTED, MW_ERR_OFF_NONE, "tensor name too long");
                goto fail;
            }
            if ((s = quant_overrides_add(&ov, spec, &err)) != MW_OK) goto fail;
        }
        o->rules.overrides = ov;
        quant_plan_free(p1);
        p1 = NULL;
        if ((s = quant_plan_build(src, o, &p1, &err)) != MW_OK) goto fail;
        for (uint64_t k = 0; k < n; k++) {
            const struct quant_plan_entry *e = quant_plan_get(p1, it[k].plan_i);
            if (e->src != it[k].t || e->choice.type != it[k].cand[choice[k]].type) {
                s = MW_FAIL(&err, MW_E_UNSUPPORTED, MW_ERR_OFF_NONE,
                            "tensor '%s': the exact-name rule did not select it (a name with "
                            "upper-case letters?)",
                            it[k].t->name);
                goto fail;
            }
        }
        if ((s = quant_plan_file_size(p1, &fs, &err)) != MW_OK) goto fail;
        if (rq->kind == BUDGET_BPW) break;
        if (fs <= rq->file_bytes) break;
        const uint64_t over = fs - rq->file_bytes;
        if (target < over + min_items) {
            rc = cmd_usage_error(cmd, usage_text, "budget too small for this model's header");
            goto done;
        }
        target -= over;
    }
    if (rq->kind != BUDGET_BPW && fs > rq->file_bytes) {
        s = MW_FAIL(&err, MW_E_VALUE, MW_ERR_OFF_NONE,
                    "could not fit %llu bytes (predicted %llu)",
                    (unsigned long long)rq->file_bytes, (unsigned long long)fs);
        goto fail;
    }
    *predicted = fs;
    if (!rq->quiet) {
        fprintf(stderr, "memwall quant: mixed precision, budget %s: %llu tensors allocated "
                        "(%s solver, DP unit %llu bytes)\n",
                rq->budget, (unsigned long long)n, res.dp_exact ? "exact" : "rounded",
                (unsigned long long)res.unit);
        fprintf(stderr, "  %-32s %-12s %-7s %10s %12s %12s\n", "tensor", "shape", "type", "bytes",
                "est. loss", "loss@Q8_0");
        for (uint64_t k = 0; k < n; k++) {
            const struct quant_alloc_cand *c = &it[k].cand[choice[k]];
            double l8 = -1;
            for (uint32_t j = 0; j < it[k].n_cand; j++)
                if (it[k].cand[j].type == GGUF_TYPE_Q8_0) l8 = it[k].cand[j].loss;
            char nm[64], shape[48];
            esc_name(it[k].t->name, nm, 33);
            snprintf(shape, sizeof shape, "%llux%llu", (unsigned long long)it[k].t->ne[0],
                     (unsigned long long)(it[k].t->ne[1] * it[k].t->ne[2] * it[k].t->ne[3]));
            fprintf(stderr, "  %-32s %-12s %-7s %10llu %12.4e %12.4e\n", nm, shape, tname(c->type),
                    (unsigned long long)c->bytes, c->loss, l8);
        }
        const uint64_t data = quant_plan_out_bytes(p1);
        fprintf(stderr,
                "memwall quant: predicted file %llu bytes, tensor data %llu bytes (%.4f bpw), "
                "estimated loss %.6e\n",
                (unsigned long long)fs, (unsigned long long)data,
                (double)data * 8.0 / (double)n_el, res.loss);
    }
    *ov_out = ov;
    ov = NULL;
    goto done;
fail:
    if (err.code == MW_OK) MW_FAIL(&err, s, MW_ERR_OFF_NONE, "%s", mw_status_msg(s));
    rc = cmd_fail(cmd, &err);
done:
    o->log = log;
    o->rules.overrides = user_ov;
    quant_overrides_free(ov);
    quant_plan_free(p0);
    quant_plan_free(p1);
    free(it);
    free(ai);
    free(choice);
    return rc;
}

#if defined(MW_HAVE_FULL)
/* --corpus with a budget and no --imatrix: the allocation's losses need an
 * importance per input column. One statistics-only calibration pass over
 * the same samples the method will use gives llama.cpp's imatrix (mean x²),
 * written to a private temp directory, read back and removed at once. */
static enum mw_status corpus_imatrix(const char *model, const char *corpus, uint32_t n_samples,
                                     uint32_t seq_len, unsigned n_threads, uint64_t max_memory,
                                     struct quant_imatrix **out, struct mw_err *err)
{
    struct calib_corpus *c = NULL;
    struct calib_model *m = NULL;
    struct calib_samples *smp = NULL;
    struct calib_stats *st = NULL;
    char dir[PATH_MAX], path[PATH_MAX + 32];
    bool made = false;
    enum mw_status s;
    *out = NULL;
    if ((s = calib_corpus_load(corpus, CALIB_CORPUS_AUTO, &c, err)) != MW_OK) goto done;
    if ((s = calib_model_open(model, &m, err)) != MW_OK) goto done;
    struct calib_sample_opts so = {.n_samples = n_samples, .seq_len = seq_len};
    so.n_ctx_max = calib_model_hparams(m)->n_ctx_train;
    if ((s = calib_samples_build(c, calib_model_tok(m), &so, &smp, err)) != MW_OK) goto done;
    struct calib_run_opts ro = {.n_threads = n_threads ? n_threads : 1, .max_memory = max_memory};
    if ((s = calib_run(m, smp, &ro, &st, err)) != MW_OK) goto done;
    const char *td = getenv("TMPDIR");
    if ((size_t)snprintf(dir, sizeof dir, "%s/memwall-imatrix-XXXXXX",
                         td && td[0] ? td : "/tmp") >= sizeof dir) {
        s = MW_FAIL(err, MW_E_USAGE, MW_ERR_OFF_NONE, "TMPDIR path too long");
        goto done;
    }
    if (!mkdtemp(dir)) {
        mw_err_set_path(err, dir);
        s = MW_FAIL(err, MW_E_IO, MW_ERR_OFF_NONE, "cannot create a temporary directory: %s",
                    strerror(errno));
        goto done;
    }
    made = true;
    snprintf(path, sizeof path, "%s/corpus.imatrix", dir);
    const char *base = strrchr(corpus, '/');
    const char *ds[1] = {base ? base + 1 : corpus};
    const struct calib_imatrix_meta meta = {.datasets = ds, .n_datasets = 1};
    if ((s = calib_imatrix_write(st, &meta, CALIB_IMATRIX_GGUF, path, err)) != MW_OK) goto done;
    s = quant_imatrix_load(path, out, err);
    (void)unlink(path);
done:
    if (made) (void)rmdir(dir);
    calib_stats_free(st);
    calib_samples_free(smp);
    calib_corpus_free(c);
    calib_model_close(m);
    return s;
}
#endif

#if defined(MW_HAVE_FULL)
/* --fit-ram R --ctx N [--kv T]: the file budget is what `memwall plan`
 * leaves for the weights (calib_mem_weight_budget: R's app share minus the
 * KV cache and the runtime overhead). */
static int fit_ram_budget(const struct gguf_file *f, struct hf_model *hm, struct alloc_req *rq,
                          unsigned long ctx, const char *kv_name, char *bs, size_t bn, bool quiet)
{
    struct mw_err err;
    mw_err_clear(&err);
    enum rt_kv_type kv = RT_KV_F16;
    if (kv_name && !rt_kv_type_parse(kv_name, &kv))
        return cmd_usage_error(cmd, usage_text, "--kv: expected f16 or q8_0");
    struct rt_hparams hp;
    uint64_t n_bias = 0;
    enum mw_status s;
    if (f) {
        struct rt_model *rm = NULL;
        if ((s = rt_model_from_gguf(f, &rm, &err)) != MW_OK) return cmd_fail(cmd, &err);
        hp = *rt_model_hparams(rm);
        rt_model_close(rm);
        for (uint64_t i = 0; i < gguf_tensor_count(f); i++) {
            const struct gguf_tensor *gt = gguf_tensor_get(f, i);
            if (strstr(gt->name, ".bias")) n_bias += gt->ne[0];
        }
    } else {
        const struct hf_config *c = hf_model_config(hm);
        hp = (struct rt_hparams){.n_embd = c->n_embd, .n_layer = c->n_layer, .n_head = c->n_head,
                                 .n_head_kv = c->n_head_kv, .head_dim = c->head_dim,
                                 .n_ff = c->n_ff, .n_rot = c->head_dim, .n_ctx_train = c->n_ctx,
                                 .n_vocab = c->n_vocab};
        if (c->arch == HF_ARCH_QWEN2)
            n_bias = (uint64_t)c->n_layer *
                     ((uint64_t)c->n_head * c->head_dim + 2 * (uint64_t)c->n_head_kv * c->head_dim);
    }
    struct calib_mem_arch arch;
    calib_mem_arch_from_hparams(&hp, n_bias, &arch);
    struct calib_mem mm;
    const struct calib_mem_opts mo = {.n_ctx = (uint32_t)ctx, .kv_type = kv,
                                      .weight_type = GGUF_TYPE_Q4_K};
    if ((s = calib_mem_estimate(&arch, &mo, &mm, &err)) != MW_OK) {
        if (s == MW_E_USAGE) return cmd_usage_error(cmd, usage_text, "%s", err.msg);
        return cmd_fail(cmd, &err);
    }
    const uint64_t ram = rq->file_bytes;
    const uint64_t w = calib_mem_weight_budget(ram, &mm);
    if (w == 0)
        return cmd_usage_error(cmd, usage_text,
                               "--fit-ram %llu: nothing is left for the weights (app share %llu, "
                               "KV cache %llu, overhead %llu bytes)",
                               (unsigned long long)ram,
                               (unsigned long long)calib_mem_app_budget(ram),
                               (unsigned long long)mm.kv_bytes,
                               (unsigned long long)mm.overhead_bytes);
    if (!quiet)
        fprintf(stderr,
                "memwall quant: --fit-ram %llu: app share %llu - KV cache %llu (ctx %lu, %s) - "
                "overhead %llu = %llu bytes for the file\n",
                (unsigned long long)ram, (unsigned long long)calib_mem_app_budget(ram),
                (unsigned long long)mm.kv_bytes, ctx, rt_kv_type_name(kv),
                (unsigned long long)mm.overhead_bytes, (unsigned long long)w);
    snprintf(bs, bn, "fit-ram=%llu,ctx=%lu,kv=%s,file=%llu", (unsigned long long)ram, ctx,
             rt_kv_type_name(kv), (unsigned long long)w);
    rq->file_bytes = w;
    return 0;
}
#endif

int cmd_quant(int argc, char **argv)
{
    const char *srcp = NULL, *out = NULL, *preset_name = NULL, *imatrix_path = NULL;
    const char *corpus_path = NULL, *method_name = NULL;
    unsigned long n_samples = 0, seq_len = 0;
    uint64_t max_memory = 0; /* --max-memory (with --corpus); 0: not given */
    struct quant_opts o = {.rules = {.output_type = -1, .token_embd_type = -1}};
    struct quant_overrides *ov = NULL;
    bool quiet = false, dry = false, end_of_opts = false;
    struct alloc_req rq = {.kind = BUDGET_NONE};
    struct quant_overrides *aov = NULL;
    const char *budget_arg = NULL, *kv_name = NULL;
    unsigned long ctx = 0;
    char budget_str[160] = "";
    uint64_t predicted = 0;
    long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
    unsigned long threads = ncpu > 0 ? (unsigned long)ncpu : 1;
    int rc = 0;
    struct mw_err err;
    mw_err_clear(&err);

    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (end_of_opts || a[0] != '-' || a[1] == 0) {
            if (srcp) {
                rc = cmd_usage_error(cmd, usage_text, "one SRC at a time (got '%s' and '%s')",
                                     srcp, a);
                goto done;
            }
            srcp = a;
            continue;
        }
        if (strcmp(a, "--") == 0) {
            end_of_opts = true;
            continue;
        }
        if (cmd_is_help(a)) {
            fputs(usage_text, stdout);
            rc = cmd_finish_output(cmd, 0);
            goto done;
        }
        static const char *const flags[] = {"-q", "--quiet", "--pure", "--dry-run",
                                            "--leave-output-tensor", "--allow-requantize"};
        bool *const flag_slot[] = {&quiet, &quiet, &o.rules.pure, &dry, &o.rules.leave_output,
                                   &o.allow_requantize};
        bool known = false;
        for (size_t k = 0; k < sizeof flags / sizeof flags[0]; k++) {
            if (strcmp(a, flags[k]) == 0) {
                *flag_slot[k] = true;
                known = true;
            }
        }
        if (known) continue;
        /* valued options: "--opt V" or "--opt=V" */
        static const char *const valued[] = {"-o", "--output", "--preset", "--imatrix",
                                             "--type-override", "-t", "--threads",
                                             "--output-tensor-type", "--token-embedding-type",
                                             "--corpus", "--method", "--samples",
                                             "--seq-len", "--bpw", "--size", "--fit-ram",
                                             "--ctx", "--kv", "--max-memory"};
        const char *val = NULL;
        size_t which = 0;
        for (size_t k = 0; k < sizeof valued / sizeof valued[0] && !val; k++) {
            const size_t l = strlen(valued[k]);
            if (strcmp(a, valued[k]) == 0) {
                if (i + 1 >= argc) {
                    rc = cmd_usage_error(cmd, usage_text, "%s needs a value", a);
                    goto done;
                }
                val = argv[++i];
                which = k;
            } else if (valued[k][1] == '-' && strncmp(a, valued[k], l) == 0 && a[l] == '=') {
                val = a + l + 1;
                which = k;
            }
        }
        if (!val) {
            rc = cmd_usage_error(cmd, usage_text, "unknown option '%s'", a);
            goto done;
        }
        switch (which) {
        case 0: case 1: out = val; break;
        case 2: preset_name = val; break;
        case 3: imatrix_path = val; break;
        case 4:
            if (quant_overrides_add(&ov, val, &err) != MW_OK) {
                rc = cmd_usage_error(cmd, usage_text, "--type-override: %s", err.msg);
                goto done;
            }
            break;
        case 5: case 6:
            if (!parse_uint(val, 512, &threads) || threads == 0) {
                rc = cmd_usage_error(cmd, usage_text, "--threads: '%s' is not 1..512", val);
                goto done;
            }
            break;
        case 7:
            if ((rc = parse_type(a, val, &o.rules.output_type)) != 0) goto done;
            break;
        case 8:
            if ((rc = parse_type(a, val, &o.rules.token_embd_type)) != 0) goto done;
            break;
        case 9: corpus_path = val; break;
        case 10: method_name = val; break;
        case 11: case 12:
            if (!parse_uint(val, 1ul << 20, which == 11 ? &n_samples : &seq_len)) {
                rc = cmd_usage_error(cmd, usage_text, "%s: '%s' is not 0..1048576", a, val);
                goto done;
            }
            break;
        case 13: case 14: case 15:
            if (rq.kind != BUDGET_NONE) {
                rc = cmd_usage_error(cmd, usage_text, "one of --bpw, --size, --fit-ram at a time");
                goto done;
            }
            if (which == 13) {
                char *end;
                errno = 0;
                rq.bpw = strtod(val, &end);
                if (errno || end == val || *end || !(rq.bpw > 0) || rq.bpw > 64) {
                    rc = cmd_usage_error(cmd, usage_text,
                                         "--bpw: '%s' is not a number of bits per weight in "
                                         "(0, 64]",
                                         val);
                    goto done;
                }
                rq.kind = BUDGET_BPW;
            } else {
                if (!mw_parse_size(val, &rq.file_bytes)) {
                    rc = cmd_usage_error(cmd, usage_text,
                                         "%s: '%s' is not a size (bytes, or a number with K M G "
                                         "T / KiB MiB GiB TiB)",
                                         a, val);
                    goto done;
                }
                rq.kind = which == 14 ? BUDGET_SIZE : BUDGET_RAM;
            }
            budget_arg = val;
            break;
        case 16:
            if (!parse_uint(val, UINT32_MAX, &ctx) || ctx == 0) {
                rc = cmd_usage_error(cmd, usage_text, "--ctx: '%s' is not a positive count", val);
                goto done;
            }
            break;
        case 18:
            if (!mw_parse_size(val, &max_memory)) {
                rc = cmd_usage_error(cmd, usage_text,
                                     "--max-memory: expected a size such as 512M or 2G, got '%s'",
                                     val);
                goto done;
            }
            break;
        default: kv_name = val; break;
        }
    }
    if (!srcp) {
        rc = cmd_usage_error(cmd, usage_text, "missing SRC");
        goto done;
    }
    if (!dry && (!out || !out[0])) {
        rc = cmd_usage_error(cmd, usage_text, "missing -o OUT.gguf");
        goto done;
    }
    if (!preset_name && rq.kind == BUDGET_NONE) {
        rc = cmd_usage_error(cmd, usage_text, "missing --preset (or --bpw/--size/--fit-ram)");
        goto done;
    }
    if (!preset_name) preset_name = "Q4_K_M";
    if (rq.kind == BUDGET_RAM && !ctx) {
        rc = cmd_usage_error(cmd, usage_text, "--fit-ram needs --ctx N");
        goto done;
    }
    if (rq.kind != BUDGET_RAM && (ctx || kv_name)) {
        rc = cmd_usage_error(cmd, usage_text, "--ctx/--kv go with --fit-ram");
        goto done;
    }
#if !defined(MW_HAVE_FULL)
    if (rq.kind == BUDGET_RAM) {
        rc = cmd_usage_error(cmd, usage_text, "--fit-ram needs the full build");
        goto done;
    }
#endif
    if (!(o.rules.preset = quant_preset_find(preset_name))) {
        rc = cmd_usage_error(cmd, usage_text, "unknown preset '%s'", preset_name);
        goto done;
    }
    struct stat st;
    if (out && stat(out, &st) == 0 && S_ISDIR(st.st_mode)) {
        rc = cmd_usage_error(cmd, usage_text, "-o '%s' is a directory", out);
        goto done;
    }
    const bool src_is_dir = stat(srcp, &st) == 0 && S_ISDIR(st.st_mode);
#if !defined(MW_HAVE_FULL)
    if (src_is_dir) {
        rc = cmd_usage_error(cmd, usage_text,
                             "'%s' is a directory: this build reads GGUF files only", srcp);
        goto done;
    }
#endif
    o.rules.overrides = ov;
    o.n_threads = (unsigned)threads;

    struct ui ui = {.quiet = quiet, .progress_on = !quiet && !dry && isatty(STDERR_FILENO)};
    o.log = on_log;
    o.log_ud = &ui;
    if (ui.progress_on) {
        o.progress = on_progress;
        o.progress_ud = &ui;
    }

    struct quant_imatrix *im = NULL;
    struct gguf_file *f = NULL;
    struct quant_source src = {0};
    bool src_gguf = false;
#if defined(MW_HAVE_FULL)
    struct hf_src hs = {0};
#endif
    struct quant_plan *plan = NULL;
#if defined(MW_HAVE_FULL)
    struct quant_methods_src *mh = NULL;
#endif
    enum mw_status s = MW_OK;
    const double t0 = now_s();

    if (imatrix_path) {
        if ((s = quant_imatrix_load(imatrix_path, &im, &err)) != MW_OK) goto fail;
        o.imatrix = im;
        o.imatrix_file = imatrix_path;
    }
    if (src_is_dir) {
#if defined(MW_HAVE_FULL)
        /* the KV scratch file goes beside the output (--dry-run: TMPDIR) */
        char scratch[PATH_MAX];
        const char *td = getenv("TMPDIR");
        snprintf(scratch, sizeof scratch, "%s/memwall-quant", td && td[0] ? td : "/tmp");
        if ((s = hf_src_open(srcp, out ? out : scratch, &hs, &src, &err)) != MW_OK) goto fail;
#endif
    } else {
        /* a plan needs the header only: --dry-run also reads files whose
         * tensor data is absent (header-only GGUFs of large shapes) */
        if ((s = gguf_open(srcp, dry ? GGUF_OPEN_ALLOW_SHORT : GGUF_OPEN_DEFAULT, &f, &err)) !=
            MW_OK)
            goto fail;
        if ((s = quant_source_gguf(f, &src, &err)) != MW_OK) goto fail;
        src_gguf = true;
    }
    if (rq.kind != BUDGET_NONE) {
        if (rq.kind == BUDGET_BPW)
            snprintf(budget_str, sizeof budget_str, "bpw=%s", budget_arg);
        else if (rq.kind == BUDGET_SIZE)
            snprintf(budget_str, sizeof budget_str, "size=%llu",
                     (unsigned long long)rq.file_bytes);
#if defined(MW_HAVE_FULL)
        else if ((rc = fit_ram_budget(src_gguf ? f : NULL, src_is_dir ? hs.m : NULL, &rq, ctx,
                                      kv_name, budget_str, sizeof budget_str, quiet)) != 0)
            goto cleanup;
#endif
        rq.budget = budget_str;
        o.budget = budget_str; /* in the header: part of the predicted size */
        rq.quiet = quiet;
        rq.n_threads = (unsigned)threads;
        /* --corpus: the methods source names the method in the header
         * (memwall.quant.method / method_params, known only after the
         * calibration); the allocation reserves their longest form, so the
         * file can only come out a few bytes smaller than predicted */
        struct quant_source asrc = src;
        char wm[32], wp[160];
        if (corpus_path) {
            memset(wm, 'x', sizeof wm - 1), wm[sizeof wm - 1] = 0;
            memset(wp, 'x', sizeof wp - 1), wp[sizeof wp - 1] = 0;
            asrc.method = wm;
            asrc.method_params = wp;
        }
#if defined(MW_HAVE_FULL)
        /* the losses weigh columns by the corpus's own statistics; the
         * output itself is quantized by the method, which computes them
         * again per layer, so the imatrix is for the allocation only (its
         * header keys name the corpus while predicting: an upper bound) */
        struct quant_imatrix *cim = NULL;
        if (corpus_path && !im) {
            if (!quiet)
                fprintf(stderr, "memwall quant: importance for the allocation from %s "
                                "(a statistics pass)\n", corpus_path);
            if ((s = corpus_imatrix(srcp, corpus_path, (uint32_t)n_samples, (uint32_t)seq_len,
                                    (unsigned)threads, max_memory, &cim, &err)) != MW_OK)
                goto fail;
            o.imatrix = cim;
            o.imatrix_file = corpus_path;
        }
        rc = allocate(&asrc, &o, ov, &rq, &aov, &predicted);
        if (cim) {
            o.imatrix = NULL;
            o.imatrix_file = NULL;
            quant_imatrix_free(cim);
        }
        if (rc != 0) goto cleanup;
#else
        if ((rc = allocate(&asrc, &o, ov, &rq, &aov, &predicted)) != 0) goto cleanup;
#endif
        o.rules.overrides = aov;
        o.budget = budget_str;
    }
    const struct quant_source *psrc = &src;
#if defined(MW_HAVE_FULL)
    struct quant_source msrc;
    if (corpus_path) {
        struct quant_methods_opts mo = {.method = QUANT_METHOD_AWQ_GPTQ, .model_path = srcp,
                                        .corpus_path = corpus_path,
                                        .samples = {.n_samples = (uint32_t)n_samples,
                                                    .seq_len = (uint32_t)seq_len},
                                        .n_threads = (unsigned)threads,
                                        .max_memory = max_memory, .scratch_prefix = out};
        if (method_name && !quant_method_parse(method_name, &mo.method)) {
            rc = cmd_usage_error(cmd, usage_text, "--method: unknown method '%s'", method_name);
            goto cleanup;
        }
        if ((s = quant_methods_source(&src, &o, &mo, &msrc, &mh, &err)) != MW_OK) goto fail;
        psrc = &msrc;
    }
#else
    if (corpus_path || method_name || max_memory) {
        rc = cmd_usage_error(cmd, usage_text, "--corpus/--method need the full build");
        goto cleanup;
    }
#endif
    if ((s = quant_plan_build(psrc, &o, &plan, &err)) != MW_OK) goto fail;
    if (rq.kind != BUDGET_NONE && !quiet) {
        uint64_t fs;
        if ((s = quant_plan_file_size(plan, &fs, &err)) != MW_OK) goto fail;
        if (corpus_path ? fs > predicted : fs != predicted)
            fprintf(stderr, "memwall quant: warning: the plan's file size %llu differs from the "
                            "prediction %llu\n",
                    (unsigned long long)fs, (unsigned long long)predicted);
    }
    if (dry) {
        print_plan(plan);
        rc = cmd_finish_output(cmd, 0);
        goto cleanup;
    }
    struct quant_stats qs;
    ui.t0 = ui.last = now_s();
    s = quant_plan_write(plan, out, &qs, &err);
    if (ui.drawn) fputs("\r\033[K", stderr);
    if (s != MW_OK) goto fail;
    if (!quiet && rq.kind != BUDGET_NONE)
        fprintf(stderr, "memwall quant: file size %llu bytes, predicted %llu (%s)\n",
                (unsigned long long)qs.file_bytes, (unsigned long long)predicted,
                qs.file_bytes == predicted ? "exact"
                : corpus_path && qs.file_bytes < predicted
                    ? "bound: the method's header keys were reserved at their longest"
                    : "MISMATCH");
    if (!quiet) {
        const uint64_t ne = n_elements(plan);
        fprintf(stderr,
                "memwall quant: wrote %s (%s, %s, %llu bytes, %.2f bpw; %llu tensors quantized, "
                "%llu copied%s) in %.2fs\n",
                out, o.rules.preset->name, psrc->method ? psrc->method : im ? "imatrix" : "rtn",
                (unsigned long long)qs.file_bytes,
                ne ? (double)quant_plan_out_bytes(plan) * 8.0 / (double)ne : 0.0,
                (unsigned long long)qs.n_quantized, (unsigned long long)qs.n_copied,
                qs.n_fallback ? ", some with the row-length fallback" : "", now_s() - t0);
    }
    rc = 0;
    goto cleanup;
fail:
    if (err.code == MW_OK) MW_FAIL(&err, s, MW_ERR_OFF_NONE, "%s", mw_status_msg(s));
    rc = cmd_fail(cmd, &err);
cleanup:
    quant_plan_free(plan);
#if defined(MW_HAVE_FULL)
    quant_methods_source_free(mh);
#endif
    if (src_gguf) quant_source_gguf_free(&src);
#if defined(MW_HAVE_FULL)
    hf_src_close(&hs);
#endif
    gguf_close(f);
    quant_imatrix_free(im);
done:
    quant_overrides_free(aov);
    quant_overrides_free(ov);
    return rc;
}
