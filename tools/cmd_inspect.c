/*
 * tools/cmd_inspect.c — `memwall inspect FILE.gguf [--json]`: header,
 * metadata (arrays summarized, long strings elided), tensor table, per-type
 * totals and bits per weight.
 *
 * The file is opened with GGUF_OPEN_ALLOW_SHORT so that a truncated file is
 * still shown; its missing tensors are marked and the exit status is then 1.
 */
#include <stdio.h>
#include <string.h>

#include "gguf/gguf.h"
#if defined(MW_HAVE_FULL)
#include "hf/hf.h"
#endif
#include "tools/cmd.h"
#include "tools/json_writer.h"

static const char usage_text[] =
    "usage: memwall inspect FILE.gguf|FILE.safetensors|HF_DIR [--json]\n"
    "  Show the header, metadata, tensor table and totals of a GGUF file;\n"
    "  the header, metadata and tensors of a .safetensors file; or the config,\n"
    "  weights and GGUF mapping of a Hugging Face checkpoint directory.\n"
    "  --json   print one JSON object instead of text\n"
    "exit status: 0 ok, 1 malformed or truncated file, 2 usage, 3 I/O error\n";

enum {
    TEXT_STR_MAX = 60,    /* string bytes shown in text output */
    JSON_STR_MAX = 256,   /* string bytes kept in JSON output */
    ARR_HEAD_NUM = 8,     /* array elements shown for numbers */
    ARR_HEAD_STR = 4,     /* ... and for strings */
    KEY_COL_MAX = 40,
};

// --- values ---

static float f32_of(const uint8_t *p)
{
    const uint32_t u = mw_le32(p);
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

static double f64_of(const uint8_t *p)
{
    const uint64_t u = mw_le64(p);
    double d;
    memcpy(&d, &u, sizeof d);
    return d;
}

/* Text of one scalar or string value. */
static void put_scalar(FILE *out, const struct gguf_value *v, uint64_t str_max)
{
    const uint8_t *p = v->data;
    char num[40];
    switch (v->type) {
    case GGUF_VT_U8: fprintf(out, "%u", p[0]); break;
    case GGUF_VT_I8: fprintf(out, "%d", (int8_t)p[0]); break;
    case GGUF_VT_U16: fprintf(out, "%u", mw_le16(p)); break;
    case GGUF_VT_I16: fprintf(out, "%d", (int16_t)mw_le16(p)); break;
    case GGUF_VT_U32: fprintf(out, "%lu", (unsigned long)mw_le32(p)); break;
    case GGUF_VT_I32: fprintf(out, "%ld", (long)(int32_t)mw_le32(p)); break;
    case GGUF_VT_U64: fprintf(out, "%llu", (unsigned long long)mw_le64(p)); break;
    case GGUF_VT_I64: fprintf(out, "%lld", (long long)(int64_t)mw_le64(p)); break;
    case GGUF_VT_F32: fputs(jw_fmt_float(num, sizeof num, f32_of(p), true), out); break;
    case GGUF_VT_F64: fputs(jw_fmt_float(num, sizeof num, f64_of(p), false), out); break;
    case GGUF_VT_BOOL: fputs(p[0] ? "true" : "false", out); break;
    case GGUF_VT_STRING:
        fputc('"', out);
        cmd_put_escaped(out, v->data, v->n, str_max);
        fputc('"', out);
        if (str_max && v->n > str_max) fprintf(out, " (%llu bytes)", (unsigned long long)v->n);
        break;
    case GGUF_VT_ARRAY:
        fprintf(out, "[%s x %llu]", gguf_vtype_name(v->elem_type), (unsigned long long)v->n);
        break;
    default: fputs("?", out); break;
    }
}

/* Keep at most max bytes of a UTF-8 string, not splitting a sequence. */
static uint64_t utf8_cut(const uint8_t *s, uint64_t n, uint64_t max)
{
    if (n <= max) return n;
    uint64_t k = max;
    while (k > 0 && (s[k] & 0xc0) == 0x80) k--;
    return k;
}

static void json_scalar(struct jw *w, const struct gguf_value *v)
{
    const uint8_t *p = v->data;
    switch (v->type) {
    case GGUF_VT_U8: jw_u64(w, p[0]); break;
    case GGUF_VT_I8: jw_i64(w, (int8_t)p[0]); break;
    case GGUF_VT_U16: jw_u64(w, mw_le16(p)); break;
    case GGUF_VT_I16: jw_i64(w, (int16_t)mw_le16(p)); break;
    case GGUF_VT_U32: jw_u64(w, mw_le32(p)); break;
    case GGUF_VT_I32: jw_i64(w, (int32_t)mw_le32(p)); break;
    case GGUF_VT_U64: jw_u64(w, mw_le64(p)); break;
    case GGUF_VT_I64: jw_i64(w, (int64_t)mw_le64(p)); break;
    case GGUF_VT_F32: jw_f32(w, f32_of(p)); break;
    case GGUF_VT_F64: jw_f64(w, f64_of(p)); break;
    case GGUF_VT_BOOL: jw_bool(w, p[0] != 0); break;
    case GGUF_VT_STRING: jw_strn(w, v->data, (size_t)utf8_cut(v->data, v->n, JSON_STR_MAX)); break;
    case GGUF_VT_ARRAY: /* nested array: summarized */
        jw_obj_begin(w);
        jw_kv_str(w, "elem_type", gguf_vtype_name(v->elem_type));
        jw_kv_u64(w, "count", v->n);
        jw_obj_end(w);
        break;
    default: jw_null(w); break;
    }
}

static uint64_t head_count(const struct gguf_value *arr)
{
    const uint64_t lim = arr->elem_type == GGUF_VT_STRING ? ARR_HEAD_STR : ARR_HEAD_NUM;
    return arr->n < lim ? arr->n : lim;
}

// --- tensors ---

static uint64_t tensor_params(const struct gguf_tensor *t)
{
    uint64_t n = 1;
    for (int d = 0; d < GGUF_MAX_DIMS; d++)
        if (!mw_mul_u64(n, t->ne[d], &n)) return UINT64_MAX;
    return n;
}

static void shape_str(char *buf, size_t n, const struct gguf_tensor *t)
{
    size_t o = 0;
    buf[0] = 0;
    for (uint32_t d = 0; d < t->n_dims && d < GGUF_MAX_DIMS; d++) {
        const int k = snprintf(buf + o, n - o, "%s%llu", d ? "x" : "", (unsigned long long)t->ne[d]);
        if (k < 0 || (size_t)k >= n - o) break;
        o += (size_t)k;
    }
}

static const char *type_name(uint32_t type)
{
    const struct gguf_type_info *ti = gguf_type_get(type);
    return ti && ti->name ? ti->name : "?";
}

struct totals {
    uint64_t params, bytes, missing;
    uint64_t n[GGUF_TYPE_COUNT], p[GGUF_TYPE_COUNT], b[GGUF_TYPE_COUNT];
};

static void add_sat(uint64_t *acc, uint64_t v)
{
    if (!mw_add_u64(*acc, v, acc)) *acc = UINT64_MAX;
}

static void compute_totals(const struct gguf_file *f, struct totals *tot)
{
    memset(tot, 0, sizeof *tot);
    for (uint64_t i = 0; i < gguf_tensor_count(f); i++) {
        const struct gguf_tensor *t = gguf_tensor_get(f, i);
        const uint64_t p = tensor_params(t);
        add_sat(&tot->params, p);
        add_sat(&tot->bytes, t->nbytes);
        if (!gguf_tensor_in_file(f, i)) tot->missing++;
        if (t->type < GGUF_TYPE_COUNT) {
            tot->n[t->type]++;
            add_sat(&tot->p[t->type], p);
            add_sat(&tot->b[t->type], t->nbytes);
        }
    }
}

static double bpw(uint64_t bytes, uint64_t params)
{
    return params ? (double)bytes * 8.0 / (double)params : 0.0;
}

// --- text ---

static void print_text(const struct gguf_file *f, const struct totals *tot)
{
    const uint64_t n_kv = gguf_kv_count(f), n_t = gguf_tensor_count(f);
    printf("file:      %s (%llu bytes)\n", gguf_path(f), (unsigned long long)gguf_file_size(f));
    printf("gguf:      v%u, %llu key%s, %llu tensor%s, alignment %u, data start %llu (0x%llx), "
           "data end %llu\n",
           gguf_version(f), (unsigned long long)n_kv, n_kv == 1 ? "" : "s",
           (unsigned long long)n_t, n_t == 1 ? "" : "s", gguf_alignment(f),
           (unsigned long long)gguf_data_start(f), (unsigned long long)gguf_data_start(f),
           (unsigned long long)gguf_data_end(f));

    int kw = 0;
    for (uint64_t i = 0; i < n_kv; i++) {
        const size_t l = strlen(gguf_kv_key(f, i));
        if ((int)l > kw) kw = l > KEY_COL_MAX ? KEY_COL_MAX : (int)l;
    }
    printf("\nmetadata:  %llu key%s\n", (unsigned long long)n_kv, n_kv == 1 ? "" : "s");
    for (uint64_t i = 0; i < n_kv; i++) {
        const char *key = gguf_kv_key(f, i);
        const struct gguf_value *v = gguf_kv_value(f, i);
        char tname[48];
        if (v->type == GGUF_VT_ARRAY)
            snprintf(tname, sizeof tname, "%s[%llu]", gguf_vtype_name(v->elem_type),
                     (unsigned long long)v->n);
        else
            snprintf(tname, sizeof tname, "%s", gguf_vtype_name(v->type));
        fputs("  ", stdout);
        cmd_put_escaped(stdout, (const uint8_t *)key, strlen(key), 0);
        const int pad = kw - (int)strlen(key);
        printf("%*s  %-14s ", pad > 0 ? pad : 0, "", tname);
        if (v->type != GGUF_VT_ARRAY) {
            put_scalar(stdout, v, TEXT_STR_MAX);
        } else {
            const uint64_t k = head_count(v);
            fputc('[', stdout);
            for (uint64_t j = 0; j < k; j++) {
                struct gguf_value e;
                if (!gguf_value_elem(v, j, &e)) break;
                if (j) fputs(", ", stdout);
                put_scalar(stdout, &e, TEXT_STR_MAX);
            }
            if (k < v->n) fprintf(stdout, "%s... %llu more", k ? ", " : "",
                                  (unsigned long long)(v->n - k));
            fputc(']', stdout);
        }
        fputc('\n', stdout);
    }

    int nw = 4;
    for (uint64_t i = 0; i < n_t; i++) {
        const int l = (int)strlen(gguf_tensor_get(f, i)->name);
        if (l > nw) nw = l;
    }
    printf("\ntensors:   %llu\n", (unsigned long long)n_t);
    printf("  %5s  %-*s  %-7s  %-20s  %12s  %12s\n", "#", nw, "name", "type", "shape", "offset",
           "bytes");
    for (uint64_t i = 0; i < n_t; i++) {
        const struct gguf_tensor *t = gguf_tensor_get(f, i);
        char shape[96];
        shape_str(shape, sizeof shape, t);
        printf("  %5llu  ", (unsigned long long)i);
        cmd_put_escaped(stdout, (const uint8_t *)t->name, strlen(t->name), 0);
        printf("%*s  %-7s  %-20s  %12llu  %12llu%s\n", nw - (int)strlen(t->name), "",
               type_name(t->type), shape, (unsigned long long)t->offset,
               (unsigned long long)t->nbytes,
               gguf_tensor_in_file(f, i) ? "" : "  MISSING (file truncated)");
    }

    printf("\ntypes:\n");
    for (uint32_t ty = 0; ty < GGUF_TYPE_COUNT; ty++) {
        if (!tot->n[ty]) continue;
        printf("  %-7s %6llu tensor%s %14llu params %14llu bytes  %6.3f bits/weight\n",
               type_name(ty), (unsigned long long)tot->n[ty], tot->n[ty] == 1 ? " " : "s",
               (unsigned long long)tot->p[ty], (unsigned long long)tot->b[ty],
               bpw(tot->b[ty], tot->p[ty]));
    }
    printf("\ntotals:    %llu tensor%s, %llu params, %llu bytes, %.3f bits per weight\n",
           (unsigned long long)n_t, n_t == 1 ? "" : "s", (unsigned long long)tot->params,
           (unsigned long long)tot->bytes, bpw(tot->bytes, tot->params));
}

// --- JSON ---

static void print_json(const struct gguf_file *f, const struct totals *tot)
{
    struct jw w;
    jw_init(&w, stdout);
    jw_obj_begin(&w);
    jw_kv_str(&w, "file", gguf_path(f));
    jw_kv_u64(&w, "file_size", gguf_file_size(f));
    jw_kv_u64(&w, "version", gguf_version(f));
    jw_kv_u64(&w, "alignment", gguf_alignment(f));
    jw_kv_u64(&w, "n_kv", gguf_kv_count(f));
    jw_kv_u64(&w, "n_tensors", gguf_tensor_count(f));
    jw_kv_u64(&w, "data_start", gguf_data_start(f));
    jw_kv_u64(&w, "data_end", gguf_data_end(f));

    jw_key(&w, "metadata");
    jw_arr_begin(&w);
    for (uint64_t i = 0; i < gguf_kv_count(f); i++) {
        const struct gguf_value *v = gguf_kv_value(f, i);
        jw_obj_begin(&w);
        jw_kv_str(&w, "key", gguf_kv_key(f, i));
        jw_kv_str(&w, "type", gguf_vtype_name(v->type));
        if (v->type == GGUF_VT_ARRAY) {
            const uint64_t k = head_count(v);
            jw_kv_str(&w, "elem_type", gguf_vtype_name(v->elem_type));
            jw_kv_u64(&w, "count", v->n);
            jw_key(&w, "head");
            jw_arr_begin_inline(&w);
            for (uint64_t j = 0; j < k; j++) {
                struct gguf_value e;
                if (!gguf_value_elem(v, j, &e)) break;
                json_scalar(&w, &e);
            }
            jw_arr_end(&w);
            jw_kv_bool(&w, "elided", k < v->n);
        } else {
            jw_key(&w, "value");
            json_scalar(&w, v);
            if (v->type == GGUF_VT_STRING) {
                jw_kv_u64(&w, "length", v->n);
                jw_kv_bool(&w, "elided", v->n > JSON_STR_MAX);
            }
        }
        jw_obj_end(&w);
    }
    jw_arr_end(&w);

    jw_key(&w, "tensors");
    jw_arr_begin(&w);
    for (uint64_t i = 0; i < gguf_tensor_count(f); i++) {
        const struct gguf_tensor *t = gguf_tensor_get(f, i);
        jw_obj_begin(&w);
        jw_kv_str(&w, "name", t->name);
        jw_kv_str(&w, "type", type_name(t->type));
        jw_kv_u64(&w, "type_id", t->type);
        jw_key(&w, "shape");
        jw_arr_begin_inline(&w);
        for (uint32_t d = 0; d < t->n_dims && d < GGUF_MAX_DIMS; d++) jw_u64(&w, t->ne[d]);
        jw_arr_end(&w);
        jw_kv_u64(&w, "offset", t->offset);
        jw_kv_u64(&w, "file_offset", t->file_off);
        jw_kv_u64(&w, "bytes", t->nbytes);
        jw_kv_u64(&w, "params", tensor_params(t));
        jw_kv_bool(&w, "present", gguf_tensor_in_file(f, i));
        jw_obj_end(&w);
    }
    jw_arr_end(&w);

    jw_key(&w, "types");
    jw_arr_begin(&w);
    for (uint32_t ty = 0; ty < GGUF_TYPE_COUNT; ty++) {
        if (!tot->n[ty]) continue;
        jw_obj_begin(&w);
        jw_kv_str(&w, "type", type_name(ty));
        jw_kv_u64(&w, "tensors", tot->n[ty]);
        jw_kv_u64(&w, "params", tot->p[ty]);
        jw_kv_u64(&w, "bytes", tot->b[ty]);
        jw_kv_f64(&w, "bits_per_weight", bpw(tot->b[ty], tot->p[ty]));
        jw_obj_end(&w);
    }
    jw_arr_end(&w);

    jw_key(&w, "totals");
    jw_obj_begin(&w);
    jw_kv_u64(&w, "tensors", gguf_tensor_count(f));
    jw_kv_u64(&w, "params", tot->params);
    jw_kv_u64(&w, "bytes", tot->bytes);
    jw_kv_f64(&w, "bits_per_weight", bpw(tot->bytes, tot->params));
    jw_kv_u64(&w, "tensors_missing", tot->missing);
    jw_obj_end(&w);
    jw_obj_end(&w);
    jw_end(&w);
}

#if defined(MW_HAVE_FULL)
static void emit_stdout(void *ud, const char *text)
{
    (void)ud;
    fputs(text, stdout);
}

/* A Hugging Face checkpoint dir or .safetensors file (hf/hf.h). */
static int inspect_hf(const char *cmd, const char *path, bool json)
{
    struct mw_err err;
    mw_err_clear(&err);
    const enum mw_status s = hf_inspect(path, json, emit_stdout, NULL, &err);
    int rc = 0;
    if (s != MW_OK) {
        if (err.code == MW_OK) MW_FAIL(&err, s, MW_ERR_OFF_NONE, "%s", mw_status_msg(s));
        if (!err.path[0]) mw_err_set_path(&err, path);
        fflush(stdout);
        rc = cmd_fail(cmd, &err);
    }
    return cmd_finish_output(cmd, rc);
}
#endif

int cmd_inspect(int argc, char **argv)
{
    const char *cmd = "inspect";
    bool json = false;
    const char *path = NULL;
    const struct cmd_opt spec[] = {{NULL, "--json", CMD_OPT_FLAG, .flag = &json}};
    struct cmd_opts op = {CMD_OPTS_TABLE(spec), .pos = &path, .max_pos = 1,
                          .too_many = "one file at a time (got '%p' and '%a')"};
    const int prc = cmd_parse_args(&op, cmd, usage_text, argc, argv);
    if (prc != CMD_GO_ON) return prc;
    if (!path) return cmd_usage_error(cmd, usage_text, "missing FILE.gguf");
#if defined(MW_HAVE_FULL)
    if (hf_inspect_accepts(path)) return inspect_hf(cmd, path, json);
#endif

    struct mw_err err;
    mw_err_clear(&err);
    struct gguf_file *f = NULL;
    const enum mw_status s = gguf_open(path, GGUF_OPEN_ALLOW_SHORT, &f, &err);
    if (s != MW_OK) {
        if (err.code == MW_OK) MW_FAIL(&err, s, MW_ERR_OFF_NONE, "%s", mw_status_msg(s));
        if (!err.path[0]) mw_err_set_path(&err, path);
        return cmd_fail(cmd, &err);
    }
    struct totals tot;
    compute_totals(f, &tot);
    if (json) print_json(f, &tot);
    else print_text(f, &tot);
    int rc = 0;
    if (tot.missing) {
        mw_err_clear(&err);
        mw_err_set_path(&err, path);
        MW_FAIL(&err, MW_E_TRUNC, gguf_file_size(f),
                "%llu of %llu tensors are missing (file truncated); 'memwall verify' names them",
                (unsigned long long)tot.missing, (unsigned long long)gguf_tensor_count(f));
        fflush(stdout);
        rc = cmd_fail(cmd, &err);
    }
    gguf_close(f);
    return cmd_finish_output(cmd, rc);
}
