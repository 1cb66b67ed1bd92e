/* camera_fit.c - the hand in the photo's camera (camera_fit.h).
 *
 * HaMeR places a hand with a focal length of 5000 px for its 256-pixel
 * crop, scaled to the image (cam_t_full): nearly an orthographic camera,
 * which the translation was regressed for. Through the real focal length
 * that translation is wrong (the depth by the ratio of the focal lengths,
 * the sideways offset by the perspective the weak camera left out), so it
 * is solved again: the model's 3D keypoints (root-relative shape and pose)
 * and its 2D keypoints in the image (where it sees the hand) are kept, and
 * t is the translation that projects the first onto the second. Every
 * hand of a photo goes through the same camera, so their relative depth
 * is that of the photo.
 */
#include <math.h>
#include <string.h>

#include "core/util.h"
#include "model/model.h"
#include "pipeline/camera_fit.h"

int hm_focal_resolve(const hamer_predict_params *p, int W, int H, double *focal, hamer_focal_source *source) {
    const double longer = W > H ? W : H;
    if (!(p->focal_px >= 0 && p->focal_px <= HAMER_MAX_FOCAL))
        return hm_err(HM_E_ARG, "predict: focal_px %g out of range: a focal length in pixels in (0, %g], or 0 for none",
                      (double)p->focal_px, HAMER_MAX_FOCAL);
    if (!(p->fov_deg >= 0 && p->fov_deg < 180))
        return hm_err(HM_E_ARG, "predict: fov_deg %g out of range: a field of view in degrees in (0, 180), or 0 for none",
                      (double)p->fov_deg);
    if (p->focal_px > 0) {
        *focal = p->focal_px, *source = HAMER_FOCAL_GIVEN;
    } else if (p->fov_deg > 0) {
        *focal = 0.5 * longer / tan(0.5 * p->fov_deg * M_PI / 180.0), *source = HAMER_FOCAL_GIVEN;
    } else {
        *focal = hm_camera_focal_full(W, H), *source = HAMER_FOCAL_DEFAULT;
    }
    return HM_OK;
}

/* 3 x 3 symmetric system A x = b by Cramer's rule; 0 when A is singular
 * relative to its scale. */
static int solve3(const double A[9], const double b[3], double x[3]) {
    const double c0 = A[4] * A[8] - A[5] * A[7], c1 = A[5] * A[6] - A[3] * A[8], c2 = A[3] * A[7] - A[4] * A[6];
    const double det = A[0] * c0 + A[1] * c1 + A[2] * c2;
    const double scale = fabs(A[0] * A[4] * A[8]) + 1e-300;
    if (!(fabs(det) > 1e-14 * scale)) return 0;
    double inv[9] = {c0, A[2] * A[7] - A[1] * A[8], A[1] * A[5] - A[2] * A[4],
                     c1, A[0] * A[8] - A[2] * A[6], A[2] * A[3] - A[0] * A[5],
                     c2, A[1] * A[6] - A[0] * A[7], A[0] * A[4] - A[1] * A[3]};
    for (int i = 0; i < 3; i++) x[i] = (inv[3 * i] * b[0] + inv[3 * i + 1] * b[1] + inv[3 * i + 2] * b[2]) / det;
    return isfinite(x[0]) && isfinite(x[1]) && isfinite(x[2]);
}

/* Sum of squared pixel residuals at t; HUGE_VAL when a point is not in
 * front of the camera. */
static double sq_error(const double *pts, const double *px, int n, double f, double cx, double cy, const double t[3]) {
    double s = 0;
    for (int i = 0; i < n; i++) {
        const double z = pts[3 * i + 2] + t[2];
        if (!(z > 0)) return HUGE_VAL;
        const double du = f * (pts[3 * i] + t[0]) / z + cx - px[2 * i];
        const double dv = f * (pts[3 * i + 1] + t[1]) / z + cy - px[2 * i + 1];
        s += du * du + dv * dv;
    }
    return s;
}

int hm_cam_fit(const double *pts, const double *px, int n, double f, double cx, double cy, const double *guess,
               double t[3], double *err_mean, double *err_max) {
    /* Linear: per point [f 0 -(u-cx)] t = (u-cx) Z - f X, [0 f -(v-cy)] t = (v-cy) Z - f Y;
     * the normal equations of the 2n rows. */
    double A[9] = {0}, b[3] = {0};
    for (int i = 0; i < n; i++) {
        const double X = pts[3 * i], Y = pts[3 * i + 1], Z = pts[3 * i + 2];
        const double du = px[2 * i] - cx, dv = px[2 * i + 1] - cy;
        const double r1[3] = {f, 0, -du}, r2[3] = {0, f, -dv};
        const double b1 = du * Z - f * X, b2 = dv * Z - f * Y;
        for (int a = 0; a < 3; a++) {
            for (int c = 0; c < 3; c++) A[3 * a + c] += r1[a] * r1[c] + r2[a] * r2[c];
            b[a] += r1[a] * b1 + r2[a] * b2;
        }
    }
    double cur[3] = {0, 0, 0};
    double e = solve3(A, b, cur) ? sq_error(pts, px, n, f, cx, cy, cur) : HUGE_VAL;
    if (guess) {
        const double eg = sq_error(pts, px, n, f, cx, cy, guess);
        if (eg < e) memcpy(cur, guess, sizeof cur), e = eg;
    }
    if (!(e < HUGE_VAL)) {
        if (guess) memcpy(t, guess, 3 * sizeof *t);
        else t[0] = t[1] = t[2] = 0;
        *err_mean = *err_max = NAN;
        return hm_err(HM_E_ARG, "camera fit: no translation puts the %d keypoints in front of the camera", n);
    }
    /* Gauss-Newton on the pixel residuals, each step halved until it helps. */
    for (int it = 0; it < 20; it++) {
        double JtJ[9] = {0}, Jtr[3] = {0};
        for (int i = 0; i < n; i++) {
            const double x = pts[3 * i] + cur[0], y = pts[3 * i + 1] + cur[1], z = pts[3 * i + 2] + cur[2];
            const double ru = f * x / z + cx - px[2 * i], rv = f * y / z + cy - px[2 * i + 1];
            const double ju[3] = {f / z, 0, -f * x / (z * z)}, jv[3] = {0, f / z, -f * y / (z * z)};
            for (int a = 0; a < 3; a++) {
                for (int c = 0; c < 3; c++) JtJ[3 * a + c] += ju[a] * ju[c] + jv[a] * jv[c];
                Jtr[a] += ju[a] * ru + jv[a] * rv;
            }
        }
        double step[3];
        if (!solve3(JtJ, Jtr, step)) break;
        double lam = 1, next[3], en = HUGE_VAL;
        for (int k = 0; k < 30; k++, lam *= 0.5) {
            for (int a = 0; a < 3; a++) next[a] = cur[a] - lam * step[a];
            if ((en = sq_error(pts, px, n, f, cx, cy, next)) <= e) break;
        }
        if (!(en <= e)) break;
        const double moved = fabs(next[0] - cur[0]) + fabs(next[1] - cur[1]) + fabs(next[2] - cur[2]);
        const double size = fabs(cur[0]) + fabs(cur[1]) + fabs(cur[2]);
        memcpy(cur, next, sizeof cur), e = en;
        if (moved <= 1e-13 * size) break;
    }
    memcpy(t, cur, 3 * sizeof *t);
    double sum = 0, mx = 0;
    for (int i = 0; i < n; i++) {
        const double z = pts[3 * i + 2] + t[2];
        const double du = f * (pts[3 * i] + t[0]) / z + cx - px[2 * i];
        const double dv = f * (pts[3 * i + 1] + t[1]) / z + cy - px[2 * i + 1];
        const double d = sqrt(du * du + dv * dv);
        sum += d, mx = d > mx ? d : mx;
    }
    *err_mean = n ? sum / n : 0, *err_max = mx;
    return HM_OK;
}

void hm_hand_camera(hamer_hand *h, int W, int H, double focal, hamer_focal_source source) {
    double pts[HM_NKP * 3], px[HM_NKP * 2], t[3], em, ex;
    for (int i = 0; i < HM_NKP * 3; i++) pts[i] = h->keypoints_3d[i];
    for (int i = 0; i < HM_NKP * 2; i++) px[i] = h->keypoints_2d[i];
    const double r = h->focal_length > 0 ? focal / h->focal_length : 1.0;
    const double guess[3] = {h->cam_t_full[0], h->cam_t_full[1], h->cam_t_full[2] * r};
    h->focal_source = source;
    h->focal_px = (float)focal;
    h->principal_point[0] = (float)W / 2.0f, h->principal_point[1] = (float)H / 2.0f;
    hm_cam_fit(pts, px, HM_NKP, focal, h->principal_point[0], h->principal_point[1], guess, t, &em, &ex);
    for (int k = 0; k < 3; k++) h->cam_t[k] = (float)t[k];
    hm_hand_camera_refresh(h);
}

void hm_hand_camera_refresh(hamer_hand *h) {
    const double f = h->focal_px, cx = h->principal_point[0], cy = h->principal_point[1];
    double sum = 0, mx = 0;
    for (int i = 0; i < HM_NKP; i++) {
        double p[3];
        for (int k = 0; k < 3; k++) {
            h->keypoints_3d_cam[3 * i + k] = h->keypoints_3d[3 * i + k] + h->cam_t[k];
            p[k] = (double)h->keypoints_3d[3 * i + k] + h->cam_t[k];
        }
        const double du = f * p[0] / p[2] + cx - h->keypoints_2d[2 * i];
        const double dv = f * p[1] / p[2] + cy - h->keypoints_2d[2 * i + 1];
        const double d = sqrt(du * du + dv * dv);
        sum += d, mx = d > mx ? d : mx;
    }
    h->reproj_error = (float)(sum / HM_NKP);
    h->reproj_error_max = (float)mx;
}
