/*
 * quant/quant_rows.c — quant_rows(): a matrix, row by row, over a thread
 * pool (core/mw_pool.h).
 *
 * Every row is quantized by the type's from_float (or quant_row_best) alone,
 * a pure function of that row and the imatrix, so splitting the rows into
 * contiguous ranges, one per thread, gives the same bytes for every thread
 * count. Nothing is allocated per row: from_float keeps its scratch on its
 * stack, and the only allocations are the pool and, in QUANT_MODE_BEST, one
 * scratch buffer per thread, once per call.
 */
#include "quant/quant_int.h"

#include <stdlib.h>

#include "core/mw_pool.h"

struct rows_job {
    const struct quant_traits *qt;
    uint32_t type;
    enum quant_mode mode;
    void *scratch;       /* QUANT_MODE_BEST: this thread's quant_row_best scratch */
    const float *x;      /* (n_rows, n_per_row) f32, row-major */
    const float *imatrix; /* n_per_row weights or NULL */
    uint8_t *out;        /* (n_rows, row_bytes) */
    uint64_t n_per_row, row_bytes;
    uint64_t r0, r1;     /* rows [r0, r1) */
};

static void rows_run(const struct rows_job *j)
{
    for (uint64_t r = j->r0; r < j->r1; r++) {
        const float *xr = j->x + r * j->n_per_row;
        uint8_t *o = j->out + r * j->row_bytes;
        if (j->mode == QUANT_MODE_BEST)
            quant_row_best(j->type, xr, o, j->n_per_row, j->imatrix, j->scratch);
        else
            j->qt->from_float(xr, o, j->n_per_row, j->imatrix);
    }
}

/* mw_pool task: thread ith runs job ith (the pool has one thread per job). */
static void rows_task(void *arg, unsigned ith, unsigned nth)
{
    (void)nth;
    rows_run((const struct rows_job *)arg + ith);
}

static void rows_free(struct rows_job *jobs, uint64_t nt)
{
    for (uint64_t k = 0; jobs && k < nt; k++) free(jobs[k].scratch);
    free(jobs);
}

enum mw_status quant_rows(uint32_t t, const float *x, uint64_t n_rows, uint64_t n_per_row,
                          const float *imatrix, void *out, unsigned n_threads, struct mw_err *err)
{
    return quant_rows_mode(t, QUANT_MODE_GGML, x, n_rows, n_per_row, imatrix, out, n_threads,
                           err);
}

enum mw_status quant_rows_mode(uint32_t t, enum quant_mode mode, const float *x, uint64_t n_rows,
                               uint64_t n_per_row, const float *imatrix, void *out,
                               unsigned n_threads, struct mw_err *err)
{
    if (mode != QUANT_MODE_GGML && mode != QUANT_MODE_BEST)
        return MW_FAIL(err, MW_E_USAGE, MW_ERR_OFF_NONE, "unknown quantization mode %d",
                       (int)mode);
    const struct quant_traits *qt = quant_traits_get(t);
    const struct gguf_type_info *ti = gguf_type_get(t);
    if (!qt || !qt->from_float || !ti || ti->blck == 0)
        return MW_FAIL(err, MW_E_USAGE, MW_ERR_OFF_NONE, "type %u cannot be quantized", t);
    if (n_per_row == 0 || n_per_row % ti->blck != 0)
        return MW_FAIL(err, MW_E_USAGE, MW_ERR_OFF_NONE,
                       "row length %llu is not a positive multiple of %s's block size %u",
                       (unsigned long long)n_per_row, ti->name, ti->blck);
    if (qt->needs_imatrix && !imatrix)
        return MW_FAIL(err, MW_E_USAGE, MW_ERR_OFF_NONE,
                       "%s needs an importance matrix (as in llama-quantize: --imatrix or "
                       "--corpus)",
                       ti->name);
    uint64_t row_bytes, total, elems;
    if (!mw_mul_u64(n_per_row / ti->blck, ti->type_size, &row_bytes) ||
        !mw_mul_u64(row_bytes, n_rows, &total) || !mw_mul_u64(n_per_row, n_rows, &elems) ||
        total > (uint64_t)SIZE_MAX || elems > (uint64_t)SIZE_MAX / sizeof(float))
        return MW_FAIL(err, MW_E_USAGE, MW_ERR_OFF_NONE, "%llu rows of %llu: size overflows",
                       (unsigned long long)n_rows, (unsigned long long)n_per_row);
    if (n_rows == 0) return MW_OK;

    uint64_t nt = n_threads ? n_threads : 1;
    if (nt > n_rows) nt = n_rows;
    struct rows_job *jobs = calloc((size_t)nt, sizeof *jobs);
    bool ok = jobs != NULL;
    const size_t scratch = mode == QUANT_MODE_BEST ? quant_row_best_scratch(t, n_per_row) : 0;
    if (ok && mode == QUANT_MODE_BEST) {
        ok = scratch > 0;
        for (uint64_t k = 0; ok && k < nt; k++) ok = (jobs[k].scratch = malloc(scratch)) != NULL;
    }
    if (!ok) {
        rows_free(jobs, nt);
        return MW_FAIL(err, MW_E_NOMEM, MW_ERR_OFF_NONE, "quant_rows: %llu threads' scratch",
                       (unsigned long long)nt);
    }
    /* contiguous ranges; the first n_rows % nt get one row more */
    const uint64_t base = n_rows / nt, extra = n_rows % nt;
    for (uint64_t k = 0, r = 0; k < nt; k++) {
        const uint64_t len = base + (k < extra ? 1 : 0);
        void *sc = jobs[k].scratch;
        jobs[k] = (struct rows_job){qt,  t,         mode,      sc, x,    imatrix,
                                    out, n_per_row, row_bytes, r,  r + len};
        r += len;
    }
    /* One pool thread per range (the caller is thread 0). When the threads
     * cannot be started every range runs on the caller: the bytes do not
     * depend on who quantizes a row. */
    struct mw_pool *pool = NULL;
    if (nt > 1 && mw_pool_init((unsigned)nt, &pool, NULL) == MW_OK) {
        mw_pool_run(pool, rows_task, jobs);
        mw_pool_free(pool);
    } else {
        for (uint64_t k = 0; k < nt; k++) rows_run(&jobs[k]);
    }
    rows_free(jobs, nt);
    return MW_OK;
}
