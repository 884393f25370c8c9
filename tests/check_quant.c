/*
 * tests/check_quant.c — quant/: the traits table and every block type
 * against ggml. One fork per type (tcase_add_loop_test over the tables).
 *
 *   vectors   ggml's test vectors (datasets/testvectors, falling back to
 *             shared/testvectors): to_float bit-exact on the plain, weighted
 *             and random block sets; from_float byte-exact without and with
 *             importance weights; error of ours <= ggml's (ratios printed)
 *   hash45    docs/formats.md §4.5: SHA-256 of ggml's output for a 4x512 LCG input
 *             (an independent second check, also covering F16/BF16/IQ4_XS)
 *   zero      all-zero blocks per docs/formats.md §4.4
 *   threads   quant_rows: identical bytes for 1, 2, 8 and 64 threads
 *   idem      quantize -> dequantize -> requantize
 *   best      QUANT_MODE_BEST: never worse than ggml per block, deterministic
 */
#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "quant/quant.h"
#include "quant/quant_int.h"

#include "check_common.h"

static uint32_t bits(float f)
{
    uint32_t u;
    memcpy(&u, &f, 4);
    return u;
}

static void *xmalloc(size_t n)
{
    void *p = malloc(n ? n : 1);
    ck_assert_ptr_nonnull(p);
    return p;
}

static uint64_t row_bytes(uint32_t t, uint64_t n_per_row)
{
    const struct gguf_type_info *ti = gguf_type_get(t);
    ck_assert_ptr_nonnull(ti);
    return n_per_row / ti->blck * ti->type_size;
}

// --- the types under test ---

enum idem { IDEM_BYTES, IDEM_VALUES, IDEM_BOUND };

struct qcase {
    uint32_t type;
    const char *tv;       /* test-vector name, NULL if ggml's vectors lack it */
    const char *sha_plain, *sha_weighted; /* docs/formats.md §4.5 (weighted NULL: imatrix ignored) */
    const char *zero_plain, *zero_weighted; /* §4.4 block of zeros: "hh..", "hh*n" runs */
    enum idem idem_plain, idem_weighted;
};

/* Idempotence (quantize -> dequantize -> requantize) as ggml's algorithms
 * have it:
 *  - F32/F16/BF16 and the legacy round-to-nearest quantizers (no imatrix):
 *    the block's extreme element maps to the extreme level, so the scale
 *    and grid are recovered exactly and the bytes repeat.
 *  - Q8_0: the same, except that a block whose f16 scale underflows to 0
 *    (row 6 of the inputs, x1e-6) decodes to zeros whatever its quants, and
 *    requantizing zeros stores zero quants: the decoded values repeat (as
 *    numbers: -0 may come back as +0), the bytes there need not.
 *  - Everything that searches for a scale (importance-weighted legacy
 *    types, all k-quants, IQ4): the search starts from a grid derived from
 *    the data's extremes and picks among ~20 candidate scales, and the
 *    k-quants then quantize the scales themselves; on already-quantized data
 *    the first candidate is generally not the original grid, so neither
 *    bytes nor values repeat. There we bound the requantization damage per
 *    row: err(deq1, deq2) <= 4 * err(x, deq1) (weighted by the importance
 *    when quantizing with it). Measured worst on the test vectors: 2.45
 *    (IQ4_NL with imatrix); most types stay below 0.5.
 */
static const struct qcase cases[] = {
    {GGUF_TYPE_F32, NULL, NULL, NULL, "", "", IDEM_BYTES, IDEM_BYTES},
    {GGUF_TYPE_F16, NULL, "96bb68aa76107e71f6df3f9a87c66debbc90cd4b556f790f17f03d2e7baeaade", NULL,
     "", "", IDEM_BYTES, IDEM_BYTES},
    {GGUF_TYPE_BF16, NULL, "0676b8c60eae832243bbc90e4efb4ab351c0e222cf945f6e4595eba68531b6c5",
     NULL, "", "", IDEM_BYTES, IDEM_BYTES},
    {GGUF_TYPE_Q4_0, "q4_0", "1cc7401f30a0129006f1b2f8cb6b9795903bf4e2188d7a1649b038c5b6d73d40",
     "f34d7239d989cc245dd8450d11a64a8b7b2849fbae9d2ae2653da88386389123", "0080 88*16", "",
     IDEM_BYTES, IDEM_BOUND},
    {GGUF_TYPE_Q4_1, "q4_1", "64e0125a4616fb4b5230bfc92ce4d8371af19c4acc9258b8bdebb9e6f38d2fda",
     "f132a168ec1332e9d938371eb54d32b6fe16d7a4e1cab13ca6af2a6a25f8e9b7", "", "", IDEM_BYTES,
     IDEM_BOUND},
    {GGUF_TYPE_Q5_0, "q5_0", "2401d3c82e134f6b80ec3eee4badf06b1dcc2dbf09de1a9809fbbd24ab2346c6",
     "16e5b3e342a94eac69e0dbe5b3a1b17fba6147888f2a28e19cebcee0336830c3", "0080 ff*4", "",
     IDEM_BYTES, IDEM_BOUND},
    {GGUF_TYPE_Q5_1, "q5_1", "4b02b812ef367d03fe647078251e2f9a5cde0371eb46a1e8e14cefa08cdccf8c",
     "644a331a5dd57871a58c04f8688b956ff3ad345905167fd8c398d320945ebcb7", "", "", IDEM_BYTES,
     IDEM_BOUND},
    {GGUF_TYPE_Q8_0, "q8_0", "f2ba1efd98bfaa9999a5f8815afbac0a74d9010cc1d7052c41851d2edd214155",
     NULL, "", "", IDEM_VALUES, IDEM_VALUES},
    {GGUF_TYPE_Q2_K, "q2_K", "34cc36735cbcf851907fef64652e330c992ec280ca55ff353940140cea3974f6",
     "bf5e56c44342d5134075fea5b17a8ce9ea1001b10627b5f9fed081e7b6a6452c", "", "", IDEM_BOUND,
     IDEM_BOUND},
    {GGUF_TYPE_Q3_K, "q3_K", "996c3c5acad0a99ae46d06a90ce1e2956691d791ced9879d863e2118c7d13304",
     "a2dd57912b00b3338c60111404c4841d3d795b701f2476078af0e2e58309dc78", "", "", IDEM_BOUND,
     IDEM_BOUND},
    {GGUF_TYPE_Q4_K, "q4_K", "74e19030a447cf352b487b2edfce8ba08685149301bad9b135cb11969cfb47b4",
     "cd344ecb37cfcfe0b9c749df107fc7bed757dcd966c1bec6daf729e40ed34432", "", "", IDEM_BOUND,
     IDEM_BOUND},
    {GGUF_TYPE_Q5_K, "q5_K", "9761b39559bf5e47789ce82f980d816dc69bcdbc57be3c4f1392e10cceff626d",
     "17fd917c59cabdf3ff8ceec7966688df8dd8e81b5920e8b8bc4c7b39a3707e5c", "", "", IDEM_BOUND,
     IDEM_BOUND},
    {GGUF_TYPE_Q6_K, "q6_K", "970bd624f0b07e187a88632ce6ea9d4de4be04d3617907f2be3d3747464b7ff6",
     "3fce1516f2e25c08032fc92d435c83de83cb3b2bd9a67e48a17306b83d143211", "", "", IDEM_BOUND,
     IDEM_BOUND},
    {GGUF_TYPE_IQ4_NL, "iq4_nl", "225067a6337b3f8eac14d0a1473ca09599b6b123e3af592659925b002018c761",
     "2b08926e6757b625b6c4111b35ed97097c0e1912081e1fb36854060c08bf1519", "0000 88*16",
     "0000 88*16", IDEM_BOUND, IDEM_BOUND},
    {GGUF_TYPE_IQ4_XS, NULL, "1c181c62a330338c9c5d92119b174d6c445a22b4976f24cf8c2989dc3f135552",
     "5f12942b64fdfb4b223edcdbeb0ec7b7affe75ad9e8d504082cc8a99f6b04d31", "0080 aaaa 00*4 88*128",
     "0080 aaaa 00*4 88*128", IDEM_BOUND, IDEM_BOUND},
};
#define N_CASES ((int)(sizeof cases / sizeof cases[0]))

// --- SHA-256 (FIPS 180-4), for the §4.5 table ---

struct sha256 {
    uint32_t h[8];
    uint8_t buf[64];
    uint64_t len;
};

static uint32_t ror32(uint32_t x, int n) { return (x >> n) | (x << (32 - n)); }

static void sha256_block(struct sha256 *s, const uint8_t *p)
{
    static const uint32_t k[64] = {
        0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1, 0x923f82a4,
        0xab1c5ed5, 0xd807aa98, 0x12835b01, 0x243185be, 0x550c7dc3, 0x72be5d74, 0x80deb1fe,
        0x9bdc06a7, 0xc19bf174, 0xe49b69c1, 0xefbe4786, 0x0fc19dc6, 0x240ca1cc, 0x2de92c6f,
        0x4a7484aa, 0x5cb0a9dc, 0x76f988da, 0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7,
        0xc6e00bf3, 0xd5a79147, 0x06ca6351, 0x14292967, 0x27b70a85, 0x2e1b2138, 0x4d2c6dfc,
        0x53380d13, 0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85, 0xa2bfe8a1, 0xa81a664b,
        0xc24b8b70, 0xc76c51a3, 0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070, 0x19a4c116,
        0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a, 0x5b9cca4f, 0x682e6ff3,
        0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208, 0x90befffa, 0xa4506ceb, 0xbef9a3f7,
        0xc67178f2};
    uint32_t w[64], v[8];
    for (int i = 0; i < 16; i++)
        w[i] = (uint32_t)p[4 * i] << 24 | (uint32_t)p[4 * i + 1] << 16 |
               (uint32_t)p[4 * i + 2] << 8 | p[4 * i + 3];
    for (int i = 16; i < 64; i++) {
        const uint32_t s0 = ror32(w[i - 15], 7) ^ ror32(w[i - 15], 18) ^ (w[i - 15] >> 3);
        const uint32_t s1 = ror32(w[i - 2], 17) ^ ror32(w[i - 2], 19) ^ (w[i - 2] >> 10);
        w[i] = w[i - 16] + s0 + w[i - 7] + s1;
    }
    memcpy(v, s->h, sizeof v);
    for (int i = 0; i < 64; i++) {
        const uint32_t S1 = ror32(v[4], 6) ^ ror32(v[4], 11) ^ ror32(v[4], 25);
        const uint32_t ch = (v[4] & v[5]) ^ (~v[4] & v[6]);
        const uint32_t t1 = v[7] + S1 + ch + k[i] + w[i];
        const uint32_t S0 = ror32(v[0], 2) ^ ror32(v[0], 13) ^ ror32(v[0], 22);
        const uint32_t mj = (v[0] & v[1]) ^ (v[0] & v[2]) ^ (v[1] & v[2]);
        memmove(v + 1, v, 7 * sizeof v[0]);
        v[4] += t1;
        v[0] = t1 + S0 + mj;
    }
    for (int i = 0; i < 8; i++) s->h[i] += v[i];
}

/* Hex digest of p[0..n). */
static void sha256_hex(const uint8_t *p, size_t n, char out[65])
{
    struct sha256 s = {{0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a, 0x510e527f, 0x9b05688c,
                        0x1f83d9ab, 0x5be0cd19},
                       {0},
                       0};
    size_t i = 0;
    for (; i + 64 <= n; i += 64) sha256_block(&s, p + i);
    uint8_t tail[128] = {0};
    const size_t r = n - i;
    memcpy(tail, p + i, r);
    tail[r] = 0x80;
    const size_t tl = r + 9 <= 64 ? 64 : 128;
    const uint64_t bitlen = (uint64_t)n * 8;
    for (int j = 0; j < 8; j++) tail[tl - 1 - j] = (uint8_t)(bitlen >> (8 * j));
    sha256_block(&s, tail);
    if (tl == 128) sha256_block(&s, tail + 64);
    for (int j = 0; j < 8; j++) snprintf(out + 8 * j, 9, "%08x", s.h[j]);
}

START_TEST(test_sha256_self)
{
    char h[65];
    sha256_hex((const uint8_t *)"abc", 3, h);
    ck_assert_str_eq(h, "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
    sha256_hex((const uint8_t *)"", 0, h);
    ck_assert_str_eq(h, "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
    const char *m = "abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq"; /* 56 bytes */
    sha256_hex((const uint8_t *)m, strlen(m), h);
    ck_assert_str_eq(h, "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
}
END_TEST

/* Expand "0080 88*16" into bytes (n = block bytes; the rest stays 0). */
static void expand_pattern(const char *pat, uint8_t *out, size_t n)
{
    memset(out, 0, n);
    size_t pos = 0;
    const char *p = pat;
    while (*p) {
        if (*p == ' ') {
            p++;
            continue;
        }
        unsigned v;
        ck_assert_int_eq(sscanf(p, "%2x", &v), 1);
        p += 2;
        unsigned rep = 1;
        if (*p == '*') {
            char *end;
            rep = (unsigned)strtoul(p + 1, &end, 10);
            p = end;
        }
        for (unsigned i = 0; i < rep; i++) {
            ck_assert_uint_lt(pos, n);
            out[pos++] = (uint8_t)v;
        }
    }
}

// --- table basics ---

/* Every id: either no traits, or traits for exactly that id of a valid type
 * (one fork for all ids; the per-type tests below fork per type). */
START_TEST(test_traits_table)
{
    for (uint32_t t = 0; t < GGUF_TYPE_COUNT + 2; t++) {
        const struct quant_traits *q = quant_traits_get(t);
        if (!q) continue;
        ck_assert_uint_eq(q->type, t);
        ck_assert_ptr_nonnull(q->to_float);
        ck_assert_ptr_nonnull(q->from_float);
        const struct gguf_type_info *ti = gguf_type_get(t);
        ck_assert_ptr_nonnull(ti);
        ck_assert_uint_gt(ti->blck, 0);
    }
}
END_TEST

START_TEST(test_required_types)
{
    for (int i = 0; i < N_CASES; i++) ck_assert_ptr_nonnull(quant_traits_get(cases[i].type));
    ck_assert_ptr_null(quant_traits_get(4));   /* removed Q4_2 */
    ck_assert_ptr_null(quant_traits_get(GGUF_TYPE_Q8_K)); /* activations only */
    ck_assert_ptr_null(quant_traits_get(GGUF_TYPE_COUNT));
    ck_assert_ptr_null(quant_traits_get(UINT32_MAX));
}
END_TEST

START_TEST(test_f32)
{
    const uint32_t in[4] = {0x3f800000u, 0xc0000000u, 0x7fc00001u, 0x00000001u};
    uint8_t raw[1 + 16];
    for (int i = 0; i < 4; i++) mw_put_le32(raw + 1 + 4 * i, in[i]); /* unaligned on purpose */
    float out[4];
    quant_traits_get(GGUF_TYPE_F32)->to_float(raw + 1, out, 4);
    for (int i = 0; i < 4; i++) ck_assert_uint_eq(bits(out[i]), in[i]); /* bit patterns kept */
    uint8_t back[1 + 16];
    quant_traits_get(GGUF_TYPE_F32)->from_float(out, back + 1, 4, NULL);
    ck_assert_mem_eq(back + 1, raw + 1, 16);
}
END_TEST

/* All 65536 half patterns: exact values, and back through mw_f32_to_f16. */
START_TEST(test_f16_all)
{
    uint8_t *raw = xmalloc(2 * 65536 + 1);
    uint8_t *back = xmalloc(2 * 65536);
    float *out = xmalloc(sizeof(float) * 65536);
    for (uint32_t h = 0; h < 65536; h++) mw_put_le16(raw + 1 + 2 * h, (uint16_t)h);
    quant_traits_get(GGUF_TYPE_F16)->to_float(raw + 1, out, 65536);
    ck_assert_float_eq(out[0x3c00], 1.0f);
    ck_assert_float_eq(out[0xc000], -2.0f);
    ck_assert_float_eq(out[0x7bff], 65504.0f);
    ck_assert_float_eq(out[0x0001], ldexpf(1.0f, -24));
    ck_assert(isinf(out[0x7c00]) && out[0x7c00] > 0);
    ck_assert(isinf(out[0xfc00]) && out[0xfc00] < 0);
    ck_assert(isnan(out[0x7e00]));
    for (uint32_t h = 0; h < 65536; h++) {
        if (isnan(out[h])) continue;
        ck_assert_uint_eq(mw_f32_to_f16(out[h]), h);
    }
    quant_traits_get(GGUF_TYPE_F16)->from_float(out, back, 65536, NULL);
    for (uint32_t h = 0; h < 65536; h++)
        if (!isnan(out[h])) ck_assert_uint_eq(mw_le16(back + 2 * h), h);
    free(raw);
    free(back);
    free(out);
}
END_TEST

START_TEST(test_bf16_all)
{
    uint8_t *raw = xmalloc(2 * 65536);
    uint8_t *back = xmalloc(2 * 65536);
    float *out = xmalloc(sizeof(float) * 65536);
    for (uint32_t h = 0; h < 65536; h++) mw_put_le16(raw + 2 * h, (uint16_t)h);
    quant_traits_get(GGUF_TYPE_BF16)->to_float(raw, out, 65536);
    for (uint32_t h = 0; h < 65536; h++) ck_assert_uint_eq(bits(out[h]), h << 16);
    quant_traits_get(GGUF_TYPE_BF16)->from_float(out, back, 65536, NULL);
    for (uint32_t h = 0; h < 65536; h++)
        if (!isnan(out[h])) ck_assert_uint_eq(mw_le16(back + 2 * h), h);
    free(raw);
    free(back);
    free(out);
}
END_TEST

/* Q8_0: x = f32(d) * (float)q, per 34-byte block (docs/formats.md §3.3). */
START_TEST(test_q8_0)
{
    const uint16_t ds[4] = {0x3800 /* 0.5 */, 0x2e66 /* ~0.1 */, 0x8001 /* -2^-24 */, 0x0000};
    uint8_t raw[1 + 4 * 34];
    uint8_t *b = raw + 1; /* unaligned on purpose */
    for (int blk = 0; blk < 4; blk++) {
        mw_put_le16(b + 34 * blk, ds[blk]);
        for (int k = 0; k < 32; k++) b[34 * blk + 2 + k] = (uint8_t)(k * 8 + blk - 128);
    }
    float out[128];
    quant_traits_get(GGUF_TYPE_Q8_0)->to_float(b, out, 128);
    for (int blk = 0; blk < 4; blk++) {
        const float d = mw_f16_to_f32(ds[blk]);
        for (int k = 0; k < 32; k++) {
            const int8_t q = (int8_t)(uint8_t)(k * 8 + blk - 128);
            const float want = d * (float)q;
            ck_assert_uint_eq(bits(out[32 * blk + k]), bits(want));
        }
    }
    ck_assert_float_eq(out[0], 0.5f * -128.0f);
    ck_assert_float_eq(out[31], 0.5f * (float)(int8_t)(31 * 8 - 128));
}
END_TEST

/* IQ4_XS has no ggml test vectors: decode hand-built blocks by the layout of
 * docs/formats.md §3.5 (its quantizer is covered by the §4.5 hashes). */
START_TEST(test_iq4_xs_layout)
{
    uint8_t b[2 * 136];
    for (int i = 0; i < (int)sizeof b; i++) b[i] = (uint8_t)(i * 37 + 11);
    mw_put_le16(b, 0x3400);        /* d = 0.25 */
    mw_put_le16(b + 136, 0xb800);  /* d = -0.5 */
    float y[512];
    quant_traits_get(GGUF_TYPE_IQ4_XS)->to_float(b, y, 512);
    for (int blk = 0; blk < 2; blk++) {
        const uint8_t *p = b + 136 * blk;
        const float d = mw_f16_to_f32(mw_le16(p));
        const uint16_t sh = mw_le16(p + 2);
        for (int e = 0; e < 256; e++) {
            const int sb = e / 32, k = e % 32;
            const int ls =
                ((p[4 + sb / 2] >> (4 * (sb % 2))) & 0xF) | (((sh >> (2 * sb)) & 3) << 4);
            const uint8_t q = p[8 + 16 * sb + (k % 16)];
            const int idx = k < 16 ? q & 0xF : q >> 4;
            const float want = (d * (float)(ls - 32)) * (float)quant__iq4_values[idx];
            ck_assert_uint_eq(bits(y[256 * blk + e]), bits(want));
        }
    }
}
END_TEST

/* ggml's best_index_int8, transcribed: binary search for the bracketing
 * pair, ties to the upper level. */
static int ref_best_index(float x)
{
    const int8_t *val = quant__iq4_values;
    if (x <= val[0]) return 0;
    if (x >= val[15]) return 15;
    int ml = 0, mu = 15;
    while (mu - ml > 1) {
        const int mav = (ml + mu) / 2;
        if (x < val[mav]) mu = mav;
        else ml = mav;
    }
    return x - val[mu - 1] < val[mu] - x ? mu - 1 : mu;
}

/* quant__iq4_index32 (branch-free level counting) against the transcription
 * at every level, every midpoint and their float neighbours, the specials,
 * and a sweep of pseudo-random values. */
START_TEST(test_iq4_index)
{
    float v[4096];
    int n = 0;
    const float *k = quant__iq4_levels;
    for (int a = 0; a < 16; a++) {
        const float pts[2] = {k[a], a < 15 ? (k[a] + k[a + 1]) / 2 : k[a] + 5};
        for (int p = 0; p < 2; p++) {
            float lo = pts[p], hi = pts[p];
            v[n++] = pts[p];
            for (int s = 0; s < 4; s++) {
                lo = nextafterf(lo, -INFINITY);
                hi = nextafterf(hi, INFINITY);
                v[n++] = lo;
                v[n++] = hi;
            }
        }
    }
    const float specials[] = {0.0f, -0.0f, INFINITY, -INFINITY, NAN, -NAN, 1e30f, -1e30f, 1e-30f};
    for (size_t i = 0; i < sizeof specials / sizeof specials[0]; i++) v[n++] = specials[i];
    uint32_t s = 99;
    while (n < 4096) {
        s = s * 1664525u + 1013904223u;
        v[n++] = ((float)(s >> 8) / 16777216.0f - 0.5f) * 300.0f;
    }
    const float ids[3] = {1.0f, 0.37f, -2.5f};
    for (int t = 0; t < 3; t++) {
        for (int g = 0; g < n / 32; g++) {
            uint8_t idx[32];
            quant__iq4_index32(v + 32 * g, ids[t], idx);
            for (int j = 0; j < 32; j++) {
                const float a = ids[t] * v[32 * g + j];
                ck_assert_msg(idx[j] == ref_best_index(a), "value %a: index %u, ggml's %d", a,
                              idx[j], ref_best_index(a));
            }
        }
    }
}
END_TEST

// --- ggml's test vectors ---

struct blob {
    uint8_t *p;
    size_t n;
};

static struct blob tv_load(const char *name)
{
    const char *dirs[2] = {MW_DATASETS_DIR "/testvectors/", MW_SHARED_DIR "/testvectors/"};
    char path[1024];
    for (int d = 0; d < 2; d++) {
        snprintf(path, sizeof path, "%s%s", dirs[d], name);
        FILE *f = fopen(path, "rb");
        if (!f) continue;
        struct blob b = {NULL, 0};
        ck_assert_int_eq(fseek(f, 0, SEEK_END), 0);
        const long len = ftell(f);
        ck_assert_int_ge(len, 0);
        ck_assert_int_eq(fseek(f, 0, SEEK_SET), 0);
        b.n = (size_t)len;
        b.p = xmalloc(b.n);
        ck_assert_uint_eq(fread(b.p, 1, b.n, f), b.n);
        fclose(f);
        return b;
    }
    ck_abort_msg("test vector %s not found under %s or %s", name, dirs[0], dirs[1]);
    return (struct blob){NULL, 0};
}

static struct blob tv_load2(const char *type, const char *kind, const char *ext)
{
    char name[64];
    snprintf(name, sizeof name, "%s.%s.%s", type, kind, ext);
    return tv_load(name);
}

/* inputs.f32 (16 x 256) and importance.f32 (256) as host floats */
#define TV_ROWS 16
#define TV_COLS 256
static float *tv_floats(const char *name, size_t want)
{
    struct blob b = tv_load(name);
    ck_assert_uint_eq(b.n, 4 * want);
    float *f = xmalloc(b.n);
    for (size_t i = 0; i < want; i++) {
        const uint32_t u = mw_le32(b.p + 4 * i);
        memcpy(&f[i], &u, 4);
    }
    free(b.p);
    return f;
}

static const struct qcase *tv_case(int i)
{
    int k = 0;
    for (int c = 0; c < N_CASES; c++) {
        if (!cases[c].tv) continue;
        if (k++ == i) return &cases[c];
    }
    ck_abort_msg("no test-vector case %d", i);
    return NULL;
}
#define N_TV 11

START_TEST(test_tv_dequant)
{
    const struct qcase *c = tv_case(_i);
    const struct quant_traits *q = quant_traits_get(c->type);
    const char *kinds[3] = {"plain", "weighted", "random"};
    for (int k = 0; k < 3; k++) {
        struct blob bin = tv_load2(c->tv, kinds[k], "bin");
        char name[64];
        snprintf(name, sizeof name, "%s.%s.deq.f32", c->tv, kinds[k]);
        float *want = tv_floats(name, TV_ROWS * TV_COLS);
        ck_assert_uint_eq(bin.n, TV_ROWS * row_bytes(c->type, TV_COLS));
        float *got = xmalloc(sizeof(float) * TV_ROWS * TV_COLS);
        q->to_float(bin.p, got, TV_ROWS * TV_COLS);
        for (int i = 0; i < TV_ROWS * TV_COLS; i++)
            ck_assert_msg(bits(got[i]) == bits(want[i]), "%s %s: element %d: %08x, ggml %08x",
                          c->tv, kinds[k], i, bits(got[i]), bits(want[i]));
        free(got);
        free(want);
        free(bin.p);
    }
    printf("%-7s to_float: bit-exact with ggml on plain, weighted and random blocks "
           "(3 x %d values)\n",
           c->tv, TV_ROWS * TV_COLS);
    fflush(stdout);
}
END_TEST

START_TEST(test_tv_quant)
{
    const struct qcase *c = tv_case(_i);
    const struct quant_traits *q = quant_traits_get(c->type);
    float *x = tv_floats("inputs.f32", TV_ROWS * TV_COLS);
    float *imp = tv_floats("importance.f32", TV_COLS);
    const uint64_t rb = row_bytes(c->type, TV_COLS);
    const char *kinds[2] = {"plain", "weighted"};
    for (int k = 0; k < 2; k++) {
        struct blob want = tv_load2(c->tv, kinds[k], "bin");
        ck_assert_uint_eq(want.n, TV_ROWS * rb);
        uint8_t *got = xmalloc(want.n);
        memset(got, 0xA5, want.n);
        for (int r = 0; r < TV_ROWS; r++)
            q->from_float(x + TV_COLS * r, got + rb * (uint64_t)r, TV_COLS, k ? imp : NULL);
        for (size_t i = 0; i < want.n; i++)
            ck_assert_msg(got[i] == want.p[i], "%s %s: byte %zu (row %zu): %02x, ggml %02x",
                          c->tv, kinds[k], i, i / rb, got[i], want.p[i]);
        free(got);
        free(want.p);
    }
    printf("%-7s from_float: byte-exact with ggml without imatrix (quantize_row_*_ref) and "
           "with importance weights (%d x %llu bytes each)\n",
           c->tv, TV_ROWS, (unsigned long long)rb);
    fflush(stdout);
    free(x);
    free(imp);
}
END_TEST

/* Σ w_i (x_i - y_i)^2 in double (w NULL: 1) */
static double sq_err(const float *x, const float *y, const float *w, size_t n, size_t wn)
{
    double s = 0;
    for (size_t i = 0; i < n; i++) {
        const double d = (double)x[i] - (double)y[i];
        s += (w ? (double)w[i % wn] : 1.0) * d * d;
    }
    return s;
}

/* Our error on the test-vector inputs must not exceed ggml's: importance-
 * weighted error of the weighted quantization, plain error of the plain one. */
START_TEST(test_tv_error)
{
    const struct qcase *c = tv_case(_i);
    const struct quant_traits *q = quant_traits_get(c->type);
    const size_t n = TV_ROWS * TV_COLS;
    float *x = tv_floats("inputs.f32", n);
    float *imp = tv_floats("importance.f32", TV_COLS);
    const uint64_t rb = row_bytes(c->type, TV_COLS);
    uint8_t *blk = xmalloc(TV_ROWS * rb);
    float *ours = xmalloc(sizeof(float) * n);
    double e[2][2]; /* [plain/weighted][ours/ggml] */
    for (int k = 0; k < 2; k++) {
        char name[64];
        snprintf(name, sizeof name, "%s.%s.deq.f32", c->tv, k ? "weighted" : "plain");
        float *ggml = tv_floats(name, n);
        ck_assert_int_eq(quant_rows(c->type, x, TV_ROWS, TV_COLS, k ? imp : NULL, blk, 2, NULL),
                         MW_OK);
        q->to_float(blk, ours, n);
        e[k][0] = sq_err(x, ours, k ? imp : NULL, n, TV_COLS);
        e[k][1] = sq_err(x, ggml, k ? imp : NULL, n, TV_COLS);
        ck_assert_msg(e[k][0] <= e[k][1], "%s %s: error %.9g > ggml's %.9g", c->tv,
                      k ? "weighted" : "plain", e[k][0], e[k][1]);
        free(ggml);
    }
    printf("%-7s error ours/ggml: plain %.6f (%.6g / %.6g), importance-weighted %.6f "
           "(%.6g / %.6g)\n",
           c->tv, e[0][0] / e[0][1], e[0][0], e[0][1], e[1][0] / e[1][1], e[1][0], e[1][1]);
    fflush(stdout);
    free(x);
    free(imp);
    free(blk);
    free(ours);
}
END_TEST

// --- docs/formats.md §4.5 ---

#define H_ROWS 4
#define H_COLS 512

static void lcg_input(float *x, float *qw)
{
    uint32_t s = 12345;
    for (int i = 0; i < H_ROWS * H_COLS; i++) {
        s = s * 1664525u + 1013904223u;
        const int32_t v = (int32_t)(s >> 8) - 8388608;
        x[i] = (float)v / 8388608.0f;
        if (i % 37 == 0) x[i] *= 4.0f;
    }
    for (int j = 0; j < H_COLS; j++) qw[j] = 1.0f + 0.25f * (float)(j % 5);
}

START_TEST(test_hash45_input)
{
    float x[H_ROWS * H_COLS], qw[H_COLS];
    lcg_input(x, qw);
    ck_assert_float_eq(x[0], -3.8367786f);
    uint8_t raw[4 * H_ROWS * H_COLS];
    quant_traits_get(GGUF_TYPE_F32)->from_float(x, raw, H_ROWS * H_COLS, NULL);
    char h[65];
    sha256_hex(raw, sizeof raw, h);
    ck_assert_str_eq(h, "281ba2ede0cc55cde11c22a75c1925986ce7a84d62018a5deb84c80fd5273965");
}
END_TEST

START_TEST(test_hash45)
{
    const struct qcase *c = &cases[_i];
    if (!c->sha_plain) return;
    float x[H_ROWS * H_COLS], qw[H_COLS];
    lcg_input(x, qw);
    const uint64_t rb = row_bytes(c->type, H_COLS);
    uint8_t *out = xmalloc(H_ROWS * rb);
    char h[65];
    for (int w = 0; w < 2; w++) {
        ck_assert_int_eq(quant_rows(c->type, x, H_ROWS, H_COLS, w ? qw : NULL, out, 3, NULL),
                         MW_OK);
        sha256_hex(out, H_ROWS * rb, h);
        const char *want = w && c->sha_weighted ? c->sha_weighted : c->sha_plain;
        ck_assert_msg(strcmp(h, want) == 0, "type %u %s: sha256 %s, ggml %s", c->type,
                      w ? "imatrix" : "plain", h, want);
    }
    /* the first blocks printed in docs/formats.md §4.5 */
    static const struct {
        uint32_t t;
        const char *hex;
    } first[] = {
        {GGUF_TYPE_Q4_0, "ac3780a688a9aa968888788996796a967968"},
        {GGUF_TYPE_Q8_0, "bc2781e003091be600030613e2101fe40dfdf91efa1e210bfb00f2fb0ce9e517f4df"},
        {GGUF_TYPE_Q4_K,
         "221dbd2bbfea55783fd00d50df21de0940395c9d0ffa3c3c9d5e696e6f199d7c4b7f3b7f5f7d4c2c4b6c5d8a"
         "499e7b192b55553d1d2160365f5c1a53654e1df53e1b586f7a0f550d2e104a6a70292f70b7a1d58493f2a7f6"
         "95b3d383a292f7a280b4d5b3efe09094d405b393a4f2a4d0d384d8a8c0b7fc70d204ba1be4269492e13898ca"
         "e324349b71569c88b3934f54"},
        {GGUF_TYPE_Q3_K,
         "ced2a38ddfb883ebc557bc11d31eedd15bb8373060f8d71bfbdd3a91577899f760f7f0286953d434f8e15fed"
         "f137783c51a8c9883ccbd5dc52f9337337714a7fed1be663b5bdc83ee71c5000d97518692df0f0a010c5dddc"
         "2080d03c9cd48c518078727788c78b79a4ba5f8aa8a7"},
    };
    ck_assert_int_eq(quant_rows(c->type, x, H_ROWS, H_COLS, NULL, out, 1, NULL), MW_OK);
    for (size_t k = 0; k < sizeof first / sizeof first[0]; k++) {
        if (first[k].t != c->type) continue;
        const struct gguf_type_info *ti = gguf_type_get(c->type);
        ck_assert_uint_eq(strlen(first[k].hex), 2 * ti->type_size);
        for (uint32_t i = 0; i < ti->type_size; i++) {
            unsigned v;
            ck_assert_int_eq(sscanf(first[k].hex + 2 * i, "%2x", &v), 1);
            ck_assert_msg(out[i] == v, "type %u first block byte %u: %02x, ggml %02x", c->type, i,
                          out[i], v);
        }
    }
    printf("type %-2u (%s) sha256 of the 4x512 output equals docs/formats.md section 4.5, without%s "
           "imatrix\n",
           c->type, gguf_type_get(c->type)->name,
           c->sha_weighted ? " and with" : " (ignored) and with");
    fflush(stdout);
    free(out);
}
END_TEST

// --- docs/formats.md §4.4: blocks of zeros ---

START_TEST(test_zero_blocks)
{
    const struct qcase *c = &cases[_i];
    const struct quant_traits *q = quant_traits_get(c->type);
    const struct gguf_type_info *ti = gguf_type_get(c->type);
    const uint64_t n = 512, rb = row_bytes(c->type, n), nblk = n / ti->blck;
    float x[512] = {0}, qw[512];
    for (int j = 0; j < 512; j++) qw[j] = 1.0f + (float)(j % 3);
    uint8_t *got = xmalloc(rb), *want = xmalloc(ti->type_size);
    for (int w = 0; w < 2; w++) {
        memset(got, 0x5A, rb);
        q->from_float(x, got, n, w ? qw : NULL);
        expand_pattern(w ? c->zero_weighted : c->zero_plain, want, ti->type_size);
        for (uint64_t b = 0; b < nblk; b++)
            ck_assert_msg(memcmp(got + b * ti->type_size, want, ti->type_size) == 0,
                          "%s %s: zero block %llu differs", ti->name, w ? "weighted" : "plain",
                          (unsigned long long)b);
        float y[512];
        q->to_float(got, y, n);
        for (int i = 0; i < 512; i++) ck_assert(y[i] == 0.0f);
    }
    free(got);
    free(want);
}
END_TEST

// --- quant_rows: determinism across thread counts ---

START_TEST(test_threads)
{
    const struct qcase *c = &cases[_i];
    const struct quant_traits *q = quant_traits_get(c->type);
    enum { ROWS = 19, COLS = 512 }; /* 19: no thread count divides it */
    float *x = xmalloc(sizeof(float) * ROWS * COLS), qw[COLS];
    uint32_t s = 7;
    for (int i = 0; i < ROWS * COLS; i++) {
        s = s * 1664525u + 1013904223u;
        x[i] = ((float)(int32_t)(s >> 8) - 8388608.0f) / 8388608.0f * (float)(1 + i / COLS % 5);
    }
    for (int j = 0; j < COLS; j++) qw[j] = 0.5f + (float)(j % 7);
    const uint64_t rb = row_bytes(c->type, COLS);
    uint8_t *ref = xmalloc(ROWS * rb), *out = xmalloc(ROWS * rb);
    const unsigned threads[4] = {1, 2, 8, 64};
    for (int w = 0; w < 2; w++) {
        for (int r = 0; r < ROWS; r++)
            q->from_float(x + COLS * r, ref + rb * r, COLS, w ? qw : NULL);
        for (int k = 0; k < 4; k++) {
            memset(out, 0xEE, ROWS * rb);
            struct mw_err err;
            const enum mw_status st =
                quant_rows(c->type, x, ROWS, COLS, w ? qw : NULL, out, threads[k], &err);
            ck_assert_int_eq(st, MW_OK);
            ck_assert_msg(memcmp(out, ref, ROWS * rb) == 0, "%s: %u threads differ",
                          gguf_type_get(c->type)->name, threads[k]);
        }
    }
    free(x);
    free(ref);
    free(out);
}
END_TEST

START_TEST(test_rows_errors)
{
    float x[512] = {0};
    uint8_t out[4096];
    struct mw_err err;
    ck_assert_int_eq(quant_rows(GGUF_TYPE_Q4_K, x, 1, 128, NULL, out, 1, &err), MW_E_USAGE);
    ck_assert_ptr_nonnull(strstr(err.msg, "block size"));
    ck_assert_int_eq(quant_rows(GGUF_TYPE_Q4_0, x, 1, 0, NULL, out, 1, &err), MW_E_USAGE);
    ck_assert_int_eq(quant_rows(GGUF_TYPE_Q8_K, x, 1, 256, NULL, out, 1, &err), MW_E_USAGE);
    ck_assert_int_eq(quant_rows(4, x, 1, 256, NULL, out, 1, &err), MW_E_USAGE);
    ck_assert_int_eq(quant_rows(GGUF_TYPE_COUNT, x, 1, 256, NULL, out, 1, NULL), MW_E_USAGE);
    ck_assert_int_eq(quant_rows(GGUF_TYPE_Q4_0, x, UINT64_MAX / 4, 512, NULL, out, 1, &err),
                     MW_E_USAGE);
    ck_assert_int_eq(quant_rows(GGUF_TYPE_Q4_0, x, 0, 512, NULL, out, 4, &err), MW_OK);
    /* 0 threads means 1 */
    ck_assert_int_eq(quant_rows(GGUF_TYPE_Q4_0, x, 1, 512, NULL, out, 0, &err), MW_OK);
}
END_TEST

// --- QUANT_MODE_BEST ---

/* Never worse than ggml, block by block, by the error it minimizes; the
 * same bytes for every thread count. */
START_TEST(test_best_mode)
{
    const struct qcase *c = &cases[_i];
    const struct quant_traits *q = quant_traits_get(c->type);
    const struct gguf_type_info *ti = gguf_type_get(c->type);
    const size_t n = TV_ROWS * TV_COLS;
    float *x = tv_floats("inputs.f32", n);
    float *imp = tv_floats("importance.f32", TV_COLS);
    const uint64_t rb = row_bytes(c->type, TV_COLS);
    uint8_t *g = xmalloc(TV_ROWS * rb), *b1 = xmalloc(TV_ROWS * rb), *b3 = xmalloc(TV_ROWS * rb);
    float *dg = xmalloc(sizeof(float) * n), *db = xmalloc(sizeof(float) * n);
    double ratio[2];
    for (int w = 0; w < 2; w++) {
        const float *qw = w ? imp : NULL;
        ck_assert_int_eq(quant_rows(c->type, x, TV_ROWS, TV_COLS, qw, g, 1, NULL), MW_OK);
        ck_assert_int_eq(
            quant_rows_mode(c->type, QUANT_MODE_BEST, x, TV_ROWS, TV_COLS, qw, b1, 1, NULL), MW_OK);
        ck_assert_int_eq(
            quant_rows_mode(c->type, QUANT_MODE_BEST, x, TV_ROWS, TV_COLS, qw, b3, 3, NULL), MW_OK);
        ck_assert_mem_eq(b1, b3, TV_ROWS * rb);
        q->to_float(g, dg, n);
        q->to_float(b1, db, n);
        double eg = 0, eb = 0;
        for (size_t blk = 0; blk < n / ti->blck; blk++) {
            const size_t o = blk * ti->blck;
            const float *wb = qw ? qw + o % TV_COLS : NULL;
            const double e1 = sq_err(x + o, dg + o, wb, ti->blck, ti->blck);
            const double e2 = sq_err(x + o, db + o, wb, ti->blck, ti->blck);
            ck_assert_msg(e2 <= e1, "%s: block %zu error %g > ggml's %g", ti->name, blk, e2, e1);
            eg += e1;
            eb += e2;
        }
        ratio[w] = eg > 0 ? eb / eg : 1.0;
    }
    printf("%-7s QUANT_MODE_BEST error / ggml's: plain %.4f, importance-weighted %.4f\n",
           ti->name, ratio[0], ratio[1]);
    fflush(stdout);
    free(x);
    free(imp);
    free(g);
    free(b1);
    free(b3);
    free(dg);
    free(db);
}
END_TEST

START_TEST(test_best_api)
{
    float x[256] = {0};
    uint8_t out[1024];
    struct mw_err err;
    ck_assert_int_eq(quant_rows_mode(GGUF_TYPE_Q4_K, (enum quant_mode)7, x, 1, 256, NULL, out, 1,
                                     &err),
                     MW_E_USAGE);
    ck_assert_uint_eq(quant_row_best_scratch(GGUF_TYPE_Q8_K, 256), 0);
    ck_assert_uint_eq(quant_row_best_scratch(GGUF_TYPE_COUNT, 256), 0);
    ck_assert_uint_gt(quant_row_best_scratch(GGUF_TYPE_Q4_K, 256), 0);
    ck_assert_uint_eq(quant_row_best_scratch(GGUF_TYPE_Q4_K, UINT64_MAX / 2), 0);
    /* an all-zero row: every candidate is ggml's zero block */
    void *sc = xmalloc(quant_row_best_scratch(GGUF_TYPE_Q4_0, 256));
    quant_row_best(GGUF_TYPE_Q4_0, x, out, 256, NULL, sc);
    for (int b = 0; b < 8; b++) {
        ck_assert_uint_eq(mw_le16(out + 18 * b), 0x8000);
        for (int j = 0; j < 16; j++) ck_assert_uint_eq(out[18 * b + 2 + j], 0x88);
    }
    free(sc);
}
END_TEST

// --- idempotence ---

START_TEST(test_idempotence)
{
    const struct qcase *c = &cases[_i];
    const struct quant_traits *q = quant_traits_get(c->type);
    float *x = tv_floats("inputs.f32", TV_ROWS * TV_COLS);
    float *imp = tv_floats("importance.f32", TV_COLS);
    const uint64_t rb = row_bytes(c->type, TV_COLS);
    uint8_t *q1 = xmalloc(rb), *q2 = xmalloc(rb);
    float d1[TV_COLS], d2[TV_COLS];
    double worst = 0;
    for (int w = 0; w < 2; w++) {
        const float *qw = w ? imp : NULL;
        const enum idem kind = w ? c->idem_weighted : c->idem_plain;
        for (int r = 0; r < TV_ROWS; r++) {
            const float *xr = x + TV_COLS * r;
            q->from_float(xr, q1, TV_COLS, qw);
            q->to_float(q1, d1, TV_COLS);
            q->from_float(d1, q2, TV_COLS, qw);
            q->to_float(q2, d2, TV_COLS);
            if (kind == IDEM_BYTES) {
                ck_assert_msg(memcmp(q1, q2, rb) == 0, "%s %s row %d: requantized bytes differ",
                              gguf_type_get(c->type)->name, w ? "weighted" : "plain", r);
            } else if (kind == IDEM_VALUES) {
                for (int i = 0; i < TV_COLS; i++) /* == : a -0 may come back as +0 */
                    ck_assert_msg(d1[i] == d2[i], "%s %s row %d: requantized value %d differs",
                                  gguf_type_get(c->type)->name, w ? "weighted" : "plain", r, i);
            } else {
                const double e1 = sq_err(xr, d1, qw, TV_COLS, TV_COLS);
                const double e12 = sq_err(d1, d2, qw, TV_COLS, TV_COLS);
                ck_assert_msg(e12 <= 4 * e1, "%s %s row %d: requantization error %g > 4 x %g",
                              gguf_type_get(c->type)->name, w ? "weighted" : "plain", r, e12, e1);
                if (e1 > 0 && e12 / e1 > worst) worst = e12 / e1;
            }
        }
    }
    if (worst > 0) {
        printf("%-7s requantize: worst row err(deq1, deq2) / err(x, deq1) = %.3f (bound 4)\n",
               gguf_type_get(c->type)->name, worst);
        fflush(stdout);
    }
    free(x);
    free(imp);
    free(q1);
    free(q2);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("quant");
    TCase *tc = tcase_create("blocks");
    tcase_add_test(tc, test_traits_table);
    tcase_add_test(tc, test_required_types);
    tcase_add_test(tc, test_f32);
    tcase_add_test(tc, test_f16_all);
    tcase_add_test(tc, test_bf16_all);
    tcase_add_test(tc, test_q8_0);
    tcase_add_test(tc, test_iq4_xs_layout);
    tcase_add_test(tc, test_iq4_index);
    tcase_add_test(tc, test_sha256_self);
    suite_add_tcase(s, tc);

    TCase *tv = tcase_create("vectors");
    tcase_add_loop_test(tv, test_tv_dequant, 0, N_TV);
    tcase_add_loop_test(tv, test_tv_quant, 0, N_TV);
    tcase_add_loop_test(tv, test_tv_error, 0, N_TV);
    suite_add_tcase(s, tv);

    TCase *th = tcase_create("hash45");
    tcase_add_test(th, test_hash45_input);
    tcase_add_loop_test(th, test_hash45, 0, N_CASES);
    tcase_add_loop_test(th, test_zero_blocks, 0, N_CASES);
    suite_add_tcase(s, th);

    TCase *tr = tcase_create("rows");
    tcase_add_loop_test(tr, test_threads, 0, N_CASES);
    tcase_add_test(tr, test_rows_errors);
    tcase_add_loop_test(tr, test_idempotence, 0, N_CASES);
    tcase_add_loop_test(tr, test_best_mode, 0, N_CASES);
    tcase_add_test(tr, test_best_api);
    suite_add_tcase(s, tr);

    return run_suite(s);
}
