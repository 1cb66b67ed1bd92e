/* rotation.h - 3D rotations in double: row-major matrices, unit
 * quaternions (w, x, y, z) and rotation vectors (angle times unit axis),
 * the conversions between them and the quaternion exponential and
 * logarithm (what filtering on the rotation group needs). */
#ifndef HM_ROTATION_H
#define HM_ROTATION_H

/* The unit quaternion of a rotation matrix (Shepperd's method: the
 * largest of 4w^2, 4x^2, 4y^2, 4z^2 as the divisor, so no cancellation),
 * normalised; its sign is whatever that method gives. */
void hm_rot_to_quat(const double R[9], double q[4]);
/* The rotation matrix of a unit quaternion (normalised first). */
void hm_quat_to_rot(const double q[4], double R[9]);
/* a * b (apply b, then a). */
void hm_quat_mul(const double a[4], const double b[4], double out[4]);
/* The rotation vector of q: angle in [0, pi] (q and -q alike) times the
 * unit axis; stable at 0 (the vector part doubled) and at pi. */
void hm_quat_log(const double q[4], double v[3]);
/* The unit quaternion of rotation vector v (|v| radians about v / |v|). */
void hm_quat_exp(const double v[3], double q[4]);
/* q with its sign chosen so that w >= 0 (the same rotation). */
void hm_quat_canonical(double q[4]);

#endif
