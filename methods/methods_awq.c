/*
 * methods/methods_awq.c — AWQ (activation-aware scaling) for the groups whose
 * input is an RMSNorm output (ATTN_IN: q/k/v after attn_norm; FFN_IN:
 * gate/up after ffn_norm). Per input channel j, s_j = mean|x_j|^alpha
 * (normalized so that max(s)·min(s) = 1); for each alpha of the grid the
 * group's weights are scaled (columns × s), quantized to their target types,
 * unscaled, and the output error Σ_w (w - q)ᵀ H (w - q) = ||X Wᵀ - X Qᵀ||²
 * on the calibration rows measured; the best alpha (alpha = 0 is the plain
 * model, so AWQ never loses by this measure) is folded: norm /= s, columns
 * *= s — the float model's outputs are unchanged, llama.cpp sees ordinary
 * tensors. Wide weights are searched on QUANT_AWQ_SEARCH_ROWS evenly spaced
 * output rows (methods.h).
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "calib/mw_blas.h"
#include "methods/methods.h"

/* Σ_rows dᵀ H d with d = w - q, through one GEMM (D H, fixed tiles: the
 * same bits for any thread count) and row dots in order. */
static double out_err(struct mw_pool *pool, const float *D, uint64_t n_out, uint64_t n_in,
                      const float *H, float *tmp)
{
    mw_gemm(pool, false, false, n_out, n_in, n_in, 1.0f, D, n_in, H, n_in, 0.0f, tmp, n_in, 0);
    double e = 0;
    for (uint64_t i = 0; i < n_out * n_in; i++) e += (double)D[i] * tmp[i];
    return e;
}

uint64_t quant_awq_search_rows(uint64_t n_out, uint64_t n_in)
{
    uint64_t r = n_in ? ((uint64_t)1 << 33) / n_in / n_in : QUANT_AWQ_SEARCH_ROWS;
    if (r > QUANT_AWQ_SEARCH_ROWS) r = QUANT_AWQ_SEARCH_ROWS;
    if (r < 64) r = 64;
    return r < n_out ? r : n_out;
}

void quant_awq_scales(const double *mean_abs, uint64_t n, float alpha, float *s)
{
    double lo = INFINITY, hi = 0;
    for (uint64_t j = 0; j < n; j++) {
        double v = mean_abs[j] > 1e-8 ? pow(mean_abs[j], alpha) : pow(1e-8, alpha);
        s[j] = (float)v;
        if (v < lo) lo = v;
        if (v > hi) hi = v;
    }
    const double norm = sqrt(lo * hi);
    for (uint64_t j = 0; j < n; j++) s[j] = (float)(s[j] / norm);
}

enum mw_status quant_awq_group(const struct quant_awq_group *G, float *best_alpha,
                               struct mw_err *err)
{
    const uint64_t n_in = G->n_in;
    uint64_t maxw = 0;
    for (unsigned k = 0; k < G->n_w; k++) {
        uint64_t e;
        const uint64_t no = quant_awq_search_rows(G->n_out[k], n_in);
        if (!mw_mul_u64(no, n_in, &e))
            return MW_FAIL(err, MW_E_VALUE, MW_ERR_OFF_NONE, "AWQ: size overflows");
        if (e > maxw) maxw = e;
    }
    if (maxw > SIZE_MAX / 8 || n_in > INT32_MAX)
        return MW_FAIL(err, MW_E_VALUE, MW_ERR_OFF_NONE, "AWQ: size overflows");
    float *ws = malloc((size_t)maxw * sizeof(float));
    float *tmp = malloc((size_t)maxw * sizeof(float));
    float *wsel = malloc((size_t)maxw * sizeof(float));
    uint8_t *qb = malloc((size_t)maxw * 2 + 64); /* >= any type's bytes per element * count */
    float *s = malloc((size_t)n_in * sizeof(float));
    float *imp = malloc((size_t)n_in * sizeof(float));
    struct mw_pool *pool = NULL;
    enum mw_status st = MW_OK;
    if (!ws || !tmp || !wsel || !qb || !s || !imp) {
        st = MW_FAIL(err, MW_E_NOMEM, MW_ERR_OFF_NONE, "AWQ: out of memory");
        goto done;
    }
    mw_blas_init();
    if ((st = mw_pool_init(G->n_threads ? G->n_threads : 1, &pool, err)) != MW_OK) goto done;
    double best = INFINITY;
    float ba = 0;
    const int n_grid = G->n_grid ? G->n_grid : 20;
    for (int gi = 0; gi <= n_grid; gi++) {
        const float alpha = (float)gi / (float)n_grid;
        quant_awq_scales(G->mean_abs, n_in, alpha, s);
        for (uint64_t j = 0; j < n_in; j++) imp[j] = G->imp[j] / (s[j] * s[j]);
        double e = 0;
        for (unsigned k = 0; k < G->n_w && st == MW_OK; k++) {
            const uint64_t nall = G->n_out[k];
            const uint64_t no = quant_awq_search_rows(nall, n_in);
            for (uint64_t r = 0; r < no; r++) {
                /* rows evenly spaced over the weight (all of them when it has few) */
                const float *wr = G->w[k] + (r * nall / no) * n_in;
                for (uint64_t j = 0; j < n_in; j++) {
                    ws[r * n_in + j] = wr[j] * s[j];
                    wsel[r * n_in + j] = wr[j];
                }
            }
            const float *w = wsel;
            st = quant_rows(G->type[k], ws, no, n_in, imp, qb, G->n_threads ? G->n_threads : 1,
                            err);
            if (st != MW_OK) break;
            quant_traits_get(G->type[k])->to_float(qb, tmp, no * n_in);
            for (uint64_t r = 0; r < no; r++)
                for (uint64_t j = 0; j < n_in; j++)
                    ws[r * n_in + j] = w[r * n_in + j] - tmp[r * n_in + j] / s[j];
            e += out_err(pool, ws, no, n_in, G->H, tmp);
        }
        if (st != MW_OK) goto done;
        if (e < best) {
            best = e;
            ba = alpha;
        }
    }
    *best_alpha = ba;
done:
    mw_pool_free(pool);
    free(ws);
    free(tmp);
    free(wsel);
    free(qb);
    free(s);
    free(imp);
    return st;
}
