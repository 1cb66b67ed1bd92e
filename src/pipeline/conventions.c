/* conventions.c - a hand's rotations as axis-angle, quaternions, MANO PCA
 * coefficients and SMPL-X's hand pose (conventions.h).
 *
 * Mirroring: hamer.c gives a left hand as the mirror image of the right
 * hand the model predicted, M R M with M = diag(-1, 1, 1) per rotation,
 * which is the axis-angle vector (x, y, z) -> (x, -y, -z): the convention
 * of MANO_LEFT and of SMPL-X's left_hand_pose (HaMeR's own
 * hamer/datasets/utils.py flips a hand's pose the same way). MANO's PCA
 * space is a right hand's; a left hand's coefficients are those of its
 * mirror image.
 */
#include <math.h>
#include <string.h>

#include "core/rotation.h"
#include "core/util.h"
#include "pipeline/conventions.h"

void hm_hand_rotations(hamer_hand *h) {
    for (int j = 0; j < 16; j++) {
        const float *Rf = j ? h->hand_pose + 9 * (j - 1) : h->global_orient;
        double R[9], q[4];
        for (int e = 0; e < 9; e++) R[e] = Rf[e];
        hm_rotmat_to_axis_angle(Rf, h->axis_angle + 3 * j);
        hm_rot_to_quat(R, q);
        hm_quat_canonical(q);
        for (int c = 0; c < 4; c++) h->quaternion[4 * j + c] = (float)q[c];
    }
}

int hm_pca_coeffs(const float *C, const float *mean, int k, const double *aa, double *c) {
    double G[45 * 45], rhs[45], d[45];
    for (int i = 0; i < 45; i++) d[i] = aa[i] - mean[i];
    for (int a = 0; a < k; a++) {
        double s = 0;
        for (int i = 0; i < 45; i++) s += (double)C[45 * a + i] * d[i];
        rhs[a] = s;
        for (int b = 0; b <= a; b++) {
            double g = 0;
            for (int i = 0; i < 45; i++) g += (double)C[45 * a + i] * C[45 * b + i];
            G[k * a + b] = G[k * b + a] = g;
        }
    }
    /* Cholesky G = L L^T in place (lower triangle), then two substitutions. */
    for (int a = 0; a < k; a++) {
        for (int b = 0; b <= a; b++) {
            double s = G[k * a + b];
            for (int m = 0; m < b; m++) s -= G[k * a + m] * G[k * b + m];
            if (a == b) {
                if (!(s > 1e-12 * (G[k * a + a] + 1e-300))) return HM_E_ARG;
                G[k * a + a] = sqrt(s);
            } else {
                G[k * a + b] = s / G[k * b + b];
            }
        }
    }
    for (int a = 0; a < k; a++) {
        double s = rhs[a];
        for (int m = 0; m < a; m++) s -= G[k * a + m] * c[m];
        c[a] = s / G[k * a + a];
    }
    for (int a = k - 1; a >= 0; a--) {
        double s = c[a];
        for (int m = a + 1; m < k; m++) s -= G[k * m + a] * c[m];
        c[a] = s / G[k * a + a];
    }
    return HM_OK;
}

void hm_hand_pca(const hm_mano *mn, hamer_hand *h) {
    memset(h->pca, 0, sizeof h->pca);
    memset(h->smplx_hand_pose, 0, sizeof h->smplx_hand_pose);
    h->n_pca = 0;
    if (!mn || mn->n_pca < 1) return;
    /* the right hand's axis-angle values: a left hand's mirrored back */
    const double m[3] = {1, h->box.is_right ? 1 : -1, h->box.is_right ? 1 : -1};
    double aa[45], c[45];
    for (int i = 0; i < 45; i++) aa[i] = m[i % 3] * h->axis_angle[3 + i];
    if (hm_pca_coeffs(mn->hand_components, mn->hand_mean, mn->n_pca, aa, c)) return;
    for (int a = 0; a < mn->n_pca; a++) h->pca[a] = (float)c[a];
    h->n_pca = mn->n_pca;
    /* SMPL-X, flat_hand_mean=False: the pose minus the side's hand mean */
    for (int i = 0; i < 45; i++) h->smplx_hand_pose[i] = (float)(m[i % 3] * (aa[i] - mn->hand_mean[i]));
}
