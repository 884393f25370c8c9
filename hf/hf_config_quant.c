/* hf/hf_config_quant.c — config.json's quantization_config: which quantized
 * source layout the weights use (hf.h enum hf_quant_method). The methods read
 * are those whose weights dequantize to an exact product, E4M3 × scale:
 *
 *   {"quant_method": "fp8", "fmt": "e4m3", "weight_block_size": [128, 128],
 *    "activation_scheme": "dynamic"}                 (DeepSeek-V3, "-FP8" releases)
 *   {"quant_method": "compressed-tensors", "format": "float-quantized",
 *    "config_groups": {"group_0": {"weights": {"num_bits": 8, "type": "float",
 *    "strategy": "tensor" | "channel" | "block", "block_structure": [..]}}}}
 *
 *   {"quant_method": "mxfp4", "modules_to_not_convert": [..]}   (gpt-oss: the
 *    experts as *_blocks + *_scales, repacked by hf_gptoss.c, never decoded)
 *
 * Anything else is refused naming its JSON path (the integer formats are
 * other decoders, not yet here). */
#include "hf/hf_int.h"

#include <stdio.h>
#include <string.h>

/* [a, b] of two integers in [1, 2^20] into out */
static enum mw_status block_pair(const cJSON *v, const char *jpath, uint32_t out[2],
                                 struct mw_err *err)
{
    uint64_t a = 0, b = 0;
    if (!cJSON_IsArray(v) || cJSON_GetArraySize(v) != 2 ||
        !hf__util_json_u64(cJSON_GetArrayItem(v, 0), &a) ||
        !hf__util_json_u64(cJSON_GetArrayItem(v, 1), &b) || a == 0 || b == 0 || a > (1u << 20) ||
        b > (1u << 20))
        return hf__cfg_fail(err, MW_E_FORMAT, jpath,
                            "expected two positive integers [rows, columns] (the scale block)");
    out[0] = (uint32_t)a;
    out[1] = (uint32_t)b;
    return MW_OK;
}

static const cJSON *str_member(const cJSON *o, const char *key)
{
    const cJSON *v = hf__cfg_member(o, key);
    return v && cJSON_IsString(v) ? v : NULL;
}

static enum mw_status cfg_fp8(const cJSON *q, struct hf_quant_cfg *out, struct mw_err *err)
{
    out->method = HF_QM_FP8;
    const cJSON *fmt = hf__cfg_member(q, "fmt");
    if (fmt) {
        if (!cJSON_IsString(fmt))
            return hf__cfg_fail(err, MW_E_FORMAT, "quantization_config.fmt", "expected a string");
        if (strcmp(fmt->valuestring, "e4m3") != 0)
            return hf__cfg_fail(err, MW_E_UNSUPPORTED, "quantization_config.fmt",
                                "'%.32s' is not supported (FP8 sources: e4m3)", fmt->valuestring);
    }
    const cJSON *bs = hf__cfg_member(q, "weight_block_size");
    if (bs) {
        snprintf(out->strategy, sizeof out->strategy, "block");
        return block_pair(bs, "quantization_config.weight_block_size", out->block, err);
    }
    return MW_OK;
}

static enum mw_status cfg_ct(const cJSON *q, struct hf_quant_cfg *out, struct mw_err *err)
{
    out->method = HF_QM_CT_FP8;
    const cJSON *fmt = str_member(q, "format");
    if (!fmt || strcmp(fmt->valuestring, "float-quantized") != 0)
        return hf__cfg_fail(err, MW_E_UNSUPPORTED, "quantization_config.format",
                            "%s%.40s%s is not supported (compressed-tensors: float-quantized)",
                            fmt ? "'" : "", fmt ? fmt->valuestring : "absent", fmt ? "'" : "");
    const cJSON *groups = hf__cfg_member(q, "config_groups");
    if (!cJSON_IsObject(groups) || cJSON_GetArraySize(groups) != 1)
        return hf__cfg_fail(err, MW_E_UNSUPPORTED, "quantization_config.config_groups",
                            "expected one config group");
    const cJSON *g = groups->child;
    char jp[160];
    snprintf(jp, sizeof jp, "quantization_config.config_groups.%.64s.weights", g->string);
    const cJSON *w = hf__cfg_member(g, "weights");
    if (!cJSON_IsObject(w))
        return hf__cfg_fail(err, MW_E_FORMAT, jp, "expected an object");
    uint64_t bits = 0;
    const cJSON *type = str_member(w, "type");
    char jk[192];
    snprintf(jk, sizeof jk, "%s.num_bits", jp);
    if (!hf__util_json_u64(hf__cfg_member(w, "num_bits"), &bits) || bits != 8)
        return hf__cfg_fail(err, MW_E_UNSUPPORTED, jk, "expected 8 (FP8 weights)");
    snprintf(jk, sizeof jk, "%s.type", jp);
    if (!type || strcmp(type->valuestring, "float") != 0)
        return hf__cfg_fail(err, MW_E_UNSUPPORTED, jk, "expected \"float\" (FP8 weights)");
    snprintf(jk, sizeof jk, "%s.group_size", jp);
    if (hf__cfg_member(w, "group_size"))
        return hf__cfg_fail(err, MW_E_UNSUPPORTED, jk, "group scales are not supported");
    const cJSON *sym = hf__cfg_member(w, "symmetric");
    snprintf(jk, sizeof jk, "%s.symmetric", jp);
    if (sym && !cJSON_IsTrue(sym))
        return hf__cfg_fail(err, MW_E_UNSUPPORTED, jk, "zero points are not supported");
    const cJSON *st = str_member(w, "strategy");
    snprintf(jk, sizeof jk, "%s.strategy", jp);
    if (!st || (strcmp(st->valuestring, "tensor") != 0 && strcmp(st->valuestring, "channel") != 0 &&
                strcmp(st->valuestring, "block") != 0))
        return hf__cfg_fail(err, MW_E_UNSUPPORTED, jk, "expected \"tensor\", \"channel\" or "
                            "\"block\"");
    snprintf(out->strategy, sizeof out->strategy, "%s", st->valuestring);
    if (strcmp(st->valuestring, "block") == 0) {
        snprintf(jk, sizeof jk, "%s.block_structure", jp);
        return block_pair(hf__cfg_member(w, "block_structure"), jk, out->block, err);
    }
    return MW_OK;
}

enum mw_status hf__cfg_quant(const cJSON *root, struct hf_config *c, struct mw_err *err)
{
    memset(&c->quant, 0, sizeof c->quant);
    const cJSON *q = hf__cfg_member(root, "quantization_config");
    if (!q) return MW_OK;
    if (!cJSON_IsObject(q))
        return hf__cfg_fail(err, MW_E_FORMAT, "quantization_config", "expected an object");
    const cJSON *qm = hf__cfg_member(q, "quant_method");
    if (!qm || !cJSON_IsString(qm))
        return hf__cfg_fail(err, MW_E_FORMAT, "quantization_config.quant_method",
                            "expected a string");
    if (strcmp(qm->valuestring, "fp8") == 0) return cfg_fp8(q, &c->quant, err);
    if (strcmp(qm->valuestring, "compressed-tensors") == 0) return cfg_ct(q, &c->quant, err);
    if (strcmp(qm->valuestring, "mxfp4") == 0) {
        if (c->arch != HF_ARCH_GPTOSS)
            return hf__cfg_fail(err, MW_E_UNSUPPORTED, "quantization_config.quant_method",
                                "mxfp4 is read for GptOssForCausalLM only (its expert layout)");
        const cJSON *nc = hf__cfg_member(q, "modules_to_not_convert");
        if (nc && !cJSON_IsArray(nc))
            return hf__cfg_fail(err, MW_E_FORMAT, "quantization_config.modules_to_not_convert",
                                "expected an array of module names");
        c->quant.method = HF_QM_MXFP4;
        return MW_OK;
    }
    return hf__cfg_fail(err, MW_E_UNSUPPORTED, "quantization_config.quant_method",
                        "'%.40s' is not supported (fp8, compressed-tensors with FP8 weights, "
                        "mxfp4 for gpt-oss)",
                        qm->valuestring);
}
