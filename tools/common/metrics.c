/* metrics.c - histogram and text buffer of the Prometheus expositions (metrics.h). */
#include "common/metrics.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

const double hm_tool_buckets[HM_TOOL_N_BUCKETS] = {0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25,
                                                   0.5,   1,     2.5,  5,     10,  30,  60};

void hm_tool_hist_add(hm_tool_hist *h, double seconds) {
    int b = 0;
    while (b < HM_TOOL_N_BUCKETS && seconds > hm_tool_buckets[b]) b++;
    h->counts[b]++;
    h->sum += seconds;
    h->n++;
}

void hm_tool_text_printf(hm_tool_text *b, const char *fmt, ...) {
    if (b->bad) return;
    for (;;) {
        va_list ap;
        va_start(ap, fmt);
        int n = vsnprintf(b->p ? b->p + b->len : NULL, b->p ? b->cap - b->len : 0, fmt, ap);
        va_end(ap);
        if (n < 0) {
            b->bad = 1;
            return;
        }
        if (b->p && b->len + (size_t)n < b->cap) {
            b->len += (size_t)n;
            return;
        }
        size_t cap = b->cap ? b->cap * 2 : 8192;
        while (cap < b->len + (size_t)n + 1) cap *= 2;
        char *q = realloc(b->p, cap);
        if (!q) {
            b->bad = 1;
            return;
        }
        b->p = q, b->cap = cap;
    }
}

char *hm_tool_text_take(hm_tool_text *b, size_t *len) {
    if (b->bad || !b->p) {
        free(b->p);
        b->p = NULL;
        return NULL;
    }
    *len = b->len;
    char *p = b->p;
    b->p = NULL;
    b->len = b->cap = 0;
    return p;
}

void hm_tool_hist_text(hm_tool_text *b, const char *name, const char *label, const hm_tool_hist *h) {
    const char *sep = label ? "," : "";
    if (!label) label = "";
    uint64_t cum = 0;
    for (int i = 0; i < HM_TOOL_N_BUCKETS; i++) {
        cum += h->counts[i];
        hm_tool_text_printf(b, "%s_bucket{%s%sle=\"%g\"} %llu\n", name, label, sep, hm_tool_buckets[i],
                            (unsigned long long)cum);
    }
    hm_tool_text_printf(b, "%s_bucket{%s%sle=\"+Inf\"} %llu\n", name, label, sep, (unsigned long long)h->n);
    if (*label)
        hm_tool_text_printf(b, "%s_sum{%s} %.6f\n%s_count{%s} %llu\n", name, label, h->sum, name, label,
                            (unsigned long long)h->n);
    else
        hm_tool_text_printf(b, "%s_sum %.6f\n%s_count %llu\n", name, h->sum, name, (unsigned long long)h->n);
}
