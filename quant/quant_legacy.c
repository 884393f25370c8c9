/*
 * quant/quant_legacy.c — the 32-element "legacy" blocks Q4_0, Q4_1, Q5_0,
 * Q5_1 (one codec, parameterized by bit width and by whether the block has
 * a min) and Q8_0 (docs/formats.md §3.3, §4.3, §4.4).
 *
 * Block layout of the four nibble types, in order:
 *   d:f16 | m:f16 (has_min) | qh:u8[4] (5 bits) | qs:u8[16]
 * The codec's functions are static inline and the entry points at the end
 * pass constant parameters, so each type compiles to its own branch-free
 * loops.
 */
#include "quant/quant_int.h"

#include <float.h>
#include <math.h>

#define QK QUANT_QK_LEG

/* offset of qs, and block bytes */
static inline int fmt_qs(int bits, bool has_min)
{
    return 2 + (has_min ? 2 : 0) + (bits == 5 ? 4 : 0);
}
static inline int fmt_bytes(int bits, bool has_min) { return fmt_qs(bits, has_min) + 16; }

/* ggml converts the biased round-to-nearest values with a plain C cast to
 * int8_t/uint8_t, which is undefined when the value does not fit. For finite
 * input that only happens in blocks whose max |x| is so small (< ~1e-37)
 * that 1/d overflows to Inf. There we reproduce what x86-64 ggml builds
 * execute (cvttss2si / cvttps2dq: NaN and out-of-range give INT32_MIN; the
 * cast keeps the low byte), so even those blocks match llama-quantize on
 * x86-64; for every other value this is C's truncation toward zero. */
static inline int ggml_cast_i8(float v)
{
    int32_t i = INT32_MIN;
    if (v >= -2147483648.0f && v < 2147483648.0f) i = (int32_t)v;
    return (int8_t)(uint8_t)((uint32_t)i & 0xFF);
}

/* Does the block keep every biased value in [0, 2^bits + 1)? True when all
 * x and id are finite (|x*id| is then at most 2^(bits-1) or 2^bits - 1 plus
 * rounding); then (int)v is ggml's cast. */
static inline bool rtn_safe(const float *x, float id)
{
    bool ok = fabsf(id) <= FLT_MAX;
    for (int j = 0; j < QK; j++) ok &= fabsf(x[j]) <= FLT_MAX;
    return ok;
}

// --- dequantization ---

static inline void legacy_to_float(const int bits, const bool has_min, const uint8_t *b, float *y,
                                   uint64_t n)
{
    const int bytes = fmt_bytes(bits, has_min), qs_off = fmt_qs(bits, has_min);
    const int offset = has_min ? 0 : 1 << (bits - 1);
    for (uint64_t i = 0; i < n / QK; i++, b += bytes, y += QK) {
        const float d = quant__get_f16(b);
        const float m = has_min ? quant__get_f16(b + 2) : 0.0f;
        const uint32_t qh = bits == 5 ? mw_le32(b + qs_off - 4) : 0;
        const uint8_t *qs = b + qs_off;
        for (int j = 0; j < 16; j++) {
            const int q0 = ((qs[j] & 0x0F) | (int)(((qh >> j) & 1) << 4)) - offset;
            const int q1 = ((qs[j] >> 4) | (int)(((qh >> (j + 16)) & 1) << 4)) - offset;
            if (has_min) {
                y[j] = (float)q0 * d + m;
                y[j + 16] = (float)q1 * d + m;
            } else {
                y[j] = (float)q0 * d;
                y[j + 16] = (float)q1 * d;
            }
        }
    }
}

// --- quantization ---

static inline void legacy_store(const int bits, const bool has_min, uint8_t *b, float d, float m,
                                const uint8_t *L)
{
    quant__put_f16(b, d);
    if (has_min) quant__put_f16(b + 2, m);
    uint8_t *qs = b + fmt_qs(bits, has_min);
    if (bits == 5) {
        mw_put_le32(qs - 4, quant__qh32(L));
        quant__pack_nibbles32(L, qs);
    } else {
        /* ggml ORs the 4-bit levels unmasked (they are <= 15 except in the
         * overflow case of ggml_cast_i8) */
        for (int j = 0; j < 16; j++) qs[j] = (uint8_t)(L[j] | (L[j + 16] << 4));
    }
}

/* levels MIN(hi, cast(x*scale_in + bias)) (ggml: x0 = (x - min)*id or x*id,
 * then (int8_t)(x0 + 0.5f / 8.5f / 16.5f)); Q5_1 has no MIN (hi = 255). */
static inline void rtn_levels(const float *x, float sub, float id, float bias, int hi, bool safe,
                              uint8_t *L)
{
    if (safe) {
        for (int j = 0; j < QK; j++) {
            const int q = (int)((x[j] - sub) * id + bias);
            L[j] = (uint8_t)(q < hi ? q : hi);
        }
    } else {
        for (int j = 0; j < QK; j++) {
            const int q = ggml_cast_i8((x[j] - sub) * id + bias);
            L[j] = (uint8_t)(q < hi ? q : hi);
        }
    }
}

/* ggml's quantize_row_q{4,5}_{0,1}_ref: round-to-nearest by biased truncation. */
static inline void legacy_block_rtn(const int bits, const bool has_min, const float *x, uint8_t *b)
{
    const int nmax = (1 << bits) - 1;
    uint8_t L[QK];
    if (has_min) {
        float min = FLT_MAX, max = -FLT_MAX;
        for (int j = 0; j < QK; j++) {
            if (x[j] < min) min = x[j];
            if (x[j] > max) max = x[j];
        }
        const float d = (max - min) / (float)nmax;
        const float id = d != 0 ? 1.0f / d : 0.0f;
        /* (x - min)*id: the subtraction is ggml's too; Q5_1's (uint8_t)
         * cast keeps the same low byte as (int8_t) */
        const bool safe = rtn_safe(x, id) && fabsf(max - min) <= FLT_MAX;
        rtn_levels(x, min, id, 0.5f, bits == 4 ? nmax : 255, safe, L);
        legacy_store(bits, has_min, b, d, min, L);
    } else {
        const int half = 1 << (bits - 1);
        float amax;
        const float max = quant__absmax(x, QK, &amax);
        const float d = max / (float)-half;
        const float id = d != 0 ? 1.0f / d : 0.0f;
        /* x - 0.0f == x for every x, so this is ggml's x*id + 8.5f / 16.5f */
        rtn_levels(x, 0.0f, id, (float)half + 0.5f, nmax, rtn_safe(x, id), L);
        legacy_store(bits, has_min, b, d, 0.0f, L);
    }
}

/* ggml's quantize_row_q{4,5}_{0,1}_impl with quant_weights: weights
 * qw*sqrt(sigma2 + x^2), sigma2 the row's mean square; levels stored as the
 * search found them (no re-quantization). */
static inline void legacy_block_weighted(const int bits, const bool has_min, const float *x,
                                         const float *qw, float sigma2, uint8_t *b)
{
    float w[QK];
    uint8_t L[QK];
    for (int j = 0; j < QK; j++) w[j] = qw[j] * sqrtf(sigma2 + x[j] * x[j]);
    if (has_min) {
        static const struct quant_qkx p = {-0.9f, 0.05f, 36, false, true};
        float neg_min;
        const float d = quant__make_qkx(&p, QK, (1 << bits) - 1, x, w, L, &neg_min);
        legacy_store(bits, has_min, b, d, -neg_min, L);
    } else {
        int8_t Ls[QK];
        const float d = quant__make_qx(QK, 1 << (bits - 1), x, Ls, w);
        for (int j = 0; j < QK; j++) L[j] = (uint8_t)Ls[j];
        legacy_store(bits, has_min, b, d, 0.0f, L);
    }
}

static inline void legacy_from_float(const int bits, const bool has_min, const float *x, uint8_t *b,
                                     uint64_t n, const float *qw)
{
    const uint64_t nb = n / QK;
    const uint64_t bytes = (uint64_t)fmt_bytes(bits, has_min);
    if (!qw) {
        for (uint64_t i = 0; i < nb; i++)
            legacy_block_rtn(bits, has_min, x + QK * i, b + bytes * i);
        return;
    }
    float sum_x2 = 0;
    for (uint64_t j = 0; j < n; j++) sum_x2 += x[j] * x[j];
    const float sigma2 = sum_x2 / (float)n;
    for (uint64_t i = 0; i < nb; i++)
        legacy_block_weighted(bits, has_min, x + QK * i, qw + QK * i, sigma2, b + bytes * i);
}

// --- Q8_0: d:f16 | qs:i8[32]; imatrix ignored ---

void quant__to_float_q8_0(const void *blocks, float *y, uint64_t n)
{
    const uint8_t *b = blocks;
    for (uint64_t i = 0; i < n / QK; i++, b += 34, y += QK) {
        const float d = quant__get_f16(b);
        for (int j = 0; j < QK; j++) y[j] = (float)(int8_t)b[2 + j] * d;
    }
}

/* C's roundf (half away from zero) for |v| < 2^31, without the libm call:
 * truncate, then step away from zero when the (exact) remainder is >= 0.5. */
static inline int round_half_away(float v)
{
    int q = (int)v;
    const float frac = v - (float)q;
    q += (frac >= 0.5f) - (frac <= -0.5f);
    return q;
}

void quant__from_float_q8_0(const float *x, void *blocks, uint64_t n, const float *qw)
{
    (void)qw;
    uint8_t *b = blocks;
    for (uint64_t i = 0; i < n / QK; i++, b += 34, x += QK) {
        float amax = 0.0f;
        for (int j = 0; j < QK; j++) {
            const float a = fabsf(x[j]);
            amax = amax > a ? amax : a;
        }
        const float d = amax / 127.0f;
        const float id = d != 0 ? 1.0f / d : 0.0f;
        quant__put_f16(b, d);
        /* roundf(x*id): |x*id| <= 127 (plus rounding) unless 1/d overflowed
         * or x is not finite; ggml then casts roundf's result to int8_t */
        if (rtn_safe(x, id)) {
            for (int j = 0; j < QK; j++) b[2 + j] = (uint8_t)(int8_t)round_half_away(x[j] * id);
        } else {
            for (int j = 0; j < QK; j++) b[2 + j] = (uint8_t)ggml_cast_i8(roundf(x[j] * id));
        }
    }
}

// --- entry points of the nibble types ---

#define LEGACY_ENTRY(name, BITS, HAS_MIN)                                                   \
    void quant__to_float_##name(const void *b, float *y, uint64_t n)                        \
    {                                                                                       \
        legacy_to_float(BITS, HAS_MIN, b, y, n);                                            \
    }                                                                                       \
    void quant__from_float_##name(const float *x, void *b, uint64_t n, const float *qw)     \
    {                                                                                       \
        legacy_from_float(BITS, HAS_MIN, x, b, n, qw);                                      \
    }

LEGACY_ENTRY(q4_0, 4, false)
LEGACY_ENTRY(q4_1, 4, true)
LEGACY_ENTRY(q5_0, 5, false)
LEGACY_ENTRY(q5_1, 5, true)
