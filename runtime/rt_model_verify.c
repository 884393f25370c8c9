/*
 * runtime/rt_model_verify.c — memwall-run --verify: the file's
 * memwall.checksum.* keys (xxh3 of the header and of every tensor's bytes)
 * checked against its contents (rt.h rt_model_verify).
 */
#include "runtime/rt_int.h"

#include <string.h>

enum mw_status rt_model_verify(const struct rt_model *m, uint64_t *n_checked, struct mw_err *err)
{
    const struct gguf_file *f = m->f;
    *n_checked = 0;
    const int64_t ia = gguf_kv_find(f, GGUF_KEY_CK_ALGO);
    const int64_t it = gguf_kv_find(f, GGUF_KEY_CK_TENSORS);
    const int64_t ih = gguf_kv_find(f, GGUF_KEY_CK_HEADER);
    if (ia < 0 && it < 0 && ih < 0) return MW_OK;
    mw_err_set_path(err, gguf_path(f));
    if (ia < 0 || it < 0 || ih < 0) {
        mw_err_set_where(err, "key 'memwall.checksum.*'");
        return MW_FAIL(err, MW_E_FORMAT, MW_ERR_OFF_NONE,
                       "incomplete checksum keys (algorithm, tensors and header are all needed)");
    }
    const struct gguf_value *va = gguf_kv_value(f, (uint64_t)ia);
    if (va->type != GGUF_VT_STRING || va->n != strlen(GGUF_CK_ALGO_NAME) ||
        memcmp(va->data, GGUF_CK_ALGO_NAME, va->n) != 0) {
        mw_err_set_where(err, "key '%s'", GGUF_KEY_CK_ALGO);
        return MW_FAIL(err, MW_E_UNSUPPORTED, gguf_kv_off(f, (uint64_t)ia),
                       "checksum algorithm is not \"%s\"", GGUF_CK_ALGO_NAME);
    }
    const struct gguf_value *vt = gguf_kv_value(f, (uint64_t)it);
    if (vt->type != GGUF_VT_ARRAY || vt->elem_type != GGUF_VT_U64 ||
        vt->n != gguf_tensor_count(f)) {
        mw_err_set_where(err, "key '%s'", GGUF_KEY_CK_TENSORS);
        return MW_FAIL(err, MW_E_FORMAT, gguf_kv_off(f, (uint64_t)it),
                       "expected u64[%llu] (one per tensor)",
                       (unsigned long long)gguf_tensor_count(f));
    }
    const struct gguf_value *vh = gguf_kv_value(f, (uint64_t)ih);
    uint64_t h;
    if (vh->type != GGUF_VT_U64 || !gguf_hash_header(f, &h)) {
        mw_err_set_where(err, "key '%s'", GGUF_KEY_CK_HEADER);
        return MW_FAIL(err, MW_E_FORMAT, gguf_kv_off(f, (uint64_t)ih), "expected u64");
    }
    if (h != mw_le64(vh->data)) {
        mw_err_set_where(err, "header");
        return MW_FAIL(err, MW_E_CHECKSUM, 0,
                       "header checksum %016llx, stored %016llx (metadata or tensor table changed)",
                       (unsigned long long)h, (unsigned long long)mw_le64(vh->data));
    }
    for (uint64_t i = 0; i < gguf_tensor_count(f); i++) {
        const struct gguf_tensor *t = gguf_tensor_get(f, i);
        const uint8_t *p = gguf_tensor_data(f, i);
        size_t n;
        if (!p || !mw_u64_to_size(t->nbytes, &n)) {
            mw_err_set_where(err, "tensor '%.64s'", t->name);
            return MW_FAIL(err, MW_E_TRUNC, t->file_off, "data is not in the file");
        }
        const uint64_t got = gguf_hash_tensor(p, n);
        const uint64_t want = mw_le64(vt->data + 8 * i);
        if (got != want) {
            mw_err_set_where(err, "tensor '%.64s'", t->name);
            return MW_FAIL(err, MW_E_CHECKSUM, t->file_off,
                           "checksum mismatch: xxh3 %016llx, stored %016llx (data changed)",
                           (unsigned long long)got,
                           (unsigned long long)want);
        }
        (*n_checked)++;
    }
    return MW_OK;
}
