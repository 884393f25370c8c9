/*
 * runtime/rt_kern_ssm.c — the gated delta net's row ops over S floats
 * (rt_kernels.h struct rt_ssm_ops): dot, axpy (y += a * x) and scale
 * (y *= a), as ggml's ggml_vec_dot_f32 / ggml_vec_mad_f32 /
 * ggml_vec_scale_f32 do them inside its gated_delta_net op.
 *
 *   scalar: the sum in index order, y[i] + x[i] * a unfused — exactly
 *           rt_delta_net_step's bits (rt_ops.c, the calib forward's op);
 *   AVX2:   the structure of llama.cpp's AVX-512 build: blocks of 64 into
 *           four 16-lane FMA accumulators (two ymm each), reduced as ggml
 *           reduces them, the rest one by one; axpy with FMA over blocks of
 *           64, the rest unfused;
 *   NEON:   llama.cpp's NEON structure: blocks of 16 into four 4-lane FMLA
 *           accumulators, the rest one by one; axpy the same way.
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

/* ggml_vec_dot_f32 / ggml_vec_mad_f32 as llama.cpp's x86 AVX-512 build runs
 * them (GGML_F32_STEP 64: four 16-lane accumulators, two ymm each here),
 * the elements past the last whole block summed one by one: at S = 32 that
 * is every element, as in llama.cpp. */
#if RT_HAVE_X86
__attribute__((target("avx2,fma"))) static float dot_avx2(uint64_t n, const float *x,
                                                          const float *y)
{
    __m256 lo[4], hi[4];
    for (int j = 0; j < 4; j++) lo[j] = hi[j] = _mm256_setzero_ps();
    uint64_t i = 0;
    for (; i + 64 <= n; i += 64)
        for (int j = 0; j < 4; j++) {
            const float *xj = x + i + 16 * j, *yj = y + i + 16 * j;
            lo[j] = _mm256_fmadd_ps(_mm256_loadu_ps(xj), _mm256_loadu_ps(yj), lo[j]);
            hi[j] = _mm256_fmadd_ps(_mm256_loadu_ps(xj + 8), _mm256_loadu_ps(yj + 8), hi[j]);
        }
    float s = 0.0f;
    if (i > 0) { /* GGML_F32x16_REDUCE: x0 += x2, x1 += x3, x0 += x1, then 16 lanes */
        for (int j = 0; j < 2; j++) {
            lo[j] = _mm256_add_ps(lo[j], lo[j + 2]);
            hi[j] = _mm256_add_ps(hi[j], hi[j + 2]);
        }
        const __m256 s8 = _mm256_add_ps(_mm256_add_ps(lo[0], lo[1]), _mm256_add_ps(hi[0], hi[1]));
        __m128 s4 = _mm_add_ps(_mm256_castps256_ps128(s8), _mm256_extractf128_ps(s8, 1));
        s4 = _mm_add_ps(s4, _mm_movehl_ps(s4, s4));
        s4 = _mm_add_ss(s4, _mm_movehdup_ps(s4));
        s = _mm_cvtss_f32(s4);
    }
    for (; i < n; i++) s += x[i] * y[i];
    return s;
}

__attribute__((target("avx2,fma"))) static void axpy_avx2(uint64_t n, float *y, const float *x,
                                                         float a)
{
    const __m256 va = _mm256_set1_ps(a);
    uint64_t i = 0;
    for (; i + 64 <= n; i += 64)
        for (int j = 0; j < 64; j += 8)
            _mm256_storeu_ps(y + i + j, _mm256_fmadd_ps(_mm256_loadu_ps(x + i + j), va,
                                                        _mm256_loadu_ps(y + i + j)));
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

/* As llama.cpp's NEON build (GGML_F32_STEP 16: four 4-lane accumulators,
 * reduced x0 += x2, x1 += x3, x0 += x1; the rest one by one). */
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
    float s = vaddvq_f32(vaddq_f32(vaddq_f32(a0, a2), vaddq_f32(a1, a3)));
    for (; i < n; i++) s += x[i] * y[i];
    return s;
}

static void axpy_neon(uint64_t n, float *y, const float *x, float a)
{
    uint64_t i = 0;
    for (; i + 16 <= n; i += 16)
        for (int j = 0; j < 16; j += 4)
            vst1q_f32(y + i + j, vfmaq_n_f32(vld1q_f32(y + i + j), vld1q_f32(x + i + j), a));
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
