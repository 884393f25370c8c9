/*
 * methods/methods.h — calibration-aware quantization methods on top of
 * the ggml block formats of quant.h: GPTQ (Hessian-based error
 * compensation) and AWQ (activation-aware per-input-channel scaling, folded
 * into the producing norm / linear layer). Library mw_methods (links
 * OpenBLAS; the BLAS-free mw_quant does not).
 *
 * GPTQ's quantization grid is the ggml block format itself: when the
 * column sweep reaches the first column of a ggml block (32 or 256
 * columns), that block's scales/mins are chosen from the CURRENT
 * (error-compensated) weights by quant's importance-weighted search
 * (QUANT_MODE_BEST, importance = diag(H) of the block's columns); the
 * block's columns are then rounded one at a time to that fixed grid, each
 * rounding error spread over the remaining columns through the upper
 * Cholesky factor of H^-1 (lazy updates in blocks of `block` columns, a
 * multiple of the ggml block). The blocks written are ordinary blocks of
 * the type (llama.cpp reads them as any other).
 *
 * Determinism: rows are independent given H; threads split rows, every sum
 * runs in a fixed order, the lazy update is an OpenBLAS GEMM (which splits
 * outputs, never inner sums); the Cholesky factorizations run on one
 * thread. Same inputs -> same bytes for every n_threads.
 *
 * Library rules: nothing here prints; errors through struct mw_err.
 */
#ifndef MW_QUANT_METHODS_H
#define MW_QUANT_METHODS_H

#include <stdbool.h>
#include <stdint.h>

#include "core/mw.h"

/* Types GPTQ can place on their own grid: Q4_0 Q8_0 Q3_K Q4_K Q5_K Q6_K. */
bool quant_gptq_supported(uint32_t type);
/* What a budget allocation under a GPTQ method multiplies the rounding loss
 * of a GPTQ type by (quant_budget.method_gain): roughly GPTQ's output error
 * relative to rounding's. Chosen on calib.txt alone (KLD on its first 60 KB
 * of `quant --size 4449984/3622592 --corpus calib.txt` on tinyllama-8m, gains
 * 1, 0.6, 0.45, 0.35, 0.2: 0.002603/0.007394, 0.001910/0.007075,
 * 0.001872/0.006953, 0.001838/0.007358, the same); README "Below 4 bits". */
#ifndef QUANT_GPTQ_ALLOC_GAIN
#define QUANT_GPTQ_ALLOC_GAIN 0.45
#endif

struct quant_gptq_opts {
    float damp;         /* dampening: damp * mean(diag H) added to the diagonal; 0: 0.01 */
    uint32_t block;     /* lazy-update block (columns); 0: 128; rounded up to a
                         * multiple of the type's block */
    bool act_order;     /* sweep columns by descending diag(H), ggml block grids fixed
                         * from the uncompensated weights first ("static groups") */
    unsigned n_threads; /* 0: 1 */
};

/*
 * Quantize w (n_out rows x n_in columns, row-major, GGUF layout: a row is
 * one output channel) to type with GPTQ, given H = Σ x xᵀ over the
 * calibration inputs ((n_in x n_in) row-major, symmetric; not modified).
 * out: n_out rows of the type (n_out * row bytes). On return w holds the
 * dequantized values (what llama.cpp will compute with), so callers can
 * propagate the error to later layers. Columns whose H_jj is 0 (inputs
 * never active) are quantized as they are, without compensation.
 * With o->act_order the memory is 12 more bytes per weight (permuted
 * copy, per-element grid). Errors: MW_E_USAGE (unsupported type, n_in not a
 * multiple of its block), MW_E_VALUE (H not positive definite even with
 * 1000x the dampening, non-finite H), MW_E_NOMEM.
 */
enum mw_status quant_gptq(uint32_t type, float *w, uint64_t n_out, uint64_t n_in, const float *H,
                          const struct quant_gptq_opts *o, void *out, struct mw_err *err);

/* GPTQ in two steps, so that one factorization serves every weight that
 * reads the same input (q/k/v, gate/up) and the Hessian's own buffer holds
 * the factor (no second n_in² copy). quant_gptq = a copy of H,
 * prepare (retrying with more dampening), apply: the same bits.
 * prepare: H (n_in x n_in, symmetric, row-major) is DESTROYED: it becomes
 * the upper Cholesky factor U of (P (H + damp I) Pᵀ)^-1, P the act-order
 * permutation (perm[k] = the original column swept k-th; the identity
 * without act_order). damp = o->damp (0: 0.01) * mean(diag H) * 10^attempt;
 * dead columns (H_jj = 0) get 1 first. imp (n_in, original order) =
 * diag(H) + damp: the importance of each ggml block's grid search. Errors:
 * MW_E_VALUE non-finite H, or not positive definite — then *retry is true
 * while attempt < 3: call again with attempt + 1 on a fresh copy of H;
 * MW_E_NOMEM. */
enum mw_status quant_gptq_prepare(float *H, uint64_t n_in, const struct quant_gptq_opts *o,
                                  unsigned attempt, float *imp, uint32_t *perm, bool *retry,
                                  struct mw_err *err);
/* apply: quantize w (n_out x n_in) as quant_gptq does, with U, imp and perm
 * from quant_gptq_prepare under the same act_order (not modified). */
enum mw_status quant_gptq_apply(uint32_t type, float *w, uint64_t n_out, uint64_t n_in,
                                const float *U, const float *imp, const uint32_t *perm,
                                const struct quant_gptq_opts *o, void *out, struct mw_err *err);

/* Learned rounding (the `round` methods): coordinate descent on the
 * layer objective f = Σ_rows (w0 - v)ᵀ H (w0 - v), v the values the blocks
 * decode to. The ggml block grids stay as they are (every supported format
 * decodes element e as a_e * level + b_e, quant_gptq_supported); each
 * element's level moves to the integer that minimizes f with every other
 * level fixed (exact: f is quadratic in one level), sweep after sweep over
 * the columns until a sweep moves nothing or max_sweeps ran. Then (unless
 * no_scales) a pass over the sub-block scales of the k-quants (Q4_K/Q5_K
 * scale and min, Q3_K/Q6_K scale): each stored integer one step up and one
 * down, the sub-block's levels re-rounded to their current values on the
 * new grid and moved inside the sub-block (two passes), kept when f falls;
 * then the levels again; at most QUANT_ROUND_SCALE_PASSES such passes.
 * f never rises.
 * It starts from any quantization (GPTQ's, or importance-weighted
 * rounding's) and finds a rounding no single-level change improves, which
 * GPTQ's one greedy pass does not. Rows are independent given H; threads
 * split rows; G = E·H runs through mw_gemm: the same bits for any
 * n_threads.
 * q (n_out rows of type) is read and rewritten in place; w (n_out x n_in)
 * gets the values q decodes to; w0 (the weights before quantization,
 * n_out x n_in) and H (n_in x n_in, symmetric, undamped Σ x xᵀ) are read.
 * A non-finite value anywhere (H, w0, a gradient), or f not lower at the
 * end: q is left as it came and rs->fell_back is set (the caller records
 * it). Memory: 8 bytes per weight + one copy of q. Errors: MW_E_USAGE
 * (unsupported type, n_in not a multiple of its block), MW_E_NOMEM. */
#define QUANT_ROUND_SWEEPS 16
#define QUANT_ROUND_SCALE_PASSES 4
struct quant_round_opts {
    unsigned max_sweeps; /* 0: QUANT_ROUND_SWEEPS */
    bool no_scales;      /* levels only (no sub-block scale passes) */
    unsigned n_threads;  /* 0: 1 */
};
struct quant_round_stats {
    double before, after; /* f at the start and at the end */
    uint64_t flips;       /* levels moved */
    unsigned sweeps;      /* the most sweeps a row took */
    uint64_t bad_rows;    /* rows where a non-finite value appeared */
    bool fell_back;       /* q left as it came */
};
enum mw_status quant_round_refine(uint32_t type, const float *w0, uint64_t n_out, uint64_t n_in,
                                  const float *H, const struct quant_round_opts *o, void *q,
                                  float *w, struct quant_round_stats *rs, struct mw_err *err);

/* Output error of a quantized layer under H: Σ_rows (w - q)ᵀ H (w - q)
 * = ||X Wᵀ - X Qᵀ||² over the calibration rows (in double). */
double quant_output_error(const float *w, const float *q, uint64_t n_out, uint64_t n_in,
                          const float *H);



/* --- AWQ (methods_awq.c) --- */
/* s_j = mean_abs_j^alpha, normalized so that max(s)·min(s) = 1. */
void quant_awq_scales(const double *mean_abs, uint64_t n, float alpha, float *s);

/* One group of weights reading the same input (q/k/v, or gate/up). */
/* the most weights one input feeds: a delta-net layer's attn_qkv, attn_gate,
 * ssm_beta, ssm_alpha */
#define QUANT_AWQ_MAX_W 4
struct quant_awq_group {
    uint64_t n_in;
    unsigned n_w;              /* up to QUANT_AWQ_MAX_W */
    const float *w[QUANT_AWQ_MAX_W]; /* (n_out[k], n_in) row-major, not modified */
    uint64_t n_out[QUANT_AWQ_MAX_W];
    uint32_t type[QUANT_AWQ_MAX_W];  /* target ggml types */
    const double *mean_abs;    /* (n_in) mean |x_j| */
    const float *imp;          /* (n_in) importance (mean x²) for the quantizer */
    const float *H;            /* (n_in, n_in) Σ x xᵀ */
    int n_grid;                /* alpha = 0, 1/n_grid, ..., 1; 0: 20 */
    unsigned n_threads;
};
/* The alpha whose scaled-then-quantized weights give the lowest output
 * error on the calibration rows (alpha 0: no scaling). Errors: MW_E_USAGE
 * (a type quant_rows cannot produce), MW_E_NOMEM. */
enum mw_status quant_awq_group(const struct quant_awq_group *g, float *best_alpha,
                               struct mw_err *err);

/* --- the `memwall quant --corpus F --method M` driver (methods.c) --- */
#include "calib/calib.h"
#include "quant/quant.h"

/* Fold AWQ scales sc (n_in of group g) into the layer inside an on_group
 * callback for stage g: the group's input is divided by s where it is made
 * (ATTN_IN / FFN_IN: attn_norm / ffn_norm; ATTN_OUT: v's output rows (and
 * bias), in a delta-net layer ssm_norm (sc must be equal across the value
 * heads: ssm_norm[j] takes sc[j]); FFN_DOWN: up's rows (and bias)) and the
 * group's weight columns
 * multiplied by s — the float model computes the same outputs. ATTN_OUT
 * under grouped-query attention: q_per_kv = n_head / n_head_kv q heads read
 * one v row, so sc must be equal across them (v row kvh*head_dim + d takes
 * sc[kvh*q_per_kv*head_dim + d]). Errors: those of calib_layer_weight /
 * calib_layer_norm (MW_E_USAGE from another stage). */
enum mw_status quant_awq_fold(struct calib_layer *ly, enum calib_group g, const float *sc,
                              uint32_t q_per_kv, uint32_t head_dim, struct mw_err *err);

/* Whether AWQ may fold scales for group g's input in a model of hp, from
 * the family's structure alone (per-layer conditions — a bias, a weight left
 * unquantized — are checked when it runs); false with the reason in why (n
 * bytes, may be NULL):
 *   ATTN_IN  attn_norm -> q/k/v (or the fused attn_qkv): always — the norm
 *            multiplies each input channel; a per-head q/k RMSNorm (qwen3,
 *            gemma3) acts on Wq x, Wk x, which the fold leaves unchanged;
 *            gemma's (1 + w) norm is folded in its GGUF form (the stored
 *            multiplier w + 1).
 *   ATTN_OUT v -> attn_output: n_head a multiple of n_head_kv (one scale per
 *            v row, shared by the query heads of its group), full RoPE on q/k
 *            only (v is never rotated).
 *   FFN_IN   ffn_norm (gemma: pre_feedforward_layernorm) -> gate/up: always.
 *   FFN_DOWN up -> ffn_down: the FFN is act(gate) * up (SiLU or GELU-tanh
 *            gating, linear in up's rows; phi3: the up half of ffn_up).
 * gemma's post_attention_norm / post_ffw_norm never take a fold: they
 * normalize block outputs, which no quantized weight reads. */
bool quant_awq_fold_legal(const struct rt_hparams *hp, enum calib_group g, char *why, size_t n);

enum quant_method {
    QUANT_METHOD_RTN = 0,      /* importance-weighted rounding (QUANT_MODE_BEST, imatrix from
                                * the corpus), with sequential error propagation */
    QUANT_METHOD_GPTQ = 1,
    QUANT_METHOD_AWQ = 2,      /* AWQ scales on q/k/v and gate/up (folded into attn_norm /
                                * ffn_norm), on o (folded into v's rows, one scale per v row
                                * under GQA) and down (folded into up's rows), then RTN.
                                * Where quant_awq_fold_legal or a layer's tensors forbid a
                                * fold it is skipped; the log (quant_opts.log) says per fold
                                * in how many layers it was made, left (alpha 0) or skipped
                                * and why, and what the family's structure implies (q/k
                                * norm, gemma's sandwich and (1 + w) norms, phi3's fused
                                * attn_qkv / ffn_up: parts quantized row range by row range,
                                * GPTQ with the shared input's Hessian) */
    QUANT_METHOD_AWQ_GPTQ = 3, /* AWQ, then GPTQ on the scaled weights */
    QUANT_METHOD_GPTQ_ACT = 4, /* GPTQ with act-order (static groups) */
    QUANT_METHOD_AWQ_GPTQ_ACT = 5,
    /* learned rounding (quant_round_refine) after the method it names, on the
     * types GPTQ supports: rtn then round, gptq then round, ... Each layer's
     * undamped Hessian is kept beside GPTQ's factor (n_in² floats per input
     * group) */
    QUANT_METHOD_ROUND = 6,
    QUANT_METHOD_GPTQ_ROUND = 7,
    QUANT_METHOD_AWQ_ROUND = 8,
    QUANT_METHOD_AWQ_GPTQ_ROUND = 9,
};
/* Does method m run GPTQ (on the types quant_gptq_supported accepts)? */
bool quant_method_uses_gptq(enum quant_method m);

/* Does method m end with learned rounding (quant_round_refine)? */
bool quant_method_uses_round(enum quant_method m);

/* "rtn", "gptq", "awq", "awq+gptq", "gptq-act", "awq+gptq-act", "round",
 * "gptq+round", "awq+round", "awq+gptq+round". false if unknown. */
bool quant_method_parse(const char *s, enum quant_method *out);
const char *quant_method_name(enum quant_method m);

struct quant_methods_opts {
    enum quant_method method;
    const char *model_path;         /* the model calib opens (the GGUF given to memwall quant) */
    const char *corpus_path;
    struct calib_sample_opts samples; /* zeros: calib's defaults */
    struct quant_gptq_opts gptq;
    unsigned n_threads;             /* 0: 1 */
    uint64_t max_memory;            /* --max-memory: bound on calibration plus the method's
                                     * own buffers (quant_methods_peak_bytes); 0: none */
    bool awq_in_only;               /* AWQ on q/k/v and gate/up only (no v->o, up->down folds) */
    const char *scratch_prefix;     /* the spill file is created as PREFIX.tmp.spill-XXXXXX
                                     * and unlinked at once (pass the output path);
                                     * NULL: $TMPDIR or /tmp */
    /* resumable runs. work_dir: the quantized tensors, the hidden
     * states after each finished layer and a journal of finished layers are
     * kept there (methods_journal.c); NULL: none (the unlinked spill file).
     * resume: continue the journal found in work_dir (refused, naming the
     * reason, when it belongs to another model, corpus or options). */
    const char *work_dir;
    bool resume;
    bool no_probes;                 /* a budget under --corpus without the output-KL probes
                                     * (quant_methods_budget; --no-probes) */
    calib_stage_fn on_stage;        /* progress per stage and layer (calib_run's events) */
    void *on_stage_ud;
};

/* Output rows of each weight the AWQ alpha search quantizes (evenly spaced
 * when a weight has more): at most QUANT_AWQ_SEARCH_ROWS, fewer for wide
 * inputs (the error costs rows * n_in² per alpha): max(64, 2^33 / n_in²).
 * The error compared is a sum over rows and K-quant rows are independent,
 * so a row sample ranks alphas alike at a fraction of the cost. */
#define QUANT_AWQ_SEARCH_ROWS 1024
uint64_t quant_awq_search_rows(uint64_t n_out, uint64_t n_in);

/* Bytes the method's own buffers reach at their peak for a model of these
 * shapes (GPTQ: the factor of H^-1 of the widest input; one quantized
 * weight; AWQ search buffers) — what --max-memory leaves calibration is
 * max_memory minus this. */
uint64_t quant_methods_peak_bytes(const struct rt_hparams *hp, const struct quant_methods_opts *mo);

/*
 * Run the calibration forward over the corpus, layer by layer, and quantize
 * the seven linear weights of every layer with the method to the types the
 * plan for (base, qo) chooses (under a GPTQ or learned-rounding method
 * output.weight too, on the final hidden states after output_norm, when
 * its type has an a·level + b grid and the source is mapped); each layer's weights are replaced by their
 * dequantized values before the rest of the model is evaluated (sequential
 * error propagation). *out becomes a source equal to base except that
 * those tensors are already of their chosen type (quant_plan_build copies
 * them verbatim; everything else — token_embd, norms, an output left
 * alone — goes through the ordinary pipeline). Each quantized tensor (and each AWQ-
 * rescaled norm) is written to a scratch file as soon as it is made and
 * streamed back when the writer reads it, so memory depends on one layer,
 * not on the model; the file is unlinked right after it is created. out->
 * method / method_params name the method for memwall.quant.method. Release
 * with quant_methods_source_free after the plan is written. Errors: those of
 * quant_plan_build, calib_*, quant_gptq.
 */
struct quant_methods_src;
enum mw_status quant_methods_source(const struct quant_source *base, const struct quant_opts *qo,
                                    const struct quant_methods_opts *mo, struct quant_source *out,
                                    struct quant_methods_src **h, struct mw_err *err);
void quant_methods_source_free(struct quant_methods_src *h); /* NULL-safe */

/* The importance of the inputs of mo's model on mo's corpus samples
 * (mo->samples, n_threads, max_memory: calibration alone; method fields
 * unused): one statistics-only calib_run, as llama.cpp's imatrix (GGUF,
 * dataset = the corpus's file name), loaded as quant_imatrix_load would
 * load that file (methods_imatrix.c; nothing touches the disk). What a
 * budget allocation weighs its losses with under --corpus without
 * --imatrix. Errors: those of calib_* and quant_imatrix_load_mem. */
enum mw_status quant_methods_imatrix(const struct quant_methods_opts *mo,
                                     struct quant_imatrix **out, struct mw_err *err);

/* The probes of a budget under --corpus (methods_probe.c; quant_alloc.h "end-to-end
 * sensitivity"): the model's output KL divergence with one tensor quantized
 * to its probe type, on the first QUANT_PROBE_TOKENS positions of the
 * corpus samples (mo->samples' seq_len), by calib's f32 forward restarted
 * at the tensor's layer from the kept hidden states (at most
 * QUANT_PROBE_HIDDEN_BYTES of them: every k-th layer beyond). More than
 * QUANT_PROBE_MAX_RUNS tensors: tensors of one kind in runs of consecutive
 * layers are probed together, the divergence shared by their losses.
 * quant_methods_budget sets it under --corpus; a quant_budget_probe_fn with
 * ud a struct quant_methods_probe_ctx. Errors: those of calib_*,
 * quant_rows, MW_E_NOMEM. */
#define QUANT_PROBE_TOKENS 2048
#define QUANT_PROBE_MAX_RUNS 64
#define QUANT_PROBE_HIDDEN_BYTES ((uint64_t)512 << 20)
#define QUANT_PROBE_MAX_BYTES ((uint64_t)4 << 30)
struct quant_budget_probe;
struct quant_methods_probe_ctx {
    const struct quant_methods_opts *mo; /* model, corpus, samples' seq_len, threads, and
                                          * max_memory: the probes' bound (0:
                                          * QUANT_PROBE_MAX_BYTES); over it (the output matrix
                                          * twice in f32 and one sample set's hidden states)
                                          * nothing is measured */
    const struct quant_source *src; /* the budget's source (output matrix, norms, embeddings) */
    uint64_t max_runs;              /* 0: QUANT_PROBE_MAX_RUNS */
};
enum mw_status quant_methods_probe(void *ud, struct quant_budget_probe *p, uint64_t n,
                                   struct mw_err *err);

/* quant_budget_allocate (quant/quant_alloc.h) for `--corpus` runs: with mo
 * (not NULL) and no imatrix in o, the losses weigh columns by
 * quant_methods_imatrix(mo) — for the allocation only: the method computes
 * its own statistics per layer — announced first through o->log
 * (QUANT_LOG_INFO). With mo, the method's header keys (memwall.quant.method
 * and method_params, known only after the calibration) are reserved at their
 * longest, QUANT_METHODS_LABEL_MAX and QUANT_METHODS_PARAMS_MAX bytes: the
 * file then stays within the budget. With mo and not mo->no_probes the
 * budget's probe is quant_methods_probe (above): the losses are scaled to
 * output KL divergence. mo NULL: quant_budget_allocate as it is. Errors:
 * those of both. */
#define QUANT_METHODS_LABEL_MAX 31   /* memwall.quant.method's longest value */
#define QUANT_METHODS_PARAMS_MAX 159 /* memwall.quant.method_params's longest value */
struct quant_budget;
struct quant_budget_result;
enum mw_status quant_methods_budget(const struct quant_source *src, const struct quant_opts *o,
                                    const struct quant_budget *b,
                                    const struct quant_methods_opts *mo,
                                    struct quant_budget_result *r, struct mw_err *err);
#endif /* MW_QUANT_METHODS_H */
