/*
 * runtime/rt_model_gptoss.c — the loader's part for gpt-oss ("gpt-oss",
 * llama.cpp's LLM_ARCH_OPENAI_MOE, src/models/openai-moe.cpp): its keys
 * and each layer's tensors with their exact shapes. Errors name the key or
 * tensor.
 *
 * Keys (load_arch_hparams): attention.sliding_window (required),
 * attention.sliding_window_pattern (default 2: even layers slide),
 * rope.freq_base_swa (default rope.freq_base; the sliding layers share the
 * RoPE frequency scale), expert_feed_forward_length (required). YaRN
 * (rope.scaling.type yarn, rope.scaling.factor,
 * rope.scaling.original_context_length) is read with the common RoPE keys
 * (rt_model_hparams.c); llama.cpp reads no YaRN beta keys for this arch
 * and uses 32 and 1.
 *
 * A layer (load_arch_tensors): attn_norm, post_attention_norm (the MoE's
 * input norm), attn_q/k/v/output with their biases, attn_sinks (n_head),
 * the router ffn_gate_inp with its bias, the experts' 3-D
 * ffn_{gate,up,down}_exps with their 2-D biases.
 */
#include "runtime/rt_model_int.h"

#include <string.h>

#include "quant/quant.h"

enum mw_status read_gptoss(struct ld *L)
{
    struct rt_hparams *hp = &L->m->hp;
    enum mw_status s;
    if ((s = archkey_u32(L, "attention.sliding_window", true, 0, &hp->n_swa, NULL))) return s;
    if ((s = range_u32(L, "attention.sliding_window", hp->n_swa, 1, 1u << 24))) return s;
    hp->swa_pattern = 2;
    if ((s = archkey_u32(L, "attention.sliding_window_pattern", false, 2, &hp->swa_pattern, NULL)))
        return s;
    if ((s = range_u32(L, "attention.sliding_window_pattern", hp->swa_pattern, 0, RT_MAX_LAYERS)))
        return s;
    hp->rope_base_swa = hp->rope_base;
    if ((s = archkey_f32(L, "rope.freq_base_swa", false, hp->rope_base, &hp->rope_base_swa)))
        return s;
    if (!(hp->rope_base_swa > 1.0f)) {
        FAIL_ARCHKEY(L, "rope.freq_base_swa", MW_E_VALUE, "%g (expected > 1)",
                     (double)hp->rope_base_swa);
    }
    hp->rope_freq_scale_swa = hp->rope_freq_scale;
    if (hp->rope_yarn) {
        if ((s = read_ctx_orig(L)))
            return s;
    }
    /* llama.cpp requires it (get_key_or_arr without a default) */
    bool has = false;
    uint32_t v = 0;
    if ((s = archkey_u32(L, "expert_feed_forward_length", false, 0, &v, &has))) return s;
    if (!has) {
        FAIL_ARCHKEY(L, "expert_feed_forward_length", MW_E_FORMAT, "missing (required, u32)");
    }
    return MW_OK;
}

enum mw_status load_gptoss_layer(struct ld *L, uint32_t il, struct rt_layer *ly, uint64_t *pos)
{
    const struct rt_hparams *hp = &L->m->hp;
    const uint64_t E = hp->n_embd, hd = hp->head_dim;
    const uint64_t qdim = (uint64_t)hp->n_head * hd, kvdim = (uint64_t)hp->n_head_kv * hd;
    const uint64_t FE = hp->n_ff_exp, NE = hp->n_expert;
    enum mw_status s;
    char nm[96];
#define NAME(suffix) (snprintf(nm, sizeof nm, "blk.%u." suffix, il), nm)
    if ((s = get_vector(L, NAME("attn_norm.weight"), true, E, &ly->attn_norm, pos))) return s;
    if ((s = get_vector(L, NAME("post_attention_norm.weight"), true, E, &ly->ffn_norm, pos)))
        return s;
    if ((s = refuse_tensor(L, NAME("ffn_norm.weight"),
                           "gpt-oss normalizes the MoE input with post_attention_norm")))
        return s;
    if ((s = get_matrix(L, NAME("attn_q.weight"), true, E, qdim, &ly->wq))) return s;
    if ((s = get_matrix(L, NAME("attn_k.weight"), true, E, kvdim, &ly->wk))) return s;
    if ((s = get_matrix(L, NAME("attn_v.weight"), true, E, kvdim, &ly->wv))) return s;
    if ((s = get_matrix(L, NAME("attn_output.weight"), true, qdim, E, &ly->wo))) return s;
    /* create_tensor_qkv takes the biases when present; attn_output.bias is required */
    if ((s = get_vector(L, NAME("attn_q.bias"), false, qdim, &ly->bq, pos))) return s;
    if ((s = get_vector(L, NAME("attn_k.bias"), false, kvdim, &ly->bk, pos))) return s;
    if ((s = get_vector(L, NAME("attn_v.bias"), false, kvdim, &ly->bv, pos))) return s;
    if ((s = get_vector(L, NAME("attn_output.bias"), true, E, &ly->bo, pos))) return s;
    if ((s = get_vector(L, NAME("attn_sinks.weight"), true, hp->n_head, &ly->attn_sinks, pos)))
        return s;
    if ((s = load_moe_layer(L, il, ly))) return s;
    if ((s = get_vector(L, NAME("ffn_gate_inp.bias"), true, NE, &ly->b_gate_inp, pos))) return s;
    if ((s = get_table(L, NAME("ffn_gate_exps.bias"), true, FE, NE, &ly->bgate_exps, pos)))
        return s;
    if ((s = get_table(L, NAME("ffn_up_exps.bias"), true, FE, NE, &ly->bup_exps, pos)))
        return s;
    if ((s = get_table(L, NAME("ffn_down_exps.bias"), true, E, NE, &ly->bdown_exps, pos)))
        return s;
#undef NAME
    return MW_OK;
}
