/*
 * calib/calib_mem.c — the device memory formula (calib.h "memory budget"):
 * what the runtime takes for a model and a context (rt_mem_estimate: the
 * runtime's own allocation list), a fixed base, and the share of a device's
 * RAM an app can use. tests/check_calib.c compares it with rt_ctx_mem() on
 * a real model.
 */
#include "calib/calib_int.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

void calib_mem_arch_from_hparams(const struct rt_hparams *hp, uint64_t n_bias_floats,
                                 struct calib_mem_arch *out)
{
    memset(out, 0, sizeof *out);
    out->n_layer = hp->n_layer;
    out->n_embd = hp->n_embd;
    out->n_ff = hp->n_ff;
    out->n_head = hp->n_head;
    out->n_head_kv = hp->n_head_kv;
    out->head_dim = hp->head_dim;
    out->n_rot = hp->n_rot;
    out->n_vocab = hp->n_vocab;
    out->n_bias_floats = n_bias_floats;
    out->hp = *hp;
}

void calib_mem_kv_layout(const struct calib_mem_arch *a, uint32_t n_ctx, uint32_t n_batch,
                         uint32_t *n_swa_layers, uint32_t *swa_rows)
{
    struct rt_hparams hp = a->hp;
    hp.n_layer = a->n_layer;
    if (!n_batch) n_batch = CALIB_MEM_DEFAULT_BATCH;
    if (n_batch > n_ctx) n_batch = n_ctx;
    *n_swa_layers = 0;
    for (uint32_t il = 0; il < hp.n_layer; il++) *n_swa_layers += rt_layer_is_swa(&hp, il);
    /* the runtime's ring (runtime/rt_kv.c, rt__kv_layer_cap): the window, plus one step */
    const uint64_t ring = hp.n_swa ? (uint64_t)hp.n_swa - 1 + n_batch : n_ctx;
    *swa_rows = *n_swa_layers ? (ring < n_ctx ? (uint32_t)ring : n_ctx) : 0;
}

/* Above this a size is treated as an overflow (as it always was here). */
#define MEM_MAX 18000000000000000000ull

enum mw_status calib_mem_estimate(const struct calib_mem_arch *a, const struct calib_mem_opts *o,
                                  struct calib_mem *out, struct mw_err *err)
{
    memset(out, 0, sizeof *out);
    if (o->n_ctx == 0) return MW_FAIL(err, MW_E_USAGE, MW_ERR_OFF_NONE, "context size 0");
    struct rt_hparams hp = a->hp; /* the family fields; the sizes are a's */
    hp.n_layer = a->n_layer, hp.n_embd = a->n_embd, hp.n_ff = a->n_ff;
    hp.n_head = a->n_head, hp.n_head_kv = a->n_head_kv, hp.head_dim = a->head_dim;
    hp.n_rot = a->n_rot, hp.n_vocab = a->n_vocab;
    const struct rt_ctx_opts co = {
        .n_ctx = o->n_ctx, .kv_type = o->kv_type, .n_batch = o->n_batch,
        .n_threads = o->n_threads ? o->n_threads : CALIB_MEM_DEFAULT_THREADS};
    struct rt_mem rm;
    enum mw_status s = rt_mem_estimate(&hp, a->n_bias_floats, &co, o->weight_type, &rm, err);
    if (s) return s;
    if (rm.kv_bytes > MEM_MAX || rm.scratch_bytes > MEM_MAX)
        return MW_FAIL(err, MW_E_VALUE, MW_ERR_OFF_NONE, "memory estimate overflows");
    out->kv_bytes = rm.kv_bytes;
    out->scratch_bytes = rm.scratch_bytes;
    out->owned_bytes = rm.owned_bytes;
    out->base_bytes = CALIB_MEM_BASE_BYTES;
    out->overhead_bytes = out->scratch_bytes + out->owned_bytes + out->base_bytes;
    return MW_OK;
}

uint64_t calib_mem_app_budget(uint64_t ram_bytes)
{
    return ram_bytes / 100 * CALIB_MEM_APP_PERCENT + ram_bytes % 100 * CALIB_MEM_APP_PERCENT / 100;
}

uint64_t calib_mem_weight_budget(uint64_t ram_bytes, const struct calib_mem *m)
{
    const uint64_t app = calib_mem_app_budget(ram_bytes);
    uint64_t need;
    if (!mw_add_u64(m->kv_bytes, m->overhead_bytes, &need) || need >= app) return 0;
    return app - need;
}

