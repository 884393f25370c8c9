/*
 * calib/calib_stats.c — the statistics of a calibration run (calib.h): the
 * calib_stats handle, the names of its imatrix entries, the weight tensor
 * of each kind, and the accumulation of a group's sums of squares and
 * absolute values (threads split channels, never rows).
 */
#include "calib/calib_int.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>

const struct calib_timing *calib_stats_timing(const struct calib_stats *st) { return &st->tm; }

void calib_stats_free(struct calib_stats *st)
{
    if (!st) return;
    free(st->g);
    free(st->buf);
    free(st->xg);
    free(st->xbuf);
    free(st->pl);
    free(st->plbuf);
    free(st->rtr);
    free(st->rtrbuf);
    free(st->no_v);
    free(st);
}

uint32_t calib_stats_n_layer(const struct calib_stats *st) { return st->n_layer; }
uint32_t calib_stats_n_samples(const struct calib_stats *st) { return st->n_samples; }
uint32_t calib_stats_n_pos(const struct calib_stats *st) { return st->n_pos; }

const struct calib_group_stats *calib_stats_group(const struct calib_stats *st, uint32_t layer,
                                                  enum calib_group g)
{
    if (layer >= st->n_layer || (unsigned)g >= CALIB_G_ALL) return NULL;
    if (g >= CALIB_G_PLE_IN) /* gemma4's per-layer input: kept beside the four */
        return st->pl ? &st->pl[(uint64_t)layer * 2 + (g == CALIB_G_PLE_PROJ)] : NULL;
    return &st->g[(uint64_t)layer * CALIB_G_COUNT + g];
}

uint32_t calib_stats_n_expert(const struct calib_stats *st) { return st->n_expert; }

const struct calib_group_stats *calib_stats_expert(const struct calib_stats *st, uint32_t layer,
                                                   enum calib_group g, uint32_t ex)
{
    if (layer >= st->n_layer || ex >= st->n_expert ||
        (g != CALIB_G_FFN_IN && g != CALIB_G_FFN_DOWN))
        return NULL;
    return &st->xg[((uint64_t)layer * 2 + (g == CALIB_G_FFN_DOWN)) * st->n_expert + ex];
}

static const char *const group_names[CALIB_G_ALL] = {"attn_in", "attn_out", "ffn_in",
                                                     "ffn_down", "ple_in",   "ple_proj"};
static const char *const wkind_names[CALIB_W_COUNT] = {
    "attn_q", "attn_k",    "attn_v",   "attn_output", "ffn_gate",  "ffn_up",
    "ffn_down", "attn_qkv", "attn_gate", "ssm_beta",  "ssm_alpha", "ssm_out",
    "inp_gate", "proj"};
static const enum calib_group wkind_group[CALIB_W_COUNT] = {
    CALIB_G_ATTN_IN, CALIB_G_ATTN_IN, CALIB_G_ATTN_IN,  CALIB_G_ATTN_OUT,
    CALIB_G_FFN_IN,  CALIB_G_FFN_IN,  CALIB_G_FFN_DOWN, CALIB_G_ATTN_IN,
    CALIB_G_ATTN_IN, CALIB_G_ATTN_IN, CALIB_G_ATTN_IN,  CALIB_G_ATTN_OUT,
    CALIB_G_PLE_IN,  CALIB_G_PLE_PROJ};

static bool is_ssm_kind(enum calib_wkind w) { return w >= CALIB_W_QKV && w <= CALIB_W_SSM_OUT; }

bool calib_weight_in_layer(const struct rt_hparams *hp, uint32_t il, enum calib_wkind w)
{
    if ((unsigned)w >= CALIB_W_COUNT) return false;
    if (w == CALIB_W_INP_GATE || w == CALIB_W_PROJ) return hp->n_embd_per_layer > 0;
    if (wkind_group[w] >= CALIB_G_FFN_IN) return !hp->n_expert || hp->n_ff_shexp > 0;
    if (rt_layer_is_recurrent(hp, il) != is_ssm_kind(w)) return false;
    if ((w == CALIB_W_K || w == CALIB_W_V) && !rt_layer_has_kv(hp, il)) return false; /* gemma4 */
    return !(w == CALIB_W_ALPHA && hp->arch == RT_ARCH_QWEN3NEXT); /* in ssm_ba */
}

uint64_t calib_weight_tensor(const struct rt_hparams *hp, uint32_t il, enum calib_wkind w,
                             char *buf, size_t n, uint64_t *tensor_rows)
{
    const uint64_t Q = (uint64_t)hp->n_head * hp->head_dim;
    const uint64_t KV = (uint64_t)hp->n_head_kv * hp->head_dim;
    const uint64_t F = hp->n_expert ? hp->n_ff_shexp : hp->n_ff;
    uint64_t row0 = 0, rows = 0;
    const char *nm = (unsigned)w < CALIB_W_COUNT ? wkind_names[w] : "?";
    switch (w) {
    case CALIB_W_Q: rows = Q; break;
    case CALIB_W_K: rows = KV; row0 = Q; break;
    case CALIB_W_V: rows = KV; row0 = Q + KV; break;
    case CALIB_W_O: rows = hp->n_embd; break;
    case CALIB_W_GATE: rows = F; break;
    case CALIB_W_UP: rows = F; row0 = F; break;
    case CALIB_W_DOWN: rows = hp->n_embd; break;
    case CALIB_W_QKV: rows = rt_ssm_conv_channels(hp); break;
    case CALIB_W_ZGATE: rows = hp->ssm_d_inner; break;
    case CALIB_W_BETA:
    case CALIB_W_ALPHA: rows = hp->ssm_dt_rank; break;
    case CALIB_W_SSM_OUT: rows = hp->n_embd; break;
    case CALIB_W_INP_GATE: rows = hp->n_embd_per_layer; break;
    case CALIB_W_PROJ: rows = hp->n_embd; break;
    case CALIB_W_COUNT: break;
    }
    if (w == CALIB_W_Q && hp->attn_out_gate) rows = 2 * Q; /* q and gate per head */
    if (w == CALIB_W_BETA && hp->arch == RT_ARCH_QWEN3NEXT) {
        nm = "ssm_ba"; /* beta and alpha rows per key head */
        rows = 2 * (uint64_t)hp->ssm_dt_rank;
    }
    if (hp->fused_qkv && (w == CALIB_W_Q || w == CALIB_W_K || w == CALIB_W_V)) {
        nm = "attn_qkv";
        rows = Q + 2 * KV;
    } else if (hp->fused_gate_up && (w == CALIB_W_GATE || w == CALIB_W_UP)) {
        nm = "ffn_up";
        rows = 2 * F;
    } else {
        row0 = 0;
    }
    if (hp->n_expert && hp->arch != RT_ARCH_GEMMA4 && /* gemma4: the dense MLP's names */
        (w == CALIB_W_GATE || w == CALIB_W_UP || w == CALIB_W_DOWN))
        nm = w == CALIB_W_GATE ? "ffn_gate_shexp" : w == CALIB_W_UP ? "ffn_up_shexp"
                                                                    : "ffn_down_shexp";
    if (buf && n) snprintf(buf, n, "blk.%u.%s.weight", il, nm);
    if (tensor_rows) *tensor_rows = rows;
    return row0;
}

bool calib_stats_entry(const struct calib_stats *st, uint32_t il, enum calib_wkind w, char *buf,
                       size_t n)
{
    const struct rt_hparams *hp = &st->hp;
    if ((unsigned)w >= CALIB_W_COUNT || !calib_weight_in_layer(hp, il, w)) return false;
    if (w == CALIB_W_V && st->no_v && st->no_v[il]) return false; /* gemma4's k_eq_v */
    (void)calib_weight_tensor(hp, il, w, buf, n, NULL);
    /* one entry per tensor: a fused tensor's is its first part's */
    if (st->fused_qkv && (w == CALIB_W_K || w == CALIB_W_V)) return false;
    if (st->fused_gate_up && w == CALIB_W_UP) return false;
    return true;
}

/* The entries of layer il in order (at most 16): the weights of
 * calib_stats_entry, and for a MoE layer the router, the shared expert's
 * gate, then the three stacked expert tensors. */
static unsigned layer_entries(const struct calib_stats *st, uint32_t il, struct calib_entry *out)
{
    unsigned k = 0;
    for (int w = 0; w < CALIB_W_INP_GATE; w++) { /* inp_gate, proj: below */
        if (!calib_stats_entry(st, il, (enum calib_wkind)w, out[k].name, sizeof out[k].name))
            continue;
        out[k].n_mat = 1;
        out[k].gs = calib_stats_group(st, il, wkind_group[w]);
        k++;
    }
    if (st->pl) { /* gemma4's per-layer input: its gate and projection */
        snprintf(out[k].name, sizeof out[k].name, "blk.%u.inp_gate.weight", il);
        out[k].n_mat = 1;
        out[k].gs = &st->pl[(uint64_t)il * 2];
        snprintf(out[k + 1].name, sizeof out[k + 1].name, "blk.%u.proj.weight", il);
        out[k + 1].n_mat = 1;
        out[k + 1].gs = &st->pl[(uint64_t)il * 2 + 1];
        k += 2;
    }
    if (!st->n_expert) return k;
    if (st->rtr) { /* gemma4: the router's own input, the fused gate_up, down */
        snprintf(out[k].name, sizeof out[k].name, "blk.%u.ffn_gate_inp.weight", il);
        out[k].n_mat = 1;
        out[k].gs = &st->rtr[il];
        for (int i = 0; i < 2; i++) {
            snprintf(out[k + 1 + i].name, sizeof out[k + 1 + i].name, "blk.%u.%s.weight", il,
                     i ? "ffn_down_exps" : "ffn_gate_up_exps");
            out[k + 1 + i].n_mat = st->n_expert;
            out[k + 1 + i].gs =
                calib_stats_expert(st, il, i ? CALIB_G_FFN_DOWN : CALIB_G_FFN_IN, 0);
        }
        return k + 3;
    }
    static const char *const moe_names[5] = {"ffn_gate_inp", "ffn_gate_inp_shexp",
                                             "ffn_gate_exps", "ffn_up_exps", "ffn_down_exps"};
    for (int i = 0; i < 5; i++) {
        if (i == 1 && !st->shexp) continue;
        snprintf(out[k].name, sizeof out[k].name, "blk.%u.%s.weight", il, moe_names[i]);
        out[k].n_mat = i >= 2 ? st->n_expert : 1;
        out[k].gs = i < 2 ? calib_stats_group(st, il, CALIB_G_FFN_IN)
                          : calib_stats_expert(st, il, i == 4 ? CALIB_G_FFN_DOWN : CALIB_G_FFN_IN,
                                               0);
        k++;
    }
    return k;
}

/* a layer's entries depend on its kind only (attention, or the delta net) */
#define MAX_LAYER_ENTRIES 16

uint64_t calib_stats_n_entries(const struct calib_stats *st)
{
    struct calib_entry tmp[MAX_LAYER_ENTRIES];
    uint64_t n = 0;
    for (uint32_t il = 0; il < st->n_layer; il++) n += layer_entries(st, il, tmp);
    return n + (st->pl != NULL); /* gemma4: per_layer_model_proj */
}

bool calib_stats_entry_at(const struct calib_stats *st, uint64_t i, struct calib_entry *out)
{
    struct calib_entry tmp[MAX_LAYER_ENTRIES];
    for (uint32_t il = 0; il < st->n_layer; il++) {
        const unsigned k = layer_entries(st, il, tmp);
        if (i < k) {
            *out = tmp[i];
            return true;
        }
        i -= k;
    }
    if (i == 0 && st->pl) {
        snprintf(out->name, sizeof out->name, "per_layer_model_proj.weight");
        out->n_mat = 1;
        out->gs = &st->plm;
        return true;
    }
    return false;
}

const char *calib_group_name(enum calib_group g)
{
    return (unsigned)g < CALIB_G_ALL ? group_names[g] : "?";
}
const char *calib_wkind_name(enum calib_wkind w)
{
    return (unsigned)w < CALIB_W_COUNT ? wkind_names[w] : "?";
}
enum calib_group calib_wkind_group(enum calib_wkind w)
{
    return (unsigned)w < CALIB_W_COUNT ? wkind_group[w] : CALIB_G_ALL;
}

// --- accumulation (threads split channels, never rows) ---

struct stat_job {
    const float *X;
    uint64_t nr, n_in;
    double *sq, *ab;
};

static void stat_task(void *arg, unsigned ith, unsigned nth)
{
    const struct stat_job *J = arg;
    uint64_t lo, hi;
    calib__split(J->n_in, ith, nth, &lo, &hi);
    for (uint64_t r = 0; r < J->nr; r++) {
        const float *x = J->X + r * J->n_in;
        for (uint64_t j = lo; j < hi; j++) {
            const double v = (double)x[j];
            J->sq[j] += v * v;
            J->ab[j] += fabs(v);
        }
    }
}

/* gs += nr rows of X, rows in order */
void calib__accum_gs(struct calib_engine *e, struct calib_group_stats *gs, const float *X,
                     uint64_t nr)
{
    struct stat_job J = {.X = X, .nr = nr, .n_in = gs->n_in, .sq = (double *)gs->sum_sq,
                         .ab = (double *)gs->sum_abs};
    mw_pool_run(e->pool, stat_task, &J);
    gs->count += nr;
}

void calib__accum(struct calib_engine *e, enum calib_group g, const float *X, uint64_t nr)
{
    calib__accum_gs(e, &e->st->g[(uint64_t)e->ly.il * CALIB_G_COUNT + g], X, nr);
}

/* MoE: expert ex's statistics of group g (FFN_IN / FFN_DOWN), rows in order */
void calib__accum_x(struct calib_engine *e, enum calib_group g, uint64_t ex, const float *X,
                    uint64_t nr)
{
    struct calib_group_stats *gs =
        (struct calib_group_stats *)calib_stats_expert(e->st, e->ly.il, g, (uint32_t)ex);
    calib__accum_gs(e, gs, X, nr);
}

enum mw_status calib__stats_alloc(struct calib_engine *e, struct mw_err *err)
{
    struct calib_stats *st = calloc(1, sizeof *st);
    if (!st) return MW_FAIL(err, MW_E_NOMEM, MW_ERR_OFF_NONE, "statistics");
    e->st = st;
    st->n_layer = e->hp->n_layer;
    st->hp = *e->hp;
    st->fused_qkv = e->hp->fused_qkv;
    st->fused_gate_up = e->hp->fused_gate_up;
    st->n_samples = e->n_samples;
    st->n_pos = e->n_pos;
    /* ATTN_OUT: the widest layer's (a delta-net layer's may differ) */
    const uint64_t n_in[CALIB_G_COUNT] = {e->E, e->AOmax, e->E, e->F};
    uint64_t per_layer = 0;
    for (int g = 0; g < CALIB_G_COUNT; g++) per_layer += 2 * n_in[g];
    uint64_t total, bytes;
    size_t sz;
    st->g = calloc((size_t)st->n_layer * CALIB_G_COUNT, sizeof *st->g);
    if (!st->g || !mw_mul_u64(per_layer, st->n_layer, &total) ||
        !mw_mul_u64(total, sizeof(double), &bytes) || !mw_u64_to_size(bytes, &sz) ||
        !(st->buf = calloc(1, sz ? sz : 1)))
        return MW_FAIL(err, MW_E_NOMEM, MW_ERR_OFF_NONE, "statistics");
    double *p = st->buf;
    for (uint32_t il = 0; il < st->n_layer; il++)
        for (int g = 0; g < CALIB_G_COUNT; g++) {
            struct calib_group_stats *gs = &st->g[(uint64_t)il * CALIB_G_COUNT + g];
            gs->n_in = n_in[g];
            if (g == CALIB_G_ATTN_OUT) /* this layer's own width */
                gs->n_in = rt_layer_is_recurrent(e->hp, il) ? e->hp->ssm_d_inner : e->Q;
            if (e->g4 && g == CALIB_G_ATTN_OUT) /* gemma4: head size and FFN per layer */
                gs->n_in = (uint64_t)e->hp->n_head * rt_layer_head_dim(e->hp, il);
            if (e->g4 && g == CALIB_G_FFN_DOWN)
                gs->n_in = calib__model_slot_rows(e->m, il, CALIB_T_WGATE);
            gs->sum_sq = p;
            p += n_in[g];
            gs->sum_abs = p;
            p += n_in[g];
        }
    if (e->g4) {
        enum mw_status s = calib__g4_stats_alloc(e, err);
        if (s) return s;
    }
    /* MoE: per expert, the gate/up input (E) and the down input (FX) */
    st->n_expert = (uint32_t)e->NX;
    st->shexp = e->NX && e->F && !e->g4; /* gemma4's dense MLP is no shared expert */
    if (e->NX) {
        uint64_t ng, xf, xb;
        if (!mw_mul_u64((uint64_t)st->n_layer * 2, e->NX, &ng) ||
            !mw_mul_u64(e->E + e->FX, 2 * e->NX, &xf) || !mw_mul_u64(xf, st->n_layer, &xf) ||
            !mw_mul_u64(xf, sizeof(double), &xb) || !mw_u64_to_size(xb, &sz) ||
            ng > SIZE_MAX / sizeof *st->xg || !(st->xg = calloc((size_t)ng, sizeof *st->xg)) ||
            !(st->xbuf = calloc(1, sz ? sz : 1)))
            return MW_FAIL(err, MW_E_NOMEM, MW_ERR_OFF_NONE, "expert statistics");
        double *q = st->xbuf;
        for (uint64_t i = 0; i < ng; i++) {
            struct calib_group_stats *gs = &st->xg[i];
            gs->n_in = (i / e->NX) % 2 ? e->FX : e->E;
            gs->sum_sq = q;
            q += gs->n_in;
            gs->sum_abs = q;
            q += gs->n_in;
        }
    }
    return MW_OK;
}
