/*
 * tests/tools/rt_mkmodel.c — command-line front of tests/tools/rt_fixture.c
 * for the runtime's shell tests.
 *
 *   rt_mkmodel model OUT [--arch llama|qwen2|qwen3|gemma2|gemma3|phi3|qwen2moe|qwen3moe|
 *                               qwen35|qwen35moe|qwen3next]
 *                        [--type TYPE] [--tied] [--gpt2] [--rope-freqs] [--qk-gain G] [--seed N]
 *                        [--layers N] [--embd N] [--ff N] [--swa N] [--swa-pattern N]
 *                        [--orig-ctx N] [--experts N] [--experts-used K] [--ff-exp N]
 *                        [--ff-shexp N] [--ssm-state S] [--ssm-heads HK HV]
 *                        [--interval N] [--no-mtp] [--heads N KV] [--defect NAME]
 *       a tiny model (rt_fixture.h), valid unless --defect
 *   rt_mkmodel hostile DIR
 *       one file per defect of the catalogue, DIR/<defect>.gguf, and
 *       DIR/expect.tsv: "<defect>\t<exit code>\t<text the error must contain>"
 *   rt_mkmodel requant IN OUT TYPE
 *       IN with its 2-D float tensors re-encoded as TYPE (e.g. q8_0)
 *
 * Same arguments, same bytes. Exit status 0 ok, 1 writer error, 2 usage.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gguf/gguf.h"
#include "rt_fixture.h"

static const char usage[] =
    "usage: rt_mkmodel model OUT [--arch llama|qwen2|qwen3|gemma2|gemma3|phi3|qwen2moe|qwen3moe|\n"
    "                                    qwen35|qwen35moe|qwen3next]\n"
    "                            [--type TYPE] [--tied] [--gpt2] [--rope-freqs] [--qk-gain G] [--seed N]\n"
    "                            [--layers N] [--embd N] [--ff N] [--swa N] [--swa-pattern N]\n"
    "                            [--orig-ctx N] [--experts N] [--experts-used K] [--ff-exp N]\n"
    "                            [--ff-shexp N] [--ssm-state S] [--ssm-heads HK HV]\n"
    "                            [--interval N] [--no-mtp] [--heads N KV] [--defect NAME]\n"
    "       rt_mkmodel hostile DIR\n"
    "       rt_mkmodel requant IN OUT TYPE\n";

static int fail(const struct mw_err *err)
{
    char buf[1024];
    fprintf(stderr, "rt_mkmodel: %s\n", mw_err_format(err, buf, sizeof buf));
    return 1;
}

int main(int argc, char **argv)
{
    struct mw_err err;
    mw_err_clear(&err);
    if (argc >= 3 && strcmp(argv[1], "model") == 0) {
        struct rt_fx_spec s;
        rt_fx_default(&s);
        for (int i = 3; i < argc; i++) {
            const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
            if (strcmp(a, "--arch") == 0 && v) {
                s.arch = v, i++;
            } else if (strcmp(a, "--type") == 0 && v) {
                const int t = gguf_type_from_name(v);
                if (t < 0) return fputs(usage, stderr), 2;
                s.wtype = (uint32_t)t, i++;
            } else if (strcmp(a, "--qk-gain") == 0 && v) {
                s.qk_gain = strtof(v, NULL), i++;
            } else if (strcmp(a, "--seed") == 0 && v) {
                s.seed = strtoull(v, NULL, 10), i++;
            } else if (strcmp(a, "--layers") == 0 && v) {
                s.n_layer = (uint32_t)strtoul(v, NULL, 10), i++;
            } else if (strcmp(a, "--embd") == 0 && v) { /* head size stays 32 */
                s.n_embd = (uint32_t)strtoul(v, NULL, 10), i++;
                s.n_head = s.n_embd / 32 ? s.n_embd / 32 : 1;
                s.n_head_kv = s.n_head / 2 ? s.n_head / 2 : 1;
            } else if (strcmp(a, "--ff") == 0 && v) {
                s.n_ff = (uint32_t)strtoul(v, NULL, 10), i++;
            } else if (strcmp(a, "--swa") == 0 && v) {
                s.n_swa = (uint32_t)strtoul(v, NULL, 10), i++;
            } else if (strcmp(a, "--swa-pattern") == 0 && v) {
                s.swa_pattern = (uint32_t)strtoul(v, NULL, 10), i++;
            } else if (strcmp(a, "--orig-ctx") == 0 && v) {
                s.n_ctx_orig = (uint32_t)strtoul(v, NULL, 10), i++;
            } else if (strcmp(a, "--experts") == 0 && v) {
                s.n_expert = (uint32_t)strtoul(v, NULL, 10), i++;
            } else if (strcmp(a, "--experts-used") == 0 && v) {
                s.n_expert_used = (uint32_t)strtoul(v, NULL, 10), i++;
            } else if (strcmp(a, "--ff-exp") == 0 && v) {
                s.n_ff_exp = (uint32_t)strtoul(v, NULL, 10), i++;
            } else if (strcmp(a, "--ff-shexp") == 0 && v) {
                s.n_ff_shexp = (uint32_t)strtoul(v, NULL, 10), i++;
            } else if (strcmp(a, "--ssm-state") == 0 && v) {
                s.ssm_state = (uint32_t)strtoul(v, NULL, 10), i++;
            } else if (strcmp(a, "--ssm-heads") == 0 && v && i + 2 < argc) {
                s.ssm_k_heads = (uint32_t)strtoul(v, NULL, 10);
                s.ssm_v_heads = (uint32_t)strtoul(argv[i + 2], NULL, 10), i += 2;
            } else if (strcmp(a, "--interval") == 0 && v) {
                s.full_attn_interval = (uint32_t)strtoul(v, NULL, 10), i++;
            } else if (strcmp(a, "--heads") == 0 && v && i + 2 < argc) { /* after --embd */
                s.n_head = (uint32_t)strtoul(v, NULL, 10);
                s.n_head_kv = (uint32_t)strtoul(argv[i + 2], NULL, 10), i += 2;
                if (s.n_head == 0 || s.n_head_kv == 0) return fputs(usage, stderr), 2;
            } else if (strcmp(a, "--no-mtp") == 0) {
                s.no_mtp = true;
            } else if (strcmp(a, "--defect") == 0 && v) {
                int d = 1;
                while (d < RT_FX_DEFECT_COUNT && strcmp(rt_fx_defect_get((enum rt_fx_defect)d)->name, v))
                    d++;
                if (d == RT_FX_DEFECT_COUNT) return fputs(usage, stderr), 2;
                s.defect = (enum rt_fx_defect)d, i++;
            } else if (strcmp(a, "--tied") == 0) {
                s.tied = true;
            } else if (strcmp(a, "--gpt2") == 0) {
                s.gpt2 = true;
            } else if (strcmp(a, "--rope-freqs") == 0) {
                s.rope_freqs = true;
            } else {
                fputs(usage, stderr);
                return 2;
            }
        }
        if (rt_fx_write(argv[2], &s, &err) != MW_OK) return fail(&err);
        return 0;
    }
    if (argc == 3 && strcmp(argv[1], "hostile") == 0) {
        char path[4096];
        snprintf(path, sizeof path, "%s/expect.tsv", argv[2]);
        FILE *ex = fopen(path, "w");
        if (!ex) {
            fprintf(stderr, "rt_mkmodel: cannot create %s: %s\n", path, strerror(errno));
            return 1;
        }
        for (int d = 1; d < RT_FX_DEFECT_COUNT; d++) {
            const struct rt_fx_defect_info *di = rt_fx_defect_get((enum rt_fx_defect)d);
            struct rt_fx_spec s;
            rt_fx_default(&s);
            s.defect = (enum rt_fx_defect)d;
            snprintf(path, sizeof path, "%s/%s.gguf", argv[2], di->name);
            if (rt_fx_write(path, &s, &err) != MW_OK) {
                fclose(ex);
                return fail(&err);
            }
            fprintf(ex, "%s\t%d\t%s\n", di->name, mw_status_exit_code(di->code), di->where);
        }
        if (fclose(ex) != 0) return 1;
        return 0;
    }
    if (argc == 5 && strcmp(argv[1], "requant") == 0) {
        const int t = gguf_type_from_name(argv[4]);
        if (t < 0) {
            fputs(usage, stderr);
            return 2;
        }
        if (rt_fx_requant(argv[2], argv[3], (uint32_t)t, &err) != MW_OK) return fail(&err);
        return 0;
    }
    fputs(usage, stderr);
    return 2;
}
