/*
 * quant/quant_search.c — the scale searches shared by every quantizer
 * (ggml's make_qx_quants, make_q3_quants, make_qkx2/qkx3_quants,
 * make_qp_quants, best_index_int8; shared/docs/formats.md §4.2) and the bit
 * packing helpers shared by several block layouts.
 *
 * Exactness: see quant_int.h. In particular `w*x*l` below is (w*x)*l with
 * the int l converted to float, as in ggml; do not "simplify" expressions.
 */
#include "quant_int.h"

#include <math.h>

const int8_t quant__iq4_values[16] = {-127, -104, -83, -65, -49, -35, -22, -10,
                                      1,    13,   25,  38,  53,  69,  89,  113};

#define SEARCH_MAX_N 32

// --- symmetric: make_qx (rmse_type 1) ---

/* ggml's make_qx_quants tries the iscale -nmax/max and then -(nmax+0.1t)/max
 * for t = -9..9 (t != 0), each time summing sumlx += w*x*l and suml2 +=
 * w*l*l over the group (w = qw, or x^2), and keeps a candidate when
 * sumlx^2 > best*suml2.
 *
 * Same arithmetic, less of it: the sums of a candidate are a function of its
 * levels l[] alone, and neighbouring candidates (0.3% apart) often round to
 * the same levels. So the candidates' sums are computed first, in the order
 * t = -9..9, reusing the previous sums whenever the levels repeat (equal
 * inputs, equal f32 operations: equal bits), and ggml's acceptance loop then
 * runs over them in ggml's order. The product w*x, which ggml forms first in
 * w*x*l, is precomputed once. */
static inline void qx_cand_levels(int n, int nmax, const float *x, float iscale, int8_t *l)
{
    for (int i = 0; i < n; i++)
        l[i] = (int8_t)quant__clampi(quant__nint(iscale * x[i]), -nmax, nmax - 1);
}

static inline float qx_iscale(int nmax, float max, int t)
{
    return t == 0 ? (float)-nmax / max : -((float)nmax + 0.1f * (float)t) / max;
}

/* n is a compile-time constant at the call sites below (16, 32), so the
 * per-element loops unroll. */
static inline float make_qx_n(const int n, int nmax, const float *x, int8_t *L, const float *w)
{
    float amax;
    const float max = quant__absmax(x, n, &amax);
    if (amax < QUANT_GROUP_EPS) {
        memset(L, 0, (size_t)n);
        return 0.0f;
    }
    float wv[SEARCH_MAX_N], wx[SEARCH_MAX_N];
    for (int i = 0; i < n; i++) {
        wv[i] = w ? w[i] : x[i] * x[i];
        wx[i] = wv[i] * x[i];
    }
    float slx[19], sl2[19];
    int8_t lv[2][SEARCH_MAX_N];
    for (int t = -9; t <= 9; t++) {
        int8_t *cur = lv[t & 1], *prev = lv[(t + 1) & 1];
        qx_cand_levels(n, nmax, x, qx_iscale(nmax, max, t), cur);
        if (t > -9 && memcmp(cur, prev, (size_t)n) == 0) {
            slx[t + 9] = slx[t + 8];
            sl2[t + 9] = sl2[t + 8];
            continue;
        }
        float a = 0, b = 0;
        for (int i = 0; i < n; i++) {
            const float fl = (float)cur[i];
            a += wx[i] * fl;
            b += wv[i] * fl * fl;
        }
        slx[t + 9] = a;
        sl2[t + 9] = b;
    }
    float scale = sl2[9] != 0 ? slx[9] / sl2[9] : 0.0f;
    float best = scale * slx[9];
    int best_t = 0;
    for (int t = -9; t <= 9; t++) {
        if (t == 0) continue;
        const float a = slx[t + 9], b = sl2[t + 9];
        if (b > 0 && a * a > best * b) {
            scale = a / b;
            best = scale * a;
            best_t = t;
        }
    }
    const float is = qx_iscale(nmax, max, best_t);
    for (int i = 0; i < n; i++)
        L[i] = (int8_t)(nmax + quant__clampi(quant__nint(is * x[i]), -nmax, nmax - 1));
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
        const int l = quant__clampi(quant__nint(iscale * x[i]), -nmax, nmax - 1);
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
                const int nl = quant__clampi(quant__nint(x[i] * sl2 / slx), -nmax, nmax - 1);
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

float quant__make_qkx(const struct quant_qkx *p, int n, int nmax, const float *x, const float *w,
                      uint8_t *L, float *neg_min)
{
    uint8_t Laux[SEARCH_MAX_N];
    float min = x[0], max = x[0];
    float sum_w = w[0];
    float sum_x = sum_w * x[0];
    for (int i = 1; i < n; i++) {
        if (x[i] < min) min = x[i];
        if (x[i] > max) max = x[i];
        sum_w += w[i];
        sum_x += w[i] * x[i];
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
        L[i] = (uint8_t)quant__clampi(quant__nint(iscale * (x[i] - min)), 0, nmax);
    float best = qkx_err(p->use_mad, scale, min, L, x, w, n);
    if (p->nstep < 1) {
        *neg_min = -min;
        return scale;
    }
    for (int is = 0; is <= p->nstep; is++) {
        iscale = (p->rmin + p->rdelta * (float)is + (float)nmax) / (max - min);
        float sum_l = 0, sum_l2 = 0, sum_xl = 0;
        for (int i = 0; i < n; i++) {
            const int l = quant__clampi(quant__nint(iscale * (x[i] - min)), 0, nmax);
            Laux[i] = (uint8_t)l;
            sum_l += w[i] * (float)l;
            sum_l2 += w[i] * (float)l * (float)l;
            sum_xl += w[i] * (float)l * x[i];
        }
        const float D = sum_w * sum_l2 - sum_l * sum_l;
        if (D > 0) {
            float this_scale = (sum_w * sum_xl - sum_x * sum_l) / D;
            float this_min = (sum_l2 * sum_x - sum_l * sum_xl) / D;
            if (this_min > 0) {
                this_min = 0;
                this_scale = sum_xl / sum_l2;
            }
            const float cur = qkx_err(p->use_mad, this_scale, this_min, Laux, x, w, n);
            if (cur < best) {
                memcpy(L, Laux, (size_t)n);
                best = cur;
                scale = this_scale;
                min = this_min;
            }
        }
    }
    *neg_min = -min;
    return scale;
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
    for (int i = 0; i < n; i++) L[i] = (uint8_t)quant__nint(iscale * x[i]);
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
            int l = quant__nint(iscale_is * x[i]);
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
        int l = quant__nint(iscale * x[i]);
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
                int nl = quant__nint(x[i] * sl2 / slx);
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

// --- IQ4 level lookup ---

int quant__iq4_index(float v)
{
    const int8_t *k = quant__iq4_values;
    if (v <= (float)k[0]) return 0;
    if (v >= (float)k[15]) return 15;
    int lo = 0, hi = 15;
    while (hi - lo > 1) {
        const int mid = (lo + hi) / 2;
        if (v < (float)k[mid]) hi = mid;
        else lo = mid;
    }
    return v - (float)k[hi - 1] < (float)k[hi] - v ? hi - 1 : hi;
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
