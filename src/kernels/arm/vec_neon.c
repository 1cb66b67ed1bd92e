/* arm/vec_neon.c - Advanced SIMD twins of the TFLite executor's
 * elementwise and depthwise kernels (kernels/vec.h; the neon level's
 * table, kernels.h).
 *
 * Same arithmetic as the portable kernels in the same order, except that
 * the depthwise taps' multiply-adds are fused: results agree to float
 * rounding. Tails shorter than a vector go through a four-float buffer.
 */
#include <arm_neon.h>
#include <string.h>

#include "kernels/arm/arm.h"

/* lo <= v <= hi by compare and select, as the portable code does it (NaN
 * stays NaN; ReLU's v > 0 ? v : 0 makes it 0). */
static inline float32x4_t clamp_vec(float32x4_t v, float lo, float hi) {
    const float32x4_t l = vdupq_n_f32(lo), h = vdupq_n_f32(hi);
    v = vbslq_f32(vcltq_f32(v, l), l, v);
    return vbslq_f32(vcgtq_f32(v, h), h, v);
}

static inline float32x4_t act_vec(float32x4_t v, int act) {
    switch (act) {
    case HM_ACT_RELU: return vbslq_f32(vcgtq_f32(v, vdupq_n_f32(0.0f)), v, vdupq_n_f32(0.0f));
    case HM_ACT_RELU6: return clamp_vec(v, 0.0f, 6.0f);
    case HM_ACT_RELU_N1_TO_1: return clamp_vec(v, -1.0f, 1.0f);
    default: return v;
    }
}

/* The first n (< 4) floats at p into a zeroed vector, and back. */
static inline float32x4_t load_part(const float *p, size_t n) {
    float t[4] = {0};
    memcpy(t, p, n * sizeof(float));
    return vld1q_f32(t);
}
static inline void store_part(float *p, float32x4_t v, size_t n) {
    float t[4];
    vst1q_f32(t, v);
    memcpy(p, t, n * sizeof(float));
}

void hm_vec_act_neon(float *x, size_t n, int act) {
    if (act == HM_ACT_NONE) return;
    size_t i = 0;
    for (; i + 4 <= n; i += 4) vst1q_f32(x + i, act_vec(vld1q_f32(x + i), act));
    if (i < n) store_part(x + i, act_vec(load_part(x + i, n - i), act), n - i);
}

void hm_vec_add_neon(const float *a, const float *b, float *y, size_t n, int act) {
    size_t i = 0;
    for (; i + 4 <= n; i += 4) vst1q_f32(y + i, act_vec(vaddq_f32(vld1q_f32(a + i), vld1q_f32(b + i)), act));
    if (i < n) store_part(y + i, act_vec(vaddq_f32(load_part(a + i, n - i), load_part(b + i, n - i)), act), n - i);
}

void hm_vec_copy_neon(float *dst, const float *src, size_t n) {
    if (src) memcpy(dst, src, n * sizeof(float));
    else memset(dst, 0, n * sizeof(float));
}

void hm_vec_copy_strided_neon(float *dst, size_t dstep, const float *src, size_t sstep, size_t len, int n) {
    for (int i = 0; i < n; i++, dst += dstep) hm_vec_copy_neon(dst, src ? src + (size_t)i * sstep : NULL, len);
}

void hm_vec_max_neon(float *o, const float *x, size_t n) {
    size_t i = 0;
    for (; i + 4 <= n; i += 4) {
        const float32x4_t a = vld1q_f32(o + i), b = vld1q_f32(x + i);
        vst1q_f32(o + i, vbslq_f32(vcgtq_f32(b, a), b, a)); /* x > o ? x : o */
    }
    for (; i < n; i++) o[i] = x[i] > o[i] ? x[i] : o[i];
}

/* y = v < 0 ? v * alpha : v (v >= 0 and NaN keep v, as the portable code) */
static inline float32x4_t prelu_vec(float32x4_t v, float32x4_t alpha) {
    return vbslq_f32(vcltq_f32(v, vdupq_n_f32(0.0f)), vmulq_f32(v, alpha), v);
}

void hm_vec_prelu_neon(const float *x, const float *alpha, float *y, size_t rows, size_t c) {
    for (size_t r = 0; r < rows; r++, x += c, y += c) {
        size_t i = 0;
        for (; i + 4 <= c; i += 4) vst1q_f32(y + i, prelu_vec(vld1q_f32(x + i), vld1q_f32(alpha + i)));
        for (; i < c; i++) y[i] = x[i] >= 0.0f ? x[i] : x[i] * alpha[i];
    }
}

void hm_vec_add_prelu_neon(float *y, const float *r, const float *alpha, size_t rows, size_t c, int act) {
    for (size_t i = 0; i < rows; i++, y += c, r += c) {
        size_t j = 0;
        for (; j + 4 <= c; j += 4)
            vst1q_f32(y + j, prelu_vec(act_vec(vaddq_f32(vld1q_f32(y + j), vld1q_f32(r + j)), act), vld1q_f32(alpha + j)));
        if (j < c) {
            const size_t k = c - j;
            store_part(y + j, prelu_vec(act_vec(vaddq_f32(load_part(y + j, k), load_part(r + j, k)), act),
                                        load_part(alpha + j, k)), k);
        }
    }
}

/* One output pixel, channels [c0, c1): bias, then the taps inside the
 * input in (ky, kx) order, 16 channels at a time (four independent FMA
 * chains), then 4, then one; then the activation. */
static void dw_pixel(const hm_dw_geom *g, const float *x, size_t img, int iy0, int ix0, int c0, int c1, float *o) {
    const int H = g->H, W = g->W, C = g->C;
    const int ky0 = iy0 < 0 ? -iy0 : 0, ky1 = H - iy0 < g->kh ? H - iy0 : g->kh;
    const int kx0 = ix0 < 0 ? -ix0 : 0, kx1 = W - ix0 < g->kw ? W - ix0 : g->kw;
    int c = c0;
    for (; c + 16 <= c1; c += 16) {
        float32x4_t a0, a1, a2, a3;
        if (g->bias) {
            a0 = vld1q_f32(g->bias + c), a1 = vld1q_f32(g->bias + c + 4);
            a2 = vld1q_f32(g->bias + c + 8), a3 = vld1q_f32(g->bias + c + 12);
        } else {
            a0 = a1 = a2 = a3 = vdupq_n_f32(0.0f);
        }
        for (int ky = ky0; ky < ky1; ky++) {
            const float *in = x + ((img * H + (size_t)(iy0 + ky)) * W + (size_t)(ix0 + kx0)) * C + c;
            const float *w = g->w + ((size_t)ky * g->kw + kx0) * C + c;
            for (int kx = kx0; kx < kx1; kx++, in += C, w += C) {
                a0 = vfmaq_f32(a0, vld1q_f32(in), vld1q_f32(w));
                a1 = vfmaq_f32(a1, vld1q_f32(in + 4), vld1q_f32(w + 4));
                a2 = vfmaq_f32(a2, vld1q_f32(in + 8), vld1q_f32(w + 8));
                a3 = vfmaq_f32(a3, vld1q_f32(in + 12), vld1q_f32(w + 12));
            }
        }
        float *oc = o + (c - c0);
        vst1q_f32(oc, act_vec(a0, g->act)), vst1q_f32(oc + 4, act_vec(a1, g->act));
        vst1q_f32(oc + 8, act_vec(a2, g->act)), vst1q_f32(oc + 12, act_vec(a3, g->act));
    }
    for (; c < c1; c += 4) {
        const size_t k = c1 - c < 4 ? (size_t)(c1 - c) : 4;
        float32x4_t a = g->bias ? load_part(g->bias + c, k) : vdupq_n_f32(0.0f);
        for (int ky = ky0; ky < ky1; ky++) {
            const float *in = x + ((img * H + (size_t)(iy0 + ky)) * W + (size_t)(ix0 + kx0)) * C + c;
            const float *w = g->w + ((size_t)ky * g->kw + kx0) * C + c;
            for (int kx = kx0; kx < kx1; kx++, in += C, w += C)
                a = vfmaq_f32(a, k == 4 ? vld1q_f32(in) : load_part(in, k), k == 4 ? vld1q_f32(w) : load_part(w, k));
        }
        if (k == 4) vst1q_f32(o + (c - c0), act_vec(a, g->act));
        else store_part(o + (c - c0), act_vec(a, g->act), k);
    }
}

void hm_vec_dw_rows_neon(const hm_dw_geom *g, const float *x, float *y, int r0, int r1, int c0, int c1) {
    for (int r = r0; r < r1; r++) {
        const int img = r / g->OH, oy = r % g->OH;
        for (int ox = 0; ox < g->OW; ox++)
            dw_pixel(g, x, (size_t)img, oy * g->sh - g->pad_top, ox * g->sw - g->pad_left, c0, c1,
                     y + ((size_t)r * g->OW + ox) * g->C + c0);
    }
}
