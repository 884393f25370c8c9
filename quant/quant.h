/*
 * quant/quant.h — ggml block formats: the function half of the type traits
 * (the size half — block elements, bytes per block, names — is gguf/gguf.h's
 * gguf_type_get()). One table indexed by ggml type id; nothing outside it
 * switches over types.
 *
 * Block layouts are bit-exact with ggml (shared/docs/formats.md §3).
 */
#ifndef MW_QUANT_H
#define MW_QUANT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "../gguf/gguf.h"

struct quant_traits {
    uint32_t type; /* ggml type id */
    /* Decode n elements (a multiple of the block size) from blocks to f32,
     * exactly as ggml's to_float does. */
    void (*to_float)(const void *blocks, float *out, uint64_t n);
};

/* Traits of type t, or NULL when memwall cannot decode that type yet. */
const struct quant_traits *quant_traits_get(uint32_t t);

#endif /* MW_QUANT_H */
