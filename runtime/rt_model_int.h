/*
 * runtime/rt_model_int.h — the model loader's internals shared by its
 * files: rt_model.c (the model's life), rt_model_hparams.c (the checked key
 * readers, the common and family keys), rt_model_tensor.c (the checked
 * tensor readers), rt_model_bind.c (the tensor walk, the llama family's
 * dense and MoE layers) and the archs' rt_model_ssm.c, rt_model_gemma4.c,
 * rt_model_gptoss.c: the loader state and its checked readers. Not for use
 * outside those files.
 */
#ifndef MW_RT_MODEL_INT_H
#define MW_RT_MODEL_INT_H

#include <stdio.h>

#include "runtime/rt_int.h"

#define RT_MAX_LAYERS 512
#define RT_MAX_HEAD_DIM 1024 /* attention scratch and the rope table are sized by it */
#define RT_MAX_DIM (1u << 24) /* any one dimension (embedding, ffn, vocab) */

struct ld {
    const struct gguf_file *f;
    struct rt_model *m;
    struct mw_err *err;
    const char *arch; /* key prefix */
};

/* An error naming key (msg already formatted). */
enum mw_status rt__ld_fail_key(struct ld *L, const char *key, enum mw_status code, uint64_t off,
                               const char *msg);

#define FAIL_KEY(L, key, code, off, ...)                         \
    do {                                                         \
        char msg_[256];                                          \
        snprintf(msg_, sizeof msg_, __VA_ARGS__);                \
        return fail_key((L), (key), (code), (off), msg_);        \
    } while (0)

/* An error naming <arch>.<suffix>, a key read through archkey_* (no offset:
 * the value is wrong, not its bytes). */
#define FAIL_ARCHKEY(L, suffix, code, ...)                                 \
    do {                                                                   \
        char akey_[128];                                                   \
        snprintf(akey_, sizeof akey_, "%s.%s", (L)->arch, (suffix));       \
        FAIL_KEY((L), akey_, (code), MW_ERR_OFF_NONE, __VA_ARGS__);        \
    } while (0)

#define FAIL_T(L, name, code, off, ...)                                  \
    do {                                                                 \
        mw_err_set_path((L)->err, gguf_path((L)->f));                    \
        mw_err_set_where((L)->err, "tensor '%.64s'", (name));            \
        return MW_FAIL((L)->err, (code), (off), __VA_ARGS__);            \
    } while (0)

/* Keys (rt_model_hparams.c): the value of key (NULL if absent; *off its offset); a
 * u32 <arch>.<suffix> (or a uniform per-layer array), default def when absent
 * and not required; a range check naming <arch>.<suffix>. */
const struct gguf_value *rt__ld_kv_find(const struct ld *L, const char *key, uint64_t *off);
enum mw_status rt__ld_archkey_u32(struct ld *L, const char *suffix, bool required, uint32_t def,
                                  uint32_t *out, bool *present);
enum mw_status rt__ld_archkey_f32(struct ld *L, const char *suffix, bool required, float def,
                                  float *out);
enum mw_status rt__ld_range_u32(struct ld *L, const char *suffix, uint32_t v, uint32_t lo,
                                uint32_t hi);
/* Every hyper-parameter of the graph (rt_model_hparams.c): the common keys,
 * the expert keys, then the arch's own (the read_* below for theirs). */
enum mw_status rt__ld_read_hparams(struct ld *L);
/* <arch>.rope.scaling.original_context_length into n_ctx_orig, checked. */
enum mw_status rt__ld_read_ctx_orig(struct ld *L);
/* Tensors (rt_model_tensor.c): the ggml type's name; "AxBxC" of a shape
 * into buf; a tensor of exact shape [ne0]
 * (ne1 == 0) or [ne0, ne1]; a weight matrix with a kernel; an f32/f16/bf16
 * vector decoded into the model's float buffer at *pos (counted only in
 * the first pass); a tensor that must be absent. */
const char *rt__ld_type_name(uint32_t t);
void rt__ld_shape_str(char *buf, size_t n, const uint64_t ne[GGUF_MAX_DIMS], uint32_t n_dims);
enum mw_status rt__ld_find_tensor(struct ld *L, const char *name, bool required, uint64_t ne0,
                                  uint64_t ne1, const struct gguf_tensor **out);
enum mw_status rt__ld_get_weight(struct ld *L, const char *name, bool required, uint64_t n_in,
                                 uint64_t n_out, uint64_t n_exp, struct rt_weight *w);
enum mw_status rt__ld_get_matrix(struct ld *L, const char *name, bool required, uint64_t n_in,
                                 uint64_t n_out, struct rt_weight *w);
enum mw_status rt__ld_get_vector(struct ld *L, const char *name, bool required, uint64_t n,
                                 const float **out, uint64_t *pos);
enum mw_status rt__ld_get_table(struct ld *L, const char *name, bool required, uint64_t ne0,
                                uint64_t ne1, const float **out, uint64_t *pos);
enum mw_status rt__ld_refuse_tensor(struct ld *L, const char *name, const char *why);
/* The walk (rt_model_bind.c): one MoE layer's FFN; every tensor of the
 * graph, the owned floats counted into *n_floats (views filled when
 * m->layers and m->fbuf exist). */
enum mw_status rt__ld_load_moe_layer(struct ld *L, uint32_t il, struct rt_layer *ly);
enum mw_status rt__ld_load_tensors(struct ld *L, uint64_t *n_floats);

/* The gated delta net archs (rt_model_ssm.c): nextn_predict_layers (n_layer
 * drops the MTP blocks), the ssm.* keys and IMROPE sections, one layer's
 * tensors. */
enum mw_status rt__ld_read_nextn(struct ld *L);
enum mw_status rt__ld_read_ssm(struct ld *L);
enum mw_status rt__ld_load_hybrid_layer(struct ld *L, uint32_t il, struct rt_layer *ly,
                                        uint64_t *pos);

/* gpt-oss (rt_model_gptoss.c): its keys (after the common ones), one layer's
 * tensors. */
enum mw_status rt__ld_read_gptoss(struct ld *L);
enum mw_status rt__ld_load_gptoss_layer(struct ld *L, uint32_t il, struct rt_layer *ly,
                                        uint64_t *pos);

/* gemma4 (rt_model_gemma4.c): its keys (after the common ones; per-layer
 * arrays read layer by layer), the per-layer embedding tensors (before the
 * layers), one layer's tensors. */
enum mw_status rt__ld_read_gemma4(struct ld *L);
enum mw_status rt__ld_load_gemma4_globals(struct ld *L, uint64_t *pos);
enum mw_status rt__ld_load_gemma4_layer(struct ld *L, uint32_t il, struct rt_layer *ly,
                                        uint64_t *pos);

/* The short names the loader's files use. */
#define fail_key rt__ld_fail_key
#define kv_find rt__ld_kv_find
#define archkey_u32 rt__ld_archkey_u32
#define range_u32 rt__ld_range_u32
#define archkey_f32 rt__ld_archkey_f32
#define read_hparams rt__ld_read_hparams
#define read_ctx_orig rt__ld_read_ctx_orig
#define type_name rt__ld_type_name
#define shape_str rt__ld_shape_str
#define find_tensor rt__ld_find_tensor
#define get_weight rt__ld_get_weight
#define get_matrix rt__ld_get_matrix
#define get_vector rt__ld_get_vector
#define get_table rt__ld_get_table
#define refuse_tensor rt__ld_refuse_tensor
#define load_moe_layer rt__ld_load_moe_layer
#define load_tensors rt__ld_load_tensors
#define read_nextn rt__ld_read_nextn
#define read_ssm rt__ld_read_ssm
#define load_hybrid_layer rt__ld_load_hybrid_layer
#define read_gemma4 rt__ld_read_gemma4
#define load_gemma4_globals rt__ld_load_gemma4_globals
#define load_gemma4_layer rt__ld_load_gemma4_layer
#define read_gptoss rt__ld_read_gptoss
#define load_gptoss_layer rt__ld_load_gptoss_layer

#endif /* MW_RT_MODEL_INT_H */
