/* camera.c - HaMeR's weak-perspective camera as a perspective one.
 *
 * The head predicts pred_cam = (s, tx, ty) for a 256-pixel crop seen by a
 * focal length of 5000 px. The equivalent camera translation puts the hand
 * at depth tz = 2 f / (256 s): pred_cam_t = (tx, ty, 2*5000/(256*s + 1e-9)).
 * 2D keypoints are the perspective projection of keypoints_3d + pred_cam_t
 * with focal 5000/256 and principal point 0 (normalised crop units;
 * pixels = 256 k + 128). Float32, as the PyTorch model computes it.
 */
#include "model.h"

void hm_camera_cam_t(const float *pred_cam, float *cam_t) {
    cam_t[0] = pred_cam[1];
    cam_t[1] = pred_cam[2];
    cam_t[2] = 2.0f * 5000.0f / (256.0f * pred_cam[0] + 1e-9f);
}

void hm_camera_project(const float *kp3d, const float *cam_t, float *kp2d) {
    const float f = 5000.0f / 256.0f;
    for (int k = 0; k < HM_NKP; k++) {
        float x = kp3d[3 * k] + cam_t[0], y = kp3d[3 * k + 1] + cam_t[1], z = kp3d[3 * k + 2] + cam_t[2];
        kp2d[2 * k] = f * (x / z);
        kp2d[2 * k + 1] = f * (y / z);
    }
}
