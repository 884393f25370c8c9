/*
 * tools/report_card.c — a Hugging Face model card (README.md) for a
 * quantized GGUF file: YAML front matter (base_model, tags, quantized_by,
 * license), then the file's size, bits per weight, type mix, quality when
 * measured, and the command that made it. Also the source checkpoint's
 * license (its README.md front matter or config.json).
 */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "quant/quant.h"
#include "tools/report.h"

#define P report_buf_printf

/* YAML: a plain scalar when s is simple, else a double-quoted one. */
static void yaml_str(struct report_buf *b, const char *s)
{
    bool plain = s[0] && strchr("-?:,[]{}#&*!|>'\"%@` ", s[0]) == NULL;
    for (const char *p = s; *p && plain; p++)
        plain = (unsigned char)*p >= 0x20 && *p != ':' && *p != '#' && *p != '"' && *p != '\\';
    if (plain) {
        P(b, "%s", s);
        return;
    }
    P(b, "\"");
    for (const char *p = s; *p; p++) {
        if (*p == '"' || *p == '\\') P(b, "\\%c", *p);
        else if ((unsigned char)*p >= 0x20) P(b, "%c", *p);
    }
    P(b, "\"");
}

/* Markdown table cell text: no pipes or newlines. */
static void md(struct report_buf *b, const char *s)
{
    for (; *s; s++) {
        if (*s == '|') P(b, "\\|");
        else if ((unsigned char)*s >= 0x20) P(b, "%c", *s);
    }
}

static const char *base_name(const char *p)
{
    const char *s = strrchr(p, '/');
    return s ? s + 1 : p;
}

static void front_matter(struct report_buf *b, const struct report_file *rf, const char *license)
{
    P(b, "---\n");
    if (rf->base_model) {
        char bm[512];
        snprintf(bm, sizeof bm, "%s%s%s", rf->base_model_org ? rf->base_model_org : "",
                 rf->base_model_org ? "/" : "", rf->base_model);
        P(b, "base_model: ");
        yaml_str(b, bm);
        P(b, "\n");
    } else if (rf->name || rf->basename) {
        P(b, "base_model: ");
        yaml_str(b, rf->name ? rf->name : rf->basename);
        P(b, "\n");
    }
    P(b, "tags:\n- gguf\n- quantized\n");
    if (rf->memwall) P(b, "- memwall\n");
    if (rf->arch) {
        P(b, "- ");
        yaml_str(b, rf->arch);
        P(b, "\n");
    }
    if (rf->memwall) P(b, "quantized_by: memwall\n");
    const char *lic = license ? license : rf->license;
    if (lic) {
        P(b, "license: ");
        yaml_str(b, lic);
        P(b, "\n");
    }
    P(b, "---\n\n");
}

static void facts(struct report_buf *b, const struct report_file *rf)
{
    P(b, "| | |\n|---|---|\n| file | `");
    md(b, base_name(rf->path));
    P(b, "` |\n| size | %llu bytes (%.2f MiB) |\n| bits per weight | %.3f |\n",
      (unsigned long long)rf->file_bytes, (double)rf->file_bytes / 1048576.0, report_bpw(rf));
    if (rf->arch) {
        P(b, "| architecture | ");
        md(b, rf->arch);
        P(b, " |\n");
    }
    if (rf->has_file_type) {
        const char *ft = quant_file_type_name(rf->file_type);
        P(b, "| file type | %s (general.file_type %u) |\n", ft ? ft : "unknown", rf->file_type);
    }
    if (rf->preset && !rf->budget) {
        P(b, "| preset | ");
        md(b, rf->preset);
        P(b, " |\n");
    }
    if (rf->method) {
        P(b, "| method | ");
        md(b, rf->method);
        if (rf->method_params) {
            P(b, " (");
            md(b, rf->method_params);
            P(b, ")");
        }
        P(b, " |\n");
    }
    if (rf->budget) {
        char w[256];
        double bpw;
        uint64_t fb;
        report_budget(rf, w, sizeof w, &bpw, &fb);
        P(b, "| budget | ");
        md(b, w);
        P(b, " |\n");
    }
    P(b, "| made by | %s |\n\n", rf->memwall ? "memwall" : "another tool (no memwall.* keys)");
}

static void type_table(struct report_buf *b, const struct report_file *rf)
{
    P(b, "## Type mix\n\n| type | bpw | tensors | bytes | share of data |\n"
         "|---|---:|---:|---:|---:|\n");
    uint32_t order[64];
    const uint32_t n_types = report_types(rf, order);
    for (uint32_t oi = 0; oi < n_types; oi++) {
        const uint32_t ty = order[oi];
        char nm[32];
        P(b, "| %s | %.4g | %u | %llu | %.1f%% |\n", report_type_name(ty, nm, sizeof nm),
          report_type_bpw(ty), rf->type_count[ty], (unsigned long long)rf->type_bytes[ty],
          rf->data_bytes ? 100.0 * (double)rf->type_bytes[ty] / (double)rf->data_bytes : 0.0);
    }
    P(b, "\n");
}

static void quality(struct report_buf *b, const struct report_file *rf)
{
    P(b, "## Quality\n\n");
    const struct report_quality *q = &rf->q;
    if (!q->has) {
        P(b, "Not measured. `memwall report FILE --reference F16.gguf --text T --card "
             "README.md` measures perplexity, KL divergence and top-1 agreement.\n\n");
        return;
    }
    P(b, "Against the unquantized model, %u chunks, %llu tokens scored (llama-perplexity's "
         "protocol):\n\n| perplexity | reference | ratio | KL divergence | top-1 agreement |\n"
         "|---:|---:|---:|---:|---:|\n| %.4f | %.4f | %.4f | %.6f | %.2f%% |\n\n",
      q->n_chunk, (unsigned long long)q->n_scored, q->ppl, q->ppl_base,
      q->ppl_base > 0 ? q->ppl / q->ppl_base : 0.0, q->kld, 100.0 * q->top1);
}

/* The command with its "SRC" word as src (quoted where needed), or as it is. */
static void command_line(struct report_buf *b, const char *c, const char *src)
{
    const char *w = strstr(c, " SRC");
    while (w && w[4] != '\0' && w[4] != ' ') w = strstr(w + 4, " SRC");
    if (!src || !w) {
        P(b, "%s", c);
        return;
    }
    P(b, "%.*s ", (int)(w - c), c);
    bool plain = *src != '\0';
    for (const char *p = src; *p && plain; p++)
        plain = strchr("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_./=:+,@",
                       *p) != NULL;
    if (plain) {
        P(b, "%s", src);
    } else {
        P(b, "'");
        for (const char *p = src; *p; p++) {
            if (*p == '\'') P(b, "'\\''");
            else P(b, "%c", *p);
        }
        P(b, "'");
    }
    P(b, "%s", w + 4);
}

void report_card(struct report_buf *b, const struct report_file *rf, const char *command,
                 const char *src, const char *license)
{
    front_matter(b, rf, license);
    P(b, "# ");
    md(b, rf->name ? rf->name : base_name(rf->path));
    P(b, " — GGUF (%.2f bpw)\n\n", report_bpw(rf));
    P(b, "A GGUF file for llama.cpp and memwall's runtime%s.\n\n",
      rf->memwall ? ", quantized with memwall" : "");
    facts(b, rf);
    type_table(b, rf);
    quality(b, rf);
    const char *c = command ? command : rf->command;
    P(b, "## How it was made\n\n");
    if (c) {
        P(b, "```sh\n");
        command_line(b, c, src);
        P(b, " -o %s\n```\n", base_name(rf->path));
        if (!src && strstr(c, " SRC"))
            P(b, "\nSRC: the unquantized model (the base model above), as a GGUF file or a "
                 "Hugging Face checkpoint directory.\n");
    } else {
        P(b, "The file records no command line (not made by memwall quant).\n");
    }
}

// --- the source's license ---

static char *slurp(const char *path, size_t max)
{
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    char *s = malloc(max + 1);
    size_t n = s ? fread(s, 1, max, f) : 0;
    fclose(f);
    if (s) s[n] = '\0';
    return s;
}

/* The rest of the line at p, trimmed and unquoted, malloc'd. */
static char *value_at(const char *p)
{
    while (*p == ' ' || *p == '\t' || *p == '"' || *p == '\'') p++;
    size_t n = strcspn(p, "\r\n\"',}");
    while (n && (p[n - 1] == ' ' || p[n - 1] == '\t')) n--;
    if (!n || n > 200) return NULL;
    char *v = malloc(n + 1);
    if (!v) return NULL;
    memcpy(v, p, n);
    v[n] = '\0';
    return v;
}

char *report_hf_license(const char *dir)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/README.md", dir);
    char *s = slurp(path, 1 << 16);
    char *v = NULL;
    if (s && strncmp(s, "---", 3) == 0) {
        const char *end = strstr(s + 3, "\n---");
        for (const char *p = s; p && (!end || p < end) && !v; p = strchr(p, '\n')) {
            if (*p == '\n') p++;
            if (strncmp(p, "license:", 8) == 0) v = value_at(p + 8);
        }
    }
    free(s);
    if (v) return v;
    snprintf(path, sizeof path, "%s/config.json", dir);
    s = slurp(path, 1 << 20);
    const char *k = s ? strstr(s, "\"license\"") : NULL;
    if (k && (k = strchr(k + 9, ':')) != NULL) v = value_at(k + 1);
    free(s);
    return v;
}
