/*
 * verify/verify.h — integrity check of a GGUF file.
 *
 * verify_file() opens a GGUF file with the validating reader (in the mode
 * that tolerates missing tensor data, GGUF_OPEN_ALLOW_SHORT) and checks, in
 * this order:
 *   1. structure: everything gguf_open() validates (one error if it fails);
 *   2. bounds: the first tensor whose data runs past the end of the file
 *      (named, with how many bytes are missing, and how many later tensors
 *      are missing too), a blob whose trailing padding is cut short;
 *   3. padding: the bytes between the tensor infos and the blob, between
 *      tensors and after the last one must be 0x00 (offset of the first
 *      non-zero byte of each run); bytes after the padded blob are a warning;
 *   4. checksums (gguf/gguf.h, memwall.checksum.*): algorithm "xxh3-64",
 *      a UINT64 array with one entry per tensor, the header checksum, and the
 *      checksum of every tensor (each mismatching tensor is named). A file
 *      without any of these keys is reported as "no checksums" (info, not a
 *      failure) and still gets checks 1–3;
 *   5. with opts.deep: every block of every tensor whose type has quant
 *      traits is decoded (in small chunks) and must be finite; the first
 *      NaN/Inf of a tensor is named with its element index. Types without
 *      traits are listed as "not decoded" (info).
 *
 * Results go into a caller-owned struct verify_report: a list of items
 * (errors, warnings, notes), each with a status code, byte offset and the
 * tensor/key it is about, plus a summary. Library code never prints.
 *
 * Performance: data is hashed straight from the read-only mapping in large
 * sequential chunks, and pages already checked are dropped from the mapping
 * (madvise), so peak RSS does not grow with the file size.
 *
 * Thread-safety: calls on different reports are independent; no global state.
 */
#ifndef MW_VERIFY_H
#define MW_VERIFY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/mw.h"

enum verify_level {
    VERIFY_ERROR = 0, /* integrity failure: the file is not intact */
    VERIFY_WARNING,   /* suspicious but loadable (e.g. trailing bytes) */
    VERIFY_NOTE,      /* information (e.g. "no checksums", "not decoded") */
};

/* One finding. */
struct verify_item {
    enum verify_level level;
    enum mw_status code; /* ERROR/WARNING: what kind; NOTE: MW_OK */
    uint64_t off;        /* byte offset in the file, MW_ERR_OFF_NONE if none */
    int64_t tensor;      /* tensor index, or -1 if not about one tensor */
    char name[64];       /* that tensor's name ("" if none) */
    char where[160];     /* context as in struct mw_err: "tensor 'x'", "key 'y'" */
    char msg[320];       /* what was expected and what was found */
};

enum verify_checksums {
    VERIFY_CK_ABSENT = 0, /* no memwall.checksum.* keys: structural checks only */
    VERIFY_CK_OK,         /* present, header and every present tensor matched */
    VERIFY_CK_MISMATCH,   /* present and well-formed, some hash did not match */
    VERIFY_CK_INVALID,    /* keys present but malformed/incomplete/unsupported */
};

struct verify_opts {
    bool deep;          /* decode every block of decodable tensors, require finite */
    uint32_t max_items; /* cap on stored items (0: default 1000); the rest are counted */
};

struct verify_report {
    /* --- outcome --- */
    enum mw_status status; /* MW_OK iff intact; else the first error's code */
    uint64_t n_errors, n_warnings, n_notes; /* all findings, stored or not */
    struct verify_item *items; /* n_items stored findings, in the order found */
    uint64_t n_items;
    uint64_t n_dropped;        /* findings not stored (over max_items) */

    /* --- what was read (valid when header_ok) --- */
    char path[256];
    bool header_ok;        /* the reader accepted header, KVs and tensor infos */
    uint32_t version;
    uint64_t n_kv;
    uint64_t n_tensors;
    uint32_t alignment;
    uint64_t file_size;
    uint64_t data_start;   /* aligned start of the data blob */
    uint64_t data_end;     /* data_start + padded blob size (expected file end) */
    uint64_t data_bytes;   /* sum of the tensors' nbytes (padding excluded) */
    uint64_t trailing_bytes; /* bytes after data_end (warning if > 0) */

    /* --- what was checked --- */
    uint64_t n_tensors_missing;   /* data not (fully) inside the file */
    enum verify_checksums checksums;
    bool header_hash_ok;          /* header checksum checked and matched */
    uint64_t n_tensors_hashed;    /* tensors whose checksum was compared */
    uint64_t n_tensors_hash_bad;  /* ... and did not match */
    bool deep;                    /* deep decode was requested */
    uint64_t n_tensors_decoded;   /* decoded completely (deep) */
    uint64_t n_tensors_not_decoded; /* type without quant traits (deep) */
    uint64_t n_tensors_nonfinite; /* with a NaN/Inf (deep) */
};

/* Verify the GGUF file at path and fill *rep (overwritten; release with
 * verify_report_free, also after an error). opts may be NULL (defaults).
 * Returns rep->status: MW_OK for an intact file; otherwise the code of the
 * first error found (MW_E_TRUNC, MW_E_FORMAT, MW_E_CHECKSUM, MW_E_VALUE,
 * MW_E_UNSUPPORTED); MW_E_IO if the file cannot be opened or mapped;
 * MW_E_NOMEM if the report cannot grow. Each of these is also recorded as an
 * item with its offset and context. Thread-safe for distinct reports. */
enum mw_status verify_file(const char *path, const struct verify_opts *opts,
                           struct verify_report *rep);

/* Same over a caller buffer (borrowed for the duration of the call); name is
 * used as the path in the report. Never modifies or releases buf. */
enum mw_status verify_mem(const void *buf, uint64_t size, const char *name,
                          const struct verify_opts *opts, struct verify_report *rep);

/* Release the items of rep and reset it. NULL-safe, idempotent. */
void verify_report_free(struct verify_report *rep);

/* Short lower-case names for levels and checksum states ("error", "ok"). */
const char *verify_level_name(enum verify_level l);
const char *verify_checksums_name(enum verify_checksums c);

#endif /* MW_VERIFY_H */
