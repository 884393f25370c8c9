/*
 * methods/methods_gptq.c — GPTQ on the ggml block grid (see methods.h).
 *
 * Per ggml block, the grid is found by "probing": the block's scales/mins
 * come from QUANT_MODE_BEST on the current weights; every format here
 * decodes element e as a_e * q_e + b_e for its integer level q_e in
 * [0, qmax] (a_e, b_e depend on the scales only), so decoding the block
 * with every level set to 0 and then to 1 gives b_e and a_e. Each column is
 * then rounded to its nearest level, the level stored in place (set_q), and
 * the block decoded at the end for the exact values llama.cpp will see.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "calib/mw_blas.h"
#include "core/mw_pool.h"
#include "gguf/gguf.h"
#include "quant/quant.h"
#include "methods/methods.h"

static int grid_qmax(uint32_t t)
{
    switch (t) {
    case GGUF_TYPE_Q4_0: return 15;
    case GGUF_TYPE_Q8_0: return 254;
    case GGUF_TYPE_Q3_K: return 7;
    case GGUF_TYPE_Q4_K: return 15;
    case GGUF_TYPE_Q5_K: return 31;
    case GGUF_TYPE_Q6_K: return 63;
    default: return 0;
    }
}

bool quant_gptq_supported(uint32_t type) { return grid_qmax(type) > 0; }

static void nib_set(uint8_t *p, bool high, int q)
{
    *p = high ? (uint8_t)((*p & 0x0F) | ((q & 15) << 4)) : (uint8_t)((*p & 0xF0) | (q & 15));
}

/* Store level q (0..qmax) of element e of one block. */
static void grid_set_q(uint32_t t, uint8_t *b, int e, int q)
{
    switch (t) {
    case GGUF_TYPE_Q4_0: nib_set(b + 2 + (e & 15), e >= 16, q); break;
    case GGUF_TYPE_Q8_0: b[2 + e] = (uint8_t)(int8_t)(q - 127); break;
    case GGUF_TYPE_Q3_K: {
        const int n = e / 128, j = (e % 128) / 32, l = e % 32;
        uint8_t *qs = b + 32 + 32 * n + l;
        *qs = (uint8_t)((*qs & ~(3 << (2 * j))) | ((q & 3) << (2 * j)));
        const int bit = 4 * n + j;
        b[l] = (uint8_t)((b[l] & ~(1 << bit)) | (((q >> 2) & 1) << bit));
        break;
    }
    case GGUF_TYPE_Q4_K: {
        const int j = e / 64, r = e % 64;
        nib_set(b + 16 + 32 * j + (r & 31), r >= 32, q);
        break;
    }
    case GGUF_TYPE_Q5_K: {
        const int j = e / 64, r = e % 64, l = r & 31, bit = 2 * j + (r >= 32);
        nib_set(b + 48 + 32 * j + l, r >= 32, q);
        b[16 + l] = (uint8_t)((b[16 + l] & ~(1 << bit)) | (((q >> 4) & 1) << bit));
        break;
    }
    case GGUF_TYPE_Q6_K: {
        const int h = e / 128, k = (e % 128) / 32, l = e % 32;
        nib_set(b + 64 * h + 32 * (k & 1) + l, k >= 2, q);
        uint8_t *qh = b + 128 + 32 * h + l;
        *qh = (uint8_t)((*qh & ~(3 << (2 * k))) | (((q >> 4) & 3) << (2 * k)));
        break;
    }
    default: break;
    }
}

/* Work shared by the threads of one call. */
struct gptq_job {
    uint32_t type;
    const struct quant_traits *tr;
    int qmax;
    uint64_t bs, bbytes, row_bytes, n_in, lazy;
    float *w;
    const float *U;    /* (n_in, n_in) upper Cholesky factor of H^-1, row-major */
    const float *imp;  /* (n_in) importance: diag(H) + damp */
    uint8_t *out;
    float *E;          /* (n_out, lazy) scaled errors of the current lazy block */
    uint64_t i1, i2;   /* the current lazy block */
    size_t scratch_bytes;
    uint8_t *scratch;  /* per thread: best-search scratch, block, probes */
    struct mw_pool *pool;
    uint64_t n_out;
    /* act-order (static groups): */
    void (*fn)(struct gptq_job *J, uint64_t r0, uint64_t r1, uint8_t *scr);
    const uint32_t *perm; /* sweep position -> original column */
    float *A, *B;         /* (n_out, n_in) per-element grid: value = A * level + B */
    const float *w0;      /* the original weights (grid setup) */
};

static void gptq_rows(struct gptq_job *J, uint64_t r0, uint64_t r1, uint8_t *scr)
{
    const uint64_t bs = J->bs, n = J->n_in;
    const size_t best_bytes = (quant_row_best_scratch(J->type, bs) + 63) / 64 * 64;
    void *best = scr;
    float *a = (float *)(void *)(scr + best_bytes);
    float *bb = a + bs;
    float *deq = bb + bs;
    uint8_t *blk = (uint8_t *)(deq + bs);
    uint8_t *probe = blk + J->bbytes;
    for (uint64_t r = r0; r < r1; r++) {
        float *wr = J->w + r * n;
        float *er = J->E + r * J->lazy;
        uint8_t *orow = J->out + r * J->row_bytes;
        for (uint64_t c0 = J->i1; c0 < J->i2; c0 += bs) {
            /* the grid of this ggml block, from the compensated weights */
            quant_row_best(J->type, wr + c0, blk, bs, J->imp + c0, best);
            memcpy(probe, blk, J->bbytes);
            for (uint64_t e = 0; e < bs; e++) grid_set_q(J->type, probe, (int)e, 0);
            J->tr->to_float(probe, bb, bs);
            for (uint64_t e = 0; e < bs; e++) grid_set_q(J->type, probe, (int)e, 1);
            J->tr->to_float(probe, a, bs);
            for (uint64_t e = 0; e < bs; e++) a[e] -= bb[e];
            for (uint64_t e = 0; e < bs; e++) {
                const uint64_t c = c0 + e;
                const float x = wr[c];
                int q = 0;
                if (a[e] != 0.0f && isfinite(a[e])) {
                    const float v = (x - bb[e]) / a[e];
                    q = isfinite(v) ? quant_clampi(quant_nint(fmaxf(fminf(v, 1e6f), -1e6f)), 0,
                                                    J->qmax)
                                    : 0;
                }
                grid_set_q(J->type, blk, (int)e, q);
                const float qv = a[e] * (float)q + bb[e];
                const float *urow = J->U + c * n;
                const float err = (x - qv) / urow[c];
                er[c - J->i1] = err;
                for (uint64_t k = c + 1; k < J->i2; k++) wr[k] -= err * urow[k];
            }
            J->tr->to_float(blk, deq, bs);
            memcpy(wr + c0, deq, bs * sizeof(float));
            memcpy(orow + (c0 / bs) * J->bbytes, blk, J->bbytes);
        }
    }
}

/* Act-order, step 1: every block's grid from the uncompensated weights
 * (scales/mins written into out, levels filled in later), per element
 * value = A * level + B. */
static void gptq_grid_rows(struct gptq_job *J, uint64_t r0, uint64_t r1, uint8_t *scr)
{
    const uint64_t bs = J->bs, n = J->n_in;
    const size_t best_bytes = (quant_row_best_scratch(J->type, bs) + 63) / 64 * 64;
    void *best = scr;
    uint8_t *probe = scr + best_bytes + 3 * bs * sizeof(float) + J->bbytes;
    for (uint64_t r = r0; r < r1; r++) {
        uint8_t *orow = J->out + r * J->row_bytes;
        float *a = J->A + r * n, *b = J->B + r * n;
        for (uint64_t c0 = 0; c0 < n; c0 += bs) {
            uint8_t *blk = orow + (c0 / bs) * J->bbytes;
            quant_row_best(J->type, J->w0 + r * n + c0, blk, bs, J->imp + c0, best);
            memcpy(probe, blk, J->bbytes);
            for (uint64_t e = 0; e < bs; e++) grid_set_q(J->type, probe, (int)e, 0);
            J->tr->to_float(probe, b + c0, bs);
            for (uint64_t e = 0; e < bs; e++) grid_set_q(J->type, probe, (int)e, 1);
            J->tr->to_float(probe, a + c0, bs);
            for (uint64_t e = 0; e < bs; e++) a[c0 + e] -= b[c0 + e];
        }
    }
}

/* Act-order, step 2: the columns [i1, i2) of the permuted weights (J->w),
 * each rounded to the fixed grid of its original block. */
static void gptq_rows_perm(struct gptq_job *J, uint64_t r0, uint64_t r1, uint8_t *scr)
{
    (void)scr;
    const uint64_t bs = J->bs, n = J->n_in;
    for (uint64_t r = r0; r < r1; r++) {
        float *wr = J->w + r * n;
        float *er = J->E + r * J->lazy;
        uint8_t *orow = J->out + r * J->row_bytes;
        const float *a = J->A + r * n, *b = J->B + r * n;
        for (uint64_t c = J->i1; c < J->i2; c++) {
            const uint64_t oc = J->perm[c];
            const float x = wr[c];
            int q = 0;
            if (a[oc] != 0.0f && isfinite(a[oc])) {
                const float v = (x - b[oc]) / a[oc];
                q = isfinite(v)
                        ? quant_clampi(quant_nint(fmaxf(fminf(v, 1e6f), -1e6f)), 0, J->qmax)
                        : 0;
            }
            grid_set_q(J->type, orow + (oc / bs) * J->bbytes, (int)(oc % bs), q);
            const float qv = a[oc] * (float)q + b[oc];
            const float *urow = J->U + c * n;
            const float err = (x - qv) / urow[c];
            er[c - J->i1] = err;
            for (uint64_t k = c + 1; k < J->i2; k++) wr[k] -= err * urow[k];
        }
    }
}

static void gptq_task(void *arg, unsigned ith, unsigned nth)
{
    struct gptq_job *J = arg;
    const uint64_t r0 = J->n_out * ith / nth, r1 = J->n_out * (ith + 1) / nth;
    if (r0 < r1) J->fn(J, r0, r1, J->scratch + (size_t)ith * J->scratch_bytes);
}

/* Rows of J split over the pool's threads (rows are independent given U). */
static void run_rows(struct gptq_job *J) { mw_pool_run(J->pool, gptq_task, J); }

struct diag_item {
    float h;
    uint32_t j;
};
static int diag_desc(const void *pa, const void *pb)
{
    const struct diag_item *a = pa, *b = pb;
    if (a->h != b->h) return a->h > b->h ? -1 : 1;
    return a->j < b->j ? -1 : a->j > b->j;
}

static void reverse_f(float *a, size_t n)
{
    for (size_t i = 0, j = n - 1; i < j; i++, j--) {
        const float t = a[i];
        a[i] = a[j];
        a[j] = t;
    }
}

/* Upper Cholesky factor U of H^-1 (H^-1 = Uᵀ U), row-major, lower part 0,
 * in place, with one factorization and one triangular inverse (2/3 n³
 * instead of the 4/3 n³ of factor + inverse + factor): with P the
 * reversal permutation and P H P = L Lᵀ, H^-1 = P L^-ᵀ L^-1 P, so
 * U = P L^-1 P (upper, positive diagonal: the unique factor). Reversing
 * the flat row-major array is P·P, which turns the lower L^-1 into the
 * upper U. Fixed tiles over the pool (mw_blas.h): the same bits for any
 * thread count. */
static int chol_inv_upper(struct mw_pool *pool, float *A, uint64_t n)
{
    const size_t nn = (size_t)n * (size_t)n;
    reverse_f(A, nn); /* P H P (symmetric) */
    int info = mw_chol_lower(pool, A, n);
    if (info) return info;
    if ((info = mw_tri_inv_lower(pool, A, n))) return info;
    reverse_f(A, nn); /* upper: P L^-1 P */
    for (size_t i = 1; i < (size_t)n; i++) memset(A + i * n, 0, i * sizeof(float));
    return 0;
}

/* rows and then columns of the symmetric A (n x n) in the order perm, in
 * place: A'[i][j] = A[perm[i]][perm[j]]; tmp: n floats, seen: n bytes */
static void sym_permute(float *A, uint64_t n, const uint32_t *perm, float *tmp, uint8_t *seen)
{
    memset(seen, 0, (size_t)n);
    for (uint64_t c = 0; c < n; c++) { /* rows, cycle by cycle: row i takes row perm[i] */
        if (seen[c]) continue;
        memcpy(tmp, A + c * n, (size_t)n * sizeof(float));
        uint64_t i = c;
        for (;;) {
            seen[i] = 1;
            const uint64_t src = perm[i];
            if (src == c) {
                memcpy(A + i * n, tmp, (size_t)n * sizeof(float));
                break;
            }
            memcpy(A + i * n, A + src * n, (size_t)n * sizeof(float));
            i = src;
        }
    }
    for (uint64_t i = 0; i < n; i++) { /* columns, row by row */
        float *r = A + i * n;
        for (uint64_t j = 0; j < n; j++) tmp[j] = r[perm[j]];
        memcpy(r, tmp, (size_t)n * sizeof(float));
    }
}

enum mw_status quant_gptq_prepare(float *H, uint64_t n_in, const struct quant_gptq_opts *o,
                                  unsigned attempt, float *imp, uint32_t *perm, bool *retry,
                                  struct mw_err *err)
{
    *retry = false;
    const bool act = o && o->act_order;
    if (n_in == 0 || n_in > INT32_MAX || n_in > SIZE_MAX / sizeof(float) / n_in)
        return MW_FAIL(err, MW_E_USAGE, MW_ERR_OFF_NONE, "GPTQ: %llu inputs",
                       (unsigned long long)n_in);
    const float damp_frac = o && o->damp > 0 ? o->damp : 0.01f;
    unsigned nt = o && o->n_threads ? o->n_threads : 1;
    if (nt > 256) nt = 256;
    /* dampening; dead columns get H_jj = 1 (no compensation through them) */
    double mean = 0;
    for (uint64_t j = 0; j < n_in; j++) {
        const float h = H[j * n_in + j];
        if (!isfinite(h)) return MW_FAIL(err, MW_E_VALUE, MW_ERR_OFF_NONE, "GPTQ: non-finite Hessian");
        mean += h;
    }
    mean /= (double)n_in;
    if (!(mean > 0)) mean = 1;
    float damp = damp_frac * (float)mean;
    for (unsigned a = 0; a < attempt; a++) damp *= 10.0f; /* 1% -> 10% -> 100% -> 1000% */
    /* sweep order: the original one, or by descending diag(H) (act-order) */
    for (uint64_t j = 0; j < n_in; j++) perm[j] = (uint32_t)j;
    for (uint64_t j = 0; j < n_in; j++) imp[j] = H[j * n_in + j] + damp;
    struct mw_pool *pool = NULL;
    enum mw_status st = MW_OK;
    if (act) {
        struct diag_item *di = malloc((size_t)n_in * sizeof *di);
        float *tmp = malloc((size_t)n_in * sizeof(float));
        uint8_t *seen = malloc((size_t)n_in);
        if (!di || !tmp || !seen) {
            free(di), free(tmp), free(seen);
            return MW_FAIL(err, MW_E_NOMEM, MW_ERR_OFF_NONE, "GPTQ: out of memory");
        }
        for (uint64_t j = 0; j < n_in; j++) di[j] = (struct diag_item){H[j * n_in + j], (uint32_t)j};
        qsort(di, (size_t)n_in, sizeof *di, diag_desc);
        for (uint64_t j = 0; j < n_in; j++) perm[j] = di[j].j;
        sym_permute(H, n_in, perm, tmp, seen); /* U = H[perm][:, perm] */
        free(di), free(tmp), free(seen);
    }
    for (uint64_t j = 0; j < n_in; j++) {
        float *d = &H[j * n_in + j];
        if (*d == 0.0f) *d = 1.0f;
        *d += damp;
    }
    mw_blas_init();
    if ((st = mw_pool_init(nt, &pool, err)) != MW_OK) return st;
    const int info = chol_inv_upper(pool, H, n_in);
    mw_pool_free(pool);
    if (info == 0) return MW_OK;
    if (info < 0)
        return MW_FAIL(err, MW_E_NOMEM, MW_ERR_OFF_NONE, "GPTQ: out of memory (%llu bytes)",
                       (unsigned long long)(n_in * MW_BLAS_NB * sizeof(float)));
    *retry = attempt < 3;
    return MW_FAIL(err, MW_E_VALUE, MW_ERR_OFF_NONE,
                   "GPTQ: Hessian not positive definite after dampening");
}

enum mw_status quant_gptq_apply(uint32_t type, float *w, uint64_t n_out, uint64_t n_in,
                                const float *U, const float *imp, const uint32_t *perm,
                                const struct quant_gptq_opts *o, void *out, struct mw_err *err)
{
    const struct quant_traits *tr = quant_traits_get(type);
    const struct gguf_type_info *ti = gguf_type_get(type);
    if (!quant_gptq_supported(type) || !tr || !tr->from_float || !ti)
        return MW_FAIL(err, MW_E_USAGE, MW_ERR_OFF_NONE, "GPTQ does not support type %u", type);
    const bool act = o && o->act_order;
    const uint64_t bs = ti->blck;
    if (n_in == 0 || n_in % bs || n_in > INT32_MAX)
        return MW_FAIL(err, MW_E_USAGE, MW_ERR_OFF_NONE,
                       "GPTQ: row length %llu is not a positive multiple of %s's block %llu",
                       (unsigned long long)n_in, ti->name, (unsigned long long)bs);
    if (n_out == 0) return MW_OK;
    uint64_t lazy = o && o->block ? o->block : 128;
    lazy = (lazy + bs - 1) / bs * bs;
    if (lazy > n_in) lazy = n_in;
    unsigned nt = o && o->n_threads ? o->n_threads : 1;
    if (nt > 256) nt = 256;
    if (nt > n_out) nt = (unsigned)n_out;

    uint64_t nE, row_bytes;
    if (!mw_mul_u64(n_out, lazy, &nE) || !mw_mul_u64(n_in / bs, ti->type_size, &row_bytes) ||
        nE > SIZE_MAX / sizeof(float))
        return MW_FAIL(err, MW_E_NOMEM, MW_ERR_OFF_NONE, "GPTQ: sizes overflow");
    const size_t best_bytes = (quant_row_best_scratch(type, bs) + 63) / 64 * 64;
    const size_t scr = (best_bytes + 3 * bs * sizeof(float) + 2 * ti->type_size + 63) / 64 * 64;

    float *E = malloc((size_t)nE * sizeof(float));
    uint8_t *scratch = malloc(scr * nt);
    uint64_t nw;
    const bool nw_ok = mw_mul_u64(n_out, n_in, &nw) && nw <= SIZE_MAX / sizeof(float);
    float *wp = act && nw_ok ? malloc((size_t)nw * sizeof(float)) : NULL;
    float *Ag = act && nw_ok ? malloc((size_t)nw * sizeof(float)) : NULL;
    float *Bg = act && nw_ok ? malloc((size_t)nw * sizeof(float)) : NULL;
    struct mw_pool *pool = NULL;
    enum mw_status st = MW_OK;
    if (!E || !scratch || (act && (!wp || !Ag || !Bg))) {
        st = MW_FAIL(err, MW_E_NOMEM, MW_ERR_OFF_NONE, "GPTQ: out of memory (%llu bytes)",
                     (unsigned long long)(nE * 4 + (act ? 12 * nw : 0)));
        goto done;
    }
    mw_blas_init();
    if ((st = mw_pool_init(nt, &pool, err)) != MW_OK) goto done;

    struct gptq_job J = {.type = type, .tr = tr, .qmax = grid_qmax(type), .bs = bs,
                         .bbytes = ti->type_size, .row_bytes = row_bytes, .n_in = n_in,
                         .lazy = lazy, .w = w, .U = U, .imp = imp, .out = out, .E = E,
                         .scratch_bytes = scr, .scratch = scratch, .pool = pool,
                         .n_out = n_out, .fn = gptq_rows};
    if (act) {
        J.perm = perm;
        J.A = Ag;
        J.B = Bg;
        J.w0 = w;
        J.fn = gptq_grid_rows;
        run_rows(&J);
        for (uint64_t r = 0; r < n_out; r++)
            for (uint64_t i = 0; i < n_in; i++) wp[r * n_in + i] = w[r * n_in + perm[i]];
        J.w = wp;
        J.fn = gptq_rows_perm;
    }
    for (uint64_t i1 = 0; i1 < n_in; i1 += lazy) {
        const uint64_t i2 = i1 + lazy < n_in ? i1 + lazy : n_in;
        J.i1 = i1;
        J.i2 = i2;
        run_rows(&J);
        if (i2 < n_in) /* W[:, i2:] -= E (n_out x B) * U[i1:i2, i2:] */
            mw_gemm(pool, false, false, n_out, n_in - i2, i2 - i1, -1.0f, E, lazy,
                    U + i1 * n_in + i2, n_in, 1.0f, J.w + i2, n_in, 0);
    }
    if (act) /* the values llama.cpp will compute with, in the original order */
        tr->to_float(out, w, n_out * n_in);
done:
    mw_pool_free(pool);
    free(wp);
    free(Ag);
    free(Bg);
    free(E);
    free(scratch);
    return st;
}

enum mw_status quant_gptq(uint32_t type, float *w, uint64_t n_out, uint64_t n_in, const float *H,
                          const struct quant_gptq_opts *o, void *out, struct mw_err *err)
{
    const struct gguf_type_info *ti = gguf_type_get(type);
    if (!quant_gptq_supported(type) || !ti)
        return MW_FAIL(err, MW_E_USAGE, MW_ERR_OFF_NONE, "GPTQ does not support type %u", type);
    if (n_in == 0 || n_in % ti->blck || n_in > INT32_MAX)
        return MW_FAIL(err, MW_E_USAGE, MW_ERR_OFF_NONE,
                       "GPTQ: row length %llu is not a positive multiple of %s's block %u",
                       (unsigned long long)n_in, ti->name, (unsigned)ti->blck);
    if (n_out == 0) return MW_OK;
    uint64_t nn;
    if (!mw_mul_u64(n_in, n_in, &nn) || nn > SIZE_MAX / sizeof(float))
        return MW_FAIL(err, MW_E_NOMEM, MW_ERR_OFF_NONE, "GPTQ: sizes overflow");
    float *U = malloc((size_t)nn * sizeof(float));
    float *imp = malloc((size_t)n_in * sizeof(float));
    uint32_t *perm = malloc((size_t)n_in * sizeof *perm);
    enum mw_status st = MW_OK;
    if (!U || !imp || !perm) {
        st = MW_FAIL(err, MW_E_NOMEM, MW_ERR_OFF_NONE, "GPTQ: out of memory (%llu bytes)",
                     (unsigned long long)(nn * 4));
        goto done;
    }
    for (unsigned attempt = 0;; attempt++) {
        bool retry = false;
        memcpy(U, H, (size_t)nn * sizeof(float));
        st = quant_gptq_prepare(U, n_in, o, attempt, imp, perm, &retry, err);
        if (st == MW_OK || !retry) break;
        mw_err_clear(err);
    }
    if (st == MW_OK) st = quant_gptq_apply(type, w, n_out, n_in, U, imp, perm, o, out, err);
done:
    free(U);
    free(imp);
    free(perm);
    return st;
}

double quant_output_error(const float *w, const float *q, uint64_t n_out, uint64_t n_in,
                          const float *H)
{
    double tot = 0;
    double *d = malloc(n_in * sizeof(double));
    if (!d) return NAN;
    for (uint64_t r = 0; r < n_out; r++) {
        for (uint64_t j = 0; j < n_in; j++) d[j] = (double)w[r * n_in + j] - q[r * n_in + j];
        for (uint64_t i = 0; i < n_in; i++) {
            double s = 0;
            const float *h = H + i * n_in;
            for (uint64_t j = 0; j < n_in; j++) s += h[j] * d[j];
            tot += d[i] * s;
        }
    }
    free(d);
    return tot;
}

/* --- learned rounding: coordinate descent on the layer objective --- */

struct round_job {
    uint32_t type;
    const struct quant_traits *tr;
    int qmax;
    uint64_t bs, bbytes, row_bytes, n_in, n_out;
    const float *H;
    uint8_t *q;         /* the blocks, levels rewritten in place */
    float *deq;         /* (n_out, n_in) dequantized values, in: E·H (the gradient), out: values */
    unsigned max_sweeps;
    bool scales;        /* the sub-block scale passes too */
    size_t scratch_bytes;
    uint8_t *scratch;   /* per thread: a, b (n_in floats each), g (n_in doubles), lv (n_in ints),
                         * one block */
    uint64_t *flips;    /* per row */
    unsigned *sweeps;   /* per row */
    bool *bad;          /* per row: a non-finite value appeared */
};

/* The sub-block scales of the k-quants, as the integers stored: Q4_K /
 * Q5_K 8 sub-blocks of 32 with a 6-bit scale and a 6-bit min (which 0,
 * 1), Q3_K 16 of 16 with a 6-bit scale (stored + 32), Q6_K 16 of 16 with
 * an int8 scale. Other formats: none (0). */
static int sub_count(uint32_t t, int *len, int *n_which, int *lo, int *hi)
{
    switch (t) {
    case GGUF_TYPE_Q4_K:
    case GGUF_TYPE_Q5_K: *len = 32; *n_which = 2; *lo = 0; *hi = 63; return 8;
    case GGUF_TYPE_Q3_K: *len = 16; *n_which = 1; *lo = 0; *hi = 63; return 16;
    case GGUF_TYPE_Q6_K: *len = 16; *n_which = 1; *lo = -128; *hi = 127; return 16;
    default: return 0;
    }
}

static int sub_get(uint32_t t, const uint8_t *b, int j, int which)
{
    switch (t) {
    case GGUF_TYPE_Q4_K:
    case GGUF_TYPE_Q5_K: {
        const uint8_t *q = b + 4;
        if (j < 4) return which ? q[j + 4] & 63 : q[j] & 63;
        return which ? (q[j + 4] >> 4) | ((q[j] >> 6) << 4)
                     : (q[j + 4] & 0xF) | ((q[j - 4] >> 6) << 4);
    }
    case GGUF_TYPE_Q3_K: {
        const uint8_t *q = b + 96;
        return ((q[j % 8] >> (4 * (j / 8))) & 0xF) | (((q[8 + j % 4] >> (2 * (j / 4))) & 3) << 4);
    }
    case GGUF_TYPE_Q6_K: return (int8_t)b[192 + j];
    default: return 0;
    }
}

static void sub_set(uint32_t t, uint8_t *b, int j, int which, int v)
{
    switch (t) {
    case GGUF_TYPE_Q4_K:
    case GGUF_TYPE_Q5_K: {
        uint8_t *q = b + 4;
        if (j < 4) {
            uint8_t *p = which ? &q[j + 4] : &q[j];
            *p = (uint8_t)((*p & 0xC0) | (v & 63));
        } else if (which) {
            q[j + 4] = (uint8_t)((q[j + 4] & 0x0F) | ((v & 15) << 4));
            q[j] = (uint8_t)((q[j] & 0x3F) | (((v >> 4) & 3) << 6));
        } else {
            q[j + 4] = (uint8_t)((q[j + 4] & 0xF0) | (v & 15));
            q[j - 4] = (uint8_t)((q[j - 4] & 0x3F) | (((v >> 4) & 3) << 6));
        }
        break;
    }
    case GGUF_TYPE_Q3_K: {
        uint8_t *q = b + 96;
        const int sh = 4 * (j / 8), hs = 2 * (j / 4);
        q[j % 8] = (uint8_t)((q[j % 8] & ~(0xF << sh)) | ((v & 0xF) << sh));
        q[8 + j % 4] = (uint8_t)((q[8 + j % 4] & ~(3 << hs)) | (((v >> 4) & 3) << hs));
        break;
    }
    case GGUF_TYPE_Q6_K: b[192 + j] = (uint8_t)(int8_t)v; break;
    default: break;
    }
}

/* The grid of one block (value = a * level + b) from its scales. */
static void round_grid(const struct round_job *J, const uint8_t *blk, uint8_t *probe, float *a,
                       float *b)
{
    const uint64_t bs = J->bs;
    memcpy(probe, blk, J->bbytes);
    for (uint64_t e = 0; e < bs; e++) grid_set_q(J->type, probe, (int)e, 0);
    J->tr->to_float(probe, b, bs);
    for (uint64_t e = 0; e < bs; e++) grid_set_q(J->type, probe, (int)e, 1);
    J->tr->to_float(probe, a, bs);
    for (uint64_t e = 0; e < bs; e++) {
        a[e] -= b[e];
        if (!isfinite(a[e]) || !isfinite(b[e])) a[e] = 0.0f; /* a column the grid cannot move */
    }
}

/* g -= dv · H[j, :] (H symmetric: the row is the column). */
static void round_move(const struct round_job *J, double *g, uint64_t j, double dv)
{
    const uint64_t n = J->n_in;
    const float *hr = J->H + j * n;
    for (uint64_t k = 0; k < n; k++) g[k] -= dv * hr[k];
}

/* Sweeps over the levels of one row until one moves nothing; moves made. */
static uint64_t round_levels(const struct round_job *J, const float *a, int *lv, double *g,
                             unsigned *sweeps)
{
    const uint64_t n = J->n_in;
    uint64_t flips = 0;
    for (unsigned sw = 0; sw < J->max_sweeps; sw++) {
        uint64_t moved = 0;
        ++*sweeps;
        for (uint64_t j = 0; j < n; j++) {
            const double hjj = J->H[j * n + j], aj = a[j];
            if (!(hjj > 0) || aj == 0.0) continue;
            /* f(e) = eᵀHe with e = w0 - value; moving the level by d changes
             * the value by aj·d and f by -2·aj·d·g_j + aj²·d²·H_jj */
            const double dstar = g[j] / (aj * hjj);
            if (!(fabs(dstar) >= 0.5)) continue;
            const int d = quant_clampi(lv[j] + (int)lround(fmax(fmin(dstar, 1e6), -1e6)), 0,
                                       J->qmax) - lv[j];
            if (d == 0) continue;
            const double dv = aj * d;
            if (!(-2.0 * dv * g[j] + dv * dv * hjj < 0)) continue;
            lv[j] += d;
            round_move(J, g, j, dv);
            moved++;
        }
        flips += moved;
        if (!moved) break;
    }
    return flips;
}

/* One pass over the sub-block scales (and mins) of one row: each stored
 * integer is tried one step up and one down; the sub-block's levels go to
 * the nearest of their current values on the new grid, then two passes of
 * level moves inside the sub-block; kept when f falls (exactly: Δf =
 * -2 Δv·g + Δvᵀ H Δv over the sub-block). Moves kept. */
static uint64_t round_scales(const struct round_job *J, uint8_t *qrow, float *a, float *b, int *lv,
                             double *g, uint8_t *probe, float *ta, float *tb, double *dv,
                             double *gl, int *tl)
{
    int len, nwh, lo, hi;
    const int nsub = sub_count(J->type, &len, &nwh, &lo, &hi);
    const uint64_t n = J->n_in, bs = J->bs;
    uint64_t kept = 0;
    for (uint64_t c0 = 0; c0 < n && nsub; c0 += bs) {
        uint8_t *blk = qrow + (c0 / bs) * J->bbytes;
        for (int sb = 0; sb < nsub; sb++) {
            const uint64_t e0 = c0 + (uint64_t)sb * (uint64_t)len;
            for (int wh = 0; wh < nwh; wh++) {
                for (int step = -1; step <= 1; step += 2) {
                    const int cur = sub_get(J->type, blk, sb, wh), nv = cur + step;
                    if (nv < lo || nv > hi) continue;
                    sub_set(J->type, blk, sb, wh, nv);
                    round_grid(J, blk, probe, ta, tb);
                    /* the sub-block's values kept as close as the new grid allows,
                     * then coordinate moves inside the sub-block (gl: the gradient
                     * at the trial point, on the sub-block's coordinates) */
                    bool ok = true;
                    for (int e = 0; e < len; e++) {
                        const uint64_t c = e0 + (uint64_t)e;
                        const double v = (double)a[c] * lv[c] + b[c];
                        const float na = ta[sb * len + e], nb = tb[sb * len + e];
                        int l = lv[c];
                        if (na != 0.0f)
                            l = quant_clampi((int)lround(fmax(fmin((v - nb) / na, 1e6), -1e6)), 0,
                                             J->qmax);
                        else if (a[c] != 0.0f)
                            ok = false; /* the grid would lose a column it can move */
                        tl[e] = l;
                        dv[e] = (double)na * l + nb - v;
                        if (!isfinite(dv[e])) ok = false;
                    }
                    double df = 0;
                    for (int e = 0; e < len && ok; e++) {
                        const uint64_t c = e0 + (uint64_t)e;
                        double hd = 0;
                        const float *hr = J->H + c * n + e0;
                        for (int k = 0; k < len; k++) hd += (double)hr[k] * dv[k];
                        gl[e] = g[c] - hd;
                        df += dv[e] * (hd - 2.0 * g[c]);
                    }
                    for (int pass = 0; pass < 2 && ok; pass++)
                        for (int e = 0; e < len; e++) {
                            const uint64_t c = e0 + (uint64_t)e;
                            const double hjj = J->H[c * n + c], na = ta[sb * len + e];
                            if (!(hjj > 0) || na == 0.0) continue;
                            const double ds = gl[e] / (na * hjj);
                            if (!(fabs(ds) >= 0.5)) continue;
                            const int d = quant_clampi(tl[e] + (int)lround(fmax(fmin(ds, 1e6), -1e6)),
                                                       0, J->qmax) - tl[e];
                            if (d == 0) continue;
                            const double dd = na * d, ddf = -2.0 * dd * gl[e] + dd * dd * hjj;
                            if (!(ddf < 0)) continue;
                            tl[e] += d;
                            dv[e] += dd;
                            df += ddf;
                            const float *hr = J->H + c * n + e0;
                            for (int k = 0; k < len; k++) gl[k] -= dd * hr[k];
                        }
                    const bool any = ok;
                    if (!any || !(df < 0)) {
                        sub_set(J->type, blk, sb, wh, cur);
                        continue;
                    }
                    for (int e = 0; e < len; e++) {
                        const uint64_t c = e0 + (uint64_t)e;
                        a[c] = ta[sb * len + e];
                        b[c] = tb[sb * len + e];
                        lv[c] = tl[e];
                        if (dv[e] != 0.0) round_move(J, g, c, dv[e]);
                    }
                    kept++;
                    break; /* this integer moved: on to the next */
                }
            }
        }
    }
    return kept;
}

static void round_rows(struct round_job *J, uint64_t r0, uint64_t r1, uint8_t *scr)
{
    const uint64_t n = J->n_in, bs = J->bs;
    float *a = (float *)(void *)scr;
    float *b = a + n;
    float *ta = b + n, *tb = ta + bs;
    double *g = (double *)(void *)(tb + bs);
    double *dv = g + n, *gl = dv + bs;
    int *lv = (int *)(void *)(gl + bs);
    int *tl = lv + n;
    uint8_t *probe = (uint8_t *)(tl + bs);
    for (uint64_t r = r0; r < r1; r++) {
        uint8_t *qrow = J->q + r * J->row_bytes;
        float *gr = J->deq + r * n; /* the gradient E·H of this row on entry */
        bool bad = false;
        for (uint64_t j = 0; j < n; j++) {
            g[j] = gr[j];
            if (!isfinite(gr[j])) bad = true;
        }
        /* each block's grid and the levels it holds */
        for (uint64_t c0 = 0; c0 < n; c0 += bs) {
            const uint8_t *blk = qrow + (c0 / bs) * J->bbytes;
            round_grid(J, blk, probe, a + c0, b + c0);
            J->tr->to_float(blk, gr + c0, bs); /* gr: the current values from here on */
            for (uint64_t e = 0; e < bs; e++) {
                const uint64_t c = c0 + e;
                lv[c] = a[c] != 0.0f && isfinite(gr[c])
                            ? quant_clampi(quant_nint((gr[c] - b[c]) / a[c]), 0, J->qmax)
                            : 0;
            }
        }
        uint64_t flips = 0;
        unsigned sw = 0;
        for (unsigned round = 0; !bad && round < QUANT_ROUND_SCALE_PASSES + 1; round++) {
            flips += round_levels(J, a, lv, g, &sw);
            if (round == QUANT_ROUND_SCALE_PASSES || !J->scales) break;
            const uint64_t k = round_scales(J, qrow, a, b, lv, g, probe, ta, tb, dv, gl, tl);
            flips += k;
            if (!k) break;
        }
        for (uint64_t j = 0; j < n && !bad; j++)
            if (!isfinite(g[j])) bad = true;
        if (!bad && flips) {
            for (uint64_t c0 = 0; c0 < n; c0 += bs) {
                uint8_t *blk = qrow + (c0 / bs) * J->bbytes;
                for (uint64_t e = 0; e < bs; e++) grid_set_q(J->type, blk, (int)e, lv[c0 + e]);
                J->tr->to_float(blk, gr + c0, bs);
            }
        }
        J->flips[r] = bad ? 0 : flips;
        J->sweeps[r] = sw;
        J->bad[r] = bad;
    }
}

static void round_task(void *arg, unsigned ith, unsigned nth)
{
    struct round_job *J = arg;
    const uint64_t r0 = J->n_out * ith / nth, r1 = J->n_out * (ith + 1) / nth;
    if (r0 < r1) round_rows(J, r0, r1, J->scratch + (size_t)ith * J->scratch_bytes);
}

/* Σ_rows (w0 - v)ᵀ H (w0 - v) from E and G = E·H, in double, row by row. */
static double round_objective(const float *E, const float *G, uint64_t n_out, uint64_t n_in)
{
    double tot = 0;
    for (uint64_t r = 0; r < n_out; r++) {
        double s = 0;
        for (uint64_t j = 0; j < n_in; j++) s += (double)E[r * n_in + j] * G[r * n_in + j];
        tot += s;
    }
    return tot;
}

enum mw_status quant_round_refine(uint32_t type, const float *w0, uint64_t n_out, uint64_t n_in,
                                  const float *H, const struct quant_round_opts *o, void *q,
                                  float *w, struct quant_round_stats *rs, struct mw_err *err)
{
    const struct gguf_type_info *ti = gguf_type_get(type);
    const struct quant_traits *tr = quant_traits_get(type);
    struct quant_round_stats z = {0};
    if (rs) *rs = z;
    if (!quant_gptq_supported(type) || !ti || !tr || !tr->to_float)
        return MW_FAIL(err, MW_E_USAGE, MW_ERR_OFF_NONE,
                       "learned rounding does not support type %u", type);
    if (n_in == 0 || n_in % ti->blck || n_in > INT32_MAX || n_out > INT32_MAX)
        return MW_FAIL(err, MW_E_USAGE, MW_ERR_OFF_NONE,
                       "learned rounding: row length %llu is not a positive multiple of %s's "
                       "block %u",
                       (unsigned long long)n_in, ti->name, (unsigned)ti->blck);
    if (n_out == 0) return MW_OK;
    const uint64_t bs = ti->blck;
    unsigned nt = o && o->n_threads ? o->n_threads : 1;
    if (nt > 256) nt = 256;
    if (nt > n_out) nt = (unsigned)n_out;
    uint64_t nw, row_bytes, qbytes;
    if (!mw_mul_u64(n_out, n_in, &nw) || nw > SIZE_MAX / sizeof(float) ||
        !mw_mul_u64(n_in / bs, ti->type_size, &row_bytes) ||
        !mw_mul_u64(row_bytes, n_out, &qbytes) || qbytes > SIZE_MAX)
        return MW_FAIL(err, MW_E_NOMEM, MW_ERR_OFF_NONE, "learned rounding: sizes overflow");
    const size_t scr = (size_t)(((n_in + 2 * bs) * (2 * sizeof(float) + sizeof(double) + sizeof(int)) +
                                 ti->type_size + 63) / 64 * 64);
    float *E = malloc((size_t)nw * sizeof(float));
    float *G = malloc((size_t)nw * sizeof(float));
    uint8_t *q0 = malloc((size_t)qbytes);
    uint8_t *scratch = malloc(scr * nt);
    uint64_t *flips = malloc((size_t)n_out * sizeof *flips);
    unsigned *sweeps = malloc((size_t)n_out * sizeof *sweeps);
    bool *bad = malloc((size_t)n_out * sizeof *bad);
    struct mw_pool *pool = NULL;
    enum mw_status st = MW_OK;
    if (!E || !G || !q0 || !scratch || !flips || !sweeps || !bad) {
        st = MW_FAIL(err, MW_E_NOMEM, MW_ERR_OFF_NONE,
                     "learned rounding: out of memory (%llu bytes)",
                     (unsigned long long)(8 * nw + qbytes));
        goto done;
    }
    mw_blas_init();
    if ((st = mw_pool_init(nt, &pool, err)) != MW_OK) goto done;
    memcpy(q0, q, (size_t)qbytes);
    /* the starting point: E = w0 - values, G = E·H (H symmetric) */
    tr->to_float(q, w, nw);
    for (uint64_t i = 0; i < nw; i++) E[i] = w0[i] - w[i];
    mw_gemm(pool, false, false, n_out, n_in, n_in, 1.0f, E, n_in, H, n_in, 0.0f, G, n_in, 0);
    const double before = round_objective(E, G, n_out, n_in);
    struct round_job J = {.type = type, .tr = tr, .qmax = grid_qmax(type), .bs = bs,
                          .bbytes = ti->type_size, .row_bytes = row_bytes, .n_in = n_in,
                          .n_out = n_out, .H = H, .q = q, .deq = G,
                          .max_sweeps = o && o->max_sweeps ? o->max_sweeps : QUANT_ROUND_SWEEPS,
                          .scales = !(o && o->no_scales),
                          .scratch_bytes = scr, .scratch = scratch, .flips = flips,
                          .sweeps = sweeps, .bad = bad};
    mw_pool_run(pool, round_task, &J);
    /* G holds the new values: the objective again, exactly */
    for (uint64_t i = 0; i < nw; i++) E[i] = w0[i] - G[i];
    memcpy(w, G, (size_t)nw * sizeof(float));
    mw_gemm(pool, false, false, n_out, n_in, n_in, 1.0f, E, n_in, H, n_in, 0.0f, G, n_in, 0);
    const double after = round_objective(E, G, n_out, n_in);
    struct quant_round_stats s = {.before = before, .after = after};
    for (uint64_t r = 0; r < n_out; r++) {
        s.flips += flips[r];
        if (sweeps[r] > s.sweeps) s.sweeps = sweeps[r];
        if (bad[r]) s.bad_rows++;
    }
    if (!isfinite(before) || !isfinite(after) || after > before || s.bad_rows) {
        /* diverged, or no better: the blocks it started from, unchanged */
        memcpy(q, q0, (size_t)qbytes);
        tr->to_float(q, w, nw);
        s.fell_back = true;
        s.after = before;
        s.flips = 0;
    }
    if (rs) *rs = s;
done:
    mw_pool_free(pool);
    free(E);
    free(G);
    free(q0);
    free(scratch);
    free(flips);
    free(sweeps);
    free(bad);
    return st;
}
