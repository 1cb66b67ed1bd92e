/* arm/gemm_lowp_bf16.c - the bf16 variant on AArch64 (built with +bf16,
 * run only where core/cpu.h reports HM_CPU_ARM_BF16): activation rows
 * rounded to bf16 (BFCVTN, nearest even) and the BFMMLA block.
 *
 * BFMMLA multiplies a 2 x 4 block of A (two rows' 4-value groups, side by
 * side in the pair layout) by a 4 x 2 block of the panel (two columns' 4 k)
 * into a 2 x 2 block of fp32 sums. Tile: 10 rows (5 pairs) x 8 columns =
 * 20 accumulators; per 4 k: 4 panel loads, 5 pair loads, 20 BFMMLAs of 16
 * multiply-adds each. BFDOT is not used: every CPU with BF16 has BFMMLA,
 * which does twice its work per instruction. The products and sums are
 * fp32 in BFMMLA's order: results agree with x86's bf16 to float rounding.
 */
#include <arm_neon.h>
#include <string.h>

#include "kernels/arm/arm.h"
#include "kernels/gemm_lowp.h"

#define MR HM_LOWP_MMLA_MR
#define NP (MR / 2)
#define NR HM_LOWP_NEON_NR

void hm_lowp_bf16_row_neon(const float *x, int K, int Kp, uint16_t *out) {
    for (int k = 0; k < Kp; k += 4) {
        float t[4] = {0};
        const float *s = x + k;
        if (k + 4 > K) {
            for (int i = 0; k + i < K; i++) t[i] = x[k + i];
            s = t;
        }
        vst1_bf16((bfloat16_t *)(out + (size_t)(k >> 2) * 8), vcvt_bf16_f32(vld1q_f32(s)));
    }
}

static inline __attribute__((always_inline)) void tile(const int np, int mr, int nr, int k4, const uint16_t *A,
                                                       size_t lda, const uint16_t *P, float *C, size_t ldc,
                                                       const hm_lowp_epi *e) {
    float32x4_t acc[NP][4];
#pragma GCC unroll 6
    for (int p = 0; p < np; p++) acc[p][0] = acc[p][1] = acc[p][2] = acc[p][3] = vdupq_n_f32(0.0f);
    const size_t ps = 2 * lda;
    for (int g = 0; g < k4; g++) {
        const bfloat16_t *p = (const bfloat16_t *)P + (size_t)g * NR * 4;
        const bfloat16x8_t b0 = vld1q_bf16(p), b1 = vld1q_bf16(p + 8), b2 = vld1q_bf16(p + 16), b3 = vld1q_bf16(p + 24);
#pragma GCC unroll 6
        for (int q = 0; q < np; q++) {
            const bfloat16x8_t a = vld1q_bf16((const bfloat16_t *)A + q * ps + (size_t)g * 8);
            acc[q][0] = vbfmmlaq_f32(acc[q][0], a, b0);
            acc[q][1] = vbfmmlaq_f32(acc[q][1], a, b1);
            acc[q][2] = vbfmmlaq_f32(acc[q][2], a, b2);
            acc[q][3] = vbfmmlaq_f32(acc[q][3], a, b3);
        }
    }
    const float32x4_t z = vdupq_n_f32(0.0f);
    const float32x4_t bias0 = e->bias ? vld1q_f32(e->bias) : z, bias1 = e->bias ? vld1q_f32(e->bias + 4) : z;
#pragma GCC unroll 6
    for (int q = 0; q < np; q++) {
        const float64x2_t x0 = vreinterpretq_f64_f32(acc[q][0]), x1 = vreinterpretq_f64_f32(acc[q][1]);
        const float64x2_t x2 = vreinterpretq_f64_f32(acc[q][2]), x3 = vreinterpretq_f64_f32(acc[q][3]);
        float32x4_t r[2][2] = {
            {vreinterpretq_f32_f64(vzip1q_f64(x0, x1)), vreinterpretq_f32_f64(vzip1q_f64(x2, x3))},
            {vreinterpretq_f32_f64(vzip2q_f64(x0, x1)), vreinterpretq_f32_f64(vzip2q_f64(x2, x3))},
        };
        for (int h = 0; h < 2 && 2 * q + h < mr; h++) {
            float *c = C + (size_t)(2 * q + h) * ldc;
            float t[NR] = {0};
            float *d = nr == NR ? c : t;
            if (e->accum && nr != NR) memcpy(t, c, (size_t)nr * sizeof(float));
            float32x4_t v0 = vaddq_f32(r[h][0], bias0), v1 = vaddq_f32(r[h][1], bias1);
            if (e->accum) v0 = vaddq_f32(v0, vld1q_f32(d)), v1 = vaddq_f32(v1, vld1q_f32(d + 4));
            vst1q_f32(d, v0), vst1q_f32(d + 4, v1);
            if (d == t) memcpy(c, t, (size_t)nr * sizeof(float));
        }
    }
    if (e->gelu)
        for (int i = 0; i < mr; i++) hm_gelu_vec_neon(C + (size_t)i * ldc, (size_t)nr);
}

void hm_lowp_bf16_block_bfmmla(int m, int nr, int Kp, const uint16_t *A, size_t lda, const uint16_t *P, float *C,
                               size_t ldc, const hm_lowp_epi *e) {
    const int k4 = Kp / 4, parts = (m + MR - 1) / MR;
    int i = 0;
    for (; i + MR <= m; i += MR) {
        hm_prefetch_part(e->next, e->next_bytes, i / MR, parts);
        tile(NP, MR, nr, k4, A + (size_t)i * lda, lda, P, C + (size_t)i * ldc, ldc, e);
    }
    hm_prefetch_part(e->next, e->next_bytes, i / MR, parts);
    const int left = m - i;
    const uint16_t *a = A + (size_t)i * lda;
    float *c = C + (size_t)i * ldc;
    switch ((left + 1) / 2) {
    case 1: tile(1, left, nr, k4, a, lda, P, c, ldc, e); break;
    case 2: tile(2, left, nr, k4, a, lda, P, c, ldc, e); break;
    case 3: tile(3, left, nr, k4, a, lda, P, c, ldc, e); break;
    case 4: tile(4, left, nr, k4, a, lda, P, c, ldc, e); break;
    case 5: tile(5, left, nr, k4, a, lda, P, c, ldc, e); break;
    default: break;
    }
}
