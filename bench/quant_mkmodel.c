/*
 * bench/quant_mkmodel.c — a synthetic llama-shaped F16 GGUF for
 * bench/quant_bench.sh: real shapes (default: TinyLlama-1.1B's — 22 layers,
 * 2048 wide, n_ff 5632, 32 heads, 4 kv heads, vocab 32000: 2.2 GB of F16),
 * random weights N(0, 0.02) with rare 10x outliers, F32 norms, the KVs
 * llama.cpp's quantizer needs to load it. Not a model anyone can run: a
 * file of the right size and shape for throughput figures.
 *
 *   quant_mkmodel OUT.gguf [LAYERS [EMBD FF HEADS KV_HEADS VOCAB [TOK.gguf]]]
 *
 * TOK.gguf: copy its tokenizer.* KVs (VOCAB must equal its token count), so
 * that calibration (memwall quant --corpus, bench/scale_bench.sh) can
 * tokenize text for the synthetic model.
 *
 * Deterministic (fixed seed). Written with memwall's gguf writer.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gguf/gguf.h"

static uint64_t rng(uint64_t *s)
{
    *s ^= *s >> 12;
    *s ^= *s << 25;
    *s ^= *s >> 27;
    return *s * 0x2545F4914F6CDD1DULL;
}

static unsigned long arg(int argc, char **argv, int i, unsigned long dflt)
{
    if (i >= argc) return dflt;
    char *end;
    const unsigned long v = strtoul(argv[i], &end, 10);
    if (*end || v == 0) {
        fprintf(stderr, "quant_mkmodel: bad number '%s'\n", argv[i]);
        exit(2);
    }
    return v;
}

#define CHECK(expr)                                                          \
    do {                                                                     \
        if ((expr) != MW_OK) {                                               \
            char b_[1024];                                                   \
            fprintf(stderr, "quant_mkmodel: %s\n", mw_err_format(&err, b_, sizeof b_)); \
            return 1;                                                        \
        }                                                                    \
    } while (0)

struct t {
    char name[64];
    uint32_t nd;
    uint64_t ne[2];
};

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: quant_mkmodel OUT.gguf [LAYERS [EMBD FF HEADS KV_HEADS VOCAB "
                        "[TOK.gguf]]]\n");
        return 2;
    }
    const uint64_t nl = arg(argc, argv, 2, 22), embd = arg(argc, argv, 3, 2048),
                   ff = arg(argc, argv, 4, 5632), nh = arg(argc, argv, 5, 32),
                   nkv = arg(argc, argv, 6, 4), vocab = arg(argc, argv, 7, 32000);
    const uint64_t kvd = embd / nh * nkv;
    struct mw_err err;
    mw_err_clear(&err);
    struct gguf_writer *w;
    CHECK(gguf_writer_init(&w, &err));
    CHECK(gguf_writer_set_str(w, "general.architecture", "llama", &err));
    CHECK(gguf_writer_set_str(w, "general.name", "synthetic", &err));
    CHECK(gguf_writer_set_u32(w, "llama.block_count", (uint32_t)nl, &err));
    CHECK(gguf_writer_set_u32(w, "llama.context_length", 2048, &err));
    CHECK(gguf_writer_set_u32(w, "llama.embedding_length", (uint32_t)embd, &err));
    CHECK(gguf_writer_set_u32(w, "llama.feed_forward_length", (uint32_t)ff, &err));
    CHECK(gguf_writer_set_u32(w, "llama.attention.head_count", (uint32_t)nh, &err));
    CHECK(gguf_writer_set_u32(w, "llama.attention.head_count_kv", (uint32_t)nkv, &err));
    CHECK(gguf_writer_set_f32(w, "llama.rope.freq_base", 10000.0f, &err));
    CHECK(gguf_writer_set_f32(w, "llama.attention.layer_norm_rms_epsilon", 1e-5f, &err));
    CHECK(gguf_writer_set_u32(w, "general.file_type", 1, &err));
    CHECK(gguf_writer_set_u32(w, "llama.vocab_size", (uint32_t)vocab, &err));
    CHECK(gguf_writer_set_u32(w, "llama.rope.dimension_count", (uint32_t)(embd / nh), &err));
    CHECK(gguf_writer_set_u32(w, "general.quantization_version", 2, &err));
    struct gguf_file *tokf = NULL;
    if (argc > 8) {
        CHECK(gguf_open(argv[8], GGUF_OPEN_DEFAULT, &tokf, &err));
        for (uint64_t i = 0; i < gguf_kv_count(tokf); i++)
            if (strncmp(gguf_kv_key(tokf, i), "tokenizer.", 10) == 0)
                CHECK(gguf_writer_copy_kv(w, tokf, i, &err));
    }

    const size_t nt = 3 + 9 * (size_t)nl;
    struct t *ts = calloc(nt, sizeof *ts);
    if (!ts) return 1;
    size_t k = 0;
#define T(nm, d, a, b) (snprintf(ts[k].name, 64, "%s", nm), ts[k].nd = d, ts[k].ne[0] = a, ts[k].ne[1] = b, k++)
    T("token_embd.weight", 2, embd, vocab);
    T("output_norm.weight", 1, embd, 1);
    T("output.weight", 2, embd, vocab);
    char nm[64];
    for (uint64_t l = 0; l < nl; l++) {
#define L(x, d, a, b) (snprintf(nm, sizeof nm, "blk.%llu." x, (unsigned long long)l), T(nm, d, a, b))
        L("attn_norm.weight", 1, embd, 1);
        L("attn_q.weight", 2, embd, embd);
        L("attn_k.weight", 2, embd, kvd);
        L("attn_v.weight", 2, embd, kvd);
        L("attn_output.weight", 2, embd, embd);
        L("ffn_norm.weight", 1, embd, 1);
        L("ffn_gate.weight", 2, embd, ff);
        L("ffn_up.weight", 2, embd, ff);
        L("ffn_down.weight", 2, ff, embd);
    }
    for (size_t i = 0; i < nt; i++)
        CHECK(gguf_writer_add_tensor(w, ts[i].name, ts[i].nd == 1 ? GGUF_TYPE_F32 : GGUF_TYPE_F16,
                                     ts[i].nd, ts[i].ne, &err));
    CHECK(gguf_writer_open(w, argv[1], &err));

    /* 64 Ki precomputed f16 values N(0, 0.02) (Box-Muller), a few 10x */
    uint16_t *tab = malloc(65536 * sizeof *tab);
    uint8_t *buf = malloc((size_t)1 << 22);
    if (!tab || !buf) return 1;
    uint64_t s = 0x9E3779B97F4A7C15ULL;
    for (int i = 0; i < 65536; i++) {
        const double u1 = ((double)(rng(&s) >> 11) + 1.0) / 9007199254740993.0;
        const double u2 = (double)(rng(&s) >> 11) / 9007199254740992.0;
        double v = 0.02 * sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2);
        if (i % 4099 == 0) v *= 10.0;
        tab[i] = mw_f32_to_f16((float)v);
    }
    for (size_t i = 0; i < nt; i++) {
        const uint64_t n = ts[i].ne[0] * ts[i].ne[1];
        const uint64_t es = ts[i].nd == 1 ? 4 : 2;
        for (uint64_t done = 0; done < n;) {
            uint64_t m = ((uint64_t)1 << 22) / es;
            if (m > n - done) m = n - done;
            for (uint64_t j = 0; j < m; j++) {
                if (es == 2) {
                    mw_put_le16(buf + 2 * j, tab[rng(&s) >> 48]);
                } else {
                    const float one = 1.0f;
                    uint32_t u;
                    memcpy(&u, &one, 4);
                    mw_put_le32(buf + 4 * j, u);
                }
            }
            CHECK(gguf_writer_write(w, buf, (size_t)(m * es), &err));
            done += m;
        }
    }
    CHECK(gguf_writer_finish(w, &err));
    gguf_writer_free(w);
    if (tokf) gguf_close(tokf);
    free(tab);
    free(buf);
    free(ts);
    return 0;
}
