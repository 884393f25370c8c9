/*
 * calib/calib_plan.c — memory planning of calib_run: what a run allocates
 * (struct mem_plan), the samples per batch that fit --max-memory and
 * whether the run goes lean, and the planning queries of calib.h
 * (calib_run_peak_bytes, calib_run_batch_samples, calib_run_hidden_on_disk).
 */
#include "calib/calib_int.h"

/* What calib_run allocates, in bytes (long double: exact for any real
 * model, and absurd sizes are caught by the caller's range check). */
struct mem_plan {
    long double fixed;   /* statistics, RoPE table, one sample's attention output */
    long double hs;      /* hidden states T x E (in memory, or in the scratch file) */
    long double per_smp; /* batch scratch per sample of the batch */
    long double hsb;     /* per sample of the batch, lean: hidden states (hsb, and
                          * calib_layer_hidden's buffer when there are callbacks) */
    long double attn;    /* n_pos^2 attention scores per thread */
    long double embed;   /* transient, before the layers: vocabulary map, embedding rows */
    long double layer;   /* per layer: weights, norms, biases; X_o (T x Q) and one
                          * Hessian of the widest group when there is a callback */
    long double lean;    /* per layer, lean: norms, biases, the panel, the resident
                          * weights and one Hessian (see calib.h) */
};

static struct mem_plan mem_plan_of(const struct calib_engine *e, const struct calib_run_opts *o)
{
    struct mem_plan p;
    const long double T = (long double)e->T, P = e->n_pos, E = (long double)e->E;
    const long double Q = (long double)e->Q, KV = (long double)e->KV, F = (long double)e->F;
    const long double L = e->hp->n_layer;
    const long double NX = (long double)e->NX, FX = (long double)e->FX, K = (long double)e->K;
    const bool cb = o->on_group || o->on_layer;
    /* gated delta net and gated attention (calib_ssm.c; all 0 elsewhere): the
     * qkv/conv rows C, the gated q rows 2 Q, the gate and the attention output
     * AOmax wide (Q, or the delta net's Hv x S), beta and alpha */
    const long double C = (long double)e->C, AO = (long double)e->AOmax;
    const long double HV = (long double)e->Hv, S = (long double)e->Sd;
    const bool gate = e->hp->attn_out_gate;
    const long double qg = gate && 2.0L * Q > C ? 2.0L * Q : C, gt = gate || e->C ? AO : 0;
    const long double wide = calib__max3(e->E, e->AOmax, e->F > e->FX ? e->F : e->FX);
    p.fixed = 8.0L * L * 2.0L * (2.0L * E + Q + F) +
              L * CALIB_G_COUNT * (long double)sizeof(struct calib_group_stats) +
              (long double)sizeof(struct calib_stats) +
              (e->hp->n_swa ? 8.0L : 4.0L) * P * e->hp->n_rot + 4.0L * P * AO;
    p.hs = 4.0L * T * E;
    /* xin, q, qg, gt, ba, k, v, att, g, u, y, ubuf: rows_b rows each */
    p.per_smp = 4.0L * P * (E + Q + qg + gt + 2.0L * HV + 2.0L * KV + AO + 2.0L * F + E + wide);
    p.hsb = 4.0L * P * E * (cb ? 2.0L : 1.0L);
    /* per thread: the scores, and the delta net's conv and recurrent state */
    p.attn = 4.0L * P * P + 4.0L * (long double)calib__ssm_thread_floats(e);
    const long double n_ids = T < e->hp->n_vocab ? T : (long double)e->hp->n_vocab;
    p.embed = 4.0L * e->hp->n_vocab + 4.0L * n_ids + 1.0L + 4.0L * n_ids * E + 2.0L * e->hp->n_rot;
    /* weights + every optional bias + the two norms */
    const long double small = 4.0L * ((Q + 2.0L * KV + E + 2.0L * F + E) + 2.0L * E +
                                      2.0L * e->hd + 2.0L * E);
    /* the larger layer kind: gated attention (q rows 2 Q) or the delta net's
     * attn_qkv, attn_gate, ssm_out, beta/alpha, conv kernel and small vectors */
    const long double att_w = (gate ? 3.0L : 2.0L) * Q * E + 2.0L * KV * E;
    const long double rec_w = e->C ? C * E + 2.0L * HV * S * E + 2.0L * HV * E +
                                         C * (long double)e->Kc + 2.0L * HV + S
                                   : 0;
    p.layer = 4.0L * ((att_w > rec_w ? att_w : rec_w) + 3.0L * F * E) + small;
    if (o->on_group) p.layer += 4.0L * T * AO + 4.0L * wide * wide;
    if (e->NX) {
        /* MoE: expert statistics, chunk scratch; per batch row the router
         * logits; per layer the router, the stacked experts, the shared gate,
         * and per row its routing, gate logit, FFN output and expert list */
        p.fixed += 16.0L * L * NX * (E + FX) +
                   L * 2.0L * NX * (long double)sizeof(struct calib_group_stats) +
                   4.0L * CALIB_XCHUNK * (2.0L * E + 2.0L * FX) + 4.0L * NX;
        p.per_smp += 4.0L * P * NX;
        p.layer += 4.0L * (3.0L * NX * FX * E + NX * E + E) + T * (8.0L * K + 4.0L * E + 16.0L);
        if (e->g4) p.layer += 4.0L * T * E; /* the dense MLP's output beside the experts' */
    }
    if (e->g4) {
        /* gemma4 (calib_g4fwd.c): the per-layer inputs of every row, the K and V
         * of the two layers the shared-KV layers read, the sliding layers' RoPE
         * table and the per-layer input statistics; per batch row the gate rows;
         * per layer inp_gate, proj, post_norm, layer_output_scale; before the
         * layers (with the embedding step's rows) per_layer_model_proj, the
         * table rows of the tokens that occur, the vocabulary maps */
        const long double Pl = e->hp->n_embd_per_layer, LP = Pl * L;
        p.fixed += 4.0L * T * LP + (e->hp->n_kv_shared ? 16.0L * T * KV : 0.0L) +
                   4.0L * P * e->hp->n_rot_swa + 16.0L * L * (E + Pl) + 16.0L * E + L;
        p.per_smp += 4.0L * P * Pl;
        p.layer += 4.0L * (2.0L * Pl * E + E + 1.0L);
        if (Pl > 0) p.embed += 4.0L * LP * E + 4.0L * n_ids * LP + 4.0L * e->hp->n_vocab;
    }
    /* lean: the weights one tensor at a time (the largest two when a callback
     * holds a fold's pair), one Hessian with the largest weight reading it */
    const long double qw = gate && 2.0L * Q > C ? 2.0L * Q : (Q > C ? Q : C); /* widest input */
    long double w[4] = {e->hp->fused_qkv ? 4.0L * (Q + 2.0L * KV) * E : 4.0L * qw * E, /* q/k/v */
                        4.0L * E * AO,                                            /* o */
                        e->hp->fused_gate_up ? 8.0L * F * E : 4.0L * F * E,       /* gate/up */
                        4.0L * E * F};                                            /* down */
    const long double n_in[4] = {E, AO, E, F};
    long double w1 = 0, w2 = 0, hw = 0;
    for (int g = 0; g < 4; g++) {
        if (w[g] > w1) {
            w2 = w1;
            w1 = w[g];
        } else if (w[g] > w2) {
            w2 = w[g];
        }
        const long double x = 4.0L * n_in[g] * n_in[g] + w[g];
        if (x > hw) hw = x;
    }
    if (!e->hp->fused_gate_up && 4.0L * F * E > w2) w2 = 4.0L * F * E; /* gate + up */
    long double held = w1;
    if (o->on_group) {
        held = hw;
        if (w1 + w2 + 4.0L * E * E > held) held = w1 + w2 + 4.0L * E * E;
    }
    p.lean = small + 4.0L * (long double)calib__panel_floats(e) + held;
    return p;
}

static long double mem_plan_bytes(const struct mem_plan *p, bool file, uint32_t spb,
                                  unsigned n_threads)
{
    const long double lay = file ? p->lean : p->layer;
    const long double phase = p->embed > lay ? p->embed : lay;
    return p->fixed + (file ? p->hsb * spb : p->hs) + p->per_smp * spb + p->attn * n_threads +
           phase;
}

static uint64_t ld_bytes(long double b) { return b >= 1.8e19L ? UINT64_MAX : (uint64_t)b; }

/* Largest spb <= want with the plan within max (1 thread), 0 if none. */
static uint32_t fit_spb(const struct mem_plan *p, bool file, uint32_t want, long double max)
{
    const long double room = max - mem_plan_bytes(p, file, 0, 1);
    const long double per = p->per_smp + (file ? p->hsb : 0);
    const long double fit = room > 0 ? room / per : 0;
    return fit >= want ? want : (uint32_t)fit;
}

/* Samples per batch under opt->max_memory, and whether the run is lean
 * (hidden states, attention outputs and weights in scratch files). In
 * memory first: the requested batch, else fewer samples per batch; then
 * lean (o->lean: lean at once). The choice ignores the thread count (the
 * results do not depend on it anyway); the per-thread attention scratch is
 * then checked on top. 0: the bound cannot be met (err, which may be NULL,
 * says why and what to change). */
uint32_t calib__plan_batch(const struct calib_engine *e, const struct calib_run_opts *o,
                           bool *file, struct mw_err *err)
{
    const struct mem_plan p = mem_plan_of(e, o);
    const long double max = (long double)o->max_memory;
    const unsigned nt = o->n_threads ? o->n_threads : 1;
    *file = o->lean;
    if (!o->max_memory) return e->spb;
    uint32_t spb = 0;
    if (!o->lean) {
        if (mem_plan_bytes(&p, false, e->spb, nt) <= max) return e->spb;
        spb = fit_spb(&p, false, e->spb, max);
    }
    if (spb == 0) {
        spb = fit_spb(&p, true, e->spb, max);
        *file = true;
    }
    if (spb == 0 || mem_plan_bytes(&p, *file, spb, nt) > max) {
        mw_err_clear(err); /* not about a file read earlier */
        mw_err_set_path(err, calib_model_path(e->m));
    }
    if (spb == 0) {
        const long double least = mem_plan_bytes(&p, true, 1, 1);
        MW_FAIL(err, MW_E_NOMEM, MW_ERR_OFF_NONE,
                "calibration needs at least %llu bytes (%.1f MiB: tables %.1f MiB, a layer "
                "%.1f MiB (%s), a sample per batch %.1f MiB), above --max-memory %llu bytes: "
                "use fewer --samples or a shorter --seq-len, or raise --max-memory",
                (unsigned long long)ld_bytes(least), (double)(least / 1048576.0L),
                (double)(p.fixed / 1048576.0L), (double)(p.lean / 1048576.0L),
                o->on_group ? "lean: the largest Hessian and its weight" : "lean: one weight",
                (double)((p.per_smp + p.hsb) / 1048576.0L), (unsigned long long)o->max_memory);
        return 0;
    }
    if (mem_plan_bytes(&p, *file, spb, nt) > max) {
        MW_FAIL(err, MW_E_NOMEM, MW_ERR_OFF_NONE,
                "with %u threads the attention scratch (%.1f MiB) does not fit in --max-memory "
                "%llu bytes (%.1f MiB) next to %u samples per batch: use fewer --threads, or "
                "raise --max-memory to %llu bytes",
                nt, (double)(p.attn * nt / 1048576.0L), (unsigned long long)o->max_memory,
                (double)(max / 1048576.0L), spb,
                (unsigned long long)ld_bytes(mem_plan_bytes(&p, *file, spb, nt)));
        return 0;
    }
    return spb;
}

/* The planning queries' one setup: the run of m over s with o (NULL: the
 * defaults) as calib_run plans it; *e its dimensions, *opt its options,
 * *file whether it goes lean; the samples per batch (0: --max-memory
 * cannot be met). */
static uint32_t plan_query(const struct calib_model *m, const struct calib_samples *s,
                           const struct calib_run_opts *o, struct calib_engine *e,
                           struct calib_run_opts *opt, bool *file)
{
    *e = (struct calib_engine){0};
    *opt = o ? *o : (struct calib_run_opts){0};
    calib__engine_dims(e, m, s, opt);
    *file = false;
    return calib__plan_batch(e, opt, file, NULL);
}

uint64_t calib_run_peak_bytes(const struct calib_model *m, const struct calib_samples *s,
                              const struct calib_run_opts *o)
{
    struct calib_engine e;
    struct calib_run_opts opt;
    bool file;
    const uint32_t spb = plan_query(m, s, o, &e, &opt, &file);
    const struct mem_plan p = mem_plan_of(&e, &opt);
    if (spb == 0) file = opt.max_memory || opt.lean;
    return ld_bytes(
        mem_plan_bytes(&p, file, spb ? spb : 1, opt.n_threads ? opt.n_threads : 1));
}

uint32_t calib_run_batch_samples(const struct calib_model *m, const struct calib_samples *s,
                                 const struct calib_run_opts *o)
{
    struct calib_engine e;
    struct calib_run_opts opt;
    bool file;
    return plan_query(m, s, o, &e, &opt, &file);
}

bool calib_run_hidden_on_disk(const struct calib_model *m, const struct calib_samples *s,
                              const struct calib_run_opts *o)
{
    struct calib_engine e;
    struct calib_run_opts opt;
    bool file;
    return plan_query(m, s, o, &e, &opt, &file) && file;
}

/* stands for quant --corpus's per-group callback: the plan only asks
 * whether there is one */
static enum mw_status no_group(void *ud, struct calib_layer *ly, enum calib_group g,
                               struct mw_err *err)
{
    (void)ud, (void)ly, (void)g, (void)err;
    return MW_OK;
}

void calib_run_need(const struct rt_hparams *hp, uint32_t n_samples, uint32_t n_pos, bool cb,
                    unsigned n_threads, uint64_t *peak, uint64_t *least)
{
    struct calib_engine e = {0};
    const struct calib_run_opts o = {.n_threads = n_threads, .on_group = cb ? no_group : NULL};
    calib__engine_dims_hp(&e, hp, n_samples ? n_samples : 1, n_pos ? n_pos : 1, &o);
    const struct mem_plan p = mem_plan_of(&e, &o);
    const unsigned nt = n_threads ? n_threads : 1;
    const bool lean_ok = !hp->n_expert && !hp->full_attn_interval;
    *peak = ld_bytes(mem_plan_bytes(&p, false, e.spb, nt));
    *least = ld_bytes(mem_plan_bytes(&p, lean_ok, 1, nt));
}
