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

typedef struct hm_pool hm_pool;
typedef void (*hm_task_fn)(void *ctx, int task, int tid);

/* nthreads >= 1 (1 = no extra threads). NULL + hm_err on failure. */
hm_pool *hm_pool_create(int nthreads);
void hm_pool_destroy(hm_pool *p);
int hm_pool_size(const hm_pool *p);
/* p may be NULL: runs serially on the caller. */
void hm_pool_run(hm_pool *p, hm_task_fn fn, void *ctx, int ntasks);

#endif
