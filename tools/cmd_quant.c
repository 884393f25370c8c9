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

#include "../quant/quant.h"
#if defined(MW_HAVE_FULL)
#include "../quant/quant_methods.h"
#endif
#if defined(MW_HAVE_FULL)
#include "../hf/hf.h"
#include "../hf/hf_tok.h"
#endif
#include "cmd.h"

static const char usage_text[] =
    "usage: memwall quant SRC -o OUT.gguf --preset P [options]\n"
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
    "  --imatrix FILE             importance matrix (llama-imatrix .gguf or legacy .dat)\n"
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
    "  --method M                 rtn | gptq | awq | awq+gptq (with --corpus; default gptq)\n"
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
    fprintf(stderr, "memwall quant: %s%s\n",
            lvl == QUANT_LOG_WARN ? "warning: " : (lvl == QUANT_LOG_NOTICE ? "note: " : ""), msg);
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
    fprintf(stderr, "\r\033[Kquant: %3.0f%%  %.1f/%.1f MiB  tensor %llu/%llu %.40s%s",
            frac * 100.0, (double)done / 1048576.0, (double)total / 1048576.0,
            (unsigned long long)ti + 1, (unsigned long long)nt, name ? name : "", eta);
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
        printf("%5llu  %-36s %-24s %-6s %-6s %-8s %s\n", (unsigned long long)i, e->src->name, shape,
               tname(e->src->type), tname(e->choice.type),
               reason_name(e->choice.reason, e->choice.fallback), e->imatrix ? "yes" : "-");
    }
    const uint64_t ne = n_elements(p);
    printf("tensor data: %llu -> %llu bytes (%.2f bpw)\n",
           (unsigned long long)quant_plan_src_bytes(p), (unsigned long long)quant_plan_out_bytes(p),
           ne ? (double)quant_plan_out_bytes(p) * 8.0 / (double)ne : 0.0);
}

int cmd_quant(int argc, char **argv)
{
    const char *srcp = NULL, *out = NULL, *preset_name = NULL, *imatrix_path = NULL;
    const char *corpus_path = NULL, *method_name = NULL;
    unsigned long n_samples = 0, seq_len = 0;
    const char *maxmem_arg = NULL; /* --max-memory (with --corpus) */
    struct quant_opts o = {.rules = {.output_type = -1, .token_embd_type = -1}};
    struct quant_overrides *ov = NULL;
    bool quiet = false, dry = false, end_of_opts = false;
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
                                             "--seq-len", "--max-memory"};
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
        default: maxmem_arg = val; break;
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
    if (!preset_name) {
        rc = cmd_usage_error(cmd, usage_text, "missing --preset");
        goto done;
    }
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
    const struct quant_source *psrc = &src;
#if defined(MW_HAVE_FULL)
    struct quant_source msrc;
    if (corpus_path) {
        struct quant_methods_opts mo = {.method = QUANT_METHOD_GPTQ, .model_path = srcp,
                                        .corpus_path = corpus_path,
                                        .samples = {.n_samples = (uint32_t)n_samples,
                                                    .seq_len = (uint32_t)seq_len},
                                        .n_threads = (unsigned)threads,
                                        .scratch_prefix = out};
        if (maxmem_arg && !calib_parse_bytes(maxmem_arg, &mo.max_memory)) {
            rc = cmd_usage_error(cmd, usage_text,
                                 "--max-memory: expected a size such as 512M or 2G, got '%s'",
                                 maxmem_arg);
            goto cleanup;
        }
        if (method_name && !quant_method_parse(method_name, &mo.method)) {
            rc = cmd_usage_error(cmd, usage_text, "--method: unknown method '%s'", method_name);
            goto cleanup;
        }
        if ((s = quant_methods_source(&src, &o, &mo, &msrc, &mh, &err)) != MW_OK) goto fail;
        psrc = &msrc;
    }
#else
    if (corpus_path || method_name || maxmem_arg) {
        rc = cmd_usage_error(cmd, usage_text, "--corpus/--method need the full build");
        goto cleanup;
    }
#endif
    if ((s = quant_plan_build(psrc, &o, &plan, &err)) != MW_OK) goto fail;
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
    if (!quiet) {
        const uint64_t ne = n_elements(plan);
        fprintf(stderr,
                "memwall quant: wrote %s (%s, %s, %llu bytes, %.2f bpw; %llu tensors quantized, "
                "%llu copied%s) in %.2fs\n",
                out, o.rules.preset->name, im ? "imatrix" : "rtn",
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
    quant_overrides_free(ov);
    return rc;
}
