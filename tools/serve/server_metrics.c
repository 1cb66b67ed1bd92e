/* server_metrics.c - `hamer serve`: counters and latency histograms, and
 * their Prometheus text exposition (format 0.0.4) for GET /metrics.
 *
 * Counters are atomics (bumped from the HTTP thread and the workers);
 * each histogram has its own mutex, since a bucket count and the sum must
 * move together for a scrape to be consistent.
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "serve/server.h"

/* The text buffer's printf (tools/common/metrics.h), by a short name. */
#define sb_printf hm_tool_text_printf

static const char *EP_NAMES[HM_SRV_EP_COUNT] = {"/healthz", "/readyz", "/info", "/metrics",
                                                "/openapi.json", "/v1/predict", "/v1/render", "/v1/live",
                                                "/", "other"};
/* 499: the client closed the connection before its answer (nginx's code). */
static const int STATUSES[HM_SRV_N_STATUS] = {200, 400, 404, 405, 408, 413, 414, 415, 429, 431, 499,
                                              500, 503, 504, 505, 0};

/* An empty histogram with its lock. */
static void hist_init(hm_srv_hist *h) {
    memset(h, 0, sizeof *h);
    pthread_mutex_init(&h->mu, NULL);
}

/* All counters zero. */
void hm_srv_metrics_init(hm_srv_metrics *m) {
    for (int e = 0; e < HM_SRV_EP_COUNT; e++)
        for (int k = 0; k <= HM_SRV_N_STATUS; k++) atomic_init(&m->requests[e][k], 0);
    atomic_init(&m->closed, 0);
    atomic_init(&m->hands_ok, 0);
    atomic_init(&m->hands_failed, 0);
    atomic_init(&m->cache_hits, 0);
    atomic_init(&m->cache_misses, 0);
    atomic_init(&m->late_results, 0);
    atomic_init(&m->cancelled, 0);
    atomic_init(&m->deadline_closed, 0);
    atomic_init(&m->budget_refused, 0);
    atomic_init(&m->response_refused, 0);
    atomic_init(&m->answers_dropped_timeout, 0);
    atomic_init(&m->answers_dropped_gone, 0);
    hist_init(&m->queue_wait);
    hist_init(&m->inference);
    hist_init(&m->request);
}

/* Release the histogram locks. */
void hm_srv_metrics_destroy(hm_srv_metrics *m) {
    pthread_mutex_destroy(&m->queue_wait.mu);
    pthread_mutex_destroy(&m->inference.mu);
    pthread_mutex_destroy(&m->request.mu);
}

/* Index of a status code in STATUSES; the last slot collects the rest. */
static int status_index(int status) {
    for (int k = 0; k < HM_SRV_N_STATUS - 1; k++)
        if (STATUSES[k] == status) return k;
    return HM_SRV_N_STATUS - 1;
}

/* Count one answered request under its endpoint and status. */
void hm_srv_metrics_request(hm_srv_metrics *m, int endpoint, int status) {
    if (endpoint < 0 || endpoint >= HM_SRV_EP_COUNT) endpoint = HM_SRV_EP_OTHER;
    atomic_fetch_add(&m->requests[endpoint][status_index(status)], 1);
}

/* Add one observation (seconds) to its bucket and the sum. */
void hm_srv_hist_observe(hm_srv_hist *h, double seconds) {
    pthread_mutex_lock(&h->mu);
    hm_tool_hist_add(&h->h, seconds);
    pthread_mutex_unlock(&h->mu);
}

/* Exposition of one histogram: cumulative buckets, +Inf, _sum and _count. */
static void hist_text(hm_tool_text *b, const char *name, const char *help, hm_srv_hist *h) {
    pthread_mutex_lock(&h->mu);
    hm_tool_hist copy = h->h;
    pthread_mutex_unlock(&h->mu);
    sb_printf(b, "# HELP %s %s\n# TYPE %s histogram\n", name, help, name);
    hm_tool_hist_text(b, name, NULL, &copy);
}

/* The whole /metrics page (malloc'd); NULL when out of memory. */
char *hm_srv_metrics_text(hm_srv *s, size_t *len) {
    hm_srv_metrics *m = &s->metrics;
    hm_tool_text b = {0};
    sb_printf(&b, "# HELP hamer_requests_total HTTP requests answered, by endpoint and status code.\n"
                  "# TYPE hamer_requests_total counter\n");
    for (int e = 0; e < HM_SRV_EP_COUNT; e++)
        for (int k = 0; k < HM_SRV_N_STATUS; k++) {
            unsigned long long v = atomic_load(&m->requests[e][k]);
            if (!v) continue;
            if (STATUSES[k])
                sb_printf(&b, "hamer_requests_total{endpoint=\"%s\",status=\"%d\"} %llu\n", EP_NAMES[e], STATUSES[k], v);
            else
                sb_printf(&b, "hamer_requests_total{endpoint=\"%s\",status=\"other\"} %llu\n", EP_NAMES[e], v);
        }
    sb_printf(&b, "# HELP hamer_connections_dropped_total Requests closed without an answer (body over the limit, "
                  "upload too slow or budget exhausted, client gone). Every request begun is counted once: here or "
                  "in hamer_requests_total.\n# TYPE hamer_connections_dropped_total counter\n"
                  "hamer_connections_dropped_total %llu\n",
              (unsigned long long)atomic_load(&m->closed));
    hist_text(&b, "hamer_queue_wait_seconds", "Time an inference job waited in the queue for a worker.",
              &m->queue_wait);
    hist_text(&b, "hamer_inference_seconds", "Time a worker spent on a job (decode, crop, regress, JSON or PNG).",
              &m->inference);
    hist_text(&b, "hamer_request_duration_seconds",
              "Time from the complete request to the answer, /v1/predict and /v1/render.", &m->request);
    pthread_mutex_lock(&s->qmu);
    int waiting = s->nwaiting, running = s->nrunning;
    pthread_mutex_unlock(&s->qmu);
    sb_printf(&b, "# HELP hamer_queue_depth Jobs waiting for a worker.\n# TYPE hamer_queue_depth gauge\n"
                  "hamer_queue_depth %d\n", waiting);
    sb_printf(&b, "# HELP hamer_queue_capacity The --queue bound.\n# TYPE hamer_queue_capacity gauge\n"
                  "hamer_queue_capacity %d\n", s->cfg.queue);
    sb_printf(&b, "# HELP hamer_workers_busy Workers running a job.\n# TYPE hamer_workers_busy gauge\n"
                  "hamer_workers_busy %d\n", running);
    sb_printf(&b, "# HELP hamer_workers Worker threads (each with its own inference state).\n"
                  "# TYPE hamer_workers gauge\nhamer_workers %d\n", s->cfg.workers);
    sb_printf(&b, "# HELP hamer_requests_in_flight Requests begun and not yet completed.\n"
                  "# TYPE hamer_requests_in_flight gauge\nhamer_requests_in_flight %ld\n",
              atomic_load(&s->inflight));
    sb_printf(&b, "# HELP hamer_hands_processed_total Hands regressed, by result.\n"
                  "# TYPE hamer_hands_processed_total counter\n"
                  "hamer_hands_processed_total{result=\"ok\"} %llu\n"
                  "hamer_hands_processed_total{result=\"failed\"} %llu\n",
              (unsigned long long)atomic_load(&m->hands_ok), (unsigned long long)atomic_load(&m->hands_failed));
    sb_printf(&b, "# HELP hamer_cache_lookups_total Result cache lookups (--cache), by outcome.\n"
                  "# TYPE hamer_cache_lookups_total counter\n"
                  "hamer_cache_lookups_total{result=\"hit\"} %llu\n"
                  "hamer_cache_lookups_total{result=\"miss\"} %llu\n",
              (unsigned long long)atomic_load(&m->cache_hits), (unsigned long long)atomic_load(&m->cache_misses));
    sb_printf(&b, "# HELP hamer_late_results_total Inferences that finished after their request was answered 504.\n"
                  "# TYPE hamer_late_results_total counter\nhamer_late_results_total %llu\n",
              (unsigned long long)atomic_load(&m->late_results));
    sb_printf(&b, "# HELP hamer_inference_cancelled_total Jobs stopped or dropped because nobody waited for them "
                  "(504, client gone, shutdown).\n# TYPE hamer_inference_cancelled_total counter\n"
                  "hamer_inference_cancelled_total %llu\n", (unsigned long long)atomic_load(&m->cancelled));
    sb_printf(&b, "# HELP hamer_deadline_closed_total Connections closed at their header, body or send deadline.\n"
                  "# TYPE hamer_deadline_closed_total counter\nhamer_deadline_closed_total %llu\n",
              (unsigned long long)atomic_load(&m->deadline_closed));
    sb_printf(&b, "# HELP hamer_upload_budget_refused_total Uploads refused because --upload-budget-mb was in use.\n"
                  "# TYPE hamer_upload_budget_refused_total counter\nhamer_upload_budget_refused_total %llu\n",
              (unsigned long long)atomic_load(&m->budget_refused));
    sb_printf(&b, "# HELP hamer_upload_bytes Bytes of request bodies being received (reserved).\n"
                  "# TYPE hamer_upload_bytes gauge\nhamer_upload_bytes %zu\n", atomic_load(&s->upload_bytes));
    sb_printf(&b, "# HELP hamer_upload_budget_bytes The --upload-budget-mb bound.\n"
                  "# TYPE hamer_upload_budget_bytes gauge\nhamer_upload_budget_bytes %zu\n", s->cfg.upload_budget);
    sb_printf(&b, "# HELP hamer_response_bytes Bytes of answers held: reserved for jobs waiting or running, "
                  "then queued answers until sent.\n# TYPE hamer_response_bytes gauge\nhamer_response_bytes %zu\n",
              atomic_load(&s->response_bytes));
    sb_printf(&b, "# HELP hamer_response_budget_bytes The --response-budget-mb bound.\n"
                  "# TYPE hamer_response_budget_bytes gauge\nhamer_response_budget_bytes %zu\n",
              s->cfg.response_budget);
    sb_printf(&b, "# HELP hamer_response_budget_refused_total Requests refused 503 because the answers held "
                  "filled --response-budget-mb.\n# TYPE hamer_response_budget_refused_total counter\n"
                  "hamer_response_budget_refused_total %llu\n",
              (unsigned long long)atomic_load(&m->response_refused));
    sb_printf(&b, "# HELP hamer_answers_dropped_total Answers queued but not sent in full: not read within "
                  "--timeout-s (dropped, connection closed), or the client left.\n"
                  "# TYPE hamer_answers_dropped_total counter\n"
                  "hamer_answers_dropped_total{reason=\"timeout\"} %llu\n"
                  "hamer_answers_dropped_total{reason=\"client_gone\"} %llu\n",
              (unsigned long long)atomic_load(&m->answers_dropped_timeout),
              (unsigned long long)atomic_load(&m->answers_dropped_gone));
    sb_printf(&b, "# HELP hamer_cache_bytes Bytes of cached answers.\n# TYPE hamer_cache_bytes gauge\n"
                  "hamer_cache_bytes %zu\n", hm_srv_cache_bytes(s->cache));
    pthread_mutex_lock(&s->mu);
    double load_s = s->load_s;
    pthread_mutex_unlock(&s->mu);
    sb_printf(&b, "# HELP hamer_model_load_seconds Time to load the checkpoint.\n"
                  "# TYPE hamer_model_load_seconds gauge\nhamer_model_load_seconds %.6f\n", load_s);
    sb_printf(&b, "# HELP hamer_ready 1 once warm-up and the self-check passed.\n# TYPE hamer_ready gauge\n"
                  "hamer_ready %d\n", atomic_load(&s->phase) == HM_SRV_READY);
    return hm_tool_text_take(&b, len);
}
