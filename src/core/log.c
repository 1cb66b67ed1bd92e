/* log.c - the process-wide log callback. */
#include "core/log.h"

#include <stdarg.h>
#include <stdio.h>

static hm_log_fn hm_log_cb;
static void *hm_log_user;

void hm_log_set(hm_log_fn fn, void *user) {
    hm_log_cb = fn;
    hm_log_user = user;
}

int hm_log_enabled(void) { return hm_log_cb != NULL; }

void hm_log(int level, const char *fmt, ...) {
    if (!hm_log_cb) return;
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    hm_log_cb(hm_log_user, level, msg);
}
