/*
 * hf/hf_tok_int.h — internals shared by hf_tok_spm.c, hf_tok_json.c and
 * hf_tok_common.c. Only those files and tests/check_hf_tok.c include it.
 */
#ifndef MW_HF_TOK_INT_H
#define MW_HF_TOK_INT_H

#include <cjson/cJSON.h>

#include "hf/hf_tok.h"

/* Append-only byte pool; every string stored is followed by a NUL. */
struct hf__pool {
    char *buf;
    size_t len, cap;
};

/* One id-setting or add-flag record, kept in the order gguf-py inserts them
 * (the GGUF KVs are written in that order). */
struct hf__special {
    int64_t id[HF_TOK_SPECIAL_COUNT];       /* -1: not set */
    uint8_t id_order[HF_TOK_SPECIAL_COUNT]; /* kinds in insertion order */
    int n_id;
    int8_t add[HF_TOK_SPECIAL_COUNT];       /* -1 unset, 0/1 */
    uint8_t add_order[HF_TOK_SPECIAL_COUNT];
    int n_add;
};

struct hf_tok {
    enum hf_tok_kind kind;
    char pre[32];
    char *source;          /* file the vocabulary came from */
    uint32_t n_vocab;
    struct hf__pool pool;  /* token and merge strings */
    uint64_t *tok_off;     /* [n_vocab] offsets into pool; UINT64_MAX = gap */
    uint32_t *tok_len;     /* [n_vocab] */
    float *scores;         /* [n_vocab], SPM only */
    int32_t *types;        /* [n_vocab] */
    int32_t *hf_types;     /* [n_vocab] SentencePiece-style BPE only: the types
                            * gguf-py's LlamaHfVocab gives (Gemma 4), or NULL */
    uint64_t *merge_off;   /* [n_merges] */
    uint32_t *merge_len;
    uint32_t n_merges;
    struct hf__special sp;
    int add_space_prefix;  /* -1 not written, 0/1 */
    char normalizer[8];    /* "NFC", "NFD", "NFKC", "NFKD" or "" */
    /* SPM trainer spec ids (-1 = none), used only as a fallback */
    int64_t spm_unk, spm_bos, spm_eos, spm_pad;
    /* chat templates: the default one and named ones (in order) */
    char *chat_template;
    char **tmpl_name, **tmpl_text;
    uint32_t n_tmpl;
};

/* --- helpers (hf_tok_common.c) --- */
struct hf_tok *hf__tok_new(enum hf_tok_kind kind);
/* Append n bytes + NUL to the pool; *off receives the offset. */
bool hf__pool_add(struct hf__pool *p, const char *s, size_t n, uint64_t *off);
/* Allocate the per-token arrays for n tokens (all gaps, type 5). */
enum mw_status hf__tok_alloc(struct hf_tok *t, uint32_t n, bool with_scores, struct mw_err *err);
/* Set token i's text. */
enum mw_status hf__tok_set(struct hf_tok *t, uint32_t i, const char *s, size_t n,
                           struct mw_err *err);
/* Record the file the vocabulary came from (copied). */
enum mw_status hf__tok_set_source(struct hf_tok *t, const char *src, struct mw_err *err);
/* Fill gaps with "[PAD<i>]" (type 5; SPM score -10000). */
enum mw_status hf__tok_fill_gaps(struct hf_tok *t, struct mw_err *err);
/* gguf-py does_token_look_special(). */
bool hf__looks_special(const char *s);
/* Record a special id the gguf-py way: first setting wins. */
void hf__special_set_id(struct hf__special *sp, enum hf_tok_special k, int64_t id);
void hf__special_set_add(struct hf__special *sp, enum hf_tok_special k, bool v);

/* JSON text is parsed by hf__json_parse (hf_int.h, hf_json.c), with the
 * line and column of a syntax error in err->where. */
/* Write a JSON-path-friendly, escaped, truncated copy of s into dst. */
void hf__json_quote(char *dst, size_t cap, const char *s);

/* --- tokenizer.json (hf_tok_json.c) --- */
/* Is root a byte-level BPE tokenizer.json? */
bool hf__json_is_bytelevel_bpe(const cJSON *root);
/* Is root a BPE with byte_fallback (SentencePiece-style, Gemma 3)? */
bool hf__json_is_spm_bpe(const cJSON *root);
/* Build a "gpt2" (byte-level) or "gemma4" (SentencePiece-style) tokenizer
 * from a parsed tokenizer.json. */
enum mw_status hf__json_build(const cJSON *root, const char *name, int64_t n_vocab,
                              struct hf_tok **out, struct mw_err *err);
/* The token types of gguf-py's LlamaHfVocab, which llama.cpp's Gemma4Model
 * writes, into t->hf_types (SentencePiece-style BPE only): BYTE for <0xNN>,
 * CONTROL for the special tokens tokenizer_config.json (tc, may be NULL)
 * names (bos/eos/unk/sep/pad/cls/mask_token, additional_special_tokens:
 * transformers' all_special_ids), NORMAL otherwise; Gemma 4's channel and
 * tool tokens USER_DEFINED. */
enum mw_status hf__json_hf_types(struct hf_tok *t, const cJSON *tc, struct mw_err *err);
/* Is cfg (config.json) a Gemma 4's: model_type or text_config.model_type
 * starting "gemma4"? */
bool hf__json_is_gemma4(const cJSON *cfg);
/* LlamaHfVocab's scores (-1000 each) as tokenizer.ggml.scores. */
enum mw_status hf__json_write_hf_scores(const struct hf_tok *t, struct gguf_writer *w,
                                        struct mw_err *err);
/* gguf-py SpecialVocab over (tokenizer.json, tokenizer_config.json,
 * config.json); any may be NULL. Fills t->sp and the chat template (from tc
 * or, if tc lacks the key, chat_tmpl_alt). */
enum mw_status hf__special_vocab(struct hf_tok *t, const cJSON *tj, const char *tj_name,
                                 cJSON *tc, const char *tc_name, const cJSON *cfg,
                                 const cJSON *chat_tmpl_alt, struct mw_err *err);

/* --- tokenizer.model (hf_tok_spm.c) --- */
enum mw_status hf__spm_build(const uint8_t *buf, uint64_t n, const char *name, int64_t n_vocab,
                             struct hf_tok **out, struct mw_err *err);

#endif /* MW_HF_TOK_INT_H */
