/*
 * hf/hf_int.h — internals shared by the hf/ sources (and tests/check_hf.c).
 * No other module may include this header.
 */
#ifndef MW_HF_INT_H
#define MW_HF_INT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <cjson/cJSON.h>

#include "hf/hf.h"

/* "[a, b, ...]" of t's shape into buf (messages). */
void hf_st_shape_str(const struct hf_st_tensor *t, char *buf, size_t n);

struct hf_st {
    char *path;
    struct mw_map map;   /* file-backed: the mapping; else data/size unused */
    bool mapped;
    const uint8_t *base; /* whole file bytes */
    uint64_t size;
    uint64_t hdr_len;
    uint64_t n;
    struct hf_st_tensor *t; /* sorted by name */
    char *names;            /* one allocation holding every name */
    uint64_t n_meta;
    char **meta;            /* 2 * n_meta strings: key, value, key, value... */
};

struct hf_model_ref {
    uint32_t shard;
    uint32_t idx;
};

struct hf_model {
    char *dir;
    struct hf_config cfg;
    uint64_t n_shards;
    struct hf_st **shards;     /* sorted by file name */
    uint64_t n;
    struct hf_model_ref *order;   /* source order */
    struct hf_model_ref *by_name; /* sorted by name */
};

struct hf_plan {
    const struct hf_model *m;
    uint64_t n;
    struct hf_plan_tensor *t;
    uint64_t total_bytes;
    float *rope_freqs;        /* generated rope_freqs.weight data, or NULL */
    float *f16_table;         /* [65536] mw_f16_to_f32 of every bit pattern */
    uint16_t *bf16_to_f16;    /* [65536] mw_f32_to_f16(mw_bf16_to_f32(h)): the two-step result */
    uint16_t *f16_to_bf16;    /* [65536] mw_f32_to_bf16(mw_f16_to_f32(h)) */
    char source_dtype[32];
    /* stacked experts: [(layer * 3 + proj) * n_expert + expert], proj in the
     * order the stacked tensors are written; NULL for dense models */
    const struct hf_st_tensor **xsrc;
    const struct hf_st **xshard;
    /* the experts' 2-D slabs of fused 3-D tensors (transformers >= 5 layout),
     * same slots; NULL when the checkpoint has none */
    struct hf_st_tensor *xview;
};

/* --- hf_json.c: the JSON wrapper ------------------------------------------- */

/* Parse the n bytes of buf (no NUL needed; any size, copied) as one JSON
 * value with cJSON. Rejected, MW_E_FORMAT with err->path = name: an empty
 * text, a NUL byte, a syntax error, bytes other than white space after the
 * value — each at its byte offset (err->off) and its line and column, which
 * go into err->where ("line 2 column 7") when pos_in_where, else at the end
 * of the message (callers whose err->where names JSON paths only); and a
 * duplicate object key anywhere (cJSON keeps both), err->where naming its
 * JSON path. MW_E_NOMEM. The caller owns *out (cJSON_Delete). */
enum mw_status hf__json_parse(const void *buf, size_t n, const char *name, bool pos_in_where,
                              cJSON **out, struct mw_err *err);
/* First duplicate key among the members of obj (NULL if none). Allocates;
 * returns false on allocation failure. */
bool hf__util_json_dup(const cJSON *obj, const char **dup);
/* A JSON number that is an exact integer in [0, 2^53). */
bool hf__util_json_u64(const cJSON *v, uint64_t *out);

/* --- hf_config.c: files ----------------------------------------------------- */

/* Read a whole (small) file into a NUL-terminated heap buffer of *len bytes
 * (plus the NUL). Missing file: MW_E_FORMAT "does not exist"; larger than
 * max: MW_E_FORMAT; other failures MW_E_IO. err->path is set to path. */
enum mw_status hf__util_read_file(const char *path, uint64_t max, char **buf, size_t *len,
                             struct mw_err *err);
/* Join dir and name with '/' into a new heap string (NULL on overflow/OOM). */
char *hf__util_path_join(const char *dir, const char *name);
/* Does path exist (as anything)? */
bool hf__util_exists(const char *path);
/* Basename of a path, ignoring trailing slashes, into buf. */
void hf__util_basename(const char *path, char *buf, size_t n);

#endif /* MW_HF_INT_H */
