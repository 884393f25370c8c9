/* Unit tests for the SentencePiece side of hf/'s tokenizers (hf_tok_spm.c
 * and the directory loader over a tokenizer.model):
 *  - tinyllama-8m's tokenizer -> tokenizer.* KVs equal, key by key (name,
 *    type, value, order), those of llama.cpp's own conversion;
 *  - a catalogue of hand-made protobuf inputs (truncations, groups, bad wire
 *    types, long varints, lying lengths, nested overruns), each with its
 *    expected status and byte offset; truncations and seeded random byte
 *    corruption of the real tokenizer.model;
 *  - hf_tok_load on a synthetic SentencePiece checkpoint directory (side
 *    files, added tokens, special ids, add_bos/add_eos, chat templates,
 *    bad input).
 * tokenizer.json is check_hf_tok_json.c's. */
#define _GNU_SOURCE
#include <check.h>
#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "gguf/gguf.h"
#include "hf/hf_tok.h"

#include "check_common.h"
#include "check_hf_tok_common.h"

/* bundled in datasets/: a missing file is a broken checkout (a failure) */
#define TINY_DIR MW_DATASETS_DIR "/tinyllama-8m"
#define TINY_REF MW_DATASETS_DIR "/reference/tinyllama-8m.llamacpp-f16.gguf"

/* ------------------------------------------------------------------ */
/* tinyllama vs llama.cpp                                             */

START_TEST(tinyllama_matches_llamacpp)
{
    ck_assert_msg(file_exists(TINY_DIR "/tokenizer.model") && file_exists(TINY_REF),
                  "%s/tokenizer.model or %s missing (bundled in datasets/)", TINY_DIR, TINY_REF);
    struct mw_err err;
    mw_err_clear(&err);
    struct hf_tok *t = NULL;
    char buf[1024];
    ck_assert_msg(hf_tok_load(TINY_DIR, &t, &err) == MW_OK, "%s",
                  mw_err_format(&err, buf, sizeof buf));
    ck_assert_str_eq(hf_tok_model(t), "llama");
    ck_assert_str_eq(hf_tok_pre(t), "default");
    ck_assert_uint_eq(hf_tok_n_vocab(t), 4096);
    ck_assert_int_eq(hf_tok_bos_id(t), 1);
    ck_assert_int_eq(hf_tok_eos_id(t), 2);
    ck_assert_int_eq(hf_tok_add_bos(t), 1);
    ck_assert_int_eq(hf_tok_add_eos(t), 0);
    ck_assert_int_eq(hf_tok_special_id(t, HF_TOK_UNK), -1); /* llama.cpp leaves it out */
    size_t len;
    ck_assert_str_eq(hf_tok_token(t, 13, &len), "<0x0A>");
    ck_assert_int_eq(hf_tok_token_type(t, 13), 6);
    ck_assert_int_eq(hf_tok_token_type(t, 0), 3); /* added_tokens_decoder: special */
    ck_assert(hf_tok_score(t, 1) == -1000.0f);

    char *dir = make_tmpdir("hftok");
    char path[1024];
    snprintf(path, sizeof path, "%s/out.gguf", dir);
    struct gguf_file *ours = tok_to_gguf(t, path);
    struct gguf_file *ref = NULL;
    ck_assert_int_eq(gguf_open(TINY_REF, 0, &ref, &err), MW_OK);
    assert_tok_kvs_equal(ref, ours);
    gguf_close(ref);
    gguf_close(ours);
    hf_tok_free(t);
    rm_rf(dir);
    free(dir);
}
END_TEST

/* ------------------------------------------------------------------ */
/* protobuf                                                           */

struct pbuf {
    uint8_t b[512];
    size_t n;
};

static void pb_raw(struct pbuf *p, const void *d, size_t n)
{
    ck_assert_uint_le(p->n + n, sizeof p->b);
    memcpy(p->b + p->n, d, n);
    p->n += n;
}
static void pb_byte(struct pbuf *p, uint8_t v) { pb_raw(p, &v, 1); }
static void pb_varint(struct pbuf *p, uint64_t v)
{
    do {
        uint8_t c = v & 0x7f;
        v >>= 7;
        if (v) c |= 0x80;
        pb_byte(p, c);
    } while (v);
}
static void pb_key(struct pbuf *p, uint32_t field, unsigned wire)
{
    pb_varint(p, ((uint64_t)field << 3) | wire);
}
static void pb_bytes(struct pbuf *p, uint32_t field, const void *d, size_t n)
{
    pb_key(p, field, 2);
    pb_varint(p, n);
    pb_raw(p, d, n);
}
static void pb_float(struct pbuf *p, uint32_t field, float f)
{
    uint8_t b[4];
    uint32_t u;
    memcpy(&u, &f, 4);
    for (int i = 0; i < 4; i++) b[i] = (uint8_t)(u >> (8 * i));
    pb_key(p, field, 5);
    pb_raw(p, b, 4);
}
/* a SentencePiece message (as a top-level field 1) */
static void pb_piece(struct pbuf *p, const char *text, float score, int type,
                     const struct pbuf *extra)
{
    struct pbuf m = {.n = 0};
    pb_bytes(&m, 1, text, strlen(text));
    pb_float(&m, 2, score);
    if (type) {
        pb_key(&m, 3, 0);
        pb_varint(&m, (uint64_t)type);
    }
    if (extra) pb_raw(&m, extra->b, extra->n);
    pb_bytes(p, 1, m.b, m.n);
}

/* A small valid model: <unk>, <s>, </s>, <0x0A>, "a", with unknown fields
 * of every wire type at every level and a negative int32 (pad_id = -1). */
static void pb_small_model(struct pbuf *p)
{
    struct pbuf x = {.n = 0};
    pb_key(&x, 77, 0);
    pb_varint(&x, 12345);
    pb_key(&x, 78, 1);
    pb_raw(&x, "12345678", 8);
    pb_bytes(&x, 79, "zz", 2);
    pb_key(&x, 80, 5);
    pb_raw(&x, "1234", 4);
    p->n = 0;
    pb_raw(p, x.b, x.n);
    pb_piece(p, "<unk>", 0, 2, &x);
    pb_piece(p, "<s>", 0, 3, NULL);
    pb_piece(p, "</s>", 0, 3, NULL);
    pb_piece(p, "<0x0A>", 0, 6, NULL);
    pb_piece(p, "\xe2\x96\x81" "a", -1.5f, 0, NULL);
    struct pbuf ts = {.n = 0};
    pb_key(&ts, 3, 0);
    pb_varint(&ts, 2);
    pb_raw(&ts, x.b, x.n);
    pb_key(&ts, 43, 0);
    pb_varint(&ts, UINT64_MAX); /* pad_id = -1, 10-byte varint */
    pb_key(&ts, 200, 2);        /* extension range */
    pb_varint(&ts, 0);
    pb_bytes(p, 2, ts.b, ts.n);
    struct pbuf ns = {.n = 0};
    pb_bytes(&ns, 1, "identity", 8);
    pb_key(&ns, 3, 0);
    pb_varint(&ns, 0); /* add_dummy_prefix = false */
    pb_bytes(p, 3, ns.b, ns.n);
    pb_raw(p, x.b, x.n);
}

START_TEST(spm_small_model)
{
    struct pbuf p;
    pb_small_model(&p);
    struct mw_err err;
    mw_err_clear(&err);
    struct hf_tok *t = NULL;
    char buf[1024];
    ck_assert_msg(hf_tok_parse_spm(p.b, p.n, "mem.model", -1, &t, &err) == MW_OK, "%s",
                  mw_err_format(&err, buf, sizeof buf));
    ck_assert_uint_eq(hf_tok_n_vocab(t), 5);
    ck_assert_str_eq(hf_tok_token(t, 4, NULL), "\xe2\x96\x81" "a");
    ck_assert_int_eq(hf_tok_token_type(t, 0), 2);
    ck_assert_int_eq(hf_tok_token_type(t, 1), 3);
    ck_assert_int_eq(hf_tok_token_type(t, 3), 6);
    ck_assert_int_eq(hf_tok_token_type(t, 4), 1);
    ck_assert(hf_tok_score(t, 4) == -1.5f);
    hf_tok_free(t);

    /* n_vocab larger: [PAD<i>] type 5 score -10000; smaller: pieces dropped */
    ck_assert_int_eq(hf_tok_parse_spm(p.b, p.n, "mem.model", 7, &t, &err), MW_OK);
    ck_assert_uint_eq(hf_tok_n_vocab(t), 7);
    ck_assert_str_eq(hf_tok_token(t, 6, NULL), "[PAD6]");
    ck_assert_int_eq(hf_tok_token_type(t, 5), 5);
    ck_assert(hf_tok_score(t, 5) == -10000.0f);
    hf_tok_free(t);
    ck_assert_int_eq(hf_tok_parse_spm(p.b, p.n, "mem.model", 3, &t, &err), MW_OK);
    ck_assert_uint_eq(hf_tok_n_vocab(t), 3);
    hf_tok_free(t);

    /* add_dummy_prefix false -> tokenizer.ggml.add_space_prefix false */
    ck_assert_int_eq(hf_tok_parse_spm(p.b, p.n, "mem.model", -1, &t, &err), MW_OK);
    char *dir = make_tmpdir("hftok");
    char path[1024];
    snprintf(path, sizeof path, "%s/out.gguf", dir);
    struct gguf_file *f = tok_to_gguf(t, path);
    const int64_t i = gguf_kv_find(f, "tokenizer.ggml.add_space_prefix");
    ck_assert_int_ge(i, 0);
    bool v = true;
    ck_assert(gguf_value_as_bool(gguf_kv_value(f, (uint64_t)i), &v) && v == false);
    gguf_close(f);
    hf_tok_free(t);
    rm_rf(dir);
    free(dir);
}
END_TEST

struct pb_case {
    const char *name;
    uint8_t b[48];
    size_t n;
    enum mw_status code;
    uint64_t off;
};

/* keys: 0x0A = field 1 LEN; 0x12 = field 2 LEN; 0xA0 0x06 = field 100 VARINT */
static const struct pb_case pb_cases[] = {
    {"empty", {0}, 0, MW_E_FORMAT, 0},
    {"group start", {0x0B}, 1, MW_E_FORMAT, 0},
    {"group end", {0x0C}, 1, MW_E_FORMAT, 0},
    {"wire type 6", {0x0E}, 1, MW_E_FORMAT, 0},
    {"wire type 7", {0x0F}, 1, MW_E_FORMAT, 0},
    {"field number 0", {0x02, 0x00}, 2, MW_E_FORMAT, 0},
    {"key varint cut", {0x80}, 1, MW_E_TRUNC, 0},
    {"varint 11 bytes",
     {0xA0, 0x06, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0x01},
     13, MW_E_FORMAT, 2},
    {"varint overflows 64 bits",
     {0xA0, 0x06, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0x02},
     12, MW_E_FORMAT, 2},
    {"length past end", {0x0A, 0x05, 'a', 'b'}, 4, MW_E_TRUNC, 1},
    {"huge length", {0x0A, 0xFF, 0xFF, 0xFF, 0xFF, 0x0F}, 6, MW_E_TRUNC, 1},
    {"nested length past its message",
     {0x0A, 0x03, 0x0A, 0x05, 'a', 'x', 'x', 'x', 'x', 'x'}, 10, MW_E_TRUNC, 3},
    {"nested fixed32 past its message", {0x0A, 0x03, 0x15, 0x00, 0x00, 0x12, 0x00}, 7,
     MW_E_TRUNC, 3},
    {"pieces with wrong wire type", {0x08, 0x01}, 2, MW_E_FORMAT, 0},
    {"score with wrong wire type", {0x0A, 0x05, 0x0A, 0x01, 'a', 0x10, 0x01}, 7, MW_E_FORMAT,
     5},
    {"piece type 9", {0x0A, 0x05, 0x0A, 0x01, 'a', 0x18, 0x09}, 7, MW_E_FORMAT, 5},
    {"piece type 0", {0x0A, 0x05, 0x0A, 0x01, 'a', 0x18, 0x00}, 7, MW_E_FORMAT, 5},
    {"empty piece", {0x0A, 0x04, 0x0A, 0x00, 0x18, 0x02}, 6, MW_E_FORMAT, 0},
    {"piece without text", {0x0A, 0x02, 0x18, 0x02}, 4, MW_E_FORMAT, 0},
    {"bad byte piece", {0x0A, 0x07, 0x0A, 0x03, '<', '0', 'x', 0x18, 0x06}, 9, MW_E_FORMAT, 0},
    {"no pieces", {0x12, 0x00}, 2, MW_E_FORMAT, 0},
    {"no unknown piece", {0x0A, 0x03, 0x0A, 0x01, 'a'}, 5, MW_E_FORMAT, MW_ERR_OFF_NONE},
    {"two unknown pieces",
     {0x0A, 0x05, 0x0A, 0x01, 'a', 0x18, 0x02, 0x0A, 0x05, 0x0A, 0x01, 'b', 0x18, 0x02}, 14,
     MW_E_FORMAT, 7},
    {"trainer int32 cut", {0x12, 0x03, 0xC0, 0x02, 0xFF}, 5, MW_E_TRUNC, 4},
};

START_TEST(spm_malformed_catalogue)
{
    const struct pb_case *c = &pb_cases[_i];
    struct mw_err err;
    mw_err_clear(&err);
    struct hf_tok *t = NULL;
    const enum mw_status s = hf_tok_parse_spm(c->n ? c->b : NULL, c->n, "bad.model", -1, &t, &err);
    char buf[1024];
    mw_err_format(&err, buf, sizeof buf);
    ck_assert_msg(s == c->code, "%s: status %s, want %s (%s)", c->name, mw_status_name(s),
                  mw_status_name(c->code), buf);
    ck_assert_msg(err.off == c->off, "%s: offset %llu, want %llu (%s)", c->name,
                  (unsigned long long)err.off, (unsigned long long)c->off, buf);
    ck_assert_ptr_null(t);
    ck_assert_msg(strstr(buf, "bad.model") != NULL, "%s: message lacks the file: %s", c->name,
                  buf);
}
END_TEST

START_TEST(spm_truncated_and_garbled)
{
    size_t n = 0;
    uint8_t *orig = read_file(TINY_DIR "/tokenizer.model", &n);
    if (!orig) {
        ck_abort_msg("%s/tokenizer.model missing (bundled in datasets/)", TINY_DIR);
    }
    struct mw_err err;
    struct hf_tok *t = NULL;
    char buf[1024];
    /* A stride over the whole file plus every cut in the last 300 bytes:
     * truncated (with an offset at or before the cut), or OK when the cut falls
     * exactly between two top-level fields. */
    int n_trunc = 0, n_ok = 0;
    for (size_t cut = 1; cut < n; cut += (cut + 300 > n) ? 1 : 97) {
        mw_err_clear(&err);
        uint8_t *b = malloc(cut);
        memcpy(b, orig, cut);
        const enum mw_status s = hf_tok_parse_spm(b, cut, "cut.model", -1, &t, &err);
        free(b);
        mw_err_format(&err, buf, sizeof buf);
        if (s == MW_OK) {
            n_ok++;
            hf_tok_free(t);
            t = NULL;
            continue;
        }
        n_trunc++;
        ck_assert_msg(s == MW_E_TRUNC, "cut %zu: %s", cut, buf);
        ck_assert_msg(err.off != MW_ERR_OFF_NONE && err.off <= cut, "cut %zu: %s", cut, buf);
        ck_assert_ptr_null(t);
    }
    ck_assert_int_gt(n_trunc, 8 * n_ok);
    /* inside the first piece: its length prefix (offset 1) lies */
    mw_err_clear(&err);
    ck_assert_int_eq(hf_tok_parse_spm(orig, 5, "cut.model", -1, &t, &err), MW_E_TRUNC);
    ck_assert_uint_eq(err.off, 1);
    /* the last byte missing: normalizer_spec's length prefix (near the end)
     * claims more than is left */
    mw_err_clear(&err);
    ck_assert_int_eq(hf_tok_parse_spm(orig, n - 1, "cut.model", -1, &t, &err), MW_E_TRUNC);
    ck_assert_str_eq(err.where, "ModelProto");
    ck_assert_uint_gt(err.off, n - 40);
    /* Random corruption: any outcome but a crash; errors carry a place. */
    uint64_t rng = 0x9E3779B97F4A7C15ull;
    uint8_t *b = malloc(n);
    for (int round = 0; round < 400; round++) {
        memcpy(b, orig, n);
        const int flips = 1 + round % 4;
        for (int k = 0; k < flips; k++) {
            rng = rng * 6364136223846793005ull + 1442695040888963407ull;
            /* favour the header region and the specs at the end */
            size_t pos = (size_t)(rng >> 33) % n;
            if (round % 3 == 0) pos = n - 1 - (size_t)(rng >> 40) % (n < 200 ? n : 200);
            b[pos] = (uint8_t)(rng >> 24);
        }
        mw_err_clear(&err);
        const enum mw_status s = hf_tok_parse_spm(b, n, "garbled.model", 4096, &t, &err);
        if (s == MW_OK) {
            ck_assert_uint_eq(hf_tok_n_vocab(t), 4096);
            hf_tok_free(t);
            t = NULL;
            continue;
        }
        mw_err_format(&err, buf, sizeof buf);
        ck_assert_msg(s == MW_E_FORMAT || s == MW_E_TRUNC, "round %d: %s", round, buf);
        ck_assert_msg(err.msg[0] && strstr(buf, "garbled.model"), "round %d: %s", round, buf);
        ck_assert_ptr_null(t);
    }
    free(b);
    free(orig);
}
END_TEST

/* ------------------------------------------------------------------ */
/* checkpoint directory                                               */

START_TEST(load_spm_dir)
{
    char *dir = make_tmpdir("hftok");
    struct pbuf p;
    pb_small_model(&p);
    write_file_in(dir, "tokenizer.model", p.b, p.n);
    write_text_in(dir, "config.json", "{\"vocab_size\":8}");
    write_text_in(dir, "added_tokens.json", "{\"<extra>\": 5, \"<far>\": 99}");
    write_text_in(dir, "tokenizer_config.json",
                  "{\"add_bos_token\":true,\"add_eos_token\":true,\"added_tokens_decoder\":{"
                  "\"6\":{\"content\":\"<|im_end|>\",\"special\":false},"
                  "\"7\":{\"content\":\"\xe2\x96\x81hi\",\"special\":false}},"
                  "\"chat_template\":[{\"name\":\"default\",\"template\":\"D\"},"
                  "{\"name\":\"tool use\",\"template\":\"T\"}]}");
    write_text_in(dir, "generation_config.json", "{\"bos_token_id\": 1, \"eos_token_id\": [4, 2]}");
    struct mw_err err;
    mw_err_clear(&err);
    struct hf_tok *t = NULL;
    char buf[1024];
    ck_assert_msg(hf_tok_load(dir, &t, &err) == MW_OK, "%s", mw_err_format(&err, buf, sizeof buf));
    ck_assert_str_eq(hf_tok_model(t), "llama");
    ck_assert_uint_eq(hf_tok_n_vocab(t), 8);
    ck_assert_str_eq(hf_tok_token(t, 5, NULL), "<extra>");
    ck_assert_int_eq(hf_tok_token_type(t, 5), 4);
    ck_assert(hf_tok_score(t, 5) == -1000.0f);
    ck_assert_int_eq(hf_tok_token_type(t, 6), 3); /* looks special */
    ck_assert_str_eq(hf_tok_token(t, 7, NULL), " hi");
    ck_assert_int_eq(hf_tok_token_type(t, 7), 4);
    /* no config ids: bos from generation_config equals llama.cpp's default
     * (not written); eos = 4 differs (written); unk from the trainer spec
     * (0) equals the default */
    ck_assert_int_eq(hf_tok_bos_id(t), -1);
    ck_assert_int_eq(hf_tok_eos_id(t), 4);
    ck_assert_int_eq(hf_tok_special_id(t, HF_TOK_UNK), -1);
    ck_assert_int_eq(hf_tok_add_bos(t), 1);
    ck_assert_int_eq(hf_tok_add_eos(t), 1);
    ck_assert_str_eq(hf_tok_chat_template(t), "D");
    char path[1024];
    snprintf(path, sizeof path, "%s/out.gguf", dir);
    struct gguf_file *f = tok_to_gguf(t, path);
    const char *s = NULL;
    uint64_t len = 0;
    ck_assert_int_eq(gguf_get_str(f, "tokenizer.chat_template.tool_use", &s, &len, &err), MW_OK);
    ck_assert_uint_eq(len, 1);
    ck_assert_int_ge(gguf_kv_find(f, "tokenizer.chat_templates"), 0);
    ck_assert_int_ge(gguf_kv_find(f, "tokenizer.ggml.add_space_prefix"), 0);
    gguf_close(f);
    hf_tok_free(t);

    /* bad added_tokens_decoder key */
    write_text_in(dir, "tokenizer_config.json",
                  "{\"added_tokens_decoder\":{\"x1\":{\"content\":\"a\"}}}");
    mw_err_clear(&err);
    ck_assert_int_eq(hf_tok_load(dir, &t, &err), MW_E_FORMAT);
    ck_assert_str_eq(err.where, "added_tokens_decoder[\"x1\"]");
    /* garbled tokenizer.model through the directory loader */
    write_text_in(dir, "tokenizer_config.json", "{}");
    p.b[0] = 0x0B; /* a group */
    write_file_in(dir, "tokenizer.model", p.b, p.n);
    mw_err_clear(&err);
    ck_assert_int_ne(hf_tok_load(dir, &t, &err), MW_OK);
    ck_assert_ptr_nonnull(strstr(err.path, "tokenizer.model"));
    ck_assert_uint_ne(err.off, MW_ERR_OFF_NONE);
    /* no tokenizer at all */
    char mp[1024];
    snprintf(mp, sizeof mp, "%s/tokenizer.model", dir);
    unlink(mp);
    mw_err_clear(&err);
    ck_assert_int_eq(hf_tok_load(dir, &t, &err), MW_E_FORMAT);
    rm_rf(dir);
    free(dir);
}
END_TEST


static Suite *hf_tok_spm_suite(void)
{
    Suite *s = suite_create("hf_tok_spm");
    TCase *tc = tcase_create("spm");
    tcase_add_test(tc, tinyllama_matches_llamacpp);
    tcase_add_test(tc, spm_small_model);
    tcase_add_loop_test(tc, spm_malformed_catalogue, 0,
                        (int)(sizeof pb_cases / sizeof pb_cases[0]));
    tcase_add_test(tc, spm_truncated_and_garbled);
    tcase_set_timeout(tc, 30);
    suite_add_tcase(s, tc);
    tc = tcase_create("dirs");
    tcase_add_test(tc, load_spm_dir);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    return run_suite(hf_tok_spm_suite());
}
