/* track/smooth.h - temporal smoothing of one tracked hand's results: the
 * One Euro filter (Casiez, Roussel, Vogel, CHI 2012) on positions and, on
 * the rotation group, on the 16 rotations, and the track's shape fixed to
 * the median of its betas (include/hamer.h states the formulas and
 * defaults).
 *
 * State is fixed-size (no allocation per frame); hm_smooth_hand on a
 * fresh (zeroed or reset) state passes the hand through and starts the
 * filters from it. */
#ifndef HM_VIDEO_SMOOTH_H
#define HM_VIDEO_SMOOTH_H

#include "hamer.h"

#define HM_SMOOTH_MAX_BETAS 256 /* hamer_tracker_params.betas_frames limit */

/* Filtered scalars of one hand, in this order: cam_t_full (3), cam_t (3),
 * keypoints_3d (63), vertices (2334), keypoints_2d (42). The 16 rotations
 * are filtered on their own (hm_one_euro_rot). */
#define HM_SMOOTH_N_CAM 6
#define HM_SMOOTH_N_KP3 (HAMER_N_KP * 3)
#define HM_SMOOTH_N_VERT (HAMER_N_VERTS * 3)
#define HM_SMOOTH_N_KP2 (HAMER_N_KP * 2)
#define HM_SMOOTH_N (HM_SMOOTH_N_CAM + HM_SMOOTH_N_KP3 + HM_SMOOTH_N_VERT + HM_SMOOTH_N_KP2)

/* Metres are divided by this before beta weighs their speed. */
#define HM_SMOOTH_METRE_SCALE 0.1

typedef struct {
    int started;          /* the filters hold a previous value */
    double t_prev;
    double x[HM_SMOOTH_N];  /* filtered values */
    double dx[HM_SMOOTH_N]; /* filtered speeds (units per second) */
    double q[16][4];        /* filtered rotations (unit quaternions w, x, y, z) */
    double w[16][3];        /* filtered angular velocities (rad/s, in the filtered rotation's frame) */
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

/* One One Euro step of a rotation on the rotation group: q the raw
 * rotation, *qs / ws the filter's rotation and angular velocity (updated),
 * dt > 0. The difference is d = log(qs^-1 q) (a rotation vector), the
 * speed d / dt filtered at d_cutoff, the cutoff min_cutoff + beta |speed|
 * (rad/s), and the step qs . exp(a(fc) d): the geodesic (slerp) form of
 * xs += a (x - xs), always a unit quaternion, independent of q's sign. */
void hm_one_euro_rot(const double q[4], double qs[4], double ws[3], double dt, const hm_smooth_opts *o);

#endif
