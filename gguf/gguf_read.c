/* gguf/gguf_read.c — validating GGUF reader over a mapping or a buffer.
 *
 * Everything in the header is checked before any view is handed out; the
 * rules are those of docs/formats.md §1.8 plus the "robust reader" additions. */
#define _GNU_SOURCE
#include "gguf/gguf.h"

#include <stdlib.h>
#include <string.h>

#define XXH_INLINE_ALL
#include <xxhash.h>

struct kv {
    char *key;
    uint64_t off, end;   /* whole record: key length field .. end of value */
    struct gguf_value val;
};

struct gguf_file {
    struct mw_map map;
    const uint8_t *base;
    uint64_t size;
    char *path;
    uint32_t version;
    uint32_t alignment;
    uint64_t n_kv, n_tensors;
    struct kv *kvs;
    struct gguf_tensor *tensors;
    bool *in_file;
    uint64_t infos_end, data_start, data_end;
};

/* minimum encoded sizes, used to bound counts before allocating */
#define MIN_KV_BYTES 14     /* u64 len + 1 key byte + i32 type + 1 value byte */
#define MIN_TINFO_BYTES 33  /* u64 len + 1 + u32 n_dims + u64 ne + i32 type + u64 off */

struct rctx {
    struct mw_rd rd;
    struct mw_err *err;
};

static void value_free(struct gguf_value *v)
{
    if (v->type == GGUF_VT_ARRAY && v->elems_) {
        struct gguf_value *e = (struct gguf_value *)v->elems_;
        for (uint64_t j = 0; j < v->n; j++) value_free(&e[j]);
        free(e);
        v->elems_ = NULL;
    }
}

void gguf_close(struct gguf_file *f)
{
    if (!f) return;
    if (f->kvs) {
        for (uint64_t i = 0; i < f->n_kv; i++) {
            free(f->kvs[i].key);
            value_free(&f->kvs[i].val);
        }
        free(f->kvs);
    }
    if (f->tensors) {
        for (uint64_t i = 0; i < f->n_tensors; i++) free((char *)f->tensors[i].name);
        free(f->tensors);
    }
    free(f->in_file);
    free(f->path);
    mw_map_close(&f->map);
    free(f);
}

/* Read a length-prefixed string; *len bytes at *p. */
static enum mw_status rd_str(struct rctx *c, const uint8_t **p, uint64_t *len, const char *what)
{
    enum mw_status s = mw_rd_u64(&c->rd, len, what);
    if (s) return s;
    if (*len > mw_rd_left(&c->rd))
        return MW_FAIL(c->err, MW_E_TRUNC, c->rd.pos - 8,
                       "%s: length %llu exceeds the %llu bytes remaining (truncated or corrupt)",
                       what, (unsigned long long)*len, (unsigned long long)mw_rd_left(&c->rd));
    return mw_rd_bytes(&c->rd, *len, p, what);
}

static char *dup_bytes(const uint8_t *p, uint64_t n)
{
    char *s = malloc((size_t)n + 1);
    if (!s) return NULL;
    if (n) memcpy(s, p, (size_t)n);
    s[n] = 0;
    return s;
}

static enum mw_status parse_value(struct rctx *c, uint32_t type, int depth, struct gguf_value *v)
{
    memset(v, 0, sizeof *v);
    v->type = (enum gguf_vtype)type;
    const uint64_t start = c->rd.pos;
    enum mw_status s;
    if (type >= GGUF_VT_COUNT)
        return MW_FAIL(c->err, MW_E_FORMAT, start, "unknown value type %u (expected 0..12)", type);
    if (type == GGUF_VT_STRING) {
        s = rd_str(c, &v->data, &v->n, "string value");
        if (s) return s;
        v->off = start + 8;
        v->nbytes = v->n;
        return MW_OK;
    }
    if (type != GGUF_VT_ARRAY) {
        const size_t sz = gguf_vtype_size(type);
        s = mw_rd_bytes(&c->rd, sz, &v->data, "scalar value");
        if (s) return s;
        v->off = start;
        v->nbytes = sz;
        v->n = 1;
        if (type == GGUF_VT_BOOL && v->data[0] > 1)
            return MW_FAIL(c->err, MW_E_FORMAT, start, "bool value byte is %u (expected 0 or 1)",
                           v->data[0]);
        return MW_OK;
    }
    /* array */
    uint32_t et;
    uint64_t n;
    if ((s = mw_rd_u32(&c->rd, &et, "array element type"))) return s;
    if ((s = mw_rd_u64(&c->rd, &n, "array element count"))) return s;
    if (et >= GGUF_VT_COUNT)
        return MW_FAIL(c->err, MW_E_FORMAT, start, "unknown array element type %u", et);
    if (et == GGUF_VT_ARRAY && depth + 1 >= GGUF_MAX_ARRAY_DEPTH)
        return MW_FAIL(c->err, MW_E_FORMAT, start, "arrays nested deeper than %d",
                       GGUF_MAX_ARRAY_DEPTH);
    v->elem_type = (enum gguf_vtype)et;
    v->n = n;
    v->off = c->rd.pos;
    v->data = c->rd.base + c->rd.pos;
    const size_t esz = gguf_vtype_size(et);
    if (esz) {
        uint64_t total;
        if (!mw_mul_u64(n, esz, &total) || total > mw_rd_left(&c->rd))
            return MW_FAIL(c->err, MW_E_TRUNC, start + 4,
                           "array of %llu %s needs more than the %llu bytes remaining "
                           "(truncated or corrupt count)",
                           (unsigned long long)n, gguf_vtype_name(et),
                           (unsigned long long)mw_rd_left(&c->rd));
        c->rd.pos += total;
        v->nbytes = total;
        return MW_OK;
    }
    /* strings (>= 8 bytes each) or arrays (>= 12 bytes each) */
    const uint64_t min_el = (et == GGUF_VT_STRING) ? 8 : 12;
    if (n > mw_rd_left(&c->rd) / min_el)
        return MW_FAIL(c->err, MW_E_TRUNC, start + 4,
                       "array of %llu %s needs more than the %llu bytes remaining "
                       "(truncated or corrupt count)",
                       (unsigned long long)n, gguf_vtype_name(et),
                       (unsigned long long)mw_rd_left(&c->rd));
    if (n) {
        struct gguf_value *e = calloc((size_t)n, sizeof *e);
        if (!e) return MW_FAIL(c->err, MW_E_NOMEM, start, "cannot allocate %llu array elements",
                               (unsigned long long)n);
        v->elems_ = e;
        for (uint64_t j = 0; j < n; j++) {
            if (et == GGUF_VT_STRING) {
                const uint64_t p0 = c->rd.pos;
                s = rd_str(c, &e[j].data, &e[j].n, "array string element");
                if (s) {
                    v->n = j; /* free only what was parsed */
                    return s;
                }
                e[j].type = GGUF_VT_STRING;
                e[j].off = p0 + 8;
                e[j].nbytes = e[j].n;
            } else {
                uint32_t sub_t = GGUF_VT_ARRAY;
                s = parse_value(c, sub_t, depth + 1, &e[j]);
                if (s) {
                    v->n = j + 1;
                    return s;
                }
            }
        }
    }
    v->nbytes = c->rd.pos - v->off;
    return MW_OK;
}

static int cmp_str_idx_kv(const void *a, const void *b, void *ctx)
{
    const struct kv *kvs = ctx;
    return strcmp(kvs[*(const uint64_t *)a].key, kvs[*(const uint64_t *)b].key);
}
static int cmp_str_idx_t(const void *a, const void *b, void *ctx)
{
    const struct gguf_tensor *t = ctx;
    return strcmp(t[*(const uint64_t *)a].name, t[*(const uint64_t *)b].name);
}

/* Sort-based duplicate search: O(n log n) even for hostile counts. Returns the
 * index (in file order) of the later of the first duplicate pair found, or -1;
 * *first gets the earlier one. */
static int64_t find_dup(uint64_t n, int (*cmp)(const void *, const void *, void *), void *ctx,
                        const char *(*name_of)(void *, uint64_t), uint64_t *first, bool *nomem)
{
    *nomem = false;
    if (n < 2) return -1;
    uint64_t *idx = malloc((size_t)n * sizeof *idx);
    if (!idx) {
        *nomem = true;
        return -1;
    }
    for (uint64_t i = 0; i < n; i++) idx[i] = i;
    qsort_r(idx, (size_t)n, sizeof *idx, cmp, ctx);
    int64_t dup = -1;
    for (uint64_t i = 1; i < n; i++) {
        if (strcmp(name_of(ctx, idx[i - 1]), name_of(ctx, idx[i])) == 0) {
            uint64_t a = idx[i - 1], b = idx[i];
            uint64_t lo = a < b ? a : b, hi = a < b ? b : a;
            if (dup < 0 || hi < (uint64_t)dup) {
                dup = (int64_t)hi;
                *first = lo;
            }
        }
    }
    free(idx);
    return dup;
}
static const char *kv_name(void *ctx, uint64_t i) { return ((struct kv *)ctx)[i].key; }
static const char *t_name(void *ctx, uint64_t i) { return ((struct gguf_tensor *)ctx)[i].name; }

static enum mw_status parse(struct gguf_file *f, unsigned flags, struct mw_err *err)
{
    struct rctx c = {.rd = {.base = f->base, .size = f->size, .pos = 0, .err = err}, .err = err};
    enum mw_status s;
    const uint8_t *magic;
    if ((s = mw_rd_bytes(&c.rd, 4, &magic, "magic"))) return s;
    if (memcmp(magic, GGUF_MAGIC, 4) != 0)
        return MW_FAIL(err, MW_E_FORMAT, 0, "bad magic %02x %02x %02x %02x (expected \"GGUF\")",
                       magic[0], magic[1], magic[2], magic[3]);
    if ((s = mw_rd_u32(&c.rd, &f->version, "version"))) return s;
    if ((f->version & 0xffff) == 0 && f->version != 0)
        return MW_FAIL(err, MW_E_UNSUPPORTED, 4,
                       "version 0x%08x: big-endian GGUF is not supported", f->version);
    if (f->version != 2 && f->version != 3)
        return MW_FAIL(err, MW_E_UNSUPPORTED, 4, "version %u (expected 2 or 3)", f->version);
    if ((s = mw_rd_u64(&c.rd, &f->n_tensors, "tensor count"))) return s;
    if ((s = mw_rd_u64(&c.rd, &f->n_kv, "kv count"))) return s;
    if (f->n_kv > mw_rd_left(&c.rd) / MIN_KV_BYTES)
        return MW_FAIL(err, MW_E_TRUNC, 16,
                       "kv count %llu needs at least %llu bytes per KV but only %llu bytes "
                       "remain (truncated or corrupt count)",
                       (unsigned long long)f->n_kv, (unsigned long long)MIN_KV_BYTES,
                       (unsigned long long)mw_rd_left(&c.rd));
    if (f->n_tensors > mw_rd_left(&c.rd) / MIN_TINFO_BYTES)
        return MW_FAIL(err, MW_E_TRUNC, 8,
                       "tensor count %llu needs at least %llu bytes per tensor info but only "
                       "%llu bytes remain (truncated or corrupt count)",
                       (unsigned long long)f->n_tensors, (unsigned long long)MIN_TINFO_BYTES,
                       (unsigned long long)mw_rd_left(&c.rd));

    /* --- KV pairs --- */
    const uint64_t n_kv = f->n_kv;
    f->n_kv = 0; /* counts parsed entries, so gguf_close frees only those */
    if (n_kv) {
        f->kvs = calloc((size_t)n_kv, sizeof *f->kvs);
        if (!f->kvs) return MW_FAIL(err, MW_E_NOMEM, 16, "cannot allocate %llu KVs",
                                    (unsigned long long)n_kv);
    }
    for (uint64_t i = 0; i < n_kv; i++) {
        struct kv *kv = &f->kvs[i];
        kv->off = c.rd.pos;
        const uint8_t *kp;
        uint64_t klen;
        mw_err_set_where(err, "kv %llu", (unsigned long long)i);
        if ((s = rd_str(&c, &kp, &klen, "key"))) return s;
        if (klen == 0) return MW_FAIL(err, MW_E_FORMAT, kv->off, "empty key");
        if (klen > GGUF_MAX_KEY)
            return MW_FAIL(err, MW_E_FORMAT, kv->off, "key length %llu exceeds %u",
                           (unsigned long long)klen, GGUF_MAX_KEY);
        if (memchr(kp, 0, (size_t)klen))
            return MW_FAIL(err, MW_E_FORMAT, kv->off + 8, "key contains a NUL byte");
        kv->key = dup_bytes(kp, klen);
        if (!kv->key) return MW_FAIL(err, MW_E_NOMEM, kv->off, "out of memory");
        f->n_kv = i + 1;
        mw_err_set_where(err, "key '%.100s'", kv->key);
        uint32_t vt;
        if ((s = mw_rd_u32(&c.rd, &vt, "value type"))) return s;
        if ((s = parse_value(&c, vt, 0, &kv->val))) return s;
        kv->end = c.rd.pos;
    }
    bool nomem;
    uint64_t first = 0;
    int64_t dup = find_dup(f->n_kv, cmp_str_idx_kv, f->kvs, kv_name, &first, &nomem);
    if (nomem) return MW_FAIL(err, MW_E_NOMEM, MW_ERR_OFF_NONE, "out of memory");
    if (dup >= 0) {
        mw_err_set_where(err, "key '%.100s'", f->kvs[dup].key);
        return MW_FAIL(err, MW_E_FORMAT, f->kvs[dup].off, "duplicate key (first at offset %llu)",
                       (unsigned long long)f->kvs[first].off);
    }

    /* alignment */
    f->alignment = GGUF_DEFAULT_ALIGNMENT;
    int64_t ai = gguf_kv_find(f, "general.alignment");
    if (ai >= 0) {
        const struct gguf_value *v = &f->kvs[ai].val;
        mw_err_set_where(err, "key 'general.alignment'");
        if (v->type != GGUF_VT_U32)
            return MW_FAIL(err, MW_E_FORMAT, f->kvs[ai].off, "type %s (expected u32)",
                           gguf_vtype_name(v->type));
        uint32_t a = mw_le32(v->data);
        if (a == 0 || (a & (a - 1)) != 0 || a > GGUF_MAX_ALIGNMENT)
            return MW_FAIL(err, MW_E_FORMAT, v->off,
                           "alignment %u (expected a power of two <= %u)", a, GGUF_MAX_ALIGNMENT);
        f->alignment = a;
    }

    /* --- tensor infos --- */
    const uint64_t n_t = f->n_tensors;
    f->n_tensors = 0;
    if (n_t > mw_rd_left(&c.rd) / MIN_TINFO_BYTES) {
        mw_err_set_where(err, "tensor infos");
        return MW_FAIL(err, MW_E_TRUNC, c.rd.pos,
                       "%llu tensor infos need at least %llu bytes, %llu remain (truncated)",
                       (unsigned long long)n_t, (unsigned long long)(n_t * MIN_TINFO_BYTES),
                       (unsigned long long)mw_rd_left(&c.rd));
    }
    if (n_t) {
        f->tensors = calloc((size_t)n_t, sizeof *f->tensors);
        f->in_file = calloc((size_t)n_t, sizeof *f->in_file);
        if (!f->tensors || !f->in_file)
            return MW_FAIL(err, MW_E_NOMEM, 8, "cannot allocate %llu tensor infos",
                           (unsigned long long)n_t);
    }
    for (uint64_t i = 0; i < n_t; i++) {
        struct gguf_tensor *t = &f->tensors[i];
        t->info_off = c.rd.pos;
        mw_err_set_where(err, "tensor info %llu", (unsigned long long)i);
        const uint8_t *np;
        uint64_t nlen;
        if ((s = rd_str(&c, &np, &nlen, "tensor name"))) return s;
        if (nlen == 0 || nlen > GGUF_MAX_NAME)
            return MW_FAIL(err, MW_E_FORMAT, t->info_off, "tensor name length %llu (expected 1..%d)",
                           (unsigned long long)nlen, GGUF_MAX_NAME);
        if (memchr(np, 0, (size_t)nlen))
            return MW_FAIL(err, MW_E_FORMAT, t->info_off + 8, "tensor name contains a NUL byte");
        t->name = dup_bytes(np, nlen);
        if (!t->name) return MW_FAIL(err, MW_E_NOMEM, t->info_off, "out of memory");
        f->n_tensors = i + 1;
        mw_err_set_where(err, "tensor '%s'", t->name);
        if ((s = mw_rd_u32(&c.rd, &t->n_dims, "n_dims"))) return s;
        if (t->n_dims < 1 || t->n_dims > GGUF_MAX_DIMS)
            return MW_FAIL(err, MW_E_FORMAT, c.rd.pos - 4, "n_dims %u (expected 1..%d)", t->n_dims,
                           GGUF_MAX_DIMS);
        for (int j = 0; j < GGUF_MAX_DIMS; j++) t->ne[j] = 1;
        for (uint32_t j = 0; j < t->n_dims; j++) {
            if ((s = mw_rd_u64(&c.rd, &t->ne[j], "dimension"))) return s;
            if (t->ne[j] == 0 || t->ne[j] >= (UINT64_C(1) << 63))
                return MW_FAIL(err, MW_E_FORMAT, c.rd.pos - 8, "ne[%u] = %llu (expected >= 1)", j,
                               (unsigned long long)t->ne[j]);
        }
        if ((s = mw_rd_u32(&c.rd, &t->type, "tensor type"))) return s;
        const struct gguf_type_info *ti = gguf_type_get(t->type);
        if (!ti)
            return MW_FAIL(err, MW_E_FORMAT, c.rd.pos - 4, "unknown or removed ggml type %u",
                           t->type);
        if (t->ne[0] % ti->blck)
            return MW_FAIL(err, MW_E_FORMAT, t->info_off,
                           "row length %llu is not a multiple of the %s block size %u",
                           (unsigned long long)t->ne[0], ti->name, ti->blck);
        if (!gguf_tensor_nbytes(t->type, t->ne, &t->nbytes))
            return MW_FAIL(err, MW_E_FORMAT, t->info_off, "tensor size overflows");
        if ((s = mw_rd_u64(&c.rd, &t->offset, "tensor offset"))) return s;
    }
    dup = find_dup(f->n_tensors, cmp_str_idx_t, f->tensors, t_name, &first, &nomem);
    if (nomem) return MW_FAIL(err, MW_E_NOMEM, MW_ERR_OFF_NONE, "out of memory");
    if (dup >= 0) {
        mw_err_set_where(err, "tensor '%s'", f->tensors[dup].name);
        return MW_FAIL(err, MW_E_FORMAT, f->tensors[dup].info_off,
                       "duplicate tensor name (first at offset %llu)",
                       (unsigned long long)f->tensors[first].info_off);
    }

    /* --- data layout --- */
    f->infos_end = c.rd.pos;
    mw_err_set_where(err, "data section");
    if (!mw_pad_u64(f->infos_end, f->alignment, &f->data_start))
        return MW_FAIL(err, MW_E_FORMAT, f->infos_end, "data start overflows");
    if (f->data_start > f->size)
        return MW_FAIL(err, MW_E_TRUNC, f->size,
                       "file ends %llu bytes before the aligned data start %llu (truncated)",
                       (unsigned long long)(f->data_start - f->size),
                       (unsigned long long)f->data_start);
    uint64_t expect = 0;
    for (uint64_t i = 0; i < f->n_tensors; i++) {
        struct gguf_tensor *t = &f->tensors[i];
        mw_err_set_where(err, "tensor '%s'", t->name);
        /* info_off + name(8+len) + n_dims(4) + 8*n_dims + type(4) is where offset sits */
        const uint64_t off_field = t->info_off + 8 + strlen(t->name) + 4 + 8ull * t->n_dims + 4;
        if (t->offset != expect)
            return MW_FAIL(err, MW_E_FORMAT, off_field,
                           "data offset %llu, expected %llu (tensors must follow each other "
                           "in info order, each aligned to %u)",
                           (unsigned long long)t->offset, (unsigned long long)expect,
                           f->alignment);
        uint64_t padded;
        if (!mw_add_u64(f->data_start, t->offset, &t->file_off) ||
            !mw_pad_u64(t->nbytes, f->alignment, &padded) || !mw_add_u64(expect, padded, &expect))
            return MW_FAIL(err, MW_E_FORMAT, off_field, "data offsets overflow");
        uint64_t end;
        if (!mw_add_u64(t->file_off, t->nbytes, &end))
            return MW_FAIL(err, MW_E_FORMAT, off_field, "data end overflows");
        f->in_file[i] = end <= f->size;
        if (!f->in_file[i] && !(flags & GGUF_OPEN_ALLOW_SHORT)) {
            const uint64_t have = t->file_off < f->size ? f->size - t->file_off : 0;
            return MW_FAIL(err, MW_E_TRUNC, f->size,
                           "data [%llu, %llu) runs %llu bytes past the end of the file "
                           "(%llu of %llu bytes present; truncated)",
                           (unsigned long long)t->file_off, (unsigned long long)end,
                           (unsigned long long)(end - f->size), (unsigned long long)have,
                           (unsigned long long)t->nbytes);
        }
    }
    if (!mw_add_u64(f->data_start, expect, &f->data_end))
        return MW_FAIL(err, MW_E_FORMAT, f->infos_end, "data end overflows");
    if (f->data_end > f->size && !(flags & GGUF_OPEN_ALLOW_SHORT)) {
        mw_err_set_where(err, "data section");
        return MW_FAIL(err, MW_E_TRUNC, f->size,
                       "file ends %llu bytes before the end of the padded data blob at %llu "
                       "(truncated)",
                       (unsigned long long)(f->data_end - f->size),
                       (unsigned long long)f->data_end);
    }
    mw_err_set_where(err, "%s", "");
    return MW_OK;
}

static enum mw_status open_common(struct gguf_file *f, const char *name, unsigned flags,
                                  struct gguf_file **out, struct mw_err *err)
{
    f->path = dup_bytes((const uint8_t *)name, strlen(name));
    if (!f->path) {
        gguf_close(f);
        return MW_FAIL(err, MW_E_NOMEM, MW_ERR_OFF_NONE, "out of memory");
    }
    mw_err_set_path(err, name);
    enum mw_status s = parse(f, flags, err);
    if (s) {
        gguf_close(f);
        return s;
    }
    *out = f;
    return MW_OK;
}

enum mw_status gguf_open(const char *path, unsigned flags, struct gguf_file **out,
                         struct mw_err *err)
{
    *out = NULL;
    struct gguf_file *f = calloc(1, sizeof *f);
    if (!f) return MW_FAIL(err, MW_E_NOMEM, MW_ERR_OFF_NONE, "out of memory");
    f->map.fd = -1;
    enum mw_status s = mw_map_open(&f->map, path, err);
    if (s) {
        gguf_close(f);
        return s;
    }
    f->base = f->map.data;
    f->size = f->map.size;
    return open_common(f, path, flags, out, err);
}

enum mw_status gguf_open_mem(const void *buf, uint64_t size, const char *name, unsigned flags,
                             struct gguf_file **out, struct mw_err *err)
{
    *out = NULL;
    struct gguf_file *f = calloc(1, sizeof *f);
    if (!f) return MW_FAIL(err, MW_E_NOMEM, MW_ERR_OFF_NONE, "out of memory");
    f->map.fd = -1;
    f->base = buf;
    f->size = size;
    return open_common(f, name ? name : "<memory>", flags, out, err);
}

/* --- accessors --- */

uint32_t gguf_version(const struct gguf_file *f) { return f->version; }
const char *gguf_path(const struct gguf_file *f) { return f->path; }
const uint8_t *gguf_base(const struct gguf_file *f) { return f->base; }
uint64_t gguf_file_size(const struct gguf_file *f) { return f->size; }
uint32_t gguf_alignment(const struct gguf_file *f) { return f->alignment; }
uint64_t gguf_infos_end(const struct gguf_file *f) { return f->infos_end; }
uint64_t gguf_data_start(const struct gguf_file *f) { return f->data_start; }
uint64_t gguf_data_end(const struct gguf_file *f) { return f->data_end; }
uint64_t gguf_kv_count(const struct gguf_file *f) { return f->n_kv; }

const char *gguf_kv_key(const struct gguf_file *f, uint64_t i)
{
    return i < f->n_kv ? f->kvs[i].key : NULL;
}
const struct gguf_value *gguf_kv_value(const struct gguf_file *f, uint64_t i)
{
    return i < f->n_kv ? &f->kvs[i].val : NULL;
}
uint64_t gguf_kv_off(const struct gguf_file *f, uint64_t i) { return i < f->n_kv ? f->kvs[i].off : 0; }
uint64_t gguf_kv_end(const struct gguf_file *f, uint64_t i) { return i < f->n_kv ? f->kvs[i].end : 0; }

int64_t gguf_kv_find(const struct gguf_file *f, const char *key)
{
    for (uint64_t i = 0; i < f->n_kv; i++)
        if (strcmp(f->kvs[i].key, key) == 0) return (int64_t)i;
    return -1;
}

static enum mw_status get_typed(const struct gguf_file *f, const char *key, enum gguf_vtype want,
                                const struct gguf_value **v, struct mw_err *err)
{
    mw_err_set_path(err, f->path);
    mw_err_set_where(err, "key '%.100s'", key);
    int64_t i = gguf_kv_find(f, key);
    if (i < 0) return MW_FAIL(err, MW_E_VALUE, MW_ERR_OFF_NONE, "missing (expected %s)",
                              gguf_vtype_name(want));
    *v = &f->kvs[i].val;
    if ((*v)->type != want)
        return MW_FAIL(err, MW_E_FORMAT, f->kvs[i].off, "has type %s, expected %s",
                       gguf_vtype_name((*v)->type), gguf_vtype_name(want));
    return MW_OK;
}

enum mw_status gguf_get_u32(const struct gguf_file *f, const char *key, uint32_t *out,
                            struct mw_err *err)
{
    const struct gguf_value *v;
    enum mw_status s = get_typed(f, key, GGUF_VT_U32, &v, err);
    if (!s) *out = mw_le32(v->data);
    return s;
}

enum mw_status gguf_get_str(const struct gguf_file *f, const char *key, const char **str,
                            uint64_t *len, struct mw_err *err)
{
    const struct gguf_value *v;
    enum mw_status s = get_typed(f, key, GGUF_VT_STRING, &v, err);
    if (!s) {
        *str = (const char *)v->data;
        *len = v->n;
    }
    return s;
}

uint64_t gguf_tensor_count(const struct gguf_file *f) { return f->n_tensors; }

const struct gguf_tensor *gguf_tensor_get(const struct gguf_file *f, uint64_t i)
{
    return i < f->n_tensors ? &f->tensors[i] : NULL;
}

int64_t gguf_tensor_find(const struct gguf_file *f, const char *name)
{
    for (uint64_t i = 0; i < f->n_tensors; i++)
        if (strcmp(f->tensors[i].name, name) == 0) return (int64_t)i;
    return -1;
}

bool gguf_tensor_in_file(const struct gguf_file *f, uint64_t i)
{
    return i < f->n_tensors && f->in_file[i];
}

const uint8_t *gguf_tensor_data(const struct gguf_file *f, uint64_t i)
{
    if (!gguf_tensor_in_file(f, i)) return NULL;
    return f->base + f->tensors[i].file_off;
}

/* --- values --- */

bool gguf_value_elem(const struct gguf_value *arr, uint64_t j, struct gguf_value *out)
{
    if (arr->type != GGUF_VT_ARRAY || j >= arr->n) return false;
    const size_t esz = gguf_vtype_size(arr->elem_type);
    if (esz) {
        memset(out, 0, sizeof *out);
        out->type = arr->elem_type;
        out->off = arr->off + j * esz;
        out->nbytes = esz;
        out->n = 1;
        out->data = arr->data + j * esz;
        return true;
    }
    *out = ((const struct gguf_value *)arr->elems_)[j];
    return true;
}

bool gguf_value_as_u64(const struct gguf_value *v, uint64_t *out)
{
    const uint8_t *p = v->data;
    switch (v->type) {
    case GGUF_VT_U8: *out = p[0]; return true;
    case GGUF_VT_U16: *out = mw_le16(p); return true;
    case GGUF_VT_U32: *out = mw_le32(p); return true;
    case GGUF_VT_U64: *out = mw_le64(p); return true;
    default: {
        int64_t x;
        if (v->type != GGUF_VT_BOOL && gguf_value_as_i64(v, &x) && x >= 0) {
            *out = (uint64_t)x;
            return true;
        }
        return false;
    }
    }
}

bool gguf_value_as_i64(const struct gguf_value *v, int64_t *out)
{
    const uint8_t *p = v->data;
    switch (v->type) {
    case GGUF_VT_I8: *out = (int8_t)p[0]; return true;
    case GGUF_VT_I16: *out = (int16_t)mw_le16(p); return true;
    case GGUF_VT_I32: *out = (int32_t)mw_le32(p); return true;
    case GGUF_VT_I64: *out = (int64_t)mw_le64(p); return true;
    case GGUF_VT_U8: *out = p[0]; return true;
    case GGUF_VT_U16: *out = mw_le16(p); return true;
    case GGUF_VT_U32: *out = mw_le32(p); return true;
    case GGUF_VT_U64: {
        uint64_t u = mw_le64(p);
        if (u > INT64_MAX) return false;
        *out = (int64_t)u;
        return true;
    }
    default: return false;
    }
}

bool gguf_value_as_f64(const struct gguf_value *v, double *out)
{
    if (v->type == GGUF_VT_F32) {
        uint32_t u = mw_le32(v->data);
        float x;
        memcpy(&x, &u, 4);
        *out = x;
        return true;
    }
    if (v->type == GGUF_VT_F64) {
        uint64_t u = mw_le64(v->data);
        memcpy(out, &u, 8);
        return true;
    }
    int64_t i;
    uint64_t u;
    if (gguf_value_as_i64(v, &i)) {
        *out = (double)i;
        return true;
    }
    if (gguf_value_as_u64(v, &u)) {
        *out = (double)u;
        return true;
    }
    return false;
}

bool gguf_value_as_bool(const struct gguf_value *v, bool *out)
{
    if (v->type != GGUF_VT_BOOL) return false;
    *out = v->data[0] != 0;
    return true;
}

/* --- checksums --- */

uint64_t gguf_hash_tensor(const void *data, size_t n) { return XXH3_64bits(data, n); }

bool gguf_hash_header(const struct gguf_file *f, uint64_t *out)
{
    int64_t i = gguf_kv_find(f, GGUF_KEY_CK_HEADER);
    if (i < 0 || f->kvs[i].val.type != GGUF_VT_U64) return false;
    const uint64_t voff = f->kvs[i].val.off;
    static const uint8_t zeros[8] = {0};
    XXH3_state_t st;
    XXH3_INITSTATE(&st);
    XXH3_64bits_reset(&st);
    XXH3_64bits_update(&st, f->base, (size_t)voff);
    XXH3_64bits_update(&st, zeros, 8);
    XXH3_64bits_update(&st, f->base + voff + 8, (size_t)(f->data_start - voff - 8));
    *out = XXH3_64bits_digest(&st);
    return true;
}
