/* camera.c - HaMeR's weak-perspective camera as a perspective one.
 *
 * The head predicts pred_cam = (s, tx, ty) for a 256-pixel crop seen by a
 * focal length of 5000 px. The equivalent camera translation puts the hand
 * at depth tz = 2 f / (256 s): pred_cam_t = (tx, ty, 2*5000/(256*s + 1e-9)).
 * 2D keypoints are the perspective projection of keypoints_3d + pred_cam_t
 * with focal 5000/256 and principal point 0 (normalised crop units;
 * pixels = 256 k + 128). Float32, as the PyTorch model computes it.
 */
#include <math.h>
#include "model/model.h"

void hm_camera_cam_t(const float *pred_cam, float *cam_t) {
    cam_t[0] = pred_cam[1];
    cam_t[1] = pred_cam[2];
    cam_t[2] = 2.0f * HM_FOCAL / ((float)HAMER_CROP_H * pred_cam[0] + 1e-9f);
}

void hm_camera_project(const float *kp3d, const float *cam_t, float *kp2d) {
    const float f = HM_FOCAL / (float)HAMER_CROP_H;
    for (int k = 0; k < HM_NKP; k++) {
        float x = kp3d[3 * k] + cam_t[0], y = kp3d[3 * k + 1] + cam_t[1], z = kp3d[3 * k + 2] + cam_t[2];
        kp2d[2 * k] = f * (x / z);
        kp2d[2 * k + 1] = f * (y / z);
    }
}

float hm_camera_focal_full(int W, int H) { return HM_FOCAL / (float)HAMER_CROP_H * (float)(W > H ? W : H); }

/* Crop camera -> full-image camera, as HaMeR's demo (cam_crop_to_full):
 * the crop's weak-perspective camera (s, tx, ty) seen through a focal length
 * of 5000/256 * max(W, H) for the whole image. Left-hand crops were mirrored,
 * so tx is negated first. Float32 throughout, like the demo. */
void hm_camera_full(const float *pred_cam, int is_right, float cx, float cy, float box_size, int W, int H,
                    float *cam_t_full, float *focal) {
    float s = pred_cam[0], tx = is_right ? pred_cam[1] : -pred_cam[1], ty = pred_cam[2];
    float f = hm_camera_focal_full(W, H);
    float bs = box_size * s + 1e-9f;
    cam_t_full[0] = 2.0f * (cx - (float)W / 2.0f) / bs + tx;
    cam_t_full[1] = 2.0f * (cy - (float)H / 2.0f) / bs + ty;
    cam_t_full[2] = 2.0f * f / bs;
    *focal = f;
}

/* Full-image pixels of n points (camera frame = points + cam_t), principal
 * point at the image centre. */
void hm_camera_project_full(const float *pts, int n, const float *cam_t, float focal, int W, int H, float *px) {
    for (int k = 0; k < n; k++) {
        float x = pts[3 * k] + cam_t[0], y = pts[3 * k + 1] + cam_t[1], z = pts[3 * k + 2] + cam_t[2];
        px[2 * k] = focal * (x / z) + (float)W / 2.0f;
        px[2 * k + 1] = focal * (y / z) + (float)H / 2.0f;
    }
}

/* Rotation matrix (row-major) -> axis-angle vector (angle * unit axis), in
 * double; stable near 0 and near pi. */
void hm_rotmat_to_axis_angle(const float *Rf, float *aa) {
    double R[9];
    for (int i = 0; i < 9; i++) R[i] = Rf[i];
    double c = (R[0] + R[4] + R[8] - 1.0) / 2.0;
    c = c > 1 ? 1 : c < -1 ? -1 : c;
    double th = acos(c);
    double v[3] = {R[7] - R[5], R[2] - R[6], R[3] - R[1]};
    double sn = sin(th);
    if (th < 1e-6) {
        /* R ~ I + [w]x: the vector part is the axis-angle itself. */
        for (int i = 0; i < 3; i++) aa[i] = (float)(v[i] / 2.0);
        return;
    }
    if (M_PI - th > 1e-4) {
        for (int i = 0; i < 3; i++) aa[i] = (float)(v[i] * th / (2.0 * sn));
        return;
    }
    /* Near pi: axis from the symmetric part, R + I = 2 a a^T (+ O(pi - th)). */
    double d[3] = {R[0], R[4], R[8]};
    int k = d[0] >= d[1] && d[0] >= d[2] ? 0 : d[1] >= d[2] ? 1 : 2;
    double a[3];
    a[k] = sqrt(fmax((d[k] + 1.0) / 2.0, 0.0));
    for (int j = 0; j < 3; j++)
        if (j != k) a[j] = (R[3 * k + j] + R[3 * j + k]) / (4.0 * a[k]);
    double n = sqrt(a[0] * a[0] + a[1] * a[1] + a[2] * a[2]);
    /* Sign: agree with the (small) antisymmetric part when it is usable. */
    double dot = a[0] * v[0] + a[1] * v[1] + a[2] * v[2];
    double sg = dot < 0 ? -1.0 : 1.0;
    for (int i = 0; i < 3; i++) aa[i] = (float)(sg * a[i] / n * th);
}
