/*
 * tests/check_quant_pipeline.c — `memwall quant` as a library: importance
 * matrices and the streaming pipeline (the presets' type rules are
 * check_quant_preset's).
 *
 *   imatrix   the reference GGUF imatrix; legacy .dat written here from it;
 *             every truncation and a catalogue of corrupt files rejected
 *   pipeline  synthetic model: byte-identical output for 1, 2 and 8 threads,
 *             for tiny slabs, for a streamed (not mapped) source; KV order;
 *             imatrix length errors name tensor, expected and actual length
 */
#define _POSIX_C_SOURCE 200809L
#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "quant/quant.h"

#include "check_common.h"
#include "check_quant_model.h"

// --- imatrix ---

static char *data_path(const char *rel)
{
    static const char *const roots[] = {MW_DATASETS_DIR "/reference", MW_SHARED_DIR "/models/reference"};
    for (size_t i = 0; i < 2; i++) {
        char *p = xmalloc(1024);
        snprintf(p, 1024, "%s/%s", roots[i], rel);
        if (access(p, R_OK) == 0) return p;
        free(p);
    }
    return NULL;
}

struct buf {
    uint8_t *p;
    size_t n, cap;
};
static void put(struct buf *b, const void *d, size_t n)
{
    if (b->n + n > b->cap) {
        b->cap = (b->n + n) * 2;
        b->p = realloc(b->p, b->cap);
        ck_assert_ptr_nonnull(b->p);
    }
    memcpy(b->p + b->n, d, n);
    b->n += n;
}
static void put_i32(struct buf *b, int32_t v)
{
    uint8_t t[4];
    mw_put_le32(t, (uint32_t)v);
    put(b, t, 4);
}
static void put_f32(struct buf *b, float v)
{
    uint32_t u;
    memcpy(&u, &v, 4);
    uint8_t t[4];
    mw_put_le32(t, u);
    put(b, t, 4);
}

/* Legacy .dat from a loaded imatrix, as llama-imatrix --output-format dat
 * writes it: values * ncall; trailer with chunk count and dataset name. */
static struct buf make_dat(const struct quant_imatrix *im, int32_t ncall, bool trailer)
{
    struct buf b = {0};
    put_i32(&b, (int32_t)quant_imatrix_count(im));
    for (uint64_t i = 0; i < quant_imatrix_count(im); i++) {
        const char *nm = quant_imatrix_name(im, i);
        uint64_t n;
        const float *v = quant_imatrix_values(im, i, &n);
        put_i32(&b, (int32_t)strlen(nm));
        put(&b, nm, strlen(nm));
        put_i32(&b, ncall);
        put_i32(&b, (int32_t)n);
        for (uint64_t j = 0; j < n; j++) put_f32(&b, v[j] * (float)ncall);
    }
    if (trailer) {
        put_i32(&b, 345);
        put_i32(&b, 9);
        put(&b, "calib.txt", 9);
    }
    return b;
}

START_TEST(test_imatrix_gguf)
{
    char *path = data_path("tinyllama-8m.llamacpp.imatrix.gguf");
    if (!path) return; /* no reference data in this checkout */
    struct quant_imatrix *im = NULL;
    struct mw_err err;
    ck_assert_int_eq(quant_imatrix_load(path, &im, &err), MW_OK);
    ck_assert(!quant_imatrix_is_legacy(im));
    ck_assert_uint_eq(quant_imatrix_count(im), 56);
    ck_assert_uint_eq(quant_imatrix_chunk_count(im), 345);
    ck_assert_uint_eq(quant_imatrix_dataset_count(im), 1);
    ck_assert_str_eq(quant_imatrix_dataset(im, 0), "calib.txt");
    const int64_t k = quant_imatrix_find(im, "blk.3.ffn_down.weight");
    ck_assert_int_ge(k, 0);
    uint64_t n;
    const float *v = quant_imatrix_values(im, (uint64_t)k, &n);
    ck_assert_uint_eq(n, 768);
    /* in_sum2 / count from the file itself */
    size_t fsz;
    uint8_t *raw = read_file_ok(path, &fsz);
    struct gguf_file *f;
    ck_assert_int_eq(gguf_open_mem(raw, fsz, "im", 0, &f, &err), MW_OK);
    const int64_t ts = gguf_tensor_find(f, "blk.3.ffn_down.weight.in_sum2");
    const int64_t tc = gguf_tensor_find(f, "blk.3.ffn_down.weight.counts");
    const uint8_t *sd = gguf_tensor_data(f, (uint64_t)ts), *cd = gguf_tensor_data(f, (uint64_t)tc);
    float cnt, s0;
    memcpy(&cnt, cd, 4);
    ck_assert(cnt > 0);
    for (int j = 0; j < 768; j += 97) {
        memcpy(&s0, sd + 4 * j, 4);
        ck_assert(v[j] == s0 / cnt);
    }
    gguf_close(f);
    ck_assert_int_eq(quant_imatrix_find(im, "token_embd.weight"), -1);
    ck_assert_int_eq(quant_imatrix_find(im, "output.weight"), -1);
    ck_assert_uint_ne(quant_imatrix_hash(im), 0);

    /* legacy .dat with ncall 1: the very same values; with ncall 3 and a
     * trailer: value * 3 / 3 within an ulp */
    for (int pass = 0; pass < 2; pass++) {
        struct buf b = make_dat(im, pass ? 3 : 1, pass == 1);
        struct quant_imatrix *lg = NULL;
        ck_assert_int_eq(quant_imatrix_load_mem(b.p, b.n, "x.dat", &lg, &err), MW_OK);
        ck_assert(quant_imatrix_is_legacy(lg));
        ck_assert_uint_eq(quant_imatrix_count(lg), 56);
        ck_assert_uint_eq(quant_imatrix_chunk_count(lg), pass ? 345 : 0);
        ck_assert_uint_eq(quant_imatrix_dataset_count(lg), pass ? 1 : 0);
        for (uint64_t i = 0; i < 56; i++) {
            ck_assert_str_eq(quant_imatrix_name(lg, i), quant_imatrix_name(im, i));
            uint64_t na, nb;
            const float *a = quant_imatrix_values(im, i, &na), *c = quant_imatrix_values(lg, i, &nb);
            ck_assert_uint_eq(na, nb);
            uint64_t bad = 0;
            for (uint64_t j = 0; j < na; j++)
                bad += pass == 0 ? a[j] != c[j] : !(fabsf(a[j] - c[j]) <= 2e-7f * fabsf(a[j]));
            ck_assert_msg(bad == 0, "%s: %llu values differ", quant_imatrix_name(im, i),
                          (unsigned long long)bad);
        }
        /* every truncation of the legacy file is an error, never a crash
         * (a cut exactly before the optional trailer is a valid old file) */
        const size_t no_trailer = pass ? b.n - 17 : b.n;
        for (size_t cut = 0; cut < b.n; cut += (cut < 600 || b.n - cut < 600) ? 1 : 211) {
            struct quant_imatrix *t = NULL;
            const enum mw_status s = quant_imatrix_load_mem(b.p, cut, "cut.dat", &t, &err);
            if (cut == no_trailer) {
                ck_assert_int_eq(s, MW_OK);
            } else {
                ck_assert_msg(s == MW_E_TRUNC || s == MW_E_FORMAT, "cut %zu: %d", cut, s);
                ck_assert_ptr_null(t);
            }
            quant_imatrix_free(t);
        }
        quant_imatrix_free(lg);
        free(b.p);
    }

    /* every truncation of the GGUF imatrix: an error naming the file */
    for (uint64_t cut = 0; cut < fsz; cut += cut < 8192 ? 7 : 509) {
        struct quant_imatrix *t = NULL;
        const enum mw_status s = quant_imatrix_load_mem(raw, cut, "cut.gguf", &t, &err);
        ck_assert_msg(s != MW_OK, "cut %llu loaded", (unsigned long long)cut);
        ck_assert_ptr_null(t);
        ck_assert_str_eq(err.path, "cut.gguf");
    }
    /* every byte of the header flipped, and a sample of the data: never a
     * crash; whatever loads has finite values (finish() checks) */
    for (uint64_t off = 0; off < fsz; off += off < 7000 ? 1 : 97) {
        raw[off] ^= 0xA5;
        struct quant_imatrix *t = NULL;
        (void)quant_imatrix_load_mem(raw, fsz, "flip.gguf", &t, &err);
        quant_imatrix_free(t);
        raw[off] ^= 0xA5;
    }
    free(raw);
    quant_imatrix_free(im);
    free(path);
}
END_TEST

/* A catalogue of bad legacy files: status and a phrase of the message. */
START_TEST(test_imatrix_bad)
{
    struct mw_err err;
    char buf[1024];
    struct {
        const char *what;
        int32_t n_entries, name_len;
        const char *name;
        int32_t ncall, nval, n_written;
        float fill;
        const char *tail;
        size_t tail_n;
        enum mw_status want;
        const char *phrase;
    } cases[] = {
        {"zero entries", 0, 0, "", 0, 0, 0, 0, NULL, 0, MW_E_FORMAT, "no data"},
        {"negative name length", 1, -5, "", 1, 4, 4, 1, NULL, 0, MW_E_FORMAT, "name length -5"},
        {"huge name length", 1, 1 << 30, "", 1, 4, 4, 1, NULL, 0, MW_E_FORMAT, "name length"},
        {"zero values", 1, 3, "abc", 1, 0, 0, 1, NULL, 0, MW_E_FORMAT, "value count 0"},
        {"values past the end", 1, 3, "abc", 1, 1000, 4, 1, NULL, 0, MW_E_TRUNC, "values"},
        {"NaN value", 1, 3, "abc", 1, 4, 4, NAN, NULL, 0, MW_E_VALUE, "not finite"},
        {"Inf after / ncall", 1, 3, "abc", 0, 4, 4, INFINITY, NULL, 0, MW_E_VALUE, "not finite"},
        {"half a trailer", 1, 3, "abc", 1, 4, 4, 1, "\x05\0", 2, MW_E_TRUNC, "chunk count"},
        {"dataset past the end", 1, 3, "abc", 1, 4, 4, 1, "\x01\0\0\0\x09\0\0\0ab", 10,
         MW_E_TRUNC, "dataset name length 9"},
        {"garbage after trailer", 1, 3, "abc", 1, 4, 4, 1, "\x01\0\0\0\x01\0\0\0ab", 10,
         MW_E_FORMAT, "unexpected bytes"},
        {"name with NUL", 1, 3, "a\0c", 1, 4, 4, 1, NULL, 0, MW_E_FORMAT, "NUL"},
        {"duplicate entries", 2, 3, "abc", 1, 4, 4, 1, NULL, 0, MW_E_FORMAT, "twice"},
    };
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        struct buf b = {0};
        put_i32(&b, cases[k].n_entries);
        for (int e = 0; e < (cases[k].n_entries > 0 ? cases[k].n_entries : 0); e++) {
            put_i32(&b, cases[k].name_len);
            if (cases[k].name_len > 0 && cases[k].name_len < 100)
                put(&b, cases[k].name, (size_t)cases[k].name_len);
            put_i32(&b, cases[k].ncall);
            put_i32(&b, cases[k].nval);
            for (int j = 0; j < cases[k].n_written; j++) put_f32(&b, cases[k].fill);
        }
        if (cases[k].tail) put(&b, cases[k].tail, cases[k].tail_n);
        struct quant_imatrix *im = NULL;
        const enum mw_status s = quant_imatrix_load_mem(b.p, b.n, "bad.dat", &im, &err);
        mw_err_format(&err, buf, sizeof buf);
        ck_assert_msg(s == cases[k].want, "%s: status %d (%s)", cases[k].what, s, buf);
        ck_assert_msg(strstr(buf, cases[k].phrase) != NULL, "%s: '%s'", cases[k].what, buf);
        ck_assert_msg(strstr(buf, "bad.dat") != NULL, "%s: '%s'", cases[k].what, buf);
        ck_assert_ptr_null(im);
        free(b.p);
    }
    /* a GGUF file that is not an imatrix */
    struct gguf_writer *w;
    char path[512];
    snprintf(path, sizeof path, "%s/qp-notim.gguf", MW_TEST_TMPDIR);
    ck_assert_int_eq(gguf_writer_init(&w, &err), MW_OK);
    ck_assert_int_eq(gguf_writer_set_str(w, "general.type", "model", &err), MW_OK);
    ck_assert_int_eq(gguf_writer_open(w, path, &err), MW_OK);
    ck_assert_int_eq(gguf_writer_finish(w, &err), MW_OK);
    gguf_writer_free(w);
    struct quant_imatrix *im = NULL;
    ck_assert_int_eq(quant_imatrix_load(path, &im, &err), MW_E_FORMAT);
    ck_assert_ptr_nonnull(strstr(err.msg, "missing imatrix metadata"));
    /* in_sum2 without counts */
    ck_assert_int_eq(gguf_writer_init(&w, &err), MW_OK);
    const char *ds[] = {"x.txt"};
    ck_assert_int_eq(gguf_writer_set_arr_str(w, "imatrix.datasets", ds, NULL, 1, &err), MW_OK);
    ck_assert_int_eq(gguf_writer_set_u32(w, "imatrix.chunk_count", 1, &err), MW_OK);
    ck_assert_int_eq(gguf_writer_set_u32(w, "imatrix.chunk_size", 1, &err), MW_OK);
    const uint64_t ne[2] = {32, 1};
    ck_assert_int_eq(gguf_writer_add_tensor(w, "a.weight.in_sum2", GGUF_TYPE_F32, 1, ne, &err),
                     MW_OK);
    ck_assert_int_eq(gguf_writer_open(w, path, &err), MW_OK);
    float z[32] = {0};
    ck_assert_int_eq(gguf_writer_write(w, z, sizeof z, &err), MW_OK);
    ck_assert_int_eq(gguf_writer_finish(w, &err), MW_OK);
    gguf_writer_free(w);
    ck_assert_int_eq(quant_imatrix_load(path, &im, &err), MW_E_FORMAT);
    ck_assert_ptr_nonnull(strstr(err.msg, "mismatched sums and counts"));
    ck_assert_ptr_nonnull(strstr(err.where, "a.weight"));
    /* missing file */
    ck_assert_int_eq(quant_imatrix_load("/nonexistent/im.gguf", &im, &err), MW_E_IO);
    unlink(path);
}
END_TEST

// --- pipeline on a synthetic model ---

/* Scratch files: /dev/shm when writable (the writer fsyncs every file, which
 * costs ~0.5 s each on some build disks), else the build's test dir. */
static const char *tmpdir(void)
{
    return access("/dev/shm", W_OK) == 0 ? "/dev/shm" : MW_TEST_TMPDIR;
}

/* xorshift */
static uint64_t rng(uint64_t *s)
{
    *s ^= *s >> 12;
    *s ^= *s << 25;
    *s ^= *s >> 27;
    return *s * 0x2545F4914F6CDD1DULL;
}

/* A small llama GGUF (4 layers, 256 wide, one 512-wide ffn): F16 weights,
 * F32 norms; KVs with general.file_type and split.count in the middle and a
 * stale quantize.imatrix.file. */
static void write_model(const char *path, uint32_t nl)
{
    struct mw_err err;
    struct gguf_writer *w;
    ck_assert_int_eq(gguf_writer_init(&w, &err), MW_OK);
    ck_assert_int_eq(gguf_writer_set_str(w, "general.architecture", "llama", &err), MW_OK);
    ck_assert_int_eq(gguf_writer_set_u32(w, "general.file_type", 1, &err), MW_OK);
    ck_assert_int_eq(gguf_writer_set_u32(w, "llama.block_count", nl, &err), MW_OK);
    ck_assert_int_eq(gguf_writer_set_u16(w, "split.count", 1, &err), MW_OK);
    ck_assert_int_eq(gguf_writer_set_u32(w, "llama.attention.head_count", 8, &err), MW_OK);
    ck_assert_int_eq(gguf_writer_set_u32(w, "llama.attention.head_count_kv", 2, &err), MW_OK);
    ck_assert_int_eq(gguf_writer_set_str(w, "quantize.imatrix.file", "old", &err), MW_OK);
    ck_assert_int_eq(gguf_writer_set_str(w, "memwall.version", "old", &err), MW_OK);
    ck_assert_int_eq(gguf_writer_set_u32(w, "general.quantization_version", 2, &err), MW_OK);
    ck_assert_int_eq(gguf_writer_set_str(w, "zz.last", "x", &err), MW_OK);
    struct model *m = xmalloc(sizeof *m);
    make_llama(m, "llama", 256, 512, nl, 8, 2, 300, false);
    /* source order: reverse of llama-quantize's, to exercise the sort */
    for (uint64_t i = m->n; i-- > 0;)
        ck_assert_int_eq(gguf_writer_add_tensor(w, m->t[i].name, m->t[i].type, m->t[i].n_dims,
                                                m->t[i].ne, &err),
                         MW_OK);
    ck_assert_int_eq(gguf_writer_open(w, path, &err), MW_OK);
    uint64_t seed = 0x1234567;
    for (uint64_t i = m->n; i-- > 0;) {
        const uint64_t n = m->t[i].ne[0] * m->t[i].ne[1];
        uint8_t *d = xmalloc((size_t)n * 4);
        for (uint64_t k = 0; k < n; k++) {
            /* roughly normal, with some outliers */
            double u = 0;
            for (int j = 0; j < 4; j++) u += (double)(rng(&seed) >> 11) / 9007199254740992.0;
            float v = (float)((u - 2.0) * 0.05);
            if (rng(&seed) % 997 == 0) v *= 20.0f;
            if (m->t[i].type == GGUF_TYPE_F16) mw_put_le16(d + 2 * k, mw_f32_to_f16(v));
            else {
                uint32_t b;
                v = 1.0f + v;
                memcpy(&b, &v, 4);
                mw_put_le32(d + 4 * k, b);
            }
        }
        ck_assert_int_eq(gguf_writer_write(w, d, (size_t)(n * (m->t[i].type == GGUF_TYPE_F16 ? 2 : 4)),
                                           &err),
                         MW_OK);
        free(d);
    }
    ck_assert_int_eq(gguf_writer_finish(w, &err), MW_OK);
    gguf_writer_free(w);
    free(m);
}

struct logbuf {
    char text[8192];
    size_t n;
};
static void logcb(void *ud, enum quant_log_level lvl, const char *msg)
{
    struct logbuf *l = ud;
    l->n += (size_t)snprintf(l->text + l->n, sizeof l->text - l->n, "%d:%s\n", (int)lvl, msg);
    if (l->n >= sizeof l->text) l->n = sizeof l->text - 1;
}

/* a source that streams through read() only (no data() view) */
static enum mw_status stream_only_read(void *ud, uint64_t i, quant_sink_fn sink, void *sink_ud,
                                       struct mw_err *err)
{
    const struct quant_source *inner = ud;
    /* deliver in odd chunk sizes */
    const uint8_t *d = inner->data(inner->ud, i);
    const struct quant_tensor_desc *t = &inner->tensors[i];
    uint64_t nb = 0;
    if (!gguf_tensor_nbytes(t->type, t->ne, &nb)) return MW_E_USAGE;
    for (uint64_t off = 0; off < nb;) {
        uint64_t n = 1 + (off * 7919) % 3001;
        if (n > nb - off) n = nb - off;
        enum mw_status s = sink(sink_ud, d + off, (size_t)n, err);
        if (s != MW_OK) return s;
        off += n;
    }
    return MW_OK;
}

static uint8_t *quant_to(const char *src_path, const char *out, const char *preset,
                         const struct quant_imatrix *im, unsigned threads, size_t slab,
                         bool streamed, uint64_t *n, struct logbuf *lb)
{
    struct mw_err err;
    struct gguf_file *f;
    ck_assert_int_eq(gguf_open(src_path, 0, &f, &err), MW_OK);
    struct quant_source src, s2;
    ck_assert_int_eq(quant_source_gguf(f, &src, &err), MW_OK);
    s2 = src;
    if (streamed) {
        s2.data = NULL;
        s2.release = NULL;
        s2.read = stream_only_read;
        s2.ud = &src;
    }
    struct quant_opts o = {.rules = rules_for(preset), .imatrix = im, .imatrix_file = "im.dat",
                           .n_threads = threads, .slab_bytes = slab, .log = logcb, .log_ud = lb};
    struct quant_plan *p;
    enum mw_status s = quant_plan_build(&s2, &o, &p, &err);
    ck_assert_msg(s == MW_OK, "plan: %s", err.msg);
    struct quant_stats st;
    s = quant_plan_write(p, out, &st, &err);
    ck_assert_msg(s == MW_OK, "write: %s", err.msg);
    quant_plan_free(p);
    quant_source_gguf_free(&src);
    gguf_close(f);
    size_t nb;
    uint8_t *b = read_file_ok(out, &nb);
    *n = nb;
    ck_assert_uint_eq(*n, st.file_bytes);
    return b;
}

START_TEST(test_pipeline_threads)
{
    char src[512], out[512];
    snprintf(src, sizeof src, "%s/qp-src-%d-%d.gguf", tmpdir(), (int)getpid(), _i);
    snprintf(out, sizeof out, "%s/qp-out-%d-%d.gguf", tmpdir(), (int)getpid(), _i);
    write_model(src, 4);
    static const char *const presets[] = {"Q4_K_M", "Q2_K", "Q4_0", "Q8_0"};
    const char *preset = presets[_i];
    struct logbuf lb = {.n = 0};
    uint64_t n1, n;
    uint8_t *ref = quant_to(src, out, preset, NULL, 1, 0, false, &n1, &lb);
    const struct {
        unsigned th;
        size_t slab;
        bool streamed;
#ifdef MW_TEST_EMULATED /* qemu: the two that vary everything */
    } v[] = {{3, 1000, false}, {8, 4096, true}};
#else
    } v[] = {{2, 0, false}, {8, 0, false}, {3, 1000, false}, {8, 4096, true}, {1, 0, true}};
#endif
    for (size_t k = 0; k < sizeof v / sizeof v[0]; k++) {
        uint8_t *b = quant_to(src, out, preset, NULL, v[k].th, v[k].slab, v[k].streamed, &n, &lb);
        ck_assert_msg(n == n1 && memcmp(b, ref, (size_t)n) == 0,
                      "%s: threads %u slab %zu streamed %d differ from 1 thread", preset, v[k].th,
                      v[k].slab, v[k].streamed);
        free(b);
    }
    /* the output is a valid GGUF with llama-quantize's KV order */
    struct gguf_file *f;
    struct mw_err err;
    ck_assert_int_eq(gguf_open_mem(ref, n1, "out", 0, &f, &err), MW_OK);
    static const char *const keys[] = {
        "general.architecture", "llama.block_count", "llama.attention.head_count",
        "llama.attention.head_count_kv", "quantize.imatrix.file", "zz.last",
        "general.quantization_version", "general.file_type", "memwall.version",
        "memwall.quant.preset", "memwall.quant.method",
        "memwall.checksum.algorithm", "memwall.checksum.tensors", "memwall.checksum.header",
    };
    ck_assert_uint_eq(gguf_kv_count(f), sizeof keys / sizeof keys[0]);
    for (size_t k = 0; k < sizeof keys / sizeof keys[0]; k++)
        ck_assert_str_eq(gguf_kv_key(f, k), keys[k]);
    uint32_t ft;
    ck_assert_int_eq(gguf_get_u32(f, "general.file_type", &ft, &err), MW_OK);
    ck_assert_uint_eq(ft, quant_preset_find(preset)->ftype);
    ck_assert_str_eq(gguf_tensor_get(f, 0)->name, "output.weight");
    ck_assert_str_eq(gguf_tensor_get(f, 3)->name, "blk.0.attn_k.weight");
    /* every type decodes to finite values */
    for (uint64_t i = 0; i < gguf_tensor_count(f); i++) {
        const struct gguf_tensor *t = gguf_tensor_get(f, i);
        const struct quant_traits *qt = quant_traits_get(t->type);
        ck_assert_ptr_nonnull(qt);
        const uint64_t ne = t->ne[0] * t->ne[1];
        float *x = xmalloc((size_t)ne * 4);
        qt->to_float(gguf_tensor_data(f, i), x, ne);
        uint64_t bad = 0; /* (no ck_assert per element: Check logs every call) */
        for (uint64_t k = 0; k < ne; k++) bad += !isfinite(x[k]);
        ck_assert_msg(bad == 0, "%s: %llu non-finite values", t->name, (unsigned long long)bad);
        free(x);
    }
    gguf_close(f);
    free(ref);
    unlink(src);
    unlink(out);
}
END_TEST

/* An imatrix in memory (legacy format): entries for the given names. */
static struct quant_imatrix *mk_imatrix(const char *const *names, const int32_t *lens, int n)
{
    struct buf b = {0};
    put_i32(&b, n);
    for (int i = 0; i < n; i++) {
        put_i32(&b, (int32_t)strlen(names[i]));
        put(&b, names[i], strlen(names[i]));
        put_i32(&b, 1);
        put_i32(&b, lens[i]);
        for (int j = 0; j < lens[i]; j++) put_f32(&b, 0.5f + (float)(j % 7));
    }
    struct quant_imatrix *im = NULL;
    struct mw_err err;
    ck_assert_int_eq(quant_imatrix_load_mem(b.p, b.n, "mem.dat", &im, &err), MW_OK);
    free(b.p);
    return im;
}

/* The end of a test over a quantized source file: the source closed, its
 * input and output files removed. */
static void source_done(struct quant_source *qs, struct gguf_file *sf, const char *src,
                        const char *out)
{
    quant_source_gguf_free(qs);
    gguf_close(sf);
    unlink(src);
    unlink(out);
}

START_TEST(test_pipeline_imatrix)
{
    char src[512], out[512];
    snprintf(src, sizeof src, "%s/qp-isrc-%d.gguf", tmpdir(), (int)getpid());
    snprintf(out, sizeof out, "%s/qp-iout-%d.gguf", tmpdir(), (int)getpid());
    write_model(src, 2);
    struct mw_err err;
    char msg[1024];
    /* good entries, an unknown name (warning), missing entries (notices) */
    const char *names[] = {"blk.0.attn_q.weight", "blk.0.ffn_down.weight", "blk.9.nothing.weight"};
    const int32_t lens[] = {256, 512, 64};
    struct quant_imatrix *im = mk_imatrix(names, lens, 3);
    struct logbuf lb = {.n = 0};
    uint64_t n, n2;
    uint8_t *a = quant_to(src, out, "Q4_K_M", im, 2, 0, false, &n, &lb);
    ck_assert_msg(strstr(lb.text, "2:imatrix entry 'blk.9.nothing.weight' names no tensor") != NULL,
                  "%s", lb.text);
    ck_assert_msg(strstr(lb.text, "1:tensor 'blk.1.attn_q.weight': no imatrix entry") != NULL,
                  "%s", lb.text);
    uint8_t *b = quant_to(src, out, "Q4_K_M", NULL, 2, 0, false, &n2, &lb);
    ck_assert(n != n2 || memcmp(a, b, (size_t)n) != 0); /* the imatrix changed something */
    struct gguf_file *f;
    ck_assert_int_eq(gguf_open_mem(a, n, "out", 0, &f, &err), MW_OK);
    const char *s;
    uint64_t sl;
    ck_assert_int_eq(gguf_get_str(f, "memwall.quant.method", &s, &sl, &err), MW_OK);
    ck_assert(sl == 7 && memcmp(s, "imatrix", 7) == 0);
    ck_assert_int_eq(gguf_get_str(f, "quantize.imatrix.file", &s, &sl, &err), MW_OK);
    ck_assert(sl == 6 && memcmp(s, "im.dat", 6) == 0);
    uint32_t ec;
    ck_assert_int_eq(gguf_get_u32(f, "quantize.imatrix.entries_count", &ec, &err), MW_OK);
    ck_assert_uint_eq(ec, 3);
    ck_assert_int_ge(gguf_kv_find(f, "memwall.quant.imatrix_xxh3"), 0);
    gguf_close(f);
    free(a);
    free(b);
    quant_imatrix_free(im);

    /* a wrong length: error naming the tensor, expected and actual length */
    const int32_t bad[] = {256, 500, 64};
    im = mk_imatrix(names, bad, 3);
    struct gguf_file *sf;
    ck_assert_int_eq(gguf_open(src, 0, &sf, &err), MW_OK);
    struct quant_source qs;
    ck_assert_int_eq(quant_source_gguf(sf, &qs, &err), MW_OK);
    struct quant_opts o = {.rules = rules_for("Q4_K_M"), .imatrix = im, .n_threads = 1};
    struct quant_plan *p = NULL;
    ck_assert_int_eq(quant_plan_build(&qs, &o, &p, &err), MW_E_FORMAT);
    mw_err_format(&err, msg, sizeof msg);
    ck_assert_msg(strstr(msg, "tensor 'blk.0.ffn_down.weight'") &&
                      strstr(msg, "has 500 values, expected 512"),
                  "%s", msg);
    ck_assert_ptr_null(p);
    quant_imatrix_free(im);
    /* the token embedding is the exception: a notice, quantized without */
    const char *en[] = {"token_embd.weight"};
    const int32_t el[] = {7};
    im = mk_imatrix(en, el, 1);
    o.imatrix = im;
    lb.n = 0;
    o.log = logcb;
    o.log_ud = &lb;
    ck_assert_int_eq(quant_plan_build(&qs, &o, &p, &err), MW_OK);
    ck_assert_msg(strstr(lb.text, "1:tensor 'token_embd.weight': imatrix entry has 7 values"),
                  "%s", lb.text);
    for (uint64_t i = 0; i < quant_plan_count(p); i++) ck_assert_ptr_null(quant_plan_get(p, i)->imatrix);
    quant_plan_free(p);
    quant_imatrix_free(im);
    /* already quantized sources need --allow-requantize */
    quant_source_gguf_free(&qs);
    gguf_close(sf);
    a = quant_to(src, out, "Q8_0", NULL, 1, 0, false, &n, &lb);
    free(a);
    ck_assert_int_eq(gguf_open(out, 0, &sf, &err), MW_OK);
    ck_assert_int_eq(quant_source_gguf(sf, &qs, &err), MW_OK);
    o = (struct quant_opts){.rules = rules_for("Q4_K_M"), .n_threads = 1};
    ck_assert_int_eq(quant_plan_build(&qs, &o, &p, &err), MW_E_UNSUPPORTED);
    ck_assert_ptr_nonnull(strstr(err.msg, "requantizing from type q8_0 is disabled"));
    o.allow_requantize = true;
    ck_assert_int_eq(quant_plan_build(&qs, &o, &p, &err), MW_OK);
    quant_plan_free(p);
    source_done(&qs, sf, src, out);
}
END_TEST

/* The pipeline refuses what llama-quantize refuses: Q2_K_S (its Q2_K
 * tensors need an imatrix) without one, or with one that lacks an entry. */
START_TEST(test_pipeline_requires_imatrix)
{
    char src[512], out[512], msg[1024];
    snprintf(src, sizeof src, "%s/qp-rsrc-%d.gguf", tmpdir(), (int)getpid());
    snprintf(out, sizeof out, "%s/qp-rout-%d.gguf", tmpdir(), (int)getpid());
    write_model(src, 2);
    struct mw_err err;
    struct gguf_file *sf;
    ck_assert_int_eq(gguf_open(src, 0, &sf, &err), MW_OK);
    struct quant_source qs;
    ck_assert_int_eq(quant_source_gguf(sf, &qs, &err), MW_OK);
    struct quant_opts o = {.rules = rules_for("Q2_K_S"), .n_threads = 1, .imatrix_file = "im.dat"};
    struct quant_plan *p = NULL;
    ck_assert_int_eq(quant_plan_build(&qs, &o, &p, &err), MW_OK); /* a plan: dry runs list it */
    ck_assert_int_eq(quant_plan_check_imatrix(p, &err), MW_E_USAGE);
    mw_err_format(&err, msg, sizeof msg);
    ck_assert_msg(strstr(msg, "tensor 'blk.0.attn_k.weight'") &&
                      strstr(msg, "preset Q2_K_S needs an importance matrix") &&
                      strstr(msg, "--imatrix") && strstr(msg, "--corpus"),
                  "%s", msg);
    unlink(out);
    ck_assert_int_eq(quant_plan_write(p, out, NULL, &err), MW_E_USAGE);
    ck_assert_int_ne(access(out, F_OK), 0);
    quant_plan_free(p);
    /* a budget allocation's plan is memwall's own mix: exempt */
    o.budget = "bpw=3";
    ck_assert_int_eq(quant_plan_build(&qs, &o, &p, &err), MW_OK);
    ck_assert_int_eq(quant_plan_check_imatrix(p, &err), MW_OK);
    quant_plan_free(p);
    o.budget = NULL;
    /* an imatrix with every entry but one */
    const char *names[] = {"blk.0.attn_k.weight", "blk.0.attn_output.weight",
                           "blk.0.attn_q.weight", "blk.0.attn_v.weight",
                           "blk.0.ffn_down.weight", "blk.0.ffn_gate.weight",
                           "blk.0.ffn_up.weight", "blk.1.attn_k.weight",
                           "blk.1.attn_output.weight", "blk.1.attn_q.weight",
                           "blk.1.attn_v.weight", "blk.1.ffn_down.weight",
                           "blk.1.ffn_gate.weight", "blk.1.ffn_up.weight"};
    const int32_t lens[] = {256, 256, 256, 256, 512, 256, 256, 256, 256, 256, 256, 512, 256, 256};
    const int n = (int)(sizeof names / sizeof names[0]);
    for (int skip = 0; skip <= 1; skip++) {
        const char *nm[16];
        int32_t ln[16];
        int k = 0;
        for (int i = 0; i < n; i++)
            if (!(skip && strcmp(names[i], "blk.1.ffn_gate.weight") == 0)) {
                nm[k] = names[i];
                ln[k++] = lens[i];
            }
        struct quant_imatrix *im = mk_imatrix(nm, ln, k);
        o.imatrix = im;
        ck_assert_int_eq(quant_plan_build(&qs, &o, &p, &err), MW_OK);
        if (skip) {
            ck_assert_int_eq(quant_plan_check_imatrix(p, &err), MW_E_FORMAT);
            mw_err_format(&err, msg, sizeof msg);
            ck_assert_msg(strstr(msg, "tensor 'blk.1.ffn_gate.weight'") &&
                              strstr(msg, "no usable imatrix entry") && strstr(msg, "Q2_K_S"),
                          "%s", msg);
            ck_assert_int_eq(quant_plan_write(p, out, NULL, &err), MW_E_FORMAT);
        } else {
            ck_assert_int_eq(quant_plan_check_imatrix(p, &err), MW_OK);
            ck_assert_int_eq(quant_plan_write(p, out, NULL, &err), MW_OK);
        }
        quant_plan_free(p);
        quant_imatrix_free(im);
    }
    /* Q2_K: no requirement */
    o = (struct quant_opts){.rules = rules_for("Q2_K"), .n_threads = 1};
    ck_assert_int_eq(quant_plan_build(&qs, &o, &p, &err), MW_OK);
    ck_assert_int_eq(quant_plan_check_imatrix(p, &err), MW_OK);
    quant_plan_free(p);
    source_done(&qs, sf, src, out);
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("quant_pipeline");
    TCase *ti = tcase_create("imatrix");
    tcase_set_timeout(ti, 60);
    tcase_add_test(ti, test_imatrix_gguf);
    tcase_add_test(ti, test_imatrix_bad);
    suite_add_tcase(s, ti);
    TCase *tp = tcase_create("pipeline");
    tcase_set_timeout(tp, 60);
#ifdef MW_TEST_EMULATED /* qemu: Q4_K_M and Q2_K (k-quants); natively Q4_0 and Q8_0 too */
    tcase_add_loop_test(tp, test_pipeline_threads, 0, 2);
#else
    tcase_add_loop_test(tp, test_pipeline_threads, 0, 4);
#endif
    tcase_add_test(tp, test_pipeline_imatrix);
    tcase_add_test(tp, test_pipeline_requires_imatrix);
    suite_add_tcase(s, tp);
    return s;
}

int main(void)
{
    return run_suite(suite());
}
