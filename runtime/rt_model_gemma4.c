/*
 * runtime/rt_model_gemma4.c — the loader's part for gemma4 (llama.cpp's
 * load_arch_hparams and load_arch_tensors of src/models/gemma4.cpp): its
 * keys, with the per-layer arrays read layer by layer (sliding-window
 * pattern, kv heads, FFN widths), the shared-KV layers checked against the
 * layers they read, and each layer's tensors with their exact shapes: two
 * head sizes, the per-layer embeddings (the table per_layer_token_embd is
 * mapped and read one row per token, never copied), layer_output_scale, the
 * experts beside the dense MLP. Errors name the key or tensor.
 */
#define _GNU_SOURCE
#include "runtime/rt_model_int.h"

#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "quant/quant.h"

#define G4_KEY(L, key, suffix) snprintf((key), sizeof(key), "%s.%s", (L)->arch, (suffix))

/* Element il of the per-layer key <arch>.suffix (an array of n_layer u32/i32
 * or bool), or the scalar for every layer. */
static enum mw_status layer_u32(struct ld *L, const char *suffix, uint32_t il, uint32_t def,
                                uint32_t *out)
{
    char key[128];
    G4_KEY(L, key, suffix);
    uint64_t off = 0;
    const struct gguf_value *v = kv_find(L, key, &off);
    if (!v) {
        *out = def;
        return MW_OK;
    }
    if (v->type == GGUF_VT_U32 || v->type == GGUF_VT_I32) {
        *out = mw_le32(v->data);
    } else if (v->type == GGUF_VT_BOOL) {
        *out = v->data[0] != 0;
    } else if (v->type == GGUF_VT_ARRAY &&
               (v->elem_type == GGUF_VT_U32 || v->elem_type == GGUF_VT_I32 ||
                v->elem_type == GGUF_VT_BOOL)) {
        if (v->n != L->m->hp.n_layer)
            FAIL_KEY(L, key, MW_E_FORMAT, off, "%llu elements, expected one per layer (%u)",
                     (unsigned long long)v->n, L->m->hp.n_layer);
        *out = v->elem_type == GGUF_VT_BOOL ? v->data[il] != 0
                                             : mw_le32(v->data + 4 * (uint64_t)il);
    } else {
        FAIL_KEY(L, key, MW_E_FORMAT, off, "has type %s, expected u32 or a per-layer array",
                 gguf_vtype_name(v->type));
    }
    if ((v->type == GGUF_VT_I32 || (v->type == GGUF_VT_ARRAY && v->elem_type == GGUF_VT_I32)) &&
        (int32_t)*out < 0)
        FAIL_KEY(L, key, MW_E_VALUE, off, "layer %u: negative (%d)", il, (int32_t)*out);
    return MW_OK;
}

enum mw_status read_gemma4(struct ld *L)
{
    struct rt_hparams *hp = &L->m->hp;
    enum mw_status s;
    char key[128];
    hp->attn_scale = 1.0f; /* self.scaling = 1.0: q . k unscaled */
    hp->rope_freq_scale_swa = 1.0f;
    if ((s = archkey_u32(L, "attention.sliding_window", true, 0, &hp->n_swa, NULL))) return s;
    if ((s = range_u32(L, "attention.sliding_window", hp->n_swa, 1, 1u << 24))) return s;
    G4_KEY(L, key, "attention.sliding_window_pattern");
    if (!kv_find(L, key, &(uint64_t){0}))
        FAIL_KEY(L, key, MW_E_FORMAT, MW_ERR_OFF_NONE,
                 "missing (required: sliding or full, per layer)");
    hp->swa_per_layer = true;
    memset(hp->swa_layers, 0, sizeof hp->swa_layers);
    for (uint32_t il = 0; il < hp->n_layer; il++) {
        uint32_t b;
        if ((s = layer_u32(L, "attention.sliding_window_pattern", il, 0, &b))) return s;
        if (b) hp->swa_layers[il / 8] |= (uint8_t)(1u << (il % 8));
    }
    /* kv heads: one count for the sliding layers, one for the full ones */
    const uint32_t kv_any = hp->n_head_kv;
    uint32_t kv_swa = 0, kv_full = 0;
    for (uint32_t il = 0; il < hp->n_layer; il++) {
        uint32_t n;
        if ((s = layer_u32(L, "attention.head_count_kv", il, kv_any, &n))) return s;
        uint32_t *slot = rt_layer_is_swa(hp, il) ? &kv_swa : &kv_full;
        G4_KEY(L, key, "attention.head_count_kv");
        if (n == 0 || n > hp->n_head || hp->n_head % n != 0)
            FAIL_KEY(L, key, MW_E_VALUE, MW_ERR_OFF_NONE,
                     "layer %u: %u kv heads do not divide head_count %u", il, n, hp->n_head);
        if (*slot && *slot != n)
            FAIL_KEY(L, key, MW_E_UNSUPPORTED, MW_ERR_OFF_NONE,
                     "layer %u: %u kv heads where another %s layer has %u", il, n,
                     rt_layer_is_swa(hp, il) ? "sliding" : "full-attention", *slot);
        *slot = n;
    }
    hp->n_head_kv = kv_full ? kv_full : kv_swa;
    hp->n_head_kv_swa = kv_swa ? kv_swa : hp->n_head_kv;
    uint32_t kl = 0, vl = 0;
    if ((s = archkey_u32(L, "attention.key_length_swa", true, 0, &kl, NULL))) return s;
    if ((s = archkey_u32(L, "attention.value_length_swa", true, 0, &vl, NULL))) return s;
    if (kl != vl) {
        G4_KEY(L, key, "attention.value_length_swa");
        FAIL_KEY(L, key, MW_E_UNSUPPORTED, MW_ERR_OFF_NONE, "%u differs from key_length_swa %u", vl,
                 kl);
    }
    if ((s = range_u32(L, "attention.key_length_swa", kl, 2, RT_MAX_HEAD_DIM))) return s;
    if (kl % 2 != 0) {
        G4_KEY(L, key, "attention.key_length_swa");
        FAIL_KEY(L, key, MW_E_VALUE, MW_ERR_OFF_NONE, "head size %u is odd", kl);
    }
    hp->head_dim_swa = kl;
    if ((s = archkey_u32(L, "rope.dimension_count_swa", false, kl, &hp->n_rot_swa, NULL))) return s;
    if (hp->n_rot_swa == 0 || hp->n_rot_swa > kl || hp->n_rot_swa % 2 != 0) {
        G4_KEY(L, key, "rope.dimension_count_swa");
        FAIL_KEY(L, key, MW_E_VALUE, MW_ERR_OFF_NONE, "%u (expected an even number in 2..%u)",
                 hp->n_rot_swa, kl);
    }
    hp->rope_base_swa = hp->rope_base;
    if ((s = archkey_f32(L, "rope.freq_base_swa", false, hp->rope_base, &hp->rope_base_swa)))
        return s;
    if (!(hp->rope_base_swa > 1.0f)) {
        G4_KEY(L, key, "rope.freq_base_swa");
        FAIL_KEY(L, key, MW_E_VALUE, MW_ERR_OFF_NONE, "%g (expected > 1)",
                 (double)hp->rope_base_swa);
    }
    if ((s = archkey_f32(L, "final_logit_softcapping", false, 0.0f, &hp->final_softcap))) return s;
    if (hp->final_softcap < 0.0f) {
        G4_KEY(L, key, "final_logit_softcapping");
        FAIL_KEY(L, key, MW_E_VALUE, MW_ERR_OFF_NONE, "%g (expected >= 0)",
                 (double)hp->final_softcap);
    }
    /* shared KV: llama.cpp reuses layer (first shared - 2) for sliding layers
     * and (first shared - 1) for full ones, which must be of the same kind */
    if ((s = archkey_u32(L, "attention.shared_kv_layers", false, 0, &hp->n_kv_shared, NULL)))
        return s;
    if (hp->n_kv_shared > 0) {
        G4_KEY(L, key, "attention.shared_kv_layers");
        if (hp->n_kv_shared + 2 > hp->n_layer)
            FAIL_KEY(L, key, MW_E_VALUE, MW_ERR_OFF_NONE,
                     "%u of %u layers (at least two layers must keep their own KV)",
                     hp->n_kv_shared, hp->n_layer);
        for (uint32_t il = hp->n_layer - hp->n_kv_shared; il < hp->n_layer; il++) {
            const uint32_t src = rt_layer_kv_src(hp, il);
            if (rt_layer_is_swa(hp, src) != rt_layer_is_swa(hp, il)) {
                G4_KEY(L, key, "attention.sliding_window_pattern");
                FAIL_KEY(L, key, MW_E_VALUE, MW_ERR_OFF_NONE,
                         "shared layer %u (%s) would read the cache of layer %u (%s)", il,
                         rt_layer_is_swa(hp, il) ? "sliding" : "full", src,
                         rt_layer_is_swa(hp, src) ? "sliding" : "full");
            }
        }
    }
    if ((s = archkey_u32(L, "embedding_length_per_layer_input", true, 0, &hp->n_embd_per_layer,
                         NULL)))
        return s;
    if ((s = range_u32(L, "embedding_length_per_layer_input", hp->n_embd_per_layer, 0, RT_MAX_DIM)))
        return s;
    if ((uint64_t)hp->n_embd_per_layer * hp->n_layer > RT_MAX_DIM) {
        G4_KEY(L, key, "embedding_length_per_layer_input");
        FAIL_KEY(L, key, MW_E_VALUE, MW_ERR_OFF_NONE, "%u x %u layers is too large",
                 hp->n_embd_per_layer, hp->n_layer);
    }
    /* the forward pass keeps a layer slice of the table in an attention row
     * and the per-layer gate in an FFN row, and the router input in a query
     * row; the full layers' head is the larger one (the attention scratch) */
    if (hp->n_embd_per_layer > hp->n_embd || hp->n_embd_per_layer > hp->n_ff) {
        G4_KEY(L, key, "embedding_length_per_layer_input");
        FAIL_KEY(L, key, MW_E_UNSUPPORTED, MW_ERR_OFF_NONE,
                 "%u is wider than embedding_length %u or feed_forward_length %u",
                 hp->n_embd_per_layer, hp->n_embd, hp->n_ff);
    }
    if (hp->head_dim_swa > hp->head_dim || (uint64_t)hp->n_head * hp->head_dim < hp->n_embd ||
        hp->n_head_kv_swa < hp->n_head_kv) {
        G4_KEY(L, key, "attention.key_length_swa");
        FAIL_KEY(L, key, MW_E_UNSUPPORTED, MW_ERR_OFF_NONE,
                 "%u with key_length %u, %u heads, kv heads %u (sliding) / %u (full) and "
                 "embedding_length %u (expected the full layers' heads at least as large and "
                 "as wide as the embedding together, and no more of them per kv head)",
                 hp->head_dim_swa, hp->head_dim, hp->n_head, hp->n_head_kv_swa, hp->n_head_kv,
                 hp->n_embd);
    }
    /* the dense MLP beside the experts: the context's FFN rows are sized by it */
    if (hp->n_expert) hp->n_ff_shexp = hp->n_ff;
    return MW_OK;
}

enum mw_status load_gemma4_globals(struct ld *L, uint64_t *pos)
{
    struct rt_model *m = L->m;
    const struct rt_hparams *hp = &m->hp;
    enum mw_status s;
    if (m->fbuf && !m->g4) { /* pass 2: the views */
        m->g4 = calloc(1, sizeof *m->g4);
        if (m->g4) m->g4->layers = calloc(hp->n_layer, sizeof *m->g4->layers);
        if (!m->g4 || !m->g4->layers)
            return MW_FAIL(L->err, MW_E_NOMEM, MW_ERR_OFF_NONE, "gemma4 layer table");
    }
    struct rt_g4 dummy;
    memset(&dummy, 0, sizeof dummy);
    struct rt_g4 *g = m->g4 ? m->g4 : &dummy;
    const uint64_t P = hp->n_embd_per_layer, LP = P * hp->n_layer;
    static const char *const ple[] = {"per_layer_token_embd.weight", "per_layer_model_proj.weight",
                                      "per_layer_proj_norm.weight"};
    if (P == 0) {
        for (int j = 0; j < 3; j++)
            if ((s = refuse_tensor(L, ple[j], "embedding_length_per_layer_input is 0"))) return s;
        return MW_OK;
    }
    const struct gguf_tensor *t;
    if ((s = find_tensor(L, ple[0], true, LP, hp->n_vocab, &t))) return s;
    const uint64_t rb = rt_row_bytes(t->type, LP);
    uint64_t total;
    if (!quant_traits_get(t->type) || !quant_traits_get(t->type)->to_float)
        FAIL_T(L, ple[0], MW_E_UNSUPPORTED, t->info_off, "type %s cannot be decoded",
               type_name(t->type));
    if (rb == 0 || !mw_mul_u64(rb, hp->n_vocab, &total) || total != t->nbytes)
        FAIL_T(L, ple[0], MW_E_FORMAT, t->info_off, "unexpected size %llu",
               (unsigned long long)t->nbytes);
    const struct gguf_type_info *ti = gguf_type_get(t->type);
    if (!ti || ti->blck == 0 || P % ti->blck != 0)
        FAIL_T(L, ple[0], MW_E_UNSUPPORTED, t->info_off,
               "type %s: a layer's slice of %llu values is not whole blocks", type_name(t->type),
               (unsigned long long)P);
    const uint8_t *data = gguf_tensor_data(L->f, (uint64_t)gguf_tensor_find(L->f, ple[0]));
    g->ple_tok = (struct rt_weight){.data = data, .type = t->type, .n_in = LP,
                                    .n_out = hp->n_vocab, .row_bytes = rb, .name = t->name};
    m->weight_bytes += rb; /* a token reads one row of the table */
    if ((s = get_matrix(L, ple[1], true, hp->n_embd, LP, &g->ple_proj))) return s;
    if ((s = get_vector(L, ple[2], true, P, &g->ple_norm, pos))) return s;
    return MW_OK;
}

enum mw_status load_gemma4_layer(struct ld *L, uint32_t il, struct rt_layer *ly, uint64_t *pos)
{
    struct rt_model *m = L->m;
    const struct rt_hparams *hp = &m->hp;
    struct rt_g4_layer dummy;
    memset(&dummy, 0, sizeof dummy);
    struct rt_g4_layer *gl = m->g4 ? &m->g4->layers[il] : &dummy;
    const uint64_t E = hp->n_embd, hd = rt_layer_head_dim(hp, il);
    const uint64_t qdim = (uint64_t)hp->n_head * hd;
    const uint64_t kvdim = (uint64_t)rt_layer_n_head_kv(hp, il) * hd;
    const bool has_kv = rt_layer_has_kv(hp, il);
    enum mw_status s;
    char nm[96];
    const struct gguf_tensor *t;
#define NAME(suffix) (snprintf(nm, sizeof nm, "blk.%u." suffix, il), nm)
    if ((s = get_vector(L, NAME("attn_norm.weight"), true, E, &ly->attn_norm, pos))) return s;
    if ((s = get_matrix(L, NAME("attn_q.weight"), true, E, qdim, &ly->wq))) return s;
    if (has_kv) {
        if ((s = get_matrix(L, NAME("attn_k.weight"), true, E, kvdim, &ly->wk))) return s;
        /* absent (attention_k_eq_v): V is the raw K projection */
        if ((s = get_matrix(L, NAME("attn_v.weight"), false, E, kvdim, &ly->wv))) return s;
        if ((s = get_vector(L, NAME("attn_k_norm.weight"), true, hd, &ly->k_norm, pos))) return s;
    } else { /* a shared layer: its K/V tensors may be there, unused (llama.cpp loads them) */
        if ((s = find_tensor(L, NAME("attn_k.weight"), false, E, kvdim, &t))) return s;
        if ((s = find_tensor(L, NAME("attn_v.weight"), false, E, kvdim, &t))) return s;
        if ((s = find_tensor(L, NAME("attn_k_norm.weight"), false, hd, 0, &t))) return s;
    }
    if ((s = get_matrix(L, NAME("attn_output.weight"), true, qdim, E, &ly->wo))) return s;
    if ((s = get_vector(L, NAME("attn_q_norm.weight"), true, hd, &ly->q_norm, pos))) return s;
    if ((s = get_vector(L, NAME("post_attention_norm.weight"), true, E, &ly->attn_post_norm, pos)))
        return s;
    const float *sc = NULL;
    if ((s = get_vector(L, NAME("layer_output_scale.weight"), false, 1, &sc, pos))) return s;
    gl->out_scale = sc ? sc[0] : 1.0f;
    uint32_t F = 0;
    if ((s = layer_u32(L, "feed_forward_length", il, hp->n_ff, &F))) return s;
    if (F == 0 || F > RT_MAX_DIM) {
        char key[128];
        G4_KEY(L, key, "feed_forward_length");
        FAIL_KEY(L, key, MW_E_VALUE, MW_ERR_OFF_NONE, "layer %u: %u (expected 1..%u)", il, F,
                 RT_MAX_DIM);
    }
    gl->n_ff = F;
    if ((s = get_vector(L, NAME("ffn_norm.weight"), true, E, &ly->ffn_norm, pos))) return s;
    if ((s = get_matrix(L, NAME("ffn_gate.weight"), true, E, F, &ly->wgate))) return s;
    if ((s = get_matrix(L, NAME("ffn_up.weight"), true, E, F, &ly->wup))) return s;
    if ((s = get_matrix(L, NAME("ffn_down.weight"), true, F, E, &ly->wdown))) return s;
    if ((s = get_vector(L, NAME("post_ffw_norm.weight"), true, E, &ly->ffn_post_norm, pos)))
        return s;
    /* the experts beside the dense MLP (a layer with a router) */
    const uint64_t NE = hp->n_expert, FE = hp->n_ff_exp;
    if (NE == 0) {
        if ((s = refuse_tensor(L, NAME("ffn_gate_inp.weight"), "a router without expert_count")))
            return s;
    } else {
        if ((s = get_matrix(L, NAME("ffn_gate_inp.weight"), false, E, NE, &ly->gate_inp))) return s;
    }
    if (ly->gate_inp.data) {
        if ((s = get_vector(L, NAME("ffn_gate_inp.scale"), true, E, &gl->gate_inp_s, pos)))
            return s;
        if ((s = get_vector(L, NAME("pre_ffw_norm_2.weight"), true, E, &gl->pre_norm_2, pos)))
            return s;
        if ((s = get_vector(L, NAME("post_ffw_norm_1.weight"), true, E, &gl->post_norm_1, pos)))
            return s;
        if ((s = get_vector(L, NAME("post_ffw_norm_2.weight"), true, E, &gl->post_norm_2, pos)))
            return s;
        struct rt_weight w;
        memset(&w, 0, sizeof w);
        if ((s = get_weight(L, NAME("ffn_gate_up_exps.weight"), false, E, 2 * FE, NE, &w)))
            return s;
        if (w.data) { /* gate rows, then up rows, per expert */
            ly->gate_exps = ly->up_exps = w;
            ly->gate_exps.n_out = ly->up_exps.n_out = FE;
            ly->up_exps.data = w.data + FE * w.row_bytes;
        } else {
            if ((s = get_weight(L, NAME("ffn_gate_exps.weight"), true, E, FE, NE, &ly->gate_exps)))
                return s;
            if ((s = get_weight(L, NAME("ffn_up_exps.weight"), true, E, FE, NE, &ly->up_exps)))
                return s;
        }
        if ((s = get_weight(L, NAME("ffn_down_exps.weight"), true, FE, E, NE, &ly->down_exps)))
            return s;
        if ((s = get_vector(L, NAME("ffn_down_exps.scale"), false, NE, &gl->down_exps_s, pos)))
            return s;
    }
    if (hp->n_embd_per_layer) {
        const uint64_t P = hp->n_embd_per_layer;
        if ((s = get_matrix(L, NAME("inp_gate.weight"), true, E, P, &gl->inp_gate))) return s;
        if ((s = get_matrix(L, NAME("proj.weight"), true, P, E, &gl->proj))) return s;
        if ((s = get_vector(L, NAME("post_norm.weight"), true, E, &gl->post_norm, pos))) return s;
    }
#undef NAME
    return MW_OK;
}

/* The per-layer table is read one row per token: no read-around (a fault
 * reads its own page), as for the experts' slabs. A hint; failures ignored. */
void rt__g4_advise(const struct rt_model *m)
{
    const long ps = sysconf(_SC_PAGESIZE);
    if (!m->g4 || !m->g4->ple_tok.data || ps <= 0) return;
    const uintptr_t page = (uintptr_t)ps;
    const uintptr_t lo = (uintptr_t)m->g4->ple_tok.data;
    const uintptr_t hi = lo + (uintptr_t)(m->g4->ple_tok.row_bytes * m->g4->ple_tok.n_out);
    const uintptr_t a = lo & ~(page - 1), b = (hi + page - 1) & ~(page - 1);
    if (b > a) (void)madvise((void *)a, (size_t)(b - a), MADV_RANDOM);
}

void rt__g4_free(struct rt_model *m)
{
    if (!m->g4) return;
    free(m->g4->layers);
    free(m->g4);
    m->g4 = NULL;
}
