/*
 * tools/junit.h — JUnit XML reports (`verify --junit FILE`, `eval --junit
 * FILE`) in the form CI servers read (GitLab's `reports: junit`, Jenkins,
 * the GitHub Actions report actions): one <testsuites> holding one
 * <testsuite>, one <testcase> per check, <failure> for a failed check,
 * <error> for one that could not run (I/O), <properties> for the measured
 * figures. Written whole through the atomic writer (mw_file_write_atomic):
 * a CI server never reads half a report. Text from input files (tensor and
 * key names) is made printable as cmd_text does, then XML-escaped.
 */
#ifndef MW_TOOLS_JUNIT_H
#define MW_TOOLS_JUNIT_H

#include <stdbool.h>
#include <stddef.h>

enum junit_result { JUNIT_PASS, JUNIT_FAILURE, JUNIT_ERROR };

struct junit_case {
    const char *name;    /* "kld <= 0.05", the file's path */
    enum junit_result result;
    const char *type;    /* failure/error type attribute ("E_CHECKSUM"), or NULL */
    const char *message; /* one line: the failure's reason, or NULL */
    const char *text;    /* body of <failure>/<error> or <system-out> for a pass; or NULL */
    double seconds;
};

struct junit_prop {
    const char *name;
    const char *value;
};

struct junit_suite {
    const char *name;      /* "memwall verify" */
    const char *classname; /* "memwall.verify" */
    const struct junit_case *cases;
    size_t n_cases;
    const struct junit_prop *props;
    size_t n_props;
    double seconds;
};

/* Write s to path atomically. Returns 0, or prints "memwall CMD: ..." to
 * stderr and returns the exit code of the error (3: I/O or memory). */
int junit_write(const char *cmd, const char *path, const struct junit_suite *s);

#endif /* MW_TOOLS_JUNIT_H */
