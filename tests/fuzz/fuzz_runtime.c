/* Fuzz target: the runtime's graph builder and tokenizer on arbitrary bytes.
 * A file the GGUF reader accepts goes through rt_model_from_gguf (every
 * key, shape and type check); what the runtime accepts is then tokenized,
 * and two tokens are run through the forward pass with a 4-position
 * context (sizes are bounded by the file, which holds every weight). */
#include <stddef.h>
#include <stdint.h>

#include "gguf/gguf.h"
#include "runtime/rt.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct gguf_file *f = NULL;
    struct mw_err err;
    mw_err_clear(&err);
    if (gguf_open_mem(data, size, "fuzz", GGUF_OPEN_DEFAULT, &f, &err) != MW_OK) return 0;
    struct rt_model *m = NULL;
    struct rt_tok *t = NULL;
    struct rt_ctx *c = NULL;
    volatile uint64_t sink = 0;
    char buf[512];
    if (rt_model_from_gguf(f, &m, &err) != MW_OK) {
        sink += (uint8_t)mw_err_format(&err, buf, sizeof buf)[0];
        goto done;
    }
    uint64_t n_checked = 0;
    sink += rt_model_verify(m, &n_checked, &err) + n_checked;
    const struct rt_hparams *hp = rt_model_hparams(m);
    int32_t toks[64];
    size_t n = 0;
    if (rt_tok_init(rt_model_gguf(m), hp->n_vocab, &t, &err) == MW_OK) {
        static const char text[] = "Hello world! It's 12345 <s> caf\xc3\xa9 \xff\n";
        if (rt_tok_encode(t, text, sizeof text - 1, true, true, toks, 64, &n, &err) == MW_OK) {
            for (size_t i = 0; i < n; i++) sink += rt_tok_piece(t, toks[i], true, buf, sizeof buf);
        }
        sink += (uint64_t)rt_tok_is_eog(t, 0);
    }
    /* only small graphs: the fuzzer must not spend its time in matmuls */
    if (hp->n_embd <= 256 && hp->n_ff <= 1024 && hp->n_layer <= 4 && hp->n_vocab <= 4096 &&
        rt_ctx_init(m, &(struct rt_ctx_opts){.n_ctx = 4, .n_threads = 1}, &c, &err) == MW_OK) {
        const int32_t two[2] = {0, (int32_t)(hp->n_vocab - 1)};
        if (rt_eval(c, two, 2, 0, NULL, &err) == MW_OK) sink += rt_ctx_logits(c)[0] > 0.0f;
    }
done:
    (void)sink;
    rt_ctx_free(c);
    rt_tok_free(t);
    rt_model_close(m);
    gguf_close(f);
    return 0;
}
