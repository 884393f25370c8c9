/*
 * calib/calib_corpus.c — calibration corpora: plain text or JSONL with a
 * "text" field (cJSON), either optionally gzip'd (zlib), validated as UTF-8
 * (calib.h). Untrusted input: every error names the file, the byte offset
 * and the line; the decompressed size is capped.
 */
#include "calib/calib_int.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#define XXH_INLINE_ALL
#include <xxhash.h>

struct calib_doc {
    uint64_t off;  /* into text */
    uint64_t len;
    uint64_t line; /* 1-based */
};

struct calib_corpus {
    enum calib_corpus_fmt fmt;
    bool gzip;
    char *text;        /* TEXT: the whole input; JSONL: decoded texts back to back */
    uint64_t text_len;
    struct calib_doc *docs;
    uint64_t n_docs;
    uint64_t hash;
};

void calib_corpus_free(struct calib_corpus *c)
{
    if (!c) return;
    free(c->text);
    free(c->docs);
    free(c);
}

enum calib_corpus_fmt calib_corpus_format(const struct calib_corpus *c) { return c->fmt; }
bool calib_corpus_gzip(const struct calib_corpus *c) { return c->gzip; }
uint64_t calib_corpus_doc_count(const struct calib_corpus *c) { return c->n_docs; }
uint64_t calib_corpus_text_bytes(const struct calib_corpus *c) { return c->text_len; }
uint64_t calib_corpus_hash(const struct calib_corpus *c) { return c->hash; }

const char *calib_corpus_doc(const struct calib_corpus *c, uint64_t i, size_t *len)
{
    if (i >= c->n_docs) {
        if (len) *len = 0;
        return NULL;
    }
    if (len) *len = (size_t)c->docs[i].len;
    return c->text + c->docs[i].off;
}

uint64_t calib_corpus_doc_line(const struct calib_corpus *c, uint64_t i)
{
    return i < c->n_docs ? c->docs[i].line : 0;
}

// --- UTF-8 ---

size_t calib__utf8_check(const uint8_t *s, size_t n)
{
    size_t i = 0;
    while (i < n) {
        const uint8_t c = s[i];
        if (c < 0x80) {
            i++;
            continue;
        }
        size_t len;
        uint32_t cp, min;
        if (c >= 0xC2 && c <= 0xDF) {
            len = 2, cp = c & 0x1Fu, min = 0x80;
        } else if (c >= 0xE0 && c <= 0xEF) {
            len = 3, cp = c & 0x0Fu, min = 0x800;
        } else if (c >= 0xF0 && c <= 0xF4) {
            len = 4, cp = c & 0x07u, min = 0x10000;
        } else {
            return i; /* continuation byte, overlong lead C0/C1, or F5..FF */
        }
        if (len > n - i) return i;
        for (size_t k = 1; k < len; k++) {
            if ((s[i + k] & 0xC0) != 0x80) return i;
            cp = (cp << 6) | (s[i + k] & 0x3Fu);
        }
        if (cp < min || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return i;
        i += len;
    }
    return n;
}

static uint64_t line_of(const uint8_t *s, uint64_t off)
{
    uint64_t line = 1;
    for (uint64_t i = 0; i < off; i++) line += s[i] == '\n';
    return line;
}

// --- gzip ---

static bool is_gzip(const uint8_t *p, uint64_t n) { return n >= 2 && p[0] == 0x1f && p[1] == 0x8b; }

/* Inflate every gzip member of in[0, n) into a new buffer (*out, *out_n;
 * NUL-terminated for convenience). */
static enum mw_status gunzip(const uint8_t *in, uint64_t n, uint64_t cap, uint8_t **out,
                             uint64_t *out_n, struct mw_err *err)
{
    *out = NULL;
    *out_n = 0;
    z_stream zs;
    memset(&zs, 0, sizeof zs);
    if (inflateInit2(&zs, 15 + 16) != Z_OK)
        return MW_FAIL(err, MW_E_NOMEM, MW_ERR_OFF_NONE, "zlib: inflateInit2 failed");
    uint64_t size = n < (1u << 20) ? (uint64_t)4 << 20 : n * 4;
    if (size > cap + 1) size = cap + 1;
    uint8_t *buf = malloc((size_t)size + 1);
    uint64_t used = 0, in_pos = 0;
    enum mw_status s = MW_OK;
    if (!buf) {
        s = MW_FAIL(err, MW_E_NOMEM, MW_ERR_OFF_NONE, "%llu bytes for the corpus",
                    (unsigned long long)size);
        goto done;
    }
    for (;;) {
        const uint64_t member_start = in_pos;
        int zr = Z_OK;
        while (zr != Z_STREAM_END) {
            if (used == size) {
                if (size > cap) {
                    s = MW_FAIL(err, MW_E_UNSUPPORTED, in_pos,
                                "decompressed corpus larger than %llu bytes",
                                (unsigned long long)cap);
                    goto done;
                }
                uint64_t ns = size * 2;
                if (ns > cap + 1) ns = cap + 1;
                uint8_t *nb = realloc(buf, (size_t)ns + 1);
                if (!nb) {
                    s = MW_FAIL(err, MW_E_NOMEM, MW_ERR_OFF_NONE,
                                "%llu bytes for the decompressed corpus", (unsigned long long)ns);
                    goto done;
                }
                buf = nb;
                size = ns;
            }
            const uint64_t in_left = n - in_pos;
            zs.next_in = (Bytef *)(uintptr_t)(in + in_pos);
            zs.avail_in = in_left > (1u << 30) ? (1u << 30) : (uInt)in_left;
            zs.next_out = buf + used;
            const uint64_t out_left = size - used;
            zs.avail_out = out_left > (1u << 30) ? (1u << 30) : (uInt)out_left;
            const uInt ai = zs.avail_in, ao = zs.avail_out;
            zr = inflate(&zs, Z_NO_FLUSH);
            in_pos += ai - zs.avail_in;
            used += ao - zs.avail_out;
            if (zr == Z_STREAM_END) break;
            if (zr == Z_BUF_ERROR && zs.avail_in == 0 && in_pos == n) {
                s = MW_FAIL(err, MW_E_TRUNC, in_pos,
                            "gzip stream ends early (member at offset %llu not complete)",
                            (unsigned long long)member_start);
                goto done;
            }
            if (zr != Z_OK && zr != Z_BUF_ERROR) {
                s = MW_FAIL(err, zr == Z_MEM_ERROR ? MW_E_NOMEM : MW_E_FORMAT, in_pos,
                            "gzip data is corrupt (zlib: %s)", zs.msg ? zs.msg : "error");
                goto done;
            }
        }
        if (in_pos == n) break;
        if (!is_gzip(in + in_pos, n - in_pos)) {
            s = MW_FAIL(err, MW_E_FORMAT, in_pos,
                        "%llu bytes of trailing data after the gzip stream",
                        (unsigned long long)(n - in_pos));
            goto done;
        }
        if (inflateReset(&zs) != Z_OK) {
            s = MW_FAIL(err, MW_E_FORMAT, in_pos, "zlib: inflateReset failed");
            goto done;
        }
    }
    buf[used] = 0;
    *out = buf;
    *out_n = used;
    buf = NULL;
done:
    inflateEnd(&zs);
    free(buf);
    return s;
}

// --- parsing ---

static bool ends_with(const char *s, const char *suf)
{
    const size_t n = strlen(s), k = strlen(suf);
    return n >= k && strcmp(s + n - k, suf) == 0;
}

static enum calib_corpus_fmt auto_fmt(const char *name)
{
    char tmp[512];
    snprintf(tmp, sizeof tmp, "%s", name ? name : "");
    if (ends_with(tmp, ".gz")) tmp[strlen(tmp) - 3] = 0;
    return (ends_with(tmp, ".jsonl") || ends_with(tmp, ".JSONL")) ? CALIB_CORPUS_JSONL
                                                                : CALIB_CORPUS_TEXT;
}

static enum mw_status push_doc(struct calib_corpus *c, uint64_t *cap, uint64_t off, uint64_t len,
                               uint64_t line, struct mw_err *err)
{
    if (c->n_docs == *cap) {
        const uint64_t nc = *cap ? *cap * 2 : 64;
        struct calib_doc *nd = realloc(c->docs, (size_t)nc * sizeof *nd);
        if (!nd) return MW_FAIL(err, MW_E_NOMEM, MW_ERR_OFF_NONE, "document table");
        c->docs = nd;
        *cap = nc;
    }
    c->docs[c->n_docs++] = (struct calib_doc){.off = off, .len = len, .line = line};
    return MW_OK;
}

static enum mw_status parse_text(struct calib_corpus *c, uint8_t *data, uint64_t n,
                                 struct mw_err *err)
{
    const size_t bad = calib__utf8_check(data, (size_t)n);
    if (bad != n) {
        const uint64_t line = line_of(data, bad);
        mw_err_set_where(err, "line %llu", (unsigned long long)line);
        return MW_FAIL(err, MW_E_FORMAT, bad,
                       "invalid UTF-8 (byte 0x%02x); the corpus must be UTF-8 text",
                       data[bad]);
    }
    c->text = (char *)data;
    c->text_len = n;
    bool blank = true;
    for (uint64_t i = 0; i < n && blank; i++)
        blank = data[i] == ' ' || data[i] == '\t' || data[i] == '\n' || data[i] == '\r';
    uint64_t cap = 0;
    if (!blank) return push_doc(c, &cap, 0, n, 1, err);
    return MW_OK;
}

static enum mw_status parse_jsonl(struct calib_corpus *c, const uint8_t *data, uint64_t n,
                                  struct mw_err *err)
{
    /* decoded text is never longer than its JSON spelling */
    c->text = malloc((size_t)n + 1);
    if (!c->text) return MW_FAIL(err, MW_E_NOMEM, MW_ERR_OFF_NONE, "%llu bytes of corpus text",
                                 (unsigned long long)n);
    uint64_t cap = 0, line = 0, pos = 0, used = 0;
    while (pos < n) {
        line++;
        const uint8_t *nl = memchr(data + pos, '\n', (size_t)(n - pos));
        const uint64_t end = nl ? (uint64_t)(nl - data) : n;
        const uint64_t start = pos;
        pos = nl ? end + 1 : n;
        uint64_t a = start, b = end;
        while (a < b && (data[a] == ' ' || data[a] == '\t' || data[a] == '\r')) a++;
        while (b > a && (data[b - 1] == ' ' || data[b - 1] == '\t' || data[b - 1] == '\r')) b--;
        if (a == b) continue;
        mw_err_set_where(err, "line %llu", (unsigned long long)line);
        const size_t bad = calib__utf8_check(data + a, (size_t)(b - a));
        if (bad != b - a)
            return MW_FAIL(err, MW_E_FORMAT, a + bad, "invalid UTF-8 (byte 0x%02x)", data[a + bad]);
        const char *jend = NULL;
        cJSON *j = cJSON_ParseWithLengthOpts((const char *)data + a, (size_t)(b - a), &jend, 0);
        if (!j) {
            /* on failure cJSON points jend at the error position */
            uint64_t eoff = a;
            if (jend && jend >= (const char *)data + a && jend <= (const char *)data + b)
                eoff = (uint64_t)(jend - (const char *)data);
            return MW_FAIL(err, MW_E_FORMAT, eoff, "not valid JSON (column %llu)",
                           (unsigned long long)(eoff - start + 1));
        }
        enum mw_status s = MW_OK;
        if (jend != (const char *)data + b) {
            s = MW_FAIL(err, MW_E_FORMAT, (uint64_t)(jend - (const char *)data),
                        "trailing characters after the JSON value (one object per line)");
        } else if (!cJSON_IsObject(j)) {
            s = MW_FAIL(err, MW_E_FORMAT, a, "expected a JSON object with a \"text\" field");
        } else {
            const cJSON *t = cJSON_GetObjectItemCaseSensitive(j, "text");
            if (!t) {
                s = MW_FAIL(err, MW_E_FORMAT, a, "no \"text\" field");
            } else if (!cJSON_IsString(t) || !t->valuestring) {
                s = MW_FAIL(err, MW_E_FORMAT, a, "\"text\" is not a string");
            } else {
                const size_t len = strlen(t->valuestring);
                const size_t vbad = calib__utf8_check((const uint8_t *)t->valuestring, len);
                if (vbad != len) {
                    mw_err_set_where(err, "line %llu: text byte %zu", (unsigned long long)line,
                                     vbad);
                    s = MW_FAIL(err, MW_E_FORMAT, a,
                                "\"text\" decodes to invalid UTF-8 (a lone \\u surrogate?)");
                } else if (len > 0 && len <= n - used) {
                    memcpy(c->text + used, t->valuestring, len);
                    s = push_doc(c, &cap, used, len, line, err);
                    used += len;
                } else if (len > n - used) {
                    s = MW_FAIL(err, MW_E_FORMAT, a, "\"text\" longer than its JSON spelling");
                }
            }
        }
        cJSON_Delete(j);
        if (s) return s;
    }
    mw_err_set_where(err, "%s", "");
    c->text[used] = 0;
    c->text_len = used;
    return MW_OK;
}

enum mw_status calib__corpus_parse_capped(const void *buf, uint64_t n, const char *name,
                                          enum calib_corpus_fmt fmt, uint64_t max_bytes,
                                          struct calib_corpus **out, struct mw_err *err)
{
    *out = NULL;
    mw_err_set_path(err, name ? name : "");
    struct calib_corpus *c = calloc(1, sizeof *c);
    if (!c) return MW_FAIL(err, MW_E_NOMEM, MW_ERR_OFF_NONE, "corpus");
    c->hash = XXH3_64bits(n ? buf : "", (size_t)n);
    c->fmt = fmt == CALIB_CORPUS_AUTO ? auto_fmt(name) : fmt;
    enum mw_status s;
    uint8_t *data = NULL;
    uint64_t len = 0;
    if (is_gzip(buf, n)) {
        c->gzip = true;
        if ((s = gunzip(buf, n, max_bytes, &data, &len, err))) goto fail;
    } else {
        if (n > max_bytes) {
            s = MW_FAIL(err, MW_E_UNSUPPORTED, MW_ERR_OFF_NONE,
                        "corpus of %llu bytes is larger than the limit %llu",
                        (unsigned long long)n, (unsigned long long)max_bytes);
            goto fail;
        }
        data = malloc((size_t)n + 1);
        if (!data) {
            s = MW_FAIL(err, MW_E_NOMEM, MW_ERR_OFF_NONE, "%llu bytes of corpus",
                        (unsigned long long)n);
            goto fail;
        }
        if (n) memcpy(data, buf, (size_t)n);
        data[n] = 0;
        len = n;
    }
    if (c->fmt == CALIB_CORPUS_JSONL) {
        s = parse_jsonl(c, data, len, err);
        free(data);
        data = NULL;
    } else {
        s = parse_text(c, data, len, err);
        if (s) free(data);
        data = NULL; /* owned by c on success */
    }
    if (s) goto fail;
    if (c->n_docs == 0) {
        s = MW_FAIL(err, MW_E_VALUE, MW_ERR_OFF_NONE,
                    "empty corpus: no text to calibrate on%s",
                    c->fmt == CALIB_CORPUS_JSONL ? " (no line with a non-empty \"text\")" : "");
        goto fail;
    }
    *out = c;
    return MW_OK;
fail:
    free(data);
    calib_corpus_free(c);
    return s;
}

enum mw_status calib_corpus_parse(const void *buf, uint64_t n, const char *name,
                                  enum calib_corpus_fmt fmt, struct calib_corpus **out,
                                  struct mw_err *err)
{
    return calib__corpus_parse_capped(buf, n, name, fmt, CALIB_MAX_CORPUS_BYTES, out, err);
}

enum mw_status calib_corpus_load(const char *path, enum calib_corpus_fmt fmt,
                                 struct calib_corpus **out, struct mw_err *err)
{
    *out = NULL;
    struct mw_map map = {0};
    enum mw_status s = mw_map_open(&map, path, err);
    if (s) return s;
    s = calib_corpus_parse(map.data, map.size, path, fmt, out, err);
    mw_map_close(&map);
    return s;
}
