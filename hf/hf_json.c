/* hf/hf_json.c — the one cJSON wrapper of hf/ (hf_int.h): config.json, the
 * shard index, tokenizer.json, tokenizer_config.json and friends all go
 * through hf__json_parse, which rejects what cJSON accepts silently
 * (duplicate keys, bytes after the value, NUL bytes) and names where the text
 * is wrong by byte offset, line and column. */
#include "hf/hf_int.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int cmp_cstr_ptr(const void *a, const void *b)
{
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

bool hf__util_json_dup(const cJSON *obj, const char **dup)
{
    *dup = NULL;
    size_t n = 0;
    for (const cJSON *c = obj ? obj->child : NULL; c; c = c->next) n++;
    if (n < 2) return true;
    if (n <= 16) { /* small objects: no allocation */
        for (const cJSON *a = obj->child; a; a = a->next)
            for (const cJSON *b = a->next; b; b = b->next)
                if (a->string && b->string && strcmp(a->string, b->string) == 0) {
                    *dup = b->string;
                    return true;
                }
        return true;
    }
    const char **names = malloc(n * sizeof *names);
    if (!names) return false;
    size_t k = 0;
    for (const cJSON *c = obj->child; c; c = c->next) names[k++] = c->string ? c->string : "";
    qsort(names, n, sizeof *names, cmp_cstr_ptr);
    for (size_t i = 1; i < n; i++)
        if (strcmp(names[i - 1], names[i]) == 0) {
            *dup = names[i];
            break;
        }
    free(names);
    return true;
}

/* Depth-first duplicate-key search; path receives the JSON path of the
 * first duplicate. */
static enum mw_status json_check_dups(const cJSON *v, char *path, size_t cap, size_t plen,
                                      struct mw_err *err)
{
    if (cJSON_IsObject(v)) {
        const char *dup;
        if (!hf__util_json_dup(v, &dup))
            return MW_FAIL(err, MW_E_NOMEM, MW_ERR_OFF_NONE, "out of memory checking keys");
        if (dup) {
            snprintf(path + plen, cap - plen, "%s%s", plen ? "." : "", dup);
            mw_err_set_where(err, "%s", path);
            return MW_FAIL(err, MW_E_FORMAT, MW_ERR_OFF_NONE, "duplicate key");
        }
        for (const cJSON *c = v->child; c; c = c->next) {
            if (!cJSON_IsObject(c) && !cJSON_IsArray(c)) continue;
            int w = snprintf(path + plen, cap - plen, "%s%s", plen ? "." : "", c->string);
            size_t np = (w < 0) ? plen : plen + (size_t)w;
            if (np >= cap) np = cap - 1;
            enum mw_status s = json_check_dups(c, path, cap, np, err);
            if (s != MW_OK) return s;
            path[plen] = '\0';
        }
    } else if (cJSON_IsArray(v)) {
        size_t i = 0;
        for (const cJSON *c = v->child; c; c = c->next, i++) {
            if (!cJSON_IsObject(c) && !cJSON_IsArray(c)) continue;
            int w = snprintf(path + plen, cap - plen, "[%zu]", i);
            size_t np = (w < 0) ? plen : plen + (size_t)w;
            if (np >= cap) np = cap - 1;
            enum mw_status s = json_check_dups(c, path, cap, np, err);
            if (s != MW_OK) return s;
            path[plen] = '\0';
        }
    }
    return MW_OK;
}

/* A syntax-level error at byte off of text: MW_E_FORMAT at off, with the
 * line and column (1-based, columns in bytes) in err->where or in the
 * message, as the caller asked. */
static enum mw_status syntax_fail(const char *text, size_t n, size_t off, bool pos_in_where,
                                  const char *why, struct mw_err *err)
{
    unsigned long line = 1, col = 1;
    for (size_t i = 0; i < off && i < n; i++) {
        if (text[i] == '\n') {
            line++;
            col = 1;
        } else {
            col++;
        }
    }
    if (pos_in_where) {
        mw_err_set_where(err, "line %lu column %lu", line, col);
        return MW_FAIL(err, MW_E_FORMAT, off, "%s", why);
    }
    return MW_FAIL(err, MW_E_FORMAT, off, "%s at line %lu column %lu", why, line, col);
}

enum mw_status hf__json_parse(const void *buf, size_t n, const char *name, bool pos_in_where,
                              cJSON **out, struct mw_err *err)
{
    *out = NULL;
    mw_err_set_path(err, name);
    if (n == 0)
        return syntax_fail("", 0, 0, pos_in_where, "empty file (expected a JSON object)", err);
    const char *nul = memchr(buf, '\0', n);
    if (nul) {
        return syntax_fail(buf, n, (size_t)(nul - (const char *)buf), pos_in_where,
                           "NUL byte in JSON text", err);
    }
    /* Own NUL-terminated copy: cJSON never reads past the terminator. */
    char *copy = n < SIZE_MAX ? malloc(n + 1) : NULL;
    if (!copy) return MW_FAIL(err, MW_E_NOMEM, MW_ERR_OFF_NONE, "out of memory");
    memcpy(copy, buf, n);
    copy[n] = 0;
    const char *end = NULL;
    cJSON *root = cJSON_ParseWithLengthOpts(copy, n + 1, &end, 0);
    const bool end_ok = end && end >= copy && end <= copy + n;
    enum mw_status s = MW_OK;
    if (!root) {
        s = syntax_fail(copy, n, end_ok ? (size_t)(end - copy) : 0, pos_in_where,
                        "JSON syntax error", err);
    } else {
        size_t off = end_ok ? (size_t)(end - copy) : n;
        while (off < n && (copy[off] == ' ' || copy[off] == '\t' || copy[off] == '\n' ||
                           copy[off] == '\r'))
            off++;
        if (off < n)
            s = syntax_fail(copy, n, off, pos_in_where, "unexpected bytes after the JSON value",
                            err);
    }
    if (!s) {
        char jpath[160] = "";
        s = json_check_dups(root, jpath, sizeof jpath, 0, err);
    }
    free(copy);
    if (s) {
        cJSON_Delete(root);
        return s;
    }
    *out = root;
    return MW_OK;
}

bool hf__util_json_u64(const cJSON *v, uint64_t *out)
{
    if (!cJSON_IsNumber(v)) return false;
    double d = v->valuedouble;
    if (!(d >= 0.0) || d >= 9007199254740992.0 || d != floor(d)) return false;
    *out = (uint64_t)d;
    return true;
}
