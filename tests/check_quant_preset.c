/*
 * tests/check_quant_preset.c — `memwall quant` as a library: presets and
 * per-tensor type rules (importance matrices and the streaming pipeline are
 * check_quant_pipeline's).
 *
 *   order     llama-quantize's tensor order (docs/formats.md §1.10)
 *   tiny      tinyllama-8m (8 layers, gqa 2): the types of every preset, with
 *             and without imatrix, equal llama.cpp's own (golden lists taken
 *             from llama-quantize's output files, see golden[] below)
 *   sizes     Llama-2-7B / Llama-3-8B shapes: the bytes of every preset equal
 *             docs/formats.md §8.4's cross-check table (GiB and bpw to 3 decimals)
 *   70b       80 layers, gqa 8: attn_v per preset (the 70B rule)
 *   delta_net Qwen3.5-0.8B's tensor table: attn_qkv counted as attn_v, the
 *             MTP block in block_count, the ssm tensors
 *   fallback  row lengths not a multiple of 256 / 32 (§5), tied embeddings
 *   override  --type-override / --pure / output and token-embedding types
 */
#define _POSIX_C_SOURCE 200809L
#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "quant/quant.h"

#include "check_common.h"
#include "check_quant_model.h"

static const char *tname(uint32_t t) { return gguf_type_get(t)->name; }

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

/* The gated delta net (Qwen3.5-0.8B's tensor table: 24 layers, every 4th
 * full attention, the MTP block as blk.24, block_count 25) under Q4_K_M:
 * the linear layers' attn_qkv is attn_v-like and shares its running count
 * with attn_v (25 in all, the MTP block's last); ffn_down counts the MTP
 * block's layer; conv, ssm_a, ssm_dt, norms keep their type; the ssm
 * projections take the default. Cross-checked against libllama by
 * tests/e2e/quant_qwen35.sh (every preset, the real shapes). */
START_TEST(test_delta_net)
{
    struct model *m = xmalloc(sizeof *m);
    memset(m, 0, sizeof *m);
    snprintf(m->mi.arch, sizeof m->mi.arch, "qwen35");
    m->mi.n_layer = 25;
    m->mi.n_head = 8;
    m->mi.n_head_kv = 2;
    const uint64_t E = 1024, F = 3584, conv = 6144, vd = 2048, hd = 256;
    add(m, "token_embd.weight", 2, E, 248320);
    add(m, "output_norm.weight", 1, E, 1);
    char nm[64];
    for (uint32_t l = 0; l < 25; l++) {
#define L(x, nd, a, b) (snprintf(nm, sizeof nm, "blk.%u." x, l), add(m, nm, nd, a, b))
        L("attn_norm.weight", 1, E, 1);
        L("post_attention_norm.weight", 1, E, 1);
        if (l < 24 && (l + 1) % 4 != 0) {
            L("attn_qkv.weight", 2, E, conv);
            L("attn_gate.weight", 2, E, vd);
            L("ssm_conv1d.weight", 2, 4, conv);
            m->t[m->n - 1].type = GGUF_TYPE_F32;
            L("ssm_dt.bias", 1, 16, 1);
            L("ssm_a", 1, 16, 1);
            L("ssm_norm.weight", 1, 128, 1);
            L("ssm_beta.weight", 2, E, 16);
            L("ssm_alpha.weight", 2, E, 16);
            L("ssm_out.weight", 2, vd, E);
        } else {
            L("attn_q.weight", 2, E, 2 * 8 * hd);
            L("attn_k.weight", 2, E, 2 * hd);
            L("attn_v.weight", 2, E, 2 * hd);
            L("attn_output.weight", 2, 8 * hd, E);
            L("attn_q_norm.weight", 1, hd, 1);
            L("attn_k_norm.weight", 1, hd, 1);
        }
        L("ffn_gate.weight", 2, E, F);
        L("ffn_up.weight", 2, E, F);
        L("ffn_down.weight", 2, F, E);
        if (l == 24) {
            L("nextn.eh_proj.weight", 2, 2 * E, E);
            L("nextn.enorm.weight", 1, E, 1);
            L("nextn.hnorm.weight", 1, E, 1);
            L("nextn.shared_head_norm.weight", 1, E, 1);
        }
#undef L
    }
    qsort(m->t, (size_t)m->n, sizeof m->t[0], desc_cmp);
    struct quant_rules r = rules_for("Q4_K_M");
    struct quant_choice *c = xmalloc(sizeof *c * (size_t)m->n);
    choose(m, &r, c);
    static const struct {
        const char *name, *type;
    } want[] = {
        {"token_embd.weight", "q6_K"},          {"blk.0.attn_qkv.weight", "q6_K"},
        {"blk.2.attn_qkv.weight", "q6_K"},      {"blk.3.attn_v.weight", "q4_K"},
        {"blk.4.attn_qkv.weight", "q4_K"},      {"blk.5.attn_qkv.weight", "q6_K"},
        {"blk.8.attn_qkv.weight", "q6_K"},      {"blk.22.attn_qkv.weight", "q6_K"},
        {"blk.24.attn_v.weight", "q6_K"},       {"blk.24.ffn_down.weight", "q6_K"},
        {"blk.19.ffn_down.weight", "q4_K"},     {"blk.20.ffn_down.weight", "q6_K"},
        {"blk.22.ffn_down.weight", "q6_K"},     {"blk.24.nextn.eh_proj.weight", "q4_K"},
        {"blk.24.attn_q.weight", "q4_K"},       {"blk.0.attn_gate.weight", "q4_K"},
        {"blk.0.ssm_alpha.weight", "q4_K"},     {"blk.0.ssm_beta.weight", "q4_K"},
        {"blk.0.ssm_out.weight", "q4_K"},       {"blk.0.ssm_conv1d.weight", "f32"},
        {"blk.0.ssm_a", "f32"},                 {"blk.0.ssm_dt.bias", "f32"},
        {"blk.0.ssm_norm.weight", "f32"},       {"blk.24.nextn.enorm.weight", "f32"},
    };
    for (size_t k = 0; k < sizeof want / sizeof want[0]; k++) {
        const int64_t i = find(m, want[k].name);
        ck_assert_msg(i >= 0, "%s missing", want[k].name);
        ck_assert_msg(strcmp(tname(c[i].type), want[k].type) == 0, "%s: %s, want %s",
                      want[k].name, tname(c[i].type), want[k].type);
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

static Suite *suite(void)
{
    Suite *s = suite_create("quant_preset");
    TCase *tc = tcase_create("rules");
    tcase_add_test(tc, test_order);
    tcase_add_loop_test(tc, test_tiny_golden, 0, N_GOLDEN);
    tcase_add_loop_test(tc, test_sizes, 0, (int)(sizeof sizes / sizeof sizes[0]));
    tcase_add_loop_test(tc, test_70b, 0, (int)(sizeof counts70 / sizeof counts70[0]));
    tcase_add_loop_test(tc, test_moe, 0, (int)(sizeof moe_rows / sizeof moe_rows[0]));
    tcase_add_test(tc, test_delta_net);
    tcase_add_test(tc, test_requires_imatrix);
    tcase_add_test(tc, test_fallback);
    tcase_add_test(tc, test_override);
    tcase_add_test(tc, test_quantizable);
    tcase_add_test(tc, test_decode_bytes);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    return run_suite(suite());
}
