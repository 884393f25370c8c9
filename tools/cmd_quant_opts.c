/*
 * tools/cmd_quant_opts.c — `memwall quant`'s command line: the usage text,
 * the option table and the checks of what is missing or contradicts
 * (cmd_quant.h). Nothing is opened here but SRC's and -o's stat().
 */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "calib/calib.h"
#include "tools/cmd.h"
#include "tools/cmd_quant.h"

const char cmd_quant_usage[] =
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
    "                             Q2_K_S IQ2_M IQ2_S IQ2_XS IQ2_XXS IQ1_M IQ1_S);\n"
    "                             MXFP4_MOE: experts MXFP4, the rest Q8_0 (gpt-oss)\n"
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
    "                             only its file type; without it general.file_type\n"
    "                             names the mix's most common type)\n"
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
    "                             (default: the memory available, MemAvailable or the\n"
    "                             cgroup limit or $MW_MEMAVAILABLE, minus an eighth, at\n"
    "                             least 64 MiB, at most 2 GiB; 'none' or 0: no bound)\n"
    "  --work-dir DIR             with --corpus: keep the quantized layers, the hidden\n"
    "                             states and a journal of finished layers in DIR (created;\n"
    "                             kept after the run: remove it yourself)\n"
    "  --resume                   continue the run journaled in --work-dir DIR after the\n"
    "                             last complete layer (same SRC, corpus and options; the\n"
    "                             output is byte-identical to an uninterrupted run's)\n"
    "  --report FILE.html         then the quantization report of the output (`memwall\n"
    "                             report`: type map, sizes, calibration, memory plan)\n"
    "  --card README.md           then a Hugging Face model card of the output\n"
#endif
    "exit status: 0 ok, 1 bad input (no output written), 2 usage, 3 I/O error\n";

static const char *cmd = "quant";

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

/* --max-memory SIZE, or none / 0 (no bound: UINT64_MAX, see cmd_quant.h) */
static bool parse_max_memory(void *ctx, const char *val, char *msg, size_t cap)
{
    (void)msg, (void)cap;
    uint64_t *v = ctx;
    if (strcmp(val, "none") == 0 || strcmp(val, "0") == 0) {
        *v = UINT64_MAX;
        return true;
    }
    return mw_parse_size(val, v);
}

/* A usage error: print it and return its exit code. */
#define USAGE_IF(cond, ...)                                                \
    do {                                                                   \
        if (cond) return cmd_usage_error(cmd, cmd_quant_usage, __VA_ARGS__); \
    } while (0)

/* What is missing or contradicts, once every option is in; the preset and
 * whether SRC is a directory. */
static int check_args(struct quant_args *a)
{
    const struct alloc_req *rq = &a->rq;
    USAGE_IF(!a->src, "missing SRC");
    USAGE_IF(!a->dry && (!a->out || !a->out[0]), "missing -o OUT.gguf");
    USAGE_IF(!a->preset_name && rq->kind == BUDGET_NONE,
             "missing --preset (or --bpw/--size/--fit-ram)");
    if (!a->preset_name) a->preset_name = "Q4_K_M", a->o.guess_file_type = true;
    USAGE_IF(rq->kind == BUDGET_RAM && !a->ctx, "--fit-ram needs --ctx N");
    USAGE_IF(rq->kind != BUDGET_RAM && (a->ctx || a->kv_name), "--ctx/--kv go with --fit-ram");
    USAGE_IF(rq->no_iquants && rq->kind == BUDGET_NONE,
             "--no-iquants goes with --bpw/--size/--fit-ram");
    USAGE_IF(a->no_probes && (rq->kind == BUDGET_NONE || !a->corpus_path),
             "--no-probes goes with --corpus and --bpw/--size/--fit-ram");
#if !defined(MW_HAVE_FULL)
    USAGE_IF(rq->kind == BUDGET_RAM, "--fit-ram needs the full build");
#endif
    USAGE_IF(a->resume && !a->work_dir, "--resume needs --work-dir DIR");
    USAGE_IF(a->work_dir && !a->corpus_path, "--work-dir goes with --corpus");
    USAGE_IF(a->work_dir && !a->work_dir[0], "--work-dir: empty path");
    USAGE_IF(a->work_dir && a->dry, "--dry-run writes nothing: no --work-dir");
    USAGE_IF((a->report || a->card) && a->dry, "--dry-run writes nothing: no --report/--card");
    a->o.rules.preset = quant_preset_find(a->preset_name);
    USAGE_IF(!a->o.rules.preset, "unknown preset '%s'", a->preset_name);
    struct stat st;
    USAGE_IF(a->out && !stat(a->out, &st) && S_ISDIR(st.st_mode), "-o '%s' is a directory",
             a->out);
    a->src_is_dir = stat(a->src, &st) == 0 && S_ISDIR(st.st_mode);
#if !defined(MW_HAVE_FULL)
    USAGE_IF(a->src_is_dir, "'%s' is a directory: this build reads GGUF files only", a->src);
#endif
    a->o.rules.overrides = a->ov;
    a->o.n_threads = (unsigned)a->threads;
    return CMD_GO_ON;
}

int cmd_quant_parse(struct quant_args *a, int argc, char **argv)
{
    const long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
    *a = (struct quant_args){.o = {.rules = {.output_type = -1, .token_embd_type = -1}},
                             .progress = CMD_PROGRESS_AUTO, .rq = {.kind = BUDGET_NONE},
                             .threads = ncpu > 0 ? (uint32_t)ncpu : 1,
                             .n_samples = CALIB_DEFAULT_SAMPLES};
    struct alloc_req *rq = &a->rq;
    static const char not_size[] =
        "%a: '%v' is not a size (bytes, or a number with K M G T / KiB MiB GiB TiB)";
    const struct cmd_opt spec[] = {
        {"-q", "--quiet", CMD_OPT_FLAG, .flag = &a->quiet},
        {NULL, "--pure", CMD_OPT_FLAG, .flag = &a->o.rules.pure},
        {NULL, "--dry-run", CMD_OPT_FLAG, .flag = &a->dry},
        {NULL, "--no-iquants", CMD_OPT_FLAG, .flag = &rq->no_iquants},
        {NULL, "--no-probes", CMD_OPT_FLAG, .flag = &a->no_probes},
        {NULL, "--leave-output-tensor", CMD_OPT_FLAG, .flag = &a->o.rules.leave_output},
        {NULL, "--allow-requantize", CMD_OPT_FLAG, .flag = &a->o.allow_requantize},
        {"-o", "--output", CMD_OPT_STR, .str = &a->out},
        {NULL, "--preset", CMD_OPT_STR, .str = &a->preset_name},
        {NULL, "--imatrix", CMD_OPT_STR, .str = &a->imatrix_path},
        {NULL, "--type-override", CMD_OPT_CALL, .ctx = &a->ov, .call = add_override},
        {"-t", "--threads", CMD_OPT_U32, .u32 = &a->threads, .min = 1, .max = 512,
         .bad = "--threads: '%v' is not 1..512"},
        {NULL, "--output-tensor-type", CMD_OPT_CALL, .ctx = &a->o.rules.output_type,
         .call = parse_type, .bad = "%a: unknown type '%v'"},
        {NULL, "--token-embedding-type", CMD_OPT_CALL, .ctx = &a->o.rules.token_embd_type,
         .call = parse_type, .bad = "%a: unknown type '%v'"},
        {NULL, "--corpus", CMD_OPT_STR, .str = &a->corpus_path},
        {NULL, "--method", CMD_OPT_STR, .str = &a->method_name},
        {NULL, "--samples", CMD_OPT_U32, .u32 = &a->n_samples, .max = 1u << 20,
         .bad = "%a: '%v' is not 0..%x"},
        {NULL, "--seq-len", CMD_OPT_U32, .u32 = &a->seq_len, .max = 1u << 20,
         .bad = "%a: '%v' is not 0..%x"},
#define BUDGET(k) .one_of = &rq->kind, .one_of_val = (k), .one_of_arg = &rq->arg, \
                  .one_of_msg = "one of --bpw, --size, --fit-ram at a time"
        {NULL, "--bpw", CMD_OPT_DOUBLE, .dbl = &rq->bpw, .dmin = 0, .dmin_open = true, .dmax = 64,
         BUDGET(BUDGET_BPW), .bad = "--bpw: '%v' is not a number of bits per weight in (0, 64]"},
        {NULL, "--size", CMD_OPT_SIZE, .u64 = &rq->file_bytes, BUDGET(BUDGET_SIZE),
         .bad = not_size},
        {NULL, "--fit-ram", CMD_OPT_SIZE, .u64 = &rq->file_bytes, BUDGET(BUDGET_RAM),
         .bad = not_size},
#undef BUDGET
        {NULL, "--ctx", CMD_OPT_U64, .u64 = &a->ctx, .min = 1, .max = UINT32_MAX,
         .bad = "--ctx: '%v' is not a positive count"},
        {NULL, "--kv", CMD_OPT_STR, .str = &a->kv_name},
        {NULL, "--max-memory", CMD_OPT_CALL, .ctx = &a->max_memory, .call = parse_max_memory,
         .bad = "--max-memory: expected a size such as 512M or 2G, or none, got '%v'"},
        {NULL, "--work-dir", CMD_OPT_STR, .str = &a->work_dir},
        {NULL, "--resume", CMD_OPT_FLAG, .flag = &a->resume},
#if defined(MW_HAVE_FULL)
        {NULL, "--report", CMD_OPT_STR, .str = &a->report},
        {NULL, "--card", CMD_OPT_STR, .str = &a->card},
#endif
        {NULL, "--progress", CMD_OPT_ENUM, .idx = &a->progress, .names = cmd_progress_mode_names,
         .bad = CMD_PROGRESS_BAD},
    };
    struct cmd_opts op = {CMD_OPTS_TABLE(spec), .pos = &a->src, .max_pos = 1,
                          .too_many = "one SRC at a time (got '%p' and '%a')"};
    const int rc = cmd_parse_args(&op, cmd, cmd_quant_usage, argc, argv);
    return rc != CMD_GO_ON ? rc : check_args(a);
}
