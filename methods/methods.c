/*
 * methods/methods.c — the calibration-driven quantization driver
 * (methods.h): the method registry; plan -> calib_run with a per-group
 * callback that quantizes the group's weights (GPTQ, importance-weighted
 * rounding, learned rounding) and writes the dequantized values back -> a
 * source whose layer tensors are already quantized, read back from the
 * spill file. AWQ's folds are in methods_awq.c, the output matrix in
 * methods_output.c, the work dir of resumable runs in methods_workdir.c
 * (their shared state: struct quant_methods_src, methods_int.h).
 */
#define _POSIX_C_SOURCE 200809L
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define XXH_INLINE_ALL
#include <xxhash.h>

#include "core/mw_file.h"
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

int64_t qm_find_tensor(const struct quant_methods_src *h, const char *name)
{
    for (uint64_t i = 0; i < h->base->n_tensors; i++)
        if (strcmp(h->base->tensors[i].name, name) == 0) return (int64_t)i;
    return -1;
}

enum mw_status qm_spill(struct quant_methods_src *h, int64_t ti, const uint8_t *b, uint64_t n,
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

bool qm_uses_awq(enum quant_method m)
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
bool qm_uses_act_order(const struct quant_methods_opts *mo)
{
    return mo->gptq.act_order || mo->method == QUANT_METHOD_GPTQ_ACT ||
           mo->method == QUANT_METHOD_AWQ_GPTQ_ACT;
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
        if ((s = qm_spill(h, ti, q, rb * cw->n_out, err)) != MW_OK) return s;
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
    s = qm_spill(h, ti, f->b, rb * f->rows, err);
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

void qm_round_tally(struct quant_methods_src *h, const struct quant_round_stats *rs)
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
    qm_round_tally(h, &rs);
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
    const int64_t ti = qm_find_tensor(h, cw.name);
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
        go.act_order = qm_uses_act_order(mo);
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

void qm_say(const struct quant_opts *qo, const char *msg)
{
    if (qo->log) qo->log(qo->log_ud, QUANT_LOG_INFO, msg);
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
    qm_say(qo, msg);
    if (uses_round(h->mo->method)) {
        snprintf(msg, sizeof msg,
                 "round: learned rounding on %u tensors: %llu levels moved, layer output error "
                 "%.6g -> %.6g (%.1f%% lower)%s",
                 h->round_tensors, (unsigned long long)h->round_flips, h->round_before,
                 h->round_after,
                 h->round_before > 0 ? 100.0 * (1.0 - h->round_after / h->round_before) : 0.0,
                 h->round_fallbacks ? "; some fell back to the method before it" : "");
        qm_say(qo, msg);
        if (h->round_fallbacks) {
            snprintf(msg, sizeof msg,
                     "round: %u tensors kept the result of %s (a non-finite value in the "
                     "descent, or no lower error): recorded in memwall.quant.method_params",
                     h->round_fallbacks,
                     uses_gptq(h->mo->method) ? "GPTQ" : "importance-weighted rounding");
            qm_say(qo, msg);
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
        for (int k = 0; k < CALIB_G_ALL; k++) free_factor(h, k); /* nor factors */
    }
    /* a MoE layer: ffn_norm feeds the router too (no fold there); up -> down
     * folds per expert, on the rows routed to it, and for the shared expert */
    /* gemma4: ffn_norm feeds the dense MLP alone (that folds); its experts read
     * pre_ffw_norm_2, folded once for all of them in the CALIB_EXPERT_ALL call
     * (nothing is quantized there) */
    const bool g4 = h->hp->arch == RT_ARCH_GEMMA4;
    if (calib_layer_expert(ly) == CALIB_EXPERT_ALL)
        return qm_uses_awq(h->mo->method) ? qm_awq_group(h, ly, g, err) : MW_OK;
    const bool moe_in = calib_layer_n_expert(ly) > 0 && g == CALIB_G_FFN_IN &&
                        !(g4 && calib_layer_expert(ly) < 0);
    if (moe_in && !g4 && qm_uses_awq(h->mo->method) && calib_layer_expert(ly) == 0)
        qm_awq_skip(h, g, calib_layer_index(ly), /* once per layer */
                    "mixture of experts: the router reads ffn_norm too");
    /* an expert with too few routed rows for GPTQ (quant_one) gets no fold either */
    const bool few = calib_layer_expert(ly) >= 0 &&
                     calib_layer_expert_rows(ly) < (calib_layer_group_n_in(ly, g) + 3) / 4;
    if (!moe_in && few && qm_uses_awq(h->mo->method))
        qm_awq_skip(h, g, calib_layer_index(ly), "an expert with too few routed rows");
    else if (!moe_in && g < CALIB_G_COUNT /* gemma4's PLE groups: no fold */ &&
             qm_uses_awq(h->mo->method) && (s = qm_awq_group(h, ly, g, err)) != MW_OK)
        return s;
    const bool defer = qm_awq_out_folds(h);
    if (defer && (g == CALIB_G_ATTN_OUT || g == CALIB_G_FFN_DOWN) &&
        qm_awq_producer(ly, g) != CALIB_W_COUNT) {
        if ((s = quant_one(h, ly, qm_awq_producer(ly, g), err)) != MW_OK) return s; /* after the fold */
        free_factor(h, (int)g - 1); /* the input group's factor: its last weight is done */
    }
    for (int wk = 0; wk < CALIB_W_COUNT; wk++) {
        if (calib_wkind_group((enum calib_wkind)wk) != g) continue;
        if (!calib_layer_has_weight(ly, (enum calib_wkind)wk)) continue;
        if (defer && (wk == CALIB_W_V || wk == CALIB_W_UP)) continue; /* done in the next stage */
        if ((s = quant_one(h, ly, (enum calib_wkind)wk, err)) != MW_OK) return s;
    }
    if (g == CALIB_G_ATTN_OUT || g == CALIB_G_FFN_DOWN) free_factor(h, (int)g); /* o, down done */
    if (g >= CALIB_G_PLE_IN) free_factor(h, (int)g); /* inp_gate, proj: one weight each */
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
    for (int g = 0; g < CALIB_G_ALL; g++) {
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
        if (qm_uses_act_order(mo)) b += 12 * wel + 5 * nin; /* permuted weights + grid */
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
    if (qm_uses_awq(mo->method)) { /* search buffers: 3 floats + 2 bytes per searched element */
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

/* on_layer: after the last layer the output matrix; with a work dir the
 * layer's journal record (which then holds the output matrix too). */
static enum mw_status on_layer(void *ud, struct calib_layer *ly, struct mw_err *err)
{
    struct quant_methods_src *h = ud;
    enum mw_status s;
    if (calib_layer_index(ly) + 1 == h->hp->n_layer && (s = qm_output_method(h, ly, err)) != MW_OK)
        return s;
    return h->mo->work_dir ? qm_on_layer_journal(h, ly, err) : MW_OK;
}

/* --max-memory: the method's own buffers at their peak; calib gets the rest
 * (ro->max_memory). Too small for one sample per batch: MW_E_NOMEM before
 * any work, naming the least bound that runs. */
static enum mw_status split_max_memory(struct quant_methods_src *h, const struct quant_opts *qo,
                                       struct calib_model *m, const struct calib_samples *smp,
                                       struct calib_run_opts *ro, struct mw_err *err)
{
    const struct quant_methods_opts *mo = h->mo;
    enum mw_status s = MW_OK;
    /* the method's own buffers at their peak; calib gets the rest */
    const uint64_t mine = quant_methods_peak_bytes(h->hp, mo);
    ro->max_memory = mine < mo->max_memory ? mo->max_memory - mine : 1;
    const uint32_t spb = calib_run_batch_samples(m, smp, ro);
    if (mine >= mo->max_memory || spb == 0) {
        /* refused before any work, with the least bound that runs: the
         * method's buffers and the lean calibration at one sample per batch */
        const uint64_t least = calib_run_peak_bytes(m, smp, ro);
        mw_err_clear(err);
        mw_err_set_path(err, mo->model_path);
        s = MW_FAIL(err, MW_E_NOMEM, MW_ERR_OFF_NONE,
                    "--max-memory %llu bytes is too small: %s needs at least %llu bytes (its "
                    "buffers %llu, calibration %llu at one sample per batch, lean): use "
                    "fewer --samples or a shorter --seq-len, or raise --max-memory",
                    (unsigned long long)mo->max_memory, quant_method_name(mo->method),
                    (unsigned long long)(mine + least), (unsigned long long)mine,
                    (unsigned long long)least);
        return s;
    }
    if (spb) {
        char msg[320];
        snprintf(msg, sizeof msg,
                 "--max-memory %llu bytes: the method's buffers %llu, calibration %llu at its "
                 "peak (%u samples per batch%s)",
                 (unsigned long long)mo->max_memory, (unsigned long long)mine,
                 (unsigned long long)calib_run_peak_bytes(m, smp, ro), spb,
                 calib_run_hidden_on_disk(m, smp, ro)
                     ? "; lean: hidden states, attention outputs and the layer's weights in "
                       "scratch files, one weight and one Hessian in memory at a time"
                     : "");
        qm_say(qo, msg);
    }
    return s;
}

/* memwall.quant.method and memwall.quant.method_params of the output. */
static void set_method_meta(struct quant_methods_src *h, uint32_t n_samples, uint32_t seq_len)
{
    const struct quant_methods_opts *mo = h->mo;
    snprintf(h->method_label, sizeof h->method_label, "%s",
             mo->method == QUANT_METHOD_RTN ? "rtn+imatrix"
             : mo->method == QUANT_METHOD_GPTQ_ACT ? "gptq"
             : mo->method == QUANT_METHOD_AWQ_GPTQ_ACT ? "awq+gptq"
                                                      : quant_method_name(mo->method));
    char dp[48] = "";
    if (uses_gptq(mo->method))
        snprintf(dp, sizeof dp, " damp=%g%s",
                 (double)(mo->gptq.damp > 0 ? mo->gptq.damp : 0.01f),
                 qm_uses_act_order(mo) ? " act_order=static" : "");
    if (uses_round(mo->method)) { /* never with act_order: the same room */
        const size_t k = strlen(dp);
        snprintf(dp + k, sizeof dp - k, " round=cd%u fallback=%u", QUANT_ROUND_SWEEPS,
                 h->round_fallbacks);
    }
    char xp[80] = ""; /* MoE: how many expert matrices took each path */
    if (h->hp->n_expert > 0)
        snprintf(xp, sizeof xp, " experts=gptq:%u,rtn:%u,unrouted:%u", h->x_gptq, h->x_rtn,
                 h->x_unrouted);
    snprintf(h->method_params, sizeof h->method_params, "samples=%u seq_len=%u%s%s%s",
             n_samples, seq_len, dp, qm_awq_params(h), xp);
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
                                .scratch_dir = mo->work_dir,
                                .ple_groups = true}; /* GPTQ / rounding on inp_gate, proj */
    if (mo->max_memory && (s = split_max_memory(h, qo, m, smp, &ro, err)) != MW_OK) goto out;
    bool skip_run = false; /* a work dir with every layer recorded */
    if (mo->resume && !mo->work_dir) {
        s = MW_FAIL(err, MW_E_USAGE, MW_ERR_OFF_NONE, "--resume needs --work-dir");
        goto out;
    }
    if (mo->work_dir && (s = qm_open_work_dir(h, qo, m, smp, &ro, &skip_run, err)) != MW_OK)
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
    if (qm_uses_awq(mo->method)) qm_awq_report(h, qo);
    if (h->output_note[0]) qm_say(qo, h->output_note);
    if (st) time_report(h, qo, st); /* no calib_run: every layer was in the work dir */
    if (mo->work_dir) {
        char msg[512];
        snprintf(msg, sizeof msg, "work dir %s: every layer is recorded; it is kept (remove it "
                 "once the output is written)", mo->work_dir);
        qm_say(qo, msg);
    }
    set_method_meta(h, st ? calib_stats_n_samples(st) : calib_samples_count(smp),
                    calib_samples_seq_len(smp));
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
