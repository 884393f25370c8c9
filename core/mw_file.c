/* core/mw_file.c — atomic output files, release of mapped pages (mw_file.h). */
#define _GNU_SOURCE
#include "core/mw_file.h"

#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

enum mw_status mw_file_errno_fail(struct mw_err *err, const char *path, int e, const char *what)
{
    mw_err_set_path(err, path);
    const enum mw_status code =
        (e == ENOSPC || e == EFBIG || e == EDQUOT) ? MW_E_NOSPACE : MW_E_IO;
    return MW_FAIL(err, code, MW_ERR_OFF_NONE, "%s: %s", what, strerror(e));
}

/* Six name characters from [A-Za-z0-9], different on every try: a 64-bit mix
 * (splitmix64's finaliser) of the clock, the pid, the try number and the
 * address of the name being built. Uniqueness does not depend on it —
 * O_EXCL refuses a name that exists and the next try draws another. */
static void temp_suffix(char out[6], unsigned attempt)
{
    static const char set[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789";
    struct timespec ts = {0, 0};
    clock_gettime(CLOCK_REALTIME, &ts);
    uint64_t x = (uint64_t)ts.tv_nsec ^ ((uint64_t)ts.tv_sec << 30) ^
                 ((uint64_t)getpid() << 20) ^ ((uint64_t)attempt << 52) ^
                 (uint64_t)(uintptr_t)out;
    x += 0x9e3779b97f4a7c15ull;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
    x ^= x >> 31;
    for (int i = 0; i < 6; i++, x /= 62) out[i] = set[x % 62];
}

#define TEMP_TRIES 100

enum mw_status mw_outfile_open(struct mw_outfile *f, const char *path, struct mw_err *err)
{
    f->fd = -1;
    f->tmp = NULL;
    f->path = strdup(path);
    const size_t plen = strlen(path);
    char *tmp = plen <= SIZE_MAX - 16 ? malloc(plen + 16) : NULL;
    if (!f->path || !tmp) {
        free(tmp);
        mw_outfile_discard(f);
        mw_err_set_path(err, path);
        return MW_FAIL(err, MW_E_NOMEM, MW_ERR_OFF_NONE, "out of memory");
    }
    memcpy(tmp, path, plen);
    memcpy(tmp + plen, ".tmp.XXXXXX", 12);
    int fd = -1, e = EEXIST;
    for (unsigned k = 0; fd < 0 && e == EEXIST && k < TEMP_TRIES; k++) {
        temp_suffix(tmp + plen + 5, k);
        /* 0666: the kernel applies the umask, as for any new file */
        fd = open(tmp, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
        e = fd < 0 ? errno : 0;
    }
    if (fd < 0) {
        free(tmp);
        mw_outfile_discard(f);
        return mw_file_errno_fail(err, path, e, "cannot create temporary file");
    }
    f->fd = fd;
    f->tmp = tmp;
    return MW_OK;
}

enum mw_status mw_outfile_write(struct mw_outfile *f, const void *p, size_t n, struct mw_err *err)
{
    const uint8_t *b = p;
    while (n) {
        const ssize_t k = write(f->fd, b, n);
        if (k < 0 && errno == EINTR) continue;
        if (k <= 0) return mw_file_errno_fail(err, f->path, k < 0 ? errno : EIO, "write");
        b += k;
        n -= (size_t)k;
    }
    return MW_OK;
}

enum mw_status mw_outfile_pwrite(struct mw_outfile *f, const void *p, size_t n, uint64_t off,
                                 const char *what, struct mw_err *err)
{
    const uint8_t *b = p;
    while (n) {
        const ssize_t k = pwrite(f->fd, b, n, (off_t)off);
        if (k < 0 && errno == EINTR) continue;
        if (k <= 0) return mw_file_errno_fail(err, f->path, k < 0 ? errno : EIO, what);
        b += k;
        n -= (size_t)k;
        off += (uint64_t)k;
    }
    return MW_OK;
}

void mw_outfile_discard(struct mw_outfile *f)
{
    if (!f) return;
    if (f->fd >= 0) close(f->fd);
    if (f->tmp) unlink(f->tmp);
    free(f->tmp);
    free(f->path);
    f->fd = -1;
    f->tmp = NULL;
    f->path = NULL;
}

enum mw_status mw_outfile_commit(struct mw_outfile *f, struct mw_err *err)
{
    enum mw_status s = MW_OK;
    if (fsync(f->fd) != 0) s = mw_file_errno_fail(err, f->path, errno, "fsync");
    const int fd = f->fd;
    f->fd = -1;
    if (close(fd) != 0 && !s) s = mw_file_errno_fail(err, f->path, errno, "close");
    if (!s && rename(f->tmp, f->path) != 0) s = mw_file_errno_fail(err, f->path, errno, "rename");
    if (!s) {
        free(f->tmp);
        f->tmp = NULL; /* renamed: nothing to remove */
        /* the rename happened; the directory sync is best effort */
        const int dfd = open(dirname(f->path), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (dfd >= 0) {
            fsync(dfd);
            close(dfd);
        }
    }
    mw_outfile_discard(f);
    return s;
}

enum mw_status mw_file_write_atomic(const char *path, const void *d, size_t n, struct mw_err *err)
{
    struct mw_outfile f = MW_OUTFILE_INIT;
    enum mw_status s = mw_outfile_open(&f, path, err);
    if (s) return s;
    s = mw_outfile_write(&f, d, n, err);
    if (s) {
        mw_outfile_discard(&f);
        return s;
    }
    return mw_outfile_commit(&f, err);
}

/* Which pages to drop for [from, to): only those wholly inside it, so the
 * start is rounded UP and the end DOWN to a page boundary. The caller owns
 * the bytes of its range and nothing else: a page that straddles either end
 * also holds bytes of a neighbour (the previous or the next tensor, or the
 * header) that another thread may be reading right now or that the caller's
 * next call will read, and dropping it would make that reader fault it in
 * again from the file — wasted I/O, and under memory pressure a page that
 * bounces in and out. Rounding outward would also make the amount dropped
 * depend on neighbours' layout. The one exception is the end of the mapping:
 * the bytes past the file's last byte in its last page belong to no one, so
 * a range that ends at map_size drops that last page too (and a range that
 * starts at 0 starts on the mapping's first page boundary anyway). A partial
 * page kept at a boundary is released by whichever call later covers it
 * wholly (callers release progressively and finally the whole tensor). */
void mw_map_drop(const void *map_base, uint64_t map_size, uint64_t from, uint64_t to)
{
    if (!map_base || to > map_size) to = map_base ? map_size : 0;
    if (from >= to) return;
    const long ps = sysconf(_SC_PAGESIZE);
    if (ps <= 0) return;
    const uint64_t page = (uint64_t)ps;
    const uint64_t a = (from + page - 1) & ~(page - 1); /* from < to <= map_size: no overflow */
    const uint64_t b = to == map_size ? to : to & ~(page - 1);
    if (b <= a) return;
    size_t len;
    if (!mw_u64_to_size(b - a, &len)) return;
    /* a read-only mapping never written: the pages leave the resident set;
     * a later access faults them in again from the page cache or the file */
    (void)madvise((void *)((uintptr_t)map_base + (uintptr_t)a), len, MADV_DONTNEED);
}

enum mw_status mw_pwrite_all(int fd, const void *p, uint64_t n, uint64_t off,
                                 const char *path, struct mw_err *err)
{
    const uint8_t *b = p;
    while (n) {
        const size_t c = n > ((uint64_t)1 << 30) ? (size_t)1 << 30 : (size_t)n;
        const ssize_t w = pwrite(fd, b, c, (off_t)off);
        if (w < 0 && errno == EINTR) continue;
        if (w <= 0) {
            if (w == 0) errno = ENOSPC;
            const enum mw_status s = mw_file_errno_fail(err, path, errno, "write");
            if (err) err->off = off;
            return s;
        }
        b += w;
        off += (uint64_t)w;
        n -= (uint64_t)w;
    }
    return MW_OK;
}

enum mw_status mw_pread_all(int fd, void *p, uint64_t n, uint64_t off, const char *path,
                                struct mw_err *err)
{
    uint8_t *b = p;
    while (n) {
        const size_t c = n > ((uint64_t)1 << 30) ? (size_t)1 << 30 : (size_t)n;
        const ssize_t r = pread(fd, b, c, (off_t)off);
        if (r < 0 && errno == EINTR) continue;
        if (r < 0) {
            const enum mw_status s = mw_file_errno_fail(err, path, errno, "read");
            if (err) err->off = off;
            return s;
        }
        if (r == 0) {
            mw_err_set_path(err, path);
            return MW_FAIL(err, MW_E_TRUNC, off, "file ends early (%llu more bytes expected)",
                           (unsigned long long)n);
        }
        b += r;
        off += (uint64_t)r;
        n -= (uint64_t)r;
    }
    return MW_OK;
}
