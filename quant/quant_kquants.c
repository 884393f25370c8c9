/*
 * quant/quant_kquants.c — the k-quants Q2_K, Q3_K, Q4_K, Q5_K, Q6_K:
 * 256-element super-blocks of 16 or 32-element sub-blocks whose scales are
 * themselves quantized (docs/formats.md §3.4, §4.3, §4.4).
 *
 * Each type: decode, then the search that picks sub-block scales (RTN-style
 * without imatrix, importance-weighted with one), then the shared tail —
 * quantize the scales, re-quantize every element against the stored
 * (f16-rounded) scales, and pack. Q4_K and Q5_K share one codec.
 */
#include "quant/quant_int.h"

#include <math.h>

#define QK QUANT_QK_K

/* sum of squares of x[0..n) in index order */
static float sum_sq(const float *x, int n)
{
    float s = 0;
    for (int i = 0; i < n; i++) s += x[i] * x[i];
    return s;
}

/* ggml's importance weights for the k-quants: qw * sqrt(sigma2 + x^2) */
static void imp_weights(const float *x, const float *qw, float sigma2, float *w, int n)
{
    for (int i = 0; i < n; i++) w[i] = qw[i] * sqrtf(sigma2 + x[i] * x[i]);
}

static float sum_f(const float *w, int n)
{
    float s = 0;
    for (int i = 0; i < n; i++) s += w[i];
    return s;
}

// --- Q2_K: scales:u8[16] | qs:u8[64] | d:f16 | dmin:f16  (84 bytes) ---

void quant__to_float_q2_k(const void *blocks, float *y, uint64_t n)
{
    const uint8_t *b = blocks;
    for (uint64_t i = 0; i < n / QK; i++, b += 84, y += QK) {
        const float d = quant__get_f16(b + 80), min = quant__get_f16(b + 82);
        for (int s = 0; s < 16; s++) {
            const float dl = d * (float)(b[s] & 0xF), ml = min * (float)(b[s] >> 4);
            const uint8_t *q = b + 16 + 32 * (s / 8) + 16 * (s % 2);
            const int shift = 2 * ((s % 8) / 2);
            for (int l = 0; l < 16; l++) y[16 * s + l] = dl * (float)((q[l] >> shift) & 3) - ml;
        }
    }
}

static void q2k_block(const float *x, const float *qw, uint8_t *b)
{
    uint8_t L[QK];
    float scales[16], mins[16], w[16];
    uint8_t *sc = b;
    float dm, mm;
    if (!qw) {
        static const struct quant_qkx p = {-0.5f, 0.1f, 15, true, false};
        float max_scale = 0, max_min = 0;
        for (int j = 0; j < 16; j++) {
            for (int l = 0; l < 16; l++) w[l] = fabsf(x[16 * j + l]);
            scales[j] = quant__make_qkx(&p, 16, 3, x + 16 * j, w, L + 16 * j, &mins[j]);
            if (scales[j] > max_scale) max_scale = scales[j];
            if (mins[j] > max_min) max_min = mins[j];
        }
        if (max_scale > 0) {
            const float iscale = 15.0f / max_scale;
            for (int j = 0; j < 16; j++) sc[j] = (uint8_t)quant_nint(iscale * scales[j]);
            quant__put_f16(b + 80, max_scale / 15.0f);
        } else {
            memset(sc, 0, 16);
            quant__put_f16(b + 80, 0.0f);
        }
        if (max_min > 0) {
            const float iscale = 15.0f / max_min;
            for (int j = 0; j < 16; j++)
                sc[j] |= (uint8_t)((unsigned)quant_nint(iscale * mins[j]) << 4);
            quant__put_f16(b + 82, max_min / 15.0f);
        } else {
            quant__put_f16(b + 82, 0.0f);
        }
    } else {
        static const struct quant_qkx p = {-0.9f, 0.05f, 36, false, true};
        float sw[16];
        uint8_t Ls[16], Lm[16];
        const float sigma2 = sum_sq(x, QK) / (float)QK;
        for (int j = 0; j < 16; j++) {
            imp_weights(x + 16 * j, qw + 16 * j, sigma2, w, 16);
            sw[j] = sum_f(w, 16);
            scales[j] = quant__make_qkx(&p, 16, 3, x + 16 * j, w, L + 16 * j, &mins[j]);
        }
        quant__put_f16(b + 80, quant__make_qp(16, 15, scales, Ls, sw));
        quant__put_f16(b + 82, quant__make_qp(16, 15, mins, Lm, sw));
        for (int j = 0; j < 16; j++) sc[j] = (uint8_t)(Ls[j] | (Lm[j] << 4));
    }
    dm = quant__get_f16(b + 80);
    mm = quant__get_f16(b + 82);
    for (int j = 0; j < 16; j++) {
        const float d = dm * (float)(sc[j] & 0xF);
        if (d == 0) continue;
        const float m = mm * (float)(sc[j] >> 4);
        for (int l = 0; l < 16; l++)
            L[16 * j + l] = (uint8_t)quant_clampi(quant_nint((x[16 * j + l] + m) / d), 0, 3);
    }
    quant__pack_2bit(L, b + 16);
}

void quant__from_float_q2_k(const float *x, void *blocks, uint64_t n, const float *qw)
{
    uint8_t *b = blocks;
    for (uint64_t i = 0; i < n / QK; i++)
        q2k_block(x + QK * i, qw ? qw + QK * i : NULL, b + 84 * i);
}

// --- Q3_K: hmask:u8[32] | qs:u8[64] | scales:u8[12] | d:f16  (110 bytes) ---

/* 6-bit scale S_s (0..63) of sub-block s from the 12 packed bytes. */
static int q3k_scale_get(const uint8_t *s, int j)
{
    const int lo = j < 8 ? s[j] & 0xF : s[j - 8] >> 4;
    return lo | (((s[8 + j % 4] >> (2 * (j / 4))) & 3) << 4);
}

/* Pack S_j (0..63) into the zeroed 12 bytes, in ascending j as ggml does. */
static void q3k_scale_put(uint8_t *s, int j, int l)
{
    if (j < 8) s[j] = (uint8_t)(l & 0xF);
    else s[j - 8] |= (uint8_t)((l & 0xF) << 4);
    l >>= 4;
    s[j % 4 + 8] |= (uint8_t)(l << (2 * (j / 4)));
}

void quant__to_float_q3_k(const void *blocks, float *y, uint64_t n)
{
    const uint8_t *b = blocks;
    for (uint64_t i = 0; i < n / QK; i++, b += 110, y += QK) {
        const float d_all = quant__get_f16(b + 108);
        const uint8_t *hm = b, *qs = b + 32, *sc = b + 96;
        for (int s = 0; s < 16; s++) {
            const float dl = d_all * (float)(q3k_scale_get(sc, s) - 32);
            for (int l = 0; l < 16; l++) {
                const int e = 16 * s + l, r = e % 128;
                const int lo = (qs[32 * (e / 128) + r % 32] >> (2 * (r / 32))) & 3;
                const int q = lo - ((hm[e % 32] >> (e / 32)) & 1 ? 0 : 4);
                y[e] = dl * (float)q;
            }
        }
    }
}

static void q3k_block(const float *x, const float *qw, uint8_t *b)
{
    int8_t L[QK];
    float scales[16];
    uint8_t *sc = b + 96;
    memset(sc, 0, 12);
    if (!qw) {
        float max_scale = 0, amax = 0;
        for (int j = 0; j < 16; j++) {
            scales[j] = quant__make_q3(16, 4, x + 16 * j, L + 16 * j);
            const float a = fabsf(scales[j]);
            if (a > amax) {
                amax = a;
                max_scale = scales[j];
            }
        }
        if (max_scale != 0) {
            const float iscale = -32.0f / max_scale;
            for (int j = 0; j < 16; j++) {
                /* ggml stores nint() in an int8 before clamping */
                const int8_t l = (int8_t)quant_nint(iscale * scales[j]);
                q3k_scale_put(sc, j, quant_clampi(l, -32, 31) + 32);
            }
            quant__put_f16(b + 108, 1 / iscale);
        } else {
            quant__put_f16(b + 108, 0.0f);
        }
    } else {
        float w[16], sw[16];
        int8_t Ls[16];
        const float sigma2 = 2 * sum_sq(x, QK) / (float)QK;
        for (int j = 0; j < 16; j++) {
            imp_weights(x + 16 * j, qw + 16 * j, sigma2, w, 16);
            sw[j] = sum_f(w, 16);
            scales[j] = quant__make_qx(16, 4, x + 16 * j, L + 16 * j, w);
        }
        const float d_block = quant__make_qx(16, 32, scales, Ls, sw);
        for (int j = 0; j < 16; j++) q3k_scale_put(sc, j, Ls[j]);
        quant__put_f16(b + 108, d_block);
    }
    const float dall = quant__get_f16(b + 108);
    for (int j = 0; j < 16; j++) {
        const float d = dall * (float)(int8_t)(q3k_scale_get(sc, j) - 32);
        if (d == 0) continue;
        for (int l = 0; l < 16; l++)
            L[16 * j + l] = (int8_t)(quant_clampi(quant_nint(x[16 * j + l] / d), -4, 3) + 4);
    }
    /* hmask: element j's high bit goes to bit j/32 of byte j%32 */
    uint8_t low[QK];
    for (int m = 0; m < 32; m++) {
        unsigned h = 0;
        for (int k = 0; k < 8; k++) {
            const int l = L[m + 32 * k], hb = l > 3;
            h |= (unsigned)hb << k;
            low[m + 32 * k] = (uint8_t)(l - 4 * hb);
        }
        b[m] = (uint8_t)h;
    }
    quant__pack_2bit(low, b + 32);
}

void quant__from_float_q3_k(const float *x, void *blocks, uint64_t n, const float *qw)
{
    uint8_t *b = blocks;
    for (uint64_t i = 0; i < n / QK; i++)
        q3k_block(x + QK * i, qw ? qw + QK * i : NULL, b + 110 * i);
}

// --- Q4_K / Q5_K: d:f16 | dmin:f16 | scales:u8[12] | (Q5_K: qh:u8[32]) | qs:u8[128] ---

struct k45_fmt {
    int nmax;                /* 15 or 31 */
    int bytes;               /* 144 or 176 */
    int qs_off;              /* 16 or 48; Q5_K's qh sits at 16 */
    struct quant_qkx rtn;    /* the search without imatrix */
    bool clamp_weighted;     /* Q5_K clamps make_qp's levels to 63, Q4_K does not */
};

static const struct k45_fmt FMT_Q4_K = {15, 144, 16, {-1.0f, 0.1f, 20, false, false}, false};
static const struct k45_fmt FMT_Q5_K = {31, 176, 48, {-0.5f, 0.1f, 15, false, false}, true};

static void k45_to_float(const struct k45_fmt *f, const uint8_t *b, float *y, uint64_t n)
{
    for (uint64_t i = 0; i < n / QK; i++, b += f->bytes, y += QK) {
        const float d = quant__get_f16(b), min = quant__get_f16(b + 2);
        const uint8_t *qs = b + f->qs_off, *qh = b + 16;
        for (int c = 0; c < 4; c++) {
            for (int half = 0; half < 2; half++) {
                const int s = 2 * c + half;
                uint8_t sc, m;
                quant__k4_scales_get(s, b + 4, &sc, &m);
                const float d1 = d * (float)sc, m1 = min * (float)m;
                for (int l = 0; l < 32; l++) {
                    int q = half ? qs[32 * c + l] >> 4 : qs[32 * c + l] & 0xF;
                    if (f->nmax == 31 && (qh[l] >> s) & 1) q += 16;
                    y[32 * s + l] = d1 * (float)q - m1;
                }
            }
        }
    }
}

static void k45_block(const struct k45_fmt *f, const float *x, const float *qw, uint8_t *b)
{
    uint8_t L[QK], ls[8], lm[8];
    float scales[8], mins[8], w[32];
    if (!qw) {
        float max_scale = 0, max_min = 0;
        for (int j = 0; j < 8; j++) {
            const float av_x = sqrtf(sum_sq(x + 32 * j, 32) / 32.0f);
            for (int l = 0; l < 32; l++) w[l] = av_x + fabsf(x[32 * j + l]);
            scales[j] = quant__make_qkx(&f->rtn, 32, f->nmax, x + 32 * j, w, L + 32 * j, &mins[j]);
            if (scales[j] > max_scale) max_scale = scales[j];
            if (mins[j] > max_min) max_min = mins[j];
        }
        const float inv_scale = max_scale > 0 ? 63.0f / max_scale : 0.0f;
        const float inv_min = max_min > 0 ? 63.0f / max_min : 0.0f;
        for (int j = 0; j < 8; j++) {
            const uint8_t a = (uint8_t)quant_nint(inv_scale * scales[j]);
            const uint8_t c = (uint8_t)quant_nint(inv_min * mins[j]);
            ls[j] = a < 63 ? a : 63;
            lm[j] = c < 63 ? c : 63;
        }
        quant__k4_scales_put(b + 4, ls, lm);
        quant__put_f16(b, max_scale / 63.0f);
        quant__put_f16(b + 2, max_min / 63.0f);
    } else {
        static const struct quant_qkx p = {-0.9f, 0.05f, 36, false, true};
        float sw[8];
        const float sigma2 = 2 * sum_sq(x, QK) / (float)QK;
        for (int j = 0; j < 8; j++) {
            imp_weights(x + 32 * j, qw + 32 * j, sigma2, w, 32);
            sw[j] = sum_f(w, 32);
            scales[j] = quant__make_qkx(&p, 32, f->nmax, x + 32 * j, w, L + 32 * j, &mins[j]);
        }
        const float d_block = quant__make_qp(8, 63, scales, ls, sw);
        const float m_block = quant__make_qp(8, 63, mins, lm, sw);
        if (f->clamp_weighted) {
            for (int j = 0; j < 8; j++) {
                ls[j] = ls[j] < 63 ? ls[j] : 63;
                lm[j] = lm[j] < 63 ? lm[j] : 63;
            }
        }
        quant__k4_scales_put(b + 4, ls, lm);
        quant__put_f16(b, d_block);
        quant__put_f16(b + 2, m_block);
    }
    const float dd = quant__get_f16(b), dmin = quant__get_f16(b + 2);
    for (int j = 0; j < 8; j++) {
        uint8_t sc, m;
        quant__k4_scales_get(j, b + 4, &sc, &m);
        const float d = dd * (float)sc;
        if (d == 0) continue;
        const float dm = dmin * (float)m;
        for (int l = 0; l < 32; l++)
            L[32 * j + l] =
                (uint8_t)quant_clampi(quant_nint((x[32 * j + l] + dm) / d), 0, f->nmax);
    }
    uint8_t *qs = b + f->qs_off, *qh = b + 16;
    if (f->nmax == 31) memset(qh, 0, 32);
    for (int c = 0; c < 4; c++) {
        for (int l = 0; l < 32; l++) {
            const int l1 = L[64 * c + l], l2 = L[64 * c + 32 + l];
            if (f->nmax == 31)
                qh[l] |= (uint8_t)(((l1 >> 4) << (2 * c)) | ((l2 >> 4) << (2 * c + 1)));
            qs[32 * c + l] = (uint8_t)((l1 & 0xF) | ((l2 & 0xF) << 4));
        }
    }
}

static void k45_from_float(const struct k45_fmt *f, const float *x, uint8_t *b, uint64_t n,
                           const float *qw)
{
    for (uint64_t i = 0; i < n / QK; i++)
        k45_block(f, x + QK * i, qw ? qw + QK * i : NULL, b + (uint64_t)f->bytes * i);
}

void quant__to_float_q4_k(const void *b, float *y, uint64_t n) { k45_to_float(&FMT_Q4_K, b, y, n); }
void quant__to_float_q5_k(const void *b, float *y, uint64_t n) { k45_to_float(&FMT_Q5_K, b, y, n); }
void quant__from_float_q4_k(const float *x, void *b, uint64_t n, const float *qw)
{
    k45_from_float(&FMT_Q4_K, x, b, n, qw);
}
void quant__from_float_q5_k(const float *x, void *b, uint64_t n, const float *qw)
{
    k45_from_float(&FMT_Q5_K, x, b, n, qw);
}

// --- Q6_K: ql:u8[128] | qh:u8[64] | scales:i8[16] | d:f16  (210 bytes) ---

void quant__to_float_q6_k(const void *blocks, float *y, uint64_t n)
{
    const uint8_t *b = blocks;
    for (uint64_t i = 0; i < n / QK; i++, b += 210, y += QK) {
        const float d = quant__get_f16(b + 208);
        for (int e = 0; e < QK; e++) {
            const int h = e / 128, k = (e % 128) / 32, l = e % 32;
            const uint8_t qlb = b[64 * h + 32 * (k & 1) + l];
            const int lo = k < 2 ? qlb & 0xF : qlb >> 4;
            const int hi = (b[128 + 32 * h + l] >> (2 * k)) & 3;
            const int q = (lo | (hi << 4)) - 32;
            y[e] = d * (float)(int8_t)b[192 + e / 16] * (float)q;
        }
    }
}

static void q6k_block(const float *x, const float *qw, uint8_t *b)
{
    int8_t L[QK];
    float scales[16];
    float max_scale = 0, max_abs = 0;
    for (int j = 0; j < 16; j++) {
        scales[j] = quant__make_qx(16, 32, x + 16 * j, L + 16 * j, qw ? qw + 16 * j : NULL);
        const float a = fabsf(scales[j]);
        if (a > max_abs) {
            max_abs = a;
            max_scale = scales[j];
        }
    }
    if (max_abs < QUANT_GROUP_EPS) {
        memset(b, 0, 210);
        return;
    }
    const float iscale = -128.0f / max_scale;
    quant__put_f16(b + 208, 1 / iscale);
    for (int j = 0; j < 16; j++) {
        const int v = quant_nint(iscale * scales[j]);
        b[192 + j] = (uint8_t)(int8_t)(v < 127 ? v : 127);
    }
    const float dd = quant__get_f16(b + 208);
    for (int j = 0; j < 16; j++) {
        const float d = dd * (float)(int8_t)b[192 + j];
        if (d == 0) continue;
        for (int l = 0; l < 16; l++)
            L[16 * j + l] = (int8_t)(quant_clampi(quant_nint(x[16 * j + l] / d), -32, 31) + 32);
    }
    for (int h = 0; h < 2; h++) {
        const int8_t *Lh = L + 128 * h;
        uint8_t *ql = b + 64 * h, *qh = b + 128 + 32 * h;
        for (int l = 0; l < 32; l++) {
            const int q1 = Lh[l], q2 = Lh[l + 32], q3 = Lh[l + 64], q4 = Lh[l + 96];
            ql[l] = (uint8_t)((q1 & 0xF) | ((q3 & 0xF) << 4));
            ql[l + 32] = (uint8_t)((q2 & 0xF) | ((q4 & 0xF) << 4));
            qh[l] = (uint8_t)((q1 >> 4) | ((q2 >> 4) << 2) | ((q3 >> 4) << 4) | ((q4 >> 4) << 6));
        }
    }
}

void quant__from_float_q6_k(const float *x, void *blocks, uint64_t n, const float *qw)
{
    uint8_t *b = blocks;
    for (uint64_t i = 0; i < n / QK; i++)
        q6k_block(x + QK * i, qw ? qw + QK * i : NULL, b + 210 * i);
}
