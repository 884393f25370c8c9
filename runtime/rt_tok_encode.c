/*
 * runtime/rt_tok_encode.c — text to token ids (rt_tok_encode), written to give
 * llama.cpp's ids (llama-vocab.cpp: tokenizer_st_partition,
 * llm_tokenizer_spm_session, llm_tokenizer_bpe_session): the text cut at the
 * special tokens (longest first), each text fragment normalized when the
 * file names a normalizer, then merged by the vocabulary's model —
 * SentencePiece by score, byte-level BPE by merge rank over the
 * pre-tokenizer's words (rt_tok_pre.c), SentencePiece-style BPE ("gemma4")
 * by rank over newline and other runs — with the model's fallback for
 * symbols outside the vocabulary. The vocabulary and its lookups: rt_tok.c.
 */
#include "runtime/rt_tok_int.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

// --- growable buffers ---

struct ivec {
    int32_t *v;
    size_t n, cap;
    bool oom;
};

/* The array v (*cap elements of sz bytes) with room for element n: v
 * itself, or v reallocated to twice *cap (first when empty) with *cap
 * updated; NULL, v untouched, when the size overflows or realloc fails. */
static void *room_for(void *v, size_t n, size_t *cap, size_t sz, size_t first)
{
    if (n < *cap) return v;
    const size_t c = *cap ? 2 * *cap : first;
    if (c < *cap || c > SIZE_MAX / sz) return NULL;
    void *p = realloc(v, c * sz);
    if (p) *cap = c;
    return p;
}

static void ipush(struct ivec *a, int32_t x)
{
    if (a->oom) return;
    int32_t *v = room_for(a->v, a->n, &a->cap, sizeof *v, 256);
    if (!v) {
        a->oom = true;
        return;
    }
    a->v = v;
    a->v[a->n++] = x;
}

// --- merge queue (a binary heap) ---

struct sym {
    size_t off, n; /* bytes of the work string */
    int64_t prev, next;
};

struct bigram {
    float score;   /* SPM: higher first */
    int64_t rank;  /* BPE: lower first */
    int64_t left, right;
    size_t size;
};

struct heap {
    struct bigram *v;
    size_t n, cap;
    bool spm;
    bool oom;
};

/* does a come out before b? */
static bool before(const struct heap *h, const struct bigram *a, const struct bigram *b)
{
    if (h->spm) {
        if (a->score != b->score) return a->score > b->score;
    } else if (a->rank != b->rank) {
        return a->rank < b->rank;
    }
    return a->left < b->left;
}

static void hpush(struct heap *h, struct bigram x)
{
    if (h->oom) return;
    struct bigram *v = room_for(h->v, h->n, &h->cap, sizeof *v, 64);
    if (!v) {
        h->oom = true;
        return;
    }
    h->v = v;
    size_t i = h->n++;
    while (i > 0) {
        const size_t p = (i - 1) / 2;
        if (!before(h, &x, &h->v[p])) break;
        h->v[i] = h->v[p];
        i = p;
    }
    h->v[i] = x;
}

static struct bigram hpop(struct heap *h)
{
    const struct bigram top = h->v[0];
    const struct bigram last = h->v[--h->n];
    size_t i = 0;
    for (;;) {
        size_t c = 2 * i + 1;
        if (c >= h->n) break;
        if (c + 1 < h->n && before(h, &h->v[c + 1], &h->v[c])) c++;
        if (!before(h, &h->v[c], &last)) break;
        h->v[i] = h->v[c];
        i = c;
    }
    if (h->n > 0) h->v[i] = last;
    return top;
}

struct work {
    const struct rt_tok *t;
    const uint8_t *s;  /* the work string */
    struct sym *sym;
    size_t n_sym;
    struct heap heap;
};

static void try_bigram(struct work *w, int64_t left, int64_t right)
{
    if (left < 0 || right < 0) return;
    const struct sym *l = &w->sym[left], *r = &w->sym[right];
    struct bigram b = {.left = left, .right = right, .size = l->n + r->n};
    if (w->heap.spm) {
        const int32_t id = rt__tok_find_text(w->t, w->s + l->off, l->n + r->n);
        if (id < 0) return;
        b.score = w->t->score[id];
    } else {
        b.rank = rt__tok_find_merge(w->t, w->s + l->off, l->n, w->s + r->off, r->n);
        if (b.rank < 0) return;
    }
    hpush(&w->heap, b);
}

/* Merge the symbols of w->s[0..n) (one per UTF-8 character) by the queue's
 * rule; afterwards the live symbols are chained from index 0. */
static bool merge_all(struct work *w, size_t n, bool one_symbol)
{
    w->n_sym = 0;
    if (one_symbol) {
        w->sym[w->n_sym++] = (struct sym){0, n, -1, -1};
    } else {
        for (size_t off = 0; off < n;) {
            size_t len = rt__utf8_len(w->s[off]);
            if (len > n - off) len = n - off;
            const int64_t idx = (int64_t)w->n_sym;
            w->sym[w->n_sym++] = (struct sym){off, len, idx - 1, off + len == n ? -1 : idx + 1};
            off += len;
        }
    }
    w->heap.n = 0;
    for (size_t i = 1; i < w->n_sym; i++) try_bigram(w, (int64_t)i - 1, (int64_t)i);
    while (w->heap.n > 0 && !w->heap.oom) {
        const struct bigram b = hpop(&w->heap);
        struct sym *l = &w->sym[b.left], *r = &w->sym[b.right];
        if (l->n == 0 || r->n == 0 || l->n + r->n != b.size) continue; /* outdated */
        l->n += r->n;
        r->n = 0;
        l->next = r->next;
        if (r->next >= 0) w->sym[r->next].prev = b.left;
        try_bigram(w, l->prev, b.left);
        try_bigram(w, b.left, l->next);
    }
    return !w->heap.oom;
}

/* What becomes of a merged symbol that is not a token, as llama.cpp's
 * tokenizer sessions do it. */
enum sym_fallback {
    FB_BYTE_OR_UNK, /* SentencePiece: each byte's <0xNN> token, else <unk> */
    FB_BYTE_TOKENS, /* SPM-style BPE: each byte's <0xNN> token, else nothing */
    FB_SINGLE_BYTES /* byte-level BPE: each byte that is itself a token */
};

/* Push the ids of the merged symbols of w (over its work string w->s). */
static void push_syms(const struct work *w, enum sym_fallback fb, struct ivec *out)
{
    const struct rt_tok *t = w->t;
    for (int64_t i = w->n_sym ? 0 : -1; i != -1; i = w->sym[i].next) {
        const struct sym *sy = &w->sym[i];
        const uint8_t *p = w->s + sy->off;
        const int32_t id = rt__tok_find_text(t, p, sy->n);
        if (id >= 0) {
            ipush(out, id);
            continue;
        }
        /* no merge ever produces a non-token: what is left is single
         * characters outside the vocabulary */
        for (size_t j = 0; j < sy->n; j++) {
            const int32_t b =
                fb == FB_SINGLE_BYTES ? rt__tok_find_text(t, p + j, 1) : t->byte_tok[p[j]];
            if (b >= 0) ipush(out, b);
            else if (fb == FB_BYTE_OR_UNK) ipush(out, t->unk);
        }
    }
}

// --- SentencePiece ---

static void spm_fragment(struct work *w, const uint8_t *txt, size_t len, bool prefix,
                         struct ivec *out, uint8_t *buf)
{
    /* " " + text with every space as U+2581 (E2 96 81) */
    size_t n = 0;
    if (prefix) buf[n++] = 0xE2, buf[n++] = 0x96, buf[n++] = 0x81;
    for (size_t i = 0; i < len; i++) {
        if (txt[i] == ' ') buf[n++] = 0xE2, buf[n++] = 0x96, buf[n++] = 0x81;
        else buf[n++] = txt[i];
    }
    w->s = buf;
    if (!merge_all(w, n, false)) {
        out->oom = true;
        return;
    }
    push_syms(w, FB_BYTE_OR_UNK, out);
}

// --- byte-level BPE ---

static void bpe_fragment(struct work *w, const uint8_t *txt, size_t len, struct ivec *out,
                         uint32_t *cps, size_t *lens, uint8_t *word)
{
    const struct rt_tok *t = w->t;
    size_t ncp = 0;
    for (size_t i = 0; i < len;) cps[ncp++] = rt__utf8_decode(txt, len, &i);
    const size_t n_words = rt__pre_split(t->pre, cps, ncp, lens);
    size_t c0 = 0;
    for (size_t wi = 0; wi < n_words; wi++) {
        /* the word's UTF-8, each byte spelled as its GPT-2 character */
        size_t n = 0;
        for (size_t k = c0; k < c0 + lens[wi]; k++) {
            uint8_t u[4];
            const size_t ul = rt__utf8_encode(cps[k], u);
            for (size_t j = 0; j < ul; j++) n += rt__utf8_encode(t->b2cp[u[j]], word + n);
        }
        c0 += lens[wi];
        w->s = word;
        const bool whole = t->ignore_merges && rt__tok_find_text(t, word, n) >= 0;
        if (!merge_all(w, n, whole)) {
            out->oom = true;
            return;
        }
        push_syms(w, FB_SINGLE_BYTES, out);
    }
}

// --- SentencePiece-style BPE ("gemma4") ---

/* llama.cpp's llm_tokenizer_bpe_session with the gemma4 pre-tokenizer:
 * spaces escaped as U+2581, the text cut into runs of newlines and runs of
 * everything else (code points; invalid UTF-8 becomes U+FFFD), each run
 * merged by rank from single characters (a newline run that is itself a
 * token stays whole), and symbols outside the vocabulary spelled as <0xNN>
 * byte tokens. esc needs 3 * len bytes, word 9 * len + 4. */
static void spmbpe_fragment(struct work *w, const uint8_t *txt, size_t len, struct ivec *out,
                            uint32_t *cps, size_t *lens, uint8_t *esc, uint8_t *word)
{
    const struct rt_tok *t = w->t;
    size_t ne = 0;
    for (size_t i = 0; i < len; i++) {
        if (txt[i] == ' ') esc[ne++] = 0xE2, esc[ne++] = 0x96, esc[ne++] = 0x81;
        else esc[ne++] = txt[i];
    }
    size_t ncp = 0;
    for (size_t i = 0; i < ne;) cps[ncp++] = rt__utf8_decode(esc, ne, &i);
    const size_t n_words = rt__pre_split(RT_PRE_GEMMA4, cps, ncp, lens);
    size_t c0 = 0;
    for (size_t wi = 0; wi < n_words; wi++) {
        size_t n = 0;
        for (size_t k = c0; k < c0 + lens[wi]; k++) n += rt__utf8_encode(cps[k], word + n);
        const bool newlines = cps[c0] == '\n';
        c0 += lens[wi];
        w->s = word;
        const bool whole = newlines && rt__tok_find_text(t, word, n) >= 0;
        if (!merge_all(w, n, whole)) {
            out->oom = true;
            return;
        }
        push_syms(w, FB_BYTE_TOKENS, out);
    }
}

// --- special-token partition ---

struct frag {
    int32_t tok; /* >= 0: a special token; -1: raw text [off, off+len) */
    size_t off, len;
};

struct fvec {
    struct frag *v;
    size_t n, cap;
    bool oom;
};

static void fpush(struct fvec *a, struct frag x)
{
    if (a->oom) return;
    struct frag *v = room_for(a->v, a->n, &a->cap, sizeof *v, 16);
    if (!v) {
        a->oom = true;
        return;
    }
    a->v = v;
    a->v[a->n++] = x;
}

static const uint8_t *find_bytes(const uint8_t *h, size_t hn, const uint8_t *nd, size_t nn)
{
    if (nn == 0 || nn > hn) return NULL;
    for (size_t i = 0; i + nn <= hn; i++) {
        const uint8_t *p = memchr(h + i, nd[0], hn - nn - i + 1);
        if (!p) return NULL;
        i = (size_t)(p - h);
        if (memcmp(p, nd, nn) == 0) return p;
    }
    return NULL;
}

static bool partition(const struct rt_tok *t, const uint8_t *text, size_t len, bool parse_special,
                      struct fvec *out)
{
    struct fvec cur = {0}, nxt = {0};
    if (len > 0) fpush(&cur, (struct frag){-1, 0, len});
    for (uint32_t si = 0; si < t->n_special && !cur.oom; si++) {
        const uint32_t id = t->special[si];
        if (!parse_special && (t->type[id] == RT_TT_CONTROL || t->type[id] == RT_TT_UNKNOWN))
            continue;
        const struct rt_str *sp = &t->text[id];
        nxt.n = 0;
        for (size_t i = 0; i < cur.n; i++) {
            const struct frag fr = cur.v[i];
            if (fr.tok >= 0) {
                fpush(&nxt, fr);
                continue;
            }
            size_t off = fr.off, rem = fr.len;
            for (;;) {
                const uint8_t *p = find_bytes(text + off, rem, sp->p, sp->n);
                if (!p) {
                    if (rem > 0) fpush(&nxt, (struct frag){-1, off, rem});
                    break;
                }
                const size_t at = (size_t)(p - text);
                if (at > off) fpush(&nxt, (struct frag){-1, off, at - off});
                fpush(&nxt, (struct frag){(int32_t)id, at, sp->n});
                rem -= at + sp->n - off;
                off = at + sp->n;
            }
        }
        struct fvec tmp = cur;
        cur = nxt;
        nxt = tmp;
        cur.oom |= nxt.oom;
    }
    free(nxt.v);
    *out = cur;
    return !cur.oom;
}

/* Append the normalization of in[0..n) to o (capacity checked by the
 * caller: n * 4 * max_growth bytes). Only well-formed UTF-8 is normalized;
 * an invalid byte is copied as it is and ends the run (the Hugging Face
 * tokenizer never sees one). */
static size_t normalize_utf8(enum rt_norm form, const uint8_t *in, size_t n, uint8_t *o,
                             uint32_t *cp, uint32_t *cp2)
{
    size_t k = 0;
    for (size_t i = 0; i < n;) {
        size_t nc = 0;
        while (i < n) {
            size_t j = i;
            const uint32_t c = rt__utf8_decode(in, n, &j);
            const bool bad = c == 0xFFFD && !(j - i == 3 && in[i] == 0xEF && in[i + 1] == 0xBF &&
                                              in[i + 2] == 0xBD);
            if (bad || (c >= 0xD800 && c < 0xE000) || c >= 0x110000) break;
            cp[nc++] = c;
            i = j;
        }
        const size_t m = rt__normalize(form, cp, nc, cp2);
        for (size_t q = 0; q < m; q++) k += rt__utf8_encode(cp2[q], o + k);
        if (i < n && nc == 0) o[k++] = in[i++]; /* an invalid byte */
    }
    return k;
}

enum mw_status rt_tok_encode(const struct rt_tok *t, const char *text, size_t len, bool add_special,
                             bool parse_special, int32_t *out, size_t cap, size_t *n_out,
                             struct mw_err *err)
{
    *n_out = 0;
    if (t->kind == RT_TOK_BPE && t->pre == RT_PRE_UNSUPPORTED)
        return MW_FAIL(err, MW_E_UNSUPPORTED, MW_ERR_OFF_NONE,
                       "cannot encode with pre-tokenizer '%s' (supported: llama3, qwen2, "
                       "qwen35, gpt-2, gpt-4o, gemma4 groups); decoding works",
                       t->pre_name);
    const uint8_t *s = (const uint8_t *)text;
    struct ivec v = {0};
    struct fvec fr = {0};
    struct work w = {.t = t, .heap = {.spm = t->kind == RT_TOK_SPM}};
    uint8_t *buf = NULL, *norm_text = NULL;
    uint32_t *cps = NULL;
    size_t *lens = NULL;
    enum mw_status st = MW_OK;
    if (!partition(t, s, len, parse_special, &fr)) goto nomem;
    if (t->norm != RT_NORM_NONE) {
        /* normalize each text fragment (added tokens are matched in the raw
         * text first, as the Hugging Face tokenizer does for tokens with
         * normalized false) */
        const size_t g = rt__norm_max_growth();
        size_t total = 0, maxr = 1;
        for (size_t i = 0; i < fr.n; i++)
            if (fr.v[i].tok < 0) {
                total += fr.v[i].len;
                if (fr.v[i].len > maxr) maxr = fr.v[i].len;
            }
        if (total > SIZE_MAX / (4 * g + 4) || maxr > SIZE_MAX / (8 * g)) goto nomem;
        norm_text = malloc(total * 4 * g + 4);
        uint32_t *c1 = malloc(maxr * sizeof *c1), *c2 = malloc(maxr * g * sizeof *c2);
        if (!norm_text || !c1 || !c2) {
            free(c1);
            free(c2);
            goto nomem;
        }
        size_t at = 0;
        for (size_t i = 0; i < fr.n; i++) {
            if (fr.v[i].tok >= 0) continue;
            const size_t k = normalize_utf8(t->norm, s + fr.v[i].off, fr.v[i].len, norm_text + at,
                                            c1, c2);
            fr.v[i].off = at;
            fr.v[i].len = k;
            at += k;
        }
        free(c1);
        free(c2);
        s = norm_text;
    }
    /* work buffers sized for the longest fragment */
    size_t maxf = 1;
    for (size_t i = 0; i < fr.n; i++)
        if (fr.v[i].tok < 0 && fr.v[i].len > maxf) maxf = fr.v[i].len;
    if (maxf > (SIZE_MAX / 16) - 8) goto nomem;
    /* SPM: 3 bytes per space + prefix; BPE: a byte becomes at most 2 UTF-8 bytes */
    buf = malloc(3 * maxf + 8);
    w.sym = malloc((3 * maxf + 8) * sizeof *w.sym);
    if (!buf || !w.sym) goto nomem;
    if (t->kind == RT_TOK_BPE) {
        /* gemma4: 3 escaped bytes per byte, each a code point at most;
         * re-encoded words take up to 3 bytes per escaped byte */
        const size_t ncp = t->spm_bpe ? 3 * maxf : maxf;
        cps = malloc(ncp * sizeof *cps);
        lens = malloc(ncp * sizeof *lens);
        free(buf);
        buf = malloc(t->spm_bpe ? 12 * maxf + 16 : 8 * maxf + 8);
        if (t->spm_bpe) {
            free(w.sym);
            w.sym = malloc((9 * maxf + 8) * sizeof *w.sym);
        }
        if (!cps || !lens || !buf || !w.sym) goto nomem;
    }
    if (add_special && t->add_bos && t->bos >= 0) ipush(&v, t->bos);
    bool prev_special = true; /* the text start counts as following a special token */
    for (size_t i = 0; i < fr.n; i++) {
        const struct frag *f = &fr.v[i];
        if (f->tok >= 0) {
            ipush(&v, f->tok);
            prev_special = true;
            continue;
        }
        if (t->kind == RT_TOK_SPM)
            spm_fragment(&w, s + f->off, f->len, t->add_space_prefix && prev_special, &v, buf);
        else if (t->spm_bpe)
            spmbpe_fragment(&w, s + f->off, f->len, &v, cps, lens, buf, buf + 3 * maxf + 4);
        else
            bpe_fragment(&w, s + f->off, f->len, &v, cps, lens, buf);
        prev_special = false;
    }
    if (add_special && t->add_eos && t->eos >= 0) ipush(&v, t->eos);
    if (v.oom) goto nomem;
    *n_out = v.n;
    if (v.n > cap) {
        st = MW_FAIL(err, MW_E_NOSPACE, MW_ERR_OFF_NONE, "%zu tokens do not fit in %zu", v.n, cap);
    } else if (v.n) {
        memcpy(out, v.v, v.n * sizeof *out);
    }
    goto done;
nomem:
    st = MW_FAIL(err, MW_E_NOMEM, MW_ERR_OFF_NONE, "tokenizing %zu bytes", len);
done:
    free(v.v);
    free(fr.v);
    free(w.sym);
    free(w.heap.v);
    free(buf);
    free(norm_text);
    free(cps);
    free(lens);
    return st;
}
