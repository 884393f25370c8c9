/*
 * core/mw_mem.h — how much memory this process may use: the default bound
 * of calibration (`memwall calib`, `quant --corpus`) when --max-memory is
 * not given, and `memwall plan`'s "does this machine have it".
 *
 * The memory available is the smallest of
 *  - MemAvailable in /proc/meminfo (the kernel's estimate of what can be
 *    allocated without swapping: free memory plus reclaimable page cache);
 *  - for cgroup v2, memory.max - memory.current of the process's cgroup and
 *    of each ancestor that sets a limit (the path from /proc/self/cgroup's
 *    "0::" line, below /sys/fs/cgroup);
 *  - for cgroup v1, memory.limit_in_bytes - memory.usage_in_bytes of the
 *    memory controller's cgroup and its ancestors (below
 *    /sys/fs/cgroup/memory; limits of 2^60 bytes or more mean none).
 * The environment variable MW_MEMAVAILABLE (a size: 400M, 8G, 2.5e9)
 * stands in for all of them: for tests, and for containers whose limit the
 * process cannot see. A file that is missing, unreadable or malformed is
 * skipped (never an error); when none gives a figure there is no default
 * bound. A malformed MW_MEMAVAILABLE is MW_E_USAGE.
 *
 * The bound is that figure minus a margin for what calibration's plan does
 * not count: allocator overhead, thread stacks, OpenBLAS's buffers, the
 * resident pages of the mapped model, other processes' growth.
 * Margin = an eighth of the figure, at least 64 MiB and at most 2 GiB
 * (mw_mem_margin); a figure not above its margin gives a bound of 1 byte,
 * which no run meets (the run then fails naming the bytes it needs).
 *
 * Reads files only; no global state; Linux paths (elsewhere: no figure).
 */
#ifndef MW_MEM_H
#define MW_MEM_H

#include "core/mw.h"

enum mw_mem_source {
    MW_MEM_SRC_NONE = 0, /* nothing read: no default bound */
    MW_MEM_SRC_ENV,      /* MW_MEMAVAILABLE */
    MW_MEM_SRC_MEMINFO,  /* MemAvailable */
    MW_MEM_SRC_CGROUP2,  /* a cgroup v2 memory.max - memory.current */
    MW_MEM_SRC_CGROUP1,  /* a cgroup v1 memory.limit_in_bytes - memory.usage_in_bytes */
};

struct mw_mem_avail {
    uint64_t bytes;            /* the memory available (0 with MW_MEM_SRC_NONE) */
    enum mw_mem_source source; /* which figure gave bytes (the smallest) */
    uint64_t meminfo;          /* MemAvailable (0: not read) */
    uint64_t cgroup;           /* the cgroup's room (0: no limit or none read) */
    char from[300];            /* what gave bytes, for the log: "MemAvailable in
                                * /proc/meminfo", "memory.max - memory.current in
                                * /sys/fs/cgroup/x", "MW_MEMAVAILABLE", "" */
};

/* Where to read; NULL fields and a NULL struct: the real ones. */
struct mw_mem_roots {
    const char *proc;     /* "/proc" */
    const char *cgroup;   /* "/sys/fs/cgroup" */
    bool env_set;         /* use env below instead of getenv("MW_MEMAVAILABLE") */
    const char *env;      /* MW_MEMAVAILABLE's value (NULL: unset) */
};

#define MW_MEM_ENV "MW_MEMAVAILABLE"
#define MW_MEM_MARGIN_MIN ((uint64_t)64 << 20)
#define MW_MEM_MARGIN_MAX ((uint64_t)2 << 30)

/* The memory available to this process (see the top). Errors: MW_E_USAGE
 * (MW_MEMAVAILABLE is not a size). */
enum mw_status mw_mem_available(const struct mw_mem_roots *r, struct mw_mem_avail *out,
                                struct mw_err *err);

/* The margin kept off `avail` (see the top). */
uint64_t mw_mem_margin(uint64_t avail);
/* The default bound: av->bytes minus its margin, 1 when nothing is left;
 * 0 (no bound) when no figure was read (MW_MEM_SRC_NONE). */
uint64_t mw_mem_bound(const struct mw_mem_avail *av);

/* Short name of a source for logs and JSON: "none", "MW_MEMAVAILABLE",
 * "MemAvailable", "cgroup v2", "cgroup v1". */
const char *mw_mem_source_name(enum mw_mem_source s);

#endif /* MW_MEM_H */
