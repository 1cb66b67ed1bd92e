/* camera_fit.h - a hand placed in the photo's own camera: the focal length
 * (given, EXIF, or the model's), and the translation that projects the
 * model's 3D keypoints onto its 2D ones through that camera. */
#ifndef HM_CAMERA_FIT_H
#define HM_CAMERA_FIT_H

#include "hamer.h"

/* The focal length of a W x H photo's camera from hamer_predict_params
 * (focal_px, else fov_deg; both 0: the model's own,
 * hm_camera_focal_full): HAMER_FOCAL_GIVEN or HAMER_FOCAL_DEFAULT into
 * *source. HM_E_ARG (message set) for a value out of its range. */
int hm_focal_resolve(const hamer_predict_params *p, int W, int H, double *focal, hamer_focal_source *source);

/* The translation t that puts n points (pts + t, camera frame) where the
 * pixels px are, through a pinhole of focal length f and principal point
 * (cx, cy): the linear least squares of u (Z + tz) = f (X + tx) + cx (Z +
 * tz) (and v likewise) over the points, then Gauss-Newton steps on the
 * pixel residuals (each step kept only when it lowers the sum of squares).
 * guess (may be NULL) is where to start when the linear solution puts a
 * point at or behind the camera. 0 with t, the mean and the largest pixel
 * distance set; HM_E_ARG when no translation puts every point in front of
 * the camera (a degenerate input), t then the guess (or 0). */
int hm_cam_fit(const double *pts, const double *px, int n, double f, double cx, double cy, const double *guess,
               double t[3], double *err_mean, double *err_max);

/* The camera fields of a hand with a result (keypoints_3d, keypoints_2d
 * and cam_t_full set; W x H the image): focal_px / focal_source as given,
 * the principal point at the image centre, cam_t solved by hm_cam_fit
 * (its guess cam_t_full with the depth scaled by focal / focal_length),
 * keypoints_3d_cam, the reprojection errors. */
void hm_hand_camera(hamer_hand *h, int W, int H, double focal, hamer_focal_source source);
/* keypoints_3d_cam and the reprojection errors again from keypoints_3d,
 * keypoints_2d, cam_t and the camera (after a filter changed them). */
void hm_hand_camera_refresh(hamer_hand *h);

#endif
