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
    uint64_t gen;          /* stage number, bumped by each run */
    unsigned pending;      /* workers still in the current stage */
    bool quit;
    mw_task_fn fn;
    void *arg;
};

static void *worker_main(void *p)
{
    struct mw_worker *w = p;
    struct mw_pool *pool = w->pool;
    uint64_t seen = 0;
    for (;;) {
        pthread_mutex_lock(&pool->mu);
        while (!pool->quit && pool->gen == seen) pthread_cond_wait(&pool->cv_start, &pool->mu);
        if (pool->quit) {
            pthread_mutex_unlock(&pool->mu);
            return NULL;
        }
        seen = pool->gen;
        const mw_task_fn fn = pool->fn;
        void *arg = pool->arg;
        pthread_mutex_unlock(&pool->mu);

        fn(arg, w->ith, pool->n);

        pthread_mutex_lock(&pool->mu);
        if (--pool->pending == 0) pthread_cond_signal(&pool->cv_done);
        pthread_mutex_unlock(&pool->mu);
    }
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

void mw_pool_run(struct mw_pool *p, mw_task_fn fn, void *arg)
{
    if (p->n == 1) {
        fn(arg, 0, 1);
        return;
    }
    pthread_mutex_lock(&p->mu);
    p->fn = fn;
    p->arg = arg;
    p->pending = p->n - 1;
    p->gen++;
    pthread_cond_broadcast(&p->cv_start);
    pthread_mutex_unlock(&p->mu);

    fn(arg, 0, p->n);

    pthread_mutex_lock(&p->mu);
    while (p->pending > 0) pthread_cond_wait(&p->cv_done, &p->mu);
    pthread_mutex_unlock(&p->mu);
}
