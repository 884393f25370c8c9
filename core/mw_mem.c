/*
 * core/mw_mem.c — the memory available to this process and the default
 * bound of calibration (core/mw_mem.h): MW_MEMAVAILABLE, else the smallest
 * of /proc/meminfo's MemAvailable and the cgroup (v2 or v1) limits. Every
 * file is read whole into a small buffer and parsed defensively: anything
 * unexpected skips that figure.
 */
#define _POSIX_C_SOURCE 200809L
#include "core/mw_mem.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define MEM_FILE_MAX 65536 /* /proc/meminfo is ~1.5 KB, cgroup files a line */
#define MEM_PATH_MAX 4096
#define CG1_UNLIMITED ((uint64_t)1 << 60) /* v1 says "no limit" with ~2^63 */

/* The text of path, NUL-terminated, at most cap - 1 bytes (a longer file is
 * cut there); false if it cannot be read. */
static bool read_small(const char *path, char *buf, size_t cap)
{
    const int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return false;
    size_t n = 0;
    bool ok = true;
    while (n + 1 < cap) {
        const ssize_t r = read(fd, buf + n, cap - 1 - n);
        if (r < 0 && errno == EINTR) continue;
        if (r < 0) ok = false;
        if (r <= 0) break;
        n += (size_t)r;
    }
    close(fd);
    buf[n] = '\0';
    return ok;
}

/* A decimal u64 at *p (leading blanks skipped), *p moved past it; false if
 * there are no digits or it overflows. */
static bool parse_u64(const char **p, uint64_t *out)
{
    const char *s = *p;
    while (*s == ' ' || *s == '\t') s++;
    if (*s < '0' || *s > '9') return false;
    uint64_t v = 0;
    for (; *s >= '0' && *s <= '9'; s++)
        if (!mw_mul_u64(v, 10, &v) || !mw_add_u64(v, (uint64_t)(*s - '0'), &v)) return false;
    *p = s;
    *out = v;
    return true;
}

/* A file holding one decimal number (a trailing newline allowed). "max"
 * (cgroup v2's "no limit") and anything else: false. */
static bool read_u64_file(const char *path, uint64_t *out)
{
    char buf[64];
    if (!read_small(path, buf, sizeof buf)) return false;
    const char *p = buf;
    if (!parse_u64(&p, out)) return false;
    while (*p == ' ' || *p == '\n') p++;
    return *p == '\0';
}

/* MemAvailable of a /proc/meminfo text, in bytes ("MemAvailable:  N kB"). */
static bool meminfo_available(const char *text, uint64_t *out)
{
    static const char key[] = "MemAvailable:";
    for (const char *line = text; *line;) {
        if (strncmp(line, key, sizeof key - 1) == 0) {
            const char *p = line + sizeof key - 1;
            uint64_t kb;
            if (!parse_u64(&p, &kb)) return false;
            while (*p == ' ') p++;
            if (strncmp(p, "kB", 2) != 0) return false;
            return mw_mul_u64(kb, 1024, out);
        }
        const char *nl = strchr(line, '\n');
        if (!nl) break;
        line = nl + 1;
    }
    return false;
}

/* The cgroup path of /proc/self/cgroup's line for cgroup v2 ("0::PATH",
 * v1 false) or for v1's memory controller ("N:...,memory,...:PATH"), copied
 * into path; false if there is none. */
static bool cgroup_path(const char *text, bool v1, char *path, size_t cap)
{
    for (const char *line = text; *line;) {
        const char *nl = strchr(line, '\n');
        const size_t len = nl ? (size_t)(nl - line) : strlen(line);
        const char *c1 = memchr(line, ':', len);
        const char *c2 = c1 ? memchr(c1 + 1, ':', len - (size_t)(c1 + 1 - line)) : NULL;
        if (c2) {
            const char *ctl = c1 + 1;
            const size_t nctl = (size_t)(c2 - ctl);
            bool match = false;
            if (!v1) {
                match = nctl == 0 && c1 - line == 1 && line[0] == '0';
            } else {
                for (const char *t = ctl; t < c2;) { /* comma-separated controllers */
                    const char *e = memchr(t, ',', (size_t)(c2 - t));
                    if (!e) e = c2;
                    if (e - t == 6 && memcmp(t, "memory", 6) == 0) match = true;
                    t = e + 1;
                }
            }
            const size_t plen = len - (size_t)(c2 + 1 - line);
            if (match && plen > 0 && c2[1] == '/' && plen < cap) {
                memcpy(path, c2 + 1, plen);
                path[plen] = '\0';
                return true;
            }
        }
        if (!nl) break;
        line = nl + 1;
    }
    return false;
}

/* The least room (limit - usage) of the cgroup at base + path and its
 * ancestors up to base, for the files lim/use; *room UINT64_MAX and false
 * when no level sets a limit. *dir: the directory that gave it. */
static bool cgroup_room(const char *base, const char *path, const char *lim, const char *use,
                        uint64_t unlimited, uint64_t *room, char *dir, size_t dcap)
{
    char p[MEM_PATH_MAX], f[MEM_PATH_MAX + 64];
    bool found = false;
    *room = UINT64_MAX;
    if (snprintf(p, sizeof p, "%s", path) >= (int)sizeof p) return false;
    for (;;) {
        size_t n = strlen(p);
        while (n > 1 && p[n - 1] == '/') p[--n] = '\0';
        const char *sub = strcmp(p, "/") == 0 ? "" : p;
        uint64_t l, u;
        if (snprintf(f, sizeof f, "%s%s/%s", base, sub, lim) < (int)sizeof f &&
            read_u64_file(f, &l) && l < unlimited) {
            if (snprintf(f, sizeof f, "%s%s/%s", base, sub, use) < (int)sizeof f &&
                read_u64_file(f, &u)) {
                const uint64_t r = l > u ? l - u : 0;
                if (r < *room) {
                    *room = r;
                    if (snprintf(dir, dcap, "%s%s", base, sub) >= (int)dcap) dir[0] = '\0';
                    found = true;
                }
            }
        }
        if (!sub[0]) break;
        char *slash = strrchr(p, '/');
        if (slash == p) p[1] = '\0';
        else *slash = '\0';
    }
    return found;
}

static void take(struct mw_mem_avail *out, uint64_t bytes, enum mw_mem_source src,
                 const char *what, const char *where)
{
    if (out->source != MW_MEM_SRC_NONE && bytes >= out->bytes) return;
    out->bytes = bytes;
    out->source = src;
    if (snprintf(out->from, sizeof out->from, "%s%s%s", what, where[0] ? " in " : "", where) >=
        (int)sizeof out->from)
        memcpy(out->from + sizeof out->from - 4, "...", 4); /* a very long cgroup path */
}

enum mw_status mw_mem_available(const struct mw_mem_roots *r, struct mw_mem_avail *out,
                                struct mw_err *err)
{
    *out = (struct mw_mem_avail){0};
    const char *proc = r && r->proc ? r->proc : "/proc";
    const char *cg = r && r->cgroup ? r->cgroup : "/sys/fs/cgroup";
    const char *env = r && r->env_set ? r->env : getenv(MW_MEM_ENV);
    if (env) {
        uint64_t v;
        if (!mw_parse_size(env, &v))
            return MW_FAIL(err, MW_E_USAGE, MW_ERR_OFF_NONE,
                           "%s='%.64s': expected a size such as 400M or 8G", MW_MEM_ENV, env);
        out->bytes = v;
        out->source = MW_MEM_SRC_ENV;
        snprintf(out->from, sizeof out->from, "%s", MW_MEM_ENV);
        return MW_OK;
    }
    char *buf = malloc(MEM_FILE_MAX);
    if (!buf) return MW_FAIL(err, MW_E_NOMEM, MW_ERR_OFF_NONE, "out of memory");
    char path[MEM_PATH_MAX + 64];
    snprintf(path, sizeof path, "%s/meminfo", proc);
    if (read_small(path, buf, MEM_FILE_MAX) && meminfo_available(buf, &out->meminfo))
        take(out, out->meminfo, MW_MEM_SRC_MEMINFO, "MemAvailable", path);
    snprintf(path, sizeof path, "%s/self/cgroup", proc);
    char cgp[MEM_PATH_MAX], dir[MEM_PATH_MAX + 64], what[MEM_PATH_MAX + 200];
    if (read_small(path, buf, MEM_FILE_MAX)) {
        uint64_t room;
        if (cgroup_path(buf, false, cgp, sizeof cgp) &&
            cgroup_room(cg, cgp, "memory.max", "memory.current", UINT64_MAX, &room, dir,
                        sizeof dir)) {
            out->cgroup = room;
            snprintf(what, sizeof what, "memory.max - memory.current");
            take(out, room, MW_MEM_SRC_CGROUP2, what, dir);
        }
        char base[MEM_PATH_MAX + 16];
        snprintf(base, sizeof base, "%s/memory", cg);
        if (cgroup_path(buf, true, cgp, sizeof cgp) &&
            cgroup_room(base, cgp, "memory.limit_in_bytes", "memory.usage_in_bytes",
                        CG1_UNLIMITED, &room, dir, sizeof dir)) {
            if (!out->cgroup || room < out->cgroup) out->cgroup = room;
            snprintf(what, sizeof what, "memory.limit_in_bytes - memory.usage_in_bytes");
            take(out, room, MW_MEM_SRC_CGROUP1, what, dir);
        }
    }
    free(buf);
    return MW_OK;
}

uint64_t mw_mem_margin(uint64_t avail)
{
    const uint64_t q = avail / 8;
    if (q < MW_MEM_MARGIN_MIN) return MW_MEM_MARGIN_MIN;
    return q > MW_MEM_MARGIN_MAX ? MW_MEM_MARGIN_MAX : q;
}

uint64_t mw_mem_bound(const struct mw_mem_avail *av)
{
    if (av->source == MW_MEM_SRC_NONE) return 0;
    const uint64_t m = mw_mem_margin(av->bytes);
    return av->bytes > m ? av->bytes - m : 1;
}

const char *mw_mem_source_name(enum mw_mem_source s)
{
    switch (s) {
    case MW_MEM_SRC_ENV: return MW_MEM_ENV;
    case MW_MEM_SRC_MEMINFO: return "MemAvailable";
    case MW_MEM_SRC_CGROUP2: return "cgroup v2";
    case MW_MEM_SRC_CGROUP1: return "cgroup v1";
    case MW_MEM_SRC_NONE: break;
    }
    return "none";
}
