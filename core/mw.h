/*
 * core/mw.h — the few things every memwall module shares.
 *
 *  - enum mw_status: one list of error codes (X-macro), their names, and the
 *    process exit code each maps to (0 ok, 1 bad input / failed verification,
 *    2 usage, 3 I/O or resource).
 *  - struct mw_err: where an error happened (file, byte offset, tensor / key /
 *    JSON path) and what was expected. Filled through MW_FAIL only.
 *  - checked size arithmetic (mw_add_u64, mw_mul_u64, mw_pad_u64).
 *  - struct mw_rd: a bounded little-endian reader over untrusted bytes.
 *
 * Depends on libc only, so the phone runtime can use it. No global state.
 */
#ifndef MW_CORE_H
#define MW_CORE_H

#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define MW_VERSION_STRING "0.1.0"

/* X(name, exit_code, message). Never renumber a code once shipped. */
#define MW_STATUS_MAP(X)                                                  \
    X(OK, 0, "ok")                                                        \
    X(E_FORMAT, 1, "malformed input")                                     \
    X(E_TRUNC, 1, "truncated")                                            \
    X(E_CHECKSUM, 1, "checksum mismatch")                                 \
    X(E_UNSUPPORTED, 1, "unsupported")                                    \
    X(E_VALUE, 1, "invalid value")                                        \
    X(E_USAGE, 2, "usage")                                                \
    X(E_IO, 3, "I/O error")                                               \
    X(E_NOMEM, 3, "out of memory")                                        \
    X(E_NOSPACE, 3, "no space left / file too large")

enum mw_status {
#define MW__ENUM(name, exitc, msg) MW_##name,
    MW_STATUS_MAP(MW__ENUM)
#undef MW__ENUM
    MW_STATUS_COUNT
};

/* Short stable name ("E_TRUNC") and message ("truncated") of a status. */
const char *mw_status_name(enum mw_status s);
const char *mw_status_msg(enum mw_status s);
/* Process exit code for a status (0 ok, 1 bad input, 2 usage, 3 I/O or resource). */
int mw_status_exit_code(enum mw_status s);

/* Seconds on the monotonic clock (CLOCK_MONOTONIC), for durations only. */
double mw_now_s(void);

#define MW_ERR_OFF_NONE UINT64_MAX

struct mw_err {
    enum mw_status code;
    char path[256];  /* file the error is about ("" if none) */
    uint64_t off;    /* byte offset in that file, MW_ERR_OFF_NONE if none */
    char where[160]; /* tensor 'x' / key 'y' / JSON path / corpus line */
    char msg[320];   /* what was expected and what was found */
    const char *src_file; /* memwall source location that raised it */
    int src_line;
};

/* Reset an error record to MW_OK / empty. err may be NULL. */
void mw_err_clear(struct mw_err *err);
/* Set the path (copied, truncated to fit) and the "where" context. NULL-safe. */
void mw_err_set_path(struct mw_err *err, const char *path);
void mw_err_set_where(struct mw_err *err, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/* Record an error (err may be NULL) and return code. Use through MW_FAIL. */
enum mw_status mw__fail(struct mw_err *err, enum mw_status code, uint64_t off,
                        const char *src_file, int src_line, const char *fmt, ...)
    __attribute__((format(printf, 6, 7)));
#define MW_FAIL(err, code, off, ...) \
    mw__fail((err), (code), (off), __FILE__, __LINE__, __VA_ARGS__)

/* Format "path: offset N (0xN): where: msg [E_NAME]" into buf (always
 * NUL-terminated). Returns buf. */
char *mw_err_format(const struct mw_err *err, char *buf, size_t n);

/* A byte count as users write it, for every size option of every command
 * (--size, --fit-ram, --ram, --max-memory): an integer ("5339584"), a
 * decimal or exponent form ("1.5G", "1e9"), optionally followed by K, M,
 * G or T (binary: 1024^n; case-insensitive; "KiB", "KB", "kb" alike) or
 * "B". Plain integers are exact; decimal forms are rounded down to whole
 * bytes with a unit, and must be whole without one ("1.5" is refused).
 * False for anything else, for 0, and for 2^64 or more. */
bool mw_parse_size(const char *s, uint64_t *out);

/* --- checked arithmetic: return true on success, false on overflow --- */
static inline bool mw_add_u64(uint64_t a, uint64_t b, uint64_t *out)
{
    return !__builtin_add_overflow(a, b, out);
}
static inline bool mw_mul_u64(uint64_t a, uint64_t b, uint64_t *out)
{
    return !__builtin_mul_overflow(a, b, out);
}
/* Round x up to a multiple of align (a power of two, > 0). */
static inline bool mw_pad_u64(uint64_t x, uint64_t align, uint64_t *out)
{
    uint64_t t;
    if (align == 0 || (align & (align - 1)) != 0) return false;
    if (!mw_add_u64(x, align - 1, &t)) return false;
    *out = t & ~(align - 1);
    return true;
}
static inline bool mw_u64_to_size(uint64_t x, size_t *out)
{
    if (x > (uint64_t)SIZE_MAX) return false;
    *out = (size_t)x;
    return true;
}

/* --- bounded little-endian reader over untrusted bytes ---
 * Every getter checks the bytes remaining before touching memory and on
 * failure records MW_E_TRUNC at the current offset with `what` named. */
struct mw_rd {
    const uint8_t *base;
    uint64_t size;
    uint64_t pos;
    struct mw_err *err; /* may be NULL */
};

static inline uint64_t mw_rd_left(const struct mw_rd *r) { return r->size - r->pos; }

enum mw_status mw_rd_need(struct mw_rd *r, uint64_t n, const char *what);
enum mw_status mw_rd_u8(struct mw_rd *r, uint8_t *v, const char *what);
enum mw_status mw_rd_u16(struct mw_rd *r, uint16_t *v, const char *what);
enum mw_status mw_rd_u32(struct mw_rd *r, uint32_t *v, const char *what);
enum mw_status mw_rd_u64(struct mw_rd *r, uint64_t *v, const char *what);
/* Returns a view of n bytes at the current position and advances. */
enum mw_status mw_rd_bytes(struct mw_rd *r, uint64_t n, const uint8_t **p, const char *what);

/* Little-endian loads/stores from/to raw bytes (no alignment needed). */
static inline uint16_t mw_le16(const uint8_t *p) { return (uint16_t)(p[0] | (p[1] << 8)); }
static inline uint32_t mw_le32(const uint8_t *p)
{
    return (uint32_t)p[0] | ((uint32_t)p[1] << 8) | ((uint32_t)p[2] << 16) | ((uint32_t)p[3] << 24);
}
static inline uint64_t mw_le64(const uint8_t *p)
{
    return (uint64_t)mw_le32(p) | ((uint64_t)mw_le32(p + 4) << 32);
}
static inline void mw_put_le16(uint8_t *p, uint16_t v)
{
    p[0] = (uint8_t)v;
    p[1] = (uint8_t)(v >> 8);
}
static inline void mw_put_le32(uint8_t *p, uint32_t v)
{
    for (int i = 0; i < 4; i++) p[i] = (uint8_t)(v >> (8 * i));
}
static inline void mw_put_le64(uint8_t *p, uint64_t v)
{
    for (int i = 0; i < 8; i++) p[i] = (uint8_t)(v >> (8 * i));
}

/* --- half precision (ggml's conventions, docs/formats.md §2.1/2.2) --- */
float mw_f16_to_f32(uint16_t h);
uint16_t mw_f32_to_f16(float f);
float mw_bf16_to_f32(uint16_t h);
uint16_t mw_f32_to_bf16(float f);

/* --- memory-mapped read-only file ---
 * mw_map_open maps the whole file (an empty file gives data == NULL, size 0).
 * Errors: MW_E_IO naming the path. The caller releases with mw_map_close
 * (NULL-safe, idempotent). */
struct mw_map {
    const uint8_t *data;
    uint64_t size;
    int fd;
};
enum mw_status mw_map_open(struct mw_map *m, const char *path, struct mw_err *err);
void mw_map_close(struct mw_map *m);

#endif /* MW_CORE_H */
