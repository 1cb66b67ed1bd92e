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
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>
#include "common/common.h"
#include "core/cpu.h"
#include "serve/server.h"

static const char *USAGE_SERVE =
    "usage: hamer serve --model M [--host 127.0.0.1] [--port 8080] [--threads N] [--workers K]\n"
    "                   [--queue 64] [--max-body-mb 20] [--timeout-s 30] [--precision fp32|fast] [--device D]\n"
    "                   [--mano FILE.npz] [--cache N] [--cache-mb 64] [--cache-ttl-s 60] [--quiet]\n"
    "                   [--max-connections 256] [--max-connections-per-ip 32] [--header-timeout-s 10]\n"
    "                   [--upload-budget-mb 256] [--response-budget-mb 512] [--pixels-per-byte 200]\n"
    "                   [--drain-s 30] [--detector DIR] [--lite] [--no-detector] [--web DIR]\n"
    "                   [--live-sessions 2] [--live-idle-s 10]\n"
    "\n"
    "Serves HaMeR over HTTP/1.1:\n"
    "  GET  /healthz        200 while the process lives\n"
    "  GET  /readyz         200 once loaded, warmed up and self-checked; else 503 and why\n"
    "  GET  /info           model dimensions, precision, threads, workers, kernel ISA, CPU, version\n"
    "  GET  /metrics        Prometheus text: requests, latencies, queue depth, hands, load time\n"
    "  GET  /openapi.json   OpenAPI 3 description of the endpoints\n"
    "  GET  /               the web page: a photo in, the overlay, boxes and a 3D view out\n"
    "  POST /v1/predict     RESULT.json of `hamer run` (?vertices=1), or with ?format=glb the\n"
    "                       hands as a binary glTF (`hamer run --glb`), with ?format=obj as one\n"
    "                       OBJ (`hamer run --obj-dir`'s meshes as objects); body: an image/jpeg or\n"
    "                       image/png with ?boxes=x1,y1,x2,y2[:left];..., or multipart/form-data\n"
    "                       with an 'image' part and a 'hands' part ([{\"bbox\":[..],\"is_right\":..}]);\n"
    "                       without boxes (or 'hands' part) the built-in detector finds the hands\n"
    "  POST /v1/render      same input; the overlay PNG (?side_view=1: the side view)\n"
    "  POST /v1/live        hands live: one frame a request (a new session, then ?session=T),\n"
    "                       answered at once with the session's newest tracked and regressed\n"
    "                       frames (the web page's webcam and video file)\n"
    "  Both POSTs take ?rescale=S and ?crop_mode=warp|pad as `hamer run` does; /v1/predict\n"
    "  also ?focal=PX or ?fov=DEG (the photo's camera; default its EXIF) and ?format=bvh.\n"
    "\n"
    "  --model M         HaMeR checkpoint (loaded once, shared read-only by the workers)\n"
    "  --host ADDR       numeric IPv4/IPv6 address to listen on (default 127.0.0.1)\n"
    "  --port P          TCP port (default 8080; 0: any free port, see the startup line)\n"
    "  --workers K       inference workers, each with its own state (default 1)\n"
    "  --threads N       threads per worker (default: online CPUs / K)\n"
    "  --queue Q         requests waiting for a worker at most (default 64); when full,\n"
    "                    POSTs get 503 with Retry-After at once\n"
    "  --max-body-mb MB  request body limit (default 20): a larger Content-Length gets 413\n"
    "                    unread; a chunked body is cut off (connection closed) at the limit\n"
    "  --timeout-s T     per-request limit, default 30. It covers queue wait + inference:\n"
    "                    a request still queued at the deadline gets 504 and never runs; a\n"
    "                    running one gets 504 at the deadline and its inference is stopped\n"
    "                    (between transformer blocks). A request's ?timeout_s= may shorten\n"
    "                    its own limit, never lengthen it.\n"
    "                    The body upload must also finish within T, and a connection idle\n"
    "                    for T is closed.\n"
    "  --device D        where the model runs: cpu (default) or a backend this build\n"
    "                    has, as NAME or NAME:INDEX ('hamer --version' lists them)\n"
    "  --precision P     fp32 (default) or fast; either is self-checked before /readyz is 200\n"
    "  --reference M     the model fast is self-checked against, loaded in fp32 for that\n"
    "                    once (default: --model; needed when --model is a packed fast file)\n"
    "  --mano FILE.npz   MANO buffers when the checkpoint has none\n"
    "  --cache N         serve repeats of an identical request (same body and query) from\n"
    "                    a cache of N answers (default 0: off), each kept --cache-ttl-s,\n"
    "                    holding at most --cache-mb MB (default 64) of answers in all\n"
    "  --max-connections N   open connections at most (default 256); more are refused\n"
    "  --max-connections-per-ip N  per client address (default 32; raise it behind a proxy)\n"
    "  --header-timeout-s T  request line + headers within T of the connection's start or\n"
    "                    the previous answer (default 10; a fixed deadline: trickling bytes\n"
    "                    does not extend it); the body within --timeout-s of the headers\n"
    "  --upload-budget-mb MB  bodies being received, all connections together (default 256):\n"
    "                    a declared body beyond it gets 503 unread\n"
    "  --response-budget-mb MB  answers held, all connections together (default 512): a\n"
    "                    job reserves its answer's largest size (a render: ~3 bytes a pixel)\n"
    "                    before it runs and holds its real size until sent; beyond it, 503\n"
    "                    at once (413 for an answer larger than the whole budget). An answer\n"
    "                    not read within --timeout-s is dropped and its connection closed\n"
    "  --pixels-per-byte R  an image may decode to at most max(4 MP, R x its bytes) pixels\n"
    "                    (default 200): a tiny body cannot buy a huge decode (413)\n"
    "  --drain-s T       shutdown: wait at most T (default 30) for requests in flight, then\n"
    "                    answer the rest 503 and cancel their inference\n"
    "  --detector DIR    the hand detector's models (default: $HAMER_DETECTOR_DIR, then\n"
    "                    ~/.local/share/hamer/detector); given, it must load\n"
    "  --lite            the detector's lite models\n"
    "  --no-detector     no detector: requests without boxes get 400\n"
    "  --web DIR         the web page's files (default ${XDG_DATA_HOME:-~/.local/share}/hamer/web,\n"
    "                    installed by scripts/get_web.sh); without them / answers 404\n"
    "  --live-sessions N live sessions at once (default 2; 0: /v1/live is off); each holds\n"
    "                    an inference state, a tracker and a few frames, and 3 threads\n"
    "  --live-idle-s T   a live session without a request for T seconds ends (default 10)\n"
    "  --quiet           no per-request log lines, libmicrohttpd's included (startup and\n"
    "                    shutdown lines stay)\n"
    "\n"
    "Logs go to stderr, one line per request: method, path, status, milliseconds.\n"
    "SIGTERM, SIGINT or SIGHUP: stop accepting, finish the requests in flight (at most\n"
    "--drain-s), exit 0. A second signal while draining stops at once: the requests in\n"
    "flight get 503, their inference is cancelled, exit 0 within a few seconds. A warm-up\n"
    "still loading is waited for as long (a load blocked on the file system is left).\n"
    "(SIGHUP stops too: logs go to stderr, so there is nothing to reopen.)\n";

/* Real option in (lo, hi]; -1 if malformed. */
static int parse_real(const char *v, double lo, double hi, double *out) {
    char *end;
    errno = 0;
    double x = strtod(v, &end);
    if (errno || end == v || *end || !(x > lo && x <= hi)) return -1;
    *out = x;
    return 0;
}

/* Fill cfg from argv; 0 ok, 1 help printed, 2 usage error (reported). */
static int parse_args(int argc, char **argv, hm_srv_config *cfg) {
    double mb = 20, budget_mb = 256, response_mb = 512, cache_mb = 64;
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
    cfg->precision = HAMER_PRECISION_FP32;
    for (int i = 0; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            fputs(USAGE_SERVE, stdout);
            return 1;
        }
        if (!strcmp(a, "--quiet")) {
            cfg->quiet = 1;
            continue;
        }
        if (!strcmp(a, "--lite")) {
            cfg->detector_lite = 1;
            continue;
        }
        if (!strcmp(a, "--no-detector")) {
            cfg->no_detector = 1;
            continue;
        }
        if (a[0] != '-' || a[1] != '-') return hm_tool_fail(2, "serve: unexpected argument '%s'", a);
        if (i + 1 >= argc) return hm_tool_fail(2, "serve: option '%s' needs a value (or is unknown)", a);
        const char *v = argv[++i];
        if (!strcmp(a, "--model")) cfg->model_path = v;
        else if (!strcmp(a, "--mano")) cfg->mano_path = v;
        else if (!strcmp(a, "--reference")) cfg->reference_path = v;
        else if (!strcmp(a, "--host")) cfg->host = v;
        else if (!strcmp(a, "--detector")) cfg->detector_dir = v;
        else if (!strcmp(a, "--web")) cfg->web_dir = v;
        else if (!strcmp(a, "--max-connections")) {
            if (hm_tool_parse_int(v, 1, 100000, &cfg->max_conns))
                return hm_tool_fail(2, "serve: --max-connections must be 1..100000, got '%s'", v);
        } else if (!strcmp(a, "--max-connections-per-ip")) {
            if (hm_tool_parse_int(v, 1, 100000, &cfg->max_conns_per_ip))
                return hm_tool_fail(2, "serve: --max-connections-per-ip must be 1..100000, got '%s'", v);
        } else if (!strcmp(a, "--header-timeout-s")) {
            if (parse_real(v, 0, 3600, &cfg->header_timeout_s))
                return hm_tool_fail(2, "serve: --header-timeout-s must be in (0, 3600], got '%s'", v);
        } else if (!strcmp(a, "--drain-s")) {
            if (parse_real(v, 0, 86400, &cfg->drain_s))
                return hm_tool_fail(2, "serve: --drain-s must be in (0, 86400], got '%s'", v);
        } else if (!strcmp(a, "--pixels-per-byte")) {
            if (parse_real(v, 0, 1e9, &cfg->pixels_per_byte))
                return hm_tool_fail(2, "serve: --pixels-per-byte must be in (0, 1e9], got '%s'", v);
        } else if (!strcmp(a, "--upload-budget-mb")) {
            if (parse_real(v, 0, 1 << 20, &budget_mb))
                return hm_tool_fail(2, "serve: --upload-budget-mb must be in (0, 1048576], got '%s'", v);
        } else if (!strcmp(a, "--response-budget-mb")) {
            if (parse_real(v, 0, 1 << 20, &response_mb))
                return hm_tool_fail(2, "serve: --response-budget-mb must be in (0, 1048576], got '%s'", v);
        } else if (!strcmp(a, "--cache-mb")) {
            if (parse_real(v, 0, 1 << 20, &cache_mb))
                return hm_tool_fail(2, "serve: --cache-mb must be in (0, 1048576], got '%s'", v);
        }
        else if (!strcmp(a, "--port")) {
            if (hm_tool_parse_int(v, 0, 65535, &cfg->port)) return hm_tool_fail(2, "serve: --port must be 0..65535, got '%s'", v);
        } else if (!strcmp(a, "--threads")) {
            if (hm_tool_parse_threads(v, &cfg->threads))
                return hm_tool_fail(2, "serve: --threads must be an integer in 1..1024, got '%s'", v);
        } else if (!strcmp(a, "--workers")) {
            if (hm_tool_parse_int(v, 1, 256, &cfg->workers)) return hm_tool_fail(2, "serve: --workers must be 1..256, got '%s'", v);
        } else if (!strcmp(a, "--queue")) {
            if (hm_tool_parse_int(v, 1, 100000, &cfg->queue)) return hm_tool_fail(2, "serve: --queue must be 1..100000, got '%s'", v);
        } else if (!strcmp(a, "--cache")) {
            if (hm_tool_parse_int(v, 0, 100000, &cfg->cache_n)) return hm_tool_fail(2, "serve: --cache must be 0..100000, got '%s'", v);
        } else if (!strcmp(a, "--max-body-mb")) {
            if (parse_real(v, 0, 4096, &mb)) return hm_tool_fail(2, "serve: --max-body-mb must be in (0, 4096], got '%s'", v);
        } else if (!strcmp(a, "--timeout-s")) {
            if (parse_real(v, 0, 86400, &cfg->timeout_s))
                return hm_tool_fail(2, "serve: --timeout-s must be in (0, 86400], got '%s'", v);
        } else if (!strcmp(a, "--cache-ttl-s")) {
            if (parse_real(v, 0, 86400, &cfg->cache_ttl_s))
                return hm_tool_fail(2, "serve: --cache-ttl-s must be in (0, 86400], got '%s'", v);
        } else if (!strcmp(a, "--live-sessions")) {
            if (hm_tool_parse_int(v, 0, 64, &cfg->live_sessions))
                return hm_tool_fail(2, "serve: --live-sessions must be 0..64, got '%s'", v);
        } else if (!strcmp(a, "--live-idle-s")) {
            if (parse_real(v, 0, 3600, &cfg->live_idle_s))
                return hm_tool_fail(2, "serve: --live-idle-s must be in (0, 3600], got '%s'", v);
        } else if (!strcmp(a, "--device")) {
            cfg->device = v;
        } else if (!strcmp(a, "--precision")) {
            if (!strcmp(v, "fp32")) cfg->precision = HAMER_PRECISION_FP32;
            else if (!strcmp(v, "fast")) cfg->precision = HAMER_PRECISION_FAST;
            else return hm_tool_fail(2, "serve: --precision must be fp32 or fast, got '%s'", v);
        } else {
            return hm_tool_fail(2, "serve: unknown option '%s' (see 'hamer serve --help')", a);
        }
    }
    if (!cfg->model_path) return hm_tool_fail(2, "serve: --model is required%s", "");
    cfg->max_body = (size_t)(mb * 1048576.0);
    if (cfg->max_body < 1) cfg->max_body = 1;
    cfg->upload_budget = (size_t)(budget_mb * 1048576.0);
    cfg->response_budget = (size_t)(response_mb * 1048576.0);
    cfg->cache_bytes = (size_t)(cache_mb * 1048576.0);
    if (cfg->no_detector && (cfg->detector_dir || cfg->detector_lite))
        return hm_tool_fail(2, "serve: --no-detector excludes --detector and --lite%s", "");
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

/* Wait until no request is in flight, the deadline passes (-1) or another
 * of sigs arrives (-2); 0 drained. */
static int wait_drained(hm_srv *s, double deadline, const sigset_t *sigs) {
    while (atomic_load(&s->inflight) > 0) {
        if (hm_now() >= deadline) return -1;
        struct timespec ts = {0, 20 * 1000 * 1000};
        if (sigs) {
            if (sigtimedwait(sigs, NULL, &ts) > 0) return -2;
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
            if (sigtimedwait(sigs, NULL, &ts) > 0) return 0;
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
        struct timespec tick = {0, 200 * 1000 * 1000};
        sig = sigtimedwait(&sigs, NULL, &tick);
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
