/*
 * calib/calib_hparams.c — the one mapping from a Hugging Face config.json
 * (hf_config) to the runtime's hyper-parameters (rt_hparams), as the
 * converted GGUF would give them: used by calibration on an HF directory,
 * by plan and by --fit-ram.
 */
#include "calib/calib_int.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#include "calib/calib_gemma4.h"
#include "hf/hf.h"

/* The family fields as runtime/rt_model_hparams.c (read_hparams,
 * read_family) reads them from the GGUF hf_convert writes for c (llama.cpp's
 * defaults where a key is not written). */
static void family_hparams(const struct hf_config *c, struct rt_hparams *hp)
{
    hp->rope_attn_factor = 1.0f;
    if (c->arch == HF_ARCH_LLAMA || c->arch == HF_ARCH_MISTRAL || c->arch == HF_ARCH_QWEN2 ||
        c->arch == HF_ARCH_MIXTRAL) {
        hp->rope_base_swa = hp->rope_base;
        return;
    }
    hp->rope_neox = true;
    hp->n_rot = c->n_rot;
    switch (c->arch) {
    case HF_ARCH_QWEN3:
    case HF_ARCH_QWEN3MOE:
        hp->qk_norm = true;
        hp->rope_base_swa = hp->rope_base;
        break;
    case HF_ARCH_QWEN2MOE: /* qwen2's attention, NEOX RoPE */
        hp->rope_base_swa = hp->rope_base;
        break;
    case HF_ARCH_QWEN35:
    case HF_ARCH_QWEN35MOE:
    case HF_ARCH_QWEN3NEXT:
        /* gated full attention (q/k norm, NEOX RoPE on the first n_rot dims:
         * qwen35's text IMROPE is that), gated delta net layers; the MTP
         * blocks are in the file but not executed */
        hp->qk_norm = true;
        hp->rope_base_swa = hp->rope_base;
        hp->attn_out_gate = true;
        hp->full_attn_interval = c->full_attn_interval;
        hp->n_nextn = c->n_nextn;
        hp->ssm_conv_kernel = c->ssm_conv_kernel;
        hp->ssm_d_state = c->ssm_d_state;
        hp->ssm_n_group = c->ssm_n_group;
        hp->ssm_dt_rank = c->ssm_dt_rank;
        hp->ssm_d_inner = c->ssm_d_inner;
        hp->ssm_v_tiled = c->arch != HF_ARCH_QWEN3NEXT;
        break;
    case HF_ARCH_GEMMA2:
    case HF_ARCH_GEMMA3: {
        const bool g2 = c->arch == HF_ARCH_GEMMA2;
        hp->qk_norm = !g2;
        hp->post_norms = true;
        hp->embd_scale = true;
        hp->act = RT_ACT_GELU_TANH;
        hp->tied_output = true; /* the converter never writes output.weight */
        if (g2) {
            hp->n_swa = c->n_swa;
            hp->swa_pattern = 2;
            hp->attn_softcap = c->attn_softcap;
            hp->final_softcap = c->final_softcap;
            hp->rope_base_swa = hp->rope_base; /* no rope.freq_base_swa written */
            hp->rope_freq_scale_swa = hp->rope_freq_scale;
        } else {
            hp->n_swa = c->has_n_swa ? c->n_swa : 0;
            hp->swa_pattern = hp->n_swa ? 6 : 0;
            hp->final_softcap = c->final_softcap;
            hp->rope_base_swa = hp->n_swa ? c->rope_theta_swa : 10000.0f;
            hp->rope_freq_scale_swa = 1.0f;
        }
        /* llama.cpp: 1/sqrt(head_dim), or 1/sqrt(n_embd/n_head) for the 27B
         * models (46 / 62 layers) */
        const uint32_t big = g2 ? 46 : 62;
        hp->attn_scale = c->n_layer == big ? 1.0f / sqrtf((float)(c->n_embd / c->n_head))
                                           : 1.0f / sqrtf((float)c->head_dim);
        break;
    }
    case HF_ARCH_GPTOSS:
        /* even layers slide (llama.cpp's fixed period 2), YaRN over the
         * original context, softmax over the top-k router logits, the
         * clamped SwiGLU; q/k/v/o biases and sinks */
        hp->act = RT_ACT_SWIGLU_OAI;
        hp->moe_softmax_w = true;
        hp->n_swa = c->n_swa;
        hp->swa_pattern = 2;
        hp->rope_base_swa = hp->rope_base;
        hp->rope_yarn = c->rope_scaling == HF_ROPE_YARN;
        if (hp->rope_yarn) {
            hp->n_ctx_orig = c->rope_orig_ctx;
            if (c->rope_factor > 0) hp->rope_freq_scale = (float)(1.0 / c->rope_factor);
        }
        hp->rope_freq_scale_swa = hp->rope_freq_scale;
        break;
    case HF_ARCH_PHI3:
        hp->fused_qkv = true;
        hp->fused_gate_up = true;
        hp->n_ctx_orig = c->rope_orig_ctx;
        hp->has_rope_long = c->rope_scaling == HF_ROPE_LONGROPE;
        if (hp->has_rope_long) hp->rope_attn_factor = c->rope_attn_factor;
        hp->rope_base_swa = hp->rope_base; /* n_swa 0: llama.cpp turns it off */
        hp->attn_scale = 1.0f / sqrtf((float)c->head_dim);
        break;
    default:
        break;
    }
}

void calib_hparams_from_hf(const struct hf_config *c, struct rt_hparams *hp,
                           uint64_t *n_bias_floats)
{
    memset(hp, 0, sizeof *hp);
    switch (c->arch) {
    case HF_ARCH_QWEN2: hp->arch = RT_ARCH_QWEN2; break;
    case HF_ARCH_QWEN3: hp->arch = RT_ARCH_QWEN3; break;
    case HF_ARCH_GEMMA2: hp->arch = RT_ARCH_GEMMA2; break;
    case HF_ARCH_GEMMA3: hp->arch = RT_ARCH_GEMMA3; break;
    case HF_ARCH_PHI3: hp->arch = RT_ARCH_PHI3; break;
    case HF_ARCH_QWEN2MOE: hp->arch = RT_ARCH_QWEN2MOE; break;
    case HF_ARCH_QWEN3MOE: hp->arch = RT_ARCH_QWEN3MOE; break;
    case HF_ARCH_QWEN35: hp->arch = RT_ARCH_QWEN35; break;
    case HF_ARCH_QWEN35MOE: hp->arch = RT_ARCH_QWEN35MOE; break;
    case HF_ARCH_QWEN3NEXT: hp->arch = RT_ARCH_QWEN3NEXT; break;
    case HF_ARCH_GPTOSS: hp->arch = RT_ARCH_GPTOSS; break;
    case HF_ARCH_GEMMA4: hp->arch = RT_ARCH_GEMMA4; break;
    default: hp->arch = RT_ARCH_LLAMA; break; /* llama, mistral, mixtral */
    }
    snprintf(hp->arch_name, sizeof hp->arch_name, "%s", c->gguf_arch);
    hp->n_vocab = c->n_vocab;
    hp->n_embd = c->n_embd;
    hp->n_layer = c->n_layer;
    hp->n_head = c->n_head;
    hp->n_head_kv = c->n_head_kv;
    hp->head_dim = c->head_dim;
    hp->n_ff = c->n_ff;
    hp->n_rot = c->head_dim;
    hp->n_ctx_train = c->n_ctx;
    hp->rms_eps = c->rms_eps;
    hp->rope_base = c->has_rope_theta ? c->rope_theta : 10000.0f;
    hp->rope_freq_scale = c->rope_scaling == HF_ROPE_LINEAR && c->rope_factor > 0
                              ? (float)(1.0 / c->rope_factor)
                              : 1.0f;
    hp->rope_neox = hp->arch == RT_ARCH_QWEN2;
    hp->tied_output = c->tie_embeddings;
    hp->file_type = UINT32_MAX;
    family_hparams(c, hp);
    if (c->n_expert) { /* runtime/rt_model_hparams.c read_moe, for the GGUF hf_convert writes */
        hp->n_expert = c->n_expert;
        hp->n_expert_used = c->n_expert_used;
        hp->moe_norm_w = c->arch != HF_ARCH_QWEN2MOE && c->arch != HF_ARCH_GPTOSS;
        if (c->arch == HF_ARCH_MIXTRAL)
            hp->n_ff_exp = c->n_ff;
        else
            hp->n_ff_exp = c->has_n_ff_exp ? c->n_ff_exp
                                           : (c->n_expert_used ? c->n_ff / c->n_expert_used : 0);
        if (c->arch == HF_ARCH_QWEN2MOE) hp->n_ff_shexp = c->n_ff_shexp ? c->n_ff_shexp : c->n_ff;
        if (hf_arch_is_delta_net(c->arch)) hp->n_ff_shexp = c->n_ff_shexp;
    }
    if (c->arch == HF_ARCH_GEMMA4) calib_g4_hparams_from_hf(c, hp);
    if (n_bias_floats) {
        const uint64_t q = (uint64_t)c->n_head * c->head_dim;
        const uint64_t kv = (uint64_t)c->n_head_kv * c->head_dim;
        uint64_t per_layer = 0;
        if (c->attention_bias)
            per_layer += q + 2 * kv +
                         (c->arch == HF_ARCH_QWEN2 || c->arch == HF_ARCH_QWEN2MOE ? 0 : c->n_embd);
        if (c->mlp_bias) per_layer += 2 * (uint64_t)c->n_ff + c->n_embd;
        if (c->arch == HF_ARCH_GPTOSS) /* the sinks, the router's and the experts' biases */
            per_layer += c->n_head + (uint64_t)c->n_expert * (1 + 2 * (uint64_t)c->n_ff + c->n_embd);
        *n_bias_floats = (uint64_t)c->n_layer * per_layer;
    }
}
