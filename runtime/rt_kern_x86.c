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

#else
/* ISO C forbids an empty translation unit. */
typedef int rt_kern_x86_unused;
#endif /* RT_HAVE_X86 */
