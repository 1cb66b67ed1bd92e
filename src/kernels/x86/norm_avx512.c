/* norm_avx512.c - LayerNorm and softmax rows with AVX-512 (built with
 * -mavx512f/dq; reached only through hm_layernorm / hm_softmax when the
 * active ISA is avx512).
 *
 * Same contracts as the portable versions in norm.c: LayerNorm statistics
 * in double (now eight lanes at a time), softmax through the shared
 * polynomial e^x. The portable loops could not be vectorised by the
 * compiler (ordered double sums, libm expf), and at 192 tokens x 16 heads x
 * 32 blocks the scalar expf alone cost more than the attention matmuls.
 */
#include <immintrin.h>
#include <math.h>

#include "kernels/norm.h"
#include "kernels/x86/vmath_avx512.h"
#include "kernels/x86/x86.h"

static inline __mmask16 tail_mask(int left) {
    return left >= 16 ? (__mmask16)0xFFFF : (__mmask16)((1u << left) - 1);
}

void hm_layernorm_avx512(const float *x, float *y, int n, int d, const float *w, const float *b, float eps) {
    for (int r = 0; r < n; r++) {
        const float *xr = x + (size_t)r * d;
        float *yr = y + (size_t)r * d;
        __m512d s0 = _mm512_setzero_pd(), s1 = _mm512_setzero_pd();
        for (int i = 0; i < d; i += 16) {
            __m512 v = _mm512_maskz_loadu_ps(tail_mask(d - i), xr + i);
            s0 = _mm512_add_pd(s0, _mm512_cvtps_pd(_mm512_castps512_ps256(v)));
            s1 = _mm512_add_pd(s1, _mm512_cvtps_pd(_mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(v), 1))));
        }
        double mean = _mm512_reduce_add_pd(_mm512_add_pd(s0, s1)) / d;
        __m512d mv = _mm512_set1_pd(mean);
        s0 = s1 = _mm512_setzero_pd();
        for (int i = 0; i < d; i += 16) {
            __mmask16 m = tail_mask(d - i);
            __m512 v = _mm512_maskz_loadu_ps(m, xr + i);
            /* Masked-off lanes would contribute (0 - mean)^2: zero them. */
            __m512d t0 = _mm512_maskz_sub_pd((__mmask8)m, _mm512_cvtps_pd(_mm512_castps512_ps256(v)), mv);
            __m512d t1 = _mm512_maskz_sub_pd((__mmask8)(m >> 8),
                _mm512_cvtps_pd(_mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(v), 1))), mv);
            s0 = _mm512_fmadd_pd(t0, t0, s0);
            s1 = _mm512_fmadd_pd(t1, t1, s1);
        }
        double ss = _mm512_reduce_add_pd(_mm512_add_pd(s0, s1));
        __m512 inv = _mm512_set1_ps((float)(1.0 / sqrt(ss / d + eps)));
        __m512 mf = _mm512_set1_ps((float)mean);
        for (int i = 0; i < d; i += 16) {
            __mmask16 m = tail_mask(d - i);
            __m512 v = _mm512_sub_ps(_mm512_maskz_loadu_ps(m, xr + i), mf);
            v = _mm512_fmadd_ps(_mm512_mul_ps(v, inv), _mm512_maskz_loadu_ps(m, w + i), _mm512_maskz_loadu_ps(m, b + i));
            _mm512_mask_storeu_ps(yr + i, m, v);
        }
    }
}

void hm_softmax_avx512(float *x, int n) {
    __m512 mx = _mm512_set1_ps(-INFINITY);
    for (int i = 0; i < n; i += 16) {
        __mmask16 m = tail_mask(n - i);
        mx = _mm512_mask_max_ps(mx, m, mx, _mm512_maskz_loadu_ps(m, x + i));
    }
    __m512 top = _mm512_set1_ps(_mm512_reduce_max_ps(mx));
    /* e^-87 is already negligible against the row's largest term (e^0);
     * the clamp keeps the polynomial in range. max(lo, v) returns v when v
     * is NaN, so NaN still propagates. */
    const __m512 lo = _mm512_set1_ps(-87.0f);
    __m512 sum = _mm512_setzero_ps();
    for (int i = 0; i < n; i += 16) {
        __mmask16 m = tail_mask(n - i);
        __m512 e = hm_exp512(_mm512_max_ps(lo, _mm512_sub_ps(_mm512_maskz_loadu_ps(m, x + i), top)));
        e = _mm512_maskz_mov_ps(m, e);
        sum = _mm512_add_ps(sum, e);
        _mm512_mask_storeu_ps(x + i, m, e);
    }
    __m512 inv = _mm512_set1_ps(1.0f / _mm512_reduce_add_ps(sum));
    for (int i = 0; i < n; i += 16) {
        __mmask16 m = tail_mask(n - i);
        _mm512_mask_storeu_ps(x + i, m, _mm512_mul_ps(_mm512_maskz_loadu_ps(m, x + i), inv));
    }
}
