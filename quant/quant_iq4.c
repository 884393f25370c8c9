/*
 * quant/quant_iq4.c — the non-linear 4-bit types IQ4_NL (32-element blocks)
 * and IQ4_XS (256-element super-blocks of eight 32-element sub-blocks with
 * 6-bit sub-scales), both mapping 4-bit indices through quant__iq4_values
 * (docs/formats.md §3.5, §4.3).
 *
 * Quantization follows ggml's quantize_iq4_nl / quantize_iq4_xs — what
 * llama-quantize calls, with the 15-candidate scale search (ntry = 7) also
 * when there is no imatrix.
 *   IQ4_NL: d:f16 | qs:u8[16]
 *   IQ4_XS: d:f16 | scales_h:u16 | scales_l:u8[4] | qs:u8[128]
 */
#include "quant/quant_int.h"

#include <math.h>

#define NTRY 7

// --- dequantization ---

static void iq4_sub_to_float(float dl, const uint8_t *qs, float *y)
{
    for (int j = 0; j < 16; j++) {
        y[j] = dl * quant__iq4_levels[qs[j] & 0xF];
        y[j + 16] = dl * quant__iq4_levels[qs[j] >> 4];
    }
}

void quant__to_float_iq4_nl(const void *blocks, float *y, uint64_t n)
{
    const uint8_t *b = blocks;
    for (uint64_t i = 0; i < n / 32; i++, b += 18, y += 32)
        iq4_sub_to_float(quant__get_f16(b), b + 2, y);
}

static int iq4xs_ls(const uint8_t *b, int ib)
{
    const int lo = (b[4 + ib / 2] >> (4 * (ib % 2))) & 0xF;
    const int hi = (mw_le16(b + 2) >> (2 * ib)) & 3;
    return lo | (hi << 4);
}

void quant__to_float_iq4_xs(const void *blocks, float *y, uint64_t n)
{
    const uint8_t *b = blocks;
    for (uint64_t i = 0; i < n / QUANT_QK_K; i++, b += 136, y += QUANT_QK_K) {
        const float d = quant__get_f16(b);
        for (int ib = 0; ib < 8; ib++)
            iq4_sub_to_float(d * (float)(iq4xs_ls(b, ib) - 32), b + 8 + 16 * ib, y + 32 * ib);
    }
}

// --- quantization ---

/* The scale search of ggml's quantize_row_iq4_nl_impl over one 32-group:
 * 16 candidate inverse scales (the first from -max/K[0], then
 * (t + K[0])/max for t = -7..7); for each, the levels' sums sumqx += w*q*x
 * and sumq2 += w*q*q in index order; a candidate replaces the best when
 * sumqx^2 > best*sumq2. The candidates do not depend on one another (only d
 * and best change), so their sums are accumulated four at a time — four
 * independent chains, each summed exactly as ggml sums it — and the
 * acceptance then runs in ggml's order. Returns the signed scale (0 for an
 * all-zero group). */
#define IQ4_NCAND (2 * NTRY + 2)
_Static_assert(IQ4_NCAND % 4 == 0, "candidates are summed four at a time");

static float iq4_scale(const float *x, const float *w)
{
    float amax;
    const float max = quant__absmax(x, 32, &amax);
    if (amax < QUANT_GROUP_EPS) return 0.0f;
    float q[IQ4_NCAND][32];
    for (int c = 0; c < IQ4_NCAND; c++) {
        const float id = c == 0 ? 1 / (-max / quant__iq4_levels[0])
                                : (float)(c - 1 - NTRY + quant__iq4_values[0]) / max;
        uint8_t idx[32];
        quant__iq4_index32(x, id, idx);
        for (int j = 0; j < 32; j++) q[c][j] = quant__iq4_levels[idx[j]];
    }
    float sqx[IQ4_NCAND], sq2[IQ4_NCAND];
    for (int c = 0; c < IQ4_NCAND; c += 4) {
        float a0 = 0, a1 = 0, a2 = 0, a3 = 0, b0 = 0, b1 = 0, b2 = 0, b3 = 0;
        for (int j = 0; j < 32; j++) {
            const float q0 = q[c][j], q1 = q[c + 1][j], q2 = q[c + 2][j], q3 = q[c + 3][j];
            a0 += w[j] * q0 * x[j], b0 += w[j] * q0 * q0;
            a1 += w[j] * q1 * x[j], b1 += w[j] * q1 * q1;
            a2 += w[j] * q2 * x[j], b2 += w[j] * q2 * q2;
            a3 += w[j] * q3 * x[j], b3 += w[j] * q3 * q3;
        }
        sqx[c] = a0, sqx[c + 1] = a1, sqx[c + 2] = a2, sqx[c + 3] = a3;
        sq2[c] = b0, sq2[c + 1] = b1, sq2[c + 2] = b2, sq2[c + 3] = b3;
    }
    float d = sq2[0] > 0 ? sqx[0] / sq2[0] : 0.0f;
    float best = d * sqx[0];
    for (int c = 1; c < IQ4_NCAND; c++) {
        if (sq2[c] > 0 && sqx[c] * sqx[c] > best * sq2[c]) {
            d = sqx[c] / sq2[c];
            best = d * sqx[c];
        }
    }
    return d;
}

static void iq4_weights(const float *x, const float *qw, float sigma2, float *w)
{
    for (int j = 0; j < 32; j++) w[j] = qw ? qw[j] * sqrtf(sigma2 + x[j] * x[j]) : x[j] * x[j];
}

/* sigma2 of a (super-)block: 2 * mean square, written as ggml does */
static float iq4_sigma2(const float *x, int n)
{
    float s = 0;
    for (int j = 0; j < n; j++) s += x[j] * x[j];
    return s * (2.0f / (float)n);
}

static void iq4_pack(const float *x, float id, uint8_t *qs)
{
    uint8_t L[32];
    quant__iq4_index32(x, id, L);
    quant__pack_nibbles32(L, qs);
}

void quant__from_float_iq4_nl(const float *x, void *blocks, uint64_t n, const float *qw)
{
    uint8_t *b = blocks;
    float w[32];
    for (uint64_t i = 0; i < n / 32; i++, b += 18, x += 32) {
        iq4_weights(x, qw ? qw + 32 * i : NULL, iq4_sigma2(x, 32), w);
        const float d = iq4_scale(x, w);
        quant__put_f16(b, d);
        iq4_pack(x, d != 0 ? 1 / d : 0.0f, b + 2);
    }
}

void quant__from_float_iq4_xs(const float *x, void *blocks, uint64_t n, const float *qw)
{
    uint8_t *b = blocks;
    float w[32], scales[8];
    for (uint64_t i = 0; i < n / QUANT_QK_K; i++, b += 136, x += QUANT_QK_K) {
        const float *qwb = qw ? qw + QUANT_QK_K * i : NULL;
        const float sigma2 = iq4_sigma2(x, QUANT_QK_K);
        float max_scale = 0, amax_scale = 0;
        for (int ib = 0; ib < 8; ib++) {
            iq4_weights(x + 32 * ib, qwb ? qwb + 32 * ib : NULL, sigma2, w);
            scales[ib] = iq4_scale(x + 32 * ib, w);
            const float a = fabsf(scales[ib]);
            if (a > amax_scale) {
                amax_scale = a;
                max_scale = scales[ib];
            }
        }
        const float d = -max_scale / 32;
        quant__put_f16(b, d);
        const float id = d != 0 ? 1 / d : 0.0f;
        uint16_t scales_h = 0;
        memset(b + 4, 0, 4);
        for (int ib = 0; ib < 8; ib++) {
            const int l = quant_clampi(quant_nint(id * scales[ib]), -32, 31);
            const float dl = d * (float)l;
            iq4_pack(x + 32 * ib, dl != 0 ? 1 / dl : 0.0f, b + 8 + 16 * ib);
            b[4 + ib / 2] |= (uint8_t)(((l + 32) & 0xF) << (4 * (ib % 2)));
            scales_h |= (uint16_t)(((l + 32) >> 4) << (2 * ib));
        }
        mw_put_le16(b + 2, scales_h);
    }
}
