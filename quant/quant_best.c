/*
 * quant/quant_best.c — QUANT_MODE_BEST: per block, the lowest-error of
 * several ggml quantizations of the same row.
 *
 * Every block of every ggml type decodes on its own, so blocks taken from
 * different quantizations of a row form a valid row. The candidates are
 * ggml's own result first, then ggml's searches run with other weightings:
 *   with an imatrix qw:  none (ggml's round-to-nearest path), uniform,
 *                        sqrt(qw), qw^2
 *   without:             uniform (ggml's importance-weighted search, which
 *                        fits scales by least squares, where the
 *                        round-to-nearest path does not)
 * and a block is replaced only when a candidate's error is strictly lower:
 * sum qw[i]*(x[i] - deq[i])^2 over the block (qw = 1 without imatrix), in
 * double, in index order. So no block gets worse than ggml's by that
 * measure, and equal errors keep ggml's bytes. Deterministic: the result is
 * a function of the row and the imatrix only.
 */
#include "quant/quant_int.h"

#include <math.h>

#define BEST_MAX_VARIANTS 4

/* Scratch layout: double err[nb] | float w[n] | float deq[n] | u8 cand[row]. */
static bool best_layout(uint32_t t, uint64_t n, uint64_t *nb, uint64_t *row, uint64_t *total)
{
    const struct quant_traits *qt = quant_traits_get(t);
    const struct gguf_type_info *ti = gguf_type_get(t);
    if (!qt || !qt->from_float || !ti || ti->blck == 0) return false;
    *nb = n / ti->blck;
    uint64_t a, b, c;
    if (!mw_mul_u64(*nb, ti->type_size, row) || !mw_mul_u64(*nb, sizeof(double), &a) ||
        !mw_mul_u64(n, 2 * sizeof(float), &b) || !mw_add_u64(a, b, &c) ||
        !mw_add_u64(c, *row, total) || *total > (uint64_t)SIZE_MAX)
        return false;
    return true;
}

size_t quant_row_best_scratch(uint32_t t, uint64_t n)
{
    uint64_t nb, row, total;
    if (!best_layout(t, n, &nb, &row, &total)) return 0;
    return (size_t)(total ? total : 1);
}

/* Weighted squared error of block b of deq against x, in index order. */
static double block_err(const float *x, const float *deq, const float *qw, uint64_t b,
                        uint32_t blck)
{
    double e = 0;
    for (uint64_t i = b * blck; i < (b + 1) * blck; i++) {
        const double d = (double)x[i] - (double)deq[i];
        e += (qw ? (double)qw[i] : 1.0) * d * d;
    }
    return e;
}

void quant_row_best(uint32_t t, const float *x, void *out, uint64_t n, const float *imatrix,
                    void *scratch)
{
    uint64_t nb, row, total;
    if (!best_layout(t, n, &nb, &row, &total)) return;
    const struct quant_traits *qt = quant_traits_get(t);
    const struct gguf_type_info *ti = gguf_type_get(t);
    double *err = scratch;
    float *w = (float *)(err + nb);
    float *deq = w + n;
    uint8_t *cand = (uint8_t *)(deq + n);
    uint8_t *o = out;

    qt->from_float(x, o, n, imatrix);
    if (ti->blck == 1) return; /* F32/F16/BF16: nothing to choose */
    qt->to_float(o, deq, n);
    for (uint64_t b = 0; b < nb; b++) err[b] = block_err(x, deq, imatrix, b, ti->blck);

    const int n_var = imatrix ? BEST_MAX_VARIANTS : 1;
    for (int v = 0; v < n_var; v++) {
        const float *wv = w;
        const int kind = imatrix ? v : 1; /* 0 none, 1 uniform, 2 sqrt, 3 square */
        if (kind == 0) wv = NULL;
        for (uint64_t i = 0; kind != 0 && i < n; i++)
            w[i] = kind == 1 ? 1.0f : (kind == 2 ? sqrtf(imatrix[i]) : imatrix[i] * imatrix[i]);
        qt->from_float(x, cand, n, wv);
        qt->to_float(cand, deq, n);
        for (uint64_t b = 0; b < nb; b++) {
            const double e = block_err(x, deq, imatrix, b, ti->blck);
            if (e < err[b]) {
                err[b] = e;
                memcpy(o + b * ti->type_size, cand + b * ti->type_size, ti->type_size);
            }
        }
    }
}
