/*
 * methods/methods_workdir.c — the --corpus driver's side of the work dir
 * (--work-dir, --resume): the run's identity, the journal's layers restored
 * into the driver's state, a record per finished layer. The journal itself
 * is methods_journal.c (methods_int.h).
 */
#include <stdio.h>
#include <string.h>

#define XXH_INLINE_ALL
#include <xxhash.h>

#include "methods/methods.h"
#include "methods/methods_int.h"

/* on_layer with a work dir: the layer's tensors are in tensors.bin; record
 * them, the AWQ tally and the layer's output hidden states. */
enum mw_status qm_on_layer_journal(struct quant_methods_src *h, struct calib_layer *ly,
                                   struct mw_err *err)
{
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
    if (quant_method_uses_gptq(mo->method)) {
        const float damp = mo->gptq.damp > 0 ? mo->gptq.damp : 0.01f;
        memcpy(&id->damp_bits, &damp, 4);
        id->gptq_block = mo->gptq.block ? mo->gptq.block : 128;
        id->act_order = qm_uses_act_order(mo);
    }
    id->awq_in_only = qm_uses_awq(mo->method) && mo->awq_in_only;
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
enum mw_status qm_open_work_dir(struct quant_methods_src *h, const struct quant_opts *qo,
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
    qm_say(qo, msg);
    *skip_run = info.n_done >= nl;
    ro->first_layer = info.n_done;
    if (info.n_done) {
        ro->load_hidden = mwj_load_hidden;
        ro->load_hidden_ud = h->j;
    }
    return MW_OK;
}
