/*
 * tools/cmd_report.c — `memwall report FILE.gguf [MORE.gguf ...] -o
 * report.html [--card README.md] [--reference F16.gguf --text T]`: the
 * quantization report of FILE (tools/report.h) as one self-contained HTML
 * page, and/or its Hugging Face model card; with a reference and a text,
 * perplexity, KL divergence and top-1 agreement of every file given and a
 * size-vs-KLD plot of them. Also what `memwall quant --report/--card` runs
 * after writing its file, and the command line quant records in
 * memwall.quant.command.
 */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tools/cmd.h"
#include "tools/report.h"

static const char usage_text[] =
    "usage: memwall report FILE.gguf [MORE.gguf ...] (-o REPORT.html | --card README.md)\n"
    "                      [--reference F16.gguf --text T [--ctx N] [--chunks N]] [-t N]\n"
    "  What FILE holds, as one self-contained HTML page (inline CSS and SVG, nothing\n"
    "  fetched): the type of every tensor by layer and kind, bits per layer, bytes by\n"
    "  tensor kind against the budget asked, the calibration (method, samples,\n"
    "  fallbacks) when it was made with --corpus, the memory plan (KV cache and\n"
    "  overhead per context, which device tiers it fits) — all from the file itself.\n"
    "  -o, --output FILE    the HTML page\n"
    "  --card FILE          a Hugging Face model card (README.md) for FILE\n"
    "  --reference F16      with --text: perplexity, KL divergence and top-1 agreement\n"
    "  --text T             of each FILE against this model on text T; with more than\n"
    "                       one FILE a size-vs-KLD plot of them all (files not made by\n"
    "                       memwall, e.g. llama.cpp's, marked)\n"
    "  --ctx N              tokens per chunk (default 256)\n"
    "  --chunks N           at most N chunks (default: all of the text)\n"
    "  -t, --threads N      runtime threads (default 4)\n"
    "exit status: 0 ok, 1 bad input, 2 usage, 3 I/O error\n";

#define MAX_FILES 64

struct report_args {
    const char *files[MAX_FILES];
    int n_files;
    const char *html, *card, *reference, *text;
    uint32_t ctx, chunks, threads;
};

/* Write the page and/or the card of files[0..n). */
static int emit(const char *cmd, struct report_file *files, size_t n, const char *html,
                const char *card, const char *command, const char *src, const char *license)
{
    struct mw_err err;
    mw_err_clear(&err);
    enum mw_status s = MW_OK;
    if (html) {
        struct report_buf b = {0};
        report_html(&b, files, n);
        s = report_buf_write(&b, html, &err);
        free(b.p);
    }
    if (s == MW_OK && card) {
        struct report_buf b = {0};
        report_card(&b, &files[0], command, src, license);
        s = report_buf_write(&b, card, &err);
        free(b.p);
    }
    return s == MW_OK ? 0 : cmd_fail(cmd, &err);
}

static int run(const char *cmd, const struct report_args *a)
{
    struct report_file files[MAX_FILES];
    struct mw_err err;
    mw_err_clear(&err);
    memset(files, 0, sizeof files);
    enum mw_status s = MW_OK;
    int n = 0, rc;
    for (; n < a->n_files && s == MW_OK; n++) s = report_file_open(a->files[n], &files[n], &err);
    if (s == MW_OK && a->reference) {
        const struct report_quality_opts qo = {.reference = a->reference, .text = a->text,
                                               .n_ctx = a->ctx, .max_chunks = a->chunks,
                                               .n_threads = a->threads};
        s = report_measure(&qo, files, (size_t)n, &err);
    }
    rc = s == MW_OK ? emit(cmd, files, (size_t)n, a->html, a->card, NULL, NULL, NULL)
                    : cmd_fail(cmd, &err);
    for (int i = 0; i < n; i++) report_file_close(&files[i]);
    return rc;
}

int cmd_report(int argc, char **argv)
{
    const char *cmd = "report";
    struct report_args a = {.ctx = 256, .threads = 4};
    const struct cmd_opt spec[] = {
        {"-o", "--output", CMD_OPT_STR, .str = &a.html},
        {NULL, "--card", CMD_OPT_STR, .str = &a.card},
        {NULL, "--reference", CMD_OPT_STR, .str = &a.reference},
        {NULL, "--text", CMD_OPT_STR, .str = &a.text},
        {NULL, "--ctx", CMD_OPT_U32, .u32 = &a.ctx, .min = 8, .max = 1u << 20,
         .bad = "--ctx: expected %n..%x"},
        {NULL, "--chunks", CMD_OPT_U32, .u32 = &a.chunks, .min = 1, .max = 1u << 30,
         .bad = "--chunks: expected %n..%x"},
        {"-t", "--threads", CMD_OPT_U32, .u32 = &a.threads, .min = 1, .max = 256,
         .bad = "--threads: expected 1..%x"},
    };
    struct cmd_opts op = {CMD_OPTS_TABLE(spec), .pos = a.files, .max_pos = MAX_FILES,
                          .too_many = "at most 64 files"};
    int rc = cmd_parse_args(&op, cmd, usage_text, argc, argv);
    if (rc != CMD_GO_ON) return rc;
    a.n_files = op.n_pos;
    if (!a.n_files) return cmd_usage_error(cmd, usage_text, "missing FILE.gguf");
    if (!a.html && !a.card)
        return cmd_usage_error(cmd, usage_text, "nothing to write: give -o REPORT.html and/or "
                                                "--card README.md");
    if (!a.reference != !a.text)
        return cmd_usage_error(cmd, usage_text, "--reference and --text go together");
    if ((rc = cmd_parse_late(&op, cmd, usage_text)) != CMD_GO_ON) return rc;
    return cmd_finish_output(cmd, run(cmd, &a));
}

int report_after_quant(const char *cmd, const char *out, const char *html, const char *card,
                       const char *command, const char *src, bool src_is_dir)
{
    struct report_file rf;
    struct mw_err err;
    mw_err_clear(&err);
    if (report_file_open(out, &rf, &err) != MW_OK) return cmd_fail(cmd, &err);
    char *license = src_is_dir ? report_hf_license(src) : NULL;
    const int rc = emit(cmd, &rf, 1, html, card, command, src, license);
    free(license);
    report_file_close(&rf);
    return rc;
}

// --- the recorded command line ---

/* Options of quant that do not change the output's bytes: dropped, with
 * their value when they take one. */
static int dropped(const char *a)
{
    static const char *const with_value[] = {"-o", "--output", "-t", "--threads", "--progress",
                                             "--max-memory", "--work-dir", "--report", "--card"};
    static const char *const flags[] = {"-q", "--quiet", "--resume", "--dry-run"};
    for (size_t i = 0; i < sizeof flags / sizeof flags[0]; i++)
        if (strcmp(a, flags[i]) == 0) return 1;
    for (size_t i = 0; i < sizeof with_value / sizeof with_value[0]; i++) {
        const size_t n = strlen(with_value[i]);
        if (strncmp(a, with_value[i], n) != 0) continue;
        if (a[n] == '\0') return 2;               /* its value is the next argument */
        if (a[n] == '=' && a[1] == '-') return 1; /* --long=VALUE */
    }
    return 0;
}

static void quoted(struct report_buf *b, const char *s)
{
    bool plain = *s != '\0';
    for (const char *p = s; *p && plain; p++)
        plain = strchr("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_./=:+,%@",
                       *p) != NULL;
    if (plain) {
        report_buf_printf(b, " %s", s);
        return;
    }
    report_buf_printf(b, " '");
    for (const char *p = s; *p; p++) {
        if (*p == '\'') report_buf_printf(b, "'\\''");
        else if ((unsigned char)*p >= 0x20) report_buf_printf(b, "%c", *p);
    }
    report_buf_printf(b, "'");
}

char *report_quant_command(int argc, char **argv, const char *src)
{
    struct report_buf b = {0};
    report_buf_printf(&b, "memwall quant");
    bool opts = true;
    for (int i = 1; i < argc; i++) {
        const int d = opts ? dropped(argv[i]) : 0;
        if (opts && strcmp(argv[i], "--") == 0) opts = false;
        if (d == 2) i++;
        if (d) continue;
        if (argv[i] == src) report_buf_printf(&b, " SRC"); /* the very argument parsed as SRC */
        else quoted(&b, argv[i]);
    }
    if (b.oom) {
        free(b.p);
        return NULL;
    }
    return b.p;
}
