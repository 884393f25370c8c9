/*
 * quant/quant_legacy.c — the 32-element "legacy" blocks Q4_0, Q4_1, Q5_0,
 * Q5_1 (one generic codec driven by a small format descriptor) and Q8_0
 * (shared/docs/formats.md §3.3, §4.3, §4.4).
 *
 * Block layout of the four nibble types, in order:
 *   d:f16 | m:f16 (has_min) | qh:u8[4] (5 bits) | qs:u8[16]
 */
#include "quant_int.h"

#include <float.h>
#include <math.h>

#define QK QUANT_QK_LEG

struct legacy_fmt {
    int bits;     /* 4 or 5 */
    bool has_min; /* Q4_1/Q5_1: x = d*q + m; else x = d*(q - 2^(bits-1)) */
};

static const struct legacy_fmt FMT_Q4_0 = {4, false};
static const struct legacy_fmt FMT_Q4_1 = {4, true};
static const struct legacy_fmt FMT_Q5_0 = {5, false};
static const struct legacy_fmt FMT_Q5_1 = {5, true};

static int fmt_bytes(const struct legacy_fmt *f) { return 2 + (f->has_min ? 2 : 0) + (f->bits == 5 ? 4 : 0) + 16; }
static int fmt_qs(const struct legacy_fmt *f) { return fmt_bytes(f) - 16; }

/* ggml converts the biased RTN values with a plain C cast to int8_t/uint8_t,
 * which is undefined when the value does not fit. For finite input that only
 * happens in blocks whose max |x| is so small (< ~1e-37) that 1/d overflows
 * to Inf. We reproduce what x86-64 ggml builds execute there (cvttss2si /
 * cvttps2dq: NaN and out-of-range give INT32_MIN; the cast keeps the low
 * byte), so even those blocks match llama-quantize on x86-64; for every
 * other value this is exactly C's truncation toward zero. */
static int ggml_cast_i8(float v)
{
    int32_t i = INT32_MIN;
    if (v >= -2147483648.0f && v < 2147483648.0f) i = (int32_t)v;
    return (int8_t)(uint8_t)((uint32_t)i & 0xFF);
}

/* MIN(hi, (int8_t)v) as ggml's Q4_0/Q4_1/Q5_0 reference writes it (Q5_1 has
 * no MIN: hi = 255 there, and the value stays within 0..31 for sane input),
 * stored into the uint8 level ggml packs. */
static uint8_t rtn_level(float v, int hi)
{
    const int q = ggml_cast_i8(v);
    return (uint8_t)(q < hi ? q : hi);
}

// --- dequantization ---

static void legacy_to_float(const struct legacy_fmt *f, const uint8_t *b, float *y, uint64_t n)
{
    const int bytes = fmt_bytes(f), qs_off = fmt_qs(f);
    const int offset = f->has_min ? 0 : 1 << (f->bits - 1);
    for (uint64_t i = 0; i < n / QK; i++, b += bytes, y += QK) {
        const float d = quant__get_f16(b);
        const float m = f->has_min ? quant__get_f16(b + 2) : 0.0f;
        const uint32_t qh = f->bits == 5 ? mw_le32(b + qs_off - 4) : 0;
        const uint8_t *qs = b + qs_off;
        for (int j = 0; j < 16; j++) {
            const int q0 = ((qs[j] & 0x0F) | (int)(((qh >> j) & 1) << 4)) - offset;
            const int q1 = ((qs[j] >> 4) | (int)(((qh >> (j + 16)) & 1) << 4)) - offset;
            if (f->has_min) {
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

static void legacy_store(const struct legacy_fmt *f, uint8_t *b, float d, float m, const uint8_t *L)
{
    quant__put_f16(b, d);
    if (f->has_min) quant__put_f16(b + 2, m);
    uint8_t *qs = b + fmt_qs(f);
    if (f->bits == 5) {
        mw_put_le32(qs - 4, quant__qh32(L));
        quant__pack_nibbles32(L, qs);
    } else {
        /* ggml ORs the 4-bit levels unmasked (they are <= 15 except in the
         * overflow case of ggml_cast_i8) */
        for (int j = 0; j < 16; j++) qs[j] = (uint8_t)(L[j] | (L[j + 16] << 4));
    }
}

/* ggml's quantize_row_q{4,5}_{0,1}_ref: round-to-nearest by biased truncation. */
static void legacy_block_rtn(const struct legacy_fmt *f, const float *x, uint8_t *b)
{
    const int nmax = (1 << f->bits) - 1;
    uint8_t L[QK];
    if (f->has_min) {
        float min = FLT_MAX, max = -FLT_MAX;
        for (int j = 0; j < QK; j++) {
            if (x[j] < min) min = x[j];
            if (x[j] > max) max = x[j];
        }
        const float d = (max - min) / (float)nmax;
        const float id = d != 0 ? 1.0f / d : 0.0f;
        const int hi = f->bits == 4 ? nmax : 255; /* Q5_1's reference has no MIN */
        for (int j = 0; j < QK; j++) {
            /* ggml: (uint8_t)(v) for Q5_1 — the same low byte as (int8_t) */
            L[j] = rtn_level((x[j] - min) * id + 0.5f, hi);
        }
        legacy_store(f, b, d, min, L);
    } else {
        const int half = 1 << (f->bits - 1);
        float amax;
        const float max = quant__absmax(x, QK, &amax);
        const float d = max / (float)-half;
        const float id = d != 0 ? 1.0f / d : 0.0f;
        const float bias = (float)half + 0.5f; /* 8.5f / 16.5f */
        for (int j = 0; j < QK; j++) L[j] = rtn_level(x[j] * id + bias, nmax);
        legacy_store(f, b, d, 0.0f, L);
    }
}

/* ggml's quantize_row_q{4,5}_{0,1}_impl with quant_weights: weights
 * qw*sqrt(sigma2 + x^2), sigma2 the row's mean square; levels stored as the
 * search found them (no re-quantization). */
static void legacy_block_weighted(const struct legacy_fmt *f, const float *x, const float *qw,
                                  float sigma2, uint8_t *b)
{
    float w[QK];
    uint8_t L[QK];
    for (int j = 0; j < QK; j++) w[j] = qw[j] * sqrtf(sigma2 + x[j] * x[j]);
    if (f->has_min) {
        static const struct quant_qkx p = {-0.9f, 0.05f, 36, false, true};
        float neg_min;
        const float d = quant__make_qkx(&p, QK, (1 << f->bits) - 1, x, w, L, &neg_min);
        legacy_store(f, b, d, -neg_min, L);
    } else {
        int8_t Ls[QK];
        const float d = quant__make_qx(QK, 1 << (f->bits - 1), x, Ls, w);
        for (int j = 0; j < QK; j++) L[j] = (uint8_t)Ls[j];
        legacy_store(f, b, d, 0.0f, L);
    }
}

static void legacy_from_float(const struct legacy_fmt *f, const float *x, uint8_t *b, uint64_t n,
                              const float *qw)
{
    const uint64_t nb = n / QK;
    const int bytes = fmt_bytes(f);
    if (!qw) {
        for (uint64_t i = 0; i < nb; i++) legacy_block_rtn(f, x + QK * i, b + (uint64_t)bytes * i);
        return;
    }
    float sum_x2 = 0;
    for (uint64_t j = 0; j < n; j++) sum_x2 += x[j] * x[j];
    const float sigma2 = sum_x2 / (float)n;
    for (uint64_t i = 0; i < nb; i++)
        legacy_block_weighted(f, x + QK * i, qw + QK * i, sigma2, b + (uint64_t)bytes * i);
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
        for (int j = 0; j < QK; j++) {
            /* roundf: half away from zero; |r| <= 127 unless 1/d overflowed */
            b[2 + j] = (uint8_t)ggml_cast_i8(roundf(x[j] * id));
        }
    }
}

// --- entry points of the nibble types ---

#define LEGACY_ENTRY(name, FMT)                                                             \
    void quant__to_float_##name(const void *b, float *y, uint64_t n)                        \
    {                                                                                       \
        legacy_to_float(&FMT, b, y, n);                                                     \
    }                                                                                       \
    void quant__from_float_##name(const float *x, void *b, uint64_t n, const float *qw)     \
    {                                                                                       \
        legacy_from_float(&FMT, x, b, n, qw);                                               \
    }

LEGACY_ENTRY(q4_0, FMT_Q4_0)
LEGACY_ENTRY(q4_1, FMT_Q4_1)
LEGACY_ENTRY(q5_0, FMT_Q5_0)
LEGACY_ENTRY(q5_1, FMT_Q5_1)
