/* Fuzz target: the config.json parser (hf_config_parse) on arbitrary bytes —
 * JSON syntax through cJSON, then every key memwall reads: architecture,
 * sizes, head counts, RoPE (theta, linear and llama3 scaling), tied
 * embeddings, biases, the gated delta net's keys. On success the invariants hf.h promises are checked
 * and the llama3 RoPE factor table is computed from the fuzzed values. The
 * corpus is tests/fuzz/corpus/config/ (real configs of the supported
 * architectures and hand-made broken ones). */
#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "hf/hf.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    volatile uint64_t sink = 0;
    struct hf_config cfg;
    struct mw_err err;
    mw_err_clear(&err);
    const enum mw_status s = hf_config_parse((const char *)data, size, "fuzz/config.json", &cfg,
                                             &err);
    if (s != MW_OK) {
        /* a failure is an error record, never MW_OK with garbage */
        if (err.code != s) __builtin_trap();
        char buf[1024];
        sink += strlen(mw_err_format(&err, buf, sizeof buf));
        return 0;
    }
    if ((unsigned)cfg.arch >= HF_ARCH_COUNT || !cfg.gguf_arch) __builtin_trap();
    if (memchr(cfg.hf_arch_name, 0, sizeof cfg.hf_arch_name) == NULL) __builtin_trap();
    if (memchr(cfg.torch_dtype, 0, sizeof cfg.torch_dtype) == NULL) __builtin_trap();
    sink += strlen(hf_arch_name(cfg.arch)) + cfg.n_vocab + cfg.n_embd + cfg.n_layer + cfg.n_ff +
            cfg.n_head + cfg.n_head_kv + cfg.head_dim + cfg.n_ctx;
    /* the gated delta net: what hf_config_qwen35.c promises the mapping */
    if (hf_arch_is_delta_net(cfg.arch) &&
        (cfg.ssm_n_group == 0 || cfg.ssm_dt_rank % cfg.ssm_n_group != 0 ||
         (uint64_t)cfg.ssm_dt_rank * cfg.ssm_head_v_dim != cfg.ssm_d_inner ||
         cfg.n_rot == 0 || cfg.n_rot % 2 != 0 || cfg.n_rot > cfg.head_dim ||
         cfg.full_attn_interval == 0 || cfg.ssm_conv_kernel < 2 ||
         (uint64_t)cfg.n_layer + cfg.n_nextn > 512))
        __builtin_trap();
    /* llama3 RoPE factors: head_dim / 2 floats from fuzzed frequencies */
    if (cfg.rope_scaling == HF_ROPE_LLAMA3 && cfg.head_dim >= 2 && cfg.head_dim <= 65536) {
        float *f = malloc((size_t)cfg.head_dim / 2 * sizeof *f);
        if (f) {
            hf_llama3_rope_factors(&cfg, f);
            for (uint32_t i = 0; i < cfg.head_dim / 2; i++) sink += isnan(f[i]) ? 1u : 0u;
            free(f);
        }
    }
    (void)sink;
    return 0;
}
