/* server_http.c - `hamer serve`: the libmicrohttpd side. Routing, request
 * bodies, input validation, answers, per-request logging and metrics.
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
 * body is never read, and so are a conflicting duplicate Content-Length
 * (request smuggling behind a proxy) and a body the upload budget cannot
 * take (503: --upload-budget-mb).
 *
 * The request context lives in the connection's record (server_conn.c) and
 * is started by the URI log callback, which libmicrohttpd calls as soon as
 * the request line is in: every request then reaches on_completed, also
 * those libmicrohttpd answers itself (431, 505, 400, 413), so /metrics
 * counts each request once by its final status.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <jansson.h>
#include <limits.h>
#include <math.h>
#include <netinet/in.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>
#include <unistd.h>
#include "format/image.h"
#include "pipeline/boxes.h"
#include "serve/server.h"
#include "core/cpu.h"
#include "core/util.h"

/* Per-request context (MHD's con_cls), one per connection record. */
typedef struct {
    hm_srv_conn *k;             /* the connection's record */
    int started;                /* the access handler saw the headers */
    int endpoint;
    int web_file;               /* HM_SRV_EP_WEB: which file of the page */
    char method[8], path[48];
    double t_begin, t_complete;
    int status;                 /* answered status; 0 not answered */
    const char *dropped;        /* why the connection was closed without an answer */
    /* body */
    uint8_t *body;
    size_t len, cap, seen;
    int discard;                /* read and drop the body, then answer reject_status */
    int reject_status;
    char reject_msg[300];
    size_t reserved;            /* bytes of the upload budget this body holds */
    size_t answer_reserved;     /* bytes of the response budget its answer holds */
    int hashing;
    hm_srv_sha256 sha;
    hm_srv_job *job;            /* set once handed to the workers */
} req_ctx;

size_t hm_srv_req_size(void) { return sizeof(req_ctx); }

/* Give back the upload budget a body held (it is complete, or gone). */
static void release_upload(hm_srv *s, req_ctx *r) {
    if (r->reserved) atomic_fetch_sub(&s->upload_bytes, r->reserved);
    r->reserved = 0;
}

/* Take n more bytes of the upload budget; -1 when it is exhausted. */
static int reserve_upload(hm_srv *s, req_ctx *r, size_t n) {
    size_t before = atomic_fetch_add(&s->upload_bytes, n);
    if (before + n > s->cfg.upload_budget) {
        atomic_fetch_sub(&s->upload_bytes, n);
        atomic_fetch_add(&s->metrics.budget_refused, 1);
        return -1;
    }
    r->reserved += n;
    return 0;
}

/* Take n more bytes of the response budget for this request's answer; -1
 * (nothing taken) when they do not fit beside the answers already held. */
static int reserve_answer(hm_srv *s, req_ctx *r, size_t n) {
    size_t before = atomic_fetch_add(&s->response_bytes, n);
    if (before + n > s->cfg.response_budget) {
        atomic_fetch_sub(&s->response_bytes, n);
        return -1;
    }
    r->answer_reserved += n;
    return 0;
}

/* Hold exactly len bytes for the answer being queued: the surplus of its
 * bound goes back. Small answers that nothing reserved for (errors, the GET
 * endpoints) are counted without being refused: refusing them would need
 * an answer too. */
static void hold_answer(hm_srv *s, req_ctx *r, size_t len) {
    if (len <= r->answer_reserved) atomic_fetch_sub(&s->response_bytes, r->answer_reserved - len);
    else atomic_fetch_add(&s->response_bytes, len - r->answer_reserved);
    r->answer_reserved = len;
}

/* The answer is sent or dropped (its buffer freed with the request). */
static void release_answer(hm_srv *s, req_ctx *r) {
    if (r->answer_reserved) atomic_fetch_sub(&s->response_bytes, r->answer_reserved);
    r->answer_reserved = 0;
}

/* Endpoint index of a URL path; HM_SRV_EP_OTHER if none. raw: the request
 * line's target, which ends at its '?' (a decoded path may hold one). */
static int route(const char *url, int raw) {
    static const char *paths[] = {"/healthz", "/readyz", "/info", "/metrics", "/openapi.json", "/v1/predict", "/v1/render"};
    size_t n = raw ? strcspn(url, "?") : strlen(url);
    for (int i = 0; i < HM_SRV_EP_WEB; i++)
        if (strlen(paths[i]) == n && !strncmp(url, paths[i], n)) return i;
    return hm_srv_web_route(url, n) >= 0 ? HM_SRV_EP_WEB : HM_SRV_EP_OTHER;
}

static int is_post_endpoint(int ep) { return ep == HM_SRV_EP_PREDICT || ep == HM_SRV_EP_RENDER; }

static void reject(req_ctx *r, int status, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
/* Remember a refusal to answer once the body is in (first one wins). */
static void reject(req_ctx *r, int status, const char *fmt, ...) {
    if (r->discard) return;
    r->discard = 1;
    r->reject_status = status;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(r->reject_msg, sizeof r->reject_msg, fmt, ap);
    va_end(ap);
    free(r->body);
    r->body = NULL;
    r->len = r->cap = 0;
}

/* Queue an answer. body is malloc'd and handed over (freed here on
 * failure), or static when is_static. */
static enum MHD_Result answer(hm_srv *s, struct MHD_Connection *c, req_ctx *r, int status, void *body, size_t len,
                              const char *type, int is_static) {
    struct MHD_Response *resp = MHD_create_response_from_buffer(
        len, body, is_static ? MHD_RESPMEM_PERSISTENT : MHD_RESPMEM_MUST_FREE);
    if (!resp) {
        if (!is_static) free(body);
        return MHD_NO;
    }
    MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE, type);
    MHD_add_response_header(resp, MHD_HTTP_HEADER_CACHE_CONTROL, "no-store");
    MHD_add_response_header(resp, "X-Content-Type-Options", "nosniff");
    if (r->endpoint == HM_SRV_EP_WEB) {
        MHD_add_response_header(resp, "Content-Security-Policy", hm_srv_web_csp);
        MHD_add_response_header(resp, "X-Frame-Options", "DENY");
        MHD_add_response_header(resp, "Referrer-Policy", "no-referrer");
    }
    if (status == 503) MHD_add_response_header(resp, MHD_HTTP_HEADER_RETRY_AFTER, "1");
    if (status == 405)
        MHD_add_response_header(resp, MHD_HTTP_HEADER_ALLOW, is_post_endpoint(r->endpoint) ? "POST" : "GET, HEAD");
    if (r->job && s->cache && is_post_endpoint(r->endpoint) && status == 200)
        MHD_add_response_header(resp, "X-Cache", r->job->from_cache ? "hit" : "miss");
    /* While draining, close keep-alive connections after this answer; an
     * answer before the body was read closes too (the body is not read). */
    if (atomic_load(&s->draining) || !r->t_complete)
        MHD_add_response_header(resp, MHD_HTTP_HEADER_CONNECTION, "close");
    hold_answer(s, r, is_static ? 0 : len);
    enum MHD_Result ok = MHD_queue_response(c, (unsigned)status, resp);
    MHD_destroy_response(resp);
    if (ok == MHD_YES) {
        r->status = status;
        /* Sending is bounded too: a client that stops reading is closed. */
        hm_srv_conn_deadline(r->k, HM_SRV_DL_SEND, s->cfg.timeout_s);
    }
    return ok;
}

/* Queue {"error": msg} with status. */
static enum MHD_Result answer_error(hm_srv *s, struct MHD_Connection *c, req_ctx *r, int status, const char *msg) {
    size_t len;
    char *body = hm_srv_error_json(msg, &len);
    if (!body) return MHD_NO;
    return answer(s, c, r, status, body, len, "application/json", 0);
}

/* Queue a JSON object (consumed) with status. */
static enum MHD_Result answer_json(hm_srv *s, struct MHD_Connection *c, req_ctx *r, int status, json_t *o) {
    char *text = o ? json_dumps(o, JSON_COMPACT | JSON_PRESERVE_ORDER) : NULL;
    json_decref(o);
    if (!text) return answer_error(s, c, r, 500, "out of memory");
    return answer(s, c, r, status, text, strlen(text), "application/json", 0);
}

/* ---- GET endpoints ---- */

/* The /readyz name of a startup phase. */
static const char *phase_name(int phase) {
    switch (phase) {
    case HM_SRV_LOADING: return "loading";
    case HM_SRV_WARMING: return "warming";
    case HM_SRV_READY: return "ready";
    default: return "failed";
    }
}

/* Whether requests without boxes can be served, and from which models
 * (caller holds s->mu: the warm-up publishes the detector under it). */
static json_t *detector_json(hm_srv *s) {
    if (s->detector)
        return json_pack("{s:b,s:s,s:b,s:b}", "loaded", 1, "dir", hamer_detector_get_dir(s->detector), "lite",
                         s->cfg.detector_lite, "body", hamer_detector_get_body(s->detector) == 1);
    return json_pack("{s:b,s:s}", "loaded", 0, "reason", s->detector_reason);
}

/* 200 once ready, else 503; both with the phase, reason and self-check figures. */
static enum MHD_Result get_readyz(hm_srv *s, struct MHD_Connection *c, req_ctx *r) {
    int phase = atomic_load(&s->phase);
    json_t *o = json_object();
    json_object_set_new(o, "ready", json_boolean(phase == HM_SRV_READY));
    json_object_set_new(o, "phase", json_string(phase_name(phase)));
    pthread_mutex_lock(&s->mu);
    json_object_set_new(o, "reason", json_string(s->reason));
    if (s->selfcheck_metric)
        json_object_set_new(o, "self_check",
                            json_pack("{s:s,s:f,s:f}", "metric", s->selfcheck_metric, "value", s->selfcheck_value,
                                      "gate", s->selfcheck_gate));
    json_object_set_new(o, "detector", detector_json(s));
    pthread_mutex_unlock(&s->mu);
    return answer_json(s, c, r, phase == HM_SRV_READY ? 200 : 503, o);
}

/* CPU features the kernels can use (what this machine has, not what runs). */
static json_t *cpu_features(void) {
    json_t *a = json_array();
    char names[128];
    snprintf(names, sizeof names, "%s", hm_cpu_feature_names());
    for (char *save = NULL, *t = strtok_r(names, " ", &save); t; t = strtok_r(NULL, " ", &save))
        json_array_append_new(a, json_string(t));
    return a;
}

/* The /info document (malloc'd), or NULL before the model is loaded. */
char *hm_srv_info_json(hm_srv *s, size_t *len) {
    pthread_mutex_lock(&s->mu);
    hamer_model_info mi = s->info;
    double load_s = s->load_s;
    int loaded = s->model != NULL;
    json_t *detector = detector_json(s);
    pthread_mutex_unlock(&s->mu);
    if (!loaded) {
        json_decref(detector);
        return NULL;
    }
    json_t *model = json_pack("{s:s,s:i,s:i,s:i,s:i,s:i,s:i,s:i,s:i,s:i,s:i,s:b,s:f}", "path", s->cfg.model_path,
                              "vit_depth", mi.vit_depth, "vit_dim", mi.vit_dim, "vit_heads", mi.vit_heads, "vit_mlp",
                              mi.vit_mlp, "n_tokens", mi.n_tokens, "head_depth", mi.head_depth, "head_dim",
                              mi.head_dim, "head_heads", mi.head_heads, "head_dim_head", mi.head_dim_head, "head_mlp",
                              mi.head_mlp, "has_mano", mi.has_mano, "load_s", load_s);
#ifdef __SANITIZE_ADDRESS__
    const int sanitize = 1;
#else
    const int sanitize = 0;
#endif
#ifdef __OPTIMIZE__
    const int optimized = 1;
#else
    const int optimized = 0;
#endif
    json_t *build = json_pack("{s:s,s:b,s:b,s:s,s:s}", "compiler", "gcc " __VERSION__, "optimized", optimized,
                              "sanitizers", sanitize, "libmicrohttpd", MHD_get_version(), "jansson", JANSSON_VERSION);
    json_t *cpu = json_pack("{s:i,s:o,s:s}", "online", hm_cpu_online(), "features", cpu_features(), "kernel_isa", mi.isa);
    json_t *limits = json_pack("{s:i,s:i,s:f,s:I,s:I,s:I,s:f,s:f}", "max_connections", s->cfg.max_conns,
                               "max_connections_per_ip", s->cfg.max_conns_per_ip, "header_timeout_s",
                               s->cfg.header_timeout_s, "upload_budget_bytes", (json_int_t)s->cfg.upload_budget,
                               "response_budget_bytes", (json_int_t)s->cfg.response_budget,
                               "cache_bytes", (json_int_t)s->cfg.cache_bytes, "drain_s", s->cfg.drain_s,
                               "pixels_per_byte", s->cfg.pixels_per_byte);
    json_t *o = json_pack("{s:s,s:o,s:s,s:s,s:s,s:i,s:i,s:i,s:I,s:f,s:i,s:o,s:o,s:o,s:o}", "version", hamer_version(),
                          "model", model, "precision", mi.precision == HAMER_PRECISION_FAST ? "fast" : "fp32",
                          "scheme", mi.scheme, "isa", mi.isa, "threads", s->cfg.threads, "workers", s->cfg.workers,
                          "queue", s->cfg.queue, "max_body_bytes", (json_int_t)s->cfg.max_body, "timeout_s",
                          s->cfg.timeout_s, "cache", s->cfg.cache_n, "limits", limits, "detector", detector,
                          "build", build, "cpu", cpu);
    char *text = o ? json_dumps(o, JSON_COMPACT | JSON_PRESERVE_ORDER) : NULL;
    json_decref(o);
    if (text) *len = strlen(text);
    return text;
}

/* Answer one of the GET endpoints (routing already checked the method). */
static enum MHD_Result get_endpoint(hm_srv *s, struct MHD_Connection *c, req_ctx *r) {
    size_t len = 0;
    char *text;
    switch (r->endpoint) {
    case HM_SRV_EP_HEALTHZ:
        return answer_json(s, c, r, 200, json_pack("{s:s}", "status", "ok"));
    case HM_SRV_EP_READYZ:
        return get_readyz(s, c, r);
    case HM_SRV_EP_INFO:
        text = hm_srv_info_json(s, &len);
        if (!text) return answer_error(s, c, r, 503, "the model is not loaded yet");
        return answer(s, c, r, 200, text, len, "application/json", 0);
    case HM_SRV_EP_METRICS:
        text = hm_srv_metrics_text(s, &len);
        if (!text) return answer_error(s, c, r, 500, "out of memory");
        return answer(s, c, r, 200, text, len, "text/plain; version=0.0.4; charset=utf-8", 0);
    case HM_SRV_EP_WEB: {
        const void *data;
        const char *type;
        int status = hm_srv_web_get(s, r->web_file, &data, &len, &type);
        return answer(s, c, r, status, (void *)data, len, type, 1);
    }
    default: {
        const char *doc = hm_srv_openapi_json();
        return answer(s, c, r, 200, (void *)doc, strlen(doc), "application/json", 1);
    }
    }
}

/* ---- POST /v1/predict and /v1/render: input ---- */

/* The media type of a Content-Type value: 0 none/other, 1 JPEG/PNG image,
 * 2 multipart/form-data. */
static int media_kind(const char *ct) {
    if (!ct) return 0;
    size_t n = strcspn(ct, "; \t");
    if ((n == 10 && !strncasecmp(ct, "image/jpeg", n)) || (n == 9 && !strncasecmp(ct, "image/png", n))) return 1;
    if (n == 19 && !strncasecmp(ct, "multipart/form-data", n)) return 2;
    return 0;
}

typedef struct {
    hm_srv_query_args *args;
    const char *taken[2 * HM_SRV_QUERY_NKEYS];  /* key, value of each taken parameter */
    int ntaken;
    const char *nul;            /* first parameter with a NUL byte (%00) in it */
} query_scan;

/* MHD_get_connection_values_n iterator: hands every query parameter, in
 * the order given, to the query parser. libmicrohttpd decodes %00 into a
 * NUL that would silently cut the C string: such a parameter is refused. */
static enum MHD_Result scan_arg(void *cls, enum MHD_ValueKind kind, const char *key, size_t key_size,
                                const char *value, size_t value_size) {
    (void)kind;
    query_scan *q = cls;
    if ((strlen(key) != key_size || (value && strlen(value) != value_size)) && !q->nul) q->nul = key;
    /* timeout_s changes when the answer comes, not what it is: not part of the cache key */
    if (hm_srv_query_add(q->args, key, value) == 0 && q->ntaken < HM_SRV_QUERY_NKEYS &&
        strcmp(key, "timeout_s")) {
        q->taken[2 * q->ntaken] = key;
        q->taken[2 * q->ntaken + 1] = value;
        q->ntaken++;
    }
    return MHD_YES;
}

typedef struct {
    const char *first;
    int n, conflict;
} length_scan;

/* Every Content-Length header: two that differ make the body's end
 * ambiguous (a proxy may pick the other one: request smuggling). */
static enum MHD_Result scan_length(void *cls, enum MHD_ValueKind kind, const char *key, const char *value) {
    (void)kind;
    length_scan *l = cls;
    if (strcasecmp(key, MHD_HTTP_HEADER_CONTENT_LENGTH)) return MHD_YES;
    if (l->n++ == 0) l->first = value;
    else if (strcmp(l->first ? l->first : "", value ? value : "")) l->conflict = 1;
    return MHD_YES;
}

/* Build the job from the complete request: query, boxes, image. 0 ok, else
 * the HTTP status with msg. */
static int make_job(hm_srv *s, struct MHD_Connection *c, req_ctx *r, hm_srv_job *job, char *msg, size_t msglen) {
    job->kind = r->endpoint == HM_SRV_EP_PREDICT ? HM_SRV_JOB_PREDICT : HM_SRV_JOB_RENDER;
    /* The keys passed first_call; the values are looked up by name as they
     * always were (a key with a %00 inside passed that check by its C-string
     * prefix and is not found here, so it stays without effect). */
    hm_srv_query_args args;
    hm_srv_query_init(&args, r->endpoint);
    for (int k = 0; k < HM_SRV_QUERY_NKEYS; k++)
        args.value[k] = MHD_lookup_connection_value(c, MHD_GET_ARGUMENT_KIND, hm_srv_query_keys[k]);
    hm_srv_query query;
    const char *ct = MHD_lookup_connection_value(c, MHD_HEADER_KIND, MHD_HTTP_HEADER_CONTENT_TYPE);
    int image_body = media_kind(ct) == 1;
    /* An image without ?boxes= is parsed as a body that brings no boxes in
     * the query (nbox 0): its hands are detected. */
    int boxes_absent = args.value[0] == NULL;   /* hm_srv_query_keys[0]: "boxes" */
    int status = hm_srv_query_parse(&args, image_body && !boxes_absent, &query, msg, msglen);
    if (status) return status;
    job->pp = query.pp;
    job->timeout_s = query.timeout_s;
    job->format = query.format;
    job->with_vertices = query.with_vertices;
    job->side_view = query.side_view;
    job->body_mode = query.body;
    job->body_boxes = query.body_boxes;
    job->body = r->body;
    r->body = NULL;
    if (image_body) {
        job->nbox = query.nbox;
        job->detect = query.nbox == 0;      /* no ?boxes=: the detector finds them */
        memcpy(job->boxes, query.boxes, sizeof job->boxes);
        job->image = job->body;
        job->image_len = r->len;
    } else {
        hm_srv_part parts[HM_SRV_MAX_PARTS];
        int n = hm_srv_multipart_parse(ct, job->body, r->len, parts, HM_SRV_MAX_PARTS, msg, msglen);
        if (n < 0) return 400;
        const hm_srv_part *image = NULL, *hands = NULL;
        for (int i = 0; i < n; i++) {
            const hm_srv_part **slot = !strcmp(parts[i].name, "image")   ? &image
                                       : !strcmp(parts[i].name, "hands") ? &hands
                                                                         : NULL;
            if (!slot) {
                snprintf(msg, msglen, "multipart: unknown part '%.31s' (expected 'image' and 'hands')", parts[i].name);
                return 400;
            }
            if (*slot) {
                snprintf(msg, msglen, "multipart: part '%.31s' given twice", parts[i].name);
                return 400;
            }
            *slot = &parts[i];
        }
        if (!image) {
            snprintf(msg, msglen, "multipart: missing the 'image' part");
            return 400;
        }
        if (image->len == 0) {
            snprintf(msg, msglen, "multipart: the 'image' part is empty");
            return 400;
        }
        /* No 'hands' part: the detector finds them. */
        job->detect = !hands;
        if (hands && (args.value[7] || args.value[8])) {   /* hm_srv_query_keys[7], [8]: "body", "body_boxes" */
            snprintf(msg, msglen, "%s= chooses the detector's passes: it is for requests without hands",
                     args.value[7] ? "body" : "body_boxes");
            return 400;
        }
        job->nbox = hands ? hm_boxes_parse_json((const char *)hands->data, hands->len, job->boxes, HAMER_MAX_HANDS) : 0;
        if (job->nbox < 0) {
            snprintf(msg, msglen, "hands: %s", hm_errmsg());
            return 400;
        }
        job->image = image->data;
        job->image_len = image->len;
    }
    if (job->image_len == 0) {
        snprintf(msg, msglen, "image: the body is empty");
        return 400;
    }
    if (job->detect && !s->detector) {
        snprintf(msg, msglen, "no boxes given and no hand detector loaded (%.200s): give ?boxes=x1,y1,x2,y2[:left];... "
                 "or a 'hands' part, or start the server with the detector's models (scripts/get_detector.sh, "
                 "--detector DIR)", s->detector_reason);
        return 400;
    }
    /* A few KB of JPEG can claim 10000x10000: the pixels a body may decode
     * to are bounded by its size (the 100-megapixel limit stays). */
    int iw, ih;
    double allowed = fmax(HM_SRV_FREE_PIXELS, s->cfg.pixels_per_byte * (double)job->image_len);
    /* Dimensions not found: the decoder will say what is wrong, or decode
     * at most what the body may buy. */
    double px = fmin(allowed, (double)HM_IMAGE_MAX_PIXELS);
    if (hm_srv_image_dims(job->image, job->image_len, &iw, &ih) == 0) {
        px = (double)iw * ih;
        if (px > allowed) {
            snprintf(msg, msglen, "image of %dx%d pixels from a %zu-byte body: over the decode budget of %.0f pixels "
                     "(%g per body byte, at least %d; a real photo needs far fewer bytes per pixel)", iw, ih,
                     job->image_len, allowed, s->cfg.pixels_per_byte, HM_SRV_FREE_PIXELS);
            return 413;
        }
    }
    int nhands = job->detect ? hamer_detect_default_params().max_hands : job->nbox;
    job->answer_bound = hm_srv_answer_bound(job->kind == HM_SRV_JOB_RENDER, px, nhands, job->with_vertices, job->format);
    if (job->answer_bound > s->cfg.response_budget) {
        /* It could never be held: no point in a 503 that asks to retry. */
        snprintf(msg, msglen, "the answer (up to %zu bytes for a %.0f-pixel image) is larger than the whole response "
                 "budget of %zu bytes (--response-budget-mb)", job->answer_bound, px, s->cfg.response_budget);
        return 413;
    }
    return 0;
}

/* 503: the answers held for clients (mostly unread ones) fill the budget. */
static enum MHD_Result answer_busy(hm_srv *s, struct MHD_Connection *c, req_ctx *r) {
    atomic_fetch_add(&s->metrics.response_refused, 1);
    char m[240];
    snprintf(m, sizeof m, "busy: answers not yet read by their clients fill the response budget of %zu bytes "
             "(--response-budget-mb), retry later", s->cfg.response_budget);
    return answer_error(s, c, r, 503, m);
}

/* The request is complete: validate, serve from the cache, or queue. */
static enum MHD_Result post_endpoint(hm_srv *s, struct MHD_Connection *c, req_ctx *r) {
    hm_srv_job *job = calloc(1, sizeof *job);
    if (!job) return answer_error(s, c, r, 500, "out of memory");
    atomic_init(&job->refs, 1);     /* the connection's */
    job->conn = c;
    r->job = job;
    char msg[400];
    int status = make_job(s, c, r, job, msg, sizeof msg);
    if (status) return answer_error(s, c, r, status, msg);
    if (s->cache && r->hashing) {
        hm_srv_sha256_final(&r->sha, job->key);
        job->cacheable = 1;
        uint8_t *body;
        size_t len;
        const char *type;
        if (hm_srv_cache_get(s->cache, job->key, &body, &len, &type)) {
            atomic_fetch_add(&s->metrics.cache_hits, 1);
            if (reserve_answer(s, r, len)) {
                free(body);
                return answer_busy(s, c, r);
            }
            job->from_cache = 1;
            hm_srv_hist_observe(&s->metrics.request, hm_now() - r->t_complete);
            return answer(s, c, r, 200, body, len, type, 0);
        }
        atomic_fetch_add(&s->metrics.cache_misses, 1);
    }
    /* Only this thread submits, so a free slot seen now is still free when
     * the job is submitted; checking first avoids suspending for nothing. */
    if (hm_srv_work_waiting(s) >= s->cfg.queue)
        return answer_error(s, c, r, 503, "busy: the queue is full, retry later");
    /* Room for the answer before any work: what clients leave unread is
     * bounded, and a job that could not be held is not started. */
    if (reserve_answer(s, r, job->answer_bound)) return answer_busy(s, c, r);
    MHD_suspend_connection(c);
    /* Suspended: the reaper bounds it, and the watchdog watches for the client leaving. */
    hm_srv_conn_deadline(r->k, HM_SRV_DL_NONE, 0);
    hm_srv_conn_set_job(s, r->k, job);
    if (hm_srv_work_submit(s, job)) {
        /* Stopping: answer through the resume path, as a worker would. */
        job->state = HM_SRV_JOB_ANSWERED;
        job->status = 503;
        job->out = (uint8_t *)hm_srv_error_json("shutting down", &job->out_len);
        job->out_type = "application/json";
        MHD_resume_connection(c);
    }
    return MHD_YES;
}

/* ---- the access handler ---- */

/* Headers are in: route, and decide what to do with the body. */
static enum MHD_Result first_call(hm_srv *s, struct MHD_Connection *c, req_ctx *r, const char *method) {
    int ep = r->endpoint;
    int get = !strcmp(method, "GET") || !strcmp(method, "HEAD");
    if (atomic_load(&s->draining)) {
        reject(r, 503, "shutting down");
        return MHD_YES;
    }
    if (ep == HM_SRV_EP_OTHER) {
        reject(r, 404, "no such endpoint: %s (see /openapi.json)", r->path);
        return MHD_YES;
    }
    if (!is_post_endpoint(ep)) {
        if (!get) reject(r, 405, "%s takes GET", r->path);
        return MHD_YES;
    }
    if (strcmp(method, "POST")) {
        reject(r, 405, "%s takes POST", r->path);
        return MHD_YES;
    }
    length_scan ls = {0};
    MHD_get_connection_values(c, MHD_HEADER_KIND, scan_length, &ls);
    if (ls.conflict) return answer_error(s, c, r, 400, "conflicting Content-Length headers");
    /* A declared body over the limit is refused before any of it is read. */
    const char *cl = MHD_lookup_connection_value(c, MHD_HEADER_KIND, MHD_HTTP_HEADER_CONTENT_LENGTH);
    unsigned long long declared = 0;
    if (cl) {
        char *end;
        errno = 0;
        declared = strtoull(cl, &end, 10);
        if (errno || end == cl || *end) declared = ULLONG_MAX;
        if (declared > s->cfg.max_body) {
            char m[200];
            snprintf(m, sizeof m, "body of %s bytes is over the limit of %zu bytes (--max-body-mb)", cl,
                     s->cfg.max_body);
            return answer_error(s, c, r, 413, m);
        }
    }
    const char *ct = MHD_lookup_connection_value(c, MHD_HEADER_KIND, MHD_HTTP_HEADER_CONTENT_TYPE);
    if (!media_kind(ct)) {
        reject(r, 415, "Content-Type must be image/jpeg, image/png or multipart/form-data, got '%.60s'",
               ct ? ct : "(none)");
        return MHD_YES;
    }
    hm_srv_query_args args;
    hm_srv_query_init(&args, ep);
    query_scan q = {.args = &args};
    MHD_get_connection_values_n(c, MHD_GET_ARGUMENT_KIND, scan_arg, &q);
    if (q.nul) {
        reject(r, 400, "query parameter '%.40s' holds a NUL byte (%%00)", q.nul);
        return MHD_YES;
    }
    char m[400];
    if (hm_srv_query_check_keys(&args, m, sizeof m)) {
        reject(r, 400, "%s", m);
        return MHD_YES;
    }
    if (s->cache) {
        /* Every field length-prefixed and the parameters counted: no two
         * different requests hash the same bytes. The body comes last, so
         * it needs no prefix (it is all that follows). */
        hm_srv_sha256_init(&r->sha);
        hm_srv_sha256_field(&r->sha, r->path, strlen(r->path));
        hm_srv_sha256_field(&r->sha, ct, strlen(ct));
        uint64_t nt = (uint64_t)q.ntaken;
        hm_srv_sha256_field(&r->sha, &nt, sizeof nt);
        for (int i = 0; i < 2 * q.ntaken; i++) hm_srv_sha256_field(&r->sha, q.taken[i], strlen(q.taken[i]));
        r->hashing = 1;
    }
    int phase = atomic_load(&s->phase);
    if (phase != HM_SRV_READY) {
        pthread_mutex_lock(&s->mu);
        reject(r, 503, "not ready (%s): %s", phase_name(phase), s->reason);
        pthread_mutex_unlock(&s->mu);
        return MHD_YES;
    }
    /* Full now: refuse without keeping the body (it is still read, see the top). */
    if (hm_srv_work_waiting(s) >= s->cfg.queue) {
        reject(r, 503, "busy: the queue is full, retry later");
        return MHD_YES;
    }
    if (cl && declared > 0) {
        /* Budget first, then memory: beyond it the body is never read. */
        if (reserve_upload(s, r, declared)) {
            char m2[200];
            snprintf(m2, sizeof m2, "busy: uploads in progress fill the budget of %zu bytes (--upload-budget-mb), "
                     "retry later", s->cfg.upload_budget);
            return answer_error(s, c, r, 503, m2);
        }
        r->body = malloc(declared);
        if (!r->body) {
            release_upload(s, r);
            reject(r, 503, "out of memory for the body, retry later");
            return MHD_YES;
        }
        r->cap = declared;
    }
    return MHD_YES;
}

/* A chunk of body. MHD_NO closes the connection (no answer possible mid-body). */
static enum MHD_Result body_chunk(hm_srv *s, req_ctx *r, const char *data, size_t n) {
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
        if (reserve_upload(s, r, cap - r->cap)) {
            r->dropped = "upload budget exhausted (--upload-budget-mb; chunked upload cut off)";
            return MHD_NO;
        }
        uint8_t *p = realloc(r->body, cap);
        if (!p) {
            reject(r, 503, "out of memory for the body, retry later");
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
    req_ctx *r = *con_cls;
    (void)version;
    if (!r) return MHD_NO;      /* no connection record: cannot happen (table > limit) */
    if (!r->started) {
        r->started = 1;
        r->endpoint = route(url, 0);
        r->web_file = hm_srv_web_route(url, strlen(url));
        /* From the headers on, the body must be in within --timeout-s. */
        hm_srv_conn_deadline(r->k, HM_SRV_DL_BODY, s->cfg.timeout_s);
        snprintf(r->method, sizeof r->method, "%s", method);
        snprintf(r->path, sizeof r->path, "%s", url);
        /* The path is client text (already %-decoded): no control bytes in the log. */
        for (char *p = r->path; *p; p++)
            if ((unsigned char)*p < 0x20 || (unsigned char)*p >= 0x7f) *p = '?';
        for (char *p = r->method; *p; p++)
            if ((unsigned char)*p < 0x20 || (unsigned char)*p >= 0x7f) *p = '?';
        enum MHD_Result ok = first_call(s, c, r, method);
        /* A client waiting for "100 Continue" has sent no body yet: a refusal
         * can go out now without resetting anything. */
        const char *expect = MHD_lookup_connection_value(c, MHD_HEADER_KIND, MHD_HTTP_HEADER_EXPECT);
        if (ok == MHD_YES && r->discard && !r->status && expect && !strcasecmp(expect, "100-continue"))
            return answer_error(s, c, r, r->reject_status, r->reject_msg);
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
        if (is_post_endpoint(r->endpoint) && job->status != 503)
            hm_srv_hist_observe(&s->metrics.request, hm_now() - r->t_complete);
        if (!out) return answer_error(s, c, r, 500, "out of memory");
        /* Larger than its bound (which should not happen): only if it fits. */
        if (job->out_len > r->answer_reserved && reserve_answer(s, r, job->out_len - r->answer_reserved)) {
            free(out);
            return answer_busy(s, c, r);
        }
        return answer(s, c, r, job->status, out, job->out_len, job->out_type, 0);
    }
    r->t_complete = hm_now();
    release_upload(s, r);       /* received: the queue bound covers it from here */
    if (r->discard) return answer_error(s, c, r, r->reject_status, r->reject_msg);
    if (!is_post_endpoint(r->endpoint)) return get_endpoint(s, c, r);
    return post_endpoint(s, c, r);
}

/* The request is over (answered, or the connection died): log, count, free. */
static void on_completed(void *cls, struct MHD_Connection *c, void **con_cls, enum MHD_RequestTerminationCode toe) {
    hm_srv *s = cls;
    req_ctx *r = *con_cls;
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
    release_upload(s, r);
    release_answer(s, r);       /* libmicrohttpd frees the answer with the request */
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
    req_ctx *r = k->req;
    memset(r, 0, sizeof *r);
    r->k = k;
    r->t_begin = hm_now();
    r->endpoint = route(uri, 1);
    snprintf(r->method, sizeof r->method, "?");
    snprintf(r->path, sizeof r->path, "%.*s", (int)strcspn(uri, "?"), uri);
    for (char *p = r->path; *p; p++)
        if ((unsigned char)*p < 0x20 || (unsigned char)*p >= 0x7f) *p = '?';
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
