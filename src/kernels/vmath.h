/* vmath.h - scalar math shared by the portable kernels. */
#ifndef HM_VMATH_H
#define HM_VMATH_H

#include <math.h>

/* Exact GELU: 0.5 x (1 + erf(x / sqrt 2)), float. */
static inline float hm_gelu(float x) { return 0.5f * x * (1.0f + erff(x * 0.70710678f)); }

#endif
