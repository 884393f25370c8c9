/*
 * calib/mw_blas.h — dense linear algebra over OpenBLAS whose results do not
 * depend on the thread count.
 *
 * OpenBLAS returns bitwise-different rows of one product depending on the
 * call's shape (its edge kernels) and on its own thread count (how it
 * splits the work). So every BLAS call whose result feeds an output
 * (calibration forward, statistics, Hessians, AWQ, GPTQ) goes through here:
 *   - OpenBLAS runs single-threaded (mw_blas_init);
 *   - each problem is cut into a grid of tiles that depends only on the
 *     problem's shape and on the fixed tile sizes below, never on the
 *     thread count; one single-threaded BLAS call per tile;
 *   - the tiles are spread over an mw_pool; sums that cross tiles run in
 *     one fixed order on one thread.
 * The same inputs therefore give the same bits for any pool size, on a
 * given machine and OpenBLAS kernel. Across CPUs (another OpenBLAS core
 * type: Haswell, SkylakeX, Prescott, NEON ...) the last bits may differ.
 *
 * Segments: calibration multiplies batches of whole samples. With seg > 0
 * the rows of a problem are consecutive segments of seg rows and row tiles
 * start at every segment start and never cross one, so a row's result
 * depends on its place in its sample only, not on how many samples share
 * the batch (--max-memory's smaller batches give the same bits). A call's
 * first row must start a segment: a window that begins mid-sample would
 * cut other tiles (callers compute whole samples and copy the rows out).
 *
 * Library rules: nothing here allocates except mw_tri_inv_lower's panel
 * (returned as MW_E_NOMEM), prints or keeps state.
 */
#ifndef MW_BLAS_H
#define MW_BLAS_H

#include <stdbool.h>
#include <stdint.h>

#include "core/mw.h"
#include "core/mw_pool.h"

#define MW_BLAS_TILE_M 256 /* most rows of C per call */
#define MW_BLAS_TILE_N 256 /* columns of C per call */
#define MW_BLAS_NB 256     /* block of the Cholesky factorization and inverse */

/* OpenBLAS to one thread (process state; idempotent). Call from the thread
 * that drives the pool, before any of the functions below. */
void mw_blas_init(void);

/* C (M x N, row stride ldc) = alpha * op(A) op(B) + beta * C, row-major.
 * op(A) is M x K: A is M x K (stride lda), or K x M when ta.
 * op(B) is K x N: B is K x N (stride ldb), or N x K when tb.
 * seg: rows in segments of seg rows (0: one segment). pool may be NULL
 * (the caller's thread). Sizes must fit in int (callers check). */
void mw_gemm(struct mw_pool *pool, bool ta, bool tb, uint64_t M, uint64_t N, uint64_t K,
             float alpha, const float *A, uint64_t lda, const float *B, uint64_t ldb, float beta,
             float *C, uint64_t ldc, uint64_t seg);

/* Upper-triangle blocks of H (n x n, row-major) = (first ? 0 : H) + Xᵀ X
 * for X (nr x n, row stride ldx), summed over X's row tiles (segments of
 * seg rows, as above) in row order: the same rows fed in any batching of
 * whole segments give the same bits. Call mw_sym_lower_from_upper(H, n)
 * after the last batch. */
void mw_gram_acc(struct mw_pool *pool, uint64_t n, uint64_t nr, const float *X, uint64_t ldx,
                 bool first, float *H, uint64_t seg);
void mw_sym_lower_from_upper(float *H, uint64_t n);

/* In place: A (n x n, row-major, symmetric positive definite; its lower
 * triangle is read) -> its lower Cholesky factor L (A = L Lᵀ) in the lower
 * triangle; the strictly upper part is left undefined. Returns 0, or the
 * LAPACK info (> 0: not positive definite). */
int mw_chol_lower(struct mw_pool *pool, float *A, uint64_t n);

/* In place: lower triangular L (row-major, lower triangle read) -> L^-1 in
 * the lower triangle; the strictly upper part is left undefined. Returns 0,
 * > 0 for a zero diagonal (LAPACK info), -1 when the n x MW_BLAS_NB panel
 * cannot be allocated. */
int mw_tri_inv_lower(struct mw_pool *pool, float *L, uint64_t n);

#endif /* MW_BLAS_H */
