/*
 * quant/quant_budget.c — mixed precision to a budget over a plan
 * (quant_alloc.h "a budget over a plan"): the items and their candidates,
 * the loss measurement, the size checks, the solver rounds against the real
 * file layout, and the exact-name overrides that carry the choice into the
 * final plan.
 */
#include "quant/quant_alloc.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Candidate types, cheapest first (bits per weight): the i-quants below 4
 * bits beside the k-quants. A type ggml quantizes only with
 * importance weights (IQ2_XXS, IQ2_XS, IQ1_S) is a candidate only for a
 * tensor that has them. */
static const uint32_t cand_types[] = {
    GGUF_TYPE_IQ1_S,   /* 1.5625 */
    GGUF_TYPE_IQ1_M,   /* 1.75 */
    GGUF_TYPE_IQ2_XXS, /* 2.0625 */
    GGUF_TYPE_IQ2_XS,  /* 2.3125 */
    GGUF_TYPE_IQ2_S,   /* 2.5625 */
    GGUF_TYPE_Q2_K,    /* 2.625 */
    GGUF_TYPE_IQ3_XXS, /* 3.0625 */
    GGUF_TYPE_IQ3_S,   /* 3.4375 */
    GGUF_TYPE_Q3_K,    /* 3.4375 */
    GGUF_TYPE_IQ4_XS,  /* 4.25 */
    GGUF_TYPE_Q4_K,    /* 4.5 */
    GGUF_TYPE_Q5_K,    /* 5.5 */
    GGUF_TYPE_Q6_K,    /* 6.5625 */
    GGUF_TYPE_Q8_0,    /* 8.5 */
    GGUF_TYPE_F16,
};
#define N_CAND (sizeof cand_types / sizeof cand_types[0])
#define QUANT_BUDGET_GAIN_MIN_BPW 3.0

/* The i-quants below 4 bits (what --no-iquants leaves out). */
static bool is_iquant_low(uint32_t t)
{
    return t == GGUF_TYPE_IQ1_S || t == GGUF_TYPE_IQ1_M || t == GGUF_TYPE_IQ2_XXS ||
           t == GGUF_TYPE_IQ2_XS || t == GGUF_TYPE_IQ2_S || t == GGUF_TYPE_IQ3_XXS ||
           t == GGUF_TYPE_IQ3_S;
}

struct item {
    uint64_t plan_i;
    const struct quant_tensor_desc *t;
    struct quant_alloc_cand cand[N_CAND + 1]; /* + the source's own type, when quantized */
    uint32_t n_cand;
    uint32_t probe_type; /* with a probe (quant_budget.probe) */
    double probe_kld, probe_scale;
};

static uint64_t pad_to(uint64_t v, uint64_t a) { return (v + a - 1) / a * a; }

uint64_t quant_plan_n_elements(const struct quant_plan *p)
{
    uint64_t n = 0;
    for (uint64_t i = 0; i < quant_plan_count(p); i++) {
        const uint64_t *ne = quant_plan_get(p, i)->src->ne;
        n += ne[0] * ne[1] * ne[2] * ne[3];
    }
    return n;
}

/* What a tensor of out_bytes costs against budget b. */
static uint64_t cost(const struct quant_budget *b, uint64_t out_bytes)
{
    return b->kind == QUANT_BUDGET_BPW ? out_bytes : pad_to(out_bytes, 32);
}

/* Loss of one tensor under type t (rows sampled when there are many). */
static enum mw_status tensor_loss(const struct quant_plan_entry *e, const float *x, uint64_t rows,
                                  const float *imp, uint32_t t, unsigned nt, double *loss,
                                  struct mw_err *err)
{
    const uint64_t n = e->src->ne[0], ne1 = e->src->ne[1], nex = rows / (ne1 ? ne1 : 1);
    enum mw_status s;
    if (nex > 1 && e->imatrix) { /* per-expert importance */
        /* routing frequency: with the rows the calibration sent
         * to each expert, expert ex's loss counts nex * rows_ex / all rows
         * (uniform routing: 1 each, as without counts); an expert no row
         * reached costs nothing (the corpus never used it) */
        double tot = 0;
        if (e->imatrix_counts)
            for (uint64_t ex = 0; ex < nex; ex++) tot += (double)e->imatrix_counts[ex];
        double sum = 0;
        for (uint64_t ex = 0; ex < nex; ex++) {
            const double f =
                tot > 0 ? (double)nex * (double)e->imatrix_counts[ex] / tot : 1.0;
            if (f == 0) continue;
            double l;
            if ((s = quant_alloc_loss(t, x + ex * ne1 * n, ne1, n, e->imatrix + ex * n,
                                      e->imatrix + ex * n, nt, &l, err)) != MW_OK)
                return s;
            sum += f * l;
        }
        *loss = sum;
        return MW_OK;
    }
    if (rows <= QUANT_BUDGET_MAX_ROWS)
        return quant_alloc_loss(t, x, rows, n, e->imatrix, imp, nt, loss, err);
    const uint64_t stride = (rows + QUANT_BUDGET_MAX_ROWS - 1) / QUANT_BUDGET_MAX_ROWS;
    const uint64_t ns = (rows + stride - 1) / stride;
    float *sub = malloc((size_t)(ns * n) * sizeof *sub);
    if (!sub) return MW_FAIL(err, MW_E_NOMEM, MW_ERR_OFF_NONE, "out of memory");
    for (uint64_t r = 0; r < ns; r++)
        memcpy(sub + r * n, x + r * stride * n, (size_t)n * sizeof *x);
    s = quant_alloc_loss(t, sub, ns, n, e->imatrix, imp, nt, loss, err);
    free(sub);
    *loss *= (double)rows / (double)ns;
    return s;
}

/* A source tensor stored quantized (MXFP4 experts, a requantized file):
 * not F32 / F16 / BF16. */
static bool src_quantized(uint32_t t)
{
    return t != GGUF_TYPE_F32 && t != GGUF_TYPE_F16 && t != GGUF_TYPE_BF16;
}

/* The items of p0 with every candidate's bytes; losses too when asked. A
 * tensor stored quantized in the source may stay as it is (a candidate of
 * loss 0: its bytes are the source's) and, with requant
 * (--allow-requantize), take any other type; without, it keeps its type,
 * as llama-quantize keeps gpt-oss's MXFP4 experts. */
static enum mw_status measure(const struct quant_source *src, const struct quant_plan *p0,
                              const struct quant_budget *b, bool requant, bool losses,
                              struct item **out_items, uint64_t *out_n, struct mw_err *err)
{
    const uint64_t np = quant_plan_count(p0);
    struct item *it = calloc(np ? (size_t)np : 1, sizeof *it);
    float *onorm = NULL, *x = NULL;
    uint64_t n = 0;
    enum mw_status s = MW_OK;
    if (!it) return MW_FAIL(err, MW_E_NOMEM, MW_ERR_OFF_NONE, "out of memory");
    /* output.weight reads rmsnorm(h) * output_norm (unit mean square before
     * the norm weight): importance output_norm_j^2 where no imatrix has it */
    /* with tied embeddings (no output.weight: gemma, small qwen3) token_embd
     * is the output matrix as well: it gets the same importance. Applied to
     * the issue-12 families only: llama/mistral/qwen2 allocations stay as
     * they were. */
    bool tied = false;
    {
        const char *arch = NULL;
        uint64_t alen = 0;
        struct mw_err e2;
        mw_err_clear(&e2);
        if (src->kv && gguf_get_str(src->kv, "general.architecture", &arch, &alen, &e2) == MW_OK)
            tied = (alen == 5 && (memcmp(arch, "qwen3", 5) == 0 || memcmp(arch, "gemma", 5) == 0)) ||
                   (alen == 6 && memcmp(arch, "gemma2", 6) == 0) ||
                   (alen == 6 && memcmp(arch, "gemma3", 6) == 0) ||
                   (alen == 4 && memcmp(arch, "phi3", 4) == 0);
    }
    for (uint64_t i = 0; i < src->n_tensors && tied; i++)
        if (strcmp(src->tensors[i].name, "output.weight") == 0) tied = false;
    for (uint64_t i = 0; i < src->n_tensors && !onorm && losses; i++) {
        if (strcmp(src->tensors[i].name, "output_norm.weight") != 0) continue;
        uint64_t r;
        if ((s = quant_alloc_read_f32(src, i, &onorm, &r, err)) != MW_OK) goto out;
        for (uint64_t j = 0; j < src->tensors[i].ne[0]; j++) onorm[j] *= onorm[j];
    }
    for (uint64_t i = 0; i < np; i++) {
        const struct quant_plan_entry *e = quant_plan_get(p0, i);
        if (e->choice.type == e->src->type || e->choice.reason == QUANT_OVERRIDE ||
            e->choice.reason == QUANT_KEEP)
            continue;
        struct item *a = &it[n];
        a->plan_i = i;
        a->t = e->src;
        const bool keep_only = src_quantized(e->src->type) && !requant;
        uint64_t rows = 0;
        if (losses && !keep_only &&
            (s = quant_alloc_read_f32(src, e->src_index, &x, &rows, err)) != MW_OK)
            goto out;
        const float *imp = e->imatrix;
        if (!imp && onorm &&
            (strcmp(e->src->name, "output.weight") == 0 ||
             (tied && strcmp(e->src->name, "token_embd.weight") == 0)))
            imp = onorm;
        for (size_t k = 0; k < N_CAND && !keep_only; k++) {
            const uint32_t t = cand_types[k];
            const struct gguf_type_info *ti = gguf_type_get(t);
            uint64_t nb;
            const struct quant_traits *qt = quant_traits_get(t);
            if (!ti || !qt || e->src->ne[0] % ti->blck || !gguf_tensor_nbytes(t, e->src->ne, &nb))
                continue;
            if (qt->needs_imatrix && !e->imatrix) continue;
            if (b->no_iquants && is_iquant_low(t)) continue;
            double l = 0;
            if (losses && (s = tensor_loss(e, x, rows, imp, t, b->n_threads, &l, err)) != MW_OK) {
                mw_err_set_where(err, "tensor '%s'", e->src->name);
                goto out;
            }
            a->cand[a->n_cand++] =
                (struct quant_alloc_cand){.type = t, .bytes = cost(b, nb), .loss = l};
        }
        if (src_quantized(e->src->type)) {
            /* kept as it is: in its place by bytes (the candidates go from
             * the smallest to the largest), after the types of equal size */
            const struct quant_alloc_cand keep = {.type = e->src->type,
                                                  .bytes = cost(b, e->src_bytes), .loss = 0};
            uint32_t at = a->n_cand;
            bool dup = false;
            for (uint32_t j = 0; j < a->n_cand; j++) dup = dup || a->cand[j].type == keep.type;
            if (dup) { /* the same type requantized is the source's bytes: keep those */
                for (uint32_t j = 0; j < a->n_cand; j++)
                    if (a->cand[j].type == keep.type) a->cand[j] = keep;
            } else {
                while (at > 0 && a->cand[at - 1].bytes > keep.bytes) {
                    a->cand[at] = a->cand[at - 1];
                    at--;
                }
                a->cand[at] = keep;
                a->n_cand++;
            }
        }
        free(x);
        x = NULL;
        if (a->n_cand) n++;
    }
out:
    free(x);
    free(onorm);
    if (s != MW_OK) {
        free(it);
        return s;
    }
    *out_items = it;
    *out_n = n;
    return MW_OK;
}

/* A refusal: the budget cannot be met. */
#define REFUSE(r, ...) ((r)->refused = true, MW_FAIL(err, MW_E_USAGE, MW_ERR_OFF_NONE, __VA_ARGS__))

/* The target the items may take; 0 with *s set when refused or failed. */
static uint64_t first_target(const struct quant_plan *p0, const struct quant_budget *b,
                             const struct item *it, uint64_t n, uint64_t fs_min,
                             struct quant_budget_result *r, enum mw_status *s,
                             struct mw_err *err)
{
    uint64_t fixed = 0, min_items = 0, max_items = 0;
    for (uint64_t k = 0; k < n; k++) {
        min_items += it[k].cand[0].bytes;
        max_items += it[k].cand[it[k].n_cand - 1].bytes;
    }
    for (uint64_t i = 0, k = 0; i < quant_plan_count(p0); i++) {
        const struct quant_plan_entry *e = quant_plan_get(p0, i);
        if (k < n && it[k].plan_i == i) {
            k++;
            continue;
        }
        fixed += cost(b, e->out_bytes);
    }
    uint64_t target;
    const char *cheapest =
        b->no_iquants ? "Q2_K (--no-iquants)" : "IQ1_S with importance, IQ1_M without";
    *s = MW_OK;
    if (b->kind == QUANT_BUDGET_BPW) {
        const double want = b->bpw * (double)r->n_elements / 8.0;
        if (!(want >= (double)(fixed + min_items))) {
            *s = REFUSE(r,
                        "%s %g is below the smallest this model can have (%.4f bpw: the cheapest "
                        "valid type everywhere: %s)",
                        b->what ? b->what : "--bpw", b->bpw,
                        (double)(fixed + min_items) * 8.0 / (double)r->n_elements, cheapest);
            return 0;
        }
        target = (uint64_t)want - fixed;
    } else {
        uint64_t fs0, data0 = 0;
        if ((*s = quant_plan_file_size(p0, &fs0, err)) != MW_OK) return 0;
        for (uint64_t i = 0; i < quant_plan_count(p0); i++)
            data0 += pad_to(quant_plan_get(p0, i)->out_bytes, 32);
        uint64_t hdr = fs0 > data0 ? fs0 - data0 : 0;
        /* first estimate of what the exact-name overrides add to the
         * header (~ one string each); the rounds correct it */
        for (uint64_t k = 0; k < n; k++) hdr += 8 + strlen(it[k].t->name) + 12;
        if (b->file_bytes < fs_min) {
            const uint64_t v = fs_min;
            *s = REFUSE(r,
                        "%s is below the smallest file this model can have: %llu (%.2f MiB) "
                        "(the cheapest valid type everywhere: %s)",
                        b->what ? b->what : "--size", (unsigned long long)v,
                        (double)v / 1048576.0, cheapest);
            return 0;
        }
        /* fs_min is the exact file of the cheapest choice: a budget at or
         * above it is feasible even where the header estimate says not */
        target = b->file_bytes >= hdr + fixed + min_items ? b->file_bytes - hdr - fixed
                                                           : min_items;
    }
    return target > max_items ? max_items : target;
}

/* The plan of (src, o) with the user's overrides then the n items at
 * their chosen types; checks that the plan applied them. */
static enum mw_status apply(const struct quant_source *src, struct quant_opts *o,
                            const struct quant_overrides *user_ov, const struct item *it,
                            uint64_t n, const uint32_t *choice, struct quant_budget_result *r,
                            struct quant_plan **p1, struct mw_err *err)
{
    enum mw_status s = MW_OK;
    quant_overrides_free(r->overrides);
    r->overrides = NULL;
    for (uint64_t i = 0; i < quant_overrides_count(user_ov) && s == MW_OK; i++)
        s = quant_overrides_add(&r->overrides, quant_overrides_spec(user_ov, i), err);
    for (uint64_t k = 0; k < n && s == MW_OK; k++)
        s = quant_overrides_add_exact(&r->overrides, it[k].t->name, it[k].cand[choice[k]].type,
                                      err);
    if (s != MW_OK) return s;
    o->rules.overrides = r->overrides;
    quant_plan_free(*p1);
    *p1 = NULL;
    if ((s = quant_plan_build(src, o, p1, err)) != MW_OK) return s;
    for (uint64_t k = 0; k < n; k++) {
        const struct quant_plan_entry *e = quant_plan_get(*p1, it[k].plan_i);
        if (e->src != it[k].t || e->choice.type != it[k].cand[choice[k]].type)
            return MW_FAIL(err, MW_E_UNSUPPORTED, MW_ERR_OFF_NONE,
                           "tensor '%s': the plan did not take the allocated type",
                           it[k].t->name);
    }
    return MW_OK;
}

/* Spearman's rank correlation of a and b (n >= 2; ties get their mean rank). */
static double rank_corr(const double *a, const double *b, uint64_t n, double *ra, double *rb,
                        uint64_t *idx)
{
    const double *v[2] = {a, b};
    double *r[2] = {ra, rb};
    for (int q = 0; q < 2; q++) {
        for (uint64_t i = 0; i < n; i++) idx[i] = i;
        for (uint64_t i = 1; i < n; i++) { /* insertion sort: n is the tensor count */
            const uint64_t x = idx[i];
            uint64_t j = i;
            while (j > 0 && v[q][idx[j - 1]] > v[q][x]) idx[j] = idx[j - 1], j--;
            idx[j] = x;
        }
        for (uint64_t i = 0; i < n;) {
            uint64_t j = i;
            while (j + 1 < n && v[q][idx[j + 1]] == v[q][idx[i]]) j++;
            for (uint64_t k = i; k <= j; k++) r[q][idx[k]] = 0.5 * (double)(i + j);
            i = j + 1;
        }
    }
    double ma = 0, mb = 0, sab = 0, saa = 0, sbb = 0;
    for (uint64_t i = 0; i < n; i++) ma += ra[i], mb += rb[i];
    ma /= (double)n, mb /= (double)n;
    for (uint64_t i = 0; i < n; i++) {
        sab += (ra[i] - ma) * (rb[i] - mb);
        saa += (ra[i] - ma) * (ra[i] - ma);
        sbb += (rb[i] - mb) * (rb[i] - mb);
    }
    return saa > 0 && sbb > 0 ? sab / sqrt(saa * sbb) : NAN;
}

static int cmp_double(const void *x, const void *y)
{
    const double a = *(const double *)x, b = *(const double *)y;
    return (a > b) - (a < b);
}

/* quant_budget.probe (quant_alloc.h "end-to-end sensitivity"): pick each
 * item's probe type, let the callback measure the KL divergences, rescale
 * every item's losses by kld / loss(probe type). */
static enum mw_status probe_scale(const struct quant_plan *p0, const struct quant_budget *b,
                                  struct item *it, uint64_t n, struct quant_budget_result *r,
                                  struct mw_err *err)
{
    struct quant_budget_probe *pr = calloc((size_t)n, sizeof *pr);
    double *f = calloc((size_t)n * 5, sizeof *f);
    uint64_t *idx = calloc((size_t)n, sizeof *idx);
    enum mw_status s = MW_OK;
    if (!pr || !f || !idx) {
        s = MW_FAIL(err, MW_E_NOMEM, MW_ERR_OFF_NONE, "out of memory");
        goto out;
    }
    for (uint64_t k = 0; k < n; k++) {
        uint32_t best = 0;
        double bd = INFINITY;
        for (int iq = 0; iq < 2 && bd == INFINITY; iq++)
            for (uint32_t j = 0; j < it[k].n_cand; j++) {
                const uint32_t t = it[k].cand[j].type;
                if (iq == 0 && is_iquant_low(t)) continue;
                const struct gguf_type_info *ti = gguf_type_get(t);
                const double d =
                    fabs(8.0 * (double)ti->type_size / (double)ti->blck - QUANT_BUDGET_PROBE_BPW);
                if (d < bd) bd = d, best = j;
            }
        const struct quant_plan_entry *e = quant_plan_get(p0, it[k].plan_i);
        pr[k] = (struct quant_budget_probe){.t = it[k].t, .src_index = e->src_index,
                                            .imatrix = e->imatrix,
                                            .type = it[k].cand[best].type,
                                            .loss = it[k].cand[best].loss, .kld = -1};
    }
    r->probe_asked = true;
    if ((s = b->probe(b->probe_ud, pr, n, err)) != MW_OK) goto out;
    /* the factors of the measured items, their median for the others */
    double *fac = f, *xa = f + n, *xb = f + 2 * n, *ra = f + 3 * n, *rb = f + 4 * n;
    uint64_t m = 0;
    for (uint64_t k = 0; k < n; k++) {
        const bool ok = pr[k].kld > 0 && isfinite(pr[k].kld) && pr[k].loss > 0;
        it[k].probe_type = pr[k].type;
        it[k].probe_kld = ok ? pr[k].kld : -1;
        if (ok) fac[m] = pr[k].kld / pr[k].loss, xa[m] = pr[k].loss, xb[m] = pr[k].kld, m++;
    }
    if (m == 0) goto out; /* nothing measured: the losses as they are */
    r->n_probed = m;
    r->probe_rank_corr = m >= 2 ? rank_corr(xa, xb, m, ra, rb, idx) : NAN;
    qsort(fac, (size_t)m, sizeof *fac, cmp_double);
    const double med = m % 2 ? fac[m / 2] : 0.5 * (fac[m / 2 - 1] + fac[m / 2]);
    for (uint64_t k = 0; k < n; k++) {
        double c = it[k].probe_kld > 0 ? it[k].probe_kld / pr[k].loss : med;
        if (c < med / QUANT_BUDGET_PROBE_CLAMP) c = med / QUANT_BUDGET_PROBE_CLAMP;
        if (c > med * QUANT_BUDGET_PROBE_CLAMP) c = med * QUANT_BUDGET_PROBE_CLAMP;
        for (uint32_t j = 0; j < it[k].n_cand; j++) it[k].cand[j].loss *= c;
        it[k].probe_scale = c;
    }
out:
    free(pr);
    free(f);
    free(idx);
    return s;
}

enum mw_status quant_budget_allocate(const struct quant_source *src, const struct quant_opts *o,
                                     const struct quant_budget *b,
                                     struct quant_budget_result *r, struct mw_err *err)
{
    mw_err_clear(err);
    memset(r, 0, sizeof *r);
    struct quant_opts lo = *o; /* the plans built here would repeat the final plan's notices */
    lo.log = NULL;
    lo.progress = NULL;
    /* the plans measured here may name any type for a tensor stored
     * quantized; measure() keeps such a tensor at its own type unless
     * o->allow_requantize, and the final plan (built with o) checks it */
    lo.allow_requantize = true;
    /* the probes' results go into the final file (memwall.quant.probe_kld,
     * one f32 per tensor): the plans measured here carry the key too */
    float *pk = b->probe && !o->probe_kld ? calloc((size_t)src->n_tensors + 1, sizeof *pk) : NULL;
    if (pk) lo.probe_kld = pk, lo.n_probe_kld = src->n_tensors;
    struct quant_source asrc = *src;
    /* placeholders for the method keys to reserve */
    char *wm = malloc((size_t)b->reserve_method + 1);
    char *wp = malloc((size_t)b->reserve_method_params + 1);
    struct quant_plan *p0 = NULL, *p1 = NULL;
    struct item *it = NULL;
    struct quant_alloc_item *ai = NULL;
    uint32_t *choice = NULL;
    uint64_t n = 0;
    enum mw_status s;
    if (!wm || !wp || (b->probe && !o->probe_kld && !pk)) {
        s = MW_FAIL(err, MW_E_NOMEM, MW_ERR_OFF_NONE, "out of memory");
        goto out;
    }
    memset(wm, 'x', b->reserve_method), wm[b->reserve_method] = 0;
    memset(wp, 'x', b->reserve_method_params), wp[b->reserve_method_params] = 0;
    if (b->reserve_method) asrc.method = wm;
    if (b->reserve_method_params) asrc.method_params = wp;
    if ((s = quant_plan_build(&asrc, &lo, &p0, err)) != MW_OK) goto out;
    r->n_elements = quant_plan_n_elements(p0);
    /* sizes first (cheap): an impossible budget is refused before the
     * losses are measured */
    if ((s = measure(&asrc, p0, b, o->allow_requantize, false, &it, &n, err)) != MW_OK) goto out;
    if (n == 0) {
        s = REFUSE(r, "no tensor left to allocate types to");
        goto out;
    }
    ai = calloc((size_t)n, sizeof *ai);
    choice = calloc((size_t)n, sizeof *choice);
    if (!ai || !choice) {
        s = MW_FAIL(err, MW_E_NOMEM, MW_ERR_OFF_NONE, "out of memory");
        goto out;
    }
    uint64_t min_items = 0;
    for (uint64_t k = 0; k < n; k++) min_items += it[k].cand[0].bytes;
    /* the exact smallest file: every item at its cheapest candidate
     * (what a refusal names, so that the size it names is accepted) */
    uint64_t fs_min = 0;
    if (b->kind != QUANT_BUDGET_BPW) {
        for (uint64_t k = 0; k < n; k++) {
            uint32_t m = 0;
            for (uint32_t j = 1; j < it[k].n_cand; j++)
                if (it[k].cand[j].bytes < it[k].cand[m].bytes) m = j;
            choice[k] = m;
        }
        if ((s = apply(&asrc, &lo, o->rules.overrides, it, n, choice, r, &p1, err)) != MW_OK ||
            (s = quant_plan_file_size(p1, &fs_min, err)) != MW_OK)
            goto out;
    }
    uint64_t target = first_target(p0, b, it, n, fs_min, r, &s, err);
    if (s != MW_OK) goto out;
    free(it);
    it = NULL;
    if ((s = measure(&asrc, p0, b, o->allow_requantize, true, &it, &n, err)) != MW_OK) goto out;
    r->probe_rank_corr = NAN;
    for (uint64_t k = 0; k < n; k++) it[k].probe_kld = -1, it[k].probe_scale = 1;
    if (b->probe && (s = probe_scale(p0, b, it, n, r, err)) != MW_OK) goto out;
    /* the method's gain on its types (quant_budget.method_gain), where the
     * items average at least QUANT_BUDGET_GAIN_MIN_BPW: below, the rounding
     * loss understates the damage of the 1-2 bit types the gain would push
     * the other tensors into (on calib.txt at 2.5 bpw: KLD 0.0216 without
     * the gain, 0.0266 with it; at 3.36 and 4.15 bpw it helps) */
    if (b->method_type && b->method_gain > 0 && b->method_gain < 1) {
        uint64_t nel = 0;
        for (uint64_t k = 0; k < n; k++) {
            const uint64_t *ne = it[k].t->ne;
            nel += ne[0] * ne[1] * ne[2] * ne[3];
        }
        if (nel && (double)target * 8.0 / (double)nel >= QUANT_BUDGET_GAIN_MIN_BPW)
            for (uint64_t k = 0; k < n; k++) {
                bool skip = false;
                for (const char *const *m = b->method_skip; m && *m && !skip; m++)
                    skip = strcmp(*m, it[k].t->name) == 0;
                for (uint32_t j = 0; j < it[k].n_cand && !skip; j++)
                    if (b->method_type[it[k].cand[j].type]) it[k].cand[j].loss *= b->method_gain;
            }
    }
    for (uint64_t k = 0; k < n; k++)
        ai[k] = (struct quant_alloc_item){.n_cand = it[k].n_cand, .cand = it[k].cand};
    uint64_t fs = 0;
    for (int iter = 0; iter < 8; iter++) {
        if ((s = quant_alloc_solve(ai, n, target, choice, &r->solve, err)) != MW_OK) {
            if (s == MW_E_VALUE) {
                char msg[sizeof err->msg];
                snprintf(msg, sizeof msg, "%s", err->msg);
                mw_err_clear(err);
                s = REFUSE(r, "budget too small: %s", msg);
            }
            goto out;
        }
        if ((s = apply(&asrc, &lo, o->rules.overrides, it, n, choice, r, &p1, err)) != MW_OK)
            goto out;
        if ((s = quant_plan_file_size(p1, &fs, err)) != MW_OK) goto out;
        if (b->kind == QUANT_BUDGET_BPW || fs <= b->file_bytes) break;
        const uint64_t over = fs - b->file_bytes;
        if (target < over + min_items) {
            s = REFUSE(r, "budget too small for this model's header");
            goto out;
        }
        target -= over;
    }
    if (b->kind != QUANT_BUDGET_BPW && fs > b->file_bytes) {
        s = MW_FAIL(err, MW_E_VALUE, MW_ERR_OFF_NONE, "could not fit %llu bytes (predicted %llu)",
                    (unsigned long long)b->file_bytes, (unsigned long long)fs);
        goto out;
    }
    if (!(r->rows = calloc((size_t)n, sizeof *r->rows))) {
        s = MW_FAIL(err, MW_E_NOMEM, MW_ERR_OFF_NONE, "out of memory");
        goto out;
    }
    for (uint64_t k = 0; k < n; k++) {
        const struct quant_alloc_cand *c = &it[k].cand[choice[k]];
        struct quant_budget_row *w = &r->rows[k];
        *w = (struct quant_budget_row){
            .t = it[k].t, .type = c->type, .bytes = c->bytes, .loss = c->loss, .loss_q8_0 = -1,
            .probe_type = it[k].probe_type, .probe_kld = it[k].probe_kld,
            .probe_scale = it[k].probe_scale};
        for (uint32_t j = 0; j < it[k].n_cand; j++)
            if (it[k].cand[j].type == GGUF_TYPE_Q8_0) w->loss_q8_0 = it[k].cand[j].loss;
    }
    r->n_rows = n;
    r->file_bytes = fs;
    r->data_bytes = quant_plan_out_bytes(p1);
out:
    if (s != MW_OK) {
        const bool refused = r->refused;
        quant_budget_result_free(r);
        r->refused = refused;
    }
    quant_plan_free(p0);
    quant_plan_free(p1);
    free(it);
    free(ai);
    free(choice);
    free(wm);
    free(wp);
    free(pk);
    return s;
}

void quant_budget_result_free(struct quant_budget_result *r)
{
    if (!r) return;
    quant_overrides_free(r->overrides);
    free(r->rows);
    memset(r, 0, sizeof *r);
}
