/*
 * tests/tools/moe_upcycle.c — a mixture-of-experts fixture with structured
 * (trained) weights: a dense llama GGUF (e.g. tinyllama-8m's F16 reference)
 * "upcycled" into a Mixtral-layout MoE, as sparse upcycling does.
 *
 *   moe_upcycle IN.gguf OUT.gguf N_EXPERT N_USED [NOISE] [ROUTER_GAIN]
 *
 * Every blk.N.ffn_{gate,up,down}.weight of IN becomes, in the same place,
 *   blk.N.ffn_gate_inp.weight   F32 {n_embd, N_EXPERT}   the router
 *   blk.N.ffn_gate_exps.weight  {n_embd, n_ff, N_EXPERT} (IN's type: F16/F32)
 *   blk.N.ffn_down_exps.weight  {n_ff, n_embd, N_EXPERT}
 *   blk.N.ffn_up_exps.weight    {n_embd, n_ff, N_EXPERT}
 * where expert e's matrix is the dense one with each element scaled by
 * (1 + NOISE * u), u uniform in [-1, 1) from a fixed xorshift stream per
 * (layer, tensor, expert) (default NOISE 0.15), and the router's elements are
 * uniform in [-g, g), g = ROUTER_GAIN * sqrt(3 / n_embd) (default gain 4, so
 * different tokens pick different experts). Top-N_USED routing with
 * normalized weights then keeps the model close to the dense one: a
 * quantization fixture whose perplexity means something. Every other tensor
 * and KV is copied; <arch>.expert_count and <arch>.expert_used_count are
 * added. Tensors are streamed one expert at a time.
 *
 * The same arguments always give byte-identical files. Exit: 0 ok, 1 bad
 * input or write error (message on stderr), 2 usage.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/mw.h"
#include "gguf/gguf.h"
#include "fixtures.h"

/* uniform in [-1, 1) */
static double rng_sym(uint64_t *r) { return (double)(fx_rng_next(r) >> 11) * 0x1p-52 - 1.0; }
static void rng_seed(uint64_t *r, uint64_t a, uint64_t b, uint64_t c)
{
    *r = 0x9E3779B97F4A7C15ULL ^ (a * 0xD1B54A32D192ED03ULL) ^ (b * 0xABC98388FB8FAC03ULL) ^
         (c * 0x8CB92BA72F3D8DD7ULL);
    if (!*r) *r = 1;
    for (int i = 0; i < 4; i++) fx_rng_next(r);
}

static void put_f32(uint8_t *p, float f)
{
    uint32_t u;
    memcpy(&u, &f, 4);
    mw_put_le32(p, u);
}
static float get_f32(const uint8_t *p)
{
    const uint32_t u = mw_le32(p);
    float f;
    memcpy(&f, &u, 4);
    return f;
}

static int is_ffn(const char *name, int *layer, int *which)
{
    static const char *const kinds[] = {"ffn_gate", "ffn_up", "ffn_down"};
    int l = -1, n = 0;
    if (sscanf(name, "blk.%d.%n", &l, &n) != 1 || l < 0 || n <= 0) return 0;
    for (int k = 0; k < 3; k++) {
        char want[64];
        snprintf(want, sizeof want, "%s.weight", kinds[k]);
        if (strcmp(name + n, want) == 0) {
            *layer = l;
            *which = k;
            return 1;
        }
    }
    return 0;
}

static const char *const exps_name[] = {"ffn_gate_exps", "ffn_up_exps", "ffn_down_exps"};

int main(int argc, char **argv)
{
    if (argc < 5 || argc > 7) {
        fprintf(stderr, "usage: moe_upcycle IN.gguf OUT.gguf N_EXPERT N_USED [NOISE] [ROUTER_GAIN]\n");
        return 2;
    }
    const long ne_arg = strtol(argv[3], NULL, 10), nu_arg = strtol(argv[4], NULL, 10);
    const double noise = argc > 5 ? strtod(argv[5], NULL) : 0.15;
    const double gain = argc > 6 ? strtod(argv[6], NULL) : 4.0;
    if (ne_arg < 2 || ne_arg > 256 || nu_arg < 1 || nu_arg > ne_arg || !(noise >= 0 && noise < 1) ||
        !(gain > 0)) {
        fprintf(stderr, "moe_upcycle: need 2 <= N_EXPERT <= 256, 1 <= N_USED <= N_EXPERT, "
                        "0 <= NOISE < 1, ROUTER_GAIN > 0\n");
        return 2;
    }
    const uint32_t n_exp = (uint32_t)ne_arg, n_used = (uint32_t)nu_arg;
    struct mw_err err;
    mw_err_clear(&err);
    struct gguf_file *in = NULL;
    struct gguf_writer *w = NULL;
    uint8_t *buf = NULL;
    float *fbuf = NULL;
    int rc = 1;
    if (gguf_open(argv[1], GGUF_OPEN_DEFAULT, &in, &err) != MW_OK) goto fail;
    const char *arch = NULL;
    uint64_t alen = 0;
    if (gguf_get_str(in, "general.architecture", &arch, &alen, &err) != MW_OK) goto fail;
    char key_count[96], key_used[96];
    snprintf(key_count, sizeof key_count, "%.*s.expert_count", (int)alen, arch);
    snprintf(key_used, sizeof key_used, "%.*s.expert_used_count", (int)alen, arch);
    if (gguf_kv_find(in, key_count) >= 0) {
        fprintf(stderr, "moe_upcycle: %s: already has %s\n", argv[1], key_count);
        goto out;
    }
    if (gguf_writer_init(&w, &err) != MW_OK) goto fail;
    const int64_t ia = gguf_kv_find(in, "general.alignment");
    if (ia >= 0) {
        uint32_t a;
        if (gguf_get_u32(in, "general.alignment", &a, &err) != MW_OK ||
            gguf_writer_set_alignment(w, a, &err) != MW_OK)
            goto fail;
    }
    for (uint64_t i = 0; i < gguf_kv_count(in); i++) {
        const char *k = gguf_kv_key(in, i);
        if (strncmp(k, "memwall.checksum.", 17) == 0 || strcmp(k, "general.alignment") == 0)
            continue;
        if (gguf_writer_copy_kv(w, in, i, &err) != MW_OK) goto fail;
    }
    if (gguf_writer_set_u32(w, key_count, n_exp, &err) != MW_OK ||
        gguf_writer_set_u32(w, key_used, n_used, &err) != MW_OK)
        goto fail;

    /* declare the tensors */
    uint64_t n_embd = 0, max_slab = 0;
    for (uint64_t i = 0; i < gguf_tensor_count(in); i++) {
        const struct gguf_tensor *t = gguf_tensor_get(in, i);
        int l, k;
        if (!is_ffn(t->name, &l, &k)) {
            if (gguf_writer_add_tensor(w, t->name, t->type, t->n_dims, t->ne, &err) != MW_OK)
                goto fail;
            continue;
        }
        if (t->n_dims != 2 || (t->type != GGUF_TYPE_F16 && t->type != GGUF_TYPE_F32)) {
            fprintf(stderr, "moe_upcycle: %s: tensor '%s': expected a 2-D F16/F32 matrix\n",
                    argv[1], t->name);
            goto out;
        }
        const uint64_t e = k == 2 ? t->ne[1] : t->ne[0];
        if (n_embd && e != n_embd) {
            fprintf(stderr, "moe_upcycle: %s: tensor '%s': n_embd %llu, expected %llu\n", argv[1],
                    t->name, (unsigned long long)e, (unsigned long long)n_embd);
            goto out;
        }
        n_embd = e;
        char nm[64];
        if (k == 0) { /* the router goes before the layer's first expert tensor */
            const uint64_t rne[2] = {n_embd, n_exp};
            snprintf(nm, sizeof nm, "blk.%d.ffn_gate_inp.weight", l);
            if (gguf_writer_add_tensor(w, nm, GGUF_TYPE_F32, 2, rne, &err) != MW_OK) goto fail;
        }
        const uint64_t ne3[3] = {t->ne[0], t->ne[1], n_exp};
        snprintf(nm, sizeof nm, "blk.%d.%s.weight", l, exps_name[k]);
        if (gguf_writer_add_tensor(w, nm, t->type, 3, ne3, &err) != MW_OK) goto fail;
        if (t->nbytes > max_slab) max_slab = t->nbytes;
    }
    if (n_embd == 0) {
        fprintf(stderr, "moe_upcycle: %s: no blk.N.ffn_gate/up/down.weight tensors\n", argv[1]);
        goto out;
    }
    if (max_slab < n_embd * n_exp * 4) max_slab = n_embd * n_exp * 4;
    buf = malloc((size_t)max_slab);
    fbuf = malloc((size_t)(n_embd * n_exp) * sizeof(float));
    if (!buf || !fbuf) {
        fprintf(stderr, "moe_upcycle: out of memory\n");
        rc = 3;
        goto out;
    }
    if (gguf_writer_open(w, argv[2], &err) != MW_OK) goto fail;
    for (uint64_t i = 0; i < gguf_tensor_count(in); i++) {
        const struct gguf_tensor *t = gguf_tensor_get(in, i);
        const uint8_t *d = gguf_tensor_data(in, i);
        if (!d) {
            fprintf(stderr, "moe_upcycle: %s: tensor '%s' is not in the file\n", argv[1], t->name);
            goto out;
        }
        int l, k;
        if (!is_ffn(t->name, &l, &k)) {
            if (gguf_writer_write(w, d, (size_t)t->nbytes, &err) != MW_OK) goto fail;
            continue;
        }
        if (k == 0) {
            uint64_t r;
            rng_seed(&r, (uint64_t)l, 7, 0);
            const double g = gain * sqrt(3.0 / (double)n_embd);
            for (uint64_t j = 0; j < n_embd * n_exp; j++) fbuf[j] = (float)(g * rng_sym(&r));
            for (uint64_t j = 0; j < n_embd * n_exp; j++) put_f32(buf + 4 * j, fbuf[j]);
            if (gguf_writer_write(w, buf, (size_t)(n_embd * n_exp * 4), &err) != MW_OK) goto fail;
        }
        const uint64_t nel = t->ne[0] * t->ne[1];
        for (uint32_t e = 0; e < n_exp; e++) {
            uint64_t r;
            rng_seed(&r, (uint64_t)l, (uint64_t)k + 1, (uint64_t)e + 1);
            for (uint64_t j = 0; j < nel; j++) {
                const double s = 1.0 + noise * rng_sym(&r);
                if (t->type == GGUF_TYPE_F16) {
                    const float x = mw_f16_to_f32(mw_le16(d + 2 * j));
                    mw_put_le16(buf + 2 * j, mw_f32_to_f16((float)(x * s)));
                } else {
                    const float x = get_f32(d + 4 * j);
                    put_f32(buf + 4 * j, (float)(x * s));
                }
            }
            if (gguf_writer_write(w, buf, (size_t)t->nbytes, &err) != MW_OK) goto fail;
        }
    }
    if (gguf_writer_finish(w, &err) != MW_OK) goto fail;
    rc = 0;
    goto out;
fail: {
    char m[1024];
    fprintf(stderr, "moe_upcycle: %s\n", mw_err_format(&err, m, sizeof m));
    rc = 1;
}
out:
    free(buf);
    free(fbuf);
    gguf_writer_free(w);
    gguf_close(in);
    return rc;
}
