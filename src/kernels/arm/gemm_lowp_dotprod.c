/* arm/gemm_lowp_dotprod.c - the int8 block on SDOT (ARMv8.2 dot product;
 * built with +dotprod, run only where core/cpu.h reports HM_CPU_DOTPROD).
 *
 * The panel's 16-byte groups hold two columns' 8 consecutive k (gemm_lowp.h);
 * SDOT against a row's 8 bytes repeated in both halves adds each column's
 * two 4-k halves into two lanes, which one pairwise add joins at the end.
 * Tile: 6 rows x 8 columns = 24 accumulators; per 8 k: 4 panel loads, 6
 * row loads (8 bytes, replicated), 24 SDOTs of 16 multiply-adds each.
 */
#include <arm_neon.h>
#include <string.h>

#include "kernels/arm/arm.h"
#include "kernels/gemm_lowp.h"

#define MR HM_LOWP_DOT_MR
#define NR HM_LOWP_NEON_NR

/* Row i's 8 bytes of group g, in both halves of a vector. */
static inline int8x16_t row8(const int8_t *a, int g) {
    uint64_t v;
    memcpy(&v, a + (size_t)g * 16, 8);
    return vreinterpretq_s8_u64(vdupq_n_u64(v));
}

static inline __attribute__((always_inline)) void tile(const int mr, int nr, int k8, const uint8_t *A, size_t lda,
                                                       const hm_lowp_row *rows, const int32_t *oidx,
                                                       const float *oval, const int8_t *P, const int32_t *cs,
                                                       const float *sw, float *C, size_t ldc, const hm_lowp_epi *e) {
    int32x4_t acc[MR][4];
    const int8_t *ar[MR];
#pragma GCC unroll 6
    for (int i = 0; i < mr; i++) {
        ar[i] = (const int8_t *)A + (size_t)(i >> 1) * 2 * lda + (size_t)(i & 1) * 8;
        acc[i][0] = acc[i][1] = acc[i][2] = acc[i][3] = vdupq_n_s32(0);
    }
    for (int g = 0; g < k8; g++) {
        const int8_t *p = P + (size_t)g * NR * 8;
        const int8x16_t b0 = vld1q_s8(p), b1 = vld1q_s8(p + 16), b2 = vld1q_s8(p + 32), b3 = vld1q_s8(p + 48);
#pragma GCC unroll 6
        for (int i = 0; i < mr; i++) {
            const int8x16_t a = row8(ar[i], g);
            acc[i][0] = vdotq_s32(acc[i][0], b0, a);
            acc[i][1] = vdotq_s32(acc[i][1], b1, a);
            acc[i][2] = vdotq_s32(acc[i][2], b2, a);
            acc[i][3] = vdotq_s32(acc[i][3], b3, a);
        }
    }
    /* lanes (c k0-3, c k4-7, c+1 k0-3, c+1 k4-7) -> columns */
    int32_t sums[MR * NR];
#pragma GCC unroll 6
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
    case 4: HM_TILE(4); break;
    case 5: HM_TILE(5); break;
    default: break;
    }
#undef HM_TILE
}
