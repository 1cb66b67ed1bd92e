/* pool.h - persistent thread pool (threads created once, parked between jobs).
 *
 * hm_pool_run(fn, ctx, n) calls fn(ctx, i, tid) for i in [0, n) spread over
 * the pool's threads; the calling thread is worker 0 and participates. It
 * returns when all n tasks are done. Tasks are handed out dynamically
 * (atomic counter), so uneven tasks balance. Not re-entrant: one run at a
 * time per pool; fn must not call hm_pool_run on the same pool.
 */
#ifndef HM_POOL_H
#define HM_POOL_H

#include <stddef.h>

typedef struct hm_pool hm_pool;
typedef void (*hm_task_fn)(void *ctx, int task, int tid);

/* nthreads >= 1 (1 = no extra threads). NULL + hm_err on failure. */
hm_pool *hm_pool_create(int nthreads);
void hm_pool_destroy(hm_pool *p);
int hm_pool_size(const hm_pool *p);
/* p may be NULL: runs serially on the caller. */
void hm_pool_run(hm_pool *p, hm_task_fn fn, void *ctx, int ntasks);

/* Scratch memory of the pool's owner, for the kernels of the job it is
 * running (one job at a time, so one buffer serves every kernel). Returns
 * at least `bytes` bytes, 64-byte aligned, growing the buffer if needed;
 * NULL + HM_E_NOMEM if it cannot, the old buffer kept. Reserving the
 * largest need once (hm_pool_reserve) keeps later calls allocation-free.
 * The contents do not survive a later call. */
void *hm_pool_scratch(hm_pool *p, size_t bytes);
int hm_pool_reserve(hm_pool *p, size_t bytes);

#endif
