/*
 * tools/report_html_sections.c — the report page's later sections
 * (report_html.c writes the first ones): calibration (method per tensor
 * kind, samples, fallbacks, from memwall.quant.method / method_params /
 * command), the memory plan (KV and overhead per context, which device
 * tiers fit), and quality (perplexity, KL divergence, top-1 agreement, a
 * size-vs-KLD plot of every file measured, files not made by memwall
 * marked).
 */
#define _POSIX_C_SOURCE 200809L
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tools/report.h"

#define H report_buf_html
#define P report_buf_printf

static void mib(char *buf, size_t cap, uint64_t b)
{
    if (b >= (uint64_t)1 << 30) snprintf(buf, cap, "%.2f GiB", (double)b / 1073741824.0);
    else snprintf(buf, cap, "%.2f MiB", (double)b / 1048576.0);
}

/* The value of option opt in a recorded command line ("--corpus F"), or NULL. */
static const char *cmd_opt(const char *cmdline, const char *opt, char *buf, size_t cap)
{
    const char *p = cmdline;
    const size_t ol = strlen(opt);
    while (p && (p = strstr(p, opt)) != NULL) {
        if ((p == cmdline || p[-1] == ' ') && (p[ol] == ' ' || p[ol] == '=')) {
            const char *v = p + ol + 1;
            size_t n = v[0] == '\'' ? strcspn(v + 1, "'") + 2 : strcspn(v, " ");
            if (n >= cap) n = cap - 1;
            memcpy(buf, v, n);
            buf[n] = '\0';
            return buf;
        }
        p += ol;
    }
    return NULL;
}

static void param_row(struct report_buf *b, const struct report_file *rf, const char *key,
                      const char *label)
{
    char v[160];
    if (!report_param(rf, key, v, sizeof v)) return;
    P(b, "<dt>%s</dt><dd data-param=\"%s\">", label, key);
    H(b, v);
    P(b, "</dd>\n");
}

static void imatrix_keys(struct report_buf *b, const struct report_file *rf)
{
    if (!rf->im_file && !rf->imatrix_xxh3) return;
    P(b, "<h3>Importance matrix</h3>\n<dl class=\"kv\" id=\"imatrix\">\n");
    if (rf->im_file) {
        P(b, "<dt>file</dt><dd>");
        H(b, rf->im_file);
        P(b, "</dd>\n");
    }
    if (rf->im_dataset) {
        P(b, "<dt>dataset</dt><dd>");
        H(b, rf->im_dataset);
        P(b, "</dd>\n");
    }
    if (rf->im_chunks) P(b, "<dt>chunks</dt><dd>%u</dd>\n", rf->im_chunks);
    if (rf->imatrix_xxh3) {
        P(b, "<dt>xxh3</dt><dd>");
        H(b, rf->imatrix_xxh3);
        P(b, "</dd>\n");
    }
    P(b, "</dl>\n");
}

/* The method per tensor: each method with its tensor count, then the
 * tensors that fell back to importance-weighted rounding. */
static void method_table(struct report_buf *b, const struct report_file *rf)
{
    const char *seen[16];
    uint32_t count[16], n_seen = 0, n_fb = 0;
    for (uint64_t i = 0; i < rf->n_tensors; i++) {
        bool fb;
        const char *m = report_tensor_method(rf, &rf->t[i], &fb);
        if (!m) continue;
        n_fb += fb;
        uint32_t j = 0;
        while (j < n_seen && strcmp(seen[j], m) != 0) j++;
        if (j == n_seen && n_seen < 16) seen[n_seen] = m, count[n_seen++] = 0;
        if (j < n_seen) count[j]++;
    }
    P(b, "<div class=\"scroll\"><table id=\"methods\"><tr><th>method</th>"
         "<th class=\"n\">tensors</th></tr>\n");
    for (uint32_t j = 0; j < n_seen; j++) {
        P(b, "<tr><td>");
        H(b, seen[j]);
        P(b, "</td><td class=\"n\">%u</td></tr>\n", count[j]);
    }
    P(b, "</table></div>\n<p id=\"fallbacks\" data-count=\"%u\">GPTQ fallbacks (a type "
         "without a GPTQ grid, rounded with the calibration's importance instead; marked "
         "&#9650; in the type map): %u",
      n_fb, n_fb);
    for (uint64_t i = 0, k = 0; i < rf->n_tensors && n_fb; i++) {
        bool fb;
        report_tensor_method(rf, &rf->t[i], &fb);
        if (!fb) continue;
        P(b, "%s<code>", k++ ? ", " : ": ");
        H(b, rf->t[i].name);
        P(b, "</code>");
    }
    P(b, ".</p>\n<p class=\"note\">Learned rounding's own fallbacks (to the method before "
         "it) are counted over the file (fallback= above); experts with too few routed rows "
         "are rounded too (experts= above). A budget with --corpus (without --no-probes) "
         "also records the probes' KL divergence of each tensor (below).</p>\n");
}

/* The budget's probes (memwall.quant.probe_kld): each probed tensor's
 * output KL divergence alone at its probe type, largest first (at most 64). */
static void probe_table(struct report_buf *b, const struct report_file *rf)
{
    if (!rf->n_probed) return;
    uint64_t *ord = malloc(rf->n_probed * sizeof *ord);
    if (!ord) {
        b->oom = true;
        return;
    }
    uint32_t n = 0;
    for (uint64_t i = 0; i < rf->n_tensors; i++)
        if (rf->t[i].probe_kld >= 0) ord[n++] = i;
    for (uint32_t i = 1; i < n; i++) /* insertion sort, largest KLD first */
        for (uint32_t j = i; j > 0 && rf->t[ord[j - 1]].probe_kld < rf->t[ord[j]].probe_kld; j--) {
            const uint64_t x = ord[j];
            ord[j] = ord[j - 1];
            ord[j - 1] = x;
        }
    if (!n) {
        free(ord);
        return;
    }
    const double top = rf->t[ord[0]].probe_kld > 0 ? rf->t[ord[0]].probe_kld : 1;
    P(b, "<h3>Probes</h3>\n<p class=\"note\">The output KL divergence each tensor causes "
         "alone, quantized to its probe type, as the budget measured it (%u tensors; the "
         "largest %u):</p>\n<div class=\"scroll\"><table id=\"probes\"><tr><th>tensor</th>"
         "<th>type in file</th><th class=\"n\">probe KLD</th><th></th></tr>\n",
      n, n < 64 ? n : 64);
    for (uint32_t k = 0; k < n && k < 64; k++) {
        const struct report_tensor *t = &rf->t[ord[k]];
        char nm[32];
        P(b, "<tr data-tensor=\"");
        H(b, t->name);
        P(b, "\"><td>");
        H(b, t->name);
        P(b, "</td><td>%s</td><td class=\"n\" data-kld=\"%.6g\">%.6f</td><td><span class=\"bar\" "
             "style=\"width:%.1fpx\"></span></td></tr>\n",
          report_type_name(t->type, nm, sizeof nm), t->probe_kld, t->probe_kld,
          120.0 * t->probe_kld / top);
    }
    P(b, "</table></div>\n");
    free(ord);
}

void report_html_calib(struct report_buf *b, const struct report_file *rf)
{
    P(b, "<h2>Calibration</h2>\n");
    imatrix_keys(b, rf);
    if (!rf->method_params) {
        P(b, "<p class=\"note\" id=\"nocalib\">Not made with <code>--corpus</code>: no "
             "calibration-aware method recorded%s.</p>\n",
          rf->method ? "" : " (no memwall.quant.method)");
        return;
    }
    char v[512];
    P(b, "<dl class=\"kv\" id=\"calib\">\n<dt>method</dt><dd>");
    H(b, rf->method ? rf->method : "?");
    P(b, "</dd>\n");
    if (rf->command && cmd_opt(rf->command, "--corpus", v, sizeof v)) {
        P(b, "<dt>corpus</dt><dd id=\"corpus\">");
        H(b, v);
        P(b, "</dd>\n");
    }
    param_row(b, rf, "samples", "samples");
    param_row(b, rf, "seq_len", "tokens per sample");
    param_row(b, rf, "damp", "GPTQ damping");
    param_row(b, rf, "act_order", "GPTQ act order");
    param_row(b, rf, "round", "learned rounding");
    param_row(b, rf, "fallback", "learned rounding fell back (tensors)");
    param_row(b, rf, "awq", "AWQ folds");
    param_row(b, rf, "experts", "expert matrices by path");
    P(b, "<dt>parameters</dt><dd><code>");
    H(b, rf->method_params);
    P(b, "</code></dd>\n</dl>\n");
    method_table(b, rf);
    probe_table(b, rf);
}

static void plan_table(struct report_buf *b, const struct report_plan *pl)
{
    char w[32], k16[32], k8[32], ov[32], tot[32];
    mib(w, sizeof w, pl->weight_bytes);
    P(b, "<p>Weights, mapped and resident: %s. KV cache and the runtime's overhead (scratch, "
         "f32 norms, a 64 MiB base) by context:</p>\n", w);
    P(b, "<div class=\"scroll\"><table id=\"kvtable\"><tr><th class=\"n\">context</th>"
         "<th class=\"n\">KV f16</th><th class=\"n\">KV q8_0</th><th class=\"n\">overhead</th>"
         "<th class=\"n\">resident (f16 KV)</th></tr>\n");
    for (int c = 0; c < REPORT_N_CTX; c++) {
        mib(k16, sizeof k16, pl->kv_f16[c]);
        mib(k8, sizeof k8, pl->kv_q8[c]);
        mib(ov, sizeof ov, pl->overhead[c]);
        mib(tot, sizeof tot, pl->weight_bytes + pl->kv_f16[c] + pl->overhead[c]);
        P(b, "<tr data-ctx=\"%u\"><td class=\"n\">%u%s</td><td class=\"n\">%s</td>"
             "<td class=\"n\">%s</td><td class=\"n\">%s</td><td class=\"n\">%s</td></tr>\n",
          pl->ctx[c], pl->ctx[c], pl->ctx[c] > pl->n_ctx_train ? "*" : "", k16,
          pl->kv_q8[c] ? k8 : "-", ov, tot);
    }
    P(b, "</table></div>\n");
    if (pl->ctx[0] > pl->n_ctx_train || pl->ctx[REPORT_N_CTX - 1] > pl->n_ctx_train)
        P(b, "<p class=\"note\">* beyond the training context (%u).</p>\n", pl->n_ctx_train);
}

void report_html_plan(struct report_buf *b, const struct report_file *rf)
{
    const struct report_plan *pl = &rf->plan;
    P(b, "<h2>Memory plan</h2>\n");
    if (!pl->has) {
        P(b, "<p class=\"note\" id=\"noplan\">No plan: the runtime cannot read this model (");
        H(b, pl->why);
        P(b, ").</p>\n");
        return;
    }
    plan_table(b, pl);
    P(b, "<p>Which devices it fits (an app gets 65%% of the device's RAM, as in "
         "<code>memwall plan</code>): ✓ with an f16 KV cache, q8 only with a q8_0 one, "
         "✗ neither.</p>\n<div class=\"scroll\"><table id=\"fits\"><tr><th class=\"n\">"
         "context</th>");
    for (int t = 0; t < REPORT_N_TIERS; t++)
        P(b, "<th class=\"n\">%llu GiB</th>", (unsigned long long)(pl->tiers[t] >> 30));
    P(b, "</tr>\n");
    for (int c = 0; c < REPORT_N_CTX; c++) {
        P(b, "<tr><td class=\"n\">%u</td>", pl->ctx[c]);
        for (int t = 0; t < REPORT_N_TIERS; t++) {
            const bool f = pl->fits[c][t], q = pl->fits_q8[c][t];
            P(b, "<td class=\"n %s\" data-fit=\"%s\">%s</td>", f ? "yes" : q ? "q8" : "no",
              f ? "f16" : q ? "q8_0" : "no", f ? "✓" : q ? "q8" : "✗");
        }
        P(b, "</tr>\n");
    }
    P(b, "</table></div>\n");
}

static const char *base_name(const char *p)
{
    const char *s = strrchr(p, '/');
    return s ? s + 1 : p;
}

/* The size-vs-KLD plot: x bits per weight, y KLD on a log scale. */
static void plot(struct report_buf *b, const struct report_file *f, size_t n)
{
    double xmin = 1e9, xmax = 0, ymin = 1e9, ymax = 0;
    size_t m = 0;
    for (size_t i = 0; i < n; i++) {
        if (!f[i].q.has || !(f[i].q.kld > 0)) continue; /* the reference itself: log 0 */
        const double x = report_bpw(&f[i]), y = f[i].q.kld;
        xmin = fmin(xmin, x), xmax = fmax(xmax, x), ymin = fmin(ymin, y), ymax = fmax(ymax, y);
        m++;
    }
    if (m < 2) return;
    xmin = floor(xmin - 0.25), xmax = ceil(xmax + 0.25);
    const double ly0 = floor(log10(ymin)), ly1 = fmax(ceil(log10(ymax)), ly0 + 1);
    const int w = 600, h = 300, x0 = 56, y0 = 10, pw = 520, ph = 250;
    P(b, "<svg id=\"sizekld\" viewBox=\"0 0 %d %d\" xmlns=\"http://www.w3.org/2000/svg\">\n", w,
      h + 20);
    for (double e = ly0; e <= ly1 + 1e-9; e += 1) {
        const double yy = y0 + ph - ph * (e - ly0) / (ly1 - ly0);
        P(b, "<line x1=\"%d\" x2=\"%d\" y1=\"%.1f\" y2=\"%.1f\" stroke=\"#eee\"/><text x=\"%d\" "
             "y=\"%.1f\" font-size=\"10\" text-anchor=\"end\">1e%d</text>\n",
          x0, x0 + pw, yy, yy, x0 - 4, yy + 3, (int)e);
    }
    for (double x = xmin; x <= xmax + 1e-9; x += 1) {
        const double xx = x0 + pw * (x - xmin) / (xmax - xmin);
        P(b, "<line x1=\"%.1f\" x2=\"%.1f\" y1=\"%d\" y2=\"%d\" stroke=\"#eee\"/><text x=\"%.1f\" "
             "y=\"%d\" font-size=\"10\" text-anchor=\"middle\">%g</text>\n",
          xx, xx, y0, y0 + ph, xx, y0 + ph + 14, x);
    }
    for (size_t i = 0; i < n; i++) {
        if (!f[i].q.has || !(f[i].q.kld > 0)) continue;
        const double y = f[i].q.kld;
        const double xx = x0 + pw * (report_bpw(&f[i]) - xmin) / (xmax - xmin);
        const double yy = y0 + ph - ph * (log10(y) - ly0) / (ly1 - ly0);
        if (f[i].memwall)
            P(b, "<circle class=\"pt memwall\" cx=\"%.1f\" cy=\"%.1f\" r=\"5\" fill=\"#2a6fd6\">",
              xx, yy);
        else
            P(b, "<rect class=\"pt other\" x=\"%.1f\" y=\"%.1f\" width=\"10\" height=\"10\" "
                 "fill=\"#e07b00\">", xx - 5, yy - 5);
        P(b, "<title>");
        H(b, base_name(f[i].path));
        const bool right = xx > x0 + pw * 0.75; /* the label left of the point */
        P(b, ": %.3f bpw, KLD %.6f</title></%s>\n<text x=\"%.1f\" y=\"%.1f\" font-size=\"9\" "
             "text-anchor=\"%s\">",
          report_bpw(&f[i]), f[i].q.kld, f[i].memwall ? "circle" : "rect",
          right ? xx - 7 : xx + 7, yy - 4, right ? "end" : "start");
        H(b, base_name(f[i].path));
        P(b, "</text>\n");
    }
    P(b, "<text x=\"%d\" y=\"%d\" font-size=\"11\" text-anchor=\"middle\">bits per weight</text>"
         "</svg>\n<p class=\"legend\"><span class=\"item\"><span class=\"sw\" "
         "style=\"background:#2a6fd6;border-radius:50%%\"></span>memwall</span><span "
         "class=\"item\"><span class=\"sw\" style=\"background:#e07b00\"></span>not memwall "
         "(llama.cpp)</span></p>\n",
      x0 + pw / 2, h + 16);
}

void report_html_quality(struct report_buf *b, const struct report_file *f, size_t n)
{
    if (!f[0].q.has) return;
    P(b, "<h2>Quality</h2>\n<p>Against the reference model on %u chunks (%llu tokens scored); "
         "reference perplexity %.4f.</p>\n",
      f[0].q.n_chunk, (unsigned long long)f[0].q.n_scored, f[0].q.ppl_base);
    P(b, "<div class=\"scroll\"><table id=\"quality\"><tr><th>file</th><th>made by</th>"
         "<th class=\"n\">bytes</th><th class=\"n\">bpw</th><th class=\"n\">perplexity</th>"
         "<th class=\"n\">ppl ratio</th><th class=\"n\">KLD</th><th class=\"n\">KLD max</th>"
         "<th class=\"n\">top-1</th></tr>\n");
    for (size_t i = 0; i < n; i++) {
        const struct report_quality *q = &f[i].q;
        if (!q->has) continue;
        P(b, "<tr data-file=\"");
        H(b, base_name(f[i].path));
        P(b, "\"><td>");
        H(b, base_name(f[i].path));
        P(b, "</td><td>%s</td><td class=\"n\">%llu</td><td class=\"n\">%.3f</td>"
             "<td class=\"n\">%.4f</td><td class=\"n\">%.4f</td><td class=\"n\" data-kld=\"%.6f\">"
             "%.6f</td><td class=\"n\">%.4f</td><td class=\"n\">%.2f%%</td></tr>\n",
          f[i].memwall ? "memwall" : "other", (unsigned long long)f[i].file_bytes,
          report_bpw(&f[i]), q->ppl, q->ppl_base > 0 ? q->ppl / q->ppl_base : 0.0, q->kld,
          q->kld, q->kld_max, 100.0 * q->top1);
    }
    P(b, "</table></div>\n<p class=\"note\">Size against KL divergence (files with a KLD of "
         "0, the reference itself, are not plotted):</p>\n");
    plot(b, f, n);
}
