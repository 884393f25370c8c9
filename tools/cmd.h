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
    X(perplexity, "perplexity / KL divergence of a model on a text (llama.cpp's protocol)") \
    X(eval, "quality gate: KLD, top-1, ppl ratio against a reference; exit 1 past a threshold")

/* Commands that need the full build (hf/, calib/): not in MW_MINIMAL builds. */
#if defined(MW_HAVE_FULL)
#define MW_COMMANDS_FULL(X)                                                                \
    X(convert, "convert a Hugging Face checkpoint dir to GGUF (f16, bf16, f32, q8_0)")     \
    X(calib, "run a model over a corpus layer by layer; write a llama.cpp imatrix")        \
    X(plan, "memory budget: weights per preset, KV cache, overhead; what fits which device") \
    X(report, "quantization report (self-contained HTML) and Hugging Face model card of a GGUF")
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
/* cmd_parse_args also answers a lone hidden --help-man: the command's man
 * page "memwall-CMD" in roff on stdout (tools/cmd_man.c), made from usage
 * and p's table; returns 0 (3 if stdout fails). */
int cmd_man_print(const char *page, const char *summary, const char *usage,
                  const struct cmd_opts *p);
/* The one-line help of a command in MW_COMMANDS ("" if none). */
const char *cmd_man_summary(const char *cmd);
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
void cmd_progress_init(struct cmd_progress *p, bool quiet);
void cmd_progress_draw(struct cmd_progress *p, const char *what, double frac, const char *detail);
void cmd_progress_end(struct cmd_progress *p);
/* Draw a whole line (after "\r\033[K") under cmd_progress_draw's rules:
 * nothing unless p->on; at most 5 redraws a second unless force. */
void cmd_progress_line(struct cmd_progress *p, bool force, const char *line);

/* --progress=MODE of quant, calib and convert (docs/commands.md):
 *   auto  the one-line display on stderr when it is a terminal and not -q
 *   none  no progress at all
 *   json  one JSON object per line on stderr (also when it is no terminal,
 *         also with -q): "stage" events (calib's stages and layers), "write"
 *         events (one per output tensor), a final "done". Notices, warnings
 *         and errors stay text lines ("memwall CMD: ..."), which never start
 *         with '{'. */
enum cmd_progress_mode { CMD_PROGRESS_AUTO = 0, CMD_PROGRESS_NONE = 1, CMD_PROGRESS_JSON = 2 };
extern const char *const cmd_progress_mode_names[]; /* CMD_OPT_ENUM names, in enum order */
#define CMD_PROGRESS_BAD "unknown --progress '%v' (auto, none, json)"

/* Progress of a calibration run by stage and layer (calib_run_opts.on_stage,
 * quant_methods_opts.on_stage) and of the writing of an output file.
 * Terminal (mode auto, line->on):
 *   "quant: layer 12/64 ffn_down  elapsed 1h02m  0.19 layers/min  ETA 4h40m"
 * the layer 1-based, elapsed since the command started; the rate and ETA from
 * the layers finished in this pass and the time since its first layer
 * started (a resumed run, first_layer > 0, counts its own layers only):
 * "--" until one is finished. JSON: see cmd_progress_mode. A new pass (an
 * "embed" start: quant's statistics pass for --bpw/--size, then the method's
 * pass) starts the count again; "pass" numbers them from 1. */
struct cmd_stage_progress {
    const char *what;          /* "quant", "calib", "convert": the line's prefix, events' "cmd" */
    int mode;                  /* enum cmd_progress_mode */
    struct cmd_progress *line; /* the terminal line (its `on`, redraw state), or NULL */
    double t0;                 /* the command's clock */
    double t_first;            /* when this pass's first layer started; < 0: not yet */
    double t_done;             /* when layers_done last grew */
    uint32_t done_seen;        /* layers_done then */
    uint32_t pass;
    double t_write;            /* the writing's start (set it when the writing begins);
                                * < 0: taken at the first write report */
    uint64_t write_ti;         /* tensor of the last write event; UINT64_MAX: none */
    bool write_last;           /* the final write event (done == total) was emitted */
};
void cmd_stage_progress_init(struct cmd_stage_progress *sp, const char *what, int mode,
                             struct cmd_progress *line);
/* A calib_stage_fn (ud: the struct cmd_stage_progress). Full builds only. */
struct calib_stage_event;
void cmd_stage_progress_on_stage(void *ud, const struct calib_stage_event *ev);
/* JSON mode: a "write" event at each tensor's first report and at the last
 * (done == total); the arguments are quant_progress_fn's. */
void cmd_stage_progress_write(struct cmd_stage_progress *sp, uint64_t done, uint64_t total,
                              uint64_t ti, uint64_t nt, const char *name);
/* JSON mode: the final {"event":"done", "exit": rc, "output": path or null}. */
void cmd_stage_progress_done(struct cmd_stage_progress *sp, int rc, const char *output);

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
