/* vec.c - the portable elementwise and depthwise kernels (kernels/vec.h):
 * the scalar level's, and the reference the ISA twins are tested against. */
#include "kernels/vec.h"

#include <string.h>

void hm_vec_act(float *x, size_t n, int act) {
    if (act == HM_ACT_NONE) return;
    float lo = act == HM_ACT_RELU_N1_TO_1 ? -1.0f : 0.0f;
    float hi = act == HM_ACT_RELU6 ? 6.0f : act == HM_ACT_RELU_N1_TO_1 ? 1.0f : 0.0f;
    if (act == HM_ACT_RELU) {
        for (size_t i = 0; i < n; i++) x[i] = x[i] > 0.0f ? x[i] : 0.0f;
    } else {
        for (size_t i = 0; i < n; i++) x[i] = x[i] < lo ? lo : x[i] > hi ? hi : x[i];
    }
}

void hm_vec_add(const float *a, const float *b, float *y, size_t n, int act) {
    for (size_t i = 0; i < n; i++) y[i] = a[i] + b[i];
    hm_vec_act(y, n, act);
}

void hm_vec_prelu(const float *x, const float *alpha, float *y, size_t rows, size_t c) {
    for (size_t r = 0; r < rows; r++, x += c, y += c)
        for (size_t i = 0; i < c; i++) y[i] = x[i] >= 0.0f ? x[i] : x[i] * alpha[i];
}

void hm_vec_add_prelu(float *y, const float *r, const float *alpha, size_t rows, size_t c, int act) {
    hm_vec_add(y, r, y, rows * c, act);
    hm_vec_prelu(y, alpha, y, rows, c);
}

void hm_vec_copy(float *dst, const float *src, size_t n) {
    if (src) memcpy(dst, src, n * sizeof(float));
    else memset(dst, 0, n * sizeof(float));
}

void hm_vec_copy_strided(float *dst, size_t dstep, const float *src, size_t sstep, size_t len, int n) {
    for (int i = 0; i < n; i++, dst += dstep) hm_vec_copy(dst, src ? src + (size_t)i * sstep : NULL, len);
}

void hm_vec_max(float *o, const float *x, size_t n) {
    for (size_t c = 0; c < n; c++) o[c] = x[c] > o[c] ? x[c] : o[c];
}

void hm_vec_dw_rows(const hm_dw_geom *g, const float *x, float *y, int r0, int r1, int c0, int c1) {
    const int H = g->H, W = g->W, C = g->C, OH = g->OH, OW = g->OW;
    size_t nc = (size_t)(c1 - c0);
    for (int r = r0; r < r1; r++) {
        int n = r / OH, oy = r % OH;
        for (int ox = 0; ox < OW; ox++) {
            float *o = y + ((size_t)r * OW + ox) * C + c0;
            if (g->bias) memcpy(o, g->bias + c0, nc * sizeof(float));
            else memset(o, 0, nc * sizeof(float));
            for (int ky = 0; ky < g->kh; ky++) {
                int iy = oy * g->sh - g->pad_top + ky;
                if (iy < 0 || iy >= H) continue;
                for (int kx = 0; kx < g->kw; kx++) {
                    int ix = ox * g->sw - g->pad_left + kx;
                    if (ix < 0 || ix >= W) continue;
                    const float *in = x + (((size_t)n * H + iy) * W + ix) * C + c0;
                    const float *w = g->w + ((size_t)ky * g->kw + kx) * C + c0;
                    for (size_t c = 0; c < nc; c++) o[c] += in[c] * w[c];
                }
            }
            hm_vec_act(o, nc, g->act);
        }
    }
}
