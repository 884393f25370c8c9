/* hf/hf_convert.c — the streaming convert pipeline: HF dir -> GGUF, one tensor
 * at a time through a bounded buffer, atomic and checksummed by the gguf
 * writer. Rows are converted with quant/'s type traits, by the threads of an
 * optional mw_pool (each row is a function of its source row alone, so the
 * output does not depend on the thread count). */
#define _XOPEN_SOURCE 700
#include "hf/hf_int.h"
#include "hf/hf_tok.h"
#include "quant/quant.h"
#include "core/mw_pool.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define HF_DEFAULT_CHUNK ((size_t)4 << 20)

// --- kernels -------------------------------------------------------------------

static float f32_from_bits(uint32_t u)
{
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

static uint32_t bits_from_f32(float f)
{
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    return u;
}

/* n elements of dtype dt (little-endian bytes) -> f32; f16 through a
 * 65536-entry table of mw_f16_to_f32 (built once per plan) */
static void load_row(enum hf_dtype dt, const uint8_t *src, float *dst, uint64_t n,
                     const float *f16_table)
{
    switch (dt) {
    case HF_DT_F16:
        for (uint64_t i = 0; i < n; i++) dst[i] = f16_table[mw_le16(src + 2 * i)];
        break;
    case HF_DT_BF16:
        for (uint64_t i = 0; i < n; i++) dst[i] = f32_from_bits((uint32_t)mw_le16(src + 2 * i) << 16);
        break;
    case HF_DT_F32:
        for (uint64_t i = 0; i < n; i++) dst[i] = f32_from_bits(mw_le32(src + 4 * i));
        break;
    default: /* the plan admits F16/BF16/F32 only */
        memset(dst, 0, (size_t)n * sizeof *dst);
        break;
    }
}

/* f32 -> n elements of ggml type t: quant/'s ggml-exact row conversion
 * (F32/F16/BF16/Q8_0 are the convert types; every one has from_float). */
static void store_row(uint32_t t, const float *src, uint8_t *dst, uint64_t n)
{
    const struct quant_traits *qt = quant_traits_get(t);
    if (qt && qt->from_float) qt->from_float(src, dst, n, NULL);
}

/* Are the source bytes already the output bytes? */
static bool same_repr(enum hf_dtype dt, uint32_t t)
{
    return (dt == HF_DT_F16 && t == GGUF_TYPE_F16) || (dt == HF_DT_BF16 && t == GGUF_TYPE_BF16) ||
           (dt == HF_DT_F32 && t == GGUF_TYPE_F32);
}

/* GGUF row r of a permuted tensor comes from HF row perm_src(r)
 * (docs/formats.md §6.3: GGUF row h*hd + 2i + j <- HF row h*hd + j*hd/2 + i). */
static uint64_t perm_src(uint64_t r, uint64_t hd)
{
    const uint64_t h = r / hd, k = r % hd, half = hd / 2;
    return h * hd + (k % 2) * half + k / 2;
}

/* One chunk of rows [r0, r1) of a converted tensor, split among the threads
 * of a pool: thread ith converts rows r0 + n*ith/nth .. r0 + n*(ith+1)/nth
 * into their own slots of obuf. Every row is a pure function of its source
 * row, so the bytes do not depend on the thread count. */
struct conv_job {
    const struct hf_plan *p;
    const struct hf_plan_tensor *e;
    uint64_t row_in, row_out, row_elems, hd;
    uint64_t r0, r1;
    uint8_t *obuf;
    float *fbuf;      /* nth scratch rows of row_elems floats */
    uint8_t *cbuf;    /* nth scratch source rows (column gathers), or NULL */
    bool copy;        /* same representation: permute only */
    bool add_one;     /* HF_XFORM_ADD_ONE */
    const uint16_t *h16; /* BF16<->F16: one table lookup per element, or NULL */
    const struct hf_fp8 *fp8; /* F8_E4M3 source: its scales (hf_fp8.c), or NULL */
};

/* The 16-bit to 16-bit conversions as tables of the two-step result
 * (load_row + store_row): the same bytes; a BF16 -> F16 conversion's user
 * time halves. */
static const uint16_t *h16_table(const struct hf_plan *p, enum hf_dtype dt, uint32_t t)
{
    if (dt == HF_DT_BF16 && t == GGUF_TYPE_F16) return p->bf16_to_f16;
    if (dt == HF_DT_F16 && t == GGUF_TYPE_BF16) return p->f16_to_bf16;
    return NULL;
}

/* Gemma's norms: w + 1 as llama.cpp's converter computes it
 * (convert_hf_to_gguf.py prepare_tensors: a tensor that is neither F16 nor
 * F32 — BF16 — is first made F32; modify_tensors then adds 1 in that dtype,
 * torch rounding the sum to nearest even): F16 sources add in F16, BF16
 * and F32 sources in F32. The result then goes to the output type. */
static void add_one_row(enum hf_dtype dt, float *x, uint64_t n)
{
    for (uint64_t i = 0; i < n; i++) {
        const float v = x[i] + 1.0f;
        x[i] = dt == HF_DT_F16 ? mw_f16_to_f32(mw_f32_to_f16(v)) : v;
    }
}

/* torch.exp of a float32 tensor as Debian's torch computes it (and
 * llama.cpp's converter with it): SLEEF's expf_u10 with FMA (sleefsimdsp.c
 * xexpf), bit for bit on every input tried, unlike libm's expf. */
static float pow2i(int q)
{
    return f32_from_bits((uint32_t)(q + 0x7f) << 23);
}

float hf__torch_expf(float d)
{
    const int q = (int)rintf(d * 1.442695040888963407359924681001892137426645954152985934135449406931f);
    float s = fmaf((float)q, -0.693145751953125f, d);
    s = fmaf((float)q, -1.428606765330187045e-06f, s);
    float u = 0.000198527617612853646278381f;
    u = fmaf(u, s, 0.00139304355252534151077271f);
    u = fmaf(u, s, 0.00833336077630519866943359f);
    u = fmaf(u, s, 0.0416664853692054748535156f);
    u = fmaf(u, s, 0.166666671633720397949219f);
    u = fmaf(u, s, 0.5f);
    u = 1.0f + fmaf(s * s, u, s);
    u = u * pow2i(q >> 1) * pow2i(q - (q >> 1));
    if (d < -104.0f) u = 0.0f;
    if (d > 100.0f) u = INFINITY;
    return u;
}

static void conv_rows(const struct conv_job *j, uint64_t a, uint64_t b, float *fbuf, uint8_t *cbuf)
{
    const struct hf_st_tensor *src = j->e->src;
    const uint32_t *cm = j->e->col_map;
    const uint64_t es = hf_dtype_size(src->dtype);
    for (uint64_t r = a; r < b; r++) {
        const uint64_t sr = j->e->row_map ? j->e->row_map[r] : j->hd ? perm_src(r, j->hd) : r;
        const uint8_t *in = src->data + sr * j->row_in;
        if (cm) { /* column gather (qwen35 ssm_out's V heads) */
            for (uint64_t k = 0; k < j->row_elems; k++) memcpy(cbuf + k * es, in + cm[k] * es, es);
            in = cbuf;
        }
        uint8_t *o = j->obuf + (r - j->r0) * j->row_out;
        if (j->fp8) { /* E4M3 x scale in F32, then one rounding to the output type */
            hf__fp8_row(j->fp8, in, sr, cm, fbuf, j->row_elems);
            store_row(j->e->type, fbuf, o, j->row_elems);
        } else if (j->copy) {
            memcpy(o, in, (size_t)j->row_in);
        } else if (j->h16) {
            for (uint64_t k = 0; k < j->row_elems; k++)
                mw_put_le16(o + 2 * k, j->h16[mw_le16(in + 2 * k)]);
        } else {
            load_row(src->dtype, in, fbuf, j->row_elems, j->p->f16_table);
            if (j->add_one) add_one_row(src->dtype, fbuf, j->row_elems);
            if (j->e->xform == HF_XFORM_NEG_EXP)
                for (uint64_t k = 0; k < j->row_elems; k++) fbuf[k] = -hf__torch_expf(fbuf[k]);
            store_row(j->e->type, fbuf, o, j->row_elems);
        }
    }
}

static void conv_task(void *arg, unsigned ith, unsigned nth)
{
    const struct conv_job *j = arg;
    const uint64_t n = j->r1 - j->r0;
    const uint64_t a = j->r0 + n * ith / nth, b = j->r0 + n * (ith + 1) / nth;
    conv_rows(j, a, b, j->fbuf + (size_t)ith * (size_t)j->row_elems,
              j->cbuf ? j->cbuf + (size_t)ith * (size_t)j->row_in : NULL);
}

enum mw_status hf_plan_stream_tensor(const struct hf_plan *p, uint64_t i, size_t chunk_bytes,
                                     hf_sink_fn sink, void *ud, struct mw_err *err)
{
    return hf_plan_stream_tensor_mt(p, i, chunk_bytes, NULL, sink, ud, err);
}

static enum mw_status stream_entry(const struct hf_plan *p, const struct hf_plan_tensor *e,
                                   size_t chunk_bytes, struct mw_pool *pool, hf_sink_fn sink,
                                   void *ud, struct mw_err *err);

enum mw_status hf_plan_stream_tensor_mt(const struct hf_plan *p, uint64_t i, size_t chunk_bytes,
                                        struct mw_pool *pool, hf_sink_fn sink, void *ud,
                                        struct mw_err *err)
{
    if (i >= p->n) return MW_FAIL(err, MW_E_USAGE, MW_ERR_OFF_NONE, "no tensor %llu",
                                  (unsigned long long)i);
    if (chunk_bytes == 0) chunk_bytes = HF_DEFAULT_CHUNK;
    const struct hf_plan_tensor *e = &p->t[i];
    if (e->xform == HF_XFORM_MXFP4 || e->xform == HF_XFORM_SPLIT)
        return hf__gptoss_stream(e, chunk_bytes, sink, ud, err);
    if (e->n_src == 0) return stream_entry(p, e, chunk_bytes, pool, sink, ud, err);
    /* stacked experts: expert by expert, each a 2-D tensor of its own
     * source (own shard, own dtype) streamed and released like any other:
     * the bytes of torch.stack(experts) without holding more than a chunk */
    struct hf_plan_tensor sub = *e;
    sub.n_src = 0;
    sub.srcs = NULL;
    sub.srcs_shard = NULL;
    sub.n_dims = 2;
    sub.ne[2] = sub.ne[3] = 1;
    if (!gguf_tensor_nbytes(sub.type, sub.ne, &sub.nbytes))
        return MW_FAIL(err, MW_E_FORMAT, MW_ERR_OFF_NONE, "size of '%s' overflows", e->name);
    enum mw_status s = MW_OK;
    for (uint32_t x = 0; x < e->n_src && s == MW_OK; x++) {
        sub.src = e->srcs[x];
        sub.shard = e->srcs_shard[x];
        s = stream_entry(p, &sub, chunk_bytes, pool, sink, ud, err);
    }
    return s;
}

static enum mw_status stream_entry(const struct hf_plan *p, const struct hf_plan_tensor *e,
                                   size_t chunk_bytes, struct mw_pool *pool, hf_sink_fn sink,
                                   void *ud, struct mw_err *err)
{
    enum mw_status s = MW_OK;

    if (e->gen) { /* generated 1-D F32 data (rope_freqs, LongRoPE factors) */
        size_t n = (size_t)e->ne[0];
        uint8_t *buf = malloc(n * 4 + 1);
        if (!buf) return MW_FAIL(err, MW_E_NOMEM, MW_ERR_OFF_NONE, "out of memory");
        for (size_t k = 0; k < n; k++) mw_put_le32(buf + 4 * k, bits_from_f32(e->gen[k]));
        s = sink(ud, buf, n * 4, err);
        free(buf);
        return s;
    }

    const struct hf_st_tensor *src = e->src;
    const uint32_t in_es = hf_dtype_size(src->dtype);
    /* rows as the permutation sees them: a 1-D bias permutes single elements,
     * a 1-D gather moves single elements */
    const bool one = e->xform == HF_XFORM_PERMUTE || e->row_map;
    const uint64_t row_elems = e->n_dims == 1 ? (one ? 1 : e->ne[0]) : e->ne[0];
    const uint64_t n_rows = e->n_dims == 1 ? (one ? e->ne[0] : 1) : e->ne[1];
    const bool gather = e->row_map || e->col_map;
    const uint64_t row_in = row_elems * in_es;
    const uint64_t row_out = (n_rows > 0) ? e->nbytes / n_rows : 0;
    const uint64_t hd = e->xform == HF_XFORM_PERMUTE ? n_rows / e->perm_heads : 0;

    if (e->xform == HF_XFORM_NONE && !gather && same_repr(src->dtype, e->type)) {
        /* verbatim copy straight from the mapping */
        uint64_t done = 0;
        while (done < src->nbytes && s == MW_OK) {
            uint64_t n = src->nbytes - done;
            if (n > chunk_bytes) n = chunk_bytes;
            s = sink(ud, src->data + done, (size_t)n, err);
            hf_st_release(e->shard, src->file_off + done, n);
            done += n;
        }
        return s;
    }

    const unsigned nth = pool ? mw_pool_size(pool) : 1;
    uint64_t rows_per_chunk = row_out ? chunk_bytes / row_out : 1;
    if (rows_per_chunk == 0) rows_per_chunk = 1;
    if (rows_per_chunk > n_rows) rows_per_chunk = n_rows;
    size_t out_cap, f_cap;
    uint64_t f_bytes;
    if (!mw_u64_to_size(rows_per_chunk * row_out, &out_cap) ||
        !mw_mul_u64(row_elems * sizeof(float), nth, &f_bytes) || !mw_u64_to_size(f_bytes, &f_cap))
        return MW_FAIL(err, MW_E_NOMEM, MW_ERR_OFF_NONE, "row too large");
    uint8_t *obuf = malloc(out_cap ? out_cap : 1);
    float *fbuf = malloc(f_cap ? f_cap : 1);
    uint8_t *cbuf = e->col_map ? malloc((size_t)row_in * nth) : NULL; /* row_in <= f_cap */
    if (!obuf || !fbuf || (e->col_map && !cbuf)) {
        free(obuf);
        free(fbuf);
        free(cbuf);
        return MW_FAIL(err, MW_E_NOMEM, MW_ERR_OFF_NONE, "cannot allocate %zu bytes of scratch",
                       out_cap + f_cap);
    }
    const bool elementwise = e->xform == HF_XFORM_ADD_ONE || e->xform == HF_XFORM_NEG_EXP;
    struct hf_fp8 *fp8 = NULL;
    if (src->dtype == HF_DT_F8_E4M3) {
        fp8 = malloc(sizeof *fp8);
        s = fp8 ? hf__fp8_open(p->m, e->shard, src, fp8, err)
                : MW_FAIL(err, MW_E_NOMEM, MW_ERR_OFF_NONE, "out of memory");
        if (s != MW_OK) {
            free(fp8);
            free(obuf);
            free(fbuf);
            free(cbuf);
            return s;
        }
    }
    struct conv_job job = {.p = p, .e = e, .row_in = row_in, .row_out = row_out,
                           .row_elems = row_elems, .hd = hd, .obuf = obuf, .fbuf = fbuf,
                           .cbuf = cbuf,
                           .copy = same_repr(src->dtype, e->type) && !elementwise,
                           .add_one = e->xform == HF_XFORM_ADD_ONE,
                           .h16 = elementwise ? NULL : h16_table(p, src->dtype, e->type),
                           .fp8 = fp8};
    uint64_t released = 0;
    for (uint64_t r0 = 0; r0 < n_rows && s == MW_OK; r0 += rows_per_chunk) {
        uint64_t r1 = r0 + rows_per_chunk;
        if (r1 > n_rows) r1 = n_rows;
        job.r0 = r0;
        job.r1 = r1;
        if (nth > 1 && r1 - r0 > 1) mw_pool_run(pool, conv_task, &job);
        else conv_rows(&job, r0, r1, fbuf, cbuf);
        s = sink(ud, obuf, (size_t)((r1 - r0) * row_out), err);
        if (!hd && !e->row_map) { /* sequential: drop what was read */
            hf_st_release(e->shard, src->file_off + released, (r1 * row_in) - released);
            released = r1 * row_in;
        }
    }
    if (hd || e->row_map) hf_st_release(e->shard, src->file_off, src->nbytes);
    free(fp8);
    free(obuf);
    free(fbuf);
    free(cbuf);
    return s;
}

// --- convert ---------------------------------------------------------------------------

struct sink_ctx {
    struct gguf_writer *w;
    const struct hf_convert_opts *o;
    uint64_t done, total, n_tensors, cur;
    const char *name;
    uint64_t last_report;
};

static enum mw_status writer_sink(void *ud, const void *data, size_t n, struct mw_err *err)
{
    struct sink_ctx *c = ud;
    enum mw_status s = gguf_writer_write(c->w, data, n, err);
    c->done += n;
    if (s == MW_OK && c->o->progress && c->done - c->last_report >= ((uint64_t)64 << 20)) {
        c->last_report = c->done;
        c->o->progress(c->o->progress_ud, c->done, c->total, c->cur + 1, c->n_tensors, c->name);
    }
    return s;
}

#define TRY(expr)                      \
    do {                               \
        s = (expr);                    \
        if (s != MW_OK) goto out;      \
    } while (0)

static enum mw_status set_family_kvs(struct gguf_writer *w, const struct hf_config *c,
                                     enum hf_out_type ot, struct mw_err *err);
static enum mw_status set_delta_net_kvs(struct gguf_writer *w, const struct hf_config *c,
                                        enum hf_out_type ot, struct mw_err *err);

static enum mw_status set_arch_kvs(struct gguf_writer *w, const struct hf_config *c,
                                   enum hf_out_type ot, struct mw_err *err)
{
    if (c->arch == HF_ARCH_GEMMA2 || c->arch == HF_ARCH_GEMMA3 || c->arch == HF_ARCH_PHI3)
        return set_family_kvs(w, c, ot, err);
    if (hf_arch_is_delta_net(c->arch)) return set_delta_net_kvs(w, c, ot, err);
    if (c->arch == HF_ARCH_GEMMA4) return hf__gemma4_kvs(w, c, ot, err);
    if (c->arch == HF_ARCH_GPTOSS) return hf__gptoss_kvs(w, c, ot, err);
    struct hf_kvs k;
    hf__kvs_init(&k, w, c->gguf_arch, err);
    hf__kv_u32(&k, "block_count", c->n_layer);
    hf__kv_u32(&k, "context_length", c->n_ctx);
    hf__kv_u32(&k, "embedding_length", c->n_embd);
    hf__kv_u32(&k, "feed_forward_length", c->n_ff);
    hf__kv_u32(&k, "attention.head_count", c->n_head);
    hf__kv_u32(&k, "attention.head_count_kv", c->n_head_kv);
    if (c->has_rope_theta) hf__kv_f32(&k, "rope.freq_base", c->rope_theta);
    hf__kv_f32(&k, "attention.layer_norm_rms_epsilon", c->rms_eps);
    if (hf_arch_is_moe(c->arch)) { /* TextModel.set_gguf_parameters: after the epsilon */
        hf__kv_u32(&k, "expert_count", c->n_expert);
        hf__kv_u32(&k, "expert_used_count", c->n_expert_used);
    }
    if (c->head_dim_explicit) {
        hf__kv_u32(&k, "attention.key_length", c->head_dim);
        hf__kv_u32(&k, "attention.value_length", c->head_dim);
    }
    hf__kv_file_type(&k, hf_out_type_ftype(ot));
    /* Qwen2MoeModel (and Qwen3MoeModel): the experts' widths, when in config.json */
    if (c->has_n_ff_exp) hf__kv_u32(&k, "expert_feed_forward_length", c->n_ff_exp);
    if (c->n_ff_shexp)
        hf__kv_u32(&k, "expert_shared_feed_forward_length", c->n_ff_shexp);
    if (c->arch == HF_ARCH_LLAMA || c->arch == HF_ARCH_MISTRAL || c->arch == HF_ARCH_MIXTRAL) {
        hf__kv_u32(&k, "vocab_size", c->n_vocab);
        hf__kv_u32(&k, "rope.dimension_count", c->head_dim);
    }
    if (c->rope_scaling == HF_ROPE_LINEAR) {
        hf__kv_str(&k, "rope.scaling.type", "linear");
        hf__kv_f32(&k, "rope.scaling.factor", (float)c->rope_factor);
    }
    return k.s;
}

/* Gemma 2, Gemma 3, Phi-3: the keys, in the order, of their
 * convert_hf_to_gguf.py classes (conversion/gemma.py Gemma2Model /
 * Gemma3Model, conversion/phi.py Phi3MiniModel; Qwen3 is the base
 * TextModel's, as qwen2, in set_arch_kvs). */
static enum mw_status set_family_kvs(struct gguf_writer *w, const struct hf_config *c,
                                     enum hf_out_type ot, struct mw_err *err)
{
    struct hf_kvs k;
    hf__kvs_init(&k, w, c->gguf_arch, err);
    switch (c->arch) {
    case HF_ARCH_GEMMA2:
        hf__kv_u32(&k, "context_length", c->n_ctx);
        hf__kv_u32(&k, "embedding_length", c->n_embd);
        hf__kv_u32(&k, "block_count", c->n_layer);
        hf__kv_u32(&k, "feed_forward_length", c->n_ff);
        hf__kv_u32(&k, "attention.head_count", c->n_head);
        hf__kv_u32(&k, "attention.head_count_kv", c->n_head_kv);
        hf__kv_f32(&k, "attention.layer_norm_rms_epsilon", c->rms_eps);
        hf__kv_u32(&k, "attention.key_length", c->head_dim);
        hf__kv_u32(&k, "attention.value_length", c->head_dim);
        hf__kv_file_type(&k, hf_out_type_ftype(ot));
        hf__kv_f32(&k, "attn_logit_softcapping", c->attn_softcap);
        hf__kv_f32(&k, "final_logit_softcapping", c->final_softcap);
        hf__kv_u32(&k, "attention.sliding_window", c->n_swa);
        break;
    case HF_ARCH_GEMMA3:
        /* the base class's keys, then Gemma3Model's (a key written twice
         * keeps its first place: GGUFWriter overwrites in place) */
        hf__kv_u32(&k, "block_count", c->n_layer);
        hf__kv_u32(&k, "context_length", c->n_ctx);
        hf__kv_u32(&k, "embedding_length", c->n_embd);
        hf__kv_u32(&k, "feed_forward_length", c->n_ff);
        hf__kv_u32(&k, "attention.head_count", c->n_head);
        hf__kv_u32(&k, "attention.head_count_kv", c->n_head_kv);
        if (c->rope_scaling == HF_ROPE_LINEAR) {
            hf__kv_str(&k, "rope.scaling.type", "linear");
            hf__kv_f32(&k, "rope.scaling.factor", (float)c->rope_factor);
        }
        hf__kv_f32(&k, "rope.freq_base", c->rope_theta);
        hf__kv_f32(&k, "rope.freq_base_swa", c->rope_theta_swa);
        hf__kv_f32(&k, "attention.layer_norm_rms_epsilon", c->rms_eps);
        hf__kv_u32(&k, "attention.key_length", c->head_dim);
        hf__kv_u32(&k, "attention.value_length", c->head_dim);
        hf__kv_file_type(&k, hf_out_type_ftype(ot));
        if (c->final_softcap != 0.0f)
            hf__kv_f32(&k, "final_logit_softcapping", c->final_softcap);
        if (c->has_n_swa) hf__kv_u32(&k, "attention.sliding_window", c->n_swa);
        break;
    case HF_ARCH_PHI3:
        hf__kv_u32(&k, "context_length", c->n_ctx);
        hf__kv_u32(&k, "rope.scaling.original_context_length", c->rope_orig_ctx);
        hf__kv_u32(&k, "embedding_length", c->n_embd);
        hf__kv_u32(&k, "feed_forward_length", c->n_ff);
        hf__kv_u32(&k, "block_count", c->n_layer);
        hf__kv_u32(&k, "attention.head_count", c->n_head);
        hf__kv_u32(&k, "attention.head_count_kv", c->n_head_kv);
        hf__kv_f32(&k, "attention.layer_norm_rms_epsilon", c->rms_eps);
        hf__kv_u32(&k, "rope.dimension_count", c->n_rot);
        hf__kv_f32(&k, "rope.freq_base", c->rope_theta);
        hf__kv_file_type(&k, hf_out_type_ftype(ot));
        hf__kv_u32(&k, "attention.sliding_window", c->n_swa);
        /* rope.scaling.attn_factor (LongRoPE): written second, see write_kvs */
        break;
    default:
        break;
    }
    return k.s;
}

/* Qwen3.5 (dense, MoE) and Qwen3-Next: the base TextModel's keys (block
 * count with the MTP blocks, rope.dimension_sections from mrope_section
 * before the RoPE base, no feed_forward_length without intermediate_size),
 * Qwen2MoeModel's expert widths, _QwenMtpMixin's nextn_predict_layers,
 * Qwen3NextModel's delta net keys and rope.dimension_count, and last
 * _Qwen35MRopeMixin's default sections when config.json had none. */
static enum mw_status set_delta_net_kvs(struct gguf_writer *w, const struct hf_config *c,
                                        enum hf_out_type ot, struct mw_err *err)
{
    struct hf_kvs k;
    hf__kvs_init(&k, w, c->gguf_arch, err);
    hf__kv_u32(&k, "block_count", c->n_layer + c->n_nextn);
    hf__kv_u32(&k, "context_length", c->n_ctx);
    hf__kv_u32(&k, "embedding_length", c->n_embd);
    if (c->has_n_ff) hf__kv_u32(&k, "feed_forward_length", c->n_ff);
    hf__kv_u32(&k, "attention.head_count", c->n_head);
    hf__kv_u32(&k, "attention.head_count_kv", c->n_head_kv);
    if (c->has_rope_sections)
        hf__kv_arr(&k, "rope.dimension_sections", GGUF_VT_I32, c->rope_sections, 4);
    if (c->has_rope_theta) hf__kv_f32(&k, "rope.freq_base", c->rope_theta);
    hf__kv_f32(&k, "attention.layer_norm_rms_epsilon", c->rms_eps);
    if (c->n_expert) {
        hf__kv_u32(&k, "expert_count", c->n_expert);
        hf__kv_u32(&k, "expert_used_count", c->n_expert_used);
    }
    if (c->head_dim_explicit) {
        hf__kv_u32(&k, "attention.key_length", c->head_dim);
        hf__kv_u32(&k, "attention.value_length", c->head_dim);
    }
    hf__kv_file_type(&k, hf_out_type_ftype(ot));
    if (c->has_n_ff_exp) hf__kv_u32(&k, "expert_feed_forward_length", c->n_ff_exp);
    if (c->n_ff_shexp)
        hf__kv_u32(&k, "expert_shared_feed_forward_length", c->n_ff_shexp);
    if (c->n_nextn) hf__kv_u32(&k, "nextn_predict_layers", c->n_nextn);
    hf__kv_u32(&k, "ssm.conv_kernel", c->ssm_conv_kernel);
    hf__kv_u32(&k, "ssm.state_size", c->ssm_d_state);
    hf__kv_u32(&k, "ssm.group_count", c->ssm_n_group);
    hf__kv_u32(&k, "ssm.time_step_rank", c->ssm_dt_rank);
    hf__kv_u32(&k, "ssm.inner_size", c->ssm_d_inner);
    hf__kv_u32(&k, "full_attention_interval", c->full_attn_interval);
    hf__kv_u32(&k, "rope.dimension_count", c->n_rot);
    if (c->arch != HF_ARCH_QWEN3NEXT && !c->has_rope_sections)
        hf__kv_arr(&k, "rope.dimension_sections", GGUF_VT_I32, c->rope_sections, 4);
    return k.s;
}

/* The tokenizer of hf_dir, whose size must be config.json's vocab_size. */
static enum mw_status load_tok(const char *hf_dir, const struct hf_config *c, struct hf_tok **tok,
                               struct mw_err *err)
{
    enum mw_status s = hf_tok_load_n(hf_dir, (int64_t)c->n_vocab, tok, err);
    if (s != MW_OK) return s;
    if (hf_tok_n_vocab(*tok) != c->n_vocab) {
        mw_err_set_path(err, hf_tok_source(*tok));
        mw_err_set_where(err, "tokenizer");
        s = MW_FAIL(err, MW_E_FORMAT, MW_ERR_OFF_NONE,
                    "%u tokens, but config.json vocab_size (the embedding rows) is %u",
                    hf_tok_n_vocab(*tok), c->n_vocab);
        hf_tok_free(*tok);
        *tok = NULL;
    }
    return s;
}

/* The metadata, in convert_hf_to_gguf.py's order (general.name: name, or
 * the directory's name). */
static enum mw_status write_kvs(struct gguf_writer *w, const char *hf_dir,
                                const struct hf_config *c, const struct hf_plan *p,
                                const struct hf_tok *tok, const char *name, enum hf_out_type ot,
                                struct mw_err *err)
{
    enum mw_status s;
    char base[256];
    hf__util_basename(hf_dir, base, sizeof base);
    if (strcmp(base, ".") == 0 || strcmp(base, "..") == 0 || strcmp(base, "/") == 0) {
        char *real = realpath(hf_dir, NULL); /* "convert . -o x": name the directory */
        if (real) hf__util_basename(real, base, sizeof base);
        free(real);
    }
    TRY(gguf_writer_set_str(w, "general.architecture", c->gguf_arch, err));
    if (c->rope_scaling == HF_ROPE_LONGROPE) {
        /* Phi3MiniModel writes it from generate_extra_tensors, which the
         * converter runs before the other keys: it lands second */
        char key[96];
        snprintf(key, sizeof key, "%s.rope.scaling.attn_factor", c->gguf_arch);
        TRY(gguf_writer_set_f32(w, key, c->rope_attn_factor, err));
    }
    TRY(gguf_writer_set_str(w, "general.type", "model", err));
    TRY(gguf_writer_set_str(w, "general.name", name ? name : base, err));
    TRY(set_arch_kvs(w, c, ot, err));
    TRY(gguf_writer_set_u32(w, "general.quantization_version", 2, err));
    TRY(hf_tok_write_gguf(tok, w, hf_arch_name(c->arch), err));
    TRY(gguf_writer_set_str(w, "memwall.version", MW_VERSION_STRING, err));
    TRY(gguf_writer_set_str(w, "memwall.source", base, err));
    TRY(gguf_writer_set_str(w, "memwall.source_dtype", p->source_dtype, err));
    TRY(gguf_writer_set_str(w, "memwall.convert.type", hf_out_type_name(ot), err));
out:
    return s;
}

enum mw_status hf_convert_kvs(const char *hf_dir, const struct hf_model *m,
                              const struct hf_plan *p, enum hf_out_type ot, void **buf,
                              struct gguf_file **out, struct mw_err *err)
{
    mw_err_clear(err);
    *buf = NULL;
    *out = NULL;
    struct hf_tok *tok = NULL;
    struct gguf_writer *w = NULL;
    uint64_t size = 0;
    enum mw_status s;
    TRY(load_tok(hf_dir, &m->cfg, &tok, err));
    TRY(gguf_writer_init(&w, err));
    TRY(write_kvs(w, hf_dir, &m->cfg, p, tok, NULL, ot, err));
    TRY(gguf_writer_open_mem(w, err));
    TRY(gguf_writer_finish_mem(w, buf, &size, err));
    TRY(gguf_open_mem(*buf, size, hf_dir, GGUF_OPEN_DEFAULT, out, err));
out:
    if (s != MW_OK) {
        free(*buf);
        *buf = NULL;
    }
    gguf_writer_free(w);
    hf_tok_free(tok);
    return s;
}

enum mw_status hf_convert(const char *hf_dir, const char *out_path,
                          const struct hf_convert_opts *opts, struct mw_err *err)
{
    mw_err_clear(err);
    struct hf_model *m = NULL;
    struct hf_plan *p = NULL;
    struct hf_tok *tok = NULL;
    struct gguf_writer *w = NULL;
    struct mw_pool *pool = NULL;
    enum mw_status s;
    const struct hf_convert_opts dflt = {.type = HF_OUT_F16};
    const struct hf_convert_opts *o = opts ? opts : &dflt;

    /* 1. read and validate everything before creating the output */
    TRY(hf_model_open(hf_dir, &m, err));
    TRY(hf_plan_build(m, o->type, &p, err));
    TRY(load_tok(hf_dir, &m->cfg, &tok, err));

    /* 2. metadata, in convert_hf_to_gguf.py's order */
    TRY(gguf_writer_init(&w, err));
    TRY(write_kvs(w, hf_dir, &m->cfg, p, tok, o->name, o->type, err));

    for (uint64_t i = 0; i < p->n; i++) {
        const struct hf_plan_tensor *e = &p->t[i];
        TRY(gguf_writer_add_tensor(w, e->name, e->type, e->n_dims, e->ne, err));
    }

    /* 3. stream the data (rows converted by n_threads threads) */
    if (o->n_threads > 1) TRY(mw_pool_init(o->n_threads, &pool, err));
    TRY(gguf_writer_open(w, out_path, err));
    struct sink_ctx sc = {.w = w, .o = o, .total = p->total_bytes, .n_tensors = p->n};
    for (uint64_t i = 0; i < p->n; i++) {
        sc.cur = i;
        sc.name = p->t[i].name;
        TRY(hf_plan_stream_tensor_mt(p, i, o->chunk_bytes, pool, writer_sink, &sc, err));
        if (o->progress) o->progress(o->progress_ud, sc.done, sc.total, i + 1, p->n, sc.name);
    }
    TRY(gguf_writer_finish(w, err));
out:
    gguf_writer_free(w); /* removes the temp file unless finished */
    mw_pool_free(pool);
    hf_tok_free(tok);
    hf_plan_free(p);
    hf_model_close(m);
    return s;
}
