/* tests/check_common.c — see check_common.h. */
#define _GNU_SOURCE
#include "check_common.h"

#include <check.h>
#include <dirent.h>
#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

int run_suite(Suite *s)
{
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    const int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}

char *make_tmpdir(const char *tag)
{
    char *d = NULL;
    ck_assert_int_ge(asprintf(&d, "%s/%s-XXXXXX", MW_TEST_TMPDIR, tag), 0);
    ck_assert_msg(mkdtemp(d) != NULL, "mkdtemp %s", d);
    return d;
}

char *pid_path(const char *tag, const char *name)
{
    char *p = NULL;
    if (asprintf(&p, "%s/%s-%ld-%s", MW_TEST_TMPDIR, tag, (long)getpid(), name) < 0) abort();
    return p;
}

char *path_in(const char *dir, const char *name)
{
    char *p = NULL;
    if (asprintf(&p, "%s/%s", dir, name) < 0) abort();
    return p;
}

uint8_t *read_file(const char *path, size_t *n)
{
    *n = 0;
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    ck_assert_int_eq(fseek(f, 0, SEEK_END), 0);
    const long sz = ftell(f);
    ck_assert_msg(sz >= 0, "%s: ftell", path);
    rewind(f);
    uint8_t *b = malloc((size_t)sz + 64);
    ck_assert_ptr_nonnull(b);
    ck_assert_msg(fread(b, 1, (size_t)sz, f) == (size_t)sz, "%s: short read", path);
    fclose(f);
    b[sz] = 0;
    *n = (size_t)sz;
    return b;
}

uint8_t *read_file_ok(const char *path, size_t *n)
{
    uint8_t *b = read_file(path, n);
    ck_assert_msg(b != NULL, "cannot open %s", path);
    return b;
}

void write_file(const char *path, const void *d, size_t n)
{
    FILE *f = fopen(path, "wb");
    ck_assert_msg(f != NULL, "cannot create %s", path);
    if (n) ck_assert_uint_eq(fwrite(d, 1, n, f), n);
    ck_assert_int_eq(fclose(f), 0);
}

void write_file_in(const char *dir, const char *name, const void *d, size_t n)
{
    char *p = path_in(dir, name);
    write_file(p, d, n);
    free(p);
}

void write_text_in(const char *dir, const char *name, const char *text)
{
    write_file_in(dir, name, text, strlen(text));
}

bool file_exists(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0;
}

int count_entries(const char *dir)
{
    DIR *d = opendir(dir);
    if (!d) return -1;
    int n = 0;
    const struct dirent *e;
    while ((e = readdir(d)))
        if (strcmp(e->d_name, ".") != 0 && strcmp(e->d_name, "..") != 0) n++;
    closedir(d);
    return n;
}

static int rm_one(const char *p, const struct stat *st, int flag, struct FTW *ftw)
{
    (void)st;
    (void)flag;
    (void)ftw;
    remove(p);
    return 0;
}

void rm_rf(const char *path)
{
    nftw(path, rm_one, 16, FTW_DEPTH | FTW_PHYS);
}

void make_hf_fixture(const char *kind, const char *dir)
{
    rm_rf(dir);
    static const char fmt[] =
        "python3 '%s/../tests/fixtures/mk_hf_fixture.py' %s '%s' > /dev/null 2>&1";
    char *cmd = NULL;
    ck_assert_int_ge(asprintf(&cmd, fmt, MW_DATASETS_DIR, kind, dir), 0);
    ck_assert_msg(system(cmd) == 0, "%s: python3 fixture generation failed: %s", kind, cmd);
    free(cmd);
}
