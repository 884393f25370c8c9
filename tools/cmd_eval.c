/*
 * tools/cmd_eval.c — `memwall eval Q.gguf --reference REF --text T
 * [--max-kld X] [--min-top1 Y] [--max-ppl-ratio Z] [--junit FILE]`: the
 * quality gate of a quantized file for CI.
 *
 * The measurement is the one `memwall perplexity` makes (rt_perplexity,
 * llama-perplexity's protocol): the reference model is run over the text
 * and its logits saved to a temporary file under $TMPDIR (n_chunk x
 * (ctx/2 - 1) x n_vocab float32), then Q is run over the same tokens against
 * them: perplexity of both, mean KL divergence, top-1 agreement. REF may
 * also be a logits file already saved (`memwall perplexity --save-logits`,
 * llama-perplexity --kl-divergence-base): then the reference is not run and
 * --text is not needed, which is how a directory of files is gated against
 * one reference run.
 *
 * Output (stdout): the figures as "name value" lines, then
 *   "Q.gguf: OK: ..." or "Q.gguf: FAILED: <reasons>".
 * A crossed threshold: the same one-line reason on stderr
 * ("memwall eval: Q.gguf: kld 0.0213 > --max-kld 0.01"), exit 1.
 */
#define _POSIX_C_SOURCE 200809L
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/mw_file.h"
#include "runtime/rt.h"
#include "tools/cmd.h"
#include "tools/junit.h"

static const char *cmd = "eval";

static const char usage_text[] =
    "usage: memwall eval Q.gguf --reference REF --text TEXT [thresholds] [options]\n"
    "  Measure a quantized file against its reference on a text (llama-perplexity's\n"
    "  protocol, as `memwall perplexity`): perplexity of both, the mean KL\n"
    "  divergence of Q's token distributions from the reference's, and how often\n"
    "  their most likely tokens agree (top-1). Exit 1 when a threshold is crossed.\n"
    "  --reference REF       the reference model (the F16/BF16/F32 GGUF), or its\n"
    "                        logits saved by `memwall perplexity --save-logits`\n"
    "                        (then --text is not needed)\n"
    "  --text TEXT           the text to score\n"
    "  --max-kld X           fail when the mean KL divergence is above X\n"
    "  --min-top1 Y          fail when the top-1 agreement (0..1) is below Y\n"
    "  --max-ppl-ratio Z     fail when ppl(Q) / ppl(REF) is above Z\n"
    "  --junit FILE          also write the result as JUnit XML (one test case per\n"
    "                        threshold; the figures as properties)\n"
    "  -c, --ctx N           chunk size (default 256)\n"
    "      --chunks N        score at most N chunks\n"
    "      --bytes N         use the first N bytes of the text\n"
    "  -t, --threads N       worker threads (default 1)\n"
    "  -q, --quiet           print only the verdict line\n"
    "Output (stdout): \"ppl\", \"ppl_base\", \"ppl_ratio\", \"kld\", \"kld_max\", \"top1\",\n"
    "\"tokens_scored\" lines, then \"Q.gguf: OK\" or \"Q.gguf: FAILED: reasons\".\n"
    "exit status: 0 within every threshold, 1 a threshold crossed or a bad file,\n"
    "2 usage, 3 I/O error\n";

struct eval_args {
    const char *q, *ref, *text, *junit;
    double max_kld, min_top1, max_ppl_ratio;
    bool has_kld, has_top1, has_ratio, quiet;
    uint32_t ctx, chunks, threads;
    uint64_t bytes;
};

/* One run of rt_perplexity over model path (po: the protocol's options). */
static enum mw_status score(const char *path, const struct eval_args *a, const char *text,
                            size_t len, const struct rt_ppl_opts *po, struct rt_ppl_result *r,
                            struct mw_err *err)
{
    struct rt_model *m = NULL;
    struct rt_tok *t = NULL;
    struct rt_ctx *c = NULL;
    const struct rt_model_opts mo = {0};
    enum mw_status s = rt_model_open(path, &mo, &m, err);
    if (s == MW_OK) s = rt_tok_init(rt_model_gguf(m), rt_model_hparams(m)->n_vocab, &t, err);
    const struct rt_ctx_opts co = {.n_ctx = a->ctx, .kv_type = RT_KV_F16, .n_threads = a->threads};
    if (s == MW_OK) s = rt_ctx_init(m, &co, &c, err);
    if (s == MW_OK) s = rt_perplexity(c, t, text, len, po, r, err);
    rt_ctx_free(c);
    rt_tok_free(t);
    rt_model_close(m);
    return s;
}

static enum mw_status read_text(const char *path, uint64_t max, char **out, size_t *len,
                                struct mw_err *err)
{
    struct mw_map map;
    enum mw_status s = mw_map_open(&map, path, err);
    if (s != MW_OK) return s;
    const uint64_t n = map.size < max ? map.size : max;
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

/* Whether path starts with the GGUF magic (else: a logits file). */
static enum mw_status is_gguf(const char *path, bool *yes, struct mw_err *err)
{
    struct mw_map map;
    enum mw_status s = mw_map_open(&map, path, err);
    if (s != MW_OK) return s;
    *yes = map.size >= 4 && memcmp(map.data, "GGUF", 4) == 0;
    mw_map_close(&map);
    return MW_OK;
}

/* The reference's logits: REF itself, or a run of REF over the text saved
 * to a temporary file (*tmp, to be unlinked). */
static enum mw_status reference_logits(const struct eval_args *a, char *tmp, size_t cap,
                                       const char **base, struct mw_err *err)
{
    bool gguf;
    enum mw_status s = is_gguf(a->ref, &gguf, err);
    *base = a->ref;
    if (s != MW_OK || !gguf) return s;
    if (!a->text)
        return MW_FAIL(err, MW_E_USAGE, MW_ERR_OFF_NONE,
                       "missing --text TEXT (the reference is a model, not saved logits)");
    const char *dir = getenv("TMPDIR");
    snprintf(tmp, cap, "%s/memwall-eval-ref.XXXXXX", dir && *dir ? dir : "/tmp");
    const int fd = mkstemp(tmp);
    if (fd < 0) {
        const enum mw_status e = mw_file_errno_fail(err, tmp, errno, "create");
        tmp[0] = '\0';
        return e;
    }
    close(fd);
    char *text = NULL;
    size_t len = 0;
    if ((s = read_text(a->text, a->bytes, &text, &len, err)) != MW_OK) return s;
    const struct rt_ppl_opts po = {.n_ctx = a->ctx, .max_chunks = a->chunks, .save_logits = tmp};
    struct rt_ppl_result r;
    s = score(a->ref, a, text, len, &po, &r, err);
    free(text);
    if (s == MW_OK) *base = tmp;
    return s;
}

/* The thresholds crossed, "; "-separated, into why (empty: none). */
static void verdict(const struct eval_args *a, const struct rt_ppl_result *r, double ratio,
                    char *why, size_t cap, struct junit_case *jc, size_t *n_jc, char msgs[][160],
                    char names[][300])
{
    size_t o = 0;
    why[0] = '\0';
    *n_jc = 0;
    struct {
        bool on, bad;
        char line[160];
    } t[3] = {{a->has_kld, r->kld > a->max_kld, ""},
              {a->has_top1, r->same_top < a->min_top1, ""},
              {a->has_ratio, ratio > a->max_ppl_ratio, ""}};
    snprintf(t[0].line, sizeof t[0].line, "kld %.6f %s --max-kld %g", r->kld,
             t[0].bad ? ">" : "<=", a->max_kld);
    snprintf(t[1].line, sizeof t[1].line, "top1 %.6f %s --min-top1 %g", r->same_top,
             t[1].bad ? "<" : ">=", a->min_top1);
    snprintf(t[2].line, sizeof t[2].line, "ppl ratio %.6f %s --max-ppl-ratio %g", ratio,
             t[2].bad ? ">" : "<=", a->max_ppl_ratio);
    static const char *const opt[3] = {"max-kld", "min-top1", "max-ppl-ratio"};
    for (int i = 0; i < 3; i++) {
        if (!t[i].on) continue;
        snprintf(msgs[*n_jc], 160, "%s", t[i].line);
        snprintf(names[*n_jc], 300, "%s: %s", a->q, opt[i]);
        jc[*n_jc] = (struct junit_case){.name = names[*n_jc], .message = msgs[*n_jc],
                                        .result = t[i].bad ? JUNIT_FAILURE : JUNIT_PASS,
                                        .type = t[i].bad ? "threshold" : NULL,
                                        .text = msgs[*n_jc]};
        (*n_jc)++;
        if (t[i].bad && o < cap)
            o += (size_t)snprintf(why + o, cap - o, "%s%s", o ? "; " : "", t[i].line);
    }
}

static int write_junit(const struct eval_args *a, const struct rt_ppl_result *r, double ratio,
                       const struct junit_case *jc, size_t n_jc, double secs)
{
    char v[7][48];
    snprintf(v[0], sizeof v[0], "%.6f", r->ppl);
    snprintf(v[1], sizeof v[1], "%.6f", r->ppl_base);
    snprintf(v[2], sizeof v[2], "%.6f", ratio);
    snprintf(v[3], sizeof v[3], "%.6f", r->kld);
    snprintf(v[4], sizeof v[4], "%.6f", r->kld_max);
    snprintf(v[5], sizeof v[5], "%.6f", r->same_top);
    snprintf(v[6], sizeof v[6], "%" PRIu64, r->n_scored);
    const struct junit_prop props[] = {
        {"file", a->q}, {"reference", a->ref}, {"ppl", v[0]}, {"ppl_base", v[1]},
        {"ppl_ratio", v[2]}, {"kld", v[3]}, {"kld_max", v[4]}, {"top1", v[5]},
        {"tokens_scored", v[6]},
    };
    /* without thresholds: one passing case, so the run shows */
    const struct junit_case measured = {.name = "measured", .result = JUNIT_PASS};
    char suite[300];
    snprintf(suite, sizeof suite, "memwall eval %s", a->q);
    const struct junit_suite s = {.name = suite, .classname = "memwall.eval",
                                  .cases = n_jc ? jc : &measured, .n_cases = n_jc ? n_jc : 1,
                                  .props = props, .n_props = sizeof props / sizeof props[0],
                                  .seconds = secs};
    return junit_write(cmd, a->junit, &s);
}

/* A run that could not measure: the error, and with --junit an <error> case. */
static int eval_fail(const struct eval_args *a, const struct mw_err *err, double secs)
{
    const int rc = cmd_fail(cmd, err);
    if (!a->junit) return rc;
    char msg[1200];
    mw_err_format(err, msg, sizeof msg);
    const struct junit_case c = {.name = "measure", .result = JUNIT_ERROR,
                                 .type = mw_status_name(err->code), .message = msg};
    char suite[300];
    snprintf(suite, sizeof suite, "memwall eval %s", a->q);
    const struct junit_suite s = {.name = suite, .classname = "memwall.eval", .cases = &c,
                                  .n_cases = 1, .seconds = secs};
    const int jrc = junit_write(cmd, a->junit, &s);
    return jrc ? jrc : rc;
}

static int parse(struct eval_args *a, int argc, char **argv)
{
    /* a threshold not given stays negative */
    *a = (struct eval_args){.ctx = 256, .threads = 1, .bytes = UINT64_MAX, .max_kld = -1,
                            .min_top1 = -1, .max_ppl_ratio = -1};
    const struct cmd_opt spec[] = {
        {NULL, "--reference", CMD_OPT_STR, .str = &a->ref},
        {NULL, "--text", CMD_OPT_STR, .str = &a->text},
        {NULL, "--max-kld", CMD_OPT_DOUBLE, .dbl = &a->max_kld, .dmin = 0, .dmax = 1e300,
         .bad = "--max-kld: '%v' is not a number >= 0"},
        {NULL, "--min-top1", CMD_OPT_DOUBLE, .dbl = &a->min_top1, .dmin = 0, .dmax = 1,
         .bad = "--min-top1: '%v' is not a fraction 0..1"},
        {NULL, "--max-ppl-ratio", CMD_OPT_DOUBLE, .dbl = &a->max_ppl_ratio, .dmin = 0,
         .dmax = 1e300, .dmin_open = true, .bad = "--max-ppl-ratio: '%v' is not a number > 0"},
        {NULL, "--junit", CMD_OPT_STR, .str = &a->junit},
        {"-c", "--ctx", CMD_OPT_U32, .u32 = &a->ctx, .min = 4, .max = RT_MAX_CTX,
         .bad = "--ctx: '%v' is not %n..%x"},
        {NULL, "--chunks", CMD_OPT_U32, .u32 = &a->chunks, .min = 1, .max = UINT32_MAX},
        {NULL, "--bytes", CMD_OPT_U64, .u64 = &a->bytes, .min = 1, .max = UINT64_MAX - 1},
        {"-t", "--threads", CMD_OPT_U32, .u32 = &a->threads, .min = 1, .max = RT_MAX_THREADS,
         .bad = "--threads: '%v' is not %n..%x"},
        {"-q", "--quiet", CMD_OPT_FLAG, .flag = &a->quiet},
    };
    struct cmd_opts op = {CMD_OPTS_TABLE(spec), .pos = &a->q, .max_pos = 1,
                          .too_many = "one file at a time (got '%p' and '%a')"};
    const int prc = cmd_parse_args(&op, cmd, usage_text, argc, argv);
    if (prc != CMD_GO_ON) return prc;
    a->has_kld = a->max_kld >= 0, a->has_top1 = a->min_top1 >= 0;
    a->has_ratio = a->max_ppl_ratio > 0;
    if (!a->q) return cmd_usage_error(cmd, usage_text, "missing Q.gguf");
    if (!a->ref) return cmd_usage_error(cmd, usage_text, "missing --reference REF");
    return CMD_GO_ON;
}

static void print_figures(const struct rt_ppl_result *r, double ratio)
{
    printf("ppl %.6f\nppl_base %.6f\nppl_ratio %.6f\n", r->ppl, r->ppl_base, ratio);
    printf("kld %.6f\nkld_max %.6f\ntop1 %.6f\n", r->kld, r->kld_max, r->same_top);
    printf("tokens_scored %" PRIu64 "\nchunks %u\n", r->n_scored, r->n_chunk);
}

int cmd_eval(int argc, char **argv)
{
    struct eval_args a;
    int rc = parse(&a, argc, argv);
    if (rc != CMD_GO_ON) return rc;
    const double t0 = mw_now_s();
    struct mw_err err;
    mw_err_clear(&err);
    char tmp[4096] = "";
    const char *base = NULL;
    enum mw_status s = reference_logits(&a, tmp, sizeof tmp, &base, &err);
    if (s == MW_E_USAGE) return cmd_usage_error(cmd, usage_text, "%s", err.msg);
    struct rt_ppl_result r;
    if (s == MW_OK) {
        const struct rt_ppl_opts po = {.n_ctx = a.ctx, .max_chunks = a.chunks, .kld_base = base};
        s = score(a.q, &a, "", 0, &po, &r, &err);
    }
    if (tmp[0]) unlink(tmp);
    if (s != MW_OK) return eval_fail(&a, &err, mw_now_s() - t0);
    const double ratio = r.ppl_base > 0 ? r.ppl / r.ppl_base : 0.0;
    char why[600];
    struct junit_case jc[3];
    char msgs[3][160], names[3][300];
    size_t n_jc;
    verdict(&a, &r, ratio, why, sizeof why, jc, &n_jc, msgs, names);
    if (!a.quiet) print_figures(&r, ratio);
    cmd_put_text(stdout, a.q);
    if (why[0]) printf(": FAILED: %s\n", why);
    else printf(": OK: kld %.6f, top1 %.4f, ppl ratio %.4f over %" PRIu64 " tokens\n", r.kld,
                r.same_top, ratio, r.n_scored);
    if (why[0]) {
        fprintf(stderr, "memwall %s: ", cmd);
        cmd_put_text(stderr, a.q);
        fprintf(stderr, ": %s\n", why);
    }
    rc = why[0] ? mw_status_exit_code(MW_E_VALUE) : 0;
    if (a.junit) {
        const int jrc = write_junit(&a, &r, ratio, jc, n_jc, mw_now_s() - t0);
        if (jrc) rc = jrc;
    }
    return cmd_finish_output(cmd, rc);
}
