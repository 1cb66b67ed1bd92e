/* vmath_avx512.h - what the AVX-512 kernels share: vector e^x (GELU,
 * softmax), the softmax of four rows side by side and a 16 x 16 transpose
 * (the attention heads). Include only from files compiled with -mavx512f
 * (the *_avx512.c, *_avx512vnni.c and *_amx.c files).
 */
#ifndef HM_VMATH_AVX512_H
#define HM_VMATH_AVX512_H
#include <immintrin.h>
#include <stddef.h>

/* e^x for x in [-87, 0] (no overflow/underflow handling needed there):
 * x = n ln2 + r, |r| <= ln2/2, e^r by a degree-6 minimax polynomial
 * (relative error 2.5e-9), 2^n assembled in the exponent field. */
static inline __attribute__((always_inline)) __m512 hm_exp512(__m512 x) {
    const __m512 log2e = _mm512_set1_ps(1.44269504f);
    __m512 n = _mm512_roundscale_ps(_mm512_mul_ps(x, log2e), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m512 r = _mm512_fnmadd_ps(n, _mm512_set1_ps(0.693145751953125f), x);
    r = _mm512_fnmadd_ps(n, _mm512_set1_ps(1.42860682e-06f), r);
    __m512 p = _mm512_set1_ps(1.394110843e-03f);
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(8.375126398e-03f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(4.166635290e-02f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.666641551e-01f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(5.000000047e-01f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.000000038e+00f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f));
    __m512i e = _mm512_slli_epi32(_mm512_add_epi32(_mm512_cvtps_epi32(n), _mm512_set1_epi32(127)), 23);
    return _mm512_mul_ps(p, _mm512_castsi512_ps(e));
}

/* 16 x 16 floats: t[j][i] = s[i][j]; s rows ls apart, t rows lt apart. */
static inline void hm_transpose16_avx512(const float *s, size_t ls, float *t, size_t lt) {
    __m512 r[16], u[16];
    for (int i = 0; i < 16; i++) r[i] = _mm512_loadu_ps(s + i * ls);
    for (int i = 0; i < 16; i += 2) {
        u[i] = _mm512_unpacklo_ps(r[i], r[i + 1]);
        u[i + 1] = _mm512_unpackhi_ps(r[i], r[i + 1]);
    }
    for (int i = 0; i < 16; i += 4) {
        r[i] = _mm512_shuffle_ps(u[i], u[i + 2], 0x44);
        r[i + 1] = _mm512_shuffle_ps(u[i], u[i + 2], 0xEE);
        r[i + 2] = _mm512_shuffle_ps(u[i + 1], u[i + 3], 0x44);
        r[i + 3] = _mm512_shuffle_ps(u[i + 1], u[i + 3], 0xEE);
    }
    /* r[4a + b] now holds, in each 128-bit lane L, column 4L + b of rows
     * 4a..4a+3; gather the lanes of four row groups per output row */
    for (int b = 0; b < 4; b++) {
        __m512 x0 = _mm512_shuffle_f32x4(r[b], r[4 + b], 0x88);      /* lanes 0,2 of g0 | 0,2 of g1 */
        __m512 x1 = _mm512_shuffle_f32x4(r[b], r[4 + b], 0xDD);      /* lanes 1,3 */
        __m512 y0 = _mm512_shuffle_f32x4(r[8 + b], r[12 + b], 0x88);
        __m512 y1 = _mm512_shuffle_f32x4(r[8 + b], r[12 + b], 0xDD);
        u[b] = _mm512_shuffle_f32x4(x0, y0, 0x88);       /* column b:      lane 0 of g0..g3 */
        u[8 + b] = _mm512_shuffle_f32x4(x0, y0, 0xDD);   /* column 8 + b:  lane 2 */
        u[4 + b] = _mm512_shuffle_f32x4(x1, y1, 0x88);   /* column 4 + b:  lane 1 */
        u[12 + b] = _mm512_shuffle_f32x4(x1, y1, 0xDD);  /* column 12 + b: lane 3 */
    }
    for (int j = 0; j < 16; j++) _mm512_storeu_ps(t + j * lt, u[j]);
}

/* The 4 rows of S (n floats each, n a multiple of 16, rows n apart) ->
 * e^(s - max) in place, their sums' inverses into inv (the caller applies
 * them: the fused fp32 head to its output, one multiply per output value
 * rather than a third pass). The four rows go through the polynomial side
 * by side: one row alone is a chain of dependent FMAs. As hm_softmax: e^x
 * clamped at x = -87, where it is negligible, NaN kept. */
static inline void hm_softmax4_avx512(float *S, int n, float inv[4]) {
    float *s0 = S, *s1 = S + n, *s2 = S + 2 * n, *s3 = S + 3 * n;
    __m512 m0 = _mm512_loadu_ps(s0), m1 = _mm512_loadu_ps(s1), m2 = _mm512_loadu_ps(s2), m3 = _mm512_loadu_ps(s3);
    for (int t = 16; t < n; t += 16) {
        m0 = _mm512_max_ps(m0, _mm512_loadu_ps(s0 + t)), m1 = _mm512_max_ps(m1, _mm512_loadu_ps(s1 + t));
        m2 = _mm512_max_ps(m2, _mm512_loadu_ps(s2 + t)), m3 = _mm512_max_ps(m3, _mm512_loadu_ps(s3 + t));
    }
    m0 = _mm512_set1_ps(_mm512_reduce_max_ps(m0)), m1 = _mm512_set1_ps(_mm512_reduce_max_ps(m1));
    m2 = _mm512_set1_ps(_mm512_reduce_max_ps(m2)), m3 = _mm512_set1_ps(_mm512_reduce_max_ps(m3));
    const __m512 lo = _mm512_set1_ps(-87.0f);
    __m512 a0 = _mm512_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;
    for (int t = 0; t < n; t += 16) {
        const __m512 e0 = hm_exp512(_mm512_max_ps(lo, _mm512_sub_ps(_mm512_loadu_ps(s0 + t), m0)));
        const __m512 e1 = hm_exp512(_mm512_max_ps(lo, _mm512_sub_ps(_mm512_loadu_ps(s1 + t), m1)));
        const __m512 e2 = hm_exp512(_mm512_max_ps(lo, _mm512_sub_ps(_mm512_loadu_ps(s2 + t), m2)));
        const __m512 e3 = hm_exp512(_mm512_max_ps(lo, _mm512_sub_ps(_mm512_loadu_ps(s3 + t), m3)));
        _mm512_storeu_ps(s0 + t, e0), _mm512_storeu_ps(s1 + t, e1);
        _mm512_storeu_ps(s2 + t, e2), _mm512_storeu_ps(s3 + t, e3);
        a0 = _mm512_add_ps(a0, e0), a1 = _mm512_add_ps(a1, e1), a2 = _mm512_add_ps(a2, e2), a3 = _mm512_add_ps(a3, e3);
    }
    inv[0] = 1.0f / _mm512_reduce_add_ps(a0), inv[1] = 1.0f / _mm512_reduce_add_ps(a1);
    inv[2] = 1.0f / _mm512_reduce_add_ps(a2), inv[3] = 1.0f / _mm512_reduce_add_ps(a3);
}

#endif
