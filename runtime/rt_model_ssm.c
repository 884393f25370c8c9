/*
 * runtime/rt_model_ssm.c — the loader's part for the gated delta net archs
 * qwen35, qwen35moe and qwen3next (llama.cpp's load_arch_hparams and
 * load_arch_tensors of src/models/qwen35.cpp, qwen35moe.cpp, qwen3next.cpp):
 * their keys, checked (value heads a multiple of key heads, inner_size =
 * Hv x S, a state whose size fits 64 bits, IMROPE sections), and each
 * layer's tensors with their exact shapes. Errors name the key or tensor.
 */
#include "runtime/rt_model_int.h"

#include <string.h>

#include "quant/quant.h"

/* The trailing next-token-prediction blocks (qwen35, qwen35moe, qwen3next):
 * block_count counts them, the graph never runs them (llama.cpp's n_layer()
 * = block_count - nextn_predict_layers); their tensors are allowed and ignored. */
enum mw_status read_nextn(struct ld *L)
{
    struct rt_hparams *hp = &L->m->hp;
    enum mw_status s;
    if (!rt__arch_is_ssm(hp->arch)) return MW_OK;
    if ((s = archkey_u32(L, "nextn_predict_layers", false, 0, &hp->n_nextn, NULL))) return s;
    if (hp->n_nextn >= hp->n_layer) {
        FAIL_ARCHKEY(L, "nextn_predict_layers", MW_E_VALUE,
                     "%u, expected less than block_count %u (no layer would run)", hp->n_nextn,
                     hp->n_layer);
    }
    hp->n_layer -= hp->n_nextn;
    return MW_OK;
}

/* The gated delta net's keys (llama.cpp's qwen35 / qwen35moe / qwen3next
 * load_arch_hparams): ssm.conv_kernel, ssm.state_size, ssm.group_count,
 * ssm.time_step_rank, ssm.inner_size, full_attention_interval (default 4),
 * rope.dimension_sections (qwen35, qwen35moe). Checked: Hv a multiple of Hk,
 * inner_size = Hv * S, a state whose size fits 64 bits. */
enum mw_status read_ssm(struct ld *L)
{
    struct rt_hparams *hp = &L->m->hp;
    enum mw_status s;
    char key[128];
    if ((s = archkey_u32(L, "ssm.conv_kernel", true, 0, &hp->ssm_conv_kernel, NULL))) return s;
    if ((s = range_u32(L, "ssm.conv_kernel", hp->ssm_conv_kernel, 1, 64))) return s;
    if ((s = archkey_u32(L, "ssm.state_size", true, 0, &hp->ssm_d_state, NULL))) return s;
    if ((s = range_u32(L, "ssm.state_size", hp->ssm_d_state, 1, RT_MAX_DIM))) return s;
    if ((s = archkey_u32(L, "ssm.group_count", true, 0, &hp->ssm_n_group, NULL))) return s;
    if ((s = range_u32(L, "ssm.group_count", hp->ssm_n_group, 1, RT_MAX_DIM))) return s;
    if ((s = archkey_u32(L, "ssm.time_step_rank", true, 0, &hp->ssm_dt_rank, NULL))) return s;
    if ((s = range_u32(L, "ssm.time_step_rank", hp->ssm_dt_rank, 1, RT_MAX_DIM))) return s;
    if ((s = archkey_u32(L, "ssm.inner_size", true, 0, &hp->ssm_d_inner, NULL))) return s;
    if ((s = archkey_u32(L, "full_attention_interval", false, 4, &hp->full_attn_interval,
                                NULL)))
        return s;
    if ((s = range_u32(L, "full_attention_interval", hp->full_attn_interval, 1,
                              RT_MAX_LAYERS)))
        return s;
    /* llama.cpp takes attention.recurrent_layers over the interval when a file
     * has it; the runtime derives the layers from the interval, so a pattern
     * other than the interval's is refused */
    snprintf(key, sizeof key, "%s.attention.recurrent_layers", L->arch);
    uint64_t roff = 0;
    const struct gguf_value *rv = kv_find(L, key, &roff);
    if (rv) {
        const uint32_t et = rv->elem_type;
        const uint64_t es = et == GGUF_VT_BOOL || et == GGUF_VT_U8 || et == GGUF_VT_I8 ? 1
                            : et == GGUF_VT_U32 || et == GGUF_VT_I32               ? 4
                                                                                   : 0;
        if (rv->type != GGUF_VT_ARRAY || es == 0 || rv->n < hp->n_layer)
            FAIL_KEY(L, key, MW_E_FORMAT, roff,
                     "expected an array of at least %u bools or integers", hp->n_layer);
        for (uint32_t il = 0; il < hp->n_layer; il++) {
            const bool rec =
                es == 1 ? rv->data[il] != 0 : mw_le32(rv->data + 4 * (uint64_t)il) != 0;
            if (rec != rt_layer_is_recurrent(hp, il))
                FAIL_KEY(L, key, MW_E_UNSUPPORTED, roff,
                         "layer %u is %s, but full_attention_interval %u makes it %s", il,
                         rec ? "recurrent" : "full attention", hp->full_attn_interval,
                         rec ? "full attention" : "recurrent");
        }
    }
    const uint64_t S = hp->ssm_d_state, Hv = hp->ssm_dt_rank, Hk = hp->ssm_n_group;
    if (Hv % Hk != 0) {
        FAIL_ARCHKEY(L, "ssm.time_step_rank", MW_E_VALUE,
                     "%llu value heads are not a multiple of the %llu key heads (ssm.group_count)",
                     (unsigned long long)Hv, (unsigned long long)Hk);
    }
    uint64_t conv_f, ssm_f, bytes;
    if (!rt__ssm_state_bytes(hp, &conv_f, &ssm_f, &bytes)) {
        FAIL_ARCHKEY(L, "ssm.state_size", MW_E_VALUE,
                     "the recurrent state (%llu x %llu x %llu floats per layer, %u layers) "
                     "overflows 64 bits", (unsigned long long)S, (unsigned long long)S,
                     (unsigned long long)Hv, hp->n_layer);
    }
    if (S * Hv != hp->ssm_d_inner) {
        FAIL_ARCHKEY(L, "ssm.inner_size", MW_E_VALUE,
                     "%u, expected time_step_rank x state_size = %llu", hp->ssm_d_inner,
                     (unsigned long long)(S * Hv));
    }
    if (S > RT_MAX_HEAD_DIM) {
        FAIL_ARCHKEY(L, "ssm.state_size", MW_E_VALUE, "%llu out of range [1, %u]",
                     (unsigned long long)S, RT_MAX_HEAD_DIM);
    }
    if (2 * Hk * S + Hv * S > RT_MAX_DIM) {
        FAIL_ARCHKEY(L, "ssm.group_count", MW_E_VALUE, "%llu conv channels are too many",
                     (unsigned long long)(2 * Hk * S + Hv * S));
    }
    if (hp->arch == RT_ARCH_QWEN3NEXT) return MW_OK;
    /* IMROPE sections (required by llama.cpp); text positions put t = h = w = pos */
    snprintf(key, sizeof key, "%s.rope.dimension_sections", L->arch);
    uint64_t off = 0;
    const struct gguf_value *v = kv_find(L, key, &off);
    if (!v) FAIL_KEY(L, key, MW_E_FORMAT, MW_ERR_OFF_NONE, "missing (required, 4 x i32)");
    if (v->type != GGUF_VT_ARRAY || (v->elem_type != GGUF_VT_I32 && v->elem_type != GGUF_VT_U32) ||
        v->n < 3 || v->n > 4)
        FAIL_KEY(L, key, MW_E_FORMAT, off, "expected an array of 3 or 4 i32");
    uint64_t sum = 0;
    for (uint64_t j = 0; j < v->n; j++) {
        const uint32_t x = mw_le32(v->data + 4 * j);
        if (x > RT_MAX_HEAD_DIM)
            FAIL_KEY(L, key, MW_E_VALUE, off, "element %llu (%d) out of range [0, %u]",
                     (unsigned long long)j, (int32_t)x, RT_MAX_HEAD_DIM);
        hp->rope_sections[j] = x;
        sum += x;
    }
    if (hp->rope_sections[0] + hp->rope_sections[1] + hp->rope_sections[2] == 0)
        FAIL_KEY(L, key, MW_E_VALUE, off, "the t, h and w sections are all 0");
    if (sum > hp->head_dim) /* ggml's GGML_ASSERT(sect_dims <= ne0) */
        FAIL_KEY(L, key, MW_E_VALUE, off, "sections sum to %llu, more than the head size %u",
                 (unsigned long long)sum, hp->head_dim);
    return MW_OK;
}

/* One layer of qwen35 / qwen35moe / qwen3next (llama.cpp's load_block_trunk):
 * attn_norm and post_attention_norm (the FFN's input norm); a recurrent
 * layer's gated delta net, or gated full attention (q rows: per head q then
 * its gate) with q/k norms; a dense SwiGLU FFN (qwen35) or experts with a
 * sigmoid-gated shared expert. */
enum mw_status load_hybrid_layer(struct ld *L, uint32_t il, struct rt_layer *ly,
                                        uint64_t *pos)
{
    const struct rt_hparams *hp = &L->m->hp;
    const uint64_t E = hp->n_embd, hd = hp->head_dim;
    const uint64_t qdim = (uint64_t)hp->n_head * hd, kvdim = (uint64_t)hp->n_head_kv * hd;
    const uint64_t S = hp->ssm_d_state, Hv = hp->ssm_dt_rank, DI = hp->ssm_d_inner;
    const uint64_t CH = rt_ssm_conv_channels(hp);
    enum mw_status s;
    char nm[96];
#define NAME(suffix) (snprintf(nm, sizeof nm, "blk.%u." suffix, il), nm)
    if ((s = get_vector(L, NAME("attn_norm.weight"), true, E, &ly->attn_norm, pos))) return s;
    if ((s = get_vector(L, NAME("post_attention_norm.weight"), true, E, &ly->ffn_norm, pos)))
        return s;
    if (rt_layer_is_recurrent(hp, il)) {
        if (gguf_tensor_find(L->f, NAME("ssm_in.weight")) >= 0)
            FAIL_T(L, nm, MW_E_UNSUPPORTED, MW_ERR_OFF_NONE,
                   "the fused q|k|v|z projection of early Qwen3-Next files is not supported "
                   "(convert again: attn_qkv.weight and attn_gate.weight)");
        if ((s = get_matrix(L, NAME("attn_qkv.weight"), true, E, CH, &ly->ssm_qkv))) return s;
        if ((s = get_matrix(L, NAME("attn_gate.weight"), true, E, DI, &ly->ssm_z))) return s;
        if ((s = get_table(L, NAME("ssm_conv1d.weight"), true, hp->ssm_conv_kernel, CH,
                           &ly->ssm_conv, pos)))
            return s;
        if ((s = get_vector(L, NAME("ssm_dt.bias"), true, Hv, &ly->ssm_dt, pos))) return s;
        if ((s = get_vector(L, NAME("ssm_a"), true, Hv, &ly->ssm_a, pos))) return s;
        if ((s = get_vector(L, NAME("ssm_norm.weight"), true, S, &ly->ssm_norm, pos))) return s;
        if (hp->ssm_ba_fused) {
            if ((s = get_matrix(L, NAME("ssm_ba.weight"), true, E, 2 * Hv, &ly->ssm_beta)))
                return s;
        } else {
            if ((s = get_matrix(L, NAME("ssm_beta.weight"), true, E, Hv, &ly->ssm_beta)))
                return s;
            if ((s = get_matrix(L, NAME("ssm_alpha.weight"), true, E, Hv, &ly->ssm_alpha)))
                return s;
        }
        if ((s = get_matrix(L, NAME("ssm_out.weight"), true, DI, E, &ly->ssm_out))) return s;
        static const char *const full[] = {"attn_q.weight", "attn_k.weight", "attn_v.weight",
                                           "attn_output.weight"};
        for (int j = 0; j < 4; j++) {
            snprintf(nm, sizeof nm, "blk.%u.%s", il, full[j]);
            if ((s = refuse_tensor(L, nm, "a gated delta net layer has no attention matrices")))
                return s;
        }
    } else {
        if ((s = get_matrix(L, NAME("attn_q.weight"), true, E, 2 * qdim, &ly->wq))) return s;
        if ((s = get_matrix(L, NAME("attn_k.weight"), true, E, kvdim, &ly->wk))) return s;
        if ((s = get_matrix(L, NAME("attn_v.weight"), true, E, kvdim, &ly->wv))) return s;
        if ((s = get_matrix(L, NAME("attn_output.weight"), true, qdim, E, &ly->wo))) return s;
        if ((s = get_vector(L, NAME("attn_q_norm.weight"), true, hd, &ly->q_norm, pos))) return s;
        if ((s = get_vector(L, NAME("attn_k_norm.weight"), true, hd, &ly->k_norm, pos))) return s;
        if ((s = refuse_tensor(L, NAME("ssm_conv1d.weight"),
                               "a full-attention layer has no delta net")))
            return s;
    }
    if (hp->n_expert > 0) return load_moe_layer(L, il, ly);
    const uint64_t F = hp->n_ff;
    if ((s = refuse_tensor(L, NAME("ffn_gate_inp.weight"), "a router without expert_count")))
        return s;
    if ((s = get_matrix(L, NAME("ffn_gate.weight"), true, E, F, &ly->wgate))) return s;
    if ((s = get_matrix(L, NAME("ffn_up.weight"), true, E, F, &ly->wup))) return s;
    if ((s = get_matrix(L, NAME("ffn_down.weight"), true, F, E, &ly->wdown))) return s;
#undef NAME
    return MW_OK;
}

