/* worker.h - `hamer worker`, `hamer submit`, `hamer results`: HaMeR jobs
 * on Redis Streams (hiredis), shared by many worker processes.
 *
 * The protocol (docs/server.md, "Scaling out", is the reference):
 *   - jobs: entries of the jobs stream (XADD <stream> * image <bytes>
 *     [id ID] [boxes JSON] [vertices 0|1] [rescale S] [crop_mode warp|pad]),
 *     read by the workers of one consumer group;
 *   - results: entries of the results stream (id, entry, status ok|error,
 *     result RESULT.json | error MESSAGE, worker);
 *   - the done marker <results>:done:<id> (with a TTL): set in the same
 *     MULTI/EXEC as the result's XADD and the job's XACK, under a WATCH on
 *     it, so a job id gets one result however often its job is delivered;
 *   - dead letters: <stream>:dead; last errors of jobs that failed for a
 *     reason of the worker's own: the hash <stream>:errors.
 *
 * Files: worker_url.c (URLs), worker_redis.c (connection, commands,
 * error classes), worker_job.c (an entry -> a job -> an outcome),
 * worker_queue.c (group, reads, claims, commits, dead letters),
 * worker_metrics.c (counters and /metrics), cli_worker.c (the loop),
 * cli_submit.c, cli_results.c.
 */
#ifndef HM_WORKER_H
#define HM_WORKER_H

#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <hiredis/hiredis.h>
#include "common/metrics.h"
#include "core/util.h" /* hm_now */
#include "hamer.h"

/* ---- URLs (worker_url.c) ---- */

typedef struct {
    char host[256];
    int port;
    int db;
    char user[256], password[512];  /* empty: absent */
} hm_wk_url;

/* redis://[[user]:password@]HOST[:PORT][/DB] (percent-escapes decoded in
 * user and password; IPv6 hosts in brackets). rediss:// is refused: the
 * hiredis this builds with has no TLS. 0, or -1 with a message in err. */
int hm_wk_url_parse(const char *url, hm_wk_url *u, char *err, size_t errlen);
/* The URL without its password, for log lines. */
void hm_wk_url_show(const hm_wk_url *u, char *out, size_t n);
/* --redis URL, else $HAMER_REDIS_URL (keeps a password out of argv); NULL if neither. */
const char *hm_wk_url_arg(const char *given);

/* ---- connection and commands (worker_redis.c) ---- */

/* What a Redis call came to. */
enum {
    HM_WK_OK = 0,
    HM_WK_CONN = -1,    /* no connection (cannot connect, lost, timed out): reconnect */
    HM_WK_BUSY = -2,    /* the server cannot serve now (LOADING, OOM, ...): retry later */
    HM_WK_NOGROUP = -3, /* the consumer group (or its stream) is gone: create it again */
    HM_WK_FATAL = -4,   /* retrying will not help (auth, wrong type, syntax) */
};

typedef struct {
    hm_wk_url url;
    redisContext *c;        /* NULL while disconnected */
    double timeout_s;       /* connect timeout, and the longest wait for a reply */
    char err[512];          /* the last failure, one line */
} hm_wk_redis;

/* Connect, AUTH, SELECT: HM_WK_OK or a failure class (message in r->err). */
int hm_wk_redis_connect(hm_wk_redis *r);
void hm_wk_redis_close(hm_wk_redis *r);

/* A command's words. */
#define HM_WK_MAX_ARGS 24
typedef struct {
    int n;
    const char *v[HM_WK_MAX_ARGS];
    size_t len[HM_WK_MAX_ARGS];
} hm_wk_cmd;

void hm_wk_cmd_init(hm_wk_cmd *c);
void hm_wk_arg(hm_wk_cmd *c, const char *s);
void hm_wk_argn(hm_wk_cmd *c, const char *p, size_t n);

/* Queue a command on the connection (sent with the next read). */
int hm_wk_append(hm_wk_redis *r, const hm_wk_cmd *c);
/* The next reply: HM_WK_OK with *reply set (freeReplyObject it), error
 * replies included; or HM_WK_CONN (connection closed). */
int hm_wk_read(hm_wk_redis *r, redisReply **reply);
/* One command and its reply; an error reply becomes its class (the reply
 * freed, the message in r->err naming what). */
int hm_wk_call(hm_wk_redis *r, const hm_wk_cmd *c, redisReply **reply, const char *what);
/* The class of an error reply (HM_WK_OK for any other reply); message in r->err. */
int hm_wk_reply_class(hm_wk_redis *r, const redisReply *rep, const char *what);

/* ---- jobs (worker_job.c) ---- */

#define HM_WK_ID_MAX 200
#define HM_WK_ENTRY_MAX 48

typedef struct {
    char entry[HM_WK_ENTRY_MAX];    /* the stream entry ID */
    char id[HM_WK_ID_MAX + 1];      /* the job id: the 'id' field, else the entry ID */
    long long deliveries;           /* how often the group delivered it (1: first) */
    int deleted;                    /* the entry was deleted from the stream (no fields) */
    char bad[512];                  /* non-empty: the message is malformed, answer this */
    /* the request; pointers into the reply the job was parsed from */
    const char *image, *boxes;
    size_t image_len, boxes_len;
    int with_vertices;
    hamer_predict_params pp;
    int body_given;                 /* the 'body' field (auto|on|off) was given: body below */
    hamer_body_mode body;           /* the detector's body pass for this job */
    int body_boxes_given;           /* the 'body_boxes' field (0|1) was given: body_boxes below */
    bool body_boxes;                /* the body pass's keypoint-only boxes too */
    double t_read;                  /* monotonic seconds when read */
} hm_wk_job;

/* Parse one stream entry ([id, [field, value, ...]] or [id, nil]); never
 * fails: what is wrong with the message lands in job->bad. payload_max:
 * the most bytes all values together may hold. */
void hm_wk_job_parse(const redisReply *entry, size_t payload_max, hm_wk_job *job);

/* What running a job came to. */
enum { HM_WK_RESULT_OK, HM_WK_RESULT_ERROR, HM_WK_RESULT_RETRY };
typedef struct {
    int kind;               /* OK: result holds RESULT.json; ERROR: the job's fault (an
                               error result); RETRY: the worker's own (left pending) */
    char *result;           /* malloc'd */
    char error[512];
    hamer_timings tm;
    int hands_ok, hands_failed;
} hm_wk_outcome;

/* The inference side: one model and state, the detector and its state. */
typedef struct {
    hamer_model *model;
    hamer_state *state;
    hamer_detector *detector;       /* NULL with --no-detect */
    hamer_detect_state *dstate;
    hamer_detect_params dparams;
    hamer_job *job;                 /* the photo job on state/dstate (made when they are,
                                       else by the first hm_wk_job_run); freed before them */
} hm_wk_engine;

/* Run a parsed job: decode, detect when it has no boxes, regress, RESULT.json
 * (what `hamer run` computes and writes for the same input and options). */
void hm_wk_job_run(hm_wk_engine *e, const hm_wk_job *job, hm_wk_outcome *out);
void hm_wk_outcome_free(hm_wk_outcome *out);
/* Copy msg into out as printable ASCII (a message may quote client bytes). */
void hm_wk_clean(char *out, size_t n, const char *msg);

/* ---- metrics (worker_metrics.c) ---- */

enum { HM_WK_ST_QUEUE, HM_WK_ST_DECODE, HM_WK_ST_DETECT, HM_WK_ST_CROP, HM_WK_ST_REGRESS, HM_WK_ST_FINALISE,
       HM_WK_ST_COMMIT, HM_WK_ST_JOB, HM_WK_N_STAGES };
typedef hm_tool_hist hm_wk_hist; /* the server's bounds (tools/common/metrics.h) */

typedef struct {
    atomic_ullong results_ok, results_error;   /* results written */
    atomic_ullong duplicates;       /* delivered again with a result already written: acked only */
    atomic_ullong claims;           /* jobs taken over from other consumers (XAUTOCLAIM) */
    atomic_ullong dead_letters;
    atomic_ullong retries;          /* jobs left pending after a failure of the worker's own */
    atomic_ullong deleted;          /* entries gone from the stream before an answer */
    atomic_ullong reconnects;
    atomic_ullong hands_ok, hands_failed;
    atomic_int connected, busy;
    pthread_mutex_t mu;             /* the histograms: a bucket and the sum move together */
    hm_wk_hist stage[HM_WK_N_STAGES];
} hm_wk_metrics;

void hm_wk_metrics_init(hm_wk_metrics *m);
void hm_wk_metrics_destroy(hm_wk_metrics *m);
void hm_wk_observe(hm_wk_metrics *m, int stage, double seconds);
/* The Prometheus text (format 0.0.4, malloc'd); NULL when out of memory. */
char *hm_wk_metrics_text(hm_wk_metrics *m, const char *consumer, size_t *len);
/* Serve GET /metrics on host:port (port 0: any; *bound gets it) from a
 * thread of libmicrohttpd's; NULL (message in err) on failure. */
void *hm_wk_metrics_serve(hm_wk_metrics *m, const char *consumer, const char *host, int port, int *bound,
                          char *err, size_t errlen);
void hm_wk_metrics_stop(void *server);

/* ---- the queue (worker_queue.c) ---- */

typedef struct {
    const char *stream, *group, *consumer, *results;
    char dead[512], errors[512];    /* <stream>:dead (or --dead-letters), <stream>:errors */
    int batch;
    long long claim_idle_ms;
    long long max_deliveries;
    long long result_ttl_s;
    size_t payload_max;
} hm_wk_queue;

/* A batch read from the stream: the reply owns the bytes the jobs point to. */
typedef struct {
    redisReply *reply;
    hm_wk_job *jobs;
    int n;
    int claimed;            /* 1: taken over from other consumers */
} hm_wk_batch;

/* XGROUP CREATE <stream> <group> 0 MKSTREAM unless it exists; check the
 * key types (a stream or nothing). */
int hm_wk_queue_prepare(hm_wk_redis *r, const hm_wk_queue *q);
/* Up to q->batch entries: with history (a cursor, "0" at first, moved past
 * what was read) those delivered to this consumer before and not
 * acknowledged, with their delivery counts; else new ones ('>', blocking
 * up to block_ms). HM_WK_OK with b->n possibly 0. */
int hm_wk_queue_read(hm_wk_redis *r, const hm_wk_queue *q, char *history, size_t historylen, int block_ms,
                     hm_wk_batch *b);
/* XAUTOCLAIM entries idle over claim_idle_ms, continuing from *cursor
 * (updated; "0-0" once a sweep is complete), with their delivery counts. */
int hm_wk_queue_claim(hm_wk_redis *r, const hm_wk_queue *q, char *cursor, size_t cursorlen, hm_wk_batch *b,
                      hm_wk_metrics *m);
void hm_wk_batch_free(hm_wk_batch *b);
/* Which jobs of the batch already have a result (done[i] = 1). */
int hm_wk_queue_done(hm_wk_redis *r, const hm_wk_queue *q, const hm_wk_batch *b, int *done);
/* XACK one entry (a duplicate, or a deleted entry). */
int hm_wk_queue_ack(hm_wk_redis *r, const hm_wk_queue *q, const char *entry);
/* Write the job's answer and acknowledge it in one MULTI/EXEC, under a
 * WATCH on its done marker: *written = 1 when this call wrote the result,
 * 0 when one already existed (then only the XACK was done). kind is
 * HM_WK_RESULT_OK (text: RESULT.json) or ERROR (text: the message);
 * dead != 0 also adds the dead letter. */
int hm_wk_queue_commit(hm_wk_redis *r, const hm_wk_queue *q, const hm_wk_job *job, int kind, const char *text,
                       int dead, int *written);
/* Record a job's last error (HSET <stream>:errors entry msg), for its dead letter. */
int hm_wk_queue_note_error(hm_wk_redis *r, const hm_wk_queue *q, const hm_wk_job *job, const char *msg);
/* The recorded last error of a job (into out; a default when none). */
int hm_wk_queue_last_error(hm_wk_redis *r, const hm_wk_queue *q, const hm_wk_job *job, char *out, size_t n);

/* `hamer worker`, `submit` and `results` (cli_worker.c, cli_submit.c,
 * cli_results.c): the arguments after the command's name; the exit code. */
int hm_worker_main(int argc, char **argv);
int hm_submit_main(int argc, char **argv);
int hm_results_main(int argc, char **argv);

/* One "hamer worker: ..." line on stderr. */
void hm_wk_log(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

#endif
