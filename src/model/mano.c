/* mano.c - the MANO hand layer (linear blend skinning), pose as rotations.
 *
 * smplx MANOLayer semantics with pose2rot=False: the PCA buffers, hand_mean
 * and translation are unused. Steps:
 *   v_shaped = v_template + shapedirs . betas
 *   J        = J_regressor . v_shaped                        (16 joints)
 *   v_posed  = v_shaped + posedirs^T . vec(R[1:] - I)        (135 features)
 *   G_i      = G_parent(i) . [R_i | J_i - J_parent(i)]       (kinematic chain)
 *   A_i      = G_i - [0 | G_i . (J_i, 0)]
 *   v        = (sum_k w_vk A_k) . (v_posed, 1)
 * Output joints: the 16 posed joints + 5 fingertip vertices, reordered to
 * OpenPose order by joint_map. Accumulation is in double: this stage is tiny
 * (~0.5 MFLOP) and double keeps it far inside the parity budget.
 */
#include <string.h>
#include "model/model.h"

/* 3x4 affine (row-major, implicit last row 0 0 0 1) product C = A . B. */
static void aff_mul(const double *A, const double *B, double *C) {
    for (int i = 0; i < 3; i++) {
        for (int j = 0; j < 4; j++) {
            double v = A[4 * i + 0] * B[j] + A[4 * i + 1] * B[4 + j] + A[4 * i + 2] * B[8 + j];
            if (j == 3) v += A[4 * i + 3];
            C[4 * i + j] = v;
        }
    }
}

void hm_mano_rest(const hm_mano *mn, const float *params, double *vs, double *J, double *vp) {
    static const int nv = HM_NV;
    const float *R = params;               /* 16 x 9 */
    const float *betas = params + 9 * HM_NJ;
    double feat[(HM_NJ - 1) * 9];

    for (int v = 0; v < nv * 3; v++) {
        double acc = mn->v_template[v];
        const float *sd = mn->shapedirs + (size_t)v * HM_NB;
        for (int l = 0; l < HM_NB; l++) acc += (double)betas[l] * sd[l];
        vs[v] = acc;
    }
    for (int j = 0; j < HM_NJ; j++) {
        double a[3] = {0, 0, 0};
        const float *jr = mn->j_regressor + (size_t)j * nv;
        for (int v = 0; v < nv; v++)
            for (int k = 0; k < 3; k++) a[k] += (double)jr[v] * vs[3 * v + k];
        for (int k = 0; k < 3; k++) J[3 * j + k] = a[k];
    }
    for (int j = 1; j < HM_NJ; j++)
        for (int e = 0; e < 9; e++) feat[(j - 1) * 9 + e] = R[9 * j + e] - ((e % 4 == 0) ? 1.0 : 0.0);
    memcpy(vp, vs, sizeof(double) * HM_NV * 3);
    for (int f = 0; f < (HM_NJ - 1) * 9; f++) {
        const float *pd = mn->posedirs + (size_t)f * nv * 3;
        double w = feat[f];
        for (int v = 0; v < nv * 3; v++) vp[v] += w * pd[v];
    }
}

void hm_mano_forward(const hm_mano *mn, const float *params, float *verts, float *joints21) {
    static const int nv = HM_NV;
    const float *R = params;               /* 16 x 9 */
    double vs[HM_NV * 3], J[HM_NJ * 3], vp[HM_NV * 3];
    hm_mano_rest(mn, params, vs, J, vp);

    /* Kinematic chain (parents precede children, checked at load). */
    double G[HM_NJ][12], A[HM_NJ][12];
    for (int j = 0; j < HM_NJ; j++) {
        double T[12];
        int p = mn->parents[j];
        for (int i = 0; i < 3; i++) {
            for (int k = 0; k < 3; k++) T[4 * i + k] = R[9 * j + 3 * i + k];
            T[4 * i + 3] = p < 0 ? J[3 * j + i] : J[3 * j + i] - J[3 * p + i];
        }
        if (p < 0) memcpy(G[j], T, sizeof T);
        else aff_mul(G[p], T, G[j]);
        memcpy(A[j], G[j], sizeof T);
        for (int i = 0; i < 3; i++)
            A[j][4 * i + 3] -= G[j][4 * i] * J[3 * j] + G[j][4 * i + 1] * J[3 * j + 1] + G[j][4 * i + 2] * J[3 * j + 2];
    }

    double V[HM_NV * 3];
    for (int v = 0; v < nv; v++) {
        double M[12] = {0};
        const float *w = mn->lbs_weights + (size_t)v * HM_NJ;
        for (int j = 0; j < HM_NJ; j++)
            for (int e = 0; e < 12; e++) M[e] += (double)w[j] * A[j][e];
        const double *x = vp + 3 * v;
        for (int i = 0; i < 3; i++)
            V[3 * v + i] = M[4 * i] * x[0] + M[4 * i + 1] * x[1] + M[4 * i + 2] * x[2] + M[4 * i + 3];
    }
    if (verts)
        for (int v = 0; v < nv * 3; v++) verts[v] = (float)V[v];
    if (joints21) {
        double j21[HM_NKP * 3];
        for (int j = 0; j < HM_NJ; j++)
            for (int k = 0; k < 3; k++) j21[3 * j + k] = G[j][4 * k + 3];
        for (int t = 0; t < 5; t++)
            for (int k = 0; k < 3; k++) j21[3 * (HM_NJ + t) + k] = V[3 * mn->tips[t] + k];
        for (int o = 0; o < HM_NKP; o++)
            for (int k = 0; k < 3; k++) joints21[3 * o + k] = (float)j21[3 * mn->joint_map[o] + k];
    }
}
