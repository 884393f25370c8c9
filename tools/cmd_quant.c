/*
 * tools/cmd_quant.c — `memwall quant SRC -o OUT.gguf --preset P`: quantize an
 * F16/BF16/F32 GGUF file (or, in full builds, a Hugging Face checkpoint
 * directory, converted on the fly) with llama-quantize's presets and type
 * rules. The work is the library's: quant/quant.h's plan + write,
 * quant_alloc.h's budget allocation (--bpw/--size), calib_fit_ram
 * (--fit-ram), hf_quant_source_open (HF dirs), methods.h (--corpus). This
 * file opens the inputs, calls the library in order, prints its notices and
 * a progress line with an ETA when stderr is a terminal, and maps the result
 * to the exit status; the command line is parsed in cmd_quant_opts.c, the
 * tables are printed by cmd_quant_print.c.
 */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "quant/quant.h"
#include "quant/quant_alloc.h"
#if defined(MW_HAVE_FULL)
#include "calib/calib.h"
#include "calib/calib_gemma4.h"
#include "core/mw_mem.h"
#include "hf/hf.h"
#include "methods/methods.h"
#include "runtime/rt.h"
#endif
#include "tools/cmd.h"
#include "tools/cmd_quant.h"
#if defined(MW_HAVE_FULL)
#include "tools/report.h"
#endif

static const char *cmd = "quant";

// --- callbacks ---

struct ui {
    bool quiet;
    struct cmd_progress pr;
    struct cmd_stage_progress sp; /* --progress: the stage line, JSON events */
};

static void on_log(void *ud, enum quant_log_level lvl, const char *msg)
{
    struct ui *u = ud;
    if (lvl != QUANT_LOG_WARN && u->quiet) return;
    cmd_progress_end(&u->pr);
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
    if (u->sp.mode == CMD_PROGRESS_JSON) {
        cmd_stage_progress_write(&u->sp, done, total, ti, nt, name);
        return;
    }
    const double frac = total ? (double)done / (double)total : 1.0;
    char nm[64], d[160];
    snprintf(d, sizeof d, "%3.0f%%  %.1f/%.1f MiB  tensor %llu/%llu %s", frac * 100.0,
             (double)done / 1048576.0, (double)total / 1048576.0, (unsigned long long)ti + 1,
             (unsigned long long)nt, cmd_text(name ? name : "", nm, 41));
    cmd_progress_draw(&u->pr, "quant", frac, d);
}

// --- mixed precision to a budget (quant/quant_alloc.h) ---

static int fail(enum mw_status s, struct mw_err *err)
{
    if (err->code == MW_OK) MW_FAIL(err, s, MW_ERR_OFF_NONE, "%s", mw_status_msg(s));
    return cmd_fail(cmd, err);
}

#if defined(MW_HAVE_FULL)
/* --fit-ram: a table read one row per token from the mapped file (Gemma 4's
 * per_layer_token_embd, calib_g4_on_flash) costs file bytes, not RAM: it
 * keeps the type llama-quantize's k-quant presets give it (Q6_K, or its
 * fallback for the row length) through an exact override, and the file
 * budget grows by its bytes. */
static int flash_tables(const struct quant_source *src, struct quant_opts *o,
                        struct alloc_req *rq)
{
    for (uint64_t i = 0; i < src->n_tensors; i++) {
        const struct quant_tensor_desc *t = &src->tensors[i];
        if (!calib_g4_on_flash(t->name) || t->n_dims != 2) continue;
        const uint32_t ty = t->ne[0] % 256 == 0 ? GGUF_TYPE_Q6_K
                            : t->ne[0] % 32 == 0 ? GGUF_TYPE_Q8_0
                                                 : GGUF_TYPE_F16;
        uint64_t nb = 0;
        struct mw_err err;
        mw_err_clear(&err);
        if (!gguf_tensor_nbytes(ty, t->ne, &nb) || !mw_add_u64(nb, 31, &nb) ||
            !mw_add_u64(rq->file_bytes, nb / 32 * 32, &rq->file_bytes))
            return fail(MW_E_VALUE, &err);
        /* the user's overrides first (first match wins), then this one */
        enum mw_status s = MW_OK;
        const struct quant_overrides *user = o->rules.overrides;
        for (uint64_t k = 0; k < quant_overrides_count(user) && s == MW_OK; k++)
            s = quant_overrides_add(&rq->own_ov, quant_overrides_spec(user, k), &err);
        if (s == MW_OK) s = quant_overrides_add_exact(&rq->own_ov, t->name, ty, &err);
        if (s != MW_OK) return fail(s, &err);
        o->rules.overrides = rq->own_ov;
        if (!rq->quiet)
            fprintf(stderr, "memwall quant: --fit-ram: %s stays on flash (read one row per "
                            "token): %s, %llu bytes of file beside the resident weights\n",
                    t->name, gguf_type_get(ty)->name, (unsigned long long)nb / 32 * 32);
        char *w = strstr(rq->budget, ",file=");
        if (w)
            snprintf(w, sizeof rq->budget - (size_t)(w - rq->budget), ",file=%llu",
                     (unsigned long long)rq->file_bytes);
    }
    return 0;
}

/* --fit-ram R --ctx N [--kv T]: the file budget is what `memwall plan`
 * leaves for the weights (calib_fit_ram: R's app share minus the KV cache
 * and the runtime overhead; MW_E_USAGE when nothing is left). */
static int fit_ram_budget(const struct gguf_file *f, const struct hf_config *c,
                          const struct quant_source *src, struct quant_opts *o,
                          struct alloc_req *rq)
{
    struct mw_err err;
    mw_err_clear(&err);
    enum rt_kv_type kv = RT_KV_F16;
    if (rq->kv_name && !rt_kv_type_parse(rq->kv_name, &kv))
        return cmd_usage_error(cmd, cmd_quant_usage, "--kv: expected f16 or q8_0");
    struct calib_fit fit;
    const enum mw_status s = calib_fit_ram(f, c, rq->file_bytes, (uint32_t)rq->ctx, kv, &fit, &err);
    if (s == MW_E_USAGE) return cmd_usage_error(cmd, cmd_quant_usage, "%s", err.msg);
    if (s != MW_OK) return fail(s, &err);
    if (!rq->quiet)
        fprintf(stderr,
                "memwall quant: --fit-ram %llu: app share %llu - KV cache %llu (ctx %lu, %s) - "
                "overhead %llu = %llu bytes for the file\n",
                (unsigned long long)fit.ram_bytes, (unsigned long long)fit.app_bytes,
                (unsigned long long)fit.kv_bytes, rq->ctx, rt_kv_type_name(kv),
                (unsigned long long)fit.overhead_bytes, (unsigned long long)fit.weight_bytes);
    snprintf(rq->budget, sizeof rq->budget, "%s", fit.budget);
    rq->file_bytes = fit.weight_bytes;
    return flash_tables(src, o, rq);
}
#endif

/* --bpw / --size / --fit-ram (quant_budget_allocate; with --corpus
 * quant_methods_budget, which reserves the method's header keys):
 * o->budget names the budget, o->rules.overrides become the allocation's
 * (*r). Returns 0 or an exit status. */
struct hf_config;
struct quant_methods_opts;
static int budget(struct alloc_req *rq, const struct quant_source *src, const struct gguf_file *f,
                  const struct hf_config *hc, const struct quant_methods_opts *mo,
                  struct quant_opts *o, struct quant_budget_result *r)
{
    int rc = 0;
    struct mw_err err;
    mw_err_clear(&err);
    if (rq->kind == BUDGET_BPW)
        snprintf(rq->budget, sizeof rq->budget, "bpw=%s", rq->arg);
    else if (rq->kind == BUDGET_SIZE)
        snprintf(rq->budget, sizeof rq->budget, "size=%llu", (unsigned long long)rq->file_bytes);
#if defined(MW_HAVE_FULL)
    else if ((rc = fit_ram_budget(f, hc, src, o, rq)) != 0)
        return rc;
#endif
    o->budget = rq->budget;
    const struct quant_budget b = {
        .kind = rq->kind == BUDGET_BPW ? QUANT_BUDGET_BPW : QUANT_BUDGET_SIZE,
        .bpw = rq->bpw, .file_bytes = rq->file_bytes,
        .what = rq->kind == BUDGET_BPW    ? "--bpw"
                : rq->kind == BUDGET_SIZE ? "--size"
                                          : "--fit-ram's weight budget",
        .n_threads = rq->n_threads, .no_iquants = rq->no_iquants};
#if defined(MW_HAVE_FULL)
    const enum mw_status s = quant_methods_budget(src, o, &b, rq->corpus ? mo : NULL, r, &err);
#else
    (void)f, (void)hc, (void)mo, (void)rc;
    const enum mw_status s = quant_budget_allocate(src, o, &b, r, &err);
#endif
    if (s == MW_OK) {
        if (!rq->quiet) cmd_quant_print_alloc(rq, r);
        o->rules.overrides = r->overrides;
        return 0;
    }
    if (r->refused) return cmd_usage_error(cmd, cmd_quant_usage, "%s", err.msg);
    return fail(s, &err);
}

// --- the run ---

/* One run of the command: what it opened and made (job_free). */
struct job {
    const struct quant_args *a;
    struct quant_opts o;
    struct ui ui;
    struct quant_imatrix *im;
    struct gguf_file *f;
    struct quant_source src;
    bool src_gguf;
    const struct quant_source *psrc; /* what the plan reads: src, or the method's */
    struct quant_plan *plan;
    struct alloc_req rq; /* o.budget points into it */
    struct quant_budget_result ares;
    uint64_t predicted; /* the budget's predicted file size */
    float *probe_kld;   /* o.probe_kld: the probes' KLDs by source tensor */
#if defined(MW_HAVE_FULL)
    struct hf_quant_src *hs;
    struct quant_methods_src *mh;
    struct quant_methods_opts mo;
    struct quant_source msrc;
    struct mw_mem_avail mem; /* where the default --max-memory came from */
    bool mem_default;        /* mo.max_memory is that default */
#endif
    double t0;
    struct mw_err err;
};

static void job_init(struct job *j, const struct quant_args *a)
{
    *j = (struct job){.a = a, .o = a->o, .rq = a->rq, .ui = {.quiet = a->quiet}};
    mw_err_clear(&j->err);
    struct ui *ui = &j->ui;
    cmd_progress_init(&ui->pr, a->quiet || a->dry || a->progress != CMD_PROGRESS_AUTO);
    cmd_stage_progress_init(&ui->sp, cmd, a->progress, &ui->pr);
    j->o.log = on_log, j->o.log_ud = ui;
    if (ui->pr.on || a->progress == CMD_PROGRESS_JSON)
        j->o.progress = on_progress, j->o.progress_ud = ui;
#if defined(MW_HAVE_FULL)
    j->mo = (struct quant_methods_opts){
        .method = QUANT_METHOD_AWQ_GPTQ_ROUND, .model_path = a->src,
        .corpus_path = a->corpus_path,
        .samples = {.n_samples = a->n_samples, .seq_len = a->seq_len},
        .n_threads = (unsigned)a->threads, .max_memory = a->max_memory,
        .scratch_prefix = a->out, .work_dir = a->work_dir, .resume = a->resume,
        .no_probes = a->no_probes,
        .on_stage = cmd_stage_progress_on_stage, .on_stage_ud = &ui->sp};
#endif
    j->t0 = mw_now_s();
}

static void job_free(struct job *j)
{
    quant_plan_free(j->plan);
#if defined(MW_HAVE_FULL)
    quant_methods_source_free(j->mh);
    hf_quant_source_close(j->hs);
#endif
    if (j->src_gguf) quant_source_gguf_free(&j->src);
    gguf_close(j->f);
    quant_imatrix_free(j->im);
    quant_budget_result_free(&j->ares);
    quant_overrides_free(j->rq.own_ov);
    free(j->probe_kld);
}

/* A library error: the progress line ends, the error prints. */
static int job_fail(struct job *j, enum mw_status s)
{
    cmd_progress_end(&j->ui.pr);
    const int rc = fail(s, &j->err);
#if defined(MW_HAVE_FULL)
    if (s == MW_E_NOMEM && j->mem_default)
        fprintf(stderr, "memwall quant: that bound is the default: %.1f MiB available (%s) "
                        "minus a margin of %.1f MiB; raise it with --max-memory SIZE\n",
                (double)j->mem.bytes / 1048576.0, j->mem.from,
                (double)mw_mem_margin(j->mem.bytes) / 1048576.0);
#endif
    return rc;
}

#if defined(MW_HAVE_FULL)
/* --corpus: --max-memory as given (none: no bound), else the bound from the
 * machine (core/mw_mem.h), said on stderr unless -q. Returns 0 or an exit
 * status. */
static int memory_bound(struct job *j)
{
    const struct quant_args *a = j->a;
    if (a->max_memory == UINT64_MAX) j->mo.max_memory = 0;
    if (!a->corpus_path || a->max_memory) return 0;
    const enum mw_status s = mw_mem_available(NULL, &j->mem, &j->err);
    if (s != MW_OK) return job_fail(j, s);
    j->mo.max_memory = mw_mem_bound(&j->mem);
    j->mem_default = j->mem.source != MW_MEM_SRC_NONE;
    if (a->quiet) return 0;
    if (!j->mem_default)
        fprintf(stderr, "memwall quant: no memory bound: the memory available could not be "
                        "read (--max-memory SIZE or %s=SIZE sets one)\n", MW_MEM_ENV);
    else
        fprintf(stderr,
                "memwall quant: memory bound %.1f MiB: %.1f MiB available (%s) minus a margin "
                "of %.1f MiB; --max-memory SIZE sets another, --max-memory none lifts it\n",
                (double)j->mo.max_memory / 1048576.0, (double)j->mem.bytes / 1048576.0,
                j->mem.from, (double)mw_mem_margin(j->mem.bytes) / 1048576.0);
    return 0;
}
#endif

/* --imatrix, and SRC: an HF checkpoint directory, or a GGUF file. */
static enum mw_status open_source(struct job *j)
{
    const struct quant_args *a = j->a;
    enum mw_status s;
    if (a->imatrix_path) {
        if ((s = quant_imatrix_load(a->imatrix_path, &j->im, &j->err)) != MW_OK) return s;
        j->o.imatrix = j->im;
        j->o.imatrix_file = a->imatrix_path;
    }
    if (a->src_is_dir) {
#if defined(MW_HAVE_FULL)
        return hf_quant_source_open(a->src, &j->src, &j->hs, &j->err);
#endif
    } else {
        /* a plan needs the header only: --dry-run also reads files whose
         * tensor data is absent (header-only GGUFs of large shapes) */
        if ((s = gguf_open(a->src, a->dry ? GGUF_OPEN_ALLOW_SHORT : GGUF_OPEN_DEFAULT, &j->f,
                           &j->err)) != MW_OK)
            return s;
        if ((s = quant_source_gguf(j->f, &j->src, &j->err)) != MW_OK) return s;
        j->src_gguf = true;
    }
    return MW_OK;
}

/* --bpw / --size / --fit-ram: the allocation's types become the rules'
 * overrides. Returns 0 or an exit status. */
static int apply_budget(struct job *j)
{
    const struct quant_args *a = j->a;
    struct alloc_req *rq = &j->rq;
    rq->ctx = (unsigned long)a->ctx, rq->kv_name = a->kv_name, rq->corpus = a->corpus_path;
    rq->quiet = a->quiet;
    rq->n_threads = (unsigned)a->threads;
#if defined(MW_HAVE_FULL)
    /* the probes' bound as without a default one (QUANT_PROBE_MAX_BYTES, or
     * less on a smaller machine): what they measure does not grow with the
     * machine; the imatrix pass's statistics do not depend on the bound */
    const uint64_t mm = j->mo.max_memory;
    if (j->mem_default && mm > QUANT_PROBE_MAX_BYTES) j->mo.max_memory = QUANT_PROBE_MAX_BYTES;
    const int rc = budget(rq, &j->src, j->f, j->hs ? hf_quant_source_config(j->hs) : NULL,
                          &j->mo, &j->o, &j->ares);
    j->mo.max_memory = mm;
#else
    const int rc = budget(rq, &j->src, j->f, NULL, NULL, &j->o, &j->ares);
#endif
    if (rc == 0) j->predicted = j->ares.file_bytes;
    if (rc == 0 && j->ares.probe_asked) { /* memwall.quant.probe_kld, reserved by the budget */
        const uint64_t n = j->src.n_tensors;
        if (!(j->probe_kld = malloc((size_t)(n ? n : 1) * sizeof *j->probe_kld))) {
            mw_err_clear(&j->err);
            return job_fail(j, MW_FAIL(&j->err, MW_E_NOMEM, MW_ERR_OFF_NONE, "out of memory"));
        }
        for (uint64_t i = 0; i < n; i++) j->probe_kld[i] = -1.0f;
        for (uint64_t k = 0; k < j->ares.n_rows; k++) {
            const struct quant_budget_row *w = &j->ares.rows[k];
            const uint64_t i = (uint64_t)(w->t - j->src.tensors);
            if (w->t >= j->src.tensors && i < n) j->probe_kld[i] = (float)w->probe_kld;
        }
        j->o.probe_kld = j->probe_kld;
        j->o.n_probe_kld = n;
    }
    return rc;
}

/* --corpus: the source whose layer tensors the method quantizes (full
 * builds; elsewhere the options are a usage error). Returns 0 or an exit
 * status. */
static int method_source(struct job *j)
{
    const struct quant_args *a = j->a;
    j->psrc = &j->src;
#if defined(MW_HAVE_FULL)
    if (!a->corpus_path) return 0;
    if (a->method_name && !quant_method_parse(a->method_name, &j->mo.method))
        return cmd_usage_error(cmd, cmd_quant_usage, "--method: unknown method '%s'",
                               a->method_name);
    const enum mw_status s = quant_methods_source(&j->src, &j->o, &j->mo, &j->msrc, &j->mh,
                                                  &j->err);
    if (s != MW_OK) return job_fail(j, s);
    j->psrc = &j->msrc;
#else
    if (a->corpus_path || a->method_name || a->max_memory || a->work_dir || a->resume)
        return cmd_usage_error(cmd, cmd_quant_usage, "--corpus/--method need the full build");
#endif
    return 0;
}

/* A budget's prediction against the plan's file size (with --corpus a
 * bound: the method's header keys are reserved at their longest). */
static enum mw_status check_prediction(struct job *j)
{
    uint64_t fs;
    const enum mw_status s = quant_plan_file_size(j->plan, &fs, &j->err);
    if (s != MW_OK) return s;
    if (j->a->corpus_path ? fs > j->predicted : fs != j->predicted)
        fprintf(stderr, "memwall quant: warning: the plan's file size %llu differs from the "
                        "prediction %llu\n",
                (unsigned long long)fs, (unsigned long long)j->predicted);
    return MW_OK;
}

static int dry_run(struct job *j)
{
    /* llama-quantize --dry-run only warns about a missing imatrix */
    if (quant_plan_check_imatrix(j->plan, &j->err) != MW_OK) {
        char eb[1024];
        fprintf(stderr, "memwall quant: warning: %s\n", mw_err_format(&j->err, eb, sizeof eb));
        mw_err_clear(&j->err);
    }
    cmd_quant_print_plan(j->plan);
    return cmd_finish_output(cmd, 0);
}

static void print_written(const struct job *j, const struct quant_stats *qs)
{
    const struct quant_args *a = j->a;
    if (a->quiet) return;
    if (a->rq.kind != BUDGET_NONE)
        fprintf(stderr, "memwall quant: file size %llu bytes, predicted %llu (%s)\n",
                (unsigned long long)qs->file_bytes, (unsigned long long)j->predicted,
                qs->file_bytes == j->predicted ? "exact"
                : a->corpus_path && qs->file_bytes < j->predicted
                    ? "bound: the method's header keys were reserved at their longest"
                    : "MISMATCH");
    const uint64_t ne = quant_plan_n_elements(j->plan);
    char what[512]; /* the preset, or a budget's mix (cmd_quant_mix) */
    if (a->rq.kind != BUDGET_NONE) cmd_quant_mix(j->plan, j->rq.budget, what, sizeof what);
    else snprintf(what, sizeof what, "%s", j->o.rules.preset->name);
    fprintf(stderr,
            "memwall quant: wrote %s (%s%s %s, %llu bytes, %.2f bpw; %llu tensors quantized, "
            "%llu copied%s) in %.2fs\n",
            a->out, what, a->rq.kind != BUDGET_NONE ? ";" : ",",
            j->psrc->method ? j->psrc->method : j->im ? "imatrix" : "rtn",
            (unsigned long long)qs->file_bytes,
            ne ? (double)quant_plan_out_bytes(j->plan) * 8.0 / (double)ne : 0.0,
            (unsigned long long)qs->n_quantized, (unsigned long long)qs->n_copied,
            qs->n_fallback ? ", some with the row-length fallback" : "", mw_now_s() - j->t0);
}

static int run(struct job *j)
{
    const struct quant_args *a = j->a;
    enum mw_status s;
    int rc;
#if defined(MW_HAVE_FULL)
    if ((rc = memory_bound(j)) != 0) return rc;
#endif
    if ((s = open_source(j)) != MW_OK) return job_fail(j, s);
    if (a->rq.kind != BUDGET_NONE && (rc = apply_budget(j)) != 0) return rc;
    if ((rc = method_source(j)) != 0) return rc;
    if ((s = quant_plan_build(j->psrc, &j->o, &j->plan, &j->err)) != MW_OK) return job_fail(j, s);
    if (a->rq.kind != BUDGET_NONE && !a->quiet && (s = check_prediction(j)) != MW_OK)
        return job_fail(j, s);
    if (a->dry) return dry_run(j);
    struct quant_stats qs;
    /* the clock starts with the writing */
    cmd_progress_init(&j->ui.pr, a->quiet || a->progress != CMD_PROGRESS_AUTO);
    j->ui.sp.t_write = mw_now_s();
    s = quant_plan_write(j->plan, a->out, &qs, &j->err);
    cmd_progress_end(&j->ui.pr);
    if (s != MW_OK) return job_fail(j, s);
    print_written(j, &qs);
#if defined(MW_HAVE_FULL)
    if (a->report || a->card)
        return report_after_quant(cmd, a->out, a->report, a->card, j->o.command, a->src,
                                  a->src_is_dir);
#endif
    return 0;
}

int cmd_quant(int argc, char **argv)
{
    struct quant_args a;
    int rc = cmd_quant_parse(&a, argc, argv);
#if defined(MW_HAVE_FULL)
    /* memwall.quant.command: the options that make the bytes */
    char *command = rc == CMD_GO_ON ? report_quant_command(argc, argv, a.src) : NULL;
    a.o.command = command;
#endif
    if (rc == CMD_GO_ON) {
        struct job j;
        job_init(&j, &a);
        rc = run(&j);
        cmd_stage_progress_done(&j.ui.sp, rc, a.dry ? NULL : a.out);
        job_free(&j);
    }
    quant_overrides_free(a.ov);
#if defined(MW_HAVE_FULL)
    free(command);
#endif
    return rc;
}
