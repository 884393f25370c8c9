/* gguf/gguf_write.c — streaming, atomic, checksummed GGUF writer.
 *
 * The whole layout (KVs, tensor infos, offsets) is fixed before any data is
 * written, so the header is built once in memory with zeroed checksum slots,
 * written to a temp file beside the target (core/mw_file.h), tensor data is
 * streamed through a buffer while each tensor's XXH3 is computed, and at the
 * end the checksum slots are filled in, the header is rewritten in place, the
 * file is fsync'd and renamed over the target (then the directory is
 * fsync'd). The in-memory variant (gguf_writer_open_mem) sends the same bytes
 * to a growable buffer instead of the temp file. */
#define _GNU_SOURCE
#include "gguf/gguf.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/mw_file.h"

#define XXH_INLINE_ALL
#include <xxhash.h>

#define WBUF_SIZE (1u << 20)

struct buf {
    uint8_t *p;
    size_t n, cap;
};

struct wtensor {
    char *name;
    uint32_t type, n_dims;
    uint64_t ne[GGUF_MAX_DIMS];
    uint64_t nbytes, offset;
};

struct gguf_writer {
    struct buf kv;       /* serialized caller KVs */
    uint64_t n_kv;
    char **keys;
    size_t keys_cap;
    struct wtensor *t;
    uint64_t n_t;
    size_t t_cap;
    uint32_t alignment;
    bool checksums;      /* write the memwall.checksum.* keys (default) */
    uint64_t blob_size;  /* sum of padded tensor sizes */
    /* after open: */
    bool opened, finished, failed;
    struct buf hdr;      /* full header up to data_start */
    size_t ck_tensors_off; /* offset in hdr of the first u64 of the tensors array */
    size_t ck_header_off;  /* offset in hdr of the header checksum value */
    uint64_t *hashes;
    bool mem;            /* output to `out` (gguf_writer_open_mem), not a file */
    struct buf out;      /* the in-memory output */
    struct mw_outfile file; /* the temp file (gguf_writer_open) */
    uint8_t *wbuf;
    size_t wbuf_n;
    uint64_t cur;        /* current tensor */
    uint64_t cur_done;   /* bytes of it written */
    XXH3_state_t *xs;
};

/* --- growable buffer --- */

static bool buf_reserve(struct buf *b, size_t extra)
{
    if (extra <= b->cap - b->n) return true;
    size_t need;
    if (__builtin_add_overflow(b->n, extra, &need)) return false;
    size_t cap = b->cap ? b->cap : 256;
    while (cap < need) {
        if (cap > SIZE_MAX / 2) return false;
        cap *= 2;
    }
    uint8_t *p = realloc(b->p, cap);
    if (!p) return false;
    b->p = p;
    b->cap = cap;
    return true;
}
static bool buf_put(struct buf *b, const void *d, size_t n)
{
    if (!buf_reserve(b, n)) return false;
    if (n) memcpy(b->p + b->n, d, n);
    b->n += n;
    return true;
}
static bool buf_u32(struct buf *b, uint32_t v)
{
    uint8_t x[4];
    mw_put_le32(x, v);
    return buf_put(b, x, 4);
}
static bool buf_u64(struct buf *b, uint64_t v)
{
    uint8_t x[8];
    mw_put_le64(x, v);
    return buf_put(b, x, 8);
}
static bool buf_str(struct buf *b, const char *s, uint64_t n)
{
    size_t sz;
    return mw_u64_to_size(n, &sz) && buf_u64(b, n) && buf_put(b, s, sz);
}

/* --- init / free --- */

enum mw_status gguf_writer_init(struct gguf_writer **out, struct mw_err *err)
{
    struct gguf_writer *w = calloc(1, sizeof *w);
    if (!w) return MW_FAIL(err, MW_E_NOMEM, MW_ERR_OFF_NONE, "out of memory");
    w->alignment = GGUF_DEFAULT_ALIGNMENT;
    w->checksums = true;
    w->file = (struct mw_outfile)MW_OUTFILE_INIT;
    *out = w;
    return MW_OK;
}

void gguf_writer_free(struct gguf_writer *w)
{
    if (!w) return;
    mw_outfile_discard(&w->file); /* removes the temp file of an unfinished writer */
    for (uint64_t i = 0; i < w->n_kv; i++) free(w->keys[i]);
    free(w->keys);
    for (uint64_t i = 0; i < w->n_t; i++) free(w->t[i].name);
    free(w->t);
    free(w->kv.p);
    free(w->hdr.p);
    free(w->hashes);
    free(w->out.p);
    free(w->wbuf);
    if (w->xs) XXH3_freeState(w->xs);
    free(w);
}

/* --- KVs --- */

static enum mw_status check_can_add(struct gguf_writer *w, const char *key, size_t *klen,
                                    struct mw_err *err)
{
    if (w->opened) return MW_FAIL(err, MW_E_USAGE, MW_ERR_OFF_NONE, "writer already opened");
    if (!key || !key[0]) return MW_FAIL(err, MW_E_USAGE, MW_ERR_OFF_NONE, "empty key");
    *klen = strlen(key);
    if (*klen > GGUF_MAX_KEY)
        return MW_FAIL(err, MW_E_USAGE, MW_ERR_OFF_NONE, "key longer than %u bytes", GGUF_MAX_KEY);
    if (strncmp(key, "memwall.checksum.", 17) == 0)
        return MW_FAIL(err, MW_E_USAGE, MW_ERR_OFF_NONE, "key '%.100s' is reserved", key);
    for (uint64_t i = 0; i < w->n_kv; i++)
        if (strcmp(w->keys[i], key) == 0)
            return MW_FAIL(err, MW_E_USAGE, MW_ERR_OFF_NONE, "duplicate key '%.100s'", key);
    return MW_OK;
}

/* Checks key (check_can_add), then appends the n bytes of rec (NULL: key +
 * type id vt) to the KV buffer and registers key. */
static enum mw_status add_kv(struct gguf_writer *w, const char *key, uint32_t vt,
                             const uint8_t *rec, size_t n, struct mw_err *err)
{
    size_t klen = 0;
    enum mw_status s = check_can_add(w, key, &klen, err);
    if (s) return s;
    if (w->n_kv == w->keys_cap) {
        size_t cap = w->keys_cap ? w->keys_cap * 2 : 32;
        char **k = realloc(w->keys, cap * sizeof *k);
        if (!k) return MW_FAIL(err, MW_E_NOMEM, MW_ERR_OFF_NONE, "out of memory");
        w->keys = k;
        w->keys_cap = cap;
    }
    char *kc = strdup(key);
    const bool ok =
        rec ? buf_put(&w->kv, rec, n) : buf_str(&w->kv, key, klen) && buf_u32(&w->kv, vt);
    if (!kc || !ok) {
        free(kc);
        return MW_FAIL(err, MW_E_NOMEM, MW_ERR_OFF_NONE, "out of memory");
    }
    w->keys[w->n_kv++] = kc;
    return MW_OK;
}

/* Registers key, and writes key + type id into the KV buffer. */
static enum mw_status begin_kv(struct gguf_writer *w, const char *key, uint32_t vt,
                               struct mw_err *err)
{
    return add_kv(w, key, vt, NULL, 0, err);
}

static enum mw_status set_scalar(struct gguf_writer *w, const char *key, uint32_t vt,
                                 uint64_t bits, struct mw_err *err)
{
    enum mw_status s = begin_kv(w, key, vt, err);
    if (s) return s;
    uint8_t x[8];
    mw_put_le64(x, bits);
    if (!buf_put(&w->kv, x, gguf_vtype_size(vt)))
        return MW_FAIL(err, MW_E_NOMEM, MW_ERR_OFF_NONE, "out of memory");
    return MW_OK;
}

#define SETTER(fn, ctype, vt, conv)                                                        \
    enum mw_status fn(struct gguf_writer *w, const char *key, ctype v, struct mw_err *err) \
    {                                                                                      \
        return set_scalar(w, key, vt, conv, err);                                          \
    }
static uint64_t f32_bits(float f)
{
    uint32_t u;
    memcpy(&u, &f, 4);
    return u;
}
static uint64_t f64_bits(double d)
{
    uint64_t u;
    memcpy(&u, &d, 8);
    return u;
}
SETTER(gguf_writer_set_u8, uint8_t, GGUF_VT_U8, v)
SETTER(gguf_writer_set_i8, int8_t, GGUF_VT_I8, (uint8_t)v)
SETTER(gguf_writer_set_u16, uint16_t, GGUF_VT_U16, v)
SETTER(gguf_writer_set_i16, int16_t, GGUF_VT_I16, (uint16_t)v)
SETTER(gguf_writer_set_u32, uint32_t, GGUF_VT_U32, v)
SETTER(gguf_writer_set_i32, int32_t, GGUF_VT_I32, (uint32_t)v)
SETTER(gguf_writer_set_u64, uint64_t, GGUF_VT_U64, v)
SETTER(gguf_writer_set_i64, int64_t, GGUF_VT_I64, (uint64_t)v)
SETTER(gguf_writer_set_f32, float, GGUF_VT_F32, f32_bits(v))
SETTER(gguf_writer_set_f64, double, GGUF_VT_F64, f64_bits(v))
SETTER(gguf_writer_set_bool, bool, GGUF_VT_BOOL, v ? 1u : 0u)
#undef SETTER

enum mw_status gguf_writer_set_strn(struct gguf_writer *w, const char *key, const char *str,
                                    uint64_t len, struct mw_err *err)
{
    enum mw_status s = begin_kv(w, key, GGUF_VT_STRING, err);
    if (s) return s;
    if (!buf_str(&w->kv, str, len)) return MW_FAIL(err, MW_E_NOMEM, MW_ERR_OFF_NONE, "out of memory");
    return MW_OK;
}

enum mw_status gguf_writer_set_str(struct gguf_writer *w, const char *key, const char *str,
                                   struct mw_err *err)
{
    return gguf_writer_set_strn(w, key, str, strlen(str), err);
}

enum mw_status gguf_writer_set_arr(struct gguf_writer *w, const char *key, enum gguf_vtype et,
                                   const void *data, uint64_t n, struct mw_err *err)
{
    const size_t esz = gguf_vtype_size(et);
    if (!esz) return MW_FAIL(err, MW_E_USAGE, MW_ERR_OFF_NONE, "array of %s: use set_arr_str",
                             gguf_vtype_name(et));
    uint64_t total;
    size_t tsz;
    if (!mw_mul_u64(n, esz, &total) || !mw_u64_to_size(total, &tsz))
        return MW_FAIL(err, MW_E_USAGE, MW_ERR_OFF_NONE, "array too large");
    enum mw_status s = begin_kv(w, key, GGUF_VT_ARRAY, err);
    if (s) return s;
    if (!buf_u32(&w->kv, et) || !buf_u64(&w->kv, n) || !buf_reserve(&w->kv, tsz))
        return MW_FAIL(err, MW_E_NOMEM, MW_ERR_OFF_NONE, "out of memory");
    const uint8_t *src = data;
    uint8_t *dst = w->kv.p + w->kv.n;
    for (uint64_t j = 0; j < n; j++, src += esz, dst += esz) {
        /* host order -> little-endian */
        switch (esz) {
        case 1: dst[0] = src[0]; break;
        case 2: { uint16_t v; memcpy(&v, src, 2); mw_put_le16(dst, v); break; }
        case 4: { uint32_t v; memcpy(&v, src, 4); mw_put_le32(dst, v); break; }
        default: { uint64_t v; memcpy(&v, src, 8); mw_put_le64(dst, v); break; }
        }
    }
    w->kv.n += tsz;
    return MW_OK;
}

enum mw_status gguf_writer_set_arr_str(struct gguf_writer *w, const char *key,
                                       const char *const *strs, const uint64_t *lens, uint64_t n,
                                       struct mw_err *err)
{
    enum mw_status s = begin_kv(w, key, GGUF_VT_ARRAY, err);
    if (s) return s;
    if (!buf_u32(&w->kv, GGUF_VT_STRING) || !buf_u64(&w->kv, n))
        return MW_FAIL(err, MW_E_NOMEM, MW_ERR_OFF_NONE, "out of memory");
    for (uint64_t j = 0; j < n; j++)
        if (!buf_str(&w->kv, strs[j], lens ? lens[j] : strlen(strs[j])))
            return MW_FAIL(err, MW_E_NOMEM, MW_ERR_OFF_NONE, "out of memory");
    return MW_OK;
}

enum mw_status gguf_writer_copy_kv(struct gguf_writer *w, const struct gguf_file *src, uint64_t i,
                                   struct mw_err *err)
{
    const char *key = gguf_kv_key(src, i);
    if (!key) return MW_FAIL(err, MW_E_USAGE, MW_ERR_OFF_NONE, "no KV %llu", (unsigned long long)i);
    const uint64_t a = gguf_kv_off(src, i), b = gguf_kv_end(src, i);
    size_t n;
    if (!mw_u64_to_size(b - a, &n))
        return MW_FAIL(err, MW_E_NOMEM, MW_ERR_OFF_NONE, "out of memory");
    /* the whole record, verbatim */
    return add_kv(w, key, 0, gguf_base(src) + a, n, err);
}

enum mw_status gguf_writer_set_checksums(struct gguf_writer *w, bool on, struct mw_err *err)
{
    if (w->opened) return MW_FAIL(err, MW_E_USAGE, MW_ERR_OFF_NONE, "writer already opened");
    w->checksums = on;
    return MW_OK;
}

enum mw_status gguf_writer_set_alignment(struct gguf_writer *w, uint32_t align, struct mw_err *err)
{
    if (align == 0 || (align & (align - 1)) || align > GGUF_MAX_ALIGNMENT)
        return MW_FAIL(err, MW_E_USAGE, MW_ERR_OFF_NONE, "alignment %u is not a power of two <= %u",
                       align, GGUF_MAX_ALIGNMENT);
    if (w->n_t) return MW_FAIL(err, MW_E_USAGE, MW_ERR_OFF_NONE, "set alignment before tensors");
    enum mw_status s = gguf_writer_set_u32(w, "general.alignment", align, err);
    if (!s) w->alignment = align;
    return s;
}

/* --- tensors --- */

enum mw_status gguf_writer_add_tensor(struct gguf_writer *w, const char *name, uint32_t type,
                                      uint32_t n_dims, const uint64_t *ne, struct mw_err *err)
{
    if (w->opened) return MW_FAIL(err, MW_E_USAGE, MW_ERR_OFF_NONE, "writer already opened");
    const size_t nlen = name ? strlen(name) : 0;
    if (nlen == 0 || nlen > GGUF_MAX_NAME)
        return MW_FAIL(err, MW_E_USAGE, MW_ERR_OFF_NONE, "tensor name '%.80s' must be 1..%d bytes",
                       name ? name : "", GGUF_MAX_NAME);
    if (n_dims < 1 || n_dims > GGUF_MAX_DIMS)
        return MW_FAIL(err, MW_E_USAGE, MW_ERR_OFF_NONE, "tensor '%s': n_dims %u", name, n_dims);
    struct wtensor t = {.type = type, .n_dims = n_dims};
    for (int j = 0; j < GGUF_MAX_DIMS; j++) t.ne[j] = 1;
    for (uint32_t j = 0; j < n_dims; j++) {
        if (ne[j] == 0)
            return MW_FAIL(err, MW_E_USAGE, MW_ERR_OFF_NONE, "tensor '%s': ne[%u] is 0", name, j);
        t.ne[j] = ne[j];
    }
    if (!gguf_tensor_nbytes(type, t.ne, &t.nbytes))
        return MW_FAIL(err, MW_E_USAGE, MW_ERR_OFF_NONE,
                       "tensor '%s': invalid type %u or row length %llu not a multiple of its "
                       "block size", name, type, (unsigned long long)t.ne[0]);
    for (uint64_t i = 0; i < w->n_t; i++)
        if (strcmp(w->t[i].name, name) == 0)
            return MW_FAIL(err, MW_E_USAGE, MW_ERR_OFF_NONE, "duplicate tensor '%s'", name);
    uint64_t padded, end;
    if (!mw_pad_u64(t.nbytes, w->alignment, &padded) || !mw_add_u64(w->blob_size, padded, &end))
        return MW_FAIL(err, MW_E_USAGE, MW_ERR_OFF_NONE, "tensor '%s': sizes overflow", name);
    if (w->n_t == w->t_cap) {
        size_t cap = w->t_cap ? w->t_cap * 2 : 64;
        struct wtensor *p = realloc(w->t, cap * sizeof *p);
        if (!p) return MW_FAIL(err, MW_E_NOMEM, MW_ERR_OFF_NONE, "out of memory");
        w->t = p;
        w->t_cap = cap;
    }
    t.name = strdup(name);
    if (!t.name) return MW_FAIL(err, MW_E_NOMEM, MW_ERR_OFF_NONE, "out of memory");
    t.offset = w->blob_size;
    w->blob_size = end;
    w->t[w->n_t++] = t;
    return MW_OK;
}

uint64_t gguf_writer_file_size(const struct gguf_writer *w)
{
    /* header: 24 + caller KVs + 3 checksum KVs + tensor infos, padded */
    uint64_t n = 24 + w->kv.n;
    if (w->checksums) {
        n += 8 + strlen(GGUF_KEY_CK_ALGO) + 4 + 8 + strlen(GGUF_CK_ALGO_NAME);
        n += 8 + strlen(GGUF_KEY_CK_TENSORS) + 4 + 4 + 8 + 8 * w->n_t;
        n += 8 + strlen(GGUF_KEY_CK_HEADER) + 4 + 8;
    }
    for (uint64_t i = 0; i < w->n_t; i++) n += 8 + strlen(w->t[i].name) + 4 + 8 * w->t[i].n_dims + 4 + 8;
    uint64_t p = n;
    mw_pad_u64(n, w->alignment, &p);
    return p + w->blob_size;
}

/* --- output --- */

static enum mw_status io_fail(struct gguf_writer *w, enum mw_status s)
{
    w->failed = true;
    return s;
}

static enum mw_status out_flush(struct gguf_writer *w, struct mw_err *err)
{
    enum mw_status s = mw_outfile_write(&w->file, w->wbuf, w->wbuf_n, err);
    if (s) return io_fail(w, s);
    w->wbuf_n = 0;
    return MW_OK;
}

static enum mw_status out_put(struct gguf_writer *w, const void *d, size_t n, struct mw_err *err)
{
    if (w->mem) {
        if (buf_put(&w->out, d, n)) return MW_OK;
        w->failed = true;
        return MW_FAIL(err, MW_E_NOMEM, MW_ERR_OFF_NONE, "out of memory");
    }
    const uint8_t *p = d;
    while (n) {
        if (w->wbuf_n == WBUF_SIZE) {
            enum mw_status s = out_flush(w, err);
            if (s) return s;
            /* write back now, cache nothing */
            posix_fadvise(w->file.fd, 0, 0, POSIX_FADV_DONTNEED);
        }
        size_t k = WBUF_SIZE - w->wbuf_n;
        if (k > n) k = n;
        memcpy(w->wbuf + w->wbuf_n, p, k);
        w->wbuf_n += k;
        p += k;
        n -= k;
    }
    return MW_OK;
}

static enum mw_status out_zeros(struct gguf_writer *w, uint64_t n, struct mw_err *err)
{
    static const uint8_t z[64] = {0};
    while (n) {
        size_t k = n > sizeof z ? sizeof z : (size_t)n;
        enum mw_status s = out_put(w, z, k, err);
        if (s) return s;
        n -= k;
    }
    return MW_OK;
}

static enum mw_status build_checksum_kvs(struct gguf_writer *w, struct mw_err *err)
{
    struct buf *h = &w->hdr;
    bool ok = buf_str(h, GGUF_KEY_CK_ALGO, strlen(GGUF_KEY_CK_ALGO)) &&
         buf_u32(h, GGUF_VT_STRING) && buf_str(h, GGUF_CK_ALGO_NAME, strlen(GGUF_CK_ALGO_NAME));
    ok = ok && buf_str(h, GGUF_KEY_CK_TENSORS, strlen(GGUF_KEY_CK_TENSORS)) &&
         buf_u32(h, GGUF_VT_ARRAY) && buf_u32(h, GGUF_VT_U64) && buf_u64(h, w->n_t);
    if (!ok) return MW_FAIL(err, MW_E_NOMEM, MW_ERR_OFF_NONE, "out of memory");
    w->ck_tensors_off = h->n;
    for (uint64_t i = 0; i < w->n_t; i++)
        if (!buf_u64(h, 0)) return MW_FAIL(err, MW_E_NOMEM, MW_ERR_OFF_NONE, "out of memory");
    ok = buf_str(h, GGUF_KEY_CK_HEADER, strlen(GGUF_KEY_CK_HEADER)) && buf_u32(h, GGUF_VT_U64);
    w->ck_header_off = h->n;
    if (!ok || !buf_u64(h, 0)) return MW_FAIL(err, MW_E_NOMEM, MW_ERR_OFF_NONE, "out of memory");
    return MW_OK;
}

static enum mw_status build_header(struct gguf_writer *w, struct mw_err *err)
{
    struct buf *h = &w->hdr;
    const uint64_t n_kv = w->n_kv + (w->checksums ? 3 : 0);
    bool ok = buf_put(h, GGUF_MAGIC, 4) && buf_u32(h, GGUF_VERSION) && buf_u64(h, w->n_t) &&
              buf_u64(h, n_kv) && buf_put(h, w->kv.p, w->kv.n);
    if (!ok) return MW_FAIL(err, MW_E_NOMEM, MW_ERR_OFF_NONE, "out of memory");
    if (w->checksums) {
        enum mw_status s = build_checksum_kvs(w, err);
        if (s) return s;
    }
    for (uint64_t i = 0; ok && i < w->n_t; i++) {
        const struct wtensor *t = &w->t[i];
        ok = buf_str(h, t->name, strlen(t->name)) && buf_u32(h, t->n_dims);
        for (uint32_t j = 0; ok && j < t->n_dims; j++) ok = buf_u64(h, t->ne[j]);
        ok = ok && buf_u32(h, t->type) && buf_u64(h, t->offset);
    }
    uint64_t padded;
    if (!ok || !mw_pad_u64(h->n, w->alignment, &padded) || !buf_reserve(h, (size_t)(padded - h->n)))
        return MW_FAIL(err, MW_E_NOMEM, MW_ERR_OFF_NONE, "out of memory");
    memset(h->p + h->n, 0, (size_t)(padded - h->n));
    h->n = (size_t)padded;
    return MW_OK;
}

/* Everything gguf_writer_open and gguf_writer_open_mem share: the header is
 * built and sent to the output (the temp file for path != NULL, else the
 * in-memory buffer). */
static enum mw_status writer_open(struct gguf_writer *w, const char *path, struct mw_err *err)
{
    if (w->opened) return MW_FAIL(err, MW_E_USAGE, MW_ERR_OFF_NONE, "writer already opened");
    w->opened = true;
    w->mem = path == NULL;
    w->wbuf = w->mem ? NULL : malloc(WBUF_SIZE);
    w->hashes = calloc(w->n_t ? (size_t)w->n_t : 1, sizeof *w->hashes);
    w->xs = XXH3_createState();
    if ((!w->mem && !w->wbuf) || !w->hashes || !w->xs) {
        w->failed = true;
        return MW_FAIL(err, MW_E_NOMEM, MW_ERR_OFF_NONE, "out of memory");
    }
    enum mw_status s = build_header(w, err);
    if (s) return io_fail(w, s);
    if (w->mem) {
        /* the whole output is known: allocate it once */
        uint64_t total = 0;
        size_t n;
        if (!mw_add_u64(w->hdr.n, w->blob_size, &total) || !mw_u64_to_size(total, &n) ||
            !buf_reserve(&w->out, n)) {
            w->failed = true;
            return MW_FAIL(err, MW_E_NOMEM, MW_ERR_OFF_NONE, "out of memory (%llu bytes)",
                           (unsigned long long)total);
        }
    } else if ((s = mw_outfile_open(&w->file, path, err))) {
        return io_fail(w, s);
    }
    s = out_put(w, w->hdr.p, w->hdr.n, err);
    if (s) return s;
    w->cur = 0;
    w->cur_done = 0;
    XXH3_64bits_reset(w->xs);
    return MW_OK;
}

enum mw_status gguf_writer_open(struct gguf_writer *w, const char *path, struct mw_err *err)
{
    mw_err_set_path(err, path);
    return writer_open(w, path, err);
}

enum mw_status gguf_writer_open_mem(struct gguf_writer *w, struct mw_err *err)
{
    return writer_open(w, NULL, err);
}

/* Close the current tensor: store its hash, write its padding, advance. */
static enum mw_status end_tensor(struct gguf_writer *w, struct mw_err *err)
{
    const struct wtensor *t = &w->t[w->cur];
    w->hashes[w->cur] = XXH3_64bits_digest(w->xs);
    uint64_t padded = t->nbytes; /* cannot overflow: checked in add_tensor */
    mw_pad_u64(t->nbytes, w->alignment, &padded);
    enum mw_status s = out_zeros(w, padded - t->nbytes, err);
    if (s) return s;
    w->cur++;
    w->cur_done = 0;
    XXH3_64bits_reset(w->xs);
    return MW_OK;
}

enum mw_status gguf_writer_write(struct gguf_writer *w, const void *data, size_t n,
                                 struct mw_err *err)
{
    if (!w->opened || w->finished || w->failed)
        return MW_FAIL(err, MW_E_USAGE, MW_ERR_OFF_NONE, "writer not open");
    const uint8_t *p = data;
    while (n) {
        if (w->cur >= w->n_t) {
            w->failed = true;
            return MW_FAIL(err, MW_E_USAGE, MW_ERR_OFF_NONE,
                           "%zu bytes of tensor data beyond the declared tensors", n);
        }
        const struct wtensor *t = &w->t[w->cur];
        uint64_t left = t->nbytes - w->cur_done;
        size_t k = (uint64_t)n < left ? n : (size_t)left;
        XXH3_64bits_update(w->xs, p, k);
        enum mw_status s = out_put(w, p, k, err);
        if (s) return s;
        w->cur_done += k;
        p += k;
        n -= k;
        if (w->cur_done == t->nbytes && (s = end_tensor(w, err))) return s;
    }
    return MW_OK;
}

/* All data written? Fill in the checksum slots of the header (which then
 * holds the final header bytes). */
static enum mw_status finish_header(struct gguf_writer *w, struct mw_err *err)
{
    if (!w->opened || w->finished || w->failed)
        return MW_FAIL(err, MW_E_USAGE, MW_ERR_OFF_NONE, "writer not open");
    /* zero-byte tensors cannot exist (ne >= 1), so cur < n_t means data is missing */
    if (w->cur < w->n_t) {
        w->failed = true;
        return MW_FAIL(err, MW_E_USAGE, MW_ERR_OFF_NONE,
                       "tensor '%s': %llu of %llu bytes written; data missing", w->t[w->cur].name,
                       (unsigned long long)w->cur_done, (unsigned long long)w->t[w->cur].nbytes);
    }
    if (w->checksums) {
        for (uint64_t i = 0; i < w->n_t; i++)
            mw_put_le64(w->hdr.p + w->ck_tensors_off + 8 * i, w->hashes[i]);
        /* header hash with its own slot zero (it is zero in hdr right now) */
        mw_put_le64(w->hdr.p + w->ck_header_off, XXH3_64bits(w->hdr.p, w->hdr.n));
    }
    return MW_OK;
}

enum mw_status gguf_writer_finish(struct gguf_writer *w, struct mw_err *err)
{
    if (w->mem) return MW_FAIL(err, MW_E_USAGE, MW_ERR_OFF_NONE, "writer opened in memory");
    enum mw_status s = finish_header(w, err);
    if (s || (s = out_flush(w, err))) return s;
    /* nothing to patch without checksums */
    if (w->checksums &&
        (s = mw_outfile_pwrite(&w->file, w->hdr.p, w->hdr.n, 0, "pwrite header", err)))
        return io_fail(w, s);
    if ((s = mw_outfile_commit(&w->file, err))) return io_fail(w, s);
    w->finished = true;
    return MW_OK;
}

enum mw_status gguf_writer_finish_mem(struct gguf_writer *w, void **buf, uint64_t *size,
                                      struct mw_err *err)
{
    if (!w->mem) return MW_FAIL(err, MW_E_USAGE, MW_ERR_OFF_NONE, "writer not opened in memory");
    enum mw_status s = finish_header(w, err);
    if (s) return s;
    memcpy(w->out.p, w->hdr.p, w->hdr.n);
    w->finished = true;
    *buf = w->out.p;
    *size = w->out.n;
    w->out = (struct buf){0};
    return MW_OK;
}
