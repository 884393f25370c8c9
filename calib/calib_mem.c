/*
 * calib/calib_mem.c — the device memory formula (calib.h "memory budget"):
 * what runtime/rt_ctx_init allocates for a context, the KV cache, and the
 * share of a device's RAM an app can use. Kept in step with
 * runtime/rt_forward.c (rt_ctx_init's xcalloc list) and runtime/rt_kv.c
 * (rt__kv_bytes); tests/check_calib.c compares it with rt_ctx_mem() on a
 * real model.
 */
#include "calib/calib_int.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

/* Bytes of one row of n elements of ggml type t (0 if invalid). */
static uint64_t row_bytes(uint32_t t, uint64_t n)
{
    const struct gguf_type_info *ti = gguf_type_get(t);
    if (!ti || ti->blck == 0) return 0;
    const uint64_t blocks = (n + ti->blck - 1) / ti->blck;
    return blocks * ti->type_size;
}

/* The runtime's activation format for weights of type t (rt_kernels.h). */
static uint32_t partner_type(uint32_t t)
{
    switch (t) {
    case GGUF_TYPE_F32:
    case GGUF_TYPE_F16:
    case GGUF_TYPE_BF16: return t;
    case GGUF_TYPE_Q8_0:
    case GGUF_TYPE_Q4_0:
    case GGUF_TYPE_Q5_0:
    case GGUF_TYPE_IQ4_NL: return GGUF_TYPE_Q8_0;
    case GGUF_TYPE_Q4_1:
    case GGUF_TYPE_Q5_1: return GGUF_TYPE_Q8_1;
    default: return GGUF_TYPE_Q8_K; /* k-quants, IQ4_XS */
    }
}

static uint64_t round16(uint64_t x) { return (x + 15) & ~(uint64_t)15; }

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
}

enum mw_status calib_mem_estimate(const struct calib_mem_arch *a, const struct calib_mem_opts *o,
                                  struct calib_mem *out, struct mw_err *err)
{
    memset(out, 0, sizeof *out);
    if (o->n_ctx == 0) return MW_FAIL(err, MW_E_USAGE, MW_ERR_OFF_NONE, "context size 0");
    if (a->n_head_kv == 0 || a->n_head % a->n_head_kv != 0 || a->head_dim == 0)
        return MW_FAIL(err, MW_E_USAGE, MW_ERR_OFF_NONE,
                       "%u heads are not a multiple of %u kv heads", a->n_head, a->n_head_kv);
    if (o->kv_type == RT_KV_Q8_0 && a->head_dim % 32 != 0)
        return MW_FAIL(err, MW_E_USAGE, MW_ERR_OFF_NONE,
                       "a q8_0 KV cache needs a head size that is a multiple of 32 "
                       "(this model: %u)",
                       a->head_dim);
    const unsigned nt = o->n_threads ? o->n_threads : CALIB_MEM_DEFAULT_THREADS;
    uint64_t B = o->n_batch ? o->n_batch : CALIB_MEM_DEFAULT_BATCH;
    if (B > o->n_ctx) B = o->n_ctx;
    const uint64_t E = a->n_embd, F = a->n_ff, hd = a->head_dim;
    const uint64_t Q = (uint64_t)a->n_head * hd, KV = (uint64_t)a->n_head_kv * hd;
    const uint64_t R = a->n_head / a->n_head_kv, C = o->n_ctx;
    (void)C;
    const uint32_t kvt = o->kv_type == RT_KV_Q8_0 ? GGUF_TYPE_Q8_0 : GGUF_TYPE_F16;
    /* long double keeps the sums exact for any real model and lets us detect
     * absurd ones without a chain of checked products */
    long double kv = 2.0L * a->n_layer * (long double)C * (long double)row_bytes(kvt, KV);
    long double fl = (long double)B * (E + (E > Q ? E : Q) + Q + 2 * KV + 2 * F + a->n_rot) +
                     a->n_vocab + KV + a->n_rot;
    uint64_t big = E > F ? E : F;
    big = big > Q ? big : Q;
    const uint32_t wt = o->weight_type;
    long double scratch = 4.0L * fl + 3.0L * B * round16(row_bytes(partner_type(wt), big));
    const uint64_t qact = round16(row_bytes(kvt, hd));
    /* per thread (flash-attention tiles of RT_FA_TILE = 64 positions): KQ
     * scores (R, 64), V rows (64, hd), a K row, f32 and f16 accumulators
     * (R, hd), max/sum (2R), the mat-vec tile (16 floats), the query in the
     * K cache's format (R rows), and the 72-byte per-thread struct */
    scratch += (long double)nt * (4.0L * (R * 64 + 64 * hd + hd + R * hd + 2 * R + 16) +
                                  2.0L * R * hd + (long double)R * qact + 72);
    const long double owned =
        4.0L * ((2.0L * a->n_layer + 1) * E + (long double)a->n_bias_floats) +
        512.0L * a->n_layer + 2048.0L; /* per-layer views and the model struct (bounds) */
    if (kv > 1.8e19L || scratch > 1.8e19L || row_bytes(kvt, KV) == 0 ||
        row_bytes(partner_type(wt), big) == 0)
        return MW_FAIL(err, MW_E_VALUE, MW_ERR_OFF_NONE, "memory estimate overflows");
    out->kv_bytes = (uint64_t)kv;
    out->scratch_bytes = (uint64_t)scratch;
    out->owned_bytes = (uint64_t)owned;
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

