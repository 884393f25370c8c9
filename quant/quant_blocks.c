/*
 * quant/quant_blocks.c — the function half of the ggml type traits: one table
 * indexed by ggml type id, filled with designated initializers, and the
 * plain types F32/F16/BF16. Rows that are absent (zeroed) are types memwall
 * cannot decode; quant_traits_get() returns NULL for them. New types add a
 * row here, never a switch elsewhere.
 *
 * The block codecs live beside this file: quant_legacy.c (Q4_0 Q4_1 Q5_0
 * Q5_1 Q8_0), quant_kquants.c (Q2_K..Q6_K), quant_iq4.c (IQ4_NL IQ4_XS),
 * quant_mxfp4.c (MXFP4), on
 * the searches and packing helpers of quant_search.c. Every to_float is
 * ggml's dequantization bit for bit and every from_float ggml's
 * quantization byte for byte (docs/formats.md §3, §4; tested against
 * ggml's test vectors and the §4.5 hashes, on x86-64 and aarch64).
 */
#include "quant/quant_int.h"

#include <string.h>

_Static_assert(GGUF_TYPE_COUNT == 43, "quant traits table must cover every ggml type id");

// --- plain types (docs/formats.md §3.2): imatrix ignored ---

static void to_float_f32(const void *blocks, float *out, uint64_t n)
{
    const uint8_t *p = blocks;
    for (uint64_t i = 0; i < n; i++) {
        const uint32_t u = mw_le32(p + 4 * i);
        memcpy(&out[i], &u, sizeof u);
    }
}

static void from_float_f32(const float *x, void *blocks, uint64_t n, const float *qw)
{
    (void)qw;
    uint8_t *p = blocks;
    for (uint64_t i = 0; i < n; i++) {
        uint32_t u;
        memcpy(&u, &x[i], sizeof u);
        mw_put_le32(p + 4 * i, u);
    }
}

static void to_float_f16(const void *blocks, float *out, uint64_t n)
{
    const uint8_t *p = blocks;
    for (uint64_t i = 0; i < n; i++) out[i] = mw_f16_to_f32(mw_le16(p + 2 * i));
}

static void from_float_f16(const float *x, void *blocks, uint64_t n, const float *qw)
{
    (void)qw;
    uint8_t *p = blocks;
    for (uint64_t i = 0; i < n; i++) mw_put_le16(p + 2 * i, mw_f32_to_f16(x[i]));
}

static void to_float_bf16(const void *blocks, float *out, uint64_t n)
{
    const uint8_t *p = blocks;
    for (uint64_t i = 0; i < n; i++) out[i] = mw_bf16_to_f32(mw_le16(p + 2 * i));
}

static void from_float_bf16(const float *x, void *blocks, uint64_t n, const float *qw)
{
    (void)qw;
    uint8_t *p = blocks;
    for (uint64_t i = 0; i < n; i++) mw_put_le16(p + 2 * i, mw_f32_to_bf16(x[i]));
}

// --- the table ---

#define ROW(T, name) [GGUF_TYPE_##T] = {GGUF_TYPE_##T, to_float_##name, from_float_##name, false}
#define QROW(T, name)                                                                  \
    [GGUF_TYPE_##T] = {GGUF_TYPE_##T, quant__to_float_##name, quant__from_float_##name, false}
/* a type ggml quantizes only with importance weights */
#define QROW_IM(T, name)                                                               \
    [GGUF_TYPE_##T] = {GGUF_TYPE_##T, quant__to_float_##name, quant__from_float_##name, true}

static const struct quant_traits traits[GGUF_TYPE_COUNT] = {
    ROW(F32, f32),
    ROW(F16, f16),
    ROW(BF16, bf16),
    QROW(Q4_0, q4_0),
    QROW(Q4_1, q4_1),
    QROW(Q5_0, q5_0),
    QROW(Q5_1, q5_1),
    QROW(Q8_0, q8_0),
    QROW(Q2_K, q2_k),
    QROW(Q3_K, q3_k),
    QROW(Q4_K, q4_k),
    QROW(Q5_K, q5_k),
    QROW(Q6_K, q6_k),
    QROW(IQ4_NL, iq4_nl),
    QROW(IQ4_XS, iq4_xs),
    QROW_IM(IQ1_S, iq1_s),
    QROW(IQ1_M, iq1_m),
    QROW_IM(IQ2_XXS, iq2_xxs),
    QROW_IM(IQ2_XS, iq2_xs),
    QROW(IQ2_S, iq2_s),
    QROW(IQ3_XXS, iq3_xxs),
    QROW(IQ3_S, iq3_s),
    QROW(MXFP4, mxfp4),
};

const struct quant_traits *quant_traits_get(uint32_t t)
{
    if (t >= GGUF_TYPE_COUNT || traits[t].to_float == NULL) return NULL;
    return &traits[t];
}
