/*
 * quant/quant_search.c — the scale searches shared by every quantizer
 * (ggml's make_qx_quants, make_q3_quants, make_qkx2/qkx3_quants,
 * make_qp_quants, best_index_int8; docs/formats.md §4.2) and the bit
 * packing helpers shared by several block layouts.
 *
 * Exactness: see quant_int.h. In particular `w*x*l` below is (w*x)*l with
 * the int l converted to float, as in ggml; do not "simplify" expressions.
 *
 * Speed, without changing a bit: ggml's searches try 16-37 candidate
 * scales per group and, for each, accumulate a few sums in index order.
 * Those sequential f32 sums are chains of dependent adds, so ggml runs at
 * the latency of one add per element and candidate. Here the levels of
 * several candidates are computed first (vectorizable), then the sums of
 * four candidates are accumulated side by side — each sum still in index
 * order with the same operations on the same values, so the same bits, but
 * four independent chains in flight — and ggml's acceptance test finally
 * runs over the results in ggml's order. In make_qx (and the IQ4 search in
 * quant_iq4.c) the candidates are independent; in make_qkx an accepted
 * candidate moves the grid of the later ones, which is handled there.
 */
#include "quant/quant_int.h"

#include <float.h>
#include <math.h>

const int8_t quant__iq4_values[16] = {-127, -104, -83, -65, -49, -35, -22, -10,
                                      1,    13,   25,  38,  53,  69,  89,  113};
const float quant__iq4_levels[16] = {-127, -104, -83, -65, -49, -35, -22, -10,
                                     1,    13,   25,  38,  53,  69,  89,  113};

#define SEARCH_MAX_N 32 /* largest group a search sees */

/* nint(v) as a float when |v| < 2^22: (v + 1.5*2^23) - 1.5*2^23 rounds to
 * the nearest integer, ties to even, exactly as quant_nint (and gives +0
 * for 0, like the int conversion). Used where v is known to be small and
 * finite; groups holding a NaN or an Inf take quant_nint itself, whose
 * result depends on NaN payload bits. */
#define NINT_MAGIC 12582912.0f
static inline float nint_f(float v) { return (v + NINT_MAGIC) - NINT_MAGIC; }
static inline float clampf(float v, float lo, float hi)
{
    v = v < lo ? lo : v;
    return v > hi ? hi : v;
}

// --- symmetric: make_qx (rmse_type 1) ---

/* ggml's make_qx_quants tries iscale = -nmax/max (t = 0) and then
 * -(nmax + 0.1t)/max for t = -9..-1, 1..9, summing sumlx += w*x*l and
 * suml2 += w*l*l over the group (w = qw, or x^2), and keeps a candidate when
 * sumlx^2 > best*suml2. With finite x, |iscale*x| <= nmax + 1. */
#define QX_NCAND 19
#define QX_NPAD 20 /* a multiple of 4 */

/* Four candidates' sums side by side: four independent pairs of chains, each
 * summed in index order exactly as ggml sums it. */
static inline void qx_sums4(const int n, const float *wx, const float *wv,
                            const float (*fl)[SEARCH_MAX_N], float *slx, float *sl2)
{
    float a0 = 0, a1 = 0, a2 = 0, a3 = 0, b0 = 0, b1 = 0, b2 = 0, b3 = 0;
    for (int i = 0; i < n; i++) {
        const float l0 = fl[0][i], l1 = fl[1][i], l2 = fl[2][i], l3 = fl[3][i];
        a0 += wx[i] * l0;
        b0 += wv[i] * l0 * l0;
        a1 += wx[i] * l1;
        b1 += wv[i] * l1 * l1;
        a2 += wx[i] * l2;
        b2 += wv[i] * l2 * l2;
        a3 += wx[i] * l3;
        b3 += wv[i] * l3 * l3;
    }
    slx[0] = a0, slx[1] = a1, slx[2] = a2, slx[3] = a3;
    sl2[0] = b0, sl2[1] = b1, sl2[2] = b2, sl2[3] = b3;
}

static inline int qx_t(int k) { return k == 0 ? 0 : (k <= 9 ? k - 10 : k - 9); }

static inline float qx_iscale(int nmax, float max, int t)
{
    return t == 0 ? (float)-nmax / max : -((float)nmax + 0.1f * (float)t) / max;
}

/* n is a compile-time constant at the call sites below (16, 32), so the
 * per-element loops unroll and vectorize. */
static inline float make_qx_n(const int n, int nmax, const float *x, int8_t *L, const float *w)
{
    float amax;
    const float max = quant__absmax(x, n, &amax);
    if (amax < QUANT_GROUP_EPS) {
        memset(L, 0, (size_t)n);
        return 0.0f;
    }
    bool finite = true;
    float wv[SEARCH_MAX_N], wx[SEARCH_MAX_N];
    for (int i = 0; i < n; i++) {
        finite &= fabsf(x[i]) <= FLT_MAX;
        wv[i] = w ? w[i] : x[i] * x[i];
        wx[i] = wv[i] * x[i]; /* the first product of ggml's w*x*l */
    }
    const float lo = (float)-nmax, hi = (float)(nmax - 1);
    float fl[QX_NPAD][SEARCH_MAX_N];
    for (int k = 0; k < QX_NPAD; k++) {
        /* the padding candidate repeats t = 9; its sums are never read */
        const float is = qx_iscale(nmax, max, qx_t(k < QX_NCAND ? k : QX_NCAND - 1));
        if (finite) {
            for (int i = 0; i < n; i++) fl[k][i] = clampf(nint_f(is * x[i]), lo, hi);
        } else {
            for (int i = 0; i < n; i++)
                fl[k][i] = (float)quant_clampi(quant_nint(is * x[i]), -nmax, nmax - 1);
        }
    }
    float slx[QX_NPAD], sl2[QX_NPAD];
    for (int k = 0; k < QX_NPAD; k += 4) qx_sums4(n, wx, wv, fl + k, slx + k, sl2 + k);
    float scale = sl2[0] != 0 ? slx[0] / sl2[0] : 0.0f;
    float best = scale * slx[0];
    int best_k = 0;
    for (int k = 1; k < QX_NCAND; k++) {
        if (sl2[k] > 0 && slx[k] * slx[k] > best * sl2[k]) {
            scale = slx[k] / sl2[k];
            best = scale * slx[k];
            best_k = k;
        }
    }
    for (int i = 0; i < n; i++) L[i] = (int8_t)((int)fl[best_k][i] + nmax);
    return scale;
}

float quant__make_qx(int n, int nmax, const float *x, int8_t *L, const float *w)
{
    if (n == 16) return make_qx_n(16, nmax, x, L, w);
    if (n == 32) return make_qx_n(32, nmax, x, L, w);
    return make_qx_n(n < SEARCH_MAX_N ? n : SEARCH_MAX_N, nmax, x, L, w);
}

// --- symmetric with coordinate descent: make_q3 (weights x^2) ---

float quant__make_q3(int n, int nmax, const float *x, int8_t *L)
{
    float amax;
    const float max = quant__absmax(x, n, &amax);
    if (amax < QUANT_GROUP_EPS) {
        memset(L, 0, (size_t)n);
        return 0.0f;
    }
    const float iscale = (float)-nmax / max;
    float sumlx = 0, suml2 = 0;
    for (int i = 0; i < n; i++) {
        const int l = quant_clampi(quant_nint(iscale * x[i]), -nmax, nmax - 1);
        L[i] = (int8_t)l;
        const float w = x[i] * x[i];
        sumlx += w * x[i] * (float)l;
        suml2 += w * (float)l * (float)l;
    }
    for (int itry = 0; itry < 5; itry++) {
        int n_changed = 0;
        for (int i = 0; i < n; i++) {
            const float w = x[i] * x[i];
            float slx = sumlx - w * x[i] * (float)L[i];
            if (slx > 0) {
                float sl2 = suml2 - w * (float)L[i] * (float)L[i];
                const int nl = quant_clampi(quant_nint(x[i] * sl2 / slx), -nmax, nmax - 1);
                if (nl != L[i]) {
                    slx += w * x[i] * (float)nl;
                    sl2 += w * (float)nl * (float)nl;
                    if (sl2 > 0 && slx * slx * suml2 > sumlx * sumlx * sl2) {
                        L[i] = (int8_t)nl;
                        sumlx = slx;
                        suml2 = sl2;
                        n_changed++;
                    }
                }
            }
        }
        if (!n_changed) break;
    }
    for (int i = 0; i < n; i++) L[i] = (int8_t)(L[i] + nmax);
    return suml2 > 0.0f ? sumlx / suml2 : 0.0f;
}

// --- asymmetric: make_qkx2 / make_qkx3 ---

static float qkx_err(bool use_mad, float scale, float min, const uint8_t *L, const float *x,
                     const float *w, int n)
{
    float err = 0;
    for (int i = 0; i < n; i++) {
        float diff = scale * (float)L[i] + min - x[i];
        diff = use_mad ? fabsf(diff) : diff * diff;
        err += w[i] * diff;
    }
    return err;
}

/* ggml's candidates: iscale = (rmin + rdelta*t + nmax)/(max - min) for
 * t = 0..nstep, levels clamp(nint(iscale*(x - min)), 0, nmax), the weighted
 * least-squares scale and min of those levels, and their error; a candidate
 * with an error below the best so far replaces it — and its min becomes the
 * `min` that the LATER candidates' grids use. So candidates are evaluated
 * four at a time on the current min, accepted in order, and when an
 * acceptance changes min the rest of the batch is discarded and evaluation
 * restarts after the accepted candidate (acceptances are few, so most
 * batches run through). With finite x and max - min, iscale*(x - min) lies
 * in [0, nmax + 2] while min is the data's min; after an acceptance min may
 * be any fitted value, so the float-level shortcut is used only while
 * min is still the data's (and the sums use the exact levels either way). */
static inline void qkx_levels(const int n, int nmax, const float *x, float min, float is,
                              bool fast, float *fl)
{
    if (fast) {
        for (int i = 0; i < n; i++) fl[i] = clampf(nint_f(is * (x[i] - min)), 0.0f, (float)nmax);
    } else {
        for (int i = 0; i < n; i++)
            fl[i] = (float)quant_clampi(quant_nint(is * (x[i] - min)), 0, nmax);
    }
}

/* four candidates' error sums (each in index order, as ggml sums it) */
static inline void qkx_err4(const int n, bool use_mad, const float *x, const float *w,
                            const float (*fl)[SEARCH_MAX_N], const float *sc, const float *mn,
                            float *err)
{
    float e0 = 0, e1 = 0, e2 = 0, e3 = 0;
    for (int i = 0; i < n; i++) {
        float d0 = sc[0] * fl[0][i] + mn[0] - x[i];
        float d1 = sc[1] * fl[1][i] + mn[1] - x[i];
        float d2 = sc[2] * fl[2][i] + mn[2] - x[i];
        float d3 = sc[3] * fl[3][i] + mn[3] - x[i];
        if (use_mad) {
            d0 = fabsf(d0), d1 = fabsf(d1), d2 = fabsf(d2), d3 = fabsf(d3);
        } else {
            d0 = d0 * d0, d1 = d1 * d1, d2 = d2 * d2, d3 = d3 * d3;
        }
        e0 += w[i] * d0;
        e1 += w[i] * d1;
        e2 += w[i] * d2;
        e3 += w[i] * d3;
    }
    err[0] = e0, err[1] = e1, err[2] = e2, err[3] = e3;
}

static inline float make_qkx_n(const struct quant_qkx *p, const int n, int nmax, const float *x,
                               const float *w, uint8_t *L, float *neg_min)
{
    float min = x[0], max = x[0];
    float sum_w = w[0];
    float sum_x = sum_w * x[0];
    bool finite = fabsf(x[0]) <= FLT_MAX;
    for (int i = 1; i < n; i++) {
        if (x[i] < min) min = x[i];
        if (x[i] > max) max = x[i];
        sum_w += w[i];
        sum_x += w[i] * x[i];
        finite &= fabsf(x[i]) <= FLT_MAX;
    }
    if (min > 0) min = 0;
    if (p->v3 ? max <= min : max == min) {
        memset(L, 0, (size_t)n);
        *neg_min = -min;
        return 0.0f;
    }
    float iscale = (float)nmax / (max - min);
    float scale = 1 / iscale;
    for (int i = 0; i < n; i++)
        L[i] = (uint8_t)quant_clampi(quant_nint(iscale * (x[i] - min)), 0, nmax);
    float best = qkx_err(p->use_mad, scale, min, L, x, w, n);
    if (p->nstep < 1) {
        *neg_min = -min;
        return scale;
    }
    const float min0 = min;
    finite &= fabsf(max - min) <= FLT_MAX;
    for (int k = 0; k <= p->nstep;) {
        const int nk = p->nstep + 1 - k < 4 ? p->nstep + 1 - k : 4;
        const bool fast = finite && min == min0;
        float fl[4][SEARCH_MAX_N];
        for (int c = 0; c < 4; c++) { /* padding repeats the last candidate */
            const int t = k + (c < nk ? c : nk - 1);
            const float is = (p->rmin + p->rdelta * (float)t + (float)nmax) / (max - min);
            qkx_levels(n, nmax, x, min, is, fast, fl[c]);
        }
        float sl[4] = {0}, sl2[4] = {0}, sxl[4] = {0};
        {
            float a0 = 0, a1 = 0, a2 = 0, a3 = 0, b0 = 0, b1 = 0, b2 = 0, b3 = 0;
            float c0 = 0, c1 = 0, c2 = 0, c3 = 0;
            for (int i = 0; i < n; i++) {
                const float l0 = fl[0][i], l1 = fl[1][i], l2 = fl[2][i], l3 = fl[3][i];
                a0 += w[i] * l0, b0 += w[i] * l0 * l0, c0 += w[i] * l0 * x[i];
                a1 += w[i] * l1, b1 += w[i] * l1 * l1, c1 += w[i] * l1 * x[i];
                a2 += w[i] * l2, b2 += w[i] * l2 * l2, c2 += w[i] * l2 * x[i];
                a3 += w[i] * l3, b3 += w[i] * l3 * l3, c3 += w[i] * l3 * x[i];
            }
            sl[0] = a0, sl[1] = a1, sl[2] = a2, sl[3] = a3;
            sl2[0] = b0, sl2[1] = b1, sl2[2] = b2, sl2[3] = b3;
            sxl[0] = c0, sxl[1] = c1, sxl[2] = c2, sxl[3] = c3;
        }
        float c_scale[4] = {0}, c_min[4] = {0}, c_err[4];
        bool c_ok[4];
        for (int c = 0; c < 4; c++) {
            const float D = sum_w * sl2[c] - sl[c] * sl[c];
            c_ok[c] = D > 0;
            if (!c_ok[c]) continue;
            float this_scale = (sum_w * sxl[c] - sum_x * sl[c]) / D;
            float this_min = (sl2[c] * sum_x - sl[c] * sxl[c]) / D;
            if (this_min > 0) {
                this_min = 0;
                this_scale = sxl[c] / sl2[c];
            }
            c_scale[c] = this_scale;
            c_min[c] = this_min;
        }
        qkx_err4(n, p->use_mad, x, w, (const float (*)[SEARCH_MAX_N])fl, c_scale, c_min, c_err);
        int next = k + nk;
        for (int c = 0; c < nk; c++) {
            if (!c_ok[c] || !(c_err[c] < best)) continue;
            for (int i = 0; i < n; i++) L[i] = (uint8_t)fl[c][i];
            best = c_err[c];
            scale = c_scale[c];
            const bool moved = c_min[c] != min;
            min = c_min[c];
            if (moved) { /* later candidates need the new grid */
                next = k + c + 1;
                break;
            }
        }
        k = next;
    }
    *neg_min = -min;
    return scale;
}

float quant__make_qkx(const struct quant_qkx *p, int n, int nmax, const float *x, const float *w,
                      uint8_t *L, float *neg_min)
{
    if (n == 16) return make_qkx_n(p, 16, nmax, x, w, L, neg_min);
    if (n == 32) return make_qkx_n(p, 32, nmax, x, w, L, neg_min);
    return make_qkx_n(p, n < SEARCH_MAX_N ? n : SEARCH_MAX_N, nmax, x, w, L, neg_min);
}

// --- non-negative scales of scales: make_qp ---

float quant__make_qp(int n, int nmax, const float *x, uint8_t *L, const float *w)
{
    float max = 0;
    for (int i = 0; i < n; i++) max = max > x[i] ? max : x[i];
    if (max < QUANT_GROUP_EPS) {
        memset(L, 0, (size_t)n);
        return 0.0f;
    }
    float iscale = (float)nmax / max;
    /* L is uint8 as in ggml: a (pathological) negative level wraps, and the
     * wrapped value is what the error sums below see. */
    for (int i = 0; i < n; i++) L[i] = (uint8_t)quant_nint(iscale * x[i]);
    const float scale = 1 / iscale;
    float best_mse = 0;
    for (int i = 0; i < n; i++) {
        const float diff = x[i] - scale * (float)L[i];
        best_mse += w[i] * diff * diff;
    }
    for (int is = -4; is <= 4; is++) {
        if (is == 0) continue;
        const float iscale_is = (0.1f * (float)is + (float)nmax) / max;
        const float scale_is = 1 / iscale_is;
        float mse = 0;
        for (int i = 0; i < n; i++) {
            int l = quant_nint(iscale_is * x[i]);
            l = l < nmax ? l : nmax;
            const float diff = x[i] - scale_is * (float)l;
            mse += w[i] * diff * diff;
        }
        if (mse < best_mse) {
            best_mse = mse;
            iscale = iscale_is;
        }
    }
    float sumlx = 0, suml2 = 0;
    for (int i = 0; i < n; i++) {
        int l = quant_nint(iscale * x[i]);
        l = l < nmax ? l : nmax;
        L[i] = (uint8_t)l;
        sumlx += w[i] * x[i] * (float)l;
        suml2 += w[i] * (float)l * (float)l;
    }
    for (int itry = 0; itry < 5; itry++) {
        int n_changed = 0;
        for (int i = 0; i < n; i++) {
            float slx = sumlx - w[i] * x[i] * (float)L[i];
            float sl2 = suml2 - w[i] * (float)L[i] * (float)L[i];
            if (slx > 0 && sl2 > 0) {
                int nl = quant_nint(x[i] * sl2 / slx);
                nl = nl < nmax ? nl : nmax;
                if (nl != L[i]) {
                    slx += w[i] * x[i] * (float)nl;
                    sl2 += w[i] * (float)nl * (float)nl;
                    if (slx * slx * suml2 > sumlx * sumlx * sl2) {
                        L[i] = (uint8_t)nl;
                        sumlx = slx;
                        suml2 = sl2;
                        n_changed++;
                    }
                }
            }
        }
        if (!n_changed) break;
    }
    return suml2 > 0.0f ? sumlx / suml2 : 0.0f;
}

// --- packing ---

void quant__pack_nibbles32(const uint8_t *L, uint8_t *qs)
{
    for (int j = 0; j < 16; j++) qs[j] = (uint8_t)((L[j] & 15) | ((L[j + 16] & 15) << 4));
}

uint32_t quant__qh32(const uint8_t *L)
{
    uint32_t qh = 0;
    for (int j = 0; j < 32; j++) qh |= (uint32_t)((L[j] >> 4) & 1) << j;
    return qh;
}

void quant__pack_2bit(const uint8_t *L, uint8_t *qs)
{
    for (int h = 0; h < 2; h++) {
        const uint8_t *l = L + 128 * h;
        for (int j = 0; j < 32; j++)
            qs[32 * h + j] =
                (uint8_t)(l[j] | (l[j + 32] << 2) | (l[j + 64] << 4) | (l[j + 96] << 6));
    }
}

void quant__k4_scales_put(uint8_t *q, const uint8_t *ls, const uint8_t *lm)
{
    /* byte-for-byte ggml's assignment order (values above 63 only arise from
     * pathological input and then land in the same bits as in ggml) */
    for (int j = 0; j < 8; j++) {
        if (j < 4) {
            q[j] = ls[j];
            q[j + 4] = lm[j];
        } else {
            q[j + 4] = (uint8_t)((ls[j] & 0xF) | ((lm[j] & 0xF) << 4));
            q[j - 4] |= (uint8_t)((ls[j] >> 4) << 6);
            q[j] |= (uint8_t)((lm[j] >> 4) << 6);
        }
    }
}

void quant__k4_scales_get(int j, const uint8_t *q, uint8_t *sc, uint8_t *m)
{
    if (j < 4) {
        *sc = q[j] & 63;
        *m = q[j + 4] & 63;
    } else {
        *sc = (uint8_t)((q[j + 4] & 0xF) | ((q[j - 4] >> 6) << 4));
        *m = (uint8_t)((q[j + 4] >> 4) | ((q[j] >> 6) << 4));
    }
}
