/* conventions.h - a hand's rotations in the conventions other tools ask
 * for: axis-angle, quaternions (w, x, y, z), MANO's PCA coefficients and
 * SMPL-X's mean-relative hand pose (include/hamer.h, hamer_hand). */
#ifndef HM_CONVENTIONS_H
#define HM_CONVENTIONS_H

#include "hamer.h"
#include "model/model.h"

/* axis_angle and quaternion from global_orient / hand_pose. */
void hm_hand_rotations(hamer_hand *h);
/* n_pca, pca and smplx_hand_pose from hand_pose (and is_right), with the
 * PCA space of mano (n_pca 0 and zeros when it has none). */
void hm_hand_pca(const hm_mano *mano, hamer_hand *h);

/* The least-squares PCA coefficients c[0..k) of a right hand's 45
 * axis-angle values aa: (C C^T) c = C (aa - mean) over the first k rows C
 * of components (k <= 45), solved by Cholesky in double. 0, or HM_E_ARG
 * when those rows are linearly dependent. */
int hm_pca_coeffs(const float *components, const float *mean, int k, const double *aa, double *c);

#endif
