/*
 * quant/quant_mxfp4.c — MXFP4 (OCP microscaling FP4, gpt-oss's expert
 * format): 32-element blocks of one E8M0 exponent byte and sixteen bytes of
 * E2M1 nibbles (docs/formats.md §3.7).
 *
 *   e:u8 (E8M0) | qs:u8[16]   element j in the low nibble of qs[j], element
 *                              j+16 in the high nibble (as Q4_0)
 *
 * ggml stores the E2M1 values doubled, as the int8 levels
 * {0,1,2,3,4,6,8,12, 0,-1,-2,-3,-4,-6,-8,-12}, and scales them by half the
 * E8M0 value, 2^(e-128) (GGML_E8M0_TO_FP32_HALF, with ggml's subnormal
 * patterns for e = 0 and 1). to_float is ggml's dequantize_row_mxfp4 and
 * from_float its quantize_row_mxfp4_ref, which llama-quantize calls with or
 * without an imatrix (the importance weights are ignored).
 */
#include "quant/quant_int.h"

#include <math.h>

const int8_t quant__mxfp4_values[16] = {0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12};

float quant__e8m0_half(uint8_t e)
{
    /* 0.5 * 2^(e-127): e >= 2 is the normal float of exponent field e-1;
     * e = 1 and 0 are the subnormals 2^-127 and 2^-128 */
    const uint32_t u = e < 2 ? 0x00200000u << e : (uint32_t)(e - 1) << 23;
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

void quant__to_float_mxfp4(const void *blocks, float *y, uint64_t n)
{
    const uint8_t *b = blocks;
    for (uint64_t i = 0; i < n / 32; i++, b += 17, y += 32) {
        const float d = quant__e8m0_half(b[0]);
        for (int j = 0; j < 16; j++) {
            y[j] = (float)quant__mxfp4_values[b[1 + j] & 0x0F] * d;
            y[j + 16] = (float)quant__mxfp4_values[b[1 + j] >> 4] * d;
        }
    }
}

/* ggml's best_index_mxfp4: the level whose scaled value is nearest x, the
 * first of equal errors (so +0, never -0; a NaN x keeps index 0). */
static uint8_t best_index(float x, float d)
{
    int best = 0;
    float best_err = fabsf((float)quant__mxfp4_values[0] * d - x);
    for (int i = 1; i < 16; i++) {
        const float err = fabsf((float)quant__mxfp4_values[i] * d - x);
        if (err < best_err) {
            best = i;
            best_err = err;
        }
    }
    return (uint8_t)best;
}

/* ggml computes e = (uint8_t)(floorf(log2f(amax)) - 2 + 127), a float to
 * uint8_t cast that C leaves undefined outside 0..255 (amax below 2^-125, or
 * Inf). x86-64 builds convert through a 32-bit integer (cvttss2si; Inf gives
 * INT32_MIN) and keep the low byte; this does the same for every input. */
static uint8_t e8m0_of(float amax)
{
    if (!(amax > 0.0f)) return 0;
    const float f = floorf(log2f(amax)) - 2 + 127;
    int32_t i = INT32_MIN;
    if (f >= -2147483648.0f && f < 2147483648.0f) i = (int32_t)f;
    return (uint8_t)((uint32_t)i & 0xFF);
}

void quant__from_float_mxfp4(const float *x, void *blocks, uint64_t n, const float *qw)
{
    (void)qw;
    uint8_t *b = blocks;
    for (uint64_t i = 0; i < n / 32; i++, b += 17, x += 32) {
        float amax = 0.0f;
        for (int j = 0; j < 32; j++)
            if (amax < fabsf(x[j])) amax = fabsf(x[j]);
        const uint8_t e = e8m0_of(amax);
        const float d = quant__e8m0_half(e);
        b[0] = e;
        for (int j = 0; j < 16; j++)
            b[1 + j] = (uint8_t)(best_index(x[j], d) | best_index(x[j + 16], d) << 4);
    }
}
