/* tools/json_writer.c — see json_writer.h. */
#include "tools/json_writer.h"

#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

void jw_init(struct jw *w, FILE *out)
{
    w->out = out;
    w->depth = 0;
    w->ok = true;
    w->after_key = false;
    for (int i = 0; i < JW_MAX_DEPTH; i++) {
        w->n_items[i] = false;
        w->inline_[i] = false;
    }
}

bool jw_ok(const struct jw *w) { return w->ok && !ferror(w->out); }

static void indent(struct jw *w)
{
    fputc('\n', w->out);
    for (int i = 0; i < w->depth; i++) fputs("  ", w->out);
}

/* Separator and indentation before a value (or a key). */
static void before_value(struct jw *w)
{
    if (w->after_key) {
        w->after_key = false;
        return;
    }
    if (w->depth == 0) return;
    const int d = w->depth - 1;
    if (w->n_items[d]) fputc(',', w->out);
    if (w->inline_[d]) {
        if (w->n_items[d]) fputc(' ', w->out);
    } else {
        indent(w);
    }
    w->n_items[d] = true;
}

static void open_level(struct jw *w, char ch, bool inl)
{
    before_value(w);
    if (w->depth >= JW_MAX_DEPTH) {
        w->ok = false;
        return;
    }
    fputc(ch, w->out);
    w->n_items[w->depth] = false;
    w->inline_[w->depth] = inl || (w->depth > 0 && w->inline_[w->depth - 1]);
    w->depth++;
}

static void close_level(struct jw *w, char ch)
{
    if (w->depth <= 0 || w->after_key) {
        w->ok = false;
        return;
    }
    w->depth--;
    if (w->n_items[w->depth] && !w->inline_[w->depth]) indent(w);
    fputc(ch, w->out);
}

void jw_obj_begin(struct jw *w) { open_level(w, '{', false); }
void jw_obj_end(struct jw *w) { close_level(w, '}'); }
void jw_arr_begin(struct jw *w) { open_level(w, '[', false); }
void jw_arr_begin_inline(struct jw *w) { open_level(w, '[', true); }
void jw_arr_end(struct jw *w) { close_level(w, ']'); }

size_t jw_utf8_len(const unsigned char *s, size_t n)
{
    if (n == 0) return 0;
    const unsigned char c = s[0];
    size_t len;
    uint32_t cp;
    if (c < 0x80) return 1;
    if (c >= 0xc2 && c <= 0xdf) len = 2, cp = c & 0x1f;
    else if (c >= 0xe0 && c <= 0xef) len = 3, cp = c & 0x0f;
    else if (c >= 0xf0 && c <= 0xf4) len = 4, cp = c & 0x07;
    else return 0;
    if (len > n) return 0;
    for (size_t i = 1; i < len; i++) {
        if ((s[i] & 0xc0) != 0x80) return 0;
        cp = (cp << 6) | (s[i] & 0x3f);
    }
    /* overlong, surrogates, beyond U+10FFFF */
    if ((len == 3 && cp < 0x800) || (len == 4 && (cp < 0x10000 || cp > 0x10ffff)) ||
        (cp >= 0xd800 && cp <= 0xdfff))
        return 0;
    return len;
}

static void put_string(struct jw *w, const unsigned char *s, size_t n)
{
    FILE *o = w->out;
    fputc('"', o);
    for (size_t i = 0; i < n;) {
        const unsigned char c = s[i];
        if (c == '"' || c == '\\') {
            fputc('\\', o);
            fputc(c, o);
            i++;
        } else if (c < 0x20) {
            switch (c) {
            case '\n': fputs("\\n", o); break;
            case '\r': fputs("\\r", o); break;
            case '\t': fputs("\\t", o); break;
            case '\b': fputs("\\b", o); break;
            case '\f': fputs("\\f", o); break;
            default: fprintf(o, "\\u%04x", c); break;
            }
            i++;
        } else if (c < 0x80) {
            fputc(c, o);
            i++;
        } else {
            const size_t len = jw_utf8_len(s + i, n - i);
            if (len == 0) {
                fputs("\\ufffd", o);
                i++;
            } else {
                fwrite(s + i, 1, len, o);
                i += len;
            }
        }
    }
    fputc('"', o);
}

void jw_key(struct jw *w, const char *key)
{
    if (w->depth == 0 || w->after_key) {
        w->ok = false;
        return;
    }
    before_value(w);
    put_string(w, (const unsigned char *)key, strlen(key));
    fputs(": ", w->out);
    w->after_key = true;
}

void jw_strn(struct jw *w, const void *s, size_t n)
{
    before_value(w);
    put_string(w, s, n);
}

void jw_str(struct jw *w, const char *s)
{
    if (!s) {
        jw_null(w);
        return;
    }
    jw_strn(w, s, strlen(s));
}

void jw_u64(struct jw *w, uint64_t v)
{
    before_value(w);
    fprintf(w->out, "%" PRIu64, v);
}

void jw_i64(struct jw *w, int64_t v)
{
    before_value(w);
    fprintf(w->out, "%" PRId64, v);
}

char *jw_fmt_float(char *buf, size_t n, double v, bool single)
{
    if (n == 0) return buf;
    if (isnan(v)) {
        snprintf(buf, n, "nan");
        return buf;
    }
    if (isinf(v)) {
        snprintf(buf, n, v < 0 ? "-inf" : "inf");
        return buf;
    }
    const int max_prec = single ? 9 : 17;
    for (int prec = 6; prec <= max_prec; prec++) {
        snprintf(buf, n, "%.*g", prec, v);
        const bool same = single ? strtof(buf, NULL) == (float)v : strtod(buf, NULL) == v;
        if (same) break;
    }
    return buf;
}

void jw_f64(struct jw *w, double v)
{
    if (!isfinite(v)) {
        jw_null(w);
        return;
    }
    char buf[40];
    before_value(w);
    fputs(jw_fmt_float(buf, sizeof buf, v, false), w->out);
}

void jw_f32(struct jw *w, float v)
{
    if (!isfinite(v)) {
        jw_null(w);
        return;
    }
    char buf[40];
    before_value(w);
    fputs(jw_fmt_float(buf, sizeof buf, v, true), w->out);
}

void jw_bool(struct jw *w, bool v)
{
    before_value(w);
    fputs(v ? "true" : "false", w->out);
}

void jw_null(struct jw *w)
{
    before_value(w);
    fputs("null", w->out);
}

void jw_kv_str(struct jw *w, const char *key, const char *s)
{
    jw_key(w, key);
    jw_str(w, s);
}

void jw_kv_u64(struct jw *w, const char *key, uint64_t v)
{
    jw_key(w, key);
    jw_u64(w, v);
}

void jw_kv_i64(struct jw *w, const char *key, int64_t v)
{
    jw_key(w, key);
    jw_i64(w, v);
}

void jw_kv_f64(struct jw *w, const char *key, double v)
{
    jw_key(w, key);
    jw_f64(w, v);
}

void jw_kv_bool(struct jw *w, const char *key, bool v)
{
    jw_key(w, key);
    jw_bool(w, v);
}

void jw_end(struct jw *w)
{
    if (w->depth != 0 || w->after_key) w->ok = false;
    fputc('\n', w->out);
}
