/*
 * tools/cmd_verify.c — `memwall verify FILE.gguf [--json] [--deep] [--quiet]
 * [--junit REPORT.xml]`.
 *
 * Text output (stdout): one line per finding,
 *   PATH: offset N (0xN): tensor 'x': message [E_CODE]      (errors)
 *   PATH: offset N (0xN): warning: message                   (warnings)
 *   PATH: note: message                                      (notes)
 * then one summary line: "PATH: OK: N tensors, checksums verified",
 * "PATH: OK: N tensors (no checksums: structural checks only)" or
 * "PATH: FAILED: k problems". --quiet prints only errors and the FAILED line.
 * --json prints the same as one JSON object instead. --junit also writes the
 * result as a JUnit report (tools/junit.h): one test case named by the file,
 * a <failure> with every finding when it failed verification, an <error>
 * when it could not be read.
 * Exit status: 0 intact, 1 failed verification, 2 usage, 3 cannot read.
 */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "verify/verify.h"
#include "tools/cmd.h"
#include "tools/json_writer.h"
#include "tools/junit.h"

static const char usage_text[] =
    "usage: memwall verify FILE.gguf [--json] [--deep] [--quiet] [--junit REPORT.xml]\n"
    "  Check a GGUF file: header and tensor infos, tensor bounds, zero padding,\n"
    "  memwall checksums (header and every tensor) when present.\n"
    "  --deep   also decode every block and require finite values\n"
    "  --json   print the report as one JSON object\n"
    "  --quiet  print nothing for an intact file; only errors otherwise\n"
    "  --junit REPORT.xml  also write the result as JUnit XML for a CI server\n"
    "exit status: 0 intact, 1 verification failed, 2 usage, 3 I/O error\n";

/* One text line for a finding. */
static void print_item(FILE *out, const char *path, const struct verify_item *it)
{
    if (it->level == VERIFY_ERROR) {
        struct mw_err e;
        mw_err_clear(&e);
        e.code = it->code;
        e.off = it->off;
        mw_err_set_path(&e, path);
        snprintf(e.where, sizeof e.where, "%s", it->where);
        snprintf(e.msg, sizeof e.msg, "%s", it->msg);
        char buf[1024];
        cmd_put_text(out, mw_err_format(&e, buf, sizeof buf)); /* names from the file: escaped */
        fputc('\n', out);
        return;
    }
    char buf[8192], off[64] = ""; /* path (up to PATH_MAX) + where + msg */
    if (it->off != MW_ERR_OFF_NONE)
        snprintf(off, sizeof off, "offset %llu (0x%llx): ", (unsigned long long)it->off,
                 (unsigned long long)it->off);
    snprintf(buf, sizeof buf, "%s: %s%s%s%s: %s", path, off, it->where, it->where[0] ? ": " : "",
             verify_level_name(it->level), it->msg);
    cmd_put_text(out, buf);
    fputc('\n', out);
}

/* The summary line without the path. */
static void summary(char *buf, size_t n, const struct verify_report *r)
{
    if (r->status != MW_OK) {
        snprintf(buf, n, "FAILED: %llu problem%s", (unsigned long long)r->n_errors,
                 r->n_errors == 1 ? "" : "s");
        return;
    }
    char deep[160] = "";
    if (r->deep) {
        if (r->n_tensors_not_decoded)
            snprintf(deep, sizeof deep, ", %llu decoded (finite), %llu not decoded",
                     (unsigned long long)r->n_tensors_decoded,
                     (unsigned long long)r->n_tensors_not_decoded);
        else
            snprintf(deep, sizeof deep, ", all values finite");
    }
    const char *warn = r->n_warnings ? " (with warnings)" : "";
    if (r->checksums == VERIFY_CK_ABSENT)
        snprintf(buf, n, "OK: %llu tensor%s%s (no checksums: structural checks only)%s",
                 (unsigned long long)r->n_tensors, r->n_tensors == 1 ? "" : "s", deep, warn);
    else
        snprintf(buf, n, "OK: %llu tensor%s, checksums verified%s%s",
                 (unsigned long long)r->n_tensors, r->n_tensors == 1 ? "" : "s", deep, warn);
}

static void print_json(const struct verify_report *r, const char *sum)
{
    struct jw w;
    jw_init(&w, stdout);
    jw_obj_begin(&w);
    jw_kv_str(&w, "file", r->path);
    jw_kv_bool(&w, "ok", r->status == MW_OK);
    jw_kv_str(&w, "status", mw_status_name(r->status));
    jw_kv_i64(&w, "exit_code", mw_status_exit_code(r->status));
    jw_kv_str(&w, "summary", sum);
    jw_kv_u64(&w, "file_size", r->file_size);
    jw_kv_bool(&w, "header_ok", r->header_ok);
    if (r->header_ok) {
        jw_kv_u64(&w, "version", r->version);
        jw_kv_u64(&w, "n_kv", r->n_kv);
        jw_kv_u64(&w, "n_tensors", r->n_tensors);
        jw_kv_u64(&w, "alignment", r->alignment);
        jw_kv_u64(&w, "data_start", r->data_start);
        jw_kv_u64(&w, "data_end", r->data_end);
        jw_kv_u64(&w, "data_bytes", r->data_bytes);
        jw_kv_u64(&w, "trailing_bytes", r->trailing_bytes);
        jw_kv_u64(&w, "tensors_missing", r->n_tensors_missing);
        jw_kv_str(&w, "checksums", verify_checksums_name(r->checksums));
        jw_kv_bool(&w, "header_checksum_ok", r->header_hash_ok);
        jw_kv_u64(&w, "tensors_hashed", r->n_tensors_hashed);
        jw_kv_u64(&w, "tensors_hash_mismatch", r->n_tensors_hash_bad);
    }
    jw_kv_bool(&w, "deep", r->deep);
    if (r->deep && r->header_ok) {
        jw_kv_u64(&w, "tensors_decoded", r->n_tensors_decoded);
        jw_kv_u64(&w, "tensors_not_decoded", r->n_tensors_not_decoded);
        jw_kv_u64(&w, "tensors_nonfinite", r->n_tensors_nonfinite);
    }
    jw_kv_u64(&w, "errors", r->n_errors);
    jw_kv_u64(&w, "warnings", r->n_warnings);
    jw_kv_u64(&w, "notes", r->n_notes);
    jw_kv_u64(&w, "not_listed", r->n_dropped);
    jw_key(&w, "problems");
    jw_arr_begin(&w);
    for (uint64_t i = 0; i < r->n_items; i++) {
        const struct verify_item *it = &r->items[i];
        jw_obj_begin(&w);
        jw_kv_str(&w, "level", verify_level_name(it->level));
        jw_kv_str(&w, "code", mw_status_name(it->code));
        jw_key(&w, "offset");
        if (it->off == MW_ERR_OFF_NONE) jw_null(&w);
        else jw_u64(&w, it->off);
        jw_key(&w, "tensor");
        if (it->tensor >= 0) jw_str(&w, it->name);
        else jw_null(&w);
        jw_key(&w, "tensor_index");
        if (it->tensor >= 0) jw_i64(&w, it->tensor);
        else jw_null(&w);
        jw_kv_str(&w, "where", it->where);
        jw_kv_str(&w, "message", it->msg);
        jw_obj_end(&w);
    }
    jw_arr_end(&w);
    jw_obj_end(&w);
    jw_end(&w);
}

/* --junit: one test case for the file; its findings as the case's text. */
static int write_junit(const char *junit, const char *path, const struct verify_report *r,
                       int rc, const char *sum, double secs)
{
    char *txt = NULL;
    size_t len = 0;
    FILE *o = open_memstream(&txt, &len);
    if (o) {
        for (uint64_t i = 0; i < r->n_items; i++) print_item(o, path, &r->items[i]);
        if (r->n_dropped)
            fprintf(o, "%s: ... %llu more finding%s not listed\n", path,
                    (unsigned long long)r->n_dropped, r->n_dropped == 1 ? "" : "s");
        fprintf(o, "%s: %s\n", path, sum);
        if (fclose(o) != 0) free(txt), txt = NULL;
    }
    const char *code = r->n_items ? mw_status_name(r->items[0].code) : mw_status_name(r->status);
    for (uint64_t i = 0; i < r->n_items; i++)
        if (r->items[i].level == VERIFY_ERROR) {
            code = mw_status_name(r->items[i].code);
            break;
        }
    const struct junit_case c = {
        .name = path, .seconds = secs, .message = sum, .text = txt ? txt : sum,
        .result = rc == 0 ? JUNIT_PASS : rc == mw_status_exit_code(MW_E_FORMAT) ? JUNIT_FAILURE
                                                                              : JUNIT_ERROR,
        .type = rc == 0 ? NULL : code};
    char v[3][32];
    snprintf(v[0], sizeof v[0], "%llu", (unsigned long long)r->file_size);
    snprintf(v[1], sizeof v[1], "%llu", (unsigned long long)r->n_tensors);
    snprintf(v[2], sizeof v[2], "%s", r->deep ? "true" : "false");
    const struct junit_prop props[] = {{"file", path},
                                       {"file_size", v[0]},
                                       {"tensors", v[1]},
                                       {"deep", v[2]},
                                       {"checksums", verify_checksums_name(r->checksums)}};
    const struct junit_suite s = {.name = "memwall verify", .classname = "memwall.verify",
                                  .cases = &c, .n_cases = 1, .props = props,
                                  .n_props = sizeof props / sizeof props[0], .seconds = secs};
    const int jrc = junit_write("verify", junit, &s);
    free(txt);
    return jrc;
}

int cmd_verify(int argc, char **argv)
{
    const char *cmd = "verify";
    struct verify_opts opts = {0};
    bool json = false, quiet = false;
    const char *path = NULL, *junit = NULL;
    const struct cmd_opt spec[] = {
        {NULL, "--junit", CMD_OPT_STR, .str = &junit},
        {NULL, "--json", CMD_OPT_FLAG, .flag = &json},
        {NULL, "--deep", CMD_OPT_FLAG, .flag = &opts.deep},
        {"-q", "--quiet", CMD_OPT_FLAG, .flag = &quiet},
    };
    struct cmd_opts op = {CMD_OPTS_TABLE(spec), .pos = &path, .max_pos = 1,
                          .too_many = "one file at a time (got '%p' and '%a')"};
    const int prc = cmd_parse_args(&op, cmd, usage_text, argc, argv);
    if (prc != CMD_GO_ON) return prc;
    if (!path) return cmd_usage_error(cmd, usage_text, "missing FILE.gguf");

    struct verify_report rep;
    const double t0 = mw_now_s();
    const enum mw_status st = verify_file(path, &opts, &rep);
    const int rc = mw_status_exit_code(st);
    char sum[256];
    summary(sum, sizeof sum, &rep);

    /* cannot read the file at all (or out of memory): an error, not a report */
    const bool resource = rc == mw_status_exit_code(MW_E_IO);
    if (resource && !rep.header_ok) {
        for (uint64_t i = 0; i < rep.n_items; i++) {
            if (rep.items[i].level != VERIFY_ERROR) continue;
            struct mw_err e;
            mw_err_clear(&e);
            e.code = rep.items[i].code;
            e.off = rep.items[i].off;
            mw_err_set_path(&e, path);
            snprintf(e.where, sizeof e.where, "%s", rep.items[i].where);
            snprintf(e.msg, sizeof e.msg, "%s", rep.items[i].msg);
            cmd_fail(cmd, &e);
            break;
        }
    }

    if (json) {
        print_json(&rep, sum);
    } else if (!(resource && !rep.header_ok)) {
        for (uint64_t i = 0; i < rep.n_items; i++) {
            const struct verify_item *it = &rep.items[i];
            if (quiet && it->level != VERIFY_ERROR) continue;
            print_item(stdout, path, it);
        }
        if (rep.n_dropped)
            printf("%s: ... %llu more finding%s not listed\n", path,
                   (unsigned long long)rep.n_dropped, rep.n_dropped == 1 ? "" : "s");
        if (!quiet || st != MW_OK) printf("%s: %s\n", path, sum);
    }
    int jrc = 0;
    if (junit) jrc = write_junit(junit, path, &rep, rc, sum, mw_now_s() - t0);
    verify_report_free(&rep);
    return cmd_finish_output(cmd, jrc ? jrc : rc);
}
