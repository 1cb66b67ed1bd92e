/* rotation.c - rotation conversions in double (rotation.h). */
#include <math.h>

#include "core/rotation.h"

void hm_rot_to_quat(const double R[9], double q[4]) {
    const double m00 = R[0], m01 = R[1], m02 = R[2], m10 = R[3], m11 = R[4], m12 = R[5], m20 = R[6], m21 = R[7],
                 m22 = R[8];
    const double tr = m00 + m11 + m22;
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

void hm_quat_to_rot(const double qi[4], double R[9]) {
    double n = sqrt(qi[0] * qi[0] + qi[1] * qi[1] + qi[2] * qi[2] + qi[3] * qi[3]);
    if (!(n > 0)) n = 1;
    const double w = qi[0] / n, x = qi[1] / n, y = qi[2] / n, z = qi[3] / n;
    R[0] = 1 - 2 * (y * y + z * z), R[1] = 2 * (x * y - w * z), R[2] = 2 * (x * z + w * y);
    R[3] = 2 * (x * y + w * z), R[4] = 1 - 2 * (x * x + z * z), R[5] = 2 * (y * z - w * x);
    R[6] = 2 * (x * z - w * y), R[7] = 2 * (y * z + w * x), R[8] = 1 - 2 * (x * x + y * y);
}

void hm_quat_mul(const double a[4], const double b[4], double o[4]) {
    const double w = a[0] * b[0] - a[1] * b[1] - a[2] * b[2] - a[3] * b[3];
    const double x = a[0] * b[1] + a[1] * b[0] + a[2] * b[3] - a[3] * b[2];
    const double y = a[0] * b[2] - a[1] * b[3] + a[2] * b[0] + a[3] * b[1];
    const double z = a[0] * b[3] + a[1] * b[2] - a[2] * b[1] + a[3] * b[0];
    o[0] = w, o[1] = x, o[2] = y, o[3] = z;
}

void hm_quat_log(const double qi[4], double v[3]) {
    const double sg = qi[0] < 0 ? -1.0 : 1.0;  /* the shorter of q, -q */
    const double w = sg * qi[0], s = sqrt(qi[1] * qi[1] + qi[2] * qi[2] + qi[3] * qi[3]);
    /* angle = 2 atan2(s, w); the vector part scaled by angle / s, which
     * tends to 2 / w as s -> 0 */
    const double k = s > 1e-12 ? 2.0 * atan2(s, w) / s : 2.0 / (w > 0 ? w : 1.0);
    for (int i = 0; i < 3; i++) v[i] = sg * qi[1 + i] * k;
}

void hm_quat_exp(const double v[3], double q[4]) {
    const double th = sqrt(v[0] * v[0] + v[1] * v[1] + v[2] * v[2]);
    /* sin(th/2)/th, by its series for tiny angles */
    const double k = th > 1e-8 ? sin(0.5 * th) / th : 0.5 - th * th / 48.0;
    q[0] = cos(0.5 * th);
    for (int i = 0; i < 3; i++) q[1 + i] = v[i] * k;
}

void hm_quat_canonical(double q[4]) {
    if (q[0] < 0)
        for (int i = 0; i < 4; i++) q[i] = -q[i];
}
