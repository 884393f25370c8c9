/*
 * hf/hf_tok_common.c — tokenizer object, side files (config.json,
 * tokenizer_config.json, added_tokens.json, generation_config.json,
 * special_tokens_map.json, chat_template.*), special ids the way gguf-py's
 * SpecialVocab finds them, and the GGUF emission.
 */
#define _GNU_SOURCE
#include "hf/hf_tok_int.h"

#include "hf/hf_int.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

/* ------------------------------------------------------------------ */
/* object, pool, per-token arrays                                     */

struct hf_tok *hf__tok_new(enum hf_tok_kind kind)
{
    struct hf_tok *t = calloc(1, sizeof *t);
    if (!t) return NULL;
    t->kind = kind;
    t->add_space_prefix = -1;
    t->spm_unk = t->spm_bos = t->spm_eos = t->spm_pad = -1;
    for (int k = 0; k < HF_TOK_SPECIAL_COUNT; k++) {
        t->sp.id[k] = -1;
        t->sp.add[k] = -1;
    }
    return t;
}

void hf_tok_free(struct hf_tok *t)
{
    if (!t) return;
    free(t->source);
    free(t->pool.buf);
    free(t->tok_off);
    free(t->tok_len);
    free(t->scores);
    free(t->types);
    free(t->hf_types);
    free(t->merge_off);
    free(t->merge_len);
    free(t->chat_template);
    for (uint32_t i = 0; i < t->n_tmpl; i++) {
        free(t->tmpl_name[i]);
        free(t->tmpl_text[i]);
    }
    free(t->tmpl_name);
    free(t->tmpl_text);
    free(t);
}

bool hf__pool_add(struct hf__pool *p, const char *s, size_t n, uint64_t *off)
{
    if (n > SIZE_MAX - 1 - p->len) return false;
    const size_t need = p->len + n + 1;
    if (need > p->cap) {
        size_t cap = p->cap ? p->cap : 4096;
        while (cap < need) {
            if (cap > SIZE_MAX / 2) {
                cap = need;
                break;
            }
            cap *= 2;
        }
        char *nb = realloc(p->buf, cap);
        if (!nb) return false;
        p->buf = nb;
        p->cap = cap;
    }
    if (n) memcpy(p->buf + p->len, s, n);
    p->buf[p->len + n] = 0;
    *off = p->len;
    p->len += n + 1;
    return true;
}

static char *dup_str(const char *s, size_t n)
{
    if (n == SIZE_MAX) return NULL;
    char *d = malloc(n + 1);
    if (!d) return NULL;
    if (n) memcpy(d, s, n);
    d[n] = 0;
    return d;
}

enum mw_status hf__tok_alloc(struct hf_tok *t, uint32_t n, bool with_scores, struct mw_err *err)
{
    if (n == 0 || n > HF_TOK_MAX_VOCAB)
        return MW_FAIL(err, MW_E_VALUE, MW_ERR_OFF_NONE, "token count %u out of range", n);
    t->n_vocab = n;
    t->tok_off = malloc((size_t)n * sizeof *t->tok_off);
    t->tok_len = calloc(n, sizeof *t->tok_len);
    t->types = malloc((size_t)n * sizeof *t->types);
    if (with_scores) t->scores = malloc((size_t)n * sizeof *t->scores);
    if (!t->tok_off || !t->tok_len || !t->types || (with_scores && !t->scores))
        return MW_FAIL(err, MW_E_NOMEM, MW_ERR_OFF_NONE, "out of memory (%u tokens)", n);
    for (uint32_t i = 0; i < n; i++) {
        t->tok_off[i] = UINT64_MAX;
        t->types[i] = 5;
        if (with_scores) t->scores[i] = -10000.0f;
    }
    return MW_OK;
}

enum mw_status hf__tok_set(struct hf_tok *t, uint32_t i, const char *s, size_t n,
                           struct mw_err *err)
{
    uint64_t off;
    if (i >= t->n_vocab || n > UINT32_MAX)
        return MW_FAIL(err, MW_E_VALUE, MW_ERR_OFF_NONE, "token %u out of range", i);
    if (!hf__pool_add(&t->pool, s, n, &off))
        return MW_FAIL(err, MW_E_NOMEM, MW_ERR_OFF_NONE, "out of memory");
    t->tok_off[i] = off;
    t->tok_len[i] = (uint32_t)n;
    return MW_OK;
}

enum mw_status hf__tok_fill_gaps(struct hf_tok *t, struct mw_err *err)
{
    for (uint32_t i = 0; i < t->n_vocab; i++) {
        if (t->tok_off[i] != UINT64_MAX) continue;
        char b[32];
        const int k = snprintf(b, sizeof b, "[PAD%u]", i);
        enum mw_status s = hf__tok_set(t, i, b, (size_t)k, err);
        if (s) return s;
        t->types[i] = 5;
        if (t->scores) t->scores[i] = -10000.0f;
    }
    return MW_OK;
}

enum mw_status hf__tok_set_source(struct hf_tok *t, const char *src, struct mw_err *err)
{
    free(t->source);
    t->source = dup_str(src ? src : "", src ? strlen(src) : 0);
    return t->source ? MW_OK : MW_FAIL(err, MW_E_NOMEM, MW_ERR_OFF_NONE, "out of memory");
}

static bool has_prefix(const char *s, const char *p) { return strncmp(s, p, strlen(p)) == 0; }
static bool has_suffix(const char *s, const char *x)
{
    const size_t ls = strlen(s), lx = strlen(x);
    return ls >= lx && memcmp(s + ls - lx, x, lx) == 0;
}

bool hf__looks_special(const char *s)
{
    if (!s) return false;
    if (!strcmp(s, "<pad>") || !strcmp(s, "<mask>") || !strcmp(s, "<2mass>") ||
        !strcmp(s, "[@BOS@]"))
        return true;
    if (has_prefix(s, "<|") && has_suffix(s, "|>")) return true;
    /* "<｜" ... "｜>" (U+FF5C FULLWIDTH VERTICAL LINE, deepseek-coder) */
    if (has_prefix(s, "<\xEF\xBD\x9C") && has_suffix(s, "\xEF\xBD\x9C>")) return true;
    if (has_prefix(s, "<unused") && has_suffix(s, ">")) return true;
    return false;
}

void hf__special_set_id(struct hf__special *sp, enum hf_tok_special k, int64_t id)
{
    if (sp->id[k] >= 0) return; /* first setting wins (gguf-py) */
    sp->id[k] = id;
    sp->id_order[sp->n_id++] = (uint8_t)k;
}

void hf__special_set_add(struct hf__special *sp, enum hf_tok_special k, bool v)
{
    if (sp->add[k] < 0) sp->add_order[sp->n_add++] = (uint8_t)k; /* dict keeps first position */
    sp->add[k] = v ? 1 : 0;
}

/* ------------------------------------------------------------------ */
/* JSON                                                               */

void hf__json_quote(char *dst, size_t cap, const char *s)
{
    static const char hex[] = "0123456789abcdef";
    size_t k = 0;
    if (cap < 8) {
        if (cap) dst[0] = 0;
        return;
    }
    dst[k++] = '"';
    const size_t lim = cap - 6; /* room for `..."` + NUL */
    for (; s && *s; s++) {
        const unsigned char c = (unsigned char)*s;
        const size_t need = (c < 0x20 || c == 0x7f) ? 4 : (c == '"' || c == '\\') ? 2 : 1;
        if (k + need > lim) {
            /* do not cut a UTF-8 sequence in half */
            while (k > 1 && ((unsigned char)dst[k - 1] & 0xC0) == 0x80) k--;
            if (k > 1 && (unsigned char)dst[k - 1] >= 0xC0) k--;
            memcpy(dst + k, "...", 3);
            k += 3;
            break;
        }
        if (need == 4) {
            dst[k++] = '\\';
            dst[k++] = 'x';
            dst[k++] = hex[c >> 4];
            dst[k++] = hex[c & 15];
        } else if (need == 2) {
            dst[k++] = '\\';
            dst[k++] = (char)c;
        } else {
            dst[k++] = (char)c;
        }
    }
    dst[k++] = '"';
    dst[k] = 0;
}

static const cJSON *jget(const cJSON *o, const char *k)
{
    return cJSON_IsObject(o) ? cJSON_GetObjectItemCaseSensitive(o, k) : NULL;
}

static bool streq(const char *a, const char *b) { return a && b && strcmp(a, b) == 0; }
static bool nonempty(const char *s) { return s && s[0]; }

/* A Python int: an integral JSON number (bools are not accepted). */
static bool json_int(const cJSON *v, int64_t *out)
{
    if (!cJSON_IsNumber(v)) return false;
    const double d = v->valuedouble;
    if (!(d >= -9007199254740992.0 && d <= 9007199254740992.0)) return false;
    const int64_t i = (int64_t)d;
    if ((double)i != d) return false;
    *out = i;
    return true;
}

/* tokenizer_config.json "<typ>_token": a string or {"content": string}. */
static const char *token_name(const cJSON *v)
{
    if (cJSON_IsString(v)) return v->valuestring;
    if (cJSON_IsObject(v)) {
        const cJSON *c = jget(v, "content");
        if (cJSON_IsString(c)) return c->valuestring;
    }
    return NULL;
}

static const char *const special_names[HF_TOK_SPECIAL_COUNT] = {
    "bos", "eos", "unk", "sep", "pad", "cls", "mask", "eot", "eom"};

/* NULL: current GGUFWriter has no add_cls_token_id, so gguf-py skips it. */
static const char *const special_keys[HF_TOK_SPECIAL_COUNT] = {
    "tokenizer.ggml.bos_token_id",       "tokenizer.ggml.eos_token_id",
    "tokenizer.ggml.unknown_token_id",   "tokenizer.ggml.seperator_token_id",
    "tokenizer.ggml.padding_token_id",   NULL,
    "tokenizer.ggml.mask_token_id",      "tokenizer.ggml.eot_token_id",
    "tokenizer.ggml.eom_token_id"};

/* gguf-py writes add_* only where GGUFWriter has a handler. */
static const char *add_key(int k)
{
    switch (k) {
    case HF_TOK_BOS: return "tokenizer.ggml.add_bos_token";
    case HF_TOK_EOS: return "tokenizer.ggml.add_eos_token";
    case HF_TOK_SEP: return "tokenizer.ggml.add_sep_token";
    default: return NULL;
    }
}

/* SpecialVocab._set_special_token with memwall's range rule: ids must be
 * in [0, n_vocab); others are dropped (llama.cpp would ignore them). */
static void set_id_checked(struct hf_tok *t, int k, const cJSON *v)
{
    int64_t id;
    if (!json_int(v, &id)) return;
    if (id < 0 || id >= (int64_t)t->n_vocab) return;
    hf__special_set_id(&t->sp, (enum hf_tok_special)k, id);
}

/* "SpecialToken": {"id": "..."} of a TemplateProcessing item. */
static const char *tp_special(const cJSON *item)
{
    const cJSON *st = jget(item, "SpecialToken");
    const cJSON *id = jget(st, "id");
    return cJSON_IsString(id) && id->valuestring[0] ? id->valuestring : NULL;
}
static const char *tp_sequence(const cJSON *item)
{
    const cJSON *sq = jget(item, "Sequence");
    const cJSON *id = jget(sq, "id");
    return cJSON_IsString(id) ? id->valuestring : NULL;
}

static const cJSON *arr_at(const cJSON *a, int i) { return cJSON_GetArrayItem(a, i); }

static enum mw_status set_chat_templates(struct hf_tok *t, const cJSON *v, struct mw_err *err)
{
    if (cJSON_IsString(v)) {
        t->chat_template = dup_str(v->valuestring, strlen(v->valuestring));
        if (!t->chat_template) return MW_FAIL(err, MW_E_NOMEM, MW_ERR_OFF_NONE, "out of memory");
        return MW_OK;
    }
    if (!cJSON_IsArray(v)) return MW_OK; /* gguf-py: "Bad type for chat_template" - ignored */
    const int n = cJSON_GetArraySize(v);
    if (n <= 0) return MW_OK;
    t->tmpl_name = calloc((size_t)n, sizeof *t->tmpl_name);
    t->tmpl_text = calloc((size_t)n, sizeof *t->tmpl_text);
    if (!t->tmpl_name || !t->tmpl_text)
        return MW_FAIL(err, MW_E_NOMEM, MW_ERR_OFF_NONE, "out of memory");
    const cJSON *c;
    cJSON_ArrayForEach(c, v)
    {
        const cJSON *nm = jget(c, "name");
        const cJSON *tx = jget(c, "template");
        if (!cJSON_IsString(nm) || !nm->valuestring[0] || !cJSON_IsString(tx)) continue;
        if (strlen(nm->valuestring) > 100) continue; /* keeps the GGUF key short */
        const size_t ln = strlen(nm->valuestring);
        char *name = dup_str(nm->valuestring, ln);
        if (!name) return MW_FAIL(err, MW_E_NOMEM, MW_ERR_OFF_NONE, "out of memory");
        for (size_t i = 0; i < ln; i++) {
            const char ch = name[i];
            const bool ok = (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') ||
                            (ch >= '0' && ch <= '9');
            if (!ok) name[i] = '_';
        }
        if (!strcmp(name, "default")) {
            free(name);
            if (t->chat_template) continue;
            t->chat_template = dup_str(tx->valuestring, strlen(tx->valuestring));
            if (!t->chat_template)
                return MW_FAIL(err, MW_E_NOMEM, MW_ERR_OFF_NONE, "out of memory");
            continue;
        }
        bool dup = false;
        for (uint32_t i = 0; i < t->n_tmpl; i++) dup = dup || !strcmp(t->tmpl_name[i], name);
        if (dup) {
            free(name);
            continue;
        }
        char *text = dup_str(tx->valuestring, strlen(tx->valuestring));
        if (!text) {
            free(name);
            return MW_FAIL(err, MW_E_NOMEM, MW_ERR_OFF_NONE, "out of memory");
        }
        t->tmpl_name[t->n_tmpl] = name;
        t->tmpl_text[t->n_tmpl] = text;
        t->n_tmpl++;
    }
    return MW_OK;
}

/* A port of gguf-py SpecialVocab._try_load_from_tokenizer_json and
 * _try_load_from_config_json (warnings dropped; malformed optional parts
 * are skipped as gguf-py's .get() chains skip them). */
enum mw_status hf__special_vocab(struct hf_tok *t, const cJSON *tj, const char *tj_name,
                                 cJSON *tc, const char *tc_name, const cJSON *cfg,
                                 const cJSON *chat_tmpl_alt, struct mw_err *err)
{
    (void)tj_name;
    if (tc && !cJSON_IsObject(tc)) {
        mw_err_set_path(err, tc_name);
        mw_err_set_where(err, "(top level)");
        return MW_FAIL(err, MW_E_FORMAT, MW_ERR_OFF_NONE, "expected a JSON object");
    }
    const bool tc_truthy = tc && tc->child;
    const char *nm[HF_TOK_SPECIAL_COUNT] = {0};
    bool active[HF_TOK_SPECIAL_COUNT] = {0};
    uint8_t types[HF_TOK_SPECIAL_COUNT];
    int n_types = 0;
    for (int k = HF_TOK_BOS; k <= HF_TOK_MASK; k++) {
        char key[32];
        snprintf(key, sizeof key, "%s_token", special_names[k]);
        nm[k] = token_name(jget(tc, key));
        active[k] = true;
        types[n_types++] = (uint8_t)k;
    }
    const cJSON *added = jget(tj, "added_tokens");

    if (tj) {
        const char *sb = nm[HF_TOK_BOS], *sc = nm[HF_TOK_CLS], *se = nm[HF_TOK_EOS],
                   *ss = nm[HF_TOK_SEP];
        if (!nonempty(sb) && nonempty(sc) && tc_truthy) nm[HF_TOK_BOS] = sb = sc;
        if (!nonempty(se) && nonempty(ss) && tc_truthy) nm[HF_TOK_EOS] = se = ss;
        const cJSON *pp = jget(tj, "post_processor");
        if (cJSON_IsObject(pp) && pp->child) {
            const cJSON *procs = jget(pp, "processors");
            const bool list = procs != NULL;
            const cJSON *proc = list ? (cJSON_IsArray(procs) ? procs->child : NULL) : pp;
            for (; proc; proc = list ? proc->next : NULL) {
                const char *type = cJSON_IsObject(proc) ? token_name(jget(proc, "type")) : NULL;
                if (streq(type, "RobertaProcessing")) {
                    hf__special_set_add(&t->sp, HF_TOK_BOS, true);
                    hf__special_set_add(&t->sp, HF_TOK_EOS, true);
                    hf__special_set_add(&t->sp, HF_TOK_SEP, true);
                    if (!nonempty(sc) && tc_truthy) {
                        const cJSON *c = jget(proc, "cls");
                        sc = c ? (cJSON_IsArray(c) && cJSON_IsString(c->child)
                                      ? c->child->valuestring
                                      : NULL)
                               : sb;
                        nm[HF_TOK_CLS] = sc;
                    }
                    if (!nonempty(ss) && tc_truthy) {
                        const cJSON *c = jget(proc, "sep");
                        ss = c ? (cJSON_IsArray(c) && cJSON_IsString(c->child)
                                      ? c->child->valuestring
                                      : NULL)
                               : se;
                        nm[HF_TOK_SEP] = ss;
                    }
                    continue;
                }
                if (!streq(type, "TemplateProcessing")) continue;
                const cJSON *single = jget(proc, "single");
                const cJSON *pair = jget(proc, "pair");
                const int n_single = cJSON_IsArray(single) ? cJSON_GetArraySize(single) : 0;
                const int n_pair = cJSON_IsArray(pair) ? cJSON_GetArraySize(pair) : 0;
                const char *first = NULL, *last = NULL;
                if (n_single > 1) {
                    first = tp_special(arr_at(single, 0));
                    if (first) {
                        if (!tc_truthy) sb = first;
                        hf__special_set_add(&t->sp, HF_TOK_BOS,
                                            streq(first, sb) || streq(first, sc));
                    }
                    last = tp_special(arr_at(single, n_single - 1));
                    if (last) {
                        if (!tc_truthy) {
                            se = last;
                        } else if (!streq(last, se)) {
                            if (!active[HF_TOK_EOT]) {
                                active[HF_TOK_EOT] = true;
                                types[n_types++] = HF_TOK_EOT;
                                nm[HF_TOK_EOT] = se;
                            } else if (!active[HF_TOK_EOM]) {
                                active[HF_TOK_EOM] = true;
                                types[n_types++] = HF_TOK_EOM;
                                nm[HF_TOK_EOM] = se;
                            }
                            nm[HF_TOK_EOS] = se = last;
                        }
                        hf__special_set_add(&t->sp, HF_TOK_EOS, streq(last, se));
                    }
                }
                if (n_pair > 0) {
                    const int start =
                        (first && streq(tp_special(arr_at(pair, 0)), first)) ? 1 : 0;
                    const int stop =
                        (last && streq(tp_special(arr_at(pair, n_pair - 1)), last)) ? n_pair - 1
                                                                                     : n_pair;
                    if (stop > start) {
                        const char *a = tp_sequence(arr_at(pair, start));
                        const char *b = tp_sequence(arr_at(pair, stop - 1));
                        const int n_inner = stop - start - 2;
                        if (streq(a, "A") && streq(b, "B") && n_inner > 0) {
                            bool add_sep = false;
                            const char *e1 = tp_special(arr_at(pair, start + 1));
                            if (e1 && (streq(e1, ss) || streq(e1, se)) && !last) add_sep = true;
                            if (n_inner == 2) {
                                const char *e2 = tp_special(arr_at(pair, start + 2));
                                if (e2 && (streq(e2, ss) || streq(e2, se))) add_sep = true;
                            }
                            hf__special_set_add(&t->sp, HF_TOK_SEP, add_sep);
                            if (add_sep && !nonempty(ss) && tc_truthy) nm[HF_TOK_SEP] = se;
                        }
                    }
                }
            }
        }
    }

    if (tc_truthy) {
        const cJSON *ct = jget(tc, "chat_template");
        enum mw_status s = set_chat_templates(t, ct ? ct : chat_tmpl_alt, err);
        if (s) return s;
        for (int i = 0; i < n_types; i++) {
            const int k = types[i];
            char key[32];
            snprintf(key, sizeof key, "add_%s_token", special_names[k]);
            const cJSON *ae = jget(tc, key);
            if (cJSON_IsBool(ae)) hf__special_set_add(&t->sp, (enum hf_tok_special)k,
                                                      cJSON_IsTrue(ae));
            if (!nm[k]) continue;
            const cJSON *alist = cJSON_IsArray(added) ? added : NULL;
            const cJSON *a;
            cJSON_ArrayForEach(a, alist)
            {
                if (streq(token_name(jget(a, "content")), nm[k])) {
                    set_id_checked(t, k, jget(a, "id"));
                    break;
                }
            }
        }
    }
    if (cJSON_IsObject(cfg)) {
        const cJSON *text_cfg = jget(cfg, "text_config");
        for (int i = 0; i < n_types; i++) {
            const int k = types[i];
            char key[32];
            snprintf(key, sizeof key, "%s_token_id", special_names[k]);
            const cJSON *v = jget(cfg, key);
            if ((!v || cJSON_IsNull(v)) && cJSON_IsObject(text_cfg)) v = jget(text_cfg, key);
            set_id_checked(t, k, v);
        }
    }
    return MW_OK;
}

/* ------------------------------------------------------------------ */
/* files                                                              */

struct side {
    char path[4096];
    bool present;
};

static enum mw_status side_path(struct side *sd, const char *dir, const char *fname,
                                struct mw_err *err)
{
    const int k = snprintf(sd->path, sizeof sd->path, "%s/%s", dir, fname);
    if (k < 0 || (size_t)k >= sizeof sd->path) {
        mw_err_set_path(err, dir);
        return MW_FAIL(err, MW_E_USAGE, MW_ERR_OFF_NONE, "path too long");
    }
    struct stat st;
    sd->present = stat(sd->path, &st) == 0 && S_ISREG(st.st_mode);
    return MW_OK;
}

/* Map dir/fname if it is a regular file; *m->data NULL and present false if
 * it is absent. */
static enum mw_status side_map(struct side *sd, const char *dir, const char *fname,
                               struct mw_map *m, struct mw_err *err)
{
    memset(m, 0, sizeof *m);
    m->fd = -1;
    enum mw_status s = side_path(sd, dir, fname, err);
    if (s || !sd->present) return s;
    s = mw_map_open(m, sd->path, err);
    if (s) return s;
    if (m->size > HF_TOK_MAX_FILE_BYTES) {
        mw_map_close(m);
        mw_err_set_path(err, sd->path);
        return MW_FAIL(err, MW_E_FORMAT, MW_ERR_OFF_NONE, "file too large");
    }
    return MW_OK;
}

static enum mw_status side_json(const char *dir, const char *fname, struct side *sd,
                                cJSON **out, struct mw_err *err)
{
    struct mw_map m;
    *out = NULL;
    enum mw_status s = side_map(sd, dir, fname, &m, err);
    if (s || !sd->present) return s;
    s = hf__json_parse(m.data, (size_t)m.size, sd->path, true, out, err);
    mw_map_close(&m);
    return s;
}

/* SentencePiece path: added_tokens.json and tokenizer_config.json
 * added_tokens_decoder (convert_hf_to_gguf.py _create_vocab_sentencepiece). */
static enum mw_status spm_added(struct hf_tok *t, const cJSON *at, const char *at_name,
                                const cJSON *tc, const char *tc_name, struct mw_err *err)
{
    enum mw_status s;
    if (at) {
        mw_err_set_path(err, at_name);
        if (!cJSON_IsObject(at)) {
            mw_err_set_where(err, "(top level)");
            return MW_FAIL(err, MW_E_FORMAT, MW_ERR_OFF_NONE, "expected a JSON object");
        }
        const cJSON *e;
        cJSON_ArrayForEach(e, at)
        {
            int64_t id;
            if (!json_int(e, &id) || id < 0) {
                char q[96];
                hf__json_quote(q, sizeof q, e->string);
                mw_err_set_where(err, "[%s]", q);
                return MW_FAIL(err, MW_E_FORMAT, MW_ERR_OFF_NONE,
                               "token id is not a non-negative integer");
            }
            if (id >= (int64_t)t->n_vocab) continue; /* llama.cpp: ignored, out of range */
            if ((s = hf__tok_set(t, (uint32_t)id, e->string, strlen(e->string), err))) return s;
            t->scores[id] = -1000.0f;
            t->types[id] = 4;
        }
    }
    const cJSON *atd = jget(tc, "added_tokens_decoder");
    if (!atd) return MW_OK;
    mw_err_set_path(err, tc_name);
    if (!cJSON_IsObject(atd)) {
        mw_err_set_where(err, "added_tokens_decoder");
        return MW_FAIL(err, MW_E_FORMAT, MW_ERR_OFF_NONE, "expected an object");
    }
    const cJSON *e;
    cJSON_ArrayForEach(e, atd)
    {
        char q[96];
        hf__json_quote(q, sizeof q, e->string);
        const char *k = e->string;
        uint64_t id = 0;
        bool ok = k[0] != 0;
        for (const char *p = k; *p && ok; p++) {
            ok = *p >= '0' && *p <= '9' && id <= (UINT64_MAX - 9) / 10;
            if (ok) id = id * 10 + (uint64_t)(*p - '0');
        }
        if (!ok) {
            mw_err_set_where(err, "added_tokens_decoder[%s]", q);
            return MW_FAIL(err, MW_E_FORMAT, MW_ERR_OFF_NONE, "key is not a token id");
        }
        const cJSON *c = jget(e, "content");
        if (!cJSON_IsString(c)) {
            mw_err_set_where(err, "added_tokens_decoder[%s].content", q);
            return MW_FAIL(err, MW_E_FORMAT, MW_ERR_OFF_NONE, "missing or not a string");
        }
        if (id >= t->n_vocab) continue;
        const char *txt = c->valuestring;
        if (cJSON_IsTrue(jget(e, "special")) || hf__looks_special(txt)) {
            if ((s = hf__tok_set(t, (uint32_t)id, txt, strlen(txt), err))) return s;
            t->types[id] = 3;
        } else {
            /* pre-normalize user-defined spaces: U+2581 -> ' ' */
            const size_t len = strlen(txt);
            char *tmp = malloc(len + 1);
            if (!tmp) return MW_FAIL(err, MW_E_NOMEM, MW_ERR_OFF_NONE, "out of memory");
            size_t o = 0;
            for (size_t j = 0; j < len; j++) {
                if (j + 2 < len && (uint8_t)txt[j] == 0xE2 && (uint8_t)txt[j + 1] == 0x96 &&
                    (uint8_t)txt[j + 2] == 0x81) {
                    tmp[o++] = ' ';
                    j += 2;
                } else {
                    tmp[o++] = txt[j];
                }
            }
            s = hf__tok_set(t, (uint32_t)id, tmp, o, err);
            free(tmp);
            if (s) return s;
            t->types[id] = 4;
        }
        t->scores[id] = -1000.0f;
    }
    return MW_OK;
}

/* memwall's fallback for bos/eos(/unk) ids llama.cpp's converter leaves out
 * (see hf_tok.h): written only when different from llama.cpp's default. */
static void special_fallbacks(struct hf_tok *t, const cJSON *gen, const cJSON *stm)
{
    const int last = t->kind == HF_TOK_SPM ? HF_TOK_UNK : HF_TOK_EOS;
    for (int k = HF_TOK_BOS; k <= last; k++) {
        if (t->sp.id[k] >= 0) continue;
        int64_t cand = -1;
        char key[32];
        snprintf(key, sizeof key, "%s_token_id", special_names[k]);
        const cJSON *g = jget(gen, key);
        if (cJSON_IsArray(g)) g = g->child;
        int64_t v;
        if (json_int(g, &v)) cand = v;
        if (cand < 0) {
            snprintf(key, sizeof key, "%s_token", special_names[k]);
            const char *name = token_name(jget(stm, key));
            if (name) {
                const size_t ln = strlen(name);
                for (uint32_t i = 0; i < t->n_vocab; i++) {
                    if (t->tok_len[i] == ln && !memcmp(t->pool.buf + t->tok_off[i], name, ln)) {
                        cand = i;
                        break;
                    }
                }
            }
        }
        if (cand < 0 && t->kind == HF_TOK_SPM)
            cand = k == HF_TOK_BOS ? t->spm_bos : k == HF_TOK_EOS ? t->spm_eos : t->spm_unk;
        if (cand < 0 || cand >= (int64_t)t->n_vocab) continue;
        int64_t dflt;
        if (t->kind == HF_TOK_SPM)
            dflt = k == HF_TOK_BOS ? 1 : k == HF_TOK_EOS ? 2 : 0;
        else
            dflt = 11;
        if (cand != dflt) hf__special_set_id(&t->sp, (enum hf_tok_special)k, cand);
    }
}

enum mw_status hf_tok_load(const char *hf_dir, struct hf_tok **out, struct mw_err *err)
{
    return hf_tok_load_n(hf_dir, -1, out, err);
}

enum mw_status hf_tok_load_n(const char *hf_dir, int64_t n_vocab_arg, struct hf_tok **out,
                             struct mw_err *err)
{
    if (!out || !hf_dir) return MW_FAIL(err, MW_E_USAGE, MW_ERR_OFF_NONE, "NULL argument");
    if (n_vocab_arg > (int64_t)HF_TOK_MAX_VOCAB)
        return MW_FAIL(err, MW_E_USAGE, MW_ERR_OFF_NONE, "token count %lld exceeds the limit %u",
                       (long long)n_vocab_arg, HF_TOK_MAX_VOCAB);
    *out = NULL;
    struct side s_cfg, s_tj, s_tc, s_at, s_gen, s_stm, s_model, s_ctj, s_ctjson;
    cJSON *cfg = NULL, *tj = NULL, *tc = NULL, *at = NULL, *gen = NULL, *stm = NULL;
    cJSON *alt = NULL, *ctjson = NULL;
    struct hf_tok *t = NULL;
    enum mw_status s;

    if ((s = side_json(hf_dir, "config.json", &s_cfg, &cfg, err))) goto done;
    int64_t n_vocab = -1;
    {
        /* multimodal checkpoints (Gemma3ForConditionalGeneration) keep it in
         * text_config, which llama.cpp's converter moves to the root */
        const cJSON *vs = jget(cfg, "vocab_size");
        const char *vs_where = "vocab_size";
        if ((!vs || cJSON_IsNull(vs)) && cJSON_IsObject(jget(cfg, "text_config"))) {
            vs = jget(jget(cfg, "text_config"), "vocab_size");
            vs_where = "text_config.vocab_size";
        }
        if (vs && !cJSON_IsNull(vs)) {
            int64_t v;
            if (!json_int(vs, &v) || v < 0) {
                mw_err_set_path(err, s_cfg.path);
                mw_err_set_where(err, "%s", vs_where);
                s = MW_FAIL(err, MW_E_FORMAT, MW_ERR_OFF_NONE, "not a non-negative integer");
                goto done;
            }
            if (v > (int64_t)HF_TOK_MAX_VOCAB) {
                mw_err_set_path(err, s_cfg.path);
                mw_err_set_where(err, "%s", vs_where);
                s = MW_FAIL(err, MW_E_VALUE, MW_ERR_OFF_NONE, "%lld exceeds the limit %u",
                            (long long)v, HF_TOK_MAX_VOCAB);
                goto done;
            }
            if (v > 0) n_vocab = v; /* 0: "or tokenizer.vocab_size()" */
        }
    }
    if (n_vocab_arg > 0) n_vocab = n_vocab_arg;
    if ((s = side_json(hf_dir, "tokenizer.json", &s_tj, &tj, err))) goto done;
    if ((s = side_json(hf_dir, "tokenizer_config.json", &s_tc, &tc, err))) goto done;

    if (tj && hf__json_is_bytelevel_bpe(tj)) {
        if ((s = hf__json_build(tj, s_tj.path, n_vocab, &t, err))) goto done;
        if ((s = hf__tok_set_source(t, s_tj.path, err))) goto done;
    } else {
        struct mw_map m;
        if ((s = side_map(&s_model, hf_dir, "tokenizer.model", &m, err))) goto done;
        /* Gemma 4: llama.cpp's Gemma4Model reads tokenizer.json whether or
         * not a tokenizer.model is there */
        if (tj && hf__json_is_spm_bpe(tj) && (!s_model.present || hf__json_is_gemma4(cfg))) {
            if (s_model.present) mw_map_close(&m);
            /* Gemma 3 (tokenizer.json only), Gemma 4: SentencePiece-style BPE */
            if ((s = hf__json_build(tj, s_tj.path, n_vocab, &t, err))) goto done;
            if ((s = hf__tok_set_source(t, s_tj.path, err))) goto done;
            if ((s = hf__json_hf_types(t, cJSON_IsObject(tc) ? tc : NULL, err))) goto done;
        } else if (!s_model.present) {
            mw_err_set_path(err, hf_dir);
            if (tj)
                s = MW_FAIL(err, MW_E_UNSUPPORTED, MW_ERR_OFF_NONE,
                            "tokenizer.json is not a byte-level BPE and there is no "
                            "tokenizer.model");
            else
                s = MW_FAIL(err, MW_E_FORMAT, MW_ERR_OFF_NONE,
                            "no tokenizer: neither tokenizer.json nor tokenizer.model");
            goto done;
        } else {
            s = hf__spm_build(m.data, m.size, s_model.path, n_vocab, &t, err);
            mw_map_close(&m);
            if (s) goto done;
            if ((s = hf__tok_set_source(t, s_model.path, err))) goto done;
            if ((s = side_json(hf_dir, "added_tokens.json", &s_at, &at, err))) goto done;
            if (tc && !cJSON_IsObject(tc)) {
                mw_err_set_path(err, s_tc.path);
                mw_err_set_where(err, "(top level)");
                s = MW_FAIL(err, MW_E_FORMAT, MW_ERR_OFF_NONE, "expected a JSON object");
                goto done;
            }
            if ((s = spm_added(t, at, s_at.path, tc, s_tc.path, err))) goto done;
        }
    }

    /* chat_template.jinja, else chat_template.json, when tokenizer_config.json
     * has no chat_template key */
    {
        struct mw_map m;
        if ((s = side_map(&s_ctj, hf_dir, "chat_template.jinja", &m, err))) goto done;
        if (s_ctj.present) {
            char *txt = dup_str(m.data ? (const char *)m.data : "", (size_t)m.size);
            mw_map_close(&m);
            if (!txt) {
                s = MW_FAIL(err, MW_E_NOMEM, MW_ERR_OFF_NONE, "out of memory");
                goto done;
            }
            alt = cJSON_CreateString(txt);
            free(txt);
            if (!alt) {
                s = MW_FAIL(err, MW_E_NOMEM, MW_ERR_OFF_NONE, "out of memory");
                goto done;
            }
        } else {
            if ((s = side_json(hf_dir, "chat_template.json", &s_ctjson, &ctjson, err))) goto done;
        }
    }
    if ((s = hf__special_vocab(t, tj, s_tj.path, tc, s_tc.path, cfg,
                               alt ? alt : jget(ctjson, "chat_template"), err)))
        goto done;
    if ((s = side_json(hf_dir, "generation_config.json", &s_gen, &gen, err))) goto done;
    if ((s = side_json(hf_dir, "special_tokens_map.json", &s_stm, &stm, err))) goto done;
    special_fallbacks(t, gen, stm);
    mw_err_clear(err);
    *out = t;
    t = NULL;
done:
    hf_tok_free(t);
    cJSON_Delete(cfg);
    cJSON_Delete(tj);
    cJSON_Delete(tc);
    cJSON_Delete(at);
    cJSON_Delete(gen);
    cJSON_Delete(stm);
    cJSON_Delete(alt);
    cJSON_Delete(ctjson);
    return s;
}

enum mw_status hf_tok_parse_json(const void *buf, size_t n, const char *name, int64_t n_vocab,
                                 struct hf_tok **out, struct mw_err *err)
{
    if (!out) return MW_FAIL(err, MW_E_USAGE, MW_ERR_OFF_NONE, "out is NULL");
    *out = NULL;
    if (!buf && n) return MW_FAIL(err, MW_E_USAGE, MW_ERR_OFF_NONE, "buf is NULL");
    if (!name) name = "tokenizer.json";
    cJSON *root = NULL;
    struct hf_tok *t = NULL;
    if (n > HF_TOK_MAX_FILE_BYTES) {
        mw_err_set_path(err, name);
        return MW_FAIL(err, MW_E_FORMAT, MW_ERR_OFF_NONE, "file too large (%zu bytes)", n);
    }
    enum mw_status s = hf__json_parse(buf, n, name, true, &root, err);
    if (s) return s;
    if ((s = hf__json_build(root, name, n_vocab < 0 ? -1 : n_vocab, &t, err))) goto done;
    if ((s = hf__tok_set_source(t, name, err))) goto done;
    if (t->kind == HF_TOK_SPMBPE && (s = hf__json_hf_types(t, NULL, err))) goto done;
    if ((s = hf__special_vocab(t, root, name, NULL, NULL, NULL, NULL, err))) goto done;
    mw_err_clear(err);
    *out = t;
    t = NULL;
done:
    hf_tok_free(t);
    cJSON_Delete(root);
    return s;
}

/* ------------------------------------------------------------------ */
/* GGUF                                                               */

static enum mw_status write_strs(struct gguf_writer *w, const char *key, const struct hf__pool *p,
                                 const uint64_t *off, const uint32_t *len, uint32_t n,
                                 struct mw_err *err)
{
    const char **ptr = malloc((size_t)n * sizeof *ptr);
    uint64_t *lens = malloc((size_t)n * sizeof *lens);
    enum mw_status s;
    if (!ptr || !lens) {
        s = MW_FAIL(err, MW_E_NOMEM, MW_ERR_OFF_NONE, "out of memory");
    } else {
        for (uint32_t i = 0; i < n; i++) {
            ptr[i] = p->buf + off[i];
            lens[i] = len[i];
        }
        s = gguf_writer_set_arr_str(w, key, ptr, lens, n, err);
    }
    free(ptr);
    free(lens);
    return s;
}

enum mw_status hf_tok_write_gguf(const struct hf_tok *t, struct gguf_writer *w,
                                 const char *hf_model_type, struct mw_err *err)
{
    if (!t || !w) return MW_FAIL(err, MW_E_USAGE, MW_ERR_OFF_NONE, "NULL argument");
    /* Gemma's converters (GemmaModel, Gemma2Model, Gemma3Model) write
     * add_space_prefix false after _set_vocab_sentencepiece */
    int add_space_prefix = t->add_space_prefix;
    if (t->kind == HF_TOK_SPM && hf_model_type && strncmp(hf_model_type, "gemma", 5) == 0)
        add_space_prefix = 0;
    /* Gemma 4 (conversion/gemma.py Gemma4Model.set_vocab): model "gemma4",
     * no pre (llama.cpp's loader sets it), LlamaHfVocab's scores (-1000)
     * and types, SpecialVocab, then add_space_prefix false and add_bos true
     * (overwriting SpecialVocab's add_bos in place, as GGUFWriter does) */
    const bool g4 = t->kind == HF_TOK_SPMBPE && t->hf_types && hf_model_type &&
                    strcmp(hf_model_type, "gemma4") == 0;
    if (g4) add_space_prefix = 0;
    enum mw_status s;
    if ((s = gguf_writer_set_str(w, "tokenizer.ggml.model", g4 ? "gemma4" : hf_tok_model(t),
                                 err)))
        return s;
    if (!g4 && (s = gguf_writer_set_str(w, "tokenizer.ggml.pre", t->pre, err))) return s;
    if ((s = write_strs(w, "tokenizer.ggml.tokens", &t->pool, t->tok_off, t->tok_len, t->n_vocab,
                        err)))
        return s;
    if (g4 && (s = hf__json_write_hf_scores(t, w, err))) return s;
    if (t->scores &&
        (s = gguf_writer_set_arr(w, "tokenizer.ggml.scores", GGUF_VT_F32, t->scores, t->n_vocab,
                                 err)))
        return s;
    if ((s = gguf_writer_set_arr(w, "tokenizer.ggml.token_type", GGUF_VT_I32,
                                 g4 ? t->hf_types : t->types, t->n_vocab, err)))
        return s;
    if (t->n_merges &&
        (s = write_strs(w, "tokenizer.ggml.merges", &t->pool, t->merge_off, t->merge_len,
                        t->n_merges, err)))
        return s;
    for (int i = 0; i < t->sp.n_id; i++) {
        const int k = t->sp.id_order[i];
        if (special_keys[k] &&
            (s = gguf_writer_set_u32(w, special_keys[k], (uint32_t)t->sp.id[k], err)))
            return s;
    }
    for (int i = 0; i < t->sp.n_add; i++) {
        const int k = t->sp.add_order[i];
        const char *key = add_key(k);
        const bool v = t->sp.add[k] == 1 || (g4 && k == HF_TOK_BOS);
        if (key && (s = gguf_writer_set_bool(w, key, v, err))) return s;
    }
    if (t->n_tmpl) {
        for (uint32_t i = 0; i < t->n_tmpl; i++) {
            char key[160];
            const int k = snprintf(key, sizeof key, "tokenizer.chat_template.%s", t->tmpl_name[i]);
            if (k < 0 || (size_t)k >= sizeof key) continue; /* absurd name: skip */
            if ((s = gguf_writer_set_str(w, key, t->tmpl_text[i], err))) return s;
        }
        if ((s = gguf_writer_set_arr_str(w, "tokenizer.chat_templates",
                                         (const char *const *)t->tmpl_name, NULL, t->n_tmpl,
                                         err)))
            return s;
    }
    if (t->chat_template &&
        (s = gguf_writer_set_str(w, "tokenizer.chat_template", t->chat_template, err)))
        return s;
    if (add_space_prefix >= 0 &&
        (s = gguf_writer_set_bool(w, "tokenizer.ggml.add_space_prefix", add_space_prefix == 1,
                                  err)))
        return s;
    if (g4 && t->sp.add[HF_TOK_BOS] < 0 &&
        (s = gguf_writer_set_bool(w, "tokenizer.ggml.add_bos_token", true, err)))
        return s;
    if (t->normalizer[0] &&
        (s = gguf_writer_set_str(w, "memwall.tokenizer.normalizer", t->normalizer, err)))
        return s;
    return MW_OK;
}

/* ------------------------------------------------------------------ */
/* accessors                                                          */

enum hf_tok_kind hf_tok_kind(const struct hf_tok *t) { return t->kind; }
const char *hf_tok_model(const struct hf_tok *t)
{
    return t->kind == HF_TOK_SPM ? "llama" : "gpt2";
}
const char *hf_tok_normalizer(const struct hf_tok *t) { return t->normalizer; }
const char *hf_tok_pre(const struct hf_tok *t) { return t->pre; }
const char *hf_tok_source(const struct hf_tok *t) { return t->source ? t->source : ""; }
uint32_t hf_tok_n_vocab(const struct hf_tok *t) { return t->n_vocab; }
uint32_t hf_tok_n_merges(const struct hf_tok *t) { return t->n_merges; }

int64_t hf_tok_special_id(const struct hf_tok *t, enum hf_tok_special kind)
{
    if ((unsigned)kind >= HF_TOK_SPECIAL_COUNT) return -1;
    return t->sp.id[kind];
}

int hf_tok_add_bos(const struct hf_tok *t) { return t->sp.add[HF_TOK_BOS]; }
int hf_tok_add_eos(const struct hf_tok *t) { return t->sp.add[HF_TOK_EOS]; }

const char *hf_tok_token(const struct hf_tok *t, uint32_t i, size_t *len)
{
    if (i >= t->n_vocab) return NULL;
    if (len) *len = t->tok_len[i];
    return t->pool.buf + t->tok_off[i];
}

int32_t hf_tok_token_type(const struct hf_tok *t, uint32_t i)
{
    return i < t->n_vocab ? t->types[i] : 0;
}

float hf_tok_score(const struct hf_tok *t, uint32_t i)
{
    return (i < t->n_vocab && t->scores) ? t->scores[i] : 0.0f;
}

const char *hf_tok_merge(const struct hf_tok *t, uint32_t i, size_t *len)
{
    if (i >= t->n_merges) return NULL;
    if (len) *len = t->merge_len[i];
    return t->pool.buf + t->merge_off[i];
}

const char *hf_tok_chat_template(const struct hf_tok *t) { return t->chat_template; }
