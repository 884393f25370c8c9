/*
 * runtime/rt_kernels.h — the runtime's mat-vec kernels (internal to runtime/;
 * used by the forward pass and by tests/check_rt_kernels.c).
 *
 * What it computes: out[r] = dot(W row r, x) for a weight matrix W stored in
 * one of the ggml block types the quantizer emits (F32, F16, BF16, Q8_0,
 * Q4_0, Q4_1, Q5_0, Q5_1, Q2_K, Q3_K, Q4_K, Q5_K, Q6_K, IQ4_NL, IQ4_XS,
 * IQ3_S, IQ3_XXS, IQ2_S, IQ2_XS, IQ2_XXS, IQ1_M, IQ1_S; docs/formats.md §3)
 * and an activation row x that the caller first converts, once per mat-vec,
 * to the weight type's partner format (docs/formats.md §10):
 *
 *   weight type                      activation (act_type)
 *   F32                              F32   (plain floats)
 *   F16                              F16   (x rounded to f16, as ggml does)
 *   BF16                             BF16  (x rounded to bf16, as ggml does)
 *   Q8_0 Q4_0 Q5_0 IQ4_NL            Q8_0  (32 x i8, f16 scale)
 *   Q4_1 Q5_1                        Q8_1  (32 x i8, f16 scale, f16 d*sum)
 *   Q2_K Q3_K Q4_K Q5_K Q6_K IQ4_XS  Q8_K  (256 x i8, f32 scale, 16 i16 sums)
 *   IQ3_S IQ3_XXS IQ2_S IQ2_XS       Q8_K
 *   IQ2_XXS IQ1_M IQ1_S              Q8_K
 *   (IQ4_XS: no NEON variant yet, the scalar kernel in the aarch64 tables)
 *
 * Quantized kernels accumulate integer products per block (exact) and then
 * combine blocks in f32. Every kernel comes in up to three variants per ISA — a
 * portable scalar reference, NEON (aarch64 baseline, the 8-bit dot product
 * emulated with SMULL/SADALP), and NEON + SDOT (vdotq_s32, CPUs with the
 * dot-product extension); on x86-64, AVX2 (+FMA +F16C) and AVX2 + AVX-VNNI
 * (VPDPBUSD / VPDPWSSD; rt_kern_x86.c, every type) — all compiled
 * into one binary. The variant is
 * chosen once at start-up: rt_cpu_detect() then rt_kernels_select(), which
 * returns a const function-pointer table. Nothing checks the CPU inside a
 * loop.
 *
 * Numerics contract: all variants perform the same float operations in the
 * same order (block b's contribution goes to partial sum b % 4, float
 * types' element i to partial sum i % 16, partials are combined in one fixed
 * order), and the integer parts are exact, so for finite inputs every
 * variant returns bit-identical results — the same on x86 and aarch64 (and
 * with GCC or clang). For finite inputs the activation quantizers of all
 * variants produce the bytes of ggml's quantize_row_q8_{0,1,K}_ref (Q8_0 and
 * Q8_1 round half away from zero, as roundf; ggml's own NEON Q8_0/Q8_1 path
 * rounds half to even, so on exact ties llama.cpp-on-ARM can differ from us
 * by one step; Q8_K rounds half to even everywhere, as ggml does). NaN or
 * Inf inputs give deterministic but meaningless rows (rt_kern_act.c) and
 * NaN dot products whose payload may differ between variants.
 *
 * Memory: rows are read in place (mmap'd weights, any byte alignment for
 * weights; activation rows need the alignment of their block struct below).
 * Nothing here allocates, keeps state, or locks: every function is
 * reentrant and thread-safe; callers split rows across threads.
 *
 * Lengths: n (elements per row) must be a multiple of the weight type's
 * block size (32 or 256; 1 for F32/F16/BF16). Kernels assert nothing about
 * their inputs beyond that: the caller (the graph) validates shapes and
 * types of untrusted files before calling.
 */
#ifndef MW_RT_KERNELS_H
#define MW_RT_KERNELS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "gguf/gguf.h"

// --- CPU features ---

struct rt_cpu {
    bool neon;    /* AdvSIMD (always true on aarch64 Linux) */
    bool dotprod; /* SDOT/UDOT (HWCAP_ASIMDDP; Cortex-A55/A76 and later) */
    bool i8mm;    /* SMMLA (HWCAP2_I8MM; Cortex-A510/A710/X2, Neoverse N2 and later) */
    bool avx2;    /* x86-64: AVX2 + FMA + F16C, enabled by the OS (Haswell, Zen 1 and later) */
    bool avxvnni; /* x86-64: AVX-VNNI (VEX VPDPBUSD/VPDPWSSD on ymm; Alder Lake, Zen 4) */
    bool avx512;  /* x86-64: AVX-512 F+BW+VL+VNNI with the zmm state enabled, and AVX-VNNI
                     (Sapphire Rapids, Zen 4 and later): the zmm k-quant gemms */
};

/* Features of the running CPU (aarch64: getauxval(AT_HWCAP / AT_HWCAP2);
 * x86-64: CPUID and XGETBV), capped by the
 * environment variable MW_RT_KERNELS:
 *   "scalar"   -> nothing
 *   "neon"     -> neon only (no dotprod, no i8mm)
 *   "dotprod"  -> neon + dotprod (no i8mm)
 *   "avx2"     -> avx2 only (no avxvnni, no avx512)
 *   "vnni"     -> avx2 + avxvnni (no avx512)
 *   anything else / unset -> as detected.
 * A build with -DMW_FORCE_SCALAR=ON always returns nothing. Reads the
 * environment; call once at start-up. */
struct rt_cpu rt_cpu_detect(void);

// --- activation formats (docs/formats.md §3.3) ---

#define RT_QK8_0 32
#define RT_QK_K 256

struct rt_block_q8_0 { /* 34 bytes, == ggml block_q8_0 */
    uint16_t d;        /* f16 scale */
    int8_t qs[RT_QK8_0];
};
struct rt_block_q8_1 { /* 36 bytes, == ggml block_q8_1 */
    uint16_t d;        /* f16 scale */
    uint16_t s;        /* f16 of d * sum(qs), d the f32 scale before rounding */
    int8_t qs[RT_QK8_0];
};
struct rt_block_q8_k {       /* 292 bytes, == ggml block_q8_K */
    float d;                 /* f32 scale */
    int8_t qs[RT_QK_K];
    int16_t bsums[RT_QK_K / 16]; /* sum of qs[16g .. 16g+15] */
};

/* Converts n floats (a multiple of the format's block size) to an activation
 * row. x and out must not overlap. */
typedef void (*rt_quantize_fn)(const float *x, void *out, uint64_t n);

struct rt_act_format {
    uint32_t type;      /* ggml type id: F32, F16, BF16, Q8_0, Q8_1 or Q8_K */
    uint32_t blck;      /* elements per block (1, 32 or 256) */
    uint32_t type_size; /* bytes per block */
    rt_quantize_fn quantize;
};

// --- kernels ---

/* out[0] = dot(w_row, act_row) over n elements. w_row: n / blck(wtype)
 * weight blocks, any alignment; act_row: n / blck(act_type) activation
 * blocks produced by the act_type quantizer of the same table (any variant:
 * they are bit-identical). */
typedef void (*rt_dot_fn)(uint64_t n, float *out, const void *w_row, const void *act_row);

/* out[r] = dot(row r, act_row) for the 4 * n4 rows w_rows + r * stride, four
 * at a time: each result bit-identical to rt_dot_fn's (same operations per
 * row; the four rows share activation loads). */
typedef void (*rt_dot4_fn)(uint64_t n, uint64_t n4, float *out, const void *w_rows,
                           uint64_t stride, const void *act_row);

/* Batched product (the prompt's GEMM): out[c * ldo + r] = dot(row r, act
 * row c) for r < nr rows (w_rows + r * stride) and c < nc activation rows
 * (act + c * astride bytes). Every result is bit-identical to rt_dot_fn's:
 * the same integer sums and the same float operations per (row, column);
 * only the order in which the pairs are visited (and what is decoded once
 * and kept for several columns) differs. scratch: RT_GEMM_SCRATCH bytes,
 * 64-byte aligned, owned by the caller (one per thread). */
#define RT_GEMM_SCRATCH (64u * 1024u)
#define RT_GEMM_MAX_ROWS 16 /* nr per call */
typedef void (*rt_gemm_fn)(uint64_t n, uint64_t nr, uint64_t nc, float *out, uint64_t ldo,
                           const void *w_rows, uint64_t stride, const void *act,
                           uint64_t astride, void *scratch);

struct rt_kernel {
    uint32_t wtype;    /* ggml type id of the weight rows */
    uint32_t act_type; /* ggml type id of the activation row */
    rt_dot_fn dot;
    rt_dot4_fn dot4;   /* NULL: rt_matvec calls dot row by row */
    rt_gemm_fn gemm;   /* NULL: rt_gemm calls rt_matvec column by column */
};

/* One variant's function-pointer tables. Indexed by ggml type id; rows that
 * are not supported have dot == NULL (kernel) / quantize == NULL (act). */
/* The gated delta net's recurrence over rows of n floats (rt_kern_ssm.c):
 * dot = sum x[i]*y[i] (scalar: in index order, rt_delta_net_step's bits;
 * vector variants: fixed partial sums, FMA), axpy y[i] += x[i]*a, scale
 * y[i] *= a. */
struct rt_ssm_ops {
    const char *name; /* "scalar", "avx2", "neon" */
    float (*dot)(uint64_t n, const float *x, const float *y);
    void (*axpy)(uint64_t n, float *y, const float *x, float a);
    void (*scale)(uint64_t n, float *y, float a);
};

struct rt_kernels {
    const char *name; /* "scalar", "neon", "neon+dotprod", "neon+i8mm", "avx2", "avx2+vnni",
                         "avx512+vnni" */
    struct rt_kernel kernel[GGUF_TYPE_COUNT]; /* by weight type */
    struct rt_act_format act[GGUF_TYPE_COUNT]; /* by activation type */
    const struct rt_ssm_ops *ssm; /* the delta net's row ops */
};

/* The best table for cpu: aarch64: NEON+SDOT+SMMLA if cpu->i8mm (and
 * dotprod), NEON+SDOT if cpu->dotprod, NEON if cpu->neon; x86-64:
 * AVX-512+VNNI if cpu->avx512 (and avxvnni, avx2), AVX2+VNNI if
 * cpu->avxvnni (and avx2), AVX2 if cpu->avx2; else the scalar
 * reference. Variants not compiled into this binary (the other ISA, or
 * MW_FORCE_SCALAR) fall back to scalar. Never NULL; points to static const
 * data (no allocation, no state). cpu == NULL means scalar. Do not select a
 * variant the CPU lacks (SIGILL). */
const struct rt_kernels *rt_kernels_select(const struct rt_cpu *cpu);

/* Every table the running CPU can execute (detection only, MW_RT_KERNELS
 * ignored), scalar first, then in order of capability; at most max of them
 * into v. Returns the count. Tests and benchmarks compare the variants. */
int rt_kernels_variants(const struct rt_kernels **v, int max);

/* Kernel for weight type wtype, or NULL when the table has none. */
const struct rt_kernel *rt_kernel_get(const struct rt_kernels *ks, uint32_t wtype);
/* Activation format of kernel k in table ks (never NULL for a kernel that
 * rt_kernel_get returned). */
const struct rt_act_format *rt_kernel_act(const struct rt_kernels *ks, const struct rt_kernel *k);

/* Bytes of one row of n elements of ggml type t (weights or activations);
 * 0 when t is unknown, n is not a multiple of its block size, or the size
 * overflows uint64_t. */
uint64_t rt_row_bytes(uint32_t t, uint64_t n);

/* Convenience: quantize n floats to kernel k's activation format. out must
 * hold rt_row_bytes(k->act_type, n) bytes, aligned for the block struct
 * (malloc alignment is enough). */
void rt_quantize_act(const struct rt_kernels *ks, const struct rt_kernel *k, const float *x,
                     void *out, uint64_t n);

/* out[r] = dot(W row r, act) for r in [0, rows). W: (rows, cols) in k->wtype,
 * row-major, rows packed back to back (row stride rt_row_bytes(k->wtype,
 * cols)); act: one row of cols elements in k->act_type; out: rows floats.
 * cols must be a multiple of both block sizes. No allocation, reentrant:
 * threads call it on disjoint row ranges (pass W advanced by r0 rows and
 * out + r0). */
void rt_matvec(const struct rt_kernel *k, const void *W, uint64_t rows, uint64_t cols,
               const void *act, float *out);

/* out[c * ldo + r] = dot(W row r, act row c) for r < rows, c < ncols: the
 * activation rows are astride bytes apart. Results bit-identical to
 * rt_matvec's column by column, whatever the kernel; one column (decoding)
 * runs rt_matvec itself. scratch as for
 * rt_gemm_fn (RT_GEMM_SCRATCH bytes, 64-aligned). No allocation; threads
 * call it on disjoint row ranges. */
void rt_gemm(const struct rt_kernel *k, const void *W, uint64_t rows, uint64_t cols,
             const void *act, uint64_t astride, uint64_t ncols, float *out, uint64_t ldo,
             void *scratch);

#endif /* MW_RT_KERNELS_H */
