/* tests/tools/hparams_cmp.c — calib_hparams_from_hf (HF config.json ->
 * rt_hparams, what plan, --fit-ram and calibration on an HF directory use)
 * against what the runtime reads from the GGUF `memwall convert` wrote for
 * the same directory (rt_model_open). Every field is compared except the
 * ones only the file has (general.name, general.file_type) and
 * has_rope_freqs / has_rope_long / fused_qkv / tied_output, which the
 * runtime takes from the tensor set (compared too: the HF side derives them
 * from the config).
 *
 *   hparams_cmp HF_DIR GGUF      exit 0 equal, 1 different (one line per
 *                                field on stdout), 3 cannot read an input
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "calib/calib.h"
#include "hf/hf.h"
#include "runtime/rt.h"

static int bad;

static void cmp_u(const char *f, unsigned long long a, unsigned long long b)
{
    if (a != b) {
        printf("%s: from config.json %llu, from the GGUF %llu\n", f, a, b);
        bad = 1;
    }
}

static void cmp_f(const char *f, float a, float b)
{
    if (memcmp(&a, &b, sizeof a) != 0 && !(a == b)) {
        printf("%s: from config.json %.9g, from the GGUF %.9g\n", f, (double)a, (double)b);
        bad = 1;
    }
}

int main(int argc, char **argv)
{
    if (argc != 3) {
        fprintf(stderr, "usage: hparams_cmp HF_DIR GGUF\n");
        return 2;
    }
    struct mw_err err;
    mw_err_clear(&err);
    char path[4096];
    snprintf(path, sizeof path, "%s/config.json", argv[1]);
    struct hf_config c;
    char msg[1024];
    if (hf_config_load(path, &c, &err) != MW_OK) {
        mw_err_format(&err, msg, sizeof msg);
        fprintf(stderr, "hparams_cmp: %s\n", msg);
        return 3;
    }
    struct rt_hparams a;
    calib_hparams_from_hf(&c, &a, NULL);
    struct rt_model *m = NULL;
    if (rt_model_open(argv[2], NULL, &m, &err) != MW_OK) {
        mw_err_format(&err, msg, sizeof msg);
        fprintf(stderr, "hparams_cmp: %s\n", msg);
        return 3;
    }
    const struct rt_hparams *b = rt_model_hparams(m);
#define U(f) cmp_u(#f, (unsigned long long)a.f, (unsigned long long)b->f)
#define F(f) cmp_f(#f, a.f, b->f)
    U(arch);
    if (strcmp(a.arch_name, b->arch_name) != 0) {
        printf("arch_name: %s / %s\n", a.arch_name, b->arch_name);
        bad = 1;
    }
    U(n_vocab); U(n_embd); U(n_layer); U(n_head); U(n_head_kv); U(head_dim); U(n_ff); U(n_rot);
    U(n_ctx_train); F(rms_eps); F(rope_base); F(rope_freq_scale); U(rope_neox);
    U(has_rope_freqs); U(tied_output); U(act); U(qk_norm); U(post_norms); U(embd_scale);
    U(fused_qkv); U(fused_gate_up); F(attn_scale); F(attn_softcap); F(final_softcap);
    U(n_swa); U(swa_pattern); F(rope_base_swa); U(n_ctx_orig); U(has_rope_long);
    F(rope_attn_factor); F(rope_freq_scale_swa);
    U(n_expert); U(n_expert_used); U(n_ff_exp); U(n_ff_shexp); U(moe_norm_w);
    /* the gated delta net (n_nextn too where config.json gives it: Qwen3-Next
     * counts its MTP blocks from the tensors) */
    U(full_attn_interval); U(ssm_conv_kernel); U(ssm_d_state); U(ssm_n_group); U(ssm_dt_rank);
    U(ssm_d_inner); U(attn_out_gate); U(ssm_v_tiled);
    if (c.n_nextn_from_config || !hf_arch_is_delta_net(c.arch)) U(n_nextn);
#undef U
#undef F
    rt_model_close(m);
    if (!bad) printf("hparams_cmp: %s: equal\n", argv[1]);
    return bad;
}
