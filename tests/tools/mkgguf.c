/*
 * tests/tools/mkgguf.c — deterministic GGUF fixtures, written with memwall's
 * own gguf writer (so they carry memwall checksums unless asked otherwise).
 *
 *   mkgguf small OUT [--nan] [--no-checksums]
 *       ~1 KB: a few KVs (string, u32, bool, u32/f32/string arrays) and four
 *       small tensors of F32, F16, BF16 and Q8_0, each followed by padding
 *       (tests/tools/fixtures.h). --nan puts a NaN into t.f16 (element 3),
 *       for `verify --deep`.
 *   mkgguf big OUT SIZE_MB
 *       about SIZE_MB MiB of F16 and Q8_0 tensors (finite values), for
 *       bench/verify_bench.sh.
 *   mkgguf cuts IN DIR
 *       every proper prefix of file IN as DIR/cut-<length>.gguf (lengths
 *       0..size-1), in one process: the truncation sweep then spawns only
 *       memwall per length.
 *
 * The same arguments always give byte-identical files. Exit status: 0 ok,
 * 1 on a writer error (message on stderr), 2 usage.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gguf/gguf.h"
#include "fixtures.h"

static const char usage_text[] =
    "usage: mkgguf small OUT [--nan] [--no-checksums]\n"
    "       mkgguf big OUT SIZE_MB\n"
    "       mkgguf cuts IN DIR\n";

static int fail(const struct mw_err *err)
{
    char buf[1024];
    fprintf(stderr, "mkgguf: %s\n", mw_err_format(err, buf, sizeof buf));
    return 1;
}

#define TRY(expr)                                  \
    do {                                           \
        if ((expr) != MW_OK) goto fail;            \
    } while (0)

// --- small ---

static int make_small(const char *out, bool nan, bool checksums)
{
    struct mw_err err;
    mw_err_clear(&err);
    const struct fx_opts o = {.no_checksums = !checksums, .poison = nan ? FX_NAN_F16 : FX_POISON_NONE};
    if (fx_write_small(out, &o, &err) != MW_OK) return fail(&err);
    return 0;
}

// --- big ---

/* Fill n bytes of tensor data of type t with finite values. */
static void fill(uint64_t *r, uint32_t type, uint8_t *p, size_t n)
{
    if (type == GGUF_TYPE_F16) {
        /* bit 14 clear: exponent <= 15, |x| < 2, never Inf/NaN */
        for (size_t i = 0; i + 8 <= n; i += 8) {
            const uint64_t v = fx_rng_next(r) & 0xbfffbfffbfffbfffULL;
            mw_put_le64(p + i, v);
        }
        return;
    }
    /* Q8_0: 34-byte blocks, small positive scale, random quants */
    for (size_t i = 0; i + 34 <= n; i += 34) {
        const uint64_t v = fx_rng_next(r);
        mw_put_le16(p + i, (uint16_t)(0x1c00 | (v & 0x3ff)));
        for (int k = 0; k < 32; k += 8) mw_put_le64(p + i + 2 + k, fx_rng_next(r));
    }
}

static int make_big(const char *out, const char *size_arg)
{
    char *end;
    errno = 0;
    const unsigned long long mb = strtoull(size_arg, &end, 10);
    if (errno || end == size_arg || *end || mb == 0 || mb > (1ull << 20)) {
        fprintf(stderr, "mkgguf: bad SIZE_MB '%s'\n%s", size_arg, usage_text);
        return 2;
    }
    struct mw_err err;
    mw_err_clear(&err);
    struct gguf_writer *w = NULL;
    uint64_t r = 0x626967ULL;
    uint8_t *buf = NULL;
    TRY(gguf_writer_init(&w, &err));
    TRY(gguf_writer_set_str(w, "general.architecture", "llama", &err));
    TRY(gguf_writer_set_str(w, "general.name", "mkgguf big", &err));

    /* alternate F16 tensors of 4096 x 8192 (64 MiB) and Q8_0 tensors of
     * 4096 x 8192 (34 MiB) until the size is reached; the last is shortened
     * to whole rows */
    const uint64_t want = (uint64_t)mb << 20;
    const uint64_t ne0 = 4096, rows_max = 8192;
    uint64_t total = 0;
    uint32_t types[4096];
    uint64_t rows[4096];
    int n = 0;
    while (total < want && n < 4096) {
        const uint32_t t = (n % 2 == 0) ? GGUF_TYPE_F16 : GGUF_TYPE_Q8_0;
        const uint64_t row_bytes = t == GGUF_TYPE_F16 ? ne0 * 2 : ne0 / 32 * 34;
        uint64_t nr = (want - total + row_bytes - 1) / row_bytes;
        if (nr > rows_max) nr = rows_max;
        char name[32];
        snprintf(name, sizeof name, "blk.%d.%s.weight", n / 2, t == GGUF_TYPE_F16 ? "ffn_up" : "ffn_down");
        const uint64_t ne[2] = {ne0, nr};
        TRY(gguf_writer_add_tensor(w, name, t, 2, ne, &err));
        types[n] = t;
        rows[n] = nr;
        total += nr * row_bytes;
        n++;
    }
    TRY(gguf_writer_open(w, out, &err));
    const size_t chunk_rows = 64;
    buf = malloc(chunk_rows * ne0 * 2);
    if (!buf) {
        MW_FAIL(&err, MW_E_NOMEM, MW_ERR_OFF_NONE, "out of memory");
        goto fail;
    }
    for (int i = 0; i < n; i++) {
        const uint64_t row_bytes = types[i] == GGUF_TYPE_F16 ? ne0 * 2 : ne0 / 32 * 34;
        for (uint64_t done = 0; done < rows[i];) {
            const uint64_t k = rows[i] - done < chunk_rows ? rows[i] - done : chunk_rows;
            fill(&r, types[i], buf, (size_t)(k * row_bytes));
            TRY(gguf_writer_write(w, buf, (size_t)(k * row_bytes), &err));
            done += k;
        }
    }
    TRY(gguf_writer_finish(w, &err));
    free(buf);
    gguf_writer_free(w);
    return 0;
fail:
    free(buf);
    gguf_writer_free(w);
    return fail(&err);
}

// --- cuts ---

static int make_cuts(const char *in, const char *dir)
{
    FILE *f = fopen(in, "rb");
    if (!f) {
        fprintf(stderr, "mkgguf: cannot open %s: %s\n", in, strerror(errno));
        return 1;
    }
    uint8_t buf[1 << 16];
    const size_t n = fread(buf, 1, sizeof buf, f);
    const bool more = fgetc(f) != EOF;
    fclose(f);
    if (more) {
        fprintf(stderr, "mkgguf: %s: larger than %zu bytes\n", in, sizeof buf);
        return 1;
    }
    for (size_t len = 0; len < n; len++) {
        char path[4096];
        snprintf(path, sizeof path, "%s/cut-%zu.gguf", dir, len);
        FILE *o = fopen(path, "wb");
        bool ok = o != NULL;
        if (o) ok = fwrite(buf, 1, len, o) == len;
        if (o && fclose(o) != 0) ok = false;
        if (!ok) {
            fprintf(stderr, "mkgguf: cannot write %s: %s\n", path, strerror(errno));
            return 1;
        }
    }
    return 0;
}

int main(int argc, char **argv)
{
    if (argc >= 3 && strcmp(argv[1], "small") == 0) {
        bool nan = false, checksums = true;
        for (int i = 3; i < argc; i++) {
            if (strcmp(argv[i], "--nan") == 0) nan = true;
            else if (strcmp(argv[i], "--no-checksums") == 0) checksums = false;
            else {
                fprintf(stderr, "mkgguf: unknown option '%s'\n%s", argv[i], usage_text);
                return 2;
            }
        }
        return make_small(argv[2], nan, checksums);
    }
    if (argc == 4 && strcmp(argv[1], "big") == 0) return make_big(argv[2], argv[3]);
    if (argc == 4 && strcmp(argv[1], "cuts") == 0) return make_cuts(argv[2], argv[3]);
    fputs(usage_text, stderr);
    return 2;
}
