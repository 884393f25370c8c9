/*
 * tools/report.h — `memwall report` and quant's --report/--card (internal
 * to tools): what a quantized GGUF file holds, gathered through the
 * libraries (report_model.c), written as one self-contained HTML page
 * (report_html.c) or a Hugging Face model card (report_card.c).
 *
 * Everything shown comes from the file itself: its tensor table (types,
 * shapes, bytes), its KVs (general.*, quantize.imatrix.*, and memwall.* when
 * memwall made it), the runtime's reading of its hyper-parameters and
 * calib's memory formula (the plan of `memwall plan`). Quality figures
 * (perplexity, KL divergence, top-1 agreement) need a reference model and a
 * text, and are measured with the runtime's llama-perplexity protocol.
 */
#ifndef MW_TOOLS_REPORT_H
#define MW_TOOLS_REPORT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/mw.h"

struct gguf_file;

#define REPORT_MAX_KINDS 64
#define REPORT_N_CTX 5   /* contexts of the memory plan */
#define REPORT_N_TIERS 6 /* device tiers of the memory plan */

/* One tensor, as the map places it. */
struct report_tensor {
    const char *name;  /* into the file's table */
    int layer;         /* blk.N's N; -1 outside the layers */
    int kind;          /* index into report_file.kinds */
    uint32_t type;
    uint64_t n_el, nbytes;
    double probe_kld;  /* memwall.quant.probe_kld: the budget's probe; < 0: none */
};

/* A tensor kind ("attn_q.weight", "token_embd.weight", ...): its totals. */
struct report_kind {
    char name[48];
    bool in_layers;  /* blk.N.<name> */
    bool weight;     /* a matrix (2-D or more): a column of the map */
    uint32_t n_tensors;
    uint64_t n_el, bytes;
};

struct report_quality {
    bool has;
    double ppl, ppl_unc, ppl_base, kld, kld_unc, kld_max, top1;
    uint32_t n_chunk;
    uint64_t n_scored;
};

struct report_plan {
    bool has;             /* the runtime read the hyper-parameters */
    char why[160];        /* why not, when !has */
    char arch[32];
    uint32_t n_ctx_train;
    uint64_t weight_bytes; /* the file's tensor data: mapped, resident */
    uint32_t ctx[REPORT_N_CTX];
    uint64_t kv_f16[REPORT_N_CTX], kv_q8[REPORT_N_CTX], overhead[REPORT_N_CTX];
    uint64_t tiers[REPORT_N_TIERS];
    /* fits[c][t]: weights + KV (f16) + overhead within the app budget of tier t */
    bool fits[REPORT_N_CTX][REPORT_N_TIERS];
    bool fits_q8[REPORT_N_CTX][REPORT_N_TIERS];
};

struct report_file {
    const char *path;
    struct gguf_file *gf;
    uint64_t file_bytes, data_bytes, n_el;
    uint32_t n_layer;              /* 1 + the highest blk.N */
    uint64_t n_tensors;
    struct report_tensor *t;
    struct report_kind kinds[REPORT_MAX_KINDS];
    uint32_t n_kinds;
    uint32_t type_count[64];       /* tensors per ggml type (ids < 64) */
    uint64_t type_bytes[64];
    uint64_t type_el[64];
    /* KVs (NULL when absent; strings NUL-terminated copies, owned) */
    char *name, *arch, *basename, *license, *base_model, *base_model_org;
    char *mw_version, *preset, *method, *method_params, *budget, *command, *imatrix_xxh3;
    char *im_file, *im_dataset;
    uint32_t im_chunks, file_type;
    bool has_file_type, memwall, pure;
    uint32_t n_probed;             /* tensors with a probe_kld >= 0 */
    uint32_t n_overrides;
    struct report_plan plan;
    struct report_quality q;
};

/* Open path and gather everything but the quality figures. Errors: those of
 * gguf_open, MW_E_NOMEM. The plan's absence (a model the runtime cannot
 * read) is no error: plan.has false, plan.why saying why. */
enum mw_status report_file_open(const char *path, struct report_file *rf, struct mw_err *err);
void report_file_close(struct report_file *rf); /* NULL-safe, idempotent */

/* The types the file uses (ids < 64), by bits per weight: their count. */
uint32_t report_types(const struct report_file *rf, uint32_t out[64]);
/* Bits per weight of the whole tensor data (every tensor). */
double report_bpw(const struct report_file *rf);
/* The budget asked for (memwall.quant.budget) in words, and as bits per
 * weight / file bytes when it gives them (0 otherwise). */
void report_budget(const struct report_file *rf, char *words, size_t cap, double *bpw,
                   uint64_t *file_bytes);
/* A value "key=V" of memwall.quant.method_params (space-separated), or
 * NULL; copied into buf. */
const char *report_param(const struct report_file *rf, const char *key, char *buf, size_t cap);
/* Which method quantized tensor t, in words, from memwall.quant.method and
 * its type (methods.c: the layers' linear weights and output.weight take
 * GPTQ / learned rounding where quant_gptq_supported(type), else
 * importance-weighted rounding: *fallback; token_embd and the router are
 * always rounded with the calibration's importance); NULL for a file made
 * without --corpus or a tensor no method touches. */
const char *report_tensor_method(const struct report_file *rf, const struct report_tensor *t,
                                 bool *fallback);
/* ggml type name in upper case ("Q4_K"); "type N" for unknown ids. */
const char *report_type_name(uint32_t type, char *buf, size_t cap);
/* Bits per weight of a ggml type (type_size * 8 / block). */
double report_type_bpw(uint32_t type);

/* Quality of each file against a reference model on text: perplexity, KL
 * divergence and top-1 agreement with llama-perplexity's protocol (chunks of
 * n_ctx tokens, at most max_chunks; 0: all), the reference's logits saved to
 * a temporary file and removed afterwards. */
struct report_quality_opts {
    const char *reference, *text;
    uint32_t n_ctx, max_chunks;
    unsigned n_threads;
};
enum mw_status report_measure(const struct report_quality_opts *o, struct report_file *files,
                              size_t n, struct mw_err *err);

/* A growing text buffer (the HTML and the card are built in memory, then
 * written atomically). */
struct report_buf {
    char *p;
    size_t n, cap;
    bool oom;
};
void report_buf_printf(struct report_buf *b, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
/* s with & < > " ' escaped (and control bytes dropped). */
void report_buf_html(struct report_buf *b, const char *s);
/* Write b to path atomically; MW_E_NOMEM if a printf ran out of memory. */
enum mw_status report_buf_write(struct report_buf *b, const char *path, struct mw_err *err);

/* The HTML page: files[0] in full, every file in the size-vs-KLD plot when
 * quality was measured. */
void report_html(struct report_buf *b, const struct report_file *files, size_t n);
/* Its later sections (report_html_sections.c). */
void report_html_calib(struct report_buf *b, const struct report_file *rf);
void report_html_plan(struct report_buf *b, const struct report_file *rf);
void report_html_quality(struct report_buf *b, const struct report_file *files, size_t n);
/* The model card of files[0] (command: the command line that made it, NULL:
 * memwall.quant.command; src: the path its "SRC" stands for, NULL: not known
 * here; license: the source's, NULL: general.license). */
void report_card(struct report_buf *b, const struct report_file *rf, const char *command,
                 const char *src, const char *license);

/* The license named in a Hugging Face checkpoint directory: README.md's
 * front matter "license:" line, else config.json's "license"; NULL if none
 * (malloc'd). */
char *report_hf_license(const char *dir);

/* `memwall quant`'s command line as recorded in memwall.quant.command:
 * "memwall quant" and its arguments (shell-quoted where needed), the source
 * argument (argv's element src) written "SRC", without the options that do
 * not change the file's bytes (-o, -t, -q, --progress, --max-memory,
 * --work-dir, --resume, --dry-run, --report, --card): files made with other
 * thread counts or output names, or from the same model elsewhere (an HF
 * directory or its F16 GGUF) stay byte-identical. malloc'd; NULL when out
 * of memory. */
char *report_quant_command(int argc, char **argv, const char *src);

/* After `memwall quant`: the report and/or the card of the file just
 * written (html or card NULL: not asked), the card's command with SRC as
 * given and the license of an HF source. Prints errors as cmd; returns an
 * exit code. */
int report_after_quant(const char *cmd, const char *out, const char *html, const char *card,
                       const char *command, const char *src, bool src_is_dir);

#endif /* MW_TOOLS_REPORT_H */
