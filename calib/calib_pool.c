/*
 * calib/calib_pool.c — a fork-join pool of pthreads for the parts of the
 * calibration forward that are not GEMMs (norms, RoPE, softmax, SwiGLU,
 * statistics). calib__pool_run() hands one function to every thread (the
 * caller is thread 0) and returns when all have finished. Workers sleep on
 * a condition variable between stages.
 */
#include "calib_int.h"

#include <stdlib.h>
#include <string.h>

struct calib_worker {
    struct calib_pool *pool;
    unsigned ith;
};

struct calib_pool {
    unsigned n;
    unsigned n_started;
    pthread_t *th;
    struct calib_worker *w;
    pthread_mutex_t mu;
    pthread_cond_t cv_start, cv_done;
    uint64_t gen;
    unsigned pending;
    bool quit;
    calib_task_fn fn;
    void *arg;
};

static void *worker_main(void *p)
{
    struct calib_worker *w = p;
    struct calib_pool *pool = w->pool;
    uint64_t seen = 0;
    for (;;) {
        pthread_mutex_lock(&pool->mu);
        while (!pool->quit && pool->gen == seen) pthread_cond_wait(&pool->cv_start, &pool->mu);
        if (pool->quit) {
            pthread_mutex_unlock(&pool->mu);
            return NULL;
        }
        seen = pool->gen;
        const calib_task_fn fn = pool->fn;
        void *arg = pool->arg;
        pthread_mutex_unlock(&pool->mu);

        fn(arg, w->ith, pool->n);

        pthread_mutex_lock(&pool->mu);
        if (--pool->pending == 0) pthread_cond_signal(&pool->cv_done);
        pthread_mutex_unlock(&pool->mu);
    }
}

enum mw_status calib__pool_init(unsigned n_threads, struct calib_pool **out, struct mw_err *err)
{
    *out = NULL;
    if (n_threads == 0) n_threads = 1;
    struct calib_pool *p = calloc(1, sizeof *p);
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
            calib__pool_free(p);
            return MW_FAIL(err, MW_E_NOMEM, MW_ERR_OFF_NONE, "thread pool");
        }
        for (unsigned i = 0; i + 1 < n_threads; i++) {
            p->w[i] = (struct calib_worker){.pool = p, .ith = i + 1};
            const int e = pthread_create(&p->th[i], NULL, worker_main, &p->w[i]);
            if (e != 0) {
                calib__pool_free(p);
                return MW_FAIL(err, MW_E_IO, MW_ERR_OFF_NONE, "cannot start thread %u of %u: %s",
                               i + 2, n_threads, strerror(e));
            }
            p->n_started++;
        }
    }
    *out = p;
    return MW_OK;
}

void calib__pool_free(struct calib_pool *p)
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

unsigned calib__pool_size(const struct calib_pool *p) { return p->n; }

void calib__pool_run(struct calib_pool *p, calib_task_fn fn, void *arg)
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
