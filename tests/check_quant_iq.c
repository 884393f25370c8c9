/*
 * tests/check_quant_iq.c — the i-quant block formats (IQ2_XXS IQ2_XS IQ2_S
 * IQ3_XXS IQ3_S IQ1_S IQ1_M, plus IQ4_XS's new vectors) against ggml's own
 * bytes: datasets/testvectors/<t>.* made by tests/tools/gen_iq_vectors.c
 * from the llama.cpp peer's ggml (80fb11ac). One loop test per type:
 *   dequant   to_float bit-exact on ggml's plain / weighted / random blocks
 *   quant     from_float byte-identical on the 16 x 256 inputs, with the
 *             importance weights and (where ggml can) without
 *   lcg       the docs/formats.md §4.5 LCG input, 4 x 512, both ways
 *   rows      quant_rows at 1, 2 and 5 threads equals the row-by-row bytes;
 *             a type ggml quantizes only with importance is refused without
 *   hostile   NaN / Inf / 3e38 / denormal / all-zero rows: no UB (the
 *             sanitizer build runs this), same bytes twice, zero rows decode
 *             to zeros
 */
#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/mw.h"
#include "gguf/gguf.h"
#include "quant/quant.h"

#include "check_common.h"

struct iqcase {
    uint32_t type;
    const char *tv;
    bool plain; /* ggml quantizes it without importance weights */
};

static const struct iqcase cases[] = {
    {GGUF_TYPE_IQ2_XXS, "iq2_xxs", false}, {GGUF_TYPE_IQ2_XS, "iq2_xs", false},
    {GGUF_TYPE_IQ2_S, "iq2_s", true},      {GGUF_TYPE_IQ3_XXS, "iq3_xxs", true},
    {GGUF_TYPE_IQ3_S, "iq3_s", true},      {GGUF_TYPE_IQ1_S, "iq1_s", false},
    {GGUF_TYPE_IQ1_M, "iq1_m", true},      {GGUF_TYPE_IQ4_XS, "iq4_xs", true},
};
#define N_CASES ((int)(sizeof cases / sizeof cases[0]))

#define ROWS 16
#define COLS 256

static void *xmalloc(size_t n)
{
    void *p = malloc(n ? n : 1);
    ck_assert_ptr_nonnull(p);
    return p;
}

/* The whole file datasets/testvectors/NAME (shared/testvectors as fallback). */
static uint8_t *load(const char *name, size_t *n)
{
    const char *dirs[2] = {MW_DATASETS_DIR "/testvectors/", MW_SHARED_DIR "/testvectors/"};
    for (int d = 0; d < 2; d++) {
        char path[1280];
        snprintf(path, sizeof path, "%s%s", dirs[d], name);
        FILE *f = fopen(path, "rb");
        if (!f) continue;
        ck_assert_int_eq(fseek(f, 0, SEEK_END), 0);
        const long len = ftell(f);
        ck_assert_int_ge(len, 0);
        rewind(f);
        uint8_t *p = xmalloc((size_t)len);
        ck_assert_uint_eq(fread(p, 1, (size_t)len, f), (size_t)len);
        fclose(f);
        *n = (size_t)len;
        return p;
    }
    ck_abort_msg("test vector %s not found", name);
    return NULL;
}

static uint8_t *load2(const char *tv, const char *kind, size_t *n)
{
    char name[160];
    snprintf(name, sizeof name, "%s.%s", tv, kind);
    return load(name, n);
}

static float *load_f32(const char *name, size_t want)
{
    size_t n;
    uint8_t *b = load(name, &n);
    ck_assert_uint_eq(n, 4 * want);
    float *f = xmalloc(n);
    for (size_t i = 0; i < want; i++) {
        const uint32_t u = mw_le32(b + 4 * i);
        memcpy(&f[i], &u, 4);
    }
    free(b);
    return f;
}

static uint32_t bits(float f)
{
    uint32_t u;
    memcpy(&u, &f, 4);
    return u;
}

static uint64_t row_bytes(uint32_t t, uint64_t n)
{
    const struct gguf_type_info *ti = gguf_type_get(t);
    return n / ti->blck * ti->type_size;
}

static const struct quant_traits *traits(const struct iqcase *c)
{
    const struct quant_traits *q = quant_traits_get(c->type);
    ck_assert_msg(q && q->to_float && q->from_float, "%s: no quantizer", c->tv);
    return q;
}

/* First differing byte, or -1. */
static long first_diff(const uint8_t *a, const uint8_t *b, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (a[i] != b[i]) return (long)i;
    return -1;
}

START_TEST(test_dequant)
{
    const struct iqcase *c = &cases[_i];
    const struct quant_traits *q = traits(c);
    const char *kinds[3] = {"plain", "weighted", "random"};
    for (int k = c->plain ? 0 : 1; k < 3; k++) {
        char name[96];
        snprintf(name, sizeof name, "%s.bin", kinds[k]);
        size_t n;
        uint8_t *bin = load2(c->tv, name, &n);
        ck_assert_uint_eq(n, ROWS * row_bytes(c->type, COLS));
        snprintf(name, sizeof name, "%s.%s.deq.f32", c->tv, kinds[k]);
        float *want = load_f32(name, ROWS * COLS), *got = xmalloc(sizeof(float) * ROWS * COLS);
        q->to_float(bin, got, ROWS * COLS);
        for (int i = 0; i < ROWS * COLS; i++)
            ck_assert_msg(bits(got[i]) == bits(want[i]), "%s %s: element %d: %08x, ggml %08x",
                          c->tv, kinds[k], i, bits(got[i]), bits(want[i]));
        free(got);
        free(want);
        free(bin);
    }
}
END_TEST

START_TEST(test_quant)
{
    const struct iqcase *c = &cases[_i];
    const struct quant_traits *q = traits(c);
    float *x = load_f32("inputs.f32", ROWS * COLS), *imp = load_f32("importance.f32", COLS);
    const uint64_t rb = row_bytes(c->type, COLS);
    uint8_t *got = xmalloc(ROWS * rb);
    for (int w = c->plain ? 0 : 1; w < 2; w++) {
        size_t n;
        uint8_t *want = load2(c->tv, w ? "weighted.bin" : "plain.bin", &n);
        ck_assert_uint_eq(n, ROWS * rb);
        for (int r = 0; r < ROWS; r++) q->from_float(x + r * COLS, got + r * rb, COLS, w ? imp : NULL);
        for (int r = 0; r < ROWS; r++) {
            const long d = first_diff(got + r * rb, want + r * rb, rb);
            ck_assert_msg(d < 0, "%s %s: row %d differs from ggml at byte %ld (%02x, ggml %02x)",
                          c->tv, w ? "weighted" : "plain", r, d, got[r * rb + d], want[r * rb + d]);
        }
        free(want);
    }
    free(got);
    free(x);
    free(imp);
}
END_TEST

/* docs/formats.md §4.5's LCG input and weights */
static void lcg_input(float *x, float *w)
{
    uint32_t st = 12345;
    for (int i = 0; i < 2048; i++) {
        st = st * 1664525u + 1013904223u;
        const int32_t v = (int32_t)(st >> 8) - 8388608;
        x[i] = (float)v / 8388608.0f;
        if (i % 37 == 0) x[i] *= 4.0f;
    }
    for (int j = 0; j < 512; j++) w[j] = 1.0f + 0.25f * (float)(j % 5);
}

START_TEST(test_lcg)
{
    const struct iqcase *c = &cases[_i];
    traits(c);
    float x[2048], w[512];
    lcg_input(x, w);
    const uint64_t rb = row_bytes(c->type, 512);
    uint8_t *got = xmalloc(4 * rb);
    for (int k = c->plain ? 0 : 1; k < 2; k++) {
        struct mw_err err = {0};
        ck_assert_int_eq(quant_rows(c->type, x, 4, 512, k ? w : NULL, got, 2, &err), MW_OK);
        size_t n;
        uint8_t *want = load2(c->tv, k ? "lcg.weighted.bin" : "lcg.plain.bin", &n);
        ck_assert_uint_eq(n, 4 * rb);
        const long d = first_diff(got, want, n);
        ck_assert_msg(d < 0, "%s lcg %s: differs from ggml at byte %ld", c->tv,
                      k ? "weighted" : "plain", d);
        free(want);
    }
    free(got);
}
END_TEST

START_TEST(test_rows)
{
    const struct iqcase *c = &cases[_i];
    const struct quant_traits *q = traits(c);
    float *x = load_f32("inputs.f32", ROWS * COLS), *imp = load_f32("importance.f32", COLS);
    const uint64_t rb = row_bytes(c->type, COLS);
    uint8_t *one = xmalloc(ROWS * rb), *many = xmalloc(ROWS * rb);
    for (int r = 0; r < ROWS; r++) q->from_float(x + r * COLS, one + r * rb, COLS, imp);
    const unsigned threads[3] = {1, 2, 5};
    for (int t = 0; t < 3; t++) {
        struct mw_err err = {0};
        memset(many, 0xA5, ROWS * rb);
        ck_assert_int_eq(quant_rows(c->type, x, ROWS, COLS, imp, many, threads[t], &err), MW_OK);
        ck_assert_msg(memcmp(one, many, ROWS * rb) == 0, "%s: %u threads differ", c->tv,
                      threads[t]);
    }
    struct mw_err err = {0};
    const enum mw_status st = quant_rows(c->type, x, ROWS, COLS, NULL, many, 2, &err);
    ck_assert_int_eq(q->needs_imatrix, !c->plain);
    if (c->plain) {
        ck_assert_int_eq(st, MW_OK);
    } else {
        ck_assert_int_eq(st, MW_E_USAGE);
        ck_assert_msg(strstr(err.msg, "importance") != NULL, "%s: message '%s'", c->tv, err.msg);
    }
    free(one);
    free(many);
    free(x);
    free(imp);
}
END_TEST

START_TEST(test_hostile)
{
    const struct iqcase *c = &cases[_i];
    const struct quant_traits *q = traits(c);
    const uint64_t rb = row_bytes(c->type, COLS);
    float x[COLS], w[COLS], y[COLS];
    uint8_t a[COLS * 2], b[COLS * 2];
    ck_assert_uint_le(rb, sizeof a);
    const float specials[5] = {NAN, INFINITY, 3.0e38f, 1.0e-42f, 0.0f};
    for (int s = 0; s < 5; s++) {
        for (int i = 0; i < COLS; i++) {
            x[i] = (i % 7 == 3) ? specials[s] : (float)((i * 37) % 19 - 9) * 0.125f;
            if (s == 4) x[i] = 0.0f;
            w[i] = 1.0f + (float)(i % 3);
        }
        for (int k = 0; k < 3; k++) {
            const float *qw = k == 0 ? w : (k == 1 ? NULL : x); /* x as weights: NaN/Inf too */
            q->from_float(x, a, COLS, qw);
            q->from_float(x, b, COLS, qw);
            ck_assert_msg(memcmp(a, b, rb) == 0, "%s: special %d: not deterministic", c->tv, s);
            q->to_float(a, y, COLS);
            if (s == 4 && k == 0)
                for (int i = 0; i < COLS; i++)
                    ck_assert_msg(y[i] == 0.0f, "%s: zero row decodes to %g at %d", c->tv,
                                  (double)y[i], i);
        }
    }
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("quant_iq");
    const struct {
        const char *name;
        const TTest *fn;
    } tests[] = {{"dequant", test_dequant}, {"quant", test_quant}, {"lcg", test_lcg},
                 {"rows", test_rows},       {"hostile", test_hostile}};
    for (size_t k = 0; k < sizeof tests / sizeof tests[0]; k++) {
        TCase *tc = tcase_create(tests[k].name);
        tcase_set_timeout(tc, 120);
        tcase_add_loop_test(tc, tests[k].fn, 0, N_CASES);
        suite_add_tcase(s, tc);
    }
    return s;
}

int main(void)
{
    return run_suite(suite());
}
