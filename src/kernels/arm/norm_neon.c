/* arm/norm_neon.c - LayerNorm and softmax rows with Advanced SIMD (the
 * neon level's, kernels.h; norm.h's contracts).
 *
 * LayerNorm statistics in double, as the portable code (two double lanes
 * per vector, four partial sums); softmax through the shared polynomial e^x
 * (vmath_neon.h), clamped at -87 where e^x is negligible, NaN kept.
 */
#include <arm_neon.h>
#include <math.h>

#include "kernels/arm/arm.h"
#include "kernels/arm/vmath_neon.h"

void hm_layernorm_neon(const float *x, float *y, int n, int d, const float *w, const float *b, float eps) {
    for (int r = 0; r < n; r++) {
        const float *xr = x + (size_t)r * d;
        float *yr = y + (size_t)r * d;
        float64x2_t s0 = vdupq_n_f64(0.0), s1 = s0;
        int i = 0;
        for (; i + 4 <= d; i += 4) {
            const float32x4_t v = vld1q_f32(xr + i);
            s0 = vaddq_f64(s0, vcvt_f64_f32(vget_low_f32(v)));
            s1 = vaddq_f64(s1, vcvt_high_f64_f32(v));
        }
        double s = vaddvq_f64(vaddq_f64(s0, s1));
        for (; i < d; i++) s += xr[i];
        const double mean = s / d;
        const float64x2_t mv = vdupq_n_f64(mean);
        s0 = s1 = vdupq_n_f64(0.0);
        for (i = 0; i + 4 <= d; i += 4) {
            const float32x4_t v = vld1q_f32(xr + i);
            const float64x2_t t0 = vsubq_f64(vcvt_f64_f32(vget_low_f32(v)), mv);
            const float64x2_t t1 = vsubq_f64(vcvt_high_f64_f32(v), mv);
            s0 = vfmaq_f64(s0, t0, t0);
            s1 = vfmaq_f64(s1, t1, t1);
        }
        double ss = vaddvq_f64(vaddq_f64(s0, s1));
        for (; i < d; i++) ss += (xr[i] - mean) * (xr[i] - mean);
        const float inv = (float)(1.0 / sqrt(ss / d + eps)), mf = (float)mean;
        const float32x4_t iv = vdupq_n_f32(inv), m4 = vdupq_n_f32(mf);
        for (i = 0; i + 4 <= d; i += 4) {
            const float32x4_t v = vmulq_f32(vsubq_f32(vld1q_f32(xr + i), m4), iv);
            vst1q_f32(yr + i, vfmaq_f32(vld1q_f32(b + i), v, vld1q_f32(w + i)));
        }
        for (; i < d; i++) yr[i] = fmaf((xr[i] - mf) * inv, w[i], b[i]);
    }
}

void hm_softmax_neon(float *x, int n) {
    float32x4_t mx = vdupq_n_f32(-INFINITY);
    int i = 0;
    for (; i + 4 <= n; i += 4) mx = vmaxq_f32(mx, vld1q_f32(x + i));
    float top = vmaxvq_f32(mx);
    for (; i < n; i++) top = x[i] > top || x[i] != x[i] ? x[i] : top;
    const float32x4_t t4 = vdupq_n_f32(top), lo = vdupq_n_f32(-87.0f);
    float32x4_t sum = vdupq_n_f32(0.0f);
    /* vmaxq (FMAX) gives NaN when either input is NaN: NaN propagates */
    for (i = 0; i + 4 <= n; i += 4) {
        const float32x4_t e = hm_exp_neon(vmaxq_f32(lo, vsubq_f32(vld1q_f32(x + i), t4)));
        sum = vaddq_f32(sum, e);
        vst1q_f32(x + i, e);
    }
    float s = vaddvq_f32(sum);
    if (i < n) {
        float t[4] = {-87.0f, -87.0f, -87.0f, -87.0f};
        for (int j = i; j < n; j++) t[j - i] = x[j] - top;
        float e[4];
        vst1q_f32(e, hm_exp_neon(vmaxq_f32(lo, vld1q_f32(t))));
        for (int j = i; j < n; j++) x[j] = e[j - i], s += e[j - i];
    }
    const float32x4_t inv = vdupq_n_f32(1.0f / s);
    for (i = 0; i + 4 <= n; i += 4) vst1q_f32(x + i, vmulq_f32(vld1q_f32(x + i), inv));
    for (; i < n; i++) x[i] *= 1.0f / s;
}
