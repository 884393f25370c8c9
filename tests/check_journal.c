/* Unit tests for the work-dir journal of resumable quant runs
 * (methods/methods_int.h, methods_journal.c):
 *  - records round-trip (header identity, layer records with tensors,
 *    tallies and hidden-file fields);
 *  - every truncation of a journal scans without error and keeps exactly
 *    the records that are whole, the tail counted as dropped; a header cut
 *    short is a journal that never started;
 *  - every single-byte corruption of a layer record drops that record and
 *    all after it (never an error, never a record with changed fields); a
 *    corrupt header is an error (checksum or format), never silently kept;
 *  - a zero-filled tail (power loss) is dropped; an intact record that
 *    contradicts the journal (layer order, offsets) is MW_E_FORMAT;
 *  - mwj_open: a new work dir starts a journal; reopening without resume is
 *    refused (MW_E_USAGE), with another identity refused naming the field
 *    (MW_E_VALUE); a second opener while the first holds it is refused;
 *    tensors.bin shorter than the journal says is MW_E_TRUNC. */
#define _POSIX_C_SOURCE 200809L
#include <check.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "methods/methods_int.h"

#include "check_common.h"

static struct mwj_id test_id(void)
{
    struct mwj_id id = {.model_bytes = 16891328, .model_hash = 0x1234, .tensors_hash = 0x99,
                        .n_tensors = 75, .n_layer = 3, .n_embd = 8, .n_samples = 2, .n_pos = 5,
                        .samples_hash = 0xabcdef, .method = 3, .damp_bits = 0x3c23d70a,
                        .gptq_block = 128, .act_order = 0, .awq_in_only = 0, .want_hash = 7,
                        .batch_samples = 2};
    return id;
}

/* layer l's record: l+1 tensors of 100 bytes after the previous layer's */
static void test_layer(struct mwj_layer *L, struct mwj_spill *sp, uint32_t l, uint32_t n_layer)
{
    memset(L, 0, sizeof *L);
    L->layer = l;
    const uint64_t base = (uint64_t)l * (l + 1) / 2 * 100;
    for (uint32_t k = 0; k <= l; k++)
        sp[k] = (struct mwj_spill){.ti = 10 * l + k, .type = 12, .off = base + 100 * k,
                                   .bytes = 100, .hash = 0x5150 + k};
    L->n_spill = l + 1;
    L->spill = sp;
    L->x_gptq = 3 * l, L->x_rtn = l, L->x_unrouted = l / 2; /* MoE expert counters */
    L->tensors_end = base + 100 * (l + 1);
    if (l + 1 < n_layer) {
        L->hidden_slot = l % 2;
        L->hidden_bytes = 2 * 5 * 8 * 4;
        L->hidden_hash = 0xfeed + l;
    } else {
        L->hidden_slot = MWJ_NO_HIDDEN;
    }
    L->tally[0].folded = l + 1;
    L->tally[1].skipped = l;
    if (l) snprintf(L->tally[1].why, sizeof L->tally[1].why, "layer 0: a reason %u", l);
}

/* A journal of the header and n layer records; ends[i]: the end of record
 * i (ends[0]: the header's). */
static uint8_t *make_journal(uint32_t n, uint64_t *size, uint64_t *ends)
{
    const struct mwj_id id = test_id();
    struct mw_err err;
    mw_err_clear(&err);
    uint8_t *j = NULL, *b;
    uint64_t jn = 0, bn;
    ck_assert_int_eq(mwj_encode_header(&id, &b, &bn, &err), MW_OK);
    j = malloc(bn);
    memcpy(j, b, bn);
    jn = bn;
    ends[0] = jn;
    free(b);
    for (uint32_t l = 0; l < n; l++) {
        struct mwj_layer L;
        struct mwj_spill sp[8];
        test_layer(&L, sp, l, id.n_layer);
        ck_assert_int_eq(mwj_encode_layer(&L, &b, &bn, &err), MW_OK);
        j = realloc(j, jn + bn);
        memcpy(j + jn, b, bn);
        jn += bn;
        ends[l + 1] = jn;
        free(b);
    }
    *size = jn;
    return j;
}

static void same_layer(const struct mwj_layer *a, const struct mwj_layer *b)
{
    ck_assert_uint_eq(a->layer, b->layer);
    ck_assert_uint_eq(a->tensors_end, b->tensors_end);
    ck_assert_uint_eq(a->hidden_slot, b->hidden_slot);
    ck_assert_uint_eq(a->hidden_bytes, b->hidden_bytes);
    ck_assert_uint_eq(a->hidden_hash, b->hidden_hash);
    ck_assert_uint_eq(a->x_gptq, b->x_gptq);
    ck_assert_uint_eq(a->x_rtn, b->x_rtn);
    ck_assert_uint_eq(a->x_unrouted, b->x_unrouted);
    ck_assert_uint_eq(a->n_spill, b->n_spill);
    for (uint32_t k = 0; k < a->n_spill; k++)
        ck_assert(a->spill[k].ti == b->spill[k].ti && a->spill[k].type == b->spill[k].type &&
                  a->spill[k].off == b->spill[k].off && a->spill[k].bytes == b->spill[k].bytes &&
                  a->spill[k].hash == b->spill[k].hash);
    for (int g = 0; g < CALIB_G_COUNT; g++) {
        ck_assert_uint_eq(a->tally[g].folded, b->tally[g].folded);
        ck_assert_uint_eq(a->tally[g].no_gain, b->tally[g].no_gain);
        ck_assert_uint_eq(a->tally[g].skipped, b->tally[g].skipped);
        ck_assert_str_eq(a->tally[g].why, b->tally[g].why);
    }
}

START_TEST(test_roundtrip)
{
    uint64_t n, ends[4];
    uint8_t *j = make_journal(3, &n, ends);
    struct mwj_scan sc;
    struct mw_err err;
    mw_err_clear(&err);
    ck_assert_int_eq(mwj_scan_bytes(j, n, "journal", &sc, &err), MW_OK);
    ck_assert(!sc.empty);
    const struct mwj_id id = test_id();
    ck_assert(sc.id.model_bytes == id.model_bytes && sc.id.model_hash == id.model_hash &&
              sc.id.tensors_hash == id.tensors_hash && sc.id.n_tensors == id.n_tensors &&
              sc.id.n_layer == id.n_layer && sc.id.n_embd == id.n_embd &&
              sc.id.n_samples == id.n_samples && sc.id.n_pos == id.n_pos &&
              sc.id.samples_hash == id.samples_hash && sc.id.method == id.method &&
              sc.id.damp_bits == id.damp_bits && sc.id.gptq_block == id.gptq_block &&
              sc.id.act_order == id.act_order && sc.id.awq_in_only == id.awq_in_only &&
              sc.id.want_hash == id.want_hash && sc.id.batch_samples == id.batch_samples);
    ck_assert_uint_eq(sc.n_layers, 3);
    ck_assert_uint_eq(sc.valid_bytes, n);
    ck_assert_uint_eq(sc.dropped_bytes, 0);
    for (uint32_t l = 0; l < 3; l++) {
        struct mwj_layer L;
        struct mwj_spill sp[8];
        test_layer(&L, sp, l, 3);
        same_layer(&sc.layers[l], &L);
    }
    mwj_scan_free(&sc);
    free(j);
}
END_TEST

START_TEST(test_truncation)
{
    uint64_t n, ends[4];
    uint8_t *j = make_journal(3, &n, ends);
    for (uint64_t c = 0; c <= n; c++) {
        struct mwj_scan sc;
        struct mw_err err;
        mw_err_clear(&err);
        ck_assert_msg(mwj_scan_bytes(j, c, "journal", &sc, &err) == MW_OK, "cut at %llu: %s",
                      (unsigned long long)c, err.msg);
        if (c < ends[0]) {
            ck_assert(sc.empty);
        } else {
            uint32_t whole = 0;
            while (whole < 3 && ends[whole + 1] <= c) whole++;
            ck_assert(!sc.empty);
            ck_assert_uint_eq(sc.n_layers, whole);
            ck_assert_uint_eq(sc.valid_bytes, ends[whole]);
            ck_assert_uint_eq(sc.dropped_bytes, c - ends[whole]);
        }
        mwj_scan_free(&sc);
    }
    free(j);
}
END_TEST

START_TEST(test_corruption)
{
    uint64_t n, ends[4];
    uint8_t *j = make_journal(3, &n, ends);
    for (uint64_t i = 0; i < n; i++)
        for (int bit = 0; bit < 8; bit += 3) {
            j[i] ^= (uint8_t)(1u << bit);
            struct mwj_scan sc;
            struct mw_err err;
            mw_err_clear(&err);
            const enum mw_status s = mwj_scan_bytes(j, n, "journal", &sc, &err);
            if (i < ends[0]) {
                ck_assert_msg(s == MW_E_CHECKSUM || s == MW_E_FORMAT,
                              "header byte %llu: status %d", (unsigned long long)i, s);
            } else {
                uint32_t rec = 0; /* the layer record holding byte i */
                while (ends[rec + 1] <= i) rec++;
                ck_assert_msg(s == MW_OK, "byte %llu: %s", (unsigned long long)i, err.msg);
                ck_assert_uint_eq(sc.n_layers, rec);
                ck_assert_uint_eq(sc.valid_bytes, ends[rec]);
                ck_assert_uint_eq(sc.dropped_bytes, n - ends[rec]);
                ck_assert(sc.dropped_why[0]);
            }
            mwj_scan_free(&sc);
            j[i] ^= (uint8_t)(1u << bit);
        }
    free(j);
}
END_TEST

START_TEST(test_zero_tail_and_contradiction)
{
    uint64_t n, ends[4];
    uint8_t *j = make_journal(2, &n, ends);
    j = realloc(j, n + 4096);
    memset(j + n, 0, 4096);
    struct mwj_scan sc;
    struct mw_err err;
    mw_err_clear(&err);
    ck_assert_int_eq(mwj_scan_bytes(j, n + 4096, "journal", &sc, &err), MW_OK);
    ck_assert_uint_eq(sc.n_layers, 2);
    ck_assert_uint_eq(sc.dropped_bytes, 4096);
    mwj_scan_free(&sc);
    /* all zeros: never started */
    memset(j, 0, n);
    ck_assert_int_eq(mwj_scan_bytes(j, n, "journal", &sc, &err), MW_OK);
    ck_assert(sc.empty);
    free(j);
    /* an intact record out of order: layer 1 right after the header */
    const struct mwj_id id = test_id();
    uint8_t *h, *r;
    uint64_t hn, rn;
    ck_assert_int_eq(mwj_encode_header(&id, &h, &hn, &err), MW_OK);
    struct mwj_layer L;
    struct mwj_spill sp[8];
    test_layer(&L, sp, 1, id.n_layer);
    ck_assert_int_eq(mwj_encode_layer(&L, &r, &rn, &err), MW_OK);
    j = malloc(hn + rn);
    memcpy(j, h, hn);
    memcpy(j + hn, r, rn);
    mw_err_clear(&err);
    ck_assert_int_eq(mwj_scan_bytes(j, hn + rn, "journal", &sc, &err), MW_E_FORMAT);
    ck_assert_uint_eq(err.off, hn);
    ck_assert_ptr_nonnull(strstr(err.msg, "out of order"));
    free(j);
    free(r);
    /* a tensor past its layer's end */
    test_layer(&L, sp, 0, id.n_layer);
    sp[0].bytes = 1000;
    ck_assert_int_eq(mwj_encode_layer(&L, &r, &rn, &err), MW_OK);
    j = malloc(hn + rn);
    memcpy(j, h, hn);
    memcpy(j + hn, r, rn);
    mw_err_clear(&err);
    ck_assert_int_eq(mwj_scan_bytes(j, hn + rn, "journal", &sc, &err), MW_E_FORMAT);
    free(j);
    free(r);
    free(h);
}
END_TEST

START_TEST(test_open)
{
    char *d = pid_path("check_journal", "wd");
    rm_rf(d);
    struct mwj_id id = test_id();
    struct mwj *j = NULL, *j2 = NULL;
    struct mwj_open_info info;
    struct mw_err err;
    mw_err_clear(&err);
    /* --resume on nothing: a new journal */
    ck_assert_int_eq(mwj_open(d, true, &id, &j, &info, &err), MW_OK);
    ck_assert(!info.resumed);
    ck_assert_uint_eq(mwj_tensors_end(j), 0);
    /* in use */
    ck_assert_int_eq(mwj_open(d, true, &id, &j2, &info, &err), MW_E_USAGE);
    ck_assert_ptr_nonnull(strstr(err.msg, "in use"));
    /* bytes of an unfinished layer in tensors.bin (no record names them) */
    ck_assert_int_eq(pwrite(mwj_tensors_fd(j), "0123456789", 10, 190), 10);
    mwj_close(j);
    j = NULL;
    /* without --resume: refused */
    mw_err_clear(&err);
    ck_assert_int_eq(mwj_open(d, false, &id, &j, &info, &err), MW_E_USAGE);
    ck_assert_ptr_nonnull(strstr(err.msg, "--resume"));
    /* another identity: refused naming the field */
    struct mwj_id other = id;
    other.samples_hash ^= 1;
    mw_err_clear(&err);
    ck_assert_int_eq(mwj_open(d, true, &other, &j, &info, &err), MW_E_VALUE);
    ck_assert_ptr_nonnull(strstr(err.msg, "calibration samples"));
    other = id;
    other.method = 1;
    mw_err_clear(&err);
    ck_assert_int_eq(mwj_open(d, true, &other, &j, &info, &err), MW_E_VALUE);
    ck_assert_ptr_nonnull(strstr(err.msg, "--method awq+gptq (this run: --method gptq)"));
    other = id;
    other.model_hash ^= 1;
    ck_assert_int_eq(mwj_open(d, true, &other, &j, &info, &err), MW_E_VALUE);
    ck_assert_ptr_nonnull(strstr(err.msg, "another model"));
    other = id;
    other.want_hash ^= 1;
    ck_assert_int_eq(mwj_open(d, true, &other, &j, &info, &err), MW_E_VALUE);
    ck_assert_ptr_nonnull(strstr(err.msg, "per-tensor types"));
    /* the same identity: resumed with no layers; the extra bytes are cut */
    mw_err_clear(&err);
    ck_assert_int_eq(mwj_open(d, true, &id, &j, &info, &err), MW_OK);
    ck_assert(info.resumed);
    ck_assert_uint_eq(info.n_done, 0);
    struct stat st;
    ck_assert_int_eq(fstat(mwj_tensors_fd(j), &st), 0);
    ck_assert_int_eq(st.st_size, 0);
    mwj_close(j);
    /* a layer record naming 100 bytes of tensors.bin, which is empty */
    char jp[4200];
    snprintf(jp, sizeof jp, "%s/journal", d);
    struct mwj_layer L;
    struct mwj_spill sp[8];
    test_layer(&L, sp, 0, id.n_layer);
    uint8_t *r;
    uint64_t rn;
    ck_assert_int_eq(mwj_encode_layer(&L, &r, &rn, &err), MW_OK);
    const int fd = open(jp, O_WRONLY | O_APPEND);
    ck_assert_int_ge(fd, 0);
    ck_assert_int_eq(write(fd, r, rn), (ssize_t)rn);
    close(fd);
    free(r);
    j = NULL;
    mw_err_clear(&err);
    ck_assert_int_eq(mwj_open(d, true, &id, &j, &info, &err), MW_E_TRUNC);
    ck_assert_ptr_nonnull(strstr(err.path, "tensors.bin"));
    rm_rf(d);
    free(d);
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("journal");
    TCase *tc = tcase_create("core");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, test_roundtrip);
    tcase_add_test(tc, test_truncation);
    tcase_add_test(tc, test_corruption);
    tcase_add_test(tc, test_zero_tail_and_contradiction);
    tcase_add_test(tc, test_open);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    return run_suite(suite());
}
