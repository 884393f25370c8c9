/*
 * hf/hf_tok.h — the tokenizer part of the hf module: read a Hugging Face
 * checkpoint's tokenizer and write the tokenizer.* GGUF keys llama.cpp reads
 * (docs/formats.md §7). Part of the hf module's public API (hf/hf.h may include
 * this header).
 *
 * Which tokenizer (hf_tok_load):
 *   1. tokenizer.json whose model is a byte-level BPE (model.type "BPE",
 *      byte_fallback not true, and a "ByteLevel" decoder or pre-tokenizer)
 *      -> tokenizer.ggml.model "gpt2" (tokens by id, gaps "[PAD<i>]" type 5,
 *      token types, merges, tokenizer.ggml.pre; no scores).
 *   2. else tokenizer.model (SentencePiece ModelProto, parsed here with
 *      bounds checks) -> "llama" (tokens, scores, token types, pre
 *      "default"); not for Gemma 4 (config.json model_type or
 *      text_config.model_type starting "gemma4") when tokenizer.json is a
 *      SentencePiece-style BPE: llama.cpp's Gemma4Model reads only that.
 *   3. else tokenizer.json whose model is a SentencePiece-style BPE (Gemma 3,
 *      which ships no tokenizer.model: model.type "BPE", byte_fallback true,
 *      normalizer Replace " " -> U+2581, pre-tokenizer absent or a Split on
 *      " " (a no-op once the normalizer has replaced every space), decoder
 *      Replace/ByteFallback/Fuse) -> "gpt2" with tokenizer.ggml.pre
 *      "granite-embed-multi-311m", as llama.cpp's converter writes it
 *      (Gemma3Model.set_vocab -> _set_vocab_gpt2; the pre-tokenizer hash of
 *      Gemma 3's tokenizer is that of granite-embedding-311m-multilingual-r2,
 *      which uses it); llama.cpp then runs its gemma4 pre-tokenizer: BPE over
 *      U+2581-escaped text cut at newline runs, <0xNN> byte fallback. Tokens
 *      by id (gaps "[PAD<i>]" type 5 up to vocab_size), no scores, merges,
 *      types as get_vocab_base gives them (added tokens 3 if special or
 *      looking special, else 4; others 1) with two departures that keep the
 *      Hugging Face tokenizer's ids and text: <0xNN> pieces are type 6 (as 1,
 *      llama.cpp prints "<0xE2>" instead of the byte), and the added tokens
 *      made of U+2581 runs keep their text and type 1 (llama.cpp's converter
 *      spells them with spaces as user-defined tokens: a literal U+2581 run
 *      then no longer reaches them and falls back to bytes). Added tokens
 *      with ids >= vocab_size are dropped (Gemma 3 1B: <image_soft_token>
 *      262144 = vocab_size; llama.cpp's converter fails its assert there).
 *      Gemma 4 (hf_tok_write_gguf with model type "gemma4") is written as
 *      llama.cpp's Gemma4Model writes it through gguf-py's LlamaHfVocab:
 *      model "gemma4", no pre, scores -1000, types 6 for <0xNN>, 3 for the
 *      tokens tokenizer_config.json names (bos/eos/unk/sep/pad/cls/
 *      mask_token, additional_special_tokens), 4 for the channel and tool
 *      tokens, 1 otherwise; add_space_prefix false, add_bos true.
 *   4. else MW_E_UNSUPPORTED (a tokenizer.json of another kind and no
 *      tokenizer.model) or MW_E_IO (neither file).
 *   A tokenizer.json that is present is always parsed (for added_tokens and
 *   post_processor, as llama.cpp's converter does), so a malformed one is an
 *   error even on the SentencePiece path.
 *
 * Side files, read the way llama.cpp's convert_hf_to_gguf.py / gguf-py
 * SpecialVocab read them (all optional; malformed -> MW_E_FORMAT):
 *   config.json             vocab_size, else text_config.vocab_size (token
 *                           count, see also hf_tok_load_n: pieces/ids beyond it are
 *                           dropped, missing ids up to it become "[PAD<i>]"
 *                           type 5 (SentencePiece: score -10000)); and
 *                           bos/eos/unk/sep/pad/cls/mask_token_id (integers).
 *   tokenizer_config.json   add_bos_token / add_eos_token (bool); bos/eos/
 *                           unk/sep/pad/cls/mask_token names (string or
 *                           {"content"}), resolved to ids through
 *                           tokenizer.json added_tokens (first match);
 *                           chat_template (string, or a list of {name,
 *                           template}); added_tokens_decoder (SentencePiece
 *                           path: score -1000, type 3 if "special" or the
 *                           text looks special, else 4).
 *   added_tokens.json       (SentencePiece path) text -> id, score -1000,
 *                           type 4.
 *   chat_template.jinja / chat_template.json  template when
 *                           tokenizer_config.json has none.
 *   tokenizer.json post_processor  TemplateProcessing / RobertaProcessing
 *                           decide add_bos / add_eos / add_sep (and eot/eom
 *                           ids) as in gguf-py.
 *   Precedence for ids: tokenizer_config.json names first, then config.json
 *   ids. Only when neither gives bos, eos or unk (what llama.cpp's converter
 *   leaves out), memwall falls back to generation_config.json ids, then
 *   special_tokens_map.json names (looked up among the tokens), then (for
 *   SentencePiece) the model's trainer spec — and writes such a fallback id
 *   only if it differs from the default llama.cpp assumes when the key is
 *   missing (SentencePiece: bos 1, eos 2, unk 0; BPE: bos 11, eos 11, no unk),
 *   so files llama.cpp converts fine come out with the same keys. Ids outside
 *   [0, n_vocab) are dropped (llama.cpp ignores them with a warning; gguf-py
 *   would raise on a negative one).
 *
 * tokenizer.ggml.pre for "gpt2" is chosen from the pre-tokenizer of
 * tokenizer.json (no hashing of sample encodings): the Split regex found in
 * pre_tokenizer (top-level Split or inside a Sequence) must equal, byte for
 * byte, one of the known patterns:
 *   Llama 3 pattern ("...|\p{N}{1,3}|...", "(?i:'s|...)" or spelled out)
 *       -> "llama-bpe"
 *   Qwen2 pattern   ("...|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|...")  -> "qwen2"
 *   no Split, ByteLevel pre-tokenizer with use_regex true (GPT-2) -> "gpt-2"
 * Anything else -> MW_E_UNSUPPORTED naming the regex: writing a wrong pre
 * name makes llama.cpp tokenize subtly differently, so we refuse to guess.
 *
 * Errors are MW_E_FORMAT for malformed files (MW_E_TRUNC when a protobuf
 * length, varint or fixed field of tokenizer.model runs past its message or
 * the file), naming the file (err->path) and the place: a byte offset for
 * tokenizer.model (err->off; err->where says "piece 12", "trainer_spec",
 * ...), a JSON path such as model.merges[12] or added_tokens[3].id for JSON
 * files (err->where; a JSON syntax error gives the byte offset in err->off
 * and "line L column C" in err->where). MW_E_UNSUPPORTED for a tokenizer
 * memwall cannot represent faithfully (not byte-level BPE, unknown
 * pre-tokenizer regex, ByteLevel add_prefix_space, a lowercasing
 * normalizer, any normalizer other than one of NFC/NFD/NFKC/NFKD for a
 * byte-level BPE or the Replace " " -> U+2581 for a SentencePiece-style one:
 * err->where names its JSON path, e.g. normalizer.normalizers[1]). MW_E_VALUE for contradictions (an id >= config.json
 * vocab_size, duplicate ids), MW_E_NOMEM, MW_E_IO. Never crashes on any
 * input; every allocation is bounded by the input size or by
 * HF_TOK_MAX_VOCAB.
 *
 * Library code: prints nothing, no global state. Thread-compatible (one
 * struct hf_tok per thread, or share it read-only).
 */
#ifndef MW_HF_TOK_H
#define MW_HF_TOK_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/mw.h"
#include "gguf/gguf.h"

/* Largest token count accepted (config.json vocab_size or highest id + 1). */
#define HF_TOK_MAX_VOCAB (1u << 23)
/* Largest tokenizer file read (tokenizer.json / tokenizer.model / side
 * JSON); real ones are below 40 MB. cJSON needs at most ~32x a file's size. */
#define HF_TOK_MAX_FILE_BYTES ((uint64_t)128 << 20)

struct hf_tok;

enum hf_tok_kind {
    HF_TOK_SPM = 1, /* SentencePiece -> tokenizer.ggml.model "llama" */
    HF_TOK_BPE = 2, /* byte-level BPE -> tokenizer.ggml.model "gpt2" */
    HF_TOK_SPMBPE = 3 /* SentencePiece-style BPE from tokenizer.json (Gemma 3)
                       * -> "gpt2", pre "granite-embed-multi-311m" (above) */
};

/* Special token kinds, in gguf-py's order. */
enum hf_tok_special {
    HF_TOK_BOS = 0,
    HF_TOK_EOS,
    HF_TOK_UNK,
    HF_TOK_SEP,
    HF_TOK_PAD,
    HF_TOK_CLS,
    HF_TOK_MASK,
    HF_TOK_EOT,
    HF_TOK_EOM,
    HF_TOK_SPECIAL_COUNT
};

/* Load the tokenizer of the checkpoint directory hf_dir (see the top of this
 * file). On success *out owns everything; release with hf_tok_free. */
enum mw_status hf_tok_load(const char *hf_dir, struct hf_tok **out, struct mw_err *err);
/* As hf_tok_load, with the token count given by the caller (n_vocab > 0:
 * e.g. the embedding's rows when config.json leaves vocab_size to the
 * family's defaults, as Gemma3ForConditionalGeneration's text_config does:
 * 262208) instead of config.json's vocab_size (or text_config.vocab_size);
 * 0 or -1: as hf_tok_load. */
enum mw_status hf_tok_load_n(const char *hf_dir, int64_t n_vocab, struct hf_tok **out,
                             struct mw_err *err);

/* Parse one file from memory, without side files (for fuzzers and tests).
 * buf is borrowed for the call only; name appears in error messages.
 * n_vocab: the token count to produce (as config.json vocab_size), or -1 for
 * "as many as the file defines". */
enum mw_status hf_tok_parse_spm(const void *buf, size_t n, const char *name, int64_t n_vocab,
                                struct hf_tok **out, struct mw_err *err);
/* tokenizer.json; must be a byte-level or a SentencePiece-style BPE (else
 * MW_E_UNSUPPORTED). Special
 * ids / add_bos come from its added_tokens and post_processor only. */
enum mw_status hf_tok_parse_json(const void *buf, size_t n, const char *name, int64_t n_vocab,
                                 struct hf_tok **out, struct mw_err *err);

void hf_tok_free(struct hf_tok *t); /* NULL-safe */

/* Add the tokenizer KVs to w, in llama.cpp's order: tokenizer.ggml.model,
 * .pre, .tokens, [.scores], .token_type, [.merges], special ids (u32),
 * add_* flags (bool), [tokenizer.chat_template.<name>...,
 * tokenizer.chat_templates], [tokenizer.chat_template],
 * [.add_space_prefix] (SentencePiece models with add_dummy_prefix false). Key
 * types follow docs/formats.md §7.1 exactly. hf_model_type is config.json
 * model_type ("llama", "mistral", "qwen2", ...; NULL allowed) for
 * family-specific adjustments: a name starting "gemma" (gemma, gemma2,
 * gemma3, gemma3_text) writes add_space_prefix false for a SentencePiece
 * model, as llama.cpp's Gemma converters do; "gemma4" writes a
 * SentencePiece-style tokenizer.json's vocabulary as model "gemma4" (case 3
 * above); nothing else changes.
 * Errors: whatever the writer returns (MW_E_USAGE for a duplicate key,
 * MW_E_NOMEM). */
enum mw_status hf_tok_write_gguf(const struct hf_tok *t, struct gguf_writer *w,
                                 const char *hf_model_type, struct mw_err *err);

/* --- accessors (t must be non-NULL) --- */
enum hf_tok_kind hf_tok_kind(const struct hf_tok *t);
const char *hf_tok_model(const struct hf_tok *t); /* "llama" / "gpt2" */
const char *hf_tok_pre(const struct hf_tok *t);   /* "default", "qwen2", ... */
/* The Unicode normalization tokenizer.json asks for before tokenizing:
 * "NFC", "NFD", "NFKC", "NFKD", or "" (none). Written as the string key
 * memwall.tokenizer.normalizer (llama.cpp has no such key and ignores it). */
const char *hf_tok_normalizer(const struct hf_tok *t);
/* File the vocabulary came from ("" for the memory parsers' name if none). */
const char *hf_tok_source(const struct hf_tok *t);
/* Token count = tokenizer.ggml.tokens length; the converter checks it against
 * config.json vocab_size and the embedding rows. */
uint32_t hf_tok_n_vocab(const struct hf_tok *t);
uint32_t hf_tok_n_merges(const struct hf_tok *t);
/* Special id found, or -1. All are written except HF_TOK_CLS (gguf-py has
 * no GGUF key for it and skips it). */
int64_t hf_tok_special_id(const struct hf_tok *t, enum hf_tok_special kind);
static inline int64_t hf_tok_bos_id(const struct hf_tok *t)
{
    return hf_tok_special_id(t, HF_TOK_BOS);
}
static inline int64_t hf_tok_eos_id(const struct hf_tok *t)
{
    return hf_tok_special_id(t, HF_TOK_EOS);
}
/* add_bos_token / add_eos_token: 1 / 0 when the key will be written, -1 if
 * not (llama.cpp then uses its default). */
int hf_tok_add_bos(const struct hf_tok *t);
int hf_tok_add_eos(const struct hf_tok *t);
/* Token i (< n_vocab): its bytes (NUL-terminated; *len excludes the NUL,
 * len may be NULL), GGUF token type (1..6) and score (0 for "gpt2").
 * Views valid until hf_tok_free. NULL / 0 if i is out of range. */
const char *hf_tok_token(const struct hf_tok *t, uint32_t i, size_t *len);
int32_t hf_tok_token_type(const struct hf_tok *t, uint32_t i);
float hf_tok_score(const struct hf_tok *t, uint32_t i);
/* Merge i (< n_merges) as written: "left right". NULL if out of range. */
const char *hf_tok_merge(const struct hf_tok *t, uint32_t i, size_t *len);
/* tokenizer.chat_template, or NULL. */
const char *hf_tok_chat_template(const struct hf_tok *t);

#endif /* MW_HF_TOK_H */
