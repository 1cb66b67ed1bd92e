/* arm/attn_neon.c - one attention head in fp32, fused (the neon level's
 * attn_f32_fused, kernels.h; attn.h's contract): four query rows' scores,
 * their softmax and their output before the next four, as
 * x86/attn_avx512.c does it, so the scores stay in L1 and neither matmul
 * goes through the generic GEMM's packing.
 *
 * k is transposed once per head to [dim][token]; q rows and the softmax
 * weights are read four at a time and used by lane (fmla by element); v is
 * read in place. Every sum is a plain fp32 FMA chain in index order (dims
 * for the scores, tokens for the output), scaled after the sum, as in the
 * AVX-512 head: the scores are the same floats as there; the softmax sums
 * (four lanes here, sixteen there) differ by rounding.
 */
#include <arm_neon.h>
#include <stddef.h>

#include "kernels/arm/arm.h"
#include "kernels/arm/vmath_neon.h"

#define RB 4 /* query rows per block */

/* 4 x 4 floats: t[j][i] = s[i][j]. */
static inline void transpose4(const float *s, size_t ls, float *t, size_t lt) {
    const float32x4_t r0 = vld1q_f32(s), r1 = vld1q_f32(s + ls), r2 = vld1q_f32(s + 2 * ls), r3 = vld1q_f32(s + 3 * ls);
    const float32x4_t a0 = vtrn1q_f32(r0, r1), a1 = vtrn2q_f32(r0, r1), a2 = vtrn1q_f32(r2, r3), a3 = vtrn2q_f32(r2, r3);
    vst1q_f32(t, vreinterpretq_f32_f64(vtrn1q_f64(vreinterpretq_f64_f32(a0), vreinterpretq_f64_f32(a2))));
    vst1q_f32(t + lt, vreinterpretq_f32_f64(vtrn1q_f64(vreinterpretq_f64_f32(a1), vreinterpretq_f64_f32(a3))));
    vst1q_f32(t + 2 * lt, vreinterpretq_f32_f64(vtrn2q_f64(vreinterpretq_f64_f32(a0), vreinterpretq_f64_f32(a2))));
    vst1q_f32(t + 3 * lt, vreinterpretq_f32_f64(vtrn2q_f64(vreinterpretq_f64_f32(a1), vreinterpretq_f64_f32(a3))));
}

/* acc[r][v] += x[r] (lane l) * b[v], four rows by four vectors */
#define FMA16(l, b0, b1, b2, b3)                                                                            \
    do {                                                                                                    \
        a00 = vfmaq_laneq_f32(a00, b0, x0, l), a01 = vfmaq_laneq_f32(a01, b1, x0, l);                       \
        a02 = vfmaq_laneq_f32(a02, b2, x0, l), a03 = vfmaq_laneq_f32(a03, b3, x0, l);                       \
        a10 = vfmaq_laneq_f32(a10, b0, x1, l), a11 = vfmaq_laneq_f32(a11, b1, x1, l);                       \
        a12 = vfmaq_laneq_f32(a12, b2, x1, l), a13 = vfmaq_laneq_f32(a13, b3, x1, l);                       \
        a20 = vfmaq_laneq_f32(a20, b0, x2, l), a21 = vfmaq_laneq_f32(a21, b1, x2, l);                       \
        a22 = vfmaq_laneq_f32(a22, b2, x2, l), a23 = vfmaq_laneq_f32(a23, b3, x2, l);                       \
        a30 = vfmaq_laneq_f32(a30, b0, x3, l), a31 = vfmaq_laneq_f32(a31, b1, x3, l);                       \
        a32 = vfmaq_laneq_f32(a32, b2, x3, l), a33 = vfmaq_laneq_f32(a33, b3, x3, l);                       \
    } while (0)

/* the four vectors at p (16 floats) as b0..b3, then FMA16 with lane l */
#define STEP(l, p)                                                                                          \
    do {                                                                                                    \
        const float *pp = (p);                                                                              \
        const float32x4_t b0 = vld1q_f32(pp), b1 = vld1q_f32(pp + 4), b2 = vld1q_f32(pp + 8),               \
                          b3 = vld1q_f32(pp + 12);                                                          \
        FMA16(l, b0, b1, b2, b3);                                                                           \
    } while (0)

#define ZERO16()                                                                                            \
    float32x4_t a00 = vdupq_n_f32(0.0f), a01 = a00, a02 = a00, a03 = a00, a10 = a00, a11 = a00, a12 = a00,  \
                a13 = a00, a20 = a00, a21 = a00, a22 = a00, a23 = a00, a30 = a00, a31 = a00, a32 = a00,     \
                a33 = a00

/* row r's four sums times w into dst */
#define STORE4(dst, w, a0, a1, a2, a3)                                                                      \
    do {                                                                                                    \
        float *dd = (dst);                                                                                  \
        vst1q_f32(dd, vmulq_f32(a0, w)), vst1q_f32(dd + 4, vmulq_f32(a1, w));                               \
        vst1q_f32(dd + 8, vmulq_f32(a2, w)), vst1q_f32(dd + 12, vmulq_f32(a3, w));                          \
    } while (0)

/* S[r][0..n) = scale * q_r . k for RB rows (q rows ld apart), 16 tokens at
 * a time. kt: [hd][n]. */
static void scores(const float *q, size_t ld, const float *kt, int n, int hd, float scale, float *S) {
    const float32x4_t sc = vdupq_n_f32(scale);
    for (int c = 0; c < n; c += 16) {
        ZERO16();
        for (int d = 0; d < hd; d += 4) {
            const float32x4_t x0 = vld1q_f32(q + d), x1 = vld1q_f32(q + ld + d), x2 = vld1q_f32(q + 2 * ld + d),
                              x3 = vld1q_f32(q + 3 * ld + d);
            const float *kr = kt + (size_t)d * n + c;
            STEP(0, kr);
            STEP(1, kr + n);
            STEP(2, kr + 2 * n);
            STEP(3, kr + 3 * n);
        }
        STORE4(S + c, sc, a00, a01, a02, a03);
        STORE4(S + n + c, sc, a10, a11, a12, a13);
        STORE4(S + 2 * n + c, sc, a20, a21, a22, a23);
        STORE4(S + 3 * n + c, sc, a30, a31, a32, a33);
    }
}

/* The four rows of S (n floats each, n a multiple of 4) -> e^(s - max) in
 * place, their sums' inverses into inv (applied to the output). */
static void softmax4(float *S, int n, float inv[RB]) {
    for (int r = 0; r < RB; r++) {
        float *s = S + (size_t)r * n;
        float32x4_t m = vld1q_f32(s);
        for (int t = 4; t < n; t += 4) m = vmaxq_f32(m, vld1q_f32(s + t));
        const float32x4_t top = vdupq_n_f32(vmaxvq_f32(m)), lo = vdupq_n_f32(-87.0f);
        float32x4_t a0 = vdupq_n_f32(0.0f), a1 = a0;
        for (int t = 0; t < n; t += 8) { /* two vectors side by side */
            const float32x4_t e0 = hm_exp_neon(vmaxq_f32(lo, vsubq_f32(vld1q_f32(s + t), top)));
            const float32x4_t e1 = hm_exp_neon(vmaxq_f32(lo, vsubq_f32(vld1q_f32(s + t + 4), top)));
            vst1q_f32(s + t, e0), vst1q_f32(s + t + 4, e1);
            a0 = vaddq_f32(a0, e0), a1 = vaddq_f32(a1, e1);
        }
        inv[r] = 1.0f / vaddvq_f32(vaddq_f32(a0, a1));
    }
}

/* o_r[d0..d0 + 16) = inv[r] sum_t P[r][t] v_t for RB rows. */
static void weighted16(const float *P, int n, const float *v, size_t ld, int d0, const float inv[RB], float *o,
                       size_t ldo) {
    ZERO16();
    for (int t = 0; t < n; t += 4) {
        const float32x4_t x0 = vld1q_f32(P + t), x1 = vld1q_f32(P + n + t), x2 = vld1q_f32(P + 2 * n + t),
                          x3 = vld1q_f32(P + 3 * n + t);
        const float *vr = v + (size_t)t * ld + d0;
        STEP(0, vr);
        STEP(1, vr + ld);
        STEP(2, vr + 2 * ld);
        STEP(3, vr + 3 * ld);
    }
    STORE4(o + d0, vdupq_n_f32(inv[0]), a00, a01, a02, a03);
    STORE4(o + ldo + d0, vdupq_n_f32(inv[1]), a10, a11, a12, a13);
    STORE4(o + 2 * ldo + d0, vdupq_n_f32(inv[2]), a20, a21, a22, a23);
    STORE4(o + 3 * ldo + d0, vdupq_n_f32(inv[3]), a30, a31, a32, a33);
}

void hm_attention_head_f32_neon(int n, int hd, float scale, const float *q, const float *k, const float *v,
                                size_t ld, float *o, size_t ldo, float *scratch) {
    float *kt = scratch;            /* [hd][n] */
    float *S = kt + (size_t)hd * n; /* [RB][n] */
    for (int t = 0; t < n; t += 4)
        for (int d = 0; d < hd; d += 4) transpose4(k + (size_t)t * ld + d, ld, kt + (size_t)d * n + t, (size_t)n);
    for (int r0 = 0; r0 < n; r0 += RB) {
        scores(q + (size_t)r0 * ld, ld, kt, n, hd, scale, S);
        float inv[RB];
        softmax4(S, n, inv);
        for (int d = 0; d < hd; d += 16) weighted16(S, n, v, ld, d, inv, o + (size_t)r0 * ldo, ldo);
    }
}
