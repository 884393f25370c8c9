/*
 * tools/cmd_convert.c — `memwall convert HF_DIR -o OUT.gguf [--type T]`:
 * Hugging Face checkpoint (safetensors + config.json + tokenizer) to a GGUF
 * file llama.cpp loads unchanged. The work is hf_convert() (hf/hf.h); this
 * file parses flags, shows progress with an ETA when stderr is a terminal,
 * and maps the result to the exit status.
 */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <sys/stat.h>
#include <unistd.h>

#include "hf/hf.h"
#include "tools/cmd.h"

static const char usage_text[] =
    "usage: memwall convert HF_DIR -o OUT.gguf [--type f16|bf16|f32|q8_0] [--name NAME]\n"
    "                       [--threads N] [--progress auto|none|json] [-q]\n"
    "  Convert a Hugging Face checkpoint directory (config.json, model.safetensors or\n"
    "  model.safetensors.index.json + shards, tokenizer.json or tokenizer.model) to GGUF.\n"
    "  Architectures: LlamaForCausalLM, MistralForCausalLM (GGUF llama), Qwen2ForCausalLM.\n"
    "  -o, --output FILE  output file (written to a temp file, renamed when complete)\n"
    "  --type T           f16 (default), bf16, f32, or q8_0 (ggml's reference Q8_0);\n"
    "                     norms and biases stay f32\n"
    "  --name NAME        general.name (default: the directory name)\n"
    "  -t, --threads N    threads converting rows (default: all CPUs, at most 64); the\n"
    "                     output bytes are the same for any N\n"
    "  --progress MODE    auto (default: a progress line when stderr is a terminal),\n"
    "                     none, or json (one JSON event per tensor on stderr, even\n"
    "                     with -q)\n"
    "  -q, --quiet        no progress display\n"
    "exit status: 0 ok, 1 bad input (no output written), 2 usage, 3 I/O error\n";

/* hf_convert's progress callback -> the shared one-line display or the JSON
 * events (cmd_common.c); ud: the struct cmd_stage_progress */
static void on_progress(void *ud, uint64_t done, uint64_t total, uint64_t ti, uint64_t nt,
                        const char *name)
{
    struct cmd_stage_progress *sp = ud;
    if (sp->mode == CMD_PROGRESS_JSON) {
        /* hf counts tensors from 1; the events from 0 */
        cmd_stage_progress_write(sp, done, total, ti ? ti - 1 : 0, nt, name);
        return;
    }
    char detail[160];
    snprintf(detail, sizeof detail, "%3.0f%%  %.1f/%.1f MiB  tensor %llu/%llu %.40s",
             total ? 100.0 * (double)done / (double)total : 100.0, (double)done / 1048576.0,
             (double)total / 1048576.0, (unsigned long long)ti, (unsigned long long)nt,
             name ? name : "");
    cmd_progress_draw(sp->line, "convert", total ? (double)done / (double)total : 1.0, detail);
}

static bool parse_type(void *ctx, const char *val, char *msg, size_t cap)
{
    (void)msg, (void)cap;
    return hf_out_type_parse(val, ctx);
}

int cmd_convert(int argc, char **argv)
{
    const char *cmd = "convert";
    const char *dir = NULL, *out = NULL;
    bool quiet = false;
    int progress = CMD_PROGRESS_AUTO;
    struct hf_convert_opts opts = {.type = HF_OUT_F16}; /* n_threads 0: not given */
    const struct cmd_opt spec[] = {
        {"-q", "--quiet", CMD_OPT_FLAG, .flag = &quiet},
        {"-o", "--output", CMD_OPT_STR, .str = &out},
        {NULL, "--type", CMD_OPT_CALL, .ctx = &opts.type, .call = parse_type, .late = true,
         .bad = "unknown --type '%v' (f16, bf16, f32, q8_0)"},
        {NULL, "--name", CMD_OPT_STR, .str = &opts.name},
        {"-t", "--threads", CMD_OPT_U32, .u32 = &opts.n_threads, .min = 1, .max = 512,
         .late = true, .bad = "--threads: '%v' is not 1..512"},
        {NULL, "--progress", CMD_OPT_ENUM, .idx = &progress, .names = cmd_progress_mode_names,
         .bad = CMD_PROGRESS_BAD},
    };
    struct cmd_opts op = {CMD_OPTS_TABLE(spec), .pos = &dir, .max_pos = 1,
                          .too_many = "one HF_DIR at a time (got '%p' and '%a')"};
    int rc = cmd_parse_args(&op, cmd, usage_text, argc, argv);
    if (rc != CMD_GO_ON) return rc;
    if (!dir) return cmd_usage_error(cmd, usage_text, "missing HF_DIR");
    if (!out || !out[0]) return cmd_usage_error(cmd, usage_text, "missing -o OUT.gguf");
    if ((rc = cmd_parse_late(&op, cmd, usage_text)) != CMD_GO_ON) return rc;
    if (!opts.n_threads) {
        long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
        opts.n_threads = ncpu < 1 ? 1u : ncpu > 64 ? 64u : (unsigned)ncpu;
    }
    struct stat st;
    if (stat(out, &st) == 0 && S_ISDIR(st.st_mode))
        return cmd_usage_error(cmd, usage_text, "-o '%s' is a directory", out);

    struct cmd_progress prog;
    cmd_progress_init(&prog, quiet || progress != CMD_PROGRESS_AUTO);
    struct cmd_stage_progress sp;
    cmd_stage_progress_init(&sp, cmd, progress, &prog);
    if (prog.on || progress == CMD_PROGRESS_JSON) {
        opts.progress = on_progress;
        opts.progress_ud = &sp;
    }
    struct mw_err err;
    mw_err_clear(&err);
    const double t0 = mw_now_s();
    sp.t_write = t0;
    enum mw_status s = hf_convert(dir, out, &opts, &err);
    cmd_progress_end(&prog);
    if (s != MW_OK) {
        if (err.code == MW_OK) MW_FAIL(&err, s, MW_ERR_OFF_NONE, "%s", mw_status_msg(s));
        rc = cmd_fail(cmd, &err);
        cmd_stage_progress_done(&sp, rc, out);
        return rc;
    }
    if (!quiet) {
        long long size = (stat(out, &st) == 0) ? (long long)st.st_size : -1;
        fprintf(stderr, "memwall convert: wrote %s (%s, %lld bytes) in %.2fs\n", out,
                hf_out_type_name(opts.type), size, mw_now_s() - t0);
    }
    cmd_stage_progress_done(&sp, 0, out);
    return 0;
}
