/*
 * quant/quant_iq1.c — the 1.5/1.75-bit types IQ1_S and IQ1_M (docs/formats.md
 * §3.6): groups of 8 elements take a point of the 2048-entry ternary lattice
 * quant_iq1s_grid (values -1, 0, +1), shifted by +-QUANT_IQ1S_DELTA, times a
 * 3-bit odd sub-block multiplier (1, 3, ..., 15) and the f16 super-block scale.
 *
 *   IQ1_S (50 bytes):  d:f16 | qs:u8[32] | qh:u16[8]
 *       qh[b] (32-element sub-block b): bits 3l..3l+2 = high bits of the grid
 *       index of group l, bits 12..14 = multiplier m (scale 2m + 1), bit 15 =
 *       shift sign (set: -DELTA).
 *   IQ1_M (56 bytes):  qs:u8[32] | qh:u8[16] | scales:u8[8]
 *       qh[2b + h] holds groups 2h and 2h + 1 of sub-block b: bits 0..2 / 4..6
 *       the index high bits, bit 3 / 7 the shift sign; scales as four
 *       little-endian u16: 3-bit multipliers of the 16 16-element halves in
 *       bits 0..11, the f16 super-block scale spread over their top nibbles.
 *
 * Quantization follows ggml's quantize_iq1_s / quantize_iq1_m: per sub-block
 * (32 for IQ1_S, 16 for IQ1_M) an exhaustive search over the two cut points
 * of the elements sorted by value (levels -1 / 0 / +1 on the shifted
 * lattice), then a projection of each 8-group onto the lattice through
 * precomputed neighbour lists, then the super-block scale. IQ1_S has no
 * ggml path without importance weights; memwall uses all-ones weights there
 * (quant_rows refuses it; these bytes are memwall's own).
 */
#include "quant/quant_int.h"

#include <float.h>
#include <pthread.h>

#include "quant/quant_grids.h"

#define IQ1_NGRID 2048
#define IQ1_NTERN 6561 /* 3^8 ternary 8-groups */
/* Neighbour storage: for each of the 4513 ternary groups off the lattice, a
 * count and the grid points of its three nearest distance shells — 327721
 * entries in all for this grid (checked when the lists are built). */
#define IQ1_NB_CAP (4513 + 327721)

#define IQ1S_SUB 32
#define IQ1M_SUB 16
#define IQ1S_EPS 1e-12f /* ggml's GROUP_MAX_EPS_IQ1_S */
#define IQ1M_EPS 1e-7f  /* ggml's GROUP_MAX_EPS_IQ1_M */

// --- lattice tables (built once) ---

/* lv[g][i]: level 0..2 (value - 1 ... + 1) of element i of grid point g.
 * map[t], t = sum_i level_i * 3^i: the grid point with those levels (>= 0),
 * or -(offset + 1) of its neighbour list in nb: nb[offset] = count, followed
 * by that many grid points ordered by squared distance, then index — the
 * order ggml's qsort of (distance, index) pairs gives. */
static struct {
    uint8_t lv[IQ1_NGRID][8];
    int32_t map[IQ1_NTERN];
    uint16_t nb[IQ1_NB_CAP];
} iq1_tab;
static pthread_once_t iq1_once = PTHREAD_ONCE_INIT;

static void iq1_build(void)
{
    for (int t = 0; t < IQ1_NTERN; t++) iq1_tab.map[t] = -1 - IQ1_NB_CAP; /* placeholder */
    for (int g = 0; g < IQ1_NGRID; g++) {
        int t = 0, p3 = 1;
        for (int i = 0; i < 8; i++, p3 *= 3) {
            const int l = (int8_t)(uint8_t)(quant_iq1s_grid[g] >> (8 * i)) + 1;
            iq1_tab.lv[g][i] = (uint8_t)l;
            t += l * p3;
        }
        iq1_tab.map[t] = g;
    }
    /* ggml measures distances between the points 2l + 1; the squared
     * distance is 4 * sum (l - l')^2 <= 128. Only its order matters here. */
    int off = 0;
    for (int t = 0; t < IQ1_NTERN; t++) {
        if (iq1_tab.map[t] >= 0) continue;
        uint8_t l[8];
        for (int i = 0, r = t; i < 8; i++, r /= 3) l[i] = (uint8_t)(r % 3);
        uint8_t d2[IQ1_NGRID];
        int count[33] = {0};
        for (int g = 0; g < IQ1_NGRID; g++) {
            int s = 0;
            for (int i = 0; i < 8; i++) {
                const int e = iq1_tab.lv[g][i] - l[i];
                s += e * e;
            }
            d2[g] = (uint8_t)s;
            count[s]++;
        }
        int shells[3], nsh = 0, n = 0;
        for (int s = 0; s <= 32 && nsh < 3; s++)
            if (count[s]) {
                shells[nsh++] = s;
                n += count[s];
            }
        if (off + 1 + n > IQ1_NB_CAP) break; /* cannot happen (see IQ1_NB_CAP) */
        iq1_tab.map[t] = -(off + 1);
        iq1_tab.nb[off++] = (uint16_t)n;
        for (int k = 0; k < nsh; k++)
            for (int g = 0; g < IQ1_NGRID; g++)
                if (d2[g] == shells[k]) iq1_tab.nb[off++] = (uint16_t)g;
    }
}

static void iq1_init(void) { pthread_once(&iq1_once, iq1_build); }

/* The grid point for the 8-group of ternary code t: itself when on the
 * grid, else (ggml's iq1_find_best_neighbour2) the neighbour minimising
 * sum w (scale * xg[level] - x)^2, the first of equal distances. Where no distance is below FLT_MAX (NaN/Inf inputs
 * only) ggml scans the whole grid with an out-of-range element index and
 * then asserts; memwall takes the first neighbour instead. */
static int iq1_nearest(int t, const float *x, const float *w, float scale, const float *xg)
{
    const int32_t m = iq1_tab.map[t];
    if (m >= 0) return m;
    if (m < -IQ1_NB_CAP) return 0; /* tables incomplete (cannot happen) */
    const uint16_t *nb = iq1_tab.nb - m - 1;
    /* element i at level l contributes w (scale * xg[l] - x)^2: three
     * possible terms per element, formed once (the same operations ggml
     * performs per candidate) */
    float term[8][3];
    for (int i = 0; i < 8; i++)
        for (int l = 0; l < 3; l++) {
            const float diff = scale * xg[l] - x[i];
            term[i][l] = w[i] * diff * diff;
        }
    float best = FLT_MAX;
    int gi = nb[1];
    for (int j = 1; j <= nb[0]; j++) {
        const uint8_t *lv = iq1_tab.lv[nb[j]];
        float d2 = 0;
        for (int i = 0; i < 8; i++) d2 += term[i][lv[i]];
        if (d2 < best) {
            best = d2;
            gi = nb[j];
        }
    }
    return gi;
}

/* Ternary code of 8 levels. */
static inline int iq1_code(const int8_t *L)
{
    int t = 0;
    for (int i = 7; i >= 0; i--) t = 3 * t + L[i];
    return t;
}

// --- the sort of a sub-block ---

/* ggml sorts (value, index) pairs with qsort and a comparator on the value
 * alone, so equal values keep an order qsort decides: glibc's qsort (what
 * llama-quantize links) is, for arrays this small, a top-down merge sort
 * that takes from the left run unless left > right — stable. This is that
 * algorithm, step for step, so even NaNs (for which the comparator is
 * inconsistent) land where glibc puts them. */
struct iq1_pair {
    float v;
    int i;
};

static void iq1_msort(struct iq1_pair *b, int n, struct iq1_pair *tmp)
{
    if (n <= 1) return;
    int n1 = n / 2, n2 = n - n1;
    struct iq1_pair *b1 = b, *b2 = b + n1, *t = tmp;
    iq1_msort(b1, n1, tmp);
    iq1_msort(b2, n2, tmp);
    while (n1 > 0 && n2 > 0) {
        if (!(b1->v > b2->v)) {
            *t++ = *b1++;
            n1--;
        } else {
            *t++ = *b2++;
            n2--;
        }
    }
    if (n1 > 0) memcpy(t, b1, (size_t)n1 * sizeof *t);
    memcpy(b, tmp, (size_t)(n - n2) * sizeof *b);
}

/* idx[j] = the index of the j-th smallest x (n <= 32). */
static void iq1_order(const float *x, int n, int *idx)
{
    struct iq1_pair p[IQ1S_SUB], tmp[IQ1S_SUB];
    for (int j = 0; j < n; j++) p[j] = (struct iq1_pair){x[j], j};
    iq1_msort(p, n, tmp);
    for (int j = 0; j < n; j++) idx[j] = p[j].i;
}

// --- shared pieces ---

/* ggml's MAX(a, b) = a > b ? a : b, NaN behaviour included. */
static inline float iq1_max(float a, float b) { return a > b ? a : b; }

static float iq1_sigma2(const float *x)
{
    float s = 0;
    for (int i = 0; i < QUANT_QK_K; i++) s += x[i] * x[i];
    return 2 * s / QUANT_QK_K;
}

/* w = qw * sqrt(sigma2 + x^2); qw NULL: x^2 (IQ1_M) or unit weights (IQ1_S). */
static void iq1_weights(const float *x, const float *qw, float sigma2, int n, bool square, float *w)
{
    for (int i = 0; i < n; i++)
        w[i] = qw ? qw[i] * sqrtf(sigma2 + x[i] * x[i])
                  : square ? x[i] * x[i] : sqrtf(sigma2 + x[i] * x[i]);
}

static float iq1_absmax(const float *x, int n)
{
    float m = fabsf(x[0]);
    for (int i = 1; i < n; i++) m = iq1_max(m, fabsf(x[i]));
    return m;
}

/* Levels L (0, 1, 2) from the sorted order and the two cuts. */
static void iq1_levels(const int *idx, int n, int i1, int i2, int8_t *L)
{
    for (int j = 0; j < n; j++) L[idx[j]] = (int8_t)(j < i1 ? 0 : j < i2 ? 1 : 2);
}

static const float iq1_xp[3] = {-1 + QUANT_IQ1S_DELTA, QUANT_IQ1S_DELTA, 1 + QUANT_IQ1S_DELTA};
static const float iq1_xm[3] = {-1 - QUANT_IQ1S_DELTA, -QUANT_IQ1S_DELTA, 1 - QUANT_IQ1S_DELTA};

// --- dequantization ---

static void iq1_group_to_float(float dl, float delta, int g, float *y)
{
    for (int j = 0; j < 8; j++)
        y[j] = dl * ((float)(int8_t)(uint8_t)(quant_iq1s_grid[g] >> (8 * j)) + delta);
}

void quant__to_float_iq1_s(const void *blocks, float *y, uint64_t n)
{
    const uint8_t *b = blocks;
    for (uint64_t i = 0; i < n / QUANT_QK_K; i++, b += 50) {
        const float d = quant__get_f16(b);
        const uint8_t *qs = b + 2;
        for (int ib = 0; ib < 8; ib++) {
            const unsigned qh = mw_le16(b + 34 + 2 * ib);
            const float dl = d * (float)(2 * ((qh >> 12) & 7) + 1);
            const float delta = qh & 0x8000 ? -QUANT_IQ1S_DELTA : QUANT_IQ1S_DELTA;
            for (int l = 0; l < 4; l++, y += 8) {
                const int g = (int)(qs[4 * ib + l] | (((qh >> (3 * l)) & 7) << 8));
                iq1_group_to_float(dl, delta, g, y);
            }
        }
    }
}

/* IQ1_M's f16 super-block scale from the top nibbles of the scales. */
static uint16_t iq1m_scale_bits(const uint8_t *sc)
{
    return (uint16_t)((mw_le16(sc) >> 12) | ((mw_le16(sc + 2) >> 8) & 0x00F0) |
                      ((mw_le16(sc + 4) >> 4) & 0x0F00) | (mw_le16(sc + 6) & 0xF000));
}

void quant__to_float_iq1_m(const void *blocks, float *y, uint64_t n)
{
    const uint8_t *b = blocks;
    for (uint64_t i = 0; i < n / QUANT_QK_K; i++, b += 56) {
        const uint8_t *qs = b, *qh = b + 32, *sc = b + 48;
        const float d = mw_f16_to_f32(iq1m_scale_bits(sc));
        for (int ib = 0; ib < 8; ib++) {
            const unsigned s = mw_le16(sc + 2 * (ib / 2));
            const float dl[2] = {d * (float)(2 * ((s >> (6 * (ib % 2))) & 7) + 1),
                                 d * (float)(2 * ((s >> (6 * (ib % 2) + 3)) & 7) + 1)};
            for (int l = 0; l < 4; l++, y += 8) {
                const unsigned h = qh[2 * ib + l / 2] >> (4 * (l % 2));
                const float delta = h & 8 ? -QUANT_IQ1S_DELTA : QUANT_IQ1S_DELTA;
                iq1_group_to_float(dl[l / 2], delta, (int)(qs[4 * ib + l] | ((h & 7) << 8)), y);
            }
        }
    }
}

// --- IQ1_S quantization ---

/* One 32-element sub-block: the grid indices, *shift (+1: +DELTA, -1:
 * -DELTA) and the scale. Returns false when ggml skips the block (nothing
 * written; the caller keeps scale 0, shift +1). */
static bool iq1s_sub(const float *xb, const float *w, uint16_t index[4], float *scale_out,
                     int *shift_out)
{
    const float max = iq1_absmax(xb, IQ1S_SUB);
    if (max < IQ1S_EPS) return false;
    int idx[IQ1S_SUB];
    iq1_order(xb, IQ1S_SUB, idx);
    float sumx[IQ1S_SUB + 1], sumw[IQ1S_SUB + 1];
    sumx[0] = sumw[0] = 0;
    for (int j = 0; j < IQ1S_SUB; j++) {
        const int i = idx[j];
        sumx[j + 1] = sumx[j] + w[i] * xb[i];
        sumw[j + 1] = sumw[j] + w[i];
    }
    /* cuts i1 <= i2: sorted elements [0, i1) at level 0, [i1, i2) at 1,
     * [i2, 32) at 2; both shifts; a candidate wins on a strictly larger
     * sumqx^2 / sumq2 (compared without dividing, as ggml does) */
    float best = -FLT_MAX, scale = max;
    int b1 = -1, b2 = -1, shift = 0;
    const float S = sumx[IQ1S_SUB], W = sumw[IQ1S_SUB];
    const float *vp = iq1_xp, *vm = iq1_xm;
    for (int i1 = 0; i1 <= IQ1S_SUB; i1++) {
        /* the candidates of this i1, formed as ggml forms them (independent
         * of one another: a vectorizable loop), then accepted in its order */
        float qxp[IQ1S_SUB + 1], q2p[IQ1S_SUB + 1], qxm[IQ1S_SUB + 1], q2m[IQ1S_SUB + 1];
        const float x0 = sumx[i1] - sumx[0], w0 = sumw[i1] - sumw[0];
        for (int i2 = i1; i2 <= IQ1S_SUB; i2++) {
            const float x1 = sumx[i2] - sumx[i1], x2 = S - sumx[i2];
            const float w1 = sumw[i2] - sumw[i1], w2 = W - sumw[i2];
            qxp[i2] = x0 * vp[0] + x1 * vp[1] + x2 * vp[2];
            q2p[i2] = w0 * vp[0] * vp[0] + w1 * vp[1] * vp[1] + w2 * vp[2] * vp[2];
            qxm[i2] = x0 * vm[0] + x1 * vm[1] + x2 * vm[2];
            q2m[i2] = w0 * vm[0] * vm[0] + w1 * vm[1] * vm[1] + w2 * vm[2] * vm[2];
        }
        for (int i2 = i1; i2 <= IQ1S_SUB; i2++) {
            if (q2p[i2] > 0 && qxp[i2] * qxp[i2] > best * q2p[i2]) {
                scale = qxp[i2] / q2p[i2];
                best = scale * qxp[i2];
                b1 = i1, b2 = i2, shift = 1;
            }
            if (q2m[i2] > 0 && qxm[i2] * qxm[i2] > best * q2m[i2]) {
                scale = qxm[i2] / q2m[i2];
                best = scale * qxm[i2];
                b1 = i1, b2 = i2, shift = -1;
            }
        }
    }
    if (b1 < 0 || b2 < 0 || shift == 0) return false;
    int8_t L[IQ1S_SUB];
    iq1_levels(idx, IQ1S_SUB, b1, b2, L);
    if (scale < 0) {
        for (int j = 0; j < IQ1S_SUB; j++) L[j] = (int8_t)(2 - L[j]);
        scale = -scale;
        shift = -shift;
    }
    const float *xx = shift == 1 ? iq1_xp : iq1_xm;
    bool on_grid = true;
    for (int k = 0; k < 4; k++) {
        const int t = iq1_code(L + 8 * k);
        on_grid &= iq1_tab.map[t] >= 0;
        index[k] = (uint16_t)iq1_nearest(t, xb + 8 * k, w + 8 * k, scale, xx);
    }
    if (!on_grid) { /* refit the scale to the projected points */
        float sqx = 0, sq2 = 0;
        for (int k = 0; k < 4; k++) {
            const uint8_t *lv = iq1_tab.lv[index[k]];
            for (int j = 0; j < 8; j++) {
                const float wj = w[8 * k + j], q = xx[lv[j]];
                sqx += wj * q * xb[8 * k + j];
                sq2 += wj * q * q;
            }
        }
        if (sqx > 0 && sq2 > 0) scale = sqx / sq2;
    }
    *scale_out = scale;
    *shift_out = shift;
    return true;
}

void quant__from_float_iq1_s(const float *x, void *blocks, uint64_t n, const float *qw)
{
    iq1_init();
    uint8_t *b = blocks;
    for (uint64_t ibl = 0; ibl < n / QUANT_QK_K; ibl++, b += 50, x += QUANT_QK_K) {
        memset(b, 0, 50);
        const float *qwb = qw ? qw + QUANT_QK_K * ibl : NULL;
        const float sigma2 = iq1_sigma2(x);
        float scales[8], max_scale = 0;
        int shifts[8];
        uint16_t qh[8] = {0};
        for (int ib = 0; ib < 8; ib++) {
            const float *xb = x + IQ1S_SUB * ib;
            float w[IQ1S_SUB];
            uint16_t index[4];
            iq1_weights(xb, qwb ? qwb + IQ1S_SUB * ib : NULL, sigma2, IQ1S_SUB, false, w);
            scales[ib] = 0;
            shifts[ib] = 1;
            if (!iq1s_sub(xb, w, index, &scales[ib], &shifts[ib])) continue;
            for (int k = 0; k < 4; k++) {
                b[2 + 4 * ib + k] = (uint8_t)(index[k] & 255);
                qh[ib] |= (uint16_t)((index[k] >> 8) << (3 * k));
            }
            max_scale = iq1_max(max_scale, scales[ib]);
        }
        if (max_scale != 0) {
            const float d = max_scale / 15;
            quant__put_f16(b, d * 1.125f);
            const float id = 1 / d;
            for (int ib = 0; ib < 8; ib++) {
                int l = quant_clampi(quant_nint(0.5f * (id * scales[ib] - 1)), 0, 7);
                if (shifts[ib] == -1) l |= 8;
                qh[ib] |= (uint16_t)(l << 12);
            }
        }
        for (int ib = 0; ib < 8; ib++) mw_put_le16(b + 34 + 2 * ib, qh[ib]);
    }
}

// --- IQ1_M quantization ---

/* One 16-element sub-block. Shift pattern k: bit 1 = first 8 elements at
 * -DELTA, bit 0 = last 8 (ggml's best_k: 0 ++, 1 +-, 2 -+, 3 --). Returns
 * false when skipped. */
static bool iq1m_sub(const float *xb, const float *w, uint16_t index[2], float *scale_out,
                     int *k_out)
{
    const float max = iq1_absmax(xb, IQ1M_SUB);
    if (max < IQ1M_EPS) return false;
    int idx[IQ1M_SUB];
    iq1_order(xb, IQ1M_SUB, idx);
    /* Element j (sorted) at level l adds w*v*x to sumqx[k] and w*v*v to
     * sumq2[k], v its level on the lattice pattern k gives its half: the
     * same products ggml forms, formed once, as 8-lane rows tm[j][l] =
     * (sumqx terms k = 0..3, sumq2 terms k = 0..3). */
    float tm[IQ1M_SUB][3][8];
    for (int j = 0; j < IQ1M_SUB; j++) {
        const int i = idx[j], hi = i >= IQ1M_SUB / 2;
        for (int l = 0; l < 3; l++)
            for (int k = 0; k < 4; k++) {
                const float v = (hi ? k & 1 : k >> 1) ? iq1_xm[l] : iq1_xp[l];
                tm[j][l][k] = w[i] * v * xb[i];
                tm[j][l][4 + k] = w[i] * v * v;
            }
    }
    /* ggml sums the 16 terms in sorted order for every cut pair (i1, i2).
     * The partial sums over [0, i1) (level 0) and then [i1, i2) (level 1)
     * are shared by the pairs that extend them, so only the level-2 tail is
     * re-added per pair — the same additions in the same order. */
    float best = -FLT_MAX, scale = max;
    int b1 = -1, b2 = -1, bk = -1;
    float p0[8] = {0, 0, 0, 0, 0, 0, 0, 0};
    for (int i1 = 0; i1 <= IQ1M_SUB; i1++) {
        float p1[8];
        memcpy(p1, p0, sizeof p1);
        for (int i2 = i1; i2 <= IQ1M_SUB; i2++) {
            float s[8];
            memcpy(s, p1, sizeof s);
            for (int j = i2; j < IQ1M_SUB; j++)
                for (int k = 0; k < 8; k++) s[k] += tm[j][2][k];
            for (int k = 0; k < 4; k++) {
                const float sqx = s[k], sq2 = s[4 + k];
                if (sq2 > 0 && sqx * sqx > best * sq2) {
                    scale = sqx / sq2;
                    best = scale * sqx;
                    b1 = i1, b2 = i2, bk = k;
                }
            }
            if (i2 < IQ1M_SUB)
                for (int k = 0; k < 8; k++) p1[k] += tm[i2][1][k];
        }
        if (i1 < IQ1M_SUB)
            for (int k = 0; k < 8; k++) p0[k] += tm[i1][0][k];
    }
    if (b1 < 0 || b2 < 0 || bk < 0) return false;
    int8_t L[IQ1M_SUB];
    iq1_levels(idx, IQ1M_SUB, b1, b2, L);
    if (scale < 0) {
        for (int j = 0; j < IQ1M_SUB; j++) L[j] = (int8_t)(2 - L[j]);
        scale = -scale;
        bk = 3 - bk;
    }
    bool on_grid = true;
    for (int k = 0; k < 2; k++) {
        const float *xx = ((k == 0 ? bk >> 1 : bk & 1) ? iq1_xm : iq1_xp);
        const int t = iq1_code(L + 8 * k);
        on_grid &= iq1_tab.map[t] >= 0;
        index[k] = (uint16_t)iq1_nearest(t, xb + 8 * k, w + 8 * k, scale, xx);
    }
    if (!on_grid) {
        float sqx = 0, sq2 = 0;
        for (int k = 0; k < 2; k++) {
            const float *xx = ((k == 0 ? bk >> 1 : bk & 1) ? iq1_xm : iq1_xp);
            const uint8_t *lv = iq1_tab.lv[index[k]];
            for (int j = 0; j < 8; j++) {
                const float wj = w[8 * k + j], q = xx[lv[j]];
                sqx += wj * q * xb[8 * k + j];
                sq2 += wj * q * q;
            }
        }
        if (sqx > 0 && sq2 > 0) scale = sqx / sq2;
    }
    *scale_out = scale;
    *k_out = bk;
    return true;
}

void quant__from_float_iq1_m(const float *x, void *blocks, uint64_t n, const float *qw)
{
    static const uint8_t masks[4] = {0x00, 0x80, 0x08, 0x88};
    iq1_init();
    uint8_t *b = blocks;
    for (uint64_t ibl = 0; ibl < n / QUANT_QK_K; ibl++, b += 56, x += QUANT_QK_K) {
        memset(b, 0, 56);
        uint8_t *qs = b, *qh = b + 32;
        const float *qwb = qw ? qw + QUANT_QK_K * ibl : NULL;
        const float sigma2 = iq1_sigma2(x);
        float scales[16], max_scale = 0, w[IQ1M_SUB];
        int shifts[16];
        for (int ib = 0; ib < 16; ib++) {
            const float *xb = x + IQ1M_SUB * ib;
            uint16_t index[2];
            iq1_weights(xb, qwb ? qwb + IQ1M_SUB * ib : NULL, sigma2, IQ1M_SUB, true, w);
            scales[ib] = 0;
            shifts[ib] = 0;
            if (!iq1m_sub(xb, w, index, &scales[ib], &shifts[ib])) continue;
            qs[2 * ib] = (uint8_t)(index[0] & 255);
            qs[2 * ib + 1] = (uint8_t)(index[1] & 255);
            qh[ib] = (uint8_t)((index[0] >> 8) | ((index[1] >> 8) << 4));
            max_scale = iq1_max(max_scale, scales[ib]);
        }
        if (max_scale == 0) continue; /* all zero, scale bits included */
        uint16_t sc[4] = {0, 0, 0, 0};
        float d = max_scale / 15;
        const float id = 1 / d;
        float sqx = 0, sq2 = 0;
        /* the super-block scale: refit to the chosen points and multipliers */
        for (int ib = 0; ib < 16; ib++) {
            const int l = quant_clampi(quant_nint(0.5f * (id * scales[ib] - 1)), 0, 7);
            sc[ib / 4] |= (uint16_t)(l << (3 * (ib % 4)));
            qh[ib] |= masks[shifts[ib]];
            const float *xb = x + IQ1M_SUB * ib;
            iq1_weights(xb, qwb ? qwb + IQ1M_SUB * ib : NULL, sigma2, IQ1M_SUB, true, w);
            for (int k = 0; k < 2; k++) {
                const float *xx = ((k == 0 ? shifts[ib] >> 1 : shifts[ib] & 1) ? iq1_xm : iq1_xp);
                const int g = qs[2 * ib + k] | ((qh[ib] << (8 - 4 * k)) & 0x700);
                const uint8_t *lv = iq1_tab.lv[g];
                for (int j = 0; j < 8; j++) {
                    const float wj = w[8 * k + j], q = xx[lv[j]] * (float)(2 * l + 1);
                    sqx += wj * q * xb[8 * k + j];
                    sq2 += wj * q * q;
                }
            }
        }
        if (sq2 > 0) d = sqx / sq2;
        const uint16_t s = mw_f32_to_f16(d * 1.1125f);
        sc[0] |= (uint16_t)((s & 0x000F) << 12);
        sc[1] |= (uint16_t)((s & 0x00F0) << 8);
        sc[2] |= (uint16_t)((s & 0x0F00) << 4);
        sc[3] |= (uint16_t)(s & 0xF000);
        for (int i = 0; i < 4; i++) mw_put_le16(b + 48 + 2 * i, sc[i]);
    }
}
