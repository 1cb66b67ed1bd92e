/* cli_worker.c - `hamer worker`: take HaMeR jobs from a Redis stream as one
 * consumer of a group, answer each on the results stream.
 *
 * One process = one consumer = one model state (run several per machine,
 * --threads x workers <= cores). The loop: read a batch (this consumer's
 * own unacknowledged entries first after every (re)connect, then idle ones
 * of other consumers via XAUTOCLAIM every so often, else new ones with a
 * blocking XREADGROUP), answer its jobs one by one (worker_queue.c says why
 * each job id gets exactly one result), repeat. Redis trouble never drops
 * a job: results computed stay in hand and are written after the
 * reconnection (capped exponential backoff). SIGTERM/SIGINT: no new read;
 * the batch in hand is finished and acknowledged, then exit 0.
 *
 * Exit status: 0 after SIGTERM/SIGINT; 1 startup failure, a Redis error
 * retrying cannot fix, or answers that could not be written while
 * stopping (those jobs stay pending for the other workers); 2 bad usage.
 */
#include <signal.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include "common/args.h"
#include "common/common.h"
#include "worker/worker.h"

/* Set by SIGTERM/SIGINT; read by the loop between steps. */
static volatile sig_atomic_t g_stop;

static void on_signal(int sig) { g_stop = sig; }

typedef struct {
    hm_model_args m;        /* --model --mano --precision --device --threads */
    const char *url, *url_given, *metrics_host, *dead_given;
    hm_wk_queue q;
    char consumer[HM_WK_ID_MAX + 1];
    int no_detect, metrics_port;
    double redis_timeout_s, payload_mb;
    hm_tool_detect_args det;
} worker_args;

typedef struct {
    worker_args *a;
    hm_wk_redis r;
    hm_wk_engine e;
    hm_wk_metrics m;
    int prepared;           /* connected and the group checked on this connection */
    int attempts;           /* failed (re)connections in a row */
    int was_connected;      /* a connection was made before: the next one is a reconnection */
    double give_up_at;      /* while stopping: when to stop retrying Redis */
    char history[HM_WK_ENTRY_MAX];  /* own-pending cursor; "" when done */
} worker;

/* --consumer: 1..HM_WK_ID_MAX printable characters, into the array. */
static int consumer_option(const char *v, void *field, void *ctx, char *why, size_t n) {
    (void)ctx, (void)why, (void)n;
    size_t k = strlen(v), ok = k >= 1 && k <= HM_WK_ID_MAX;
    for (size_t j = 0; j < k; j++) ok &= (unsigned char)v[j] > 0x20 && (unsigned char)v[j] < 0x7f;
    if (!ok) return -1;
    snprintf((char *)field, HM_WK_ID_MAX + 1, "%s", v);
    return 0;
}

#define W(field) (offsetof(worker_args, field))

static const hm_opt worker_opts[] = {
    {.name = "--redis", .meta = "URL", .kind = HM_OPT_STR, .off = W(url_given),
     .help = "the Redis server (default: $HAMER_REDIS_URL); no TLS\n(rediss://)"},
    {.name = "--stream", .meta = "S", .kind = HM_OPT_STR, .off = W(q.stream),
     .help = "the jobs stream (default hamer:jobs)"},
    {.name = "--group", .meta = "G", .kind = HM_OPT_STR, .off = W(q.group),
     .help = "the consumer group (default hamer)"},
    {.name = "--consumer", .meta = "NAME", .kind = HM_OPT_FN, .off = W(consumer), .fn = consumer_option,
     .want = "1..200 printable characters",
     .help = "this worker's name in the group (default\nHOSTNAME-PID)"},
    {.name = "--results", .meta = "S", .kind = HM_OPT_STR, .off = W(q.results),
     .help = "the results stream (default hamer:results)"},
    {.name = "--dead-letters", .meta = "S", .kind = HM_OPT_STR, .off = W(dead_given),
     .help = "stream of jobs delivered more than --max-deliveries\n"
             "times (default <stream>:dead); they also get an error\n"
             "result"},
    {.name = "--batch", .meta = "N", .kind = HM_OPT_INT, .off = W(q.batch), .lo = 1, .hi = 256,
     .help = "entries per read, 1..256 (default 4)"},
    {.name = "--claim-idle-ms", .meta = "MS", .kind = HM_OPT_LLONG, .off = W(q.claim_idle_ms), .lo = 10,
     .hi = 86400000.0 * 30,
     .help = "take over jobs pending this long on other consumers\n"
             "(default 60000); must exceed the time a batch takes"},
    {.name = "--max-deliveries", .meta = "K", .kind = HM_OPT_LLONG, .off = W(q.max_deliveries), .lo = 1,
     .hi = 1000000, .help = "deliveries before a job is a dead letter (default 5)"},
    {.name = "--result-ttl-s", .meta = "S", .kind = HM_OPT_LLONG, .off = W(q.result_ttl_s), .lo = 1,
     .hi = 86400.0 * 3650,
     .help = "how long a job id stays answered (its done marker;\ndefault 7 days)"},
    {.name = "--max-payload-mb", .meta = "MB", .kind = HM_OPT_REAL, .off = W(payload_mb), .lo = 0, .hi = 4096,
     .open_lo = 1, .help = "the most a job's fields may hold together (default\n20, as serve)"},
    {.name = "--redis-timeout-s", .meta = "T", .kind = HM_OPT_REAL, .off = W(redis_timeout_s), .lo = 0,
     .hi = 3600, .open_lo = 1, .help = "connect timeout and the longest wait for a reply\n(default 10)"},
    {.name = "--no-detect", .kind = HM_OPT_FLAG, .off = W(no_detect),
     .help = "do not load the detector: jobs without boxes get an\n"
             "error result (without it, missing detector models stop\n"
             "the worker at start)"},
    {.name = "--metrics-port", .meta = "P", .kind = HM_OPT_INT, .off = W(metrics_port), .lo = 0, .hi = 65535,
     .help = "Prometheus text on http://HOST:P/metrics (0: any free\nport; default: none)"},
    {.name = "--metrics-host", .meta = "HOST", .kind = HM_OPT_STR, .off = W(metrics_host),
     .help = "the address the metrics listen on (default 127.0.0.1)"},
    {0},
};

static const hm_command worker_cmd = {
    .cmd = "worker",
    .synopsis =
        "usage: hamer worker --model M --redis redis://[[user]:password@]HOST[:PORT][/DB]\n"
        "                    [--stream hamer:jobs] [--group hamer] [--consumer NAME]\n"
        "                    [--results hamer:results] [--dead-letters STREAM]\n"
        "                    [--batch 4] [--claim-idle-ms 60000] [--max-deliveries 5]\n"
        "                    [--result-ttl-s 604800] [--max-payload-mb 20]\n"
        "                    [--precision fp32|fast] [--device D] [--threads N]\n"
        "                    [--mano FILE.npz] [--detector DIR] [--lite] [--max-hands N]\n"
        "                    [--min-score S] [--single-pass] [--body auto|on|off]\n"
        "                    [--body-boxes on|off] [--proposals auto|on|off]\n"
        "                    [--no-detect] [--metrics-port P] [--metrics-host 127.0.0.1]\n"
        "                    [--redis-timeout-s 10]\n",
    .about =
        "Serves HaMeR jobs from a Redis stream as one consumer of a consumer group\n"
        "(created if absent, from the stream's start). A job is an entry with the\n"
        "fields image (JPEG/PNG bytes), and optionally id, boxes (JSON as 'hamer run\n"
        "--boxes' reads; without it the built-in detector finds the hands), vertices\n"
        "(0|1), rescale, crop_mode, body (auto|on|off: the detector's body pass, for\n"
        "jobs without boxes; default the worker's --body), body_boxes (0|1: its\n"
        "keypoint-only boxes too; default the worker's --body-boxes), focal (pixels)\n"
        "or fov (degrees): the photo's camera (default: its EXIF, else the model's).\n"
        "Each job gets one entry on the results stream:\n"
        "id, entry, status (ok|error), result (RESULT.json of 'hamer run') or error,\n"
        "worker. See docs/server.md \"Scaling out\".\n",
    .epilog = "Exit status: 0 after SIGTERM/SIGINT (the batch in hand answered); 1 failure;\n"
              "2 bad usage.\n",
    .groups = (const hm_opt_group[]){{worker_opts, 0, NULL},
                                     {hm_opts_detector, W(det), "the detector (jobs without boxes)"},
                                     {hm_opts_detect, W(det), NULL},
                                     {hm_opts_model, W(m), "the model"},
                                     {hm_opts_threads, W(m), NULL},
                                     {NULL, 0, NULL}},
    .required = (const char *const[]){"--model", NULL},
};

/* Arguments -> a; 0, 1 (help printed) or 2 (usage error reported). */
static int parse(int argc, char **argv, worker_args *a) {
    memset(a, 0, sizeof *a);
    hm_model_args_defaults(&a->m);
    a->q.stream = "hamer:jobs", a->q.group = "hamer", a->q.results = "hamer:results";
    a->q.batch = 4, a->q.claim_idle_ms = 60000, a->q.max_deliveries = 5, a->q.result_ttl_s = 604800;
    a->payload_mb = 20, a->redis_timeout_s = 10, a->metrics_port = -1, a->metrics_host = "127.0.0.1";
    hm_tool_detect_defaults(&a->det);
    int rc = hm_args_parse(&worker_cmd, argc, argv, a);
    if (rc) return rc < 0 ? 1 : rc;
    const char *url = a->url_given, *dead = a->dead_given;
    if (!(a->url = hm_wk_url_arg(url))) return hm_tool_fail(2, "worker: --redis URL (or $HAMER_REDIS_URL) is required%s", "");
    const char *names[4] = {a->q.stream, a->q.group, a->q.results, dead ? dead : "x"};
    for (int k = 0; k < 4; k++)
        if (!names[k][0] || strlen(names[k]) > 400) return hm_tool_fail(2, "worker: stream and group names must be 1..400 bytes%s", "");
    snprintf(a->q.dead, sizeof a->q.dead, "%s", dead ? dead : "");
    if (!dead) snprintf(a->q.dead, sizeof a->q.dead, "%s:dead", a->q.stream);
    snprintf(a->q.errors, sizeof a->q.errors, "%s:errors", a->q.stream);
    if (!strcmp(a->q.stream, a->q.results) || !strcmp(a->q.stream, a->q.dead) || !strcmp(a->q.results, a->q.dead))
        return hm_tool_fail(2, "worker: --stream, --results and --dead-letters must be three different keys%s", "");
    if (!a->consumer[0]) {
        char host[64] = "host";
        gethostname(host, sizeof host - 1);
        host[sizeof host - 1] = 0;
        for (char *p = host; *p; p++)
            if ((unsigned char)*p <= 0x20 || (unsigned char)*p >= 0x7f) *p = '_';
        snprintf(a->consumer, sizeof a->consumer, "%s-%ld", host, (long)getpid());
    }
    a->q.consumer = a->consumer;
    a->q.payload_max = (size_t)(a->payload_mb * 1048576.0);
    return 0;
}

/* Sleep s seconds, in slices, returning early on a signal unless stopping
 * is already under way (then the caller is draining and must wait). */
static void nap(double s, int even_if_stopping) {
    double until = hm_now() + s;
    while (hm_now() < until && (even_if_stopping || !g_stop)) {
        struct timespec ts = {0, 20 * 1000 * 1000};
        nanosleep(&ts, NULL);
    }
}

/* React to a failed Redis step: 0 to try again (after a pause), or the
 * failure to give up with (FATAL; or any while stopping, past the grace). */
static int settle(worker *w, int rc) {
    if (rc == HM_WK_FATAL) return rc;
    if (g_stop && !w->give_up_at) w->give_up_at = hm_now() + 30;
    if (g_stop && hm_now() > w->give_up_at) return rc;
    if (rc == HM_WK_NOGROUP) w->prepared = 0;
    if (rc == HM_WK_CONN) {
        if (w->prepared || w->attempts == 0) hm_wk_log("%s; reconnecting", w->r.err);
        w->prepared = 0;
        atomic_store(&w->m.connected, 0);
    }
    if (rc == HM_WK_BUSY) hm_wk_log("%s; retrying", w->r.err);
    /* 0.1 s, doubling, at most 5 s: quick after a blip, gentle on an outage. */
    double d = 0.1 * (double)(1 << (w->attempts < 6 ? w->attempts : 6));
    w->attempts++;
    nap(d < 5 ? d : 5, 1);
    return 0;
}

/* Connected with the group prepared: HM_WK_OK, or a failure (see settle). */
static int ensure(worker *w) {
    if (w->prepared && w->r.c) return HM_WK_OK;
    int rc = w->r.c ? HM_WK_OK : hm_wk_redis_connect(&w->r);
    if (!rc) rc = hm_wk_queue_prepare(&w->r, &w->a->q);
    if (rc) return rc;
    if (w->was_connected) {
        atomic_fetch_add(&w->m.reconnects, 1);
        hm_wk_log("connected again (after %d failed attempt(s))", w->attempts);
    }
    w->was_connected = 1;
    w->prepared = 1;
    w->attempts = 0;
    atomic_store(&w->m.connected, 1);
    /* What was delivered to this consumer and not acknowledged comes first. */
    snprintf(w->history, sizeof w->history, "0");
    return HM_WK_OK;
}

/* Answer one job (written, or found answered) with retries over Redis
 * trouble; 0, or the failure given up with. */
static int answer(worker *w, const hm_wk_job *job, int kind, const char *text, int dead) {
    for (;;) {
        int written = 0, rc = ensure(w);
        double t0 = hm_now();
        if (!rc) rc = hm_wk_queue_commit(&w->r, &w->a->q, job, kind, text, dead, &written);
        if (!rc) {
            w->attempts = 0;
            hm_wk_observe(&w->m, HM_WK_ST_COMMIT, hm_now() - t0);
            hm_wk_observe(&w->m, HM_WK_ST_JOB, hm_now() - job->t_read);
            if (!written) atomic_fetch_add(&w->m.duplicates, 1);
            else if (kind == HM_WK_RESULT_OK) atomic_fetch_add(&w->m.results_ok, 1);
            else atomic_fetch_add(&w->m.results_error, 1);
            if (written && dead) atomic_fetch_add(&w->m.dead_letters, 1);
            return 0;
        }
        if ((rc = settle(w, rc))) return rc;
    }
}

/* A Redis step on one job, retried like answer(): ack, note, last error. */
enum { STEP_ACK, STEP_NOTE, STEP_LAST };
/* One of those steps (what), retried over Redis trouble like answer(); 0 or the failure. */
static int step(worker *w, int what, const hm_wk_job *job, const char *msg, char *out, size_t n) {
    for (;;) {
        int rc = ensure(w);
        if (!rc) {
            if (what == STEP_ACK) rc = hm_wk_queue_ack(&w->r, &w->a->q, job->entry);
            else if (what == STEP_NOTE) rc = hm_wk_queue_note_error(&w->r, &w->a->q, job, msg);
            else rc = hm_wk_queue_last_error(&w->r, &w->a->q, job, out, n);
        }
        if (!rc) return 0;
        if ((rc = settle(w, rc))) return rc;
    }
}

/* Record the per-stage times of a computed job. */
static void observe_stages(worker *w, const hm_wk_outcome *o) {
    const double ms[5] = {o->tm.decode_ms, o->tm.detect_ms, o->tm.crop_ms, o->tm.regress_ms, o->tm.finalise_ms};
    for (int s = 0; s < 5; s++)
        if (s != 1 || ms[1] > 0) hm_wk_observe(&w->m, HM_WK_ST_DECODE + s, ms[s] * 1e-3);
}

/* Seconds since the entry was added, from its ID's millisecond time. */
static double queue_wait(const hm_wk_job *job) {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    double now_ms = (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec * 1e-6;
    return (now_ms - strtod(job->entry, NULL)) * 1e-3;
}

/* Answer every job of the batch; 0, or the failure given up with. */
static int work(worker *w, hm_wk_batch *b) {
    const hm_wk_queue *q = &w->a->q;
    int *done = calloc(b->n > 0 ? (size_t)b->n : 1, sizeof *done);
    if (!done) return HM_WK_FATAL;
    int rc;
    for (;;) {
        rc = ensure(w);
        if (!rc) rc = hm_wk_queue_done(&w->r, q, b, done);
        if (!rc || (rc = settle(w, rc))) break;
    }
    if (b->claimed && b->n) {
        atomic_fetch_add(&w->m.claims, (unsigned long long)b->n);
        hm_wk_log("claimed %d job(s) idle over %lld ms on other consumers", b->n, q->claim_idle_ms);
    }
    for (int i = 0; i < b->n && !rc; i++) {
        const hm_wk_job *job = &b->jobs[i];
        if (job->deleted) {
            hm_wk_log("entry %s was deleted from %s before being answered: acknowledged, no result", job->entry, q->stream);
            atomic_fetch_add(&w->m.deleted, 1);
            rc = step(w, STEP_ACK, job, NULL, NULL, 0);
        } else if (done[i]) {
            atomic_fetch_add(&w->m.duplicates, 1);
            rc = step(w, STEP_ACK, job, NULL, NULL, 0);
        } else if (job->deliveries > q->max_deliveries) {
            char last[512], msg[700];
            rc = step(w, STEP_LAST, job, NULL, last, sizeof last);
            snprintf(msg, sizeof msg, "dead letter after %lld deliveries (--max-deliveries %lld); last error: %s",
                     job->deliveries, q->max_deliveries, last);
            hm_wk_log("job %s (entry %s): %s", job->id, job->entry, msg);
            if (!rc) rc = answer(w, job, HM_WK_RESULT_ERROR, msg, 1);
        } else if (job->bad[0]) {
            hm_wk_log("job %s (entry %s): error: %s", job->id, job->entry, job->bad);
            rc = answer(w, job, HM_WK_RESULT_ERROR, job->bad, 0);
        } else {
            if (job->deliveries == 1 && !b->claimed) hm_wk_observe(&w->m, HM_WK_ST_QUEUE, queue_wait(job));
            hm_wk_outcome o;
            hm_wk_job_run(&w->e, job, &o);
            observe_stages(w, &o);
            atomic_fetch_add(&w->m.hands_ok, (unsigned long long)o.hands_ok);
            atomic_fetch_add(&w->m.hands_failed, (unsigned long long)o.hands_failed);
            if (o.kind == HM_WK_RESULT_RETRY) {
                /* Not the job's fault: leave it pending for another try. */
                hm_wk_log("job %s (entry %s): %s; left pending for another try", job->id, job->entry, o.error);
                atomic_fetch_add(&w->m.retries, 1);
                rc = step(w, STEP_NOTE, job, o.error, NULL, 0);
            } else {
                if (o.kind == HM_WK_RESULT_ERROR) hm_wk_log("job %s (entry %s): error: %s", job->id, job->entry, o.error);
                rc = answer(w, job, o.kind, o.kind == HM_WK_RESULT_OK ? o.result : o.error, 0);
            }
            hm_wk_outcome_free(&o);
        }
    }
    free(done);
    return rc;
}

/* The next batch: own pending first, then (every claim interval, or while
 * a claim sweep is under way) idle entries of others, else new ones. */
static int next_batch(worker *w, hm_wk_batch *b, char *cursor, size_t cursorlen, double *next_claim) {
    const hm_wk_queue *q = &w->a->q;
    double interval = (double)q->claim_idle_ms * 0.5e-3;
    interval = interval < 0.1 ? 0.1 : interval > 5 ? 5 : interval;
    if (w->history[0]) {
        int rc = hm_wk_queue_read(&w->r, q, w->history, sizeof w->history, 0, b);
        if (!rc && !b->n) w->history[0] = 0;
        return rc;
    }
    if (hm_now() >= *next_claim) {
        int rc = hm_wk_queue_claim(&w->r, q, cursor, cursorlen, b, &w->m);
        if (!rc && !strcmp(cursor, "0-0")) *next_claim = hm_now() + interval;
        if (rc || b->n) return rc;
        hm_wk_batch_free(b);
    }
    int block = (int)(interval * 1e3);
    return hm_wk_queue_read(&w->r, q, NULL, 0, block < 500 ? block : 500, b);
}

/* Load the model, its state and (unless --no-detect) the detector; 0 or 1. */
static int load(worker *w) {
    worker_args *a = w->a;
    hamer_model_info info;
    if (!(w->e.model = hm_tool_load_model(a->m.model, a->m.mano, a->m.precision, a->m.device)) ||
        !(w->e.state = hamer_state_new(w->e.model, 16, a->m.threads))) {
        hm_wk_log("%s", hamer_last_error());
        return 1;
    }
    hamer_model_get_info(w->e.model, &info);
    if (!info.has_mano) {
        hm_wk_log("%s has no MANO buffers (mano.*), so no mesh can be computed: %s", a->m.model, hm_tool_mano_advice);
        return 1;
    }
    w->e.dparams = a->det.params;
    if (!a->no_detect && (!(w->e.detector = hm_tool_load_detector(&a->det)) ||
                          !(w->e.dstate = hamer_detect_state_new(w->e.detector, a->m.threads)))) {
        hm_wk_log("%s (or start with --no-detect: jobs without boxes then get an error result)", hamer_last_error());
        return 1;
    }
    /* The photo job's buffers, once for every job this worker runs. */
    if (!(w->e.job = hamer_job_new(w->e.state, w->e.dstate, NULL))) {
        hm_wk_log("%s", hamer_last_error());
        return 1;
    }
    return 0;
}

/* Start the metrics endpoint when asked; 0 or 1. */
static int metrics_start(worker *w, void **srv) {
    if (w->a->metrics_port < 0) return 0;
    char err[300];
    int port = 0;
    if (!(*srv = hm_wk_metrics_serve(&w->m, w->a->consumer, w->a->metrics_host, w->a->metrics_port, &port, err,
                                     sizeof err))) {
        hm_wk_log("%s", err);
        return 1;
    }
    int v6 = strchr(w->a->metrics_host, ':') != NULL;
    hm_wk_log("metrics on http://%s%s%s:%d/metrics", v6 ? "[" : "", w->a->metrics_host, v6 ? "]" : "", port);
    return 0;
}

/* Read and answer batches until a signal; the exit status. */
static int serve(worker *w) {
    char cursor[HM_WK_ENTRY_MAX] = "0-0", show[700];
    double next_claim = 0;
    int rc = HM_WK_OK, said_ready = 0;
    hm_wk_url_show(&w->r.url, show, sizeof show);
    while (!g_stop) {
        hm_wk_batch b;
        memset(&b, 0, sizeof b);
        rc = ensure(w);
        if (!rc && !said_ready) {
            said_ready = 1;
            hm_wk_log("ready: consumer %s on %s, stream %s, group %s, results %s (batch %d, claim idle %lld ms, "
                      "max deliveries %lld, detector %s)", w->a->consumer, show, w->a->q.stream, w->a->q.group,
                      w->a->q.results, w->a->q.batch, w->a->q.claim_idle_ms, w->a->q.max_deliveries,
                      w->e.detector ? hamer_detector_get_dir(w->e.detector) : "off");
        }
        if (!rc) rc = next_batch(w, &b, cursor, sizeof cursor, &next_claim);
        if (!rc && b.n) {
            atomic_store(&w->m.busy, 1);
            rc = work(w, &b);
            atomic_store(&w->m.busy, 0);
        }
        hm_wk_batch_free(&b);
        if (rc && (rc = settle(w, rc))) break;
    }
    if (rc) hm_wk_log("giving up: %s%s", w->r.err,
                      g_stop ? " (the unanswered jobs stay pending: other workers will claim them)" : "");
    return rc ? 1 : 0;
}

/* `hamer worker ARGS`: runs until SIGTERM/SIGINT; the exit status. */
int hm_worker_main(int argc, char **argv) {
    static worker_args a;
    static worker w;
    int rc = parse(argc, argv, &a);
    if (rc) return rc == 1 ? 0 : rc;
    memset(&w, 0, sizeof w);
    w.a = &a;
    w.r.timeout_s = a.redis_timeout_s;
    char err[600];
    if (hm_wk_url_parse(a.url, &w.r.url, err, sizeof err)) return hm_tool_fail(2, "worker: %s", err);

    /* Threads made from here on (the pools, libmicrohttpd's) inherit the
     * blocked mask: the signals reach the main thread only, where the
     * handler below stops the loop between steps. */
    sigset_t sigs;
    sigemptyset(&sigs);
    sigaddset(&sigs, SIGTERM);
    sigaddset(&sigs, SIGINT);
    pthread_sigmask(SIG_BLOCK, &sigs, NULL);
    signal(SIGPIPE, SIG_IGN);
    hm_wk_metrics_init(&w.m);
    void *msrv = NULL;
    int status = load(&w) || metrics_start(&w, &msrv);
    if (!status) {
        struct sigaction sa;
        memset(&sa, 0, sizeof sa);
        sa.sa_handler = on_signal;
        sigemptyset(&sa.sa_mask);
        sigaction(SIGTERM, &sa, NULL);
        sigaction(SIGINT, &sa, NULL);
        pthread_sigmask(SIG_UNBLOCK, &sigs, NULL);
        status = serve(&w);
        if (g_stop) hm_wk_log("%s: the batch in hand is answered", g_stop == SIGTERM ? "SIGTERM" : "SIGINT");
    }
    hm_wk_log("stopped: results ok %llu, error %llu; duplicates %llu; claims %llu; dead letters %llu; retries %llu; "
              "reconnects %llu", (unsigned long long)atomic_load(&w.m.results_ok),
              (unsigned long long)atomic_load(&w.m.results_error), (unsigned long long)atomic_load(&w.m.duplicates),
              (unsigned long long)atomic_load(&w.m.claims), (unsigned long long)atomic_load(&w.m.dead_letters),
              (unsigned long long)atomic_load(&w.m.retries), (unsigned long long)atomic_load(&w.m.reconnects));
    hm_wk_metrics_stop(msrv);
    hm_wk_redis_close(&w.r);
    hamer_job_free(w.e.job);
    hamer_detect_state_free(w.e.dstate);
    hamer_detector_free(w.e.detector);
    hamer_state_free(w.e.state);
    hamer_model_free(w.e.model);
    hm_wk_metrics_destroy(&w.m);
    return status;
}
