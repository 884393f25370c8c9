/*
 * tests/tools/corrupt_sweep.c — exhaustive single-byte damage of a small GGUF
 * file, checked in-process with verify_mem() (thousands of cases in well
 * under a second, also under ASan and qemu).
 *
 *   corrupt_sweep FILE
 *
 * FILE must verify intact. Then, for every byte offset and each mask 0xFF
 * and 0x01, a copy with that byte XOR-ed must fail verification with exit
 * code 1 (never 0, never a resource error); and every proper prefix of the
 * file (truncation at each length) must fail with MW_E_TRUNC. Each miss is
 * printed (each prefix in a buffer of its own length: ASan flags any read
 * past it). Exit status 0 when all are detected, 1 otherwise, 2 usage/I/O.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/mw.h"
#include "verify/verify.h"

static int load(const char *path, uint8_t **out, size_t *n)
{
    FILE *f = fopen(path, "rb");
    if (!f) return -1;
    size_t cap = 4096, len = 0;
    uint8_t *b = malloc(cap);
    while (b) {
        const size_t k = fread(b + len, 1, cap - len, f);
        len += k;
        if (len < cap) break;
        uint8_t *nb = realloc(b, cap * 2);
        if (!nb) {
            free(b);
            b = NULL;
            break;
        }
        b = nb;
        cap *= 2;
    }
    const int bad = ferror(f);
    fclose(f);
    if (!b || bad) {
        free(b);
        return -1;
    }
    *out = b;
    *n = len;
    return 0;
}

int main(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: corrupt_sweep FILE\n");
        return 2;
    }
    uint8_t *orig = NULL;
    size_t n = 0;
    if (load(argv[1], &orig, &n) != 0) {
        fprintf(stderr, "corrupt_sweep: cannot read %s\n", argv[1]);
        return 2;
    }
    uint8_t *copy = malloc(n ? n : 1);
    if (!copy) return 2;

    struct verify_report rep;
    unsigned long misses = 0, cases = 0;
    if (verify_mem(orig, n, argv[1], NULL, &rep) != MW_OK || rep.checksums != VERIFY_CK_OK) {
        fprintf(stderr, "corrupt_sweep: %s does not verify intact with checksums\n", argv[1]);
        verify_report_free(&rep);
        return 1;
    }
    verify_report_free(&rep);

    static const uint8_t masks[2] = {0xff, 0x01};
    for (size_t off = 0; off < n; off++) {
        for (int m = 0; m < 2; m++) {
            memcpy(copy, orig, n);
            copy[off] ^= masks[m];
            const enum mw_status s = verify_mem(copy, n, "flip", NULL, &rep);
            cases++;
            if (mw_status_exit_code(s) != 1) {
                misses++;
                printf("UNDETECTED: byte %zu (0x%zx) ^ 0x%02x -> %s\n", off, off, masks[m],
                       mw_status_name(s));
            }
            verify_report_free(&rep);
        }
    }
    for (size_t len = 0; len < n; len++) {
        /* the prefix in a buffer of exactly len bytes: under ASan a read
         * past the end of the truncated file is a report, not the next byte */
        uint8_t *prefix = realloc(copy, len ? len : 1);
        if (!prefix) return 2;
        copy = prefix;
        memcpy(copy, orig, len);
        const enum mw_status s = verify_mem(copy, len, "trunc", NULL, &rep);
        cases++;
        if (s != MW_E_TRUNC) {
            misses++;
            printf("TRUNCATION NOT REPORTED: length %zu -> %s\n", len, mw_status_name(s));
        }
        verify_report_free(&rep);
    }
    printf("corrupt_sweep: %s: %zu bytes, %lu cases, %lu undetected\n", argv[1], n, cases, misses);
    free(copy);
    free(orig);
    return misses ? 1 : 0;
}
