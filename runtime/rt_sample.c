/*
 * runtime/rt_sample.c — next-token selection (rt.h): greedy, or top-k ->
 * top-p -> min-p -> temperature -> a draw from the softmax with a seeded
 * splitmix64 generator. Candidates are ordered by (logit desc, id asc), so
 * the result depends only on the logits, the options and the seed.
 */
#include "runtime/rt_int.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

struct cand {
    float logit;
    int32_t id;
};

struct rt_sampler {
    struct rt_sampler_opts o;
    uint32_t n_vocab;
    uint64_t rng;
    struct cand *c; /* (n_vocab) */
    float *p;       /* (n_vocab) */
};

/* a before b: higher logit first, then lower id */
static bool better(const struct cand *a, const struct cand *b)
{
    return a->logit > b->logit || (a->logit == b->logit && a->id < b->id);
}

static int cmp_cand(const void *x, const void *y)
{
    const struct cand *a = x, *b = y;
    return better(a, b) ? -1 : better(b, a) ? 1 : 0;
}

static uint64_t splitmix64(uint64_t *s)
{
    uint64_t z = (*s += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

enum mw_status rt_sampler_init(const struct rt_sampler_opts *o, uint32_t n_vocab,
                               struct rt_sampler **out, struct mw_err *err)
{
    *out = NULL;
    if (isnan(o->temp) || isnan(o->top_p) || isnan(o->min_p) || o->top_p < 0.0f ||
        o->min_p > 1.0f)
        return MW_FAIL(err, MW_E_USAGE, MW_ERR_OFF_NONE,
                       "sampling options: need temp >= 0, 0 <= top-p, min-p <= 1");
    if (n_vocab == 0) return MW_FAIL(err, MW_E_USAGE, MW_ERR_OFF_NONE, "empty vocabulary");
    struct rt_sampler *s = calloc(1, sizeof *s);
    if (!s) return MW_FAIL(err, MW_E_NOMEM, MW_ERR_OFF_NONE, "sampler");
    s->o = *o;
    s->n_vocab = n_vocab;
    s->rng = o->seed;
    s->c = calloc(n_vocab, sizeof *s->c);
    s->p = calloc(n_vocab, sizeof *s->p);
    if (!s->c || !s->p) {
        rt_sampler_free(s);
        return MW_FAIL(err, MW_E_NOMEM, MW_ERR_OFF_NONE, "sampler scratch (%u entries)", n_vocab);
    }
    *out = s;
    return MW_OK;
}

void rt_sampler_free(struct rt_sampler *s)
{
    if (!s) return;
    free(s->c);
    free(s->p);
    free(s);
}

int32_t rt_argmax(const float *logits, uint32_t n)
{
    uint32_t best = 0;
    for (uint32_t i = 1; i < n; i++)
        if (logits[i] > logits[best]) best = i;
    return (int32_t)best;
}

/* keep the k best of c[0..n) in c[0..k), as a min-heap on `better` */
static void sift_down(struct cand *h, uint32_t k, uint32_t i)
{
    for (;;) {
        uint32_t m = i;
        const uint32_t l = 2 * i + 1, r = l + 1;
        if (l < k && better(&h[m], &h[l])) m = l;
        if (r < k && better(&h[m], &h[r])) m = r;
        if (m == i) return;
        const struct cand t = h[i];
        h[i] = h[m];
        h[m] = t;
        i = m;
    }
}

static void select_top_k(struct cand *c, uint32_t n, uint32_t k)
{
    for (uint32_t i = k / 2; i-- > 0;) sift_down(c, k, i);
    for (uint32_t i = k; i < n; i++) {
        if (better(&c[i], &c[0])) {
            c[0] = c[i];
            sift_down(c, k, 0);
        }
    }
}

int32_t rt_sample(struct rt_sampler *s, const float *logits)
{
    const uint32_t nv = s->n_vocab;
    if (s->o.temp <= 0.0f) return rt_argmax(logits, nv);
    uint32_t n = nv;
    for (uint32_t i = 0; i < nv; i++) s->c[i] = (struct cand){logits[i], (int32_t)i};
    if (s->o.top_k > 0 && s->o.top_k < n) {
        select_top_k(s->c, n, s->o.top_k);
        n = s->o.top_k;
    }
    qsort(s->c, n, sizeof *s->c, cmp_cand);
    /* top-p on the softmax of the current logits */
    if (s->o.top_p > 0.0f && s->o.top_p < 1.0f) {
        const float mx = s->c[0].logit;
        double sum = 0.0;
        for (uint32_t i = 0; i < n; i++) sum += (s->p[i] = expf(s->c[i].logit - mx));
        double cum = 0.0;
        uint32_t keep = n;
        for (uint32_t i = 0; i < n; i++) {
            cum += s->p[i] / sum;
            if (cum >= s->o.top_p) {
                keep = i + 1;
                break;
            }
        }
        n = keep;
    }
    /* min-p: p_i >= min_p * p_max, i.e. logit_i >= max + log(min_p) */
    if (s->o.min_p > 0.0f) {
        const float cut = s->c[0].logit + logf(s->o.min_p);
        uint32_t keep = 1;
        while (keep < n && s->c[keep].logit >= cut) keep++;
        n = keep;
    }
    /* temperature, softmax, draw */
    const float mx = s->c[0].logit / s->o.temp;
    double sum = 0.0;
    for (uint32_t i = 0; i < n; i++) sum += (s->p[i] = expf(s->c[i].logit / s->o.temp - mx));
    const double u = (double)(splitmix64(&s->rng) >> 11) * (1.0 / 9007199254740992.0) * sum;
    double cum = 0.0;
    for (uint32_t i = 0; i < n; i++) {
        cum += s->p[i];
        if (u < cum) return s->c[i].id;
    }
    return s->c[n - 1].id;
}
