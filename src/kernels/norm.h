/* norm.h - row-wise LayerNorm and softmax: portable C (norm.c), dispatched
 * to the AVX-512 bodies (norm_avx512.c) when that is the active ISA. */
#ifndef HM_NORM_H
#define HM_NORM_H

#include <stddef.h>

/* LayerNorm of n rows of width d (x and y may alias); statistics in double. */
void hm_layernorm(const float *x, float *y, int n, int d, const float *w, const float *b, float eps);
/* In-place softmax of one row. */
void hm_softmax(float *x, int n);

void hm_layernorm_avx512(const float *x, float *y, int n, int d, const float *w, const float *b, float eps);
void hm_softmax_avx512(float *x, int n);

#endif
