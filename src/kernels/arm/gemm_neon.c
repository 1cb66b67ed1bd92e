/* arm/gemm_neon.c - the fp32 GEMM's block kernel (gemm_fp32.h's contract)
 * and the vector GELU for AArch64's Advanced SIMD, every AArch64 CPU's
 * baseline (no flags needed).
 *
 * Register tile: MR = 6 rows x NR = 16 columns = 24 accumulators of four
 * floats. A is read four k at a time, one vector a row, and each k's FMAs
 * take their row's value from a lane of it (fmla by element), so per four
 * k: 16 loads of the packed panel, 6 of A, 96 FMAs. With the panel row's
 * vectors and A's 6 that is 31 of the 32 vector registers.
 *
 * Each output element is one fused multiply-add chain in k order from
 * zero, then beta * C fused onto it, then the bias: the same operations as
 * the x86 block kernels, so for the same packed chunk the results are the
 * same floats as theirs.
 */
#include <arm_neon.h>
#include <string.h>

#include "kernels/arm/arm.h"
#include "kernels/arm/vmath_neon.h"
#include "kernels/gemm_fp32.h"

#define MR 6
#define NR HM_GEMM_NR_NEON

void hm_gelu_vec_neon(float *x, size_t n) {
    size_t i = 0;
    /* four vectors side by side: one is a long chain of dependent FMAs */
    for (; i + 16 <= n; i += 16) {
        const float32x4_t a = hm_gelu_neon(vld1q_f32(x + i)), b = hm_gelu_neon(vld1q_f32(x + i + 4));
        const float32x4_t c = hm_gelu_neon(vld1q_f32(x + i + 8)), d = hm_gelu_neon(vld1q_f32(x + i + 12));
        vst1q_f32(x + i, a), vst1q_f32(x + i + 4, b), vst1q_f32(x + i + 8, c), vst1q_f32(x + i + 12, d);
    }
    for (; i + 4 <= n; i += 4) vst1q_f32(x + i, hm_gelu_neon(vld1q_f32(x + i)));
    if (i < n) {
        float t[4] = {0};
        memcpy(t, x + i, (n - i) * sizeof(float));
        vst1q_f32(t, hm_gelu_neon(vld1q_f32(t)));
        memcpy(x + i, t, (n - i) * sizeof(float));
    }
}

/* acc[i][0..3] += A[i][k] * P[k][0..16) for one k: lane l of a[i]. */
#define HM_K1(l)                                                                                       \
    do {                                                                                               \
        const float *p = P + (size_t)(k + (l)) * NR;                                                   \
        const float32x4_t b0 = vld1q_f32(p), b1 = vld1q_f32(p + 4), b2 = vld1q_f32(p + 8),             \
                          b3 = vld1q_f32(p + 12);                                                      \
        _Pragma("GCC unroll 6") for (int i = 0; i < mr; i++) {                                         \
            c[i][0] = vfmaq_laneq_f32(c[i][0], b0, a[i], l);                                           \
            c[i][1] = vfmaq_laneq_f32(c[i][1], b1, a[i], l);                                           \
            c[i][2] = vfmaq_laneq_f32(c[i][2], b2, a[i], l);                                           \
            c[i][3] = vfmaq_laneq_f32(c[i][3], b3, a[i], l);                                           \
        }                                                                                              \
    } while (0)

/* One mr x NR tile; mr is a compile-time constant at every call site, so
 * the accumulators stay in registers. */
static inline __attribute__((always_inline)) void hm_tile_neon(const int mr, int nr, int kc, const float *A,
                                                               size_t lda, const float *P, float *C, size_t ldc,
                                                               const hm_gemm_epi_args *e) {
    float32x4_t c[MR][4], a[MR];
#pragma GCC unroll 6
    for (int i = 0; i < mr; i++) c[i][0] = c[i][1] = c[i][2] = c[i][3] = vdupq_n_f32(0.0f);
    int k = 0;
    for (; k + 4 <= kc; k += 4) {
#pragma GCC unroll 6
        for (int i = 0; i < mr; i++) a[i] = vld1q_f32(A + i * lda + k);
        HM_K1(0);
        HM_K1(1);
        HM_K1(2);
        HM_K1(3);
    }
    for (; k < kc; k++) { /* K tail (a convolution's K of 27, ...): lane 0 */
#pragma GCC unroll 6
        for (int i = 0; i < mr; i++) a[i] = vld1q_dup_f32(A + i * lda + k);
        HM_K1(0);
    }
    /* C joins after the block's own sum (gemm_fp32.h: two-level K sums). */
    const int full = nr == NR;
    float t[NR];
    if (e->load_c) {
        const float32x4_t beta = vdupq_n_f32(e->beta);
#pragma GCC unroll 6
        for (int i = 0; i < mr; i++) {
            const float *ci = C + i * ldc;
            if (!full) {
                memset(t, 0, sizeof t);
                memcpy(t, ci, (size_t)nr * sizeof(float));
                ci = t;
            }
            for (int v = 0; v < 4; v++) c[i][v] = vfmaq_f32(c[i][v], beta, vld1q_f32(ci + 4 * v));
        }
    }
    if (e->bias) {
        const float32x4_t b0 = vld1q_f32(e->bias), b1 = vld1q_f32(e->bias + 4), b2 = vld1q_f32(e->bias + 8),
                          b3 = vld1q_f32(e->bias + 12);
#pragma GCC unroll 6
        for (int i = 0; i < mr; i++) {
            c[i][0] = vaddq_f32(c[i][0], b0), c[i][1] = vaddq_f32(c[i][1], b1);
            c[i][2] = vaddq_f32(c[i][2], b2), c[i][3] = vaddq_f32(c[i][3], b3);
        }
    }
#pragma GCC unroll 6
    for (int i = 0; i < mr; i++) {
        float *ci = full ? C + i * ldc : t;
        vst1q_f32(ci, c[i][0]), vst1q_f32(ci + 4, c[i][1]), vst1q_f32(ci + 8, c[i][2]), vst1q_f32(ci + 12, c[i][3]);
        if (!full) memcpy(C + i * ldc, t, (size_t)nr * sizeof(float));
    }
    /* GELU on the stored, L1-hot tile: one copy of the polynomial. */
    if (e->gelu)
        for (int i = 0; i < mr; i++) hm_gelu_vec_neon(C + i * ldc, (size_t)nr);
}
#undef HM_K1

void hm_gemm_block_neon(int m, int nr, int kc, const float *A, size_t lda, const float *P, float *C, size_t ldc,
                        const hm_gemm_epi_args *e) {
    int i = 0;
    const int ntiles = (m + MR - 1) / MR;
    for (; i + MR <= m; i += MR) {
        hm_prefetch_part(e->next, e->next_bytes, i / MR, ntiles);
        hm_tile_neon(MR, nr, kc, A + i * lda, lda, P, C + i * ldc, ldc, e);
    }
    hm_prefetch_part(e->next, e->next_bytes, i / MR, ntiles); /* the row tail's part, if any */
    const float *a = A + i * lda;
    float *c = C + i * ldc;
    switch (m - i) {
    case 1: hm_tile_neon(1, nr, kc, a, lda, P, c, ldc, e); break;
    case 2: hm_tile_neon(2, nr, kc, a, lda, P, c, ldc, e); break;
    case 3: hm_tile_neon(3, nr, kc, a, lda, P, c, ldc, e); break;
    case 4: hm_tile_neon(4, nr, kc, a, lda, P, c, ldc, e); break;
    case 5: hm_tile_neon(5, nr, kc, a, lda, P, c, ldc, e); break;
    default: break;
    }
}
