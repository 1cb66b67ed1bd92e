/* rot6d.c - the head's readout as parameters: the continuous 6D rotation
 * representation (Zhou et al., CVPR 2019) of the 16 joints to rotation
 * matrices, then betas and the camera as they are. */
#include <math.h>
#include <string.h>

#include "model/model.h"

/* 6D -> rotation: a1 = x[0:3], a2 = x[3:6]; Gram-Schmidt; R = [b1 b2 b3]
 * as COLUMNS, written row-major (R[i][j] at 3i+j). normalize divides by
 * max(norm, 1e-12) like torch.nn.functional.normalize. */
void hm_rot6d_to_rotmat(const float *x, float *R) {
    float a1[3] = {x[0], x[1], x[2]}, a2[3] = {x[3], x[4], x[5]}, b1[3], b2[3], b3[3];
    float n1 = sqrtf(a1[0] * a1[0] + a1[1] * a1[1] + a1[2] * a1[2]);
    n1 = n1 > 1e-12f ? n1 : 1e-12f;
    for (int i = 0; i < 3; i++) b1[i] = a1[i] / n1;
    float dot = b1[0] * a2[0] + b1[1] * a2[1] + b1[2] * a2[2];
    float u[3];
    for (int i = 0; i < 3; i++) u[i] = a2[i] - dot * b1[i];
    float n2 = sqrtf(u[0] * u[0] + u[1] * u[1] + u[2] * u[2]);
    n2 = n2 > 1e-12f ? n2 : 1e-12f;
    for (int i = 0; i < 3; i++) b2[i] = u[i] / n2;
    b3[0] = b1[1] * b2[2] - b1[2] * b2[1];
    b3[1] = b1[2] * b2[0] - b1[0] * b2[2];
    b3[2] = b1[0] * b2[1] - b1[1] * b2[0];
    for (int i = 0; i < 3; i++) {
        R[3 * i + 0] = b1[i];
        R[3 * i + 1] = b2[i];
        R[3 * i + 2] = b3[i];
    }
}

void hm_raw_to_params(const float *raw, float *params, int B) {
    for (int b = 0; b < B; b++) {
        const float *r = raw + (size_t)b * HM_NRAW;
        float *p = params + (size_t)b * HM_NPARAMS;
        for (int k = 0; k < HM_NJ; k++) hm_rot6d_to_rotmat(r + 6 * k, p + 9 * k);
        memcpy(p + 9 * HM_NJ, r + HM_NJ * 6, (HM_NB + 3) * sizeof(float));
    }
}
