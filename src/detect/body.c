/* body.c - the body pass (detect/body.h): loading Holistic's models and
 * running pose detection -> pose landmarks -> hand rectangles -> hand
 * re-crop -> hand landmarks on one image. The arithmetic of each step is
 * in pose.c. */
#include <math.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/fileio.h"
#include "core/util.h"
#include "detect/body.h"
#include "detect/det_internal.h"
#include "format/image.h"
#include "tflite/tflite.h"

struct hm_body_model {
    hm_tfl_model *det, *lm, *recrop;
    int det_boxes, det_scores;      /* output indices */
    int lm_points, lm_flag, lm_heat;
    float anchors[HM_POSE_ANCHORS][2];
};

struct hm_body_state {
    const hm_body_model *m;
    hm_tfl_state *det, *lm, *recrop;
    hm_palm_det dec[HM_POSE_ANCHORS], nms[HM_POSE_ANCHORS];
    int idx[HM_POSE_ANCHORS];
};

void hm_body_opts_default(hm_body_opts *o) {
    memset(o, 0, sizeof *o);
    o->max_persons = 1;
    o->min_pose = 0.5f;
    o->min_pose_presence = 0.5f;
    o->min_wrist_visibility = 0.1f;
    o->min_presence = 0.5f;
}

static int in01(float v) { return v >= 0.0f && v <= 1.0f; }

int hm_body_opts_check(const hm_body_opts *o) {
    if (o->max_persons < 1 || o->max_persons > HM_BODY_MAX_PERSONS)
        return hm_err(HM_E_ARG, "max_persons %d out of range 1..%d", o->max_persons, HM_BODY_MAX_PERSONS);
    if (!in01(o->min_pose) || !in01(o->min_pose_presence) || !in01(o->min_wrist_visibility) || !in01(o->min_presence))
        return hm_err(HM_E_ARG, "body pass thresholds must lie in [0,1] (pose %g, pose presence %g, wrist visibility "
                      "%g, hand presence %g)", o->min_pose, o->min_pose_presence, o->min_wrist_visibility,
                      o->min_presence);
    return HM_OK;
}

static long numel(const hm_tfl_shape *s) {
    long n = 1;
    for (int i = 0; i < s->ndim; i++) n *= s->dims[i];
    return n;
}

/* One [1,n,n,3] input; returns HM_OK or HM_E_SHAPE naming the model. */
static int check_input(const hm_tfl_model *m, int n, const char *path, const char *what) {
    hm_tfl_shape s;
    if (hm_tfl_n_inputs(m) != 1 || hm_tfl_input_shape(m, 0, &s) || s.ndim != 4 || s.dims[0] != 1 || s.dims[1] != n ||
        s.dims[2] != n || s.dims[3] != 3)
        return hm_err(HM_E_SHAPE, "%s: not %s (expected one [1,%d,%d,3] input)", path, what, n, n);
    return HM_OK;
}

/* The output of m with `count` values (the first such), or -1. */
static int output_of(const hm_tfl_model *m, long count) {
    for (int i = 0; i < hm_tfl_n_outputs(m); i++) {
        hm_tfl_shape s;
        if (!hm_tfl_output_shape(m, i, &s) && numel(&s) == count) return i;
    }
    return -1;
}

int hm_body_model_load_files(const char *det_path, const char *lm_path, const char *recrop_path, hm_body_model **out) {
    if (!out || !det_path || !lm_path || !recrop_path) return hm_err(HM_E_ARG, "hm_body_model_load_files: NULL argument");
    *out = NULL;
    hm_body_model *m = calloc(1, sizeof *m);
    if (!m) return hm_err(HM_E_NOMEM, "out of memory loading the body pass models");
    int rc = hm_tfl_load(det_path, &m->det);
    if (!rc) rc = check_input(m->det, HM_POSE_SIZE, det_path, "the pose detector");
    if (!rc) {
        m->det_boxes = output_of(m->det, (long)HM_POSE_ANCHORS * HM_POSE_COORDS);
        m->det_scores = output_of(m->det, HM_POSE_ANCHORS);
        if (m->det_boxes < 0 || m->det_scores < 0)
            rc = hm_err(HM_E_SHAPE, "%s: not the pose detector (expected outputs [1,2254,12] and [1,2254,1])", det_path);
    }
    if (!rc) rc = hm_tfl_load(lm_path, &m->lm);
    if (!rc) rc = check_input(m->lm, HM_POSE_LM_SIZE, lm_path, "the pose landmark model");
    if (!rc) {
        m->lm_points = output_of(m->lm, HM_POSE_LM * 5);
        m->lm_flag = output_of(m->lm, 1);
        m->lm_heat = output_of(m->lm, (long)HM_POSE_HEATMAP * HM_POSE_HEATMAP * HM_POSE_LM);
        if (m->lm_points < 0 || m->lm_flag < 0 || m->lm_heat < 0)
            rc = hm_err(HM_E_SHAPE, "%s: not the pose landmark model (expected outputs of 195 and 1 values and a "
                        "[1,64,64,39] heatmap)", lm_path);
    }
    if (!rc) rc = hm_tfl_load(recrop_path, &m->recrop);
    if (!rc) rc = check_input(m->recrop, HM_RECROP_SIZE, recrop_path, "the hand re-crop model");
    if (!rc && (hm_tfl_n_outputs(m->recrop) != 1 || output_of(m->recrop, 4) != 0))
        rc = hm_err(HM_E_SHAPE, "%s: not the hand re-crop model (expected one output of 4 values)", recrop_path);
    if (rc) {
        hm_body_model_free(m);
        return rc;
    }
    hm_pose_anchors(m->anchors);
    *out = m;
    return HM_OK;
}

int hm_body_model_load(const char *dir, hm_body_model **out) {
    char d[2048], p[3][2300];
    static const char *names[3] = {"pose_detection", "pose_landmark_full", "hand_recrop"};
    if (!out) return hm_err(HM_E_ARG, "hm_body_model_load: NULL output");
    *out = NULL;
    int rc = hm_det_find_dir(dir, 0, d, sizeof d);
    if (rc) return rc;
    for (int i = 0; i < 3; i++) {
        snprintf(p[i], sizeof p[i], "%s/%s.tflite", d, names[i]);
        FILE *f = hm_fopen_regular(p[i]);
        if (!f)
            return hm_err(HM_E_IO, "body pass model %s.tflite not in %s; run scripts/get_detector.sh %s", names[i], d,
                          dir && dir[0] ? dir : "");
        fclose(f);
    }
    return hm_body_model_load_files(p[0], p[1], p[2], out);
}

void hm_body_model_free(hm_body_model *m) {
    if (!m) return;
    hm_tfl_free(m->det);
    hm_tfl_free(m->lm);
    hm_tfl_free(m->recrop);
    free(m);
}

int hm_body_state_new(const hm_body_model *m, hm_body_state **out) {
    if (!m || !out) return hm_err(HM_E_ARG, "hm_body_state_new: NULL argument");
    *out = NULL;
    hm_body_state *s = hm_alloc(sizeof *s);
    if (!s) return hm_err(HM_E_NOMEM, "out of memory for the body pass state");
    memset(s, 0, sizeof *s);
    s->m = m;
    int rc = hm_tfl_state_new(m->det, &s->det);
    if (!rc) rc = hm_tfl_state_new(m->lm, &s->lm);
    if (!rc) rc = hm_tfl_state_new(m->recrop, &s->recrop);
    if (rc) {
        hm_body_state_free(s);
        return rc;
    }
    *out = s;
    return HM_OK;
}

void hm_body_state_free(hm_body_state *s) {
    if (!s) return;
    hm_tfl_state_free(s->det);
    hm_tfl_state_free(s->lm);
    hm_tfl_state_free(s->recrop);
    hm_free(s);
}

static int valid(const hm_det_rect *r) {
    return r->w > 0 && r->h > 0 && isfinite(r->w) && isfinite(r->cx) && isfinite(r->cy) && isfinite(r->rot);
}

/* ImageToTensor of r (letterboxed to n x n) into t; [-1, 1] when signed
 * (as (v / 255) * 2 - 1), else [0, 1]. pad and the letterboxed rect out. */
static hm_det_rect crop(const uint8_t *rgb, int w, int h, hm_det_rect r, int n, int replicate, int sign, float *t,
                        float pad[4]) {
    const hm_det_rect l = hm_det_pad_roi(r, n, n, pad);
    hm_det_warp(rgb, w, h, &l, n, n, replicate, t);
    if (sign)
        for (size_t i = 0; i < (size_t)n * n * 3; i++) t[i] = t[i] * 2.0f - 1.0f;
    return l;
}

/* The axis-aligned box of a rotated rectangle. */
static void rect_box(const hm_det_rect *r, float box[4]) {
    const double c = fabs(cos(r->rot)), s = fabs(sin(r->rot));
    const double hx = (r->w * c + r->h * s) / 2, hy = (r->w * s + r->h * c) / 2;
    box[0] = (float)(r->cx - hx);
    box[1] = (float)(r->cy - hy);
    box[2] = (float)(r->cx + hx);
    box[3] = (float)(r->cy + hy);
}

int hm_body_recrop_hand(hm_body_state *s, hm_det_state *ds, const uint8_t *rgb, int w, int h, hm_det_rect big,
                        float min_presence, hm_pool *pool, hm_det_hand *out, int *ok, double *recrop_ms,
                        double *hand_ms) {
    float pad[4];
    *ok = 0;
    if (!valid(&big)) return HM_OK;
    double t0 = 1e3 * hm_now();
    const hm_det_rect lbig = crop(rgb, w, h, big, HM_RECROP_SIZE, 1, 0, hm_tfl_input(s->recrop, 0), pad);
    int rc = hm_tfl_invoke(s->recrop, pool);
    if (rc) return rc;
    const hm_det_rect roi = hm_recrop_rect(hm_tfl_output(s->recrop, 0), &lbig, pad);
    double t1 = 1e3 * hm_now();
    if (recrop_ms) *recrop_ms += t1 - t0;
    out->roi = roi;
    float lpad[4];
    hm_tfl_state *ls = ds->w[0]->lm;
    const hm_det_model *dm = ds->m;
    if (valid(&roi)) {
        const hm_det_rect lroi = crop(rgb, w, h, roi, HM_LM_SIZE, 1, 0, hm_tfl_input(ls, 0), lpad);
        if ((rc = hm_tfl_invoke(ls, pool))) return rc;
        out->presence = hm_tfl_output(ls, dm->lm_presence)[0];
        out->handedness = hm_tfl_output(ls, dm->lm_handedness)[0];
        if (out->presence >= min_presence) {
            hm_lm_project(hm_tfl_output(ls, dm->lm_landmarks), &lroi, lpad, out->landmarks);
            hm_lm_box(out->landmarks, out->box);
            *ok = 1;
            for (int k = 0; k < 4; k++) *ok &= isfinite(out->box[k]) != 0;
        }
    }
    if (hand_ms) *hand_ms += 1e3 * hm_now() - t1;
    return HM_OK;
}

/* Steps 4-6 for one side of person p. Returns HM_OK with *found set. */
static int hand_side(hm_body_state *s, hm_det_state *ds, const uint8_t *rgb, int w, int h, const hm_body_opts *o,
                     hm_pool *pool, const hm_body_person *p, int right, hm_body_hand *out, int *found,
                     hm_body_stats *st) {
    const float(*lm)[5] = p->lm;
    const int wi = right ? 16 : 15, pi = wi + 2, ii = wi + 4;
    *found = 0;
    if (!(lm[wi][3] > o->min_wrist_visibility)) return HM_OK;
    const float wr[2] = {lm[wi][0], lm[wi][1]}, pk[2] = {lm[pi][0], lm[pi][1]}, ix[2] = {lm[ii][0], lm[ii][1]};
    const hm_det_rect pose_roi = hm_pose_hand_rect(wr, pk, ix);
    const hm_det_rect big = hm_rect_transform(pose_roi, 2.7, 0.0, -0.1);
    if (!valid(&pose_roi) || !valid(&big)) return HM_OK;
    memset(out, 0, sizeof *out);
    out->is_right = right;
    out->pose_score = p->score;
    out->wrist_visibility = lm[wi][3];
    out->pose_roi = pose_roi;
    out->wrist[0] = wr[0], out->wrist[1] = wr[1];
    out->hand.is_right = right;
    out->hand.pass = HM_DET_PASS_BODY;
    out->hand.passes = 1u << HM_DET_PASS_BODY;
    out->hand.palm_score = p->score;
    *found = 1;
    int ok;
    int rc = hm_body_recrop_hand(s, ds, rgb, w, h, big, o->min_presence, pool, &out->hand, &ok, &st->recrop_ms,
                                 &st->hand_ms);
    if (rc || ok) return rc;
    /* the hand stage rejected it: the body keypoints' box alone */
    memset(out->hand.landmarks, 0, sizeof out->hand.landmarks);
    rect_box(&pose_roi, out->hand.box);
    out->body_only = 1;
    return HM_OK;
}

int hm_body_run(hm_body_state *s, hm_det_state *ds, const uint8_t *rgb, int w, int h, const hm_body_opts *opts,
                hm_pool *pool, hm_body_hand *out, int cap, int *n, hm_body_person *persons, int *np,
                hm_body_stats *stats) {
    hm_body_opts def;
    hm_body_stats st;
    memset(&st, 0, sizeof st);
    if (n) *n = 0;
    if (np) *np = 0;
    if (!s || !ds || !rgb || !n || (!out && cap > 0) || cap < 0) return hm_err(HM_E_ARG, "hm_body_run: bad arguments");
    if (w < 1 || h < 1 || w > HM_IMAGE_MAX_DIM || h > HM_IMAGE_MAX_DIM || (long long)w * h > HM_IMAGE_MAX_PIXELS)
        return hm_err(HM_E_ARG, "image %dx%d out of range for the body pass", w, h);
    if (!opts) {
        hm_body_opts_default(&def);
        opts = &def;
    }
    int rc = hm_body_opts_check(opts);
    if (rc) return rc;
    const hm_body_model *m = s->m;
    const double t_start = 1e3 * hm_now();

    /* 1. pose detection on the whole image */
    float pad[4];
    const hm_det_rect full = {0.5 * w, 0.5 * h, w, h, 0.0};
    const hm_det_rect lfull = crop(rgb, w, h, full, HM_POSE_SIZE, 0, 1, hm_tfl_input(s->det, 0), pad);
    if ((rc = hm_tfl_invoke(s->det, pool))) return rc;
    const int nd = hm_pose_decode(hm_tfl_output(s->det, m->det_boxes), hm_tfl_output(s->det, m->det_scores),
                                  m->anchors, opts->min_pose, s->dec);
    int nk = hm_palm_wnms(s->dec, nd, 0.3f, s->nms, s->idx);
    if (nk > opts->max_persons) nk = opts->max_persons;
    st.pose_ms = 1e3 * hm_now() - t_start;

    int nh = 0, npers = 0;
    for (int k = 0; k < nk; k++) {
        /* 2. the alignment rectangle; 3. pose landmarks */
        hm_palm_px px;
        hm_palm_to_image(&s->nms[k], &lfull, pad, &px);
        hm_body_person p;
        memset(&p, 0, sizeof p);
        p.score = (float)px.score;
        for (int i = 0; i < HM_POSE_KP; i++) {
            p.kp[i][0] = (float)px.kp[i][0];
            p.kp[i][1] = (float)px.kp[i][1];
        }
        for (int i = 0; i < 4; i++) p.box[i] = (float)px.box[i];
        p.roi = hm_rect_transform(hm_align_rect(px.kp[0][0], px.kp[0][1], px.kp[1][0], px.kp[1][1], 90.0), 1.25, 0, 0);
        if (!valid(&p.roi)) continue;
        double t0 = 1e3 * hm_now();
        float lpad[4];
        const hm_det_rect lroi = crop(rgb, w, h, p.roi, HM_POSE_LM_SIZE, 1, 0, hm_tfl_input(s->lm, 0), lpad);
        if ((rc = hm_tfl_invoke(s->lm, pool))) return rc;
        p.presence = hm_tfl_output(s->lm, m->lm_flag)[0];
        st.pose_lm_ms += 1e3 * hm_now() - t0;
        if (!(p.presence >= opts->min_pose_presence)) continue;
        hm_pose_project(hm_tfl_output(s->lm, m->lm_points), hm_tfl_output(s->lm, m->lm_heat), &lroi, lpad, p.lm);
        const int person = npers;
        if (persons) persons[npers] = p;
        npers++;
        /* 4-6. each side's hand */
        for (int right = 0; right < 2 && nh < cap; right++) {
            int found;
            if ((rc = hand_side(s, ds, rgb, w, h, opts, pool, &p, right, &out[nh], &found, &st))) return rc;
            if (found) out[nh++].person = person;
        }
    }
    *n = nh;
    if (np) *np = npers;
    st.persons = npers;
    st.hands = nh;
    st.total_ms = 1e3 * hm_now() - t_start;
    if (stats) *stats = st;
    return HM_OK;
}
