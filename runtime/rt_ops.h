/*
 * runtime/rt_ops.h — the graph's row operations exactly as the runtime's
 * forward pass computes them (rt_forward.c, rt_moe.c, rt_attn*.c), public
 * so that a second forward pass (calib/, FP32 over whole samples) computes
 * the same model bit for bit: RoPE tables and rotation, RMSNorm, SwiGLU.
 *
 * Numerics (ggml's CPU ops): RoPE angles theta_i = pos * base^(-2i/n_rot)
 * by repeated f32 multiplication (ggml_rope_cache_init), divided by the
 * optional freq_factors (rope_freqs.weight), times the linear freq_scale;
 * RMSNorm sums squares in double, in index order, scales in f32, then
 * multiplies by the weight; SiLU is x/(1+expf(-x)). Built with
 * -ffp-contract=off: no fused multiply-adds, so every caller gets the same
 * bits. Pure functions: no allocation, no state, reentrant.
 */
#ifndef MW_RT_OPS_H
#define MW_RT_OPS_H

#include <math.h>
#include <stdint.h>

#include "runtime/rt.h"

/* cos/sin table for position pos: cache[2i] = cos(theta_i), cache[2i+1] =
 * sin(theta_i), i < n_rot/2 (n_rot floats). freq_factors: n_rot/2 divisors
 * or NULL. Uses hp->n_rot, rope_base, rope_freq_scale. */
void rt_rope_cache(const struct rt_hparams *hp, const float *freq_factors, int32_t pos,
                   float *cache);
/* Rotate one head vector x (head_dim floats; the first n_rot take part) in
 * place with a table from rt_rope_cache: normal mode pairs (2i, 2i+1), NEOX
 * mode (hp->rope_neox) pairs (i, i + n_rot/2). */
void rt_rope_apply(const struct rt_hparams *hp, const float *cache, float *x);

/* out[i] = (x[i] * s) * w[i], s = 1/sqrtf((float)(Σ x[i]² / n) + eps), the
 * sum of f32 squares in double (n > 0; out may equal x). */
void rt_rmsnorm(float *out, const float *x, const float *w, uint64_t n, float eps);
/* RMSNorm without a weight, in place: rt_rmsnorm's bits with w = 1
 * (Gemma 4's v norm). */
void rt_rmsnorm_nw(float *x, uint64_t n, float eps);
/* NEOX RoPE over the first n_rot elements of x, pairs (i, i + n_rot/2),
 * with a cos/sin table of rt_rope_cache_ex (Gemma 4's q and k). */
void rt_rope_neox_rows(const float *rc, uint32_t n_rot, float *x);

/* g[i] = silu(g[i]) * u[i] = g[i] / (1 + expf(-g[i])) * u[i]. */
void rt_swiglu(float *g, const float *u, uint64_t n);

// --- family ops (qwen3, gemma2, gemma3, phi3) ---

/* RoPE parameters of one layer, as llama.cpp picks them for a context of
 * n_ctx positions (llama_model::get_rope_freq_base / get_rope_freq_scale /
 * get_rope_factors, cparams.yarn_attn_factor):
 *   base:        sliding layers (rt_layer_is_swa) rope_base_swa, else rope_base;
 *   freq_scale:  sliding layers rope_freq_scale_swa (0 read as 1), else
 *                rope_freq_scale;
 *   attn_factor: rope_attn_factor (0 read as 1): cos and sin are multiplied by it;
 *   long_factors: has_rope_long && pad256(n_ctx) > n_ctx_orig (n_ctx_orig 0:
 *                n_ctx_train; llama.cpp pads every context to a multiple of 256):
 *                the caller passes rope_factors_long, else rope_factors_short
 *                (llama/qwen: rope_freqs.weight, or none). */
struct rt_rope_params {
    float base;
    float freq_scale;
    float attn_factor;
    bool long_factors;
};
struct rt_rope_params rt_rope_layer_params(const struct rt_hparams *hp, uint32_t il,
                                           uint32_t n_ctx);

/* The table of rt_rope_cache with explicit parameters (ggml_rope_cache_init
 * with ext_factor 0): theta_i = pos * base^(-2i/n_rot) by repeated f32
 * multiplication, t = freq_scale * (theta_i / ff_i), cache[2i] =
 * cosf(t) * attn_factor, cache[2i+1] = sinf(t) * attn_factor. With
 * attn_factor 1 it gives rt_rope_cache's bits. */
void rt_rope_cache_ex(uint32_t n_rot, const struct rt_rope_params *p, const float *freq_factors,
                      int32_t pos, float *cache);

/* GELU with tanh as ggml's CPU backend computes it (GGML_GELU_FP16 is on in
 * ggml-cpu/vec.h): x <= -10: 0; x >= 10: x; otherwise the f16 table
 * entry: f32(f16(gelu(f32(f16(x))))), gelu(v) = 0.5f*v*(1 + tanhf(
 * sqrt(2/pi)*v*(1 + 0.044715f*v*v))). */
float rt_gelu_tanh(float x);
/* g[i] = gelu_tanh(g[i]) * u[i] (ggml_geglu_split: gate first, then up). */
void rt_geglu(float *g, const float *u, uint64_t n);
/* The FFN gate activation of hp: rt_swiglu or rt_geglu. */
void rt_ffn_act(const struct rt_hparams *hp, float *g, const float *u, uint64_t n);

/* Final logit soft-capping (gemma): x[i] = tanhf(x[i] * (1/cap)) * cap, as
 * ggml_scale, ggml_tanh, ggml_scale compute it. cap <= 0: no-op. */
void rt_softcap(float *x, uint64_t n, float cap);

/* How q.k is scaled, as the family's llama.cpp graph does it:
 *   *q_mul: 0, or the factor every query element is multiplied by (f32,
 *           after RoPE) before attention (gemma: attn_scale, llama.cpp's
 *           f_attention_scale; phi3: 1/sqrtf(head_dim));
 *   *kq_scale: the flash attention's scale (llama/qwen: 1/sqrtf(head_dim);
 *           families that scale the query: 1).
 * A score is then rt_attn_score(q.k, *kq_scale, hp->attn_softcap). */
void rt_attn_scales(const struct rt_hparams *hp, float *q_mul, float *kq_scale);
/* One attention score from a dot product, as ggml's CPU flash attention
 * forms it: without soft-capping s * scale; with cap > 0,
 * cap * tanhf(s * (scale / cap)). */
static inline float rt_attn_score(float s, float scale, float cap)
{
    if (cap > 0.0f) return cap * tanhf(s * (scale / cap));
    return s * scale;
}

/* Sliding window (llama.cpp's LLAMA_SWA_TYPE_STANDARD): in a sliding layer
 * the query at position p sees the cached positions k with p - k < n_swa,
 * i.e. the first visible position is rt_swa_first(hp, il, p) (0 in other
 * layers); causal as always (k <= p). */
uint32_t rt_swa_first(const struct rt_hparams *hp, uint32_t il, uint32_t p);

/* IMROPE for text (qwen35, qwen35moe: hp->rope_sections not all 0): ggml's
 * mrope table with the t, h and w positions all pos and e 0 — pair i (of
 * n_rot/2) belongs to sector i % (sum of the sections); the pairs of the e
 * sector get angle 0 (cos 1, sin 0: not rotated), the others the angle
 * rt_rope_cache gives. Rewrites those pairs of cache in place; a no-op when
 * the sections are all 0. */
void rt_rope_text_sections(const struct rt_hparams *hp, float *cache);

/* Per-head RMSNorm (qwen3, gemma3 q/k norm): rt_rmsnorm over each of the
 * n_head vectors of head_dim floats of x, with the same weight w (head_dim). */
void rt_rmsnorm_heads(float *x, const float *w, uint32_t n_head, uint32_t head_dim, float eps);

// --- mixture of experts (llama.cpp's build_moe_ffn, softmax gating) ---

/* ggml_argsort(x, DESC) as ggml's CPU backend computes it: idx = 0..n-1
 * sorted by std::sort (GCC's libstdc++ introsort: median-of-three
 * partitions down to 16 elements, heap sort past depth 2*floor(log2 n),
 * then insertion sort) with comp(a, b) = x[a] > x[b]. Equal values keep
 * the order that sort leaves them in: ascending index when n <= 16 (pure
 * insertion sort), otherwise what the partitions make of them — the same
 * permutation as llama.cpp's. NaNs (undefined for std::sort) give some
 * permutation, never an access outside idx. */
void rt_argsort_desc(const float *x, uint32_t n, int32_t *idx);

/* One token's routing: probs (n_expert router logits) becomes
 * softmax(probs) in place as ggml_soft_max computes it (max, expf(l - max)
 * summed in double, every value times (float)(1/sum)); sel[0..k) are the
 * first k of rt_argsort_desc(probs) (idx: n_expert scratch), w[j] =
 * probs[sel[j]]; with norm (llama, qwen3moe) w[j] /= max(s, 2^-14) where s
 * is the double sum of the k weights rounded to float (ggml_sum_rows,
 * ggml_clamp, ggml_div). k <= n_expert. */
void rt_moe_route(float *probs, uint32_t n_expert, uint32_t k, bool norm, int32_t *idx,
                  int32_t *sel, float *w);

/* gpt-oss's routing (LLAMA_EXPERT_GATING_FUNC_TYPE_SOFTMAX_WEIGHT, rt_gptoss.c):
 * sel[0..k) the first k of rt_argsort_desc(logits) (the biased router
 * logits; idx: n_expert scratch), w = ggml_soft_max of those k logits (max,
 * expf(l - max) summed in double, times (float)(1/sum)); no normalization. */
void rt_moe_route_softmax_w(const float *logits, uint32_t n_expert, uint32_t k, int32_t *idx,
                            int32_t *sel, float *w);
/* gpt-oss's clamped SwiGLU (ggml_swiglu_oai, alpha 1.702, limit 7):
 * x = min(g, 7), y = clamp(u, -7, 7), g = x / (1 + expf(1.702 * -x)) * (y + 1). */
void rt_swiglu_oai(float *g, const float *u, uint64_t n);
/* An attention sink (gpt-oss's attn_sinks) folded into a finished online
 * softmax of running max *M and sum *S, as ggml's flash attention does:
 * returns the factor the f32 accumulator is multiplied by before it is
 * divided by the new *S. */
float rt_attn_sink(float sink, float *M, float *S);
/* ggml_rope_yarn_corr_dims: the first and last dimension YaRN blends. */
void rt_rope_yarn_corr_dims(int n_dims, int n_ctx_orig, float base, float beta_fast,
                            float beta_slow, float dims[2]);
/* The RoPE table of rt_rope_cache_ex under YaRN (hp->rope_yarn, gpt-oss),
 * as llama.cpp sets it up: ext_factor 1, betas 32 and 1 over n_ctx_orig
 * (n_ctx_train when 0), cparams.yarn_attn_factor = get_mscale(1/freq_scale)
 * / (1 + 0.1 ln(1/freq_scale)) times rope_attn_factor, and ggml's rope_yarn
 * per pair: t = ti (1 - r) + te r with te = theta_i / ff_i, ti =
 * freq_scale te, r = the ramp between the correction dimensions, cos/sin
 * times attn factor * (1 + 0.1 ln(1/freq_scale)). p: the layer's base and
 * freq scale (rt_rope_layer_params). */
void rt_rope_cache_yarn(const struct rt_hparams *hp, uint32_t n_rot,
                        const struct rt_rope_params *p, const float *freq_factors, int32_t pos,
                        float *cache);

/* qwen2moe's shared-expert gate from its logit x: ggml_div(ggml_silu(x), x),
 * i.e. (x / (1 + expf(-x))) / x (sigmoid as llama.cpp computes it; x == 0
 * gives 0.5, where ggml's 0/0 is NaN). */
float rt_moe_shexp_gate(float x);

// --- gated delta net (llama.cpp's build_delta_net_autoregressive, ggml's
// ssm_conv / l2_norm / gated_delta_net CPU ops) ---

/* Causal depthwise conv of one token over n channels with K taps, then SiLU.
 * state: the K-1 previous inputs of each channel, channel-major
 * (state[c*(K-1) + t], t = 0 the oldest); w: the ssm_conv1d tensor, w[c*K + i],
 * tap 0 the oldest. y[c] = silu(sum_{i<K} in_c[i] * w[c*K + i]) where in_c is
 * [state of c | x[c]], summed in float in tap order (ggml_compute_forward_ssm_conv);
 * then the state drops its oldest column and appends x. y may not alias x. */
void rt_ssm_conv_step(float *state, const float *w, const float *x, float *y, uint64_t n,
                      uint32_t K);

/* ggml_l2_norm over each of n_head vectors of d floats: x /= max(sqrt(sum x^2), eps),
 * the sum of squares in double, in index order. */
void rt_l2norm_heads(float *x, uint32_t n_head, uint32_t d, float eps);

/* One token of one value head of the gated delta rule, state M of S x S floats
 * stored M[j*S + i] (j: value index, i: key index), in place:
 *   M *= expf(g);  d_j = (v_j - sum_i M[j][i] k_i) * beta;  M[j][i] += k_i d_j;
 *   out_j = (sum_i M[j][i] q_i) * (1/sqrtf(S)).
 * q and k already L2-normalised; g <= 0 the log-decay; beta in (0,1). Dots summed in
 * float in index order (the scalar reference; kernels may reassociate). */
void rt_delta_net_step(float *M, uint32_t S, const float *q, const float *k, const float *v,
                       float g, float beta, float *out);

/* The decay and the write strength of one value head from its projections:
 * *g = ssm_a * softplus(alpha + dt_bias) (ggml: logf(1 + expf(x)), x itself
 * past 20), *beta = sigmoid(b) = 1/(1+expf(-b)). */
void rt_delta_net_gates(float alpha, float dt_bias, float ssm_a, float b, float *g,
                        float *beta);

/* The gated output norm of one value head: o = rmsnorm(o) * w * silu(z) over S
 * values (rt_rmsnorm, then x * z/(1+expf(-z))). */
void rt_delta_net_out_norm(float *o, const float *w, const float *z, uint32_t S, float eps);

#endif /* MW_RT_OPS_H */
