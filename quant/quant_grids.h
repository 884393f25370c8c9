/*
 * quant/quant_grids.h — the lattice tables of ggml's i-quants, shared by the
 * quantizers (quant_iq*.c) and the runtime's kernels (docs/formats.md §3.6).
 * Entry k of a u64 grid holds 8 non-negative magnitudes, byte j = element j;
 * of a u32 grid 4. ksigns_iq2xs[i] = i | (parity(i) << 7).
 */
#ifndef MW_QUANT_GRIDS_H
#define MW_QUANT_GRIDS_H

#include <stdint.h>

#define QUANT_IQ1S_DELTA 0.125f /* IQ1_S / IQ1_M shift of the +-1 lattice */

extern const uint8_t quant_ksigns_iq2xs[128];
extern const uint64_t quant_iq2xxs_grid[256];
extern const uint64_t quant_iq2xs_grid[512];
extern const uint64_t quant_iq2s_grid[1024];
extern const uint32_t quant_iq3xxs_grid[256];
extern const uint32_t quant_iq3s_grid[512];
extern const uint64_t quant_iq1s_grid[2048];

#endif /* MW_QUANT_GRIDS_H */
