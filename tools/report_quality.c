/*
 * tools/report_quality.c — the report's quality figures: each file against
 * a reference model on a text, with the runtime's llama-perplexity protocol
 * (rt_perplexity): the reference's logits are saved once to a temporary
 * file (float32, so the KL divergence is exact), then every file is scored
 * against them: perplexity, KL divergence and top-1 agreement on the same
 * tokens.
 */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "runtime/rt.h"
#include "tools/report.h"

/* One model through rt_perplexity: text and save (reference), or base. */
static enum mw_status score(const char *path, const struct report_quality_opts *o,
                            const char *text, size_t len, const char *save, const char *base,
                            struct rt_ppl_result *r, struct mw_err *err)
{
    struct rt_model *m = NULL;
    struct rt_tok *t = NULL;
    struct rt_ctx *c = NULL;
    enum mw_status s = rt_model_open(path, NULL, &m, err);
    if (s == MW_OK) s = rt_tok_init(rt_model_gguf(m), rt_model_hparams(m)->n_vocab, &t, err);
    const struct rt_ctx_opts co = {.n_ctx = o->n_ctx, .n_threads = o->n_threads};
    if (s == MW_OK) s = rt_ctx_init(m, &co, &c, err);
    const struct rt_ppl_opts po = {.n_ctx = o->n_ctx, .max_chunks = o->max_chunks,
                                   .save_logits = save, .kld_base = base};
    if (s == MW_OK) s = rt_perplexity(c, t, text ? text : "", len, &po, r, err);
    rt_ctx_free(c);
    rt_tok_free(t);
    rt_model_close(m);
    return s;
}

enum mw_status report_measure(const struct report_quality_opts *o, struct report_file *files,
                              size_t n, struct mw_err *err)
{
    struct mw_map map;
    enum mw_status s = mw_map_open(&map, o->text, err);
    if (s != MW_OK) return s;
    char *text = malloc((size_t)map.size + 1);
    if (!text) {
        mw_map_close(&map);
        return MW_FAIL(err, MW_E_NOMEM, MW_ERR_OFF_NONE, "out of memory");
    }
    if (map.size) memcpy(text, map.data, (size_t)map.size);
    text[map.size] = '\0';
    const size_t len = (size_t)map.size;
    mw_map_close(&map);

    const char *dir = getenv("TMPDIR");
    char tmp[4096];
    snprintf(tmp, sizeof tmp, "%s/memwall-report-logits.XXXXXX", dir && *dir ? dir : "/tmp");
    const int fd = mkstemp(tmp);
    if (fd < 0) {
        free(text);
        mw_err_set_path(err, tmp);
        return MW_FAIL(err, MW_E_IO, MW_ERR_OFF_NONE, "cannot create a temporary file");
    }
    close(fd);
    struct rt_ppl_result r;
    s = score(o->reference, o, text, len, tmp, NULL, &r, err);
    for (size_t i = 0; i < n && s == MW_OK; i++) {
        s = score(files[i].path, o, NULL, 0, NULL, tmp, &r, err);
        if (s != MW_OK) break;
        struct report_quality *q = &files[i].q;
        q->has = r.has_kld;
        q->ppl = r.ppl;
        q->ppl_unc = r.ppl_unc;
        q->ppl_base = r.ppl_base;
        q->kld = r.kld;
        q->kld_unc = r.kld_unc;
        q->kld_max = r.kld_max;
        q->top1 = r.same_top;
        q->n_chunk = r.n_chunk;
        q->n_scored = r.n_scored;
    }
    unlink(tmp);
    free(text);
    return s;
}
