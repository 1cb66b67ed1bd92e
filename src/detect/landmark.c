/* landmark.c - the crops both models see (ImageToTensor's OpenCV path) and
 * the landmark post-processing of hand_landmark_cpu.pbtxt. */
#include <math.h>

#include "detect/stages.h"

/* cv::RotatedRect::points in float, as OpenCV computes them: the corners
 * that boxPoints hands to getPerspectiveTransform. */
static void box_points(const hm_det_rect *r, float p[4][2]) {
    /* MediaPipe: rotation * 180.f / M_PI, handed to RotatedRect as float */
    const float ang = (float)((double)((float)r->rot * 180.0f) / M_PI);
    const double a_rad = ang * M_PI / 180.0;
    const float b = (float)cos(a_rad) * 0.5f, a = (float)sin(a_rad) * 0.5f;
    const float cx = (float)r->cx, cy = (float)r->cy, w = (float)r->w, h = (float)r->h;
    p[0][0] = cx - a * h - b * w;
    p[0][1] = cy + b * h - a * w;
    p[1][0] = cx + a * h - b * w;
    p[1][1] = cy - b * h - a * w;
    p[2][0] = 2 * cx - p[0][0];
    p[2][1] = 2 * cy - p[0][1];
    p[3][0] = 2 * cx - p[1][0];
    p[3][1] = 2 * cy - p[1][1];
}

/* X >> 5 with floor semantics for negative X too */
static inline long floor_div32(long X) { return X >= 0 ? X / 32 : -((-X + 31) / 32); }

static inline int clampi(int v, int lo, int hi) { return v < lo ? lo : v > hi ? hi : v; }

void hm_det_warp(const uint8_t *rgb, int w, int h, const hm_det_rect *r, int ow, int oh, int replicate,
                 float *out) {
    /* corners 1 (top-left), 2 (top-right), 0 (bottom-left) go to tensor
     * (0,0), (ow,0), (0,oh); the map between them is affine up to the
     * float rounding of the corners, which warpPerspective's own solve
     * carries too */
    float p[4][2];
    box_points(r, p);
    const double ux = ((double)p[2][0] - p[1][0]) / ow, uy = ((double)p[2][1] - p[1][1]) / ow;
    const double vx = ((double)p[0][0] - p[1][0]) / oh, vy = ((double)p[0][1] - p[1][1]) / oh;
    const float inv255 = 1.0f / 255.0f;
    float unit[256]; /* u8 -> [0, 1], the same products as inline */
    for (int i = 0; i < 256; i++) unit[i] = (float)i * inv255;
    for (int v = 0; v < oh; v++) {
        for (int u = 0; u < ow; u++) {
            const double sx = p[1][0] + ux * u + vx * v, sy = p[1][1] + uy * u + vy * v;
            /* warpPerspective: X = rint(32 x), integer part X >> 5, 1/32 fraction X & 31 */
            double fx = sx * 32.0, fy = sy * 32.0;
            fx = fx < -1e9 ? -1e9 : fx > 1e9 ? 1e9 : fx;
            fy = fy < -1e9 ? -1e9 : fy > 1e9 ? 1e9 : fy;
            const long X = lrint(fx), Y = lrint(fy);
            const long x0 = floor_div32(X), y0 = floor_div32(Y);
            const int ax = (int)(X - x0 * 32), ay = (int)(Y - y0 * 32);
            const int wt[4] = {(32 - ay) * (32 - ax) * 32, (32 - ay) * ax * 32, ay * (32 - ax) * 32, ay * ax * 32};
            float *o = out + ((size_t)v * ow + u) * 3;
            if (x0 >= 0 && x0 < w - 1 && y0 >= 0 && y0 < h - 1) {
                /* all four pixels inside (most of a crop): no border rule;
                 * the weights sum to 2^15, so the sum needs no clamp */
                const uint8_t *a = rgb + ((size_t)y0 * (size_t)w + (size_t)x0) * 3, *b = a + (size_t)w * 3;
                for (int c = 0; c < 3; c++)
                    o[c] = unit[((1 << 14) + a[c] * wt[0] + a[3 + c] * wt[1] + b[c] * wt[2] + b[3 + c] * wt[3]) >> 15];
                continue;
            }
            const uint8_t *px[4] = {NULL, NULL, NULL, NULL};
            for (int k = 0; k < 4; k++) {
                long xx = x0 + (k & 1), yy = y0 + (k >> 1);
                if (replicate) {
                    xx = xx < 0 ? 0 : xx >= w ? w - 1 : xx;
                    yy = yy < 0 ? 0 : yy >= h ? h - 1 : yy;
                } else if (xx < 0 || xx >= w || yy < 0 || yy >= h) {
                    continue;
                }
                px[k] = rgb + ((size_t)yy * (size_t)w + (size_t)xx) * 3;
            }
            for (int c = 0; c < 3; c++) {
                int sum = 1 << 14;
                for (int k = 0; k < 4; k++)
                    if (px[k]) sum += px[k][c] * wt[k];
                o[c] = unit[clampi(sum >> 15, 0, 255)];
            }
        }
    }
}

void hm_lm_project(const float *raw, const hm_det_rect *roi, const float pad[4], float out[HM_DET_LANDMARKS][3]) {
    const double sx = 1.0 - pad[0] - pad[2], sy = 1.0 - pad[1] - pad[3];
    const double c = cos(roi->rot), s = sin(roi->rot);
    for (int i = 0; i < HM_DET_LANDMARKS; i++) {
        double u = raw[3 * i] / (double)HM_LM_SIZE, v = raw[3 * i + 1] / (double)HM_LM_SIZE;
        double z = raw[3 * i + 2] / (double)HM_LM_SIZE / 0.4;
        u = (u - pad[0]) / sx - 0.5;
        v = (v - pad[1]) / sy - 0.5;
        z /= sx;
        out[i][0] = (float)((c * u - s * v) * roi->w + roi->cx);
        out[i][1] = (float)((s * u + c * v) * roi->h + roi->cy);
        out[i][2] = (float)(z * roi->w);
    }
}

void hm_lm_box(const float lm[HM_DET_LANDMARKS][3], float box[4]) {
    box[0] = box[2] = lm[0][0];
    box[1] = box[3] = lm[0][1];
    for (int i = 1; i < HM_DET_LANDMARKS; i++) {
        box[0] = fminf(box[0], lm[i][0]);
        box[1] = fminf(box[1], lm[i][1]);
        box[2] = fmaxf(box[2], lm[i][0]);
        box[3] = fmaxf(box[3], lm[i][1]);
    }
}
