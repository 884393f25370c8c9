/*
 * calib/calib_spill.c — lean mode (--max-memory): the hidden states, the
 * attention outputs (with callbacks) and the layer's big weights live in
 * unlinked scratch files (page cache, not this process's memory). The
 * hidden states are read and written a batch at a time; a parked weight
 * is streamed in panels through the engine's GEMM, or made resident for a
 * callback and parked again.
 */
#define _POSIX_C_SOURCE 200809L
#include "calib/calib_int.h"
#include "core/mw_file.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* n bytes at off of a scratch file <-> buf; what names the file's content */
enum mw_status calib__spill_io(int fd, const char *path, bool write, uint64_t off, void *buf,
                               uint64_t n, const char *what, struct mw_err *err)
{
    mw_err_clear(err);
    enum mw_status s = write ? mw_pwrite_all(fd, buf, n, off, path, err)
                             : mw_pread_all(fd, buf, n, off, path, err);
    if (s) mw_err_set_where(err, "scratch file of %s (unlinked)", what);
    return s;
}

/* read: rows [r0, r0 + nr) of the scratch file -> hsb (the window starts
 * at r0); write: those rows, which must lie in the window, back to the file */
enum mw_status calib__hs_io(struct calib_engine *e, bool write, uint64_t r0, uint64_t nr,
                            struct mw_err *err)
{
    if (write)
        return calib__spill_io(e->hs_fd, e->hs_path, true, r0 * e->E * sizeof(float),
                               calib__hs_at(e, r0), nr * e->E * sizeof(float), "hidden states",
                               err);
    enum mw_status s = calib__spill_io(e->hs_fd, e->hs_path, false, r0 * e->E * sizeof(float),
                                       e->hsb, nr * e->E * sizeof(float), "hidden states", err);
    e->hsb_r0 = r0;
    e->hsb_n = s ? 0 : nr;
    return s;
}

/* hidden-state rows [r0, r0 + nr) (nr <= rows_b) available through calib__hs_at */
enum mw_status calib__hs_need(struct calib_engine *e, uint64_t r0, uint64_t nr,
                              struct mw_err *err)
{
    if (!e->hs_file || (r0 >= e->hsb_r0 && r0 + nr <= e->hsb_r0 + e->hsb_n)) return MW_OK;
    return calib__hs_io(e, false, r0, nr, err);
}

/* attention outputs X_o rows [r0, r0 + nr) <-> buf (the scratch file) */
enum mw_status calib__xo_io(struct calib_engine *e, bool write, uint64_t r0, uint64_t nr,
                            float *buf, struct mw_err *err)
{
    return calib__spill_io(e->xo_fd, e->xo_path, write, r0 * e->Q * sizeof(float), buf,
                           nr * e->Q * sizeof(float), "attention outputs", err);
}

static uint64_t slot_bytes(const struct calib_engine *e, enum calib_tslot t)
{
    return calib__slot_elems(e->hp, t) * sizeof(float);
}

/* lean: owner slot o resident (read back from the weights file) */
enum mw_status calib__w_resident(struct calib_engine *e, enum calib_tslot o, struct mw_err *err)
{
    if (!e->lean || e->wown[o] || !calib__model_has(e->m, e->ly.il, o)) return MW_OK;
    bool ok = true;
    float *b = calib__alloc_f(slot_bytes(e, o) / sizeof(float), &ok);
    if (!ok)
        return MW_FAIL(err, MW_E_NOMEM, MW_ERR_OFF_NONE, "layer %u: weight of %llu bytes",
                       e->ly.il, (unsigned long long)slot_bytes(e, o));
    enum mw_status s = calib__spill_io(e->w_fd, e->w_path, false, e->woff[o], b,
                                       slot_bytes(e, o), "parked weights", err);
    if (s) {
        free(b);
        return s;
    }
    e->wown[o] = e->w[o] = b;
    e->dirty[o] = false;
    calib__set_views(e);
    return MW_OK;
}

/* lean: owner slot o back to the weights file (written if changed), freed */
enum mw_status calib__w_park(struct calib_engine *e, enum calib_tslot o, struct mw_err *err)
{
    if (!e->lean || !e->wown[o] || !calib__big_slot(o)) return MW_OK;
    if (e->dirty[o]) {
        enum mw_status s = calib__spill_io(e->w_fd, e->w_path, true, e->woff[o], e->wown[o],
                                           slot_bytes(e, o), "parked weights", err);
        if (s) return s;
        e->dirty[o] = false;
    }
    free(e->wown[o]);
    e->wown[o] = e->w[o] = NULL;
    calib__set_views(e);
    return MW_OK;
}

enum mw_status calib__park_all(struct calib_engine *e, struct mw_err *err)
{
    enum mw_status s = MW_OK;
    for (int t = 0; t < CALIB_T_COUNT && !s; t++) s = calib__w_park(e, (enum calib_tslot)t, err);
    return s;
}

/* Rows of a lean panel for a weight of n_in columns (a multiple of 256:
 * whole mw_gemm tiles), and the panel buffer's floats: 64 MiB, at least 256
 * rows of the widest input, no more than the largest weight needs. */
static uint64_t panel_rows(uint64_t n_in)
{
    const uint64_t r = (((uint64_t)64 << 20) / sizeof(float)) / n_in / MW_BLAS_TILE_N *
                       MW_BLAS_TILE_N;
    return r > MW_BLAS_TILE_N ? r : MW_BLAS_TILE_N;
}

uint64_t calib__panel_floats(const struct calib_engine *e)
{
    const uint64_t shape[4][2] = {{e->Q > e->KV ? e->Q : e->KV, e->E}, /* q, k, v */
                                  {e->E, e->Q},                           /* o */
                                  {e->F, e->E},                           /* gate, up */
                                  {e->E, e->F}};                          /* down */
    uint64_t f = 0;
    for (int i = 0; i < 4; i++) {
        if (shape[i][0] == 0 || shape[i][1] == 0) continue; /* MoE without a shared expert */
        const uint64_t pr = panel_rows(shape[i][1]);
        const uint64_t rows = shape[i][0] < pr ? shape[i][0] : pr;
        if (rows * shape[i][1] > f) f = rows * shape[i][1];
    }
    return f;
}

/* Y = X W_t^T for parked slot t, streamed from the weights file in panels
 * of panel_rows rows, each a whole number of mw_gemm's 256-column tiles
 * starting at a multiple of 256, so every tile is the call the resident
 * weight would make: the same bits. */
enum mw_status calib__spill_gemm(struct calib_engine *e, const float *X, uint64_t nr,
                                 uint64_t n_in, enum calib_tslot t, uint64_t n_out, float *Y,
                                 uint64_t ldy, struct mw_err *err)
{
    uint64_t row0;
    const enum calib_tslot o = calib__owner_of(e, t, &row0);
    const uint64_t pr = panel_rows(n_in);
    for (uint64_t c0 = 0; c0 < n_out; c0 += pr) {
        const uint64_t c1 = c0 + pr < n_out ? c0 + pr : n_out;
        enum mw_status s = calib__spill_io(e->w_fd, e->w_path, false,
                                           e->woff[o] + (row0 + c0) * n_in * sizeof(float),
                                           e->panel, (c1 - c0) * n_in * sizeof(float),
                                           "parked weights", err);
        if (s) return s;
        calib__gemm(e, X, nr, n_in, e->panel, c1 - c0, Y + c0, ldy, e->n_pos);
    }
    return MW_OK;
}

/* An unlinked scratch file of `bytes` under dir (NULL: $TMPDIR or /tmp),
 * reserved with posix_fallocate (where the file system has it). */
static enum mw_status scratch_file(const char *dir, const char *what, uint64_t bytes, int *fd,
                                   char *path, size_t cap, struct mw_err *err)
{
    if (!dir || !*dir) dir = getenv("TMPDIR");
    if (!dir || !*dir) dir = "/tmp";
    const int k = snprintf(path, cap, "%s/memwall-calib-%s.XXXXXX", dir, what);
    if (k < 0 || (size_t)k >= cap)
        return MW_FAIL(err, MW_E_USAGE, MW_ERR_OFF_NONE, "scratch directory path too long");
    *fd = mkstemp(path);
    if (*fd < 0) {
        const int en = errno;
        mw_err_set_path(err, path);
        return MW_FAIL(err, MW_E_IO, MW_ERR_OFF_NONE, "cannot create a scratch file: %s",
                       strerror(en));
    }
    unlink(path);
    if (bytes > (uint64_t)INT64_MAX)
        return MW_FAIL(err, MW_E_UNSUPPORTED, MW_ERR_OFF_NONE, "scratch file of %llu bytes",
                       (unsigned long long)bytes);
    const int fe = bytes ? posix_fallocate(*fd, 0, (off_t)bytes) : 0;
    if (fe != 0 && fe != EOPNOTSUPP && fe != EINVAL) {
        mw_err_set_path(err, path);
        return MW_FAIL(err, fe == ENOSPC || fe == EFBIG ? MW_E_NOSPACE : MW_E_IO,
                       MW_ERR_OFF_NONE, "cannot reserve %llu bytes for a scratch file: %s",
                       (unsigned long long)bytes, strerror(fe));
    }
    return MW_OK;
}


enum mw_status calib__spill_open(struct calib_engine *e, const struct calib_run_opts *o, bool *ok,
                                 struct mw_err *err)
{
    /* the hidden states, the attention outputs (with callbacks) and the
     * layer's big weights in unlinked scratch files (page cache, not this
     * process's memory), reserved now: a full disk fails here */
    enum mw_status st;
    uint64_t hs_bytes, xo_bytes = 0, w_bytes = 0;
    if (!mw_mul_u64(e->T, e->E, &hs_bytes) || !mw_mul_u64(hs_bytes, sizeof(float), &hs_bytes) ||
        !mw_mul_u64(e->T, e->Q, &xo_bytes) || !mw_mul_u64(xo_bytes, sizeof(float), &xo_bytes) ||
        hs_bytes > (uint64_t)INT64_MAX || xo_bytes > (uint64_t)INT64_MAX)
        return MW_FAIL(err, MW_E_UNSUPPORTED, MW_ERR_OFF_NONE,
                       "hidden states of %u samples x %u positions overflow a file offset",
                       e->n_samples, e->n_pos);
    for (int t = 0; t < CALIB_T_COUNT; t++) {
        if (!calib__big_slot((enum calib_tslot)t)) continue;
        e->woff[t] = w_bytes;
        w_bytes += calib__slot_elems(e->hp, (enum calib_tslot)t) * sizeof(float);
    }
    if ((st = scratch_file(o->scratch_dir, "hs", hs_bytes, &e->hs_fd, e->hs_path,
                           sizeof e->hs_path, err)) ||
        (st = scratch_file(o->scratch_dir, "w", w_bytes, &e->w_fd, e->w_path, sizeof e->w_path,
                           err)) ||
        (o->on_group && (st = scratch_file(o->scratch_dir, "xo", xo_bytes, &e->xo_fd,
                                           e->xo_path, sizeof e->xo_path, err))))
        return st;
    e->hsb = calib__alloc_f2(e->rows_b, e->E, ok);
    if (o->on_group || o->on_layer) e->hsv = calib__alloc_f2(e->rows_b, e->E, ok);
    e->panel = calib__alloc_f(calib__panel_floats(e), ok);
    return MW_OK;
}

void calib__spill_close(struct calib_engine *e)
{
    free(e->hsb);
    free(e->hsv);
    free(e->panel);
    if (e->hs_fd >= 0) close(e->hs_fd);
    if (e->xo_fd >= 0) close(e->xo_fd);
    if (e->w_fd >= 0) close(e->w_fd);
    e->hs_fd = e->xo_fd = e->w_fd = -1;
}
