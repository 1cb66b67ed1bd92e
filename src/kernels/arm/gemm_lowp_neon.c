/* arm/gemm_lowp_neon.c - what both AArch64 int8 kernels share: the
 * activation quantiser and the epilogue (Advanced SIMD only; the SDOT and
 * SMMLA loops are in gemm_lowp_dotprod.c and gemm_lowp_i8mm.c).
 *
 * Both repeat x86/gemm_lowp_avx512vnni.c's float operations in its order,
 * so that a row gets the same scale, zero point, outliers and bytes, and
 * the same int32 sums the same floats: the sum of |x| in sixteen lanes
 * reduced as _mm512_reduce_add_ps does, the fused multiply-adds where x86
 * fuses, rounding to nearest even where it converts. Where x86 stores a
 * byte q, this stores q - 128 (a signed byte); the epilogue takes the 128
 * back through the zero point (gemm_lowp.c).
 */
#include <arm_neon.h>
#include <string.h>

#include "kernels/arm/arm.h"
#include "kernels/gemm_lowp.h"
#include "kernels/gemm_lowp_quant.h"

/* x[k .. k + 4) with lanes at or past K zero (x86's masked load). */
static inline float32x4_t load_upto(const float *x, int k, int K) {
    if (k + 4 <= K) return vld1q_f32(x + k);
    float t[4] = {0};
    for (int i = 0; k + i < K && i < 4; i++) t[i] = x[k + i];
    return vld1q_f32(t);
}

/* Byte k of a row in the pair layout (gemm_lowp.h): group k / 8 at 16
 * bytes a group. */
static inline size_t at(int k) { return (size_t)(k >> 3) * 16 + (size_t)(k & 7); }

void hm_lowp_quant_row_neon(const float *x, int K, int Kp, uint8_t *q, hm_lowp_row *r, int32_t *oidx, float *oval) {
    /* Pass 1: sum and max of |x|, in the sixteen lanes x86 uses (four
     * vectors: lanes 0-3, 4-7, 8-11, 12-15 of each 16-float step). */
    float32x4_t s0 = vdupq_n_f32(0.0f), s1 = s0, s2 = s0, s3 = s0, amax = s0;
    for (int k = 0; k < K; k += 16) {
        const float32x4_t a0 = vabsq_f32(load_upto(x, k, K)), a1 = vabsq_f32(load_upto(x, k + 4, K));
        const float32x4_t a2 = vabsq_f32(load_upto(x, k + 8, K)), a3 = vabsq_f32(load_upto(x, k + 12, K));
        s0 = vaddq_f32(s0, a0), s1 = vaddq_f32(s1, a1), s2 = vaddq_f32(s2, a2), s3 = vaddq_f32(s3, a3);
        amax = vmaxq_f32(amax, vmaxq_f32(vmaxq_f32(a0, a1), vmaxq_f32(a2, a3)));
    }
    /* _mm512_reduce_add_ps: (upper 8 + lower 8), then (upper 4 + lower 4),
     * then lanes (0 + 2) and (1 + 3), then those two. */
    const float32x4_t t = vaddq_f32(vaddq_f32(s3, s1), vaddq_f32(s2, s0));
    const float total = (vgetq_lane_f32(t, 0) + vgetq_lane_f32(t, 2)) + (vgetq_lane_f32(t, 1) + vgetq_lane_f32(t, 3));
    if (!(total <= 3.4e38f)) {
        /* inf or NaN in the row: every output of the row NaN, as in fp32 */
        for (int k = 0; k < Kp; k += 8) memset(q + at(k), 0, 8);
        r->scale = __builtin_nanf("");
        r->zero = 0;
        r->nout = 0;
        r->grp = 0;
        return;
    }
    const float thr = HM_LOWP_TAU * total / (float)K;
    float cut = thr; /* values with |x| <= cut stay on the int8 grid */
    hm_topk h;
    h.n = 0;
    if (vmaxvq_f32(amax) > thr) {
        /* Pass 2 (rare): the largest values above the threshold, in k order. */
        for (int k = 0; k < K; k++) {
            const float v = x[k], a = v < 0 ? -v : v;
            if (a > thr) hm_topk_push(&h, a, k);
        }
        if (h.n == HM_LOWP_MAX_OUTLIERS) cut = h.key[0];
    }
    /* Pass 3: range of the values that stay on the grid (0 included). */
    const float32x4_t c = vdupq_n_f32(cut);
    float32x4_t lo = vdupq_n_f32(0.0f), hi = lo;
    for (int k = 0; k < K; k += 4) {
        const float32x4_t v = load_upto(x, k, K);
        const uint32x4_t in = vcleq_f32(vabsq_f32(v), c);
        lo = vbslq_f32(in, vminq_f32(lo, v), lo);
        hi = vbslq_f32(in, vmaxq_f32(hi, v), hi);
    }
    const float l = vminvq_f32(lo), u = vmaxvq_f32(hi);
    float scale = (u - l) / 255.0f;
    int32_t z = 0;
    if (!(scale > 0.0f) || !(scale < 3.0e38f)) { /* all zero, or not finite */
        scale = 1.0f;
    } else {
        z = (int32_t)(-l / scale + 0.5f);
        z = z < 0 ? 0 : z > 255 ? 255 : z;
    }
    /* Pass 4: q = clamp(round(x / scale) + z, 0, 255) - 128, eight at a
     * time into their group. */
    const float32x4_t inv = vdupq_n_f32(1.0f / scale), zf = vdupq_n_f32((float)z);
    const int32x4_t q0 = vdupq_n_s32(0), q255 = vdupq_n_s32(255), off = vdupq_n_s32(128);
    for (int k = 0; k < Kp; k += 8) {
        int32x4_t a = vcvtnq_s32_f32(vfmaq_f32(zf, load_upto(x, k, K), inv));
        int32x4_t b = vcvtnq_s32_f32(vfmaq_f32(zf, load_upto(x, k + 4, K), inv));
        a = vsubq_s32(vminq_s32(vmaxq_s32(a, q0), q255), off);
        b = vsubq_s32(vminq_s32(vmaxq_s32(b, q0), q255), off);
        int8x8_t v = vmovn_s16(vcombine_s16(vmovn_s32(a), vmovn_s32(b)));
        /* past K: zero (the padded weights are zero too) */
        if (k + 8 > K) {
            int8_t tmp[8];
            vst1_s8(tmp, v);
            for (int i = 0; i < 8; i++)
                if (k + i >= K) tmp[i] = 0;
            v = vld1_s8(tmp);
        }
        vst1_s8((int8_t *)q + at(k), v);
    }
    for (int j = 0; j < h.n; j++) {
        oidx[j] = h.idx[j];
        oval[j] = x[h.idx[j]];
        q[at(h.idx[j])] = (uint8_t)(int8_t)(z - 128);
    }
    r->scale = scale;
    r->zero = z;
    r->nout = h.n;
    r->grp = 0;
}

void hm_lowp_i8_epi_neon(int mr, int nr, const int32_t *sums, const hm_lowp_row *rows, const int32_t *oidx,
                         const float *oval, const int8_t *P, const int32_t *cs, const float *sw, float *C, size_t ldc,
                         const hm_lowp_epi *e) {
    enum { NR = HM_LOWP_NEON_NR };
    const int32x4_t cs0 = vld1q_s32(cs), cs1 = vld1q_s32(cs + 4);
    const float32x4_t ws0 = vld1q_f32(sw), ws1 = vld1q_f32(sw + 4);
    for (int i = 0; i < mr; i++) {
        const hm_lowp_row *r = &rows[i];
        /* sum (q - 128) w - (z - 128) colsum = sum q w - z colsum */
        const int32x4_t z = vdupq_n_s32(r->zero - 128);
        float32x4_t f0 = vcvtq_f32_s32(vmlsq_s32(vld1q_s32(sums + (size_t)i * NR), z, cs0));
        float32x4_t f1 = vcvtq_f32_s32(vmlsq_s32(vld1q_s32(sums + (size_t)i * NR + 4), z, cs1));
        f0 = vmulq_n_f32(f0, r->scale), f1 = vmulq_n_f32(f1, r->scale);
        /* Outliers in fp32 against the same int8 weights: column n's byte
         * of k sits at (k / 8) * 64 + 8 n + k % 8 of the panel. */
        const int32_t *oi = oidx + (size_t)i * HM_LOWP_MAX_OUTLIERS;
        const float *ov = oval + (size_t)i * HM_LOWP_MAX_OUTLIERS;
        for (int j = 0; j < r->nout; j++) {
            const int k = oi[j];
            const int8x16x4_t g = vld1q_s8_x4(P + (size_t)(k >> 3) * NR * 8);
            const uint8_t b = (uint8_t)(k & 7);
            const uint8x16_t idx = {b, (uint8_t)(8 + b), (uint8_t)(16 + b), (uint8_t)(24 + b), (uint8_t)(32 + b),
                                    (uint8_t)(40 + b), (uint8_t)(48 + b), (uint8_t)(56 + b), 0, 0, 0, 0, 0, 0, 0, 0};
            const int16x8_t w = vmovl_s8(vget_low_s8(vqtbl4q_s8(g, idx)));
            f0 = vfmaq_n_f32(f0, vcvtq_f32_s32(vmovl_s16(vget_low_s16(w))), ov[j]);
            f1 = vfmaq_n_f32(f1, vcvtq_f32_s32(vmovl_s16(vget_high_s16(w))), ov[j]);
        }
        f0 = e->bias ? vfmaq_f32(vld1q_f32(e->bias), f0, ws0) : vmulq_f32(f0, ws0);
        f1 = e->bias ? vfmaq_f32(vld1q_f32(e->bias + 4), f1, ws1) : vmulq_f32(f1, ws1);
        float *c = C + (size_t)i * ldc;
        if (nr == NR) {
            if (e->accum) f0 = vaddq_f32(f0, vld1q_f32(c)), f1 = vaddq_f32(f1, vld1q_f32(c + 4));
            vst1q_f32(c, f0), vst1q_f32(c + 4, f1);
        } else {
            float t[NR] = {0};
            if (e->accum) memcpy(t, c, (size_t)nr * sizeof(float));
            if (e->accum) f0 = vaddq_f32(f0, vld1q_f32(t)), f1 = vaddq_f32(f1, vld1q_f32(t + 4));
            vst1q_f32(t, f0), vst1q_f32(t + 4, f1);
            memcpy(c, t, (size_t)nr * sizeof(float));
        }
        if (e->gelu) hm_gelu_vec_neon(c, (size_t)nr);
    }
}
