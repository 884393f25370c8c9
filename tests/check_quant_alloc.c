/*
 * tests/check_quant_alloc.c — mixed precision to a budget (quant/quant_alloc.h):
 * the allocation against brute force on small random cases, monotonicity in
 * the budget, the coarse-unit path never exceeding the budget, argument
 * errors, the loss measurement (ordering of types, importance weighting,
 * thread independence) and the size parser.
 */
#include <check.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "quant/quant_alloc.h"

#include "check_common.h"

/* xorshift64*: deterministic test data */
static uint64_t rng_next(uint64_t *s)
{
    *s ^= *s >> 12;
    *s ^= *s << 25;
    *s ^= *s >> 27;
    return *s * 2685821657736338717ull;
}
static double rng_unit(uint64_t *s) { return (double)(rng_next(s) >> 11) / 9007199254740992.0; }

#define MAX_ITEMS 6
#define MAX_CAND 4

struct inst {
    uint64_t n;
    struct quant_alloc_cand c[MAX_ITEMS][MAX_CAND];
    struct quant_alloc_item it[MAX_ITEMS];
};

static void make_inst(struct inst *in, uint64_t *seed, bool convex_ish)
{
    in->n = 1 + rng_next(seed) % MAX_ITEMS;
    for (uint64_t k = 0; k < in->n; k++) {
        const uint32_t nc = 1 + (uint32_t)(rng_next(seed) % MAX_CAND);
        uint64_t b = 1 + rng_next(seed) % 20;
        double l = 10 + 100 * rng_unit(seed);
        for (uint32_t j = 0; j < nc; j++) {
            in->c[k][j] = (struct quant_alloc_cand){.type = j, .bytes = b, .loss = l};
            b += 1 + rng_next(seed) % 30;
            /* mostly decreasing losses, sometimes a dominated candidate */
            l = convex_ish ? l * (0.2 + 0.6 * rng_unit(seed)) : l * (0.1 + 1.0 * rng_unit(seed));
        }
        in->it[k] = (struct quant_alloc_item){.n_cand = nc, .cand = in->c[k]};
    }
}

/* exhaustive minimum loss within budget (-1 if infeasible) */
static double brute(const struct inst *in, uint64_t budget)
{
    uint32_t idx[MAX_ITEMS] = {0};
    double best = -1;
    for (;;) {
        uint64_t b = 0;
        double l = 0;
        for (uint64_t k = 0; k < in->n; k++) {
            b += in->c[k][idx[k]].bytes;
            l += in->c[k][idx[k]].loss;
        }
        if (b <= budget && (best < 0 || l < best)) best = l;
        uint64_t k = 0;
        while (k < in->n && ++idx[k] == in->it[k].n_cand) idx[k++] = 0;
        if (k == in->n) break;
    }
    return best;
}

START_TEST(test_brute_force)
{
    uint64_t seed = 0x9e3779b97f4a7c15ull + (uint64_t)_i * 7919;
    int checked = 0;
    for (int rep = 0; rep < 200; rep++) {
        struct inst in;
        make_inst(&in, &seed, rep % 2 == 0);
        uint64_t minb = 0, maxb = 0;
        for (uint64_t k = 0; k < in.n; k++) {
            minb += in.c[k][0].bytes;
            maxb += in.c[k][in.it[k].n_cand - 1].bytes;
        }
        for (uint64_t budget = minb; budget <= maxb + 3; budget += 1 + (maxb - minb) / 23) {
            uint32_t ch[MAX_ITEMS];
            struct quant_alloc_result r;
            struct mw_err err;
            ck_assert_int_eq(quant_alloc_solve(in.it, in.n, budget, ch, &r, &err), MW_OK);
            const double opt = brute(&in, budget);
            ck_assert(opt >= 0);
            uint64_t b = 0;
            double l = 0;
            for (uint64_t k = 0; k < in.n; k++) {
                ck_assert_uint_lt(ch[k], in.it[k].n_cand);
                b += in.c[k][ch[k]].bytes;
                l += in.c[k][ch[k]].loss;
            }
            ck_assert_uint_le(b, budget);
            ck_assert_uint_eq(b, r.bytes);
            ck_assert(fabs(l - r.loss) <= 1e-9 * (1 + l));
            ck_assert(r.dp_exact);
            ck_assert_msg(fabs(l - opt) <= 1e-9 * (1 + opt), "rep %d budget %llu: %.12g vs %.12g",
                          rep, (unsigned long long)budget, l, opt);
            checked++;
        }
    }
    ck_assert_int_gt(checked, 1000);
}
END_TEST

START_TEST(test_monotone)
{
    uint64_t seed = 12345;
    for (int rep = 0; rep < 50; rep++) {
        struct inst in;
        make_inst(&in, &seed, false);
        uint64_t minb = 0, maxb = 0;
        for (uint64_t k = 0; k < in.n; k++) {
            minb += in.c[k][0].bytes;
            maxb += in.c[k][in.it[k].n_cand - 1].bytes;
        }
        double prev = INFINITY;
        for (uint64_t budget = minb; budget <= maxb; budget++) {
            uint32_t ch[MAX_ITEMS];
            struct quant_alloc_result r;
            ck_assert_int_eq(quant_alloc_solve(in.it, in.n, budget, ch, &r, NULL), MW_OK);
            ck_assert(r.loss <= prev);
            prev = r.loss;
        }
    }
}
END_TEST

/* Budgets that need more DP states than QUANT_ALLOC_MAX_STATES: a coarser
 * unit, still never over budget, and no worse than the greedy alone
 * (which the solver also runs) — checked against the hull bound. */
START_TEST(test_coarse)
{
    enum { N = 12 };
    static const uint64_t bpb[] = {84, 110, 144, 176, 210, 272}; /* Q2_K..Q8_0 per 256 */
    struct quant_alloc_cand c[N][6];
    struct quant_alloc_item it[N];
    uint64_t seed = 777, minb = 0, maxb = 0;
    for (int k = 0; k < N; k++) {
        const uint64_t blocks = 20000 + rng_next(&seed) % 20000;
        const double s = 1 + 10 * rng_unit(&seed);
        for (int j = 0; j < 6; j++)
            c[k][j] = (struct quant_alloc_cand){
                .type = (uint32_t)j, .bytes = blocks * bpb[j] + 7 * (uint64_t)k,
                .loss = s * (double)blocks * pow(0.25, (double)bpb[j] / 32.0)};
        it[k] = (struct quant_alloc_item){.n_cand = 6, .cand = c[k]};
        minb += c[k][0].bytes;
        maxb += c[k][5].bytes;
    }
    double prev = INFINITY;
    static const int steps[] = {0, 2, 5, 8, 10};
    for (size_t si = 0; si < sizeof steps / sizeof steps[0]; si++) {
        const int step = steps[si];
        const uint64_t budget = minb + (maxb - minb) / 10 * (uint64_t)step;
        uint32_t ch[N];
        struct quant_alloc_result r;
        ck_assert_int_eq(quant_alloc_solve(it, N, budget, ch, &r, NULL), MW_OK);
        ck_assert_uint_le(r.bytes, budget);
        ck_assert(r.loss <= prev);
        prev = r.loss;
        if (step > 0 && step < 10) {
            ck_assert(!r.dp_exact); /* > QUANT_ALLOC_MAX_STATES units at the gcd */
            ck_assert_uint_gt(r.unit, 1);
            /* within 1% of the budget */
            ck_assert_uint_ge(r.bytes, budget - budget / 100);
        }
    }
}
END_TEST

START_TEST(test_errors)
{
    struct quant_alloc_cand c[2] = {{0, 10, 5.0}, {1, 20, 1.0}};
    struct quant_alloc_item it[2] = {{2, c}, {2, c}};
    uint32_t ch[2];
    struct quant_alloc_result r;
    struct mw_err err;
    ck_assert_int_eq(quant_alloc_solve(it, 2, 19, ch, &r, &err), MW_E_VALUE);
    ck_assert(strstr(err.msg, "20") != NULL);
    ck_assert_int_eq(quant_alloc_solve(it, 2, 20, ch, &r, &err), MW_OK);
    ck_assert_uint_eq(ch[0], 0);
    ck_assert_uint_eq(ch[1], 0);
    ck_assert_int_eq(quant_alloc_solve(it, 2, 30, ch, &r, &err), MW_OK);
    ck_assert_uint_eq(r.bytes, 30);
    ck_assert_int_eq(quant_alloc_solve(it, 2, 1000, ch, &r, &err), MW_OK);
    ck_assert_uint_eq(ch[0] + ch[1], 2);
    struct quant_alloc_cand bad[1] = {{0, 10, NAN}};
    struct quant_alloc_item ib[1] = {{1, bad}};
    ck_assert_int_eq(quant_alloc_solve(ib, 1, 100, ch, &r, &err), MW_E_USAGE);
    bad[0].loss = -1;
    ck_assert_int_eq(quant_alloc_solve(ib, 1, 100, ch, &r, &err), MW_E_USAGE);
    struct quant_alloc_item ie[1] = {{0, c}};
    ck_assert_int_eq(quant_alloc_solve(ie, 1, 100, ch, &r, &err), MW_E_USAGE);
    ck_assert_int_eq(quant_alloc_solve(it, 0, 0, ch, &r, &err), MW_OK);
}
END_TEST

START_TEST(test_loss)
{
    enum { R = 16, N = 512 };
    float *x = malloc(R * N * sizeof *x), imp[N], two[N];
    uint64_t seed = 4242;
    for (int i = 0; i < R * N; i++) {
        /* Box-Muller gaussian, 0.02 scale */
        const double u = rng_unit(&seed) + 1e-12, v = rng_unit(&seed);
        x[i] = (float)(0.02 * sqrt(-2 * log(u)) * cos(6.283185307179586 * v));
    }
    for (int j = 0; j < N; j++) {
        imp[j] = (float)(0.1 + 2 * rng_unit(&seed));
        two[j] = 2.0f;
    }
    static const uint32_t ts[] = {GGUF_TYPE_Q2_K, GGUF_TYPE_Q3_K, GGUF_TYPE_Q4_K,
                                  GGUF_TYPE_Q5_K, GGUF_TYPE_Q6_K, GGUF_TYPE_Q8_0};
    double prev = INFINITY;
    struct mw_err err;
    for (size_t k = 0; k < sizeof ts / sizeof ts[0]; k++) {
        double l, l3, lu, l2;
        ck_assert_int_eq(quant_alloc_loss(ts[k], x, R, N, imp, imp, 1, &l, &err), MW_OK);
        ck_assert_int_eq(quant_alloc_loss(ts[k], x, R, N, imp, imp, 3, &l3, &err), MW_OK);
        ck_assert(l == l3); /* thread-count independent, bit for bit */
        ck_assert(l > 0 && l < prev);
        prev = l;
        ck_assert_int_eq(quant_alloc_loss(ts[k], x, R, N, NULL, NULL, 2, &lu, &err), MW_OK);
        ck_assert_int_eq(quant_alloc_loss(ts[k], x, R, N, NULL, two, 2, &l2, &err), MW_OK);
        ck_assert(fabs(l2 - 2 * lu) <= 1e-12 * lu);
    }
    double l;
    ck_assert_int_eq(quant_alloc_loss(GGUF_TYPE_F32, x, R, N, NULL, NULL, 1, &l, &err), MW_OK);
    ck_assert(l == 0);
    ck_assert_int_eq(quant_alloc_loss(GGUF_TYPE_Q4_K, x, R * 2, N / 2, NULL, NULL, 1, &l, &err),
                     MW_OK);
    ck_assert_int_eq(quant_alloc_loss(GGUF_TYPE_Q4_K, x, R, 100, NULL, NULL, 1, &l, &err),
                     MW_E_USAGE);
    free(x);
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("quant_alloc");
    TCase *tc = tcase_create("solve");
    tcase_set_timeout(tc, 120);
    tcase_add_loop_test(tc, test_brute_force, 0, 3);
    tcase_add_test(tc, test_monotone);
    tcase_add_test(tc, test_coarse);
    tcase_add_test(tc, test_errors);
    suite_add_tcase(s, tc);
    TCase *tl = tcase_create("loss");
    tcase_set_timeout(tl, 120);
    tcase_add_test(tl, test_loss);
    suite_add_tcase(s, tl);
    return s;
}

int main(void)
{
    return run_suite(suite());
}
