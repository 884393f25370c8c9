/*
 * tests/check_common.h — what the Check suites share (tests/check_common.c,
 * linked into every mw_check_test executable): the runner of a suite and
 * file fixtures.
 *
 * Scratch directories live under the test build directory (MW_TEST_TMPDIR).
 * The helpers that create, read or write files assert on failure (ck_assert:
 * the test fails at the helper's line) and so run inside a test case only;
 * read_file reports a missing file as NULL so that a test can assert that no
 * output was left. pid_path, path_in, file_exists, count_entries and rm_rf
 * assert nothing (a test binary's own main may use them; out of memory
 * aborts).
 */
#ifndef MW_TESTS_CHECK_COMMON_H
#define MW_TESTS_CHECK_COMMON_H

#include <check.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Run every case of s (CK_NORMAL output); EXIT_SUCCESS when all pass, else
 * EXIT_FAILURE: what a suite's main returns. */
int run_suite(Suite *s);

/* A new directory MW_TEST_TMPDIR/<tag>-XXXXXX; the caller frees the name. */
char *make_tmpdir(const char *tag);

/* MW_TEST_TMPDIR/<tag>-<pid>-<name>: a scratch path of this process (not
 * created); malloc'd, the caller frees it. */
char *pid_path(const char *tag, const char *name);

/* "dir/name", malloc'd; the caller frees it. */
char *path_in(const char *dir, const char *name);

/* The whole file, malloc'd with 64 spare bytes after the content (the
 * first of them NUL: a text file is a C string; a test may append up to 64
 * bytes), its size in *n. NULL with *n = 0 when it cannot be opened. */
uint8_t *read_file(const char *path, size_t *n);

/* read_file that fails the test (naming the path) when the file cannot be opened. */
uint8_t *read_file_ok(const char *path, size_t *n);

/* Write n bytes to path (created or truncated). */
void write_file(const char *path, const void *d, size_t n);

/* write_file of dir/name. */
void write_file_in(const char *dir, const char *name, const void *d, size_t n);

/* write_file of dir/name with the bytes of text (no NUL). */
void write_text_in(const char *dir, const char *name, const char *text);

/* path names something (a file, a directory, ...). */
bool file_exists(const char *path);

/* The number of entries in dir other than . and ..; -1 when it cannot be read. */
int count_entries(const char *dir);

/* Remove path and, for a directory, everything below it; quiet when absent. */
void rm_rf(const char *path);

/* dir (removed first) becomes the tiny Hugging Face checkpoint KIND of
 * tests/fixtures/mk_hf_fixture.py. python3 is a declared dependency
 * (scripts/deps.sh): a fixture that cannot be made fails the test, never
 * passes it. */
void make_hf_fixture(const char *kind, const char *dir);

#endif /* MW_TESTS_CHECK_COMMON_H */
