/*
 * hf/hf_tok_json.c — Hugging Face tokenizer.json (byte-level BPE) -> "gpt2"
 * vocabulary, merges and tokenizer.ggml.pre (docs/formats.md §7.4).
 *
 * Errors name the JSON path of the offending value: model.vocab["Ġthe"],
 * model.merges[12], added_tokens[3].id, pre_tokenizer.pretokenizers[0].
 */
#include "hf/hf_tok_int.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const cJSON *obj_get(const cJSON *o, const char *k)
{
    return cJSON_IsObject(o) ? cJSON_GetObjectItemCaseSensitive(o, k) : NULL;
}

static const char *obj_str(const cJSON *o, const char *k)
{
    const cJSON *v = obj_get(o, k);
    return cJSON_IsString(v) ? v->valuestring : NULL;
}

static bool streq(const char *a, const char *b) { return a && b && strcmp(a, b) == 0; }

/* "<0xNN>" with two upper-case hex digits (gguf-py LlamaHfVocab's BYTE rule
 * accepts either case) */
static bool is_byte_piece(const char *s, size_t n)
{
    if (n != 6 || memcmp(s, "<0x", 3) != 0 || s[5] != '>') return false;
    for (int i = 3; i < 5; i++) {
        const char c = s[i];
        if (!((c >= '0' && c <= '9') || (c >= 'A' && c <= 'F') || (c >= 'a' && c <= 'f')))
            return false;
    }
    return true;
}

/* An integral JSON number within [0, INT64 range that doubles represent
 * exactly]. */
static bool json_uint(const cJSON *v, uint64_t *out)
{
    if (!cJSON_IsNumber(v)) return false;
    const double d = v->valuedouble;
    if (!(d >= 0.0) || d > 9007199254740992.0 || floor(d) != d) return false;
    *out = (uint64_t)d;
    return true;
}

/* The pre-tokenizers of tokenizer.json as a list: the Sequence's items, or
 * the single pre-tokenizer itself. */
static const cJSON *pre_items(const cJSON *pt, bool *is_seq)
{
    *is_seq = streq(obj_str(pt, "type"), "Sequence");
    return *is_seq ? obj_get(pt, "pretokenizers") : pt;
}

bool hf__json_is_bytelevel_bpe(const cJSON *root)
{
    const cJSON *model = obj_get(root, "model");
    if (!streq(obj_str(model, "type"), "BPE")) return false;
    if (cJSON_IsTrue(obj_get(model, "byte_fallback"))) return false;
    if (streq(obj_str(obj_get(root, "decoder"), "type"), "ByteLevel")) return true;
    bool seq;
    const cJSON *items = pre_items(obj_get(root, "pre_tokenizer"), &seq);
    if (!seq) return streq(obj_str(items, "type"), "ByteLevel");
    const cJSON *it;
    cJSON_ArrayForEach(it, items)
    {
        if (streq(obj_str(it, "type"), "ByteLevel")) return true;
    }
    return false;
}

bool hf__json_is_spm_bpe(const cJSON *root)
{
    const cJSON *model = obj_get(root, "model");
    return streq(obj_str(model, "type"), "BPE") && cJSON_IsTrue(obj_get(model, "byte_fallback"));
}

/* --- normalizer --- */

#define U2581 "\xe2\x96\x81"

static bool is_unicode_form(const char *type)
{
    return streq(type, "NFC") || streq(type, "NFD") || streq(type, "NFKC") || streq(type, "NFKD");
}

/* Is n the Replace " " -> U+2581 of SentencePiece-style tokenizers? */
static bool is_space_replace(const cJSON *n)
{
    return streq(obj_str(n, "type"), "Replace") &&
           streq(obj_str(obj_get(n, "pattern"), "String"), " ") &&
           streq(obj_str(n, "content"), U2581);
}

/* The normalizer of tokenizer.json, as memwall can apply it: byte-level BPE
 * takes one Unicode form (NFC, NFD, NFKC, NFKD; alone or as the only item
 * of a Sequence) into form; SentencePiece-style BPE (spm) takes exactly the
 * Replace " " -> U+2581 (alone or alone in a Sequence). Anything else is
 * MW_E_UNSUPPORTED naming the JSON path: a tokenizer memwall would silently
 * tokenize differently from the Hugging Face one. */
static enum mw_status check_normalizer(const cJSON *root, bool spm, char *form, size_t cap,
                                       struct mw_err *err)
{
    form[0] = 0;
    const cJSON *n = obj_get(root, "normalizer");
    if (!n || cJSON_IsNull(n)) {
        if (!spm) return MW_OK;
        mw_err_set_where(err, "normalizer");
        return MW_FAIL(err, MW_E_UNSUPPORTED, MW_ERR_OFF_NONE,
                       "a BPE with byte_fallback needs the Replace \" \" -> \"\u2581\" "
                       "normalizer (SentencePiece-style); this one has none");
    }
    const cJSON *items = n;
    bool seq = false;
    if (streq(obj_str(n, "type"), "Sequence")) {
        items = obj_get(n, "normalizers");
        seq = true;
        if (!cJSON_IsArray(items)) {
            mw_err_set_where(err, "normalizer.normalizers");
            return MW_FAIL(err, MW_E_FORMAT, MW_ERR_OFF_NONE, "expected an array");
        }
    }
    int idx = 0, n_ok = 0;
    const cJSON *it = seq ? items->child : items;
    for (; it; it = seq ? it->next : NULL, idx++) {
        char where[64];
        if (seq)
            snprintf(where, sizeof where, "normalizer.normalizers[%d]", idx);
        else
            snprintf(where, sizeof where, "normalizer");
        const char *type = obj_str(it, "type");
        char q[80];
        hf__json_quote(q, sizeof q, type ? type : "(none)");
        if (!spm && is_unicode_form(type) && n_ok == 0) {
            snprintf(form, cap, "%s", type);
            n_ok++;
            continue;
        }
        if (spm && is_space_replace(it) && n_ok == 0) {
            n_ok++;
            continue;
        }
        mw_err_set_where(err, "%s", where);
        if (streq(type, "Prepend"))
            return MW_FAIL(err, MW_E_UNSUPPORTED, MW_ERR_OFF_NONE,
                           "normalizer Prepend (a dummy prefix) is not supported for a "
                           "tokenizer.json without tokenizer.model");
        return MW_FAIL(err, MW_E_UNSUPPORTED, MW_ERR_OFF_NONE,
                       "normalizer %s is not supported here (supported: %s)", q,
                       spm ? "Replace \" \" -> \"\u2581\"" : "NFC, NFD, NFKC, NFKD, one of them");
    }
    if (spm && n_ok == 0) {
        mw_err_set_where(err, "normalizer");
        return MW_FAIL(err, MW_E_UNSUPPORTED, MW_ERR_OFF_NONE,
                       "expected the Replace \" \" -> \"\u2581\" normalizer");
    }
    return MW_OK;
}

/* SentencePiece-style BPE: no pre-tokenizer, or a Split on the string " "
 * (a no-op after the normalizer replaced every space), or a Sequence of
 * such Splits; ignore_merges false. */
static enum mw_status check_spm_bpe(const cJSON *root, struct mw_err *err)
{
    const cJSON *model = obj_get(root, "model");
    if (cJSON_IsTrue(obj_get(model, "ignore_merges"))) {
        mw_err_set_where(err, "model.ignore_merges");
        return MW_FAIL(err, MW_E_UNSUPPORTED, MW_ERR_OFF_NONE,
                       "ignore_merges with byte_fallback is not supported");
    }
    const cJSON *dropout = obj_get(model, "dropout");
    if (dropout && !cJSON_IsNull(dropout) && !(cJSON_IsNumber(dropout) && dropout->valuedouble == 0)) {
        mw_err_set_where(err, "model.dropout");
        return MW_FAIL(err, MW_E_UNSUPPORTED, MW_ERR_OFF_NONE, "BPE dropout is not supported");
    }
    const cJSON *pt = obj_get(root, "pre_tokenizer");
    if (!pt || cJSON_IsNull(pt)) return MW_OK;
    bool seq;
    const cJSON *items = pre_items(pt, &seq);
    if (seq && !cJSON_IsArray(items)) {
        mw_err_set_where(err, "pre_tokenizer.pretokenizers");
        return MW_FAIL(err, MW_E_FORMAT, MW_ERR_OFF_NONE, "expected an array");
    }
    int idx = 0;
    for (const cJSON *it = seq ? items->child : items; it; it = seq ? it->next : NULL, idx++) {
        if (streq(obj_str(it, "type"), "Split") &&
            streq(obj_str(obj_get(it, "pattern"), "String"), " ") &&
            !cJSON_IsTrue(obj_get(it, "invert")))
            continue;
        char q[80];
        hf__json_quote(q, sizeof q, obj_str(it, "type") ? obj_str(it, "type") : "(none)");
        if (seq)
            mw_err_set_where(err, "pre_tokenizer.pretokenizers[%d]", idx);
        else
            mw_err_set_where(err, "pre_tokenizer");
        return MW_FAIL(err, MW_E_UNSUPPORTED, MW_ERR_OFF_NONE,
                       "pre-tokenizer %s is not supported with a SentencePiece-style BPE "
                       "(supported: none, or a Split on \" \")", q);
    }
    return MW_OK;
}

/* --- tokenizer.ggml.pre --- */

struct known_pre {
    const char *name;
    const char *regex;
};

/* Split regexes of the families memwall recognizes, as they appear in
 * tokenizer.json (after JSON unescaping), in both the (?i:...) spelling HF
 * ships and the spelled-out one llama.cpp uses internally. */
static const struct known_pre known_pres[] = {
    {"llama-bpe",
     "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+"
     "[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"},
    {"llama-bpe",
     "(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|"
     "\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"},
    {"qwen2",
     "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| ?[^\\s\\p{L}\\p{N}]+"
     "[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"},
    {"qwen2",
     "(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|"
     "\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"},
    /* Qwen3.5: Qwen2's with \p{M} beside \p{L} (llama-vocab.cpp, QWEN35) */
    {"qwen35",
     "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?[\\p{L}\\p{M}]+|\\p{N}| ?"
     "[^\\s\\p{L}\\p{M}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"},
    {"qwen35",
     "(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\\r\\n\\p{L}\\p{N}]?"
     "[\\p{L}\\p{M}]+|\\p{N}| ?[^\\s\\p{L}\\p{M}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|"
     "\\s+(?!\\S)|\\s+"},
    /* o200k (GPT-4o, Phi-4-mini, gpt-oss): the name llama.cpp's converter
     * gives its hash */
    {"gpt-4o",
     "[^\\r\\n\\p{L}\\p{N}]?[\\p{Lu}\\p{Lt}\\p{Lm}\\p{Lo}\\p{M}]*[\\p{Ll}\\p{Lm}\\p{Lo}"
     "\\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?|[^\\r\\n\\p{L}\\p{N}]?[\\p{Lu}\\p{Lt}\\p{Lm}"
     "\\p{Lo}\\p{M}]+[\\p{Ll}\\p{Lm}\\p{Lo}\\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?|\\p{N}{1,3}| ?"
     "[^\\s\\p{L}\\p{N}]+[\\r\\n/]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"},
};

/* A Split keeps each regex match as one piece, which is what llama.cpp's
 * pre-tokenizers do, for behavior "Isolated" (matches and the text between
 * them each a piece) and for "Removed" with invert true (the text between
 * matches removed): the same pieces whenever the matches cover the whole
 * text, as every regex of known_pres does (its last alternatives, \s+ and
 * [^\s\p{L}\p{N}]+, take whatever the others leave). The other forms glue
 * matches to their neighbours ("MergedWithPrevious", "MergedWithNext",
 * "Contiguous"), drop the matches ("Removed") or keep the gaps as the
 * pieces (inverted "Isolated"): llama.cpp has no pre-tokenizer for them. */
static bool split_keeps_matches(const char *behavior, bool invert)
{
    if (!behavior || streq(behavior, "Isolated")) return !invert;
    return streq(behavior, "Removed") && invert;
}

static enum mw_status detect_pre(const cJSON *root, char *pre, size_t cap, struct mw_err *err)
{
    const cJSON *pt = obj_get(root, "pre_tokenizer");
    if (!cJSON_IsObject(pt)) {
        mw_err_set_where(err, "pre_tokenizer");
        return MW_FAIL(err, MW_E_UNSUPPORTED, MW_ERR_OFF_NONE,
                       "no pre_tokenizer: cannot choose tokenizer.ggml.pre for a byte-level BPE");
    }
    bool seq;
    const cJSON *items = pre_items(pt, &seq);
    if (seq && !cJSON_IsArray(items)) {
        mw_err_set_where(err, "pre_tokenizer.pretokenizers");
        return MW_FAIL(err, MW_E_FORMAT, MW_ERR_OFF_NONE, "expected an array");
    }
    const char *regex = NULL;
    int n_split = 0, n_bl = 0;
    bool bl_use_regex = true, split_after_bl = false;
    int idx = 0;
    const cJSON *it = seq ? items->child : items;
    for (; it; it = seq ? it->next : NULL, idx++) {
        char where[64];
        if (seq)
            snprintf(where, sizeof where, "pre_tokenizer.pretokenizers[%d]", idx);
        else
            snprintf(where, sizeof where, "pre_tokenizer");
        const char *type = obj_str(it, "type");
        if (streq(type, "Split")) {
            const cJSON *pat = obj_get(it, "pattern");
            const char *rx = obj_str(pat, "Regex");
            const char *behavior = obj_str(it, "behavior");
            if (!rx) {
                mw_err_set_where(err, "%s.pattern", where);
                return MW_FAIL(err, MW_E_UNSUPPORTED, MW_ERR_OFF_NONE,
                               "Split without a Regex pattern is not supported");
            }
            if (!split_keeps_matches(behavior, cJSON_IsTrue(obj_get(it, "invert")))) {
                char q[80];
                hf__json_quote(q, sizeof q, behavior ? behavior : "(none)");
                mw_err_set_where(err, "%s", where);
                return MW_FAIL(err, MW_E_UNSUPPORTED, MW_ERR_OFF_NONE,
                               "Split behavior %s%s is not supported (supported: \"Isolated\", "
                               "or \"Removed\" with invert true: each keeps exactly the regex's "
                               "matches, as llama.cpp's pre-tokenizers split)",
                               q, cJSON_IsTrue(obj_get(it, "invert")) ? " with invert true" : "");
            }
            if (n_bl) split_after_bl = true;
            regex = rx;
            n_split++;
        } else if (streq(type, "ByteLevel")) {
            const cJSON *ur = obj_get(it, "use_regex");
            bl_use_regex = !cJSON_IsFalse(ur);
            /* HF's ByteLevel default is add_prefix_space = true; llama.cpp's
             * byte-level BPE pre-tokenizers never add a prefix space. */
            if (!cJSON_IsFalse(obj_get(it, "add_prefix_space"))) {
                mw_err_set_where(err, "%s.add_prefix_space", where);
                return MW_FAIL(err, MW_E_UNSUPPORTED, MW_ERR_OFF_NONE,
                               "ByteLevel pre-tokenizer adds a prefix space (add_prefix_space "
                               "must be false); llama.cpp would tokenize differently");
            }
            n_bl++;
        } else {
            char q[80];
            hf__json_quote(q, sizeof q, type ? type : "(none)");
            mw_err_set_where(err, "%s.type", where);
            return MW_FAIL(err, MW_E_UNSUPPORTED, MW_ERR_OFF_NONE,
                           "pre-tokenizer %s is not supported for tokenizer.ggml.pre detection",
                           q);
        }
    }
    mw_err_set_where(err, "pre_tokenizer");
    if (n_bl != 1)
        return MW_FAIL(err, MW_E_UNSUPPORTED, MW_ERR_OFF_NONE,
                       "expected exactly one ByteLevel pre-tokenizer, found %d", n_bl);
    if (n_split == 0) {
        if (!bl_use_regex)
            return MW_FAIL(err, MW_E_UNSUPPORTED, MW_ERR_OFF_NONE,
                           "ByteLevel with use_regex false and no Split: no llama.cpp "
                           "pre-tokenizer matches");
        snprintf(pre, cap, "%s", "gpt-2");
        return MW_OK;
    }
    if (n_split > 1 || split_after_bl || bl_use_regex)
        return MW_FAIL(err, MW_E_UNSUPPORTED, MW_ERR_OFF_NONE,
                       "unsupported pre-tokenizer layout (expected one Split then ByteLevel "
                       "with use_regex false)");
    for (size_t i = 0; i < sizeof known_pres / sizeof known_pres[0]; i++) {
        if (strcmp(regex, known_pres[i].regex) == 0) {
            snprintf(pre, cap, "%s", known_pres[i].name);
            return MW_OK;
        }
    }
    char q[120];
    hf__json_quote(q, sizeof q, regex);
    return MW_FAIL(err, MW_E_UNSUPPORTED, MW_ERR_OFF_NONE,
                   "unrecognized Split regex %s (known: Llama 3 -> llama-bpe, Qwen2 -> qwen2, "
                   "Qwen3.5 -> qwen35, o200k -> gpt-4o)",
                   q);
}

/* Does the normalizer lowercase (gguf-py _parse_normalizer: Lowercase,
 * BertNormalizer with lowercase (default true), nested in Sequence)? */
static bool normalizer_lowercases(const cJSON *n, int depth)
{
    const char *type = obj_str(n, "type");
    if (streq(type, "Lowercase")) return true;
    if (streq(type, "BertNormalizer")) return !cJSON_IsFalse(obj_get(n, "lowercase"));
    if (streq(type, "Sequence") && depth < 16) {
        const cJSON *items = obj_get(n, "normalizers");
        const cJSON *list = cJSON_IsArray(items) ? items : NULL;
        const cJSON *it;
        cJSON_ArrayForEach(it, list)
        {
            if (normalizer_lowercases(it, depth + 1)) return true;
        }
    }
    return false;
}

/* --- vocabulary and merges --- */

static enum mw_status vocab_where_fail(struct mw_err *err, enum mw_status code, const char *tok,
                                       const char *fmt, ...) __attribute__((format(printf, 4, 5)));
static enum mw_status vocab_where_fail(struct mw_err *err, enum mw_status code, const char *tok,
                                       const char *fmt, ...)
{
    char q[96], msg[200];
    hf__json_quote(q, sizeof q, tok);
    mw_err_set_where(err, "model.vocab[%s]", q);
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    return MW_FAIL(err, code, MW_ERR_OFF_NONE, "%s", msg);
}

/* Replace every ' ' in s with U+0120 ('Ġ'), as gguf-py does for the pair
 * form of merges, appending to dst (size computed by the caller). */
static size_t copy_space_escaped(char *dst, const char *s)
{
    size_t k = 0;
    for (; *s; s++) {
        if (*s == ' ') {
            dst[k++] = (char)0xC4;
            dst[k++] = (char)0xA0;
        } else {
            dst[k++] = *s;
        }
    }
    return k;
}

static enum mw_status build_merges(struct hf_tok *t, const cJSON *merges, struct mw_err *err)
{
    if (!merges || cJSON_IsNull(merges)) return MW_OK;
    if (!cJSON_IsArray(merges)) {
        mw_err_set_where(err, "model.merges");
        return MW_FAIL(err, MW_E_FORMAT, MW_ERR_OFF_NONE, "expected an array");
    }
    const int n = cJSON_GetArraySize(merges);
    if (n <= 0) return MW_OK;
    t->merge_off = malloc((size_t)n * sizeof *t->merge_off);
    t->merge_len = malloc((size_t)n * sizeof *t->merge_len);
    if (!t->merge_off || !t->merge_len)
        return MW_FAIL(err, MW_E_NOMEM, MW_ERR_OFF_NONE, "out of memory (%d merges)", n);
    int form = 0; /* 1 string, 2 pair */
    uint32_t i = 0;
    char *tmp = NULL;
    size_t tmp_cap = 0;
    enum mw_status s = MW_OK;
    const cJSON *m;
    cJSON_ArrayForEach(m, merges)
    {
        const int this_form = cJSON_IsString(m) ? 1 : cJSON_IsArray(m) ? 2 : 0;
        mw_err_set_where(err, "model.merges[%u]", i);
        if (this_form == 0) {
            s = MW_FAIL(err, MW_E_FORMAT, MW_ERR_OFF_NONE,
                        "expected a string \"left right\" or a pair [left, right]");
            break;
        }
        if (form && this_form != form) {
            s = MW_FAIL(err, MW_E_FORMAT, MW_ERR_OFF_NONE,
                        "mixes the string and the pair form of merges (model.merges[0] uses "
                        "the %s form)", form == 1 ? "string" : "pair");
            break;
        }
        form = this_form;
        uint64_t off;
        size_t len;
        if (form == 1) {
            const char *str = m->valuestring;
            len = strlen(str);
            /* llama.cpp splits at the first space after position 0. */
            if (len < 3 || !memchr(str + 1, ' ', len - 2)) {
                s = MW_FAIL(err, MW_E_FORMAT, MW_ERR_OFF_NONE,
                            "merge string is not \"left right\" (two non-empty parts)");
                break;
            }
            if (!hf__pool_add(&t->pool, str, len, &off)) {
                s = MW_FAIL(err, MW_E_NOMEM, MW_ERR_OFF_NONE, "out of memory");
                break;
            }
        } else {
            const cJSON *a = m->child;
            const cJSON *b = a ? a->next : NULL;
            if (!cJSON_IsString(a) || !cJSON_IsString(b) || b->next || !a->valuestring[0] ||
                !b->valuestring[0]) {
                s = MW_FAIL(err, MW_E_FORMAT, MW_ERR_OFF_NONE,
                            "merge pair must be exactly two non-empty strings");
                break;
            }
            const size_t la = strlen(a->valuestring), lb = strlen(b->valuestring);
            /* worst case every byte is a space (2 bytes each), plus the separator */
            if (la > SIZE_MAX / 4 || lb > SIZE_MAX / 4) {
                s = MW_FAIL(err, MW_E_FORMAT, MW_ERR_OFF_NONE, "merge too long");
                break;
            }
            const size_t need = 2 * la + 2 * lb + 1;
            if (need > tmp_cap) {
                char *nt = realloc(tmp, need);
                if (!nt) {
                    s = MW_FAIL(err, MW_E_NOMEM, MW_ERR_OFF_NONE, "out of memory");
                    break;
                }
                tmp = nt;
                tmp_cap = need;
            }
            len = copy_space_escaped(tmp, a->valuestring);
            tmp[len++] = ' ';
            len += copy_space_escaped(tmp + len, b->valuestring);
            if (!hf__pool_add(&t->pool, tmp, len, &off)) {
                s = MW_FAIL(err, MW_E_NOMEM, MW_ERR_OFF_NONE, "out of memory");
                break;
            }
        }
        if (len > UINT32_MAX) {
            s = MW_FAIL(err, MW_E_FORMAT, MW_ERR_OFF_NONE, "merge too long");
            break;
        }
        t->merge_off[i] = off;
        t->merge_len[i] = (uint32_t)len;
        i++;
    }
    free(tmp);
    if (s) return s;
    t->n_merges = i;
    mw_err_set_where(err, "%s", "");
    return MW_OK;
}

enum mw_status hf__json_build(const cJSON *root, const char *name, int64_t n_vocab,
                              struct hf_tok **out, struct mw_err *err)
{
    *out = NULL;
    mw_err_set_path(err, name);
    if (!cJSON_IsObject(root)) {
        mw_err_set_where(err, "(top level)");
        return MW_FAIL(err, MW_E_FORMAT, MW_ERR_OFF_NONE, "expected a JSON object");
    }
    const cJSON *model = obj_get(root, "model");
    if (!cJSON_IsObject(model)) {
        mw_err_set_where(err, "model");
        return MW_FAIL(err, MW_E_FORMAT, MW_ERR_OFF_NONE, "missing or not an object");
    }
    const bool spm = !hf__json_is_bytelevel_bpe(root) && hf__json_is_spm_bpe(root);
    if (!spm && !hf__json_is_bytelevel_bpe(root)) {
        mw_err_set_where(err, "model.type");
        return MW_FAIL(err, MW_E_UNSUPPORTED, MW_ERR_OFF_NONE,
                       "not a byte-level BPE tokenizer (needs model.type \"BPE\", no "
                       "byte_fallback, a ByteLevel decoder or pre-tokenizer) nor a "
                       "SentencePiece-style BPE (byte_fallback true)");
    }
    if (n_vocab > (int64_t)HF_TOK_MAX_VOCAB)
        return MW_FAIL(err, MW_E_VALUE, MW_ERR_OFF_NONE, "vocab_size %lld exceeds the limit %u",
                       (long long)n_vocab, HF_TOK_MAX_VOCAB);
    if (normalizer_lowercases(obj_get(root, "normalizer"), 0)) {
        /* Newer gguf-py writes a lowercase flag only recent llama.cpp reads;
         * without it llama.cpp would tokenize differently. */
        mw_err_set_where(err, "normalizer");
        return MW_FAIL(err, MW_E_UNSUPPORTED, MW_ERR_OFF_NONE,
                       "lowercasing normalizer is not supported for byte-level BPE");
    }
    char form[8];
    enum mw_status s0 = check_normalizer(root, spm, form, sizeof form, err);
    if (!s0 && spm) s0 = check_spm_bpe(root, err);
    if (s0) return s0;

    const cJSON *vocab = obj_get(model, "vocab");
    if (!cJSON_IsObject(vocab)) {
        mw_err_set_where(err, "model.vocab");
        return MW_FAIL(err, MW_E_FORMAT, MW_ERR_OFF_NONE, "missing or not an object");
    }
    const cJSON *added = obj_get(root, "added_tokens");
    if (added && !cJSON_IsNull(added) && !cJSON_IsArray(added)) {
        mw_err_set_where(err, "added_tokens");
        return MW_FAIL(err, MW_E_FORMAT, MW_ERR_OFF_NONE, "expected an array");
    }

    /* Pass 1: validate ids, find the highest. */
    uint64_t max_id = 0, n_entries = 0;
    bool any = false;
    const cJSON *e;
    cJSON_ArrayForEach(e, vocab)
    {
        uint64_t id;
        if (!json_uint(e, &id))
            return vocab_where_fail(err, MW_E_FORMAT, e->string,
                                    "token id is not a non-negative integer");
        if (id >= HF_TOK_MAX_VOCAB)
            return vocab_where_fail(err, MW_E_VALUE, e->string, "id %llu exceeds the limit %u",
                                    (unsigned long long)id, HF_TOK_MAX_VOCAB);
        if (!any || id > max_id) max_id = id;
        any = true;
        n_entries++;
    }
    uint32_t ai = 0;
    cJSON_ArrayForEach(e, added)
    {
        uint64_t id;
        if (!cJSON_IsObject(e) || !json_uint(obj_get(e, "id"), &id)) {
            mw_err_set_where(err, "added_tokens[%u].id", ai);
            return MW_FAIL(err, MW_E_FORMAT, MW_ERR_OFF_NONE,
                           "missing or not a non-negative integer");
        }
        if (!obj_str(e, "content")) {
            mw_err_set_where(err, "added_tokens[%u].content", ai);
            return MW_FAIL(err, MW_E_FORMAT, MW_ERR_OFF_NONE, "missing or not a string");
        }
        const cJSON *sp = obj_get(e, "special");
        if (sp && !cJSON_IsBool(sp)) {
            mw_err_set_where(err, "added_tokens[%u].special", ai);
            return MW_FAIL(err, MW_E_FORMAT, MW_ERR_OFF_NONE, "expected true or false");
        }
        if (id >= HF_TOK_MAX_VOCAB) {
            mw_err_set_where(err, "added_tokens[%u].id", ai);
            return MW_FAIL(err, MW_E_VALUE, MW_ERR_OFF_NONE, "id %llu exceeds the limit %u",
                           (unsigned long long)id, HF_TOK_MAX_VOCAB);
        }
        if (!any || id > max_id) max_id = id;
        any = true;
        n_entries++;
        ai++;
    }
    if (!any) {
        mw_err_set_where(err, "model.vocab");
        return MW_FAIL(err, MW_E_FORMAT, MW_ERR_OFF_NONE, "empty vocabulary");
    }
    uint64_t n_tok;
    if (n_vocab >= 0) {
        n_tok = (uint64_t)n_vocab;
        if (max_id >= n_tok) {
            /* name the first offender */
            cJSON_ArrayForEach(e, vocab)
            {
                uint64_t id;
                if (json_uint(e, &id) && id >= n_tok)
                    return vocab_where_fail(err, MW_E_VALUE, e->string,
                                            "id %llu >= vocab_size %llu (config.json)",
                                            (unsigned long long)id, (unsigned long long)n_tok);
            }
            ai = 0;
            cJSON_ArrayForEach(e, added)
            {
                uint64_t id;
                /* SentencePiece-style (Gemma 3 1B: <image_soft_token> is
                 * 262144 = vocab_size): dropped, as llama.cpp's
                 * SentencePiece path drops added tokens out of range */
                if (json_uint(obj_get(e, "id"), &id) && id >= n_tok && !spm) {
                    mw_err_set_where(err, "added_tokens[%u].id", ai);
                    return MW_FAIL(err, MW_E_VALUE, MW_ERR_OFF_NONE,
                                   "id %llu >= vocab_size %llu (config.json)",
                                   (unsigned long long)id, (unsigned long long)n_tok);
                }
                ai++;
            }
        }
    } else {
        n_tok = max_id + 1;
        /* Without a vocab_size, do not let a lone huge id size the table. */
        if (n_tok > 2 * n_entries + 1024) {
            mw_err_set_where(err, "model.vocab");
            return MW_FAIL(err, MW_E_VALUE, MW_ERR_OFF_NONE,
                           "highest id %llu is implausible for %llu tokens",
                           (unsigned long long)max_id, (unsigned long long)n_entries);
        }
    }
    if (n_tok == 0)
        return MW_FAIL(err, MW_E_VALUE, MW_ERR_OFF_NONE, "vocab_size is 0");

    struct hf_tok *t = hf__tok_new(spm ? HF_TOK_SPMBPE : HF_TOK_BPE);
    if (!t) return MW_FAIL(err, MW_E_NOMEM, MW_ERR_OFF_NONE, "out of memory");
    snprintf(t->normalizer, sizeof t->normalizer, "%s", form);
    enum mw_status s = hf__tok_alloc(t, (uint32_t)n_tok, false, err);
    if (s) goto fail;

    /* Pass 2: fill. */
    cJSON_ArrayForEach(e, vocab)
    {
        uint64_t id = 0;
        (void)json_uint(e, &id);
        if (t->tok_off[id] != UINT64_MAX) {
            s = vocab_where_fail(err, MW_E_VALUE, e->string,
                                 "id %llu is used by two vocab entries",
                                 (unsigned long long)id);
            goto fail;
        }
        const size_t len = strlen(e->string);
        if ((s = hf__tok_set(t, (uint32_t)id, e->string, len, err))) goto fail;
        t->types[id] = spm && is_byte_piece(e->string, len) ? 6 : 1;
    }
    /* Added tokens override vocab entries with the same id, as HF's
     * get_vocab() does. Type 3 if special or looking special, else 4 with
     * U+2581 replaced by a space (convert_hf_to_gguf.py get_vocab_base). */
    cJSON_ArrayForEach(e, added)
    {
        uint64_t id = 0;
        (void)json_uint(obj_get(e, "id"), &id);
        if (id >= n_tok) continue; /* spm only, see above */
        const char *content = obj_get(e, "content")->valuestring;
        const bool special = cJSON_IsTrue(obj_get(e, "special")) || hf__looks_special(content);
        if (spm) {
            /* text as written: the Hugging Face tokenizer matches added
             * tokens in the raw text; U+2581 runs are what its normalizer
             * makes of spaces, kept normal so they print as spaces */
            if ((s = hf__tok_set(t, (uint32_t)id, content, strlen(content), err))) goto fail;
            t->types[id] = special ? 3 : strstr(content, U2581) ? 1 : 4;
        } else if (special) {
            if ((s = hf__tok_set(t, (uint32_t)id, content, strlen(content), err))) goto fail;
            t->types[id] = 3;
        } else {
            const size_t len = strlen(content);
            char *tmp = malloc(len + 1);
            if (!tmp) {
                s = MW_FAIL(err, MW_E_NOMEM, MW_ERR_OFF_NONE, "out of memory");
                goto fail;
            }
            size_t k = 0;
            for (size_t j = 0; j < len; j++) {
                if (j + 2 < len && (uint8_t)content[j] == 0xE2 &&
                    (uint8_t)content[j + 1] == 0x96 && (uint8_t)content[j + 2] == 0x81) {
                    tmp[k++] = ' ';
                    j += 2;
                } else {
                    tmp[k++] = content[j];
                }
            }
            s = hf__tok_set(t, (uint32_t)id, tmp, k, err);
            free(tmp);
            if (s) goto fail;
            t->types[id] = 4;
        }
    }
    if ((s = hf__tok_fill_gaps(t, err))) goto fail;
    if ((s = build_merges(t, obj_get(model, "merges"), err))) goto fail;
    if (spm) {
        /* the name llama.cpp's converter finds for this tokenizer (its
         * pre-tokenizer hash is granite-embedding-311m-multilingual-r2's,
         * which uses Gemma 3's tokenizer); llama.cpp runs its gemma4
         * pre-tokenizer for it */
        snprintf(t->pre, sizeof t->pre, "%s", "granite-embed-multi-311m");
    } else if ((s = detect_pre(root, t->pre, sizeof t->pre, err))) {
        goto fail;
    }
    mw_err_set_where(err, "%s", "");
    *out = t;
    return MW_OK;
fail:
    hf_tok_free(t);
    return s;
}

/* The id transformers' get_vocab() gives text (the first token with it), or
 * -1. */
static int64_t find_token(const struct hf_tok *t, const char *text)
{
    const size_t n = strlen(text);
    for (uint32_t i = 0; i < t->n_vocab; i++)
        if (t->tok_len[i] == n && memcmp(t->pool.buf + t->tok_off[i], text, n) == 0) return i;
    return -1;
}

/* A special token's name in tokenizer_config.json: a string or {"content"}. */
static const char *special_name(const cJSON *v)
{
    if (cJSON_IsObject(v)) v = obj_get(v, "content");
    return cJSON_IsString(v) ? v->valuestring : NULL;
}

enum mw_status hf__json_hf_types(struct hf_tok *t, const cJSON *tc, struct mw_err *err)
{
    /* always rendered, so that a chat parser can read them
     * (conversion/gemma.py Gemma4Model.set_vocab) */
    static const char *const visible[] = {"<|channel>",       "<channel|>",      "<|tool_call>",
                                          "<tool_call|>",     "<|tool_response>",
                                          "<tool_response|>", "<|\"|>",          NULL};
    static const char *const named[] = {"bos_token", "eos_token", "unk_token", "sep_token",
                                        "pad_token", "cls_token", "mask_token", NULL};
    free(t->hf_types);
    t->hf_types = malloc((size_t)t->n_vocab * sizeof *t->hf_types);
    if (!t->hf_types) return MW_FAIL(err, MW_E_NOMEM, MW_ERR_OFF_NONE, "out of memory");
    for (uint32_t i = 0; i < t->n_vocab; i++)
        t->hf_types[i] = is_byte_piece(t->pool.buf + t->tok_off[i], t->tok_len[i]) ? 6 : 1;
    for (int k = 0; named[k]; k++) {
        const char *nm = special_name(obj_get(tc, named[k]));
        const int64_t id = nm ? find_token(t, nm) : -1;
        if (id >= 0 && t->hf_types[id] != 6) t->hf_types[id] = 3;
    }
    const cJSON *extra = obj_get(tc, "additional_special_tokens"), *e;
    if (cJSON_IsArray(extra)) {
        cJSON_ArrayForEach(e, extra)
        {
            const char *nm = special_name(e);
            const int64_t id = nm ? find_token(t, nm) : -1;
            if (id >= 0 && t->hf_types[id] != 6) t->hf_types[id] = 3;
        }
    }
    for (int k = 0; visible[k]; k++) {
        const int64_t id = find_token(t, visible[k]);
        if (id >= 0) t->hf_types[id] = 4;
    }
    return MW_OK;
}

enum mw_status hf__json_write_hf_scores(const struct hf_tok *t, struct gguf_writer *w,
                                        struct mw_err *err)
{
    float *sc = malloc((size_t)t->n_vocab * sizeof *sc);
    if (!sc) return MW_FAIL(err, MW_E_NOMEM, MW_ERR_OFF_NONE, "out of memory");
    for (uint32_t i = 0; i < t->n_vocab; i++) sc[i] = -1000.0f;
    const enum mw_status s =
        gguf_writer_set_arr(w, "tokenizer.ggml.scores", GGUF_VT_F32, sc, t->n_vocab, err);
    free(sc);
    return s;
}

bool hf__json_is_gemma4(const cJSON *cfg)
{
    const char *mt = obj_str(cfg, "model_type");
    const char *tmt = obj_str(obj_get(cfg, "text_config"), "model_type");
    return (mt && strncmp(mt, "gemma4", 6) == 0) || (tmt && strncmp(tmt, "gemma4", 6) == 0);
}
