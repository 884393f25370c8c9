/*
 * runtime/rt_load.c — where the weights live while the model runs.
 *
 * rt_model_open maps the file read-only. A decoded token reads every dense
 * weight once, so decode streams the dense weights from memory each token;
 * through a file mapping of 4 KiB pages that stream walks one TLB entry per
 * page, and the page walks cost a fifth or more of the bandwidth on a
 * 2-core x86 VM (bench/README.md, "Where the weights live"). When the
 * kernel offers transparent huge pages (/sys/kernel/mm/transparent_hugepage/
 * enabled is [always] or [madvise]), rt__place_weights copies the runs of
 * dense tensors into anonymous memory advised MADV_HUGEPAGE and moves that
 * memory onto the same addresses with mremap: every pointer into the
 * mapping stays valid and the bytes are the file's. Never copied, read on
 * demand from the mapping:
 *   - per_layer_token_embd (Gemma 4): one row per token, kept on flash;
 *   - token_embd, unless the output projection is tied to it: one row per
 *     token;
 *   - blocks at or past n_layer (Qwen3.5's MTP layers): never run.
 * The 3-D expert tensors (*_exps.*), of which a token reads only the routed
 * experts' slabs, move too when the dense and the expert runs together fit
 * (a model much smaller than the machine's memory: every expert is read
 * soon, each streamed like a dense matrix); otherwise they stay mapped and
 * only the routed slabs are ever read, as on a phone.
 * What is copied is counted (rt_model_copied_bytes); it is memory the
 * kernel cannot drop and re-read as it can the mapped pages, so nothing is
 * copied when the copy would take more than half of the memory available
 * (core/mw_mem.h: MemAvailable or the cgroup's room), and
 * --map-only (rt_model_opts.map_only) keeps every weight mapped, as on a
 * phone where the app's memory must stay reclaimable. A failure anywhere
 * leaves that run mapped from the file: placement is an optimisation, never
 * a reason to fail a load.
 */
#define _GNU_SOURCE
#include "runtime/rt_int.h"

#include "core/mw_mem.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#define HUGE_SZ ((uintptr_t)2 << 20) /* x86-64 and arm64 (4 KiB granule) PMD size */
#define COPY_CHUNK ((size_t)8 << 20)  /* bytes copied between read-ahead requests */

bool rt__thp_offered(void)
{
    FILE *fp = fopen("/sys/kernel/mm/transparent_hugepage/enabled", "r");
    if (!fp) return false;
    char buf[128];
    const bool ok = fgets(buf, sizeof buf, fp) &&
                    (strstr(buf, "[always]") != NULL || strstr(buf, "[madvise]") != NULL);
    fclose(fp);
    return ok;
}

/* The memory this process may use (core/mw_mem.h: MemAvailable, a cgroup's
 * room, or MW_MEMAVAILABLE), 0 when unknown. */
static uint64_t mem_available(void)
{
    struct mw_mem_avail av;
    struct mw_err err;
    mw_err_clear(&err);
    return mw_mem_available(NULL, &av, &err) == MW_OK ? av.bytes : 0;
}

enum place { MAPPED, DENSE, EXPERT };

/* Where tensor t may go (see the header). */
static enum place place_of(const struct rt_model *m, const struct gguf_tensor *t,
                           const uint8_t *data)
{
    const char *nm = t->name;
    if (strcmp(nm, "per_layer_token_embd.weight") == 0) return MAPPED;
    if (strcmp(nm, "token_embd.weight") == 0) return m->output.data == data ? DENSE : MAPPED;
    if (strncmp(nm, "blk.", 4) == 0) {
        char *end;
        const unsigned long il = strtoul(nm + 4, &end, 10);
        if (end == nm + 4 || il >= m->hp.n_layer) return MAPPED;
    }
    return strstr(nm, "_exps.") ? EXPERT : DENSE;
}

struct span {
    uint64_t lo, hi; /* file offsets */
    enum place where;
};

static int span_cmp(const void *a, const void *b)
{
    const struct span *x = a, *y = b;
    return x->lo < y->lo ? -1 : x->lo > y->lo;
}

/* Copy [a, a + len) of the mapping into fresh anonymous memory advised
 * MADV_HUGEPAGE and put that memory in its place. a and len are page
 * multiples. The source pages are released as they are copied (they are
 * clean file pages: MADV_DONTNEED only unmaps them), so the resident set
 * never holds both copies of more than one chunk. false: nothing changed. */
static bool move_to_huge(uint8_t *a, size_t len)
{
    if (len > SIZE_MAX - HUGE_SZ) return false;
    uint8_t *r = mmap(NULL, len + HUGE_SZ, PROT_READ | PROT_WRITE,
                      MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (r == MAP_FAILED) return false;
    /* q = a (mod HUGE_SZ): mremap then moves whole huge pages */
    const uintptr_t want = (uintptr_t)a & (HUGE_SZ - 1);
    uint8_t *q = (uint8_t *)((((uintptr_t)r + HUGE_SZ - 1 - want) & ~(HUGE_SZ - 1)) + want);
    if (q < r) q += HUGE_SZ;
    if (q > r) munmap(r, (size_t)(q - r));
    const size_t tail = (size_t)(r + len + HUGE_SZ - (q + len));
    if (tail) munmap(q + len, tail);
#ifdef MADV_HUGEPAGE
    (void)madvise(q, len, MADV_HUGEPAGE);
#endif
    /* The source is read ahead exactly (MADV_WILLNEED, one chunk ahead) and
     * its faults read no more than their page (MADV_RANDOM): the kernel's
     * sequential read-ahead would otherwise run past the end of the run into
     * the tensors that must stay on flash next to it. */
    (void)madvise(a, len, MADV_RANDOM);
    (void)madvise(a, len < COPY_CHUNK ? len : COPY_CHUNK, MADV_WILLNEED);
    for (size_t off = 0; off < len; off += COPY_CHUNK) {
        const size_t n = len - off < COPY_CHUNK ? len - off : COPY_CHUNK;
        if (len - off > n) {
            const size_t nx = len - off - n < COPY_CHUNK ? len - off - n : COPY_CHUNK;
            (void)madvise(a + off + n, nx, MADV_WILLNEED);
        }
        memcpy(q + off, a + off, n);
        (void)madvise(a + off, n, MADV_DONTNEED);
    }
    if (mprotect(q, len, PROT_READ) != 0 ||
        mremap(q, len, len, MREMAP_MAYMOVE | MREMAP_FIXED, a) == MAP_FAILED) {
        munmap(q, len);
        return false;
    }
    return true;
}

uint64_t rt__place_weights(struct rt_model *m)
{
    const struct gguf_file *f = m->own;
    const long psl = sysconf(_SC_PAGESIZE);
    if (!f || psl <= 0 || !rt__thp_offered()) return 0;
    const uintptr_t ps = (uintptr_t)psl;
    const uint64_t nt = gguf_tensor_count(f);
    if (nt == 0 || nt > SIZE_MAX / sizeof(struct span)) return 0;
    struct span *sp = malloc((size_t)nt * sizeof *sp);
    if (!sp) return 0;
    for (uint64_t i = 0; i < nt; i++) {
        const struct gguf_tensor *t = gguf_tensor_get(f, i);
        sp[i] = (struct span){t->file_off, t->file_off + t->nbytes,
                              place_of(m, t, gguf_tensor_data(f, i))};
    }
    qsort(sp, (size_t)nt, sizeof *sp, span_cmp);
    /* runs of consecutive tensors that move (the padding between them
     * included), rounded inward to whole pages; runs under one huge page gain
     * nothing. Pass 0 sizes the dense runs alone and with the experts, pass 1
     * moves what fits. */
    uint8_t *base = (uint8_t *)(uintptr_t)gguf_base(f);
    uint64_t total[2] = {0, 0}, copied = 0;
    bool experts = false;
    for (int pass = 0; pass < 2; pass++) {
        if (pass == 1) {
            const uint64_t avail = mem_available();
            if (avail == 0) break;
            experts = total[1] > total[0] && total[1] <= avail / 2;
            if (!experts && (total[0] == 0 || total[0] > avail / 2)) break;
        }
        for (int with = 0; with < 2; with++) {
            if (pass == 1 && with != (int)experts) continue;
            for (uint64_t i = 0; i < nt;) {
                if (sp[i].where == MAPPED || (sp[i].where == EXPERT && !with)) {
                    i++;
                    continue;
                }
                const uint64_t lo = sp[i].lo;
                uint64_t hi = sp[i].hi;
                for (i++; i < nt && (sp[i].where == DENSE || (sp[i].where == EXPERT && with)); i++)
                    hi = sp[i].hi > hi ? sp[i].hi : hi;
                const uintptr_t a = ((uintptr_t)base + (uintptr_t)lo + ps - 1) & ~(ps - 1);
                const uintptr_t b = ((uintptr_t)base + (uintptr_t)hi) & ~(ps - 1);
                if (b <= a || b - a < HUGE_SZ) continue;
                if (pass == 0)
                    total[with] += (uint64_t)(b - a);
                else if (move_to_huge((uint8_t *)a, (size_t)(b - a)))
                    copied += (uint64_t)(b - a);
            }
        }
    }
    free(sp);
    return copied;
}
