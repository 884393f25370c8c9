/* hf/hf_gptoss.c — gpt-oss (GptOssForCausalLM) to GGUF "gpt-oss", as
 * llama.cpp's converter writes it (conversion/gpt_oss.py GptOssModel on
 * TextModel): config.json (openai/gpt-oss-20b's keys: layer_types,
 * sliding_window, rope_scaling yarn, num_local_experts, experts_per_token,
 * swiglu_limit, quantization_config mxfp4), the tensor plan and the
 * gpt-oss.* keys in the converter's order.
 *
 * The experts ship as MXFP4: "<w>_blocks" (U8 [X, rows, n/32, 16], two E2M1
 * codes a byte, element 2j in the low nibble) and "<w>_scales" (U8 [X, rows,
 * n/32], E8M0). They are repacked into ggml's block_mxfp4 (the scale byte,
 * then 16 bytes whose low nibbles are elements 0..15 and high nibbles
 * 16..31) without decoding a value, so any output type keeps them MXFP4
 * bit for bit. gate_up_proj interleaves gate and up row by row: even rows
 * are ffn_gate_exps, odd rows ffn_up_exps (and the same for its bias's
 * columns). The repacked experts come first in the file, layer by layer in
 * source order (the converter writes them from generate_extra_tensors),
 * then every other tensor in source order. Checked beyond what the
 * converter checks, each naming its tensor or JSON path: the blocks' and
 * scales' shapes against config.json and each other, every scale byte (0xFF
 * is E8M0's NaN), layer_types against llama.cpp's fixed sliding pattern
 * (even layers slide), swiglu_limit against its graph's 7.0.
 * docs/formats.md §6.11. */
#include "hf/hf_int.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define member hf__cfg_member
#define cfg_fail hf__cfg_fail
#define cfg_u32 hf__cfg_u32
#define cfg_num hf__cfg_num

static bool ends_with(const char *s, const char *suffix)
{
    size_t a = strlen(s), b = strlen(suffix);
    return a >= b && memcmp(s + a - b, suffix, b) == 0;
}

// --- config ----------------------------------------------------------------------

static enum mw_status cfg_rope(const cJSON *root, struct hf_config *c, struct mw_err *err)
{
    const cJSON *rs = member(root, "rope_scaling");
    if (!rs) return MW_OK;
    if (!cJSON_IsObject(rs))
        return cfg_fail(err, MW_E_FORMAT, "rope_scaling", "expected an object");
    const cJSON *t = member(rs, "rope_type");
    if (!t) t = member(rs, "type");
    if (!t || !cJSON_IsString(t) || strcmp(t->valuestring, "yarn") != 0)
        return cfg_fail(err, MW_E_UNSUPPORTED, "rope_scaling.rope_type",
                        "'%s' is not supported for gpt-oss (yarn)",
                        t && cJSON_IsString(t) ? t->valuestring : "(absent)");
    bool present;
    enum mw_status s = cfg_num(rs, "rope_scaling.", "factor", true, &c->rope_factor, &present,
                               "YaRN context scaling factor", err);
    if (s == MW_OK)
        s = cfg_u32(rs, "rope_scaling.", "original_max_position_embeddings", true, 0, 1, UINT32_MAX,
                    &c->rope_orig_ctx, "YaRN's training context", err);
    static const char *const opt[4] = {"extrapolation_factor", "attention_factor", "beta_fast",
                                       "beta_slow"};
    double *dst[4] = {&c->yarn_ext_factor, &c->yarn_attn_factor, &c->yarn_beta_fast,
                      &c->yarn_beta_slow};
    for (int k = 0; k < 4 && s == MW_OK; k++) {
        const char *key = opt[k];
        if (k == 1 && !member(rs, key) && member(rs, "attn_factor")) key = "attn_factor";
        s = cfg_num(rs, "rope_scaling.", key, false, dst[k], &present, "YaRN", err);
        if (s == MW_OK && present) c->yarn_has |= 1u << k;
    }
    if (s == MW_OK) c->rope_scaling = HF_ROPE_YARN;
    return s;
}

/* layer_types: llama.cpp reads none and makes the even layers sliding
 * (period 2); anything else would run differently there. */
static enum mw_status cfg_layer_types(const cJSON *root, const struct hf_config *c,
                                      struct mw_err *err)
{
    const cJSON *lt = member(root, "layer_types");
    if (!lt) return MW_OK;
    if (!cJSON_IsArray(lt) || (uint32_t)cJSON_GetArraySize(lt) != c->n_layer)
        return cfg_fail(err, MW_E_FORMAT, "layer_types",
                        "expected an array of num_hidden_layers (%u) strings", c->n_layer);
    uint32_t il = 0;
    const cJSON *v;
    cJSON_ArrayForEach(v, lt)
    {
        const char *want = il % 2 == 0 ? "sliding_attention" : "full_attention";
        if (!cJSON_IsString(v) || strcmp(v->valuestring, want) != 0) {
            char jpath[64];
            snprintf(jpath, sizeof jpath, "layer_types[%u]", il);
            return cfg_fail(err, MW_E_UNSUPPORTED, jpath,
                            "'%s': llama.cpp's gpt-oss makes even layers sliding_attention and odd "
                            "ones full_attention (it does not read layer_types); expected '%s'",
                            cJSON_IsString(v) ? v->valuestring : "(not a string)", want);
        }
        il++;
    }
    return MW_OK;
}

enum mw_status hf__cfg_gptoss(const cJSON *root, struct hf_config *c, struct mw_err *err)
{
    const cJSON *mt = member(root, "model_type");
    if (mt && (!cJSON_IsString(mt) || strcmp(mt->valuestring, "gpt_oss") != 0))
        return cfg_fail(err, MW_E_FORMAT, "model_type",
                        "'%s' contradicts architectures[0] '%s' ('gpt_oss')",
                        cJSON_IsString(mt) ? mt->valuestring : "(not a string)", c->hf_arch_name);
    if (member(root, "text_config"))
        return cfg_fail(err, MW_E_FORMAT, "text_config", "present, but %s is a text model",
                        c->hf_arch_name);
    enum mw_status s =
        cfg_u32(root, "", "hidden_size", true, 0, 1, 1u << 20, &c->n_embd, "embedding width", err);
    if (s == MW_OK)
        s = cfg_u32(root, "", "num_hidden_layers", true, 0, 1, 512, &c->n_layer,
                    "layer count; llama.cpp allows at most 512", err);
    if (s == MW_OK)
        s = cfg_u32(root, "", "intermediate_size", true, 0, 1, 1u << 22, &c->n_ff,
                    "one expert's FFN width", err);
    if (s == MW_OK)
        s = cfg_u32(root, "", "num_attention_heads", true, 0, 1, 1u << 16, &c->n_head,
                    "attention heads", err);
    if (s == MW_OK)
        s = cfg_u32(root, "", "num_key_value_heads", true, 0, 1, 1u << 16, &c->n_head_kv,
                    "KV heads", err);
    if (s == MW_OK)
        s = cfg_u32(root, "", "head_dim", true, 0, 2, 1u << 16, &c->head_dim, "head size", err);
    if (s == MW_OK)
        s = cfg_u32(root, "", "vocab_size", true, 0, 1, 1u << 26, &c->n_vocab, "vocabulary size",
                    err);
    if (s == MW_OK)
        s = cfg_u32(root, "", "max_position_embeddings", true, 0, 1, UINT32_MAX, &c->n_ctx,
                    "context length", err);
    if (s == MW_OK)
        s = cfg_u32(root, "", "sliding_window", true, 0, 1, UINT32_MAX, &c->n_swa,
                    "the sliding layers' window", err);
    if (s == MW_OK)
        s = cfg_u32(root, "", "num_local_experts", true, 0, 1, 1024, &c->n_expert,
                    "expert count", err);
    if (s != MW_OK) return s;
    /* TextModel reads num_experts_per_tok; gpt-oss also ships experts_per_token */
    uint32_t used = 0, used2 = 0;
    s = cfg_u32(root, "", "num_experts_per_tok", false, 0, 1, c->n_expert, &used,
                "experts per token", err);
    if (s == MW_OK)
        s = cfg_u32(root, "", "experts_per_token", used == 0, used, 1, c->n_expert, &used2,
                    "experts per token (num_experts_per_tok or experts_per_token)", err);
    if (s != MW_OK) return s;
    if (used && used2 != used)
        return cfg_fail(err, MW_E_FORMAT, "experts_per_token",
                        "%u contradicts num_experts_per_tok %u", used2, used);
    c->n_expert_used = used ? used : used2;
    double d;
    bool present;
    s = cfg_num(root, "", "rms_norm_eps", true, &d, &present, "RMSNorm epsilon", err);
    if (s != MW_OK) return s;
    c->rms_eps = (float)d;
    s = cfg_num(root, "", "rope_theta", true, &d, &present, "RoPE base", err);
    if (s != MW_OK) return s;
    c->rope_theta = (float)d;
    c->has_rope_theta = true;
    s = cfg_num(root, "", "swiglu_limit", false, &d, &present, "SwiGLU clamp", err);
    if (s != MW_OK) return s;
    if (present && d != 7.0)
        return cfg_fail(err, MW_E_UNSUPPORTED, "swiglu_limit",
                        "%g: llama.cpp's gpt-oss graph clamps at 7.0", d);
    c->swiglu_limit = 7.0f;
    const cJSON *ha = member(root, "hidden_act");
    if (ha && (!cJSON_IsString(ha) || strcmp(ha->valuestring, "silu") != 0))
        return cfg_fail(err, MW_E_UNSUPPORTED, "hidden_act",
                        "'%s': gpt-oss runs its clamped SwiGLU (silu)",
                        cJSON_IsString(ha) ? ha->valuestring : "(not a string)");
    const cJSON *ab = member(root, "attention_bias");
    if (ab && !cJSON_IsTrue(ab))
        return cfg_fail(err, MW_E_UNSUPPORTED, "attention_bias",
                        "llama.cpp's gpt-oss needs the q/k/v/o biases (true)");
    const cJSON *tie = member(root, "tie_word_embeddings");
    if (tie && !cJSON_IsBool(tie))
        return cfg_fail(err, MW_E_FORMAT, "tie_word_embeddings", "expected true or false");
    if (tie && cJSON_IsTrue(tie))
        return cfg_fail(err, MW_E_UNSUPPORTED, "tie_word_embeddings",
                        "true: llama.cpp's gpt-oss needs its own output (lm_head)");
    if ((s = cfg_rope(root, c, err)) != MW_OK) return s;
    if ((s = cfg_layer_types(root, c, err)) != MW_OK) return s;
    const cJSON *td = member(root, "torch_dtype");
    if (td && cJSON_IsString(td))
        snprintf(c->torch_dtype, sizeof c->torch_dtype, "%s", td->valuestring);
    c->head_dim_explicit = true;
    c->n_rot = c->head_dim;
    c->has_n_swa = true;
    c->swa_pattern = 2;
    c->attention_bias = true;
    c->tie_embeddings = false;
    c->n_ff_exp = c->n_ff;
    c->has_n_ff_exp = true;
    c->norm_topk_prob = false; /* softmax over the selected logits */
    return MW_OK;
}

// --- tensors ---------------------------------------------------------------------

enum orole {
    /* global */
    O_TOKEN_EMBD, O_OUTPUT, O_OUTPUT_NORM,
    /* per layer */
    O_ATTN_NORM, O_POST_NORM, O_Q, O_Q_B, O_K, O_K_B, O_V, O_V_B, O_O, O_O_B, O_SINKS, O_ROUTER,
    O_ROUTER_B, O_GATE_UP_B, O_DOWN_B, O_GATE_UP_BLK, O_GATE_UP_SC, O_DOWN_BLK, O_DOWN_SC, O_COUNT
};
#define O_FIRST_LAYER O_ATTN_NORM

static const struct {
    const char *hf;   /* global: full name; per layer: after "model.layers.N." */
    const char *gguf; /* global: full name; per layer: after "blk.N." */
} oroles[O_COUNT] = {
    [O_TOKEN_EMBD] = {"model.embed_tokens.weight", "token_embd.weight"},
    [O_OUTPUT] = {"lm_head.weight", "output.weight"},
    [O_OUTPUT_NORM] = {"model.norm.weight", "output_norm.weight"},
    [O_ATTN_NORM] = {"input_layernorm.weight", "attn_norm.weight"},
    [O_POST_NORM] = {"post_attention_layernorm.weight", "post_attention_norm.weight"},
    [O_Q] = {"self_attn.q_proj.weight", "attn_q.weight"},
    [O_Q_B] = {"self_attn.q_proj.bias", "attn_q.bias"},
    [O_K] = {"self_attn.k_proj.weight", "attn_k.weight"},
    [O_K_B] = {"self_attn.k_proj.bias", "attn_k.bias"},
    [O_V] = {"self_attn.v_proj.weight", "attn_v.weight"},
    [O_V_B] = {"self_attn.v_proj.bias", "attn_v.bias"},
    [O_O] = {"self_attn.o_proj.weight", "attn_output.weight"},
    [O_O_B] = {"self_attn.o_proj.bias", "attn_output.bias"},
    [O_SINKS] = {"self_attn.sinks", "attn_sinks.weight"},
    [O_ROUTER] = {"mlp.router.weight", "ffn_gate_inp.weight"},
    [O_ROUTER_B] = {"mlp.router.bias", "ffn_gate_inp.bias"},
    [O_GATE_UP_B] = {"mlp.experts.gate_up_proj_bias", NULL},
    [O_DOWN_B] = {"mlp.experts.down_proj_bias", "ffn_down_exps.bias"},
    [O_GATE_UP_BLK] = {"mlp.experts.gate_up_proj_blocks", NULL},
    [O_GATE_UP_SC] = {"mlp.experts.gate_up_proj_scales", NULL},
    [O_DOWN_BLK] = {"mlp.experts.down_proj_blocks", NULL},
    [O_DOWN_SC] = {"mlp.experts.down_proj_scales", "ffn_down_exps.weight"},
};

static bool is_mx(int r)
{
    return r == O_GATE_UP_BLK || r == O_GATE_UP_SC || r == O_DOWN_BLK || r == O_DOWN_SC;
}

/* The expected HF shape of role r (MXFP4 blocks / scales: 4 / 3 dims). */
static uint32_t role_shape(const struct hf_config *c, int r, uint64_t d[4], const char *what[4])
{
    const uint64_t E = c->n_embd, V = c->n_vocab, H = c->n_head, KV = c->n_head_kv;
    const uint64_t hd = c->head_dim, X = c->n_expert, F = c->n_ff;
#define SH1(a, an) (d[0] = (a), what[0] = (an), 1u)
#define SH2(a, an, b, bn) (d[0] = (a), what[0] = (an), d[1] = (b), what[1] = (bn), 2u)
    switch (r) {
    case O_TOKEN_EMBD: case O_OUTPUT: return SH2(V, "vocab_size", E, "hidden_size");
    case O_Q: return SH2(H * hd, "num_attention_heads*head_dim", E, "hidden_size");
    case O_Q_B: return SH1(H * hd, "num_attention_heads*head_dim");
    case O_K: case O_V: return SH2(KV * hd, "num_key_value_heads*head_dim", E, "hidden_size");
    case O_K_B: case O_V_B: return SH1(KV * hd, "num_key_value_heads*head_dim");
    case O_O: return SH2(E, "hidden_size", H * hd, "num_attention_heads*head_dim");
    case O_SINKS: return SH1(H, "num_attention_heads");
    case O_ROUTER: return SH2(X, "num_local_experts", E, "hidden_size");
    case O_ROUTER_B: return SH1(X, "num_local_experts");
    case O_GATE_UP_B: return SH2(X, "num_local_experts", 2 * F, "2*intermediate_size");
    case O_DOWN_B: return SH2(X, "num_local_experts", E, "hidden_size");
    case O_GATE_UP_BLK: case O_GATE_UP_SC:
        d[0] = X, what[0] = "num_local_experts", d[1] = 2 * F, what[1] = "2*intermediate_size";
        d[2] = E / 32, what[2] = "hidden_size/32";
        d[3] = 16, what[3] = "16";
        return r == O_GATE_UP_BLK ? 4 : 3;
    case O_DOWN_BLK: case O_DOWN_SC:
        d[0] = X, what[0] = "num_local_experts", d[1] = E, what[1] = "hidden_size";
        d[2] = F / 32, what[2] = "intermediate_size/32";
        d[3] = 16, what[3] = "16";
        return r == O_DOWN_BLK ? 4 : 3;
    default: return SH1(E, "hidden_size"); /* the norms */
    }
#undef SH1
#undef SH2
}

static enum mw_status finish(struct hf_plan_tensor *e, struct mw_err *err)
{
    if (!gguf_tensor_nbytes(e->type, e->ne, &e->nbytes)) {
        mw_err_set_where(err, "tensor '%s'", e->name);
        return MW_FAIL(err, MW_E_FORMAT, MW_ERR_OFF_NONE, "tensor size overflows");
    }
    return MW_OK;
}

static const uint32_t out_ggml[HF_OUT_COUNT] = {GGUF_TYPE_F32, GGUF_TYPE_F16, GGUF_TYPE_BF16,
                                                GGUF_TYPE_Q8_0};

struct seen {
    const struct hf_st_tensor *t;
    const struct hf_st *sh;
};

/* Every scale byte of t is an E8M0 exponent, not 0xFF (NaN). The pages read
 * are dropped again. */
static enum mw_status check_scales(const struct hf_st *sh, const struct hf_st_tensor *t,
                                   struct mw_err *err)
{
    for (uint64_t i = 0; i < t->nbytes; i++)
        if (t->data[i] == 0xFF) {
            hf_st_release(sh, t->file_off, t->nbytes);
            return hf__tensor_fail(err, MW_E_FORMAT, sh, t,
                                   "scale element %llu is 0xFF (E8M0 NaN)", (unsigned long long)i);
        }
    hf_st_release(sh, t->file_off, t->nbytes);
    return MW_OK;
}

/* The MXFP4 output of blocks b + scales s, rows first, first + step, ... */
static enum mw_status add_mx(struct hf_plan *p, const char *name, uint64_t il, struct seen b,
                             struct seen s, uint32_t first, uint32_t step, struct mw_err *err)
{
    struct hf_plan_tensor *e = &p->t[p->n++];
    snprintf(e->name, sizeof e->name, "blk.%llu.%s", (unsigned long long)il, name);
    e->src = b.t;
    e->shard = b.sh;
    e->aux = s.t;
    e->aux_shard = s.sh;
    e->xform = HF_XFORM_MXFP4;
    e->sel_first = first;
    e->sel_step = step;
    e->type = GGUF_TYPE_MXFP4;
    e->n_dims = 3;
    e->ne[0] = b.t->shape[2] * 32;
    e->ne[1] = b.t->shape[1] / step;
    e->ne[2] = b.t->shape[0];
    e->ne[3] = 1;
    return finish(e, err);
}

enum mw_status hf__gptoss_plan(const struct hf_model *m, enum hf_out_type ot, struct hf_plan **out,
                               struct mw_err *err)
{
    *out = NULL;
    const struct hf_config *c = &m->cfg;
    const uint64_t L = c->n_layer;
    struct hf_plan *p = calloc(1, sizeof *p);
    struct seen *seen = calloc((size_t)O_COUNT * L, sizeof *seen);
    if (p) {
        p->t = calloc((size_t)m->n + 2 * L + 1, sizeof *p->t);
    }
    if (!p || !seen || !p->t || !hf__plan_tables(p)) {
        free(seen);
        hf_plan_free(p);
        return MW_FAIL(err, MW_E_NOMEM, MW_ERR_OFF_NONE, "out of memory");
    }
    p->m = m;
    enum mw_status s = MW_OK;
    bool dt_seen[HF_DT_COUNT] = {false};
    if (c->quant.method != HF_QM_MXFP4 && c->quant.method != HF_QM_NONE) {
        mw_err_set_path(err, m->dir);
        s = hf__cfg_fail(err, MW_E_UNSUPPORTED, "quantization_config.quant_method",
                         "gpt-oss is read with its experts in MXFP4 (mxfp4)");
        goto out;
    }

    /* pass 1: every tensor named, shaped and typed as config.json says */
    for (uint64_t i = 0; i < m->n; i++) {
        const struct hf_st *sh;
        const struct hf_st_tensor *t = hf_model_tensor(m, i, &sh);
        uint64_t il = 0;
        const char *rest = NULL;
        int role = -1;
        const bool per_layer = hf__parse_layer(t->name, &il, &rest);
        for (int r = per_layer ? O_FIRST_LAYER : 0; r < (per_layer ? O_COUNT : O_FIRST_LAYER); r++)
            if (strcmp(per_layer ? rest : t->name, oroles[r].hf) == 0) role = r;
        if (role < 0) {
            const bool dense = per_layer && (strcmp(rest, "mlp.experts.gate_up_proj") == 0 ||
                                             strcmp(rest, "mlp.experts.down_proj") == 0);
            s = hf__tensor_fail(err, MW_E_UNSUPPORTED, sh, t,
                                dense ? "experts not in MXFP4 (*_blocks + *_scales): only "
                                        "gpt-oss's MXFP4 checkpoints are converted"
                                      : "not a tensor of gpt-oss (%s); cannot map it to GGUF",
                                c->hf_arch_name);
            goto out;
        }
        if (per_layer && il >= L) {
            s = hf__tensor_fail(err, MW_E_FORMAT, sh, t,
                                "layer %llu does not exist (config.json num_hidden_layers is %u)",
                                (unsigned long long)il, c->n_layer);
            goto out;
        }
        struct seen *sn = &seen[(size_t)role * L + il];
        if (sn->t) {
            s = hf__tensor_fail(err, MW_E_FORMAT, sh, t, "appears twice");
            goto out;
        }
        sn->t = t;
        sn->sh = sh;
        uint64_t want[4] = {0, 0, 0, 0};
        const char *what[4] = {"", "", "", ""};
        const uint32_t nd = role_shape(c, role, want, what);
        const bool mx = is_mx(role);
        if (mx && (role == O_GATE_UP_BLK || role == O_GATE_UP_SC ? c->n_embd : c->n_ff) % 32 != 0) {
            s = hf__tensor_fail(err, MW_E_FORMAT, sh, t,
                                "MXFP4 blocks of 32 cannot cover rows of %u (config.json %s)",
                                role == O_GATE_UP_BLK || role == O_GATE_UP_SC ? c->n_embd : c->n_ff,
                                role == O_GATE_UP_BLK || role == O_GATE_UP_SC ? "hidden_size"
                                                                             : "intermediate_size");
            goto out;
        }
        bool ok = t->n_dims == nd;
        for (uint32_t k = 0; ok && k < nd; k++) ok = t->shape[k] == want[k];
        if (!ok) {
            char got[96], exp[320];
            hf_st_shape_str(t, got, sizeof got);
            size_t k = (size_t)snprintf(exp, sizeof exp, "[");
            for (uint32_t j = 0; j < nd && k < sizeof exp; j++)
                k += (size_t)snprintf(exp + k, sizeof exp - k, "%s%llu", j ? ", " : "",
                                      (unsigned long long)want[j]);
            for (uint32_t j = 0; j < nd && k < sizeof exp; j++)
                k += (size_t)snprintf(exp + k, sizeof exp - k, "%s%s", j ? ", " : "] (", what[j]);
            if (k < sizeof exp) snprintf(exp + k, sizeof exp - k, ")");
            const bool blocks = role == O_GATE_UP_BLK || role == O_DOWN_BLK;
            s = hf__tensor_fail(err, MW_E_FORMAT, sh, t, "shape %s, expected %s from config.json%s",
                                got, exp,
                                blocks && t->n_dims == 4 && t->shape[2] != want[2]
                                    ? ": its blocks do not cover the weight's columns"
                                : mx && !blocks ? ": one E8M0 scale per block of 32"
                                                : "");
            goto out;
        }
        if (mx) {
            if (t->dtype != HF_DT_U8) {
                s = hf__tensor_fail(err, MW_E_FORMAT, sh, t, "dtype %s, expected U8 (MXFP4 %s)",
                                    hf_dtype_name(t->dtype),
                                    role == O_GATE_UP_SC || role == O_DOWN_SC ? "E8M0 scales"
                                                                              : "E2M1 pairs");
                goto out;
            }
            if (c->quant.method != HF_QM_MXFP4) {
                s = hf__tensor_fail(err, MW_E_FORMAT, sh, t,
                                    "MXFP4 blocks, but config.json has no quantization_config "
                                    "with quant_method mxfp4");
                goto out;
            }
            if ((role == O_GATE_UP_SC || role == O_DOWN_SC) && (s = check_scales(sh, t, err)))
                goto out;
        } else if (!hf_dtype_convertible(t->dtype)) {
            s = hf__tensor_fail(err, MW_E_UNSUPPORTED, sh, t,
                                "dtype %s cannot be converted (F16, BF16 or F32)",
                                hf_dtype_name(t->dtype));
            goto out;
        } else {
            dt_seen[t->dtype] = true;
        }
    }

    /* everything required is there */
    for (int r = 0; r < O_COUNT; r++) {
        const uint64_t nl = r >= O_FIRST_LAYER ? L : 1;
        for (uint64_t l = 0; l < nl; l++) {
            if (seen[(size_t)r * L + l].t) continue;
            mw_err_set_path(err, m->dir);
            if (r >= O_FIRST_LAYER)
                mw_err_set_where(err, "tensor 'model.layers.%llu.%s'", (unsigned long long)l,
                                 oroles[r].hf);
            else
                mw_err_set_where(err, "tensor '%s'", oroles[r].hf);
            s = MW_FAIL(err, MW_E_FORMAT, MW_ERR_OFF_NONE, "missing (required by %s%s)",
                        c->hf_arch_name,
                        is_mx(r) ? ": MXFP4 experts come as *_blocks with their *_scales" : "");
            goto out;
        }
    }

    /* pass 2, GptOssModel.generate_extra_tensors: the repacked experts, at
     * each layer's scales in source order */
    for (uint64_t i = 0; i < m->n; i++) {
        const struct hf_st *sh;
        const struct hf_st_tensor *t = hf_model_tensor(m, i, &sh);
        uint64_t il = 0;
        const char *rest = NULL;
        if (!hf__parse_layer(t->name, &il, &rest)) continue;
        if (strcmp(rest, oroles[O_DOWN_SC].hf) == 0) {
            s = add_mx(p, "ffn_down_exps.weight", il, seen[(size_t)O_DOWN_BLK * L + il],
                       seen[(size_t)O_DOWN_SC * L + il], 0, 1, err);
        } else if (strcmp(rest, oroles[O_GATE_UP_SC].hf) == 0) {
            s = add_mx(p, "ffn_gate_exps.weight", il, seen[(size_t)O_GATE_UP_BLK * L + il],
                       seen[(size_t)O_GATE_UP_SC * L + il], 0, 2, err);
            if (s == MW_OK)
                s = add_mx(p, "ffn_up_exps.weight", il, seen[(size_t)O_GATE_UP_BLK * L + il],
                           seen[(size_t)O_GATE_UP_SC * L + il], 1, 2, err);
        }
        if (s != MW_OK) goto out;
    }

    /* pass 3: the rest in source order */
    for (uint64_t i = 0; i < m->n; i++) {
        const struct hf_st *sh;
        const struct hf_st_tensor *t = hf_model_tensor(m, i, &sh);
        uint64_t il = 0;
        const char *rest = NULL;
        int role = -1;
        const bool per_layer = hf__parse_layer(t->name, &il, &rest);
        for (int r = per_layer ? O_FIRST_LAYER : 0; r < (per_layer ? O_COUNT : O_FIRST_LAYER); r++)
            if (strcmp(per_layer ? rest : t->name, oroles[r].hf) == 0) role = r;
        if (role < 0 || is_mx(role)) continue;
        uint64_t want[4];
        const char *what[4];
        const uint32_t nd = role_shape(c, role, want, what);
        for (int half = 0; half < (role == O_GATE_UP_B ? 2 : 1); half++) {
            struct hf_plan_tensor *e = &p->t[p->n++];
            const char *gname = role != O_GATE_UP_B ? oroles[role].gguf
                                : half                 ? "ffn_up_exps.bias"
                                                       : "ffn_gate_exps.bias";
            if (per_layer)
                snprintf(e->name, sizeof e->name, "blk.%llu.%s", (unsigned long long)il, gname);
            else
                snprintf(e->name, sizeof e->name, "%s", gname);
            e->src = t;
            e->shard = sh;
            e->n_dims = nd;
            e->ne[0] = e->ne[1] = e->ne[2] = e->ne[3] = 1;
            for (uint32_t k = 0; k < nd; k++) e->ne[k] = want[nd - 1 - k];
            if (role == O_GATE_UP_B) {
                e->xform = HF_XFORM_SPLIT;
                e->sel_first = (uint32_t)half;
                e->sel_step = 2;
                e->ne[0] /= 2;
            }
            /* the converter's F32 rule: 1-D, *_norm.weight, the router, and
             * every name not ending in .weight (the biases) */
            if (nd == 1 || ends_with(e->name, "_norm.weight") || role == O_ROUTER ||
                !ends_with(e->name, ".weight")) {
                e->type = GGUF_TYPE_F32;
            } else {
                e->type = out_ggml[ot];
                if (ot == HF_OUT_Q8_0 && e->ne[0] % 32 != 0) e->type = GGUF_TYPE_F16;
            }
            if ((s = finish(e, err)) != MW_OK) goto out;
        }
    }

    s = hf__plan_totals(p, dt_seen, "MXFP4", err);
out:
    free(seen);
    if (s != MW_OK) {
        hf_plan_free(p);
        return s;
    }
    *out = p;
    return MW_OK;
}

// --- streaming -------------------------------------------------------------------

/* One HF block of 16 bytes (element 2j in the low nibble of byte j) into
 * ggml's qs (element j low, element j + 16 high). */
static void repack16(const uint8_t *in, uint8_t *qs)
{
    uint8_t v[32];
    for (int j = 0; j < 16; j++) {
        v[2 * j] = in[j] & 15u;
        v[2 * j + 1] = in[j] >> 4;
    }
    for (int j = 0; j < 16; j++) qs[j] = (uint8_t)(v[j] | (v[j + 16] << 4));
}

static enum mw_status stream_mx(const struct hf_plan_tensor *e, size_t chunk_bytes,
                                hf_sink_fn sink, void *ud, struct mw_err *err)
{
    const struct hf_st_tensor *b = e->src, *sc = e->aux;
    const uint64_t X = b->shape[0], R2 = b->shape[1], nb = b->shape[2];
    const uint64_t rows = R2 / e->sel_step, row_out = nb * 17;
    uint64_t per = row_out ? chunk_bytes / row_out : 1;
    if (per == 0) per = 1;
    if (per > rows) per = rows;
    size_t cap;
    if (!mw_u64_to_size(per * row_out, &cap))
        return MW_FAIL(err, MW_E_NOMEM, MW_ERR_OFF_NONE, "row too large");
    uint8_t *buf = malloc(cap ? cap : 1);
    if (!buf) return MW_FAIL(err, MW_E_NOMEM, MW_ERR_OFF_NONE, "cannot allocate %zu bytes", cap);
    enum mw_status s = MW_OK;
    /* the second reader of the interleaved rows (or the only one) drops them */
    const bool last = e->sel_first + 1 == e->sel_step;
    for (uint64_t x = 0; x < X && s == MW_OK; x++) {
        for (uint64_t r0 = 0; r0 < rows && s == MW_OK; r0 += per) {
            const uint64_t r1 = r0 + per < rows ? r0 + per : rows;
            for (uint64_t r = r0; r < r1; r++) {
                const uint64_t sr = x * R2 + r * e->sel_step + e->sel_first;
                const uint8_t *bi = b->data + sr * nb * 16, *si = sc->data + sr * nb;
                uint8_t *o = buf + (r - r0) * row_out;
                for (uint64_t k = 0; k < nb; k++) {
                    o[17 * k] = si[k];
                    repack16(bi + 16 * k, o + 17 * k + 1);
                }
            }
            s = sink(ud, buf, (size_t)((r1 - r0) * row_out), err);
        }
        if (last) {
            hf_st_release(e->shard, b->file_off + x * R2 * nb * 16, R2 * nb * 16);
            hf_st_release(e->aux_shard, sc->file_off + x * R2 * nb, R2 * nb);
        }
    }
    free(buf);
    return s;
}

static float load_elem(const struct hf_st_tensor *t, uint64_t i)
{
    const uint8_t *p = t->data;
    uint32_t u;
    float v;
    switch (t->dtype) {
    case HF_DT_F16: return mw_f16_to_f32(mw_le16(p + 2 * i));
    case HF_DT_BF16: return mw_bf16_to_f32(mw_le16(p + 2 * i));
    default:
        u = mw_le32(p + 4 * i);
        memcpy(&v, &u, sizeof v);
        return v;
    }
}

/* gate_up bias [X, 2F] -> F32 [X, F] of columns sel_first, +sel_step, ... */
static enum mw_status stream_split(const struct hf_plan_tensor *e, hf_sink_fn sink, void *ud,
                                   struct mw_err *err)
{
    const struct hf_st_tensor *t = e->src;
    const uint64_t X = t->shape[0], C = t->shape[1], F = C / e->sel_step;
    size_t cap;
    if (!mw_u64_to_size(F * 4, &cap))
        return MW_FAIL(err, MW_E_NOMEM, MW_ERR_OFF_NONE, "row too large");
    uint8_t *buf = malloc(cap ? cap : 1);
    if (!buf) return MW_FAIL(err, MW_E_NOMEM, MW_ERR_OFF_NONE, "cannot allocate %zu bytes", cap);
    enum mw_status s = MW_OK;
    for (uint64_t x = 0; x < X && s == MW_OK; x++) {
        for (uint64_t j = 0; j < F; j++) {
            const float v = load_elem(t, x * C + j * e->sel_step + e->sel_first);
            uint32_t u;
            memcpy(&u, &v, sizeof u);
            mw_put_le32(buf + 4 * j, u);
        }
        s = sink(ud, buf, cap, err);
    }
    free(buf);
    return s;
}

enum mw_status hf__gptoss_stream(const struct hf_plan_tensor *e, size_t chunk_bytes,
                                 hf_sink_fn sink, void *ud, struct mw_err *err)
{
    if (e->xform == HF_XFORM_MXFP4) return stream_mx(e, chunk_bytes, sink, ud, err);
    return stream_split(e, sink, ud, err);
}

// --- keys ------------------------------------------------------------------------

/* TextModel.set_gguf_parameters, then GptOssModel's two keys. The file type
 * of an f32/f16/bf16 conversion is MOSTLY_MXFP4_MOE (38), as the converter
 * sets it for an mxfp4 checkpoint; q8_0 stays Q8_0 (7). */
enum mw_status hf__gptoss_kvs(struct gguf_writer *w, const struct hf_config *c, enum hf_out_type ot,
                              struct mw_err *err)
{
    struct hf_kvs k;
    hf__kvs_init(&k, w, c->gguf_arch, err);
    hf__kv_u32(&k, "block_count", c->n_layer);
    hf__kv_u32(&k, "context_length", c->n_ctx);
    hf__kv_u32(&k, "embedding_length", c->n_embd);
    hf__kv_u32(&k, "feed_forward_length", c->n_ff);
    hf__kv_u32(&k, "attention.head_count", c->n_head);
    hf__kv_u32(&k, "attention.head_count_kv", c->n_head_kv);
    if (c->rope_scaling == HF_ROPE_YARN) {
        static const char *const yk[4] = {"rope.scaling.yarn_ext_factor",
                                          "rope.scaling.yarn_attn_factor",
                                          "rope.scaling.yarn_beta_fast",
                                          "rope.scaling.yarn_beta_slow"};
        const double yv[4] = {c->yarn_ext_factor, c->yarn_attn_factor, c->yarn_beta_fast,
                              c->yarn_beta_slow};
        hf__kv_str(&k, "rope.scaling.type", "yarn");
        hf__kv_f32(&k, "rope.scaling.factor", (float)c->rope_factor);
        hf__kv_u32(&k, "rope.scaling.original_context_length", c->rope_orig_ctx);
        for (int i = 0; i < 4; i++)
            if (c->yarn_has & (1u << i)) hf__kv_f32(&k, yk[i], (float)yv[i]);
    }
    hf__kv_f32(&k, "rope.freq_base", c->rope_theta);
    hf__kv_f32(&k, "attention.layer_norm_rms_epsilon", c->rms_eps);
    hf__kv_u32(&k, "expert_count", c->n_expert);
    hf__kv_u32(&k, "expert_used_count", c->n_expert_used);
    hf__kv_u32(&k, "attention.key_length", c->head_dim);
    hf__kv_u32(&k, "attention.value_length", c->head_dim);
    const bool mx = c->quant.method == HF_QM_MXFP4 && ot != HF_OUT_Q8_0;
    hf__kv_file_type(&k, mx ? 38u : hf_out_type_ftype(ot));
    hf__kv_u32(&k, "attention.sliding_window", c->n_swa);
    hf__kv_u32(&k, "expert_feed_forward_length", c->n_ff);
    return k.s;
}
