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

/* Critical-path model (a measurement: hamer_state_set_profile(state, 2)).
 * While on, every task's duration (its thread's CPU time, which other
 * processes taking the cores do not inflate) is recorded and, when a run
 * ends, the time its tasks would take on P threads that claim them as
 * hm_pool_run does (each task, in order, by the first thread to be free)
 * is added up for P = 1 << k, k < HM_POOL_SIM_N, together with the CPU time
 * the calling thread spent in the run. hm_pool_sim_take returns both sums
 * since the last take and clears them.
 * What it leaves out: that more threads share the caches and the memory
 * bandwidth, and the cost of waking them. hm_pool_sim_start allocates the
 * duration log once (HM_E_NOMEM). */
#define HM_POOL_SIM_N 5
/* split > 0: hm_pool_size answers split instead of the thread count while
 * the model is on, so that callers cut their work as they would for that
 * many threads (the model of a bigger machine); 0: the thread count. */
int hm_pool_sim_start(hm_pool *p, int split);
void hm_pool_sim_stop(hm_pool *p);
void hm_pool_sim_take(hm_pool *p, double *run_cpu_s, double sim_s[HM_POOL_SIM_N]);

#endif
