/*
 * tests/check_hf_common.h — helpers shared by the hf/ checkpoint suites
 * (check_hf.c, check_hf_convert.c): a model directory found in datasets/
 * or shared/, and the note (a failure under CI=true) when a shared/ input is
 * missing. Header-only, static: one copy per test binary.
 */
#ifndef MW_TESTS_CHECK_HF_COMMON_H
#define MW_TESTS_CHECK_HF_COMMON_H

#include <check.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check_common.h"

/* An input found only in ../shared (not bundled): absent, the check is
 * skipped with a note, and under CI=true (where shared/ is laid beside the
 * checkout) that skip is a failure. */
static inline void shared_input_missing(const char *name)
{
    const char *ci = getenv("CI");
    ck_assert_msg(!(ci && strcmp(ci, "true") == 0), "%s missing from %s/models under CI=true",
                  name, MW_SHARED_DIR);
    fprintf(stderr, "check_hf: SKIP %s checks: no %s/models/%s\n", name, MW_SHARED_DIR, name);
}

/* A model dir: datasets/ first (works in a fresh clone), then shared/. */
static inline bool model_dir(const char *name, char *buf, size_t n)
{
    snprintf(buf, n, "%s/%s/config.json", MW_DATASETS_DIR, name);
    if (file_exists(buf)) {
        snprintf(buf, n, "%s/%s", MW_DATASETS_DIR, name);
        return true;
    }
    snprintf(buf, n, "%s/models/%s", MW_SHARED_DIR, name);
    return file_exists(buf);
}

#endif /* MW_TESTS_CHECK_HF_COMMON_H */
