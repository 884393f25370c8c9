/* hf/hf_files.c — the small file helpers the hf/ sources share: path join,
 * existence, basename, and reading a small file whole (a FIFO or other
 * non-regular file is refused without blocking). */
#define _POSIX_C_SOURCE 200809L
#include "hf/hf_int.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

char *hf__util_path_join(const char *dir, const char *name)
{
    size_t a = strlen(dir), b = strlen(name);
    while (a > 1 && dir[a - 1] == '/') a--;
    if (a > SIZE_MAX - b - 2) return NULL;
    char *p = malloc(a + b + 2);
    if (!p) return NULL;
    memcpy(p, dir, a);
    p[a] = '/';
    memcpy(p + a + 1, name, b);
    p[a + b + 1] = '\0';
    return p;
}

bool hf__util_exists(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0;
}

void hf__util_basename(const char *path, char *buf, size_t n)
{
    if (n == 0) return;
    size_t len = strlen(path);
    while (len > 1 && path[len - 1] == '/') len--;
    size_t start = len;
    while (start > 0 && path[start - 1] != '/') start--;
    size_t k = len - start;
    if (k >= n) k = n - 1;
    memcpy(buf, path + start, k);
    buf[k] = '\0';
    if (k == 0 && n > 1) snprintf(buf, n, "%s", len ? "/" : "");
}

enum mw_status hf__util_read_file(const char *path, uint64_t max, char **buf, size_t *len,
                             struct mw_err *err)
{
    *buf = NULL;
    *len = 0;
    mw_err_set_path(err, path);
    /* open(O_NONBLOCK) + fdopen rather than fopen: fopen of a FIFO planted
     * as config.json (or tokenizer.json) blocks until a writer appears, i.e.
     * forever; this way the S_ISREG check below rejects it at once. */
    const int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
    FILE *f = fd >= 0 ? fdopen(fd, "rb") : NULL;
    if (!f) {
        const int e = errno;
        if (fd >= 0) close(fd);
        if (e == ENOENT) return MW_FAIL(err, MW_E_FORMAT, MW_ERR_OFF_NONE, "file does not exist");
        return MW_FAIL(err, MW_E_IO, MW_ERR_OFF_NONE, "cannot open: %s", strerror(e));
    }
    struct stat st;
    if (fstat(fileno(f), &st) != 0 || !S_ISREG(st.st_mode)) {
        fclose(f);
        return MW_FAIL(err, MW_E_FORMAT, MW_ERR_OFF_NONE, "not a regular file");
    }
    if ((uint64_t)st.st_size > max) {
        fclose(f);
        return MW_FAIL(err, MW_E_FORMAT, MW_ERR_OFF_NONE,
                       "file is %llu bytes, more than the %llu this file may have",
                       (unsigned long long)st.st_size, (unsigned long long)max);
    }
    size_t n = (size_t)st.st_size;
    char *p = malloc(n + 1);
    if (!p) {
        fclose(f);
        return MW_FAIL(err, MW_E_NOMEM, MW_ERR_OFF_NONE, "cannot allocate %zu bytes", n + 1);
    }
    size_t got = n ? fread(p, 1, n, f) : 0;
    int bad = ferror(f);
    fclose(f);
    if (bad || got != n) {
        free(p);
        return MW_FAIL(err, MW_E_IO, MW_ERR_OFF_NONE, "read error");
    }
    p[n] = '\0';
    *buf = p;
    *len = n;
    return MW_OK;
}
