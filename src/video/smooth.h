/* video/smooth.h - temporal smoothing of one tracked hand's results: the
 * One Euro filter (Casiez, Roussel, Vogel, CHI 2012) on positions and on
 * rotations as unit quaternions, and the track's shape fixed to the median
 * of its betas (include/hamer.h states the formulas and defaults).
 *
 * State is fixed-size (no allocation per frame); hm_smooth_hand on a
 * fresh (zeroed or reset) state passes the hand through and starts the
 * filters from it. */
#ifndef HM_VIDEO_SMOOTH_H
#define HM_VIDEO_SMOOTH_H

#include "hamer.h"

#define HM_SMOOTH_MAX_BETAS 256 /* hamer_tracker_params.betas_frames limit */

/* Filtered scalars of one hand, in this order: cam_t_full (3),
 * keypoints_3d (63), vertices (2334), keypoints_2d (42), the 16
 * rotations as quaternions (64). */
#define HM_SMOOTH_N_CAM 3
#define HM_SMOOTH_N_KP3 (HAMER_N_KP * 3)
#define HM_SMOOTH_N_VERT (HAMER_N_VERTS * 3)
#define HM_SMOOTH_N_KP2 (HAMER_N_KP * 2)
#define HM_SMOOTH_N_QUAT (16 * 4)
#define HM_SMOOTH_N \
    (HM_SMOOTH_N_CAM + HM_SMOOTH_N_KP3 + HM_SMOOTH_N_VERT + HM_SMOOTH_N_KP2 + HM_SMOOTH_N_QUAT)

/* Metres are divided by this before beta weighs their speed. */
#define HM_SMOOTH_METRE_SCALE 0.1

typedef struct {
    int started;          /* the filters hold a previous value */
    double t_prev;
    double x[HM_SMOOTH_N];  /* filtered values */
    double dx[HM_SMOOTH_N]; /* filtered speeds (units per second) */
    int nbetas;           /* raw betas collected (at most betas_frames) */
    float betas[HM_SMOOTH_MAX_BETAS][10];
} hm_smooth_state;

typedef struct {
    double min_cutoff, beta, d_cutoff; /* Hz, 1, Hz */
    int betas_frames, betas_min;
} hm_smooth_opts;

/* Forget the filters and the betas (a new track, or one whose side flipped). */
void hm_smooth_reset(hm_smooth_state *s);

/* The smoothed hand at time t (seconds, after the state's previous time)
 * into out (may alias raw). raw must have a result (ok = 1); fields not
 * filtered (box, pred_cam, crop, detection, ...) are copied. */
void hm_smooth_hand(hm_smooth_state *s, const hm_smooth_opts *o, double t, const hamer_hand *raw, hamer_hand *out);

/* One Euro step of one scalar (exposed for the tests): x the raw value,
 * *xs / *dxs the filter's value and speed (updated), dt > 0, scale > 0. */
double hm_one_euro(double x, double *xs, double *dxs, double dt, double scale, const hm_smooth_opts *o);

/* Row-major rotation matrix <-> unit quaternion (w, x, y, z). */
void hm_rotmat_to_quat(const float R[9], double q[4]);
void hm_quat_to_rotmat(const double q[4], float R[9]);

#endif
