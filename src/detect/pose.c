/* pose.c - the body pass's pure stages (detect/body.h): pose anchors and
 * decoding, alignment rectangles, pose landmark projection with the
 * heatmap refinement, the hand rectangles from the pose and from the
 * re-crop model. Follows pose_detection_cpu.pbtxt,
 * pose_detection_to_roi.pbtxt, pose_landmark_by_roi_cpu.pbtxt,
 * pose_landmarks_to_roi.pbtxt and Holistic's hand_landmarks_from_pose_cpu
 * / hand_recrop_by_roi_cpu graphs. Rectangles are in image pixels; every
 * one here is square in pixels, for which MediaPipe's normalised
 * arithmetic is the same. */
#include <math.h>

#include "detect/body.h"

void hm_pose_anchors(float a[HM_POSE_ANCHORS][2]) {
    /* strides 8, 16, 32, 32, 32: layers of equal stride share a grid
     * (ceil(224 / stride) cells a side), 2 anchors per layer and cell */
    static const int grid[3] = {28, 14, 7}, per_cell[3] = {2, 2, 6};
    hm_ssd_anchors(grid, per_cell, 3, a);
}

int hm_pose_decode(const float *rb, const float *rs, const float a[HM_POSE_ANCHORS][2], float min_score,
                   hm_palm_det *out) {
    return hm_ssd_decode(rb, rs, a, HM_POSE_ANCHORS, HM_POSE_COORDS, HM_POSE_SIZE, HM_POSE_KP, min_score, out);
}

static double normalize_radians(double a) { return a - 2 * M_PI * floor((a + M_PI) / (2 * M_PI)); }

hm_det_rect hm_align_rect(double x0, double y0, double x1, double y1, double target_deg) {
    const double side = 2.0 * sqrt((x1 - x0) * (x1 - x0) + (y1 - y0) * (y1 - y0));
    const double rot = normalize_radians(target_deg * M_PI / 180.0 - atan2(-(y1 - y0), x1 - x0));
    return (hm_det_rect){x0, y0, side, side, rot};
}

hm_det_rect hm_rect_transform(hm_det_rect r, double scale, double shift_x, double shift_y) {
    if (r.rot == 0.0) {
        r.cx += r.w * shift_x;
        r.cy += r.h * shift_y;
    } else {
        const double c = cos(r.rot), s = sin(r.rot);
        r.cx += r.w * shift_x * c - r.h * shift_y * s;
        r.cy += r.w * shift_x * s + r.h * shift_y * c;
    }
    const double side = (r.w > r.h ? r.w : r.h) * scale;
    r.w = r.h = side;
    r.rot = normalize_radians(r.rot);
    return r;
}

static float sigmoidf(float x) { return 1.0f / (1.0f + expf(-x)); }

/* RefineLandmarksFromHeatmapCalculator (kernel 7, min confidence 0.5) on
 * tensor-unit landmarks; its range check is kept as written (the column
 * tested against the height; the heatmap is square). */
static void refine(float lm[HM_POSE_LM][5], const float *hm) {
    const int W = HM_POSE_HEATMAP, H = HM_POSE_HEATMAP, C = HM_POSE_LM, off = 3;
    for (int i = 0; i < HM_POSE_LM; i++) {
        const int col = (int)(lm[i][0] * W), row = (int)(lm[i][1] * H);
        if (col < 0 || col >= W || row < 0 || col >= H) continue;
        const int c0 = col - off > 0 ? col - off : 0, c1 = col + off + 1 < W ? col + off + 1 : W;
        const int r0 = row - off > 0 ? row - off : 0, r1 = row + off + 1 < H ? row + off + 1 : H;
        float sum = 0, wc = 0, wr = 0, mx = 0;
        for (int r = r0; r < r1; r++)
            for (int c = c0; c < c1; c++) {
                const float conf = sigmoidf(hm[(size_t)W * C * r + (size_t)C * c + i]);
                sum += conf;
                mx = conf > mx ? conf : mx;
                wc += (float)c * conf;
                wr += (float)r * conf;
            }
        if (mx >= 0.5f && sum > 0) {
            lm[i][0] = wc / (float)W / sum;
            lm[i][1] = wr / (float)H / sum;
        }
    }
}

/* LandmarkLetterboxRemoval + LandmarkProjection of a tensor-unit point. */
static void project(double u, double v, double z, const hm_det_rect *roi, const float pad[4], float *o) {
    const double sx = 1.0 - pad[0] - pad[2], sy = 1.0 - pad[1] - pad[3];
    const double c = cos(roi->rot), s = sin(roi->rot);
    u = (u - pad[0]) / sx - 0.5;
    v = (v - pad[1]) / sy - 0.5;
    o[0] = (float)((c * u - s * v) * roi->w + roi->cx);
    o[1] = (float)((s * u + c * v) * roi->h + roi->cy);
    o[2] = (float)(z / sx * roi->w);
}

void hm_pose_project(const float *raw, const float *heatmap, const hm_det_rect *roi, const float pad[4],
                     float out[HM_POSE_LM][5]) {
    const float s = (float)HM_POSE_LM_SIZE;
    for (int i = 0; i < HM_POSE_LM; i++) {
        const float *r = raw + 5 * i;
        out[i][0] = r[0] / s;
        out[i][1] = r[1] / s;
        out[i][2] = r[2] / s;
        out[i][3] = sigmoidf(r[3]);
        out[i][4] = sigmoidf(r[4]);
    }
    if (heatmap) refine(out, heatmap);
    for (int i = 0; i < HM_POSE_LM; i++) project(out[i][0], out[i][1], out[i][2], roi, pad, out[i]);
}

hm_det_rect hm_pose_next_roi(const float lm[HM_POSE_LM][5]) {
    const hm_det_rect r = hm_align_rect(lm[33][0], lm[33][1], lm[34][0], lm[34][1], 90.0);
    return hm_rect_transform(r, 1.25, 0.0, 0.0);
}

hm_det_rect hm_pose_hand_rect(const float wrist[2], const float pinky[2], const float index[2]) {
    /* the middle finger's knuckle, estimated (in float, as the calculator) */
    const float mx = (2.0f * index[0] + pinky[0]) / 3.0f, my = (2.0f * index[1] + pinky[1]) / 3.0f;
    const double dx = (double)mx - wrist[0], dy = (double)my - wrist[1];
    const double side = 2.0 * sqrt(dx * dx + dy * dy);
    return (hm_det_rect){mx, my, side, side, normalize_radians(M_PI / 2 - atan2(-dy, dx))};
}

hm_det_rect hm_recrop_rect(const float raw[4], const hm_det_rect *roi, const float pad[4]) {
    float p0[3], p1[3];
    const float n = (float)HM_RECROP_SIZE;
    project(raw[0] / n, raw[1] / n, 0.0, roi, pad, p0);
    project(raw[2] / n, raw[3] / n, 0.0, roi, pad, p1);
    const hm_det_rect r = hm_align_rect(p0[0], p0[1], p1[0], p1[1], -90.0);
    return hm_rect_transform(r, 1.0, 0.0, -0.1);
}
