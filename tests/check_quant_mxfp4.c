/*
 * tests/check_quant_mxfp4.c — quant/quant_mxfp4.c against ggml's MXFP4
 * (ggml-quants.c quantize_row_mxfp4_ref / dequantize_row_mxfp4, the
 * GGML_E8M0_TO_FP32_HALF scale and the doubled E2M1 levels kvalues_mxfp4).
 *
 *   hand      blocks worked out by hand from ggml's definition: the E8M0
 *             exponent floor(log2 amax) - 2 + 127, nearest level with the
 *             first of equal errors, the nibble order, the subnormal and
 *             largest scales
 *   ggml      64 rows x 256 of an LCG input whose blocks span 2^-135..2^124
 *             (exponents below 0 wrap as x86-64 ggml's cast wraps them), a
 *             zero block and a block of ties: the FNV-1a 64 of ggml's bytes
 *             (libggml-base of the llama.cpp peer, through
 *             ggml_quantize_chunk) and of ggml's to_float of every
 *             (exponent 0..254, nibble byte) block
 *   roundtrip quantize(dequantize(b)) == b for blocks without the -0 level
 */
#include <check.h>
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "quant/quant.h"
#include "quant/quant_int.h"

#include "check_common.h"

static uint64_t fnv1a(const void *p, size_t n)
{
    const uint8_t *b = p;
    uint64_t h = 0xcbf29ce484222325ull;
    for (size_t i = 0; i < n; i++) {
        h ^= b[i];
        h *= 0x100000001b3ull;
    }
    return h;
}

START_TEST(test_geometry)
{
    const struct gguf_type_info *ti = gguf_type_get(GGUF_TYPE_MXFP4);
    ck_assert_ptr_nonnull(ti);
    ck_assert_uint_eq(ti->blck, 32);
    ck_assert_uint_eq(ti->type_size, 17);
    const struct quant_traits *q = quant_traits_get(GGUF_TYPE_MXFP4);
    ck_assert_ptr_nonnull(q);
    ck_assert(!q->needs_imatrix);
}
END_TEST

START_TEST(test_hand)
{
    const struct quant_traits *q = quant_traits_get(GGUF_TYPE_MXFP4);
    /* amax 6: e = floor(log2 6) - 2 + 127 = 127, half scale 0.5, levels
     * 0 .5 1 1.5 2 3 4 6. 6 -> 7, -6 -> 15, 2.5 ties 2|3 -> 4, -0.25 ties
     * 0|-0.5 -> 0, 0.75 ties .5|1 -> 1, 5 ties 4|6 -> 6, -0 -> 0, and
     * x[16] = -3 -> 13 in the high nibble of qs[0] */
    float x[32] = {6, -6, 2.5f, -0.25f, 0.75f, 5, 0, -0.0f};
    x[16] = -3;
    uint8_t b[17];
    q->from_float(x, b, 32, NULL);
    const uint8_t want[17] = {0x7f, 0xd7, 0x0f, 0x04, 0x00, 0x01, 0x06};
    ck_assert_mem_eq(b, want, 17);
    float y[32];
    q->to_float(b, y, 32);
    const float wy[8] = {6, -6, 2, 0, 0.5f, 4, 0, 0};
    for (int j = 0; j < 8; j++) ck_assert(memcmp(&y[j], &wy[j], 4) == 0);
    ck_assert(y[16] == -3.0f);

    /* amax 1: e = 125, half scale 2^-3; 1 = 8 * 2^-3 -> level 6 */
    float x1[32] = {1};
    q->from_float(x1, b, 32, NULL);
    ck_assert_uint_eq(b[0], 125);
    ck_assert_uint_eq(b[1], 6);

    /* all zero: e = 0, nibbles 0 */
    float z[32] = {0};
    q->from_float(z, b, 32, NULL);
    for (int j = 0; j < 17; j++) ck_assert_uint_eq(b[j], 0);
    /* amax 2^-140: floor(log2) - 2 + 127 = -15, wrapped to 241 */
    float t[32] = {ldexpf(1, -140)};
    q->from_float(t, b, 32, NULL);
    ck_assert_uint_eq(b[0], 241);
    /* Inf: ggml's x86-64 cast of Inf gives INT32_MIN, low byte 0 */
    float inf[32] = {INFINITY};
    q->from_float(inf, b, 32, NULL);
    ck_assert_uint_eq(b[0], 0);

    /* half scales: e 0 and 1 are the subnormals 2^-128 and 2^-127 */
    ck_assert(quant__e8m0_half(0) == ldexpf(1, -128));
    ck_assert(quant__e8m0_half(1) == ldexpf(1, -127));
    ck_assert(quant__e8m0_half(2) == ldexpf(1, -126));
    ck_assert(quant__e8m0_half(128) == 1.0f);
    ck_assert(quant__e8m0_half(254) == ldexpf(1, 126));
    ck_assert(quant__e8m0_half(255) == ldexpf(1, 127));
    uint8_t d[17] = {0, 0x87};
    q->to_float(d, y, 32);
    ck_assert(y[0] == 12 * ldexpf(1, -128));
    ck_assert(y[16] == -0.0f && signbit(y[16]) == 0); /* (float)0 * d: +0 */
}
END_TEST

START_TEST(test_ggml)
{
    enum { ROWS = 64, N = 256 };
    static float x[ROWS * N];
    uint32_t st = 12345;
    for (int i = 0; i < ROWS * N; i++) {
        st = st * 1664525u + 1013904223u;
        const int32_t v = (int32_t)(st >> 8) - 8388608;
        const int s = (i / 32 * 37) % 260 - 135;
        x[i] = ldexpf((float)v / 8388608.0f, s);
    }
    for (int j = 0; j < 32; j++) x[5 * 32 + j] = 0.0f;
    for (int j = 0; j < 32; j++) x[6 * 32 + j] = (float)(j % 16 - 8) * 0.25f;
    static uint8_t q[ROWS * N / 32 * 17];
    struct mw_err err;
    ck_assert_int_eq(quant_rows(GGUF_TYPE_MXFP4, x, ROWS, N, NULL, q, 3, &err), MW_OK);
    const uint8_t b1[17] = {0x1a, 0x99, 0x6d, 0xd2, 0x57, 0x2f, 0x66, 0xad, 0xed,
                            0x97, 0x51, 0x15, 0x75, 0xb4, 0x7f, 0x67, 0xf6};
    const uint8_t b6[17] = {0x7e, 0xee, 0xdd, 0xdd, 0xcc, 0xcc, 0xbb, 0xaa, 0x99,
                            0x00, 0x11, 0x22, 0x33, 0x44, 0x44, 0x55, 0x55};
    ck_assert_uint_eq(q[0], 0xf5);
    ck_assert_mem_eq(q + 17, b1, 17);
    ck_assert_mem_eq(q + 6 * 17, b6, 17);
    ck_assert_uint_eq(fnv1a(q, sizeof q), 0xf0deda75aa193f2cull);

    static uint8_t blk[17 * 255 * 16];
    static float y[32 * 255 * 16];
    int nb = 0;
    for (int e = 0; e < 255; e++)
        for (int k = 0; k < 16; k++) {
            uint8_t *B = blk + 17 * nb++;
            B[0] = (uint8_t)e;
            for (int j = 0; j < 16; j++) B[1 + j] = (uint8_t)(k * 16 + j);
        }
    quant_traits_get(GGUF_TYPE_MXFP4)->to_float(blk, y, 32 * (uint64_t)nb);
    ck_assert_uint_eq(fnv1a(y, sizeof y), 0x5591c466a4438125ull);
}
END_TEST

START_TEST(test_roundtrip)
{
    const struct quant_traits *q = quant_traits_get(GGUF_TYPE_MXFP4);
    uint32_t st = 7;
    for (int it = 0; it < 2000; it++) {
        uint8_t b[17], b2[17];
        float y[32];
        b[0] = (uint8_t)(2 + it % 250);
        int has12 = 0;
        for (int j = 1; j < 17; j++) {
            st = st * 1664525u + 1013904223u;
            uint8_t lo = (uint8_t)(st >> 24 & 15), hi = (uint8_t)(st >> 16 & 15);
            if (lo == 8) lo = 0; /* -0 decodes as +0 and comes back as 0 */
            if (hi == 8) hi = 0;
            has12 |= lo == 7 || lo == 15 || hi == 7 || hi == 15;
            b[j] = (uint8_t)(lo | hi << 4);
        }
        if (!has12) b[1] = (uint8_t)((b[1] & 0xF0) | 7); /* amax sets e */
        q->to_float(b, y, 32);
        q->from_float(y, b2, 32, NULL);
        ck_assert_mem_eq(b, b2, 17);
    }
}
END_TEST

int main(void)
{
    Suite *s = suite_create("quant_mxfp4");
    TCase *tc = tcase_create("mxfp4");
    tcase_add_test(tc, test_geometry);
    tcase_add_test(tc, test_hand);
    tcase_add_test(tc, test_ggml);
    tcase_add_test(tc, test_roundtrip);
    suite_add_tcase(s, tc);
    return run_suite(s);
}
