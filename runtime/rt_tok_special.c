/*
 * runtime/rt_tok_special.c — llama.cpp's special-token rules
 * (llama-vocab.cpp, llama_vocab::impl::load) on a loaded vocabulary: the
 * end-of-turn, end-of-message and fill-in-the-middle ids recognised by
 * their texts, the end-of-generation set, and the control / user token
 * types those rules give.
 */
#include "runtime/rt_tok_int.h"

#include <stdlib.h>
#include <string.h>

/* Token texts llama.cpp recognises (the same lists, in the same order). */
static const char *const EOT_NAMES[] = {
    "<|eot_id|>", "<|im_end|>", "<|end|>", "<end_of_turn>", "<|endoftext|>", "<|end_of_text|>",
    "<EOT>", "_<EOT>", "[EOT]", "<\xef\xbd\x9c" "end\xe2\x96\x81of\xe2\x96\x81sentence\xef\xbd\x9c>",
    "<end_of_utterance>", NULL};
static const char *const EOM_NAMES[] = {"<|eom_id|>", NULL};
static const char *const FIM_PRE_NAMES[] = {
    "<|fim_prefix|>", "<fim-prefix>", "<fim_prefix>", "<\xef\xbd\x9c" "fim\xe2\x96\x81" "begin\xef\xbd\x9c>",
    "<PRE>", "\xe2\x96\x81<PRE>", "<|code_prefix|>", "<|prefix|>", NULL};
static const char *const FIM_SUF_NAMES[] = {
    "<|fim_suffix|>", "<fim-suffix>", "<fim_suffix>", "<\xef\xbd\x9c" "fim\xe2\x96\x81hole\xef\xbd\x9c>",
    "<SUF>", "\xe2\x96\x81<SUF>", "<|code_suffix|>", "<|suffix|>", NULL};
static const char *const FIM_MID_NAMES[] = {
    "<|fim_middle|>", "<fim-middle>", "<fim_middle>", "<\xef\xbd\x9c" "fim\xe2\x96\x81" "end\xef\xbd\x9c>",
    "<MID>", "\xe2\x96\x81<MID>", "<|code_middle|>", "<|middle|>", NULL};
static const char *const FIM_PAD_NAMES[] = {"<|fim_pad|>", "<fim-pad>", "<fim_pad>", "<PAD>",
                                            "[PAD]", NULL};
static const char *const FIM_REP_NAMES[] = {"<|fim_repo|>", "<|repo_name|>", "<fim-repo>",
                                            "<REPO>", "<reponame>", NULL};
static const char *const FIM_SEP_NAMES[] = {"<|file_sep|>", NULL};
static const char *const EOG_NAMES[] = {
    "<|eot_id|>", "<|im_end|>", "<|end|>", "<|return|>", "<|call|>", "<|flush|>", "<|calls|>",
    "<end_of_turn>", "<|endoftext|>", "</s>", "<|eom_id|>", "<EOT>", "_<EOT>", "[EOT]", "[EOS]",
    "<|end_of_text|>", "<end_of_utterance>", "<eos>", "<turn|>", "<|tool_response>",
    "<\xef\xbd\x9c" "end\xe2\x96\x81of\xe2\x96\x81sentence\xef\xbd\x9c>", "[e~[", NULL};
static const char *const ALWAYS_USER[] = {"<|channel|>", "<|message|>", "<|start|>",
                                          "<|constrain|>", NULL};

static bool text_is(const struct rt_tok *t, uint32_t id, const char *s)
{
    const size_t n = strlen(s);
    return t->text[id].n == n && memcmp(t->text[id].p, s, n) == 0;
}

static bool text_in(const struct rt_tok *t, uint32_t id, const char *const *names)
{
    for (; *names; names++)
        if (text_is(t, id, *names)) return true;
    return false;
}

/* The id token_to_id maps a text to (-1 if none); llama.cpp iterates that
 * map, so a token whose text a later duplicate shadows is never seen. */
static bool is_canonical(const struct rt_tok *t, uint32_t id)
{
    return t->text[id].n > 0 &&
           rt_tok_find(t, (const char *)t->text[id].p, t->text[id].n) == (int32_t)id;
}

static void make_control(struct rt_tok *t, uint32_t id) { t->type[id] = RT_TT_CONTROL; }

static bool eog_add(struct rt_tok *t, int32_t id)
{
    if (id < 0 || (uint32_t)id >= t->n) return true;
    uint32_t i = 0;
    while (i < t->n_eog && t->eog[i] < id) i++;
    if (i < t->n_eog && t->eog[i] == id) return true;
    int32_t *v = realloc(t->eog, (t->n_eog + 1) * sizeof *v);
    if (!v) return false;
    t->eog = v;
    memmove(v + i + 1, v + i, (t->n_eog - i) * sizeof *v);
    v[i] = id;
    t->n_eog++;
    return true;
}

static void eog_remove(struct rt_tok *t, int32_t id)
{
    for (uint32_t i = 0; i < t->n_eog; i++)
        if (t->eog[i] == id) {
            memmove(t->eog + i, t->eog + i + 1, (t->n_eog - i - 1) * sizeof *t->eog);
            t->n_eog--;
            return;
        }
}

/* llama.cpp walks its unordered text -> id map; where two texts of one list
 * are both present, which one it picks for eot / a FIM id depends on that
 * map's order. memwall walks ids in ascending order (the first id wins).
 * Every token of the end-of-generation list is marked either way. */
bool rt__tok_special_rules(struct rt_tok *t)
{
    static const char *const *const FIM_NAMES[6] = {FIM_PRE_NAMES, FIM_SUF_NAMES,
                                                    FIM_MID_NAMES, FIM_PAD_NAMES,
                                                    FIM_REP_NAMES, FIM_SEP_NAMES};
    for (uint32_t id = 0; id < t->n; id++) {
        if (!is_canonical(t, id)) continue;
        if (t->eot < 0 && text_in(t, id, EOT_NAMES)) {
            t->eot = (int32_t)id;
            make_control(t, id);
        }
        if (t->eom < 0 && text_in(t, id, EOM_NAMES)) {
            t->eom = (int32_t)id;
            make_control(t, id);
        }
        for (int k = 0; k < 6; k++)
            if (t->fim[k] < 0 && text_in(t, id, FIM_NAMES[k])) {
                t->fim[k] = (int32_t)id;
                make_control(t, id);
            }
    }
    for (int k = 3; k < 6; k++) /* fim pad, rep, sep */
        if (!eog_add(t, t->fim[k])) return false;
    for (uint32_t id = 0; id < t->n; id++) {
        if (!is_canonical(t, id)) continue;
        if (text_in(t, id, EOG_NAMES)) {
            if (!eog_add(t, (int32_t)id)) return false;
            make_control(t, id);
        }
    }
    for (uint32_t id = 0; id < t->n; id++)
        if (is_canonical(t, id) && text_in(t, id, ALWAYS_USER)) t->type[id] = RT_TT_USER;
    if (!eog_add(t, t->eos) || !eog_add(t, t->eot) || !eog_add(t, t->eom)) return false;
    /* o200k_harmony / solar-open: "<|end|>" is not an end of generation
     * there; Gemma 4 / PaddleOCR: nor is "</s>" */
    int32_t end_id = -1, s_id = -1;
    bool has_return = false, has_call = false, has_flush = false, has_tool_response = false;
    for (uint32_t i = 0; i < t->n_eog; i++) {
        const uint32_t id = (uint32_t)t->eog[i];
        if (text_is(t, id, "<|return|>")) has_return = true;
        else if (text_is(t, id, "<|call|>") || text_is(t, id, "<|calls|>")) has_call = true;
        else if (text_is(t, id, "<|flush|>")) has_flush = true;
        else if (text_is(t, id, "<|end|>")) end_id = (int32_t)id;
        if (text_is(t, id, "<|tool_response>")) has_tool_response = true;
        else if (text_is(t, id, "</s>")) s_id = (int32_t)id;
    }
    if (end_id >= 0 && ((has_return && has_call) || (has_call && has_flush))) {
        eog_remove(t, end_id);
        t->type[end_id] = RT_TT_USER;
    }
    if (has_tool_response && s_id >= 0) {
        eog_remove(t, s_id);
        t->type[s_id] = RT_TT_NORMAL;
    }
    return true;
}
