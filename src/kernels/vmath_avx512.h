/* vmath_avx512.h - vector e^x shared by the AVX-512 kernels (GELU, softmax).
 * Include only from files compiled with -mavx512f (the *_avx512.c files).
 */
#ifndef HM_VMATH_AVX512_H
#define HM_VMATH_AVX512_H
#include <immintrin.h>

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

#endif
