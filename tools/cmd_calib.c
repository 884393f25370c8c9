/*
 * tools/cmd_calib.c — `memwall calib MODEL --corpus F -o OUT.imatrix`: run
 * the model over a calibration corpus one decoder layer at a time and write
 * llama.cpp's importance matrix (GGUF, or legacy .dat with --legacy), then
 * read it back with quant's imatrix reader. The work is calib/ (calib.h).
 */
#define _POSIX_C_SOURCE 200809L
#include <math.h>
#include <stdio.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "calib/calib.h"
#include "core/mw_mem.h"
#include "quant/quant.h"
#include "tools/cmd.h"

static const char usage_text[] =
    "usage: memwall calib MODEL --corpus FILE -o OUT.imatrix [options]\n"
    "  Run MODEL (a Hugging Face checkpoint dir, or a GGUF file) over a calibration\n"
    "  corpus, one decoder layer at a time in FP32, and write the per-input-channel\n"
    "  activation statistics as a llama.cpp importance matrix (llama-quantize --imatrix).\n"
    "  --corpus FILE       plain text (one document) or .jsonl with a \"text\" field per\n"
    "                      line; either may be gzip'd\n"
    "  --format F          auto (default: .jsonl[.gz] -> jsonl), text, jsonl\n"
    "  -o, --output FILE   output (temp file + rename: complete or absent)\n"
    "  --legacy            write llama.cpp's legacy .dat format instead of GGUF\n"
    "  --samples N|all     samples to use (default 128; the first N of the corpus)\n"
    "  --seq-len L         tokens per sample after BOS (default 512; clamped to the\n"
    "                      model's context)\n"
    "  --llamacpp-chunks   cut samples as llama-imatrix -c L does (L positions, first\n"
    "                      token replaced by BOS) instead of BOS + L tokens\n"
    "  -t, --threads N     threads (default 1; results do not depend on it)\n"
    "  --batch-rows N      rows per GEMM batch (default 4096; the statistics do not\n"
    "                      depend on it)\n"
    "  --max-memory SIZE   bound on calib's own allocations (e.g. 512M, 2G; K/M/G are\n"
    "                      powers of 2): fewer rows per batch when needed, then the\n"
    "                      hidden states in a scratch file, else exit 3 before\n"
    "                      computing, saying what is needed and what to change.\n"
    "                      Default: the memory available (MemAvailable, cgroup limit;\n"
    "                      $MW_MEMAVAILABLE stands in for it) minus an eighth, at\n"
    "                      least 64 MiB, at most 2 GiB; 'none' or 0: no bound\n"
    "  --progress MODE     auto (default: a line per stage and layer with the elapsed\n"
    "                      time, rate and ETA when stderr is a terminal), none, or\n"
    "                      json (one JSON event per line on stderr, even with -q)\n"
    "  -q, --quiet         no progress and no summary\n"
    "exit status: 0 ok, 1 bad input (no output written), 2 usage, 3 I/O or resource error\n";

/* --samples N|all (all: 0) */
static bool parse_samples(void *ctx, const char *val, char *msg, size_t cap)
{
    (void)msg, (void)cap;
    uint64_t n = 0;
    if (strcmp(val, "all") != 0 && !cmd_parse_u64(val, 1, UINT32_MAX, &n)) return false;
    *(uint32_t *)ctx = (uint32_t)n;
    return true;
}

/* --max-memory SIZE | none | 0 (ctx: struct mem_opt) */
struct mem_opt {
    uint64_t bytes; /* 0: no bound */
    bool given;
};

static bool parse_max_memory(void *ctx, const char *val, char *msg, size_t cap)
{
    (void)msg, (void)cap;
    struct mem_opt *mo = ctx;
    mo->given = true;
    mo->bytes = 0;
    return strcmp(val, "none") == 0 || strcmp(val, "0") == 0 || mw_parse_size(val, &mo->bytes);
}

/* Without --max-memory: the bound from the machine (core/mw_mem.h), said
 * on stderr unless quiet; *av keeps where it came from. */
static enum mw_status default_bound(struct mem_opt *mo, struct mw_mem_avail *av, bool quiet,
                                    struct mw_err *err)
{
    const enum mw_status s = mw_mem_available(NULL, av, err);
    if (s != MW_OK) return s;
    mo->bytes = mw_mem_bound(av);
    if (quiet) return MW_OK;
    if (av->source == MW_MEM_SRC_NONE)
        fprintf(stderr, "memwall calib: no memory bound: the memory available could not be "
                        "read (--max-memory SIZE or %s=SIZE sets one)\n", MW_MEM_ENV);
    else
        fprintf(stderr,
                "memwall calib: memory bound %.1f MiB: %.1f MiB available (%s) minus a margin "
                "of %.1f MiB; --max-memory SIZE sets another, --max-memory none lifts it\n",
                (double)mo->bytes / 1048576.0, (double)av->bytes / 1048576.0, av->from,
                (double)mw_mem_margin(av->bytes) / 1048576.0);
    return MW_OK;
}

/* Read the file back with quant's reader: every weight present with the
 * values we meant (in_sum2 / count, in f32). */
static enum mw_status read_back(const char *path, const struct calib_stats *st,
                                uint64_t *n_entries, struct mw_err *err)
{
    struct quant_imatrix *im = NULL;
    enum mw_status s = quant_imatrix_load(path, &im, err);
    if (s) return s;
    const uint64_t want = calib_stats_n_entries(st);
    *n_entries = quant_imatrix_count(im);
    if (*n_entries != want)
        s = MW_FAIL(err, MW_E_FORMAT, MW_ERR_OFF_NONE, "read back %llu entries, wrote %llu",
                    (unsigned long long)*n_entries, (unsigned long long)want);
    for (uint64_t k = 0; !s && k < want; k++) {
        struct calib_entry ce;
        if (!calib_stats_entry_at(st, k, &ce)) break;
        const int64_t i = quant_imatrix_find(im, ce.name);
        const uint64_t n_in = ce.gs[0].n_in;
        uint64_t n = 0;
        const float *v = i >= 0 ? quant_imatrix_values(im, (uint64_t)i, &n) : NULL;
        if (!v || n != n_in * ce.n_mat) {
            s = MW_FAIL(err, MW_E_FORMAT, MW_ERR_OFF_NONE, "read back: %s missing or short",
                        ce.name);
            break;
        }
        for (uint64_t j = 0; !s && j < n; j++) {
            /* per expert: in_sum2 / count, 1 where no row reached it (llama.cpp) */
            const struct calib_group_stats *gs = &ce.gs[j / n_in];
            const double want_v = gs->count ? gs->sum_sq[j % n_in] / (double)gs->count : 1.0;
            if (!(fabs((double)v[j] - want_v) <= 1e-5 * fabs(want_v) + 1e-30))
                s = MW_FAIL(err, MW_E_FORMAT, MW_ERR_OFF_NONE,
                            "read back: %s[%llu] = %g, wrote %g", ce.name,
                            (unsigned long long)j, (double)v[j], want_v);
        }
    }
    quant_imatrix_free(im);
    return s;
}

/* What is about to run: the model, the corpus, the samples and the memory
 * they need (not with -q). */
static void print_intro(const char *model, const char *corpus, const struct calib_model *m,
                        const struct calib_corpus *c, const struct calib_samples *smp,
                        const struct calib_sample_opts *so, const struct calib_run_opts *ro,
                        bool given, bool llamacpp, double t_tok_s)
{
    const struct rt_hparams *hp = calib_model_hparams(m);
    const uint32_t ns = calib_samples_count(smp), np = calib_samples_n_pos(smp);
    fprintf(stderr,
            "memwall calib: %s (%s, %u layers, hidden %u); corpus %s (%s%s, %llu documents, "
            "%llu bytes)\n",
            model, hp->arch_name, hp->n_layer, hp->n_embd, corpus,
            calib_corpus_format(c) == CALIB_CORPUS_JSONL ? "jsonl" : "text",
            calib_corpus_gzip(c) ? ", gzip" : "",
            (unsigned long long)calib_corpus_doc_count(c),
            (unsigned long long)calib_corpus_text_bytes(c));
    fprintf(stderr, "memwall calib: %u samples x %u positions (BOS + %u%s) from %llu tokens",
            ns, np, llamacpp ? np - 1 : calib_samples_seq_len(smp),
            llamacpp ? ", llama.cpp chunks" : "",
            (unsigned long long)calib_samples_stream_tokens(smp));
    if (so->seq_len && calib_samples_seq_len(smp) != so->seq_len)
        fprintf(stderr, "; --seq-len clamped to %u (context %u)", calib_samples_seq_len(smp),
                hp->n_ctx_train);
    if (so->n_samples && ns < so->n_samples)
        fprintf(stderr, "; the corpus gives only %u of %u samples", ns, so->n_samples);
    fprintf(stderr, "; tokenized in %.2fs\n", t_tok_s);
    const uint32_t spb = calib_run_batch_samples(m, smp, ro);
    fprintf(stderr, "memwall calib: activations and one layer need about %.1f MiB",
            (double)calib_run_peak_bytes(m, smp, ro) / 1048576.0);
    if (ro->max_memory && spb)
        fprintf(stderr, " (%s %.1f MiB: %u sample%s per batch%s)",
                given ? "--max-memory" : "memory bound", (double)ro->max_memory / 1048576.0,
                spb, spb == 1 ? "" : "s",
                calib_run_hidden_on_disk(m, smp, ro)
                    ? ", hidden states in a scratch file under $TMPDIR"
                    : "");
    fputc('\n', stderr);
}

int cmd_calib(int argc, char **argv)
{
    const char *cmd = "calib";
    const char *model = NULL, *corpus = NULL, *out = NULL;
    bool quiet = false, legacy = false, llamacpp = false;
    static const char *const fmt_names[] = {"auto", "text", "jsonl", NULL};
    static const enum calib_corpus_fmt fmt_values[] = {CALIB_CORPUS_AUTO, CALIB_CORPUS_TEXT,
                                                       CALIB_CORPUS_JSONL};
    int fmt = 0, progress = CMD_PROGRESS_AUTO;
    struct calib_sample_opts so = {.n_samples = CALIB_DEFAULT_SAMPLES,
                                   .seq_len = CALIB_DEFAULT_SEQ_LEN};
    struct calib_run_opts ro = {.n_threads = 1};
    struct mem_opt mem = {0};
    /* the late ones are checked in this order, after what is missing */
    const struct cmd_opt spec[] = {
        {"-q", "--quiet", CMD_OPT_FLAG, .flag = &quiet},
        {NULL, "--legacy", CMD_OPT_FLAG, .flag = &legacy},
        {NULL, "--llamacpp-chunks", CMD_OPT_FLAG, .flag = &llamacpp},
        {"-o", "--output", CMD_OPT_STR, .str = &out},
        {NULL, "--corpus", CMD_OPT_STR, .str = &corpus},
        {NULL, "--format", CMD_OPT_ENUM, .idx = &fmt, .names = fmt_names, .late = true,
         .bad = "unknown --format '%v' (auto, text, jsonl)"},
        {NULL, "--samples", CMD_OPT_CALL, .ctx = &so.n_samples, .call = parse_samples,
         .late = true, .bad = "--samples: expected a positive number or 'all'"},
        {NULL, "--seq-len", CMD_OPT_U32, .u32 = &so.seq_len, .min = 1, .max = 1u << 20,
         .late = true, .bad = "--seq-len: expected 1..%x"},
        {"-t", "--threads", CMD_OPT_U32, .u32 = &ro.n_threads, .min = 1,
         .max = CALIB_MAX_THREADS, .late = true, .bad = "--threads: expected 1..%x"},
        {NULL, "--batch-rows", CMD_OPT_U32, .u32 = &ro.batch_rows, .min = 1, .max = 1u << 24,
         .late = true, .bad = "--batch-rows: expected 1..%x"},
        {NULL, "--max-memory", CMD_OPT_CALL, .ctx = &mem, .call = parse_max_memory,
         .late = true,
         .bad = "--max-memory: expected a size such as 512M or 2G, or none, got '%v'"},
        {NULL, "--progress", CMD_OPT_ENUM, .idx = &progress, .names = cmd_progress_mode_names,
         .bad = CMD_PROGRESS_BAD},
    };
    struct cmd_opts op = {CMD_OPTS_TABLE(spec), .pos = &model, .max_pos = 1,
                          .too_many = "one MODEL at a time (got '%p' and '%a')"};
    int rc = cmd_parse_args(&op, cmd, usage_text, argc, argv);
    if (rc != CMD_GO_ON) return rc;
    if (!model) return cmd_usage_error(cmd, usage_text, "missing MODEL (HF dir or GGUF file)");
    if (!corpus) return cmd_usage_error(cmd, usage_text, "missing --corpus FILE");
    if (!out || !out[0]) return cmd_usage_error(cmd, usage_text, "missing -o OUT.imatrix");
    if ((rc = cmd_parse_late(&op, cmd, usage_text)) != CMD_GO_ON) return rc;
    const enum calib_corpus_fmt cf = fmt_values[fmt];
    so.chunking = llamacpp ? CALIB_CHUNK_LLAMACPP : CALIB_CHUNK_BOS_PREPEND;
    struct stat sb;
    if (stat(out, &sb) == 0 && S_ISDIR(sb.st_mode))
        return cmd_usage_error(cmd, usage_text, "-o '%s' is a directory", out);

    struct mw_err err;
    mw_err_clear(&err);
    struct calib_model *m = NULL;
    struct calib_corpus *c = NULL;
    struct calib_samples *smp = NULL;
    struct calib_stats *st = NULL;
    rc = 0;
    const double t0 = mw_now_s();
    struct mw_mem_avail av = {0};
    struct cmd_progress prog;
    cmd_progress_init(&prog, true); /* drawn from calib_run on */
    struct cmd_stage_progress sp;
    cmd_stage_progress_init(&sp, cmd, progress, &prog);
    enum mw_status s = mem.given ? MW_OK : default_bound(&mem, &av, quiet, &err);
    ro.max_memory = mem.bytes;
    if (!s) s = calib_corpus_load(corpus, cf, &c, &err);
    if (!s) s = calib_model_open(model, &m, &err);
    if (s) goto fail;
    const struct rt_hparams *hp = calib_model_hparams(m);
    so.n_ctx_max = hp->n_ctx_train;
    if ((s = calib_samples_build(c, calib_model_tok(m), &so, &smp, &err))) goto fail;
    const double t_tok = mw_now_s();
    const uint32_t ns = calib_samples_count(smp), np = calib_samples_n_pos(smp);
    if (!quiet) print_intro(model, corpus, m, c, smp, &so, &ro, mem.given, llamacpp, t_tok - t0);
    cmd_progress_init(&prog, quiet || progress != CMD_PROGRESS_AUTO);
    ro.on_stage = cmd_stage_progress_on_stage;
    ro.on_stage_ud = &sp;
    s = calib_run(m, smp, &ro, &st, &err);
    cmd_progress_end(&prog);
    if (s) goto fail;
    const double t_run = mw_now_s();
    const char *base = strrchr(corpus, '/');
    const char *ds[1] = {base ? base + 1 : corpus};
    const struct calib_imatrix_meta meta = {.datasets = ds, .n_datasets = 1};
    if ((s = calib_imatrix_write(st, &meta, legacy ? CALIB_IMATRIX_LEGACY : CALIB_IMATRIX_GGUF,
                                 out, &err)))
        goto fail;
    uint64_t n_entries = 0;
    if ((s = read_back(out, st, &n_entries, &err))) goto fail;
    if (!quiet) {
        struct rusage ru;
        getrusage(RUSAGE_SELF, &ru);
        fprintf(stderr,
                "memwall calib: wrote %s (%s, %llu entries, %u chunks of %u; read back ok) "
                "in %.2fs (forward %.2fs, %u thread%s); peak RSS %.1f MiB\n",
                out, legacy ? "legacy .dat" : "GGUF imatrix", (unsigned long long)n_entries, ns,
                np, mw_now_s() - t0, t_run - t_tok, ro.n_threads, ro.n_threads == 1 ? "" : "s",
                (double)ru.ru_maxrss / 1024.0);
    }
    goto done;
fail:
    if (err.code == MW_OK) MW_FAIL(&err, s, MW_ERR_OFF_NONE, "%s", mw_status_msg(s));
    rc = cmd_fail(cmd, &err);
    if (s == MW_E_NOMEM && !mem.given && av.source != MW_MEM_SRC_NONE)
        fprintf(stderr, "memwall calib: that bound is the default: %.1f MiB available (%s) "
                        "minus a margin of %.1f MiB; raise it with --max-memory SIZE\n",
                (double)av.bytes / 1048576.0, av.from,
                (double)mw_mem_margin(av.bytes) / 1048576.0);
done:
    cmd_stage_progress_done(&sp, rc, out);
    calib_stats_free(st);
    calib_samples_free(smp);
    calib_corpus_free(c);
    calib_model_close(m);
    return rc;
}
