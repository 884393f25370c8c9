/* Unit tests for hf/'s conversion numerics and whole conversions: llama3
 * rope factors against the formula in double precision, the output types,
 * torch's expf bit for bit, and tinyllama-8m converted: tensor data
 * byte-identical with llama.cpp's own F16 conversion, sharded == single,
 * bf16 lossless, deterministic output, no output file on error. The
 * checkpoint reading and mapping: check_hf. */
#define _GNU_SOURCE
#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "gguf/gguf.h"
#include "hf/hf.h"
#include "hf/hf_int.h" /* hf__torch_expf */

#include "check_common.h"
#include "check_hf_common.h"

// --- kernels --------------------------------------------------------------------------

START_TEST(test_llama3_rope_factors)
{
    struct hf_config c;
    memset(&c, 0, sizeof c);
    c.head_dim = 16;
    c.rope_theta = 500000.0f;
    c.rope_factor = 8.0;
    c.rope_low_freq_factor = 1.0;
    c.rope_high_freq_factor = 4.0;
    c.rope_orig_ctx = 8192;
    float f[8];
    hf_llama3_rope_factors(&c, f);
    int n_one = 0, n_factor = 0, n_mid = 0;
    for (int i = 0; i < 8; i++) {
        /* the formula in double precision */
        double freq = 1.0 / pow(500000.0, (2.0 * i) / 16.0);
        double wl = 2.0 * M_PI / freq, want;
        if (wl < 8192.0 / 4.0) want = 1.0, n_one++;
        else if (wl > 8192.0 / 1.0) want = 8.0, n_factor++;
        else {
            double sm = (8192.0 / wl - 1.0) / 3.0;
            want = 1.0 / ((1.0 - sm) / 8.0 + sm);
            n_mid++;
        }
        ck_assert_msg(fabs(f[i] - want) <= 1e-5 * want, "factor %d: %.9g want %.9g", i,
                      (double)f[i], want);
    }
    ck_assert(n_one > 0 && n_factor > 0 && n_mid > 0); /* all three branches */
    ck_assert(f[0] == 1.0f && f[7] == 8.0f);
}
END_TEST

START_TEST(test_out_types)
{
    enum hf_out_type t;
    ck_assert(hf_out_type_parse("Q8_0", &t) && t == HF_OUT_Q8_0);
    ck_assert(hf_out_type_parse("bf16", &t) && t == HF_OUT_BF16);
    ck_assert(!hf_out_type_parse("q4_0", &t));
    ck_assert(!hf_out_type_parse("f1", &t));
    ck_assert_uint_eq(hf_out_type_ftype(HF_OUT_F32), 0);
    ck_assert_uint_eq(hf_out_type_ftype(HF_OUT_F16), 1);
    ck_assert_uint_eq(hf_out_type_ftype(HF_OUT_Q8_0), 7);
    ck_assert_uint_eq(hf_out_type_ftype(HF_OUT_BF16), 32);
}
END_TEST

// --- whole conversions of tinyllama-8m --------------------------------------------------

static char *convert_to(const char *src, const char *dir, const char *name, enum hf_out_type t)
{
    char *out = path_in(dir, name);
    struct hf_convert_opts o = {.type = t};
    struct mw_err err;
    mw_err_clear(&err);
    enum mw_status s = hf_convert(src, out, &o, &err);
    char text[1024];
    ck_assert_msg(s == MW_OK, "convert %s: %s", src, mw_err_format(&err, text, sizeof text));
    return out;
}

static struct gguf_file *open_gguf(const char *path)
{
    struct gguf_file *f = NULL;
    struct mw_err err;
    mw_err_clear(&err);
    char text[1024];
    ck_assert_msg(gguf_open(path, 0, &f, &err) == MW_OK, "%s", mw_err_format(&err, text, sizeof text));
    return f;
}

/* Number of tensors of a whose name, type, shape and bytes equal b's. */
static uint64_t same_tensors(const struct gguf_file *a, const struct gguf_file *b, char *first_diff,
                             size_t n)
{
    uint64_t same = 0;
    first_diff[0] = '\0';
    for (uint64_t i = 0; i < gguf_tensor_count(a); i++) {
        const struct gguf_tensor *ta = gguf_tensor_get(a, i);
        int64_t j = gguf_tensor_find(b, ta->name);
        bool ok = j >= 0;
        if (ok) {
            const struct gguf_tensor *tb = gguf_tensor_get(b, (uint64_t)j);
            ok = ta->type == tb->type && ta->nbytes == tb->nbytes &&
                 memcmp(ta->ne, tb->ne, sizeof ta->ne) == 0 &&
                 memcmp(gguf_tensor_data(a, i), gguf_tensor_data(b, (uint64_t)j), ta->nbytes) == 0;
        }
        if (ok) same++;
        else if (!first_diff[0]) snprintf(first_diff, n, "%s", ta->name);
    }
    return same;
}

START_TEST(test_tinyllama_f16_matches_llamacpp)
{
    char src[512], ref[512];
    ck_assert_msg(model_dir("tinyllama-8m", src, sizeof src),
                  "tinyllama-8m missing (bundled in datasets/)");
    char *dir = make_tmpdir("hf");
    char *out = convert_to(src, dir, "t.gguf", HF_OUT_F16);
    struct gguf_file *f = open_gguf(out);
    ck_assert_uint_eq(gguf_tensor_count(f), 75);
    const char *s;
    uint64_t len;
    struct mw_err err;
    mw_err_clear(&err);
    ck_assert_int_eq(gguf_get_str(f, "general.architecture", &s, &len, &err), MW_OK);
    ck_assert(len == 5 && memcmp(s, "llama", 5) == 0);
    uint32_t u;
    ck_assert_int_eq(gguf_get_u32(f, "general.file_type", &u, &err), MW_OK);
    ck_assert_uint_eq(u, 1);
    ck_assert_int_eq(gguf_get_u32(f, "llama.rope.dimension_count", &u, &err), MW_OK);
    ck_assert_uint_eq(u, 32);
    ck_assert_int_eq(gguf_get_str(f, "memwall.source_dtype", &s, &len, &err), MW_OK);
    ck_assert(len == 3 && memcmp(s, "F16", 3) == 0);
    ck_assert_int_ge(gguf_kv_find(f, "tokenizer.ggml.tokens"), 0);

    snprintf(ref, sizeof ref, "%s/reference/tinyllama-8m.llamacpp-f16.gguf", MW_DATASETS_DIR);
    if (!file_exists(ref))
        snprintf(ref, sizeof ref, "%s/models/reference/tinyllama-8m.llamacpp-f16.gguf",
                 MW_SHARED_DIR);
    ck_assert_msg(file_exists(ref), "%s missing (bundled in datasets/)", ref);
    if (file_exists(ref)) {
        struct gguf_file *r = open_gguf(ref);
        char diff[128];
        ck_assert_uint_eq(gguf_tensor_count(r), 75);
        ck_assert_msg(same_tensors(f, r, diff, sizeof diff) == 75, "first difference: %s", diff);
        for (uint64_t i = 0; i < 75; i++) /* and in the same order */
            ck_assert_str_eq(gguf_tensor_get(f, i)->name, gguf_tensor_get(r, i)->name);
        gguf_close(r);
    }
    gguf_close(f);

    /* deterministic: the same input gives the same bytes */
    char *out2 = convert_to(src, dir, "t2.gguf", HF_OUT_F16);
    size_t n1, n2;
    uint8_t *b1 = read_file(out, &n1), *b2 = read_file(out2, &n2);
    ck_assert_uint_eq(n1, n2);
    ck_assert(memcmp(b1, b2, n1) == 0);
    free(b1);
    free(b2);
    free(out);
    free(out2);
    free(dir);
}
END_TEST

static float f32_at(const uint8_t *p)
{
    uint32_t u = (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
    float x;
    memcpy(&x, &u, 4);
    return x;
}

START_TEST(test_tinyllama_sharded_and_bf16)
{
    char src[512], sharded[512], bf[512];
    ck_assert_msg(model_dir("tinyllama-8m", src, sizeof src),
                  "tinyllama-8m missing (bundled in datasets/)");
    char *dir = make_tmpdir("hf");
    char *out = convert_to(src, dir, "t.gguf", HF_OUT_F16);
    struct gguf_file *f = open_gguf(out);
    char diff[128];
    if (model_dir("tinyllama-8m-sharded", sharded, sizeof sharded)) {
        char *o2 = convert_to(sharded, dir, "s.gguf", HF_OUT_F16);
        struct gguf_file *g = open_gguf(o2);
        ck_assert_msg(same_tensors(f, g, diff, sizeof diff) == 75, "sharded differs: %s", diff);
        gguf_close(g);
        free(o2);
    } else {
        shared_input_missing("tinyllama-8m-sharded");
    }
    if (model_dir("tinyllama-8m-bf16", bf, sizeof bf)) {
        /* bf16 -> BF16: the 2-D tensors are the source bytes (permuted) */
        char *o3 = convert_to(bf, dir, "b.gguf", HF_OUT_BF16);
        struct gguf_file *g = open_gguf(o3);
        struct hf_model *m;
        struct mw_err err;
        mw_err_clear(&err);
        ck_assert_int_eq(hf_model_open(bf, &m, &err), MW_OK);
        int64_t si = hf_model_tensor_find(m, "lm_head.weight");
        int64_t gi = gguf_tensor_find(g, "output.weight");
        ck_assert(si >= 0 && gi >= 0);
        const struct hf_st_tensor *t = hf_model_tensor(m, (uint64_t)si, NULL);
        ck_assert_uint_eq(gguf_tensor_get(g, (uint64_t)gi)->type, GGUF_TYPE_BF16);
        ck_assert(memcmp(gguf_tensor_data(g, (uint64_t)gi), t->data, t->nbytes) == 0);
        gguf_close(g);

        /* bf16 -> F16: every value is f16(bf16 value) (exact for all values
         * f16 can represent); compared with the F16 checkpoint's conversion,
         * values differ only by the bf16 rounding of the source */
        char *o4 = convert_to(bf, dir, "b16.gguf", HF_OUT_F16);
        g = open_gguf(o4);
        uint64_t n_exact = 0, n_total = 0;
        for (uint64_t i = 0; i < hf_model_tensor_count(m); i++) {
            const struct hf_st_tensor *st = hf_model_tensor(m, i, NULL);
            if (strcmp(st->name, "lm_head.weight") != 0 && strcmp(st->name, "model.norm.weight") != 0)
                continue;
            int64_t j = gguf_tensor_find(g, strcmp(st->name, "lm_head.weight") == 0 ? "output.weight"
                                                                                   : "output_norm.weight");
            const struct gguf_tensor *gt = gguf_tensor_get(g, (uint64_t)j);
            const uint8_t *gd = gguf_tensor_data(g, (uint64_t)j);
            for (uint64_t e = 0; e < st->n_elems; e++) {
                uint16_t h = (uint16_t)(st->data[2 * e] | st->data[2 * e + 1] << 8);
                float want = mw_bf16_to_f32(h);
                float got = gt->type == GGUF_TYPE_F32
                                ? f32_at(gd + 4 * e)
                                : mw_f16_to_f32((uint16_t)(gd[2 * e] | gd[2 * e + 1] << 8));
                n_total++;
                if (gt->type == GGUF_TYPE_F16) /* the table path == the two-step result */
                    ck_assert_uint_eq(gd[2 * e] | gd[2 * e + 1] << 8, mw_f32_to_f16(want));
                if (got == want) n_exact++;
                else ck_assert_msg(fabsf(want) < 6.2e-5f, "%s[%llu]: %g vs %g", st->name,
                                   (unsigned long long)e, (double)got, (double)want);
            }
        }
        ck_assert_uint_gt(n_exact, n_total * 999 / 1000);
        gguf_close(g);
        hf_model_close(m);
        free(o3);
        free(o4);
    } else {
        shared_input_missing("tinyllama-8m-bf16");
    }
    {   /* f16 -> BF16 (a table too): every value is bf16(f32(f16 value)) */
        char *o5 = convert_to(src, dir, "fb.gguf", HF_OUT_BF16);
        struct gguf_file *g = open_gguf(o5);
        struct hf_model *m;
        struct mw_err err;
        mw_err_clear(&err);
        ck_assert_int_eq(hf_model_open(src, &m, &err), MW_OK);
        const struct hf_st_tensor *st =
            hf_model_tensor(m, (uint64_t)hf_model_tensor_find(m, "lm_head.weight"), NULL);
        int64_t j = gguf_tensor_find(g, "output.weight");
        ck_assert_int_ge(j, 0);
        ck_assert_uint_eq(gguf_tensor_get(g, (uint64_t)j)->type, GGUF_TYPE_BF16);
        const uint8_t *gd = gguf_tensor_data(g, (uint64_t)j);
        for (uint64_t e = 0; e < st->n_elems; e++) {
            uint16_t h = (uint16_t)(st->data[2 * e] | st->data[2 * e + 1] << 8);
            ck_assert_uint_eq(gd[2 * e] | gd[2 * e + 1] << 8, mw_f32_to_bf16(mw_f16_to_f32(h)));
        }
        gguf_close(g);
        hf_model_close(m);
        free(o5);
    }
    gguf_close(f);
    free(out);
    free(dir);
}
END_TEST

START_TEST(test_no_output_on_error)
{
    char src[512];
    ck_assert_msg(model_dir("tinyllama-8m", src, sizeof src),
                  "tinyllama-8m missing (bundled in datasets/)");
    char *dir = make_tmpdir("hf");
    char *bad = path_in(dir, "bad");
    ck_assert_int_eq(mkdir(bad, 0755), 0);
    /* a copy with a truncated safetensors file */
    const char *files[] = {"config.json", "tokenizer.model", "tokenizer_config.json",
                           "special_tokens_map.json", "model.safetensors"};
    for (size_t i = 0; i < 5; i++) {
        char *a = path_in(src, files[i]), *b = path_in(bad, files[i]);
        size_t n;
        uint8_t *d = read_file(a, &n);
        ck_assert_ptr_nonnull(d);
        if (i == 4) n -= 1000;
        write_file(b, d, n);
        free(d);
        free(a);
        free(b);
    }
    char *out = path_in(dir, "out.gguf");
    struct hf_convert_opts o = {.type = HF_OUT_F16};
    struct mw_err err;
    mw_err_clear(&err);
    ck_assert_int_eq(hf_convert(bad, out, &o, &err), MW_E_TRUNC);
    ck_assert_int_eq(mw_status_exit_code(err.code), 1);
    ck_assert(strstr(err.path, "model.safetensors") != NULL);
    ck_assert(strncmp(err.where, "tensor '", 8) == 0);
    ck_assert(!file_exists(out));
    ck_assert_int_eq(count_entries(dir), 1); /* only bad/: no temp file either */

    /* an existing output file stays intact when a conversion fails */
    write_text_in(dir, "out.gguf", "keep");
    ck_assert_int_ne(hf_convert(bad, out, &o, &err), MW_OK);
    size_t n;
    uint8_t *d = read_file(out, &n);
    ck_assert(n == 4 && memcmp(d, "keep", 4) == 0);
    free(d);
    /* an unwritable output: I/O error (exit 3) */
    ck_assert_int_eq(hf_convert(src, "/nonexistent-dir/x.gguf", &o, &err), MW_E_IO);
    ck_assert_int_eq(mw_status_exit_code(err.code), 3);
    free(out);
    free(bad);
    free(dir);
}
END_TEST

/* ssm_a = -exp(A_log): llama.cpp's converter computes exp with torch, whose
 * float32 exp is SLEEF's expf_u10 with FMA; libm's expf differs in the last
 * bit on about 1 in 130 BF16 inputs. Torch's bits (Debian's torch 1.13,
 * AVX2) for inputs where libm's differ, and the range ends. */
START_TEST(test_torch_expf)
{
    static const uint32_t v[][2] = {
        {0x3fdc0000u, 0x40b27b4eu}, {0x3ec50000u, 0x3fbc110au}, {0x42330000u, 0x5fbcc90eu},
        {0x3fa00000u, 0x405f61c8u}, {0xc2120000u, 0x2522333au}, {0xc1550000u, 0x35ddf470u},
        {0x00000000u, 0x3f800000u}, {0x3f800000u, 0x402df854u}, {0xc2cf0000u, 0x00000001u},
        {0x42b10000u, 0x7f4cdcc4u},
    };
    for (size_t i = 0; i < sizeof v / sizeof v[0]; i++) {
        float x, y;
        uint32_t got;
        memcpy(&x, &v[i][0], 4);
        y = hf__torch_expf(x);
        memcpy(&got, &y, 4);
        ck_assert_msg(got == v[i][1], "exp(%a): 0x%08x, torch 0x%08x", (double)x, got, v[i][1]);
    }
}
END_TEST

static Suite *hf_convert_suite(void)
{
    Suite *s = suite_create("hf_convert");
    TCase *tc = tcase_create("kernels");
    tcase_add_test(tc, test_llama3_rope_factors);
    tcase_add_test(tc, test_out_types);
    tcase_add_test(tc, test_torch_expf);
    suite_add_tcase(s, tc);
    tc = tcase_create("convert");
    tcase_set_timeout(tc, 30);
    tcase_add_test(tc, test_tinyllama_f16_matches_llamacpp);
    tcase_add_test(tc, test_tinyllama_sharded_and_bf16);
    tcase_add_test(tc, test_no_output_on_error);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    return run_suite(hf_convert_suite());
}
