/*
 * tests/check_split.h — the pre-tokenizer split check shared by
 * check_runtime_model.c and check_tok.c (include after <check.h> and
 * "runtime/rt_tok_int.h"): SPLIT(pre, text, words...) asserts that
 * rt__pre_split cuts text into exactly those words. Texts and words are
 * bounded: a text of more than CHECK_SPLIT_MAX code points or a word of more
 * than CHECK_SPLIT_WORD bytes fails the test instead of overrunning a buffer.
 */
#ifndef MW_TESTS_CHECK_SPLIT_H
#define MW_TESTS_CHECK_SPLIT_H

#include <string.h>

#define CHECK_SPLIT_MAX 256  /* code points per text */
#define CHECK_SPLIT_WORD 256 /* bytes per word, NUL included */

static void check_split(enum rt_pre pre, const char *text, const char *const *want, size_t n_want)
{
    uint32_t cps[CHECK_SPLIT_MAX];
    size_t lens[CHECK_SPLIT_MAX], n = 0;
    const size_t len = strlen(text);
    for (size_t i = 0; i < len;) {
        ck_assert_msg(n < CHECK_SPLIT_MAX, "'%s': more than %d code points", text,
                      CHECK_SPLIT_MAX);
        cps[n++] = rt__utf8_decode((const uint8_t *)text, len, &i);
    }
    const size_t nw = rt__pre_split(pre, cps, n, lens);
    ck_assert_msg(nw == n_want, "'%s': %zu words, want %zu", text, nw, n_want);
    size_t c = 0;
    for (size_t w = 0; w < nw; w++) {
        char word[CHECK_SPLIT_WORD];
        size_t o = 0;
        for (size_t k = c; k < c + lens[w]; k++) {
            ck_assert_msg(o + 4 < sizeof word, "'%s' word %zu: longer than %zu bytes", text, w,
                          sizeof word - 1);
            o += rt__utf8_encode(cps[k], (uint8_t *)word + o);
        }
        word[o] = '\0';
        ck_assert_msg(strcmp(word, want[w]) == 0, "'%s' word %zu: '%s', want '%s'", text, w, word,
                      want[w]);
        c += lens[w];
    }
}

#define SPLIT(pre, text, ...)                                                  \
    do {                                                                       \
        static const char *const w_[] = {__VA_ARGS__};                         \
        check_split(pre, text, w_, sizeof w_ / sizeof w_[0]);                  \
    } while (0)

#endif /* MW_TESTS_CHECK_SPLIT_H */
