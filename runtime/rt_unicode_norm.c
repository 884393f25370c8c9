/*
 * runtime/rt_unicode_norm.c — Unicode normalization forms NFD, NFC, NFKD,
 * NFKC (UAX #15) for the tokenizer: full decomposition, canonical ordering
 * by combining class, canonical composition of primary composites; Hangul
 * by arithmetic. The data tables are generated (rt_unicode_norm_tab.inc,
 * by runtime/gen_unicode_norm.py from Python's unicodedata).
 */
#include "runtime/rt_tok_int.h"

#include <stdlib.h>
#include <string.h>

struct dec {
    uint32_t cp;
    uint16_t off;
    uint8_t len;
};

#include "runtime/rt_unicode_norm_tab.inc"

#define N_OF(a) (sizeof(a) / sizeof((a)[0]))
enum { SBASE = 0xAC00, LBASE = 0x1100, VBASE = 0x1161, TBASE = 0x11A7 };
enum { LCOUNT = 19, VCOUNT = 21, TCOUNT = 28, NCOUNT = VCOUNT * TCOUNT, SCOUNT = LCOUNT * NCOUNT };

static const struct dec *find_dec(const struct dec *tab, size_t n, uint32_t cp)
{
    size_t lo = 0, hi = n;
    while (lo < hi) {
        const size_t mid = lo + (hi - lo) / 2;
        if (tab[mid].cp == cp) return &tab[mid];
        if (tab[mid].cp < cp) lo = mid + 1;
        else hi = mid;
    }
    return NULL;
}

static unsigned ccc_of(uint32_t cp)
{
    size_t lo = 0, hi = N_OF(ccc_tab);
    while (lo < hi) {
        const size_t mid = lo + (hi - lo) / 2;
        if (ccc_tab[mid][0] == cp) return ccc_tab[mid][1];
        if (ccc_tab[mid][0] < cp) lo = mid + 1;
        else hi = mid;
    }
    return 0;
}

static uint32_t compose_pair(uint32_t a, uint32_t b)
{
    if (a >= LBASE && a < LBASE + LCOUNT && b >= VBASE && b < VBASE + VCOUNT)
        return SBASE + ((a - LBASE) * VCOUNT + (b - VBASE)) * TCOUNT;
    if (a >= SBASE && a < SBASE + SCOUNT && (a - SBASE) % TCOUNT == 0 && b > TBASE &&
        b < TBASE + TCOUNT)
        return a + (b - TBASE);
    size_t lo = 0, hi = N_OF(comp_tab);
    while (lo < hi) {
        const size_t mid = lo + (hi - lo) / 2;
        const uint32_t *e = comp_tab[mid];
        if (e[0] == a && e[1] == b) return e[2];
        if (e[0] < a || (e[0] == a && e[1] < b)) lo = mid + 1;
        else hi = mid;
    }
    return 0;
}

size_t rt__norm_max_growth(void) { return 18; /* longest decomposition (U+FDFA) */ }

size_t rt__normalize(enum rt_norm form, const uint32_t *in, size_t n, uint32_t *out)
{
    const bool kompat = form == RT_NORM_NFKC || form == RT_NORM_NFKD;
    const bool compose = form == RT_NORM_NFC || form == RT_NORM_NFKC;
    size_t m = 0;
    /* decompose */
    for (size_t i = 0; i < n; i++) {
        const uint32_t cp = in[i];
        if (cp >= SBASE && cp < SBASE + SCOUNT) {
            const uint32_t s = cp - SBASE;
            out[m++] = LBASE + s / NCOUNT;
            out[m++] = VBASE + (s % NCOUNT) / TCOUNT;
            if (s % TCOUNT) out[m++] = TBASE + s % TCOUNT;
            continue;
        }
        const struct dec *d = kompat ? find_dec(compat, N_OF(compat), cp) : NULL;
        const uint32_t *data = compat_data;
        if (!d) {
            d = find_dec(canon, N_OF(canon), cp);
            data = canon_data;
        }
        if (d) {
            memcpy(out + m, data + d->off, d->len * sizeof *out);
            m += d->len;
        } else {
            out[m++] = cp;
        }
    }
    /* canonical ordering: stable sort of each run of non-starters */
    for (size_t i = 1; i < m; i++) {
        const uint32_t cp = out[i];
        const unsigned c = ccc_of(cp);
        if (c == 0) continue;
        size_t j = i;
        while (j > 0) {
            const unsigned p = ccc_of(out[j - 1]);
            if (p == 0 || p <= c) break;
            out[j] = out[j - 1];
            j--;
        }
        out[j] = cp;
    }
    if (!compose || m == 0) return m;
    /* canonical composition (UAX #15's reference algorithm) */
    size_t starter = 0, k = 1;
    uint32_t starter_ch = out[0];
    unsigned last = ccc_of(out[0]) ? 256 : 0;
    for (size_t i = 1; i < m; i++) {
        const uint32_t ch = out[i];
        const unsigned c = ccc_of(ch);
        const uint32_t comp = compose_pair(starter_ch, ch);
        if (comp && (last < c || last == 0)) {
            out[starter] = comp;
            starter_ch = comp;
            continue;
        }
        if (c == 0) {
            starter = k;
            starter_ch = ch;
        }
        last = c;
        out[k++] = ch;
    }
    return k;
}
