/*
 * Unit tests for runtime/'s forward pass (the kernels are check_rt_kernels',
 * model loading, tokenizers and sampling check_runtime_model's):
 * thread-count, batch-size and token-by-token invariance, no allocation in
 * rt_eval, reference logits of tinyllama-8m, the KV cache (q8_0, the
 * sliding-window shift), the Qwen3 / Gemma 2-3 / Phi-3 families' ops,
 * windows and memory; mixture of experts: routing as llama.cpp (argsort
 * ties, softmax, normalization, the shared-expert gate), the same
 * invariances, weight and scratch accounting, and the resident pages of a
 * mapped MoE file after a few tokens (only the routed experts', mincore()).
 *
 * malloc/calloc/realloc are wrapped at link time (-Wl,--wrap) so a test can
 * count allocations made inside rt_eval.
 */
#define _GNU_SOURCE
#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "gguf/gguf.h"
#include "runtime/rt.h"
#include "runtime/rt_int.h"
#include "runtime/rt_ops.h"
#include "runtime/rt_tok_int.h"
#include "tools/rt_fixture.h"

#include "check_common.h"
#include "check_runtime_common.h"

// --- allocation counting (link-time wrap) ---

static volatile long n_allocs; /* test-only counter; tests run in forked children */
void *__real_malloc(size_t n);
void *__real_calloc(size_t a, size_t b);
void *__real_realloc(void *p, size_t n);
void *__wrap_malloc(size_t n);
void *__wrap_calloc(size_t a, size_t b);
void *__wrap_realloc(void *p, size_t n);
void *__wrap_malloc(size_t n)
{
    n_allocs++;
    return __real_malloc(n);
}
void *__wrap_calloc(size_t a, size_t b)
{
    n_allocs++;
    return __real_calloc(a, b);
}
void *__wrap_realloc(void *p, size_t n)
{
    n_allocs++;
    return __real_realloc(p, n);
}

// --- forward ---

static void eval_ok(struct rt_ctx *c, const int32_t *t, uint32_t n, uint32_t from, float *lg)
{
    struct mw_err err;
    mw_err_clear(&err);
    char buf[1024];
    ck_assert_msg(rt_eval(c, t, n, from, lg, &err) == MW_OK, "%s",
                  mw_err_format(&err, buf, sizeof buf));
}

static float max_abs_diff(const float *a, const float *b, size_t n)
{
    float d = 0;
    for (size_t i = 0; i < n; i++) d = fmaxf(d, fabsf(a[i] - b[i]));
    return d;
}

#define NT 24  /* < RT_FA_TILE: one call takes the single-query attention */
#define NT_BIG 100 /* >= RT_FA_TILE: the tiled attention */

static void fixture_tokens(int32_t *t, uint32_t n, uint32_t n_vocab)
{
    for (uint32_t i = 0; i < n; i++) t[i] = (int32_t)((i * 37 + 5) % n_vocab);
}

/* Logits of n tokens with the given options: one rt_eval call, or one per
 * token. */
static float *run_all(const char *path, struct rt_ctx_opts co, uint32_t n, bool one_by_one)
{
    struct loaded L;
    load(path, &co, &L);
    const uint32_t nv = rt_model_hparams(L.m)->n_vocab;
    int32_t t[NT_BIG];
    fixture_tokens(t, n, nv);
    float *lg = malloc((size_t)n * nv * sizeof *lg);
    if (one_by_one) {
        for (uint32_t i = 0; i < n; i++) eval_ok(L.c, t + i, 1, 0, lg + (size_t)i * nv);
    } else {
        eval_ok(L.c, t, n, 0, lg);
    }
    ck_assert_uint_eq(rt_ctx_n_past(L.c), n);
    for (size_t i = 0; i < (size_t)n * nv; i++) ck_assert(isfinite(lg[i]));
    unload(&L);
    return lg;
}

/* Logits of a fixture's n tokens (ref: one call, n_ctx 128) are bitwise the
 * same under other thread counts, batch sizes and n_ctx, and, when
 * token_by_token (short runs), fed one token per call. */
#define INV_NV ((size_t)(3 + 256 + 64))
static void assert_invariant(const char *p, uint32_t n, bool token_by_token, const float *ref,
                             const char *what)
{
    const struct rt_ctx_opts variants[] = {
        {.n_ctx = 128, .n_threads = 2},
        {.n_ctx = 128, .n_threads = 3, .n_batch = 5},
        {.n_ctx = 112, .n_threads = 4, .n_batch = 1},
    };
    for (size_t v = 0; v < sizeof variants / sizeof variants[0]; v++) {
        float *lg = run_all(p, variants[v], n, false);
        ck_assert_msg(memcmp(lg, ref, n * INV_NV * sizeof *lg) == 0,
                      "%s: %u tokens, variant %zu differs", what, n, v);
        free(lg);
    }
    if (token_by_token) {
        float *lg = run_all(p, (struct rt_ctx_opts){.n_ctx = 64, .n_threads = 2}, n, true);
        ck_assert_msg(memcmp(lg, ref, n * INV_NV * sizeof *lg) == 0, "%s: token by token differs",
                      what);
        free(lg);
    }
}

START_TEST(test_invariance)
{
    /* the same logits, bit for bit, whatever the threads or --batch; one
     * call or token by token below RT_FA_TILE tokens (llama.cpp's
     * single-query attention either way) */
    static const struct {
        const char *arch;
        uint32_t wtype;
        bool tied, rope_freqs;
    } cases[] = {
        {"llama", GGUF_TYPE_F16, false, false},
        {"llama", GGUF_TYPE_Q8_0, true, true},
        {"qwen2", GGUF_TYPE_Q4_0, true, false},
        {"llama", GGUF_TYPE_F32, false, false},
        {"qwen3", GGUF_TYPE_F16, true, false},
        {"gemma2", GGUF_TYPE_Q8_0, true, false},  /* window 8, every other layer */
        {"gemma3", GGUF_TYPE_F16, true, false},   /* window 6, 2 of 3 layers */
        {"phi3", GGUF_TYPE_Q4_0, false, false},   /* fused qkv/up, LongRoPE */
    };
    struct rt_fx_spec s;
    rt_fx_default(&s);
    s.arch = cases[_i].arch;
    s.wtype = cases[_i].wtype;
    s.tied = cases[_i].tied;
    s.rope_freqs = cases[_i].rope_freqs;
    if (strcmp(s.arch, "gemma2") == 0) s.n_swa = 8;
    if (strcmp(s.arch, "gemma3") == 0) s.n_swa = 6, s.swa_pattern = 3, s.n_layer = 3;
    if (strcmp(s.arch, "phi3") == 0) s.n_ctx_orig = 64;
    char *p = write_fixture(&s, "inv.gguf");
    const size_t nv = INV_NV;
    for (int big = 0; big < 2; big++) {
        const uint32_t n = big ? NT_BIG : NT;
        float *ref = run_all(p, (struct rt_ctx_opts){.n_ctx = 128}, n, false);
        assert_invariant(p, n, !big, ref, s.arch);
        if (big) {
            /* the two attention paths agree closely (same bound) */
            float *lg = run_all(p, (struct rt_ctx_opts){.n_ctx = 128}, n, true);
            float range = 0;
            for (size_t i = 0; i < n * nv; i++) range = fmaxf(range, fabsf(ref[i]));
            ck_assert_float_lt(max_abs_diff(lg, ref, n * nv), 0.05f * range);
            free(lg);
        }
        /* q8_0 KV cache: close to f16 (random weights and 8-bit activations:
         * a few % of the logit range; a bug is off by the whole range) */
        float *lg = run_all(p, (struct rt_ctx_opts){.n_ctx = 128, .kv_type = RT_KV_Q8_0}, n, false);
        float range = 0;
        for (size_t i = 0; i < n * nv; i++) range = fmaxf(range, fabsf(ref[i]));
        ck_assert_float_lt(max_abs_diff(lg, ref, n * nv), 0.05f * range);
        free(lg);
        free(ref);
    }
    unlink(p);
    free(p);
}
END_TEST

START_TEST(test_no_alloc_in_eval)
{
    struct rt_fx_spec s;
    rt_fx_default(&s);
    char *p = write_fixture(&s, "alloc.gguf");
    struct loaded L;
    load(p, &(struct rt_ctx_opts){.n_ctx = 64, .n_threads = 3, .n_batch = 8}, &L);
    const uint32_t nv = rt_model_hparams(L.m)->n_vocab;
    int32_t t[NT];
    fixture_tokens(t, NT, nv);
    float *lg = malloc((size_t)NT * nv * sizeof *lg);
    /* no Check assertion between the two counts: Check itself allocates */
    struct mw_err err;
    mw_err_clear(&err);
    enum mw_status st[11];
    const long before = n_allocs;
    st[0] = rt_eval(L.c, t, NT, 3, lg, &err);
    for (int i = 0; i < 8; i++) st[1 + i] = rt_eval(L.c, t + i, 1, 0, NULL, &err);
    st[9] = rt_ctx_shift(L.c, 1, 10, &err);
    st[10] = rt_eval(L.c, t, 4, 0, NULL, &err);
    const long during = n_allocs - before;
    for (int i = 0; i < 11; i++) ck_assert_int_eq(st[i], MW_OK);
    ck_assert_int_eq(during, 0);
    free(lg);
    unload(&L);
    unlink(p);
    free(p);
}
END_TEST

START_TEST(test_eval_errors)
{
    struct rt_fx_spec s;
    rt_fx_default(&s);
    char *p = write_fixture(&s, "errs.gguf");
    struct loaded L;
    load(p, &(struct rt_ctx_opts){.n_ctx = 8}, &L);
    struct mw_err err;
    const int32_t bad[2] = {1, 100000};
    ck_assert_int_eq(rt_eval(L.c, bad, 2, 0, NULL, &err), MW_E_VALUE);
    ck_assert_uint_eq(rt_ctx_n_past(L.c), 0);
    const int32_t neg = -1;
    ck_assert_int_eq(rt_eval(L.c, &neg, 1, 0, NULL, &err), MW_E_VALUE);
    int32_t t[9] = {1, 2, 3, 4, 5, 6, 7, 8, 9};
    ck_assert_int_eq(rt_eval(L.c, t, 9, 0, NULL, &err), MW_E_USAGE);
    ck_assert_int_eq(rt_eval(L.c, t, 0, 0, NULL, &err), MW_E_USAGE);
    eval_ok(L.c, t, 8, 0, NULL);
    ck_assert_int_eq(rt_eval(L.c, t, 1, 0, NULL, &err), MW_E_USAGE); /* full */
    ck_assert_int_eq(rt_ctx_shift(L.c, 5, 4, &err), MW_E_USAGE);
    rt_ctx_truncate(L.c, 3);
    ck_assert_uint_eq(rt_ctx_n_past(L.c), 3);
    rt_ctx_free(L.c);
    L.c = NULL;
    ck_assert_int_eq(rt_ctx_init(L.m, &(struct rt_ctx_opts){.n_ctx = RT_MAX_CTX + 1}, &L.c, &err),
                     MW_E_USAGE);
    ck_assert_int_eq(rt_ctx_init(L.m, &(struct rt_ctx_opts){.n_threads = RT_MAX_THREADS + 1}, &L.c,
                                 &err), MW_E_USAGE);
    unload(&L);
    unlink(p);
    free(p);
}
END_TEST

/* After a shift, the cache is what a fresh run over the kept tokens gives
 * (up to the f16 rounding of re-rotated keys). */
START_TEST(test_shift)
{
    struct rt_fx_spec s;
    rt_fx_default(&s);
    static const char *const archs[] = {"llama", "qwen2", "phi3", "qwen3", "gemma3"};
    s.arch = archs[_i];
    s.rope_freqs = _i == 0;
    if (_i == 2) s.n_ctx_orig = 16; /* LongRoPE: long factors and attn_factor 1.19 */
    /* one layer: its keys and values depend on the token and position only,
     * so a shifted cache must equal a fresh one; deeper layers carry what
     * the dropped tokens contributed (llama.cpp's context shift has the same
     * property) */
    s.n_layer = 1;
    char *p = write_fixture(&s, "shift.gguf");
    struct loaded A, B;
    load(p, &(struct rt_ctx_opts){.n_ctx = 32}, &A);
    load(p, &(struct rt_ctx_opts){.n_ctx = 32}, &B);
    const uint32_t nv = rt_model_hparams(A.m)->n_vocab;
    int32_t t[NT];
    fixture_tokens(t, NT, nv);
    /* A: 20 tokens, drop positions 3..9, then 4 more */
    eval_ok(A.c, t, 20, 0, NULL);
    struct mw_err err;
    ck_assert_int_eq(rt_ctx_shift(A.c, 3, 7, &err), MW_OK);
    ck_assert_uint_eq(rt_ctx_n_past(A.c), 13);
    float la[4 * 400], lb[4 * 400];
    ck_assert_uint_le(nv, 400);
    eval_ok(A.c, t + 20, 4, 0, la);
    /* B: the same 13 kept tokens from scratch, then the 4 */
    int32_t kept[17];
    memcpy(kept, t, 3 * sizeof *t);
    memcpy(kept + 3, t + 10, 10 * sizeof *t);
    memcpy(kept + 13, t + 20, 4 * sizeof *t);
    eval_ok(B.c, kept, 17, 13, lb);
    ck_assert_float_lt(max_abs_diff(la, lb, 4 * nv), 0.01f);
    unload(&A);
    unload(&B);
    unlink(p);
    free(p);
}
END_TEST

// --- the Qwen3 / Gemma 2-3 / Phi-3 families ---

static float gelu_ref(float x) /* ggml_gelu_f32 */
{
    return 0.5f * x * (1.0f + tanhf(0.79788456080286535587989211986876f * x *
                                    (1.0f + 0.044715f * x * x)));
}

START_TEST(test_family_ops)
{
    /* GELU: ggml's f16 table (GGML_GELU_FP16), for every f16 input, through
     * rt_int.h's independent f16 conversions */
    for (uint32_t h = 0; h < 0x10000; h++) {
        const float x = rt__h2f((uint16_t)h);
        if (!isfinite(x) || fabsf(x) >= 10.0f) continue;
        const float want = rt__h2f(rt__f2h(gelu_ref(x)));
        const float got = rt_gelu_tanh(x);
        ck_assert_msg(memcmp(&got, &want, sizeof got) == 0, "gelu(%a) = %a, table %a", (double)x,
                      (double)got, (double)want);
    }
    uint64_t r = 88172645463325252ULL;
    float g[64], u[64], g2[64];
    for (int i = 0; i < 1000; i++) {
        r ^= r << 13, r ^= r >> 7, r ^= r << 17;
        const float x = ((float)(r >> 40) / (float)(1u << 24) - 0.5f) * 30.0f;
        const float want = x <= -10.0f ? 0.0f
                           : x >= 10.0f ? x
                                        : rt__h2f(rt__f2h(gelu_ref(rt__h2f(rt__f2h(x)))));
        ck_assert_float_eq(rt_gelu_tanh(x), want);
        g[i % 64] = x, u[i % 64] = 0.25f * (float)(i % 7) - 0.5f;
    }
    memcpy(g2, g, sizeof g);
    rt_geglu(g2, u, 64);
    for (int i = 0; i < 64; i++) ck_assert_float_eq(g2[i], rt_gelu_tanh(g[i]) * u[i]);
    /* soft-capping: tanhf(x * (1/c)) * c; attention: c * tanhf(s * (scale / c)) */
    /* (volatile: libm's tanhf at run time, not the compiler's folding) */
    volatile float vin[4] = {-1000.0f, -3.0f, 0.5f, 77.0f}, vc = 30.0f, vs = 300.0f, vk = 50.0f;
    float x[4];
    for (int i = 0; i < 4; i++) x[i] = vin[i];
    rt_softcap(x, 4, vc);
    for (int i = 0; i < 4; i++) {
        ck_assert_float_eq(x[i], tanhf(vin[i] * (1.0f / vc)) * vc);
        ck_assert(fabsf(x[i]) <= 30.0f);
    }
    ck_assert_float_eq(rt_attn_score(3.0f, 0.125f, 0.0f), 3.0f * 0.125f);
    ck_assert_float_eq(rt_attn_score(vs, 1.0f, vk), vk * tanhf(vs * (1.0f / vk)));
    /* which layers slide, and where the window starts (LLAMA_SWA_TYPE_STANDARD) */
    struct rt_hparams hp = {.n_layer = 12, .n_swa = 16, .swa_pattern = 6, .n_rot = 32,
                            .head_dim = 32, .rope_base = 1e6f, .rope_base_swa = 1e4f,
                            .rope_freq_scale = 0.125f, .rope_neox = true};
    for (uint32_t il = 0; il < 12; il++) ck_assert(rt_layer_is_swa(&hp, il) == (il % 6 != 5));
    hp.swa_pattern = 2;
    for (uint32_t il = 0; il < 12; il++) ck_assert(rt_layer_is_swa(&hp, il) == (il % 2 == 0));
    ck_assert_uint_eq(rt_swa_first(&hp, 0, 15), 0);
    ck_assert_uint_eq(rt_swa_first(&hp, 0, 16), 1);
    ck_assert_uint_eq(rt_swa_first(&hp, 0, 100), 85);
    ck_assert_uint_eq(rt_swa_first(&hp, 1, 100), 0);
    /* RoPE per layer: sliding layers their own base (and scale 1, gemma3) */
    struct rt_rope_params p0 = rt_rope_layer_params(&hp, 0, 4096);
    struct rt_rope_params p1 = rt_rope_layer_params(&hp, 1, 4096);
    ck_assert_float_eq(p0.base, 1e4f);
    ck_assert_float_eq(p0.freq_scale, 1.0f);
    ck_assert_float_eq(p1.base, 1e6f);
    ck_assert_float_eq(p1.freq_scale, 0.125f);
    ck_assert_float_eq(p1.attn_factor, 1.0f);
    /* rt_rope_cache_ex with attn_factor 1 is rt_rope_cache, bit for bit */
    float c0[32], c1[32], ff[16];
    for (int i = 0; i < 16; i++) ff[i] = 1.0f + (float)i;
    hp.n_swa = 0;
    const struct rt_rope_params pl = rt_rope_layer_params(&hp, 0, 64);
    for (int32_t pos = -40; pos < 300; pos += 7) {
        rt_rope_cache(&hp, ff, pos, c0);
        rt_rope_cache_ex(32, &pl, ff, pos, c1);
        ck_assert(memcmp(c0, c1, sizeof c0) == 0);
    }
    /* LongRoPE: long factors once the context, padded to 256 as llama.cpp
     * pads it, exceeds the original context; attn_factor scales cos and sin */
    hp.has_rope_long = true;
    hp.n_ctx_orig = 300;
    hp.rope_attn_factor = 1.25f;
    ck_assert(!rt_rope_layer_params(&hp, 0, 256).long_factors);
    ck_assert(rt_rope_layer_params(&hp, 0, 257).long_factors);
    hp.n_ctx_orig = 4096;
    ck_assert(!rt_rope_layer_params(&hp, 0, 4096).long_factors);
    ck_assert(rt_rope_layer_params(&hp, 0, 4097).long_factors);
    const struct rt_rope_params pa = rt_rope_layer_params(&hp, 0, 64);
    rt_rope_cache_ex(32, &pa, NULL, 9, c1);
    rt_rope_cache(&hp, NULL, 9, c0);
    for (int i = 0; i < 32; i++) ck_assert_float_eq(c1[i], c0[i] * 1.25f);
    /* attention scales: q pre-scaled (gemma, phi3) or kq scale (llama, qwen) */
    float qm, ks;
    hp.arch = RT_ARCH_QWEN3;
    rt_attn_scales(&hp, &qm, &ks);
    ck_assert_float_eq(qm, 0.0f);
    ck_assert_float_eq(ks, 1.0f / sqrtf(32.0f));
    hp.arch = RT_ARCH_GEMMA2;
    hp.attn_scale = 0.0625f;
    rt_attn_scales(&hp, &qm, &ks);
    ck_assert_float_eq(qm, 0.0625f);
    ck_assert_float_eq(ks, 1.0f);
    /* per-head RMSNorm */
    float v[64], w[32], ref[64];
    for (int i = 0; i < 64; i++) v[i] = (float)(i % 9) - 3.5f;
    for (int i = 0; i < 32; i++) w[i] = 1.0f + 0.01f * (float)i;
    rt_rmsnorm(ref, v, w, 32, 1e-6f);
    rt_rmsnorm(ref + 32, v + 32, w, 32, 1e-6f);
    rt_rmsnorm_heads(v, w, 2, 32, 1e-6f);
    ck_assert(memcmp(v, ref, sizeof v) == 0);
}
END_TEST

/* Sliding window: with every layer sliding (gemma3, pattern 3, 2 layers,
 * window 4) the logits at position p depend on tokens p-6 .. p only: a
 * changed first token leaves positions >= 7 bit for bit unchanged, in both
 * attention paths (22 tokens: single-query; 80: tiled). */
START_TEST(test_family_window)
{
    struct rt_fx_spec s;
    rt_fx_default(&s);
    s.arch = "gemma3";
    s.n_swa = 4;
    s.swa_pattern = 3;
    char *p = write_fixture(&s, "win.gguf");
    const uint32_t n = _i == 0 ? 22 : 80;
    struct loaded A, B;
    load(p, &(struct rt_ctx_opts){.n_ctx = 96, .n_batch = 96}, &A);
    load(p, &(struct rt_ctx_opts){.n_ctx = 96, .n_threads = 2}, &B);
    const struct rt_hparams *hp = rt_model_hparams(A.m);
    ck_assert(rt_layer_is_swa(hp, 0) && rt_layer_is_swa(hp, 1));
    const uint32_t nv = hp->n_vocab;
    int32_t t[80];
    fixture_tokens(t, n, nv);
    float *la = malloc((size_t)n * nv * sizeof *la), *lb = malloc((size_t)n * nv * sizeof *lb);
    eval_ok(A.c, t, n, 0, la);
    t[0] = (t[0] + 1) % (int32_t)nv;
    eval_ok(B.c, t, n, 0, lb);
    for (uint32_t i = 0; i < n; i++) {
        const bool same = memcmp(la + (size_t)i * nv, lb + (size_t)i * nv, nv * sizeof *la) == 0;
        ck_assert_msg(same == (i >= 7), "position %u: %s", i, same ? "same" : "differs");
    }
    free(la);
    free(lb);
    unload(&A);
    unload(&B);
    unlink(p);
    free(p);
}
END_TEST

/* A sliding layer keeps a ring of n_swa - 1 + n_batch rows: no context
 * shift (refused), a rewind within the ring works, one past it is refused
 * at the next rt_eval until the context is reset. */
START_TEST(test_family_swa_cache)
{
    struct rt_fx_spec s;
    rt_fx_default(&s);
    s.arch = "gemma2";
    s.n_swa = 4;
    char *p = write_fixture(&s, "ring.gguf");
    struct loaded L;
    load(p, &(struct rt_ctx_opts){.n_ctx = 64, .n_batch = 4}, &L);
    ck_assert_uint_eq(L.c->kv.cap[0], 7);  /* sliding */
    ck_assert_uint_eq(L.c->kv.cap[1], 64); /* global */
    const uint32_t nv = rt_model_hparams(L.m)->n_vocab;
    int32_t t[48];
    fixture_tokens(t, 48, nv);
    struct mw_err err;
    mw_err_clear(&err);
    char buf[1024];
    eval_ok(L.c, t, 40, 0, NULL);
    ck_assert_int_eq(rt_ctx_shift(L.c, 1, 8, &err), MW_E_UNSUPPORTED);
    mw_err_format(&err, buf, sizeof buf);
    ck_assert_msg(strstr(buf, "sliding layers") != NULL, "%s", buf);
    /* rewind to 38: positions 35..37 are still in the ring */
    rt_ctx_truncate(L.c, 38);
    float a[400], b[400];
    ck_assert_uint_le(nv, 400);
    eval_ok(L.c, t + 38, 1, 0, a);
    /* rewind to 20: 17..19 were overwritten */
    rt_ctx_truncate(L.c, 20);
    mw_err_clear(&err);
    ck_assert_int_eq(rt_eval(L.c, t + 20, 1, 0, NULL, &err), MW_E_USAGE);
    rt_ctx_reset(L.c);
    eval_ok(L.c, t, 38, 0, NULL);
    eval_ok(L.c, t + 38, 1, 0, b);
    ck_assert_msg(memcmp(a, b, nv * sizeof *a) == 0, "rewound ring differs from a fresh run");
    unload(&L);
    unlink(p);
    free(p);
}
END_TEST

/* rt_mem_estimate (memwall plan) counts exactly what rt_ctx_init allocates,
 * sliding-window rings included, and bounds the model's own memory. */
START_TEST(test_family_mem)
{
    static const char *const archs[] = {"qwen3", "gemma2", "gemma3", "phi3"};
    struct rt_fx_spec s;
    rt_fx_default(&s);
    s.arch = archs[_i];
    s.n_layer = 6;
    s.n_swa = 5;
    s.swa_pattern = _i == 2 ? 6 : 0;
    s.n_ctx_orig = _i == 3 ? 32 : 0;
    char *p = write_fixture(&s, "mem.gguf");
    const struct rt_ctx_opts co = {.n_ctx = 100, .n_threads = 3, .n_batch = 16};
    struct loaded L;
    load(p, &co, &L);
    const struct rt_hparams *hp = rt_model_hparams(L.m);
    struct rt_mem got, est;
    rt_ctx_mem(L.c, &got);
    struct mw_err err;
    mw_err_clear(&err);
    ck_assert_int_eq(rt_mem_estimate(hp, 0, &co, rt_model_main_type(L.m), &est, &err), MW_OK);
    ck_assert_uint_eq(est.kv_bytes, got.kv_bytes);
    ck_assert_uint_eq(est.scratch_bytes, got.scratch_bytes);
    ck_assert_uint_ge(est.owned_bytes, got.owned_bytes);
    /* f16 cache rows of n_head_kv * head_dim: a sliding layer holds
     * n_swa - 1 + n_batch = 20 positions instead of 100 */
    uint64_t rows = 0;
    for (uint32_t il = 0; il < hp->n_layer; il++) rows += rt_layer_is_swa(hp, il) ? 20 : 100;
    ck_assert_uint_eq(got.kv_bytes, rows * 2 * 2 * hp->n_head_kv * hp->head_dim);
    if (_i == 1) ck_assert_uint_eq(rows, 3 * 20 + 3 * 100); /* gemma2: every other layer */
    if (_i == 2) ck_assert_uint_eq(rows, 5 * 20 + 100);     /* gemma3: 5 of 6 */
    unload(&L);
    unlink(p);
    free(p);
}
END_TEST

/* tinyllama-8m: the next-token logits of the README prompt (numpy FP32
 * reference in shared/models/reference) */
START_TEST(test_reference_logits)
{
    struct loaded L;
    load(REF_F16, &(struct rt_ctx_opts){.n_ctx = 64, .n_threads = 2}, &L);
    int32_t ids[32];
    const size_t n = encode(L.t, "It was a dark and stormy night, and", true, false, ids, 32);
    eval_ok(L.c, ids, (uint32_t)n, 0, NULL);
    const float *lg = rt_ctx_logits(L.c);
    const int32_t top[5] = {265, 296, 324, 261, 288};
    const float val[5] = {6.017662f, 5.887539f, 5.350437f, 5.066796f, 4.786575f};
    for (int k = 0; k < 5; k++) ck_assert_float_lt(fabsf(lg[top[k]] - val[k]), 0.02f);
    ck_assert_int_eq(rt_argmax(lg, rt_model_hparams(L.m)->n_vocab), 265);
    unload(&L);
}
END_TEST

// --- mixture of experts ---

START_TEST(test_moe_routing)
{
    /* ggml's argsort = libstdc++'s std::sort: insertion sort up to 16
     * elements (ties: ascending index), introsort above; the expected
     * permutations are std::sort's (GCC 12) on x[i] = (7i) % 5 */
    float x[40];
    int32_t idx[40];
    for (int i = 0; i < 40; i++) x[i] = (float)(i * 7 % 5);
    rt_argsort_desc(x, 8, idx);
    static const int32_t want8[8] = {2, 7, 4, 1, 6, 3, 0, 5};
    ck_assert_mem_eq(idx, want8, sizeof want8);
    rt_argsort_desc(x, 20, idx);
    static const int32_t want20[20] = {2, 17, 7, 12, 19, 4, 14, 9, 1, 16,
                                       11, 6, 8, 13, 3, 18, 10, 15, 5, 0};
    ck_assert_mem_eq(idx, want20, sizeof want20);
    rt_argsort_desc(x, 40, idx);
    static const int32_t want40[40] = {17, 2, 37, 22, 7, 32, 27, 12, 9, 24, 14, 29, 19, 34,
                                       4, 39, 21, 1, 26, 31, 36, 16, 11, 6, 18, 23, 38, 13,
                                       28, 3, 8, 33, 0, 20, 5, 35, 10, 30, 15, 25};
    ck_assert_mem_eq(idx, want40, sizeof want40);

    /* softmax, top-k, normalization (llama/qwen3moe) or not (qwen2moe) */
    const float logits[6] = {0.5f, 2.0f, -1.0f, 3.0f, 2.0f, 0.0f};
    double ref[6], sum = 0;
    for (int e = 0; e < 6; e++) sum += ref[e] = exp(logits[e] - 3.0);
    for (int e = 0; e < 6; e++) ref[e] /= sum;
    for (int norm = 0; norm < 2; norm++) {
        float pr[6];
        int32_t sel[3], sc[6];
        float w[3];
        memcpy(pr, logits, sizeof pr);
        rt_moe_route(pr, 6, 3, norm, sc, sel, w);
        for (int e = 0; e < 6; e++) ck_assert_double_eq_tol(pr[e], ref[e], 1e-6);
        /* 3, then the tie 2.0 at experts 1 and 4 in index order (n <= 16) */
        ck_assert_int_eq(sel[0], 3);
        ck_assert_int_eq(sel[1], 1);
        ck_assert_int_eq(sel[2], 4);
        const double s3 = norm ? ref[3] + ref[1] + ref[4] : 1.0;
        ck_assert_double_eq_tol(w[0], ref[3] / s3, 1e-6);
        ck_assert_double_eq_tol(w[1], ref[1] / s3, 1e-6);
        ck_assert_float_eq(w[1], w[2]);
        if (norm) ck_assert_double_eq_tol((double)w[0] + w[1] + w[2], 1.0, 1e-6);
    }
    /* all equal: the first k experts, weight 1/n (1/k normalized) */
    float eq[8] = {0};
    int32_t sel[2], sc[8];
    float w[2];
    rt_moe_route(eq, 8, 2, false, sc, sel, w);
    ck_assert_int_eq(sel[0], 0);
    ck_assert_int_eq(sel[1], 1);
    ck_assert_float_eq(w[0], 0.125f);
    memset(eq, 0, sizeof eq);
    rt_moe_route(eq, 8, 2, true, sc, sel, w);
    ck_assert_float_eq(w[0], 0.5f);
    ck_assert_float_eq(w[1], 0.5f);
    /* weights below 2^-14 in sum are divided by 2^-14 (ggml_clamp) */
    float tiny[4] = {-100.0f, -100.0f, 0.0f, 0.0f};
    int32_t sel2[2], sc4[4];
    float w2[2];
    rt_moe_route(tiny, 4, 2, true, sc4, sel2, w2);
    ck_assert_int_eq(sel2[0], 2);
    ck_assert_float_eq(w2[0], 0.5f);

    /* hostile weights: NaN or Inf logits pick valid experts (no crash) */
    float bad[40];
    for (int i = 0; i < 40; i++) bad[i] = i % 3 == 0 ? NAN : i % 5 == 0 ? INFINITY : (float)i;
    int32_t bsel[4], bsc[40];
    float bw[4];
    rt_moe_route(bad, 40, 4, true, bsc, bsel, bw);
    for (int j = 0; j < 4; j++) ck_assert(bsel[j] >= 0 && bsel[j] < 40);
    for (int i = 0; i < 40; i++) bad[i] = i % 3 == 0 ? NAN : (float)(i % 4);
    rt_argsort_desc(bad, 40, bsc);
    bool seen[40] = {false};
    for (int i = 0; i < 40; i++) {
        ck_assert(bsc[i] >= 0 && bsc[i] < 40 && !seen[bsc[i]]);
        seen[bsc[i]] = true;
    }

    /* qwen2moe's shared-expert gate: silu(x)/x = sigmoid(x) */
    ck_assert_float_eq(rt_moe_shexp_gate(0.0f), 0.5f);
    for (float v = -6.0f; v <= 6.0f; v += 0.75f)
        ck_assert_double_eq_tol(rt_moe_shexp_gate(v), 1.0 / (1.0 + exp(-v)), 1e-6);
}
END_TEST

static void moe_spec(struct rt_fx_spec *s, int which)
{
    rt_fx_default(s);
    switch (which) {
    case 0: s->arch = "qwen3moe", s->n_expert = 8, s->n_expert_used = 3; break;
    case 1: s->arch = "qwen2moe", s->n_expert = 6, s->n_expert_used = 2, s->wtype = GGUF_TYPE_Q8_0;
        break;
    case 2: s->arch = "llama", s->n_expert = 4, s->n_expert_used = 2, s->wtype = GGUF_TYPE_Q4_0;
        break;
    default: s->arch = "qwen3moe", s->n_expert = 5, s->n_expert_used = 1, s->wtype = GGUF_TYPE_F32;
        s->n_layer = 3; break;
    }
}

/* The dense test's standard for MoE: bit-identical logits whatever the
 * threads or --batch, one call or token by token below RT_FA_TILE tokens;
 * and the router spreads the tokens over the experts. */
START_TEST(test_moe_invariance)
{
    struct rt_fx_spec s;
    moe_spec(&s, _i);
    char *p = write_fixture(&s, "moe-inv.gguf");
    const size_t nv = INV_NV;
    for (int big = 0; big < 2; big++) {
        const uint32_t n = big ? NT_BIG : NT;
        float *ref = run_all(p, (struct rt_ctx_opts){.n_ctx = 128}, n, false);
        assert_invariant(p, n, !big, ref, s.arch);
        free(ref);
    }
    /* routing spread: every layer sends the 24 tokens to several experts,
     * each token to exactly n_expert_used of them; the last layer's FFN
     * runs only for the rows whose logits are asked for (here the last
     * token's: llama.cpp's inp_out_ids), so it routes one token */
    struct loaded L;
    load(p, &(struct rt_ctx_opts){.n_ctx = 64, .n_threads = 2}, &L);
    int32_t t[NT];
    fixture_tokens(t, NT, (uint32_t)nv);
    eval_ok(L.c, t, NT, 0, NULL);
    const struct rt_hparams *hp = rt_model_hparams(L.m);
    ck_assert_uint_eq(hp->n_expert, s.n_expert);
    ck_assert_uint_eq(hp->n_expert_used, s.n_expert_used);
    for (uint32_t il = 0; il < hp->n_layer; il++) {
        const uint64_t *h = rt_ctx_expert_hits(L.c, il);
        ck_assert_ptr_nonnull(h);
        uint64_t total = 0, used = 0;
        for (uint32_t e = 0; e < hp->n_expert; e++) total += h[e], used += h[e] > 0;
        if (il == hp->n_layer - 1) {
            ck_assert_uint_eq(total, hp->n_expert_used);
            continue;
        }
        ck_assert_uint_eq(total, (uint64_t)NT * hp->n_expert_used);
        ck_assert_uint_ge(used, hp->n_expert_used + 1 < hp->n_expert ? hp->n_expert_used + 1
                                                                      : hp->n_expert);
    }
    ck_assert_ptr_null(rt_ctx_expert_hits(L.c, hp->n_layer));
    unload(&L);
    unlink(p);
    free(p);
}
END_TEST

/* Weight accounting: every expert byte counts in the total, active bytes
 * are the dense part plus n_expert_used experts; the estimate counts the
 * very scratch rt_ctx_init allocates; rt_eval allocates nothing. */
START_TEST(test_moe_mem)
{
    struct rt_fx_spec s;
    moe_spec(&s, _i);
    if (_i == 2) s.wtype = GGUF_TYPE_F16; /* one weight type besides the f32 router */
    if (_i == 1) s.wtype = GGUF_TYPE_Q8_0;
    char *p = write_fixture(&s, "moe-mem.gguf");
    const struct rt_ctx_opts co = {.n_ctx = 100, .n_threads = 3, .n_batch = 16};
    struct loaded L;
    load(p, &co, &L);
    const struct rt_hparams *hp = rt_model_hparams(L.m);
    const struct gguf_file *f = rt_model_gguf(L.m);
    uint64_t all = 0, exps = 0, slab = 0;
    for (uint64_t i = 0; i < gguf_tensor_count(f); i++) {
        const struct gguf_tensor *t = gguf_tensor_get(f, i);
        all += t->nbytes;
        if (strstr(t->name, "_exps.weight")) {
            ck_assert_uint_eq(t->n_dims, 3);
            ck_assert_uint_eq(t->ne[2], hp->n_expert);
            exps += t->nbytes;
            slab += t->nbytes / hp->n_expert;
        }
    }
    ck_assert_uint_eq(exps > 0, 1);
    ck_assert_uint_eq(rt_model_weight_bytes(L.m), all);
    const uint64_t active = all - exps + hp->n_expert_used * slab;
    ck_assert_uint_eq(rt_model_active_weight_bytes(L.m), active);
    ck_assert_uint_eq(rt_active_weight_bytes(hp, all, exps), active);
    ck_assert_uint_lt(active, all);
    struct rt_hparams dense = *hp;
    dense.n_expert = 0;
    ck_assert_uint_eq(rt_active_weight_bytes(&dense, all, exps), all);
    struct rt_mem got, est;
    rt_ctx_mem(L.c, &got);
    struct mw_err err;
    mw_err_clear(&err);
    ck_assert_int_eq(rt_mem_estimate(hp, 0, &co, rt_model_main_type(L.m), &est, &err), MW_OK);
    ck_assert_uint_eq(est.kv_bytes, got.kv_bytes);
    ck_assert_uint_eq(est.scratch_bytes, got.scratch_bytes);
    ck_assert_uint_ge(est.owned_bytes, got.owned_bytes);
    /* no allocation in rt_eval (prompt, decode) */
    const uint32_t nv = hp->n_vocab;
    int32_t t[NT];
    fixture_tokens(t, NT, nv);
    enum mw_status st[5];
    const long before = n_allocs;
    st[0] = rt_eval(L.c, t, NT, 0, NULL, &err);
    for (int i = 0; i < 4; i++) st[1 + i] = rt_eval(L.c, t + i, 1, 0, NULL, &err);
    const long during = n_allocs - before;
    for (int i = 0; i < 5; i++) ck_assert_int_eq(st[i], MW_OK);
    ck_assert_int_eq(during, 0);
    unload(&L);
    unlink(p);
    free(p);
}
END_TEST

static uint64_t page_sz(void) { return (uint64_t)sysconf(_SC_PAGESIZE); }

/* Resident pages of [a, a+n) among those entirely inside it. */
static uint64_t resident_inner(const uint8_t *base, uint64_t a, uint64_t n, uint64_t *n_inner)
{
    const uint64_t ps = page_sz();
    const uint64_t lo = (a + ps - 1) / ps * ps, hi = (a + n) / ps * ps;
    *n_inner = hi > lo ? (hi - lo) / ps : 0;
    if (hi <= lo) return 0;
    unsigned char vec[4096];
    uint64_t r = 0;
    for (uint64_t off = lo; off < hi; off += ps * sizeof vec) {
        const uint64_t len = hi - off < ps * sizeof vec ? hi - off : ps * sizeof vec;
        ck_assert_int_eq(mincore((void *)(base + off), len, vec), 0);
        for (uint64_t i = 0; i < len / ps; i++) r += vec[i] & 1;
    }
    return r;
}

/* Unmap every page of the model's private read-only mapping and drop the
 * file from the page cache. */
static void evict(const char *path, const uint8_t *base, uint64_t size)
{
    ck_assert_int_eq(madvise((void *)base, (size_t)size, MADV_DONTNEED), 0);
    const int fd = open(path, O_RDONLY);
    ck_assert_int_ge(fd, 0);
    ck_assert_int_eq(fsync(fd), 0);
    ck_assert_int_eq(posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED), 0);
    close(fd);
}

/* Read the whole file through the page cache: waits for a read-ahead still
 * in flight (its pages are neither counted by mincore() nor dropped by
 * evict() until their read completes). */
static void read_through(const char *path)
{
    char buf[1 << 16];
    const int fd = open(path, O_RDONLY);
    ck_assert_int_ge(fd, 0);
    while (read(fd, buf, sizeof buf) > 0) continue;
    close(fd);
}

/* Only the routed experts' pages are read: after a few tokens the expert
 * pages in memory are exactly those of the experts the router picked
 * (counted with mincore() on the mapping, page cache dropped first, the
 * kernel's read-around turned off with MADV_RANDOM so that a page is in
 * memory iff the forward pass touched it). */
START_TEST(test_moe_resident)
{
    struct rt_fx_spec s;
    rt_fx_default(&s);
    s.arch = "qwen3moe";
    s.n_embd = 128, s.n_head = 4, s.n_head_kv = 2;
    s.n_expert = 16, s.n_expert_used = 2, s.n_ff_exp = 512; /* 128 KiB per expert matrix */
    s.seed = 7;
    char *p = write_fixture(&s, "moe-res.gguf");
    struct loaded L;
    /* by default, a model this small moves whole into huge pages when the
     * kernel offers them (runtime/rt_load.c), its experts included: at least
     * every expert tensor but its two edge pages */
    load(p, NULL, &L);
    {
        const struct gguf_file *f0 = rt_model_gguf(L.m);
        uint64_t exps = 0;
        for (uint64_t i = 0; i < gguf_tensor_count(f0); i++)
            if (strstr(gguf_tensor_get(f0, i)->name, "_exps."))
                exps += gguf_tensor_get(f0, i)->nbytes - 2 * page_sz();
        if (rt__thp_offered())
            ck_assert_uint_ge(rt_model_copied_bytes(L.m), exps);
        else
            ck_assert_uint_eq(rt_model_copied_bytes(L.m), 0);
        unload(&L);
    }
    /* the phone's case: --map-only, every expert read in place, only the
     * routed ones */
    load_ex(p, &(struct rt_model_opts){.map_only = true}, NULL, &L);
    ck_assert_uint_eq(rt_model_copied_bytes(L.m), 0);
    const struct gguf_file *f = rt_model_gguf(L.m);
    const uint8_t *base = gguf_base(f);
    /* rt_model_open marks the expert tensors MADV_RANDOM (the dense ones keep
     * read-ahead): a read inside one brings in its own page alone (asserted
     * below where the kernel honours MADV_RANDOM) */
    const uint64_t fsize = gguf_file_size(f);
    uint64_t n_pages = 0;
    evict(p, base, fsize);
    const int64_t ui = gguf_tensor_find(f, "blk.0.ffn_up_exps.weight");
    ck_assert_int_ge(ui, 0);
    const volatile uint8_t *in_exps =
        gguf_tensor_data(f, (uint64_t)ui) + gguf_tensor_get(f, (uint64_t)ui)->nbytes / 2;
    (void)*in_exps;
    const uint64_t hinted = resident_inner(base, 0, fsize, &n_pages);
    read_through(p); /* without the hint, a read-around may still be in flight */
    /* loading read the header and the norm vectors (with the kernel's
     * read-ahead around them): turn read-ahead off everywhere (a dense
     * tensor's read-around would bring in the experts next to it), unmap
     * every page of the private read-only mapping and drop the file from
     * the page cache */
    ck_assert_int_eq(madvise((void *)base, (size_t)fsize, MADV_RANDOM), 0);
    evict(p, base, fsize);
    /* is read-around really off? (qemu-user takes MADV_RANDOM as a no-op):
     * one byte read in the middle of the file must bring in one page */
    const volatile uint8_t *mid = base + fsize / 2;
    (void)*mid;
    const bool exact = resident_inner(base, 0, fsize, &n_pages) == 1;
    if (exact)
        ck_assert_msg(hinted == 1, "one byte read inside an expert tensor brought in %llu pages "
                      "(the runtime's MADV_RANDOM on ffn_*_exps)", (unsigned long long)hinted);
    if (!exact)
        fprintf(stderr, "test_moe_resident: read-around stays on (MADV_RANDOM ignored, e.g. "
                "under qemu-user): unrouted experts not checked\n");
    evict(p, base, fsize);
    const uint64_t cached = resident_inner(base, 0, fsize, &n_pages);
    if (cached > n_pages / 10) {
        fprintf(stderr, "test_moe_resident: %s stays in the page cache after "
                "POSIX_FADV_DONTNEED (%llu of %llu pages; tmpfs?): not measured\n", p,
                (unsigned long long)cached, (unsigned long long)n_pages);
        unload(&L);
        unlink(p);
        free(p);
        return;
    }
    struct mw_err err;
    mw_err_clear(&err);
    ck_assert_int_eq(rt_ctx_init(L.m, &(struct rt_ctx_opts){.n_ctx = 32, .n_threads = 2}, &L.c,
                                 &err), MW_OK);
    const struct rt_hparams *hp = rt_model_hparams(L.m);
    const int32_t prompt[2] = {1, 300}, next = 77;
    eval_ok(L.c, prompt, 2, 0, NULL); /* a prompt step, then a decode step */
    eval_ok(L.c, &next, 1, 0, NULL);
    static const char *const kinds[3] = {"ffn_gate_exps", "ffn_up_exps", "ffn_down_exps"};
    uint64_t exp_bytes = 0, routed_bytes = 0, resident_bytes = 0, n_routed = 0;
    for (uint32_t il = 0; il < hp->n_layer; il++) {
        const uint64_t *hits = rt_ctx_expert_hits(L.c, il);
        for (int k = 0; k < 3; k++) {
            char nm[64];
            snprintf(nm, sizeof nm, "blk.%u.%s.weight", il, kinds[k]);
            const int64_t ti = gguf_tensor_find(f, nm);
            ck_assert_int_ge(ti, 0);
            const struct gguf_tensor *t = gguf_tensor_get(f, (uint64_t)ti);
            const uint64_t off = (uint64_t)(gguf_tensor_data(f, (uint64_t)ti) - base);
            const uint64_t slab = t->nbytes / hp->n_expert;
            exp_bytes += t->nbytes;
            for (uint32_t e = 0; e < hp->n_expert; e++) {
                uint64_t inner;
                const uint64_t r = resident_inner(base, off + e * slab, slab, &inner);
                ck_assert_uint_gt(inner, 0);
                resident_bytes += r * page_sz();
                if (hits[e] > 0) {
                    ck_assert_msg(r == inner, "%s expert %u routed %llu times: %llu of %llu pages",
                                  nm, e, (unsigned long long)hits[e], (unsigned long long)r,
                                  (unsigned long long)inner);
                    routed_bytes += slab;
                    n_routed++;
                } else if (exact) {
                    ck_assert_msg(r == 0, "%s expert %u never routed: %llu pages resident", nm, e,
                                  (unsigned long long)r);
                }
            }
        }
    }
    /* 3 tokens x 2 experts: at most 6 of the 16 experts of a layer */
    fprintf(stderr, "test_moe_resident: file %llu bytes, expert tensors %llu bytes; after 3 tokens "
            "%llu expert matrices routed (%llu bytes), resident expert pages %llu bytes\n",
            (unsigned long long)gguf_file_size(f), (unsigned long long)exp_bytes,
            (unsigned long long)n_routed, (unsigned long long)routed_bytes,
            (unsigned long long)resident_bytes);
    ck_assert_uint_le(n_routed, 2 * 3 * 6);
    ck_assert_uint_le(routed_bytes, exp_bytes * 6 / 16);
    if (exact) {
        ck_assert_uint_le(resident_bytes, routed_bytes);
        ck_assert_uint_lt(resident_bytes, gguf_file_size(f) / 2);
    }
    unload(&L);
    unlink(p);
    free(p);
}
END_TEST

static Suite *runtime_suite(void)
{
    Suite *s = suite_create("runtime");
    TCase *tc = tcase_create("forward");
    tcase_set_timeout(tc, 30);
    tcase_add_loop_test(tc, test_invariance, 0, 8);
    tcase_add_test(tc, test_no_alloc_in_eval);
    tcase_add_test(tc, test_eval_errors);
    tcase_add_loop_test(tc, test_shift, 0, 5);
    tcase_add_loop_test(tc, test_family_window, 0, 2);
    tcase_add_test(tc, test_family_swa_cache);
    tcase_add_loop_test(tc, test_family_mem, 0, 4);
    tcase_add_test(tc, test_reference_logits);
    suite_add_tcase(s, tc);
    tc = tcase_create("moe");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, test_moe_routing);
    tcase_add_loop_test(tc, test_moe_invariance, 0, 4);
    tcase_add_loop_test(tc, test_moe_mem, 0, 4);
    tcase_add_test(tc, test_moe_resident);
    suite_add_tcase(s, tc);
    tc = tcase_create("misc");
    tcase_set_timeout(tc, 30);
    tcase_add_test(tc, test_family_ops);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    return run_suite(runtime_suite());
}
