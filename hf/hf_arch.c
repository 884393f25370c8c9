/* hf/hf_arch.c — HF tensor names -> llama.cpp GGUF names, shapes and types
 * for llama / mistral / qwen2 (docs/formats.md §5, §6) and the Qwen3 /
 * Gemma 2-3 / Phi-3 families (as llama.cpp's converter maps them: qwen3 q_norm/k_norm ->
 * attn_q_norm/attn_k_norm; gemma2/3 post_attention_layernorm ->
 * post_attention_norm, pre_feedforward_layernorm -> ffn_norm,
 * post_feedforward_layernorm -> post_ffw_norm, every *norm.weight + 1,
 * lm_head skipped; Gemma3ForConditionalGeneration's text model under
 * model.language_model. with the vision tower and projector skipped; phi3
 * qkv_proj -> attn_qkv, gate_up_proj -> ffn_up, LongRoPE factors generated
 * first as rope_factors_long / rope_factors_short), the mixture-of-experts
 * mixture-of-experts families (qwen2moe, qwen3moe, mixtral: the router mlp.gate /
 * block_sparse_moe.gate -> ffn_gate_inp (F32), every expert's 2-D
 * gate/up/down stacked into ffn_{gate,up,down}_exps 3-D tensors placed where
 * llama.cpp's converter yields them — at the layer's last expert tensor in
 * source order, in its order (qwen: down, gate, up; mixtral: w1 gate, w2
 * down, w3 up) — and qwen2moe's shared expert -> ffn_*_shexp,
 * shared_expert_gate -> ffn_gate_inp_shexp (F32); transformers 5's fused
 * mlp.experts.gate_up_proj / down_proj read as views of each expert's slab),
 * and the conversion plan. */
#include "hf/hf_int.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum role {
    R_TOKEN_EMBD, R_OUTPUT_NORM, R_OUTPUT,
    R_ATTN_NORM, R_Q, R_K, R_V, R_O, R_QB, R_KB, R_VB, R_OB,
    R_FFN_NORM, R_GATE, R_UP, R_DOWN, R_GATEB, R_UPB, R_DOWNB,
    /* the Qwen3 / Gemma 2-3 / Phi-3 families */
    R_Q_NORM, R_K_NORM, R_POST_ATTN_NORM, R_POST_FFW_NORM, R_QKV, R_GATE_UP,
    /* mixture of experts; the experts themselves: see parse_expert */
    R_GATE_INP, R_GATE_SHEXP, R_UP_SHEXP, R_DOWN_SHEXP, R_GATE_INP_SHEXP,
    /* the gated delta net families (hf_arch_qwen35.c); R_LIN_QKV first */
    R_LIN_QKV, R_LIN_GATE, R_SSM_BETA, R_SSM_ALPHA, R_SSM_CONV, R_SSM_DT, R_SSM_A, R_SSM_NORM,
    R_SSM_OUT, R_LIN_QKVZ, R_SSM_BA, R_NEXTN_EH, R_NEXTN_ENORM, R_NEXTN_HNORM, R_NEXTN_HEAD_NORM,
    R_COUNT
};

/* Symbolic dimensions of the expected HF shapes. */
enum dim { D_NONE, D_VOCAB, D_EMBD, D_QDIM, D_KVDIM, D_FF, D_HEAD, D_QKV, D_FF2, D_NEXPERT,
           D_FFSH, D_ONE,
           /* the gated delta net */
           D_QGATE, D_CONV, D_VD, D_HV, D_SV, D_KERNEL, D_QKVZ, D_HV2, D_EMBD2 };

static const struct role_info {
    const char *hf;   /* HF name (per layer: after "model.layers.N.") */
    const char *gguf; /* GGUF name (per layer: after "blk.N.") */
    bool per_layer;
    enum dim shape[2]; /* HF order; shape[1] == D_NONE for 1-D */
} roles[R_COUNT] = {
    [R_TOKEN_EMBD] = {"model.embed_tokens.weight", "token_embd.weight", false, {D_VOCAB, D_EMBD}},
    [R_OUTPUT_NORM] = {"model.norm.weight", "output_norm.weight", false, {D_EMBD, D_NONE}},
    [R_OUTPUT] = {"lm_head.weight", "output.weight", false, {D_VOCAB, D_EMBD}},
    [R_ATTN_NORM] = {"input_layernorm.weight", "attn_norm.weight", true, {D_EMBD, D_NONE}},
    [R_Q] = {"self_attn.q_proj.weight", "attn_q.weight", true, {D_QDIM, D_EMBD}},
    [R_K] = {"self_attn.k_proj.weight", "attn_k.weight", true, {D_KVDIM, D_EMBD}},
    [R_V] = {"self_attn.v_proj.weight", "attn_v.weight", true, {D_KVDIM, D_EMBD}},
    [R_O] = {"self_attn.o_proj.weight", "attn_output.weight", true, {D_EMBD, D_QDIM}},
    [R_QB] = {"self_attn.q_proj.bias", "attn_q.bias", true, {D_QDIM, D_NONE}},
    [R_KB] = {"self_attn.k_proj.bias", "attn_k.bias", true, {D_KVDIM, D_NONE}},
    [R_VB] = {"self_attn.v_proj.bias", "attn_v.bias", true, {D_KVDIM, D_NONE}},
    [R_OB] = {"self_attn.o_proj.bias", "attn_output.bias", true, {D_EMBD, D_NONE}},
    [R_FFN_NORM] = {"post_attention_layernorm.weight", "ffn_norm.weight", true, {D_EMBD, D_NONE}},
    [R_GATE] = {"mlp.gate_proj.weight", "ffn_gate.weight", true, {D_FF, D_EMBD}},
    [R_UP] = {"mlp.up_proj.weight", "ffn_up.weight", true, {D_FF, D_EMBD}},
    [R_DOWN] = {"mlp.down_proj.weight", "ffn_down.weight", true, {D_EMBD, D_FF}},
    [R_GATEB] = {"mlp.gate_proj.bias", "ffn_gate.bias", true, {D_FF, D_NONE}},
    [R_UPB] = {"mlp.up_proj.bias", "ffn_up.bias", true, {D_FF, D_NONE}},
    [R_DOWNB] = {"mlp.down_proj.bias", "ffn_down.bias", true, {D_EMBD, D_NONE}},
    [R_Q_NORM] = {"self_attn.q_norm.weight", "attn_q_norm.weight", true, {D_HEAD, D_NONE}},
    [R_K_NORM] = {"self_attn.k_norm.weight", "attn_k_norm.weight", true, {D_HEAD, D_NONE}},
    /* gemma: post_attention_layernorm is the sandwich norm after attention,
     * pre_feedforward_layernorm the FFN's input norm (see role_hf) */
    [R_POST_ATTN_NORM] = {"post_attention_layernorm.weight", "post_attention_norm.weight", true,
                          {D_EMBD, D_NONE}},
    [R_POST_FFW_NORM] = {"post_feedforward_layernorm.weight", "post_ffw_norm.weight", true,
                         {D_EMBD, D_NONE}},
    [R_QKV] = {"self_attn.qkv_proj.weight", "attn_qkv.weight", true, {D_QKV, D_EMBD}},
    [R_GATE_UP] = {"mlp.gate_up_proj.weight", "ffn_up.weight", true, {D_FF2, D_EMBD}},
    /* mixtral: block_sparse_moe.gate.weight (see role_hf) */
    [R_GATE_INP] = {"mlp.gate.weight", "ffn_gate_inp.weight", true, {D_NEXPERT, D_EMBD}},
    [R_GATE_SHEXP] = {"mlp.shared_expert.gate_proj.weight", "ffn_gate_shexp.weight", true,
                      {D_FFSH, D_EMBD}},
    [R_UP_SHEXP] = {"mlp.shared_expert.up_proj.weight", "ffn_up_shexp.weight", true,
                    {D_FFSH, D_EMBD}},
    [R_DOWN_SHEXP] = {"mlp.shared_expert.down_proj.weight", "ffn_down_shexp.weight", true,
                      {D_EMBD, D_FFSH}},
    [R_GATE_INP_SHEXP] = {"mlp.shared_expert_gate.weight", "ffn_gate_inp_shexp.weight", true,
                          {D_ONE, D_EMBD}},
    [R_LIN_QKV] = {"linear_attn.in_proj_qkv.weight", "attn_qkv.weight", true, {D_CONV, D_EMBD}},
    [R_LIN_GATE] = {"linear_attn.in_proj_z.weight", "attn_gate.weight", true, {D_VD, D_EMBD}},
    [R_SSM_BETA] = {"linear_attn.in_proj_b.weight", "ssm_beta.weight", true, {D_HV, D_EMBD}},
    [R_SSM_ALPHA] = {"linear_attn.in_proj_a.weight", "ssm_alpha.weight", true, {D_HV, D_EMBD}},
    /* HF [channels, 1, kernel], squeezed (see the plan) */
    [R_SSM_CONV] = {"linear_attn.conv1d.weight", "ssm_conv1d.weight", true, {D_CONV, D_KERNEL}},
    [R_SSM_DT] = {"linear_attn.dt_bias", "ssm_dt.bias", true, {D_HV, D_NONE}},
    [R_SSM_A] = {"linear_attn.A_log", "ssm_a", true, {D_HV, D_NONE}},
    [R_SSM_NORM] = {"linear_attn.norm.weight", "ssm_norm.weight", true, {D_SV, D_NONE}},
    [R_SSM_OUT] = {"linear_attn.out_proj.weight", "ssm_out.weight", true, {D_EMBD, D_VD}},
    /* qwen3next: de-interleaved into attn_qkv + attn_gate (see the plan) */
    [R_LIN_QKVZ] = {"linear_attn.in_proj_qkvz.weight", "attn_qkv.weight", true, {D_QKVZ, D_EMBD}},
    [R_SSM_BA] = {"linear_attn.in_proj_ba.weight", "ssm_ba.weight", true, {D_HV2, D_EMBD}},
    /* the MTP block (blk.n_layer), after hf__qwen35_name's renames */
    [R_NEXTN_EH] = {"eh_proj.weight", "nextn.eh_proj.weight", true, {D_EMBD, D_EMBD2}},
    [R_NEXTN_ENORM] = {"enorm.weight", "nextn.enorm.weight", true, {D_EMBD, D_NONE}},
    [R_NEXTN_HNORM] = {"hnorm.weight", "nextn.hnorm.weight", true, {D_EMBD, D_NONE}},
    [R_NEXTN_HEAD_NORM] = {"shared_head.norm.weight", "nextn.shared_head_norm.weight", true,
                           {D_EMBD, D_NONE}},
};

/* Blocks of the file: the layers plus the MTP blocks. */
static uint64_t n_blk(const struct hf_config *c)
{
    return (uint64_t)c->n_layer + c->n_nextn;
}

static bool is_gemma(const struct hf_config *c)
{
    return c->arch == HF_ARCH_GEMMA2 || c->arch == HF_ARCH_GEMMA3;
}

/* The HF name of role r in c's architecture (per layer: after
 * "model.layers.N."), or NULL when the architecture has no such tensor. */
static const char *role_hf(const struct hf_config *c, enum role r)
{
    const enum hf_arch a = c->arch;
    const bool moe = hf_arch_is_moe(a);
    const bool legacy = a == HF_ARCH_LLAMA || a == HF_ARCH_MISTRAL || a == HF_ARCH_QWEN2 ||
                        a == HF_ARCH_QWEN2MOE || a == HF_ARCH_MIXTRAL;
    const bool dn = hf_arch_is_delta_net(a);
    if (r >= R_LIN_QKV && !dn) return NULL;
    switch (r) {
    case R_LIN_QKV: case R_LIN_GATE: case R_SSM_BETA: case R_SSM_ALPHA:
        return a == HF_ARCH_QWEN3NEXT ? NULL : roles[r].hf;
    case R_LIN_QKVZ: case R_SSM_BA:
        return a == HF_ARCH_QWEN3NEXT ? roles[r].hf : NULL;
    case R_Q_NORM: case R_K_NORM:
        return (a == HF_ARCH_QWEN3 || a == HF_ARCH_GEMMA3 || a == HF_ARCH_QWEN3MOE || dn)
                   ? roles[r].hf : NULL;
    case R_GATE_INP:
        return !moe ? NULL : a == HF_ARCH_MIXTRAL ? "block_sparse_moe.gate.weight" : roles[r].hf;
    case R_GATE_SHEXP: case R_UP_SHEXP: case R_DOWN_SHEXP: case R_GATE_INP_SHEXP:
        return a == HF_ARCH_QWEN2MOE || (dn && moe) ? roles[r].hf : NULL;
    case R_GATE: case R_UP: case R_DOWN: case R_GATEB: case R_UPB: case R_DOWNB:
        if (moe) return NULL; /* the experts replace the dense MLP */
        if (r == R_DOWN) return roles[r].hf;
        if (r == R_GATE || r == R_UP) return a == HF_ARCH_PHI3 ? NULL : roles[r].hf;
        return legacy ? roles[r].hf : NULL;
    case R_POST_ATTN_NORM:
        return is_gemma(c) || dn ? roles[r].hf : NULL; /* qwen35: the FFN's input norm */
    case R_POST_FFW_NORM:
        return is_gemma(c) ? roles[r].hf : NULL;
    case R_FFN_NORM:
        return dn ? NULL : is_gemma(c) ? "pre_feedforward_layernorm.weight" : roles[r].hf;
    case R_QKV: case R_GATE_UP:
        return a == HF_ARCH_PHI3 ? roles[r].hf : NULL;
    case R_Q: case R_K: case R_V:
        return a == HF_ARCH_PHI3 ? NULL : roles[r].hf;
    case R_QB: case R_KB: case R_VB: case R_OB:
        return legacy ? roles[r].hf : NULL;
    default:
        return roles[r].hf;
    }
}

static const char *const dim_names[] = {
    [D_NONE] = "", [D_VOCAB] = "vocab_size", [D_EMBD] = "hidden_size",
    [D_QDIM] = "num_attention_heads*head_dim", [D_KVDIM] = "num_key_value_heads*head_dim",
    [D_FF] = "intermediate_size", [D_HEAD] = "head_dim",
    [D_QKV] = "(num_attention_heads+2*num_key_value_heads)*head_dim",
    [D_FF2] = "2*intermediate_size", [D_NEXPERT] = "num_experts",
    [D_FFSH] = "shared_expert_intermediate_size", [D_ONE] = "1",
    [D_QGATE] = "2*num_attention_heads*head_dim",
    [D_CONV] = "2*linear_num_key_heads*linear_key_head_dim+linear_num_value_heads*linear_value_head_dim",
    [D_VD] = "linear_num_value_heads*linear_value_head_dim", [D_HV] = "linear_num_value_heads",
    [D_SV] = "linear_value_head_dim", [D_KERNEL] = "linear_conv_kernel_dim",
    [D_QKVZ] = "2*linear_num_key_heads*linear_key_head_dim+2*linear_num_value_heads*linear_value_head_dim",
    [D_HV2] = "2*linear_num_value_heads", [D_EMBD2] = "2*hidden_size",
};

static const char *dim_name(const struct hf_config *c, enum dim d)
{
    if (d == D_NEXPERT && c->arch == HF_ARCH_MIXTRAL) return "num_local_experts";
    return dim_names[d];
}

static uint64_t dim_value(const struct hf_config *c, enum dim d)
{
    switch (d) {
    case D_VOCAB: return c->n_vocab;
    case D_EMBD: return c->n_embd;
    case D_QDIM: return (uint64_t)c->n_head * c->head_dim;
    case D_KVDIM: return (uint64_t)c->n_head_kv * c->head_dim;
    case D_FF: return c->n_ff;
    case D_HEAD: return c->head_dim;
    case D_QKV: return ((uint64_t)c->n_head + 2 * (uint64_t)c->n_head_kv) * c->head_dim;
    case D_FF2: return 2 * (uint64_t)c->n_ff;
    case D_NEXPERT: return c->n_expert;
    case D_FFSH: return c->n_ff_shexp;
    case D_ONE: return 1;
    case D_QGATE: return 2 * (uint64_t)c->n_head * c->head_dim;
    case D_CONV: return 2 * (uint64_t)c->ssm_n_group * c->ssm_d_state + c->ssm_d_inner;
    case D_VD: return c->ssm_d_inner;
    case D_HV: return c->ssm_dt_rank;
    case D_SV: return c->ssm_head_v_dim;
    case D_KERNEL: return c->ssm_conv_kernel;
    case D_QKVZ: return 2 * (uint64_t)c->ssm_n_group * c->ssm_d_state + 2 * (uint64_t)c->ssm_d_inner;
    case D_HV2: return 2 * (uint64_t)c->ssm_dt_rank;
    case D_EMBD2: return 2 * (uint64_t)c->n_embd;
    case D_NONE: break;
    }
    return 0;
}

/* Which roles the architecture (with this config) requires; a present
 * tensor of a role that is not required is a contradiction. */
static bool role_required(const struct hf_config *c, enum role r)
{
    if (!role_hf(c, r)) return false;
    switch (r) {
    case R_OUTPUT: return !c->tie_embeddings;
    case R_QB: case R_KB: case R_VB: return c->attention_bias;
    case R_OB: return c->attention_bias && c->arch != HF_ARCH_QWEN2 && c->arch != HF_ARCH_QWEN2MOE;
    case R_GATEB: case R_UPB: case R_DOWNB: return c->mlp_bias;
    default: return true;
    }
}

/* Does blk.layer of a gated delta net family have role r? The linear
 * roles in the delta net layers, the attention roles (q carrying the gate)
 * in the full-attention layers and the MTP blocks, the nextn roles in the
 * first MTP block; the norms and the FFN everywhere. Other families: every
 * per-layer role in every layer. */
static bool role_at_layer(const struct hf_config *c, enum role r, uint64_t layer)
{
    if (!hf_arch_is_delta_net(c->arch) || !roles[r].per_layer) return true;
    const int kind = hf__qwen35_layer_kind(c, layer);
    switch (r) {
    case R_Q: case R_K: case R_V: case R_O: case R_Q_NORM: case R_K_NORM:
        return kind != HF_LAYER_LINEAR;
    case R_NEXTN_EH: case R_NEXTN_ENORM: case R_NEXTN_HNORM: case R_NEXTN_HEAD_NORM:
        return kind == HF_LAYER_MTP && layer == c->n_layer;
    default:
        return r >= R_LIN_QKV ? kind == HF_LAYER_LINEAR : true;
    }
}

static const char *const layer_kind_names[] = {"a gated delta net layer",
                                               "a full-attention layer", "an MTP block"};

static const char *role_flag(const struct hf_config *c, enum role r)
{
    switch (r) {
    case R_QB: case R_KB: case R_VB: return "attention_bias is false";
    case R_OB:
        return c->arch == HF_ARCH_QWEN2 || c->arch == HF_ARCH_QWEN2MOE ? "qwen2 has no o_proj bias"
                                                                      : "attention_bias is false";
    case R_GATEB: case R_UPB: case R_DOWNB: return "mlp_bias is false";
    default: return "";
    }
}

// --- output types ----------------------------------------------------------------

static const char *const out_names[HF_OUT_COUNT] = {"f32", "f16", "bf16", "q8_0"};
static const uint32_t out_ftype[HF_OUT_COUNT] = {0, 1, 32, 7};
static const uint32_t out_ggml[HF_OUT_COUNT] = {GGUF_TYPE_F32, GGUF_TYPE_F16, GGUF_TYPE_BF16,
                                                GGUF_TYPE_Q8_0};

const char *hf_out_type_name(enum hf_out_type t)
{
    return ((unsigned)t < HF_OUT_COUNT) ? out_names[t] : "?";
}

uint32_t hf_out_type_ftype(enum hf_out_type t)
{
    return ((unsigned)t < HF_OUT_COUNT) ? out_ftype[t] : 0;
}

bool hf_out_type_parse(const char *s, enum hf_out_type *out)
{
    for (int i = 0; i < HF_OUT_COUNT; i++) {
        const char *a = s, *b = out_names[i];
        while (*a && *b && (*a == *b || (*a >= 'A' && *a <= 'Z' && *a - 'A' + 'a' == *b))) a++, b++;
        if (!*a && !*b) {
            *out = (enum hf_out_type)i;
            return true;
        }
    }
    return false;
}

// --- llama3 rope factors -----------------------------------------------------------

void hf_llama3_rope_factors(const struct hf_config *c, float *out)
{
    /* convert_hf_to_gguf.py, LlamaModel.generate_extra_tensors: torch float32
     * tensors combined with Python scalars, so every step is a float32
     * operation; the Python-side constants are doubles rounded once. */
    const uint32_t dim = c->head_dim;
    const float base = c->rope_theta;
    const double low_wavelen = (double)c->rope_orig_ctx / c->rope_low_freq_factor;
    const double high_wavelen = (double)c->rope_orig_ctx / c->rope_high_freq_factor;
    const float two_pi = (float)(2.0 * 3.14159265358979323846);
    const float lw = (float)low_wavelen, hw = (float)high_wavelen;
    const float old_ctx = (float)c->rope_orig_ctx;
    const float lff = (float)c->rope_low_freq_factor;
    const float span = (float)(c->rope_high_freq_factor - c->rope_low_freq_factor);
    const float factor = (float)c->rope_factor;
    for (uint32_t i = 0; i < dim / 2; i++) {
        float ex = (float)(2 * i) / (float)dim;
        float p = powf(base, ex);
        float freq = 1.0f / p;
        float wavelen = two_pi / freq;
        if (wavelen < hw) {
            out[i] = 1.0f;
        } else if (wavelen > lw) {
            out[i] = factor;
        } else {
            float t = old_ctx / wavelen;
            float smooth = (t - lff) / span;
            float one_minus = 1.0f - smooth;
            float q = one_minus / factor;
            float den = q + smooth;
            out[i] = 1.0f / den;
        }
    }
}

// --- the plan ------------------------------------------------------------------------

enum mw_status hf__tensor_fail(struct mw_err *err, enum mw_status code, const struct hf_st *sh,
                               const struct hf_st_tensor *t, const char *fmt, ...)
{
    char msg[400];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    mw_err_set_path(err, hf_st_path(sh));
    mw_err_set_where(err, "tensor '%s'", t->name);
    return MW_FAIL(err, code, t->key_off, "%s", msg);
}

bool hf__plan_tables(struct hf_plan *p)
{
    p->f16_table = malloc(65536 * sizeof *p->f16_table);
    p->bf16_to_f16 = malloc(65536 * sizeof *p->bf16_to_f16);
    p->f16_to_bf16 = malloc(65536 * sizeof *p->f16_to_bf16);
    if (!p->f16_table || !p->bf16_to_f16 || !p->f16_to_bf16) return false;
    for (uint32_t h = 0; h < 65536; h++) {
        p->f16_table[h] = mw_f16_to_f32((uint16_t)h);
        p->bf16_to_f16[h] = mw_f32_to_f16(mw_bf16_to_f32((uint16_t)h));
    }
    for (uint32_t h = 0; h < 65536; h++) p->f16_to_bf16[h] = mw_f32_to_bf16(p->f16_table[h]);
    return true;
}

enum mw_status hf__plan_totals(struct hf_plan *p, const bool *dt_seen, const char *extra,
                               struct mw_err *err)
{
    for (uint64_t i = 0; i < p->n; i++)
        if (!mw_add_u64(p->total_bytes, p->t[i].nbytes, &p->total_bytes))
            return MW_FAIL(err, MW_E_FORMAT, MW_ERR_OFF_NONE, "total size overflows");
    static const enum hf_dtype dt_order[] = {HF_DT_F8_E4M3, HF_DT_F16, HF_DT_BF16, HF_DT_F32};
    size_t k = 0;
    for (size_t j = 0; j < sizeof dt_order / sizeof dt_order[0]; j++)
        if (dt_seen[dt_order[j]])
            k += (size_t)snprintf(p->source_dtype + k, sizeof p->source_dtype - k, "%s%s",
                                  k ? "+" : "", hf_dtype_name(dt_order[j]));
    if (extra) snprintf(p->source_dtype + k, sizeof p->source_dtype - k, "%s%s", k ? "+" : "", extra);
    return MW_OK;
}

bool hf__parse_layer(const char *name, uint64_t *layer, const char **rest)
{
    static const char pre[] = "model.layers.";
    if (strncmp(name, pre, sizeof pre - 1) != 0) return false;
    const char *p = name + sizeof pre - 1;
    if (*p < '0' || *p > '9' || (p[0] == '0' && p[1] >= '0' && p[1] <= '9')) return false;
    uint64_t v = 0;
    while (*p >= '0' && *p <= '9') {
        v = v * 10 + (uint64_t)(*p - '0');
        if (v > 1000000) return false;
        p++;
    }
    if (*p != '.') return false;
    *layer = v;
    *rest = p + 1;
    return true;
}


/* --- experts ---------------------------------------------------------------------
 * Per layer (after "model.layers.N."): qwen "mlp.experts.X.{gate,up,down}_proj.weight",
 * mixtral "block_sparse_moe.experts.X.{w1,w2,w3}.weight", X in [0, n_expert) written
 * as llama.cpp's converter looks it up (decimal, no leading zero). proj numbers the
 * stacked tensors in the order the converter writes them. */
static const char *const qwen_proj[3] = {"down_proj", "gate_proj", "up_proj"};
static const char *const mixtral_proj[3] = {"w1", "w2", "w3"};
static const char *const qwen_exps[3] = {"ffn_down_exps.weight", "ffn_gate_exps.weight",
                                         "ffn_up_exps.weight"};
static const char *const mixtral_exps[3] = {"ffn_gate_exps.weight", "ffn_down_exps.weight",
                                            "ffn_up_exps.weight"};

static const char *expert_prefix(const struct hf_config *c)
{
    return c->arch == HF_ARCH_MIXTRAL ? "block_sparse_moe.experts." : "mlp.experts.";
}

/* Is proj the down projection ([hidden, ff] in HF order)? */
static bool proj_is_down(const struct hf_config *c, int proj)
{
    return c->arch == HF_ARCH_MIXTRAL ? proj == 1 : proj == 0;
}

/* 1: rest is an expert tensor (*x, *proj set; *x may be >= n_expert); 0: not one */
static int parse_expert(const struct hf_config *c, const char *rest, uint64_t *x, int *proj)
{
    const char *pre = expert_prefix(c);
    const size_t n = strlen(pre);
    if (strncmp(rest, pre, n) != 0) return 0;
    const char *p = rest + n;
    if (*p < '0' || *p > '9' || (p[0] == '0' && p[1] >= '0' && p[1] <= '9')) return 0;
    uint64_t v = 0;
    while (*p >= '0' && *p <= '9') {
        v = v * 10 + (uint64_t)(*p - '0');
        if (v > 1000000) return 0;
        p++;
    }
    if (*p++ != '.') return 0;
    const char *const *names = c->arch == HF_ARCH_MIXTRAL ? mixtral_proj : qwen_proj;
    for (int k = 0; k < 3; k++) {
        const size_t m = strlen(names[k]);
        if (strncmp(p, names[k], m) == 0 && strcmp(p + m, ".weight") == 0) {
            *x = v;
            *proj = k;
            return 1;
        }
    }
    return 0;
}

static bool ends_with(const char *s, const char *suffix)
{
    size_t a = strlen(s), b = strlen(suffix);
    return a >= b && memcmp(s + a - b, suffix, b) == 0;
}

void hf_plan_free(struct hf_plan *p)
{
    if (!p) return;
    free(p->t);
    free(p->rope_freqs);
    free(p->f16_table);
    free(p->bf16_to_f16);
    free(p->f16_to_bf16);
    free(p->xsrc);
    free(p->xshard);
    free(p->xview);
    for (uint32_t i = 0; i < p->n_maps; i++) free(p->maps[i]);
    free(p);
}

uint64_t hf_plan_count(const struct hf_plan *p) { return p->n; }
const struct hf_plan_tensor *hf_plan_get(const struct hf_plan *p, uint64_t i)
{
    return i < p->n ? &p->t[i] : NULL;
}
uint64_t hf_plan_total_bytes(const struct hf_plan *p) { return p->total_bytes; }
const char *hf_plan_source_dtype(const struct hf_plan *p) { return p->source_dtype; }

static enum mw_status finish_entry(struct hf_plan_tensor *e, struct mw_err *err)
{
    if (!gguf_tensor_nbytes(e->type, e->ne, &e->nbytes)) {
        mw_err_set_where(err, "tensor '%s'", e->name);
        return MW_FAIL(err, MW_E_FORMAT, MW_ERR_OFF_NONE, "size of %s tensor overflows",
                       gguf_type_get(e->type) ? gguf_type_get(e->type)->name : "?");
    }
    return MW_OK;
}

/* Append the stacked tensor k3 (the converter's order) of layer, whose
 * experts are in slots [(layer * 3 + k3) * n_expert, + n_expert). */
static enum mw_status emit_stacked(struct hf_plan *p, const struct hf_config *c,
                                   enum hf_out_type ot, uint64_t layer, int k3, struct mw_err *err)
{
    const char *const *gn = c->arch == HF_ARCH_MIXTRAL ? mixtral_exps : qwen_exps;
    struct hf_plan_tensor *e = &p->t[p->n++];
    const size_t base = ((size_t)layer * 3 + (size_t)k3) * c->n_expert;
    snprintf(e->name, sizeof e->name, "blk.%llu.%s", (unsigned long long)layer, gn[k3]);
    e->n_src = c->n_expert;
    e->srcs = &p->xsrc[base];
    e->srcs_shard = &p->xshard[base];
    e->src = p->xsrc[base];
    e->shard = p->xshard[base];
    e->n_dims = 3;
    const bool dn = proj_is_down(c, k3);
    e->ne[0] = dn ? c->n_ff_exp : c->n_embd;
    e->ne[1] = dn ? c->n_embd : c->n_ff_exp;
    e->ne[2] = c->n_expert;
    e->ne[3] = 1;
    e->type = out_ggml[ot];
    if (ot == HF_OUT_Q8_0 && e->ne[0] % 32 != 0) e->type = GGUF_TYPE_F16;
    return finish_entry(e, err);
}

/* Expert xid's projection proj of layer (source tensor t of shard sh): check
 * it, record it, and once the layer's 3 * n_expert expert tensors are all in
 * (llama.cpp's converter merges at that point), append the layer's three
 * stacked tensors. */
/* An expert tensor's layer exists and (fused: the layers already holding
 * fused expert tensors, may be NULL) does not mix the two layouts. */
static enum mw_status expert_layer_ok(const struct hf_config *c, const struct hf_st *sh,
                                      const struct hf_st_tensor *t, uint64_t layer,
                                      const uint8_t *fused, struct mw_err *err)
{
    if (layer >= n_blk(c))
        return hf__tensor_fail(err, MW_E_FORMAT, sh, t,
                               "layer %llu does not exist (config.json num_hidden_layers is %u%s)",
                               (unsigned long long)layer, c->n_layer,
                               c->n_nextn ? ", plus the MTP blocks" : "");
    if (fused && fused[layer])
        return hf__tensor_fail(err, MW_E_FORMAT, sh, t,
                               "layer %llu mixes per-expert mlp.experts.N.* tensors with "
                               "fused ones",
                               (unsigned long long)layer);
    return MW_OK;
}

static enum mw_status plan_expert(struct hf_plan *p, const struct hf_model *m, enum hf_out_type ot,
                                  const struct hf_st *sh, const struct hf_st_tensor *t,
                                  uint64_t layer, uint64_t xid, int proj, uint32_t *xcount,
                                  const uint8_t *fused, bool *dt_seen, struct mw_err *err)
{
    const struct hf_config *c = &m->cfg;
    const enum mw_status ls = expert_layer_ok(c, sh, t, layer, fused, err);
    if (ls != MW_OK) return ls;
    if (xid >= c->n_expert)
        return hf__tensor_fail(err, MW_E_FORMAT, sh, t,
                               "expert %llu does not exist (config.json %s is %u)",
                               (unsigned long long)xid, dim_name(c, D_NEXPERT), c->n_expert);
    const bool down = proj_is_down(c, proj);
    const char *ffw = c->arch == HF_ARCH_MIXTRAL ? "intermediate_size" : "moe_intermediate_size";
    const uint64_t r = down ? c->n_embd : c->n_ff_exp, k = down ? c->n_ff_exp : c->n_embd;
    if (t->n_dims != 2 || t->shape[0] != r || t->shape[1] != k) {
        char got[96];
        hf_st_shape_str(t, got, sizeof got);
        return hf__tensor_fail(err, MW_E_FORMAT, sh, t,
                               "shape %s, expected [%llu, %llu] (%s, %s) from config.json", got,
                               (unsigned long long)r, (unsigned long long)k,
                               down ? "hidden_size" : ffw, down ? ffw : "hidden_size");
    }
    const enum mw_status ds = hf__src_dtype_ok(m, sh, t, err);
    if (ds != MW_OK) return ds;
    dt_seen[t->dtype] = true;
    const size_t slot = ((size_t)layer * 3 + (size_t)proj) * c->n_expert + (size_t)xid;
    p->xsrc[slot] = t; /* names are unique: a slot is filled once */
    p->xshard[slot] = sh;
    if (++xcount[layer] < 3 * c->n_expert) return MW_OK;
    for (int k3 = 0; k3 < 3; k3++) {
        enum mw_status s = emit_stacked(p, c, ot, layer, k3, err);
        if (s != MW_OK) return s;
    }
    return MW_OK;
}

/* The fused layout transformers >= 5 saves (qwen2moe, qwen3moe):
 * "mlp.experts.down_proj" [n_expert, hidden, ff] and "mlp.experts.gate_up_proj"
 * [n_expert, 2*ff, hidden] (".weight" optional). llama.cpp's Qwen2MoeModel
 * writes down_proj as it is, at its place, and gate_up_proj split into
 * gate (rows [0, ff) of each expert) then up (rows [ff, 2*ff)), at its place.
 * Returns 1 (down_proj), 2 (gate_up_proj) or 0 (neither). */
static int parse_fused(const struct hf_config *c, const char *rest)
{
    if (c->arch != HF_ARCH_QWEN2MOE && c->arch != HF_ARCH_QWEN3MOE && c->arch != HF_ARCH_QWEN35MOE &&
        c->arch != HF_ARCH_QWEN3NEXT)
        return 0;
    if (strcmp(rest, "mlp.experts.down_proj") == 0 || strcmp(rest, "mlp.experts.down_proj.weight") == 0)
        return 1;
    if (strcmp(rest, "mlp.experts.gate_up_proj") == 0 ||
        strcmp(rest, "mlp.experts.gate_up_proj.weight") == 0)
        return 2;
    return 0;
}

/* A fused expert tensor (kind: parse_fused) of layer: check it, describe
 * each expert's slab as a 2-D view of it (p->xview) in the same slots as the
 * per-expert layout, and append its stacked tensor(s). */
static enum mw_status plan_fused(struct hf_plan *p, const struct hf_model *m, enum hf_out_type ot,
                                 const struct hf_st *sh, const struct hf_st_tensor *t,
                                 uint64_t layer, int kind, uint8_t *fused, const uint32_t *xcount,
                                 bool *dt_seen, struct mw_err *err)
{
    const struct hf_config *c = &m->cfg;
    const enum mw_status ls = expert_layer_ok(c, sh, t, layer, NULL, err);
    if (ls != MW_OK) return ls;
    if (xcount[layer])
        return hf__tensor_fail(err, MW_E_FORMAT, sh, t,
                               "layer %llu mixes per-expert mlp.experts.N.* tensors with "
                               "fused ones",
                               (unsigned long long)layer);
    const uint64_t X = c->n_expert, F = c->n_ff_exp, E = c->n_embd;
    const uint64_t r = kind == 1 ? E : 2 * F, k = kind == 1 ? F : E;
    if (t->n_dims != 3 || t->shape[0] != X || t->shape[1] != r || t->shape[2] != k) {
        char got[96];
        hf_st_shape_str(t, got, sizeof got);
        return hf__tensor_fail(err, MW_E_FORMAT, sh, t,
                               "shape %s, expected [%llu, %llu, %llu] (num_experts, %s, %s) from "
                               "config.json", got, (unsigned long long)X, (unsigned long long)r,
                               (unsigned long long)k,
                               kind == 1 ? "hidden_size" : "2*moe_intermediate_size",
                               kind == 1 ? "moe_intermediate_size" : "hidden_size");
    }
    if (!hf_dtype_convertible(t->dtype))
        return hf__tensor_fail(err, MW_E_UNSUPPORTED, sh, t,
                               "dtype %s cannot be converted (F16, BF16 or F32; fused experts "
                               "in FP8 are not read)", hf_dtype_name(t->dtype));
    dt_seen[t->dtype] = true;
    const uint64_t es = hf_dtype_size(t->dtype);
    /* proj slots (qwen order): 0 down, 1 gate, 2 up */
    for (int half = 0; half < (kind == 1 ? 1 : 2); half++) {
        const int proj = kind == 1 ? 0 : 1 + half;
        const uint64_t rows = kind == 1 ? E : F;
        for (uint64_t x = 0; x < X; x++) {
            const size_t slot = ((size_t)layer * 3 + (size_t)proj) * X + (size_t)x;
            struct hf_st_tensor *v = &p->xview[slot];
            *v = *t;
            v->n_dims = 2;
            v->shape[0] = rows;
            v->shape[1] = k;
            v->n_elems = rows * k;
            v->nbytes = v->n_elems * es;
            const uint64_t off = (x * r + (uint64_t)half * F) * k * es;
            v->file_off = t->file_off + off;
            v->data = t->data + off;
            p->xsrc[slot] = v;
            p->xshard[slot] = sh;
        }
    }
    fused[layer] |= (uint8_t)kind;
    enum mw_status s = MW_OK;
    if (kind == 1) s = emit_stacked(p, c, ot, layer, 0, err);
    else if ((s = emit_stacked(p, c, ot, layer, 1, err)) == MW_OK)
        s = emit_stacked(p, c, ot, layer, 2, err);
    return s;
}

enum mw_status hf_plan_build(const struct hf_model *m, enum hf_out_type ot, struct hf_plan **out,
                             struct mw_err *err)
{
    *out = NULL;
    const struct hf_config *c = &m->cfg;
    if ((unsigned)ot >= HF_OUT_COUNT)
        return MW_FAIL(err, MW_E_USAGE, MW_ERR_OFF_NONE, "invalid output type");
    if (c->arch == HF_ARCH_GEMMA4) return hf__gemma4_plan(m, ot, out, err);
    if (c->arch == HF_ARCH_GPTOSS) return hf__gptoss_plan(m, ot, out, err);
    struct hf_plan *p = calloc(1, sizeof *p);
    /* + rope_freqs or the two LongRoPE factor tensors, + one per layer: a
     * fused gate_up_proj gives two */
    uint64_t cap = m->n + 3 + (hf_arch_is_moe(c->arch) ? n_blk(c) : 0) +
                   (c->arch == HF_ARCH_QWEN3NEXT ? n_blk(c) : 0);
    /* seen[role][layer]: roles present; global roles use layer 0 */
    uint8_t *seen = calloc((size_t)R_COUNT * n_blk(c), 1);
    /* experts: n_layer * 3 * n_expert source slots (n_layer <= 512 and
     * n_expert <= 1024: config.json's limits), and a count per layer */
    const bool moe = hf_arch_is_moe(c->arch) && c->n_expert > 0;
    const size_t n_xslot = moe ? (size_t)n_blk(c) * 3 * c->n_expert : 0;
    uint32_t *xcount = moe ? calloc(n_blk(c), sizeof *xcount) : NULL;
    uint8_t *fused = moe ? calloc(n_blk(c), 1) : NULL; /* bits: 1 down_proj, 2 gate_up_proj */
    bool any_fused = false;
    for (uint64_t i = 0; moe && i < m->n; i++) {
        uint64_t l;
        const char *r, *nm = hf_model_tensor(m, i, NULL)->name;
        char buf[GGUF_MAX_NAME + 64];
        if (hf_arch_is_delta_net(c->arch) && !hf__qwen35_name(c, nm, buf, sizeof buf, &nm)) continue;
        if (hf__parse_layer(nm, &l, &r) && parse_fused(c, r)) any_fused = true;
    }
    if (p && moe) {
        p->xsrc = calloc(n_xslot, sizeof *p->xsrc);
        p->xshard = calloc(n_xslot, sizeof *p->xshard);
        if (any_fused) p->xview = calloc(n_xslot, sizeof *p->xview);
    }
    if (p) p->t = calloc((size_t)cap, sizeof *p->t);
    if (!p || !p->t || !hf__plan_tables(p) || !seen ||
        (moe && (!xcount || !fused || !p->xsrc || !p->xshard || (any_fused && !p->xview)))) {
        free(seen);
        free(xcount);
        free(fused);
        hf_plan_free(p);
        return MW_FAIL(err, MW_E_NOMEM, MW_ERR_OFF_NONE, "out of memory");
    }
    p->m = m;
    enum mw_status s = MW_OK;
    bool dt_seen[HF_DT_COUNT] = {false};
    const bool permute = c->arch == HF_ARCH_LLAMA || c->arch == HF_ARCH_MISTRAL ||
                         c->arch == HF_ARCH_MIXTRAL;

    if (c->rope_scaling == HF_ROPE_LLAMA3) {
        p->rope_freqs = malloc(sizeof(float) * (c->head_dim / 2));
        if (!p->rope_freqs) {
            s = MW_FAIL(err, MW_E_NOMEM, MW_ERR_OFF_NONE, "out of memory");
            goto out;
        }
        hf_llama3_rope_factors(c, p->rope_freqs);
        struct hf_plan_tensor *e = &p->t[p->n++];
        snprintf(e->name, sizeof e->name, "rope_freqs.weight");
        e->type = GGUF_TYPE_F32;
        e->n_dims = 1;
        e->ne[0] = c->head_dim / 2;
        e->ne[1] = e->ne[2] = e->ne[3] = 1;
        e->gen = p->rope_freqs;
        s = finish_entry(e, err);
        if (s != MW_OK) goto out;
    }

    if (c->rope_scaling == HF_ROPE_LONGROPE) {
        /* Phi3MiniModel.generate_extra_tensors: long, then short (F32) */
        for (int k = 0; k < 2; k++) {
            struct hf_plan_tensor *e = &p->t[p->n++];
            snprintf(e->name, sizeof e->name, k ? "rope_factors_short.weight"
                                                 : "rope_factors_long.weight");
            e->type = GGUF_TYPE_F32;
            e->n_dims = 1;
            e->ne[0] = c->n_rope_factors;
            e->ne[1] = e->ne[2] = e->ne[3] = 1;
            e->gen = k ? c->rope_short : c->rope_long;
            s = finish_entry(e, err);
            if (s != MW_OK) goto out;
        }
    }

    const uint32_t *dmaps[HF_MAP_COUNT] = {NULL};
    if (hf_arch_is_delta_net(c->arch)) {
        s = hf__qwen35_maps(p, c, dmaps, err);
        if (s != MW_OK) goto out;
    }

    for (uint64_t i = 0; i < m->n; i++) {
        const struct hf_st *sh;
        const struct hf_st_tensor *t = hf_model_tensor(m, i, &sh);
        const char *name = t->name;
        if (ends_with(name, ".rotary_emb.inv_freq")) continue; /* recomputed by llama.cpp */
        if (hf__fp8_is_scale(c, name)) { /* read with its weight (hf_fp8.c) */
            if ((s = hf__fp8_scale_owner(m, sh, t, err)) != MW_OK) goto out;
            continue;
        }
        char norm_name[GGUF_MAX_NAME + 64];
        if (hf_arch_is_delta_net(c->arch)) {
            /* language_model. removed, the vision tower skipped, mtp.* renamed */
            if (!hf__qwen35_name(c, name, norm_name, sizeof norm_name, &name)) continue;
        } else if (c->multimodal) {
            /* Gemma3ForConditionalGeneration: the vision tower and the
             * projector are not part of the text model (llama.cpp's text
             * converter skips them); the text model is under
             * model.language_model. (transformers >= 4.52) or
             * language_model.model. (older checkpoints) */
            static const char *const skip[] = {"model.vision_tower.", "model.multi_modal_projector.",
                                               "vision_tower.", "multi_modal_projector."};
            bool skipped = false;
            for (size_t k = 0; k < sizeof skip / sizeof skip[0]; k++)
                if (strncmp(name, skip[k], strlen(skip[k])) == 0) skipped = true;
            if (skipped) continue;
            static const char *const lm[] = {"model.language_model.", "language_model.model.",
                                             "language_model."};
            for (size_t k = 0; k < sizeof lm / sizeof lm[0]; k++) {
                const size_t n = strlen(lm[k]);
                if (strncmp(name, lm[k], n) == 0) {
                    snprintf(norm_name, sizeof norm_name, "%s%s", k < 2 ? "model." : "", name + n);
                    name = norm_name;
                    break;
                }
            }
        }
        uint64_t layer = 0;
        const char *rest = NULL;
        int role = -1;
        uint64_t xid;
        int proj;
        if (moe && hf__parse_layer(name, &layer, &rest) && parse_expert(c, rest, &xid, &proj)) {
            s = plan_expert(p, m, ot, sh, t, layer, xid, proj, xcount, fused, dt_seen, err);
            if (s != MW_OK) goto out;
            continue;
        }
        if (moe && hf__parse_layer(name, &layer, &rest) && parse_fused(c, rest)) {
            s = plan_fused(p, m, ot, sh, t, layer, parse_fused(c, rest), fused, xcount, dt_seen,
                           err);
            if (s != MW_OK) goto out;
            continue;
        }
        if (hf__parse_layer(name, &layer, &rest)) {
            for (int r = 0; r < R_COUNT; r++)
                if (roles[r].per_layer && role_hf(c, (enum role)r) &&
                    strcmp(rest, role_hf(c, (enum role)r)) == 0)
                    role = r;
        } else {
            for (int r = 0; r < R_COUNT; r++)
                if (!roles[r].per_layer && role_hf(c, (enum role)r) &&
                    strcmp(name, role_hf(c, (enum role)r)) == 0)
                    role = r;
        }
        if (role < 0) {
            s = hf__tensor_fail(err, MW_E_UNSUPPORTED, sh, t,
                                "not a tensor of the %s architecture (%s); cannot map it to GGUF",
                                hf_arch_name(c->arch), c->hf_arch_name);
            goto out;
        }
        const struct role_info *ri = &roles[role];
        if (ri->per_layer && layer >= n_blk(c)) {
            s = hf__tensor_fail(err, MW_E_FORMAT, sh, t,
                                "layer %llu does not exist (config.json num_hidden_layers is %u%s)",
                                (unsigned long long)layer, c->n_layer,
                                c->n_nextn ? ", plus the MTP blocks" : "");
            goto out;
        }
        if (ri->per_layer && !role_at_layer(c, (enum role)role, layer)) {
            s = hf__tensor_fail(err, MW_E_FORMAT, sh, t,
                                "unexpected: layer %llu is %s (config.json "
                                "full_attention_interval %u)",
                                (unsigned long long)layer,
                                layer_kind_names[hf__qwen35_layer_kind(c, layer)],
                                c->full_attn_interval);
            goto out;
        }
        /* tied: llama.cpp reuses token_embd; Gemma's converters skip lm_head */
        if (role == R_OUTPUT && (c->tie_embeddings || is_gemma(c))) continue;
        if (!role_required(c, (enum role)role)) {
            s = hf__tensor_fail(err, MW_E_FORMAT, sh, t, "unexpected: config.json %s",
                                role_flag(c, (enum role)role));
            goto out;
        }
        /* shape (the delta net families: q_proj carries the gate rows;
         * conv1d is [channels, 1, kernel], written squeezed) */
        const bool dn = hf_arch_is_delta_net(c->arch);
        const enum dim d0 = dn && role == R_Q ? D_QGATE : ri->shape[0];
        uint32_t want_dims = ri->shape[1] == D_NONE ? 1 : 2;
        uint64_t want[2] = {dim_value(c, d0), dim_value(c, ri->shape[1])};
        const bool conv3 = role == R_SSM_CONV;
        bool ok = conv3 ? t->n_dims == 3 && t->shape[0] == want[0] && t->shape[1] == 1 &&
                              t->shape[2] == want[1]
                        : t->n_dims == want_dims && t->shape[0] == want[0] &&
                              (want_dims == 1 || t->shape[1] == want[1]);
        if (!ok) {
            char got[96], exp[160];
            size_t k = (size_t)snprintf(got, sizeof got, "[");
            for (uint32_t d = 0; d < t->n_dims && k < sizeof got; d++)
                k += (size_t)snprintf(got + k, sizeof got - k, "%s%llu", d ? ", " : "",
                                      (unsigned long long)t->shape[d]);
            if (k < sizeof got) snprintf(got + k, sizeof got - k, "]");
            if (want_dims == 1)
                snprintf(exp, sizeof exp, "[%llu] (%s)", (unsigned long long)want[0],
                         dim_name(c, d0));
            else if (conv3)
                snprintf(exp, sizeof exp, "[%llu, 1, %llu] (conv channels %s, 1, %s)",
                         (unsigned long long)want[0], (unsigned long long)want[1],
                         dim_name(c, d0), dim_name(c, ri->shape[1]));
            else
                snprintf(exp, sizeof exp, "[%llu, %llu] (%s, %s)", (unsigned long long)want[0],
                         (unsigned long long)want[1], dim_name(c, d0),
                         dim_name(c, ri->shape[1]));
            s = hf__tensor_fail(err, MW_E_FORMAT, sh, t, "shape %s, expected %s from config.json",
                                got, exp);
            goto out;
        }
        if ((s = hf__src_dtype_ok(m, sh, t, err)) != MW_OK) goto out;
        dt_seen[t->dtype] = true;
        seen[(size_t)role * n_blk(c) + (ri->per_layer ? layer : 0)] = 1;

        struct hf_plan_tensor *e = &p->t[p->n++];
        if (ri->per_layer)
            snprintf(e->name, sizeof e->name, "blk.%llu.%s", (unsigned long long)layer, ri->gguf);
        else
            snprintf(e->name, sizeof e->name, "%s", ri->gguf);
        e->src = t;
        e->shard = sh;
        e->n_dims = want_dims;
        e->ne[0] = want_dims == 1 ? want[0] : want[1];
        e->ne[1] = want_dims == 1 ? 1 : want[0];
        e->ne[2] = e->ne[3] = 1;
        if (permute && (role == R_Q || role == R_QB || role == R_K || role == R_KB)) {
            e->xform = HF_XFORM_PERMUTE;
            e->perm_heads = (role == R_Q || role == R_QB) ? c->n_head : c->n_head_kv;
        }
        if (is_gemma(c) && ends_with(name, "norm.weight")) e->xform = HF_XFORM_ADD_ONE;
        if (dn) {
            /* Qwen3NextModel.modify_tensors: every norm but the delta net's
             * gated norm is (1 + w); ssm_a = -exp(A_log); the V-head gathers */
            if (ends_with(name, "norm.weight") && role != R_SSM_NORM) e->xform = HF_XFORM_ADD_ONE;
            if (role == R_SSM_A) e->xform = HF_XFORM_NEG_EXP;
            switch (role) {
            case R_LIN_QKV: case R_SSM_CONV: e->row_map = dmaps[HF_MAP_QKV]; break;
            case R_LIN_GATE: e->row_map = dmaps[HF_MAP_V]; break;
            case R_SSM_BETA: case R_SSM_ALPHA: case R_SSM_DT: case R_SSM_A:
                e->row_map = dmaps[HF_MAP_HEAD];
                break;
            case R_SSM_OUT: e->col_map = dmaps[HF_MAP_V]; break;
            case R_LIN_QKVZ:
                e->row_map = dmaps[HF_MAP_QKVZ_QKV];
                e->ne[1] = dim_value(c, D_CONV);
                break;
            default: break;
            }
        }
        if (want_dims == 1 || role == R_GATE_INP || role == R_GATE_INP_SHEXP || conv3) {
            /* 1-D, and the routers: F32 whatever the output type (llama.cpp's
             * converter keeps FFN_GATE_INP / FFN_GATE_INP_SHEXP in F32) */
            e->type = GGUF_TYPE_F32;
        } else {
            e->type = out_ggml[ot];
            if (ot == HF_OUT_Q8_0 && e->ne[0] % 32 != 0) e->type = GGUF_TYPE_F16;
        }
        s = finish_entry(e, err);
        if (s != MW_OK) goto out;
        if (role == R_LIN_QKVZ) { /* its z rows: attn_gate, right after attn_qkv */
            struct hf_plan_tensor *g = &p->t[p->n++];
            *g = *e;
            snprintf(g->name, sizeof g->name, "blk.%llu.attn_gate.weight", (unsigned long long)layer);
            g->row_map = dmaps[HF_MAP_QKVZ_Z];
            g->ne[1] = c->ssm_d_inner;
            s = finish_entry(g, err);
            if (s != MW_OK) goto out;
        }
    }

    /* everything required is there */
    for (int r = 0; r < R_COUNT; r++) {
        if (!role_required(c, (enum role)r)) continue;
        uint64_t nl = roles[r].per_layer ? n_blk(c) : 1;
        for (uint64_t l = 0; l < nl; l++) {
            if (seen[(size_t)r * n_blk(c) + l] || !role_at_layer(c, (enum role)r, l)) continue;
            mw_err_set_path(err, m->dir);
            const char *pfx = c->multimodal ? "model.language_model." : "model.";
            const char *hn = role_hf(c, (enum role)r);
            char dn_name[GGUF_MAX_NAME + 64];
            if (hf_arch_is_delta_net(c->arch) && roles[r].per_layer) {
                hf__qwen35_hf_name(c, l, hn, dn_name, sizeof dn_name);
                mw_err_set_where(err, "tensor '%s'", dn_name);
            } else if (roles[r].per_layer)
                mw_err_set_where(err, "tensor '%slayers.%llu.%s'", pfx, (unsigned long long)l, hn);
            else if (c->multimodal && strncmp(hn, "model.", 6) == 0)
                mw_err_set_where(err, "tensor '%s%s'", pfx, hn + 6);
            else
                mw_err_set_where(err, "tensor '%s'", hn);
            s = MW_FAIL(err, MW_E_FORMAT, MW_ERR_OFF_NONE, "missing (required by %s%s)",
                        c->hf_arch_name,
                        r == R_OUTPUT ? " with tie_word_embeddings false"
                        : (r == R_QB || r == R_KB || r == R_VB || r == R_OB)
                            ? (c->arch == HF_ARCH_QWEN2 || c->arch == HF_ARCH_QWEN2MOE
                                   ? "" : " with attention_bias true")
                        : (r == R_GATEB || r == R_UPB || r == R_DOWNB) ? " with mlp_bias true"
                                                                       : "");
            goto out;
        }
    }

    /* every expert of every layer is there */
    for (uint32_t l = 0; moe && l < n_blk(c); l++) {
        if (xcount[l] == 3 * c->n_expert || fused[l] == 3) continue;
        if (fused[l]) {
            mw_err_set_path(err, m->dir);
            mw_err_set_where(err, "tensor 'model.layers.%u.mlp.experts.%s'", l,
                             fused[l] == 1 ? "gate_up_proj" : "down_proj");
            s = MW_FAIL(err, MW_E_FORMAT, MW_ERR_OFF_NONE,
                        "missing (layer %u has the fused mlp.experts.%s)", l,
                        fused[l] == 1 ? "down_proj" : "gate_up_proj");
            goto out;
        }
        const char *const *names = c->arch == HF_ARCH_MIXTRAL ? mixtral_proj : qwen_proj;
        for (uint32_t x = 0; x < c->n_expert; x++)
            for (int k = 0; k < 3; k++) {
                if (p->xsrc[((size_t)l * 3 + (size_t)k) * c->n_expert + x]) continue;
                mw_err_set_path(err, m->dir);
                mw_err_set_where(err, "tensor 'model.layers.%u.%s%u.%s.weight'", l,
                                 expert_prefix(c), x, names[k]);
                s = MW_FAIL(err, MW_E_FORMAT, MW_ERR_OFF_NONE,
                            "missing (expert %u of layer %u; %s with %s %u needs every expert's "
                            "%s, %s and %s)", x, l, c->hf_arch_name, dim_name(c, D_NEXPERT),
                            c->n_expert, names[0], names[1], names[2]);
                goto out;
            }
    }

    s = hf__plan_totals(p, dt_seen, NULL, err);
out:
    free(seen);
    free(xcount);
    free(fused);
    if (s != MW_OK) {
        hf_plan_free(p);
        return s;
    }
    *out = p;
    return MW_OK;
}
