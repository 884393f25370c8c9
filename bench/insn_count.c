/* bench/insn_count.c — guest instructions executed, from qemu-user's log.
 *
 *   qemu-aarch64 -d in_asm,exec,nochain -D FIFO PROGRAM ... &
 *   insn_count FIFO [--nm NM_OUTPUT] [--top N]
 *
 * Debian 12's qemu-user (7.2) is built without TCG plugin support, so the
 * instruction count comes from qemu's own debug log instead:
 *   - `in_asm` prints every translated block once, as "IN: sym" followed by
 *     one "0xADDR:  insn" line per guest instruction, then a blank line;
 *   - `exec` prints "Trace CPU: HOSTPTR [CSBASE/PC/FLAGS/CFLAGS] sym" each
 *     time a block is entered; `nochain` stops qemu from jumping from block
 *     to block directly, so every execution of every block is logged.
 * The count is the sum, over the Trace lines, of the instruction count of the
 * block that starts at PC (as last translated: a retranslation at the same PC
 * replaces the entry before it runs). A block left early by an exception is
 * counted whole; in user mode that is the syscall at its end or a fault.
 *
 * The log is read as a stream (point -D at a FIFO: it is never stored).
 * With --nm (the output of `nm -n --defined-only` of a static binary) blocks
 * are attributed to the symbol at or below their PC and the top symbols are
 * printed to stderr.
 *
 * Output (stdout): "insns N\nblocks B\nunknown U\n" — U = Trace lines whose PC
 * had no in_asm entry (must be 0 for a trustworthy count).
 * Exit status: 0 ok, 1 unreadable log, 2 usage, 3 out of memory.
 */
#define _POSIX_C_SOURCE 200809L
#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct ent {
    uint64_t pc;    /* 0 = empty slot */
    uint32_t n;     /* instructions in the block */
    uint32_t sym;   /* index into syms, UINT32_MAX = none */
};

struct map {
    struct ent *e;
    size_t cap, used; /* cap: power of two */
};

static size_t hash64(uint64_t x)
{
    x ^= x >> 33;
    x *= 0xff51afd7ed558ccdULL;
    x ^= x >> 33;
    return (size_t)x;
}

static struct ent *map_slot(struct map *m, uint64_t pc)
{
    size_t i = hash64(pc) & (m->cap - 1);
    while (m->e[i].pc && m->e[i].pc != pc) i = (i + 1) & (m->cap - 1);
    return &m->e[i];
}

static int map_grow(struct map *m)
{
    if (m->cap > SIZE_MAX / 2 / sizeof(struct ent)) return -1;
    struct map n = {.cap = m->cap * 2, .used = m->used};
    n.e = calloc(n.cap, sizeof *n.e);
    if (!n.e) return -1;
    for (size_t i = 0; i < m->cap; i++)
        if (m->e[i].pc) *map_slot(&n, m->e[i].pc) = m->e[i];
    free(m->e);
    *m = n;
    return 0;
}

struct sym {
    uint64_t addr;
    char *name;
    uint64_t insns;
};

static int sym_cmp(const void *a, const void *b)
{
    const struct sym *x = a, *y = b;
    return x->addr < y->addr ? -1 : x->addr > y->addr;
}

static int ins_cmp(const void *a, const void *b)
{
    const struct sym *x = *(struct sym *const *)a, *y = *(struct sym *const *)b;
    return x->insns < y->insns ? 1 : x->insns > y->insns ? -1 : 0;
}

static uint32_t sym_find(const struct sym *s, size_t n, uint64_t pc)
{
    size_t lo = 0, hi = n; /* first index with addr > pc */
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (s[mid].addr <= pc) lo = mid + 1;
        else hi = mid;
    }
    return lo == 0 ? UINT32_MAX : (uint32_t)(lo - 1);
}

static int load_nm(const char *path, struct sym **out, size_t *n_out)
{
    FILE *f = fopen(path, "r");
    if (!f) return 1;
    struct sym *s = NULL;
    size_t n = 0, cap = 0;
    char line[4096];
    while (fgets(line, sizeof line, f)) {
        char *end;
        uint64_t a = strtoull(line, &end, 16);
        if (end == line || end[0] != ' ' || !end[1] || end[2] != ' ') continue;
        const char t = end[1];
        if (t != 'T' && t != 't' && t != 'W' && t != 'w') continue;
        char *name = end + 3;
        name[strcspn(name, "\n")] = 0;
        if (n == cap) {
            cap = cap ? cap * 2 : 1024;
            struct sym *ns = realloc(s, cap * sizeof *s);
            if (!ns) { fclose(f); return 3; }
            s = ns;
        }
        s[n].addr = a;
        s[n].insns = 0;
        if (!(s[n].name = strdup(name))) { fclose(f); return 3; }
        n++;
    }
    fclose(f);
    if (n) qsort(s, n, sizeof *s, sym_cmp);
    *out = s;
    *n_out = n;
    return 0;
}

static int finish(struct map *m, uint64_t pc, uint32_t n, const struct sym *syms, size_t n_syms)
{
    if (!n || !pc) return 0;
    if ((m->used + 1) * 2 > m->cap && map_grow(m)) return -1;
    struct ent *e = map_slot(m, pc);
    if (!e->pc) m->used++;
    e->pc = pc;
    e->n = n;
    e->sym = n_syms ? sym_find(syms, n_syms, pc) : UINT32_MAX;
    return 0;
}

int main(int argc, char **argv)
{
    const char *log = NULL, *nm = NULL;
    long top = 25;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--nm") && i + 1 < argc) nm = argv[++i];
        else if (!strcmp(argv[i], "--top") && i + 1 < argc) top = strtol(argv[++i], NULL, 10);
        else if (!log && argv[i][0] != '-') log = argv[i];
        else {
            fprintf(stderr, "usage: insn_count LOG|FIFO [--nm NM_OUTPUT] [--top N]\n");
            return 2;
        }
    }
    if (!log) {
        fprintf(stderr, "usage: insn_count LOG|FIFO [--nm NM_OUTPUT] [--top N]\n");
        return 2;
    }
    struct sym *syms = NULL;
    size_t n_syms = 0;
    if (nm) {
        int rc = load_nm(nm, &syms, &n_syms);
        if (rc) {
            fprintf(stderr, "insn_count: cannot read %s\n", nm);
            return rc;
        }
    }
    FILE *f = fopen(log, "r");
    if (!f) {
        fprintf(stderr, "insn_count: cannot open %s\n", log);
        return 1;
    }
    static char buf[1 << 20];
    setvbuf(f, buf, _IOFBF, sizeof buf);
    struct map m = {.cap = 1 << 16};
    if (!(m.e = calloc(m.cap, sizeof *m.e))) return 3;
    uint64_t insns = 0, blocks = 0, unknown = 0;
    uint64_t cur_pc = 0;
    uint32_t cur_n = 0;
    int in_block = 0;
    char line[4096];
    while (fgets(line, sizeof line, f)) {
        const int is_trace = line[0] == 'T' && !strncmp(line, "Trace ", 6);
        const int is_in = line[0] == 'I' && !strncmp(line, "IN:", 3);
        if (in_block && (is_trace || is_in)) {
            in_block = 0;
            if (finish(&m, cur_pc, cur_n, syms, n_syms)) return 3;
        }
        if (is_trace) {
            /* Trace 0: 0x7f.. [0000000001009331/00000000004000d8/00000001/00000200] */
            const char *p = strchr(line, '[');
            const char *s = p ? strchr(p, '/') : NULL;
            if (!s) continue;
            uint64_t pc = strtoull(s + 1, NULL, 16);
            struct ent *e = map_slot(&m, pc);
            blocks++;
            if (!e->pc) {
                unknown++;
                continue;
            }
            insns += e->n;
            if (e->sym != UINT32_MAX) syms[e->sym].insns += e->n;
        } else if (is_in) {
            in_block = 1;
            cur_n = 0;
            cur_pc = 0;
        } else if (in_block && line[0] == '0' && line[1] == 'x') {
            if (cur_n == 0) cur_pc = strtoull(line + 2, NULL, 16);
            cur_n++;
        } else if (in_block) {
            /* blank line or anything else: the block's listing is over */
            in_block = 0;
            if (finish(&m, cur_pc, cur_n, syms, n_syms)) return 3;
        }
    }
    const int bad = ferror(f);
    fclose(f);
    if (bad) {
        fprintf(stderr, "insn_count: read error on %s\n", log);
        return 1;
    }
    printf("insns %" PRIu64 "\nblocks %" PRIu64 "\nunknown %" PRIu64 "\n", insns, blocks, unknown);
    if (n_syms && top > 0) {
        struct sym **order = malloc(n_syms * sizeof *order);
        if (!order) return 3;
        for (size_t i = 0; i < n_syms; i++) order[i] = &syms[i];
        qsort(order, n_syms, sizeof *order, ins_cmp);
        for (size_t i = 0; i < n_syms && i < (size_t)top && order[i]->insns; i++)
            fprintf(stderr, "%14" PRIu64 " %6.2f%%  %s\n", order[i]->insns,
                    insns ? 100.0 * (double)order[i]->insns / (double)insns : 0.0, order[i]->name);
        free(order);
    }
    for (size_t i = 0; i < n_syms; i++) free(syms[i].name);
    free(syms);
    free(m.e);
    return 0;
}
