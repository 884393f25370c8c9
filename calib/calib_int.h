/*
 * calib/calib_int.h — internals shared by calib/'s files: the thread pool,
 * the model's weight source, and a few helpers. Not for use outside calib/
 * and its tests.
 */
#ifndef MW_CALIB_INT_H
#define MW_CALIB_INT_H

#include "calib/calib.h"
#include "core/mw_pool.h"

#include <pthread.h>

// --- thread pool: core/mw_pool.h ---

/* [lo, hi) of n items for thread ith of nth (contiguous, balanced). */
static inline void calib__split(uint64_t n, unsigned ith, unsigned nth, uint64_t *lo, uint64_t *hi)
{
    *lo = n * ith / nth;
    *hi = n * (ith + 1) / nth;
}

// --- model (calib_model.c) ---

/* Tensors of one decoder layer the engine uses (GGUF short names). */
enum calib_tslot {
    CALIB_T_ATTN_NORM = 0,
    CALIB_T_FFN_NORM,
    CALIB_T_WQ, CALIB_T_WK, CALIB_T_WV, CALIB_T_WO, CALIB_T_WGATE, CALIB_T_WUP, CALIB_T_WDOWN,
    CALIB_T_BQ, CALIB_T_BK, CALIB_T_BV, CALIB_T_BO, CALIB_T_BGATE, CALIB_T_BUP, CALIB_T_BDOWN,
    /* family tensors (rt_hparams: qk_norm, post_norms, fused_qkv) */
    CALIB_T_Q_NORM, CALIB_T_K_NORM,        /* head_dim floats, applied per head */
    CALIB_T_ATTN_POST_NORM, CALIB_T_FFN_POST_NORM, /* n_embd: sandwich norms */
    CALIB_T_WQKV,                          /* attn_qkv.weight: q rows, k rows, v rows */
    /* mixture of experts (rt_hparams n_expert > 0): the router, the
     * stacked experts, qwen2moe's shared-expert gate. A MoE model's shared
     * expert (ffn_{gate,up,down}_shexp) sits in CALIB_T_WGATE/WUP/WDOWN,
     * n_ff_shexp wide; without one those slots are absent. */
    CALIB_T_GATE_INP,                      /* ffn_gate_inp.weight (n_expert, E), f32 */
    CALIB_T_GATE_EXPS, CALIB_T_UP_EXPS,    /* (n_expert, n_ff_exp, E) */
    CALIB_T_DOWN_EXPS,                     /* (n_expert, E, n_ff_exp) */
    CALIB_T_GATE_INP_SHEXP,                /* (E): the shared expert's sigmoid gate */
    CALIB_T_COUNT
};
/* With fused_gate_up, CALIB_T_WUP is ffn_up.weight of 2*n_ff rows (gate rows
 * first) and CALIB_T_WGATE is absent from the file; the engine hands the two
 * halves out as views. With fused_qkv, CALIB_T_WQ/WK/WV are views into
 * CALIB_T_WQKV. */

/* GGUF name of slot t of layer il of a model of hp into buf
 * ("blk.3.attn_q.weight"; a MoE model's CALIB_T_WGATE is
 * "blk.3.ffn_gate_shexp.weight"). */
void calib__tensor_name(const struct rt_hparams *hp, uint32_t il, enum calib_tslot t, char *buf,
                        size_t n);
/* Elements slot t must have for hp (0 for an absent optional bias is not
 * decided here: see calib__model_has). */
uint64_t calib__slot_elems(const struct rt_hparams *hp, enum calib_tslot t);
/* Whether layer il has slot t (weights and norms always; biases if present). */
bool calib__model_has(const struct calib_model *m, uint32_t il, enum calib_tslot t);
/* Load slot t of layer il as n f32 values into dst (n must equal
 * calib__slot_elems). Errors: MW_E_FORMAT (missing tensor, wrong size),
 * MW_E_IO, MW_E_NOMEM. */
enum mw_status calib__model_load(const struct calib_model *m, uint32_t il, enum calib_tslot t,
                                 float *dst, uint64_t n, struct mw_err *err);
/* Embedding rows: for every i < n_rows, dst[i*n_embd ..] = row ids[i] of
 * token_embd (ids sorted ascending, unique, < n_vocab), streaming the
 * tensor once. */
enum mw_status calib__model_embd_rows(const struct calib_model *m, const int32_t *ids,
                                      uint64_t n_rows, float *dst, struct mw_err *err);
/* rope_freqs.weight (n_rot/2 floats) into dst if the model has it; false
 * if not. */
bool calib__model_has_rope_freqs(const struct calib_model *m);
enum mw_status calib__model_rope_freqs(const struct calib_model *m, float *dst,
                                       struct mw_err *err);
/* LongRoPE (phi3): rope_factors_long.weight (long true) or
 * rope_factors_short.weight, n_rot/2 divisors, into dst; false / MW_E_FORMAT
 * when the model lacks it. */
bool calib__model_has_rope_factors(const struct calib_model *m, bool long_);
enum mw_status calib__model_rope_factors(const struct calib_model *m, bool long_, float *dst,
                                         struct mw_err *err);

// --- corpus (calib_corpus.c) ---

/* calib_corpus_parse with a cap on the decompressed size (fuzzing). */
enum mw_status calib__corpus_parse_capped(const void *buf, uint64_t n, const char *name,
                                          enum calib_corpus_fmt fmt, uint64_t max_bytes,
                                          struct calib_corpus **out, struct mw_err *err);
/* Offset of the first invalid UTF-8 sequence in s[0, n), or n if valid. */
size_t calib__utf8_check(const uint8_t *s, size_t n);

#endif /* MW_CALIB_INT_H */
