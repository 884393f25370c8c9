/*
 * runtime/rt_ppl.c — perplexity and KL divergence with llama.cpp's
 * llama-perplexity protocol (rt.h; tools/perplexity/perplexity.cpp at the
 * pinned llama.cpp commit, as reproduced by tests/peer/llama_peer.c).
 *
 * Files are read and written in the host's byte order, which is
 * little-endian on every platform memwall builds for (x86-64, aarch64), as
 * llama.cpp does.
 */
#define _POSIX_C_SOURCE 200809L
#include "runtime/rt_int.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define F32_MAGIC "MWPEERL1"
#define LCPP_MAGIC "_logits_"

/* llama.cpp log_softmax: -(l[tok] - max - log(sum exp(l - max))) */
static double nll_row(uint32_t n_vocab, const float *l, int32_t tok)
{
    float mx = l[0];
    for (uint32_t i = 1; i < n_vocab; i++) mx = fmaxf(mx, l[i]);
    double sum = 0.0;
    for (uint32_t i = 0; i < n_vocab; i++) sum += expf(l[i] - mx);
    return -(l[tok] - mx - log(sum));
}

struct kld_acc {
    double sum_nll, sum_nll2, sum_nll_base;
    double sum_kld, sum_kld2, sum_p_diff2, max_kld;
    uint64_t n_same_top, count;
};

/* against a llama.cpp uint16 row: same arithmetic as perplexity.cpp */
static void kld_lcpp_row(uint32_t n_vocab, const float *logits, const uint16_t *base, int32_t tok,
                         struct kld_acc *k)
{
    float max_logit = logits[0];
    uint32_t imax = 0;
    for (uint32_t i = 1; i < n_vocab; i++)
        if (logits[i] > max_logit) {
            max_logit = logits[i];
            imax = i;
        }
    double sum_exp = 0.0;
    for (uint32_t i = 0; i < n_vocab; i++) sum_exp += expf(logits[i] - max_logit);
    const float log_sum_exp = (float)log(sum_exp);
    float d[2];
    memcpy(d, base, sizeof d);
    const float scale = d[0], min_log_prob = d[1];
    base += 4;
    const float nll = max_logit + log_sum_exp - logits[tok];
    k->sum_nll += nll;
    k->sum_nll2 += (double)nll * nll;
    const float nll_base = -(scale * base[tok] + min_log_prob);
    k->sum_nll_base += nll_base;
    max_logit += log_sum_exp;
    double sum = 0;
    int64_t imax_base = -1;
    float p_log_base_max = 0;
    for (uint32_t i = 0; i < n_vocab; i++) {
        const float p_log_base = scale * base[i] + min_log_prob;
        if (i == 0 || p_log_base > p_log_base_max) {
            p_log_base_max = p_log_base;
            imax_base = i;
        }
        if (p_log_base > -16.f) {
            const float p_base = expf(p_log_base);
            sum += p_base * (p_log_base - logits[i] + max_logit);
        }
    }
    k->sum_kld += sum;
    k->sum_kld2 += sum * sum;
    if (sum > k->max_kld) k->max_kld = sum;
    k->count++;
    if ((int64_t)imax == imax_base) k->n_same_top++;
    const float p_diff = expf(-nll) - expf(-nll_base);
    k->sum_p_diff2 += (double)p_diff * p_diff;
}

/* exact KL(base || this) in double from float32 rows of both */
static void kld_f32_row(uint32_t n_vocab, const float *logits, const float *base, int32_t tok,
                        struct kld_acc *k)
{
    double mx = logits[0], mb = base[0];
    uint32_t imax = 0, imax_base = 0;
    for (uint32_t i = 1; i < n_vocab; i++) {
        if (logits[i] > mx) mx = logits[i], imax = i;
        if (base[i] > mb) mb = base[i], imax_base = i;
    }
    double s = 0, sb = 0;
    for (uint32_t i = 0; i < n_vocab; i++) {
        s += exp(logits[i] - mx);
        sb += exp(base[i] - mb);
    }
    const double lse = mx + log(s), lseb = mb + log(sb);
    double kl = 0;
    for (uint32_t i = 0; i < n_vocab; i++) {
        const double lpb = base[i] - lseb;
        kl += exp(lpb) * (lpb - (logits[i] - lse));
    }
    if (kl < 0) kl = 0;
    const double nll = lse - logits[tok], nll_base = lseb - base[tok];
    k->sum_nll += nll;
    k->sum_nll2 += nll * nll;
    k->sum_nll_base += nll_base;
    k->sum_kld += kl;
    k->sum_kld2 += kl * kl;
    if (kl > k->max_kld) k->max_kld = kl;
    k->count++;
    if (imax == imax_base) k->n_same_top++;
    const double p_diff = exp(-nll) - exp(-nll_base);
    k->sum_p_diff2 += p_diff * p_diff;
}

struct base {
    FILE *f;
    const char *path;
    bool f32;
    uint32_t n_ctx, n_vocab, n_chunk;
    uint64_t off;
};

static enum mw_status rd(struct base *b, void *p, size_t sz, size_t n, const char *what,
                         struct mw_err *err)
{
    if (n && fread(p, sz, n, b->f) != n) {
        mw_err_set_path(err, b->path);
        return MW_FAIL(err, ferror(b->f) ? MW_E_IO : MW_E_TRUNC, b->off, "%s: %s", what,
                       ferror(b->f) ? strerror(errno) : "file ends early");
    }
    b->off += (uint64_t)sz * n;
    return MW_OK;
}

static enum mw_status open_base(struct base *b, const char *path, uint32_t n_vocab,
                                struct mw_err *err)
{
    memset(b, 0, sizeof *b);
    b->path = path;
    b->f = fopen(path, "rb");
    if (!b->f) {
        mw_err_set_path(err, path);
        return MW_FAIL(err, MW_E_IO, MW_ERR_OFF_NONE, "cannot open: %s", strerror(errno));
    }
    char magic[8];
    enum mw_status s;
    if ((s = rd(b, magic, 1, 8, "magic", err))) return s;
    uint32_t h[4];
    if (memcmp(magic, F32_MAGIC, 8) == 0) {
        if ((s = rd(b, h, 4, 4, "header", err))) return s;
        b->f32 = true;
        if (h[3] != h[0] / 2) {
            mw_err_set_path(err, path);
            return MW_FAIL(err, MW_E_FORMAT, 20, "scored range starts at %u, expected n_ctx/2 = %u",
                           h[3], h[0] / 2);
        }
    } else if (memcmp(magic, LCPP_MAGIC, 8) == 0) {
        if ((s = rd(b, h, 4, 3, "header", err))) return s;
    } else {
        mw_err_set_path(err, path);
        return MW_FAIL(err, MW_E_FORMAT, 0,
                       "not a logits file (magic is neither \"%s\" nor llama.cpp's \"%s\")",
                       F32_MAGIC, LCPP_MAGIC);
    }
    b->n_ctx = h[0];
    b->n_vocab = h[1];
    b->n_chunk = h[2];
    mw_err_set_path(err, path);
    if (b->n_ctx < 4 || b->n_ctx > RT_MAX_CTX || b->n_chunk == 0 || b->n_chunk > (1u << 24) ||
        (int32_t)b->n_vocab <= 0)
        return MW_FAIL(err, MW_E_FORMAT, 8, "bad header (n_ctx %u, n_vocab %d, n_chunk %u)",
                       b->n_ctx, (int32_t)b->n_vocab, b->n_chunk);
    if (b->n_vocab != n_vocab)
        return MW_FAIL(err, MW_E_VALUE, 12, "logits of %u-token vocabulary, the model has %u",
                       b->n_vocab, n_vocab);
    mw_err_clear(err);
    return MW_OK;
}

enum mw_status rt_perplexity(struct rt_ctx *c, const struct rt_tok *t, const char *text,
                             size_t len, const struct rt_ppl_opts *o, struct rt_ppl_result *res,
                             struct mw_err *err)
{
    memset(res, 0, sizeof *res);
    const struct rt_hparams *hp = &c->m->hp;
    const uint32_t n_vocab = hp->n_vocab;
    const uint32_t n_ctx = o->n_ctx ? o->n_ctx : 256;
    if (n_ctx < 4 || n_ctx > c->n_ctx)
        return MW_FAIL(err, MW_E_USAGE, MW_ERR_OFF_NONE,
                       "perplexity context %u must be in 4..%u (the context's size)", n_ctx,
                       c->n_ctx);
    enum mw_status s = MW_OK;
    int32_t *tokens = NULL, *chunk = NULL;
    float *logits = NULL, *base_f32 = NULL;
    uint16_t *base_u16 = NULL;
    FILE *save = NULL;
    struct base b = {0};
    size_t n_tok = 0;
    const uint32_t nv16 = 2 * ((n_vocab + 1) / 2) + 4;

    if (o->kld_base) {
        if ((s = open_base(&b, o->kld_base, n_vocab, err))) goto done;
        if (b.n_ctx != n_ctx) {
            mw_err_set_path(err, o->kld_base);
            s = MW_FAIL(err, MW_E_VALUE, 8, "made with context %u, not %u", b.n_ctx, n_ctx);
            goto done;
        }
        n_tok = (size_t)b.n_ctx * b.n_chunk;
        tokens = malloc(n_tok * sizeof *tokens);
        if (!tokens) goto nomem;
        if ((s = rd(&b, tokens, 4, n_tok, "tokens", err))) goto done;
        for (size_t i = 0; i < n_tok; i++)
            if (tokens[i] < 0 || (uint32_t)tokens[i] >= n_vocab) {
                mw_err_set_path(err, o->kld_base);
                s = MW_FAIL(err, MW_E_FORMAT, b.off - 4 * (n_tok - i),
                            "token %d at index %zu is outside the vocabulary", tokens[i], i);
                goto done;
            }
    } else {
        if (len > 0 && text[len - 1] == '\n') len--;
        size_t need = 0;
        s = rt_tok_encode(t, text, len, true, false, NULL, 0, &need, NULL);
        if (s && s != MW_E_NOSPACE) {
            s = rt_tok_encode(t, text, len, true, false, NULL, 0, &need, err);
            goto done;
        }
        tokens = malloc((need ? need : 1) * sizeof *tokens);
        if (!tokens) goto nomem;
        if ((s = rt_tok_encode(t, text, len, true, false, tokens, need, &n_tok, err))) goto done;
        if (n_tok < 2 * (size_t)n_ctx) {
            s = MW_FAIL(err, MW_E_VALUE, MW_ERR_OFF_NONE,
                        "the text gives %zu tokens; perplexity with context %u needs at least %u",
                        n_tok, n_ctx, 2 * n_ctx);
            goto done;
        }
    }
    res->n_tokens = n_tok;
    uint32_t n_chunk = (uint32_t)(n_tok / n_ctx);
    if (o->max_chunks && o->max_chunks < n_chunk) n_chunk = o->max_chunks;
    const uint32_t first = n_ctx / 2;
    const uint32_t n_score = n_ctx - 1 - first;
    /* logits come in slices of nb rows; a slice of at least RT_FA_TILE tokens
     * keeps llama-perplexity's attention path (its whole chunk is one ubatch) */
    uint32_t nb = c->n_batch < RT_FA_TILE ? RT_FA_TILE : c->n_batch;
    if (nb > n_ctx - first) nb = n_ctx - first;

    chunk = malloc((size_t)n_ctx * sizeof *chunk);
    logits = malloc((size_t)nb * n_vocab * sizeof *logits);
    if (!chunk || !logits) goto nomem;
    if (b.f) {
        if (b.f32) base_f32 = malloc((size_t)n_vocab * sizeof *base_f32);
        else base_u16 = malloc((size_t)nv16 * sizeof *base_u16);
        if (!base_f32 && !base_u16) goto nomem;
    }
    if (o->save_logits) {
        save = fopen(o->save_logits, "wb");
        if (!save) {
            mw_err_set_path(err, o->save_logits);
            s = MW_FAIL(err, MW_E_IO, MW_ERR_OFF_NONE, "cannot create: %s", strerror(errno));
            goto done;
        }
        const uint32_t h[4] = {n_ctx, n_vocab, n_chunk, first};
        if (fwrite(F32_MAGIC, 1, 8, save) != 8 || fwrite(h, 4, 4, save) != 4 ||
            fwrite(tokens, 4, (size_t)n_chunk * n_ctx, save) != (size_t)n_chunk * n_ctx)
            goto ioerr;
    }

    const bool add_bos = rt_tok_add_bos(t) && rt_tok_bos(t) >= 0;
    double nll = 0.0, nll2 = 0.0;
    uint64_t count = 0;
    struct kld_acc k;
    memset(&k, 0, sizeof k);
    const double t0 = mw_now_s();
    for (uint32_t ci = 0; ci < n_chunk; ci++) {
        memcpy(chunk, tokens + (size_t)ci * n_ctx, (size_t)n_ctx * sizeof *chunk);
        if (add_bos) chunk[0] = rt_tok_bos(t);
        rt_ctx_reset(c);
        if ((s = rt_eval(c, chunk, first, 0, NULL, err))) goto done;
        for (uint32_t p0 = first; p0 < n_ctx; p0 += nb) {
            const uint32_t n = n_ctx - p0 < nb ? n_ctx - p0 : nb;
            if ((s = rt_eval(c, chunk + p0, n, 0, logits, err))) goto done;
            for (uint32_t j = 0; j < n; j++) {
                const uint32_t pos = p0 + j;
                if (pos > n_ctx - 2) break;
                const float *row = logits + (size_t)j * n_vocab;
                const int32_t tok = tokens[(size_t)ci * n_ctx + pos + 1];
                if (save && fwrite(row, sizeof *row, n_vocab, save) != n_vocab) goto ioerr;
                if (base_f32) {
                    if ((s = rd(&b, base_f32, 4, n_vocab, "logit row", err))) goto done;
                    kld_f32_row(n_vocab, row, base_f32, tok, &k);
                } else if (base_u16) {
                    if ((s = rd(&b, base_u16, 2, nv16, "logit row", err))) goto done;
                    kld_lcpp_row(n_vocab, row, base_u16, tok, &k);
                } else {
                    const double v = nll_row(n_vocab, row, tok);
                    nll += v;
                    nll2 += v * v;
                }
                count++;
            }
        }
        if (o->progress) {
            const double sofar = b.f ? k.sum_nll : nll;
            o->progress(o->progress_ud, ci + 1, n_chunk, exp(sofar / (double)count));
        }
    }
    res->seconds = mw_now_s() - t0;
    (void)n_score;
    if (b.f) {
        nll = k.sum_nll;
        nll2 = k.sum_nll2;
        res->has_kld = true;
        res->kld_exact = b.f32;
        res->kld = k.sum_kld / (double)k.count;
        const double var = k.sum_kld2 / (double)k.count - res->kld * res->kld;
        res->kld_unc = var > 0 && k.count > 10 ? sqrt(var / (double)(k.count - 1)) : 0;
        res->kld_max = k.max_kld;
        res->ppl_base = exp(k.sum_nll_base / (double)k.count);
        res->same_top = (double)k.n_same_top / (double)k.count;
        res->rms_dp = sqrt(k.sum_p_diff2 / (double)k.count);
    }
    res->n_chunk = n_chunk;
    res->n_scored = count;
    const double mean = nll / (double)count;
    res->ppl = exp(mean);
    const double var = nll2 / (double)count - mean * mean;
    res->ppl_unc = var > 0 && count > 1 ? sqrt(var / (double)(count - 1)) * res->ppl : 0;
    if (save) {
        const int rc = fclose(save);
        save = NULL;
        if (rc != 0) goto ioerr;
    }
    goto done;
ioerr:
    mw_err_set_path(err, o->save_logits);
    s = MW_FAIL(err, MW_E_IO, MW_ERR_OFF_NONE, "write error: %s", strerror(errno));
    goto done;
nomem:
    s = MW_FAIL(err, MW_E_NOMEM, MW_ERR_OFF_NONE, "perplexity buffers");
done:
    if (save) fclose(save);
    if (b.f) fclose(b.f);
    free(tokens);
    free(chunk);
    free(logits);
    free(base_f32);
    free(base_u16);
    return s;
}
