/*
 * calib/calib_layer.c — the per-layer callback API (calib.h calib_layer_*):
 * what an on_group / on_layer callback may read and change of the layer
 * the engine is at (weights, norms, inputs, forward products, hidden
 * states, Hessians), the checks of which stage allows what, and the
 * callbacks' invocation.
 */
#include "calib/calib_int.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define SLOT_BIT(t) CALIB_SLOT_BIT(t)
/* the delta net's weights that read ATTN_IN */
#define SSM_IN_BITS                                                                              \
    (SLOT_BIT(CALIB_T_WQKV) | SLOT_BIT(CALIB_T_SSM_GATE) | SLOT_BIT(CALIB_T_SSM_BETA) |           \
     SLOT_BIT(CALIB_T_SSM_ALPHA) | SLOT_BIT(CALIB_T_SSM_BA))
/* what each stage's callback may change */
static const uint64_t stage_mutable[CALIB_G_ALL] = {
    [CALIB_G_ATTN_IN] = SLOT_BIT(CALIB_T_WQ) | SLOT_BIT(CALIB_T_WK) | SLOT_BIT(CALIB_T_WV) |
                        SLOT_BIT(CALIB_T_ATTN_NORM) | SSM_IN_BITS,
    [CALIB_G_ATTN_OUT] = SLOT_BIT(CALIB_T_WQ) | SLOT_BIT(CALIB_T_WK) | SLOT_BIT(CALIB_T_WV) |
                         SLOT_BIT(CALIB_T_WO) | SLOT_BIT(CALIB_T_ATTN_NORM) | SSM_IN_BITS |
                         SLOT_BIT(CALIB_T_SSM_OUT) | SLOT_BIT(CALIB_T_SSM_NORM),
    [CALIB_G_FFN_IN] = SLOT_BIT(CALIB_T_WGATE) | SLOT_BIT(CALIB_T_WUP) |
                       SLOT_BIT(CALIB_T_FFN_NORM) | SLOT_BIT(CALIB_T_PRE_NORM_2),
    [CALIB_G_FFN_DOWN] = SLOT_BIT(CALIB_T_WGATE) | SLOT_BIT(CALIB_T_WUP) |
                         SLOT_BIT(CALIB_T_WDOWN) | SLOT_BIT(CALIB_T_FFN_NORM),
    [CALIB_G_PLE_IN] = SLOT_BIT(CALIB_T_PLE_GATE),
    [CALIB_G_PLE_PROJ] = SLOT_BIT(CALIB_T_PLE_GATE) | SLOT_BIT(CALIB_T_PLE_PROJ),
};
/* what each group's input depends on (a bias moves with its weight) */
static const uint64_t group_deps[CALIB_G_ALL] = {
    [CALIB_G_ATTN_IN] = SLOT_BIT(CALIB_T_ATTN_NORM),
    [CALIB_G_ATTN_OUT] = SLOT_BIT(CALIB_T_ATTN_NORM) | SLOT_BIT(CALIB_T_WQ) |
                         SLOT_BIT(CALIB_T_WK) | SLOT_BIT(CALIB_T_WV) | SSM_IN_BITS |
                         SLOT_BIT(CALIB_T_SSM_NORM),
    [CALIB_G_FFN_IN] = SLOT_BIT(CALIB_T_FFN_NORM),
    [CALIB_G_FFN_DOWN] = SLOT_BIT(CALIB_T_FFN_NORM) | SLOT_BIT(CALIB_T_WGATE) |
                         SLOT_BIT(CALIB_T_WUP),
    [CALIB_G_PLE_IN] = 0, /* the FFN's weights are final by then */
    [CALIB_G_PLE_PROJ] = SLOT_BIT(CALIB_T_PLE_GATE),
};

static const enum calib_tslot wkind_slot[CALIB_W_COUNT] = {
    CALIB_T_WQ,       CALIB_T_WK,   CALIB_T_WV,       CALIB_T_WO,
    CALIB_T_WGATE,    CALIB_T_WUP,  CALIB_T_WDOWN,    CALIB_T_WQKV,
    CALIB_T_SSM_GATE, CALIB_T_SSM_BETA, CALIB_T_SSM_ALPHA, CALIB_T_SSM_OUT,
    CALIB_T_PLE_GATE, CALIB_T_PLE_PROJ};
/* the delta net's and gemma4's per-layer input weights have no bias: slots
 * those layers never have */
static const enum calib_tslot wkind_bias[CALIB_W_COUNT] = {
    CALIB_T_BQ, CALIB_T_BK, CALIB_T_BV, CALIB_T_BO, CALIB_T_BGATE, CALIB_T_BUP,
    CALIB_T_BDOWN, CALIB_T_BQ, CALIB_T_BQ, CALIB_T_BQ, CALIB_T_BQ, CALIB_T_BO,
    CALIB_T_BQ, CALIB_T_BO};

/* the slot that holds weight w (qwen3next: beta is ssm_ba, beta and alpha) */
static enum calib_tslot wslot(const struct calib_engine *e, enum calib_wkind w)
{
    if (w == CALIB_W_BETA && e->hp->arch == RT_ARCH_QWEN3NEXT) return CALIB_T_SSM_BA;
    return wkind_slot[w];
}

// --- the layer API ----------------------------------------------------------------------

uint32_t calib_layer_index(const struct calib_layer *ly) { return ly->il; }
uint32_t calib_layer_n_samples(const struct calib_layer *ly) { return ly->e->n_samples; }
uint32_t calib_layer_n_pos(const struct calib_layer *ly) { return ly->e->n_pos; }
uint64_t calib_layer_n_rows(const struct calib_layer *ly) { return ly->e->T; }
uint64_t calib_layer_max_rows(const struct calib_layer *ly) { return ly->e->rows_b; }

uint64_t calib_layer_group_n_in(const struct calib_layer *ly, enum calib_group g)
{
    const struct calib_engine *e = ly->e;
    switch (g) {
    case CALIB_G_ATTN_IN:
    case CALIB_G_FFN_IN: return e->E;
    case CALIB_G_ATTN_OUT: return e->AO;
    case CALIB_G_FFN_DOWN: return ly->expert >= 0 ? e->FX : e->F;
    case CALIB_G_PLE_IN: return e->P ? e->E : 0;
    case CALIB_G_PLE_PROJ: return e->P;
    case CALIB_G_ALL: break;
    }
    return 0;
}

const struct calib_group_stats *calib_layer_stats(const struct calib_layer *ly,
                                                  enum calib_group g)
{
    if (ly->expert == CALIB_EXPERT_ALL) return g == CALIB_G_FFN_IN ? ly->e->xall : NULL;
    if (ly->expert >= 0 && (g == CALIB_G_FFN_IN || g == CALIB_G_FFN_DOWN))
        return calib_stats_expert(ly->e->st, ly->il, g, (uint32_t)ly->expert);
    return calib_stats_group(ly->e->st, ly->il, g);
}

bool calib_layer_has_weight(const struct calib_layer *ly, enum calib_wkind w)
{
    /* an expert's call holds that expert's gate, up and down, whether or not
     * the layer also has a shared expert */
    if (ly->expert == CALIB_EXPERT_ALL) return w == CALIB_W_GATE; /* all of ffn_gate_up_exps */
    if (ly->expert >= 0) return w == CALIB_W_GATE || w == CALIB_W_UP || w == CALIB_W_DOWN;
    if (w == CALIB_W_V && ly->e->g4 && !calib__model_has(ly->e->m, ly->il, CALIB_T_WV))
        return false; /* gemma4's attention_k_eq_v */
    return calib_weight_in_layer(ly->e->hp, ly->il, w);
}

int32_t calib_layer_expert(const struct calib_layer *ly) { return ly->expert; }
uint32_t calib_layer_n_expert(const struct calib_layer *ly) { return (uint32_t)ly->e->NX; }
uint64_t calib_layer_expert_rows(const struct calib_layer *ly)
{
    return ly->expert >= 0 ? ly->e->xn : 0;
}

static enum mw_status no_expert(const struct calib_layer *ly, const char *what,
                                struct mw_err *err)
{
    return MW_FAIL(err, MW_E_USAGE, MW_ERR_OFF_NONE, "layer %u expert %d: %s", ly->il,
                   (int)ly->expert, what);
}

/* expert ex's gate, up or down: rows of the stacked tensor */
static enum mw_status expert_weight(struct calib_layer *ly, enum calib_wkind w, bool mutable_,
                                    struct calib_weight *out, struct mw_err *err)
{
    const struct calib_engine *e = ly->e;
    if (ly->expert == CALIB_EXPERT_ALL) { /* gemma4: every expert's gate and up rows */
        if (w != CALIB_W_GATE)
            return no_expert(ly, "the experts' common input feeds ffn_gate_up_exps alone", err);
        if (mutable_ && ly->stage != CALIB_G_FFN_IN)
            return no_expert(ly, "this weight may not be changed in this stage", err);
        out->name = ly->xnames[0];
        out->n_in = e->E;
        out->n_out = out->tensor_rows = e->NX * 2 * e->FX;
        out->row0 = 0;
        out->w = e->w[CALIB_T_UP_EXPS];
        out->bias = NULL;
        return MW_OK;
    }
    if (w != CALIB_W_GATE && w != CALIB_W_UP && w != CALIB_W_DOWN)
        return no_expert(ly, "only ffn_gate, ffn_up and ffn_down belong to an expert", err);
    if (mutable_ && (ly->stage == CALIB_STAGE_NONE ||
                     (w == CALIB_W_DOWN && ly->stage != CALIB_G_FFN_DOWN)))
        return no_expert(ly, "this weight may not be changed in this stage", err);
    const int k = w == CALIB_W_GATE ? 0 : w == CALIB_W_UP ? 1 : 2;
    const enum calib_tslot t = k == 0 ? CALIB_T_GATE_EXPS : k == 1 ? CALIB_T_UP_EXPS
                                                                   : CALIB_T_DOWN_EXPS;
    const uint64_t ex = (uint64_t)ly->expert;
    out->name = ly->xnames[k];
    out->n_out = k == 2 ? e->E : e->FX;
    out->n_in = k == 2 ? e->FX : e->E;
    out->row0 = ex * out->n_out;
    out->tensor_rows = e->NX * out->n_out;
    out->w = e->w[t] + ex * out->n_out * out->n_in;
    if (e->g4 && k < 2) { /* gemma4's ffn_gate_up_exps: per expert gate rows, then up rows */
        out->row0 = ex * 2 * e->FX + (k ? e->FX : 0);
        out->tensor_rows = e->NX * 2 * e->FX;
        out->w = e->w[CALIB_T_UP_EXPS] + out->row0 * e->E;
    }
    out->bias = NULL;
    return MW_OK;
}

/* the group whose callback runs ("" outside callbacks), for messages */
static const char *stage_name(const struct calib_layer *ly)
{
    return ly->stage == CALIB_STAGE_NONE ? "" : calib_group_name((enum calib_group)ly->stage);
}

static void invalidate(struct calib_layer *ly, uint64_t bits)
{
    for (int g = 0; g < CALIB_G_ALL; g++)
        if (group_deps[g] & bits) {
            ly->H_valid[g] = false;
            if (ly->e->lean) { /* stale: its memory goes back before anything new */
                free(ly->H[g]);
                ly->H[g] = NULL;
            }
        }
    if (bits & group_deps[CALIB_G_ATTN_OUT]) ly->xo_stale = true;
}

static enum mw_status hand_out(struct calib_layer *ly, enum calib_tslot t, bool mutable_,
                               const char *what, struct mw_err *err)
{
    struct calib_engine *e = ly->e;
    if (mutable_ &&
        (ly->stage == CALIB_STAGE_NONE || !(stage_mutable[ly->stage] & SLOT_BIT(t))))
        return MW_FAIL(err, MW_E_USAGE, MW_ERR_OFF_NONE,
                       "layer %u: %s may not be changed %s%s", ly->il, what,
                       ly->stage == CALIB_STAGE_NONE ? "outside an on_group callback" : "in stage ",
                       stage_name(ly));
    if (mutable_) { /* first: the Hessians this change makes stale go (lean: freed) */
        ly->live |= SLOT_BIT(t);
        invalidate(ly, SLOT_BIT(t));
    }
    uint64_t row0;
    const enum calib_tslot o = calib__owner_of(e, t, &row0);
    if (calib__big_slot(o)) {
        enum mw_status s = calib__w_resident(e, o, err);
        if (s) return s;
        if (mutable_) e->dirty[o] = true;
    }
    return MW_OK;
}

enum mw_status calib_layer_weight(struct calib_layer *ly, enum calib_wkind w, bool mutable_,
                                  struct calib_weight *out, struct mw_err *err)
{
    if ((unsigned)w >= CALIB_W_COUNT)
        return MW_FAIL(err, MW_E_USAGE, MW_ERR_OFF_NONE, "weight kind %d", (int)w);
    if (ly->expert != -1) return expert_weight(ly, w, mutable_, out, err);
    const enum calib_tslot t = wslot(ly->e, w);
    if (!calib_weight_in_layer(ly->e->hp, ly->il, w) ||
        !calib__model_has(ly->e->m, ly->il, calib__owner_of(ly->e, t, &(uint64_t){0})))
        return MW_FAIL(err, MW_E_USAGE, MW_ERR_OFF_NONE, "layer %u has no %s", ly->il,
                       calib_wkind_name(w));
    enum mw_status s = hand_out(ly, t, mutable_, calib_wkind_name(w), err);
    if (s) return s;
    const struct calib_engine *e = ly->e;
    const enum calib_group g = calib_wkind_group(w);
    out->name = ly->names[w];
    out->n_in = calib_layer_group_n_in(ly, g);
    out->row0 = calib_weight_tensor(e->hp, ly->il, w, NULL, 0, &out->tensor_rows);
    out->n_out = calib__slot_elems(e->hp, w == CALIB_W_UP ? CALIB_T_WGATE : t) / out->n_in;
    out->w = e->w[t];
    out->bias = e->w[wkind_bias[w]];
    return MW_OK;
}

enum mw_status calib_layer_weight_release(struct calib_layer *ly, enum calib_wkind w,
                                          struct mw_err *err)
{
    if ((unsigned)w >= CALIB_W_COUNT)
        return MW_FAIL(err, MW_E_USAGE, MW_ERR_OFF_NONE, "weight kind %d", (int)w);
    if (ly->expert != -1) return MW_OK; /* the stacked experts stay in memory */
    uint64_t row0;
    return calib__w_park(ly->e, calib__owner_of(ly->e, wslot(ly->e, w), &row0), err);
}

enum mw_status calib_layer_norm(struct calib_layer *ly, enum calib_norm which, bool mutable_,
                                float **out, struct mw_err *err)
{
    if (which != CALIB_NORM_ATTN && which != CALIB_NORM_FFN && which != CALIB_NORM_SSM)
        return MW_FAIL(err, MW_E_USAGE, MW_ERR_OFF_NONE, "norm kind %d", (int)which);
    if (which == CALIB_NORM_SSM && !ly->e->rec)
        return MW_FAIL(err, MW_E_USAGE, MW_ERR_OFF_NONE,
                       "layer %u has no ssm_norm (not a delta-net layer)", ly->il);
    enum calib_tslot t = which == CALIB_NORM_ATTN ? CALIB_T_ATTN_NORM
                         : which == CALIB_NORM_FFN ? CALIB_T_FFN_NORM
                                                   : CALIB_T_SSM_NORM;
    const bool all = ly->expert == CALIB_EXPERT_ALL;
    if (all && which != CALIB_NORM_FFN)
        return no_expert(ly, "only the experts' input norm (pre_ffw_norm_2) belongs here", err);
    if (all) t = CALIB_T_PRE_NORM_2;
    /* gemma4's ffn_norm feeds its dense MLP alone (the router and the experts
     * have their own): changed in the dense MLP's callbacks only */
    if (mutable_ && t == CALIB_T_FFN_NORM && ly->e->NX && ly->e->g4 && ly->expert >= 0)
        return MW_FAIL(err, MW_E_USAGE, MW_ERR_OFF_NONE,
                       "layer %u expert %d: ffn_norm feeds the dense MLP, not the experts "
                       "(they read pre_ffw_norm_2)", ly->il, (int)ly->expert);
    if (mutable_ && t == CALIB_T_FFN_NORM && ly->e->NX && !ly->e->g4)
        return MW_FAIL(err, MW_E_USAGE, MW_ERR_OFF_NONE,
                       "layer %u: ffn_norm of a mixture-of-experts layer may not be changed "
                       "(the router and every expert read it)", ly->il);
    enum mw_status s = hand_out(ly, t, mutable_,
                                all                        ? "pre_ffw_norm_2"
                                : which == CALIB_NORM_ATTN ? "attn_norm"
                                : which == CALIB_NORM_FFN  ? "ffn_norm"
                                                           : "ssm_norm",
                                err);
    if (s) return s;
    *out = ly->e->w[t];
    return MW_OK;
}

static enum mw_status check_group(const struct calib_layer *ly, enum calib_group g,
                                  struct mw_err *err)
{
    if ((unsigned)g >= CALIB_G_ALL)
        return MW_FAIL(err, MW_E_USAGE, MW_ERR_OFF_NONE, "group %d", (int)g);
    const bool attn = g == CALIB_G_ATTN_IN || g == CALIB_G_ATTN_OUT;
    /* in PLE_IN / PLE_PROJ the residual holds the FFN's output: the FFN
     * groups' inputs are gone */
    const bool ple_gone = ly->stage >= CALIB_G_PLE_IN && g < CALIB_G_PLE_IN;
    if (ly->stage == CALIB_STAGE_NONE || (int)g > ly->stage || attn == ly->ffn_phase || ple_gone)
        return MW_FAIL(err, MW_E_USAGE, MW_ERR_OFF_NONE,
                       "layer %u: the %s input is not available %s%s", ly->il, calib_group_name(g),
                       ly->stage == CALIB_STAGE_NONE ? "outside an on_group callback" : "in stage ",
                       stage_name(ly));
    return MW_OK;
}

/* Rows [row0, row0+nr) of the input of g (ATTN_OUT or FFN_DOWN), computed
 * one whole sample at a time and copied out: the GEMMs' row tiles start at
 * sample starts (mw_blas.h), so any window, aligned or not, has the bits of
 * the layer pass. */
static enum mw_status sample_rows(struct calib_engine *e, enum calib_group g, uint64_t row0,
                                  uint64_t nr, float *dst, struct mw_err *err)
{
    const bool attn = g == CALIB_G_ATTN_OUT;
    const uint64_t w = attn ? e->AO : e->F;
    enum mw_status s;
    for (uint64_t r = row0; r < row0 + nr;) {
        const uint64_t a = r / e->n_pos * e->n_pos;
        const uint64_t b = a + e->n_pos < row0 + nr ? a + e->n_pos : row0 + nr;
        if ((s = calib__hs_need(e, a, e->n_pos, err))) return s;
        calib__norm_rows(e, a, e->n_pos, attn ? CALIB_T_ATTN_NORM : CALIB_T_FFN_NORM, e->xin);
        e->mix_r0 = a;
        s = attn ? calib__mixer(e, e->xin, 1, e->one, e->AO, err)
                 : calib__swiglu(e, e->xin, e->n_pos, err);
        if (s) return s;
        memcpy(dst + (r - row0) * w, (attn ? e->one : e->g) + (r - a) * w,
               (size_t)((b - r) * w) * sizeof(float));
        r = b;
    }
    return MW_OK;
}

/* Whether X_o as stored (memory, or lean: its file) is current. */
static bool xo_current(const struct calib_layer *ly)
{
    return !ly->xo_stale && !(ly->live & group_deps[CALIB_G_ATTN_OUT]);
}

/* Rows [row0, row0+nr) of group g's current input into dst (nr, n_in);
 * nr <= rows_b. May use xin/q/k/v/S/g/u/one scratch. */
static enum mw_status group_rows(struct calib_engine *e, enum calib_group g, uint64_t row0,
                                 uint64_t nr, float *dst, struct mw_err *err)
{
    struct calib_layer *ly = &e->ly;
    enum mw_status s = MW_OK;
    switch (g) {
    case CALIB_G_ATTN_IN:
    case CALIB_G_FFN_IN:
        if ((s = calib__hs_need(e, row0, nr, err))) return s;
        calib__norm_rows(e, row0, nr, g == CALIB_G_ATTN_IN ? CALIB_T_ATTN_NORM : CALIB_T_FFN_NORM,
                         dst);
        break;
    case CALIB_G_ATTN_OUT:
        if (xo_current(ly)) {
            if (e->lean) return calib__xo_io(e, false, row0, nr, dst, err);
            memcpy(dst, e->xo + row0 * e->AO, (size_t)(nr * e->AO) * sizeof(float));
            break;
        }
        return sample_rows(e, g, row0, nr, dst, err); /* with the current weights */
    case CALIB_G_FFN_DOWN:
        return sample_rows(e, g, row0, nr, dst, err);
    case CALIB_G_PLE_IN: /* the residual after the FFN (the tail waits) */
        if ((s = calib__hs_need(e, row0, nr, err))) return s;
        memcpy(dst, calib__hs_at(e, row0), (size_t)(nr * e->E) * sizeof(float));
        break;
    case CALIB_G_PLE_PROJ:
        if ((s = calib__hs_need(e, row0, nr, err))) return s;
        calib__g4_proj_in(e, calib__hs_at(e, row0), row0, nr, dst);
        break;
    case CALIB_G_ALL:
        break;
    }
    return s;
}

/* check_group, and no expert's callback running (fn: the call refused) */
static enum mw_status check_dense(const struct calib_layer *ly, enum calib_group g,
                                  const char *fn, struct mw_err *err)
{
    enum mw_status s = check_group(ly, g, err);
    if (s) return s;
    if (ly->expert != -1) return no_expert(ly, fn, err);
    return MW_OK;
}

enum mw_status calib_layer_input(struct calib_layer *ly, enum calib_group g, uint64_t row0,
                                 uint64_t n_rows, const float **x, struct mw_err *err)
{
    *x = NULL;
    enum mw_status s = check_dense(ly, g, "calib_layer_input is not available", err);
    if (s) return s;
    struct calib_engine *e = ly->e;
    if (n_rows == 0 || n_rows > e->rows_b || row0 > e->T || n_rows > e->T - row0)
        return MW_FAIL(err, MW_E_USAGE, MW_ERR_OFF_NONE,
                       "rows [%llu, +%llu) outside [0, %llu) or above %llu per call",
                       (unsigned long long)row0, (unsigned long long)n_rows,
                       (unsigned long long)e->T, (unsigned long long)e->rows_b);
    if (g == CALIB_G_ATTN_OUT && !e->lean && xo_current(ly)) {
        *x = e->xo + row0 * e->AO; /* the stored rows, no copy */
        return MW_OK;
    }
    if ((s = group_rows(e, g, row0, n_rows, e->ubuf, err))) return s;
    *x = e->ubuf;
    return MW_OK;
}

enum mw_status calib_layer_forward(struct calib_layer *ly, enum calib_group g, uint32_t sample0,
                                   uint32_t n, float *out, struct mw_err *err)
{
    enum mw_status s = check_dense(ly, g, "calib_layer_forward is not available", err);
    if (s) return s;
    struct calib_engine *e = ly->e;
    if (n == 0 || n > e->spb || sample0 > e->n_samples || n > e->n_samples - sample0)
        return MW_FAIL(err, MW_E_USAGE, MW_ERR_OFF_NONE,
                       "samples [%u, +%u) outside [0, %u) or above %u per call", sample0, n,
                       e->n_samples, e->spb);
    const uint64_t r0 = (uint64_t)sample0 * e->n_pos, nr = (uint64_t)n * e->n_pos;
    if (g != CALIB_G_ATTN_OUT && (s = calib__hs_need(e, r0, nr, err))) return s;
    switch (g) {
    case CALIB_G_ATTN_IN:
        calib__norm_rows(e, r0, nr, CALIB_T_ATTN_NORM, e->xin);
        e->mix_r0 = r0;
        s = calib__mixer(e, e->xin, n, out, e->AO, err);
        break;
    case CALIB_G_ATTN_OUT:
        if ((s = group_rows(e, g, r0, nr, e->ubuf, err))) break;
        if ((s = calib__linear_w(e, e->ubuf, nr, e->AO, calib__wo(e), CALIB_T_BO, e->E, out,
                                 e->E, err)))
            break;
        calib__post_norm(e, CALIB_T_WO, out, nr);
        break;
    case CALIB_G_FFN_IN:
        calib__norm_rows(e, r0, nr, CALIB_T_FFN_NORM, e->xin);
        if ((s = calib__swiglu(e, e->xin, nr, err))) break;
        memcpy(out, e->g, (size_t)(nr * e->F) * sizeof(float));
        break;
    case CALIB_G_FFN_DOWN:
        calib__norm_rows(e, r0, nr, CALIB_T_FFN_NORM, e->xin);
        if ((s = calib__swiglu(e, e->xin, nr, err))) break;
        if ((s = calib__linear_w(e, e->g, nr, e->F, CALIB_T_WDOWN, CALIB_T_BDOWN, e->E, out,
                                 e->E, err)))
            break;
        calib__post_norm(e, CALIB_T_WDOWN, out, nr);
        break;
    case CALIB_G_PLE_IN: /* proj's input, (nr, P) */
        calib__g4_proj_in(e, calib__hs_at(e, r0), r0, nr, out);
        break;
    case CALIB_G_PLE_PROJ: /* RMSNorm(proj . ...) * post_norm, (nr, E) */
        calib__g4_proj_in(e, calib__hs_at(e, r0), r0, nr, e->pg);
        calib__linear(e, e->pg, nr, e->P, e->w[CALIB_T_PLE_PROJ], NULL, e->E, out, e->E);
        calib__run_rows(e, CALIB_OP_NORM, nr, e->E, out, out, e->w[CALIB_T_PLE_NORM], 0);
        break;
    case CALIB_G_ALL:
        break;
    }
    return s;
}

enum mw_status calib_layer_hidden(struct calib_layer *ly, uint64_t row0, uint64_t n_rows,
                                  const float **x, struct mw_err *err)
{
    struct calib_engine *e = ly->e;
    *x = NULL;
    if (row0 > e->T || n_rows > e->T - row0 || (e->hs_file && n_rows > e->rows_b))
        return MW_FAIL(err, MW_E_USAGE, MW_ERR_OFF_NONE,
                       "rows [%llu, +%llu) outside [0, %llu)%s", (unsigned long long)row0,
                       (unsigned long long)n_rows, (unsigned long long)e->T,
                       e->hs_file ? " or above calib_layer_max_rows()" : "");
    if (!e->hs_file) {
        *x = e->hs + row0 * e->E;
        return MW_OK;
    }
    enum mw_status s = calib__spill_io(e->hs_fd, e->hs_path, false, row0 * e->E * sizeof(float),
                                       e->hsv, n_rows * e->E * sizeof(float), "hidden states",
                                       err);
    if (s) return s;
    *x = e->hsv;
    return MW_OK;
}

/* H (n x n) += Xᵀ X of nr rows of X (first: H = Xᵀ X), mw_gram_acc's row
 * tiles of seg rows; timed in the statistics */
static void gram(struct calib_engine *e, uint64_t n, uint64_t nr, const float *X, bool first,
                 float *H, uint64_t seg)
{
    const double t0 = mw_now_s();
    mw_gram_acc(e->pool, n, nr, X, n, first, H, seg);
    e->st->tm.hess_s += mw_now_s() - t0;
    /* the upper 256-blocks: nb (nb + 1) / 2 tiles of 2 x 256² x nr */
    const double nb = (double)((n + MW_BLAS_TILE_N - 1) / MW_BLAS_TILE_N);
    e->st->tm.hess_flop += nb * (nb + 1.0) * (double)MW_BLAS_TILE_N * MW_BLAS_TILE_N *
                           (double)nr;
}

/* H of the rows routed to the current expert (recomputed on every call:
 * the expert's weights are the callback's to change) */
static enum mw_status expert_hessian(struct calib_layer *ly, enum calib_group g,
                                     struct mw_err *err)
{
    struct calib_engine *e = ly->e;
    if (g != CALIB_G_FFN_IN && g != CALIB_G_FFN_DOWN)
        return no_expert(ly, "only the gate/up and down inputs have a Hessian", err);
    if (ly->expert == CALIB_EXPERT_ALL && g != CALIB_G_FFN_IN)
        return no_expert(ly, "only the experts' common input has a Hessian here", err);
    const uint64_t n = g == CALIB_G_FFN_IN ? e->E : e->FX;
    free(ly->H[g]);
    bool ok = true;
    ly->H[g] = calib__alloc_f2(n, n, &ok);
    ly->H_valid[g] = false;
    if (!ok)
        return MW_FAIL(err, MW_E_NOMEM, MW_ERR_OFF_NONE,
                       "%llu x %llu Hessian of layer %u expert %d", (unsigned long long)n,
                       (unsigned long long)n, ly->il, (int)ly->expert);
    if (ly->expert == CALIB_EXPERT_ALL) { /* every row, under the current pre_ffw_norm_2 */
        for (uint32_t s0 = 0; s0 < e->n_samples; s0 += e->spb) {
            const uint64_t r0 = (uint64_t)s0 * e->n_pos;
            const uint64_t nr = (uint64_t)calib__batch_samples(e, s0) * e->n_pos;
            calib__norm_rows(e, r0, nr, CALIB_T_PRE_NORM_2, e->xin);
            gram(e, n, nr, e->xin, s0 == 0, ly->H[g], e->n_pos);
        }
        mw_sym_lower_from_upper(ly->H[g], n);
        return MW_OK;
    }
    if (e->xn == 0) memset(ly->H[g], 0, (size_t)(n * n) * sizeof(float));
    for (uint64_t c0 = 0; c0 < e->xn; c0 += CALIB_XCHUNK) {
        const uint64_t nr = e->xn - c0 < CALIB_XCHUNK ? e->xn - c0 : CALIB_XCHUNK;
        calib__moe_expert_chunk(e, c0, nr, g == CALIB_G_FFN_DOWN);
        gram(e, n, nr, g == CALIB_G_FFN_IN ? e->xe : e->ge, c0 == 0, ly->H[g], CALIB_XCHUNK);
    }
    if (e->xn) mw_sym_lower_from_upper(ly->H[g], n);
    return MW_OK;
}

static enum mw_status hessian(struct calib_layer *ly, enum calib_group g, struct mw_err *err)
{
    enum mw_status s = check_group(ly, g, err);
    if (s) return s;
    if (ly->expert != -1) return expert_hessian(ly, g, err);
    struct calib_engine *e = ly->e;
    const uint64_t n = calib_layer_group_n_in(ly, g);
    if (ly->H[g] && ly->H_valid[g] && !(ly->live & group_deps[g])) return MW_OK;
    if (!ly->H[g]) {
        /* under --max-memory the plan has room for ONE Hessian of the widest
         * group: release the others first (their views become invalid) */
        if (e->max_memory || e->lean)
            for (int o = 0; o < CALIB_G_ALL; o++) {
                free(ly->H[o]);
                ly->H[o] = NULL;
                ly->H_valid[o] = false;
            }
        bool ok = true;
        uint64_t nn;
        if (!mw_mul_u64(n, n, &nn)) ok = false;
        ly->H[g] = calib__alloc_f(nn, &ok);
        if (!ok)
            return MW_FAIL(err, MW_E_NOMEM, MW_ERR_OFF_NONE,
                           "%llu x %llu Hessian of layer %u %s", (unsigned long long)n,
                           (unsigned long long)n, ly->il, calib_group_name(g));
    }
    float *Hm = ly->H[g];
    for (uint32_t s0 = 0; s0 < e->n_samples; s0 += e->spb) {
        const uint32_t ns = calib__batch_samples(e, s0);
        const uint64_t r0 = (uint64_t)s0 * e->n_pos, nr = (uint64_t)ns * e->n_pos;
        const float *X;
        if (g == CALIB_G_ATTN_OUT && !e->lean && xo_current(ly)) {
            X = e->xo + r0 * e->AO;
        } else {
            if ((s = group_rows(e, g, r0, nr, e->ubuf, err))) return s;
            X = e->ubuf;
        }
        gram(e, n, nr, X, s0 == 0, Hm, e->n_pos);
    }
    mw_sym_lower_from_upper(Hm, n);
    ly->H_valid[g] = !(ly->live & group_deps[g]);
    return MW_OK;
}

enum mw_status calib_layer_hessian(struct calib_layer *ly, enum calib_group g, const float **H,
                                   struct mw_err *err)
{
    *H = NULL;
    enum mw_status s = hessian(ly, g, err);
    if (s) return s;
    *H = ly->H[g];
    return MW_OK;
}

enum mw_status calib_layer_hessian_take(struct calib_layer *ly, enum calib_group g, float **H,
                                        struct mw_err *err)
{
    *H = NULL;
    enum mw_status s = hessian(ly, g, err);
    if (s) return s;
    *H = ly->H[g];
    ly->H[g] = NULL;
    ly->H_valid[g] = false;
    return MW_OK;
}

// --- running the callbacks ---

void calib__layer_reset(struct calib_engine *e, uint32_t il)
{
    struct calib_layer *ly = &e->ly;
    memset(ly, 0, sizeof *ly);
    ly->e = e;
    ly->il = il;
    ly->stage = CALIB_STAGE_NONE;
    ly->expert = -1;
    static const char *const xn[3] = {"ffn_gate_exps", "ffn_up_exps", "ffn_down_exps"};
    for (int k = 0; k < 3; k++)
        snprintf(ly->xnames[k], sizeof ly->xnames[k], "blk.%u.%s.weight", il,
                 e->g4 && k < 2 ? "ffn_gate_up_exps" : xn[k]);
    for (int w = 0; w < CALIB_W_COUNT; w++)
        calib_weight_tensor(e->hp, il, (enum calib_wkind)w, ly->names[w], sizeof ly->names[w],
                            NULL);
}

enum mw_status calib__call_group(struct calib_engine *e, const struct calib_run_opts *o,
                                 enum calib_group g, struct mw_err *err)
{
    struct calib_layer *ly = &e->ly;
    ly->stage = (int)g;
    ly->live = 0;
    const double t0 = mw_now_s();
    enum mw_status s = o->on_group(o->on_group_ud, ly, g, err);
    e->st->tm.callback_s += mw_now_s() - t0;
    ly->stage = CALIB_STAGE_NONE;
    ly->live = 0;
    if (!s) s = calib__park_all(e, err); /* lean: what the callback held goes back */
    return s;
}
