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

/* --- a budget over a plan (quant_budget.c) ---
 *
 * The whole allocation of `memwall quant --bpw/--size/--fit-ram`: build the
 * plan of (src, o) — o->rules.overrides are the user's overrides — and take
 * as items its tensors that the plan converts by a rule (not kept, not the
 * source type, not overridden); candidates QUANT_BUDGET_TYPES whose block
 * divides ne[0]. The sizes are checked first (an impossible budget is
 * refused before any loss is measured), then every item's loss is measured
 * under every candidate (quant_alloc_loss on at most QUANT_BUDGET_MAX_ROWS
 * evenly spaced rows, scaled up; per expert with a per-expert imatrix;
 * output.weight without imatrix entry weighs its columns by output_norm²),
 * solved (quant_alloc_solve) and applied as one exact-name override per
 * item after the user's (quant_overrides_add_exact). BPW: tensor data bytes
 * <= bpw * elements / 8. SIZE: the whole file quant_plan_file_size gives
 * (header, KVs, checksums, padding) <= file_bytes: the header the exact
 * entries add is first estimated, then the target is lowered by any excess
 * of the real layout until the file fits (at most 8 rounds).
 */
#define QUANT_BUDGET_MAX_ROWS 4096

/* Weights (elements) of all tensors of p: the denominator of its bpw. */
uint64_t quant_plan_n_elements(const struct quant_plan *p);

/* --- end-to-end sensitivity ---
 *
 * The losses above are squared output errors of each tensor in that
 * tensor's own units: how far the model's output distribution moves per
 * unit differs from tensor to tensor (depth, what reads the output, how the
 * norms downstream rescale it). A budget may carry a probe callback: after
 * measuring, quant_budget_allocate picks each item's probe type (the
 * candidate nearest QUANT_BUDGET_PROBE_BPW bits per weight, i-quants below 4
 * bits only where nothing else is a candidate) and hands all items to it;
 * the callback measures the model's output KL divergence to the unquantized
 * model (on calibration text) with that tensor alone quantized to that type.
 * Every candidate loss of the item is then multiplied by
 * kld / loss(probe type), so that the losses become estimates of the
 * output KL divergence and the solver compares tensors in one unit. An item
 * the callback could not measure (kld < 0) or whose probe loss is 0 takes
 * the median factor of the others; factors are kept within
 * QUANT_BUDGET_PROBE_CLAMP of that median either way. */
#define QUANT_BUDGET_PROBE_BPW 3.5
#define QUANT_BUDGET_PROBE_CLAMP 1e4

struct quant_budget_probe {
    const struct quant_tensor_desc *t; /* the tensor */
    uint64_t src_index;                /* its index in the source */
    const float *imatrix;  /* the quantizer's importance (the plan entry's: per expert, ne[2]
                            * times ne[0] floats, for a 3-D tensor), or NULL */
    uint32_t type;         /* the probe type */
    double loss;           /* the item's loss under it */
    double kld;            /* out: mean KL divergence per position; < 0: not measured */
};
typedef enum mw_status (*quant_budget_probe_fn)(void *ud, struct quant_budget_probe *p,
                                                uint64_t n, struct mw_err *err);

enum quant_budget_kind { QUANT_BUDGET_BPW = 1, QUANT_BUDGET_SIZE = 2 };

struct quant_budget {
    enum quant_budget_kind kind;
    double bpw;          /* BPW: bits per weight of the tensor data */
    uint64_t file_bytes; /* SIZE: bytes of the whole file */
    const char *what;    /* how refusals name the budget ("--bpw", "--size") */
    /* memwall.quant.method / method_params values that are known only
     * later (--corpus): the plans measured carry placeholders of these
     * lengths (0: the source's own), so the file can only come out smaller
     * than predicted. */
    uint32_t reserve_method, reserve_method_params;
    unsigned n_threads; /* for the loss measurement; 0: 1 */
    /* candidates: the k-quants, Q8_0 and F16 only (no IQ1_S..IQ3_S), for a
     * runtime without i-quant kernels; also the ablation's baseline */
    bool no_iquants;
    /* The method that will quantize the chosen types (GPTQ under --corpus)
     * lowers the output error of some types below what rounding's loss
     * says: a candidate whose type has method_type[type] set counts
     * method_gain x its rounding loss (0 < gain <= 1; 0 or NULL: 1), when
     * the allocated tensors average at least 3 bits per weight. Without
     * it the allocator would trade GPTQ-quantized k-quants for i-quants that
     * only round (quant_methods_budget sets it; README "Below 4 bits"). */
    const bool *method_type; /* indexed by ggml type id, GGUF_TYPE_COUNT entries */
    double method_gain;
    /* tensors the method does not quantize (NULL-terminated names; the
     * embedding table, which no activation multiplies): no gain for them */
    const char *const *method_skip;
    quant_budget_probe_fn probe; /* NULL: the losses as measured (see above) */
    void *probe_ud;
};

/* One allocated tensor. */
struct quant_budget_row {
    const struct quant_tensor_desc *t;
    uint32_t type;    /* chosen */
    uint64_t bytes;   /* its cost (SIZE: padded to 32) */
    double loss;      /* estimated loss under type */
    double loss_q8_0; /* under Q8_0, or -1 when Q8_0 was no candidate */
    /* with a probe: the probe's type, its measured KL divergence (< 0: not
     * measured) and the factor the losses were multiplied by; else 0, -1, 1 */
    uint32_t probe_type;
    double probe_kld, probe_scale;
};

struct quant_budget_result {
    /* the user's overrides followed by one exact entry per row: use as
     * o->rules.overrides of the final plan (freed by quant_budget_result_free) */
    struct quant_overrides *overrides;
    struct quant_budget_row *rows; /* plan order */
    uint64_t n_rows;
    struct quant_alloc_result solve;
    uint64_t file_bytes; /* predicted: quant_plan_file_size of the final plan */
    uint64_t data_bytes; /* its tensor data (quant_plan_out_bytes) */
    uint64_t n_elements; /* weights of all its tensors */
    bool refused; /* with MW_E_USAGE: the budget cannot be met (err says why) */
    /* with a probe: Spearman's rank correlation across the probed items
     * between the measured losses and the measured KL divergences at the
     * probe types (how well the loss alone ranks tensors), and the number
     * of items probed; else NaN and 0 */
    double probe_rank_corr;
    uint64_t n_probed;
    bool probe_asked; /* the budget had a probe and called it */
};

/* Errors: MW_E_USAGE with refused set (no tensor to allocate, a budget below
 * the smallest file or header), those of quant_plan_build,
 * quant_alloc_loss/read_f32 (naming the tensor), MW_E_VALUE (the file did
 * not fit after the rounds), MW_E_NOMEM. o is not modified (its log is not
 * called: the final plan repeats the notices). */
enum mw_status quant_budget_allocate(const struct quant_source *src, const struct quant_opts *o,
                                     const struct quant_budget *b,
                                     struct quant_budget_result *out, struct mw_err *err);
void quant_budget_result_free(struct quant_budget_result *r); /* NULL-safe, idempotent */

#endif /* MW_QUANT_ALLOC_H */
