/*
 * quant/quant_preset.c — llama-quantize's presets (file types) and its
 * per-tensor type choice: which tensors are quantized, the per-category
 * rules of each file type, --pure, the user overrides and the row-length
 * fallback (docs/formats.md §5, §8; llama.cpp src/llama-quant.cpp at
 * the pinned commit 80fb11ac: tensor_allows_quantization,
 * llama_tensor_get_type, llama_tensor_get_type_impl, tensor_type_fallback).
 *
 * The rules are a port, branch for branch, of llama_tensor_get_type_impl for
 * the file types memwall offers (the branches of the other file types are
 * mutually exclusive with these by file type, so leaving them out changes
 * nothing). State crosses tensors, as in llama.cpp: the running counts of
 * attn_v-like, ffn_down, ffn_gate and ffn_up tensors that went through the
 * rules (tensors with a manual override do not advance them).
 */
#define _POSIX_C_SOURCE 200809L
#include "quant/quant.h"

#include <ctype.h>
#include <limits.h>
#include <regex.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

// --- presets ---

/* llama_ftype values (docs/formats.md §8.1) */
enum {
    FT_Q4_0 = 2,
    FT_Q4_1 = 3,
    FT_Q8_0 = 7,
    FT_Q5_0 = 8,
    FT_Q5_1 = 9,
    FT_Q2_K = 10,
    FT_Q3_K_S = 11,
    FT_Q3_K_M = 12,
    FT_Q3_K_L = 13,
    FT_Q4_K_S = 14,
    FT_Q4_K_M = 15,
    FT_Q5_K_S = 16,
    FT_Q5_K_M = 17,
    FT_Q6_K = 18,
    FT_IQ2_XXS = 19,
    FT_IQ2_XS = 20,
    FT_Q2_K_S = 21,
    FT_IQ3_XS = 22,
    FT_IQ3_XXS = 23,
    FT_IQ1_S = 24,
    FT_IQ4_NL = 25,
    FT_IQ3_S = 26,
    FT_IQ3_M = 27,
    FT_IQ2_S = 28,
    FT_IQ2_M = 29,
    FT_IQ4_XS = 30,
    FT_IQ1_M = 31,
    FT_MXFP4_MOE = 38,
};

static const struct quant_preset presets[] = {
    {"Q8_0", FT_Q8_0, GGUF_TYPE_Q8_0},       {"Q6_K", FT_Q6_K, GGUF_TYPE_Q6_K},
    {"Q5_K_M", FT_Q5_K_M, GGUF_TYPE_Q5_K},   {"Q5_K_S", FT_Q5_K_S, GGUF_TYPE_Q5_K},
    {"Q4_K_M", FT_Q4_K_M, GGUF_TYPE_Q4_K},   {"Q4_K_S", FT_Q4_K_S, GGUF_TYPE_Q4_K},
    {"Q4_0", FT_Q4_0, GGUF_TYPE_Q4_0},       {"Q3_K_L", FT_Q3_K_L, GGUF_TYPE_Q3_K},
    {"Q3_K_M", FT_Q3_K_M, GGUF_TYPE_Q3_K},   {"Q3_K_S", FT_Q3_K_S, GGUF_TYPE_Q3_K},
    {"Q2_K", FT_Q2_K, GGUF_TYPE_Q2_K},       {"Q5_1", FT_Q5_1, GGUF_TYPE_Q5_1},
    {"Q5_0", FT_Q5_0, GGUF_TYPE_Q5_0},       {"Q4_1", FT_Q4_1, GGUF_TYPE_Q4_1},
    {"IQ4_NL", FT_IQ4_NL, GGUF_TYPE_IQ4_NL},   {"IQ4_XS", FT_IQ4_XS, GGUF_TYPE_IQ4_XS},
    {"IQ3_M", FT_IQ3_M, GGUF_TYPE_IQ3_S},     {"IQ3_S", FT_IQ3_S, GGUF_TYPE_IQ3_S},
    {"IQ3_XS", FT_IQ3_XS, GGUF_TYPE_IQ3_S},   {"IQ3_XXS", FT_IQ3_XXS, GGUF_TYPE_IQ3_XXS},
    {"Q2_K_S", FT_Q2_K_S, GGUF_TYPE_Q2_K},    {"IQ2_M", FT_IQ2_M, GGUF_TYPE_IQ2_S},
    {"IQ2_S", FT_IQ2_S, GGUF_TYPE_IQ2_XS},    {"IQ2_XS", FT_IQ2_XS, GGUF_TYPE_IQ2_XS},
    {"IQ2_XXS", FT_IQ2_XXS, GGUF_TYPE_IQ2_XXS}, {"IQ1_M", FT_IQ1_M, GGUF_TYPE_IQ1_M},
    {"IQ1_S", FT_IQ1_S, GGUF_TYPE_IQ1_S},     {"MXFP4_MOE", FT_MXFP4_MOE, GGUF_TYPE_MXFP4},
};
#define N_PRESETS (sizeof presets / sizeof presets[0])

const struct quant_preset *quant_preset_find(const char *name)
{
    if (!name) return NULL;
    for (size_t i = 0; i < N_PRESETS; i++)
        if (strcasecmp(presets[i].name, name) == 0) return &presets[i];
    return NULL;
}

const struct quant_preset *quant_preset_at(size_t i) { return i < N_PRESETS ? &presets[i] : NULL; }

/* tensor_requires_imatrix: ggml's very-low-bit types and the Q2_K tensors of
 * a Q2_K_S file; the token embedding and the output never. */
bool quant_tensor_requires_imatrix(const char *name, uint32_t type,
                                   const struct quant_preset *preset)
{
    if (strcmp(name, "token_embd.weight") == 0 ||
        strcmp(name, "per_layer_token_embd.weight") == 0 || strcmp(name, "output.weight") == 0)
        return false;
    switch (type) {
    case GGUF_TYPE_IQ3_XXS: case GGUF_TYPE_IQ2_XXS: case GGUF_TYPE_IQ2_XS: case GGUF_TYPE_IQ2_S:
    case GGUF_TYPE_IQ1_M: case GGUF_TYPE_IQ1_S:
        return true;
    case GGUF_TYPE_Q2_K:
        return preset && preset->ftype == FT_Q2_K_S;
    default:
        return false;
    }
}

// --- model info ---

static enum mw_status get_u32_opt(const struct gguf_file *f, const char *key, bool array_ok,
                                  uint32_t *out, bool *found, struct mw_err *err)
{
    *found = false;
    const int64_t k = gguf_kv_find(f, key);
    if (k < 0) return MW_OK;
    const struct gguf_value *v = gguf_kv_value(f, (uint64_t)k);
    struct gguf_value e;
    const struct gguf_value *s = v;
    if (v->type == GGUF_VT_ARRAY && array_ok) {
        /* per-layer arrays (some architectures): llama.cpp's n_head() is layer 0's */
        if (!gguf_value_elem(v, 0, &e)) {
            mw_err_set_path(err, gguf_path(f));
            mw_err_set_where(err, "key '%s'", key);
            return MW_FAIL(err, MW_E_FORMAT, gguf_kv_off(f, (uint64_t)k), "empty array");
        }
        s = &e;
    }
    uint64_t u;
    if (s->type == GGUF_VT_ARRAY || s->type == GGUF_VT_STRING || s->type == GGUF_VT_BOOL ||
        s->type == GGUF_VT_F32 || s->type == GGUF_VT_F64 || !gguf_value_as_u64(s, &u) ||
        u > UINT32_MAX) {
        mw_err_set_path(err, gguf_path(f));
        mw_err_set_where(err, "key '%s'", key);
        return MW_FAIL(err, MW_E_FORMAT, gguf_kv_off(f, (uint64_t)k),
                       "expected an unsigned 32-bit integer, found %s", gguf_vtype_name(s->type));
    }
    *out = (uint32_t)u;
    *found = true;
    return MW_OK;
}

enum mw_status quant_model_info_from_gguf(const struct gguf_file *f, struct quant_model_info *out,
                                          struct mw_err *err)
{
    memset(out, 0, sizeof *out);
    const char *arch;
    uint64_t len;
    enum mw_status s = gguf_get_str(f, "general.architecture", &arch, &len, err);
    if (s != MW_OK) return s == MW_E_VALUE ? MW_E_FORMAT : s;
    if (len == 0 || len >= sizeof out->arch || memchr(arch, 0, (size_t)len)) {
        mw_err_set_path(err, gguf_path(f));
        mw_err_set_where(err, "key 'general.architecture'");
        return MW_FAIL(err, MW_E_FORMAT, MW_ERR_OFF_NONE, "architecture name of %llu bytes",
                       (unsigned long long)len);
    }
    memcpy(out->arch, arch, (size_t)len);
    out->arch[len] = 0;

    char key[96];
    bool found;
    snprintf(key, sizeof key, "%s.block_count", out->arch);
    if ((s = get_u32_opt(f, key, false, &out->n_layer, &found, err)) != MW_OK) return s;
    if (!found) {
        mw_err_set_path(err, gguf_path(f));
        mw_err_set_where(err, "key '%s'", key);
        return MW_FAIL(err, MW_E_FORMAT, MW_ERR_OFF_NONE,
                       "missing (the type rules need the layer count)");
    }
    snprintf(key, sizeof key, "%s.attention.head_count", out->arch);
    if ((s = get_u32_opt(f, key, true, &out->n_head, &found, err)) != MW_OK) return s;
    snprintf(key, sizeof key, "%s.attention.head_count_kv", out->arch);
    if ((s = get_u32_opt(f, key, true, &out->n_head_kv, &found, err)) != MW_OK) return s;
    if (!found) out->n_head_kv = out->n_head;
    snprintf(key, sizeof key, "%s.expert_count", out->arch);
    if ((s = get_u32_opt(f, key, false, &out->n_expert, &found, err)) != MW_OK) return s;
    return MW_OK;
}

// --- tensor order ---

/* sscanf(name, "blk.%d.", &layer) as llama_model_loader's comparator uses
 * it: the layer stays -1 unless "blk." is followed by an integer (leading
 * white space and a sign allowed; the '.' after it is not checked). */
static int layer_of(const char *name)
{
    if (strncmp(name, "blk.", 4) != 0) return -1;
    const char *p = name + 4;
    while (isspace((unsigned char)*p)) p++;
    bool neg = false;
    if (*p == '+' || *p == '-') neg = *p++ == '-';
    if (!isdigit((unsigned char)*p)) return -1;
    long long v = 0;
    while (isdigit((unsigned char)*p)) {
        if (v < (long long)INT_MAX + 1) v = v * 10 + (*p - '0');
        p++;
    }
    if (neg) v = -v;
    if (v > INT_MAX) v = INT_MAX; /* out of range for %d: clamp (glibc's strtol-like behaviour) */
    if (v < INT_MIN) v = INT_MIN;
    return (int)v;
}

int quant_tensor_name_cmp(const char *a, const char *b)
{
    const int la = layer_of(a), lb = layer_of(b);
    if (la != lb) return la < lb ? -1 : 1;
    return strcmp(a, b); /* std::string operator<: bytewise, as unsigned char */
}

// --- overrides ---

struct quant_override {
    char *spec;
    char *name; /* exact entry: the tensor name (no regex); NULL: regex entry */
    regex_t re;
    uint32_t type;
};

struct quant_overrides {
    uint64_t n, cap;
    struct quant_override *v;
};

/* A free slot at the end of *ovp (created when NULL); not yet counted. */
static enum mw_status overrides_slot(struct quant_overrides **ovp, struct quant_override **slot,
                                     struct mw_err *err)
{
    struct quant_overrides *ov = *ovp;
    if (!ov) {
        ov = calloc(1, sizeof *ov);
        if (!ov) return MW_FAIL(err, MW_E_NOMEM, MW_ERR_OFF_NONE, "out of memory");
        *ovp = ov;
    }
    if (ov->n == ov->cap) {
        const uint64_t cap = ov->cap ? ov->cap * 2 : 4;
        struct quant_override *v = realloc(ov->v, (size_t)cap * sizeof *v);
        if (!v) return MW_FAIL(err, MW_E_NOMEM, MW_ERR_OFF_NONE, "out of memory");
        ov->v = v;
        ov->cap = cap;
    }
    *slot = &ov->v[ov->n];
    memset(*slot, 0, sizeof **slot);
    return MW_OK;
}

enum mw_status quant_overrides_add(struct quant_overrides **ovp, const char *spec,
                                   struct mw_err *err)
{
    const char *eq = spec ? strchr(spec, '=') : NULL;
    if (!eq)
        return MW_FAIL(err, MW_E_USAGE, MW_ERR_OFF_NONE,
                       "type override '%s' is not REGEX=TYPE", spec ? spec : "");
    if (eq == spec)
        return MW_FAIL(err, MW_E_USAGE, MW_ERR_OFF_NONE, "type override '%s': empty REGEX", spec);
    if (eq[1] == 0)
        return MW_FAIL(err, MW_E_USAGE, MW_ERR_OFF_NONE, "type override '%s': empty TYPE", spec);
    const int t = gguf_type_from_name(eq + 1);
    const struct gguf_type_info *ti = t >= 0 ? gguf_type_get((uint32_t)t) : NULL;
    if (!ti || !ti->name)
        return MW_FAIL(err, MW_E_USAGE, MW_ERR_OFF_NONE, "type override '%s': unknown type '%s'",
                       spec, eq + 1);

    struct quant_override *o;
    enum mw_status s = overrides_slot(ovp, &o, err);
    if (s != MW_OK) return s;
    const size_t plen = (size_t)(eq - spec);
    char *pat = malloc(plen + 1);
    char *dup = strdup(spec);
    if (!pat || !dup) {
        free(pat);
        free(dup);
        return MW_FAIL(err, MW_E_NOMEM, MW_ERR_OFF_NONE, "out of memory");
    }
    for (size_t i = 0; i < plen; i++) pat[i] = (char)tolower((unsigned char)spec[i]);
    pat[plen] = 0;
    const int rc = regcomp(&o->re, pat, REG_EXTENDED | REG_NOSUB);
    if (rc != 0) {
        char msg[128];
        regerror(rc, &o->re, msg, sizeof msg);
        free(pat);
        free(dup);
        return MW_FAIL(err, MW_E_USAGE, MW_ERR_OFF_NONE, "type override '%s': bad regex: %s",
                       spec, msg);
    }
    free(pat);
    o->spec = dup;
    o->type = (uint32_t)t;
    (*ovp)->n++;
    return MW_OK;
}

enum mw_status quant_overrides_add_exact(struct quant_overrides **ovp, const char *name,
                                         uint32_t type, struct mw_err *err)
{
    const struct gguf_type_info *ti = gguf_type_get(type);
    if (!name || !ti || !ti->name)
        return MW_FAIL(err, MW_E_USAGE, MW_ERR_OFF_NONE, "exact type override: no name or type");
    struct quant_override *o;
    enum mw_status s = overrides_slot(ovp, &o, err);
    if (s != MW_OK) return s;
    /* the spec as a regex that selects name alone: "^name$=TYPE", the
     * metacharacters of name escaped */
    const size_t len = strlen(name), tl = strlen(ti->name);
    char *dup = strdup(name);
    char *spec = len <= (SIZE_MAX - tl - 4) / 2 ? malloc(2 * len + tl + 4) : NULL;
    if (!dup || !spec) {
        free(dup);
        free(spec);
        return MW_FAIL(err, MW_E_NOMEM, MW_ERR_OFF_NONE, "out of memory");
    }
    size_t k = 0;
    spec[k++] = '^';
    for (const char *p = name; *p; p++) {
        if (strchr(".[]()*+?{}|^$\\", *p)) spec[k++] = '\\';
        spec[k++] = *p;
    }
    snprintf(spec + k, tl + 3, "$=%s", ti->name);
    o->spec = spec;
    o->name = dup;
    o->type = type;
    (*ovp)->n++;
    return MW_OK;
}

void quant_overrides_free(struct quant_overrides *ov)
{
    if (!ov) return;
    for (uint64_t i = 0; i < ov->n; i++) {
        if (!ov->v[i].name) regfree(&ov->v[i].re);
        free(ov->v[i].name);
        free(ov->v[i].spec);
    }
    free(ov->v);
    free(ov);
}

uint64_t quant_overrides_count(const struct quant_overrides *ov) { return ov ? ov->n : 0; }

const char *quant_overrides_spec(const struct quant_overrides *ov, uint64_t i)
{
    return ov && i < ov->n ? ov->v[i].spec : NULL;
}

/* First override whose regex matches name, or NULL. */
static const struct quant_override *override_for(const struct quant_overrides *ov,
                                                 const char *name)
{
    if (!ov) return NULL;
    for (uint64_t i = 0; i < ov->n; i++)
        if (ov->v[i].name ? strcmp(ov->v[i].name, name) == 0
                          : regexec(&ov->v[i].re, name, 0, NULL, 0) == 0)
            return &ov->v[i];
    return NULL;
}

const char *quant_choice_reason_name(const struct quant_choice *c)
{
    if (c->fallback) return "fallback";
    switch (c->reason) {
    case QUANT_KEEP: return "keep";
    case QUANT_RULE: return "rule";
    case QUANT_PURE: return "pure";
    case QUANT_OVERRIDE: return "override";
    }
    return "?";
}

// --- which tensors are quantized (tensor_allows_quantization) ---

/* ggml_n_dims: dimensions up to the last one larger than 1 (at least 1). */
static uint32_t n_dims_eff(const struct quant_tensor_desc *t)
{
    for (uint32_t i = GGUF_MAX_DIMS; i > 1; i--)
        if (t->ne[i - 1] > 1) return i;
    return 1;
}

static bool has(const char *name, const char *sub) { return strstr(name, sub) != NULL; }

bool quant_decode_bytes(const struct quant_tensor_desc *t, const uint32_t *types, uint64_t n,
                        uint32_t n_used, uint64_t *total, uint64_t *active)
{
    uint64_t tot = 0, act = 0;
    bool has_output = false;
    for (uint64_t i = 0; i < n; i++)
        if (strcmp(t[i].name, "output.weight") == 0) has_output = true;
    for (uint64_t i = 0; i < n; i++) {
        uint64_t b, a;
        if (!gguf_tensor_nbytes(types ? types[i] : t[i].type, t[i].ne, &b) ||
            !mw_add_u64(tot, b, &tot))
            return false;
        a = b;
        if (t[i].n_dims == 3 && t[i].ne[2] > 1 && strstr(t[i].name, "_exps.") &&
            n_used > 0 && n_used < t[i].ne[2])
            a = b / t[i].ne[2] * n_used; /* slabs are whole rows: exact */
        else if (has_output && strcmp(t[i].name, "token_embd.weight") == 0 && t[i].ne[1] > 0)
            a = b / (t[i].ne[1] * t[i].ne[2] * t[i].ne[3]);
        if (!mw_add_u64(act, a, &act)) return false;
    }
    *total = tot;
    *active = act;
    return true;
}

bool quant_tensor_is_quantizable(const struct quant_tensor_desc *t, bool leave_output)
{
    if (n_dims_eff(t) < 2) return false;
    const char *name = t->name;
    const size_t len = strlen(name);
    /* name.rfind("weight") == name.size() - 6: true for names ending in
     * "weight" — and, through size_t wrap-around (npos == 5 - 6), for every
     * 5-byte name. Reproduced as it is. */
    bool q = (len >= 6 && strcmp(name + len - 6, "weight") == 0) || len == 5;
    q = q && !has(name, "_norm.weight");
    q = q && !(leave_output && strcmp(name, "output.weight") == 0);
    static const char *const skip[] = {
        "ffn_gate_inp.weight", "ffn_gate_tid2eid.weight", "altup", "laurel",
        "per_layer_model_proj", "ssm_conv1d", "shortconv.conv.weight", "indexer.k_proj.weight",
        "indexer.q_proj.weight", "time_mix_first.weight", "time_mix_w0.weight",
        "time_mix_w1.weight", "time_mix_w2.weight", "time_mix_v0.weight", "time_mix_v1.weight",
        "time_mix_v2.weight", "time_mix_a0.weight", "time_mix_a1.weight", "time_mix_a2.weight",
        "time_mix_g1.weight", "time_mix_g2.weight", "time_mix_decay_w1.weight",
        "time_mix_decay_w2.weight", "time_mix_lerp_fused.weight", "attn_rel_b.weight",
        ".position_embd", "sam.pos_embd", "sam.neck.", "sam.net_", ".rel_pos", ".patch_embd",
        ".patch_merger", "a.rvq.codebook", "mm.a.code_embd",
    };
    for (size_t i = 0; q && i < sizeof skip / sizeof skip[0]; i++) q = !has(name, skip[i]);
    /* LLM_TN(arch)(LLM_TENSOR_POS_EMBD / TOKEN_TYPES, "weight") */
    q = q && strcmp(name, "position_embd.weight") != 0 && strcmp(name, "token_types.weight") != 0;
    return q;
}

// --- categories ---

enum cat {
    CAT_TOKEN_EMBD,
    CAT_ATTN_Q,
    CAT_ATTN_V,
    CAT_ATTN_K,
    CAT_ATTN_QKV,
    CAT_ATTN_KV_B,
    CAT_ATTN_OUTPUT,
    CAT_FFN_UP,
    CAT_FFN_GATE,
    CAT_FFN_DOWN,
    CAT_OUTPUT,
    CAT_OTHER
};

static enum cat category(const char *name)
{
    if (strcmp(name, "output.weight") == 0) return CAT_OUTPUT;
    if (strcmp(name, "token_embd.weight") == 0 || strcmp(name, "per_layer_token_embd.weight") == 0)
        return CAT_TOKEN_EMBD;
    if (has(name, "attn_qkv.weight")) return CAT_ATTN_QKV;
    if (has(name, "attn_kv_b.weight")) return CAT_ATTN_KV_B;
    if (has(name, "attn_v.weight")) return CAT_ATTN_V;
    if (has(name, "attn_k.weight")) return CAT_ATTN_K;
    if (has(name, "attn_q.weight")) return CAT_ATTN_Q;
    if (has(name, "attn_output.weight")) return CAT_ATTN_OUTPUT;
    if (has(name, "ffn_up")) return CAT_FFN_UP;
    if (has(name, "ffn_gate")) return CAT_FFN_GATE;
    if (has(name, "ffn_down")) return CAT_FFN_DOWN;
    return CAT_OTHER;
}

static bool cat_is_attn_v(enum cat c)
{
    return c == CAT_ATTN_V || c == CAT_ATTN_QKV || c == CAT_ATTN_KV_B;
}

// --- the rules ---

struct state {
    const struct quant_model_info *m;
    const struct quant_rules *r;
    int n_attention_wv, i_attention_wv;
    int n_ffn_down, i_ffn_down; /* n_ffn_down: the layer count (so are n_ffn_gate, n_ffn_up) */
    int i_ffn_gate, i_ffn_up;
    bool tied;    /* no output.weight: token_embd doubles as the output */
    bool is_70b;  /* llama.cpp's LLM_TYPE_70B */
    bool falcon;
    uint32_t gqa; /* n_gqa(): n_head / n_head_kv, 0 when n_head_kv is 0 */
};

/* 7 * n / 8 as llama.cpp's int arithmetic gives it for any sane n; in 64
 * bits so that a huge block_count cannot overflow */
static int seven_eighths(int n) { return (int)((int64_t)7 * n / 8); }

static bool use_more_bits(int i, int n)
{
    return i < n / 8 || i >= seven_eighths(n) || (i - n / 8) % 3 == 2;
}

static uint32_t blck(uint32_t t)
{
    const struct gguf_type_info *ti = gguf_type_get(t);
    return ti && ti->blck ? ti->blck : 1;
}

static bool is_quantized_type(uint32_t t)
{
    /* ggml_is_quantized: every type except the plain float/int ones */
    switch (t) {
    case GGUF_TYPE_F32: case GGUF_TYPE_F16: case GGUF_TYPE_BF16: case GGUF_TYPE_F64:
    case GGUF_TYPE_I8: case GGUF_TYPE_I16: case GGUF_TYPE_I32: case GGUF_TYPE_I64:
        return false;
    default:
        return true;
    }
}

/* layer_info(): for MoE models the layer comes from the name. */
static enum mw_status layer_info(const struct state *st, const char *name, int counter, int *i_layer,
                                 struct mw_err *err)
{
    *i_layer = counter;
    if (st->m->n_expert > 1) {
        const int l = layer_of(name);
        if (strncmp(name, "blk.", 4) != 0 || l == -1) {
            mw_err_set_where(err, "tensor '%s'", name);
            return MW_FAIL(err, MW_E_FORMAT, MW_ERR_OFF_NONE, "cannot determine the layer");
        }
        if (l < 0 || l >= (int)st->m->n_layer) {
            mw_err_set_where(err, "tensor '%s'", name);
            return MW_FAIL(err, MW_E_FORMAT, MW_ERR_OFF_NONE, "layer %d outside [0, %u)", l,
                           st->m->n_layer);
        }
        *i_layer = l;
    }
    return MW_OK;
}

/* The IQ1 / IQ2 file types: llama.cpp gives them a branch of their own for
 * every tensor but the output and the token embedding (so the "70B" and
 * n_expert == 8 adjustments of the other file types do not apply). */
static bool ft_iq12(uint32_t ft)
{
    return ft == FT_IQ2_XXS || ft == FT_IQ2_XS || ft == FT_IQ1_S || ft == FT_IQ2_S ||
           ft == FT_IQ2_M || ft == FT_IQ1_M;
}

/* llama_tensor_get_type_impl for the file types in presets[]. */
static enum mw_status rules(struct state *st, const struct quant_tensor_desc *t, enum cat c,
                            uint32_t *type, struct mw_err *err)
{
    const uint32_t ft = st->r->preset->ftype;
    const uint32_t n_expert = st->m->n_expert;
    const bool im = st->r->has_imatrix;
    const uint32_t gqa = st->gqa;
    uint32_t nt = *type;

    if (c == CAT_OUTPUT || (st->tied && c == CAT_TOKEN_EMBD)) {
        if (st->r->output_type >= 0) {
            nt = (uint32_t)st->r->output_type;
        } else if (ft == FT_MXFP4_MOE || st->falcon || t->ne[0] % blck(nt) != 0) {
            nt = GGUF_TYPE_Q8_0;
        } else if (ft_iq12(ft) || ft == FT_IQ3_XXS) {
            nt = GGUF_TYPE_Q5_K;
        } else if (nt != GGUF_TYPE_Q8_0) {
            nt = GGUF_TYPE_Q6_K;
        }
    } else if (ft == FT_MXFP4_MOE) {
        /* the experts (3-D, more than one) MXFP4, every other tensor Q8_0 */
        nt = t->ne[2] > 1 ? GGUF_TYPE_MXFP4 : GGUF_TYPE_Q8_0;
    } else if (c == CAT_TOKEN_EMBD) {
        if (st->r->token_embd_type >= 0)
            nt = (uint32_t)st->r->token_embd_type;
        else if (ft == FT_IQ2_XXS || ft == FT_IQ2_XS || ft == FT_IQ1_S || ft == FT_IQ1_M)
            nt = GGUF_TYPE_Q2_K;
        else if (ft == FT_IQ2_S || ft == FT_IQ2_M || ft == FT_IQ3_XXS)
            nt = GGUF_TYPE_IQ3_S;
    } else if (ft_iq12(ft)) {
        /* IQ2_S / IQ2_M step up to IQ3_S where the others take Q2_K */
        const uint32_t up = ft == FT_IQ2_S || ft == FT_IQ2_M ? GGUF_TYPE_IQ3_S : GGUF_TYPE_Q2_K;
        if (cat_is_attn_v(c)) {
            nt = gqa >= 4 || n_expert >= 4 ? GGUF_TYPE_Q4_K : up;
            ++st->i_attention_wv;
        } else if (n_expert == 8 && c == CAT_ATTN_K) {
            nt = GGUF_TYPE_Q4_K;
        } else if (c == CAT_FFN_DOWN) {
            /* the running count, not the layer from the name, even on MoE */
            if (st->i_ffn_down < st->n_ffn_down / 8) nt = up;
            ++st->i_ffn_down;
        } else if (c == CAT_ATTN_OUTPUT) {
            if (n_expert == 8) nt = GGUF_TYPE_Q5_K;
            else if (ft == FT_IQ1_S || ft == FT_IQ1_M) nt = GGUF_TYPE_IQ2_XXS;
            else if (ft == FT_IQ2_S || ft == FT_IQ2_M) nt = GGUF_TYPE_IQ3_S;
        }
    } else if (cat_is_attn_v(c)) {
        if (ft == FT_Q2_K) nt = gqa >= 4 ? GGUF_TYPE_Q4_K : GGUF_TYPE_Q3_K;
        else if (ft == FT_Q2_K_S && gqa >= 4) nt = GGUF_TYPE_Q4_K;
        else if (ft == FT_IQ3_XXS)
            nt = gqa >= 4 ? GGUF_TYPE_Q4_K : !im ? GGUF_TYPE_IQ3_S : GGUF_TYPE_IQ3_XXS;
        else if ((ft == FT_IQ3_XS || ft == FT_IQ3_S) && gqa >= 4) nt = GGUF_TYPE_Q4_K;
        else if (ft == FT_IQ3_M) nt = GGUF_TYPE_Q4_K;
        else if (ft == FT_Q3_K_M) nt = st->i_attention_wv < 2 ? GGUF_TYPE_Q5_K : GGUF_TYPE_Q4_K;
        else if (ft == FT_Q3_K_L) nt = GGUF_TYPE_Q5_K;
        else if ((ft == FT_IQ4_NL || ft == FT_IQ4_XS) && gqa >= 4) nt = GGUF_TYPE_Q5_K;
        else if ((ft == FT_Q4_K_M || ft == FT_Q5_K_M) &&
                 use_more_bits(st->i_attention_wv, st->n_attention_wv))
            nt = GGUF_TYPE_Q6_K;
        else if (ft == FT_Q4_K_S && st->i_attention_wv < 4) nt = GGUF_TYPE_Q5_K;
        if (st->is_70b && (nt == GGUF_TYPE_Q3_K || nt == GGUF_TYPE_Q4_K)) nt = GGUF_TYPE_Q5_K;
        if (n_expert == 8) nt = GGUF_TYPE_Q8_0;
        ++st->i_attention_wv;
    } else if (c == CAT_ATTN_K) {
        if (n_expert == 8) nt = GGUF_TYPE_Q8_0;
        else if (ft == FT_IQ3_XS) nt = GGUF_TYPE_IQ3_XXS;
        else if (ft == FT_IQ3_XXS) nt = GGUF_TYPE_IQ2_S;
    } else if (c == CAT_ATTN_Q) {
        if (ft == FT_IQ3_XS) nt = GGUF_TYPE_IQ3_XXS;
        else if (ft == FT_IQ3_XXS) nt = GGUF_TYPE_IQ2_S;
    } else if (c == CAT_FFN_DOWN) {
        int il;
        enum mw_status s = layer_info(st, t->name, st->i_ffn_down, &il, err);
        if (s != MW_OK) return s;
        const int n = st->n_ffn_down;
        if (ft == FT_Q2_K) {
            nt = GGUF_TYPE_Q3_K;
        } else if (ft == FT_Q2_K_S) {
            if (il < n / 8) nt = GGUF_TYPE_Q4_K;
        } else if (ft == FT_IQ3_XXS && !im) {
            nt = il < n / 8 ? GGUF_TYPE_Q4_K : GGUF_TYPE_Q3_K;
        } else if (ft == FT_Q3_K_M) {
            nt = il < n / 16 ? GGUF_TYPE_Q5_K
                 : (!st->falcon || use_more_bits(il, n)) ? GGUF_TYPE_Q4_K
                                                          : GGUF_TYPE_Q3_K;
        } else if (ft == FT_IQ3_M && (il < n / 8 || (n_expert == 8 && use_more_bits(il, n)))) {
            nt = GGUF_TYPE_Q4_K;
        } else if (ft == FT_Q3_K_L) {
            nt = st->falcon ? GGUF_TYPE_Q4_K : GGUF_TYPE_Q5_K;
        } else if (ft == FT_Q4_K_M) {
            if (st->falcon)
                nt = il < n / 16 ? GGUF_TYPE_Q6_K
                     : use_more_bits(il, n) ? GGUF_TYPE_Q5_K
                                            : GGUF_TYPE_Q4_K;
            else if (use_more_bits(il, n))
                nt = GGUF_TYPE_Q6_K;
        } else if (il < n / 8 && (ft == FT_IQ4_NL || ft == FT_IQ4_XS) && !im) {
            nt = GGUF_TYPE_Q5_K;
        } else if (ft == FT_Q5_K_M && use_more_bits(il, n)) {
            nt = GGUF_TYPE_Q6_K;
        } else if (ft == FT_Q4_K_S && !st->falcon && il < n / 8) {
            nt = GGUF_TYPE_Q5_K;
        } else if ((ft == FT_Q4_0 || ft == FT_Q5_0) && im && il < n / 8) {
            /* llama.cpp: guard the first ffn_down layers, only with an imatrix */
            nt = ft == FT_Q4_0 ? GGUF_TYPE_Q4_1 : GGUF_TYPE_Q5_1;
        }
        ++st->i_ffn_down;
    } else if (c == CAT_ATTN_OUTPUT) {
        if (!st->falcon) {
            if (n_expert == 8) {
                if (ft == FT_Q2_K || ft == FT_IQ3_XS || ft == FT_IQ3_XXS || ft == FT_Q3_K_S ||
                    ft == FT_Q3_K_M || ft == FT_IQ4_NL || ft == FT_Q4_K_S || ft == FT_Q4_K_M ||
                    ft == FT_IQ3_S || ft == FT_IQ3_M || ft == FT_IQ4_XS)
                    nt = GGUF_TYPE_Q5_K;
            } else {
                if (ft == FT_Q2_K) nt = GGUF_TYPE_Q3_K;
                else if (ft == FT_IQ3_XXS) nt = GGUF_TYPE_IQ3_S;
                else if (ft == FT_Q3_K_M) nt = GGUF_TYPE_Q4_K;
                else if (ft == FT_Q3_K_L) nt = GGUF_TYPE_Q5_K;
                else if (ft == FT_IQ3_M) nt = GGUF_TYPE_Q4_K;
            }
        } else {
            if (ft == FT_Q3_K_L) nt = GGUF_TYPE_Q4_K;
        }
    } else if (c == CAT_FFN_GATE || c == CAT_FFN_UP) {
        /* IQ3_XS: IQ3_XXS in the middle three quarters of the layers. The
         * layer is each category's own running count (the name's on MoE,
         * where a tensor without one fails as llama.cpp's does). */
        int *i = c == CAT_FFN_GATE ? &st->i_ffn_gate : &st->i_ffn_up;
        int il;
        enum mw_status s = layer_info(st, t->name, *i, &il, err);
        if (s != MW_OK) return s;
        const int n = st->n_ffn_down;
        if (ft == FT_IQ3_XS && il >= n / 8 && il < seven_eighths(n)) nt = GGUF_TYPE_IQ3_XXS;
        ++*i;
    }
    /* (attn_qkv is attn_v-like above; llama.cpp's separate branch for it is
     * unreachable there too) */
    *type = nt;
    return MW_OK;
}

/* tensor_type_fallback: a type whose block does not divide the row length. */
static enum mw_status fallback(const struct quant_tensor_desc *t, uint32_t want, uint32_t *out,
                               struct mw_err *err)
{
    const uint64_t ncols = t->ne[0];
    const uint32_t qk = blck(want);
    *out = want;
    if (ncols % qk == 0) return MW_OK;
    uint32_t r;
    switch (want) {
    case GGUF_TYPE_IQ1_S: case GGUF_TYPE_IQ1_M: case GGUF_TYPE_IQ2_XXS: case GGUF_TYPE_IQ2_XS:
    case GGUF_TYPE_IQ2_S: case GGUF_TYPE_IQ3_XXS: case GGUF_TYPE_IQ3_S: case GGUF_TYPE_IQ4_XS:
        r = GGUF_TYPE_IQ4_NL;
        break;
    case GGUF_TYPE_Q2_0: case GGUF_TYPE_Q2_K: case GGUF_TYPE_Q3_K: case GGUF_TYPE_TQ1_0:
    case GGUF_TYPE_TQ2_0:
        r = GGUF_TYPE_Q4_0;
        break;
    case GGUF_TYPE_Q4_K: r = GGUF_TYPE_Q5_0; break;
    case GGUF_TYPE_Q5_K: r = GGUF_TYPE_Q5_1; break;
    case GGUF_TYPE_Q6_K: r = GGUF_TYPE_Q8_0; break;
    default:
        if (qk <= 32) {
            r = want; /* becomes F16 below */
            break;
        }
        mw_err_set_where(err, "tensor '%s'", t->name);
        return MW_FAIL(err, MW_E_UNSUPPORTED, MW_ERR_OFF_NONE,
                       "row length %llu is not a multiple of %u and type %s has no fallback",
                       (unsigned long long)ncols, qk, gguf_type_get(want)->name);
    }
    if (ncols % blck(r) != 0) r = GGUF_TYPE_F16;
    *out = r;
    return MW_OK;
}

enum mw_status quant_choose_types(const struct quant_model_info *m,
                                  const struct quant_tensor_desc *t, uint64_t n,
                                  const struct quant_rules *r, struct quant_choice *out,
                                  struct mw_err *err)
{
    if (!r->preset)
        return MW_FAIL(err, MW_E_USAGE, MW_ERR_OFF_NONE, "no preset");
    struct state st = {.m = m, .r = r, .tied = true};
    st.falcon = strcmp(m->arch, "falcon") == 0;
    st.gqa = m->n_head_kv ? m->n_head / m->n_head_kv : 0;
    if (m->n_layer == 80) {
        /* llama.cpp's model-size detection (src/models/<arch>.cpp) */
        if (strcmp(m->arch, "llama") == 0)
            st.is_70b = m->n_expert != 8 && m->n_head != m->n_head_kv;
        else if (strcmp(m->arch, "qwen2") == 0 || strcmp(m->arch, "olmo") == 0 ||
                 strcmp(m->arch, "deci") == 0)
            st.is_70b = true;
    } else if (m->n_layer == 68 && strcmp(m->arch, "jais2") == 0) {
        st.is_70b = true;
    }
    for (uint64_t i = 0; i < n; i++) {
        const enum cat c = category(t[i].name);
        if (cat_is_attn_v(c)) st.n_attention_wv++;
        if (c == CAT_OUTPUT) st.tied = false;
    }
    st.n_ffn_down = m->n_layer > INT_MAX ? INT_MAX : (int)m->n_layer;

    const uint32_t dflt = r->preset->default_type;
    for (uint64_t i = 0; i < n; i++) {
        const struct quant_tensor_desc *ti = &t[i];
        struct quant_choice *o = &out[i];
        o->type = o->wanted = ti->type;
        o->reason = QUANT_KEEP;
        o->fallback = false;
        if (!quant_tensor_is_quantizable(ti, r->leave_output)) continue;
        const enum cat c = category(ti->name);
        /* --token-embedding-type / --output-tensor-type: as given, no fallback */
        if (r->token_embd_type >= 0 && c == CAT_TOKEN_EMBD &&
            !(strcmp(ti->name, "per_layer_token_embd.weight") == 0 &&
              override_for(r->overrides, ti->name))) {
            o->type = o->wanted = (uint32_t)r->token_embd_type;
            o->reason = QUANT_OVERRIDE;
            continue;
        }
        if (r->output_type >= 0 && c == CAT_OUTPUT) {
            o->type = o->wanted = (uint32_t)r->output_type;
            o->reason = QUANT_OVERRIDE;
            continue;
        }
        uint32_t nt = dflt;
        o->reason = r->pure ? QUANT_PURE : QUANT_RULE;
        o->wanted = dflt;
        if (is_quantized_type(dflt)) {
            const struct quant_override *ov = override_for(r->overrides, ti->name);
            if (ov) {
                nt = ov->type;
                o->reason = QUANT_OVERRIDE;
            } else if (!r->pure) {
                enum mw_status s = rules(&st, ti, c, &nt, err);
                if (s != MW_OK) return s;
            }
            o->wanted = nt;
            enum mw_status s = fallback(ti, nt, &nt, err);
            if (s != MW_OK) return s;
            o->fallback = nt != o->wanted;
        }
        o->type = nt;
    }
    return MW_OK;
}
