/*
 * runtime/rt_tok_int.h — internals of the tokenizer (rt_tok.c,
 * rt_tok_pre.c) and its tests.
 */
#ifndef MW_RT_TOK_INT_H
#define MW_RT_TOK_INT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "runtime/rt.h"

enum rt_pre {
    RT_PRE_SPM = 0,     /* SentencePiece: no pre-tokenizer */
    RT_PRE_LLAMA3,      /* llama3 / llama-v3 / llama-bpe / falcon3 / pixtral ... */
    RT_PRE_QWEN2,       /* qwen2 / deepseek-r1-qwen */
    RT_PRE_GPT2,        /* gpt-2 and the names that use its regex */
    RT_PRE_UNSUPPORTED, /* a BPE pre-tokenizer not written out here: no encoding */
};

/* One code point from s[*i..n) (llama.cpp's decoder: no overlong or
 * surrogate checks; an invalid sequence gives U+FFFD and consumes 1 byte). */
uint32_t rt__utf8_decode(const uint8_t *s, size_t n, size_t *i);
/* Encode cp (< 2^21) into out; returns 1..4. */
size_t rt__utf8_encode(uint32_t cp, uint8_t out[4]);
/* Bytes of the UTF-8 sequence a lead byte announces (1 for continuation
 * bytes), as llama.cpp's unicode_len_utf8. */
size_t rt__utf8_len(uint8_t lead);

/* Split n code points into words with pre's regex; lens (capacity n) gets
 * each word's length in code points; returns the number of words. */
size_t rt__pre_split(enum rt_pre pre, const uint32_t *cp, size_t n, size_t *lens);

/* GPT-2's byte-level alphabet. */
uint32_t rt__byte_to_cp(uint8_t b);
int rt__cp_to_byte(uint32_t cp); /* -1 if cp is not one of the 256 */

#endif /* MW_RT_TOK_INT_H */
