/* worker_job.c - a stream entry -> a job -> its outcome.
 *
 * Nothing in a message is trusted: every field is checked here, the image
 * and boxes by the library (the limits of docs/limits.md, "Threat model
 * and limits"), and whatever is wrong becomes the text of an error result.
 * Only a failure that is the worker's own (out of memory) leaves the job
 * pending for another try.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "common/common.h"
#include "worker/worker.h"

/* Printable ASCII only (others become '?'), cut to fit n. */
void hm_wk_clean(char *out, size_t n, const char *msg) {
    size_t k = 0;
    for (const char *p = msg ? msg : "unknown error"; *p && k + 1 < n; p++)
        out[k++] = (unsigned char)*p >= 0x20 && (unsigned char)*p < 0x7f ? *p : '?';
    out[k] = 0;
}

/* Mark the job malformed (the first reason wins). */
static void set_bad(hm_wk_job *job, const char *fmt, const char *arg) {
    if (job->bad[0]) return;
    char msg[512];
    snprintf(msg, sizeof msg, fmt, arg);
    hm_wk_clean(job->bad, sizeof job->bad, msg);
}

/* A job id: 1..HM_WK_ID_MAX printable ASCII bytes without spaces. */
static int id_ok(const redisReply *v) {
    if (v->type != REDIS_REPLY_STRING || v->len < 1 || v->len > HM_WK_ID_MAX) return 0;
    for (size_t i = 0; i < v->len; i++)
        if ((unsigned char)v->str[i] <= 0x20 || (unsigned char)v->str[i] >= 0x7f) return 0;
    return 1;
}

/* A stream entry ID as Redis makes them: <ms>-<seq>, decimal digits. */
static int entry_id_ok(const redisReply *v) {
    size_t dash = 0, i;
    for (i = 0; i < v->len; i++) {
        unsigned char c = (unsigned char)v->str[i];
        if (c == '-' && !dash && i > 0) dash = i;
        else if (c < '0' || c > '9') return 0;
    }
    return dash > 0 && dash + 1 < v->len;
}

/* A short text value: a string without NUL bytes. */
static const char *text_of(const redisReply *v) {
    if (v->type != REDIS_REPLY_STRING || v->len > 64 || strlen(v->str) != v->len) return NULL;
    return v->str;
}

/* Entry -> job: the id first, then every other field checked; never fails. */
void hm_wk_job_parse(const redisReply *entry, size_t payload_max, hm_wk_job *job) {
    memset(job, 0, sizeof *job);
    job->pp = hamer_predict_default_params();
    job->deliveries = 1;
    job->t_read = hm_now();
    if (entry->type != REDIS_REPLY_ARRAY || entry->elements != 2 || entry->element[0]->type != REDIS_REPLY_STRING ||
        entry->element[0]->len >= sizeof job->entry || !entry_id_ok(entry->element[0])) {
        /* Not what Redis sends for a stream entry: nothing to answer to. */
        snprintf(job->bad, sizeof job->bad, "malformed stream entry");
        job->deleted = 1;
        return;
    }
    memcpy(job->entry, entry->element[0]->str, entry->element[0]->len);
    snprintf(job->id, sizeof job->id, "%s", job->entry);
    const redisReply *f = entry->element[1];
    if (f->type == REDIS_REPLY_NIL) {
        job->deleted = 1;   /* XDEL'd or trimmed while pending */
        return;
    }
    if (f->type != REDIS_REPLY_ARRAY || f->elements % 2) {
        set_bad(job, "malformed stream entry%s", "");
        return;
    }
    /* The id first, so that every other complaint is answered under it. */
    int nid = 0;
    for (size_t i = 0; i + 1 < f->elements; i += 2) {
        const redisReply *k = f->element[i], *v = f->element[i + 1];
        if (k->type == REDIS_REPLY_STRING && k->len == 2 && !memcmp(k->str, "id", 2)) {
            if (nid++) set_bad(job, "field 'id' given twice%s", "");
            else if (!id_ok(v)) set_bad(job, "bad 'id': 1..200 printable ASCII characters without spaces%s", "");
            else memcpy(job->id, v->str, v->len), job->id[v->len] = 0;
        }
    }
    size_t total = 0;
    enum { NFIELDS = 9 };
    int seen[NFIELDS] = {0};
    static const char *names[NFIELDS] = {"image", "boxes", "vertices", "rescale", "crop_mode", "body", "body_boxes",
                                         "focal", "fov"};
    for (size_t i = 0; i + 1 < f->elements; i += 2) {
        const redisReply *k = f->element[i], *v = f->element[i + 1];
        if (k->type != REDIS_REPLY_STRING || v->type != REDIS_REPLY_STRING) {
            set_bad(job, "malformed stream entry%s", "");
            continue;
        }
        total += k->len + v->len;
        if (k->len == 2 && !memcmp(k->str, "id", 2)) continue;
        int which = -1;
        for (int n = 0; n < NFIELDS; n++)
            if (k->len == strlen(names[n]) && !memcmp(k->str, names[n], k->len)) which = n;
        if (which < 0) {
            char name[40];
            snprintf(name, sizeof name, "%.*s", (int)(k->len < 32 ? k->len : 32), k->str);
            set_bad(job, "unknown field '%s' (fields: image, id, boxes, vertices, rescale, crop_mode, body, body_boxes, "
                    "focal, fov)", name);
            continue;
        }
        if (seen[which]++) {
            set_bad(job, "field '%s' given twice", names[which]);
            continue;
        }
        const char *t = which >= 2 ? text_of(v) : NULL;
        switch (which) {
        case 0:
            job->image = v->str, job->image_len = v->len;
            break;
        case 1:
            job->boxes = v->str, job->boxes_len = v->len;
            break;
        case 2:
            if (t && (!strcmp(t, "0") || !strcmp(t, "1"))) job->with_vertices = t[0] == '1';
            else set_bad(job, "'vertices' must be 0 or 1%s", "");
            break;
        case 3:
            if (!t || hm_tool_parse_rescale(t, &job->pp.rescale))
                set_bad(job, "'rescale' must be a number in (0, 16]%s", "");
            break;
        case 5:
            if (!t || hm_tool_parse_body(t, &job->body)) set_bad(job, "'body' must be auto, on or off%s", "");
            else job->body_given = 1;
            break;
        case 6:
            if (t && (!strcmp(t, "0") || !strcmp(t, "1"))) job->body_boxes_given = 1, job->body_boxes = t[0] == '1';
            else set_bad(job, "'body_boxes' must be 0 or 1%s", "");
            break;
        case 7:
        case 8: {
            /* the photo's camera (else its EXIF, else the model's) */
            hamer_predict_params pp = job->pp;
            if (!t || hm_tool_camera_value(names[which], t, &pp))
                set_bad(job, "%s", which == 7 ? "'focal' must be a focal length in pixels in (0, 1e7]"
                                              : "'fov' must be a field of view in degrees in (0, 180)");
            else job->pp = pp;
            break;
        }
        default:
            if (t && !strcmp(t, "warp")) job->pp.crop_mode = HAMER_CROP_WARP;
            else if (t && !strcmp(t, "pad")) job->pp.crop_mode = HAMER_CROP_PAD;
            else set_bad(job, "'crop_mode' must be warp or pad%s", "");
        }
    }
    if (total > payload_max) {
        char msg[200];
        snprintf(msg, sizeof msg, "payload of %zu bytes is over the limit of %zu bytes (--max-payload-mb)", total,
                 payload_max);
        job->bad[0] = 0;    /* the size is the first thing to tell */
        set_bad(job, "%s", msg);
    }
    if (!seen[0]) set_bad(job, "no 'image' field (the JPEG or PNG bytes)%s", "");
    if (seen[1] && seen[5]) set_bad(job, "'body' chooses the detector's passes: it is for jobs without 'boxes'%s", "");
    if (seen[1] && seen[6])
        set_bad(job, "'body_boxes' chooses the detector's output: it is for jobs without 'boxes'%s", "");
}

/* Free the outcome's result text. */
void hm_wk_outcome_free(hm_wk_outcome *out) {
    free(out->result);
    out->result = NULL;
}

/* Fill the outcome from a failed library call: out of memory is the
 * worker's trouble (retry elsewhere), anything else the job's. */
static void fail(hm_wk_outcome *out, int rc, const char *what) {
    out->kind = rc == HAMER_E_NOMEM ? HM_WK_RESULT_RETRY : HM_WK_RESULT_ERROR;
    char msg[512];
    snprintf(msg, sizeof msg, "%s%s", what, hamer_last_error());
    hm_wk_clean(out->error, sizeof out->error, msg);
}

/* Boxes, then the photo job (decode, detect or not, predict) and its
 * RESULT.json; the outcome says which of ok / error / retry it came to. */
void hm_wk_job_run(hm_wk_engine *e, const hm_wk_job *job, hm_wk_outcome *out) {
    memset(out, 0, sizeof *out);
    int n = 0;
    hamer_box boxes[HAMER_MAX_HANDS];   /* on the stack: a job allocates nothing for its boxes */
    if (!e->job && !(e->job = hamer_job_new(e->state, e->dstate, NULL))) { /* made by load() */
        out->kind = HM_WK_RESULT_RETRY;
        snprintf(out->error, sizeof out->error, "out of memory");
        goto done;
    }
    /* The same steps, in the same order, with the same timings as `hamer
     * run` (tools/cli/cli_run.c): boxes, then the library's photo job. */
    int detected = !job->boxes;
    if (!detected && (n = hamer_boxes_parse(job->boxes, job->boxes_len, boxes, HAMER_MAX_HANDS)) < 0) {
        fail(out, n, "");
        goto done;
    }
    hamer_job_params jp = hamer_job_default_params();
    jp.predict = job->pp;
    jp.detect = e->dparams;
    if (job->body_given) jp.detect.body = job->body;
    if (job->body_boxes_given) jp.detect.body_boxes = job->body_boxes;
    hamer_job_input in = {.data = job->image, .len = job->image_len, .boxes = boxes, .n_boxes = n,
                          .source = detected ? HAMER_BOXES_DETECTED : HAMER_BOXES_GIVEN, .params = &jp};
    hamer_job_result r;
    int rc = hamer_job_run(e->job, &in);
    hamer_job_get_result(e->job, &r);
    if (rc && r.failed_stage == HAMER_JOB_STAGE_DETECT && !e->dstate) {
        out->kind = HM_WK_RESULT_ERROR;
        snprintf(out->error, sizeof out->error, "no 'boxes' given and this worker runs without the detector "
                 "(--no-detect)");
        goto done;
    }
    if (rc) {
        fail(out, rc, r.failed_stage == HAMER_JOB_STAGE_DETECT ? "detect: " : "");
        goto done;
    }
    out->tm = r.timings;
    out->hands_ok = r.n_hands - r.n_failed;
    out->hands_failed = r.n_failed;
    char *json = hamer_job_result_json(e->job, job->with_vertices);
    if (!json) {
        fail(out, hamer_last_error_code(), "result: ");
        goto done;
    }
    /* A copy the caller frees with free() (hamer_free may differ). */
    out->result = strdup(json);
    hamer_free(json);
    if (!out->result) {
        out->kind = HM_WK_RESULT_RETRY;
        snprintf(out->error, sizeof out->error, "out of memory");
        goto done;
    }
    out->kind = HM_WK_RESULT_OK;
done:
    return;
}
