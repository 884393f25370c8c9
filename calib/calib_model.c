/*
 * calib/calib_model.c — where calibration gets the model from: a Hugging
 * Face directory (through hf/: tensors mapped to GGUF names, Q/K permuted,
 * converted to f32 one at a time) or a GGUF file (through gguf/ and the
 * runtime's graph checks; any type quant/ can decode). The tokenizer is the
 * runtime's (rt_tok) in both cases: for an HF directory, hf_tok writes the
 * tokenizer.* KVs the converted GGUF would carry into a small temporary GGUF
 * file (mapped, then unlinked at once), which rt_tok_init reads.
 */
#define _XOPEN_SOURCE 700
#define _DEFAULT_SOURCE /* madvise */
#include "calib/calib_int.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/mw_file.h"
#include "hf/hf.h"
#include "hf/hf_tok.h"
#include "quant/quant.h"

struct calib_model {
    char *path;
    bool is_gguf;
    struct rt_hparams hp;
    /* HF */
    struct hf_model *hf;
    struct hf_plan *plan;
    /* GGUF */
    struct gguf_file *gf;
    struct rt_model *rm;
    /* tokenizer (both): tok_gguf is the temporary tokenizer file (HF) */
    struct gguf_file *tok_gguf;
    struct rt_tok *tok;
    /* plan / file index of every slot of every layer, -1 if absent */
    int64_t (*idx)[CALIB_T_COUNT];
    int64_t idx_embd, idx_rope_freqs, idx_rope_long, idx_rope_short;
    int64_t idx_ple[3]; /* gemma4: per_layer_token_embd, _model_proj, _proj_norm */
};

static const char *const slot_names[CALIB_T_COUNT] = {
    [CALIB_T_ATTN_NORM] = "attn_norm.weight", [CALIB_T_FFN_NORM] = "ffn_norm.weight",
    [CALIB_T_WQ] = "attn_q.weight",           [CALIB_T_WK] = "attn_k.weight",
    [CALIB_T_WV] = "attn_v.weight",           [CALIB_T_WO] = "attn_output.weight",
    [CALIB_T_WGATE] = "ffn_gate.weight",      [CALIB_T_WUP] = "ffn_up.weight",
    [CALIB_T_WDOWN] = "ffn_down.weight",      [CALIB_T_BQ] = "attn_q.bias",
    [CALIB_T_BK] = "attn_k.bias",             [CALIB_T_BV] = "attn_v.bias",
    [CALIB_T_BO] = "attn_output.bias",        [CALIB_T_BGATE] = "ffn_gate.bias",
    [CALIB_T_BUP] = "ffn_up.bias",            [CALIB_T_BDOWN] = "ffn_down.bias",
    [CALIB_T_Q_NORM] = "attn_q_norm.weight",  [CALIB_T_K_NORM] = "attn_k_norm.weight",
    [CALIB_T_ATTN_POST_NORM] = "post_attention_norm.weight",
    [CALIB_T_FFN_POST_NORM] = "post_ffw_norm.weight",
    [CALIB_T_WQKV] = "attn_qkv.weight",
    [CALIB_T_GATE_INP] = "ffn_gate_inp.weight",
    [CALIB_T_GATE_EXPS] = "ffn_gate_exps.weight", [CALIB_T_UP_EXPS] = "ffn_up_exps.weight",
    [CALIB_T_DOWN_EXPS] = "ffn_down_exps.weight",
    [CALIB_T_GATE_INP_SHEXP] = "ffn_gate_inp_shexp.weight",
    [CALIB_T_SSM_GATE] = "attn_gate.weight",  [CALIB_T_SSM_BETA] = "ssm_beta.weight",
    [CALIB_T_SSM_ALPHA] = "ssm_alpha.weight", [CALIB_T_SSM_BA] = "ssm_ba.weight",
    [CALIB_T_SSM_OUT] = "ssm_out.weight",     [CALIB_T_SSM_CONV] = "ssm_conv1d.weight",
    [CALIB_T_SSM_DT] = "ssm_dt.bias",         [CALIB_T_SSM_A] = "ssm_a",
    [CALIB_T_SSM_NORM] = "ssm_norm.weight",
    [CALIB_T_PLE_GATE] = "inp_gate.weight",   [CALIB_T_PLE_PROJ] = "proj.weight",
    [CALIB_T_PLE_NORM] = "post_norm.weight",
    [CALIB_T_OUT_SCALE] = "layer_output_scale.weight",
    [CALIB_T_GATE_INP_S] = "ffn_gate_inp.scale", [CALIB_T_PRE_NORM_2] = "pre_ffw_norm_2.weight",
    [CALIB_T_POST_NORM_1] = "post_ffw_norm_1.weight",
    [CALIB_T_POST_NORM_2] = "post_ffw_norm_2.weight",
    [CALIB_T_DOWN_EXPS_S] = "ffn_down_exps.scale",
};
static const char *const ple_names[3] = {"per_layer_token_embd.weight",
                                         "per_layer_model_proj.weight",
                                         "per_layer_proj_norm.weight"};

/* a MoE model's dense FFN slots hold its shared expert (llama.cpp's names) */
static const char *slot_name(const struct rt_hparams *hp, enum calib_tslot t)
{
    /* qwen35 / qwen35moe / qwen3next: the FFN's norm is post_attention_norm */
    if (hp->full_attn_interval && t == CALIB_T_FFN_NORM) return "post_attention_norm.weight";
    /* gemma4: the dense MLP beside the experts keeps its names; the experts'
     * gate and up are one fused tensor */
    if (hp->n_expert && hp->arch == RT_ARCH_GEMMA4) {
        if (t == CALIB_T_UP_EXPS) return "ffn_gate_up_exps.weight";
    } else if (hp->n_expert) {
        if (t == CALIB_T_WGATE) return "ffn_gate_shexp.weight";
        if (t == CALIB_T_WUP) return "ffn_up_shexp.weight";
        if (t == CALIB_T_WDOWN) return "ffn_down_shexp.weight";
    }
    return slot_names[t];
}

void calib__tensor_name(const struct rt_hparams *hp, uint32_t il, enum calib_tslot t, char *buf,
                        size_t n)
{
    snprintf(buf, n, "blk.%u.%s", il, slot_name(hp, t));
}

uint64_t calib__slot_elems(const struct rt_hparams *hp, enum calib_tslot t)
{
    const uint64_t E = hp->n_embd, Q = (uint64_t)hp->n_head * hp->head_dim;
    const uint64_t F = hp->n_expert ? hp->n_ff_shexp : hp->n_ff; /* MoE: the shared expert */
    const uint64_t NX = hp->n_expert, FX = hp->n_ff_exp;
    const uint64_t KV = (uint64_t)hp->n_head_kv * hp->head_dim;
    switch (t) {
    case CALIB_T_ATTN_NORM:
    case CALIB_T_FFN_NORM: return E;
    case CALIB_T_WQ: return (hp->attn_out_gate ? 2 * Q : Q) * E; /* q and gate per head */
    case CALIB_T_WK:
    case CALIB_T_WV: return KV * E;
    case CALIB_T_WO: return E * Q;
    case CALIB_T_WGATE: return F * E;
    case CALIB_T_WUP: return (hp->fused_gate_up ? 2 * F : F) * E;
    case CALIB_T_WDOWN: return E * F;
    case CALIB_T_Q_NORM:
    case CALIB_T_K_NORM: return hp->head_dim;
    case CALIB_T_ATTN_POST_NORM:
    case CALIB_T_FFN_POST_NORM: return E;
    case CALIB_T_WQKV: /* phi3's q|k|v, or the delta net's conv input */
        return (hp->full_attn_interval ? rt_ssm_conv_channels(hp) : Q + 2 * KV) * E;
    case CALIB_T_SSM_GATE: return (uint64_t)hp->ssm_d_inner * E;
    case CALIB_T_SSM_BETA:
    case CALIB_T_SSM_ALPHA: return (uint64_t)hp->ssm_dt_rank * E;
    case CALIB_T_SSM_BA: return 2 * (uint64_t)hp->ssm_dt_rank * E;
    case CALIB_T_SSM_OUT: return E * hp->ssm_d_inner;
    case CALIB_T_SSM_CONV: return rt_ssm_conv_channels(hp) * hp->ssm_conv_kernel;
    case CALIB_T_SSM_DT:
    case CALIB_T_SSM_A: return hp->ssm_dt_rank;
    case CALIB_T_SSM_NORM: return hp->ssm_d_state;
    case CALIB_T_BQ: return Q;
    case CALIB_T_BK:
    case CALIB_T_BV: return KV;
    case CALIB_T_BO: return E;
    case CALIB_T_BGATE:
    case CALIB_T_BUP: return F;
    case CALIB_T_BDOWN: return E;
    case CALIB_T_GATE_INP: return NX * E;
    case CALIB_T_GATE_EXPS:
    case CALIB_T_DOWN_EXPS: return NX * FX * E;
    case CALIB_T_UP_EXPS: return (hp->arch == RT_ARCH_GEMMA4 ? 2 : 1) * NX * FX * E;
    case CALIB_T_GATE_INP_SHEXP: return E;
    case CALIB_T_PLE_GATE:
    case CALIB_T_PLE_PROJ: return (uint64_t)hp->n_embd_per_layer * E;
    case CALIB_T_PLE_NORM: return E;
    case CALIB_T_OUT_SCALE: return 1;
    case CALIB_T_GATE_INP_S:
    case CALIB_T_PRE_NORM_2:
    case CALIB_T_POST_NORM_1:
    case CALIB_T_POST_NORM_2: return E;
    case CALIB_T_DOWN_EXPS_S: return NX;
    case CALIB_T_COUNT: break;
    }
    return 0;
}

const char *calib_model_path(const struct calib_model *m) { return m->path; }
bool calib_model_is_gguf(const struct calib_model *m) { return m->is_gguf; }
const struct rt_hparams *calib_model_hparams(const struct calib_model *m) { return &m->hp; }
const struct rt_tok *calib_model_tok(const struct calib_model *m) { return m->tok; }

void calib_model_close(struct calib_model *m)
{
    if (!m) return;
    rt_tok_free(m->tok);
    gguf_close(m->tok_gguf);
    rt_model_close(m->rm);
    gguf_close(m->gf);
    hf_plan_free(m->plan);
    hf_model_close(m->hf);
    free(m->idx);
    free(m->path);
    free(m);
}

bool calib__model_has(const struct calib_model *m, uint32_t il, enum calib_tslot t)
{
    return il < m->hp.n_layer && m->idx[il][t] >= 0;
}

bool calib__model_has_rope_freqs(const struct calib_model *m) { return m->idx_rope_freqs >= 0; }
bool calib__model_has_rope_factors(const struct calib_model *m, bool long_)
{
    return (long_ ? m->idx_rope_long : m->idx_rope_short) >= 0;
}

/* Index a tensor name into the slot table. */
static void index_name(struct calib_model *m, const char *name, int64_t i)
{
    if (strcmp(name, "token_embd.weight") == 0) {
        m->idx_embd = i;
        return;
    }
    if (strcmp(name, "rope_freqs.weight") == 0) {
        m->idx_rope_freqs = i;
        return;
    }
    if (strcmp(name, "rope_factors_long.weight") == 0) {
        m->idx_rope_long = i;
        return;
    }
    if (strcmp(name, "rope_factors_short.weight") == 0) {
        m->idx_rope_short = i;
        return;
    }
    for (int k = 0; k < 3; k++)
        if (strcmp(name, ple_names[k]) == 0) {
            m->idx_ple[k] = i;
            return;
        }
    if (strncmp(name, "blk.", 4) != 0) return;
    char *end = NULL;
    errno = 0;
    const unsigned long il = strtoul(name + 4, &end, 10);
    if (errno || end == name + 4 || *end != '.' || il >= m->hp.n_layer) return;
    for (int t = 0; t < CALIB_T_COUNT; t++)
        if (strcmp(end + 1, slot_name(&m->hp, (enum calib_tslot)t)) == 0) m->idx[il][t] = i;
}

static enum mw_status build_index(struct calib_model *m, struct mw_err *err)
{
    m->idx = malloc((size_t)m->hp.n_layer * sizeof *m->idx);
    if (!m->idx) return MW_FAIL(err, MW_E_NOMEM, MW_ERR_OFF_NONE, "tensor index");
    for (uint32_t il = 0; il < m->hp.n_layer; il++)
        for (int t = 0; t < CALIB_T_COUNT; t++) m->idx[il][t] = -1;
    m->idx_embd = m->idx_rope_freqs = m->idx_rope_long = m->idx_rope_short = -1;
    m->idx_ple[0] = m->idx_ple[1] = m->idx_ple[2] = -1;
    if (m->is_gguf) {
        for (uint64_t i = 0; i < gguf_tensor_count(m->gf); i++)
            index_name(m, gguf_tensor_get(m->gf, i)->name, (int64_t)i);
    } else {
        for (uint64_t i = 0; i < hf_plan_count(m->plan); i++)
            index_name(m, hf_plan_get(m->plan, i)->name, (int64_t)i);
    }
    mw_err_set_path(err, m->path);
    if (m->idx_embd < 0)
        return MW_FAIL(err, MW_E_FORMAT, MW_ERR_OFF_NONE, "no token_embd.weight tensor");
    struct rt_hparams *hp = &m->hp;
    if (!m->is_gguf && hp->n_layer > 0) {
        /* the tensors the checkpoint has decide the layout (config.json
         * carries no such flags; the runtime decides for GGUF files) */
        const int64_t *l0 = m->idx[0];
        if (l0[CALIB_T_WQKV] >= 0 && l0[CALIB_T_WQ] < 0 && !hp->full_attn_interval)
            hp->fused_qkv = true;
        if (l0[CALIB_T_WGATE] < 0 && l0[CALIB_T_WUP] >= 0) hp->fused_gate_up = true;
        if (l0[CALIB_T_Q_NORM] >= 0 && l0[CALIB_T_K_NORM] >= 0) hp->qk_norm = true;
        if (l0[CALIB_T_ATTN_POST_NORM] >= 0 && l0[CALIB_T_FFN_POST_NORM] >= 0 &&
            !hp->full_attn_interval)
            hp->post_norms = true;
        if (hp->full_attn_interval) /* gated attention: q/k norms, the output gate */
            hp->qk_norm = hp->attn_out_gate = true;
    }
    for (uint32_t il = 0; il < m->hp.n_layer; il++)
        for (int t = 0; t < CALIB_T_COUNT; t++) {
            bool need = t <= CALIB_T_WDOWN;
            const bool moe = hp->n_expert > 0, shexp = moe && hp->n_ff_shexp > 0;
            if (moe && (t == CALIB_T_WGATE || t == CALIB_T_WUP || t == CALIB_T_WDOWN))
                need = shexp;
            if (t >= CALIB_T_GATE_INP && t <= CALIB_T_DOWN_EXPS) need = moe;
            if (t == CALIB_T_GATE_INP_SHEXP) need = shexp;
            if (hp->fused_qkv && (t == CALIB_T_WQ || t == CALIB_T_WK || t == CALIB_T_WV))
                need = false;
            if (hp->fused_gate_up && t == CALIB_T_WGATE) need = false;
            if (t == CALIB_T_WQKV) need = hp->fused_qkv;
            if (t == CALIB_T_Q_NORM || t == CALIB_T_K_NORM) need = hp->qk_norm;
            if (t == CALIB_T_ATTN_POST_NORM || t == CALIB_T_FFN_POST_NORM) need = hp->post_norms;
            if (t >= CALIB_T_SSM_GATE && t <= CALIB_T_SSM_NORM) need = false;
            if (hp->full_attn_interval) { /* a gated delta net, or gated attention */
                const bool rec = rt_layer_is_recurrent(hp, il);
                const bool attn = t == CALIB_T_WQ || t == CALIB_T_WK || t == CALIB_T_WV ||
                                  t == CALIB_T_WO || t == CALIB_T_Q_NORM || t == CALIB_T_K_NORM;
                const bool ba = hp->arch == RT_ARCH_QWEN3NEXT;
                if (attn) need = !rec;
                if (t == CALIB_T_WQKV) need = rec;
                if (t >= CALIB_T_SSM_GATE && t <= CALIB_T_SSM_NORM)
                    need = rec && (ba ? t != CALIB_T_SSM_BETA && t != CALIB_T_SSM_ALPHA
                                      : t != CALIB_T_SSM_BA);
                if (t >= CALIB_T_BQ && t <= CALIB_T_BO && rec) { /* no attention biases */
                    m->idx[il][t] = -1;
                    continue;
                }
            }
            if (hp->arch == RT_ARCH_GEMMA4) { /* shared-KV layers: no k, v, k_norm */
                if (t == CALIB_T_OUT_SCALE) continue; /* optional: 1 when absent */
                if (t == CALIB_T_WK || t == CALIB_T_K_NORM) need = rt_layer_has_kv(hp, il);
                if (t == CALIB_T_WV) { /* absent (attention_k_eq_v): v is wk's raw output */
                    if (!rt_layer_has_kv(hp, il)) m->idx[il][t] = -1;
                    continue;
                }
                if (t >= CALIB_T_PLE_GATE && t <= CALIB_T_PLE_NORM)
                    need = hp->n_embd_per_layer > 0;
                /* with experts: the fused gate_up, the MoE norms and scales */
                if (t == CALIB_T_GATE_EXPS || t == CALIB_T_GATE_INP_SHEXP) need = false;
                if (t >= CALIB_T_GATE_INP_S && t <= CALIB_T_POST_NORM_2) need = moe;
                if (t == CALIB_T_DOWN_EXPS_S) { /* optional: 1 when absent */
                    if (!moe) m->idx[il][t] = -1;
                    continue;
                }
            } else if (t >= CALIB_T_GATE_INP_S) {
                need = false;
            }
            const bool bias = t >= CALIB_T_BQ && t <= CALIB_T_BDOWN;
            if (!need && !bias) {
                m->idx[il][t] = -1; /* not part of the family's graph: never read */
                continue;
            }
            if (bias) {
                /* fused tensors carry no separate biases here; nor do MoE FFNs */
                if (hp->n_expert && t >= CALIB_T_BGATE) m->idx[il][t] = -1;
                if ((hp->fused_qkv && t <= CALIB_T_BV) ||
                    (hp->fused_gate_up && (t == CALIB_T_BGATE || t == CALIB_T_BUP)))
                    m->idx[il][t] = -1;
                continue;
            }
            if (m->idx[il][t] < 0) {
                char nm[96];
                calib__tensor_name(hp, il, (enum calib_tslot)t, nm, sizeof nm);
                mw_err_set_where(err, "tensor '%s'", nm);
                return MW_FAIL(err, MW_E_FORMAT, MW_ERR_OFF_NONE, "missing");
            }
        }
    for (int k = 0; k < 3 && hp->arch == RT_ARCH_GEMMA4 && hp->n_embd_per_layer; k++)
        if (m->idx_ple[k] < 0) {
            mw_err_set_where(err, "tensor '%s'", ple_names[k]);
            return MW_FAIL(err, MW_E_FORMAT, MW_ERR_OFF_NONE, "missing");
        }
    mw_err_set_path(err, "");
    return MW_OK;
}

// --- tokenizer through a temporary GGUF (HF directories) ---

static enum mw_status tok_from_hf(struct calib_model *m, const struct hf_config *cfg,
                                  struct mw_err *err)
{
    struct hf_tok *ht = NULL;
    struct gguf_writer *w = NULL;
    enum mw_status s = hf_tok_load_n(m->path, (int64_t)cfg->n_vocab, &ht, err);
    if (s) return s;
    if (hf_tok_n_vocab(ht) != m->hp.n_vocab) {
        mw_err_set_path(err, m->path);
        s = MW_FAIL(err, MW_E_FORMAT, MW_ERR_OFF_NONE,
                    "the tokenizer has %u tokens, the embedding %u rows", hf_tok_n_vocab(ht),
                    m->hp.n_vocab);
        goto done;
    }
    if ((s = gguf_writer_init(&w, err))) goto done;
    if ((s = gguf_writer_set_checksums(w, false, err))) goto done;
    if ((s = gguf_writer_set_str(w, "general.architecture", cfg->gguf_arch, err))) goto done;
    if ((s = hf_tok_write_gguf(ht, w, hf_arch_name(cfg->arch), err))) goto done;

    const char *tmp = getenv("TMPDIR");
    if (!tmp || !*tmp) tmp = "/tmp";
    char dir[4096];
    if (snprintf(dir, sizeof dir, "%s/memwall-calib-XXXXXX", tmp) >= (int)sizeof dir) {
        s = MW_FAIL(err, MW_E_IO, MW_ERR_OFF_NONE, "TMPDIR path too long");
        goto done;
    }
    if (!mkdtemp(dir)) {
        mw_err_set_path(err, dir);
        s = MW_FAIL(err, MW_E_IO, MW_ERR_OFF_NONE,
                    "cannot create a temporary directory for the tokenizer: %s", strerror(errno));
        goto done;
    }
    char file[4200];
    snprintf(file, sizeof file, "%s/tokenizer.gguf", dir);
    s = gguf_writer_open(w, file, err);
    if (!s) s = gguf_writer_finish(w, err);
    gguf_writer_free(w);
    w = NULL;
    if (!s) s = gguf_open(file, GGUF_OPEN_DEFAULT, &m->tok_gguf, err);
    unlink(file); /* the mapping stays valid */
    rmdir(dir);
    if (s) goto done;
    s = rt_tok_init(m->tok_gguf, m->hp.n_vocab, &m->tok, err);
done:
    gguf_writer_free(w);
    hf_tok_free(ht);
    return s;
}

// --- open ---

/* What the forward does not run yet, refused as soon as the hyperparameters
 * name it (before the tensor index, which expects the layers calib knows):
 * gpt-oss (attention sinks, biased experts with the clamped SwiGLU, no
 * ffn_norm). */
static enum mw_status refuse_arch(const struct calib_model *m, struct mw_err *err)
{
    const char *a = m->hp.arch_name, *what = NULL;
    if (strcmp(a, "gpt-oss") == 0) what = a;
    if (!what) return MW_OK;
    mw_err_set_path(err, m->path);
    return MW_FAIL(err, MW_E_UNSUPPORTED, MW_ERR_OFF_NONE,
                   "calibration does not run %s yet: use an imatrix from llama-imatrix "
                   "(--imatrix), or no --corpus", what);
}

static enum mw_status open_hf(struct calib_model *m, struct mw_err *err)
{
    enum mw_status s = hf_model_open(m->path, &m->hf, err);
    if (s) return s;
    const struct hf_config *c = hf_model_config(m->hf);
    struct rt_hparams *hp = &m->hp;
    calib_hparams_from_hf(c, hp, NULL);
    if ((s = refuse_arch(m, err))) return s;
    if ((s = hf_plan_build(m->hf, HF_OUT_F32, &m->plan, err))) return s;
    const char *base = strrchr(m->path, '/');
    snprintf(hp->name, sizeof hp->name, "%s", base && base[1] ? base + 1 : m->path);
    mw_err_set_path(err, m->path);
    /* a MoE config may leave intermediate_size out (qwen35moe): the experts' widths count */
    if (hp->n_layer == 0 || hp->n_embd == 0 || hp->n_head == 0 || hp->n_head_kv == 0 ||
        hp->head_dim == 0 || (hp->n_ff == 0 && hp->n_expert == 0) ||
        hp->n_head % hp->n_head_kv != 0 ||
        hp->head_dim % 2 != 0)
        return MW_FAIL(err, MW_E_FORMAT, MW_ERR_OFF_NONE,
                       "config.json: inconsistent sizes (layers %u, hidden %u, heads %u/%u, "
                       "head_dim %u, intermediate %u)",
                       hp->n_layer, hp->n_embd, hp->n_head, hp->n_head_kv, hp->head_dim, hp->n_ff);
    if ((s = build_index(m, err))) return s;
    const struct hf_plan_tensor *te = hf_plan_get(m->plan, (uint64_t)m->idx_embd);
    if (te->ne[0] != hp->n_embd || te->ne[1] > UINT32_MAX)
        return MW_FAIL(err, MW_E_FORMAT, MW_ERR_OFF_NONE, "token_embd.weight: bad shape");
    hp->n_vocab = (uint32_t)te->ne[1];
    hp->has_rope_freqs = m->idx_rope_freqs >= 0;
    hp->has_rope_long = m->idx_rope_long >= 0 && m->idx_rope_short >= 0;
    /* the plan checked every shape against config.json; biases too */
    return tok_from_hf(m, c, err);
}

static enum mw_status open_gguf(struct calib_model *m, struct mw_err *err)
{
    enum mw_status s = gguf_open(m->path, GGUF_OPEN_DEFAULT, &m->gf, err);
    if (s) return s;
    if ((s = rt_model_from_gguf(m->gf, &m->rm, err))) return s;
    m->hp = *rt_model_hparams(m->rm);
    if ((s = refuse_arch(m, err))) return s;
    if ((s = build_index(m, err))) return s;
    /* the runtime checked shapes; make sure every tensor we read decodes */
    mw_err_set_path(err, m->path);
    for (uint64_t i = 0; i < gguf_tensor_count(m->gf); i++) {
        const struct gguf_tensor *t = gguf_tensor_get(m->gf, i);
        const struct quant_traits *qt = quant_traits_get(t->type);
        if (!qt || !qt->to_float) {
            bool used = (int64_t)i == m->idx_embd || (int64_t)i == m->idx_rope_freqs;
            for (uint32_t il = 0; il < m->hp.n_layer && !used; il++)
                for (int k = 0; k < CALIB_T_COUNT; k++) used = used || m->idx[il][k] == (int64_t)i;
            if (used) {
                mw_err_set_where(err, "tensor '%s'", t->name);
                return MW_FAIL(err, MW_E_UNSUPPORTED, t->file_off,
                               "type %u cannot be decoded for calibration", t->type);
            }
        }
    }
    mw_err_set_path(err, "");
    return rt_tok_init(m->gf, m->hp.n_vocab, &m->tok, err);
}

enum mw_status calib_model_open(const char *path, struct calib_model **out, struct mw_err *err)
{
    *out = NULL;
    struct calib_model *m = calloc(1, sizeof *m);
    if (!m || !(m->path = strdup(path))) {
        free(m);
        return MW_FAIL(err, MW_E_NOMEM, MW_ERR_OFF_NONE, "model");
    }
    struct stat st;
    if (stat(path, &st) != 0) {
        mw_err_set_path(err, path);
        const int e = errno;
        calib_model_close(m);
        return MW_FAIL(err, e == ENOENT ? MW_E_FORMAT : MW_E_IO, MW_ERR_OFF_NONE, "%s",
                       e == ENOENT ? "does not exist" : strerror(e));
    }
    m->is_gguf = !S_ISDIR(st.st_mode);
    enum mw_status s = m->is_gguf ? open_gguf(m, err) : open_hf(m, err);
    if (s) {
        calib_model_close(m);
        return s;
    }
    *out = m;
    return MW_OK;
}

// --- weights as f32 ---

struct f32_sink {
    float *dst;
    uint64_t n_bytes, pos;
};

static enum mw_status copy_sink(void *ud, const void *data, size_t n, struct mw_err *err)
{
    struct f32_sink *k = ud;
    if (n > k->n_bytes - k->pos)
        return MW_FAIL(err, MW_E_FORMAT, MW_ERR_OFF_NONE, "tensor larger than expected");
    memcpy((uint8_t *)k->dst + k->pos, data, n);
    k->pos += n;
    return MW_OK;
}

static enum mw_status load_index(const struct calib_model *m, int64_t i, float *dst, uint64_t n,
                                 struct mw_err *err)
{
    if (m->is_gguf) {
        const struct gguf_tensor *t = gguf_tensor_get(m->gf, (uint64_t)i);
        const uint64_t ne = t->ne[0] * t->ne[1] * t->ne[2] * t->ne[3];
        const struct quant_traits *qt = quant_traits_get(t->type);
        if (ne != n || !qt || !qt->to_float) {
            mw_err_set_path(err, m->path);
            mw_err_set_where(err, "tensor '%s'", t->name);
            return MW_FAIL(err, MW_E_FORMAT, t->file_off, "%llu elements, expected %llu",
                           (unsigned long long)ne, (unsigned long long)n);
        }
        /* row by row keeps the to_float calls within one row's blocks */
        const uint64_t rows = ne / t->ne[0], rb = t->nbytes / rows;
        const uint8_t *p = gguf_tensor_data(m->gf, (uint64_t)i);
        for (uint64_t r = 0; r < rows; r++) qt->to_float(p + r * rb, dst + r * t->ne[0], t->ne[0]);
        /* the layer's weights are now f32 copies: drop the mapped source
         * pages, so that the resident set holds one layer at a time, not
         * every layer read so far */
        mw_map_drop(gguf_base(m->gf), gguf_file_size(m->gf), t->file_off,
                    t->file_off + t->nbytes);
        return MW_OK;
    }
    const struct hf_plan_tensor *pt = hf_plan_get(m->plan, (uint64_t)i);
    uint64_t ne = 1;
    for (uint32_t d = 0; d < pt->n_dims; d++) ne *= pt->ne[d];
    if (ne != n || pt->type != GGUF_TYPE_F32 || pt->nbytes != n * sizeof(float)) {
        mw_err_set_path(err, m->path);
        mw_err_set_where(err, "tensor '%s'", pt->name);
        return MW_FAIL(err, MW_E_FORMAT, MW_ERR_OFF_NONE, "%llu elements, expected %llu",
                       (unsigned long long)ne, (unsigned long long)n);
    }
    struct f32_sink k = {.dst = dst, .n_bytes = n * sizeof(float), .pos = 0};
    enum mw_status s = hf_plan_stream_tensor(m->plan, (uint64_t)i, 0, copy_sink, &k, err);
    if (!s && k.pos != k.n_bytes)
        s = MW_FAIL(err, MW_E_FORMAT, MW_ERR_OFF_NONE, "tensor '%s' shorter than expected",
                    pt->name);
    return s;
}

enum mw_status calib__model_load(const struct calib_model *m, uint32_t il, enum calib_tslot t,
                                 float *dst, uint64_t n, struct mw_err *err)
{
    if (!calib__model_has(m, il, t)) {
        char nm[96];
        calib__tensor_name(&m->hp, il, t, nm, sizeof nm);
        mw_err_set_path(err, m->path);
        mw_err_set_where(err, "tensor '%s'", nm);
        return MW_FAIL(err, MW_E_FORMAT, MW_ERR_OFF_NONE, "missing");
    }
    return load_index(m, m->idx[il][t], dst, n, err);
}

enum mw_status calib__model_rope_freqs(const struct calib_model *m, float *dst,
                                       struct mw_err *err)
{
    return load_index(m, m->idx_rope_freqs, dst, m->hp.n_rot / 2, err);
}

enum mw_status calib__model_rope_factors(const struct calib_model *m, bool long_, float *dst,
                                         struct mw_err *err)
{
    const int64_t i = long_ ? m->idx_rope_long : m->idx_rope_short;
    if (i < 0) {
        mw_err_set_path(err, m->path);
        return MW_FAIL(err, MW_E_FORMAT, MW_ERR_OFF_NONE, "no %s tensor",
                       long_ ? "rope_factors_long.weight" : "rope_factors_short.weight");
    }
    return load_index(m, i, dst, m->hp.n_rot / 2, err);
}

uint64_t calib__model_slot_rows(const struct calib_model *m, uint32_t il, enum calib_tslot t)
{
    if (!calib__model_has(m, il, t)) return 0;
    if (m->is_gguf) return gguf_tensor_get(m->gf, (uint64_t)m->idx[il][t])->ne[1];
    const struct hf_plan_tensor *pt = hf_plan_get(m->plan, (uint64_t)m->idx[il][t]);
    return pt->n_dims > 1 ? pt->ne[1] : 1;
}

enum mw_status calib__model_ple_load(const struct calib_model *m, int k, float *dst, uint64_t n,
                                     struct mw_err *err)
{
    if (k < 1 || k > 2 || m->idx_ple[k] < 0) {
        mw_err_set_path(err, m->path);
        mw_err_set_where(err, "tensor '%s'", ple_names[k == 2 ? 2 : 1]);
        return MW_FAIL(err, MW_E_FORMAT, MW_ERR_OFF_NONE, "missing");
    }
    return load_index(m, m->idx_ple[k], dst, n, err);
}


/* The embedding streamed once; rows whose id is wanted are copied out. */
struct embd_sink {
    const int32_t *ids;
    uint64_t n_ids, next;  /* next wanted id index */
    float *dst;
    uint64_t row_bytes, pos;
};

static enum mw_status embd_sink_fn(void *ud, const void *data, size_t n, struct mw_err *err)
{
    struct embd_sink *k = ud;
    const uint8_t *p = data;
    (void)err;
    while (n > 0 && k->next < k->n_ids) {
        const uint64_t row = k->pos / k->row_bytes, in_row = k->pos % k->row_bytes;
        const uint64_t take_max = k->row_bytes - in_row;
        const size_t take = n < take_max ? n : (size_t)take_max;
        if ((uint64_t)k->ids[k->next] == row) {
            memcpy((uint8_t *)(k->dst + k->next * (k->row_bytes / sizeof(float))) + in_row, p,
                   take);
            if (in_row + take == k->row_bytes) k->next++;
        }
        k->pos += take;
        p += take;
        n -= take;
    }
    return MW_OK;
}

enum mw_status calib__model_embd_rows(const struct calib_model *m, const int32_t *ids,
                                      uint64_t n_rows, float *dst, struct mw_err *err)
{
    const uint64_t E = m->hp.n_embd;
    if (m->is_gguf) {
        const struct gguf_tensor *t = gguf_tensor_get(m->gf, (uint64_t)m->idx_embd);
        const struct quant_traits *qt = quant_traits_get(t->type);
        const uint64_t rb = t->nbytes / t->ne[1];
        const uint8_t *p = gguf_tensor_data(m->gf, (uint64_t)m->idx_embd);
        for (uint64_t i = 0; i < n_rows; i++)
            qt->to_float(p + (uint64_t)ids[i] * rb, dst + i * E, E);
        return MW_OK;
    }
    struct embd_sink k = {.ids = ids, .n_ids = n_rows, .dst = dst, .row_bytes = E * sizeof(float)};
    return hf_plan_stream_tensor(m->plan, (uint64_t)m->idx_embd, 0, embd_sink_fn, &k, err);
}

enum mw_status calib__model_ple_rows(const struct calib_model *m, const int32_t *ids,
                                     uint64_t n_rows, float *dst, struct mw_err *err)
{
    const uint64_t LP = (uint64_t)m->hp.n_embd_per_layer * m->hp.n_layer;
    if (m->idx_ple[0] < 0) {
        mw_err_set_path(err, m->path);
        mw_err_set_where(err, "tensor '%s'", ple_names[0]);
        return MW_FAIL(err, MW_E_FORMAT, MW_ERR_OFF_NONE, "missing");
    }
    if (!m->is_gguf) { /* streamed once, as token_embd */
        struct embd_sink k = {.ids = ids, .n_ids = n_rows, .dst = dst,
                              .row_bytes = LP * sizeof(float)};
        return hf_plan_stream_tensor(m->plan, (uint64_t)m->idx_ple[0], 0, embd_sink_fn, &k, err);
    }
    const struct gguf_tensor *t = gguf_tensor_get(m->gf, (uint64_t)m->idx_ple[0]);
    const struct quant_traits *qt = quant_traits_get(t->type);
    if (t->ne[0] != LP || t->ne[1] < m->hp.n_vocab || !qt || !qt->to_float) {
        mw_err_set_path(err, m->path);
        mw_err_set_where(err, "tensor '%s'", ple_names[0]);
        return MW_FAIL(err, MW_E_FORMAT, t->file_off, "expected %llu x %u decodable values",
                       (unsigned long long)LP, m->hp.n_vocab);
    }
    const uint64_t rb = t->nbytes / t->ne[1];
    const uint8_t *p = gguf_tensor_data(m->gf, (uint64_t)m->idx_ple[0]);
    for (uint64_t i = 0; i < n_rows; i++) qt->to_float(p + (uint64_t)ids[i] * rb, dst + i * LP, LP);
    return MW_OK;
}
