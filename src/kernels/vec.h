/* vec.h - the TFLite executor's elementwise and depthwise kernels (NHWC
 * fp32), one set per ISA level behind the kernel table (kernels.h).
 *
 * The portable bodies are in vec.c; each ISA folder has its twins
 * (x86/vec_avx512.c, ...). Twins compute the same operations in the same
 * order, except that a multiply-add may be fused: results agree to float
 * rounding (tests/c/test_kernels.c checks every level against float64).
 */
#ifndef HM_KERNELS_VEC_H
#define HM_KERNELS_VEC_H

#include <stddef.h>

/* Fused activations, as TFLite numbers them. */
enum { HM_ACT_NONE = 0, HM_ACT_RELU = 1, HM_ACT_RELU_N1_TO_1 = 2, HM_ACT_RELU6 = 3 };

/* One depthwise convolution: input H x W x C per image, output OH x OW x C,
 * a kh x kw filter [kh * kw][C], strides, the padding before the first row
 * and column, the fused activation, bias [C] or NULL. */
typedef struct {
    int H, W, C, OH, OW;
    int kh, kw, sh, sw, pad_top, pad_left;
    int act;
    const float *w;
    const float *bias;
} hm_dw_geom;

/* The output columns [*a, *b) of a window kw wide at stride sw after a
 * left pad pl (input W wide, output OW) that lie inside the input along x:
 * ox * sw - pl >= 0 and ox * sw - pl + kw <= W. a <= b <= OW. */
static inline void hm_inside_cols(int W, int OW, int kw, int sw, int pl, int *a, int *b) {
    *b = W - kw + pl >= 0 ? (W - kw + pl) / sw + 1 : 0;
    if (*b > OW) *b = OW;
    *a = (pl + sw - 1) / sw;
    if (*a > *b) *a = *b;
}

/* The portable bodies (the scalar level's table, and the reference the
 * twins are tested against):
 *   act          x = act(x) in place over n floats (NONE: nothing)
 *   add          y = act(a + b) over n floats; y may be a or b
 *   prelu        rows x c: y = x >= 0 ? x : x * alpha[c]
 *   add_prelu    rows x c in place: y = prelu(act(y + r)), alpha per channel
 *   copy         dst[0, n) = src[0, n), or zeros when src is NULL
 *   copy_strided n segments of len floats, segment i from src + i * sstep
 *                (zeros when src is NULL) to dst + i * dstep
 *   max          o = max(o, x) over n floats
 *   dw_rows      output rows [r0, r1) (row = one (image, oy)), channels
 *                [c0, c1): bias, then the taps in (ky, kx) order, then act */
void hm_vec_act(float *x, size_t n, int act);
void hm_vec_add(const float *a, const float *b, float *y, size_t n, int act);
void hm_vec_prelu(const float *x, const float *alpha, float *y, size_t rows, size_t c);
void hm_vec_add_prelu(float *y, const float *r, const float *alpha, size_t rows, size_t c, int act);
void hm_vec_copy(float *dst, const float *src, size_t n);
void hm_vec_copy_strided(float *dst, size_t dstep, const float *src, size_t sstep, size_t len, int n);
void hm_vec_max(float *o, const float *x, size_t n);
void hm_vec_dw_rows(const hm_dw_geom *g, const float *x, float *y, int r0, int r1, int c0, int c1);

#endif
