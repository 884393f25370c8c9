/*
 * calib/calib_samples.c — documents -> token stream -> fixed-length samples
 * with BOS (calib.h). Tokenization is the runtime's (rt_tok_encode), one
 * document at a time, no BOS, no special-token parsing; tokenization stops
 * as soon as the stream holds enough tokens for the samples asked for.
 */
#include "calib/calib_int.h"

#include <stdlib.h>
#include <string.h>

struct calib_samples {
    uint32_t n_samples, n_pos, seq_len;
    int32_t *tok; /* (n_samples, n_pos) */
    uint64_t stream_tokens;
    bool exhausted;
};

void calib_samples_free(struct calib_samples *s)
{
    if (!s) return;
    free(s->tok);
    free(s);
}

uint32_t calib_samples_count(const struct calib_samples *s) { return s->n_samples; }
uint32_t calib_samples_n_pos(const struct calib_samples *s) { return s->n_pos; }
uint32_t calib_samples_seq_len(const struct calib_samples *s) { return s->seq_len; }
const int32_t *calib_samples_tokens(const struct calib_samples *s, uint32_t i)
{
    return i < s->n_samples ? s->tok + (uint64_t)i * s->n_pos : NULL;
}
uint64_t calib_samples_stream_tokens(const struct calib_samples *s) { return s->stream_tokens; }
bool calib_samples_exhausted(const struct calib_samples *s) { return s->exhausted; }

enum mw_status calib_samples_from_tokens(const int32_t *tokens, uint32_t n_samples,
                                         uint32_t n_pos, struct calib_samples **out,
                                         struct mw_err *err)
{
    *out = NULL;
    uint64_t n;
    size_t bytes;
    if (n_samples == 0 || n_pos == 0 || !mw_mul_u64(n_samples, n_pos, &n) ||
        !mw_mul_u64(n, sizeof(int32_t), &n) || !mw_u64_to_size(n, &bytes))
        return MW_FAIL(err, MW_E_USAGE, MW_ERR_OFF_NONE, "bad sample shape %u x %u", n_samples,
                       n_pos);
    struct calib_samples *s = calloc(1, sizeof *s);
    if (!s || !(s->tok = malloc(bytes))) {
        free(s);
        return MW_FAIL(err, MW_E_NOMEM, MW_ERR_OFF_NONE, "%zu bytes of samples", bytes);
    }
    memcpy(s->tok, tokens, bytes);
    s->n_samples = n_samples;
    s->n_pos = n_pos;
    s->seq_len = n_pos;
    s->stream_tokens = (uint64_t)n_samples * n_pos;
    *out = s;
    return MW_OK;
}

struct stream {
    int32_t *t;
    uint64_t n, cap;
};

static bool stream_reserve(struct stream *st, uint64_t extra)
{
    if (extra <= st->cap - st->n) return true;
    uint64_t nc = st->cap ? st->cap : 4096;
    while (nc - st->n < extra) {
        if (nc > UINT64_MAX / 2 / sizeof(int32_t)) return false;
        nc *= 2;
    }
    size_t bytes;
    if (!mw_u64_to_size(nc * sizeof(int32_t), &bytes)) return false;
    int32_t *nt = realloc(st->t, bytes);
    if (!nt) return false;
    st->t = nt;
    st->cap = nc;
    return true;
}

enum mw_status calib_samples_build(const struct calib_corpus *c, const struct rt_tok *tok,
                                   const struct calib_sample_opts *o,
                                   struct calib_samples **out, struct mw_err *err)
{
    *out = NULL;
    struct calib_sample_opts opt = {0};
    if (o) opt = *o;
    const bool llamacpp = opt.chunking == CALIB_CHUNK_LLAMACPP;
    uint32_t L = opt.seq_len ? opt.seq_len : CALIB_DEFAULT_SEQ_LEN;
    if (opt.n_ctx_max > 0) {
        const uint32_t max_l = llamacpp ? opt.n_ctx_max : opt.n_ctx_max - 1;
        if (L > max_l) L = max_l;
    }
    if (L < (llamacpp ? 2u : 1u))
        return MW_FAIL(err, MW_E_USAGE, MW_ERR_OFF_NONE, "sequence length %u is too short", L);
    const int32_t bos = rt_tok_bos(tok);
    if (bos < 0)
        return MW_FAIL(err, MW_E_UNSUPPORTED, MW_ERR_OFF_NONE,
                       "the vocabulary has no BOS token; samples start with BOS");
    const uint32_t n_pos = llamacpp ? L : L + 1;
    /* llama.cpp mode with a vocabulary that adds no BOS (qwen's): llama-imatrix
     * tokenizes without one and leaves each chunk's first token as it is */
    const bool lc_bos = !llamacpp || rt_tok_add_bos(tok);
    /* tokens of the stream one sample consumes */
    const uint64_t per = L;
    uint64_t want = UINT64_MAX; /* stream tokens needed; all when n_samples == 0 */
    if (opt.n_samples > 0) want = (uint64_t)opt.n_samples * per - (llamacpp && lc_bos ? 1 : 0);

    struct stream st = {0};
    enum mw_status s = MW_OK;
    bool exhausted = true;
    const uint64_t n_docs = calib_corpus_doc_count(c);
    for (uint64_t d = 0; d < n_docs; d++) {
        if (st.n >= want) {
            exhausted = false;
            break;
        }
        size_t len = 0;
        const char *text = calib_corpus_doc(c, d, &len);
        size_t cap = len + 16, n_tok = 0;
        for (int attempt = 0; attempt < 3; attempt++) {
            if (!stream_reserve(&st, cap)) {
                s = MW_FAIL(err, MW_E_NOMEM, MW_ERR_OFF_NONE, "token stream of %llu tokens",
                            (unsigned long long)(st.n + cap));
                goto fail;
            }
            s = rt_tok_encode(tok, text, len, false, false, st.t + st.n, cap, &n_tok, err);
            if (s != MW_E_NOSPACE) break;
            cap = n_tok;
        }
        if (s) {
            mw_err_set_where(err, "document %llu (line %llu)", (unsigned long long)d + 1,
                             (unsigned long long)calib_corpus_doc_line(c, d));
            goto fail;
        }
        st.n += n_tok;
    }
    /* llama.cpp mode: the stream has a BOS in front: chunk k covers stream'
     * positions [k*L, k*L+L), i.e. stream tokens [k*L, k*L+L-1) after its BOS */
    const uint64_t avail = llamacpp && lc_bos ? (st.n + 1) / L : st.n / L;
    if (avail == 0) {
        s = MW_FAIL(err, MW_E_VALUE, MW_ERR_OFF_NONE,
                    "corpus too short: it gives %llu tokens, one sample of %u positions needs "
                    "%llu (lower --seq-len)",
                    (unsigned long long)st.n, n_pos,
                    (unsigned long long)(llamacpp && lc_bos ? L - 1 : L));
        goto fail;
    }
    uint64_t n_samples = avail;
    if (opt.n_samples > 0 && opt.n_samples < n_samples) n_samples = opt.n_samples;
    if (n_samples > UINT32_MAX) n_samples = UINT32_MAX;
    struct calib_samples *r = calloc(1, sizeof *r);
    uint64_t total, bytes;
    size_t sz;
    if (!r || !mw_mul_u64(n_samples, n_pos, &total) || !mw_mul_u64(total, 4, &bytes) ||
        !mw_u64_to_size(bytes, &sz) || !(r->tok = malloc(sz))) {
        free(r);
        s = MW_FAIL(err, MW_E_NOMEM, MW_ERR_OFF_NONE, "%llu samples of %u tokens",
                    (unsigned long long)n_samples, n_pos);
        goto fail;
    }
    for (uint64_t k = 0; k < n_samples; k++) {
        int32_t *dst = r->tok + k * n_pos;
        if (!lc_bos) { /* the stream's own tokens, no BOS */
            memcpy(dst, st.t + k * L, (size_t)n_pos * sizeof(int32_t));
            continue;
        }
        dst[0] = bos;
        const int32_t *src = st.t + k * L;
        memcpy(dst + 1, src, (size_t)(n_pos - 1) * sizeof(int32_t));
    }
    r->n_samples = (uint32_t)n_samples;
    r->n_pos = n_pos;
    r->seq_len = L;
    r->stream_tokens = st.n;
    r->exhausted = exhausted;
    free(st.t);
    *out = r;
    return MW_OK;
fail:
    free(st.t);
    return s;
}
