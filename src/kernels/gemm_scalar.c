/* gemm_scalar.c - portable block kernel (no ISA flags; the compiler may use
 * baseline SSE2). Used where the CPU has no AVX2+FMA, or when forced.
 *
 * Tile: MR = 4 rows x NR = 8 columns of float accumulators, which the
 * compiler keeps in eight SSE registers.
 */
#include "kernels/gemm_fp32.h"
#include "kernels/kernels.h"
#include "kernels/vmath.h"

#define MR 4
#define NR HM_GEMM_NR_SCALAR

#define HM_INLINE static inline __attribute__((always_inline))

/* One mr x NR tile; mr is a compile-time constant at each call site. */
HM_INLINE void hm_tile_scalar(const int mr, int nr, int kc, const float *A, size_t lda,
                              const float *P, float *C, size_t ldc, const hm_gemm_epi_args *e) {
    float acc[MR][NR];
    for (int i = 0; i < mr; i++)
        for (int j = 0; j < NR; j++)
            acc[i][j] = 0.0f;
    for (int k = 0; k < kc; k++) {
        const float *p = P + (size_t)k * NR;
        for (int i = 0; i < mr; i++) {
            float a = A[i * lda + k];
            for (int j = 0; j < NR; j++) acc[i][j] += a * p[j];
        }
    }
    for (int i = 0; i < mr; i++)
        for (int j = 0; j < nr; j++) {
            float v = acc[i][j];
            /* C joins after the block's own sum (see gemm_avx512.c). */
            if (e->load_c) v += e->beta * C[i * ldc + j];
            if (e->bias) v += e->bias[j];
            C[i * ldc + j] = e->gelu ? hm_gelu(v) : v;
        }
}

void hm_gemm_block_scalar(int m, int nr, int kc, const float *A, size_t lda,
                          const float *P, float *C, size_t ldc, const hm_gemm_epi_args *e) {
    int i = 0;
    for (; i + MR <= m; i += MR) hm_tile_scalar(MR, nr, kc, A + i * lda, lda, P, C + i * ldc, ldc, e);
    const float *a = A + i * lda;
    float *c = C + i * ldc;
    switch (m - i) {
    case 1: hm_tile_scalar(1, nr, kc, a, lda, P, c, ldc, e); break;
    case 2: hm_tile_scalar(2, nr, kc, a, lda, P, c, ldc, e); break;
    case 3: hm_tile_scalar(3, nr, kc, a, lda, P, c, ldc, e); break;
    default: break;
    }
}

void hm_gelu_vec_c(float *x, size_t n) {
    for (size_t i = 0; i < n; i++) x[i] = hm_gelu(x[i]);
}
