/*
 * quant/quant_imatrix.c — importance-matrix files (docs/formats.md §9): the GGUF
 * format llama-imatrix writes by default and the legacy binary .dat format.
 * Both are untrusted input: every length is checked against the bytes
 * present before it is used, and every problem is an error naming the
 * file, the entry and the byte offset.
 *
 * Values are normalized exactly as llama-quantize's load_imatrix()
 * (tools/quantize/quantize.cpp, common/imatrix-loader.cpp) does, in f32:
 *   GGUF:   count = (float)lround(counts[j]); v = in_sum2 / count, or 1 where
 *           count is 0, per expert j;
 *   legacy: v = value / (float)ncall when ncall > 0, else the value.
 * Then, as llama_model_quantize does, any non-finite value is an error.
 */
#include "quant/quant.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct im_entry {
    char *name;
    float *v;
    uint64_t n;
    float *cnt;     /* GGUF: the rows behind each matrix (expert); NULL: legacy */
    uint64_t n_cnt;
};

struct quant_imatrix {
    bool legacy;
    uint64_t n;
    struct im_entry *e; /* sorted by name */
    uint32_t chunk_count;
    uint64_t n_datasets;
    char **datasets;
    uint64_t hash;
};

void quant_imatrix_free(struct quant_imatrix *im)
{
    if (!im) return;
    for (uint64_t i = 0; i < im->n; i++) {
        free(im->e[i].name);
        free(im->e[i].v);
        free(im->e[i].cnt);
    }
    free(im->e);
    for (uint64_t i = 0; i < im->n_datasets; i++) free(im->datasets[i]);
    free(im->datasets);
    free(im);
}

bool quant_imatrix_is_legacy(const struct quant_imatrix *im) { return im->legacy; }
uint64_t quant_imatrix_count(const struct quant_imatrix *im) { return im->n; }
const char *quant_imatrix_name(const struct quant_imatrix *im, uint64_t i)
{
    return i < im->n ? im->e[i].name : NULL;
}
const float *quant_imatrix_values(const struct quant_imatrix *im, uint64_t i, uint64_t *n)
{
    if (i >= im->n) {
        if (n) *n = 0;
        return NULL;
    }
    if (n) *n = im->e[i].n;
    return im->e[i].v;
}
uint32_t quant_imatrix_chunk_count(const struct quant_imatrix *im) { return im->chunk_count; }
uint64_t quant_imatrix_dataset_count(const struct quant_imatrix *im) { return im->n_datasets; }
const char *quant_imatrix_dataset(const struct quant_imatrix *im, uint64_t i)
{
    return i < im->n_datasets ? im->datasets[i] : NULL;
}
uint64_t quant_imatrix_hash(const struct quant_imatrix *im) { return im->hash; }

const float *quant_imatrix_counts(const struct quant_imatrix *im, uint64_t i, uint64_t *n)
{
    const bool ok = i < im->n && im->e[i].cnt;
    if (n) *n = ok ? im->e[i].n_cnt : 0;
    return ok ? im->e[i].cnt : NULL;
}

int64_t quant_imatrix_find(const struct quant_imatrix *im, const char *name)
{
    uint64_t lo = 0, hi = im->n;
    while (lo < hi) {
        const uint64_t mid = lo + (hi - lo) / 2;
        const int c = strcmp(im->e[mid].name, name);
        if (c == 0) return (int64_t)mid;
        if (c < 0) lo = mid + 1;
        else hi = mid;
    }
    return -1;
}

static int entry_cmp(const void *a, const void *b)
{
    return strcmp(((const struct im_entry *)a)->name, ((const struct im_entry *)b)->name);
}

static char *dup_n(const void *s, size_t n)
{
    char *d = malloc(n + 1);
    if (!d) return NULL;
    memcpy(d, s, n);
    d[n] = 0;
    return d;
}

static float f32_at(const uint8_t *p)
{
    const uint32_t u = mw_le32(p);
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

/* Append an entry (takes ownership of name and v on success and failure). */
static enum mw_status add_entry(struct quant_imatrix *im, uint64_t *cap, char *name, float *v,
                                uint64_t n, struct mw_err *err)
{
    if (!name || !v) {
        free(name);
        free(v);
        return MW_FAIL(err, MW_E_NOMEM, MW_ERR_OFF_NONE, "out of memory");
    }
    if (im->n == *cap) {
        const uint64_t c = *cap ? *cap * 2 : 64;
        struct im_entry *e = realloc(im->e, (size_t)c * sizeof *e);
        if (!e) {
            free(name);
            free(v);
            return MW_FAIL(err, MW_E_NOMEM, MW_ERR_OFF_NONE, "out of memory");
        }
        im->e = e;
        *cap = c;
    }
    im->e[im->n++] = (struct im_entry){.name = name, .v = v, .n = n};
    return MW_OK;
}

/* Sort, reject duplicates and non-finite values. */
static enum mw_status finish(struct quant_imatrix *im, const char *path, struct mw_err *err)
{
    if (im->n > 1) qsort(im->e, (size_t)im->n, sizeof *im->e, entry_cmp);
    for (uint64_t i = 0; i < im->n; i++) {
        if (i > 0 && strcmp(im->e[i - 1].name, im->e[i].name) == 0) {
            mw_err_set_path(err, path);
            mw_err_set_where(err, "imatrix entry '%s'", im->e[i].name);
            return MW_FAIL(err, MW_E_FORMAT, MW_ERR_OFF_NONE, "entry appears twice");
        }
        for (uint64_t j = 0; j < im->e[i].n; j++) {
            if (isfinite(im->e[i].v[j])) continue;
            mw_err_set_path(err, path);
            mw_err_set_where(err, "imatrix entry '%s'", im->e[i].name);
            return MW_FAIL(err, MW_E_VALUE, MW_ERR_OFF_NONE,
                           "value %llu is not finite (%s) after normalization",
                           (unsigned long long)j, isnan(im->e[i].v[j]) ? "NaN" : "Inf");
        }
    }
    return MW_OK;
}

// --- legacy .dat ---

static enum mw_status rd_i32(struct mw_rd *r, int32_t *v, const char *what)
{
    uint32_t u;
    enum mw_status s = mw_rd_u32(r, &u, what);
    if (s == MW_OK) *v = (int32_t)u;
    return s;
}

static enum mw_status load_legacy(struct quant_imatrix *im, const uint8_t *buf, uint64_t size,
                                  const char *path, struct mw_err *err)
{
    struct mw_rd r = {.base = buf, .size = size, .pos = 0, .err = err};
    enum mw_status s;
    int32_t n_entries;
    mw_err_set_path(err, path);
    mw_err_set_where(err, "legacy imatrix header");
    if ((s = rd_i32(&r, &n_entries, "entry count")) != MW_OK) return s;
    if (n_entries < 1)
        return MW_FAIL(err, MW_E_FORMAT, 0, "entry count %d: no data (not an imatrix file?)",
                       n_entries);
    uint64_t cap = 0;
    for (int32_t i = 0; i < n_entries; i++) {
        const uint64_t ent_off = r.pos;
        mw_err_set_where(err, "legacy imatrix entry %d of %d", i + 1, n_entries);
        int32_t len, ncall, nval;
        const uint8_t *name;
        if ((s = rd_i32(&r, &len, "name length")) != MW_OK) return s;
        if (len < 1 || len > 4096)
            return MW_FAIL(err, MW_E_FORMAT, ent_off, "name length %d (expected 1..4096)", len);
        if ((s = mw_rd_bytes(&r, (uint64_t)len, &name, "name")) != MW_OK) return s;
        if (memchr(name, 0, (size_t)len))
            return MW_FAIL(err, MW_E_FORMAT, ent_off + 4, "name contains a NUL byte");
        mw_err_set_where(err, "imatrix entry '%.*s'", len > 100 ? 100 : len, (const char *)name);
        if ((s = rd_i32(&r, &ncall, "ncall")) != MW_OK) return s;
        const uint64_t nval_off = r.pos;
        if ((s = rd_i32(&r, &nval, "value count")) != MW_OK) return s;
        if (nval < 1) return MW_FAIL(err, MW_E_FORMAT, nval_off, "value count %d", nval);
        const uint8_t *vals;
        if ((s = mw_rd_bytes(&r, (uint64_t)nval * 4, &vals, "values")) != MW_OK) return s;
        float *v = malloc((size_t)nval * sizeof *v);
        if (v) {
            for (int32_t j = 0; j < nval; j++) {
                const float x = f32_at(vals + 4 * (size_t)j);
                v[j] = ncall > 0 ? x / (float)ncall : x;
            }
        }
        if ((s = add_entry(im, &cap, dup_n(name, (size_t)len), v, (uint64_t)nval, err)) != MW_OK)
            return s;
    }
    /* optional trailer: chunk count, dataset name */
    if (mw_rd_left(&r) > 0) {
        const uint64_t tr_off = r.pos;
        mw_err_set_where(err, "legacy imatrix trailer");
        int32_t n_calls, len;
        if ((s = rd_i32(&r, &n_calls, "chunk count")) != MW_OK) return s;
        if ((s = rd_i32(&r, &len, "dataset name length")) != MW_OK) return s;
        if (n_calls < 0)
            return MW_FAIL(err, MW_E_FORMAT, tr_off, "chunk count %d", n_calls);
        if (len < 0 || (uint64_t)len > mw_rd_left(&r))
            return MW_FAIL(err, len < 0 ? MW_E_FORMAT : MW_E_TRUNC, tr_off + 4,
                           "dataset name length %d, %llu bytes remain", len,
                           (unsigned long long)mw_rd_left(&r));
        im->chunk_count = (uint32_t)n_calls;
        if (len > 0) {
            const uint8_t *ds;
            if ((s = mw_rd_bytes(&r, (uint64_t)len, &ds, "dataset name")) != MW_OK) return s;
            /* llama.cpp keeps the name up to its first NUL */
            const void *nul = memchr(ds, 0, (size_t)len);
            const size_t dl = nul ? (size_t)((const uint8_t *)nul - ds) : (size_t)len;
            im->datasets = malloc(sizeof *im->datasets);
            if (!im->datasets || !(im->datasets[0] = dup_n(ds, dl)))
                return MW_FAIL(err, MW_E_NOMEM, MW_ERR_OFF_NONE, "out of memory");
            im->n_datasets = 1;
        }
        if (mw_rd_left(&r) > 0)
            return MW_FAIL(err, MW_E_FORMAT, r.pos, "%llu unexpected bytes after the trailer",
                           (unsigned long long)mw_rd_left(&r));
    }
    return finish(im, path, err);
}

// --- GGUF ---

static bool ends_with(const char *s, const char *suf, size_t *stem)
{
    const size_t n = strlen(s), m = strlen(suf);
    if (n <= m || strcmp(s + n - m, suf) != 0) return false;
    *stem = n - m;
    return true;
}

static uint64_t n_elems(const struct gguf_tensor *t)
{
    /* bounded: the reader checked the byte size */
    return t->ne[0] * t->ne[1] * t->ne[2] * t->ne[3];
}

static enum mw_status load_gguf(struct quant_imatrix *im, const struct gguf_file *f,
                                const char *path, struct mw_err *err)
{
    static const char *const keys[] = {"imatrix.datasets", "imatrix.chunk_count",
                                       "imatrix.chunk_size"};
    for (size_t k = 0; k < 3; k++) {
        if (gguf_kv_find(f, keys[k]) >= 0) continue;
        mw_err_set_path(err, path);
        mw_err_set_where(err, "key '%s'", keys[k]);
        return MW_FAIL(err, MW_E_FORMAT, MW_ERR_OFF_NONE,
                       "missing imatrix metadata (not an imatrix file?)");
    }
    enum mw_status s;
    uint32_t cc;
    if ((s = gguf_get_u32(f, "imatrix.chunk_count", &cc, err)) != MW_OK) return s;
    uint32_t csz;
    if ((s = gguf_get_u32(f, "imatrix.chunk_size", &csz, err)) != MW_OK) return s;
    im->chunk_count = cc;
    const int64_t kd = gguf_kv_find(f, "imatrix.datasets");
    const struct gguf_value *dv = gguf_kv_value(f, (uint64_t)kd);
    if (dv->type == GGUF_VT_ARRAY && dv->elem_type == GGUF_VT_STRING && dv->n > 0) {
        im->datasets = calloc((size_t)dv->n, sizeof *im->datasets);
        if (!im->datasets) return MW_FAIL(err, MW_E_NOMEM, MW_ERR_OFF_NONE, "out of memory");
        for (uint64_t j = 0; j < dv->n; j++) {
            struct gguf_value e;
            if (!gguf_value_elem(dv, j, &e)) break;
            const void *nul = memchr(e.data, 0, (size_t)e.nbytes);
            const size_t dl = nul ? (size_t)((const uint8_t *)nul - e.data) : (size_t)e.nbytes;
            if (!(im->datasets[j] = dup_n(e.data, dl)))
                return MW_FAIL(err, MW_E_NOMEM, MW_ERR_OFF_NONE, "out of memory");
            im->n_datasets = j + 1;
        }
    }

    const uint64_t nt = gguf_tensor_count(f);
    uint64_t cap = 0;
    mw_err_set_path(err, path);
    for (uint64_t i = 0; i < nt; i++) {
        const struct gguf_tensor *ts = gguf_tensor_get(f, i);
        size_t stem;
        if (!ends_with(ts->name, ".in_sum2", &stem)) {
            if (ends_with(ts->name, ".counts", &stem)) {
                char base[GGUF_MAX_NAME + 16];
                snprintf(base, sizeof base, "%.*s.in_sum2", (int)stem, ts->name);
                if (gguf_tensor_find(f, base) < 0) {
                    mw_err_set_where(err, "imatrix entry '%.*s'", (int)stem, ts->name);
                    return MW_FAIL(err, MW_E_FORMAT, ts->info_off,
                                   "mismatched sums and counts: '%s' has no '.in_sum2'",
                                   ts->name);
                }
            }
            continue; /* other suffixes (in_sum, ...) are statistics only */
        }
        char cname[GGUF_MAX_NAME + 16];
        snprintf(cname, sizeof cname, "%.*s.counts", (int)stem, ts->name);
        mw_err_set_where(err, "imatrix entry '%.*s'", (int)stem, ts->name);
        const int64_t ci = gguf_tensor_find(f, cname);
        if (ci < 0)
            return MW_FAIL(err, MW_E_FORMAT, ts->info_off,
                           "mismatched sums and counts: no '%s'", cname);
        const struct gguf_tensor *tc = gguf_tensor_get(f, (uint64_t)ci);
        if (ts->type != GGUF_TYPE_F32 || tc->type != GGUF_TYPE_F32)
            return MW_FAIL(err, MW_E_FORMAT, ts->type != GGUF_TYPE_F32 ? ts->info_off : tc->info_off,
                           "sums and counts must be F32 (found %s and %s)",
                           gguf_type_get(ts->type)->name, gguf_type_get(tc->type)->name);
        const uint64_t nval = n_elems(ts), ncnt = n_elems(tc);
        if (nval % ncnt != 0)
            return MW_FAIL(err, MW_E_FORMAT, tc->info_off,
                           "%llu sums do not split into %llu per-expert counts",
                           (unsigned long long)nval, (unsigned long long)ncnt);
        const uint8_t *sd = gguf_tensor_data(f, i), *cd = gguf_tensor_data(f, (uint64_t)ci);
        if (!sd || !cd) return MW_FAIL(err, MW_E_TRUNC, ts->file_off, "tensor data missing");
        const uint64_t ne0 = nval / ncnt;
        size_t bytes;
        if (!mw_u64_to_size(nval * sizeof(float), &bytes))
            return MW_FAIL(err, MW_E_NOMEM, MW_ERR_OFF_NONE, "entry too large");
        float *v = malloc(bytes ? bytes : 1);
        if (v) {
            for (uint64_t j = 0; j < ncnt; j++) {
                const float cf = f32_at(cd + 4 * j);
                if (!isfinite(cf) || cf < 0.0f || cf > 9.0e15f) {
                    free(v);
                    return MW_FAIL(err, MW_E_VALUE, tc->file_off + 4 * j,
                                   "count %llu is %g (expected a finite count >= 0)",
                                   (unsigned long long)j, (double)cf);
                }
                const float count = (float)lroundf(cf);
                for (uint64_t k = 0; k < ne0; k++)
                    v[j * ne0 + k] = count > 0.0f ? f32_at(sd + 4 * (j * ne0 + k)) / count : 1.0f;
            }
        }
        char *name = dup_n(ts->name, stem);
        if ((s = add_entry(im, &cap, name, v, nval, err)) != MW_OK) return s;
        float *c = malloc((size_t)ncnt * sizeof *c);
        if (!c) return MW_FAIL(err, MW_E_NOMEM, MW_ERR_OFF_NONE, "out of memory");
        for (uint64_t j = 0; j < ncnt; j++) c[j] = (float)lroundf(f32_at(cd + 4 * j));
        im->e[im->n - 1].cnt = c;
        im->e[im->n - 1].n_cnt = ncnt;
    }
    if (im->n == 0) {
        mw_err_set_where(err, "tensors");
        return MW_FAIL(err, MW_E_FORMAT, MW_ERR_OFF_NONE, "no imatrix entries (no '.in_sum2' tensors)");
    }
    return finish(im, path, err);
}

enum mw_status quant_imatrix_load_mem(const void *buf, uint64_t size, const char *name,
                                      struct quant_imatrix **out, struct mw_err *err)
{
    *out = NULL;
    mw_err_clear(err);
    struct quant_imatrix *im = calloc(1, sizeof *im);
    if (!im) return MW_FAIL(err, MW_E_NOMEM, MW_ERR_OFF_NONE, "out of memory");
    enum mw_status s;
    if (size >= 4 && memcmp(buf, GGUF_MAGIC, 4) == 0) {
        struct gguf_file *f = NULL;
        s = gguf_open_mem(buf, size, name, GGUF_OPEN_DEFAULT, &f, err);
        if (s == MW_OK) s = load_gguf(im, f, name, err);
        gguf_close(f);
    } else {
        im->legacy = true;
        s = load_legacy(im, buf, size, name, err);
    }
    if (s != MW_OK) {
        quant_imatrix_free(im);
        return s;
    }
    im->hash = gguf_hash_tensor(buf, (size_t)size);
    mw_err_clear(err);
    *out = im;
    return MW_OK;
}

enum mw_status quant_imatrix_load(const char *path, struct quant_imatrix **out, struct mw_err *err)
{
    *out = NULL;
    mw_err_clear(err);
    struct mw_map m = {0};
    enum mw_status s = mw_map_open(&m, path, err);
    if (s != MW_OK) return s;
    if (m.size > (uint64_t)SIZE_MAX) {
        mw_map_close(&m);
        mw_err_set_path(err, path);
        return MW_FAIL(err, MW_E_NOMEM, MW_ERR_OFF_NONE, "file too large");
    }
    static const uint8_t empty[1] = {0};
    s = quant_imatrix_load_mem(m.data ? m.data : empty, m.size, path, out, err);
    mw_map_close(&m);
    return s;
}
