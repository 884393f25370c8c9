/*
 * hf/hf_kv.c — writing one family's "<arch>.<suffix>" GGUF keys.
 *
 * Each family's key writer (hf_convert.c's llama-family ones, hf_gemma4.c,
 * hf_gptoss.c) is a list of keys in llama.cpp's converter's order. The
 * mechanics live here: the key name built in place, the first failure kept
 * in k->s and every later call a no-op, so a list needs no error check per
 * key and returns k->s at its end.
 */
#include <stdio.h>

#include "hf/hf_int.h"

void hf__kvs_init(struct hf_kvs *k, struct gguf_writer *w, const char *arch, struct mw_err *err)
{
    k->w = w;
    k->arch = arch;
    k->err = err;
    k->s = MW_OK;
    k->key[0] = '\0';
}

/* "<arch>.<suffix>" into k->key; false (k->s set) once k failed or when the
 * name does not fit. */
static bool key_of(struct hf_kvs *k, const char *suffix)
{
    if (k->s != MW_OK) return false;
    int n = snprintf(k->key, sizeof k->key, "%s.%s", k->arch, suffix);
    if (n < 0 || (size_t)n >= sizeof k->key) {
        k->s = MW_FAIL(k->err, MW_E_VALUE, MW_ERR_OFF_NONE, "GGUF key '%s.%s' longer than %zu bytes",
                       k->arch, suffix, sizeof k->key - 1);
        return false;
    }
    return true;
}

void hf__kv_u32(struct hf_kvs *k, const char *suffix, uint32_t v)
{
    if (key_of(k, suffix)) k->s = gguf_writer_set_u32(k->w, k->key, v, k->err);
}

void hf__kv_f32(struct hf_kvs *k, const char *suffix, float v)
{
    if (key_of(k, suffix)) k->s = gguf_writer_set_f32(k->w, k->key, v, k->err);
}

void hf__kv_str(struct hf_kvs *k, const char *suffix, const char *v)
{
    if (key_of(k, suffix)) k->s = gguf_writer_set_str(k->w, k->key, v, k->err);
}

void hf__kv_arr(struct hf_kvs *k, const char *suffix, enum gguf_vtype type, const void *v,
                uint64_t n)
{
    if (key_of(k, suffix)) k->s = gguf_writer_set_arr(k->w, k->key, type, v, n, k->err);
}

void hf__kv_file_type(struct hf_kvs *k, uint32_t ftype)
{
    if (k->s == MW_OK) k->s = gguf_writer_set_u32(k->w, "general.file_type", ftype, k->err);
}
