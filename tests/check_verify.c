/*
 * tests/check_verify.c — verify/: an intact file, and a catalogue of damage
 * (one row per kind, each in its own fork) with the expected status, offset,
 * tensor and message of the first error.
 *
 * Fixtures are written with the gguf writer (tests/tools/fixtures.h) into a
 * fresh mkdtemp() directory under MW_TEST_TMPDIR per test, then damaged on
 * disk and checked with verify_file().
 */
#define _DEFAULT_SOURCE /* mkdtemp */
#include <check.h>
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "gguf/gguf.h"
#include "quant/quant.h"
#include "verify/verify.h"
#include "verify/verify_int.h"
#include "tools/fixtures.h"

#include "check_common.h"

// --- scratch files ---

struct scratch {
    char dir[512];
    char path[600];
};

static void scratch_init(struct scratch *s, const char *name)
{
    char *d = make_tmpdir("verify");
    snprintf(s->dir, sizeof s->dir, "%s", d);
    free(d);
    snprintf(s->path, sizeof s->path, "%s/%s.gguf", s->dir, name);
}

static void scratch_free(struct scratch *s) { rm_rf(s->dir); }

static void make_fixture(const char *path, const struct fx_opts *o)
{
    struct mw_err err;
    mw_err_clear(&err);
    const enum mw_status s = fx_write_small(path, o, &err);
    char buf[1024];
    ck_assert_msg(s == MW_OK, "fixture: %s", mw_err_format(&err, buf, sizeof buf));
}

/* Layout facts of an intact fixture, read back with the reader. */
struct layout {
    uint64_t size, infos_end, data_start, data_end;
    uint64_t t_off[8], t_bytes[8];
    uint64_t n_tensors;
    uint64_t name_val_off;      /* general.name string bytes */
    uint64_t ck_algo_val_off;   /* memwall.checksum.algorithm string bytes */
    uint64_t ck_header_key_off; /* start of the memwall.checksum.header KV */
    uint64_t ck_header_val_off;
};

static void read_layout(const char *path, struct layout *l)
{
    struct gguf_file *f = NULL;
    struct mw_err err;
    mw_err_clear(&err);
    ck_assert_int_eq(gguf_open(path, GGUF_OPEN_DEFAULT, &f, &err), MW_OK);
    memset(l, 0, sizeof *l);
    l->size = gguf_file_size(f);
    l->infos_end = gguf_infos_end(f);
    l->data_start = gguf_data_start(f);
    l->data_end = gguf_data_end(f);
    l->n_tensors = gguf_tensor_count(f);
    ck_assert_uint_le(l->n_tensors, 8);
    for (uint64_t i = 0; i < l->n_tensors; i++) {
        l->t_off[i] = gguf_tensor_get(f, i)->file_off;
        l->t_bytes[i] = gguf_tensor_get(f, i)->nbytes;
    }
    int64_t k = gguf_kv_find(f, "general.name");
    ck_assert_int_ge(k, 0);
    l->name_val_off = gguf_kv_value(f, (uint64_t)k)->off;
    k = gguf_kv_find(f, GGUF_KEY_CK_ALGO);
    if (k >= 0) l->ck_algo_val_off = gguf_kv_value(f, (uint64_t)k)->off;
    k = gguf_kv_find(f, GGUF_KEY_CK_HEADER);
    if (k >= 0) {
        l->ck_header_key_off = gguf_kv_off(f, (uint64_t)k);
        l->ck_header_val_off = gguf_kv_value(f, (uint64_t)k)->off;
    }
    gguf_close(f);
}

static const struct verify_item *first_error(const struct verify_report *r)
{
    for (uint64_t i = 0; i < r->n_items; i++)
        if (r->items[i].level == VERIFY_ERROR) return &r->items[i];
    return NULL;
}

static const struct verify_item *find_item(const struct verify_report *r, enum verify_level lv,
                                           const char *sub)
{
    for (uint64_t i = 0; i < r->n_items; i++)
        if (r->items[i].level == lv && strstr(r->items[i].msg, sub)) return &r->items[i];
    return NULL;
}

static void dump(const struct verify_report *r)
{
    for (uint64_t i = 0; i < r->n_items; i++) {
        const struct verify_item *it = &r->items[i];
        fprintf(stderr, "  [%s %s] off %lld %s: %s\n", verify_level_name(it->level),
                mw_status_name(it->code),
                it->off == MW_ERR_OFF_NONE ? -1LL : (long long)it->off, it->where, it->msg);
    }
}

// --- intact ---

START_TEST(test_intact)
{
    struct scratch s;
    scratch_init(&s, "intact");
    make_fixture(s.path, NULL);
    struct verify_report r;
    const struct verify_opts deep = {.deep = true};
    ck_assert_int_eq(verify_file(s.path, &deep, &r), MW_OK);
    ck_assert(r.header_ok);
    ck_assert_uint_eq(r.version, 3);
    ck_assert_uint_eq(r.n_tensors, 4);
    ck_assert_uint_eq(r.n_kv, 10); /* 7 caller keys + 3 checksum keys */
    ck_assert_uint_eq(r.alignment, 32);
    ck_assert_uint_eq(r.data_bytes, 60 + 28 + 18 + 68);
    ck_assert_uint_eq(r.data_end, r.file_size);
    ck_assert_int_eq(r.checksums, VERIFY_CK_OK);
    ck_assert(r.header_hash_ok);
    ck_assert_uint_eq(r.n_tensors_hashed, 4);
    ck_assert_uint_eq(r.n_tensors_hash_bad, 0);
    ck_assert_uint_eq(r.n_tensors_decoded, 4);
    ck_assert_uint_eq(r.n_errors + r.n_warnings, 0);
    ck_assert_uint_eq(r.n_items, 0);
    verify_report_free(&r);
    verify_report_free(&r); /* idempotent */
    verify_report_free(NULL);

    /* same bytes through verify_mem */
    size_t n;
    uint8_t *b = read_file_ok(s.path, &n);
    ck_assert_int_eq(verify_mem(b, n, "mem", &deep, &r), MW_OK);
    ck_assert_str_eq(r.path, "mem");
    ck_assert_uint_eq(r.n_tensors_hashed, 4);
    verify_report_free(&r);
    free(b);
    scratch_free(&s);
}
END_TEST

// --- the catalogue ---

enum mut {
    M_NONE,
    M_FLIP_DATA,       /* arg: tensor index; byte 5 of its data */
    M_FLIP_TWO,        /* first and last tensor */
    M_FLIP_HEADER,     /* a byte of the general.name value */
    M_FLIP_CK_HEADER,  /* a byte of the stored header checksum */
    M_PAD_BETWEEN,     /* arg: tensor index; its 2nd padding byte */
    M_PAD_BEFORE_BLOB, /* last byte before data_start */
    M_PAD_AFTER_LAST,  /* last byte of the file */
    M_TRUNC_TENSOR,    /* arg: tensor index; cut 5 bytes into its data */
    M_TRUNC_LAST_PAD,  /* cut 3 bytes before the end */
    M_TRUNC_HEADER,    /* cut at byte 100 */
    M_TRUNC_EMPTY,     /* empty file */
    M_TRAILING,        /* append 7 bytes */
    M_ALGO,            /* "xxh3-64" -> "xxh3-65" */
    M_CK_KEY_RENAME,   /* memwall.checksum.header -> ...headeX */
};

struct row {
    const char *name;
    struct fx_opts fx;
    enum mut mut;
    int arg;
    bool deep;
    enum mw_status want;
    const char *tensor;   /* tensor named by the first error (NULL: none) */
    const char *msg_sub;  /* substring of the first error's message ("" if none) */
    uint64_t want_errors; /* 0: don't check */
};

static const struct row rows[] = {
    {"none", {0}, M_NONE, 0, false, MW_OK, NULL, "", 0},
    {"flip_data_bf16", {0}, M_FLIP_DATA, 2, false, MW_E_CHECKSUM, "t.bf16", "checksum mismatch", 1},
    {"flip_data_f32", {0}, M_FLIP_DATA, 0, false, MW_E_CHECKSUM, "t.f32", "checksum mismatch", 1},
    {"flip_data_two", {0}, M_FLIP_TWO, 0, false, MW_E_CHECKSUM, "t.f32", "checksum mismatch", 2},
    {"flip_header", {0}, M_FLIP_HEADER, 0, false, MW_E_CHECKSUM, NULL, "header checksum", 1},
    {"flip_ck_header", {0}, M_FLIP_CK_HEADER, 0, false, MW_E_CHECKSUM, NULL, "header checksum", 1},
    {"pad_between", {0}, M_PAD_BETWEEN, 1, false, MW_E_FORMAT, "t.f16", "padding", 1},
    {"pad_before_blob", {0}, M_PAD_BEFORE_BLOB, 0, false, MW_E_FORMAT, NULL, "padding before", 2},
    {"pad_after_last", {0}, M_PAD_AFTER_LAST, 0, false, MW_E_FORMAT, "t.q8_0", "padding", 1},
    {"trunc_in_tensor", {0}, M_TRUNC_TENSOR, 2, false, MW_E_TRUNC, "t.bf16",
     "13 bytes short; 1 further tensor missing", 1},
    {"trunc_first_tensor", {0}, M_TRUNC_TENSOR, 0, false, MW_E_TRUNC, "t.f32",
     "55 bytes short; 3 further tensors missing", 1},
    {"trunc_last_padding", {0}, M_TRUNC_LAST_PAD, 0, false, MW_E_TRUNC, "t.q8_0", "3 bytes short", 1},
    {"trunc_header", {0}, M_TRUNC_HEADER, 0, false, MW_E_TRUNC, NULL, "", 1},
    {"trunc_empty", {0}, M_TRUNC_EMPTY, 0, false, MW_E_TRUNC, NULL, "", 1},
    {"trailing_bytes", {0}, M_TRAILING, 0, false, MW_OK, NULL, "", 0},
    {"algo_unsupported", {0}, M_ALGO, 0, false, MW_E_UNSUPPORTED, NULL, "xxh3-65", 1},
    {"ck_key_renamed", {0}, M_CK_KEY_RENAME, 0, false, MW_E_FORMAT, NULL, "checksum key missing", 1},
    {"deep_nan_f16", {.poison = FX_NAN_F16}, M_NONE, 0, true, MW_E_VALUE, "t.f16",
     "element 3 (row 0, col 3) is NaN", 1},
    {"nan_f16_not_deep", {.poison = FX_NAN_F16}, M_NONE, 0, false, MW_OK, NULL, "", 0},
    {"deep_inf_f32", {.poison = FX_INF_F32}, M_NONE, 0, true, MW_E_VALUE, "t.f32",
     "element 7 (row 1, col 2) is +Inf", 1},
    {"deep_ninf_bf16", {.poison = FX_NINF_BF16}, M_NONE, 0, true, MW_E_VALUE, "t.bf16",
     "element 8 (row 0, col 8) is -Inf", 1},
    {"deep_nan_q8_scale", {.poison = FX_NAN_Q8_SCALE}, M_NONE, 0, true, MW_E_VALUE, "t.q8_0",
     "element 32 (row 1, col 0) is NaN", 1},
    {"no_checksums", {.no_checksums = true}, M_NONE, 0, true, MW_OK, NULL, "", 0},
    /* without checksums a data flip is invisible: structure only */
    {"no_checksums_flip_data", {.no_checksums = true}, M_FLIP_DATA, 1, false, MW_OK, NULL, "", 0},
    {"no_checksums_pad", {.no_checksums = true}, M_PAD_BETWEEN, 0, false, MW_E_FORMAT, "t.f32",
     "padding", 1},
    /* t.extra: a type without quant traits (chosen at run time) */
    {"deep_not_decoded", {.with_extra = true}, M_NONE, 0, true, MW_OK, NULL, "", 0},
    {"flip_not_decoded", {.with_extra = true}, M_FLIP_DATA, 4, false, MW_E_CHECKSUM, "t.extra",
     "checksum mismatch", 1},
};
#define N_ROWS ((int)(sizeof rows / sizeof rows[0]))

/* Damage b (n bytes, room for 64 more) per row; returns the expected offset
 * of the first error (MW_ERR_OFF_NONE: not checked). */
static uint64_t apply(const struct row *rw, const struct layout *l, uint8_t *b, size_t *n)
{
    switch (rw->mut) {
    case M_NONE: return MW_ERR_OFF_NONE;
    case M_FLIP_DATA: b[l->t_off[rw->arg] + 5] ^= 0x01; return l->t_off[rw->arg];
    case M_FLIP_TWO:
        b[l->t_off[0]] ^= 0x80;
        b[l->t_off[l->n_tensors - 1] + l->t_bytes[l->n_tensors - 1] - 1] ^= 0x80;
        return l->t_off[0];
    case M_FLIP_HEADER: b[l->name_val_off + 2] ^= 0x20; return 0;
    case M_FLIP_CK_HEADER: b[l->ck_header_val_off + 7] ^= 0x01; return 0;
    case M_PAD_BETWEEN: {
        const uint64_t o = l->t_off[rw->arg] + l->t_bytes[rw->arg] + 1;
        b[o] = 0x5a;
        return o;
    }
    case M_PAD_BEFORE_BLOB:
        ck_assert_uint_lt(l->infos_end, l->data_start); /* the fixture has such padding */
        b[l->data_start - 1] = 0x01;
        return l->data_start - 1;
    case M_PAD_AFTER_LAST: b[*n - 1] = 0xff; return *n - 1;
    case M_TRUNC_TENSOR: *n = l->t_off[rw->arg] + 5; return l->t_off[rw->arg];
    case M_TRUNC_LAST_PAD: *n -= 3; return *n;
    case M_TRUNC_HEADER: *n = 100; return MW_ERR_OFF_NONE;
    case M_TRUNC_EMPTY: *n = 0; return MW_ERR_OFF_NONE;
    case M_TRAILING:
        memset(b + *n, 0xee, 7);
        *n += 7;
        return MW_ERR_OFF_NONE;
    case M_ALGO: b[l->ck_algo_val_off + 6] = '5'; return l->ck_algo_val_off;
    case M_CK_KEY_RENAME:
        /* the key string ends right before its i32 value type */
        b[l->ck_header_key_off + 8 + strlen(GGUF_KEY_CK_HEADER) - 1] = 'X';
        return MW_ERR_OFF_NONE;
    }
    return MW_ERR_OFF_NONE;
}

/* A valid ggml type that verify cannot decode (no quant traits), or -1. */
static int64_t undecodable_type(void)
{
    for (uint32_t t = GGUF_TYPE_COUNT; t-- > 0;) {
        const struct gguf_type_info *ti = gguf_type_get(t);
        if (ti && ti->blck > 0 && ti->type_size <= 512 && !quant_traits_get(t)) return t;
    }
    return -1;
}

START_TEST(test_catalogue)
{
    const struct row *rw = &rows[_i];
    struct fx_opts fx = rw->fx;
    if (fx.with_extra) {
        const int64_t t = undecodable_type();
        if (t < 0) return; /* every type decodes: nothing left to test here */
        fx.extra_type = (uint32_t)t;
    }
    struct scratch s;
    scratch_init(&s, rw->name);
    make_fixture(s.path, &fx);
    struct layout l;
    read_layout(s.path, &l);
    size_t n;
    uint8_t *b = read_file_ok(s.path, &n);
    const uint64_t want_off = apply(rw, &l, b, &n);
    write_file(s.path, b, n);
    free(b);

    const struct verify_opts o = {.deep = rw->deep};
    struct verify_report r;
    const enum mw_status st = verify_file(s.path, &o, &r);
    if (st != rw->want) dump(&r);
    ck_assert_msg(st == rw->want, "%s: status %s, want %s", rw->name, mw_status_name(st),
                  mw_status_name(rw->want));
    ck_assert_int_eq(r.status, st);
    ck_assert_uint_eq(r.file_size, n);
    const struct verify_item *e = first_error(&r);
    if (rw->want == MW_OK) {
        ck_assert_ptr_null(e);
        ck_assert_uint_eq(r.n_errors, 0);
    } else {
        ck_assert_ptr_nonnull(e);
        ck_assert_int_eq(e->code, rw->want);
        if (rw->want_errors) ck_assert_uint_eq(r.n_errors, rw->want_errors);
        if (rw->tensor) {
            ck_assert_str_eq(e->name, rw->tensor);
            ck_assert_int_ge(e->tensor, 0);
            ck_assert_ptr_nonnull(strstr(e->where, rw->tensor));
        } else {
            ck_assert_int_eq(e->tensor, -1);
        }
        ck_assert_msg(strstr(e->msg, rw->msg_sub) != NULL, "%s: message '%s' lacks '%s'", rw->name,
                      e->msg, rw->msg_sub);
        if (want_off != MW_ERR_OFF_NONE)
            ck_assert_msg(e->off == want_off, "%s: offset %llu, want %llu", rw->name,
                          (unsigned long long)e->off, (unsigned long long)want_off);
        if (rw->want == MW_E_TRUNC) ck_assert_ptr_nonnull(strstr(e->msg, "truncat"));
        ck_assert_int_ne(e->off, MW_ERR_OFF_NONE);
    }

    /* row-specific facts */
    switch (rw->mut) {
    case M_FLIP_TWO:
        ck_assert_str_eq(r.items[1].name, "t.q8_0");
        ck_assert_uint_eq(r.n_tensors_hash_bad, 2);
        ck_assert_int_eq(r.checksums, VERIFY_CK_MISMATCH);
        break;
    case M_PAD_BEFORE_BLOB:
        /* the header checksum covers that padding too */
        ck_assert_int_eq(r.items[1].code, MW_E_CHECKSUM);
        break;
    case M_TRUNC_TENSOR: ck_assert_uint_eq(r.n_tensors_missing, 4 - (uint64_t)rw->arg); break;
    case M_TRUNC_HEADER:
    case M_TRUNC_EMPTY: ck_assert(!r.header_ok); break;
    case M_TRAILING:
        ck_assert_uint_eq(r.trailing_bytes, 7);
        ck_assert_uint_eq(r.n_warnings, 1);
        ck_assert_ptr_nonnull(find_item(&r, VERIFY_WARNING, "after the end"));
        ck_assert_uint_eq(r.items[0].off, l.data_end);
        break;
    case M_CK_KEY_RENAME:
        ck_assert_int_eq(r.checksums, VERIFY_CK_INVALID);
        ck_assert_ptr_nonnull(strstr(e->where, GGUF_KEY_CK_HEADER));
        ck_assert_ptr_nonnull(find_item(&r, VERIFY_WARNING, "unknown checksum key"));
        break;
    default: break;
    }
    if (rw->fx.no_checksums) {
        ck_assert_int_eq(r.checksums, VERIFY_CK_ABSENT);
        ck_assert_ptr_nonnull(find_item(&r, VERIFY_NOTE, "no checksums"));
        ck_assert_uint_eq(r.n_tensors_hashed, 0);
    }
    if (rw->fx.with_extra && rw->deep) {
        ck_assert_uint_eq(r.n_tensors_not_decoded, 1);
        ck_assert_uint_eq(r.n_tensors_decoded, 4);
        const struct verify_item *it = find_item(&r, VERIFY_NOTE, "not decoded");
        ck_assert_ptr_nonnull(it);
        ck_assert_str_eq(it->name, "t.extra");
    }
    if (rw->want == MW_E_VALUE) ck_assert_uint_eq(r.n_tensors_nonfinite, 1);
    verify_report_free(&r);
    scratch_free(&s);
}
END_TEST

// --- more cases ---

/* A tensor larger than the hashing chunk goes through the streaming hash. */
START_TEST(test_big_tensor_streaming)
{
    struct scratch s;
    scratch_init(&s, "big");
    const uint64_t elems = (VERIFY_CHUNK_BYTES / 2) + 12345; /* > one chunk of F16 */
    const struct fx_opts fo = {.big_elems = elems};
    make_fixture(s.path, &fo);
    struct verify_report r;
    const struct verify_opts deep = {.deep = true};
    ck_assert_int_eq(verify_file(s.path, &deep, &r), MW_OK);
    ck_assert_uint_eq(r.n_tensors_hashed, 5);
    ck_assert_uint_eq(r.n_tensors_decoded, 5);
    verify_report_free(&r);

    /* damage in the second chunk of t.big */
    struct layout l;
    read_layout(s.path, &l);
    size_t n;
    uint8_t *b = read_file_ok(s.path, &n);
    b[l.t_off[4] + VERIFY_CHUNK_BYTES + 100] ^= 0x04;
    write_file(s.path, b, n);
    free(b);
    ck_assert_int_eq(verify_file(s.path, NULL, &r), MW_E_CHECKSUM);
    ck_assert_str_eq(first_error(&r)->name, "t.big");
    ck_assert_uint_eq(r.n_errors, 1);
    verify_report_free(&r);
    scratch_free(&s);
}
END_TEST

START_TEST(test_missing_file)
{
    struct verify_report r;
    const char *p = MW_TEST_TMPDIR "/no-such-dir/no-such-file.gguf";
    ck_assert_int_eq(verify_file(p, NULL, &r), MW_E_IO);
    ck_assert(!r.header_ok);
    ck_assert_uint_eq(r.n_errors, 1);
    ck_assert_int_eq(r.items[0].code, MW_E_IO);
    ck_assert_str_eq(r.path, p);
    verify_report_free(&r);
    /* a directory is not a GGUF file either */
    ck_assert_int_eq(verify_file(MW_TEST_TMPDIR, NULL, &r), MW_E_IO);
    verify_report_free(&r);
}
END_TEST

START_TEST(test_max_items)
{
    struct scratch s;
    scratch_init(&s, "cap");
    make_fixture(s.path, NULL);
    struct layout l;
    read_layout(s.path, &l);
    size_t n;
    uint8_t *b = read_file_ok(s.path, &n);
    for (uint64_t i = 0; i < l.n_tensors; i++) b[l.t_off[i]] ^= 0x10;
    write_file(s.path, b, n);
    free(b);
    const struct verify_opts o = {.max_items = 1};
    struct verify_report r;
    ck_assert_int_eq(verify_file(s.path, &o, &r), MW_E_CHECKSUM);
    ck_assert_uint_eq(r.n_errors, 4);
    ck_assert_uint_eq(r.n_items, 1);
    ck_assert_uint_eq(r.n_dropped, 3);
    ck_assert_str_eq(r.items[0].name, "t.f32");
    verify_report_free(&r);
    scratch_free(&s);
}
END_TEST

/* The 352-byte file of docs/formats.md §1.7, as ggml's own writer produces it:
 * no memwall checksums, still verifies (structure only). */
static size_t put_str(uint8_t *p, const char *s)
{
    const size_t n = strlen(s);
    mw_put_le64(p, n);
    memcpy(p + 8, s, n);
    return 8 + n;
}

START_TEST(test_ggml_worked_example)
{
    uint8_t b[352];
    memset(b, 0, sizeof b);
    size_t o = 0;
    memcpy(b, "GGUF", 4);
    mw_put_le32(b + 4, 3);
    mw_put_le64(b + 8, 2);
    mw_put_le64(b + 16, 5);
    o = 24;
    o += put_str(b + o, "general.architecture");
    mw_put_le32(b + o, 8), o += 4;
    o += put_str(b + o, "llama");
    o += put_str(b + o, "llama.block_count");
    mw_put_le32(b + o, 4), o += 4;
    mw_put_le32(b + o, 1), o += 4;
    o += put_str(b + o, "x.f");
    mw_put_le32(b + o, 9), o += 4;
    mw_put_le32(b + o, 6), o += 4;
    mw_put_le64(b + o, 2), o += 8;
    mw_put_le32(b + o, 0x3f800000), o += 4;
    mw_put_le32(b + o, 0xc0000000), o += 4;
    o += put_str(b + o, "x.s");
    mw_put_le32(b + o, 9), o += 4;
    mw_put_le32(b + o, 8), o += 4;
    mw_put_le64(b + o, 2), o += 8;
    o += put_str(b + o, "a");
    o += put_str(b + o, "bc");
    o += put_str(b + o, "x.b");
    mw_put_le32(b + o, 7), o += 4;
    b[o++] = 1;
    ck_assert_uint_eq(o, 0xc7);
    o += put_str(b + o, "t0");
    mw_put_le32(b + o, 2), o += 4;
    mw_put_le64(b + o, 3), o += 8;
    mw_put_le64(b + o, 2), o += 8;
    mw_put_le32(b + o, 0), o += 4;
    mw_put_le64(b + o, 0), o += 8;
    o += put_str(b + o, "t1");
    mw_put_le32(b + o, 1), o += 4;
    mw_put_le64(b + o, 4), o += 8;
    mw_put_le32(b + o, 1), o += 4;
    mw_put_le64(b + o, 32), o += 8;
    ck_assert_uint_eq(o, 0x113);
    for (int i = 0; i < 6; i++) {
        const float x = (float)i;
        uint32_t u;
        memcpy(&u, &x, 4);
        mw_put_le32(b + 0x120 + 4 * i, u);
    }
    struct verify_report r;
    const struct verify_opts deep = {.deep = true};
    ck_assert_int_eq(verify_mem(b, sizeof b, "ggml.gguf", &deep, &r), MW_OK);
    ck_assert_int_eq(r.checksums, VERIFY_CK_ABSENT);
    ck_assert_uint_eq(r.n_tensors, 2);
    ck_assert_uint_eq(r.n_tensors_decoded, 2);
    ck_assert_ptr_nonnull(find_item(&r, VERIFY_NOTE, "no checksums"));
    verify_report_free(&r);

    /* non-zero padding in a file without checksums is still caught */
    b[0x140 + 8 + 3] = 0x01;
    ck_assert_int_eq(verify_mem(b, sizeof b, "ggml.gguf", NULL, &r), MW_E_FORMAT);
    ck_assert_uint_eq(first_error(&r)->off, 0x14b);
    ck_assert_str_eq(first_error(&r)->name, "t1");
    verify_report_free(&r);
}
END_TEST

/* llama.cpp's own F16 conversion of the tiny reference model (bundled in
 * datasets/: missing is a broken checkout, a failure, never a pass). */
START_TEST(test_reference_model)
{
    const char *p = MW_DATASETS_DIR "/reference/tinyllama-8m.llamacpp-f16.gguf";
    ck_assert_msg(access(p, R_OK) == 0, "%s is missing (bundled in datasets/)", p);
    struct verify_report r;
    const struct verify_opts deep = {.deep = true};
    const enum mw_status st = verify_file(p, &deep, &r);
    if (st != MW_OK) dump(&r);
    ck_assert_int_eq(st, MW_OK);
    ck_assert_int_eq(r.checksums, VERIFY_CK_ABSENT);
    ck_assert_uint_eq(r.n_tensors, 75);
    ck_assert_uint_eq(r.n_tensors_decoded, 75);
    verify_report_free(&r);
}
END_TEST

static Suite *verify_suite(void)
{
    Suite *s = suite_create("verify");
    TCase *tc = tcase_create("verify");
    tcase_add_test(tc, test_intact);
    tcase_add_loop_test(tc, test_catalogue, 0, N_ROWS);
    tcase_add_test(tc, test_big_tensor_streaming);
    tcase_add_test(tc, test_missing_file);
    tcase_add_test(tc, test_max_items);
    tcase_add_test(tc, test_ggml_worked_example);
    tcase_add_test(tc, test_reference_model);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    return run_suite(verify_suite());
}
