/* pool.c - persistent thread pool (see pool.h).
 *
 * Workers are created once and park between jobs. A job is published by
 * bumping an atomic generation counter; workers spin on it for a short while
 * (back-to-back kernels in a forward pass are microseconds apart, so a
 * condition-variable round trip per kernel would dominate small jobs) and
 * then sleep on a condition variable. Tasks are claimed with an atomic
 * counter. The caller runs tasks as worker 0 and returns once every worker
 * has left the job, so the next job can never overlap a straggler.
 */
#define _POSIX_C_SOURCE 200809L
#include "core/pool.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>

#include "core/util.h"

/* Spin iterations before parking. Kept short: with more threads than cores a
 * spinning worker steals time from the ones doing the work. */
#define HM_POOL_SPIN 4000

struct hm_pool {
    int n;                       /* threads including the caller */
    pthread_t *threads;          /* n - 1 workers */
    pthread_mutex_t mu;
    pthread_cond_t wake;         /* signalled when gen changes or stop */
    pthread_cond_t done;         /* signalled when pending reaches 0 */
    atomic_uint gen;             /* job generation; workers wait for a change */
    atomic_int next;             /* next unclaimed task of the current job */
    atomic_int pending;          /* workers still inside the current job */
    atomic_int stop;
    /* The current job; written before gen is bumped (release). */
    hm_task_fn fn;
    void *ctx;
    int ntasks;
    void *scratch;               /* hm_pool_scratch's buffer */
    size_t scratch_cap;
    /* the critical-path model (pool.h), owner's thread only except sim_dur,
     * whose slots the tasks' own threads write */
    int sim_on, sim_cap, sim_split;
    double *sim_dur;
    double sim_wall, sim_acc[HM_POOL_SIM_N]; /* sim_wall: the caller's CPU time in runs */
};

typedef struct {
    hm_pool *pool;
    int tid;
} hm_worker_arg;

static inline void hm_cpu_relax(void) {
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#endif
}

/* Task i, timed into the duration log when the model is on. */
static inline void hm_pool_task(hm_pool *p, hm_task_fn fn, void *ctx, int i, int tid) {
    if (!p || !p->sim_on) {
        fn(ctx, i, tid);
        return;
    }
    double t0 = hm_thread_cpu();
    fn(ctx, i, tid);
    if (i < p->sim_cap) p->sim_dur[i] = hm_thread_cpu() - t0;
}

/* Claim and run tasks of the current job until none are left. */
static void hm_pool_drain(hm_pool *p, int tid) {
    for (;;) {
        int i = atomic_fetch_add_explicit(&p->next, 1, memory_order_relaxed);
        if (i >= p->ntasks) break;
        hm_pool_task(p, p->fn, p->ctx, i, tid);
    }
}

/* The finished run of n tasks on 1, 2, 4, ... simulated threads: tasks in
 * order, each to the thread that is free first. */
static void hm_pool_sim_run(hm_pool *p, int n, double cpu) {
    if (n > p->sim_cap) n = p->sim_cap;
    for (int k = 0; k < HM_POOL_SIM_N; k++) {
        double busy[1 << (HM_POOL_SIM_N - 1)] = {0}, end = 0;
        const int P = 1 << k;
        for (int i = 0; i < n; i++) {
            int j = 0;
            for (int t = 1; t < P; t++) j = busy[t] < busy[j] ? t : j;
            busy[j] += p->sim_dur[i];
        }
        for (int t = 0; t < P; t++) end = busy[t] > end ? busy[t] : end;
        p->sim_acc[k] += end;
    }
    p->sim_wall += cpu;
}

int hm_pool_sim_start(hm_pool *p, int split) {
    if (!p) return HM_OK;
    p->sim_split = split > 0 ? split : 0;
    if (!p->sim_dur) {
        const int cap = 1 << 16;
        if (!(p->sim_dur = calloc(cap, sizeof *p->sim_dur))) return hm_err(HM_E_NOMEM, "out of memory");
        p->sim_cap = cap;
    }
    p->sim_on = 1;
    return HM_OK;
}

void hm_pool_sim_stop(hm_pool *p) {
    if (p) p->sim_on = 0, p->sim_split = 0;
}

void hm_pool_sim_take(hm_pool *p, double *run_cpu_s, double sim_s[HM_POOL_SIM_N]) {
    *run_cpu_s = p ? p->sim_wall : 0;
    for (int k = 0; k < HM_POOL_SIM_N; k++) sim_s[k] = p ? p->sim_acc[k] : 0;
    if (!p) return;
    p->sim_wall = 0;
    for (int k = 0; k < HM_POOL_SIM_N; k++) p->sim_acc[k] = 0;
}

/* Wait until gen differs from seen or stop is set; returns the new gen. */
static unsigned hm_pool_wait_job(hm_pool *p, unsigned seen) {
    for (int s = 0; s < HM_POOL_SPIN; s++) {
        unsigned g = atomic_load_explicit(&p->gen, memory_order_acquire);
        if (g != seen || atomic_load_explicit(&p->stop, memory_order_acquire)) return g;
        hm_cpu_relax();
    }
    pthread_mutex_lock(&p->mu);
    unsigned g;
    while ((g = atomic_load_explicit(&p->gen, memory_order_acquire)) == seen &&
           !atomic_load_explicit(&p->stop, memory_order_acquire))
        pthread_cond_wait(&p->wake, &p->mu);
    pthread_mutex_unlock(&p->mu);
    return g;
}

static void *hm_pool_worker(void *argp) {
    hm_worker_arg *arg = argp;
    hm_pool *p = arg->pool;
    int tid = arg->tid;
    free(arg);
    /* Not a load of gen: the first job may be published before this thread
     * gets to run, and it must still count as new. Jobs start at gen 1. */
    unsigned seen = 0;
    for (;;) {
        seen = hm_pool_wait_job(p, seen);
        if (atomic_load_explicit(&p->stop, memory_order_acquire)) break;
        hm_pool_drain(p, tid);
        /* The last worker out wakes the caller if it went to sleep. Taking
         * the mutex orders this signal after the caller's check-then-wait. */
        if (atomic_fetch_sub_explicit(&p->pending, 1, memory_order_acq_rel) == 1) {
            pthread_mutex_lock(&p->mu);
            pthread_cond_signal(&p->done);
            pthread_mutex_unlock(&p->mu);
        }
    }
    return NULL;
}

/* Ask running workers to exit and join the first nstarted of them. */
static void hm_pool_stop(hm_pool *p, int nstarted) {
    pthread_mutex_lock(&p->mu);
    atomic_store_explicit(&p->stop, 1, memory_order_release);
    pthread_cond_broadcast(&p->wake);
    pthread_mutex_unlock(&p->mu);
    for (int i = 0; i < nstarted; i++) pthread_join(p->threads[i], NULL);
}

hm_pool *hm_pool_create(int nthreads) {
    if (nthreads < 1) {
        hm_err(HM_E_ARG, "hm_pool_create: nthreads must be >= 1 (got %d)", nthreads);
        return NULL;
    }
    hm_pool *p = calloc(1, sizeof *p);
    if (!p) {
        hm_err(HM_E_NOMEM, "hm_pool_create: out of memory");
        return NULL;
    }
    p->n = nthreads;
    atomic_init(&p->gen, 0);
    atomic_init(&p->next, 0);
    atomic_init(&p->pending, 0);
    atomic_init(&p->stop, 0);
    pthread_mutex_init(&p->mu, NULL);
    pthread_cond_init(&p->wake, NULL);
    pthread_cond_init(&p->done, NULL);
    if (nthreads == 1) return p;

    p->threads = calloc((size_t)nthreads - 1, sizeof *p->threads);
    if (!p->threads) {
        hm_pool_destroy(p);
        hm_err(HM_E_NOMEM, "hm_pool_create: out of memory");
        return NULL;
    }
    for (int i = 0; i < nthreads - 1; i++) {
        hm_worker_arg *arg = malloc(sizeof *arg);
        int rc = arg ? 0 : -1;
        if (arg) {
            arg->pool = p;
            arg->tid = i + 1;
            rc = pthread_create(&p->threads[i], NULL, hm_pool_worker, arg);
            if (rc != 0) free(arg);
        }
        if (rc != 0) {
            hm_pool_stop(p, i);
            free(p->threads);
            p->threads = NULL;
            p->n = 1;
            hm_pool_destroy(p);
            hm_err(HM_E_NOMEM, "hm_pool_create: cannot start thread %d of %d", i + 1, nthreads);
            return NULL;
        }
    }
    return p;
}

void hm_pool_destroy(hm_pool *p) {
    if (!p) return;
    if (p->threads) {
        hm_pool_stop(p, p->n - 1);
        free(p->threads);
    }
    pthread_cond_destroy(&p->done);
    pthread_cond_destroy(&p->wake);
    pthread_mutex_destroy(&p->mu);
    hm_free(p->scratch);
    free(p->sim_dur);
    free(p);
}

void *hm_pool_scratch(hm_pool *p, size_t bytes) {
    if (bytes <= p->scratch_cap) return p->scratch;
    void *n = hm_alloc(bytes);
    if (!n) return NULL;
    hm_free(p->scratch);
    p->scratch = n;
    p->scratch_cap = bytes;
    return n;
}

int hm_pool_reserve(hm_pool *p, size_t bytes) { return hm_pool_scratch(p, bytes) || bytes == 0 ? HM_OK : HM_E_NOMEM; }

int hm_pool_size(const hm_pool *p) { return !p ? 1 : p->sim_on && p->sim_split ? p->sim_split : p->n; }

void hm_pool_run(hm_pool *p, hm_task_fn fn, void *ctx, int ntasks) {
    if (ntasks <= 0) return;
    const double t_run = p && p->sim_on ? hm_thread_cpu() : 0;
    /* A single task or no workers: no point waking anyone. */
    if (!p || p->n == 1 || ntasks == 1) {
        for (int i = 0; i < ntasks; i++) hm_pool_task(p, fn, ctx, i, 0);
        if (p && p->sim_on) hm_pool_sim_run(p, ntasks, hm_thread_cpu() - t_run);
        return;
    }
    p->fn = fn;
    p->ctx = ctx;
    p->ntasks = ntasks;
    atomic_store_explicit(&p->next, 0, memory_order_relaxed);
    atomic_store_explicit(&p->pending, p->n - 1, memory_order_relaxed);
    /* Publish under the mutex so a worker between its check and its
     * cond_wait cannot miss the broadcast. */
    pthread_mutex_lock(&p->mu);
    atomic_fetch_add_explicit(&p->gen, 1, memory_order_release);
    pthread_cond_broadcast(&p->wake);
    pthread_mutex_unlock(&p->mu);

    hm_pool_drain(p, 0);

    int left = 1;
    for (int s = 0; s < HM_POOL_SPIN && left; s++) {
        if (atomic_load_explicit(&p->pending, memory_order_acquire) == 0) left = 0;
        else hm_cpu_relax();
    }
    if (left) {
        pthread_mutex_lock(&p->mu);
        while (atomic_load_explicit(&p->pending, memory_order_acquire) != 0)
            pthread_cond_wait(&p->done, &p->mu);
        pthread_mutex_unlock(&p->mu);
    }
    /* Every worker has left (acquire): their duration slots are visible. */
    if (p->sim_on) hm_pool_sim_run(p, ntasks, hm_thread_cpu() - t_run);
}
