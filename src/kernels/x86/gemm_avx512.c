/* gemm_avx512.c - AVX-512 micro-kernel and vector GELU (built with
 * -mavx512f/bw/vl/dq -mfma; only called after CPUID says so).
 *
 * Register tile: MR = 12 rows x NR = 32 columns = 24 zmm accumulators, plus
 * two for the packed W row and one broadcast of A. Per k: 2 aligned loads,
 * 12 broadcasts, 24 FMAs, so the FMA units, not the loads, set the pace.
 */
#include <immintrin.h>

#include "core/sanitize.h"
#include "kernels/gemm_fp32.h"
#include "kernels/x86/vmath_avx512.h"
#include "kernels/x86/x86.h"

#define MR 12
#define NR HM_GEMM_NR_AVX512

#define HM_INLINE static inline __attribute__((always_inline))

/* ---- GELU ------------------------------------------------------------- */

/* gelu(x) = 0.5 x (1 + erf(t)), t = x / sqrt 2, written through erfc(|t|)
 * so neither tail cancels: x >= 0: x - h, x < 0: h, with h = 0.5 x erfc(|t|).
 * erfc(a) = f(u) e^(-a^2), u = 1 / (1 + p a); f is a degree-10 polynomial in
 * u fitted on a in [0, 10] (relative error 1.4e-9, the A&S 7.1.26 variable
 * with more terms). a^2 is split hi + lo so e^(-a^2) keeps full precision. */
HM_INLINE __m512 hm_gelu512(__m512 x) {
    const __m512 one = _mm512_set1_ps(1.0f);
    __m512 a = _mm512_abs_ps(_mm512_mul_ps(x, _mm512_set1_ps(0.70710678f)));
    a = _mm512_min_ps(a, _mm512_set1_ps(9.25f)); /* keeps e^(-a^2) normal */
    /* u = 1 / den by the 14-bit reciprocal and one Newton step (relative
     * error ~2^-27, under float rounding): vdivps zmm was ~40 % of the
     * function's time (fc1's epilogue) */
    const __m512 den = _mm512_fmadd_ps(a, _mm512_set1_ps(0.3275911f), one);
    __m512 u = _mm512_rcp14_ps(den);
    u = _mm512_fmadd_ps(u, _mm512_fnmadd_ps(den, u, one), u);
    __m512 f = _mm512_set1_ps(6.435220907e-02f);
    f = _mm512_fmadd_ps(f, u, _mm512_set1_ps(-3.624959065e-01f));
    f = _mm512_fmadd_ps(f, u, _mm512_set1_ps(7.452706968e-01f));
    f = _mm512_fmadd_ps(f, u, _mm512_set1_ps(-7.373152154e-01f));
    f = _mm512_fmadd_ps(f, u, _mm512_set1_ps(6.718428050e-01f));
    f = _mm512_fmadd_ps(f, u, _mm512_set1_ps(-1.598413497e-01f));
    f = _mm512_fmadd_ps(f, u, _mm512_set1_ps(2.534287517e-01f));
    f = _mm512_fmadd_ps(f, u, _mm512_set1_ps(1.519111378e-01f));
    f = _mm512_fmadd_ps(f, u, _mm512_set1_ps(1.883236436e-01f));
    f = _mm512_fmadd_ps(f, u, _mm512_set1_ps(1.845107949e-01f));
    f = _mm512_fmadd_ps(f, u, _mm512_set1_ps(1.243316613e-05f));
    __m512 hi = _mm512_mul_ps(a, a);
    __m512 lo = _mm512_fmsub_ps(a, a, hi);                /* a*a - hi, exact */
    __m512 ex = hm_exp512(_mm512_sub_ps(_mm512_setzero_ps(), hi));
    ex = _mm512_fnmadd_ps(ex, lo, ex);                    /* e^(-hi-lo) */
    __m512 h = _mm512_mul_ps(_mm512_mul_ps(_mm512_set1_ps(0.5f), x), _mm512_mul_ps(f, ex));
    __mmask16 pos = _mm512_cmp_ps_mask(x, _mm512_setzero_ps(), _CMP_GE_OQ);
    __m512 r = _mm512_mask_sub_ps(h, pos, x, h);
    /* Far tails: the result is x (or 0) to float precision; selecting it
     * also keeps +-inf from turning into inf - inf. */
    r = _mm512_mask_mov_ps(r, _mm512_cmp_ps_mask(x, _mm512_set1_ps(6.0f), _CMP_GT_OQ), x);
    r = _mm512_mask_mov_ps(r, _mm512_cmp_ps_mask(x, _mm512_set1_ps(-13.0f), _CMP_LT_OQ), _mm512_setzero_ps());
    return r;
}

void hm_gelu_vec_avx512(float *x, size_t n) {
    size_t i = 0;
    /* four vectors side by side: one is a long chain of dependent FMAs */
    for (; i + 64 <= n; i += 64) {
        const __m512 a = hm_gelu512(_mm512_loadu_ps(x + i)), b = hm_gelu512(_mm512_loadu_ps(x + i + 16));
        const __m512 c = hm_gelu512(_mm512_loadu_ps(x + i + 32)), d = hm_gelu512(_mm512_loadu_ps(x + i + 48));
        _mm512_storeu_ps(x + i, a), _mm512_storeu_ps(x + i + 16, b);
        _mm512_storeu_ps(x + i + 32, c), _mm512_storeu_ps(x + i + 48, d);
    }
    for (; i + 16 <= n; i += 16) _mm512_storeu_ps(x + i, hm_gelu512(_mm512_loadu_ps(x + i)));
    if (i < n) {
        __mmask16 m = (__mmask16)((1u << (n - i)) - 1);
        _mm512_mask_storeu_ps(x + i, m, hm_gelu512(_mm512_maskz_loadu_ps(m, x + i)));
    }
}

void hm_gelu_rows_avx512(float *C, size_t ldc, int mr, int nr) {
    int i = 0;
    if (nr > 16 && nr <= 32) { /* two rows of two vectors side by side, as above */
        const __mmask16 m = (__mmask16)(nr >= 32 ? 0xFFFF : (1u << (nr - 16)) - 1);
        for (; i + 2 <= mr; i += 2) {
            float *r0 = C + (size_t)i * ldc, *r1 = r0 + ldc;
            const __m512 a = hm_gelu512(_mm512_loadu_ps(r0)), b = hm_gelu512(_mm512_maskz_loadu_ps(m, r0 + 16));
            const __m512 c = hm_gelu512(_mm512_loadu_ps(r1)), d = hm_gelu512(_mm512_maskz_loadu_ps(m, r1 + 16));
            _mm512_storeu_ps(r0, a), _mm512_mask_storeu_ps(r0 + 16, m, b);
            _mm512_storeu_ps(r1, c), _mm512_mask_storeu_ps(r1 + 16, m, d);
        }
    }
    for (; i < mr; i++) hm_gelu_vec_avx512(C + (size_t)i * ldc, (size_t)nr);
}

/* ---- micro-kernel ------------------------------------------------------ */

/* One mr x NR tile; mr is a compile-time constant at every call site, so the
 * accumulator arrays are fully unrolled into registers. */
HM_INLINE HM_ASAN_BY_REGION void hm_tile512(const int mr, const int nv, int nr, int kc, const float *A, size_t lda,
                          const float *P, float *C, size_t ldc, const hm_gemm_epi_args *e) {
    __m512 c0[MR], c1[MR];
    __mmask16 m0 = nr >= 16 ? (__mmask16)0xFFFF : (__mmask16)((1u << nr) - 1);
    __mmask16 m1 = nr >= 32 ? (__mmask16)0xFFFF : nr <= 16 ? 0 : (__mmask16)((1u << (nr - 16)) - 1);
#pragma GCC unroll 12
    for (int i = 0; i < mr; i++) c0[i] = c1[i] = _mm512_setzero_ps();
    for (int k = 0; k < kc; k++) {
        __m512 b0 = _mm512_load_ps(P + (size_t)k * NR);
        __m512 b1 = nv == 2 ? _mm512_load_ps(P + (size_t)k * NR + 16) : b0;
#pragma GCC unroll 12
        for (int i = 0; i < mr; i++) {
            __m512 a = _mm512_set1_ps(A[i * lda + k]);
            c0[i] = _mm512_fmadd_ps(a, b0, c0[i]);
            if (nv == 2) c1[i] = _mm512_fmadd_ps(a, b1, c1[i]);
        }
    }
    /* C joins after the block's own sum: the K loop is summed in KC-sized
     * pieces that are then added up, which keeps fp32 rounding error far
     * below one long running sum at K = 5120. */
    if (e->load_c) {
        __m512 beta = _mm512_set1_ps(e->beta);
#pragma GCC unroll 12
        for (int i = 0; i < mr; i++) {
            c0[i] = _mm512_fmadd_ps(beta, _mm512_maskz_loadu_ps(m0, C + i * ldc), c0[i]);
            if (nv == 2) c1[i] = _mm512_fmadd_ps(beta, _mm512_maskz_loadu_ps(m1, C + i * ldc + 16), c1[i]);
        }
    }
    if (e->bias) {
        __m512 b0 = _mm512_loadu_ps(e->bias), b1 = _mm512_loadu_ps(e->bias + 16);
#pragma GCC unroll 12
        for (int i = 0; i < mr; i++) {
            c0[i] = _mm512_add_ps(c0[i], b0);
            if (nv == 2) c1[i] = _mm512_add_ps(c1[i], b1);
        }
    }
#pragma GCC unroll 12
    for (int i = 0; i < mr; i++) {
        _mm512_mask_storeu_ps(C + i * ldc, m0, c0[i]);
        if (nv == 2) _mm512_mask_storeu_ps(C + i * ldc + 16, m1, c1[i]);
    }
    /* GELU on the just-stored (L1-hot) tile rather than on the registers:
     * one out-of-line copy of the polynomial instead of one per tile shape. */
    if (e->gelu) hm_gelu_rows_avx512(C, ldc, mr, nr);
}

/* All m rows in tiles of MR (then the tail) with nv vectors of columns; each
 * tile asks for its share of the next block's chunk. */
HM_INLINE HM_ASAN_BY_REGION void hm_block_rows(const int nv, int m, int nr, int kc, const float *A, size_t lda, const float *P,
                             float *C, size_t ldc, const hm_gemm_epi_args *e) {
    int i = 0;
    const int ntiles = (m + MR - 1) / MR;
    for (; i + MR <= m; i += MR) {
        hm_prefetch_part(e->next, e->next_bytes, i / MR, ntiles);
        hm_tile512(MR, nv, nr, kc, A + i * lda, lda, P, C + i * ldc, ldc, e);
    }
    hm_prefetch_part(e->next, e->next_bytes, i / MR, ntiles); /* the row tail's part, if any */
    const float *a = A + i * lda;
    float *c = C + i * ldc;
    switch (m - i) {
    case 0: break;
    case 1: hm_tile512(1, nv, nr, kc, a, lda, P, c, ldc, e); break;
    case 2: hm_tile512(2, nv, nr, kc, a, lda, P, c, ldc, e); break;
    case 3: hm_tile512(3, nv, nr, kc, a, lda, P, c, ldc, e); break;
    case 4: hm_tile512(4, nv, nr, kc, a, lda, P, c, ldc, e); break;
    case 5: hm_tile512(5, nv, nr, kc, a, lda, P, c, ldc, e); break;
    case 6: hm_tile512(6, nv, nr, kc, a, lda, P, c, ldc, e); break;
    case 7: hm_tile512(7, nv, nr, kc, a, lda, P, c, ldc, e); break;
    case 8: hm_tile512(8, nv, nr, kc, a, lda, P, c, ldc, e); break;
    case 9: hm_tile512(9, nv, nr, kc, a, lda, P, c, ldc, e); break;
    case 10: hm_tile512(10, nv, nr, kc, a, lda, P, c, ldc, e); break;
    case 11: hm_tile512(11, nv, nr, kc, a, lda, P, c, ldc, e); break;
    }
}

/* Under ASan the operands are checked here, region by region (sanitize.h):
 * A's rows (kc floats each), the packed chunk (kc x NR), the bias (NR, the
 * padded copy), C's rows (nr floats, read when load_c, always written). */
#ifdef HM_ASAN
static void block_regions(int m, int nr, int kc, const float *A, size_t lda, const float *P, float *C, size_t ldc,
                          const hm_gemm_epi_args *e) {
    hm_asan_region(P, (size_t)kc * NR * sizeof(float), 0);
    if (e->bias) hm_asan_region(e->bias, NR * sizeof(float), 0);
    for (int i = 0; i < m; i++) {
        hm_asan_region(A + i * lda, (size_t)kc * sizeof(float), 0);
        hm_asan_region(C + i * ldc, (size_t)nr * sizeof(float), 1);
    }
}
#endif

HM_ASAN_BY_REGION void hm_gemm_block_avx512(int m, int nr, int kc, const float *A, size_t lda,
                                            const float *P, float *C, size_t ldc, const hm_gemm_epi_args *e) {
#ifdef HM_ASAN
    block_regions(m, nr, kc, A, lda, P, C, ldc, e);
#endif
    /* a panel's last columns, 16 or fewer of them (a detector layer's N of
     * 40, 80, 112 or 144): one vector a row, half the FMAs */
    if (nr <= 16) {
        hm_block_rows(1, m, nr, kc, A, lda, P, C, ldc, e);
        return;
    }
    hm_block_rows(2, m, nr, kc, A, lda, P, C, ldc, e);
}
