/* metrics.h - the pieces of a Prometheus text exposition (format 0.0.4)
 * that `hamer serve` (GET /metrics) and `hamer worker` (--metrics-port)
 * share: the latency histogram with its bucket bounds, and a growing text
 * buffer. Locking is the caller's (serve: a mutex per histogram; worker:
 * one for all). */
#ifndef HM_TOOL_METRICS_H
#define HM_TOOL_METRICS_H
#include <stddef.h>
#include <stdint.h>

/* Bucket upper bounds in seconds, 1 ms to 60 s; one more bucket is +Inf. */
#define HM_TOOL_N_BUCKETS 14
extern const double hm_tool_buckets[HM_TOOL_N_BUCKETS];

typedef struct {
    uint64_t counts[HM_TOOL_N_BUCKETS + 1]; /* per bucket (not cumulative); the last one is +Inf */
    double sum;
    uint64_t n;
} hm_tool_hist;

/* Add one observation (seconds) to its bucket and the sum. */
void hm_tool_hist_add(hm_tool_hist *h, double seconds);

/* A growing text buffer, zero-initialised; after a failed allocation it
 * stops growing and hm_tool_text_take answers NULL. */
typedef struct {
    char *p;
    size_t len, cap;
    int bad;
} hm_tool_text;

/* Append printf output. */
void hm_tool_text_printf(hm_tool_text *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* The text (malloc'd, NUL-terminated; its length in *len), or NULL (and
 * the buffer freed) when an allocation failed. */
char *hm_tool_text_take(hm_tool_text *b, size_t *len);

/* The samples of one histogram (its # HELP and # TYPE lines are the
 * caller's): cumulative name_bucket{le=...} lines, +Inf, name_sum and
 * name_count; label (e.g. stage="queue"), when not NULL, goes first in
 * every sample's labels. */
void hm_tool_hist_text(hm_tool_text *b, const char *name, const char *label, const hm_tool_hist *h);

#endif
