/* server.h - `hamer serve`: the HTTP inference server's internal interfaces.
 *
 * Threads (fixed at start, none per request):
 *   - libmicrohttpd's one internal polling thread runs every connection
 *     (event driven: epoll/poll), reads request bodies, answers the cheap
 *     endpoints itself and hands inference to the workers;
 *   - K worker threads, each owning one hamer_state (the state pool), take
 *     jobs from one bounded FIFO queue;
 *   - one reaper thread answers 504 for jobs whose deadline passed;
 *   - the main thread waits for SIGTERM/SIGINT; a warm-up thread loads the
 *     model and runs the self-check, then exits.
 * A job's connection is suspended (MHD_suspend_connection) while the job
 * waits or runs, and resumed by whoever answers it first (worker or reaper).
 */
#ifndef HM_SERVER_H
#define HM_SERVER_H

#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <microhttpd.h>
#include "hamer.h"

/* ---- configuration ---- */

typedef struct {
    const char *model_path, *mano_path, *host;
    const char *reference_path; /* fp32 self-check model for fast (NULL: model_path) */
    int port;               /* 0: any free port (printed on the startup line) */
    int threads;            /* per worker state */
    int workers;            /* K states / worker threads */
    int queue;              /* waiting jobs at most (running ones not counted) */
    size_t max_body;        /* bytes */
    double timeout_s;       /* queue wait + inference; also body upload and idle limit */
    int precision;          /* HAMER_PRECISION_* */
    int cache_n;            /* result cache entries (0: off) */
    double cache_ttl_s;
    int quiet;              /* no per-request log lines */
} hm_srv_config;

/* ---- metrics (server_metrics.c) ---- */

enum {
    HM_SRV_EP_HEALTHZ, HM_SRV_EP_READYZ, HM_SRV_EP_INFO, HM_SRV_EP_METRICS, HM_SRV_EP_OPENAPI,
    HM_SRV_EP_PREDICT, HM_SRV_EP_RENDER, HM_SRV_EP_OTHER, HM_SRV_EP_COUNT
};
/* Status codes counted one by one; anything else lands in "other". */
#define HM_SRV_N_STATUS 13

#define HM_SRV_N_BUCKETS 14
typedef struct {
    pthread_mutex_t mu;
    uint64_t counts[HM_SRV_N_BUCKETS + 1]; /* the last one is +Inf */
    double sum;
    uint64_t n;
} hm_srv_hist;

typedef struct {
    atomic_ullong requests[HM_SRV_EP_COUNT][HM_SRV_N_STATUS + 1];
    atomic_ullong closed;           /* connections dropped without an answer */
    atomic_ullong hands_ok, hands_failed;
    atomic_ullong cache_hits, cache_misses;
    atomic_ullong late_results;     /* inference finished after its 504 */
    hm_srv_hist queue_wait, inference, request;
} hm_srv_metrics;

void hm_srv_metrics_init(hm_srv_metrics *m);
void hm_srv_metrics_destroy(hm_srv_metrics *m);
/* Count one answered request. */
void hm_srv_metrics_request(hm_srv_metrics *m, int endpoint, int status);
void hm_srv_hist_observe(hm_srv_hist *h, double seconds);

/* ---- result cache (server_cache.c) ---- */

typedef struct {
    uint32_t h[8];
    uint64_t len;
    uint8_t buf[64];
    size_t nbuf;
} hm_srv_sha256;

void hm_srv_sha256_init(hm_srv_sha256 *s);
void hm_srv_sha256_update(hm_srv_sha256 *s, const void *data, size_t len);
void hm_srv_sha256_final(hm_srv_sha256 *s, uint8_t out[32]);

typedef struct hm_srv_cache hm_srv_cache;
/* NULL when n < 1 (cache off) or out of memory. */
hm_srv_cache *hm_srv_cache_new(int n, double ttl_s);
void hm_srv_cache_free(hm_srv_cache *c);
/* On a hit: a malloc'd copy of the body (*body, *len) and its content type. */
int hm_srv_cache_get(hm_srv_cache *c, const uint8_t key[32], uint8_t **body, size_t *len, const char **type);
/* Store a copy of a 200 response; the oldest/least recent entry goes. */
void hm_srv_cache_put(hm_srv_cache *c, const uint8_t key[32], const uint8_t *body, size_t len, const char *type);

/* ---- multipart/form-data (server_multipart.c) ---- */

typedef struct {
    char name[32];
    const uint8_t *data;
    size_t len;
} hm_srv_part;

#define HM_SRV_MAX_PARTS 8

/* Split a multipart/form-data body (RFC 7578) using the boundary of its
 * Content-Type. Returns the number of parts, or -1 with a one-line reason
 * in err. Parts point into body. */
int hm_srv_multipart_parse(const char *content_type, const uint8_t *body, size_t len, hm_srv_part *parts,
                           int max_parts, char *err, size_t errlen);

/* ---- query string of POST /v1/predict and /v1/render (server_query.c) ----
 *
 * Plain strings in, no libmicrohttpd: the server feeds what libmicrohttpd
 * decoded, fuzz/fuzz_query.c feeds arbitrary bytes. Two steps, as the server
 * needs them: the keys are judged as soon as the headers are in (before the
 * body is read), the values once the body is complete. */

#define HM_SRV_QUERY_NKEYS 5
/* The keys, as indexes of hm_srv_query_args.value. */
extern const char *const hm_srv_query_keys[HM_SRV_QUERY_NKEYS];

/* The parameters as given, in request order. */
typedef struct {
    int endpoint;                   /* HM_SRV_EP_PREDICT or HM_SRV_EP_RENDER */
    const char *value[HM_SRV_QUERY_NKEYS];  /* by key, NULL: absent (the caller's strings) */
    const char *bad;                /* first unknown, repeated or valueless key */
} hm_srv_query_args;

/* The values, checked. */
typedef struct {
    hamer_predict_params pp;
    int with_vertices, side_view;   /* 0 or 1 */
    hamer_box boxes[HAMER_MAX_HANDS];
    int nbox;                       /* >= 1 for an image body; 0 for multipart ('hands' part) */
} hm_srv_query;

void hm_srv_query_init(hm_srv_query_args *a, int endpoint);
/* One key=value (value NULL: a key without '='). 0 taken, -1 refused (the
 * first refused key is kept in a->bad; later ones are ignored). */
int hm_srv_query_add(hm_srv_query_args *a, const char *key, const char *value);
/* 0 when every key was taken, else 400 with a one-line reason in msg. */
int hm_srv_query_check_keys(const hm_srv_query_args *a, char *msg, size_t msglen);
/* The keys (as hm_srv_query_check_keys), then the values for a body that is
 * an image (image_body: ?boxes= required) or multipart (?boxes= refused).
 * 0 with q filled, else 400 with a one-line reason in msg. */
int hm_srv_query_parse(const hm_srv_query_args *a, int image_body, hm_srv_query *q, char *msg, size_t msglen);

/* ---- jobs, queue, workers (server_work.c) ---- */

enum { HM_SRV_JOB_PREDICT, HM_SRV_JOB_RENDER };
enum { HM_SRV_JOB_QUEUED, HM_SRV_JOB_RUNNING, HM_SRV_JOB_ANSWERED };

typedef struct hm_srv_job {
    /* input, owned by the job */
    int kind;
    uint8_t *body;                  /* the request body (image, or multipart holding it) */
    const uint8_t *image;           /* points into body */
    size_t image_len;
    hamer_box boxes[HAMER_MAX_HANDS];
    int nbox;
    hamer_predict_params pp;
    int with_vertices, side_view;
    int cacheable;
    uint8_t key[32];
    /* bookkeeping, under the queue lock */
    struct MHD_Connection *conn;
    int state;
    double t_enqueue, deadline;
    struct hm_srv_job *wprev, *wnext;   /* waiting FIFO */
    struct hm_srv_job *pprev, *pnext;   /* unanswered jobs, by deadline */
    atomic_int refs;
    /* the answer: written once by whoever moves the job to ANSWERED */
    int status;
    uint8_t *out;
    size_t out_len;
    const char *out_type;
    int from_cache;
} hm_srv_job;

typedef struct hm_srv hm_srv;

/* Drop one reference; the last frees the job. */
void hm_srv_job_unref(hm_srv_job *job);

/* Start K workers on the given states and the reaper. */
int hm_srv_work_start(hm_srv *s, hamer_state **states, int k);
/* Number of jobs waiting (not running). */
int hm_srv_work_waiting(hm_srv *s);
/* Hand a job to the workers: 0 queued (the job's connection must already
 * be suspended); -1 the queue is full (nothing taken). */
int hm_srv_work_submit(hm_srv *s, hm_srv_job *job);
/* Answer every unanswered job with 503 now (shutdown grace expired). */
void hm_srv_work_flush(hm_srv *s, const char *why);
/* Let workers finish the queue, then join them and the reaper. */
void hm_srv_work_stop(hm_srv *s);
/* Build a JSON error body {"error": msg} (malloc'd). */
char *hm_srv_error_json(const char *msg, size_t *len);

/* ---- the server ---- */

enum { HM_SRV_LOADING, HM_SRV_WARMING, HM_SRV_READY, HM_SRV_FAILED };

struct hm_srv {
    hm_srv_config cfg;
    struct MHD_Daemon *daemon;
    int port;
    atomic_int phase;
    pthread_mutex_t mu;             /* guards reason, model/info publication */
    char reason[512];               /* why not ready / self-check result */
    hamer_model *model;             /* set once loaded */
    hamer_model_info info;
    double load_s;
    double selfcheck_value, selfcheck_gate;
    const char *selfcheck_metric;
    atomic_int draining;
    atomic_int fatal;               /* startup failed: exit 1 */
    atomic_long inflight;           /* requests begun and not completed */
    hm_srv_metrics metrics;
    hm_srv_cache *cache;
    /* the work queue (server_work.c) */
    pthread_mutex_t qmu;
    pthread_cond_t qcv, rcv;        /* work available; reaper wake-up */
    hm_srv_job *whead, *wtail, *phead, *ptail;
    int nwaiting, nrunning, stopping;
    pthread_t *worker_threads, reaper;
    hamer_state **states;
    int nworkers;
    int work_started;
};

/* server_http.c: start the daemon on cfg.host:cfg.port (s->port set). */
int hm_srv_http_start(hm_srv *s);
/* Stop accepting connections (SIGTERM). */
void hm_srv_http_quiesce(hm_srv *s);
void hm_srv_http_stop(hm_srv *s);

/* server_warmup.c: thread body; loads, self-checks, starts the workers. */
void *hm_srv_warmup_main(void *arg);

/* server_metrics.c: the Prometheus text exposition (malloc'd). */
char *hm_srv_metrics_text(hm_srv *s, size_t *len);
/* server_openapi.c: the OpenAPI 3 document (static). */
const char *hm_srv_openapi_json(void);
/* server_http.c: the /info document (malloc'd). */
char *hm_srv_info_json(hm_srv *s, size_t *len);

/* Monotonic seconds. */
double hm_srv_now(void);
/* One log line "hamer serve: ..." on stderr. */
void hm_srv_log(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

#endif
