/* Fuzz target: memwall verify (structure, padding, checksums, deep decode of
 * every decodable type) on arbitrary bytes. */
#include <stddef.h>
#include <stdint.h>

#include "verify/verify.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct verify_opts opts = {.deep = true, .max_items = 16};
    struct verify_report rep;
    verify_mem(data, size, "fuzz", &opts, &rep);
    verify_report_free(&rep);
    return 0;
}
