/*
 * quant/quant_iq2.c — the 2-bit lattice types IQ2_XXS, IQ2_XS and IQ2_S
 * (docs/formats.md §3.6). Every 8 consecutive weights are one point of a
 * grid of 8-vectors with magnitudes {8, 25, 43} (quant_grids.h) times 8
 * signs; a 4-bit sub-scale s per 32 (IQ2_XXS) or 16 (IQ2_XS, IQ2_S)
 * elements gives the factor d * (0.5 + s) / 4.
 *   IQ2_XXS: d:f16 | 8 x (grid:u8[4] | u32: signs 4 x 7 bits, s:4)    66 B
 *   IQ2_XS:  d:f16 | qs:u16[32] (grid:9 | signs:7) | scales:u8[8]     74 B
 *   IQ2_S:   d:f16 | grid_lo:u8[32] | signs:u8[32] | grid_hi:u8[8]
 *            (2 bits each) | scales:u8[8]                              82 B
 * The 7-bit sign indices of IQ2_XXS / IQ2_XS expand through ksigns (the
 * eighth sign makes the count of minus signs even); IQ2_S stores all 8.
 *
 * Quantization follows ggml's quantize_row_iq2_{xxs,xs,s}_impl: per group,
 * signs taken out (with the parity fix-up where the format needs it), a
 * search over candidate scales in which each 8-vector is rounded to levels
 * l in {0,1,2} (value 2l+1) and, when that point is not on the grid,
 * replaced by the best of its precomputed grid neighbours; then the group
 * scales are quantized to 4 bits against the block's largest.
 *
 * The neighbour lists are ggml's (iq2xs_init_impl): for each 8-vector of
 * levels not on the grid, the grid points at the smallest squared distance
 * (IQ2_S), or at the two smallest (IQ2_XXS, IQ2_XS), ordered by distance
 * then grid index — the order decides ties in the best-neighbour search.
 * They are built once per type under pthread_once into static storage;
 * only the 3^8 level vectors the quantizers can form are covered (ggml also
 * lists vectors with a level 3, which none of these searches produce).
 */
#include "quant/quant_int.h"

#include <float.h>
#include <pthread.h>

#include "quant/quant_grids.h"

#define KMAXQ 3                /* levels 0..KMAXQ-1 */
#define NPTS 6561              /* 3^8 level vectors */
#define EPS_IQ2S 1e-8f         /* ggml's GROUP_MAX_EPS_IQ2_S */

// --- the lattices ---

/* Neighbour-list storage per type: one count plus the list for each level
 * vector off the grid. The totals follow from the const grids (off-grid
 * vectors + list entries, counted from ggml's construction); should they
 * not fit, lattice_build maps the rest to their nearest grid point — memory
 * safe, and visible as byte differences in the test vectors. */
#define NB_XXS (6305 + 113157)
#define NB_XS (6049 + 181721)
#define NB_S (5537 + 44716)

struct iq2_lattice {
    const uint64_t *grid; /* magnitudes, byte i = element i */
    int ngrid;
    int nwant;            /* distance classes in each neighbour list */
    uint8_t *lv;          /* [ngrid][8] levels 0..2 */
    int32_t *map;         /* [NPTS]: grid index, or -(1 + offset of the list in nb) */
    uint16_t *nb;         /* lists: count, then grid indices */
    int nb_cap;
};

static uint8_t lv_xxs[256 * 8], lv_xs[512 * 8], lv_s[1024 * 8];
static int32_t map_xxs[NPTS], map_xs[NPTS], map_s[NPTS];
static uint16_t nb_xxs[NB_XXS], nb_xs[NB_XS], nb_s[NB_S];

static struct iq2_lattice lat_xxs = {quant_iq2xxs_grid, 256, 2, lv_xxs, map_xxs, nb_xxs, NB_XXS};
static struct iq2_lattice lat_xs = {quant_iq2xs_grid, 512, 2, lv_xs, map_xs, nb_xs, NB_XS};
static struct iq2_lattice lat_s = {quant_iq2s_grid, 1024, 1, lv_s, map_s, nb_s, NB_S};

/* Level of a grid magnitude: 8 -> 0, 25 -> 1, 43 -> 2. */
static int mag_level(unsigned m) { return m < 16 ? 0 : (m < 34 ? 1 : 2); }

/* The base-3 index of 8 levels (element i is digit i). */
static int pt_index(const uint8_t *l)
{
    int t = 0;
    for (int i = 7; i >= 0; i--) t = 3 * t + l[i];
    return t;
}

static void lattice_build(struct iq2_lattice *g)
{
    for (int k = 0; k < g->ngrid; k++)
        for (int i = 0; i < 8; i++)
            g->lv[8 * k + i] = (uint8_t)mag_level((unsigned)(g->grid[k] >> (8 * i)) & 0xFF);
    for (int t = 0; t < NPTS; t++) g->map[t] = INT32_MIN;
    for (int k = 0; k < g->ngrid; k++) g->map[pt_index(g->lv + 8 * k)] = k;
    int off = 0;
    int d2[1024];
    for (int t = 0; t < NPTS; t++) {
        if (g->map[t] != INT32_MIN) continue;
        int pos[8];
        for (int i = 0, r = t; i < 8; i++, r /= 3) pos[i] = 2 * (r % 3) + 1;
        /* distances in odd units 2l+1, as ggml measures them */
        int dmin = INT32_MAX;
        for (int j = 0; j < g->ngrid; j++) {
            int s = 0;
            for (int i = 0; i < 8; i++) {
                const int e = 2 * g->lv[8 * j + i] + 1 - pos[i];
                s += e * e;
            }
            d2[j] = s;
            dmin = s < dmin ? s : dmin;
        }
        int dnext = dmin; /* second distance class (nwant 2) */
        if (g->nwant > 1) {
            dnext = INT32_MAX;
            for (int j = 0; j < g->ngrid; j++)
                if (d2[j] > dmin && d2[j] < dnext) dnext = d2[j];
        }
        int n = 0;
        for (int j = 0; j < g->ngrid; j++) n += d2[j] == dmin || d2[j] == dnext;
        if (off + 1 + n > g->nb_cap) { /* cannot happen for the const grids: */
            int j0 = 0;                   /* treat the point as its nearest */
            while (d2[j0] != dmin) j0++;
            g->map[t] = j0;
            continue;
        }
        g->map[t] = -(1 + off);
        g->nb[off++] = (uint16_t)n;
        for (int j = 0; j < g->ngrid; j++)
            if (d2[j] == dmin) g->nb[off++] = (uint16_t)j;
        if (dnext != dmin)
            for (int j = 0; j < g->ngrid; j++)
                if (d2[j] == dnext) g->nb[off++] = (uint16_t)j;
    }
}

static pthread_once_t once_xxs = PTHREAD_ONCE_INIT, once_xs = PTHREAD_ONCE_INIT,
                      once_s = PTHREAD_ONCE_INIT;
static void build_xxs(void) { lattice_build(&lat_xxs); }
static void build_xs(void) { lattice_build(&lat_xs); }
static void build_s(void) { lattice_build(&lat_s); }

/* ggml's iq2_find_best_neighbour: among the neighbours of an off-grid
 * vector, the first with the smallest weighted error sum wa*(scale*q -
 * x)^2 (strict <). Where no error compares below FLT_MAX (NaN or Inf
 * inputs; ggml asserts) the first neighbour is taken. Writes its levels
 * to L and returns its grid index. */
static int best_neighbour(const struct iq2_lattice *g, int32_t m, const float *xval,
                          const float *wa, float scale, int8_t *L)
{
    const uint16_t *nb = g->nb + (-m - 1);
    const int n = nb[0];
    float best = FLT_MAX;
    int gi = n > 0 ? nb[1] : 0;
    for (int j = 1; j <= n; j++) {
        const uint8_t *lv = g->lv + 8 * nb[j];
        float d2 = 0;
        for (int i = 0; i < 8; i++) {
            const float diff = scale * (float)(2 * lv[i] + 1) - xval[i];
            d2 += wa[i] * diff * diff;
        }
        if (d2 < best) {
            best = d2;
            gi = nb[j];
        }
    }
    for (int i = 0; i < 8; i++) L[i] = (int8_t)g->lv[8 * gi + i];
    return gi;
}

/* Levels of 8 values at inverse scale id: nearest_int((id*x - 1)/2)
 * clamped to 0..2. Returns the point's map entry. */
static int32_t round8(const struct iq2_lattice *g, const float *xval, float id, int8_t *L)
{
    uint8_t u[8];
    for (int i = 0; i < 8; i++) {
        const int l = quant_nint(0.5f * (id * xval[i] - 1));
        u[i] = (uint8_t)(l < 0 ? 0 : (l > KMAXQ - 1 ? KMAXQ - 1 : l));
        L[i] = (int8_t)u[i];
    }
    return g->map[pt_index(u)];
}

/* Grid index of the final levels L of an 8-vector. On every finite input
 * they are on the grid (ggml aborts otherwise); NaN/Inf inputs can leave
 * other values, which are clamped and, off the grid, replaced by the
 * first neighbour — deterministic bytes. */
static int final_index(const struct iq2_lattice *g, const int8_t *L)
{
    uint8_t u[8];
    for (int i = 0; i < 8; i++) u[i] = (uint8_t)(L[i] < 0 ? 0 : (L[i] > 2 ? 2 : L[i]));
    const int32_t m = g->map[pt_index(u)];
    return m >= 0 ? m : g->nb[-m - 1 + 1];
}

/* Signs of one 8-vector: xval = |x|, returns the sign bits (bit i: x[i]
 * negative, as ggml tests it: !(x >= 0)). With parity (IQ2_XXS, IQ2_XS),
 * an odd count of minus signs is made even by flipping the element of
 * least w*x^2 (first of equals), whose xval then turns negative. */
static unsigned signs8(const float *x, const float *w, float *xval, bool parity)
{
    unsigned s = 0;
    int nflip = 0;
    for (int i = 0; i < 8; i++) {
        if (x[i] >= 0) {
            xval[i] = x[i];
        } else {
            xval[i] = -x[i];
            nflip++;
            s |= 1u << i;
        }
    }
    if (parity && nflip % 2) {
        int imin = 0;
        float min = w[0] * x[0] * x[0];
        for (int i = 1; i < 8; i++) {
            const float ax = w[i] * x[i] * x[i];
            if (ax < min) {
                min = ax;
                imin = i;
            }
        }
        xval[imin] = -xval[imin];
        s ^= 1u << imin;
    }
    return s;
}

static float vmax(const float *x, int n)
{
    float m = x[0];
    for (int i = 1; i < n; i++) m = m > x[i] ? m : x[i];
    return m;
}

/* sumqx = sum w*x*q, sumq2 = sum w*q*q over q = 2L+1, in index order */
static void qsums(const float *w, const float *xval, const int8_t *L, int n, float *sqx, float *sq2)
{
    float a = 0, b = 0;
    for (int i = 0; i < n; i++) {
        const float q = (float)(2 * L[i] + 1);
        a += w[i] * xval[i] * q;
        b += w[i] * q * q;
    }
    *sqx = a;
    *sq2 = b;
}

static float sum_sq256(const float *x)
{
    float s = 0;
    for (int i = 0; i < QUANT_QK_K; i++) s += x[i] * x[i];
    return s;
}

/* The 4-bit sub-scale of a group: nearest_int((id*scale - 1)/2) in 0..15 */
static unsigned scale4(float id, float scale)
{
    return (unsigned)quant_clampi(quant_nint(0.5f * (id * scale - 1)), 0, 15);
}

// --- dequantization ---

static void grid8_to_float(float dl, uint64_t g, unsigned signs, float *y)
{
    for (int j = 0; j < 8; j++) {
        const float m = dl * (float)((g >> (8 * j)) & 0xFF);
        y[j] = m * ((signs >> j) & 1 ? -1.f : 1.f);
    }
}

static float sub_scale(float d, unsigned s) { return d * (0.5f + (float)s) * 0.25f; }

void quant__to_float_iq2_xxs(const void *blocks, float *y, uint64_t n)
{
    const uint8_t *b = blocks;
    for (uint64_t i = 0; i < n / QUANT_QK_K; i++, b += 66) {
        const float d = quant__get_f16(b);
        for (int ib = 0; ib < 8; ib++) {
            const uint8_t *q = b + 2 + 8 * ib;
            const uint32_t aux = mw_le32(q + 4);
            const float db = sub_scale(d, aux >> 28);
            for (int l = 0; l < 4; l++, y += 8)
                grid8_to_float(db, quant_iq2xxs_grid[q[l]], quant_ksigns_iq2xs[(aux >> (7 * l)) & 127], y);
        }
    }
}

void quant__to_float_iq2_xs(const void *blocks, float *y, uint64_t n)
{
    const uint8_t *b = blocks;
    for (uint64_t i = 0; i < n / QUANT_QK_K; i++, b += 74) {
        const float d = quant__get_f16(b);
        for (int ib = 0; ib < 8; ib++) {
            const uint8_t sc = b[66 + ib];
            const float db[2] = {sub_scale(d, sc & 0xF), sub_scale(d, sc >> 4)};
            for (int l = 0; l < 4; l++, y += 8) {
                const unsigned v = mw_le16(b + 2 + 8 * ib + 2 * l);
                grid8_to_float(db[l / 2], quant_iq2xs_grid[v & 511], quant_ksigns_iq2xs[v >> 9], y);
            }
        }
    }
}

void quant__to_float_iq2_s(const void *blocks, float *y, uint64_t n)
{
    const uint8_t *b = blocks;
    for (uint64_t i = 0; i < n / QUANT_QK_K; i++, b += 82) {
        const float d = quant__get_f16(b);
        const uint8_t *qs = b + 2, *signs = b + 34, *qh = b + 66, *sc = b + 74;
        for (int ib = 0; ib < 8; ib++) {
            const float db[2] = {sub_scale(d, sc[ib] & 0xF), sub_scale(d, sc[ib] >> 4)};
            for (int l = 0; l < 4; l++, y += 8) {
                const unsigned gi = qs[4 * ib + l] | (((unsigned)qh[ib] << (8 - 2 * l)) & 0x300);
                grid8_to_float(db[l / 2], quant_iq2s_grid[gi], signs[4 * ib + l], y);
            }
        }
    }
}

// --- IQ2_XXS quantization ---

/* One 32-group of IQ2_XXS: returns its scale (>= 0; 0 for an empty group)
 * and ORs its grid indices and signs into q2[0] (4 bytes) / q2[1]. */
static float xxs_group(const struct iq2_lattice *g, const float *xb, const float *qw, float sigma2,
                       uint32_t q2[2])
{
    float weight[32], waux[32], xval[32];
    int8_t L[32], Laux[32];
    unsigned bsigns[4];
    for (int i = 0; i < 32; i++) {
        const float s = sqrtf(sigma2 + xb[i] * xb[i]);
        weight[i] = qw ? qw[i] * s : s; /* no imatrix: all-ones importance */
    }
    for (int i = 0; i < 32; i++) waux[i] = sqrtf(weight[i]);
    for (int k = 0; k < 4; k++)
        bsigns[k] = signs8(xb + 8 * k, weight + 8 * k, xval + 8 * k, true) & 127;
    if (vmax(xval, 32) < QUANT_GROUP_EPS) return 0.0f;
    uint8_t Lqp[32];
    float scale = quant__make_qp(32, KMAXQ + 1, xval, Lqp, weight);
    for (int i = 0; i < 32; i++) L[i] = (int8_t)Lqp[i];
    const float eff_max = scale * KMAXQ;
    if (eff_max <= 0) return 0.0f;
    float best = 0;
    for (int is = -6; is <= 6; is++) {
        const float id = ((float)(2 * KMAXQ - 1) + (float)is * 0.1f) / eff_max;
        const float this_scale = 1 / id;
        for (int k = 0; k < 4; k++) {
            const int32_t m = round8(g, xval + 8 * k, id, Laux + 8 * k);
            if (m < 0) best_neighbour(g, m, xval + 8 * k, waux + 8 * k, this_scale, Laux + 8 * k);
        }
        float sumqx, sumq2;
        qsums(weight, xval, Laux, 32, &sumqx, &sumq2);
        if (sumq2 > 0 && sumqx * sumqx > best * sumq2) {
            scale = sumqx / sumq2;
            best = scale * sumqx;
            memcpy(L, Laux, 32);
        }
    }
    if (scale > 0) {
        const float id = 1 / scale;
        for (int k = 0; k < 4; k++) {
            const int32_t m = round8(g, xval + 8 * k, id, L + 8 * k);
            if (m < 0) best_neighbour(g, m, xval + 8 * k, waux + 8 * k, scale, L + 8 * k);
        }
        float sumqx, sumq2;
        qsums(weight, xval, L, 32, &sumqx, &sumq2);
        if (sumq2 > 0) scale = sumqx / sumq2;
    }
    if (scale < 0) { /* the scale is stored unsigned: flip it and the signs */
        scale = -scale;
        for (int k = 0; k < 4; k++) bsigns[k] = ~bsigns[k] & 127;
    }
    for (int k = 0; k < 4; k++) {
        q2[0] |= (uint32_t)final_index(g, L + 8 * k) << (8 * k);
        q2[1] |= (uint32_t)bsigns[k] << (7 * k);
    }
    return scale;
}

void quant__from_float_iq2_xxs(const float *x, void *blocks, uint64_t n, const float *qw)
{
    pthread_once(&once_xxs, build_xxs);
    uint8_t *y = blocks;
    for (uint64_t ibl = 0; ibl < n / QUANT_QK_K; ibl++, y += 66, x += QUANT_QK_K) {
        const float *qwb = qw ? qw + QUANT_QK_K * ibl : NULL;
        const float sigma2 = sum_sq256(x) / QUANT_QK_K;
        uint32_t q2[16] = {0};
        float scales[8], max_scale = 0;
        for (int ib = 0; ib < 8; ib++) {
            scales[ib] = xxs_group(&lat_xxs, x + 32 * ib, qwb ? qwb + 32 * ib : NULL, sigma2,
                                   q2 + 2 * ib);
            max_scale = max_scale > scales[ib] ? max_scale : scales[ib];
        }
        memset(y, 0, 66);
        if (max_scale == 0) continue;
        const float d = max_scale / 31;
        quant__put_f16(y, d);
        const float id = 1 / d;
        for (int ib = 0; ib < 8; ib++) q2[2 * ib + 1] |= (uint32_t)scale4(id, scales[ib]) << 28;
        for (int i = 0; i < 16; i++) mw_put_le32(y + 2 + 4 * i, q2[i]);
    }
}

// --- IQ2_XS / IQ2_S quantization ---

/* One 16-group of IQ2_XS (is_s false) or IQ2_S (true): the 19-candidate
 * scale search, then a re-rounding of the halves whose best candidate was
 * off the grid. Writes the two grid indices and sign bytes, returns the
 * scale (>= 0; 0 for an empty group, whose outputs are then zero). */
static float xs_group(const struct iq2_lattice *g, bool is_s, const float *xb, const float *qw,
                      float sigma2, int gidx[2], unsigned bsigns[2])
{
    float weight[16], waux[16], xval[16];
    int8_t L[16], Laux[16];
    bool on_grid[2], on_grid_aux[2];
    gidx[0] = gidx[1] = 0;
    bsigns[0] = bsigns[1] = 0;
    for (int i = 0; i < 16; i++) {
        if (qw) weight[i] = qw[i] * sqrtf(sigma2 + xb[i] * xb[i]);
        else if (is_s) weight[i] = 0.25f * sigma2 + xb[i] * xb[i];
        else weight[i] = sqrtf(sigma2 + xb[i] * xb[i]); /* all-ones importance */
    }
    for (int i = 0; i < 16; i++) waux[i] = sqrtf(weight[i]);
    unsigned sg[2];
    for (int k = 0; k < 2; k++) {
        sg[k] = signs8(xb + 8 * k, weight + 8 * k, xval + 8 * k, !is_s);
        if (!is_s) sg[k] &= 127;
    }
    const float max = vmax(xval, 16);
    memset(L, 0, 16);
    if (max < (is_s ? EPS_IQ2S : QUANT_GROUP_EPS)) return 0.0f;
    float best = 0;
    float scale = max / (2 * KMAXQ - 1);
    on_grid[0] = on_grid[1] = true;
    for (int is = -9; is <= 9; is++) {
        const float id = ((float)(2 * KMAXQ - 1) + (float)is * 0.1f) / max;
        const float this_scale = 1 / id;
        for (int k = 0; k < 2; k++) {
            const int32_t m = round8(g, xval + 8 * k, id, Laux + 8 * k);
            on_grid_aux[k] = m >= 0;
            if (m < 0) best_neighbour(g, m, xval + 8 * k, waux + 8 * k, this_scale, Laux + 8 * k);
        }
        float sumqx, sumq2;
        qsums(weight, xval, Laux, 16, &sumqx, &sumq2);
        if (sumq2 > 0 && sumqx * sumqx > best * sumq2) {
            scale = sumqx / sumq2;
            best = scale * sumqx;
            memcpy(L, Laux, 16);
            on_grid[0] = on_grid_aux[0];
            on_grid[1] = on_grid_aux[1];
        }
    }
    if ((!on_grid[0] || !on_grid[1]) && scale > 0) {
        const float id = 1 / scale;
        for (int k = 0; k < 2; k++) {
            if (on_grid[k]) continue;
            const int32_t m = round8(g, xval + 8 * k, id, L + 8 * k);
            if (m < 0) best_neighbour(g, m, xval + 8 * k, waux + 8 * k, scale, L + 8 * k);
        }
        float sumqx, sumq2;
        qsums(weight, xval, L, 16, &sumqx, &sumq2);
        if (sumq2 > 0) scale = sumqx / sumq2;
    }
    if (scale < 0) { /* the scale is stored unsigned: flip it and the signs */
        scale = -scale;
        for (int k = 0; k < 2; k++) sg[k] = ~sg[k] & (is_s ? 255u : 127u);
    }
    for (int k = 0; k < 2; k++) {
        gidx[k] = final_index(g, L + 8 * k);
        bsigns[k] = sg[k];
    }
    return scale;
}

void quant__from_float_iq2_xs(const float *x, void *blocks, uint64_t n, const float *qw)
{
    pthread_once(&once_xs, build_xs);
    uint8_t *y = blocks;
    for (uint64_t ibl = 0; ibl < n / QUANT_QK_K; ibl++, y += 74, x += QUANT_QK_K) {
        const float *qwb = qw ? qw + QUANT_QK_K * ibl : NULL;
        const float sigma2 = sum_sq256(x) / QUANT_QK_K;
        uint16_t q2[32];
        float scales[16], max_scale = 0;
        for (int ib = 0; ib < 16; ib++) {
            int gi[2];
            unsigned sg[2];
            scales[ib] = xs_group(&lat_xs, false, x + 16 * ib, qwb ? qwb + 16 * ib : NULL, sigma2,
                                  gi, sg);
            for (int k = 0; k < 2; k++) q2[2 * ib + k] = (uint16_t)(gi[k] | (sg[k] << 9));
            max_scale = max_scale > scales[ib] ? max_scale : scales[ib];
        }
        memset(y, 0, 74);
        if (max_scale == 0) continue;
        const float d = max_scale / 31;
        quant__put_f16(y, d);
        const float id = 1 / d;
        for (int ib = 0; ib < 16; ib++) y[66 + ib / 2] |= (uint8_t)(scale4(id, scales[ib]) << (4 * (ib % 2)));
        for (int i = 0; i < 32; i++) mw_put_le16(y + 2 + 2 * i, q2[i]);
    }
}

void quant__from_float_iq2_s(const float *x, void *blocks, uint64_t n, const float *qw)
{
    pthread_once(&once_s, build_s);
    uint8_t *y = blocks;
    for (uint64_t ibl = 0; ibl < n / QUANT_QK_K; ibl++, y += 82, x += QUANT_QK_K) {
        const float *qwb = qw ? qw + QUANT_QK_K * ibl : NULL;
        const float sigma2 = 2 * sum_sq256(x) / QUANT_QK_K;
        float scales[16], max_scale = 0;
        memset(y, 0, 82);
        uint8_t *qs = y + 2, *signs = y + 34, *qh = y + 66, *sc = y + 74;
        for (int ib = 0; ib < 16; ib++) {
            int gi[2];
            unsigned sg[2];
            scales[ib] = xs_group(&lat_s, true, x + 16 * ib, qwb ? qwb + 16 * ib : NULL, sigma2,
                                  gi, sg);
            for (int k = 0; k < 2; k++) {
                const int i8 = 2 * ib + k;
                qs[i8] = (uint8_t)(gi[k] & 255);
                qh[i8 / 4] |= (uint8_t)((gi[k] >> 8) << (2 * (i8 % 4)));
                signs[i8] = (uint8_t)sg[k];
            }
            max_scale = max_scale > scales[ib] ? max_scale : scales[ib];
        }
        if (max_scale == 0) continue;
        const float d = max_scale / 31;
        quant__put_f16(y, d * 0.9875f); /* stored slightly below the search's d */
        const float id = 1 / d;
        for (int ib = 0; ib < 16; ib++) sc[ib / 2] |= (uint8_t)(scale4(id, scales[ib]) << (4 * (ib % 2)));
    }
}
