/*
 * methods/methods.c — the calibration-driven quantization driver
 * (methods.h): plan -> calib_run with a per-group callback that
 * quantizes the group's weights (GPTQ or importance-weighted rounding) and
 * writes the dequantized values back -> a source whose layer tensors are
 * already quantized.
 */
#define _POSIX_C_SOURCE 200809L
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define XXH_INLINE_ALL
#include <xxhash.h>

#include "calib/mw_blas.h"
#include "core/mw_file.h"
#include "core/mw_pool.h"
#include "methods/methods.h"
#include "methods/methods_int.h"

bool quant_method_parse(const char *s, enum quant_method *out)
{
    static const char *const names[] = {"rtn",   "gptq",       "awq",       "awq+gptq",
                                        "gptq-act", "awq+gptq-act", "round", "gptq+round",
                                        "awq+round", "awq+gptq+round"};
    for (int i = 0; i < 10; i++)
        if (s && strcmp(s, names[i]) == 0) {
            *out = (enum quant_method)i;
            return true;
        }
    return false;
}

const char *quant_method_name(enum quant_method m)
{
    switch (m) {
    case QUANT_METHOD_RTN: return "rtn";
    case QUANT_METHOD_GPTQ: return "gptq";
    case QUANT_METHOD_AWQ: return "awq";
    case QUANT_METHOD_AWQ_GPTQ: return "awq+gptq";
    case QUANT_METHOD_GPTQ_ACT: return "gptq-act";
    case QUANT_METHOD_AWQ_GPTQ_ACT: return "awq+gptq-act";
    case QUANT_METHOD_ROUND: return "round";
    case QUANT_METHOD_GPTQ_ROUND: return "gptq+round";
    case QUANT_METHOD_AWQ_ROUND: return "awq+round";
    case QUANT_METHOD_AWQ_GPTQ_ROUND: return "awq+gptq+round";
    }
    return "?";
}

/* Rows of the output matrix quantized per step (bounds the f32 buffers at
 * vocab sizes of 150k and more; output_method). */
#define OUTPUT_CHUNK_ROWS 4096

struct quant_methods_src {
    const struct quant_source *base;
    struct quant_tensor_desc *descs; /* base's table, types replaced */
    uint32_t *want;                  /* chosen type per source tensor (UINT32_MAX: none) */
    bool *spilled;                   /* tensor i's replacement is in the spill file */
    uint64_t *off;                   /* ... at this offset */
    uint64_t *nbytes;                /* ... of this size */
    int fd;                          /* the spill file (unlinked at once), -1: none yet;
                                      * with a work dir: its tensors.bin (owned by j) */
    uint64_t fend;                   /* its size */
    uint64_t *hash;                  /* XXH3 of each spilled tensor (checked when read back) */
    struct mwj *j;                   /* the work dir's journal, or NULL */
    struct mwj_spill *pend;          /* tensors spilled in the current layer (journal) */
    uint32_t n_pend, cap_pend;
    char method_label[QUANT_METHODS_LABEL_MAX + 1];   /* memwall.quant.method */
    char method_params[QUANT_METHODS_PARAMS_MAX + 1]; /* memwall.quant.method_params */
    const struct rt_hparams *hp;     /* the calibrated model's shapes */
    float *s_in[CALIB_G_COUNT];      /* the current block's folded AWQ scales per group */
    /* GPTQ: per group the factor of its Hessian (quant_gptq_prepare, in the
     * Hessian's own buffer, taken from calib), shared by the weights that read
     * the group's input; an attention/FFN input group's lives until the next
     * block (v and up may be quantized in the following stage), an output
     * group's is freed after its weight */
    float *U[CALIB_G_COUNT];
    float *U_imp[CALIB_G_COUNT];
    uint32_t *U_perm[CALIB_G_COUNT];
    double t_factor, t_apply, t_awq, t_rtn; /* seconds in GPTQ's factor / sweep, AWQ, RTN */
    /* learned rounding: per group a copy of the undamped Hessian (freed with
     * the factor), what it did over the tensors */
    float *Hr[CALIB_G_COUNT];
    double t_round, round_before, round_after;
    double t_output;                 /* seconds in the output matrix's method */
    char output_note[160];           /* what the output matrix got (the log) */
    uint32_t round_tensors, round_fallbacks;
    uint64_t round_flips;
    const struct quant_methods_opts *mo;
    /* fused tensors (phi3 attn_qkv, ffn_up = gate|up): the parts are quantized
     * one by one (rows are independent) into the tensor's buffer, which is
     * spilled once every row is in */
    struct fused_buf {
        int64_t ti;       /* -1: free */
        uint8_t *b;
        uint64_t rows, filled, row_bytes;
    } fb[3];              /* 3: a MoE layer's ffn_{gate,up,down}_exps fill expert by expert */
    /* MoE: expert matrices quantized with GPTQ on the rows routed
     * to them, with importance-weighted rounding (too few rows for GPTQ), or
     * plainly (no row reached the expert) */
    uint32_t x_gptq, x_rtn, x_unrouted;
    /* AWQ: what each fold did over the layers, for the log */
    struct awq_tally {
        uint32_t folded, no_gain, skipped;
        char why[200];    /* the first skip's reason */
    } tally[CALIB_G_COUNT];
};

/* AWQ fold names per group (the log) */
static const char *const fold_name[CALIB_G_COUNT] = {
    "attn_norm -> q/k/v", "v -> attn_output", "ffn_norm -> gate/up", "up -> ffn_down"};

static void awq_skip(struct quant_methods_src *h, enum calib_group g, uint32_t il,
                     const char *why)
{
    struct awq_tally *t = &h->tally[g];
    if (t->skipped++ == 0) snprintf(t->why, sizeof t->why, "layer %u: %s", il, why);
}

static int64_t find_tensor(const struct quant_methods_src *h, const char *name)
{
    for (uint64_t i = 0; i < h->base->n_tensors; i++)
        if (strcmp(h->base->tensors[i].name, name) == 0) return (int64_t)i;
    return -1;
}

/* Store the replacement bytes of tensor ti in the spill file (a rewrite of
 * the same tensor, e.g. an AWQ norm, is appended; the old bytes are dead).
 * With a work dir the file is its tensors.bin and the tensor is noted for
 * the layer's journal record. A full disk is MW_E_NOSPACE. */
static enum mw_status spill(struct quant_methods_src *h, int64_t ti, const uint8_t *b, uint64_t n,
                           struct mw_err *err)
{
    const char *fpath = h->j ? mwj_tensors_path(h->j) : "scratch file";
    if (h->fd < 0) {
        char path[4096];
        const char *pre = h->mo->scratch_prefix;
        const char *td = getenv("TMPDIR");
        int k = pre ? snprintf(path, sizeof path, "%s.tmp.spill-XXXXXX", pre)
                    : snprintf(path, sizeof path, "%s/memwall-spill-XXXXXX",
                               td && td[0] ? td : "/tmp");
        if (k < 0 || (size_t)k >= sizeof path)
            return MW_FAIL(err, MW_E_USAGE, MW_ERR_OFF_NONE, "scratch path too long");
        h->fd = mkstemp(path);
        if (h->fd < 0)
            return MW_FAIL(err, MW_E_IO, MW_ERR_OFF_NONE, "%s: cannot create: %s", path,
                           strerror(errno));
        unlink(path); /* nothing is left under any name, even after SIGKILL */
    }
    if (h->j && h->n_pend == h->cap_pend) {
        const uint32_t nc = h->cap_pend ? 2 * h->cap_pend : 16;
        struct mwj_spill *q = realloc(h->pend, nc * sizeof *q);
        if (!q) return MW_FAIL(err, MW_E_NOMEM, MW_ERR_OFF_NONE, "out of memory");
        h->pend = q;
        h->cap_pend = nc;
    }
    const enum mw_status ws = mw_pwrite_all(h->fd, b, n, h->fend, fpath, err);
    if (ws != MW_OK) return ws;
    h->spilled[ti] = true;
    h->off[ti] = h->fend;
    h->nbytes[ti] = n;
    h->hash[ti] = XXH3_64bits(b, (size_t)n);
    if (h->j)
        h->pend[h->n_pend++] = (struct mwj_spill){.ti = (uint64_t)ti, .off = h->fend, .bytes = n,
                                                  .hash = h->hash[ti]};
    h->fend += n;
    return MW_OK;
}

enum mw_status quant_awq_fold(struct calib_layer *ly, enum calib_group g, const float *sc,
                              uint32_t q_per_kv, uint32_t head_dim, struct mw_err *err)
{
    enum mw_status s = MW_OK;
    if (g == CALIB_G_ATTN_IN || g == CALIB_G_FFN_IN) {
        float *norm;
        if ((s = calib_layer_norm(ly, g == CALIB_G_ATTN_IN ? CALIB_NORM_ATTN : CALIB_NORM_FFN,
                                  true, &norm, err)) != MW_OK)
            return s;
        const uint64_t n = calib_layer_group_n_in(ly, g);
        for (uint64_t j = 0; j < n; j++) norm[j] /= sc[j];
    } else {
        struct calib_weight pw;
        if ((s = calib_layer_weight(ly, g == CALIB_G_ATTN_OUT ? CALIB_W_V : CALIB_W_UP, true, &pw,
                                    err)) != MW_OK)
            return s;
        const uint64_t hd = head_dim ? head_dim : 1, grp = q_per_kv ? q_per_kv : 1;
        for (uint64_t r = 0; r < pw.n_out; r++) {
            /* v row r = kv head r / hd, dim r % hd: the channel of its first q head */
            const float f = g == CALIB_G_ATTN_OUT ? sc[(r / hd) * grp * hd + r % hd] : sc[r];
            for (uint64_t j = 0; j < pw.n_in; j++) pw.w[r * pw.n_in + j] /= f;
            if (pw.bias) pw.bias[r] /= f;
        }
    }
    for (int wk = 0; wk < CALIB_W_COUNT; wk++) {
        if (calib_wkind_group((enum calib_wkind)wk) != g) continue;
        struct calib_weight cw;
        if ((s = calib_layer_weight(ly, (enum calib_wkind)wk, true, &cw, err)) != MW_OK) return s;
        for (uint64_t r = 0; r < cw.n_out; r++)
            for (uint64_t j = 0; j < cw.n_in; j++) cw.w[r * cw.n_in + j] *= sc[j];
    }
    return MW_OK;
}

bool quant_awq_fold_legal(const struct rt_hparams *hp, enum calib_group g, char *why, size_t n)
{
    const char *no = NULL;
    switch (g) {
    case CALIB_G_ATTN_IN:
    case CALIB_G_FFN_IN: break;
    case CALIB_G_ATTN_OUT:
        if (hp->n_head_kv == 0 || hp->n_head % hp->n_head_kv != 0)
            no = "n_head is not a multiple of n_head_kv: a v row feeds no whole group of "
                 "query heads";
        break;
    case CALIB_G_FFN_DOWN:
        if (hp->act != RT_ACT_SILU && hp->act != RT_ACT_GELU_TANH)
            no = "the FFN is not act(gate) * up: down's input is not linear in up's rows";
        break;
    default: no = "no such group"; break;
    }
    if (no && why && n) snprintf(why, n, "%s", no);
    return no == NULL;
}

static bool uses_awq(enum quant_method m)
{
    return m == QUANT_METHOD_AWQ || m == QUANT_METHOD_AWQ_GPTQ || m == QUANT_METHOD_AWQ_GPTQ_ACT ||
           m == QUANT_METHOD_AWQ_ROUND || m == QUANT_METHOD_AWQ_GPTQ_ROUND;
}
bool quant_method_uses_gptq(enum quant_method m)
{
    return m == QUANT_METHOD_GPTQ || m == QUANT_METHOD_AWQ_GPTQ || m == QUANT_METHOD_GPTQ_ACT ||
           m == QUANT_METHOD_AWQ_GPTQ_ACT || m == QUANT_METHOD_GPTQ_ROUND ||
           m == QUANT_METHOD_AWQ_GPTQ_ROUND;
}
bool quant_method_uses_round(enum quant_method m)
{
    return m == QUANT_METHOD_ROUND || m == QUANT_METHOD_GPTQ_ROUND ||
           m == QUANT_METHOD_AWQ_ROUND || m == QUANT_METHOD_AWQ_GPTQ_ROUND;
}
static bool uses_round(enum quant_method m) { return quant_method_uses_round(m); }
static bool uses_gptq(enum quant_method m) { return quant_method_uses_gptq(m); }
static bool uses_act_order(const struct quant_methods_opts *mo)
{
    return mo->gptq.act_order || mo->method == QUANT_METHOD_GPTQ_ACT ||
           mo->method == QUANT_METHOD_AWQ_GPTQ_ACT;
}

/* Whether the AWQ scales of o's / down's input are folded into v's / up's
 * rows (then v and up are quantized in the ATTN_OUT / FFN_DOWN stage, after
 * the fold, instead of with q/k and gate). */
static bool awq_out_folds(const struct quant_methods_src *h)
{
    return uses_awq(h->mo->method) && !h->mo->awq_in_only;
}

/* The producer whose output rows carry 1/s for group g's input: v for
 * ATTN_OUT, up for FFN_DOWN. */
static enum calib_wkind producer(enum calib_group g)
{
    return g == CALIB_G_ATTN_OUT ? CALIB_W_V : CALIB_W_UP;
}

/* AWQ on group g: search alpha for the group's weights (q/k/v, o, gate/up or
 * down), then fold: the input is divided by s where it is made (ATTN_IN /
 * FFN_IN: the norm, written to the output as F32; ATTN_OUT: v's rows — with
 * grouped-query attention one v row feeds n_head/n_head_kv q heads, so
 * their channels share one scale; FFN_DOWN: up's rows, since silu(gate)*up
 * is linear in up) and the group's columns multiplied by s. Sets
 * h->s_in[g] when it folds. */
static enum mw_status awq_group(struct quant_methods_src *h, struct calib_layer *ly,
                                enum calib_group g, struct mw_err *err)
{
    enum mw_status s;
    const bool in_norm = g == CALIB_G_ATTN_IN || g == CALIB_G_FFN_IN;
    struct quant_awq_group G = {.n_in = calib_layer_group_n_in(ly, g),
                                .n_threads = h->mo->n_threads};
    for (int wk = 0; wk < CALIB_W_COUNT; wk++) {
        if (calib_wkind_group((enum calib_wkind)wk) != g) continue;
        struct calib_weight cw;
        if ((s = calib_layer_weight(ly, (enum calib_wkind)wk, false, &cw, err)) != MW_OK) return s;
        const int64_t ti = find_tensor(h, cw.name);
        if (ti < 0 || h->want[ti] == UINT32_MAX || G.n_w == 3) { /* not all quantized */
            awq_skip(h, g, calib_layer_index(ly), "a weight of the group stays unquantized");
            return MW_OK;
        }
        const struct gguf_type_info *inf = gguf_type_get(h->want[ti]);
        if (!inf || cw.n_in % inf->blck) {
            awq_skip(h, g, calib_layer_index(ly), "row length not a multiple of the block");
            return MW_OK;
        }
        G.w[G.n_w] = cw.w;
        G.n_out[G.n_w] = cw.n_out;
        G.type[G.n_w++] = h->want[ti];
    }
    if (G.n_w == 0) return MW_OK;
    int64_t ni = -1; /* the norm tensor (in_norm) */
    const struct rt_hparams *hp = h->hp;
    const uint64_t hd = hp->head_dim, grp = hp->n_head_kv ? hp->n_head / hp->n_head_kv : 0;
    if (in_norm) {
        char nname[64];
        snprintf(nname, sizeof nname, "blk.%u.%s.weight", calib_layer_index(ly),
                 g == CALIB_G_ATTN_IN ? "attn_norm" : "ffn_norm");
        ni = find_tensor(h, nname);
        if (ni < 0 || h->base->tensors[ni].type != GGUF_TYPE_F32) {
            awq_skip(h, g, calib_layer_index(ly), "the norm is not stored as F32");
            return MW_OK;
        }
    } else {
        char why_s[160];
        if (!quant_awq_fold_legal(hp, g, why_s, sizeof why_s)) {
            awq_skip(h, g, calib_layer_index(ly), why_s);
            return MW_OK;
        }
        /* the producer must be quantized here (else its rescaled rows would
         * never reach the file) and have no bias */
        struct calib_weight pw;
        if ((s = calib_layer_weight(ly, producer(g), false, &pw, err)) != MW_OK) return s;
        const int64_t pi = find_tensor(h, pw.name);
        const char *why = NULL;
        if (pi < 0 || h->want[pi] == UINT32_MAX)
            why = g == CALIB_G_ATTN_OUT ? "v stays unquantized" : "up stays unquantized";
        else if (pw.bias)
            why = g == CALIB_G_ATTN_OUT ? "v has a bias" : "up has a bias";
        else if (g == CALIB_G_ATTN_OUT &&
                 (grp == 0 || hp->n_head % hp->n_head_kv || pw.n_out * grp != G.n_in ||
                  (uint64_t)hp->n_head * hd != G.n_in))
            why = "o's input is not n_head/n_head_kv copies of v's heads";
        else if (g == CALIB_G_FFN_DOWN && pw.n_out != G.n_in)
            why = "down's input is not up's rows";
        /* calib's lean mode: the producer goes back to its scratch file now,
         * before the Hessian is made (the fold fetches it again) */
        if ((s = calib_layer_weight_release(ly, producer(g), err)) != MW_OK) return s;
        if (why) {
            awq_skip(h, g, calib_layer_index(ly), why);
            return MW_OK;
        }
    }
    const struct calib_group_stats *gs = calib_layer_stats(ly, g);
    const float *H;
    if ((s = calib_layer_hessian(ly, g, &H, err)) != MW_OK) return s;
    double *ma = malloc((size_t)G.n_in * sizeof(double));
    float *imp = malloc((size_t)G.n_in * sizeof(float));
    float *sc = malloc((size_t)G.n_in * sizeof(float));
    if (!ma || !imp || !sc) {
        free(ma);
        free(imp);
        free(sc);
        return MW_FAIL(err, MW_E_NOMEM, MW_ERR_OFF_NONE, "out of memory");
    }
    const double cnt = gs->count ? (double)gs->count : 1.0;
    for (uint64_t j = 0; j < G.n_in; j++) {
        ma[j] = gs->sum_abs[j] / cnt;
        imp[j] = (float)(gs->sum_sq[j] / cnt);
    }
    if (g == CALIB_G_ATTN_OUT && grp > 1) /* one scale per v row: mean over its q heads */
        for (uint64_t kh = 0; kh < hp->n_head_kv; kh++)
            for (uint64_t d = 0; d < hd; d++) {
                double m = 0;
                for (uint64_t q = 0; q < grp; q++) m += ma[((kh * grp) + q) * hd + d];
                for (uint64_t q = 0; q < grp; q++) ma[((kh * grp) + q) * hd + d] = m / (double)grp;
            }
    G.mean_abs = ma;
    G.imp = imp;
    G.H = H;
    float alpha = 0;
    const double t0 = mw_now_s();
    s = quant_awq_group(&G, &alpha, err);
    h->t_awq += mw_now_s() - t0;
    if (s == MW_OK) quant_awq_scales(ma, G.n_in, alpha, sc);
    free(ma);
    free(imp);
    if (s != MW_OK || alpha == 0.0f) { /* alpha 0: the plain model, no fold */
        if (s == MW_OK) h->tally[g].no_gain++;
        free(sc);
        return s;
    }
    h->tally[g].folded++;
    s = quant_awq_fold(ly, g, sc, hp->n_head_kv ? (uint32_t)grp : 1, (uint32_t)hd, err);
    if (s == MW_OK && in_norm) { /* the folded norm goes into the file as F32 */
        float *norm;
        uint8_t *nb = malloc((size_t)G.n_in * sizeof(float));
        if (!nb) s = MW_FAIL(err, MW_E_NOMEM, MW_ERR_OFF_NONE, "out of memory");
        if (s == MW_OK)
            s = calib_layer_norm(ly, g == CALIB_G_ATTN_IN ? CALIB_NORM_ATTN : CALIB_NORM_FFN,
                                 false, &norm, err);
        if (s == MW_OK) {
            for (uint64_t j = 0; j < G.n_in; j++) {
                uint32_t u;
                memcpy(&u, &norm[j], 4);
                mw_put_le32(nb + 4 * j, u);
            }
            s = spill(h, ni, nb, G.n_in * sizeof(float), err);
        }
        free(nb);
    }
    if (s != MW_OK) {
        free(sc);
        return s;
    }
    free(h->s_in[g]);
    h->s_in[g] = sc;
    return MW_OK;
}

/* The quantized rows of cw (n_out rows of rb bytes) into tensor ti: spilled
 * at once, or — for a part of a fused tensor — placed at its rows in the
 * tensor's buffer, spilled when the last part is in. The tensor's type in
 * the source changes only when its bytes are spilled. */
static enum mw_status put_rows(struct quant_methods_src *h, int64_t ti,
                               const struct calib_weight *cw, uint32_t type, const uint8_t *q,
                               uint64_t rb, struct mw_err *err)
{
    enum mw_status s;
    if (cw->row0 == 0 && cw->tensor_rows == cw->n_out) {
        if ((s = spill(h, ti, q, rb * cw->n_out, err)) != MW_OK) return s;
        h->descs[ti].type = type;
        return MW_OK;
    }
    struct fused_buf *f = NULL;
    for (int k = 0; k < 3 && !f; k++)
        if (h->fb[k].ti == ti) f = &h->fb[k];
    for (int k = 0; k < 3 && !f; k++)
        if (h->fb[k].ti < 0) {
            f = &h->fb[k];
            uint64_t nb;
            if (!mw_mul_u64(rb, cw->tensor_rows, &nb) || nb > SIZE_MAX)
                return MW_FAIL(err, MW_E_VALUE, MW_ERR_OFF_NONE, "tensor '%s': size overflows",
                               cw->name);
            if (!(f->b = malloc(nb ? (size_t)nb : 1)))
                return MW_FAIL(err, MW_E_NOMEM, MW_ERR_OFF_NONE, "out of memory (%llu bytes)",
                               (unsigned long long)nb);
            f->ti = ti;
            f->rows = cw->tensor_rows;
            f->filled = 0;
            f->row_bytes = rb;
        }
    if (!f || f->row_bytes != rb || cw->row0 + cw->n_out > f->rows)
        return MW_FAIL(err, MW_E_UNSUPPORTED, MW_ERR_OFF_NONE,
                       "tensor '%s': parts of a fused tensor with different row sizes",
                       cw->name);
    memcpy(f->b + cw->row0 * rb, q, (size_t)(cw->n_out * rb));
    f->filled += cw->n_out;
    if (f->filled < f->rows) return MW_OK;
    s = spill(h, ti, f->b, rb * f->rows, err);
    free(f->b);
    f->b = NULL;
    f->ti = -1;
    if (s == MW_OK) h->descs[ti].type = type;
    return s;
}

static void free_factor(struct quant_methods_src *h, int g)
{
    free(h->Hr[g]);
    h->Hr[g] = NULL;
    free(h->U[g]);
    free(h->U_imp[g]);
    free(h->U_perm[g]);
    h->U[g] = h->U_imp[g] = NULL;
    h->U_perm[g] = NULL;
}

/* GPTQ's factor of group g's Hessian, made in the Hessian's own buffer
 * (taken from calib: one n_in² buffer, not two); not positive definite:
 * a fresh Hessian and 10x the dampening, as quant_gptq does. */
static enum mw_status gptq_factor(struct quant_methods_src *h, struct calib_layer *ly,
                                  enum calib_group g, const struct quant_gptq_opts *go,
                                  struct mw_err *err)
{
    const uint64_t n = calib_layer_group_n_in(ly, g);
    h->U_imp[g] = malloc((size_t)n * sizeof(float));
    h->U_perm[g] = malloc((size_t)n * sizeof(uint32_t));
    if (!h->U_imp[g] || !h->U_perm[g]) {
        free_factor(h, (int)g);
        return MW_FAIL(err, MW_E_NOMEM, MW_ERR_OFF_NONE, "out of memory");
    }
    enum mw_status s = MW_OK;
    for (unsigned attempt = 0;; attempt++) {
        bool retry = false;
        if ((s = calib_layer_hessian_take(ly, g, &h->U[g], err)) != MW_OK) break;
        const double t0 = mw_now_s();
        s = quant_gptq_prepare(h->U[g], n, go, attempt, h->U_imp[g], h->U_perm[g], &retry, err);
        h->t_factor += mw_now_s() - t0;
        if (s == MW_OK) return MW_OK;
        free(h->U[g]);
        h->U[g] = NULL;
        if (!retry) break;
        mw_err_clear(err);
    }
    free_factor(h, (int)g);
    return s;
}

/* Learned rounding's copy of group g's undamped Hessian, made once per
 * group before GPTQ's factor takes calib's buffer. */
static enum mw_status round_hessian(struct quant_methods_src *h, struct calib_layer *ly,
                                    enum calib_group g, struct mw_err *err)
{
    if (h->Hr[g]) return MW_OK;
    const uint64_t n = calib_layer_group_n_in(ly, g);
    uint64_t nn;
    if (!mw_mul_u64(n, n, &nn) || nn > SIZE_MAX / sizeof(float))
        return MW_FAIL(err, MW_E_NOMEM, MW_ERR_OFF_NONE, "Hessian size overflows");
    const float *H;
    enum mw_status s = calib_layer_hessian(ly, g, &H, err);
    if (s != MW_OK) return s;
    h->Hr[g] = malloc((size_t)nn * sizeof(float));
    if (!h->Hr[g])
        return MW_FAIL(err, MW_E_NOMEM, MW_ERR_OFF_NONE, "out of memory (%llu bytes)",
                       (unsigned long long)(nn * sizeof(float)));
    memcpy(h->Hr[g], H, (size_t)nn * sizeof(float));
    return MW_OK;
}

/* What one learned-rounding call did, added to the run's totals (the log). */
static void round_tally(struct quant_methods_src *h, const struct quant_round_stats *rs)
{
    h->round_fallbacks += rs->fell_back;
    h->round_flips += rs->flips;
    h->round_before += rs->before;
    h->round_after += rs->after;
}

/* Learned rounding of the blocks q of weight cw, from the weights w0 it was
 * quantized from; cw.w gets the new values. Diverged: q as it came,
 * counted in the method's parameters. */
static enum mw_status round_one(struct quant_methods_src *h, const struct calib_weight *cw,
                                enum calib_group g, uint32_t t, const float *w0, uint8_t *q,
                                struct mw_err *err)
{
    const struct quant_round_opts ro = {.n_threads = h->mo->n_threads};
    struct quant_round_stats rs;
    const double t0 = mw_now_s();
    enum mw_status s =
        quant_round_refine(t, w0, cw->n_out, cw->n_in, h->Hr[g], &ro, q, cw->w, &rs, err);
    h->t_round += mw_now_s() - t0;
    if (s != MW_OK) {
        mw_err_set_where(err, "tensor '%s'", cw->name);
        return s;
    }
    h->round_tensors++;
    round_tally(h, &rs);
    return MW_OK;
}

/* Quantize weight wk (GPTQ under the Hessian of its input group, or
 * importance-weighted rounding with the corpus's imatrix), spill the
 * blocks, leave the dequantized values in the engine's copy. */
static enum mw_status quant_one(struct quant_methods_src *h, struct calib_layer *ly,
                                enum calib_wkind wk, struct mw_err *err)
{
    const struct quant_methods_opts *mo = h->mo;
    const enum calib_group g = calib_wkind_group(wk);
    const float *awq_s = h->s_in[g];
    enum mw_status s;
    struct calib_weight cw;
    if ((s = calib_layer_weight(ly, wk, true, &cw, err)) != MW_OK) return s;
    const int64_t ti = find_tensor(h, cw.name);
    if (ti < 0 || h->want[ti] == UINT32_MAX) return MW_OK; /* kept as it is by the plan */
    const uint32_t t = h->want[ti];
    const struct gguf_type_info *inf = gguf_type_get(t);
    const struct quant_traits *tr = quant_traits_get(t);
    if (!inf || !tr || !tr->to_float || !tr->from_float || cw.n_in % inf->blck) return MW_OK;
    uint64_t rb, nb, ne;
    if (!mw_mul_u64(cw.n_in / inf->blck, inf->type_size, &rb) || !mw_mul_u64(rb, cw.n_out, &nb) ||
        !mw_mul_u64(cw.n_in, cw.n_out, &ne) || nb > SIZE_MAX)
        return MW_FAIL(err, MW_E_VALUE, MW_ERR_OFF_NONE, "tensor '%s': size overflows", cw.name);
    uint8_t *q = malloc(nb ? (size_t)nb : 1);
    if (!q)
        return MW_FAIL(err, MW_E_NOMEM, MW_ERR_OFF_NONE, "out of memory (%llu bytes)",
                       (unsigned long long)nb);
    /* an expert with fewer routed rows than a quarter of its input width:
     * its Hessian says too little; importance-weighted rounding instead */
    const bool expert = calib_layer_expert(ly) >= 0;
    const uint64_t xrows = expert ? calib_layer_expert_rows(ly) : 0;
    const bool few = expert && xrows < (cw.n_in + 3) / 4;
    if (expert) {
        if (xrows == 0) h->x_unrouted++;
        else if (few || !uses_gptq(mo->method) || !quant_gptq_supported(t)) h->x_rtn++;
        else h->x_gptq++;
    }
    /* learned rounding after the method: the weights it starts from */
    float *w0 = NULL;
    if (uses_round(mo->method) && quant_gptq_supported(t) && !few) {
        if ((s = round_hessian(h, ly, g, err)) != MW_OK) {
            free(q);
            return s;
        }
        w0 = malloc((size_t)ne * sizeof(float));
        if (!w0) {
            free(q);
            return MW_FAIL(err, MW_E_NOMEM, MW_ERR_OFF_NONE, "out of memory");
        }
        memcpy(w0, cw.w, (size_t)ne * sizeof(float));
    }
    if (uses_gptq(mo->method) && quant_gptq_supported(t) && !few) {
        struct quant_gptq_opts go = mo->gptq;
        go.n_threads = mo->n_threads;
        go.act_order = uses_act_order(mo);
        if (!h->U[g] && (s = gptq_factor(h, ly, g, &go, err)) != MW_OK) {
            free(w0);
            free(q);
            return s;
        }
        const double t0 = mw_now_s();
        s = quant_gptq_apply(t, cw.w, cw.n_out, cw.n_in, h->U[g], h->U_imp[g], h->U_perm[g], &go,
                             q, err);
        h->t_apply += mw_now_s() - t0;
        if (s != MW_OK) {
            mw_err_set_where(err, "tensor '%s'", cw.name);
            free(w0);
            free(q);
            return s;
        }
    } else {
        /* importance-weighted rounding with the corpus's imatrix (mean x²) */
        const struct calib_group_stats *gs = calib_layer_stats(ly, g);
        float *imp = malloc((size_t)cw.n_in * sizeof(float));
        if (!imp) {
            free(w0);
            free(q);
            return MW_FAIL(err, MW_E_NOMEM, MW_ERR_OFF_NONE, "out of memory");
        }
        const double cnt = gs && gs->count ? (double)gs->count : 1.0;
        for (uint64_t j = 0; j < cw.n_in; j++) {
            /* an expert no row reached: plain rounding (llama.cpp's 1 per channel) */
            imp[j] = gs && gs->count ? (float)(gs->sum_sq[j] / cnt) : 1.0f;
            if (awq_s) imp[j] /= awq_s[j] * awq_s[j]; /* the input is x / s now */
        }
        const double t0 = mw_now_s();
        s = quant_rows_mode(t, QUANT_MODE_BEST, cw.w, cw.n_out, cw.n_in, imp, q,
                            mo->n_threads ? mo->n_threads : 1, err);
        h->t_rtn += mw_now_s() - t0;
        free(imp);
        if (s != MW_OK) {
            free(w0);
            free(q);
            return s;
        }
        tr->to_float(q, cw.w, ne); /* later layers see the quantized weights */
    }
    if (w0) {
        s = round_one(h, &cw, g, t, w0, q, err);
        free(w0);
        if (s != MW_OK) {
            free(q);
            return s;
        }
    }
    s = put_rows(h, ti, &cw, t, q, rb, err);
    free(q);
    /* calib's lean mode: the weight goes back to its scratch file */
    if (s == MW_OK) s = calib_layer_weight_release(ly, wk, err);
    return s;
}

static void say(const struct quant_opts *qo, const char *msg)
{
    if (qo->log) qo->log(qo->log_ud, QUANT_LOG_INFO, msg);
}

/* The AWQ log: per fold what happened over the layers and why a fold was
 * left out; then what the family's structure allows and why (the folds are
 * exact rewrites of the float model; what is not listed is not touched). */
static void awq_report(const struct quant_methods_src *h, const struct quant_opts *qo)
{
    const struct rt_hparams *hp = h->hp;
    char msg[512];
    for (int g = 0; g < CALIB_G_COUNT; g++) {
        const struct awq_tally *t = &h->tally[g];
        const bool off = (g == CALIB_G_ATTN_OUT || g == CALIB_G_FFN_DOWN) && h->mo->awq_in_only;
        if (off) {
            snprintf(msg, sizeof msg, "awq: %s: skipped in every layer (AWQ on the norms' "
                     "inputs only)", fold_name[g]);
        } else {
            /* a MoE layer folds up -> down once per expert (and shared expert) */
            const bool per_x = hp->n_expert && g == CALIB_G_FFN_DOWN;
            const uint32_t of =
                per_x ? hp->n_layer * (hp->n_expert + (hp->n_ff_shexp ? 1 : 0)) : hp->n_layer;
            int k = snprintf(msg, sizeof msg, "awq: %s: folded in %u of %u %s", fold_name[g],
                             t->folded, of, per_x ? "experts over the layers" : "layers");
            if (k > 0 && (size_t)k < sizeof msg && t->no_gain)
                k += snprintf(msg + k, sizeof msg - (size_t)k,
                              ", %u without gain (alpha 0: left as is)", t->no_gain);
            if (k > 0 && (size_t)k < sizeof msg && t->skipped)
                snprintf(msg + k, sizeof msg - (size_t)k, ", skipped in %u (%s)", t->skipped,
                         t->why);
        }
        say(qo, msg);
    }
    if (hp->qk_norm)
        say(qo, "awq: attn_norm -> q/k/v stays exact with the per-head q/k RMSNorm "
                "(attn_q_norm/attn_k_norm act on Wq x, Wk x, which the fold leaves unchanged); "
                "attn_q_norm/attn_k_norm themselves are not folded into (their input is a "
                "projection's output, normalized per head)");
    if (hp->post_norms)
        say(qo, "awq: post_attention_norm and post_ffw_norm are skipped: they normalize the "
                "block outputs (no quantized weight reads them) and are written as they are");
    if (hp->arch == RT_ARCH_GEMMA2 || hp->arch == RT_ARCH_GEMMA3)
        say(qo, "awq: gemma's (1 + w) norms are folded in their GGUF form (w + 1, the "
                "multiplier llama.cpp applies): attn_norm and ffn_norm (pre_feedforward) are "
                "divided by s and written as F32 multipliers, no +1 is added or removed");
    if (hp->act == RT_ACT_GELU_TANH)
        say(qo, "awq: up -> ffn_down is exact with GELU-tanh gating: gelu(gate x) * (up x) is "
                "linear in up's rows");
    if (hp->fused_qkv)
        say(qo, "awq: fused attn_qkv: its q, k and v rows take the attn_norm scales together; "
                "v -> attn_output rescales the v rows of attn_qkv");
    if (hp->fused_gate_up)
        say(qo, "awq: fused ffn_up (gate rows, then up rows): ffn_norm scales both halves; up "
                "-> ffn_down rescales the up half only");
    if (hp->tied_output)
        say(qo, "awq: token_embd (tied output) is not scaled: it is no linear weight of a "
                "layer");
}

/* Where the calibration's time went (the bench reads this line). */
static void time_report(const struct quant_methods_src *h, const struct quant_opts *qo,
                        const struct calib_stats *st)
{
    const struct calib_timing *t = calib_stats_timing(st);
    char msg[512];
    snprintf(msg, sizeof msg,
             "time: calibration %.2fs: forward GEMMs %.2fs (%.3g GFLOP, %.2f GFLOP/s), Hessians "
             "%.2fs (%.3g GFLOP, %.2f GFLOP/s), AWQ search %.2fs, GPTQ factor %.2fs, GPTQ sweep "
             "%.2fs, rounding %.2fs, learned rounding %.2fs, output matrix %.2fs, other %.2fs",
             t->total_s, t->gemm_s, t->gemm_flop * 1e-9,
             t->gemm_s > 0 ? t->gemm_flop * 1e-9 / t->gemm_s : 0.0, t->hess_s,
             t->hess_flop * 1e-9, t->hess_s > 0 ? t->hess_flop * 1e-9 / t->hess_s : 0.0,
             h->t_awq, h->t_factor, h->t_apply, h->t_rtn, h->t_round, h->t_output,
             t->total_s - t->gemm_s - t->hess_s - h->t_awq - h->t_factor - h->t_apply - h->t_rtn -
                 h->t_round - h->t_output);
    say(qo, msg);
    if (uses_round(h->mo->method)) {
        snprintf(msg, sizeof msg,
                 "round: learned rounding on %u tensors: %llu levels moved, layer output error "
                 "%.6g -> %.6g (%.1f%% lower)%s",
                 h->round_tensors, (unsigned long long)h->round_flips, h->round_before,
                 h->round_after,
                 h->round_before > 0 ? 100.0 * (1.0 - h->round_after / h->round_before) : 0.0,
                 h->round_fallbacks ? "; some fell back to the method before it" : "");
        say(qo, msg);
        if (h->round_fallbacks) {
            snprintf(msg, sizeof msg,
                     "round: %u tensors kept the result of %s (a non-finite value in the "
                     "descent, or no lower error): recorded in memwall.quant.method_params",
                     h->round_fallbacks,
                     uses_gptq(h->mo->method) ? "GPTQ" : "importance-weighted rounding");
            say(qo, msg);
        }
    }
}

static enum mw_status on_group(void *ud, struct calib_layer *ly, enum calib_group g,
                               struct mw_err *err)
{
    struct quant_methods_src *h = ud;
    enum mw_status s;
    if (g == CALIB_G_ATTN_IN || g == CALIB_G_FFN_IN) { /* a new block: no scales yet */
        for (int k = 0; k < 2; k++) {
            free(h->s_in[g + k]);
            h->s_in[g + k] = NULL;
        }
        for (int k = 0; k < CALIB_G_COUNT; k++) free_factor(h, k); /* nor factors */
    }
    /* a MoE layer: ffn_norm feeds the router too (no fold there); up -> down
     * folds per expert, on the rows routed to it, and for the shared expert */
    const bool moe_in = calib_layer_n_expert(ly) > 0 && g == CALIB_G_FFN_IN;
    if (moe_in && uses_awq(h->mo->method) && calib_layer_expert(ly) == 0) /* once per layer */
        awq_skip(h, g, calib_layer_index(ly), "mixture of experts: the router reads ffn_norm too");
    /* an expert with too few routed rows for GPTQ (quant_one) gets no fold either */
    const bool few = calib_layer_expert(ly) >= 0 &&
                     calib_layer_expert_rows(ly) < (calib_layer_group_n_in(ly, g) + 3) / 4;
    if (!moe_in && few && uses_awq(h->mo->method))
        awq_skip(h, g, calib_layer_index(ly), "an expert with too few routed rows");
    else if (!moe_in && uses_awq(h->mo->method) && (s = awq_group(h, ly, g, err)) != MW_OK)
        return s;
    const bool defer = awq_out_folds(h);
    if (defer && (g == CALIB_G_ATTN_OUT || g == CALIB_G_FFN_DOWN)) {
        if ((s = quant_one(h, ly, producer(g), err)) != MW_OK) return s; /* after the fold */
        free_factor(h, (int)g - 1); /* the input group's factor: its last weight is done */
    }
    for (int wk = 0; wk < CALIB_W_COUNT; wk++) {
        if (calib_wkind_group((enum calib_wkind)wk) != g) continue;
        if (defer && (wk == CALIB_W_V || wk == CALIB_W_UP)) continue; /* done in the next stage */
        if ((s = quant_one(h, ly, (enum calib_wkind)wk, err)) != MW_OK) return s;
    }
    if (g == CALIB_G_ATTN_OUT || g == CALIB_G_FFN_DOWN) free_factor(h, (int)g); /* o, down done */
    return MW_OK;
}

static enum mw_status src_read(void *ud, uint64_t i, quant_sink_fn sink, void *sink_ud,
                               struct mw_err *err)
{
    struct quant_methods_src *h = ud;
    if (!h->spilled[i]) return h->base->read(h->base->ud, i, sink, sink_ud, err);
    const uint64_t n = h->nbytes[i];
    const size_t cap = n < ((uint64_t)4 << 20) ? (size_t)(n ? n : 1) : (size_t)4 << 20;
    uint8_t *buf = malloc(cap);
    if (!buf) return MW_FAIL(err, MW_E_NOMEM, MW_ERR_OFF_NONE, "out of memory");
    enum mw_status s = MW_OK;
    XXH3_state_t hs;
    XXH3_INITSTATE(&hs);
    XXH3_64bits_reset(&hs);
    for (uint64_t done = 0; done < n && s == MW_OK;) {
        const size_t c = n - done < cap ? (size_t)(n - done) : cap;
        s = mw_pread_all(h->fd, buf, c, h->off[i] + done,
                         h->j ? mwj_tensors_path(h->j) : "scratch file", err);
        if (s != MW_OK) break;
        XXH3_64bits_update(&hs, buf, c);
        s = sink(sink_ud, buf, c, err);
        done += c;
    }
    free(buf);
    if (s == MW_OK && XXH3_64bits_digest(&hs) != h->hash[i]) {
        /* what was spilled (or, resumed, what the journal recorded) is not
         * what came back: the output is never renamed into place */
        mw_err_set_path(err, h->j ? mwj_tensors_path(h->j) : "scratch file");
        mw_err_set_where(err, "tensor '%s'", h->base->tensors[i].name);
        s = MW_FAIL(err, MW_E_CHECKSUM, h->off[i],
                    "%llu bytes read back do not match their hash: the file was changed",
                    (unsigned long long)n);
    }
    return s;
}

static const uint8_t *src_data(void *ud, uint64_t i)
{
    struct quant_methods_src *h = ud;
    if (h->spilled[i]) return NULL; /* streamed back by src_read */
    return h->base->data ? h->base->data(h->base->ud, i) : NULL;
}

static void src_release(void *ud, uint64_t i, uint64_t off, uint64_t n)
{
    struct quant_methods_src *h = ud;
    if (!h->spilled[i] && h->base->release) h->base->release(h->base->ud, i, off, n);
}

void quant_methods_source_free(struct quant_methods_src *h)
{
    if (!h) return;
    if (h->fd >= 0 && !h->j) close(h->fd); /* a work dir's tensors.bin: mwj_close */
    mwj_close(h->j);
    free(h->hash);
    free(h->pend);
    free(h->spilled);
    free(h->off);
    free(h->nbytes);
    free(h->descs);
    free(h->want);
    for (int g = 0; g < CALIB_G_COUNT; g++) {
        free(h->s_in[g]);
        free_factor(h, g);
    }
    for (int k = 0; k < 3; k++) free(h->fb[k].b);
    free(h);
}

uint64_t quant_methods_peak_bytes(const struct rt_hparams *hp, const struct quant_methods_opts *mo)
{
    const uint64_t qd = (uint64_t)hp->n_head * hp->head_dim;
    const uint64_t kvd = (uint64_t)hp->n_head_kv * hp->head_dim;
    uint64_t nin = hp->n_embd, nout = hp->n_embd;
    if (qd > nin) nin = qd;
    if (hp->n_ff > nin) nin = hp->n_ff;
    if (qd > nout) nout = qd;
    if (hp->n_ff > nout) nout = hp->n_ff;
    if (kvd > nout) nout = kvd;
    /* the largest weight: (n_ff x n_embd) or (qdim x n_embd) */
    uint64_t wel = (uint64_t)hp->n_ff * hp->n_embd;
    if (qd * hp->n_embd > wel) wel = qd * hp->n_embd;
    /* the quantized tensor (<= 2 B/weight: F16 is a choice too) + vectors; what
     * no formula here counts: OpenBLAS's per-thread buffers (32 MiB each on
     * x86-64) and the process's own (64 MiB: code, libc, stacks) */
    const unsigned nt = mo->n_threads ? mo->n_threads : 1;
    uint64_t b = 2 * wel + 64 * nin + ((uint64_t)64 << 20) + ((uint64_t)32 << 20) * nt;
    /* MoE: the three stacked expert tensors fill expert by expert (fb[]) */
    if (hp->n_expert) b += 3 * 2 * (uint64_t)hp->n_expert * hp->n_ff_exp * hp->n_embd;
    if (uses_gptq(mo->method)) {
        /* the factor of H^-1 is made in calib's Hessian buffer (counted there);
         * an input group's (n_embd²) is kept for the next stage's v / up; the
         * lazy errors; importance and order vectors */
        b += 4 * (uint64_t)hp->n_embd * hp->n_embd + 4 * nout * 256 + 16 * nin;
        if (uses_act_order(mo)) b += 12 * wel + 5 * nin; /* permuted weights + grid */
    }
    if (uses_round(mo->method)) /* two groups' Hessian copies; w0, E, G; a copy of q */
        b += 2 * 4 * nin * nin + 12 * wel + 2 * wel + 24 * nin * nt;
    if (uses_gptq(mo->method) || uses_round(mo->method)) {
        /* the output matrix (output_method): H and its factor, OUTPUT_CHUNK_ROWS rows in
         * f32 (w, w0, and learned rounding's E and G), the quantized matrix (<= 2 B per
         * weight), one sample's normalized rows */
        const uint64_t e = hp->n_embd;
        const uint64_t sl = mo->samples.seq_len ? mo->samples.seq_len : CALIB_DEFAULT_SEQ_LEN;
        const uint64_t rows = hp->n_vocab < OUTPUT_CHUNK_ROWS ? hp->n_vocab : OUTPUT_CHUNK_ROWS;
        b += 8 * e * e + 16 * rows * e + 2 * (uint64_t)hp->n_vocab * e + 4 * (sl + 1) * e;
    }
    if (uses_awq(mo->method)) { /* search buffers: 3 floats + 2 bytes per searched element */
        const uint64_t qd2 = (uint64_t)hp->n_head * hp->head_dim;
        const uint64_t shape[4][2] = {{qd2 > hp->n_ff ? qd2 : hp->n_ff, hp->n_embd}, /* q, gate */
                                      {hp->n_embd, qd2},                             /* o */
                                      {hp->n_embd, hp->n_ff},                        /* down */
                                      {kvd, hp->n_embd}};                            /* v */
        uint64_t maxw = 0;
        for (int k = 0; k < 4; k++) {
            const uint64_t e = quant_awq_search_rows(shape[k][0], shape[k][1]) * shape[k][1];
            if (e > maxw) maxw = e;
        }
        b += 14 * maxw + 12 * nin;
    }
    return b;
}

/* --- the output matrix --- */

/* The output matrix's rows, chunk by chunk (output_method). */
struct out_job {
    struct quant_methods_src *h;
    uint32_t t;
    const struct quant_traits *str; /* the source type's */
    uint64_t n_in, src_rb, rb, chunk;
    bool gq, rd;
    const float *U, *imp, *H;
    const uint32_t *perm;
    const struct quant_gptq_opts *go;
    float *w, *w0;
    uint8_t *q;
    unsigned nt;
    uint8_t *raw;       /* streamed: source bytes of the current chunk */
    uint64_t fill, cap; /* ... bytes in it (copy_sink: its capacity) */
    uint64_t row0;      /* ... its first row */
    uint64_t q_rows;    /* rows of the matrix */
};

/* Rows [r0, r0 + n) from their source bytes: GPTQ (or importance-weighted
 * rounding), then learned rounding; blocks into J->q. */
static enum mw_status out_rows(struct out_job *J, const uint8_t *raw, uint64_t r0, uint64_t n,
                               struct mw_err *err)
{
    struct quant_methods_src *h = J->h;
    enum mw_status s;
    J->str->to_float(raw, J->w, n * J->n_in);
    if (J->rd) memcpy(J->w0, J->w, (size_t)(n * J->n_in) * sizeof(float));
    uint8_t *qc = J->q + r0 * J->rb;
    if (J->gq)
        s = quant_gptq_apply(J->t, J->w, n, J->n_in, J->U, J->imp, J->perm, J->go, qc, err);
    else
        s = quant_rows_mode(J->t, QUANT_MODE_BEST, J->w, n, J->n_in, J->imp, qc, J->nt, err);
    if (s == MW_OK && J->rd) {
        const struct quant_round_opts ro = {.n_threads = J->nt};
        struct quant_round_stats rs;
        s = quant_round_refine(J->t, J->w0, n, J->n_in, J->H, &ro, qc, J->w, &rs, err);
        if (s == MW_OK) round_tally(h, &rs);
    }
    return s;
}

/* quant_sink_fn: the streamed output matrix, OUTPUT_CHUNK_ROWS rows at a time. */
static enum mw_status out_sink(void *ud, const void *data, size_t n, struct mw_err *err)
{
    struct out_job *J = ud;
    const uint8_t *p = data;
    const uint64_t cap = J->chunk * J->src_rb;
    while (n) {
        const uint64_t k = cap - J->fill < n ? cap - J->fill : n;
        memcpy(J->raw + J->fill, p, (size_t)k);
        J->fill += k;
        p += k;
        n -= (size_t)k;
        if (J->fill == cap) {
            if (J->row0 + J->chunk > J->q_rows)
                return MW_FAIL(err, MW_E_VALUE, MW_ERR_OFF_NONE, "more rows than expected");
            const enum mw_status s = out_rows(J, J->raw, J->row0, J->chunk, err);
            if (s != MW_OK) return s;
            J->row0 += J->chunk;
            J->fill = 0;
        }
    }
    return MW_OK;
}

/* quant_sink_fn: bytes into J->raw, at most J->cap. */
static enum mw_status copy_sink(void *ud, const void *data, size_t n, struct mw_err *err)
{
    struct out_job *J = ud;
    if (n > J->cap - J->fill)
        return MW_FAIL(err, MW_E_VALUE, MW_ERR_OFF_NONE, "more bytes than expected");
    memcpy(J->raw + J->fill, data, n);
    J->fill += n;
    return MW_OK;
}

/* output.weight under the method (GPTQ, learned rounding) on the Hessian
 * of its input: the final hidden states after output_norm, over every
 * calibration row. Runs in the last layer's on_layer, after the layer is
 * final (the hidden states are the quantized model's) and before a work
 * dir records the layer: a resumed run restores it from the journal. The
 * matrix is read from the source (mapped, or streamed: an HF checkpoint)
 * OUTPUT_CHUNK_ROWS rows at a time. Left to the ordinary pipeline
 * (importance-weighted rounding) when there is none (tied to token_embd)
 * or its type is not one the method can place; output_note says which. */
static enum mw_status output_method(struct quant_methods_src *h, struct calib_layer *ly,
                                    struct mw_err *err)
{
    const struct quant_methods_opts *mo = h->mo;
    const struct quant_source *src = h->base;
    const bool gq = uses_gptq(mo->method), rd = uses_round(mo->method);
    if (!gq && !rd) return MW_OK;
    const int64_t ti = find_tensor(h, "output.weight");
    const int64_t ni = find_tensor(h, "output_norm.weight");
    if (ti < 0 || h->want[ti] == UINT32_MAX) {
        snprintf(h->output_note, sizeof h->output_note, "output: %s",
                 ti < 0 ? "tied to token_embd: importance-weighted rounding"
                        : "kept as it is by the plan");
        return MW_OK;
    }
    const uint32_t t = h->want[ti];
    const struct quant_tensor_desc *d = &src->tensors[ti];
    const struct gguf_type_info *inf = gguf_type_get(t);
    const struct quant_traits *str = quant_traits_get(d->type);
    const struct quant_traits *ntr = ni >= 0 ? quant_traits_get(src->tensors[ni].type) : NULL;
    const uint64_t n_in = d->ne[0], n_out = d->ne[1], E = h->hp->n_embd;
    const uint8_t *wd = src->data ? src->data(src->ud, (uint64_t)ti) : NULL;
    const char *why = !quant_gptq_supported(t) ? "its type is not on a grid the method places"
                      : !inf || n_in != E || n_in % inf->blck || d->n_dims != 2
                          ? "an unexpected shape"
                      : !str || !str->to_float || !ntr || !ntr->to_float ||
                              src->tensors[ni].ne[0] != E
                          ? "an unexpected source type"
                                   : NULL;
    if (why) {
        snprintf(h->output_note, sizeof h->output_note,
                 "output: importance-weighted rounding (%s)", why);
        return MW_OK;
    }
    const double t0 = mw_now_s();
    /* one sample's rows at a time (Σ yᵀy in row order: the same bits for any
     * batching of whole samples) */
    const uint64_t T = calib_layer_n_rows(ly), mr = calib_layer_n_pos(ly);
    const uint32_t npos = calib_layer_n_pos(ly);
    const uint64_t chunk = n_out < OUTPUT_CHUNK_ROWS ? n_out : OUTPUT_CHUNK_ROWS;
    const uint64_t sb = gguf_type_get(d->type) ? gguf_type_get(d->type)->type_size : 0;
    const uint64_t sblk = gguf_type_get(d->type) ? gguf_type_get(d->type)->blck : 1;
    uint64_t rb, nb;
    if (!mw_mul_u64(n_in / inf->blck, inf->type_size, &rb) || !mw_mul_u64(rb, n_out, &nb) ||
        nb > SIZE_MAX || E > 65536 || mr == 0 || sb == 0 || n_in % sblk)
        return MW_FAIL(err, MW_E_VALUE, MW_ERR_OFF_NONE, "tensor 'output.weight': sizes overflow");
    const uint64_t src_rb = n_in / sblk * sb;
    float *H = calloc((size_t)(E * E), sizeof(float));
    float *U = malloc((size_t)(E * E) * sizeof(float));
    float *imp = malloc((size_t)E * sizeof(float));
    uint32_t *perm = malloc((size_t)E * sizeof(uint32_t));
    float *nw = malloc((size_t)E * sizeof(float));
    uint8_t *nraw = NULL;
    float *Y = malloc((size_t)(mr * E) * sizeof(float));
    float *w = malloc((size_t)(chunk * n_in) * sizeof(float));
    float *w0 = malloc((size_t)(chunk * n_in) * sizeof(float));
    uint8_t *q = malloc((size_t)nb);
    struct mw_pool *pool = NULL;
    enum mw_status s = MW_OK;
    if (!H || !U || !imp || !perm || !nw || !Y || !w || !w0 || !q) {
        s = MW_FAIL(err, MW_E_NOMEM, MW_ERR_OFF_NONE,
                    "tensor 'output.weight': out of memory for its method");
        goto out;
    }
    const unsigned nt = mo->n_threads ? mo->n_threads : 1;
    if ((s = mw_pool_init(nt, &pool, err)) != MW_OK) goto out;
    { /* output_norm's weights (mapped, or read) */
        const uint8_t *nd = src->data ? src->data(src->ud, (uint64_t)ni) : NULL;
        const struct gguf_type_info *ninf = gguf_type_get(src->tensors[ni].type);
        if (!nd) {
            struct out_job nj = {0};
            const uint64_t nbytes = ninf && ninf->blck ? E / ninf->blck * ninf->type_size : 0;
            if (!nbytes || !(nraw = malloc((size_t)nbytes))) {
                s = MW_FAIL(err, MW_E_NOMEM, MW_ERR_OFF_NONE, "out of memory");
                goto out;
            }
            nj.raw = nraw;
            nj.cap = nbytes;
            if ((s = src->read(src->ud, (uint64_t)ni, copy_sink, &nj, err)) != MW_OK) goto out;
            if (nj.fill != nbytes) {
                s = MW_FAIL(err, MW_E_VALUE, MW_ERR_OFF_NONE, "tensor 'output_norm.weight': "
                            "%llu bytes read, expected %llu", (unsigned long long)nj.fill,
                            (unsigned long long)nbytes);
                goto out;
            }
            nd = nraw;
        }
        ntr->to_float(nd, nw, E);
    }
    /* H = Σ yᵀy, y = output_norm(hidden): RMSNorm with the stored multiplier */
    for (uint64_t r0 = 0; r0 < T; r0 += mr) {
        const uint64_t n = T - r0 < mr ? T - r0 : mr;
        const float *x;
        if ((s = calib_layer_hidden(ly, r0, n, &x, err)) != MW_OK) goto out;
        for (uint64_t r = 0; r < n; r++) {
            double ss = 0;
            for (uint64_t j = 0; j < E; j++) ss += (double)x[r * E + j] * x[r * E + j];
            const float sc = (float)(1.0 / sqrt(ss / (double)E + (double)h->hp->rms_eps));
            for (uint64_t j = 0; j < E; j++) Y[r * E + j] = x[r * E + j] * sc * nw[j];
        }
        mw_gram_acc(pool, E, n, Y, E, r0 == 0, H, npos);
    }
    mw_sym_lower_from_upper(H, E);
    struct quant_gptq_opts go = mo->gptq;
    go.n_threads = nt;
    go.act_order = false; /* the output matrix: plain GPTQ under every GPTQ method */
    if (gq)
        for (unsigned attempt = 0;; attempt++) {
            bool retry = false;
            memcpy(U, H, (size_t)(E * E) * sizeof(float));
            s = quant_gptq_prepare(U, E, &go, attempt, imp, perm, &retry, err);
            if (s == MW_OK || !retry) break;
            mw_err_clear(err);
        }
    else
        for (uint64_t j = 0; j < E; j++) imp[j] = (float)(H[j * E + j] / (double)(T ? T : 1));
    if (s != MW_OK) goto out;
    struct out_job oj = {.h = h, .t = t, .str = str, .n_in = n_in, .src_rb = src_rb, .rb = rb,
                         .chunk = chunk, .gq = gq, .rd = rd, .U = U, .imp = imp, .perm = perm,
                         .H = H, .go = &go, .w = w, .w0 = w0, .q = q, .nt = nt,
                         .q_rows = n_out};
    if (wd) {
        for (uint64_t r0 = 0; r0 < n_out && s == MW_OK; r0 += chunk) {
            const uint64_t n = n_out - r0 < chunk ? n_out - r0 : chunk;
            s = out_rows(&oj, wd + r0 * src_rb, r0, n, err);
            if (src->release) src->release(src->ud, (uint64_t)ti, r0 * src_rb, n * src_rb);
        }
    } else { /* streamed: OUTPUT_CHUNK_ROWS rows of source bytes at a time */
        if (!(oj.raw = malloc((size_t)(chunk * src_rb)))) {
            s = MW_FAIL(err, MW_E_NOMEM, MW_ERR_OFF_NONE, "out of memory");
            goto out;
        }
        s = src->read(src->ud, (uint64_t)ti, out_sink, &oj, err);
        if (s == MW_OK && oj.fill) s = out_rows(&oj, oj.raw, oj.row0, oj.fill / src_rb, err);
        if (s == MW_OK && oj.row0 + oj.fill / src_rb != n_out)
            s = MW_FAIL(err, MW_E_VALUE, MW_ERR_OFF_NONE, "tensor 'output.weight': %llu rows read, "
                        "expected %llu", (unsigned long long)(oj.row0 + oj.fill / src_rb),
                        (unsigned long long)n_out);
        free(oj.raw);
    }
    if (s != MW_OK) {
        mw_err_set_where(err, "tensor 'output.weight'");
        goto out;
    }
    if (rd) h->round_tensors++;
    if ((s = spill(h, ti, q, nb, err)) != MW_OK) goto out;
    h->descs[ti].type = t;
    snprintf(h->output_note, sizeof h->output_note,
             "output: %s%s on the final hidden states after output_norm (%llu rows)",
             gq ? "GPTQ" : "importance-weighted rounding", rd ? " + learned rounding" : "",
             (unsigned long long)T);
out:
    h->t_output += mw_now_s() - t0;
    mw_pool_free(pool);
    free(H);
    free(U);
    free(imp);
    free(perm);
    free(nw);
    free(nraw);
    free(Y);
    free(w);
    free(w0);
    free(q);
    return s;
}

/* on_layer: after the last layer the output matrix; with a work dir the
 * layer's journal record (which then holds the output matrix too). */
static enum mw_status on_layer_journal(void *ud, struct calib_layer *ly, struct mw_err *err);
static enum mw_status on_layer(void *ud, struct calib_layer *ly, struct mw_err *err)
{
    struct quant_methods_src *h = ud;
    enum mw_status s;
    if (calib_layer_index(ly) + 1 == h->hp->n_layer && (s = output_method(h, ly, err)) != MW_OK)
        return s;
    return h->mo->work_dir ? on_layer_journal(ud, ly, err) : MW_OK;
}

/* --- the work dir (methods_journal.c) --- */

/* on_layer with a work dir: the layer's tensors are in tensors.bin; record
 * them, the AWQ tally and the layer's output hidden states. */
static enum mw_status on_layer_journal(void *ud, struct calib_layer *ly, struct mw_err *err)
{
    struct quant_methods_src *h = ud;
    for (int k = 0; k < 3; k++)
        if (h->fb[k].ti >= 0)
            return MW_FAIL(err, MW_E_UNSUPPORTED, MW_ERR_OFF_NONE,
                           "layer %u ended with tensor '%s' partly quantized",
                           calib_layer_index(ly), h->base->tensors[h->fb[k].ti].name);
    struct mwj_layer rec = {.layer = calib_layer_index(ly), .tensors_end = h->fend,
                            .n_spill = h->n_pend, .spill = h->pend};
    for (uint32_t k = 0; k < h->n_pend; k++) h->pend[k].type = h->descs[h->pend[k].ti].type;
    for (int g = 0; g < CALIB_G_COUNT; g++) {
        rec.tally[g].folded = h->tally[g].folded;
        rec.tally[g].no_gain = h->tally[g].no_gain;
        rec.tally[g].skipped = h->tally[g].skipped;
        snprintf(rec.tally[g].why, sizeof rec.tally[g].why, "%s", h->tally[g].why);
    }
    rec.x_gptq = h->x_gptq;
    rec.x_rtn = h->x_rtn;
    rec.x_unrouted = h->x_unrouted;
    const enum mw_status s = mwj_commit(h->j, ly, &rec, err);
    if (s == MW_OK) h->n_pend = 0;
    return s;
}

static void hash_u64(XXH3_state_t *st, uint64_t v)
{
    uint8_t b[8];
    mw_put_le64(b, v);
    XXH3_64bits_update(st, b, 8);
}

/* What the run's tensors depend on (struct mwj_id); not the thread count. */
static enum mw_status run_identity(const struct quant_methods_src *h, struct calib_model *m,
                                   const struct calib_samples *smp,
                                   const struct calib_run_opts *ro, struct mwj_id *id,
                                   struct mw_err *err)
{
    const struct quant_methods_opts *mo = h->mo;
    const struct quant_source *base = h->base;
    memset(id, 0, sizeof *id);
    enum mw_status s = mwj_model_identity(mo->model_path, &id->model_bytes, &id->model_hash, err);
    if (s != MW_OK) return s;
    XXH3_state_t st;
    XXH3_INITSTATE(&st);
    XXH3_64bits_reset(&st);
    for (uint64_t i = 0; i < base->n_tensors; i++) {
        const struct quant_tensor_desc *t = &base->tensors[i];
        XXH3_64bits_update(&st, t->name, strlen(t->name) + 1);
        hash_u64(&st, t->type);
        hash_u64(&st, t->n_dims);
        for (int d = 0; d < GGUF_MAX_DIMS; d++) hash_u64(&st, t->ne[d]);
    }
    id->tensors_hash = XXH3_64bits_digest(&st);
    id->n_tensors = base->n_tensors;
    id->n_layer = h->hp->n_layer;
    id->n_embd = h->hp->n_embd;
    id->n_samples = calib_samples_count(smp);
    id->n_pos = calib_samples_n_pos(smp);
    XXH3_64bits_reset(&st);
    for (uint32_t i = 0; i < id->n_samples; i++) {
        const int32_t *t = calib_samples_tokens(smp, i);
        for (uint32_t p = 0; p < id->n_pos; p++) hash_u64(&st, (uint32_t)t[p]);
    }
    id->samples_hash = XXH3_64bits_digest(&st);
    id->method = (uint32_t)mo->method;
    if (uses_gptq(mo->method)) {
        const float damp = mo->gptq.damp > 0 ? mo->gptq.damp : 0.01f;
        memcpy(&id->damp_bits, &damp, 4);
        id->gptq_block = mo->gptq.block ? mo->gptq.block : 128;
        id->act_order = uses_act_order(mo);
    }
    id->awq_in_only = uses_awq(mo->method) && mo->awq_in_only;
    XXH3_64bits_reset(&st);
    for (uint64_t i = 0; i < base->n_tensors; i++) hash_u64(&st, h->want[i]);
    id->want_hash = XXH3_64bits_digest(&st);
    id->batch_samples = calib_run_batch_samples(m, smp, ro);
    return MW_OK;
}

/* The journal's layers back into h: every tensor they spilled (checked
 * against the plan: the type it wanted or the source's, the size of that
 * type), the AWQ tally after the last one. */
static enum mw_status restore_layers(struct quant_methods_src *h, struct mw_err *err)
{
    const uint32_t nl = mwj_n_layers(h->j);
    for (uint32_t l = 0; l < nl; l++) {
        const struct mwj_layer *L = mwj_layer_at(h->j, l);
        for (uint32_t k = 0; k < L->n_spill; k++) {
            const struct mwj_spill *q = &L->spill[k];
            const struct quant_tensor_desc *t = &h->base->tensors[q->ti];
            uint64_t want_b = 0;
            const bool ok = (q->type == h->want[q->ti] || q->type == t->type) &&
                            gguf_tensor_nbytes(q->type, t->ne, &want_b) && want_b == q->bytes;
            if (!ok) {
                mw_err_set_path(err, mwj_tensors_path(h->j));
                mw_err_set_where(err, "tensor '%s'", t->name);
                return MW_FAIL(err, MW_E_FORMAT, q->off,
                               "the journal's layer %u recorded %llu bytes of type %u, which "
                               "this run's plan does not make",
                               L->layer, (unsigned long long)q->bytes, q->type);
            }
            h->spilled[q->ti] = true;
            h->off[q->ti] = q->off;
            h->nbytes[q->ti] = q->bytes;
            h->hash[q->ti] = q->hash;
            h->descs[q->ti].type = q->type;
        }
        if (l + 1 == nl) {
            h->x_gptq = L->x_gptq;
            h->x_rtn = L->x_rtn;
            h->x_unrouted = L->x_unrouted;
        }
        if (l + 1 == nl)
            for (int g = 0; g < CALIB_G_COUNT; g++) {
                h->tally[g].folded = L->tally[g].folded;
                h->tally[g].no_gain = L->tally[g].no_gain;
                h->tally[g].skipped = L->tally[g].skipped;
                snprintf(h->tally[g].why, sizeof h->tally[g].why, "%s", L->tally[g].why);
            }
    }
    h->fd = mwj_tensors_fd(h->j);
    h->fend = mwj_tensors_end(h->j);
    return MW_OK;
}

/* Open mo->work_dir for this run and set ro up to continue after its last
 * recorded layer (*skip_run: every layer is recorded). */
static enum mw_status open_work_dir(struct quant_methods_src *h, const struct quant_opts *qo,
                                    struct calib_model *m, const struct calib_samples *smp,
                                    struct calib_run_opts *ro, bool *skip_run,
                                    struct mw_err *err)
{
    const struct quant_methods_opts *mo = h->mo;
    struct mwj_id id;
    struct mwj_open_info info;
    char msg[512];
    enum mw_status s = run_identity(h, m, smp, ro, &id, err);
    if (s != MW_OK) return s;
    if ((s = mwj_open(mo->work_dir, mo->resume, &id, &h->j, &info, err)) != MW_OK) return s;
    if ((s = restore_layers(h, err)) != MW_OK) return s;
    const uint32_t nl = h->hp->n_layer;
    if (info.dropped_bytes) {
        snprintf(msg, sizeof msg, "work dir %s: %llu bytes after the last complete record dropped "
                 "(%s)", mo->work_dir, (unsigned long long)info.dropped_bytes, info.dropped_why);
        if (qo->log) qo->log(qo->log_ud, QUANT_LOG_NOTICE, msg);
    }
    if (!info.resumed)
        snprintf(msg, sizeof msg, "work dir %s: a new journal (%s)", mo->work_dir,
                 mo->resume ? "none to resume there: starting at layer 0"
                            : "an interrupted run continues with --resume");
    else if (info.n_done >= nl)
        snprintf(msg, sizeof msg, "work dir %s: all %u layers are recorded; writing the output",
                 mo->work_dir, nl);
    else
        snprintf(msg, sizeof msg, "work dir %s: resuming at layer %u (%u of %u layers recorded)",
                 mo->work_dir, info.n_done, info.n_done, nl);
    say(qo, msg);
    *skip_run = info.n_done >= nl;
    ro->first_layer = info.n_done;
    if (info.n_done) {
        ro->load_hidden = mwj_load_hidden;
        ro->load_hidden_ud = h->j;
    }
    ro->on_layer = on_layer;
    ro->on_layer_ud = h;
    return MW_OK;
}

enum mw_status quant_methods_source(const struct quant_source *base, const struct quant_opts *qo,
                                    const struct quant_methods_opts *mo, struct quant_source *out,
                                    struct quant_methods_src **hp, struct mw_err *err)
{
    *hp = NULL;
    const uint64_t n = base->n_tensors;
    struct quant_methods_src *h = calloc(1, sizeof *h);
    struct quant_plan *plan = NULL;
    struct calib_model *m = NULL;
    struct calib_corpus *c = NULL;
    struct calib_samples *smp = NULL;
    struct calib_stats *st = NULL;
    enum mw_status s = MW_OK;
    if (!h) return MW_FAIL(err, MW_E_NOMEM, MW_ERR_OFF_NONE, "out of memory");
    h->base = base;
    h->mo = mo;
    h->fd = -1;
    h->fb[0].ti = h->fb[1].ti = h->fb[2].ti = -1;
    if (n > SIZE_MAX / sizeof(struct quant_tensor_desc) ||
        !(h->descs = malloc((size_t)(n ? n : 1) * sizeof *h->descs)) ||
        !(h->want = malloc((size_t)(n ? n : 1) * sizeof *h->want)) ||
        !(h->spilled = calloc((size_t)(n ? n : 1), sizeof *h->spilled)) ||
        !(h->off = calloc((size_t)(n ? n : 1), sizeof *h->off)) ||
        !(h->nbytes = calloc((size_t)(n ? n : 1), sizeof *h->nbytes)) ||
        !(h->hash = calloc((size_t)(n ? n : 1), sizeof *h->hash))) {
        s = MW_FAIL(err, MW_E_NOMEM, MW_ERR_OFF_NONE, "out of memory");
        goto out;
    }
    if (n) memcpy(h->descs, base->tensors, (size_t)n * sizeof *h->descs);
    for (uint64_t i = 0; i < n; i++) h->want[i] = UINT32_MAX;
    if ((s = quant_plan_build(base, qo, &plan, err)) != MW_OK) goto out;
    for (uint64_t i = 0; i < quant_plan_count(plan); i++) {
        const struct quant_plan_entry *e = quant_plan_get(plan, i);
        if (e->choice.type != e->src->type) h->want[e->src_index] = e->choice.type;
    }
    if ((s = calib_model_open(mo->model_path, &m, err)) != MW_OK) goto out;
    h->hp = calib_model_hparams(m);
    if ((s = calib_corpus_load(mo->corpus_path, CALIB_CORPUS_AUTO, &c, err)) != MW_OK) goto out;
    struct calib_sample_opts so = mo->samples;
    so.n_ctx_max = calib_model_hparams(m)->n_ctx_train;
    if ((s = calib_samples_build(c, calib_model_tok(m), &so, &smp, err)) != MW_OK) goto out;
    struct calib_run_opts ro = {.n_threads = mo->n_threads ? mo->n_threads : 1,
                                .on_group = on_group, .on_group_ud = h,
                                .on_layer = on_layer, .on_layer_ud = h,
                                .on_stage = mo->on_stage, .on_stage_ud = mo->on_stage_ud,
                                .scratch_dir = mo->work_dir};
    if (mo->max_memory) {
        /* the method's own buffers at their peak; calib gets the rest */
        const uint64_t mine = quant_methods_peak_bytes(calib_model_hparams(m), mo);
        ro.max_memory = mine < mo->max_memory ? mo->max_memory - mine : 1;
        const uint32_t spb = calib_run_batch_samples(m, smp, &ro);
        if (mine >= mo->max_memory || spb == 0) {
            /* refused before any work, with the least bound that runs: the
             * method's buffers and the lean calibration at one sample per batch */
            const uint64_t least = calib_run_peak_bytes(m, smp, &ro);
            mw_err_clear(err);
            mw_err_set_path(err, mo->model_path);
            s = MW_FAIL(err, MW_E_NOMEM, MW_ERR_OFF_NONE,
                        "--max-memory %llu bytes is too small: %s needs at least %llu bytes (its "
                        "buffers %llu, calibration %llu at one sample per batch, lean): use "
                        "fewer --samples or a shorter --seq-len, or raise --max-memory",
                        (unsigned long long)mo->max_memory, quant_method_name(mo->method),
                        (unsigned long long)(mine + least), (unsigned long long)mine,
                        (unsigned long long)least);
            goto out;
        }
        if (spb) {
            char msg[320];
            snprintf(msg, sizeof msg,
                     "--max-memory %llu bytes: the method's buffers %llu, calibration %llu at its "
                     "peak (%u samples per batch%s)",
                     (unsigned long long)mo->max_memory, (unsigned long long)mine,
                     (unsigned long long)calib_run_peak_bytes(m, smp, &ro), spb,
                     calib_run_hidden_on_disk(m, smp, &ro)
                         ? "; lean: hidden states, attention outputs and the layer's weights in "
                           "scratch files, one weight and one Hessian in memory at a time"
                         : "");
            say(qo, msg);
        }
    }
    bool skip_run = false; /* a work dir with every layer recorded */
    if (mo->resume && !mo->work_dir) {
        s = MW_FAIL(err, MW_E_USAGE, MW_ERR_OFF_NONE, "--resume needs --work-dir");
        goto out;
    }
    if (mo->work_dir && (s = open_work_dir(h, qo, m, smp, &ro, &skip_run, err)) != MW_OK)
        goto out;
    if (!skip_run && (s = calib_run(m, smp, &ro, &st, err)) != MW_OK) goto out;
    for (int k = 0; k < 3; k++)
        if (h->fb[k].ti >= 0) {
            s = MW_FAIL(err, MW_E_UNSUPPORTED, MW_ERR_OFF_NONE,
                        "tensor '%s': only %llu of its %llu rows were quantized",
                        base->tensors[h->fb[k].ti].name, (unsigned long long)h->fb[k].filled,
                        (unsigned long long)h->fb[k].rows);
            goto out;
        }
    if (uses_awq(mo->method)) awq_report(h, qo);
    if (h->output_note[0]) say(qo, h->output_note);
    if (st) time_report(h, qo, st); /* no calib_run: every layer was in the work dir */
    if (mo->work_dir) {
        char msg[512];
        snprintf(msg, sizeof msg, "work dir %s: every layer is recorded; it is kept (remove it "
                 "once the output is written)", mo->work_dir);
        say(qo, msg);
    }
    {
        const bool gq = uses_gptq(mo->method);
        snprintf(h->method_label, sizeof h->method_label, "%s",
                 mo->method == QUANT_METHOD_RTN ? "rtn+imatrix"
                 : mo->method == QUANT_METHOD_GPTQ_ACT ? "gptq"
                 : mo->method == QUANT_METHOD_AWQ_GPTQ_ACT ? "awq+gptq"
                                                          : quant_method_name(mo->method));
        char dp[48] = "";
        if (gq)
            snprintf(dp, sizeof dp, " damp=%g%s",
                     (double)(mo->gptq.damp > 0 ? mo->gptq.damp : 0.01f),
                     uses_act_order(mo) ? " act_order=static" : "");
        if (uses_round(mo->method)) { /* never with act_order: the same room */
            const size_t k = strlen(dp);
            snprintf(dp + k, sizeof dp - k, " round=cd%u fallback=%u", QUANT_ROUND_SWEEPS,
                     h->round_fallbacks);
        }
        const bool moe = h->hp->n_expert > 0;
        char xp[80] = ""; /* MoE: how many expert matrices took each path */
        if (moe)
            snprintf(xp, sizeof xp, " experts=gptq:%u,rtn:%u,unrouted:%u", h->x_gptq, h->x_rtn,
                     h->x_unrouted);
        snprintf(h->method_params, sizeof h->method_params, "samples=%u seq_len=%u%s%s%s",
                 st ? calib_stats_n_samples(st) : calib_samples_count(smp),
                 calib_samples_seq_len(smp), dp,
                 !uses_awq(mo->method) ? ""
                 : moe                 ? (awq_out_folds(h) ? " awq=attn_norm,attn_v,ffn_up"
                                                           : " awq=attn_norm")
                 : awq_out_folds(h)    ? " awq=attn_norm,ffn_norm,attn_v,ffn_up"
                                       : " awq=attn_norm,ffn_norm",
                 xp);
    }
    *out = *base;
    out->method = h->method_label;
    out->method_params = h->method_params;
    out->tensors = h->descs;
    out->read = src_read;
    out->data = src_data;
    out->release = src_release;
    out->ud = h;
    *hp = h;
out:
    calib_stats_free(st);
    calib_samples_free(smp);
    calib_corpus_free(c);
    calib_model_close(m);
    quant_plan_free(plan);
    if (s != MW_OK) quant_methods_source_free(h);
    return s;
}
