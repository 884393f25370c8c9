/*
 * quant/quant_iq3.c — the 3-bit lattice types IQ3_XXS and IQ3_S
 * (docs/formats.md §3.6). Both quantize groups of 4 magnitudes onto a grid
 * of 4-tuples with odd coordinates 2l+1 (l = 0..7): IQ3_XXS on 256 grid
 * points (8-bit index, signs with even parity in 7 bits per 8 values),
 * IQ3_S on 512 (9-bit index, all 8 sign bits stored).
 *
 *   IQ3_XXS (98 bytes):  d:f16 | qs:u8[64] grid indices | u32[8]: per
 *                        32-group four 7-bit sign indices + 4-bit scale
 *   IQ3_S  (110 bytes):  d:f16 | qs:u8[64] | qh:u8[8] (index bit 8) |
 *                        signs:u8[32] | scales:u8[4] (4-bit pairs)
 *
 * Quantization follows ggml's quantize_iq3_xxs / quantize_iq3_s (with and
 * without importance weights). Their search rounds each 4-group to the
 * nearest lattice point l in 0..7^4; points off the grid are replaced by the
 * best of a neighbour list built once at start-up, so the lists (and their
 * order, which settles ties) are rebuilt here exactly as ggml builds them:
 * every grid point at one of the nwant smallest squared distances (2 for
 * IQ3_XXS, 3 for IQ3_S), ordered by distance, then by grid index.
 */
#include "quant/quant_int.h"
#include "quant/quant_grids.h"

#include <float.h>
#include <math.h>
#include <pthread.h>

#define IQ3_NMAP 4096 /* 8^4 lattice points */
#define IQ3_KMAXQ 8   /* levels per coordinate */

/* Total neighbour-list lengths (counts + entries) of the two grids: fixed
 * by the grids, so storage is static; iq3_build checks it never overflows. */
#define IQ3XXS_NBR 22825
#define IQ3S_NBR 28317

struct iq3_tab {
    int ngrid;
    int8_t pos[512][4];  /* grid point k: its coordinates 2l+1 */
    int16_t map[IQ3_NMAP]; /* >= 0: grid index; < 0: -(1 + offset of its list) */
    uint16_t *nbr;       /* per list: count, then grid indices */
    int nbr_cap;
};

static uint16_t nbr_xxs[IQ3XXS_NBR], nbr_s[IQ3S_NBR];
static struct iq3_tab tab_xxs = {.ngrid = 256, .nbr = nbr_xxs, .nbr_cap = IQ3XXS_NBR};
static struct iq3_tab tab_s = {.ngrid = 512, .nbr = nbr_s, .nbr_cap = IQ3S_NBR};
static pthread_once_t once_xxs = PTHREAD_ONCE_INIT, once_s = PTHREAD_ONCE_INIT;

/* Lattice coordinate l of a grid byte: IQ3_XXS stores the magnitudes
 * 4,12,..,52,62 (b >> 3 = l), IQ3_S stores 2l+1 (b >> 1 = l). */
static void iq3_build(struct iq3_tab *t, const uint32_t *grid, int shift, int nwant)
{
    for (int i = 0; i < IQ3_NMAP; i++) t->map[i] = -1;
    for (int k = 0; k < t->ngrid; k++) {
        int u = 0;
        for (int i = 0; i < 4; i++) {
            const int l = ((grid[k] >> (8 * i)) & 0xFF) >> shift;
            t->pos[k][i] = (int8_t)(2 * l + 1);
            u |= l << (3 * i);
        }
        t->map[u] = (int16_t)k;
    }
    int off = 0;
    for (int u = 0; u < IQ3_NMAP; u++) {
        if (t->map[u] >= 0) continue;
        int d2[512];
        for (int k = 0; k < t->ngrid; k++) {
            int s = 0;
            for (int i = 0; i < 4; i++) {
                const int d = t->pos[k][i] - (2 * ((u >> (3 * i)) & 7) + 1);
                s += d * d;
            }
            d2[k] = s;
        }
        /* ggml sorts (d2, k) pairs and keeps the first nwant distance
         * levels: the same as walking the levels upwards, each in k order */
        const int start = off;
        if (off >= t->nbr_cap) return; /* cannot happen: the grids fix the size */
        t->nbr[off++] = 0;
        int level = -1;
        for (int h = 0; h < nwant; h++) {
            int next = INT32_MAX;
            for (int k = 0; k < t->ngrid; k++)
                if (d2[k] > level && d2[k] < next) next = d2[k];
            if (next == INT32_MAX) break;
            for (int k = 0; k < t->ngrid; k++)
                if (d2[k] == next && off < t->nbr_cap) t->nbr[off++] = (uint16_t)k;
            level = next;
        }
        t->nbr[start] = (uint16_t)(off - start - 1);
        t->map[u] = (int16_t)(-1 - start);
    }
}

static void init_xxs(void) { iq3_build(&tab_xxs, quant_iq3xxs_grid, 3, 2); }
static void init_s(void) { iq3_build(&tab_s, quant_iq3s_grid, 1, 3); }

// --- dequantization ---

/* 8 values of one sign byte: magnitudes g1 (elements 0..3), g2 (4..7). */
static void iq3_put8(float db, uint32_t g1, uint32_t g2, uint8_t signs, float *y)
{
    for (int j = 0; j < 4; j++) {
        y[j] = db * (float)((g1 >> (8 * j)) & 0xFF) * (signs & (1u << j) ? -1.0f : 1.0f);
        y[j + 4] = db * (float)((g2 >> (8 * j)) & 0xFF) * (signs & (1u << (j + 4)) ? -1.0f : 1.0f);
    }
}

void quant__to_float_iq3_xxs(const void *blocks, float *y, uint64_t n)
{
    const uint8_t *b = blocks;
    for (uint64_t i = 0; i < n / QUANT_QK_K; i++, b += 98) {
        const float d = quant__get_f16(b);
        const uint8_t *qs = b + 2;
        for (int ib = 0; ib < 8; ib++, qs += 8) {
            const uint32_t aux = mw_le32(b + 66 + 4 * ib);
            const float db = d * (0.5f + (float)(aux >> 28)) * 0.5f;
            for (int l = 0; l < 4; l++, y += 8)
                iq3_put8(db, quant_iq3xxs_grid[qs[2 * l]], quant_iq3xxs_grid[qs[2 * l + 1]],
                         quant_ksigns_iq2xs[(aux >> (7 * l)) & 127], y);
        }
    }
}

void quant__to_float_iq3_s(const void *blocks, float *y, uint64_t n)
{
    const uint8_t *b = blocks;
    for (uint64_t i = 0; i < n / QUANT_QK_K; i++, b += 110) {
        const float d = quant__get_f16(b);
        const uint8_t *qs = b + 2, *qh = b + 66, *signs = b + 74, *sc = b + 106;
        for (int ib = 0; ib < 8; ib++, qs += 8, signs += 4) {
            const int ls = ib % 2 ? sc[ib / 2] >> 4 : sc[ib / 2] & 0xF;
            const float db = d * (float)(1 + 2 * ls);
            for (int l = 0; l < 4; l++, y += 8) {
                const int i1 = qs[2 * l] | (((qh[ib] >> (2 * l)) & 1) << 8);
                const int i2 = qs[2 * l + 1] | (((qh[ib] >> (2 * l + 1)) & 1) << 8);
                iq3_put8(db, quant_iq3s_grid[i1], quant_iq3s_grid[i2], signs[l], y);
            }
        }
    }
}

// --- quantization ---

/* What differs between the two quantizers (ggml's quantize_row_iq3_xxs_impl
 * and quantize_row_iq3_s_impl). */
struct iq3_kind {
    const struct iq3_tab *t;
    int nstep;       /* candidate scales (15 + 0.2 is) / max, is = -nstep..nstep */
    bool xxs;        /* even sign parity, eps test, refit only off-grid groups */
};

/* ggml's iq3_find_best_neighbour: the listed grid point with the smallest
 * weighted squared error at this scale (strictly smaller replaces, so the
 * first of equals wins); writes its levels to L and returns its index. If
 * every error is NaN or above FLT_MAX (ggml would assert) the first listed
 * point is taken. */
static int iq3_best_neighbour(const struct iq3_tab *t, const uint16_t *nb, const float *xval,
                              const float *w, float scale, int8_t *L)
{
    float best = FLT_MAX;
    int gi = nb[1];
    for (int j = 1; j <= nb[0]; j++) {
        const int8_t *pg = t->pos[nb[j]];
        float d2 = 0;
        for (int i = 0; i < 4; i++) {
            const float diff = scale * (float)pg[i] - xval[i];
            d2 += w[i] * diff * diff;
        }
        if (d2 < best) {
            best = d2;
            gi = nb[j];
        }
    }
    for (int i = 0; i < 4; i++) L[i] = (int8_t)((t->pos[gi][i] - 1) / 2);
    return gi;
}

/* The lattice point of 4 values at inverse scale id, clamped to 0..7. */
static int iq3_round4(const float *xval, float id, int8_t *L)
{
    int u = 0;
    for (int i = 0; i < 4; i++) {
        const int l = quant_clampi(quant_nint(0.5f * (id * xval[i] - 1)), 0, IQ3_KMAXQ - 1);
        L[i] = (int8_t)l;
        u |= l << (3 * i);
    }
    return u;
}

/* Grid point for the 4 values at inverse scale id: the rounded point if it
 * is on the grid (*on = true), else its best neighbour at `scale`. */
static int iq3_point(const struct iq3_tab *t, const float *xval, const float *waux, float id,
                     float scale, int8_t *L, bool *on)
{
    const int u = iq3_round4(xval, id, L);
    const int m = t->map[u];
    *on = m >= 0;
    if (m >= 0) return m;
    return iq3_best_neighbour(t, t->nbr + (-1 - m), xval, waux, scale, L);
}

static void iq3_sums(const float *w, const float *xval, const int8_t *L, float *sqx, float *sq2)
{
    float a = 0, b = 0;
    for (int i = 0; i < 32; i++) {
        const float q = (float)(2 * L[i] + 1);
        a += w[i] * xval[i] * q;
        b += w[i] * q * q;
    }
    *sqx = a;
    *sq2 = b;
}

/* One 32-group: signs (4 bytes; 7-bit indices for IQ3_XXS), the 8 grid
 * indices, and the group's scale (returned). Returns false for a group
 * ggml treats as all zero (scale 0, nothing written). */
static bool iq3_group(const struct iq3_kind *kd, const float *xb, const float *weight,
                      uint8_t signs[4], int gidx[8], float *scale_out)
{
    const struct iq3_tab *t = kd->t;
    float xval[32], waux[32];
    for (int i = 0; i < 32; i++) waux[i] = sqrtf(weight[i]);
    for (int k = 0; k < 4; k++) {
        int nflip = 0;
        unsigned s = 0;
        for (int i = 0; i < 8; i++) {
            const float v = xb[8 * k + i];
            if (v >= 0) {
                xval[8 * k + i] = v;
            } else {
                xval[8 * k + i] = -v;
                nflip++;
                s |= 1u << i;
            }
        }
        if (kd->xxs && nflip % 2) {
            /* odd count: flip the element that matters least, so the 8th
             * sign is the parity of the stored 7 */
            int imin = 0;
            float mn = weight[8 * k] * xb[8 * k] * xb[8 * k];
            for (int i = 1; i < 8; i++) {
                const float a = weight[8 * k + i] * xb[8 * k + i] * xb[8 * k + i];
                if (a < mn) {
                    mn = a;
                    imin = i;
                }
            }
            xval[8 * k + imin] = -xval[8 * k + imin];
            s ^= 1u << imin;
        }
        signs[k] = (uint8_t)(kd->xxs ? s & 127 : s);
    }
    float max = xval[0];
    for (int i = 1; i < 32; i++) max = max > xval[i] ? max : xval[i];
    if (kd->xxs ? max < 1e-8f : max == 0) return false;

    int8_t L[32] = {0}, Laux[32];
    bool on[8], on_aux[8];
    for (int k = 0; k < 8; k++) on[k] = kd->xxs;
    float best = 0, scale = max / (float)(2 * IQ3_KMAXQ - 1);
    for (int is = -kd->nstep; is <= kd->nstep; is++) {
        const float id = ((float)(2 * IQ3_KMAXQ - 1) + (float)is * 0.2f) / max;
        const float this_scale = 1 / id;
        for (int k = 0; k < 8; k++)
            iq3_point(t, xval + 4 * k, waux + 4 * k, id, this_scale, Laux + 4 * k, &on_aux[k]);
        float sqx, sq2;
        iq3_sums(weight, xval, Laux, &sqx, &sq2);
        if (sq2 > 0 && sqx * sqx > best * sq2) {
            scale = sqx / sq2;
            best = scale * sqx;
            memcpy(L, Laux, sizeof L);
            memcpy(on, on_aux, sizeof on);
        }
    }
    int n_off = 0;
    for (int k = 0; k < 8; k++) n_off += !on[k];
    if (n_off > 0 && scale > 0) {
        /* refit at the chosen scale (IQ3_S redoes every group) */
        const float id = 1 / scale;
        for (int k = 0; k < 8; k++) {
            if (kd->xxs && on[k]) continue;
            bool dummy;
            const int gi = iq3_point(t, xval + 4 * k, waux + 4 * k, id, scale, L + 4 * k, &dummy);
            for (int i = 0; i < 4; i++) L[4 * k + i] = (int8_t)((t->pos[gi][i] - 1) / 2);
        }
        float sqx, sq2;
        iq3_sums(weight, xval, L, &sqx, &sq2);
        if (sq2 > 0) scale = sqx / sq2;
    }
    if (scale < 0) { /* the scale is stored unsigned: flip the signs instead */
        scale = -scale;
        for (int k = 0; k < 4; k++) signs[k] = (uint8_t)(kd->xxs ? ~signs[k] & 127 : ~signs[k]);
    }
    for (int k = 0; k < 8; k++) {
        int u = 0;
        for (int i = 0; i < 4; i++) u |= L[4 * k + i] << (3 * i);
        const int m = t->map[u];
        gidx[k] = m >= 0 ? m : 0; /* always on the grid here (ggml aborts otherwise) */
    }
    *scale_out = scale;
    return true;
}

/* Per-element weights of a 32-group: qw * sqrt(sigma2 + x^2), or x^2. */
static void iq3_weights(const float *xb, const float *qw, float sigma2, float *w)
{
    for (int i = 0; i < 32; i++) w[i] = qw ? qw[i] * sqrtf(sigma2 + xb[i] * xb[i]) : xb[i] * xb[i];
}

static float iq3_sigma2(const float *x)
{
    float s = 0;
    for (int i = 0; i < QUANT_QK_K; i++) s += x[i] * x[i];
    return 2 * s / QUANT_QK_K;
}

void quant__from_float_iq3_xxs(const float *x, void *blocks, uint64_t n, const float *qw)
{
    pthread_once(&once_xxs, init_xxs);
    const struct iq3_kind kd = {&tab_xxs, 15, true};
    uint8_t *b = blocks;
    for (uint64_t ibl = 0; ibl < n / QUANT_QK_K; ibl++, b += 98, x += QUANT_QK_K) {
        const float *qwb = qw ? qw + QUANT_QK_K * ibl : NULL;
        const float sigma2 = iq3_sigma2(x);
        float scales[8], max_scale = 0, w[32];
        uint32_t sas[8] = {0};
        memset(b, 0, 98);
        for (int ib = 0; ib < 8; ib++) {
            iq3_weights(x + 32 * ib, qwb ? qwb + 32 * ib : NULL, sigma2, w);
            uint8_t s[4];
            int gi[8];
            scales[ib] = 0;
            if (!iq3_group(&kd, x + 32 * ib, w, s, gi, &scales[ib])) continue;
            for (int k = 0; k < 8; k++) b[2 + 8 * ib + k] = (uint8_t)gi[k];
            sas[ib] = s[0] | (uint32_t)s[1] << 7 | (uint32_t)s[2] << 14 | (uint32_t)s[3] << 21;
            max_scale = max_scale > scales[ib] ? max_scale : scales[ib];
        }
        if (max_scale == 0) { /* ggml then stores an all-zero block */
            memset(b, 0, 98);
            continue;
        }
        const float d = max_scale / 31;
        quant__put_f16(b, d * 1.0125f);
        const float id = 1 / d;
        for (int ib = 0; ib < 8; ib++) {
            const int l = quant_clampi(quant_nint(0.5f * (id * scales[ib] - 1)), 0, 15);
            mw_put_le32(b + 66 + 4 * ib, sas[ib] | (uint32_t)l << 28);
        }
    }
}

void quant__from_float_iq3_s(const float *x, void *blocks, uint64_t n, const float *qw)
{
    pthread_once(&once_s, init_s);
    const struct iq3_kind kd = {&tab_s, 9, false};
    uint8_t *b = blocks;
    for (uint64_t ibl = 0; ibl < n / QUANT_QK_K; ibl++, b += 110, x += QUANT_QK_K) {
        const float *qwb = qw ? qw + QUANT_QK_K * ibl : NULL;
        const float sigma2 = iq3_sigma2(x);
        float scales[8], max_scale = 0, w[32];
        memset(b, 0, 110);
        /* ggml advances its qs and signs cursors only past groups it
         * quantizes: after an all-zero group the next group's bytes land
         * in the zero group's slots (and the tail stays 0), while qh and the
         * scales stay indexed by group. Reproduced for byte identity. */
        uint8_t *qs = b + 2, *qh = b + 66, *signs = b + 74;
        for (int ib = 0; ib < 8; ib++) {
            iq3_weights(x + 32 * ib, qwb ? qwb + 32 * ib : NULL, sigma2, w);
            uint8_t s[4];
            int gi[8];
            scales[ib] = 0;
            if (!iq3_group(&kd, x + 32 * ib, w, s, gi, &scales[ib])) continue;
            for (int k = 0; k < 8; k++) {
                qs[k] = (uint8_t)(gi[k] & 255);
                qh[ib] |= (uint8_t)((gi[k] >> 8) << k);
            }
            memcpy(signs, s, 4);
            qs += 8;
            signs += 4;
            max_scale = max_scale > scales[ib] ? max_scale : scales[ib];
        }
        if (max_scale == 0) continue; /* d and scales stay 0 */
        const float d = max_scale / 31;
        quant__put_f16(b, d * 1.033f);
        const float id = 1 / d;
        for (int ib = 0; ib < 8; ib += 2) {
            const int l1 = quant_clampi(quant_nint(0.5f * (id * scales[ib] - 1)), 0, 15);
            const int l2 = quant_clampi(quant_nint(0.5f * (id * scales[ib + 1] - 1)), 0, 15);
            b[106 + ib / 2] = (uint8_t)(l1 | (l2 << 4));
        }
    }
}
