/*
 * tests/faults/mw_fault.c — run a command with an injected fault, for the
 * tests/e2e/faults_*.sh scripts.
 *
 *   mw_fault [OPTIONS] -- CMD [ARG...]
 *
 * Limits set in the child before exec:
 *   --fsize N         RLIMIT_FSIZE of N bytes ("the disk fills at N")
 *   --ignore-xfsz     SIGXFSZ ignored (write() then fails with EFBIG); without
 *                     it SIGXFSZ has its default action (the kernel kills a
 *                     writer that passes the limit unless it ignores the signal
 *                     itself — memwall does)
 *
 * A trigger, and what happens when it fires (at most one of each):
 *   --watch DIR --at-size N   the files in DIR whose name contains ".tmp."
 *                             (the gguf writer's temp files) hold >= N bytes
 *                             together; N = 0: one of them exists
 *   --at-ms MS                the child has run for MS milliseconds (the
 *                             sum of its slices, measured)
 *   --at-line FILE TEXT       a complete line of FILE (text the child writes,
 *                             e.g. its stderr with `--progress=json`, one
 *                             JSON event per line) contains TEXT; FILE is read
 *                             as it grows, from where the last look stopped
 *   --kill                    send SIGKILL (--signal NAME: TERM, INT, HUP,
 *                             BUS or KILL) and wait for the child
 *   --truncate FILE LEN       truncate FILE to LEN bytes, let the child go on
 *   --unlink FILE             unlink FILE, let the child go on
 *
 * So that the trigger is seen before the child finishes, the child runs in
 * slices (--slice-us, default 500): SIGCONT, sleep, SIGSTOP, look. The child
 * is stopped while the trigger is checked and the action taken, so "the temp
 * file holds >= N bytes" is a state the child was really in, and a truncated
 * file is seen by the child's next read, whatever it was doing. With
 * --at-line the action lands within a slice of the line being written: the
 * child may have gone on for up to one slice after it.
 *
 *   --report FILE   write "triggered 0|1", "status exit N" or "status signal N"
 *                   and the temp bytes seen at the trigger, one per line
 *   --timeout S     kill the child after S seconds of slices (default 600)
 *
 * Exit status: the child's, or 128 + its signal; 125 for a usage or system
 * error of mw_fault itself. Nothing here depends on timing for correctness:
 * slices only make a trigger fire earlier or later.
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static const char usage_text[] =
    "usage: mw_fault [--fsize N] [--ignore-xfsz]\n"
    "                [--watch DIR --at-size N | --at-ms MS | --at-line FILE TEXT]\n"
    "                [--kill [--signal NAME] | --truncate FILE LEN | --unlink FILE]\n"
    "                [--slice-us US] [--timeout S] [--report FILE] -- CMD [ARG...]\n";

enum action { ACT_NONE, ACT_SIGNAL, ACT_TRUNCATE, ACT_UNLINK };

struct opts {
    long long fsize;    /* -1: no limit */
    bool ignore_xfsz;
    const char *watch;  /* directory of the temp files */
    long long at_size;  /* -1: unused */
    long long at_ms;    /* -1: unused */
    const char *line_file; /* --at-line FILE TEXT; NULL: unused */
    const char *line_text;
    enum action act;
    int sig;
    const char *file;   /* truncate / unlink target */
    long long trunc_len;
    long slice_us;
    long long timeout_s;
    const char *report;
    char **cmd;
};

static int usage(const char *msg)
{
    fprintf(stderr, "mw_fault: %s\n%s", msg, usage_text);
    return 125;
}

static bool parse_ll(const char *s, long long *out)
{
    char *end;
    errno = 0;
    long long v = strtoll(s, &end, 10);
    if (errno || end == s || *end || v < 0) return false;
    *out = v;
    return true;
}

static int parse_signal(const char *s)
{
    static const struct {
        const char *name;
        int sig;
    } t[] = {{"KILL", SIGKILL}, {"TERM", SIGTERM}, {"INT", SIGINT}, {"HUP", SIGHUP},
             {"BUS", SIGBUS}};
    for (size_t i = 0; i < sizeof t / sizeof t[0]; i++)
        if (strcmp(s, t[i].name) == 0) return t[i].sig;
    return 0;
}

/* Total bytes of DIR's "*.tmp.*" files; -1 if there is none. */
static long long temp_bytes(const char *dir)
{
    DIR *d = opendir(dir);
    if (!d) return -1;
    long long total = -1;
    struct dirent *e;
    while ((e = readdir(d))) {
        if (!strstr(e->d_name, ".tmp.")) continue;
        struct stat st;
        if (fstatat(dirfd(d), e->d_name, &st, 0) != 0 || !S_ISREG(st.st_mode)) continue;
        total = (total < 0 ? 0 : total) + (long long)st.st_size;
    }
    closedir(d);
    return total;
}

/* --at-line: FILE read on from *off; the line being read (up to its first
 * sizeof buf - 1 bytes) is kept in buf between looks. */
struct line_watch {
    long long off;
    char buf[4096];
    size_t len;
};

/* Whether a complete line of FILE read since the last look contains TEXT. */
static bool line_seen(const char *path, const char *text, struct line_watch *w)
{
    int fd = open(path, O_RDONLY);
    if (fd < 0) return false;
    bool hit = false;
    char chunk[4096];
    ssize_t n;
    while (!hit && (n = pread(fd, chunk, sizeof chunk, (off_t)w->off)) > 0) {
        w->off += n;
        for (ssize_t i = 0; i < n && !hit; i++) {
            if (chunk[i] != '\n') {
                if (w->len + 1 < sizeof w->buf) w->buf[w->len++] = chunk[i];
                continue;
            }
            w->buf[w->len] = '\0';
            hit = strstr(w->buf, text) != NULL;
            w->len = 0;
        }
    }
    close(fd);
    return hit;
}

static void sleep_us(long us)
{
    struct timespec ts = {.tv_sec = us / 1000000, .tv_nsec = (us % 1000000) * 1000};
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
    }
}

static long long now_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (long long)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

static void run_child(const struct opts *o)
{
    if (o->fsize >= 0) {
        struct rlimit rl = {.rlim_cur = (rlim_t)o->fsize, .rlim_max = (rlim_t)o->fsize};
        if (setrlimit(RLIMIT_FSIZE, &rl) != 0) {
            perror("mw_fault: setrlimit");
            _exit(125);
        }
    }
    signal(SIGXFSZ, o->ignore_xfsz ? SIG_IGN : SIG_DFL);
    /* start stopped: the parent hands out the first slice */
    raise(SIGSTOP);
    execvp(o->cmd[0], o->cmd);
    fprintf(stderr, "mw_fault: cannot run %s: %s\n", o->cmd[0], strerror(errno));
    _exit(127);
}

static int act(const struct opts *o, pid_t pid)
{
    switch (o->act) {
    case ACT_SIGNAL: return kill(pid, o->sig);
    case ACT_TRUNCATE: return truncate(o->file, (off_t)o->trunc_len);
    case ACT_UNLINK: return unlink(o->file);
    case ACT_NONE: break;
    }
    return 0;
}

int main(int argc, char **argv)
{
    struct opts o = {.fsize = -1, .at_size = -1, .at_ms = -1, .sig = SIGKILL,
                     .slice_us = 500, .timeout_s = 600};
    int i = 1;
    for (; i < argc; i++) {
        const char *a = argv[i];
        const bool has1 = i + 1 < argc, has2 = i + 2 < argc;
        if (strcmp(a, "--") == 0) {
            i++;
            break;
        } else if (strcmp(a, "--fsize") == 0 && has1) {
            if (!parse_ll(argv[++i], &o.fsize)) return usage("bad --fsize");
        } else if (strcmp(a, "--ignore-xfsz") == 0) {
            o.ignore_xfsz = true;
        } else if (strcmp(a, "--watch") == 0 && has1) {
            o.watch = argv[++i];
        } else if (strcmp(a, "--at-size") == 0 && has1) {
            if (!parse_ll(argv[++i], &o.at_size)) return usage("bad --at-size");
        } else if (strcmp(a, "--at-ms") == 0 && has1) {
            if (!parse_ll(argv[++i], &o.at_ms)) return usage("bad --at-ms");
        } else if (strcmp(a, "--at-line") == 0 && has2) {
            o.line_file = argv[++i];
            o.line_text = argv[++i];
        } else if (strcmp(a, "--kill") == 0) {
            o.act = ACT_SIGNAL;
        } else if (strcmp(a, "--signal") == 0 && has1) {
            o.act = ACT_SIGNAL;
            if (!(o.sig = parse_signal(argv[++i]))) return usage("bad --signal");
        } else if (strcmp(a, "--truncate") == 0 && has2) {
            o.act = ACT_TRUNCATE;
            o.file = argv[++i];
            if (!parse_ll(argv[++i], &o.trunc_len)) return usage("bad --truncate length");
        } else if (strcmp(a, "--unlink") == 0 && has1) {
            o.act = ACT_UNLINK;
            o.file = argv[++i];
        } else if (strcmp(a, "--slice-us") == 0 && has1) {
            long long v;
            if (!parse_ll(argv[++i], &v) || v < 1 || v > 1000000) return usage("bad --slice-us");
            o.slice_us = (long)v;
        } else if (strcmp(a, "--timeout") == 0 && has1) {
            if (!parse_ll(argv[++i], &o.timeout_s)) return usage("bad --timeout");
        } else if (strcmp(a, "--report") == 0 && has1) {
            o.report = argv[++i];
        } else {
            return usage("unknown or incomplete option");
        }
    }
    if (i >= argc) return usage("no command");
    o.cmd = argv + i;
    if (o.at_size >= 0 && !o.watch) return usage("--at-size needs --watch DIR");
    const bool trigger = o.at_size >= 0 || o.at_ms >= 0 || o.line_file;
    if (trigger && o.act == ACT_NONE) return usage("a trigger needs an action");
    if (o.act != ACT_NONE && !trigger) return usage("an action needs a trigger");

    pid_t pid = fork();
    if (pid < 0) {
        perror("mw_fault: fork");
        return 125;
    }
    if (pid == 0) run_child(&o);

    int st;
    if (waitpid(pid, &st, WUNTRACED) != pid) {
        perror("mw_fault: waitpid");
        return 125;
    }
    bool triggered = false, done = !WIFSTOPPED(st);
    struct line_watch lw = {0};
    long long seen = -1, ran_us = 0;
    const bool stepping = o.act != ACT_NONE;
    while (!done) {
        /* the child is stopped here */
        if (stepping && !triggered) {
            const long long tb = o.watch ? temp_bytes(o.watch) : -1;
            const bool fire = (o.at_size >= 0 && tb >= o.at_size) ||
                              (o.at_ms >= 0 && ran_us >= o.at_ms * 1000) ||
                              (o.line_file && line_seen(o.line_file, o.line_text, &lw));
            if (fire) {
                triggered = true;
                seen = tb;
                if (act(&o, pid) != 0) {
                    fprintf(stderr, "mw_fault: action failed: %s\n", strerror(errno));
                    kill(pid, SIGKILL);
                }
            }
        }
        if (ran_us >= o.timeout_s * 1000000) {
            fprintf(stderr, "mw_fault: timeout after %llds; killing the child\n", o.timeout_s);
            kill(pid, SIGKILL);
        }
        kill(pid, SIGCONT);
        if (!stepping || triggered) {
            /* no more slices: wait for the end */
            while (waitpid(pid, &st, 0) < 0 && errno == EINTR) {
            }
            break;
        }
        const long long t0 = now_us();
        sleep_us(o.slice_us);
        kill(pid, SIGSTOP);
        while (waitpid(pid, &st, WUNTRACED) < 0) {
            if (errno != EINTR) {
                perror("mw_fault: waitpid");
                return 125;
            }
        }
        ran_us += now_us() - t0; /* the time the child could run */
        done = !WIFSTOPPED(st);
    }

    int rc;
    char status[64];
    if (WIFEXITED(st)) {
        rc = WEXITSTATUS(st);
        snprintf(status, sizeof status, "exit %d", rc);
    } else if (WIFSIGNALED(st)) {
        rc = 128 + WTERMSIG(st);
        snprintf(status, sizeof status, "signal %d", WTERMSIG(st));
    } else {
        rc = 125;
        snprintf(status, sizeof status, "unknown");
    }
    if (o.report) {
        FILE *f = fopen(o.report, "w");
        if (!f) {
            perror("mw_fault: report");
            return 125;
        }
        fprintf(f, "triggered %d\nstatus %s\ntemp_bytes %lld\nran_us %lld\n", triggered ? 1 : 0,
                status, seen, ran_us);
        if (fclose(f) != 0) return 125;
    }
    return rc;
}
