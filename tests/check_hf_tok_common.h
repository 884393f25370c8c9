/*
 * tests/check_hf_tok_common.h — helpers shared by the hf/ tokenizer suites
 * (check_hf_tok_spm.c, check_hf_tok_json.c): a tokenizer's KVs written to
 * a GGUF file and opened, and the tokenizer.* KVs of two files compared key
 * by key (name, type, value, order). Each asserts (ck_assert). Header-only,
 * static: one copy per test binary.
 */
#ifndef MW_TESTS_CHECK_HF_TOK_COMMON_H
#define MW_TESTS_CHECK_HF_TOK_COMMON_H

#include <check.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "gguf/gguf.h"
#include "hf/hf_tok.h"

#include "check_common.h"

/* Write t's KVs into a GGUF file at path and open it. */
static inline struct gguf_file *tok_to_gguf(const struct hf_tok *t, const char *path)
{
    struct mw_err err;
    mw_err_clear(&err);
    struct gguf_writer *w = NULL;
    ck_assert_int_eq(gguf_writer_init(&w, &err), MW_OK);
    ck_assert_int_eq(hf_tok_write_gguf(t, w, "llama", &err), MW_OK);
    ck_assert_int_eq(gguf_writer_open(w, path, &err), MW_OK);
    ck_assert_int_eq(gguf_writer_finish(w, &err), MW_OK);
    gguf_writer_free(w);
    struct gguf_file *f = NULL;
    const enum mw_status s = gguf_open(path, 0, &f, &err);
    char buf[1024];
    ck_assert_msg(s == MW_OK, "%s", mw_err_format(&err, buf, sizeof buf));
    return f;
}

/* Do the two values hold the same type and bytes (arrays element-wise)? */
static inline bool value_eq(const struct gguf_value *a, const struct gguf_value *b, char *why,
                            size_t cap)
{
    if (a->type != b->type) {
        snprintf(why, cap, "type %s vs %s", gguf_vtype_name(a->type), gguf_vtype_name(b->type));
        return false;
    }
    if (a->type != GGUF_VT_ARRAY) {
        if (a->nbytes != b->nbytes || memcmp(a->data, b->data, a->nbytes) != 0) {
            snprintf(why, cap, "value differs");
            return false;
        }
        return true;
    }
    if (a->elem_type != b->elem_type || a->n != b->n) {
        snprintf(why, cap, "array of %llu %s vs %llu %s", (unsigned long long)a->n,
                 gguf_vtype_name(a->elem_type), (unsigned long long)b->n,
                 gguf_vtype_name(b->elem_type));
        return false;
    }
    for (uint64_t j = 0; j < a->n; j++) {
        struct gguf_value ea, eb;
        if (!gguf_value_elem(a, j, &ea) || !gguf_value_elem(b, j, &eb) ||
            ea.nbytes != eb.nbytes || memcmp(ea.data, eb.data, ea.nbytes) != 0) {
            snprintf(why, cap, "element %llu differs", (unsigned long long)j);
            return false;
        }
    }
    return true;
}

static inline bool is_tok_key(const char *k) { return strncmp(k, "tokenizer.", 10) == 0; }

/* Every tokenizer.* KV of a equals the one in b, in the same order, and b
 * has no other tokenizer.* KVs. */
static inline void assert_tok_kvs_equal(const struct gguf_file *a, const struct gguf_file *b)
{
    uint64_t ib = 0;
    const uint64_t nb = gguf_kv_count(b);
    for (uint64_t i = 0; i < gguf_kv_count(a); i++) {
        const char *key = gguf_kv_key(a, i);
        if (!is_tok_key(key)) continue;
        while (ib < nb && !is_tok_key(gguf_kv_key(b, ib))) ib++;
        ck_assert_msg(ib < nb, "key %s missing", key);
        ck_assert_msg(strcmp(key, gguf_kv_key(b, ib)) == 0, "key order: %s vs %s", key,
                      gguf_kv_key(b, ib));
        char why[200] = "";
        ck_assert_msg(value_eq(gguf_kv_value(a, i), gguf_kv_value(b, ib), why, sizeof why),
                      "key %s: %s", key, why);
        ib++;
    }
    while (ib < nb && !is_tok_key(gguf_kv_key(b, ib))) ib++;
    ck_assert_msg(ib == nb, "extra key %s", ib < nb ? gguf_kv_key(b, ib) : "");
}

#endif
