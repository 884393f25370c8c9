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

int main(void)
{
    Suite *s = suite_create("tok");
    TCase *tc = tcase_create("classes");
    tcase_add_test(tc, classes_of_other_scripts);
    suite_add_tcase(s, tc);
    return run_suite(s);
}
