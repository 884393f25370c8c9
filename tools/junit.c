/* tools/junit.c — JUnit XML reports (tools/junit.h). */
#define _POSIX_C_SOURCE 200809L
#include "tools/junit.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/mw.h"
#include "core/mw_file.h"
#include "tools/cmd.h"

/* One line of s (up to '\n' or the end): printable as cmd_text makes it
 * (control bytes and invalid UTF-8 as \xNN), then XML-escaped. Returns the
 * rest after the '\n', or NULL at the end. */
static const char *put_line(FILE *o, const char *s, bool attr)
{
    const char *nl = strchr(s, '\n');
    const size_t n = nl ? (size_t)(nl - s) : strlen(s);
    char raw[4096], txt[4096 * 4 + 8];
    const size_t k = n < sizeof raw - 1 ? n : sizeof raw - 1;
    memcpy(raw, s, k);
    raw[k] = '\0';
    cmd_text(raw, txt, sizeof txt);
    for (const char *p = txt; *p; p++) {
        switch (*p) {
        case '&': fputs("&amp;", o); break;
        case '<': fputs("&lt;", o); break;
        case '>': fputs("&gt;", o); break;
        case '"': fputs(attr ? "&quot;" : "\"", o); break;
        default: fputc(*p, o);
        }
    }
    return nl ? nl + 1 : NULL;
}

/* An attribute value: one line (a newline becomes a space). */
static void put_attr(FILE *o, const char *name, const char *v)
{
    fprintf(o, " %s=\"", name);
    for (const char *s = v ? v : ""; s;) {
        s = put_line(o, s, true);
        if (s && *s) fputc(' ', o);
        else break;
    }
    fputc('"', o);
}

/* Element text: every line. */
static void put_text(FILE *o, const char *v)
{
    for (const char *s = v; s && *s;) {
        s = put_line(o, s, false);
        if (s) fputc('\n', o);
    }
}

static void put_case(FILE *o, const char *classname, const struct junit_case *c)
{
    fputs("    <testcase", o);
    put_attr(o, "classname", classname);
    put_attr(o, "name", c->name);
    fprintf(o, " time=\"%.3f\"", c->seconds);
    if (c->result == JUNIT_PASS && !c->text) {
        fputs("/>\n", o);
        return;
    }
    fputs(">\n", o);
    if (c->result != JUNIT_PASS) {
        const char *el = c->result == JUNIT_FAILURE ? "failure" : "error";
        fprintf(o, "      <%s", el);
        if (c->type) put_attr(o, "type", c->type);
        put_attr(o, "message", c->message ? c->message : "");
        fputs(">", o);
        put_text(o, c->text ? c->text : c->message);
        fprintf(o, "</%s>\n", el);
    } else {
        fputs("      <system-out>", o);
        put_text(o, c->text);
        fputs("</system-out>\n", o);
    }
    fputs("    </testcase>\n", o);
}

static void put_suite(FILE *o, const struct junit_suite *s)
{
    size_t n_fail = 0, n_err = 0;
    for (size_t i = 0; i < s->n_cases; i++) {
        n_fail += s->cases[i].result == JUNIT_FAILURE;
        n_err += s->cases[i].result == JUNIT_ERROR;
    }
    fputs("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<testsuites", o);
    put_attr(o, "name", s->name);
    fprintf(o, " tests=\"%zu\" failures=\"%zu\" errors=\"%zu\" time=\"%.3f\">\n", s->n_cases,
            n_fail, n_err, s->seconds);
    fputs("  <testsuite", o);
    put_attr(o, "name", s->name);
    fprintf(o, " tests=\"%zu\" failures=\"%zu\" errors=\"%zu\" skipped=\"0\" time=\"%.3f\">\n",
            s->n_cases, n_fail, n_err, s->seconds);
    if (s->n_props) {
        fputs("    <properties>\n", o);
        for (size_t i = 0; i < s->n_props; i++) {
            fputs("      <property", o);
            put_attr(o, "name", s->props[i].name);
            put_attr(o, "value", s->props[i].value);
            fputs("/>\n", o);
        }
        fputs("    </properties>\n", o);
    }
    for (size_t i = 0; i < s->n_cases; i++) put_case(o, s->classname, &s->cases[i]);
    fputs("  </testsuite>\n</testsuites>\n", o);
}

int junit_write(const char *cmd, const char *path, const struct junit_suite *s)
{
    struct mw_err err;
    mw_err_clear(&err);
    char *buf = NULL;
    size_t len = 0;
    FILE *o = open_memstream(&buf, &len);
    if (!o) {
        MW_FAIL(&err, MW_E_NOMEM, MW_ERR_OFF_NONE, "JUnit report");
        mw_err_set_path(&err, path);
        return cmd_fail(cmd, &err);
    }
    put_suite(o, s);
    const bool bad = ferror(o) != 0;
    if (fclose(o) != 0 || bad) {
        free(buf);
        MW_FAIL(&err, MW_E_NOMEM, MW_ERR_OFF_NONE, "JUnit report");
        mw_err_set_path(&err, path);
        return cmd_fail(cmd, &err);
    }
    const enum mw_status st = mw_file_write_atomic(path, buf, len, &err);
    free(buf);
    return st == MW_OK ? 0 : cmd_fail(cmd, &err);
}
