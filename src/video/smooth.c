/* smooth.c - One Euro smoothing of a tracked hand (smooth.h). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "video/smooth.h"

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

void hm_rotmat_to_quat(const float R[9], double q[4]) {
    const double m00 = R[0], m01 = R[1], m02 = R[2], m10 = R[3], m11 = R[4], m12 = R[5], m20 = R[6], m21 = R[7],
                 m22 = R[8];
    const double tr = m00 + m11 + m22;
    /* the largest of 4w^2, 4x^2, 4y^2, 4z^2 as the divisor: no cancellation */
    if (tr > 0) {
        const double s = 2.0 * sqrt(1.0 + tr);
        q[0] = 0.25 * s, q[1] = (m21 - m12) / s, q[2] = (m02 - m20) / s, q[3] = (m10 - m01) / s;
    } else if (m00 > m11 && m00 > m22) {
        const double s = 2.0 * sqrt(fmax(1.0 + m00 - m11 - m22, 1e-30));
        q[0] = (m21 - m12) / s, q[1] = 0.25 * s, q[2] = (m01 + m10) / s, q[3] = (m02 + m20) / s;
    } else if (m11 > m22) {
        const double s = 2.0 * sqrt(fmax(1.0 + m11 - m00 - m22, 1e-30));
        q[0] = (m02 - m20) / s, q[1] = (m01 + m10) / s, q[2] = 0.25 * s, q[3] = (m12 + m21) / s;
    } else {
        const double s = 2.0 * sqrt(fmax(1.0 + m22 - m00 - m11, 1e-30));
        q[0] = (m10 - m01) / s, q[1] = (m02 + m20) / s, q[2] = (m12 + m21) / s, q[3] = 0.25 * s;
    }
    const double n = sqrt(q[0] * q[0] + q[1] * q[1] + q[2] * q[2] + q[3] * q[3]);
    for (int k = 0; k < 4; k++) q[k] /= n;
}

void hm_quat_to_rotmat(const double q[4], float R[9]) {
    const double w = q[0], x = q[1], y = q[2], z = q[3];
    R[0] = (float)(1 - 2 * (y * y + z * z)), R[1] = (float)(2 * (x * y - w * z)), R[2] = (float)(2 * (x * z + w * y));
    R[3] = (float)(2 * (x * y + w * z)), R[4] = (float)(1 - 2 * (x * x + z * z)), R[5] = (float)(2 * (y * z - w * x));
    R[6] = (float)(2 * (x * z - w * y)), R[7] = (float)(2 * (y * z + w * x)), R[8] = (float)(1 - 2 * (x * x + y * y));
}

/* The filtered scalars' raw values in HM_SMOOTH_N order; quaternions are
 * sign-aligned with the filter's previous ones (q and -q are the same
 * rotation; the filter must not average across the two). */
static void gather(const hm_smooth_state *s, const hamer_hand *h, double *v) {
    int k = 0;
    for (int i = 0; i < HM_SMOOTH_N_CAM; i++) v[k++] = h->cam_t_full[i];
    for (int i = 0; i < HM_SMOOTH_N_KP3; i++) v[k++] = h->keypoints_3d[i];
    for (int i = 0; i < HM_SMOOTH_N_VERT; i++) v[k++] = h->vertices[i];
    for (int i = 0; i < HM_SMOOTH_N_KP2; i++) v[k++] = h->keypoints_2d[i];
    for (int j = 0; j < 16; j++, k += 4) {
        hm_rotmat_to_quat(j == 0 ? h->global_orient : h->hand_pose + 9 * (j - 1), v + k);
        if (s->started) {
            const double *p = s->x + k;
            if (v[k] * p[0] + v[k + 1] * p[1] + v[k + 2] * p[2] + v[k + 3] * p[3] < 0)
                for (int c = 0; c < 4; c++) v[k + c] = -v[k + c];
        }
    }
}

static void scatter(const double *v, hamer_hand *h) {
    int k = 0;
    for (int i = 0; i < HM_SMOOTH_N_CAM; i++) h->cam_t_full[i] = (float)v[k++];
    for (int i = 0; i < HM_SMOOTH_N_KP3; i++) h->keypoints_3d[i] = (float)v[k++];
    for (int i = 0; i < HM_SMOOTH_N_VERT; i++) h->vertices[i] = (float)v[k++];
    for (int i = 0; i < HM_SMOOTH_N_KP2; i++) h->keypoints_2d[i] = (float)v[k++];
    for (int j = 0; j < 16; j++, k += 4) {
        double q[4], n = 0;
        for (int c = 0; c < 4; c++) n += v[k + c] * v[k + c];
        n = sqrt(n);
        for (int c = 0; c < 4; c++) q[c] = n > 0 ? v[k + c] / n : (c == 0);
        hm_quat_to_rotmat(q, j == 0 ? h->global_orient : h->hand_pose + 9 * (j - 1));
    }
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
    double val[HM_SMOOTH_N];
    if (out != raw) *out = *raw;
    gather(s, raw, val);
    if (!s->started || !(t > s->t_prev)) {
        memcpy(s->x, val, sizeof s->x);
        memset(s->dx, 0, sizeof s->dx);
        s->started = 1;
    } else {
        const double dt = t - s->t_prev;
        /* beta weighs speeds in hand-relative units: metres over 0.1 m,
         * pixels over the hand's crop size, quaternion components as they are */
        const double px = raw->box_size > 0 ? raw->box_size : 1.0;
        int k = 0;
        for (; k < HM_SMOOTH_N_CAM + HM_SMOOTH_N_KP3 + HM_SMOOTH_N_VERT; k++)
            hm_one_euro(val[k], &s->x[k], &s->dx[k], dt, HM_SMOOTH_METRE_SCALE, o);
        for (int i = 0; i < HM_SMOOTH_N_KP2; i++, k++) hm_one_euro(val[k], &s->x[k], &s->dx[k], dt, px, o);
        for (; k < HM_SMOOTH_N; k++) hm_one_euro(val[k], &s->x[k], &s->dx[k], dt, 1.0, o);
    }
    s->t_prev = t;
    scatter(s->x, out);
    if (s->nbetas < o->betas_frames) memcpy(s->betas[s->nbetas++], raw->betas, sizeof raw->betas);
    if (s->nbetas >= o->betas_min) betas_median(s, out->betas);
}
