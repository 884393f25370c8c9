/*
 * quant/quant_pipeline.c — the streaming quantize pipeline behind
 * `memwall quant`: plan (order, types, imatrix entries, every check that can
 * fail on input) before the output exists, then write one slab of rows at a
 * time through the atomic, checksummed gguf writer, in llama-quantize's
 * layout (docs/formats.md §1.10):
 *
 *   KVs      the source's, in order, without general.quantization_version,
 *            general.file_type and split.{no,count,tensors.count}; then
 *            general.quantization_version (u32 2), general.file_type (u32
 *            ftype); with an imatrix quantize.imatrix.file / .dataset /
 *            .entries_count / .chunks_count (a source key of the same name is
 *            moved there, as gguf_set_val_* does); then memwall.* provenance
 *            and the checksum keys (the writer's).
 *   tensors  sorted as llama-quantize sorts them (quant_tensor_name_cmp);
 *            n_dims as ggml_n_dims() counts them; alignment 32 (or the
 *            source's general.alignment, which the writer then honours).
 *
 * Memory: the source is read through its data() view (a mapping; consumed
 * pages are released) or its read() stream into one slab buffer; each
 * worker thread converts a few rows at a time to f32 in its own small
 * scratch and quantizes them row by row with the type's from_float (what
 * quant_rows() runs in each of its threads; here the f32 conversion is
 * parallel too and stays in cache); the slab's output goes to
 * the writer before the next slab starts. Peak memory is about two slabs
 * plus n_threads scratch rows, whatever the model size.
 *
 * Determinism: rows are independent in every ggml type, and the slab and
 * per-thread row ranges only decide who computes a row, never what it is.
 */
#define _DEFAULT_SOURCE
#include "quant/quant.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/mw_file.h"
#include "core/mw_pool.h"

#define DEFAULT_SLAB ((size_t)32 << 20)
#define SCRATCH_FLOATS ((uint64_t)16384) /* f32 per worker conversion batch */
#define MAX_THREADS 512u

// --- GGUF source ---

struct gguf_src {
    const struct gguf_file *f;
    struct quant_tensor_desc *t;
};

static const uint8_t *gsrc_data(void *ud, uint64_t i)
{
    const struct gguf_src *g = ud;
    return gguf_tensor_data(g->f, i);
}

static void gsrc_release(void *ud, uint64_t i, uint64_t off, uint64_t n)
{
    const struct gguf_src *g = ud;
    const struct gguf_tensor *t = gguf_tensor_get(g->f, i);
    if (!t || !gguf_tensor_data(g->f, i) || n == 0) return;
    const uint64_t from = t->file_off + off;
    mw_map_drop(gguf_base(g->f), gguf_file_size(g->f), from, from + n);
}

static enum mw_status gsrc_read(void *ud, uint64_t i, quant_sink_fn sink, void *sink_ud,
                                struct mw_err *err)
{
    const struct gguf_src *g = ud;
    const struct gguf_tensor *t = gguf_tensor_get(g->f, i);
    const uint8_t *d = gguf_tensor_data(g->f, i);
    if (!d) {
        mw_err_set_path(err, gguf_path(g->f));
        mw_err_set_where(err, "tensor '%s'", t->name);
        return MW_FAIL(err, MW_E_TRUNC, t->file_off, "tensor data is not in the file");
    }
    const uint64_t chunk = (uint64_t)8 << 20;
    for (uint64_t off = 0; off < t->nbytes; off += chunk) {
        const uint64_t n = t->nbytes - off < chunk ? t->nbytes - off : chunk;
        enum mw_status s = sink(sink_ud, d + off, (size_t)n, err);
        gsrc_release(ud, i, off, n);
        if (s != MW_OK) return s;
    }
    return MW_OK;
}

enum mw_status quant_source_gguf(const struct gguf_file *f, struct quant_source *src,
                                 struct mw_err *err)
{
    memset(src, 0, sizeof *src);
    const uint64_t n = gguf_tensor_count(f);
    struct gguf_src *g = calloc(1, sizeof *g);
    struct quant_tensor_desc *t = calloc(n ? (size_t)n : 1, sizeof *t);
    if (!g || !t) {
        free(g);
        free(t);
        return MW_FAIL(err, MW_E_NOMEM, MW_ERR_OFF_NONE, "out of memory");
    }
    for (uint64_t i = 0; i < n; i++) {
        const struct gguf_tensor *gt = gguf_tensor_get(f, i);
        t[i].name = gt->name;
        t[i].type = gt->type;
        t[i].n_dims = gt->n_dims;
        memcpy(t[i].ne, gt->ne, sizeof t[i].ne);
    }
    g->f = f;
    g->t = t;
    src->kv = f;
    src->n_tensors = n;
    src->tensors = t;
    src->read = gsrc_read;
    src->data = gsrc_data;
    src->release = gsrc_release;
    src->ud = g;
    return MW_OK;
}

void quant_source_gguf_free(struct quant_source *src)
{
    if (!src || !src->ud) return;
    struct gguf_src *g = src->ud;
    free(g->t);
    free(g);
    memset(src, 0, sizeof *src);
}

// --- plan ---

struct quant_plan {
    const struct quant_source *src;
    struct quant_opts o;
    const struct quant_preset *preset;
    struct quant_model_info mi;
    uint64_t n;
    struct quant_plan_entry *e;
    uint64_t src_bytes, out_bytes;
};

void quant_plan_free(struct quant_plan *p)
{
    if (!p) return;
    free(p->e);
    free(p);
}
uint64_t quant_plan_count(const struct quant_plan *p) { return p->n; }
const struct quant_plan_entry *quant_plan_get(const struct quant_plan *p, uint64_t i)
{
    return i < p->n ? &p->e[i] : NULL;
}
uint64_t quant_plan_src_bytes(const struct quant_plan *p) { return p->src_bytes; }
uint64_t quant_plan_out_bytes(const struct quant_plan *p) { return p->out_bytes; }

/* llama-model-loader's file type for a tensor type (its guess's table). */
static uint32_t loader_ftype(uint32_t t)
{
    static const uint8_t ft[GGUF_TYPE_COUNT] = {
        [GGUF_TYPE_F16] = 1,      [GGUF_TYPE_BF16] = 32,    [GGUF_TYPE_Q4_0] = 2,
        [GGUF_TYPE_Q4_1] = 3,     [GGUF_TYPE_Q5_0] = 8,     [GGUF_TYPE_Q5_1] = 9,
        [GGUF_TYPE_Q8_0] = 7,     [GGUF_TYPE_Q2_K] = 10,    [GGUF_TYPE_Q3_K] = 12,
        [GGUF_TYPE_Q4_K] = 15,    [GGUF_TYPE_Q5_K] = 17,    [GGUF_TYPE_Q6_K] = 18,
        [GGUF_TYPE_TQ1_0] = 36,   [GGUF_TYPE_TQ2_0] = 37,   [GGUF_TYPE_IQ2_XXS] = 19,
        [GGUF_TYPE_IQ2_XS] = 20,  [GGUF_TYPE_IQ2_S] = 28,   [GGUF_TYPE_IQ3_XXS] = 23,
        [GGUF_TYPE_IQ1_S] = 24,   [GGUF_TYPE_IQ1_M] = 31,   [GGUF_TYPE_IQ4_NL] = 25,
        [GGUF_TYPE_IQ4_XS] = 30,  [GGUF_TYPE_IQ3_S] = 26,
    };
    return t < GGUF_TYPE_COUNT ? ft[t] : 0; /* F32 and the rest: ALL_F32 */
}

/* llama-model-loader's weights_map order: by the "blk.N." layer (-1
 * without one), then by name. */
static int loader_layer(const char *name)
{
    int l = -1;
    if (sscanf(name, "blk.%d.", &l) != 1) l = -1;
    return l;
}
static int loader_cmp(const void *a, const void *b)
{
    const struct quant_plan_entry *x = *(const struct quant_plan_entry *const *)a;
    const struct quant_plan_entry *y = *(const struct quant_plan_entry *const *)b;
    const int lx = loader_layer(x->src->name), ly = loader_layer(y->src->name);
    if (lx != ly) return lx < ly ? -1 : 1;
    return strcmp(x->src->name, y->src->name);
}

uint32_t quant_plan_file_type(const struct quant_plan *p)
{
    if (!p->o.guess_file_type) return p->preset->ftype;
    const struct quant_plan_entry **ord = malloc((p->n ? p->n : 1) * sizeof *ord);
    uint64_t n = 0;
    if (!ord) return p->preset->ftype; /* out of memory: the preset's, as without a guess */
    for (uint64_t i = 0; i < p->n; i++)
        if (p->e[i].choice.reason != QUANT_KEEP) ord[n++] = &p->e[i];
    qsort(ord, n, sizeof *ord, loader_cmp);
    uint64_t count[GGUF_TYPE_COUNT] = {0}, best_n = 0;
    uint32_t best = GGUF_TYPE_F32;
    for (uint64_t i = 0; i < n; i++) {
        const uint32_t t = ord[i]->choice.type;
        if (t >= GGUF_TYPE_COUNT) continue;
        if (++count[t] > best_n) best_n = count[t], best = t; /* the loader's strict > */
    }
    free(ord);
    return n ? loader_ftype(best) : p->preset->ftype;
}

const char *quant_file_type_name(uint32_t ftype)
{
    for (size_t i = 0; quant_preset_at(i); i++)
        if (quant_preset_at(i)->ftype == ftype) return quant_preset_at(i)->name;
    switch (ftype) {
    case 0: return "F32";
    case 1: return "F16";
    case 32: return "BF16";
    case 36: return "TQ1_0";
    case 37: return "TQ2_0";
    default: return NULL;
    }
}

static void logf_(const struct quant_opts *o, enum quant_log_level lvl, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void logf_(const struct quant_opts *o, enum quant_log_level lvl, const char *fmt, ...)
{
    if (!o->log) return;
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    o->log(o->log_ud, lvl, msg);
}

static bool is_plain_float(uint32_t t)
{
    return t == GGUF_TYPE_F32 || t == GGUF_TYPE_F16 || t == GGUF_TYPE_BF16;
}

/* ggml_n_dims */
static uint32_t eff_dims(const struct quant_tensor_desc *t)
{
    for (uint32_t i = GGUF_MAX_DIMS; i > 1; i--)
        if (t->ne[i - 1] > 1) return i;
    return 1;
}

struct order_item {
    const char *name;
    uint64_t idx;
};
static int order_cmp(const void *a, const void *b)
{
    return quant_tensor_name_cmp(((const struct order_item *)a)->name,
                                 ((const struct order_item *)b)->name);
}

static const char *type_name(uint32_t t)
{
    const struct gguf_type_info *ti = gguf_type_get(t);
    return ti && ti->name ? ti->name : "?";
}

enum mw_status quant_plan_build(const struct quant_source *src, const struct quant_opts *opts,
                                struct quant_plan **out, struct mw_err *err)
{
    *out = NULL;
    mw_err_clear(err);
    if (!opts->rules.preset)
        return MW_FAIL(err, MW_E_USAGE, MW_ERR_OFF_NONE, "no preset given");
    struct quant_plan *p = calloc(1, sizeof *p);
    const uint64_t n = src->n_tensors;
    struct order_item *ord = calloc(n ? (size_t)n : 1, sizeof *ord);
    struct quant_tensor_desc *sorted = calloc(n ? (size_t)n : 1, sizeof *sorted);
    struct quant_choice *ch = calloc(n ? (size_t)n : 1, sizeof *ch);
    bool *im_used = NULL;
    enum mw_status s = MW_OK;
    if (!p || !ord || !sorted || !ch ||
        !(p->e = calloc(n ? (size_t)n : 1, sizeof *p->e))) {
        s = MW_FAIL(err, MW_E_NOMEM, MW_ERR_OFF_NONE, "out of memory");
        goto out;
    }
    p->src = src;
    p->o = *opts;
    p->o.rules.has_imatrix = opts->imatrix != NULL && quant_imatrix_count(opts->imatrix) > 0;
    p->preset = opts->rules.preset;
    p->n = n;
    if ((s = quant_model_info_from_gguf(src->kv, &p->mi, err)) != MW_OK) goto out;

    for (uint64_t i = 0; i < n; i++) ord[i] = (struct order_item){src->tensors[i].name, i};
    if (n > 1) qsort(ord, (size_t)n, sizeof *ord, order_cmp);
    for (uint64_t i = 0; i < n; i++) sorted[i] = src->tensors[ord[i].idx];
    if ((s = quant_choose_types(&p->mi, sorted, n, &p->o.rules, ch, err)) != MW_OK) goto out;

    const struct quant_imatrix *im = p->o.rules.has_imatrix ? opts->imatrix : NULL;
    if (im && !(im_used = calloc((size_t)quant_imatrix_count(im), sizeof *im_used))) {
        s = MW_FAIL(err, MW_E_NOMEM, MW_ERR_OFF_NONE, "out of memory");
        goto out;
    }
    for (uint64_t i = 0; i < n; i++) {
        struct quant_plan_entry *e = &p->e[i];
        const struct quant_tensor_desc *t = &src->tensors[ord[i].idx];
        e->src = t;
        e->src_index = ord[i].idx;
        e->choice = ch[i];
        mw_err_set_where(err, "tensor '%s'", t->name);
        if (!gguf_tensor_nbytes(t->type, t->ne, &e->src_bytes)) {
            s = MW_FAIL(err, MW_E_FORMAT, MW_ERR_OFF_NONE, "bad shape for type %s",
                        type_name(t->type));
            goto out;
        }
        if (!gguf_tensor_nbytes(ch[i].type, t->ne, &e->out_bytes)) {
            s = MW_FAIL(err, MW_E_UNSUPPORTED, MW_ERR_OFF_NONE,
                        "row length %llu does not fit type %s",
                        (unsigned long long)t->ne[0], type_name(ch[i].type));
            goto out;
        }
        if (!mw_add_u64(p->src_bytes, e->src_bytes, &p->src_bytes) ||
            !mw_add_u64(p->out_bytes, e->out_bytes, &p->out_bytes)) {
            s = MW_FAIL(err, MW_E_FORMAT, MW_ERR_OFF_NONE, "model size overflows");
            goto out;
        }
        if (ch[i].type == t->type) continue; /* copied as it is */

        /* can we read it as f32? */
        if (!is_plain_float(t->type)) {
            const struct quant_traits *qt = quant_traits_get(t->type);
            if (!opts->allow_requantize) {
                s = MW_FAIL(err, MW_E_UNSUPPORTED, MW_ERR_OFF_NONE,
                            "requantizing from type %s is disabled (--allow-requantize)",
                            type_name(t->type));
                goto out;
            }
            const struct gguf_type_info *ti = gguf_type_get(t->type);
            if (!qt || !qt->to_float || !ti || ti->blck == 1) {
                s = MW_FAIL(err, MW_E_UNSUPPORTED, MW_ERR_OFF_NONE,
                            "cannot convert type %s to float", type_name(t->type));
                goto out;
            }
        }
        /* can we produce the type? */
        if (!is_plain_float(ch[i].type)) {
            const struct quant_traits *qt = quant_traits_get(ch[i].type);
            if (!qt || !qt->from_float) {
                s = MW_FAIL(err, MW_E_UNSUPPORTED, MW_ERR_OFF_NONE,
                            "memwall cannot produce type %s", type_name(ch[i].type));
                goto out;
            }
        }
        if (ch[i].fallback)
            logf_(opts, QUANT_LOG_WARN,
                  "tensor '%s': row length %llu is not a multiple of %s's block: using %s",
                  t->name, (unsigned long long)t->ne[0], type_name(ch[i].wanted),
                  type_name(ch[i].type));
        if (!im) continue;
        const int64_t k = quant_imatrix_find(im, t->name);
        if (k < 0) {
            logf_(opts, QUANT_LOG_NOTICE, "tensor '%s': no imatrix entry, quantized without",
                  t->name);
            continue;
        }
        im_used[k] = true;
        uint64_t nv;
        const float *v = quant_imatrix_values(im, (uint64_t)k, &nv);
        uint64_t want;
        if (!mw_mul_u64(t->ne[0], t->ne[2], &want)) want = UINT64_MAX;
        if (nv != want) {
            if (strcmp(t->name, "token_embd.weight") == 0 ||
                strcmp(t->name, "per_layer_token_embd.weight") == 0) {
                /* llama-quantize: a notice for the token embedding only */
                logf_(opts, QUANT_LOG_NOTICE,
                      "tensor '%s': imatrix entry has %llu values, the tensor needs %llu: "
                      "quantized without",
                      t->name, (unsigned long long)nv, (unsigned long long)want);
                continue;
            }
            if (opts->imatrix_file) mw_err_set_path(err, opts->imatrix_file);
            s = MW_FAIL(err, MW_E_FORMAT, MW_ERR_OFF_NONE,
                        "imatrix entry has %llu values, expected %llu (row length %llu x %llu "
                        "experts)",
                        (unsigned long long)nv, (unsigned long long)want,
                        (unsigned long long)t->ne[0], (unsigned long long)t->ne[2]);
            goto out;
        }
        e->imatrix = v;
        uint64_t nc = 0;
        const float *c = quant_imatrix_counts(im, (uint64_t)k, &nc);
        e->imatrix_counts = nc > 1 && nc == t->ne[2] ? c : NULL;
    }
    mw_err_clear(err);
    if (im) {
        for (uint64_t k = 0; k < quant_imatrix_count(im); k++) {
            if (im_used[k]) continue;
            const char *nm = quant_imatrix_name(im, k);
            bool in_model = false;
            for (uint64_t i = 0; i < n && !in_model; i++)
                in_model = strcmp(src->tensors[i].name, nm) == 0;
            if (!in_model)
                logf_(opts, QUANT_LOG_WARN,
                      "imatrix entry '%s' names no tensor of this model (ignored)", nm);
        }
    }
out:
    free(im_used);
    free(ch);
    free(sorted);
    free(ord);
    if (s != MW_OK) {
        quant_plan_free(p);
        return s;
    }
    *out = p;
    return MW_OK;
}

// --- workers ---

struct job {
    const struct quant_plan_entry *e;
    uint32_t src_type, dst_type;
    const struct quant_traits *src_qt, *dst_qt;
    uint64_t ne0, ne1, ne2;
    uint64_t src_row, dst_row; /* bytes per row */
    const uint8_t *in;         /* slab: rows [row0, row0 + nrows) */
    uint8_t *out;
    uint64_t row0, nrows;
};

struct worker {
    const struct job *job;
    uint64_t r0, r1; /* rows of the slab, relative */
    float *scratch;
    uint64_t scratch_n;
    enum mw_status s;
    struct mw_err err;
};

static float f32_bits(uint32_t u)
{
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

static void rows_to_f32(const struct job *j, const uint8_t *in, float *x, uint64_t n_elems)
{
    switch (j->src_type) {
    case GGUF_TYPE_F32:
        for (uint64_t k = 0; k < n_elems; k++) x[k] = f32_bits(mw_le32(in + 4 * k));
        break;
    case GGUF_TYPE_F16:
        for (uint64_t k = 0; k < n_elems; k++) x[k] = mw_f16_to_f32(mw_le16(in + 2 * k));
        break;
    case GGUF_TYPE_BF16:
        for (uint64_t k = 0; k < n_elems; k++) x[k] = mw_bf16_to_f32(mw_le16(in + 2 * k));
        break;
    default:
        j->src_qt->to_float(in, x, n_elems);
        break;
    }
}

static void f32_to_plain(uint32_t t, const float *x, uint8_t *o, uint64_t n)
{
    for (uint64_t k = 0; k < n; k++) {
        if (t == GGUF_TYPE_F32) {
            uint32_t u;
            memcpy(&u, &x[k], sizeof u);
            mw_put_le32(o + 4 * k, u);
        } else if (t == GGUF_TYPE_F16) {
            mw_put_le16(o + 2 * k, mw_f32_to_f16(x[k]));
        } else {
            mw_put_le16(o + 2 * k, mw_f32_to_bf16(x[k]));
        }
    }
}

static void worker_run(struct worker *w)
{
    const struct job *j = w->job;
    const uint64_t batch = w->scratch_n / j->ne0; /* >= 1 */
    for (uint64_t r = w->r0; r < w->r1 && w->s == MW_OK;) {
        uint64_t nb = w->r1 - r < batch ? w->r1 - r : batch;
        /* one imatrix slice per call: stop at the expert boundary */
        const uint64_t grow = j->row0 + r;
        const uint64_t to_bound = j->ne1 - grow % j->ne1;
        if (j->e->imatrix && nb > to_bound) nb = to_bound;
        rows_to_f32(j, j->in + r * j->src_row, w->scratch, nb * j->ne0);
        uint8_t *o = j->out + r * j->dst_row;
        if (is_plain_float(j->dst_type)) {
            f32_to_plain(j->dst_type, w->scratch, o, nb * j->ne0);
        } else {
            /* row by row through the traits, as quant_rows() does inside
             * each of its threads (no allocation per batch) */
            const float *imw = NULL;
            if (j->e->imatrix) imw = j->e->imatrix + ((grow / j->ne1) % j->ne2) * j->ne0;
            for (uint64_t k = 0; k < nb; k++)
                j->dst_qt->from_float(w->scratch + k * j->ne0, o + k * j->dst_row, j->ne0, imw);
        }
        r += nb;
    }
}

/* The workers of one quant_plan_write: n of them, each with its scratch, run
 * on one thread pool created once for the whole file (mp; NULL when its
 * threads could not be started: every worker then runs on the caller — same
 * rows, same bytes). */
struct pool {
    unsigned n;
    unsigned active; /* workers with rows in the current slab */
    struct worker *w;
    struct mw_pool *mp;
};

static void slab_task(void *arg, unsigned ith, unsigned nth)
{
    (void)nth;
    struct pool *pl = arg;
    if (ith < pl->active) worker_run(&pl->w[ith]);
}

static enum mw_status run_slab(struct pool *pl, const struct job *j, struct mw_err *err)
{
    const unsigned nt = (uint64_t)pl->n > j->nrows ? (unsigned)j->nrows : pl->n;
    for (unsigned k = 0; k < nt; k++) {
        struct worker *w = &pl->w[k];
        w->job = j;
        w->r0 = j->nrows * k / nt;
        w->r1 = j->nrows * (k + 1) / nt;
        w->s = MW_OK;
        mw_err_clear(&w->err);
    }
    pl->active = nt;
    if (pl->mp && nt > 1) {
        mw_pool_run(pl->mp, slab_task, pl);
    } else {
        for (unsigned k = 0; k < nt; k++) worker_run(&pl->w[k]);
    }
    for (unsigned k = 0; k < nt; k++) {
        if (pl->w[k].s == MW_OK) continue;
        if (err) *err = pl->w[k].err;
        return pl->w[k].s;
    }
    return MW_OK;
}

// --- writing ---

struct wctx {
    const struct quant_plan *p;
    struct gguf_writer *w;
    struct pool pool;
    struct job job;
    uint8_t *inbuf, *outbuf;
    uint64_t in_cap, out_cap;  /* bytes */
    uint64_t slab_rows;        /* of the current tensor */
    uint64_t in_fill;          /* bytes in inbuf */
    uint64_t rows_done;        /* of the current tensor */
    uint64_t done_bytes;       /* source bytes, all tensors */
    uint64_t ti;
};

static void progress(struct wctx *c, uint64_t add)
{
    c->done_bytes += add;
    const struct quant_opts *o = &c->p->o;
    if (o->progress)
        o->progress(o->progress_ud, c->done_bytes, c->p->src_bytes, c->ti, c->p->n,
                    c->p->e[c->ti].src->name);
}

static enum mw_status process(struct wctx *c, const uint8_t *in, uint64_t nrows,
                              struct mw_err *err)
{
    struct job *j = &c->job;
    j->in = in;
    j->out = c->outbuf;
    j->row0 = c->rows_done;
    j->nrows = nrows;
    enum mw_status s = run_slab(&c->pool, j, err);
    if (s != MW_OK) {
        mw_err_set_where(err, "tensor '%s'", j->e->src->name);
        return s;
    }
    s = gguf_writer_write(c->w, c->outbuf, (size_t)(nrows * j->dst_row), err);
    if (s != MW_OK) return s;
    c->rows_done += nrows;
    progress(c, nrows * j->src_row);
    return MW_OK;
}

static enum mw_status slab_sink(void *ud, const void *data, size_t n, struct mw_err *err)
{
    struct wctx *c = ud;
    const uint8_t *d = data;
    const uint64_t slab_bytes = c->slab_rows * c->job.src_row;
    while (n > 0) {
        uint64_t take = slab_bytes - c->in_fill;
        if (take > n) take = n;
        memcpy(c->inbuf + c->in_fill, d, (size_t)take);
        c->in_fill += take;
        d += take;
        n -= (size_t)take;
        if (c->in_fill == slab_bytes) {
            enum mw_status s = process(c, c->inbuf, c->slab_rows, err);
            if (s != MW_OK) return s;
            c->in_fill = 0;
        }
    }
    return MW_OK;
}

static enum mw_status copy_sink(void *ud, const void *data, size_t n, struct mw_err *err)
{
    struct wctx *c = ud;
    enum mw_status s = gguf_writer_write(c->w, data, n, err);
    if (s == MW_OK) progress(c, n);
    return s;
}

static enum mw_status grow(uint8_t **buf, uint64_t *cap, uint64_t need, struct mw_err *err)
{
    if (need <= *cap) return MW_OK;
    size_t sz;
    if (!mw_u64_to_size(need, &sz)) return MW_FAIL(err, MW_E_NOMEM, MW_ERR_OFF_NONE, "too large");
    uint8_t *b = realloc(*buf, sz);
    if (!b) return MW_FAIL(err, MW_E_NOMEM, MW_ERR_OFF_NONE, "cannot allocate %zu bytes", sz);
    *buf = b;
    *cap = need;
    return MW_OK;
}

static enum mw_status write_tensor(struct wctx *c, uint64_t i, struct mw_err *err)
{
    const struct quant_plan *p = c->p;
    const struct quant_plan_entry *e = &p->e[i];
    const struct quant_source *src = p->src;
    const struct quant_tensor_desc *t = e->src;
    c->ti = i;
    enum mw_status s;

    if (e->choice.type == t->type) { /* verbatim */
        const uint8_t *d = src->data ? src->data(src->ud, e->src_index) : NULL;
        if (d) {
            const uint64_t chunk = (uint64_t)8 << 20;
            for (uint64_t off = 0; off < e->src_bytes; off += chunk) {
                const uint64_t n = e->src_bytes - off < chunk ? e->src_bytes - off : chunk;
                if ((s = copy_sink(c, d + off, (size_t)n, err)) != MW_OK) return s;
                if (src->release) src->release(src->ud, e->src_index, off, n);
            }
            return MW_OK;
        }
        return src->read(src->ud, e->src_index, copy_sink, c, err);
    }

    struct job *j = &c->job;
    memset(j, 0, sizeof *j);
    j->e = e;
    j->src_type = t->type;
    j->dst_type = e->choice.type;
    j->src_qt = quant_traits_get(t->type);
    j->dst_qt = quant_traits_get(e->choice.type);
    j->ne0 = t->ne[0];
    j->ne1 = t->ne[1];
    j->ne2 = t->ne[2];
    const uint64_t nrows = t->ne[1] * t->ne[2] * t->ne[3]; /* bounded by src_bytes */
    j->src_row = nrows ? e->src_bytes / nrows : 0;
    j->dst_row = nrows ? e->out_bytes / nrows : 0;
    if (nrows == 0 || j->ne0 == 0) return MW_OK;

    const size_t slab = p->o.slab_bytes ? p->o.slab_bytes : DEFAULT_SLAB;
    const uint64_t row_max = j->src_row > j->dst_row ? j->src_row : j->dst_row;
    c->slab_rows = row_max ? slab / row_max : 1;
    if (c->slab_rows == 0) c->slab_rows = 1;
    if (c->slab_rows > nrows) c->slab_rows = nrows;
    if ((s = grow(&c->outbuf, &c->out_cap, c->slab_rows * j->dst_row, err)) != MW_OK) return s;
    /* per-worker scratch: at least one row */
    const uint64_t need = j->ne0 > SCRATCH_FLOATS ? j->ne0 : SCRATCH_FLOATS;
    for (unsigned k = 0; k < c->pool.n; k++) {
        struct worker *w = &c->pool.w[k];
        if (w->scratch_n >= need) continue;
        size_t sz;
        float *b;
        if (!mw_u64_to_size(need * sizeof(float), &sz) || !(b = realloc(w->scratch, sz)))
            return MW_FAIL(err, MW_E_NOMEM, MW_ERR_OFF_NONE, "cannot allocate scratch");
        w->scratch = b;
        w->scratch_n = need;
    }
    c->rows_done = 0;
    c->in_fill = 0;

    const uint8_t *d = src->data ? src->data(src->ud, e->src_index) : NULL;
    if (d) {
        while (c->rows_done < nrows) {
            const uint64_t r0 = c->rows_done;
            const uint64_t nr = nrows - r0 < c->slab_rows ? nrows - r0 : c->slab_rows;
            if ((s = process(c, d + r0 * j->src_row, nr, err)) != MW_OK) return s;
            if (src->release) src->release(src->ud, e->src_index, r0 * j->src_row, nr * j->src_row);
        }
        return MW_OK;
    }
    if ((s = grow(&c->inbuf, &c->in_cap, c->slab_rows * j->src_row, err)) != MW_OK) return s;
    if ((s = src->read(src->ud, e->src_index, slab_sink, c, err)) != MW_OK) return s;
    if (c->in_fill % j->src_row != 0 || c->rows_done + c->in_fill / j->src_row != nrows) {
        mw_err_set_where(err, "tensor '%s'", t->name);
        return MW_FAIL(err, MW_E_TRUNC, MW_ERR_OFF_NONE,
                       "source delivered %llu of %llu bytes",
                       (unsigned long long)(c->rows_done * j->src_row + c->in_fill),
                       (unsigned long long)e->src_bytes);
    }
    if (c->in_fill) {
        if ((s = process(c, c->inbuf, c->in_fill / j->src_row, err)) != MW_OK) return s;
        c->in_fill = 0;
    }
    return MW_OK;
}

/* Keys the pipeline writes itself: skipped where the source has them. */
static bool key_is_ours(const struct quant_plan *p, const char *k)
{
    static const char *const always[] = {
        "general.quantization_version", "general.file_type", "split.no", "split.count",
        "split.tensors.count", "memwall.version",
    };
    for (size_t i = 0; i < sizeof always / sizeof always[0]; i++)
        if (strcmp(k, always[i]) == 0) return true;
    if (strncmp(k, "memwall.quant.", 14) == 0 || strncmp(k, "memwall.checksum.", 17) == 0)
        return true;
    const struct quant_imatrix *im = p->o.rules.has_imatrix ? p->o.imatrix : NULL;
    if (!im) return false;
    if (strcmp(k, "quantize.imatrix.file") == 0 || strcmp(k, "quantize.imatrix.entries_count") == 0)
        return true;
    if (strcmp(k, "quantize.imatrix.dataset") == 0) return quant_imatrix_dataset_count(im) > 0;
    if (strcmp(k, "quantize.imatrix.chunks_count") == 0) return quant_imatrix_chunk_count(im) > 0;
    return false;
}

/* llama-quantize copies these strings into char[128] with strncpy. */
static enum mw_status set_str127(struct gguf_writer *w, const char *key, const char *v,
                                 struct mw_err *err)
{
    size_t n = strlen(v);
    if (n > 127) n = 127;
    return gguf_writer_set_strn(w, key, v, n, err);
}

#define TRY(expr)                 \
    do {                          \
        s = (expr);               \
        if (s != MW_OK) goto out; \
    } while (0)

static enum mw_status write_kvs(const struct quant_plan *p, struct gguf_writer *w,
                                struct mw_err *err)
{
    enum mw_status s = MW_OK;
    const struct gguf_file *kv = p->src->kv;
    for (uint64_t i = 0; i < gguf_kv_count(kv); i++) {
        const char *k = gguf_kv_key(kv, i);
        if (key_is_ours(p, k)) continue;
        if (strcmp(k, "general.alignment") == 0) {
            uint64_t a;
            if (gguf_value_as_u64(gguf_kv_value(kv, i), &a) && a <= UINT32_MAX) {
                TRY(gguf_writer_set_alignment(w, (uint32_t)a, err));
                continue;
            }
        }
        TRY(gguf_writer_copy_kv(w, kv, i, err));
    }
    TRY(gguf_writer_set_u32(w, "general.quantization_version", 2, err));
    TRY(gguf_writer_set_u32(w, "general.file_type", quant_plan_file_type(p), err));
    const struct quant_imatrix *im = p->o.rules.has_imatrix ? p->o.imatrix : NULL;
    if (im) {
        TRY(set_str127(w, "quantize.imatrix.file", p->o.imatrix_file ? p->o.imatrix_file : "",
                       err));
        if (quant_imatrix_dataset_count(im) > 0)
            TRY(set_str127(w, "quantize.imatrix.dataset", quant_imatrix_dataset(im, 0), err));
        const uint64_t ne = quant_imatrix_count(im);
        TRY(gguf_writer_set_u32(w, "quantize.imatrix.entries_count",
                                ne > UINT32_MAX ? UINT32_MAX : (uint32_t)ne, err));
        if (quant_imatrix_chunk_count(im) > 0)
            TRY(gguf_writer_set_u32(w, "quantize.imatrix.chunks_count",
                                    quant_imatrix_chunk_count(im), err));
    }
    TRY(gguf_writer_set_str(w, "memwall.version", MW_VERSION_STRING, err));
    TRY(gguf_writer_set_str(w, "memwall.quant.preset", p->preset->name, err));
    TRY(gguf_writer_set_str(w, "memwall.quant.method",
                            p->src->method ? p->src->method : im ? "imatrix" : "rtn", err));
    if (p->src->method_params)
        TRY(set_str127(w, "memwall.quant.method_params", p->src->method_params, err));
    if (im) {
        char hex[17];
        snprintf(hex, sizeof hex, "%016llx", (unsigned long long)quant_imatrix_hash(im));
        TRY(gguf_writer_set_str(w, "memwall.quant.imatrix_xxh3", hex, err));
    }
    if (p->o.rules.pure) TRY(gguf_writer_set_bool(w, "memwall.quant.pure", true, err));
    if (p->o.budget) TRY(gguf_writer_set_str(w, "memwall.quant.budget", p->o.budget, err));
    if (p->o.command) TRY(gguf_writer_set_str(w, "memwall.quant.command", p->o.command, err));
    if (p->o.probe_kld) {
        float *v = malloc((size_t)(p->n ? p->n : 1) * sizeof *v);
        if (!v) {
            s = MW_FAIL(err, MW_E_NOMEM, MW_ERR_OFF_NONE, "out of memory");
            goto out;
        }
        for (uint64_t i = 0; i < p->n; i++)
            v[i] = p->e[i].src_index < p->o.n_probe_kld ? p->o.probe_kld[p->e[i].src_index] : -1.0f;
        s = gguf_writer_set_arr(w, "memwall.quant.probe_kld", GGUF_VT_F32, v, p->n, err);
        free(v);
        if (s != MW_OK) goto out;
    }
    const uint64_t nov = quant_overrides_count(p->o.rules.overrides);
    if (nov) {
        const char **v = calloc((size_t)nov, sizeof *v);
        if (!v) {
            s = MW_FAIL(err, MW_E_NOMEM, MW_ERR_OFF_NONE, "out of memory");
            goto out;
        }
        for (uint64_t i = 0; i < nov; i++) v[i] = quant_overrides_spec(p->o.rules.overrides, i);
        s = gguf_writer_set_arr_str(w, "memwall.quant.type_overrides", v, NULL, nov, err);
        free(v);
        if (s != MW_OK) goto out;
    }
out:
    return s;
}

enum mw_status quant_plan_file_size(const struct quant_plan *p, uint64_t *bytes,
                                    struct mw_err *err)
{
    mw_err_clear(err);
    struct gguf_writer *w = NULL;
    enum mw_status s;
    TRY(gguf_writer_init(&w, err));
    TRY(write_kvs(p, w, err));
    for (uint64_t i = 0; i < p->n; i++) {
        const struct quant_tensor_desc *t = p->e[i].src;
        TRY(gguf_writer_add_tensor(w, t->name, p->e[i].choice.type, eff_dims(t), t->ne, err));
    }
    *bytes = gguf_writer_file_size(w);
out:
    gguf_writer_free(w);
    return s;
}

enum mw_status quant_plan_check_imatrix(const struct quant_plan *p, struct mw_err *err)
{
    /* llama-quantize refuses up front without an imatrix, and per tensor
     * when an imatrix lacks its entry; a --corpus source (src->method) has
     * quantized those tensors itself with its calibration's importance. A
     * budget allocation (o.budget) is memwall's own mix, not llama-quantize's
     * preset: its candidates follow quant_rows' needs, not this policy. */
    if (p->o.budget) return MW_OK;
    const bool none = !p->o.rules.has_imatrix && !p->src->method;
    for (uint64_t i = 0; i < p->n; i++) {
        const struct quant_plan_entry *e = &p->e[i];
        const uint32_t t = e->choice.type;
        if (e->choice.reason == QUANT_KEEP ||
            !quant_tensor_requires_imatrix(e->src->name, t, p->preset) ||
            (!none && (t == e->src->type || e->imatrix)))
            continue;
        mw_err_set_where(err, "tensor '%s'", e->src->name);
        if (none)
            return MW_FAIL(err, MW_E_USAGE, MW_ERR_OFF_NONE,
                           "preset %s needs an importance matrix (type %s; llama-quantize "
                           "refuses it without one): give --imatrix FILE or --corpus FILE",
                           p->preset->name, type_name(t));
        if (p->o.imatrix_file) mw_err_set_path(err, p->o.imatrix_file);
        return MW_FAIL(err, MW_E_FORMAT, MW_ERR_OFF_NONE,
                       "no usable imatrix entry for this tensor, and type %s of preset %s needs "
                       "one (llama-quantize refuses it without)",
                       type_name(t), p->preset->name);
    }
    return MW_OK;
}

enum mw_status quant_plan_write(const struct quant_plan *p, const char *out_path,
                                struct quant_stats *st, struct mw_err *err)
{
    mw_err_clear(err);
    {
        const enum mw_status si = quant_plan_check_imatrix(p, err);
        if (si != MW_OK) return si;
    }
    struct wctx c = {.p = p};
    enum mw_status s = MW_OK;
    unsigned nt = p->o.n_threads ? p->o.n_threads : 1;
    if (nt > MAX_THREADS) nt = MAX_THREADS;
    c.pool.n = nt;
    c.pool.w = calloc(nt, sizeof *c.pool.w);
    if (!c.pool.w) return MW_FAIL(err, MW_E_NOMEM, MW_ERR_OFF_NONE, "out of memory");
    if (nt > 1 && mw_pool_init(nt, &c.pool.mp, NULL) != MW_OK) c.pool.mp = NULL;

    TRY(gguf_writer_init(&c.w, err));
    TRY(write_kvs(p, c.w, err));
    for (uint64_t i = 0; i < p->n; i++) {
        const struct quant_tensor_desc *t = p->e[i].src;
        TRY(gguf_writer_add_tensor(c.w, t->name, p->e[i].choice.type, eff_dims(t), t->ne, err));
    }
    TRY(gguf_writer_open(c.w, out_path, err));
    for (uint64_t i = 0; i < p->n; i++) TRY(write_tensor(&c, i, err));
    const uint64_t fsize = gguf_writer_file_size(c.w);
    TRY(gguf_writer_finish(c.w, err));
    if (st) {
        memset(st, 0, sizeof *st);
        st->file_bytes = fsize;
        for (uint64_t i = 0; i < p->n; i++) {
            const struct quant_plan_entry *e = &p->e[i];
            if (e->choice.type == e->src->type) st->n_copied++;
            else st->n_quantized++;
            if (e->choice.fallback) st->n_fallback++;
            if (e->imatrix) st->n_imatrix++;
        }
    }
out:
    gguf_writer_free(c.w);
    mw_pool_free(c.pool.mp);
    for (unsigned k = 0; k < nt; k++) free(c.pool.w[k].scratch);
    free(c.pool.w);
    free(c.inbuf);
    free(c.outbuf);
    return s;
}
