/*
 * hf/hf_quant.c — a Hugging Face checkpoint as a quant pipeline source
 * (`memwall quant DIR`): the F16 conversion plan's tensors, streamed on
 * demand, with the KVs `memwall convert` writes (hf_convert_kvs).
 */
#include "hf/hf.h"
#include "quant/quant.h"

#include <stdlib.h>
#include <string.h>

struct hf_quant_src {
    struct hf_model *m;
    struct hf_plan *p;
    void *kv_buf;
    struct gguf_file *kv;
    struct quant_tensor_desc *t;
};

static enum mw_status src_read(void *ud, uint64_t i, quant_sink_fn sink, void *sink_ud,
                               struct mw_err *err)
{
    const struct hf_quant_src *h = ud;
    return hf_plan_stream_tensor(h->p, i, 0, sink, sink_ud, err);
}

void hf_quant_source_close(struct hf_quant_src *h)
{
    if (!h) return;
    gguf_close(h->kv);
    free(h->kv_buf);
    free(h->t);
    hf_plan_free(h->p);
    hf_model_close(h->m);
    free(h);
}

const struct hf_config *hf_quant_source_config(const struct hf_quant_src *h)
{
    return hf_model_config(h->m);
}

enum mw_status hf_quant_source_open(const char *dir, struct quant_source *src,
                                    struct hf_quant_src **out, struct mw_err *err)
{
    enum mw_status s;
    memset(src, 0, sizeof *src);
    *out = NULL;
    struct hf_quant_src *h = calloc(1, sizeof *h);
    if (!h) return MW_FAIL(err, MW_E_NOMEM, MW_ERR_OFF_NONE, "out of memory");
    if ((s = hf_model_open(dir, &h->m, err)) != MW_OK ||
        (s = hf_plan_build(h->m, HF_OUT_F16, &h->p, err)) != MW_OK ||
        (s = hf_convert_kvs(dir, h->m, h->p, HF_OUT_F16, &h->kv_buf, &h->kv, err)) != MW_OK)
        goto out;
    const uint64_t n = hf_plan_count(h->p);
    if (!(h->t = calloc(n ? (size_t)n : 1, sizeof *h->t))) {
        s = MW_FAIL(err, MW_E_NOMEM, MW_ERR_OFF_NONE, "out of memory");
        goto out;
    }
    for (uint64_t i = 0; i < n; i++) {
        const struct hf_plan_tensor *e = hf_plan_get(h->p, i);
        h->t[i].name = e->name;
        h->t[i].type = e->type;
        h->t[i].n_dims = e->n_dims;
        memcpy(h->t[i].ne, e->ne, sizeof h->t[i].ne);
    }
    src->kv = h->kv;
    src->n_tensors = n;
    src->tensors = h->t;
    src->read = src_read;
    src->ud = h;
    *out = h;
out:
    if (s != MW_OK) hf_quant_source_close(h);
    return s;
}
