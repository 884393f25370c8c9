/*
 * runtime/rt_kern_x86.c — x86-64 variants of the kernels and activation
 * quantizers. The bodies live in rt_kern_x86.inc and are compiled twice in
 * this file, each under `#pragma GCC target` (the rest of the binary stays
 * x86-64 baseline; rt_kernels_select only picks a variant the CPU has):
 *
 *   *_avx2  AVX2 + FMA + F16C: the 8-bit dot product is VPMADDUBSW (u8 x s8
 *           pairs into saturating int16) then VPMADDWD (int16 pairs into
 *           int32, by 1 or by the sub-block scale);
 *   *_vnni  the same bodies with AVX-VNNI: VPDPBUSD (u8 x s8, four products
 *           into int32, no intermediate saturation) and VPDPWSSD (the scale
 *           multiply fused with the int32 accumulation).
 *
 * Bit-identity with the scalar references (rt_kernels.h): each block's
 * integer sums are exact (the bounds of every int16 intermediate are noted
 * at the primitives in the .inc; any weight byte pattern and any int8
 * activation, -128 included, gives the reference's integers), and the
 * float combine repeats the reference's operations: block b's value goes to
 * partial b % 4 (lane b % 4 of a __m128 for the 32-element types, the
 * reference's scalar expression for the 256-element ones), products of the
 * float types to partial i % 16 (two __m256 accumulators), with separate
 * multiplies and adds — never FMA (the project builds with
 * -ffp-contract=off, which also holds under the fma target).
 */
#include "runtime/rt_kern_int.h"

#include "quant/quant_grids.h"

#if RT_HAVE_X86
#include <immintrin.h>
#include <math.h>

#define RT_KERN_X86_BODY "runtime/rt_kern_x86.inc"

/* GCC: target pragmas; clang (the fuzz build) has none and takes a function
 * attribute applied to every function of the block instead. */
#if defined(__clang__)
#pragma clang attribute push(__attribute__((target("avx2,fma,f16c,bmi2"))), apply_to = function)
#else
#pragma GCC push_options
#pragma GCC target("avx2,fma,f16c,bmi2")
#endif
#define RT_SFX(name) name##_avx2
#include RT_KERN_X86_BODY
#undef RT_SFX
#if defined(__clang__)
#pragma clang attribute pop
#else
#pragma GCC pop_options
#endif

#if defined(__clang__)
#pragma clang attribute push(__attribute__((target("avx2,fma,f16c,bmi2,avxvnni"))), apply_to = function)
#else
#pragma GCC push_options
#pragma GCC target("avx2,fma,f16c,bmi2,avxvnni")
#endif
#define RT_VNNI 1
#define RT_SFX(name) name##_vnni
#include RT_KERN_X86_BODY
#undef RT_SFX
#undef RT_VNNI
#if defined(__clang__)
#pragma clang attribute pop
#else
#pragma GCC pop_options
#endif

/* The four-row F16 mat-vec of the avx512 table: one zmm per row, lane j
 * the reference's partial j (product i into partial i % 16, multiply then
 * add), the activation converted once per 16 elements for the four rows;
 * the tail and the reduction as dot_h16's: the same bits in half the
 * instructions of the ymm pair. */
__attribute__((target("avx2,fma,f16c,avx512f,avx512bw,avx512vl"))) void
rt_dot4_f16_f16_avx512(uint64_t n, uint64_t n4, float *out, const void *wv, uint64_t stride,
                       const void *av)
{
    const uint8_t *w0 = wv;
    const uint16_t *a = av;
    for (uint64_t i4 = 0; i4 < n4; i4++, out += 4, w0 += 4 * stride) {
        __m512 s[4];
        for (int r = 0; r < 4; r++) s[r] = _mm512_setzero_ps();
        uint64_t i = 0;
        for (; i + 16 <= n; i += 16) {
            const __m512 x = _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(const void *)(a + i)));
            for (int r = 0; r < 4; r++) {
                const uint8_t *wr = w0 + (uint64_t)r * stride + 2 * i;
                s[r] = _mm512_add_ps(
                    s[r], _mm512_mul_ps(_mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(const void *)wr)), x));
            }
        }
        for (int r = 0; r < 4; r++) {
            const uint8_t *wr = w0 + (uint64_t)r * stride;
            float p[16];
            _mm512_storeu_ps(p, s[r]);
            for (uint64_t k = i, j = 0; k < n; k++, j++)
                p[j] += rt__f16(rt__ld16(wr + 2 * k)) * rt__f16(a[k]);
            out[r] = rt__reduce16(p);
        }
    }
}

#else
/* ISO C forbids an empty translation unit. */
typedef int rt_kern_x86_unused;
#endif /* RT_HAVE_X86 */
