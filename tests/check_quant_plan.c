/*
 * tests/check_quant_plan.c — the memory plan of the gated delta net families
 * (memwall plan, quant --fit-ram: calib_mem_estimate through rt_mem_estimate)
 * against an independent count and against what the runtime allocates:
 *  - the real Qwen3.5 0.8B, 4B, 9B, 27B and 35B-A3B (their config.json alone,
 *    tests/fixtures/configs): at 4k and 32k, f16 and q8_0, the KV figure is
 *    K+V of the full-attention layers only (every 4th: n_layer / 4 of them)
 *    plus, per gated delta net layer, the conv state (K-1) x (2 Hk S + Hv S)
 *    and the delta rule's S x S x Hv, f32, whatever the context; the MTP
 *    block keeps nothing
 *  - rt_fixture's qwen35, qwen35moe and qwen3next models: the plan's KV and
 *    scratch equal rt_ctx_mem of a real context at several sizes, and
 *    --fit-ram's figure (calib_fit_ram on the file) is the same KV
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "calib/calib.h"
#include "check_common.h"
#include "hf/hf.h"
#include "runtime/rt.h"
#include "tools/rt_fixture.h"

/* The real checkpoints' shapes, written out here (not read back through
 * calib_hparams_from_hf): layers, kv heads, linear key / value heads. Head
 * dim 256, state S 128, conv kernel 4, full_attention_interval 4, one MTP
 * block everywhere. */
static const struct real {
    const char *dir;
    uint32_t n_layer, n_head_kv, hk, hv;
    const char *arch;
} reals[] = {
    {"qwen3.5-0.8b", 24, 2, 16, 16, "qwen35"},  {"qwen3.5-4b", 32, 4, 16, 32, "qwen35"},
    {"qwen3.5-9b", 32, 4, 16, 32, "qwen35"},    {"qwen3.5-27b", 64, 4, 16, 48, "qwen35"},
    {"qwen3.5-35b-a3b", 40, 2, 16, 32, "qwen35moe"},
};

static uint64_t state_bytes(uint64_t hk, uint64_t hv, uint64_t S, uint64_t K)
{
    return 4 * ((K - 1) * (2 * hk * S + hv * S) + S * S * hv);
}

START_TEST(test_real_configs)
{
    const struct real *r = &reals[_i];
    char path[1024];
    snprintf(path, sizeof path, "%s/tests/fixtures/configs/%s/config.json", MW_SRC_DIR, r->dir);
    struct hf_config *c = calloc(1, sizeof *c);
    ck_assert_ptr_nonnull(c);
    struct mw_err err;
    mw_err_clear(&err);
    ck_assert_msg(hf_config_load(path, c, &err) == MW_OK, "%s: %s", path, err.msg);
    struct rt_hparams hp;
    uint64_t n_bias = 0;
    calib_hparams_from_hf(c, &hp, &n_bias);
    free(c);
    ck_assert_str_eq(hp.arch_name, r->arch);
    ck_assert_uint_eq(hp.n_layer, r->n_layer); /* the executed layers: not the MTP block */
    ck_assert_uint_eq(hp.n_nextn, 1);
    ck_assert_uint_eq(hp.full_attn_interval, 4);
    ck_assert_uint_eq(hp.ssm_n_group, r->hk);
    ck_assert_uint_eq(hp.ssm_dt_rank, r->hv);
    ck_assert_uint_eq(hp.ssm_d_state, 128);
    ck_assert_uint_eq(hp.ssm_conv_kernel, 4);
    ck_assert_uint_eq(hp.head_dim, 256);
    struct calib_mem_arch a;
    calib_mem_arch_from_hparams(&hp, n_bias, &a);
    const uint64_t n_full = r->n_layer / 4, n_rec = r->n_layer - n_full;
    const uint64_t state = n_rec * state_bytes(r->hk, r->hv, 128, 4);
    const uint32_t ctxs[2] = {4096, 32768};
    for (int k = 0; k < 2; k++)
        for (int kv = 0; kv < 2; kv++) {
            const uint64_t row = kv == RT_KV_F16 ? (uint64_t)r->n_head_kv * 256 * 2
                                                 : (uint64_t)r->n_head_kv * 256 / 32 * 34;
            const uint64_t want = 2 * n_full * ctxs[k] * row + state;
            struct calib_mem cm;
            const struct calib_mem_opts mo = {.n_ctx = ctxs[k], .kv_type = (enum rt_kv_type)kv,
                                              .weight_type = GGUF_TYPE_Q4_K};
            ck_assert_int_eq(calib_mem_estimate(&a, &mo, &cm, &err), MW_OK);
            ck_assert_msg(cm.kv_bytes == want, "%s ctx %u %s: plan KV %llu, want %llu", r->dir,
                          ctxs[k], kv ? "q8_0" : "f16", (unsigned long long)cm.kv_bytes,
                          (unsigned long long)want);
            /* the runtime's own estimate says which part is the state */
            struct rt_mem rm;
            const struct rt_ctx_opts co = {.n_ctx = ctxs[k], .kv_type = (enum rt_kv_type)kv,
                                           .n_threads = CALIB_MEM_DEFAULT_THREADS};
            ck_assert_int_eq(rt_mem_estimate(&hp, n_bias, &co, GGUF_TYPE_Q4_K, &rm, &err), MW_OK);
            ck_assert_uint_eq(rm.state_bytes, state);
            ck_assert_uint_eq(rm.kv_bytes, cm.kv_bytes);
        }
}
END_TEST

static const char *const kinds[] = {"qwen35", "qwen35moe", "qwen3next"};

START_TEST(test_runtime_alloc)
{
    char *dir = make_tmpdir("quant_plan");
    char *path = path_in(dir, "m.gguf");
    struct rt_fx_spec s;
    rt_fx_default(&s);
    s.arch = kinds[_i];
    s.n_layer = 8;
    s.n_ff = 96;
    s.gpt2 = true;
    s.tied = _i == 0;
    s.seed = 5 + (uint64_t)_i;
    struct mw_err err;
    mw_err_clear(&err);
    ck_assert_msg(rt_fx_write(path, &s, &err) == MW_OK, "%s: %s", kinds[_i], err.msg);
    struct rt_model *m = NULL;
    ck_assert_msg(rt_model_open(path, NULL, &m, &err) == MW_OK, "%s: %s", kinds[_i], err.msg);
    const struct rt_hparams *hp = rt_model_hparams(m);
    ck_assert_uint_eq(hp->n_layer, 8);
    ck_assert_uint_gt(hp->full_attn_interval, 0);
    struct calib_mem_arch a;
    calib_mem_arch_from_hparams(hp, 0, &a);
    const uint32_t ctxs[3] = {16, 128, 200};
    uint64_t n_rec = 0;
    for (uint32_t il = 0; il < hp->n_layer; il++) n_rec += rt_layer_is_recurrent(hp, il);
    ck_assert_uint_eq(n_rec, 6);
    const uint64_t state = n_rec * state_bytes(hp->ssm_n_group, hp->ssm_dt_rank,
                                               hp->ssm_d_state, hp->ssm_conv_kernel);
    for (int k = 0; k < 3; k++)
        for (int kv = 0; kv < 2; kv++) {
            struct rt_ctx *c = NULL;
            const struct rt_ctx_opts co = {.n_ctx = ctxs[k], .kv_type = (enum rt_kv_type)kv,
                                           .n_threads = 2};
            ck_assert_int_eq(rt_ctx_init(m, &co, &c, &err), MW_OK);
            struct rt_mem rmem;
            rt_ctx_mem(c, &rmem);
            rt_ctx_free(c);
            struct calib_mem cm;
            const struct calib_mem_opts mo = {.n_ctx = ctxs[k], .kv_type = (enum rt_kv_type)kv,
                                              .n_threads = 2, .weight_type = rt_model_main_type(m)};
            ck_assert_int_eq(calib_mem_estimate(&a, &mo, &cm, &err), MW_OK);
            ck_assert_msg(cm.kv_bytes == rmem.kv_bytes, "%s ctx %u: plan KV %llu, runtime %llu",
                          kinds[_i], ctxs[k], (unsigned long long)cm.kv_bytes,
                          (unsigned long long)rmem.kv_bytes);
            ck_assert_uint_eq(cm.scratch_bytes, rmem.scratch_bytes);
            ck_assert_uint_eq(rmem.state_bytes, state);
            const uint64_t row = kv == RT_KV_F16 ? (uint64_t)hp->n_head_kv * hp->head_dim * 2
                                                 : (uint64_t)hp->n_head_kv * hp->head_dim / 32 * 34;
            ck_assert_uint_eq(rmem.kv_bytes, 2 * (hp->n_layer - n_rec) * ctxs[k] * row + state);
        }
    /* --fit-ram on the file: the same KV figure at its context */
    struct gguf_file *f = NULL;
    ck_assert_int_eq(gguf_open(path, GGUF_OPEN_DEFAULT, &f, &err), MW_OK);
    struct calib_fit fit;
    ck_assert_int_eq(calib_fit_ram(f, NULL, (uint64_t)1 << 30, 128, RT_KV_F16, &fit, &err), MW_OK);
    ck_assert_uint_eq(fit.kv_bytes, 2 * (hp->n_layer - n_rec) * 128 *
                                        ((uint64_t)hp->n_head_kv * hp->head_dim * 2) + state);
    gguf_close(f);
    rt_model_close(m);
    remove(path);
    rm_rf(dir);
    free(path);
    free(dir);
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("quant_plan");
    TCase *tc = tcase_create("delta_net");
    tcase_add_loop_test(tc, test_real_configs, 0, (int)(sizeof reals / sizeof reals[0]));
    tcase_add_loop_test(tc, test_runtime_alloc, 0, 3);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    return run_suite(suite());
}
