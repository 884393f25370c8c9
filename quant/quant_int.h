/*
 * quant/quant_int.h — internals shared by the quant/ sources (and its tests):
 * block geometry, ggml's rounding helper, and the scale searches every
 * quantizer is built from (docs/formats.md §2.4, §4.2).
 *
 * Bit-exactness rules (docs/formats.md §2.3), which every function here and in
 * quant_*.c follows: each float operation is one IEEE binary32 operation in
 * the order ggml writes it (the build passes -ffp-contract=off, so a*b+c is
 * never fused), sums run sequentially in index order, products associate
 * left to right, and where ggml divides we divide and where it multiplies by
 * a stored reciprocal we do that.
 *
 * Robustness: none of these functions has undefined behaviour on any float
 * input (NaN, Inf, huge values): float-to-int conversions go through
 * quant_nint (a bit trick, defined for every input) or through clamped
 * casts. For such inputs the bytes are deterministic but meaningless — as in
 * ggml, whose debug build would assert there.
 */
#ifndef MW_QUANT_INT_H
#define MW_QUANT_INT_H

#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#include "quant/quant.h"

#define QUANT_QK_K 256    /* k-quant super-block */
#define QUANT_QK_LEG 32   /* legacy / IQ4_NL block */
#define QUANT_GROUP_EPS 1e-15f /* ggml's GROUP_MAX_EPS: "all zero" below this */

/* The 16 IQ4_NL / IQ4_XS levels (docs/formats.md §3.5), as ggml's int8 table and
 * as the floats every computation converts them to. */
extern const int8_t quant__iq4_values[16];
extern const float quant__iq4_levels[16];

/* The element of x[0..n) with the largest |x|, as ggml picks it: scanning
 * from 0 and replacing only on strictly greater |x| (first of equal maxima
 * wins; NaN never wins). *amax gets |it|. Returns the signed value, +0 when
 * every |x| is 0 (or NaN). Written as a branch-free max followed by a search
 * for its first occurrence: the same element, without the mispredicted
 * branches of the one-pass scan. */
static inline float quant__absmax(const float *x, int n, float *amax)
{
    float a = 0.0f;
    for (int i = 0; i < n; i++) {
        const float ax = fabsf(x[i]);
        a = ax > a ? ax : a;
    }
    *amax = a;
    if (a == 0.0f) return 0.0f;
    int i = 0;
    while (fabsf(x[i]) != a) i++;
    return x[i];
}

/* f32 little-endian f16 store/load of a block field. */
static inline void quant__put_f16(uint8_t *p, float v) { mw_put_le16(p, mw_f32_to_f16(v)); }
static inline float quant__get_f16(const uint8_t *p) { return mw_f16_to_f32(mw_le16(p)); }

// --- searches (quant_search.c; docs/formats.md §4.2) ---

/* make_qx_quants with rmse_type 1: symmetric levels l in [-nmax, nmax-1],
 * stored as L = l + nmax (L = 0 for an all-zero group). w = per-element
 * weights, or NULL for x^2. Returns the scale. n <= 32. */
float quant__make_qx(int n, int nmax, const float *x, int8_t *L, const float *w);

/* make_q3_quants with do_rmse: weights x^2, coordinate descent. L = l + nmax
 * (0 for an all-zero group). n <= 32. */
float quant__make_q3(int n, int nmax, const float *x, int8_t *L);

/* Parameters of ggml's make_qkx2_quants / make_qkx3_quants (asymmetric
 * x ~ scale*L + min with L in 0..nmax). */
struct quant_qkx {
    float rmin, rdelta; /* candidate iscales (rmin + rdelta*t + nmax)/(max-min) */
    int nstep;          /* t = 0..nstep */
    bool use_mad;       /* error |e| instead of e^2 */
    bool v3;            /* qkx3: degenerate when max <= min (qkx2: max == min) */
};
/* Returns the scale; *neg_min = -min >= 0. w: n weights (required). n <= 32. */
float quant__make_qkx(const struct quant_qkx *p, int n, int nmax, const float *x, const float *w,
                      uint8_t *L, float *neg_min);

/* make_qp_quants: non-negative x, levels 0..nmax, weighted, with a final
 * coordinate descent. Returns the scale. */
float quant__make_qp(int n, int nmax, const float *x, uint8_t *L, const float *w);

/* ggml's best_index_int8 over the IQ4 levels K, for the 32 values id*x[j]
 * of a group: the index of the level nearest each (ties to the upper one).
 * ggml binary-searches the bracketing pair K[a] <= v < K[a+1]; counting the
 * levels <= v (threshold by threshold across the group, vectorizable) finds
 * the same pair, and the tie rule is ggml's float comparison. A NaN walks
 * ggml's search up to the top pair, which then picks 15. */
static inline void quant__iq4_index32(const float *x, float id, uint8_t *idx)
{
    const float *k = quant__iq4_levels;
    float v[32];
    int hi[32];
    for (int j = 0; j < 32; j++) {
        v[j] = id * x[j];
        hi[j] = 1;
    }
    for (int t = 1; t < 15; t++)
        for (int j = 0; j < 32; j++) hi[j] += v[j] >= k[t];
    for (int j = 0; j < 32; j++) {
        const float a = v[j];
        int r;
        if (a <= k[0]) r = 0;
        else if (a >= k[15] || a != a) r = 15;
        else r = a - k[hi[j] - 1] < k[hi[j]] - a ? hi[j] - 1 : hi[j];
        idx[j] = (uint8_t)r;
    }
}

// --- packing helpers (quant_search.c) ---

/* Nibble-pair packing of one 32-element block (legacy types, IQ4_NL): qs[j]
 * = L[j] & 15 | (L[j+16] & 15) << 4 (docs/formats.md §3.3). */
void quant__pack_nibbles32(const uint8_t *L, uint8_t *qs);
/* The 5th bits of the same block as ggml's little-endian u32 qh. */
uint32_t quant__qh32(const uint8_t *L);

/* 2-bit planes of a 256 super-block (Q2_K, Q3_K): 64 bytes. L values < 4. */
void quant__pack_2bit(const uint8_t *L, uint8_t *qs);

/* The 12-byte 6-bit scale/min packing of Q4_K/Q5_K (docs/formats.md §3.4). */
void quant__k4_scales_put(uint8_t *q, const uint8_t *ls, const uint8_t *lm);
void quant__k4_scales_get(int j, const uint8_t *q, uint8_t *sc, uint8_t *m);

// --- per-family entry points, referenced from the traits table ---

void quant__to_float_q4_0(const void *b, float *y, uint64_t n);
void quant__to_float_q4_1(const void *b, float *y, uint64_t n);
void quant__to_float_q5_0(const void *b, float *y, uint64_t n);
void quant__to_float_q5_1(const void *b, float *y, uint64_t n);
void quant__to_float_q8_0(const void *b, float *y, uint64_t n);
void quant__from_float_q4_0(const float *x, void *b, uint64_t n, const float *qw);
void quant__from_float_q4_1(const float *x, void *b, uint64_t n, const float *qw);
void quant__from_float_q5_0(const float *x, void *b, uint64_t n, const float *qw);
void quant__from_float_q5_1(const float *x, void *b, uint64_t n, const float *qw);
void quant__from_float_q8_0(const float *x, void *b, uint64_t n, const float *qw);

void quant__to_float_q2_k(const void *b, float *y, uint64_t n);
void quant__to_float_q3_k(const void *b, float *y, uint64_t n);
void quant__to_float_q4_k(const void *b, float *y, uint64_t n);
void quant__to_float_q5_k(const void *b, float *y, uint64_t n);
void quant__to_float_q6_k(const void *b, float *y, uint64_t n);
void quant__from_float_q2_k(const float *x, void *b, uint64_t n, const float *qw);
void quant__from_float_q3_k(const float *x, void *b, uint64_t n, const float *qw);
void quant__from_float_q4_k(const float *x, void *b, uint64_t n, const float *qw);
void quant__from_float_q5_k(const float *x, void *b, uint64_t n, const float *qw);
void quant__from_float_q6_k(const float *x, void *b, uint64_t n, const float *qw);

void quant__to_float_iq4_nl(const void *b, float *y, uint64_t n);
void quant__to_float_iq4_xs(const void *b, float *y, uint64_t n);
void quant__from_float_iq4_nl(const float *x, void *b, uint64_t n, const float *qw);
void quant__from_float_iq4_xs(const float *x, void *b, uint64_t n, const float *qw);
void quant__to_float_iq1_s(const void *b, float *y, uint64_t n);
void quant__to_float_iq1_m(const void *b, float *y, uint64_t n);
void quant__from_float_iq1_s(const float *x, void *b, uint64_t n, const float *qw);
void quant__from_float_iq1_m(const float *x, void *b, uint64_t n, const float *qw);

void quant__to_float_iq2_xxs(const void *b, float *y, uint64_t n);
void quant__to_float_iq2_xs(const void *b, float *y, uint64_t n);
void quant__to_float_iq2_s(const void *b, float *y, uint64_t n);
void quant__from_float_iq2_xxs(const float *x, void *b, uint64_t n, const float *qw);
void quant__from_float_iq2_xs(const float *x, void *b, uint64_t n, const float *qw);
void quant__from_float_iq2_s(const float *x, void *b, uint64_t n, const float *qw);

void quant__to_float_iq3_xxs(const void *b, float *y, uint64_t n);
void quant__to_float_iq3_s(const void *b, float *y, uint64_t n);
void quant__from_float_iq3_xxs(const float *x, void *b, uint64_t n, const float *qw);
void quant__from_float_iq3_s(const float *x, void *b, uint64_t n, const float *qw);

/* MXFP4 (quant_mxfp4.c): ggml's doubled E2M1 levels and its half E8M0 scale */
extern const int8_t quant__mxfp4_values[16];
float quant__e8m0_half(uint8_t e);
void quant__to_float_mxfp4(const void *b, float *y, uint64_t n);
void quant__from_float_mxfp4(const float *x, void *b, uint64_t n, const float *qw);

#endif /* MW_QUANT_INT_H */
