/*
 * tests/peer/peer.h — what the llama-peer commands share (llama_peer.c is
 * the command line; peer_common.c the helpers, llama.cpp's log, the CPU
 * backend and model loading; peer_ppl.c perplexity and KL divergence;
 * peer_run.c tokenize, generate, bench and info; peer_quantize.c quantize).
 */
#ifndef LLAMA_PEER_H
#define LLAMA_PEER_H

#include "llama.h"

#include <limits.h>
#include <stddef.h>
#include <stdint.h>

#ifndef PEER_NLC_VERSION
#define PEER_NLC_VERSION "unknown"
#endif
#ifndef PEER_LLAMA_COMMIT
#define PEER_LLAMA_COMMIT "unknown"
#endif

enum { EXIT_LOAD = 1, EXIT_USAGE = 2, EXIT_FAIL = 3 };

/* global options (llama_peer.c's main sets them) */
extern int g_verbose;
extern int g_threads;
extern int g_no_repack;              /* --no-repack: llama.cpp's -nr */
extern const char *g_cpu_variant;    /* --cpu / MW_PEER_CPU_VARIANT */
extern char g_libdir[PATH_MAX];      /* where libllama is */

/* --- peer_common.c */

/* "llama-peer: MSG" on stderr, then exit(code). */
void die(int code, const char *fmt, ...) __attribute__((noreturn, format(printf, 2, 3)));
/* snprintf that refuses to truncate (paths, names). */
void xsnprintf(char *dst, size_t n, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
void *xmalloc(size_t n);
double now_s(void);
long parse_long(const char *s, const char *what, long lo, long hi);
/* Read a whole file; *len gets its size.  NUL-terminated for convenience. */
char *read_file(const char *path, size_t *len);
/* The last errors and warnings llama.cpp logged, on stderr. */
void print_llama_errors(void);
/* llama.cpp's log hook, the CPU backend variant (see peer_common.c), llama_backend_init. */
void peer_init(void);
/* "haswell" for .../libggml-cpu-haswell.so */
const char *cpu_variant_name(void);
struct llama_model *load_model(const char *path);
struct llama_context *make_context(struct llama_model *m, uint32_t n_ctx, uint32_t n_batch,
                                   uint32_t n_seq);
llama_token *tokenize_ex(const struct llama_vocab *v, const char *text, size_t len,
                         int add_special, int parse_special, int *n_out);
llama_token *tokenize(const struct llama_vocab *v, const char *text, size_t len, int add_special,
                      int *n_out);

/* --- the commands */

struct ppl_opts {
    int ctx, batch, chunks;
    long bytes;
    const char *save_f32, *save_lcpp, *kld_base;
};
int cmd_ppl(const char *model_path, const char *text_path, const struct ppl_opts *o); /* peer_ppl.c */
int cmd_tokenize(const char *model_path, const char *text_path, int add_bos, int parse_special,
                 long bytes);                                                   /* peer_run.c */
int cmd_generate(const char *model_path, const char *prompt, int n_gen, int stop_eog);
int cmd_bench(const char *model_path, const char *prompt, int n_gen);
int cmd_info(const char *model_path);
int cmd_quantize(const char *in, const char *out, const char *type, const char *imatrix_path, int pure,
                 int allow_requantize);                                         /* peer_quantize.c */

#endif
