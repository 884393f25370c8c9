/*
 * gguf/gguf.h — GGUF v3 container: type table, validating reader, streaming
 * atomic writer.
 *
 * File layout (little-endian; docs/formats.md §1):
 *   "GGUF" u32 version u64 n_tensors u64 n_kv
 *   n_kv   x { string key, i32 value_type, value }
 *   n_tensors x { string name, u32 n_dims, u64 ne[n_dims], i32 type, u64 offset }
 *   0x00 padding to ALIGN (general.alignment, default 32)
 *   data blob: each tensor at its offset (a multiple of ALIGN, exactly the
 *   running sum of the padded sizes of the tensors before it), 0x00 padding
 *   after each tensor up to ALIGN, the last one included.
 *
 * Reader: gguf_open() maps the file read-only and validates everything before
 * returning: magic, version (2 or 3), counts bounded by the bytes present,
 * string lengths, key uniqueness, value types, nested arrays (depth <= 8),
 * bool bytes 0/1, general.alignment (u32 power of two <= 1 MiB), tensor names
 * (1..63 bytes, unique), n_dims 1..4, every ne >= 1, known type with a block
 * size, ne[0] a multiple of the block size, checked byte sizes, offsets equal
 * to the running padded offset (so no overlap, gap or reorder), and every
 * tensor's data and trailing padding inside the file. Errors carry the byte
 * offset and the field being read.
 *
 * memwall checksum keys (stable; llama.cpp ignores them):
 *   memwall.checksum.algorithm  string  "xxh3-64"
 *   memwall.checksum.tensors    array of UINT64, one per tensor in tensor-info
 *                               order: XXH3_64bits (seed 0) of the tensor's
 *                               nbytes of data (padding excluded)
 *   memwall.checksum.header     UINT64: XXH3_64bits of the file bytes
 *                               [0, data_start) — header, all KVs, tensor infos
 *                               and the padding before the blob — computed with
 *                               the 8 value bytes of this key taken as zero.
 * The writer appends these three keys after all caller keys, in this order.
 * Padding bytes are not hashed; verify checks that they are all zero.
 */
#ifndef MW_GGUF_H
#define MW_GGUF_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/mw.h"

#define GGUF_MAGIC "GGUF"
#define GGUF_VERSION 3
#define GGUF_DEFAULT_ALIGNMENT 32
#define GGUF_MAX_ALIGNMENT (1u << 20)
#define GGUF_MAX_DIMS 4
#define GGUF_MAX_NAME 63          /* tensor name bytes, ggml's limit */
#define GGUF_MAX_KEY 65535        /* key bytes, the spec's limit */
#define GGUF_MAX_ARRAY_DEPTH 8

#define GGUF_KEY_CK_ALGO "memwall.checksum.algorithm"
#define GGUF_KEY_CK_TENSORS "memwall.checksum.tensors"
#define GGUF_KEY_CK_HEADER "memwall.checksum.header"
#define GGUF_CK_ALGO_NAME "xxh3-64"

/* --- ggml tensor types (docs/formats.md §3.1) --- */
enum gguf_type {
    GGUF_TYPE_F32 = 0,
    GGUF_TYPE_F16 = 1,
    GGUF_TYPE_Q4_0 = 2,
    GGUF_TYPE_Q4_1 = 3,
    GGUF_TYPE_Q5_0 = 6,
    GGUF_TYPE_Q5_1 = 7,
    GGUF_TYPE_Q8_0 = 8,
    GGUF_TYPE_Q8_1 = 9,
    GGUF_TYPE_Q2_K = 10,
    GGUF_TYPE_Q3_K = 11,
    GGUF_TYPE_Q4_K = 12,
    GGUF_TYPE_Q5_K = 13,
    GGUF_TYPE_Q6_K = 14,
    GGUF_TYPE_Q8_K = 15,
    GGUF_TYPE_IQ2_XXS = 16,
    GGUF_TYPE_IQ2_XS = 17,
    GGUF_TYPE_IQ3_XXS = 18,
    GGUF_TYPE_IQ1_S = 19,
    GGUF_TYPE_IQ4_NL = 20,
    GGUF_TYPE_IQ3_S = 21,
    GGUF_TYPE_IQ2_S = 22,
    GGUF_TYPE_IQ4_XS = 23,
    GGUF_TYPE_I8 = 24,
    GGUF_TYPE_I16 = 25,
    GGUF_TYPE_I32 = 26,
    GGUF_TYPE_I64 = 27,
    GGUF_TYPE_F64 = 28,
    GGUF_TYPE_IQ1_M = 29,
    GGUF_TYPE_BF16 = 30,
    GGUF_TYPE_TQ1_0 = 34,
    GGUF_TYPE_TQ2_0 = 35,
    GGUF_TYPE_MXFP4 = 39,
    GGUF_TYPE_NVFP4 = 40,
    GGUF_TYPE_Q1_0 = 41,
    GGUF_TYPE_Q2_0 = 42,
    GGUF_TYPE_COUNT = 43
};

struct gguf_type_info {
    const char *name;    /* "q4_K"; NULL for removed/unknown ids */
    uint32_t blck;       /* elements per block; 0 for removed ids */
    uint32_t type_size;  /* bytes per block */
};

/* Traits of type id t, or NULL if t is not a valid (present) ggml type. */
const struct gguf_type_info *gguf_type_get(uint32_t t);
/* Type id by name (case-insensitive, "Q4_K" or "q4_k"); -1 if unknown. */
int gguf_type_from_name(const char *name);
/* Bytes of a tensor of type t and shape ne[0..3] (missing dims = 1), checked:
 * false if t is invalid, ne[0] is not a multiple of the block size, or the
 * size overflows. */
bool gguf_tensor_nbytes(uint32_t t, const uint64_t ne[GGUF_MAX_DIMS], uint64_t *out);

/* --- KV value types (docs/formats.md §1.4) --- */
enum gguf_vtype {
    GGUF_VT_U8 = 0,
    GGUF_VT_I8 = 1,
    GGUF_VT_U16 = 2,
    GGUF_VT_I16 = 3,
    GGUF_VT_U32 = 4,
    GGUF_VT_I32 = 5,
    GGUF_VT_F32 = 6,
    GGUF_VT_BOOL = 7,
    GGUF_VT_STRING = 8,
    GGUF_VT_ARRAY = 9,
    GGUF_VT_U64 = 10,
    GGUF_VT_I64 = 11,
    GGUF_VT_F64 = 12,
    GGUF_VT_COUNT = 13
};
const char *gguf_vtype_name(uint32_t vt);  /* "u32", "string", ...; "?" if unknown */
/* Size in bytes of one scalar value of type vt; 0 for STRING/ARRAY/unknown. */
size_t gguf_vtype_size(uint32_t vt);

/* A value as it lies in the file. Views point into the mapped file and stay
 * valid until gguf_close(). */
struct gguf_value {
    enum gguf_vtype type;
    uint64_t off;        /* file offset of the value payload */
    uint64_t nbytes;     /* bytes of the payload (for STRING: the string bytes) */
    const uint8_t *data; /* payload: scalar bytes, string bytes, or array elements */
    /* ARRAY only: */
    enum gguf_vtype elem_type;
    uint64_t n;          /* element count (STRING: length in bytes) */
    const struct gguf_value *elems_; /* internal: table for STRING/ARRAY elements */
};

/* Element j of an array value (j < arr->n) into *out. Returns false if arr is
 * not an array or j is out of range. */
bool gguf_value_elem(const struct gguf_value *arr, uint64_t j, struct gguf_value *out);
/* Scalar conversions: false when the value's type is not one that converts
 * exactly (as_u64 accepts unsigned and non-negative signed ints, as_i64 any
 * int that fits, as_f64 floats and ints, as_bool BOOL). */
bool gguf_value_as_u64(const struct gguf_value *v, uint64_t *out);
bool gguf_value_as_i64(const struct gguf_value *v, int64_t *out);
bool gguf_value_as_f64(const struct gguf_value *v, double *out);
bool gguf_value_as_bool(const struct gguf_value *v, bool *out);

/* --- reader --- */
struct gguf_file;

struct gguf_tensor {
    const char *name;    /* NUL-terminated copy */
    uint32_t n_dims;
    uint64_t ne[GGUF_MAX_DIMS]; /* missing dims are 1 */
    uint32_t type;
    uint64_t offset;     /* relative to the data blob */
    uint64_t file_off;   /* absolute: data_start + offset */
    uint64_t nbytes;
    uint64_t info_off;   /* where this tensor-info record starts in the file */
};

enum gguf_open_flags {
    GGUF_OPEN_DEFAULT = 0,
    /* Do not fail when tensor data or its padding runs past the end of the
     * file; gguf_tensor_in_file() then tells which tensors are present.
     * verify uses this to name every truncated tensor. */
    GGUF_OPEN_ALLOW_SHORT = 1u << 0,
};

/* Map and validate path. On success *out owns the mapping; release with
 * gguf_close(). Errors: MW_E_IO (open/map), MW_E_TRUNC, MW_E_FORMAT,
 * MW_E_UNSUPPORTED, MW_E_NOMEM; err names path, offset and field. */
enum mw_status gguf_open(const char *path, unsigned flags, struct gguf_file **out,
                         struct mw_err *err);
/* Same over a caller buffer (borrowed: must outlive the gguf_file). name is
 * used in error messages. */
enum mw_status gguf_open_mem(const void *buf, uint64_t size, const char *name,
                             unsigned flags, struct gguf_file **out, struct mw_err *err);
void gguf_close(struct gguf_file *f); /* NULL-safe */

uint32_t gguf_version(const struct gguf_file *f);
const char *gguf_path(const struct gguf_file *f);
const uint8_t *gguf_base(const struct gguf_file *f);   /* whole file bytes */
uint64_t gguf_file_size(const struct gguf_file *f);
uint32_t gguf_alignment(const struct gguf_file *f);
uint64_t gguf_infos_end(const struct gguf_file *f);   /* end of the last tensor info */
uint64_t gguf_data_start(const struct gguf_file *f);  /* aligned start of the blob */
uint64_t gguf_data_end(const struct gguf_file *f);    /* data_start + padded blob size */

uint64_t gguf_kv_count(const struct gguf_file *f);
const char *gguf_kv_key(const struct gguf_file *f, uint64_t i);   /* NUL-terminated */
const struct gguf_value *gguf_kv_value(const struct gguf_file *f, uint64_t i);
uint64_t gguf_kv_off(const struct gguf_file *f, uint64_t i);      /* where the KV starts */
uint64_t gguf_kv_end(const struct gguf_file *f, uint64_t i);      /* where it ends */
/* Index of key, or -1. */
int64_t gguf_kv_find(const struct gguf_file *f, const char *key);
/* Strict typed getters: MW_E_FORMAT (naming key, expected and actual type)
 * when present with another type; MW_E_VALUE if missing. */
enum mw_status gguf_get_u32(const struct gguf_file *f, const char *key, uint32_t *out,
                            struct mw_err *err);
enum mw_status gguf_get_str(const struct gguf_file *f, const char *key, const char **s,
                            uint64_t *len, struct mw_err *err);

uint64_t gguf_tensor_count(const struct gguf_file *f);
const struct gguf_tensor *gguf_tensor_get(const struct gguf_file *f, uint64_t i);
int64_t gguf_tensor_find(const struct gguf_file *f, const char *name);
/* Pointer to tensor i's data in the mapping, or NULL if not fully in the file
 * (only possible with GGUF_OPEN_ALLOW_SHORT). */
const uint8_t *gguf_tensor_data(const struct gguf_file *f, uint64_t i);
bool gguf_tensor_in_file(const struct gguf_file *f, uint64_t i);

/* --- writer ---
 * Usage: gguf_writer_init; set KVs; add tensor infos (all of them, in the
 * order their data will come); gguf_writer_open(path) writes the header to a
 * temp file beside path; stream every tensor's bytes with
 * gguf_writer_write (any chunking; tensors in order); gguf_writer_finish
 * patches the checksums, fsyncs and renames over path. gguf_writer_free on an
 * unfinished writer removes the temp file; nothing ever appears under path
 * unless finish succeeded, and an existing file there stays intact.
 * Not thread-safe; one writer per thread. */
struct gguf_writer;

enum mw_status gguf_writer_init(struct gguf_writer **out, struct mw_err *err);
void gguf_writer_free(struct gguf_writer *w); /* NULL-safe; removes temp file */

/* KV setters. Keys must be unique and non-empty (MW_E_USAGE otherwise), and
 * must not start with "memwall.checksum." (reserved). KVs are written in the
 * order set. */
enum mw_status gguf_writer_set_u8(struct gguf_writer *w, const char *key, uint8_t v, struct mw_err *err);
enum mw_status gguf_writer_set_i8(struct gguf_writer *w, const char *key, int8_t v, struct mw_err *err);
enum mw_status gguf_writer_set_u16(struct gguf_writer *w, const char *key, uint16_t v, struct mw_err *err);
enum mw_status gguf_writer_set_i16(struct gguf_writer *w, const char *key, int16_t v, struct mw_err *err);
enum mw_status gguf_writer_set_u32(struct gguf_writer *w, const char *key, uint32_t v, struct mw_err *err);
enum mw_status gguf_writer_set_i32(struct gguf_writer *w, const char *key, int32_t v, struct mw_err *err);
enum mw_status gguf_writer_set_u64(struct gguf_writer *w, const char *key, uint64_t v, struct mw_err *err);
enum mw_status gguf_writer_set_i64(struct gguf_writer *w, const char *key, int64_t v, struct mw_err *err);
enum mw_status gguf_writer_set_f32(struct gguf_writer *w, const char *key, float v, struct mw_err *err);
enum mw_status gguf_writer_set_f64(struct gguf_writer *w, const char *key, double v, struct mw_err *err);
enum mw_status gguf_writer_set_bool(struct gguf_writer *w, const char *key, bool v, struct mw_err *err);
enum mw_status gguf_writer_set_str(struct gguf_writer *w, const char *key, const char *s, struct mw_err *err);
/* String of explicit length (may contain NULs). */
enum mw_status gguf_writer_set_strn(struct gguf_writer *w, const char *key, const char *s,
                                    uint64_t len, struct mw_err *err);
/* Array of n scalars of elem_type (not STRING/ARRAY); data holds them in host
 * order (converted to little-endian on write). */
enum mw_status gguf_writer_set_arr(struct gguf_writer *w, const char *key, enum gguf_vtype elem_type,
                                   const void *data, uint64_t n, struct mw_err *err);
/* Array of n strings; lens may be NULL (strings NUL-terminated). */
enum mw_status gguf_writer_set_arr_str(struct gguf_writer *w, const char *key, const char *const *strs,
                                       const uint64_t *lens, uint64_t n, struct mw_err *err);
/* Copy KV i of src verbatim (any type, nested arrays included). */
enum mw_status gguf_writer_copy_kv(struct gguf_writer *w, const struct gguf_file *src, uint64_t i,
                                   struct mw_err *err);
/* Set general.alignment (u32 power of two, 1..1 MiB) and use it. Default 32,
 * key not written. */
enum mw_status gguf_writer_set_alignment(struct gguf_writer *w, uint32_t align, struct mw_err *err);

/* Write the memwall.checksum.* keys (default true). Off only to reproduce
 * other writers' bytes exactly (tests against ggml's own output). */
enum mw_status gguf_writer_set_checksums(struct gguf_writer *w, bool on, struct mw_err *err);

/* Declare the next tensor. n_dims 1..4, ne[j] >= 1, type valid, ne[0] a
 * multiple of the block size, name 1..63 bytes and unique. */
enum mw_status gguf_writer_add_tensor(struct gguf_writer *w, const char *name, uint32_t type,
                                      uint32_t n_dims, const uint64_t *ne, struct mw_err *err);

/* Create the temp file beside path and write the header. After this no KV or
 * tensor may be added. MW_E_IO / MW_E_NOSPACE on failure. */
enum mw_status gguf_writer_open(struct gguf_writer *w, const char *path, struct mw_err *err);
/* Append n bytes of tensor data (crossing tensor boundaries is allowed; the
 * writer inserts the padding). MW_E_USAGE if more data than declared. */
enum mw_status gguf_writer_write(struct gguf_writer *w, const void *data, size_t n,
                                 struct mw_err *err);
/* All data written? Patch checksums, fsync, rename onto path, fsync the
 * directory. MW_E_USAGE if data is missing. */
enum mw_status gguf_writer_finish(struct gguf_writer *w, struct mw_err *err);
/* In-memory output: the same bytes gguf_writer_open + gguf_writer_finish
 * would put in the file, in one malloc'd buffer. gguf_writer_open_mem takes
 * the place of gguf_writer_open (allocates the whole output at once:
 * MW_E_NOMEM); data is streamed with gguf_writer_write as for a file;
 * gguf_writer_finish_mem takes the place of gguf_writer_finish and hands the
 * buffer to the caller, who free()s *buf. gguf_writer_finish on a writer
 * opened in memory (and gguf_writer_finish_mem on one opened on a file) is
 * MW_E_USAGE. */
enum mw_status gguf_writer_open_mem(struct gguf_writer *w, struct mw_err *err);
enum mw_status gguf_writer_finish_mem(struct gguf_writer *w, void **buf, uint64_t *size,
                                      struct mw_err *err);
/* Bytes the finished file will have (valid after all tensors are added). */
uint64_t gguf_writer_file_size(const struct gguf_writer *w);

/* --- checksums (used by the writer and by verify) --- */
/* XXH3-64 of a tensor's data, as stored in memwall.checksum.tensors. */
uint64_t gguf_hash_tensor(const void *data, size_t n);
/* Header checksum of f (formats above); false if f has no
 * memwall.checksum.header key of type UINT64. */
bool gguf_hash_header(const struct gguf_file *f, uint64_t *out);

#endif /* MW_GGUF_H */
