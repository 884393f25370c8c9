/*
 * calib/calib_hparams.c — the one mapping from a Hugging Face config.json
 * (hf_config) to the runtime's hyper-parameters (rt_hparams), as the
 * converted GGUF would give them: used by calibration on an HF directory,
 * by plan and by --fit-ram.
 */
#include "calib/calib_int.h"

#include <stdio.h>
#include <string.h>

#include "hf/hf.h"

void calib_hparams_from_hf(const struct hf_config *c, struct rt_hparams *hp,
                           uint64_t *n_bias_floats)
{
    memset(hp, 0, sizeof *hp);
    hp->arch = c->arch == HF_ARCH_QWEN2 ? RT_ARCH_QWEN2 : RT_ARCH_LLAMA;
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
    if (n_bias_floats) {
        const uint64_t q = (uint64_t)c->n_head * c->head_dim;
        const uint64_t kv = (uint64_t)c->n_head_kv * c->head_dim;
        uint64_t per_layer = 0;
        if (c->attention_bias) per_layer += q + 2 * kv + (c->arch == HF_ARCH_QWEN2 ? 0 : c->n_embd);
        if (c->mlp_bias) per_layer += 2 * (uint64_t)c->n_ff + c->n_embd;
        *n_bias_floats = (uint64_t)c->n_layer * per_layer;
    }
}
