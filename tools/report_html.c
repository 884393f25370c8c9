/*
 * tools/report_html.c — the report as one self-contained HTML page: inline
 * CSS and SVG, no script, nothing fetched. Sections: summary, type mix, the
 * layer x tensor-kind type map, bits per layer, bytes by tensor kind
 * against the budget, calibration (files made with --corpus), the memory
 * plan, and quality with a size-vs-KLD plot when measured. The page reflows
 * at phone width (viewport meta; tables scroll sideways inside their box;
 * the SVGs scale to the width). Cells carry data-* attributes (tensor,
 * type, kind) so that a browser test can find them in the DOM.
 */
#define _POSIX_C_SOURCE 200809L
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/mw_file.h"
#include "gguf/gguf.h"
#include "quant/quant.h"
#include "tools/report.h"

// --- the buffer ---

void report_buf_printf(struct report_buf *b, const char *fmt, ...)
{
    if (b->oom) return;
    for (;;) {
        va_list ap;
        va_start(ap, fmt);
        const int n = vsnprintf(b->p ? b->p + b->n : NULL, b->p ? b->cap - b->n : 0, fmt, ap);
        va_end(ap);
        if (n < 0) {
            b->oom = true;
            return;
        }
        if (b->p && b->n + (size_t)n < b->cap) {
            b->n += (size_t)n;
            return;
        }
        size_t cap = b->cap ? b->cap : 4096;
        while (cap < b->n + (size_t)n + 1) {
            if (cap > SIZE_MAX / 2) {
                b->oom = true;
                return;
            }
            cap *= 2;
        }
        char *p = realloc(b->p, cap);
        if (!p) {
            b->oom = true;
            return;
        }
        b->p = p;
        b->cap = cap;
    }
}

void report_buf_html(struct report_buf *b, const char *s)
{
    for (; s && *s; s++) {
        const unsigned char c = (unsigned char)*s;
        if (c == '&') report_buf_printf(b, "&amp;");
        else if (c == '<') report_buf_printf(b, "&lt;");
        else if (c == '>') report_buf_printf(b, "&gt;");
        else if (c == '"') report_buf_printf(b, "&quot;");
        else if (c == '\'') report_buf_printf(b, "&#39;");
        else if (c >= 0x20 && c != 0x7f) report_buf_printf(b, "%c", c);
    }
}

enum mw_status report_buf_write(struct report_buf *b, const char *path, struct mw_err *err)
{
    if (b->oom) return MW_FAIL(err, MW_E_NOMEM, MW_ERR_OFF_NONE, "out of memory");
    return mw_file_write_atomic(path, b->p ? b->p : "", b->n, err);
}

// --- helpers ---

#define H report_buf_html
#define P report_buf_printf

/* A type's colour: one per type, a spectrum in order of bits per weight
 * (dark red for the 1-bit i-quants through yellow and green to blue and
 * violet for Q8_0; pink for F16/BF16, grey for F32 and the rest). */
static const char *type_color(uint32_t type)
{
    static const char *const col[GGUF_TYPE_COUNT] = {
        [GGUF_TYPE_IQ1_S] = "#67001f",   [GGUF_TYPE_IQ1_M] = "#980043",
        [GGUF_TYPE_IQ2_XXS] = "#b2182b", [GGUF_TYPE_IQ2_XS] = "#d6604d",
        [GGUF_TYPE_IQ2_S] = "#f4a582",   [GGUF_TYPE_Q2_K] = "#fdae61",
        [GGUF_TYPE_IQ3_XXS] = "#fee090", [GGUF_TYPE_IQ3_S] = "#ffffbf",
        [GGUF_TYPE_Q3_K] = "#e6f598",    [GGUF_TYPE_IQ4_XS] = "#abdda4",
        [GGUF_TYPE_IQ4_NL] = "#78c679",  [GGUF_TYPE_Q4_0] = "#41ab5d",
        [GGUF_TYPE_Q4_K] = "#66c2a5",    [GGUF_TYPE_Q4_1] = "#238b45",
        [GGUF_TYPE_Q5_0] = "#9ecae1",    [GGUF_TYPE_Q5_K] = "#3288bd",
        [GGUF_TYPE_Q5_1] = "#2171b5",    [GGUF_TYPE_Q6_K] = "#5e4fa2",
        [GGUF_TYPE_Q8_0] = "#2d004b",    [GGUF_TYPE_F16] = "#c994c7",
        [GGUF_TYPE_BF16] = "#df65b0",    [GGUF_TYPE_F32] = "#bdbdbd",
    };
    return type < GGUF_TYPE_COUNT && col[type] ? col[type] : "#969696";
}

/* Black or white text on a fill "#rrggbb", whichever reads. */
static const char *text_on(const char *fill)
{
    const long v = strtol(fill + 1, NULL, 16);
    const double lum = 0.299 * (double)((v >> 16) & 255) + 0.587 * (double)((v >> 8) & 255) +
                       0.114 * (double)(v & 255);
    return lum < 110 ? "#fff" : "#000";
}

static void human(char *buf, size_t cap, uint64_t b)
{
    if (b >= (uint64_t)1 << 30) snprintf(buf, cap, "%.2f GiB", (double)b / 1073741824.0);
    else if (b >= (uint64_t)1 << 20) snprintf(buf, cap, "%.2f MiB", (double)b / 1048576.0);
    else snprintf(buf, cap, "%.1f KiB", (double)b / 1024.0);
}

static void head(struct report_buf *b, const struct report_file *rf)
{
    P(b, "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\n"
         "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n"
         "<title>memwall report: ");
    H(b, rf->path);
    P(b, "</title>\n<style>\n"
         "body{font-family:system-ui,-apple-system,'Segoe UI',Roboto,sans-serif;margin:0 auto;"
         "padding:12px;max-width:1100px;color:#1d1d1f;background:#fff;line-height:1.4}\n"
         "h1{font-size:1.35em;word-break:break-all}h2{font-size:1.1em;margin-top:1.6em;"
         "border-bottom:1px solid #ddd}\n"
         ".scroll{overflow-x:auto;max-width:100%%}\n"
         "table{border-collapse:collapse;font-size:.9em}td,th{padding:3px 8px;"
         "border-bottom:1px solid #eee;text-align:left;vertical-align:top}\n"
         "td.n,th.n{text-align:right;font-variant-numeric:tabular-nums}\n"
         "dl.kv{display:grid;grid-template-columns:max-content 1fr;gap:2px 12px;margin:0}\n"
         "dl.kv dt{color:#555}dl.kv dd{margin:0;word-break:break-word}\n"
         "code{font-size:.9em;background:#f4f4f6;padding:1px 4px;word-break:break-all}\n"
         "svg{width:100%%;height:auto;max-width:900px;display:block}svg.wide{min-width:520px}\n"
         ".sw{display:inline-block;width:.9em;height:.9em;border-radius:2px;"
         "vertical-align:-.1em;margin-right:4px}\n"
         ".legend span.item{display:inline-block;margin:0 10px 4px 0;white-space:nowrap}\n"
         ".bar{background:#6a8fd8;height:.8em;display:inline-block}\n"
         ".yes{background:#cdeccd}.q8{background:#fff1b8}.no{background:#f6d0d0}\n"
         ".note{color:#555;font-size:.9em}\n"
         "@media (max-width:600px){body{padding:8px}table{font-size:.8em}"
         "td,th{padding:2px 4px}dl.kv{grid-template-columns:1fr}dl.kv dt{font-weight:600}}\n"
         "</style></head>\n<body>\n");
}

static void kv_row(struct report_buf *b, const char *k, const char *v)
{
    P(b, "<dt>%s</dt><dd>", k);
    H(b, v);
    P(b, "</dd>\n");
}

static void summary(struct report_buf *b, const struct report_file *rf)
{
    char s[512], hb[32];
    P(b, "<h1>memwall report: ");
    H(b, rf->path);
    P(b, "</h1>\n<dl class=\"kv\" id=\"summary\">\n");
    if (rf->name) kv_row(b, "model", rf->name);
    if (rf->arch) kv_row(b, "architecture", rf->arch);
    human(hb, sizeof hb, rf->file_bytes);
    snprintf(s, sizeof s, "%llu bytes (%s)", (unsigned long long)rf->file_bytes, hb);
    kv_row(b, "file size", s);
    snprintf(s, sizeof s, "%llu bytes in %llu tensors, %.4g parameters",
             (unsigned long long)rf->data_bytes, (unsigned long long)rf->n_tensors,
             (double)rf->n_el);
    kv_row(b, "tensor data", s);
    P(b, "<dt>bits per weight</dt><dd id=\"bpw\">%.3f</dd>\n", report_bpw(rf));
    if (rf->has_file_type) {
        const char *ft = quant_file_type_name(rf->file_type);
        snprintf(s, sizeof s, "%u (%s)", rf->file_type, ft ? ft : "unknown");
        kv_row(b, "general.file_type", s);
    }
    if (rf->memwall) {
        snprintf(s, sizeof s, "memwall %s", rf->mw_version ? rf->mw_version : "(version unknown)");
        kv_row(b, "made by", s);
    } else {
        kv_row(b, "made by", "not memwall (no memwall.* keys): llama.cpp or another tool");
    }
    if (rf->preset) kv_row(b, rf->budget ? "preset (its rules unused by the budget)" : "preset",
                           rf->preset);
    if (rf->method) kv_row(b, "method", rf->method);
    if (rf->budget) {
        double bpw;
        uint64_t fb;
        report_budget(rf, s, sizeof s, &bpw, &fb);
        kv_row(b, "budget", s);
    }
    if (rf->pure) kv_row(b, "rules", "--pure");
    if (rf->n_overrides) {
        snprintf(s, sizeof s, "%u (memwall.quant.type_overrides)", rf->n_overrides);
        kv_row(b, "type overrides", s);
    }
    if (rf->command) {
        P(b, "<dt>command</dt><dd><code>");
        H(b, rf->command);
        P(b, "</code></dd>\n");
    }
    P(b, "</dl>\n");
}

static void type_mix(struct report_buf *b, const struct report_file *rf)
{
    P(b, "<h2>Type mix</h2>\n<div class=\"scroll\"><table id=\"types\"><tr><th>type</th>"
         "<th class=\"n\">bpw</th><th class=\"n\">tensors</th><th class=\"n\">bytes</th>"
         "<th class=\"n\">of data</th><th class=\"n\">of weights</th></tr>\n");
    uint32_t order[64];
    const uint32_t n_types = report_types(rf, order);
    for (uint32_t oi = 0; oi < n_types; oi++) {
        const uint32_t ty = order[oi];
        char nm[32];
        const char *col = type_color(ty);
        report_type_name(ty, nm, sizeof nm);
        P(b, "<tr data-type=\"%s\"><td><span class=\"sw\" style=\"background:%s\"></span>%s</td>"
             "<td class=\"n\">%.4g</td><td class=\"n\">%u</td><td class=\"n\">%llu</td>"
             "<td class=\"n\">%.1f%%</td><td class=\"n\">%.1f%%</td></tr>\n",
          nm, col, nm, report_type_bpw(ty), rf->type_count[ty],
          (unsigned long long)rf->type_bytes[ty],
          rf->data_bytes ? 100.0 * (double)rf->type_bytes[ty] / (double)rf->data_bytes : 0.0,
          rf->n_el ? 100.0 * (double)rf->type_el[ty] / (double)rf->n_el : 0.0);
    }
    P(b, "</table></div>\n");
}

// --- the type map ---

#define MAP_LABEL 74
#define MAP_COL 66
#define MAP_ROW 20

static void map_cell(struct report_buf *b, const struct report_file *rf,
                     const struct report_tensor *t, int x, int y, int w)
{
    bool fb;
    const char *m = report_tensor_method(rf, t, &fb);
    char nm[32];
    const char *col = type_color(t->type);
    report_type_name(t->type, nm, sizeof nm);
    P(b, "<g class=\"cell\" data-tensor=\"");
    H(b, t->name);
    P(b, "\" data-type=\"%s\"><rect x=\"%d\" y=\"%d\" width=\"%d\" height=\"%d\" fill=\"%s\" "
         "stroke=\"#fff\"><title>",
      nm, x, y, w, MAP_ROW - 1, col);
    H(b, t->name);
    P(b, ": %s, %.4g bpw, %llu bytes", nm, report_type_bpw(t->type),
      (unsigned long long)t->nbytes);
    if (m) {
        P(b, "; ");
        H(b, m);
    }
    if (t->probe_kld >= 0) P(b, "; probe KLD %.6f", t->probe_kld);
    P(b, "</title></rect><text x=\"%d\" y=\"%d\" "
         "font-size=\"10\" text-anchor=\"middle\" fill=\"%s\">%s</text>",
      x + w / 2, y + MAP_ROW - 6, text_on(col), nm);
    if (fb)
        P(b, "<path class=\"fallback\" d=\"M%d %dh7l-7 7z\" fill=\"%s\"/>", x + 1, y + 1,
          text_on(col));
    P(b, "</g>\n");
}

/* One row outside the layers (token_embd, output): its tensor spans every column. */
static int map_whole_row(struct report_buf *b, const struct report_file *rf, const char *name,
                         const char *label, int y, int width)
{
    for (uint64_t i = 0; i < rf->n_tensors; i++) {
        if (strcmp(rf->t[i].name, name) != 0) continue;
        P(b, "<text x=\"0\" y=\"%d\" font-size=\"11\">%s</text>\n", y + MAP_ROW - 6, label);
        map_cell(b, rf, &rf->t[i], MAP_LABEL, y, width);
        return y + MAP_ROW + 4;
    }
    return y;
}

/* Where a layer kind's column goes: attention, then the feed-forward
 * network, in the order a layer computes them; other kinds after them. */
static int kind_rank(const char *name)
{
    static const char *const order[] = {
        "attn_qkv.",      "attn_q.",        "attn_k.",        "attn_v.",       "attn_output.",
        "ffn_gate_inp.",  "ffn_gate.",      "ffn_up.",        "ffn_down.",     "ffn_gate_exps.",
        "ffn_up_exps.",   "ffn_down_exps.", "ffn_gate_shexp.", "ffn_up_shexp.", "ffn_down_shexp.",
    };
    for (int i = 0; i < (int)(sizeof order / sizeof order[0]); i++)
        if (strncmp(name, order[i], strlen(order[i])) == 0) return i;
    return 100;
}

/* col[k]: the map column of kind k (-1: not a layer matrix); returns the count. */
static int map_columns(const struct report_file *rf, int col[REPORT_MAX_KINDS])
{
    int n_col = 0;
    for (int r = 0; r <= 100; r++)
        for (uint32_t k = 0; k < rf->n_kinds; k++) {
            if (r == 0) col[k] = -1;
            if (rf->kinds[k].in_layers && rf->kinds[k].weight && kind_rank(rf->kinds[k].name) == r)
                col[k] = n_col++;
        }
    return n_col;
}

static void type_map(struct report_buf *b, const struct report_file *rf)
{
    int col[REPORT_MAX_KINDS];
    const int n_col = map_columns(rf, col);
    const int width = (n_col ? n_col : 1) * MAP_COL;
    const int height = 30 + (int)(rf->n_layer + 2) * MAP_ROW + 12;
    P(b, "<h2>Type map</h2>\n<p class=\"note\">Each weight matrix, by layer and kind, coloured "
         "by its type: one colour per type, from dark red (fewest bits per weight) through "
         "yellow and green to blue and violet (most); hover a cell for its name and size.</p>\n");
    P(b, "<div class=\"scroll\"><svg id=\"typemap\" class=\"wide\" viewBox=\"0 0 %d %d\" xmlns=\"http://www.w3.org/2000/svg\" "
         "role=\"img\" aria-label=\"type map\">\n",
      MAP_LABEL + width + 2, height);
    for (uint32_t k = 0; k < rf->n_kinds; k++) {
        if (col[k] < 0) continue;
        char nm[48];
        snprintf(nm, sizeof nm, "%s", rf->kinds[k].name);
        char *dot = strstr(nm, ".weight");
        if (dot) *dot = '\0';
        P(b, "<text x=\"%d\" y=\"20\" font-size=\"10\" text-anchor=\"middle\">",
          MAP_LABEL + col[k] * MAP_COL + MAP_COL / 2);
        H(b, nm);
        P(b, "</text>\n");
    }
    int y = map_whole_row(b, rf, "token_embd.weight", "embedding", 28, width);
    for (uint32_t l = 0; l < rf->n_layer; l++) {
        P(b, "<text x=\"0\" y=\"%d\" font-size=\"11\">layer %u</text>\n", y + MAP_ROW - 6, l);
        for (uint64_t i = 0; i < rf->n_tensors; i++) {
            const struct report_tensor *t = &rf->t[i];
            if (t->layer == (int)l && col[t->kind] >= 0)
                map_cell(b, rf, t, MAP_LABEL + col[t->kind] * MAP_COL, y, MAP_COL);
        }
        y += MAP_ROW;
    }
    map_whole_row(b, rf, "output.weight", "output", y + 4, width);
    P(b, "</svg></div>\n<p class=\"legend\">");
    uint32_t order[64];
    const uint32_t n_types = report_types(rf, order);
    for (uint32_t oi = 0; oi < n_types; oi++) {
        const uint32_t ty = order[oi];
        char nm[32];
        const char *c = type_color(ty);
        P(b, "<span class=\"item\"><span class=\"sw\" style=\"background:%s\"></span>%s "
             "(%.3g bpw)</span>",
          c, report_type_name(ty, nm, sizeof nm), report_type_bpw(ty));
    }
    P(b, "</p>\n");
}

// --- bits per layer, bytes per kind ---

static void layer_bits(struct report_buf *b, const struct report_file *rf)
{
    if (!rf->n_layer) return;
    double bits[512 + 1];
    const uint32_t nl = rf->n_layer > 512 ? 512 : rf->n_layer;
    double maxb = 0;
    for (uint32_t l = 0; l < nl; l++) {
        uint64_t by = 0, el = 0;
        for (uint64_t i = 0; i < rf->n_tensors; i++)
            if (rf->t[i].layer == (int)l && rf->kinds[rf->t[i].kind].weight)
                by += rf->t[i].nbytes, el += rf->t[i].n_el;
        bits[l] = el ? (double)by * 8.0 / (double)el : 0;
        if (bits[l] > maxb) maxb = bits[l];
    }
    double bud_bpw;
    uint64_t bud_bytes;
    char words[256];
    report_budget(rf, words, sizeof words, &bud_bpw, &bud_bytes);
    const double file_bpw = report_bpw(rf);
    if (bud_bpw > maxb) maxb = bud_bpw;
    if (file_bpw > maxb) maxb = file_bpw;
    const double top = ceil(maxb + 0.5);
    const int w = 600, h = 200, x0 = 36, y0 = 10, ph = 160;
    const double bw = (double)(w - x0 - 10) / nl;
    P(b, "<h2>Bits per layer</h2>\n<p class=\"note\">Bits per weight of each layer's matrices; "
         "dashed: the whole file's %.3f bpw%s.</p>\n",
      file_bpw, bud_bpw > 0 ? "; red: the --bpw budget" : "");
    P(b, "<svg id=\"layerbits\" viewBox=\"0 0 %d %d\" xmlns=\"http://www.w3.org/2000/svg\">\n",
      w, h + 16);
    for (int g = 0; g <= (int)top; g += top > 8 ? 2 : 1) {
        const double yy = y0 + ph - ph * g / top;
        P(b, "<line x1=\"%d\" x2=\"%d\" y1=\"%.1f\" y2=\"%.1f\" stroke=\"#eee\"/>"
             "<text x=\"%d\" y=\"%.1f\" font-size=\"10\" text-anchor=\"end\">%d</text>\n",
          x0, w - 10, yy, yy, x0 - 4, yy + 3, g);
    }
    for (uint32_t l = 0; l < nl; l++) {
        const double bh = ph * bits[l] / top;
        P(b, "<rect class=\"lbar\" data-layer=\"%u\" data-bpw=\"%.4f\" x=\"%.1f\" y=\"%.1f\" "
             "width=\"%.1f\" height=\"%.1f\" fill=\"#6a8fd8\"><title>layer %u: %.3f bpw"
             "</title></rect>\n",
          l, bits[l], x0 + l * bw + bw * 0.1, y0 + ph - bh, bw * 0.8, bh, l, bits[l]);
        if (nl <= 40 || l % 8 == 0)
            P(b, "<text x=\"%.1f\" y=\"%d\" font-size=\"9\" text-anchor=\"middle\">%u</text>\n",
              x0 + l * bw + bw / 2, y0 + ph + 12, l);
    }
    const double fy = y0 + ph - ph * file_bpw / top;
    P(b, "<line x1=\"%d\" x2=\"%d\" y1=\"%.1f\" y2=\"%.1f\" stroke=\"#333\" "
         "stroke-dasharray=\"4 3\"/>\n", x0, w - 10, fy, fy);
    if (bud_bpw > 0) {
        const double by = y0 + ph - ph * bud_bpw / top;
        P(b, "<line id=\"budgetline\" x1=\"%d\" x2=\"%d\" y1=\"%.1f\" y2=\"%.1f\" "
             "stroke=\"#d33\" stroke-width=\"2\"/>\n", x0, w - 10, by, by);
    }
    P(b, "<text x=\"%d\" y=\"%d\" font-size=\"10\" text-anchor=\"middle\">layer</text></svg>\n",
      w / 2, h + 12);
}

static void kind_bytes(struct report_buf *b, const struct report_file *rf)
{
    double bud_bpw;
    uint64_t bud_bytes;
    char words[256];
    report_budget(rf, words, sizeof words, &bud_bpw, &bud_bytes);
    P(b, "<h2>Bytes by tensor kind</h2>\n");
    if (rf->budget) {
        P(b, "<p id=\"budget\">Budget asked: ");
        H(b, words);
        if (bud_bytes)
            P(b, ". The file: %llu bytes, %.2f%% of it.", (unsigned long long)rf->file_bytes,
              100.0 * (double)rf->file_bytes / (double)bud_bytes);
        else if (bud_bpw > 0)
            P(b, ". The file: %.3f bpw of tensor data.", report_bpw(rf));
        P(b, "</p>\n");
    } else {
        P(b, "<p class=\"note\">No budget recorded (a preset, or not made by memwall).</p>\n");
    }
    P(b, "<div class=\"scroll\"><table id=\"kinds\"><tr><th>kind</th><th class=\"n\">tensors</th>"
         "<th class=\"n\">bytes</th><th class=\"n\">bpw</th><th class=\"n\">share</th><th></th>"
         "</tr>\n");
    for (uint32_t k = 0; k < rf->n_kinds; k++) {
        const struct report_kind *kd = &rf->kinds[k];
        const double sh = rf->data_bytes ? 100.0 * (double)kd->bytes / (double)rf->data_bytes : 0;
        P(b, "<tr data-kind=\"");
        H(b, kd->name);
        P(b, "\"><td>%s", kd->in_layers ? "blk.*." : "");
        H(b, kd->name);
        P(b, "</td><td class=\"n\">%u</td><td class=\"n\">%llu</td><td class=\"n\">%.3f</td>"
             "<td class=\"n\">%.1f%%</td><td><span class=\"bar\" style=\"width:%.1fpx\"></span>"
             "</td></tr>\n",
          kd->n_tensors, (unsigned long long)kd->bytes,
          kd->n_el ? (double)kd->bytes * 8.0 / (double)kd->n_el : 0.0, sh, sh * 1.5);
    }
    P(b, "</table></div>\n");
}

void report_html(struct report_buf *b, const struct report_file *files, size_t n)
{
    const struct report_file *rf = &files[0];
    head(b, rf);
    summary(b, rf);
    type_mix(b, rf);
    type_map(b, rf);
    layer_bits(b, rf);
    kind_bytes(b, rf);
    report_html_calib(b, rf);
    report_html_plan(b, rf);
    report_html_quality(b, files, n);
    P(b, "<p class=\"note\">Made by <code>memwall report</code> from the file's own tensor table "
         "and keys.</p>\n</body></html>\n");
}
