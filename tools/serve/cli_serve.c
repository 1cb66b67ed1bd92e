/* cli_serve.c - `hamer serve`: HaMeR inference over HTTP (libmicrohttpd).
 *
 * This file holds the command line and the process lifecycle: listen at
 * once (so /healthz answers while the model loads), warm up on a helper
 * thread, wait for SIGTERM/SIGINT/SIGHUP, then drain and exit 0. The design of
 * the server is described in server.h; its parts are server_*.c.
 *
 * Exit status: 0 after a clean shutdown; 1 if the server could not start
 * (port taken, model unreadable, no MANO buffers, --detector DIR unloadable);
 * 2 bad usage.
 */
#include <errno.h>
#include <stddef.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>
#include "common/args.h"
#include "common/common.h"
#include "core/cpu.h"
#include "serve/server.h"

/* The options land in cfg, but for the sizes, given in MB and kept in
 * bytes, and the model group's fields (args.h), copied after the parse. */
typedef struct {
    hm_srv_config cfg;
    hm_model_args m;
    double body_mb, upload_mb, response_mb, cache_mb;
} serve_args;

#define S(field) (offsetof(serve_args, field))
#define C(field) (offsetof(serve_args, cfg.field))

static const hm_opt serve_opts[] = {
    {.name = "--host", .meta = "ADDR", .kind = HM_OPT_STR, .off = C(host),
     .help = "numeric IPv4/IPv6 address to listen on (default\n127.0.0.1)"},
    {.name = "--port", .meta = "P", .kind = HM_OPT_INT, .off = C(port), .lo = 0, .hi = 65535,
     .help = "TCP port (default 8080; 0: any free port, see the\nstartup line)"},
    {.name = "--workers", .meta = "K", .kind = HM_OPT_INT, .off = C(workers), .lo = 1, .hi = 256,
     .help = "inference workers, each with its own state (default 1)"},
    {.name = "--threads", .meta = "N", .kind = HM_OPT_INT, .off = S(m.threads), .lo = 1, .hi = 1024,
     .help = "threads per worker (default: online CPUs / K)"},
    {.name = "--queue", .meta = "Q", .kind = HM_OPT_INT, .off = C(queue), .lo = 1, .hi = 100000,
     .help = "requests waiting for a worker at most (default 64);\n"
             "when full, POSTs get 503 with Retry-After at once"},
    {.name = "--max-body-mb", .meta = "MB", .kind = HM_OPT_REAL, .off = S(body_mb), .lo = 0, .hi = 4096,
     .open_lo = 1,
     .help = "request body limit (default 20): a larger\n"
             "Content-Length gets 413 unread; a chunked body is cut\n"
             "off (connection closed) at the limit"},
    {.name = "--timeout-s", .meta = "T", .kind = HM_OPT_REAL, .off = C(timeout_s), .lo = 0, .hi = 86400,
     .open_lo = 1,
     .help = "per-request limit, default 30. It covers queue wait +\n"
             "inference: a request still queued at the deadline gets\n"
             "504 and never runs; a running one gets 504 at the\n"
             "deadline and its inference is stopped (between\n"
             "transformer blocks). A request's ?timeout_s= may\n"
             "shorten its own limit, never lengthen it. The body\n"
             "upload must also finish within T, and a connection\n"
             "idle for T is closed."},
    {.name = "--reference", .meta = "M", .kind = HM_OPT_STR, .off = C(reference_path),
     .help = "the model fast is self-checked against, loaded in fp32\n"
             "for that once (default: --model; needed when --model\n"
             "is a packed fast file)"},
    {.name = "--cache", .meta = "N", .kind = HM_OPT_INT, .off = C(cache_n), .lo = 0, .hi = 100000,
     .help = "serve repeats of an identical request (same body and\n"
             "query) from a cache of N answers (default 0: off),\n"
             "each kept --cache-ttl-s, holding at most --cache-mb MB\n"
             "(default 64) of answers in all"},
    {.name = "--cache-mb", .meta = "MB", .kind = HM_OPT_REAL, .off = S(cache_mb), .lo = 0, .hi = 1 << 20,
     .open_lo = 1, .help = "the cache's size bound (default 64)"},
    {.name = "--cache-ttl-s", .meta = "T", .kind = HM_OPT_REAL, .off = C(cache_ttl_s), .lo = 0, .hi = 86400,
     .open_lo = 1, .help = "how long a cached answer is kept (default 60)"},
    {.name = "--quiet", .kind = HM_OPT_FLAG, .off = C(quiet),
     .help = "no per-request log lines, libmicrohttpd's included\n(startup and shutdown lines stay)"},
    {0},
};

static const hm_opt serve_limits[] = {
    {.name = "--max-connections", .meta = "N", .kind = HM_OPT_INT, .off = C(max_conns), .lo = 1, .hi = 100000,
     .help = "open connections at most (default 256); more are\nrefused"},
    {.name = "--max-connections-per-ip", .meta = "N", .kind = HM_OPT_INT, .off = C(max_conns_per_ip), .lo = 1,
     .hi = 100000, .help = "per client address (default 32; raise it behind a\nproxy)"},
    {.name = "--header-timeout-s", .meta = "T", .kind = HM_OPT_REAL, .off = C(header_timeout_s), .lo = 0,
     .hi = 3600, .open_lo = 1,
     .help = "request line + headers within T of the connection's\n"
             "start or the previous answer (default 10; a fixed\n"
             "deadline: trickling bytes does not extend it); the\n"
             "body within --timeout-s of the headers"},
    {.name = "--upload-budget-mb", .meta = "MB", .kind = HM_OPT_REAL, .off = S(upload_mb), .lo = 0, .hi = 1 << 20,
     .open_lo = 1,
     .help = "bodies being received, all connections together\n"
             "(default 256): a declared body beyond it gets 503\nunread"},
    {.name = "--response-budget-mb", .meta = "MB", .kind = HM_OPT_REAL, .off = S(response_mb), .lo = 0,
     .hi = 1 << 20, .open_lo = 1,
     .help = "answers held, all connections together (default 512):\n"
             "a job reserves its answer's largest size (a render: ~3\n"
             "bytes a pixel) before it runs and holds its real size\n"
             "until sent; beyond it, 503 at once (413 for an answer\n"
             "larger than the whole budget). An answer not read\n"
             "within --timeout-s is dropped and its connection\n"
             "closed"},
    {.name = "--pixels-per-byte", .meta = "R", .kind = HM_OPT_REAL, .off = C(pixels_per_byte), .lo = 0, .hi = 1e9,
     .open_lo = 1,
     .help = "an image may decode to at most max(4 MP, R x its\n"
             "bytes) pixels (default 200): a tiny body cannot buy a\n"
             "huge decode (413)"},
    {.name = "--drain-s", .meta = "T", .kind = HM_OPT_REAL, .off = C(drain_s), .lo = 0, .hi = 86400, .open_lo = 1,
     .help = "shutdown: wait at most T (default 30) for requests in\n"
             "flight, then answer the rest 503 and cancel their\ninference"},
    {0},
};

static const hm_opt serve_page[] = {
    {.name = "--detector", .meta = "DIR", .kind = HM_OPT_STR, .off = C(detector_dir),
     .help = "the hand detector's models (default:\n"
             "$HAMER_DETECTOR_DIR, then ~/.local/share/hamer/\n"
             "detector); given, it must load"},
    {.name = "--lite", .kind = HM_OPT_FLAG, .off = C(detector_lite), .help = "the detector's lite models"},
    {.name = "--no-detector", .kind = HM_OPT_FLAG, .off = C(no_detector),
     .help = "no detector: requests without boxes get 400"},
    {.name = "--web", .meta = "DIR", .kind = HM_OPT_STR, .off = C(web_dir),
     .help = "the web page's files (default\n"
             "${XDG_DATA_HOME:-~/.local/share}/hamer/web, installed\n"
             "by scripts/get_web.sh); without them / answers 404"},
    {.name = "--live-sessions", .meta = "N", .kind = HM_OPT_INT, .off = C(live_sessions), .lo = 0, .hi = 64,
     .help = "live sessions at once (default 2; 0: /v1/live is off);\n"
             "each holds an inference state, a tracker and a few\n"
             "frames, and 3 threads"},
    {.name = "--live-idle-s", .meta = "T", .kind = HM_OPT_REAL, .off = C(live_idle_s), .lo = 0, .hi = 3600,
     .open_lo = 1, .help = "a live session without a request for T seconds ends\n(default 10)"},
    {0},
};

static const hm_command serve_cmd = {
    .cmd = "serve",
    .synopsis =
        "usage: hamer serve --model M [--host 127.0.0.1] [--port 8080] [--threads N]\n"
        "                   [--workers K] [--queue 64] [--max-body-mb 20]\n"
        "                   [--timeout-s 30] [--precision fp32|fast] [--device D]\n"
        "                   [--reference M] [--mano FILE.npz] [--cache N]\n"
        "                   [--cache-mb 64] [--cache-ttl-s 60] [--quiet]\n"
        "                   [--max-connections 256] [--max-connections-per-ip 32]\n"
        "                   [--header-timeout-s 10] [--upload-budget-mb 256]\n"
        "                   [--response-budget-mb 512] [--pixels-per-byte 200]\n"
        "                   [--drain-s 30] [--detector DIR] [--lite] [--no-detector]\n"
        "                   [--web DIR] [--live-sessions 2] [--live-idle-s 10]\n",
    .about =
        "Serves HaMeR over HTTP/1.1:\n"
        "  GET  /healthz       200 while the process lives\n"
        "  GET  /readyz        200 once loaded, warmed up and self-checked; else 503\n"
        "  GET  /info          model dimensions, precision, threads, workers, kernel ISA,\n"
        "                      device, backends, CPU, version\n"
        "  GET  /metrics       Prometheus text: requests, latencies, queue depth, hands\n"
        "  GET  /openapi.json  OpenAPI 3 description of the endpoints\n"
        "  GET  /              the web page: a photo, a video file or the webcam in; the\n"
        "                      overlay, boxes and a 3D view out\n"
        "  POST /v1/predict    RESULT.json of `hamer run` (?vertices=1); ?format=glb the\n"
        "                      hands as binary glTF, obj one OBJ, bvh, or all (every\n"
        "                      format from one job, multipart); body: an image with\n"
        "                      ?boxes=x1,y1,x2,y2[:left];..., or multipart/form-data\n"
        "                      with an 'image' part and a 'hands' part\n"
        "                      ([{\"bbox\":[..],\"is_right\":..}]); without boxes the\n"
        "                      built-in detector finds the hands (?min_score=,\n"
        "                      ?max_hands=)\n"
        "  POST /v1/render     same input; the overlay PNG (?side_view=1, ?draw=)\n"
        "  POST /v1/live       hands live: one frame a request (a new session, then\n"
        "                      ?session=T), answered at once with the session's newest\n"
        "                      tracked and regressed frames\n"
        "  Both POSTs take ?rescale=S and ?crop_mode=warp|pad as `hamer run` does;\n"
        "  /v1/predict also ?focal=PX or ?fov=DEG (default: the photo's EXIF).\n",
    .epilog =
        "Logs go to stderr, one line per request: method, path, status, milliseconds.\n"
        "SIGTERM, SIGINT or SIGHUP: stop accepting, finish the requests in flight (at\n"
        "most --drain-s), exit 0. A second signal while draining stops at once: the\n"
        "requests in flight get 503, their inference is cancelled, exit 0 within a few\n"
        "seconds. A warm-up still loading is waited for as long. Exit status: 0 after\n"
        "a clean shutdown; 1 the server could not start; 2 bad usage.\n",
    .groups = (const hm_opt_group[]){{serve_opts, 0, NULL},
                                     {hm_opts_model, S(m), "the model"},
                                     {serve_limits, 0, "limits"},
                                     {serve_page, 0, "detector, page, live"},
                                     {NULL, 0, NULL}},
    .required = (const char *const[]){"--model", NULL},
    .exclusive = (const char *const[]){"--no-detector", "--detector", "--no-detector", "--lite", NULL},
};

/* Fill cfg from argv; 0 ok, 1 help printed, 2 usage error (reported). */
static int parse_args(int argc, char **argv, hm_srv_config *out) {
    static serve_args a;
    memset(&a, 0, sizeof a);
    hm_model_args_defaults(&a.m);
    a.body_mb = 20, a.upload_mb = 256, a.response_mb = 512, a.cache_mb = 64;
    hm_srv_config *cfg = &a.cfg;
    cfg->max_conns = 256;
    cfg->max_conns_per_ip = 32;
    cfg->header_timeout_s = 10;
    cfg->drain_s = 30;
    cfg->live_sessions = 2;
    cfg->live_idle_s = 10;
    cfg->pixels_per_byte = 200;
    cfg->host = "127.0.0.1";
    cfg->port = 8080;
    cfg->workers = 1;
    cfg->queue = 64;
    cfg->timeout_s = 30;
    cfg->cache_ttl_s = 60;
    int rc = hm_args_parse(&serve_cmd, argc, argv, &a);
    if (rc) return rc < 0 ? 1 : rc;
    cfg->model_path = a.m.model;
    cfg->mano_path = a.m.mano;
    cfg->device = a.m.device;
    cfg->precision = a.m.precision;
    cfg->threads = a.m.threads;
    cfg->max_body = (size_t)(a.body_mb * 1048576.0);
    if (cfg->max_body < 1) cfg->max_body = 1;
    cfg->upload_budget = (size_t)(a.upload_mb * 1048576.0);
    cfg->response_budget = (size_t)(a.response_mb * 1048576.0);
    cfg->cache_bytes = (size_t)(a.cache_mb * 1048576.0);
    /* Each connection holds an fd: stay below the process's limit (the
     * listening socket, logs, the model file and pools need some too). */
    struct rlimit rl;
    if (!getrlimit(RLIMIT_NOFILE, &rl) && rl.rlim_cur != RLIM_INFINITY && (rlim_t)cfg->max_conns + 64 > rl.rlim_cur) {
        if ((rlim_t)cfg->max_conns + 64 <= rl.rlim_max) {
            rl.rlim_cur = (rlim_t)cfg->max_conns + 64;
            setrlimit(RLIMIT_NOFILE, &rl);
        } else {
            fprintf(stderr, "hamer: serve: --max-connections %d needs %d file descriptors; the limit is %llu\n",
                    cfg->max_conns, cfg->max_conns + 64, (unsigned long long)rl.rlim_max);
            return 2;
        }
    }
    if (!cfg->threads) {
        /* Split the CPUs between the workers: they run concurrently. */
        int n = hm_cpu_online();
        cfg->threads = n > cfg->workers ? n / cfg->workers : 1;
    }
    *out = *cfg;
    return 0;
}

/* Mutexes and condition variables; the reaper's waits use the monotonic
 * clock so wall-clock jumps cannot stretch or cut a timeout. */
static int server_init(hm_srv *s) {
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    int bad = pthread_mutex_init(&s->mu, NULL) | pthread_mutex_init(&s->qmu, NULL) |
              pthread_cond_init(&s->qcv, &ca) | pthread_cond_init(&s->rcv, &ca);
    pthread_condattr_destroy(&ca);
    atomic_init(&s->phase, HM_SRV_LOADING);
    atomic_init(&s->draining, 0);
    atomic_init(&s->fatal, 0);
    atomic_init(&s->inflight, 0);
    atomic_init(&s->upload_bytes, 0);
    atomic_init(&s->response_bytes, 0);
    hm_srv_metrics_init(&s->metrics);
    s->states = calloc((size_t)s->cfg.workers, sizeof *s->states);
    s->dstates = calloc((size_t)s->cfg.workers, sizeof *s->dstates);
    if (s->cfg.cache_n > 0 && !(s->cache = hm_srv_cache_new(s->cfg.cache_n, s->cfg.cache_bytes, s->cfg.cache_ttl_s)))
        bad = 1;
    if (hm_srv_conn_init(s, hm_srv_req_size())) bad = 1;
    return bad || !s->states || !s->dstates ? -1 : 0;
}

/* Free what server_init and the warm-up made (threads already joined). */
static void server_free(hm_srv *s) {
    for (int i = 0; s->states && i < s->cfg.workers; i++) hamer_state_free(s->states[i]);
    free(s->states);
    for (int i = 0; s->dstates && i < s->cfg.workers; i++) hamer_detect_state_free(s->dstates[i]);
    free(s->dstates);
    hamer_detector_free(s->detector);
    hm_srv_web_free(s);
    hm_srv_conn_free(s);
    hamer_model_free(s->model);
    hm_srv_cache_free(s->cache);
    hm_srv_metrics_destroy(&s->metrics);
    pthread_cond_destroy(&s->qcv);
    pthread_cond_destroy(&s->rcv);
    pthread_mutex_destroy(&s->qmu);
    pthread_mutex_destroy(&s->mu);
}

/* The stop signals are blocked in every thread this program starts and
 * taken with sigtimedwait; a thread a library started before main (with
 * its own mask) could still be handed one, whose default action would end
 * the process at once: the handler turns that delivery into this flag. */
static volatile sig_atomic_t foreign_sig;
static void on_foreign_signal(int sig) { foreign_sig = sig; }

/* The next of sigs within ns nanoseconds (either way it came), or 0. */
static int next_signal(const sigset_t *sigs, long ns) {
    struct timespec ts = {0, ns};
    int sig = sigtimedwait(sigs, NULL, &ts);
    if (sig > 0) return sig;
    sig = foreign_sig;
    foreign_sig = 0;
    return sig;
}

/* Wait until no request is in flight, the deadline passes (-1) or another
 * of sigs arrives (-2); 0 drained. */
static int wait_drained(hm_srv *s, double deadline, const sigset_t *sigs) {
    while (atomic_load(&s->inflight) > 0) {
        if (hm_now() >= deadline) return -1;
        struct timespec ts = {0, 20 * 1000 * 1000};
        if (sigs) {
            if (next_signal(sigs, ts.tv_nsec) > 0) return -2;
        } else {
            nanosleep(&ts, NULL);
        }
    }
    return 0;
}

/* Set by the warm-up thread as it ends (warm_main). */
static atomic_int warm_done;

static void *warm_main(void *arg) {
    hm_srv_warmup_main(arg);
    atomic_store(&warm_done, 1);
    return NULL;
}

/* Wait for the warm-up thread to end (1), or until the deadline passes or
 * another of sigs arrives (0: it may be blocked in the file system, on a
 * FIFO or a hung mount, where no flag reaches it). */
static int wait_warmup(double deadline, const sigset_t *sigs) {
    while (!atomic_load(&warm_done)) {
        if (hm_now() >= deadline) return 0;
        struct timespec ts = {0, 20 * 1000 * 1000};
        if (sigs) {
            if (next_signal(sigs, ts.tv_nsec) > 0) return 0;
        } else {
            nanosleep(&ts, NULL);
        }
    }
    return 1;
}

static const char *sig_name(int sig) { return sig == SIGTERM ? "SIGTERM" : sig == SIGINT ? "SIGINT" : "SIGHUP"; }

/* `hamer serve ARGS`: runs until SIGTERM/SIGINT; returns the exit status. */
int hm_serve_main(int argc, char **argv) {
    static hm_srv srv;      /* static: large, and zero-initialised */
    hm_srv *s = &srv;
    int rc = parse_args(argc, argv, &s->cfg);
    if (rc) return rc == 1 ? 0 : rc;

    /* SIGTERM/SIGINT are taken with sigtimedwait below; blocking them before
     * any thread starts makes every thread (libmicrohttpd's, the workers'
     * pools) inherit the mask, so the signal is never delivered elsewhere. */
    sigset_t sigs;
    sigemptyset(&sigs);
    sigaddset(&sigs, SIGTERM);
    sigaddset(&sigs, SIGINT);
    sigaddset(&sigs, SIGHUP);
    pthread_sigmask(SIG_BLOCK, &sigs, NULL);
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_foreign_signal;
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGHUP, &sa, NULL);
    signal(SIGPIPE, SIG_IGN);   /* a client closing early must not kill the server */

    if (server_init(s)) {
        hm_srv_log("out of memory");
        return 1;
    }
    hm_srv_web_load(s);
    if (hm_srv_live_start(s)) {
        hm_srv_log("cannot start the live sessions' table (out of memory)");
        server_free(s);
        return 1;
    }
    if (hm_srv_conn_watchdog_start(s) || hm_srv_http_start(s)) {
        hm_srv_live_stop(s);
        hm_srv_conn_watchdog_stop(s);
        server_free(s);
        return 1;
    }
    int v6 = strchr(s->cfg.host, ':') != NULL;
    hm_srv_log("listening on http://%s%s%s:%d (workers %d, threads %d per worker, queue %d, timeout %g s, "
               "max body %.1f MB, cache %d, connections %d (%d per address), upload budget %.1f MB, "
               "response budget %.1f MB)",
               v6 ? "[" : "", s->cfg.host, v6 ? "]" : "", s->port, s->cfg.workers, s->cfg.threads, s->cfg.queue,
               s->cfg.timeout_s, (double)s->cfg.max_body / 1048576.0, s->cfg.cache_n, s->cfg.max_conns,
               s->cfg.max_conns_per_ip, (double)s->cfg.upload_budget / 1048576.0,
               (double)s->cfg.response_budget / 1048576.0);

    pthread_t warm;
    int warm_started = pthread_create(&warm, NULL, warm_main, s) == 0;
    if (!warm_started) {
        hm_srv_log("cannot start the warm-up thread");
        atomic_store(&s->fatal, 1);
    }
    int sig = 0;
    while (!atomic_load(&s->fatal)) {
        sig = next_signal(&sigs, 200 * 1000 * 1000);
        if (sig > 0) break;
    }
    int fatal = atomic_load(&s->fatal);
    if (sig > 0) hm_srv_log("%s: draining %ld request(s) in flight (at most %g s; a second signal stops at once)",
                            sig_name(sig), atomic_load(&s->inflight), s->cfg.drain_s);

    /* Stop taking connections, then let every request begun finish: each is
     * bounded by its deadlines, the whole drain by --drain-s. */
    atomic_store(&s->draining, 1);
    hm_srv_http_quiesce(s);
    const double drain_end = hm_now() + s->cfg.drain_s;
    int d = wait_drained(s, drain_end, &sigs);
    if (d) {
        if (d == -2) hm_srv_log("second signal: answering %ld request(s) 503 now", atomic_load(&s->inflight));
        else hm_srv_log("drain grace expired: answering %ld request(s) 503", atomic_load(&s->inflight));
        hm_srv_work_flush(s, "shutting down");
        /* Cancelled inferences stop within a transformer block; connections
         * still uploading or idle are closed by MHD_stop_daemon below. */
        wait_drained(s, hm_now() + 3, NULL);
    }
    /* The warm-up stops at its next step once draining; a load blocked in
     * the file system never gets there: it is waited for like a request
     * (the drain's grace, a second signal), then left behind. */
    if (warm_started && !wait_warmup(d ? hm_now() + 1 : drain_end, d == -2 ? NULL : &sigs)) {
        pthread_mutex_lock(&s->mu);
        hm_srv_log("the warm-up has not finished (%s): exiting without waiting for it", s->reason);
        pthread_mutex_unlock(&s->mu);
        /* nothing is freed or stopped that the warm-up may still use (it
         * may be starting the workers): the process ends, sockets and all */
        _exit(0);
    }
    if (warm_started) pthread_join(warm, NULL);
    hm_srv_live_stop(s);     /* the sessions' engines use the model and the detector */
    hm_srv_work_stop(s);
    hm_srv_http_stop(s);
    hm_srv_conn_watchdog_stop(s);
    server_free(s);
    hm_srv_log("%s", fatal ? "stopped (startup failed)" : "stopped");
    return fatal ? 1 : 0;
}
