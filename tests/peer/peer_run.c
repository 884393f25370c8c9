/*
 * llama-peer tokenize, generate, bench and info: the commands that load a
 * model and tokenize, decode greedily, time or describe it.
 */
#define _GNU_SOURCE
#include "peer.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>

/* ------------------------------------------------------------- tokenize */

static void print_tokens(const llama_token *t, int n)
{
    for (int i = 0; i < n; ++i) printf(i ? " %d" : "%d", t[i]);
    putchar('\n');
}

int cmd_tokenize(const char *model_path, const char *text_path, int add_bos, int parse_special,
                 long bytes)
{
    size_t len;
    char *text = read_file(text_path, &len);
    if (bytes >= 0 && (size_t)bytes < len) len = (size_t)bytes;
    peer_init();
    struct llama_model_params mp = llama_model_default_params();
    mp.vocab_only = true;
    struct stat st;
    if (stat(model_path, &st) != 0) die(EXIT_LOAD, "cannot load %s: %s", model_path, strerror(errno));
    struct llama_model *model = llama_model_load_from_file(model_path, mp);
    if (!model) {
        print_llama_errors();
        die(EXIT_LOAD, "llama.cpp failed to load %s", model_path);
    }
    int n;
    llama_token *t = tokenize_ex(llama_model_get_vocab(model), text, len, add_bos, parse_special, &n);
    print_tokens(t, n);
    free(t);
    free(text);
    llama_model_free(model);
    llama_backend_free();
    return 0;
}

/* ------------------------------------------------------------- generate */

int cmd_generate(const char *model_path, const char *prompt, int n_gen, int stop_eog)
{
    peer_init();
    struct llama_model *model = load_model(model_path);
    const struct llama_vocab *vocab = llama_model_get_vocab(model);
    const int n_vocab = llama_vocab_n_tokens(vocab);
    int n_prompt;
    llama_token *pt = tokenize(vocab, prompt, strlen(prompt), 1, &n_prompt);
    if (n_prompt == 0) die(EXIT_USAGE, "empty prompt");
    const int n_ctx = n_prompt + n_gen;
    if (n_ctx > llama_model_n_ctx_train(model))
        fprintf(stderr, "llama-peer: warning: %d tokens exceed the model's training context %d\n", n_ctx,
                llama_model_n_ctx_train(model));
    struct llama_context *ctx = make_context(model, (uint32_t)n_ctx, (uint32_t)(n_prompt > 512 ? n_prompt : 512), 1);

    llama_token *out = xmalloc(sizeof *out * (size_t)(n_gen > 0 ? n_gen : 1));
    int n_out = 0;
    struct llama_batch b = llama_batch_get_one(pt, n_prompt);
    llama_token cur;
    const double t0 = now_s();
    while (n_out < n_gen) {
        if (llama_decode(ctx, b)) {
            print_llama_errors();
            die(EXIT_FAIL, "llama_decode failed at generated token %d", n_out);
        }
        const float *l = llama_get_logits_ith(ctx, -1);
        int best = 0; /* greedy: first maximum, like llama_sampler_init_greedy */
        for (int i = 1; i < n_vocab; ++i)
            if (l[i] > l[best]) best = i;
        cur = best;
        out[n_out++] = cur;
        if (stop_eog && llama_vocab_is_eog(vocab, cur)) break;
        b = llama_batch_get_one(&cur, 1);
    }
    const double t1 = now_s();
    print_tokens(out, n_out);
    if (g_verbose)
        fprintf(stderr, "llama-peer: %d prompt + %d generated tokens in %.3f s\n", n_prompt, n_out, t1 - t0);
    free(out);
    free(pt);
    llama_free(ctx);
    llama_model_free(model);
    llama_backend_free();
    return 0;
}

/* ---------------------------------------------------------------- bench */

/* Timing in the shape of memwall-run's: the prompt as one llama_decode call
 * (one batch), then N greedy tokens, each sampled and (except the last, whose
 * logits are not needed) decoded alone; decode t/s = N / that time. Output:
 * "prompt_tokens P prompt_s X prompt_tps Y" / "gen_tokens N gen_s X gen_tps Y"
 * / "maxrss_kib R" (getrusage, the whole process). */
int cmd_bench(const char *model_path, const char *prompt, int n_gen)
{
    peer_init();
    struct llama_model *model = load_model(model_path);
    const struct llama_vocab *vocab = llama_model_get_vocab(model);
    const int n_vocab = llama_vocab_n_tokens(vocab);
    int n_prompt;
    llama_token *pt = tokenize(vocab, prompt, strlen(prompt), 1, &n_prompt);
    if (n_prompt == 0) die(EXIT_USAGE, "empty prompt");
    const int n_ctx = n_prompt + n_gen;
    struct llama_context *ctx = make_context(model, (uint32_t)n_ctx, (uint32_t)(n_prompt > 512 ? n_prompt : 512), 1);
    const double t0 = now_s();
    if (llama_decode(ctx, llama_batch_get_one(pt, n_prompt))) {
        print_llama_errors();
        die(EXIT_FAIL, "llama_decode failed on the prompt");
    }
    const double t1 = now_s();
    for (int i = 0; i < n_gen; ++i) {
        const float *l = llama_get_logits_ith(ctx, -1);
        int best = 0;
        for (int j = 1; j < n_vocab; ++j)
            if (l[j] > l[best]) best = j;
        if (i + 1 == n_gen) break;
        llama_token cur = best;
        if (llama_decode(ctx, llama_batch_get_one(&cur, 1))) {
            print_llama_errors();
            die(EXIT_FAIL, "llama_decode failed at generated token %d", i);
        }
    }
    const double t2 = now_s();
    struct rusage ru;
    long rss = getrusage(RUSAGE_SELF, &ru) == 0 ? ru.ru_maxrss : -1;
    printf("prompt_tokens %d prompt_s %.6f prompt_tps %.2f\n", n_prompt, t1 - t0,
           t1 > t0 ? n_prompt / (t1 - t0) : 0.0);
    printf("gen_tokens %d gen_s %.6f gen_tps %.2f\n", n_gen, t2 - t1, t2 > t1 ? n_gen / (t2 - t1) : 0.0);
    printf("maxrss_kib %ld\n", rss);
    free(pt);
    llama_free(ctx);
    llama_model_free(model);
    llama_backend_free();
    return 0;
}

/* ----------------------------------------------------------------- info */

int cmd_info(const char *model_path)
{
    peer_init();
    struct llama_model *model = load_model(model_path);
    const struct llama_vocab *vocab = llama_model_get_vocab(model);
    char buf[512];
    llama_model_desc(model, buf, sizeof buf);
    printf("desc %s\n", buf);
    if (llama_model_meta_val_str(model, "general.architecture", buf, sizeof buf) >= 0) printf("arch %s\n", buf);
    if (llama_model_meta_val_str(model, "general.file_type", buf, sizeof buf) >= 0) printf("file_type %s\n", buf);
    printf("n_vocab %d\n", llama_vocab_n_tokens(vocab));
    printf("vocab_type %d\n", (int)llama_vocab_type(vocab));
    printf("n_layer %d\n", llama_model_n_layer(model));
    printf("n_embd %d\n", llama_model_n_embd(model));
    printf("n_head %d\n", llama_model_n_head(model));
    printf("n_head_kv %d\n", llama_model_n_head_kv(model));
    printf("n_ctx_train %d\n", llama_model_n_ctx_train(model));
    printf("rope_type %d\n", (int)llama_model_rope_type(model));
    printf("n_params %llu\n", (unsigned long long)llama_model_n_params(model));
    printf("size_bytes %llu\n", (unsigned long long)llama_model_size(model));
    printf("bos %d\n", llama_vocab_bos(vocab));
    printf("eos %d\n", llama_vocab_eos(vocab));
    printf("add_bos %d\n", llama_vocab_get_add_bos(vocab) ? 1 : 0);
    printf("add_eos %d\n", llama_vocab_get_add_eos(vocab) ? 1 : 0);
    printf("n_meta %d\n", llama_model_meta_count(model));
    printf("cpu_backend %s\n", cpu_variant_name());
    printf("llama_commit %s\n", PEER_LLAMA_COMMIT);
    llama_model_free(model);
    llama_backend_free();
    return 0;
}
