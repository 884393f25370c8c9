/* Unit tests for core/: status table, error formatting, checked arithmetic,
 * bounded reader, f16/bf16 conversions. */
#define _GNU_SOURCE
#include <check.h>
#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/mw.h"
#include "core/mw_file.h"
#include "core/mw_mem.h"

#include "check_common.h"

START_TEST(test_status_exit_codes)
{
    ck_assert_int_eq(mw_status_exit_code(MW_OK), 0);
    ck_assert_int_eq(mw_status_exit_code(MW_E_FORMAT), 1);
    ck_assert_int_eq(mw_status_exit_code(MW_E_TRUNC), 1);
    ck_assert_int_eq(mw_status_exit_code(MW_E_CHECKSUM), 1);
    ck_assert_int_eq(mw_status_exit_code(MW_E_USAGE), 2);
    ck_assert_int_eq(mw_status_exit_code(MW_E_IO), 3);
    ck_assert_int_eq(mw_status_exit_code(MW_E_NOMEM), 3);
    ck_assert_int_eq(mw_status_exit_code(MW_E_NOSPACE), 3);
    ck_assert_str_eq(mw_status_name(MW_E_TRUNC), "E_TRUNC");
    ck_assert_str_eq(mw_status_name((enum mw_status)999), "E_UNKNOWN");
}
END_TEST

START_TEST(test_err_format)
{
    struct mw_err e;
    mw_err_clear(&e);
    mw_err_set_path(&e, "q.gguf");
    mw_err_set_where(&e, "tensor '%s'", "blk.3.attn_q.weight");
    ck_assert_int_eq(MW_FAIL(&e, MW_E_TRUNC, 8000, "needs %d bytes", 12), MW_E_TRUNC);
    char buf[512];
    mw_err_format(&e, buf, sizeof buf);
    ck_assert_str_eq(buf, "q.gguf: offset 8000 (0x1f40): tensor 'blk.3.attn_q.weight': needs 12 "
                          "bytes [E_TRUNC]");
    ck_assert_ptr_nonnull(e.src_file);
    /* NULL err is allowed everywhere */
    ck_assert_int_eq(MW_FAIL(NULL, MW_E_IO, 0, "x"), MW_E_IO);
    /* tiny buffers are always terminated */
    char small[8];
    mw_err_format(&e, small, sizeof small);
    ck_assert_uint_eq(strlen(small), 7);
}
END_TEST

START_TEST(test_checked_math)
{
    uint64_t r;
    ck_assert(mw_add_u64(1, 2, &r) && r == 3);
    ck_assert(!mw_add_u64(UINT64_MAX, 1, &r));
    ck_assert(mw_mul_u64(UINT64_C(1) << 32, (UINT64_C(1) << 31), &r));
    ck_assert(!mw_mul_u64(UINT64_C(1) << 32, UINT64_C(1) << 32, &r));
    ck_assert(mw_pad_u64(33, 32, &r) && r == 64);
    ck_assert(mw_pad_u64(64, 32, &r) && r == 64);
    ck_assert(!mw_pad_u64(UINT64_MAX - 3, 32, &r));
    ck_assert(!mw_pad_u64(5, 24, &r)); /* not a power of two */
    ck_assert(!mw_pad_u64(5, 0, &r));
}
END_TEST

/* one size parser for every command's size options */
static const struct {
    const char *s;
    uint64_t v;
    bool ok;
} size_cases[] = {
    {"5339584", 5339584, true},        {"1K", 1024, true},
    {"1KiB", 1024, true},              {"3M", 3ull << 20, true},
    {"1.5MiB", 3ull << 19, true},      {"2GiB", 2ull << 30, true},
    {"16G", 16ull << 30, true},        {"8GB", 8ull << 30, true},
    {"8gb", 8ull << 30, true},         {"8g", 8ull << 30, true},
    {"12GiB", 12ull << 30, true},      {"512M", 512ull << 20, true},
    {"1.5G", 3ull << 29, true},        {"100B", 100, true},
    {"1e9", 1000000000, true},         {"2.5e9", 2500000000ull, true},
    {"1E3K", 1024000, true},           {"18446744073709551615", UINT64_MAX, true},
    {"", 0, false},                    {"-5M", 0, false},
    {"+5M", 0, false},                 {"5Q", 0, false},
    {"M", 0, false},                   {"G", 0, false},
    {"0", 0, false},                   {"0K", 0, false},
    {"1.5", 0, false},                 {"1.", 0, false},
    {".5M", 0, false},                 {"5 M", 0, false},
    {" 5M", 0, false},                 {"99999999999999999999", 0, false},
    {"18446744073709551616", 0, false}, {"17000000000T", 0, false},
    {"5MiBs", 0, false},               {"0x10", 0, false},
    {"16X", 0, false},                 {"16Gx", 0, false},
    {"1e30", 0, false},                {"1e", 0, false},
    {"1e-3", 0, false},                {"nan", 0, false},
    {"inf", 0, false},                 {"1Bi", 0, false},
};

START_TEST(test_parse_size)
{
    uint64_t v = 0;
    const bool ok = mw_parse_size(size_cases[_i].s, &v);
    ck_assert_msg(ok == size_cases[_i].ok, "'%s': %d", size_cases[_i].s, ok);
    if (ok) ck_assert_uint_eq(v, size_cases[_i].v);
    ck_assert(!mw_parse_size(NULL, &v));
}
END_TEST

START_TEST(test_reader_bounds)
{
    const uint8_t data[] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11};
    struct mw_err e;
    mw_err_clear(&e);
    struct mw_rd r = {.base = data, .size = sizeof data, .pos = 0, .err = &e};
    uint32_t v32;
    uint64_t v64;
    ck_assert_int_eq(mw_rd_u32(&r, &v32, "a"), MW_OK);
    ck_assert_uint_eq(v32, 0x04030201u);
    ck_assert_int_eq(mw_rd_u64(&r, &v64, "b"), MW_E_TRUNC);
    ck_assert_uint_eq(e.off, 4);
    ck_assert_ptr_nonnull(strstr(e.msg, "truncated"));
    ck_assert_uint_eq(r.pos, 4); /* failed reads do not move */
    const uint8_t *p;
    ck_assert_int_eq(mw_rd_bytes(&r, UINT64_MAX, &p, "c"), MW_E_TRUNC);
    ck_assert_int_eq(mw_rd_bytes(&r, 7, &p, "d"), MW_OK);
    ck_assert_uint_eq(mw_rd_left(&r), 0);
}
END_TEST

START_TEST(test_f16_roundtrip_exhaustive)
{
    /* every f16 converts to f32 exactly and back to the same bits (NaN -> 0x7e00|sign) */
    for (uint32_t h = 0; h < 65536; h++) {
        float f = mw_f16_to_f32((uint16_t)h);
        uint16_t back = mw_f32_to_f16(f);
        if ((h & 0x7c00) == 0x7c00 && (h & 0x3ff)) {
            ck_assert(isnan(f));
            ck_assert_uint_eq(back, (h & 0x8000) | 0x7e00);
        } else {
            ck_assert_uint_eq(back, h);
        }
    }
}
END_TEST

START_TEST(test_f16_rounding)
{
    ck_assert_uint_eq(mw_f32_to_f16(1.0f), 0x3c00);
    ck_assert_uint_eq(mw_f32_to_f16(65504.0f), 0x7bff);
    ck_assert_uint_eq(mw_f32_to_f16(65519.0f), 0x7bff);
    ck_assert_uint_eq(mw_f32_to_f16(65520.0f), 0x7c00); /* tie to even -> inf */
    ck_assert_uint_eq(mw_f32_to_f16(1e10f), 0x7c00);
    ck_assert_uint_eq(mw_f32_to_f16(-1e10f), 0xfc00);
    /* 1 + 2^-11 is a tie between 1 and 1+2^-10: to even (1.0) */
    ck_assert_uint_eq(mw_f32_to_f16(1.0f + 0x1p-11f), 0x3c00);
    ck_assert_uint_eq(mw_f32_to_f16(1.0f + 0x1p-11f + 0x1p-20f), 0x3c01);
    /* subnormals: 2^-24 is the smallest; 2^-25 ties to 0; 3*2^-26 rounds up */
    ck_assert_uint_eq(mw_f32_to_f16(0x1p-24f), 0x0001);
    ck_assert_uint_eq(mw_f32_to_f16(0x1p-25f), 0x0000);
    ck_assert_uint_eq(mw_f32_to_f16(0x1.8p-25f), 0x0001);
    ck_assert_uint_eq(mw_f32_to_f16(0x1.8p-24f), 0x0002); /* 1.5 ulp ties to even 2 */
    ck_assert_uint_eq(mw_f32_to_f16(-0.0f), 0x8000);
    ck_assert_uint_eq(mw_f32_to_f16(0x1.ffcp-15f), 0x0400); /* rounds up into min normal */
}
END_TEST

START_TEST(test_bf16)
{
    ck_assert_uint_eq(mw_f32_to_bf16(1.0f), 0x3f80);
    ck_assert(mw_bf16_to_f32(0x3f80) == 1.0f);
    /* round to nearest even on the dropped 16 bits */
    uint32_t u = 0x3f808000u; /* tie, even mantissa -> stays 0x3f80 */
    float f;
    memcpy(&f, &u, 4);
    ck_assert_uint_eq(mw_f32_to_bf16(f), 0x3f80);
    u = 0x3f818000u; /* tie, odd -> up */
    memcpy(&f, &u, 4);
    ck_assert_uint_eq(mw_f32_to_bf16(f), 0x3f82);
    u = 0x7fc00001u; /* NaN keeps quiet bit */
    memcpy(&f, &u, 4);
    ck_assert_uint_eq(mw_f32_to_bf16(f), 0x7fc0);
}
END_TEST

/* --- atomic output files, mapped-page release (core/mw_file.h) --- */

/* Names in dir other than . and .., joined by spaces into buf. */
static int dir_names(const char *dir, char *buf, size_t cap)
{
    DIR *d = opendir(dir);
    ck_assert_ptr_nonnull(d);
    int n = 0;
    size_t used = 0;
    buf[0] = 0;
    for (struct dirent *e; (e = readdir(d));) {
        if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..")) continue;
        n++;
        int k = snprintf(buf + used, cap - used, "%s%s", used ? " " : "", e->d_name);
        if (k > 0 && (size_t)k < cap - used) used += (size_t)k;
    }
    closedir(d);
    return n;
}

START_TEST(test_outfile_atomic)
{
    char *dir = make_tmpdir("core");
    char path[512], names[1024];
    snprintf(path, sizeof path, "%s/out.bin", dir);
    struct mw_err err;
    mw_err_clear(&err);
    /* the kernel applies the umask: the file gets 0666 & ~umask, and the
     * process umask is what it was */
    const mode_t old = umask(027);
    ck_assert_int_eq(mw_file_write_atomic(path, "hello", 5, &err), MW_OK);
    ck_assert_uint_eq(umask(old), 027);
    struct stat st;
    ck_assert_int_eq(stat(path, &st), 0);
    ck_assert_uint_eq(st.st_mode & 0777, 0640);
    ck_assert_int_eq((int)st.st_size, 5);
    ck_assert_int_eq(dir_names(dir, names, sizeof names), 1);

    /* while open: PATH.tmp.XXXXXX (6 of [A-Za-z0-9]) beside PATH, which
     * keeps its old bytes; discard removes the temp file */
    struct mw_outfile f = MW_OUTFILE_INIT;
    ck_assert_int_eq(mw_outfile_open(&f, path, &err), MW_OK);
    ck_assert_int_ge(f.fd, 0);
    const size_t pl = strlen(path);
    ck_assert_uint_eq(strlen(f.tmp), pl + 11);
    ck_assert(strncmp(f.tmp, path, pl) == 0 && strncmp(f.tmp + pl, ".tmp.", 5) == 0);
    for (int i = 0; i < 6; i++) ck_assert(isalnum((unsigned char)f.tmp[pl + 5 + i]));
    ck_assert_int_eq(mw_outfile_write(&f, "0123456789", 10, &err), MW_OK);
    ck_assert_int_eq(dir_names(dir, names, sizeof names), 2);
    mw_outfile_discard(&f);
    mw_outfile_discard(&f); /* idempotent */
    ck_assert_int_eq(dir_names(dir, names, sizeof names), 1);
    ck_assert_int_eq(stat(path, &st), 0);
    ck_assert_int_eq((int)st.st_size, 5);

    /* pwrite patches in place; commit replaces the old file */
    ck_assert_int_eq(mw_outfile_open(&f, path, &err), MW_OK);
    ck_assert_int_eq(mw_outfile_write(&f, "0123456789", 10, &err), MW_OK);
    ck_assert_int_eq(mw_outfile_pwrite(&f, "ab", 2, 3, "patch", &err), MW_OK);
    ck_assert_int_eq(mw_outfile_commit(&f, &err), MW_OK);
    ck_assert_int_eq(f.fd, -1);
    ck_assert_ptr_null(f.tmp);
    ck_assert_int_eq(dir_names(dir, names, sizeof names), 1);
    char got[16] = {0};
    FILE *fp = fopen(path, "rb");
    ck_assert_ptr_nonnull(fp);
    ck_assert_uint_eq(fread(got, 1, sizeof got, fp), 10);
    fclose(fp);
    ck_assert_str_eq(got, "012ab56789");

    /* no directory: an I/O error naming the final path, nothing created */
    char bad[600];
    snprintf(bad, sizeof bad, "%s/no/such/x.bin", dir);
    mw_err_clear(&err);
    ck_assert_int_eq(mw_file_write_atomic(bad, "x", 1, &err), MW_E_IO);
    ck_assert_str_eq(err.path, bad);
    ck_assert_ptr_nonnull(strstr(err.msg, "cannot create temporary file"));
    ck_assert_int_eq(dir_names(dir, names, sizeof names), 1);
    unlink(path);
    rmdir(dir);
    free(dir);
}
END_TEST

/* Dropping pages of a read-only file mapping never changes what it reads,
 * and ranges that do not cover a whole page, or lie outside the mapping,
 * are harmless. */
START_TEST(test_map_drop)
{
    char *dir = make_tmpdir("core");
    char path[512];
    snprintf(path, sizeof path, "%s/m.bin", dir);
    const long pg = sysconf(_SC_PAGESIZE);
    ck_assert_int_gt(pg, 0);
    const size_t n = (size_t)pg * 3 + 100; /* a partial last page */
    uint8_t *b = malloc(n);
    for (size_t i = 0; i < n; i++) b[i] = (uint8_t)(i * 7 + 1);
    struct mw_err err;
    ck_assert_int_eq(mw_file_write_atomic(path, b, n, &err), MW_OK);
    struct mw_map m;
    ck_assert_int_eq(mw_map_open(&m, path, &err), MW_OK);
    ck_assert(memcmp(m.data, b, n) == 0);
    const uint64_t ranges[][2] = {{1, 10},
                                  {10, (uint64_t)pg + 5},
                                  {(uint64_t)pg - 1, 2 * (uint64_t)pg + 1},
                                  {0, (uint64_t)pg},
                                  {2 * (uint64_t)pg + 50, n},
                                  {5, 5},
                                  {9, 3},
                                  {0, (uint64_t)n * 4}};
    for (size_t r = 0; r < sizeof ranges / sizeof ranges[0]; r++) {
        mw_map_drop(m.data, m.size, ranges[r][0], ranges[r][1]);
        ck_assert_msg(memcmp(m.data, b, n) == 0, "range %zu", r);
    }
    mw_map_drop(NULL, 0, 0, 10);
    mw_map_close(&m);
    free(b);
    unlink(path);
    rmdir(dir);
    free(dir);
}
END_TEST

/* mw_mem_available over a fake /proc and /sys/fs/cgroup under dir: each
 * entry of files is "relative/path", "content" (directories made). */
static enum mw_status mem_at(const char *dir, const char *const files[][2], size_t n,
                             struct mw_mem_avail *av, struct mw_err *err)
{
    rm_rf(dir);
    ck_assert_int_eq(mkdir(dir, 0755), 0);
    for (size_t i = 0; i < n; i++) {
        char p[1024];
        snprintf(p, sizeof p, "%s/%s", dir, files[i][0]);
        for (char *q = p + strlen(dir) + 1; (q = strchr(q, '/')); q++) {
            *q = '\0';
            mkdir(p, 0755);
            *q = '/';
        }
        write_file(p, files[i][1], strlen(files[i][1]));
    }
    char proc[1024], cg[1024];
    snprintf(proc, sizeof proc, "%s/proc", dir);
    snprintf(cg, sizeof cg, "%s/cg", dir);
    const struct mw_mem_roots r = {.proc = proc, .cgroup = cg, .env_set = true};
    mw_err_clear(err);
    return mw_mem_available(&r, av, err);
}

START_TEST(test_mem_available)
{
    char *dir = make_tmpdir("mem");
    char *root = path_in(dir, "r");
    struct mw_mem_avail av;
    struct mw_err err;
    const char *mi = "MemTotal:       16000000 kB\nMemFree:  10 kB\nMemAvailable:    1000000 kB\n"
                     "Cached: 5 kB\n";
    /* MemAvailable alone */
    const char *const f1[][2] = {{"proc/meminfo", mi}};
    ck_assert_int_eq(mem_at(root, f1, 1, &av, &err), MW_OK);
    ck_assert_int_eq(av.source, MW_MEM_SRC_MEMINFO);
    ck_assert_uint_eq(av.bytes, 1024000000ull);
    ck_assert_uint_eq(av.meminfo, 1024000000ull);
    ck_assert_uint_eq(av.cgroup, 0);
    ck_assert(strstr(av.from, "MemAvailable in ") && strstr(av.from, "/proc/meminfo"));
    /* cgroup v2: the leaf says max, its parent limits; the smaller wins */
    const char *const f2[][2] = {{"proc/meminfo", mi},
                                 {"proc/self/cgroup", "0::/a/b\n"},
                                 {"cg/a/b/memory.max", "max\n"},
                                 {"cg/a/b/memory.current", "5\n"},
                                 {"cg/a/memory.max", "600000000\n"},
                                 {"cg/a/memory.current", "100000000\n"},
                                 {"cg/memory.max", "garbage\n"}};
    ck_assert_int_eq(mem_at(root, f2, 7, &av, &err), MW_OK);
    ck_assert_int_eq(av.source, MW_MEM_SRC_CGROUP2);
    ck_assert_uint_eq(av.bytes, 500000000ull);
    ck_assert_uint_eq(av.cgroup, 500000000ull);
    ck_assert_uint_eq(av.meminfo, 1024000000ull);
    ck_assert_msg(strstr(av.from, "memory.max - memory.current in ") &&
                  strstr(av.from, "/cg/a") && !strstr(av.from, "/cg/a/b"), "%s", av.from);
    ck_assert_uint_eq(mw_mem_bound(&av), 500000000ull - 64ull * 1048576);
    /* usage above the limit: no room, and a bound no run meets (not "none") */
    const char *const f3[][2] = {{"proc/meminfo", mi},
                                 {"proc/self/cgroup", "0::/\n"},
                                 {"cg/memory.max", "1000\n"},
                                 {"cg/memory.current", "2000\n"}};
    ck_assert_int_eq(mem_at(root, f3, 4, &av, &err), MW_OK);
    ck_assert_int_eq(av.source, MW_MEM_SRC_CGROUP2);
    ck_assert_uint_eq(av.bytes, 0);
    ck_assert_uint_eq(mw_mem_bound(&av), 1);
    /* cgroup v1: the memory controller's cgroup unlimited, the root limited */
    const char *const f4[][2] = {
        {"proc/meminfo", mi},
        {"proc/self/cgroup", "7:cpu,cpuacct:/y\n5:memory:/x\n0::/\n"},
        {"cg/memory/x/memory.limit_in_bytes", "9223372036854771712\n"},
        {"cg/memory/x/memory.usage_in_bytes", "1\n"},
        {"cg/memory/memory.limit_in_bytes", "300000000\n"},
        {"cg/memory/memory.usage_in_bytes", "100000000\n"}};
    ck_assert_int_eq(mem_at(root, f4, 6, &av, &err), MW_OK);
    ck_assert_int_eq(av.source, MW_MEM_SRC_CGROUP1);
    ck_assert_uint_eq(av.bytes, 200000000ull);
    ck_assert(strstr(av.from, "memory.limit_in_bytes - memory.usage_in_bytes in "));
    /* a limit above MemAvailable: MemAvailable */
    const char *const f5[][2] = {{"proc/meminfo", mi},
                                 {"proc/self/cgroup", "0::/s\n"},
                                 {"cg/s/memory.max", "8000000000\n"},
                                 {"cg/s/memory.current", "1000\n"}};
    ck_assert_int_eq(mem_at(root, f5, 4, &av, &err), MW_OK);
    ck_assert_int_eq(av.source, MW_MEM_SRC_MEMINFO);
    ck_assert_uint_eq(av.cgroup, 8000000000ull - 1000);
    /* malformed or missing everything: no figure, no error, no bound */
    const char *const f6[][2] = {
        {"proc/meminfo", "MemAvailable: 99999999999999999999999 kB\n"},
        {"proc/self/cgroup", "0::/s\nnonsense\n::\n"},
        {"cg/s/memory.max", "12abc\n"},
        {"cg/s/memory.current", "1\n"}};
    ck_assert_int_eq(mem_at(root, f6, 4, &av, &err), MW_OK);
    ck_assert_int_eq(av.source, MW_MEM_SRC_NONE);
    ck_assert_uint_eq(av.bytes, 0);
    ck_assert_uint_eq(mw_mem_bound(&av), 0);
    const char *const f7[][2] = {{"proc/meminfo", "MemAvailable: 12 MB\n"}};
    ck_assert_int_eq(mem_at(root, f7, 1, &av, &err), MW_OK);
    ck_assert_int_eq(av.source, MW_MEM_SRC_NONE);
    ck_assert_int_eq(mem_at(root, f7, 0, &av, &err), MW_OK);
    ck_assert_int_eq(av.source, MW_MEM_SRC_NONE);
    /* MW_MEMAVAILABLE stands in for every file */
    struct mw_mem_roots r = {.proc = root, .cgroup = root, .env_set = true, .env = "400M"};
    ck_assert_int_eq(mw_mem_available(&r, &av, &err), MW_OK);
    ck_assert_int_eq(av.source, MW_MEM_SRC_ENV);
    ck_assert_uint_eq(av.bytes, 400ull << 20);
    ck_assert_str_eq(av.from, "MW_MEMAVAILABLE");
    ck_assert_uint_eq(mw_mem_bound(&av), 336ull << 20);
    r.env = "lots";
    ck_assert_int_eq(mw_mem_available(&r, &av, &err), MW_E_USAGE);
    ck_assert(strstr(err.msg, "MW_MEMAVAILABLE='lots'"));
    r.env = "0";
    ck_assert_int_eq(mw_mem_available(&r, &av, &err), MW_E_USAGE);
    /* the margin: an eighth, within [64 MiB, 2 GiB] */
    ck_assert_uint_eq(mw_mem_margin(0), 64ull << 20);
    ck_assert_uint_eq(mw_mem_margin(8ull << 30), 1ull << 30);
    ck_assert_uint_eq(mw_mem_margin(64ull << 30), 2ull << 30);
    ck_assert_uint_eq(mw_mem_margin(UINT64_MAX), 2ull << 30);
    struct mw_mem_avail small = {.bytes = 50ull << 20, .source = MW_MEM_SRC_MEMINFO};
    ck_assert_uint_eq(mw_mem_bound(&small), 1);
    ck_assert_str_eq(mw_mem_source_name(MW_MEM_SRC_CGROUP2), "cgroup v2");
    /* the real machine: whatever it says, no error without the variable */
    r = (struct mw_mem_roots){.env_set = true};
    ck_assert_int_eq(mw_mem_available(&r, &av, &err), MW_OK);
    rm_rf(dir);
    free(root);
    free(dir);
}
END_TEST

static Suite *core_suite(void)
{
    Suite *s = suite_create("core");
    TCase *tc = tcase_create("core");
    tcase_add_test(tc, test_status_exit_codes);
    tcase_add_test(tc, test_err_format);
    tcase_add_test(tc, test_checked_math);
    tcase_add_test(tc, test_reader_bounds);
    tcase_add_test(tc, test_f16_roundtrip_exhaustive);
    tcase_add_test(tc, test_f16_rounding);
    tcase_add_test(tc, test_bf16);
    tcase_add_test(tc, test_outfile_atomic);
    tcase_add_test(tc, test_map_drop);
    tcase_add_test(tc, test_mem_available);
    tcase_add_loop_test(tc, test_parse_size, 0, sizeof size_cases / sizeof size_cases[0]);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    return run_suite(core_suite());
}
