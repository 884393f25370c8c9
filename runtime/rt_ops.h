/*
 * runtime/rt_ops.h — the graph's row operations exactly as the runtime's
 * forward pass computes them (rt_forward.c), public so that a second
 * forward pass (calib/, FP32 over whole samples) computes the same model
 * bit for bit: RoPE tables and rotation, RMSNorm, SwiGLU.
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

/* g[i] = silu(g[i]) * u[i] = g[i] / (1 + expf(-g[i])) * u[i]. */
void rt_swiglu(float *g, const float *u, uint64_t n);

#endif /* MW_RT_OPS_H */
