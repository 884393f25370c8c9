/*
 * tools/json_writer.h — a small streaming JSON writer for the front ends'
 * --json output (writing only; memwall never parses JSON here).
 *
 * Strings are escaped for JSON and made valid UTF-8 (each invalid byte
 * becomes U+FFFD), so untrusted metadata can be written as is. Non-finite
 * numbers are written as null. Nesting deeper than JW_MAX_DEPTH is a
 * programmer error (writes are then ignored and jw_ok() turns false).
 */
#ifndef MW_JSON_WRITER_H
#define MW_JSON_WRITER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#define JW_MAX_DEPTH 32

struct jw {
    FILE *out;
    int depth;
    bool ok;
    bool after_key;
    bool n_items[JW_MAX_DEPTH]; /* level has at least one item */
    bool inline_[JW_MAX_DEPTH]; /* level is written on one line */
};

void jw_init(struct jw *w, FILE *out);
/* False after misuse (unbalanced nesting) or an output error. */
bool jw_ok(const struct jw *w);

void jw_obj_begin(struct jw *w);
void jw_obj_end(struct jw *w);
void jw_arr_begin(struct jw *w);
/* An array written on one line: for short lists of scalars. */
void jw_arr_begin_inline(struct jw *w);
void jw_arr_end(struct jw *w);

void jw_key(struct jw *w, const char *key);
void jw_str(struct jw *w, const char *s);              /* NULL writes null */
void jw_strn(struct jw *w, const void *s, size_t n);   /* n bytes, may hold NULs */
void jw_u64(struct jw *w, uint64_t v);
void jw_i64(struct jw *w, int64_t v);
void jw_f64(struct jw *w, double v);                   /* %.17g; NaN/Inf -> null */
void jw_f32(struct jw *w, float v);                    /* %.9g; NaN/Inf -> null */
void jw_bool(struct jw *w, bool v);
void jw_null(struct jw *w);

/* Key and value in one call. */
void jw_kv_str(struct jw *w, const char *key, const char *s);
void jw_kv_u64(struct jw *w, const char *key, uint64_t v);
void jw_kv_i64(struct jw *w, const char *key, int64_t v);
void jw_kv_f64(struct jw *w, const char *key, double v);
void jw_kv_bool(struct jw *w, const char *key, bool v);

/* Shortest decimal text of v that reads back to the same value ("%.*g"
 * with the least precision that round-trips; single: as a float). Writes
 * "nan"/"inf"/"-inf" for non-finite values. Returns buf. */
char *jw_fmt_float(char *buf, size_t n, double v, bool single);

/* Length (1..4) of the valid UTF-8 sequence at s[0..n), or 0 if the bytes
 * there are not valid UTF-8 (overlong, surrogate, truncated, > U+10FFFF). */
size_t jw_utf8_len(const unsigned char *s, size_t n);

/* Finish the document (a newline). */
void jw_end(struct jw *w);

#endif /* MW_JSON_WRITER_H */
