/*
 * methods/methods_int.h — internals of mw_methods shared between its files:
 * the work-dir journal of resumable `memwall quant --corpus` runs
 * (methods_journal.c), and the state of the --corpus driver
 * (struct quant_methods_src) with the functions its files share: the
 * driver (methods.c), AWQ's folds (methods_awq.c), the output matrix
 * (methods_output.c) and the driver's side of the work dir
 * (methods_workdir.c).
 *
 * Work dir layout (quant_methods_opts.work_dir):
 *   DIR/journal      a header record (the run's identity) and one record per
 *                    finished layer, appended in layer order. Every record is
 *                      u32 magic "MWJR" | u32 kind | u32 payload bytes |
 *                      payload | u64 XXH3-64 of everything before it
 *                    (little-endian). A layer record is appended and
 *                    fdatasync'd only after the data it names (its tensors
 *                    in tensors.bin, its hidden file) is on disk.
 *   DIR/tensors.bin  the spilled tensors (quantized weights, AWQ-rescaled
 *                    norms), append-only; a record names (tensor, offset,
 *                    bytes, XXH3) of every tensor spilled in its layer and
 *                    where the file ends after the layer.
 *   DIR/hidden.0, DIR/hidden.1
 *                    the hidden states after layer L (T x n_embd native f32)
 *                    in hidden.(L % 2), so writing layer L+1's never touches
 *                    the one the last complete record names. Not written
 *                    after the last layer.
 * Resume: the longest prefix of intact records is kept (a torn or damaged
 * record and everything after it is dropped and the journal truncated back),
 * tensors.bin is truncated to where the last kept layer left it, and the
 * next layer starts from that layer's hidden file (its hash checked as it
 * is read).
 */
#ifndef MW_METHODS_INT_H
#define MW_METHODS_INT_H

#include <stdbool.h>
#include <stdint.h>

#include "calib/calib.h"
#include "core/mw.h"
#include "methods/methods.h"

#define MWJ_VERSION 2 /* 2: the expert counters */
#define MWJ_MAGIC 0x524a574du /* "MWJR" little-endian */
#define MWJ_KIND_HEADER 1u
#define MWJ_KIND_LAYER 2u
#define MWJ_FRAME_BYTES 20u        /* magic, kind, length, hash */
#define MWJ_MAX_PAYLOAD (64u << 20) /* larger: not a record of ours */
#define MWJ_WHY_MAX 200

/* What the run's results depend on; a journal made under another identity
 * is refused, naming the field. The thread count is not part of it. */
struct mwj_id {
    uint64_t model_bytes;   /* GGUF: the file's size; HF dir: the sum of its files' sizes */
    uint64_t model_hash;    /* GGUF: header + KVs + tensor infos; HF dir: see methods_journal.c */
    uint64_t tensors_hash;  /* the quant source's tensor table (names, types, shapes) */
    uint64_t n_tensors;
    uint32_t n_layer, n_embd;
    uint32_t n_samples, n_pos;
    uint64_t samples_hash;  /* every calibration token (corpus, tokenizer, --samples, --seq-len) */
    uint32_t method;        /* enum quant_method */
    uint32_t damp_bits;     /* the GPTQ dampening as used (f32 bits; 0 without GPTQ) */
    uint32_t gptq_block;    /* as given (0: default); 0 without GPTQ */
    uint32_t act_order;     /* 0/1 as used */
    uint32_t awq_in_only;   /* 0/1 (0 without AWQ) */
    uint64_t want_hash;     /* the per-tensor target types of the plan */
    uint32_t batch_samples; /* samples per calibration GEMM batch (the Hessians' sums) */
};

struct mwj_spill {
    uint64_t ti;    /* source tensor index */
    uint32_t type;  /* its type in the output */
    uint64_t off, bytes, hash;
};

struct mwj_tally {  /* struct awq_tally (below) after the layer */
    uint32_t folded, no_gain, skipped;
    char why[MWJ_WHY_MAX];
};

#define MWJ_NO_HIDDEN 0xffu

struct mwj_layer {
    uint32_t layer;
    uint64_t tensors_end;  /* tensors.bin's length after the layer */
    uint32_t hidden_slot;  /* 0 / 1: hidden.N holds the layer's output; MWJ_NO_HIDDEN */
    uint64_t hidden_bytes, hidden_hash;
    struct mwj_tally tally[CALIB_G_COUNT];
    uint32_t x_gptq, x_rtn, x_unrouted; /* MoE: expert matrices per path so far */
    uint32_t n_spill;
    struct mwj_spill *spill; /* owned */
};

/* --- encoding / decoding (pure; unit-tested in tests/check_journal.c) --- */

/* The header record / a layer record into a malloc'd buffer (*buf, *n). */
enum mw_status mwj_encode_header(const struct mwj_id *id, uint8_t **buf, uint64_t *n,
                                 struct mw_err *err);
enum mw_status mwj_encode_layer(const struct mwj_layer *r, uint8_t **buf, uint64_t *n,
                                struct mw_err *err);

/* What mwj_scan found in a journal's bytes. */
struct mwj_scan {
    bool empty;             /* no complete header record (absent, short, all zero):
                             * a journal that never got started */
    struct mwj_id id;       /* the header's identity */
    uint32_t n_layers;      /* intact layer records kept */
    struct mwj_layer *layers; /* owned (mwj_scan_free) */
    uint64_t valid_bytes;   /* the journal's length up to the last kept record */
    uint64_t dropped_bytes; /* bytes after it (a torn or damaged tail) */
    char dropped_why[160];  /* what was wrong with the first dropped record */
};

/* Parse n bytes of a journal. A torn or corrupt record ends the kept prefix
 * (never an error). Errors: MW_E_CHECKSUM / MW_E_FORMAT when the header
 * record is complete but damaged or of another version; MW_E_FORMAT when an
 * intact layer record contradicts the header or its predecessors (layer
 * order, offsets, hidden file size) — err->off is the record's offset;
 * MW_E_NOMEM. path names the journal in errors. */
enum mw_status mwj_scan_bytes(const uint8_t *buf, uint64_t n, const char *path,
                              struct mwj_scan *out, struct mw_err *err);
void mwj_scan_free(struct mwj_scan *s); /* NULL-safe */

/* --- the work dir --- */
struct mwj;

struct mwj_open_info {
    bool resumed;           /* records were found and kept */
    uint32_t n_done;        /* layers recorded (the next layer to run) */
    uint64_t dropped_bytes; /* torn / damaged journal tail that was cut */
    char dropped_why[160];
};

/* Open dir (created if missing, one level) for a run of identity id.
 * resume false: a journal with a started header is refused (MW_E_USAGE:
 * "--resume to continue, or another directory"); an absent or never-started
 * one is started afresh. resume true: the journal's layers are kept, its
 * identity checked field by field (MW_E_VALUE naming the field and both
 * values), tensors.bin and the last hidden file checked for length; an
 * absent or never-started journal is started afresh (info->resumed false).
 * Errors also: MW_E_IO / MW_E_NOSPACE, MW_E_TRUNC (a data file shorter
 * than the journal says), those of mwj_scan_bytes. */
enum mw_status mwj_open(const char *dir, bool resume, const struct mwj_id *id, struct mwj **out,
                        struct mwj_open_info *info, struct mw_err *err);
void mwj_close(struct mwj *j); /* NULL-safe */

uint32_t mwj_n_layers(const struct mwj *j);
const struct mwj_layer *mwj_layer_at(const struct mwj *j, uint32_t i);
int mwj_tensors_fd(const struct mwj *j);      /* DIR/tensors.bin, read-write */
uint64_t mwj_tensors_end(const struct mwj *j); /* its length after the last kept layer */
const char *mwj_tensors_path(const struct mwj *j);

/* Layer rec->layer is complete: write its output hidden states (through
 * calib_layer_hidden, unless it is the last layer) to hidden.(layer % 2),
 * sync them and tensors.bin, then append and sync the record. rec->
 * hidden_* are filled here. On failure the journal is as before (a partly
 * appended record is cut off, or dropped on the next resume). */
enum mw_status mwj_commit(struct mwj *j, struct calib_layer *ly, struct mwj_layer *rec,
                          struct mw_err *err);

/* calib_run_opts.load_hidden over the last kept layer's hidden file (ud: the
 * struct mwj). Rows must come in order; the file's hash is checked when the
 * last row is read (MW_E_CHECKSUM). */
enum mw_status mwj_load_hidden(void *ud, uint64_t row0, uint64_t n_rows, float *dst,
                               struct mw_err *err);

/* Identity helpers: the model at path (GGUF file or HF directory). */
enum mw_status mwj_model_identity(const char *path, uint64_t *bytes, uint64_t *hash,
                                  struct mw_err *err);

/* --- the --corpus driver (methods.c and the files below) --- */

/* Rows of the output matrix quantized per step (bounds the f32 buffers at
 * vocab sizes of 150k and more; qm_output_method). */
#define OUTPUT_CHUNK_ROWS 4096

struct quant_methods_src {
    const struct quant_source *base;
    struct quant_tensor_desc *descs; /* base's table, types replaced */
    uint32_t *want;                  /* chosen type per source tensor (UINT32_MAX: none) */
    bool *spilled;                   /* tensor i's replacement is in the spill file */
    uint64_t *off;                   /* ... at this offset */
    uint64_t *nbytes;                /* ... of this size */
    int fd;                          /* the spill file (unlinked at once), -1: none yet;
                                      * with a work dir: its tensors.bin (owned by j) */
    uint64_t fend;                   /* its size */
    uint64_t *hash;                  /* XXH3 of each spilled tensor (checked when read back) */
    struct mwj *j;                   /* the work dir's journal, or NULL */
    struct mwj_spill *pend;          /* tensors spilled in the current layer (journal) */
    uint32_t n_pend, cap_pend;
    char method_label[QUANT_METHODS_LABEL_MAX + 1];   /* memwall.quant.method */
    char method_params[QUANT_METHODS_PARAMS_MAX + 1]; /* memwall.quant.method_params */
    const struct rt_hparams *hp;     /* the calibrated model's shapes */
    float *s_in[CALIB_G_ALL];      /* the current block's folded AWQ scales per group */
    /* GPTQ: per group the factor of its Hessian (quant_gptq_prepare, in the
     * Hessian's own buffer, taken from calib), shared by the weights that read
     * the group's input; an attention/FFN input group's lives until the next
     * block (v and up may be quantized in the following stage), an output
     * group's is freed after its weight */
    float *U[CALIB_G_ALL];
    float *U_imp[CALIB_G_ALL];
    uint32_t *U_perm[CALIB_G_ALL];
    double t_factor, t_apply, t_awq, t_rtn; /* seconds in GPTQ's factor / sweep, AWQ, RTN */
    /* learned rounding: per group a copy of the undamped Hessian (freed with
     * the factor), what it did over the tensors */
    float *Hr[CALIB_G_ALL];
    double t_round, round_before, round_after;
    double t_output;                 /* seconds in the output matrix's method */
    char output_note[160];           /* what the output matrix got (the log) */
    uint32_t round_tensors, round_fallbacks;
    uint64_t round_flips;
    const struct quant_methods_opts *mo;
    /* fused tensors (phi3 attn_qkv, ffn_up = gate|up): the parts are quantized
     * one by one (rows are independent) into the tensor's buffer, which is
     * spilled once every row is in */
    struct fused_buf {
        int64_t ti;       /* -1: free */
        uint8_t *b;
        uint64_t rows, filled, row_bytes;
    } fb[3];              /* 3: a MoE layer's ffn_{gate,up,down}_exps fill expert by expert */
    /* MoE: expert matrices quantized with GPTQ on the rows routed
     * to them, with importance-weighted rounding (too few rows for GPTQ), or
     * plainly (no row reached the expert) */
    uint32_t x_gptq, x_rtn, x_unrouted;
    /* AWQ: what each fold did over the layers, for the log */
    struct awq_tally {
        uint32_t folded, no_gain, skipped;
        char why[200];    /* the first skip's reason */
    } tally[CALIB_G_COUNT];
};


/* methods.c: the driver */
/* Index of the source tensor called name; -1: none. */
int64_t qm_find_tensor(const struct quant_methods_src *h, const char *name);
/* Store the replacement bytes of tensor ti in the spill file (a rewrite of
 * the same tensor, e.g. an AWQ norm, is appended; the old bytes are dead).
 * With a work dir the file is its tensors.bin and the tensor is noted for
 * the layer's journal record. A full disk is MW_E_NOSPACE. */
enum mw_status qm_spill(struct quant_methods_src *h, int64_t ti, const uint8_t *b, uint64_t n,
                        struct mw_err *err);
bool qm_uses_awq(enum quant_method m);
bool qm_uses_act_order(const struct quant_methods_opts *mo);
/* What one learned-rounding call did, added to the run's totals (the log). */
void qm_round_tally(struct quant_methods_src *h, const struct quant_round_stats *rs);
/* An info line through qo->log. */
void qm_say(const struct quant_opts *qo, const char *msg);

/* methods_awq.c: AWQ's folds in the driver */
/* Count a skipped fold of group g in layer il; the first reason is kept. */
void qm_awq_skip(struct quant_methods_src *h, enum calib_group g, uint32_t il, const char *why);
/* Whether the AWQ scales of o's / down's input are folded into v's / up's
 * rows (then v and up are quantized in the ATTN_OUT / FFN_DOWN stage, after
 * the fold, instead of with q/k and gate). */
bool qm_awq_out_folds(const struct quant_methods_src *h);
/* The producer whose output rows carry 1/s for group g's input: v for
 * ATTN_OUT, up for FFN_DOWN. */
enum calib_wkind qm_awq_producer(const struct calib_layer *ly, enum calib_group g);
/* AWQ on group g of the layer: the alpha search, then the fold; sets
 * h->s_in[g] when it folds, counts the outcome in h->tally[g]. */
enum mw_status qm_awq_group(struct quant_methods_src *h, struct calib_layer *ly,
                            enum calib_group g, struct mw_err *err);
/* The AWQ log after the run (qo->log). */
void qm_awq_report(const struct quant_methods_src *h, const struct quant_opts *qo);
/* The folds made, for memwall.quant.method_params (" awq=..."; "" without AWQ). */
const char *qm_awq_params(const struct quant_methods_src *h);

/* methods_output.c: output.weight under the method, in the last layer's
 * on_layer (h->output_note says what it got). */
enum mw_status qm_output_method(struct quant_methods_src *h, struct calib_layer *ly,
                                struct mw_err *err);

/* methods_workdir.c: the driver's side of the work dir */
/* Open mo->work_dir for this run and set ro up to continue after its last
 * recorded layer (*skip_run: every layer is recorded). */
enum mw_status qm_open_work_dir(struct quant_methods_src *h, const struct quant_opts *qo,
                                struct calib_model *m, const struct calib_samples *smp,
                                struct calib_run_opts *ro, bool *skip_run, struct mw_err *err);
/* on_layer with a work dir: record the layer's spilled tensors, the AWQ
 * tally and its output hidden states (mwj_commit). */
enum mw_status qm_on_layer_journal(struct quant_methods_src *h, struct calib_layer *ly,
                                   struct mw_err *err);

#endif /* MW_METHODS_INT_H */
