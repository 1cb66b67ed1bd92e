/* test_pool.c - hm_pool: every task runs exactly once, on a valid thread id,
 * for 1..4 threads, many runs in a row, uneven task sizes, and NULL pools;
 * the critical-path model (hm_pool_sim_*): tasks of known CPU cost give the
 * list-scheduling makespans on 1..16 simulated threads, the split hint. */
#define _POSIX_C_SOURCE 200809L
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/pool.h"
#include "core/util.h"

#include "check.h"


enum { MAX_TASKS = 4096 };

typedef struct {
    int nthreads;
    atomic_int count[MAX_TASKS]; /* how often each task ran */
    atomic_int bad_tid;
    atomic_int tid_used[8];
} job;

/* Task i does work proportional to (i * 7919) % 97, so finishing order is
 * scrambled and dynamic hand-out matters. */
static void task(void *ctx, int i, int tid) {
    job *j = ctx;
    if (tid < 0 || tid >= j->nthreads) atomic_fetch_add(&j->bad_tid, 1);
    else atomic_fetch_add(&j->tid_used[tid], 1);
    double s = 0;
    int work = (i * 7919) % 97 * 200;
    for (int k = 0; k < work; k++) s += k * 1e-9;
    if (s < 0) atomic_fetch_add(&j->bad_tid, 1); /* keeps the loop alive */
    atomic_fetch_add(&j->count[i], 1);
}

/* Run ntasks on p (NULL allowed) and check each ran exactly once. */
static int run_once(hm_pool *p, job *j, int ntasks) {
    for (int i = 0; i < MAX_TASKS; i++) atomic_store(&j->count[i], 0);
    atomic_store(&j->bad_tid, 0);
    hm_pool_run(p, task, j, ntasks);
    int ok = atomic_load(&j->bad_tid) == 0;
    for (int i = 0; i < MAX_TASKS; i++) ok &= atomic_load(&j->count[i]) == (i < ntasks ? 1 : 0);
    return ok;
}

/* Task i spins for dur_ms[i] of this thread's CPU time. */
static const double dur_ms[] = {4, 2, 2, 1, 1, 1, 1, 3, 1, 2};
static void cpu_task(void *ctx, int i, int tid) {
    (void)ctx, (void)tid;
    double t0 = hm_thread_cpu();
    while (hm_thread_cpu() - t0 < dur_ms[i] * 1e-3) {
    }
}

/* The model against list scheduling done by hand: on 1 thread the sum
 * (18 ms); 2: {4,1,1,3,1} + {2,2,1,1,2}... computed below the same way;
 * 16 threads: the longest task (4 ms). Within 15 % + 0.3 ms (clock reads,
 * the run's own overhead); the run's CPU time on the caller is counted. */
static void test_sim(int nt) {
    hm_pool *p = hm_pool_create(nt);
    CHECKF(p != NULL, "create");
    if (!p) return;
    CHECKF(hm_pool_sim_start(p, 16) == HM_OK, "sim start");
    CHECKF(hm_pool_size(p) == 16, "the split hint answers hm_pool_size while on (%d)", hm_pool_size(p));
    double w, sim[HM_POOL_SIM_N];
    hm_pool_sim_take(p, &w, sim);
    const int n = (int)(sizeof dur_ms / sizeof dur_ms[0]);
    hm_pool_run(p, cpu_task, NULL, n);
    hm_pool_sim_take(p, &w, sim);
    for (int k = 0; k < HM_POOL_SIM_N; k++) {
        double busy[16] = {0}, end = 0;
        for (int i = 0; i < n; i++) {
            int j = 0;
            for (int t = 1; t < (1 << k); t++) j = busy[t] < busy[j] ? t : j;
            busy[j] += dur_ms[i];
        }
        for (int t = 0; t < (1 << k); t++) end = busy[t] > end ? busy[t] : end;
        double got = 1e3 * sim[k];
        CHECKF(got >= end * 0.999 && got <= end * 1.15 + 0.3, "%d threads, %d simulated: %.2f ms, want %.2f", nt,
               1 << k, got, end);
    }
    CHECKF(w > 0 && (nt > 1 || w >= 0.017), "the caller's CPU time in the run: %.4f s", w);
    hm_pool_sim_take(p, &w, sim);
    CHECKF(w == 0 && sim[0] == 0, "take clears");
    hm_pool_sim_stop(p);
    CHECKF(hm_pool_size(p) == nt, "stopped: the thread count again");
    hm_pool_run(p, cpu_task, NULL, 2);
    hm_pool_sim_take(p, &w, sim);
    CHECKF(w == 0 && sim[0] == 0, "stopped: nothing recorded");
    hm_pool_destroy(p);
}

int main(void) {
    static job j;
    test_sim(1);
    test_sim(2);
    /* scripts/valgrind.sh asks for fewer back-to-back runs: memcheck looks
     * for memory errors, which the first runs show, and under it each
     * hand-off costs a scheduler time slice of a spinning thread. */
    const char *reps_env = getenv("HAMER_TEST_POOL_REPS");
    int reps = reps_env ? atoi(reps_env) : 300;
    if (reps < 8) reps = 8;
    static const int sizes[] = {0, 1, 2, 3, 5, 17, 64, 1000, MAX_TASKS};

    j.nthreads = 1;
    for (size_t s = 0; s < sizeof sizes / sizeof sizes[0]; s++)
        CHECKF(run_once(NULL, &j, sizes[s]), "NULL pool, %d tasks", sizes[s]);
    CHECKF(hm_pool_size(NULL) == 1, "hm_pool_size(NULL)");
    CHECKF(hm_pool_create(0) == NULL, "hm_pool_create(0) must fail");

    for (int nt = 1; nt <= 4; nt++) {
        hm_pool *p = hm_pool_create(nt);
        CHECKF(p != NULL, "create %d threads: %s", nt, hm_errmsg());
        if (!p) continue;
        CHECKF(hm_pool_size(p) == nt, "hm_pool_size %d", nt);
        j.nthreads = nt;
        for (int t = 0; t < 8; t++) atomic_store(&j.tid_used[t], 0);
        int ok = 1;
        /* Many short runs back to back: exercises the spin/park hand-off. */
        for (int rep = 0; rep < reps; rep++) ok &= run_once(p, &j, sizes[rep % 8]);
        CHECKF(ok, "%d threads: %d back-to-back runs", nt, reps);
        for (size_t s = 0; s < sizeof sizes / sizeof sizes[0]; s++)
            CHECKF(run_once(p, &j, sizes[s]), "%d threads, %d tasks", nt, sizes[s]);
        CHECKF(atomic_load(&j.tid_used[0]) > 0, "%d threads: caller must take part", nt);
        hm_pool_destroy(p);
    }
    /* Create/destroy churn, including destroying a pool that never ran. */
    for (int rep = 0; rep < 20; rep++) {
        hm_pool *p = hm_pool_create(1 + rep % 4);
        if (rep % 2) {
            j.nthreads = 1 + rep % 4;
            CHECKF(run_once(p, &j, 33), "churn run %d", rep);
        }
        hm_pool_destroy(p);
    }
    hm_pool_destroy(NULL);
    printf("%d passed, %d failed\n", npass, nfail);
    return nfail != 0;
}
