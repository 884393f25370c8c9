/*
 * quant/quant_alloc.c — per-tensor loss measurement and the budgeted type
 * allocation of `memwall quant --bpw/--size/--fit-ram` (quant_alloc.h).
 */
#include "quant/quant_alloc.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

// --- solver ---------------------------------------------------------------------

static uint64_t gcd_u64(uint64_t a, uint64_t b)
{
    while (b) {
        const uint64_t t = a % b;
        a = b;
        b = t;
    }
    return a;
}

/* Is (bytes b, loss l) a better total than (b0, l0)? Lower loss, then fewer bytes. */
static bool better(double l, uint64_t b, double l0, uint64_t b0)
{
    return l < l0 || (l == l0 && b < b0);
}

static void totals(const struct quant_alloc_item *it, uint64_t n, const uint32_t *c, uint64_t *b,
                   double *l)
{
    uint64_t sb = 0;
    double sl = 0;
    for (uint64_t k = 0; k < n; k++) {
        sb += it[k].cand[c[k]].bytes;
        sl += it[k].cand[c[k]].loss;
    }
    *b = sb;
    *l = sl;
}

/* Lagrangian greedy on the lower convex hulls, then a fill pass. */
static enum mw_status solve_greedy(const struct quant_alloc_item *it, uint64_t n, uint64_t budget,
                                   const uint32_t *cheapest, uint32_t *c, struct mw_err *err)
{
    memcpy(c, cheapest, (size_t)n * sizeof *c);
    uint64_t used = 0;
    for (uint64_t k = 0; k < n; k++) used += it[k].cand[c[k]].bytes;
    /* hull steps: from the current point, the candidate with more bytes and
     * the steepest loss decrease per byte (that is the next hull vertex) */
    for (;;) {
        double best_r = 0;
        uint64_t bk = UINT64_MAX;
        uint32_t bc = 0;
        for (uint64_t k = 0; k < n; k++) {
            const struct quant_alloc_cand *cur = &it[k].cand[c[k]];
            double kr = 0;
            uint32_t kc = UINT32_MAX;
            for (uint32_t j = 0; j < it[k].n_cand; j++) {
                const struct quant_alloc_cand *q = &it[k].cand[j];
                if (q->bytes <= cur->bytes || q->loss >= cur->loss) continue;
                const double r = (cur->loss - q->loss) / (double)(q->bytes - cur->bytes);
                if (kc == UINT32_MAX || r > kr ||
                    (r == kr && q->bytes > it[k].cand[kc].bytes))
                    kr = r, kc = j;
            }
            if (kc == UINT32_MAX) continue;
            if (used - cur->bytes + it[k].cand[kc].bytes > budget) continue;
            if (bk == UINT64_MAX || kr > best_r) best_r = kr, bk = k, bc = kc;
        }
        if (bk == UINT64_MAX) break;
        used = used - it[bk].cand[c[bk]].bytes + it[bk].cand[bc].bytes;
        c[bk] = bc;
    }
    /* fill: any single change that lowers the loss and fits, best first */
    for (;;) {
        double best_gain = 0;
        uint64_t bk = UINT64_MAX;
        uint32_t bc = 0;
        for (uint64_t k = 0; k < n; k++) {
            const struct quant_alloc_cand *cur = &it[k].cand[c[k]];
            for (uint32_t j = 0; j < it[k].n_cand; j++) {
                const struct quant_alloc_cand *q = &it[k].cand[j];
                if (q->loss >= cur->loss) continue;
                if (used - cur->bytes + q->bytes > budget) continue;
                const double g = cur->loss - q->loss;
                if (g > best_gain) best_gain = g, bk = k, bc = j;
            }
        }
        if (bk == UINT64_MAX) break;
        used = used - it[bk].cand[c[bk]].bytes + it[bk].cand[bc].bytes;
        c[bk] = bc;
    }
    (void)err;
    return MW_OK;
}

/* Exact DP over extra bytes in units of `unit` (costs rounded up). */
static enum mw_status solve_dp(const struct quant_alloc_item *it, uint64_t n, uint64_t extra,
                               uint64_t unit, const uint64_t *minb, uint32_t *c,
                               struct mw_err *err)
{
    const uint64_t S = extra / unit + 1; /* states 0..extra/unit */
    uint64_t tab_n;
    if (!mw_mul_u64(S, n, &tab_n) || tab_n > ((uint64_t)1 << 31))
        return MW_FAIL(err, MW_E_NOMEM, MW_ERR_OFF_NONE, "allocation table too large");
    double *f = malloc((size_t)S * sizeof *f), *g = malloc((size_t)S * sizeof *g);
    uint8_t *ch = malloc((size_t)tab_n);
    if (!f || !g || !ch) {
        free(f), free(g), free(ch);
        return MW_FAIL(err, MW_E_NOMEM, MW_ERR_OFF_NONE, "out of memory (allocation table)");
    }
    /* f[s] = best loss of the items so far using at most s units */
    for (uint64_t s = 0; s < S; s++) f[s] = 0;
    for (uint64_t k = 0; k < n; k++) {
        uint8_t *row = ch + k * S;
        for (uint64_t s = 0; s < S; s++) {
            double bl = INFINITY;
            uint8_t bj = 0xff;
            for (uint32_t j = 0; j < it[k].n_cand && j < 255; j++) {
                const uint64_t d = it[k].cand[j].bytes - minb[k];
                const uint64_t u = d / unit + (d % unit != 0);
                if (u > s || f[s - u] == INFINITY) continue;
                const double l = f[s - u] + it[k].cand[j].loss;
                if (l < bl) bl = l, bj = (uint8_t)j;
            }
            g[s] = bl;
            row[s] = bj;
        }
        double *t = f;
        f = g;
        g = t;
    }
    uint64_t s = S - 1;
    for (uint64_t k = n; k-- > 0;) {
        const uint8_t j = ch[k * S + s];
        c[k] = j; /* never 0xff: the cheapest candidate always fits at s >= 0 */
        const uint64_t d = it[k].cand[j].bytes - minb[k];
        s -= d / unit + (d % unit != 0);
    }
    free(f), free(g), free(ch);
    return MW_OK;
}

enum mw_status quant_alloc_solve(const struct quant_alloc_item *it, uint64_t n, uint64_t budget,
                                 uint32_t *choice, struct quant_alloc_result *res,
                                 struct mw_err *err)
{
    mw_err_clear(err);
    if (res) memset(res, 0, sizeof *res);
    if (n == 0) return MW_OK;
    if (n > SIZE_MAX / sizeof(uint64_t))
        return MW_FAIL(err, MW_E_NOMEM, MW_ERR_OFF_NONE, "too many items");
    uint64_t *minb = malloc((size_t)n * sizeof *minb);
    uint32_t *cheap = malloc((size_t)n * sizeof *cheap), *cg = malloc((size_t)n * sizeof *cg);
    uint32_t *cd = malloc((size_t)n * sizeof *cd);
    enum mw_status s = MW_OK;
    if (!minb || !cheap || !cg || !cd) {
        s = MW_FAIL(err, MW_E_NOMEM, MW_ERR_OFF_NONE, "out of memory");
        goto out;
    }
    uint64_t sum_min = 0, g0 = 0;
    for (uint64_t k = 0; k < n; k++) {
        if (it[k].n_cand == 0 || !it[k].cand) {
            s = MW_FAIL(err, MW_E_USAGE, MW_ERR_OFF_NONE, "item %llu has no candidates",
                        (unsigned long long)k);
            goto out;
        }
        uint32_t m = 0;
        for (uint32_t j = 0; j < it[k].n_cand; j++) {
            const struct quant_alloc_cand *q = &it[k].cand[j];
            if (!(q->loss >= 0) || !isfinite(q->loss)) {
                s = MW_FAIL(err, MW_E_USAGE, MW_ERR_OFF_NONE,
                            "item %llu candidate %u: loss %g is not finite and >= 0",
                            (unsigned long long)k, j, q->loss);
                goto out;
            }
            if (q->bytes < it[k].cand[m].bytes ||
                (q->bytes == it[k].cand[m].bytes && q->loss < it[k].cand[m].loss))
                m = j;
        }
        cheap[k] = m;
        minb[k] = it[k].cand[m].bytes;
        if (!mw_add_u64(sum_min, minb[k], &sum_min)) {
            s = MW_FAIL(err, MW_E_VALUE, MW_ERR_OFF_NONE, "byte total overflows");
            goto out;
        }
        for (uint32_t j = 0; j < it[k].n_cand; j++) g0 = gcd_u64(g0, it[k].cand[j].bytes - minb[k]);
    }
    if (budget < sum_min) {
        s = MW_FAIL(err, MW_E_VALUE, MW_ERR_OFF_NONE,
                    "budget of %llu bytes is below the smallest possible %llu bytes",
                    (unsigned long long)budget, (unsigned long long)sum_min);
        goto out;
    }
    const uint64_t extra = budget - sum_min;
    if ((s = solve_greedy(it, n, budget, cheap, cg, err)) != MW_OK) goto out;
    uint64_t bg, bd;
    double lg, ld;
    totals(it, n, cg, &bg, &lg);
    uint64_t unit = g0 ? g0 : 1;
    if (extra / unit + 1 > QUANT_ALLOC_MAX_STATES) {
        const uint64_t want = extra / (QUANT_ALLOC_MAX_STATES - 1) + 1;
        unit = (want + unit - 1) / unit * unit;
    }
    /* DP table n x states bytes: bound it at 1 GiB by coarsening further */
    while ((extra / unit + 1) > ((uint64_t)1 << 30) / n) unit *= 2;
    const bool exact = g0 == 0 || unit == g0;
    if ((s = solve_dp(it, n, extra, unit, minb, cd, err)) != MW_OK) goto out;
    totals(it, n, cd, &bd, &ld);
    const uint32_t *best = better(ld, bd, lg, bg) || (ld == lg && bd == bg) ? cd : cg;
    memcpy(choice, best, (size_t)n * sizeof *choice);
    if (res) {
        res->bytes = best == cd ? bd : bg;
        res->loss = best == cd ? ld : lg;
        res->unit = unit;
        res->dp_exact = exact;
    }
out:
    free(minb), free(cheap), free(cg), free(cd);
    return s;
}

// --- losses ---------------------------------------------------------------------

enum mw_status quant_alloc_loss(uint32_t t, const float *x, uint64_t n_rows, uint64_t n_per_row,
                                const float *qimp, const float *imp, unsigned n_threads,
                                double *loss, struct mw_err *err)
{
    mw_err_clear(err);
    *loss = 0;
    const struct gguf_type_info *ti = gguf_type_get(t);
    const struct quant_traits *tr = quant_traits_get(t);
    if (!ti || !ti->blck || !tr || !tr->to_float || !tr->from_float)
        return MW_FAIL(err, MW_E_USAGE, MW_ERR_OFF_NONE, "type %u cannot be quantized", t);
    if (n_per_row == 0 || n_per_row % ti->blck)
        return MW_FAIL(err, MW_E_USAGE, MW_ERR_OFF_NONE,
                       "row length %llu is not a multiple of %s's block of %u",
                       (unsigned long long)n_per_row, ti->name, ti->blck);
    const uint64_t rb = n_per_row / ti->blck * ti->type_size;
    uint64_t qbytes, fbytes;
    if (!mw_mul_u64(rb, n_rows, &qbytes) || qbytes > SIZE_MAX ||
        !mw_mul_u64(n_per_row, sizeof(float), &fbytes) || fbytes > SIZE_MAX)
        return MW_FAIL(err, MW_E_NOMEM, MW_ERR_OFF_NONE, "tensor too large");
    uint8_t *q = malloc(qbytes ? (size_t)qbytes : 1);
    float *d = malloc((size_t)fbytes);
    if (!q || !d) {
        free(q), free(d);
        return MW_FAIL(err, MW_E_NOMEM, MW_ERR_OFF_NONE, "out of memory");
    }
    enum mw_status s = quant_rows(t, x, n_rows, n_per_row, qimp, q, n_threads ? n_threads : 1, err);
    if (s == MW_OK) {
        double sum = 0;
        for (uint64_t r = 0; r < n_rows; r++) {
            tr->to_float(q + r * rb, d, n_per_row);
            const float *xr = x + r * n_per_row;
            double rs = 0;
            for (uint64_t j = 0; j < n_per_row; j++) {
                const double e = (double)xr[j] - (double)d[j];
                rs += (imp ? (double)imp[j] : 1.0) * e * e;
            }
            sum += rs;
        }
        *loss = sum;
    }
    free(q), free(d);
    return s;
}

struct rd {
    uint8_t *buf;
    uint64_t fill, cap;
};

static enum mw_status rd_sink(void *ud, const void *data, size_t n, struct mw_err *err)
{
    struct rd *r = ud;
    if (n > r->cap - r->fill)
        return MW_FAIL(err, MW_E_FORMAT, MW_ERR_OFF_NONE, "source gave more bytes than declared");
    memcpy(r->buf + r->fill, data, n);
    r->fill += n;
    return MW_OK;
}

enum mw_status quant_alloc_read_f32(const struct quant_source *src, uint64_t i, float **x,
                                    uint64_t *n_rows, struct mw_err *err)
{
    mw_err_clear(err);
    *x = NULL;
    *n_rows = 0;
    const struct quant_tensor_desc *t = &src->tensors[i];
    const struct quant_traits *tr = quant_traits_get(t->type);
    uint64_t nb, rows = 1, nel, fb;
    for (int d = 1; d < GGUF_MAX_DIMS; d++)
        if (!mw_mul_u64(rows, t->ne[d] ? t->ne[d] : 1, &rows)) rows = UINT64_MAX;
    if (!tr || !tr->to_float) {
        mw_err_set_where(err, "tensor '%s'", t->name);
        return MW_FAIL(err, MW_E_UNSUPPORTED, MW_ERR_OFF_NONE, "type %u cannot be decoded",
                       t->type);
    }
    if (!gguf_tensor_nbytes(t->type, t->ne, &nb) || nb > SIZE_MAX ||
        !mw_mul_u64(t->ne[0], rows, &nel) || !mw_mul_u64(nel, sizeof(float), &fb) ||
        fb > SIZE_MAX) {
        mw_err_set_where(err, "tensor '%s'", t->name);
        return MW_FAIL(err, MW_E_NOMEM, MW_ERR_OFF_NONE, "tensor too large");
    }
    struct rd r = {.buf = malloc(nb ? (size_t)nb : 1), .cap = nb};
    float *f = malloc(fb ? (size_t)fb : 1);
    enum mw_status s = MW_OK;
    if (!r.buf || !f) {
        s = MW_FAIL(err, MW_E_NOMEM, MW_ERR_OFF_NONE, "out of memory");
        goto out;
    }
    if (src->data && src->data(src->ud, i)) {
        memcpy(r.buf, src->data(src->ud, i), (size_t)nb);
        r.fill = nb;
        /* the copy is what is used from here: drop the mapped pages so a
         * pass over every tensor (--size's losses) does not leave the whole
         * source file resident; a later read faults them in again */
        if (src->release) src->release(src->ud, i, 0, nb);
    } else if ((s = src->read(src->ud, i, rd_sink, &r, err)) != MW_OK) {
        goto out;
    }
    if (r.fill != nb) {
        mw_err_set_where(err, "tensor '%s'", t->name);
        s = MW_FAIL(err, MW_E_TRUNC, MW_ERR_OFF_NONE, "source gave %llu of %llu bytes",
                    (unsigned long long)r.fill, (unsigned long long)nb);
        goto out;
    }
    tr->to_float(r.buf, f, nel);
    *x = f;
    f = NULL;
    *n_rows = rows;
out:
    free(r.buf);
    free(f);
    return s;
}

