/* track.c - the detector's video mode: a hand's landmarks give the
 * rectangle of the next frame (HandLandmarksToRect + RectTransformation of
 * hand_landmark_landmarks_to_roi.pbtxt), and the landmark model runs on
 * such a rectangle without a palm pass. */
#include <math.h>
#include <string.h>
#include <time.h>

#include "core/util.h"
#include "detect/det_internal.h"
#include "format/image.h"

/* The landmark model's run state of s. States that hold one model state per
 * worker thread (HM_DET_MAX_WORKERS) keep it in their first worker. */
#ifdef HM_DET_MAX_WORKERS
static hm_tfl_state *lm_state(hm_det_state *s) { return s->w[0]->lm; }
#else
static hm_tfl_state *lm_state(hm_det_state *s) { return s->lm; }
#endif

/* The landmarks that move least with the fingers: the palm and the bases
 * of the fingers. Their rectangle is steadier than one over the tips. */
static const int steady[12] = {0, 1, 2, 3, 5, 6, 9, 10, 13, 14, 17, 18};

/* angle - 2 pi floor((angle + pi) / 2 pi): into [-pi, pi) */
static double wrap_angle(double a) { return a - 2 * M_PI * floor((a + M_PI) / (2 * M_PI)); }

hm_det_rect hm_lm_hand_roi(const float lm[HM_DET_LANDMARKS][3]) {
    /* rotation: wrist -> the mean of the middle MCP and of the index/ring
     * MCPs' midpoint, turned to point up (90 degrees) */
    const double x0 = lm[0][0], y0 = lm[0][1];
    const double x1 = 0.5 * (0.5 * ((double)lm[5][0] + lm[13][0]) + lm[9][0]);
    const double y1 = 0.5 * (0.5 * ((double)lm[5][1] + lm[13][1]) + lm[9][1]);
    const double rot = wrap_angle(M_PI / 2 - atan2(-(y1 - y0), x1 - x0));

    /* the axis-aligned centre, then the extent in the hand's own frame */
    double ax0 = INFINITY, ay0 = INFINITY, ax1 = -INFINITY, ay1 = -INFINITY;
    for (int k = 0; k < 12; k++) {
        const float *p = lm[steady[k]];
        ax0 = fmin(ax0, p[0]), ax1 = fmax(ax1, p[0]);
        ay0 = fmin(ay0, p[1]), ay1 = fmax(ay1, p[1]);
    }
    const double acx = 0.5 * (ax0 + ax1), acy = 0.5 * (ay0 + ay1);
    const double c = cos(rot), s = sin(rot);
    double u0 = INFINITY, v0 = INFINITY, u1 = -INFINITY, v1 = -INFINITY;
    for (int k = 0; k < 12; k++) {
        const float *p = lm[steady[k]];
        const double dx = p[0] - acx, dy = p[1] - acy;
        const double u = dx * c + dy * s, v = -dx * s + dy * c; /* rotate by -rot */
        u0 = fmin(u0, u), u1 = fmax(u1, u);
        v0 = fmin(v0, v), v1 = fmax(v1, v);
    }
    const double pu = 0.5 * (u0 + u1), pv = 0.5 * (v0 + v1);
    double cx = acx + pu * c - pv * s, cy = acy + pu * s + pv * c;
    const double w = u1 - u0, h = v1 - v0;

    /* RectTransformation: shift -0.1 of the height along the hand's own y
     * (towards the fingers), square on the long side, scale 2 */
    const double shift_y = -0.1, scale = 2.0;
    cx += -h * shift_y * s;
    cy += h * shift_y * c;
    const double side = (w > h ? w : h) * scale;
    return (hm_det_rect){cx, cy, side, side, rot};
}

/* The landmark call of hands.c on a given rectangle: the 224x224 crop
 * (replicated border), the model, presence; the landmarks back in the
 * image and their tight box when presence >= need. */
static int landmark_on(hm_det_state *s, const uint8_t *rgb, int w, int h, const hm_det_rect *rect, float need,
                       hm_pool *pool, hm_det_stats *st, hm_det_hand *out, int *keep) {
    const hm_det_model *m = s->m;
    hm_tfl_state *lm = lm_state(s);
    float pad[4];
    *keep = 0;
    /* ValidateRoi: a degenerate rectangle gives no crop */
    if (!(rect->w > 0) || !(rect->h > 0) || !isfinite(rect->cx) || !isfinite(rect->cy) || !isfinite(rect->rot))
        return HM_OK;
    const hm_det_rect lroi = hm_det_pad_roi(*rect, HM_LM_SIZE, HM_LM_SIZE, pad);
    const double t0 = 1e3 * hm_now();
    hm_det_warp(rgb, w, h, &lroi, HM_LM_SIZE, HM_LM_SIZE, 1, hm_tfl_input(lm, 0));
    const double t1 = 1e3 * hm_now();
    int rc = hm_tfl_invoke(lm, pool);
    const double t2 = 1e3 * hm_now();
    if (rc) return rc;
    st->landmark_calls++;
    st->warp_ms += t1 - t0;
    st->landmark_ms += t2 - t1;
    out->presence = hm_tfl_output(lm, m->lm_presence)[0];
    out->handedness = hm_tfl_output(lm, m->lm_handedness)[0];
    if (!(out->presence >= need)) return HM_OK;
    hm_lm_project(hm_tfl_output(lm, m->lm_landmarks), &lroi, pad, out->landmarks);
    hm_lm_box(out->landmarks, out->box);
    out->is_right = out->handedness > 0.5f;
    out->roi = *rect;
    for (int k = 0; k < 4; k++)
        if (!isfinite(out->box[k])) return HM_OK;
    *keep = 1;
    st->post_ms += 1e3 * hm_now() - t2;
    return HM_OK;
}

int hm_det_track(hm_det_state *s, const uint8_t *rgb, int w, int h, const hm_det_rect *roi, float min_presence,
                 hm_pool *pool, hm_det_hand *out, int *found, hm_det_stats *stats) {
    if (found) *found = 0;
    if (!s || !rgb || !roi || !out || !found) return hm_err(HM_E_ARG, "hm_det_track: bad arguments");
    if (w < 1 || h < 1 || w > HM_IMAGE_MAX_DIM || h > HM_IMAGE_MAX_DIM || (long long)w * h > HM_IMAGE_MAX_PIXELS)
        return hm_err(HM_E_ARG, "image %dx%d out of range for the hand tracker", w, h);
    if (!(min_presence >= 0 && min_presence <= 1))
        return hm_err(HM_E_ARG, "hm_det_track: min_presence %g outside [0, 1]", (double)min_presence);
    hm_det_stats st;
    memset(&st, 0, sizeof st);
    memset(out, 0, sizeof *out);
    out->person = -1;
    int rc = landmark_on(s, rgb, w, h, roi, min_presence, pool, &st, out, found);
    st.hands = *found;
    if (stats) {
        stats->landmark_calls += st.landmark_calls;
        stats->warp_ms += st.warp_ms;
        stats->landmark_ms += st.landmark_ms;
        stats->post_ms += st.post_ms;
    }
    return rc;
}
