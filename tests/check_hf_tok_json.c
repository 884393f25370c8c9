/* Unit tests for the tokenizer.json side of hf/'s tokenizers
 * (hf_tok_json.c, hf_tok_common.c):
 *  - both merge forms give identical GGUF arrays; ids, gaps, added tokens,
 *    pre-tokenizer detection, Split forms, normalizers; malformed JSON
 *    rejected with a JSON path or line:column;
 *  - hf_tok_load on synthetic Llama-3 / Qwen2 / Gemma 4 checkpoint
 *    directories (special ids and their order, add_bos, chat templates,
 *    fallbacks).
 * SentencePiece's tokenizer.model is check_hf_tok_spm.c's. */
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

static const char LLAMA3_RX[] =
    "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+"
    "[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";
static const char QWEN2_RX[] =
    "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| ?[^\\s\\p{L}\\p{N}]+"
    "[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";


/* ------------------------------------------------------------------ */
/* tokenizer.json                                                     */

/* Build a small byte-level BPE tokenizer.json. merge_form 1: "a b"
 * strings, 2: [a, b] pairs. regex NULL: ByteLevel with use_regex. */
static char *make_tokjson(int merge_form, const char *regex, bool with_post)
{
    cJSON *root = cJSON_CreateObject();
    cJSON_AddStringToObject(root, "version", "1.0");
    cJSON *added = cJSON_AddArrayToObject(root, "added_tokens");
    static const struct {
        int id;
        const char *content;
        bool special;
    } at[] = {{9, "<|endoftext|>", true}, {10, "<|begin_of_text|>", true},
              {11, "<tool\xe2\x96\x81" "call>", false}, {12, "<|im_x|>", false}};
    for (size_t i = 0; i < sizeof at / sizeof at[0]; i++) {
        cJSON *a = cJSON_CreateObject();
        cJSON_AddNumberToObject(a, "id", at[i].id);
        cJSON_AddStringToObject(a, "content", at[i].content);
        cJSON_AddBoolToObject(a, "single_word", false);
        cJSON_AddBoolToObject(a, "lstrip", false);
        cJSON_AddBoolToObject(a, "rstrip", false);
        cJSON_AddBoolToObject(a, "normalized", false);
        cJSON_AddBoolToObject(a, "special", at[i].special);
        cJSON_AddItemToArray(added, a);
    }
    cJSON_AddNullToObject(root, "normalizer");
    cJSON *pt = cJSON_AddObjectToObject(root, "pre_tokenizer");
    cJSON *bl = cJSON_CreateObject();
    cJSON_AddStringToObject(bl, "type", "ByteLevel");
    cJSON_AddBoolToObject(bl, "add_prefix_space", false);
    cJSON_AddBoolToObject(bl, "trim_offsets", true);
    cJSON_AddBoolToObject(bl, "use_regex", regex == NULL);
    if (regex) {
        cJSON_AddStringToObject(pt, "type", "Sequence");
        cJSON *items = cJSON_AddArrayToObject(pt, "pretokenizers");
        cJSON *sp = cJSON_CreateObject();
        cJSON_AddStringToObject(sp, "type", "Split");
        cJSON *pat = cJSON_AddObjectToObject(sp, "pattern");
        cJSON_AddStringToObject(pat, "Regex", regex);
        cJSON_AddStringToObject(sp, "behavior", "Isolated");
        cJSON_AddBoolToObject(sp, "invert", false);
        cJSON_AddItemToArray(items, sp);
        cJSON_AddItemToArray(items, bl);
    } else {
        cJSON_DeleteItemFromObject(root, "pre_tokenizer");
        cJSON_AddItemToObject(root, "pre_tokenizer", bl);
    }
    if (with_post) {
        /* Llama 3: single = [<|begin_of_text|>, A], pair = [bot, A, bot, B] */
        cJSON *pp = cJSON_AddObjectToObject(root, "post_processor");
        cJSON_AddStringToObject(pp, "type", "TemplateProcessing");
        cJSON *single = cJSON_AddArrayToObject(pp, "single");
        cJSON *pair = cJSON_AddArrayToObject(pp, "pair");
        const char *seq[] = {"S", "A", "S", "B"};
        for (int i = 0; i < 4; i++) {
            cJSON *it = cJSON_CreateObject();
            if (seq[i][0] == 'S') {
                cJSON *st = cJSON_AddObjectToObject(it, "SpecialToken");
                cJSON_AddStringToObject(st, "id", "<|begin_of_text|>");
                cJSON_AddNumberToObject(st, "type_id", 0);
            } else {
                cJSON *sq = cJSON_AddObjectToObject(it, "Sequence");
                cJSON_AddStringToObject(sq, "id", seq[i]);
                cJSON_AddNumberToObject(sq, "type_id", 0);
            }
            cJSON_AddItemToArray(pair, it);
            if (i < 2) cJSON_AddItemToArray(single, cJSON_Duplicate(it, 1));
        }
    } else {
        cJSON_AddNullToObject(root, "post_processor");
    }
    cJSON *dec = cJSON_AddObjectToObject(root, "decoder");
    cJSON_AddStringToObject(dec, "type", "ByteLevel");
    cJSON *model = cJSON_AddObjectToObject(root, "model");
    cJSON_AddStringToObject(model, "type", "BPE");
    cJSON_AddNullToObject(model, "dropout");
    cJSON_AddBoolToObject(model, "byte_fallback", false);
    cJSON_AddBoolToObject(model, "ignore_merges", regex == LLAMA3_RX);
    cJSON *vocab = cJSON_AddObjectToObject(model, "vocab");
    static const char *const v[] = {"!", "a", "b", "c", "\xc4\xa0", "ab", "\xc4\xa0\x61", "abc"};
    for (int i = 0; i < 8; i++) cJSON_AddNumberToObject(vocab, v[i], i);
    cJSON *merges = cJSON_AddArrayToObject(model, "merges");
    static const char *const m[][2] = {{"a", "b"}, {"ab", "c"}, {"\xc4\xa0", "a"}};
    for (int i = 0; i < 3; i++) {
        if (merge_form == 1) {
            char s[32];
            snprintf(s, sizeof s, "%s %s", m[i][0], m[i][1]);
            cJSON_AddItemToArray(merges, cJSON_CreateString(s));
        } else {
            cJSON *pr = cJSON_CreateArray();
            cJSON_AddItemToArray(pr, cJSON_CreateString(m[i][0]));
            cJSON_AddItemToArray(pr, cJSON_CreateString(m[i][1]));
            cJSON_AddItemToArray(merges, pr);
        }
    }
    char *txt = cJSON_Print(root);
    cJSON_Delete(root);
    return txt;
}

/* Qwen3.5's and o200k's Split regexes as their tokenizer.json spell them */
static const char QWEN35_RX[] =
    "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?[\\p{L}\\p{M}]+|\\p{N}| ?"
    "[^\\s\\p{L}\\p{M}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";
static const char O200K_RX[] =
    "[^\\r\\n\\p{L}\\p{N}]?[\\p{Lu}\\p{Lt}\\p{Lm}\\p{Lo}\\p{M}]*[\\p{Ll}\\p{Lm}\\p{Lo}"
    "\\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?|[^\\r\\n\\p{L}\\p{N}]?[\\p{Lu}\\p{Lt}\\p{Lm}"
    "\\p{Lo}\\p{M}]+[\\p{Ll}\\p{Lm}\\p{Lo}\\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?|\\p{N}{1,3}| ?"
    "[^\\s\\p{L}\\p{N}]+[\\r\\n/]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";

/* make_tokjson's text with its Split's behavior and invert set */
static char *with_split(const char *j, const char *behavior, bool invert)
{
    cJSON *root = cJSON_Parse(j);
    ck_assert_ptr_nonnull(root);
    cJSON *sp = cJSON_GetArrayItem(
        cJSON_GetObjectItem(cJSON_GetObjectItem(root, "pre_tokenizer"), "pretokenizers"), 0);
    cJSON_ReplaceItemInObject(sp, "behavior", cJSON_CreateString(behavior));
    cJSON_ReplaceItemInObject(sp, "invert", cJSON_CreateBool(invert));
    char *txt = cJSON_Print(root);
    cJSON_Delete(root);
    return txt;
}

/* Every Split form a tokenizer.json can hold: "Isolated", and "Removed"
 * with invert true (o200k's), keep exactly the regex's matches and are
 * taken (the pre-tokenizer named by the regex); the others are refused
 * naming the form and the JSON path. */
START_TEST(json_split_forms)
{
    static const struct {
        const char *behavior;
        bool invert, ok;
    } forms[] = {
        {"Isolated", false, true},           {"Isolated", true, false},
        {"Removed", true, true},             {"Removed", false, false},
        {"MergedWithPrevious", false, false}, {"MergedWithPrevious", true, false},
        {"MergedWithNext", false, false},    {"MergedWithNext", true, false},
        {"Contiguous", false, false},        {"Contiguous", true, false},
    };
    static const struct {
        const char *rx, *pre;
    } rxs[] = {{QWEN35_RX, "qwen35"}, {O200K_RX, "gpt-4o"}, {QWEN2_RX, "qwen2"}};
    for (size_t r = 0; r < sizeof rxs / sizeof rxs[0]; r++) {
        char *base = make_tokjson(1, rxs[r].rx, false);
        for (size_t i = 0; i < sizeof forms / sizeof forms[0]; i++) {
            char *j = with_split(base, forms[i].behavior, forms[i].invert);
            struct mw_err err;
            struct hf_tok *t = NULL;
            mw_err_clear(&err);
            const enum mw_status s = hf_tok_parse_json(j, strlen(j), "s.json", -1, &t, &err);
            if (forms[i].ok) {
                ck_assert_msg(s == MW_OK, "%s invert %d: %s", forms[i].behavior, forms[i].invert,
                              err.msg);
                ck_assert_str_eq(hf_tok_pre(t), rxs[r].pre);
                hf_tok_free(t);
            } else {
                ck_assert_int_eq(s, MW_E_UNSUPPORTED);
                ck_assert_ptr_null(t);
                ck_assert_str_eq(err.where, "pre_tokenizer.pretokenizers[0]");
                ck_assert_msg(strstr(err.msg, forms[i].behavior), "%s", err.msg);
                ck_assert_msg(!forms[i].invert || strstr(err.msg, "invert true"), "%s", err.msg);
            }
            cJSON_free(j);
        }
        cJSON_free(base);
    }
}
END_TEST

START_TEST(json_merge_forms_identical)
{
    char *j1 = make_tokjson(1, LLAMA3_RX, true);
    char *j2 = make_tokjson(2, LLAMA3_RX, true);
    struct mw_err err;
    mw_err_clear(&err);
    struct hf_tok *t1 = NULL, *t2 = NULL;
    char buf[1024];
    ck_assert_msg(hf_tok_parse_json(j1, strlen(j1), "s.json", -1, &t1, &err) == MW_OK, "%s",
                  mw_err_format(&err, buf, sizeof buf));
    ck_assert_msg(hf_tok_parse_json(j2, strlen(j2), "p.json", -1, &t2, &err) == MW_OK, "%s",
                  mw_err_format(&err, buf, sizeof buf));
    ck_assert_str_eq(hf_tok_model(t1), "gpt2");
    ck_assert_str_eq(hf_tok_pre(t1), "llama-bpe");
    ck_assert_uint_eq(hf_tok_n_vocab(t1), 13);
    ck_assert_uint_eq(hf_tok_n_merges(t1), 3);
    ck_assert_str_eq(hf_tok_merge(t1, 2, NULL), "\xc4\xa0 a");
    ck_assert_str_eq(hf_tok_token(t1, 8, NULL), "[PAD8]");
    ck_assert_int_eq(hf_tok_token_type(t1, 8), 5);
    ck_assert_int_eq(hf_tok_token_type(t1, 7), 1);
    ck_assert_int_eq(hf_tok_token_type(t1, 9), 3);
    ck_assert_str_eq(hf_tok_token(t1, 11, NULL), "<tool call>"); /* user-defined: U+2581 -> ' ' */
    ck_assert_int_eq(hf_tok_token_type(t1, 11), 4);
    ck_assert_int_eq(hf_tok_token_type(t1, 12), 3); /* not special but looks special */
    ck_assert_int_eq(hf_tok_add_bos(t1), 1);         /* TemplateProcessing */

    char *dir = make_tmpdir("hftok");
    char p1[1024], p2[1024];
    snprintf(p1, sizeof p1, "%s/out.gguf", dir);
    snprintf(p2, sizeof p2, "%s/out2.gguf", dir);
    struct gguf_file *f1 = tok_to_gguf(t1, p1);
    struct gguf_file *f2 = tok_to_gguf(t2, p2);
    assert_tok_kvs_equal(f1, f2);
    assert_tok_kvs_equal(f2, f1);
    ck_assert_int_ge(gguf_kv_find(f1, "tokenizer.ggml.merges"), 0);
    ck_assert_int_lt(gguf_kv_find(f1, "tokenizer.ggml.scores"), 0);
    gguf_close(f1);
    gguf_close(f2);
    unlink(p2);
    rm_rf(dir);
    free(dir);
    hf_tok_free(t1);
    hf_tok_free(t2);

    /* pair form with a space inside a part: encoded as U+0120 */
    const char *js =
        "{\"model\":{\"type\":\"BPE\",\"vocab\":{\"a\":0,\"b c\":1},"
        "\"merges\":[[\"a\",\"b c\"]]},\"decoder\":{\"type\":\"ByteLevel\"},"
        "\"pre_tokenizer\":{\"type\":\"ByteLevel\",\"add_prefix_space\":false}}";
    ck_assert_int_eq(hf_tok_parse_json(js, strlen(js), "sp.json", -1, &t1, &err), MW_OK);
    ck_assert_str_eq(hf_tok_merge(t1, 0, NULL), "a b\xc4\xa0" "c");
    ck_assert_str_eq(hf_tok_pre(t1), "gpt-2");
    hf_tok_free(t1);
    cJSON_free(j1);
    cJSON_free(j2);
}
END_TEST

START_TEST(json_pre_detection)
{
    struct mw_err err;
    struct hf_tok *t = NULL;
    char *j = make_tokjson(1, QWEN2_RX, false);
    mw_err_clear(&err);
    ck_assert_int_eq(hf_tok_parse_json(j, strlen(j), "q.json", -1, &t, &err), MW_OK);
    ck_assert_str_eq(hf_tok_pre(t), "qwen2");
    ck_assert_int_eq(hf_tok_add_bos(t), -1);
    hf_tok_free(t);
    cJSON_free(j);
    /* llama.cpp's spelled-out form of the same regex */
    j = make_tokjson(1,
                     "(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\\r\\n\\p{L}"
                     "\\p{N}]?\\p{L}+|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|"
                     "\\s+(?!\\S)|\\s+",
                     false);
    ck_assert_int_eq(hf_tok_parse_json(j, strlen(j), "l.json", -1, &t, &err), MW_OK);
    ck_assert_str_eq(hf_tok_pre(t), "llama-bpe");
    hf_tok_free(t);
    cJSON_free(j);
    j = make_tokjson(1, NULL, false);
    ck_assert_int_eq(hf_tok_parse_json(j, strlen(j), "g.json", -1, &t, &err), MW_OK);
    ck_assert_str_eq(hf_tok_pre(t), "gpt-2");
    hf_tok_free(t);
    cJSON_free(j);
    /* unknown regex: refused, naming the place */
    j = make_tokjson(1, "\\p{L}+|\\p{N}+", false);
    mw_err_clear(&err);
    ck_assert_int_eq(hf_tok_parse_json(j, strlen(j), "u.json", -1, &t, &err), MW_E_UNSUPPORTED);
    ck_assert_str_eq(err.where, "pre_tokenizer");
    ck_assert_ptr_null(t);
    cJSON_free(j);
    /* a vocab_size larger than the ids: gaps to the end */
    j = make_tokjson(2, QWEN2_RX, false);
    ck_assert_int_eq(hf_tok_parse_json(j, strlen(j), "q.json", 20, &t, &err), MW_OK);
    ck_assert_uint_eq(hf_tok_n_vocab(t), 20);
    ck_assert_str_eq(hf_tok_token(t, 19, NULL), "[PAD19]");
    hf_tok_free(t);
    /* smaller than the highest id: error naming the token */
    mw_err_clear(&err);
    ck_assert_int_eq(hf_tok_parse_json(j, strlen(j), "q.json", 8, &t, &err), MW_E_VALUE);
    ck_assert_str_eq(err.where, "added_tokens[0].id");
    cJSON_free(j);
}
END_TEST

struct json_case {
    const char *name;
    const char *text;
    enum mw_status code;
    const char *where; /* expected err.where (prefix) */
};

#define BL_TAIL \
    "\"decoder\":{\"type\":\"ByteLevel\"},\"pre_tokenizer\":{\"type\":\"ByteLevel\"," \
    "\"add_prefix_space\":false}}"

static const struct json_case json_cases[] = {
    {"empty", "", MW_E_FORMAT, "line 1 column 1"},
    {"syntax", "{\"model\": {\"type\": \"BPE\",\n \"vocab\": {\"a\": 0,,}}}", MW_E_FORMAT,
     "line 2 column"},
    {"trailing data", "{\"model\":{}} x", MW_E_FORMAT, "line 1 column 14"},
    {"top level array", "[1,2]", MW_E_FORMAT, "(top level)"},
    {"no model", "{\"version\":\"1\"}", MW_E_FORMAT, "model"},
    {"not BPE", "{\"model\":{\"type\":\"Unigram\",\"vocab\":[]}}", MW_E_UNSUPPORTED,
     "model.type"},
    {"vocab not object", "{\"model\":{\"type\":\"BPE\",\"vocab\":[]}," BL_TAIL, MW_E_FORMAT,
     "model.vocab"},
    {"vocab id string", "{\"model\":{\"type\":\"BPE\",\"vocab\":{\"a\":0,\"b\":\"1\"}}," BL_TAIL,
     MW_E_FORMAT, "model.vocab[\"b\"]"},
    {"vocab id negative", "{\"model\":{\"type\":\"BPE\",\"vocab\":{\"a\":-1}}," BL_TAIL,
     MW_E_FORMAT, "model.vocab[\"a\"]"},
    {"vocab id fraction", "{\"model\":{\"type\":\"BPE\",\"vocab\":{\"a\":0.5}}," BL_TAIL,
     MW_E_FORMAT, "model.vocab[\"a\"]"},
    {"vocab id huge", "{\"model\":{\"type\":\"BPE\",\"vocab\":{\"a\":1e300}}," BL_TAIL,
     MW_E_FORMAT, "model.vocab[\"a\"]"},
    {"sparse ids", "{\"model\":{\"type\":\"BPE\",\"vocab\":{\"a\":8000000}}," BL_TAIL,
     MW_E_VALUE, "model.vocab"},
    {"duplicate id", "{\"model\":{\"type\":\"BPE\",\"vocab\":{\"a\":0,\"b\":0}}," BL_TAIL,
     MW_E_VALUE, "model.vocab[\"b\"]"},
    {"merge not string",
     "{\"model\":{\"type\":\"BPE\",\"vocab\":{\"a\":0},\"merges\":[\"a a\",\"a a\",7]}," BL_TAIL,
     MW_E_FORMAT, "model.merges[2]"},
    {"merge without space",
     "{\"model\":{\"type\":\"BPE\",\"vocab\":{\"a\":0},\"merges\":[\"a a\",\"aa\"]}," BL_TAIL,
     MW_E_FORMAT, "model.merges[1]"},
    {"merge forms mixed",
     "{\"model\":{\"type\":\"BPE\",\"vocab\":{\"a\":0},\"merges\":[\"a a\",[\"a\",\"a\"]]},"
     BL_TAIL, MW_E_FORMAT, "model.merges[1]"},
    {"merge pair of three",
     "{\"model\":{\"type\":\"BPE\",\"vocab\":{\"a\":0},\"merges\":[[\"a\",\"a\",\"a\"]]},"
     BL_TAIL, MW_E_FORMAT, "model.merges[0]"},
    {"merges not array",
     "{\"model\":{\"type\":\"BPE\",\"vocab\":{\"a\":0},\"merges\":{}}," BL_TAIL, MW_E_FORMAT,
     "model.merges"},
    {"added id missing",
     "{\"model\":{\"type\":\"BPE\",\"vocab\":{\"a\":0}},\"added_tokens\":[{\"id\":1,"
     "\"content\":\"x\"},{\"content\":\"y\"}]," BL_TAIL, MW_E_FORMAT, "added_tokens[1].id"},
    {"added content number",
     "{\"model\":{\"type\":\"BPE\",\"vocab\":{\"a\":0}},\"added_tokens\":[{\"id\":1,"
     "\"content\":5}]," BL_TAIL, MW_E_FORMAT, "added_tokens[0].content"},
    {"added special string",
     "{\"model\":{\"type\":\"BPE\",\"vocab\":{\"a\":0}},\"added_tokens\":[{\"id\":1,"
     "\"content\":\"x\",\"special\":\"yes\"}]," BL_TAIL, MW_E_FORMAT, "added_tokens[0].special"},
    {"prefix space",
     "{\"model\":{\"type\":\"BPE\",\"vocab\":{\"a\":0}},\"decoder\":{\"type\":\"ByteLevel\"},"
     "\"pre_tokenizer\":{\"type\":\"ByteLevel\"}}",
     MW_E_UNSUPPORTED, "pre_tokenizer.add_prefix_space"},
    {"unsupported pre-tokenizer",
     "{\"model\":{\"type\":\"BPE\",\"vocab\":{\"a\":0}},\"decoder\":{\"type\":\"ByteLevel\"},"
     "\"pre_tokenizer\":{\"type\":\"Sequence\",\"pretokenizers\":[{\"type\":\"Digits\"},"
     "{\"type\":\"ByteLevel\",\"add_prefix_space\":false}]}}",
     MW_E_UNSUPPORTED, "pre_tokenizer.pretokenizers[0].type"},
    {"lowercasing normalizer",
     "{\"model\":{\"type\":\"BPE\",\"vocab\":{\"a\":0}},\"normalizer\":{\"type\":\"Sequence\","
     "\"normalizers\":[{\"type\":\"NFC\"},{\"type\":\"Lowercase\"}]}," BL_TAIL,
     MW_E_UNSUPPORTED, "normalizer"},
    {"replace normalizer on byte-level BPE",
     "{\"model\":{\"type\":\"BPE\",\"vocab\":{\"a\":0}},\"normalizer\":{\"type\":\"Replace\","
     "\"pattern\":{\"String\":\" \"},\"content\":\"_\"}," BL_TAIL,
     MW_E_UNSUPPORTED, "normalizer"},
    {"strip normalizer in a sequence",
     "{\"model\":{\"type\":\"BPE\",\"vocab\":{\"a\":0}},\"normalizer\":{\"type\":\"Sequence\","
     "\"normalizers\":[{\"type\":\"NFC\"},{\"type\":\"Strip\"}]}," BL_TAIL,
     MW_E_UNSUPPORTED, "normalizer.normalizers[1]"},
    {"two unicode forms",
     "{\"model\":{\"type\":\"BPE\",\"vocab\":{\"a\":0}},\"normalizer\":{\"type\":\"Sequence\","
     "\"normalizers\":[{\"type\":\"NFD\"},{\"type\":\"NFC\"}]}," BL_TAIL,
     MW_E_UNSUPPORTED, "normalizer.normalizers[1]"},
    {"byte_fallback BPE without the space normalizer",
     "{\"model\":{\"type\":\"BPE\",\"byte_fallback\":true,\"vocab\":{\"a\":0}}}",
     MW_E_UNSUPPORTED, "normalizer"},
    {"byte_fallback BPE with a dummy prefix",
     "{\"model\":{\"type\":\"BPE\",\"byte_fallback\":true,\"vocab\":{\"a\":0}},"
     "\"normalizer\":{\"type\":\"Sequence\",\"normalizers\":[{\"type\":\"Prepend\","
     "\"prepend\":\"\u2581\"},{\"type\":\"Replace\",\"pattern\":{\"String\":\" \"},"
     "\"content\":\"\u2581\"}]}}",
     MW_E_UNSUPPORTED, "normalizer.normalizers[0]"},
    {"byte_fallback BPE with Metaspace",
     "{\"model\":{\"type\":\"BPE\",\"byte_fallback\":true,\"vocab\":{\"a\":0}},"
     "\"normalizer\":{\"type\":\"Replace\",\"pattern\":{\"String\":\" \"},"
     "\"content\":\"\u2581\"},\"pre_tokenizer\":{\"type\":\"Metaspace\"}}",
     MW_E_UNSUPPORTED, "pre_tokenizer"},
    {"byte_fallback BPE with ignore_merges",
     "{\"model\":{\"type\":\"BPE\",\"byte_fallback\":true,\"ignore_merges\":true,"
     "\"vocab\":{\"a\":0}},\"normalizer\":{\"type\":\"Replace\",\"pattern\":{\"String\":"
     "\" \"},\"content\":\"\u2581\"}}",
     MW_E_UNSUPPORTED, "model.ignore_merges"},
    {"deep nesting", "[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[["
                     "[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[",
     MW_E_FORMAT, "line 1"},
    {"bad utf16 escape", "{\"model\":\"\\ud800\"}", MW_E_FORMAT, "line 1"},
};

START_TEST(json_malformed_catalogue)
{
    const struct json_case *c = &json_cases[_i];
    struct mw_err err;
    mw_err_clear(&err);
    struct hf_tok *t = NULL;
    const size_t n = strlen(c->text);
    /* exact-size heap copy so sanitizers catch overreads */
    char *b = malloc(n ? n : 1);
    memcpy(b, c->text, n);
    const enum mw_status s = hf_tok_parse_json(b, n, "bad.json", -1, &t, &err);
    free(b);
    char buf[1024];
    mw_err_format(&err, buf, sizeof buf);
    ck_assert_msg(s == c->code, "%s: status %s, want %s (%s)", c->name, mw_status_name(s),
                  mw_status_name(c->code), buf);
    ck_assert_msg(strncmp(err.where, c->where, strlen(c->where)) == 0,
                  "%s: where '%s', want '%s'", c->name, err.where, c->where);
    ck_assert_msg(strstr(buf, "bad.json") != NULL, "%s: %s", c->name, buf);
    ck_assert_ptr_null(t);
}
END_TEST

/* Unicode forms are kept (memwall.tokenizer.normalizer); a SentencePiece-
 * style BPE becomes "gpt2" with pre "granite-embed-multi-311m" (byte pieces
 * type 6, no scores, no add_space_prefix). */
START_TEST(json_normalizer_forms)
{
    static const char *const forms[] = {"NFC", "NFD", "NFKC", "NFKD"};
    char dir[256];
    snprintf(dir, sizeof dir, "%s/hf_tok_norm_%d", MW_TEST_TMPDIR, (int)getpid());
    mkdir(dir, 0755);
    char path[512];
    snprintf(path, sizeof path, "%s/out.gguf", dir);
    for (int i = 0; i < 4; i++) {
        char j[512];
        snprintf(j, sizeof j,
                 "{\"model\":{\"type\":\"BPE\",\"vocab\":{\"a\":0,\"b\":1}},"
                 "\"normalizer\":{\"type\":\"Sequence\",\"normalizers\":[{\"type\":\"%s\"}]},"
                 BL_TAIL, forms[i]);
        struct mw_err err;
        mw_err_clear(&err);
        struct hf_tok *t = NULL;
        ck_assert_int_eq(hf_tok_parse_json(j, strlen(j), "n.json", -1, &t, &err), MW_OK);
        ck_assert_str_eq(hf_tok_normalizer(t), forms[i]);
        struct gguf_file *f = tok_to_gguf(t, path);
        const char *s = NULL;
        uint64_t len = 0;
        ck_assert_int_eq(gguf_get_str(f, "memwall.tokenizer.normalizer", &s, &len, &err), MW_OK);
        ck_assert(len == strlen(forms[i]) && memcmp(s, forms[i], len) == 0);
        gguf_close(f);
        hf_tok_free(t);
    }
    const char *sp =
        "{\"model\":{\"type\":\"BPE\",\"byte_fallback\":true,\"vocab\":{\"<unk>\":0,"
        "\"<0x41>\":1,\"\u2581\":2,\"a\":3,\"\u2581a\":4},\"merges\":[[\"\u2581\",\"a\"]]},"
        "\"added_tokens\":[{\"id\":0,\"content\":\"<unk>\",\"special\":true},"
        "{\"id\":5,\"content\":\"<x>\",\"special\":false}],"
        "\"normalizer\":{\"type\":\"Replace\",\"pattern\":{\"String\":\" \"},"
        "\"content\":\"\u2581\"},\"pre_tokenizer\":{\"type\":\"Split\",\"pattern\":"
        "{\"String\":\" \"},\"behavior\":\"MergedWithPrevious\",\"invert\":false}}";
    struct mw_err err;
    mw_err_clear(&err);
    struct hf_tok *t = NULL;
    ck_assert_int_eq(hf_tok_parse_json(sp, strlen(sp), "g.json", -1, &t, &err), MW_OK);
    ck_assert_str_eq(hf_tok_model(t), "gpt2");
    ck_assert_str_eq(hf_tok_pre(t), "granite-embed-multi-311m");
    ck_assert_uint_eq(hf_tok_n_vocab(t), 6);
    ck_assert_int_eq(hf_tok_token_type(t, 0), 3);
    ck_assert_int_eq(hf_tok_token_type(t, 1), 6);
    ck_assert_int_eq(hf_tok_token_type(t, 4), 1);
    ck_assert_int_eq(hf_tok_token_type(t, 5), 4);
    struct gguf_file *f = tok_to_gguf(t, path);
    ck_assert_int_ge(gguf_kv_find(f, "tokenizer.ggml.pre"), 0);
    ck_assert_int_ge(gguf_kv_find(f, "tokenizer.ggml.merges"), 0);
    ck_assert_int_lt(gguf_kv_find(f, "tokenizer.ggml.scores"), 0);
    ck_assert_int_lt(gguf_kv_find(f, "tokenizer.ggml.add_space_prefix"), 0);
    gguf_close(f);
    hf_tok_free(t);
    unlink(path);
    rmdir(dir);
}
END_TEST

/* ------------------------------------------------------------------ */
/* checkpoint directories                                             */

/* Gemma 4 (model type "gemma4"): the SentencePiece-style tokenizer.json as
 * llama.cpp's Gemma4Model writes it (gguf-py LlamaHfVocab): model gemma4, no
 * pre, scores -1000, types from tokenizer_config.json's special tokens only
 * (not from added_tokens' "special"), the channel / tool tokens
 * USER_DEFINED, add_bos true in SpecialVocab's place, add_space_prefix false */
START_TEST(load_gemma4_dir)
{
    char *dir = make_tmpdir("hftok");
    write_text_in(dir, "tokenizer.json",
                  "{\"model\":{\"type\":\"BPE\",\"byte_fallback\":true,\"vocab\":{\"<pad>\":0,"
                  "\"<eos>\":1,\"<bos>\":2,\"<unk>\":3,\"<0x41>\":4,\"\u2581\":5,\"a\":6,"
                  "\"\u2581a\":7,\"<|channel>\":8,\"<turn|>\":9,\"<|turn>\":10},"
                  "\"merges\":[[\"\u2581\",\"a\"]]},"
                  "\"added_tokens\":[{\"id\":8,\"content\":\"<|channel>\",\"special\":true},"
                  "{\"id\":10,\"content\":\"<|turn>\",\"special\":true}],"
                  "\"normalizer\":{\"type\":\"Replace\",\"pattern\":{\"String\":\" \"},"
                  "\"content\":\"\u2581\"}}");
    write_text_in(dir, "tokenizer_config.json",
                  "{\"bos_token\":\"<bos>\",\"eos_token\":\"<turn|>\",\"unk_token\":\"<unk>\","
                  "\"pad_token\":\"<pad>\",\"add_bos_token\":false}");
    write_text_in(dir, "config.json", "{\"model_type\":\"gemma4_text\",\"vocab_size\":11}");
    /* not read for Gemma 4 (llama.cpp's converter reads tokenizer.json only) */
    write_text_in(dir, "tokenizer.model", "not a SentencePiece model");
    struct mw_err err;
    mw_err_clear(&err);
    struct hf_tok *t = NULL;
    char buf[1024];
    ck_assert_msg(hf_tok_load(dir, &t, &err) == MW_OK, "%s", mw_err_format(&err, buf, sizeof buf));
    char path[1200];
    snprintf(path, sizeof path, "%s/t.gguf", dir);
    struct gguf_writer *w = NULL;
    ck_assert_int_eq(gguf_writer_init(&w, &err), MW_OK);
    ck_assert_int_eq(hf_tok_write_gguf(t, w, "gemma4", &err), MW_OK);
    ck_assert_int_eq(gguf_writer_open(w, path, &err), MW_OK);
    ck_assert_int_eq(gguf_writer_finish(w, &err), MW_OK);
    gguf_writer_free(w);
    struct gguf_file *f = NULL;
    ck_assert_int_eq(gguf_open(path, 0, &f, &err), MW_OK);
    const char *s = NULL;
    uint64_t len = 0;
    ck_assert_int_eq(gguf_get_str(f, "tokenizer.ggml.model", &s, &len, &err), MW_OK);
    ck_assert(len == 6 && memcmp(s, "gemma4", 6) == 0);
    ck_assert_int_lt(gguf_kv_find(f, "tokenizer.ggml.pre"), 0);
    const struct gguf_value *v = gguf_kv_value(f, (uint64_t)gguf_kv_find(f, "tokenizer.ggml.scores"));
    ck_assert_int_eq(v->elem_type, GGUF_VT_F32);
    ck_assert_uint_eq(v->n, 11);
    for (int i = 0; i < 11; i++) {
        float x;
        memcpy(&x, v->data + 4 * i, 4);
        ck_assert(x == -1000.0f);
    }
    v = gguf_kv_value(f, (uint64_t)gguf_kv_find(f, "tokenizer.ggml.token_type"));
    static const int32_t want[11] = {3, 1, 3, 3, 6, 1, 1, 1, 4, 3, 1};
    ck_assert_uint_eq(v->n, 11);
    for (int i = 0; i < 11; i++) {
        int32_t x;
        memcpy(&x, v->data + 4 * i, 4);
        ck_assert_msg(x == want[i], "token %d: type %d, want %d", i, x, want[i]);
    }
    const int64_t ib = gguf_kv_find(f, "tokenizer.ggml.add_bos_token");
    ck_assert_int_ge(ib, 0);
    ck_assert_int_eq(gguf_kv_value(f, (uint64_t)ib)->data[0], 1);
    const int64_t isp = gguf_kv_find(f, "tokenizer.ggml.add_space_prefix");
    ck_assert_int_gt(isp, ib); /* add_bos where SpecialVocab put it */
    ck_assert_int_eq(gguf_kv_value(f, (uint64_t)isp)->data[0], 0);
    gguf_close(f);
    unlink(path);
    /* any other model type: Gemma 3's way ("gpt2", its pre) */
    ck_assert_int_eq(gguf_writer_init(&w, &err), MW_OK);
    ck_assert_int_eq(hf_tok_write_gguf(t, w, "gemma3", &err), MW_OK);
    ck_assert_int_eq(gguf_writer_open(w, path, &err), MW_OK);
    ck_assert_int_eq(gguf_writer_finish(w, &err), MW_OK);
    gguf_writer_free(w);
    ck_assert_int_eq(gguf_open(path, 0, &f, &err), MW_OK);
    ck_assert_int_eq(gguf_get_str(f, "tokenizer.ggml.model", &s, &len, &err), MW_OK);
    ck_assert(len == 4 && memcmp(s, "gpt2", 4) == 0);
    ck_assert_int_ge(gguf_kv_find(f, "tokenizer.ggml.pre"), 0);
    gguf_close(f);
    unlink(path);
    hf_tok_free(t);
    rm_rf(dir);
    free(dir);
}
END_TEST

START_TEST(load_llama3_dir)
{
    char *dir = make_tmpdir("hftok");
    char *j = make_tokjson(2, LLAMA3_RX, true);
    write_text_in(dir, "tokenizer.json", j);
    cJSON_free(j);
    write_text_in(dir, "tokenizer_config.json",
                  "{\"bos_token\":\"<|begin_of_text|>\",\"eos_token\":\"<|endoftext|>\","
                  "\"chat_template\":\"{{ bos_token }}{% for m in messages %}{{ m.content }}"
                  "{% endfor %}\",\"added_tokens_decoder\":{}}");
    write_text_in(dir, "config.json",
                  "{\"model_type\":\"llama\",\"vocab_size\":16,\"bos_token_id\":10,"
                  "\"eos_token_id\":9}");
    struct mw_err err;
    mw_err_clear(&err);
    struct hf_tok *t = NULL;
    char buf[1024];
    ck_assert_msg(hf_tok_load(dir, &t, &err) == MW_OK, "%s", mw_err_format(&err, buf, sizeof buf));
    ck_assert_str_eq(hf_tok_model(t), "gpt2");
    ck_assert_str_eq(hf_tok_pre(t), "llama-bpe");
    ck_assert_uint_eq(hf_tok_n_vocab(t), 16);
    ck_assert_int_eq(hf_tok_bos_id(t), 10);
    ck_assert_int_eq(hf_tok_eos_id(t), 9);
    ck_assert_int_eq(hf_tok_add_bos(t), 1);
    ck_assert_ptr_nonnull(hf_tok_chat_template(t));
    ck_assert_ptr_nonnull(strstr(hf_tok_source(t), "tokenizer.json"));

    char path[1024];
    snprintf(path, sizeof path, "%s/out.gguf", dir);
    struct gguf_file *f = tok_to_gguf(t, path);
    /* key order and types as gguf-py writes them */
    static const char *const order[] = {
        "tokenizer.ggml.model", "tokenizer.ggml.pre", "tokenizer.ggml.tokens",
        "tokenizer.ggml.token_type", "tokenizer.ggml.merges", "tokenizer.ggml.bos_token_id",
        "tokenizer.ggml.eos_token_id", "tokenizer.ggml.add_bos_token",
        "tokenizer.ggml.add_sep_token", "tokenizer.chat_template"};
    uint64_t k = 0;
    for (uint64_t i = 0; i < gguf_kv_count(f); i++) {
        if (!is_tok_key(gguf_kv_key(f, i))) continue;
        ck_assert_uint_lt(k, sizeof order / sizeof order[0]);
        ck_assert_str_eq(gguf_kv_key(f, i), order[k]);
        k++;
    }
    ck_assert_uint_eq(k, sizeof order / sizeof order[0]);
    uint32_t v = 0;
    ck_assert_int_eq(gguf_get_u32(f, "tokenizer.ggml.bos_token_id", &v, &err), MW_OK);
    ck_assert_uint_eq(v, 10);
    const struct gguf_value *tt =
        gguf_kv_value(f, (uint64_t)gguf_kv_find(f, "tokenizer.ggml.token_type"));
    ck_assert_int_eq(tt->elem_type, GGUF_VT_I32);
    ck_assert_uint_eq(tt->n, 16);
    gguf_close(f);
    hf_tok_free(t);
    rm_rf(dir);
    free(dir);
}
END_TEST

START_TEST(load_qwen2_dir)
{
    char *dir = make_tmpdir("hftok");
    char *j = make_tokjson(1, QWEN2_RX, false);
    write_text_in(dir, "tokenizer.json", j);
    cJSON_free(j);
    write_text_in(dir, "tokenizer_config.json",
                  "{\"bos_token\":null,\"eos_token\":\"<|im_x|>\",\"pad_token\":\"<|endoftext|>\","
                  "\"add_bos_token\":false}");
    write_text_in(dir, "config.json",
                  "{\"model_type\":\"qwen2\",\"vocab_size\":13,\"bos_token_id\":9,"
                  "\"eos_token_id\":9}");
    struct mw_err err;
    mw_err_clear(&err);
    struct hf_tok *t = NULL;
    char buf[1024];
    ck_assert_msg(hf_tok_load(dir, &t, &err) == MW_OK, "%s", mw_err_format(&err, buf, sizeof buf));
    ck_assert_str_eq(hf_tok_pre(t), "qwen2");
    ck_assert_int_eq(hf_tok_eos_id(t), 12); /* tokenizer_config name wins over config.json */
    ck_assert_int_eq(hf_tok_special_id(t, HF_TOK_PAD), 9);
    ck_assert_int_eq(hf_tok_bos_id(t), 9);
    ck_assert_int_eq(hf_tok_add_bos(t), 0);
    char path[1024];
    snprintf(path, sizeof path, "%s/out.gguf", dir);
    struct gguf_file *f = tok_to_gguf(t, path);
    /* gguf-py order: ids found through tokenizer_config first (eos, pad),
     * then config.json (bos) */
    const int64_t ie = gguf_kv_find(f, "tokenizer.ggml.eos_token_id");
    const int64_t ip = gguf_kv_find(f, "tokenizer.ggml.padding_token_id");
    const int64_t ib = gguf_kv_find(f, "tokenizer.ggml.bos_token_id");
    ck_assert(ie >= 0 && ie < ip && ip < ib);
    gguf_close(f);
    hf_tok_free(t);

    /* vocab_size smaller than the ids -> error naming the place */
    write_text_in(dir, "config.json", "{\"vocab_size\":10}");
    mw_err_clear(&err);
    ck_assert_int_eq(hf_tok_load(dir, &t, &err), MW_E_VALUE);
    ck_assert_ptr_nonnull(strstr(err.path, "tokenizer.json"));
    /* malformed side file */
    write_text_in(dir, "config.json", "{\"vocab_size\":13}");
    write_text_in(dir, "tokenizer_config.json", "{\"bos_token\": }");
    mw_err_clear(&err);
    ck_assert_int_eq(hf_tok_load(dir, &t, &err), MW_E_FORMAT);
    ck_assert_ptr_nonnull(strstr(err.path, "tokenizer_config.json"));
    ck_assert_uint_eq(err.off, 14);
    rm_rf(dir);
    free(dir);
}
END_TEST

static Suite *hf_tok_json_suite(void)
{
    Suite *s = suite_create("hf_tok_json");
    TCase *tc = tcase_create("json");
    tcase_add_test(tc, json_merge_forms_identical);
    tcase_add_test(tc, json_pre_detection);
    tcase_add_test(tc, json_split_forms);
    tcase_add_test(tc, json_normalizer_forms);
    tcase_add_loop_test(tc, json_malformed_catalogue, 0,
                        (int)(sizeof json_cases / sizeof json_cases[0]));
    suite_add_tcase(s, tc);
    tc = tcase_create("dirs");
    tcase_add_test(tc, load_llama3_dir);
    tcase_add_test(tc, load_qwen2_dir);
    tcase_add_test(tc, load_gemma4_dir);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    return run_suite(hf_tok_json_suite());
}
