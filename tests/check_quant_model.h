/*
 * tests/check_quant_model.h — what the quant Check suites (check_quant_preset.c,
 * check_quant_pipeline.c) share: a checked malloc, synthetic llama-shaped
 * models as quant sees them (tensor descriptions in llama-quantize's order,
 * no data) and the type rules of a preset. Each asserts success (ck_assert).
 * Header-only, static: one copy per test binary.
 */
#ifndef MW_TESTS_CHECK_QUANT_MODEL_H
#define MW_TESTS_CHECK_QUANT_MODEL_H

#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "quant/quant.h"

static inline void *xmalloc(size_t n)
{
    void *p = malloc(n ? n : 1);
    ck_assert_ptr_nonnull(p);
    return p;
}

/* --- synthetic llama-shaped models (names in llama-quantize's order) --- */

struct model {
    struct quant_model_info mi;
    uint64_t n;
    struct quant_tensor_desc t[1024];
    char names[1024][64];
};

static inline void add(struct model *m, const char *name, uint32_t nd, uint64_t ne0, uint64_t ne1)
{
    ck_assert_uint_lt(m->n, 1024);
    struct quant_tensor_desc *t = &m->t[m->n];
    snprintf(m->names[m->n], sizeof m->names[0], "%s", name);
    t->name = m->names[m->n];
    t->type = nd == 1 ? GGUF_TYPE_F32 : GGUF_TYPE_F16;
    t->n_dims = nd;
    t->ne[0] = ne0;
    t->ne[1] = nd == 1 ? 1 : ne1;
    t->ne[2] = t->ne[3] = 1;
    m->n++;
}

static inline int desc_cmp(const void *a, const void *b)
{
    return quant_tensor_name_cmp(((const struct quant_tensor_desc *)a)->name,
                                 ((const struct quant_tensor_desc *)b)->name);
}

/* llama: n_embd, n_ff, layers, heads, kv heads, vocab; tied: no output.weight */
static inline void make_llama(struct model *m, const char *arch, uint64_t embd, uint64_t ff,
                              uint32_t nl, uint32_t nh, uint32_t nkv, uint64_t vocab, bool tied)
{
    memset(m, 0, sizeof *m);
    snprintf(m->mi.arch, sizeof m->mi.arch, "%s", arch);
    m->mi.n_layer = nl;
    m->mi.n_head = nh;
    m->mi.n_head_kv = nkv;
    const uint64_t kvd = embd / nh * nkv;
    add(m, "token_embd.weight", 2, embd, vocab);
    add(m, "output_norm.weight", 1, embd, 1);
    if (!tied) add(m, "output.weight", 2, embd, vocab);
    char nm[64];
    for (uint32_t l = 0; l < nl; l++) {
#define L(x, nd, a, b) (snprintf(nm, sizeof nm, "blk.%u." x, l), add(m, nm, nd, a, b))
        L("attn_norm.weight", 1, embd, 1);
        L("attn_q.weight", 2, embd, embd);
        L("attn_k.weight", 2, embd, kvd);
        L("attn_v.weight", 2, embd, kvd);
        L("attn_output.weight", 2, embd, embd);
        L("ffn_norm.weight", 1, embd, 1);
        L("ffn_gate.weight", 2, embd, ff);
        L("ffn_up.weight", 2, embd, ff);
        L("ffn_down.weight", 2, ff, embd);
#undef L
    }
    qsort(m->t, (size_t)m->n, sizeof m->t[0], desc_cmp);
}

static inline struct quant_rules rules_for(const char *preset)
{
    struct quant_rules r = {.preset = quant_preset_find(preset), .output_type = -1,
                            .token_embd_type = -1};
    ck_assert_msg(r.preset != NULL, "preset %s", preset);
    return r;
}

#endif /* MW_TESTS_CHECK_QUANT_MODEL_H */
