/*
 * tests/check_quant_preset.c — `memwall quant` as a library: presets and
 * per-tensor type rules, importance matrices, the streaming pipeline.
 *
 *   order     llama-quantize's tensor order (docs/formats.md §1.10)
 *   tiny      tinyllama-8m (8 layers, gqa 2): the types of every preset, with
 *             and without imatrix, equal llama.cpp's own (golden lists taken
 *             from llama-quantize's output files, see golden[] below)
 *   sizes     Llama-2-7B / Llama-3-8B shapes: the bytes of every preset equal
 *             docs/formats.md §8.4's cross-check table (GiB and bpw to 3 decimals)
 *   70b       80 layers, gqa 8: attn_v per preset (the 70B rule)
 *   fallback  row lengths not a multiple of 256 / 32 (§5), tied embeddings
 *   override  --type-override / --pure / output and token-embedding types
 *   imatrix   the reference GGUF imatrix; legacy .dat written here from it;
 *             every truncation and a catalogue of corrupt files rejected
 *   pipeline  synthetic model: byte-identical output for 1, 2 and 8 threads,
 *             for tiny slabs, for a streamed (not mapped) source; KV order;
 *             imatrix length errors name tensor, expected and actual length
 */
#define _POSIX_C_SOURCE 200809L
#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "quant/quant.h"

static void *xmalloc(size_t n)
{
    void *p = malloc(n ? n : 1);
    ck_assert_ptr_nonnull(p);
    return p;
}

static const char *tname(uint32_t t) { return gguf_type_get(t)->name; }

// --- synthetic llama-shaped models (names in llama-quantize's order) ---

struct model {
    struct quant_model_info mi;
    uint64_t n;
    struct quant_tensor_desc t[1024];
    char names[1024][64];
};

static void add(struct model *m, const char *name, uint32_t nd, uint64_t ne0, uint64_t ne1)
{
    ck_assert_uint_lt(m->n, 1024);
    struct quant_tensor_desc *t = &m->t[m->n];
    snprintf(m->names[m->n], sizeof m->names[0], "%s", name);
    t->name = m->names[m->n];
    t->type = nd == 1 ? GGUF_TYPE_F32 : GGUF_TYPE_F16;
    t->n_dims = nd;
    t->ne[0] = ne0;
    t->ne[1] = nd == 1 ? 1 : ne1;
    t->ne[2] = t->ne[3] = 1;
    m->n++;
}

static int desc_cmp(const void *a, const void *b)
{
    return quant_tensor_name_cmp(((const struct quant_tensor_desc *)a)->name,
                                 ((const struct quant_tensor_desc *)b)->name);
}

/* llama: n_embd, n_ff, layers, heads, kv heads, vocab; tied: no output.weight */
static void make_llama(struct model *m, const char *arch, uint64_t embd, uint64_t ff, uint32_t nl,
                       uint32_t nh, uint32_t nkv, uint64_t vocab, bool tied)
{
    memset(m, 0, sizeof *m);
    snprintf(m->mi.arch, sizeof m->mi.arch, "%s", arch);
    m->mi.n_layer = nl;
    m->mi.n_head = nh;
    m->mi.n_head_kv = nkv;
    const uint64_t kvd = embd / nh * nkv;
    add(m, "token_embd.weight", 2, embd, vocab);
    add(m, "output_norm.weight", 1, embd, 1);
    if (!tied) add(m, "output.weight", 2, embd, vocab);
    char nm[64];
    for (uint32_t l = 0; l < nl; l++) {
#define L(x, nd, a, b) (snprintf(nm, sizeof nm, "blk.%u." x, l), add(m, nm, nd, a, b))
        L("attn_norm.weight", 1, embd, 1);
        L("attn_q.weight", 2, embd, embd);
        L("attn_k.weight", 2, embd, kvd);
        L("attn_v.weight", 2, embd, kvd);
        L("attn_output.weight", 2, embd, embd);
        L("ffn_norm.weight", 1, embd, 1);
        L("ffn_gate.weight", 2, embd, ff);
        L("ffn_up.weight", 2, embd, ff);
        L("ffn_down.weight", 2, ff, embd);
#undef L
    }
    qsort(m->t, (size_t)m->n, sizeof m->t[0], desc_cmp);
}

static struct quant_rules rules_for(const char *preset)
{
    struct quant_rules r = {.preset = quant_preset_find(preset), .output_type = -1,
                            .token_embd_type = -1};
    ck_assert_msg(r.preset != NULL, "preset %s", preset);
    return r;
}

static void choose(const struct model *m, const struct quant_rules *r, struct quant_choice *out)
{
    struct mw_err err;
    mw_err_clear(&err);
    const enum mw_status s = quant_choose_types(&m->mi, m->t, m->n, r, out, &err);
    ck_assert_msg(s == MW_OK, "choose: %s", err.msg);
}

static uint64_t total_bytes(const struct model *m, const struct quant_choice *c)
{
    uint64_t sum = 0;
    for (uint64_t i = 0; i < m->n; i++) {
        uint64_t b;
        ck_assert(gguf_tensor_nbytes(c[i].type, m->t[i].ne, &b));
        sum += b;
    }
    return sum;
}

static uint64_t total_elems(const struct model *m)
{
    uint64_t sum = 0;
    for (uint64_t i = 0; i < m->n; i++) sum += m->t[i].ne[0] * m->t[i].ne[1];
    return sum;
}

static int64_t find(const struct model *m, const char *name)
{
    for (uint64_t i = 0; i < m->n; i++)
        if (strcmp(m->t[i].name, name) == 0) return (int64_t)i;
    return -1;
}

// --- order ---

START_TEST(test_order)
{
    static const char *const want[] = {
        "output.weight",          "output_norm.weight",     "token_embd.weight",
        "blk.0.attn_k.weight",    "blk.0.attn_norm.weight", "blk.0.attn_output.weight",
        "blk.0.attn_q.weight",    "blk.0.attn_v.weight",    "blk.0.ffn_down.weight",
        "blk.0.ffn_gate.weight",  "blk.0.ffn_norm.weight",  "blk.0.ffn_up.weight",
        "blk.1.attn_k.weight",
    };
    struct model *m = xmalloc(sizeof *m);
    make_llama(m, "llama", 256, 768, 12, 8, 4, 4096, false);
    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++) ck_assert_str_eq(m->t[i].name, want[i]);
    /* layer 2 before layer 10 (numeric, not bytewise), layer 11 last */
    ck_assert_str_eq(m->t[3 + 2 * 9].name, "blk.2.attn_k.weight");
    ck_assert_str_eq(m->t[m->n - 1].name, "blk.11.ffn_up.weight");
    ck_assert_int_lt(quant_tensor_name_cmp("blk.9.x", "blk.10.x"), 0);
    ck_assert_int_lt(quant_tensor_name_cmp("zzz", "blk.0.x"), 0);
    ck_assert_int_lt(quant_tensor_name_cmp("blk.x", "blk.0.x"), 0); /* no number: -1 */
    ck_assert_int_lt(quant_tensor_name_cmp("blk.-3.a", "blk.x"), 0);
    ck_assert_int_eq(quant_tensor_name_cmp("blk.3.a", "blk.3.a"), 0);
    free(m);
}
END_TEST

// --- tinyllama: golden lists from llama-quantize ---

/* For each preset, with (im) and without imatrix: every quantized tensor
 * whose type differs from the preset's default type ("blk.0.attn_v" stands
 * for "blk.0.attn_v.weight"), in file order. Taken from the files llama.cpp
 * 80fb11ac's llama_model_quantize writes for
 * datasets/reference/tinyllama-8m.llamacpp-f16.gguf (tests/e2e/quant_peer.sh
 * checks those files byte for byte against ours). */
#define LAYERS8(a, b, c) \
    " blk.0." a " blk.0." b " blk.0." c " blk.1." a " blk.1." b " blk.1." c " blk.2." a " blk.2." b \
    " blk.2." c " blk.3." a " blk.3." b " blk.3." c " blk.4." a " blk.4." b " blk.4." c " blk.5." a \
    " blk.5." b " blk.5." c " blk.6." a " blk.6." b " blk.6." c " blk.7." a " blk.7." b " blk.7." c
static const struct golden {
    const char *preset;
    bool im;
    const char *diffs;
} golden[] = {
    {"Q8_0", false, ""},
    {"Q8_0", true, ""},
    {"Q6_K", false, ""},
    {"Q6_K", true, ""},
#define MORE6 \
    "output=q6_K blk.0.attn_v=q6_K blk.0.ffn_down=q6_K blk.3.attn_v=q6_K blk.3.ffn_down=q6_K " \
    "blk.6.attn_v=q6_K blk.6.ffn_down=q6_K blk.7.attn_v=q6_K blk.7.ffn_down=q6_K"
    {"Q5_K_M", false, MORE6},
    {"Q5_K_M", true, MORE6},
    {"Q5_K_S", false, "output=q6_K"},
    {"Q5_K_S", true, "output=q6_K"},
    {"Q4_K_M", false, MORE6},
    {"Q4_K_M", true, MORE6},
#define K4S \
    "output=q6_K blk.0.attn_v=q5_K blk.0.ffn_down=q5_K blk.1.attn_v=q5_K blk.2.attn_v=q5_K " \
    "blk.3.attn_v=q5_K"
    {"Q4_K_S", false, K4S},
    {"Q4_K_S", true, K4S},
    {"Q4_0", false, "output=q6_K"},
    {"Q4_0", true, "output=q6_K blk.0.ffn_down=q4_1"},
#define K3L "output=q6_K" LAYERS8("attn_output=q5_K", "attn_v=q5_K", "ffn_down=q5_K")
    {"Q3_K_L", false, K3L},
    {"Q3_K_L", true, K3L},
#define K3M                                                                                      \
    "output=q6_K blk.0.attn_output=q4_K blk.0.attn_v=q5_K blk.0.ffn_down=q4_K "                  \
    "blk.1.attn_output=q4_K blk.1.attn_v=q5_K blk.1.ffn_down=q4_K blk.2.attn_output=q4_K "       \
    "blk.2.attn_v=q4_K blk.2.ffn_down=q4_K blk.3.attn_output=q4_K blk.3.attn_v=q4_K "            \
    "blk.3.ffn_down=q4_K blk.4.attn_output=q4_K blk.4.attn_v=q4_K blk.4.ffn_down=q4_K "          \
    "blk.5.attn_output=q4_K blk.5.attn_v=q4_K blk.5.ffn_down=q4_K blk.6.attn_output=q4_K "       \
    "blk.6.attn_v=q4_K blk.6.ffn_down=q4_K blk.7.attn_output=q4_K blk.7.attn_v=q4_K "            \
    "blk.7.ffn_down=q4_K"
    {"Q3_K_M", false, K3M},
    {"Q3_K_M", true, K3M},
    {"Q3_K_S", false, "output=q6_K"},
    {"Q3_K_S", true, "output=q6_K"},
#define K2 "output=q6_K" LAYERS8("attn_output=q3_K", "attn_v=q3_K", "ffn_down=q3_K")
    {"Q2_K", false, K2},
    {"Q2_K", true, K2},
    {"Q5_1", false, "output=q6_K"},
    {"Q5_1", true, "output=q6_K"},
    {"Q5_0", false, "output=q6_K"},
    {"Q5_0", true, "output=q6_K blk.0.ffn_down=q5_1"},
    {"Q4_1", false, "output=q6_K"},
    {"Q4_1", true, "output=q6_K"},
    {"IQ4_NL", false, "output=q6_K blk.0.ffn_down=q5_K"},
    {"IQ4_NL", true, "output=q6_K"},
    /* the i-quant presets (tests/e2e/quant_iq_peer.sh: without an imatrix
     * against llama_quant_compute_types, with the reference imatrix against
     * llama_model_quantize's files) */
#define EACH_1_7(X) X("1") X("2") X("3") X("4") X("5") X("6") X("7")
#define V_Q2K(n) " blk." n ".attn_v=q2_K"
#define IQ2XX "output=q5_K token_embd=q2_K blk.0.attn_v=q2_K blk.0.ffn_down=q2_K" EACH_1_7(V_Q2K)
    {"IQ2_XXS", false, IQ2XX},
    {"IQ2_XXS", true, IQ2XX},
    {"IQ2_XS", false, IQ2XX},
    {"IQ2_XS", true, IQ2XX},
#define OV_IQ1(n) " blk." n ".attn_output=iq2_xxs blk." n ".attn_v=q2_K"
#define IQ1X \
    "output=q5_K token_embd=q2_K blk.0.attn_output=iq2_xxs blk.0.attn_v=q2_K " \
    "blk.0.ffn_down=q2_K" EACH_1_7(OV_IQ1)
    {"IQ1_S", false, IQ1X},
    {"IQ1_S", true, IQ1X},
    {"IQ1_M", false, IQ1X},
    {"IQ1_M", true, IQ1X},
#define OV_IQ3S(n) " blk." n ".attn_output=iq3_s blk." n ".attn_v=iq3_s"
#define IQ2SM \
    "output=q5_K token_embd=iq3_s blk.0.attn_output=iq3_s blk.0.attn_v=iq3_s " \
    "blk.0.ffn_down=iq3_s" EACH_1_7(OV_IQ3S)
    {"IQ2_S", false, IQ2SM},
    {"IQ2_S", true, IQ2SM},
    {"IQ2_M", false, IQ2SM},
    {"IQ2_M", true, IQ2SM},
    {"Q2_K_S", false, "output=q6_K blk.0.ffn_down=q4_K"},
    {"Q2_K_S", true, "output=q6_K blk.0.ffn_down=q4_K"},
#define KQ_XXS(n) " blk." n ".attn_k=iq3_xxs blk." n ".attn_q=iq3_xxs"
#define KQGU_XXS(n) KQ_XXS(n) " blk." n ".ffn_gate=iq3_xxs blk." n ".ffn_up=iq3_xxs"
#define IQ3X \
    "output=q6_K" KQ_XXS("0") KQGU_XXS("1") KQGU_XXS("2") KQGU_XXS("3") KQGU_XXS("4") \
        KQGU_XXS("5") KQGU_XXS("6") KQ_XXS("7")
    {"IQ3_XS", false, IQ3X},
    {"IQ3_XS", true, IQ3X},
    /* IQ3_XXS: without an imatrix attn_v IQ3_S and ffn_down Q4_K / Q3_K */
#define KOQ(n) " blk." n ".attn_k=iq2_s blk." n ".attn_output=iq3_s blk." n ".attn_q=iq2_s"
#define KOQVD(n) KOQ(n) " blk." n ".attn_v=iq3_s blk." n ".ffn_down=q3_K"
    {"IQ3_XXS", false,
     "output=q5_K token_embd=iq3_s" KOQ("0") " blk.0.attn_v=iq3_s blk.0.ffn_down=q4_K"
         EACH_1_7(KOQVD)},
    {"IQ3_XXS", true, "output=q5_K token_embd=iq3_s" KOQ("0") EACH_1_7(KOQ)},
    {"IQ3_S", false, "output=q6_K"},
    {"IQ3_S", true, "output=q6_K"},
#define OV_Q4K(n) " blk." n ".attn_output=q4_K blk." n ".attn_v=q4_K"
#define IQ3M \
    "output=q6_K blk.0.attn_output=q4_K blk.0.attn_v=q4_K blk.0.ffn_down=q4_K" EACH_1_7(OV_Q4K)
    {"IQ3_M", false, IQ3M},
    {"IQ3_M", true, IQ3M},
    {"IQ4_XS", false, "output=q6_K blk.0.ffn_down=q5_K"},
    {"IQ4_XS", true, "output=q6_K"},
};
#define N_GOLDEN (int)(sizeof golden / sizeof golden[0])

START_TEST(test_tiny_golden)
{
    const struct golden *g = &golden[_i];
    struct model *m = xmalloc(sizeof *m);
    make_llama(m, "llama", 256, 768, 8, 8, 4, 4096, false);
    struct quant_rules r = rules_for(g->preset);
    r.has_imatrix = g->im;
    struct quant_choice c[128];
    choose(m, &r, c);
    char got[4096] = "";
    size_t k = 0;
    for (uint64_t i = 0; i < m->n; i++) {
        if (m->t[i].n_dims == 1) {
            ck_assert_int_eq(c[i].reason, QUANT_KEEP);
            ck_assert_uint_eq(c[i].type, GGUF_TYPE_F32);
            continue;
        }
        ck_assert_int_eq(c[i].reason, QUANT_RULE);
        ck_assert(!c[i].fallback);
        if (c[i].type == r.preset->default_type) continue;
        char nm[64];
        snprintf(nm, sizeof nm, "%.*s", (int)(strlen(m->t[i].name) - 7), m->t[i].name);
        k += (size_t)snprintf(got + k, sizeof got - k, "%s%s=%s", k ? " " : "", nm,
                              tname(c[i].type));
    }
    ck_assert_str_eq(got, g->diffs);
    free(m);
}
END_TEST

// --- §8.4 sizes ---

static const struct size_row {
    const char *preset;
    double l2_gib, l2_bpw, l3_gib, l3_bpw;
} sizes[] = {
    {"Q2_K", 2.358, 3.006, 2.953, 3.159},   {"Q3_K_S", 2.745, 3.499, 3.406, 3.643},
    {"Q3_K_M", 3.071, 3.915, 3.736, 3.996}, {"Q3_K_L", 3.349, 4.270, 4.018, 4.298},
    {"Q4_K_S", 3.591, 4.578, 4.363, 4.667}, {"Q4_K_M", 3.800, 4.844, 4.575, 4.894},
    {"Q5_K_S", 4.332, 5.522, 5.207, 5.570}, {"Q5_K_M", 4.454, 5.678, 5.332, 5.704},
    {"Q6_K", 5.149, 6.564, 6.136, 6.563},   {"Q8_0", 6.669, 8.501, 7.947, 8.501},
    {"Q4_0", 3.562, 4.541, 4.334, 4.636},
};

static void check_size(const struct model *m, const char *preset, double gib, double bpw)
{
    struct quant_rules r = rules_for(preset);
    struct quant_choice *c = xmalloc(sizeof *c * (size_t)m->n);
    choose(m, &r, c);
    const uint64_t b = total_bytes(m, c);
    const double g = (double)b / 1073741824.0, w = (double)b * 8.0 / (double)total_elems(m);
    ck_assert_msg(fabs(g - gib) < 0.0005 && fabs(w - bpw) < 0.0005,
                  "%s %s: %.4f GiB %.4f bpw, docs/formats.md §8.4 says %.3f / %.3f", m->mi.arch, preset,
                  g, w, gib, bpw);
    free(c);
}

START_TEST(test_sizes)
{
    const struct size_row *s = &sizes[_i];
    struct model *m = xmalloc(sizeof *m);
    make_llama(m, "llama", 4096, 11008, 32, 32, 32, 32000, false); /* Llama-2-7B */
    ck_assert_uint_eq(total_elems(m), 6738415616ull);
    check_size(m, s->preset, s->l2_gib, s->l2_bpw);
    make_llama(m, "llama", 4096, 14336, 32, 32, 8, 128256, false); /* Llama-3-8B */
    ck_assert_uint_eq(total_elems(m), 8030261248ull);
    check_size(m, s->preset, s->l3_gib, s->l3_bpw);
    free(m);
}
END_TEST

/* Per preset, on Llama-2-70B shapes (80 layers, 64 heads, 8 kv heads): how
 * many attn_v / ffn_down tensors get which type. Cross-checked against
 * llama.cpp's own llama_quant_compute_types by tests/e2e/quant_peer.sh. */
static const struct count_row {
    const char *preset;
    const char *attn_v, *ffn_down, *attn_output;
} counts70[] = {
    {"Q2_K", "q5_K*80", "q3_K*80", "q3_K*80"},
    {"Q3_K_S", "q5_K*80", "q3_K*80", "q3_K*80"},
    {"Q3_K_M", "q5_K*80", "q5_K*5 q4_K*75", "q4_K*80"},
    {"Q3_K_L", "q5_K*80", "q5_K*80", "q5_K*80"},
    {"Q4_K_S", "q5_K*80", "q5_K*10 q4_K*70", "q4_K*80"},
    {"Q4_K_M", "q6_K*40 q5_K*40", "q6_K*40 q4_K*40", "q4_K*80"},
    {"Q5_K_S", "q5_K*80", "q5_K*80", "q5_K*80"},
    {"Q5_K_M", "q6_K*40 q5_K*40", "q6_K*40 q5_K*40", "q5_K*80"},
    {"Q6_K", "q6_K*80", "q6_K*80", "q6_K*80"},
    {"Q8_0", "q8_0*80", "q8_0*80", "q8_0*80"},
    {"Q4_0", "q4_0*80", "q4_0*80", "q4_0*80"},
    /* the IQ1 / IQ2 branch: Q4_K attn_v (gqa >= 4) and no 70B bump */
    {"IQ2_XXS", "q4_K*80", "q2_K*10 iq2_xxs*70", "iq2_xxs*80"},
    {"IQ2_XS", "q4_K*80", "q2_K*10 iq2_xs*70", "iq2_xs*80"},
    {"IQ2_S", "q4_K*80", "iq3_s*10 iq2_xs*70", "iq3_s*80"},
    {"IQ2_M", "q4_K*80", "iq3_s*10 iq2_s*70", "iq3_s*80"},
    {"IQ1_S", "q4_K*80", "q2_K*10 iq1_s*70", "iq2_xxs*80"},
    {"IQ1_M", "q4_K*80", "q2_K*10 iq1_m*70", "iq2_xxs*80"},
    {"Q2_K_S", "q5_K*80", "q4_K*10 q2_K*70", "q2_K*80"},
    {"IQ3_XS", "q5_K*80", "iq3_s*80", "iq3_s*80"},
    {"IQ3_XXS", "q5_K*80", "q4_K*10 q3_K*70", "iq3_s*80"},
    {"IQ3_S", "q5_K*80", "iq3_s*80", "iq3_s*80"},
    {"IQ3_M", "q5_K*80", "q4_K*10 iq3_s*70", "q4_K*80"},
    {"IQ4_XS", "q5_K*80", "q5_K*10 iq4_xs*70", "iq4_xs*80"},
};

/* "type*count ..." in order of first appearance */
static void tally(const struct model *m, const struct quant_choice *c, const char *suffix,
                  char *out, size_t n)
{
    uint32_t types[8];
    unsigned cnt[8], nt = 0;
    for (uint64_t i = 0; i < m->n; i++) {
        if (!strstr(m->t[i].name, suffix)) continue;
        unsigned k = 0;
        while (k < nt && types[k] != c[i].type) k++;
        if (k == nt) {
            ck_assert_uint_lt(nt, 8);
            types[nt] = c[i].type;
            cnt[nt++] = 0;
        }
        cnt[k]++;
    }
    size_t used = 0;
    out[0] = 0;
    for (unsigned k = 0; k < nt; k++)
        used += (size_t)snprintf(out + used, n - used, "%s%s*%u", k ? " " : "", tname(types[k]),
                                 cnt[k]);
}

START_TEST(test_70b)
{
    const struct count_row *r0 = &counts70[_i];
    struct model *m = xmalloc(sizeof *m);
    make_llama(m, "llama", 8192, 28672, 80, 64, 8, 32000, false);
    struct quant_rules r = rules_for(r0->preset);
    struct quant_choice *c = xmalloc(sizeof *c * (size_t)m->n);
    choose(m, &r, c);
    char got[128];
    tally(m, c, "attn_v.weight", got, sizeof got);
    ck_assert_str_eq(got, r0->attn_v);
    tally(m, c, "ffn_down.weight", got, sizeof got);
    ck_assert_str_eq(got, r0->ffn_down);
    tally(m, c, "attn_output.weight", got, sizeof got);
    ck_assert_str_eq(got, r0->attn_output);
    /* the same shapes as qwen2 are "70B" too; with gqa 1 a llama is not */
    make_llama(m, "llama", 8192, 28672, 80, 64, 64, 32000, false);
    choose(m, &r, c);
    tally(m, c, "attn_v.weight", got, sizeof got);
    if (strcmp(r0->preset, "Q3_K_S") == 0) ck_assert_str_eq(got, "q3_K*80");
    free(c);
    free(m);
}
END_TEST

/* Mixture of experts (16 layers, gqa 1): llama.cpp's n_expert == 8 rules
 * (attn_v / attn_k Q8_0, attn_output Q5_K; the IQ1 / IQ2 branch's Q4_K) and
 * the IQ1 / IQ2 attn_v rule for n_expert >= 4. Cross-checked against
 * llama_quant_compute_types by tests/e2e/quant_iq_peer.sh. */
static const struct moe_row {
    const char *preset;
    uint32_t n_expert;
    const char *attn_v, *attn_k, *attn_output, *ffn_down, *ffn_up;
} moe_rows[] = {
    {"IQ2_XXS", 8, "q4_K*16", "q4_K*16", "q5_K*16", "q2_K*2 iq2_xxs*14", "iq2_xxs*16"},
    {"IQ2_XXS", 4, "q4_K*16", "iq2_xxs*16", "iq2_xxs*16", "q2_K*2 iq2_xxs*14", "iq2_xxs*16"},
    {"IQ1_S", 4, "q4_K*16", "iq1_s*16", "iq2_xxs*16", "q2_K*2 iq1_s*14", "iq1_s*16"},
    {"IQ2_S", 8, "q4_K*16", "q4_K*16", "q5_K*16", "iq3_s*2 iq2_xs*14", "iq2_xs*16"},
    {"IQ3_XS", 8, "q8_0*16", "q8_0*16", "q5_K*16", "iq3_s*16", "iq3_s*4 iq3_xxs*12"},
    {"IQ3_XS", 4, "iq3_s*16", "iq3_xxs*16", "iq3_s*16", "iq3_s*16", "iq3_s*4 iq3_xxs*12"},
    {"IQ3_XXS", 8, "q8_0*16", "q8_0*16", "q5_K*16", "q4_K*2 q3_K*14", "iq3_xxs*16"},
    {"IQ3_M", 8, "q8_0*16", "q8_0*16", "q5_K*16", "q4_K*8 iq3_s*8", "iq3_s*16"},
    {"IQ3_M", 4, "q4_K*16", "iq3_s*16", "q4_K*16", "q4_K*2 iq3_s*14", "iq3_s*16"},
    {"IQ4_XS", 8, "q8_0*16", "q8_0*16", "q5_K*16", "q5_K*2 iq4_xs*14", "iq4_xs*16"},
};

START_TEST(test_moe)
{
    const struct moe_row *w = &moe_rows[_i];
    struct model *m = xmalloc(sizeof *m);
    make_llama(m, "llama", 512, 1024, 16, 8, 8, 32000, false);
    m->mi.n_expert = w->n_expert;
    struct quant_rules r = rules_for(w->preset);
    struct quant_choice *c = xmalloc(sizeof *c * (size_t)m->n);
    choose(m, &r, c);
    char got[128];
    const char *const cats[] = {"attn_v.weight", "attn_k.weight", "attn_output.weight",
                                "ffn_down", "ffn_up"};
    const char *const want[] = {w->attn_v, w->attn_k, w->attn_output, w->ffn_down, w->ffn_up};
    for (size_t k = 0; k < 5; k++) {
        tally(m, c, cats[k], got, sizeof got);
        ck_assert_msg(strcmp(got, want[k]) == 0, "%s, %u experts, %s: %s, want %s", w->preset,
                      w->n_expert, cats[k], got, want[k]);
    }
    free(c);
    free(m);
}
END_TEST

/* llama-quantize's imatrix requirement (tensor_requires_imatrix). */
START_TEST(test_requires_imatrix)
{
    const struct quant_preset *q2ks = quant_preset_find("Q2_K_S"), *q2k = quant_preset_find("Q2_K");
    const struct quant_preset *iq2 = quant_preset_find("IQ2_XXS");
    ck_assert(q2ks && q2k && iq2);
    static const uint32_t need[] = {GGUF_TYPE_IQ1_S, GGUF_TYPE_IQ1_M, GGUF_TYPE_IQ2_XXS,
                                    GGUF_TYPE_IQ2_XS, GGUF_TYPE_IQ2_S, GGUF_TYPE_IQ3_XXS};
    for (size_t k = 0; k < sizeof need / sizeof need[0]; k++) {
        ck_assert(quant_tensor_requires_imatrix("blk.0.attn_q.weight", need[k], iq2));
        ck_assert(quant_tensor_requires_imatrix("blk.0.ffn_down_exps.weight", need[k], NULL));
        ck_assert(!quant_tensor_requires_imatrix("token_embd.weight", need[k], iq2));
        ck_assert(!quant_tensor_requires_imatrix("per_layer_token_embd.weight", need[k], iq2));
        ck_assert(!quant_tensor_requires_imatrix("output.weight", need[k], iq2));
    }
    static const uint32_t free_[] = {GGUF_TYPE_IQ3_S, GGUF_TYPE_IQ4_XS, GGUF_TYPE_IQ4_NL,
                                     GGUF_TYPE_Q3_K, GGUF_TYPE_Q4_K, GGUF_TYPE_Q8_0};
    for (size_t k = 0; k < sizeof free_ / sizeof free_[0]; k++)
        ck_assert(!quant_tensor_requires_imatrix("blk.0.attn_q.weight", free_[k], q2ks));
    /* Q2_K only in a Q2_K_S file */
    ck_assert(quant_tensor_requires_imatrix("blk.3.ffn_up.weight", GGUF_TYPE_Q2_K, q2ks));
    ck_assert(!quant_tensor_requires_imatrix("blk.3.ffn_up.weight", GGUF_TYPE_Q2_K, q2k));
    ck_assert(!quant_tensor_requires_imatrix("blk.3.ffn_up.weight", GGUF_TYPE_Q2_K, iq2));
    ck_assert(!quant_tensor_requires_imatrix("output.weight", GGUF_TYPE_Q2_K, q2ks));
}
END_TEST

// --- fallbacks ---

START_TEST(test_fallback)
{
    /* Qwen2-0.5B-like: n_embd 896 (not a multiple of 256), n_ff 4864 */
    struct model *m = xmalloc(sizeof *m);
    make_llama(m, "qwen2", 896, 4864, 24, 14, 2, 151936, true);
    struct quant_choice c[1024];
    struct {
        const char *preset, *q, *down, *embd;
    } want[] = {
        {"Q4_K_M", "q5_0", "q6_K", "q8_0"}, /* ffn_down: 4864 = 19*256 */
        {"Q5_K_S", "q5_1", "q5_K", "q8_0"},
        {"Q6_K", "q8_0", "q6_K", "q8_0"},
        {"Q3_K_S", "q4_0", "q3_K", "q8_0"},
        {"Q2_K", "q4_0", "q3_K", "q8_0"},
        {"Q4_0", "q4_0", "q4_0", "q8_0"}, /* embedding: Q6_K by the rule, then Q8_0 */
    };
    for (size_t k = 0; k < sizeof want / sizeof want[0]; k++) {
        struct quant_rules r = rules_for(want[k].preset);
        choose(m, &r, c);
        const int64_t q = find(m, "blk.3.attn_q.weight"), d = find(m, "blk.3.ffn_down.weight");
        const int64_t e = find(m, "token_embd.weight");
        ck_assert_msg(strcmp(tname(c[q].type), want[k].q) == 0, "%s attn_q %s", want[k].preset,
                      tname(c[q].type));
        ck_assert_msg(c[q].fallback == (c[q].type != r.preset->default_type), "%s",
                      want[k].preset);
        if (strcmp(want[k].preset, "Q4_K_M") != 0) /* use_more_bits layers vary */
            ck_assert_msg(strcmp(tname(c[d].type), want[k].down) == 0, "%s ffn_down %s",
                          want[k].preset, tname(c[d].type));
        /* tied token_embd follows the output rule: Q8_0 when ne0 does not fit
         * the default type's block, else Q6_K */
        ck_assert_msg(strcmp(tname(c[e].type), want[k].embd) == 0, "%s token_embd %s",
                      want[k].preset, tname(c[e].type));
        if (strcmp(want[k].preset, "Q4_0") == 0) {
            /* 896 % 32 == 0, so the output rule asks for Q6_K; its 256-block
             * does not fit and the fallback gives Q8_0 */
            ck_assert_uint_eq(c[e].wanted, GGUF_TYPE_Q6_K);
            ck_assert(c[e].fallback);
        }
    }
    /* a row length that is not a multiple of 32 either: F16 */
    make_llama(m, "llama", 200, 600, 2, 4, 4, 1000, false);
    struct quant_rules r = rules_for("Q4_K_M");
    choose(m, &r, c);
    const int64_t q = find(m, "blk.0.attn_q.weight"), o = find(m, "output.weight");
    ck_assert_str_eq(tname(c[q].type), "f16");
    ck_assert(c[q].fallback);
    ck_assert_uint_eq(c[q].wanted, GGUF_TYPE_Q4_K);
    ck_assert_str_eq(tname(c[o].type), "f16"); /* output: Q8_0 chosen, then no 32-block fit */
    free(m);
}
END_TEST

// --- overrides, pure, output/token types ---

START_TEST(test_override)
{
    struct model *m = xmalloc(sizeof *m);
    make_llama(m, "llama", 256, 768, 8, 8, 4, 4096, false);
    struct quant_overrides *ov = NULL;
    struct mw_err err;
    ck_assert_int_eq(quant_overrides_add(&ov, "BLK\\.0\\.attn_v=q8_0", &err), MW_OK);
    ck_assert_int_eq(quant_overrides_add(&ov, "ffn_(up|gate)=Q5_K", &err), MW_OK);
    ck_assert_int_eq(quant_overrides_add(&ov, "ffn_up=q2_K", &err), MW_OK); /* shadowed */
    ck_assert_uint_eq(quant_overrides_count(ov), 3);
    ck_assert_str_eq(quant_overrides_spec(ov, 1), "ffn_(up|gate)=Q5_K");
    struct quant_rules r = rules_for("Q4_K_M");
    r.overrides = ov;
    struct quant_choice c[128];
    choose(m, &r, c);
    int64_t i = find(m, "blk.0.attn_v.weight");
    ck_assert_str_eq(tname(c[i].type), "q8_0");
    ck_assert_int_eq(c[i].reason, QUANT_OVERRIDE);
    ck_assert_str_eq(tname(c[find(m, "blk.5.ffn_up.weight")].type), "q5_K");
    ck_assert_str_eq(tname(c[find(m, "blk.5.ffn_gate.weight")].type), "q5_K");
    /* the overridden attn_v does not advance the attn_v counter: layer 1's
     * attn_v is now "i = 0", so use_more_bits picks it */
    ck_assert_str_eq(tname(c[find(m, "blk.1.attn_v.weight")].type), "q6_K");
    ck_assert_str_eq(tname(c[find(m, "blk.3.attn_v.weight")].type), "q4_K");
    ck_assert_str_eq(tname(c[find(m, "blk.4.attn_v.weight")].type), "q6_K");
    quant_overrides_free(ov);

    /* errors */
    ov = NULL;
    ck_assert_int_eq(quant_overrides_add(&ov, "attn_v", &err), MW_E_USAGE);
    ck_assert_int_eq(quant_overrides_add(&ov, "=q4_K", &err), MW_E_USAGE);
    ck_assert_int_eq(quant_overrides_add(&ov, "attn_v=", &err), MW_E_USAGE);
    ck_assert_int_eq(quant_overrides_add(&ov, "attn_v=q9_K", &err), MW_E_USAGE);
    ck_assert_ptr_nonnull(strstr(err.msg, "unknown type 'q9_K'"));
    ck_assert_int_eq(quant_overrides_add(&ov, "attn_(v=q4_K", &err), MW_E_USAGE);
    ck_assert_ptr_nonnull(strstr(err.msg, "bad regex"));
    ck_assert_uint_eq(quant_overrides_count(ov), 0);
    quant_overrides_free(ov);

    /* --pure: the default type everywhere a rule would act (output included) */
    r = rules_for("Q4_K_M");
    r.pure = true;
    choose(m, &r, c);
    for (uint64_t k = 0; k < m->n; k++)
        if (m->t[k].n_dims == 2) {
            ck_assert_str_eq(tname(c[k].type), "q4_K");
            ck_assert_int_eq(c[k].reason, QUANT_PURE);
        }
    /* output / token embedding types; --leave-output-tensor */
    r = rules_for("Q4_K_M");
    r.output_type = GGUF_TYPE_Q8_0;
    r.token_embd_type = GGUF_TYPE_Q2_K;
    choose(m, &r, c);
    ck_assert_str_eq(tname(c[find(m, "output.weight")].type), "q8_0");
    ck_assert_str_eq(tname(c[find(m, "token_embd.weight")].type), "q2_K");
    r = rules_for("Q4_K_M");
    r.leave_output = true;
    choose(m, &r, c);
    i = find(m, "output.weight");
    ck_assert_str_eq(tname(c[i].type), "f16");
    ck_assert_int_eq(c[i].reason, QUANT_KEEP);
    free(m);
}
END_TEST

START_TEST(test_quantizable)
{
    struct quant_tensor_desc t = {.name = "blk.0.attn_q.weight", .n_dims = 2,
                                  .ne = {256, 256, 1, 1}, .type = GGUF_TYPE_F16};
    ck_assert(quant_tensor_is_quantizable(&t, false));
    t.ne[1] = 1; /* ggml_n_dims() == 1 */
    ck_assert(!quant_tensor_is_quantizable(&t, false));
    t.ne[1] = 4;
    t.name = "blk.0.attn_norm.weight";
    ck_assert(!quant_tensor_is_quantizable(&t, false));
    t.name = "blk.0.ffn_gate_inp.weight";
    ck_assert(!quant_tensor_is_quantizable(&t, false));
    t.name = "blk.0.attn_q.bias";
    ck_assert(!quant_tensor_is_quantizable(&t, false));
    t.name = "position_embd.weight";
    ck_assert(!quant_tensor_is_quantizable(&t, false));
    t.name = "output.weight";
    ck_assert(quant_tensor_is_quantizable(&t, false));
    ck_assert(!quant_tensor_is_quantizable(&t, true));
    t.name = "abcde"; /* llama.cpp's rfind quirk: any 5-byte name */
    ck_assert(quant_tensor_is_quantizable(&t, false));
}
END_TEST

/* quant_decode_bytes: the bytes one token reads. A Qwen3-30B-A3B-like layer
 * slice (128 experts, top-8), untied output, Q4_K experts. */
START_TEST(test_decode_bytes)
{
    const struct quant_tensor_desc t[] = {
        {.name = "token_embd.weight", .n_dims = 2, .ne = {2048, 1000, 1, 1}, .type = GGUF_TYPE_F16},
        {.name = "output.weight", .n_dims = 2, .ne = {2048, 1000, 1, 1}, .type = GGUF_TYPE_F16},
        {.name = "blk.0.attn_q.weight", .n_dims = 2, .ne = {2048, 4096, 1, 1}, .type = GGUF_TYPE_F16},
        {.name = "blk.0.ffn_gate_inp.weight", .n_dims = 2, .ne = {2048, 128, 1, 1}, .type = GGUF_TYPE_F32},
        {.name = "blk.0.ffn_down_exps.weight", .n_dims = 3, .ne = {768, 2048, 128, 1}, .type = GGUF_TYPE_F16},
        {.name = "blk.0.ffn_up_exps.weight", .n_dims = 3, .ne = {2048, 768, 128, 1}, .type = GGUF_TYPE_F16},
    };
    const uint64_t n = sizeof t / sizeof t[0];
    uint32_t types[6] = {GGUF_TYPE_Q6_K, GGUF_TYPE_Q6_K, GGUF_TYPE_Q4_K, GGUF_TYPE_F32,
                         GGUF_TYPE_Q4_K, GGUF_TYPE_Q4_K};
    uint64_t tot, act;
    ck_assert(quant_decode_bytes(t, types, n, 8, &tot, &act));
    const uint64_t emb = 2048 / 256 * 210 * 1000ull, q = 2048 / 256 * 144 * 4096ull,
                   rt = 2048 * 128 * 4ull, ex = 768 / 256 * 144 * 2048 * 128ull,
                   ex2 = 2048 / 256 * 144 * 768 * 128ull;
    ck_assert_uint_eq(tot, 2 * emb + q + rt + ex + ex2);
    ck_assert_uint_eq(act, emb / 1000 + emb + q + rt + ex / 128 * 8 + ex2 / 128 * 8);
    /* own types; n_used 0 = every expert; tied embeddings read whole */
    ck_assert(quant_decode_bytes(t, NULL, n, 0, &tot, &act));
    ck_assert_uint_eq(act, tot - 2 * 2048 * 999ull);
    ck_assert(quant_decode_bytes(t + 2, NULL, n - 2, 0, &tot, &act));
    ck_assert_uint_eq(act, tot);
    const struct quant_tensor_desc tied[] = {t[0], t[2]};
    ck_assert(quant_decode_bytes(tied, NULL, 2, 8, &tot, &act));
    ck_assert_uint_eq(act, tot);
}
END_TEST

// --- imatrix ---

static char *data_path(const char *rel)
{
    static const char *const roots[] = {MW_DATASETS_DIR "/reference", MW_SHARED_DIR "/models/reference"};
    for (size_t i = 0; i < 2; i++) {
        char *p = xmalloc(1024);
        snprintf(p, 1024, "%s/%s", roots[i], rel);
        if (access(p, R_OK) == 0) return p;
        free(p);
    }
    return NULL;
}

static uint8_t *slurp(const char *path, uint64_t *n)
{
    FILE *f = fopen(path, "rb");
    ck_assert_ptr_nonnull(f);
    fseek(f, 0, SEEK_END);
    const long sz = ftell(f);
    fseek(f, 0, SEEK_SET);
    uint8_t *b = xmalloc((size_t)sz);
    ck_assert_uint_eq(fread(b, 1, (size_t)sz, f), (size_t)sz);
    fclose(f);
    *n = (uint64_t)sz;
    return b;
}

struct buf {
    uint8_t *p;
    size_t n, cap;
};
static void put(struct buf *b, const void *d, size_t n)
{
    if (b->n + n > b->cap) {
        b->cap = (b->n + n) * 2;
        b->p = realloc(b->p, b->cap);
        ck_assert_ptr_nonnull(b->p);
    }
    memcpy(b->p + b->n, d, n);
    b->n += n;
}
static void put_i32(struct buf *b, int32_t v)
{
    uint8_t t[4];
    mw_put_le32(t, (uint32_t)v);
    put(b, t, 4);
}
static void put_f32(struct buf *b, float v)
{
    uint32_t u;
    memcpy(&u, &v, 4);
    uint8_t t[4];
    mw_put_le32(t, u);
    put(b, t, 4);
}

/* Legacy .dat from a loaded imatrix, as llama-imatrix --output-format dat
 * writes it: values * ncall; trailer with chunk count and dataset name. */
static struct buf make_dat(const struct quant_imatrix *im, int32_t ncall, bool trailer)
{
    struct buf b = {0};
    put_i32(&b, (int32_t)quant_imatrix_count(im));
    for (uint64_t i = 0; i < quant_imatrix_count(im); i++) {
        const char *nm = quant_imatrix_name(im, i);
        uint64_t n;
        const float *v = quant_imatrix_values(im, i, &n);
        put_i32(&b, (int32_t)strlen(nm));
        put(&b, nm, strlen(nm));
        put_i32(&b, ncall);
        put_i32(&b, (int32_t)n);
        for (uint64_t j = 0; j < n; j++) put_f32(&b, v[j] * (float)ncall);
    }
    if (trailer) {
        put_i32(&b, 345);
        put_i32(&b, 9);
        put(&b, "calib.txt", 9);
    }
    return b;
}

START_TEST(test_imatrix_gguf)
{
    char *path = data_path("tinyllama-8m.llamacpp.imatrix.gguf");
    if (!path) return; /* no reference data in this checkout */
    struct quant_imatrix *im = NULL;
    struct mw_err err;
    ck_assert_int_eq(quant_imatrix_load(path, &im, &err), MW_OK);
    ck_assert(!quant_imatrix_is_legacy(im));
    ck_assert_uint_eq(quant_imatrix_count(im), 56);
    ck_assert_uint_eq(quant_imatrix_chunk_count(im), 345);
    ck_assert_uint_eq(quant_imatrix_dataset_count(im), 1);
    ck_assert_str_eq(quant_imatrix_dataset(im, 0), "calib.txt");
    const int64_t k = quant_imatrix_find(im, "blk.3.ffn_down.weight");
    ck_assert_int_ge(k, 0);
    uint64_t n;
    const float *v = quant_imatrix_values(im, (uint64_t)k, &n);
    ck_assert_uint_eq(n, 768);
    /* in_sum2 / count from the file itself */
    uint64_t fsz;
    uint8_t *raw = slurp(path, &fsz);
    struct gguf_file *f;
    ck_assert_int_eq(gguf_open_mem(raw, fsz, "im", 0, &f, &err), MW_OK);
    const int64_t ts = gguf_tensor_find(f, "blk.3.ffn_down.weight.in_sum2");
    const int64_t tc = gguf_tensor_find(f, "blk.3.ffn_down.weight.counts");
    const uint8_t *sd = gguf_tensor_data(f, (uint64_t)ts), *cd = gguf_tensor_data(f, (uint64_t)tc);
    float cnt, s0;
    memcpy(&cnt, cd, 4);
    ck_assert(cnt > 0);
    for (int j = 0; j < 768; j += 97) {
        memcpy(&s0, sd + 4 * j, 4);
        ck_assert(v[j] == s0 / cnt);
    }
    gguf_close(f);
    ck_assert_int_eq(quant_imatrix_find(im, "token_embd.weight"), -1);
    ck_assert_int_eq(quant_imatrix_find(im, "output.weight"), -1);
    ck_assert_uint_ne(quant_imatrix_hash(im), 0);

    /* legacy .dat with ncall 1: the very same values; with ncall 3 and a
     * trailer: value * 3 / 3 within an ulp */
    for (int pass = 0; pass < 2; pass++) {
        struct buf b = make_dat(im, pass ? 3 : 1, pass == 1);
        struct quant_imatrix *lg = NULL;
        ck_assert_int_eq(quant_imatrix_load_mem(b.p, b.n, "x.dat", &lg, &err), MW_OK);
        ck_assert(quant_imatrix_is_legacy(lg));
        ck_assert_uint_eq(quant_imatrix_count(lg), 56);
        ck_assert_uint_eq(quant_imatrix_chunk_count(lg), pass ? 345 : 0);
        ck_assert_uint_eq(quant_imatrix_dataset_count(lg), pass ? 1 : 0);
        for (uint64_t i = 0; i < 56; i++) {
            ck_assert_str_eq(quant_imatrix_name(lg, i), quant_imatrix_name(im, i));
            uint64_t na, nb;
            const float *a = quant_imatrix_values(im, i, &na), *c = quant_imatrix_values(lg, i, &nb);
            ck_assert_uint_eq(na, nb);
            uint64_t bad = 0;
            for (uint64_t j = 0; j < na; j++)
                bad += pass == 0 ? a[j] != c[j] : !(fabsf(a[j] - c[j]) <= 2e-7f * fabsf(a[j]));
            ck_assert_msg(bad == 0, "%s: %llu values differ", quant_imatrix_name(im, i),
                          (unsigned long long)bad);
        }
        /* every truncation of the legacy file is an error, never a crash
         * (a cut exactly before the optional trailer is a valid old file) */
        const size_t no_trailer = pass ? b.n - 17 : b.n;
        for (size_t cut = 0; cut < b.n; cut += (cut < 600 || b.n - cut < 600) ? 1 : 211) {
            struct quant_imatrix *t = NULL;
            const enum mw_status s = quant_imatrix_load_mem(b.p, cut, "cut.dat", &t, &err);
            if (cut == no_trailer) {
                ck_assert_int_eq(s, MW_OK);
            } else {
                ck_assert_msg(s == MW_E_TRUNC || s == MW_E_FORMAT, "cut %zu: %d", cut, s);
                ck_assert_ptr_null(t);
            }
            quant_imatrix_free(t);
        }
        quant_imatrix_free(lg);
        free(b.p);
    }

    /* every truncation of the GGUF imatrix: an error naming the file */
    for (uint64_t cut = 0; cut < fsz; cut += cut < 8192 ? 7 : 509) {
        struct quant_imatrix *t = NULL;
        const enum mw_status s = quant_imatrix_load_mem(raw, cut, "cut.gguf", &t, &err);
        ck_assert_msg(s != MW_OK, "cut %llu loaded", (unsigned long long)cut);
        ck_assert_ptr_null(t);
        ck_assert_str_eq(err.path, "cut.gguf");
    }
    /* every byte of the header flipped, and a sample of the data: never a
     * crash; whatever loads has finite values (finish() checks) */
    for (uint64_t off = 0; off < fsz; off += off < 7000 ? 1 : 97) {
        raw[off] ^= 0xA5;
        struct quant_imatrix *t = NULL;
        (void)quant_imatrix_load_mem(raw, fsz, "flip.gguf", &t, &err);
        quant_imatrix_free(t);
        raw[off] ^= 0xA5;
    }
    free(raw);
    quant_imatrix_free(im);
    free(path);
}
END_TEST

/* A catalogue of bad legacy files: status and a phrase of the message. */
START_TEST(test_imatrix_bad)
{
    struct mw_err err;
    char buf[1024];
    struct {
        const char *what;
        int32_t n_entries, name_len;
        const char *name;
        int32_t ncall, nval, n_written;
        float fill;
        const char *tail;
        size_t tail_n;
        enum mw_status want;
        const char *phrase;
    } cases[] = {
        {"zero entries", 0, 0, "", 0, 0, 0, 0, NULL, 0, MW_E_FORMAT, "no data"},
        {"negative name length", 1, -5, "", 1, 4, 4, 1, NULL, 0, MW_E_FORMAT, "name length -5"},
        {"huge name length", 1, 1 << 30, "", 1, 4, 4, 1, NULL, 0, MW_E_FORMAT, "name length"},
        {"zero values", 1, 3, "abc", 1, 0, 0, 1, NULL, 0, MW_E_FORMAT, "value count 0"},
        {"values past the end", 1, 3, "abc", 1, 1000, 4, 1, NULL, 0, MW_E_TRUNC, "values"},
        {"NaN value", 1, 3, "abc", 1, 4, 4, NAN, NULL, 0, MW_E_VALUE, "not finite"},
        {"Inf after / ncall", 1, 3, "abc", 0, 4, 4, INFINITY, NULL, 0, MW_E_VALUE, "not finite"},
        {"half a trailer", 1, 3, "abc", 1, 4, 4, 1, "\x05\0", 2, MW_E_TRUNC, "chunk count"},
        {"dataset past the end", 1, 3, "abc", 1, 4, 4, 1, "\x01\0\0\0\x09\0\0\0ab", 10,
         MW_E_TRUNC, "dataset name length 9"},
        {"garbage after trailer", 1, 3, "abc", 1, 4, 4, 1, "\x01\0\0\0\x01\0\0\0ab", 10,
         MW_E_FORMAT, "unexpected bytes"},
        {"name with NUL", 1, 3, "a\0c", 1, 4, 4, 1, NULL, 0, MW_E_FORMAT, "NUL"},
        {"duplicate entries", 2, 3, "abc", 1, 4, 4, 1, NULL, 0, MW_E_FORMAT, "twice"},
    };
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        struct buf b = {0};
        put_i32(&b, cases[k].n_entries);
        for (int e = 0; e < (cases[k].n_entries > 0 ? cases[k].n_entries : 0); e++) {
            put_i32(&b, cases[k].name_len);
            if (cases[k].name_len > 0 && cases[k].name_len < 100)
                put(&b, cases[k].name, (size_t)cases[k].name_len);
            put_i32(&b, cases[k].ncall);
            put_i32(&b, cases[k].nval);
            for (int j = 0; j < cases[k].n_written; j++) put_f32(&b, cases[k].fill);
        }
        if (cases[k].tail) put(&b, cases[k].tail, cases[k].tail_n);
        struct quant_imatrix *im = NULL;
        const enum mw_status s = quant_imatrix_load_mem(b.p, b.n, "bad.dat", &im, &err);
        mw_err_format(&err, buf, sizeof buf);
        ck_assert_msg(s == cases[k].want, "%s: status %d (%s)", cases[k].what, s, buf);
        ck_assert_msg(strstr(buf, cases[k].phrase) != NULL, "%s: '%s'", cases[k].what, buf);
        ck_assert_msg(strstr(buf, "bad.dat") != NULL, "%s: '%s'", cases[k].what, buf);
        ck_assert_ptr_null(im);
        free(b.p);
    }
    /* a GGUF file that is not an imatrix */
    struct gguf_writer *w;
    char path[512];
    snprintf(path, sizeof path, "%s/qp-notim.gguf", MW_TEST_TMPDIR);
    ck_assert_int_eq(gguf_writer_init(&w, &err), MW_OK);
    ck_assert_int_eq(gguf_writer_set_str(w, "general.type", "model", &err), MW_OK);
    ck_assert_int_eq(gguf_writer_open(w, path, &err), MW_OK);
    ck_assert_int_eq(gguf_writer_finish(w, &err), MW_OK);
    gguf_writer_free(w);
    struct quant_imatrix *im = NULL;
    ck_assert_int_eq(quant_imatrix_load(path, &im, &err), MW_E_FORMAT);
    ck_assert_ptr_nonnull(strstr(err.msg, "missing imatrix metadata"));
    /* in_sum2 without counts */
    ck_assert_int_eq(gguf_writer_init(&w, &err), MW_OK);
    const char *ds[] = {"x.txt"};
    ck_assert_int_eq(gguf_writer_set_arr_str(w, "imatrix.datasets", ds, NULL, 1, &err), MW_OK);
    ck_assert_int_eq(gguf_writer_set_u32(w, "imatrix.chunk_count", 1, &err), MW_OK);
    ck_assert_int_eq(gguf_writer_set_u32(w, "imatrix.chunk_size", 1, &err), MW_OK);
    const uint64_t ne[2] = {32, 1};
    ck_assert_int_eq(gguf_writer_add_tensor(w, "a.weight.in_sum2", GGUF_TYPE_F32, 1, ne, &err),
                     MW_OK);
    ck_assert_int_eq(gguf_writer_open(w, path, &err), MW_OK);
    float z[32] = {0};
    ck_assert_int_eq(gguf_writer_write(w, z, sizeof z, &err), MW_OK);
    ck_assert_int_eq(gguf_writer_finish(w, &err), MW_OK);
    gguf_writer_free(w);
    ck_assert_int_eq(quant_imatrix_load(path, &im, &err), MW_E_FORMAT);
    ck_assert_ptr_nonnull(strstr(err.msg, "mismatched sums and counts"));
    ck_assert_ptr_nonnull(strstr(err.where, "a.weight"));
    /* missing file */
    ck_assert_int_eq(quant_imatrix_load("/nonexistent/im.gguf", &im, &err), MW_E_IO);
    unlink(path);
}
END_TEST

// --- pipeline on a synthetic model ---

/* Scratch files: /dev/shm when writable (the writer fsyncs every file, which
 * costs ~0.5 s each on some build disks), else the build's test dir. */
static const char *tmpdir(void)
{
    return access("/dev/shm", W_OK) == 0 ? "/dev/shm" : MW_TEST_TMPDIR;
}

/* xorshift */
static uint64_t rng(uint64_t *s)
{
    *s ^= *s >> 12;
    *s ^= *s << 25;
    *s ^= *s >> 27;
    return *s * 0x2545F4914F6CDD1DULL;
}

/* A small llama GGUF (4 layers, 256 wide, one 512-wide ffn): F16 weights,
 * F32 norms; KVs with general.file_type and split.count in the middle and a
 * stale quantize.imatrix.file. */
static void write_model(const char *path, uint32_t nl)
{
    struct mw_err err;
    struct gguf_writer *w;
    ck_assert_int_eq(gguf_writer_init(&w, &err), MW_OK);
    ck_assert_int_eq(gguf_writer_set_str(w, "general.architecture", "llama", &err), MW_OK);
    ck_assert_int_eq(gguf_writer_set_u32(w, "general.file_type", 1, &err), MW_OK);
    ck_assert_int_eq(gguf_writer_set_u32(w, "llama.block_count", nl, &err), MW_OK);
    ck_assert_int_eq(gguf_writer_set_u16(w, "split.count", 1, &err), MW_OK);
    ck_assert_int_eq(gguf_writer_set_u32(w, "llama.attention.head_count", 8, &err), MW_OK);
    ck_assert_int_eq(gguf_writer_set_u32(w, "llama.attention.head_count_kv", 2, &err), MW_OK);
    ck_assert_int_eq(gguf_writer_set_str(w, "quantize.imatrix.file", "old", &err), MW_OK);
    ck_assert_int_eq(gguf_writer_set_str(w, "memwall.version", "old", &err), MW_OK);
    ck_assert_int_eq(gguf_writer_set_u32(w, "general.quantization_version", 2, &err), MW_OK);
    ck_assert_int_eq(gguf_writer_set_str(w, "zz.last", "x", &err), MW_OK);
    struct model *m = xmalloc(sizeof *m);
    make_llama(m, "llama", 256, 512, nl, 8, 2, 300, false);
    /* source order: reverse of llama-quantize's, to exercise the sort */
    for (uint64_t i = m->n; i-- > 0;)
        ck_assert_int_eq(gguf_writer_add_tensor(w, m->t[i].name, m->t[i].type, m->t[i].n_dims,
                                                m->t[i].ne, &err),
                         MW_OK);
    ck_assert_int_eq(gguf_writer_open(w, path, &err), MW_OK);
    uint64_t seed = 0x1234567;
    for (uint64_t i = m->n; i-- > 0;) {
        const uint64_t n = m->t[i].ne[0] * m->t[i].ne[1];
        uint8_t *d = xmalloc((size_t)n * 4);
        for (uint64_t k = 0; k < n; k++) {
            /* roughly normal, with some outliers */
            double u = 0;
            for (int j = 0; j < 4; j++) u += (double)(rng(&seed) >> 11) / 9007199254740992.0;
            float v = (float)((u - 2.0) * 0.05);
            if (rng(&seed) % 997 == 0) v *= 20.0f;
            if (m->t[i].type == GGUF_TYPE_F16) mw_put_le16(d + 2 * k, mw_f32_to_f16(v));
            else {
                uint32_t b;
                v = 1.0f + v;
                memcpy(&b, &v, 4);
                mw_put_le32(d + 4 * k, b);
            }
        }
        ck_assert_int_eq(gguf_writer_write(w, d, (size_t)(n * (m->t[i].type == GGUF_TYPE_F16 ? 2 : 4)),
                                           &err),
                         MW_OK);
        free(d);
    }
    ck_assert_int_eq(gguf_writer_finish(w, &err), MW_OK);
    gguf_writer_free(w);
    free(m);
}

struct logbuf {
    char text[8192];
    size_t n;
};
static void logcb(void *ud, enum quant_log_level lvl, const char *msg)
{
    struct logbuf *l = ud;
    l->n += (size_t)snprintf(l->text + l->n, sizeof l->text - l->n, "%d:%s\n", (int)lvl, msg);
    if (l->n >= sizeof l->text) l->n = sizeof l->text - 1;
}

/* a source that streams through read() only (no data() view) */
static enum mw_status stream_only_read(void *ud, uint64_t i, quant_sink_fn sink, void *sink_ud,
                                       struct mw_err *err)
{
    const struct quant_source *inner = ud;
    /* deliver in odd chunk sizes */
    const uint8_t *d = inner->data(inner->ud, i);
    const struct quant_tensor_desc *t = &inner->tensors[i];
    uint64_t nb = 0;
    if (!gguf_tensor_nbytes(t->type, t->ne, &nb)) return MW_E_USAGE;
    for (uint64_t off = 0; off < nb;) {
        uint64_t n = 1 + (off * 7919) % 3001;
        if (n > nb - off) n = nb - off;
        enum mw_status s = sink(sink_ud, d + off, (size_t)n, err);
        if (s != MW_OK) return s;
        off += n;
    }
    return MW_OK;
}

static uint8_t *quant_to(const char *src_path, const char *out, const char *preset,
                         const struct quant_imatrix *im, unsigned threads, size_t slab,
                         bool streamed, uint64_t *n, struct logbuf *lb)
{
    struct mw_err err;
    struct gguf_file *f;
    ck_assert_int_eq(gguf_open(src_path, 0, &f, &err), MW_OK);
    struct quant_source src, s2;
    ck_assert_int_eq(quant_source_gguf(f, &src, &err), MW_OK);
    s2 = src;
    if (streamed) {
        s2.data = NULL;
        s2.release = NULL;
        s2.read = stream_only_read;
        s2.ud = &src;
    }
    struct quant_opts o = {.rules = rules_for(preset), .imatrix = im, .imatrix_file = "im.dat",
                           .n_threads = threads, .slab_bytes = slab, .log = logcb, .log_ud = lb};
    struct quant_plan *p;
    enum mw_status s = quant_plan_build(&s2, &o, &p, &err);
    ck_assert_msg(s == MW_OK, "plan: %s", err.msg);
    struct quant_stats st;
    s = quant_plan_write(p, out, &st, &err);
    ck_assert_msg(s == MW_OK, "write: %s", err.msg);
    quant_plan_free(p);
    quant_source_gguf_free(&src);
    gguf_close(f);
    uint8_t *b = slurp(out, n);
    ck_assert_uint_eq(*n, st.file_bytes);
    return b;
}

START_TEST(test_pipeline_threads)
{
    char src[512], out[512];
    snprintf(src, sizeof src, "%s/qp-src-%d-%d.gguf", tmpdir(), (int)getpid(), _i);
    snprintf(out, sizeof out, "%s/qp-out-%d-%d.gguf", tmpdir(), (int)getpid(), _i);
    write_model(src, 4);
    static const char *const presets[] = {"Q4_K_M", "Q2_K", "Q4_0", "Q8_0"};
    const char *preset = presets[_i];
    struct logbuf lb = {.n = 0};
    uint64_t n1, n;
    uint8_t *ref = quant_to(src, out, preset, NULL, 1, 0, false, &n1, &lb);
    const struct {
        unsigned th;
        size_t slab;
        bool streamed;
#ifdef MW_TEST_EMULATED /* qemu: the two that vary everything */
    } v[] = {{3, 1000, false}, {8, 4096, true}};
#else
    } v[] = {{2, 0, false}, {8, 0, false}, {3, 1000, false}, {8, 4096, true}, {1, 0, true}};
#endif
    for (size_t k = 0; k < sizeof v / sizeof v[0]; k++) {
        uint8_t *b = quant_to(src, out, preset, NULL, v[k].th, v[k].slab, v[k].streamed, &n, &lb);
        ck_assert_msg(n == n1 && memcmp(b, ref, (size_t)n) == 0,
                      "%s: threads %u slab %zu streamed %d differ from 1 thread", preset, v[k].th,
                      v[k].slab, v[k].streamed);
        free(b);
    }
    /* the output is a valid GGUF with llama-quantize's KV order */
    struct gguf_file *f;
    struct mw_err err;
    ck_assert_int_eq(gguf_open_mem(ref, n1, "out", 0, &f, &err), MW_OK);
    static const char *const keys[] = {
        "general.architecture", "llama.block_count", "llama.attention.head_count",
        "llama.attention.head_count_kv", "quantize.imatrix.file", "zz.last",
        "general.quantization_version", "general.file_type", "memwall.version",
        "memwall.quant.preset", "memwall.quant.method",
        "memwall.checksum.algorithm", "memwall.checksum.tensors", "memwall.checksum.header",
    };
    ck_assert_uint_eq(gguf_kv_count(f), sizeof keys / sizeof keys[0]);
    for (size_t k = 0; k < sizeof keys / sizeof keys[0]; k++)
        ck_assert_str_eq(gguf_kv_key(f, k), keys[k]);
    uint32_t ft;
    ck_assert_int_eq(gguf_get_u32(f, "general.file_type", &ft, &err), MW_OK);
    ck_assert_uint_eq(ft, quant_preset_find(preset)->ftype);
    ck_assert_str_eq(gguf_tensor_get(f, 0)->name, "output.weight");
    ck_assert_str_eq(gguf_tensor_get(f, 3)->name, "blk.0.attn_k.weight");
    /* every type decodes to finite values */
    for (uint64_t i = 0; i < gguf_tensor_count(f); i++) {
        const struct gguf_tensor *t = gguf_tensor_get(f, i);
        const struct quant_traits *qt = quant_traits_get(t->type);
        ck_assert_ptr_nonnull(qt);
        const uint64_t ne = t->ne[0] * t->ne[1];
        float *x = xmalloc((size_t)ne * 4);
        qt->to_float(gguf_tensor_data(f, i), x, ne);
        uint64_t bad = 0; /* (no ck_assert per element: Check logs every call) */
        for (uint64_t k = 0; k < ne; k++) bad += !isfinite(x[k]);
        ck_assert_msg(bad == 0, "%s: %llu non-finite values", t->name, (unsigned long long)bad);
        free(x);
    }
    gguf_close(f);
    free(ref);
    unlink(src);
    unlink(out);
}
END_TEST

/* An imatrix in memory (legacy format): entries for the given names. */
static struct quant_imatrix *mk_imatrix(const char *const *names, const int32_t *lens, int n)
{
    struct buf b = {0};
    put_i32(&b, n);
    for (int i = 0; i < n; i++) {
        put_i32(&b, (int32_t)strlen(names[i]));
        put(&b, names[i], strlen(names[i]));
        put_i32(&b, 1);
        put_i32(&b, lens[i]);
        for (int j = 0; j < lens[i]; j++) put_f32(&b, 0.5f + (float)(j % 7));
    }
    struct quant_imatrix *im = NULL;
    struct mw_err err;
    ck_assert_int_eq(quant_imatrix_load_mem(b.p, b.n, "mem.dat", &im, &err), MW_OK);
    free(b.p);
    return im;
}

START_TEST(test_pipeline_imatrix)
{
    char src[512], out[512];
    snprintf(src, sizeof src, "%s/qp-isrc-%d.gguf", tmpdir(), (int)getpid());
    snprintf(out, sizeof out, "%s/qp-iout-%d.gguf", tmpdir(), (int)getpid());
    write_model(src, 2);
    struct mw_err err;
    char msg[1024];
    /* good entries, an unknown name (warning), missing entries (notices) */
    const char *names[] = {"blk.0.attn_q.weight", "blk.0.ffn_down.weight", "blk.9.nothing.weight"};
    const int32_t lens[] = {256, 512, 64};
    struct quant_imatrix *im = mk_imatrix(names, lens, 3);
    struct logbuf lb = {.n = 0};
    uint64_t n, n2;
    uint8_t *a = quant_to(src, out, "Q4_K_M", im, 2, 0, false, &n, &lb);
    ck_assert_msg(strstr(lb.text, "2:imatrix entry 'blk.9.nothing.weight' names no tensor") != NULL,
                  "%s", lb.text);
    ck_assert_msg(strstr(lb.text, "1:tensor 'blk.1.attn_q.weight': no imatrix entry") != NULL,
                  "%s", lb.text);
    uint8_t *b = quant_to(src, out, "Q4_K_M", NULL, 2, 0, false, &n2, &lb);
    ck_assert(n != n2 || memcmp(a, b, (size_t)n) != 0); /* the imatrix changed something */
    struct gguf_file *f;
    ck_assert_int_eq(gguf_open_mem(a, n, "out", 0, &f, &err), MW_OK);
    const char *s;
    uint64_t sl;
    ck_assert_int_eq(gguf_get_str(f, "memwall.quant.method", &s, &sl, &err), MW_OK);
    ck_assert(sl == 7 && memcmp(s, "imatrix", 7) == 0);
    ck_assert_int_eq(gguf_get_str(f, "quantize.imatrix.file", &s, &sl, &err), MW_OK);
    ck_assert(sl == 6 && memcmp(s, "im.dat", 6) == 0);
    uint32_t ec;
    ck_assert_int_eq(gguf_get_u32(f, "quantize.imatrix.entries_count", &ec, &err), MW_OK);
    ck_assert_uint_eq(ec, 3);
    ck_assert_int_ge(gguf_kv_find(f, "memwall.quant.imatrix_xxh3"), 0);
    gguf_close(f);
    free(a);
    free(b);
    quant_imatrix_free(im);

    /* a wrong length: error naming the tensor, expected and actual length */
    const int32_t bad[] = {256, 500, 64};
    im = mk_imatrix(names, bad, 3);
    struct gguf_file *sf;
    ck_assert_int_eq(gguf_open(src, 0, &sf, &err), MW_OK);
    struct quant_source qs;
    ck_assert_int_eq(quant_source_gguf(sf, &qs, &err), MW_OK);
    struct quant_opts o = {.rules = rules_for("Q4_K_M"), .imatrix = im, .n_threads = 1};
    struct quant_plan *p = NULL;
    ck_assert_int_eq(quant_plan_build(&qs, &o, &p, &err), MW_E_FORMAT);
    mw_err_format(&err, msg, sizeof msg);
    ck_assert_msg(strstr(msg, "tensor 'blk.0.ffn_down.weight'") &&
                      strstr(msg, "has 500 values, expected 512"),
                  "%s", msg);
    ck_assert_ptr_null(p);
    quant_imatrix_free(im);
    /* the token embedding is the exception: a notice, quantized without */
    const char *en[] = {"token_embd.weight"};
    const int32_t el[] = {7};
    im = mk_imatrix(en, el, 1);
    o.imatrix = im;
    lb.n = 0;
    o.log = logcb;
    o.log_ud = &lb;
    ck_assert_int_eq(quant_plan_build(&qs, &o, &p, &err), MW_OK);
    ck_assert_msg(strstr(lb.text, "1:tensor 'token_embd.weight': imatrix entry has 7 values"),
                  "%s", lb.text);
    for (uint64_t i = 0; i < quant_plan_count(p); i++) ck_assert_ptr_null(quant_plan_get(p, i)->imatrix);
    quant_plan_free(p);
    quant_imatrix_free(im);
    /* already quantized sources need --allow-requantize */
    quant_source_gguf_free(&qs);
    gguf_close(sf);
    a = quant_to(src, out, "Q8_0", NULL, 1, 0, false, &n, &lb);
    free(a);
    ck_assert_int_eq(gguf_open(out, 0, &sf, &err), MW_OK);
    ck_assert_int_eq(quant_source_gguf(sf, &qs, &err), MW_OK);
    o = (struct quant_opts){.rules = rules_for("Q4_K_M"), .n_threads = 1};
    ck_assert_int_eq(quant_plan_build(&qs, &o, &p, &err), MW_E_UNSUPPORTED);
    ck_assert_ptr_nonnull(strstr(err.msg, "requantizing from type q8_0 is disabled"));
    o.allow_requantize = true;
    ck_assert_int_eq(quant_plan_build(&qs, &o, &p, &err), MW_OK);
    quant_plan_free(p);
    quant_source_gguf_free(&qs);
    gguf_close(sf);
    unlink(src);
    unlink(out);
}
END_TEST

/* The pipeline refuses what llama-quantize refuses: Q2_K_S (its Q2_K
 * tensors need an imatrix) without one, or with one that lacks an entry. */
START_TEST(test_pipeline_requires_imatrix)
{
    char src[512], out[512], msg[1024];
    snprintf(src, sizeof src, "%s/qp-rsrc-%d.gguf", tmpdir(), (int)getpid());
    snprintf(out, sizeof out, "%s/qp-rout-%d.gguf", tmpdir(), (int)getpid());
    write_model(src, 2);
    struct mw_err err;
    struct gguf_file *sf;
    ck_assert_int_eq(gguf_open(src, 0, &sf, &err), MW_OK);
    struct quant_source qs;
    ck_assert_int_eq(quant_source_gguf(sf, &qs, &err), MW_OK);
    struct quant_opts o = {.rules = rules_for("Q2_K_S"), .n_threads = 1, .imatrix_file = "im.dat"};
    struct quant_plan *p = NULL;
    ck_assert_int_eq(quant_plan_build(&qs, &o, &p, &err), MW_OK); /* a plan: dry runs list it */
    ck_assert_int_eq(quant_plan_check_imatrix(p, &err), MW_E_USAGE);
    mw_err_format(&err, msg, sizeof msg);
    ck_assert_msg(strstr(msg, "tensor 'blk.0.attn_k.weight'") &&
                      strstr(msg, "preset Q2_K_S needs an importance matrix") &&
                      strstr(msg, "--imatrix") && strstr(msg, "--corpus"),
                  "%s", msg);
    unlink(out);
    ck_assert_int_eq(quant_plan_write(p, out, NULL, &err), MW_E_USAGE);
    ck_assert_int_ne(access(out, F_OK), 0);
    quant_plan_free(p);
    /* a budget allocation's plan is memwall's own mix: exempt */
    o.budget = "bpw=3";
    ck_assert_int_eq(quant_plan_build(&qs, &o, &p, &err), MW_OK);
    ck_assert_int_eq(quant_plan_check_imatrix(p, &err), MW_OK);
    quant_plan_free(p);
    o.budget = NULL;
    /* an imatrix with every entry but one */
    const char *names[] = {"blk.0.attn_k.weight", "blk.0.attn_output.weight",
                           "blk.0.attn_q.weight", "blk.0.attn_v.weight",
                           "blk.0.ffn_down.weight", "blk.0.ffn_gate.weight",
                           "blk.0.ffn_up.weight", "blk.1.attn_k.weight",
                           "blk.1.attn_output.weight", "blk.1.attn_q.weight",
                           "blk.1.attn_v.weight", "blk.1.ffn_down.weight",
                           "blk.1.ffn_gate.weight", "blk.1.ffn_up.weight"};
    const int32_t lens[] = {256, 256, 256, 256, 512, 256, 256, 256, 256, 256, 256, 512, 256, 256};
    const int n = (int)(sizeof names / sizeof names[0]);
    for (int skip = 0; skip <= 1; skip++) {
        const char *nm[16];
        int32_t ln[16];
        int k = 0;
        for (int i = 0; i < n; i++)
            if (!(skip && strcmp(names[i], "blk.1.ffn_gate.weight") == 0)) {
                nm[k] = names[i];
                ln[k++] = lens[i];
            }
        struct quant_imatrix *im = mk_imatrix(nm, ln, k);
        o.imatrix = im;
        ck_assert_int_eq(quant_plan_build(&qs, &o, &p, &err), MW_OK);
        if (skip) {
            ck_assert_int_eq(quant_plan_check_imatrix(p, &err), MW_E_FORMAT);
            mw_err_format(&err, msg, sizeof msg);
            ck_assert_msg(strstr(msg, "tensor 'blk.1.ffn_gate.weight'") &&
                              strstr(msg, "no usable imatrix entry") && strstr(msg, "Q2_K_S"),
                          "%s", msg);
            ck_assert_int_eq(quant_plan_write(p, out, NULL, &err), MW_E_FORMAT);
        } else {
            ck_assert_int_eq(quant_plan_check_imatrix(p, &err), MW_OK);
            ck_assert_int_eq(quant_plan_write(p, out, NULL, &err), MW_OK);
        }
        quant_plan_free(p);
        quant_imatrix_free(im);
    }
    /* Q2_K: no requirement */
    o = (struct quant_opts){.rules = rules_for("Q2_K"), .n_threads = 1};
    ck_assert_int_eq(quant_plan_build(&qs, &o, &p, &err), MW_OK);
    ck_assert_int_eq(quant_plan_check_imatrix(p, &err), MW_OK);
    quant_plan_free(p);
    quant_source_gguf_free(&qs);
    gguf_close(sf);
    unlink(src);
    unlink(out);
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("quant_preset");
    TCase *tc = tcase_create("rules");
    tcase_add_test(tc, test_order);
    tcase_add_loop_test(tc, test_tiny_golden, 0, N_GOLDEN);
    tcase_add_loop_test(tc, test_sizes, 0, (int)(sizeof sizes / sizeof sizes[0]));
    tcase_add_loop_test(tc, test_70b, 0, (int)(sizeof counts70 / sizeof counts70[0]));
    tcase_add_loop_test(tc, test_moe, 0, (int)(sizeof moe_rows / sizeof moe_rows[0]));
    tcase_add_test(tc, test_requires_imatrix);
    tcase_add_test(tc, test_fallback);
    tcase_add_test(tc, test_override);
    tcase_add_test(tc, test_quantizable);
    tcase_add_test(tc, test_decode_bytes);
    suite_add_tcase(s, tc);
    TCase *ti = tcase_create("imatrix");
    tcase_set_timeout(ti, 60);
    tcase_add_test(ti, test_imatrix_gguf);
    tcase_add_test(ti, test_imatrix_bad);
    suite_add_tcase(s, ti);
    TCase *tp = tcase_create("pipeline");
    tcase_set_timeout(tp, 60);
#ifdef MW_TEST_EMULATED /* qemu: Q4_K_M and Q2_K (k-quants); natively Q4_0 and Q8_0 too */
    tcase_add_loop_test(tp, test_pipeline_threads, 0, 2);
#else
    tcase_add_loop_test(tp, test_pipeline_threads, 0, 4);
#endif
    tcase_add_test(tp, test_pipeline_imatrix);
    tcase_add_test(tp, test_pipeline_requires_imatrix);
    suite_add_tcase(s, tp);
    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(suite());
    srunner_run_all(sr, CK_NORMAL);
    const int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? 1 : 0;
}
