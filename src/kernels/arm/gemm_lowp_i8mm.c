/* arm/gemm_lowp_i8mm.c - the int8 block on SMMLA (the int8 matrix multiply
 * extension; built with +i8mm, run only where core/cpu.h reports
 * HM_CPU_I8MM): twice SDOT's multiply-adds per instruction.
 *
 * SMMLA multiplies a 2 x 8 block of A (two rows' 8-byte groups, which the
 * pair layout stores side by side) by an 8 x 2 block of the panel (two
 * columns' 8 k, one 16-byte group) into a 2 x 2 block of int32 sums.
 * Tile: 10 rows (5 pairs) x 8 columns = 20 accumulators; per 8 k: 4 panel
 * loads, 5 pair loads, 20 SMMLAs of 32 multiply-adds each. Same sums as
 * the SDOT kernel, the same epilogue (gemm_lowp_neon.c): the same results.
 */
#include <arm_neon.h>

#include "kernels/arm/arm.h"
#include "kernels/gemm_lowp.h"

#define MR HM_LOWP_MMLA_MR
#define NP (MR / 2)
#define NR HM_LOWP_NEON_NR

/* np row pairs (mr rows, the last pair perhaps half used) x NR columns. */
static inline __attribute__((always_inline)) void tile(const int np, int mr, int nr, int k8, const uint8_t *A,
                                                       size_t lda, const hm_lowp_row *rows, const int32_t *oidx,
                                                       const float *oval, const int8_t *P, const int32_t *cs,
                                                       const float *sw, float *C, size_t ldc, const hm_lowp_epi *e) {
    int32x4_t acc[NP][4];
#pragma GCC unroll 6
    for (int p = 0; p < np; p++) acc[p][0] = acc[p][1] = acc[p][2] = acc[p][3] = vdupq_n_s32(0);
    const int8_t *a0 = (const int8_t *)A;
    const size_t ps = 2 * lda;
    for (int g = 0; g < k8; g++) {
        const int8_t *p = P + (size_t)g * NR * 8;
        const int8x16_t b0 = vld1q_s8(p), b1 = vld1q_s8(p + 16), b2 = vld1q_s8(p + 32), b3 = vld1q_s8(p + 48);
#pragma GCC unroll 6
        for (int q = 0; q < np; q++) {
            const int8x16_t a = vld1q_s8(a0 + q * ps + (size_t)g * 16);
            acc[q][0] = vmmlaq_s32(acc[q][0], a, b0);
            acc[q][1] = vmmlaq_s32(acc[q][1], a, b1);
            acc[q][2] = vmmlaq_s32(acc[q][2], a, b2);
            acc[q][3] = vmmlaq_s32(acc[q][3], a, b3);
        }
    }
    /* acc[q][j] = (r0 c2j, r0 c2j+1, r1 c2j, r1 c2j+1) -> rows */
    int32_t sums[MR * NR];
#pragma GCC unroll 6
    for (int q = 0; q < np; q++) {
        int32_t *s0 = sums + 2 * q * NR, *s1 = s0 + NR;
        const int64x2_t x0 = vreinterpretq_s64_s32(acc[q][0]), x1 = vreinterpretq_s64_s32(acc[q][1]);
        const int64x2_t x2 = vreinterpretq_s64_s32(acc[q][2]), x3 = vreinterpretq_s64_s32(acc[q][3]);
        vst1q_s32(s0, vreinterpretq_s32_s64(vzip1q_s64(x0, x1)));
        vst1q_s32(s0 + 4, vreinterpretq_s32_s64(vzip1q_s64(x2, x3)));
        vst1q_s32(s1, vreinterpretq_s32_s64(vzip2q_s64(x0, x1)));
        vst1q_s32(s1 + 4, vreinterpretq_s32_s64(vzip2q_s64(x2, x3)));
    }
    hm_lowp_i8_epi_neon(mr, nr, sums, rows, oidx, oval, P, cs, sw, C, ldc, e);
}

void hm_lowp_i8_block_i8mm(int m, int nr, int Kp, const uint8_t *Aq, size_t lda, const hm_lowp_row *rows,
                           const int32_t *oidx, const float *oval, const int8_t *P, const int32_t *cs,
                           const float *sw, float *C, size_t ldc, const hm_lowp_epi *e) {
    const int k8 = Kp / 8, parts = (m + MR - 1) / MR;
    const size_t os = HM_LOWP_MAX_OUTLIERS;
    int i = 0;
#define HM_TILE(np, mr)                                                                                           \
    tile(np, mr, nr, k8, Aq + (size_t)i * lda, lda, rows + i, oidx + i * os, oval + i * os, P, cs, sw,           \
         C + i * ldc, ldc, e)
    for (; i + MR <= m; i += MR) {
        hm_prefetch_part(e->next, e->next_bytes, i / MR, parts);
        HM_TILE(NP, MR);
    }
    hm_prefetch_part(e->next, e->next_bytes, i / MR, parts);
    const int left = m - i; /* i is even: the tail starts a pair */
    switch ((left + 1) / 2) {
    case 1: HM_TILE(1, left); break;
    case 2: HM_TILE(2, left); break;
    case 3: HM_TILE(3, left); break;
    case 4: HM_TILE(4, left); break;
    case 5: HM_TILE(5, left); break;
    default: break;
    }
#undef HM_TILE
}
