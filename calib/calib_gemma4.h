/*
 * calib/calib_gemma4.h — Gemma 4's memory on a device (`memwall plan`,
 * `memwall quant --fit-ram`): the per-layer shapes of a gemma4 model, from its
 * GGUF keys or its config.json, and what its runtime keeps resident.
 *
 * Gemma 4 differs from the families of calib_mem.c in three ways:
 *   - per-layer widths: sliding layers have head dim key_length_swa and
 *     head_count_kv[il] kv heads, full layers key_length and (26B-A4B, 31B)
 *     their own kv head count; the FFN width is per layer (E2B's double-wide
 *     MLPs in the shared-KV layers);
 *   - only the first n_layer - shared_kv_layers layers own a K/V cache (the
 *     others read the last sliding / full layer's before them); a sliding
 *     layer keeps the runtime's ring of min(ctx, window - 1 + batch)
 *     positions; the runtime's rows are all the widest layer's width
 *     (runtime/rt_kv.c), so that is what is counted;
 *   - per_layer_token_embd (E2B, E4B: n_layer x 256 values per vocabulary
 *     entry, most of the file) is read one row per token, mapped from the
 *     file and never loaded: it is file bytes, not resident bytes.
 * Resident set = the file's tensor data minus per_layer_token_embd + the KV
 * cache + the overhead of calib_mem_estimate (scratch, f32 norms, base).
 */
#ifndef MW_CALIB_GEMMA4_H
#define MW_CALIB_GEMMA4_H

#include <stdbool.h>
#include <stdint.h>

#include "calib/calib.h"
#include "core/mw.h"

#define CALIB_G4_MAX_LAYERS 512

struct calib_g4 {
    uint32_t n_layer, n_embd, n_head, n_vocab, n_ctx_train;
    uint32_t head_dim_swa, head_dim_full; /* key_length_swa, key_length */
    uint32_t n_swa;                       /* sliding window */
    uint32_t n_kv_shared;                 /* the last layers that own no K/V */
    uint32_t n_embd_per_layer;            /* 0: no per-layer embeddings */
    uint32_t n_expert, n_expert_used, n_ff_exp;
    bool swa[CALIB_G4_MAX_LAYERS];
    uint32_t n_head_kv[CALIB_G4_MAX_LAYERS];
    uint32_t n_ff[CALIB_G4_MAX_LAYERS];
};

struct gguf_file;
struct hf_config;

/* Is f a gemma4 model (general.architecture)? */
bool calib_g4_gguf_is(const struct gguf_file *f);
/* The shapes from f's gemma4.* keys. Errors: MW_E_FORMAT naming the key
 * (missing, wrong type, an array of the wrong length, more than
 * CALIB_G4_MAX_LAYERS layers, shared_kv_layers >= block_count). */
enum mw_status calib_g4_from_gguf(const struct gguf_file *f, struct calib_g4 *out,
                                  struct mw_err *err);
/* The shapes from a parsed gemma4 config.json (hf_gemma4.c validated it). */
void calib_g4_from_hf(const struct hf_config *c, struct calib_g4 *out);

/* K and V bytes of n_ctx positions in a cache of type kv, steps of n_batch
 * (0: CALIB_MEM_DEFAULT_BATCH): the layers that own a cache only, sliding
 * ones capped at their ring, every row as wide as the widest layer's (the
 * runtime's one-width cache, rt_kv_dim_max). *n_own, *n_own_swa, *swa_rows (may be NULL):
 * the layers that own a cache, the sliding ones among them, and the
 * positions each of those keeps. 0 on overflow or a q8_0 cache whose row is
 * not a multiple of 32. */
uint64_t calib_g4_kv_bytes(const struct calib_g4 *g, uint32_t n_ctx, uint32_t n_batch,
                           enum rt_kv_type kv, uint32_t *n_own, uint32_t *n_own_swa,
                           uint32_t *swa_rows);
/* calib_mem_estimate for g: the overhead of a llama-shaped model of g's
 * widest layer (full-layer head dim, widest FFN), the KV cache of
 * calib_g4_kv_bytes. Errors: those of calib_mem_estimate, MW_E_USAGE for a
 * q8_0 cache with a head dim not a multiple of 32. */
enum mw_status calib_g4_mem_estimate(const struct calib_g4 *g, const struct calib_mem_opts *o,
                                     struct calib_mem *out, struct mw_err *err);
/* The gemma4 fields of hp (calib_hparams_from_hf's gemma4 part): what the
 * runtime reads from the GGUF memwall convert writes for c. */
void calib_g4_hparams_from_hf(const struct hf_config *c, struct rt_hparams *hp);
/* Is name a tensor read from flash one row per token (not resident)? */
bool calib_g4_on_flash(const char *name);

#endif /* MW_CALIB_GEMMA4_H */
