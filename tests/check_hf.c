/* Unit tests for hf/: a catalogue of corrupt safetensors headers (each with
 * its expected status, byte offset and place), sharded checkpoints, the
 * architecture mapping (Q/K row permutation checked against an independent
 * reshape/swapaxes formulation, shapes, missing / unknown tensors), the
 * same bytes for any thread count, inspect. The conversion's numerics and
 * whole conversions of tinyllama-8m have their own suite, check_hf_convert;
 * config.json has check_hf_config. */
#define _GNU_SOURCE
#include <check.h>
#include <dirent.h>
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cjson/cJSON.h>

#include "core/mw_pool.h"
#include "gguf/gguf.h"
#include "hf/hf.h"

#include "check_common.h"
#include "check_hf_common.h"

// --- helpers ---------------------------------------------------------------------

/* safetensors bytes from a JSON header (padded to 8) and data. */
static uint8_t *st_build(const char *hdr, const void *data, size_t dn, size_t *out_n)
{
    size_t hl = strlen(hdr), pad = (8 - hl % 8) % 8;
    size_t n = 8 + hl + pad + dn;
    uint8_t *b = malloc(n + 1);
    uint64_t h = hl + pad;
    for (int i = 0; i < 8; i++) b[i] = (uint8_t)(h >> (8 * i));
    memcpy(b + 8, hdr, hl);
    memset(b + 8 + hl, ' ', pad);
    if (dn) memcpy(b + 8 + hl + pad, data, dn);
    *out_n = n;
    return b;
}

// --- safetensors: valid ---------------------------------------------------------

START_TEST(test_st_valid)
{
    uint8_t data[14];
    for (int i = 0; i < 14; i++) data[i] = (uint8_t)i;
    size_t n;
    uint8_t *b = st_build("{\"__metadata__\":{\"format\":\"pt\",\"x\":\"y\"},"
                          "\"b\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[8,12]},"
                          "\"a\":{\"dtype\":\"F16\",\"shape\":[2,2],\"data_offsets\":[0,8]},"
                          "\"s\":{\"dtype\":\"BF16\",\"shape\":[],\"data_offsets\":[12,14]},"
                          "\"z\":{\"dtype\":\"I64\",\"shape\":[0,3],\"data_offsets\":[14,14]}}",
                          data, sizeof data, &n);
    struct hf_st *st = NULL;
    struct mw_err err;
    mw_err_clear(&err);
    ck_assert_int_eq(hf_st_open_mem(b, n, "v.safetensors", &st, &err), MW_OK);
    ck_assert_uint_eq(hf_st_count(st), 4);
    const struct hf_st_tensor *a = hf_st_get(st, 0);
    ck_assert_str_eq(a->name, "a");
    ck_assert_int_eq(a->dtype, HF_DT_F16);
    ck_assert_uint_eq(a->n_dims, 2);
    ck_assert_uint_eq(a->nbytes, 8);
    ck_assert_uint_eq(a->file_off, n - 14);
    ck_assert_ptr_eq(a->data, b + n - 14);
    ck_assert_str_eq(hf_st_get(st, 1)->name, "b");
    const struct hf_st_tensor *s = hf_st_get(st, 2);
    ck_assert_uint_eq(s->n_dims, 0);
    ck_assert_uint_eq(s->n_elems, 1);
    ck_assert_uint_eq(hf_st_get(st, 3)->nbytes, 0);
    ck_assert_int_eq(hf_st_find(st, "s"), 2);
    ck_assert_int_eq(hf_st_find(st, "nope"), -1);
    ck_assert_uint_eq(hf_st_meta_count(st), 2);
    const char *k, *v;
    ck_assert(hf_st_meta_get(st, 1, &k, &v));
    ck_assert_str_eq(k, "x");
    ck_assert_str_eq(v, "y");
    hf_st_close(st);
    free(b);
}
END_TEST

// --- safetensors: corrupt catalogue -------------------------------------------------

#define T1 "\"t\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}"
#define OFF_ANY UINT64_MAX
#define OFF_HDR 8 /* the first header byte (also: "the first key") */

static const struct st_case {
    const char *name;
    const char *hdr;     /* NULL: raw bytes below */
    size_t data_n;       /* data bytes after the header */
    const char *raw;     /* raw file (when hdr == NULL) */
    size_t raw_n;
    enum mw_status want;
    uint64_t off;        /* expected err.off (OFF_ANY: not checked) */
    const char *where;   /* substring of err.where + err.msg */
} st_cases[] = {
    {"empty", NULL, 0, "", 0, MW_E_TRUNC, 0, "8-byte header length"},
    {"short", NULL, 0, "\x10\x00\x00", 3, MW_E_TRUNC, 0, "8-byte"},
    {"len-past-end", NULL, 0, "\xff\x00\x00\x00\x00\x00\x00\x00{}", 10, MW_E_TRUNC, 0,
     "runs past the end"},
    {"huge-len", NULL, 0, "\xff\xff\xff\xff\xff\xff\xff\xff{}", 10, MW_E_TRUNC, 0, "header length"},
    {"not-brace", "[1,2]", 0, NULL, 0, MW_E_FORMAT, OFF_HDR, "does not start with '{'"},
    {"syntax", "{\"t\":{\"dtype\":\"F32\",}}", 0, NULL, 0, MW_E_FORMAT, OFF_ANY, "JSON syntax"},
    {"trailing", "{}x", 0, NULL, 0, MW_E_FORMAT, 10, "after the JSON header"},
    {"nul-byte", NULL, 0, "\x08\x00\x00\x00\x00\x00\x00\x00{\"a\"\x00}  ", 16, MW_E_FORMAT, 12,
     "NUL byte"},
    {"nul-escape", "{\"a\\u0000b\":{}}", 0, NULL, 0, MW_E_FORMAT, 11, "\\u0000"},
    {"bad-utf8", "{\"\xc3\x28\":{}}", 0, NULL, 0, MW_E_FORMAT, 10, "UTF-8"},
    {"entry-not-object", "{\"t\":5}", 0, NULL, 0, MW_E_FORMAT, OFF_HDR + 1, "tensor 't'"},
    {"missing-dtype", "{\"t\":{\"shape\":[1],\"data_offsets\":[0,4]}}", 4, NULL, 0, MW_E_FORMAT,
     OFF_HDR + 1, "missing 'dtype'"},
    {"unknown-dtype", "{\"t\":{\"dtype\":\"Q4\",\"shape\":[1],\"data_offsets\":[0,4]}}", 4, NULL, 0,
     MW_E_UNSUPPORTED, OFF_HDR + 1, "unknown dtype 'Q4'"},
    {"dtype-not-string", "{\"t\":{\"dtype\":1,\"shape\":[1],\"data_offsets\":[0,4]}}", 4, NULL, 0,
     MW_E_FORMAT, OFF_HDR + 1, "dtype is not a string"},
    {"extra-key", "{\"t\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[0,1],\"x\":1}}", 1, NULL,
     0, MW_E_FORMAT, OFF_HDR + 1, "unexpected key 'x'"},
    {"dup-member", "{\"t\":{\"dtype\":\"U8\",\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[0,1]}}",
     1, NULL, 0, MW_E_FORMAT, OFF_HDR + 1, "duplicate key 'dtype'"},
    {"shape-not-array", "{\"t\":{\"dtype\":\"U8\",\"shape\":1,\"data_offsets\":[0,1]}}", 1, NULL, 0,
     MW_E_FORMAT, OFF_HDR + 1, "shape is not an array"},
    {"negative-dim", "{\"t\":{\"dtype\":\"U8\",\"shape\":[-1],\"data_offsets\":[0,1]}}", 1, NULL, 0,
     MW_E_FORMAT, OFF_HDR + 1, "shape[0]"},
    {"fraction-dim", "{\"t\":{\"dtype\":\"U8\",\"shape\":[1.5],\"data_offsets\":[0,1]}}", 1, NULL, 0,
     MW_E_FORMAT, OFF_HDR + 1, "shape[0]"},
    {"too-many-dims",
     "{\"t\":{\"dtype\":\"U8\",\"shape\":[1,1,1,1,1,1,1,1,1],\"data_offsets\":[0,1]}}", 1, NULL, 0,
     MW_E_UNSUPPORTED, OFF_HDR + 1, "dimensions"},
    {"shape-overflow",
     "{\"t\":{\"dtype\":\"U8\",\"shape\":[4294967296,4294967296],\"data_offsets\":[0,1]}}", 1, NULL,
     0, MW_E_FORMAT, OFF_HDR + 1, "overflows"},
    {"bytes-overflow",
     "{\"t\":{\"dtype\":\"F64\",\"shape\":[4294967296,1073741824],\"data_offsets\":[0,1]}}", 1,
     NULL, 0, MW_E_FORMAT, OFF_HDR + 1, "overflows"},
    {"offsets-count", "{\"t\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[0]}}", 1, NULL, 0,
     MW_E_FORMAT, OFF_HDR + 1, "array of 2"},
    {"begin-gt-end", "{\"t\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[2,1]}}", 2, NULL, 0,
     MW_E_FORMAT, OFF_HDR + 1, "begin > end"},
    {"past-data", "{\"t\":{\"dtype\":\"F32\",\"shape\":[4],\"data_offsets\":[0,16]}}", 8, NULL, 0,
     MW_E_TRUNC, OFF_HDR + 1, "past the end of the data section"},
    {"size-mismatch", "{\"t\":{\"dtype\":\"F32\",\"shape\":[3],\"data_offsets\":[0,8]}}", 8, NULL, 0,
     MW_E_FORMAT, OFF_HDR + 1, "needs 12 bytes"},
    {"overlap",
     "{\"a\":{\"dtype\":\"U8\",\"shape\":[4],\"data_offsets\":[0,4]},"
     "\"b\":{\"dtype\":\"U8\",\"shape\":[4],\"data_offsets\":[2,6]}}",
     6, NULL, 0, MW_E_FORMAT, OFF_ANY, "overlaps tensor 'a'"},
    {"gap",
     "{\"a\":{\"dtype\":\"U8\",\"shape\":[2],\"data_offsets\":[0,2]},"
     "\"b\":{\"dtype\":\"U8\",\"shape\":[2],\"data_offsets\":[4,6]}}",
     6, NULL, 0, MW_E_FORMAT, OFF_ANY, "gap of 2 bytes"},
    {"trailing-data", "{" T1 "}", 12, NULL, 0, MW_E_FORMAT, OFF_ANY, "4 bytes after the end"},
    {"duplicate-name",
     "{\"t\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[0,1]},"
     "\"t\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[1,2]}}",
     2, NULL, 0, MW_E_FORMAT, OFF_ANY, "duplicate tensor name"},
    {"empty-name", "{\"\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[0,1]}}", 1, NULL, 0,
     MW_E_FORMAT, OFF_HDR + 1, "empty tensor name"},
    {"meta-not-string", "{\"__metadata__\":{\"a\":1}}", 0, NULL, 0, MW_E_FORMAT, OFF_HDR + 1,
     "__metadata__.a"},
    {"meta-not-object", "{\"__metadata__\":[]}", 0, NULL, 0, MW_E_FORMAT, OFF_HDR + 1,
     "not a JSON object"},
    {"meta-dup", "{\"__metadata__\":{\"a\":\"1\",\"a\":\"2\"}}", 0, NULL, 0, MW_E_FORMAT,
     OFF_HDR + 1, "duplicate metadata key"},
    {"meta-twice", "{\"__metadata__\":{},\"__metadata__\":{}}", 0, NULL, 0, MW_E_FORMAT, 27,
     "duplicate key '__metadata__'"},
};
#define N_ST_CASES ((int)(sizeof st_cases / sizeof st_cases[0]))

START_TEST(test_st_corrupt)
{
    const struct st_case *c = &st_cases[_i];
    size_t n;
    uint8_t *b;
    if (c->hdr) {
        uint8_t zeros[64] = {0};
        b = st_build(c->hdr, zeros, c->data_n, &n);
    } else {
        n = c->raw_n;
        b = malloc(n ? n : 1);
        memcpy(b, c->raw, n);
    }
    struct hf_st *st = NULL;
    struct mw_err err;
    mw_err_clear(&err);
    enum mw_status s = hf_st_open_mem(b, n, "bad.safetensors", &st, &err);
    char text[1024];
    mw_err_format(&err, text, sizeof text);
    ck_assert_msg(s == c->want, "%s: status %s, want %s (%s)", c->name, mw_status_name(s),
                  mw_status_name(c->want), text);
    ck_assert_ptr_null(st);
    ck_assert_str_eq(err.path, "bad.safetensors");
    if (c->off != OFF_ANY)
        ck_assert_msg(err.off == c->off, "%s: off %llu, want %llu (%s)", c->name,
                      (unsigned long long)err.off, (unsigned long long)c->off, text);
    ck_assert_msg(strstr(text, c->where) != NULL, "%s: '%s' lacks '%s'", c->name, text, c->where);
    free(b);
}
END_TEST

/* The error of a tensor-level problem names the tensor and the offset of
 * its key (second key here). */
START_TEST(test_st_key_offset)
{
    const char *hdr = "{\"a\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[0,1]},"
                      "\"bb\":{\"dtype\":\"U8\",\"shape\":[2],\"data_offsets\":[1,2]}}";
    size_t n;
    uint8_t z[8] = {0};
    uint8_t *b = st_build(hdr, z, 2, &n);
    struct hf_st *st = NULL;
    struct mw_err err;
    mw_err_clear(&err);
    ck_assert_int_eq(hf_st_open_mem(b, n, "k", &st, &err), MW_E_FORMAT);
    ck_assert_str_eq(err.where, "tensor 'bb'");
    ck_assert_uint_eq(err.off, 8 + (uint64_t)(strstr(hdr, "\"bb\"") - hdr));
    free(b);
}
END_TEST

// --- synthetic checkpoints ---------------------------------------------------------

enum variant {
    V_OK, V_QWEN2, V_TIED, V_WRONG_SHAPE, V_MISSING, V_UNKNOWN, V_I32, V_LAYER, V_BIAS,
    V_NO_LMHEAD, V_INV_FREQ, V_VOCAB, V_COUNT
};

/* tiny llama: E 8, heads 2 (kv 1), head_dim 4, FF 16, vocab 6, 1 layer, F32;
 * element (row r, col c) of tensor number k is k*10000 + r*100 + c. */
struct tdef {
    char name[96];
    const char *dtype;
    uint32_t nd;
    uint64_t shape[2];
};

static int add_t(struct tdef *t, int n, const char *name, const char *dt, uint64_t r, uint64_t c)
{
    snprintf(t[n].name, sizeof t[n].name, "%s", name);
    t[n].dtype = dt;
    t[n].nd = c ? 2 : 1;
    t[n].shape[0] = r;
    t[n].shape[1] = c;
    return n + 1;
}

static float elem_value(int k, uint64_t r, uint64_t c) { return (float)(k * 10000 + (int)r * 100 + (int)c); }

static void make_model(const char *dir, enum variant v)
{
    const bool qwen = v == V_QWEN2;
    char cfg[1024];
    snprintf(cfg, sizeof cfg,
             "{\"architectures\":[\"%s\"],\"hidden_size\":8,\"num_hidden_layers\":1,"
             "\"intermediate_size\":16,\"num_attention_heads\":2,\"num_key_value_heads\":1,"
             "\"vocab_size\":%d,\"max_position_embeddings\":64,\"rms_norm_eps\":1e-6,"
             "\"tie_word_embeddings\":%s}",
             qwen ? "Qwen2ForCausalLM" : "LlamaForCausalLM", v == V_VOCAB ? 7 : 6,
             (qwen || v == V_TIED) ? "true" : "false");
    write_text_in(dir, "config.json", cfg);
    struct tdef t[32];
    int n = 0;
    const char *f = "F32";
    n = add_t(t, n, "model.embed_tokens.weight", f, 6, 8);
    n = add_t(t, n, "model.norm.weight", v == V_I32 ? "I32" : f, 8, 0);
    if (!qwen && v != V_NO_LMHEAD) n = add_t(t, n, "lm_head.weight", f, 6, 8);
    n = add_t(t, n, "model.layers.0.input_layernorm.weight", f, 8, 0);
    n = add_t(t, n, "model.layers.0.post_attention_layernorm.weight", f, 8, 0);
    n = add_t(t, n, "model.layers.0.self_attn.q_proj.weight", f, 8, 8);
    if (v == V_WRONG_SHAPE) n = add_t(t, n, "model.layers.0.self_attn.k_proj.weight", f, 8, 4);
    else n = add_t(t, n, "model.layers.0.self_attn.k_proj.weight", f, 4, 8);
    n = add_t(t, n, "model.layers.0.self_attn.v_proj.weight", f, 4, 8);
    n = add_t(t, n, "model.layers.0.self_attn.o_proj.weight", f, 8, 8);
    n = add_t(t, n, "model.layers.0.mlp.gate_proj.weight", f, 16, 8);
    if (v != V_MISSING) n = add_t(t, n, "model.layers.0.mlp.up_proj.weight", f, 16, 8);
    n = add_t(t, n, "model.layers.0.mlp.down_proj.weight", f, 8, 16);
    if (qwen || v == V_BIAS) {
        n = add_t(t, n, "model.layers.0.self_attn.q_proj.bias", f, 8, 0);
        n = add_t(t, n, "model.layers.0.self_attn.k_proj.bias", f, 4, 0);
        n = add_t(t, n, "model.layers.0.self_attn.v_proj.bias", f, 4, 0);
    }
    if (v == V_UNKNOWN) n = add_t(t, n, "model.layers.0.mlp.extra.weight", f, 8, 0);
    if (v == V_LAYER) n = add_t(t, n, "model.layers.1.input_layernorm.weight", f, 8, 0);
    if (v == V_INV_FREQ) n = add_t(t, n, "model.layers.0.self_attn.rotary_emb.inv_freq", f, 2, 0);

    char hdr[8192];
    size_t hl = (size_t)snprintf(hdr, sizeof hdr, "{\"__metadata__\":{\"format\":\"pt\"}");
    uint64_t off = 0;
    for (int i = 0; i < n; i++) {
        uint64_t cnt = t[i].shape[0] * (t[i].nd == 2 ? t[i].shape[1] : 1);
        hl += (size_t)snprintf(hdr + hl, sizeof hdr - hl, ",\"%s\":{\"dtype\":\"%s\",\"shape\":[%llu",
                               t[i].name, t[i].dtype, (unsigned long long)t[i].shape[0]);
        if (t[i].nd == 2)
            hl += (size_t)snprintf(hdr + hl, sizeof hdr - hl, ",%llu", (unsigned long long)t[i].shape[1]);
        hl += (size_t)snprintf(hdr + hl, sizeof hdr - hl, "],\"data_offsets\":[%llu,%llu]}",
                               (unsigned long long)off, (unsigned long long)(off + 4 * cnt));
        off += 4 * cnt;
    }
    snprintf(hdr + hl, sizeof hdr - hl, "}");
    uint8_t *data = malloc(off);
    uint64_t p = 0;
    for (int i = 0; i < n; i++) {
        uint64_t rows = t[i].shape[0], cols = t[i].nd == 2 ? t[i].shape[1] : 1;
        for (uint64_t r = 0; r < rows; r++)
            for (uint64_t c = 0; c < cols; c++) {
                float x = elem_value(i, r, c);
                memcpy(data + p, &x, 4);
                p += 4;
            }
    }
    size_t sn;
    uint8_t *st = st_build(hdr, data, off, &sn);
    char *sp = path_in(dir, "model.safetensors");
    write_file(sp, st, sn);
    free(sp);
    free(st);
    free(data);
}

static enum mw_status sink_buf(void *ud, const void *d, size_t n, struct mw_err *err)
{
    (void)err;
    uint8_t **pp = ud;
    memcpy(*pp, d, n);
    *pp += n;
    return MW_OK;
}

static const struct hf_plan_tensor *plan_find(const struct hf_plan *p, const char *name,
                                              uint64_t *idx)
{
    for (uint64_t i = 0; i < hf_plan_count(p); i++)
        if (strcmp(hf_plan_get(p, i)->name, name) == 0) {
            *idx = i;
            return hf_plan_get(p, i);
        }
    return NULL;
}

/* rows of an F32 output tensor */
static float *stream_f32(const struct hf_plan *p, uint64_t i, size_t chunk)
{
    const struct hf_plan_tensor *e = hf_plan_get(p, i);
    uint8_t *buf = malloc(e->nbytes), *w = buf;
    struct mw_err err;
    mw_err_clear(&err);
    ck_assert_int_eq(hf_plan_stream_tensor(p, i, chunk, sink_buf, &w, &err), MW_OK);
    ck_assert_uint_eq((uint64_t)(w - buf), e->nbytes);
    return (float *)buf;
}

/* Independent formulation of convert_hf_to_gguf.py's permute():
 * w.reshape(n_head, 2, rows/n_head/2, cols).swapaxes(1, 2).reshape(rows, cols),
 * i.e. out[h][a][b][:] = in[h][b][a][:] with a < rows/n_head/2, b < 2. */
static void ref_permute(const float *in, float *out, uint64_t rows, uint64_t cols, uint64_t n_head)
{
    const uint64_t half = rows / n_head / 2;
    for (uint64_t h = 0; h < n_head; h++)
        for (uint64_t a = 0; a < half; a++)
            for (uint64_t b = 0; b < 2; b++)
                memcpy(out + ((h * half + a) * 2 + b) * cols, in + ((h * 2 + b) * half + a) * cols,
                       cols * sizeof(float));
}

START_TEST(test_permutation)
{
    char *dir = make_tmpdir("hf");
    make_model(dir, V_OK);
    struct hf_model *m;
    struct hf_plan *p;
    struct mw_err err;
    mw_err_clear(&err);
    ck_assert_int_eq(hf_model_open(dir, &m, &err), MW_OK);
    ck_assert_int_eq(hf_plan_build(m, HF_OUT_F32, &p, &err), MW_OK);
    ck_assert_str_eq(hf_plan_source_dtype(p), "F32");
    static const struct {
        const char *gguf, *hf;
        uint64_t rows, cols, heads; /* heads 0: not permuted */
    } cases[] = {
        {"blk.0.attn_q.weight", "model.layers.0.self_attn.q_proj.weight", 8, 8, 2},
        {"blk.0.attn_k.weight", "model.layers.0.self_attn.k_proj.weight", 4, 8, 1},
        {"blk.0.attn_v.weight", "model.layers.0.self_attn.v_proj.weight", 4, 8, 0},
        {"blk.0.ffn_down.weight", "model.layers.0.mlp.down_proj.weight", 8, 16, 0},
        {"token_embd.weight", "model.embed_tokens.weight", 6, 8, 0},
    };
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        uint64_t i;
        const struct hf_plan_tensor *e = plan_find(p, cases[k].gguf, &i);
        ck_assert_msg(e != NULL, "%s missing", cases[k].gguf);
        ck_assert_uint_eq(e->ne[0], cases[k].cols);
        ck_assert_uint_eq(e->ne[1], cases[k].rows);
        ck_assert_int_eq(e->xform, cases[k].heads ? HF_XFORM_PERMUTE : HF_XFORM_NONE);
        int64_t si = hf_model_tensor_find(m, cases[k].hf);
        ck_assert_int_ge(si, 0);
        const struct hf_st_tensor *src = hf_model_tensor(m, (uint64_t)si, NULL);
        float *want = malloc(src->nbytes);
        if (cases[k].heads)
            ref_permute((const float *)src->data, want, cases[k].rows, cases[k].cols,
                        cases[k].heads);
        else
            memcpy(want, src->data, src->nbytes);
        /* the result must not depend on the chunk size */
        for (size_t chunk = 1; chunk <= 1u << 20; chunk <<= 10) {
            float *got = stream_f32(p, i, chunk);
            ck_assert_msg(memcmp(got, want, src->nbytes) == 0, "%s (chunk %zu)", cases[k].gguf, chunk);
            free(got);
        }
        free(want);
    }
    /* 1-D tensors are F32 whatever the output type */
    hf_plan_free(p);
    ck_assert_int_eq(hf_plan_build(m, HF_OUT_Q8_0, &p, &err), MW_OK);
    uint64_t i;
    ck_assert_uint_eq(plan_find(p, "output_norm.weight", &i)->type, GGUF_TYPE_F32);
    /* rows of 8 are not a multiple of 32: q8_0 falls back to f16 */
    ck_assert_uint_eq(plan_find(p, "blk.0.attn_q.weight", &i)->type, GGUF_TYPE_F16);
    hf_plan_free(p);
    hf_model_close(m);
    free(dir);
}
END_TEST

/* hf_plan_stream_tensor_mt: every tensor of every output type has the same
 * bytes for pools of 2, 3 and 8 threads as with the calling thread alone,
 * at chunk sizes from one row to the default. */
static uint8_t *stream_bytes(const struct hf_plan *p, uint64_t i, size_t chunk,
                             struct mw_pool *pool)
{
    const struct hf_plan_tensor *e = hf_plan_get(p, i);
    uint8_t *buf = malloc(e->nbytes ? e->nbytes : 1), *w = buf;
    struct mw_err err;
    mw_err_clear(&err);
    ck_assert_int_eq(hf_plan_stream_tensor_mt(p, i, chunk, pool, sink_buf, &w, &err), MW_OK);
    ck_assert_uint_eq((uint64_t)(w - buf), e->nbytes);
    return buf;
}

START_TEST(test_threads_identical)
{
    static const enum variant variants[] = {V_OK, V_QWEN2};
    static const unsigned sizes[] = {2, 3, 8};
    struct mw_pool *pools[3] = {NULL, NULL, NULL};
    struct mw_err err;
    mw_err_clear(&err);
    for (size_t k = 0; k < 3; k++) ck_assert_int_eq(mw_pool_init(sizes[k], &pools[k], &err), MW_OK);
    for (size_t v = 0; v < sizeof variants / sizeof variants[0]; v++) {
        char *dir = make_tmpdir("hf");
        make_model(dir, variants[v]);
        struct hf_model *m;
        ck_assert_int_eq(hf_model_open(dir, &m, &err), MW_OK);
        for (int t = 0; t < HF_OUT_COUNT; t++) {
            struct hf_plan *p;
            ck_assert_int_eq(hf_plan_build(m, (enum hf_out_type)t, &p, &err), MW_OK);
            for (uint64_t i = 0; i < hf_plan_count(p); i++) {
                for (size_t chunk = 1; chunk <= 1u << 20; chunk <<= 10) {
                    uint8_t *want = stream_bytes(p, i, chunk, NULL);
                    for (size_t k = 0; k < 3; k++) {
                        uint8_t *got = stream_bytes(p, i, chunk, pools[k]);
                        ck_assert_msg(memcmp(got, want, hf_plan_get(p, i)->nbytes) == 0,
                                      "%s type %d chunk %zu threads %u", hf_plan_get(p, i)->name,
                                      t, chunk, sizes[k]);
                        free(got);
                    }
                    free(want);
                }
            }
            hf_plan_free(p);
        }
        hf_model_close(m);
        free(dir);
    }
    for (size_t k = 0; k < 3; k++) mw_pool_free(pools[k]);

    /* whole files with real Q8_0 rows: tinyllama-8m, 1 thread vs 3 */
    char src[512];
    ck_assert_msg(model_dir("tinyllama-8m", src, sizeof src),
                  "tinyllama-8m missing (bundled in datasets/)");
    char *dir = make_tmpdir("hf");
    uint8_t *b[2];
    size_t n[2];
    for (int k = 0; k < 2; k++) {
        char *out = path_in(dir, k ? "t3.gguf" : "t1.gguf");
        struct hf_convert_opts o = {.type = HF_OUT_Q8_0, .n_threads = k ? 3 : 1};
        char text[1024];
        ck_assert_msg(hf_convert(src, out, &o, &err) == MW_OK, "%s",
                      mw_err_format(&err, text, sizeof text));
        b[k] = read_file(out, &n[k]);
        free(out);
    }
    ck_assert_uint_eq(n[0], n[1]);
    ck_assert(memcmp(b[0], b[1], n[0]) == 0);
    free(b[0]);
    free(b[1]);
    free(dir);
}
END_TEST

START_TEST(test_qwen2_mapping)
{
    char *dir = make_tmpdir("hf");
    make_model(dir, V_QWEN2);
    struct hf_model *m;
    struct hf_plan *p;
    struct mw_err err;
    mw_err_clear(&err);
    ck_assert_int_eq(hf_model_open(dir, &m, &err), MW_OK);
    ck_assert_int_eq(hf_plan_build(m, HF_OUT_F16, &p, &err), MW_OK);
    uint64_t i;
    ck_assert_ptr_null(plan_find(p, "output.weight", &i)); /* tied */
    const struct hf_plan_tensor *qb = plan_find(p, "blk.0.attn_q.bias", &i);
    ck_assert_ptr_nonnull(qb);
    ck_assert_uint_eq(qb->type, GGUF_TYPE_F32);
    ck_assert_int_eq(qb->xform, HF_XFORM_NONE); /* NEOX rope: no permutation */
    ck_assert_int_eq(plan_find(p, "blk.0.attn_q.weight", &i)->xform, HF_XFORM_NONE);
    ck_assert_uint_eq(plan_find(p, "blk.0.attn_q.weight", &i)->type, GGUF_TYPE_F16);
    ck_assert_uint_eq(hf_plan_count(p), 14);
    hf_plan_free(p);
    hf_model_close(m);

    /* llama with biases: q/k biases permuted like their weights */
    make_model(dir, V_BIAS);
    write_text_in(dir, "config.json",
                  "{\"architectures\":[\"LlamaForCausalLM\"],\"hidden_size\":8,\"num_hidden_layers\":1,"
                  "\"intermediate_size\":16,\"num_attention_heads\":2,\"num_key_value_heads\":1,"
                  "\"vocab_size\":6,\"max_position_embeddings\":64,\"rms_norm_eps\":1e-6,"
                  "\"attention_bias\":true}");
    ck_assert_int_eq(hf_model_open(dir, &m, &err), MW_OK);
    /* o_proj.bias is missing although attention_bias is true */
    ck_assert_int_eq(hf_plan_build(m, HF_OUT_F16, &p, &err), MW_E_FORMAT);
    ck_assert_str_eq(err.where, "tensor 'model.layers.0.self_attn.o_proj.bias'");
    hf_model_close(m);
    free(dir);
}
END_TEST

static const struct plan_case {
    enum variant v;
    enum mw_status want;
    const char *where;
    const char *msg;
} plan_cases[] = {
    {V_WRONG_SHAPE, MW_E_FORMAT, "tensor 'model.layers.0.self_attn.k_proj.weight'",
     "shape [8, 4], expected [4, 8]"},
    {V_MISSING, MW_E_FORMAT, "tensor 'model.layers.0.mlp.up_proj.weight'", "missing"},
    {V_UNKNOWN, MW_E_UNSUPPORTED, "tensor 'model.layers.0.mlp.extra.weight'", "cannot map"},
    {V_I32, MW_E_UNSUPPORTED, "tensor 'model.norm.weight'", "dtype I32"},
    {V_LAYER, MW_E_FORMAT, "tensor 'model.layers.1.input_layernorm.weight'", "layer 1"},
    {V_BIAS, MW_E_FORMAT, "tensor 'model.layers.0.self_attn.k_proj.bias'", "attention_bias"},
    {V_NO_LMHEAD, MW_E_FORMAT, "tensor 'lm_head.weight'", "tie_word_embeddings false"},
    {V_VOCAB, MW_E_FORMAT, "tensor 'lm_head.weight'", "vocab_size"},
};
#define N_PLAN_CASES ((int)(sizeof plan_cases / sizeof plan_cases[0]))

START_TEST(test_plan_errors)
{
    const struct plan_case *c = &plan_cases[_i];
    char *dir = make_tmpdir("hf");
    make_model(dir, c->v);
    struct hf_model *m;
    struct hf_plan *p = NULL;
    struct mw_err err;
    mw_err_clear(&err);
    ck_assert_int_eq(hf_model_open(dir, &m, &err), MW_OK);
    enum mw_status s = hf_plan_build(m, HF_OUT_F16, &p, &err);
    char text[1024];
    mw_err_format(&err, text, sizeof text);
    ck_assert_msg(s == c->want, "variant %d: %s (%s)", c->v, mw_status_name(s), text);
    ck_assert_ptr_null(p);
    ck_assert_msg(strcmp(err.where, c->where) == 0, "where '%s' want '%s'", err.where, c->where);
    ck_assert_msg(strstr(err.msg, c->msg) != NULL, "msg '%s' lacks '%s'", err.msg, c->msg);
    hf_model_close(m);
    free(dir);
}
END_TEST

START_TEST(test_plan_ok_variants)
{
    static const enum variant ok[] = {V_TIED, V_INV_FREQ};
    for (size_t k = 0; k < 2; k++) {
        char *dir = make_tmpdir("hf");
        make_model(dir, ok[k]);
        struct hf_model *m;
        struct hf_plan *p;
        struct mw_err err;
        mw_err_clear(&err);
        ck_assert_int_eq(hf_model_open(dir, &m, &err), MW_OK);
        ck_assert_int_eq(hf_plan_build(m, HF_OUT_BF16, &p, &err), MW_OK);
        uint64_t i;
        /* tied: lm_head skipped; inv_freq: dropped (llama.cpp recomputes it) */
        ck_assert_uint_eq(hf_plan_count(p), ok[k] == V_TIED ? 11 : 12);
        ck_assert_ptr_null(plan_find(p, ok[k] == V_TIED ? "output.weight" : "rotary", &i));
        hf_plan_free(p);
        hf_model_close(m);
        free(dir);
    }
}
END_TEST

// --- checkpoint directories ------------------------------------------------------------

static void split_into_shards(const char *dir)
{
    /* re-write model.safetensors as two shards + an index */
    char *sp = path_in(dir, "model.safetensors");
    struct hf_st *st;
    struct mw_err err;
    mw_err_clear(&err);
    ck_assert_int_eq(hf_st_open(sp, &st, &err), MW_OK);
    char idx[8192];
    size_t il = (size_t)snprintf(idx, sizeof idx, "{\"metadata\":{},\"weight_map\":{");
    for (int part = 0; part < 2; part++) {
        char hdr[8192];
        size_t hl = (size_t)snprintf(hdr, sizeof hdr, "{");
        uint8_t *data = malloc(4096);
        uint64_t off = 0;
        char fn[64];
        snprintf(fn, sizeof fn, "model-%05d-of-00002.safetensors", part + 1);
        for (uint64_t i = (uint64_t)part; i < hf_st_count(st); i += 2) {
            const struct hf_st_tensor *t = hf_st_get(st, i);
            char shape[64];
            if (t->n_dims == 2)
                snprintf(shape, sizeof shape, "%llu,%llu", (unsigned long long)t->shape[0],
                         (unsigned long long)t->shape[1]);
            else
                snprintf(shape, sizeof shape, "%llu", (unsigned long long)t->shape[0]);
            hl += (size_t)snprintf(hdr + hl, sizeof hdr - hl,
                                   "%s\"%s\":{\"dtype\":\"%s\",\"shape\":[%s],"
                                   "\"data_offsets\":[%llu,%llu]}",
                                   hl > 1 ? "," : "", t->name, hf_dtype_name(t->dtype), shape,
                                   (unsigned long long)off, (unsigned long long)(off + t->nbytes));
            memcpy(data + off, t->data, t->nbytes);
            off += t->nbytes;
            il += (size_t)snprintf(idx + il, sizeof idx - il, "%s\"%s\":\"%s\"",
                                   il > 30 ? "," : "", t->name, fn);
        }
        snprintf(hdr + hl, sizeof hdr - hl, "}");
        size_t sn;
        uint8_t *b = st_build(hdr, data, off, &sn);
        char *p = path_in(dir, fn);
        write_file(p, b, sn);
        free(p);
        free(b);
        free(data);
    }
    snprintf(idx + il, sizeof idx - il, "}}");
    hf_st_close(st);
    unlink(sp);
    free(sp);
    write_text_in(dir, "model.safetensors.index.json", idx);
}

START_TEST(test_sharded_dir)
{
    char *dir = make_tmpdir("hf");
    make_model(dir, V_OK);
    struct hf_model *m1;
    struct mw_err err;
    mw_err_clear(&err);
    ck_assert_int_eq(hf_model_open(dir, &m1, &err), MW_OK);
    uint64_t n1 = hf_model_tensor_count(m1);
    hf_model_close(m1);
    split_into_shards(dir);
    struct hf_model *m;
    enum mw_status s = hf_model_open(dir, &m, &err);
    char text[1024];
    ck_assert_msg(s == MW_OK, "%s", mw_err_format(&err, text, sizeof text));
    ck_assert_uint_eq(hf_model_shard_count(m), 2);
    ck_assert_uint_eq(hf_model_tensor_count(m), n1);
    const struct hf_st *sh;
    hf_model_tensor(m, 0, &sh);
    ck_assert_ptr_eq(sh, hf_model_shard(m, 0));
    int64_t k = hf_model_tensor_find(m, "model.norm.weight");
    ck_assert_int_ge(k, 0);
    ck_assert_str_eq(hf_model_tensor(m, (uint64_t)k, NULL)->name, "model.norm.weight");
    hf_model_close(m);

    /* a shard missing on disk: MW_E_FORMAT naming the index and a tensor */
    char *s2 = path_in(dir, "model-00002-of-00002.safetensors");
    char *s2x = path_in(dir, "moved");
    ck_assert_int_eq(rename(s2, s2x), 0);
    ck_assert_int_eq(hf_model_open(dir, &m, &err), MW_E_FORMAT);
    ck_assert(strstr(err.path, "model.safetensors.index.json") != NULL);
    ck_assert(strncmp(err.where, "weight_map.", 11) == 0);
    ck_assert(strstr(err.msg, "model-00002-of-00002.safetensors") != NULL);
    ck_assert_int_eq(rename(s2x, s2), 0);

    /* the weight map names a tensor the shard does not hold */
    write_text_in(dir, "model.safetensors.index.json",
                  "{\"weight_map\":{\"ghost\":\"model-00001-of-00002.safetensors\"}}");
    ck_assert_int_eq(hf_model_open(dir, &m, &err), MW_E_FORMAT);
    ck_assert_str_eq(err.where, "weight_map.ghost");
    /* a path outside the directory */
    write_text_in(dir, "model.safetensors.index.json", "{\"weight_map\":{\"a\":\"../x.safetensors\"}}");
    ck_assert_int_eq(hf_model_open(dir, &m, &err), MW_E_FORMAT);
    ck_assert_str_eq(err.where, "weight_map.a");
    free(s2);
    free(s2x);
    free(dir);
}
END_TEST

START_TEST(test_dir_errors)
{
    char *dir = make_tmpdir("hf");
    struct hf_model *m;
    struct mw_err err;
    mw_err_clear(&err);
    ck_assert_int_eq(hf_model_open(dir, &m, &err), MW_E_FORMAT); /* no config.json */
    ck_assert(strstr(err.path, "config.json") != NULL);
    ck_assert(strstr(err.msg, "does not exist") != NULL);
    make_model(dir, V_OK);
    char *sp = path_in(dir, "model.safetensors");
    unlink(sp);
    ck_assert_int_eq(hf_model_open(dir, &m, &err), MW_E_FORMAT); /* no weights */
    ck_assert(strstr(err.msg, "no model.safetensors") != NULL);
    ck_assert_int_eq(hf_model_open("/nonexistent/dir", &m, &err), MW_E_FORMAT);
    free(sp);
    free(dir);
}
END_TEST


// --- inspect ---------------------------------------------------------------------------

struct buf {
    char *p;
    size_t n;
};
static void emit_buf(void *ud, const char *s)
{
    struct buf *b = ud;
    size_t k = strlen(s);
    b->p = realloc(b->p, b->n + k + 1);
    memcpy(b->p + b->n, s, k + 1);
    b->n += k;
}

START_TEST(test_inspect)
{
    char *dir = make_tmpdir("hf");
    make_model(dir, V_OK);
    ck_assert(hf_inspect_accepts(dir));
    char *sp = path_in(dir, "model.safetensors");
    ck_assert(hf_inspect_accepts(sp));
    ck_assert(!hf_inspect_accepts("x.gguf"));
    struct mw_err err;
    mw_err_clear(&err);
    for (int json = 0; json < 2; json++) {
        for (int k = 0; k < 2; k++) {
            struct buf b = {NULL, 0};
            ck_assert_int_eq(hf_inspect(k ? sp : dir, json, emit_buf, &b, &err), MW_OK);
            ck_assert(strstr(b.p, "model.layers.0.self_attn.q_proj.weight") != NULL);
            if (k == 0) ck_assert(strstr(b.p, "blk.0.attn_q.weight") != NULL);
            if (json) {
                cJSON *j = cJSON_Parse(b.p);
                ck_assert_msg(j != NULL, "inspect --json output does not parse:\n%s", b.p);
                cJSON_Delete(j);
            }
            free(b.p);
        }
    }
    /* a checkpoint that cannot be converted is still shown, with the error */
    make_model(dir, V_WRONG_SHAPE);
    struct buf b = {NULL, 0};
    ck_assert_int_eq(hf_inspect(dir, false, emit_buf, &b, &err), MW_E_FORMAT);
    ck_assert(strstr(b.p, "k_proj") != NULL);
    free(b.p);
    free(sp);
    free(dir);
}
END_TEST

static Suite *hf_suite(void)
{
    Suite *s = suite_create("hf");
    TCase *tc = tcase_create("safetensors");
    tcase_add_test(tc, test_st_valid);
    tcase_add_loop_test(tc, test_st_corrupt, 0, N_ST_CASES);
    tcase_add_test(tc, test_st_key_offset);
    suite_add_tcase(s, tc);
    tc = tcase_create("mapping");
    tcase_add_test(tc, test_permutation);
    tcase_add_test(tc, test_threads_identical);
    tcase_add_test(tc, test_qwen2_mapping);
    tcase_add_loop_test(tc, test_plan_errors, 0, N_PLAN_CASES);
    tcase_add_test(tc, test_plan_ok_variants);
    tcase_add_test(tc, test_sharded_dir);
    tcase_add_test(tc, test_dir_errors);
    tcase_add_test(tc, test_inspect);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    return run_suite(hf_suite());
}
