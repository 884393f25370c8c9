/* core/mw_core.c — error records, bounded reader, f16/bf16, mmap. */
#define _GNU_SOURCE
#include "core/mw.h"

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

static const char *const status_names[] = {
#define MW__NAME(name, exitc, msg) #name,
    MW_STATUS_MAP(MW__NAME)
#undef MW__NAME
};
static const char *const status_msgs[] = {
#define MW__MSG(name, exitc, msg) msg,
    MW_STATUS_MAP(MW__MSG)
#undef MW__MSG
};
static const int status_exit[] = {
#define MW__EXIT(name, exitc, msg) exitc,
    MW_STATUS_MAP(MW__EXIT)
#undef MW__EXIT
};

double mw_now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

const char *mw_status_name(enum mw_status s)
{
    return ((unsigned)s < MW_STATUS_COUNT) ? status_names[s] : "E_UNKNOWN";
}

const char *mw_status_msg(enum mw_status s)
{
    return ((unsigned)s < MW_STATUS_COUNT) ? status_msgs[s] : "unknown error";
}

int mw_status_exit_code(enum mw_status s)
{
    return ((unsigned)s < MW_STATUS_COUNT) ? status_exit[s] : 3;
}

void mw_err_clear(struct mw_err *err)
{
    if (!err) return;
    memset(err, 0, sizeof *err);
    err->code = MW_OK;
    err->off = MW_ERR_OFF_NONE;
}

void mw_err_set_path(struct mw_err *err, const char *path)
{
    if (!err) return;
    snprintf(err->path, sizeof err->path, "%s", path ? path : "");
}

void mw_err_set_where(struct mw_err *err, const char *fmt, ...)
{
    if (!err) return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err->where, sizeof err->where, fmt, ap);
    va_end(ap);
}

enum mw_status mw__fail(struct mw_err *err, enum mw_status code, uint64_t off,
                        const char *src_file, int src_line, const char *fmt, ...)
{
    if (!err) return code;
    err->code = code;
    err->off = off;
    err->src_file = src_file;
    err->src_line = src_line;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err->msg, sizeof err->msg, fmt, ap);
    va_end(ap);
    return code;
}

char *mw_err_format(const struct mw_err *err, char *buf, size_t n)
{
    if (n == 0) return buf;
    buf[0] = 0;
    if (!err) return buf;
    size_t used = 0;
#define APPEND(...)                                                        \
    do {                                                                   \
        if (used < n) {                                                    \
            int k_ = snprintf(buf + used, n - used, __VA_ARGS__);          \
            if (k_ > 0) used += (size_t)k_;                                \
        }                                                                  \
    } while (0)
    if (err->path[0]) APPEND("%s: ", err->path);
    if (err->off != MW_ERR_OFF_NONE)
        APPEND("offset %llu (0x%llx): ", (unsigned long long)err->off,
               (unsigned long long)err->off);
    if (err->where[0]) APPEND("%s: ", err->where);
    APPEND("%s [%s]", err->msg[0] ? err->msg : mw_status_msg(err->code),
           mw_status_name(err->code));
#undef APPEND
    return buf;
}

enum mw_status mw_rd_need(struct mw_rd *r, uint64_t n, const char *what)
{
    if (r->pos > r->size || n > r->size - r->pos)
        return MW_FAIL(r->err, MW_E_TRUNC, r->pos,
                       "reading %s: need %llu bytes, %llu remain (truncated)", what,
                       (unsigned long long)n,
                       (unsigned long long)(r->pos > r->size ? 0 : r->size - r->pos));
    return MW_OK;
}

enum mw_status mw_rd_bytes(struct mw_rd *r, uint64_t n, const uint8_t **p, const char *what)
{
    enum mw_status s = mw_rd_need(r, n, what);
    if (s) return s;
    *p = r->base + r->pos;
    r->pos += n;
    return MW_OK;
}

enum mw_status mw_rd_u8(struct mw_rd *r, uint8_t *v, const char *what)
{
    const uint8_t *p;
    enum mw_status s = mw_rd_bytes(r, 1, &p, what);
    if (!s) *v = p[0];
    return s;
}

enum mw_status mw_rd_u16(struct mw_rd *r, uint16_t *v, const char *what)
{
    const uint8_t *p;
    enum mw_status s = mw_rd_bytes(r, 2, &p, what);
    if (!s) *v = mw_le16(p);
    return s;
}

enum mw_status mw_rd_u32(struct mw_rd *r, uint32_t *v, const char *what)
{
    const uint8_t *p;
    enum mw_status s = mw_rd_bytes(r, 4, &p, what);
    if (!s) *v = mw_le32(p);
    return s;
}

enum mw_status mw_rd_u64(struct mw_rd *r, uint64_t *v, const char *what)
{
    const uint8_t *p;
    enum mw_status s = mw_rd_bytes(r, 8, &p, what);
    if (!s) *v = mw_le64(p);
    return s;
}

/* --- f16 / bf16 --- */

static inline uint32_t f32_bits(float f)
{
    uint32_t u;
    memcpy(&u, &f, 4);
    return u;
}
static inline float bits_f32(uint32_t u)
{
    float f;
    memcpy(&f, &u, 4);
    return f;
}

float mw_f16_to_f32(uint16_t h)
{
    const uint32_t sign = (uint32_t)(h & 0x8000) << 16;
    uint32_t exp = (h >> 10) & 0x1f;
    uint32_t man = h & 0x3ff;
    if (exp == 0x1f) return bits_f32(sign | 0x7f800000u | (man << 13));
    if (exp == 0) {
        if (man == 0) return bits_f32(sign);
        /* subnormal: value = man * 2^-24, exact in f32 */
        float v = (float)man * 5.9604644775390625e-08f;
        return sign ? -v : v;
    }
    return bits_f32(sign | ((exp + 112) << 23) | (man << 13));
}

uint16_t mw_f32_to_f16(float f)
{
    const uint32_t u = f32_bits(f);
    const uint16_t sign = (uint16_t)((u >> 16) & 0x8000);
    const uint32_t a = u & 0x7fffffffu;
    if (a > 0x7f800000u) return (uint16_t)(sign | 0x7e00); /* NaN */
    if (a >= 0x477ff000u) return (uint16_t)(sign | 0x7c00); /* rounds to >= 65520: Inf */
    if (a < 0x38800000u) {
        /* result is f16 subnormal or zero: round a * 2^24 to nearest even */
        if (a < 0x33000000u) return sign; /* < 2^-25: rounds to 0 (2^-25 ties to even 0) */
        const uint32_t e = a >> 23;
        const uint32_t m = (a & 0x7fffff) | 0x800000;
        const uint32_t shift = 126 - e; /* 14 + (112 - e) + ... */
        /* value = m * 2^(e-150); want m * 2^(e-150+24) = m >> (126 - e) */
        uint32_t q = m >> shift;
        const uint32_t rem = m & ((1u << shift) - 1);
        const uint32_t half = 1u << (shift - 1);
        if (rem > half || (rem == half && (q & 1))) q++;
        return (uint16_t)(sign | q);
    }
    /* normal: rebias exponent, round mantissa to 10 bits (nearest even) */
    uint32_t r = a - 0x38000000u; /* exponent 127 -> 15 */
    const uint32_t low = r & 0x1fff;
    r >>= 13;
    if (low > 0x1000 || (low == 0x1000 && (r & 1))) r++;
    return (uint16_t)(sign | r);
}

float mw_bf16_to_f32(uint16_t h) { return bits_f32((uint32_t)h << 16); }

uint16_t mw_f32_to_bf16(float f)
{
    const uint32_t u = f32_bits(f);
    if ((u & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((u >> 16) | 0x0040);
    return (uint16_t)((u + 0x7fffu + ((u >> 16) & 1)) >> 16);
}

/* --- mmap --- */

enum mw_status mw_map_open(struct mw_map *m, const char *path, struct mw_err *err)
{
    m->data = NULL;
    m->size = 0;
    m->fd = -1;
    mw_err_set_path(err, path);
    /* O_NONBLOCK: opening a FIFO (or a tty) for reading would otherwise block
     * until a writer appears, i.e. forever for a FIFO planted in place of a
     * model file; the S_ISREG check below then rejects it. No effect on
     * regular files, which are only mapped. */
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
    if (fd < 0) return MW_FAIL(err, MW_E_IO, MW_ERR_OFF_NONE, "cannot open: %s", strerror(errno));
    struct stat st;
    if (fstat(fd, &st) != 0) {
        int e = errno;
        close(fd);
        return MW_FAIL(err, MW_E_IO, MW_ERR_OFF_NONE, "cannot stat: %s", strerror(e));
    }
    if (!S_ISREG(st.st_mode)) {
        close(fd);
        return MW_FAIL(err, MW_E_IO, MW_ERR_OFF_NONE, "not a regular file");
    }
    m->fd = fd;
    m->size = (uint64_t)st.st_size;
    if (m->size == 0) return MW_OK;
    size_t len;
    if (!mw_u64_to_size(m->size, &len)) {
        mw_map_close(m);
        return MW_FAIL(err, MW_E_IO, MW_ERR_OFF_NONE, "file too large to map");
    }
    void *p = mmap(NULL, len, PROT_READ, MAP_PRIVATE, fd, 0);
    if (p == MAP_FAILED) {
        int e = errno;
        mw_map_close(m);
        return MW_FAIL(err, MW_E_IO, MW_ERR_OFF_NONE, "cannot mmap: %s", strerror(e));
    }
    m->data = p;
    return MW_OK;
}

void mw_map_close(struct mw_map *m)
{
    if (!m) return;
    if (m->data && m->size) munmap((void *)m->data, (size_t)m->size);
    if (m->fd >= 0) close(m->fd);
    m->data = NULL;
    m->size = 0;
    m->fd = -1;
}

// --- sizes -------------------------------------------------------------------------

static bool is_digit(char c) { return c >= '0' && c <= '9'; }

bool mw_parse_size(const char *s, uint64_t *out)
{
    if (!s || !is_digit(*s)) return false;
    const char *p = s;
    uint64_t ip = 0;
    bool big = false, exact = true;
    for (; is_digit(*p); p++)
        if (!mw_mul_u64(ip, 10, &ip) || !mw_add_u64(ip, (uint64_t)(*p - '0'), &ip)) big = true;
    if (*p == '.') {
        if (!is_digit(*++p)) return false;
        while (is_digit(*p)) p++;
        exact = false;
    }
    if (*p == 'e' || *p == 'E') {
        p++;
        if (*p == '+' || *p == '-') p++;
        if (!is_digit(*p)) return false;
        while (is_digit(*p)) p++;
        exact = false;
    }
    const char *unit = p;
    int shift = 0;
    switch (*p | 0x20) {
    case 'k': shift = 10; break;
    case 'm': shift = 20; break;
    case 'g': shift = 30; break;
    case 't': shift = 40; break;
    default: break;
    }
    if (shift) {
        p++;
        if (*p == 'i' || *p == 'I') p++;
    }
    if (*p == 'b' || *p == 'B') p++;
    if (*p) return false;
    uint64_t v;
    if (exact) {
        if (big || (shift && ip > (UINT64_MAX >> shift))) return false;
        v = ip << shift;
    } else {
        char num[64];
        const size_t len = (size_t)(unit - s);
        if (len >= sizeof num) return false;
        memcpy(num, s, len);
        num[len] = 0;
        errno = 0;
        const double d = ldexp(strtod(num, NULL), shift);
        if (errno || !(d >= 1) || d >= 18446744073709551616.0) return false;
        if (!shift && d != floor(d)) return false; /* fractional bytes */
        v = (uint64_t)d;
    }
    if (v == 0) return false;
    *out = v;
    return true;
}
