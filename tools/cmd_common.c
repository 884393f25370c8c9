/* tools/cmd_common.c — helpers shared by the memwall subcommands. */
#define _POSIX_C_SOURCE 200809L
#include "tools/cmd.h"
#include "tools/json_writer.h"

#include <errno.h>
#include <stdarg.h>
#include <string.h>
#include <time.h>
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

double cmd_now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

void cmd_progress_init(struct cmd_progress *p, bool quiet)
{
    p->on = !quiet && isatty(STDERR_FILENO);
    p->drawn = false;
    p->t0 = cmd_now_s();
    p->last = -1.0;
}

void cmd_progress_draw(struct cmd_progress *p, const char *what, double frac, const char *detail)
{
    if (!p->on) return;
    const double t = cmd_now_s();
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
