/*
 * tests/tools/fixtures.h — the small deterministic GGUF fixture shared by
 * mkgguf and the Check tests, written with memwall's gguf writer.
 *
 * Layout (alignment 32): KVs general.architecture, general.name,
 * llama.block_count, mkgguf.u32s (u32[5]), mkgguf.f32s (f32[3]), mkgguf.strs
 * (string[3]), mkgguf.flag (bool), then the memwall.checksum.* keys (unless
 * checksums are off); tensors, each followed by padding:
 *   t.f32  F32  5x3   60 bytes
 *   t.f16  F16  7x2   28 bytes
 *   t.bf16 BF16 9     18 bytes
 *   t.q8_0 Q8_0 32x2  68 bytes
 *  [t.extra extra_type, one block]          (with_extra: e.g. a type without
 *                                            decoder; random block bytes)
 *  [t.big  F16  big_elems]                  (big_elems > 0)
 * The same options always give byte-identical files.
 */
#ifndef MW_TEST_FIXTURES_H
#define MW_TEST_FIXTURES_H

#include <stdbool.h>
#include <stdint.h>

#include "core/mw.h"

enum fx_poison {
    FX_POISON_NONE = 0,
    FX_NAN_F16,     /* t.f16 element FX_POISON_ELEM_F16 = NaN */
    FX_INF_F32,     /* t.f32 element FX_POISON_ELEM_F32 = +Inf */
    FX_NINF_BF16,   /* t.bf16 element FX_POISON_ELEM_BF16 = -Inf */
    FX_NAN_Q8_SCALE /* t.q8_0 block 1 scale = NaN: elements 32..63 */
};
#define FX_POISON_ELEM_F16 3
#define FX_POISON_ELEM_F32 7
#define FX_POISON_ELEM_BF16 8

struct fx_opts {
    bool no_checksums;
    enum fx_poison poison;
    bool with_extra;
    uint32_t extra_type; /* ggml type of t.extra */
    uint64_t big_elems; /* 0: no t.big; else its F16 element count */
};

/* Write the fixture to path (atomically, via the writer). opts may be NULL. */
enum mw_status fx_write_small(const char *path, const struct fx_opts *opts, struct mw_err *err);

/* xorshift64*: the fixtures' fixed-seed generator, the same sequence
 * everywhere (fixtures.c, mkgguf, moe_upcycle). s must not be 0. */
static inline uint64_t fx_rng_next(uint64_t *s)
{
    *s ^= *s >> 12;
    *s ^= *s << 25;
    *s ^= *s >> 27;
    return *s * 0x2545F4914F6CDD1DULL;
}

#endif /* MW_TEST_FIXTURES_H */
