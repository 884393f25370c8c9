/*
 * tests/tools/gen_iq_vectors.c — makes the i-quant test vectors of
 * datasets/testvectors/ from the llama.cpp peer's ggml (node-llama-cpp
 * 3.21.1, llama.cpp 80fb11ac): data only, through ggml's public API
 * (ggml_quantize_chunk and the type traits' to_float). Not part of the build;
 * tests/tools/gen_iq_vectors.sh compiles and runs it against .peer/.
 *
 *   gen_iq_vectors DIR      (DIR holds inputs.f32 and importance.f32)
 *
 * For each i-quant type T it writes, in the layout of the existing vectors
 * (datasets/testvectors/README.md):
 *   T.plain.bin / T.plain.deq.f32        (only where ggml quantizes without
 *                                         an imatrix)
 *   T.weighted.bin / T.weighted.deq.f32  (importance.f32 per column)
 *   T.random.bin / T.random.deq.f32      (random blocks, kept when every
 *                                         decoded value is finite, |v| <= 1e6)
 *   T.lcg.sha256-input: the §4.5 LCG input's 4 x 512 output, plain and
 *   weighted, as T.lcg.plain.bin / T.lcg.weighted.bin
 * and prints one MANIFEST.tsv line per type.
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ggml.h"

#define ROWS 16
#define ROWLEN 256

static void die(const char *m, const char *a)
{
    fprintf(stderr, "gen_iq_vectors: %s %s\n", m, a ? a : "");
    exit(1);
}

static void rd(const char *dir, const char *name, void *buf, size_t n)
{
    char p[4096];
    snprintf(p, sizeof p, "%s/%s", dir, name);
    FILE *f = fopen(p, "rb");
    if (!f || fread(buf, 1, n, f) != n) die("cannot read", p);
    fclose(f);
}

static void wr(const char *dir, const char *t, const char *suffix, const void *buf, size_t n)
{
    char p[4096];
    snprintf(p, sizeof p, "%s/%s.%s", dir, t, suffix);
    FILE *f = fopen(p, "wb");
    if (!f || fwrite(buf, 1, n, f) != n || fclose(f) != 0) die("cannot write", p);
}

static uint64_t rng = 0x9E3779B97F4A7C15ull;
static uint32_t next32(void)
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return (uint32_t)(rng >> 16);
}

int main(int argc, char **argv)
{
    if (argc != 2) die("usage: gen_iq_vectors DIR", NULL);
    const char *dir = argv[1];
    static float x[ROWS * ROWLEN], imp[ROWLEN], deq[ROWS * ROWLEN];
    rd(dir, "inputs.f32", x, sizeof x);
    rd(dir, "importance.f32", imp, sizeof imp);

    /* docs/formats.md §4.5's LCG input (4 x 512) and its weights */
    static float lx[2048], lw[512];
    uint32_t st = 12345;
    for (int i = 0; i < 2048; i++) {
        st = st * 1664525u + 1013904223u;
        const int32_t v = (int32_t)(st >> 8) - 8388608;
        lx[i] = (float)v / 8388608.0f;
        if (i % 37 == 0) lx[i] *= 4.0f;
    }
    for (int j = 0; j < 512; j++) lw[j] = 1.0f + 0.25f * (float)(j % 5);

    const struct {
        enum ggml_type t;
        const char *name;
    } types[] = {
        {GGML_TYPE_IQ2_XXS, "iq2_xxs"}, {GGML_TYPE_IQ2_XS, "iq2_xs"}, {GGML_TYPE_IQ2_S, "iq2_s"},
        {GGML_TYPE_IQ3_XXS, "iq3_xxs"}, {GGML_TYPE_IQ3_S, "iq3_s"},   {GGML_TYPE_IQ1_S, "iq1_s"},
        {GGML_TYPE_IQ1_M, "iq1_m"},     {GGML_TYPE_IQ4_XS, "iq4_xs"},
    };
    static uint8_t q[ROWS * ROWLEN * 4], lq[2048 * 4];
    for (size_t k = 0; k < sizeof types / sizeof types[0]; k++) {
        const enum ggml_type t = types[k].t;
        const char *nm = types[k].name;
        const struct ggml_type_traits *tr = ggml_get_type_traits(t);
        const size_t rb = ggml_row_size(t, ROWLEN);
        const int plain = !ggml_quantize_requires_imatrix(t);
        ggml_quantize_init(t);
        if (plain) {
            ggml_quantize_chunk(t, x, q, 0, ROWS, ROWLEN, NULL);
            wr(dir, nm, "plain.bin", q, rb * ROWS);
            tr->to_float(q, deq, ROWS * ROWLEN);
            wr(dir, nm, "plain.deq.f32", deq, sizeof deq);
            const size_t lb = ggml_quantize_chunk(t, lx, lq, 0, 4, 512, NULL);
            wr(dir, nm, "lcg.plain.bin", lq, lb);
        }
        static float qw[ROWLEN];
        memcpy(qw, imp, sizeof qw);
        ggml_quantize_chunk(t, x, q, 0, ROWS, ROWLEN, qw);
        wr(dir, nm, "weighted.bin", q, rb * ROWS);
        tr->to_float(q, deq, ROWS * ROWLEN);
        wr(dir, nm, "weighted.deq.f32", deq, sizeof deq);
        const size_t lb = ggml_quantize_chunk(t, lx, lq, 0, 4, 512, lw);
        wr(dir, nm, "lcg.weighted.bin", lq, lb);

        /* random blocks: rows of random bytes whose decoding is finite and
         * bounded; the f16 scale kept small so that most rows pass */
        int kept = 0, tries = 0;
        static uint8_t rq[ROWS * ROWLEN * 4];
        while (kept < ROWS && tries < 100000) {
            tries++;
            uint8_t *r = rq + (size_t)kept * rb;
            for (size_t b = 0; b < rb; b++) r[b] = (uint8_t)next32();
            float d[ROWLEN];
            tr->to_float(r, d, ROWLEN);
            int ok = 1;
            for (int j = 0; j < ROWLEN; j++)
                if (!isfinite(d[j]) || fabsf(d[j]) > 1e6f) ok = 0;
            if (ok) kept++;
        }
        if (kept < ROWS) die("too few finite random rows for", nm);
        wr(dir, nm, "random.bin", rq, rb * ROWS);
        tr->to_float(rq, deq, ROWS * ROWLEN);
        wr(dir, nm, "random.deq.f32", deq, sizeof deq);
        printf("%s\t%d\t%lld\t%zu\t%d\t%d\t%s\n", nm, (int)t, (long long)ggml_blck_size(t),
               ggml_type_size(t), ROWS, ROWLEN, plain ? "plain+weighted" : "weighted");
    }
    return 0;
}
