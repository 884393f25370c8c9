/* tools/cmd_common.c — helpers shared by the memwall subcommands. */
#define _POSIX_C_SOURCE 200809L
#include "tools/cmd.h"
#include "tools/json_writer.h"
#if defined(MW_HAVE_FULL)
#include "calib/calib.h"
#endif

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

bool cmd_is_help(const char *arg) { return strcmp(arg, "-h") == 0 || strcmp(arg, "--help") == 0; }

int cmd_usage_error(const char *cmd, const char *usage, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "memwall %s: ", cmd);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fprintf(stderr, "\n%s", usage);
    return mw_status_exit_code(MW_E_USAGE);
}

int cmd_parse_args(struct cmd_opts *p, const char *cmd, const char *usage, int argc, char **argv)
{
    if (argc == 2 && strcmp(argv[1], "--help-man") == 0) {
        char page[64];
        snprintf(page, sizeof page, "memwall-%s", cmd);
        return cmd_man_print(page, cmd_man_summary(cmd), usage, p);
    }
    switch (cmd_opts_parse(p, argc, argv)) {
    case CMD_OPTS_OK: return CMD_GO_ON;
    case CMD_OPTS_HELP: fputs(usage, stdout); return cmd_finish_output(cmd, 0);
    case CMD_OPTS_ERR: break;
    }
    return cmd_usage_error(cmd, usage, "%s", p->msg);
}

int cmd_parse_late(struct cmd_opts *p, const char *cmd, const char *usage)
{
    if (cmd_opts_finish(p) == CMD_OPTS_OK) return CMD_GO_ON;
    return cmd_usage_error(cmd, usage, "%s", p->msg);
}

int cmd_fail(const char *cmd, const struct mw_err *err)
{
    char buf[1024];
    /* the message quotes names and strings from the input: escaped */
    fprintf(stderr, "memwall %s: ", cmd);
    cmd_put_text(stderr, mw_err_format(err, buf, sizeof buf));
    fputc('\n', stderr);
    return mw_status_exit_code(err->code);
}

/* Bytes of the character at p[0] (n left) written as they are, or 0 when
 * the byte p[0] is to be escaped as \xNN. */
static size_t text_unit(const unsigned char *p, size_t n)
{
    if (p[0] >= 0x20 && p[0] < 0x7f) return 1;
    const size_t len = p[0] >= 0x80 ? jw_utf8_len(p, n) : 0;
    /* C1 controls (U+0080..U+009F, UTF-8 C2 80..C2 9F) act as escape
     * sequences on some terminals: escaped like C0 and DEL */
    return len == 2 && p[0] == 0xc2 && p[1] < 0xa0 ? 0 : len;
}

void cmd_put_text(FILE *out, const char *s)
{
    const unsigned char *p = (const unsigned char *)s;
    const size_t n = strlen(s);
    for (size_t i = 0; i < n;) {
        const size_t len = text_unit(p + i, n - i);
        if (len == 0) fprintf(out, "\\x%02x", p[i++]);
        else fwrite(p + i, 1, len, out), i += len;
    }
}

const char *cmd_text(const char *s, char *buf, size_t cap)
{
    const unsigned char *p = (const unsigned char *)s;
    const size_t n = strlen(s);
    size_t o = 0;
    for (size_t i = 0; i < n;) {
        const size_t len = text_unit(p + i, n - i);
        if (o + (len ? len : 4) >= cap) break;
        if (len == 0) o += (size_t)snprintf(buf + o, cap - o, "\\x%02x", p[i++]);
        else memcpy(buf + o, p + i, len), o += len, i += len;
    }
    if (cap) buf[o] = 0;
    return buf;
}

void cmd_put_escaped(FILE *out, const uint8_t *s, uint64_t n, uint64_t max)
{
    const uint64_t lim = max && n > max ? max : n;
    uint64_t i = 0;
    while (i < lim) {
        const uint8_t c = s[i];
        switch (c) {
        case '\n': fputs("\\n", out); break;
        case '\t': fputs("\\t", out); break;
        case '\r': fputs("\\r", out); break;
        case '"': fputs("\\\"", out); break;
        case '\\': fputs("\\\\", out); break;
        default:
            if (c < 0x20 || c == 0x7f) {
                fprintf(out, "\\x%02x", c);
            } else if (c >= 0x80) {
                /* valid UTF-8 as is (never cut in the middle), other bytes escaped */
                const size_t len = jw_utf8_len(s + i, (size_t)(n - i));
                if (len == 0) {
                    fprintf(out, "\\x%02x", c);
                } else {
                    if (i + len > lim) {
                        i = lim;
                        continue;
                    }
                    fwrite(s + i, 1, len, out);
                    i += len;
                    continue;
                }
            } else {
                fputc(c, out);
            }
        }
        i++;
    }
    if (lim < n) fputs("...", out);
}

int cmd_finish_output(const char *cmd, int rc)
{
    if (fflush(stdout) != 0 || ferror(stdout)) {
        if (cmd_stdout_reader_gone()) return rc; /* `| head`: not an error */
        fprintf(stderr, "memwall %s: error writing output: %s\n", cmd, strerror(errno));
        return mw_status_exit_code(MW_E_IO);
    }
    return rc;
}

void cmd_progress_init(struct cmd_progress *p, bool quiet)
{
    p->on = !quiet && isatty(STDERR_FILENO);
    p->drawn = false;
    p->t0 = mw_now_s();
    p->last = -1.0;
}

void cmd_progress_draw(struct cmd_progress *p, const char *what, double frac, const char *detail)
{
    if (!p->on) return;
    const double t = mw_now_s();
    if (frac < 1.0 && p->last >= 0 && t - p->last < 0.2) return;
    p->last = t;
    const double el = t - p->t0;
    char eta[32] = "";
    if (frac > 0.01 && frac < 1.0) snprintf(eta, sizeof eta, " ETA %.0fs", el / frac - el);
    fprintf(stderr, "\r\033[K%s: %s  %.1fs%s", what, detail ? detail : "", el, eta);
    fflush(stderr);
    p->drawn = true;
}

void cmd_progress_end(struct cmd_progress *p)
{
    if (p->drawn) fputs("\r\033[K", stderr);
    p->drawn = false;
}

void cmd_progress_line(struct cmd_progress *p, bool force, const char *line)
{
    if (!p->on) return;
    const double t = mw_now_s();
    if (!force && p->last >= 0 && t - p->last < 0.2) return;
    p->last = t;
    fprintf(stderr, "\r\033[K%s", line);
    fflush(stderr);
    p->drawn = true;
}

// --- progress by stage and layer (--progress=MODE) ---

const char *const cmd_progress_mode_names[] = {"auto", "none", "json", NULL};

void cmd_stage_progress_init(struct cmd_stage_progress *sp, const char *what, int mode,
                             struct cmd_progress *line)
{
    *sp = (struct cmd_stage_progress){.what = what, .mode = mode, .line = line,
                                      .t0 = mw_now_s(), .t_first = -1.0, .t_done = -1.0,
                                      .t_write = -1.0, .write_ti = UINT64_MAX};
}

/* One JSON event, built in memory and written to stderr in one piece:
 * {"event":E,"cmd":C, ... } and a newline. Strings through json_writer
 * (escaped, valid UTF-8). */
struct jline {
    char *buf;
    size_t len;
    FILE *f;
    struct jw w;
};

static bool jl_begin(struct jline *j, const struct cmd_stage_progress *sp, const char *event)
{
    j->buf = NULL;
    j->len = 0;
    if (!(j->f = open_memstream(&j->buf, &j->len))) return false;
    jw_init(&j->w, j->f);
    fputs("{\"event\":", j->f);
    jw_str(&j->w, event);
    fputs(",\"cmd\":", j->f);
    jw_str(&j->w, sp->what);
    return true;
}

static void jl_str(struct jline *j, const char *key, const char *v)
{
    fprintf(j->f, ",\"%s\":", key);
    jw_str(&j->w, v);
}

static void jl_u64(struct jline *j, const char *key, uint64_t v)
{
    fprintf(j->f, ",\"%s\":%llu", key, (unsigned long long)v);
}

/* a number with `prec` decimals; null when unknown (< 0, not finite) */
static void jl_num(struct jline *j, const char *key, double v, int prec)
{
    if (v >= 0 && isfinite(v)) fprintf(j->f, ",\"%s\":%.*f", key, prec, v);
    else fprintf(j->f, ",\"%s\":null", key);
}

static void jl_end(struct jline *j)
{
    fputs("}\n", j->f);
    if (fclose(j->f) == 0 && j->buf) {
        fwrite(j->buf, 1, j->len, stderr);
        fflush(stderr);
    }
    free(j->buf);
}

#if defined(MW_HAVE_FULL)
/* "42s", "12m05s", "4h40m"; "--" when unknown (< 0) */
static const char *fmt_dur(char *b, size_t n, double s)
{
    if (!(s >= 0) || !isfinite(s)) snprintf(b, n, "--");
    else if (s >= 3.6e8) snprintf(b, n, ">100000h");
    else {
        const unsigned long long t = (unsigned long long)(s + 0.5);
        if (t < 60) snprintf(b, n, "%llus", t);
        else if (t < 3600) snprintf(b, n, "%llum%02llus", t / 60, t % 60);
        else snprintf(b, n, "%lluh%02llum", t / 3600, t / 60 % 60);
    }
    return b;
}

void cmd_stage_progress_on_stage(void *ud, const struct calib_stage_event *ev)
{
    struct cmd_stage_progress *sp = ud;
    if (sp->mode == CMD_PROGRESS_NONE) return;
    const bool json = sp->mode == CMD_PROGRESS_JSON;
    if (!json && !(sp->line && sp->line->on)) return;
    const double t = mw_now_s();
    const bool embed = strcmp(ev->stage, "embed") == 0;
    if (embed && !ev->end) {
        /* a new pass */
        sp->pass++;
        sp->t_first = sp->t_done = -1.0;
        sp->done_seen = 0;
    } else if (!embed && sp->t_first < 0) {
        sp->t_first = t; /* the first stage of this pass's first layer */
    }
    if (sp->pass == 0) sp->pass = 1;
    if (ev->layers_done != sp->done_seen) {
        sp->done_seen = ev->layers_done;
        sp->t_done = t;
    }
    /* rate: the layers finished over the time they took (from the pass's
     * first layer to the last one finished); ETA: the layers left at that
     * rate, less the time since the last one finished */
    const uint32_t in_run = ev->n_layer > ev->first_layer ? ev->n_layer - ev->first_layer : 0;
    const uint32_t left = in_run > ev->layers_done ? in_run - ev->layers_done : 0;
    double rate = -1.0, eta = -1.0;
    if (ev->layers_done > 0 && sp->t_first >= 0 && sp->t_done > sp->t_first) {
        rate = (double)ev->layers_done / (sp->t_done - sp->t_first);
        eta = (double)left / rate - (t - sp->t_done);
        if (eta < 0) eta = 0;
    }
    if (left == 0 && ev->layers_done > 0) eta = 0;
    if (json) {
        struct jline j;
        if (!jl_begin(&j, sp, "stage")) return;
        jl_u64(&j, "pass", sp->pass);
        jl_str(&j, "stage", ev->stage);
        jl_str(&j, "state", ev->end ? "end" : "start");
        jl_u64(&j, "layer", ev->layer);
        jl_u64(&j, "n_layer", ev->n_layer);
        jl_u64(&j, "first_layer", ev->first_layer);
        jl_u64(&j, "layers_done", ev->layers_done);
        jl_num(&j, "elapsed_s", t - sp->t0, 3);
        jl_num(&j, "run_s", ev->seconds, 3);
        jl_num(&j, "rate_layers_per_s", rate, 6);
        jl_num(&j, "eta_s", eta, 3);
        jl_end(&j);
        return;
    }
    char el[24], et[24], rt[40], line[256];
    if (rate < 0) snprintf(rt, sizeof rt, "-- layers/min");
    else if (rate >= 1.0) snprintf(rt, sizeof rt, "%.2f layers/s", rate);
    else snprintf(rt, sizeof rt, "%.2f layers/min", rate * 60.0);
    const bool layer_end = ev->end && strcmp(ev->stage, "layer") == 0;
    const uint32_t shown = ev->layer < ev->n_layer ? ev->layer + 1 : ev->n_layer;
    char stg[32];
    snprintf(line, sizeof line, "%s: layer %u/%u %s  elapsed %s  %s  ETA %s", sp->what, shown,
             ev->n_layer, layer_end ? "done" : cmd_text(ev->stage, stg, sizeof stg),
             fmt_dur(el, sizeof el, t - sp->t0), rt, fmt_dur(et, sizeof et, eta));
    cmd_progress_line(sp->line, layer_end, line);
    if (layer_end && left == 0) cmd_progress_end(sp->line); /* the pass is over */
}
#endif

void cmd_stage_progress_write(struct cmd_stage_progress *sp, uint64_t done, uint64_t total,
                              uint64_t ti, uint64_t nt, const char *name)
{
    if (sp->mode != CMD_PROGRESS_JSON || sp->write_last) return;
    const double t = mw_now_s();
    if (sp->t_write < 0) sp->t_write = t;
    const bool last = done >= total;
    if (ti == sp->write_ti && !last) return;
    sp->write_ti = ti;
    sp->write_last = last;
    const double el = t - sp->t_write;
    struct jline j;
    if (!jl_begin(&j, sp, "write")) return;
    jl_u64(&j, "tensor", ti);
    jl_u64(&j, "n_tensors", nt);
    jl_str(&j, "name", name ? name : "");
    jl_u64(&j, "bytes_done", done);
    jl_u64(&j, "bytes_total", total);
    jl_num(&j, "elapsed_s", t - sp->t0, 3);
    jl_num(&j, "eta_s", last ? 0.0 : done > 0 ? el * (double)(total - done) / (double)done : -1.0,
           3);
    jl_end(&j);
}

void cmd_stage_progress_done(struct cmd_stage_progress *sp, int rc, const char *output)
{
    if (sp->mode != CMD_PROGRESS_JSON) return;
    struct jline j;
    if (!jl_begin(&j, sp, "done")) return;
    fprintf(j.f, ",\"ok\":%s,\"exit\":%d,\"output\":", rc == 0 ? "true" : "false", rc);
    jw_str(&j.w, rc == 0 ? output : NULL);
    jl_num(&j, "elapsed_s", mw_now_s() - sp->t0, 3);
    jl_end(&j);
}
