/* hamer_job.c - the photo job of include/hamer.h (hamer_job_*): decode,
 * detect or take the boxes, crop and regress, then the documents of the
 * result. Written with the public calls of hamer.c only, in the order and
 * with the timings `hamer run` has always used, so that every front end
 * (CLI run and batch, server, worker, Python) writes the same bytes. */
#include <stdlib.h>
#include <string.h>

#include "api.h"
#include "core/util.h"
#include "format/image.h"
#include "hamer.h"

struct hamer_job {
    hamer_state *state;
    hamer_detect_state *dstate;
    hamer_job_params params;
    /* Per-request buffers, allocated once (HAMER_MAX_HANDS of each); given
     * boxes are read in place. */
    hamer_hand *hands;
    hamer_detection *dets;
    uint8_t *decoded;          /* the last decoded image (hamer_free'd by the next run) */
    hamer_job_result res;
    int have_result;           /* the last run succeeded */
};

hamer_job_params hamer_job_default_params(void) {
    hamer_job_params p;
    memset(&p, 0, sizeof p);
    p.predict = hamer_predict_default_params();
    p.detect = hamer_detect_default_params();
    return p;
}

/* The reserved bytes of the job's params and of the two it holds. */
static int reserved_check(const hamer_job_params *p) {
    if (HM_CHECK_RESERVED(p, "hamer_job_params") || HM_CHECK_RESERVED(&p->predict, "hamer_predict_params") ||
        HM_CHECK_RESERVED(&p->detect, "hamer_detect_params"))
        return HM_E_ARG;
    return HM_OK;
}

hamer_job *hamer_job_new(hamer_state *state, hamer_detect_state *detect_state, const hamer_job_params *params) {
    if (!state) {
        hm_err(HM_E_ARG, "%s: state is NULL", __func__);
        return NULL;
    }
    /* The values are checked by the stages that use them, per run (the
     * messages of hamer_predict and hamer_detect); the reserved bytes here,
     * as every function taking params does. */
    hamer_job_params p = params ? *params : hamer_job_default_params();
    if (reserved_check(&p)) return NULL;
    hamer_job *job = calloc(1, sizeof *job);
    if (job) {
        job->hands = calloc(HAMER_MAX_HANDS, sizeof *job->hands);
        job->dets = calloc(HAMER_MAX_HANDS, sizeof *job->dets);
    }
    if (!job || !job->hands || !job->dets) {
        hamer_job_free(job);
        hm_err(HM_E_NOMEM, "%s: out of memory", __func__);
        return NULL;
    }
    job->state = state;
    job->dstate = detect_state;
    job->params = p;
    return job;
}

void hamer_job_free(hamer_job *job) {
    if (!job) return;
    hamer_free(job->decoded);
    free(job->hands);
    free(job->dets);
    free(job);
}

/* The run failed at stage with code rc (message already set). */
static int failed(hamer_job *job, hamer_job_stage stage, int rc) {
    job->res.failed_stage = stage;
    job->res.n_hands = 0;
    job->res.n_failed = 0;
    job->res.detections = NULL;
    job->have_result = 0;
    return rc;
}

/* The predict params of a run, with the photo's EXIF focal length when
 * none is given: *exif set when it was used. */
static hamer_predict_params camera_params(const hamer_job_params *p, const hamer_job_input *in, int w, int h,
                                          int *exif) {
    hamer_predict_params pp = p->predict;
    float f = 0;
    *exif = 0;
    if (pp.focal_px > 0 || pp.fov_deg > 0) return pp;
    int found = in->path ? hamer_exif_focal_file(in->path, w, h, &f)
                : in->data ? hamer_exif_focal(in->data, in->len, w, h, &f) : 0;
    if (found == 1) pp.focal_px = f, *exif = 1;
    hm_errclear();  /* a file that cannot be read again just has no EXIF here */
    return pp;
}

int hamer_job_run(hamer_job *job, const hamer_job_input *in) {
    if (!job || !in) return hm_err(HM_E_ARG, "%s: job or input is NULL", __func__);
    /* a path beside RGB pixels names the file they were decoded from */
    int nsrc = (in->path != NULL && !in->rgb) + (in->data != NULL) + (in->rgb != NULL);
    if (nsrc != 1)
        return failed(job, HAMER_JOB_STAGE_DECODE,
                      hm_err(HM_E_ARG, "%s: give exactly one image (path, data or rgb), got %d", __func__, nsrc));
    if (in->source != HAMER_BOXES_GIVEN && in->source != HAMER_BOXES_DETECTED)
        return failed(job, HAMER_JOB_STAGE_PREDICT, hm_err(HM_E_ARG, "%s: unknown boxes source %d", __func__, (int)in->source));
    if (in->source == HAMER_BOXES_GIVEN &&
        (in->n_boxes < 0 || in->n_boxes > HAMER_MAX_HANDS || (in->n_boxes > 0 && !in->boxes)))
        return failed(job, HAMER_JOB_STAGE_PREDICT,
                      hm_err(HM_E_ARG, "%s: %d boxes given, 0..%d per image", __func__, in->n_boxes, HAMER_MAX_HANDS));
    const hamer_job_params *p = in->params ? in->params : &job->params;
    if (reserved_check(p)) return failed(job, HAMER_JOB_STAGE_PREDICT, HM_E_ARG);
    hamer_job_result *r = &job->res;
    memset(r, 0, sizeof *r);
    job->have_result = 0;
    r->source = in->source;
    hamer_free(job->decoded);
    job->decoded = NULL;

    /* Decode. */
    const uint8_t *rgb = in->rgb;
    int w = in->width, h = in->height, rc;
    if (!rgb) {
        double t0 = hm_now();
        rc = in->path ? hamer_image_load(in->path, &job->decoded, &w, &h)
                      : hamer_image_decode(in->data, in->len, &job->decoded, &w, &h);
        if (rc) return failed(job, HAMER_JOB_STAGE_DECODE, rc);
        r->timings.decode_ms = 1e3 * (hm_now() - t0);
        rgb = job->decoded;
    } else if (w < 1 || h < 1) {
        return failed(job, HAMER_JOB_STAGE_DECODE, hm_err(HM_E_ARG, "%s: RGB image of %dx%d pixels", __func__, w, h));
    } else {
        r->timings.decode_ms = in->decode_ms;
    }
    r->width = w, r->height = h, r->rgb = rgb;

    /* The camera: the focal length given, else the photo's EXIF. */
    int exif;
    const hamer_predict_params pp = camera_params(p, in, w, h, &exif);

    /* The boxes: the detector's, or the caller's. */
    double detect_ms = 0;
    int n;
    if (in->source == HAMER_BOXES_DETECTED) {
        if (!job->dstate)
            return failed(job, HAMER_JOB_STAGE_DETECT,
                          hm_err(HM_E_ARG, "%s: no boxes given and the job has no detection state", __func__));
        n = hamer_detect(job->dstate, rgb, w, h, &p->detect, job->dets, HAMER_MAX_HANDS, &detect_ms);
        if (n < 0) return failed(job, HAMER_JOB_STAGE_DETECT, n);
        rc = hamer_predict_detections(job->state, rgb, w, h, job->dets, n, &pp, job->hands, &r->timings);
        r->detections = job->dets;
    } else {
        n = in->n_boxes;
        rc = hamer_predict(job->state, rgb, w, h, in->boxes, n, &pp, job->hands, &r->timings);
    }
    if (rc) return failed(job, HAMER_JOB_STAGE_PREDICT, rc);
    r->timings.detect_ms = detect_ms;
    r->n_hands = n;
    r->hands = job->hands;
    for (int i = 0; i < n; i++) {
        r->n_failed += !job->hands[i].ok;
        if (exif && job->hands[i].ok) job->hands[i].focal_source = HAMER_FOCAL_EXIF;
    }
    r->failed_stage = HAMER_JOB_STAGE_NONE;
    job->have_result = 1;
    return HAMER_OK;
}

int hamer_job_get_result(const hamer_job *job, hamer_job_result *out) {
    if (!job || !out) return hm_err(HM_E_ARG, "%s: job or out is NULL", __func__);
    *out = job->res;
    if (!out->hands) out->hands = job->hands;
    return HAMER_OK;
}

static int check_result(const hamer_job *job, const char *fn) {
    if (!job) return hm_err(HM_E_ARG, "%s: job is NULL", fn);
    if (!job->have_result) return hm_err(HM_E_ARG, "%s: the job has no result (no successful run)", fn);
    return HAMER_OK;
}

char *hamer_job_result_json(const hamer_job *job, int with_vertices) {
    if (check_result(job, __func__)) return NULL;
    const hamer_job_result *r = &job->res;
    return hamer_result_json_source(r->width, r->height, r->hands, r->n_hands, with_vertices, &r->timings, r->source);
}

int hamer_job_render_png(const hamer_job *job, int side_view, uint8_t **png, size_t *len) {
    int rc = check_result(job, __func__);
    if (rc) return rc;
    if (!png || !len) return hm_err(HM_E_ARG, "%s: png or len is NULL", __func__);
    const hamer_job_result *r = &job->res;
    return hamer_render_png(hm_state_model(job->state), r->rgb, r->width, r->height, r->hands, r->n_hands, side_view,
                            png, len);
}

int hamer_image_size(const void *buf, size_t len, int *w, int *h) {
    long long ww = 0, hh = 0;
    if (!buf || !w || !h) return hm_err(HM_E_ARG, "%s: NULL argument", __func__);
    if (!hm_image_header_size(buf, len, NULL, &ww, &hh) || ww < 1 || hh < 1 || ww > HM_IMAGE_MAX_DIM ||
        hh > HM_IMAGE_MAX_DIM)
        return hm_err(HM_E_FORMAT, "image: no size in its header, or one out of range");
    *w = (int)ww, *h = (int)hh;
    return HAMER_OK;
}

int hamer_job_render_overlay_png(const hamer_job *job, const hamer_render_params *params, uint8_t **png,
                                 size_t *len) {
    int rc = check_result(job, __func__);
    if (rc) return rc;
    if (!png || !len) return hm_err(HM_E_ARG, "%s: png or len is NULL", __func__);
    const hamer_job_result *r = &job->res;
    return hamer_render_overlay_png(hm_state_model(job->state), r->rgb, r->width, r->height, r->hands, r->n_hands,
                                    params, png, len);
}

int hamer_job_glb(const hamer_job *job, uint8_t **glb, size_t *len) {
    int rc = check_result(job, __func__);
    if (rc) return rc;
    if (!glb || !len) return hm_err(HM_E_ARG, "%s: glb or len is NULL", __func__);
    return hamer_hands_glb(hm_state_model(job->state), job->hands, job->res.n_hands, glb, len);
}

int hamer_job_bvh(const hamer_job *job, char **bvh, size_t *len) {
    int rc = check_result(job, __func__);
    if (rc) return rc;
    if (!bvh || !len) return hm_err(HM_E_ARG, "%s: bvh or len is NULL", __func__);
    return hamer_hands_bvh(hm_state_model(job->state), job->hands, job->res.n_hands, bvh, len);
}

int hamer_job_obj(const hamer_job *job, char **obj, size_t *len) {
    int rc = check_result(job, __func__);
    if (rc) return rc;
    if (!obj || !len) return hm_err(HM_E_ARG, "%s: obj or len is NULL", __func__);
    return hamer_hands_obj(hm_state_model(job->state), job->hands, job->res.n_hands, obj, len);
}

int hamer_job_hand_obj(const hamer_job *job, int hand, char **obj, size_t *len) {
    int rc = check_result(job, __func__);
    if (rc) return rc;
    if (!obj || !len) return hm_err(HM_E_ARG, "%s: obj or len is NULL", __func__);
    if (hand < 0 || hand >= job->res.n_hands)
        return hm_err(HM_E_ARG, "%s: hand %d of %d", __func__, hand, job->res.n_hands);
    return hamer_hand_obj(hm_state_model(job->state), &job->hands[hand], obj, len);
}
