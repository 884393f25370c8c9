/*
 * methods/methods_imatrix.c — a budget allocation under `memwall quant
 * --corpus`: the importance its losses weigh columns with when there is no
 * --imatrix (one statistics-only calibration pass over the samples the
 * method will use, as llama.cpp's imatrix (mean x²), built in memory), the
 * GPTQ gain, and the output-KL probes (methods_probe.c) that put every
 * tensor's losses in one unit.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "methods/methods.h"
#include "quant/quant_alloc.h"

enum mw_status quant_methods_imatrix(const struct quant_methods_opts *mo,
                                     struct quant_imatrix **out, struct mw_err *err)
{
    struct calib_corpus *c = NULL;
    struct calib_model *m = NULL;
    struct calib_samples *smp = NULL;
    struct calib_stats *st = NULL;
    void *buf = NULL;
    uint64_t size = 0;
    enum mw_status s;
    *out = NULL;
    if ((s = calib_corpus_load(mo->corpus_path, CALIB_CORPUS_AUTO, &c, err)) != MW_OK) goto done;
    if ((s = calib_model_open(mo->model_path, &m, err)) != MW_OK) goto done;
    struct calib_sample_opts so = mo->samples;
    so.n_ctx_max = calib_model_hparams(m)->n_ctx_train;
    if ((s = calib_samples_build(c, calib_model_tok(m), &so, &smp, err)) != MW_OK) goto done;
    struct calib_run_opts ro = {.n_threads = mo->n_threads ? mo->n_threads : 1,
                                .max_memory = mo->max_memory, .on_stage = mo->on_stage,
                                .on_stage_ud = mo->on_stage_ud,
                                .scratch_dir = mo->work_dir};
    if ((s = calib_run(m, smp, &ro, &st, err)) != MW_OK) goto done;
    const char *base = strrchr(mo->corpus_path, '/');
    const char *ds[1] = {base ? base + 1 : mo->corpus_path};
    const struct calib_imatrix_meta meta = {.datasets = ds, .n_datasets = 1};
    if ((s = calib_imatrix_write_mem(st, &meta, &buf, &size, err)) != MW_OK) goto done;
    s = quant_imatrix_load_mem(buf, size, mo->corpus_path, out, err);
done:
    free(buf);
    calib_stats_free(st);
    calib_samples_free(smp);
    calib_corpus_free(c);
    calib_model_close(m);
    return s;
}

enum mw_status quant_methods_budget(const struct quant_source *src, const struct quant_opts *o,
                                    const struct quant_budget *b,
                                    const struct quant_methods_opts *mo,
                                    struct quant_budget_result *r, struct mw_err *err)
{
    memset(r, 0, sizeof *r);
    struct quant_opts ao = *o;
    struct quant_imatrix *cim = NULL;
    if (mo && !o->imatrix) {
        if (o->log) {
            char msg[4200];
            snprintf(msg, sizeof msg, "importance for the allocation from %s (a statistics pass)",
                     mo->corpus_path);
            o->log(o->log_ud, QUANT_LOG_INFO, msg);
        }
        const enum mw_status s = quant_methods_imatrix(mo, &cim, err);
        if (s != MW_OK) return s;
        ao.imatrix = cim;
        ao.imatrix_file = mo->corpus_path;
    }
    struct quant_budget bb = *b;
    bool gptq_type[GGUF_TYPE_COUNT] = {false};
    if (mo && quant_method_uses_gptq(mo->method)) {
        for (uint32_t t = 0; t < GGUF_TYPE_COUNT; t++) gptq_type[t] = quant_gptq_supported(t);
        bb.method_type = gptq_type;
        bb.method_gain = QUANT_GPTQ_ALLOC_GAIN;
        static const char *const skip[] = {"token_embd.weight", NULL}; /* a lookup table */
        bb.method_skip = skip;
    }
    const struct quant_methods_probe_ctx pcx = {.mo = mo, .src = src};
    if (mo && !mo->no_probes) {
        bb.probe = quant_methods_probe;
        bb.probe_ud = (void *)&pcx;
    }
    if (mo) {
        bb.reserve_method = QUANT_METHODS_LABEL_MAX;
        bb.reserve_method_params = QUANT_METHODS_PARAMS_MAX;
    }
    const enum mw_status s = quant_budget_allocate(src, &ao, &bb, r, err);
    quant_imatrix_free(cim);
    return s;
}
