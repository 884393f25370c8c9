/*
 * llama-peer — a small driver over llama.cpp's C API (llama.h), linked to the
 * prebuilt CPU libraries of the npm package node-llama-cpp (pinned, see
 * tests/peer/setup.sh).  memwall's tests and benchmarks use it to check that
 * llama.cpp loads our GGUF files unchanged and scores them as llama.cpp's own
 * tools do.
 *
 *   llama-peer [-v] [--threads N] [--cpu VARIANT|auto] [--no-repack] COMMAND ...
 *
 *   ppl MODEL TEXT [--ctx 256] [--batch B] [--bytes N] [--chunks K]
 *                  [--save-logits F] [--save-logits-llamacpp F] [--kld-base F]
 *   tokenize MODEL TEXTFILE [--no-bos] [--parse-special] [--bytes N]
 *   generate MODEL PROMPT N [--stop-eog]
 *   info MODEL
 *   quantize IN OUT TYPE [--imatrix FILE] [--pure] [--allow-requantize]
 *   version
 *
 * Output is one "key value ..." record per line on stdout; diagnostics go to
 * stderr.  Exit status: 0 ok, 1 the model failed to load (llama.cpp's reason
 * is printed), 2 usage, 3 any other failure.
 *
 * The ppl command is llama-perplexity's protocol (tools/perplexity/
 * perplexity.cpp at the pinned commit), step by step: the file is read whole,
 * one trailing '\n' is dropped (as `-f` does), tokenized once with
 * add_special=true / parse_special=false; cut into n_chunk = n_tokens/ctx
 * chunks; the first token of each chunk is replaced by BOS; the chunk is
 * decoded with outputs for positions ctx/2 .. ctx-1; positions ctx/2 .. ctx-2
 * are scored against tokens ctx/2+1 .. ctx-1 with the same float/double
 * arithmetic as llama.cpp.  --batch B (default ctx, i.e. llama-perplexity
 * -c ctx -b ctx) reproduces -b B as well: B >= ctx packs B/ctx chunks per
 * decode as parallel sequences, B < ctx splits a chunk into several decodes.
 */
#define _GNU_SOURCE
#include "llama.h"
#include "ggml-backend.h"
#include "gguf.h"

#include <dirent.h>
#include <dlfcn.h>
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <time.h>

#ifndef PEER_NLC_VERSION
#define PEER_NLC_VERSION "unknown"
#endif
#ifndef PEER_LLAMA_COMMIT
#define PEER_LLAMA_COMMIT "unknown"
#endif

enum { EXIT_LOAD = 1, EXIT_USAGE = 2, EXIT_FAIL = 3 };

static int g_verbose = 0;
static int g_threads = 2;
static int g_no_repack = 0;              /* --no-repack: llama.cpp's -nr */
static const char *g_cpu_variant = NULL; /* --cpu / MW_PEER_CPU_VARIANT */
static char g_libdir[PATH_MAX];
static char g_cpu_lib[PATH_MAX];        /* the CPU backend library loaded */

/* ------------------------------------------------------------------ util */

static void die(int code, const char *fmt, ...) __attribute__((noreturn, format(printf, 2, 3)));
static void die(int code, const char *fmt, ...)
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
static void xsnprintf(char *dst, size_t n, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void xsnprintf(char *dst, size_t n, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int r = vsnprintf(dst, n, fmt, ap);
    va_end(ap);
    if (r < 0 || (size_t)r >= n) die(EXIT_FAIL, "name too long: %s", dst);
}

static void *xmalloc(size_t n)
{
    void *p = malloc(n ? n : 1);
    if (!p) die(EXIT_FAIL, "out of memory (%zu bytes)", n);
    return p;
}

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static long parse_long(const char *s, const char *what, long lo, long hi)
{
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (errno || end == s || *end || v < lo || v > hi)
        die(EXIT_USAGE, "bad %s '%s' (expected an integer in [%ld, %ld])", what, s, lo, hi);
    return v;
}

/* Read a whole file; *len gets its size.  NUL-terminated for convenience. */
static char *read_file(const char *path, size_t *len)
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

static void print_llama_errors(void)
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

static const char *cpu_variant_name(void) /* "haswell" for .../libggml-cpu-haswell.so */
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

static void peer_init(void)
{
    llama_log_set(log_cb, NULL);
    load_cpu_backend();
    llama_backend_init();
}

/* --------------------------------------------------------- model/context */

static struct llama_model *load_model(const char *path)
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

static struct llama_context *make_context(struct llama_model *m, uint32_t n_ctx, uint32_t n_batch,
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

static llama_token *tokenize_ex(const struct llama_vocab *v, const char *text, size_t len,
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

static llama_token *tokenize(const struct llama_vocab *v, const char *text, size_t len, int add_special,
                             int *n_out)
{
    return tokenize_ex(v, text, len, add_special, 0, n_out);
}

/* ------------------------------------------------------------------ ppl */

/* llama.cpp: log_softmax(n_vocab, logits, tok) -> logit[tok]-max-log(sum) */
static double nll_plain(int n_vocab, const float *logits, int tok)
{
    float max_logit = logits[0];
    for (int i = 1; i < n_vocab; ++i) max_logit = fmaxf(max_logit, logits[i]);
    double sum_exp = 0.0;
    for (int i = 0; i < n_vocab; ++i) sum_exp += expf(logits[i] - max_logit);
    return -(logits[tok] - max_logit - log(sum_exp));
}

static inline int nearest_int(float fval)
{
    float val = fval + 12582912.f;
    int i;
    memcpy(&i, &val, sizeof(int));
    return (i & 0x007fffff) - 0x00400000;
}

/* llama.cpp: the uint16 log-prob row written by --kl-divergence-base; returns
 * the NLL of tok (float arithmetic, as there). */
static double nll_llamacpp_row(int n_vocab, const float *logits, uint16_t *log_prob, int tok)
{
    float max_logit = logits[0], min_logit = logits[0];
    for (int i = 1; i < n_vocab; ++i) {
        max_logit = fmaxf(max_logit, logits[i]);
        min_logit = fminf(min_logit, logits[i]);
    }
    min_logit = fmaxf(min_logit, max_logit - 16);
    double sum_exp = 0.0;
    for (int i = 0; i < n_vocab; ++i) sum_exp += expf(logits[i] - max_logit);
    const float log_sum_exp = (float)log(sum_exp);
    const float min_log_prob = min_logit - max_logit - log_sum_exp;
    const float scale = (max_logit - min_logit) / 65535.f;
    float d[2] = {scale, min_log_prob};
    memcpy(log_prob, d, sizeof d);
    log_prob += 4;
    if (scale != 0.0f) {
        const float inv_scale = 1 / scale;
        for (int i = 0; i < n_vocab; ++i)
            log_prob[i] = logits[i] > min_logit ? (uint16_t)nearest_int(inv_scale * (logits[i] - min_logit)) : 0;
    } else {
        memset(log_prob, 0, (size_t)n_vocab * sizeof(uint16_t));
    }
    return max_logit + log_sum_exp - logits[tok];
}

struct kld_acc {
    double sum_nll, sum_nll2, sum_nll_base, sum_nll_base2;
    double sum_kld, sum_kld2, sum_p_diff2;
    double max_kld;
    size_t n_same_top, count;
};

/* llama.cpp: log_softmax(n_vocab, logits, base_log_prob, tok, kld) — against
 * a uint16 base row.  Same arithmetic (including the -16 cut-off). */
static void kld_llamacpp_row(int n_vocab, const float *logits, const uint16_t *base, int tok, struct kld_acc *k)
{
    float max_logit = logits[0];
    int imax = 0;
    for (int i = 1; i < n_vocab; ++i)
        if (logits[i] > max_logit) { max_logit = logits[i]; imax = i; }
    double sum_exp = 0.0;
    for (int i = 0; i < n_vocab; ++i) sum_exp += expf(logits[i] - max_logit);
    const float log_sum_exp = (float)log(sum_exp);
    float d[2];
    memcpy(d, base, sizeof d);
    const float scale = d[0], min_log_prob = d[1];
    base += 4;
    const float nll = max_logit + log_sum_exp - logits[tok];
    k->sum_nll += nll;
    k->sum_nll2 += (double)nll * nll;
    const float nll_base = -(scale * base[tok] + min_log_prob);
    k->sum_nll_base += nll_base;
    k->sum_nll_base2 += (double)nll_base * nll_base;
    max_logit += log_sum_exp;
    double sum = 0;
    int imax_base = -1;
    float p_log_base_max = 0;
    for (int i = 0; i < n_vocab; ++i) {
        const float p_log_base = scale * base[i] + min_log_prob;
        if (i == 0 || p_log_base > p_log_base_max) { p_log_base_max = p_log_base; imax_base = i; }
        if (p_log_base > -16.f) {
            const float p_base = expf(p_log_base);
            sum += p_base * (p_log_base - logits[i] + max_logit);
        }
    }
    k->sum_kld += sum;
    k->sum_kld2 += sum * sum;
    if (sum > k->max_kld) k->max_kld = sum;
    k->count++;
    if (imax == imax_base) k->n_same_top++;
    const float p_diff = expf(-nll) - expf(-nll_base);
    k->sum_p_diff2 += (double)p_diff * p_diff;
}

/* Exact KL(base || this) in double, from float32 logit rows of both. */
static void kld_f32_row(int n_vocab, const float *logits, const float *base, int tok, struct kld_acc *k)
{
    double mx = logits[0], mb = base[0];
    int imax = 0, imax_base = 0;
    for (int i = 1; i < n_vocab; ++i) {
        if (logits[i] > mx) { mx = logits[i]; imax = i; }
        if (base[i] > mb) { mb = base[i]; imax_base = i; }
    }
    double s = 0, sb = 0;
    for (int i = 0; i < n_vocab; ++i) {
        s += exp(logits[i] - mx);
        sb += exp(base[i] - mb);
    }
    const double lse = mx + log(s), lseb = mb + log(sb);
    double kl = 0;
    for (int i = 0; i < n_vocab; ++i) {
        const double lpb = base[i] - lseb;
        kl += exp(lpb) * (lpb - (logits[i] - lse));
    }
    if (kl < 0) kl = 0; /* rounding */
    const double nll = lse - logits[tok], nll_base = lseb - base[tok];
    k->sum_nll += nll;
    k->sum_nll2 += nll * nll;
    k->sum_nll_base += nll_base;
    k->sum_nll_base2 += nll_base * nll_base;
    k->sum_kld += kl;
    k->sum_kld2 += kl * kl;
    if (kl > k->max_kld) k->max_kld = kl;
    k->count++;
    if (imax == imax_base) k->n_same_top++;
    const double p_diff = exp(-nll) - exp(-nll_base);
    k->sum_p_diff2 += p_diff * p_diff;
}

#define F32_MAGIC "MWPEERL1"
#define LCPP_MAGIC "_logits_"

/* Logit files.
 *   float32 (--save-logits): "MWPEERL1", u32 n_ctx, u32 n_vocab, u32 n_chunk,
 *     u32 first (= n_ctx/2), i32 tokens[n_chunk*n_ctx] (as tokenized, before
 *     the BOS substitution), then per chunk (n_ctx-1-first) rows of n_vocab
 *     float32 logits: the rows of positions first .. n_ctx-2.
 *   llama.cpp (--save-logits-llamacpp): llama-perplexity's
 *     --kl-divergence-base format, byte for byte: "_logits_", u32 n_ctx,
 *     i32 n_vocab, i32 n_chunk, i32 tokens[n_chunk*n_ctx], then per chunk
 *     (n_ctx-1-n_ctx/2) rows of nv = 2*((n_vocab+1)/2)+4 uint16 (float scale,
 *     float min_log_prob, log-probs quantized to 16 bits).
 */
struct logit_file {
    FILE *f;
    int is_f32;
    uint32_t n_ctx;
    int32_t n_vocab, n_chunk;
    llama_token *tokens;
};

static void xfwrite(const void *p, size_t sz, size_t n, FILE *f, const char *path)
{
    if (fwrite(p, sz, n, f) != n) die(EXIT_FAIL, "write error on %s: %s", path, strerror(errno));
}

static void xfread(void *p, size_t sz, size_t n, FILE *f, const char *path)
{
    if (fread(p, sz, n, f) != n) die(EXIT_FAIL, "%s: truncated or unreadable", path);
}

static void open_base(struct logit_file *b, const char *path)
{
    memset(b, 0, sizeof *b);
    b->f = fopen(path, "rb");
    if (!b->f) die(EXIT_FAIL, "cannot open %s: %s", path, strerror(errno));
    char magic[8];
    xfread(magic, 1, 8, b->f, path);
    if (!memcmp(magic, F32_MAGIC, 8)) {
        uint32_t h[4];
        xfread(h, sizeof h[0], 4, b->f, path);
        b->is_f32 = 1;
        b->n_ctx = h[0];
        b->n_vocab = (int32_t)h[1];
        b->n_chunk = (int32_t)h[2];
        if (h[3] != h[0] / 2) die(EXIT_FAIL, "%s: unexpected scored range", path);
    } else if (!memcmp(magic, LCPP_MAGIC, 8)) {
        xfread(&b->n_ctx, sizeof b->n_ctx, 1, b->f, path);
        xfread(&b->n_vocab, sizeof b->n_vocab, 1, b->f, path);
        xfread(&b->n_chunk, sizeof b->n_chunk, 1, b->f, path);
    } else {
        die(EXIT_FAIL, "%s is not a logits file (neither %s nor llama.cpp's %s)", path, F32_MAGIC, LCPP_MAGIC);
    }
    if (b->n_ctx < 4 || b->n_vocab <= 0 || b->n_chunk <= 0 || b->n_ctx > (1u << 24) || b->n_chunk > (1 << 24))
        die(EXIT_FAIL, "%s: bad header", path);
    size_t nt = (size_t)b->n_ctx * (size_t)b->n_chunk;
    b->tokens = xmalloc(nt * sizeof *b->tokens);
    xfread(b->tokens, sizeof *b->tokens, nt, b->f, path);
}

struct ppl_opts {
    int ctx, batch, chunks;
    long bytes;
    const char *save_f32, *save_lcpp, *kld_base;
};

static int cmd_ppl(const char *model_path, const char *text_path, const struct ppl_opts *o)
{
    size_t len;
    char *text = read_file(text_path, &len);
    if (o->bytes >= 0 && (size_t)o->bytes < len) len = (size_t)o->bytes;
    if (len > 0 && text[len - 1] == '\n') len--; /* llama.cpp's -f drops one trailing newline */

    const double t0 = now_s();
    peer_init();
    struct llama_model *model = load_model(model_path);
    const struct llama_vocab *vocab = llama_model_get_vocab(model);
    const int n_vocab = llama_vocab_n_tokens(vocab);
    const int n_ctx = o->ctx;
    const int n_batch = o->batch > 0 ? o->batch : n_ctx;
    if (!(n_batch < n_ctx || n_batch % n_ctx == 0))
        die(EXIT_USAGE, "--batch must be below --ctx or a multiple of it (llama-perplexity's rule)");
    if (llama_vocab_get_add_eos(vocab)) die(EXIT_FAIL, "model adds EOS; llama-perplexity refuses such models");
    const int add_bos = llama_vocab_get_add_bos(vocab);

    int n_tok;
    llama_token *tokens = tokenize(vocab, text, len, 1, &n_tok);
    const int n_tok_text = n_tok;
    free(text);

    struct logit_file base = {0};
    if (o->kld_base) {
        open_base(&base, o->kld_base);
        if ((int)base.n_ctx != n_ctx)
            die(EXIT_USAGE, "%s was made with --ctx %u, not %d", o->kld_base, base.n_ctx, n_ctx);
        if (base.n_vocab != n_vocab)
            die(EXIT_FAIL, "%s has n_vocab %d, the model %d", o->kld_base, base.n_vocab, n_vocab);
        /* llama-perplexity --kl-divergence scores the base file's tokens. */
        const size_t nb = (size_t)base.n_ctx * (size_t)base.n_chunk;
        if ((size_t)n_tok < nb || memcmp(tokens, base.tokens, nb * sizeof *tokens) != 0)
            fprintf(stderr, "llama-peer: warning: the text tokenizes differently from %s; "
                            "using the base file's tokens (as llama-perplexity does)\n", o->kld_base);
        free(tokens);
        tokens = base.tokens;
        n_tok = (int)nb;
    } else if (n_tok < 2 * n_ctx) {
        die(EXIT_FAIL, "need at least %d tokens for --ctx %d, the text has %d", 2 * n_ctx, n_ctx, n_tok);
    }

    int n_chunk = n_tok / n_ctx;
    if (o->chunks > 0 && o->chunks < n_chunk) n_chunk = o->chunks;
    const int n_seq = n_batch / n_ctx > 1 ? n_batch / n_ctx : 1;
    const int num_batches = (n_ctx + n_batch - 1) / n_batch;
    const int first = n_ctx / 2;
    const int n_score = n_ctx - 1 - first;
    const int nv = 2 * ((n_vocab + 1) / 2) + 4;

    struct llama_context *ctx = make_context(model, (uint32_t)(n_ctx * n_seq),
                                             (uint32_t)(n_batch < n_ctx * n_seq ? n_batch : n_ctx * n_seq),
                                             (uint32_t)n_seq);
    const int bcap = n_batch < n_ctx * n_seq ? n_batch : n_ctx * n_seq;
    struct llama_batch batch = llama_batch_init(bcap, 0, 1);

    float *acc_logits = NULL; /* outputs gathered over several decodes when num_batches > 1 */
    if (num_batches > 1) acc_logits = xmalloc((size_t)n_ctx * (size_t)n_vocab * sizeof(float));

    FILE *f32 = NULL, *flc = NULL;
    uint16_t *lp_row = NULL;
    if (o->save_f32) {
        f32 = fopen(o->save_f32, "wb");
        if (!f32) die(EXIT_FAIL, "cannot create %s: %s", o->save_f32, strerror(errno));
        uint32_t h[4] = {(uint32_t)n_ctx, (uint32_t)n_vocab, (uint32_t)n_chunk, (uint32_t)first};
        xfwrite(F32_MAGIC, 1, 8, f32, o->save_f32);
        xfwrite(h, sizeof h[0], 4, f32, o->save_f32);
        xfwrite(tokens, sizeof *tokens, (size_t)n_chunk * (size_t)n_ctx, f32, o->save_f32);
    }
    if (o->save_lcpp) {
        flc = fopen(o->save_lcpp, "wb");
        if (!flc) die(EXIT_FAIL, "cannot create %s: %s", o->save_lcpp, strerror(errno));
        uint32_t c = (uint32_t)n_ctx;
        xfwrite(LCPP_MAGIC, 1, 8, flc, o->save_lcpp);
        xfwrite(&c, sizeof c, 1, flc, o->save_lcpp);
        xfwrite(&n_vocab, sizeof n_vocab, 1, flc, o->save_lcpp);
        xfwrite(&n_chunk, sizeof n_chunk, 1, flc, o->save_lcpp);
        xfwrite(tokens, sizeof *tokens, (size_t)n_chunk * (size_t)n_ctx, flc, o->save_lcpp);
        lp_row = xmalloc((size_t)nv * sizeof(uint16_t));
    }
    void *base_rows = NULL;
    if (base.f)
        base_rows = xmalloc((size_t)n_score * (base.is_f32 ? (size_t)n_vocab * sizeof(float)
                                                           : (size_t)nv * sizeof(uint16_t)));

    double nll = 0.0;
    long count = 0;
    struct kld_acc k;
    memset(&k, 0, sizeof k);
    const double t1 = now_s();

    for (int i = 0; i < n_chunk; i += n_seq) {
        const int start = i * n_ctx;
        const int end = start + n_ctx;
        const int n_seq_batch = n_seq < n_chunk - i ? n_seq : n_chunk - i;
        size_t acc_rows = 0;

        llama_memory_clear(llama_get_memory(ctx), true);

        for (int j = 0; j < num_batches; ++j) {
            const int batch_start = start + j * n_batch;
            const int batch_size = end - batch_start < n_batch ? end - batch_start : n_batch;
            int n_outputs = 0;
            batch.n_tokens = 0;
            for (int seq = 0; seq < n_seq_batch; seq++) {
                const int seq_start = batch_start + seq * n_ctx;
                for (int kk = 0; kk < batch_size; ++kk) {
                    const int idx = seq * n_ctx + kk;
                    llama_token t = tokens[seq_start + kk];
                    if (add_bos && j == 0 && kk == 0) t = llama_vocab_bos(vocab);
                    batch.token[idx] = t;
                    batch.pos[idx] = j * n_batch + kk;
                    batch.n_seq_id[idx] = 1;
                    batch.seq_id[idx][0] = seq;
                    batch.logits[idx] = batch.pos[idx] >= first ? 1 : 0;
                    n_outputs += batch.logits[idx] != 0;
                }
                batch.n_tokens += batch_size;
            }
            if (llama_decode(ctx, batch)) {
                print_llama_errors();
                die(EXIT_FAIL, "llama_decode failed (chunk %d)", i);
            }
            if (num_batches > 1 && n_outputs > 0) {
                const float *bl = llama_get_logits(ctx);
                memcpy(acc_logits + acc_rows * (size_t)n_vocab, bl, (size_t)n_outputs * (size_t)n_vocab * sizeof(float));
                acc_rows += (size_t)n_outputs;
            }
        }

        for (int seq = 0; seq < n_seq_batch; seq++) {
            const float *rows = num_batches > 1 ? acc_logits : llama_get_logits_ith(ctx, seq * n_ctx + first);
            if (!rows) die(EXIT_FAIL, "no logits for chunk %d", i + seq);
            const llama_token *td = tokens + start + seq * n_ctx + first;
            if (base.f) {
                const size_t rowsz = base.is_f32 ? (size_t)n_vocab * sizeof(float) : (size_t)nv * sizeof(uint16_t);
                xfread(base_rows, rowsz, (size_t)n_score, base.f, o->kld_base);
            }
            if (f32) xfwrite(rows, sizeof(float) * (size_t)n_vocab, (size_t)n_score, f32, o->save_f32);
            for (int r = 0; r < n_score; ++r) {
                const float *row = rows + (size_t)r * (size_t)n_vocab;
                if (base.f && base.is_f32) {
                    kld_f32_row(n_vocab, row, (const float *)base_rows + (size_t)r * (size_t)n_vocab, td[r + 1], &k);
                } else if (base.f) {
                    kld_llamacpp_row(n_vocab, row, (const uint16_t *)base_rows + (size_t)r * (size_t)nv, td[r + 1], &k);
                } else if (flc) {
                    nll += nll_llamacpp_row(n_vocab, row, lp_row, td[r + 1]);
                    xfwrite(lp_row, sizeof(uint16_t), (size_t)nv, flc, o->save_lcpp);
                } else {
                    nll += nll_plain(n_vocab, row, td[r + 1]);
                }
            }
            count += n_score;
        }
    }
    const double t2 = now_s();

    if (base.f) nll = k.sum_nll;
    const double ppl = exp(nll / (double)count);
    /* tokens: what the text tokenized to (BOS included); scored: NLL terms */
    printf("ppl %.6f chunks %d tokens %d scored %ld\n", ppl, n_chunk, n_tok_text, count);
    if (base.f) {
        const double kl = k.sum_kld / (double)k.count;
        double var = k.sum_kld2 / (double)k.count - kl * kl;
        const double kl_unc = var > 0 && k.count > 10 ? sqrt(var / (double)(k.count - 1)) : 0;
        printf("kld %.9f\n", kl);
        printf("kld_unc %.9f\n", kl_unc);
        printf("kld_max %.6f\n", k.max_kld);
        printf("ppl_base %.6f\n", exp(k.sum_nll_base / (double)k.count));
        printf("same_top %.6f\n", (double)k.n_same_top / (double)k.count);
        printf("rms_dp %.6f\n", sqrt(k.sum_p_diff2 / (double)k.count));
        printf("kld_method %s\n", base.is_f32 ? "f32-exact" : "llama.cpp-uint16");
    }
    printf("seconds %.3f eval %.3f threads %d cpu %s\n", t2 - t0, t2 - t1, g_threads, cpu_variant_name());

    if (f32 && fclose(f32)) die(EXIT_FAIL, "write error on %s", o->save_f32);
    if (flc && fclose(flc)) die(EXIT_FAIL, "write error on %s", o->save_lcpp);
    if (base.f) {
        if (fgetc(base.f) != EOF && o->chunks <= 0)
            fprintf(stderr, "llama-peer: warning: %s has more rows than were scored\n", o->kld_base);
        fclose(base.f);
    }
    free(base_rows);
    free(lp_row);
    free(acc_logits);
    free(tokens);
    llama_batch_free(batch);
    llama_free(ctx);
    llama_model_free(model);
    llama_backend_free();
    return 0;
}

/* ------------------------------------------------------------- tokenize */

static void print_tokens(const llama_token *t, int n)
{
    for (int i = 0; i < n; ++i) printf(i ? " %d" : "%d", t[i]);
    putchar('\n');
}

static int cmd_tokenize(const char *model_path, const char *text_path, int add_bos, int parse_special,
                        long bytes)
{
    size_t len;
    char *text = read_file(text_path, &len);
    if (bytes >= 0 && (size_t)bytes < len) len = (size_t)bytes;
    peer_init();
    struct llama_model_params mp = llama_model_default_params();
    mp.vocab_only = true;
    struct stat st;
    if (stat(model_path, &st) != 0) die(EXIT_LOAD, "cannot load %s: %s", model_path, strerror(errno));
    struct llama_model *model = llama_model_load_from_file(model_path, mp);
    if (!model) {
        print_llama_errors();
        die(EXIT_LOAD, "llama.cpp failed to load %s", model_path);
    }
    int n;
    llama_token *t = tokenize_ex(llama_model_get_vocab(model), text, len, add_bos, parse_special, &n);
    print_tokens(t, n);
    free(t);
    free(text);
    llama_model_free(model);
    llama_backend_free();
    return 0;
}

/* ------------------------------------------------------------- generate */

static int cmd_generate(const char *model_path, const char *prompt, int n_gen, int stop_eog)
{
    peer_init();
    struct llama_model *model = load_model(model_path);
    const struct llama_vocab *vocab = llama_model_get_vocab(model);
    const int n_vocab = llama_vocab_n_tokens(vocab);
    int n_prompt;
    llama_token *pt = tokenize(vocab, prompt, strlen(prompt), 1, &n_prompt);
    if (n_prompt == 0) die(EXIT_USAGE, "empty prompt");
    const int n_ctx = n_prompt + n_gen;
    if (n_ctx > llama_model_n_ctx_train(model))
        fprintf(stderr, "llama-peer: warning: %d tokens exceed the model's training context %d\n", n_ctx,
                llama_model_n_ctx_train(model));
    struct llama_context *ctx = make_context(model, (uint32_t)n_ctx, (uint32_t)(n_prompt > 512 ? n_prompt : 512), 1);

    llama_token *out = xmalloc(sizeof *out * (size_t)(n_gen > 0 ? n_gen : 1));
    int n_out = 0;
    struct llama_batch b = llama_batch_get_one(pt, n_prompt);
    llama_token cur;
    const double t0 = now_s();
    while (n_out < n_gen) {
        if (llama_decode(ctx, b)) {
            print_llama_errors();
            die(EXIT_FAIL, "llama_decode failed at generated token %d", n_out);
        }
        const float *l = llama_get_logits_ith(ctx, -1);
        int best = 0; /* greedy: first maximum, like llama_sampler_init_greedy */
        for (int i = 1; i < n_vocab; ++i)
            if (l[i] > l[best]) best = i;
        cur = best;
        out[n_out++] = cur;
        if (stop_eog && llama_vocab_is_eog(vocab, cur)) break;
        b = llama_batch_get_one(&cur, 1);
    }
    const double t1 = now_s();
    print_tokens(out, n_out);
    if (g_verbose)
        fprintf(stderr, "llama-peer: %d prompt + %d generated tokens in %.3f s\n", n_prompt, n_out, t1 - t0);
    free(out);
    free(pt);
    llama_free(ctx);
    llama_model_free(model);
    llama_backend_free();
    return 0;
}

/* ---------------------------------------------------------------- bench */

/* Timing in the shape of memwall-run's: the prompt as one llama_decode call
 * (one batch), then N greedy tokens, each sampled and (except the last, whose
 * logits are not needed) decoded alone; decode t/s = N / that time. Output:
 * "prompt_tokens P prompt_s X prompt_tps Y" / "gen_tokens N gen_s X gen_tps Y"
 * / "maxrss_kib R" (getrusage, the whole process). */
static int cmd_bench(const char *model_path, const char *prompt, int n_gen)
{
    peer_init();
    struct llama_model *model = load_model(model_path);
    const struct llama_vocab *vocab = llama_model_get_vocab(model);
    const int n_vocab = llama_vocab_n_tokens(vocab);
    int n_prompt;
    llama_token *pt = tokenize(vocab, prompt, strlen(prompt), 1, &n_prompt);
    if (n_prompt == 0) die(EXIT_USAGE, "empty prompt");
    const int n_ctx = n_prompt + n_gen;
    struct llama_context *ctx = make_context(model, (uint32_t)n_ctx, (uint32_t)(n_prompt > 512 ? n_prompt : 512), 1);
    const double t0 = now_s();
    if (llama_decode(ctx, llama_batch_get_one(pt, n_prompt))) {
        print_llama_errors();
        die(EXIT_FAIL, "llama_decode failed on the prompt");
    }
    const double t1 = now_s();
    for (int i = 0; i < n_gen; ++i) {
        const float *l = llama_get_logits_ith(ctx, -1);
        int best = 0;
        for (int j = 1; j < n_vocab; ++j)
            if (l[j] > l[best]) best = j;
        if (i + 1 == n_gen) break;
        llama_token cur = best;
        if (llama_decode(ctx, llama_batch_get_one(&cur, 1))) {
            print_llama_errors();
            die(EXIT_FAIL, "llama_decode failed at generated token %d", i);
        }
    }
    const double t2 = now_s();
    struct rusage ru;
    long rss = getrusage(RUSAGE_SELF, &ru) == 0 ? ru.ru_maxrss : -1;
    printf("prompt_tokens %d prompt_s %.6f prompt_tps %.2f\n", n_prompt, t1 - t0,
           t1 > t0 ? n_prompt / (t1 - t0) : 0.0);
    printf("gen_tokens %d gen_s %.6f gen_tps %.2f\n", n_gen, t2 - t1, t2 > t1 ? n_gen / (t2 - t1) : 0.0);
    printf("maxrss_kib %ld\n", rss);
    free(pt);
    llama_free(ctx);
    llama_model_free(model);
    llama_backend_free();
    return 0;
}

/* ----------------------------------------------------------------- info */

static int cmd_info(const char *model_path)
{
    peer_init();
    struct llama_model *model = load_model(model_path);
    const struct llama_vocab *vocab = llama_model_get_vocab(model);
    char buf[512];
    llama_model_desc(model, buf, sizeof buf);
    printf("desc %s\n", buf);
    if (llama_model_meta_val_str(model, "general.architecture", buf, sizeof buf) >= 0) printf("arch %s\n", buf);
    if (llama_model_meta_val_str(model, "general.file_type", buf, sizeof buf) >= 0) printf("file_type %s\n", buf);
    printf("n_vocab %d\n", llama_vocab_n_tokens(vocab));
    printf("vocab_type %d\n", (int)llama_vocab_type(vocab));
    printf("n_layer %d\n", llama_model_n_layer(model));
    printf("n_embd %d\n", llama_model_n_embd(model));
    printf("n_head %d\n", llama_model_n_head(model));
    printf("n_head_kv %d\n", llama_model_n_head_kv(model));
    printf("n_ctx_train %d\n", llama_model_n_ctx_train(model));
    printf("rope_type %d\n", (int)llama_model_rope_type(model));
    printf("n_params %llu\n", (unsigned long long)llama_model_n_params(model));
    printf("size_bytes %llu\n", (unsigned long long)llama_model_size(model));
    printf("bos %d\n", llama_vocab_bos(vocab));
    printf("eos %d\n", llama_vocab_eos(vocab));
    printf("add_bos %d\n", llama_vocab_get_add_bos(vocab) ? 1 : 0);
    printf("add_eos %d\n", llama_vocab_get_add_eos(vocab) ? 1 : 0);
    printf("n_meta %d\n", llama_model_meta_count(model));
    printf("cpu_backend %s\n", cpu_variant_name());
    printf("llama_commit %s\n", PEER_LLAMA_COMMIT);
    llama_model_free(model);
    llama_backend_free();
    return 0;
}

/* ------------------------------------------------------------- quantize */

/* llama-quantize IN OUT TYPE [--imatrix F] [--pure] through llama.h: same
 * library code, same defaults (including the quantize.imatrix.* metadata that
 * llama-quantize writes when given an imatrix). */
struct ftype_name { const char *name; enum llama_ftype ftype; };
static const struct ftype_name FTYPES[] = {
    {"Q4_0", LLAMA_FTYPE_MOSTLY_Q4_0}, {"Q4_1", LLAMA_FTYPE_MOSTLY_Q4_1},
    {"Q5_0", LLAMA_FTYPE_MOSTLY_Q5_0}, {"Q5_1", LLAMA_FTYPE_MOSTLY_Q5_1},
    {"Q8_0", LLAMA_FTYPE_MOSTLY_Q8_0}, {"Q2_K", LLAMA_FTYPE_MOSTLY_Q2_K},
    {"Q2_K_S", LLAMA_FTYPE_MOSTLY_Q2_K_S}, {"Q3_K", LLAMA_FTYPE_MOSTLY_Q3_K_M},
    {"Q3_K_S", LLAMA_FTYPE_MOSTLY_Q3_K_S}, {"Q3_K_M", LLAMA_FTYPE_MOSTLY_Q3_K_M},
    {"Q3_K_L", LLAMA_FTYPE_MOSTLY_Q3_K_L}, {"Q4_K", LLAMA_FTYPE_MOSTLY_Q4_K_M},
    {"Q4_K_S", LLAMA_FTYPE_MOSTLY_Q4_K_S}, {"Q4_K_M", LLAMA_FTYPE_MOSTLY_Q4_K_M},
    {"Q5_K", LLAMA_FTYPE_MOSTLY_Q5_K_M}, {"Q5_K_S", LLAMA_FTYPE_MOSTLY_Q5_K_S},
    {"Q5_K_M", LLAMA_FTYPE_MOSTLY_Q5_K_M}, {"Q6_K", LLAMA_FTYPE_MOSTLY_Q6_K},
    {"IQ2_XXS", LLAMA_FTYPE_MOSTLY_IQ2_XXS}, {"IQ2_XS", LLAMA_FTYPE_MOSTLY_IQ2_XS},
    {"IQ2_S", LLAMA_FTYPE_MOSTLY_IQ2_S}, {"IQ2_M", LLAMA_FTYPE_MOSTLY_IQ2_M},
    {"IQ1_S", LLAMA_FTYPE_MOSTLY_IQ1_S}, {"IQ1_M", LLAMA_FTYPE_MOSTLY_IQ1_M},
    {"IQ3_XXS", LLAMA_FTYPE_MOSTLY_IQ3_XXS}, {"IQ3_XS", LLAMA_FTYPE_MOSTLY_IQ3_XS},
    {"IQ3_S", LLAMA_FTYPE_MOSTLY_IQ3_S}, {"IQ3_M", LLAMA_FTYPE_MOSTLY_IQ3_M},
    {"IQ4_NL", LLAMA_FTYPE_MOSTLY_IQ4_NL}, {"IQ4_XS", LLAMA_FTYPE_MOSTLY_IQ4_XS},
    {"TQ1_0", LLAMA_FTYPE_MOSTLY_TQ1_0}, {"TQ2_0", LLAMA_FTYPE_MOSTLY_TQ2_0},
    {"MXFP4_MOE", LLAMA_FTYPE_MOSTLY_MXFP4_MOE},
    {"F16", LLAMA_FTYPE_MOSTLY_F16}, {"BF16", LLAMA_FTYPE_MOSTLY_BF16},
    {"F32", LLAMA_FTYPE_ALL_F32},
};

struct imatrix {
    struct llama_model_imatrix_data *entries; /* NULL-name terminated */
    int n;
    char dataset[128];
    int has_dataset;
    int64_t chunk_count;
};

/* GGUF imatrix (llama-imatrix's format): "<w>.in_sum2" and "<w>.counts" F32
 * tensors; value = in_sum2/count per expert row (1 where count is 0), as
 * tools/quantize/quantize.cpp load_imatrix() does. */
static void load_imatrix(const char *path, struct imatrix *im)
{
    struct ggml_context *gctx = NULL;
    struct gguf_init_params gp = {.no_alloc = false, .ctx = &gctx};
    struct gguf_context *g = gguf_init_from_file(path, gp);
    if (!g) {
        print_llama_errors();
        die(EXIT_FAIL, "%s: not a GGUF imatrix (legacy .dat imatrix files are not supported)", path);
    }
    memset(im, 0, sizeof *im);
    const int64_t kd = gguf_find_key(g, "imatrix.datasets");
    const int64_t kc = gguf_find_key(g, "imatrix.chunk_count");
    const int64_t ks = gguf_find_key(g, "imatrix.chunk_size");
    if (kd < 0 || kc < 0 || ks < 0) die(EXIT_FAIL, "%s: missing imatrix metadata", path);
    if (gguf_get_kv_type(g, kd) == GGUF_TYPE_ARRAY && gguf_get_arr_type(g, kd) == GGUF_TYPE_STRING &&
        gguf_get_arr_n(g, kd) > 0) {
        snprintf(im->dataset, sizeof im->dataset, "%s", gguf_get_arr_str(g, kd, 0));
        im->has_dataset = 1;
    }
    im->chunk_count = gguf_get_val_u32(g, kc);
    const int64_t nt = gguf_get_n_tensors(g);
    im->entries = xmalloc(sizeof *im->entries * (size_t)(nt + 1));
    for (struct ggml_tensor *t = ggml_get_first_tensor(gctx); t; t = ggml_get_next_tensor(gctx, t)) {
        const char *nm = ggml_get_name(t);
        size_t L = strlen(nm);
        if (L <= 8 || strcmp(nm + L - 8, ".in_sum2")) continue;
        char base[GGML_MAX_NAME + 16], cname[GGML_MAX_NAME + 16];
        xsnprintf(base, sizeof base, "%.*s", (int)(L - 8), nm);
        xsnprintf(cname, sizeof cname, "%s.counts", base);
        struct ggml_tensor *c = ggml_get_tensor(gctx, cname);
        if (!c) die(EXIT_FAIL, "%s: %s has no counts", path, base);
        if (t->type != GGML_TYPE_F32 || c->type != GGML_TYPE_F32) die(EXIT_FAIL, "%s: %s not F32", path, base);
        const int64_t nsum = ggml_nelements(t), ncnt = ggml_nelements(c);
        if (ncnt <= 0 || nsum % ncnt) die(EXIT_FAIL, "%s: %s: bad shapes", path, base);
        const int64_t ne0 = nsum / ncnt;
        float *v = xmalloc(sizeof(float) * (size_t)nsum);
        const float *s = (const float *)t->data, *cn = (const float *)c->data;
        for (int64_t j = 0; j < ncnt; ++j) {
            const float count = cn[j];
            for (int64_t i = 0; i < ne0; ++i) v[j * ne0 + i] = count > 0.0f ? s[j * ne0 + i] / count : 1.0f;
        }
        im->entries[im->n].name = strdup(base);
        im->entries[im->n].data = v;
        im->entries[im->n].size = (size_t)nsum;
        im->n++;
    }
    im->entries[im->n].name = NULL;
    im->entries[im->n].data = NULL;
    im->entries[im->n].size = 0;
    gguf_free(g);
    ggml_free(gctx);
    if (im->n == 0) die(EXIT_FAIL, "%s: no imatrix entries", path);
}

static int cmd_quantize(const char *in, const char *out, const char *type, const char *imatrix_path, int pure,
                        int allow_requantize)
{
    enum llama_ftype ft = (enum llama_ftype)-1;
    for (size_t i = 0; i < sizeof FTYPES / sizeof FTYPES[0]; ++i)
        if (!strcasecmp(FTYPES[i].name, type)) ft = FTYPES[i].ftype;
    if ((int)ft == -1) die(EXIT_USAGE, "unknown quantization type '%s'", type);
    peer_init();
    struct llama_model_quantize_params qp = llama_model_quantize_default_params();
    qp.ftype = ft;
    qp.nthread = g_threads;
    qp.pure = pure != 0;
    qp.allow_requantize = allow_requantize != 0;
    struct imatrix im;
    struct llama_model_kv_override kvo[5];
    memset(kvo, 0, sizeof kvo);
    if (imatrix_path) {
        load_imatrix(imatrix_path, &im);
        qp.imatrix = im.entries;
        int k = 0;
        snprintf(kvo[k].key, sizeof kvo[k].key, "quantize.imatrix.file");
        kvo[k].tag = LLAMA_KV_OVERRIDE_TYPE_STR;
        snprintf(kvo[k].val_str, sizeof kvo[k].val_str, "%.127s", imatrix_path);
        k++;
        if (im.has_dataset) {
            snprintf(kvo[k].key, sizeof kvo[k].key, "quantize.imatrix.dataset");
            kvo[k].tag = LLAMA_KV_OVERRIDE_TYPE_STR;
            snprintf(kvo[k].val_str, sizeof kvo[k].val_str, "%.127s", im.dataset);
            k++;
        }
        snprintf(kvo[k].key, sizeof kvo[k].key, "quantize.imatrix.entries_count");
        kvo[k].tag = LLAMA_KV_OVERRIDE_TYPE_INT;
        kvo[k].val_i64 = im.n;
        k++;
        if (im.chunk_count > 0) {
            snprintf(kvo[k].key, sizeof kvo[k].key, "quantize.imatrix.chunks_count");
            kvo[k].tag = LLAMA_KV_OVERRIDE_TYPE_INT;
            kvo[k].val_i64 = im.chunk_count;
            k++;
        }
        kvo[k].key[0] = 0;
        qp.kv_overrides = kvo;
    }
    const double t0 = now_s();
    if (llama_model_quantize(in, out, &qp)) {
        print_llama_errors();
        die(EXIT_FAIL, "llama_model_quantize %s -> %s (%s) failed", in, out, type);
    }
    struct stat st;
    if (stat(out, &st) != 0) die(EXIT_FAIL, "%s was not written", out);
    printf("quantized %s bytes %lld seconds %.3f\n", out, (long long)st.st_size, now_s() - t0);
    if (imatrix_path) {
        for (int i = 0; i < im.n; ++i) {
            free((void *)im.entries[i].name);
            free((void *)im.entries[i].data);
        }
        free(im.entries);
    }
    llama_backend_free();
    return 0;
}

/* ---------------------------------------------------------------- main */

static void usage(void)
{
    fprintf(stderr,
            "usage: llama-peer [-v] [--threads N] [--cpu VARIANT|auto] [--no-repack] COMMAND ...\n"
            "  ppl MODEL.gguf TEXTFILE [--ctx 256] [--batch B] [--bytes N] [--chunks K]\n"
            "      [--save-logits F] [--save-logits-llamacpp F] [--kld-base F]\n"
            "  tokenize MODEL.gguf TEXTFILE [--no-bos] [--parse-special] [--bytes N]\n"
            "  generate MODEL.gguf PROMPT N [--stop-eog]\n"
            "  bench MODEL.gguf PROMPT N   (prompt and N-token decode timings, peak RSS)\n"
            "  info MODEL.gguf\n"
            "  quantize IN.gguf OUT.gguf TYPE [--imatrix IMATRIX.gguf] [--pure] [--allow-requantize]\n"
            "  version\n"
            "node-llama-cpp %s, llama.cpp %s; CPU only, %d threads by default\n"
            "(MW_PEER_THREADS sets the default).\n",
            PEER_NLC_VERSION, PEER_LLAMA_COMMIT, 2);
    exit(EXIT_USAGE);
}

int main(int argc, char **argv)
{
    g_cpu_variant = getenv("MW_PEER_CPU_VARIANT");
    /* MW_PEER_THREADS: the default of --threads (CTest sets 1: beside another
     * test on a small machine, ggml's spinning thread barrier loses most of
     * its time to the other process; one thread gives the same results) */
    const char *env_threads = getenv("MW_PEER_THREADS");
    if (env_threads && *env_threads)
        g_threads = (int)parse_long(env_threads, "MW_PEER_THREADS", 1, 512);
    /* split global options from the command and its positional args; options
     * may appear anywhere */
    const char *pos[8];
    int npos = 0;
    struct ppl_opts po = {.ctx = 256, .batch = 0, .chunks = 0, .bytes = -1};
    int no_bos = 0, stop_eog = 0, pure = 0, parse_special = 0, allow_requantize = 0;
    long tok_bytes = -1;
    const char *imatrix = NULL;
    for (int i = 1; i < argc; ++i) {
        const char *a = argv[i];
#define NEED_ARG() do { if (i + 1 >= argc) die(EXIT_USAGE, "%s needs a value", a); } while (0)
        if (!strcmp(a, "-v") || !strcmp(a, "--verbose")) g_verbose = 1;
        else if (!strcmp(a, "-h") || !strcmp(a, "--help")) usage();
        else if (!strcmp(a, "--threads") || !strcmp(a, "-t")) { NEED_ARG(); g_threads = (int)parse_long(argv[++i], a, 1, 512); }
        else if (!strcmp(a, "--no-repack")) g_no_repack = 1;
        else if (!strcmp(a, "--cpu")) { NEED_ARG(); g_cpu_variant = argv[++i]; }
        else if (!strcmp(a, "--ctx") || !strcmp(a, "-c")) { NEED_ARG(); po.ctx = (int)parse_long(argv[++i], a, 4, 1 << 20); }
        else if (!strcmp(a, "--batch") || !strcmp(a, "-b")) { NEED_ARG(); po.batch = (int)parse_long(argv[++i], a, 1, 1 << 20); }
        else if (!strcmp(a, "--chunks")) { NEED_ARG(); po.chunks = (int)parse_long(argv[++i], a, 1, INT_MAX); }
        else if (!strcmp(a, "--bytes")) { NEED_ARG(); po.bytes = tok_bytes = parse_long(argv[++i], a, 0, LONG_MAX); }
        else if (!strcmp(a, "--save-logits")) { NEED_ARG(); po.save_f32 = argv[++i]; }
        else if (!strcmp(a, "--save-logits-llamacpp")) { NEED_ARG(); po.save_lcpp = argv[++i]; }
        else if (!strcmp(a, "--kld-base")) { NEED_ARG(); po.kld_base = argv[++i]; }
        else if (!strcmp(a, "--no-bos")) no_bos = 1;
        else if (!strcmp(a, "--parse-special")) parse_special = 1;
        else if (!strcmp(a, "--stop-eog")) stop_eog = 1;
        else if (!strcmp(a, "--pure")) pure = 1;
        else if (!strcmp(a, "--allow-requantize")) allow_requantize = 1;
        else if (!strcmp(a, "--imatrix")) { NEED_ARG(); imatrix = argv[++i]; }
        else if (a[0] == '-' && a[1] == '-') die(EXIT_USAGE, "unknown option %s", a);
        else {
            if (npos == (int)(sizeof pos / sizeof pos[0])) die(EXIT_USAGE, "too many arguments");
            pos[npos++] = a;
        }
#undef NEED_ARG
    }
    if (npos < 1) usage();
    const char *cmd = pos[0];
    if (!strcmp(cmd, "version")) {
        peer_init();
        printf("node-llama-cpp %s\nllama_commit %s\nlibdir %s\ncpu_backend %s\n", PEER_NLC_VERSION,
               PEER_LLAMA_COMMIT, g_libdir, cpu_variant_name());
        llama_backend_free();
        return 0;
    }
    if (!strcmp(cmd, "ppl")) {
        if (npos != 3) usage();
        if (po.save_f32 && po.kld_base) die(EXIT_USAGE, "--save-logits and --kld-base are exclusive");
        if (po.save_lcpp && (po.kld_base || po.save_f32)) die(EXIT_USAGE, "--save-logits-llamacpp goes alone");
        return cmd_ppl(pos[1], pos[2], &po);
    }
    if (!strcmp(cmd, "tokenize")) {
        if (npos != 3) usage();
        return cmd_tokenize(pos[1], pos[2], !no_bos, parse_special, tok_bytes);
    }
    if (!strcmp(cmd, "generate")) {
        if (npos != 4) usage();
        return cmd_generate(pos[1], pos[2], (int)parse_long(pos[3], "N", 0, 1 << 20), stop_eog);
    }
    if (!strcmp(cmd, "bench")) {
        if (npos != 4) usage();
        return cmd_bench(pos[1], pos[2], (int)parse_long(pos[3], "N", 1, 1 << 20));
    }
    if (!strcmp(cmd, "info")) {
        if (npos != 2) usage();
        return cmd_info(pos[1]);
    }
    if (!strcmp(cmd, "quantize")) {
        if (npos != 4) usage();
        return cmd_quantize(pos[1], pos[2], pos[3], imatrix, pure, allow_requantize);
    }
    die(EXIT_USAGE, "unknown command '%s' (try --help)", cmd);
}
