/* tools/cmd_opts.c — the table-driven option parser (tools/cmd_opts.h). */
#include "tools/cmd_opts.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/mw.h"

bool cmd_parse_u64(const char *s, uint64_t min, uint64_t max, uint64_t *out)
{
    if (!s || !*s || *s == '-' || *s == '+') return false;
    errno = 0;
    char *end;
    const unsigned long long v = strtoull(s, &end, 10);
    if (errno || end == s || *end || v < min || v > max) return false;
    *out = v;
    return true;
}

bool cmd_parse_double(const char *s, double *out)
{
    if (!s || !*s) return false;
    errno = 0;
    char *end;
    const double v = strtod(s, &end);
    if (errno || end == s || *end || !isfinite(v)) return false;
    *out = v;
    return true;
}

/* Expand a message template (cmd_opts.h) into p->msg. */
static void say(struct cmd_opts *p, const char *tpl, const struct cmd_opt *o, const char *arg,
                const char *val)
{
    size_t n = 0;
    const size_t cap = sizeof p->msg;
    for (const char *t = tpl; *t && n + 1 < cap; t++) {
        char num[24];
        const char *ins = NULL;
        if (t[0] == '%' && t[1]) {
            switch (*++t) {
            case 'a': ins = arg; break;
            case 'v': ins = val; break;
            case 'p': ins = p->n_pos > 0 ? p->pos[0] : ""; break;
            case 'n':
            case 'x':
                snprintf(num, sizeof num, "%llu",
                         (unsigned long long)(o ? (*t == 'n' ? o->min : o->max) : 0));
                ins = num;
                break;
            default: p->msg[n++] = *t; continue; /* "%%" and unknown: the character */
            }
            const size_t l = strlen(ins ? ins : "");
            const size_t k = l < cap - 1 - n ? l : cap - 1 - n;
            if (k) memcpy(p->msg + n, ins, k);
            n += k;
        } else {
            p->msg[n++] = *t;
        }
    }
    p->msg[n] = '\0';
}

static bool in_range(double v, const struct cmd_opt *o)
{
    return (o->dmin_open ? v > o->dmin : v >= o->dmin) && v <= o->dmax;
}

/* Convert val for o (arg: the argument as given); false with p->msg set. */
static bool convert(struct cmd_opts *p, const struct cmd_opt *o, const char *arg, const char *val)
{
    bool ok = false;
    uint64_t u;
    double d;
    p->msg[0] = '\0';
    if (o->one_of && *o->one_of) {
        say(p, o->one_of_msg, o, arg, val);
        return false;
    }
    switch (o->kind) {
    case CMD_OPT_FLAG: ok = true; *o->flag = true; break;
    case CMD_OPT_STR: ok = true; *o->str = val; break;
    case CMD_OPT_U32:
    case CMD_OPT_U64:
        ok = cmd_parse_u64(val, o->min, o->max, &u);
        if (ok && o->kind == CMD_OPT_U32) *o->u32 = (uint32_t)u;
        else if (ok) *o->u64 = u;
        break;
    case CMD_OPT_SIZE:
        ok = mw_parse_size(val, &u);
        if (ok) *o->u64 = u;
        break;
    case CMD_OPT_DOUBLE:
        ok = cmd_parse_double(val, &d) && in_range(d, o);
        if (ok) *o->dbl = d;
        break;
    case CMD_OPT_FLOAT:
        ok = cmd_parse_double(val, &d) && in_range((float)d, o);
        if (ok) *o->flt = (float)d;
        break;
    case CMD_OPT_ENUM:
        for (int i = 0; o->names[i] && !ok; i++)
            if (strcmp(val, o->names[i]) == 0) ok = true, *o->idx = i;
        break;
    case CMD_OPT_CALL:
        ok = o->call(o->ctx, val, p->msg, sizeof p->msg);
        if (!ok && p->msg[0]) return false; /* its own message */
        break;
    }
    if (!ok) say(p, o->bad ? o->bad : "bad value '%v' for %a", o, arg, val);
    if (ok && o->one_of) {
        *o->one_of = o->one_of_val;
        if (o->one_of_arg) *o->one_of_arg = val;
    }
    return ok;
}

/* The spec a names; *val: its "=VALUE" part, else NULL. */
static const struct cmd_opt *find(const struct cmd_opts *p, const char *a, const char **val)
{
    *val = NULL;
    for (size_t k = 0; k < p->n_opt; k++) {
        const struct cmd_opt *o = &p->opt[k];
        if (o->when && !(o->when & p->when)) continue;
        if ((o->sname && strcmp(a, o->sname) == 0) || (o->lname && strcmp(a, o->lname) == 0))
            return o;
        const size_t l = o->lname ? strlen(o->lname) : 0;
        if (l && o->kind != CMD_OPT_FLAG && !(p->flags & CMD_OPTS_NO_EQ) &&
            strncmp(a, o->lname, l) == 0 && a[l] == '=') {
            *val = a + l + 1;
            return o;
        }
    }
    return NULL;
}

enum cmd_opts_rc cmd_opts_parse(struct cmd_opts *p, int argc, char **argv)
{
    p->n_pos = 0;
    p->msg[0] = '\0';
    if (p->n_opt > CMD_OPTS_MAX) {
        snprintf(p->msg, sizeof p->msg, "internal error: %zu options (at most %d)", p->n_opt,
                 CMD_OPTS_MAX);
        return CMD_OPTS_ERR;
    }
    for (size_t k = 0; k < p->n_opt; k++) p->late_val[k] = p->late_arg[k] = NULL;
    bool end_of_opts = false;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (end_of_opts || a[0] != '-' || a[1] == '\0') {
            if (p->n_pos >= p->max_pos) {
                say(p, p->too_many ? p->too_many : "unexpected argument '%a'", NULL, a, NULL);
                return CMD_OPTS_ERR;
            }
            p->pos[p->n_pos++] = a;
            continue;
        }
        if (strcmp(a, "--") == 0 && !(p->flags & CMD_OPTS_NO_DASHDASH)) {
            end_of_opts = true;
            continue;
        }
        if (strcmp(a, "-h") == 0 || strcmp(a, "--help") == 0) return CMD_OPTS_HELP;
        const char *val;
        const struct cmd_opt *o = find(p, a, &val);
        if (!o) {
            say(p, "unknown option '%a'", NULL, a, NULL);
            return CMD_OPTS_ERR;
        }
        if (o->kind != CMD_OPT_FLAG && !val) {
            if (i + 1 >= argc) {
                say(p, p->needs_value ? p->needs_value : "%a needs a value", o, a, NULL);
                return CMD_OPTS_ERR;
            }
            val = argv[++i];
        }
        if (o->late) {
            p->late_val[o - p->opt] = val ? val : "";
            p->late_arg[o - p->opt] = a;
        } else if (!convert(p, o, a, val)) {
            return CMD_OPTS_ERR;
        }
    }
    return CMD_OPTS_OK;
}

enum cmd_opts_rc cmd_opts_finish(struct cmd_opts *p)
{
    for (size_t k = 0; k < p->n_opt && k < CMD_OPTS_MAX; k++)
        if (p->late_val[k] && !convert(p, &p->opt[k], p->late_arg[k], p->late_val[k]))
            return CMD_OPTS_ERR;
    return CMD_OPTS_OK;
}
