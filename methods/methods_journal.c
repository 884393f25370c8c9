/*
 * methods/methods_journal.c — the work dir of resumable `memwall quant
 * --corpus` runs: the journal of finished layers, the spilled
 * tensors' file and the hidden states between layers. Layout and record
 * format: methods_int.h.
 *
 * Crash safety rests on ordering alone: a layer record is appended only
 * after everything it names is fdatasync'd (the layer's tensors in
 * tensors.bin, its output hidden states in hidden.(L % 2)); the record
 * itself is fdatasync'd before the next layer starts. Whatever a kill,
 * power loss or full disk leaves after the last intact record (a torn
 * record, tensors.bin bytes of the unfinished layer, a half-written hidden
 * file of the other parity) is cut off or overwritten on resume.
 */
#define _DEFAULT_SOURCE
#define _POSIX_C_SOURCE 200809L
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#define XXH_INLINE_ALL
#include <xxhash.h>

#include "core/mw_file.h"
#include "gguf/gguf.h"
#include "methods/methods_int.h"

#define HEADER_PAYLOAD 92u /* u32 version + the fields of struct mwj_id */
#define JOURNAL_MAX ((uint64_t)256 << 20)

// --- encoding ---------------------------------------------------------------------

struct wbuf {
    uint8_t *p;
    uint64_t n, cap;
    bool oom;
};

static void put(struct wbuf *b, const void *src, uint64_t n)
{
    if (b->oom) return;
    if (b->n + n > b->cap) {
        uint64_t c = b->cap ? b->cap * 2 : 256;
        while (c < b->n + n) c *= 2;
        uint8_t *q = c <= SIZE_MAX ? realloc(b->p, (size_t)c) : NULL;
        if (!q) {
            b->oom = true;
            return;
        }
        b->p = q;
        b->cap = c;
    }
    memcpy(b->p + b->n, src, (size_t)n);
    b->n += n;
}
static void put32(struct wbuf *b, uint32_t v)
{
    uint8_t t[4];
    mw_put_le32(t, v);
    put(b, t, 4);
}
static void put64(struct wbuf *b, uint64_t v)
{
    uint8_t t[8];
    mw_put_le64(t, v);
    put(b, t, 8);
}

/* frame the payload in b (written after 12 reserved bytes) */
static enum mw_status frame(struct wbuf *b, uint32_t kind, uint8_t **out, uint64_t *n,
                            struct mw_err *err)
{
    if (!b->oom && b->n - 12 > MWJ_MAX_PAYLOAD) {
        free(b->p);
        return MW_FAIL(err, MW_E_VALUE, MW_ERR_OFF_NONE, "journal record too large");
    }
    if (!b->oom) {
        mw_put_le32(b->p, MWJ_MAGIC);
        mw_put_le32(b->p + 4, kind);
        mw_put_le32(b->p + 8, (uint32_t)(b->n - 12));
        put64(b, XXH3_64bits(b->p, (size_t)b->n));
    }
    if (b->oom) {
        free(b->p);
        return MW_FAIL(err, MW_E_NOMEM, MW_ERR_OFF_NONE, "out of memory (journal record)");
    }
    *out = b->p;
    *n = b->n;
    return MW_OK;
}

enum mw_status mwj_encode_header(const struct mwj_id *id, uint8_t **buf, uint64_t *n,
                                 struct mw_err *err)
{
    struct wbuf b = {0};
    static const uint8_t zero[12] = {0};
    put(&b, zero, 12);
    put32(&b, MWJ_VERSION);
    put64(&b, id->model_bytes);
    put64(&b, id->model_hash);
    put64(&b, id->tensors_hash);
    put64(&b, id->n_tensors);
    put32(&b, id->n_layer);
    put32(&b, id->n_embd);
    put32(&b, id->n_samples);
    put32(&b, id->n_pos);
    put64(&b, id->samples_hash);
    put32(&b, id->method);
    put32(&b, id->damp_bits);
    put32(&b, id->gptq_block);
    put32(&b, id->act_order);
    put32(&b, id->awq_in_only);
    put64(&b, id->want_hash);
    put32(&b, id->batch_samples);
    return frame(&b, MWJ_KIND_HEADER, buf, n, err);
}

enum mw_status mwj_encode_layer(const struct mwj_layer *r, uint8_t **buf, uint64_t *n,
                                struct mw_err *err)
{
    struct wbuf b = {0};
    static const uint8_t zero[12] = {0};
    put(&b, zero, 12);
    put32(&b, r->layer);
    put32(&b, r->hidden_slot);
    put64(&b, r->tensors_end);
    put64(&b, r->hidden_bytes);
    put64(&b, r->hidden_hash);
    for (int g = 0; g < CALIB_G_COUNT; g++) {
        const struct mwj_tally *t = &r->tally[g];
        const size_t wl = strnlen(t->why, MWJ_WHY_MAX - 1);
        put32(&b, t->folded);
        put32(&b, t->no_gain);
        put32(&b, t->skipped);
        put32(&b, (uint32_t)wl);
        put(&b, t->why, wl);
    }
    put32(&b, r->x_gptq);
    put32(&b, r->x_rtn);
    put32(&b, r->x_unrouted);
    put32(&b, r->n_spill);
    for (uint32_t k = 0; k < r->n_spill; k++) {
        const struct mwj_spill *s = &r->spill[k];
        put64(&b, s->ti);
        put32(&b, s->type);
        put64(&b, s->off);
        put64(&b, s->bytes);
        put64(&b, s->hash);
    }
    return frame(&b, MWJ_KIND_LAYER, buf, n, err);
}

// --- decoding ---------------------------------------------------------------------

void mwj_scan_free(struct mwj_scan *s)
{
    if (!s) return;
    for (uint32_t i = 0; i < s->n_layers; i++) free(s->layers[i].spill);
    free(s->layers);
    s->layers = NULL;
    s->n_layers = 0;
}

static enum mw_status parse_header(const uint8_t *p, uint32_t len, struct mwj_id *id,
                                   const char *path, struct mw_err *err)
{
    struct mw_rd r = {.base = p, .size = len, .err = err};
    uint32_t ver = 0;
    enum mw_status s = mw_rd_u32(&r, &ver, "journal version");
    if (s == MW_OK && ver != MWJ_VERSION) {
        mw_err_set_path(err, path);
        return MW_FAIL(err, MW_E_FORMAT, 12,
                       "journal version %u: this memwall reads version %u (remove the work dir "
                       "to start over)",
                       ver, MWJ_VERSION);
    }
    if (s == MW_OK && len != HEADER_PAYLOAD) {
        mw_err_set_path(err, path);
        return MW_FAIL(err, MW_E_FORMAT, 8, "journal header of %u bytes, expected %u", len,
                       HEADER_PAYLOAD);
    }
    if (s == MW_OK) s = mw_rd_u64(&r, &id->model_bytes, "model bytes");
    if (s == MW_OK) s = mw_rd_u64(&r, &id->model_hash, "model hash");
    if (s == MW_OK) s = mw_rd_u64(&r, &id->tensors_hash, "tensor table hash");
    if (s == MW_OK) s = mw_rd_u64(&r, &id->n_tensors, "tensor count");
    if (s == MW_OK) s = mw_rd_u32(&r, &id->n_layer, "n_layer");
    if (s == MW_OK) s = mw_rd_u32(&r, &id->n_embd, "n_embd");
    if (s == MW_OK) s = mw_rd_u32(&r, &id->n_samples, "samples");
    if (s == MW_OK) s = mw_rd_u32(&r, &id->n_pos, "positions");
    if (s == MW_OK) s = mw_rd_u64(&r, &id->samples_hash, "samples hash");
    if (s == MW_OK) s = mw_rd_u32(&r, &id->method, "method");
    if (s == MW_OK) s = mw_rd_u32(&r, &id->damp_bits, "damp");
    if (s == MW_OK) s = mw_rd_u32(&r, &id->gptq_block, "gptq block");
    if (s == MW_OK) s = mw_rd_u32(&r, &id->act_order, "act_order");
    if (s == MW_OK) s = mw_rd_u32(&r, &id->awq_in_only, "awq_in_only");
    if (s == MW_OK) s = mw_rd_u64(&r, &id->want_hash, "types hash");
    if (s == MW_OK) s = mw_rd_u32(&r, &id->batch_samples, "batch samples");
    if (s != MW_OK) mw_err_set_path(err, path);
    return s;
}

/* A layer record's payload; MW_E_FORMAT (err set) when it cannot be a
 * record of this journal. */
static enum mw_status parse_layer(const uint8_t *p, uint32_t len, const struct mwj_id *id,
                                  const struct mwj_scan *sc, uint64_t rec_off,
                                  struct mwj_layer *L, const char *path, struct mw_err *err)
{
    struct mw_rd r = {.base = p, .size = len, .err = err};
    enum mw_status s = MW_OK;
    memset(L, 0, sizeof *L);
    const char *bad = NULL;
    if (s == MW_OK) s = mw_rd_u32(&r, &L->layer, "layer");
    if (s == MW_OK) s = mw_rd_u32(&r, &L->hidden_slot, "hidden slot");
    if (s == MW_OK) s = mw_rd_u64(&r, &L->tensors_end, "tensors end");
    if (s == MW_OK) s = mw_rd_u64(&r, &L->hidden_bytes, "hidden bytes");
    if (s == MW_OK) s = mw_rd_u64(&r, &L->hidden_hash, "hidden hash");
    for (int g = 0; g < CALIB_G_COUNT && s == MW_OK; g++) {
        struct mwj_tally *t = &L->tally[g];
        uint32_t wl = 0;
        const uint8_t *w;
        if (s == MW_OK) s = mw_rd_u32(&r, &t->folded, "tally");
        if (s == MW_OK) s = mw_rd_u32(&r, &t->no_gain, "tally");
        if (s == MW_OK) s = mw_rd_u32(&r, &t->skipped, "tally");
        if (s == MW_OK) s = mw_rd_u32(&r, &wl, "tally reason length");
        if (s == MW_OK && wl >= MWJ_WHY_MAX) bad = "a tally reason too long";
        if (s == MW_OK && !bad) s = mw_rd_bytes(&r, wl, &w, "tally reason");
        if (s == MW_OK && !bad) {
            memcpy(t->why, w, wl);
            t->why[wl] = 0;
        }
        if (bad) break;
    }
    if (s == MW_OK && !bad) s = mw_rd_u32(&r, &L->x_gptq, "expert counters");
    if (s == MW_OK && !bad) s = mw_rd_u32(&r, &L->x_rtn, "expert counters");
    if (s == MW_OK && !bad) s = mw_rd_u32(&r, &L->x_unrouted, "expert counters");
    if (s == MW_OK && !bad) s = mw_rd_u32(&r, &L->n_spill, "spill count");
    if (s == MW_OK && !bad && (uint64_t)L->n_spill * 36 != mw_rd_left(&r))
        bad = "its tensor list does not fill the record";
    if (s == MW_OK && !bad && L->n_spill) {
        L->spill = calloc(L->n_spill, sizeof *L->spill);
        if (!L->spill) return MW_FAIL(err, MW_E_NOMEM, MW_ERR_OFF_NONE, "out of memory");
    }
    for (uint32_t k = 0; k < L->n_spill && s == MW_OK && !bad; k++) {
        struct mwj_spill *q = &L->spill[k];
        s = mw_rd_u64(&r, &q->ti, "tensor index");
        if (s == MW_OK) s = mw_rd_u32(&r, &q->type, "tensor type");
        if (s == MW_OK) s = mw_rd_u64(&r, &q->off, "tensor offset");
        if (s == MW_OK) s = mw_rd_u64(&r, &q->bytes, "tensor bytes");
        if (s == MW_OK) s = mw_rd_u64(&r, &q->hash, "tensor hash");
        uint64_t end;
        if (s == MW_OK && q->ti >= id->n_tensors) bad = "a tensor index past the model's tensors";
        else if (s == MW_OK && (!mw_add_u64(q->off, q->bytes, &end) || end > L->tensors_end))
            bad = "a tensor past the layer's end of tensors.bin";
        else if (s == MW_OK && sc->n_layers && q->off < sc->layers[sc->n_layers - 1].tensors_end)
            bad = "a tensor inside an earlier layer's bytes";
    }
    const uint64_t prev_end = sc->n_layers ? sc->layers[sc->n_layers - 1].tensors_end : 0;
    uint64_t hb = 0;
    const bool hb_ok = mw_mul_u64((uint64_t)id->n_samples * id->n_pos, id->n_embd, &hb) &&
                       mw_mul_u64(hb, sizeof(float), &hb);
    if (s == MW_OK && !bad) {
        if (L->layer != sc->n_layers) bad = "layers out of order";
        else if (L->layer >= id->n_layer) bad = "a layer past the model's layers";
        else if (L->tensors_end < prev_end) bad = "tensors.bin shrinking";
        else if (L->layer + 1 < id->n_layer &&
                 (L->hidden_slot != L->layer % 2 || !hb_ok || L->hidden_bytes != hb))
            bad = "a hidden-state file of the wrong slot or size";
        else if (L->layer + 1 == id->n_layer && L->hidden_slot != MWJ_NO_HIDDEN)
            bad = "a hidden-state file after the last layer";
    }
    if (s != MW_OK || bad) {
        free(L->spill);
        L->spill = NULL;
        mw_err_clear(err);
        mw_err_set_path(err, path);
        return MW_FAIL(err, MW_E_FORMAT, rec_off,
                       "journal record of layer %u (intact checksum): %s", L->layer,
                       bad ? bad : "its fields do not fill the record");
    }
    return MW_OK;
}

static bool all_zero(const uint8_t *p, uint64_t n)
{
    for (uint64_t i = 0; i < n; i++)
        if (p[i]) return false;
    return true;
}

enum mw_status mwj_scan_bytes(const uint8_t *buf, uint64_t n, const char *path,
                              struct mwj_scan *out, struct mw_err *err)
{
    memset(out, 0, sizeof *out);
    /* a header never completely written (a crash while the journal was
     * started; power loss may leave zeros): the journal never started */
    if (n < MWJ_FRAME_BYTES + HEADER_PAYLOAD || all_zero(buf, n)) {
        out->empty = true;
        out->dropped_bytes = n;
        return MW_OK;
    }
    if (mw_le32(buf) != MWJ_MAGIC || mw_le32(buf + 4) != MWJ_KIND_HEADER) {
        mw_err_set_path(err, path);
        return MW_FAIL(err, MW_E_FORMAT, 0, "not a memwall journal (no header record)");
    }
    const uint32_t hl = mw_le32(buf + 8);
    if (hl != HEADER_PAYLOAD) {
        uint32_t ver = n >= 16 ? mw_le32(buf + 12) : 0;
        mw_err_set_path(err, path);
        if (ver != MWJ_VERSION)
            return MW_FAIL(err, MW_E_FORMAT, 12,
                           "journal version %u: this memwall reads version %u (remove the work "
                           "dir to start over)",
                           ver, MWJ_VERSION);
        return MW_FAIL(err, MW_E_FORMAT, 8, "journal header of %u bytes, expected %u", hl,
                       HEADER_PAYLOAD);
    }
    const uint64_t hend = 12 + (uint64_t)hl;
    if (XXH3_64bits(buf, (size_t)hend) != mw_le64(buf + hend)) {
        mw_err_set_path(err, path);
        return MW_FAIL(err, MW_E_CHECKSUM, hend,
                       "the journal's header record is damaged (checksum mismatch): remove the "
                       "work dir to start over");
    }
    enum mw_status s = parse_header(buf + 12, hl, &out->id, path, err);
    if (s != MW_OK) return s;
    uint64_t pos = hend + 8;
    uint32_t cap = 0;
    while (pos < n) {
        const uint64_t left = n - pos;
        const char *why = NULL;
        uint32_t len = 0;
        if (left < 12) why = "a torn record (shorter than its frame)";
        else if (mw_le32(buf + pos) != MWJ_MAGIC || mw_le32(buf + pos + 4) != MWJ_KIND_LAYER)
            why = all_zero(buf + pos, left) ? "zeros after the last record (an unfinished write)"
                                            : "no record frame";
        else if ((len = mw_le32(buf + pos + 8)) > MWJ_MAX_PAYLOAD)
            why = "a record length out of range";
        else if ((uint64_t)len + MWJ_FRAME_BYTES > left)
            why = "a torn record (shorter than its length)";
        else if (XXH3_64bits(buf + pos, (size_t)(12 + len)) != mw_le64(buf + pos + 12 + len))
            why = "a record with a checksum mismatch";
        if (why) {
            out->dropped_bytes = left;
            snprintf(out->dropped_why, sizeof out->dropped_why, "%s at offset %llu", why,
                     (unsigned long long)pos);
            break;
        }
        if (out->n_layers == cap) {
            const uint32_t nc = cap ? cap * 2 : 16;
            struct mwj_layer *q = realloc(out->layers, nc * sizeof *q);
            if (!q) {
                mwj_scan_free(out);
                return MW_FAIL(err, MW_E_NOMEM, MW_ERR_OFF_NONE, "out of memory");
            }
            out->layers = q;
            cap = nc;
        }
        struct mwj_layer L;
        if ((s = parse_layer(buf + pos + 12, len, &out->id, out, pos, &L, path, err)) != MW_OK) {
            mwj_scan_free(out);
            return s;
        }
        out->layers[out->n_layers++] = L;
        pos += (uint64_t)len + MWJ_FRAME_BYTES;
    }
    out->valid_bytes = pos < n ? pos : n;
    return MW_OK;
}

// --- the work dir -----------------------------------------------------------------

struct mwj {
    char dir[4096];
    char jpath[4096], tpath[4096], hpath[2][4096];
    int jfd, tfd, hfd; /* journal, tensors.bin, the hidden file being read (-1) */
    uint64_t jend, tend;
    struct mwj_id id;
    struct mwj_scan sc;    /* the kept records */
    uint32_t n_done;       /* layers recorded (kept + committed in this run) */
    /* mwj_load_hidden */
    uint64_t h_next;
    XXH3_state_t *hs;
};

static enum mw_status ioerr(struct mw_err *err, const char *path, const char *what)
{
    return mw_file_errno_fail(err, path, errno ? errno : EIO, what);
}

static void sync_dir(const char *dir)
{
    const int dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dfd >= 0) {
        fsync(dfd);
        close(dfd);
    }
}

static const char *method_names(uint32_t m)
{
    static const char *const nm[] = {"rtn", "gptq", "awq", "awq+gptq", "gptq-act",
                                     "awq+gptq-act"};
    return m < 6 ? nm[m] : "?";
}

/* The first field in which the journal's identity differs from this run's,
 * as an error naming both values. */
static enum mw_status check_identity(const struct mwj *j, const struct mwj_id *a,
                                     const struct mwj_id *b, struct mw_err *err)
{
    char m[sizeof j->dir + 512];
    const char *d = j->dir;
    m[0] = 0;
    if (a->model_bytes != b->model_bytes || a->model_hash != b->model_hash ||
        a->tensors_hash != b->tensors_hash || a->n_tensors != b->n_tensors ||
        a->n_layer != b->n_layer || a->n_embd != b->n_embd)
        snprintf(m, sizeof m,
                 "work dir %s belongs to another model (%llu bytes, header hash %016llx; this "
                 "run: %llu bytes, hash %016llx)",
                 d, (unsigned long long)a->model_bytes,
                 (unsigned long long)(a->model_hash ^ a->tensors_hash),
                 (unsigned long long)b->model_bytes,
                 (unsigned long long)(b->model_hash ^ b->tensors_hash));
    else if (a->n_samples != b->n_samples || a->n_pos != b->n_pos ||
             a->samples_hash != b->samples_hash)
        snprintf(m, sizeof m,
                 "work dir %s belongs to other calibration samples (corpus, --samples, "
                 "--seq-len: %u x %u tokens, hash %016llx; this run: %u x %u, hash %016llx)",
                 d, a->n_samples, a->n_pos, (unsigned long long)a->samples_hash, b->n_samples,
                 b->n_pos, (unsigned long long)b->samples_hash);
    else if (a->method != b->method)
        snprintf(m, sizeof m, "work dir %s belongs to --method %s (this run: --method %s)", d,
                 method_names(a->method), method_names(b->method));
    else if (a->damp_bits != b->damp_bits || a->gptq_block != b->gptq_block ||
             a->act_order != b->act_order) {
        float fa, fb;
        memcpy(&fa, &a->damp_bits, 4);
        memcpy(&fb, &b->damp_bits, 4);
        snprintf(m, sizeof m,
                 "work dir %s belongs to other GPTQ options (damp %g, block %u, act_order %u; "
                 "this run: damp %g, block %u, act_order %u)",
                 d, (double)fa, a->gptq_block, a->act_order, (double)fb, b->gptq_block,
                 b->act_order);
    } else if (a->awq_in_only != b->awq_in_only)
        snprintf(m, sizeof m, "work dir %s belongs to AWQ %s (this run: %s)", d,
                 a->awq_in_only ? "on the norms' inputs only" : "with the v/up folds",
                 b->awq_in_only ? "on the norms' inputs only" : "with the v/up folds");
    else if (a->want_hash != b->want_hash)
        snprintf(m, sizeof m,
                 "work dir %s belongs to other per-tensor types (preset, --bpw/--size/--fit-ram, "
                 "--type-override, --imatrix ...: hash %016llx; this run: %016llx)",
                 d, (unsigned long long)a->want_hash, (unsigned long long)b->want_hash);
    else if (a->batch_samples != b->batch_samples)
        snprintf(m, sizeof m,
                 "work dir %s belongs to another calibration batch (%u samples per batch; this "
                 "run: %u — --max-memory sets it)",
                 d, a->batch_samples, b->batch_samples);
    if (!m[0]) return MW_OK;
    mw_err_set_path(err, j->jpath);
    return MW_FAIL(err, MW_E_VALUE, MW_ERR_OFF_NONE, "%s", m);
}

void mwj_close(struct mwj *j)
{
    if (!j) return;
    if (j->jfd >= 0) close(j->jfd); /* releases the lock */
    if (j->tfd >= 0) close(j->tfd);
    if (j->hfd >= 0) close(j->hfd);
    if (j->hs) XXH3_freeState(j->hs);
    mwj_scan_free(&j->sc);
    free(j);
}

static enum mw_status read_journal(struct mwj *j, uint8_t **buf, uint64_t *n, struct mw_err *err)
{
    struct stat st;
    *buf = NULL;
    *n = 0;
    if (fstat(j->jfd, &st) != 0) return ioerr(err, j->jpath, "stat");
    if ((uint64_t)st.st_size > JOURNAL_MAX) {
        mw_err_set_path(err, j->jpath);
        return MW_FAIL(err, MW_E_FORMAT, MW_ERR_OFF_NONE,
                       "%llu bytes: larger than any journal (%llu)",
                       (unsigned long long)st.st_size, (unsigned long long)JOURNAL_MAX);
    }
    *n = (uint64_t)st.st_size;
    if (!(*buf = malloc(*n ? (size_t)*n : 1)))
        return MW_FAIL(err, MW_E_NOMEM, MW_ERR_OFF_NONE, "out of memory");
    return mw_pread_all(j->jfd, *buf, *n, 0, j->jpath, err);
}

/* A new journal: header record, empty data files, all synced. */
static enum mw_status start_fresh(struct mwj *j, struct mw_err *err)
{
    uint8_t *rec = NULL;
    uint64_t rn = 0;
    enum mw_status s;
    if (ftruncate(j->jfd, 0) != 0) return ioerr(err, j->jpath, "truncate");
    j->tfd = open(j->tpath, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0666);
    if (j->tfd < 0) return ioerr(err, j->tpath, "create");
    for (int k = 0; k < 2; k++) { /* created now: later opens need no directory update */
        const int fd = open(j->hpath[k], O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0666);
        if (fd < 0) return ioerr(err, j->hpath[k], "create");
        close(fd);
    }
    if ((s = mwj_encode_header(&j->id, &rec, &rn, err)) != MW_OK) return s;
    s = mw_pwrite_all(j->jfd, rec, rn, 0, j->jpath, err);
    free(rec);
    if (s != MW_OK) {
        if (ftruncate(j->jfd, 0) != 0) { /* best effort: a torn header reads as none */
        }
        return s;
    }
    if (fdatasync(j->tfd) != 0) return ioerr(err, j->tpath, "fdatasync");
    if (fdatasync(j->jfd) != 0) return ioerr(err, j->jpath, "fdatasync");
    sync_dir(j->dir);
    j->jend = rn;
    j->tend = 0;
    return MW_OK;
}

/* Keep the scanned records: cut the journal's tail, bring tensors.bin to the
 * last layer's end, open the last hidden file. */
static enum mw_status keep_records(struct mwj *j, struct mwj_open_info *info, struct mw_err *err)
{
    const struct mwj_scan *sc = &j->sc;
    if (sc->dropped_bytes) {
        if (ftruncate(j->jfd, (off_t)sc->valid_bytes) != 0 || fdatasync(j->jfd) != 0)
            return ioerr(err, j->jpath, "truncate the torn tail");
        info->dropped_bytes = sc->dropped_bytes;
        snprintf(info->dropped_why, sizeof info->dropped_why, "%s", sc->dropped_why);
    }
    j->jend = sc->valid_bytes;
    j->n_done = sc->n_layers;
    j->tend = sc->n_layers ? sc->layers[sc->n_layers - 1].tensors_end : 0;
    j->tfd = open(j->tpath, O_RDWR | O_CREAT | O_CLOEXEC, 0666);
    if (j->tfd < 0) return ioerr(err, j->tpath, "open");
    struct stat st;
    if (fstat(j->tfd, &st) != 0) return ioerr(err, j->tpath, "stat");
    if ((uint64_t)st.st_size < j->tend) {
        mw_err_set_path(err, j->tpath);
        return MW_FAIL(err, MW_E_TRUNC, (uint64_t)st.st_size,
                       "%llu bytes, but the journal's %u layers need %llu: the work dir is "
                       "damaged (remove it to start over)",
                       (unsigned long long)st.st_size, sc->n_layers,
                       (unsigned long long)j->tend);
    }
    if ((uint64_t)st.st_size > j->tend &&
        (ftruncate(j->tfd, (off_t)j->tend) != 0 || fdatasync(j->tfd) != 0))
        return ioerr(err, j->tpath, "truncate the unfinished layer's bytes");
    if (sc->n_layers && sc->layers[sc->n_layers - 1].hidden_slot != MWJ_NO_HIDDEN) {
        const struct mwj_layer *L = &sc->layers[sc->n_layers - 1];
        const char *hp = j->hpath[L->hidden_slot];
        j->hfd = open(hp, O_RDONLY | O_CLOEXEC);
        if (j->hfd < 0) return ioerr(err, hp, "open");
        if (fstat(j->hfd, &st) != 0) return ioerr(err, hp, "stat");
        if ((uint64_t)st.st_size != L->hidden_bytes) {
            mw_err_set_path(err, hp);
            return MW_FAIL(err, MW_E_TRUNC, (uint64_t)st.st_size,
                           "%llu bytes, but layer %u's hidden states are %llu: the work dir is "
                           "damaged (remove it to start over)",
                           (unsigned long long)st.st_size, L->layer,
                           (unsigned long long)L->hidden_bytes);
        }
        if (!(j->hs = XXH3_createState()))
            return MW_FAIL(err, MW_E_NOMEM, MW_ERR_OFF_NONE, "out of memory");
        XXH3_64bits_reset(j->hs);
    }
    info->resumed = true;
    info->n_done = sc->n_layers;
    return MW_OK;
}

enum mw_status mwj_open(const char *dir, bool resume, const struct mwj_id *id, struct mwj **out,
                        struct mwj_open_info *info, struct mw_err *err)
{
    *out = NULL;
    memset(info, 0, sizeof *info);
    struct mwj *j = calloc(1, sizeof *j);
    if (!j) return MW_FAIL(err, MW_E_NOMEM, MW_ERR_OFF_NONE, "out of memory");
    j->jfd = j->tfd = j->hfd = -1;
    j->id = *id;
    enum mw_status s = MW_OK;
    uint8_t *buf = NULL;
    uint64_t n = 0;
    const size_t dl = strlen(dir);
    if (dl == 0 || dl + 16 > sizeof j->dir) {
        s = MW_FAIL(err, MW_E_USAGE, MW_ERR_OFF_NONE, "--work-dir: path empty or too long");
        goto out;
    }
    memcpy(j->dir, dir, dl + 1);
    snprintf(j->jpath, sizeof j->jpath, "%s/journal", dir);
    snprintf(j->tpath, sizeof j->tpath, "%s/tensors.bin", dir);
    snprintf(j->hpath[0], sizeof j->hpath[0], "%s/hidden.0", dir);
    snprintf(j->hpath[1], sizeof j->hpath[1], "%s/hidden.1", dir);
    if (mkdir(dir, 0777) != 0 && errno != EEXIST) {
        s = ioerr(err, dir, "create the work dir");
        goto out;
    }
    struct stat st;
    if (stat(dir, &st) != 0 || !S_ISDIR(st.st_mode)) {
        mw_err_set_path(err, dir);
        s = MW_FAIL(err, MW_E_USAGE, MW_ERR_OFF_NONE, "--work-dir: not a directory");
        goto out;
    }
    j->jfd = open(j->jpath, O_RDWR | O_CREAT | O_CLOEXEC, 0666);
    if (j->jfd < 0) {
        s = ioerr(err, j->jpath, "open");
        goto out;
    }
    if (flock(j->jfd, LOCK_EX | LOCK_NB) != 0) {
        mw_err_set_path(err, j->jpath);
        s = errno == EWOULDBLOCK
                ? MW_FAIL(err, MW_E_USAGE, MW_ERR_OFF_NONE,
                          "work dir %s is in use by another memwall process", dir)
                : ioerr(err, j->jpath, "lock");
        goto out;
    }
    if ((s = read_journal(j, &buf, &n, err)) != MW_OK) goto out;
    if ((s = mwj_scan_bytes(buf, n, j->jpath, &j->sc, err)) != MW_OK) goto out;
    if (j->sc.empty) {
        s = start_fresh(j, err);
        goto out;
    }
    if (!resume) {
        mw_err_set_path(err, j->jpath);
        s = MW_FAIL(err, MW_E_USAGE, MW_ERR_OFF_NONE,
                    "work dir %s holds the journal of a run (%u of %u layers done): add --resume "
                    "to continue it, or remove it / choose another --work-dir",
                    dir, j->sc.n_layers, j->sc.id.n_layer);
        goto out;
    }
    if ((s = check_identity(j, &j->sc.id, id, err)) != MW_OK) goto out;
    s = keep_records(j, info, err);
out:
    free(buf);
    if (s != MW_OK) {
        mwj_close(j);
        return s;
    }
    *out = j;
    return MW_OK;
}

uint32_t mwj_n_layers(const struct mwj *j) { return j->sc.n_layers; }
const struct mwj_layer *mwj_layer_at(const struct mwj *j, uint32_t i)
{
    return i < j->sc.n_layers ? &j->sc.layers[i] : NULL;
}
int mwj_tensors_fd(const struct mwj *j) { return j->tfd; }
uint64_t mwj_tensors_end(const struct mwj *j) { return j->tend; }
const char *mwj_tensors_path(const struct mwj *j) { return j->tpath; }

enum mw_status mwj_commit(struct mwj *j, struct calib_layer *ly, struct mwj_layer *rec,
                          struct mw_err *err)
{
    enum mw_status s = MW_OK;
    if (rec->layer != j->n_done)
        return MW_FAIL(err, MW_E_USAGE, MW_ERR_OFF_NONE,
                       "journal: layer %u finished, expected layer %u", rec->layer, j->n_done);
    rec->hidden_slot = MWJ_NO_HIDDEN;
    rec->hidden_bytes = rec->hidden_hash = 0;
    if (rec->layer + 1 < j->id.n_layer) {
        const uint32_t slot = rec->layer % 2;
        const char *hp = j->hpath[slot];
        const uint64_t T = (uint64_t)j->id.n_samples * j->id.n_pos;
        const uint64_t rowb = (uint64_t)j->id.n_embd * sizeof(float);
        const uint64_t step = calib_layer_max_rows(ly);
        XXH3_state_t *hs = XXH3_createState();
        if (!hs) return MW_FAIL(err, MW_E_NOMEM, MW_ERR_OFF_NONE, "out of memory");
        XXH3_64bits_reset(hs);
        const int fd = open(hp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0666);
        if (fd < 0) s = ioerr(err, hp, "create");
        for (uint64_t r0 = 0; s == MW_OK && r0 < T;) {
            const uint64_t nr = T - r0 < step ? T - r0 : step;
            const float *x;
            if ((s = calib_layer_hidden(ly, r0, nr, &x, err)) != MW_OK) break;
            XXH3_64bits_update(hs, x, (size_t)(nr * rowb));
            s = mw_pwrite_all(fd, x, nr * rowb, r0 * rowb, hp, err);
            r0 += nr;
        }
        if (s == MW_OK && fdatasync(fd) != 0) s = ioerr(err, hp, "fdatasync");
        if (fd >= 0) close(fd);
        rec->hidden_hash = XXH3_64bits_digest(hs);
        XXH3_freeState(hs);
        if (s != MW_OK) return s;
        rec->hidden_slot = slot;
        rec->hidden_bytes = T * rowb;
    }
    if (fdatasync(j->tfd) != 0) return ioerr(err, j->tpath, "fdatasync");
    uint8_t *b;
    uint64_t bn;
    if ((s = mwj_encode_layer(rec, &b, &bn, err)) != MW_OK) return s;
    s = mw_pwrite_all(j->jfd, b, bn, j->jend, j->jpath, err);
    free(b);
    if (s == MW_OK && fdatasync(j->jfd) != 0) s = ioerr(err, j->jpath, "fdatasync");
    if (s != MW_OK) {
        /* best effort; a resume drops a torn record anyway */
        if (ftruncate(j->jfd, (off_t)j->jend) != 0) {
        }
        return s;
    }
    j->jend += bn;
    j->tend = rec->tensors_end;
    j->n_done++;
    return MW_OK;
}

enum mw_status mwj_load_hidden(void *ud, uint64_t row0, uint64_t n_rows, float *dst,
                               struct mw_err *err)
{
    struct mwj *j = ud;
    const uint32_t nl = j->sc.n_layers;
    if (j->hfd < 0 || !nl)
        return MW_FAIL(err, MW_E_USAGE, MW_ERR_OFF_NONE, "journal: no hidden states to load");
    const struct mwj_layer *L = &j->sc.layers[nl - 1];
    const char *hp = j->hpath[L->hidden_slot];
    const uint64_t T = (uint64_t)j->id.n_samples * j->id.n_pos;
    const uint64_t rowb = (uint64_t)j->id.n_embd * sizeof(float);
    if (row0 == 0) {
        XXH3_64bits_reset(j->hs);
        j->h_next = 0;
    }
    if (row0 != j->h_next || row0 > T || n_rows > T - row0)
        return MW_FAIL(err, MW_E_USAGE, MW_ERR_OFF_NONE,
                       "journal: hidden rows [%llu, +%llu) asked, expected row %llu of %llu",
                       (unsigned long long)row0, (unsigned long long)n_rows,
                       (unsigned long long)j->h_next, (unsigned long long)T);
    enum mw_status s = mw_pread_all(j->hfd, dst, n_rows * rowb, row0 * rowb, hp, err);
    if (s != MW_OK) return s;
    XXH3_64bits_update(j->hs, dst, (size_t)(n_rows * rowb));
    j->h_next = row0 + n_rows;
    if (j->h_next == T && XXH3_64bits_digest(j->hs) != L->hidden_hash) {
        mw_err_set_path(err, hp);
        return MW_FAIL(err, MW_E_CHECKSUM, MW_ERR_OFF_NONE,
                       "layer %u's hidden states do not match the journal's hash: the work dir "
                       "is damaged (remove it to start over)",
                       L->layer);
    }
    return MW_OK;
}

// --- identity -----------------------------------------------------------------------

static int cmp_names(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

static bool ends_with(const char *s, const char *suf)
{
    const size_t a = strlen(s), b = strlen(suf);
    return a >= b && strcmp(s + a - b, suf) == 0;
}

/* A Hugging Face directory: the files hf/ reads (*.json, *.safetensors,
 * *.model), by name: each name and size; the content of the .json and
 * .model files and the header of each .safetensors (the tensor table). */
static enum mw_status hf_identity(const char *path, uint64_t *bytes, uint64_t *hash,
                                  struct mw_err *err)
{
    DIR *d = opendir(path);
    if (!d) return ioerr(err, path, "open directory");
    char **names = NULL;
    size_t nn = 0, cap = 0;
    enum mw_status s = MW_OK;
    struct dirent *de;
    while ((de = readdir(d))) {
        const char *nm = de->d_name;
        if (nm[0] == '.') continue;
        if (!ends_with(nm, ".json") && !ends_with(nm, ".safetensors") && !ends_with(nm, ".model"))
            continue;
        if (nn == cap) {
            cap = cap ? cap * 2 : 32;
            char **q = realloc(names, cap * sizeof *q);
            if (!q) {
                s = MW_FAIL(err, MW_E_NOMEM, MW_ERR_OFF_NONE, "out of memory");
                break;
            }
            names = q;
        }
        if (!(names[nn] = strdup(nm))) {
            s = MW_FAIL(err, MW_E_NOMEM, MW_ERR_OFF_NONE, "out of memory");
            break;
        }
        nn++;
    }
    closedir(d);
    XXH3_state_t *hs = s == MW_OK ? XXH3_createState() : NULL;
    if (s == MW_OK && !hs) s = MW_FAIL(err, MW_E_NOMEM, MW_ERR_OFF_NONE, "out of memory");
    if (s == MW_OK) {
        qsort(names, nn, sizeof *names, cmp_names);
        XXH3_64bits_reset(hs);
    }
    *bytes = 0;
    for (size_t i = 0; i < nn && s == MW_OK; i++) {
        char fp[4096];
        if ((size_t)snprintf(fp, sizeof fp, "%s/%s", path, names[i]) >= sizeof fp) continue;
        const int fd = open(fp, O_RDONLY | O_CLOEXEC);
        struct stat st;
        if (fd < 0 || fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
            if (fd >= 0) close(fd);
            continue;
        }
        const uint64_t sz = (uint64_t)st.st_size;
        uint8_t sb[8];
        mw_put_le64(sb, sz);
        XXH3_64bits_update(hs, names[i], strlen(names[i]) + 1);
        XXH3_64bits_update(hs, sb, 8);
        *bytes += sz;
        uint64_t off = 0, len = 0;
        if (ends_with(names[i], ".safetensors")) {
            uint8_t hl[8];
            if (sz >= 8 && mw_pread_all(fd, hl, 8, 0, fp, err) == MW_OK) {
                len = mw_le64(hl) + 8;
                if (len > sz || len > ((uint64_t)100 << 20)) len = 8;
            }
        } else if (sz <= ((uint64_t)64 << 20)) {
            len = sz;
        }
        uint8_t buf[65536];
        while (s == MW_OK && off < len) {
            const uint64_t c = len - off < sizeof buf ? len - off : sizeof buf;
            if ((s = mw_pread_all(fd, buf, c, off, fp, err)) == MW_OK)
                XXH3_64bits_update(hs, buf, (size_t)c);
            off += c;
        }
        close(fd);
    }
    if (s == MW_OK) *hash = XXH3_64bits_digest(hs);
    if (hs) XXH3_freeState(hs);
    for (size_t i = 0; i < nn; i++) free(names[i]);
    free(names);
    return s;
}

enum mw_status mwj_model_identity(const char *path, uint64_t *bytes, uint64_t *hash,
                                  struct mw_err *err)
{
    struct stat st;
    if (stat(path, &st) != 0) return ioerr(err, path, "stat");
    if (S_ISDIR(st.st_mode)) return hf_identity(path, bytes, hash, err);
    struct gguf_file *f;
    enum mw_status s = gguf_open(path, GGUF_OPEN_ALLOW_SHORT, &f, err);
    if (s != MW_OK) return s;
    *bytes = gguf_file_size(f);
    *hash = XXH3_64bits(gguf_base(f), (size_t)gguf_data_start(f));
    gguf_close(f);
    return MW_OK;
}
