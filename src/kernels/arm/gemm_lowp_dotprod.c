/* arm/gemm_lowp_dotprod.c - the int8 block on SDOT (ARMv8.2 dot product;
 * built with +dotprod, run only where core/cpu.h reports HM_CPU_DOTPROD).
 *
 * The panel's 16-byte groups hold two columns' 8 consecutive k (gemm_lowp.h);
 * SDOT against a row's 8 bytes repeated in both halves adds each column's
 * two 4-k halves into two lanes, which one pairwise add joins at the end.
 * Tile: 4 rows x 8 columns = 16 accumulators; per 8 k: 4 panel loads, 2
 * row-pair loads, 4 lane copies (each row's 8 bytes into both halves),
 * 16 SDOTs of 16 multiply-adds each (6 rows spilled accumulators).
 */
#include <arm_neon.h>

#include "kernels/arm/arm.h"
#include "kernels/gemm_lowp.h"

#define MR HM_LOWP_DOT_MR
#define NR HM_LOWP_NEON_NR

static inline __attribute__((always_inline)) void tile(const int mr, int nr, int k8, const uint8_t *A, size_t lda,
                                                       const hm_lowp_row *rows, const int32_t *oidx,
                                                       const float *oval, const int8_t *P, const int32_t *cs,
                                                       const float *sw, float *C, size_t ldc, const hm_lowp_epi *e) {
    int32x4_t acc[MR][4];
#pragma GCC unroll 4
    for (int i = 0; i < mr; i++) acc[i][0] = acc[i][1] = acc[i][2] = acc[i][3] = vdupq_n_s32(0);
    const int8_t *a0 = (const int8_t *)A;
    for (int g = 0; g < k8; g++) {
        const int8_t *p = P + (size_t)g * NR * 8;
        const int8x16_t b0 = vld1q_s8(p), b1 = vld1q_s8(p + 16), b2 = vld1q_s8(p + 32), b3 = vld1q_s8(p + 48);
        /* a row pair's group (one load), each row's 8 bytes then copied
         * into both halves of a vector */
        int64x2_t pr[MR / 2];
#pragma GCC unroll 2
        for (int q = 0; q < (mr + 1) / 2; q++) pr[q] = vld1q_s64((const int64_t *)(const void *)(a0 + q * 2 * lda + (size_t)g * 16));
#pragma GCC unroll 4
        for (int i = 0; i < mr; i++) {
            const int8x16_t a = vreinterpretq_s8_s64(i & 1 ? vdupq_laneq_s64(pr[i >> 1], 1) : vdupq_laneq_s64(pr[i >> 1], 0));
            acc[i][0] = vdotq_s32(acc[i][0], b0, a);
            acc[i][1] = vdotq_s32(acc[i][1], b1, a);
            acc[i][2] = vdotq_s32(acc[i][2], b2, a);
            acc[i][3] = vdotq_s32(acc[i][3], b3, a);
        }
    }
    /* lanes (c k0-3, c k4-7, c+1 k0-3, c+1 k4-7) -> columns */
    int32_t sums[MR * NR];
#pragma GCC unroll 4
    for (int i = 0; i < mr; i++) {
        vst1q_s32(sums + i * NR, vpaddq_s32(acc[i][0], acc[i][1]));
        vst1q_s32(sums + i * NR + 4, vpaddq_s32(acc[i][2], acc[i][3]));
    }
    hm_lowp_i8_epi_neon(mr, nr, sums, rows, oidx, oval, P, cs, sw, C, ldc, e);
}

void hm_lowp_i8_block_dotprod(int m, int nr, int Kp, const uint8_t *Aq, size_t lda, const hm_lowp_row *rows,
                              const int32_t *oidx, const float *oval, const int8_t *P, const int32_t *cs,
                              const float *sw, float *C, size_t ldc, const hm_lowp_epi *e) {
    const int k8 = Kp / 8, parts = (m + MR - 1) / MR;
    const size_t os = HM_LOWP_MAX_OUTLIERS;
    int i = 0;
#define HM_TILE(mr)                                                                                              \
    tile(mr, nr, k8, Aq + (size_t)i * lda, lda, rows + i, oidx + i * os, oval + i * os, P, cs, sw, C + i * ldc, \
         ldc, e)
    for (; i + MR <= m; i += MR) {
        hm_prefetch_part(e->next, e->next_bytes, i / MR, parts);
        HM_TILE(MR);
    }
    hm_prefetch_part(e->next, e->next_bytes, i / MR, parts);
    switch (m - i) { /* i is even: the tail starts a pair */
    case 1: HM_TILE(1); break;
    case 2: HM_TILE(2); break;
    case 3: HM_TILE(3); break;
    default: break;
    }
#undef HM_TILE
}
