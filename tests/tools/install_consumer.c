/*
 * tests/tools/install_consumer.c — a C program outside the tree that links
 * the installed memwall library through pkg-config (tests/e2e/install_deb.sh
 * compiles it with `cc $(pkg-config --cflags --libs memwall)`; CMake never
 * builds it). `install_consumer FILE.gguf`: opens the file with the GGUF
 * reader, verifies it, prints "tensors N ok|failed" and exits 0 only when it
 * is intact.
 */
#include <stdio.h>

#include "gguf/gguf.h"
#include "verify/verify.h"

int main(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: install_consumer FILE.gguf\n");
        return 2;
    }
    struct mw_err err;
    mw_err_clear(&err);
    struct gguf_file *f = NULL;
    if (gguf_open(argv[1], GGUF_OPEN_DEFAULT, &f, &err) != MW_OK) {
        char buf[1024];
        fprintf(stderr, "%s\n", mw_err_format(&err, buf, sizeof buf));
        return mw_status_exit_code(err.code);
    }
    const unsigned long long n = (unsigned long long)gguf_tensor_count(f);
    gguf_close(f);
    const struct verify_opts o = {.deep = true};
    struct verify_report r;
    const enum mw_status s = verify_file(argv[1], &o, &r);
    printf("tensors %llu %s\n", n, s == MW_OK ? "ok" : "failed");
    verify_report_free(&r);
    return mw_status_exit_code(s);
}
