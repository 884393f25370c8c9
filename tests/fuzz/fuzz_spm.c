/* Fuzz target: the SentencePiece tokenizer.model (protobuf) reader on
 * arbitrary bytes, with the file's own piece count and with a fixed
 * vocab_size, then every accessor and the GGUF emission on what it accepted. */
#include <stddef.h>
#include <stdint.h>

#include "gguf/gguf.h"
#include "hf/hf_tok.h"

static uint64_t walk(const struct hf_tok *t)
{
    uint64_t acc = hf_tok_n_vocab(t) + hf_tok_n_merges(t);
    for (uint32_t i = 0; i < hf_tok_n_vocab(t); i++) {
        size_t len = 0;
        const char *s = hf_tok_token(t, i, &len);
        if (s && len) acc += (uint8_t)s[len - 1];
        acc += (uint64_t)hf_tok_token_type(t, i);
        acc += hf_tok_score(t, i) == hf_tok_score(t, i);
    }
    for (int k = 0; k < HF_TOK_SPECIAL_COUNT; k++)
        acc += (uint64_t)hf_tok_special_id(t, (enum hf_tok_special)k);
    struct gguf_writer *w = NULL;
    struct mw_err err;
    mw_err_clear(&err);
    if (gguf_writer_init(&w, &err) == MW_OK) {
        acc += hf_tok_write_gguf(t, w, "llama", &err);
        gguf_writer_free(w);
    }
    return acc;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static const int64_t n_vocab[2] = {-1, 300};
    volatile uint64_t sink = 0;
    for (int m = 0; m < 2; m++) {
        struct hf_tok *t = NULL;
        struct mw_err err;
        mw_err_clear(&err);
        if (hf_tok_parse_spm(data, size, "fuzz.model", n_vocab[m], &t, &err) == MW_OK) {
            sink += walk(t);
            hf_tok_free(t);
        } else {
            char buf[1024];
            sink += (uint8_t)mw_err_format(&err, buf, sizeof buf)[0];
        }
    }
    (void)sink;
    return 0;
}
