/* hf/hf_arch_qwen35.c — what the gated delta net families (qwen35,
 * qwen35moe, qwen3next) add to the tensor mapping of hf_arch.c, as
 * llama.cpp's converter does it (conversion/qwen.py):
 *   - names: "language_model." removed (model.language_model.X -> model.X),
 *     the vision tower ("visual.") skipped, the MTP block renamed
 *     (_QwenMtpMixin.filter_tensors): mtp.layers.N.X -> model.layers.{n_layer+N}.X,
 *     mtp.fc -> model.layers.{n_layer}.eh_proj, pre_fc_norm_embedding -> enorm,
 *     pre_fc_norm_hidden -> hnorm, norm -> shared_head.norm;
 *   - the gathers: qwen35's V heads grouped by key head in HF
 *     ([k0v0 .. k0v(r-1), k1v0 ..]) reordered to tiled ([k0v0, k1v0, ..,
 *     k0v1, ..]: _LinearAttentionVReorderBase._reorder_v_heads) in the V rows
 *     of in_proj_qkv and conv1d, the rows of in_proj_z / in_proj_a /
 *     in_proj_b, the elements of dt_bias / A_log and the columns of out_proj;
 *     qwen3next's in_proj_qkvz ([q, k, v, z] per key head) de-interleaved
 *     into attn_qkv ([all q, all k, all v]) and attn_gate ([all z]).
 * The maps are index arrays owned by the plan (p->maps). */
#include "hf/hf_int.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const struct {
    const char *hf;  /* after "mtp." */
    const char *out; /* after "model.layers.{n_layer}." */
} mtp_renames[] = {
    {"fc.weight", "eh_proj.weight"},
    {"pre_fc_norm_embedding.weight", "enorm.weight"},
    {"pre_fc_norm_hidden.weight", "hnorm.weight"},
    {"norm.weight", "shared_head.norm.weight"},
};

bool hf__qwen35_name(const struct hf_config *c, const char *name, char *buf, size_t n,
                     const char **out)
{
    *out = name;
    if (strstr(name, "visual.")) return false; /* the vision tower */
    const char *lm = strstr(name, "language_model.");
    if (lm && (lm == name || lm[-1] == '.')) {
        snprintf(buf, n, "%.*s%s", (int)(lm - name), name, lm + 15);
        *out = name = buf;
    }
    const char *p = strncmp(name, "model.mtp.", 10) == 0 ? name + 10
                  : strncmp(name, "mtp.", 4) == 0       ? name + 4
                                                        : NULL;
    if (!p) return true;
    char tmp[GGUF_MAX_NAME + 64];
    if (strncmp(p, "layers.", 7) == 0 && p[7] >= '0' && p[7] <= '9') {
        const char *q = p + 7;
        uint64_t v = 0;
        while (*q >= '0' && *q <= '9' && v < 1000000) v = v * 10 + (uint64_t)(*q++ - '0');
        if (*q == '.') {
            snprintf(tmp, sizeof tmp, "model.layers.%llu.%s", (unsigned long long)(c->n_layer + v), q + 1);
            snprintf(buf, n, "%s", tmp);
            *out = buf;
        }
        return true;
    }
    for (size_t k = 0; k < sizeof mtp_renames / sizeof mtp_renames[0]; k++)
        if (strcmp(p, mtp_renames[k].hf) == 0) {
            snprintf(tmp, sizeof tmp, "model.layers.%u.%s", c->n_layer, mtp_renames[k].out);
            snprintf(buf, n, "%s", tmp);
            *out = buf;
        }
    return true;
}

void hf__qwen35_hf_name(const struct hf_config *c, uint64_t layer, const char *rest, char *buf,
                        size_t n)
{
    if (layer < c->n_layer) {
        snprintf(buf, n, "%slayers.%llu.%s", c->multimodal ? "model.language_model." : "model.",
                 (unsigned long long)layer, rest);
        return;
    }
    if (layer == c->n_layer)
        for (size_t k = 0; k < sizeof mtp_renames / sizeof mtp_renames[0]; k++)
            if (strcmp(rest, mtp_renames[k].out) == 0) {
                snprintf(buf, n, "mtp.%s", mtp_renames[k].hf);
                return;
            }
    snprintf(buf, n, "mtp.layers.%llu.%s", (unsigned long long)(layer - c->n_layer), rest);
}

int hf__qwen35_layer_kind(const struct hf_config *c, uint64_t layer)
{
    if (layer >= c->n_layer) return HF_LAYER_MTP;
    return (layer + 1) % c->full_attn_interval == 0 ? HF_LAYER_FULL : HF_LAYER_LINEAR;
}

/* Output index o of a V-head dimension (heads of hd values) <- grouped index:
 * o = (v * Hk + k) * hd + j holds source (k * r + v) * hd + j. */
static uint32_t v_src(const struct hf_config *c, uint64_t o, uint64_t hd)
{
    const uint64_t Hk = c->ssm_n_group, r = c->ssm_dt_rank / c->ssm_n_group;
    const uint64_t head = o / hd, j = o % hd, v = head / Hk, k = head % Hk;
    return (uint32_t)((k * r + v) * hd + j);
}

static uint32_t *new_map(struct hf_plan *p, uint64_t n)
{
    if (p->n_maps >= sizeof p->maps / sizeof p->maps[0]) return NULL;
    uint32_t *m = malloc((size_t)(n ? n : 1) * sizeof *m);
    if (m) p->maps[p->n_maps++] = m;
    return m;
}

enum mw_status hf__qwen35_maps(struct hf_plan *p, const struct hf_config *c,
                               const uint32_t *maps[HF_MAP_COUNT], struct mw_err *err)
{
    for (int i = 0; i < HF_MAP_COUNT; i++) maps[i] = NULL;
    const uint64_t S = c->ssm_d_state, Sv = c->ssm_head_v_dim, Hk = c->ssm_n_group;
    const uint64_t Hv = c->ssm_dt_rank, kd = Hk * S, vd = c->ssm_d_inner, r = Hv / Hk;
    if (c->ssm_v_reorder) {
        uint32_t *qkv = new_map(p, 2 * kd + vd), *v = new_map(p, vd), *h = new_map(p, Hv);
        if (!qkv || !v || !h) return MW_FAIL(err, MW_E_NOMEM, MW_ERR_OFF_NONE, "out of memory");
        for (uint64_t i = 0; i < 2 * kd; i++) qkv[i] = (uint32_t)i;
        for (uint64_t i = 0; i < vd; i++) {
            v[i] = v_src(c, i, Sv);
            qkv[2 * kd + i] = (uint32_t)(2 * kd) + v[i];
        }
        for (uint64_t i = 0; i < Hv; i++) h[i] = v_src(c, i, 1);
        maps[HF_MAP_QKV] = qkv;
        maps[HF_MAP_V] = v;
        maps[HF_MAP_HEAD] = h;
    }
    if (c->arch == HF_ARCH_QWEN3NEXT) {
        /* in_proj_qkvz: per key head h, P = 2S + 2rSv rows: q, k, v (rSv), z (rSv) */
        uint32_t *qkv = new_map(p, 2 * kd + vd), *z = new_map(p, vd);
        if (!qkv || !z) return MW_FAIL(err, MW_E_NOMEM, MW_ERR_OFF_NONE, "out of memory");
        const uint64_t P = 2 * S + 2 * r * Sv;
        uint64_t o = 0;
        for (uint64_t h = 0; h < Hk; h++)
            for (uint64_t j = 0; j < S; j++) qkv[o++] = (uint32_t)(h * P + j);
        for (uint64_t h = 0; h < Hk; h++)
            for (uint64_t j = 0; j < S; j++) qkv[o++] = (uint32_t)(h * P + S + j);
        for (uint64_t h = 0; h < Hk; h++)
            for (uint64_t j = 0; j < r * Sv; j++) qkv[o++] = (uint32_t)(h * P + 2 * S + j);
        o = 0;
        for (uint64_t h = 0; h < Hk; h++)
            for (uint64_t j = 0; j < r * Sv; j++) z[o++] = (uint32_t)(h * P + 2 * S + r * Sv + j);
        maps[HF_MAP_QKVZ_QKV] = qkv;
        maps[HF_MAP_QKVZ_Z] = z;
    }
    return MW_OK;
}
