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
    /* index maps of the gathers (hf_plan_tensor row_map / col_map) */
    uint32_t *maps[8];
    uint32_t n_maps;
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
/* An error about tensor t of safetensors file sh: the file, "tensor 'name'"
 * and the byte offset of its header entry, with the formatted message. */
enum mw_status hf__tensor_fail(struct mw_err *err, enum mw_status code, const struct hf_st *sh,
                               const struct hf_st_tensor *t, const char *fmt, ...)
    __attribute__((format(printf, 5, 6)));
/* Parse "model.layers.<N>.<rest>" (N without leading zeros, at most 10^6);
 * false if name has another form. */
bool hf__parse_layer(const char *name, uint64_t *layer, const char **rest);
/* A finished plan's totals: p->total_bytes (overflow-checked) and
 * p->source_dtype, the dtypes seen joined by '+' in a fixed order, then
 * extra (a packed source format such as "MXFP4") if not NULL. */
/* Allocates and fills p's three 65536-entry dtype tables (f16_table,
 * bf16_to_f16, f16_to_bf16); false when out of memory (hf_plan_free frees
 * what was allocated). */
bool hf__plan_tables(struct hf_plan *p);
enum mw_status hf__plan_totals(struct hf_plan *p, const bool *dt_seen, const char *extra,
                               struct mw_err *err);
bool hf__util_json_dup(const cJSON *obj, const char **dup);
/* A JSON number that is an exact integer in [0, 2^53). */
bool hf__util_json_u64(const cJSON *v, uint64_t *out);

/* --- hf_files.c: files ------------------------------------------------------- */

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

/* --- hf_config.c: shared JSON readers ---------------------------------------- */

/* Member lookup; JSON null counts as absent. */
const cJSON *hf__cfg_member(const cJSON *obj, const char *key);
/* MW_E_FORMAT / code naming the JSON path jpath (err->where). */
enum mw_status hf__cfg_fail(struct mw_err *err, enum mw_status code, const char *jpath,
                            const char *fmt, ...) __attribute__((format(printf, 4, 5)));
/* Integer key prefix+key in [lo, hi]; absent: *out = def unless required. */
enum mw_status hf__cfg_u32(const cJSON *obj, const char *prefix, const char *key, bool required,
                           uint32_t def, uint32_t lo, uint32_t hi, uint32_t *out,
                           const char *why, struct mw_err *err);
/* Positive finite number; absent: *present = false (error if required). */
enum mw_status hf__cfg_num(const cJSON *obj, const char *prefix, const char *key, bool required,
                           double *out, bool *present, const char *why, struct mw_err *err);

/* --- hf_config_qwen35.c: the gated delta net families ---------------------- */

/* config.json of Qwen3_5(Moe)For{CausalLM,ConditionalGeneration} and
 * Qwen3NextForCausalLM into c (c->arch, hf_arch_name, gguf_arch set). */
enum mw_status hf__cfg_qwen35(const cJSON *root, struct hf_config *c, struct mw_err *err);
/* After the checkpoint is indexed: qwen3next's MTP block count from its
 * mtp.layers.N tensors when config.json does not give it. */
void hf__qwen35_count_mtp(struct hf_model *m);
/* torch.exp on a float32 tensor (SLEEF's expf_u10 with FMA, bit for bit). */
float hf__torch_expf(float d);

/* --- hf_arch_qwen35.c: their tensor names and gathers ---------------------- */

enum { HF_LAYER_LINEAR, HF_LAYER_FULL, HF_LAYER_MTP };
/* Layer kind of blk.layer: gated delta net, gated full attention, MTP block. */
int hf__qwen35_layer_kind(const struct hf_config *c, uint64_t layer);
/* The name the mapping sees for HF tensor name (*out: name or buf): false
 * when the tensor is skipped (the vision tower). */
bool hf__qwen35_name(const struct hf_config *c, const char *name, char *buf, size_t n,
                     const char **out);
/* The HF name of per-layer tensor rest of blk.layer (messages). */
void hf__qwen35_hf_name(const struct hf_config *c, uint64_t layer, const char *rest, char *buf,
                        size_t n);
enum { HF_MAP_QKV, HF_MAP_V, HF_MAP_HEAD, HF_MAP_QKVZ_QKV, HF_MAP_QKVZ_Z, HF_MAP_COUNT };
/* The gathers' index maps for c, allocated in p (NULL where c needs none):
 * QKV (2*Hk*S + Hv*Sv rows: the V rows reordered), V (Hv*Sv), HEAD (Hv);
 * qwen3next's QKVZ_QKV / QKVZ_Z (source rows of in_proj_qkvz). */
enum mw_status hf__qwen35_maps(struct hf_plan *p, const struct hf_config *c,
                               const uint32_t *maps[HF_MAP_COUNT], struct mw_err *err);

/* --- hf_config_quant.c: quantization_config -------------------------------- */

/* config.json's quantization_config into c->quant (absent: HF_QM_NONE).
 * Refused naming the JSON path: an unknown quant_method or format, FP8 E5M2,
 * a weight_block_size / block_structure that is not two positive integers,
 * several config groups, weights that are not 8-bit floats. */
enum mw_status hf__cfg_quant(const cJSON *root, struct hf_config *c, struct mw_err *err);

/* --- hf_fp8.c: FP8 (E4M3) source weights ----------------------------------- */

struct hf_fp8 {
    const uint8_t *scale;   /* the scale tensor's bytes (F32, BF16 or F16) */
    enum hf_dtype sdt;
    uint64_t b0, b1;        /* one scale per b0 rows x b1 columns */
    uint64_t scols;         /* scales per grid row */
    float lut[256];         /* E4M3 byte -> its F32 value */
};
/* Is name a scale tensor of c's quantization method (not converted)? */
bool hf__fp8_is_scale(const struct hf_config *c, const char *name);
/* The scale of FP8 weight t of m, checked: present, F32/BF16/F16, a shape
 * that covers t in the configured blocks (or one per tensor / row), every
 * value finite. Errors MW_E_FORMAT / MW_E_UNSUPPORTED naming the tensor. */
enum mw_status hf__fp8_open(const struct hf_model *m, const struct hf_st *sh,
                            const struct hf_st_tensor *t, struct hf_fp8 *f, struct mw_err *err);
/* Source row sr of n bytes (column k is source column cm[k] when cm is not
 * NULL) -> F32: E4M3 value × its block's scale, one F32 product. */
void hf__fp8_row(const struct hf_fp8 *f, const uint8_t *src, uint64_t sr, const uint32_t *cm,
                 float *dst, uint64_t n);
/* Can the plan read t: F16/BF16/F32, or F8_E4M3 with a valid scale? */
enum mw_status hf__src_dtype_ok(const struct hf_model *m, const struct hf_st *sh,
                                const struct hf_st_tensor *t, struct mw_err *err);
/* A weight scale tensor t must belong to an FP8 weight of m. */
enum mw_status hf__fp8_scale_owner(const struct hf_model *m, const struct hf_st *sh,
                                   const struct hf_st_tensor *t, struct mw_err *err);

/* --- hf_kv.c: a family's "<arch>.<suffix>" keys ---------------------------- */

/* A key list being written: each call writes one key unless an earlier one
 * failed (k->s keeps the first failure), so a family's writer lists its keys
 * and returns k->s. */
struct hf_kvs {
    struct gguf_writer *w;
    const char *arch;   /* the key prefix, c->gguf_arch */
    struct mw_err *err;
    enum mw_status s;
    char key[96];
};
void hf__kvs_init(struct hf_kvs *k, struct gguf_writer *w, const char *arch, struct mw_err *err);
void hf__kv_u32(struct hf_kvs *k, const char *suffix, uint32_t v);
void hf__kv_f32(struct hf_kvs *k, const char *suffix, float v);
void hf__kv_str(struct hf_kvs *k, const char *suffix, const char *v);
void hf__kv_arr(struct hf_kvs *k, const char *suffix, enum gguf_vtype type, const void *v,
                uint64_t n);
/* general.file_type (no prefix), where the converter writes it among the
 * family's keys */
void hf__kv_file_type(struct hf_kvs *k, uint32_t ftype);

/* --- hf_gemma4.c: Gemma 4 (config, tensors, keys) ------------------------ */

/* config.json of Gemma4ForCausalLM / Gemma4ForConditionalGeneration into c. */
enum mw_status hf__cfg_gemma4(const cJSON *root, struct hf_config *c, struct mw_err *err);
/* The conversion plan of a gemma4 checkpoint (hf_plan_build's). */
enum mw_status hf__gemma4_plan(const struct hf_model *m, enum hf_out_type ot, struct hf_plan **out,
                               struct mw_err *err);
/* The gemma4.* keys in llama.cpp's converter's order (general.file_type among them). */
enum mw_status hf__gemma4_kvs(struct gguf_writer *w, const struct hf_config *c, enum hf_out_type ot,
                              struct mw_err *err);

/* --- hf_gptoss.c: gpt-oss (config, tensors, keys, MXFP4 repacking) ------- */

/* config.json of GptOssForCausalLM into c. */
enum mw_status hf__cfg_gptoss(const cJSON *root, struct hf_config *c, struct mw_err *err);
/* The conversion plan of a gpt-oss checkpoint (hf_plan_build's). */
enum mw_status hf__gptoss_plan(const struct hf_model *m, enum hf_out_type ot, struct hf_plan **out,
                               struct mw_err *err);
/* The gpt-oss.* keys in llama.cpp's converter's order (general.file_type among them). */
enum mw_status hf__gptoss_kvs(struct gguf_writer *w, const struct hf_config *c, enum hf_out_type ot,
                              struct mw_err *err);
/* The bytes of an HF_XFORM_MXFP4 / HF_XFORM_SPLIT entry through sink. */
enum mw_status hf__gptoss_stream(const struct hf_plan_tensor *e, size_t chunk_bytes, hf_sink_fn sink,
                                 void *ud, struct mw_err *err);

#endif /* MW_HF_INT_H */
