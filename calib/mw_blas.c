/*
 * calib/mw_blas.c — thread-count-independent GEMM, Gram (Hessian)
 * accumulation, Cholesky factorization and triangular inverse (mw_blas.h).
 *
 * Every function cuts its problem into tiles whose shapes follow from the
 * problem's size alone, calls single-threaded OpenBLAS once per tile, and
 * hands tiles to the pool's threads from a shared counter. Which thread
 * computes a tile changes nothing in its bits; sums across tiles run in a
 * fixed order within one task.
 */
#include "calib/mw_blas.h"

#include <cblas.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

/* LAPACK (exported by libopenblas; lapacke.h is not installed). Column-major:
 * a row-major lower triangle is a column-major upper one. */
extern void spotrf_(const char *uplo, const int *n, float *a, const int *lda, int *info);
extern void strtri_(const char *uplo, const char *diag, const int *n, float *a, const int *lda,
                    int *info);

void mw_blas_init(void)
{
    if (openblas_get_num_threads() != 1) openblas_set_num_threads(1);
}

// --- task runner ----------------------------------------------------------------------

typedef void (*task_fn)(void *ctx, uint64_t task);

struct tasks {
    task_fn fn;
    void *ctx;
    uint64_t n;
    atomic_uint_fast64_t next;
};

static void tasks_worker(void *arg, unsigned ith, unsigned nth)
{
    (void)ith;
    (void)nth;
    struct tasks *T = arg;
    for (;;) {
        const uint64_t t = atomic_fetch_add(&T->next, 1);
        if (t >= T->n) break;
        T->fn(T->ctx, t);
    }
}

static void run_tasks(struct mw_pool *pool, uint64_t n, task_fn fn, void *ctx)
{
    struct tasks T = {.fn = fn, .ctx = ctx, .n = n};
    atomic_init(&T.next, 0);
    if (!pool || n <= 1)
        tasks_worker(&T, 0, 1);
    else
        mw_pool_run(pool, tasks_worker, &T);
}

// --- row tiles ------------------------------------------------------------------------

/* Row tiles of M rows in segments of seg rows: each segment is cut into
 * ceil(seg / MW_BLAS_TILE_M) tiles of tm rows (the last one shorter). */
struct rows {
    uint64_t M, seg, tm, per_seg, n;
};

static struct rows rows_make(uint64_t M, uint64_t seg)
{
    struct rows r = {.M = M, .seg = seg && seg < M ? seg : M};
    if (r.seg == 0) return r;
    const uint64_t k = (r.seg + MW_BLAS_TILE_M - 1) / MW_BLAS_TILE_M;
    r.tm = (r.seg + k - 1) / k;
    r.per_seg = (r.seg + r.tm - 1) / r.tm;
    r.n = (M + r.seg - 1) / r.seg * r.per_seg;
    return r;
}

/* [*r0, *r1) of row tile q; false when empty (a short last segment) */
static bool rows_tile(const struct rows *r, uint64_t q, uint64_t *r0, uint64_t *r1)
{
    const uint64_t s0 = q / r->per_seg * r->seg;
    uint64_t end = s0 + r->seg;
    if (end > r->M) end = r->M;
    *r0 = s0 + q % r->per_seg * r->tm;
    *r1 = *r0 + r->tm < end ? *r0 + r->tm : end;
    return *r0 < *r1;
}

// --- GEMM -----------------------------------------------------------------------------

struct gemm_job {
    bool ta, tb;
    uint64_t N, K;
    float alpha, beta;
    const float *A, *B;
    float *C;
    uint64_t lda, ldb, ldc, n_ct;
    struct rows rows;
};

static void gemm_task(void *ctx, uint64_t t)
{
    const struct gemm_job *J = ctx;
    uint64_t r0, r1;
    if (!rows_tile(&J->rows, t / J->n_ct, &r0, &r1)) return;
    const uint64_t c0 = t % J->n_ct * MW_BLAS_TILE_N;
    const uint64_t c1 = c0 + MW_BLAS_TILE_N < J->N ? c0 + MW_BLAS_TILE_N : J->N;
    const float *a = J->ta ? J->A + r0 : J->A + r0 * J->lda;
    const float *b = J->tb ? J->B + c0 * J->ldb : J->B + c0;
    cblas_sgemm(CblasRowMajor, J->ta ? CblasTrans : CblasNoTrans, J->tb ? CblasTrans : CblasNoTrans,
                (int)(r1 - r0), (int)(c1 - c0), (int)J->K, J->alpha, a, (int)J->lda, b,
                (int)J->ldb, J->beta, J->C + r0 * J->ldc + c0, (int)J->ldc);
}

void mw_gemm(struct mw_pool *pool, bool ta, bool tb, uint64_t M, uint64_t N, uint64_t K,
             float alpha, const float *A, uint64_t lda, const float *B, uint64_t ldb, float beta,
             float *C, uint64_t ldc, uint64_t seg)
{
    if (M == 0 || N == 0) return;
    struct gemm_job J = {.ta = ta, .tb = tb, .N = N, .K = K, .alpha = alpha, .beta = beta,
                         .A = A, .B = B, .C = C, .lda = lda, .ldb = ldb, .ldc = ldc,
                         .n_ct = (N + MW_BLAS_TILE_N - 1) / MW_BLAS_TILE_N,
                         .rows = rows_make(M, seg)};
    run_tasks(pool, J.rows.n * J.n_ct, gemm_task, &J);
}

// --- Gram matrix (Hessian) --------------------------------------------------------------

struct gram_job {
    uint64_t n, nb, ldx;
    const float *X;
    float *H;
    bool first;
    struct rows rows;
};

/* upper block pair t (row-major over bi <= bj) -> (bi, bj) */
static void upper_pair(uint64_t nb, uint64_t t, uint64_t *bi, uint64_t *bj)
{
    uint64_t i = 0;
    while (t >= nb - i) {
        t -= nb - i;
        i++;
    }
    *bi = i;
    *bj = i + t;
}

static void gram_task(void *ctx, uint64_t t)
{
    const struct gram_job *J = ctx;
    uint64_t bi, bj;
    upper_pair(J->nb, t, &bi, &bj);
    const uint64_t i0 = bi * MW_BLAS_TILE_N, j0 = bj * MW_BLAS_TILE_N;
    const uint64_t ni = i0 + MW_BLAS_TILE_N < J->n ? MW_BLAS_TILE_N : J->n - i0;
    const uint64_t nj = j0 + MW_BLAS_TILE_N < J->n ? MW_BLAS_TILE_N : J->n - j0;
    bool first = J->first;
    for (uint64_t q = 0; q < J->rows.n; q++) {
        uint64_t r0, r1;
        if (!rows_tile(&J->rows, q, &r0, &r1)) continue;
        const float *x = J->X + r0 * J->ldx;
        cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, (int)ni, (int)nj, (int)(r1 - r0),
                    1.0f, x + i0, (int)J->ldx, x + j0, (int)J->ldx, first ? 0.0f : 1.0f,
                    J->H + i0 * J->n + j0, (int)J->n);
        first = false;
    }
    if (first) /* no rows at all */
        for (uint64_t i = 0; i < ni; i++) memset(J->H + (i0 + i) * J->n + j0, 0, nj * sizeof(float));
}

void mw_gram_acc(struct mw_pool *pool, uint64_t n, uint64_t nr, const float *X, uint64_t ldx,
                 bool first, float *H, uint64_t seg)
{
    if (n == 0) return;
    struct gram_job J = {.n = n, .nb = (n + MW_BLAS_TILE_N - 1) / MW_BLAS_TILE_N, .ldx = ldx,
                         .X = X, .H = H, .first = first, .rows = rows_make(nr, seg)};
    run_tasks(pool, J.nb * (J.nb + 1) / 2, gram_task, &J);
}

void mw_sym_lower_from_upper(float *H, uint64_t n)
{
    for (uint64_t i = 0; i < n; i++)
        for (uint64_t j = 0; j < i; j++) H[i * n + j] = H[j * n + i];
}

// --- Cholesky ---------------------------------------------------------------------------

/* blocks of MW_BLAS_NB: block b covers [b*NB, min((b+1)*NB, n)) */
static uint64_t blk_len(uint64_t n, uint64_t b)
{
    const uint64_t b0 = b * MW_BLAS_NB;
    return b0 + MW_BLAS_NB < n ? MW_BLAS_NB : n - b0;
}

struct chol_job {
    float *A;
    uint64_t n, nb, k;
    float *T; /* tri_inv: the panel, n x NB */
};

/* panel: L_ik = A_ik L_kk^-T for row block i = k + 1 + t */
static void chol_panel_task(void *ctx, uint64_t t)
{
    const struct chol_job *J = ctx;
    const uint64_t i = J->k + 1 + t, k0 = J->k * MW_BLAS_NB, i0 = i * MW_BLAS_NB;
    cblas_strsm(CblasRowMajor, CblasRight, CblasLower, CblasTrans, CblasNonUnit,
                (int)blk_len(J->n, i), (int)blk_len(J->n, J->k), 1.0f, J->A + k0 * J->n + k0,
                (int)J->n, J->A + i0 * J->n + k0, (int)J->n);
}

/* trailing update: A_ij -= L_ik L_jkᵀ for k < j <= i (lower block pair t) */
static void chol_update_task(void *ctx, uint64_t t)
{
    const struct chol_job *J = ctx;
    const uint64_t m = J->nb - J->k - 1; /* trailing blocks */
    uint64_t a, b;                        /* upper pair (a <= b) of the transpose */
    upper_pair(m, t, &a, &b);
    const uint64_t j = J->k + 1 + a, i = J->k + 1 + b;
    const uint64_t k0 = J->k * MW_BLAS_NB, i0 = i * MW_BLAS_NB, j0 = j * MW_BLAS_NB;
    const int n = (int)J->n;
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (int)blk_len(J->n, i),
                (int)blk_len(J->n, j), (int)blk_len(J->n, J->k), -1.0f, J->A + i0 * J->n + k0, n,
                J->A + j0 * J->n + k0, n, 1.0f, J->A + i0 * J->n + j0, n);
}

int mw_chol_lower(struct mw_pool *pool, float *A, uint64_t n)
{
    struct chol_job J = {.A = A, .n = n, .nb = (n + MW_BLAS_NB - 1) / MW_BLAS_NB};
    for (uint64_t k = 0; k < J.nb; k++) {
        const uint64_t k0 = k * MW_BLAS_NB;
        const int kn = (int)blk_len(n, k), ld = (int)n;
        int info = 0;
        spotrf_("U", &kn, A + k0 * n + k0, &ld, &info);
        if (info) return (int)k0 + info;
        J.k = k;
        const uint64_t m = J.nb - k - 1;
        if (m == 0) break;
        run_tasks(pool, m, chol_panel_task, &J);
        run_tasks(pool, m * (m + 1) / 2, chol_update_task, &J);
    }
    return 0;
}

// --- triangular inverse -----------------------------------------------------------------

/* T_i = X_ii L_ij + Σ_{k = j+1}^{i-1} X_ik L_kj for row block i = j + 1 + t,
 * where X = L^-1 is already in place below and right of block j */
static void inv_panel_task(void *ctx, uint64_t t)
{
    const struct chol_job *J = ctx;
    const uint64_t j = J->k, i = j + 1 + t, n = J->n;
    const uint64_t j0 = j * MW_BLAS_NB, i0 = i * MW_BLAS_NB, jn = blk_len(n, j);
    const uint64_t in = blk_len(n, i);
    float *Ti = J->T + (i0 - (j0 + jn)) * MW_BLAS_NB;
    for (uint64_t r = 0; r < in; r++)
        memcpy(Ti + r * MW_BLAS_NB, J->A + (i0 + r) * n + j0, jn * sizeof(float));
    cblas_strmm(CblasRowMajor, CblasLeft, CblasLower, CblasNoTrans, CblasNonUnit, (int)in,
                (int)jn, 1.0f, J->A + i0 * n + i0, (int)n, Ti, MW_BLAS_NB);
    for (uint64_t k = j + 1; k < i; k++) {
        const uint64_t k0 = k * MW_BLAS_NB;
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)in, (int)jn,
                    (int)blk_len(n, k), 1.0f, J->A + i0 * n + k0, (int)n, J->A + k0 * n + j0,
                    (int)n, 1.0f, Ti, MW_BLAS_NB);
    }
}

/* X_ij = -T_i L_jj^-1 */
static void inv_store_task(void *ctx, uint64_t t)
{
    const struct chol_job *J = ctx;
    const uint64_t j = J->k, i = j + 1 + t, n = J->n;
    const uint64_t j0 = j * MW_BLAS_NB, i0 = i * MW_BLAS_NB, jn = blk_len(n, j);
    const uint64_t in = blk_len(n, i);
    const float *Ti = J->T + (i0 - (j0 + jn)) * MW_BLAS_NB;
    for (uint64_t r = 0; r < in; r++)
        memcpy(J->A + (i0 + r) * n + j0, Ti + r * MW_BLAS_NB, jn * sizeof(float));
    cblas_strsm(CblasRowMajor, CblasRight, CblasLower, CblasNoTrans, CblasNonUnit, (int)in,
                (int)jn, -1.0f, J->A + j0 * n + j0, (int)n, J->A + i0 * n + j0, (int)n);
}

int mw_tri_inv_lower(struct mw_pool *pool, float *L, uint64_t n)
{
    if (n == 0) return 0;
    struct chol_job J = {.A = L, .n = n, .nb = (n + MW_BLAS_NB - 1) / MW_BLAS_NB};
    J.T = malloc((size_t)n * MW_BLAS_NB * sizeof(float));
    if (!J.T) return -1;
    int info = 0;
    for (uint64_t jb = J.nb; jb-- > 0;) {
        const uint64_t j0 = jb * MW_BLAS_NB, m = J.nb - jb - 1;
        J.k = jb;
        if (m) {
            run_tasks(pool, m, inv_panel_task, &J);
            run_tasks(pool, m, inv_store_task, &J);
        }
        const int jn = (int)blk_len(n, jb), ld = (int)n;
        strtri_("U", "N", &jn, L + j0 * n + j0, &ld, &info);
        if (info) {
            info += (int)j0;
            break;
        }
    }
    free(J.T);
    return info;
}
