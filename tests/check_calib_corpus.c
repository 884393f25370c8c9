/* Unit tests for calib/'s input side:
 *  - corpus: text / JSONL / gzip (several members), UTF-8 validation with
 *    byte offset and line, empty corpora, malformed JSONL (line named), the
 *    decompressed-size cap;
 *  - samples on tinyllama-8m + calib.txt: the reference protocol (345
 *    samples x 257 positions, BOS first), llama-imatrix chunking, first-N
 *    selection, clamping, too-short corpora; the prompt of reference.json
 *    tokenizes to its ids.
 * The forward pass, imatrix files and memory bounds are check_calib's. */
#define _GNU_SOURCE
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#include "calib/calib.h"
#include "calib/calib_int.h"

#define TINY_DIR MW_DATASETS_DIR "/tinyllama-8m"
#define CALIB_TXT MW_DATASETS_DIR "/corpora/calib.txt"
#include "check_calib_common.h"
#include "check_common.h"

// --- helpers ---

static struct calib_corpus *parse_ok(const char *s, size_t n, const char *name,
                                     enum calib_corpus_fmt f)
{
    struct calib_corpus *c = NULL;
    struct mw_err err;
    mw_err_clear(&err);
    const enum mw_status st = calib_corpus_parse(s, n, name, f, &c, &err);
    ck_assert_msg(st == MW_OK, "parse failed: %s / %s", err.msg, err.where);
    return c;
}

static enum mw_status parse_err(const char *s, size_t n, const char *name, enum calib_corpus_fmt f,
                                struct mw_err *err)
{
    struct calib_corpus *c = NULL;
    mw_err_clear(err);
    const enum mw_status st = calib_corpus_parse(s, n, name, f, &c, err);
    ck_assert_ptr_null(c);
    return st;
}

static uint8_t *gzip_mem(const void *d, size_t n, size_t *out_n)
{
    z_stream zs;
    memset(&zs, 0, sizeof zs);
    ck_assert_int_eq(deflateInit2(&zs, 6, Z_DEFLATED, 31, 8, Z_DEFAULT_STRATEGY), Z_OK);
    const size_t cap = deflateBound(&zs, (uLong)n) + 64;
    uint8_t *o = malloc(cap);
    zs.next_in = (Bytef *)(uintptr_t)d;
    zs.avail_in = (uInt)n;
    zs.next_out = o;
    zs.avail_out = (uInt)cap;
    ck_assert_int_eq(deflate(&zs, Z_FINISH), Z_STREAM_END);
    *out_n = cap - zs.avail_out;
    deflateEnd(&zs);
    return o;
}

// --- corpus ---

START_TEST(corpus_text)
{
    const char t[] = "Hello world.\nSecond line.\n";
    struct calib_corpus *c = parse_ok(t, sizeof t - 1, "a.txt", CALIB_CORPUS_AUTO);
    ck_assert_int_eq(calib_corpus_format(c), CALIB_CORPUS_TEXT);
    ck_assert(!calib_corpus_gzip(c));
    ck_assert_uint_eq(calib_corpus_doc_count(c), 1);
    size_t n;
    const char *d = calib_corpus_doc(c, 0, &n);
    ck_assert_uint_eq(n, sizeof t - 1);
    ck_assert(memcmp(d, t, n) == 0);
    calib_corpus_free(c);
}
END_TEST

START_TEST(corpus_empty)
{
    struct mw_err err;
    ck_assert_int_eq(parse_err("", 0, "e.txt", CALIB_CORPUS_AUTO, &err), MW_E_VALUE);
    ck_assert_ptr_nonnull(strstr(err.msg, "empty corpus"));
    ck_assert_int_eq(parse_err(" \n\t\r\n", 5, "e.txt", CALIB_CORPUS_TEXT, &err), MW_E_VALUE);
    ck_assert_int_eq(parse_err("\n  \n", 4, "e.jsonl", CALIB_CORPUS_AUTO, &err), MW_E_VALUE);
    ck_assert_int_eq(parse_err("{\"text\":\"\"}\n", 12, "e.jsonl", CALIB_CORPUS_AUTO, &err),
                     MW_E_VALUE);
    ck_assert_str_eq(err.path, "e.jsonl");
}
END_TEST

/* invalid UTF-8 sequences: each must be found at its offset */
static const struct {
    const char *s;
    size_t n, bad;
} utf8_cases[] = {
    {"ok", 2, 2},
    {"a\x80", 2, 1},                 /* stray continuation */
    {"ab\xC0\xAF", 4, 2},            /* overlong '/' */
    {"\xE0\x80\xAF", 3, 0},          /* overlong 3-byte */
    {"x\xED\xA0\x80", 4, 1},         /* surrogate U+D800 */
    {"\xF4\x90\x80\x80", 4, 0},      /* above U+10FFFF */
    {"\xF0\x9F\x98\x80!", 5, 5},     /* emoji: valid */
    {"\xE4\xB8\xAD\xE6\x96", 5, 3},  /* truncated at the end */
    {"\xC3\xA9\xFF", 3, 2},          /* 0xFF never valid */
};

START_TEST(corpus_utf8)
{
    const size_t r =
        calib__utf8_check((const uint8_t *)utf8_cases[_i].s, utf8_cases[_i].n);
    ck_assert_uint_eq(r, utf8_cases[_i].bad);
}
END_TEST

START_TEST(corpus_bad_utf8_text)
{
    const char t[] = "line one\nline two\nbad \xC3( here\n";
    struct mw_err err;
    ck_assert_int_eq(parse_err(t, sizeof t - 1, "b.txt", CALIB_CORPUS_AUTO, &err), MW_E_FORMAT);
    ck_assert_uint_eq(err.off, 22);
    ck_assert_str_eq(err.where, "line 3");
    ck_assert_str_eq(err.path, "b.txt");
    ck_assert_ptr_nonnull(strstr(err.msg, "UTF-8"));
}
END_TEST

START_TEST(corpus_jsonl)
{
    const char t[] = "{\"text\": \"first doc\", \"id\": 1}\n"
                     "\n"
                     "   \r\n"
                     "{\"id\": 2, \"text\": \"caf\\u00e9 \\ud83d\\ude00 tab\\tnl\\n\"}\r\n"
                     "{\"text\": \"last, no newline\"}";
    struct calib_corpus *c = parse_ok(t, sizeof t - 1, "d.jsonl", CALIB_CORPUS_AUTO);
    ck_assert_int_eq(calib_corpus_format(c), CALIB_CORPUS_JSONL);
    ck_assert_uint_eq(calib_corpus_doc_count(c), 3);
    size_t n;
    const char *d = calib_corpus_doc(c, 1, &n);
    const char want[] = "caf\xC3\xA9 \xF0\x9F\x98\x80 tab\tnl\n";
    ck_assert_uint_eq(n, sizeof want - 1);
    ck_assert(memcmp(d, want, n) == 0);
    ck_assert_uint_eq(calib_corpus_doc_line(c, 0), 1);
    ck_assert_uint_eq(calib_corpus_doc_line(c, 1), 4);
    ck_assert_uint_eq(calib_corpus_doc_line(c, 2), 5);
    d = calib_corpus_doc(c, 2, &n);
    ck_assert(n == 16 && memcmp(d, "last, no newline", 16) == 0);
    calib_corpus_free(c);
}
END_TEST

static const struct {
    const char *s;
    const char *where;
    const char *msg;
} jsonl_bad[] = {
    {"{\"text\":\"a\"}\n{\"txt\":\"b\"}\n", "line 2", "no \"text\""},
    {"{\"text\":\"a\"}\n[1,2]\n", "line 2", "JSON object"},
    {"{\"text\": 5}\n", "line 1", "not a string"},
    {"{\"text\":\"a\"} x\n", "line 1", "trailing"},
    {"\n\n{\"text\":\"a\"\n", "line 3", "not valid JSON"},
    {"{\"text\":\"a\\ud800\"}\n", "line 1", ""},
    {"{\"text\":\"\xC3\"}\n", "line 1", "UTF-8"},
};

START_TEST(corpus_jsonl_bad)
{
    struct mw_err err;
    const char *s = jsonl_bad[_i].s;
    ck_assert_int_eq(parse_err(s, strlen(s), "x.jsonl", CALIB_CORPUS_AUTO, &err), MW_E_FORMAT);
    ck_assert_msg(strncmp(err.where, jsonl_bad[_i].where, strlen(jsonl_bad[_i].where)) == 0,
                  "where '%s', want '%s'", err.where, jsonl_bad[_i].where);
    ck_assert_msg(strstr(err.msg, jsonl_bad[_i].msg), "msg '%s'", err.msg);
    ck_assert(err.off != MW_ERR_OFF_NONE);
}
END_TEST

START_TEST(corpus_gzip)
{
    const char t[] = "{\"text\":\"one\"}\n{\"text\":\"two\"}\n";
    size_t gz_n;
    uint8_t *gz = gzip_mem(t, sizeof t - 1, &gz_n);
    /* two members back to back = the concatenation */
    uint8_t *two = malloc(2 * gz_n);
    memcpy(two, gz, gz_n);
    memcpy(two + gz_n, gz, gz_n);
    struct calib_corpus *c = parse_ok((const char *)two, 2 * gz_n, "d.jsonl.gz", CALIB_CORPUS_AUTO);
    ck_assert(calib_corpus_gzip(c));
    ck_assert_int_eq(calib_corpus_format(c), CALIB_CORPUS_JSONL);
    ck_assert_uint_eq(calib_corpus_doc_count(c), 4);
    ck_assert_uint_eq(calib_corpus_doc_line(c, 3), 4);
    calib_corpus_free(c);
    struct mw_err err;
    /* truncated */
    ck_assert_int_eq(parse_err((const char *)gz, gz_n - 5, "t.gz", CALIB_CORPUS_TEXT, &err),
                     MW_E_TRUNC);
    /* trailing garbage */
    uint8_t *tg = malloc(gz_n + 3);
    memcpy(tg, gz, gz_n);
    memcpy(tg + gz_n, "abc", 3);
    ck_assert_int_eq(parse_err((const char *)tg, gz_n + 3, "t.gz", CALIB_CORPUS_TEXT, &err),
                     MW_E_FORMAT);
    ck_assert_uint_eq(err.off, gz_n);
    /* corrupt deflate data */
    gz[gz_n / 2] ^= 0x55;
    const enum mw_status st = parse_err((const char *)gz, gz_n, "t.gz", CALIB_CORPUS_TEXT, &err);
    ck_assert(st == MW_E_FORMAT || st == MW_E_TRUNC);
    /* the cap */
    struct calib_corpus *cc = NULL;
    gz[gz_n / 2] ^= 0x55;
    ck_assert_int_eq(calib__corpus_parse_capped(gz, gz_n, "t.gz", CALIB_CORPUS_TEXT, 10, &cc, &err),
                     MW_E_UNSUPPORTED);
    ck_assert_ptr_null(cc);
    free(tg);
    free(two);
    free(gz);
}
END_TEST

START_TEST(corpus_load_missing)
{
    struct calib_corpus *c = NULL;
    struct mw_err err;
    mw_err_clear(&err);
    ck_assert_int_eq(calib_corpus_load("/nonexistent/corpus.txt", CALIB_CORPUS_AUTO, &c, &err),
                     MW_E_IO);
    ck_assert_str_eq(err.path, "/nonexistent/corpus.txt");
}
END_TEST

// --- samples ---

START_TEST(samples_reference_protocol)
{
    struct calib_model *m = open_model(TINY_DIR);
    struct calib_samples *s = samples_chunked(m, 0, 256, CALIB_CHUNK_BOS_PREPEND);
    ck_assert_uint_eq(calib_samples_count(s), 345);
    ck_assert_uint_eq(calib_samples_n_pos(s), 257);
    ck_assert_uint_eq(calib_samples_stream_tokens(s), 88548); /* reference.json text_tokens */
    ck_assert(calib_samples_exhausted(s));
    struct calib_samples *l = samples_chunked(m, 0, 256, CALIB_CHUNK_LLAMACPP);
    ck_assert_uint_eq(calib_samples_count(l), 345);
    ck_assert_uint_eq(calib_samples_n_pos(l), 256);
    for (uint32_t k = 0; k < 345; k++) {
        const int32_t *a = calib_samples_tokens(s, k), *b = calib_samples_tokens(l, k);
        ck_assert_int_eq(a[0], 1);
        ck_assert_int_eq(b[0], 1);
        /* llama-imatrix's chunk k is our sample k without its last token */
        ck_assert(memcmp(a, b, 256 * sizeof(int32_t)) == 0);
    }
    /* the first N only, and tokenization stops early */
    struct calib_samples *f = samples_chunked(m, 3, 256, CALIB_CHUNK_BOS_PREPEND);
    ck_assert_uint_eq(calib_samples_count(f), 3);
    ck_assert(memcmp(calib_samples_tokens(f, 2), calib_samples_tokens(s, 2), 257 * 4) == 0);
    /* clamped to the context (512): BOS + 511 */
    struct calib_samples *c = samples_chunked(m, 2, 5000, CALIB_CHUNK_BOS_PREPEND);
    ck_assert_uint_eq(calib_samples_seq_len(c), 511);
    ck_assert_uint_eq(calib_samples_n_pos(c), 512);
    calib_samples_free(c);
    calib_samples_free(f);
    calib_samples_free(l);
    calib_samples_free(s);
    calib_model_close(m);
}
END_TEST

START_TEST(samples_prompt_tokens)
{
    /* reference.json: "It was a dark and stormy night, and" with BOS */
    static const int32_t want[] = {1, 582, 317, 261, 1177, 278, 3811, 4032, 827, 4034, 278};
    struct calib_model *m = open_model(TINY_DIR);
    const char p[] = "It was a dark and stormy night, and";
    struct calib_corpus *c = parse_ok(p, sizeof p - 1, "p.txt", CALIB_CORPUS_TEXT);
    struct calib_samples *s = NULL;
    struct mw_err err;
    mw_err_clear(&err);
    const struct calib_sample_opts o = {.n_samples = 1, .seq_len = 10};
    ck_assert_int_eq(calib_samples_build(c, calib_model_tok(m), &o, &s, &err), MW_OK);
    ck_assert_uint_eq(calib_samples_n_pos(s), 11);
    ck_assert(memcmp(calib_samples_tokens(s, 0), want, sizeof want) == 0);
    calib_samples_free(s);
    /* one token too few for a sample */
    const struct calib_sample_opts o2 = {.n_samples = 1, .seq_len = 11};
    ck_assert_int_eq(calib_samples_build(c, calib_model_tok(m), &o2, &s, &err), MW_E_VALUE);
    ck_assert_ptr_nonnull(strstr(err.msg, "10 tokens"));
    ck_assert_ptr_null(s);
    calib_corpus_free(c);
    calib_model_close(m);
}
END_TEST

static Suite *calib_corpus_suite(void)
{
    Suite *s = suite_create("calib_corpus");
    TCase *tc = tcase_create("corpus");
    tcase_add_test(tc, corpus_text);
    tcase_add_test(tc, corpus_empty);
    tcase_add_loop_test(tc, corpus_utf8, 0, sizeof utf8_cases / sizeof utf8_cases[0]);
    tcase_add_test(tc, corpus_bad_utf8_text);
    tcase_add_test(tc, corpus_jsonl);
    tcase_add_loop_test(tc, corpus_jsonl_bad, 0, sizeof jsonl_bad / sizeof jsonl_bad[0]);
    tcase_add_test(tc, corpus_gzip);
    tcase_add_test(tc, corpus_load_missing);
    suite_add_tcase(s, tc);

    tc = tcase_create("samples");
    tcase_set_timeout(tc, 30);
    tcase_add_test(tc, samples_reference_protocol);
    tcase_add_test(tc, samples_prompt_tokens);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    return run_suite(calib_corpus_suite());
}
