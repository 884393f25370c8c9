/*
 * Unit tests for the runtime's gated delta net archs (qwen35, qwen35moe,
 * qwen3next; runtime/rt_ssm.c): the recurrent state survives any cut of the
 * prompt into calls and steps and any thread count bit for bit; the memory
 * estimate counts exactly what a context allocates (a state per recurrent
 * layer, constant in the context; KV rows only for the full-attention
 * layers), rt_eval allocates nothing; a rewind only to position 0; the
 * scalar row ops against a double-precision delta rule; IMROPE's sectors.
 * llama.cpp agreement is tests/e2e/run_hybrid_peer.sh's.
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
#include <unistd.h>

#include "gguf/gguf.h"
#include "runtime/rt.h"
#include "runtime/rt_int.h"
#include "runtime/rt_ops.h"
#include "tools/rt_fixture.h"

#include "check_common.h"
#include "check_runtime_common.h"

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

#define NT 24      /* < 64: every call takes the single-query attention */
#define NT_BIG 72  /* >= 64 in one call: the tiled attention */

static void eval_ok(struct rt_ctx *c, const int32_t *t, uint32_t n, uint32_t from, float *lg)
{
    struct mw_err err;
    mw_err_clear(&err);
    char buf[1024];
    ck_assert_msg(rt_eval(c, t, n, from, lg, &err) == MW_OK, "%s",
                  mw_err_format(&err, buf, sizeof buf));
}

static void tokens(int32_t *t, uint32_t n, uint32_t n_vocab)
{
    for (uint32_t i = 0; i < n; i++) t[i] = (int32_t)((i * 37 + 5) % n_vocab);
}

/* The three archs, 8 layers (two full-attention layers at 3 and 7, the
 * state crossing both), Hk 2 != Hv 4, S 32, one MTP block. */
static void spec(struct rt_fx_spec *s, int which)
{
    rt_fx_default(s);
    s->n_layer = 8;
    s->gpt2 = true;
    switch (which % 3) {
    case 0: s->arch = "qwen35"; break;
    case 1: s->arch = "qwen35moe"; break;
    default: s->arch = "qwen3next"; break;
    }
    s->wtype = which < 3 ? GGUF_TYPE_F16 : GGUF_TYPE_Q8_0;
    s->tied = which == 0;
}

/* Logits of n tokens fed as calls of the sizes in cuts (0-terminated; NULL:
 * one call). */
static uint32_t g_nv; /* the fixture's vocabulary */
static float *run_cut(const char *path, struct rt_ctx_opts co, uint32_t n, const uint32_t *cuts)
{
    struct loaded L;
    load(path, &co, &L);
    const uint32_t nv = g_nv = rt_model_hparams(L.m)->n_vocab;
    int32_t t[NT_BIG];
    tokens(t, n, nv);
    float *lg = malloc((size_t)n * nv * sizeof *lg);
    uint32_t done = 0;
    for (int i = 0; done < n; i++) {
        const uint32_t k = cuts && cuts[i] ? (cuts[i] < n - done ? cuts[i] : n - done) : n - done;
        eval_ok(L.c, t + done, k, 0, lg + (size_t)done * nv);
        done += k;
    }
    ck_assert_uint_eq(rt_ctx_n_past(L.c), n);
    for (size_t i = 0; i < (size_t)n * nv; i++) ck_assert(isfinite(lg[i]));
    unload(&L);
    return lg;
}

START_TEST(test_ssm_invariance)
{
    struct rt_fx_spec s;
    spec(&s, _i);
    char *p = write_fixture(&s, "ssm-inv.gguf");
    static const struct rt_ctx_opts variants[] = {
        {.n_ctx = 128, .n_threads = 2},
        {.n_ctx = 128, .n_threads = 3, .n_batch = 5},
        {.n_ctx = 112, .n_threads = 4, .n_batch = 1},
    };
    static const uint32_t small_cuts[][6] = {{1, 0}, {7, 10, 0}, {5, 1, 2, 13, 0}};
    for (int big = 0; big < 2; big++) {
        const uint32_t n = big ? NT_BIG : NT;
        float *ref = run_cut(p, (struct rt_ctx_opts){.n_ctx = 128}, n, NULL);
        const size_t nv = g_nv;
        for (size_t v = 0; v < sizeof variants / sizeof variants[0]; v++) {
            float *lg = run_cut(p, variants[v], n, NULL);
            ck_assert_msg(memcmp(lg, ref, n * nv * sizeof *lg) == 0,
                          "%s: %u tokens, variant %zu differs", s.arch, n, v);
            free(lg);
        }
        if (!big) /* any cut of a short prompt into calls: the same bits */
            for (size_t v = 0; v < sizeof small_cuts / sizeof small_cuts[0]; v++) {
                float *lg = run_cut(p, (struct rt_ctx_opts){.n_ctx = 64, .n_threads = 2}, n,
                                    small_cuts[v]);
                ck_assert_msg(memcmp(lg, ref, n * nv * sizeof *lg) == 0,
                              "%s: cut %zu differs", s.arch, v);
                free(lg);
            }
        free(ref);
    }
    unlink(p);
    free(p);
}
END_TEST

START_TEST(test_ssm_mem)
{
    struct rt_fx_spec s;
    spec(&s, _i);
    char *p = write_fixture(&s, "ssm-mem.gguf");
    const struct rt_ctx_opts co = {.n_ctx = 100, .n_threads = 3, .n_batch = 16};
    struct loaded L;
    load(p, &co, &L);
    const struct rt_hparams *hp = rt_model_hparams(L.m);
    /* the file: 9 blocks, the MTP block not run */
    ck_assert_uint_eq(hp->n_layer, 8);
    ck_assert_uint_eq(hp->n_nextn, 1);
    ck_assert_uint_eq(hp->full_attn_interval, 4);
    ck_assert_uint_eq(hp->ssm_conv_kernel, 4);
    ck_assert_uint_eq(hp->ssm_d_state, 32);
    ck_assert_uint_eq(hp->ssm_n_group, 2);
    ck_assert_uint_eq(hp->ssm_dt_rank, 4);
    ck_assert_uint_eq(hp->ssm_d_inner, 128);
    ck_assert(hp->attn_out_gate && hp->qk_norm);
    ck_assert(hp->ssm_v_tiled == (_i % 3 != 2));
    ck_assert_uint_eq(hp->n_rot, hp->head_dim / 4);
    ck_assert_uint_eq(hp->n_expert, _i % 3 ? 4 : 0);
    uint32_t n_rec = 0;
    for (uint32_t il = 0; il < hp->n_layer; il++) n_rec += rt_layer_is_recurrent(hp, il);
    ck_assert_uint_eq(n_rec, 6);
    /* every byte of the file but the MTP block's is a weight the graph reads */
    const struct gguf_file *f = rt_model_gguf(L.m);
    uint64_t all = 0;
    for (uint64_t i = 0; i < gguf_tensor_count(f); i++) {
        const struct gguf_tensor *t = gguf_tensor_get(f, i);
        if (strncmp(t->name, "blk.8.", 6) != 0) all += t->nbytes;
    }
    ck_assert_uint_eq(rt_model_weight_bytes(L.m), all); /* (tied: the embedding once) */
    /* state: (K-1) x channels + S x S x Hv floats per recurrent layer; KV: 2 full layers */
    struct rt_mem got, est, est_big;
    rt_ctx_mem(L.c, &got);
    const uint64_t state = 4ull * n_rec * (3ull * (2 * 2 * 32 + 4 * 32) + 32ull * 32 * 4);
    const uint64_t kvdim = (uint64_t)hp->n_head_kv * hp->head_dim;
    ck_assert_uint_eq(got.state_bytes, state);
    ck_assert_uint_eq(got.kv_bytes, state + 2ull * 2 * 100 * kvdim * 2);
    struct mw_err err;
    mw_err_clear(&err);
    ck_assert_int_eq(rt_mem_estimate(hp, 0, &co, rt_model_main_type(L.m), &est, &err), MW_OK);
    ck_assert_uint_eq(est.kv_bytes, got.kv_bytes);
    ck_assert_uint_eq(est.state_bytes, got.state_bytes);
    ck_assert_uint_eq(est.scratch_bytes, got.scratch_bytes);
    ck_assert_uint_ge(est.owned_bytes, got.owned_bytes);
    ck_assert_uint_lt(est.owned_bytes - got.owned_bytes, 8192);
    /* the state does not grow with the context, the KV rows do */
    const struct rt_ctx_opts co_big = {.n_ctx = 32768, .n_threads = 3, .n_batch = 16};
    ck_assert_int_eq(rt_mem_estimate(hp, 0, &co_big, rt_model_main_type(L.m), &est_big, &err),
                     MW_OK);
    ck_assert_uint_eq(est_big.state_bytes, state);
    ck_assert_uint_eq(est_big.kv_bytes, state + 2ull * 2 * 32768 * kvdim * 2);
    /* no allocation in rt_eval (prompt, decode) */
    int32_t t[NT];
    tokens(t, NT, hp->n_vocab);
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

/* A state cannot go back: a rewind to 0 is a fresh start (the same logits),
 * one to a later position is refused at the next evaluation, a context
 * shift is refused. */
START_TEST(test_ssm_rewind)
{
    struct rt_fx_spec s;
    spec(&s, 0);
    char *p = write_fixture(&s, "ssm-rw.gguf");
    struct loaded L;
    load(p, &(struct rt_ctx_opts){.n_ctx = 64, .n_threads = 2}, &L);
    const uint32_t nv = rt_model_hparams(L.m)->n_vocab;
    int32_t t[NT];
    tokens(t, NT, nv);
    float *a = malloc((size_t)NT * nv * sizeof *a), *b = malloc((size_t)NT * nv * sizeof *b);
    eval_ok(L.c, t, NT, 0, a);
    rt_ctx_truncate(L.c, 0);
    eval_ok(L.c, t, NT, 0, b);
    ck_assert(memcmp(a, b, (size_t)NT * nv * sizeof *a) == 0);
    rt_ctx_reset(L.c);
    eval_ok(L.c, t, NT, 0, b);
    ck_assert(memcmp(a, b, (size_t)NT * nv * sizeof *a) == 0);
    struct mw_err err;
    mw_err_clear(&err);
    ck_assert_int_eq(rt_ctx_shift(L.c, 1, 4, &err), MW_E_UNSUPPORTED);
    ck_assert_ptr_nonnull(strstr(err.msg, "recurrent"));
    rt_ctx_truncate(L.c, 10);
    mw_err_clear(&err);
    ck_assert_int_eq(rt_eval(L.c, t, 1, 0, NULL, &err), MW_E_USAGE);
    ck_assert_ptr_nonnull(strstr(err.msg, "recurrent state"));
    rt_ctx_reset(L.c);
    eval_ok(L.c, t, NT, 0, b);
    ck_assert(memcmp(a, b, (size_t)NT * nv * sizeof *a) == 0);
    free(a);
    free(b);
    unload(&L);
    unlink(p);
    free(p);
}
END_TEST

/* rt_delta_net_step against the delta rule in double; rt_ssm_conv_step's
 * taps and state; the gates; IMROPE's e sector. */
START_TEST(test_ssm_ops)
{
    enum { S = 16 };
    float M[S * S], q[S], k[S], v[S], o[S];
    double Md[S * S];
    uint64_t r = 12345;
    for (int i = 0; i < S * S; i++) {
        r = r * 6364136223846793005ull + 1442695040888963407ull;
        M[i] = (float)((double)(r >> 40) / (double)(1ull << 24) - 0.5);
        Md[i] = M[i];
    }
    for (int step = 0; step < 5; step++) {
        for (int i = 0; i < S; i++) {
            q[i] = sinf((float)(i + step)), k[i] = cosf((float)(3 * i + step));
            v[i] = 0.1f * (float)(i - step);
        }
        rt_l2norm_heads(q, 1, S, 1e-6f);
        rt_l2norm_heads(k, 1, S, 1e-6f);
        const float g = -0.3f * (float)step, beta = 0.7f;
        rt_delta_net_step(M, S, q, k, v, g, beta, o);
        const double dec = exp((double)g);
        for (int i = 0; i < S * S; i++) Md[i] *= dec;
        for (int j = 0; j < S; j++) {
            double sk = 0;
            for (int i = 0; i < S; i++) sk += Md[j * S + i] * k[i];
            const double d = (v[j] - sk) * beta;
            for (int i = 0; i < S; i++) Md[j * S + i] += k[i] * d;
        }
        for (int j = 0; j < S; j++) {
            double so = 0;
            for (int i = 0; i < S; i++) so += Md[j * S + i] * q[i];
            ck_assert_double_eq_tol(o[j], so / sqrt((double)S), 1e-5);
        }
    }
    /* the kernel tables' recurrence (rt__delta_step): the scalar ops give
     * rt_delta_net_step's bits, the vector ops stay within 1e-5 of them */
    const struct rt_kernels *kv[6];
    const int n_kv = rt_kernels_variants(kv, 6);
    for (int t = 0; t < n_kv; t++) {
        float Ma[S * S], Mb[S * S], oa[S], ob[S];
        for (int i = 0; i < S * S; i++) Ma[i] = Mb[i] = (float)Md[i] * 0.5f;
        for (int step = 0; step < 6; step++) {
            for (int i = 0; i < S; i++) {
                q[i] = sinf((float)(2 * i + step)), k[i] = cosf((float)(i - step));
                v[i] = 0.05f * (float)(i + step);
            }
            rt_l2norm_heads(q, 1, S, 1e-6f);
            rt_l2norm_heads(k, 1, S, 1e-6f);
            rt_delta_net_step(Ma, S, q, k, v, -0.1f * (float)step, 0.6f, oa);
            rt__delta_step(kv[t]->ssm, Mb, S, q, k, v, -0.1f * (float)step, 0.6f, ob);
            if (t == 0) {
                ck_assert(memcmp(oa, ob, sizeof oa) == 0 && memcmp(Ma, Mb, sizeof Ma) == 0);
            } else {
                for (int j = 0; j < S; j++) ck_assert_float_eq_tol(ob[j], oa[j], 1e-5f);
                for (int j = 0; j < S * S; j++) ck_assert_float_eq_tol(Mb[j], Ma[j], 1e-5f);
            }
        }
    }
    /* conv: K = 3 taps over 2 channels, state of the 2 previous inputs */
    float st[4] = {0}, w[6] = {1, 2, 3, -1, 0.5f, 0.25f}, x[2], y[2];
    const float in[3][2] = {{1, 2}, {0.5f, -1}, {-2, 4}};
    for (int t = 0; t < 3; t++) {
        x[0] = in[t][0], x[1] = in[t][1];
        rt_ssm_conv_step(st, w, x, y, 2, 3);
        for (int c = 0; c < 2; c++) {
            float acc = 0;
            for (int i = 0; i < 3; i++) {
                const int tt = t - 2 + i; /* tap 0 the oldest */
                acc += (tt >= 0 ? in[tt][c] : 0.0f) * w[c * 3 + i];
            }
            ck_assert_float_eq_tol(y[c], acc / (1.0f + expf(-acc)), 1e-6f);
        }
    }
    ck_assert_float_eq(st[0], in[1][0]);
    ck_assert_float_eq(st[1], in[2][0]);
    ck_assert_float_eq(st[3], in[2][1]);
    float g, beta;
    rt_delta_net_gates(0.5f, 0.25f, -2.0f, 0.0f, &g, &beta);
    ck_assert_float_eq_tol(g, -2.0f * logf(1.0f + expf(0.75f)), 1e-6f);
    ck_assert_float_eq(beta, 0.5f);
    rt_delta_net_gates(30.0f, 0.0f, -1.0f, 0.0f, &g, &beta); /* softplus(x) = x past 20 */
    ck_assert_float_eq(g, -30.0f);
    /* IMROPE for text: [11,11,10,0] rotates every pair of 64 dims; [1,1,0,1] of 8
     * dims: pair i is in sector i % 3 (t, h, then w, empty: e), pair 3 in t again */
    struct rt_hparams hp = {.n_rot = 64, .head_dim = 256, .rope_base = 1e7f, .rope_freq_scale = 1,
                            .rope_neox = true, .rope_sections = {11, 11, 10, 0}};
    float c1[64], c2[64];
    rt_rope_cache(&hp, NULL, 7, c1);
    memcpy(c2, c1, sizeof c1);
    rt_rope_text_sections(&hp, c2);
    ck_assert(memcmp(c1, c2, sizeof c1) == 0);
    hp.n_rot = 8;
    hp.rope_sections[0] = 1, hp.rope_sections[1] = 1, hp.rope_sections[2] = 0;
    hp.rope_sections[3] = 1;
    rt_rope_cache(&hp, NULL, 7, c1);
    memcpy(c2, c1, 8 * sizeof *c1);
    rt_rope_text_sections(&hp, c2);
    ck_assert(memcmp(c1, c2, 4 * sizeof *c1) == 0);
    ck_assert(memcmp(c1 + 6, c2 + 6, 2 * sizeof *c1) == 0);
    ck_assert_float_eq(c2[4], 1.0f);
    ck_assert_float_eq(c2[5], 0.0f);
    ck_assert_float_ne(c1[5], 0.0f);
}
END_TEST

static Suite *ssm_suite(void)
{
    Suite *s = suite_create("runtime_ssm");
    TCase *tc = tcase_create("forward");
    tcase_set_timeout(tc, 60);
    tcase_add_loop_test(tc, test_ssm_invariance, 0, 4);
    tcase_add_loop_test(tc, test_ssm_mem, 0, 3);
    tcase_add_test(tc, test_ssm_rewind);
    suite_add_tcase(s, tc);
    tc = tcase_create("ops");
    tcase_add_test(tc, test_ssm_ops);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    return run_suite(ssm_suite());
}
