/*
 * runtime/rt_gptoss.c — the row operations of gpt-oss's graph (llama.cpp's
 * src/models/openai-moe.cpp, build_moe_ffn with
 * LLAMA_EXPERT_GATING_FUNC_TYPE_SOFTMAX_WEIGHT and LLM_FFN_SWIGLU_OAI_MOE,
 * ggml-cpu's swiglu_oai, the sinks of its flash attention and YaRN's
 * correction dimensions), each as ggml computes it (rt_ops.h). The rest of
 * the graph is the shared one: rt_forward.c, rt_attn*.c and rt_moe.c call
 * these where the model has sinks, expert biases or hp->moe_softmax_w.
 */
#define _DEFAULT_SOURCE /* M_PI */
#include "runtime/rt_ops.h"

#include <math.h>

void rt_swiglu_oai(float *g, const float *u, uint64_t n)
{
    /* ggml_compute_forward_swiglu_oai_f32, alpha 1.702, limit 7:
     * x = std::min(g, limit), y = std::clamp(u, -limit, limit) */
    const float alpha = 1.702f, limit = 7.0f;
    for (uint64_t i = 0; i < n; i++) {
        const float x = limit < g[i] ? limit : g[i];
        const float y = u[i] < -limit ? -limit : limit < u[i] ? limit : u[i];
        const float out_glu = x / (1.0f + expf(alpha * (-x)));
        g[i] = out_glu * (y + 1.0f);
    }
}

void rt_moe_route_softmax_w(const float *logits, uint32_t n_expert, uint32_t k, int32_t *idx,
                            int32_t *sel, float *w)
{
    /* ggml_argsort_top_k of the logits, ggml_get_rows, then ggml_soft_max
     * over the k selected values (max; expf(l - max) summed in double;
     * every value times (float)(1/sum)) */
    rt_argsort_desc(logits, n_expert, idx);
    float max = -INFINITY;
    for (uint32_t j = 0; j < k; j++) {
        sel[j] = idx[j];
        w[j] = logits[idx[j]];
        max = w[j] > max ? w[j] : max;
    }
    double sum = 0.0;
    for (uint32_t j = 0; j < k; j++) {
        w[j] = expf(w[j] - max);
        sum += (double)w[j];
    }
    const float inv = (float)(1.0 / sum);
    for (uint32_t j = 0; j < k; j++) w[j] *= inv;
}

float rt_attn_sink(float sink, float *M, float *S)
{
    /* ggml's flash attention after the last KV block: the sink joins the
     * running max and adds exp(sink - max) to the sum; it has no value */
    float ms = 1.0f, vs = 1.0f;
    if (sink > *M) {
        ms = expf(*M - sink);
        *M = sink;
    } else {
        vs = expf(sink - *M);
    }
    *S = *S * ms + vs;
    return ms;
}

/* ggml_rope_yarn_corr_dim (ggml.c) */
static float corr_dim(int n_dims, int n_ctx_orig, float n_rot, float base)
{
    return n_dims * logf(n_ctx_orig / (n_rot * 2 * (float)M_PI)) / (2 * logf(base));
}

void rt_rope_yarn_corr_dims(int n_dims, int n_ctx_orig, float base, float beta_fast,
                            float beta_slow, float dims[2])
{
    const float start = floorf(corr_dim(n_dims, n_ctx_orig, beta_fast, base));
    const float end = ceilf(corr_dim(n_dims, n_ctx_orig, beta_slow, base));
    dims[0] = start > 0 ? start : 0;
    dims[1] = (float)(n_dims - 1) < end ? (float)(n_dims - 1) : end;
}

void rt_rope_cache_yarn(const struct rt_hparams *hp, uint32_t n_rot,
                        const struct rt_rope_params *p, const float *freq_factors, int32_t pos,
                        float *cache)
{
    /* llama_context's cparams (yarn_ext_factor 1 for a yarn file; the global
     * freq scale decides the attention factor) */
    const float factor = 1.0f / hp->rope_freq_scale;
    float af = factor <= 1.0f ? 1.0f : 0.1f * 1.0f * logf(factor) + 1.0f;
    af *= 1.0f / (1.0f + 0.1f * logf(factor));
    af *= hp->rope_attn_factor != 0.0f ? hp->rope_attn_factor : 1.0f;
    const uint32_t orig = hp->n_ctx_orig ? hp->n_ctx_orig : hp->n_ctx_train;
    float corr[2];
    rt_rope_yarn_corr_dims((int)n_rot, (int)orig, p->base, 32.0f, 1.0f, corr);
    /* ggml_rope_cache_init with rope_yarn, ext_factor 1 */
    const float ext_factor = 1.0f;
    const float theta_scale = powf(p->base, -2.0f / (float)n_rot);
    const float mscale = af * (1.0f + 0.1f * logf(1.0f / p->freq_scale));
    float theta = (float)pos;
    for (uint32_t i0 = 0; i0 < n_rot; i0 += 2) {
        const float ff = freq_factors ? freq_factors[i0 / 2] : 1.0f;
        const float te = theta / ff;
        const float ti = p->freq_scale * te;
        const float den = 0.001f > corr[1] - corr[0] ? 0.001f : corr[1] - corr[0];
        const float y = ((float)(i0 / 2) - corr[0]) / den;
        const float c01 = 1 < (0 > y ? 0 : y) ? 1 : (0 > y ? 0 : y);
        const float ramp_mix = (1 - c01) * ext_factor;
        const float t = ti * (1 - ramp_mix) + te * ramp_mix;
        cache[i0] = cosf(t) * mscale;
        cache[i0 + 1] = sinf(t) * mscale;
        theta *= theta_scale;
    }
}
