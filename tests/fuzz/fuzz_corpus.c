/* Fuzz target: the calibration corpus reader on arbitrary bytes, as plain
 * text and as JSONL, each either raw or (when the bytes start with the gzip
 * magic) decompressed with a small cap: UTF-8 validation, cJSON per line,
 * "text" extraction, gzip members. Every accepted document is re-checked
 * to be valid UTF-8 and inside the corpus' text. */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#include "calib/calib.h"
#include "calib/calib_int.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static const enum calib_corpus_fmt fmts[2] = {CALIB_CORPUS_TEXT, CALIB_CORPUS_JSONL};
    volatile uint64_t sink = 0;
    for (int f = 0; f < 2; f++) {
        struct calib_corpus *c = NULL;
        struct mw_err err;
        mw_err_clear(&err);
        if (calib__corpus_parse_capped(data, size, "fuzz", fmts[f], (uint64_t)1 << 22, &c, &err) !=
            MW_OK) {
            char buf[1024];
            sink += (uint8_t)mw_err_format(&err, buf, sizeof buf)[0];
            continue;
        }
        uint64_t total = 0;
        for (uint64_t i = 0; i < calib_corpus_doc_count(c); i++) {
            size_t len = 0;
            const char *d = calib_corpus_doc(c, i, &len);
            if (!d || len == 0 || calib__utf8_check((const uint8_t *)d, len) != len) abort();
            total += len;
            sink += (uint8_t)d[len - 1] + calib_corpus_doc_line(c, i);
        }
        if (total > calib_corpus_text_bytes(c)) abort();
        calib_corpus_free(c);
    }
    (void)sink;
    return 0;
}
