/* server_live.c - `hamer serve`: POST /v1/live, hands live from frames a
 * client sends (the web page's webcam or video file).
 *
 * A session is a hamer_live engine (the detector and tracker at the pace
 * frames come, the regressor on the newest tracked frame) on a frame
 * source fed by the POSTs: each POST's body (one JPEG or PNG frame) goes
 * into the session's one-frame slot, replacing a frame not yet taken (the
 * newest wins, the replaced one is counted), and the POST is answered at
 * once with the session's newest records: the last tracked frame's and,
 * when a newer one exists than the last one sent, the last regressed
 * frame's (with its vertices, for a 3D view). A client keeps one POST in
 * flight and sends its newest frame when the answer comes: the channel
 * holds at most one frame in flight and one waiting, whatever the rates.
 * Decoding happens on the session's capture thread, never on
 * libmicrohttpd's.
 *
 *   POST /v1/live                  a new session; the body is its first frame
 *        ?max_hands=N (1..8, 2), min_score=S, smooth=one-euro|none
 *   POST /v1/live?session=T        the next frame (an empty body: the records only)
 *   POST /v1/live?session=T&end=1  the session ends (its totals answered)
 *
 * Bounds: at most --live-sessions sessions (503 beyond), each with its own
 * inference state, tracker and a handful of frame buffers (allocated when
 * it starts and at its first frame); a session idle for --live-idle-s ends
 * (its token then answers 404). A frame's pixels are bounded as a POST
 * image's (--pixels-per-byte); a frame that does not decode is counted and
 * reported in the next answer, the session goes on. Sessions are ended and
 * freed by the janitor thread (started with the server), so a request never
 * waits for an inference to stop.
 */
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <limits.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>
#include <unistd.h>
#include "common/common.h"
#include "serve/server_req.h"


typedef struct hm_srv_live_session {
    int ending;                 /* the janitor frees it */
    char token[33];
    hm_srv *s;
    hamer_state *state;
    hamer_live *live;
    hamer_frame_source src;
    pthread_t thread;
    int thread_started, run_done;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    uint8_t *frame;             /* the newest frame's bytes, not yet taken (owned) */
    size_t frame_len;
    double frame_at;            /* hamer_clock() when it came */
    uint8_t *rgb;               /* the frame lent to the engine (hamer_free'd at the next read) */
    long long received, replaced, bad;
    int stop;
    double t0, last_active;
    char *tracked, *regressed;  /* the newest records' JSON (hamer_live_record_json) */
    long long regressed_seq, sent_seq;
    char error[300];            /* the last bad frame's message, sent once */
    char failed[300];           /* the engine stopped on this error */
    hamer_live_stats final;
} live_session;

struct hm_srv_live {
    pthread_mutex_t mu;         /* the table */
    pthread_cond_t cv;          /* the janitor's wake-up */
    live_session **v;           /* n slots, NULL: free; a session never moves (its threads point at it) */
    int n;
    pthread_t janitor;
    int janitor_started, stopping;
};

/* ---- the frame source the POSTs feed ---- */

static int live_read(void *ctx, hamer_source_frame *f) {
    live_session *L = ctx;
    memset(f, 0, sizeof *f);
    for (;;) {
        pthread_mutex_lock(&L->mu);
        while (!L->frame && !L->stop) pthread_cond_wait(&L->cv, &L->mu);
        if (L->stop) {
            pthread_mutex_unlock(&L->mu);
            return 0;
        }
        uint8_t *data = L->frame;
        size_t len = L->frame_len;
        double at = L->frame_at;
        long long index = L->received - 1, dropped = L->replaced;
        L->frame = NULL;
        pthread_mutex_unlock(&L->mu);
        hamer_free(L->rgb);
        L->rgb = NULL;
        int w, h;
        int rc = hamer_image_decode(data, len, &L->rgb, &w, &h);
        free(data);
        if (rc) { /* a bad frame: said in the next answer, the session goes on */
            pthread_mutex_lock(&L->mu);
            L->bad++;
            snprintf(L->error, sizeof L->error, "frame %lld: %s", index, hamer_last_error());
            pthread_mutex_unlock(&L->mu);
            continue;
        }
        *f = (hamer_source_frame){.rgb = L->rgb, .width = w, .height = h, .index = index, .time_s = at - L->t0,
                                  .capture_s = at, .dropped = dropped};
        return 1;
    }
}

static void live_stop_source(void *ctx) {
    live_session *L = ctx;
    pthread_mutex_lock(&L->mu);
    L->stop = 1;
    pthread_cond_broadcast(&L->cv);
    pthread_mutex_unlock(&L->mu);
}

/* The session's state asks this between transformer blocks: an ending
 * session does not finish its regression. */
static int live_cancelled(void *user) {
    live_session *L = user;
    pthread_mutex_lock(&L->mu);
    int stop = L->stop;
    pthread_mutex_unlock(&L->mu);
    return stop;
}

static int on_record(void *user, const hamer_live_record *r) {
    live_session *L = user;
    char *json = hamer_live_record_json(r, r->regressed);
    if (!json) return 0;
    pthread_mutex_lock(&L->mu);
    char **slot = r->regressed ? &L->regressed : &L->tracked;
    hamer_free(*slot);
    *slot = json;
    if (r->regressed) L->regressed_seq++;
    pthread_mutex_unlock(&L->mu);
    return 0;
}

static void *run_main(void *arg) {
    live_session *L = arg;
    int rc = hamer_live_run(L->live, &L->src, on_record, L);
    pthread_mutex_lock(&L->mu);
    if (rc) snprintf(L->failed, sizeof L->failed, "%s", hamer_last_error());
    hamer_live_get_stats(L->live, &L->final);
    L->run_done = 1;
    pthread_mutex_unlock(&L->mu);
    return NULL;
}

/* ---- sessions ---- */

static void session_free(live_session *L) {
    if (L->thread_started) {
        live_stop_source(L);
        hamer_live_stop(L->live);
        pthread_join(L->thread, NULL);
    }
    hamer_live_free(L->live);
    hamer_state_free(L->state);
    free(L->frame);
    hamer_free(L->rgb);
    hamer_free(L->tracked);
    hamer_free(L->regressed);
    pthread_mutex_destroy(&L->mu);
    pthread_cond_destroy(&L->cv);
    free(L);
}

/* The janitor: ends sessions idle for --live-idle-s and frees the ending
 * ones, off libmicrohttpd's thread. */
static void *janitor_main(void *arg) {
    hm_srv *s = arg;
    hm_srv_live *T = s->live;
    pthread_mutex_lock(&T->mu);
    while (!T->stopping) {
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        ts.tv_sec += 1;
        pthread_cond_timedwait(&T->cv, &T->mu, &ts);
        const double now = hamer_clock();
        for (int i = 0; i < T->n; i++) {
            live_session *L = T->v[i];
            if (!L) continue;
            if (!L->ending && now - L->last_active > s->cfg.live_idle_s) {
                L->ending = 1;
                if (!s->cfg.quiet) hm_srv_log("live session %.8s: idle for %g s, ended", L->token, s->cfg.live_idle_s);
            }
            if (L->ending) {
                /* off the table, then freed out of its lock: joining waits for the engine */
                T->v[i] = NULL;
                pthread_mutex_unlock(&T->mu);
                session_free(L);
                pthread_mutex_lock(&T->mu);
            }
        }
    }
    pthread_mutex_unlock(&T->mu);
    return NULL;
}

/* ---- the table ---- */

int hm_srv_live_start(hm_srv *s) {
    if (s->cfg.live_sessions < 1) return 0;
    hm_srv_live *T = calloc(1, sizeof *T);
    if (!T || !(T->v = calloc((size_t)s->cfg.live_sessions, sizeof *T->v))) {
        free(T);
        return -1;
    }
    T->n = s->cfg.live_sessions;
    pthread_mutex_init(&T->mu, NULL);
    pthread_cond_init(&T->cv, NULL);
    s->live = T;
    if (pthread_create(&T->janitor, NULL, janitor_main, s)) return -1;
    T->janitor_started = 1;
    return 0;
}

void hm_srv_live_stop(hm_srv *s) {
    hm_srv_live *T = s->live;
    if (!T) return;
    pthread_mutex_lock(&T->mu);
    T->stopping = 1;
    pthread_cond_broadcast(&T->cv);
    pthread_mutex_unlock(&T->mu);
    if (T->janitor_started) pthread_join(T->janitor, NULL);
    for (int i = 0; i < T->n; i++)
        if (T->v[i]) session_free(T->v[i]);
    free(T->v);
    pthread_mutex_destroy(&T->mu);
    pthread_cond_destroy(&T->cv);
    free(T);
    s->live = NULL;
}

/* 32 hex digits from the system's random source. */
static int new_token(char out[33]) {
    uint8_t b[16];
    int fd = open("/dev/urandom", O_RDONLY | O_CLOEXEC);
    ssize_t got = fd >= 0 ? read(fd, b, sizeof b) : -1;
    if (fd >= 0) close(fd);
    if (got != (ssize_t)sizeof b) return -1;
    for (int i = 0; i < 16; i++) snprintf(out + 2 * i, 3, "%02x", b[i]);
    return 0;
}

/* A new session (T locked by the caller): NULL with msg and *status. */
static live_session *session_new(hm_srv *s, const hm_srv_live_query *q, char *msg, size_t msglen, int *status) {
    hm_srv_live *T = s->live;
    int slot = -1;
    for (int i = 0; i < T->n && slot < 0; i++)
        if (!T->v[i]) slot = i;
    if (slot < 0) {
        snprintf(msg, msglen, "busy: %d live session(s) already (--live-sessions); retry later", T->n);
        *status = 503;
        return NULL;
    }
    live_session *L = calloc(1, sizeof *L);
    *status = 500;
    if (!L || new_token(L->token)) {
        free(L);
        snprintf(msg, msglen, "cannot start a live session: out of memory or no random source");
        return NULL;
    }
    pthread_mutex_init(&L->mu, NULL);
    pthread_cond_init(&L->cv, NULL);
    L->s = s;
    L->t0 = L->last_active = hamer_clock();
    L->src = (hamer_frame_source){.ctx = L, .read = live_read, .stop = live_stop_source};
    hamer_live_params lp = hamer_live_default_params();
    lp.tracker.max_hands = q->max_hands;
    if (q->min_score > 0) lp.tracker.min_score = q->min_score;
    lp.tracker.smooth = q->smooth;
    lp.every_frame = true; /* the tracked frames' boxes and landmarks too, at the pace frames come */
    if (!(L->state = hamer_state_new(s->model, q->max_hands, s->cfg.threads)) ||
        hamer_state_set_cancel(L->state, live_cancelled, L) ||
        !(L->live = hamer_live_new(s->detector, L->state, &lp, s->cfg.threads)) ||
        pthread_create(&L->thread, NULL, run_main, L)) {
        snprintf(msg, msglen, "cannot start a live session: %s", hamer_last_error());
        session_free(L);
        return NULL;
    }
    L->thread_started = 1;
    T->v[slot] = L;
    if (!s->cfg.quiet) hm_srv_log("live session %.8s started (max_hands %d)", L->token, q->max_hands);
    return L;
}

static live_session *session_find(hm_srv_live *T, const char *token) {
    for (int i = 0; i < T->n; i++)
        if (T->v[i] && !T->v[i]->ending && !strcmp(T->v[i]->token, token)) return T->v[i];
    return NULL;
}

/* The answer: {"session", "received", "replaced", "bad", "error",
 * "tracked": record or null, "regressed": record or null (only when newer
 * than the last one sent), "faces" (a new session's first answer: the MANO
 * triangles, for drawing the vertices), "ended": totals (end=1)}. */
static char *answer_text(hm_srv *s, live_session *L, int first, int ended, size_t *len) {
    pthread_mutex_lock(&L->mu);
    json_t *o = json_object();
    json_object_set_new(o, "session", json_string(L->token));
    json_object_set_new(o, "received", json_integer(L->received));
    json_object_set_new(o, "replaced", json_integer(L->replaced));
    json_object_set_new(o, "bad", json_integer(L->bad));
    json_object_set_new(o, "error", L->error[0] ? json_string(L->error) : json_null());
    L->error[0] = 0;
    if (L->failed[0]) json_object_set_new(o, "failed", json_string(L->failed));
    json_t *t = L->tracked ? json_loads(L->tracked, 0, NULL) : NULL;
    json_object_set_new(o, "tracked", t ? t : json_null());
    json_t *g = L->regressed && L->regressed_seq != L->sent_seq ? json_loads(L->regressed, 0, NULL) : NULL;
    json_object_set_new(o, "regressed", g ? g : json_null());
    L->sent_seq = L->regressed_seq;
    if (ended) {
        hamer_live_stats st;
        if (L->run_done) st = L->final;
        else hamer_live_get_stats(L->live, &st);
        json_object_set_new(o, "ended", json_pack("{s:I,s:I,s:I,s:{s:I,s:I,s:I},s:{s:f,s:f,s:f}}", "captured",
                                                  (json_int_t)st.captured, "tracked", (json_int_t)st.tracked,
                                                  "regressed", (json_int_t)st.regressed_frames, "dropped", "source",
                                                  (json_int_t)st.dropped_source, "track", (json_int_t)st.dropped_track,
                                                  "regress", (json_int_t)st.dropped_regress, "latency_ms", "p50",
                                                  st.latency_p50_ms, "p90", st.latency_p90_ms, "max",
                                                  st.latency_max_ms));
    }
    pthread_mutex_unlock(&L->mu);
    if (first) {
        const int32_t *f = hamer_model_get_faces(s->model);
        json_t *faces = json_array();
        for (int i = 0; f && i < 3 * HAMER_N_FACES; i++) json_array_append_new(faces, json_integer(f[i]));
        json_object_set_new(o, "faces", faces);
    }
    char *txt = json_dumps(o, JSON_COMPACT | JSON_PRESERVE_ORDER | JSON_REAL_PRECISION(9));
    json_decref(o);
    *len = txt ? strlen(txt) : 0;
    return txt;
}

/* ---- the endpoint ---- */

typedef struct {
    hm_srv_live_query *q;
    char msg[300];
    int status;
} live_scan;

static enum MHD_Result scan_live_arg(void *cls, enum MHD_ValueKind kind, const char *key, size_t key_size,
                                     const char *value, size_t value_size) {
    (void)kind;
    live_scan *ls = cls;
    if (ls->status) return MHD_YES;
    if (strlen(key) != key_size || (value && strlen(value) != value_size)) {
        snprintf(ls->msg, sizeof ls->msg, "a query parameter holds a NUL byte (%%00)");
        ls->status = 400;
        return MHD_YES;
    }
    ls->status = hm_srv_live_query_add(ls->q, key, value, ls->msg, sizeof ls->msg);
    return MHD_YES;
}

enum MHD_Result hm_srv_live_endpoint(hm_srv *s, struct MHD_Connection *c, hm_srv_req *r) {
    hm_srv_live_query q;
    hm_srv_live_query_init(&q);
    live_scan ls = {.q = &q};
    MHD_get_connection_values_n(c, MHD_GET_ARGUMENT_KIND, scan_live_arg, &ls);
    if (!ls.status) ls.status = hm_srv_live_query_check(&q, ls.msg, sizeof ls.msg);
    if (ls.status) return hm_srv_answer_error(s, c, r, ls.status, ls.msg);
    if (!s->live) return hm_srv_answer_error(s, c, r, 404, "live sessions are off (--live-sessions 0)");
    if (!s->detector) return hm_srv_answer_error(s, c, r, 400, "live sessions need the hand detector (none loaded)");
    if (atomic_load(&s->phase) != HM_SRV_READY) return hm_srv_answer_error(s, c, r, 503, "not ready: the model is loading");
    /* the frame's pixels, bounded as a POST image's */
    if (r->len) {
        int iw, ih;
        double allowed = fmax(HM_SRV_FREE_PIXELS, s->cfg.pixels_per_byte * (double)r->len);
        if (hm_srv_image_dims(r->body, r->len, &iw, &ih) == 0 && (double)iw * ih > allowed) {
            char m[300];
            snprintf(m, sizeof m, "frame of %dx%d pixels from a %zu-byte body: over the decode budget of %.0f pixels",
                     iw, ih, r->len, allowed);
            return hm_srv_answer_error(s, c, r, 413, m);
        }
    }
    hm_srv_live *T = s->live;
    char msg[300];
    int status = 0, first = 0;
    pthread_mutex_lock(&T->mu);
    live_session *L = q.session[0] ? session_find(T, q.session) : NULL;
    if (q.session[0] && !L) {
        pthread_mutex_unlock(&T->mu);
        return hm_srv_answer_error(s, c, r, 404, "no such live session (ended, or idle past --live-idle-s)");
    }
    if (!L) {
        if (!r->len) {
            pthread_mutex_unlock(&T->mu);
            return hm_srv_answer_error(s, c, r, 400, "a new live session's request brings its first frame");
        }
        if (!(L = session_new(s, &q, msg, sizeof msg, &status))) {
            pthread_mutex_unlock(&T->mu);
            return hm_srv_answer_error(s, c, r, status, msg);
        }
        first = 1;
    }
    L->last_active = hamer_clock();
    if (r->len) { /* the body becomes the newest frame: the one not yet taken goes */
        pthread_mutex_lock(&L->mu);
        if (L->frame) free(L->frame), L->replaced++;
        L->frame = r->body, L->frame_len = r->len, L->frame_at = hamer_clock();
        r->body = NULL, r->len = r->cap = 0;
        L->received++;
        pthread_cond_broadcast(&L->cv);
        pthread_mutex_unlock(&L->mu);
    }
    size_t len;
    char *txt = answer_text(s, L, first, q.end, &len);
    if (q.end) {
        L->ending = 1;
        pthread_cond_broadcast(&T->cv);
        if (!s->cfg.quiet) hm_srv_log("live session %.8s ended by its client", L->token);
    }
    pthread_mutex_unlock(&T->mu);
    if (!txt) return hm_srv_answer_error(s, c, r, 500, "out of memory");
    if (hm_srv_reserve_answer(s, r, len)) {
        free(txt);
        return hm_srv_answer_busy(s, c, r);
    }
    return hm_srv_answer(s, c, r, 200, txt, len, "application/json", 0);
}

enum MHD_Result hm_srv_live_first(hm_srv *s, struct MHD_Connection *c, hm_srv_req *r) {
    unsigned long long declared;
    char too_big[200];
    if (hm_srv_declared_body(s, c, &declared, too_big, sizeof too_big))
        return hm_srv_answer_error(s, c, r, 413, too_big);
    const char *ct = MHD_lookup_connection_value(c, MHD_HEADER_KIND, MHD_HTTP_HEADER_CONTENT_TYPE);
    /* a body comes with a length or chunked (framing checked before this) */
    const int body = declared > 0 || MHD_lookup_connection_value(c, MHD_HEADER_KIND, MHD_HTTP_HEADER_TRANSFER_ENCODING);
    if (body && (!ct || strncasecmp(ct, "image/", 6))) {
        hm_srv_reject(r, 415, "a live frame's Content-Type must be an image type (image/jpeg, image/png, ...), got "
                      "'%.60s'", ct ? ct : "(none)");
        return MHD_YES;
    }
    if (declared > 0) { /* a Content-Length was given */
        if (hm_srv_reserve_upload(s, r, declared)) {
            char m2[200];
            snprintf(m2, sizeof m2, "busy: uploads in progress fill the budget of %zu bytes (--upload-budget-mb), "
                     "retry later", s->cfg.upload_budget);
            return hm_srv_answer_error(s, c, r, 503, m2);
        }
        if (!(r->body = malloc(declared))) {
            hm_srv_release_upload(s, r);
            hm_srv_reject(r, 503, "out of memory for the body, retry later");
            return MHD_YES;
        }
        r->cap = declared;
    }
    return MHD_YES;
}
