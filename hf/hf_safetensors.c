/* hf/hf_safetensors.c — safetensors files (validated header, mmap'd data) and
 * checkpoint directories (single file or sharded via the index json). */
#define _DEFAULT_SOURCE
#include "hf/hf_int.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "core/mw_file.h"

// --- dtypes ------------------------------------------------------------------

static const struct {
    const char *name;
    uint32_t size;
} dtypes[HF_DT_COUNT] = {
    [HF_DT_BOOL] = {"BOOL", 1},     [HF_DT_U8] = {"U8", 1},     [HF_DT_I8] = {"I8", 1},
    [HF_DT_F8_E4M3] = {"F8_E4M3", 1}, [HF_DT_F8_E5M2] = {"F8_E5M2", 1},
    [HF_DT_I16] = {"I16", 2},       [HF_DT_U16] = {"U16", 2},   [HF_DT_F16] = {"F16", 2},
    [HF_DT_BF16] = {"BF16", 2},     [HF_DT_I32] = {"I32", 4},   [HF_DT_U32] = {"U32", 4},
    [HF_DT_F32] = {"F32", 4},       [HF_DT_F64] = {"F64", 8},   [HF_DT_I64] = {"I64", 8},
    [HF_DT_U64] = {"U64", 8},
};

const char *hf_dtype_name(enum hf_dtype dt)
{
    return ((unsigned)dt < HF_DT_COUNT) ? dtypes[dt].name : "?";
}

uint32_t hf_dtype_size(enum hf_dtype dt)
{
    return ((unsigned)dt < HF_DT_COUNT) ? dtypes[dt].size : 0;
}

bool hf_dtype_convertible(enum hf_dtype dt)
{
    return dt == HF_DT_F16 || dt == HF_DT_BF16 || dt == HF_DT_F32;
}

static bool dtype_parse(const char *s, enum hf_dtype *out)
{
    for (int i = 0; i < HF_DT_COUNT; i++)
        if (strcmp(s, dtypes[i].name) == 0) {
            *out = (enum hf_dtype)i;
            return true;
        }
    return false;
}

// --- header scanning helpers ---------------------------------------------------

/* Offsets of the keys of the top-level object, in order (the JSON has
 * already been accepted by cJSON; this only locates things for messages). */
static uint64_t scan_top_keys(const char *s, uint64_t len, uint64_t *offs, uint64_t cap)
{
    uint64_t n = 0;
    int depth = 0;
    bool expect_key = false;
    for (uint64_t i = 0; i < len; i++) {
        char ch = s[i];
        if (ch == '"') {
            uint64_t start = i;
            for (i++; i < len && s[i] != '"'; i++)
                if (s[i] == '\\') i++;
            if (depth == 1 && expect_key) {
                if (n < cap) offs[n] = start;
                n++;
                expect_key = false;
            }
        } else if (ch == '{' || ch == '[') {
            depth++;
            if (depth == 1) expect_key = true;
        } else if (ch == '}' || ch == ']') {
            depth--;
        } else if (ch == ',' && depth == 1) {
            expect_key = true;
        }
    }
    return n;
}

/* First invalid UTF-8 sequence in s[0..n), or n. */
static uint64_t utf8_invalid_at(const uint8_t *s, uint64_t n)
{
    uint64_t i = 0;
    while (i < n) {
        uint8_t c = s[i];
        if (c < 0x80) {
            i++;
            continue;
        }
        uint32_t need, cp;
        if (c >= 0xC2 && c <= 0xDF) need = 1, cp = c & 0x1Fu;
        else if (c >= 0xE0 && c <= 0xEF) need = 2, cp = c & 0x0Fu;
        else if (c >= 0xF0 && c <= 0xF4) need = 3, cp = c & 0x07u;
        else return i;
        if (need > n - i - 1) return i;
        for (uint32_t k = 1; k <= need; k++) {
            if ((s[i + k] & 0xC0) != 0x80) return i;
            cp = (cp << 6) | (s[i + k] & 0x3Fu);
        }
        if ((need == 2 && (cp < 0x800 || (cp >= 0xD800 && cp <= 0xDFFF))) ||
            (need == 3 && (cp < 0x10000 || cp > 0x10FFFF)))
            return i;
        i += need + 1;
    }
    return n;
}

/* Position of a "\u0000" escape (cJSON would cut the string there), or n. */
static uint64_t nul_escape_at(const char *s, uint64_t n)
{
    for (uint64_t i = 0; i + 1 < n; i++) {
        if (s[i] != '\\') continue;
        if (s[i + 1] == 'u' && n - i >= 6 && memcmp(s + i + 2, "0000", 4) == 0) return i;
        i++; /* skip the escaped character */
    }
    return n;
}

// --- one file ------------------------------------------------------------------

struct st_parse {
    struct hf_st *st;
    struct mw_err *err;
    const char *hdr;
    uint64_t data_start, data_size;
    uint64_t *key_offs; /* per top-level key, absolute */
    uint64_t n_keys;
};

static enum mw_status tfail(struct st_parse *p, enum mw_status code, uint64_t off,
                            const char *tensor, const char *fmt, ...)
    __attribute__((format(printf, 5, 6)));
static enum mw_status tfail(struct st_parse *p, enum mw_status code, uint64_t off,
                            const char *tensor, const char *fmt, ...)
{
    char msg[320];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    if (tensor) mw_err_set_where(p->err, "tensor '%s'", tensor);
    return MW_FAIL(p->err, code, off, "%s", msg);
}

void hf_st_shape_str(const struct hf_st_tensor *t, char *buf, size_t n)
{
    size_t k = (size_t)snprintf(buf, n, "[");
    for (uint32_t d = 0; d < t->n_dims && k < n; d++)
        k += (size_t)snprintf(buf + k, n - k, "%s%llu", d ? ", " : "",
                              (unsigned long long)t->shape[d]);
    if (k < n) snprintf(buf + k, n - k, "]");
}

static enum mw_status parse_tensor(struct st_parse *p, const cJSON *e, uint64_t key_off,
                                   struct hf_st_tensor *t, uint64_t *begin_out)
{
    const char *name = e->string;
    if (!name || !name[0]) return tfail(p, MW_E_FORMAT, key_off, NULL, "empty tensor name");
    if (!cJSON_IsObject(e))
        return tfail(p, MW_E_FORMAT, key_off, name, "entry is not a JSON object");
    const cJSON *dt = NULL, *shape = NULL, *offs = NULL;
    for (const cJSON *c = e->child; c; c = c->next) {
        const cJSON **slot = strcmp(c->string, "dtype") == 0          ? &dt
                             : strcmp(c->string, "shape") == 0        ? &shape
                             : strcmp(c->string, "data_offsets") == 0 ? &offs
                                                                      : NULL;
        if (!slot)
            return tfail(p, MW_E_FORMAT, key_off, name,
                         "unexpected key '%s' (allowed: dtype, shape, data_offsets)", c->string);
        if (*slot) return tfail(p, MW_E_FORMAT, key_off, name, "duplicate key '%s'", c->string);
        *slot = c;
    }
    if (!dt || !shape || !offs)
        return tfail(p, MW_E_FORMAT, key_off, name, "missing '%s'",
                     !dt ? "dtype" : !shape ? "shape" : "data_offsets");
    if (!cJSON_IsString(dt)) return tfail(p, MW_E_FORMAT, key_off, name, "dtype is not a string");
    if (!dtype_parse(dt->valuestring, &t->dtype))
        return tfail(p, MW_E_UNSUPPORTED, key_off, name,
                     "unknown dtype '%.40s' (safetensors dtypes: BOOL, U8, I8, F8_E4M3, F8_E5M2, "
                     "I16, U16, F16, BF16, I32, U32, F32, F64, I64, U64)",
                     dt->valuestring);
    if (!cJSON_IsArray(shape))
        return tfail(p, MW_E_FORMAT, key_off, name, "shape is not an array");
    uint32_t nd = 0;
    uint64_t n_elems = 1;
    bool overflow = false;
    for (const cJSON *c = shape->child; c; c = c->next) {
        if (nd == HF_ST_MAX_DIMS)
            return tfail(p, MW_E_UNSUPPORTED, key_off, name, "more than %d dimensions",
                         HF_ST_MAX_DIMS);
        uint64_t v;
        if (!hf__util_json_u64(c, &v))
            return tfail(p, MW_E_FORMAT, key_off, name,
                         "shape[%u] is not a non-negative integer below 2^53", nd);
        t->shape[nd++] = v;
        if (!mw_mul_u64(n_elems, v, &n_elems)) overflow = true;
    }
    t->n_dims = nd;
    if (overflow)
        return tfail(p, MW_E_FORMAT, key_off, name, "element count of the shape overflows 64 bits");
    t->n_elems = n_elems;
    if (!mw_mul_u64(n_elems, hf_dtype_size(t->dtype), &t->nbytes))
        return tfail(p, MW_E_FORMAT, key_off, name, "byte size of the shape overflows 64 bits");
    uint64_t b, en;
    if (!cJSON_IsArray(offs) || cJSON_GetArraySize(offs) != 2)
        return tfail(p, MW_E_FORMAT, key_off, name, "data_offsets is not an array of 2 integers");
    if (!hf__util_json_u64(offs->child, &b) || !hf__util_json_u64(offs->child->next, &en))
        return tfail(p, MW_E_FORMAT, key_off, name,
                     "data_offsets holds a value that is not a non-negative integer below 2^53");
    if (b > en)
        return tfail(p, MW_E_FORMAT, key_off, name, "data_offsets [%llu, %llu]: begin > end",
                     (unsigned long long)b, (unsigned long long)en);
    if (en > p->data_size)
        return tfail(p, MW_E_TRUNC, key_off, name,
                     "data_offsets [%llu, %llu] run past the end of the data section (%llu bytes "
                     "at file offset %llu; file truncated or offsets wrong)",
                     (unsigned long long)b, (unsigned long long)en,
                     (unsigned long long)p->data_size, (unsigned long long)p->data_start);
    if (en - b != t->nbytes) {
        char sh[128];
        hf_st_shape_str(t, sh, sizeof sh);
        return tfail(p, MW_E_FORMAT, key_off, name,
                     "%s shape %s needs %llu bytes but data_offsets [%llu, %llu] span %llu",
                     hf_dtype_name(t->dtype), sh, (unsigned long long)t->nbytes,
                     (unsigned long long)b, (unsigned long long)en,
                     (unsigned long long)(en - b));
    }
    t->file_off = p->data_start + b;
    t->key_off = key_off;
    t->data = p->st->base + t->file_off;
    *begin_out = b;
    return MW_OK;
}

static int cmp_tensor_name(const void *a, const void *b)
{
    return strcmp(((const struct hf_st_tensor *)a)->name, ((const struct hf_st_tensor *)b)->name);
}

static int cmp_tensor_off(const void *a, const void *b)
{
    const struct hf_st_tensor *x = *(const struct hf_st_tensor *const *)a;
    const struct hf_st_tensor *y = *(const struct hf_st_tensor *const *)b;
    if (x->file_off != y->file_off) return x->file_off < y->file_off ? -1 : 1;
    if (x->nbytes != y->nbytes) return x->nbytes < y->nbytes ? -1 : 1;
    return strcmp(x->name, y->name);
}

static enum mw_status parse_meta(struct st_parse *p, const cJSON *m, uint64_t key_off)
{
    struct hf_st *st = p->st;
    if (st->meta)
        return tfail(p, MW_E_FORMAT, key_off, NULL, "duplicate key '__metadata__'");
    if (!cJSON_IsObject(m))
        return tfail(p, MW_E_FORMAT, key_off, NULL, "__metadata__ is not a JSON object");
    uint64_t n = 0;
    for (const cJSON *c = m->child; c; c = c->next) {
        if (!cJSON_IsString(c)) {
            mw_err_set_where(p->err, "__metadata__.%s", c->string);
            return MW_FAIL(p->err, MW_E_FORMAT, key_off, "metadata value is not a string");
        }
        n++;
    }
    const char *dup;
    if (!hf__util_json_dup(m, &dup)) return MW_FAIL(p->err, MW_E_NOMEM, key_off, "out of memory");
    if (dup) {
        mw_err_set_where(p->err, "__metadata__.%s", dup);
        return MW_FAIL(p->err, MW_E_FORMAT, key_off, "duplicate metadata key");
    }
    st->meta = calloc(n ? 2 * n : 1, sizeof *st->meta);
    if (!st->meta) return MW_FAIL(p->err, MW_E_NOMEM, key_off, "out of memory");
    st->n_meta = 0;
    for (const cJSON *c = m->child; c; c = c->next) {
        char *k = strdup(c->string), *v = strdup(c->valuestring);
        st->meta[2 * st->n_meta] = k;
        st->meta[2 * st->n_meta + 1] = v;
        st->n_meta++;
        if (!k || !v) return MW_FAIL(p->err, MW_E_NOMEM, key_off, "out of memory");
    }
    return MW_OK;
}

static enum mw_status st_parse(struct hf_st *st, struct mw_err *err)
{
    mw_err_set_path(err, st->path);
    const uint64_t size = st->size;
    if (size < 8)
        return MW_FAIL(err, MW_E_TRUNC, 0,
                       "file is %llu bytes; a safetensors file starts with an 8-byte header "
                       "length", (unsigned long long)size);
    const uint64_t hl = mw_le64(st->base);
    if (hl > size - 8)
        return MW_FAIL(err, MW_E_TRUNC, 0,
                       "header length %llu runs past the end of the file (%llu bytes follow "
                       "the length field)", (unsigned long long)hl, (unsigned long long)(size - 8));
    if (hl > HF_ST_MAX_HEADER)
        return MW_FAIL(err, MW_E_FORMAT, 0, "header length %llu exceeds the limit of %u bytes",
                       (unsigned long long)hl, HF_ST_MAX_HEADER);
    if (hl < 2 || st->base[8] != '{')
        return MW_FAIL(err, MW_E_FORMAT, 8, "header does not start with '{' (not safetensors?)");
    st->hdr_len = hl;
    const char *hdr = (const char *)st->base + 8;
    const void *z = memchr(hdr, '\0', (size_t)hl);
    if (z) return MW_FAIL(err, MW_E_FORMAT, 8 + (uint64_t)((const char *)z - hdr), "NUL byte in header");
    uint64_t bad = utf8_invalid_at((const uint8_t *)hdr, hl);
    if (bad < hl) return MW_FAIL(err, MW_E_FORMAT, 8 + bad, "header is not valid UTF-8");
    bad = nul_escape_at(hdr, hl);
    if (bad < hl) return MW_FAIL(err, MW_E_FORMAT, 8 + bad, "\\u0000 escape in header");

    const char *end = NULL;
    cJSON *root = cJSON_ParseWithLengthOpts(hdr, (size_t)hl, &end, 0);
    if (!root) {
        uint64_t off = (end && end >= hdr && end <= hdr + hl) ? (uint64_t)(end - hdr) : 0;
        return MW_FAIL(err, MW_E_FORMAT, 8 + off, "header: JSON syntax error");
    }
    struct st_parse p = {.st = st, .err = err, .hdr = hdr, .data_start = 8 + hl,
                         .data_size = size - 8 - hl};
    enum mw_status s = MW_OK;
    struct hf_st_tensor **by_off = NULL;
    for (const char *q = end ? end : hdr + hl; q < hdr + hl; q++)
        if (*q != ' ' && *q != '\t' && *q != '\n' && *q != '\r') {
            s = MW_FAIL(err, MW_E_FORMAT, 8 + (uint64_t)(q - hdr),
                        "unexpected bytes after the JSON header");
            goto out;
        }
    if (!cJSON_IsObject(root)) {
        s = MW_FAIL(err, MW_E_FORMAT, 8, "header is not a JSON object");
        goto out;
    }
    uint64_t n_keys = 0, n_t = 0;
    size_t names_len = 0;
    for (const cJSON *c = root->child; c; c = c->next) {
        n_keys++;
        if (strcmp(c->string, "__metadata__") != 0) {
            n_t++;
            names_len += strlen(c->string) + 1;
        }
    }
    p.key_offs = calloc(n_keys ? n_keys : 1, sizeof *p.key_offs);
    st->t = calloc(n_t ? n_t : 1, sizeof *st->t);
    st->names = malloc(names_len ? names_len : 1);
    by_off = calloc(n_t ? n_t : 1, sizeof *by_off);
    if (!p.key_offs || !st->t || !st->names || !by_off) {
        s = MW_FAIL(err, MW_E_NOMEM, MW_ERR_OFF_NONE, "out of memory for %llu tensors",
                    (unsigned long long)n_t);
        goto out;
    }
    uint64_t found = scan_top_keys(hdr, hl, p.key_offs, n_keys);
    for (uint64_t i = 0; i < n_keys; i++) p.key_offs[i] = (found == n_keys) ? 8 + p.key_offs[i] : 8;

    size_t np = 0;
    uint64_t k = 0, ti = 0;
    for (const cJSON *c = root->child; c; c = c->next, k++) {
        if (strcmp(c->string, "__metadata__") == 0) {
            s = parse_meta(&p, c, p.key_offs[k]);
            if (s != MW_OK) goto out;
            continue;
        }
        struct hf_st_tensor *t = &st->t[ti];
        size_t l = strlen(c->string) + 1;
        memcpy(st->names + np, c->string, l);
        t->name = st->names + np;
        np += l;
        uint64_t b;
        s = parse_tensor(&p, c, p.key_offs[k], t, &b);
        if (s != MW_OK) goto out;
        ti++;
    }
    st->n = n_t;

    /* No duplicates (cJSON keeps them). */
    qsort(st->t, (size_t)n_t, sizeof *st->t, cmp_tensor_name);
    for (uint64_t i = 1; i < n_t; i++)
        if (strcmp(st->t[i - 1].name, st->t[i].name) == 0) {
            uint64_t ko = st->t[i - 1].key_off > st->t[i].key_off ? st->t[i - 1].key_off
                                                                  : st->t[i].key_off;
            s = tfail(&p, MW_E_FORMAT, ko, st->t[i].name, "duplicate tensor name");
            goto out;
        }
    /* Data ranges tile [0, data_size) exactly: no overlap, no gap. */
    for (uint64_t i = 0; i < n_t; i++) by_off[i] = &st->t[i];
    qsort(by_off, (size_t)n_t, sizeof *by_off, cmp_tensor_off);
    uint64_t expect = p.data_start;
    const struct hf_st_tensor *prev = NULL;
    for (uint64_t i = 0; i < n_t; i++) {
        const struct hf_st_tensor *t = by_off[i];
        if (t->file_off < expect) {
            s = tfail(&p, MW_E_FORMAT, t->file_off, t->name,
                      "data [%llu, %llu) overlaps tensor '%s' [%llu, %llu)",
                      (unsigned long long)(t->file_off - p.data_start),
                      (unsigned long long)(t->file_off - p.data_start + t->nbytes),
                      prev ? prev->name : "?",
                      (unsigned long long)(prev ? prev->file_off - p.data_start : 0),
                      (unsigned long long)(prev ? prev->file_off - p.data_start + prev->nbytes : 0));
            goto out;
        }
        if (t->file_off > expect) {
            s = tfail(&p, MW_E_FORMAT, expect, t->name,
                      "gap of %llu bytes before this tensor's data (safetensors data is "
                      "contiguous)", (unsigned long long)(t->file_off - expect));
            goto out;
        }
        expect = t->file_off + t->nbytes;
        prev = t;
    }
    if (expect != size) {
        s = MW_FAIL(err, MW_E_FORMAT, expect,
                    "%llu bytes after the end of the last tensor's data (file is %llu bytes)",
                    (unsigned long long)(size - expect), (unsigned long long)size);
        goto out;
    }
out:
    free(by_off);
    free(p.key_offs);
    cJSON_Delete(root);
    return s;
}

static void st_free(struct hf_st *st)
{
    if (!st) return;
    if (st->mapped) mw_map_close(&st->map);
    for (uint64_t i = 0; st->meta && i < 2 * st->n_meta; i++) free(st->meta[i]);
    free(st->meta);
    free(st->t);
    free(st->names);
    free(st->path);
    free(st);
}

void hf_st_close(struct hf_st *st) { st_free(st); }

static enum mw_status st_new(const char *name, struct hf_st **out, struct mw_err *err)
{
    *out = NULL;
    struct hf_st *st = calloc(1, sizeof *st);
    if (st) st->path = strdup(name ? name : "");
    if (!st || !st->path) {
        free(st);
        return MW_FAIL(err, MW_E_NOMEM, MW_ERR_OFF_NONE, "out of memory");
    }
    st->map.fd = -1;
    *out = st;
    return MW_OK;
}

enum mw_status hf_st_open_mem(const void *buf, uint64_t size, const char *name,
                              struct hf_st **out, struct mw_err *err)
{
    struct hf_st *st;
    enum mw_status s = st_new(name, &st, err);
    if (s != MW_OK) return s;
    st->base = buf;
    st->size = buf ? size : 0;
    s = st_parse(st, err);
    if (s != MW_OK) {
        st_free(st);
        return s;
    }
    *out = st;
    return MW_OK;
}

enum mw_status hf_st_open(const char *path, struct hf_st **out, struct mw_err *err)
{
    struct hf_st *st;
    enum mw_status s = st_new(path, &st, err);
    if (s != MW_OK) return s;
    s = mw_map_open(&st->map, path, err);
    if (s != MW_OK) {
        st_free(st);
        return s;
    }
    st->mapped = true;
    st->base = st->map.data;
    st->size = st->map.size;
    s = st_parse(st, err);
    if (s != MW_OK) {
        st_free(st);
        return s;
    }
    /* The header pages were read once; the data is read tensor by tensor. */
    hf_st_release(st, 0, 8 + st->hdr_len);
    *out = st;
    return MW_OK;
}

const char *hf_st_path(const struct hf_st *st) { return st->path; }
uint64_t hf_st_file_size(const struct hf_st *st) { return st->size; }
uint64_t hf_st_header_len(const struct hf_st *st) { return st->hdr_len; }
uint64_t hf_st_count(const struct hf_st *st) { return st->n; }

const struct hf_st_tensor *hf_st_get(const struct hf_st *st, uint64_t i)
{
    return i < st->n ? &st->t[i] : NULL;
}

int64_t hf_st_find(const struct hf_st *st, const char *name)
{
    uint64_t lo = 0, hi = st->n;
    while (lo < hi) {
        uint64_t mid = lo + (hi - lo) / 2;
        int c = strcmp(st->t[mid].name, name);
        if (c == 0) return (int64_t)mid;
        if (c < 0) lo = mid + 1;
        else hi = mid;
    }
    return -1;
}

uint64_t hf_st_meta_count(const struct hf_st *st) { return st->n_meta; }

bool hf_st_meta_get(const struct hf_st *st, uint64_t i, const char **key, const char **value)
{
    if (i >= st->n_meta) return false;
    *key = st->meta[2 * i];
    *value = st->meta[2 * i + 1];
    return true;
}

void hf_st_release(const struct hf_st *st, uint64_t off, uint64_t n)
{
    if (!st || !st->mapped || !st->base || off >= st->size) return;
    /* only the pages wholly inside the range (core/mw_file.c says why) */
    mw_map_drop(st->base, st->size, off, n > st->size - off ? st->size : off + n);
}

// --- checkpoint directory ------------------------------------------------------

void hf_model_close(struct hf_model *m)
{
    if (!m) return;
    for (uint64_t i = 0; m->shards && i < m->n_shards; i++) hf_st_close(m->shards[i]);
    free(m->shards);
    free(m->order);
    free(m->by_name);
    free(m->dir);
    free(m);
}

static enum mw_status open_shard(struct hf_model *m, const char *file, struct hf_st **out,
                                 struct mw_err *err)
{
    char *path = hf__util_path_join(m->dir, file);
    if (!path) return MW_FAIL(err, MW_E_NOMEM, MW_ERR_OFF_NONE, "out of memory");
    enum mw_status s = hf_st_open(path, out, err);
    free(path);
    return s;
}

static int cmp_cstr_ptr_st(const void *a, const void *b)
{
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

static bool shard_name_ok(const char *s)
{
    size_t n = strlen(s);
    if (n == 0 || n > 255 || strcmp(s, ".") == 0 || strcmp(s, "..") == 0) return false;
    return strchr(s, '/') == NULL && strchr(s, '\\') == NULL;
}

/* The weight map: shard file names sorted and unique into *files. */
static enum mw_status load_index(const char *ipath, cJSON **root_out,
                                 const cJSON **wm_out, char ***files, uint64_t *n_files,
                                 struct mw_err *err)
{
    char *buf;
    size_t len;
    *root_out = NULL;
    *files = NULL;
    *n_files = 0;
    enum mw_status s = hf__util_read_file(ipath, 256u << 20, &buf, &len, err);
    if (s != MW_OK) return s;
    cJSON *root;
    s = hf__json_parse(buf, len, ipath, false, &root, err);
    free(buf);
    if (s != MW_OK) return s;
    *root_out = root;
    const cJSON *wm = cJSON_GetObjectItemCaseSensitive(root, "weight_map");
    if (!cJSON_IsObject(root) || !cJSON_IsObject(wm)) {
        mw_err_set_where(err, "weight_map");
        return MW_FAIL(err, MW_E_FORMAT, MW_ERR_OFF_NONE, "missing or not a JSON object");
    }
    uint64_t n = 0;
    for (const cJSON *c = wm->child; c; c = c->next) {
        if (!cJSON_IsString(c) || !shard_name_ok(c->valuestring)) {
            mw_err_set_where(err, "weight_map.%s", c->string);
            return MW_FAIL(err, MW_E_FORMAT, MW_ERR_OFF_NONE,
                           "expected a file name in the checkpoint directory");
        }
        n++;
    }
    if (n == 0) {
        mw_err_set_where(err, "weight_map");
        return MW_FAIL(err, MW_E_FORMAT, MW_ERR_OFF_NONE, "empty");
    }
    char **v = calloc((size_t)n, sizeof *v);
    if (!v) return MW_FAIL(err, MW_E_NOMEM, MW_ERR_OFF_NONE, "out of memory");
    uint64_t k = 0;
    for (const cJSON *c = wm->child; c; c = c->next) v[k++] = c->valuestring;
    qsort(v, (size_t)n, sizeof *v, cmp_cstr_ptr_st);
    uint64_t u = 0;
    for (uint64_t i = 0; i < n; i++)
        if (u == 0 || strcmp(v[u - 1], v[i]) != 0) v[u++] = v[i];
    *files = v;
    *n_files = u;
    *wm_out = wm;
    return MW_OK;
}

static int cmp_ref_name_ctx(const struct hf_model *m, const struct hf_model_ref *a,
                            const struct hf_model_ref *b)
{
    return strcmp(m->shards[a->shard]->t[a->idx].name, m->shards[b->shard]->t[b->idx].name);
}

/* qsort has no context argument; sort the by-name index with a small
 * merge sort instead (stable, O(n log n)). */
static void sort_refs(const struct hf_model *m, struct hf_model_ref *v, struct hf_model_ref *tmp,
                      uint64_t n)
{
    if (n < 2) return;
    uint64_t h = n / 2;
    sort_refs(m, v, tmp, h);
    sort_refs(m, v + h, tmp, n - h);
    uint64_t i = 0, j = h, k = 0;
    while (i < h && j < n) tmp[k++] = (cmp_ref_name_ctx(m, &v[j], &v[i]) < 0) ? v[j++] : v[i++];
    while (i < h) tmp[k++] = v[i++];
    while (j < n) tmp[k++] = v[j++];
    memcpy(v, tmp, (size_t)n * sizeof *v);
}

/* Cross-check the weight map against the shards' contents. */
static enum mw_status check_weight_map(struct hf_model *m, const char *ipath, const cJSON *wm,
                                       char **files, struct mw_err *err)
{
    for (const cJSON *c = wm->child; c; c = c->next) {
        uint64_t si = 0;
        while (si < m->n_shards && strcmp(files[si], c->valuestring) != 0) si++;
        if (si == m->n_shards || hf_st_find(m->shards[si], c->string) < 0) {
            mw_err_set_path(err, ipath);
            mw_err_set_where(err, "weight_map.%s", c->string);
            return MW_FAIL(err, MW_E_FORMAT, MW_ERR_OFF_NONE,
                           "tensor is not in shard '%s' (incomplete or mismatched shard)",
                           c->valuestring);
        }
    }
    for (uint64_t si = 0; si < m->n_shards; si++) {
        const struct hf_st *st = m->shards[si];
        for (uint64_t i = 0; i < st->n; i++) {
            const cJSON *e = cJSON_GetObjectItemCaseSensitive(wm, st->t[i].name);
            if (!e || strcmp(e->valuestring, files[si]) != 0) {
                mw_err_set_path(err, st->path);
                mw_err_set_where(err, "tensor '%s'", st->t[i].name);
                return MW_FAIL(err, MW_E_FORMAT, st->t[i].key_off,
                               e ? "weight_map in %s places this tensor in '%s'"
                                 : "tensor is not in the weight_map of %s%s",
                               "model.safetensors.index.json", e ? e->valuestring : "");
            }
        }
    }
    return MW_OK;
}

enum mw_status hf_model_open(const char *dir, struct hf_model **out, struct mw_err *err)
{
    *out = NULL;
    mw_err_set_path(err, dir);
    struct hf_model *m = calloc(1, sizeof *m);
    if (m) m->dir = strdup(dir);
    if (!m || !m->dir) {
        free(m);
        return MW_FAIL(err, MW_E_NOMEM, MW_ERR_OFF_NONE, "out of memory");
    }
    enum mw_status s = MW_OK;
    char *cpath = NULL, *ipath = NULL, *spath = NULL;
    char **files = NULL;
    cJSON *iroot = NULL;
    struct hf_model_ref *tmp = NULL;
    if (!hf__util_exists(dir)) {
        s = MW_FAIL(err, MW_E_FORMAT, MW_ERR_OFF_NONE, "no such directory");
        goto fail;
    }
    cpath = hf__util_path_join(dir, "config.json");
    ipath = hf__util_path_join(dir, "model.safetensors.index.json");
    spath = hf__util_path_join(dir, "model.safetensors");
    if (!cpath || !ipath || !spath) {
        s = MW_FAIL(err, MW_E_NOMEM, MW_ERR_OFF_NONE, "out of memory");
        goto fail;
    }
    s = hf_config_load(cpath, &m->cfg, err);
    if (s != MW_OK) goto fail;

    if (hf__util_exists(ipath)) {
        const cJSON *wm = NULL;
        uint64_t nf = 0;
        s = load_index(ipath, &iroot, &wm, &files, &nf, err);
        if (s != MW_OK) goto fail;
        m->shards = calloc((size_t)nf, sizeof *m->shards);
        if (!m->shards) {
            s = MW_FAIL(err, MW_E_NOMEM, MW_ERR_OFF_NONE, "out of memory");
            goto fail;
        }
        for (uint64_t i = 0; i < nf; i++) {
            char *p = hf__util_path_join(dir, files[i]);
            bool there = p && hf__util_exists(p);
            free(p);
            if (!there) {
                const char *first = "";
                for (const cJSON *c = wm->child; c; c = c->next)
                    if (strcmp(c->valuestring, files[i]) == 0) {
                        first = c->string;
                        break;
                    }
                mw_err_set_path(err, ipath);
                mw_err_set_where(err, "weight_map.%s", first);
                s = MW_FAIL(err, MW_E_FORMAT, MW_ERR_OFF_NONE, "shard '%s' does not exist",
                            files[i]);
                goto fail;
            }
            s = open_shard(m, files[i], &m->shards[i], err);
            if (s != MW_OK) goto fail;
            m->n_shards = i + 1;
        }
        s = check_weight_map(m, ipath, wm, files, err);
        if (s != MW_OK) goto fail;
    } else if (hf__util_exists(spath)) {
        m->shards = calloc(1, sizeof *m->shards);
        if (!m->shards) {
            s = MW_FAIL(err, MW_E_NOMEM, MW_ERR_OFF_NONE, "out of memory");
            goto fail;
        }
        s = hf_st_open(spath, &m->shards[0], err);
        if (s != MW_OK) goto fail;
        m->n_shards = 1;
    } else {
        mw_err_set_path(err, dir);
        char *pt = hf__util_path_join(dir, "pytorch_model.bin");
        char *pti = hf__util_path_join(dir, "pytorch_model.bin.index.json");
        bool pickle = (pt && hf__util_exists(pt)) || (pti && hf__util_exists(pti));
        free(pt);
        free(pti);
        if (pickle)
            s = MW_FAIL(err, MW_E_UNSUPPORTED, MW_ERR_OFF_NONE,
                        "PyTorch pickle weights (pytorch_model.bin) are not read; save the "
                        "checkpoint as safetensors");
        else
            s = MW_FAIL(err, MW_E_FORMAT, MW_ERR_OFF_NONE,
                        "no model.safetensors or model.safetensors.index.json in this directory");
        goto fail;
    }

    uint64_t n = 0;
    for (uint64_t i = 0; i < m->n_shards; i++) n += m->shards[i]->n;
    if (n > UINT32_MAX) {
        s = MW_FAIL(err, MW_E_UNSUPPORTED, MW_ERR_OFF_NONE, "too many tensors");
        goto fail;
    }
    m->order = calloc(n ? (size_t)n : 1, sizeof *m->order);
    m->by_name = calloc(n ? (size_t)n : 1, sizeof *m->by_name);
    tmp = calloc(n ? (size_t)n : 1, sizeof *tmp);
    if (!m->order || !m->by_name || !tmp) {
        s = MW_FAIL(err, MW_E_NOMEM, MW_ERR_OFF_NONE, "out of memory");
        goto fail;
    }
    uint64_t k = 0;
    for (uint32_t i = 0; i < m->n_shards; i++)
        for (uint32_t j = 0; j < m->shards[i]->n; j++) m->order[k++] = (struct hf_model_ref){i, j};
    m->n = n;
    memcpy(m->by_name, m->order, (size_t)n * sizeof *m->order);
    sort_refs(m, m->by_name, tmp, n);
    for (uint64_t i = 1; i < n; i++)
        if (cmp_ref_name_ctx(m, &m->by_name[i - 1], &m->by_name[i]) == 0) {
            const struct hf_st *st = m->shards[m->by_name[i].shard];
            const struct hf_st_tensor *t = &st->t[m->by_name[i].idx];
            mw_err_set_path(err, st->path);
            mw_err_set_where(err, "tensor '%s'", t->name);
            s = MW_FAIL(err, MW_E_FORMAT, t->key_off, "tensor also appears in shard '%s'",
                        m->shards[m->by_name[i - 1].shard]->path);
            goto fail;
        }
    free(tmp);
    free(files);
    cJSON_Delete(iroot);
    free(cpath);
    free(ipath);
    free(spath);
    hf__qwen35_count_mtp(m);
    *out = m;
    return MW_OK;
fail:
    free(tmp);
    free(files);
    cJSON_Delete(iroot);
    free(cpath);
    free(ipath);
    free(spath);
    hf_model_close(m);
    return s;
}

const char *hf_model_dir(const struct hf_model *m) { return m->dir; }
const struct hf_config *hf_model_config(const struct hf_model *m) { return &m->cfg; }
uint64_t hf_model_shard_count(const struct hf_model *m) { return m->n_shards; }

const struct hf_st *hf_model_shard(const struct hf_model *m, uint64_t i)
{
    return i < m->n_shards ? m->shards[i] : NULL;
}

uint64_t hf_model_tensor_count(const struct hf_model *m) { return m->n; }

const struct hf_st_tensor *hf_model_tensor(const struct hf_model *m, uint64_t i,
                                           const struct hf_st **shard)
{
    if (i >= m->n) return NULL;
    const struct hf_st *st = m->shards[m->order[i].shard];
    if (shard) *shard = st;
    return &st->t[m->order[i].idx];
}

int64_t hf_model_tensor_find(const struct hf_model *m, const char *name)
{
    uint64_t lo = 0, hi = m->n;
    while (lo < hi) {
        uint64_t mid = lo + (hi - lo) / 2;
        const struct hf_model_ref *r = &m->by_name[mid];
        int c = strcmp(m->shards[r->shard]->t[r->idx].name, name);
        if (c == 0) {
            uint64_t base = 0; /* source order is shard-major */
            for (uint32_t i = 0; i < r->shard; i++) base += m->shards[i]->n;
            return (int64_t)(base + r->idx);
        }
        if (c < 0) lo = mid + 1;
        else hi = mid;
    }
    return -1;
}
