/*
 * runtime/rt_kern_ssm.c — the gated delta net's row ops over S floats
 * (rt_kernels.h struct rt_ssm_ops): dot, axpy (y += a * x) and scale
 * (y *= a), as ggml's ggml_vec_dot_f32 / ggml_vec_mad_f32 /
 * ggml_vec_scale_f32 do them inside its gated_delta_net op.
 *
 *   scalar: the sum in index order, y[i] + x[i] * a unfused — exactly
 *           rt_delta_net_step's bits (rt_ops.c, the calib forward's op);
 *   AVX2:   4 accumulators of 8 lanes with FMA over blocks of 32, 8 lanes
 *           then the scalar tail, reduced pairwise (ggml's GGML_F32_STEP 32);
 *           axpy with FMA;
 *   NEON:   4 accumulators of 4 lanes with FMLA over blocks of 16, then 4,
 *           then the tail; axpy with FMLA.
 * The vector sums reassociate: |dot - exact| <= ~(n/4) 2^-24 sum|x y|,
 * tested against the scalar reference (check_rt_kernels). Every variant
 * is deterministic, so results stay the same for any thread count.
 */
#include "runtime/rt_kern_int.h"

#if RT_HAVE_NEON
#include <arm_neon.h>
#endif
#if RT_HAVE_X86
#include <immintrin.h>
#endif

// --- scalar reference ---

static float dot_ref(uint64_t n, const float *x, const float *y)
{
    float s = 0.0f;
    for (uint64_t i = 0; i < n; i++) s += x[i] * y[i];
    return s;
}

static void axpy_ref(uint64_t n, float *y, const float *x, float a)
{
    for (uint64_t i = 0; i < n; i++) y[i] += x[i] * a;
}

static void scale_ref(uint64_t n, float *y, float a)
{
    for (uint64_t i = 0; i < n; i++) y[i] *= a;
}

const struct rt_ssm_ops rt_ssm_ops_ref = {"scalar", dot_ref, axpy_ref, scale_ref};

// --- AVX2 + FMA ---

#if RT_HAVE_X86
__attribute__((target("avx2,fma"))) static float dot_avx2(uint64_t n, const float *x,
                                                          const float *y)
{
    __m256 a0 = _mm256_setzero_ps(), a1 = _mm256_setzero_ps();
    __m256 a2 = _mm256_setzero_ps(), a3 = _mm256_setzero_ps();
    uint64_t i = 0;
    for (; i + 32 <= n; i += 32) {
        a0 = _mm256_fmadd_ps(_mm256_loadu_ps(x + i), _mm256_loadu_ps(y + i), a0);
        a1 = _mm256_fmadd_ps(_mm256_loadu_ps(x + i + 8), _mm256_loadu_ps(y + i + 8), a1);
        a2 = _mm256_fmadd_ps(_mm256_loadu_ps(x + i + 16), _mm256_loadu_ps(y + i + 16), a2);
        a3 = _mm256_fmadd_ps(_mm256_loadu_ps(x + i + 24), _mm256_loadu_ps(y + i + 24), a3);
    }
    for (; i + 8 <= n; i += 8)
        a0 = _mm256_fmadd_ps(_mm256_loadu_ps(x + i), _mm256_loadu_ps(y + i), a0);
    const __m256 s8 = _mm256_add_ps(_mm256_add_ps(a0, a1), _mm256_add_ps(a2, a3));
    __m128 s4 = _mm_add_ps(_mm256_castps256_ps128(s8), _mm256_extractf128_ps(s8, 1));
    s4 = _mm_add_ps(s4, _mm_movehl_ps(s4, s4));
    s4 = _mm_add_ss(s4, _mm_movehdup_ps(s4));
    float s = _mm_cvtss_f32(s4);
    for (; i < n; i++) s += x[i] * y[i];
    return s;
}

__attribute__((target("avx2,fma"))) static void axpy_avx2(uint64_t n, float *y, const float *x,
                                                         float a)
{
    const __m256 va = _mm256_set1_ps(a);
    uint64_t i = 0;
    for (; i + 8 <= n; i += 8)
        _mm256_storeu_ps(y + i, _mm256_fmadd_ps(_mm256_loadu_ps(x + i), va, _mm256_loadu_ps(y + i)));
    for (; i < n; i++) y[i] += x[i] * a;
}

__attribute__((target("avx2,fma"))) static void scale_avx2(uint64_t n, float *y, float a)
{
    const __m256 va = _mm256_set1_ps(a);
    uint64_t i = 0;
    for (; i + 8 <= n; i += 8) _mm256_storeu_ps(y + i, _mm256_mul_ps(_mm256_loadu_ps(y + i), va));
    for (; i < n; i++) y[i] *= a;
}

const struct rt_ssm_ops rt_ssm_ops_avx2 = {"avx2", dot_avx2, axpy_avx2, scale_avx2};
#endif

// --- NEON ---

#if RT_HAVE_NEON
static float dot_neon(uint64_t n, const float *x, const float *y)
{
    float32x4_t a0 = vdupq_n_f32(0), a1 = vdupq_n_f32(0), a2 = vdupq_n_f32(0),
                a3 = vdupq_n_f32(0);
    uint64_t i = 0;
    for (; i + 16 <= n; i += 16) {
        a0 = vfmaq_f32(a0, vld1q_f32(x + i), vld1q_f32(y + i));
        a1 = vfmaq_f32(a1, vld1q_f32(x + i + 4), vld1q_f32(y + i + 4));
        a2 = vfmaq_f32(a2, vld1q_f32(x + i + 8), vld1q_f32(y + i + 8));
        a3 = vfmaq_f32(a3, vld1q_f32(x + i + 12), vld1q_f32(y + i + 12));
    }
    for (; i + 4 <= n; i += 4) a0 = vfmaq_f32(a0, vld1q_f32(x + i), vld1q_f32(y + i));
    float s = vaddvq_f32(vaddq_f32(vaddq_f32(a0, a1), vaddq_f32(a2, a3)));
    for (; i < n; i++) s += x[i] * y[i];
    return s;
}

static void axpy_neon(uint64_t n, float *y, const float *x, float a)
{
    uint64_t i = 0;
    for (; i + 4 <= n; i += 4) vst1q_f32(y + i, vfmaq_n_f32(vld1q_f32(y + i), vld1q_f32(x + i), a));
    for (; i < n; i++) y[i] += x[i] * a;
}

static void scale_neon(uint64_t n, float *y, float a)
{
    uint64_t i = 0;
    for (; i + 4 <= n; i += 4) vst1q_f32(y + i, vmulq_n_f32(vld1q_f32(y + i), a));
    for (; i < n; i++) y[i] *= a;
}

const struct rt_ssm_ops rt_ssm_ops_neon = {"neon", dot_neon, axpy_neon, scale_neon};
#endif
