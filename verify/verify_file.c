/*
 * verify/verify_file.c — the checks of verify_file()/verify_mem(), in the
 * order verify.h lists them: reader, bounds, padding, checksums, deep.
 */
#define _DEFAULT_SOURCE /* madvise, sysconf */
#include "verify/verify_int.h"

#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#define XXH_INLINE_ALL
#include <xxhash.h>

#include "core/mw_file.h"
#include "quant/quant.h"

/* Release checked pages in batches of at least this many bytes. */
#define RELEASE_BATCH ((uint64_t)4 << 20)

// --- mapping advice ---

void verify__advise_sequential(struct vctx *c)
{
    if (!c->mapped || c->size == 0) return;
    size_t len;
    if (!mw_u64_to_size(c->size, &len)) return;
    (void)madvise((void *)(uintptr_t)c->base, len, MADV_SEQUENTIAL);
}

void verify__release_below(struct vctx *c, uint64_t off, bool force)
{
    if (!c->mapped || c->page == 0) return;
    if (off > c->size) off = c->size;
    /* the mapping starts on a page boundary; keep the partial page at off
     * (it is still being read) unless it is the file's last one */
    uint64_t end = off == c->size ? off : off & ~(c->page - 1);
    if (end <= c->dropped) return;
    if (!force && end - c->dropped < RELEASE_BATCH) return;
    /* dropped and end are page boundaries or the file's end: every page of
     * [dropped, end) goes */
    mw_map_drop(c->base, c->size, c->dropped, end);
    c->dropped = end;
}

// --- helpers ---

static uint64_t min_u64(uint64_t a, uint64_t b) { return a < b ? a : b; }
static const char *plural(uint64_t n) { return n == 1 ? "" : "s"; }

/* Printable, bounded rendering of untrusted bytes for messages. */
static void quote_bytes(char *dst, size_t n, const uint8_t *s, uint64_t len)
{
    size_t o = 0;
    for (uint64_t i = 0; i < len && o + 8 < n; i++) {
        const uint8_t ch = s[i];
        if (ch >= 0x20 && ch < 0x7f && ch != '\'' && ch != '\\') {
            dst[o++] = (char)ch;
        } else {
            int k = snprintf(dst + o, n - o, "\\x%02x", ch);
            if (k > 0) o += (size_t)k;
        }
        if (i + 1 < len && o + 8 >= n) {
            snprintf(dst + o, n - o, "...");
            o += 3;
            break;
        }
    }
    dst[o < n ? o : n - 1] = 0;
}

static void key_where(char *dst, size_t n, const char *key) { snprintf(dst, n, "key '%s'", key); }

/* First non-zero byte in [lo, hi) of the file (hi clamped to the size), or
 * UINT64_MAX when all are zero. */
static uint64_t first_nonzero(const struct vctx *c, uint64_t lo, uint64_t hi)
{
    hi = min_u64(hi, c->size);
    for (uint64_t o = lo; o < hi; o++)
        if (c->base[o] != 0) return o;
    return UINT64_MAX;
}

// --- checks ---

/* First tensor whose data runs past the end of the file; a blob whose
 * trailing padding is cut short. */
static void check_bounds(struct vctx *c)
{
    struct verify_report *r = c->rep;
    const uint64_t n = r->n_tensors;
    for (uint64_t i = 0; i < n; i++) {
        if (gguf_tensor_in_file(c->f, i)) continue;
        const struct gguf_tensor *t = gguf_tensor_get(c->f, i);
        const struct gguf_type_info *ti = gguf_type_get(t->type);
        const uint64_t have = t->file_off < c->size ? c->size - t->file_off : 0;
        const uint64_t have_data = min_u64(have, t->nbytes);
        char shape[96];
        int k = 0;
        for (uint32_t d = 0; d < t->n_dims && d < GGUF_MAX_DIMS && k >= 0 && (size_t)k < sizeof shape;
             d++)
            k += snprintf(shape + k, sizeof shape - (size_t)k, "%s%llu", d ? "x" : "",
                          (unsigned long long)t->ne[d]);
        r->n_tensors_missing = n - i;
        verify__item(c, VERIFY_ERROR, MW_E_TRUNC, t->file_off, (int64_t)i, NULL,
                     "%s shape %s needs %llu byte%s, %llu remain: file truncated at %llu, "
                     "%llu byte%s short; %llu further tensor%s missing",
                     ti ? ti->name : "?", shape, (unsigned long long)t->nbytes, plural(t->nbytes),
                     (unsigned long long)have_data, (unsigned long long)c->size,
                     (unsigned long long)(t->nbytes - have_data), plural(t->nbytes - have_data),
                     (unsigned long long)(n - i - 1), plural(n - i - 1));
        return;
    }
    if (c->size < r->data_end) {
        const uint64_t short_by = r->data_end - c->size;
        if (n > 0)
            verify__item(c, VERIFY_ERROR, MW_E_TRUNC, c->size, (int64_t)(n - 1), NULL,
                         "file truncated in the padding after the last tensor: file ends at "
                         "%llu, data blob ends at %llu (%llu byte%s short)",
                         (unsigned long long)c->size, (unsigned long long)r->data_end,
                         (unsigned long long)short_by, plural(short_by));
        else
            verify__item(c, VERIFY_ERROR, MW_E_TRUNC, c->size, -1, NULL,
                         "file truncated in the padding before the data blob: file ends at "
                         "%llu, data starts at %llu (%llu byte%s short)",
                         (unsigned long long)c->size, (unsigned long long)r->data_end,
                         (unsigned long long)short_by, plural(short_by));
    }
}

static void check_pre_blob_padding(struct vctx *c)
{
    const uint64_t o = first_nonzero(c, gguf_infos_end(c->f), c->rep->data_start);
    if (o != UINT64_MAX)
        verify__item(c, VERIFY_ERROR, MW_E_FORMAT, o, -1, NULL,
                     "padding before the data blob must be zero, found 0x%02x", c->base[o]);
}

/* Checksum keys as found in the file. */
struct cksum {
    bool algo_ok, hdr_ok, arr_ok; /* each key present, well-formed, supported */
    const uint8_t *arr;           /* n_tensors little-endian u64 */
    uint64_t hdr_stored;
};

/* Find and validate the memwall.checksum.* keys; sets rep->checksums to
 * ABSENT, or INVALID if any key is missing/malformed (OK otherwise, for now). */
static void check_cksum_keys(struct vctx *c, struct cksum *ck)
{
    struct verify_report *r = c->rep;
    memset(ck, 0, sizeof *ck);
    const int64_t ka = gguf_kv_find(c->f, GGUF_KEY_CK_ALGO);
    const int64_t kt = gguf_kv_find(c->f, GGUF_KEY_CK_TENSORS);
    const int64_t kh = gguf_kv_find(c->f, GGUF_KEY_CK_HEADER);
    char where[160];

    /* keys under the reserved prefix that this version does not know */
    static const char prefix[] = "memwall.checksum.";
    bool any_other = false;
    for (uint64_t i = 0; i < r->n_kv; i++) {
        const char *key = gguf_kv_key(c->f, i);
        if (strncmp(key, prefix, sizeof prefix - 1) != 0) continue;
        if ((int64_t)i == ka || (int64_t)i == kt || (int64_t)i == kh) continue;
        any_other = true;
        key_where(where, sizeof where, key);
        verify__item(c, VERIFY_WARNING, MW_E_UNSUPPORTED, gguf_kv_off(c->f, i), -1, where,
                     "unknown checksum key ignored");
    }

    if (ka < 0 && kt < 0 && kh < 0) {
        r->checksums = VERIFY_CK_ABSENT;
        verify__item(c, VERIFY_NOTE, MW_OK, MW_ERR_OFF_NONE, -1, NULL,
                     "no checksums (no " GGUF_KEY_CK_ALGO "/tensors/header keys%s): "
                     "structural checks only",
                     any_other ? " that this version understands" : "");
        return;
    }
    r->checksums = VERIFY_CK_OK;
    static const char *const names[3] = {GGUF_KEY_CK_ALGO, GGUF_KEY_CK_TENSORS, GGUF_KEY_CK_HEADER};
    const int64_t idx[3] = {ka, kt, kh};
    /* a missing key is reported at the first checksum key that is there */
    uint64_t first_off = UINT64_MAX;
    for (int j = 0; j < 3; j++)
        if (idx[j] >= 0) first_off = min_u64(first_off, gguf_kv_off(c->f, (uint64_t)idx[j]));
    for (int j = 0; j < 3; j++) {
        if (idx[j] >= 0) continue;
        r->checksums = VERIFY_CK_INVALID;
        key_where(where, sizeof where, names[j]);
        verify__item(c, VERIFY_ERROR, MW_E_FORMAT, first_off, -1, where,
                     "checksum key missing while other " GGUF_KEY_CK_ALGO
                     "/tensors/header keys are present");
    }

    if (ka >= 0) {
        const struct gguf_value *v = gguf_kv_value(c->f, (uint64_t)ka);
        key_where(where, sizeof where, GGUF_KEY_CK_ALGO);
        if (v->type != GGUF_VT_STRING) {
            r->checksums = VERIFY_CK_INVALID;
            verify__item(c, VERIFY_ERROR, MW_E_FORMAT, gguf_kv_off(c->f, (uint64_t)ka), -1, where,
                         "must be a string, found %s", gguf_vtype_name(v->type));
        } else if (v->nbytes != sizeof GGUF_CK_ALGO_NAME - 1 ||
                   memcmp(v->data, GGUF_CK_ALGO_NAME, v->nbytes) != 0) {
            char q[64];
            quote_bytes(q, sizeof q, v->data, v->nbytes);
            r->checksums = VERIFY_CK_INVALID;
            verify__item(c, VERIFY_ERROR, MW_E_UNSUPPORTED, v->off, -1, where,
                         "checksum algorithm '%s' not supported (expected '" GGUF_CK_ALGO_NAME
                         "')",
                         q);
        } else {
            ck->algo_ok = true;
        }
    }
    if (kt >= 0) {
        const struct gguf_value *v = gguf_kv_value(c->f, (uint64_t)kt);
        key_where(where, sizeof where, GGUF_KEY_CK_TENSORS);
        if (v->type != GGUF_VT_ARRAY || v->elem_type != GGUF_VT_U64) {
            r->checksums = VERIFY_CK_INVALID;
            verify__item(c, VERIFY_ERROR, MW_E_FORMAT, gguf_kv_off(c->f, (uint64_t)kt), -1, where,
                         "must be an array of u64, found %s%s%s", gguf_vtype_name(v->type),
                         v->type == GGUF_VT_ARRAY ? " of " : "",
                         v->type == GGUF_VT_ARRAY ? gguf_vtype_name(v->elem_type) : "");
        } else if (v->n != r->n_tensors || v->nbytes / 8 != v->n) {
            r->checksums = VERIFY_CK_INVALID;
            verify__item(c, VERIFY_ERROR, MW_E_FORMAT, v->off, -1, where,
                         "has %llu entries, the file has %llu tensors", (unsigned long long)v->n,
                         (unsigned long long)r->n_tensors);
        } else {
            ck->arr_ok = true;
            ck->arr = v->data;
        }
    }
    if (kh >= 0) {
        const struct gguf_value *v = gguf_kv_value(c->f, (uint64_t)kh);
        key_where(where, sizeof where, GGUF_KEY_CK_HEADER);
        if (v->type != GGUF_VT_U64 || v->nbytes != 8) {
            r->checksums = VERIFY_CK_INVALID;
            verify__item(c, VERIFY_ERROR, MW_E_FORMAT, gguf_kv_off(c->f, (uint64_t)kh), -1, where,
                         "must be a u64, found %s", gguf_vtype_name(v->type));
        } else {
            ck->hdr_ok = true;
            ck->hdr_stored = mw_le64(v->data);
        }
    }
}

static void check_header_hash(struct vctx *c, const struct cksum *ck)
{
    struct verify_report *r = c->rep;
    if (!ck->algo_ok || !ck->hdr_ok) return;
    if (r->data_start > c->size) return; /* header cut short: reported as truncation */
    uint64_t h;
    if (!gguf_hash_header(c->f, &h)) return; /* cannot happen: key checked above */
    if (h == ck->hdr_stored) {
        r->header_hash_ok = true;
        return;
    }
    if (r->checksums == VERIFY_CK_OK) r->checksums = VERIFY_CK_MISMATCH;
    verify__item(c, VERIFY_ERROR, MW_E_CHECKSUM, 0, -1, "header",
                 "header checksum mismatch: bytes [0, %llu) hash to 0x%016llx, "
                 GGUF_KEY_CK_HEADER " says 0x%016llx",
                 (unsigned long long)r->data_start, (unsigned long long)h,
                 (unsigned long long)ck->hdr_stored);
}

/* Per type id: tensors that could not be decoded (deep) and the first one. */
struct undecoded {
    uint64_t count[GGUF_TYPE_COUNT];
    int64_t first[GGUF_TYPE_COUNT];
};

/* One sequential pass over the data blob: hash and/or decode each tensor
 * present, check the padding after it, release pages behind. */
static void scan_tensors(struct vctx *c, const struct cksum *ck, struct undecoded *und)
{
    struct verify_report *r = c->rep;
    const bool hashing = ck->algo_ok && ck->arr_ok;
    const uint64_t n = r->n_tensors;
    for (uint64_t i = 0; i < n; i++) {
        if (!gguf_tensor_in_file(c->f, i)) break; /* the rest is missing too */
        const struct gguf_tensor *t = gguf_tensor_get(c->f, i);
        const uint8_t *data = gguf_tensor_data(c->f, i);
        const struct gguf_type_info *ti = gguf_type_get(t->type);
        const struct quant_traits *qt = c->deep ? quant_traits_get(t->type) : NULL;
        if (c->deep && !qt && t->type < GGUF_TYPE_COUNT) {
            if (und->count[t->type]++ == 0) und->first[t->type] = (int64_t)i;
            r->n_tensors_not_decoded++;
        }

        if ((hashing || qt) && data && ti && ti->type_size > 0) {
            /* chunks end on block boundaries so that decoding can follow */
            uint64_t chunk = VERIFY_CHUNK_BYTES - VERIFY_CHUNK_BYTES % ti->type_size;
            uint64_t h = 0;
            XXH3_state_t st;
            const bool one_shot = t->nbytes <= VERIFY_CHUNK_BYTES;
            if (hashing && one_shot) {
                size_t len;
                if (mw_u64_to_size(t->nbytes, &len)) h = gguf_hash_tensor(data, len);
            } else if (hashing) {
                XXH3_INITSTATE(&st);
                (void)XXH3_64bits_reset(&st);
            }
            bool decoding = qt != NULL;
            for (uint64_t pos = 0; pos < t->nbytes;) {
                const uint64_t len = min_u64(chunk, t->nbytes - pos);
                if (hashing && !one_shot) (void)XXH3_64bits_update(&st, data + pos, (size_t)len);
                if (decoding) decoding = verify__deep_range(c, i, qt, pos, pos + len);
                pos += len;
                verify__release_below(c, t->file_off + pos, false);
            }
            if (hashing && !one_shot) h = XXH3_64bits_digest(&st);
            if (qt) {
                if (decoding) r->n_tensors_decoded++;
                else r->n_tensors_nonfinite++;
            }
            if (hashing) {
                const uint64_t want = mw_le64(ck->arr + 8 * i);
                r->n_tensors_hashed++;
                if (h != want) {
                    r->n_tensors_hash_bad++;
                    if (r->checksums == VERIFY_CK_OK) r->checksums = VERIFY_CK_MISMATCH;
                    verify__item(c, VERIFY_ERROR, MW_E_CHECKSUM, t->file_off, (int64_t)i, NULL,
                                 "checksum mismatch: %llu data byte%s hash to 0x%016llx, "
                                 GGUF_KEY_CK_TENSORS "[%llu] says 0x%016llx",
                                 (unsigned long long)t->nbytes, plural(t->nbytes),
                                 (unsigned long long)h, (unsigned long long)i,
                                 (unsigned long long)want);
                }
            }
        }

        /* padding after this tensor up to the next one / the blob's end */
        const uint64_t next = i + 1 < n ? gguf_tensor_get(c->f, i + 1)->file_off : r->data_end;
        const uint64_t o = first_nonzero(c, t->file_off + t->nbytes, next);
        if (o != UINT64_MAX)
            verify__item(c, VERIFY_ERROR, MW_E_FORMAT, o, (int64_t)i, NULL,
                         "padding after the tensor data must be zero, found 0x%02x at byte %llu "
                         "of %llu padding bytes",
                         c->base[o], (unsigned long long)(o - (t->file_off + t->nbytes)),
                         (unsigned long long)(next - (t->file_off + t->nbytes)));
        verify__release_below(c, next, false);
    }
}

static void note_undecoded(struct vctx *c, const struct undecoded *und)
{
    for (uint32_t t = 0; t < GGUF_TYPE_COUNT; t++) {
        if (und->count[t] == 0) continue;
        const struct gguf_type_info *ti = gguf_type_get(t);
        verify__item(c, VERIFY_NOTE, MW_OK, MW_ERR_OFF_NONE, und->first[t], NULL,
                     "not decoded: no %s decoder yet (%llu tensor%s of this type, this is the "
                     "first)",
                     ti && ti->name ? ti->name : "?", (unsigned long long)und->count[t],
                     und->count[t] == 1 ? "" : "s");
    }
}

static void check_trailing(struct vctx *c)
{
    struct verify_report *r = c->rep;
    if (c->size <= r->data_end) return;
    r->trailing_bytes = c->size - r->data_end;
    verify__item(c, VERIFY_WARNING, MW_E_FORMAT, r->data_end, -1, NULL,
                 "%llu byte%s after the end of the padded data blob (not part of the GGUF "
                 "layout; loaders ignore them)",
                 (unsigned long long)r->trailing_bytes, plural(r->trailing_bytes));
}

static void record_open_error(struct vctx *c, const struct mw_err *err)
{
    verify__item(c, VERIFY_ERROR, err->code, err->off, -1, err->where, "%s",
                 err->msg[0] ? err->msg : mw_status_msg(err->code));
}

/* Open base[0, size) with the reader and run every check. */
static void run(struct vctx *c, const void *base, uint64_t size, const char *name)
{
    struct verify_report *r = c->rep;
    static const uint8_t empty[1];
    c->base = base ? base : empty;
    c->size = size;
    r->file_size = size;

    struct mw_err err;
    mw_err_clear(&err);
    struct gguf_file *f = NULL;
    enum mw_status s = gguf_open_mem(c->base, size, name, GGUF_OPEN_ALLOW_SHORT, &f, &err);
    if (s != MW_OK) {
        if (err.code == MW_OK) MW_FAIL(&err, s, MW_ERR_OFF_NONE, "%s", mw_status_msg(s));
        record_open_error(c, &err);
        gguf_close(f);
        return;
    }
    c->f = f;
    r->header_ok = true;
    r->version = gguf_version(f);
    r->n_kv = gguf_kv_count(f);
    r->n_tensors = gguf_tensor_count(f);
    r->alignment = gguf_alignment(f);
    r->data_start = gguf_data_start(f);
    r->data_end = gguf_data_end(f);
    for (uint64_t i = 0; i < r->n_tensors; i++) {
        uint64_t sum;
        if (mw_add_u64(r->data_bytes, gguf_tensor_get(f, i)->nbytes, &sum)) r->data_bytes = sum;
    }

    verify__advise_sequential(c);
    check_bounds(c);
    check_pre_blob_padding(c);
    struct cksum ck;
    check_cksum_keys(c, &ck);
    check_header_hash(c, &ck);
    struct undecoded und;
    memset(&und, 0, sizeof und);
    scan_tensors(c, &ck, &und);
    note_undecoded(c, &und);
    check_trailing(c);

    c->f = NULL;
    gguf_close(f);
}

static void start(struct vctx *c, struct verify_report *rep, const char *name,
                  const struct verify_opts *opts)
{
    memset(rep, 0, sizeof *rep);
    rep->status = MW_OK;
    snprintf(rep->path, sizeof rep->path, "%s", name ? name : "");
    memset(c, 0, sizeof *c);
    c->rep = rep;
    c->max_items = opts && opts->max_items ? opts->max_items : VERIFY_DEFAULT_MAX_ITEMS;
    c->deep = opts && opts->deep;
    rep->deep = c->deep;
}

enum mw_status verify_mem(const void *buf, uint64_t size, const char *name,
                          const struct verify_opts *opts, struct verify_report *rep)
{
    struct vctx c;
    start(&c, rep, name, opts);
    run(&c, buf, size, name ? name : "");
    return rep->status;
}

enum mw_status verify_file(const char *path, const struct verify_opts *opts,
                           struct verify_report *rep)
{
    struct vctx c;
    start(&c, rep, path, opts);
    struct mw_map m;
    struct mw_err err;
    mw_err_clear(&err);
    if (mw_map_open(&m, path, &err) != MW_OK) {
        record_open_error(&c, &err);
        return rep->status;
    }
    const long pg = sysconf(_SC_PAGESIZE);
    c.page = pg > 0 && (pg & (pg - 1)) == 0 ? (uint64_t)pg : 0;
    c.mapped = m.data != NULL;
    run(&c, m.data, m.size, path);
    mw_map_close(&m);
    return rep->status;
}
