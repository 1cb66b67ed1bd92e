/* worker_metrics.c - a worker's counters and per-stage latency histograms,
 * in the Prometheus text format `hamer serve` uses (0.0.4, the same
 * bucket bounds), served on --metrics-port by libmicrohttpd.
 *
 * Counters are atomics; the histograms share one mutex (the worker loop
 * observes, the HTTP thread reads).
 */
#include <arpa/inet.h>
#include <errno.h>
#include <microhttpd.h>
#include <netinet/in.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "worker/worker.h"

/* The text buffer's printf (tools/common/metrics.h), by a short name. */
#define tb_printf hm_tool_text_printf

static const char *STAGES[HM_WK_N_STAGES] = {"queue", "decode", "detect", "crop", "regress", "finalise",
                                             "commit", "job"};

/* All counters zero, the histograms empty. */
void hm_wk_metrics_init(hm_wk_metrics *m) {
    memset(m, 0, sizeof *m);
    atomic_init(&m->results_ok, 0);
    atomic_init(&m->results_error, 0);
    atomic_init(&m->duplicates, 0);
    atomic_init(&m->claims, 0);
    atomic_init(&m->dead_letters, 0);
    atomic_init(&m->retries, 0);
    atomic_init(&m->deleted, 0);
    atomic_init(&m->reconnects, 0);
    atomic_init(&m->hands_ok, 0);
    atomic_init(&m->hands_failed, 0);
    atomic_init(&m->connected, 0);
    atomic_init(&m->busy, 0);
    pthread_mutex_init(&m->mu, NULL);
}

void hm_wk_metrics_destroy(hm_wk_metrics *m) { pthread_mutex_destroy(&m->mu); }

/* Add one observation (seconds; negative counts as 0) to a stage's histogram. */
void hm_wk_observe(hm_wk_metrics *m, int stage, double seconds) {
    if (stage < 0 || stage >= HM_WK_N_STAGES) return;
    if (seconds < 0) seconds = 0;
    pthread_mutex_lock(&m->mu);
    hm_tool_hist_add(&m->stage[stage], seconds);
    pthread_mutex_unlock(&m->mu);
}

/* One counter family with a single sample. */
static void counter(hm_tool_text *b, const char *name, const char *help, unsigned long long v) {
    tb_printf(b, "# HELP %s %s\n# TYPE %s counter\n%s %llu\n", name, help, name, name, v);
}

/* The whole /metrics page (malloc'd); NULL when out of memory. */
char *hm_wk_metrics_text(hm_wk_metrics *m, const char *consumer, size_t *len) {
    hm_tool_text b = {0};
    char label[256];
    size_t k = 0;
    /* Label values escape backslash and double quote (names have no newline). */
    for (const char *p = consumer; *p && k + 2 < sizeof label; p++) {
        if (*p == '\\' || *p == '"') label[k++] = '\\';
        label[k++] = *p;
    }
    label[k] = 0;
    tb_printf(&b, "# HELP hamer_worker_info The worker's consumer name and version.\n# TYPE hamer_worker_info gauge\n"
                  "hamer_worker_info{consumer=\"%s\",version=\"%s\"} 1\n", label, hamer_version());
    tb_printf(&b, "# HELP hamer_worker_jobs_total Jobs answered (a result written), by result.\n"
                  "# TYPE hamer_worker_jobs_total counter\n"
                  "hamer_worker_jobs_total{result=\"ok\"} %llu\nhamer_worker_jobs_total{result=\"error\"} %llu\n",
              (unsigned long long)atomic_load(&m->results_ok), (unsigned long long)atomic_load(&m->results_error));
    counter(&b, "hamer_worker_duplicates_total", "Deliveries of jobs already answered: acknowledged, not computed again.",
            atomic_load(&m->duplicates));
    counter(&b, "hamer_worker_claims_total", "Jobs taken over from idle consumers (XAUTOCLAIM).", atomic_load(&m->claims));
    counter(&b, "hamer_worker_dead_letters_total", "Jobs moved to the dead-letter stream (over --max-deliveries).",
            atomic_load(&m->dead_letters));
    counter(&b, "hamer_worker_retries_total", "Jobs left pending after a failure of the worker's own (out of memory).",
            atomic_load(&m->retries));
    counter(&b, "hamer_worker_deleted_total", "Pending entries deleted from the stream before an answer.",
            atomic_load(&m->deleted));
    counter(&b, "hamer_worker_reconnects_total", "Connections to Redis made again after a loss.",
            atomic_load(&m->reconnects));
    tb_printf(&b, "# HELP hamer_worker_hands_processed_total Hands regressed, by result.\n"
                  "# TYPE hamer_worker_hands_processed_total counter\n"
                  "hamer_worker_hands_processed_total{result=\"ok\"} %llu\n"
                  "hamer_worker_hands_processed_total{result=\"failed\"} %llu\n",
              (unsigned long long)atomic_load(&m->hands_ok), (unsigned long long)atomic_load(&m->hands_failed));
    tb_printf(&b, "# HELP hamer_worker_connected 1 while connected to Redis.\n# TYPE hamer_worker_connected gauge\n"
                  "hamer_worker_connected %d\n", atomic_load(&m->connected));
    tb_printf(&b, "# HELP hamer_worker_busy 1 while a batch is being worked on.\n# TYPE hamer_worker_busy gauge\n"
                  "hamer_worker_busy %d\n", atomic_load(&m->busy));
    hm_wk_hist h[HM_WK_N_STAGES];
    pthread_mutex_lock(&m->mu);
    memcpy(h, m->stage, sizeof h);
    pthread_mutex_unlock(&m->mu);
    const char *name = "hamer_worker_stage_seconds";
    tb_printf(&b, "# HELP %s Time per job and stage: queue (submitted to read; the clocks of Redis and the worker), "
                  "decode, detect, crop, regress, finalise, commit (the MULTI/EXEC), job (read to answered).\n"
                  "# TYPE %s histogram\n", name, name);
    for (int s = 0; s < HM_WK_N_STAGES; s++) {
        snprintf(label, sizeof label, "stage=\"%s\"", STAGES[s]);
        hm_tool_hist_text(&b, name, label, &h[s]);
    }
    return hm_tool_text_take(&b, len);
}

typedef struct {
    struct MHD_Daemon *d;
    hm_wk_metrics *m;
    char consumer[256];
} metrics_server;

/* GET /metrics (and /healthz); anything else 404. */
static enum MHD_Result on_request(void *cls, struct MHD_Connection *c, const char *url, const char *method,
                                  const char *version, const char *data, size_t *size, void **con_cls) {
    metrics_server *s = cls;
    (void)version, (void)data, (void)size, (void)con_cls;
    int status = MHD_HTTP_OK;
    const char *type = "text/plain; charset=utf-8";
    char *body = NULL;
    size_t len = 0;
    if (strcmp(method, "GET")) {
        status = MHD_HTTP_METHOD_NOT_ALLOWED;
    } else if (!strcmp(url, "/metrics")) {
        body = hm_wk_metrics_text(s->m, s->consumer, &len);
        type = "text/plain; version=0.0.4; charset=utf-8";
        if (!body) status = MHD_HTTP_INTERNAL_SERVER_ERROR;
    } else if (strcmp(url, "/healthz")) {
        status = MHD_HTTP_NOT_FOUND;
    }
    if (!body) {
        const char *t = status == MHD_HTTP_OK ? "ok\n" : status == MHD_HTTP_NOT_FOUND ? "not found\n" : "error\n";
        body = strdup(t);
        len = body ? strlen(body) : 0;
    }
    struct MHD_Response *r = MHD_create_response_from_buffer(len, body ? body : (char *)"", body ? MHD_RESPMEM_MUST_FREE
                                                                                                  : MHD_RESPMEM_PERSISTENT);
    if (!r) {
        free(body);
        return MHD_NO;
    }
    MHD_add_response_header(r, "Content-Type", type);
    enum MHD_Result ret = MHD_queue_response(c, (unsigned)status, r);
    MHD_destroy_response(r);
    return ret;
}

void *hm_wk_metrics_serve(hm_wk_metrics *m, const char *consumer, const char *host, int port, int *bound,
                          char *err, size_t errlen) {
    struct sockaddr_storage ss;
    memset(&ss, 0, sizeof ss);
    unsigned flags = MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_AUTO;
    struct sockaddr_in *v4 = (struct sockaddr_in *)&ss;
    struct sockaddr_in6 *v6 = (struct sockaddr_in6 *)&ss;
    if (inet_pton(AF_INET, host, &v4->sin_addr) == 1) {
        v4->sin_family = AF_INET;
        v4->sin_port = htons((uint16_t)port);
    } else if (inet_pton(AF_INET6, host, &v6->sin6_addr) == 1) {
        v6->sin6_family = AF_INET6;
        v6->sin6_port = htons((uint16_t)port);
        flags |= MHD_USE_IPv6;
    } else {
        snprintf(err, errlen, "--metrics-host must be a numeric IPv4 or IPv6 address, got '%s'", host);
        return NULL;
    }
    metrics_server *s = calloc(1, sizeof *s);
    if (!s) {
        snprintf(err, errlen, "out of memory");
        return NULL;
    }
    s->m = m;
    snprintf(s->consumer, sizeof s->consumer, "%s", consumer);
    s->d = MHD_start_daemon(flags, (uint16_t)port, NULL, NULL, on_request, s, MHD_OPTION_SOCK_ADDR,
                            (struct sockaddr *)&ss, MHD_OPTION_CONNECTION_TIMEOUT, 10u, MHD_OPTION_END);
    if (!s->d) {
        snprintf(err, errlen, "cannot listen on %s port %d for metrics: %s", host, port, strerror(errno));
        free(s);
        return NULL;
    }
    const union MHD_DaemonInfo *info = MHD_get_daemon_info(s->d, MHD_DAEMON_INFO_BIND_PORT);
    *bound = info ? info->port : port;
    return s;
}

/* Stop the endpoint (NULL: nothing to do). */
void hm_wk_metrics_stop(void *server) {
    metrics_server *s = server;
    if (!s) return;
    MHD_stop_daemon(s->d);
    free(s);
}
