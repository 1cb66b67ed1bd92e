/* server_post.c - `hamer serve`: POST /v1/predict and /v1/render. What the
 * headers allow to refuse at once, the complete request turned into a job
 * (query, multipart parts, boxes, the decode budget), and the job served
 * from the cache or queued for the workers (server_work.c) with its
 * connection suspended. */
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include "format/image.h"
#include "serve/server_req.h"
#include "core/util.h"

/* The media type of a Content-Type value: 0 none/other, 1 an image of a
 * format the library decodes (JPEG, PNG, WebP, AVIF, BMP, TIFF, GIF: the
 * bytes decide the format, the type only admits the body), 2
 * multipart/form-data. */
static int media_kind(const char *ct) {
    static const char *const images[] = {"image/jpeg", "image/png", "image/webp", "image/avif",
                                         "image/bmp",  "image/tiff", "image/gif"};
    if (!ct) return 0;
    size_t n = strcspn(ct, "; \t");
    for (size_t i = 0; i < sizeof images / sizeof *images; i++)
        if (n == strlen(images[i]) && !strncasecmp(ct, images[i], n)) return 1;
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

/* Build the job from the complete request: query, boxes, image. 0 ok, else
 * the HTTP status with msg. */
static int make_job(hm_srv *s, struct MHD_Connection *c, hm_srv_req *r, hm_srv_job *job, char *msg, size_t msglen) {
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
    job->proposals = query.proposals;
    job->min_score = query.min_score;
    job->max_hands = query.max_hands;
    job->draw_hide = query.draw_hide;
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
        /* the detector's keys, named: their indexes move as keys are added */
        for (int k = 0; k < HM_SRV_QUERY_NKEYS; k++)
            if (hands && args.value[k] &&
                (!strcmp(hm_srv_query_keys[k], "body") || !strcmp(hm_srv_query_keys[k], "body_boxes") ||
                 !strcmp(hm_srv_query_keys[k], "proposals") ||
                 !strcmp(hm_srv_query_keys[k], "min_score") || !strcmp(hm_srv_query_keys[k], "max_hands"))) {
                snprintf(msg, msglen, "%s= is the detector's: it is for requests without hands", hm_srv_query_keys[k]);
                return 400;
            }
        job->nbox = hands ? hamer_boxes_parse((const char *)hands->data, hands->len, job->boxes, HAMER_MAX_HANDS) : 0;
        if (job->nbox < 0) {
            snprintf(msg, msglen, "hands: %s", hamer_last_error());
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
    int nhands = !job->detect ? job->nbox : job->max_hands ? job->max_hands : hamer_detect_default_params().max_hands;
    job->answer_bound = hm_srv_answer_bound(job->kind == HM_SRV_JOB_RENDER, px, nhands, job->with_vertices, job->format);
    if (job->answer_bound > s->cfg.response_budget) {
        /* It could never be held: no point in a 503 that asks to retry. */
        snprintf(msg, msglen, "the answer (up to %zu bytes for a %.0f-pixel image) is larger than the whole response "
                 "budget of %zu bytes (--response-budget-mb)", job->answer_bound, px, s->cfg.response_budget);
        return 413;
    }
    return 0;
}

enum MHD_Result hm_srv_post_endpoint(hm_srv *s, struct MHD_Connection *c, hm_srv_req *r) {
    hm_srv_job *job = calloc(1, sizeof *job);
    if (!job) return hm_srv_answer_error(s, c, r, 500, "out of memory");
    atomic_init(&job->refs, 1);     /* the connection's */
    job->conn = c;
    r->job = job;
    char msg[400];
    int status = make_job(s, c, r, job, msg, sizeof msg);
    if (status) return hm_srv_answer_error(s, c, r, status, msg);
    if (s->cache && r->hashing) {
        hm_srv_sha256_final(&r->sha, job->key);
        job->cacheable = 1;
        uint8_t *body;
        size_t len;
        const char *type;
        if (hm_srv_cache_get(s->cache, job->key, &body, &len, &type)) {
            atomic_fetch_add(&s->metrics.cache_hits, 1);
            if (hm_srv_reserve_answer(s, r, len)) {
                free(body);
                return hm_srv_answer_busy(s, c, r);
            }
            job->from_cache = 1;
            hm_srv_hist_observe(&s->metrics.request, hm_now() - r->t_complete);
            return hm_srv_answer(s, c, r, 200, body, len, type, 0);
        }
        atomic_fetch_add(&s->metrics.cache_misses, 1);
    }
    /* Only this thread submits, so a free slot seen now is still free when
     * the job is submitted; checking first avoids suspending for nothing. */
    if (hm_srv_work_waiting(s) >= s->cfg.queue)
        return hm_srv_answer_error(s, c, r, 503, "busy: the queue is full, retry later");
    /* Room for the answer before any work: what clients leave unread is
     * bounded, and a job that could not be held is not started. */
    if (hm_srv_reserve_answer(s, r, job->answer_bound)) return hm_srv_answer_busy(s, c, r);
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

int hm_srv_declared_body(const hm_srv *s, struct MHD_Connection *c, unsigned long long *declared, char *msg,
                         size_t n) {
    const char *cl = MHD_lookup_connection_value(c, MHD_HEADER_KIND, MHD_HTTP_HEADER_CONTENT_LENGTH);
    *declared = 0;
    if (!cl) return 0;
    char *end;
    errno = 0;
    *declared = strtoull(cl, &end, 10);
    if (errno || end == cl || *end) *declared = ULLONG_MAX;
    if (*declared <= s->cfg.max_body) return 0;
    snprintf(msg, n, "body of %s bytes is over the limit of %zu bytes (--max-body-mb)", cl, s->cfg.max_body);
    return 1;
}

enum MHD_Result hm_srv_post_first(hm_srv *s, struct MHD_Connection *c, hm_srv_req *r) {
    int ep = r->endpoint;
    /* A declared body over the limit is refused before any of it is read. */
    unsigned long long declared;
    char too_big[200];
    if (hm_srv_declared_body(s, c, &declared, too_big, sizeof too_big))
        return hm_srv_answer_error(s, c, r, 413, too_big);
    const char *ct = MHD_lookup_connection_value(c, MHD_HEADER_KIND, MHD_HTTP_HEADER_CONTENT_TYPE);
    if (!media_kind(ct)) {
        hm_srv_reject(r, 415, "Content-Type must be image/jpeg, image/png, image/webp, image/avif, image/bmp, "
               "image/tiff, image/gif or multipart/form-data, got '%.60s'",
               ct ? ct : "(none)");
        return MHD_YES;
    }
    hm_srv_query_args args;
    hm_srv_query_init(&args, ep);
    query_scan q = {.args = &args};
    MHD_get_connection_values_n(c, MHD_GET_ARGUMENT_KIND, scan_arg, &q);
    if (q.nul) {
        hm_srv_reject(r, 400, "query parameter '%.40s' holds a NUL byte (%%00)", q.nul);
        return MHD_YES;
    }
    char m[400];
    if (hm_srv_query_check_keys(&args, m, sizeof m)) {
        hm_srv_reject(r, 400, "%s", m);
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
        hm_srv_reject(r, 503, "not ready (%s): %s", hm_srv_phase_name(phase), s->reason);
        pthread_mutex_unlock(&s->mu);
        return MHD_YES;
    }
    /* Full now: refuse without keeping the body (it is still read: server_http.c says why). */
    if (hm_srv_work_waiting(s) >= s->cfg.queue) {
        hm_srv_reject(r, 503, "busy: the queue is full, retry later");
        return MHD_YES;
    }
    if (declared > 0) { /* a Content-Length was given */
        /* Budget first, then memory: beyond it the body is never read. */
        if (hm_srv_reserve_upload(s, r, declared)) {
            char m2[200];
            snprintf(m2, sizeof m2, "busy: uploads in progress fill the budget of %zu bytes (--upload-budget-mb), "
                     "retry later", s->cfg.upload_budget);
            return hm_srv_answer_error(s, c, r, 503, m2);
        }
        r->body = malloc(declared);
        if (!r->body) {
            hm_srv_release_upload(s, r);
            hm_srv_reject(r, 503, "out of memory for the body, retry later");
            return MHD_YES;
        }
        r->cap = declared;
    }
    return MHD_YES;
}
