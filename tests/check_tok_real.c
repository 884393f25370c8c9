/* The real Qwen3 and Gemma 3 tokenizers (tests/fixtures/fetch_tokenizers.sh:
 * .peer/tokenizers/{qwen3,gemma3}; MW_TOKENIZERS overrides the directory)
 * through hf_tok (tokenizer.json -> tokenizer.* GGUF keys) and the runtime
 * tokenizer that reads them back:
 *   - llama.cpp's control / end-of-generation rules (llama-vocab.cpp load)
 *     on Qwen3's vocabulary: 6 EOG ids, "</s>" (128247) control;
 *   - Qwen3's NFC normalizer (memwall.tokenizer.normalizer): decomposed
 *     "café Việt" gives the 3 ids of the Hugging Face tokenizer;
 *   - Gemma 3's SentencePiece-style BPE ("gpt2", pre
 *     "granite-embed-multi-311m", llama.cpp's gemma4 pre-tokenizer): types,
 *     ids of a few strings (the same llama.cpp gives, tests/e2e/
 *     tok_family_peer.sh compares whole corpora);
 *   - GPT-4o's o200k tokenizer.json (pre "gpt-4o"): special ids and the
 *     Hugging Face tokenizer's ids of a few strings.
 * Exit 77 (skip) when the tokenizer files are missing. */
#include <check.h>
#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "gguf/gguf.h"
#include "hf/hf_tok.h"
#include "runtime/rt.h"

#include "check_common.h"

static char g_dir[1024];

struct tok {
    struct hf_tok *ht;
    void *buf;
    struct gguf_file *f;
    struct rt_tok *t;
};

static void tok_open_dir(struct tok *k, const char *dir, const char *name)
{
    struct mw_err err;
    mw_err_clear(&err);
    char eb[1024];
    enum mw_status s = hf_tok_load(dir, &k->ht, &err);
    ck_assert_msg(s == MW_OK, "%s", mw_err_format(&err, eb, sizeof eb));
    struct gguf_writer *w = NULL;
    ck_assert_int_eq(gguf_writer_init(&w, &err), MW_OK);
    ck_assert_int_eq(hf_tok_write_gguf(k->ht, w, "qwen3", &err), MW_OK);
    ck_assert_int_eq(gguf_writer_open_mem(w, &err), MW_OK);
    uint64_t size = 0;
    ck_assert_int_eq(gguf_writer_finish_mem(w, &k->buf, &size, &err), MW_OK);
    gguf_writer_free(w);
    ck_assert_int_eq(gguf_open_mem(k->buf, size, name, 0, &k->f, &err), MW_OK);
    s = rt_tok_init(k->f, hf_tok_n_vocab(k->ht), &k->t, &err);
    ck_assert_msg(s == MW_OK, "%s", mw_err_format(&err, eb, sizeof eb));
}

static void tok_open(struct tok *k, const char *name)
{
    char dir[1200];
    snprintf(dir, sizeof dir, "%s/%s", g_dir, name);
    tok_open_dir(k, dir, name);
}

static void tok_close(struct tok *k)
{
    rt_tok_free(k->t);
    gguf_close(k->f);
    free(k->buf);
    hf_tok_free(k->ht);
}

static size_t enc(const struct tok *k, const char *text, bool add, bool special, int32_t *ids,
                  size_t cap)
{
    struct mw_err err;
    mw_err_clear(&err);
    size_t n = 0;
    ck_assert_int_eq(rt_tok_encode(k->t, text, strlen(text), add, special, ids, cap, &n, &err),
                     MW_OK);
    return n;
}

START_TEST(qwen3_eog_control)
{
    struct tok k;
    tok_open(&k, "qwen3");
    ck_assert_str_eq(hf_tok_normalizer(k.ht), "NFC");
    int32_t eog[16];
    const uint32_t n = rt_tok_eog_ids(k.t, eog, 16);
    /* llama.cpp: fim_pad, repo_name (fim_rep), file_sep (fim_sep), and the
     * texts <|endoftext|>, <|im_end|>, </s>; eos (<|im_end|>) among them */
    static const int32_t want[] = {128247, 151643, 151645, 151662, 151663, 151664};
    ck_assert_uint_eq(n, 6);
    for (int i = 0; i < 6; i++) ck_assert_int_eq(eog[i], want[i]);
    size_t len;
    const char *txt = rt_tok_text(k.t, 128247, &len);
    ck_assert(len == 4 && memcmp(txt, "</s>", 4) == 0);
    ck_assert_int_eq(hf_tok_token_type(k.ht, 128247), 1); /* normal in the file */
    ck_assert(rt_tok_is_control(k.t, 128247));            /* control at load */
    ck_assert(rt_tok_is_control(k.t, 151659));            /* <|fim_prefix|> */
    ck_assert(!rt_tok_is_eog(k.t, 151659));
    ck_assert(!rt_tok_is_eog(k.t, 151644)); /* <|im_start|> */
    ck_assert(!rt_tok_is_control(k.t, 151667)); /* <think>: user-defined */
    /* " </s>" with special tokens enabled: a space, then the control token */
    int32_t ids[64];
    size_t m = enc(&k, " </s>", false, true, ids, 64);
    ck_assert_uint_eq(m, 2);
    ck_assert_int_eq(ids[1], 128247);
    /* without: spelled out */
    m = enc(&k, " </s>", false, false, ids, 64);
    ck_assert_uint_gt(m, 1);
    for (size_t i = 0; i < m; i++) ck_assert_int_ne(ids[i], 128247);
    tok_close(&k);
}
END_TEST

START_TEST(qwen3_nfc)
{
    struct tok k;
    tok_open(&k, "qwen3");
    int32_t a[64], b[64];
    /* decomposed (NFD) and composed spellings give the same 3 ids, as the
     * Hugging Face tokenizer's NFC normalizer makes them */
    const size_t na = enc(&k, "cafe\xcc\x81 Vie\xcc\xa3\xcc\x82t", true, false, a, 64);
    const size_t nb = enc(&k, "caf\xc3\xa9 Vi\xe1\xbb\x87t", true, false, b, 64);
    ck_assert_uint_eq(na, 3);
    ck_assert_uint_eq(nb, 3);
    static const int32_t want[] = {924, 58858, 128324};
    for (int i = 0; i < 3; i++) {
        ck_assert_int_eq(a[i], want[i]);
        ck_assert_int_eq(b[i], want[i]);
    }
    /* added tokens are matched in the raw text, before normalization */
    const size_t nc = enc(&k, "<|im_start|>cafe\xcc\x81", false, true, a, 64);
    ck_assert_uint_ge(nc, 2);
    ck_assert_int_eq(a[0], 151644);
    /* invalid UTF-8 passes through unchanged (no U+FFFD made up) */
    const size_t nd = enc(&k, "a\xff" "e\xcc\x81", false, false, a, 64);
    const size_t ne = enc(&k, "a\xff\xc3\xa9", false, false, b, 64);
    ck_assert_uint_eq(nd, ne);
    for (size_t i = 0; i < nd; i++) ck_assert_int_eq(a[i], b[i]);
    tok_close(&k);
}
END_TEST

START_TEST(gemma3_spm_bpe)
{
    struct tok k;
    tok_open(&k, "gemma3");
    /* llama.cpp's converter: "gpt2", pre "granite-embed-multi-311m" */
    ck_assert_str_eq(hf_tok_model(k.ht), "gpt2");
    ck_assert_str_eq(hf_tok_pre(k.ht), "granite-embed-multi-311m");
    ck_assert_str_eq(rt_tok_model_name(k.t), "gpt2");
    ck_assert_str_eq(rt_tok_pre_name(k.t), "gemma4");
    ck_assert_str_eq(hf_tok_normalizer(k.ht), "");
    ck_assert_uint_eq(hf_tok_n_vocab(k.ht), 262145); /* no config.json here */
    ck_assert_int_eq(hf_tok_token_type(k.ht, 2), 3);   /* <bos> */
    ck_assert_int_eq(hf_tok_token_type(k.ht, 5), 4);   /* [multimodal] */
    ck_assert_int_eq(hf_tok_token_type(k.ht, 6), 3);   /* <unused0>: looks special */
    ck_assert_int_eq(hf_tok_token_type(k.ht, 105), 3); /* <start_of_turn> */
    ck_assert_int_eq(hf_tok_token_type(k.ht, 108), 4); /* "\n\n" */
    ck_assert_int_eq(hf_tok_token_type(k.ht, 138), 1); /* U+2581 x2 */
    int32_t id = rt_tok_find(k.t, "<0x41>", 6);
    ck_assert_int_ge(id, 0);
    ck_assert_int_eq(hf_tok_token_type(k.ht, (uint32_t)id), 6);
    ck_assert(rt_tok_add_bos(k.t));
    ck_assert_int_eq(rt_tok_bos(k.t), 2);
    /* llama.cpp's set (llama-peer -v info): <eos>, <end_of_turn> (eos), and
     * the ordinary "</s>" 212 made control */
    int32_t eog[8];
    ck_assert_uint_eq(rt_tok_eog_ids(k.t, eog, 8), 3);
    ck_assert_int_eq(eog[0], 1);
    ck_assert_int_eq(eog[1], 106);
    ck_assert_int_eq(eog[2], 212);
    ck_assert(rt_tok_is_control(k.t, 212));
    ck_assert(!rt_tok_is_eog(k.t, 105));
    int32_t ids[64];
    /* BOS, "Hello", " world": spaces are U+2581, no dummy prefix */
    size_t n = enc(&k, "Hello world", true, false, ids, 64);
    ck_assert_uint_eq(n, 3);
    ck_assert_int_eq(ids[0], 2);
    char piece[64];
    size_t pl = rt_tok_piece(k.t, ids[2], false, piece, sizeof piece);
    ck_assert_uint_eq(pl, 6);
    ck_assert(memcmp(piece, " world", 6) == 0);
    /* a newline run is one added token; "  " prints as two spaces */
    n = enc(&k, "a\n\n\nb", false, false, ids, 64);
    ck_assert_uint_eq(n, 3);
    ck_assert_int_eq(ids[1], 109);
    pl = rt_tok_piece(k.t, 138, false, piece, sizeof piece);
    ck_assert_uint_eq(pl, 2);
    ck_assert(memcmp(piece, "  ", 2) == 0);
    /* a character outside the vocabulary falls back to <0xNN> bytes */
    n = enc(&k, "\xf0\x9f\x80\x80", false, false, ids, 64);
    ck_assert_uint_ge(n, 1);
    /* control tokens only with parse_special */
    n = enc(&k, "<start_of_turn>user", false, true, ids, 64);
    ck_assert_int_eq(ids[0], 105);
    n = enc(&k, "<start_of_turn>user", false, false, ids, 64);
    ck_assert_int_ne(ids[0], 105);
    tok_close(&k);
}
END_TEST

/* GPT-4o's o200k tokenizer.json (Phi-4-mini's; Split "Removed" with invert
 * true, then ByteLevel without regex): pre "gpt-4o", llama.cpp's special ids
 * (all <|endoftext|>), the ids of the Hugging Face tokenizer
 * (@lenml/tokenizers, tests/lib/hf_tokenize.js) on a few strings */
START_TEST(gpt4o_o200k)
{
    struct tok k;
    tok_open(&k, "gpt4o");
    ck_assert_str_eq(hf_tok_pre(k.ht), "gpt-4o");
    ck_assert_str_eq(rt_tok_pre_name(k.t), "gpt-4o");
    ck_assert_uint_eq(hf_tok_n_vocab(k.ht), 200019);
    int32_t eog[8];
    ck_assert_uint_eq(rt_tok_eog_ids(k.t, eog, 8), 1);
    ck_assert_int_eq(eog[0], 199999);
    ck_assert_int_eq(rt_tok_eos(k.t), 199999);
    ck_assert_int_eq(rt_tok_bos(k.t), 199999);
    static const struct {
        const char *text;
        int32_t ids[12];
        size_t n;
    } cases[] = {
        {"Hello world! I'M DON'T 1234567", {13225, 2375, 0, 3413, 44, 153384, 220, 7633, 19354, 22},
         10},
        {"  x\n\n/* y */<|endoftext|>", {220, 1215, 279, 2965, 342, 932, 199999}, 7},
    };
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        int32_t ids[64];
        const size_t n = enc(&k, cases[c].text, false, true, ids, 64);
        ck_assert_msg(n == cases[c].n, "'%s': %zu ids", cases[c].text, n);
        for (size_t i = 0; i < n; i++)
            ck_assert_msg(ids[i] == cases[c].ids[i], "'%s' id %zu: %d, want %d", cases[c].text, i,
                          ids[i], cases[c].ids[i]);
    }
    tok_close(&k);
}
END_TEST

/* Phi-4-mini's tokenizer: GPT-4o's tokenizer.json plus Phi-4-mini's added
 * tokens <|assistant|> 200019 .. <|tag|> 200028 (as tests/fixtures/
 * mk_family_fixture.py phi4mini writes it). llama.cpp's end-of-generation
 * set for it is <|endoftext|> and <|end|> (llama-peer -v info on the
 * converted fixture; tests/e2e/tok_pre_peer.sh checks that list), every added
 * token is control. */
START_TEST(phi4mini_eog)
{
    static const char *const added[] = {"<|assistant|>", "<|end|>", "<|user|>", "<|system|>",
                                        "<|tool|>", "<|/tool|>", "<|tool_call|>",
                                        "<|/tool_call|>", "<|tool_response|>", "<|tag|>"};
    char p[1200];
    snprintf(p, sizeof p, "%s/gpt4o/tokenizer.json", g_dir);
    size_t n = 0;
    uint8_t *txt = read_file_ok(p, &n);
    cJSON *root = cJSON_ParseWithLength((const char *)txt, n);
    free(txt);
    ck_assert_ptr_nonnull(root);
    cJSON *arr = cJSON_GetObjectItem(root, "added_tokens");
    for (int i = 0; i < 10; i++) {
        cJSON *a = cJSON_CreateObject();
        cJSON_AddNumberToObject(a, "id", 200019 + i);
        cJSON_AddStringToObject(a, "content", added[i]);
        cJSON_AddBoolToObject(a, "special", true);
        cJSON_AddItemToArray(arr, a);
    }
    char *out = cJSON_PrintUnformatted(root);
    cJSON_Delete(root);
    char *dir = make_tmpdir("phi4tok");
    write_text_in(dir, "tokenizer.json", out);
    cJSON_free(out);
    write_text_in(dir, "tokenizer_config.json",
                  "{\"bos_token\": \"<|endoftext|>\", \"eos_token\": \"<|endoftext|>\", "
                  "\"tokenizer_class\": \"GPT2Tokenizer\"}");
    struct tok k;
    tok_open_dir(&k, dir, "phi4mini");
    ck_assert_uint_eq(hf_tok_n_vocab(k.ht), 200029);
    int32_t eog[8];
    ck_assert_uint_eq(rt_tok_eog_ids(k.t, eog, 8), 2);
    ck_assert_int_eq(eog[0], 199999);
    ck_assert_int_eq(eog[1], 200020);
    for (int32_t id = 200018; id <= 200028; id++) ck_assert(rt_tok_is_control(k.t, id));
    ck_assert(!rt_tok_is_eog(k.t, 200021)); /* <|user|> */
    /* "<|user|>hi<|end|>" with special tokens: three ids */
    int32_t ids[16];
    const size_t m = enc(&k, "<|user|>hi<|end|>", false, true, ids, 16);
    ck_assert_uint_eq(m, 3);
    ck_assert_int_eq(ids[0], 200021);
    ck_assert_int_eq(ids[2], 200020);
    tok_close(&k);
    rm_rf(dir);
    free(dir);
}
END_TEST

static bool have(const char *name)
{
    char p[1200];
    struct stat st;
    snprintf(p, sizeof p, "%s/%s/tokenizer.json", g_dir, name);
    return stat(p, &st) == 0;
}

int main(void)
{
    const char *env = getenv("MW_TOKENIZERS");
    snprintf(g_dir, sizeof g_dir, "%s", env && env[0] ? env : MW_DATASETS_DIR "/../.peer/tokenizers");
    if (!have("qwen3") || !have("gemma3")) {
        printf("SKIP: no real tokenizers under %s (bash tests/fixtures/fetch_tokenizers.sh)\n",
               g_dir);
        const char *ci = getenv("CI");
        if (ci && strcmp(ci, "true") == 0) {
            printf("FAIL: a skip under CI=true is a failure\n");
            return 1;
        }
        return 77;
    }
    Suite *s = suite_create("tok_real");
    TCase *tc = tcase_create("real");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, qwen3_eog_control);
    tcase_add_test(tc, qwen3_nfc);
    tcase_add_test(tc, gemma3_spm_bpe);
    if (have("gpt4o")) {
        tcase_add_test(tc, gpt4o_o200k);
        tcase_add_test(tc, phi4mini_eog);
    }
    suite_add_tcase(s, tc);
    return run_suite(s);
}
