/*
 * tools/cmd_plan.c — `memwall plan MODEL [--ram 16G] [--ctx 4096] [--kv f16|q8_0]`:
 * the memory budget of running MODEL (an HF dir, a GGUF file, or a
 * config.json alone) on a device: the weights at each llama-quantize preset
 * (exact tensor sizes from quant's per-tensor type rules) and at plain
 * bits-per-weight targets, the KV cache per context length and KV type (from
 * the architecture; the gated delta net's layers keep a fixed recurrent
 * state instead), the runtime's overhead (calib_mem_estimate: the runtime's
 * own allocation formula), and what fits on 8/12/16/24 GiB devices (or the
 * one given).
 *
 * Without weights (a config.json, or a directory holding no safetensors) the
 * tensor table is the one llama.cpp's converter writes for that config
 * (config_tensors): the llama-like dense and MoE families and qwen35,
 * qwen35moe, qwen3next, whose layouts it knows.
 */
#define _POSIX_C_SOURCE 200809L
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "calib/calib.h"
#include "calib/calib_gemma4.h"
#include "core/mw_mem.h"
#include "hf/hf.h"
#include "methods/methods.h"
#include "quant/quant.h"
#include "tools/cmd.h"

static const char usage_text[] =
    "usage: memwall plan MODEL [--ram SIZE] [--ctx N] [--kv f16|q8_0] [--threads N]\n"
    "  Memory budget of MODEL (a Hugging Face checkpoint dir, a GGUF file, or a config.json\n"
    "  alone: the tensors its conversion would have) on a device:\n"
    "  weights per llama-quantize preset and per bits-per-weight, KV cache per context\n"
    "  length and type, the runtime's overhead, and what fits on 8/12/16/24 GiB devices.\n"
    "  --ram SIZE      one device size instead of the four tiers (16G, 12GiB, 8192M)\n"
    "  --ctx N         context length of the fit table (default 4096)\n"
    "  --kv T          KV cache type of the fit table: f16 (default) or q8_0\n"
    "  --threads N     runtime threads (per-thread attention scratch; default 4)\n"
    "  An app gets " "65" "% of device RAM (CALIB_MEM_APP_PERCENT); overhead = runtime scratch\n"
    "  + f32 norms/biases + 64 MiB base (code, stacks, allocator).\n"
    "exit status: 0 ok, 1 bad input, 2 usage, 3 I/O error\n";

#define MAX_T 65536

struct model {
    struct hf_model *hf;
    struct hf_plan *plan;
    struct gguf_file *gf;
    struct rt_model *rm;
    struct rt_hparams hp;
    struct quant_model_info info;
    struct quant_tensor_desc *t;
    uint64_t n_t;
    uint64_t n_bias;
    uint64_t file_bytes; /* GGUF input: its size */
    uint64_t data_bytes; /* GGUF input: its tensor data */
    char (*names)[GGUF_MAX_NAME + 1]; /* config.json alone: the names t[] points to */
    uint64_t cap;
    bool config_only;
    bool g4_k_eq_v; /* gemma4 config: attention_k_eq_v */
    struct calib_g4 *g4; /* gemma4: per-layer shapes (calib_gemma4.h); else NULL */
};

static void model_free(struct model *m)
{
    free(m->t);
    free(m->names);
    free(m->g4);
    rt_model_close(m->rm);
    gguf_close(m->gf);
    hf_plan_free(m->plan);
    hf_model_close(m->hf);
}

static int desc_cmp(const void *a, const void *b)
{
    return quant_tensor_name_cmp(((const struct quant_tensor_desc *)a)->name,
                                 ((const struct quant_tensor_desc *)b)->name);
}

// --- config.json alone: the tensors its conversion would have ---

/* Append tensor name (printf-style) of ne0 x ne1 x ne2 (1-D when ne1 is 0)
 * and type; false when out of memory. */
static bool add_tensor(struct model *m, uint32_t type, uint64_t ne0, uint64_t ne1, uint64_t ne2,
                       const char *fmt, ...) __attribute__((format(printf, 6, 7)));
static bool add_tensor(struct model *m, uint32_t type, uint64_t ne0, uint64_t ne1, uint64_t ne2,
                       const char *fmt, ...)
{
    if (m->n_t == m->cap) {
        const uint64_t cap = m->cap ? 2 * m->cap : 256;
        char(*nn)[GGUF_MAX_NAME + 1] = realloc(m->names, (size_t)cap * sizeof *nn);
        if (!nn) return false;
        m->names = nn;
        struct quant_tensor_desc *t = realloc(m->t, (size_t)cap * sizeof *t);
        if (!t) return false;
        m->t = t;
        m->cap = cap;
    }
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(m->names[m->n_t], sizeof m->names[0], fmt, ap);
    va_end(ap);
    struct quant_tensor_desc *t = &m->t[m->n_t++];
    *t = (struct quant_tensor_desc){.type = type, .n_dims = ne2 > 1 ? 3 : ne1 ? 2 : 1,
                                    .ne = {ne0, ne1 ? ne1 : 1, ne2 ? ne2 : 1, 1}};
    return true;
}

/* The tensor table llama.cpp's converter writes for hp (F16 weights, F32
 * norms, routers, conv kernels and 1-D tensors; families-2026.md 1b for the
 * gated delta net, its MTP blocks as blk.n_layer..); false when out of
 * memory, or *unsupported set for a family whose layout is not known here
 * (gemma, phi3: they need the checkpoint). */
static bool config_tensors(struct model *m, const struct rt_hparams *hp, bool *unsupported)
{
    const uint32_t F16 = GGUF_TYPE_F16, F32 = GGUF_TYPE_F32;
    const uint64_t E = hp->n_embd, hd = hp->head_dim, V = hp->n_vocab;
    const uint64_t q = (uint64_t)hp->n_head * hd, kv = (uint64_t)hp->n_head_kv * hd;
    const bool dn = hp->arch == RT_ARCH_QWEN35 || hp->arch == RT_ARCH_QWEN35MOE ||
                    hp->arch == RT_ARCH_QWEN3NEXT;
    *unsupported = !(dn || hp->arch == RT_ARCH_LLAMA || hp->arch == RT_ARCH_QWEN2 ||
                     hp->arch == RT_ARCH_QWEN3 || hp->arch == RT_ARCH_QWEN2MOE ||
                     hp->arch == RT_ARCH_QWEN3MOE) ||
                   hp->post_norms || hp->fused_qkv || hp->has_rope_long;
    if (*unsupported) return false;
    bool ok = add_tensor(m, F16, E, V, 0, "token_embd.weight") &&
              add_tensor(m, F32, E, 0, 0, "output_norm.weight");
    if (!hp->tied_output) ok = ok && add_tensor(m, F16, E, V, 0, "output.weight");
    const uint32_t n_all = hp->n_layer + (dn ? hp->n_nextn : 0);
    const uint64_t X = hp->n_expert, FX = hp->n_ff_exp ? hp->n_ff_exp : hp->n_ff;
    for (uint32_t il = 0; ok && il < n_all; il++) {
        const bool mtp = il >= hp->n_layer;
        ok = add_tensor(m, F32, E, 0, 0, "blk.%u.attn_norm.weight", il) &&
             add_tensor(m, F32, E, 0, 0, dn ? "blk.%u.post_attention_norm.weight"
                                            : "blk.%u.ffn_norm.weight", il);
        if (dn && !mtp && rt_layer_is_recurrent(hp, il)) {
            const uint64_t S = hp->ssm_d_state, Hv = hp->ssm_dt_rank, vd = hp->ssm_d_inner;
            const uint64_t conv = rt_ssm_conv_channels(hp);
            ok = ok && add_tensor(m, F16, E, conv, 0, "blk.%u.attn_qkv.weight", il) &&
                 add_tensor(m, F16, E, vd, 0, "blk.%u.attn_gate.weight", il) &&
                 add_tensor(m, F32, hp->ssm_conv_kernel, conv, 0, "blk.%u.ssm_conv1d.weight", il) &&
                 add_tensor(m, F32, Hv, 0, 0, "blk.%u.ssm_dt.bias", il) &&
                 add_tensor(m, F32, Hv, 0, 0, "blk.%u.ssm_a", il) &&
                 add_tensor(m, F32, S, 0, 0, "blk.%u.ssm_norm.weight", il) &&
                 add_tensor(m, F16, vd, E, 0, "blk.%u.ssm_out.weight", il);
            if (hp->arch == RT_ARCH_QWEN3NEXT)
                ok = ok && add_tensor(m, F16, E, 2 * Hv, 0, "blk.%u.ssm_ba.weight", il);
            else
                ok = ok && add_tensor(m, F16, E, Hv, 0, "blk.%u.ssm_beta.weight", il) &&
                     add_tensor(m, F16, E, Hv, 0, "blk.%u.ssm_alpha.weight", il);
        } else {
            ok = ok && add_tensor(m, F16, E, dn ? 2 * q : q, 0, "blk.%u.attn_q.weight", il) &&
                 add_tensor(m, F16, E, kv, 0, "blk.%u.attn_k.weight", il) &&
                 add_tensor(m, F16, E, kv, 0, "blk.%u.attn_v.weight", il) &&
                 add_tensor(m, F16, q, E, 0, "blk.%u.attn_output.weight", il);
            if (dn || hp->qk_norm)
                ok = ok && add_tensor(m, F32, hd, 0, 0, "blk.%u.attn_q_norm.weight", il) &&
                     add_tensor(m, F32, hd, 0, 0, "blk.%u.attn_k_norm.weight", il);
            if (hp->arch == RT_ARCH_QWEN2 || hp->arch == RT_ARCH_QWEN2MOE)
                ok = ok && add_tensor(m, F32, q, 0, 0, "blk.%u.attn_q.bias", il) &&
                     add_tensor(m, F32, kv, 0, 0, "blk.%u.attn_k.bias", il) &&
                     add_tensor(m, F32, kv, 0, 0, "blk.%u.attn_v.bias", il);
        }
        if (X) {
            ok = ok && add_tensor(m, F32, E, X, 0, "blk.%u.ffn_gate_inp.weight", il) &&
                 add_tensor(m, F16, E, FX, X, "blk.%u.ffn_gate_exps.weight", il) &&
                 add_tensor(m, F16, E, FX, X, "blk.%u.ffn_up_exps.weight", il) &&
                 add_tensor(m, F16, FX, E, X, "blk.%u.ffn_down_exps.weight", il);
            if (hp->n_ff_shexp)
                ok = ok && add_tensor(m, F32, E, 0, 0, "blk.%u.ffn_gate_inp_shexp.weight", il) &&
                     add_tensor(m, F16, E, hp->n_ff_shexp, 0, "blk.%u.ffn_gate_shexp.weight", il) &&
                     add_tensor(m, F16, E, hp->n_ff_shexp, 0, "blk.%u.ffn_up_shexp.weight", il) &&
                     add_tensor(m, F16, hp->n_ff_shexp, E, 0, "blk.%u.ffn_down_shexp.weight", il);
        } else {
            ok = ok && add_tensor(m, F16, E, hp->n_ff, 0, "blk.%u.ffn_gate.weight", il) &&
                 add_tensor(m, F16, E, hp->n_ff, 0, "blk.%u.ffn_up.weight", il) &&
                 add_tensor(m, F16, hp->n_ff, E, 0, "blk.%u.ffn_down.weight", il);
        }
        if (mtp)
            ok = ok && add_tensor(m, F16, 2 * E, E, 0, "blk.%u.nextn.eh_proj.weight", il) &&
                 add_tensor(m, F32, E, 0, 0, "blk.%u.nextn.enorm.weight", il) &&
                 add_tensor(m, F32, E, 0, 0, "blk.%u.nextn.hnorm.weight", il) &&
                 add_tensor(m, F32, E, 0, 0, "blk.%u.nextn.shared_head_norm.weight", il);
    }
    for (uint64_t i = 0; ok && i < m->n_t; i++) m->t[i].name = m->names[i];
    return ok;
}

/* The tensor table llama.cpp's converter writes for a gpt-oss config
 * (conversion/gpt_oss.py): the experts MXFP4 as shipped, F16 attention,
 * embeddings and output, F32 norms, biases, sinks and router; false when out
 * of memory. */
static bool config_tensors_gptoss(struct model *m, const struct rt_hparams *hp)
{
    const uint32_t F16 = GGUF_TYPE_F16, F32 = GGUF_TYPE_F32, MX = GGUF_TYPE_MXFP4;
    const uint64_t E = hp->n_embd, hd = hp->head_dim, V = hp->n_vocab, H = hp->n_head;
    const uint64_t q = H * hd, kv = (uint64_t)hp->n_head_kv * hd;
    const uint64_t X = hp->n_expert, F = hp->n_ff_exp;
    bool ok = add_tensor(m, F16, E, V, 0, "token_embd.weight") &&
              add_tensor(m, F32, E, 0, 0, "output_norm.weight") &&
              add_tensor(m, F16, E, V, 0, "output.weight");
    for (uint32_t il = 0; ok && il < hp->n_layer; il++)
        ok = add_tensor(m, MX, E, F, X, "blk.%u.ffn_gate_exps.weight", il) &&
             add_tensor(m, MX, E, F, X, "blk.%u.ffn_up_exps.weight", il) &&
             add_tensor(m, MX, F, E, X, "blk.%u.ffn_down_exps.weight", il) &&
             add_tensor(m, F32, F, X, 0, "blk.%u.ffn_gate_exps.bias", il) &&
             add_tensor(m, F32, F, X, 0, "blk.%u.ffn_up_exps.bias", il) &&
             add_tensor(m, F32, E, X, 0, "blk.%u.ffn_down_exps.bias", il) &&
             add_tensor(m, F32, E, X, 0, "blk.%u.ffn_gate_inp.weight", il) &&
             add_tensor(m, F32, X, 0, 0, "blk.%u.ffn_gate_inp.bias", il) &&
             add_tensor(m, F32, E, 0, 0, "blk.%u.attn_norm.weight", il) &&
             add_tensor(m, F32, E, 0, 0, "blk.%u.post_attention_norm.weight", il) &&
             add_tensor(m, F16, E, q, 0, "blk.%u.attn_q.weight", il) &&
             add_tensor(m, F16, E, kv, 0, "blk.%u.attn_k.weight", il) &&
             add_tensor(m, F16, E, kv, 0, "blk.%u.attn_v.weight", il) &&
             add_tensor(m, F16, q, E, 0, "blk.%u.attn_output.weight", il) &&
             add_tensor(m, F32, q, 0, 0, "blk.%u.attn_q.bias", il) &&
             add_tensor(m, F32, kv, 0, 0, "blk.%u.attn_k.bias", il) &&
             add_tensor(m, F32, kv, 0, 0, "blk.%u.attn_v.bias", il) &&
             add_tensor(m, F32, E, 0, 0, "blk.%u.attn_output.bias", il) &&
             add_tensor(m, F32, H, 0, 0, "blk.%u.attn_sinks.weight", il);
    for (uint64_t i = 0; ok && i < m->n_t; i++) m->t[i].name = m->names[i];
    return ok;
}

/* The tensor table llama.cpp's converter writes for a gemma4 config
 * (families-2026.md 2b; tests/fixtures/mk_gemma4_gguf.py writes the same):
 * F16 weights, F32 norms, routers, scales and rope_freqs; false when out of
 * memory. */
static bool config_tensors_g4(struct model *m, const struct calib_g4 *g)
{
    const uint32_t F16 = GGUF_TYPE_F16, F32 = GGUF_TYPE_F32;
    const uint64_t E = g->n_embd, V = g->n_vocab, H = g->n_head, L = g->n_layer;
    const uint64_t P = g->n_embd_per_layer, X = g->n_expert, FX = g->n_ff_exp;
    bool ok = add_tensor(m, F32, g->head_dim_full / 2, 0, 0, "rope_freqs.weight") &&
              add_tensor(m, F16, E, V, 0, "token_embd.weight") &&
              add_tensor(m, F32, E, 0, 0, "output_norm.weight");
    if (P)
        ok = ok && add_tensor(m, F16, L * P, V, 0, "per_layer_token_embd.weight") &&
             add_tensor(m, F16, E, L * P, 0, "per_layer_model_proj.weight") &&
             add_tensor(m, F32, P, 0, 0, "per_layer_proj_norm.weight");
    for (uint32_t il = 0; ok && il < L; il++) {
        const uint64_t d = g->swa[il] ? g->head_dim_swa : g->head_dim_full;
        const uint64_t kv = (uint64_t)g->n_head_kv[il] * d, F = g->n_ff[il];
        static const char *const norms[] = {"attn_norm", "post_attention_norm", "ffn_norm",
                                            "post_ffw_norm"};
        for (size_t k = 0; ok && k < sizeof norms / sizeof norms[0]; k++)
            ok = add_tensor(m, F32, E, 0, 0, "blk.%u.%s.weight", il, norms[k]);
        ok = ok && add_tensor(m, F32, 1, 0, 0, "blk.%u.layer_output_scale.weight", il) &&
             add_tensor(m, F16, E, H * d, 0, "blk.%u.attn_q.weight", il) &&
             add_tensor(m, F16, E, kv, 0, "blk.%u.attn_k.weight", il) &&
             add_tensor(m, F16, H * d, E, 0, "blk.%u.attn_output.weight", il) &&
             add_tensor(m, F32, d, 0, 0, "blk.%u.attn_q_norm.weight", il) &&
             add_tensor(m, F32, d, 0, 0, "blk.%u.attn_k_norm.weight", il) &&
             add_tensor(m, F16, E, F, 0, "blk.%u.ffn_gate.weight", il) &&
             add_tensor(m, F16, E, F, 0, "blk.%u.ffn_up.weight", il) &&
             add_tensor(m, F16, F, E, 0, "blk.%u.ffn_down.weight", il);
        /* attention_k_eq_v: the full layers have no attn_v */
        if (g->swa[il] || !m->g4_k_eq_v)
            ok = ok && add_tensor(m, F16, E, kv, 0, "blk.%u.attn_v.weight", il);
        if (P)
            ok = ok && add_tensor(m, F16, E, P, 0, "blk.%u.inp_gate.weight", il) &&
                 add_tensor(m, F16, P, E, 0, "blk.%u.proj.weight", il) &&
                 add_tensor(m, F32, E, 0, 0, "blk.%u.post_norm.weight", il);
        if (X)
            ok = ok && add_tensor(m, F16, FX, E, X, "blk.%u.ffn_down_exps.weight", il) &&
                 add_tensor(m, F16, E, 2 * FX, X, "blk.%u.ffn_gate_up_exps.weight", il) &&
                 add_tensor(m, F32, X, 0, 0, "blk.%u.ffn_down_exps.scale", il) &&
                 add_tensor(m, F32, E, X, 0, "blk.%u.ffn_gate_inp.weight", il) &&
                 add_tensor(m, F32, E, 0, 0, "blk.%u.ffn_gate_inp.scale", il) &&
                 add_tensor(m, F32, E, 0, 0, "blk.%u.post_ffw_norm_1.weight", il) &&
                 add_tensor(m, F32, E, 0, 0, "blk.%u.post_ffw_norm_2.weight", il) &&
                 add_tensor(m, F32, E, 0, 0, "blk.%u.pre_ffw_norm_2.weight", il);
    }
    for (uint64_t i = 0; ok && i < m->n_t; i++) m->t[i].name = m->names[i];
    return ok;
}

/* A directory with config.json but no safetensors: plan from the config. */
static bool config_only_dir(const char *dir)
{
    static const char *const files[] = {"model.safetensors", "model.safetensors.index.json"};
    char p[4096];
    struct stat st;
    for (size_t i = 0; i < sizeof files / sizeof files[0]; i++) {
        snprintf(p, sizeof p, "%s/%s", dir, files[i]);
        if (stat(p, &st) == 0) return false;
    }
    snprintf(p, sizeof p, "%s/config.json", dir);
    return stat(p, &st) == 0;
}

static enum mw_status model_from_config(const char *path, struct model *m, struct mw_err *err)
{
    struct hf_config *c = calloc(1, sizeof *c);
    if (!c) return MW_FAIL(err, MW_E_NOMEM, MW_ERR_OFF_NONE, "config");
    enum mw_status s = hf_config_load(path, c, err);
    if (s == MW_OK) {
        calib_hparams_from_hf(c, &m->hp, &m->n_bias);
        bool unsupported = false;
        if (c->arch == HF_ARCH_GEMMA4) {
            m->g4_k_eq_v = c->g4_k_eq_v;
            if (!(m->g4 = malloc(sizeof *m->g4)))
                s = MW_FAIL(err, MW_E_NOMEM, MW_ERR_OFF_NONE, "config");
            else if (calib_g4_from_hf(c, m->g4), !config_tensors_g4(m, m->g4))
                s = MW_FAIL(err, MW_E_NOMEM, MW_ERR_OFF_NONE, "tensor table");
        } else if (c->arch == HF_ARCH_GPTOSS) {
            if (!config_tensors_gptoss(m, &m->hp))
                s = MW_FAIL(err, MW_E_NOMEM, MW_ERR_OFF_NONE, "tensor table");
        } else if (!config_tensors(m, &m->hp, &unsupported)) {
            mw_err_set_path(err, path);
            s = unsupported
                    ? MW_FAIL(err, MW_E_UNSUPPORTED, MW_ERR_OFF_NONE,
                              "a %s config alone: plan needs the checkpoint for this family",
                              m->hp.arch_name)
                    : MW_FAIL(err, MW_E_NOMEM, MW_ERR_OFF_NONE, "tensor table");
        }
        m->config_only = true;
    }
    free(c);
    return s;
}

/* The rt_hparams fields plan prints and quant's rules read, for a gemma4
 * GGUF (the runtime's reading is not needed for the budget). */
static void g4_hparams(const struct calib_g4 *g, struct rt_hparams *hp)
{
    memset(hp, 0, sizeof *hp);
    snprintf(hp->arch_name, sizeof hp->arch_name, "gemma4");
    hp->n_layer = g->n_layer, hp->n_embd = g->n_embd, hp->n_head = g->n_head;
    hp->n_head_kv = g->n_head_kv[0], hp->head_dim = g->head_dim_swa, hp->n_ff = g->n_ff[0];
    hp->n_vocab = g->n_vocab, hp->n_ctx_train = g->n_ctx_train;
    hp->n_expert = g->n_expert, hp->n_expert_used = g->n_expert_used, hp->n_ff_exp = g->n_ff_exp;
    hp->n_swa = g->n_swa;
}

static enum mw_status model_open(const char *path, struct model *m, struct mw_err *err)
{
    struct stat st;
    if (stat(path, &st) != 0) {
        mw_err_set_path(err, path);
        return MW_FAIL(err, errno == ENOENT ? MW_E_FORMAT : MW_E_IO, MW_ERR_OFF_NONE, "%s",
                       strerror(errno));
    }
    enum mw_status s;
    const size_t pl = strlen(path);
    if (S_ISDIR(st.st_mode) && config_only_dir(path)) {
        char cfg[4096];
        snprintf(cfg, sizeof cfg, "%s/config.json", path);
        if ((s = model_from_config(cfg, m, err))) return s;
    } else if (!S_ISDIR(st.st_mode) && pl >= 5 && strcmp(path + pl - 5, ".json") == 0) {
        if ((s = model_from_config(path, m, err))) return s;
    } else if (S_ISDIR(st.st_mode)) {
        if ((s = hf_model_open(path, &m->hf, err))) return s;
        if ((s = hf_plan_build(m->hf, HF_OUT_F16, &m->plan, err))) return s;
        calib_hparams_from_hf(hf_model_config(m->hf), &m->hp, &m->n_bias);
        if (hf_model_config(m->hf)->arch == HF_ARCH_GEMMA4) {
            if (!(m->g4 = malloc(sizeof *m->g4)))
                return MW_FAIL(err, MW_E_NOMEM, MW_ERR_OFF_NONE, "config");
            calib_g4_from_hf(hf_model_config(m->hf), m->g4);
        }
        m->n_t = hf_plan_count(m->plan);
        m->t = calloc(m->n_t ? m->n_t : 1, sizeof *m->t);
        if (!m->t) return MW_FAIL(err, MW_E_NOMEM, MW_ERR_OFF_NONE, "tensor table");
        for (uint64_t i = 0; i < m->n_t; i++) {
            const struct hf_plan_tensor *pt = hf_plan_get(m->plan, i);
            m->t[i] = (struct quant_tensor_desc){.name = pt->name, .type = pt->type,
                                                 .n_dims = pt->n_dims};
            for (int d = 0; d < GGUF_MAX_DIMS; d++)
                m->t[i].ne[d] = d < (int)pt->n_dims ? pt->ne[d] : 1;
            if (strcmp(pt->name, "token_embd.weight") == 0 && pt->ne[1] <= UINT32_MAX)
                m->hp.n_vocab = (uint32_t)pt->ne[1];
        }
    } else {
        if ((s = gguf_open(path, GGUF_OPEN_DEFAULT, &m->gf, err))) return s;
        if (calib_g4_gguf_is(m->gf)) {
            if (!(m->g4 = malloc(sizeof *m->g4)))
                return MW_FAIL(err, MW_E_NOMEM, MW_ERR_OFF_NONE, "config");
            if ((s = calib_g4_from_gguf(m->gf, m->g4, err))) return s;
            g4_hparams(m->g4, &m->hp);
        } else {
            if ((s = rt_model_from_gguf(m->gf, &m->rm, err))) return s;
            m->hp = *rt_model_hparams(m->rm);
        }
        m->file_bytes = gguf_file_size(m->gf);
        m->n_t = gguf_tensor_count(m->gf);
        m->t = calloc(m->n_t ? m->n_t : 1, sizeof *m->t);
        if (!m->t) return MW_FAIL(err, MW_E_NOMEM, MW_ERR_OFF_NONE, "tensor table");
        for (uint64_t i = 0; i < m->n_t; i++) {
            const struct gguf_tensor *gt = gguf_tensor_get(m->gf, i);
            m->t[i] = (struct quant_tensor_desc){.name = gt->name, .type = gt->type,
                                                 .n_dims = gt->n_dims};
            memcpy(m->t[i].ne, gt->ne, sizeof gt->ne);
            if (strstr(gt->name, ".bias")) m->n_bias += gt->ne[0];
            m->data_bytes += gt->nbytes;
        }
    }
    snprintf(m->info.arch, sizeof m->info.arch, "%s", m->hp.arch_name);
    /* llama-quantize's layer count is block_count: the MTP blocks too */
    m->info.n_layer = m->hp.n_layer + m->hp.n_nextn;
    m->info.n_head = m->hp.n_head;
    m->info.n_head_kv = m->hp.n_head_kv;
    m->info.n_expert = m->hp.n_expert;
    qsort(m->t, (size_t)m->n_t, sizeof *m->t, desc_cmp);
    return MW_OK;
}

/* Tensor data bytes at preset p (llama-quantize's rules; NULL: every
 * quantizable tensor F16) and the bytes one decoded token reads
 * (quant_decode_bytes: n_used of each stacked expert tensor's slabs, one
 * embedding row); false if the preset cannot be applied. */
static bool preset_bytes(const struct model *m, const struct quant_preset *p, uint64_t *out,
                         uint64_t *active, uint64_t *flash)
{
    struct quant_choice *ch = calloc(m->n_t ? m->n_t : 1, sizeof *ch);
    uint32_t *ty = calloc(m->n_t ? m->n_t : 1, sizeof *ty);
    bool ok = ch && ty;
    if (ok && p) {
        const struct quant_rules r = {.preset = p, .output_type = -1, .token_embd_type = -1};
        struct mw_err err;
        mw_err_clear(&err);
        ok = quant_choose_types(&m->info, m->t, m->n_t, &r, ch, &err) == MW_OK;
    } else if (ok) {
        for (uint64_t i = 0; i < m->n_t; i++) ch[i].type = GGUF_TYPE_F16; /* the F16 row */
    }
    for (uint64_t i = 0; ok && i < m->n_t; i++)
        ty[i] = quant_tensor_is_quantizable(&m->t[i], false) ? ch[i].type : m->t[i].type;
    ok = ok && quant_decode_bytes(m->t, ty, m->n_t, m->hp.n_expert_used, out, active);
    /* a table read one row per token from flash (gemma4's per_layer_token_embd):
     * not resident, and a token reads one row of it */
    *flash = 0;
    for (uint64_t i = 0; ok && m->g4 && i < m->n_t; i++) {
        if (!calib_g4_on_flash(m->t[i].name)) continue;
        uint64_t b;
        ok = gguf_tensor_nbytes(ty[i], m->t[i].ne, &b);
        if (ok && m->t[i].ne[1] > 0) {
            *flash += b;
            *active -= b - b / m->t[i].ne[1];
        }
    }
    /* the MTP blocks (blk.n_layer..) stay in the file but are never run: a
     * token reads what quant_decode_bytes counts without them */
    if (ok && m->hp.n_nextn) {
        struct quant_tensor_desc *run = calloc(m->n_t ? m->n_t : 1, sizeof *run);
        uint32_t *rty = calloc(m->n_t ? m->n_t : 1, sizeof *rty);
        uint64_t n_run = 0, tot;
        for (uint64_t i = 0; run && rty && i < m->n_t; i++) {
            unsigned il;
            if (sscanf(m->t[i].name, "blk.%u.", &il) == 1 && il >= m->hp.n_layer) continue;
            run[n_run] = m->t[i];
            rty[n_run++] = ty[i];
        }
        ok = run && rty &&
             quant_decode_bytes(run, rty, n_run, m->hp.n_expert_used, &tot, active);
        free(run);
        free(rty);
    }
    free(ch);
    free(ty);
    return ok;
}

/* elements of quantizable tensors, and bytes of the others as they are */
static void split_params(const struct model *m, uint64_t *n_q, uint64_t *other_bytes)
{
    *n_q = 0;
    *other_bytes = 0;
    for (uint64_t i = 0; i < m->n_t; i++) {
        const uint64_t ne = m->t[i].ne[0] * m->t[i].ne[1] * m->t[i].ne[2] * m->t[i].ne[3];
        if (quant_tensor_is_quantizable(&m->t[i], false)) {
            *n_q += ne;
        } else {
            uint64_t b = 0;
            const bool f = m->t[i].type == GGUF_TYPE_F16 || m->t[i].type == GGUF_TYPE_BF16;
            /* converters keep 1-D tensors f32 */
            gguf_tensor_nbytes(f ? GGUF_TYPE_F32 : m->t[i].type, m->t[i].ne, &b);
            *other_bytes += b;
        }
    }
}

static double gib(uint64_t b) { return (double)b / (1024.0 * 1024.0 * 1024.0); }
static double mib(uint64_t b) { return (double)b / (1024.0 * 1024.0); }

static void put_size(char *buf, size_t n, uint64_t b)
{
    if (b >= (uint64_t)1 << 30) snprintf(buf, n, "%.2f GiB", gib(b));
    else snprintf(buf, n, "%.1f MiB", mib(b));
}

static bool parse_kv(void *ctx, const char *val, char *msg, size_t cap)
{
    (void)msg, (void)cap;
    return rt_kv_type_parse(val, ctx);
}

static const char *const preset_names[] = {"F16",    "Q8_0",   "Q6_K",   "Q5_K_M", "Q5_K_S",
                                           "Q4_K_M", "Q4_K_S", "IQ4_XS", "Q4_0",   "Q3_K_L",
                                           "Q3_K_M", "Q3_K_S", "Q2_K",   "MXFP4_MOE"};
#define N_PRESETS (sizeof preset_names / sizeof preset_names[0])
static const double bpw_rows[] = {2.5, 3.0, 3.5, 4.0, 4.5, 5.0, 6.0, 8.5};
#define N_BPW (sizeof bpw_rows / sizeof bpw_rows[0])

/* The weights at each preset (rows of the weight, decode and fit tables). */
struct presets {
    uint64_t bytes[N_PRESETS], active[N_PRESETS];
    uint64_t flash[N_PRESETS]; /* of bytes: read from flash, not resident (gemma4) */
    bool ok[N_PRESETS];
};

static void print_model(const char *path, const struct rt_hparams *hp, uint64_t n_q,
                        uint64_t other)
{
    printf("model: %s (%s): %u layers, hidden %u, %u heads / %u kv heads, head dim %u, "
           "ffn %u, vocab %u, context %u\n",
           path, hp->arch_name, hp->n_layer, hp->n_embd, hp->n_head, hp->n_head_kv, hp->head_dim,
           hp->n_ff, hp->n_vocab, hp->n_ctx_train);
    if (hp->n_expert)
        printf("       mixture of experts: %u experts, %u routed per token, expert ffn %u%s\n",
               hp->n_expert, hp->n_expert_used, hp->n_ff_exp ? hp->n_ff_exp : hp->n_ff,
               hp->n_ff_shexp ? ", a shared expert" : "");
    if (hp->full_attn_interval)
        printf("       gated delta net: every %u-th layer full attention (q output gate), the "
               "others linear attention: %u key / %u value heads, state %u, conv kernel %u%s\n",
               hp->full_attn_interval, hp->ssm_n_group, hp->ssm_dt_rank, hp->ssm_d_state,
               hp->ssm_conv_kernel,
               hp->n_nextn ? "; an MTP block in the file (blk.n_layer), never run" : "");
    printf("       %.3f B parameters in quantizable weights, %.1f MiB of other tensors (f32)\n",
           (double)n_q / 1e9, mib(other));
}

/* The weights table; fills *pr. */
static void print_weights(const struct model *m, uint64_t n_q, uint64_t other,
                          struct presets *pr)
{
    printf("\nweights (tensor data; presets: llama-quantize's per-tensor rules; bpw: all 2-D "
           "weights at that rate):\n");
    printf("  %-8s %7s %12s %14s\n", "preset", "bpw", "size", "bytes");
    if (m->file_bytes)
        printf("  %-8s %7.2f %12s %14llu  (this file, tensor data)\n", "file",
               (double)(m->data_bytes - other) * 8.0 / (double)(n_q ? n_q : 1), "",
               (unsigned long long)m->data_bytes);
    for (size_t i = 0; i < N_PRESETS; i++) {
        const bool f16 = strcmp(preset_names[i], "F16") == 0;
        const struct quant_preset *p = f16 ? NULL : quant_preset_find(preset_names[i]);
        /* MXFP4_MOE: for a file whose experts are MXFP4 (gpt-oss) only */
        bool mx = strcmp(preset_names[i], "MXFP4_MOE") != 0;
        for (uint64_t k = 0; !mx && k < m->n_t; k++) mx = m->t[k].type == GGUF_TYPE_MXFP4;
        pr->ok[i] = (f16 || p) && mx &&
                    preset_bytes(m, p, &pr->bytes[i], &pr->active[i], &pr->flash[i]);
        if (!pr->ok[i]) continue;
        char sz[32];
        put_size(sz, sizeof sz, pr->bytes[i]);
        printf("  %-8s %7.2f %12s %14llu\n", preset_names[i],
               (double)(pr->bytes[i] - other) * 8.0 / (double)(n_q ? n_q : 1), sz,
               (unsigned long long)pr->bytes[i]);
    }
    for (size_t i = 0; i < N_BPW; i++) {
        char name[16], sz[32];
        snprintf(name, sizeof name, "%.1f bpw", bpw_rows[i]);
        const uint64_t b = (uint64_t)((double)n_q * bpw_rows[i] / 8.0) + other;
        put_size(sz, sizeof sz, b);
        printf("  %-8s %7.2f %12s %14llu\n", name, bpw_rows[i], sz, (unsigned long long)b);
    }
}

/* decode: bytes read per token against the memory bus */
static void print_decode(const struct rt_hparams *hp, const struct presets *pr)
{
    if (hp->n_expert)
        printf("\ndecode (mixture of experts: %u experts, %u routed per token; a token reads "
               "the dense tensors, %u of each expert tensor's %u slabs and one embedding row):\n",
               hp->n_expert, hp->n_expert_used, hp->n_expert_used, hp->n_expert);
    else
        printf("\ndecode (a token reads every weight once, the embedding table one row):\n");
    printf("  %-8s %12s %12s %8s  %s\n", "preset", "active", "bytes", "of file",
           "tok/s bound at 50 / 60 / 70 GB/s");
    for (size_t i = 0; i < N_PRESETS; i++) {
        if (!pr->ok[i] || !pr->active[i]) continue;
        const uint64_t a = pr->active[i];
        char sz[32];
        put_size(sz, sizeof sz, a);
        printf("  %-8s %12s %12llu %7.1f%%  %.1f / %.1f / %.1f\n", preset_names[i], sz,
               (unsigned long long)a, 100.0 * (double)a / (double)pr->bytes[i],
               50e9 / (double)a, 60e9 / (double)a, 70e9 / (double)a);
    }
}

/* The KV cache's layout (families other than llama/qwen2, where every
 * layer keeps every position). */
static void print_kv_layout(const struct rt_hparams *hp, const struct calib_mem_arch *arch,
                            uint32_t ctx)
{
    if (hp->full_attn_interval) {
        uint32_t n_rec = 0;
        for (uint32_t il = 0; il < hp->n_layer; il++) n_rec += rt_layer_is_recurrent(hp, il);
        const uint64_t conv = (uint64_t)(hp->ssm_conv_kernel ? hp->ssm_conv_kernel - 1 : 0) *
                              rt_ssm_conv_channels(hp);
        const uint64_t ssm = (uint64_t)hp->ssm_d_state * hp->ssm_d_state * hp->ssm_dt_rank;
        printf("  layout (%s): %u full-attention layers x %u kv heads x head dim %u (K and V) "
               "keep ctx positions; %u gated delta net layers keep a fixed f32 state each, "
               "whatever the context: conv %u x %llu + delta rule %u x %u x %u = %.2f MiB "
               "(%.1f MiB in all, counted in the column below)%s\n",
               hp->arch_name, hp->n_layer - n_rec, hp->n_head_kv, hp->head_dim, n_rec,
               hp->ssm_conv_kernel ? hp->ssm_conv_kernel - 1 : 0,
               (unsigned long long)rt_ssm_conv_channels(hp), hp->ssm_d_state, hp->ssm_d_state,
               hp->ssm_dt_rank, mib(4 * (conv + ssm)), mib(4 * (conv + ssm) * n_rec),
               hp->n_nextn ? "; the MTP block is not run and keeps no cache" : "");
        return;
    }
    uint32_t n_sl = 0, rows = 0;
    calib_mem_kv_layout(arch, ctx, 0, &n_sl, &rows);
    printf("  layout (%s): %u layers x %u kv heads x head dim %u (K and V)", hp->arch_name,
           hp->n_layer, hp->n_head_kv, hp->head_dim);
    if (n_sl)
        printf("; %u sliding layer%s (window %u) keep%s a ring of min(ctx, window - 1 + %u) "
               "positions (%u at ctx %u), the other %u keep%s ctx\n",
               n_sl, n_sl == 1 ? "" : "s", hp->n_swa, n_sl == 1 ? "s" : "",
               CALIB_MEM_DEFAULT_BATCH, rows, ctx, hp->n_layer - n_sl,
               hp->n_layer - n_sl == 1 ? "s" : "");
    else
        printf("; every layer keeps ctx positions%s\n",
               hp->arch == RT_ARCH_PHI3 ? " (no sliding window: llama.cpp disables Phi's)" : "");
}

/* The KV cache per context length (powers of 2 from 512, and ctx). */
static void print_kv(const struct rt_hparams *hp, const struct calib_mem_arch *arch,
                     uint32_t ctx, uint32_t threads)
{
    printf("\nKV cache (K+V = 2 * n_layer * n_ctx * n_head_kv * head_dim * bytes; f16 2 B, "
           "q8_0 34 B per 32%s):\n",
           hp->full_attn_interval ? "; full-attention layers only, plus the recurrent state" : "");
    if (hp->arch != RT_ARCH_LLAMA && hp->arch != RT_ARCH_QWEN2) print_kv_layout(hp, arch, ctx);
    printf("  %8s %12s %12s\n", "ctx", "f16", "q8_0");
    uint32_t ctxs[24];
    int n_ctx = 0;
    for (uint32_t c = 512; c <= RT_MAX_CTX && n_ctx < 20; c *= 2) {
        if (c > 4096 && c > hp->n_ctx_train && c > ctx) break;
        ctxs[n_ctx++] = c;
    }
    bool have = false;
    for (int i = 0; i < n_ctx; i++) have = have || ctxs[i] == ctx;
    if (!have) ctxs[n_ctx++] = ctx;
    for (int i = 0; i < n_ctx; i++) {
        char a[32] = "-", b[32] = "-";
        struct calib_mem mm;
        struct calib_mem_opts o = {.n_ctx = ctxs[i], .kv_type = RT_KV_F16, .n_threads = threads,
                                   .weight_type = GGUF_TYPE_Q4_K};
        if (calib_mem_estimate(arch, &o, &mm, NULL) == MW_OK) put_size(a, sizeof a, mm.kv_bytes);
        o.kv_type = RT_KV_Q8_0;
        if (calib_mem_estimate(arch, &o, &mm, NULL) == MW_OK) put_size(b, sizeof b, mm.kv_bytes);
        printf("  %8u %12s %12s%s\n", ctxs[i], a, b,
               ctxs[i] > hp->n_ctx_train ? "  (beyond the training context)" : "");
    }
}

/* One row of the fit table: device RAM r. */
static void print_fit_row(uint64_t r, const struct calib_mem *mm, uint64_t n_q, uint64_t other,
                          const struct presets *pr)
{
    const uint64_t left = calib_mem_weight_budget(r, mm);
    char dev[16], app[32], lw[32], bpw[16];
    snprintf(dev, sizeof dev, "%.4g GiB", gib(r));
    put_size(app, sizeof app, calib_mem_app_budget(r));
    put_size(lw, sizeof lw, left);
    const double maxb = left > other && n_q ? (double)(left - other) * 8.0 / (double)n_q : 0;
    if (maxb >= 16.0) snprintf(bpw, sizeof bpw, "16+");
    else snprintf(bpw, sizeof bpw, "%.2f", maxb);
    const char *best = "-";
    char list[256] = "";
    size_t used = 0;
    for (size_t k = 0; k < N_PRESETS; k++) {
        if (!pr->ok[k] || pr->bytes[k] > left) continue;
        if (best[0] == '-') best = preset_names[k];
        const int w = snprintf(list + used, sizeof list - used, "%s%s", used ? " " : "",
                               preset_names[k]);
        if (w > 0 && (size_t)w < sizeof list - used) used += (size_t)w;
    }
    /* nothing fits: a smaller context helps only where the KV cache is what
     * took the room; else the weights alone are too big for any preset */
    const char *none = mm->kv_bytes >= left / 4 ? "(nothing fits: lower --ctx or use --kv q8_0)"
                       : maxb >= 1.5 ? "(no preset fits: quant --fit-ram mixes down to max bpw)"
                                     : "(nothing fits)";
    printf("  %-7s %11s %11s %8s %9s  %s\n", dev, app, lw, bpw, best, used ? list : none);
}

/* The runtime at ctx and what fits each device tier (or --ram). */
static enum mw_status print_fits(const struct calib_mem_arch *arch, uint32_t ctx,
                                 enum rt_kv_type kv, uint32_t threads, uint64_t ram, uint64_t n_q,
                                 uint64_t other, const struct presets *pr, struct mw_err *err)
{
    struct calib_mem mm;
    const struct calib_mem_opts o = {.n_ctx = ctx, .kv_type = kv, .n_threads = threads,
                                     .weight_type = GGUF_TYPE_Q4_K};
    const enum mw_status s = calib_mem_estimate(arch, &o, &mm, err);
    if (s) return s;
    char ov[32], kvs[32];
    put_size(ov, sizeof ov, mm.overhead_bytes);
    put_size(kvs, sizeof kvs, mm.kv_bytes);
    printf("\nruntime at ctx %u, %s KV, %u threads: KV %s, overhead %s (scratch %.1f MiB + "
           "norms/biases %.1f MiB + base %.0f MiB)\n",
           ctx, rt_kv_type_name(kv), threads, kvs, ov, mib(mm.scratch_bytes), mib(mm.owned_bytes),
           mib(mm.base_bytes));
    printf("\nfits (app budget = %d%% of device RAM; weights get budget - KV - overhead):\n",
           CALIB_MEM_APP_PERCENT);
    printf("  %-7s %11s %11s %8s %9s  %s\n", "device", "app budget", "for weights", "max bpw",
           "best", "presets that fit");
    const uint64_t tiers[4] = {(uint64_t)8 << 30, (uint64_t)12 << 30, (uint64_t)16 << 30,
                               (uint64_t)24 << 30};
    const int n_tiers = ram ? 1 : 4;
    for (int i = 0; i < n_tiers; i++) print_fit_row(ram ? ram : tiers[i], &mm, n_q, other, pr);
    return MW_OK;
}

// --- gemma4: per-layer KV, shared-KV layers, the per-layer table on flash ---

static void print_g4_model(const struct calib_g4 *g, const struct model *m)
{
    uint32_t n_swa = 0;
    for (uint32_t il = 0; il < g->n_layer; il++) n_swa += g->swa[il];
    printf("       gemma4: %u sliding layers (head dim %u, window %u) and %u full layers "
           "(head dim %u); ",
           n_swa, g->head_dim_swa, g->n_swa, g->n_layer - n_swa, g->head_dim_full);
    if (g->n_kv_shared)
        printf("the last %u layers own no K/V (they read an earlier layer's)", g->n_kv_shared);
    else
        printf("every layer owns its K/V");
    if (g->n_embd_per_layer) {
        uint64_t b = 0;
        for (uint64_t i = 0; i < m->n_t; i++)
            if (calib_g4_on_flash(m->t[i].name))
                gguf_tensor_nbytes(GGUF_TYPE_F16, m->t[i].ne, &b);
        char sz[32];
        put_size(sz, sizeof sz, b);
        printf("; per-layer embeddings of %u x %u layers: per_layer_token_embd %s in F16, "
               "read one row per token from the mapped file (file bytes, not RAM)",
               g->n_embd_per_layer, g->n_layer, sz);
    }
    printf("\n");
}

static void print_g4_kv(const struct calib_g4 *g, uint32_t ctx)
{
    uint32_t own, own_swa, rows;
    const uint64_t at_ctx = calib_g4_kv_bytes(g, ctx, 0, RT_KV_F16, &own, &own_swa, &rows);
    printf("\nKV cache (K+V of the layers that own a cache: 2 * positions * the widest layer's "
           "kv heads * head dim (the runtime's row) * bytes; f16 2 B, q8_0 34 B per 32):\n");
    printf("  layout (gemma4): %u of %u layers own a cache (%u shared-KV layers none); %u "
           "sliding of them keep a ring of min(ctx, window - 1 + %u) positions (%u at ctx %u), "
           "the other %u keep ctx: %llu bytes in f16 at ctx %u\n",
           own, g->n_layer, g->n_kv_shared, own_swa, CALIB_MEM_DEFAULT_BATCH, rows, ctx,
           own - own_swa, (unsigned long long)at_ctx, ctx);
    printf("  %8s %12s %12s\n", "ctx", "f16", "q8_0");
    uint32_t ctxs[24];
    int n_ctx = 0;
    for (uint32_t c = 512; c <= RT_MAX_CTX && n_ctx < 20; c *= 2) {
        if (c > 4096 && c > g->n_ctx_train && c > ctx) break;
        ctxs[n_ctx++] = c;
    }
    bool have = false;
    for (int i = 0; i < n_ctx; i++) have = have || ctxs[i] == ctx;
    if (!have) ctxs[n_ctx++] = ctx;
    for (int i = 0; i < n_ctx; i++) {
        char a[32] = "-", b[32] = "-";
        const uint64_t f = calib_g4_kv_bytes(g, ctxs[i], 0, RT_KV_F16, NULL, NULL, NULL);
        const uint64_t q = calib_g4_kv_bytes(g, ctxs[i], 0, RT_KV_Q8_0, NULL, NULL, NULL);
        if (f) put_size(a, sizeof a, f);
        if (q) put_size(b, sizeof b, q);
        printf("  %8u %12s %12s%s\n", ctxs[i], a, b,
               ctxs[i] > g->n_ctx_train ? "  (beyond the training context)" : "");
    }
}

/* The resident set per preset at 4k and 32k context (f16 KV) and what fits
 * 4/6/8 GiB phones (with per-layer embeddings; else 8/12/16/24 GiB; or
 * --ram) at ctx: resident weights (the file's tensor data
 * minus what stays on flash) + KV + overhead. */
static enum mw_status print_g4_fits(const struct calib_g4 *g, uint32_t ctx, enum rt_kv_type kv,
                                    uint32_t threads, uint64_t ram, const struct presets *pr,
                                    struct mw_err *err)
{
    struct calib_mem m4, m32, mm;
    struct calib_mem_opts o = {.n_ctx = 4096, .kv_type = RT_KV_F16, .n_threads = threads,
                               .weight_type = GGUF_TYPE_Q4_K};
    enum mw_status s = calib_g4_mem_estimate(g, &o, &m4, err);
    o.n_ctx = 32768;
    if (s == MW_OK) s = calib_g4_mem_estimate(g, &o, &m32, err);
    o.n_ctx = ctx;
    o.kv_type = kv;
    if (s == MW_OK) s = calib_g4_mem_estimate(g, &o, &mm, err);
    if (s != MW_OK) return s;
    char ov[32], kvs[32];
    put_size(ov, sizeof ov, mm.overhead_bytes);
    put_size(kvs, sizeof kvs, mm.kv_bytes);
    printf("\nruntime at ctx %u, %s KV, %u threads: KV %s, overhead %s (scratch %.1f MiB + "
           "norms/biases %.1f MiB + base %.0f MiB)\n",
           ctx, rt_kv_type_name(kv), threads, kvs, ov, mib(mm.scratch_bytes), mib(mm.owned_bytes),
           mib(mm.base_bytes));
    printf("\nresident set (the file's tensor data minus per_layer_token_embd, which stays on "
           "flash; + f16 KV + overhead):\n");
    printf("  %-8s %12s %12s %12s %12s %12s\n", "preset", "file", "on flash", "resident",
           "RSS ctx 4k", "RSS ctx 32k");
    for (size_t i = 0; i < N_PRESETS; i++) {
        if (!pr->ok[i]) continue;
        const uint64_t res = pr->bytes[i] - pr->flash[i];
        char a[32], b[32], c[32], d[32], e[32];
        put_size(a, sizeof a, pr->bytes[i]);
        put_size(b, sizeof b, pr->flash[i]);
        put_size(c, sizeof c, res);
        put_size(d, sizeof d, res + m4.kv_bytes + m4.overhead_bytes);
        put_size(e, sizeof e, res + m32.kv_bytes + m32.overhead_bytes);
        printf("  %-8s %12s %12s %12s %12s %12s  resident %llu\n", preset_names[i], a, b, c, d,
               e, (unsigned long long)res);
    }
    printf("\nfits (app budget = %d%% of device RAM; resident weights get budget - KV - "
           "overhead; the file may be larger):\n",
           CALIB_MEM_APP_PERCENT);
    printf("  %-7s %11s %11s %9s  %s\n", "device", "app budget", "for weights", "best",
           "presets that fit");
    /* the phones E2B/E4B are made for; the 26B-A4B and 31B the usual tiers */
    const uint64_t phones[3] = {(uint64_t)4 << 30, (uint64_t)6 << 30, (uint64_t)8 << 30};
    const uint64_t tiers[4] = {(uint64_t)8 << 30, (uint64_t)12 << 30, (uint64_t)16 << 30,
                               (uint64_t)24 << 30};
    const bool ple = g->n_embd_per_layer > 0;
    for (int t = 0; t < (ram ? 1 : ple ? 3 : 4); t++) {
        const uint64_t r = ram ? ram : ple ? phones[t] : tiers[t];
        const uint64_t left = calib_mem_weight_budget(r, &mm);
        char dev[16], app[32], lw[32], list[256] = "";
        snprintf(dev, sizeof dev, "%.4g GiB", gib(r));
        put_size(app, sizeof app, calib_mem_app_budget(r));
        put_size(lw, sizeof lw, left);
        const char *best = "-";
        size_t used = 0;
        for (size_t k = 0; k < N_PRESETS; k++) {
            if (!pr->ok[k] || pr->bytes[k] - pr->flash[k] > left) continue;
            if (best[0] == '-') best = preset_names[k];
            const int w = snprintf(list + used, sizeof list - used, "%s%s", used ? " " : "",
                                   preset_names[k]);
            if (w > 0 && (size_t)w < sizeof list - used) used += (size_t)w;
        }
        printf("  %-7s %11s %11s %9s  %s\n", dev, app, lw, best,
               used ? list : "(nothing fits: lower --ctx, --kv q8_0, or quant --fit-ram)");
    }
    return MW_OK;
}

/* What `quant --corpus` needs at its defaults (method, 128 samples x 512
 * tokens, every CPU), in memory and at least (lean), on stdout; whether the
 * default memory bound of this machine (core/mw_mem.h) holds it, on stderr
 * (it changes from one run to the next: stdout stays the model's plan). */
static void print_calib_need(const struct rt_hparams *hp)
{
    const long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
    const unsigned nt = ncpu > 0 ? (unsigned)ncpu : 1;
    const uint32_t ctx = hp->n_ctx_train > 1 ? hp->n_ctx_train : 2;
    const uint32_t n_pos = (CALIB_DEFAULT_SEQ_LEN < ctx - 1 ? CALIB_DEFAULT_SEQ_LEN : ctx - 1) + 1;
    const struct quant_methods_opts mo = {.method = QUANT_METHOD_AWQ_GPTQ_ROUND, .n_threads = nt};
    const uint64_t mine = quant_methods_peak_bytes(hp, &mo);
    uint64_t peak, least;
    calib_run_need(hp, CALIB_DEFAULT_SAMPLES, n_pos, true, nt, &peak, &least);
    peak = peak > UINT64_MAX - mine ? UINT64_MAX : peak + mine;
    least = least > UINT64_MAX - mine ? UINT64_MAX : least + mine;
    char sp[32], sl[32], sm[32];
    put_size(sp, sizeof sp, peak);
    put_size(sl, sizeof sl, least);
    put_size(sm, sizeof sm, mine);
    printf("\nquant --corpus (%s, %u samples x %u positions, %u thread%s): %s in memory, at "
           "least %s %s (the method's buffers %s of each)\n",
           quant_method_name(mo.method), CALIB_DEFAULT_SAMPLES, n_pos, nt, nt == 1 ? "" : "s",
           sp, sl, hp->n_expert || hp->full_attn_interval ? "at one sample per batch" : "lean",
           sm);
    struct mw_mem_avail av;
    struct mw_err err;
    mw_err_clear(&err);
    if (mw_mem_available(NULL, &av, &err) != MW_OK) {
        fprintf(stderr, "memwall plan: this machine: %s\n", err.msg);
        return;
    }
    if (av.source == MW_MEM_SRC_NONE) {
        fprintf(stderr, "memwall plan: this machine: the memory available could not be read "
                        "(no default bound)\n");
        return;
    }
    const uint64_t b = mw_mem_bound(&av);
    char sb[32], sa[32];
    put_size(sb, sizeof sb, b);
    put_size(sa, sizeof sa, av.bytes);
    fprintf(stderr, "memwall plan: this machine: bound %s (%s available, %s, minus the margin): "
                    "%s\n", sb, sa, av.from,
           peak <= b    ? "enough, in memory"
           : least <= b ? "enough, with fewer samples per batch or lean"
                        : "NOT enough: use fewer --samples or a shorter --seq-len");
}

int cmd_plan(int argc, char **argv)
{
    const char *cmd = "plan";
    const char *path = NULL;
    uint64_t ram = 0;
    uint32_t ctx = 4096, threads = CALIB_MEM_DEFAULT_THREADS;
    enum rt_kv_type kv = RT_KV_F16;
    /* the late ones are checked in this order, after what is missing */
    const struct cmd_opt spec[] = {
        {NULL, "--ram", CMD_OPT_SIZE, .u64 = &ram, .late = true,
         .bad = "--ram: expected a size such as 16G"},
        {NULL, "--ctx", CMD_OPT_U32, .u32 = &ctx, .min = 1, .max = RT_MAX_CTX, .late = true,
         .bad = "--ctx: expected 1..%x"},
        {"-t", "--threads", CMD_OPT_U32, .u32 = &threads, .min = 1, .max = RT_MAX_THREADS,
         .late = true, .bad = "--threads: expected 1..%x"},
        {NULL, "--kv", CMD_OPT_CALL, .ctx = &kv, .call = parse_kv, .late = true,
         .bad = "--kv: expected f16 or q8_0"},
    };
    struct cmd_opts op = {CMD_OPTS_TABLE(spec), .flags = CMD_OPTS_NO_DASHDASH,
                          .pos = &path, .max_pos = 1, .too_many = "one MODEL at a time"};
    int rc = cmd_parse_args(&op, cmd, usage_text, argc, argv);
    if (rc != CMD_GO_ON) return rc;
    if (!path) return cmd_usage_error(cmd, usage_text, "missing MODEL (HF dir or GGUF file)");
    if ((rc = cmd_parse_late(&op, cmd, usage_text)) != CMD_GO_ON) return rc;

    struct mw_err err;
    mw_err_clear(&err);
    struct model m = {0};
    enum mw_status s = model_open(path, &m, &err);
    if (s == MW_OK) {
        struct calib_mem_arch arch;
        calib_mem_arch_from_hparams(&m.hp, m.n_bias, &arch);
        uint64_t n_q, other;
        split_params(&m, &n_q, &other);
        struct presets pr;
        if (m.g4) m.hp.n_ff_exp = m.g4->n_ff_exp; /* moe_intermediate_size */
        print_model(path, &m.hp, n_q, other);
        if (m.g4) print_g4_model(m.g4, &m);
        if (m.config_only)
            printf("       (config.json alone: the tensors its conversion would have%s)\n",
                   m.hp.arch == RT_ARCH_QWEN3NEXT && !m.hp.n_nextn
                       ? "; an MTP block the checkpoint may hold is not counted"
                       : "");
        print_weights(&m, n_q, other, &pr);
        print_decode(&m.hp, &pr);
        if (m.g4) {
            print_g4_kv(m.g4, ctx);
            s = print_g4_fits(m.g4, ctx, kv, threads, ram, &pr, &err);
        } else {
            print_kv(&m.hp, &arch, ctx, threads);
            s = print_fits(&arch, ctx, kv, threads, ram, n_q, other, &pr, &err);
            /* calibration does not run gpt-oss yet */
            if (s == MW_OK && m.hp.arch != RT_ARCH_GPTOSS) print_calib_need(&m.hp);
        }
    }
    model_free(&m);
    return s ? cmd_fail(cmd, &err) : cmd_finish_output(cmd, 0);
}
