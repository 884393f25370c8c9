/*
 * llama-peer ppl: llama-perplexity's protocol and its KL divergence (see
 * llama_peer.c's header for the protocol, step by step).
 */
#define _GNU_SOURCE
#include "peer.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ------------------------------------------------------------------ ppl */

/* llama.cpp: log_softmax(n_vocab, logits, tok) -> logit[tok]-max-log(sum) */
static double nll_plain(int n_vocab, const float *logits, int tok)
{
    float max_logit = logits[0];
    for (int i = 1; i < n_vocab; ++i) max_logit = fmaxf(max_logit, logits[i]);
    double sum_exp = 0.0;
    for (int i = 0; i < n_vocab; ++i) sum_exp += expf(logits[i] - max_logit);
    return -(logits[tok] - max_logit - log(sum_exp));
}

static inline int nearest_int(float fval)
{
    float val = fval + 12582912.f;
    int i;
    memcpy(&i, &val, sizeof(int));
    return (i & 0x007fffff) - 0x00400000;
}

/* llama.cpp: the uint16 log-prob row written by --kl-divergence-base; returns
 * the NLL of tok (float arithmetic, as there). */
static double nll_llamacpp_row(int n_vocab, const float *logits, uint16_t *log_prob, int tok)
{
    float max_logit = logits[0], min_logit = logits[0];
    for (int i = 1; i < n_vocab; ++i) {
        max_logit = fmaxf(max_logit, logits[i]);
        min_logit = fminf(min_logit, logits[i]);
    }
    min_logit = fmaxf(min_logit, max_logit - 16);
    double sum_exp = 0.0;
    for (int i = 0; i < n_vocab; ++i) sum_exp += expf(logits[i] - max_logit);
    const float log_sum_exp = (float)log(sum_exp);
    const float min_log_prob = min_logit - max_logit - log_sum_exp;
    const float scale = (max_logit - min_logit) / 65535.f;
    float d[2] = {scale, min_log_prob};
    memcpy(log_prob, d, sizeof d);
    log_prob += 4;
    if (scale != 0.0f) {
        const float inv_scale = 1 / scale;
        for (int i = 0; i < n_vocab; ++i)
            log_prob[i] = logits[i] > min_logit ? (uint16_t)nearest_int(inv_scale * (logits[i] - min_logit)) : 0;
    } else {
        memset(log_prob, 0, (size_t)n_vocab * sizeof(uint16_t));
    }
    return max_logit + log_sum_exp - logits[tok];
}

struct kld_acc {
    double sum_nll, sum_nll2, sum_nll_base, sum_nll_base2;
    double sum_kld, sum_kld2, sum_p_diff2;
    double max_kld;
    size_t n_same_top, count;
};

/* llama.cpp: log_softmax(n_vocab, logits, base_log_prob, tok, kld) — against
 * a uint16 base row.  Same arithmetic (including the -16 cut-off). */
static void kld_llamacpp_row(int n_vocab, const float *logits, const uint16_t *base, int tok, struct kld_acc *k)
{
    float max_logit = logits[0];
    int imax = 0;
    for (int i = 1; i < n_vocab; ++i)
        if (logits[i] > max_logit) { max_logit = logits[i]; imax = i; }
    double sum_exp = 0.0;
    for (int i = 0; i < n_vocab; ++i) sum_exp += expf(logits[i] - max_logit);
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
    k->sum_nll_base2 += (double)nll_base * nll_base;
    max_logit += log_sum_exp;
    double sum = 0;
    int imax_base = -1;
    float p_log_base_max = 0;
    for (int i = 0; i < n_vocab; ++i) {
        const float p_log_base = scale * base[i] + min_log_prob;
        if (i == 0 || p_log_base > p_log_base_max) { p_log_base_max = p_log_base; imax_base = i; }
        if (p_log_base > -16.f) {
            const float p_base = expf(p_log_base);
            sum += p_base * (p_log_base - logits[i] + max_logit);
        }
    }
    k->sum_kld += sum;
    k->sum_kld2 += sum * sum;
    if (sum > k->max_kld) k->max_kld = sum;
    k->count++;
    if (imax == imax_base) k->n_same_top++;
    const float p_diff = expf(-nll) - expf(-nll_base);
    k->sum_p_diff2 += (double)p_diff * p_diff;
}

/* Exact KL(base || this) in double, from float32 logit rows of both. */
static void kld_f32_row(int n_vocab, const float *logits, const float *base, int tok, struct kld_acc *k)
{
    double mx = logits[0], mb = base[0];
    int imax = 0, imax_base = 0;
    for (int i = 1; i < n_vocab; ++i) {
        if (logits[i] > mx) { mx = logits[i]; imax = i; }
        if (base[i] > mb) { mb = base[i]; imax_base = i; }
    }
    double s = 0, sb = 0;
    for (int i = 0; i < n_vocab; ++i) {
        s += exp(logits[i] - mx);
        sb += exp(base[i] - mb);
    }
    const double lse = mx + log(s), lseb = mb + log(sb);
    double kl = 0;
    for (int i = 0; i < n_vocab; ++i) {
        const double lpb = base[i] - lseb;
        kl += exp(lpb) * (lpb - (logits[i] - lse));
    }
    if (kl < 0) kl = 0; /* rounding */
    const double nll = lse - logits[tok], nll_base = lseb - base[tok];
    k->sum_nll += nll;
    k->sum_nll2 += nll * nll;
    k->sum_nll_base += nll_base;
    k->sum_nll_base2 += nll_base * nll_base;
    k->sum_kld += kl;
    k->sum_kld2 += kl * kl;
    if (kl > k->max_kld) k->max_kld = kl;
    k->count++;
    if (imax == imax_base) k->n_same_top++;
    const double p_diff = exp(-nll) - exp(-nll_base);
    k->sum_p_diff2 += p_diff * p_diff;
}

#define F32_MAGIC "MWPEERL1"
#define LCPP_MAGIC "_logits_"

/* Logit files.
 *   float32 (--save-logits): "MWPEERL1", u32 n_ctx, u32 n_vocab, u32 n_chunk,
 *     u32 first (= n_ctx/2), i32 tokens[n_chunk*n_ctx] (as tokenized, before
 *     the BOS substitution), then per chunk (n_ctx-1-first) rows of n_vocab
 *     float32 logits: the rows of positions first .. n_ctx-2.
 *   llama.cpp (--save-logits-llamacpp): llama-perplexity's
 *     --kl-divergence-base format, byte for byte: "_logits_", u32 n_ctx,
 *     i32 n_vocab, i32 n_chunk, i32 tokens[n_chunk*n_ctx], then per chunk
 *     (n_ctx-1-n_ctx/2) rows of nv = 2*((n_vocab+1)/2)+4 uint16 (float scale,
 *     float min_log_prob, log-probs quantized to 16 bits).
 */
struct logit_file {
    FILE *f;
    int is_f32;
    uint32_t n_ctx;
    int32_t n_vocab, n_chunk;
    llama_token *tokens;
};

static void xfwrite(const void *p, size_t sz, size_t n, FILE *f, const char *path)
{
    if (fwrite(p, sz, n, f) != n) die(EXIT_FAIL, "write error on %s: %s", path, strerror(errno));
}

static void xfread(void *p, size_t sz, size_t n, FILE *f, const char *path)
{
    if (fread(p, sz, n, f) != n) die(EXIT_FAIL, "%s: truncated or unreadable", path);
}

static void open_base(struct logit_file *b, const char *path)
{
    memset(b, 0, sizeof *b);
    b->f = fopen(path, "rb");
    if (!b->f) die(EXIT_FAIL, "cannot open %s: %s", path, strerror(errno));
    char magic[8];
    xfread(magic, 1, 8, b->f, path);
    if (!memcmp(magic, F32_MAGIC, 8)) {
        uint32_t h[4];
        xfread(h, sizeof h[0], 4, b->f, path);
        b->is_f32 = 1;
        b->n_ctx = h[0];
        b->n_vocab = (int32_t)h[1];
        b->n_chunk = (int32_t)h[2];
        if (h[3] != h[0] / 2) die(EXIT_FAIL, "%s: unexpected scored range", path);
    } else if (!memcmp(magic, LCPP_MAGIC, 8)) {
        xfread(&b->n_ctx, sizeof b->n_ctx, 1, b->f, path);
        xfread(&b->n_vocab, sizeof b->n_vocab, 1, b->f, path);
        xfread(&b->n_chunk, sizeof b->n_chunk, 1, b->f, path);
    } else {
        die(EXIT_FAIL, "%s is not a logits file (neither %s nor llama.cpp's %s)", path, F32_MAGIC, LCPP_MAGIC);
    }
    if (b->n_ctx < 4 || b->n_vocab <= 0 || b->n_chunk <= 0 || b->n_ctx > (1u << 24) || b->n_chunk > (1 << 24))
        die(EXIT_FAIL, "%s: bad header", path);
    size_t nt = (size_t)b->n_ctx * (size_t)b->n_chunk;
    b->tokens = xmalloc(nt * sizeof *b->tokens);
    xfread(b->tokens, sizeof *b->tokens, nt, b->f, path);
}

int cmd_ppl(const char *model_path, const char *text_path, const struct ppl_opts *o)
{
    size_t len;
    char *text = read_file(text_path, &len);
    if (o->bytes >= 0 && (size_t)o->bytes < len) len = (size_t)o->bytes;
    if (len > 0 && text[len - 1] == '\n') len--; /* llama.cpp's -f drops one trailing newline */

    const double t0 = now_s();
    peer_init();
    struct llama_model *model = load_model(model_path);
    const struct llama_vocab *vocab = llama_model_get_vocab(model);
    const int n_vocab = llama_vocab_n_tokens(vocab);
    const int n_ctx = o->ctx;
    const int n_batch = o->batch > 0 ? o->batch : n_ctx;
    if (!(n_batch < n_ctx || n_batch % n_ctx == 0))
        die(EXIT_USAGE, "--batch must be below --ctx or a multiple of it (llama-perplexity's rule)");
    if (llama_vocab_get_add_eos(vocab)) die(EXIT_FAIL, "model adds EOS; llama-perplexity refuses such models");
    const int add_bos = llama_vocab_get_add_bos(vocab);

    int n_tok;
    llama_token *tokens = tokenize(vocab, text, len, 1, &n_tok);
    const int n_tok_text = n_tok;
    free(text);

    struct logit_file base = {0};
    if (o->kld_base) {
        open_base(&base, o->kld_base);
        if ((int)base.n_ctx != n_ctx)
            die(EXIT_USAGE, "%s was made with --ctx %u, not %d", o->kld_base, base.n_ctx, n_ctx);
        if (base.n_vocab != n_vocab)
            die(EXIT_FAIL, "%s has n_vocab %d, the model %d", o->kld_base, base.n_vocab, n_vocab);
        /* llama-perplexity --kl-divergence scores the base file's tokens. */
        const size_t nb = (size_t)base.n_ctx * (size_t)base.n_chunk;
        if ((size_t)n_tok < nb || memcmp(tokens, base.tokens, nb * sizeof *tokens) != 0)
            fprintf(stderr, "llama-peer: warning: the text tokenizes differently from %s; "
                            "using the base file's tokens (as llama-perplexity does)\n", o->kld_base);
        free(tokens);
        tokens = base.tokens;
        n_tok = (int)nb;
    } else if (n_tok < 2 * n_ctx) {
        die(EXIT_FAIL, "need at least %d tokens for --ctx %d, the text has %d", 2 * n_ctx, n_ctx, n_tok);
    }

    int n_chunk = n_tok / n_ctx;
    if (o->chunks > 0 && o->chunks < n_chunk) n_chunk = o->chunks;
    const int n_seq = n_batch / n_ctx > 1 ? n_batch / n_ctx : 1;
    const int num_batches = (n_ctx + n_batch - 1) / n_batch;
    const int first = n_ctx / 2;
    const int n_score = n_ctx - 1 - first;
    const int nv = 2 * ((n_vocab + 1) / 2) + 4;

    struct llama_context *ctx = make_context(model, (uint32_t)(n_ctx * n_seq),
                                             (uint32_t)(n_batch < n_ctx * n_seq ? n_batch : n_ctx * n_seq),
                                             (uint32_t)n_seq);
    const int bcap = n_batch < n_ctx * n_seq ? n_batch : n_ctx * n_seq;
    struct llama_batch batch = llama_batch_init(bcap, 0, 1);

    float *acc_logits = NULL; /* outputs gathered over several decodes when num_batches > 1 */
    if (num_batches > 1) acc_logits = xmalloc((size_t)n_ctx * (size_t)n_vocab * sizeof(float));

    FILE *f32 = NULL, *flc = NULL;
    uint16_t *lp_row = NULL;
    if (o->save_f32) {
        f32 = fopen(o->save_f32, "wb");
        if (!f32) die(EXIT_FAIL, "cannot create %s: %s", o->save_f32, strerror(errno));
        uint32_t h[4] = {(uint32_t)n_ctx, (uint32_t)n_vocab, (uint32_t)n_chunk, (uint32_t)first};
        xfwrite(F32_MAGIC, 1, 8, f32, o->save_f32);
        xfwrite(h, sizeof h[0], 4, f32, o->save_f32);
        xfwrite(tokens, sizeof *tokens, (size_t)n_chunk * (size_t)n_ctx, f32, o->save_f32);
    }
    if (o->save_lcpp) {
        flc = fopen(o->save_lcpp, "wb");
        if (!flc) die(EXIT_FAIL, "cannot create %s: %s", o->save_lcpp, strerror(errno));
        uint32_t c = (uint32_t)n_ctx;
        xfwrite(LCPP_MAGIC, 1, 8, flc, o->save_lcpp);
        xfwrite(&c, sizeof c, 1, flc, o->save_lcpp);
        xfwrite(&n_vocab, sizeof n_vocab, 1, flc, o->save_lcpp);
        xfwrite(&n_chunk, sizeof n_chunk, 1, flc, o->save_lcpp);
        xfwrite(tokens, sizeof *tokens, (size_t)n_chunk * (size_t)n_ctx, flc, o->save_lcpp);
        lp_row = xmalloc((size_t)nv * sizeof(uint16_t));
    }
    void *base_rows = NULL;
    if (base.f)
        base_rows = xmalloc((size_t)n_score * (base.is_f32 ? (size_t)n_vocab * sizeof(float)
                                                           : (size_t)nv * sizeof(uint16_t)));

    double nll = 0.0;
    long count = 0;
    struct kld_acc k;
    memset(&k, 0, sizeof k);
    const double t1 = now_s();

    for (int i = 0; i < n_chunk; i += n_seq) {
        const int start = i * n_ctx;
        const int end = start + n_ctx;
        const int n_seq_batch = n_seq < n_chunk - i ? n_seq : n_chunk - i;
        size_t acc_rows = 0;

        llama_memory_clear(llama_get_memory(ctx), true);

        for (int j = 0; j < num_batches; ++j) {
            const int batch_start = start + j * n_batch;
            const int batch_size = end - batch_start < n_batch ? end - batch_start : n_batch;
            int n_outputs = 0;
            batch.n_tokens = 0;
            for (int seq = 0; seq < n_seq_batch; seq++) {
                const int seq_start = batch_start + seq * n_ctx;
                for (int kk = 0; kk < batch_size; ++kk) {
                    const int idx = seq * n_ctx + kk;
                    llama_token t = tokens[seq_start + kk];
                    if (add_bos && j == 0 && kk == 0) t = llama_vocab_bos(vocab);
                    batch.token[idx] = t;
                    batch.pos[idx] = j * n_batch + kk;
                    batch.n_seq_id[idx] = 1;
                    batch.seq_id[idx][0] = seq;
                    batch.logits[idx] = batch.pos[idx] >= first ? 1 : 0;
                    n_outputs += batch.logits[idx] != 0;
                }
                batch.n_tokens += batch_size;
            }
            if (llama_decode(ctx, batch)) {
                print_llama_errors();
                die(EXIT_FAIL, "llama_decode failed (chunk %d)", i);
            }
            if (num_batches > 1 && n_outputs > 0) {
                const float *bl = llama_get_logits(ctx);
                memcpy(acc_logits + acc_rows * (size_t)n_vocab, bl, (size_t)n_outputs * (size_t)n_vocab * sizeof(float));
                acc_rows += (size_t)n_outputs;
            }
        }

        for (int seq = 0; seq < n_seq_batch; seq++) {
            const float *rows = num_batches > 1 ? acc_logits : llama_get_logits_ith(ctx, seq * n_ctx + first);
            if (!rows) die(EXIT_FAIL, "no logits for chunk %d", i + seq);
            const llama_token *td = tokens + start + seq * n_ctx + first;
            if (base.f) {
                const size_t rowsz = base.is_f32 ? (size_t)n_vocab * sizeof(float) : (size_t)nv * sizeof(uint16_t);
                xfread(base_rows, rowsz, (size_t)n_score, base.f, o->kld_base);
            }
            if (f32) xfwrite(rows, sizeof(float) * (size_t)n_vocab, (size_t)n_score, f32, o->save_f32);
            for (int r = 0; r < n_score; ++r) {
                const float *row = rows + (size_t)r * (size_t)n_vocab;
                if (base.f && base.is_f32) {
                    kld_f32_row(n_vocab, row, (const float *)base_rows + (size_t)r * (size_t)n_vocab, td[r + 1], &k);
                } else if (base.f) {
                    kld_llamacpp_row(n_vocab, row, (const uint16_t *)base_rows + (size_t)r * (size_t)nv, td[r + 1], &k);
                } else if (flc) {
                    nll += nll_llamacpp_row(n_vocab, row, lp_row, td[r + 1]);
                    xfwrite(lp_row, sizeof(uint16_t), (size_t)nv, flc, o->save_lcpp);
                } else {
                    nll += nll_plain(n_vocab, row, td[r + 1]);
                }
            }
            count += n_score;
        }
    }
    const double t2 = now_s();

    if (base.f) nll = k.sum_nll;
    const double ppl = exp(nll / (double)count);
    /* tokens: what the text tokenized to (BOS included); scored: NLL terms */
    printf("ppl %.6f chunks %d tokens %d scored %ld\n", ppl, n_chunk, n_tok_text, count);
    if (base.f) {
        const double kl = k.sum_kld / (double)k.count;
        double var = k.sum_kld2 / (double)k.count - kl * kl;
        const double kl_unc = var > 0 && k.count > 10 ? sqrt(var / (double)(k.count - 1)) : 0;
        printf("kld %.9f\n", kl);
        printf("kld_unc %.9f\n", kl_unc);
        printf("kld_max %.6f\n", k.max_kld);
        printf("ppl_base %.6f\n", exp(k.sum_nll_base / (double)k.count));
        printf("same_top %.6f\n", (double)k.n_same_top / (double)k.count);
        printf("rms_dp %.6f\n", sqrt(k.sum_p_diff2 / (double)k.count));
        printf("kld_method %s\n", base.is_f32 ? "f32-exact" : "llama.cpp-uint16");
    }
    printf("seconds %.3f eval %.3f threads %d cpu %s\n", t2 - t0, t2 - t1, g_threads, cpu_variant_name());

    if (f32 && fclose(f32)) die(EXIT_FAIL, "write error on %s", o->save_f32);
    if (flc && fclose(flc)) die(EXIT_FAIL, "write error on %s", o->save_lcpp);
    if (base.f) {
        if (fgetc(base.f) != EOF && o->chunks <= 0)
            fprintf(stderr, "llama-peer: warning: %s has more rows than were scored\n", o->kld_base);
        fclose(base.f);
    }
    free(base_rows);
    free(lp_row);
    free(acc_logits);
    free(tokens);
    llama_batch_free(batch);
    llama_free(ctx);
    llama_model_free(model);
    llama_backend_free();
    return 0;
}
