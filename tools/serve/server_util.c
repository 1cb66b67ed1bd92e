/* server_util.c - the small helpers every server file uses: the clock,
 * the log line, the JSON error body. */
#define _POSIX_C_SOURCE 200809L
#include <jansson.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "serve/server.h"

/* Monotonic seconds (timeouts and latencies must not follow wall-clock jumps). */
double hm_srv_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* One "hamer serve: ..." line on stderr. */
void hm_srv_log(const char *fmt, ...) {
    char line[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    /* one fprintf per line: stdio's stream lock keeps lines whole across threads */
    fprintf(stderr, "hamer serve: %s\n", line);
}

/* {"error": msg} as a malloc'd string (*len set); NULL only when out of memory. */
char *hm_srv_error_json(const char *msg, size_t *len) {
    /* Messages may quote client input cut at any byte: keep printable ASCII
     * only, so the JSON string is always valid UTF-8 (jansson refuses
     * anything else). */
    char clean[512];
    size_t n = 0;
    for (const char *p = msg ? msg : "unknown error"; *p && n + 1 < sizeof clean; p++)
        clean[n++] = (unsigned char)*p >= 0x20 && (unsigned char)*p < 0x7f ? *p : '?';
    clean[n] = 0;
    json_t *o = json_pack("{s:s}", "error", clean);
    char *s = o ? json_dumps(o, JSON_COMPACT) : NULL;
    json_decref(o);
    if (!s) {
        /* Out of memory: a constant body still tells the client. */
        s = strdup("{\"error\":\"out of memory\"}");
    }
    *len = s ? strlen(s) : 0;
    return s;
}
