/*
 * tests/check_huge.c — files over 4 GiB and tensors over 2^32 elements, made
 * cheap with sparse files: only the header and a few data bytes are real, the
 * rest is a hole (zeros that cost no disk and no write time).
 *
 * GGUF: the header comes from memwall's own writer. A child process runs the
 * writer for the huge layout under RLIMIT_FSIZE = 1 MiB with SIGXFSZ at its
 * default action: the kernel lets the first 1 MiB through (header, the small
 * first tensor, zeros) and kills the child at the next write, so the writer's
 * temp file is left with exactly what it wrote. The test then extends it
 * (ftruncate) to the size the writer reports for the finished file, writes
 * the last tensor's values past 4 GiB, and fills in the checksums the writer
 * would have patched at the end (XXH3 of the data; the header hash over
 * [0, data_start) with its own slot zero). Nothing of that is taken from the
 * reader: the tensor hashes are computed from what was written, the offsets
 * from the layout rules (docs/formats.md §1). The reader and verify must then
 * agree with the writer on every offset and size, find every checksum
 * right, name a flipped byte 4 GiB + 100 bytes into the big tensor, and name
 * the last tensor (at an offset above 4 GiB) when the file is cut short.
 *
 *   b.huge  Q8_0 [8192, 524289]: 4 294 975 488 elements (> 2^32) and
 *           4 563 411 456 bytes (> 2^32)
 *   c.tail  F32 [64] at a blob offset above 4 GiB, non-zero values
 *
 * Safetensors: a header written here (there is no safetensors writer in
 * memwall) with a U8 tensor of 4 295 032 832 elements and an F16 tensor whose
 * data starts past 4 GiB; hf_st_open must report both exactly and hand out
 * the F16 values.
 *
 * `check_huge --make PATH` only writes the GGUF file (for
 * tests/e2e/faults_huge.sh, which runs the memwall binary on it).
 * The tests skip (pass, with a note) where the filesystem has no sparse files.
 * Cost: verify hashes the 4.25 GiB of holes once per run (the kernel hands
 * out zero pages; no disk I/O).
 */
#define _GNU_SOURCE
#include <check.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <linux/magic.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#define XXH_INLINE_ALL
#include <xxhash.h>

#include "core/mw.h"
#include "gguf/gguf.h"
#include "verify/verify.h"
#if defined(MW_TEST_HF)
#include "hf/hf.h"

#include "check_common.h"
#endif

#define GIB (1ull << 30)
#define FOUR_GIB (4ull << 30)

static const uint64_t HUGE_NE[2] = {8192, 524289};
#define HUGE_ELEMS (8192ull * 524289ull)     /* 4 294 975 488 */
#define HUGE_BYTES (HUGE_ELEMS / 32ull * 34) /* Q8_0: 34 bytes per 32 */
#define SMALL_N 32
#define TAIL_N 64

static float small_val(unsigned i) { return (float)i * 0.25f - 3.0f; }
static float tail_val(unsigned i) { return 1000.0f + (float)i; }

// --- helpers ---------------------------------------------------------------------

static bool pwrite_all(int fd, const void *p, size_t n, uint64_t off)
{
    const uint8_t *b = p;
    while (n) {
        ssize_t k = pwrite(fd, b, n, (off_t)off);
        if (k <= 0) return false;
        b += k;
        n -= (size_t)k;
        off += (uint64_t)k;
    }
    return true;
}

/* Can this filesystem hold a sparse file of `size` bytes cheaply, and read
 * its holes without using memory? tmpfs keeps holes sparse on disk-less
 * storage but allocates a page for every hole page read through a mapping
 * (4+ GiB of RAM here), so it is refused. */
static bool sparse_ok(const char *dir, uint64_t size)
{
    struct statfs sf;
    if (statfs(dir, &sf) != 0 || sf.f_type == TMPFS_MAGIC || sf.f_type == RAMFS_MAGIC) return false;
    char *p = path_in(dir, "probe");
    int fd = open(p, O_RDWR | O_CREAT | O_TRUNC, 0644);
    bool ok = fd >= 0 && ftruncate(fd, (off_t)size) == 0 && pwrite_all(fd, "x", 1, size - 1);
    struct stat st;
    ok = ok && fstat(fd, &st) == 0 && (uint64_t)st.st_blocks * 512 < (64u << 20);
    if (fd >= 0) close(fd);
    unlink(p);
    free(p);
    return ok;
}

/* XXH3-64 of n zero bytes, streamed. */
static uint64_t hash_zeros(uint64_t n)
{
    static const uint8_t z[1 << 16];
    XXH3_state_t *s = XXH3_createState();
    XXH3_64bits_reset(s);
    while (n) {
        const size_t k = n < sizeof z ? (size_t)n : sizeof z;
        XXH3_64bits_update(s, z, k);
        n -= k;
    }
    const uint64_t h = XXH3_64bits_digest(s);
    XXH3_freeState(s);
    return h;
}

// --- the GGUF file --------------------------------------------------------------

/* The writer for the huge layout, not opened. */
static struct gguf_writer *huge_writer(void)
{
    struct gguf_writer *w;
    struct mw_err err;
    mw_err_clear(&err);
    const uint64_t ne_small[1] = {SMALL_N}, ne_tail[1] = {TAIL_N};
    if (gguf_writer_init(&w, &err) ||
        gguf_writer_set_str(w, "general.architecture", "huge-test", &err) ||
        gguf_writer_set_u64(w, "test.huge_elements", HUGE_ELEMS, &err) ||
        gguf_writer_add_tensor(w, "a.small", GGUF_TYPE_F32, 1, ne_small, &err) ||
        gguf_writer_add_tensor(w, "b.huge", GGUF_TYPE_Q8_0, 2, HUGE_NE, &err) ||
        gguf_writer_add_tensor(w, "c.tail", GGUF_TYPE_F32, 1, ne_tail, &err)) {
        char buf[1024];
        fprintf(stderr, "huge_writer: %s\n", mw_err_format(&err, buf, sizeof buf));
        return NULL;
    }
    return w;
}

static void f32_bytes(float (*val)(unsigned), unsigned n, uint8_t *out)
{
    for (unsigned i = 0; i < n; i++) {
        uint32_t u;
        const float f = val(i);
        memcpy(&u, &f, 4);
        mw_put_le32(out + 4 * i, u);
    }
}

/* Child: stream the file until RLIMIT_FSIZE kills us. */
static void writer_child(const char *path)
{
    struct rlimit rl = {.rlim_cur = 1u << 20, .rlim_max = 1u << 20};
    signal(SIGXFSZ, SIG_DFL);
    if (setrlimit(RLIMIT_FSIZE, &rl) != 0) _exit(90);
    struct gguf_writer *w = huge_writer();
    if (!w || gguf_writer_open(w, path, NULL)) _exit(91);
    uint8_t small[4 * SMALL_N];
    f32_bytes(small_val, SMALL_N, small);
    if (gguf_writer_write(w, small, sizeof small, NULL)) _exit(92);
    static uint8_t zeros[1 << 16];
    for (uint64_t done = 0; done < HUGE_BYTES; done += sizeof zeros)
        if (gguf_writer_write(w, zeros, sizeof zeros, NULL)) _exit(93);
    _exit(94); /* never reached: SIGXFSZ comes first */
}

struct huge_layout {
    uint64_t file_size, off[3], nbytes[3];
};

/* Expected layout, from docs/formats.md §1: tensors at running offsets padded to
 * 32, the blob ending padded too. data_start comes from the file. */
static struct huge_layout expected_layout(uint64_t data_start)
{
    struct huge_layout l;
    l.nbytes[0] = 4 * SMALL_N;
    l.nbytes[1] = HUGE_BYTES;
    l.nbytes[2] = 4 * TAIL_N;
    uint64_t off = 0;
    for (int i = 0; i < 3; i++) {
        l.off[i] = off;
        off = (off + l.nbytes[i] + 31) / 32 * 32;
    }
    l.file_size = data_start + off;
    return l;
}

/* Make the file at path; false (with a message) on failure. */
static bool make_huge_gguf(const char *dir, const char *path)
{
    pid_t pid = fork();
    if (pid < 0) return false;
    if (pid == 0) writer_child(path);
    int st;
    if (waitpid(pid, &st, 0) != pid || !WIFSIGNALED(st) || WTERMSIG(st) != SIGXFSZ) {
        fprintf(stderr, "make_huge_gguf: writer child did not stop at the size limit (%d)\n", st);
        return false;
    }
    /* the writer's temp file: <path>.tmp.XXXXXX */
    const char *base = strrchr(path, '/');
    base = base ? base + 1 : path;
    DIR *d = opendir(dir);
    char *tmp = NULL;
    struct dirent *e;
    while (d && (e = readdir(d)))
        if (strncmp(e->d_name, base, strlen(base)) == 0 && strstr(e->d_name, ".tmp.")) {
            free(tmp);
            tmp = path_in(dir, e->d_name);
        }
    if (d) closedir(d);
    if (!tmp || rename(tmp, path) != 0) {
        fprintf(stderr, "make_huge_gguf: no temp file left by the writer\n");
        free(tmp);
        return false;
    }
    free(tmp);

    struct gguf_writer *w = huge_writer();
    const uint64_t size = gguf_writer_file_size(w);
    gguf_writer_free(w);
    int fd = open(path, O_RDWR);
    if (fd < 0) return false;
    if (ftruncate(fd, (off_t)size) != 0) {
        close(fd);
        return false;
    }

    /* The header as written, to find data_start and the checksum slots. */
    struct gguf_file *f;
    struct mw_err err;
    mw_err_clear(&err);
    if (gguf_open(path, GGUF_OPEN_DEFAULT, &f, &err) != MW_OK) {
        char buf[1024];
        fprintf(stderr, "make_huge_gguf: %s\n", mw_err_format(&err, buf, sizeof buf));
        close(fd);
        return false;
    }
    const uint64_t data_start = gguf_data_start(f);
    const struct huge_layout l = expected_layout(data_start);
    const int64_t kt = gguf_kv_find(f, GGUF_KEY_CK_TENSORS);
    const int64_t kh = gguf_kv_find(f, GGUF_KEY_CK_HEADER);
    bool ok = kt >= 0 && kh >= 0 && size == l.file_size;
    uint64_t slot_t = 0, slot_h = 0;
    if (ok) {
        slot_t = (uint64_t)(gguf_kv_value(f, (uint64_t)kt)->data - gguf_base(f));
        slot_h = (uint64_t)(gguf_kv_value(f, (uint64_t)kh)->data - gguf_base(f));
    }
    gguf_close(f);

    uint8_t small[4 * SMALL_N], tail[4 * TAIL_N];
    f32_bytes(small_val, SMALL_N, small);
    f32_bytes(tail_val, TAIL_N, tail);
    ok = ok && pwrite_all(fd, tail, sizeof tail, data_start + l.off[2]);
    /* the checksums the writer patches in at the end */
    uint8_t h[24];
    mw_put_le64(h, XXH3_64bits(small, sizeof small));
    mw_put_le64(h + 8, hash_zeros(HUGE_BYTES));
    mw_put_le64(h + 16, XXH3_64bits(tail, sizeof tail));
    ok = ok && pwrite_all(fd, h, sizeof h, slot_t);
    uint8_t *hdr = malloc((size_t)data_start);
    ok = ok && hdr && pread(fd, hdr, (size_t)data_start, 0) == (ssize_t)data_start;
    if (ok) {
        memset(hdr + slot_h, 0, 8);
        uint8_t hh[8];
        mw_put_le64(hh, XXH3_64bits(hdr, (size_t)data_start));
        ok = pwrite_all(fd, hh, 8, slot_h);
    }
    free(hdr);
    ok = (close(fd) == 0) && ok;
    (void)dir;
    return ok;
}

// --- tests ----------------------------------------------------------------------

static char *g_dir, *g_path; /* one file for the whole test case */

static void huge_setup(void)
{
    g_dir = make_tmpdir("huge");
    g_path = path_in(g_dir, "huge.gguf");
}

static void huge_teardown(void)
{
    rm_rf(g_dir);
    free(g_dir);
    free(g_path);
}

START_TEST(test_gguf_huge)
{
    if (!sparse_ok(g_dir, 5 * GIB)) {
        fprintf(stderr, "check_huge: no sparse files under %s: skipped\n", g_dir);
        return;
    }
    ck_assert(make_huge_gguf(g_dir, g_path));

    /* reader == writer's layout */
    struct gguf_file *f;
    struct mw_err err;
    mw_err_clear(&err);
    ck_assert_int_eq(gguf_open(g_path, GGUF_OPEN_DEFAULT, &f, &err), MW_OK);
    const struct huge_layout l = expected_layout(gguf_data_start(f));
    ck_assert_uint_eq(gguf_file_size(f), l.file_size);
    ck_assert_uint_gt(gguf_file_size(f), FOUR_GIB);
    ck_assert_uint_eq(gguf_data_end(f), l.file_size);
    ck_assert_uint_eq(gguf_tensor_count(f), 3);
    for (uint64_t i = 0; i < 3; i++) {
        const struct gguf_tensor *t = gguf_tensor_get(f, i);
        ck_assert_uint_eq(t->offset, l.off[i]);
        ck_assert_uint_eq(t->nbytes, l.nbytes[i]);
        ck_assert_uint_eq(t->file_off, gguf_data_start(f) + l.off[i]);
    }
    const struct gguf_tensor *hb = gguf_tensor_get(f, 1);
    ck_assert_uint_eq(hb->ne[0] * hb->ne[1], HUGE_ELEMS);
    ck_assert_uint_gt(HUGE_ELEMS, 1ull << 32);
    uint64_t nb;
    ck_assert(gguf_tensor_nbytes(GGUF_TYPE_Q8_0, hb->ne, &nb));
    ck_assert_uint_eq(nb, HUGE_BYTES);
    ck_assert_uint_gt(gguf_tensor_get(f, 2)->offset, FOUR_GIB);
    /* the values past 4 GiB read back through the mapping */
    const uint8_t *tail = gguf_tensor_data(f, 2);
    ck_assert_ptr_nonnull(tail);
    for (unsigned i = 0; i < TAIL_N; i++) {
        uint32_t u = mw_le32(tail + 4 * i);
        float v;
        memcpy(&v, &u, 4);
        ck_assert_float_eq(v, tail_val(i));
    }
    uint64_t u64v = 0;
    ck_assert(gguf_value_as_u64(gguf_kv_value(f, (uint64_t)gguf_kv_find(f, "test.huge_elements")),
                                &u64v));
    ck_assert_uint_eq(u64v, HUGE_ELEMS);
    const uint64_t tail_off = gguf_tensor_get(f, 2)->file_off;
    const uint64_t huge_off = hb->file_off;
    gguf_close(f);

    /* verify: intact, every checksum right */
    struct verify_report rep;
    ck_assert_int_eq(verify_file(g_path, NULL, &rep), MW_OK);
    ck_assert_int_eq(rep.checksums, VERIFY_CK_OK);
    ck_assert(rep.header_hash_ok);
    ck_assert_uint_eq(rep.n_tensors_hashed, 3);
    ck_assert_uint_eq(rep.file_size, l.file_size);
    ck_assert_uint_eq(rep.data_end, l.file_size);
    ck_assert_uint_eq(rep.data_bytes, l.nbytes[0] + l.nbytes[1] + l.nbytes[2]);
    verify_report_free(&rep);

    /* One more pass (each pass hashes the 4.25 GiB) for two faults at once:
     * a flipped byte 4 GiB + 100 bytes into the big tensor (its checksum
     * fails, the tensor is named) and the file cut short by one byte (the
     * tail tensor, above 4 GiB, is named with its offset). */
    int fd = open(g_path, O_RDWR);
    ck_assert_int_ge(fd, 0);
    const uint64_t flip = huge_off + FOUR_GIB + 100;
    ck_assert(pwrite_all(fd, "\x01", 1, flip));
    ck_assert_int_eq(ftruncate(fd, (off_t)(l.file_size - 1)), 0);
    close(fd);
    ck_assert_int_eq(verify_file(g_path, NULL, &rep), MW_E_TRUNC); /* bounds come first */
    ck_assert_uint_eq(rep.n_tensors_missing, 1);
    ck_assert_uint_eq(rep.n_tensors_hash_bad, 1);
    bool named_trunc = false, named_ck = false;
    for (uint64_t i = 0; i < rep.n_items; i++) {
        const struct verify_item *it = &rep.items[i];
        if (it->code == MW_E_TRUNC && it->tensor == 2) {
            named_trunc = true;
            ck_assert_uint_eq(it->off, tail_off);
            ck_assert_uint_gt(it->off, FOUR_GIB);
        }
        if (it->code == MW_E_CHECKSUM && it->tensor == 1 && strcmp(it->name, "b.huge") == 0)
            named_ck = true;
    }
    ck_assert(named_trunc);
    ck_assert(named_ck);
    verify_report_free(&rep);
    /* the strict reader refuses the short file, naming a place past 4 GiB */
    mw_err_clear(&err);
    ck_assert_int_eq(gguf_open(g_path, GGUF_OPEN_DEFAULT, &f, &err), MW_E_TRUNC);
    ck_assert_uint_gt(err.off, FOUR_GIB);
}
END_TEST

/* Layout arithmetic near 2^64: sizes that overflow are refused by the writer
 * (MW_E_USAGE or MW_E_VALUE), never wrapped. */
START_TEST(test_writer_overflow)
{
    struct gguf_writer *w;
    ck_assert_int_eq(gguf_writer_init(&w, NULL), MW_OK);
    const uint64_t ne_wrap[2] = {1ull << 32, 1ull << 32};   /* 2^64 elements */
    const uint64_t ne_max[1] = {UINT64_MAX / 32 * 32};      /* bytes overflow for F32 */
    ck_assert_int_ne(gguf_writer_add_tensor(w, "wrap", GGUF_TYPE_F32, 2, ne_wrap, NULL), MW_OK);
    ck_assert_int_ne(gguf_writer_add_tensor(w, "max", GGUF_TYPE_F32, 1, ne_max, NULL), MW_OK);
    /* 2^61 bytes each: the third one pushes the blob past 2^63; the total
     * file size must not wrap either */
    const uint64_t ne_big[1] = {1ull << 61};
    enum mw_status s1 = gguf_writer_add_tensor(w, "b1", GGUF_TYPE_I8, 1, ne_big, NULL);
    enum mw_status s2 = gguf_writer_add_tensor(w, "b2", GGUF_TYPE_I8, 1, ne_big, NULL);
    ck_assert_int_eq(s1, MW_OK);
    ck_assert_int_eq(s2, MW_OK);
    enum mw_status s = MW_OK;
    for (int i = 0; i < 8 && s == MW_OK; i++) {
        char name[16];
        snprintf(name, sizeof name, "c%d", i);
        s = gguf_writer_add_tensor(w, name, GGUF_TYPE_I8, 1, ne_big, NULL);
    }
    ck_assert_int_ne(s, MW_OK); /* 10 * 2^61 > 2^64: refused at some point */
    ck_assert_uint_ge(gguf_writer_file_size(w), 2 * (1ull << 61));
    gguf_writer_free(w);
}
END_TEST

#if defined(MW_TEST_HF)
START_TEST(test_safetensors_huge)
{
    if (!sparse_ok(g_dir, 5 * GIB)) {
        fprintf(stderr, "check_huge: no sparse files under %s: skipped\n", g_dir);
        return;
    }
    const uint64_t big_n = 65537ull * 65536ull; /* U8: bytes == elements > 2^32 */
    const uint64_t f16_n = 4 * 8;
    char json[512];
    int jn = snprintf(json, sizeof json,
                      "{\"a.u8\":{\"dtype\":\"U8\",\"shape\":[65537,65536],"
                      "\"data_offsets\":[0,%llu]},"
                      "\"b.f16\":{\"dtype\":\"F16\",\"shape\":[4,8],"
                      "\"data_offsets\":[%llu,%llu]}}",
                      (unsigned long long)big_n, (unsigned long long)big_n,
                      (unsigned long long)(big_n + 2 * f16_n));
    while (jn % 8) json[jn++] = ' '; /* the writers pad the header to 8 */
    json[jn] = 0;
    char *p = path_in(g_dir, "huge.safetensors");
    int fd = open(p, O_RDWR | O_CREAT | O_TRUNC, 0644);
    ck_assert_int_ge(fd, 0);
    uint8_t len[8];
    mw_put_le64(len, (uint64_t)jn);
    const uint64_t data0 = 8 + (uint64_t)jn;
    ck_assert(pwrite_all(fd, len, 8, 0));
    ck_assert(pwrite_all(fd, json, (size_t)jn, 8));
    uint8_t vals[2 * 32];
    for (unsigned i = 0; i < f16_n; i++) mw_put_le16(vals + 2 * i, mw_f32_to_f16((float)i - 7.5f));
    ck_assert(pwrite_all(fd, vals, sizeof vals, data0 + big_n));
    ck_assert_int_eq(close(fd), 0);

    struct hf_st *st;
    struct mw_err err;
    mw_err_clear(&err);
    ck_assert_int_eq(hf_st_open(p, &st, &err), MW_OK);
    ck_assert_uint_eq(hf_st_file_size(st), data0 + big_n + 2 * f16_n);
    ck_assert_uint_eq(hf_st_count(st), 2);
    const struct hf_st_tensor *a = hf_st_get(st, (uint64_t)hf_st_find(st, "a.u8"));
    const struct hf_st_tensor *b = hf_st_get(st, (uint64_t)hf_st_find(st, "b.f16"));
    ck_assert_uint_eq(a->n_elems, big_n);
    ck_assert_uint_gt(a->n_elems, 1ull << 32);
    ck_assert_uint_eq(a->nbytes, big_n);
    ck_assert_uint_eq(a->file_off, data0);
    ck_assert_uint_eq(b->file_off, data0 + big_n);
    ck_assert_uint_gt(b->file_off, FOUR_GIB);
    ck_assert_uint_eq(b->n_elems, f16_n);
    for (unsigned i = 0; i < f16_n; i++)
        ck_assert_float_eq(mw_f16_to_f32(mw_le16(b->data + 2 * i)), (float)i - 7.5f);
    ck_assert_uint_eq(a->data[big_n - 1], 0); /* last byte of the hole */
    hf_st_close(st);

    /* one byte short: the F16 tensor past 4 GiB is out of bounds */
    ck_assert_int_eq(truncate(p, (off_t)(data0 + big_n + 2 * f16_n - 1)), 0);
    mw_err_clear(&err);
    enum mw_status s = hf_st_open(p, &st, &err);
    ck_assert_int_ne(s, MW_OK);
    ck_assert_int_eq(mw_status_exit_code(s), 1);
    free(p);
}
END_TEST
#endif

static Suite *huge_suite(void)
{
    Suite *s = suite_create("huge");
    TCase *tc = tcase_create("huge");
    tcase_add_checked_fixture(tc, huge_setup, huge_teardown);
    tcase_add_test(tc, test_gguf_huge);
#if defined(MW_TEST_HF)
    tcase_add_test(tc, test_safetensors_huge);
#endif
    tcase_add_test(tc, test_writer_overflow);
    /* a hang guard, not a speed requirement (scaled by CK_TIMEOUT_MULTIPLIER) */
    tcase_set_timeout(tc, 300);
    suite_add_tcase(s, tc);
    return s;
}

int main(int argc, char **argv)
{
    if (argc == 3 && strcmp(argv[1], "--make") == 0) {
        /* exit 0: made; 77: no sparse files here (skip); 1: failed */
        const char *slash = strrchr(argv[2], '/');
        char dir[4096];
        if (slash) snprintf(dir, sizeof dir, "%.*s", (int)(slash - argv[2]), argv[2]);
        else snprintf(dir, sizeof dir, ".");
        if (!sparse_ok(dir, 5 * GIB)) return 77;
        return make_huge_gguf(dir, argv[2]) ? EXIT_SUCCESS : EXIT_FAILURE;
    }
    return run_suite(huge_suite());
}
