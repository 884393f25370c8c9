/*
 * tools/cmd_quant.c — `memwall quant SRC -o OUT.gguf --preset P`: quantize an
 * F16/BF16/F32 GGUF file (or, in full builds, a Hugging Face checkpoint
 * directory, converted on the fly) with llama-quantize's presets and type
 * rules. The work is the library's: quant/quant.h's plan + write,
 * quant_alloc.h's budget allocation (--bpw/--size), calib_fit_ram
 * (--fit-ram), hf_quant_source_open (HF dirs), methods.h (--corpus). This
 * file parses flags, prints the library's notices, the tables and a
 * progress line with an ETA when stderr is a terminal, and maps the result
 * to the exit status.
 */
#define _POSIX_C_SOURCE 200809L
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "quant/quant.h"
#include "quant/quant_alloc.h"
#if defined(MW_HAVE_FULL)
#include "calib/calib.h"
#include "hf/hf.h"
#include "methods/methods.h"
#include "runtime/rt.h"
#endif
#include "tools/cmd.h"

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
    "                             Q3_K_S Q2_K (also Q5_1 Q5_0 Q4_1 IQ4_NL IQ4_XS IQ3_M\n"
    "                             IQ3_S; with --imatrix or --corpus: IQ3_XS IQ3_XXS\n"
    "                             Q2_K_S IQ2_M IQ2_S IQ2_XS IQ2_XXS IQ1_M IQ1_S)\n"
    "  --bpw B                    mixed precision: a type per tensor (IQ1_S..IQ3_S,\n"
    "                             Q2_K..Q8_0, F16) minimizing the estimated loss with\n"
    "                             tensor data of at most B bits per weight (hit within 1%)\n"
    "  --no-iquants               mixed precision without IQ1_S..IQ3_S (k-quants only:\n"
    "                             for runtimes that lack the i-quant kernels)\n"
#if defined(MW_HAVE_FULL)
    "  --no-probes                with --corpus: weigh the tensors by their estimated\n"
    "                             loss alone (default: each tensor's loss is scaled to\n"
    "                             the output KL divergence it causes alone, measured on\n"
    "                             2048 corpus tokens: one probe per tensor)\n"
#endif
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
    "  --progress MODE            auto (default: a progress line on stderr when it is a\n"
    "                             terminal; with --corpus one per stage and layer with\n"
    "                             the elapsed time, rate and ETA), none, or json (one\n"
    "                             JSON event per line on stderr, even with -q)\n"
#if defined(MW_HAVE_FULL)
    "  --corpus FILE              calibration text (.txt/.jsonl[.gz]): quantize the layers\n"
    "                             with --method on the model's activations\n"
    "  --method M                 rtn | gptq | awq | awq+gptq | gptq-act | awq+gptq-act |\n"
    "                             round | gptq+round | awq+round | awq+gptq+round\n"
    "                             (with --corpus; default awq+gptq+round)\n"
    "  --samples N, --seq-len L   calibration samples (default 128) of L tokens (512)\n"
    "  --max-memory SIZE          with --corpus: bound on calibration + method buffers\n"
    "  --work-dir DIR             with --corpus: keep the quantized layers, the hidden\n"
    "                             states and a journal of finished layers in DIR (created;\n"
    "                             kept after the run: remove it yourself)\n"
    "  --resume                   continue the run journaled in --work-dir DIR after the\n"
    "                             last complete layer (same SRC, corpus and options; the\n"
    "                             output is byte-identical to an uninterrupted run's)\n"
#endif
    "exit status: 0 ok, 1 bad input (no output written), 2 usage, 3 I/O error\n";

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

// --- flags ---

/* --output-tensor-type, --token-embedding-type: *(int32_t *)ctx */
static bool parse_type(void *ctx, const char *val, char *msg, size_t cap)
{
    (void)msg, (void)cap;
    const int t = gguf_type_from_name(val);
    const struct gguf_type_info *ti = t >= 0 ? gguf_type_get((uint32_t)t) : NULL;
    if (!ti || !ti->name) return false;
    *(int32_t *)ctx = t;
    return true;
}

/* --type-override RE=TYPE: ctx is the struct quant_overrides ** */
static bool add_override(void *ctx, const char *val, char *msg, size_t cap)
{
    struct mw_err err;
    mw_err_clear(&err);
    if (quant_overrides_add(ctx, val, &err) == MW_OK) return true;
    snprintf(msg, cap, "--type-override: %s", err.msg);
    return false;
}

static const char *tname(uint32_t t)
{
    const struct gguf_type_info *ti = gguf_type_get(t);
    return ti && ti->name ? ti->name : "?";
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
        printf("%5llu  %-36s %-24s %-6s %-6s %-8s %s\n", (unsigned long long)i,
               cmd_text(e->src->name, nm, sizeof nm), shape,
               tname(e->src->type), tname(e->choice.type),
               quant_choice_reason_name(&e->choice), e->imatrix ? "yes" : "-");
    }
    const uint64_t ne = quant_plan_n_elements(p);
    printf("tensor data: %llu -> %llu bytes (%.2f bpw)\n",
           (unsigned long long)quant_plan_src_bytes(p), (unsigned long long)quant_plan_out_bytes(p),
           ne ? (double)quant_plan_out_bytes(p) * 8.0 / (double)ne : 0.0);
}

// --- mixed precision to a budget (quant/quant_alloc.h) ---

enum budget_kind { BUDGET_NONE, BUDGET_BPW, BUDGET_SIZE, BUDGET_RAM };

struct alloc_req {
    int kind;             /* enum budget_kind */
    double bpw;           /* --bpw */
    uint64_t file_bytes;  /* --size, or --fit-ram's weight budget */
    const char *arg;      /* the budget option's value as given */
    unsigned long ctx;    /* --ctx */
    const char *kv_name;  /* --kv */
    const char *corpus;   /* --corpus */
    bool quiet;
    bool no_iquants;      /* --no-iquants */
    unsigned n_threads;
    char budget[160];     /* the memwall.quant.budget value */
};

static int fail(enum mw_status s, struct mw_err *err)
{
    if (err->code == MW_OK) MW_FAIL(err, s, MW_ERR_OFF_NONE, "%s", mw_status_msg(s));
    return cmd_fail(cmd, err);
}

static void print_alloc(const struct alloc_req *rq, const struct quant_budget_result *r)
{
    fprintf(stderr, "memwall quant: mixed precision, budget %s: %llu tensors allocated "
                    "(%s solver, DP unit %llu bytes)\n",
            rq->budget, (unsigned long long)r->n_rows, r->solve.dp_exact ? "exact" : "rounded",
            (unsigned long long)r->solve.unit);
    const bool pr = r->n_probed > 0;
    fprintf(stderr, "  %-32s %-12s %-7s %10s %12s %12s%s\n", "tensor", "shape", "type", "bytes",
            "est. loss", "loss@Q8_0", pr ? "  probe    probe KLD    factor" : "");
    for (uint64_t k = 0; k < r->n_rows; k++) {
        const struct quant_budget_row *w = &r->rows[k];
        char nm[64], shape[48];
        snprintf(shape, sizeof shape, "%llux%llu", (unsigned long long)w->t->ne[0],
                 (unsigned long long)(w->t->ne[1] * w->t->ne[2] * w->t->ne[3]));
        fprintf(stderr, "  %-32s %-12s %-7s %10llu %12.4e %12.4e", cmd_text(w->t->name, nm, 33),
                shape, tname(w->type), (unsigned long long)w->bytes, w->loss, w->loss_q8_0);
        if (pr && w->probe_kld >= 0)
            fprintf(stderr, "  %-7s %10.3e %9.3e", tname(w->probe_type), w->probe_kld,
                    w->probe_scale);
        else if (pr)
            fprintf(stderr, "  %-7s %10s %9.3e", "-", "-", w->probe_scale);
        fputc('\n', stderr);
    }
    if (!pr && r->probe_asked)
        fprintf(stderr, "memwall quant: losses not scaled: no probe could be measured (model "
                        "without output matrix, or over the probes' memory bound)\n");
    if (pr)
        fprintf(stderr,
                "memwall quant: losses scaled to the output KL divergence of %llu probes "
                "(rank correlation of the unscaled losses with it: %.3f)\n",
                (unsigned long long)r->n_probed, r->probe_rank_corr);
    fprintf(stderr,
            "memwall quant: predicted file %llu bytes, tensor data %llu bytes (%.4f bpw), "
            "estimated loss %.6e\n",
            (unsigned long long)r->file_bytes, (unsigned long long)r->data_bytes,
            (double)r->data_bytes * 8.0 / (double)r->n_elements, r->solve.loss);
}

#if defined(MW_HAVE_FULL)
/* Test hook (tests/e2e/quant_resume.sh): MW_TEST_KILL_AT=STAGE:LAYER sends
 * SIGKILL to this process at the end of calib_run's STAGE ("layer",
 * "ffn_down" ...) of LAYER, so that a --work-dir run is interrupted at a
 * known point. Not set: no effect. */
struct kill_at {
    char stage[32];
    unsigned long layer;
    calib_stage_fn next;
    void *next_ud;
};

static void kill_at_stage(void *ud, const struct calib_stage_event *ev)
{
    struct kill_at *k = ud;
    if (k->next) k->next(k->next_ud, ev);
    if (ev->end && ev->layer == k->layer && strcmp(ev->stage, k->stage) == 0) {
        fflush(NULL);
        raise(SIGKILL);
    }
}

/* --fit-ram R --ctx N [--kv T]: the file budget is what `memwall plan`
 * leaves for the weights (calib_fit_ram: R's app share minus the KV cache
 * and the runtime overhead; MW_E_USAGE when nothing is left). */
static int fit_ram_budget(const struct gguf_file *f, const struct hf_config *c,
                          struct alloc_req *rq)
{
    struct mw_err err;
    mw_err_clear(&err);
    enum rt_kv_type kv = RT_KV_F16;
    if (rq->kv_name && !rt_kv_type_parse(rq->kv_name, &kv))
        return cmd_usage_error(cmd, usage_text, "--kv: expected f16 or q8_0");
    struct calib_fit fit;
    const enum mw_status s = calib_fit_ram(f, c, rq->file_bytes, (uint32_t)rq->ctx, kv, &fit, &err);
    if (s == MW_E_USAGE) return cmd_usage_error(cmd, usage_text, "%s", err.msg);
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
    return 0;
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
    else if ((rc = fit_ram_budget(f, hc, rq)) != 0)
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
        if (!rq->quiet) print_alloc(rq, r);
        o->rules.overrides = r->overrides;
        return 0;
    }
    if (r->refused) return cmd_usage_error(cmd, usage_text, "%s", err.msg);
    return fail(s, &err);
}

/* A usage error: print it, set rc and leave through label L. */
#define USAGE_IF(cond, L, ...)                                  \
    do {                                                        \
        if (cond) {                                             \
            rc = cmd_usage_error(cmd, usage_text, __VA_ARGS__); \
            goto L;                                             \
        }                                                       \
    } while (0)

int cmd_quant(int argc, char **argv)
{
    const char *srcp = NULL, *out = NULL, *preset_name = NULL, *imatrix_path = NULL;
    const char *corpus_path = NULL, *method_name = NULL;
    const char *work_dir = NULL; /* --work-dir */
    bool resume = false;         /* --resume */
    bool no_probes = false;      /* --no-probes */
    uint32_t n_samples = 0, seq_len = 0;
    uint64_t max_memory = 0; /* --max-memory (with --corpus); 0: not given */
    struct quant_opts o = {.rules = {.output_type = -1, .token_embd_type = -1}};
    struct quant_overrides *ov = NULL;
    bool quiet = false, dry = false;
    int progress = CMD_PROGRESS_AUTO; /* --progress */
    struct alloc_req rq = {.kind = BUDGET_NONE};
    struct quant_budget_result ares = {0};
    const char *kv_name = NULL;
    uint64_t ctx = 0;
    uint64_t predicted = 0;
    long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
    uint32_t threads = ncpu > 0 ? (uint32_t)ncpu : 1;
    struct mw_err err;
    mw_err_clear(&err);

    static const char not_size[] =
        "%a: '%v' is not a size (bytes, or a number with K M G T / KiB MiB GiB TiB)";
    const struct cmd_opt spec[] = {
        {"-q", "--quiet", CMD_OPT_FLAG, .flag = &quiet},
        {NULL, "--pure", CMD_OPT_FLAG, .flag = &o.rules.pure},
        {NULL, "--dry-run", CMD_OPT_FLAG, .flag = &dry},
        {NULL, "--no-iquants", CMD_OPT_FLAG, .flag = &rq.no_iquants},
        {NULL, "--no-probes", CMD_OPT_FLAG, .flag = &no_probes},
        {NULL, "--leave-output-tensor", CMD_OPT_FLAG, .flag = &o.rules.leave_output},
        {NULL, "--allow-requantize", CMD_OPT_FLAG, .flag = &o.allow_requantize},
        {"-o", "--output", CMD_OPT_STR, .str = &out},
        {NULL, "--preset", CMD_OPT_STR, .str = &preset_name},
        {NULL, "--imatrix", CMD_OPT_STR, .str = &imatrix_path},
        {NULL, "--type-override", CMD_OPT_CALL, .ctx = &ov, .call = add_override},
        {"-t", "--threads", CMD_OPT_U32, .u32 = &threads, .min = 1, .max = 512,
         .bad = "--threads: '%v' is not 1..512"},
        {NULL, "--output-tensor-type", CMD_OPT_CALL, .ctx = &o.rules.output_type,
         .call = parse_type, .bad = "%a: unknown type '%v'"},
        {NULL, "--token-embedding-type", CMD_OPT_CALL, .ctx = &o.rules.token_embd_type,
         .call = parse_type, .bad = "%a: unknown type '%v'"},
        {NULL, "--corpus", CMD_OPT_STR, .str = &corpus_path},
        {NULL, "--method", CMD_OPT_STR, .str = &method_name},
        {NULL, "--samples", CMD_OPT_U32, .u32 = &n_samples, .max = 1u << 20,
         .bad = "%a: '%v' is not 0..%x"},
        {NULL, "--seq-len", CMD_OPT_U32, .u32 = &seq_len, .max = 1u << 20,
         .bad = "%a: '%v' is not 0..%x"},
#define BUDGET(k) .one_of = &rq.kind, .one_of_val = (k), .one_of_arg = &rq.arg, \
                  .one_of_msg = "one of --bpw, --size, --fit-ram at a time"
        {NULL, "--bpw", CMD_OPT_DOUBLE, .dbl = &rq.bpw, .dmin = 0, .dmin_open = true, .dmax = 64,
         BUDGET(BUDGET_BPW), .bad = "--bpw: '%v' is not a number of bits per weight in (0, 64]"},
        {NULL, "--size", CMD_OPT_SIZE, .u64 = &rq.file_bytes, BUDGET(BUDGET_SIZE), .bad = not_size},
        {NULL, "--fit-ram", CMD_OPT_SIZE, .u64 = &rq.file_bytes, BUDGET(BUDGET_RAM),
         .bad = not_size},
#undef BUDGET
        {NULL, "--ctx", CMD_OPT_U64, .u64 = &ctx, .min = 1, .max = UINT32_MAX,
         .bad = "--ctx: '%v' is not a positive count"},
        {NULL, "--kv", CMD_OPT_STR, .str = &kv_name},
        {NULL, "--max-memory", CMD_OPT_SIZE, .u64 = &max_memory,
         .bad = "--max-memory: expected a size such as 512M or 2G, got '%v'"},
        {NULL, "--work-dir", CMD_OPT_STR, .str = &work_dir},
        {NULL, "--resume", CMD_OPT_FLAG, .flag = &resume},
        {NULL, "--progress", CMD_OPT_ENUM, .idx = &progress, .names = cmd_progress_mode_names,
         .bad = CMD_PROGRESS_BAD},
    };
    struct cmd_opts op = {CMD_OPTS_TABLE(spec), .pos = &srcp, .max_pos = 1,
                          .too_many = "one SRC at a time (got '%p' and '%a')"};
    int rc = cmd_parse_args(&op, cmd, usage_text, argc, argv);
    if (rc != CMD_GO_ON) goto done;
    rc = 0;
    USAGE_IF(!srcp, done, "missing SRC");
    USAGE_IF(!dry && (!out || !out[0]), done, "missing -o OUT.gguf");
    USAGE_IF(!preset_name && rq.kind == BUDGET_NONE, done,
             "missing --preset (or --bpw/--size/--fit-ram)");
    if (!preset_name) preset_name = "Q4_K_M";
    USAGE_IF(rq.kind == BUDGET_RAM && !ctx, done, "--fit-ram needs --ctx N");
    USAGE_IF(rq.kind != BUDGET_RAM && (ctx || kv_name), done, "--ctx/--kv go with --fit-ram");
    USAGE_IF(rq.no_iquants && rq.kind == BUDGET_NONE, done,
             "--no-iquants goes with --bpw/--size/--fit-ram");
    USAGE_IF(no_probes && (rq.kind == BUDGET_NONE || !corpus_path), done,
             "--no-probes goes with --corpus and --bpw/--size/--fit-ram");
#if !defined(MW_HAVE_FULL)
    USAGE_IF(rq.kind == BUDGET_RAM, done, "--fit-ram needs the full build");
#endif
    USAGE_IF(resume && !work_dir, done, "--resume needs --work-dir DIR");
    USAGE_IF(work_dir && !corpus_path, done, "--work-dir goes with --corpus");
    USAGE_IF(work_dir && !work_dir[0], done, "--work-dir: empty path");
    USAGE_IF(work_dir && dry, done, "--dry-run writes nothing: no --work-dir");
    o.rules.preset = quant_preset_find(preset_name);
    USAGE_IF(!o.rules.preset, done, "unknown preset '%s'", preset_name);
    struct stat st;
    USAGE_IF(out && !stat(out, &st) && S_ISDIR(st.st_mode), done, "-o '%s' is a directory", out);
    const bool src_is_dir = stat(srcp, &st) == 0 && S_ISDIR(st.st_mode);
#if !defined(MW_HAVE_FULL)
    USAGE_IF(src_is_dir, done, "'%s' is a directory: this build reads GGUF files only", srcp);
#endif
    o.rules.overrides = ov;
    o.n_threads = (unsigned)threads;

    struct ui ui = {.quiet = quiet};
    cmd_progress_init(&ui.pr, quiet || dry || progress != CMD_PROGRESS_AUTO);
    cmd_stage_progress_init(&ui.sp, cmd, progress, &ui.pr);
    o.log = on_log, o.log_ud = &ui;
    if (ui.pr.on || progress == CMD_PROGRESS_JSON) o.progress = on_progress, o.progress_ud = &ui;

    struct quant_imatrix *im = NULL;
    struct gguf_file *f = NULL;
    struct quant_source src = {0};
    bool src_gguf = false;
    struct quant_plan *plan = NULL;
#if defined(MW_HAVE_FULL)
    struct hf_quant_src *hs = NULL;
    struct quant_methods_src *mh = NULL;
    struct quant_methods_opts mo = {.method = QUANT_METHOD_AWQ_GPTQ_ROUND, .model_path = srcp,
                                    .corpus_path = corpus_path,
                                    .samples = {.n_samples = n_samples, .seq_len = seq_len},
                                    .n_threads = (unsigned)threads,
                                    .max_memory = max_memory, .scratch_prefix = out,
                                    .work_dir = work_dir, .resume = resume,
                                    .no_probes = no_probes};
    mo.on_stage = cmd_stage_progress_on_stage, mo.on_stage_ud = &ui.sp;
    struct kill_at ka = {.next = mo.on_stage, .next_ud = mo.on_stage_ud};
    const char *kenv = getenv("MW_TEST_KILL_AT");
    if (kenv && sscanf(kenv, "%31[a-z_]:%lu", ka.stage, &ka.layer) == 2)
        mo.on_stage = kill_at_stage, mo.on_stage_ud = &ka;
#endif
    enum mw_status s = MW_OK;
    const double t0 = mw_now_s();

    if (imatrix_path) {
        if ((s = quant_imatrix_load(imatrix_path, &im, &err)) != MW_OK) goto fail;
        o.imatrix = im;
        o.imatrix_file = imatrix_path;
    }
    if (src_is_dir) {
#if defined(MW_HAVE_FULL)
        if ((s = hf_quant_source_open(srcp, &src, &hs, &err)) != MW_OK) goto fail;
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
        rq.ctx = (unsigned long)ctx, rq.kv_name = kv_name, rq.corpus = corpus_path;
        rq.quiet = quiet;
        rq.n_threads = (unsigned)threads;
#if defined(MW_HAVE_FULL)
        rc = budget(&rq, &src, f, hs ? hf_quant_source_config(hs) : NULL, &mo, &o, &ares);
#else
        rc = budget(&rq, &src, f, NULL, NULL, &o, &ares);
#endif
        if (rc != 0) goto cleanup;
        predicted = ares.file_bytes;
    }
    const struct quant_source *psrc = &src;
#if defined(MW_HAVE_FULL)
    struct quant_source msrc;
    if (corpus_path) {
        if (method_name && !quant_method_parse(method_name, &mo.method)) {
            rc = cmd_usage_error(cmd, usage_text, "--method: unknown method '%s'", method_name);
            goto cleanup;
        }
        if ((s = quant_methods_source(&src, &o, &mo, &msrc, &mh, &err)) != MW_OK) goto fail;
        psrc = &msrc;
    }
#else
    USAGE_IF(corpus_path || method_name || max_memory || work_dir || resume, cleanup,
             "--corpus/--method need the full build");
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
        /* llama-quantize --dry-run only warns about a missing imatrix */
        if (quant_plan_check_imatrix(plan, &err) != MW_OK) {
            char eb[1024];
            fprintf(stderr, "memwall quant: warning: %s\n", mw_err_format(&err, eb, sizeof eb));
            mw_err_clear(&err);
        }
        print_plan(plan);
        rc = cmd_finish_output(cmd, 0);
        goto cleanup;
    }
    struct quant_stats qs;
    /* the clock starts with the writing */
    cmd_progress_init(&ui.pr, quiet || dry || progress != CMD_PROGRESS_AUTO);
    ui.sp.t_write = mw_now_s();
    s = quant_plan_write(plan, out, &qs, &err);
    cmd_progress_end(&ui.pr);
    if (s != MW_OK) goto fail;
    if (!quiet && rq.kind != BUDGET_NONE)
        fprintf(stderr, "memwall quant: file size %llu bytes, predicted %llu (%s)\n",
                (unsigned long long)qs.file_bytes, (unsigned long long)predicted,
                qs.file_bytes == predicted ? "exact"
                : corpus_path && qs.file_bytes < predicted
                    ? "bound: the method's header keys were reserved at their longest"
                    : "MISMATCH");
    if (!quiet) {
        const uint64_t ne = quant_plan_n_elements(plan);
        fprintf(stderr,
                "memwall quant: wrote %s (%s, %s, %llu bytes, %.2f bpw; %llu tensors quantized, "
                "%llu copied%s) in %.2fs\n",
                out, o.rules.preset->name, psrc->method ? psrc->method : im ? "imatrix" : "rtn",
                (unsigned long long)qs.file_bytes,
                ne ? (double)quant_plan_out_bytes(plan) * 8.0 / (double)ne : 0.0,
                (unsigned long long)qs.n_quantized, (unsigned long long)qs.n_copied,
                qs.n_fallback ? ", some with the row-length fallback" : "", mw_now_s() - t0);
    }
    rc = 0;
    goto cleanup;
fail:
    cmd_progress_end(&ui.pr);
    rc = fail(s, &err);
cleanup:
    cmd_stage_progress_done(&ui.sp, rc, dry ? NULL : out);
    quant_plan_free(plan);
#if defined(MW_HAVE_FULL)
    quant_methods_source_free(mh);
    hf_quant_source_close(hs);
#endif
    if (src_gguf) quant_source_gguf_free(&src);
    gguf_close(f);
    quant_imatrix_free(im);
done:
    quant_budget_result_free(&ares);
    quant_overrides_free(ov);
    return rc;
}
