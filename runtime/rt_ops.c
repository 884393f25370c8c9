/*
 * runtime/rt_ops.c — the graph's row operations (rt_ops.h), shared by the
 * runtime's forward pass, its context shift and calib/'s forward pass.
 */
#include "runtime/rt_ops.h"

#include <math.h>

void rt_rope_cache(const struct rt_hparams *hp, const float *freq_factors, int32_t pos,
                   float *cache)
{
    const float theta_scale = powf(hp->rope_base, -2.0f / (float)hp->n_rot);
    float theta = (float)pos;
    for (uint32_t i0 = 0; i0 < hp->n_rot; i0 += 2) {
        const float ff = freq_factors ? freq_factors[i0 / 2] : 1.0f;
        const float t = hp->rope_freq_scale * (theta / ff);
        cache[i0] = cosf(t);
        cache[i0 + 1] = sinf(t);
        theta *= theta_scale;
    }
}

void rt_rope_apply(const struct rt_hparams *hp, const float *cache, float *x)
{
    const uint32_t n_rot = hp->n_rot;
    if (hp->rope_neox) {
        const uint32_t half = n_rot / 2;
        for (uint32_t i0 = 0; i0 < n_rot; i0 += 2) {
            const float c = cache[i0], s = cache[i0 + 1];
            const float x0 = x[i0 / 2], x1 = x[i0 / 2 + half];
            x[i0 / 2] = x0 * c - x1 * s;
            x[i0 / 2 + half] = x0 * s + x1 * c;
        }
    } else {
        for (uint32_t i0 = 0; i0 < n_rot; i0 += 2) {
            const float c = cache[i0], s = cache[i0 + 1];
            const float x0 = x[i0], x1 = x[i0 + 1];
            x[i0] = x0 * c - x1 * s;
            x[i0 + 1] = x0 * s + x1 * c;
        }
    }
}

void rt_rmsnorm(float *out, const float *x, const float *w, uint64_t n, float eps)
{
    double sum = 0.0;
    for (uint64_t i = 0; i < n; i++) sum += (double)(x[i] * x[i]);
    const float mean = (float)(sum / (double)n);
    const float scale = 1.0f / sqrtf(mean + eps);
    for (uint64_t i = 0; i < n; i++) out[i] = (x[i] * scale) * w[i];
}

void rt_swiglu(float *g, const float *u, uint64_t n)
{
    for (uint64_t i = 0; i < n; i++) g[i] = g[i] / (1.0f + expf(-g[i])) * u[i];
}
