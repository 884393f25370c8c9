/*
 * verify/verify_int.h — internals shared by the verify_*.c files. Only
 * verify/ and tests/check_verify.c include this.
 */
#ifndef MW_VERIFY_INT_H
#define MW_VERIFY_INT_H

#include "verify/verify.h"

#include "gguf/gguf.h"

#define VERIFY_DEFAULT_MAX_ITEMS 1000u
/* Bytes hashed/decoded between two madvise(MADV_DONTNEED) calls; tensors up
 * to this size are hashed in one call to gguf_hash_tensor(). */
#define VERIFY_CHUNK_BYTES ((uint64_t)4 << 20)
/* Elements decoded at a time by the deep check (a stack buffer of floats). */
#define VERIFY_DECODE_ELEMS 4096u

/* State of one verify run. */
struct vctx {
    struct verify_report *rep;
    uint32_t max_items;
    uint64_t items_cap;  /* allocated entries of rep->items */
    bool deep;
    const struct gguf_file *f;
    const uint8_t *base; /* whole file bytes */
    uint64_t size;
    bool mapped;         /* base is verify's own read-only mapping: may madvise */
    uint64_t dropped;    /* mapping released (MADV_DONTNEED) below this offset */
    uint64_t page;       /* page size */
};

/* Record a finding. tensor >= 0 names that tensor ("tensor 'x'"); otherwise
 * where (may be NULL) is copied as the context. Updates the counts and, for
 * the first error, rep->status. Never fails: when the item cannot be stored
 * it is counted in n_dropped. */
void verify__item(struct vctx *c, enum verify_level level, enum mw_status code, uint64_t off,
                  int64_t tensor, const char *where, const char *fmt, ...)
    __attribute__((format(printf, 7, 8)));

/* Tell the kernel the mapping is read sequentially / release checked pages
 * below off. No-ops unless c->mapped. */
void verify__advise_sequential(struct vctx *c);
void verify__release_below(struct vctx *c, uint64_t off, bool force);

/* Deep check: decode bytes [lo, hi) of tensor i's data (both multiples of
 * the type's block bytes, hi <= nbytes) with traits qt, in small pieces, and
 * report the first NaN/Inf with its element index. Returns false once a
 * non-finite value was reported (the caller stops decoding that tensor). */
struct quant_traits;
bool verify__deep_range(struct vctx *c, uint64_t i, const struct quant_traits *qt, uint64_t lo,
                        uint64_t hi);

#endif /* MW_VERIFY_INT_H */
