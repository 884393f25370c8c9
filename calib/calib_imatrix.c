/*
 * calib/calib_imatrix.c — write calibration statistics as llama.cpp
 * importance matrices (docs/formats.md §9.2 GGUF, §9.3 legacy .dat; calib.h).
 * Reading them back is quant/'s quant_imatrix_load.
 */
#define _XOPEN_SOURCE 700
#include "calib/calib_int.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/mw_file.h"

static int entry_cmp(const void *a, const void *b)
{
    return strcmp(((const struct calib_entry *)a)->name, ((const struct calib_entry *)b)->name);
}

/* Every entry of every layer (calib_stats_entry_at), sorted by name. An
 * expert may have no rows (llama-imatrix writes its zero sums and count);
 * every other entry must have some. */
static enum mw_status entries(const struct calib_stats *st, struct calib_entry **out,
                              uint64_t *n, struct mw_err *err)
{
    const uint64_t cnt = calib_stats_n_entries(st);
    if (cnt > SIZE_MAX / sizeof(struct calib_entry))
        return MW_FAIL(err, MW_E_NOMEM, MW_ERR_OFF_NONE, "imatrix entries");
    struct calib_entry *e = calloc(cnt ? (size_t)cnt : 1, sizeof *e);
    if (!e) return MW_FAIL(err, MW_E_NOMEM, MW_ERR_OFF_NONE, "imatrix entries");
    for (uint64_t k = 0; k < cnt; k++) {
        (void)calib_stats_entry_at(st, k, &e[k]);
        uint64_t rows = 0;
        for (uint32_t j = 0; j < e[k].n_mat; j++) rows += e[k].gs[j].count;
        if (rows == 0) {
            const enum mw_status s =
                MW_FAIL(err, MW_E_VALUE, MW_ERR_OFF_NONE, "no rows accumulated for %s", e[k].name);
            free(e);
            return s;
        }
    }
    qsort(e, (size_t)cnt, sizeof *e, entry_cmp);
    *out = e;
    *n = cnt;
    return MW_OK;
}

/* To path, or (path NULL) to a malloc'd buffer *mem of *mem_n bytes: the
 * same bytes either way (gguf_writer_open_mem). */
static enum mw_status write_gguf(const struct calib_stats *st, const struct calib_imatrix_meta *mt,
                                 const struct calib_entry *e, uint64_t n, const char *path,
                                 void **mem, uint64_t *mem_n, struct mw_err *err)
{
    struct gguf_writer *w = NULL;
    float *buf = NULL;
    enum mw_status s = gguf_writer_init(&w, err);
    if (s) return s;
#define TRY(x)                  \
    do {                        \
        if ((s = (x))) goto out; \
    } while (0)
    TRY(gguf_writer_set_str(w, "general.type", "imatrix", err));
    TRY(gguf_writer_set_arr_str(w, "imatrix.datasets", mt->datasets, NULL, mt->n_datasets, err));
    TRY(gguf_writer_set_u32(w, "imatrix.chunk_count",
                            mt->chunk_count ? mt->chunk_count : calib_stats_n_samples(st), err));
    TRY(gguf_writer_set_u32(w, "imatrix.chunk_size",
                            mt->chunk_size ? mt->chunk_size : calib_stats_n_pos(st), err));
    uint64_t max_in = 1;
    for (uint64_t i = 0; i < n; i++) {
        /* llama-imatrix: in_sum2 {n_in, n_mat}, counts {1, n_mat} (a dense
         * weight's n_mat is 1: 1-D tensors as llama.cpp writes them) */
        char nm[sizeof e[i].name + 16]; /* name + ".in_sum2" (the writer checks the length) */
        const uint64_t ne_sum[2] = {e[i].gs->n_in, e[i].n_mat}, ne_cnt[2] = {1, e[i].n_mat};
        const uint32_t nd = e[i].n_mat > 1 ? 2 : 1;
        snprintf(nm, sizeof nm, "%s.in_sum2", e[i].name);
        TRY(gguf_writer_add_tensor(w, nm, GGUF_TYPE_F32, nd, ne_sum, err));
        snprintf(nm, sizeof nm, "%s.counts", e[i].name);
        TRY(gguf_writer_add_tensor(w, nm, GGUF_TYPE_F32, nd, ne_cnt, err));
        if (e[i].gs->n_in > max_in) max_in = e[i].gs->n_in;
    }
    buf = malloc((size_t)max_in * sizeof *buf);
    if (!buf) {
        s = MW_FAIL(err, MW_E_NOMEM, MW_ERR_OFF_NONE, "imatrix row");
        goto out;
    }
    TRY(path ? gguf_writer_open(w, path, err) : gguf_writer_open_mem(w, err));
    for (uint64_t i = 0; i < n; i++) {
        for (uint32_t x = 0; x < e[i].n_mat; x++) {
            const struct calib_group_stats *gs = &e[i].gs[x];
            for (uint64_t j = 0; j < gs->n_in; j++) buf[j] = (float)gs->sum_sq[j];
            TRY(gguf_writer_write(w, buf, (size_t)gs->n_in * sizeof *buf, err));
        }
        for (uint32_t x = 0; x < e[i].n_mat; x++) {
            const float c = (float)e[i].gs[x].count;
            TRY(gguf_writer_write(w, &c, sizeof c, err));
        }
    }
    TRY(path ? gguf_writer_finish(w, err) : gguf_writer_finish_mem(w, mem, mem_n, err));
#undef TRY
out:
    free(buf);
    gguf_writer_free(w);
    return s;
}

// --- legacy .dat: buffered, then written atomically (core/mw_file.h) ---

struct obuf {
    uint8_t *p;
    size_t n, cap;
    bool fail;
};

static void put(struct obuf *b, const void *d, size_t n)
{
    if (b->fail) return;
    if (n > b->cap - b->n) {
        size_t nc = b->cap ? b->cap : 4096;
        while (nc - b->n < n) nc *= 2;
        uint8_t *np = realloc(b->p, nc);
        if (!np) {
            b->fail = true;
            return;
        }
        b->p = np;
        b->cap = nc;
    }
    memcpy(b->p + b->n, d, n);
    b->n += n;
}

static void put_i32(struct obuf *b, int32_t v)
{
    uint8_t t[4];
    mw_put_le32(t, (uint32_t)v);
    put(b, t, 4);
}

static void put_f32(struct obuf *b, float f)
{
    uint32_t u;
    memcpy(&u, &f, 4);
    uint8_t t[4];
    mw_put_le32(t, u);
    put(b, t, 4);
}

static enum mw_status write_legacy(const struct calib_stats *st,
                                   const struct calib_imatrix_meta *mt,
                                   const struct calib_entry *e,
                                   uint64_t n, const char *path, struct mw_err *err)
{
    const uint64_t chunk = mt->chunk_size ? mt->chunk_size : calib_stats_n_pos(st);
    const uint64_t n_chunks = mt->chunk_count ? mt->chunk_count : calib_stats_n_samples(st);
    if (n > INT32_MAX || n_chunks > INT32_MAX || chunk == 0)
        return MW_FAIL(err, MW_E_VALUE, MW_ERR_OFF_NONE, "too many entries or chunks for .dat");
    struct obuf b = {0};
    put_i32(&b, (int32_t)n);
    for (uint64_t i = 0; i < n; i++) {
        /* llama-imatrix's legacy writer: ncall from the largest count; per
         * matrix (expert) sum / count * ncall, 1 * ncall where count is 0 */
        uint64_t cmax = 0, nval = 0;
        for (uint32_t x = 0; x < e[i].n_mat; x++) {
            if (e[i].gs[x].count > cmax) cmax = e[i].gs[x].count;
            nval += e[i].gs[x].n_in;
        }
        const uint64_t ncall = (cmax + chunk - 1) / chunk;
        if (ncall > INT32_MAX || nval > INT32_MAX) {
            free(b.p);
            return MW_FAIL(err, MW_E_VALUE, MW_ERR_OFF_NONE, "%s: counts beyond i32", e[i].name);
        }
        const size_t len = strlen(e[i].name);
        put_i32(&b, (int32_t)len);
        put(&b, e[i].name, len);
        put_i32(&b, (int32_t)ncall);
        put_i32(&b, (int32_t)nval);
        for (uint32_t x = 0; x < e[i].n_mat; x++) {
            const struct calib_group_stats *gs = &e[i].gs[x];
            for (uint64_t j = 0; j < gs->n_in; j++)
                put_f32(&b, gs->count ? (float)(gs->sum_sq[j] / (double)gs->count * (double)ncall)
                                      : (float)ncall);
        }
    }
    put_i32(&b, (int32_t)n_chunks);
    const char *ds = mt->n_datasets ? mt->datasets[0] : "";
    const size_t dl = strlen(ds);
    put_i32(&b, (int32_t)(dl > INT32_MAX ? 0 : dl));
    put(&b, ds, dl > INT32_MAX ? 0 : dl);
    enum mw_status s = b.fail ? MW_FAIL(err, MW_E_NOMEM, MW_ERR_OFF_NONE, "imatrix buffer")
                              : mw_file_write_atomic(path, b.p, b.n, err);
    free(b.p);
    return s;
}

/* The entries with meta's defaults filled in, then the GGUF or .dat bytes to
 * path, or (path NULL) the GGUF bytes to *mem. */
static enum mw_status imatrix_out(const struct calib_stats *st,
                                  const struct calib_imatrix_meta *meta,
                                  enum calib_imatrix_fmt fmt, const char *path, void **mem,
                                  uint64_t *mem_n, struct mw_err *err)
{
    static const char *const none[1] = {""};
    struct calib_imatrix_meta mt = {.datasets = none, .n_datasets = 0};
    if (meta) mt = *meta;
    if (mt.n_datasets == 0) mt.datasets = none;
    struct calib_entry *e = NULL;
    uint64_t n = 0;
    enum mw_status s = entries(st, &e, &n, err);
    if (s) return s;
    if (fmt == CALIB_IMATRIX_LEGACY)
        s = write_legacy(st, &mt, e, n, path, err);
    else
        s = write_gguf(st, &mt, e, n, path, mem, mem_n, err);
    free(e);
    return s;
}

enum mw_status calib_imatrix_write(const struct calib_stats *st,
                                   const struct calib_imatrix_meta *meta,
                                   enum calib_imatrix_fmt fmt, const char *path,
                                   struct mw_err *err)
{
    return imatrix_out(st, meta, fmt, path, NULL, NULL, err);
}

enum mw_status calib_imatrix_write_mem(const struct calib_stats *st,
                                       const struct calib_imatrix_meta *meta, void **buf,
                                       uint64_t *size, struct mw_err *err)
{
    return imatrix_out(st, meta, CALIB_IMATRIX_GGUF, NULL, buf, size, err);
}
