/*
 * calib/calib_fit.c — `memwall quant --fit-ram R --ctx N`: the bytes a
 * device of R leaves the weights under the memory formula of calib_mem.c
 * (the `memwall plan` numbers), for a GGUF file or a Hugging Face config.
 */
#include "calib/calib.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "calib/calib_gemma4.h"
#include "hf/hf.h"

static enum mw_status fit_out(uint64_t ram_bytes, uint32_t n_ctx, enum rt_kv_type kv,
                              const struct calib_mem *m, struct calib_fit *out,
                              struct mw_err *err);

enum mw_status calib_fit_ram(const struct gguf_file *f, const struct hf_config *c,
                             uint64_t ram_bytes, uint32_t n_ctx, enum rt_kv_type kv,
                             struct calib_fit *out, struct mw_err *err)
{
    memset(out, 0, sizeof *out);
    struct rt_hparams hp;
    uint64_t n_bias = 0;
    enum mw_status s;
    struct calib_mem mm;
    const struct calib_mem_opts mo = {.n_ctx = n_ctx, .kv_type = kv,
                                      .weight_type = GGUF_TYPE_Q4_K};
    /* Gemma 4: per-layer KV widths and shared-KV layers (calib_gemma4.c);
     * the room is for the resident weights (per_layer_token_embd stays on
     * flash: the caller adds its bytes to the file) */
    if ((f && calib_g4_gguf_is(f)) || (!f && c->arch == HF_ARCH_GEMMA4)) {
        struct calib_g4 *g = malloc(sizeof *g);
        if (!g) return MW_FAIL(err, MW_E_NOMEM, MW_ERR_OFF_NONE, "out of memory");
        s = f ? calib_g4_from_gguf(f, g, err) : (calib_g4_from_hf(c, g), MW_OK);
        if (s == MW_OK) s = calib_g4_mem_estimate(g, &mo, &mm, err);
        free(g);
        if (s != MW_OK) return s;
        return fit_out(ram_bytes, n_ctx, kv, &mm, out, err);
    }
    if (f) {
        struct rt_model *rm = NULL;
        if ((s = rt_model_from_gguf(f, &rm, err)) != MW_OK) return s;
        hp = *rt_model_hparams(rm);
        rt_model_close(rm);
        for (uint64_t i = 0; i < gguf_tensor_count(f); i++) {
            const struct gguf_tensor *gt = gguf_tensor_get(f, i);
            if (strstr(gt->name, ".bias")) n_bias += gt->ne[0];
        }
    } else {
        calib_hparams_from_hf(c, &hp, &n_bias);
    }
    struct calib_mem_arch arch;
    calib_mem_arch_from_hparams(&hp, n_bias, &arch);
    if ((s = calib_mem_estimate(&arch, &mo, &mm, err)) != MW_OK) return s;
    return fit_out(ram_bytes, n_ctx, kv, &mm, out, err);
}

static enum mw_status fit_out(uint64_t ram_bytes, uint32_t n_ctx, enum rt_kv_type kv,
                              const struct calib_mem *m, struct calib_fit *out,
                              struct mw_err *err)
{
    const struct calib_mem mm = *m;
    out->ram_bytes = ram_bytes;
    out->app_bytes = calib_mem_app_budget(ram_bytes);
    out->kv_bytes = mm.kv_bytes;
    out->overhead_bytes = mm.overhead_bytes;
    out->weight_bytes = calib_mem_weight_budget(ram_bytes, &mm);
    snprintf(out->budget, sizeof out->budget, "fit-ram=%llu,ctx=%lu,kv=%s,file=%llu",
             (unsigned long long)ram_bytes, (unsigned long)n_ctx, rt_kv_type_name(kv),
             (unsigned long long)out->weight_bytes);
    if (out->weight_bytes == 0)
        return MW_FAIL(err, MW_E_USAGE, MW_ERR_OFF_NONE,
                       "--fit-ram %llu: nothing is left for the weights (app share %llu, KV "
                       "cache %llu, overhead %llu bytes)",
                       (unsigned long long)ram_bytes, (unsigned long long)out->app_bytes,
                       (unsigned long long)out->kv_bytes, (unsigned long long)out->overhead_bytes);
    return MW_OK;
}
