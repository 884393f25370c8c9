/*
 * runtime/rt_kv.c — the KV cache: one K and one V row per layer and
 * position, stored as F16 (llama.cpp's default) or Q8_0 blocks (34 bytes
 * per 32 values: half the memory at a small accuracy cost), and the
 * sliding-window shift that makes room in a full context.
 *
 * Layout: k[layer][pos][kv_dim], v[layer][pos][kv_dim], kv_dim =
 * n_head_kv * head_dim; head h's part of a row starts at element h*head_dim
 * (for Q8_0 head_dim is a multiple of 32, so heads never share a block).
 * K rows hold keys after RoPE, at the position they were computed for.
 */
#include "runtime/rt_int.h"
#include "runtime/rt_ops.h"

#if defined(__aarch64__) && defined(__ARM_NEON) && !defined(MW_FORCE_SCALAR)
#include <arm_neon.h>
#endif

#include <stdlib.h>
#include <string.h>

#include "quant/quant.h"

bool rt_kv_type_parse(const char *s, enum rt_kv_type *out)
{
    if (strcmp(s, "f16") == 0 || strcmp(s, "F16") == 0) {
        *out = RT_KV_F16;
        return true;
    }
    if (strcmp(s, "q8_0") == 0 || strcmp(s, "Q8_0") == 0) {
        *out = RT_KV_Q8_0;
        return true;
    }
    return false;
}

const char *rt_kv_type_name(enum rt_kv_type t) { return t == RT_KV_Q8_0 ? "q8_0" : "f16"; }

static uint32_t kv_ggml_type(enum rt_kv_type t)
{
    return t == RT_KV_Q8_0 ? GGUF_TYPE_Q8_0 : GGUF_TYPE_F16;
}

uint64_t rt__kv_bytes(enum rt_kv_type t, const struct rt_hparams *hp, uint32_t n_ctx,
                      uint32_t n_batch, uint32_t kv_dim, bool *ok)
{
    const uint64_t rb = rt_row_bytes(kv_ggml_type(t), kv_dim);
    uint64_t rows = 0, a;
    for (uint32_t il = 0; il < hp->n_layer; il++)
        rows += rt__kv_layer_cap(hp, il, n_ctx, n_batch); /* <= 512 * 2^32: no overflow */
    *ok = rb != 0 && mw_mul_u64(rb, rows, &a) && mw_mul_u64(a, 2, &a);
    return *ok ? a : 0;
}

enum mw_status rt__kv_init(struct rt_kv *kv, enum rt_kv_type t, const struct rt_hparams *hp,
                           uint32_t n_ctx, uint32_t n_batch, uint32_t kv_dim,
                           struct mw_err *err)
{
    memset(kv, 0, sizeof *kv);
    bool ok;
    const uint64_t total = rt__kv_bytes(t, hp, n_ctx, n_batch, kv_dim, &ok);
    size_t half;
    if (!ok || !mw_u64_to_size(total / 2, &half))
        return MW_FAIL(err, MW_E_NOMEM, MW_ERR_OFF_NONE, "KV cache size overflows");
    kv->type = t;
    kv->n_ctx = n_ctx;
    kv->n_layer = hp->n_layer;
    kv->kv_dim = kv_dim;
    kv->row_bytes = rt_row_bytes(kv_ggml_type(t), kv_dim);
    kv->q8 = quant_traits_get(GGUF_TYPE_Q8_0);
    if (t == RT_KV_Q8_0 && (!kv->q8 || !kv->q8->from_float))
        return MW_FAIL(err, MW_E_UNSUPPORTED, MW_ERR_OFF_NONE, "q8_0 KV cache: no q8_0 codec");
    kv->row0 = calloc(hp->n_layer, sizeof *kv->row0);
    kv->cap = calloc(hp->n_layer, sizeof *kv->cap);
    if (!kv->row0 || !kv->cap) {
        rt__kv_free(kv);
        return MW_FAIL(err, MW_E_NOMEM, MW_ERR_OFF_NONE, "KV cache layer table");
    }
    uint64_t row = 0;
    for (uint32_t il = 0; il < hp->n_layer; il++) {
        kv->row0[il] = row;
        kv->cap[il] = rt__kv_layer_cap(hp, il, n_ctx, n_batch);
        row += kv->cap[il];
    }
    /* calloc: a fresh cache reads as zeros, never as uninitialised memory */
    kv->k = calloc(1, half ? half : 1); /* (every layer recurrent: no rows) */
    kv->v = calloc(1, half ? half : 1);
    if (!kv->k || !kv->v) {
        rt__kv_free(kv);
        return MW_FAIL(err, MW_E_NOMEM, MW_ERR_OFF_NONE,
                       "KV cache of %llu bytes (%s, %u positions): lower --ctx or use --kv-type q8_0",
                       (unsigned long long)total, rt_kv_type_name(t), n_ctx);
    }
    return MW_OK;
}

void rt__kv_free(struct rt_kv *kv)
{
    free(kv->k);
    free(kv->v);
    free(kv->row0);
    free(kv->cap);
    kv->k = kv->v = NULL;
    kv->row0 = NULL;
    kv->cap = NULL;
}

#if defined(__x86_64__) && defined(__GNUC__) && !defined(MW_FORCE_SCALAR)
#include <immintrin.h>
/* VCVTPH2PS: the exact conversion, as rt__h2f (only called when the CPU has
 * F16C, kv->f16c) */
__attribute__((target("avx,f16c"))) static uint32_t h2f_f16c(const uint8_t *p, uint32_t n, float *out)
{
    uint32_t i = 0;
    for (; i + 8 <= n; i += 8)
        _mm256_storeu_ps(out + i, _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(p + 2 * i))));
    return i;
}
__attribute__((target("avx,f16c"))) static uint32_t f2h_f16c(const float *x, uint32_t n, uint8_t *p)
{
    uint32_t i = 0;
    for (; i + 8 <= n; i += 8)
        _mm_storeu_si128((__m128i *)(p + 2 * i),
                         _mm256_cvtps_ph(_mm256_loadu_ps(x + i), _MM_FROUND_TO_NEAREST_INT));
    return i;
}
#define RT_KV_F16C 1
#else
#define RT_KV_F16C 0
#endif

/* An f32 row into the cache: rt__f2h per element, 8 (F16C, VCVTPS2PH) or 4
 * (NEON, FCVTN) at a time — the same round to nearest even, so the same
 * bits (a NaN stays a quiet NaN; F16C keeps its top payload bits where
 * rt__f2h writes 0x7e00). */
void rt__kv_store(const struct rt_kv *kv, uint8_t *row, const float *x)
{
    if (kv->type == RT_KV_Q8_0) {
        kv->q8->from_float(x, row, kv->kv_dim, NULL);
        return;
    }
    const uint32_t n = kv->kv_dim;
    uint32_t i = 0;
#if defined(__aarch64__) && defined(__ARM_NEON) && !defined(MW_FORCE_SCALAR)
    for (; i + 4 <= n; i += 4)
        vst1_u8(row + 2 * i, vreinterpret_u8_f16(vcvt_f16_f32(vld1q_f32(x + i))));
#endif
#if RT_KV_F16C
    if (kv->f16c) i = f2h_f16c(x, n, row);
#endif
    for (; i < n; i++) mw_put_le16(row + 2 * i, rt__f2h(x[i]));
}

void rt__kv_load(const struct rt_kv *kv, const uint8_t *row, uint32_t off, uint32_t n, float *out)
{
    if (kv->type == RT_KV_Q8_0) {
        kv->q8->to_float(row + (uint64_t)off / 32 * 34, out, n);
    } else {
        const uint8_t *p = row + 2 * (uint64_t)off;
        uint32_t i = 0;
#if defined(__aarch64__) && defined(__ARM_NEON) && !defined(MW_FORCE_SCALAR)
        /* FCVTL: the same exact conversion as rt__h2f's FCVT (little-endian) */
        for (; i + 4 <= n; i += 4)
            vst1q_f32(out + i, vcvt_f32_f16(vreinterpret_f16_u8(vld1_u8(p + 2 * i))));
#endif
#if RT_KV_F16C
        if (kv->f16c) i = h2f_f16c(p, n, out);
#endif
        for (; i < n; i++) out[i] = rt__h2f(mw_le16(p + 2 * i));
    }
}

// --- sliding window ---

enum mw_status rt_ctx_shift(struct rt_ctx *c, uint32_t n_keep, uint32_t n_drop, struct mw_err *err)
{
    if ((uint64_t)n_keep + n_drop > c->n_past)
        return MW_FAIL(err, MW_E_USAGE, MW_ERR_OFF_NONE,
                       "shift: keep %u + drop %u exceeds the %u positions in the cache", n_keep,
                       n_drop, c->n_past);
    if (n_drop == 0) return MW_OK;
    const struct rt_hparams *hp = &c->m->hp;
    const struct rt_kv *kv = &c->kv;
    if (hp->full_attn_interval > 0)
        return MW_FAIL(err, MW_E_UNSUPPORTED, MW_ERR_OFF_NONE,
                       "context shift: the recurrent layers of %s hold one state for the "
                       "whole sequence, which cannot drop positions; raise --ctx (the context "
                       "is full at %u positions)",
                       hp->arch_name, c->n_ctx);
    if (hp->n_swa > 0)
        return MW_FAIL(err, MW_E_UNSUPPORTED, MW_ERR_OFF_NONE,
                       "context shift: the sliding layers of %s keep only their window of %u "
                       "positions, so the cache cannot be shifted; raise --ctx (the context is "
                       "full at %u positions)",
                       hp->arch_name, hp->n_swa, c->n_ctx);
    /* Rotating by theta(p) then by theta(-n_drop) is a rotation by
     * theta(p - n_drop): the key as if computed at its new position (each
     * layer with its own RoPE parameters and factors). A pure rotation:
     * LongRoPE's attn_factor already scales the cached key once (llama.cpp's
     * K shift multiplies it in again; we do not). */
    for (uint32_t il = 0; il < kv->n_layer; il++) {
        struct rt_rope_params rp = rt_rope_layer_params(hp, il, c->n_ctx);
        rp.attn_factor = 1.0f;
        const float *ff = c->m->rope_freqs;
        if (hp->has_rope_long) ff = rp.long_factors ? c->m->rope_long : c->m->rope_short;
        rt_rope_cache_ex(hp->n_rot, &rp, ff, -(int32_t)n_drop, c->shift_rope);
        for (uint32_t p = n_keep + n_drop; p < c->n_past; p++) {
            rt__kv_load(kv, rt__kv_k(kv, il, p), 0, kv->kv_dim, c->shift_row);
            for (uint32_t h = 0; h < hp->n_head_kv; h++)
                rt_rope_apply(hp, c->shift_rope, c->shift_row + (uint64_t)h * hp->head_dim);
            rt__kv_store(kv, rt__kv_k(kv, il, p - n_drop), c->shift_row);
            memmove(rt__kv_v(kv, il, p - n_drop), rt__kv_v(kv, il, p), kv->row_bytes);
        }
    }
    c->n_past -= n_drop;
    return MW_OK;
}

void rt_ctx_reset(struct rt_ctx *c)
{
    c->n_past = 0;
    c->kv_lost = 0;
    c->state_lost = false;
    rt__ssm_reset(c);
}

void rt_ctx_truncate(struct rt_ctx *c, uint32_t n_past)
{
    if (n_past >= c->n_past) return;
    /* a recurrent state holds every position it has seen: only a rewind to the
     * start (a fresh state) is possible; rt_eval refuses to go on otherwise */
    if (c->n_rec > 0) {
        if (n_past == 0) rt_ctx_reset(c);
        else c->state_lost = true, c->n_past = n_past;
        return;
    }
    /* a sliding layer's ring may have overwritten positions the window of
     * n_past still needs: those are lost (rt_eval refuses to read them) */
    const struct rt_hparams *hp = &c->m->hp;
    for (uint32_t il = 0; il < c->kv.n_layer; il++) {
        const uint32_t cap = c->kv.cap[il];
        if (cap == 0 || cap >= c->n_ctx || c->n_past <= cap) continue; /* 0: shares a cache */
        const uint32_t oldest = c->n_past - cap; /* the oldest position still held */
        const uint32_t need = n_past >= hp->n_swa ? n_past - hp->n_swa + 1 : 0;
        if (need < oldest && c->kv_lost < oldest) c->kv_lost = oldest;
    }
    c->n_past = n_past;
}
