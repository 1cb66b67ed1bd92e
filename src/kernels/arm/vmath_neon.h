/* arm/vmath_neon.h - what the NEON kernels share: vector e^x (GELU,
 * softmax) and GELU itself, the same polynomials and constants as the x86
 * kernels (x86/vmath_avx512.h, x86/gemm_avx2.c), in the same order of
 * fused multiply-adds: the NEON GELU is the AVX2 one operation for
 * operation (u by a true division, as there). Include only from
 * src/kernels/arm/.
 */
#ifndef HM_VMATH_NEON_H
#define HM_VMATH_NEON_H
#include <arm_neon.h>
#include <stddef.h>

#define HM_NEON_INLINE static inline __attribute__((always_inline))

/* e^x for x in [-87, 0]: x = n ln2 + r, |r| <= ln2/2, e^r by a degree-6
 * minimax polynomial (relative error 2.5e-9), 2^n built in the exponent. */
HM_NEON_INLINE float32x4_t hm_exp_neon(float32x4_t x) {
    const float32x4_t n = vrndnq_f32(vmulq_n_f32(x, 1.44269504f));
    float32x4_t r = vfmsq_f32(x, n, vdupq_n_f32(0.693145751953125f));
    r = vfmsq_f32(r, n, vdupq_n_f32(1.42860682e-06f));
    float32x4_t p = vdupq_n_f32(1.394110843e-03f);
    p = vfmaq_f32(vdupq_n_f32(8.375126398e-03f), p, r);
    p = vfmaq_f32(vdupq_n_f32(4.166635290e-02f), p, r);
    p = vfmaq_f32(vdupq_n_f32(1.666641551e-01f), p, r);
    p = vfmaq_f32(vdupq_n_f32(5.000000047e-01f), p, r);
    p = vfmaq_f32(vdupq_n_f32(1.000000038e+00f), p, r);
    p = vfmaq_f32(vdupq_n_f32(1.0f), p, r);
    const int32x4_t e = vshlq_n_s32(vaddq_s32(vcvtnq_s32_f32(n), vdupq_n_s32(127)), 23);
    return vmulq_f32(p, vreinterpretq_f32_s32(e));
}

/* gelu(x) = 0.5 x (1 + erf(x / sqrt 2)) through erfc(|t|) = f(u) e^(-t^2),
 * u = 1 / (1 + p |t|), f of degree 10 (relative error 1.4e-9; see
 * x86/gemm_avx512.c), t^2 split hi + lo so e^(-t^2) keeps full precision;
 * x >= 0: x - h, x < 0: h, h = 0.5 x f e^(-t^2); x > 6: x, x < -13: 0. */
HM_NEON_INLINE float32x4_t hm_gelu_neon(float32x4_t x) {
    const float32x4_t one = vdupq_n_f32(1.0f), zero = vdupq_n_f32(0.0f);
    float32x4_t a = vabsq_f32(vmulq_n_f32(x, 0.70710678f));
    a = vminq_f32(a, vdupq_n_f32(9.25f));
    const float32x4_t u = vdivq_f32(one, vfmaq_f32(one, a, vdupq_n_f32(0.3275911f)));
    float32x4_t f = vdupq_n_f32(6.435220907e-02f);
    f = vfmaq_f32(vdupq_n_f32(-3.624959065e-01f), f, u);
    f = vfmaq_f32(vdupq_n_f32(7.452706968e-01f), f, u);
    f = vfmaq_f32(vdupq_n_f32(-7.373152154e-01f), f, u);
    f = vfmaq_f32(vdupq_n_f32(6.718428050e-01f), f, u);
    f = vfmaq_f32(vdupq_n_f32(-1.598413497e-01f), f, u);
    f = vfmaq_f32(vdupq_n_f32(2.534287517e-01f), f, u);
    f = vfmaq_f32(vdupq_n_f32(1.519111378e-01f), f, u);
    f = vfmaq_f32(vdupq_n_f32(1.883236436e-01f), f, u);
    f = vfmaq_f32(vdupq_n_f32(1.845107949e-01f), f, u);
    f = vfmaq_f32(vdupq_n_f32(1.243316613e-05f), f, u);
    const float32x4_t hi = vmulq_f32(a, a);
    const float32x4_t lo = vnegq_f32(vfmsq_f32(hi, a, a)); /* a*a - hi, exact */
    float32x4_t ex = hm_exp_neon(vsubq_f32(zero, hi));
    ex = vfmsq_f32(ex, ex, lo); /* e^(-hi-lo) */
    const float32x4_t h = vmulq_f32(vmulq_n_f32(x, 0.5f), vmulq_f32(f, ex));
    float32x4_t r = vbslq_f32(vcgeq_f32(x, zero), vsubq_f32(x, h), h);
    r = vbslq_f32(vcgtq_f32(x, vdupq_n_f32(6.0f)), x, r);
    r = vbslq_f32(vcltq_f32(x, vdupq_n_f32(-13.0f)), zero, r);
    return r;
}

#endif
