/*
 * tools/cmd.h — the memwall subcommands and what they share.
 *
 * Adding a command is one row in MW_COMMANDS (MW_COMMANDS_FULL for commands
 * that need hf/ or calib/, which MW_MINIMAL builds leave out), plus its file
 * tools/cmd_<name>.c defining `int cmd_<name>(int argc, char **argv)` and
 * that file in tools/CMakeLists.txt. argv[0] is the command name; the
 * function parses its options (a table for tools/cmd_opts.h, through
 * cmd_parse_args), calls public module headers only, prints, and returns
 * the process exit code (0 ok, 1 bad input / failed verification, 2 usage,
 * 3 I/O or resource: mw_status_exit_code()).
 */
#ifndef MW_TOOLS_CMD_H
#define MW_TOOLS_CMD_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "core/mw.h"
#include "tools/cmd_opts.h"

/* X(name, one-line help) */
#define MW_COMMANDS(X)                                                                       \
    X(inspect, "show the header, metadata and tensor table of a GGUF file")                  \
    X(verify, "check a GGUF file: structure, bounds, padding, checksums (--deep: values)") \
    X(quant, "quantize with llama-quantize's presets (GGUF; HF dir in full builds)")       \
    X(run, "run a model: generate from a prompt or chat (the device runtime)")               \
    X(perplexity, "perplexity / KL divergence of a model on a text (llama.cpp's protocol)")

/* Commands that need the full build (hf/, calib/): not in MW_MINIMAL builds. */
#if defined(MW_HAVE_FULL)
#define MW_COMMANDS_FULL(X)                                                                \
    X(convert, "convert a Hugging Face checkpoint dir to GGUF (f16, bf16, f32, q8_0)")     \
    X(calib, "run a model over a corpus layer by layer; write a llama.cpp imatrix")        \
    X(plan, "memory budget: weights per preset, KV cache, overhead; what fits which device")
#else
#define MW_COMMANDS_FULL(X)
#endif

#define MW__CMD_DECL(name, help) int cmd_##name(int argc, char **argv);
MW_COMMANDS(MW__CMD_DECL)
MW_COMMANDS_FULL(MW__CMD_DECL)
#undef MW__CMD_DECL

struct mw_cmd {
    const char *name;
    int (*fn)(int argc, char **argv);
    const char *help;
};

// --- helpers for commands (tools/cmd_common.c) ---

/* "-h" or "--help". */
bool cmd_is_help(const char *arg);
/* Print "memwall CMD: MSG" and the usage text to stderr; returns 2. */
int cmd_usage_error(const char *cmd, const char *usage, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* cmd_opts_parse(p) for command cmd: --help prints usage on stdout and
 * returns 0 (3 if stdout fails); a usage error prints as cmd_usage_error and
 * returns 2; CMD_GO_ON when the command goes on. */
#define CMD_GO_ON (-1)
int cmd_parse_args(struct cmd_opts *p, const char *cmd, const char *usage, int argc, char **argv);
/* cmd_opts_finish(p) the same way: CMD_GO_ON or 2. */
int cmd_parse_late(struct cmd_opts *p, const char *cmd, const char *usage);
/* Print "memwall CMD: <mw_err_format(err)>" to stderr; returns the exit code
 * of err->code. */
int cmd_fail(const char *cmd, const struct mw_err *err);
/* Write NUL-terminated text that may quote untrusted bytes (key and tensor
 * names, JSON strings of a model file: error messages, verify findings):
 * printable ASCII and valid UTF-8 as they are; control characters (C0, DEL,
 * C1) and invalid UTF-8 as \xNN, so an input file cannot send terminal
 * escape sequences through a message. */
void cmd_put_text(FILE *out, const char *s);
/* cmd_put_text's output into buf: at most cap-1 bytes, cut before a
 * character or escape that does not fit; returns buf. */
const char *cmd_text(const char *s, char *buf, size_t cap);
/* Write n bytes of untrusted text printable: \n \t \" \\ and \xNN escapes;
 * at most max bytes of s, then "..." (max 0: no limit). */
void cmd_put_escaped(FILE *out, const uint8_t *s, uint64_t n, uint64_t max);
/* Flush stdout; on a write error print it and return 3, else return rc. */
int cmd_finish_output(const char *cmd, int rc);
/* Whether stdout is a pipe or socket whose reader has gone (SIGPIPE is
 * ignored: writes then fail with EPIPE, which is no error of ours). */
bool cmd_stdout_reader_gone(void);

/* A one-line progress display on stderr, drawn only when stderr is a
 * terminal and not quiet: "\r\033[K<what>: <detail>  <elapsed>s ETA <n>s",
 * at most 5 redraws a second (frac >= 1 always draws). cmd_progress_end
 * clears the line if anything was drawn. Used by calib and convert. */
struct cmd_progress {
    bool on, drawn;
    double t0, last;
};
double cmd_now_s(void); /* CLOCK_MONOTONIC seconds */
void cmd_progress_init(struct cmd_progress *p, bool quiet);
void cmd_progress_draw(struct cmd_progress *p, const char *what, double frac, const char *detail);
void cmd_progress_end(struct cmd_progress *p);

// --- signals (tools/cmd_signals.c) ---

/* Called once by main() before running command cmd_name: SIGXFSZ ignored
 * (EFBIG becomes an ordinary I/O error, exit 3); SIGBUS on a mapped input
 * that shrank prints the file and offset, removes this process's unfinished
 * output temp files and exits 3; SIGINT/SIGTERM/SIGHUP remove them and then
 * end the process as before. */
void cmd_signals_install(const char *cmd_name);
/* The same with the whole message prefix given ("memwall-run"). */
void cmd_signals_install_prog(const char *prog);

#endif /* MW_TOOLS_CMD_H */
