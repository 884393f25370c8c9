/* Fuzz target: the safetensors header parser (hf_st_open_mem) on arbitrary
 * bytes, then every accessor and every tensor's data on what it accepted; the
 * same bytes also go through the config.json parser (hf_config_parse), the
 * other JSON reader of the hf module's weights path. */
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "hf/hf.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    volatile uint64_t sink = 0;
    struct mw_err err;
    mw_err_clear(&err);
    struct hf_st *st = NULL;
    if (hf_st_open_mem(data, size, "fuzz.safetensors", &st, &err) == MW_OK) {
        const uint64_t n = hf_st_count(st);
        for (uint64_t i = 0; i < n; i++) {
            const struct hf_st_tensor *t = hf_st_get(st, i);
            sink += t->n_elems + t->nbytes + strlen(t->name) + t->n_dims;
            /* every byte of the tensor's data is inside the buffer */
            if (t->nbytes) sink += t->data[0] + t->data[t->nbytes - 1];
            if (hf_st_find(st, t->name) != (int64_t)i) __builtin_trap();
            if (t->file_off + t->nbytes > size) __builtin_trap();
        }
        for (uint64_t i = 0; i < hf_st_meta_count(st); i++) {
            const char *k, *v;
            if (hf_st_meta_get(st, i, &k, &v)) sink += strlen(k) + strlen(v);
        }
        hf_st_close(st);
    } else {
        char buf[1024];
        sink += strlen(mw_err_format(&err, buf, sizeof buf));
    }

    struct hf_config cfg;
    mw_err_clear(&err);
    if (hf_config_parse((const char *)data, size, "fuzz/config.json", &cfg, &err) == MW_OK)
        sink += cfg.n_embd + cfg.n_layer + cfg.head_dim;
    (void)sink;
    return 0;
}
