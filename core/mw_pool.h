/*
 * core/mw_pool.h — a fork-join pool of pthreads. mw_pool_run() hands one
 * function to every thread (the caller is thread 0) and returns when all
 * have finished: one parallel stage with a join at its end. Workers sleep on
 * a condition variable between stages (by default they never spin; see
 * mw_pool_spin). No allocation after mw_pool_init(). One pool is driven by
 * one thread at a time.
 */
#ifndef MW_POOL_H
#define MW_POOL_H

#include "core/mw.h"

/* fn(arg, ith, nth) runs once on every thread, ith = 0 .. nth-1 (0 is the
 * calling thread). */
typedef void (*mw_task_fn)(void *arg, unsigned ith, unsigned nth);

struct mw_pool;
/* n_threads >= 1 (the caller counts). Errors: MW_E_NOMEM, MW_E_IO (thread
 * creation). The caller owns *out and releases it with mw_pool_free. */
enum mw_status mw_pool_init(unsigned n_threads, struct mw_pool **out, struct mw_err *err);
void mw_pool_free(struct mw_pool *p); /* NULL-safe; joins the workers */
unsigned mw_pool_size(const struct mw_pool *p);
/* Before sleeping, workers (waiting for a stage) and the caller (waiting for
 * the join) poll for `rounds` rounds of the CPU's spin-wait hint (PAUSE /
 * YIELD). For many short stages in a row (the runtime: ~60 per decoded
 * token) this saves two futex round trips per stage; 0 (the default) sleeps
 * at once. Call before the first mw_pool_run. */
void mw_pool_spin(struct mw_pool *p, unsigned rounds);

/* Run fn on all threads and wait for all of them. No allocation. */
void mw_pool_run(struct mw_pool *p, mw_task_fn fn, void *arg);

#endif /* MW_POOL_H */
