/* server_req.h - `hamer serve`: one HTTP request's context and the
 * answers queued for it, shared by the files of the libmicrohttpd side:
 * server_http.c (callbacks, routing, framing), server_get.c (the GET
 * endpoints), server_post.c (the POST endpoints' input), server_answer.c
 * (answers and the upload and response budgets). All of it runs on
 * libmicrohttpd's polling thread. */
#ifndef HM_SERVE_SERVER_REQ_H
#define HM_SERVE_SERVER_REQ_H

#include <jansson.h>
#include "serve/server.h"

/* Per-request context (MHD's con_cls), one per connection record. */
typedef struct {
    hm_srv_conn *k;             /* the connection's record */
    int started;                /* the access handler saw the headers */
    int bad_target;             /* the path holds a %00: refused 400 (on_uri) */
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
} hm_srv_req;

/* Whether the endpoint takes POST (/v1/predict, /v1/render). */
static inline int hm_srv_is_post(int ep) { return ep == HM_SRV_EP_PREDICT || ep == HM_SRV_EP_RENDER; }

/* ---- server_answer.c ---- */

/* Give back the upload budget a body held (it is complete, or gone). */
void hm_srv_release_upload(hm_srv *s, hm_srv_req *r);
/* Take n more bytes of the upload budget; -1 when it is exhausted. */
int hm_srv_reserve_upload(hm_srv *s, hm_srv_req *r, size_t n);
/* Take n more bytes of the response budget for this request's answer; -1
 * (nothing taken) when they do not fit beside the answers already held. */
int hm_srv_reserve_answer(hm_srv *s, hm_srv_req *r, size_t n);
/* The answer is sent or dropped (its buffer freed with the request). */
void hm_srv_release_answer(hm_srv *s, hm_srv_req *r);
/* Remember a refusal to answer once the body is in (first one wins). */
void hm_srv_reject(hm_srv_req *r, int status, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
/* Queue an answer. body is malloc'd and handed over (freed here on
 * failure), or static when is_static. */
enum MHD_Result hm_srv_answer(hm_srv *s, struct MHD_Connection *c, hm_srv_req *r, int status, void *body, size_t len,
                              const char *type, int is_static);
/* Queue {"error": msg} with status. */
enum MHD_Result hm_srv_answer_error(hm_srv *s, struct MHD_Connection *c, hm_srv_req *r, int status, const char *msg);
/* Queue a JSON object (consumed) with status. */
enum MHD_Result hm_srv_answer_json(hm_srv *s, struct MHD_Connection *c, hm_srv_req *r, int status, json_t *o);
/* 503: the answers held for clients (mostly unread ones) fill the budget. */
enum MHD_Result hm_srv_answer_busy(hm_srv *s, struct MHD_Connection *c, hm_srv_req *r);
/* The /readyz name of a startup phase. */
const char *hm_srv_phase_name(int phase);

/* ---- server_get.c ---- */

/* Answer one of the GET endpoints (routing already checked the method). */
enum MHD_Result hm_srv_get_endpoint(hm_srv *s, struct MHD_Connection *c, hm_srv_req *r);

/* ---- server_live.c ---- */

/* The headers of a POST /v1/live are in: length, type, upload budget. */
enum MHD_Result hm_srv_live_first(hm_srv *s, struct MHD_Connection *c, hm_srv_req *r);
/* The request is complete: the session's next frame, its newest records. */
enum MHD_Result hm_srv_live_endpoint(hm_srv *s, struct MHD_Connection *c, hm_srv_req *r);

/* ---- server_post.c ---- */

/* The headers of a POST to /v1/predict or /v1/render are in: refuse what
 * can be refused now (length, type, query, readiness, queue, budget) and
 * reserve the declared body. */
enum MHD_Result hm_srv_post_first(hm_srv *s, struct MHD_Connection *c, hm_srv_req *r);
/* The request's declared Content-Length into *declared (0 without one,
 * ULLONG_MAX when it is not a number); 1 when it is over --max-body-mb,
 * with the 413's text in msg (the body is then refused unread), else 0.
 * /v1/predict, /v1/render and /v1/live. */
int hm_srv_declared_body(const hm_srv *s, struct MHD_Connection *c, unsigned long long *declared, char *msg,
                         size_t n);
/* The request is complete: validate, serve from the cache, or queue. */
enum MHD_Result hm_srv_post_endpoint(hm_srv *s, struct MHD_Connection *c, hm_srv_req *r);

#endif
