/*
 * tools/cmd_quant_print.c — the tables `memwall quant` prints
 * (cmd_quant.h): the --dry-run plan on stdout, a budget's allocation on
 * stderr.
 */
#include <stdio.h>

#include "tools/cmd.h"
#include "tools/cmd_quant.h"

static const char *tname(uint32_t t)
{
    const struct gguf_type_info *ti = gguf_type_get(t);
    return ti && ti->name ? ti->name : "?";
}

void cmd_quant_print_plan(const struct quant_plan *p)
{
    printf("%5s  %-36s %-24s %-6s %-6s %-8s %s\n", "#", "name", "shape", "from", "to", "why",
           "imatrix");
    for (uint64_t i = 0; i < quant_plan_count(p); i++) {
        const struct quant_plan_entry *e = quant_plan_get(p, i);
        char shape[64];
        const uint64_t *ne = e->src->ne;
        int k = snprintf(shape, sizeof shape, "%llu", (unsigned long long)ne[0]);
        for (uint32_t d = 1; d < e->src->n_dims && k > 0 && (size_t)k < sizeof shape; d++)
            k += snprintf(shape + k, sizeof shape - (size_t)k, "x%llu", (unsigned long long)ne[d]);
        char nm[256];
        printf("%5llu  %-36s %-24s %-6s %-6s %-8s %s\n", (unsigned long long)i,
               cmd_text(e->src->name, nm, sizeof nm), shape,
               tname(e->src->type), tname(e->choice.type),
               quant_choice_reason_name(&e->choice), e->imatrix ? "yes" : "-");
    }
    const uint64_t ne = quant_plan_n_elements(p);
    printf("tensor data: %llu -> %llu bytes (%.2f bpw)\n",
           (unsigned long long)quant_plan_src_bytes(p), (unsigned long long)quant_plan_out_bytes(p),
           ne ? (double)quant_plan_out_bytes(p) * 8.0 / (double)ne : 0.0);
}

void cmd_quant_mix(const struct quant_plan *p, const char *budget, char *buf, size_t cap)
{
    uint64_t count[GGUF_TYPE_COUNT] = {0};
    for (uint64_t i = 0; i < quant_plan_count(p); i++) {
        const uint32_t t = quant_plan_get(p, i)->choice.type;
        if (t < GGUF_TYPE_COUNT) count[t]++;
    }
    size_t o = 0;
    o += (size_t)snprintf(buf, cap, "mix for %s:", budget);
    for (;;) { /* most tensors first; equal counts by type id */
        uint32_t best = GGUF_TYPE_COUNT;
        for (uint32_t t = 0; t < GGUF_TYPE_COUNT; t++)
            if (count[t] && (best == GGUF_TYPE_COUNT || count[t] > count[best])) best = t;
        if (best == GGUF_TYPE_COUNT || o >= cap) break;
        char up[16];
        size_t k = 0;
        for (const char *c = tname(best); *c && k + 1 < sizeof up; c++)
            up[k++] = (char)(*c >= 'a' && *c <= 'z' ? *c - 'a' + 'A' : *c);
        up[k] = '\0';
        o += (size_t)snprintf(buf + o, cap - o, "%s %llu %s", buf[o - 1] != ':' ? "," : "",
                              (unsigned long long)count[best], up);
        count[best] = 0;
    }
    const uint32_t ft = quant_plan_file_type(p);
    const char *fn = quant_file_type_name(ft);
    if (o < cap) {
        if (fn) snprintf(buf + o, cap - o, "; file type %s", fn);
        else snprintf(buf + o, cap - o, "; file type %u", ft);
    }
}

void cmd_quant_print_alloc(const struct alloc_req *rq, const struct quant_budget_result *r)
{
    fprintf(stderr, "memwall quant: mixed precision, budget %s: %llu tensors allocated "
                    "(%s solver, DP unit %llu bytes)\n",
            rq->budget, (unsigned long long)r->n_rows, r->solve.dp_exact ? "exact" : "rounded",
            (unsigned long long)r->solve.unit);
    const bool pr = r->n_probed > 0;
    fprintf(stderr, "  %-32s %-12s %-7s %10s %12s %12s%s\n", "tensor", "shape", "type", "bytes",
            "est. loss", "loss@Q8_0", pr ? "  probe    probe KLD    factor" : "");
    for (uint64_t k = 0; k < r->n_rows; k++) {
        const struct quant_budget_row *w = &r->rows[k];
        char nm[64], shape[48];
        snprintf(shape, sizeof shape, "%llux%llu", (unsigned long long)w->t->ne[0],
                 (unsigned long long)(w->t->ne[1] * w->t->ne[2] * w->t->ne[3]));
        fprintf(stderr, "  %-32s %-12s %-7s %10llu %12.4e %12.4e", cmd_text(w->t->name, nm, 33),
                shape, tname(w->type), (unsigned long long)w->bytes, w->loss, w->loss_q8_0);
        if (pr && w->probe_kld >= 0)
            fprintf(stderr, "  %-7s %10.3e %9.3e", tname(w->probe_type), w->probe_kld,
                    w->probe_scale);
        else if (pr)
            fprintf(stderr, "  %-7s %10s %9.3e", "-", "-", w->probe_scale);
        fputc('\n', stderr);
    }
    if (!pr && r->probe_asked)
        fprintf(stderr, "memwall quant: losses not scaled: no probe could be measured (model "
                        "without output matrix, or over the probes' memory bound)\n");
    if (pr)
        fprintf(stderr,
                "memwall quant: losses scaled to the output KL divergence of %llu probes "
                "(rank correlation of the unscaled losses with it: %.3f)\n",
                (unsigned long long)r->n_probed, r->probe_rank_corr);
    fprintf(stderr,
            "memwall quant: predicted file %llu bytes, tensor data %llu bytes (%.4f bpw), "
            "estimated loss %.6e\n",
            (unsigned long long)r->file_bytes, (unsigned long long)r->data_bytes,
            (double)r->data_bytes * 8.0 / (double)r->n_elements, r->solve.loss);
}
