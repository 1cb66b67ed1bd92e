/* norm.h - row-wise LayerNorm and softmax: the active ISA level's bodies
 * (kernels.h: portable C in norm.c, x86/norm_avx512.c, arm/norm_neon.c). */
#ifndef HM_NORM_H
#define HM_NORM_H

#include <stddef.h>

#include "kernels/kernels.h"

/* LayerNorm of n rows of width d (x and y may alias); statistics in double. */
static inline void hm_layernorm(const float *x, float *y, int n, int d, const float *w, const float *b, float eps) {
    hm_kernels_active()->layernorm(x, y, n, d, w, b, eps);
}
/* In-place softmax of one row. */
static inline void hm_softmax(float *x, int n) { hm_kernels_active()->softmax(x, n); }


#endif
