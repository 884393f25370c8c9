/*
 * methods/methods_output.c — output.weight under the --corpus method:
 * GPTQ and/or learned rounding on the Hessian of the final hidden states
 * after output_norm, over every calibration row, the matrix read from the
 * source OUTPUT_CHUNK_ROWS rows at a time (methods_int.h).
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "calib/mw_blas.h"
#include "core/mw_pool.h"
#include "methods/methods.h"
#include "methods/methods_int.h"
#include "quant/quant_alloc.h"

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
    uint64_t fill;      /* ... bytes in it */
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
        if (s == MW_OK) qm_round_tally(h, &rs);
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

/* output.weight under the method (GPTQ, learned rounding) on the Hessian
 * of its input: the final hidden states after output_norm, over every
 * calibration row. Runs in the last layer's on_layer, after the layer is
 * final (the hidden states are the quantized model's) and before a work
 * dir records the layer: a resumed run restores it from the journal. The
 * matrix is read from the source (mapped, or streamed: an HF checkpoint)
 * OUTPUT_CHUNK_ROWS rows at a time. Left to the ordinary pipeline
 * (importance-weighted rounding) when there is none (tied to token_embd)
 * or its type is not one the method can place; output_note says which. */
enum mw_status qm_output_method(struct quant_methods_src *h, struct calib_layer *ly,
                                    struct mw_err *err)
{
    const struct quant_methods_opts *mo = h->mo;
    const struct quant_source *src = h->base;
    const bool gq = quant_method_uses_gptq(mo->method), rd = quant_method_uses_round(mo->method);
    if (!gq && !rd) return MW_OK;
    const int64_t ti = qm_find_tensor(h, "output.weight");
    const int64_t ni = qm_find_tensor(h, "output_norm.weight");
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
    float *nw = NULL;
    float *Y = malloc((size_t)(mr * E) * sizeof(float));
    float *w = malloc((size_t)(chunk * n_in) * sizeof(float));
    float *w0 = malloc((size_t)(chunk * n_in) * sizeof(float));
    uint8_t *q = malloc((size_t)nb);
    struct mw_pool *pool = NULL;
    enum mw_status s = MW_OK;
    if (!H || !U || !imp || !perm || !Y || !w || !w0 || !q) {
        s = MW_FAIL(err, MW_E_NOMEM, MW_ERR_OFF_NONE,
                    "tensor 'output.weight': out of memory for its method");
        goto out;
    }
    const unsigned nt = mo->n_threads ? mo->n_threads : 1;
    if ((s = mw_pool_init(nt, &pool, err)) != MW_OK) goto out;
    uint64_t n_norm_rows; /* output_norm's weights (mapped, or read); the first E */
    if ((s = quant_alloc_read_f32(src, (uint64_t)ni, &nw, &n_norm_rows, err)) != MW_OK) goto out;
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
    if ((s = qm_spill(h, ti, q, nb, err)) != MW_OK) goto out;
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
    free(Y);
    free(w);
    free(w0);
    free(q);
    return s;
}
