/*
 * llama-peer's shared helpers: errors and files, llama.cpp's log (kept for a
 * failed load's message), the choice of the CPU backend variant, model and
 * context creation, tokenization (see peer.h).
 */
#define _GNU_SOURCE
#include "peer.h"
#include "ggml-backend.h"

#include <dirent.h>
#include <dlfcn.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

int g_verbose = 0;
int g_threads = 2;
int g_no_repack = 0;
const char *g_cpu_variant = NULL;
char g_libdir[PATH_MAX];
static char g_cpu_lib[PATH_MAX]; /* the CPU backend library loaded */

/* ------------------------------------------------------------------ util */

void die(int code, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fputs("llama-peer: ", stderr);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
    exit(code);
}

/* snprintf that refuses to truncate (paths, names). */
void xsnprintf(char *dst, size_t n, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int r = vsnprintf(dst, n, fmt, ap);
    va_end(ap);
    if (r < 0 || (size_t)r >= n) die(EXIT_FAIL, "name too long: %s", dst);
}

void *xmalloc(size_t n)
{
    void *p = malloc(n ? n : 1);
    if (!p) die(EXIT_FAIL, "out of memory (%zu bytes)", n);
    return p;
}

double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

long parse_long(const char *s, const char *what, long lo, long hi)
{
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (errno || end == s || *end || v < lo || v > hi)
        die(EXIT_USAGE, "bad %s '%s' (expected an integer in [%ld, %ld])", what, s, lo, hi);
    return v;
}

/* Read a whole file; *len gets its size.  NUL-terminated for convenience. */
char *read_file(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    if (!f) die(EXIT_FAIL, "cannot open %s: %s", path, strerror(errno));
    size_t cap = 1 << 16, n = 0;
    char *buf = xmalloc(cap + 1);
    for (;;) {
        if (n == cap) {
            cap *= 2;
            buf = realloc(buf, cap + 1);
            if (!buf) die(EXIT_FAIL, "out of memory reading %s", path);
        }
        size_t r = fread(buf + n, 1, cap - n, f);
        n += r;
        if (r == 0) break;
    }
    if (ferror(f)) die(EXIT_FAIL, "error reading %s", path);
    fclose(f);
    buf[n] = 0;
    *len = n;
    return buf;
}

/* ------------------------------------------------------------- logging */

/* llama.cpp/ggml log: silent unless -v, but the last errors and warnings are
 * kept so that a failed load can say why. */
static char g_errlog[8192];
static size_t g_errlen = 0;
static enum ggml_log_level g_lastlevel = GGML_LOG_LEVEL_NONE;

static void log_append(const char *text)
{
    size_t n = strlen(text);
    if (n >= sizeof g_errlog) {
        text += n - (sizeof g_errlog - 1);
        n = sizeof g_errlog - 1;
    }
    if (g_errlen + n >= sizeof g_errlog) { /* drop the oldest half */
        size_t keep = (sizeof g_errlog) / 2 < g_errlen ? (sizeof g_errlog) / 2 : g_errlen;
        if (keep + n >= sizeof g_errlog) keep = 0;
        memmove(g_errlog, g_errlog + g_errlen - keep, keep);
        g_errlen = keep;
    }
    memcpy(g_errlog + g_errlen, text, n);
    g_errlen += n;
    g_errlog[g_errlen] = 0;
}

static void log_cb(enum ggml_log_level level, const char *text, void *ud)
{
    (void)ud;
    if (level == GGML_LOG_LEVEL_CONT) level = g_lastlevel;
    else g_lastlevel = level;
    if (g_verbose) {
        fputs(text, stderr);
        return;
    }
    if (level == GGML_LOG_LEVEL_ERROR || level == GGML_LOG_LEVEL_WARN) log_append(text);
}

void print_llama_errors(void)
{
    if (g_errlen) {
        fputs("llama.cpp said:\n", stderr);
        fputs(g_errlog, stderr);
        if (g_errlog[g_errlen - 1] != '\n') fputc('\n', stderr);
    }
}

/* ------------------------------------------------------------- backend */

/* The node-llama-cpp build uses GGML_BACKEND_DL: the CPU backend is one of
 * libggml-cpu-<variant>.so beside libggml, and ggml_backend_load_all() would
 * take the one with the highest ggml_backend_score() for this CPU.
 *
 * Numerics differ slightly between variants (SIMD width and, above all, AMX:
 * on an AMX CPU the "sapphirerapids" variant runs F16 and several quantized
 * matmuls through AMX tiles).  The llama.cpp figures in shared/anchors.md
 * were made by a build without AMX; the AVX-512 variants without AMX
 * (skylakex, icelake, zen4, ...) reproduce them to every printed digit.  So:
 *   default      best-scoring variant that does not use AMX
 *   --cpu auto   ggml's own choice (AMX included), as node-llama-cpp runs
 *   --cpu NAME   exactly libggml-cpu-NAME.so (fails if this CPU cannot run it)
 * MW_PEER_CPU_VARIANT sets the same.  The variant used is reported. */
static int variant_uses_amx(const char *file) /* pinned package: only this one */
{
    return strstr(file, "sapphirerapids") != NULL;
}

static void find_libdir(void)
{
    Dl_info info;
    union { void (*f)(void); void *p; } sym = {.f = llama_backend_init}; /* ISO C: no fn->obj cast */
    if (!dladdr(sym.p, &info) || !info.dli_fname)
        die(EXIT_FAIL, "cannot locate libllama (dladdr failed)");
    char tmp[PATH_MAX];
    if (!realpath(info.dli_fname, tmp)) snprintf(tmp, sizeof tmp, "%s", info.dli_fname);
    char *slash = strrchr(tmp, '/');
    if (slash) *slash = 0;
    else snprintf(tmp, sizeof tmp, ".");
    snprintf(g_libdir, sizeof g_libdir, "%s", tmp);
}

typedef int (*score_fn_t)(void);

static void load_cpu_backend(void)
{
    find_libdir();
    char best[PATH_MAX] = "";
    const int any = g_cpu_variant && !strcmp(g_cpu_variant, "auto");
    if (g_cpu_variant && *g_cpu_variant && !any) {
        xsnprintf(best, sizeof best, "%s/libggml-cpu-%s.so", g_libdir, g_cpu_variant);
        void *h = dlopen(best, RTLD_NOW | RTLD_LOCAL);
        if (!h) die(EXIT_FAIL, "cannot load CPU variant '%s': %s", g_cpu_variant, dlerror());
        score_fn_t sc = (score_fn_t)(uintptr_t)dlsym(h, "ggml_backend_score");
        int s = sc ? sc() : 0;
        dlclose(h);
        if (s <= 0) die(EXIT_FAIL, "CPU variant '%s' is not supported by this CPU", g_cpu_variant);
    } else {
        DIR *d = opendir(g_libdir);
        if (!d) die(EXIT_FAIL, "cannot list %s: %s", g_libdir, strerror(errno));
        int best_score = 0;
        struct dirent *e;
        while ((e = readdir(d))) {
            size_t n = strlen(e->d_name);
            if (strncmp(e->d_name, "libggml-cpu-", 12) || n < 16 || strcmp(e->d_name + n - 3, ".so"))
                continue;
            if (!any && variant_uses_amx(e->d_name)) continue;
            char path[PATH_MAX];
            xsnprintf(path, sizeof path, "%s/%s", g_libdir, e->d_name);
            void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
            if (!h) {
                if (g_verbose) fprintf(stderr, "llama-peer: skip %s: %s\n", path, dlerror());
                continue;
            }
            score_fn_t sc = (score_fn_t)(uintptr_t)dlsym(h, "ggml_backend_score");
            int s = sc ? sc() : 0;
            if (g_verbose) fprintf(stderr, "llama-peer: %s score %d\n", e->d_name, s);
            /* ties: keep the lexicographically smallest name, deterministic */
            if (s > best_score || (s == best_score && s > 0 && strcmp(path, best) < 0)) {
                best_score = s;
                xsnprintf(best, sizeof best, "%s", path);
            }
            dlclose(h);
        }
        closedir(d);
        if (best_score <= 0) die(EXIT_FAIL, "no usable libggml-cpu-*.so in %s", g_libdir);
    }
    if (!ggml_backend_load(best)) {
        print_llama_errors();
        die(EXIT_FAIL, "ggml_backend_load(%s) failed", best);
    }
    xsnprintf(g_cpu_lib, sizeof g_cpu_lib, "%s", best);
    if (ggml_backend_dev_count() == 0) die(EXIT_FAIL, "no ggml device after loading %s", best);
}

const char *cpu_variant_name(void) /* "haswell" for .../libggml-cpu-haswell.so */
{
    static char name[256];
    const char *b = strrchr(g_cpu_lib, '/');
    b = b ? b + 1 : g_cpu_lib;
    if (!strncmp(b, "libggml-cpu-", 12)) b += 12;
    xsnprintf(name, sizeof name, "%s", b);
    size_t n = strlen(name);
    if (n > 3 && !strcmp(name + n - 3, ".so")) name[n - 3] = 0;
    return name;
}

void peer_init(void)
{
    llama_log_set(log_cb, NULL);
    load_cpu_backend();
    llama_backend_init();
}

/* --------------------------------------------------------- model/context */

struct llama_model *load_model(const char *path)
{
    struct stat st;
    if (stat(path, &st) != 0) die(EXIT_LOAD, "cannot load %s: %s", path, strerror(errno));
    struct llama_model_params mp = llama_model_default_params();
    mp.n_gpu_layers = 0;
    mp.use_extra_bufts = !g_no_repack;
    struct llama_model *m = llama_model_load_from_file(path, mp);
    if (!m) {
        print_llama_errors();
        die(EXIT_LOAD, "llama.cpp failed to load %s", path);
    }
    return m;
}

struct llama_context *make_context(struct llama_model *m, uint32_t n_ctx, uint32_t n_batch,
                                   uint32_t n_seq)
{
    struct llama_context_params cp = llama_context_default_params();
    cp.n_ctx = n_ctx;
    cp.n_batch = n_batch;
    /* n_ubatch stays at the default (512), as in llama-perplexity; llama.cpp
     * clamps it to n_batch. */
    cp.n_seq_max = n_seq;
    cp.n_threads = g_threads;
    cp.n_threads_batch = g_threads;
    cp.no_perf = true;
    struct llama_context *c = llama_init_from_model(m, cp);
    if (!c) {
        print_llama_errors();
        die(EXIT_FAIL, "llama_init_from_model failed (n_ctx %u, n_batch %u)", n_ctx, n_batch);
    }
    return c;
}

llama_token *tokenize_ex(const struct llama_vocab *v, const char *text, size_t len,
                         int add_special, int parse_special, int *n_out)
{
    if (len > (size_t)INT32_MAX - 8) die(EXIT_FAIL, "text too large to tokenize");
    int cap = (int)len + 2 * (add_special ? 1 : 0) + 1;
    llama_token *t = xmalloc(sizeof *t * (size_t)cap);
    int n = llama_tokenize(v, text, (int32_t)len, t, cap, add_special != 0, parse_special != 0);
    if (n < 0) {
        if (n == INT32_MIN) die(EXIT_FAIL, "tokenization failed (too many tokens)");
        cap = -n;
        free(t);
        t = xmalloc(sizeof *t * (size_t)cap);
        n = llama_tokenize(v, text, (int32_t)len, t, cap, add_special != 0, parse_special != 0);
        if (n != cap) die(EXIT_FAIL, "tokenization failed");
    }
    *n_out = n;
    return t;
}

llama_token *tokenize(const struct llama_vocab *v, const char *text, size_t len, int add_special,
                      int *n_out)
{
    return tokenize_ex(v, text, len, add_special, 0, n_out);
}
