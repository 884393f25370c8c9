/*
 * methods/methods_int.h — internals of mw_methods shared between its files:
 * the work-dir journal of resumable `memwall quant --corpus` runs
 * (methods_journal.c).
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

struct mwj_tally {  /* struct awq_tally of methods.c after the layer */
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

#endif /* MW_METHODS_INT_H */
