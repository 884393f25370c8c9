/*
 * tests/tools/rt_fixture.c — tiny models and their hostile variants for the
 * runtime's tests (rt_fixture.h).
 */
#include "rt_fixture.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gguf/gguf.h"
#include "quant/quant.h"

static const struct rt_fx_defect_info infos[RT_FX_DEFECT_COUNT] = {
#define RT_FX__INFO(name, code, where) {#name, code, where},
    RT_FX_DEFECTS(RT_FX__INFO)
#undef RT_FX__INFO
};

const struct rt_fx_defect_info *rt_fx_defect_get(enum rt_fx_defect d)
{
    return (unsigned)d < RT_FX_DEFECT_COUNT ? &infos[d] : NULL;
}

void rt_fx_default(struct rt_fx_spec *s)
{
    *s = (struct rt_fx_spec){.arch = "llama", .n_embd = 64, .n_ff = 128, .n_layer = 2,
                             .n_head = 2, .n_head_kv = 1, .n_ctx_train = 128,
                             .wtype = GGUF_TYPE_F16, .checksums = true, .seed = 1};
}

// --- random numbers (xorshift64*) ---

static uint64_t rnd(uint64_t *s)
{
    *s ^= *s >> 12;
    *s ^= *s << 25;
    *s ^= *s >> 27;
    return *s * 0x2545F4914F6CDD1DULL;
}
/* uniform in [-a, a) */
static float uni(uint64_t *s, float a)
{
    return a * ((float)(rnd(s) >> 40) / (float)(1u << 23) - 1.0f);
}

// --- vocabularies ---

/* SentencePiece pieces after the 3 control and 256 byte tokens; score -i */
static const char *const spm_pieces[] = {
    "\xe2\x96\x81", "e", "t", "a", "o", "n", "i", "s", "r", "h", "l", "d", "u", "c", "m", "w",
    "f", "g", "y", "p", "b", "v", "k", ",", ".", "T", "I", "A", "\xe2\x96\x81" "t", "he",
    "\xe2\x96\x81" "the", "\xe2\x96\x81" "a", "in", "an", "\xe2\x96\x81" "and", "er", "on", "re",
    "\xe2\x96\x81" "w", "\xe2\x96\x81" "s", "or", "en", "\xe2\x96\x81" "o", "at", "nd", "ed",
    "\xe2\x96\x81" "h", "is", "it", "ou", "\xe2\x96\x81" "i", "ing", "\xe2\x96\x81" "b", "\xe2\x96\x81" "c",
    "\xe2\x96\x81" "m", "\xe2\x96\x81" "f", "\xe2\x96\x81" "was", "as", "\xe2\x96\x81" "of", "\xe2\x96\x81" "to",
    "ar", "\xe2\x96\x81" "T", "\xe2\x96\x81" "It", "\xe2\x96\x81" "d",
};
#define N_SPM_PIECES (sizeof spm_pieces / sizeof spm_pieces[0])

/* byte-level BPE merges (GPT-2 spelling: \xc4\xa0 is U+0120 "Ġ", a space) */
static const char *const bpe_merges[] = {
    "\xc4\xa0 t", "h e", "\xc4\xa0" "t he", "\xc4\xa0 a", "i n", "a n", "\xc4\xa0" "a nd", "e r",
    "o n", "r e", "\xc4\xa0 w", "\xc4\xa0 s", "o r", "e n", "\xc4\xa0 o", "a t", "n d",
    "e d", "i s", "i t", "o u", "\xc4\xa0 i", "in g", "\xc4\xa0" "w as", "a s", "\xc4\xa0 I",
    "\xc4\xa0 T", "\xc4\xa0" "I t",
};
#define N_BPE_MERGES (sizeof bpe_merges / sizeof bpe_merges[0])

struct vocab {
    char **text;
    float *score;
    int32_t *type;
    uint32_t n;
    char **merges;
    uint32_t n_merges;
};

static void vocab_free(struct vocab *v)
{
    if (v->text)
        for (uint32_t i = 0; i < v->n; i++) free(v->text[i]);
    if (v->merges)
        for (uint32_t i = 0; i < v->n_merges; i++) free(v->merges[i]);
    free(v->text);
    free(v->score);
    free(v->type);
    free(v->merges);
}

static char *dup(const char *s)
{
    const size_t n = strlen(s) + 1;
    char *p = malloc(n);
    if (p) memcpy(p, s, n);
    return p;
}

static bool vocab_spm(struct vocab *v)
{
    v->n = 3 + 256 + (uint32_t)N_SPM_PIECES;
    v->text = calloc(v->n, sizeof *v->text);
    v->score = calloc(v->n, sizeof *v->score);
    v->type = calloc(v->n, sizeof *v->type);
    if (!v->text || !v->score || !v->type) return false;
    const char *ctl[3] = {"<unk>", "<s>", "</s>"};
    for (uint32_t i = 0; i < 3; i++) {
        v->text[i] = dup(ctl[i]);
        v->score[i] = 0.0f;
        v->type[i] = i == 0 ? 2 : 3;
    }
    for (uint32_t b = 0; b < 256; b++) {
        char nm[8];
        snprintf(nm, sizeof nm, "<0x%02X>", b);
        v->text[3 + b] = dup(nm);
        v->type[3 + b] = 6;
    }
    for (uint32_t i = 0; i < N_SPM_PIECES; i++) {
        v->text[259 + i] = dup(spm_pieces[i]);
        v->score[259 + i] = -(float)i;
        v->type[259 + i] = 1;
    }
    for (uint32_t i = 0; i < v->n; i++)
        if (!v->text[i]) return false;
    return true;
}

static size_t put_utf8(uint32_t cp, char *o)
{
    if (cp < 0x80) {
        o[0] = (char)cp;
        return 1;
    }
    o[0] = (char)(0xc0 | (cp >> 6));
    o[1] = (char)(0x80 | (cp & 0x3f));
    return 2;
}

static uint32_t byte_cp(uint32_t b)
{
    if ((b >= 33 && b <= 126) || (b >= 161 && b <= 172) || b >= 174) return b;
    uint32_t n = 0;
    for (uint32_t x = 0; x < b; x++)
        if (!((x >= 33 && x <= 126) || (x >= 161 && x <= 172) || x >= 174)) n++;
    return 256 + n;
}

static bool vocab_bpe(struct vocab *v, bool with_merges)
{
    /* 256 byte characters, the merge results, then two control tokens */
    v->n = 256 + (uint32_t)N_BPE_MERGES + 2;
    v->text = calloc(v->n, sizeof *v->text);
    v->score = calloc(v->n, sizeof *v->score);
    v->type = calloc(v->n, sizeof *v->type);
    if (!v->text || !v->score || !v->type) return false;
    for (uint32_t b = 0; b < 256; b++) {
        char s[4] = {0};
        put_utf8(byte_cp(b), s);
        v->text[b] = dup(s);
        v->type[b] = 1;
    }
    for (uint32_t i = 0; i < N_BPE_MERGES; i++) {
        const char *m = bpe_merges[i];
        const char *sp = strchr(m + 1, ' ');
        char s[32];
        snprintf(s, sizeof s, "%.*s%s", (int)(sp - m), m, sp + 1);
        v->text[256 + i] = dup(s);
        v->type[256 + i] = 1;
    }
    v->text[v->n - 2] = dup("<|endoftext|>");
    v->type[v->n - 2] = 3;
    v->text[v->n - 1] = dup("<|im_end|>");
    v->type[v->n - 1] = 3;
    for (uint32_t i = 0; i < v->n; i++)
        if (!v->text[i]) return false;
    if (with_merges) {
        v->n_merges = (uint32_t)N_BPE_MERGES;
        v->merges = calloc(v->n_merges, sizeof *v->merges);
        if (!v->merges) return false;
        for (uint32_t i = 0; i < v->n_merges; i++)
            if (!(v->merges[i] = dup(bpe_merges[i]))) return false;
    }
    return true;
}

// --- the model ---

struct tdesc {
    char name[64];
    uint32_t type;
    uint32_t n_dims;
    uint64_t ne[4];
    int kind; /* 0 matrix, 1 norm (around 1), 2 bias / small vector, 3 rope freqs,
               * 8 q/k norm (around qk_gain) */
};

#define MAX_T 1024

static void add_t(struct tdesc *t, int *n, const char *name, uint32_t type, uint32_t n_dims,
                  uint64_t ne0, uint64_t ne1, uint64_t ne2, int kind)
{
    if (*n >= MAX_T) return;
    struct tdesc *d = &t[(*n)++];
    snprintf(d->name, sizeof d->name, "%s", name);
    d->type = type;
    d->n_dims = n_dims;
    d->ne[0] = ne0, d->ne[1] = ne1, d->ne[2] = ne2, d->ne[3] = 1;
    d->kind = kind;
}

/* The sizes of a gated delta net fixture. */
struct hyb {
    bool moe, next, mtp;
    uint32_t E, F, FE, FS, NE, hd, qdim, kvdim, S, Hk, Hv, CH, DI, K, interval, n_layer;
};

/* One block of a qwen35 / qwen35moe / qwen3next fixture: a recurrent layer,
 * a full-attention layer, or (mtp) the next-token-prediction block. */
static void add_hybrid_block(struct tdesc *t, int *n, const struct hyb *h, uint32_t il, bool rec,
                             uint32_t wt, enum rt_fx_defect d)
{
    char nm[64];
#define NM(x) (snprintf(nm, sizeof nm, "blk.%u." x, il), nm)
    add_t(t, n, NM("attn_norm.weight"), GGUF_TYPE_F32, 1, h->E, 1, 1, 1);
    add_t(t, n, NM("post_attention_norm.weight"), GGUF_TYPE_F32, 1, h->E, 1, 1, 1);
    if (rec) {
        add_t(t, n, NM("attn_qkv.weight"), wt, 2, h->E, h->CH, 1, 0);
        add_t(t, n, NM("attn_gate.weight"), wt, 2, h->E, h->DI, 1, 0);
        add_t(t, n, NM("ssm_conv1d.weight"), GGUF_TYPE_F32, 2,
              h->K + (d == RT_FX_SSM_CONV_KERNEL ? 1 : 0), h->CH, 1, 6);
        add_t(t, n, NM("ssm_dt.bias"), GGUF_TYPE_F32, 1, h->Hv, 1, 1, 2);
        add_t(t, n, NM("ssm_a"), GGUF_TYPE_F32, 1, h->Hv, 1, 1, 7);
        if (h->next) {
            add_t(t, n, NM("ssm_ba.weight"), wt, 2, h->E, 2 * h->Hv, 1, 0);
        } else {
            add_t(t, n, NM("ssm_beta.weight"), wt, 2, h->E, h->Hv, 1, 0);
            if (!(d == RT_FX_SSM_NO_ALPHA && il == 1))
                add_t(t, n, NM("ssm_alpha.weight"), wt, 2, h->E, h->Hv, 1, 0);
        }
        add_t(t, n, NM("ssm_norm.weight"), GGUF_TYPE_F32, 1, h->S, 1, 1, 1);
        add_t(t, n, NM("ssm_out.weight"), wt, 2, h->DI, h->E, 1, 0);
    } else {
        add_t(t, n, NM("attn_q.weight"), wt, 2, h->E,
              d == RT_FX_SSM_GATE_ROWS ? h->qdim : 2 * h->qdim, 1, 0);
        add_t(t, n, NM("attn_k.weight"), wt, 2, h->E, h->kvdim, 1, 0);
        add_t(t, n, NM("attn_v.weight"), wt, 2, h->E, h->kvdim, 1, 0);
        add_t(t, n, NM("attn_output.weight"), wt, 2, h->qdim, h->E, 1, 0);
        add_t(t, n, NM("attn_q_norm.weight"), GGUF_TYPE_F32, 1, h->hd, 1, 1, 1);
        add_t(t, n, NM("attn_k_norm.weight"), GGUF_TYPE_F32, 1, h->hd, 1, 1, 1);
    }
    if (h->moe) {
        add_t(t, n, NM("ffn_gate_inp.weight"), GGUF_TYPE_F32, 2, h->E, h->NE, 1, 5);
        add_t(t, n, NM("ffn_gate_exps.weight"), wt, 3, h->E, h->FE, h->NE, 0);
        add_t(t, n, NM("ffn_up_exps.weight"), wt, 3, h->E, h->FE, h->NE, 0);
        add_t(t, n, NM("ffn_down_exps.weight"), wt, 3, h->FE, h->E, h->NE, 0);
        add_t(t, n, NM("ffn_gate_inp_shexp.weight"), GGUF_TYPE_F32, 1, h->E, 1, 1, 5);
        add_t(t, n, NM("ffn_gate_shexp.weight"), wt, 2, h->E, h->FS, 1, 0);
        add_t(t, n, NM("ffn_up_shexp.weight"), wt, 2, h->E, h->FS, 1, 0);
        add_t(t, n, NM("ffn_down_shexp.weight"), wt, 2, h->FS, h->E, 1, 0);
    } else {
        add_t(t, n, NM("ffn_gate.weight"), wt, 2, h->E, h->F, 1, 0);
        add_t(t, n, NM("ffn_up.weight"), wt, 2, h->E, h->F, 1, 0);
        add_t(t, n, NM("ffn_down.weight"), wt, 2, h->F, h->E, 1, 0);
    }
    if (il == h->n_layer) { /* the MTP block's own tensors */
        add_t(t, n, NM("nextn.eh_proj.weight"), wt, 2, 2 * h->E, h->E, 1, 0);
        add_t(t, n, NM("nextn.enorm.weight"), GGUF_TYPE_F32, 1, h->E, 1, 1, 1);
        add_t(t, n, NM("nextn.hnorm.weight"), GGUF_TYPE_F32, 1, h->E, 1, 1, 1);
        add_t(t, n, NM("nextn.shared_head_norm.weight"), GGUF_TYPE_F32, 1, h->E, 1, 1, 1);
    }
#undef NM
}

#define TRY(x)                    \
    do {                          \
        if ((s = (x)) != MW_OK) { \
            goto done;            \
        }                         \
    } while (0)

static enum mw_status set_arch_u32(struct gguf_writer *w, const char *arch, const char *k,
                                   uint32_t v, struct mw_err *err)
{
    char key[96];
    snprintf(key, sizeof key, "%s.%s", arch, k);
    return gguf_writer_set_u32(w, key, v, err);
}

static enum mw_status set_arch_f32(struct gguf_writer *w, const char *arch, const char *k,
                                   float v, struct mw_err *err)
{
    char key[96];
    snprintf(key, sizeof key, "%s.%s", arch, k);
    return gguf_writer_set_f32(w, key, v, err);
}

enum mw_status rt_fx_write(const char *path, const struct rt_fx_spec *sp, struct mw_err *err)
{
    const enum rt_fx_defect d = sp->defect;
    struct vocab v;
    memset(&v, 0, sizeof v);
    struct gguf_writer *w = NULL;
    uint8_t *buf = NULL;
    float *f = NULL;
    enum mw_status s = MW_OK;
    const bool qwen = strcmp(sp->arch, "qwen2") == 0 || d == RT_FX_QWEN2_NO_BIAS ||
                      d == RT_FX_MOE_IN_QWEN2;
    const char *arch = qwen ? "qwen2" : sp->arch;
    const bool moe_defect = d >= RT_FX_MOE_USED_ABOVE && d <= RT_FX_MOE_NO_SHEXP;
    if (moe_defect) arch = d == RT_FX_MOE_NO_SHEXP ? "qwen2moe" : "qwen3moe";
    /* the family defects bring their family */
    if (d == RT_FX_QWEN3_NO_QNORM) arch = "qwen3";
    if (d == RT_FX_GEMMA_NO_POST_FFW || d == RT_FX_GEMMA3_SWA_BASE) arch = "gemma3";
    if (d == RT_FX_GEMMA2_OUTPUT || d == RT_FX_GEMMA2_SOFTCAP_ZERO) arch = "gemma2";
    if (d == RT_FX_PHI3_ONE_FACTOR || d == RT_FX_PHI3_UP_ROWS || d == RT_FX_PHI3_QKV_MIXED ||
        d == RT_FX_PHI3_FACTORS_LEN)
        arch = "phi3";
    const bool ssm_defect = d >= RT_FX_SSM_CONV_KERNEL && d <= RT_FX_SSM_RECURRENT_LAYERS;
    if (ssm_defect) arch = d == RT_FX_SSM_NO_KEY ? "qwen3next" : "qwen35";
    const bool q35 = strcmp(arch, "qwen35") == 0, q35moe = strcmp(arch, "qwen35moe") == 0;
    const bool q3next = strcmp(arch, "qwen3next") == 0, hyb_arch = q35 || q35moe || q3next;
    const bool qwen2moe = strcmp(arch, "qwen2moe") == 0, qwen3moe = strcmp(arch, "qwen3moe") == 0;
    const bool qwen3 = strcmp(arch, "qwen3") == 0 || qwen3moe;
    /* experts: qwen*moe always, llama when asked */
    const uint32_t NE = sp->n_expert ? sp->n_expert : (qwen2moe || qwen3moe || q35moe || q3next ? 4 : 0);
    const bool moe = NE > 0 && (qwen2moe || qwen3moe || q35moe || q3next || strcmp(arch, "llama") == 0);
    const uint32_t NK = sp->n_expert_used ? sp->n_expert_used : 2;
    const uint32_t FE = strcmp(arch, "llama") == 0 ? sp->n_ff
                        : sp->n_ff_exp            ? sp->n_ff_exp
                                                  : sp->n_ff / 2;
    const uint32_t FS = sp->n_ff_shexp ? sp->n_ff_shexp : sp->n_ff;
    const bool gemma2 = strcmp(arch, "gemma2") == 0, gemma3 = strcmp(arch, "gemma3") == 0;
    const bool gemma = gemma2 || gemma3, phi3 = strcmp(arch, "phi3") == 0;
    const bool qk_norm = qwen3 || gemma3 || d == RT_FX_QNORM_IN_LLAMA;
    const bool tied = (sp->tied && !qwen2moe) || (gemma2 && d != RT_FX_GEMMA2_OUTPUT);
    const uint32_t n_ctx_orig =
        sp->n_ctx_orig ? sp->n_ctx_orig
                       : (d == RT_FX_PHI3_ONE_FACTOR || d == RT_FX_PHI3_FACTORS_LEN ? 64 : 0);
    const bool gpt2 = sp->gpt2 || d == RT_FX_MERGES_MISSING;
    if (!(gpt2 ? vocab_bpe(&v, d != RT_FX_MERGES_MISSING) : vocab_spm(&v))) {
        s = MW_FAIL(err, MW_E_NOMEM, MW_ERR_OFF_NONE, "fixture vocabulary");
        goto done;
    }
    const uint32_t E = sp->n_embd, F = sp->n_ff, hd = sp->n_embd / sp->n_head;
    const uint32_t qdim = sp->n_head * hd, kvdim = sp->n_head_kv * hd;
    const uint32_t n_vocab = v.n;
    struct hyb hy = {.moe = moe, .next = q3next, .mtp = !sp->no_mtp, .E = E, .F = F, .FE = FE,
                     .FS = FS, .NE = NE, .hd = hd, .qdim = qdim, .kvdim = kvdim,
                     .S = sp->ssm_state ? sp->ssm_state : 32,
                     .Hk = sp->ssm_k_heads ? sp->ssm_k_heads : 2,
                     .Hv = sp->ssm_v_heads ? sp->ssm_v_heads : 4, .K = 4,
                     .interval = sp->full_attn_interval ? sp->full_attn_interval : 4,
                     .n_layer = ssm_defect && sp->n_layer < 4 ? 4 : sp->n_layer};
    hy.CH = 2 * hy.Hk * hy.S + hy.Hv * hy.S;
    hy.DI = hy.Hv * hy.S;
    const uint32_t n_layer = hyb_arch ? hy.n_layer : sp->n_layer;

    TRY(gguf_writer_init(&w, err));
    TRY(gguf_writer_set_checksums(w, sp->checksums, err));
    if (d == RT_FX_ARCH_UNKNOWN) TRY(gguf_writer_set_str(w, "general.architecture", "gpt2", err));
    else if (d != RT_FX_ARCH_MISSING) TRY(gguf_writer_set_str(w, "general.architecture", arch, err));
    TRY(gguf_writer_set_str(w, "general.name", "rt-fixture", err));
    TRY(set_arch_u32(w, arch, "context_length", d == RT_FX_HUGE_CTX ? UINT32_MAX : sp->n_ctx_train,
                     err));
    TRY(set_arch_u32(w, arch, "embedding_length", d == RT_FX_EMBD_MISMATCH ? 2 * E : E, err));
    TRY(set_arch_u32(w, arch, "block_count",
                     d == RT_FX_LAYERS_MORE ? sp->n_layer + 1
                     : d == RT_FX_LAYERS_HUGE ? 100000
                     : hyb_arch ? n_layer + (hy.mtp ? 1 : 0) : sp->n_layer, err));
    TRY(set_arch_u32(w, arch, "feed_forward_length", F, err));
    if (d == RT_FX_KEY_TYPE) {
        TRY(set_arch_f32(w, arch, "attention.head_count", (float)sp->n_head, err));
    } else if (d == RT_FX_HEADS_PER_LAYER) {
        uint32_t per[2] = {sp->n_head, sp->n_head / 2};
        TRY(gguf_writer_set_arr(w, "llama.attention.head_count", GGUF_VT_U32, per, 2, err));
    } else {
        const uint32_t nh = d == RT_FX_HEADS_ZERO             ? 0
                            : d == RT_FX_HEADS_WRONG          ? 2 * sp->n_head
                            : d == RT_FX_HEADS_KV_NOT_DIVISOR ? 4 /* with 3 kv heads */
                                                              : sp->n_head;
        TRY(set_arch_u32(w, arch, "attention.head_count", nh, err));
    }
    const uint32_t nkv = d == RT_FX_HEADS_KV_NOT_DIVISOR ? 3
                         : d == RT_FX_HEADS_KV_ABOVE ? 2 * sp->n_head : sp->n_head_kv;
    TRY(set_arch_u32(w, arch, "attention.head_count_kv", nkv, err));
    if (d == RT_FX_EPS_NAN) TRY(set_arch_f32(w, arch, "attention.layer_norm_rms_epsilon", NAN, err));
    else if (d != RT_FX_EPS_MISSING)
        TRY(set_arch_f32(w, arch, "attention.layer_norm_rms_epsilon", 1e-5f, err));
    TRY(set_arch_f32(w, arch, "rope.freq_base", qwen ? 1000000.0f : 10000.0f, err));
    if (d == RT_FX_ROT_ODD) TRY(set_arch_u32(w, arch, "rope.dimension_count", hd - 1, err));
    if (d == RT_FX_ROPE_YARN) {
        TRY(gguf_writer_set_str(w, "llama.rope.scaling.type", "yarn", err));
        TRY(set_arch_f32(w, arch, "rope.scaling.factor", 4.0f, err));
    }
    if (d == RT_FX_KV_LENGTHS) {
        TRY(set_arch_u32(w, arch, "attention.key_length", hd, err));
        TRY(set_arch_u32(w, arch, "attention.value_length", hd / 2, err));
    }
    if (d == RT_FX_MOE || d == RT_FX_MOE_IN_QWEN2) TRY(set_arch_u32(w, arch, "expert_count", 8, err));
    if (moe) {
        TRY(set_arch_u32(w, arch, "expert_count", NE, err));
        TRY(set_arch_u32(w, arch, "expert_used_count", d == RT_FX_MOE_USED_ABOVE ? NE + 1 : NK,
                         err));
        if (qwen2moe || qwen3moe || hyb_arch)
            TRY(set_arch_u32(w, arch, "expert_feed_forward_length", FE, err));
        if (qwen2moe || hyb_arch)
            TRY(set_arch_u32(w, arch, "expert_shared_feed_forward_length", FS, err));
        if (d == RT_FX_MOE_GATING || d == RT_FX_MOE_SIGMOID)
            TRY(set_arch_u32(w, arch, "expert_gating_func", d == RT_FX_MOE_GATING ? 9 : 2, err));
    }
    if (gemma) {
        const uint32_t n_swa = sp->n_swa ? sp->n_swa : (d == RT_FX_GEMMA3_SWA_BASE ? 16 : 0);
        if (n_swa) TRY(set_arch_u32(w, arch, "attention.sliding_window", n_swa, err));
        if (sp->swa_pattern)
            TRY(set_arch_u32(w, arch, "attention.sliding_window_pattern", sp->swa_pattern, err));
        TRY(set_arch_u32(w, arch, "attention.key_length", hd, err));
        TRY(set_arch_u32(w, arch, "attention.value_length", hd, err));
    }
    if (gemma2) {
        TRY(set_arch_f32(w, arch, "attn_logit_softcapping",
                         d == RT_FX_GEMMA2_SOFTCAP_ZERO ? 0.0f : 50.0f, err));
        TRY(set_arch_f32(w, arch, "final_logit_softcapping", 30.0f, err));
    }
    if (gemma3) {
        TRY(set_arch_f32(w, arch, "rope.freq_base_swa",
                         d == RT_FX_GEMMA3_SWA_BASE ? 0.5f : 10000.0f, err));
        TRY(set_arch_f32(w, arch, "final_logit_softcapping", 30.0f, err));
    }
    if (hyb_arch) {
        TRY(set_arch_u32(w, arch, "attention.key_length", hd, err));
        TRY(set_arch_u32(w, arch, "attention.value_length", hd, err));
        if (hy.mtp) TRY(set_arch_u32(w, arch, "nextn_predict_layers", 1, err));
        if (d != RT_FX_SSM_NO_KEY) TRY(set_arch_u32(w, arch, "ssm.conv_kernel", hy.K, err));
        TRY(set_arch_u32(w, arch, "ssm.state_size", d == RT_FX_SSM_STATE_HUGE ? 1u << 22 : hy.S,
                         err));
        TRY(set_arch_u32(w, arch, "ssm.group_count", hy.Hk, err));
        TRY(set_arch_u32(w, arch, "ssm.time_step_rank",
                         d == RT_FX_SSM_HEADS ? hy.Hk + 1 : d == RT_FX_SSM_STATE_HUGE ? 1u << 22 : hy.Hv,
                         err));
        TRY(set_arch_u32(w, arch, "ssm.inner_size", d == RT_FX_SSM_INNER ? hy.DI + 1 : hy.DI, err));
        TRY(set_arch_u32(w, arch, "full_attention_interval", hy.interval, err));
        if (d == RT_FX_SSM_RECURRENT_LAYERS) { /* every layer recurrent: not the interval's */
            int32_t rec[16];
            for (int i = 0; i < 16; i++) rec[i] = 1;
            char key[96];
            snprintf(key, sizeof key, "%s.attention.recurrent_layers", arch);
            TRY(gguf_writer_set_arr(w, key, GGUF_VT_I32, rec, n_layer + (hy.mtp ? 1 : 0), err));
        }
        TRY(set_arch_u32(w, arch, "rope.dimension_count", hd / 4, err));
        if (!q3next) {
            const int32_t sec[4] = {(int32_t)(hd / 16), (int32_t)(hd / 32), (int32_t)(hd / 32), 0};
            char key[96];
            snprintf(key, sizeof key, "%s.rope.dimension_sections", arch);
            TRY(gguf_writer_set_arr(w, key, GGUF_VT_I32, sec, 4, err));
        }
    }
    if (phi3 && n_ctx_orig) {
        TRY(set_arch_u32(w, arch, "rope.scaling.original_context_length", n_ctx_orig, err));
        TRY(set_arch_f32(w, arch, "rope.scaling.attn_factor", 1.19f, err));
    }
    TRY(gguf_writer_set_u32(w, "general.file_type", sp->wtype == GGUF_TYPE_F32 ? 0 : 1, err));

    /* tokenizer */
    if (d == RT_FX_TOKENIZER_UNKNOWN) TRY(gguf_writer_set_str(w, "tokenizer.ggml.model", "bert", err));
    else if (d != RT_FX_NO_TOKENIZER)
        TRY(gguf_writer_set_str(w, "tokenizer.ggml.model", gpt2 ? "gpt2" : "llama", err));
    TRY(gguf_writer_set_str(w, "tokenizer.ggml.pre", gpt2 ? "qwen2" : "default", err));
    TRY(gguf_writer_set_arr_str(w, "tokenizer.ggml.tokens", (const char *const *)v.text, NULL,
                                d == RT_FX_VOCAB_MISMATCH ? v.n - 1 : v.n, err));
    if (!gpt2) {
        if (d == RT_FX_SCORES_TYPE) {
            TRY(gguf_writer_set_arr(w, "tokenizer.ggml.scores", GGUF_VT_I32, v.type, v.n, err));
        } else {
            TRY(gguf_writer_set_arr(w, "tokenizer.ggml.scores", GGUF_VT_F32, v.score, v.n, err));
        }
    }
    TRY(gguf_writer_set_arr(w, "tokenizer.ggml.token_type", GGUF_VT_I32, v.type, v.n, err));
    if (v.n_merges)
        TRY(gguf_writer_set_arr_str(w, "tokenizer.ggml.merges", (const char *const *)v.merges,
                                    NULL, v.n_merges, err));
    if (gpt2) {
        TRY(gguf_writer_set_u32(w, "tokenizer.ggml.eos_token_id", v.n - 2, err));
        TRY(gguf_writer_set_u32(w, "tokenizer.ggml.bos_token_id", v.n - 2, err));
        TRY(gguf_writer_set_bool(w, "tokenizer.ggml.add_bos_token", false, err));
    } else if (d == RT_FX_BOS_TYPE) {
        TRY(gguf_writer_set_u64(w, "tokenizer.ggml.bos_token_id", 1, err));
    } else {
        TRY(gguf_writer_set_u32(w, "tokenizer.ggml.bos_token_id", 1, err));
        TRY(gguf_writer_set_u32(w, "tokenizer.ggml.eos_token_id", 2, err));
        TRY(gguf_writer_set_u32(w, "tokenizer.ggml.unknown_token_id", 0, err));
    }

    /* tensors */
    struct tdesc t[MAX_T];
    int nt = 0;
    const uint32_t wt = sp->wtype;
    add_t(t, &nt, "token_embd.weight", d == RT_FX_EMBD_TYPE ? GGUF_TYPE_Q8_1 : wt, 2, E, n_vocab,
          1, 0);
    if (!tied)
        add_t(t, &nt, "output.weight", wt, 2, E, d == RT_FX_OUTPUT_SHAPE ? n_vocab - 1 : n_vocab, 1,
              0);
    add_t(t, &nt, "output_norm.weight", GGUF_TYPE_F32, 1, E, 1, 1, 1);
    if (sp->rope_freqs || d == RT_FX_ROPE_FREQS_LEN)
        add_t(t, &nt, "rope_freqs.weight", GGUF_TYPE_F32, 1,
              hd / 2 + (d == RT_FX_ROPE_FREQS_LEN ? 1 : 0), 1, 1, 3);
    if (phi3 && n_ctx_orig) {
        add_t(t, &nt, "rope_factors_long.weight", GGUF_TYPE_F32, 1,
              hd / 2 + (d == RT_FX_PHI3_FACTORS_LEN ? 2 : 0), 1, 1, 4);
        if (d != RT_FX_PHI3_ONE_FACTOR)
            add_t(t, &nt, "rope_factors_short.weight", GGUF_TYPE_F32, 1, hd / 2, 1, 1, 3);
    }
    for (uint32_t il = 0; hyb_arch && il < n_layer + (hy.mtp ? 1 : 0); il++)
        add_hybrid_block(t, &nt, &hy, il, il < n_layer && (il + 1) % hy.interval != 0, wt, d);
    for (uint32_t il = 0; !hyb_arch && il < sp->n_layer; il++) {
        char nm[64];
#define NM(x) (snprintf(nm, sizeof nm, "blk.%u." x, il), nm)
        add_t(t, &nt, NM("attn_norm.weight"),
              d == RT_FX_NORM_QUANTIZED && il == 0 ? GGUF_TYPE_Q8_0 : GGUF_TYPE_F32, 1, E, 1, 1, 1);
        if (phi3 && !(d == RT_FX_PHI3_QKV_MIXED && il == 1)) {
            add_t(t, &nt, NM("attn_qkv.weight"), wt, 2, E, qdim + 2 * kvdim, 1, 0);
        } else {
            add_t(t, &nt, NM("attn_q.weight"), wt, 2, E,
                  d == RT_FX_WRONG_SHAPE && il == 0 ? qdim / 2 : qdim, 1, 0);
            add_t(t, &nt, NM("attn_k.weight"), wt, 2, E, kvdim, 1, 0);
            add_t(t, &nt, NM("attn_v.weight"),
                  d == RT_FX_UNSUPPORTED_TYPE && il == 0 ? GGUF_TYPE_Q8_1 : wt, 2, E, kvdim, 1, 0);
        }
        if (qk_norm && !(d == RT_FX_QWEN3_NO_QNORM && il == 0))
            add_t(t, &nt, NM("attn_q_norm.weight"), GGUF_TYPE_F32, 1, hd, 1, 1, 8);
        if (qk_norm) add_t(t, &nt, NM("attn_k_norm.weight"), GGUF_TYPE_F32, 1, hd, 1, 1, 8);
        if (gemma) {
            add_t(t, &nt, NM("post_attention_norm.weight"), GGUF_TYPE_F32, 1, E, 1, 1, 1);
            if (!(d == RT_FX_GEMMA_NO_POST_FFW && il == 1))
                add_t(t, &nt, NM("post_ffw_norm.weight"), GGUF_TYPE_F32, 1, E, 1, 1, 1);
        }
        if ((qwen || qwen2moe) && !(d == RT_FX_QWEN2_NO_BIAS && il == 0))
            add_t(t, &nt, NM("attn_q.bias"), GGUF_TYPE_F32, 1, qdim, 1, 1, 2);
        if (qwen || qwen2moe) {
            add_t(t, &nt, NM("attn_k.bias"), GGUF_TYPE_F32, 1, kvdim, 1, 1, 2);
            add_t(t, &nt, NM("attn_v.bias"), GGUF_TYPE_F32, 1, kvdim, 1, 1, 2);
        }
        add_t(t, &nt, NM("attn_output.weight"), wt, 2, qdim, E, 1, 0);
        add_t(t, &nt, NM("ffn_norm.weight"), GGUF_TYPE_F32, 1, E, 1, 1, 1);
        if (moe) {
            add_t(t, &nt, NM("ffn_gate_inp.weight"), GGUF_TYPE_F32, 2, E,
                  d == RT_FX_MOE_ROUTER_SHAPE && il == 0 ? NE + 1 : NE, 1, 5);
            add_t(t, &nt, NM("ffn_gate_exps.weight"), wt, 3, E, FE, NE, 0);
            add_t(t, &nt, NM("ffn_up_exps.weight"), wt, 3, E, FE,
                  d == RT_FX_MOE_EXPS_SHAPE && il == 0 ? NE - 1 : NE, 0);
            if (!(d == RT_FX_MOE_NO_DOWN && il == 1))
                add_t(t, &nt, NM("ffn_down_exps.weight"), wt, 3, FE, E, NE, 0);
            if (qwen2moe) {
                if (!(d == RT_FX_MOE_NO_SHEXP && il == 0))
                    add_t(t, &nt, NM("ffn_gate_inp_shexp.weight"), GGUF_TYPE_F32, 1, E, 1, 1, 5);
                add_t(t, &nt, NM("ffn_gate_shexp.weight"), wt, 2, E, FS, 1, 0);
                add_t(t, &nt, NM("ffn_up_shexp.weight"), wt, 2, E, FS, 1, 0);
                add_t(t, &nt, NM("ffn_down_shexp.weight"), wt, 2, FS, E, 1, 0);
            }
            if (d == RT_FX_MOE_DENSE_FFN && il == 0)
                add_t(t, &nt, NM("ffn_gate.weight"), wt, 2, E, F, 1, 0);
        } else if (phi3) {
            add_t(t, &nt, NM("ffn_up.weight"), wt, 2, E,
                  d == RT_FX_PHI3_UP_ROWS && il == 0 ? F : 2 * F, 1, 0);
        } else {
            if (d == RT_FX_THREE_DIMS && il == 0)
                add_t(t, &nt, NM("ffn_gate.weight"), wt, 3, E, F, 2, 0);
            else add_t(t, &nt, NM("ffn_gate.weight"), wt, 2, E, F, 1, 0);
            if (!(d == RT_FX_MISSING_TENSOR && il == 1))
                add_t(t, &nt, NM("ffn_up.weight"), wt, 2, E, F, 1, 0);
        }
        if (!moe) add_t(t, &nt, NM("ffn_down.weight"), wt, 2, F, E, 1, 0);
#undef NM
    }
    for (int i = 0; i < nt; i++)
        TRY(gguf_writer_add_tensor(w, t[i].name, t[i].type, t[i].n_dims, t[i].ne, err));
    TRY(gguf_writer_open(w, path, err));

    uint64_t rs = sp->seed * 0x9E3779B97F4A7C15ULL + 1;
    for (int i = 0; i < nt; i++) {
        const struct tdesc *td = &t[i];
        const uint64_t n = td->ne[0] * td->ne[1] * td->ne[2];
        uint64_t nbytes;
        if (!gguf_tensor_nbytes(td->type, td->ne, &nbytes)) {
            s = MW_FAIL(err, MW_E_USAGE, MW_ERR_OFF_NONE, "fixture tensor %s", td->name);
            goto done;
        }
        free(f);
        free(buf);
        f = malloc(n * sizeof *f);
        buf = calloc(1, nbytes);
        if (!f || !buf) {
            s = MW_FAIL(err, MW_E_NOMEM, MW_ERR_OFF_NONE, "fixture data");
            goto done;
        }
        const float a = strncmp(td->name, "token_embd", 10) == 0 ? 0.5f : 1.0f / sqrtf((float)td->ne[0]);
        for (uint64_t j = 0; j < n; j++) {
            switch (td->kind) {
            case 0: f[j] = uni(&rs, 1.7f * a); break;
            case 1: f[j] = 1.0f + uni(&rs, 0.2f); break;
            case 8: f[j] = (sp->qk_gain > 0.0f ? sp->qk_gain : 1.0f) * (1.0f + uni(&rs, 0.2f)); break;
            case 2: f[j] = uni(&rs, 0.1f); break;
            case 4: f[j] = 1.0f + 0.5f * (float)j; break; /* LongRoPE long factors */
            case 5: f[j] = uni(&rs, 5.0f * a); break;      /* MoE router: a wide spread */
            case 6: f[j] = uni(&rs, 0.5f); break;           /* conv taps */
            case 7: f[j] = -expf(uni(&rs, 1.0f)); break;    /* ssm_a = -exp(A_log) */
            default: f[j] = j % 3 == 2 ? 4.0f : 1.0f; break;
            }
        }
        const struct quant_traits *qt = quant_traits_get(td->type);
        if (qt && qt->from_float) {
            const uint64_t rb = nbytes / (n / td->ne[0]);
            for (uint64_t r = 0; r < n / td->ne[0]; r++)
                qt->from_float(f + r * td->ne[0], buf + r * rb, td->ne[0], NULL);
        } else { /* a type memwall cannot write: random block bytes */
            for (uint64_t j = 0; j < nbytes; j++) buf[j] = (uint8_t)(rnd(&rs) & 0x3f);
        }
        TRY(gguf_writer_write(w, buf, nbytes, err));
    }
    TRY(gguf_writer_finish(w, err));
done:
    gguf_writer_free(w);
    vocab_free(&v);
    free(buf);
    free(f);
    return s;
}

enum mw_status rt_fx_requant(const char *in, const char *out, uint32_t type, struct mw_err *err)
{
    struct gguf_file *f = NULL;
    struct gguf_writer *w = NULL;
    float *x = NULL;
    uint8_t *buf = NULL;
    uint32_t *types = NULL;
    enum mw_status s = gguf_open(in, GGUF_OPEN_DEFAULT, &f, err);
    if (s) return s;
    const struct quant_traits *qo = quant_traits_get(type);
    const struct gguf_type_info *ti = gguf_type_get(type);
    if (!qo || !qo->from_float || !ti) {
        s = MW_FAIL(err, MW_E_USAGE, MW_ERR_OFF_NONE, "cannot write type %u", type);
        goto done;
    }
    const uint64_t n_t = gguf_tensor_count(f);
    types = calloc(n_t ? n_t : 1, sizeof *types);
    if (!types) {
        s = MW_FAIL(err, MW_E_NOMEM, MW_ERR_OFF_NONE, "requant");
        goto done;
    }
    TRY(gguf_writer_init(&w, err));
    for (uint64_t i = 0; i < gguf_kv_count(f); i++) {
        const char *k = gguf_kv_key(f, i);
        if (strncmp(k, "memwall.checksum.", 17) == 0 || strcmp(k, "general.alignment") == 0)
            continue;
        TRY(gguf_writer_copy_kv(w, f, i, err));
    }
    for (uint64_t i = 0; i < n_t; i++) {
        const struct gguf_tensor *t = gguf_tensor_get(f, i);
        const bool src_float = t->type == GGUF_TYPE_F32 || t->type == GGUF_TYPE_F16 ||
                               t->type == GGUF_TYPE_BF16;
        types[i] = t->type;
        /* 2-D matrices and 3-D expert stacks; MoE routers stay f32 (llama.cpp's rule) */
        if (src_float && (t->n_dims == 2 || t->n_dims == 3) && t->ne[0] % ti->blck == 0 &&
            strstr(t->name, "ffn_gate_inp") == NULL)
            types[i] = type;
        TRY(gguf_writer_add_tensor(w, t->name, types[i], t->n_dims, t->ne, err));
    }
    TRY(gguf_writer_open(w, out, err));
    for (uint64_t i = 0; i < n_t; i++) {
        const struct gguf_tensor *t = gguf_tensor_get(f, i);
        const uint8_t *src = gguf_tensor_data(f, i);
        if (types[i] == t->type) {
            TRY(gguf_writer_write(w, src, (size_t)t->nbytes, err));
            continue;
        }
        const uint64_t rows = t->ne[1] * t->ne[2], ne0 = t->ne[0];
        const uint64_t in_rb = t->nbytes / rows;
        const uint64_t out_rb = ne0 / ti->blck * ti->type_size;
        free(x);
        free(buf);
        x = malloc(ne0 * sizeof *x);
        buf = malloc(out_rb);
        if (!x || !buf) {
            s = MW_FAIL(err, MW_E_NOMEM, MW_ERR_OFF_NONE, "requant");
            goto done;
        }
        const struct quant_traits *qi = quant_traits_get(t->type);
        for (uint64_t r = 0; r < rows; r++) {
            qi->to_float(src + r * in_rb, x, ne0);
            qo->from_float(x, buf, ne0, NULL);
            TRY(gguf_writer_write(w, buf, (size_t)out_rb, err));
        }
    }
    TRY(gguf_writer_finish(w, err));
done:
    gguf_writer_free(w);
    gguf_close(f);
    free(types);
    free(x);
    free(buf);
    return s;
}
