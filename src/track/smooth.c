/* smooth.c - One Euro smoothing of a tracked hand (smooth.h). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/rotation.h"
#include "pipeline/camera_fit.h"
#include "pipeline/conventions.h"
#include "track/smooth.h"

void hm_smooth_reset(hm_smooth_state *s) {
    s->started = 0;
    s->t_prev = 0;
    s->nbetas = 0;
}

/* The exponential smoothing factor of a first-order low-pass at cutoff fc
 * for a sample interval dt: 1 / (1 + tau / dt), tau = 1 / (2 pi fc). */
static double alpha(double fc, double dt) { return 1.0 / (1.0 + 1.0 / (2.0 * M_PI * fc * dt)); }

double hm_one_euro(double x, double *xs, double *dxs, double dt, double scale, const hm_smooth_opts *o) {
    const double d = (x - *xs) / dt;
    *dxs += alpha(o->d_cutoff, dt) * (d - *dxs);
    const double fc = o->min_cutoff + o->beta * fabs(*dxs) / scale;
    *xs += alpha(fc, dt) * (x - *xs);
    return *xs;
}

void hm_one_euro_rot(const double q[4], double qs[4], double ws[3], double dt, const hm_smooth_opts *o) {
    /* d: the rotation from the filtered one to the raw one, in the filtered one's frame */
    double inv[4] = {qs[0], -qs[1], -qs[2], -qs[3]}, r[4], d[3];
    hm_quat_mul(inv, q, r);
    hm_quat_log(r, d);
    const double ad = alpha(o->d_cutoff, dt);
    for (int k = 0; k < 3; k++) ws[k] += ad * (d[k] / dt - ws[k]);
    const double fc = o->min_cutoff + o->beta * sqrt(ws[0] * ws[0] + ws[1] * ws[1] + ws[2] * ws[2]);
    const double a = alpha(fc, dt);
    double step[3] = {a * d[0], a * d[1], a * d[2]}, e[4], out[4];
    hm_quat_exp(step, e);
    hm_quat_mul(qs, e, out);
    const double n = sqrt(out[0] * out[0] + out[1] * out[1] + out[2] * out[2] + out[3] * out[3]);
    for (int k = 0; k < 4; k++) qs[k] = out[k] / n;
}

/* The filtered scalars' raw values in HM_SMOOTH_N order. */
static void gather(const hamer_hand *h, double *v) {
    int k = 0;
    for (int i = 0; i < 3; i++) v[k++] = h->cam_t_full[i];
    for (int i = 0; i < 3; i++) v[k++] = h->cam_t[i];
    for (int i = 0; i < HM_SMOOTH_N_KP3; i++) v[k++] = h->keypoints_3d[i];
    for (int i = 0; i < HM_SMOOTH_N_VERT; i++) v[k++] = h->vertices[i];
    for (int i = 0; i < HM_SMOOTH_N_KP2; i++) v[k++] = h->keypoints_2d[i];
}

static float *rotation_of(hamer_hand *h, int j) { return j == 0 ? h->global_orient : h->hand_pose + 9 * (j - 1); }

/* The filter's values into h, and what derives from them: the rotations'
 * other forms, the camera-frame keypoints and the reprojection error. */
static void scatter(const hm_smooth_state *s, hamer_hand *h, int rotations) {
    const double *v = s->x;
    int k = 0;
    for (int i = 0; i < 3; i++) h->cam_t_full[i] = (float)v[k++];
    for (int i = 0; i < 3; i++) h->cam_t[i] = (float)v[k++];
    for (int i = 0; i < HM_SMOOTH_N_KP3; i++) h->keypoints_3d[i] = (float)v[k++];
    for (int i = 0; i < HM_SMOOTH_N_VERT; i++) h->vertices[i] = (float)v[k++];
    for (int i = 0; i < HM_SMOOTH_N_KP2; i++) h->keypoints_2d[i] = (float)v[k++];
    for (int j = 0; rotations && j < 16; j++) {
        double R[9];
        hm_quat_to_rot(s->q[j], R);
        float *Rf = rotation_of(h, j);
        for (int e = 0; e < 9; e++) Rf[e] = (float)R[e];
    }
    hm_hand_rotations(h);
    if (h->focal_source != HAMER_FOCAL_NONE) hm_hand_camera_refresh(h);
}

static int cmp_float(const void *a, const void *b) {
    const float x = *(const float *)a, y = *(const float *)b;
    return (x > y) - (x < y);
}

/* Median of each beta over the samples collected. */
static void betas_median(const hm_smooth_state *s, float out[10]) {
    float col[HM_SMOOTH_MAX_BETAS];
    const int n = s->nbetas;
    for (int b = 0; b < 10; b++) {
        for (int i = 0; i < n; i++) col[i] = s->betas[i][b];
        qsort(col, (size_t)n, sizeof *col, cmp_float);
        out[b] = n % 2 ? col[n / 2] : (float)(0.5 * ((double)col[n / 2 - 1] + col[n / 2]));
    }
}

void hm_smooth_hand(hm_smooth_state *s, const hm_smooth_opts *o, double t, const hamer_hand *raw, hamer_hand *out) {
    double val[HM_SMOOTH_N], q[16][4];
    if (out != raw) *out = *raw;
    gather(raw, val);
    for (int j = 0; j < 16; j++) {
        const float *Rf = j == 0 ? raw->global_orient : raw->hand_pose + 9 * (j - 1);
        double R[9];
        for (int e = 0; e < 9; e++) R[e] = Rf[e];
        hm_rot_to_quat(R, q[j]);
    }
    const int fresh = !s->started || !(t > s->t_prev);  /* the raw hand passes */
    if (fresh) {
        memcpy(s->x, val, sizeof s->x);
        memset(s->dx, 0, sizeof s->dx);
        memcpy(s->q, q, sizeof s->q);
        memset(s->w, 0, sizeof s->w);
        s->started = 1;
    } else {
        const double dt = t - s->t_prev;
        /* beta weighs speeds in hand-relative units: metres over 0.1 m,
         * pixels over the hand's crop size, rotations in rad/s */
        const double px = raw->box_size > 0 ? raw->box_size : 1.0;
        int k = 0;
        for (; k < HM_SMOOTH_N_CAM + HM_SMOOTH_N_KP3 + HM_SMOOTH_N_VERT; k++)
            hm_one_euro(val[k], &s->x[k], &s->dx[k], dt, HM_SMOOTH_METRE_SCALE, o);
        for (int i = 0; i < HM_SMOOTH_N_KP2; i++, k++) hm_one_euro(val[k], &s->x[k], &s->dx[k], dt, px, o);
        for (int j = 0; j < 16; j++) hm_one_euro_rot(q[j], s->q[j], s->w[j], dt, o);
    }
    s->t_prev = t;
    scatter(s, out, !fresh);
    if (s->nbetas < o->betas_frames) memcpy(s->betas[s->nbetas++], raw->betas, sizeof raw->betas);
    if (s->nbetas >= o->betas_min) betas_median(s, out->betas);
}
