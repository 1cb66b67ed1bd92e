/* test_pool.c - hm_pool: every task runs exactly once, on a valid thread id,
 * for 1..4 threads, many runs in a row, uneven task sizes, and NULL pools. */
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

int main(void) {
    static job j;
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
