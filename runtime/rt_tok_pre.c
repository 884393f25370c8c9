/*
 * runtime/rt_tok_pre.c — what byte-level BPE needs besides the merges:
 * UTF-8 decoding as llama.cpp does it, a small Unicode classifier (\p{L},
 * \p{N}, \s), the pre-tokenizer regexes of the llama3, qwen2 and gpt-2
 * groups written out by hand (llama.cpp's unicode_regex_split_custom_*),
 * and GPT-2's byte <-> character mapping.
 *
 * Limits (rt.h): the classifier knows ASCII, Latin-1, Latin Extended-A/B
 * and Additional, IPA, Greek, Cyrillic, Armenian, Hebrew, Arabic,
 * Devanagari digits, CJK ideographs, kana, bopomofo, Hangul and full-width
 * forms, plus the Unicode white space and common number code points; any
 * other code point is "punctuation/symbol" here, which can split words of
 * other scripts where llama.cpp would not.
 */
#include "rt_tok_int.h"

#include <string.h>

// --- UTF-8 ---

uint32_t rt__utf8_decode(const uint8_t *s, size_t n, size_t *i)
{
    /* llama.cpp unicode_cpt_from_utf8, with its caller's fallback: an
     * invalid sequence gives U+FFFD and consumes one byte */
    const size_t o = *i;
    const uint8_t c = s[o];
    if (!(c & 0x80)) {
        *i = o + 1;
        return c;
    }
    if (!(c & 0x40)) goto bad;
    if (!(c & 0x20)) {
        if (o + 1 >= n || (s[o + 1] & 0xc0) != 0x80) goto bad;
        *i = o + 2;
        return ((uint32_t)(c & 0x1f) << 6) | (s[o + 1] & 0x3f);
    }
    if (!(c & 0x10)) {
        if (o + 2 >= n || (s[o + 1] & 0xc0) != 0x80 || (s[o + 2] & 0xc0) != 0x80) goto bad;
        *i = o + 3;
        return ((uint32_t)(c & 0x0f) << 12) | ((uint32_t)(s[o + 1] & 0x3f) << 6) |
               (s[o + 2] & 0x3f);
    }
    if (!(c & 0x08)) {
        if (o + 3 >= n || (s[o + 1] & 0xc0) != 0x80 || (s[o + 2] & 0xc0) != 0x80 ||
            (s[o + 3] & 0xc0) != 0x80)
            goto bad;
        *i = o + 4;
        return ((uint32_t)(c & 0x07) << 18) | ((uint32_t)(s[o + 1] & 0x3f) << 12) |
               ((uint32_t)(s[o + 2] & 0x3f) << 6) | (s[o + 3] & 0x3f);
    }
bad:
    *i = o + 1;
    return 0xFFFD;
}

size_t rt__utf8_encode(uint32_t cp, uint8_t out[4])
{
    if (cp < 0x80) {
        out[0] = (uint8_t)cp;
        return 1;
    }
    if (cp < 0x800) {
        out[0] = (uint8_t)(0xc0 | (cp >> 6));
        out[1] = (uint8_t)(0x80 | (cp & 0x3f));
        return 2;
    }
    if (cp < 0x10000) {
        out[0] = (uint8_t)(0xe0 | (cp >> 12));
        out[1] = (uint8_t)(0x80 | ((cp >> 6) & 0x3f));
        out[2] = (uint8_t)(0x80 | (cp & 0x3f));
        return 3;
    }
    out[0] = (uint8_t)(0xf0 | ((cp >> 18) & 0x07));
    out[1] = (uint8_t)(0x80 | ((cp >> 12) & 0x3f));
    out[2] = (uint8_t)(0x80 | ((cp >> 6) & 0x3f));
    out[3] = (uint8_t)(0x80 | (cp & 0x3f));
    return 4;
}

size_t rt__utf8_len(uint8_t lead)
{
    /* llama.cpp unicode_len_utf8: by the high nibble */
    static const uint8_t lookup[16] = {1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 3, 4};
    return lookup[lead >> 4];
}

// --- classes ---

struct range {
    uint32_t lo, hi;
};

static const struct range letters[] = {
    {0x41, 0x5A},       {0x61, 0x7A},       {0xAA, 0xAA},       {0xB5, 0xB5},
    {0xBA, 0xBA},       {0xC0, 0xD6},       {0xD8, 0xF6},       {0xF8, 0x2C1},
    {0x2C6, 0x2D1},     {0x2E0, 0x2E4},     {0x2EC, 0x2EC},     {0x2EE, 0x2EE},
    {0x370, 0x374},     {0x376, 0x377},     {0x37A, 0x37D},     {0x37F, 0x37F},
    {0x386, 0x386},     {0x388, 0x38A},     {0x38C, 0x38C},     {0x38E, 0x3A1},
    {0x3A3, 0x3F5},     {0x3F7, 0x481},     {0x48A, 0x52F},     {0x531, 0x556},
    {0x559, 0x559},     {0x560, 0x588},     {0x5D0, 0x5EA},     {0x5EF, 0x5F2},
    {0x620, 0x64A},     {0x66E, 0x66F},     {0x671, 0x6D3},     {0x6D5, 0x6D5},
    {0x6E5, 0x6E6},     {0x6EE, 0x6EF},     {0x6FA, 0x6FC},     {0x6FF, 0x6FF},
    {0x904, 0x939},     {0x93D, 0x93D},     {0x950, 0x950},     {0x958, 0x961},
    {0x971, 0x980},     {0x10A0, 0x10C5},   {0x10D0, 0x10FA},   {0x10FC, 0x1248},
    {0x1E00, 0x1F15},   {0x1F18, 0x1F1D},   {0x1F20, 0x1F45},   {0x1F48, 0x1F4D},
    {0x1F50, 0x1F57},   {0x1F59, 0x1F59},   {0x1F5B, 0x1F5B},   {0x1F5D, 0x1F5D},
    {0x1F5F, 0x1F7D},   {0x1F80, 0x1FB4},   {0x1FB6, 0x1FBC},   {0x1FBE, 0x1FBE},
    {0x1FC2, 0x1FC4},   {0x1FC6, 0x1FCC},   {0x1FD0, 0x1FD3},   {0x1FD6, 0x1FDB},
    {0x1FE0, 0x1FEC},   {0x1FF2, 0x1FF4},   {0x1FF6, 0x1FFC},   {0x2071, 0x2071},
    {0x207F, 0x207F},   {0x2090, 0x209C},   {0x2102, 0x2102},   {0x2107, 0x2107},
    {0x210A, 0x2113},   {0x2115, 0x2115},   {0x2119, 0x211D},   {0x2124, 0x2124},
    {0x2126, 0x2126},   {0x2128, 0x2128},   {0x212A, 0x212D},   {0x212F, 0x2139},
    {0x2C00, 0x2CE4},   {0x2D00, 0x2D25},   {0x3005, 0x3006},   {0x3031, 0x3035},
    {0x303B, 0x303C},   {0x3041, 0x3096},   {0x309D, 0x309F},   {0x30A1, 0x30FA},
    {0x30FC, 0x30FF},   {0x3105, 0x312F},   {0x3131, 0x318E},   {0x31A0, 0x31BF},
    {0x31F0, 0x31FF},   {0x3400, 0x4DBF},   {0x4E00, 0x9FFF},   {0xA000, 0xA48C},
    {0xA640, 0xA66E},   {0xA680, 0xA69D},   {0xA722, 0xA788},   {0xA78B, 0xA7CA},
    {0xAC00, 0xD7A3},   {0xF900, 0xFA6D},   {0xFB00, 0xFB06},   {0xFF21, 0xFF3A},
    {0xFF41, 0xFF5A},   {0xFF66, 0xFFBE},   {0x20000, 0x2A6DF}, {0x2A700, 0x2EBE0},
};

static const struct range numbers[] = {
    {0x30, 0x39},     {0xB2, 0xB3},     {0xB9, 0xB9},     {0xBC, 0xBE},
    {0x660, 0x669},   {0x6F0, 0x6F9},   {0x966, 0x96F},   {0x2070, 0x2070},
    {0x2074, 0x2079}, {0x2080, 0x2089}, {0x2150, 0x2182}, {0x2185, 0x2189},
    {0x2460, 0x249B}, {0x24EA, 0x24FF}, {0x2776, 0x2793}, {0x3007, 0x3007},
    {0x3021, 0x3029}, {0x3038, 0x303A}, {0xFF10, 0xFF19},
};

static bool in_ranges(const struct range *r, size_t n, uint32_t cp)
{
    size_t lo = 0, hi = n;
    while (lo < hi) {
        const size_t mid = (lo + hi) / 2;
        if (cp < r[mid].lo) hi = mid;
        else if (cp > r[mid].hi) lo = mid + 1;
        else return true;
    }
    return false;
}

static bool is_space(uint32_t cp)
{
    return (cp >= 0x09 && cp <= 0x0D) || cp == 0x20 || cp == 0x85 || cp == 0xA0 || cp == 0x1680 ||
           (cp >= 0x2000 && cp <= 0x200A) || cp == 0x2028 || cp == 0x2029 || cp == 0x202F ||
           cp == 0x205F || cp == 0x3000;
}

enum { C_NONE = 0, C_LETTER = 1, C_NUMBER = 2, C_SPACE = 4, C_OTHER = 8 };

static unsigned cls(uint32_t cp)
{
    if (cp == UINT32_MAX) return C_NONE; /* outside the text */
    if (cp < 0x80) {
        if ((cp | 0x20) >= 'a' && (cp | 0x20) <= 'z') return C_LETTER;
        if (cp >= '0' && cp <= '9') return C_NUMBER;
        if (is_space(cp)) return C_SPACE;
        return C_OTHER;
    }
    if (is_space(cp)) return C_SPACE;
    if (in_ranges(letters, sizeof letters / sizeof letters[0], cp)) return C_LETTER;
    if (in_ranges(numbers, sizeof numbers / sizeof numbers[0], cp)) return C_NUMBER;
    return C_OTHER;
}

static uint32_t ascii_lower(uint32_t c) { return c >= 'A' && c <= 'Z' ? c + 32 : c; }

// --- the splitters ---

struct split {
    const uint32_t *cp;
    size_t n;
    size_t prev;     /* end of the last word */
    size_t *lens;
    size_t n_words;
};

static uint32_t at(const struct split *s, size_t i) { return i < s->n ? s->cp[i] : UINT32_MAX; }
static unsigned fl(const struct split *s, size_t i) { return cls(at(s, i)); }

static size_t add(struct split *s, size_t end)
{
    const size_t len = end - s->prev;
    if (len > 0) s->lens[s->n_words++] = len;
    s->prev = end;
    return len;
}

/* llama3 / qwen2:
 * (?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,max_digits}|
 *  ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+ */
static void split_llama3(struct split *s, size_t max_digits)
{
    for (size_t pos = 0; pos < s->n;) {
        const uint32_t c = at(s, pos);
        const unsigned f = fl(s, pos);
        if (c == '\'' && pos + 1 < s->n) {
            const uint32_t c1 = ascii_lower(at(s, pos + 1));
            if (c1 == 's' || c1 == 't' || c1 == 'm' || c1 == 'd') {
                pos += add(s, pos + 2);
                continue;
            }
            if (pos + 2 < s->n) {
                const uint32_t c2 = ascii_lower(at(s, pos + 2));
                if ((c1 == 'r' && c2 == 'e') || (c1 == 'v' && c2 == 'e') || (c1 == 'l' && c2 == 'l')) {
                    pos += add(s, pos + 3);
                    continue;
                }
            }
        }
        if (!(c == '\r' || c == '\n' || (f & C_NUMBER))) {
            if ((f & C_LETTER) || (fl(s, pos + 1) & C_LETTER)) {
                pos++;
                while (fl(s, pos) & C_LETTER) pos++;
                add(s, pos);
                continue;
            }
        }
        if (f & C_NUMBER) {
            size_t ini = pos;
            while (fl(s, pos) & C_NUMBER) {
                if (++pos - ini >= max_digits) {
                    add(s, pos);
                    ini = pos;
                }
            }
            add(s, pos);
            continue;
        }
        unsigned f2 = c == ' ' ? fl(s, pos + 1) : f;
        if (!(f2 & (C_SPACE | C_LETTER | C_NUMBER)) && f2) {
            pos += c == ' ';
            while (!(f2 & (C_SPACE | C_LETTER | C_NUMBER)) && f2) f2 = fl(s, ++pos);
            uint32_t c2 = at(s, pos);
            while (c2 == '\r' || c2 == '\n') c2 = at(s, ++pos);
            add(s, pos);
            continue;
        }
        size_t nws = 0, last_rn = 0;
        while (fl(s, pos + nws) & C_SPACE) {
            const uint32_t c2 = at(s, pos + nws);
            if (c2 == '\r' || c2 == '\n') last_rn = pos + nws + 1;
            nws++;
        }
        if (last_rn > 0) {
            pos = last_rn;
            add(s, pos);
            continue;
        }
        if (nws > 1 && at(s, pos + nws) != UINT32_MAX) {
            pos += nws - 1;
            add(s, pos);
            continue;
        }
        if (nws > 0) {
            pos += nws;
            add(s, pos);
            continue;
        }
        add(s, ++pos);
    }
}

/* gpt-2: 's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+ */
static void split_gpt2(struct split *s)
{
    for (size_t pos = 0; pos < s->n;) {
        const uint32_t c = at(s, pos);
        const unsigned f = fl(s, pos);
        if (c == '\'' && pos + 1 < s->n) {
            const uint32_t c1 = at(s, pos + 1);
            if (c1 == 's' || c1 == 't' || c1 == 'm' || c1 == 'd') {
                pos += add(s, pos + 2);
                continue;
            }
            if (pos + 2 < s->n) {
                const uint32_t c2 = at(s, pos + 2);
                if ((c1 == 'r' && c2 == 'e') || (c1 == 'v' && c2 == 'e') || (c1 == 'l' && c2 == 'l')) {
                    pos += add(s, pos + 3);
                    continue;
                }
            }
        }
        unsigned f2 = c == ' ' ? fl(s, pos + 1) : f;
        if (f2 & C_LETTER) {
            pos += c == ' ';
            while (f2 & C_LETTER) f2 = fl(s, ++pos);
            add(s, pos);
            continue;
        }
        if (f2 & C_NUMBER) {
            pos += c == ' ';
            while (f2 & C_NUMBER) f2 = fl(s, ++pos);
            add(s, pos);
            continue;
        }
        if (!(f2 & (C_SPACE | C_LETTER | C_NUMBER)) && f2) {
            pos += c == ' ';
            while (!(f2 & (C_SPACE | C_LETTER | C_NUMBER)) && f2) f2 = fl(s, ++pos);
            add(s, pos);
            continue;
        }
        size_t nws = 0;
        while (fl(s, pos + nws) & C_SPACE) nws++;
        if (nws > 1 && at(s, pos + nws) != UINT32_MAX) {
            pos += nws - 1;
            add(s, pos);
            continue;
        }
        if (nws > 0) {
            pos += nws;
            add(s, pos);
            continue;
        }
        add(s, ++pos);
    }
}

size_t rt__pre_split(enum rt_pre pre, const uint32_t *cp, size_t n, size_t *lens)
{
    struct split s = {.cp = cp, .n = n, .prev = 0, .lens = lens, .n_words = 0};
    switch (pre) {
    case RT_PRE_LLAMA3: split_llama3(&s, 3); break;
    case RT_PRE_QWEN2: split_llama3(&s, 1); break;
    case RT_PRE_GPT2: split_gpt2(&s); break;
    default: if (n) lens[s.n_words++] = n; break;
    }
    return s.n_words;
}

// --- GPT-2 bytes <-> characters ---

uint32_t rt__byte_to_cp(uint8_t b)
{
    /* printable Latin-1 bytes map to themselves; the other 68 bytes to
     * U+0100.. in byte order */
    if ((b >= 33 && b <= 126) || (b >= 161 && b <= 172) || b >= 174) return b;
    uint32_t n = 0;
    for (uint32_t x = 0; x < b; x++)
        if (!((x >= 33 && x <= 126) || (x >= 161 && x <= 172) || x >= 174)) n++;
    return 256 + n;
}

int rt__cp_to_byte(uint32_t cp)
{
    if (cp < 256) {
        const uint8_t b = (uint8_t)cp;
        if ((b >= 33 && b <= 126) || (b >= 161 && b <= 172) || b >= 174) return b;
        return -1;
    }
    if (cp >= 256 + 68) return -1;
    uint32_t n = 0;
    for (uint32_t x = 0; x < 256; x++) {
        if (!((x >= 33 && x <= 126) || (x >= 161 && x <= 172) || x >= 174)) {
            if (256 + n == cp) return (int)x;
            n++;
        }
    }
    return -1;
}
