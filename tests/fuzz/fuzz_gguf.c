/* Fuzz target: the GGUF reader on arbitrary bytes, strict and ALLOW_SHORT
 * modes, then every accessor on what it accepted (values walked recursively,
 * tensor data hashed, header checksum computed). */
#include <stdint.h>
#include <stddef.h>

#include "gguf/gguf.h"

static uint64_t walk_value(const struct gguf_value *v, int depth)
{
    uint64_t acc = v->type + v->n;
    if (v->type != GGUF_VT_ARRAY || depth > GGUF_MAX_ARRAY_DEPTH) {
        uint64_t u;
        double d;
        if (gguf_value_as_u64(v, &u)) acc += u;
        if (gguf_value_as_f64(v, &d)) acc += (d == d);
        if (v->type == GGUF_VT_STRING && v->n) acc += v->data[v->n - 1];
        return acc;
    }
    const uint64_t lim = v->n < 64 ? v->n : 64;
    for (uint64_t j = 0; j < lim; j++) {
        struct gguf_value e;
        if (gguf_value_elem(v, j, &e)) acc += walk_value(&e, depth + 1);
    }
    if (v->n) {
        struct gguf_value e;
        if (gguf_value_elem(v, v->n - 1, &e)) acc += walk_value(&e, depth + 1);
    }
    return acc;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static const unsigned modes[2] = {GGUF_OPEN_DEFAULT, GGUF_OPEN_ALLOW_SHORT};
    volatile uint64_t sink = 0;
    for (int m = 0; m < 2; m++) {
        struct gguf_file *f = NULL;
        struct mw_err err;
        mw_err_clear(&err);
        if (gguf_open_mem(data, size, "fuzz", modes[m], &f, &err) != MW_OK) {
            char buf[512];
            mw_err_format(&err, buf, sizeof buf);
            sink += buf[0];
            continue;
        }
        for (uint64_t i = 0; i < gguf_kv_count(f); i++) {
            sink += walk_value(gguf_kv_value(f, i), 0);
            sink += gguf_kv_find(f, gguf_kv_key(f, i)) >= 0;
        }
        for (uint64_t i = 0; i < gguf_tensor_count(f); i++) {
            const struct gguf_tensor *t = gguf_tensor_get(f, i);
            const uint8_t *p = gguf_tensor_data(f, i);
            if (p) sink += gguf_hash_tensor(p, (size_t)t->nbytes);
            sink += gguf_tensor_find(f, t->name) >= 0;
        }
        uint64_t h;
        if (gguf_hash_header(f, &h)) sink += h;
        gguf_close(f);
    }
    (void)sink;
    return 0;
}
