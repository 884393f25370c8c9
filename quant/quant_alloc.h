/*
 * quant/quant_alloc.h — mixed precision to a budget (`memwall quant --bpw B |
 * --size S | --fit-ram R`): measure how much each quantizable tensor loses
 * under each candidate type, then choose one type per tensor so that the
 * total estimated loss is minimal and the bytes fit a budget.
 *
 * Loss of tensor W (rows i, columns j) under type t:
 *     L(W, t) = Σ_i Σ_j imp_j (w_ij − deq(quant_t(w_i))_j)²
 * with imp the importance (imatrix: mean x_j² of the layer's inputs on the
 * calibration data), so L estimates the squared output error Σ ||x Wᵀ − x Qᵀ||²
 * per calibration row under a diagonal input covariance. The rows are
 * quantized exactly as the pipeline does (quant_rows, ggml's algorithms,
 * the imatrix as quant weights), so the error is the one the file gets
 * (before GPTQ/AWQ, which only lower it).
 *
 * Allocation: a multiple-choice knapsack — choose c_k per item k
 * minimizing Σ loss(k, c_k) s.t. Σ bytes(k, c_k) <= budget. Two solvers,
 * the better result kept:
 *   - Lagrangian greedy on each item's lower convex hull of (bytes, loss):
 *     start at every item's cheapest point, repeatedly take the hull step
 *     with the largest loss decrease per byte that still fits, then fill the
 *     leftover with any single upgrade that fits (best ratio first).
 *     Optimal whenever the budget lands on a hull breakpoint.
 *   - exact dynamic programming over the bytes above every item's minimum,
 *     in units g = the gcd of all byte differences (exact), or a multiple of
 *     it when the budget would need more than QUANT_ALLOC_MAX_STATES units
 *     (byte costs rounded UP to the unit: the budget is never exceeded, the
 *     solution may waste < one unit per item).
 * Deterministic (ties: fewer bytes, then lower item index/candidate order).
 *
 * Library rules: nothing here prints; errors through struct mw_err.
 */
#ifndef MW_QUANT_ALLOC_H
#define MW_QUANT_ALLOC_H

#include <stdbool.h>
#include <stdint.h>

#include "core/mw.h"
#include "quant/quant.h"

#define QUANT_ALLOC_MAX_STATES ((uint64_t)1 << 18)

struct quant_alloc_cand {
    uint32_t type;  /* ggml type (informational for the solver) */
    uint64_t bytes; /* cost (what counts against the budget) */
    double loss;    /* estimated loss, >= 0 and finite */
};

struct quant_alloc_item {
    uint32_t n_cand; /* >= 1 */
    const struct quant_alloc_cand *cand;
};

struct quant_alloc_result {
    uint64_t bytes; /* Σ bytes of the choice */
    double loss;    /* Σ loss of the choice */
    uint64_t unit;  /* DP byte unit used (1 = exact) */
    bool dp_exact;  /* the DP ran at the exact unit (result is optimal) */
};

/* Choose choice[k] (an index into items[k].cand) for the n items. Errors:
 * MW_E_USAGE (an item without candidates, a negative or non-finite loss),
 * MW_E_VALUE (budget below Σ min bytes: the message gives that minimum),
 * MW_E_NOMEM. */
enum mw_status quant_alloc_solve(const struct quant_alloc_item *items, uint64_t n,
                                 uint64_t budget, uint32_t *choice, struct quant_alloc_result *res,
                                 struct mw_err *err);

/* Loss of n_rows rows of n_per_row floats x under type t: each row
 * quantized by quant_rows (qimp: the quantizer's importance, n_per_row
 * floats or NULL) and decoded; Σ imp_j (x − deq)² in double, rows in order
 * (imp NULL: 1). Deterministic for every n_threads. Errors: those of
 * quant_rows (MW_E_USAGE for a type that cannot be produced or a row length
 * not a multiple of its block), MW_E_NOMEM. */
enum mw_status quant_alloc_loss(uint32_t t, const float *x, uint64_t n_rows, uint64_t n_per_row,
                                const float *qimp, const float *imp, unsigned n_threads,
                                double *loss, struct mw_err *err);

/* Read tensor i of src entirely as f32 (*x malloc'ed, n_rows x ne[0]; the
 * caller frees). Only F32/F16/BF16 or other decodable types. Errors:
 * MW_E_UNSUPPORTED (undecodable type), MW_E_NOMEM, the source's read errors. */
enum mw_status quant_alloc_read_f32(const struct quant_source *src, uint64_t i, float **x,
                                    uint64_t *n_rows, struct mw_err *err);

#endif /* MW_QUANT_ALLOC_H */
