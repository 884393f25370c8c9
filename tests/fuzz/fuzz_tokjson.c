/* Fuzz target: the tokenizer.json (byte-level BPE) reader on arbitrary bytes:
 * JSON syntax, vocab / added_tokens / merges in both forms, pre-tokenizer
 * detection, post_processor parsing; then every accessor and the GGUF
 * emission on what it accepted. */
#include <stddef.h>
#include <stdint.h>

#include "gguf/gguf.h"
#include "hf/hf_tok.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static const int64_t n_vocab[2] = {-1, 64};
    volatile uint64_t sink = 0;
    for (int m = 0; m < 2; m++) {
        struct hf_tok *t = NULL;
        struct mw_err err;
        mw_err_clear(&err);
        if (hf_tok_parse_json(data, size, "fuzz.json", n_vocab[m], &t, &err) != MW_OK) {
            char buf[1024];
            sink += (uint8_t)mw_err_format(&err, buf, sizeof buf)[0];
            continue;
        }
        sink += hf_tok_n_vocab(t);
        for (uint32_t i = 0; i < hf_tok_n_vocab(t); i++) {
            size_t len = 0;
            const char *s = hf_tok_token(t, i, &len);
            if (s && len) sink += (uint8_t)s[len - 1];
            sink += (uint64_t)hf_tok_token_type(t, i);
        }
        for (uint32_t i = 0; i < hf_tok_n_merges(t); i++) {
            size_t len = 0;
            const char *s = hf_tok_merge(t, i, &len);
            if (s && len) sink += (uint8_t)s[0];
        }
        sink += (uint64_t)hf_tok_bos_id(t) + (uint64_t)hf_tok_add_bos(t);
        struct gguf_writer *w = NULL;
        if (gguf_writer_init(&w, &err) == MW_OK) {
            sink += hf_tok_write_gguf(t, w, "qwen2", &err);
            gguf_writer_free(w);
        }
        hf_tok_free(t);
    }
    (void)sink;
    return 0;
}
