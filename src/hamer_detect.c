/* hamer_detect.c - the public API of hand detection (include/hamer.h):
 * argument and handle checks, then src/detect/. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/cpu.h"
#include "core/pool.h"
#include "core/util.h"
#include "detect/detect.h"
#include "format/image.h"
#include "hamer.h"
#include "hamer_impl.h"
#include "pipeline/result_json.h"
#include "render/draw.h"
#include "render/overlay.h"

/* ---- hand detection ---- */



hamer_detector_params hamer_detector_default_params(void) {
    hamer_detector_params p = {.dir = NULL, .lite = false, .body = HAMER_BODY_AUTO, .proposals = HAMER_PROPOSALS_AUTO};
    return p;
}

hamer_detect_params hamer_detect_default_params(void) {
    hm_det_opts o;
    hm_det_opts_default(&o);
    hamer_detect_params p = {.max_hands = o.max_hands, .min_score = o.min_palm, .min_presence = o.min_presence,
                             .tiles = true, .body = HAMER_BODY_AUTO, .body_boxes = true,
                             .proposals = HAMER_PROPOSALS_AUTO};
    return p;
}

hamer_detector *hamer_detector_load(const hamer_detector_params *params) {
    hamer_detector_params p = params ? *params : hamer_detector_default_params();
    if (HM_CHECK_RESERVED(&p, "hamer_detector_params")) return NULL;
    hamer_detector *d = calloc(1, sizeof *d);
    if (!d) {
        hm_err(HM_E_NOMEM, "%s: out of memory", __func__);
        return NULL;
    }
    d->lite = p.lite;
    if (p.body != HAMER_BODY_AUTO && p.body != HAMER_BODY_ON && p.body != HAMER_BODY_OFF) {
        hm_err(HM_E_ARG, "%s: body %d is not HAMER_BODY_AUTO, _ON or _OFF", __func__, (int)p.body);
        free(d);
        return NULL;
    }
    if (p.proposals != HAMER_PROPOSALS_AUTO && p.proposals != HAMER_PROPOSALS_ON && p.proposals != HAMER_PROPOSALS_OFF) {
        hm_err(HM_E_ARG, "%s: proposals %d is not HAMER_PROPOSALS_AUTO, _ON or _OFF", __func__, (int)p.proposals);
        free(d);
        return NULL;
    }
    d->body_mode = p.body;
    d->props_mode = p.proposals;
    if (hm_det_find_dir(p.dir, d->lite, d->dir, sizeof d->dir) || hm_det_model_load(d->dir, d->lite, &d->m)) {
        free(d);
        return NULL;
    }
    if (p.body != HAMER_BODY_OFF) {
        /* AUTO: missing body models mean the palm pass only (the detector's
         * description says so); a malformed one is still an error */
        int rc = hm_det_model_load_body(d->m, d->dir);
        if (rc == HM_E_IO && p.body == HAMER_BODY_AUTO) {
            hm_errclear();
        } else if (rc) {
            hamer_detector_free(d);
            return NULL;
        } else {
            d->body = 1;
        }
    }
    if (p.proposals != HAMER_PROPOSALS_OFF) {
        /* AUTO: the hand-box model when installed and the body models (its
         * re-crop) are loaded; ON: both required */
        int rc = d->body || p.proposals == HAMER_PROPOSALS_ON ? hm_det_model_load_proposals(d->m, d->dir) : HM_E_IO;
        if ((rc == HM_E_IO || (rc == HM_E_ARG && !d->body)) && p.proposals == HAMER_PROPOSALS_AUTO) {
            hm_errclear();
        } else if (rc) {
            hamer_detector_free(d);
            return NULL;
        } else {
            d->props = 1;
        }
    }
    return d;
}

int hamer_detector_get_proposals(const hamer_detector *d) {
    if (!d) return hm_err(HM_E_ARG, "%s: detector is NULL", __func__);
    return d->props;
}

void hamer_detector_free(hamer_detector *d) {
    if (!d) return;
    hm_det_model_free(d->m);
    free(d);
}

int hamer_detector_get_body(const hamer_detector *d) {
    if (!d) return hm_err(HM_E_ARG, "%s: detector is NULL", __func__);
    return d->body;
}

const char *hamer_detector_get_dir(const hamer_detector *d) {
    if (!d) {
        hm_err(HM_E_ARG, "%s: detector is NULL", __func__);
        return NULL;
    }
    return d->dir;
}

hamer_detect_state *hamer_detect_state_new(const hamer_detector *d, int n_threads) {
    if (!d || n_threads < 0 || n_threads > 1024) {
        hm_err(HM_E_ARG, "%s: bad arguments (detector %p, n_threads %d)", __func__, (const void *)d, n_threads);
        return NULL;
    }
    if (n_threads == 0) n_threads = hm_cpu_online();
    hamer_detect_state *st = calloc(1, sizeof *st);
    if (!st) {
        hm_err(HM_E_NOMEM, "%s: out of memory", __func__);
        return NULL;
    }
    st->d = d;
    if (hm_det_state_new(d->m, &st->s) || hm_det_state_reserve(st->s, n_threads) ||
        !(st->pool = hm_pool_create(n_threads))) {
        hamer_detect_state_free(st);
        return NULL;
    }
    return st;
}

void hamer_detect_state_free(hamer_detect_state *st) {
    if (!st) return;
    hm_det_state_free(st->s);
    hm_pool_destroy(st->pool);
    free(st);
}

/* Public parameters -> the pipeline's options (defaults for the rest). */
static int det_opts(const hamer_detect_params *p, hm_det_opts *o) {
    hm_det_opts_default(o);
    if (p) {
        if (HM_CHECK_RESERVED(p, "hamer_detect_params")) return HM_E_ARG;
        if (p->max_hands < 1 || p->max_hands > HAMER_MAX_HANDS)
            return hm_err(HM_E_ARG, "detect: max_hands %d outside 1..%d", p->max_hands, HAMER_MAX_HANDS);
        o->max_hands = p->max_hands;
        o->min_palm = p->min_score;
        o->min_presence = p->min_presence;
        if (!p->tiles) o->n_levels = 0;
        switch (p->body) {
        case HAMER_BODY_AUTO: o->body = HM_DET_BODY_AUTO; break;
        case HAMER_BODY_ON: o->body = HM_DET_BODY_ON; break;
        case HAMER_BODY_OFF: o->body = HM_DET_BODY_OFF; break;
        default: return hm_err(HM_E_ARG, "detect: body %d is not HAMER_BODY_AUTO, _ON or _OFF", (int)p->body);
        }
        o->body_boxes = p->body_boxes;
        switch (p->proposals) {
        case HAMER_PROPOSALS_AUTO: o->proposals = HM_DET_BODY_AUTO; break;
        case HAMER_PROPOSALS_ON: o->proposals = HM_DET_BODY_ON; break;
        case HAMER_PROPOSALS_OFF: o->proposals = HM_DET_BODY_OFF; break;
        default: return hm_err(HM_E_ARG, "detect: proposals %d is not HAMER_PROPOSALS_AUTO, _ON or _OFF", (int)p->proposals);
        }
    }
    return hm_det_opts_check(o);
}

int hamer_detect(hamer_detect_state *st, const uint8_t *rgb, int w, int h, const hamer_detect_params *params,
                 hamer_detection *out, int max, double *detect_ms) {
    if (!st || !rgb || w < 1 || h < 1 || max < 0 || (max > 0 && !out))
        return hm_err(HM_E_ARG, "%s: bad arguments (state %p, image %dx%d, max %d)", __func__, (void *)st, w, h, max);
    hm_det_opts o;
    int rc = det_opts(params, &o), n = 0;
    if (rc) return rc;
    if (o.body == HM_DET_BODY_ON && !st->d->body)
        return hm_err(HM_E_ARG, "detect: the body pass is on but its models are not loaded (%s; bash "
                      "scripts/get_detector.sh installs them)",
                      st->d->body_mode == HAMER_BODY_OFF ? "the detector was loaded with body off" : "not installed");
    if (o.proposals == HM_DET_BODY_ON && !st->d->props)
        return hm_err(HM_E_ARG, "detect: the proposal pass is on but its model is not loaded (%s; bash "
                      "scripts/get_detector.sh installs it)",
                      st->d->props_mode == HAMER_PROPOSALS_OFF ? "the detector was loaded with proposals off"
                      : !st->d->body ? "it needs the body models, which are not loaded" : "not installed");
    hm_det_hand hands[HM_DET_MAX_HANDS];
    hm_det_stats stats;
    double t0 = hm_now();
    rc = hm_det_run(st->s, rgb, w, h, &o, st->pool, hands, max < HM_DET_MAX_HANDS ? max : HM_DET_MAX_HANDS, &n,
                    &stats);
    if (detect_ms) *detect_ms = 1e3 * (hm_now() - t0);
    if (rc) return rc;
    for (int i = 0; i < n; i++) {
        hamer_detection *d = &out[i];
        memcpy(d->box.bbox, hands[i].box, sizeof d->box.bbox);
        d->box.is_right = hands[i].is_right;
        d->score = hands[i].palm_score, d->presence = hands[i].presence, d->handedness = hands[i].handedness;
        memcpy(d->landmarks, hands[i].landmarks, sizeof d->landmarks);
        d->pass = hands[i].level;
        d->source = hands[i].pass == HM_DET_PASS_BODY        ? HAMER_SOURCE_BODY
                    : hands[i].pass == HM_DET_PASS_KEYPOINTS ? HAMER_SOURCE_BODY_KEYPOINTS
                    : hands[i].pass == HM_DET_PASS_PROPOSAL  ? HAMER_SOURCE_PROPOSAL
                                                             : HAMER_SOURCE_PALM;
        d->body = (hands[i].passes >> HM_DET_PASS_BODY) & 1u || d->source == HAMER_SOURCE_BODY_KEYPOINTS;
        d->person = d->body ? hands[i].person : -1;
    }
    return n;
}

int hamer_predict_detections(hamer_state *st, const uint8_t *rgb, int w, int h, const hamer_detection *dets, int n,
                             const hamer_predict_params *params, hamer_hand *hands, hamer_timings *timings) {
    if (!st || n < 0 || (n > 0 && (!dets || !hands))) return hm_err(HM_E_ARG, "%s: bad arguments", __func__);
    if (n > HAMER_MAX_HANDS) return hm_err(HM_E_ARG, "%s: %d hands, at most %d per image", __func__, n, HAMER_MAX_HANDS);
    hamer_box boxes[HAMER_MAX_HANDS];
    memset(boxes, 0, sizeof boxes);
    for (int i = 0; i < n; i++) boxes[i] = dets[i].box;
    int rc = hamer_predict(st, rgb, w, h, boxes, n, params, hands, timings);
    if (rc) return rc;
    for (int i = 0; i < n; i++) {
        __typeof__(hands[i].detection) *d = &hands[i].detection;
        d->detected = 1;
        d->score = dets[i].score, d->presence = dets[i].presence, d->handedness = dets[i].handedness;
        memcpy(d->landmarks, dets[i].landmarks, sizeof d->landmarks);
        d->pass = dets[i].pass;
        d->source = dets[i].source, d->body = dets[i].body, d->person = dets[i].person;
    }
    return HAMER_OK;
}

/* The detector's "body" line: whether the body pass runs, and why not. */
static const char *hm_body_desc(const hamer_detector *d, const hamer_detect_params *p) {
    const int mode = p ? p->body : HAMER_BODY_AUTO, tiles = p ? p->tiles : 1;
    if (!d->body)
        return d->body_mode == HAMER_BODY_OFF ? "off (not loaded)"
                                             : "off: models not installed, palm pass only (bash scripts/get_detector.sh)";
    if (mode == HAMER_BODY_OFF) return "off";
    if (mode == HAMER_BODY_ON) return "on";
    return tiles ? "auto: with the tiles, when the palm pass found fewer than 2 hands" : "auto: off (single pass)";
}

/* The detector's "proposals" line: whether the proposal pass runs, and why not. */
static const char *hm_proposals_desc(const hamer_detector *d, const hamer_detect_params *p) {
    const int mode = p ? p->proposals : HAMER_PROPOSALS_AUTO, tiles = p ? p->tiles : 1;
    if (!d->props)
        return d->props_mode == HAMER_PROPOSALS_OFF ? "off (not loaded)"
               : !d->body ? "off: it needs the body pass's models, not loaded"
                          : "off: model not installed (bash scripts/get_detector.sh)";
    if (mode == HAMER_PROPOSALS_OFF) return "off";
    if (mode == HAMER_PROPOSALS_ON) return "on";
    return tiles ? "auto: with the tiles, when the other passes found fewer than 2 hands" : "auto: off (single pass)";
}

char *hamer_detections_json(int w, int h, const hamer_detection *dets, int n, const hamer_detector *detector,
                            const hamer_detect_params *params, double detect_ms) {
    if (w < 1 || h < 1 || n < 0 || (n > 0 && !dets)) {
        hm_err(HM_E_ARG, "%s: bad arguments", __func__);
        return NULL;
    }
    if (params && HM_CHECK_RESERVED(params, "hamer_detect_params")) return NULL;
    return hm_detections_json(w, h, dets, n, detector ? detector->dir : NULL, detector ? detector->lite : 0,
                              params ? params->tiles : 1, detector ? hm_body_desc(detector, params) : NULL,
                              detector ? hm_proposals_desc(detector, params) : NULL, detect_ms);
}

int hamer_render_detections_png(const uint8_t *rgb, int w, int h, const hamer_detection *dets, int n, uint8_t **png,
                                 size_t *len) {
    if (!rgb || w < 1 || h < 1 || n < 0 || (n > 0 && !dets) || !png || !len)
        return hm_err(HM_E_ARG, "%s: bad arguments", __func__);
    if ((double)w * h > HM_IMAGE_MAX_PIXELS) return hm_err(HM_E_ARG, "%s: image of %dx%d is too large", __func__, w, h);
    hm_image img = {w, h, hm_alloc((size_t)w * h * 3)};
    if (!img.rgb) return HM_E_NOMEM;
    memcpy(img.rgb, rgb, (size_t)w * h * 3);
    /* Marks scale with the picture so they stay visible on large photos. */
    float lw = (w > h ? w : h) / 400.0f;
    lw = lw < 1.5f ? 1.5f : lw;
    for (int i = 0; i < n; i++) {
        static const uint8_t right[3] = {40, 220, 60}, left[3] = {255, 150, 20}, joint[3] = {240, 30, 30};
        const uint8_t *c = dets[i].box.is_right ? right : left;
        const float *b = dets[i].box.bbox, *L = dets[i].landmarks;
        const float corner[5][2] = {{b[0], b[1]}, {b[2], b[1]}, {b[2], b[3]}, {b[0], b[3]}, {b[0], b[1]}};
        for (int k = 0; k < 4; k++)
            hm_draw_line(img.rgb, w, h, corner[k][0], corner[k][1], corner[k + 1][0], corner[k + 1][1], lw, c);
        if (dets[i].source == HAMER_SOURCE_BODY_KEYPOINTS) continue; /* a box, no landmarks */
        for (int k = 0; k < HM_DRAW_HAND_BONES; k++) {
            const float *p = L + 3 * hm_draw_hand_bones[k][0], *q = L + 3 * hm_draw_hand_bones[k][1];
            hm_draw_line(img.rgb, w, h, p[0], p[1], q[0], q[1], lw, c);
        }
        for (int k = 0; k < 21; k++) hm_draw_dot(img.rgb, w, h, L[3 * k], L[3 * k + 1], 1.2f * lw, joint);
    }
    int rc = hm_image_encode_png(&img, png, len);
    hm_image_free(&img);
    return rc;
}

void hamer_free(void *p) { free(p); }
