/* verify/verify_report.c — findings list of a verify run. */
#include "verify/verify_int.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *const level_names[] = {
    [VERIFY_ERROR] = "error",
    [VERIFY_WARNING] = "warning",
    [VERIFY_NOTE] = "note",
};

const char *verify_level_name(enum verify_level l)
{
    return ((unsigned)l <= VERIFY_NOTE) ? level_names[l] : "?";
}

static const char *const ck_names[] = {
    [VERIFY_CK_ABSENT] = "absent",
    [VERIFY_CK_OK] = "ok",
    [VERIFY_CK_MISMATCH] = "mismatch",
    [VERIFY_CK_INVALID] = "invalid",
};

const char *verify_checksums_name(enum verify_checksums c)
{
    return ((unsigned)c <= VERIFY_CK_INVALID) ? ck_names[c] : "?";
}

void verify_report_free(struct verify_report *rep)
{
    if (!rep) return;
    free(rep->items);
    memset(rep, 0, sizeof *rep);
    rep->status = MW_OK;
}

/* Make room for one more stored item; false when over the cap or out of
 * memory (the finding is then only counted). */
static bool reserve_item(struct vctx *c)
{
    struct verify_report *r = c->rep;
    if (r->n_items >= c->max_items) return false;
    if (r->n_items < c->items_cap) return true;
    uint64_t cap = c->items_cap ? c->items_cap * 2 : 16;
    if (cap > c->max_items) cap = c->max_items;
    uint64_t bytes;
    size_t sz;
    if (!mw_mul_u64(cap, sizeof *r->items, &bytes) || !mw_u64_to_size(bytes, &sz)) return false;
    struct verify_item *p = realloc(r->items, sz);
    if (!p) return false;
    r->items = p;
    c->items_cap = cap;
    return true;
}

void verify__item(struct vctx *c, enum verify_level level, enum mw_status code, uint64_t off,
                  int64_t tensor, const char *where, const char *fmt, ...)
{
    struct verify_report *r = c->rep;
    switch (level) {
    case VERIFY_ERROR:
        r->n_errors++;
        if (r->status == MW_OK) r->status = code;
        break;
    case VERIFY_WARNING: r->n_warnings++; break;
    default: r->n_notes++; break;
    }
    if (!reserve_item(c)) {
        r->n_dropped++;
        return;
    }
    struct verify_item *it = &r->items[r->n_items++];
    memset(it, 0, sizeof *it);
    it->level = level;
    it->code = code;
    it->off = off;
    it->tensor = -1;
    if (tensor >= 0 && c->f && (uint64_t)tensor < gguf_tensor_count(c->f)) {
        const struct gguf_tensor *t = gguf_tensor_get(c->f, (uint64_t)tensor);
        it->tensor = tensor;
        snprintf(it->name, sizeof it->name, "%s", t->name);
        snprintf(it->where, sizeof it->where, "tensor '%s'", t->name);
    } else if (where) {
        snprintf(it->where, sizeof it->where, "%s", where);
    }
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(it->msg, sizeof it->msg, fmt, ap);
    va_end(ap);
}
