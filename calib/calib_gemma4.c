/*
 * calib/calib_gemma4.c — Gemma 4's shapes and memory (calib_gemma4.h): from
 * the gemma4.* keys llama.cpp's converter writes (families-2026.md 2c) or
 * from config.json, the per-layer KV cache, and the runtime's overhead.
 */
#include "calib/calib_gemma4.h"

#include <stdio.h>
#include <string.h>

#include "gguf/gguf.h"
#include "hf/hf.h"

bool calib_g4_gguf_is(const struct gguf_file *f)
{
    const char *a = NULL;
    uint64_t n = 0;
    struct mw_err e;
    mw_err_clear(&e);
    return f && gguf_get_str(f, "general.architecture", &a, &n, &e) == MW_OK && n == 6 &&
           memcmp(a, "gemma4", 6) == 0;
}

static enum mw_status key_fail(struct mw_err *err, const char *key, const char *what)
{
    mw_err_set_where(err, "key '%s'", key);
    return MW_FAIL(err, MW_E_FORMAT, MW_ERR_OFF_NONE, "%s", what);
}

/* key as a u32 (required or, when absent, dflt) */
static enum mw_status get_u32(const struct gguf_file *f, const char *key, bool required,
                              uint32_t dflt, uint32_t *out, struct mw_err *err)
{
    const int64_t i = gguf_kv_find(f, key);
    uint64_t v;
    if (i < 0) {
        if (required) return key_fail(err, key, "missing (a gemma4 file has it)");
        *out = dflt;
        return MW_OK;
    }
    if (!gguf_value_as_u64(gguf_kv_value(f, (uint64_t)i), &v) || v > UINT32_MAX)
        return key_fail(err, key, "expected an unsigned 32-bit integer");
    *out = (uint32_t)v;
    return MW_OK;
}

/* key as one u32 per layer: an array of n, or one value for every layer */
static enum mw_status get_per_layer(const struct gguf_file *f, const char *key, uint32_t n,
                                    uint32_t *out, struct mw_err *err)
{
    const int64_t i = gguf_kv_find(f, key);
    if (i < 0) return key_fail(err, key, "missing (a gemma4 file has it)");
    const struct gguf_value *v = gguf_kv_value(f, (uint64_t)i);
    uint64_t x;
    if (v->type != GGUF_VT_ARRAY) {
        if (!gguf_value_as_u64(v, &x) || x > UINT32_MAX)
            return key_fail(err, key, "expected an unsigned integer or one per layer");
        for (uint32_t il = 0; il < n; il++) out[il] = (uint32_t)x;
        return MW_OK;
    }
    if (v->n != n) {
        char m[96];
        snprintf(m, sizeof m, "%llu values for %u layers", (unsigned long long)v->n, n);
        return key_fail(err, key, m);
    }
    for (uint32_t il = 0; il < n; il++) {
        struct gguf_value e;
        if (!gguf_value_elem(v, il, &e) || !gguf_value_as_u64(&e, &x) || x > UINT32_MAX)
            return key_fail(err, key, "expected unsigned integers");
        out[il] = (uint32_t)x;
    }
    return MW_OK;
}

enum mw_status calib_g4_from_gguf(const struct gguf_file *f, struct calib_g4 *g,
                                  struct mw_err *err)
{
    memset(g, 0, sizeof *g);
    enum mw_status s = get_u32(f, "gemma4.block_count", true, 0, &g->n_layer, err);
    if (s == MW_OK && (g->n_layer == 0 || g->n_layer > CALIB_G4_MAX_LAYERS))
        return key_fail(err, "gemma4.block_count", "expected 1..512 layers");
    if (s == MW_OK) s = get_u32(f, "gemma4.embedding_length", true, 0, &g->n_embd, err);
    if (s == MW_OK) s = get_u32(f, "gemma4.attention.head_count", true, 0, &g->n_head, err);
    if (s == MW_OK) s = get_u32(f, "gemma4.context_length", false, 0, &g->n_ctx_train, err);
    if (s == MW_OK) s = get_u32(f, "gemma4.attention.key_length", true, 0, &g->head_dim_full, err);
    if (s == MW_OK)
        s = get_u32(f, "gemma4.attention.key_length_swa", true, 0, &g->head_dim_swa, err);
    if (s == MW_OK) s = get_u32(f, "gemma4.attention.sliding_window", true, 0, &g->n_swa, err);
    if (s == MW_OK)
        s = get_u32(f, "gemma4.attention.shared_kv_layers", false, 0, &g->n_kv_shared, err);
    if (s == MW_OK)
        s = get_u32(f, "gemma4.embedding_length_per_layer_input", false, 0, &g->n_embd_per_layer,
                    err);
    if (s == MW_OK) s = get_u32(f, "gemma4.expert_count", false, 0, &g->n_expert, err);
    if (s == MW_OK) s = get_u32(f, "gemma4.expert_used_count", false, 0, &g->n_expert_used, err);
    if (s == MW_OK) s = get_u32(f, "gemma4.expert_feed_forward_length", false, 0, &g->n_ff_exp, err);
    if (s == MW_OK)
        s = get_per_layer(f, "gemma4.attention.head_count_kv", g->n_layer, g->n_head_kv, err);
    if (s == MW_OK) s = get_per_layer(f, "gemma4.feed_forward_length", g->n_layer, g->n_ff, err);
    if (s != MW_OK) return s;
    if (g->n_kv_shared >= g->n_layer)
        return key_fail(err, "gemma4.attention.shared_kv_layers",
                        "not below block_count (some layer must own its K/V)");
    const char *pk = "gemma4.attention.sliding_window_pattern";
    const int64_t pi = gguf_kv_find(f, pk);
    if (pi < 0) return key_fail(err, pk, "missing (a gemma4 file has it)");
    const struct gguf_value *pv = gguf_kv_value(f, (uint64_t)pi);
    if (pv->type != GGUF_VT_ARRAY || pv->n != g->n_layer)
        return key_fail(err, pk, "expected one bool per layer");
    for (uint32_t il = 0; il < g->n_layer; il++) {
        struct gguf_value e;
        if (!gguf_value_elem(pv, il, &e) || !gguf_value_as_bool(&e, &g->swa[il]))
            return key_fail(err, pk, "expected one bool per layer");
    }
    const int64_t te = gguf_tensor_find(f, "token_embd.weight");
    if (te >= 0) {
        const struct gguf_tensor *t = gguf_tensor_get(f, (uint64_t)te);
        g->n_vocab = t->ne[1] <= UINT32_MAX ? (uint32_t)t->ne[1] : UINT32_MAX;
    }
    return MW_OK;
}

void calib_g4_from_hf(const struct hf_config *c, struct calib_g4 *g)
{
    memset(g, 0, sizeof *g);
    g->n_layer = c->n_layer <= CALIB_G4_MAX_LAYERS ? c->n_layer : CALIB_G4_MAX_LAYERS;
    g->n_embd = c->n_embd;
    g->n_head = c->n_head;
    g->n_vocab = c->n_vocab;
    g->n_ctx_train = c->n_ctx;
    g->head_dim_swa = c->head_dim;
    g->head_dim_full = c->g4_head_dim_full;
    g->n_swa = c->n_swa;
    g->n_kv_shared = c->g4_n_kv_shared;
    g->n_embd_per_layer = c->g4_n_embd_per_layer;
    g->n_expert = c->n_expert;
    g->n_expert_used = c->n_expert_used;
    g->n_ff_exp = c->n_ff_exp;
    for (uint32_t il = 0; il < g->n_layer; il++) {
        g->swa[il] = (c->g4_swa[il / 64] >> (il % 64)) & 1;
        g->n_head_kv[il] = !g->swa[il] && c->g4_n_head_kv_full ? c->g4_n_head_kv_full : c->n_head_kv;
        /* use_double_wide_mlp: twice the width in the shared-KV layers */
        g->n_ff[il] = c->n_ff * (c->g4_double_wide_mlp && il >= g->n_layer - g->n_kv_shared ? 2 : 1);
    }
}

void calib_g4_hparams_from_hf(const struct hf_config *c, struct rt_hparams *hp)
{
    struct calib_g4 g;
    calib_g4_from_hf(c, &g);
    /* runtime/rt_model_hparams.c's family fields and rt_model_gemma4.c's
     * read_gemma4, over the keys hf__gemma4_kvs writes */
    hp->arch = RT_ARCH_GEMMA4;
    hp->rope_neox = hp->qk_norm = hp->post_norms = hp->embd_scale = true;
    hp->act = RT_ACT_GELU_TANH;
    hp->attn_scale = 1.0f;
    hp->rope_freq_scale = hp->rope_freq_scale_swa = 1.0f;
    hp->head_dim = hp->n_rot = c->g4_head_dim_full;
    hp->head_dim_swa = hp->n_rot_swa = c->head_dim;
    hp->rope_base = c->rope_theta;
    hp->rope_base_swa = c->has_rope_theta_swa ? c->rope_theta_swa : c->rope_theta;
    hp->n_swa = c->swa_pattern != 1 ? c->n_swa : 0;
    hp->swa_per_layer = true;
    memset(hp->swa_layers, 0, sizeof hp->swa_layers);
    uint32_t kv_swa = 0, kv_full = 0, ff = 0;
    for (uint32_t il = 0; il < g.n_layer; il++) {
        if (g.swa[il]) hp->swa_layers[il / 8] |= (uint8_t)(1u << (il % 8));
        *(g.swa[il] ? &kv_swa : &kv_full) = g.n_head_kv[il];
        if (g.n_ff[il] > ff) ff = g.n_ff[il];
    }
    hp->n_head_kv = kv_full ? kv_full : kv_swa;
    hp->n_head_kv_swa = kv_swa ? kv_swa : hp->n_head_kv;
    hp->n_ff = ff;
    hp->final_softcap = c->final_softcap;
    hp->n_kv_shared = c->g4_n_kv_shared;
    hp->n_embd_per_layer = c->g4_n_embd_per_layer;
    hp->tied_output = true;
    hp->has_rope_freqs = true; /* the converter generates the proportional RoPE's factors */
    if (hp->n_expert) hp->n_ff_shexp = hp->n_ff;
    if (hp->n_expert) hp->n_ff_exp = c->n_ff_exp; /* moe_intermediate_size */
}

bool calib_g4_on_flash(const char *name)
{
    return strcmp(name, "per_layer_token_embd.weight") == 0;
}

uint64_t calib_g4_kv_bytes(const struct calib_g4 *g, uint32_t n_ctx, uint32_t n_batch,
                           enum rt_kv_type kv, uint32_t *n_own, uint32_t *n_own_swa,
                           uint32_t *swa_rows)
{
    if (!n_batch) n_batch = CALIB_MEM_DEFAULT_BATCH;
    if (n_batch > n_ctx) n_batch = n_ctx;
    const uint64_t ring = g->n_swa ? (uint64_t)g->n_swa - 1 + n_batch : n_ctx;
    const uint32_t rows_swa = ring < n_ctx ? (uint32_t)ring : n_ctx;
    const uint32_t own = g->n_layer - g->n_kv_shared;
    /* the runtime's cache has one row width, the widest layer's (rt_kv_dim_max:
     * kv heads x head dim of the full or the sliding layers); llama.cpp's
     * rows are each layer's own width, so its sliding layers take less */
    uint64_t dim = 0;
    for (uint32_t il = 0; il < g->n_layer; il++) {
        const uint64_t d = (uint64_t)g->n_head_kv[il] * (g->swa[il] ? g->head_dim_swa
                                                                    : g->head_dim_full);
        if (d > dim) dim = d;
    }
    const uint64_t row = kv == RT_KV_Q8_0 ? dim / 32 * 34 : dim * 2;
    bool ok = kv != RT_KV_Q8_0 || dim % 32 == 0;
    uint32_t own_swa = 0;
    uint64_t total = 0;
    for (uint32_t il = 0; il < own && ok; il++) {
        own_swa += g->swa[il];
        uint64_t b;
        ok = mw_mul_u64(row, g->swa[il] ? rows_swa : n_ctx, &b) && mw_mul_u64(b, 2, &b) &&
             mw_add_u64(total, b, &total);
    }
    if (n_own) *n_own = own;
    if (n_own_swa) *n_own_swa = own_swa;
    if (swa_rows) *swa_rows = own_swa ? rows_swa : 0;
    return ok ? total : 0;
}

enum mw_status calib_g4_mem_estimate(const struct calib_g4 *g, const struct calib_mem_opts *o,
                                     struct calib_mem *out, struct mw_err *err)
{
    struct calib_mem_arch a = {0};
    a.n_layer = g->n_layer;
    a.n_embd = g->n_embd;
    a.n_head = g->n_head;
    a.n_vocab = g->n_vocab;
    a.head_dim = g->head_dim_full > g->head_dim_swa ? g->head_dim_full : g->head_dim_swa;
    a.n_rot = a.head_dim;
    a.n_head_kv = 1;
    for (uint32_t il = 0; il < g->n_layer; il++) {
        if (g->n_ff[il] > a.n_ff) a.n_ff = g->n_ff[il];
        if (g->n_head_kv[il] > a.n_head_kv && g->n_head % g->n_head_kv[il] == 0)
            a.n_head_kv = g->n_head_kv[il];
    }
    if (g->n_ff_exp > a.n_ff) a.n_ff = g->n_ff_exp;
    a.hp.n_expert = g->n_expert;
    a.hp.n_expert_used = g->n_expert_used;
    a.hp.n_ff_exp = g->n_ff_exp;
    /* the cache is counted below: the formula's own is at q8_0-safe f16 */
    struct calib_mem_opts o2 = *o;
    o2.kv_type = RT_KV_F16;
    enum mw_status s = calib_mem_estimate(&a, &o2, out, err);
    if (s != MW_OK) return s;
    const uint64_t kvb = calib_g4_kv_bytes(g, o->n_ctx, o->n_batch, o->kv_type, NULL, NULL, NULL);
    if (!kvb)
        return MW_FAIL(err, o->kv_type == RT_KV_Q8_0 ? MW_E_USAGE : MW_E_VALUE, MW_ERR_OFF_NONE,
                       o->kv_type == RT_KV_Q8_0
                           ? "q8_0 KV cache: a layer's K/V row is not a multiple of 32"
                           : "KV cache size overflows");
    out->kv_bytes = kvb;
    return MW_OK;
}
