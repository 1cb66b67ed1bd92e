/* server_work.c - `hamer serve`: the bounded job queue, the worker threads
 * (one hamer_state each) and the reaper that enforces --timeout-s.
 *
 * A job is on two lists under s->qmu: the waiting FIFO until a worker takes
 * it, and the pending list (ordered by deadline: --timeout-s, or a
 * client's shorter ?timeout_s=) until it is answered. Exactly one party answers a job: the
 * worker when its inference ends, the reaper when the deadline passes first
 * (504), the watchdog when the client went away, or shutdown. The answerer
 * writes the response into the job and resumes its suspended connection;
 * libmicrohttpd then calls the access handler again, which sends it.
 *
 * Work nobody waits for is not done: the worker's state asks job_cancelled
 * between transformer blocks and passes (hamer_state_set_cancel), which is
 * true once the job was answered by someone else (504, client gone,
 * shutdown) or its deadline passed; a job whose deadline passed while it
 * waited is dropped before it starts.
 *
 * References: the connection holds one (dropped when the request completes),
 * the queue/worker holds one from submit until the worker is done with it.
 */
#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "serve/server.h"

/* Drop one reference; the last one frees the job, its body and any unsent answer. */
void hm_srv_job_unref(hm_srv_job *job) {
    if (!job || atomic_fetch_sub(&job->refs, 1) != 1) return;
    free(job->body);
    free(job->out);
    free(job);
}

/* Set the job's answer to a JSON error (the job is already claimed). */
static void set_error(hm_srv_job *job, int status, const char *msg) {
    free(job->out);
    job->status = status;
    job->out = (uint8_t *)hm_srv_error_json(msg, &job->out_len);
    job->out_type = "application/json";
}

/* ---- list helpers (caller holds s->qmu) ---- */

/* Take a job off the waiting FIFO. */
static void waiting_unlink(hm_srv *s, hm_srv_job *j) {
    if (j->wprev) j->wprev->wnext = j->wnext;
    else s->whead = j->wnext;
    if (j->wnext) j->wnext->wprev = j->wprev;
    else s->wtail = j->wprev;
    j->wprev = j->wnext = NULL;
    s->nwaiting--;
}

/* Take a job off the unanswered list. */
static void pending_unlink(hm_srv *s, hm_srv_job *j) {
    if (j->pprev) j->pprev->pnext = j->pnext;
    else s->phead = j->pnext;
    if (j->pnext) j->pnext->pprev = j->pprev;
    else s->ptail = j->pprev;
    j->pprev = j->pnext = NULL;
}

/* Claim the right to answer: 1 if this caller moved the job to ANSWERED
 * (it must then write the answer and resume the connection), 0 if someone
 * else already did. A job still waiting leaves the FIFO; *was_waiting then
 * tells the caller to drop the queue's reference after resuming. */
static int claim(hm_srv *s, hm_srv_job *j, int *was_waiting) {
    *was_waiting = 0;
    if (j->state == HM_SRV_JOB_ANSWERED) return 0;
    if (j->state == HM_SRV_JOB_QUEUED) {
        waiting_unlink(s, j);
        *was_waiting = 1;
    }
    pending_unlink(s, j);
    j->state = HM_SRV_JOB_ANSWERED;
    return 1;
}

/* Jobs waiting for a worker (not counting running ones). */
int hm_srv_work_waiting(hm_srv *s) {
    pthread_mutex_lock(&s->qmu);
    int n = s->nwaiting;
    pthread_mutex_unlock(&s->qmu);
    return n;
}

/* Append to the FIFO and the deadline list; -1 when full or stopping. */
int hm_srv_work_submit(hm_srv *s, hm_srv_job *job) {
    pthread_mutex_lock(&s->qmu);
    if (s->nwaiting >= s->cfg.queue || s->stopping) {
        pthread_mutex_unlock(&s->qmu);
        return -1;
    }
    atomic_fetch_add(&job->refs, 1);
    job->state = HM_SRV_JOB_QUEUED;
    job->t_enqueue = hm_now();
    if (!(job->timeout_s > 0 && job->timeout_s < s->cfg.timeout_s)) job->timeout_s = s->cfg.timeout_s;
    job->deadline = job->t_enqueue + job->timeout_s;
    job->wprev = s->wtail, job->wnext = NULL;
    if (s->wtail) s->wtail->wnext = job;
    else s->whead = job;
    s->wtail = job;
    s->nwaiting++;
    /* By deadline: from the tail, since a job without ?timeout_s= (most)
     * has the latest one. */
    hm_srv_job *after = s->ptail;
    while (after && after->deadline > job->deadline) after = after->pprev;
    job->pprev = after;
    job->pnext = after ? after->pnext : s->phead;
    if (job->pnext) job->pnext->pprev = job;
    else s->ptail = job;
    if (after) after->pnext = job;
    else {
        s->phead = job;
        pthread_cond_signal(&s->rcv);   /* the reaper waits for the earliest deadline, or none */
    }
    pthread_cond_signal(&s->qcv);
    pthread_mutex_unlock(&s->qmu);
    return 0;
}

/* ---- inference ---- */

/* The state's cancel callback: stop when nobody waits for the answer. */
static int job_cancelled(void *user) {
    hm_srv_job *job = user;
    return atomic_load(&job->cancel) || hm_now() > job->deadline;
}

/* format=all: the job's four answers, one run, as multipart/form-data
 * (RFC 7578; a browser reads it with Response.formData()): "result"
 * (RESULT.json), "overlay" (the PNG of /v1/render with the request's draw),
 * "glb", "obj". The boundary is checked against every part. Returns the
 * malloc'd body and its type, or NULL with the failing answer's message. */
static uint8_t *all_formats(hamer_job *pj, const hm_srv_job *job, size_t *out_len, char *type, size_t typelen,
                            char *msg, size_t msglen) {
    static const char *const names[4] = {"result", "overlay", "glb", "obj"};
    static const char *const types[4] = {"application/json", "image/png", "model/gltf-binary", "model/obj"};
    static const char *const files[4] = {"RESULT.json", "overlay.png", "hands.glb", "hands.obj"};
    void *data[4] = {0};
    size_t len[4] = {0};
    char *json = hamer_job_result_json(pj, job->with_vertices);
    const hamer_render_params rp = {.hide = job->draw_hide};
    int rc = json ? HAMER_OK : HAMER_E_NOMEM, failed = 0;
    data[0] = json, len[0] = json ? strlen(json) : 0;
    if (!rc && (rc = hamer_job_render_overlay_png(pj, &rp, (uint8_t **)&data[1], &len[1]))) failed = 1;
    if (!rc && (rc = hamer_job_glb(pj, (uint8_t **)&data[2], &len[2]))) failed = 2;
    if (!rc && (rc = hamer_job_obj(pj, (char **)&data[3], &len[3]))) failed = 3;
    uint8_t *out = NULL;
    if (rc) {
        snprintf(msg, msglen, "%s: %s", names[failed], hamer_last_error());
    } else {
        /* a boundary none of the parts holds */
        char boundary[48];
        for (unsigned salt = 0;; salt++) {
            snprintf(boundary, sizeof boundary, "hamer-%08x%08x", (unsigned)len[1] ^ (salt * 2654435761u),
                     (unsigned)(len[2] + salt));
            int clash = 0;
            for (int i = 0; i < 4 && !clash; i++)
                clash = len[i] >= strlen(boundary) && memmem(data[i], len[i], boundary, strlen(boundary)) != NULL;
            if (!clash) break;
        }
        size_t total = strlen(boundary) + 8;
        for (int i = 0; i < 4; i++) total += len[i] + strlen(boundary) + 256;
        out = malloc(total);
        size_t n = 0;
        for (int i = 0; out && i < 4; i++) {
            n += (size_t)snprintf((char *)out + n, total - n,
                                  "--%s\r\nContent-Disposition: form-data; name=\"%s\"; filename=\"%s\"\r\n"
                                  "Content-Type: %s\r\n\r\n", boundary, names[i], files[i], types[i]);
            memcpy(out + n, data[i], len[i]);
            n += len[i];
            memcpy(out + n, "\r\n", 2);
            n += 2;
        }
        if (out) {
            n += (size_t)snprintf((char *)out + n, total - n, "--%s--\r\n", boundary);
            *out_len = n;
            snprintf(type, typelen, "multipart/form-data; boundary=%s", boundary);
        } else {
            snprintf(msg, msglen, "out of memory");
        }
    }
    for (int i = 0; i < 4; i++) hamer_free(data[i]);
    return out;
}

/* 400 for what the client sent, 500 for the server's own trouble. */
static int status_of(int rc) { return rc == HAMER_E_NOMEM || rc == HAMER_E_NOMANO ? 500 : 400; }

/* Run one request on a worker's photo job; fills status/out/out_len/out_type (malloc'd). */
static void run_job(hm_srv *s, hamer_job *pj, hm_srv_job *job, int *status, uint8_t **out, size_t *out_len,
                    const char **out_type, double *infer_s) {
    char msg[512];
    double t0 = hm_now();
    *out = NULL;
    hamer_job_params jp = hamer_job_default_params();
    jp.predict = job->pp;
    jp.detect.body = job->body_mode;
    jp.detect.body_boxes = job->body_boxes;
    jp.detect.proposals = job->proposals;
    if (job->min_score > 0) jp.detect.min_score = job->min_score;
    if (job->max_hands > 0) jp.detect.max_hands = job->max_hands;
    hamer_job_input in = {.data = job->image, .len = job->image_len, .boxes = job->boxes, .n_boxes = job->nbox,
                          .source = job->detect ? HAMER_BOXES_DETECTED : HAMER_BOXES_GIVEN, .params = &jp};
    hamer_job_result r;
    int rc = hamer_job_run(pj, &in);
    hamer_job_get_result(pj, &r);
    if (rc == HAMER_E_CANCELLED) {
        atomic_fetch_add(&s->metrics.cancelled, 1);
        snprintf(msg, sizeof msg, "timed out after %g s (inference cancelled)", job->timeout_s);
        *status = 504;
        *out = (uint8_t *)hm_srv_error_json(msg, out_len);
        *out_type = "application/json";
        goto done;
    }
    if (rc) {
        snprintf(msg, sizeof msg, "%s%s", r.failed_stage == HAMER_JOB_STAGE_DETECT ? "detect: " : "", hamer_last_error());
        goto fail;
    }
    job->nbox = r.n_hands;
    atomic_fetch_add(&s->metrics.hands_ok, (unsigned long long)(r.n_hands - r.n_failed));
    atomic_fetch_add(&s->metrics.hands_failed, (unsigned long long)r.n_failed);
    /* The answer in the library's memory (freed with hamer_free), then
     * copied into malloc'd memory the job owns (hamer_free may differ from
     * free). */
    char *txt = NULL;
    uint8_t *bin = NULL;
    size_t len = 0;
    const char *what = "";
    if (job->kind == HM_SRV_JOB_PREDICT && job->format == HM_SRV_FMT_ALL) {
        *out = all_formats(pj, job, out_len, job->all_type, sizeof job->all_type, msg, sizeof msg);
        if (!*out) {
            rc = HAMER_E_NOMEM;
            goto fail;
        }
        *out_type = job->all_type;
        *status = 200;
        goto done;
    }
    if (job->kind == HM_SRV_JOB_PREDICT && job->format == HM_SRV_FMT_OBJ) {
        what = "obj: ", *out_type = "model/obj";
        rc = hamer_job_obj(pj, &txt, &len);
    } else if (job->kind == HM_SRV_JOB_PREDICT && job->format == HM_SRV_FMT_BVH) {
        what = "bvh: ", *out_type = "application/x-bvh";
        rc = hamer_job_bvh(pj, &txt, &len);
    } else if (job->kind == HM_SRV_JOB_PREDICT && job->format == HM_SRV_FMT_GLB) {
        what = "glb: ", *out_type = "model/gltf-binary";
        rc = hamer_job_glb(pj, &bin, &len);
    } else if (job->kind == HM_SRV_JOB_PREDICT) {
        *out_type = "application/json";
        txt = hamer_job_result_json(pj, job->with_vertices);
        rc = txt ? HAMER_OK : HAMER_E_NOMEM;
        len = txt ? strlen(txt) : 0;
    } else {
        what = "render: ", *out_type = "image/png";
        /* the overlay as `hamer run --render` draws it: meshes and marks */
        const hamer_render_params rp = {.hide = job->draw_hide};
        rc = job->side_view ? hamer_job_render_png(pj, 1, &bin, &len) : hamer_job_render_overlay_png(pj, &rp, &bin, &len);
    }
    const void *data = txt ? (const void *)txt : (const void *)bin;
    if (rc) {
        snprintf(msg, sizeof msg, "%s%s", what, hamer_last_error());
        goto fail;
    }
    *out_len = len;
    *out = malloc(len + 1);
    if (*out) {
        if (len) memcpy(*out, data, len);
        (*out)[len] = 0;
    }
    hamer_free(txt);
    hamer_free(bin);
    if (!*out) {
        rc = HAMER_E_NOMEM;
        snprintf(msg, sizeof msg, "out of memory");
        goto fail;
    }
    *status = 200;
    goto done;
fail:
    *status = status_of(rc);
    *out = (uint8_t *)hm_srv_error_json(msg, out_len);
    *out_type = "application/json";
done:
    *infer_s = hm_now() - t0;
}

typedef struct {
    hm_srv *s;
    int index;
} worker_arg;

/* Worker: take the oldest waiting job, run it, answer it unless the reaper
 * already did. Exits when stopping and the FIFO is empty. */
static void *worker_main(void *p) {
    worker_arg a = *(worker_arg *)p;
    free(p);
    hm_srv *s = a.s;
    hamer_state *st = s->states[a.index];
    hamer_detect_state *ds = s->dstates ? s->dstates[a.index] : NULL;
    /* Per worker, once: the job's buffers (64 hands and detections, ~1.5
     * MB) are too much to allocate per request or to keep on a stack. */
    hamer_job *pj = hamer_job_new(st, ds, NULL);
    for (;;) {
        pthread_mutex_lock(&s->qmu);
        while (!s->whead && !s->stopping) pthread_cond_wait(&s->qcv, &s->qmu);
        hm_srv_job *job = s->whead;
        if (!job) {
            pthread_mutex_unlock(&s->qmu);
            break;
        }
        waiting_unlink(s, job);
        job->state = HM_SRV_JOB_RUNNING;
        s->nrunning++;
        pthread_mutex_unlock(&s->qmu);
        hm_srv_hist_observe(&s->metrics.queue_wait, hm_now() - job->t_enqueue);

        int status = 500;
        uint8_t *out = NULL;
        size_t out_len = 0;
        const char *type = NULL;
        double infer_s = 0;
        if (job_cancelled(job)) {
            /* Its deadline passed, or its client left, while it waited. */
            atomic_fetch_add(&s->metrics.cancelled, 1);
            status = 504;
            char msg[128];
            snprintf(msg, sizeof msg, "timed out after %g s waiting in the queue", job->timeout_s);
            out = (uint8_t *)hm_srv_error_json(msg, &out_len);
            type = "application/json";
        } else if (!pj) {
            out = (uint8_t *)hm_srv_error_json("out of memory", &out_len);
            type = "application/json";
        } else {
            hamer_state_set_cancel(st, job_cancelled, job);
            run_job(s, pj, job, &status, &out, &out_len, &type, &infer_s);
            hamer_state_set_cancel(st, NULL, NULL);
            hm_srv_hist_observe(&s->metrics.inference, infer_s);
        }
        /* format=all is not kept: its type (the boundary) is the job's own string, not a literal */
        if (status == 200 && job->cacheable && s->cache && job->format != HM_SRV_FMT_ALL)
            hm_srv_cache_put(s->cache, job->key, out, out_len, type);

        int was_waiting;
        pthread_mutex_lock(&s->qmu);
        s->nrunning--;
        int won = claim(s, job, &was_waiting);
        pthread_mutex_unlock(&s->qmu);
        if (won) {
            job->status = status, job->out = out, job->out_len = out_len, job->out_type = type;
            MHD_resume_connection(job->conn);
        } else {
            /* Answered 504 by the reaper meanwhile: the result has no taker. */
            free(out);
            atomic_fetch_add(&s->metrics.late_results, 1);
        }
        hm_srv_job_unref(job);
    }
    hamer_job_free(pj);
    return NULL;
}

/* Reaper: answer 504 for the job with the earliest deadline once it passes.
 * Sleeps until that deadline, or until a job arrives on an empty list. */
static void *reaper_main(void *p) {
    hm_srv *s = p;
    pthread_mutex_lock(&s->qmu);
    for (;;) {
        hm_srv_job *j = s->phead;
        if (!j) {
            if (s->stopping) break;
            pthread_cond_wait(&s->rcv, &s->qmu);
            continue;
        }
        double now = hm_now();
        if (now < j->deadline) {
            double wait = j->deadline - now;
            struct timespec ts;
            clock_gettime(CLOCK_MONOTONIC, &ts);
            ts.tv_sec += (time_t)wait;
            ts.tv_nsec += (long)((wait - (double)(time_t)wait) * 1e9);
            if (ts.tv_nsec >= 1000000000L) ts.tv_sec++, ts.tv_nsec -= 1000000000L;
            pthread_cond_timedwait(&s->rcv, &s->qmu, &ts);
            continue;
        }
        int was_waiting;
        int running = j->state == HM_SRV_JOB_RUNNING;
        atomic_store(&j->cancel, 1);
        claim(s, j, &was_waiting);
        pthread_mutex_unlock(&s->qmu);
        char msg[256];
        snprintf(msg, sizeof msg,
                 running ? "timed out after %g s (inference cancelled)"
                         : "timed out after %g s waiting in the queue",
                 j->timeout_s);
        set_error(j, 504, msg);
        MHD_resume_connection(j->conn);
        if (was_waiting) hm_srv_job_unref(j);
        pthread_mutex_lock(&s->qmu);
    }
    pthread_mutex_unlock(&s->qmu);
    return NULL;
}

/* The client of a suspended job closed its connection. */
void hm_srv_work_abandon(hm_srv *s, hm_srv_job *j) {
    atomic_store(&j->cancel, 1);
    int was_waiting;
    pthread_mutex_lock(&s->qmu);
    int won = claim(s, j, &was_waiting);
    pthread_mutex_unlock(&s->qmu);
    if (!won) return;
    /* 499 as nginx logs it: the answer is never read, but the connection
     * must be resumed for libmicrohttpd to close and count it. */
    set_error(j, 499, "client closed the connection before the answer");
    MHD_resume_connection(j->conn);
    if (was_waiting) hm_srv_job_unref(j);
}

/* Answer every unanswered job 503 at once and cancel running inferences
 * (shutdown grace expired, or a second signal). */
void hm_srv_work_flush(hm_srv *s, const char *why) {
    pthread_mutex_lock(&s->qmu);
    hm_srv_job *j;
    while ((j = s->phead)) {
        int was_waiting;
        atomic_store(&j->cancel, 1);
        claim(s, j, &was_waiting);
        pthread_mutex_unlock(&s->qmu);
        set_error(j, 503, why);
        MHD_resume_connection(j->conn);
        if (was_waiting) hm_srv_job_unref(j);
        pthread_mutex_lock(&s->qmu);
    }
    pthread_mutex_unlock(&s->qmu);
}

/* Start the reaper and k workers (worker i uses states[i]); -1 if a thread cannot start
 * (hm_srv_work_stop then joins those that did). */
int hm_srv_work_start(hm_srv *s, hamer_state **states, int k) {
    s->states = states;
    s->worker_threads = calloc((size_t)k, sizeof *s->worker_threads);
    if (!s->worker_threads) return -1;
    if (pthread_create(&s->reaper, NULL, reaper_main, s)) return -1;
    s->work_started = 1;
    for (int i = 0; i < k; i++) {
        worker_arg *a = malloc(sizeof *a);
        if (!a) return -1;
        a->s = s, a->index = i;
        if (pthread_create(&s->worker_threads[i], NULL, worker_main, a)) {
            free(a);
            return -1;
        }
        s->nworkers = i + 1;
    }
    return 0;
}

/* Let the workers empty the FIFO, then join them and the reaper. */
void hm_srv_work_stop(hm_srv *s) {
    pthread_mutex_lock(&s->qmu);
    s->stopping = 1;
    pthread_cond_broadcast(&s->qcv);
    pthread_cond_broadcast(&s->rcv);
    pthread_mutex_unlock(&s->qmu);
    for (int i = 0; i < s->nworkers; i++) pthread_join(s->worker_threads[i], NULL);
    s->nworkers = 0;
    /* With the workers gone nothing is left running; the reaper exits once
     * the pending list is empty (every job answered). */
    if (s->work_started) pthread_join(s->reaper, NULL);
    s->work_started = 0;
    free(s->worker_threads);
    s->worker_threads = NULL;
}
