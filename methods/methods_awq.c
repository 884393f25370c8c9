/*
 * methods/methods_awq.c — AWQ (activation-aware scaling) for the groups whose
 * input is an RMSNorm output (ATTN_IN: q/k/v after attn_norm; FFN_IN:
 * gate/up after ffn_norm). Per input channel j, s_j = mean|x_j|^alpha
 * (normalized so that max(s)·min(s) = 1); for each alpha of the grid the
 * group's weights are scaled (columns × s), quantized to their target types,
 * unscaled, and the output error Σ_w (w - q)ᵀ H (w - q) = ||X Wᵀ - X Qᵀ||²
 * on the calibration rows measured; the best alpha (alpha = 0 is the plain
 * model, so AWQ never loses by this measure) is folded: norm /= s, columns
 * *= s — the float model's outputs are unchanged, llama.cpp sees ordinary
 * tensors. Wide weights are searched on QUANT_AWQ_SEARCH_ROWS evenly spaced
 * output rows (methods.h).
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "calib/mw_blas.h"
#include "methods/methods.h"
#include "methods/methods_int.h"

/* Σ_rows dᵀ H d with d = w - q, through one GEMM (D H, fixed tiles: the
 * same bits for any thread count) and row dots in order. */
static double out_err(struct mw_pool *pool, const float *D, uint64_t n_out, uint64_t n_in,
                      const float *H, float *tmp)
{
    mw_gemm(pool, false, false, n_out, n_in, n_in, 1.0f, D, n_in, H, n_in, 0.0f, tmp, n_in, 0);
    double e = 0;
    for (uint64_t i = 0; i < n_out * n_in; i++) e += (double)D[i] * tmp[i];
    return e;
}

uint64_t quant_awq_search_rows(uint64_t n_out, uint64_t n_in)
{
    uint64_t r = n_in ? ((uint64_t)1 << 33) / n_in / n_in : QUANT_AWQ_SEARCH_ROWS;
    if (r > QUANT_AWQ_SEARCH_ROWS) r = QUANT_AWQ_SEARCH_ROWS;
    if (r < 64) r = 64;
    return r < n_out ? r : n_out;
}

void quant_awq_scales(const double *mean_abs, uint64_t n, float alpha, float *s)
{
    double lo = INFINITY, hi = 0;
    for (uint64_t j = 0; j < n; j++) {
        double v = mean_abs[j] > 1e-8 ? pow(mean_abs[j], alpha) : pow(1e-8, alpha);
        s[j] = (float)v;
        if (v < lo) lo = v;
        if (v > hi) hi = v;
    }
    const double norm = sqrt(lo * hi);
    for (uint64_t j = 0; j < n; j++) s[j] = (float)(s[j] / norm);
}

enum mw_status quant_awq_group(const struct quant_awq_group *G, float *best_alpha,
                               struct mw_err *err)
{
    const uint64_t n_in = G->n_in;
    uint64_t maxw = 0;
    for (unsigned k = 0; k < G->n_w; k++) {
        uint64_t e;
        const uint64_t no = quant_awq_search_rows(G->n_out[k], n_in);
        if (!mw_mul_u64(no, n_in, &e))
            return MW_FAIL(err, MW_E_VALUE, MW_ERR_OFF_NONE, "AWQ: size overflows");
        if (e > maxw) maxw = e;
    }
    if (maxw > SIZE_MAX / 8 || n_in > INT32_MAX)
        return MW_FAIL(err, MW_E_VALUE, MW_ERR_OFF_NONE, "AWQ: size overflows");
    float *ws = malloc((size_t)maxw * sizeof(float));
    float *tmp = malloc((size_t)maxw * sizeof(float));
    float *wsel = malloc((size_t)maxw * sizeof(float));
    uint8_t *qb = malloc((size_t)maxw * 2 + 64); /* >= any type's bytes per element * count */
    float *s = malloc((size_t)n_in * sizeof(float));
    float *imp = malloc((size_t)n_in * sizeof(float));
    struct mw_pool *pool = NULL;
    enum mw_status st = MW_OK;
    if (!ws || !tmp || !wsel || !qb || !s || !imp) {
        st = MW_FAIL(err, MW_E_NOMEM, MW_ERR_OFF_NONE, "AWQ: out of memory");
        goto done;
    }
    mw_blas_init();
    if ((st = mw_pool_init(G->n_threads ? G->n_threads : 1, &pool, err)) != MW_OK) goto done;
    double best = INFINITY;
    float ba = 0;
    const int n_grid = G->n_grid ? G->n_grid : 20;
    for (int gi = 0; gi <= n_grid; gi++) {
        const float alpha = (float)gi / (float)n_grid;
        quant_awq_scales(G->mean_abs, n_in, alpha, s);
        for (uint64_t j = 0; j < n_in; j++) imp[j] = G->imp[j] / (s[j] * s[j]);
        double e = 0;
        for (unsigned k = 0; k < G->n_w && st == MW_OK; k++) {
            const uint64_t nall = G->n_out[k];
            const uint64_t no = quant_awq_search_rows(nall, n_in);
            for (uint64_t r = 0; r < no; r++) {
                /* rows evenly spaced over the weight (all of them when it has few) */
                const float *wr = G->w[k] + (r * nall / no) * n_in;
                for (uint64_t j = 0; j < n_in; j++) {
                    ws[r * n_in + j] = wr[j] * s[j];
                    wsel[r * n_in + j] = wr[j];
                }
            }
            const float *w = wsel;
            st = quant_rows(G->type[k], ws, no, n_in, imp, qb, G->n_threads ? G->n_threads : 1,
                            err);
            if (st != MW_OK) break;
            quant_traits_get(G->type[k])->to_float(qb, tmp, no * n_in);
            for (uint64_t r = 0; r < no; r++)
                for (uint64_t j = 0; j < n_in; j++)
                    ws[r * n_in + j] = w[r * n_in + j] - tmp[r * n_in + j] / s[j];
            e += out_err(pool, ws, no, n_in, G->H, tmp);
        }
        if (st != MW_OK) goto done;
        if (e < best) {
            best = e;
            ba = alpha;
        }
    }
    *best_alpha = ba;
done:
    mw_pool_free(pool);
    free(ws);
    free(tmp);
    free(wsel);
    free(qb);
    free(s);
    free(imp);
    return st;
}

/* --- the folds of the --corpus driver (methods_int.h) --- */

/* AWQ fold names per group (the log) */
static const char *const fold_name[CALIB_G_COUNT] = {
    "attn_norm -> q/k/v", "v -> attn_output", "ffn_norm -> gate/up", "up -> ffn_down"};
/* the same in a model with gated delta-net layers (qwen35, qwen35moe,
 * qwen3next): which tensors each fold involves there */
static const char *const fold_name_ssm[CALIB_G_COUNT] = {
    "attn_norm -> q/k/v, attn_qkv/attn_gate/ssm_beta/ssm_alpha",
    "v -> attn_output, ssm_norm -> ssm_out", "post_attention_norm -> gate/up",
    "up -> ffn_down"};

void qm_awq_skip(struct quant_methods_src *h, enum calib_group g, uint32_t il, const char *why)
{
    struct awq_tally *t = &h->tally[g];
    if (t->skipped++ == 0) snprintf(t->why, sizeof t->why, "layer %u: %s", il, why);
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
    } else if (qm_awq_producer(ly, g) == CALIB_W_COUNT) {
        /* a delta-net layer: ssm_out reads rmsnorm(o) * ssm_norm * silu(z), linear in
         * ssm_norm, whose channel j serves every value head */
        float *norm;
        if ((s = calib_layer_norm(ly, CALIB_NORM_SSM, true, &norm, err)) != MW_OK) return s;
        for (uint64_t j = 0; j < head_dim; j++) norm[j] /= sc[j];
    } else {
        struct calib_weight pw;
        if ((s = calib_layer_weight(ly, qm_awq_producer(ly, g), true, &pw, err)) != MW_OK)
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
        if (!calib_layer_has_weight(ly, (enum calib_wkind)wk)) continue;
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
        if (hp->arch == RT_ARCH_GEMMA4)
            no = "gemma4's v is RMS-normed per head without a weight (a scale on v's rows "
                 "changes what the norm divides by; the shared-KV layers have no v)";
        else if (hp->n_head_kv == 0 || hp->n_head % hp->n_head_kv != 0)
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

bool qm_awq_out_folds(const struct quant_methods_src *h)
{
    return qm_uses_awq(h->mo->method) && !h->mo->awq_in_only;
}

/* The weight whose rows make group g's input (ATTN_OUT: v, FFN_DOWN: up);
 * CALIB_W_COUNT in a delta-net layer's ATTN_OUT, made by ssm_norm. */
enum calib_wkind qm_awq_producer(const struct calib_layer *ly, enum calib_group g)
{
    if (g == CALIB_G_ATTN_OUT && !calib_layer_has_weight(ly, CALIB_W_V)) return CALIB_W_COUNT;
    return g == CALIB_G_ATTN_OUT ? CALIB_W_V : CALIB_W_UP;
}

/* the GGUF name of layer il's FFN norm: qwen35 / qwen35moe / qwen3next call it
 * post_attention_norm */
static const char *ffn_norm_name(const struct rt_hparams *hp)
{
    return hp->full_attn_interval ? "post_attention_norm" : "ffn_norm";
}

/* AWQ on group g: search alpha for the group's weights (q/k/v, o, gate/up or
 * down), then fold: the input is divided by s where it is made (ATTN_IN /
 * FFN_IN: the norm, written to the output as F32; ATTN_OUT: v's rows — with
 * grouped-query attention one v row feeds n_head/n_head_kv q heads, so
 * their channels share one scale; FFN_DOWN: up's rows, since silu(gate)*up
 * is linear in up) and the group's columns multiplied by s. Sets
 * h->s_in[g] when it folds. */
enum mw_status qm_awq_group(struct quant_methods_src *h, struct calib_layer *ly,
                                enum calib_group g, struct mw_err *err)
{
    enum mw_status s;
    const bool in_norm = g == CALIB_G_ATTN_IN || g == CALIB_G_FFN_IN;
    /* gemma4: refused before the producer is asked for (shared-KV layers have no v) */
    char why_g4[160];
    if (!in_norm && !quant_awq_fold_legal(h->hp, g, why_g4, sizeof why_g4) &&
        h->hp->arch == RT_ARCH_GEMMA4) {
        qm_awq_skip(h, g, calib_layer_index(ly), why_g4);
        return MW_OK;
    }
    struct quant_awq_group G = {.n_in = calib_layer_group_n_in(ly, g),
                                .n_threads = h->mo->n_threads};
    for (int wk = 0; wk < CALIB_W_COUNT; wk++) {
        if (calib_wkind_group((enum calib_wkind)wk) != g) continue;
        if (!calib_layer_has_weight(ly, (enum calib_wkind)wk)) continue;
        struct calib_weight cw;
        if ((s = calib_layer_weight(ly, (enum calib_wkind)wk, false, &cw, err)) != MW_OK) return s;
        const int64_t ti = qm_find_tensor(h, cw.name);
        if (ti < 0 || h->want[ti] == UINT32_MAX || G.n_w == QUANT_AWQ_MAX_W) { /* not all quantized */
            qm_awq_skip(h, g, calib_layer_index(ly), "a weight of the group stays unquantized");
            return MW_OK;
        }
        const struct gguf_type_info *inf = gguf_type_get(h->want[ti]);
        if (!inf || cw.n_in % inf->blck) {
            qm_awq_skip(h, g, calib_layer_index(ly), "row length not a multiple of the block");
            return MW_OK;
        }
        G.w[G.n_w] = cw.w;
        G.n_out[G.n_w] = cw.n_out;
        G.type[G.n_w++] = h->want[ti];
    }
    if (G.n_w == 0) return MW_OK;
    int64_t ni = -1; /* the norm tensor (in_norm, or a delta-net layer's ssm_norm) */
    const struct rt_hparams *hp = h->hp;
    const uint64_t hd = hp->head_dim, grp = hp->n_head_kv ? hp->n_head / hp->n_head_kv : 0;
    const bool ssm_out = qm_awq_producer(ly, g) == CALIB_W_COUNT;
    if (in_norm || ssm_out) {
        char nname[64];
        snprintf(nname, sizeof nname, "blk.%u.%s.weight", calib_layer_index(ly),
                 ssm_out                                       ? "ssm_norm"
                 : g == CALIB_G_ATTN_IN                        ? "attn_norm"
                 : calib_layer_expert(ly) == CALIB_EXPERT_ALL ? "pre_ffw_norm_2"
                                                               : ffn_norm_name(hp));
        ni = qm_find_tensor(h, nname);
        if (ni < 0 || h->base->tensors[ni].type != GGUF_TYPE_F32) {
            qm_awq_skip(h, g, calib_layer_index(ly), "the norm is not stored as F32");
            return MW_OK;
        }
    } else {
        char why_s[160];
        if (!quant_awq_fold_legal(hp, g, why_s, sizeof why_s)) {
            qm_awq_skip(h, g, calib_layer_index(ly), why_s);
            return MW_OK;
        }
        /* the producer must be quantized here (else its rescaled rows would
         * never reach the file) and have no bias */
        struct calib_weight pw;
        if ((s = calib_layer_weight(ly, qm_awq_producer(ly, g), false, &pw, err)) != MW_OK) return s;
        const int64_t pi = qm_find_tensor(h, pw.name);
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
        if ((s = calib_layer_weight_release(ly, qm_awq_producer(ly, g), err)) != MW_OK) return s;
        if (why) {
            qm_awq_skip(h, g, calib_layer_index(ly), why);
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
    const uint64_t S = hp->ssm_d_state, Hv = hp->ssm_dt_rank;
    if (ssm_out) /* one scale per ssm_norm channel: the mean over the value heads */
        for (uint64_t d = 0; d < S; d++) {
            double m = 0;
            for (uint64_t vh = 0; vh < Hv; vh++) m += ma[vh * S + d];
            for (uint64_t vh = 0; vh < Hv; vh++) ma[vh * S + d] = m / (double)Hv;
        }
    else if (g == CALIB_G_ATTN_OUT && grp > 1) /* one scale per v row: mean over its q heads */
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
    s = quant_awq_fold(ly, g, sc, hp->n_head_kv ? (uint32_t)grp : 1,
                       (uint32_t)(ssm_out ? S : hd), err);
    if (s == MW_OK && (in_norm || ssm_out)) { /* the folded norm goes into the file as F32 */
        float *norm;
        const uint64_t nn = ssm_out ? S : G.n_in;
        uint8_t *nb = malloc((size_t)nn * sizeof(float));
        if (!nb) s = MW_FAIL(err, MW_E_NOMEM, MW_ERR_OFF_NONE, "out of memory");
        if (s == MW_OK)
            s = calib_layer_norm(ly, ssm_out ? CALIB_NORM_SSM
                                 : g == CALIB_G_ATTN_IN ? CALIB_NORM_ATTN : CALIB_NORM_FFN,
                                 false, &norm, err);
        if (s == MW_OK) {
            for (uint64_t j = 0; j < nn; j++) {
                uint32_t u;
                memcpy(&u, &norm[j], 4);
                mw_put_le32(nb + 4 * j, u);
            }
            s = qm_spill(h, ni, nb, nn * sizeof(float), err);
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

/* The AWQ log: per fold what happened over the layers and why a fold was
 * left out; then what the family's structure allows and why (the folds are
 * exact rewrites of the float model; what is not listed is not touched). */
void qm_awq_report(const struct quant_methods_src *h, const struct quant_opts *qo)
{
    const struct rt_hparams *hp = h->hp;
    char msg[512];
    for (int g = 0; g < CALIB_G_COUNT; g++) {
        const struct awq_tally *t = &h->tally[g];
        const bool off = (g == CALIB_G_ATTN_OUT || g == CALIB_G_FFN_DOWN) && h->mo->awq_in_only;
        if (off) {
            snprintf(msg, sizeof msg, "awq: %s: skipped in every layer (AWQ on the norms' "
                     "inputs only)", hp->full_attn_interval ? fold_name_ssm[g] : fold_name[g]);
        } else {
            /* a MoE layer folds up -> down once per expert (and shared expert) */
            const bool per_x = hp->n_expert && g == CALIB_G_FFN_DOWN;
            /* gemma4's experts: pre_ffw_norm_2 -> ffn_gate_up_exps once a layer too */
            const bool g4x = hp->n_expert && hp->arch == RT_ARCH_GEMMA4 && g == CALIB_G_FFN_IN;
            const uint32_t of =
                per_x ? hp->n_layer * (hp->n_expert + (hp->n_ff_shexp ? 1 : 0))
                      : hp->n_layer * (g4x ? 2 : 1);
            int k = snprintf(msg, sizeof msg, "awq: %s%s: folded in %u of %u %s",
                             hp->full_attn_interval ? fold_name_ssm[g] : fold_name[g],
                             g4x ? ", pre_ffw_norm_2 -> ffn_gate_up_exps (one scale for all "
                                   "experts)" : "",
                             t->folded, of,
                             per_x ? "experts over the layers"
                             : g4x ? "folds over the layers (2 a layer)"
                                   : "layers");
            if (k > 0 && (size_t)k < sizeof msg && t->no_gain)
                k += snprintf(msg + k, sizeof msg - (size_t)k,
                              ", %u without gain (alpha 0: left as is)", t->no_gain);
            if (k > 0 && (size_t)k < sizeof msg && t->skipped)
                snprintf(msg + k, sizeof msg - (size_t)k, ", skipped in %u (%s)", t->skipped,
                         t->why);
        }
        qm_say(qo, msg);
    }
    if (hp->qk_norm)
        qm_say(qo, "awq: attn_norm -> q/k/v stays exact with the per-head q/k RMSNorm "
                "(attn_q_norm/attn_k_norm act on Wq x, Wk x, which the fold leaves unchanged); "
                "attn_q_norm/attn_k_norm themselves are not folded into (their input is a "
                "projection's output, normalized per head)");
    if (hp->post_norms)
        qm_say(qo, "awq: post_attention_norm and post_ffw_norm are skipped: they normalize the "
                "block outputs (no quantized weight reads them) and are written as they are");
    if (hp->arch == RT_ARCH_GEMMA2 || hp->arch == RT_ARCH_GEMMA3)
        qm_say(qo, "awq: gemma's (1 + w) norms are folded in their GGUF form (w + 1, the "
                "multiplier llama.cpp applies): attn_norm and ffn_norm (pre_feedforward) are "
                "divided by s and written as F32 multipliers, no +1 is added or removed");
    if (hp->arch == RT_ARCH_GEMMA4 && hp->n_embd_per_layer)
        qm_say(qo, "awq: gemma4: inp_gate and proj are not folded (inp_gate reads the un-normed "
                "residual, proj reads gelu(inp_gate x) times the per-layer input: no norm or "
                "linear producer to fold into); they are quantized as any matrix (with GPTQ "
                "and learned rounding where the method has them; per_layer_model_proj is "
                "never quantized)");
    if (hp->arch == RT_ARCH_GEMMA4 && hp->n_kv_shared)
        qm_say(qo, "awq: gemma4: the shared-KV layers' attn_norm -> q folds q alone (their k and v "
                "are an earlier layer's)");
    if (hp->act == RT_ACT_GELU_TANH)
        qm_say(qo, "awq: up -> ffn_down is exact with GELU-tanh gating: gelu(gate x) * (up x) is "
                "linear in up's rows");
    if (hp->fused_qkv)
        qm_say(qo, "awq: fused attn_qkv: its q, k and v rows take the attn_norm scales together; "
                "v -> attn_output rescales the v rows of attn_qkv");
    if (hp->fused_gate_up)
        qm_say(qo, "awq: fused ffn_up (gate rows, then up rows): ffn_norm scales both halves; up "
                "-> ffn_down rescales the up half only");
    if (hp->full_attn_interval) {
        qm_say(qo, "awq: gated delta net: attn_norm feeds attn_qkv, attn_gate, ssm_beta and "
                "ssm_alpha (qwen3next: ssm_ba), all linear in it: folded together or not at all; "
                "ssm_out reads rmsnorm(o) * ssm_norm * silu(z): folded into ssm_norm, one scale "
                "per channel shared by the value heads (the mean of their |x|)");
        qm_say(qo, "awq: skipped in the delta net: attn_qkv -> conv (the conv, SiLU and the L2 "
                "norms of q and k are not linear in attn_qkv's rows), attn_gate -> ssm_out (silu(z) "
                "is not linear in z), v -> ssm_out (the gated RMSNorm divides the scale out), "
                "ssm_beta / ssm_alpha (read through sigmoid / softplus, no weight reads them)");
        qm_say(qo, "awq: gated attention: v -> attn_output stays exact: the output gate "
                "sigmoid(gate) multiplies the attention output elementwise and does not depend "
                "on v; the gate rows of attn_q take the attn_norm scales with the q rows");
    }
    if (hp->tied_output)
        qm_say(qo, "awq: token_embd (tied output) is not scaled: it is no linear weight of a "
                "layer");
}

const char *qm_awq_params(const struct quant_methods_src *h)
{
    if (!qm_uses_awq(h->mo->method)) return "";
    if (h->hp->n_expert > 0) /* a MoE layer: no fold into ffn_norm (the router reads it) */
        return qm_awq_out_folds(h) ? " awq=attn_norm,attn_v,ffn_up" : " awq=attn_norm";
    return qm_awq_out_folds(h) ? " awq=attn_norm,ffn_norm,attn_v,ffn_up"
                               : " awq=attn_norm,ffn_norm";
}
