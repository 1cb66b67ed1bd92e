/* util.c - thread-local error message, the reserved-bytes check and aligned
 * allocation. */
#define _POSIX_C_SOURCE 200809L
#include "core/util.h"

#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
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

int hm_check_reserved(const void *reserved, size_t n, const char *type) {
    const unsigned char *b = reserved;
    size_t i = 0;
    while (i < n && b[i] == 0) i++;
    if (i == n) return HM_OK;
    /* "hamer_X_params" is made by "hamer_X_default_params" */
    size_t len = strlen(type), tail = sizeof "_params" - 1;
    int stem = len > tail && !strcmp(type + len - tail, "_params") ? (int)(len - tail) : (int)len;
    return hm_err(HM_E_ARG, "%s: reserved bytes must be zero (use %.*s_default_params; reserved[%zu] is 0x%02x: "
                  "a field of a newer hamer.h?)", type, stem, type, i, b[i]);
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

double hm_thread_cpu(void) {
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}
