/*
 * runtime/rt_model.c — the llama graph's view of a GGUF file: keys and
 * tensors read and checked before anything runs (rt.h): the model's life
 * (rt_model_from_gguf's two walks, rt_model_open's mapping, its access
 * hints, huge pages and mlock, rt_model_close) and what it tells.
 *
 * The file is untrusted. gguf_open() has already checked the container
 * (counts, strings, types, offsets, sizes inside the file); the loader
 * checks every key the graph uses for its exact value type and range
 * (rt_model_hparams.c), every tensor for presence, exact shape and a type
 * the kernels handle (rt_model_tensor.c, rt_model_bind.c and the archs'
 * rt_model_{ssm,gemma4,gptoss}.c), and every size derived from them with
 * checked arithmetic. Errors name the key or tensor.
 */
#define _GNU_SOURCE
#include "runtime/rt_model_int.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

static void pick_main_type(struct rt_model *m)
{
    uint64_t bytes[GGUF_TYPE_COUNT] = {0};
    const struct rt_weight *all[12];
    for (uint32_t il = 0; il < m->hp.n_layer; il++) {
        const struct rt_layer *ly = &m->layers[il];
        all[0] = &ly->wq, all[1] = &ly->wk, all[2] = &ly->wv, all[3] = &ly->wo;
        all[4] = &ly->wgate, all[5] = &ly->wup, all[6] = &ly->wdown;
        int n = 7;
        if (rt_layer_is_recurrent(&m->hp, il)) /* (wq..wo are its first four) */
            all[7] = &ly->ssm_out, n = 8;
        for (int j = 0; j < n; j++)
            if (all[j]->data) bytes[all[j]->type] += all[j]->row_bytes * all[j]->n_out;
        if (m->hp.n_expert == 0) continue;
        all[0] = &ly->gate_exps, all[1] = &ly->up_exps, all[2] = &ly->down_exps;
        for (int j = 0; j < 3; j++)
            bytes[all[j]->type] += all[j]->row_bytes * all[j]->n_out * m->hp.n_expert;
    }
    uint32_t best = m->output.type;
    for (uint32_t t = 0; t < GGUF_TYPE_COUNT; t++)
        if (bytes[t] > bytes[best]) best = t;
    m->main_type = best;
}

// --- public ---

enum mw_status rt_model_from_gguf(const struct gguf_file *f, struct rt_model **out,
                                  struct mw_err *err)
{
    *out = NULL;
    struct rt_model *m = calloc(1, sizeof *m);
    if (!m) return MW_FAIL(err, MW_E_NOMEM, MW_ERR_OFF_NONE, "model struct");
    m->f = f;
    /* the kernel table only decides which types have a kernel here; every
     * variant supports the same types */
    struct rt_cpu cpu = rt_cpu_detect();
    m->ks = rt_kernels_select(&cpu);
    struct ld L = {.f = f, .m = m, .err = err, .arch = ""};
    enum mw_status s = read_hparams(&L);
    if (s) goto fail;
    /* pass 1: validate everything and count the owned floats */
    uint64_t n_floats = 0;
    if ((s = load_tensors(&L, &n_floats))) goto fail;
    uint64_t fb;
    size_t nb;
    if (!mw_mul_u64(n_floats, sizeof(float), &fb) || !mw_u64_to_size(fb, &nb)) {
        s = MW_FAIL(err, MW_E_NOMEM, MW_ERR_OFF_NONE, "norm/bias vectors too large");
        goto fail;
    }
    m->layers = calloc(m->hp.n_layer, sizeof *m->layers);
    m->fbuf = malloc(nb ? nb : 1);
    if (!m->layers || !m->fbuf) {
        s = MW_FAIL(err, MW_E_NOMEM, MW_ERR_OFF_NONE, "%llu bytes of norm/bias vectors",
                    (unsigned long long)nb);
        goto fail;
    }
    m->fbuf_floats = n_floats;
    /* pass 2: the same walk fills the views (cannot fail differently) */
    uint64_t again = 0;
    if ((s = load_tensors(&L, &again))) goto fail;
    if (again != n_floats) {
        s = MW_FAIL(err, MW_E_FORMAT, MW_ERR_OFF_NONE, "internal: tensor walk changed");
        goto fail;
    }
    pick_main_type(m);
    *out = m;
    return MW_OK;
fail:
    rt_model_close(m);
    return s;
}

/* Access hints for a mapping the runtime owns (madvise: a hint, a failure
 * changes nothing and is ignored). A MoE token reads n_expert_used of the
 * n_expert slabs of each 3-D ffn_{gate,up,down}_exps tensor; the kernel's
 * default read-around (a page fault reads the pages around it, up to the
 * device's read-ahead window) would also read the neighbouring experts that
 * were not routed, so those byte ranges get MADV_RANDOM (a fault reads its
 * own page). Rounded outward to whole pages: the at most two pages an expert
 * tensor shares with a neighbouring tensor lose read-around too, which costs
 * a one-page read of a dense tensor; rounded inward, the first and last
 * expert's edge pages would keep read-around and read into the experts next
 * to them. Dense tensors keep the default advice (sequential read-around);
 * read-around works on the file, so a fault in the router or the attention
 * tensors next to an expert tensor still reads into its edge experts. The
 * price: a cold routed slab is read one page per fault. rt_model_from_gguf
 * (calibration, plan: every expert is read) sets no hint. */
static void advise_experts(const struct rt_model *m)
{
    const long ps = sysconf(_SC_PAGESIZE);
    if (m->hp.n_expert == 0 || !m->layers || ps <= 0) return;
    const uintptr_t page = (uintptr_t)ps;
    for (uint32_t il = 0; il < m->hp.n_layer; il++) {
        const struct rt_layer *ly = &m->layers[il];
        const struct rt_weight *w[3] = {&ly->gate_exps, &ly->up_exps, &ly->down_exps};
        for (int j = 0; j < 3; j++) {
            if (!w[j]->data) continue;
            /* slab_bytes * n_expert is the tensor's size, inside the mapping
             * (checked at load); the mapping ends on a page boundary */
            const uintptr_t lo = (uintptr_t)w[j]->data;
            const uintptr_t hi = lo + (uintptr_t)(w[j]->slab_bytes * m->hp.n_expert);
            const uintptr_t a = lo & ~(page - 1), b = (hi + page - 1) & ~(page - 1);
            if (b > a) (void)madvise((void *)a, (size_t)(b - a), MADV_RANDOM);
        }
    }
}

enum mw_status rt_model_open(const char *path, const struct rt_model_opts *o,
                             struct rt_model **out, struct mw_err *err)
{
    *out = NULL;
    struct gguf_file *f = NULL;
    enum mw_status s = gguf_open(path, GGUF_OPEN_DEFAULT, &f, err);
    if (s) return s;
    struct rt_model *m = NULL;
    if ((s = rt_model_from_gguf(f, &m, err))) {
        gguf_close(f);
        return s;
    }
    m->own = f;
    advise_experts(m);
    rt__g4_advise(m);
    if (!(o && o->map_only)) m->copied_bytes = rt__place_weights(m);
    if (o && o->mlock) {
        const uint64_t size = gguf_file_size(f);
        if (size > 0 && mlock(gguf_base(f), (size_t)size) != 0) {
            const int e = errno;
            mw_err_set_path(err, path);
            s = MW_FAIL(err, MW_E_IO, MW_ERR_OFF_NONE,
                        "mlock of %llu bytes failed: %s (raise RLIMIT_MEMLOCK: ulimit -l)",
                        (unsigned long long)size, strerror(e));
            rt_model_close(m);
            return s;
        }
        m->locked = true;
    }
    *out = m;
    return MW_OK;
}

void rt_model_close(struct rt_model *m)
{
    if (!m) return;
    if (m->locked && m->own) munlock(gguf_base(m->own), (size_t)gguf_file_size(m->own));
    rt__g4_free(m);
    free(m->layers);
    free(m->fbuf);
    gguf_close(m->own);
    free(m);
}

const struct rt_hparams *rt_model_hparams(const struct rt_model *m) { return &m->hp; }
const struct gguf_file *rt_model_gguf(const struct rt_model *m) { return m->f; }
uint64_t rt_model_weight_bytes(const struct rt_model *m) { return m->weight_bytes; }
uint64_t rt_model_mapped_bytes(const struct rt_model *m) { return gguf_file_size(m->f); }
uint64_t rt_model_copied_bytes(const struct rt_model *m) { return m->copied_bytes; }
uint64_t rt_model_owned_bytes(const struct rt_model *m)
{
    return m->fbuf_floats * sizeof(float) + (uint64_t)m->hp.n_layer * sizeof(struct rt_layer) +
           sizeof *m;
}
uint32_t rt_model_main_type(const struct rt_model *m) { return m->main_type; }

uint64_t rt_model_active_weight_bytes(const struct rt_model *m)
{
    /* n_expert_used <= n_expert, so this never exceeds weight_bytes */
    return m->weight_bytes - m->expert_bytes + (uint64_t)m->hp.n_expert_used * m->expert_slab_bytes;
}

uint64_t rt_active_weight_bytes(const struct rt_hparams *hp, uint64_t weight_bytes,
                                uint64_t expert_bytes)
{
    if (hp->n_expert == 0 || expert_bytes > weight_bytes) return weight_bytes;
    const uint32_t k = hp->n_expert_used < hp->n_expert ? hp->n_expert_used : hp->n_expert;
    /* expert_bytes / n_expert first: no overflow, exact for whole slabs */
    return weight_bytes - expert_bytes + expert_bytes / hp->n_expert * k +
           expert_bytes % hp->n_expert * k / hp->n_expert;
}
