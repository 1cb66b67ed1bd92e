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
#include "common/metrics.h"
#include "core/util.h" /* hm_now */
#include "hamer.h"

/* ---- configuration ---- */

typedef struct {
    const char *model_path, *mano_path, *host;
    const char *reference_path; /* fp32 self-check model for fast (NULL: model_path) */
    const char *device;     /* --device (NULL: the CPU) */
    int port;               /* 0: any free port (printed on the startup line) */
    int threads;            /* per worker state */
    int workers;            /* K states / worker threads */
    int queue;              /* waiting jobs at most (running ones not counted) */
    size_t max_body;        /* bytes */
    double timeout_s;       /* queue wait + inference; also body upload and idle limit */
    int precision;          /* HAMER_PRECISION_* */
    int cache_n;            /* result cache entries (0: off) */
    double cache_ttl_s;
    int quiet;              /* no per-request log lines (libmicrohttpd's included) */
    int max_conns;          /* open connections at most (libmicrohttpd refuses more) */
    int max_conns_per_ip;   /* open connections per client address at most */
    double header_timeout_s;/* request line + headers must arrive within this, from the
                               connection's start or the previous answer: a fixed deadline */
    size_t upload_budget;   /* bytes of request bodies being received, all connections */
    size_t response_budget; /* bytes of answers held, all connections: reserved at the job's
                               bound while it waits or runs, then its size until sent */
    size_t cache_bytes;     /* result cache size bound */
    double drain_s;         /* shutdown: longest wait for requests in flight */
    double pixels_per_byte; /* decoded pixels a body byte may buy (above a free allowance) */
    const char *detector_dir; /* NULL: the library's search path */
    int detector_lite, no_detector;
    const char *web_dir;    /* the web page's files (NULL: the default share dir) */
    int live_sessions;      /* POST /v1/live sessions at most (0: the endpoint is off) */
    double live_idle_s;     /* a session without a request for this long ends */
} hm_srv_config;

/* ---- metrics (server_metrics.c) ---- */

enum {
    HM_SRV_EP_HEALTHZ, HM_SRV_EP_READYZ, HM_SRV_EP_INFO, HM_SRV_EP_METRICS, HM_SRV_EP_OPENAPI,
    HM_SRV_EP_PREDICT, HM_SRV_EP_RENDER, HM_SRV_EP_LIVE, HM_SRV_EP_WEB, HM_SRV_EP_OTHER, HM_SRV_EP_COUNT
};
/* Status codes counted one by one; anything else lands in "other". */
#define HM_SRV_N_STATUS 16

typedef struct {
    pthread_mutex_t mu; /* a bucket count and the sum move together */
    hm_tool_hist h;
} hm_srv_hist;

typedef struct {
    atomic_ullong requests[HM_SRV_EP_COUNT][HM_SRV_N_STATUS + 1];
    atomic_ullong closed;           /* connections dropped without an answer */
    atomic_ullong hands_ok, hands_failed;
    atomic_ullong cache_hits, cache_misses;
    atomic_ullong late_results;     /* inference finished after its 504 */
    atomic_ullong cancelled;        /* inferences stopped: nobody waited for them */
    atomic_ullong deadline_closed;  /* connections closed at the header/body deadline */
    atomic_ullong budget_refused;   /* uploads refused 503: upload budget exhausted */
    atomic_ullong response_refused; /* requests refused 503: response budget exhausted */
    atomic_ullong answers_dropped_timeout;  /* answers not read within --timeout-s: dropped, closed */
    atomic_ullong answers_dropped_gone;     /* answers whose client left before reading them */
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
hm_srv_cache *hm_srv_cache_new(int n, size_t max_bytes, double ttl_s);
void hm_srv_cache_free(hm_srv_cache *c);
/* On a hit: a malloc'd copy of the body (*body, *len) and its content type. */
int hm_srv_cache_get(hm_srv_cache *c, const uint8_t key[32], uint8_t **body, size_t *len, const char **type);
/* Store a copy of a 200 response; least recently used entries go until it
 * fits both bounds (an answer larger than the byte bound is not kept). */
void hm_srv_cache_put(hm_srv_cache *c, const uint8_t key[32], const uint8_t *body, size_t len, const char *type);
/* Bytes held by the cache's answers. */
size_t hm_srv_cache_bytes(hm_srv_cache *c);
/* Absorb one field as its 8-byte length then its bytes: the concatenation
 * of fields can then never be read as another split of them. */
void hm_srv_sha256_field(hm_srv_sha256 *s, const void *data, size_t len);

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

/* ---- the request head's framing (server_framing.c) ----
 * libmicrohttpd 0.9.75 (Debian 12's) frames some heads its own way: both
 * Content-Length and Transfer-Encoding read as chunked and kept alive, an
 * unknown Transfer-Encoding read until the client closes, a folded line
 * glued to the header's name, whitespace before the colon kept in the
 * name, a %00 in the path cutting it short. The handler refuses these
 * before anything else (docs/server.md, "Framing"); the rules are here,
 * free of libmicrohttpd, so fuzz/fuzz_server.c feeds them arbitrary heads. */

/* One header field as libmicrohttpd hands it over. */
typedef struct {
    const char *name, *value;
    size_t name_len, value_len;
    int folded;                     /* it went on over a folded line */
} hm_srv_field;

/* The framing rules, checked field by field as libmicrohttpd lists them
 * (no allocation: a head may hold thousands of fields). */
typedef struct {
    hm_srv_field te, cl;            /* the Transfer-Encoding field, the first Content-Length */
    int nte, ncl;
    int status;                     /* 0, or the first refusal's 400 / 501 */
    char msg[200];                  /* its reason, one printable line */
} hm_srv_framing;

void hm_srv_framing_init(hm_srv_framing *fr);
/* One header field; the first refusal stays. */
void hm_srv_framing_field(hm_srv_framing *fr, const hm_srv_field *f);
/* After the last field: 0 when the head may be served, else 400 or 501
 * (reason in fr->msg). http10: the request line says HTTP/1.0. A refusal
 * must be answered at once and the connection closed: where the body ends
 * is not known. */
int hm_srv_framing_end(hm_srv_framing *fr, int http10);

/* 400 (msg set) when the request target's path (up to its '?', before
 * %-decoding) holds a %00, which the decoded path would end at; else 0. */
int hm_srv_target_check(const char *target, char *msg, size_t msglen);

/* ---- query string of POST /v1/predict and /v1/render (server_query.c) ----
 *
 * Plain strings in, no libmicrohttpd: the server feeds what libmicrohttpd
 * decoded, fuzz/fuzz_query.c feeds arbitrary bytes. Two steps, as the server
 * needs them: the keys are judged as soon as the headers are in (before the
 * body is read), the values once the body is complete. */

#define HM_SRV_QUERY_NKEYS 15
/* The keys, as indexes of hm_srv_query_args.value. */
extern const char *const hm_srv_query_keys[HM_SRV_QUERY_NKEYS];

/* The parameters as given, in request order. */
typedef struct {
    int endpoint;                   /* HM_SRV_EP_PREDICT or HM_SRV_EP_RENDER */
    const char *value[HM_SRV_QUERY_NKEYS];  /* by key, NULL: absent (the caller's strings) */
    const char *bad;                /* first unknown, repeated or valueless key */
} hm_srv_query_args;

/* The values, checked. */
/* What /v1/predict answers: RESULT.json, the hands as one GLB
 * (hamer_job_glb), as one OBJ (hamer_job_obj), as one BVH, or the JSON,
 * the GLB, the OBJ and the overlay PNG from one run of the job (format=all:
 * multipart/form-data, parts "result", "overlay", "glb", "obj"). */
enum { HM_SRV_FMT_JSON, HM_SRV_FMT_GLB, HM_SRV_FMT_OBJ, HM_SRV_FMT_BVH, HM_SRV_FMT_ALL };

typedef struct {
    hamer_predict_params pp;
    int with_vertices, side_view;   /* 0 or 1 */
    hamer_box boxes[HAMER_MAX_HANDS];
    int nbox;                       /* >= 1 for an image body; 0 for multipart ('hands' part) */
    double timeout_s;               /* ?timeout_s=: the client's own deadline, 0: none given */
    int format;                     /* /v1/predict?format=: HM_SRV_FMT_* */
    hamer_body_mode body;           /* ?body=: the detector's body pass (no boxes only), default auto */
    bool body_boxes;                /* ?body_boxes=1: its keypoint-only boxes too (no boxes only) */
    hamer_proposals_mode proposals; /* ?proposals=: the detector's proposal pass (no boxes only), default auto */
    float min_score;                /* ?min_score=: the detector's threshold (no boxes only); 0: its default */
    int max_hands;                  /* ?max_hands=: at most this many hands detected (no boxes only); 0: default */
    unsigned draw_hide;             /* ?draw=: HAMER_DRAW_* bits the overlay leaves out (render, format=all) */
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

/* ---- POST /v1/live (server_live.c) ---- */

/* Its query (parsed in server_query.c, fuzzed with the others): session=T
 * (32 hex digits; absent: a new session), end=0|1, and a new session's
 * max_hands (1..HM_SRV_LIVE_MAX_HANDS), min_score, smooth. */
#define HM_SRV_LIVE_MAX_HANDS 8
typedef struct {
    char session[33];
    int end, max_hands;
    float min_score;                /* 0: the tracker's default */
    hamer_smooth_mode smooth;
    unsigned seen;                  /* the keys taken (bit per key) */
} hm_srv_live_query;

void hm_srv_live_query_init(hm_srv_live_query *q);
/* One key=value (value NULL: no '='): 0, or 400 with a one-line printable
 * reason in msg (unknown, repeated, valueless, or a bad value). */
int hm_srv_live_query_add(hm_srv_live_query *q, const char *key, const char *value, char *msg, size_t msglen);
/* After the last key: 0, or 400 (a new session's keys with session=, end
 * without it). */
int hm_srv_live_query_check(const hm_srv_live_query *q, char *msg, size_t msglen);

typedef struct hm_srv_live hm_srv_live;

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
    int format;                     /* HM_SRV_FMT_* (predict) */
    int detect;                     /* no boxes given: the detector finds them */
    hamer_body_mode body_mode;      /* ?body=: the detector's body pass */
    bool body_boxes;                /* ?body_boxes= */
    hamer_proposals_mode proposals; /* ?proposals= */
    float min_score;                /* ?min_score= (0: the detector's default) */
    int max_hands;                  /* ?max_hands= (0: the detector's default) */
    unsigned draw_hide;             /* ?draw= */
    size_t answer_bound;            /* most bytes its answer can take (hm_srv_answer_bound) */
    int cacheable;
    uint8_t key[32];
    /* bookkeeping, under the queue lock */
    struct MHD_Connection *conn;
    int state;
    double timeout_s;               /* min(--timeout-s, ?timeout_s=) */
    double t_enqueue, deadline;
    struct hm_srv_job *wprev, *wnext;   /* waiting FIFO */
    struct hm_srv_job *pprev, *pnext;   /* unanswered jobs, by deadline */
    atomic_int refs;
    atomic_int cancel;              /* nobody waits for the answer: stop the inference */
    /* the answer: written once by whoever moves the job to ANSWERED */
    int status;
    uint8_t *out;
    size_t out_len;
    const char *out_type;
    char all_type[80];              /* format=all: its Content-Type (the boundary), out_type points here */
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
/* Answer every unanswered job with 503 now and cancel running inferences
 * (shutdown grace expired, or a second signal). */
void hm_srv_work_flush(hm_srv *s, const char *why);
/* The client of a suspended job went away: answer it (nobody reads it) and
 * cancel its inference, or take it off the queue. */
void hm_srv_work_abandon(hm_srv *s, hm_srv_job *job);
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
    atomic_size_t upload_bytes;     /* reserved by bodies being received */
    atomic_size_t response_bytes;   /* reserved by answers held (response budget) */
    /* the hand detector (NULL: none; detector_reason says why) */
    hamer_detector *detector;
    hamer_detect_state **dstates;
    char detector_reason[512];
    struct hm_srv_web *web;         /* the web page (server_static.c) */
    hm_srv_live *live;              /* POST /v1/live's sessions (server_live.c; NULL: off) */
    /* connections (server_conn.c) */
    struct hm_srv_conn *conns;
    struct hm_srv_conn *conn_free;
    pthread_mutex_t cmu;
    pthread_t watchdog;
    int watchdog_started;
    atomic_int watchdog_stop;
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

/* server_static.c: the web page at /, a fixed list of files read at start
 * from cfg.web_dir. route: the file's index for a URL path of n bytes, or
 * -1; get: 200 with the file, or 404 with a text naming scripts/get_web.sh
 * when the page is not installed; csp: the page's Content-Security-Policy. */
void hm_srv_web_load(hm_srv *s);
void hm_srv_web_free(hm_srv *s);
int hm_srv_web_route(const char *url, size_t n);
int hm_srv_web_get(hm_srv *s, int file, const void **data, size_t *len, const char **type);
extern const char *hm_srv_web_csp;

/* server_live.c: the live sessions' table and its janitor thread
 * (cfg.live_sessions > 0); -1 out of memory. Stop ends every session. */
int hm_srv_live_start(hm_srv *s);
void hm_srv_live_stop(hm_srv *s);

/* server_http.c: start the daemon on cfg.host:cfg.port (s->port set). */
int hm_srv_http_start(hm_srv *s);
/* Stop accepting connections (SIGTERM). */
void hm_srv_http_quiesce(hm_srv *s);
void hm_srv_http_stop(hm_srv *s);

/* server_conn.c: the connection table and its watchdog thread, which
 * closes connections past their header/body deadline, and notices clients
 * that went away while their request waits or runs. */

typedef struct hm_srv_conn {
    struct MHD_Connection *conn;    /* NULL: free slot */
    int fd;
    atomic_llong deadline_us;       /* monotonic; 0: none (suspended, or answered and sending) */
    atomic_llong armed_us;          /* when that deadline was armed */
    atomic_int why;                 /* HM_SRV_DL_* of the deadline armed */
    atomic_int closed_by;           /* the deadline that fired (0 none) */
    hm_srv_job *job;                /* the suspended request's job (under cmu) */
    struct hm_srv_conn *next_free;
    void *req;                      /* the request context (server_http.c), reused */
    int awaiting;                   /* no request line seen since the last request (MHD thread) */
    int last_status;                /* the last status counted on this connection */
} hm_srv_conn;

enum { HM_SRV_DL_NONE, HM_SRV_DL_HEADER, HM_SRV_DL_BODY, HM_SRV_DL_SEND };

/* The connection table, each record with a req_size-byte request context
 * (server_http.c's; passed in so that this file stays below it). */
int hm_srv_conn_init(hm_srv *s, size_t req_size);
void hm_srv_conn_free(hm_srv *s);
/* MHD_OPTION_NOTIFY_CONNECTION callback. */
void hm_srv_conn_notify(void *cls, struct MHD_Connection *c, void **socket_context,
                        enum MHD_ConnectionNotificationCode code);
/* Arm (seconds > 0) or clear (0) a connection's deadline. */
void hm_srv_conn_deadline(hm_srv_conn *k, int why, double seconds);
/* Set / clear the job a suspended connection waits for. */
void hm_srv_conn_set_job(hm_srv *s, hm_srv_conn *k, hm_srv_job *job);
int hm_srv_conn_watchdog_start(hm_srv *s);
void hm_srv_conn_watchdog_stop(hm_srv *s);

/* The status of the last error libmicrohttpd answered itself (noted by
 * server_http.c's logger), taken once. */
void hm_srv_mhd_status_note(int status);
int hm_srv_mhd_status_take(void);

/* server_http.c: the request context's size (one per connection record). */
size_t hm_srv_req_size(void);

/* server_warmup.c: thread body; loads, self-checks, starts the workers. */
void *hm_srv_warmup_main(void *arg);

/* server_metrics.c: the Prometheus text exposition (malloc'd). */
char *hm_srv_metrics_text(hm_srv *s, size_t *len);
/* server_openapi.c: the OpenAPI 3 document (static). */
const char *hm_srv_openapi_json(void);
/* server_http.c: the /info document (malloc'd). */
char *hm_srv_info_json(hm_srv *s, size_t *len);

/* Decoded pixels any body may buy, whatever its size (4 megapixels). */
#define HM_SRV_FREE_PIXELS 4000000
/* Width and height an image's header declares (every format the library
 * decodes), without decoding; -1 when none is found (the decoder then says
 * what is wrong, and bounds the pixels itself). */
int hm_srv_image_dims(const uint8_t *p, size_t n, int *w, int *h);

/* The most bytes the answer of a job can take, reserved from the response
 * budget before it runs: render, a PNG of a pixels-pixel image; predict,
 * RESULT.json of nhands hands (with their vertices or not). An upper bound
 * (the answer then holds its real size), so that answers in flight never
 * exceed the budget. */
size_t hm_srv_answer_bound(int render, double pixels, int nhands, int with_vertices, int format);

/* `hamer serve` (cli_serve.c): the arguments after the command's name;
 * returns the exit code. */
int hm_serve_main(int argc, char **argv);

/* One log line "hamer serve: ..." on stderr. */
void hm_srv_log(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

#endif
