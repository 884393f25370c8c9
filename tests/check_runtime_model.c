/*
 * Unit tests for runtime/'s model loading, tokenizers and sampling (the
 * forward pass and mixture of experts are check_runtime's): the hostile-model
 * catalogue (one fork per defect, each with its expected status and the
 * key/tensor the error names), the fixture loads, --verify finds a flipped
 * byte, truncated files; the tokenizers (llama.cpp's ids on tinyllama-8m,
 * byte fallback, special tokens, byte-level BPE round trips, the
 * pre-tokenizer regexes); the f16 helpers, sampling, chat formats and
 * perplexity on a tiny fixture.
 */
#define _GNU_SOURCE
#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "gguf/gguf.h"
#include "runtime/rt.h"
#include "runtime/rt_int.h"
#include "runtime/rt_ops.h"
#include "runtime/rt_tok_int.h"
#include "tools/rt_fixture.h"

#include "check_common.h"
#include "check_runtime_common.h"
#include "check_split.h"

// --- helpers ---

static size_t decode(const struct rt_tok *t, const int32_t *ids, size_t n, char *buf, size_t cap)
{
    size_t o = 0;
    for (size_t i = 0; i < n; i++) {
        const size_t k = rt_tok_piece(t, ids[i], false, buf + o, cap - o);
        ck_assert_uint_lt(o + k, cap);
        o += k;
    }
    buf[o] = '\0';
    return o;
}

// --- hostile models ---

START_TEST(test_hostile)
{
    const enum rt_fx_defect d = (enum rt_fx_defect)(_i + 1);
    const struct rt_fx_defect_info *di = rt_fx_defect_get(d);
    struct rt_fx_spec s;
    rt_fx_default(&s);
    s.defect = d;
    char *p = write_fixture(&s, di->name);
    struct mw_err err;
    mw_err_clear(&err);
    struct rt_model *m = NULL;
    struct rt_tok *t = NULL;
    enum mw_status st = rt_model_open(p, NULL, &m, &err);
    if (st == MW_OK) st = rt_tok_init(rt_model_gguf(m), rt_model_hparams(m)->n_vocab, &t, &err);
    char buf[1024];
    mw_err_format(&err, buf, sizeof buf);
    ck_assert_msg(st == di->code, "%s: status %s, expected %s (%s)", di->name, mw_status_name(st),
                  mw_status_name(di->code), buf);
    ck_assert_msg(strstr(err.where, di->where + 0) != NULL || strstr(buf, di->where) != NULL,
                  "%s: error '%s' does not name %s", di->name, buf, di->where);
    ck_assert_ptr_null(t);
    rt_tok_free(t);
    rt_model_close(m);
    unlink(p);
    free(p);
}
END_TEST

START_TEST(test_fixture_loads)
{
    struct rt_fx_spec s;
    rt_fx_default(&s);
    char *p = write_fixture(&s, "ok.gguf");
    struct loaded L;
    load(p, NULL, &L);
    const struct rt_hparams *hp = rt_model_hparams(L.m);
    ck_assert_uint_eq(hp->n_embd, 64);
    ck_assert_uint_eq(hp->n_layer, 2);
    ck_assert_uint_eq(hp->n_head, 2);
    ck_assert_uint_eq(hp->n_head_kv, 1);
    ck_assert_uint_eq(hp->head_dim, 32);
    ck_assert_uint_eq(hp->n_rot, 32);
    ck_assert_uint_eq(hp->n_ff, 128);
    ck_assert(!hp->tied_output);
    ck_assert(!hp->rope_neox);
    ck_assert_uint_eq(hp->n_vocab, rt_tok_n_vocab(L.t));
    ck_assert_str_eq(rt_tok_model_name(L.t), "llama");
    /* --verify: the fixture carries memwall checksums */
    uint64_t n = 0;
    struct mw_err err;
    mw_err_clear(&err);
    ck_assert_int_eq(rt_model_verify(L.m, &n, &err), MW_OK);
    ck_assert_uint_eq(n, gguf_tensor_count(rt_model_gguf(L.m)));
    unload(&L);
    unlink(p);
    free(p);
}
END_TEST

START_TEST(test_verify_detects_flip)
{
    struct rt_fx_spec s;
    rt_fx_default(&s);
    char *p = write_fixture(&s, "flip.gguf");
    /* flip one byte inside blk.1.ffn_down.weight */
    struct gguf_file *f = NULL;
    struct mw_err err;
    mw_err_clear(&err);
    ck_assert_int_eq(gguf_open(p, 0, &f, &err), MW_OK);
    const int64_t i = gguf_tensor_find(f, "blk.1.ffn_down.weight");
    ck_assert_int_ge(i, 0);
    const uint64_t off = gguf_tensor_get(f, (uint64_t)i)->file_off + 100;
    gguf_close(f);
    FILE *fp = fopen(p, "r+b");
    ck_assert_ptr_nonnull(fp);
    fseek(fp, (long)off, SEEK_SET);
    const int c = fgetc(fp);
    fseek(fp, (long)off, SEEK_SET);
    fputc(c ^ 0x10, fp);
    fclose(fp);
    struct rt_model *m = NULL;
    ck_assert_int_eq(rt_model_open(p, NULL, &m, &err), MW_OK);
    uint64_t n = 0;
    ck_assert_int_eq(rt_model_verify(m, &n, &err), MW_E_CHECKSUM);
    ck_assert_str_eq(err.where, "tensor 'blk.1.ffn_down.weight'");
    rt_model_close(m);
    /* a llama.cpp file has no memwall checksums: nothing to verify, not an error */
    ck_assert_int_eq(rt_model_open(REF_F16, NULL, &m, &err), MW_OK);
    ck_assert_int_eq(rt_model_verify(m, &n, &err), MW_OK);
    ck_assert_uint_eq(n, 0);
    rt_model_close(m);
    unlink(p);
    free(p);
}
END_TEST

/* Every gguf fuzz-corpus file and every truncation of a valid model is
 * rejected (or, for a complete valid prefix, accepted) without crashing. */
START_TEST(test_truncations)
{
    struct rt_fx_spec s;
    rt_fx_default(&s);
    s.n_layer = 1;
    char *p = write_fixture(&s, "trunc.gguf");
    FILE *fp = fopen(p, "rb");
    fseek(fp, 0, SEEK_END);
    const long size = ftell(fp);
    fseek(fp, 0, SEEK_SET);
    uint8_t *b = malloc((size_t)size);
    ck_assert_uint_eq(fread(b, 1, (size_t)size, fp), (size_t)size);
    fclose(fp);
    /* every 97th prefix, and the last few bytes */
    for (long n = 0; n < size; n += (n > size - 64 ? 1 : 97)) {
        uint8_t *cut = malloc(n ? (size_t)n : 1);
        memcpy(cut, b, (size_t)n);
        struct gguf_file *f = NULL;
        struct mw_err err;
        mw_err_clear(&err);
        if (gguf_open_mem(cut, (uint64_t)n, "cut", 0, &f, &err) == MW_OK) {
            struct rt_model *m = NULL;
            ck_assert_int_ne(rt_model_from_gguf(f, &m, &err), MW_OK);
            rt_model_close(m);
        }
        gguf_close(f);
        free(cut);
    }
    free(b);
    unlink(p);
    free(p);
}
END_TEST

// --- tokenizers ---

START_TEST(test_spm_tinyllama)
{
    struct loaded L;
    load(REF_F16, NULL, &L);
    int32_t ids[64];
    /* shared/models README: "It was a dark and stormy night, and" */
    const int32_t want[] = {1, 582, 317, 261, 1177, 278, 3811, 4032, 827, 4034, 278};
    const size_t n = encode(L.t, "It was a dark and stormy night, and", true, false, ids, 64);
    ck_assert_uint_eq(n, sizeof want / sizeof want[0]);
    for (size_t i = 0; i < n; i++) ck_assert_int_eq(ids[i], want[i]);
    char buf[256];
    decode(L.t, ids + 1, n - 1, buf, sizeof buf);
    ck_assert_str_eq(buf, " It was a dark and stormy night, and");
    /* llama-peer tokenize of "Hello world\n" (llama.cpp 80fb11ac) */
    const int32_t hello[] = {1, 460, 289, 4019, 1037, 13};
    const size_t nh = encode(L.t, "Hello world\n", true, false, ids, 64);
    ck_assert_uint_eq(nh, 6);
    for (size_t i = 0; i < nh; i++) ck_assert_int_eq(ids[i], hello[i]);
    /* byte fallback and exact round trips */
    /* (invalid UTF-8 does not round-trip in llama.cpp either: the runtime_peer
     * test compares such ids with llama.cpp's) */
    const char *texts[] = {"caf\xc3\xa9 \xe2\x82\xac 12\t\x01x", "  two  spaces ", "", "a"};
    for (size_t k = 0; k < sizeof texts / sizeof texts[0]; k++) {
        const size_t m = encode(L.t, texts[k], false, false, ids, 64);
        decode(L.t, ids, m, buf, sizeof buf);
        ck_assert_str_eq(buf + (texts[k][0] ? 1 : 0), texts[k]); /* minus the dummy prefix */
    }
    /* control tokens: literal text unless parse_special */
    size_t m = encode(L.t, "<s>x</s>", false, true, ids, 64);
    ck_assert_int_eq(ids[0], 1);
    ck_assert_int_eq(ids[m - 1], 2);
    m = encode(L.t, "<s>x</s>", false, false, ids, 64);
    for (size_t i = 0; i < m; i++) ck_assert_int_gt(ids[i], 2);
    ck_assert(rt_tok_is_eog(L.t, 2));
    ck_assert(!rt_tok_is_eog(L.t, 1));
    /* too small a buffer: MW_E_NOSPACE with the needed count */
    size_t need = 0;
    struct mw_err err;
    mw_err_clear(&err);
    ck_assert_int_eq(rt_tok_encode(L.t, "It was a dark", 13, true, false, ids, 2, &need, &err),
                     MW_E_NOSPACE);
    ck_assert_uint_eq(need, 5);
    unload(&L);
}
END_TEST

START_TEST(test_bpe_fixture)
{
    struct rt_fx_spec s;
    rt_fx_default(&s);
    s.gpt2 = true;
    s.arch = "qwen2";
    char *p = write_fixture(&s, "bpe.gguf");
    struct loaded L;
    load(p, NULL, &L);
    ck_assert_str_eq(rt_tok_model_name(L.t), "gpt2");
    ck_assert_str_eq(rt_tok_pre_name(L.t), "qwen2");
    ck_assert(!rt_tok_add_bos(L.t));
    int32_t ids[256];
    char buf[512];
    /* " the" merges to one token: Ġ t -> Ġt, h e -> he, Ġt he -> Ġthe */
    size_t n = encode(L.t, " the", true, false, ids, 256);
    ck_assert_uint_eq(n, 1);
    size_t len = 0;
    const char *txt = rt_tok_text(L.t, ids[0], &len);
    ck_assert_uint_eq(len, 5);
    ck_assert(memcmp(txt, "\xc4\xa0the", 5) == 0);
    const char *texts[] = {"It was the end, and 12345 things.\n\n  Caf\xc3\xa9 \xe2\x82\xac!",
                           "it's THE '", "\xff\xfe", "tabs\tand\r\nlines   "};
    for (size_t k = 0; k < sizeof texts / sizeof texts[0]; k++) {
        n = encode(L.t, texts[k], false, false, ids, 256);
        decode(L.t, ids, n, buf, sizeof buf);
        if (k == 2) ck_assert_str_eq(buf, "\xef\xbf\xbd\xef\xbf\xbd"); /* invalid -> U+FFFD */
        else ck_assert_str_eq(buf, texts[k]);
    }
    /* qwen2 splits digits one by one: 12345 is five tokens */
    n = encode(L.t, "12345", false, false, ids, 256);
    ck_assert_uint_eq(n, 5);
    /* special tokens */
    n = encode(L.t, "a<|im_end|>b", false, true, ids, 256);
    ck_assert_uint_eq(n, 3);
    ck_assert(rt_tok_is_eog(L.t, ids[1]));
    n = encode(L.t, "a<|im_end|>b", false, false, ids, 256);
    ck_assert_uint_gt(n, 3);
    unload(&L);
    unlink(p);
    free(p);
}
END_TEST

START_TEST(test_pretokenizers)
{
    SPLIT(RT_PRE_LLAMA3, "Hello world! It's", "Hello", " world", "!", " It", "'s");
    SPLIT(RT_PRE_LLAMA3, "12345 and 2024", "123", "45", " and", " ", "202", "4");
    SPLIT(RT_PRE_QWEN2, "12345", "1", "2", "3", "4", "5");
    SPLIT(RT_PRE_LLAMA3, "a  b", "a", " ", " b");
    SPLIT(RT_PRE_LLAMA3, "x\n\ny", "x", "\n\n", "y");
    SPLIT(RT_PRE_LLAMA3, "ok ?!\n\nz", "ok", " ?!\n\n", "z");
    SPLIT(RT_PRE_LLAMA3, "end  ", "end", "  ");
    SPLIT(RT_PRE_LLAMA3, "WE'LL", "WE", "'LL");
    SPLIT(RT_PRE_GPT2, "WE'LL", "WE", "'", "LL");
    SPLIT(RT_PRE_LLAMA3, "caf\xc3\xa9s ($5)", "caf\xc3\xa9s", " ($", "5", ")");
    SPLIT(RT_PRE_GPT2, "Hello  world 123!!", "Hello", " ", " world", " 123", "!!");
    SPLIT(RT_PRE_LLAMA3, ".Hello", ".Hello");
    SPLIT(RT_PRE_LLAMA3, "\tx", "\tx");
    SPLIT(RT_PRE_LLAMA3, "\xd0\x9f\xd1\x80\xd0\xb8 \xce\xb1\xce\xb2", "\xd0\x9f\xd1\x80\xd0\xb8",
          " \xce\xb1\xce\xb2");
}
END_TEST

// --- sampling ---

START_TEST(test_f16_helpers)
{
    /* the inline converters of the hot loops equal core's */
    for (uint32_t h = 0; h < 65536; h++) {
        const float a = rt__h2f((uint16_t)h), b = mw_f16_to_f32((uint16_t)h);
        ck_assert(memcmp(&a, &b, sizeof a) == 0 || (isnan(a) && isnan(b)));
    }
    uint64_t x = 88172645463325252ULL;
    for (uint32_t i = 0; i < 4000000; i++) {
        x ^= x << 13, x ^= x >> 7, x ^= x << 17;
        uint32_t u = (uint32_t)x;
        if (i < 1024) u = (i & 1 ? 0x80000000u : 0) | (0x33000000u + (i << 20)); /* small/edge */
        float f;
        memcpy(&f, &u, sizeof f);
        if (isnan(f)) { /* aarch64's FCVT keeps NaN payloads: any f16 NaN of that sign */
            const uint16_t h = rt__f2h(f);
            ck_assert((h & 0x7c00) == 0x7c00 && (h & 0x3ff) != 0 && (h >> 15) == (u >> 31));
            continue;
        }
        ck_assert_msg(rt__f2h(f) == mw_f32_to_f16(f), "%08x: %04x vs %04x", u, rt__f2h(f),
                      mw_f32_to_f16(f));
    }
    const float edge[] = {65504.0f, 65519.99f, 65520.0f, 1e30f, INFINITY, -INFINITY, 0.0f,
                          -0.0f, 6.1035156e-05f, 5.9604645e-08f, 2.9802322e-08f, 2.9802326e-08f};
    for (size_t i = 0; i < sizeof edge / sizeof edge[0]; i++)
        ck_assert_uint_eq(rt__f2h(edge[i]), mw_f32_to_f16(edge[i]));
}
END_TEST

START_TEST(test_sampling)
{
    float lg[100];
    for (int i = 0; i < 100; i++) lg[i] = (float)((i * 7919) % 100) / 25.0f;
    lg[42] = 10.0f;
    lg[17] = 10.0f; /* tie: the first maximum wins */
    struct rt_sampler *s = NULL;
    struct mw_err err;
    ck_assert_int_eq(rt_sampler_init(&(struct rt_sampler_opts){.temp = 0}, 100, &s, &err), MW_OK);
    ck_assert_int_eq(rt_sample(s, lg), 17);
    rt_sampler_free(s);
    ck_assert_int_eq(rt_sampler_init(&(struct rt_sampler_opts){.temp = 1, .top_k = 1, .top_p = 1},
                                     100, &s, &err), MW_OK);
    for (int i = 0; i < 10; i++) ck_assert_int_eq(rt_sample(s, lg), 17);
    rt_sampler_free(s);
    /* same seed, same sequence; min-p keeps only the two maxima */
    int32_t a[64], b[64];
    for (int r = 0; r < 2; r++) {
        ck_assert_int_eq(rt_sampler_init(&(struct rt_sampler_opts){.temp = 0.8f, .top_k = 40,
                                                                   .top_p = 0.95f, .min_p = 0.5f,
                                                                   .seed = 7}, 100, &s, &err),
                         MW_OK);
        for (int i = 0; i < 64; i++) (r ? b : a)[i] = rt_sample(s, lg);
        rt_sampler_free(s);
    }
    ck_assert(memcmp(a, b, sizeof a) == 0);
    int n17 = 0;
    for (int i = 0; i < 64; i++) {
        ck_assert(a[i] == 17 || a[i] == 42);
        n17 += a[i] == 17;
    }
    ck_assert_int_gt(n17, 10);
    ck_assert_int_lt(n17, 54);
    /* a flat distribution at high temperature visits many tokens */
    ck_assert_int_eq(rt_sampler_init(&(struct rt_sampler_opts){.temp = 1.0f, .top_p = 1.0f,
                                                               .seed = 1}, 100, &s, &err), MW_OK);
    float flat[100] = {0};
    int seen[100] = {0}, distinct = 0;
    for (int i = 0; i < 400; i++) seen[rt_sample(s, flat)]++;
    for (int i = 0; i < 100; i++) distinct += seen[i] > 0;
    ck_assert_int_gt(distinct, 80);
    rt_sampler_free(s);
    ck_assert_int_eq(rt_sampler_init(&(struct rt_sampler_opts){.temp = NAN, .top_p = 1}, 100, &s,
                                     &err), MW_E_USAGE);
    ck_assert_int_eq(rt_sampler_init(&(struct rt_sampler_opts){.temp = 1, .top_p = -1}, 100, &s,
                                     &err), MW_E_USAGE);
}
END_TEST

START_TEST(test_chat_formats)
{
    char buf[256];
    rt_chat_format(RT_CHAT_CHATML, "user", "hi", true, NULL, buf, sizeof buf);
    ck_assert_str_eq(buf, "<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n");
    rt_chat_format(RT_CHAT_CHATML, "system", "be brief", true, NULL, buf, sizeof buf);
    ck_assert_str_eq(buf, "<|im_start|>system\nbe brief<|im_end|>\n");
    rt_chat_format(RT_CHAT_LLAMA2, "user", "hi", true, "sys", buf, sizeof buf);
    ck_assert_str_eq(buf, "[INST] <<SYS>>\nsys\n<</SYS>>\n\nhi [/INST]");
    rt_chat_format(RT_CHAT_LLAMA2, "user", "again", false, "sys", buf, sizeof buf);
    ck_assert_str_eq(buf, "[INST] again [/INST]");
    rt_chat_format(RT_CHAT_LLAMA3, "user", "hi", false, NULL, buf, sizeof buf);
    ck_assert_str_eq(buf, "<|start_header_id|>user<|end_header_id|>\n\nhi<|eot_id|>"
                          "<|start_header_id|>assistant<|end_header_id|>\n\n");
    /* cut to fit, but the needed length is returned */
    const size_t need = rt_chat_format(RT_CHAT_ZEPHYR, "user", "hello", true, NULL, buf, 8);
    ck_assert_uint_eq(need, strlen("<|user|>\nhello</s>\n<|assistant|>\n"));
    ck_assert_uint_eq(strlen(buf), 7);
    ck_assert_str_eq(rt_chat_turn_end(RT_CHAT_CHATML), "<|im_end|>\n");
}
END_TEST

// --- perplexity ---

START_TEST(test_perplexity_fixture)
{
    struct rt_fx_spec s;
    rt_fx_default(&s);
    s.wtype = GGUF_TYPE_Q8_0;
    char *p = write_fixture(&s, "ppl.gguf");
    struct loaded L;
    load(p, &(struct rt_ctx_opts){.n_ctx = 32, .n_threads = 2, .n_batch = 7}, &L);
    static const char text[] =
        "It was the best of times, it was the worst of times, it was the age of wisdom, it was "
        "the age of foolishness, it was the epoch of belief, it was the epoch of incredulity.\n";
    char *lp = pid_path("rt", "ppl.logits");
    struct rt_ppl_result r1, r2;
    struct mw_err err;
    mw_err_clear(&err);
    char buf[1024];
    struct rt_ppl_opts o = {.n_ctx = 16, .save_logits = lp};
    ck_assert_msg(rt_perplexity(L.c, L.t, text, sizeof text - 1, &o, &r1, &err) == MW_OK, "%s",
                  mw_err_format(&err, buf, sizeof buf));
    ck_assert_uint_ge(r1.n_chunk, 2);
    ck_assert_uint_eq(r1.n_scored, (uint64_t)r1.n_chunk * 7);
    ck_assert(r1.ppl > 1.0 && isfinite(r1.ppl));
    /* KL divergence against our own logits is 0, with the same perplexity */
    o = (struct rt_ppl_opts){.n_ctx = 16, .kld_base = lp};
    ck_assert_int_eq(rt_perplexity(L.c, L.t, NULL, 0, &o, &r2, &err), MW_OK);
    ck_assert(r2.has_kld && r2.kld_exact);
    ck_assert_double_lt(fabs(r2.kld), 1e-9);
    ck_assert_double_eq_tol(r2.ppl, r1.ppl, 1e-6 * r1.ppl);
    ck_assert_double_eq_tol(r2.ppl_base, r1.ppl, 1e-6 * r1.ppl);
    ck_assert_double_eq(r2.same_top, 1.0);
    /* a base made with another context is refused */
    o.n_ctx = 8;
    ck_assert_int_eq(rt_perplexity(L.c, L.t, NULL, 0, &o, &r2, &err), MW_E_VALUE);
    /* too short a text */
    o = (struct rt_ppl_opts){.n_ctx = 32};
    ck_assert_int_eq(rt_perplexity(L.c, L.t, "short", 5, &o, &r2, &err), MW_E_VALUE);
    /* not a logits file */
    o = (struct rt_ppl_opts){.n_ctx = 16, .kld_base = p};
    ck_assert_int_eq(rt_perplexity(L.c, L.t, NULL, 0, &o, &r2, &err), MW_E_FORMAT);
    unload(&L);
    unlink(lp);
    unlink(p);
    free(lp);
    free(p);
}
END_TEST

static Suite *runtime_model_suite(void)
{
    Suite *s = suite_create("runtime_model");
    TCase *tc = tcase_create("model");
    tcase_add_loop_test(tc, test_hostile, 0, RT_FX_DEFECT_COUNT - 1);
    tcase_add_test(tc, test_fixture_loads);
    tcase_add_test(tc, test_verify_detects_flip);
    tcase_add_test(tc, test_truncations);
    suite_add_tcase(s, tc);
    tc = tcase_create("tokenizer");
    tcase_add_test(tc, test_spm_tinyllama);
    tcase_add_test(tc, test_bpe_fixture);
    tcase_add_test(tc, test_pretokenizers);
    suite_add_tcase(s, tc);
    tc = tcase_create("misc");
    tcase_set_timeout(tc, 30);
    tcase_add_test(tc, test_sampling);
    tcase_add_test(tc, test_f16_helpers);
    tcase_add_test(tc, test_chat_formats);
    tcase_add_test(tc, test_perplexity_fixture);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    return run_suite(runtime_model_suite());
}
