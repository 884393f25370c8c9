/*
 * llama-peer — a small driver over llama.cpp's C API (llama.h), linked to the
 * prebuilt CPU libraries of the npm package node-llama-cpp (pinned, see
 * tests/peer/setup.sh).  memwall's tests and benchmarks use it to check that
 * llama.cpp loads our GGUF files unchanged and scores them as llama.cpp's own
 * tools do.
 *
 *   llama-peer [-v] [--threads N] [--cpu VARIANT|auto] [--no-repack] COMMAND ...
 *
 *   ppl MODEL TEXT [--ctx 256] [--batch B] [--bytes N] [--chunks K]
 *                  [--save-logits F] [--save-logits-llamacpp F] [--kld-base F]
 *   tokenize MODEL TEXTFILE [--no-bos] [--parse-special] [--bytes N]
 *   generate MODEL PROMPT N [--stop-eog]
 *   info MODEL
 *   quantize IN OUT TYPE [--imatrix FILE] [--pure] [--allow-requantize]
 *   version
 *
 * Output is one "key value ..." record per line on stdout; diagnostics go to
 * stderr.  Exit status: 0 ok, 1 the model failed to load (llama.cpp's reason
 * is printed), 2 usage, 3 any other failure.
 *
 * The ppl command is llama-perplexity's protocol (tools/perplexity/
 * perplexity.cpp at the pinned commit), step by step: the file is read whole,
 * one trailing '\n' is dropped (as `-f` does), tokenized once with
 * add_special=true / parse_special=false; cut into n_chunk = n_tokens/ctx
 * chunks; the first token of each chunk is replaced by BOS; the chunk is
 * decoded with outputs for positions ctx/2 .. ctx-1; positions ctx/2 .. ctx-2
 * are scored against tokens ctx/2+1 .. ctx-1 with the same float/double
 * arithmetic as llama.cpp.  --batch B (default ctx, i.e. llama-perplexity
 * -c ctx -b ctx) reproduces -b B as well: B >= ctx packs B/ctx chunks per
 * decode as parallel sequences, B < ctx splits a chunk into several decodes.
 */
#define _GNU_SOURCE
#include "peer.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---------------------------------------------------------------- main */

static void usage(void)
{
    fprintf(stderr,
            "usage: llama-peer [-v] [--threads N] [--cpu VARIANT|auto] [--no-repack] COMMAND ...\n"
            "  ppl MODEL.gguf TEXTFILE [--ctx 256] [--batch B] [--bytes N] [--chunks K]\n"
            "      [--save-logits F] [--save-logits-llamacpp F] [--kld-base F]\n"
            "  tokenize MODEL.gguf TEXTFILE [--no-bos] [--parse-special] [--bytes N]\n"
            "  generate MODEL.gguf PROMPT N [--stop-eog]\n"
            "  bench MODEL.gguf PROMPT N   (prompt and N-token decode timings, peak RSS)\n"
            "  info MODEL.gguf\n"
            "  quantize IN.gguf OUT.gguf TYPE [--imatrix IMATRIX.gguf] [--pure] [--allow-requantize]\n"
            "  version\n"
            "node-llama-cpp %s, llama.cpp %s; CPU only, %d threads by default\n"
            "(MW_PEER_THREADS sets the default).\n",
            PEER_NLC_VERSION, PEER_LLAMA_COMMIT, 2);
    exit(EXIT_USAGE);
}

int main(int argc, char **argv)
{
    g_cpu_variant = getenv("MW_PEER_CPU_VARIANT");
    /* MW_PEER_THREADS: the default of --threads (CTest sets 1: beside another
     * test on a small machine, ggml's spinning thread barrier loses most of
     * its time to the other process; one thread gives the same results) */
    const char *env_threads = getenv("MW_PEER_THREADS");
    if (env_threads && *env_threads)
        g_threads = (int)parse_long(env_threads, "MW_PEER_THREADS", 1, 512);
    /* split global options from the command and its positional args; options
     * may appear anywhere */
    const char *pos[8];
    int npos = 0;
    struct ppl_opts po = {.ctx = 256, .batch = 0, .chunks = 0, .bytes = -1};
    int no_bos = 0, stop_eog = 0, pure = 0, parse_special = 0, allow_requantize = 0;
    long tok_bytes = -1;
    const char *imatrix = NULL;
    for (int i = 1; i < argc; ++i) {
        const char *a = argv[i];
#define NEED_ARG() do { if (i + 1 >= argc) die(EXIT_USAGE, "%s needs a value", a); } while (0)
        if (!strcmp(a, "-v") || !strcmp(a, "--verbose")) g_verbose = 1;
        else if (!strcmp(a, "-h") || !strcmp(a, "--help")) usage();
        else if (!strcmp(a, "--threads") || !strcmp(a, "-t")) { NEED_ARG(); g_threads = (int)parse_long(argv[++i], a, 1, 512); }
        else if (!strcmp(a, "--no-repack")) g_no_repack = 1;
        else if (!strcmp(a, "--cpu")) { NEED_ARG(); g_cpu_variant = argv[++i]; }
        else if (!strcmp(a, "--ctx") || !strcmp(a, "-c")) { NEED_ARG(); po.ctx = (int)parse_long(argv[++i], a, 4, 1 << 20); }
        else if (!strcmp(a, "--batch") || !strcmp(a, "-b")) { NEED_ARG(); po.batch = (int)parse_long(argv[++i], a, 1, 1 << 20); }
        else if (!strcmp(a, "--chunks")) { NEED_ARG(); po.chunks = (int)parse_long(argv[++i], a, 1, INT_MAX); }
        else if (!strcmp(a, "--bytes")) { NEED_ARG(); po.bytes = tok_bytes = parse_long(argv[++i], a, 0, LONG_MAX); }
        else if (!strcmp(a, "--save-logits")) { NEED_ARG(); po.save_f32 = argv[++i]; }
        else if (!strcmp(a, "--save-logits-llamacpp")) { NEED_ARG(); po.save_lcpp = argv[++i]; }
        else if (!strcmp(a, "--kld-base")) { NEED_ARG(); po.kld_base = argv[++i]; }
        else if (!strcmp(a, "--no-bos")) no_bos = 1;
        else if (!strcmp(a, "--parse-special")) parse_special = 1;
        else if (!strcmp(a, "--stop-eog")) stop_eog = 1;
        else if (!strcmp(a, "--pure")) pure = 1;
        else if (!strcmp(a, "--allow-requantize")) allow_requantize = 1;
        else if (!strcmp(a, "--imatrix")) { NEED_ARG(); imatrix = argv[++i]; }
        else if (a[0] == '-' && a[1] == '-') die(EXIT_USAGE, "unknown option %s", a);
        else {
            if (npos == (int)(sizeof pos / sizeof pos[0])) die(EXIT_USAGE, "too many arguments");
            pos[npos++] = a;
        }
#undef NEED_ARG
    }
    if (npos < 1) usage();
    const char *cmd = pos[0];
    if (!strcmp(cmd, "version")) {
        peer_init();
        printf("node-llama-cpp %s\nllama_commit %s\nlibdir %s\ncpu_backend %s\n", PEER_NLC_VERSION,
               PEER_LLAMA_COMMIT, g_libdir, cpu_variant_name());
        llama_backend_free();
        return 0;
    }
    if (!strcmp(cmd, "ppl")) {
        if (npos != 3) usage();
        if (po.save_f32 && po.kld_base) die(EXIT_USAGE, "--save-logits and --kld-base are exclusive");
        if (po.save_lcpp && (po.kld_base || po.save_f32)) die(EXIT_USAGE, "--save-logits-llamacpp goes alone");
        return cmd_ppl(pos[1], pos[2], &po);
    }
    if (!strcmp(cmd, "tokenize")) {
        if (npos != 3) usage();
        return cmd_tokenize(pos[1], pos[2], !no_bos, parse_special, tok_bytes);
    }
    if (!strcmp(cmd, "generate")) {
        if (npos != 4) usage();
        return cmd_generate(pos[1], pos[2], (int)parse_long(pos[3], "N", 0, 1 << 20), stop_eog);
    }
    if (!strcmp(cmd, "bench")) {
        if (npos != 4) usage();
        return cmd_bench(pos[1], pos[2], (int)parse_long(pos[3], "N", 1, 1 << 20));
    }
    if (!strcmp(cmd, "info")) {
        if (npos != 2) usage();
        return cmd_info(pos[1]);
    }
    if (!strcmp(cmd, "quantize")) {
        if (npos != 4) usage();
        return cmd_quantize(pos[1], pos[2], pos[3], imatrix, pure, allow_requantize);
    }
    die(EXIT_USAGE, "unknown command '%s' (try --help)", cmd);
}
