/* server_answer.c - `hamer serve`: queueing answers (headers every answer
 * carries, the connection's close while draining or before the body was
 * read) and the budgets of bodies being received and answers held. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "serve/server_req.h"

void hm_srv_release_upload(hm_srv *s, hm_srv_req *r) {
    if (r->reserved) atomic_fetch_sub(&s->upload_bytes, r->reserved);
    r->reserved = 0;
}

int hm_srv_reserve_upload(hm_srv *s, hm_srv_req *r, size_t n) {
    size_t before = atomic_fetch_add(&s->upload_bytes, n);
    if (before + n > s->cfg.upload_budget) {
        atomic_fetch_sub(&s->upload_bytes, n);
        atomic_fetch_add(&s->metrics.budget_refused, 1);
        return -1;
    }
    r->reserved += n;
    return 0;
}

int hm_srv_reserve_answer(hm_srv *s, hm_srv_req *r, size_t n) {
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
static void hold_answer(hm_srv *s, hm_srv_req *r, size_t len) {
    if (len <= r->answer_reserved) atomic_fetch_sub(&s->response_bytes, r->answer_reserved - len);
    else atomic_fetch_add(&s->response_bytes, len - r->answer_reserved);
    r->answer_reserved = len;
}

void hm_srv_release_answer(hm_srv *s, hm_srv_req *r) {
    if (r->answer_reserved) atomic_fetch_sub(&s->response_bytes, r->answer_reserved);
    r->answer_reserved = 0;
}

void hm_srv_reject(hm_srv_req *r, int status, const char *fmt, ...) {
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

enum MHD_Result hm_srv_answer(hm_srv *s, struct MHD_Connection *c, hm_srv_req *r, int status, void *body, size_t len,
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
        MHD_add_response_header(resp, MHD_HTTP_HEADER_ALLOW, hm_srv_is_post(r->endpoint) ? "POST" : "GET, HEAD");
    if (r->job && s->cache && hm_srv_is_post(r->endpoint) && status == 200)
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

enum MHD_Result hm_srv_answer_error(hm_srv *s, struct MHD_Connection *c, hm_srv_req *r, int status, const char *msg) {
    size_t len;
    char *body = hm_srv_error_json(msg, &len);
    if (!body) return MHD_NO;
    return hm_srv_answer(s, c, r, status, body, len, "application/json", 0);
}

enum MHD_Result hm_srv_answer_json(hm_srv *s, struct MHD_Connection *c, hm_srv_req *r, int status, json_t *o) {
    char *text = o ? json_dumps(o, JSON_COMPACT | JSON_PRESERVE_ORDER) : NULL;
    json_decref(o);
    if (!text) return hm_srv_answer_error(s, c, r, 500, "out of memory");
    return hm_srv_answer(s, c, r, status, text, strlen(text), "application/json", 0);
}

enum MHD_Result hm_srv_answer_busy(hm_srv *s, struct MHD_Connection *c, hm_srv_req *r) {
    atomic_fetch_add(&s->metrics.response_refused, 1);
    char m[240];
    snprintf(m, sizeof m, "busy: answers not yet read by their clients fill the response budget of %zu bytes "
             "(--response-budget-mb), retry later", s->cfg.response_budget);
    return hm_srv_answer_error(s, c, r, 503, m);
}

const char *hm_srv_phase_name(int phase) {
    switch (phase) {
    case HM_SRV_LOADING: return "loading";
    case HM_SRV_WARMING: return "warming";
    case HM_SRV_READY: return "ready";
    default: return "failed";
    }
}
