/*
 * tools/cmd_man.c — man pages from the --help texts and option tables
 * (cmd.h cmd_man_print): `memwall CMD --help-man`, `memwall --help-man` and
 * `memwall-run --help-man` print roff, which the build writes to
 * man/memwall-CMD.1 (cmake/man.cmake). The page is the --help text itself,
 * laid out for man(1), plus any option of the command's table that the text
 * does not mention (listed as such), so a page cannot drift from the
 * command it documents.
 *
 * How the --help text is read: "usage:" and the lines indented under it are
 * the SYNOPSIS; a line indented 1–6 spaces that starts with '-' is an
 * option ("  -o, --output FILE   what it does"), the text after its first
 * run of two spaces its description, continued by the more indented lines
 * that follow (a following "[--kv ...]" at option indent extends the
 * option's name); an unindented line ending in ':' is a subsection; every
 * other line is text.
 */
#include <ctype.h>
#include <stdio.h>
#include <string.h>

#include "tools/cmd.h"

struct man_cmd {
    const char *name, *help;
};
static const struct man_cmd man_cmds[] = {
#define MW__MAN_ROW(name, help) {#name, help},
    MW_COMMANDS(MW__MAN_ROW) MW_COMMANDS_FULL(MW__MAN_ROW)
#undef MW__MAN_ROW
};

/* roff-escape n bytes of s: backslash, '-' (an ASCII hyphen-minus, so
 * options copy and paste), a leading '.' or '\''. */
static void put_roff(FILE *o, const char *s, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        if (i == 0 && (s[0] == '.' || s[0] == '\'')) fputs("\\&", o);
        if (s[i] == '\\') fputs("\\e", o);
        else if (s[i] == '-') fputs("\\-", o);
        else fputc(s[i], o);
    }
}

static size_t indent_of(const char *s, size_t n)
{
    size_t k = 0;
    while (k < n && s[k] == ' ') k++;
    return k;
}

/* Whether name appears in text as a whole option (not as the prefix of a
 * longer one: "--bpw" is not found in "--bpw-x"). */
static bool mentions(const char *text, const char *name)
{
    const size_t n = strlen(name);
    for (const char *p = strstr(text, name); p; p = strstr(p + 1, name)) {
        const char after = p[n];
        const bool start = p == text || !(isalnum((unsigned char)p[-1]) || p[-1] == '-');
        if (start && !(isalnum((unsigned char)after) || after == '-' || after == '_')) return true;
    }
    return false;
}

static const char *kind_value(enum cmd_opt_kind k)
{
    switch (k) {
    case CMD_OPT_FLAG: return "";
    case CMD_OPT_U32:
    case CMD_OPT_U64: return " N";
    case CMD_OPT_SIZE: return " SIZE";
    case CMD_OPT_DOUBLE:
    case CMD_OPT_FLOAT: return " X";
    default: return " VALUE";
    }
}

/* A definition being read: its name and its description so far. */
struct item {
    bool open;
    size_t ind; /* the name's indentation */
    char term[512], desc[4096];
    size_t nt, nd;
};

static void add(char *buf, size_t cap, size_t *n, const char *s, size_t len, bool space)
{
    if (space && *n && *n + 1 < cap) buf[(*n)++] = ' ';
    if (len > cap - 1 - *n) len = cap - 1 - *n;
    memcpy(buf + *n, s, len);
    *n += len;
    buf[*n] = '\0';
}

static void flush(FILE *o, struct item *it)
{
    if (!it->open) return;
    fputs(".TP\n\\fB", o);
    put_roff(o, it->term, it->nt);
    fputs("\\fR\n", o);
    if (it->nd) put_roff(o, it->desc, it->nd), fputc('\n', o);
    it->open = false;
}

/* Where a definition line's description starts: after the first run of two
 * spaces; failing that (a name as long as its column: "--type-override
 * REGEX=TYPE tensors ..."), at the column col where the description of the
 * next line (a continuation) or of the previous definition starts. */
static size_t desc_at(const char *t, size_t tn, size_t ind, size_t col)
{
    for (size_t k = 1; k + 1 < tn; k++)
        if (t[k] == ' ' && t[k + 1] == ' ') return k;
    if (col > ind + 1 && col - ind < tn && t[col - ind - 1] == ' ') return col - ind - 1;
    return tn;
}

/* Whether an indented line is a definition: an option, or "word  text". */
static bool is_def(const char *t, size_t tn)
{
    if (t[0] == '-') return true;
    for (size_t k = 1; k + 2 < tn; k++) {
        if (t[k] == ' ' && t[k + 1] != ' ') return false; /* a name is one word */
        if (t[k] == ' ' && t[k + 1] == ' ' && t[k - 1] != ' ') {
            while (k < tn && t[k] == ' ') k++;
            return k < tn;
        }
    }
    return false;
}

/* The --help text after its synopsis (the file comment says how it is read). */
static void body(FILE *o, const char *usage)
{
    bool in_syn = false, syn_done = false;
    size_t last_col = 0;
    static struct item it; /* one page per process */
    it.open = false;
    const char *s = usage;
    while (*s) {
        const char *nl = strchr(s, '\n');
        const size_t n = nl ? (size_t)(nl - s) : strlen(s);
        const size_t ind = indent_of(s, n);
        const char *t = s + ind;
        const size_t tn = n - ind;
        const char *nx = nl ? nl + 1 : "";
        const char *nnl = strchr(nx, '\n');
        const size_t nxn = nnl ? (size_t)(nnl - nx) : strlen(nx), next_ind = indent_of(nx, nxn);
        const bool new_def = ind >= 1 && ind <= 6 && tn && t[0] == '-';
        /* the column a name without two spaces after it ends at */
        const size_t col = next_ind > ind + 2 && next_ind < nxn && nx[next_ind] != '-'
                               ? next_ind
                               : last_col;
        if (!syn_done && strncmp(s, "usage:", 6) == 0) {
            if (!in_syn) fputs(".SH SYNOPSIS\n.nf\n", o);
            in_syn = true;
            size_t k = 6;
            while (k < n && s[k] == ' ') k++;
            put_roff(o, s + k, n - k);
            fputc('\n', o);
        } else if (in_syn && ind >= 7 && tn) {
            put_roff(o, t, tn); /* the synopsis' next form */
            fputc('\n', o);
        } else {
            if (!syn_done) {
                fputs(in_syn ? ".fi\n.SH DESCRIPTION\n" : ".SH DESCRIPTION\n", o);
                in_syn = false;
                syn_done = true;
            }
            if (tn == 0) {
                flush(o, &it);
                fputs(".PP\n", o);
            } else if (it.open && ind > it.ind + 2 && !new_def) { /* the description goes on */
                add(it.desc, sizeof it.desc, &it.nd, t, tn, true);
            } else if (it.open && ind == it.ind && t[0] == '[') { /* the name goes on */
                const size_t d = desc_at(t, tn, ind, col);
                add(it.term, sizeof it.term, &it.nt, t, d, true);
                size_t k = d;
                while (k < tn && t[k] == ' ') k++;
                if (k < tn) add(it.desc, sizeof it.desc, &it.nd, t + k, tn - k, true);
            } else if (ind == 0 && t[tn - 1] == ':') {
                flush(o, &it);
                fputs(".SS ", o);
                put_roff(o, t, tn - 1);
                fputc('\n', o);
            } else if (ind >= 1 && ind <= 6 &&
                       (is_def(t, tn) || (it.open && ind == it.ind && desc_at(t, tn, ind, col) < tn))) {
                flush(o, &it);
                const size_t d = desc_at(t, tn, ind, col);
                it.open = true;
                it.ind = ind;
                it.nt = it.nd = 0;
                it.term[0] = it.desc[0] = '\0';
                add(it.term, sizeof it.term, &it.nt, t, d, false);
                size_t k = d;
                while (k < tn && t[k] == ' ') k++;
                if (k < tn) last_col = ind + k;
                if (k < tn) add(it.desc, sizeof it.desc, &it.nd, t + k, tn - k, false);
            } else {
                if (it.open) flush(o, &it), fputs(".PP\n", o);
                put_roff(o, t, tn);
                fputc('\n', o);
            }
        }
        if (!nl) break;
        s = nl + 1;
    }
    flush(o, &it);
    if (in_syn) fputs(".fi\n", o);
}

int cmd_man_print(const char *page, const char *summary, const char *usage,
                  const struct cmd_opts *p)
{
    FILE *o = stdout;
    char up[64];
    size_t k = 0;
    for (const char *c = page; *c && k + 1 < sizeof up; c++)
        up[k++] = (char)toupper((unsigned char)*c);
    up[k] = '\0';
    fputs(".TH \"", o);
    put_roff(o, up, k);
    fprintf(o, "\" 1 \"\" \"memwall %s\" \"memwall manual\"\n.SH NAME\n", MW_VERSION_STRING);
    put_roff(o, page, strlen(page));
    fputs(" \\- ", o);
    put_roff(o, summary, strlen(summary));
    fputc('\n', o);
    body(o, usage);
    /* options of the table that the text does not name */
    bool head = false;
    for (size_t i = 0; p && i < p->n_opt; i++) {
        const struct cmd_opt *op = &p->opt[i];
        if (op->when && !(op->when & p->when)) continue;
        if ((op->lname && mentions(usage, op->lname)) || (op->sname && mentions(usage, op->sname)))
            continue;
        if (!head) fputs(".SH OTHER OPTIONS\nAccepted, but not described by \\-\\-help:\n", o);
        head = true;
        fputs(".TP\n\\fB", o);
        if (op->sname) put_roff(o, op->sname, strlen(op->sname));
        if (op->sname && op->lname) fputs(", ", o);
        if (op->lname) put_roff(o, op->lname, strlen(op->lname));
        fprintf(o, "\\fR%s\n", kind_value(op->kind));
    }
    fputs(".SH EXIT STATUS\n0 ok, 1 bad input or failed verification (or a crossed threshold of "
          "\\fBmemwall eval\\fR), 2 usage error, 3 I/O or resource error.\n.SH SEE ALSO\n",
          o);
    if (strcmp(page, "memwall") == 0) {
        for (size_t i = 0; i < sizeof man_cmds / sizeof man_cmds[0]; i++) {
            if (strcmp(man_cmds[i].name, "run") == 0) continue; /* memwall-run(1), below */
            fprintf(o, "\\fBmemwall\\-");
            put_roff(o, man_cmds[i].name, strlen(man_cmds[i].name));
            fputs("\\fR(1),\n", o);
        }
        fputs("\\fBmemwall\\-run\\fR(1)\n", o);
    } else {
        fputs("\\fBmemwall\\fR(1)\n", o);
    }
    return fflush(o) == 0 && !ferror(o) ? 0 : mw_status_exit_code(MW_E_IO);
}

const char *cmd_man_summary(const char *cmd)
{
    for (size_t i = 0; i < sizeof man_cmds / sizeof man_cmds[0]; i++)
        if (strcmp(man_cmds[i].name, cmd) == 0) return man_cmds[i].help;
    return "";
}
