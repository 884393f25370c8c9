/* Fuzz target: importance-matrix files (quant_imatrix_load_mem) on arbitrary
 * bytes — the GGUF format of llama-imatrix (through the validating GGUF
 * reader, then the imatrix keys, the in_sum2/counts pairing and the
 * per-expert normalization) and the legacy .dat format (any bytes not
 * starting with "GGUF"). On success every accessor runs and the promises of
 * quant/quant.h are checked: entries sorted and found by name, every value
 * finite. The corpus is tests/fuzz/corpus/imatrix/. */
#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "quant/quant.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    volatile uint64_t sink = 0;
    struct quant_imatrix *im = NULL;
    struct mw_err err;
    mw_err_clear(&err);
    const enum mw_status s = quant_imatrix_load_mem(data, size, "fuzz.imatrix", &im, &err);
    if (s != MW_OK) {
        if (im || err.code != s) __builtin_trap();
        char buf[1024];
        sink += strlen(mw_err_format(&err, buf, sizeof buf));
        return 0;
    }
    const uint64_t n = quant_imatrix_count(im);
    if (n == 0) __builtin_trap();
    const char *prev = NULL;
    for (uint64_t i = 0; i < n; i++) {
        const char *name = quant_imatrix_name(im, i);
        if (!name) __builtin_trap();
        if (prev && strcmp(prev, name) >= 0) __builtin_trap(); /* sorted, unique */
        if (quant_imatrix_find(im, name) != (int64_t)i) __builtin_trap();
        uint64_t nv = 0;
        const float *v = quant_imatrix_values(im, i, &nv);
        if (!v || nv == 0) __builtin_trap();
        for (uint64_t j = 0; j < nv; j++)
            if (!isfinite(v[j])) __builtin_trap();
        sink += nv + (v[0] > 1.0f ? 1u : 0u);
        prev = name;
    }
    for (uint64_t i = 0; i < quant_imatrix_dataset_count(im); i++) {
        const char *d = quant_imatrix_dataset(im, i);
        if (!d) __builtin_trap();
        sink += strlen(d);
    }
    sink += quant_imatrix_chunk_count(im) + quant_imatrix_hash(im) +
            (quant_imatrix_is_legacy(im) ? 1u : 0u);
    quant_imatrix_free(im);
    (void)sink;
    return 0;
}
