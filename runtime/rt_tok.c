/*
 * runtime/rt_tok.c — the tokenizer's vocabulary from GGUF metadata (rt.h,
 * docs/formats.md §7): SentencePiece BPE ("llama"), byte-level BPE ("gpt2")
 * and SentencePiece-style BPE ("gemma4") read and checked, their lookups,
 * and decoding ids back to text. Encoding text to ids, written to give
 * llama.cpp's ids, is rt_tok_encode.c; llama.cpp's control /
 * end-of-generation rules are rt_tok_special.c; the pre-tokenizers
 * rt_tok_pre.c; the Unicode normalization memwall's own key
 * memwall.tokenizer.normalizer asks for rt_unicode_norm.c.
 *
 * Vocabulary strings are views into the mapped file. Lookups go through two
 * open-addressing hash tables built at init: text -> id (a later duplicate
 * wins, as in llama.cpp's token_to_id) and, for BPE, "left right" -> merge
 * rank (the first duplicate wins, as std::map::emplace).
 */
#include "runtime/rt_tok_int.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gguf/gguf.h"

// --- hashing ---

static uint64_t fnv(uint64_t h, const uint8_t *p, size_t n)
{
    for (size_t i = 0; i < n; i++) h = (h ^ p[i]) * 0x100000001b3ULL;
    return h;
}
#define FNV0 0xcbf29ce484222325ULL

int32_t rt__tok_find_text(const struct rt_tok *t, const uint8_t *p, size_t n)
{
    if (n == 0) return -1;
    uint64_t i = fnv(FNV0, p, n) & t->ht_mask;
    for (;;) {
        const uint32_t v = t->ht[i];
        if (v == 0) return -1;
        const struct rt_str *s = &t->text[v - 1];
        if (s->n == n && memcmp(s->p, p, n) == 0) return (int32_t)(v - 1);
        i = (i + 1) & t->ht_mask;
    }
}

static void insert_text(struct rt_tok *t, uint32_t id)
{
    const struct rt_str *s = &t->text[id];
    if (s->n == 0) return; /* llama.cpp renames empty tokens; they never match text */
    uint64_t i = fnv(FNV0, s->p, s->n) & t->ht_mask;
    for (;;) {
        const uint32_t v = t->ht[i];
        if (v == 0 || (t->text[v - 1].n == s->n && memcmp(t->text[v - 1].p, s->p, s->n) == 0)) {
            t->ht[i] = id + 1; /* a later duplicate wins */
            return;
        }
        i = (i + 1) & t->ht_mask;
    }
}

static uint64_t merge_hash(const uint8_t *l, size_t ln, const uint8_t *r, size_t rn)
{
    const uint8_t sp = ' ';
    return fnv(fnv(fnv(FNV0, l, ln), &sp, 1), r, rn);
}

int64_t rt__tok_find_merge(const struct rt_tok *t, const uint8_t *l, size_t ln, const uint8_t *r,
                           size_t rn)
{
    if (!t->mt) return -1;
    uint64_t i = merge_hash(l, ln, r, rn) & t->mt_mask;
    for (;;) {
        const uint32_t v = t->mt[i];
        if (v == 0) return -1;
        const struct rt_str *m = &t->merges[v - 1];
        if (m->n == ln + 1 + rn && memcmp(m->p, l, ln) == 0 && m->p[ln] == ' ' &&
            memcmp(m->p + ln + 1, r, rn) == 0)
            return (int64_t)(v - 1);
        i = (i + 1) & t->mt_mask;
    }
}

static void insert_merge(struct rt_tok *t, uint32_t idx)
{
    const struct rt_str *m = &t->merges[idx];
    /* split at the first space after position 0 (llama.cpp) */
    const uint8_t *sp = m->n > 1 ? memchr(m->p + 1, ' ', m->n - 1) : NULL;
    if (!sp) return; /* not a pair: can never match */
    const size_t ln = (size_t)(sp - m->p);
    uint64_t i = merge_hash(m->p, ln, sp + 1, m->n - ln - 1) & t->mt_mask;
    for (;;) {
        const uint32_t v = t->mt[i];
        if (v == 0) {
            t->mt[i] = idx + 1;
            return;
        }
        const struct rt_str *o = &t->merges[v - 1];
        if (o->n == m->n && memcmp(o->p, m->p, m->n) == 0) return; /* first one wins */
        i = (i + 1) & t->mt_mask;
    }
}

// --- init ---

static enum mw_status fail_key(const struct gguf_file *f, struct mw_err *err, const char *key,
                               enum mw_status code, uint64_t off, const char *msg)
{
    mw_err_set_path(err, gguf_path(f));
    mw_err_set_where(err, "key '%s'", key);
    return MW_FAIL(err, code, off, "%s", msg);
}

static const struct gguf_value *kv(const struct gguf_file *f, const char *key, uint64_t *off)
{
    const int64_t i = gguf_kv_find(f, key);
    if (i < 0) return NULL;
    *off = gguf_kv_off(f, (uint64_t)i);
    return gguf_kv_value(f, (uint64_t)i);
}

/* memwall.tokenizer.normalizer: a string NFC / NFD / NFKC / NFKD (memwall
 * writes it from tokenizer.json; llama.cpp has no such key). */
static enum mw_status read_normalizer(const struct gguf_file *f, struct rt_tok *t,
                                      struct mw_err *err)
{
    static const char *const key = "memwall.tokenizer.normalizer";
    uint64_t off = 0;
    const struct gguf_value *v = kv(f, key, &off);
    t->norm = RT_NORM_NONE;
    if (!v) return MW_OK;
    if (v->type != GGUF_VT_STRING) return fail_key(f, err, key, MW_E_FORMAT, off, "expected string");
    static const char *const names[] = {"NFC", "NFD", "NFKC", "NFKD"};
    static const enum rt_norm forms[] = {RT_NORM_NFC, RT_NORM_NFD, RT_NORM_NFKC, RT_NORM_NFKD};
    for (int i = 0; i < 4; i++)
        if (v->n == strlen(names[i]) && memcmp(v->data, names[i], v->n) == 0) {
            t->norm = forms[i];
            return MW_OK;
        }
    return fail_key(f, err, key, MW_E_UNSUPPORTED, off,
                    "unknown normalizer (supported: NFC, NFD, NFKC, NFKD)");
}

/* An optional u32 special id; ids >= n are ignored as llama.cpp does. */
static enum mw_status special_id(const struct gguf_file *f, const char *key, uint32_t n,
                                 int32_t *id, struct mw_err *err)
{
    uint64_t off = 0;
    const struct gguf_value *v = kv(f, key, &off);
    if (!v) return MW_OK;
    if (v->type != GGUF_VT_U32) {
        char msg[96];
        snprintf(msg, sizeof msg, "has type %s, expected u32", gguf_vtype_name(v->type));
        return fail_key(f, err, key, MW_E_FORMAT, off, msg);
    }
    const uint32_t x = mw_le32(v->data);
    if (x < n) *id = (int32_t)x;
    return MW_OK;
}

static enum mw_status opt_bool(const struct gguf_file *f, const char *key, bool *out,
                               struct mw_err *err)
{
    uint64_t off = 0;
    const struct gguf_value *v = kv(f, key, &off);
    if (!v) return MW_OK;
    if (v->type != GGUF_VT_BOOL)
        return fail_key(f, err, key, MW_E_FORMAT, off, "expected bool");
    *out = v->data[0] != 0;
    return MW_OK;
}

static int cmp_special(const void *a, const void *b, void *ud)
{
    const struct rt_tok *t = ud;
    const uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
    if (t->text[x].n != t->text[y].n) return t->text[x].n > t->text[y].n ? -1 : 1;
    return x < y ? -1 : x > y;
}

/* insertion sort (no qsort_r in C11); the special lists are short */
static void sort_special(struct rt_tok *t)
{
    for (uint32_t i = 1; i < t->n_special; i++) {
        const uint32_t v = t->special[i];
        uint32_t j = i;
        while (j > 0 && cmp_special(&t->special[j - 1], &v, t) > 0) {
            t->special[j] = t->special[j - 1];
            j--;
        }
        t->special[j] = v;
    }
}

static uint64_t table_size(uint64_t n)
{
    uint64_t s = 16;
    while (s < 2 * n) s <<= 1;
    return s;
}

static enum rt_pre pre_from_name(const char *s)
{
    static const char *const llama3[] = {"llama3", "llama-v3", "llama-bpe", "falcon3",
                                         "falcon-h1", "pixtral", "midm-2.0", "lfm2"};
    static const char *const qwen2[] = {"qwen2", "deepseek-r1-qwen", "megrez"};
    static const char *const gpt2[] = {"gpt-2", "phi-2", "jina-es", "jina-de", "gigachat",
                                       "jina-v2-es", "jina-v2-de"};
    static const char *const gpt4o[] = {"gpt-4o", "llama4", "kanana2", "talkie", "minimax-m2"};
    if (strcmp(s, "gemma4") == 0 || strcmp(s, "granite-embed-multi-311m") == 0)
        return RT_PRE_GEMMA4;
    for (size_t i = 0; i < sizeof llama3 / sizeof llama3[0]; i++)
        if (strcmp(s, llama3[i]) == 0) return RT_PRE_LLAMA3;
    for (size_t i = 0; i < sizeof qwen2 / sizeof qwen2[0]; i++)
        if (strcmp(s, qwen2[i]) == 0) return RT_PRE_QWEN2;
    for (size_t i = 0; i < sizeof gpt2 / sizeof gpt2[0]; i++)
        if (strcmp(s, gpt2[i]) == 0) return RT_PRE_GPT2;
    for (size_t i = 0; i < sizeof gpt4o / sizeof gpt4o[0]; i++)
        if (strcmp(s, gpt4o[i]) == 0) return RT_PRE_GPT4O;
    if (strcmp(s, "qwen35") == 0) return RT_PRE_QWEN35;
    return RT_PRE_UNSUPPORTED;
}

enum mw_status rt_tok_init(const struct gguf_file *f, uint32_t n_vocab, struct rt_tok **out,
                           struct mw_err *err)
{
    *out = NULL;
    enum mw_status s;
    uint64_t off = 0;
    const struct gguf_value *vm = kv(f, "tokenizer.ggml.model", &off);
    if (!vm) return fail_key(f, err, "tokenizer.ggml.model", MW_E_FORMAT, MW_ERR_OFF_NONE,
                             "missing (no tokenizer in this file)");
    if (vm->type != GGUF_VT_STRING)
        return fail_key(f, err, "tokenizer.ggml.model", MW_E_FORMAT, off, "expected string");
    enum rt_tok_kind kind;
    bool spm_bpe = false;
    if (vm->n == 5 && memcmp(vm->data, "llama", 5) == 0) {
        kind = RT_TOK_SPM;
    } else if (vm->n == 4 && memcmp(vm->data, "gpt2", 4) == 0) {
        kind = RT_TOK_BPE;
    } else if (vm->n == 6 && memcmp(vm->data, "gemma4", 6) == 0) {
        kind = RT_TOK_BPE;
        spm_bpe = true;
    } else {
        char msg[128];
        snprintf(msg, sizeof msg, "tokenizer '%.*s' (supported: llama, gpt2, gemma4)",
                 (int)(vm->n < 40 ? vm->n : 40), (const char *)vm->data);
        return fail_key(f, err, "tokenizer.ggml.model", MW_E_UNSUPPORTED, off, msg);
    }
    const struct gguf_value *vt = kv(f, "tokenizer.ggml.tokens", &off);
    if (!vt) return fail_key(f, err, "tokenizer.ggml.tokens", MW_E_FORMAT, MW_ERR_OFF_NONE,
                             "missing (cannot find tokenizer vocab)");
    if (vt->type != GGUF_VT_ARRAY || vt->elem_type != GGUF_VT_STRING)
        return fail_key(f, err, "tokenizer.ggml.tokens", MW_E_FORMAT, off,
                        "expected an array of strings");
    if (vt->n != n_vocab || n_vocab == 0) {
        char msg[128];
        snprintf(msg, sizeof msg, "%llu tokens, the model has %u rows",
                 (unsigned long long)vt->n, n_vocab);
        return fail_key(f, err, "tokenizer.ggml.tokens", MW_E_FORMAT, off, msg);
    }
    const struct gguf_value *vs = kv(f, "tokenizer.ggml.scores", &off);
    if (vs && (vs->type != GGUF_VT_ARRAY || vs->elem_type != GGUF_VT_F32 || vs->n != n_vocab))
        return fail_key(f, err, "tokenizer.ggml.scores", MW_E_FORMAT, off,
                        "expected f32[n_tokens]");
    const struct gguf_value *vty = kv(f, "tokenizer.ggml.token_type", &off);
    if (vty && (vty->type != GGUF_VT_ARRAY || vty->elem_type != GGUF_VT_I32 || vty->n != n_vocab))
        return fail_key(f, err, "tokenizer.ggml.token_type", MW_E_FORMAT, off,
                        "expected i32[n_tokens]");
    const struct gguf_value *vmg = kv(f, "tokenizer.ggml.merges", &off);
    if (kind == RT_TOK_BPE && !vmg)
        return fail_key(f, err, "tokenizer.ggml.merges", MW_E_FORMAT, MW_ERR_OFF_NONE,
                        "missing (required for gpt2 tokenizers)");
    if (vmg && (vmg->type != GGUF_VT_ARRAY || vmg->elem_type != GGUF_VT_STRING ||
                vmg->n >= UINT32_MAX))
        return fail_key(f, err, "tokenizer.ggml.merges", MW_E_FORMAT, off,
                        "expected an array of strings");

    struct rt_tok *t = calloc(1, sizeof *t);
    if (!t) return MW_FAIL(err, MW_E_NOMEM, MW_ERR_OFF_NONE, "tokenizer");
    t->kind = kind;
    t->spm_bpe = spm_bpe;
    t->model_gemma4 = spm_bpe;
    t->n = n_vocab;
    t->ht_mask = table_size(n_vocab) - 1;
    t->text = calloc(n_vocab, sizeof *t->text);
    t->score = calloc(n_vocab, sizeof *t->score);
    t->type = calloc(n_vocab, sizeof *t->type);
    t->ht = calloc(t->ht_mask + 1, sizeof *t->ht);
    if (!t->text || !t->score || !t->type || !t->ht) goto nomem;
    for (uint32_t i = 0; i < n_vocab; i++) {
        struct gguf_value e;
        if (!gguf_value_elem(vt, i, &e) || e.n > UINT32_MAX) {
            rt_tok_free(t);
            return fail_key(f, err, "tokenizer.ggml.tokens", MW_E_FORMAT, off, "bad element");
        }
        t->text[i] = (struct rt_str){e.data, (uint32_t)e.n};
        if (vs) {
            const uint32_t u = mw_le32(vs->data + 4 * (uint64_t)i);
            memcpy(&t->score[i], &u, sizeof u);
        }
        t->type[i] = vty ? (int32_t)mw_le32(vty->data + 4 * (uint64_t)i) : RT_TT_NORMAL;
        insert_text(t, i);
    }
    if (vmg && vmg->n > 0) {
        t->n_merges = (uint32_t)vmg->n;
        t->merges = calloc(t->n_merges, sizeof *t->merges);
        t->mt_mask = table_size(t->n_merges) - 1;
        t->mt = calloc(t->mt_mask + 1, sizeof *t->mt);
        if (!t->merges || !t->mt) goto nomem;
        for (uint32_t i = 0; i < t->n_merges; i++) {
            struct gguf_value e;
            if (!gguf_value_elem(vmg, i, &e) || e.n > UINT32_MAX) {
                rt_tok_free(t);
                return fail_key(f, err, "tokenizer.ggml.merges", MW_E_FORMAT, off, "bad element");
            }
            t->merges[i] = (struct rt_str){e.data, (uint32_t)e.n};
            insert_merge(t, i);
        }
    }

    /* pre-tokenizer */
    const struct gguf_value *vp = kv(f, "tokenizer.ggml.pre", &off);
    if (vp && vp->type != GGUF_VT_STRING) {
        rt_tok_free(t);
        return fail_key(f, err, "tokenizer.ggml.pre", MW_E_FORMAT, off, "expected string");
    }
    snprintf(t->pre_name, sizeof t->pre_name, "%.*s",
             vp ? (int)(vp->n < 31 ? vp->n : 31) : 7, vp ? (const char *)vp->data : "default");
    if (kind == RT_TOK_SPM) {
        t->pre = RT_PRE_SPM;
        t->bos = 1, t->eos = 2, t->unk = 0;
        t->add_bos = true;
        t->add_space_prefix = true;
    } else if (spm_bpe) {
        /* llama.cpp: pre-tokenizer "gemma4" whatever the file says, no
         * default special ids */
        snprintf(t->pre_name, sizeof t->pre_name, "gemma4");
        t->pre = RT_PRE_GEMMA4;
        t->bos = t->eos = t->unk = -1;
        t->add_bos = false;
        t->add_space_prefix = false;
    } else {
        t->pre = pre_from_name(t->pre_name);
        t->bos = 11, t->eos = 11, t->unk = -1; /* llama.cpp's BPE defaults */
        /* "granite-embed-multi-311m" (what llama.cpp's converter detects for
         * a tokenizer.json-only Gemma 3) runs the gemma4 pre-tokenizer */
        t->spm_bpe = spm_bpe = t->pre == RT_PRE_GEMMA4;
        t->add_bos = t->pre == RT_PRE_LLAMA3;
        t->ignore_merges = t->pre == RT_PRE_LLAMA3;
        t->add_space_prefix = false;
    }
    if (t->bos >= (int32_t)n_vocab) t->bos = -1;
    if (t->eos >= (int32_t)n_vocab) t->eos = -1;
    if (t->unk >= (int32_t)n_vocab) t->unk = -1;
    t->eot = t->eom = -1;
    for (int k = 0; k < 6; k++) t->fim[k] = -1;
    if ((s = special_id(f, "tokenizer.ggml.bos_token_id", n_vocab, &t->bos, err)) ||
        (s = special_id(f, "tokenizer.ggml.eos_token_id", n_vocab, &t->eos, err)) ||
        (s = special_id(f, "tokenizer.ggml.unknown_token_id", n_vocab, &t->unk, err)) ||
        (s = special_id(f, "tokenizer.ggml.eot_token_id", n_vocab, &t->eot, err)) ||
        (s = special_id(f, "tokenizer.ggml.eom_token_id", n_vocab, &t->eom, err)) ||
        (s = special_id(f, "tokenizer.ggml.fim_pre_token_id", n_vocab, &t->fim[0], err)) ||
        (s = special_id(f, "tokenizer.ggml.fim_suf_token_id", n_vocab, &t->fim[1], err)) ||
        (s = special_id(f, "tokenizer.ggml.fim_mid_token_id", n_vocab, &t->fim[2], err)) ||
        (s = special_id(f, "tokenizer.ggml.fim_pad_token_id", n_vocab, &t->fim[3], err)) ||
        (s = special_id(f, "tokenizer.ggml.fim_rep_token_id", n_vocab, &t->fim[4], err)) ||
        (s = special_id(f, "tokenizer.ggml.fim_sep_token_id", n_vocab, &t->fim[5], err)) ||
        (s = special_id(f, "tokenizer.ggml.prefix_token_id", n_vocab, &t->fim[0], err)) ||
        (s = special_id(f, "tokenizer.ggml.suffix_token_id", n_vocab, &t->fim[1], err)) ||
        (s = special_id(f, "tokenizer.ggml.middle_token_id", n_vocab, &t->fim[2], err)) ||
        (s = opt_bool(f, "tokenizer.ggml.add_bos_token", &t->add_bos, err)) ||
        (s = opt_bool(f, "tokenizer.ggml.add_eos_token", &t->add_eos, err)) ||
        (s = opt_bool(f, "tokenizer.ggml.add_space_prefix", &t->add_space_prefix, err))) {
        rt_tok_free(t);
        return s;
    }
    /* llama.cpp: add_bos is forced on for the gemma4 pre-tokenizer */
    if (spm_bpe) t->add_bos = true;
    /* memwall.tokenizer.normalizer (memwall's files only) */
    if ((s = read_normalizer(f, t, err))) {
        rt_tok_free(t);
        return s;
    }

    /* byte pieces and the GPT-2 alphabet */
    for (int b = 0; b < 256; b++) {
        char nm[8];
        snprintf(nm, sizeof nm, "<0x%02X>", b);
        t->byte_tok[b] =
            kind == RT_TOK_SPM || spm_bpe ? rt__tok_find_text(t, (const uint8_t *)nm, 6) : -1;
        t->b2cp[b] = rt__byte_to_cp((uint8_t)b);
    }
    for (int i = 0; i < 512; i++) t->cp2b[i] = (int16_t)rt__cp_to_byte((uint32_t)i);

    /* llama.cpp's text rules: end-of-turn / FIM / end-of-generation tokens
     * become control tokens, and the end-of-generation set */
    if (!rt__tok_special_rules(t)) goto nomem;

    /* special tokens, longest first (tokenizer_st_partition's order) */
    for (uint32_t i = 0; i < n_vocab; i++)
        if (t->type[i] == RT_TT_CONTROL || t->type[i] == RT_TT_USER || t->type[i] == RT_TT_UNKNOWN)
            t->n_special++;
    t->special = calloc(t->n_special ? t->n_special : 1, sizeof *t->special);
    if (!t->special) goto nomem;
    t->n_special = 0;
    for (uint32_t i = 0; i < n_vocab; i++)
        if ((t->type[i] == RT_TT_CONTROL || t->type[i] == RT_TT_USER ||
             t->type[i] == RT_TT_UNKNOWN) &&
            t->text[i].n > 0)
            t->special[t->n_special++] = i;
    sort_special(t);
    *out = t;
    return MW_OK;
nomem:
    rt_tok_free(t);
    return MW_FAIL(err, MW_E_NOMEM, MW_ERR_OFF_NONE, "tokenizer tables");
}

void rt_tok_free(struct rt_tok *t)
{
    if (!t) return;
    free(t->text);
    free(t->score);
    free(t->type);
    free(t->ht);
    free(t->merges);
    free(t->mt);
    free(t->special);
    free(t->eog);
    free(t);
}

// --- decoding ---

static size_t put(char *buf, size_t cap, size_t at, const void *p, size_t n)
{
    if (at < cap) memcpy(buf + at, p, n < cap - at ? n : cap - at);
    return at + n;
}

size_t rt_tok_piece(const struct rt_tok *t, int32_t id, bool special, char *buf, size_t cap)
{
    if (id < 0 || (uint32_t)id >= t->n) return 0;
    const struct rt_str *s = &t->text[id];
    const int32_t ty = t->type[id];
    if (ty == RT_TT_CONTROL) return special ? put(buf, cap, 0, s->p, s->n) : 0;
    /* user-defined: as written (SPM still turns U+2581 into spaces below) */
    if (ty == RT_TT_USER && t->kind == RT_TOK_BPE) return put(buf, cap, 0, s->p, s->n);
    size_t n = 0;
    if (t->kind == RT_TOK_SPM || t->spm_bpe) {
        if (t->spm_bpe && ty == RT_TT_UNKNOWN) return special ? put(buf, cap, 0, s->p, s->n) : 0;
        if (t->spm_bpe && ty != RT_TT_NORMAL && ty != RT_TT_BYTE)
            return 0; /* llama.cpp: unsupported */
        if (ty == RT_TT_UNKNOWN) return put(buf, cap, 0, "\xe2\x96\x85", 3);
        if (ty == RT_TT_BYTE && s->n == 6 && s->p[0] == '<' && s->p[1] == '0' && s->p[2] == 'x' &&
            s->p[5] == '>') {
            unsigned v = 0;
            for (int k = 3; k < 5; k++) {
                const uint8_t c = s->p[k];
                v = v * 16 + (c >= '0' && c <= '9' ? c - '0' : c >= 'A' && c <= 'F' ? c - 'A' + 10
                              : c >= 'a' && c <= 'f' ? c - 'a' + 10 : 0);
            }
            const uint8_t b = (uint8_t)v;
            return put(buf, cap, 0, &b, 1);
        }
        for (uint32_t i = 0; i < s->n;) {
            if (i + 2 < s->n && s->p[i] == 0xE2 && s->p[i + 1] == 0x96 && s->p[i + 2] == 0x81) {
                n = put(buf, cap, n, " ", 1);
                i += 3;
            } else {
                n = put(buf, cap, n, s->p + i, 1);
                i++;
            }
        }
        return n;
    }
    /* byte-level: every character is one byte */
    for (size_t i = 0; i < s->n;) {
        const uint32_t cp = rt__utf8_decode(s->p, s->n, &i);
        const int b = cp < 512 ? t->cp2b[cp] : -1;
        if (b >= 0) {
            const uint8_t c = (uint8_t)b;
            n = put(buf, cap, n, &c, 1);
        } else { /* not a byte character: keep it as written */
            uint8_t u[4];
            n = put(buf, cap, n, u, rt__utf8_encode(cp, u));
        }
    }
    return n;
}

const char *rt_tok_text(const struct rt_tok *t, int32_t id, size_t *len)
{
    if (id < 0 || (uint32_t)id >= t->n) return NULL;
    *len = t->text[id].n;
    return (const char *)t->text[id].p;
}

int32_t rt_tok_find(const struct rt_tok *t, const char *text, size_t len)
{
    return rt__tok_find_text(t, (const uint8_t *)text, len);
}

uint32_t rt_tok_n_vocab(const struct rt_tok *t) { return t->n; }
int32_t rt_tok_bos(const struct rt_tok *t) { return t->bos; }
int32_t rt_tok_eos(const struct rt_tok *t) { return t->eos; }
bool rt_tok_add_bos(const struct rt_tok *t) { return t->add_bos; }
bool rt_tok_add_space_prefix(const struct rt_tok *t) { return t->add_space_prefix; }

bool rt_tok_is_eog(const struct rt_tok *t, int32_t id)
{
    for (uint32_t i = 0; i < t->n_eog; i++)
        if (t->eog[i] == id) return true;
    return false;
}

uint32_t rt_tok_eog_ids(const struct rt_tok *t, int32_t *ids, uint32_t cap)
{
    for (uint32_t i = 0; i < t->n_eog && i < cap; i++) ids[i] = t->eog[i];
    return t->n_eog;
}

bool rt_tok_is_control(const struct rt_tok *t, int32_t id)
{
    return id >= 0 && (uint32_t)id < t->n && t->type[id] == RT_TT_CONTROL;
}

const char *rt_tok_model_name(const struct rt_tok *t)
{
    return t->kind == RT_TOK_SPM ? "llama" : t->model_gemma4 ? "gemma4" : "gpt2";
}

const char *rt_tok_pre_name(const struct rt_tok *t)
{
    switch (t->pre) {
    case RT_PRE_SPM: return "spm";
    case RT_PRE_LLAMA3: return "llama3";
    case RT_PRE_QWEN2: return "qwen2";
    case RT_PRE_QWEN35: return "qwen35";
    case RT_PRE_GPT4O: return "gpt-4o";
    case RT_PRE_GPT2: return "gpt2";
    case RT_PRE_GEMMA4: return "gemma4";
    default: return "unsupported";
    }
}
