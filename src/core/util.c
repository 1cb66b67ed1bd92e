/* util.c - thread-local error message and aligned allocation. */
#define _POSIX_C_SOURCE 200809L
#include "core/util.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

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

void *hm_alloc(size_t bytes) {
    void *p = NULL;
    if (bytes == 0) bytes = 64;
    bytes = (bytes + 63) & ~(size_t)63;
    if (posix_memalign(&p, 64, bytes) != 0) {
        hm_err(HM_E_NOMEM, "out of memory allocating %zu bytes", bytes);
        return NULL;
    }
    return p;
}

void hm_free(void *p) { free(p); }
