/* Unit tests for gguf/: type table, a catalogue of corrupt headers (each with
 * its expected status and byte offset), writer/reader round trip, byte
 * compatibility with ggml's writer, writer misuse, and atomicity under
 * RLIMIT_FSIZE and SIGKILL. */
#define _GNU_SOURCE
#include <check.h>
#include <dirent.h>
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "gguf/gguf.h"

#include "check_common.h"

/* --- byte builder for hand-made files --- */

struct bb {
    uint8_t b[4096];
    size_t n;
};
static void bb_u8(struct bb *b, uint8_t v) { b->b[b->n++] = v; }
static void bb_u32(struct bb *b, uint32_t v)
{
    mw_put_le32(b->b + b->n, v);
    b->n += 4;
}
static void bb_u64(struct bb *b, uint64_t v)
{
    mw_put_le64(b->b + b->n, v);
    b->n += 8;
}
static void bb_strn(struct bb *b, const char *s, uint64_t declared, size_t actual)
{
    bb_u64(b, declared);
    memcpy(b->b + b->n, s, actual);
    b->n += actual;
}
static void bb_str(struct bb *b, const char *s) { bb_strn(b, s, strlen(s), strlen(s)); }
static void bb_pad(struct bb *b, size_t a)
{
    while (b->n % a) bb_u8(b, 0);
}

enum corrupt {
    C_VALID,
    C_BAD_MAGIC,
    C_VERSION_1,
    C_BIG_ENDIAN,
    C_HUGE_NKV,
    C_HUGE_NTENSORS,
    C_KEY_LEN_PAST_END,
    C_EMPTY_KEY,
    C_DUP_KEY,
    C_BAD_VTYPE,
    C_ARRAY_BAD_ELEM,
    C_BOOL_2,
    C_ALIGN_WRONG_TYPE,
    C_ALIGN_NOT_POW2,
    C_NAME_TOO_LONG,
    C_DUP_TENSOR,
    C_NDIMS_5,
    C_NE_ZERO,
    C_REMOVED_TYPE,
    C_ROW_NOT_MULTIPLE,
    C_MISALIGNED_OFFSET,
    C_OVERLAP,
    C_TRUNC_LAST_TENSOR,
    C_TRUNC_PADDING,
    C_NESTED_TOO_DEEP,
    C_STRARR_COUNT_HUGE,
    C_DIMS_OVERFLOW,
    C_COUNT
};

static const struct {
    enum mw_status status;
    const char *where; /* substring expected in err.where ("" = don't care) */
} expect[C_COUNT] = {
    [C_VALID] = {MW_OK, ""},
    [C_BAD_MAGIC] = {MW_E_FORMAT, ""},
    [C_VERSION_1] = {MW_E_UNSUPPORTED, ""},
    [C_BIG_ENDIAN] = {MW_E_UNSUPPORTED, ""},
    [C_HUGE_NKV] = {MW_E_TRUNC, ""},
    [C_HUGE_NTENSORS] = {MW_E_TRUNC, ""},
    [C_KEY_LEN_PAST_END] = {MW_E_TRUNC, "kv 1"},
    [C_EMPTY_KEY] = {MW_E_FORMAT, "kv 1"},
    [C_DUP_KEY] = {MW_E_FORMAT, "general.architecture"},
    [C_BAD_VTYPE] = {MW_E_FORMAT, "x.arr"},
    [C_ARRAY_BAD_ELEM] = {MW_E_FORMAT, "x.arr"},
    [C_BOOL_2] = {MW_E_FORMAT, "x.arr"},
    [C_ALIGN_WRONG_TYPE] = {MW_E_FORMAT, "general.alignment"},
    [C_ALIGN_NOT_POW2] = {MW_E_FORMAT, "general.alignment"},
    [C_NAME_TOO_LONG] = {MW_E_FORMAT, "tensor info 1"},
    [C_DUP_TENSOR] = {MW_E_FORMAT, "tensor 'a'"},
    [C_NDIMS_5] = {MW_E_FORMAT, "tensor 'b'"},
    [C_NE_ZERO] = {MW_E_FORMAT, "tensor 'b'"},
    [C_REMOVED_TYPE] = {MW_E_FORMAT, "tensor 'b'"},
    [C_ROW_NOT_MULTIPLE] = {MW_E_FORMAT, "tensor 'b'"},
    [C_MISALIGNED_OFFSET] = {MW_E_FORMAT, "tensor 'b'"},
    [C_OVERLAP] = {MW_E_FORMAT, "tensor 'b'"},
    [C_TRUNC_LAST_TENSOR] = {MW_E_TRUNC, "tensor 'b'"},
    [C_TRUNC_PADDING] = {MW_E_TRUNC, "data section"},
    [C_NESTED_TOO_DEEP] = {MW_E_FORMAT, "x.arr"},
    [C_STRARR_COUNT_HUGE] = {MW_E_TRUNC, "x.arr"},
    [C_DIMS_OVERFLOW] = {MW_E_FORMAT, "tensor 'b'"},
};

/* Builds a small file with KVs general.architecture="llama" and x.arr (u32
 * [1,2,3]) and tensors a (f32 [8,2], 64 bytes) and b (f16 [4], 8 bytes),
 * corrupted as `c` says. *off gets the offset the reader must report. */
static void build(enum corrupt c, struct bb *b, uint64_t *off)
{
    memset(b, 0, sizeof *b);
    *off = MW_ERR_OFF_NONE;
    if (c == C_BAD_MAGIC) {
        memcpy(b->b, "GGUE", 4);
        *off = 0;
    } else {
        memcpy(b->b, "GGUF", 4);
    }
    b->n = 4;
    if (c == C_VERSION_1 || c == C_BIG_ENDIAN) *off = 4;
    bb_u32(b, c == C_VERSION_1 ? 1 : c == C_BIG_ENDIAN ? 0x03000000u : 3);
    if (c == C_HUGE_NTENSORS) *off = 8;
    bb_u64(b, c == C_HUGE_NTENSORS ? UINT64_C(1) << 40 : 2);
    const bool align_kv = (c == C_ALIGN_WRONG_TYPE || c == C_ALIGN_NOT_POW2);
    if (c == C_HUGE_NKV) *off = 16;
    bb_u64(b, c == C_HUGE_NKV ? UINT64_C(1) << 50 : (align_kv || c == C_DUP_KEY) ? 3 : 2);
    /* kv 0 */
    bb_str(b, "general.architecture");
    bb_u32(b, GGUF_VT_STRING);
    bb_str(b, "llama");
    /* kv 1 */
    const size_t kv1 = b->n;
    if (c == C_KEY_LEN_PAST_END) {
        bb_strn(b, "x.arr", UINT64_C(1) << 40, 5);
        *off = kv1;
    } else if (c == C_EMPTY_KEY) {
        bb_str(b, "");
        *off = kv1;
    } else {
        bb_str(b, "x.arr");
    }
    if (c == C_BAD_VTYPE) {
        bb_u32(b, 13);
        *off = b->n;
        bb_u32(b, 0);
    } else if (c == C_BOOL_2) {
        bb_u32(b, GGUF_VT_BOOL);
        *off = b->n;
        bb_u8(b, 2);
    } else if (c == C_NESTED_TOO_DEEP) {
        bb_u32(b, GGUF_VT_ARRAY);
        for (int d = 0; d < GGUF_MAX_ARRAY_DEPTH; d++) {
            if (d == GGUF_MAX_ARRAY_DEPTH - 1) *off = b->n - 0;
            bb_u32(b, GGUF_VT_ARRAY);
            bb_u64(b, 1);
        }
        bb_u32(b, GGUF_VT_U8);
        bb_u64(b, 0);
        *off = MW_ERR_OFF_NONE; /* reported at the start of the too-deep array */
    } else if (c == C_STRARR_COUNT_HUGE) {
        bb_u32(b, GGUF_VT_ARRAY);
        bb_u32(b, GGUF_VT_STRING);
        *off = b->n;
        bb_u64(b, UINT64_C(1) << 61);
    } else {
        bb_u32(b, GGUF_VT_ARRAY);
        if (c == C_ARRAY_BAD_ELEM) *off = b->n;
        bb_u32(b, c == C_ARRAY_BAD_ELEM ? 13 : GGUF_VT_U32);
        bb_u64(b, 3);
        bb_u32(b, 1);
        bb_u32(b, 2);
        bb_u32(b, 3);
    }
    if (c == C_DUP_KEY) {
        *off = b->n;
        bb_str(b, "general.architecture");
        bb_u32(b, GGUF_VT_STRING);
        bb_str(b, "qwen2");
    }
    if (align_kv) {
        const size_t kv2 = b->n;
        bb_str(b, "general.alignment");
        if (c == C_ALIGN_WRONG_TYPE) {
            *off = kv2;
            bb_u32(b, GGUF_VT_U64);
            bb_u64(b, 32);
        } else {
            bb_u32(b, GGUF_VT_U32);
            *off = b->n;
            bb_u32(b, 48);
        }
    }
    /* tensor a: f32 [8,2] at 0 */
    bb_str(b, "a");
    bb_u32(b, 2);
    bb_u64(b, 8);
    bb_u64(b, 2);
    bb_u32(b, GGUF_TYPE_F32);
    bb_u64(b, 0);
    /* tensor b: f16 [4] at 64 */
    const size_t tb = b->n;
    if (c == C_NAME_TOO_LONG) {
        *off = tb;
        bb_str(b, "bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb"); /* 64 */
    } else {
        bb_str(b, c == C_DUP_TENSOR ? "a" : "b");
    }
    if (c == C_DUP_TENSOR) *off = tb;
    if (c == C_NDIMS_5) *off = b->n;
    bb_u32(b, c == C_NDIMS_5 ? 5 : c == C_DIMS_OVERFLOW ? 2 : 1);
    if (c == C_NE_ZERO) *off = b->n;
    if (c == C_DIMS_OVERFLOW) {
        *off = tb;
        bb_u64(b, UINT64_C(1) << 62);
        bb_u64(b, UINT64_C(1) << 62);
    } else {
        bb_u64(b, c == C_NE_ZERO ? 0 : c == C_ROW_NOT_MULTIPLE ? 8 : 4);
    }
    if (c == C_REMOVED_TYPE) *off = b->n;
    if (c == C_ROW_NOT_MULTIPLE) *off = tb;
    bb_u32(b, c == C_REMOVED_TYPE ? 4 : c == C_ROW_NOT_MULTIPLE ? GGUF_TYPE_Q8_0 : GGUF_TYPE_F16);
    if (c == C_MISALIGNED_OFFSET || c == C_OVERLAP) *off = b->n;
    bb_u64(b, c == C_MISALIGNED_OFFSET ? 16 : c == C_OVERLAP ? 0 : 64);
    bb_pad(b, 32);
    for (int i = 0; i < 16; i++) {
        float v = (float)i;
        uint32_t u;
        memcpy(&u, &v, 4);
        bb_u32(b, u);
    }
    for (int i = 0; i < 4; i++) {
        bb_u8(b, 0x00);
        bb_u8(b, 0x3c);
    }
    bb_pad(b, 32);
    if (c == C_TRUNC_LAST_TENSOR) {
        b->n -= 28; /* 24 padding bytes + 4 of b's data */
        *off = b->n;
    }
    if (c == C_TRUNC_PADDING) {
        b->n -= 10;
        *off = b->n;
    }
}

START_TEST(test_corrupt_catalogue)
{
    const enum corrupt c = (enum corrupt)_i;
    struct bb b;
    uint64_t off;
    build(c, &b, &off);
    struct mw_err err;
    mw_err_clear(&err);
    struct gguf_file *f = NULL;
    enum mw_status s = gguf_open_mem(b.b, b.n, "case.gguf", 0, &f, &err);
    char msg[700];
    mw_err_format(&err, msg, sizeof msg);
    ck_assert_msg(s == expect[c].status, "case %d: got %s (%s), want %s", c, mw_status_name(s),
                  msg, mw_status_name(expect[c].status));
    if (s == MW_OK) {
        ck_assert_uint_eq(gguf_tensor_count(f), 2);
        gguf_close(f);
        return;
    }
    ck_assert_ptr_null(f);
    ck_assert_str_eq(err.path, "case.gguf");
    if (off != MW_ERR_OFF_NONE)
        ck_assert_msg(err.off == off, "case %d: offset %llu, want %llu (%s)", c,
                      (unsigned long long)err.off, (unsigned long long)off, msg);
    else
        ck_assert_msg(err.off != MW_ERR_OFF_NONE, "case %d: no offset (%s)", c, msg);
    ck_assert_msg(strstr(err.where, expect[c].where), "case %d: where '%s' lacks '%s'", c,
                  err.where, expect[c].where);
    if (s == MW_E_TRUNC) ck_assert_msg(strstr(err.msg, "truncated"), "case %d: %s", c, msg);
}
END_TEST

START_TEST(test_allow_short)
{
    struct bb b;
    uint64_t off;
    build(C_TRUNC_LAST_TENSOR, &b, &off);
    struct gguf_file *f = NULL;
    ck_assert_int_eq(gguf_open_mem(b.b, b.n, "short", GGUF_OPEN_ALLOW_SHORT, &f, NULL), MW_OK);
    ck_assert(gguf_tensor_in_file(f, 0));
    ck_assert(!gguf_tensor_in_file(f, 1));
    ck_assert_ptr_nonnull(gguf_tensor_data(f, 0));
    ck_assert_ptr_null(gguf_tensor_data(f, 1));
    ck_assert_uint_gt(gguf_data_end(f), gguf_file_size(f));
    gguf_close(f);
}
END_TEST

START_TEST(test_every_prefix_rejected)
{
    /* every strict prefix of a valid file is rejected with E_TRUNC, never a crash */
    struct bb b;
    uint64_t off;
    build(C_VALID, &b, &off);
    for (size_t n = 0; n < b.n; n++) {
        struct mw_err err;
        mw_err_clear(&err);
        struct gguf_file *f = NULL;
        /* copy into an exact-size heap buffer so ASan sees any overread */
        uint8_t *p = malloc(n ? n : 1);
        memcpy(p, b.b, n);
        enum mw_status s = gguf_open_mem(p, n, "prefix", 0, &f, &err);
        ck_assert_msg(s == MW_E_TRUNC, "length %zu: %s", n, mw_status_name(s));
        ck_assert_ptr_null(f);
        ck_assert_msg(strstr(err.msg, "truncated"), "length %zu: %s", n, err.msg);
        free(p);
    }
}
END_TEST

START_TEST(test_type_table)
{
    /* sizes from docs/formats.md §3.1 */
    ck_assert_uint_eq(gguf_type_get(GGUF_TYPE_Q4_K)->type_size, 144);
    ck_assert_uint_eq(gguf_type_get(GGUF_TYPE_Q6_K)->type_size, 210);
    ck_assert_uint_eq(gguf_type_get(GGUF_TYPE_Q8_0)->blck, 32);
    ck_assert_uint_eq(gguf_type_get(GGUF_TYPE_BF16)->type_size, 2);
    ck_assert_uint_eq(gguf_type_get(GGUF_TYPE_MXFP4)->type_size, 17);
    ck_assert_ptr_null(gguf_type_get(4));
    ck_assert_ptr_null(gguf_type_get(31));
    ck_assert_ptr_null(gguf_type_get(37));
    ck_assert_ptr_null(gguf_type_get(GGUF_TYPE_COUNT));
    ck_assert_int_eq(gguf_type_from_name("Q4_K"), GGUF_TYPE_Q4_K);
    ck_assert_int_eq(gguf_type_from_name("bf16"), GGUF_TYPE_BF16);
    ck_assert_int_eq(gguf_type_from_name("q4_2"), -1);
    uint64_t ne[4] = {4096, 4096, 1, 1}, nb;
    ck_assert(gguf_tensor_nbytes(GGUF_TYPE_Q4_K, ne, &nb));
    ck_assert_uint_eq(nb, 4096ull / 256 * 144 * 4096);
    ne[0] = 100;
    ck_assert(!gguf_tensor_nbytes(GGUF_TYPE_Q4_K, ne, &nb));
    uint64_t big[4] = {UINT64_C(1) << 40, UINT64_C(1) << 30, 1, 1};
    ck_assert(!gguf_tensor_nbytes(GGUF_TYPE_F32, big, &nb));
}
END_TEST

/* --- writer / reader round trip --- */

/* The sample file to path, or (path NULL) to memory: *mem, *mem_n. */
static void write_sample_to(const char *path, const uint8_t *nested_src, size_t nested_n,
                            void **mem, uint64_t *mem_n)
{
    struct mw_err err;
    mw_err_clear(&err);
    struct gguf_writer *w;
    ck_assert_int_eq(gguf_writer_init(&w, &err), MW_OK);
    ck_assert_int_eq(gguf_writer_set_str(w, "general.architecture", "llama", &err), MW_OK);
    ck_assert_int_eq(gguf_writer_set_u8(w, "t.u8", 200, &err), MW_OK);
    ck_assert_int_eq(gguf_writer_set_i8(w, "t.i8", -100, &err), MW_OK);
    ck_assert_int_eq(gguf_writer_set_u16(w, "t.u16", 60000, &err), MW_OK);
    ck_assert_int_eq(gguf_writer_set_i16(w, "t.i16", -30000, &err), MW_OK);
    ck_assert_int_eq(gguf_writer_set_u32(w, "t.u32", 4000000000u, &err), MW_OK);
    ck_assert_int_eq(gguf_writer_set_i32(w, "t.i32", -2000000000, &err), MW_OK);
    ck_assert_int_eq(gguf_writer_set_u64(w, "t.u64", UINT64_MAX - 5, &err), MW_OK);
    ck_assert_int_eq(gguf_writer_set_i64(w, "t.i64", INT64_MIN + 7, &err), MW_OK);
    ck_assert_int_eq(gguf_writer_set_f32(w, "t.f32", -1.5f, &err), MW_OK);
    ck_assert_int_eq(gguf_writer_set_f64(w, "t.f64", 1e300, &err), MW_OK);
    ck_assert_int_eq(gguf_writer_set_bool(w, "t.bool", true, &err), MW_OK);
    ck_assert_int_eq(gguf_writer_set_strn(w, "t.strn", "a\0b", 3, &err), MW_OK);
    const int32_t ai[3] = {-1, 0, 7};
    ck_assert_int_eq(gguf_writer_set_arr(w, "t.arr_i32", GGUF_VT_I32, ai, 3, &err), MW_OK);
    const double ad[2] = {0.25, -8.0};
    ck_assert_int_eq(gguf_writer_set_arr(w, "t.arr_f64", GGUF_VT_F64, ad, 2, &err), MW_OK);
    ck_assert_int_eq(gguf_writer_set_arr(w, "t.arr_empty", GGUF_VT_U8, NULL, 0, &err), MW_OK);
    const char *strs[3] = {"<s>", "", "\xe2\x96\x81the"};
    ck_assert_int_eq(gguf_writer_set_arr_str(w, "t.arr_str", strs, NULL, 3, &err), MW_OK);
    if (nested_src) {
        struct gguf_file *src;
        ck_assert_int_eq(gguf_open_mem(nested_src, nested_n, "nested", 0, &src, &err), MW_OK);
        ck_assert_int_eq(gguf_writer_copy_kv(w, src, 0, &err), MW_OK);
        gguf_close(src);
    }
    const uint64_t ne_a[2] = {64, 3}, ne_b[1] = {32}, ne_c[3] = {32, 2, 2};
    ck_assert_int_eq(gguf_writer_add_tensor(w, "a.weight", GGUF_TYPE_F32, 2, ne_a, &err), MW_OK);
    ck_assert_int_eq(gguf_writer_add_tensor(w, "b.weight", GGUF_TYPE_Q8_0, 1, ne_b, &err), MW_OK);
    ck_assert_int_eq(gguf_writer_add_tensor(w, "c.weight", GGUF_TYPE_BF16, 3, ne_c, &err), MW_OK);
    const uint64_t predicted = gguf_writer_file_size(w);
    if (path)
        ck_assert_int_eq(gguf_writer_open(w, path, &err), MW_OK);
    else
        ck_assert_int_eq(gguf_writer_open_mem(w, &err), MW_OK);
    /* a: 768 bytes, written in odd chunks; then b and c in one call */
    uint8_t data[768 + 34 + 256];
    for (size_t i = 0; i < sizeof data; i++) data[i] = (uint8_t)(i * 131 + 7);
    ck_assert_int_eq(gguf_writer_write(w, data, 5, &err), MW_OK);
    ck_assert_int_eq(gguf_writer_write(w, data + 5, 700, &err), MW_OK);
    ck_assert_int_eq(gguf_writer_write(w, data + 705, sizeof data - 705, &err), MW_OK);
    if (!path) {
        void *dummy = NULL;
        uint64_t dummy_n = 0;
        /* the file-path finish refuses a writer opened in memory, and back */
        ck_assert_int_eq(gguf_writer_finish(w, &err), MW_E_USAGE);
        ck_assert_int_eq(gguf_writer_finish_mem(w, mem, mem_n, &err), MW_OK);
        ck_assert_uint_eq(*mem_n, predicted);
        ck_assert_int_eq(gguf_writer_finish_mem(w, &dummy, &dummy_n, &err), MW_E_USAGE);
        gguf_writer_free(w);
        return;
    }
    ck_assert_int_eq(gguf_writer_finish_mem(w, mem, mem_n, &err), MW_E_USAGE);
    ck_assert_int_eq(gguf_writer_finish(w, &err), MW_OK);
    gguf_writer_free(w);
    struct stat st;
    ck_assert_int_eq(stat(path, &st), 0);
    ck_assert_uint_eq((uint64_t)st.st_size, predicted);
}

static void write_sample(const char *path, const uint8_t *nested_src, size_t nested_n)
{
    void *mem = NULL;
    uint64_t mem_n = 0;
    write_sample_to(path, nested_src, nested_n, &mem, &mem_n);
}

/* gguf_writer_open_mem / finish_mem: the bytes the file writer writes, and
 * the reader takes them back. */
START_TEST(test_mem_output)
{
    char *dir = make_tmpdir("gguf");
    char *p = path_in(dir, "file.gguf");
    write_sample(p, NULL, 0);
    size_t fn = 0;
    uint8_t *fb = read_file(p, &fn);
    ck_assert_ptr_nonnull(fb);
    void *mb = NULL;
    uint64_t mn = 0;
    write_sample_to(NULL, NULL, 0, &mb, &mn);
    ck_assert_ptr_nonnull(mb);
    ck_assert_uint_eq(mn, fn);
    ck_assert(memcmp(mb, fb, fn) == 0);
    struct mw_err err;
    mw_err_clear(&err);
    struct gguf_file *f;
    ck_assert_int_eq(gguf_open_mem(mb, mn, "mem", 0, &f, &err), MW_OK);
    ck_assert_uint_eq(gguf_tensor_count(f), 3);
    ck_assert_int_eq(gguf_tensor_find(f, "c.weight"), 2);
    uint64_t hh = 0;
    ck_assert(gguf_hash_header(f, &hh));
    const int64_t k = gguf_kv_find(f, GGUF_KEY_CK_HEADER);
    ck_assert_int_ge(k, 0);
    uint64_t stored = 0;
    ck_assert(gguf_value_as_u64(gguf_kv_value(f, (uint64_t)k), &stored));
    ck_assert_uint_eq(hh, stored);
    gguf_close(f);
    ck_assert_int_eq(count_entries(dir), 1); /* nothing but the file output */
    free(mb);
    free(fb);
    free(p);
    free(dir);
}
END_TEST

START_TEST(test_round_trip)
{
    char *dir = make_tmpdir("gguf");
    char *p1 = path_in(dir, "one.gguf"), *p2 = path_in(dir, "two.gguf");
    /* a source file with a nested array KV: [[1,2],[3]] of u16 */
    struct bb nb = {.n = 0};
    memcpy(nb.b, "GGUF", 4);
    nb.n = 4;
    bb_u32(&nb, 3);
    bb_u64(&nb, 0);
    bb_u64(&nb, 1);
    bb_str(&nb, "t.nested");
    bb_u32(&nb, GGUF_VT_ARRAY);
    bb_u32(&nb, GGUF_VT_ARRAY);
    bb_u64(&nb, 2);
    bb_u32(&nb, GGUF_VT_U16);
    bb_u64(&nb, 2);
    bb_u8(&nb, 1); bb_u8(&nb, 0); bb_u8(&nb, 2); bb_u8(&nb, 0);
    bb_u32(&nb, GGUF_VT_U16);
    bb_u64(&nb, 1);
    bb_u8(&nb, 3); bb_u8(&nb, 0);
    bb_pad(&nb, 32);

    write_sample(p1, nb.b, nb.n);
    write_sample(p2, nb.b, nb.n);
    size_t n1 = 0, n2 = 0;
    uint8_t *b1 = read_file(p1, &n1), *b2 = read_file(p2, &n2);
    ck_assert_uint_eq(n1, n2);
    ck_assert_msg(memcmp(b1, b2, n1) == 0, "two writes of the same content differ");

    struct mw_err err;
    mw_err_clear(&err);
    struct gguf_file *f;
    ck_assert_int_eq(gguf_open(p1, 0, &f, &err), MW_OK);
    ck_assert_uint_eq(gguf_version(f), 3);
    ck_assert_uint_eq(gguf_kv_count(f), 18 + 3);
    uint64_t u;
    int64_t i;
    double d;
    bool bo;
    const struct gguf_value *v;
#define KV(k) gguf_kv_value(f, (uint64_t)gguf_kv_find(f, k))
    ck_assert(gguf_value_as_u64(KV("t.u8"), &u) && u == 200);
    ck_assert(gguf_value_as_i64(KV("t.i8"), &i) && i == -100);
    ck_assert(gguf_value_as_u64(KV("t.u16"), &u) && u == 60000);
    ck_assert(gguf_value_as_i64(KV("t.i16"), &i) && i == -30000);
    ck_assert(gguf_value_as_u64(KV("t.u32"), &u) && u == 4000000000u);
    ck_assert(gguf_value_as_i64(KV("t.i32"), &i) && i == -2000000000);
    ck_assert(gguf_value_as_u64(KV("t.u64"), &u) && u == UINT64_MAX - 5);
    ck_assert(!gguf_value_as_i64(KV("t.u64"), &i));
    ck_assert(gguf_value_as_i64(KV("t.i64"), &i) && i == INT64_MIN + 7);
    ck_assert(gguf_value_as_f64(KV("t.f32"), &d) && d == -1.5);
    ck_assert(gguf_value_as_f64(KV("t.f64"), &d) && d == 1e300);
    ck_assert(gguf_value_as_bool(KV("t.bool"), &bo) && bo);
    v = KV("t.strn");
    ck_assert_int_eq(v->type, GGUF_VT_STRING);
    ck_assert_uint_eq(v->n, 3);
    ck_assert(memcmp(v->data, "a\0b", 3) == 0);
    v = KV("t.arr_i32");
    ck_assert_int_eq(v->elem_type, GGUF_VT_I32);
    struct gguf_value e;
    ck_assert(gguf_value_elem(v, 0, &e) && gguf_value_as_i64(&e, &i) && i == -1);
    ck_assert(gguf_value_elem(v, 2, &e) && gguf_value_as_i64(&e, &i) && i == 7);
    ck_assert(!gguf_value_elem(v, 3, &e));
    v = KV("t.arr_f64");
    ck_assert(gguf_value_elem(v, 1, &e) && gguf_value_as_f64(&e, &d) && d == -8.0);
    ck_assert_uint_eq(KV("t.arr_empty")->n, 0);
    v = KV("t.arr_str");
    ck_assert_uint_eq(v->n, 3);
    ck_assert(gguf_value_elem(v, 1, &e) && e.n == 0);
    ck_assert(gguf_value_elem(v, 2, &e) && e.n == 6 && memcmp(e.data, "\xe2\x96\x81the", 6) == 0);
    v = KV("t.nested");
    ck_assert_int_eq(v->elem_type, GGUF_VT_ARRAY);
    ck_assert(gguf_value_elem(v, 0, &e) && e.n == 2);
    struct gguf_value e2;
    ck_assert(gguf_value_elem(&e, 1, &e2) && gguf_value_as_u64(&e2, &u) && u == 2);
    ck_assert(gguf_value_elem(v, 1, &e) && e.n == 1);
    ck_assert(gguf_value_elem(&e, 0, &e2) && gguf_value_as_u64(&e2, &u) && u == 3);
    /* strict typed getters */
    uint32_t u32;
    ck_assert_int_eq(gguf_get_u32(f, "t.u32", &u32, &err), MW_OK);
    ck_assert_int_eq(gguf_get_u32(f, "t.u64", &u32, &err), MW_E_FORMAT);
    ck_assert_ptr_nonnull(strstr(err.msg, "expected u32"));
    ck_assert_int_eq(gguf_get_u32(f, "nope", &u32, &err), MW_E_VALUE);
#undef KV
    /* tensors */
    ck_assert_uint_eq(gguf_tensor_count(f), 3);
    const struct gguf_tensor *t = gguf_tensor_get(f, 2);
    ck_assert_str_eq(t->name, "c.weight");
    ck_assert_uint_eq(t->n_dims, 3);
    ck_assert_uint_eq(t->ne[2], 2);
    ck_assert_uint_eq(t->ne[3], 1);
    ck_assert_uint_eq(t->nbytes, 256);
    ck_assert_int_eq(gguf_tensor_find(f, "b.weight"), 1);
    uint8_t data[768 + 34 + 256];
    for (size_t k = 0; k < sizeof data; k++) data[k] = (uint8_t)(k * 131 + 7);
    ck_assert(memcmp(gguf_tensor_data(f, 0), data, 768) == 0);
    ck_assert(memcmp(gguf_tensor_data(f, 1), data + 768, 34) == 0);
    ck_assert(memcmp(gguf_tensor_data(f, 2), data + 802, 256) == 0);
    for (uint64_t k = 0; k < 3; k++) ck_assert_uint_eq(gguf_tensor_get(f, k)->file_off % 32, 0);
    /* checksums: header and per tensor match the stored values */
    uint64_t hh;
    ck_assert(gguf_hash_header(f, &hh));
    v = gguf_kv_value(f, (uint64_t)gguf_kv_find(f, GGUF_KEY_CK_HEADER));
    ck_assert_uint_eq(hh, mw_le64(v->data));
    v = gguf_kv_value(f, (uint64_t)gguf_kv_find(f, GGUF_KEY_CK_TENSORS));
    ck_assert_uint_eq(v->n, 3);
    for (uint64_t k = 0; k < 3; k++) {
        ck_assert(gguf_value_elem(v, k, &e) && gguf_value_as_u64(&e, &u));
        t = gguf_tensor_get(f, k);
        ck_assert_uint_eq(u, gguf_hash_tensor(gguf_tensor_data(f, k), t->nbytes));
    }
    /* copying every KV of the read file into a new writer reproduces the KV bytes */
    gguf_close(f);
    ck_assert_int_eq(count_entries(dir), 2); /* no temp files left behind */
    free(b1);
    free(b2);
    free(p1);
    free(p2);
    free(dir);
}
END_TEST

START_TEST(test_ggml_example_bytes)
{
    /* docs/formats.md §1.7: ggml's own writer produces these 352 bytes. Without
     * checksum keys ours must be identical. Check a few fixed points and the
     * exact size; the full SHA-256 is checked by tests/e2e/ggml_example.sh. */
    char *dir = make_tmpdir("gguf");
    char *p = path_in(dir, "ex.gguf");
    struct gguf_writer *w;
    struct mw_err err;
    mw_err_clear(&err);
    ck_assert_int_eq(gguf_writer_init(&w, &err), MW_OK);
    ck_assert_int_eq(gguf_writer_set_checksums(w, false, &err), MW_OK);
    gguf_writer_set_str(w, "general.architecture", "llama", &err);
    gguf_writer_set_u32(w, "llama.block_count", 1, &err);
    const float fa[2] = {1.0f, -2.0f};
    gguf_writer_set_arr(w, "x.f", GGUF_VT_F32, fa, 2, &err);
    const char *ss[2] = {"a", "bc"};
    gguf_writer_set_arr_str(w, "x.s", ss, NULL, 2, &err);
    gguf_writer_set_bool(w, "x.b", true, &err);
    const uint64_t ne0[2] = {3, 2}, ne1[1] = {4};
    ck_assert_int_eq(gguf_writer_add_tensor(w, "t0", GGUF_TYPE_F32, 2, ne0, &err), MW_OK);
    ck_assert_int_eq(gguf_writer_add_tensor(w, "t1", GGUF_TYPE_F16, 1, ne1, &err), MW_OK);
    ck_assert_int_eq(gguf_writer_open(w, p, &err), MW_OK);
    const float d0[6] = {0, 1, 2, 3, 4, 5};
    const uint16_t d1[4] = {0, 0, 0, 0};
    ck_assert_int_eq(gguf_writer_write(w, d0, sizeof d0, &err), MW_OK);
    ck_assert_int_eq(gguf_writer_write(w, d1, sizeof d1, &err), MW_OK);
    ck_assert_int_eq(gguf_writer_finish(w, &err), MW_OK);
    gguf_writer_free(w);
    size_t n = 0;
    uint8_t *b = read_file(p, &n);
    ck_assert_uint_eq(n, 352);
    ck_assert_uint_eq(mw_le64(b + 0xc7), 2); /* t0's name length at 0x00c7 */
    ck_assert_uint_eq(mw_le32(b + 0x124), 0x3f800000u); /* t0[1] = 1.0f at 0x120+4 */
    free(b);
    free(p);
    free(dir);
}
END_TEST

START_TEST(test_writer_misuse)
{
    char *dir = make_tmpdir("gguf");
    char *p = path_in(dir, "m.gguf");
    struct mw_err err;
    mw_err_clear(&err);
    struct gguf_writer *w;
    ck_assert_int_eq(gguf_writer_init(&w, &err), MW_OK);
    ck_assert_int_eq(gguf_writer_set_u32(w, "k", 1, &err), MW_OK);
    ck_assert_int_eq(gguf_writer_set_u32(w, "k", 2, &err), MW_E_USAGE);
    ck_assert_int_eq(gguf_writer_set_u32(w, "", 2, &err), MW_E_USAGE);
    ck_assert_int_eq(gguf_writer_set_u64(w, GGUF_KEY_CK_HEADER, 2, &err), MW_E_USAGE);
    const uint64_t ne[2] = {32, 2}, bad[1] = {33}, zero[1] = {0};
    ck_assert_int_eq(gguf_writer_add_tensor(w, "x", GGUF_TYPE_Q8_0, 2, ne, &err), MW_OK);
    ck_assert_int_eq(gguf_writer_add_tensor(w, "x", GGUF_TYPE_F32, 2, ne, &err), MW_E_USAGE);
    ck_assert_int_eq(gguf_writer_add_tensor(w, "y", GGUF_TYPE_Q8_0, 1, bad, &err), MW_E_USAGE);
    ck_assert_int_eq(gguf_writer_add_tensor(w, "y", 4, 1, ne, &err), MW_E_USAGE);
    ck_assert_int_eq(gguf_writer_add_tensor(w, "y", GGUF_TYPE_F32, 1, zero, &err), MW_E_USAGE);
    ck_assert_int_eq(gguf_writer_add_tensor(w, "y", GGUF_TYPE_F32, 5, ne, &err), MW_E_USAGE);
    ck_assert_int_eq(gguf_writer_add_tensor(w, "0123456789012345678901234567890123456789012345678901234567890123",
                                            GGUF_TYPE_F32, 1, ne, &err), MW_E_USAGE);
    ck_assert_int_eq(gguf_writer_open(w, p, &err), MW_OK);
    ck_assert_int_eq(gguf_writer_set_u32(w, "late", 1, &err), MW_E_USAGE);
    uint8_t blk[68] = {0};
    ck_assert_int_eq(gguf_writer_write(w, blk, 34, &err), MW_OK);
    /* finishing with data missing fails and leaves nothing under the name */
    ck_assert_int_eq(gguf_writer_finish(w, &err), MW_E_USAGE);
    ck_assert_ptr_nonnull(strstr(err.msg, "'x'"));
    gguf_writer_free(w);
    ck_assert_int_eq(access(p, F_OK), -1);
    ck_assert_int_eq(count_entries(dir), 0);
    /* too much data */
    ck_assert_int_eq(gguf_writer_init(&w, &err), MW_OK);
    ck_assert_int_eq(gguf_writer_add_tensor(w, "x", GGUF_TYPE_Q8_0, 2, ne, &err), MW_OK);
    ck_assert_int_eq(gguf_writer_open(w, p, &err), MW_OK);
    ck_assert_int_eq(gguf_writer_write(w, blk, 68, &err), MW_OK);
    ck_assert_int_eq(gguf_writer_write(w, blk, 1, &err), MW_E_USAGE);
    gguf_writer_free(w);
    ck_assert_int_eq(count_entries(dir), 0);
    /* unwritable directory */
    ck_assert_int_eq(gguf_writer_init(&w, &err), MW_OK);
    ck_assert_int_eq(gguf_writer_open(w, "/nonexistent-dir/x.gguf", &err), MW_E_IO);
    gguf_writer_free(w);
    free(p);
    free(dir);
}
END_TEST

/* --- atomicity --- */

#define BIG_TENSOR_BYTES (256u * 1024u)

/* Writes a file with one F32 tensor of BIG_TENSOR_BYTES in 4 KiB chunks. If
 * sync_fd >= 0, after half the data it writes one byte there and sleeps
 * (waiting to be killed). Returns the writer's status. */
static enum mw_status write_big(const char *path, int sync_fd)
{
    struct mw_err err;
    mw_err_clear(&err);
    struct gguf_writer *w;
    enum mw_status s = gguf_writer_init(&w, &err);
    const uint64_t ne[1] = {BIG_TENSOR_BYTES / 4};
    if (!s) s = gguf_writer_set_str(w, "general.architecture", "llama", &err);
    if (!s) s = gguf_writer_add_tensor(w, "big", GGUF_TYPE_F32, 1, ne, &err);
    if (!s) s = gguf_writer_open(w, path, &err);
    uint8_t chunk[4096];
    memset(chunk, 0x5a, sizeof chunk);
    for (unsigned i = 0; !s && i < BIG_TENSOR_BYTES / sizeof chunk; i++) {
        s = gguf_writer_write(w, chunk, sizeof chunk, &err);
        if (sync_fd >= 0 && i == BIG_TENSOR_BYTES / sizeof chunk / 2) {
            /* force the buffered half onto disk so the temp file is visible */
            if (write(sync_fd, "x", 1) != 1) _exit(99);
            for (;;) pause();
        }
    }
    if (!s) s = gguf_writer_finish(w, &err);
    gguf_writer_free(w);
    return s;
}

static const char old_content[] = "previous model file, must survive";

START_TEST(test_atomic_fsize_limit)
{
    char *dir = make_tmpdir("gguf");
    char *p = path_in(dir, "out.gguf");
    write_file(p, old_content, sizeof old_content);
    pid_t pid = fork();
    ck_assert_int_ge(pid, 0);
    if (pid == 0) {
        signal(SIGXFSZ, SIG_IGN);
        struct rlimit rl = {.rlim_cur = 64 * 1024, .rlim_max = 64 * 1024};
        setrlimit(RLIMIT_FSIZE, &rl);
        _exit((int)write_big(p, -1));
    }
    int st;
    ck_assert_int_eq(waitpid(pid, &st, 0), pid);
    ck_assert(WIFEXITED(st));
    ck_assert_int_eq(WEXITSTATUS(st), MW_E_NOSPACE);
    size_t n = 0;
    uint8_t *b = read_file(p, &n);
    ck_assert_uint_eq(n, sizeof old_content);
    ck_assert(memcmp(b, old_content, n) == 0);
    ck_assert_int_eq(count_entries(dir), 1); /* temp file removed */
    free(b);
    /* and with nothing there before: nothing appears */
    unlink(p);
    pid = fork();
    if (pid == 0) {
        signal(SIGXFSZ, SIG_IGN);
        struct rlimit rl = {.rlim_cur = 64 * 1024, .rlim_max = 64 * 1024};
        setrlimit(RLIMIT_FSIZE, &rl);
        _exit((int)write_big(p, -1));
    }
    ck_assert_int_eq(waitpid(pid, &st, 0), pid);
    ck_assert_int_eq(WEXITSTATUS(st), MW_E_NOSPACE);
    ck_assert_int_eq(count_entries(dir), 0);
    /* a rerun without the limit succeeds */
    ck_assert_int_eq(write_big(p, -1), MW_OK);
    ck_assert_int_eq(count_entries(dir), 1);
    free(p);
    free(dir);
}
END_TEST

START_TEST(test_atomic_sigkill)
{
    char *dir = make_tmpdir("gguf");
    char *p = path_in(dir, "out.gguf");
    write_file(p, old_content, sizeof old_content);
    int fds[2];
    ck_assert_int_eq(pipe(fds), 0);
    pid_t pid = fork();
    ck_assert_int_ge(pid, 0);
    if (pid == 0) {
        close(fds[0]);
        _exit((int)write_big(p, fds[1]));
    }
    close(fds[1]);
    char c;
    ck_assert_int_eq(read(fds[0], &c, 1), 1); /* child is mid-stream */
    kill(pid, SIGKILL);
    int st;
    ck_assert_int_eq(waitpid(pid, &st, 0), pid);
    ck_assert(WIFSIGNALED(st));
    close(fds[0]);
    size_t n = 0;
    uint8_t *b = read_file(p, &n);
    ck_assert_uint_eq(n, sizeof old_content);
    ck_assert(memcmp(b, old_content, n) == 0);
    free(b);
    /* the killed writer's temp file may remain, but only under a temp name */
    DIR *d = opendir(dir);
    struct dirent *e;
    int others = 0;
    while ((e = readdir(d))) {
        if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..") || !strcmp(e->d_name, "out.gguf"))
            continue;
        ck_assert_msg(strncmp(e->d_name, "out.gguf.tmp.", 13) == 0, "unexpected %s", e->d_name);
        others++;
    }
    closedir(d);
    ck_assert_int_eq(others, 1);
    /* a rerun succeeds and replaces the old file */
    ck_assert_int_eq(write_big(p, -1), MW_OK);
    struct gguf_file *f;
    ck_assert_int_eq(gguf_open(p, 0, &f, NULL), MW_OK);
    ck_assert_uint_eq(gguf_tensor_get(f, 0)->nbytes, BIG_TENSOR_BYTES);
    gguf_close(f);
    free(p);
    free(dir);
}
END_TEST

static Suite *gguf_suite(void)
{
    Suite *s = suite_create("gguf");
    TCase *tc = tcase_create("reader");
    tcase_add_loop_test(tc, test_corrupt_catalogue, 0, C_COUNT);
    tcase_add_test(tc, test_allow_short);
    tcase_add_test(tc, test_every_prefix_rejected);
    tcase_add_test(tc, test_type_table);
    suite_add_tcase(s, tc);
    tc = tcase_create("writer");
    tcase_add_test(tc, test_round_trip);
    tcase_add_test(tc, test_mem_output);
    tcase_add_test(tc, test_ggml_example_bytes);
    tcase_add_test(tc, test_writer_misuse);
    tcase_add_test(tc, test_atomic_fsize_limit);
    tcase_add_test(tc, test_atomic_sigkill);
    tcase_set_timeout(tc, 30);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    return run_suite(gguf_suite());
}
