/*
 * tools/run_cli.c — the runtime's command line (tools/run_cli.h): options,
 * memory accounting, prompt generation, interactive chat, perplexity.
 *
 * Output: generated text (or ids with --tokens) and perplexity records on
 * stdout; the model summary, memory accounting, timings and errors on
 * stderr.
 */
#define _POSIX_C_SOURCE 200809L
#include "tools/run_cli.h"
#include "tools/cmd.h"
#include "tools/cmd_opts.h"

#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/mw.h"
#include "runtime/rt.h"

struct opts {
    const char *model;
    const char *prompt;
    const char *ppl_file;
    const char *kld_base;
    const char *save_logits;
    const char *system;
    const char *tokenize_file; /* --tokenize */
    const char *teacher;       /* --teacher IDS */
    uint64_t n_predict;       /* UINT64_MAX: default */
    uint32_t n_ctx;           /* 0: default */
    uint32_t n_threads;
    uint32_t n_batch;
    enum rt_kv_type kv_type;
    bool mlock, map_only, verify, interactive, print_tokens, ignore_eos, quiet;
    bool no_bos, parse_special; /* --tokenize: llama-tokenize's --no-bos / --parse-special */
    bool no_think;            /* -i: a thinking template's enable_thinking=false */
    struct rt_sampler_opts samp;
    uint32_t chunks;
    uint64_t bytes;           /* UINT64_MAX: whole file */
};

struct cli {
    const char *prog;
    enum run_cli_mode mode;
};

static const char usage_any[] =
    "usage: %s -m MODEL.gguf [-p PROMPT] [options]       generate\n"
    "       %s -m MODEL.gguf -i [options]                chat on stdin\n"
    "       %s -m MODEL.gguf --perplexity TEXT [options] score a text\n"
    "\n"
    "model and memory:\n"
    "  -m, --model FILE      the GGUF file (mmap'd, read-only)\n"
    "  -t, --threads N       worker threads (default 1)\n"
    "  -c, --ctx N           KV cache positions (default min(training context, 4096));\n"
    "                        with --perplexity: the chunk size (default 256)\n"
    "      --kv-type T       f16 (default) or q8_0\n"
    "      --batch N         tokens per forward step (default 64)\n"
    "      --mlock           lock the mapped weights in RAM\n"
    "      --map-only        read every weight from the file mapping; by default the\n"
    "                        weights each token reads whole are copied into huge pages\n"
    "                        (when the kernel offers them and they fit half the free RAM)\n"
    "      --verify          check the memwall checksums at load\n"
    "generation:\n"
    "  -p, --prompt TEXT     the prompt (BOS is added as the vocabulary asks)\n"
    "  -n, --n-predict N     tokens to generate (default 128; chat: 256 per reply)\n"
    "  -i, --interactive     chat: one user turn per stdin line, the GGUF chat template\n"
    "                        when it is one of chatml/llama2/llama3/zephyr\n"
    "      --system TEXT     system prompt for -i (kept when the window slides)\n"
    "      --no-think        with -i and a thinking template (Qwen3.5): answer without\n"
    "                        thinking (its enable_thinking=false)\n"
    "      --temp T          temperature (default 0.8; 0 = greedy)\n"
    "      --top-k K         (default 40; 0 = off)\n"
    "      --top-p P         (default 0.95; 1 = off)\n"
    "      --min-p P         (default 0.05; 0 = off)\n"
    "      --seed S          RNG seed (default 42; same seed, same output)\n"
    "      --ignore-eos      do not stop at end-of-generation tokens\n"
    "      --tokens          print generated token ids instead of text\n"
    "perplexity (llama.cpp's llama-perplexity protocol):\n"
    "      --perplexity FILE text to score\n"
    "      --chunks N        score at most N chunks\n"
    "      --bytes N         use the first N bytes of the text\n"
    "      --kl-divergence BASE  KL divergence against logits saved by --save-logits\n"
    "                        (or llama-perplexity --kl-divergence-base)\n"
    "      --save-logits F   save this run's logits (float32) for a later comparison\n"
    "diagnostics:\n"
    "      --tokenize FILE   print the token ids of FILE's text (BOS as the vocabulary\n"
    "                        asks) and exit, as llama-peer tokenize does\n"
    "      --no-bos          with --tokenize: no BOS/EOS (add_special off)\n"
    "      --parse-special   with --tokenize: match control tokens spelled in the text\n"
    "      --teacher IDS     after -p, feed these ids (comma or space separated) instead\n"
    "                        of sampling; print per step: our greedy id and its logit,\n"
    "                        the fed id and its logit (compares with another runtime)\n"
    "  -q, --quiet           no model summary / memory accounting on stderr\n"
    "\nexit status: 0 ok, 1 bad model or input file, 2 usage, 3 I/O or resource error\n";

static const char usage_ppl[] =
    "usage: %s MODEL.gguf TEXT [options]\n"
    "       %s -m MODEL.gguf -f TEXT [options]\n"
    "\n"
    "Perplexity with llama.cpp's llama-perplexity protocol: the text is tokenized\n"
    "once (BOS first), cut into chunks of --ctx tokens, each chunk's first token\n"
    "is replaced by BOS and its second half is scored.\n"
    "\n"
    "  -c, --ctx N           chunk size (default 256)\n"
    "  -t, --threads N       worker threads (default 1)\n"
    "      --chunks N        score at most N chunks\n"
    "      --bytes N         use the first N bytes of the text\n"
    "      --kv-type T       f16 (default) or q8_0\n"
    "      --batch N         tokens per forward step (default 64)\n"
    "      --kl-divergence BASE  KL divergence against saved logits\n"
    "      --save-logits F   save this run's logits (float32)\n"
    "      --mlock, --map-only, --verify, -q/--quiet   as for `memwall run`\n"
    "\nOutput (stdout): \"ppl P chunks N tokens T scored S\", then \"kld ...\" lines\n"
    "with --kl-divergence, then timing.\n"
    "exit status: 0 ok, 1 bad model or input file, 2 usage, 3 I/O or resource error\n";

static int usage_error(const struct cli *cl, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int usage_error(const struct cli *cl, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "%s: ", cl->prog);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fprintf(stderr, "\n(%s --help for the options)\n", cl->prog);
    return mw_status_exit_code(MW_E_USAGE);
}

static int fail(const struct cli *cl, const struct mw_err *err)
{
    char buf[1200];
    fprintf(stderr, "%s: %s\n", cl->prog, mw_err_format(err, buf, sizeof buf));
    return mw_status_exit_code(err->code);
}

static double mib(uint64_t b) { return (double)b / (1024.0 * 1024.0); }

static const char *type_name(uint32_t t)
{
    const struct gguf_type_info *ti = gguf_type_get(t);
    return ti && ti->name ? ti->name : "?";
}

static bool parse_kv_type(void *ctx, const char *val, char *msg, size_t cap)
{
    (void)msg, (void)cap;
    return rt_kv_type_parse(val, ctx);
}

static int parse_args(const struct cli *cl, int argc, char **argv, struct opts *o)
{
    memset(o, 0, sizeof *o);
    o->n_predict = UINT64_MAX;
    o->n_threads = 1;
    o->kv_type = RT_KV_F16;
    o->samp = (struct rt_sampler_opts){.temp = 0.8f, .top_k = 40, .top_p = 0.95f,
                                       .min_p = 0.05f, .seed = 42};
    o->bytes = UINT64_MAX;
    const bool ppl_cmd = cl->mode == RUN_CLI_PERPLEXITY;
    /* `when`: the modes an option belongs to (none: all) */
    enum { ANY = 1u << RUN_CLI_ANY, RUN = 1u << RUN_CLI_RUN, PPL = 1u << RUN_CLI_PERPLEXITY };
    struct rt_sampler_opts *sp = &o->samp;
    const struct cmd_opt spec[] = {
        {"-m", "--model", CMD_OPT_STR, .str = &o->model},
        {"-p", "--prompt", CMD_OPT_STR, .str = &o->prompt, .when = ANY | RUN},
        {"-n", "--n-predict", CMD_OPT_U64, .u64 = &o->n_predict, .max = 1u << 30,
         .when = ANY | RUN},
        {"-t", "--threads", CMD_OPT_U32, .u32 = &o->n_threads, .min = 1, .max = RT_MAX_THREADS},
        {"-c", "--ctx", CMD_OPT_U32, .u32 = &o->n_ctx, .min = 1, .max = RT_MAX_CTX},
        {NULL, "--batch", CMD_OPT_U32, .u32 = &o->n_batch, .min = 1, .max = 4096},
        {NULL, "--kv-type", CMD_OPT_CALL, .ctx = &o->kv_type, .call = parse_kv_type},
        {NULL, "--mlock", CMD_OPT_FLAG, .flag = &o->mlock},
        {NULL, "--map-only", CMD_OPT_FLAG, .flag = &o->map_only},
        {NULL, "--verify", CMD_OPT_FLAG, .flag = &o->verify},
        {"-q", "--quiet", CMD_OPT_FLAG, .flag = &o->quiet},
        {"-i", "--interactive", CMD_OPT_FLAG, .flag = &o->interactive, .when = ANY | RUN},
        {NULL, "--system", CMD_OPT_STR, .str = &o->system, .when = ANY | RUN},
        {NULL, "--no-think", CMD_OPT_FLAG, .flag = &o->no_think, .when = ANY | RUN},
        {NULL, "--temp", CMD_OPT_FLOAT, .flt = &sp->temp, .dmax = INFINITY, .when = ANY | RUN},
        {NULL, "--top-k", CMD_OPT_U32, .u32 = &sp->top_k, .max = UINT32_MAX, .when = ANY | RUN},
        {NULL, "--top-p", CMD_OPT_FLOAT, .flt = &sp->top_p, .dmax = 1, .dmin_open = true,
         .when = ANY | RUN},
        {NULL, "--min-p", CMD_OPT_FLOAT, .flt = &sp->min_p, .dmax = 1, .when = ANY | RUN},
        {NULL, "--seed", CMD_OPT_U64, .u64 = &sp->seed, .max = UINT64_MAX, .when = ANY | RUN},
        {NULL, "--ignore-eos", CMD_OPT_FLAG, .flag = &o->ignore_eos, .when = ANY | RUN},
        {NULL, "--tokens", CMD_OPT_FLAG, .flag = &o->print_tokens, .when = ANY | RUN},
        {NULL, "--tokenize", CMD_OPT_STR, .str = &o->tokenize_file, .when = ANY | RUN},
        {NULL, "--no-bos", CMD_OPT_FLAG, .flag = &o->no_bos, .when = ANY | RUN},
        {NULL, "--parse-special", CMD_OPT_FLAG, .flag = &o->parse_special, .when = ANY | RUN},
        {NULL, "--teacher", CMD_OPT_STR, .str = &o->teacher, .when = ANY | RUN},
        {NULL, "--perplexity", CMD_OPT_STR, .str = &o->ppl_file, .when = ANY},
        {"-f", NULL, CMD_OPT_STR, .str = &o->ppl_file, .when = PPL},
        {NULL, "--chunks", CMD_OPT_U32, .u32 = &o->chunks, .min = 1, .max = UINT32_MAX,
         .when = ANY | PPL},
        {NULL, "--bytes", CMD_OPT_U64, .u64 = &o->bytes, .max = UINT64_MAX - 1, .when = ANY | PPL},
        {NULL, "--kl-divergence", CMD_OPT_STR, .str = &o->kld_base, .when = ANY | PPL},
        {NULL, "--save-logits", CMD_OPT_STR, .str = &o->save_logits, .when = ANY | PPL},
    };
    const char *pos[2] = {NULL, NULL};
    struct cmd_opts op = {CMD_OPTS_TABLE(spec), .when = 1u << cl->mode,
                          .flags = CMD_OPTS_NO_EQ | CMD_OPTS_NO_DASHDASH, .pos = pos,
                          .max_pos = ppl_cmd ? 2 : 0, .needs_value = "option '%a' needs a value"};
    if (argc == 2 && strcmp(argv[1], "--help-man") == 0) { /* the man page (cmd_man.c) */
        char u[sizeof usage_any + 256];
        if (ppl_cmd) snprintf(u, sizeof u, usage_ppl, cl->prog, cl->prog);
        else snprintf(u, sizeof u, usage_any, cl->prog, cl->prog, cl->prog);
        cmd_man_print(ppl_cmd ? "memwall-perplexity" : "memwall-run",
                      ppl_cmd ? cmd_man_summary("perplexity")
                              : "the device runtime: generate, chat, score a text",
                      u, &op);
        return -1;
    }
    switch (cmd_opts_parse(&op, argc, argv)) {
    case CMD_OPTS_OK: break;
    case CMD_OPTS_HELP:
        if (ppl_cmd) printf(usage_ppl, cl->prog, cl->prog);
        else printf(usage_any, cl->prog, cl->prog, cl->prog);
        return -1;
    case CMD_OPTS_ERR: return usage_error(cl, "%s", op.msg);
    }
    int n_pos = op.n_pos;
    if (ppl_cmd) {
        if (n_pos >= 1 && !o->model) o->model = pos[0], pos[0] = pos[1], n_pos--;
        if (n_pos >= 1 && !o->ppl_file) o->ppl_file = pos[0], n_pos--;
        if (n_pos > 0) return usage_error(cl, "unexpected argument '%s'", pos[0]);
        if (!o->ppl_file) return usage_error(cl, "missing TEXT (the file to score)");
    }
    if (!o->model) return usage_error(cl, "missing -m MODEL.gguf");
    if (o->ppl_file && (o->prompt || o->interactive))
        return usage_error(cl, "--perplexity goes without -p / -i");
    if (o->kld_base && o->save_logits)
        return usage_error(cl, "--kl-divergence and --save-logits are exclusive");
    if ((o->kld_base || o->save_logits || o->chunks || o->bytes != UINT64_MAX) && !o->ppl_file)
        return usage_error(cl, "--kl-divergence/--save-logits/--chunks/--bytes need --perplexity");
    if (o->teacher && !o->prompt) return usage_error(cl, "--teacher needs -p PROMPT");
    if ((o->no_bos || o->parse_special) && !o->tokenize_file)
        return usage_error(cl, "--no-bos/--parse-special need --tokenize");
    if (o->no_think && !o->interactive) return usage_error(cl, "--no-think needs -i");
    if (!o->ppl_file && !o->prompt && !o->interactive && !o->tokenize_file)
        return usage_error(cl, "nothing to do: give -p PROMPT, -i or --perplexity FILE");
    return 0;
}

// --- model summary and memory accounting ---

static void print_summary(const struct cli *cl, const struct rt_model *m, const struct rt_ctx *c,
                          const struct rt_tok *t)
{
    const struct rt_hparams *hp = rt_model_hparams(m);
    struct rt_mem mem;
    rt_ctx_mem(c, &mem);
    fprintf(stderr,
            "%s: model %s%s%s: %s, %u layers, embd %u, heads %u/%u x %u, ffn %u, vocab %u "
            "(%s tokenizer), weights %s\n",
            cl->prog, hp->name[0] ? "'" : "", hp->name[0] ? hp->name : "(unnamed)",
            hp->name[0] ? "'" : "", hp->arch_name, hp->n_layer, hp->n_embd, hp->n_head,
            hp->n_head_kv, hp->head_dim, hp->n_ff, hp->n_vocab, rt_tok_model_name(t),
            type_name(rt_model_main_type(m)));
    const uint64_t total = mem.weight_bytes + mem.owned_bytes + mem.kv_bytes + mem.scratch_bytes;
    fprintf(stderr,
            "%s: memory: weights %.2f MiB (mmap of a %.2f MiB file; %.2f MiB of it in huge "
            "pages), KV cache %.2f MiB "
            "(%s, %u positions), scratch %.2f MiB, other %.2f MiB; total %.2f MiB\n",
            cl->prog, mib(mem.weight_bytes), mib(mem.mapped_bytes), mib(mem.copied_bytes),
            mib(mem.kv_bytes),
            rt_kv_type_name(mem.kv_type), mem.n_ctx, mib(mem.scratch_bytes), mib(mem.owned_bytes),
            mib(total));
    if (hp->n_swa > 0) {
        uint32_t n_slide = 0;
        for (uint32_t il = 0; il < hp->n_layer; il++) n_slide += rt_layer_is_swa(hp, il);
        fprintf(stderr,
                "%s: sliding window %u in %u of %u layers (their KV cache keeps only the "
                "window); no context shift: the context ends at %u positions\n",
                cl->prog, hp->n_swa, n_slide, hp->n_layer, mem.n_ctx);
    }
    if (hp->n_expert > 0) {
        /* what one decoded token reads (as `memwall plan`'s decode table) */
        const uint64_t act = rt_model_active_weight_bytes(m);
        fprintf(stderr,
                "%s: experts: %u per layer, %u used per token%s; active weights %.2f MiB of "
                "%.2f MiB per token (%.1f%%)\n",
                cl->prog, hp->n_expert, hp->n_expert_used,
                hp->n_ff_shexp ? ", a shared expert" : "", mib(act), mib(mem.weight_bytes),
                mem.weight_bytes ? 100.0 * (double)act / (double)mem.weight_bytes : 0.0);
    }
    fprintf(stderr, "%s: kernels %s, %u thread%s\n", cl->prog, rt_ctx_kernels_name(c),
            mem.n_threads, mem.n_threads == 1 ? "" : "s");
}

// --- generation ---

struct turns;

struct gen {
    struct turns *tu;  /* chat mode: the turns the window may drop; NULL otherwise */
    const struct cli *cl;
    const struct opts *o;
    struct rt_ctx *c;
    const struct rt_tok *t;
    struct rt_sampler *s;
    uint32_t n_keep;   /* positions the window never drops (BOS, system prompt) */
    bool recurrent;    /* a recurrent state (gated delta net): no context shift */
    bool ctx_full;     /* generation stopped at the end of the context */
    char piece[1024];
    uint64_t n_gen;
    double t_gen;
};

static void emit(struct gen *g, int32_t id, bool first)
{
    if (g->o->print_tokens) {
        printf(first ? "%d" : " %d", id);
    } else {
        size_t n = rt_tok_piece(g->t, id, false, g->piece, sizeof g->piece);
        if (n > sizeof g->piece) n = sizeof g->piece;
        fwrite(g->piece, 1, n, stdout);
    }
    fflush(stdout);
}

static enum mw_status chat_room(struct gen *g, struct turns *tu, uint32_t need, bool keep_last,
                                struct mw_err *err);

/* Make room for `need` more positions: in chat mode by dropping whole
 * oldest turns (never the one being answered), otherwise by dropping the
 * oldest half of what follows n_keep (llama.cpp's context shift). */
static enum mw_status make_room(struct gen *g, uint32_t need, struct mw_err *err)
{
    const uint32_t n_ctx = rt_ctx_n_ctx(g->c), n_past = rt_ctx_n_past(g->c);
    if (n_past + need <= n_ctx) return MW_OK;
    if (g->tu) return chat_room(g, g->tu, need, true, err);
    /* a recurrent state holds the whole sequence and cannot drop positions:
     * llama.cpp disables the context shift for such memory and stops there */
    if (g->recurrent)
        return MW_FAIL(err, MW_E_NOSPACE, MW_ERR_OFF_NONE,
                       "the context is full at %u positions and the recurrent state cannot drop "
                       "any (no context shift)", n_ctx);
    if (g->n_keep + need >= n_ctx)
        return MW_FAIL(err, MW_E_USAGE, MW_ERR_OFF_NONE,
                       "context %u is too small to keep %u positions and add %u", n_ctx,
                       g->n_keep, need);
    uint32_t drop = (n_past - g->n_keep) / 2;
    if (n_past - drop + need > n_ctx) drop = n_past + need - n_ctx;
    return rt_ctx_shift(g->c, g->n_keep, drop, err);
}

/* Sample and feed up to n tokens; stops at an end-of-generation token. */
static enum mw_status generate(struct gen *g, uint64_t n, bool *stopped_eog, struct mw_err *err)
{
    enum mw_status s;
    *stopped_eog = false;
    const double t0 = mw_now_s();
    for (uint64_t i = 0; i < n; i++) {
        const int32_t id = rt_sample(g->s, rt_ctx_logits(g->c));
        if (!g->o->ignore_eos && rt_tok_is_eog(g->t, id)) {
            *stopped_eog = true;
            break;
        }
        emit(g, id, g->n_gen == 0);
        g->n_gen++;
        if (i + 1 == n) break; /* its logits are not needed */
        if ((s = make_room(g, 1, err))) {
            if (!g->tu && s == MW_E_NOSPACE && g->recurrent) {
                mw_err_clear(err); /* the end of a recurrent model's context: stop there */
                g->ctx_full = true;
                break;
            }
            if (!g->tu || s != MW_E_NOSPACE) return s;
            mw_err_clear(err); /* chat: the reply fills the window; end it */
            if (!g->o->quiet) fprintf(stderr, "\n[context full: reply cut]");
            break;
        }
        if ((s = rt_eval(g->c, &id, 1, 0, NULL, err))) return s;
    }
    g->t_gen += mw_now_s() - t0;
    return MW_OK;
}

static enum mw_status tokenize(const struct rt_tok *t, const char *text, bool add_special,
                               bool parse_special, int32_t **out, size_t *n, struct mw_err *err)
{
    size_t need = 0;
    *out = NULL;
    enum mw_status s = rt_tok_encode(t, text, strlen(text), add_special, parse_special, NULL, 0,
                                     &need, err);
    if (s && s != MW_E_NOSPACE) return s;
    mw_err_clear(err);
    *out = malloc((need ? need : 1) * sizeof **out);
    if (!*out) return MW_FAIL(err, MW_E_NOMEM, MW_ERR_OFF_NONE, "prompt tokens");
    s = rt_tok_encode(t, text, strlen(text), add_special, parse_special, *out, need, n, err);
    if (s) {
        free(*out);
        *out = NULL;
    }
    return s;
}

/* --teacher: feed given ids, report our greedy choice at each step. */
static int run_teacher(struct gen *g, struct mw_err *err)
{
    const struct cli *cl = g->cl;
    const uint32_t nv = rt_model_hparams(rt_ctx_model(g->c))->n_vocab;
    const char *p = g->o->teacher;
    uint32_t step = 0;
    putchar('\n');
    while (*p) {
        while (*p == ' ' || *p == ',') p++;
        if (!*p) break;
        char *end;
        errno = 0;
        const long id = strtol(p, &end, 10);
        if (end == p || errno || id < 0 || (unsigned long)id >= nv) {
            fprintf(stderr, "%s: --teacher: bad token id at '%.20s'\n", cl->prog, p);
            return mw_status_exit_code(MW_E_USAGE);
        }
        p = end;
        const float *lg = rt_ctx_logits(g->c);
        const int32_t best = rt_argmax(lg, nv);
        printf("step %u ours %d %.6f fed %ld %.6f\n", step++, best, lg[best], id, lg[id]);
        const int32_t t = (int32_t)id;
        enum mw_status s = make_room(g, 1, err);
        if (!s) s = rt_eval(g->c, &t, 1, 0, NULL, err);
        if (s) return fail(cl, err);
    }
    return 0;
}

static int run_tokenize(const struct cli *cl, const struct opts *o, const struct rt_tok *t,
                        struct mw_err *err)
{
    size_t need = 0, n = 0;
    struct mw_map map;
    enum mw_status s = mw_map_open(&map, o->tokenize_file, err);
    if (s) return fail(cl, err);
    const bool add_special = !o->no_bos, parse_special = o->parse_special;
    s = rt_tok_encode(t, (const char *)map.data, (size_t)map.size, add_special, parse_special,
                      NULL, 0, &need, NULL);
    int32_t *ids = malloc((need ? need : 1) * sizeof *ids);
    if (!ids) {
        mw_map_close(&map);
        MW_FAIL(err, MW_E_NOMEM, MW_ERR_OFF_NONE, "token buffer");
        return fail(cl, err);
    }
    s = rt_tok_encode(t, (const char *)map.data, (size_t)map.size, add_special, parse_special, ids,
                      need, &n, err);
    mw_map_close(&map);
    if (s) {
        free(ids);
        return fail(cl, err);
    }
    for (size_t i = 0; i < n; i++) printf(i ? " %d" : "%d", ids[i]);
    putchar('\n');
    free(ids);
    return 0;
}

/* The memory-wall figure after a generation: the weight bytes one decoded
 * token reads (rt_model_active_weight_bytes: MoE counts only the experts a
 * token uses) times the decode rate. Printed with the exact byte count so
 * that tests can compare it with the file's tensor sizes. */
static void print_bandwidth(const struct gen *g)
{
    if (g->n_gen == 0 || !(g->t_gen > 0)) return;
    const struct rt_model *m = rt_ctx_model(g->c);
    const struct rt_hparams *hp = rt_model_hparams(m);
    const uint64_t b = rt_model_active_weight_bytes(m);
    const double tps = (double)g->n_gen / g->t_gen;
    char moe[64] = "";
    if (hp->n_expert > 0)
        snprintf(moe, sizeof moe, ", %u of %u experts", hp->n_expert_used, hp->n_expert);
    fprintf(stderr,
            "%s: decode reads %.1f MB of weights per token (%" PRIu64 " bytes%s): "
            "%.2f GB/s effective\n",
            g->cl->prog, (double)b / 1e6, b, moe, (double)b * tps / 1e9);
}

static int run_prompt(struct gen *g, struct mw_err *err)
{
    const struct cli *cl = g->cl;
    int32_t *toks = NULL;
    size_t n = 0;
    enum mw_status s = tokenize(g->t, g->o->prompt, true, false, &toks, &n, err);
    if (s) return fail(cl, err);
    if (n == 0) {
        free(toks);
        fprintf(stderr, "%s: the prompt gives no tokens\n", cl->prog);
        return mw_status_exit_code(MW_E_USAGE);
    }
    if (n >= rt_ctx_n_ctx(g->c)) {
        free(toks);
        fprintf(stderr, "%s: the prompt has %zu tokens; --ctx %u leaves no room to generate\n",
                cl->prog, n, rt_ctx_n_ctx(g->c));
        return mw_status_exit_code(MW_E_USAGE);
    }
    g->n_keep = rt_tok_add_bos(g->t) ? 1 : 0;
    if (!g->o->print_tokens && !g->o->teacher) {
        fputs(g->o->prompt, stdout);
        fflush(stdout);
    }
    const double t0 = mw_now_s();
    s = rt_eval(g->c, toks, (uint32_t)n, 0, NULL, err);
    const double t_prompt = mw_now_s() - t0;
    free(toks);
    if (s) return fail(cl, err);
    if (g->o->teacher) return run_teacher(g, err);
    const uint64_t n_predict = g->o->n_predict == UINT64_MAX ? 128 : g->o->n_predict;
    bool eog;
    if ((s = generate(g, n_predict, &eog, err))) return fail(cl, err);
    putchar('\n');
    fflush(stdout);
    if (g->ctx_full)
        fprintf(stderr,
                "%s: context full at %u positions after %" PRIu64 " generated tokens: the "
                "recurrent state of %s cannot drop positions (no context shift), generation "
                "stopped; raise --ctx for more\n",
                cl->prog, rt_ctx_n_ctx(g->c), g->n_gen,
                rt_model_hparams(rt_ctx_model(g->c))->arch_name);
    if (!g->o->quiet)
        fprintf(stderr,
                "%s: prompt %zu tokens in %.3f s (%.1f tok/s); generated %" PRIu64
                " tokens in %.3f s (%.1f tok/s)%s\n",
                cl->prog, n, t_prompt, t_prompt > 0 ? (double)n / t_prompt : 0.0, g->n_gen,
                g->t_gen, g->t_gen > 0 ? (double)g->n_gen / g->t_gen : 0.0,
                eog ? "; stopped at end of generation" : "");
    if (!g->o->quiet) print_bandwidth(g);
    return 0;
}

// --- chat ---

struct turns {
    uint32_t start[4096]; /* position where each kept user turn starts */
    uint32_t n;
    char *keep_text;      /* the system prompt as fed (NULL: none) */
    bool keep_bos;        /* a BOS before it */
};

/* Recurrent models: start the conversation over (llama-cli's /clear: the
 * history goes, the system prompt is fed again), since their state cannot
 * drop turns nor rewind to the end of the system prompt. */
static enum mw_status chat_clear(struct gen *g, struct turns *tu, struct mw_err *err)
{
    rt_ctx_reset(g->c);
    tu->n = 0;
    if (tu->keep_text || tu->keep_bos) {
        int32_t *toks = NULL;
        size_t n = 0;
        enum mw_status s = tokenize(g->t, tu->keep_text ? tu->keep_text : "", tu->keep_bos, true,
                                    &toks, &n, err);
        if (!s && n > 0) s = rt_eval(g->c, toks, (uint32_t)n, 0, NULL, err);
        free(toks);
        if (s) return s;
    }
    if (!g->o->quiet)
        fprintf(stderr, "[context full: conversation cleared, the system prompt kept (a "
                        "recurrent state cannot drop turns)]\n");
    return MW_OK;
}

/* Slide the window: drop whole oldest turns after n_keep until `need` more
 * positions fit; keep_last: the newest turn (being answered) stays. */
static enum mw_status chat_room(struct gen *g, struct turns *tu, uint32_t need, bool keep_last,
                                struct mw_err *err)
{
    const uint32_t n_ctx = rt_ctx_n_ctx(g->c);
    if (rt_ctx_n_past(g->c) + need <= n_ctx) return MW_OK;
    if (g->recurrent) {
        /* the turn being answered cannot be dropped: the reply ends here */
        if (keep_last)
            return MW_FAIL(err, MW_E_NOSPACE, MW_ERR_OFF_NONE, "the reply fills --ctx %u", n_ctx);
        enum mw_status s = chat_clear(g, tu, err);
        if (s) return s;
        if (rt_ctx_n_past(g->c) + need > n_ctx)
            return MW_FAIL(err, MW_E_NOSPACE, MW_ERR_OFF_NONE,
                           "this turn does not fit in --ctx %u with the system prompt (%u tokens)",
                           n_ctx, g->n_keep);
        return MW_OK;
    }
    const uint32_t droppable = keep_last && tu->n > 0 ? tu->n - 1 : tu->n;
    uint32_t k = 0; /* turns to drop */
    while (k < droppable) {
        k++;
        const uint32_t cut = k < tu->n ? tu->start[k] : rt_ctx_n_past(g->c);
        if (rt_ctx_n_past(g->c) - (cut - g->n_keep) + need <= n_ctx) break;
    }
    const uint32_t cut = k < tu->n ? tu->start[k] : rt_ctx_n_past(g->c);
    if (rt_ctx_n_past(g->c) - (cut - g->n_keep) + need > n_ctx)
        return MW_FAIL(err, MW_E_NOSPACE, MW_ERR_OFF_NONE,
                       "%s does not fit in --ctx %u with the system prompt (%u tokens)",
                       keep_last ? "the reply" : "this turn", n_ctx, g->n_keep);
    const uint32_t drop = cut - g->n_keep;
    enum mw_status s = rt_ctx_shift(g->c, g->n_keep, drop, err);
    if (s) return s;
    for (uint32_t i = k; i < tu->n; i++) tu->start[i - k] = tu->start[i] - drop;
    tu->n -= k;
    if (!g->o->quiet)
        fprintf(stderr, "[context full: dropped the oldest %u turn%s (%u tokens)]\n", k,
                k == 1 ? "" : "s", drop);
    return MW_OK;
}

static enum mw_status feed_text(struct gen *g, struct turns *tu, const char *text, bool add_bos,
                                bool new_turn, struct mw_err *err)
{
    int32_t *toks = NULL;
    size_t n = 0;
    enum mw_status s = tokenize(g->t, text, add_bos, true, &toks, &n, err);
    if (s) return s;
    if (n == 0) {
        free(toks);
        return MW_OK;
    }
    if (n >= rt_ctx_n_ctx(g->c)) {
        free(toks);
        return MW_FAIL(err, MW_E_NOSPACE, MW_ERR_OFF_NONE, "%zu tokens do not fit in --ctx %u", n,
                       rt_ctx_n_ctx(g->c));
    }
    if ((s = chat_room(g, tu, (uint32_t)n + (new_turn ? 8 : 0), !new_turn, err)) == MW_OK) {
        if (new_turn && tu->n < sizeof tu->start / sizeof tu->start[0])
            tu->start[tu->n++] = rt_ctx_n_past(g->c);
        s = rt_eval(g->c, toks, (uint32_t)n, 0, NULL, err);
    }
    free(toks);
    return s;
}

static int run_chat(struct gen *g, struct mw_err *err)
{
    const struct cli *cl = g->cl;
    enum rt_chat_fmt fmt = rt_chat_detect(rt_model_gguf(rt_ctx_model(g->c)));
    if (g->o->no_think) fmt = rt_chat_no_thinking(fmt);
    struct turns *tu = calloc(1, sizeof *tu);
    enum mw_status s;
    if (!tu) {
        MW_FAIL(err, MW_E_NOMEM, MW_ERR_OFF_NONE, "chat state");
        return fail(cl, err);
    }
    g->tu = tu;
    if (!g->o->quiet)
        fprintf(stderr, "%s: chat format %s; one line per turn, end with EOF (Ctrl-D)\n", cl->prog,
                rt_chat_fmt_name(fmt));
    char *buf = NULL;
    size_t cap = 0;
    /* BOS and the system prompt form the part the window always keeps */
    bool bos_pending = rt_tok_add_bos(g->t);
    if (g->o->system && fmt != RT_CHAT_LLAMA2) {
        const size_t need = rt_chat_format(fmt, "system", g->o->system, true, NULL, NULL, 0) + 1;
        buf = malloc(need);
        if (!buf) {
            s = MW_FAIL(err, MW_E_NOMEM, MW_ERR_OFF_NONE, "chat buffer");
            goto out;
        }
        rt_chat_format(fmt, "system", g->o->system, true, NULL, buf, need);
        cap = need;
        if (g->recurrent && !(tu->keep_text = strdup(buf))) {
            s = MW_FAIL(err, MW_E_NOMEM, MW_ERR_OFF_NONE, "chat buffer");
            goto out;
        }
        tu->keep_bos = bos_pending;
        if ((s = feed_text(g, tu, buf, bos_pending, false, err))) goto out;
        bos_pending = false;
    } else if (bos_pending) {
        tu->keep_bos = true;
        if ((s = feed_text(g, tu, "", true, false, err))) goto out;
        bos_pending = false;
    }
    g->n_keep = rt_ctx_n_past(g->c);
    const uint64_t n_predict = g->o->n_predict == UINT64_MAX ? 256 : g->o->n_predict;
    char *line = NULL;
    size_t line_cap = 0;
    bool first = true;
    s = MW_OK;
    for (;;) {
        if (isatty(STDIN_FILENO)) fputs("> ", stdout), fflush(stdout);
        const ssize_t got = getline(&line, &line_cap, stdin);
        if (got < 0) break;
        size_t len = (size_t)got;
        while (len > 0 && (line[len - 1] == '\n' || line[len - 1] == '\r')) line[--len] = '\0';
        if (len == 0) continue;
        const size_t need = rt_chat_format(fmt, "user", line, first, g->o->system, NULL, 0) + 1;
        if (need > cap) {
            char *nb = realloc(buf, need);
            if (!nb) {
                s = MW_FAIL(err, MW_E_NOMEM, MW_ERR_OFF_NONE, "chat buffer");
                break;
            }
            buf = nb;
            cap = need;
        }
        rt_chat_format(fmt, "user", line, first, g->o->system, buf, cap);
        first = false;
        if ((s = feed_text(g, tu, buf, false, true, err))) {
            if (s != MW_E_NOSPACE) break;
            char eb[600];
            fprintf(stderr, "[%s: turn skipped]\n", mw_err_format(err, eb, sizeof eb));
            mw_err_clear(err);
            s = MW_OK;
            continue;
        }
        bool eog;
        if ((s = generate(g, n_predict, &eog, err))) break;
        /* the sampled end token was not fed: close the turn as the template does */
        putchar('\n');
        fflush(stdout);
        if ((s = feed_text(g, tu, rt_chat_turn_end(fmt), false, false, err))) {
            if (s != MW_E_NOSPACE) break;
            /* a single turn filled the window: start over after the kept part */
            mw_err_clear(err);
            s = MW_OK;
            if (g->recurrent) {
                if ((s = chat_clear(g, tu, err))) break;
                continue;
            }
            rt_ctx_truncate(g->c, g->n_keep);
            tu->n = 0;
            if (!g->o->quiet) fprintf(stderr, "[context full: conversation restarted]\n");
        }
    }
    free(line);
out:
    free(buf);
    g->tu = NULL;
    free(tu->keep_text);
    free(tu);
    if (s) return fail(cl, err);
    if (!g->o->quiet && g->n_gen > 0)
        fprintf(stderr, "%s: generated %" PRIu64 " tokens in %.3f s (%.1f tok/s)\n", cl->prog,
                g->n_gen, g->t_gen, g->t_gen > 0 ? (double)g->n_gen / g->t_gen : 0.0);
    if (!g->o->quiet && g->n_gen > 0) print_bandwidth(g);
    return 0;
}

// --- perplexity ---

struct progress {
    const struct cli *cl;
    bool tty;
};

static void on_chunk(void *ud, uint32_t chunk, uint32_t n_chunk, double ppl)
{
    const struct progress *p = ud;
    if (p->tty) fprintf(stderr, "\r%s: chunk %u/%u ppl %.4f", p->cl->prog, chunk, n_chunk, ppl);
    if (p->tty && chunk == n_chunk) fputc('\n', stderr);
}

static enum mw_status read_text(const char *path, uint64_t max, char **out, size_t *len,
                                struct mw_err *err)
{
    *out = NULL;
    *len = 0;
    struct mw_map map;
    enum mw_status s = mw_map_open(&map, path, err);
    if (s) return s;
    uint64_t n = map.size < max ? map.size : max;
    size_t sz;
    if (!mw_u64_to_size(n, &sz) || !(*out = malloc(sz + 1))) {
        mw_map_close(&map);
        return MW_FAIL(err, MW_E_NOMEM, MW_ERR_OFF_NONE, "text of %" PRIu64 " bytes", n);
    }
    if (sz) memcpy(*out, map.data, sz);
    (*out)[sz] = '\0';
    *len = sz;
    mw_map_close(&map);
    return MW_OK;
}

static int run_ppl(const struct cli *cl, const struct opts *o, struct rt_ctx *c,
                   const struct rt_tok *t, uint32_t chunk_ctx, struct mw_err *err)
{
    char *text = NULL;
    size_t len = 0;
    enum mw_status s;
    if (!o->kld_base && (s = read_text(o->ppl_file, o->bytes, &text, &len, err)))
        return fail(cl, err);
    struct progress pr = {cl, !o->quiet && isatty(STDERR_FILENO)};
    const struct rt_ppl_opts po = {.n_ctx = chunk_ctx, .max_chunks = o->chunks,
                                   .save_logits = o->save_logits, .kld_base = o->kld_base,
                                   .progress = on_chunk, .progress_ud = &pr};
    struct rt_ppl_result r;
    s = rt_perplexity(c, t, text ? text : "", len, &po, &r, err);
    free(text);
    if (s) return fail(cl, err);
    printf("ppl %.6f chunks %u tokens %" PRIu64 " scored %" PRIu64 "\n", r.ppl, r.n_chunk,
           r.n_tokens, r.n_scored);
    printf("ppl_unc %.6f\n", r.ppl_unc);
    if (r.has_kld) {
        printf("kld %.6f\n", r.kld);
        printf("kld_unc %.6f\n", r.kld_unc);
        printf("kld_max %.6f\n", r.kld_max);
        printf("ppl_base %.6f\n", r.ppl_base);
        printf("same_top %.6f\n", r.same_top);
        printf("rms_dp %.6f\n", r.rms_dp);
        printf("kld_method %s\n", r.kld_exact ? "f32-exact" : "llama.cpp-uint16");
    }
    const double tps = r.seconds > 0 ? (double)r.n_chunk * chunk_ctx / r.seconds : 0.0;
    printf("seconds %.3f tokens_per_s %.1f threads %u\n", r.seconds, tps, o->n_threads);
    return 0;
}

// --- main ---

int run_cli_main(const char *prog, enum run_cli_mode mode, int argc, char **argv)
{
    const struct cli cl = {prog, mode};
    struct opts o;
    const int prc = parse_args(&cl, argc, argv, &o);
    if (prc < 0) return 0; /* --help */
    if (prc > 0) return prc;

    struct mw_err err;
    mw_err_clear(&err);
    struct rt_model *m = NULL;
    struct rt_ctx *c = NULL;
    struct rt_tok *t = NULL;
    struct rt_sampler *smp = NULL;
    int rc = 0;
    enum mw_status s;
    const struct rt_model_opts mo = {.mlock = o.mlock, .map_only = o.map_only};
    if ((s = rt_model_open(o.model, &mo, &m, &err))) return fail(&cl, &err);
    const struct rt_hparams *hp = rt_model_hparams(m);
    if (o.verify) {
        const double t0 = mw_now_s();
        uint64_t n_checked = 0;
        if ((s = rt_model_verify(m, &n_checked, &err))) {
            rc = fail(&cl, &err);
            goto done;
        }
        if (!o.quiet) {
            if (n_checked)
                fprintf(stderr, "%s: verified the header and %" PRIu64 " tensor checksums "
                                "(xxh3-64) in %.3f s\n", cl.prog, n_checked, mw_now_s() - t0);
            else
                fprintf(stderr, "%s: warning: %s has no memwall checksums; nothing verified\n",
                        cl.prog, o.model);
        }
    }
    if ((s = rt_tok_init(rt_model_gguf(m), hp->n_vocab, &t, &err))) {
        rc = fail(&cl, &err);
        goto done;
    }
    if (o.tokenize_file) {
        rc = run_tokenize(&cl, &o, t, &err);
        goto done;
    }
    const uint32_t chunk_ctx = o.ppl_file ? (o.n_ctx ? o.n_ctx : 256) : 0;
    const struct rt_ctx_opts co = {.n_ctx = o.ppl_file ? chunk_ctx : o.n_ctx,
                                   .kv_type = o.kv_type, .n_threads = o.n_threads,
                                   .n_batch = o.n_batch};
    if (!o.quiet && co.n_ctx > hp->n_ctx_train)
        fprintf(stderr, "%s: warning: context %u exceeds the model's training context %u\n",
                cl.prog, co.n_ctx, hp->n_ctx_train);
    if ((s = rt_ctx_init(m, &co, &c, &err))) {
        rc = fail(&cl, &err);
        goto done;
    }
    if (!o.quiet) print_summary(&cl, m, c, t);
    if (o.ppl_file) {
        rc = run_ppl(&cl, &o, c, t, chunk_ctx, &err);
        goto done;
    }
    if ((s = rt_sampler_init(&o.samp, hp->n_vocab, &smp, &err))) {
        rc = fail(&cl, &err);
        goto done;
    }
    struct gen g = {.cl = &cl, .o = &o, .c = c, .t = t, .s = smp};
    for (uint32_t il = 0; il < hp->n_layer; il++) g.recurrent |= rt_layer_is_recurrent(hp, il);
    rc = o.interactive ? run_chat(&g, &err) : run_prompt(&g, &err);
done:
    rt_sampler_free(smp);
    rt_ctx_free(c);
    rt_tok_free(t);
    rt_model_close(m);
    if ((fflush(stdout) != 0 || ferror(stdout)) && !cmd_stdout_reader_gone()) {
        fprintf(stderr, "%s: error writing output: %s\n", cl.prog, strerror(errno));
        if (rc == 0) rc = mw_status_exit_code(MW_E_IO);
    }
    return rc;
}
