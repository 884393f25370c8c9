/*
 * calib/calib_fit.c — `memwall quant --fit-ram R --ctx N`: the bytes a
 * device of R leaves the weights under the memory formula of calib_mem.c
 * (the `memwall plan` numbers), for a GGUF file or a Hugging Face config.
 */
#include "calib/calib.h"

#include <stdio.h>
#include <string.h>

#include "hf/hf.h"

enum mw_status calib_fit_ram(const struct gguf_file *f, const struct hf_config *c,
                             uint64_t ram_bytes, uint32_t n_ctx, enum rt_kv_type kv,
                             struct calib_fit *out, struct mw_err *err)
{
    memset(out, 0, sizeof *out);
    struct rt_hparams hp;
    uint64_t n_bias = 0;
    enum mw_status s;
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
    struct calib_mem mm;
    const struct calib_mem_opts mo = {.n_ctx = n_ctx, .kv_type = kv,
                                      .weight_type = GGUF_TYPE_Q4_K};
    if ((s = calib_mem_estimate(&arch, &mo, &mm, err)) != MW_OK) return s;
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
