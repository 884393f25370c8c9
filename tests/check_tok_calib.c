/* Calibration tokenizes with the runtime's tokenizer: the token ids in
 * calib_samples_build's samples are exactly rt_tok_encode's ids (no BOS,
 * parse_special off) of the same text, through a tokenizer built from the
 * converted GGUF -- the one tests/e2e/tok_peer.sh checks against llama.cpp.
 *
 *  - tinyllama-8m (SentencePiece): the HF directory (tokenizer.model through
 *    hf_tok) and llama.cpp's F16 GGUF, on calib.txt (TEXT: one document)
 *    and on the valid-UTF-8 lines of tests/fixtures/multilingual.txt;
 *  - the qwen2, llama3 and gpt2 fixtures of mk_hf_fixture.py (byte-level BPE,
 *    tokenizer.json through hf_tok) against their memwall conversion, on
 *    the multilingual sample as TEXT and as JSONL (one document per line,
 *    tokenized one by one and concatenated);
 *  - both chunkings: BOS-prepend (sample k = BOS + stream[kL .. kL+L-1]) and
 *    llama-imatrix's (chunk k = BOS + stream[kL .. kL+L-2]). */
#define _GNU_SOURCE
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "calib/calib.h"
#include "gguf/gguf.h"
#include "hf/hf.h"
#include "runtime/rt.h"

#include "check_common.h"

#define TINY_DIR MW_DATASETS_DIR "/tinyllama-8m"
#define TINY_GGUF MW_DATASETS_DIR "/reference/tinyllama-8m.llamacpp-f16.gguf"
#define CALIB_TXT MW_DATASETS_DIR "/corpora/calib.txt"
#define FIX_DIR MW_DATASETS_DIR "/../tests/fixtures"

// --- helpers ---

/* multilingual.txt without its "invalid:" line (a calibration corpus must
 * be valid UTF-8; the runtime-vs-llama.cpp test covers the invalid bytes) */
static char *multilingual_valid(size_t *n)
{
    char *b = (char *)read_file_ok(FIX_DIR "/multilingual.txt", n);
    char *p = strstr(b, "\ninvalid:");
    ck_assert_ptr_nonnull(p);
    char *e = memchr(p + 1, '\n', (size_t)(b + *n - (p + 1)));
    ck_assert_ptr_nonnull(e);
    memmove(p, e, (size_t)(b + *n - e));
    *n -= (size_t)(e - p);
    b[*n] = 0;
    return b;
}

/* ids of text[0..n) by t, no BOS, parse_special off (as calib does) */
static int32_t *encode(const struct rt_tok *t, const char *text, size_t n, size_t *n_ids)
{
    struct mw_err err;
    mw_err_clear(&err);
    size_t need = 0;
    const enum mw_status s = rt_tok_encode(t, text, n, false, false, NULL, 0, &need, &err);
    ck_assert(s == MW_OK || s == MW_E_NOSPACE);
    int32_t *ids = malloc((need + 1) * sizeof *ids);
    ck_assert_ptr_nonnull(ids);
    ck_assert_int_eq(rt_tok_encode(t, text, n, false, false, ids, need, n_ids, &err), MW_OK);
    ck_assert_uint_eq(*n_ids, need);
    return ids;
}

/* The runtime tokenizer of a GGUF file (both owned by the caller). */
struct gtok {
    struct gguf_file *f;
    struct rt_tok *t;
};

static struct gtok gguf_tok(const char *path, uint32_t n_vocab)
{
    struct gtok g = {NULL, NULL};
    struct mw_err err;
    mw_err_clear(&err);
    ck_assert_msg(gguf_open(path, 0, &g.f, &err) == MW_OK, "%s: %s", path, err.msg);
    ck_assert_msg(rt_tok_init(g.f, n_vocab, &g.t, &err) == MW_OK, "%s: %s", path, err.msg);
    return g;
}

static void gtok_free(struct gtok g)
{
    rt_tok_free(g.t);
    gguf_close(g.f);
}

/* Build samples of corpus c (name, fmt) with m's tokenizer and check every
 * position against stream (the reference ids of the whole corpus). Returns
 * the number of ids compared. */
static uint64_t check_samples(const struct calib_model *m, const char *buf, size_t n,
                              const char *name, enum calib_corpus_fmt fmt, const int32_t *stream,
                              size_t n_stream, uint32_t L, enum calib_chunking ch)
{
    struct mw_err err;
    mw_err_clear(&err);
    struct calib_corpus *c = NULL;
    ck_assert_msg(calib_corpus_parse(buf, n, name, fmt, &c, &err) == MW_OK, "%s: %s %s", name,
                  err.msg, err.where);
    struct calib_samples *s = NULL;
    const struct calib_sample_opts o = {.n_samples = 0, .seq_len = L, .chunking = ch};
    ck_assert_msg(calib_samples_build(c, calib_model_tok(m), &o, &s, &err) == MW_OK, "%s: %s",
                  name, err.msg);
    ck_assert(calib_samples_exhausted(s));
    ck_assert_uint_eq(calib_samples_stream_tokens(s), n_stream);
    const int32_t bos = rt_tok_bos(calib_model_tok(m));
    ck_assert_int_ge(bos, 0);
    const uint32_t ns = calib_samples_count(s), np = calib_samples_n_pos(s);
    /* llama-imatrix's chunks of a vocabulary that adds no BOS (qwen's) have
     * none: chunk k is stream[k*L, k*L+L) */
    const bool no_bos = ch == CALIB_CHUNK_LLAMACPP && !rt_tok_add_bos(calib_model_tok(m));
    const uint32_t lead = no_bos ? 0 : 1; /* ids before the text: the BOS */
    /* text ids per sample and where sample k's start in the stream */
    const uint32_t per = ch == CALIB_CHUNK_BOS_PREPEND || no_bos ? L : L - 1;
    ck_assert_uint_eq(np, ch == CALIB_CHUNK_BOS_PREPEND ? L + 1 : L);
    ck_assert_uint_eq(ns, ch == CALIB_CHUNK_BOS_PREPEND || no_bos ? n_stream / L
                                                                  : (n_stream + 1) / L);
    ck_assert_uint_gt(ns, 0);
    uint64_t compared = 0;
    for (uint32_t k = 0; k < ns; k++) {
        const int32_t *ids = calib_samples_tokens(s, k);
        if (lead) ck_assert_int_eq(ids[0], bos);
        const size_t at = (size_t)k * L; /* both chunkings advance L stream ids */
        for (uint32_t j = 0; j < per; j++) {
            ck_assert_msg(at + j < n_stream, "%s: sample %u past the stream", name, k);
            ck_assert_msg(ids[lead + j] == stream[at + j],
                          "%s: sample %u position %u: calib id %d, runtime id %d", name, k,
                          lead + j, ids[lead + j], stream[at + j]);
        }
        compared += per;
    }
    calib_samples_free(s);
    calib_corpus_free(c);
    return compared;
}

/* The same text as JSONL, one document per non-blank line; the reference
 * stream is the concatenation of the lines' encodings. */
static uint64_t check_jsonl(const struct calib_model *m, const struct rt_tok *ref, const char *text,
                            size_t n, uint32_t L)
{
    /* JSON-escape each line (the sample has quotes, backslashes, tabs, \r) */
    size_t cap = 6 * n + 64, o = 0;
    char *js = malloc(cap);
    int32_t *stream = NULL;
    size_t n_stream = 0, stream_cap = 0;
    ck_assert_ptr_nonnull(js);
    for (size_t i = 0; i < n;) {
        size_t e = i;
        while (e < n && text[e] != '\n') e++;
        if (e > i) { /* empty lines are not written (JSONL skips blank lines) */
            o += (size_t)snprintf(js + o, cap - o, "{\"text\": \"");
            for (size_t k = i; k < e; k++) {
                const unsigned char ch = (unsigned char)text[k];
                if (ch == '"' || ch == '\\') o += (size_t)snprintf(js + o, cap - o, "\\%c", ch);
                else if (ch < 0x20) o += (size_t)snprintf(js + o, cap - o, "\\u%04x", ch);
                else js[o++] = (char)ch;
            }
            o += (size_t)snprintf(js + o, cap - o, "\"}\n");
            size_t k_ids = 0;
            int32_t *ids = encode(ref, text + i, e - i, &k_ids);
            if (n_stream + k_ids > stream_cap) {
                stream_cap = 2 * (n_stream + k_ids) + 16;
                stream = realloc(stream, stream_cap * sizeof *stream);
                ck_assert_ptr_nonnull(stream);
            }
            memcpy(stream + n_stream, ids, k_ids * sizeof *ids);
            n_stream += k_ids;
            free(ids);
        }
        i = e + 1;
    }
    const uint64_t r = check_samples(m, js, o, "multilingual.jsonl", CALIB_CORPUS_JSONL, stream,
                                     n_stream, L, CALIB_CHUNK_BOS_PREPEND);
    free(stream);
    free(js);
    return r;
}

// --- tinyllama-8m (SentencePiece) ---

static const char *const tiny_paths[2] = {TINY_DIR, TINY_GGUF};

START_TEST(tinyllama_calib_ids_are_runtime_ids)
{
    struct mw_err err;
    mw_err_clear(&err);
    struct calib_model *m = NULL;
    ck_assert_msg(calib_model_open(tiny_paths[_i], &m, &err) == MW_OK, "%s", err.msg);
    struct gtok g = gguf_tok(TINY_GGUF, calib_model_hparams(m)->n_vocab);
    uint64_t compared = 0;

    size_t n = 0, n_ids = 0;
    char *text = (char *)read_file_ok(CALIB_TXT, &n);
    int32_t *ids = encode(g.t, text, n, &n_ids);
    compared += check_samples(m, text, n, "calib.txt", CALIB_CORPUS_TEXT, ids, n_ids, 256,
                              CALIB_CHUNK_BOS_PREPEND);
    compared += check_samples(m, text, n, "calib.txt", CALIB_CORPUS_TEXT, ids, n_ids, 512,
                              CALIB_CHUNK_LLAMACPP);
    free(ids);
    free(text);

    text = multilingual_valid(&n);
    ids = encode(g.t, text, n, &n_ids);
    compared += check_samples(m, text, n, "multilingual.txt", CALIB_CORPUS_TEXT, ids, n_ids, 16,
                              CALIB_CHUNK_BOS_PREPEND);
    compared += check_jsonl(m, g.t, text, n, 16);
    free(ids);
    free(text);
    fprintf(stderr, "tinyllama (%s): %llu calibration ids equal the runtime's\n",
            calib_model_is_gguf(m) ? "GGUF" : "HF dir", (unsigned long long)compared);
    gtok_free(g);
    calib_model_close(m);
}
END_TEST

// --- byte-level BPE fixtures ---

static const char *const fixture_kinds[3] = {"qwen2", "llama3", "gpt2"};

START_TEST(fixture_calib_ids_are_runtime_ids)
{
    const char *kind = fixture_kinds[_i];
    char dir[512], gguf[600];
    snprintf(dir, sizeof dir, MW_TEST_TMPDIR "/tokcalib-%s", kind);
    snprintf(gguf, sizeof gguf, "%s.gguf", dir);
    make_hf_fixture(kind, dir);
    struct mw_err err;
    mw_err_clear(&err);
    const struct hf_convert_opts co = {.type = HF_OUT_F16};
    ck_assert_msg(hf_convert(dir, gguf, &co, &err) == MW_OK, "convert: %s", err.msg);
    struct calib_model *m = NULL;
    ck_assert_msg(calib_model_open(dir, &m, &err) == MW_OK, "%s: %s", dir, err.msg);
    ck_assert(!calib_model_is_gguf(m));
    struct gtok g = gguf_tok(gguf, calib_model_hparams(m)->n_vocab);

    size_t n = 0, n_ids = 0;
    char *text = multilingual_valid(&n);
    int32_t *ids = encode(g.t, text, n, &n_ids);
    uint64_t compared = check_samples(m, text, n, "multilingual.txt", CALIB_CORPUS_TEXT, ids,
                                      n_ids, 16, CALIB_CHUNK_BOS_PREPEND);
    compared += check_samples(m, text, n, "multilingual.txt", CALIB_CORPUS_TEXT, ids, n_ids, 33,
                              CALIB_CHUNK_LLAMACPP);
    compared += check_jsonl(m, g.t, text, n, 16);
    fprintf(stderr, "fixture %s: %llu calibration ids equal the runtime's\n", kind,
            (unsigned long long)compared);
    free(ids);
    free(text);
    gtok_free(g);
    calib_model_close(m);
    unlink(gguf);
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("tok_calib");
    TCase *tc = tcase_create("tok_calib");
    tcase_set_timeout(tc, 120);
    tcase_add_loop_test(tc, tinyllama_calib_ids_are_runtime_ids, 0, 2);
    tcase_add_loop_test(tc, fixture_calib_ids_are_runtime_ids, 0, 3);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    return run_suite(suite());
}
