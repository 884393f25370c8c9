/* Unit tests of the byte-level BPE pre-tokenizer's Unicode classes
 * (runtime/rt_tok_pre.c): scripts and number forms that the first,
 * hand-written classifier got wrong (it counted them as punctuation), each
 * split as llama.cpp splits it. The tables come from llama.cpp's
 * unicode-data.cpp (runtime/gen_tok_classes.py); tests/e2e/tok_peer.sh
 * checks every code point against llama.cpp itself. These cases need no
 * llama.cpp. */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/rt_tok_int.h"

#include "check_common.h"
#include "check_split.h"

START_TEST(classes_of_other_scripts)
{
    /* Thai: letters, then marks (Mn), which are no letters and only start a word */
    SPLIT(RT_PRE_LLAMA3,
          " \xe0\xb8\xaa\xe0\xb8\xa7\xe0\xb8\xb1\xe0\xb8\xaa\xe0\xb8\x94\xe0\xb8\xb5",
          " \xe0\xb8\xaa\xe0\xb8\xa7", "\xe0\xb8\xb1\xe0\xb8\xaa\xe0\xb8\x94", "\xe0\xb8\xb5");
    SPLIT(RT_PRE_QWEN2, " \xe0\xb8\xaa\xe0\xb8\xa7\xe0\xb8\xb1\xe0\xb8\xaa\xe0\xb8\x94\xe0\xb8\xb5",
          " \xe0\xb8\xaa\xe0\xb8\xa7", "\xe0\xb8\xb1\xe0\xb8\xaa\xe0\xb8\x94", "\xe0\xb8\xb5");
    /* Tamil: spacing (Mc) and non-spacing (Mn) marks are no letters either */
    SPLIT(RT_PRE_LLAMA3, "\xe0\xae\xa4\xe0\xae\xae\xe0\xae\xbf\xe0\xae\xb4\xe0\xaf\x8d",
          "\xe0\xae\xa4\xe0\xae\xae", "\xe0\xae\xbf\xe0\xae\xb4", "\xe0\xaf\x8d");
    /* Bengali digits (Nd): runs of 3 (llama3), single digits (qwen2) */
    SPLIT(RT_PRE_LLAMA3, "\xe0\xa7\xa7\xe0\xa7\xa8\xe0\xa7\xa9\xe0\xa7\xaa\xe0\xa7\xab",
          "\xe0\xa7\xa7\xe0\xa7\xa8\xe0\xa7\xa9", "\xe0\xa7\xaa\xe0\xa7\xab");
    SPLIT(RT_PRE_QWEN2, "\xe0\xa7\xa7\xe0\xa7\xa8\xe0\xa7\xa9\xe0\xa7\xaa\xe0\xa7\xab",
          "\xe0\xa7\xa7", "\xe0\xa7\xa8", "\xe0\xa7\xa9", "\xe0\xa7\xaa", "\xe0\xa7\xab");
    /* Thai digits */
    SPLIT(RT_PRE_LLAMA3, "a\xe0\xb9\x91\xe0\xb9\x92\xe0\xb9\x93\xe0\xb9\x94", "a",
          "\xe0\xb9\x91\xe0\xb9\x92\xe0\xb9\x93", "\xe0\xb9\x94");
    /* Cherokee letters (Lu) */
    SPLIT(RT_PRE_LLAMA3, "a\xe1\x8e\xa0\xe1\x8e\xa1\xe1\x8e\xa2 b",
          "a\xe1\x8e\xa0\xe1\x8e\xa1\xe1\x8e\xa2", " b");
    /* Mongolian letters (Lo) */
    SPLIT(RT_PRE_LLAMA3,
          " \xe1\xa0\xae\xe1\xa0\xa3\xe1\xa0\xa9\xe1\xa0\xad\xe1\xa0\xa3\xe1\xa0\xaf!",
          " \xe1\xa0\xae\xe1\xa0\xa3\xe1\xa0\xa9\xe1\xa0\xad\xe1\xa0\xa3\xe1\xa0\xaf", "!");
    /* letter-like numbers (Nl, No) are \p{N} */
    SPLIT(RT_PRE_LLAMA3, "\xe2\x85\xb7\xc2\xb2\xc2\xbd" "x", "\xe2\x85\xb7\xc2\xb2\xc2\xbd", "x");
    /* ideographic space: white space, and the optional prefix of a word */
    SPLIT(RT_PRE_LLAMA3, "\xe4\xb8\xad\xe3\x80\x80\xe6\x96\x87", "\xe4\xb8\xad",
          "\xe3\x80\x80\xe6\x96\x87");
    /* a code point past U+10FFFF (F7 BF BF BF decodes to U+1FFFFF): "other" */
    SPLIT(RT_PRE_LLAMA3, "a\xf7\xbf\xbf\xbf" "b", "a", "\xf7\xbf\xbf\xbf" "b");
}
END_TEST

/* qwen35: Qwen2's regex with [\p{L}\p{M}] for \p{L}: combining marks stay in
 * the word (llama.cpp's unicode_regex_split_custom_qwen35); digits alone */
START_TEST(qwen35_marks)
{
    /* the Thai word that qwen2 cuts at each mark is one word */
    SPLIT(RT_PRE_QWEN35,
          " \xe0\xb8\xaa\xe0\xb8\xa7\xe0\xb8\xb1\xe0\xb8\xaa\xe0\xb8\x94\xe0\xb8\xb5",
          " \xe0\xb8\xaa\xe0\xb8\xa7\xe0\xb8\xb1\xe0\xb8\xaa\xe0\xb8\x94\xe0\xb8\xb5");
    /* Devanagari: virama and vowel signs (Mn, Mc) inside the word */
    SPLIT(RT_PRE_QWEN35, "\xe0\xa4\xa8\xe0\xa4\xae\xe0\xa4\xb8\xe0\xa5\x8d\xe0\xa4\xa4\xe0\xa5\x87!",
          "\xe0\xa4\xa8\xe0\xa4\xae\xe0\xa4\xb8\xe0\xa5\x8d\xe0\xa4\xa4\xe0\xa5\x87", "!");
    /* NFD Latin (e + U+0301): one word; qwen2 splits the accent off */
    SPLIT(RT_PRE_QWEN35, " cafe\xcc\x81 x", " cafe\xcc\x81", " x");
    SPLIT(RT_PRE_QWEN2, " cafe\xcc\x81 x", " cafe", "\xcc\x81", " x");
    /* a mark after a space starts a word; marks are no punctuation */
    SPLIT(RT_PRE_QWEN35, "a \xcc\x81\xcc\x88" "b.\xcc\x81", "a", " \xcc\x81\xcc\x88" "b", ".\xcc\x81");
    /* digits one by one, contractions as qwen2 */
    SPLIT(RT_PRE_QWEN35, "x123 it'S", "x", "1", "2", "3", " it", "'S");
}
END_TEST

/* gpt-4o (o200k) as llama.cpp's std::regex runs it on category-collapsed
 * text: ASCII case decides the words, a non-ASCII letter counts as upper and
 * lower case, a mark is no letter; numbers by 3; contractions only after a
 * word; "/" and newlines close a punctuation run */
START_TEST(gpt4o_words)
{
    SPLIT(RT_PRE_GPT4O, "HELLOworld helloWORLD", "HELLOworld", " hello", "WORLD");
    SPLIT(RT_PRE_GPT4O, "I'm DON'T they'RE 'tis", "I'm", " DON'T", " they'RE", " '", "tis");
    SPLIT(RT_PRE_GPT4O, "1234567 x", "123", "456", "7", " x");
    SPLIT(RT_PRE_GPT4O, "a !!\n/b", "a", " !!\n/", "b");
    SPLIT(RT_PRE_GPT4O, "  x\n\n  y  ", " ", " x", "\n\n", " ", " y", "  ");
    /* non-ASCII letters: lower after an upper run, and the last of an upper
     * run that has no lower part ends the first alternative's match */
    SPLIT(RT_PRE_GPT4O, "\xd0\x9f\xd0\xa0\xd0\x98mir", "\xd0\x9f\xd0\xa0\xd0\x98mir");
    SPLIT(RT_PRE_GPT4O, "\xc3\x80" "BC.", "\xc3\x80", "BC", ".");
    SPLIT(RT_PRE_GPT4O, "hello\xd0\x9f\xd1\x80\xd0\xb8", "hello\xd0\x9f\xd1\x80\xd0\xb8");
    /* a combining mark is punctuation here (Hugging Face's regex keeps it
     * in the word) */
    SPLIT(RT_PRE_GPT4O, " cafe\xcc\x81 x", " cafe", "\xcc\x81", " x");
}
END_TEST

int main(void)
{
    Suite *s = suite_create("tok");
    TCase *tc = tcase_create("classes");
    tcase_add_test(tc, classes_of_other_scripts);
    tcase_add_test(tc, qwen35_marks);
    tcase_add_test(tc, gpt4o_words);
    suite_add_tcase(s, tc);
    return run_suite(s);
}
