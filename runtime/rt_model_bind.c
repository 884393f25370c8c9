/*
 * runtime/rt_model_bind.c — the graph's tensors bound to the model
 * (rt_model_int.h), the walk rt_model_from_gguf runs twice (once to check
 * and count the owned floats, once to fill the views): token_embd (it
 * decides n_vocab), output (or the tied embedding), output_norm and the
 * RoPE factor tensors of every arch, then each layer: the llama family's
 * dense and mixture-of-experts layers here, the gated delta net, gemma4 and
 * gpt-oss layers in their own files. Errors name the tensor.
 */
#include "runtime/rt_model_int.h"

#include <string.h>

#include "quant/quant.h"

/* One MoE layer's FFN tensors (llama.cpp's create_tensor calls of the
 * llama / qwen2moe / qwen3moe loaders). */
enum mw_status load_moe_layer(struct ld *L, uint32_t il, struct rt_layer *ly)
{
    const struct rt_hparams *hp = &L->m->hp;
    const uint64_t E = hp->n_embd, FE = hp->n_ff_exp, NE = hp->n_expert;
    enum mw_status s;
    char nm[96];
#define NAME(suffix) (snprintf(nm, sizeof nm, "blk.%u." suffix, il), nm)
    if ((s = get_matrix(L, NAME("ffn_gate_inp.weight"), true, E, NE, &ly->gate_inp))) return s;
    /* llama.cpp's llama loader takes a missing ffn_gate_exps as silu(up) alone; no
     * converter writes such a file and the runtime refuses it */
    if ((s = get_weight(L, NAME("ffn_gate_exps.weight"), true, E, FE, NE, &ly->gate_exps)))
        return s;
    if ((s = get_weight(L, NAME("ffn_up_exps.weight"), true, E, FE, NE, &ly->up_exps))) return s;
    if ((s = get_weight(L, NAME("ffn_down_exps.weight"), true, FE, E, NE, &ly->down_exps)))
        return s;
    static const char *const dense[] = {"ffn_gate.weight", "ffn_up.weight", "ffn_down.weight"};
    for (int j = 0; j < 3; j++) {
        snprintf(nm, sizeof nm, "blk.%u.%s", il, dense[j]);
        if ((s = refuse_tensor(L, nm, "a mixture-of-experts layer has no dense FFN"))) return s;
    }
    static const char *const sh[] = {"ffn_gate_inp_shexp.weight", "ffn_gate_shexp.weight",
                                     "ffn_up_shexp.weight", "ffn_down_shexp.weight"};
    if (hp->n_ff_shexp == 0) {
        for (int j = 0; j < 4; j++) {
            snprintf(nm, sizeof nm, "blk.%u.%s", il, sh[j]);
            if ((s = refuse_tensor(L, nm, "a shared expert is qwen2moe's, qwen35moe's and "
                                          "qwen3next's")))
                return s;
        }
        return MW_OK;
    }
    /* qwen2moe, qwen35moe, qwen3next: the shared expert, a dense SwiGLU FFN
     * scaled by sigmoid(ffn_gate_inp_shexp . x) */
    const uint64_t FS = hp->n_ff_shexp;
    if ((s = get_matrix(L, NAME("ffn_gate_inp_shexp.weight"), true, E, 1, &ly->gate_inp_shexp)))
        return s;
    if ((s = get_matrix(L, NAME("ffn_gate_shexp.weight"), true, E, FS, &ly->wgate))) return s;
    if ((s = get_matrix(L, NAME("ffn_up_shexp.weight"), true, E, FS, &ly->wup))) return s;
    if ((s = get_matrix(L, NAME("ffn_down_shexp.weight"), true, FS, E, &ly->wdown))) return s;
#undef NAME
    return MW_OK;
}

enum mw_status load_tensors(struct ld *L, uint64_t *n_floats)
{
    struct rt_model *m = L->m;
    struct rt_hparams *hp = &m->hp;
    const uint64_t E = hp->n_embd, hd = hp->head_dim;
    const uint64_t qdim = (uint64_t)hp->n_head * hd, kvdim = (uint64_t)hp->n_head_kv * hd;
    const uint64_t F = hp->n_ff;
    uint64_t pos = 0;
    enum mw_status s;
    char nm[96];

    m->weight_bytes = 0;
    m->expert_bytes = 0;
    m->expert_slab_bytes = 0;
    /* token_embd decides n_vocab; the tokenizer's count must agree */
    const int64_t ie = gguf_tensor_find(L->f, "token_embd.weight");
    if (ie < 0)
        FAIL_T(L, "token_embd.weight", MW_E_FORMAT, MW_ERR_OFF_NONE, "missing (the %s graph needs it)",
               L->arch);
    const struct gguf_tensor *te = gguf_tensor_get(L->f, (uint64_t)ie);
    if (te->n_dims != 2 || te->ne[0] != E || te->ne[1] < 1 || te->ne[1] > RT_MAX_DIM) {
        char got[96];
        shape_str(got, sizeof got, te->ne, te->n_dims);
        FAIL_T(L, "token_embd.weight", MW_E_FORMAT, te->info_off,
               "shape %s, expected %llux<n_vocab> (n_vocab 1..%u)", got, (unsigned long long)E,
               RT_MAX_DIM);
    }
    hp->n_vocab = (uint32_t)te->ne[1];
    uint64_t koff = 0;
    const struct gguf_value *toks = kv_find(L, "tokenizer.ggml.tokens", &koff);
    if (toks && toks->type == GGUF_VT_ARRAY && toks->n != hp->n_vocab)
        FAIL_T(L, "token_embd.weight", MW_E_FORMAT, te->info_off,
               "%u rows, but tokenizer.ggml.tokens has %llu tokens", hp->n_vocab,
               (unsigned long long)toks->n);
    uint32_t vs = 0;
    bool has_vs = false;
    if ((s = archkey_u32(L, "vocab_size", false, 0, &vs, &has_vs))) return s;
    if (has_vs && vs != hp->n_vocab)
        FAIL_T(L, "token_embd.weight", MW_E_FORMAT, te->info_off,
               "%u rows, but %s.vocab_size is %u", hp->n_vocab, L->arch, vs);
    /* rows are decoded with quant's to_float (get_rows) */
    if (!quant_traits_get(te->type))
        FAIL_T(L, "token_embd.weight", MW_E_UNSUPPORTED, te->info_off,
               "type %s cannot be decoded", type_name(te->type));
    {
        const uint64_t rb = rt_row_bytes(te->type, E);
        uint64_t total;
        if (rb == 0 || !mw_mul_u64(rb, hp->n_vocab, &total) || total != te->nbytes)
            FAIL_T(L, "token_embd.weight", MW_E_FORMAT, te->info_off, "unexpected size %llu",
                   (unsigned long long)te->nbytes);
        m->tok_embd = (struct rt_weight){.data = gguf_tensor_data(L->f, (uint64_t)ie),
                                         .type = te->type, .n_in = E, .n_out = hp->n_vocab,
                                         .row_bytes = rb, .k = rt_kernel_get(m->ks, te->type),
                                         .name = te->name};
        if (!m->tok_embd.data)
            FAIL_T(L, "token_embd.weight", MW_E_TRUNC, te->file_off, "data is not in the file");
    }

    /* (cleared first: pass 2 must not see pass 1's tied view) */
    memset(&m->output, 0, sizeof m->output);
    if ((s = get_matrix(L, "output.weight", false, E, hp->n_vocab, &m->output))) return s;
    hp->tied_output = m->output.data == NULL;
    if (hp->tied_output) {
        /* the embedding doubles as the output matrix: it needs a kernel too */
        if ((s = get_matrix(L, "token_embd.weight", true, E, hp->n_vocab, &m->output))) return s;
    } else {
        m->weight_bytes += te->nbytes; /* the embedding rows are read as well */
    }
    if ((s = get_vector(L, "output_norm.weight", true, E, &m->output_norm, &pos))) return s;
    if ((s = get_vector(L, "rope_freqs.weight", false, hp->n_rot / 2, &m->rope_freqs, &pos)))
        return s;
    hp->has_rope_freqs = gguf_tensor_find(L->f, "rope_freqs.weight") >= 0;
    const bool gemma = hp->arch == RT_ARCH_GEMMA2 || hp->arch == RT_ARCH_GEMMA3;
    if (hp->arch == RT_ARCH_QWEN2MOE && hp->tied_output)
        FAIL_T(L, "output.weight", MW_E_FORMAT, MW_ERR_OFF_NONE,
               "missing (qwen2moe has a separate output matrix; llama.cpp requires it)");
    if (hp->arch == RT_ARCH_GEMMA2 && !hp->tied_output)
        FAIL_T(L, "output.weight", MW_E_FORMAT, MW_ERR_OFF_NONE,
               "gemma2 ties its output to token_embd.weight (llama.cpp loads no output.weight)");
    if (hp->arch == RT_ARCH_PHI3) {
        /* LongRoPE: both factor vectors or neither (llama.cpp writes them in pairs) */
        const bool hl = gguf_tensor_find(L->f, "rope_factors_long.weight") >= 0;
        const bool hs = gguf_tensor_find(L->f, "rope_factors_short.weight") >= 0;
        if (hl != hs)
            FAIL_T(L, hl ? "rope_factors_short.weight" : "rope_factors_long.weight", MW_E_FORMAT,
                   MW_ERR_OFF_NONE, "missing (LongRoPE needs both the long and the short factors)");
        if (hl && hp->has_rope_freqs)
            FAIL_T(L, "rope_freqs.weight", MW_E_FORMAT, MW_ERR_OFF_NONE,
                   "present together with rope_factors_long/short");
        if ((s = get_vector(L, "rope_factors_long.weight", false, hp->n_rot / 2, &m->rope_long,
                            &pos)))
            return s;
        if ((s = get_vector(L, "rope_factors_short.weight", false, hp->n_rot / 2, &m->rope_short,
                            &pos)))
            return s;
        hp->has_rope_long = hl;
    } else {
        static const char *const phi_only[] = {"rope_factors_long.weight",
                                               "rope_factors_short.weight"};
        for (int j = 0; j < 2; j++)
            if (gguf_tensor_find(L->f, phi_only[j]) >= 0)
                FAIL_T(L, phi_only[j], MW_E_FORMAT, MW_ERR_OFF_NONE,
                       "unexpected in a %s file (LongRoPE factors are phi3's)", L->arch);
    }

    const bool qwen = hp->arch == RT_ARCH_QWEN2;
    uint32_t n_rec = 0;
    if (hp->arch == RT_ARCH_GEMMA4 && (s = load_gemma4_globals(L, &pos))) return s;
    for (uint32_t il = 0; il < hp->n_layer; il++) {
        struct rt_layer *ly = m->layers ? &m->layers[il] : NULL;
        struct rt_layer dummy;
        if (!ly) {
            memset(&dummy, 0, sizeof dummy);
            ly = &dummy;
        }
        if (hp->arch == RT_ARCH_GEMMA4) {
            if ((s = load_gemma4_layer(L, il, ly, &pos))) return s;
            continue;
        }
        if (rt__arch_is_ssm(hp->arch)) {
            if (rt_layer_is_recurrent(hp, il)) ly->rec = n_rec++;
            if ((s = load_hybrid_layer(L, il, ly, &pos))) return s;
            continue;
        }
        if (hp->arch == RT_ARCH_GPTOSS) {
            if ((s = load_gptoss_layer(L, il, ly, &pos))) return s;
            continue;
        }
#define NAME(suffix) (snprintf(nm, sizeof nm, "blk.%u." suffix, il), nm)
        if ((s = get_vector(L, NAME("attn_norm.weight"), true, E, &ly->attn_norm, &pos))) return s;
        if ((s = get_vector(L, NAME("ffn_norm.weight"), true, E, &ly->ffn_norm, &pos))) return s;
        /* phi3: q, k, v rows in one attn_qkv.weight (llama.cpp's create_tensor_qkv
         * takes it when present, else the three matrices); views of its rows */
        const bool fused_qkv = hp->arch == RT_ARCH_PHI3 &&
                               gguf_tensor_find(L->f, NAME("attn_qkv.weight")) >= 0;
        if (il == 0) hp->fused_qkv = fused_qkv;
        if (fused_qkv != hp->fused_qkv)
            FAIL_T(L, NAME("attn_qkv.weight"), MW_E_FORMAT, MW_ERR_OFF_NONE,
                   "layer %u %s a fused attn_qkv.weight while layer 0 %s", il,
                   fused_qkv ? "has" : "lacks", hp->fused_qkv ? "has one" : "does not");
        if (fused_qkv) {
            struct rt_weight w;
            if ((s = get_matrix(L, NAME("attn_qkv.weight"), true, E, qdim + 2 * kvdim, &w)))
                return s;
            ly->wq = ly->wk = ly->wv = w;
            ly->wq.n_out = qdim;
            ly->wk.n_out = ly->wv.n_out = kvdim;
            ly->wk.data = w.data + qdim * w.row_bytes;
            ly->wv.data = w.data + (qdim + kvdim) * w.row_bytes;
            const float *b = NULL;
            if ((s = get_vector(L, NAME("attn_qkv.bias"), false, qdim + 2 * kvdim, &b, &pos)))
                return s;
            if (b) ly->bq = b, ly->bk = b + qdim, ly->bv = b + qdim + kvdim;
            static const char *const sep[] = {"attn_q.weight", "attn_k.weight", "attn_v.weight"};
            for (int j = 0; j < 3; j++) {
                snprintf(nm, sizeof nm, "blk.%u.%s", il, sep[j]);
                if (gguf_tensor_find(L->f, nm) >= 0)
                    FAIL_T(L, nm, MW_E_FORMAT, MW_ERR_OFF_NONE,
                           "present together with blk.%u.attn_qkv.weight", il);
            }
        } else {
            if ((s = get_matrix(L, NAME("attn_q.weight"), true, E, qdim, &ly->wq))) return s;
            if ((s = get_matrix(L, NAME("attn_k.weight"), true, E, kvdim, &ly->wk))) return s;
            if ((s = get_matrix(L, NAME("attn_v.weight"), true, E, kvdim, &ly->wv))) return s;
        }
        if ((s = get_matrix(L, NAME("attn_output.weight"), true, qdim, E, &ly->wo))) return s;
        if (hp->n_expert > 0) {
            if ((s = load_moe_layer(L, il, ly))) return s;
        } else if ((s = refuse_tensor(L, NAME("ffn_gate_inp.weight"),
                                      "a router without expert_count"))) {
            return s;
        } else if (hp->fused_gate_up) {
            /* phi3: ffn_up.weight holds the gate rows, then the up rows
             * (ggml_swiglu over the fused output: silu(first half) * second half) */
            struct rt_weight w;
            if ((s = get_matrix(L, NAME("ffn_up.weight"), true, E, 2 * F, &w))) return s;
            ly->wgate = ly->wup = w;
            ly->wgate.n_out = ly->wup.n_out = F;
            ly->wup.data = w.data + F * w.row_bytes;
            if (gguf_tensor_find(L->f, NAME("ffn_gate.weight")) >= 0)
                FAIL_T(L, nm, MW_E_FORMAT, MW_ERR_OFF_NONE,
                       "phi3 fuses the gate into ffn_up.weight (%llu rows); a separate gate is "
                       "not expected", (unsigned long long)(2 * F));
        } else {
            if ((s = get_matrix(L, NAME("ffn_gate.weight"), true, E, F, &ly->wgate))) return s;
            if ((s = get_matrix(L, NAME("ffn_up.weight"), true, E, F, &ly->wup))) return s;
        }
        if (hp->n_expert == 0 &&
            (s = get_matrix(L, NAME("ffn_down.weight"), true, F, E, &ly->wdown)))
            return s;
        if (!fused_qkv) {
            if ((s = get_vector(L, NAME("attn_q.bias"), qwen, qdim, &ly->bq, &pos))) return s;
            if ((s = get_vector(L, NAME("attn_k.bias"), qwen, kvdim, &ly->bk, &pos))) return s;
            if ((s = get_vector(L, NAME("attn_v.bias"), qwen, kvdim, &ly->bv, &pos))) return s;
        }
        if ((s = get_vector(L, NAME("attn_q_norm.weight"), hp->qk_norm, hd, &ly->q_norm, &pos)))
            return s;
        if ((s = get_vector(L, NAME("attn_k_norm.weight"), hp->qk_norm, hd, &ly->k_norm, &pos)))
            return s;
        if ((s = get_vector(L, NAME("post_attention_norm.weight"), gemma, E, &ly->attn_post_norm,
                            &pos)))
            return s;
        if ((s = get_vector(L, NAME("post_ffw_norm.weight"), gemma, E, &ly->ffn_post_norm, &pos)))
            return s;
        if (!hp->qk_norm && (ly->q_norm || ly->k_norm))
            FAIL_T(L, NAME("attn_q_norm.weight"), MW_E_FORMAT, MW_ERR_OFF_NONE,
                   "unexpected in a %s file (the graph has no q/k norm)", L->arch);
        if (!gemma && (ly->attn_post_norm || ly->ffn_post_norm))
            FAIL_T(L, NAME("post_attention_norm.weight"), MW_E_FORMAT, MW_ERR_OFF_NONE,
                   "unexpected in a %s file (post norms are gemma's)", L->arch);
        if ((s = get_vector(L, NAME("attn_output.bias"), false, E, &ly->bo, &pos))) return s;
        if (hp->n_expert == 0) {
            if ((s = get_vector(L, NAME("ffn_gate.bias"), false, F, &ly->bgate, &pos))) return s;
            if ((s = get_vector(L, NAME("ffn_up.bias"), false, F, &ly->bup, &pos))) return s;
            if ((s = get_vector(L, NAME("ffn_down.bias"), false, E, &ly->bdown, &pos))) return s;
        }
#undef NAME
    }
    *n_floats = pos;
    return MW_OK;
}
