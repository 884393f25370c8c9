/*
 * hf/hf_tok_spm.c — SentencePiece tokenizer.model (a protobuf ModelProto)
 * -> "llama" vocabulary (docs/formats.md §7.3).
 *
 * The protobuf wire format is parsed here directly: every read is bounded by
 * the end of the enclosing message, varints are at most 10 bytes and must
 * fit 64 bits, lengths are checked against the bytes that remain, groups and
 * wire types 6/7 are rejected, unknown fields of the valid wire types are
 * skipped. Error offsets are absolute byte offsets in the file.
 */
#include "hf/hf_tok_int.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { WT_VARINT = 0, WT_I64 = 1, WT_LEN = 2, WT_SGROUP = 3, WT_EGROUP = 4, WT_I32 = 5 };

/* SentencePiece piece types (sentencepiece_model.proto). */
enum { SP_NORMAL = 1, SP_UNKNOWN = 2, SP_CONTROL = 3, SP_USER_DEFINED = 4, SP_UNUSED = 5,
       SP_BYTE = 6 };

struct pb {
    const uint8_t *base;
    uint64_t pos;          /* absolute offset */
    const char *ctx;       /* "ModelProto", "piece", "trainer_spec", ... */
    uint64_t ctx_index;    /* piece index for "piece", else UINT64_MAX */
    struct mw_err *err;
};

static void pb_where(struct pb *r)
{
    if (r->ctx_index != UINT64_MAX)
        mw_err_set_where(r->err, "%s %llu", r->ctx, (unsigned long long)r->ctx_index);
    else
        mw_err_set_where(r->err, "%s", r->ctx);
}

#define PB_FAIL(r, code, off, ...) (pb_where(r), MW_FAIL((r)->err, (code), (off), __VA_ARGS__))

static enum mw_status pb_varint(struct pb *r, uint64_t end, uint64_t *v, const char *what)
{
    const uint64_t start = r->pos;
    uint64_t x = 0;
    for (unsigned i = 0; i < 10; i++) {
        if (r->pos >= end)
            return PB_FAIL(r, MW_E_TRUNC, start,
                           "varint (%s) runs past the end of its message at offset %llu", what,
                           (unsigned long long)end);
        const uint8_t b = r->base[r->pos++];
        if (i == 9 && b > 1)
            return PB_FAIL(r, MW_E_FORMAT, start, "varint (%s) overflows 64 bits", what);
        x |= (uint64_t)(b & 0x7f) << (7 * i);
        if (!(b & 0x80)) {
            *v = x;
            return MW_OK;
        }
    }
    return PB_FAIL(r, MW_E_FORMAT, start, "varint (%s) longer than 10 bytes", what);
}

/* Read a field key. */
static enum mw_status pb_key(struct pb *r, uint64_t end, uint32_t *field, unsigned *wire,
                             uint64_t *key_off)
{
    *key_off = r->pos;
    uint64_t k;
    enum mw_status s = pb_varint(r, end, &k, "field key");
    if (s) return s;
    const uint64_t f = k >> 3;
    *wire = (unsigned)(k & 7);
    if (f == 0 || f > 536870911u)
        return PB_FAIL(r, MW_E_FORMAT, *key_off, "invalid field number %llu",
                       (unsigned long long)f);
    if (*wire == WT_SGROUP || *wire == WT_EGROUP)
        return PB_FAIL(r, MW_E_FORMAT, *key_off,
                       "field %llu uses a group (wire type %u), which is not supported",
                       (unsigned long long)f, *wire);
    if (*wire > WT_I32)
        return PB_FAIL(r, MW_E_FORMAT, *key_off, "field %llu has invalid wire type %u",
                       (unsigned long long)f, *wire);
    *field = (uint32_t)f;
    return MW_OK;
}

/* Read a length prefix and return the [start, stop) of the payload. */
static enum mw_status pb_len(struct pb *r, uint64_t end, uint64_t *start, uint64_t *stop)
{
    const uint64_t off = r->pos;
    uint64_t n;
    enum mw_status s = pb_varint(r, end, &n, "length");
    if (s) return s;
    if (n > end - r->pos)
        return PB_FAIL(r, MW_E_TRUNC, off,
                       "length %llu exceeds the %llu bytes left in the enclosing message",
                       (unsigned long long)n, (unsigned long long)(end - r->pos));
    *start = r->pos;
    *stop = r->pos + n;
    r->pos = *stop;
    return MW_OK;
}

static enum mw_status pb_fixed(struct pb *r, uint64_t end, unsigned nbytes, const uint8_t **p,
                               const char *what)
{
    if (nbytes > end - r->pos)
        return PB_FAIL(r, MW_E_TRUNC, r->pos, "%s needs %u bytes, %llu left in the message",
                       what, nbytes, (unsigned long long)(end - r->pos));
    *p = r->base + r->pos;
    r->pos += nbytes;
    return MW_OK;
}

static enum mw_status pb_skip(struct pb *r, uint64_t end, unsigned wire)
{
    uint64_t a = 0, b = 0;
    const uint8_t *p;
    switch (wire) {
    case WT_VARINT: return pb_varint(r, end, &a, "unknown field");
    case WT_I64: return pb_fixed(r, end, 8, &p, "unknown 64-bit field");
    case WT_LEN: return pb_len(r, end, &a, &b);
    case WT_I32: return pb_fixed(r, end, 4, &p, "unknown 32-bit field");
    default: return PB_FAIL(r, MW_E_FORMAT, r->pos, "invalid wire type %u", wire);
    }
}

static enum mw_status pb_want(struct pb *r, uint64_t key_off, uint32_t field, unsigned wire,
                              unsigned want, const char *fname)
{
    if (wire == want) return MW_OK;
    return PB_FAIL(r, MW_E_FORMAT, key_off, "field %u (%s) has wire type %u, expected %u", field,
                   fname, wire, want);
}

/* int32 fields are varints of the sign-extended 64-bit value. */
static int64_t pb_int32(uint64_t v) { return (int64_t)(int32_t)(uint32_t)v; }

struct piece {
    uint64_t off;          /* where the SentencePiece message starts */
    const uint8_t *text;
    uint64_t text_len;
    float score;
    unsigned type;
};

static enum mw_status parse_piece(struct pb *r, uint64_t end, struct piece *pc)
{
    bool have_text = false;
    pc->text = NULL;
    pc->text_len = 0;
    pc->score = 0.0f;
    pc->type = SP_NORMAL;
    while (r->pos < end) {
        uint32_t f = 0;
        unsigned w = 0;
        uint64_t ko = 0;
        enum mw_status s = pb_key(r, end, &f, &w, &ko);
        if (s) return s;
        if (f == 1) {
            if ((s = pb_want(r, ko, f, w, WT_LEN, "piece"))) return s;
            uint64_t a = 0, b = 0;
            if ((s = pb_len(r, end, &a, &b))) return s;
            pc->text = r->base + a;
            pc->text_len = b - a;
            have_text = true;
        } else if (f == 2) {
            if ((s = pb_want(r, ko, f, w, WT_I32, "score"))) return s;
            const uint8_t *p = NULL;
            if ((s = pb_fixed(r, end, 4, &p, "score"))) return s;
            const uint32_t u = mw_le32(p);
            memcpy(&pc->score, &u, 4);
        } else if (f == 3) {
            if ((s = pb_want(r, ko, f, w, WT_VARINT, "type"))) return s;
            uint64_t v;
            if ((s = pb_varint(r, end, &v, "type"))) return s;
            if (v < SP_NORMAL || v > SP_BYTE)
                return PB_FAIL(r, MW_E_FORMAT, ko, "piece type %llu is not a SentencePiece type "
                               "(1..6)", (unsigned long long)v);
            pc->type = (unsigned)v;
        } else if ((s = pb_skip(r, end, w))) {
            return s;
        }
    }
    if (!have_text || pc->text_len == 0)
        return PB_FAIL(r, MW_E_FORMAT, pc->off, "piece has no text (SentencePiece requires a "
                       "non-empty piece)");
    if (pc->text_len > UINT32_MAX)
        return PB_FAIL(r, MW_E_FORMAT, pc->off, "piece text too long");
    if (pc->type == SP_BYTE) {
        static const char hex[] = "0123456789ABCDEF";
        const uint8_t *x = pc->text;
        if (pc->text_len != 6 || memcmp(x, "<0x", 3) != 0 || x[5] != '>' ||
            !memchr(hex, x[3], 16) || !memchr(hex, x[4], 16))
            return PB_FAIL(r, MW_E_FORMAT, pc->off, "BYTE piece is not spelled <0xNN>");
    }
    return MW_OK;
}

struct spm_info {
    int64_t unk_id, bos_id, eos_id, pad_id;
    int add_dummy_prefix; /* -1 absent */
};

static enum mw_status parse_trainer(struct pb *r, uint64_t end, struct spm_info *si)
{
    while (r->pos < end) {
        uint32_t f = 0;
        unsigned w = 0;
        uint64_t ko = 0, v = 0;
        enum mw_status s = pb_key(r, end, &f, &w, &ko);
        if (s) return s;
        int64_t *dst = NULL;
        const char *fname = NULL;
        switch (f) {
        case 40: dst = &si->unk_id; fname = "unk_id"; break;
        case 41: dst = &si->bos_id; fname = "bos_id"; break;
        case 42: dst = &si->eos_id; fname = "eos_id"; break;
        case 43: dst = &si->pad_id; fname = "pad_id"; break;
        default: break;
        }
        if (dst) {
            if ((s = pb_want(r, ko, f, w, WT_VARINT, fname))) return s;
            if ((s = pb_varint(r, end, &v, fname))) return s;
            *dst = pb_int32(v);
        } else if ((s = pb_skip(r, end, w))) {
            return s;
        }
    }
    return MW_OK;
}

static enum mw_status parse_normalizer(struct pb *r, uint64_t end, struct spm_info *si)
{
    while (r->pos < end) {
        uint32_t f = 0;
        unsigned w = 0;
        uint64_t ko = 0, v = 0;
        enum mw_status s = pb_key(r, end, &f, &w, &ko);
        if (s) return s;
        if (f == 3) {
            if ((s = pb_want(r, ko, f, w, WT_VARINT, "add_dummy_prefix"))) return s;
            if ((s = pb_varint(r, end, &v, "add_dummy_prefix"))) return s;
            si->add_dummy_prefix = v != 0;
        } else if ((s = pb_skip(r, end, w))) {
            return s;
        }
    }
    return MW_OK;
}

enum mw_status hf__spm_build(const uint8_t *buf, uint64_t n, const char *name, int64_t n_vocab,
                             struct hf_tok **out, struct mw_err *err)
{
    *out = NULL;
    mw_err_set_path(err, name);
    if (n_vocab > (int64_t)HF_TOK_MAX_VOCAB)
        return MW_FAIL(err, MW_E_VALUE, MW_ERR_OFF_NONE, "vocab_size %lld exceeds the limit %u",
                       (long long)n_vocab, HF_TOK_MAX_VOCAB);
    struct pb r = {.base = buf, .pos = 0, .ctx = "ModelProto", .ctx_index = UINT64_MAX,
                   .err = err};
    if (n == 0 || buf == NULL)
        return PB_FAIL(&r, MW_E_FORMAT, 0, "empty file: not a SentencePiece model");

    /* Pass 1: validate the top level, count the pieces, read the specs. */
    struct spm_info si = {.unk_id = 0, .bos_id = 1, .eos_id = 2, .pad_id = -1,
                          .add_dummy_prefix = -1};
    uint64_t n_pieces = 0;
    enum mw_status s;
    while (r.pos < n) {
        uint32_t f = 0;
        unsigned w = 0;
        uint64_t ko = 0, a = 0, b = 0;
        if ((s = pb_key(&r, n, &f, &w, &ko))) return s;
        if (f == 1 || f == 2 || f == 3) {
            static const char *const names[] = {"", "pieces", "trainer_spec", "normalizer_spec"};
            if ((s = pb_want(&r, ko, f, w, WT_LEN, names[f]))) return s;
            if ((s = pb_len(&r, n, &a, &b))) return s;
            struct pb sub = r;
            sub.pos = a;
            if (f == 1) {
                struct piece pc = {.off = ko};
                sub.ctx = "piece";
                sub.ctx_index = n_pieces;
                if ((s = parse_piece(&sub, b, &pc))) return s;
                n_pieces++;
            } else if (f == 2) {
                sub.ctx = "trainer_spec";
                if ((s = parse_trainer(&sub, b, &si))) return s;
            } else {
                sub.ctx = "normalizer_spec";
                if ((s = parse_normalizer(&sub, b, &si))) return s;
            }
        } else if ((s = pb_skip(&r, n, w))) {
            return s;
        }
    }
    if (n_pieces == 0)
        return PB_FAIL(&r, MW_E_FORMAT, 0, "no pieces: not a SentencePiece model");
    if (n_pieces > HF_TOK_MAX_VOCAB)
        return PB_FAIL(&r, MW_E_FORMAT, 0, "%llu pieces exceed the limit %u",
                       (unsigned long long)n_pieces, HF_TOK_MAX_VOCAB);
    const uint32_t n_tok = n_vocab >= 0 ? (uint32_t)n_vocab : (uint32_t)n_pieces;
    if (n_tok == 0)
        return MW_FAIL(err, MW_E_VALUE, MW_ERR_OFF_NONE, "vocab_size is 0");

    struct hf_tok *t = hf__tok_new(HF_TOK_SPM);
    if (!t) return MW_FAIL(err, MW_E_NOMEM, MW_ERR_OFF_NONE, "out of memory");
    if ((s = hf__tok_alloc(t, n_tok, true, err))) goto fail;

    /* Pass 2: copy the pieces (already validated). */
    r.pos = 0;
    r.ctx = "ModelProto";
    r.ctx_index = UINT64_MAX;
    uint64_t idx = 0, n_unk = 0, first_unk = 0;
    while (r.pos < n) {
        uint32_t f = 0;
        unsigned w = 0;
        uint64_t ko = 0, a = 0, b = 0;
        if ((s = pb_key(&r, n, &f, &w, &ko))) goto fail;
        if (f != 1) {
            if ((s = pb_skip(&r, n, w))) goto fail;
            continue;
        }
        if ((s = pb_len(&r, n, &a, &b))) goto fail;
        struct pb sub = r;
        sub.pos = a;
        sub.ctx = "piece";
        sub.ctx_index = idx;
        struct piece pc = {.off = ko};
        if ((s = parse_piece(&sub, b, &pc))) goto fail;
        if (pc.type == SP_UNKNOWN) {
            if (n_unk++ == 0) first_unk = idx;
            if (n_unk > 1) {
                s = PB_FAIL(&sub, MW_E_FORMAT, ko, "second UNKNOWN piece (the first is piece "
                            "%llu)", (unsigned long long)first_unk);
                goto fail;
            }
        }
        if (idx < n_tok) {
            int32_t ty;
            switch (pc.type) {
            case SP_UNKNOWN: ty = 2; break;
            case SP_CONTROL: ty = 3; break;
            case SP_UNUSED: ty = 5; break;
            case SP_BYTE: ty = 6; break;
            default: ty = 1; break; /* NORMAL and USER_DEFINED (docs/formats.md §7.3) */
            }
            if ((s = hf__tok_set(t, (uint32_t)idx, (const char *)pc.text, (size_t)pc.text_len,
                                 err)))
                goto fail;
            t->scores[idx] = pc.score;
            t->types[idx] = ty;
        }
        idx++;
    }
    if (n_unk == 0) {
        s = PB_FAIL(&r, MW_E_FORMAT, MW_ERR_OFF_NONE,
                    "no UNKNOWN piece (SentencePiece requires one)");
        goto fail;
    }
    if ((s = hf__tok_fill_gaps(t, err))) goto fail;
    snprintf(t->pre, sizeof t->pre, "%s", "default");
    t->spm_unk = si.unk_id;
    t->spm_bos = si.bos_id;
    t->spm_eos = si.eos_id;
    t->spm_pad = si.pad_id;
    /* llama.cpp assumes add_space_prefix = true for SPM; say so only when
     * the model disagrees (convert_hf_to_gguf.py never writes it for llama). */
    t->add_space_prefix = si.add_dummy_prefix == 0 ? 0 : -1;
    *out = t;
    return MW_OK;
fail:
    hf_tok_free(t);
    return s;
}

enum mw_status hf_tok_parse_spm(const void *buf, size_t n, const char *name, int64_t n_vocab,
                                struct hf_tok **out, struct mw_err *err)
{
    if (!out) return MW_FAIL(err, MW_E_USAGE, MW_ERR_OFF_NONE, "out is NULL");
    *out = NULL;
    if (!buf && n) return MW_FAIL(err, MW_E_USAGE, MW_ERR_OFF_NONE, "buf is NULL");
    struct hf_tok *t = NULL;
    enum mw_status s = hf__spm_build(buf, n, name ? name : "tokenizer.model", n_vocab, &t, err);
    if (s) return s;
    if ((s = hf__tok_set_source(t, name, err))) {
        hf_tok_free(t);
        return s;
    }
    mw_err_clear(err);
    *out = t;
    return MW_OK;
}
