/* server_http.c - `hamer serve`: the libmicrohttpd side. Its callbacks,
 * routing, request bodies, per-request logging and metrics; the GET
 * endpoints are server_get.c's, the POST endpoints' input server_post.c's,
 * answers and budgets server_answer.c's (the request context they share:
 * server_req.h).
 *
 * Everything here runs on libmicrohttpd's single internal polling thread,
 * so it must never block: inference is handed to the workers (server_work.c)
 * with the connection suspended, and every refusal (413, 415, 503 queue
 * full, ...) is answered at once.
 *
 * The access handler is called (1) once the headers are in, (2) once per
 * chunk of body, (3) once the body is complete, and (4) again after a
 * suspended connection is resumed. Refusals found at (1) are answered at
 * (3) after the body has been read and dropped (answering early would make
 * libmicrohttpd close the socket with unread data, which resets the
 * connection and can destroy the answer before the client reads it); only a
 * declared Content-Length over the limit is answered at (1), so that such a
 * body is never read, and so are a body the upload budget cannot take (503:
 * --upload-budget-mb) and a head whose framing is not plain (400/501 and
 * the connection closed, server_framing.c: where its body ends is unclear,
 * so nothing after it may be read as another request).
 *
 * The request context lives in the connection's record (server_conn.c) and
 * is started by the URI log callback, which libmicrohttpd calls as soon as
 * the request line is in: every request then reaches on_completed, also
 * those libmicrohttpd answers itself (431, 505, 400, 413), so /metrics
 * counts each request once by its final status.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <math.h>
#include <netinet/in.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>
#include "serve/server_req.h"
#include "core/util.h"

size_t hm_srv_req_size(void) { return sizeof(hm_srv_req); }

/* Endpoint index of a URL path; HM_SRV_EP_OTHER if none. raw: the request
 * line's target, which ends at its '?' (a decoded path may hold one). */
static int route(const char *url, int raw) {
    static const char *paths[] = {"/healthz",    "/readyz",     "/info",      "/metrics",
                                  "/openapi.json", "/v1/predict", "/v1/render", "/v1/live"};
    size_t n = raw ? strcspn(url, "?") : strlen(url);
    for (int i = 0; i < HM_SRV_EP_WEB; i++)
        if (strlen(paths[i]) == n && !strncmp(url, paths[i], n)) return i;
    return hm_srv_web_route(url, n) >= 0 ? HM_SRV_EP_WEB : HM_SRV_EP_OTHER;
}

/* ---- the access handler ---- */

/* libmicrohttpd before 0.9.77 glues a folded line's text to the header's
 * name, moved out of the request buffer for that (fixed in 0.9.77, which
 * turns the fold into spaces). Set at start from the running library. */
static int folds_glued;

typedef struct {
    hm_srv_framing *fr;
} head_scan;

/* Whether a header's name and value still lie as libmicrohttpd parsed
 * them in the request buffer: "name", the colon turned into a NUL, then
 * only the spaces and tabs skipped before the value. A folded line's name
 * was moved elsewhere (folds_glued). */
static int in_place(const char *key, size_t key_size, const char *value) {
    const char *p = key + key_size;
    if (value <= p || (size_t)(value - p) > 4096 || *p) return 0;
    for (p++; p < value; p++)
        if (*p != ' ' && *p != '\t') return 0;
    return 1;
}

/* MHD_get_connection_values_n iterator: every header field to the
 * framing rules, in order, until one refuses. */
static enum MHD_Result scan_field(void *cls, enum MHD_ValueKind kind, const char *key, size_t key_size,
                                  const char *value, size_t value_size) {
    (void)kind;
    head_scan *h = cls;
    hm_srv_field f = {key ? key : "", value ? value : "", key ? key_size : 0, value ? value_size : 0, 0};
    if (folds_glued && key && value) f.folded = !in_place(key, key_size, value);
    hm_srv_framing_field(h->fr, &f);
    return h->fr->status ? MHD_NO : MHD_YES;
}

/* Headers are in: route, and decide what to do with the body. */
static enum MHD_Result first_call(hm_srv *s, struct MHD_Connection *c, hm_srv_req *r, const char *method) {
    int ep = r->endpoint;
    int get = !strcmp(method, "GET") || !strcmp(method, "HEAD");
    if (atomic_load(&s->draining)) {
        hm_srv_reject(r, 503, "shutting down");
        return MHD_YES;
    }
    if (ep == HM_SRV_EP_OTHER) {
        hm_srv_reject(r, 404, "no such endpoint: %s (see /openapi.json)", r->path);
        return MHD_YES;
    }
    if (ep == HM_SRV_EP_LIVE) {
        if (strcmp(method, "POST")) {
            hm_srv_reject(r, 405, "%s takes POST", r->path);
            return MHD_YES;
        }
        return hm_srv_live_first(s, c, r);
    }
    if (!hm_srv_is_post(ep)) {
        if (!get) hm_srv_reject(r, 405, "%s takes GET", r->path);
        return MHD_YES;
    }
    if (strcmp(method, "POST")) {
        hm_srv_reject(r, 405, "%s takes POST", r->path);
        return MHD_YES;
    }
    return hm_srv_post_first(s, c, r);
}

/* A chunk of body. MHD_NO closes the connection (no answer possible mid-body). */
static enum MHD_Result body_chunk(hm_srv *s, hm_srv_req *r, const char *data, size_t n) {
    r->seen += n;
    if (r->seen > s->cfg.max_body) {
        /* Chunked (else refused up front): stop reading at the limit. */
        r->dropped = "body over --max-body-mb (chunked upload cut off)";
        return MHD_NO;
    }
    if (hm_now() - r->t_begin > s->cfg.timeout_s) {
        r->dropped = "body upload slower than --timeout-s";
        return MHD_NO;
    }
    if (r->discard) return MHD_YES;
    if (r->len + n > r->cap) {
        size_t cap = r->cap ? r->cap * 2 : 65536;
        while (cap < r->len + n) cap *= 2;
        if (cap > s->cfg.max_body) cap = s->cfg.max_body;
        /* Chunked: the budget grows with the buffer; no answer is possible
         * mid-body, so over it the connection is closed. */
        if (hm_srv_reserve_upload(s, r, cap - r->cap)) {
            r->dropped = "upload budget exhausted (--upload-budget-mb; chunked upload cut off)";
            return MHD_NO;
        }
        uint8_t *p = realloc(r->body, cap);
        if (!p) {
            hm_srv_reject(r, 503, "out of memory for the body, retry later");
            return MHD_YES;
        }
        r->body = p, r->cap = cap;
    }
    memcpy(r->body + r->len, data, n);
    r->len += n;
    if (r->hashing) hm_srv_sha256_update(&r->sha, data, n);
    return MHD_YES;
}

static enum MHD_Result on_request(void *cls, struct MHD_Connection *c, const char *url, const char *method,
                                  const char *version, const char *upload_data, size_t *upload_data_size,
                                  void **con_cls) {
    hm_srv *s = cls;
    hm_srv_req *r = *con_cls;
    if (!r) return MHD_NO;      /* no connection record: cannot happen (table > limit) */
    if (!r->started) {
        r->started = 1;
        /* A path cut short by %00 keeps the raw one (on_uri): it reaches no endpoint */
        if (!r->bad_target) {
            r->endpoint = route(url, 0);
            r->web_file = hm_srv_web_route(url, strlen(url));
            snprintf(r->path, sizeof r->path, "%s", url);
        }
        /* From the headers on, the body must be in within --timeout-s. */
        hm_srv_conn_deadline(r->k, HM_SRV_DL_BODY, s->cfg.timeout_s);
        snprintf(r->method, sizeof r->method, "%s", method);
        /* The path is client text (already %-decoded): no control bytes in the log. */
        for (char *p = r->path; *p; p++)
            if ((unsigned char)*p < 0x20 || (unsigned char)*p >= 0x7f) *p = '?';
        for (char *p = r->method; *p; p++)
            if ((unsigned char)*p < 0x20 || (unsigned char)*p >= 0x7f) *p = '?';
        /* Framing first, whatever the endpoint: with an unclear body end
         * nothing after the head can be trusted, so refuse now and close. */
        hm_srv_framing fr;
        hm_srv_framing_init(&fr);
        head_scan hs = {&fr};
        MHD_get_connection_values_n(c, MHD_HEADER_KIND, scan_field, &hs);
        if (hm_srv_framing_end(&fr, version && !strcmp(version, MHD_HTTP_VERSION_1_0)))
            return hm_srv_answer_error(s, c, r, fr.status, fr.msg);
        enum MHD_Result ok = first_call(s, c, r, method);
        /* A client waiting for "100 Continue" has sent no body yet: a refusal
         * can go out now without resetting anything. */
        const char *expect = MHD_lookup_connection_value(c, MHD_HEADER_KIND, MHD_HTTP_HEADER_EXPECT);
        if (ok == MHD_YES && r->discard && !r->status && expect && !strcasecmp(expect, "100-continue"))
            return hm_srv_answer_error(s, c, r, r->reject_status, r->reject_msg);
        return ok;
    }
    if (*upload_data_size) {
        size_t n = *upload_data_size;
        *upload_data_size = 0;
        return body_chunk(s, r, upload_data, n);
    }
    if (r->job) {
        /* Resumed: a worker, the reaper or shutdown wrote the answer. */
        hm_srv_job *job = r->job;
        hm_srv_conn_set_job(s, r->k, NULL);
        uint8_t *out = job->out;
        job->out = NULL;
        if (hm_srv_is_post(r->endpoint) && job->status != 503)
            hm_srv_hist_observe(&s->metrics.request, hm_now() - r->t_complete);
        if (!out) return hm_srv_answer_error(s, c, r, 500, "out of memory");
        /* Larger than its bound (which should not happen): only if it fits. */
        if (job->out_len > r->answer_reserved && hm_srv_reserve_answer(s, r, job->out_len - r->answer_reserved)) {
            free(out);
            return hm_srv_answer_busy(s, c, r);
        }
        return hm_srv_answer(s, c, r, job->status, out, job->out_len, job->out_type, 0);
    }
    r->t_complete = hm_now();
    hm_srv_release_upload(s, r);       /* received: the queue bound covers it from here */
    if (r->discard) return hm_srv_answer_error(s, c, r, r->reject_status, r->reject_msg);
    if (r->endpoint == HM_SRV_EP_LIVE) return hm_srv_live_endpoint(s, c, r);
    if (!hm_srv_is_post(r->endpoint)) return hm_srv_get_endpoint(s, c, r);
    return hm_srv_post_endpoint(s, c, r);
}

/* The request is over (answered, or the connection died): log, count, free. */
static void on_completed(void *cls, struct MHD_Connection *c, void **con_cls, enum MHD_RequestTerminationCode toe) {
    hm_srv *s = cls;
    hm_srv_req *r = *con_cls;
    if (!r) return;
    *con_cls = NULL;
    double ms = 1e3 * (hm_now() - r->t_begin);
    if (!r->started || (!r->status && !r->job)) {
        /* libmicrohttpd answered it (bad request line or headers, headers
         * over its memory, an HTTP version it refuses) or began to. */
        const union MHD_ConnectionInfo *ci = MHD_get_connection_info(c, MHD_CONNECTION_INFO_HTTP_STATUS);
        if (ci && ci->http_status >= 100 && ci->http_status < 600 && !r->status) r->status = (int)ci->http_status;
    }
    hm_srv_mhd_status_take();   /* any such error was this request's, counted here */
    /* Its client left while it waited (the watchdog answered it 499): the
     * connection may be torn down before that answer is queued. */
    if (!r->status && r->job && r->job->status == 499) r->status = 499;
    hm_srv_conn *k = r->k;
    int fired = k ? atomic_load(&k->closed_by) : 0;
    if (fired && !r->dropped)
        r->dropped = fired == HM_SRV_DL_HEADER ? "request line and headers not in within --header-timeout-s"
                     : fired == HM_SRV_DL_BODY ? "body upload slower than --timeout-s"
                     : fired == HM_SRV_DL_SEND ? "answer not read within --timeout-s"
                                               : "client closed the connection mid-upload";
    if (r->status) {
        hm_srv_metrics_request(&s->metrics, r->endpoint, r->status);
        /* An answer queued but not sent in full (499: there was none to read). */
        int unsent = toe != MHD_REQUEST_TERMINATED_COMPLETED_OK && r->status != 499;
        /* Not read in time: the send deadline, or libmicrohttpd's idle timeout
         * when it comes first (both are --timeout-s). */
        int late = fired == HM_SRV_DL_SEND || toe == MHD_REQUEST_TERMINATED_TIMEOUT_REACHED;
        if (unsent)
            atomic_fetch_add(late ? &s->metrics.answers_dropped_timeout : &s->metrics.answers_dropped_gone, 1);
        if (!s->cfg.quiet) {
            if (!unsent)
                hm_srv_log("%s %s %d %.1f ms", r->method, r->path, r->status, ms);
            else
                hm_srv_log("%s %s %d %.1f ms (%s)", r->method, r->path, r->status, ms,
                           late ? "answer not read within --timeout-s: dropped, connection closed"
                                : "client went away before the answer was sent");
        }
    } else {
        atomic_fetch_add(&s->metrics.closed, 1);
        if (!s->cfg.quiet) {
            const char *why = r->dropped;
            if (!why)
                why = toe == MHD_REQUEST_TERMINATED_TIMEOUT_REACHED ? "connection idle longer than --timeout-s"
                      : toe == MHD_REQUEST_TERMINATED_DAEMON_SHUTDOWN ? "server shutting down"
                                                                      : "client went away";
            hm_srv_log("%s %s - %.1f ms (closed: %s)", r->method, r->path, ms, why);
        }
    }
    if (k) {
        k->awaiting = 1;
        k->last_status = r->status;
        hm_srv_conn_set_job(s, k, NULL);
        atomic_store(&k->closed_by, 0);
        /* keep-alive: the next request's line and headers, from now */
        hm_srv_conn_deadline(k, HM_SRV_DL_HEADER, s->cfg.header_timeout_s);
    }
    hm_srv_release_upload(s, r);
    hm_srv_release_answer(s, r);       /* libmicrohttpd frees the answer with the request */
    hm_srv_job_unref(r->job);
    r->job = NULL;
    free(r->body);
    r->body = NULL;
    r->started = 0;
    atomic_fetch_sub(&s->inflight, 1);
}

/* The request line is in: start the request's context in the connection's
 * record, so that even a request libmicrohttpd refuses itself completes
 * through on_completed (and is counted). */
static void *on_uri(void *cls, const char *uri, struct MHD_Connection *c) {
    hm_srv *s = cls;
    const union MHD_ConnectionInfo *ci = MHD_get_connection_info(c, MHD_CONNECTION_INFO_SOCKET_CONTEXT);
    hm_srv_conn *k = ci ? ci->socket_context : NULL;
    if (!k) return NULL;
    k->awaiting = 0;
    hm_srv_req *r = k->req;
    memset(r, 0, sizeof *r);
    r->k = k;
    r->t_begin = hm_now();
    r->endpoint = route(uri, 1);
    snprintf(r->method, sizeof r->method, "?");
    snprintf(r->path, sizeof r->path, "%.*s", (int)strcspn(uri, "?"), uri);
    for (char *p = r->path; *p; p++)
        if ((unsigned char)*p < 0x20 || (unsigned char)*p >= 0x7f) *p = '?';
    /* Only here is the target seen before %-decoding (a %00 would cut it) */
    char m[120];
    if (hm_srv_target_check(uri, m, sizeof m)) {
        r->bad_target = 1;
        hm_srv_reject(r, 400, "%s", m);
    }
    atomic_fetch_add(&s->inflight, 1);
    return r;
}

/* libmicrohttpd's own messages, as one prefixed log line each. */
static void mhd_logger(void *cls, const char *fmt, va_list ap) {
    hm_srv *s = cls;
    char line[512];
    vsnprintf(line, sizeof line, fmt, ap);
    /* An error it answers itself before any request callback: remember the
     * status for the connection's close, which counts it. */
    const char *code = strstr(line, "HTTP response code is ");
    if (code) hm_srv_mhd_status_note(atoi(code + 22));
    /* --quiet: its per-connection lines (aborted, refused, timed out) go
     * too; startup failures are still said by this file's own lines. */
    if (s && s->cfg.quiet && s->daemon) return;
    size_t n = strlen(line);
    while (n && (line[n - 1] == '\n' || line[n - 1] == '\r')) line[--n] = 0;
    hm_srv_log("libmicrohttpd: %s", line);
}

/* Listen on cfg.host:cfg.port with one internal polling thread; -1 (logged) on failure. */
int hm_srv_http_start(hm_srv *s) {
    struct sockaddr_storage ss;
    memset(&ss, 0, sizeof ss);
    unsigned major = 0, minor = 0, patch = 0;
    sscanf(MHD_get_version(), "%u.%u.%u", &major, &minor, &patch);
    folds_glued = major == 0 && (minor < 9 || (minor == 9 && patch < 77));
    unsigned flags = MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_AUTO | MHD_ALLOW_SUSPEND_RESUME | MHD_USE_ERROR_LOG;
    struct sockaddr_in *v4 = (struct sockaddr_in *)&ss;
    struct sockaddr_in6 *v6 = (struct sockaddr_in6 *)&ss;
    if (inet_pton(AF_INET, s->cfg.host, &v4->sin_addr) == 1) {
        v4->sin_family = AF_INET;
        v4->sin_port = htons((uint16_t)s->cfg.port);
    } else if (inet_pton(AF_INET6, s->cfg.host, &v6->sin6_addr) == 1) {
        v6->sin6_family = AF_INET6;
        v6->sin6_port = htons((uint16_t)s->cfg.port);
        flags |= MHD_USE_IPv6;
    } else {
        hm_srv_log("--host must be a numeric IPv4 or IPv6 address, got '%s'", s->cfg.host);
        return -1;
    }
    /* Idle connections (no byte for this long) are closed; suspended ones
     * (waiting for a worker) are exempt and bounded by the reaper instead. */
    unsigned idle = (unsigned)ceil(s->cfg.timeout_s);
    s->daemon = MHD_start_daemon(flags, (uint16_t)s->cfg.port, NULL, NULL, on_request, s,
                                 MHD_OPTION_EXTERNAL_LOGGER, mhd_logger, s,   /* first: libmicrohttpd asks */
                                 MHD_OPTION_SOCK_ADDR, (struct sockaddr *)&ss,
                                 MHD_OPTION_NOTIFY_CONNECTION, hm_srv_conn_notify, s,
                                 MHD_OPTION_URI_LOG_CALLBACK, on_uri, s,
                                 MHD_OPTION_NOTIFY_COMPLETED, on_completed, s,
                                 MHD_OPTION_CONNECTION_TIMEOUT, idle < 1 ? 1u : idle,
                                 MHD_OPTION_CONNECTION_LIMIT, (unsigned)s->cfg.max_conns,
                                 MHD_OPTION_PER_IP_CONNECTION_LIMIT, (unsigned)s->cfg.max_conns_per_ip,
                                 MHD_OPTION_END);
    if (!s->daemon) {
        hm_srv_log("cannot listen on %s port %d: %s", s->cfg.host, s->cfg.port, strerror(errno));
        return -1;
    }
    const union MHD_DaemonInfo *info = MHD_get_daemon_info(s->daemon, MHD_DAEMON_INFO_BIND_PORT);
    s->port = info ? info->port : s->cfg.port;
    return 0;
}

/* Close the listening socket; connections already open carry on. */
void hm_srv_http_quiesce(hm_srv *s) {
    MHD_socket fd = MHD_quiesce_daemon(s->daemon);
    if (fd != MHD_INVALID_SOCKET) close(fd);
}

/* Stop the daemon (no connection may be suspended by now). */
void hm_srv_http_stop(hm_srv *s) {
    if (s->daemon) MHD_stop_daemon(s->daemon);
    s->daemon = NULL;
}
