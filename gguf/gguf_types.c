/* gguf/gguf_types.c — the ggml type table (size half of the type traits) and
 * KV value type names. docs/formats.md §3.1 and §1.4. */
#include "gguf/gguf.h"

#include <strings.h>

static const struct gguf_type_info type_table[GGUF_TYPE_COUNT] = {
    [GGUF_TYPE_F32] = {"f32", 1, 4},
    [GGUF_TYPE_F16] = {"f16", 1, 2},
    [GGUF_TYPE_Q4_0] = {"q4_0", 32, 18},
    [GGUF_TYPE_Q4_1] = {"q4_1", 32, 20},
    [GGUF_TYPE_Q5_0] = {"q5_0", 32, 22},
    [GGUF_TYPE_Q5_1] = {"q5_1", 32, 24},
    [GGUF_TYPE_Q8_0] = {"q8_0", 32, 34},
    [GGUF_TYPE_Q8_1] = {"q8_1", 32, 36},
    [GGUF_TYPE_Q2_K] = {"q2_K", 256, 84},
    [GGUF_TYPE_Q3_K] = {"q3_K", 256, 110},
    [GGUF_TYPE_Q4_K] = {"q4_K", 256, 144},
    [GGUF_TYPE_Q5_K] = {"q5_K", 256, 176},
    [GGUF_TYPE_Q6_K] = {"q6_K", 256, 210},
    [GGUF_TYPE_Q8_K] = {"q8_K", 256, 292},
    [GGUF_TYPE_IQ2_XXS] = {"iq2_xxs", 256, 66},
    [GGUF_TYPE_IQ2_XS] = {"iq2_xs", 256, 74},
    [GGUF_TYPE_IQ3_XXS] = {"iq3_xxs", 256, 98},
    [GGUF_TYPE_IQ1_S] = {"iq1_s", 256, 50},
    [GGUF_TYPE_IQ4_NL] = {"iq4_nl", 32, 18},
    [GGUF_TYPE_IQ3_S] = {"iq3_s", 256, 110},
    [GGUF_TYPE_IQ2_S] = {"iq2_s", 256, 82},
    [GGUF_TYPE_IQ4_XS] = {"iq4_xs", 256, 136},
    [GGUF_TYPE_I8] = {"i8", 1, 1},
    [GGUF_TYPE_I16] = {"i16", 1, 2},
    [GGUF_TYPE_I32] = {"i32", 1, 4},
    [GGUF_TYPE_I64] = {"i64", 1, 8},
    [GGUF_TYPE_F64] = {"f64", 1, 8},
    [GGUF_TYPE_IQ1_M] = {"iq1_m", 256, 56},
    [GGUF_TYPE_BF16] = {"bf16", 1, 2},
    [GGUF_TYPE_TQ1_0] = {"tq1_0", 256, 54},
    [GGUF_TYPE_TQ2_0] = {"tq2_0", 256, 66},
    [GGUF_TYPE_MXFP4] = {"mxfp4", 32, 17},
    [GGUF_TYPE_NVFP4] = {"nvfp4", 64, 36},
    [GGUF_TYPE_Q1_0] = {"q1_0", 128, 18},
    [GGUF_TYPE_Q2_0] = {"q2_0", 64, 18},
};

const struct gguf_type_info *gguf_type_get(uint32_t t)
{
    if (t >= GGUF_TYPE_COUNT || type_table[t].blck == 0) return NULL;
    return &type_table[t];
}

int gguf_type_from_name(const char *name)
{
    if (!name) return -1;
    for (uint32_t t = 0; t < GGUF_TYPE_COUNT; t++)
        if (type_table[t].name && strcasecmp(type_table[t].name, name) == 0) return (int)t;
    return -1;
}

bool gguf_tensor_nbytes(uint32_t t, const uint64_t ne[GGUF_MAX_DIMS], uint64_t *out)
{
    const struct gguf_type_info *ti = gguf_type_get(t);
    if (!ti || ne[0] % ti->blck != 0) return false;
    uint64_t n = (ne[0] / ti->blck);
    if (!mw_mul_u64(n, ti->type_size, &n)) return false;
    for (int j = 1; j < GGUF_MAX_DIMS; j++)
        if (!mw_mul_u64(n, ne[j], &n)) return false;
    /* element count must also stay below 2^63, as ggml requires */
    uint64_t el = ne[0];
    for (int j = 1; j < GGUF_MAX_DIMS; j++)
        if (!mw_mul_u64(el, ne[j], &el)) return false;
    if (el >= (UINT64_C(1) << 63)) return false;
    *out = n;
    return true;
}

static const char *const vtype_names[GGUF_VT_COUNT] = {
    "u8", "i8", "u16", "i16", "u32", "i32", "f32", "bool", "string", "array", "u64", "i64", "f64",
};
static const uint8_t vtype_sizes[GGUF_VT_COUNT] = {1, 1, 2, 2, 4, 4, 4, 1, 0, 0, 8, 8, 8};

const char *gguf_vtype_name(uint32_t vt) { return vt < GGUF_VT_COUNT ? vtype_names[vt] : "?"; }

size_t gguf_vtype_size(uint32_t vt) { return vt < GGUF_VT_COUNT ? vtype_sizes[vt] : 0; }
