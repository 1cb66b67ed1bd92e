/* arm/gemm_neon.c - the fp32 GEMM's block kernel (gemm_fp32.h's contract)
 * and the vector GELU for AArch64's Advanced SIMD, every AArch64 CPU's
 * baseline (no flags needed).
 *
 * Register tile: MR = 4 rows x NR = 16 columns = 16 accumulators of four
 * floats. A is read four k at a time, one vector a row, and each k's FMAs
 * take their row's value from a lane of it (fmla by element), so per four
 * k: 16 vectors of the packed panel (8 load pairs), 4 of A, 64 FMAs. Six
 * rows (24 accumulators, with A's 6 and the panel's 4: 34 of the 32 vector
 * registers) made the compiler spill accumulators inside the K loop: 168
 * instructions for 96 FMAs, against 86 for 64 here (docs/benchmarks.md).
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

#define MR 4
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
        _Pragma("GCC unroll 4") for (int i = 0; i < mr; i++) {                                         \
            c[i][0] = vfmaq_laneq_f32(c[i][0], b0, a[i], l);                                           \
            c[i][1] = vfmaq_laneq_f32(c[i][1], b1, a[i], l);                                           \
            c[i][2] = vfmaq_laneq_f32(c[i][2], b2, a[i], l);                                           \
            c[i][3] = vfmaq_laneq_f32(c[i][3], b3, a[i], l);                                           \
        }                                                                                              \
    } while (0)

/* The tile's epilogue on its sums (mr rows of NR floats at S): C joins
 * after the block's own sum (gemm_fp32.h: two-level K sums), fused as
 * beta * C + sum, then the bias; GELU on the stored, L1-hot rows. Out of
 * line, on memory: indexing the accumulators here would make the compiler
 * keep them in memory inside the K loop too. */
static void hm_tile_epi(int mr, int nr, const float *S, float *C, size_t ldc, const hm_gemm_epi_args *e) {
    const float32x4_t beta = vdupq_n_f32(e->beta);
    for (int i = 0; i < mr; i++) {
        float *ci = C + i * ldc, t[NR] = {0};
        float *d = nr == NR ? ci : t;
        if (d == t && e->load_c) memcpy(t, ci, (size_t)nr * sizeof(float));
        for (int v = 0; v < NR; v += 4) {
            float32x4_t x = vld1q_f32(S + (size_t)i * NR + v);
            if (e->load_c) x = vfmaq_f32(x, beta, vld1q_f32(d + v));
            if (e->bias) x = vaddq_f32(x, vld1q_f32(e->bias + v));
            vst1q_f32(d + v, x);
        }
        if (d == t) memcpy(ci, t, (size_t)nr * sizeof(float));
        if (e->gelu) hm_gelu_vec_neon(ci, (size_t)nr);
    }
}

/* One mr x NR tile; mr is a compile-time constant at every call site, so
 * the accumulators stay in registers. */
static inline __attribute__((always_inline)) void hm_tile_neon(const int mr, int nr, int kc, const float *A,
                                                               size_t lda, const float *P, float *C, size_t ldc,
                                                               const hm_gemm_epi_args *e) {
    float32x4_t c[MR][4], a[MR];
#pragma GCC unroll 4
    for (int i = 0; i < mr; i++) c[i][0] = c[i][1] = c[i][2] = c[i][3] = vdupq_n_f32(0.0f);
    int k = 0;
    for (; k + 4 <= kc; k += 4) {
#pragma GCC unroll 4
        for (int i = 0; i < mr; i++) a[i] = vld1q_f32(A + i * lda + k);
        HM_K1(0);
        HM_K1(1);
        HM_K1(2);
        HM_K1(3);
    }
    for (; k < kc; k++) { /* K tail (a convolution's K of 27, ...): lane 0 */
#pragma GCC unroll 4
        for (int i = 0; i < mr; i++) a[i] = vld1q_dup_f32(A + i * lda + k);
        HM_K1(0);
    }
    _Alignas(16) float S[MR * NR];
#pragma GCC unroll 4
    for (int i = 0; i < mr; i++) {
        vst1q_f32(S + i * NR, c[i][0]), vst1q_f32(S + i * NR + 4, c[i][1]);
        vst1q_f32(S + i * NR + 8, c[i][2]), vst1q_f32(S + i * NR + 12, c[i][3]);
    }
    hm_tile_epi(mr, nr, S, C, ldc, e);
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
    default: break;
    }
}
