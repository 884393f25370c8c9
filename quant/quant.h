/*
 * quant/quant.h — ggml block formats: the function half of the type traits
 * (the size half — block elements, bytes per block, names — is gguf/gguf.h's
 * gguf_type_get()). One table indexed by ggml type id; nothing outside it
 * switches over types.
 *
 * Block layouts are bit-exact with ggml (docs/formats.md §3).
 */
#ifndef MW_QUANT_H
#define MW_QUANT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "gguf/gguf.h"

/* ggml's nearest_int: add 1.5*2^23 in f32 and read the low mantissa bits.
 * Round half to even for |v| <= 4194303; defined (garbage) elsewhere. */
/* Shared by the quantizers here and the methods/ module. */
static inline int quant_nint(float v)
{
    const float t = v + 12582912.0f;
    int32_t i;
    memcpy(&i, &t, sizeof i);
    return (i & 0x007fffff) - 0x00400000;
}

static inline int quant_clampi(int v, int lo, int hi) { return v < lo ? lo : (v > hi ? hi : v); }

struct quant_traits {
    uint32_t type; /* ggml type id */
    /* Decode n elements (a multiple of the block size) from blocks to f32,
     * exactly as ggml's to_float does. */
    void (*to_float)(const void *blocks, float *out, uint64_t n);
    /* Quantize ONE WHOLE ROW of n elements (n a multiple of the block size;
     * some ggml types derive statistics from the whole row) into blocks,
     * byte-identical to what ggml_quantize_chunk (llama-quantize) writes:
     * imatrix == NULL: quantize_row_*_ref (for IQ4_NL/IQ4_XS the full
     * 15-candidate search that quantize_iq4_* runs); imatrix != NULL: n
     * per-column importance weights, ggml's quantize_* with quant_weights
     * (ignored by F32/F16/BF16/Q8_0). Any float input is accepted: NaN,
     * Inf and huge values never cause undefined behaviour (the bytes then
     * match gcc x86-64 builds of ggml, where ggml's own casts are undefined).
     * Pure function: thread-safe, no allocation. NULL when the type cannot
     * be produced. */
    void (*from_float)(const float *x, void *blocks, uint64_t n, const float *imatrix);
    /* ggml cannot quantize this type without importance weights
     * (ggml_quantize_requires_imatrix: IQ2_XXS, IQ2_XS, IQ1_S): quant_rows
     * refuses imatrix == NULL; from_float then still runs, with uniform
     * weights, but its bytes are memwall's own. */
    bool needs_imatrix;
};

/* Traits of type t, or NULL when memwall cannot decode that type yet. */
const struct quant_traits *quant_traits_get(uint32_t t);

/* Quantize n_rows rows of n_per_row floats (row-major) to type t into out
 * (n_rows * row bytes), using n_threads worker threads (>= 1) over
 * contiguous row ranges. The output is byte-identical for every thread
 * count. imatrix: n_per_row weights or NULL. Errors: MW_E_USAGE (type not
 * quantizable, row length not a multiple of the block size), MW_E_NOMEM. */
enum mw_status quant_rows(uint32_t t, const float *x, uint64_t n_rows, uint64_t n_per_row,
                          const float *imatrix, void *out, unsigned n_threads, struct mw_err *err);

enum quant_mode {
    /* ggml's algorithms, byte for byte (what quant_rows does). */
    QUANT_MODE_GGML = 0,
    /* Per block, the lowest-error of ggml's result and of ggml's searches
     * run with other weightings (with an imatrix: none, uniform, sqrt and
     * square of the imatrix; without: uniform weights). The error is
     * sum imatrix[i] * (x[i] - deq[i])^2 over the block (sum (x - deq)^2
     * without imatrix), so the result is never worse than QUANT_MODE_GGML
     * by that measure, block by block; ties keep ggml's bytes. The blocks
     * are ordinary blocks of type t. About 2-5x slower. Deterministic and
     * thread-count independent like quant_rows. */
    QUANT_MODE_BEST = 1,
};

/* quant_rows with a choice of mode. Errors: those of quant_rows, MW_E_USAGE
 * for an unknown mode. Allocates per-thread scratch once per call. */
enum mw_status quant_rows_mode(uint32_t t, enum quant_mode mode, const float *x, uint64_t n_rows,
                               uint64_t n_per_row, const float *imatrix, void *out,
                               unsigned n_threads, struct mw_err *err);

/* One row in QUANT_MODE_BEST, for callers that run their own threads:
 * quantize the n floats x into out (one row of type t) using scratch, a
 * buffer of quant_row_best_scratch(t, n) bytes aligned for double (malloc's
 * alignment) that the call overwrites. Thread-safe with distinct scratch;
 * no allocation. quant_row_best_scratch returns 0 when t cannot be
 * quantized (or the size overflows). */
size_t quant_row_best_scratch(uint32_t t, uint64_t n);
void quant_row_best(uint32_t t, const float *x, void *out, uint64_t n, const float *imatrix,
                    void *scratch);

/* --- presets, imatrix, quantize pipeline --- */
/*
 * `memwall quant` as a library (quant_preset.c, quant_imatrix.c,
 * quant_pipeline.c): llama-quantize's presets and per-tensor type rules
 * (docs/formats.md §8, llama.cpp src/llama-quant.cpp at the pinned commit),
 * importance matrices (§9: GGUF and legacy .dat), and a streaming pipeline
 * that writes llama-quantize's file layout (§1.10) through the atomic,
 * checksummed gguf writer. Nothing here prints: messages go through a log
 * callback, progress through a progress callback.
 */

/* A preset: llama-quantize's file type of the same name. */
struct quant_preset {
    const char *name;      /* "Q4_K_M" */
    uint32_t ftype;        /* general.file_type (llama_ftype, docs/formats.md §8.1) */
    uint32_t default_type; /* ggml type of the tensors no rule singles out */
};
/* Preset by name (case-insensitive), or NULL. */
const struct quant_preset *quant_preset_find(const char *name);
/* The i-th preset (i = 0, 1, ... until NULL), in the order `--help` lists them. */
const struct quant_preset *quant_preset_at(size_t i);
/* Does llama-quantize refuse to write tensor `name` as `type` under preset
 * without importance weights (its tensor_requires_imatrix)? IQ1_S, IQ1_M,
 * IQ2_XXS, IQ2_XS, IQ2_S, IQ3_XXS, and Q2_K in a Q2_K_S file; never the
 * token embedding or output.weight. preset may be NULL. */
bool quant_tensor_requires_imatrix(const char *name, uint32_t type,
                                   const struct quant_preset *preset);

/* What the type rules need to know about the model (from its KVs). */
struct quant_model_info {
    char arch[32];      /* general.architecture */
    uint32_t n_layer;   /* <arch>.block_count */
    uint32_t n_head;    /* <arch>.attention.head_count (layer 0 if an array) */
    uint32_t n_head_kv; /* <arch>.attention.head_count_kv (default n_head) */
    uint32_t n_expert;  /* <arch>.expert_count (default 0) */
};
/* Read the above from a GGUF file's KVs. Errors: MW_E_FORMAT naming the key
 * (missing architecture or block_count, wrong value type). */
enum mw_status quant_model_info_from_gguf(const struct gguf_file *f, struct quant_model_info *out,
                                          struct mw_err *err);

/* A tensor as the rules and the pipeline see it. */
struct quant_tensor_desc {
    const char *name;
    uint32_t type; /* type in the source */
    uint32_t n_dims;
    uint64_t ne[GGUF_MAX_DIMS]; /* missing dims are 1 */
};

/* llama-quantize's tensor order (docs/formats.md §1.10): by the layer number of
 * "blk.N." (other tensors count as -1), then bytewise by name. */
int quant_tensor_name_cmp(const char *a, const char *b);

/* --type-override REGEX=TYPE list: POSIX extended regexes, matched anywhere
 * in the tensor name (regexec), first match wins. As llama-quantize does,
 * REGEX is lower-cased and TYPE is a ggml type name (case-insensitive). */
struct quant_overrides;
/* Parse and compile one "REGEX=TYPE" and append it to *ov (created when
 * NULL). Errors: MW_E_USAGE (no '=', empty side, unknown type, bad regex:
 * the message says which), MW_E_NOMEM. */
enum mw_status quant_overrides_add(struct quant_overrides **ov, const char *spec,
                                   struct mw_err *err);
/* Append an entry that gives the tensor named exactly name (compared
 * bytewise, case included; no regex) type `type`. Its spec — what
 * quant_overrides_spec returns and memwall.quant.type_overrides records —
 * reads "^name$=TYPE" with the regex metacharacters of name escaped.
 * Errors: MW_E_USAGE (NULL name, unknown type), MW_E_NOMEM. */
enum mw_status quant_overrides_add_exact(struct quant_overrides **ov, const char *name,
                                         uint32_t type, struct mw_err *err);
void quant_overrides_free(struct quant_overrides *ov); /* NULL-safe */
uint64_t quant_overrides_count(const struct quant_overrides *ov);
const char *quant_overrides_spec(const struct quant_overrides *ov, uint64_t i); /* as given */

enum quant_reason {
    QUANT_KEEP,     /* not a quantizable weight: copied unchanged */
    QUANT_RULE,     /* the preset's default type or one of its rules */
    QUANT_PURE,     /* --pure: the preset's default type */
    QUANT_OVERRIDE, /* --type-override, --output-tensor-type, --token-embedding-type */
};

struct quant_choice {
    uint32_t type;   /* the type written */
    uint32_t wanted; /* the type chosen before the row-length fallback */
    enum quant_reason reason;
    bool fallback;   /* type != wanted: ne[0] is not a multiple of wanted's block */
};

struct quant_rules {
    const struct quant_preset *preset;
    bool pure;               /* --pure: no per-tensor rules */
    bool has_imatrix;        /* an imatrix is given (Q4_0/Q5_0 ffn_down variants) */
    bool leave_output;       /* --leave-output-tensor: output.weight not quantized */
    int32_t output_type;     /* -1, or a ggml type for output.weight */
    int32_t token_embd_type; /* -1, or a ggml type for token_embd.weight */
    const struct quant_overrides *overrides; /* may be NULL */
};

/* How a choice came about, for plan listings: "keep", "rule", "pure",
 * "override", or "fallback" when the row-length fallback changed it. */
const char *quant_choice_reason_name(const struct quant_choice *c);

/* Does llama-quantize quantize this tensor at all (docs/formats.md §8.2)? */
bool quant_tensor_is_quantizable(const struct quant_tensor_desc *t, bool leave_output);

/* Weight bytes of n tensors and the bytes one decoded token reads (the
 * memory-bandwidth bound of decode): every tensor whole, except
 *   - stacked expert tensors (3-D, "blk.N.*_exps.*", ne[2] experts): n_used
 *     of the ne[2] slabs (the router's top-k; n_used 0 or >= ne[2]: all);
 *   - token_embd.weight when an output.weight exists: one row (a lookup);
 *     tied embeddings are read whole by the output projection.
 * types: the type of each tensor (NULL: t[i].type). False on a size overflow
 * or an unknown type. */
bool quant_decode_bytes(const struct quant_tensor_desc *t, const uint32_t *types, uint64_t n,
                        uint32_t n_used, uint64_t *total, uint64_t *active);

/* Choose the type of each of the n tensors t[] exactly as llama-quantize
 * does. t[] must be in llama-quantize's order (quant_tensor_name_cmp): the
 * rules count attn_v and ffn_down tensors in that order. out[i] belongs to
 * t[i]. Errors: MW_E_FORMAT (MoE tensor whose layer cannot be parsed or is
 * out of range), MW_E_UNSUPPORTED (a type without a fallback for its row
 * length). Thread-safe; no allocation. */
enum mw_status quant_choose_types(const struct quant_model_info *m,
                                  const struct quant_tensor_desc *t, uint64_t n,
                                  const struct quant_rules *r, struct quant_choice *out,
                                  struct mw_err *err);

/* --- importance matrices (docs/formats.md §9) --- */
struct quant_imatrix;

/* Load an imatrix file: GGUF (llama-imatrix's default; needs the
 * imatrix.datasets / chunk_count / chunk_size keys and F32 "<w>.in_sum2" +
 * "<w>.counts" pairs) or legacy .dat (any file not starting with "GGUF").
 * Values are normalized as llama-quantize does: in_sum2 / count per expert
 * (1 where the count is 0); legacy values / ncall. Errors: MW_E_IO,
 * MW_E_TRUNC, MW_E_FORMAT (naming the entry and the offset), MW_E_VALUE
 * (non-finite values), MW_E_NOMEM. */
enum mw_status quant_imatrix_load(const char *path, struct quant_imatrix **out,
                                  struct mw_err *err);
/* The same over a caller buffer (copied as needed; buf may be freed after). */
enum mw_status quant_imatrix_load_mem(const void *buf, uint64_t size, const char *name,
                                      struct quant_imatrix **out, struct mw_err *err);
void quant_imatrix_free(struct quant_imatrix *im); /* NULL-safe */

bool quant_imatrix_is_legacy(const struct quant_imatrix *im);
uint64_t quant_imatrix_count(const struct quant_imatrix *im);
const char *quant_imatrix_name(const struct quant_imatrix *im, uint64_t i); /* sorted */
/* Normalized weights of entry i (n_cols * n_mat floats); *n gets the count. */
const float *quant_imatrix_values(const struct quant_imatrix *im, uint64_t i, uint64_t *n);
int64_t quant_imatrix_find(const struct quant_imatrix *im, const char *name); /* or -1 */
/* GGUF imatrix: entry i's counts, one per matrix (a stacked MoE tensor: the
 * rows the calibration routed to each expert); NULL for a legacy file. */
const float *quant_imatrix_counts(const struct quant_imatrix *im, uint64_t i, uint64_t *n);
uint32_t quant_imatrix_chunk_count(const struct quant_imatrix *im); /* 0 if unknown */
uint64_t quant_imatrix_dataset_count(const struct quant_imatrix *im);
const char *quant_imatrix_dataset(const struct quant_imatrix *im, uint64_t i);
/* XXH3-64 of the file's bytes. */
uint64_t quant_imatrix_hash(const struct quant_imatrix *im);

/* --- the pipeline --- */

/* Receives bytes of one tensor, in any chunking. */
typedef enum mw_status (*quant_sink_fn)(void *ud, const void *data, size_t n, struct mw_err *err);

/* Where the model comes from: its KVs (a GGUF file, copied in order) and
 * its tensors, read one at a time. */
struct quant_source {
    const struct gguf_file *kv;               /* KVs copied from here */
    uint64_t n_tensors;
    const struct quant_tensor_desc *tensors;  /* source order */
    /* Raw bytes of tensor i (its source type, all of them, in order) through
     * sink, any chunking. */
    enum mw_status (*read)(void *ud, uint64_t i, quant_sink_fn sink, void *sink_ud,
                           struct mw_err *err);
    /* Optional: tensor i's bytes in memory (zero-copy), or NULL. */
    const uint8_t *(*data)(void *ud, uint64_t i);
    /* Optional: bytes [off, off + n) of tensor i are not needed for now (a
     * hint, e.g. to drop mapped pages); a later read or data() of them must
     * still work. */
    void (*release)(void *ud, uint64_t i, uint64_t off, uint64_t n);
    void *ud;
    const char *method, *method_params; /* memwall.quant.method(_params); NULL: imatrix/rtn */
};

/* A source over an open GGUF file (KVs and tensors from f; f must outlive
 * src). Release with quant_source_gguf_free(). Errors: MW_E_NOMEM. */
enum mw_status quant_source_gguf(const struct gguf_file *f, struct quant_source *src,
                                 struct mw_err *err);
void quant_source_gguf_free(struct quant_source *src); /* NULL-safe, idempotent */

enum quant_log_level { QUANT_LOG_INFO, QUANT_LOG_NOTICE, QUANT_LOG_WARN };
typedef void (*quant_log_fn)(void *ud, enum quant_log_level level, const char *msg);
/* Called after each slab of rows: source bytes processed so far and in total. */
typedef void (*quant_progress_fn)(void *ud, uint64_t done_bytes, uint64_t total_bytes,
                                  uint64_t tensor_i, uint64_t n_tensors, const char *name);

struct quant_opts {
    struct quant_rules rules;            /* rules.has_imatrix is set from imatrix */
    const struct quant_imatrix *imatrix; /* NULL: round-to-nearest ("rtn") */
    const char *imatrix_file;            /* quantize.imatrix.file value (the path given) */
    const char *budget;                  /* memwall.quant.budget value (--bpw/--size/--fit-ram), or NULL */
    const char *command;                 /* memwall.quant.command value (the command line), or NULL */
    /* memwall.quant.probe_kld: the budget's probes, one KL divergence per
     * source tensor (< 0: not probed; n_probe_kld: the source's tensor
     * count), written in the file's tensor order; NULL: no key */
    const float *probe_kld;
    uint64_t n_probe_kld;
    bool guess_file_type;                /* general.file_type from the plan's types (a budget's
                                          * mix without a preset), not the preset's */
    bool allow_requantize;               /* source tensors already quantized */
    unsigned n_threads;                  /* 0: 1 */
    size_t slab_bytes;                   /* f32 scratch per slab; 0: 64 MiB */
    quant_log_fn log;                    /* may be NULL */
    void *log_ud;
    quant_progress_fn progress;          /* may be NULL */
    void *progress_ud;
};

/* One output tensor of a plan, in output order. */
struct quant_plan_entry {
    const struct quant_tensor_desc *src; /* into the source's table */
    uint64_t src_index;
    struct quant_choice choice;
    const float *imatrix;                /* NULL: quantized without */
    const float *imatrix_counts;         /* per expert (ne[2] of them) or NULL */
    uint64_t src_bytes, out_bytes;
};

struct quant_plan;
/* Everything decided before any output exists: order, types, imatrix
 * entries (a length that does not fit the tensor is MW_E_FORMAT naming the
 * tensor, expected and actual length; an entry for a tensor the model lacks
 * is a warning; a quantized tensor without entry a notice), types memwall
 * cannot produce (MW_E_UNSUPPORTED), source tensors already quantized
 * (MW_E_UNSUPPORTED unless allow_requantize). The plan borrows src and o's
 * imatrix. */
enum mw_status quant_plan_build(const struct quant_source *src, const struct quant_opts *o,
                                struct quant_plan **out, struct mw_err *err);
void quant_plan_free(struct quant_plan *p); /* NULL-safe */
uint64_t quant_plan_count(const struct quant_plan *p);
const struct quant_plan_entry *quant_plan_get(const struct quant_plan *p, uint64_t i);
uint64_t quant_plan_src_bytes(const struct quant_plan *p);
uint64_t quant_plan_out_bytes(const struct quant_plan *p); /* tensor data, unpadded */
/* The general.file_type the plan's file gets (docs/formats.md §8.1): the
 * preset's ftype, as llama-quantize writes it (also with type overrides);
 * with o->guess_file_type llama-model-loader's guess from the tensor types
 * (the type most tensors have, ties to the first in the loader's name order,
 * Q3_K/Q4_K/Q5_K as their _M ftypes), counted over the tensors the plan
 * quantizes only, not the norms it copies. */
uint32_t quant_plan_file_type(const struct quant_plan *p);
/* A file type's name as the presets spell it ("IQ2_S", "Q4_K_M"; "F32",
 * "F16", "BF16", "TQ1_0", "TQ2_0"), or NULL for an unknown value. */
const char *quant_file_type_name(uint32_t ftype);

struct quant_stats {
    uint64_t file_bytes;  /* size of the file written */
    uint64_t n_quantized; /* tensors converted to another type */
    uint64_t n_copied;    /* tensors copied unchanged */
    uint64_t n_fallback;  /* tensors that took the row-length fallback */
    uint64_t n_imatrix;   /* tensors quantized with importance weights */
};

/* Write the plan's file at out_path (temp file + fsync + rename; nothing
 * appears there on failure): KVs of the source in order, minus
 * general.quantization_version, general.file_type and split.*, which are
 * re-added at the end (then quantize.imatrix.* with an imatrix), then the
 * memwall.* provenance keys (version, quant.preset, quant.method,
 * quant.imatrix_xxh3, quant.type_overrides; the type chosen for each tensor
 * is in its tensor info, so it is not repeated) and checksums.
 * Tensors one slab of rows at a time over o->n_threads threads; the bytes
 * do not depend on the thread count. st may be NULL. */
/* Bytes the file quant_plan_write would write (header, KVs, checksums,
 * padding, tensor data), without writing anything. */
enum mw_status quant_plan_file_size(const struct quant_plan *p, uint64_t *bytes,
                                    struct mw_err *err);
enum mw_status quant_plan_write(const struct quant_plan *p, const char *out_path,
                                struct quant_stats *st, struct mw_err *err);
/* llama-quantize's importance-matrix requirement (quant_tensor_requires_imatrix),
 * which quant_plan_write checks first: without an imatrix (and not from a
 * --corpus method source), any quantized tensor whose chosen type needs one
 * is MW_E_USAGE naming the preset, the tensor and the type; with one, a
 * tensor converted to such a type without an imatrix entry is MW_E_FORMAT.
 * Plans of a budget allocation (o->budget set) are exempt. llama-quantize
 * --dry-run only warns: so may a caller that writes nothing. */
enum mw_status quant_plan_check_imatrix(const struct quant_plan *p, struct mw_err *err);

#endif /* MW_QUANT_H */
