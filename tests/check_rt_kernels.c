/*
 * tests/check_rt_kernels.c — runtime/ kernels: the dispatch tables, every
 * SIMD kernel and activation quantizer against its scalar reference
 * (bit-identical results required; rt_kernels.h explains why they must be),
 * the scalar kernels against a float dot of quant/'s dequantized weights
 * (block decoding agrees with quant/), an allocation-free rt_matvec, and the
 * gated delta net's f32 row ops (exact for the scalar table, within a
 * reassociation bound for the AVX2 / NEON ones).
 *
 * Every variant the CPU runs is compared: on x86-64 the AVX2 and AVX-VNNI
 * tables (rt_kern_x86.c) where the CPU has them; the NEON comparisons run in
 * the aarch64 cross build under qemu, twice: -cpu cortex-a53 (no dot
 * product: baseline NEON) and -cpu max (NEON + SDOT). MW_RT_EXPECT names the
 * table the test must find on that CPU, so a qemu that silently lacks a
 * feature fails instead of skipping.
 *
 * Lengths follow style.md §2.7 in blocks (elements for F32/F16/BF16):
 * 0, 1, 2, 3, 4, 5, 7, 8, 15, 16, 17, 31, 32, 33, 255 and 4096 + 1.
 */
#define _POSIX_C_SOURCE 200809L
#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "quant/quant.h"
#include "quant/quant_int.h"
#include "runtime/rt_kern_int.h"

#include "check_common.h"

// --- allocation counter (linked with -Wl,--wrap=malloc,... when available) ---

static volatile unsigned long n_allocs; /* volatile: GCC assumes malloc/free touch no globals */
#ifdef RT_TEST_WRAP_ALLOC
void *__real_malloc(size_t n);
void *__real_calloc(size_t n, size_t m);
void *__real_realloc(void *p, size_t n);
void __real_free(void *p);
void *__wrap_malloc(size_t n);
void *__wrap_calloc(size_t n, size_t m);
void *__wrap_realloc(void *p, size_t n);
void __wrap_free(void *p);
void *__wrap_malloc(size_t n)
{
    n_allocs++;
    return __real_malloc(n);
}
void *__wrap_calloc(size_t n, size_t m)
{
    n_allocs++;
    return __real_calloc(n, m);
}
void *__wrap_realloc(void *p, size_t n)
{
    n_allocs++;
    return __real_realloc(p, n);
}
void __wrap_free(void *p)
{
    if (p) n_allocs++;
    __real_free(p);
}
#endif

// --- deterministic random numbers ---

struct rng {
    uint64_t s;
};
static uint64_t rnd(struct rng *r)
{
    uint64_t z = (r->s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}
static float rnd_unit(struct rng *r) { return (float)(rnd(r) >> 40) / 16777216.0f; } /* [0,1) */
static float rnd_gauss(struct rng *r)
{
    return (rnd_unit(r) + rnd_unit(r) + rnd_unit(r) + rnd_unit(r) - 2.0f) * 1.7320508f;
}
/* magnitudes over 2^-12 .. 2^2, both signs */
static float rnd_scale(struct rng *r)
{
    const float m = (0.5f + rnd_unit(r)) * ldexpf(1.0f, (int)(rnd(r) % 15) - 12);
    return (rnd(r) & 1) ? -m : m;
}

// --- the types under test ---

static const uint32_t wtypes[] = {
    GGUF_TYPE_F32,  GGUF_TYPE_F16,  GGUF_TYPE_BF16, GGUF_TYPE_Q8_0, GGUF_TYPE_Q4_0,
    GGUF_TYPE_Q4_1, GGUF_TYPE_Q5_0, GGUF_TYPE_Q5_1, GGUF_TYPE_IQ4_NL, GGUF_TYPE_IQ4_XS, GGUF_TYPE_Q2_K,
    GGUF_TYPE_Q3_K, GGUF_TYPE_Q4_K, GGUF_TYPE_Q5_K, GGUF_TYPE_Q6_K,
    GGUF_TYPE_IQ1_S, GGUF_TYPE_IQ1_M,
    GGUF_TYPE_IQ3_XXS, GGUF_TYPE_IQ3_S,
    GGUF_TYPE_IQ2_XXS, GGUF_TYPE_IQ2_XS, GGUF_TYPE_IQ2_S, GGUF_TYPE_MXFP4,
};
#define N_WTYPES (int)(sizeof wtypes / sizeof wtypes[0])

/* Byte offsets of the f16 scale fields in a block (-1 ends). */
static const int *f16_fields(uint32_t t)
{
    static const int o0[] = {0, -1}, o02[] = {0, 2, -1}, q2k[] = {80, 82, -1}, q3k[] = {108, -1},
                     q6k[] = {208, -1}, none[] = {-1};
    switch (t) { /* test-only description of the layouts (docs/formats.md §3) */
    case GGUF_TYPE_Q8_0: case GGUF_TYPE_Q4_0: case GGUF_TYPE_Q5_0: case GGUF_TYPE_IQ4_NL:
    case GGUF_TYPE_IQ4_XS: return o0;
    case GGUF_TYPE_IQ1_S: return o0; /* IQ1_M: its f16 is nibble-packed (make_weights) */
    case GGUF_TYPE_IQ3_XXS: case GGUF_TYPE_IQ3_S: return o0;
    case GGUF_TYPE_IQ2_XXS: case GGUF_TYPE_IQ2_XS: case GGUF_TYPE_IQ2_S: return o0;
    case GGUF_TYPE_Q4_1: case GGUF_TYPE_Q5_1: case GGUF_TYPE_Q4_K: case GGUF_TYPE_Q5_K: return o02;
    case GGUF_TYPE_Q2_K: return q2k;
    case GGUF_TYPE_Q3_K: return q3k;
    case GGUF_TYPE_Q6_K: return q6k;
    default: return none;
    }
}

static bool is_float_type(uint32_t t)
{
    return t == GGUF_TYPE_F32 || t == GGUF_TYPE_F16 || t == GGUF_TYPE_BF16;
}

/* The tables this CPU can run: scalar first. */
static int variants(const struct rt_kernels *v[6]) { return rt_kernels_variants(v, 6); }

static const uint64_t lens_blocks[] = {0, 1, 2, 3, 4, 5, 7, 8, 15, 16, 17, 31, 32, 33, 255, 4097};
#define N_LENS (int)(sizeof lens_blocks / sizeof lens_blocks[0])

// --- weight rows ---

enum wpat { W_RANDOM, W_ZERO_SCALES, W_ONES, W_ZEROS, W_ALT, W_NPAT };
static const char *wpat_name[] = {"random", "zero-scales", "0xff", "0x00", "0x80/0x7f"};

static void put_f16(uint8_t *p, float v) { mw_put_le16(p, mw_f32_to_f16(v)); }

/* n elements of type t in pattern pat (scales always finite). */
static void make_weights(uint32_t t, uint64_t n, enum wpat pat, struct rng *r, uint8_t *w)
{
    const struct gguf_type_info *ti = gguf_type_get(t);
    const uint64_t nb = n / ti->blck, bs = ti->type_size;
    if (is_float_type(t)) {
        for (uint64_t i = 0; i < n; i++) {
            float v = rnd_gauss(r) * ldexpf(1.0f, (int)(rnd(r) % 9) - 6);
            if (pat == W_ZEROS || pat == W_ZERO_SCALES) v = 0.0f;
            if (pat == W_ONES) v = (i & 1) ? -60000.0f : 60000.0f;
            if (pat == W_ALT) v = (i & 1) ? -1.0f : ldexpf(1.0f, -24);
            if (t == GGUF_TYPE_F32) memcpy(w + 4 * i, &v, 4);
            if (t == GGUF_TYPE_F16) put_f16(w + 2 * i, v);
            if (t == GGUF_TYPE_BF16) mw_put_le16(w + 2 * i, mw_f32_to_bf16(v));
        }
        return;
    }
    for (uint64_t b = 0; b < nb; b++) {
        uint8_t *blk = w + b * bs;
        for (uint64_t j = 0; j < bs; j++) {
            uint8_t v = (uint8_t)rnd(r);
            if (pat == W_ONES) v = 0xFF;
            if (pat == W_ZEROS) v = 0x00;
            if (pat == W_ALT) v = (j & 1) ? 0x7F : 0x80;
            blk[j] = v;
        }
        for (const int *o = f16_fields(t); *o >= 0; o++) {
            float s = rnd_scale(r);
            if (pat == W_ZERO_SCALES) s = 0.0f;
            if (pat == W_ONES || pat == W_ZEROS) s = (*o == 0 || *o >= 80) ? 1.0f : 0.5f;
            if (pat == W_ALT) s = -1.0f;
            put_f16(blk + *o, s);
        }
        if (t == GGUF_TYPE_IQ1_M) { /* f16 scale: top nibbles of the u16s at 48..55 */
            float s = pat == W_ZERO_SCALES ? 0.0f : pat == W_ALT ? -1.0f : rnd_scale(r);
            if (pat == W_ONES || pat == W_ZEROS) s = 1.0f;
            const unsigned h = mw_f32_to_f16(s);
            for (int k = 0; k < 4; k++)
                mw_put_le16(blk + 48 + 2 * k, (uint16_t)((mw_le16(blk + 48 + 2 * k) & 0x0FFF) |
                                                         (((h >> (4 * k)) & 0xF) << 12)));
        }
        if (t == GGUF_TYPE_MXFP4) /* E8M0 exponent: finite scales 2^-128 .. 2^-8 */
            blk[0] = pat == W_ZERO_SCALES ? 0 : pat == W_ONES ? 120 : (uint8_t)(60 + rnd(r) % 61);
        if (pat == W_ZERO_SCALES) { /* also the integer sub-block scales */
            if (t == GGUF_TYPE_Q2_K) memset(blk, 0, 16);
            if (t == GGUF_TYPE_Q4_K || t == GGUF_TYPE_Q5_K) memset(blk + 4, 0, 12);
            if (t == GGUF_TYPE_Q6_K) memset(blk + 192, 0, 16);
            if (t == GGUF_TYPE_Q3_K) { /* six-bit 32 = scale 0 */
                memset(blk + 96, 0, 8);
                memset(blk + 104, 0xAA, 4);
            }
        }
    }
}

// --- activation rows ---

enum apat { A_RANDOM, A_P127, A_M127, A_M128, A_RANDBYTES, A_NPAT };
static const char *apat_name[] = {"random", "+127", "-127", "-128", "random-bytes"};

/* The activation row for kernel k: quantized by the scalar reference from
 * random floats, or built directly (extreme integer values). */
static void make_act(const struct rt_kernels *ks, const struct rt_kernel *k, uint64_t n,
                     enum apat pat, struct rng *r, float *xf, void *act)
{
    for (uint64_t i = 0; i < n; i++) xf[i] = rnd_gauss(r) * ldexpf(1.0f, (int)(rnd(r) % 5) - 2);
    if (pat == A_RANDOM || is_float_type(k->act_type)) {
        if (pat == A_P127 || pat == A_M127)
            for (uint64_t i = 0; i < n; i++) xf[i] = pat == A_P127 ? 3.0e4f : -3.0e4f;
        rt_quantize_act(ks, k, xf, act, n);
        return;
    }
    const int8_t fixed = pat == A_P127 ? 127 : pat == A_M127 ? -127 : -128;
    if (k->act_type == GGUF_TYPE_Q8_K) {
        struct rt_block_q8_k *y = act;
        for (uint64_t b = 0; b < n / 256; b++) {
            y[b].d = pat == A_RANDBYTES ? rnd_scale(r) : 0.25f;
            for (int j = 0; j < 256; j++) y[b].qs[j] = pat == A_RANDBYTES ? (int8_t)rnd(r) : fixed;
            for (int g = 0; g < 16; g++) {
                int s = 0;
                for (int j = 0; j < 16; j++) s += y[b].qs[16 * g + j];
                y[b].bsums[g] = (int16_t)s;
            }
        }
    } else if (k->act_type == GGUF_TYPE_Q8_0) {
        struct rt_block_q8_0 *y = act;
        for (uint64_t b = 0; b < n / 32; b++) {
            y[b].d = mw_f32_to_f16(pat == A_RANDBYTES ? rnd_scale(r) : 0.25f);
            for (int j = 0; j < 32; j++) y[b].qs[j] = pat == A_RANDBYTES ? (int8_t)rnd(r) : fixed;
        }
    } else {
        struct rt_block_q8_1 *y = act;
        for (uint64_t b = 0; b < n / 32; b++) {
            const float d = pat == A_RANDBYTES ? rnd_scale(r) : 0.25f;
            int s = 0;
            y[b].d = mw_f32_to_f16(d);
            for (int j = 0; j < 32; j++) {
                y[b].qs[j] = pat == A_RANDBYTES ? (int8_t)rnd(r) : fixed;
                s += y[b].qs[j];
            }
            y[b].s = mw_f32_to_f16(d * (float)s);
        }
    }
}

static uint32_t fbits(float f)
{
    uint32_t u;
    memcpy(&u, &f, 4);
    return u;
}

// --- tests ---

START_TEST(test_cpu_and_tables)
{
    const struct rt_cpu hw = rt_cpu_detect();
    const struct rt_kernels *best = rt_kernels_select(&hw);
    printf("rt_kernels: cpu neon=%d dotprod=%d i8mm=%d avx2=%d avxvnni=%d avx512=%d -> table \"%s\"\n",
           hw.neon, hw.dotprod, hw.i8mm, hw.avx2, hw.avxvnni, hw.avx512, best->name);
    const char *expect = getenv("MW_RT_EXPECT");
    if (expect) ck_assert_str_eq(best->name, expect);
#if !RT_HAVE_NEON
    ck_assert(!hw.neon && !hw.dotprod && !hw.i8mm);
#endif
#if !RT_HAVE_X86
    ck_assert(!hw.avx2 && !hw.avxvnni && !hw.avx512);
#endif
    ck_assert(!hw.avx512 || hw.avxvnni); /* the avx512 table runs the vnni mat-vecs */
#if !RT_HAVE_NEON && !RT_HAVE_X86
    ck_assert_str_eq(best->name, "scalar");
#endif
    ck_assert_str_eq(rt_kernels_select(NULL)->name, "scalar");
    const struct rt_cpu none = {0};
    ck_assert_str_eq(rt_kernels_select(&none)->name, "scalar");

    /* the variants list: scalar first, the selected table last */
    const struct rt_kernels *v[6];
    const int nv = variants(v);
    ck_assert_int_ge(nv, 1);
    ck_assert_str_eq(v[0]->name, "scalar");
    ck_assert_ptr_eq(v[nv - 1], best);

    /* MW_RT_KERNELS caps what detection reports */
    ck_assert_int_eq(setenv("MW_RT_KERNELS", "scalar", 1), 0);
    struct rt_cpu c = rt_cpu_detect();
    ck_assert(!c.neon && !c.dotprod && !c.i8mm && !c.avx2 && !c.avxvnni && !c.avx512);
    ck_assert_int_eq(setenv("MW_RT_KERNELS", "neon", 1), 0);
    c = rt_cpu_detect();
    ck_assert(c.neon == hw.neon && !c.dotprod && !c.i8mm);
    ck_assert_int_eq(setenv("MW_RT_KERNELS", "dotprod", 1), 0);
    c = rt_cpu_detect();
    ck_assert(c.dotprod == hw.dotprod && !c.i8mm);
    ck_assert_int_eq(setenv("MW_RT_KERNELS", "avx2", 1), 0);
    c = rt_cpu_detect();
    ck_assert(c.avx2 == hw.avx2 && !c.avxvnni && !c.avx512);
    ck_assert_int_eq(setenv("MW_RT_KERNELS", "vnni", 1), 0);
    c = rt_cpu_detect();
    ck_assert(c.avx2 == hw.avx2 && c.avxvnni == hw.avxvnni && !c.avx512);
    if (hw.avxvnni) ck_assert_str_eq(rt_kernels_select(&c)->name, "avx2+vnni");
    ck_assert_int_eq(unsetenv("MW_RT_KERNELS"), 0);

    ck_assert_uint_eq(rt_row_bytes(GGUF_TYPE_Q4_K, 4096), 16 * 144);
    ck_assert_uint_eq(rt_row_bytes(GGUF_TYPE_Q4_0, 64), 36);
    ck_assert_uint_eq(rt_row_bytes(GGUF_TYPE_Q8_K, 512), 584);
    ck_assert_uint_eq(rt_row_bytes(GGUF_TYPE_Q4_0, 48), 0);
    ck_assert_uint_eq(rt_row_bytes(4, 32), 0);
    ck_assert_uint_eq(rt_row_bytes(GGUF_TYPE_COUNT, 32), 0);

    /* the kernels' inline f16 -> f32 equals core's on every pattern */
    for (uint32_t h = 0; h < 65536; h++) {
        const float a = rt__f16((uint16_t)h), b = mw_f16_to_f32((uint16_t)h);
        if (isnan(b))
            ck_assert(isnan(a));
        else
            ck_assert_msg(fbits(a) == fbits(b), "f16 %04x: %08x != %08x", h, fbits(a), fbits(b));
    }

    /* the local IQ4_NL levels are quant's */
    ck_assert_mem_eq(rt__iq4nl_values, quant__iq4_values, 16);
}
END_TEST

/* Every type id, every table: a kernel exactly for the 15 emitted types,
 * with a valid activation format of matching block size. */
START_TEST(test_table_rows)
{
    const uint32_t t = (uint32_t)_i;
    bool emitted = false;
    for (int i = 0; i < N_WTYPES; i++) emitted |= wtypes[i] == t;
    const struct rt_kernels *v[6];
    const int nv = variants(v);
    for (int i = 0; i < nv; i++) {
        const struct rt_kernel *k = rt_kernel_get(v[i], t);
        if (!emitted) {
            ck_assert_ptr_null(k);
            continue;
        }
        ck_assert_ptr_nonnull(k);
        ck_assert_uint_eq(k->wtype, t);
        ck_assert_ptr_nonnull(k->dot);
        const struct rt_act_format *af = rt_kernel_act(v[i], k);
        ck_assert_uint_eq(af->type, k->act_type);
        ck_assert_ptr_nonnull(af->quantize);
        const struct gguf_type_info *ai = gguf_type_get(k->act_type), *wi = gguf_type_get(t);
        ck_assert_uint_eq(af->blck, ai->blck);
        ck_assert_uint_eq(af->type_size, ai->type_size);
        ck_assert(af->blck == wi->blck || (af->blck == 1 && is_float_type(t)));
        /* weight types without a kernel of their own share the float act */
        if (is_float_type(t)) ck_assert_uint_eq(k->act_type, t);
#if RT_HAVE_X86
        /* the x86 tables have a kernel of their own for every type (so
         * test_neon_vs_ref compares each against the reference) */
        if (i > 0) ck_assert_msg(k->dot != rt_kernel_get(v[0], t)->dot, "%s: %s runs the scalar kernel",
                                 v[i]->name, gguf_type_get(t)->name);
#endif
    }
    ck_assert_ptr_null(rt_kernel_get(v[0], UINT32_MAX));
}
END_TEST

/* NEON / SDOT and AVX2 / AVX-VNNI kernels == scalar reference, bit for
 * bit, at every length, on random and extreme weights and activations. */
START_TEST(test_neon_vs_ref)
{
    const uint32_t t = wtypes[_i];
    const struct rt_kernels *v[6];
    const int nv = variants(v);
    if (nv == 1) printf("%s: no NEON on this CPU, scalar only\n", gguf_type_get(t)->name);
    const struct gguf_type_info *ti = gguf_type_get(t);
    const uint64_t max_n = (lens_blocks[N_LENS - 1]) * (is_float_type(t) ? 1 : ti->blck);
    uint8_t *w = malloc(rt_row_bytes(t, max_n) + 1);
    float *xf = malloc(max_n * sizeof *xf);
    void *act = malloc(max_n * 4 + 64);
    struct rng r = {0x1234 + t};
    uint64_t n_cmp = 0;
    for (int li = 0; li < N_LENS; li++) {
        const uint64_t n = lens_blocks[li] * (is_float_type(t) ? 1 : ti->blck);
        const bool big = li == N_LENS - 1;
        for (int wp = 0; wp < W_NPAT; wp++) {
            for (int ap = 0; ap < A_NPAT; ap++) {
                if (big && (wp != W_RANDOM || ap > A_P127)) continue;
                /* odd weight address: kernels must not assume alignment */
                uint8_t *wr = w + (t == GGUF_TYPE_F32 ? 0 : 1);
                make_weights(t, n, (enum wpat)wp, &r, wr);
                make_act(v[0], rt_kernel_get(v[0], t), n, (enum apat)ap, &r, xf, act);
                float ref = -1.0f;
                rt_kernel_get(v[0], t)->dot(n, &ref, wr, act);
                if (n == 0) ck_assert_uint_eq(fbits(ref), 0);
                ck_assert_msg(isfinite(ref), "%s n=%llu %s/%s: non-finite %g", ti->name,
                              (unsigned long long)n, wpat_name[wp], apat_name[ap], ref);
                for (int vi = 1; vi < nv; vi++) {
                    float got = -1.0f;
                    rt_kernel_get(v[vi], t)->dot(n, &got, wr, act);
                    ck_assert_msg(fbits(got) == fbits(ref),
                                  "%s %s n=%llu w=%s act=%s: %.9g != scalar %.9g", ti->name,
                                  v[vi]->name, (unsigned long long)n, wpat_name[wp],
                                  apat_name[ap], got, ref);
                    n_cmp++;
                }
            }
        }
    }
    if (nv > 1) printf("%s: %llu SIMD results bit-identical to scalar\n", ti->name,
                       (unsigned long long)n_cmp);
    free(w);
    free(xf);
    free(act);
}
END_TEST

/* Four-row kernels (rt_dot4_fn) == the scalar dot of each row, bit for bit:
 * four different rows at an odd address and a stride that is not a
 * multiple of the block size, n4 = 2 (eight rows), every length up to 33
 * blocks and every weight and activation pattern. */
START_TEST(test_dot4_vs_ref)
{
    const uint32_t t = wtypes[_i];
    const struct rt_kernels *v[6];
    const int nv = variants(v);
    const struct gguf_type_info *ti = gguf_type_get(t);
    const uint64_t max_n = 33 * (is_float_type(t) ? 1 : ti->blck);
    const uint64_t stride = rt_row_bytes(t, max_n) + 3;
    uint8_t *w = malloc(8 * stride + 1);
    float *xf = malloc(max_n * sizeof *xf);
    void *act = malloc(max_n * 4 + 64);
    struct rng r = {0x4444 + t};
    uint64_t n_cmp = 0;
    for (int li = 0; li < N_LENS && lens_blocks[li] <= 33; li++) {
        const uint64_t n = lens_blocks[li] * (is_float_type(t) ? 1 : ti->blck);
        for (int wp = 0; wp < W_NPAT; wp++) {
            for (int ap = 0; ap < A_NPAT; ap++) {
                uint8_t *wr = w + 1;
                for (int row = 0; row < 8; row++)
                    make_weights(t, n, (enum wpat)((wp + (row == 5)) % W_NPAT), &r, wr + row * stride);
                make_act(v[0], rt_kernel_get(v[0], t), n, (enum apat)ap, &r, xf, act);
                float ref[8];
                for (int row = 0; row < 8; row++)
                    rt_kernel_get(v[0], t)->dot(n, &ref[row], wr + row * stride, act);
                for (int vi = 0; vi < nv; vi++) {
                    const struct rt_kernel *k = rt_kernel_get(v[vi], t);
                    if (!k->dot4) continue;
                    float got[9];
                    got[8] = -1.0f;
                    k->dot4(n, 2, got, wr, stride, act);
                    ck_assert_uint_eq(fbits(got[8]), fbits(-1.0f)); /* writes 4 * n4 only */
                    for (int row = 0; row < 8; row++) {
                        ck_assert_msg(fbits(got[row]) == fbits(ref[row]),
                                      "%s %s dot4 row %d n=%llu w=%s act=%s: %.9g != scalar %.9g",
                                      ti->name, v[vi]->name, row, (unsigned long long)n,
                                      wpat_name[wp], apat_name[ap], got[row], ref[row]);
                        n_cmp++;
                    }
                }
            }
        }
    }
    if (n_cmp) printf("%s: %llu four-row results bit-identical to scalar\n", ti->name,
                      (unsigned long long)n_cmp);
    free(w);
    free(xf);
    free(act);
}
END_TEST

// --- activation quantizers ---

static const uint32_t atypes[] = {GGUF_TYPE_F32, GGUF_TYPE_F16, GGUF_TYPE_BF16,
                                  GGUF_TYPE_Q8_0, GGUF_TYPE_Q8_1, GGUF_TYPE_Q8_K};
#define N_ATYPES (int)(sizeof atypes / sizeof atypes[0])

enum xpat { X_RANDOM, X_TIES, X_ZERO, X_ONE, X_NEGMAX, X_EQUALMAX, X_TINY, X_HUGE, X_SUBNORMAL, X_NPAT };

static void make_x(enum xpat p, uint64_t n, struct rng *r, float *x)
{
    for (uint64_t i = 0; i < n; i++) {
        float v = rnd_gauss(r) * ldexpf(1.0f, (int)(rnd(r) % 7) - 3);
        switch (p) {
        case X_TIES: /* block max 127 -> d = 1, every x * id a .5 tie */
            v = (i % 32 == 0) ? 127.0f : (float)((int)(rnd(r) % 250) - 125) + 0.5f;
            break;
        case X_ZERO: v = 0.0f; break;
        case X_ONE: v = (i % 37 == 5) ? -3.0f : 0.0f; break;
        case X_NEGMAX: v = (i % 256 == 200) ? -1000.0f : v; break;
        case X_EQUALMAX: v = (i % 64 == 3) ? 8.0f : (i % 64 == 9) ? -8.0f : v; break;
        case X_TINY: v *= 1e-30f; break;
        case X_HUGE: v *= 1e30f; break;
        case X_SUBNORMAL: v = (float)((int)(rnd(r) % 200) - 100) * 1e-40f; break;
        default: break;
        }
        x[i] = v;
    }
}

START_TEST(test_act_neon_vs_ref)
{
    const uint32_t at = atypes[_i];
    const struct rt_kernels *v[6];
    const int nv = variants(v);
    const struct gguf_type_info *ai = gguf_type_get(at);
    const uint64_t n = 4096 + 256;
    float *x = malloc(n * sizeof *x);
    uint8_t *ref = malloc(rt_row_bytes(at, n)), *got = malloc(rt_row_bytes(at, n));
    struct rng r = {77 + at};
    for (int p = 0; p < X_NPAT; p++) {
        make_x((enum xpat)p, n, &r, x);
        for (uint64_t len = 0; len <= n; len += (len < 512 ? ai->blck : 1024 + ai->blck)) {
            const uint64_t nbytes = rt_row_bytes(at, len);
            memset(ref, 0xA5, nbytes);
            v[0]->act[at].quantize(x, ref, len);
            for (int vi = 1; vi < nv; vi++) {
                memset(got, 0x5A, nbytes);
                v[vi]->act[at].quantize(x, got, len);
                ck_assert_msg(memcmp(ref, got, nbytes) == 0, "%s %s pattern %d len %llu differs",
                              ai->name, v[vi]->name, p, (unsigned long long)len);
            }
        }
    }
    /* Q8_0 activations are exactly quant/'s Q8_0 weight quantizer (both are
     * ggml's quantize_row_q8_0_ref) */
    if (at == GGUF_TYPE_Q8_0) {
        make_x(X_RANDOM, n, &r, x);
        quant_traits_get(GGUF_TYPE_Q8_0)->from_float(x, got, n, NULL);
        v[0]->act[at].quantize(x, ref, n);
        ck_assert_mem_eq(ref, got, rt_row_bytes(at, n));
    }
    free(x);
    free(ref);
    free(got);
}
END_TEST

/* Known answers: Q8_0/Q8_1 round ties away from zero (roundf, ggml's
 * reference), Q8_K to even (nearest_int), the first of equal maxima sets
 * Q8_K's sign, bsums and s. Checked for every variant. */
START_TEST(test_act_known)
{
    const struct rt_kernels *v[6];
    const int nv = variants(v);
    for (int vi = 0; vi < nv; vi++) {
        float x[256] = {127.0f, 0.5f, -0.5f, 1.5f, -2.5f, 2.5f, 126.5f, -126.5f};
        struct rt_block_q8_0 b0;
        v[vi]->act[GGUF_TYPE_Q8_0].quantize(x, &b0, 32);
        ck_assert_uint_eq(b0.d, 0x3c00); /* 1.0 */
        const int8_t e0[8] = {127, 1, -1, 2, -3, 3, 127, -127};
        ck_assert_mem_eq(b0.qs, e0, 8);
        struct rt_block_q8_1 b1;
        v[vi]->act[GGUF_TYPE_Q8_1].quantize(x, &b1, 32);
        ck_assert_mem_eq(b1.qs, e0, 8);
        ck_assert_uint_eq(b1.s, mw_f32_to_f16(127.0f + 1 - 1 + 2 - 3 + 3 + 127 - 127));

        float y[256] = {0};
        y[0] = -127.0f, y[1] = 0.5f, y[2] = 1.5f, y[3] = 2.5f, y[4] = -0.5f, y[5] = 126.5f;
        struct rt_block_q8_k bk;
        v[vi]->act[GGUF_TYPE_Q8_K].quantize(y, &bk, 256);
        const int8_t ek[6] = {-127, 0, 2, 2, 0, 126};
        ck_assert_mem_eq(bk.qs, ek, 6);
        ck_assert(bk.d == 1.0f);
        ck_assert_int_eq(bk.bsums[0], -127 + 2 + 2 + 126);
        for (int g = 1; g < 16; g++) ck_assert_int_eq(bk.bsums[g], 0);
        /* equal |max|: the first (+2) wins, so iscale = -63.5 */
        memset(y, 0, sizeof y);
        y[7] = 2.0f, y[100] = -2.0f, y[101] = 1.0f;
        v[vi]->act[GGUF_TYPE_Q8_K].quantize(y, &bk, 256);
        ck_assert_int_eq(bk.qs[7], -127);
        ck_assert_int_eq(bk.qs[100], 127);
        ck_assert_int_eq(bk.qs[101], -64); /* -63.5 -> even */
        ck_assert(bk.d == 1.0f / (-127.0f / 2.0f));
        /* all zero: d = 0, no garbage */
        memset(y, 0, sizeof y);
        memset(&bk, 0x55, sizeof bk);
        v[vi]->act[GGUF_TYPE_Q8_K].quantize(y, &bk, 256);
        ck_assert(bk.d == 0.0f);
        for (int g = 0; g < 16; g++) ck_assert_int_eq(bk.bsums[g], 0);
    }
}
END_TEST

// --- agreement with quant/'s decoding ---

/* Dequantize an activation row (what the kernel's integers stand for). */
static void act_to_float(uint32_t at, const void *act, float *out, uint64_t n)
{
    if (at == GGUF_TYPE_Q8_K) {
        const struct rt_block_q8_k *y = act;
        for (uint64_t i = 0; i < n; i++) out[i] = y[i / 256].d * (float)y[i / 256].qs[i % 256];
    } else if (at == GGUF_TYPE_Q8_1) {
        const struct rt_block_q8_1 *y = act;
        for (uint64_t i = 0; i < n; i++) out[i] = mw_f16_to_f32(y[i / 32].d) * (float)y[i / 32].qs[i % 32];
    } else {
        quant_traits_get(at)->to_float(act, out, n);
    }
}

/* Scalar (and every other variant's) dot of quant-packed weights and
 * quantized activations vs a double-precision dot of quant's to_float
 * weights and the dequantized activations. Bound, with u = 2^-24, L the
 * number of terms per float partial sum (blocks / 4; elements / 16 for
 * F32/F16/BF16) and groups g of 16 elements:
 *   |dot - ref| <= (L + 16) * 8u * sum_g max_{j in g}|w_j| * sum_{j in g}|x_j|
 * plus, for Q4_1/Q5_1, the f16 rounding of Q8_1's s = d*sum(q):
 *   2^-10 * sum_b |m_b| * sum_{j in b} |x_j| + 2^-24 * sum_b |m_b|.
 * The group-max form covers the k-quant mins, whose two terms
 * (d*S*q and dmin*M) can each exceed |w|. */
START_TEST(test_vs_quant)
{
    const uint32_t t = wtypes[_i];
    const struct gguf_type_info *ti = gguf_type_get(t);
    const struct quant_traits *qt = quant_traits_get(t);
    ck_assert_ptr_nonnull(qt);
    ck_assert_ptr_nonnull(qt->from_float);
    const struct rt_kernels *v[6];
    const int nv = variants(v);
    static const uint64_t ns[] = {256, 512, 4096, 11008};
    double worst_rel = 0.0, worst_bound = 0.0;
    struct rng r = {99 + t};
    for (size_t ni = 0; ni < sizeof ns / sizeof ns[0]; ni++) {
        const uint64_t n = ns[ni];
        float *wsrc = malloc(n * sizeof(float)), *wf = malloc(n * sizeof(float));
        float *x = malloc(n * sizeof(float)), *xf = malloc(n * sizeof(float));
        uint8_t *wq = malloc(rt_row_bytes(t, n));
        void *act = malloc(n * 4 + 64);
        for (int rep = 0; rep < 6; rep++) {
            const float ws = ldexpf(1.0f, (int)(rnd(&r) % 8) - 6);
            for (uint64_t i = 0; i < n; i++) {
                wsrc[i] = rnd_gauss(&r) * ws;
                if (rep == 1) wsrc[i] = fabsf(wsrc[i]) + 0.5f * ws; /* all positive: mins */
                if (rep == 2 && (i / 64) % 3 == 1) wsrc[i] = 0.0f;  /* zero blocks */
                x[i] = rnd_gauss(&r);
                if (rep == 3) x[i] = x[i] * ldexpf(1.0f, (int)(i / 32 % 9) - 4);
            }
            qt->from_float(wsrc, wq, n, NULL);
            qt->to_float(wq, wf, n);
            const struct rt_kernel *k0 = rt_kernel_get(v[0], t);
            rt_quantize_act(v[0], k0, x, act, n);
            act_to_float(k0->act_type, act, xf, n);

            double ref = 0.0, mag = 0.0, gmag = 0.0, mterm = 0.0;
            for (uint64_t i = 0; i < n; i++) {
                ref += (double)wf[i] * (double)xf[i];
                mag += fabs((double)wf[i] * (double)xf[i]);
            }
            for (uint64_t g = 0; g < n / 16; g++) {
                double wmax = 0.0, xs = 0.0;
                for (uint64_t j = 16 * g; j < 16 * g + 16; j++) {
                    wmax = fmax(wmax, fabs(wf[j]));
                    xs += fabs(xf[j]);
                }
                gmag += wmax * xs;
            }
            if (t == GGUF_TYPE_Q4_1 || t == GGUF_TYPE_Q5_1) {
                for (uint64_t b = 0; b < n / 32; b++) {
                    const double m = fabs(mw_f16_to_f32(mw_le16(wq + b * ti->type_size + 2)));
                    double xs = 0.0;
                    for (uint64_t j = 32 * b; j < 32 * b + 32; j++) xs += fabs(xf[j]);
                    mterm += m * xs * ldexp(1.0, -10) + m * ldexp(1.0, -24);
                }
            }
            /* terms per float partial sum: blocks / 4, or elements / 16 */
            const double L = is_float_type(t) ? (double)n / 16 : (double)(n / ti->blck) / 4;
            const double bound = (L + 16) * 8 * ldexp(1.0, -24) * gmag + mterm;
            for (int vi = 0; vi < nv; vi++) {
                float got;
                rt_kernel_get(v[vi], t)->dot(n, &got, wq, act);
                const double err = fabs((double)got - ref);
                ck_assert_msg(err <= bound,
                              "%s %s n=%llu rep %d: dot %.9g, float ref %.9g, err %.3g > bound %.3g "
                              "(sum|wx| %.3g)",
                              ti->name, v[vi]->name, (unsigned long long)n, rep, got, ref, err,
                              bound, mag);
                if (mag > 0) worst_rel = fmax(worst_rel, err / mag);
                if (bound > 0) worst_bound = fmax(worst_bound, err / bound);
            }
        }
        free(wsrc);
        free(wf);
        free(x);
        free(xf);
        free(wq);
        free(act);
    }
    printf("%-7s vs quant to_float: max |err|/sum|wx| = %.2e (%.1f u), max err/bound = %.3f\n",
           ti->name, worst_rel, worst_rel * 16777216.0, worst_bound);
}
END_TEST

/* rt_matvec: rows x dot, no allocation, row ranges compose. */
/* The delta net's row ops of every table against the scalar ones: the
 * scalar table is the index-order sum (exactly), the vector tables within
 * a reassociation bound; axpy within one rounding of the unfused one, scale
 * exact; the AVX2 and NEON tables name their ops. */
START_TEST(test_ssm_ops)
{
    static const uint64_t lens[] = {0, 1, 3, 4, 7, 8, 15, 16, 17, 31, 32, 33, 64, 127, 128, 129, 256};
    enum { NMAX = 256 };
    float x[NMAX], y[NMAX], ya[NMAX], yb[NMAX];
    uint64_t r = 99;
    for (int i = 0; i < NMAX; i++) {
        r = r * 6364136223846793005ull + 1442695040888963407ull;
        x[i] = (float)((double)(r >> 40) / (double)(1ull << 24) - 0.5) * 4.0f;
        r = r * 6364136223846793005ull + 1442695040888963407ull;
        y[i] = (float)((double)(r >> 40) / (double)(1ull << 24) - 0.5);
    }
    const struct rt_kernels *v[6];
    const int nv = variants(v);
    ck_assert_str_eq(v[0]->ssm->name, "scalar");
    for (int t = 0; t < nv; t++) {
        const struct rt_ssm_ops *k = v[t]->ssm;
        ck_assert_ptr_nonnull(k);
#if RT_HAVE_X86
        if (t > 0) ck_assert_str_eq(k->name, "avx2");
#endif
#if RT_HAVE_NEON
        if (t > 0) ck_assert_str_eq(k->name, "neon");
#endif
        for (size_t li = 0; li < sizeof lens / sizeof lens[0]; li++) {
            const uint64_t n = lens[li];
            float ref = 0.0f;
            double exact = 0.0, mag = 0.0;
            for (uint64_t i = 0; i < n; i++) {
                ref += x[i] * y[i];
                exact += (double)x[i] * y[i];
                mag += fabs((double)x[i] * y[i]);
            }
            const float got = k->dot(n, x, y);
            if (t == 0) {
                ck_assert_msg(fbits(got) == fbits(ref), "scalar dot n=%llu", (unsigned long long)n);
            } else {
                const double bound = (double)(n / 4 + 2) * 0x1p-24 * mag + 1e-30;
                ck_assert_msg(fabs((double)got - exact) <= bound, "%s dot n=%llu: %g vs %g",
                              k->name, (unsigned long long)n, (double)got, exact);
            }
            memcpy(ya, y, sizeof y);
            memcpy(yb, y, sizeof y);
            k->axpy(n, ya, x, -0.37f);
            for (uint64_t i = 0; i < n; i++) yb[i] += x[i] * -0.37f;
            for (uint64_t i = 0; i < NMAX; i++) {
                if (t == 0 || i >= n) {
                    ck_assert(fbits(ya[i]) == fbits(yb[i]));
                } else { /* fused (one rounding), or unfused in the tail */
                    const double e = (double)y[i] + (double)x[i] * (double)-0.37f;
                    ck_assert_double_le(fabs((double)ya[i] - e),
                                        0x1p-24 * (fabs(e) + fabs((double)x[i] * 0.37)) + 1e-30);
                }
            }
            memcpy(ya, y, sizeof y);
            k->scale(n, ya, 0.83f);
            for (uint64_t i = 0; i < NMAX; i++)
                ck_assert(fbits(ya[i]) == fbits(i < n ? y[i] * 0.83f : y[i]));
        }
    }
}
END_TEST

START_TEST(test_matvec)
{
    const uint32_t t = wtypes[_i];
    const struct rt_kernels *v[6];
    const int nv = variants(v);
    const uint64_t rows = 7, cols = 512, stride = rt_row_bytes(t, cols);
    uint8_t *W = malloc(rows * stride);
    float *xf = malloc(cols * sizeof(float));
    void *act = malloc(cols * 4 + 64);
    float out[7], part[7], one;
    struct rng r = {5 + t};
    /* every weight and activation pattern: rows 0-3 go through the four-row
     * kernels (rt_dot4_fn) where a variant has them, and must equal dot */
    for (int wp = 0; wp < W_NPAT; wp++)
        for (int ap = 0; ap < A_NPAT; ap++) {
            make_weights(t, rows * cols, (enum wpat)wp, &r, W);
            for (int vi = 0; vi < nv; vi++) {
                const struct rt_kernel *k = rt_kernel_get(v[vi], t);
                make_act(v[vi], k, cols, (enum apat)ap, &r, xf, act);
                const unsigned long before = n_allocs;
                rt_matvec(k, W, rows, cols, act, out);
                rt_matvec(k, W, 3, cols, act, part);
                rt_matvec(k, W + 3 * stride, rows - 3, cols, act, part + 3);
                rt_matvec(k, W, 0, cols, act, NULL);
                ck_assert_uint_eq(n_allocs, before);
                for (uint64_t i = 0; i < rows; i++) {
                    k->dot(cols, &one, W + i * stride, act);
                    ck_assert_msg(fbits(out[i]) == fbits(one) && fbits(part[i]) == fbits(one),
                                  "%s %s row %llu w=%s act=%s: matvec %.9g / %.9g != dot %.9g",
                                  gguf_type_get(t)->name, v[vi]->name, (unsigned long long)i,
                                  wpat_name[wp], apat_name[ap], out[i], part[i], one);
                }
            }
        }
#ifdef RT_TEST_WRAP_ALLOC
    /* the counter works */
    const unsigned long before = n_allocs;
    void *volatile p = malloc(16); /* volatile: GCC elides a malloc/free pair */
    free(p);
    ck_assert_uint_eq(n_allocs, before + 2);
#endif
    free(W);
    free(xf);
    free(act);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("runtime_kernels");
    TCase *tc = tcase_create("tables");
    tcase_add_test(tc, test_cpu_and_tables);
    tcase_add_loop_test(tc, test_table_rows, 0, GGUF_TYPE_COUNT + 1);
    suite_add_tcase(s, tc);

    TCase *tn = tcase_create("neon_vs_ref");
    tcase_set_timeout(tn, 120);
    tcase_add_loop_test(tn, test_neon_vs_ref, 0, N_WTYPES);
    tcase_add_loop_test(tn, test_dot4_vs_ref, 0, N_WTYPES);
    tcase_add_loop_test(tn, test_act_neon_vs_ref, 0, N_ATYPES);
    tcase_add_test(tn, test_act_known);
    suite_add_tcase(s, tn);

    TCase *tq = tcase_create("vs_quant");
    tcase_set_timeout(tq, 120);
    tcase_add_loop_test(tq, test_vs_quant, 0, N_WTYPES);
    tcase_add_loop_test(tq, test_matvec, 0, N_WTYPES);
    tcase_add_test(tq, test_ssm_ops);
    suite_add_tcase(s, tq);

    return run_suite(s);
}
