/* gemm_avx2.c - AVX2+FMA micro-kernel and vector GELU (built with -mavx2
 * -mfma; only called after CPUID says so).
 *
 * Register tile: MR = 6 rows x NR = 16 columns = 12 ymm accumulators, plus
 * two for the packed W row and one broadcast: 15 of the 16 ymm registers.
 */
#include <immintrin.h>

#include "kernels/gemm_fp32.h"
#include "kernels/x86/x86.h"

#define MR 6
#define NR HM_GEMM_NR_AVX2

#define HM_INLINE static inline __attribute__((always_inline))

/* ---- GELU (same method and constants as gemm_avx512.c) ----------------- */

/* e^x for x in [-87, 0]: x = n ln2 + r, degree-6 minimax for e^r. */
HM_INLINE __m256 hm_exp256(__m256 x) {
    __m256 n = _mm256_round_ps(_mm256_mul_ps(x, _mm256_set1_ps(1.44269504f)),
                               _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m256 r = _mm256_fnmadd_ps(n, _mm256_set1_ps(0.693145751953125f), x);
    r = _mm256_fnmadd_ps(n, _mm256_set1_ps(1.42860682e-06f), r);
    __m256 p = _mm256_set1_ps(1.394110843e-03f);
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(8.375126398e-03f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(4.166635290e-02f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.666641551e-01f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(5.000000047e-01f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.000000038e+00f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f));
    __m256i e = _mm256_slli_epi32(_mm256_add_epi32(_mm256_cvtps_epi32(n), _mm256_set1_epi32(127)), 23);
    return _mm256_mul_ps(p, _mm256_castsi256_ps(e));
}

/* gelu via erfc(|x| / sqrt 2) = f(u) e^(-a^2); see hm_gelu512. */
HM_INLINE __m256 hm_gelu256(__m256 x) {
    const __m256 one = _mm256_set1_ps(1.0f), zero = _mm256_setzero_ps();
    __m256 a = _mm256_andnot_ps(_mm256_set1_ps(-0.0f), _mm256_mul_ps(x, _mm256_set1_ps(0.70710678f)));
    a = _mm256_min_ps(a, _mm256_set1_ps(9.25f));
    __m256 u = _mm256_div_ps(one, _mm256_fmadd_ps(a, _mm256_set1_ps(0.3275911f), one));
    __m256 f = _mm256_set1_ps(6.435220907e-02f);
    f = _mm256_fmadd_ps(f, u, _mm256_set1_ps(-3.624959065e-01f));
    f = _mm256_fmadd_ps(f, u, _mm256_set1_ps(7.452706968e-01f));
    f = _mm256_fmadd_ps(f, u, _mm256_set1_ps(-7.373152154e-01f));
    f = _mm256_fmadd_ps(f, u, _mm256_set1_ps(6.718428050e-01f));
    f = _mm256_fmadd_ps(f, u, _mm256_set1_ps(-1.598413497e-01f));
    f = _mm256_fmadd_ps(f, u, _mm256_set1_ps(2.534287517e-01f));
    f = _mm256_fmadd_ps(f, u, _mm256_set1_ps(1.519111378e-01f));
    f = _mm256_fmadd_ps(f, u, _mm256_set1_ps(1.883236436e-01f));
    f = _mm256_fmadd_ps(f, u, _mm256_set1_ps(1.845107949e-01f));
    f = _mm256_fmadd_ps(f, u, _mm256_set1_ps(1.243316613e-05f));
    __m256 hi = _mm256_mul_ps(a, a);
    __m256 lo = _mm256_fmsub_ps(a, a, hi);
    __m256 ex = hm_exp256(_mm256_sub_ps(zero, hi));
    ex = _mm256_fnmadd_ps(ex, lo, ex);
    __m256 h = _mm256_mul_ps(_mm256_mul_ps(_mm256_set1_ps(0.5f), x), _mm256_mul_ps(f, ex));
    __m256 r = _mm256_blendv_ps(h, _mm256_sub_ps(x, h), _mm256_cmp_ps(x, zero, _CMP_GE_OQ));
    r = _mm256_blendv_ps(r, x, _mm256_cmp_ps(x, _mm256_set1_ps(6.0f), _CMP_GT_OQ));
    r = _mm256_blendv_ps(r, zero, _mm256_cmp_ps(x, _mm256_set1_ps(-13.0f), _CMP_LT_OQ));
    return r;
}

/* Lane mask with the first n (0..8) of 8 lanes set. */
HM_INLINE __m256i hm_mask256(int n) {
    return _mm256_cmpgt_epi32(_mm256_set1_epi32(n), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
}

void hm_gelu_vec_avx2(float *x, size_t n) {
    size_t i = 0;
    for (; i + 8 <= n; i += 8) _mm256_storeu_ps(x + i, hm_gelu256(_mm256_loadu_ps(x + i)));
    if (i < n) {
        __m256i m = hm_mask256((int)(n - i));
        _mm256_maskstore_ps(x + i, m, hm_gelu256(_mm256_maskload_ps(x + i, m)));
    }
}

/* ---- micro-kernel ------------------------------------------------------ */

/* One mr x NR tile; mr is a compile-time constant at every call site. */
HM_INLINE void hm_tile256(const int mr, int nr, int kc, const float *A, size_t lda,
                          const float *P, float *C, size_t ldc, const hm_gemm_epi_args *e) {
    __m256 c0[MR], c1[MR];
    int full = nr == NR;
    __m256i m0 = hm_mask256(nr < 8 ? nr : 8), m1 = hm_mask256(nr > 8 ? nr - 8 : 0);
#pragma GCC unroll 6
    for (int i = 0; i < mr; i++) c0[i] = c1[i] = _mm256_setzero_ps();
    for (int k = 0; k < kc; k++) {
        __m256 b0 = _mm256_load_ps(P + (size_t)k * NR);
        __m256 b1 = _mm256_load_ps(P + (size_t)k * NR + 8);
#pragma GCC unroll 6
        for (int i = 0; i < mr; i++) {
            __m256 a = _mm256_broadcast_ss(A + i * lda + k);
            c0[i] = _mm256_fmadd_ps(a, b0, c0[i]);
            c1[i] = _mm256_fmadd_ps(a, b1, c1[i]);
        }
    }
    /* C joins after the block's own sum (pairwise over K blocks; see
     * gemm_avx512.c). */
    if (e->load_c) {
        __m256 beta = _mm256_set1_ps(e->beta);
#pragma GCC unroll 6
        for (int i = 0; i < mr; i++) {
            c0[i] = _mm256_fmadd_ps(beta, _mm256_maskload_ps(C + i * ldc, m0), c0[i]);
            c1[i] = _mm256_fmadd_ps(beta, _mm256_maskload_ps(C + i * ldc + 8, m1), c1[i]);
        }
    }
    if (e->bias) {
        __m256 b0 = _mm256_loadu_ps(e->bias), b1 = _mm256_loadu_ps(e->bias + 8);
#pragma GCC unroll 6
        for (int i = 0; i < mr; i++) {
            c0[i] = _mm256_add_ps(c0[i], b0);
            c1[i] = _mm256_add_ps(c1[i], b1);
        }
    }
#pragma GCC unroll 6
    for (int i = 0; i < mr; i++) {
        if (full) {
            _mm256_storeu_ps(C + i * ldc, c0[i]);
            _mm256_storeu_ps(C + i * ldc + 8, c1[i]);
        } else {
            _mm256_maskstore_ps(C + i * ldc, m0, c0[i]);
            _mm256_maskstore_ps(C + i * ldc + 8, m1, c1[i]);
        }
    }
    /* GELU on the stored, L1-hot tile: one copy of the polynomial. */
    if (e->gelu)
        for (int i = 0; i < mr; i++) hm_gelu_vec_avx2(C + i * ldc, (size_t)nr);
}

void hm_gemm_block_avx2(int m, int nr, int kc, const float *A, size_t lda,
                        const float *P, float *C, size_t ldc, const hm_gemm_epi_args *e) {
    int i = 0;
    for (; i + MR <= m; i += MR) hm_tile256(MR, nr, kc, A + i * lda, lda, P, C + i * ldc, ldc, e);
    const float *a = A + i * lda;
    float *c = C + i * ldc;
    switch (m - i) {
    case 1: hm_tile256(1, nr, kc, a, lda, P, c, ldc, e); break;
    case 2: hm_tile256(2, nr, kc, a, lda, P, c, ldc, e); break;
    case 3: hm_tile256(3, nr, kc, a, lda, P, c, ldc, e); break;
    case 4: hm_tile256(4, nr, kc, a, lda, P, c, ldc, e); break;
    case 5: hm_tile256(5, nr, kc, a, lda, P, c, ldc, e); break;
    default: break;
    }
}
