/*
 * tools/cmd_signals.c — what the memwall front end does about signals.
 *
 * Library code never changes signal dispositions (they are process-wide
 * state); the front end does, once, in main() (cmd_signals_install):
 *
 *  - SIGXFSZ is ignored. A write past RLIMIT_FSIZE (`ulimit -f`) then fails
 *    with EFBIG and takes the ordinary error path — the gguf writer removes
 *    its temp file, the command prints what happened and exits 3 — instead
 *    of the kernel killing the process and leaving the temp file behind.
 *  - SIGBUS: inputs are mapped (gguf/, hf/ and quant/ read tensor data in
 *    place, from any worker thread; memwall-run and `memwall run` compute
 *    from the mapped weights), and a mapped file that shrinks while it is
 *    read — truncated by another process, or a failing device — faults on
 *    the next access. The handler names the file and the offset (from
 *    /proc/self/maps), removes this process's unfinished outputs and exits 3
 *    (MW_E_IO). A SIGBUS that is not on a mapped file is a bug: the outputs
 *    are removed and the signal is re-raised (core dump as usual).
 *  - SIGPIPE is ignored. A reader that stops early (`memwall inspect F |
 *    head`) then makes writes to stdout fail with EPIPE instead of killing
 *    the process (exit 141 under `set -o pipefail`): the command finishes
 *    its work, and cmd_finish_output exits quietly with the command's own
 *    status when stdout's reader is gone (cmd_stdout_reader_gone).
 *  - SIGINT, SIGTERM, SIGHUP: the unfinished outputs are removed, then the
 *    process dies of the signal as it would have.
 *
 * "Unfinished outputs" are the files this process has open for writing whose
 * name ends in ".tmp.XXXXXX": the gguf writer's temp files (gguf/gguf.h,
 * gguf_writer_open: PATH.tmp.XXXXXX beside PATH, open read-write until
 * gguf_writer_finish closes and renames it). Inputs are open read-only and
 * are never touched. Nothing appears under a final name before it is
 * complete in any case; this only keeps temp files from piling up. SIGKILL
 * cannot be caught: after it a temp file may remain (never the final name).
 *
 * memwall-run (tools/memwall_run.c) installs the same handlers through
 * cmd_signals_install_prog("memwall-run"): one implementation for both
 * binaries.
 *
 * The handlers use only async-signal-safe calls (open, read, readlink, fcntl,
 * fstat, unlink, write, _exit, sigaction, raise): no stdio, no malloc.
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include "tools/cmd.h"

#define FD_SCAN_MAX 4096 /* fds looked at for temp files */

static char g_cmd[64] = "memwall"; /* "memwall convert", set before dispatch */
static int g_io_exit = 3;           /* mw_status_exit_code(MW_E_IO) */
/* The first handler to run does the work; a second one (another thread's
 * fault, or a signal during cleanup) waits for it or just dies. Lock-free,
 * so async-signal-safe. */
static atomic_flag g_in_handler = ATOMIC_FLAG_INIT;

// --- async-signal-safe output ---------------------------------------------------

struct sbuf {
    char b[1536];
    size_t n;
};

static void sb_str(struct sbuf *s, const char *t)
{
    while (*t && s->n < sizeof s->b - 1) s->b[s->n++] = *t++;
}

static void sb_u64(struct sbuf *s, uint64_t v, unsigned base)
{
    char tmp[24];
    int k = 0;
    do {
        tmp[k++] = "0123456789abcdef"[v % base];
        v /= base;
    } while (v && k < (int)sizeof tmp);
    while (k > 0 && s->n < sizeof s->b - 1) s->b[s->n++] = tmp[--k];
}

static void sb_flush(struct sbuf *s)
{
    size_t off = 0;
    while (off < s->n) {
        ssize_t k = write(STDERR_FILENO, s->b + off, s->n - off);
        if (k <= 0) break;
        off += (size_t)k;
    }
    s->n = 0;
}

// --- temp file cleanup ----------------------------------------------------------

/* Does path end in ".tmp." + 6 characters (mkostemp's XXXXXX)? */
static bool is_temp_name(const char *path, size_t n)
{
    return n > 11 && memcmp(path + n - 11, ".tmp.", 5) == 0 &&
           memchr(path + n - 6, '/', 6) == NULL;
}

/* Unlink every regular file this process has open for writing under a
 * temp name; returns how many. */
static int remove_unfinished_outputs(void)
{
    int removed = 0;
    for (int fd = 3; fd < FD_SCAN_MAX; fd++) {
        const int fl = fcntl(fd, F_GETFL);
        if (fl < 0 || (fl & O_ACCMODE) == O_RDONLY) continue;
        struct stat st;
        if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) || st.st_nlink == 0) continue;
        struct sbuf link = {.n = 0};
        sb_str(&link, "/proc/self/fd/");
        sb_u64(&link, (uint64_t)fd, 10);
        link.b[link.n] = 0;
        char path[1024];
        const ssize_t n = readlink(link.b, path, sizeof path - 1);
        if (n <= 0 || path[0] != '/') continue;
        path[n] = 0;
        if (is_temp_name(path, (size_t)n) && unlink(path) == 0) removed++;
    }
    return removed;
}

// --- SIGBUS: which mapped file? -------------------------------------------------

static bool hexval(char c, unsigned *v)
{
    if (c >= '0' && c <= '9') *v = (unsigned)(c - '0');
    else if (c >= 'a' && c <= 'f') *v = (unsigned)(c - 'a' + 10);
    else return false;
    return true;
}

/* Parse a hex number at *p, advancing it. */
static uint64_t parse_hex(const char **p, const char *end)
{
    uint64_t v = 0;
    unsigned d;
    while (*p < end && hexval(**p, &d)) {
        v = v * 16 + d;
        (*p)++;
    }
    return v;
}

/* One /proc/self/maps line: "start-end perms offset dev inode   path".
 * True (with the path and the file offset of addr) when it maps addr from a
 * file. */
static bool maps_line_hit(const char *l, const char *end, uintptr_t addr, char *path, size_t cap,
                          uint64_t *file_off)
{
    const char *p = l;
    const uint64_t start = parse_hex(&p, end);
    if (p >= end || *p++ != '-') return false;
    const uint64_t stop = parse_hex(&p, end);
    if ((uint64_t)addr < start || (uint64_t)addr >= stop) return false;
    for (int field = 0; field < 4; field++) { /* perms offset dev inode */
        while (p < end && *p == ' ') p++;
        if (field == 1) {
            *file_off = parse_hex(&p, end) + ((uint64_t)addr - start);
            continue;
        }
        while (p < end && *p != ' ') p++;
    }
    while (p < end && *p == ' ') p++;
    if (p >= end || *p != '/') return false; /* anonymous, [heap], ... */
    size_t n = (size_t)(end - p);
    if (n >= cap) n = cap - 1;
    memcpy(path, p, n);
    path[n] = 0;
    return true;
}

static bool mapped_file_of(uintptr_t addr, char *path, size_t cap, uint64_t *file_off)
{
    const int fd = open("/proc/self/maps", O_RDONLY | O_CLOEXEC);
    if (fd < 0) return false;
    static char buf[8192]; /* only ever used by the one handler that runs */
    size_t have = 0;
    bool found = false;
    for (;;) {
        const ssize_t k = read(fd, buf + have, sizeof buf - have);
        if (k <= 0) break;
        have += (size_t)k;
        size_t start = 0;
        for (size_t i = 0; i < have && !found; i++) {
            if (buf[i] != '\n') continue;
            found = maps_line_hit(buf + start, buf + i, addr, path, cap, file_off);
            start = i + 1;
        }
        if (found) break;
        if (start == 0 && have == sizeof buf) have = 0; /* an absurd line: drop it */
        memmove(buf, buf + start, have - start);
        have -= start;
    }
    close(fd);
    return found;
}

// --- handlers -------------------------------------------------------------------

static void on_sigbus(int sig, siginfo_t *si, void *uc)
{
    (void)uc;
    if (atomic_flag_test_and_set(&g_in_handler)) { /* another thread got here first */
        for (;;) pause();
    }
    char path[1024];
    uint64_t off = 0;
    const bool mapped = si && mapped_file_of((uintptr_t)si->si_addr, path, sizeof path, &off);
    const int removed = remove_unfinished_outputs();
    struct sbuf m = {.n = 0};
    sb_str(&m, g_cmd);
    sb_str(&m, ": ");
    if (mapped) {
        sb_str(&m, path);
        sb_str(&m, ": offset ");
        sb_u64(&m, off, 10);
        sb_str(&m, " (0x");
        sb_u64(&m, off, 16);
        sb_str(&m, "): the file changed or was truncated while being read (SIGBUS)");
    } else {
        sb_str(&m, "fatal SIGBUS at address 0x");
        sb_u64(&m, (uint64_t)(uintptr_t)(si ? si->si_addr : NULL), 16);
    }
    if (removed) sb_str(&m, "; unfinished output removed");
    sb_str(&m, mapped ? " [E_IO]\n" : "\n");
    sb_flush(&m);
    if (mapped) _exit(g_io_exit);
    signal(sig, SIG_DFL); /* a bug: die of it (the access faults again) */
}

static void on_terminate(int sig)
{
    if (!atomic_flag_test_and_set(&g_in_handler)) remove_unfinished_outputs();
    signal(sig, SIG_DFL);
    raise(sig); /* delivered when this handler returns: the usual death */
}

void cmd_signals_install(const char *cmd_name)
{
    struct sbuf n = {.n = 0};
    sb_str(&n, "memwall ");
    sb_str(&n, cmd_name ? cmd_name : "");
    n.b[n.n < sizeof g_cmd ? n.n : sizeof g_cmd - 1] = 0;
    cmd_signals_install_prog(n.b);
}

void cmd_signals_install_prog(const char *prog)
{
    struct sbuf n = {.n = 0};
    sb_str(&n, prog ? prog : "memwall");
    if (n.n >= sizeof g_cmd) n.n = sizeof g_cmd - 1;
    memcpy(g_cmd, n.b, n.n);
    g_cmd[n.n] = 0;
    g_io_exit = mw_status_exit_code(MW_E_IO);
    signal(SIGXFSZ, SIG_IGN);
    signal(SIGPIPE, SIG_IGN);
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sigemptyset(&sa.sa_mask);
    sa.sa_sigaction = on_sigbus;
    sa.sa_flags = SA_SIGINFO;
    sigaction(SIGBUS, &sa, NULL);
    memset(&sa, 0, sizeof sa);
    sigemptyset(&sa.sa_mask);
    sa.sa_handler = on_terminate;
    const int term[] = {SIGINT, SIGTERM, SIGHUP};
    for (size_t i = 0; i < sizeof term / sizeof term[0]; i++) {
        struct sigaction old;
        /* keep "ignored" when started ignored (nohup, background jobs) */
        if (sigaction(term[i], NULL, &old) == 0 && old.sa_handler == SIG_IGN) continue;
        sigaction(term[i], &sa, NULL);
    }
}

bool cmd_stdout_reader_gone(void)
{
    struct stat st;
    if (fstat(STDOUT_FILENO, &st) != 0 || !(S_ISFIFO(st.st_mode) || S_ISSOCK(st.st_mode)))
        return false;
    /* a pipe's write end polls POLLERR once its last reader has closed */
    struct pollfd p = {.fd = STDOUT_FILENO, .events = POLLOUT};
    return poll(&p, 1, 0) == 1 && (p.revents & (POLLERR | POLLHUP));
}
