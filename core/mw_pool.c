/*
 * core/mw_pool.c — a fork-join pool of pthreads, shared by the runtime's
 * forward pass and calibration's non-GEMM stages.
 *
 * mw_pool_run() hands one function to every thread (the caller is thread
 * 0) and returns when all have finished: each call is one parallel stage
 * with a join at its end. Workers sleep on a condition variable between
 * stages. No allocation after mw_pool_init().
 */
#include "core/mw_pool.h"

#include <pthread.h>
#include <stdatomic.h>

#include <errno.h>
#include <stdlib.h>
#include <string.h>

struct mw_worker {
    struct mw_pool *pool;
    unsigned ith;
};

struct mw_pool {
    unsigned n;            /* threads, the caller included */
    unsigned n_started;    /* workers created */
    pthread_t *th;
    struct mw_worker *w;
    pthread_mutex_t mu;
    pthread_cond_t cv_start;
    pthread_cond_t cv_done;
    _Atomic uint64_t gen;  /* stage number, bumped by each run */
    _Atomic unsigned pending; /* workers still in the current stage */
    unsigned sleepers;     /* workers waiting on cv_start (under mu) */
    bool joining;          /* the caller waits on cv_done (under mu) */
    unsigned spin;         /* polling rounds before sleeping (0: sleep at once) */
    bool quit;
    mw_task_fn fn;
    void *arg;
};

/* One polling round's pause (the core's spin-wait hint). */
static inline void cpu_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#elif defined(__aarch64__)
    __asm__ __volatile__("yield");
#endif
}

/* Wait for the stage after *seen: poll gen for pool->spin rounds, then sleep
 * on cv_start. false: the pool is shutting down. The stage's fn and arg are
 * written before gen's release increment, so the acquire load of gen makes
 * them visible. */
static bool next_stage(struct mw_pool *pool, uint64_t *seen)
{
    for (unsigned i = 0; i < pool->spin; i++) {
        const uint64_t g = atomic_load_explicit(&pool->gen, memory_order_acquire);
        if (g != *seen) {
            *seen = g;
            return true;
        }
        cpu_relax();
    }
    pthread_mutex_lock(&pool->mu);
    pool->sleepers++;
    while (!pool->quit && atomic_load_explicit(&pool->gen, memory_order_acquire) == *seen)
        pthread_cond_wait(&pool->cv_start, &pool->mu);
    pool->sleepers--;
    const bool quit = pool->quit;
    pthread_mutex_unlock(&pool->mu);
    if (quit) return false;
    *seen = atomic_load_explicit(&pool->gen, memory_order_acquire);
    return true;
}

static void *worker_main(void *p)
{
    struct mw_worker *w = p;
    struct mw_pool *pool = w->pool;
    uint64_t seen = 0;
    while (next_stage(pool, &seen)) {
        pool->fn(pool->arg, w->ith, pool->n);
        /* the last one out wakes the caller if it sleeps */
        if (atomic_fetch_sub_explicit(&pool->pending, 1, memory_order_acq_rel) == 1) {
            pthread_mutex_lock(&pool->mu);
            if (pool->joining) pthread_cond_signal(&pool->cv_done);
            pthread_mutex_unlock(&pool->mu);
        }
    }
    return NULL;
}

enum mw_status mw_pool_init(unsigned n_threads, struct mw_pool **out, struct mw_err *err)
{
    *out = NULL;
    if (n_threads == 0) n_threads = 1;
    struct mw_pool *p = calloc(1, sizeof *p);
    if (!p) return MW_FAIL(err, MW_E_NOMEM, MW_ERR_OFF_NONE, "thread pool");
    p->n = n_threads;
    if (pthread_mutex_init(&p->mu, NULL) != 0) {
        free(p);
        return MW_FAIL(err, MW_E_IO, MW_ERR_OFF_NONE, "pthread_mutex_init failed");
    }
    pthread_cond_init(&p->cv_start, NULL);
    pthread_cond_init(&p->cv_done, NULL);
    if (n_threads > 1) {
        p->th = calloc(n_threads - 1, sizeof *p->th);
        p->w = calloc(n_threads - 1, sizeof *p->w);
        if (!p->th || !p->w) {
            mw_pool_free(p);
            return MW_FAIL(err, MW_E_NOMEM, MW_ERR_OFF_NONE, "thread pool");
        }
        for (unsigned i = 0; i + 1 < n_threads; i++) {
            p->w[i] = (struct mw_worker){.pool = p, .ith = i + 1};
            const int e = pthread_create(&p->th[i], NULL, worker_main, &p->w[i]);
            if (e != 0) {
                mw_pool_free(p);
                return MW_FAIL(err, MW_E_IO, MW_ERR_OFF_NONE, "cannot start thread %u of %u: %s",
                               i + 2, n_threads, strerror(e));
            }
            p->n_started++;
        }
    }
    *out = p;
    return MW_OK;
}

void mw_pool_free(struct mw_pool *p)
{
    if (!p) return;
    pthread_mutex_lock(&p->mu);
    p->quit = true;
    pthread_cond_broadcast(&p->cv_start);
    pthread_mutex_unlock(&p->mu);
    for (unsigned i = 0; i < p->n_started; i++) pthread_join(p->th[i], NULL);
    pthread_cond_destroy(&p->cv_start);
    pthread_cond_destroy(&p->cv_done);
    pthread_mutex_destroy(&p->mu);
    free(p->th);
    free(p->w);
    free(p);
}

unsigned mw_pool_size(const struct mw_pool *p) { return p->n; }

void mw_pool_spin(struct mw_pool *p, unsigned rounds) { p->spin = rounds; }

void mw_pool_run(struct mw_pool *p, mw_task_fn fn, void *arg)
{
    if (p->n == 1) {
        fn(arg, 0, 1);
        return;
    }
    /* every worker is past the previous stage (pending reached 0), so fn,
     * arg and pending are free to rewrite */
    p->fn = fn;
    p->arg = arg;
    atomic_store_explicit(&p->pending, p->n - 1, memory_order_relaxed);
    pthread_mutex_lock(&p->mu);
    atomic_fetch_add_explicit(&p->gen, 1, memory_order_release);
    if (p->sleepers > 0) pthread_cond_broadcast(&p->cv_start);
    pthread_mutex_unlock(&p->mu);
    fn(arg, 0, p->n);
    for (unsigned i = 0; i < p->spin && atomic_load_explicit(&p->pending, memory_order_acquire) > 0; i++)
        cpu_relax();
    if (atomic_load_explicit(&p->pending, memory_order_acquire) == 0) return;
    pthread_mutex_lock(&p->mu);
    p->joining = true;
    while (atomic_load_explicit(&p->pending, memory_order_acquire) > 0) pthread_cond_wait(&p->cv_done, &p->mu);
    p->joining = false;
    pthread_mutex_unlock(&p->mu);
}
