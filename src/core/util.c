/* util.c - thread-local error message and aligned allocation. */
#define _POSIX_C_SOURCE 200809L
#include "core/util.h"

#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static _Thread_local char hm_msg[512];
static _Thread_local int hm_code;

int hm_err(int code, const char *fmt, ...) {
    va_list ap;
    hm_code = code;
    va_start(ap, fmt);
    vsnprintf(hm_msg, sizeof hm_msg, fmt, ap);
    va_end(ap);
    return code;
}

const char *hm_errmsg(void) { return hm_msg; }
int hm_errcode(void) { return hm_code; }
void hm_errclear(void) {
    hm_msg[0] = 0;
    hm_code = 0;
}

static atomic_int hm_alloc_fail_after = -1;

void hm_alloc_test_fail(int after) { atomic_store(&hm_alloc_fail_after, after); }

/* Tests: 1 if this allocation is the one hm_alloc_test_fail armed. */
static int hm_alloc_fault(void) {
    int n = atomic_load(&hm_alloc_fail_after);
    if (n < 0) return 0;
    if (n > 0) {
        atomic_fetch_sub(&hm_alloc_fail_after, 1);
        return 0;
    }
    atomic_store(&hm_alloc_fail_after, -1);
    return 1;
}

void *hm_alloc(size_t bytes) {
    void *p = NULL;
    if (bytes == 0) bytes = 64;
    bytes = (bytes + 63) & ~(size_t)63;
    if (hm_alloc_fault() || posix_memalign(&p, 64, bytes) != 0) {
        hm_err(HM_E_NOMEM, "out of memory allocating %zu bytes", bytes);
        return NULL;
    }
    return p;
}

void hm_free(void *p) { free(p); }

double hm_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}
