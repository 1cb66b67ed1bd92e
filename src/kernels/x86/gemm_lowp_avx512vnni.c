/* gemm_lowp_avx512vnni.c - kernels of the low-precision GEMM (built with
 * AVX-512 F/BW/VL/DQ + VNNI + BF16; only called after gemm_lowp.c has
 * checked CPUID).
 *
 * int8: vpdpbusd multiplies unsigned activation bytes by signed weight bytes
 * and adds groups of four into int32 lanes. Activations are quantised per
 * row (token) with an asymmetric u8 grid, so the zero point z is folded out
 * in the epilogue as z * colsum(W); int32 sums are exact (|sum| <=
 * K * 255 * 127 < 2^31 for K < 66000), so neither the K order nor the
 * thread count can change a result.
 *
 * bf16: vdpbf16ps adds pairs of bf16 products into fp32 lanes; the driver
 * rounds activations to bf16 per call.
 */
#include <immintrin.h>
#include <string.h>

#include "core/sanitize.h"
#include "kernels/gemm_fp32.h"
#include "kernels/gemm_lowp.h"
#include "kernels/gemm_lowp_quant.h"
#include "kernels/x86/x86.h"

#define HM_INLINE static inline __attribute__((always_inline))

/* Full unrolling keeps the accumulator arrays in registers. AddressSanitizer
 * builds skip it: it makes them compile ~4x slower (minutes with clang's
 * fuzzing instrumentation) and their speed does not matter. */
#ifdef HM_ASAN
#define HM_UNROLL(n)
#else
#define HM_PRAGMA(x) _Pragma(#x)
#define HM_UNROLL(n) HM_PRAGMA(GCC unroll n)
#endif

/* ---- int8: activation quantisation ------------------------------------ */

HM_INLINE __mmask16 hm_tail16(int n) { return n >= 16 ? (__mmask16)0xFFFF : (__mmask16)((1u << n) - 1); }

void hm_lowp_quant_row_avx512vnni(const float *x, int K, int Kp, uint8_t *q, hm_lowp_row *r,
                                  int32_t *oidx, float *oval) {
    /* Pass 1: mean and max of |x|. */
    __m512 sum = _mm512_setzero_ps(), amax = _mm512_setzero_ps();
    for (int k = 0; k < K; k += 16) {
        __m512 a = _mm512_abs_ps(_mm512_maskz_loadu_ps(hm_tail16(K - k), x + k));
        sum = _mm512_add_ps(sum, a);
        amax = _mm512_max_ps(amax, a);
    }
    float total = _mm512_reduce_add_ps(sum);
    if (!(total <= 3.4e38f)) {
        /* inf or NaN in the row: make every output of the row NaN, as the
         * fp32 path would, instead of quantising garbage into finite values. */
        memset(q, 0, (size_t)Kp);
        r->scale = __builtin_nanf("");
        r->zero = 0;
        r->nout = 0;
        r->grp = 0;
        return;
    }
    float thr = HM_LOWP_TAU * total / (float)K;
    float cut = thr; /* values with |x| <= cut stay on the int8 grid */
    hm_topk h;
    h.n = 0;
    if (_mm512_reduce_max_ps(amax) > thr) {
        /* Pass 2 (rare): the largest values above the threshold. */
        __m512 t = _mm512_set1_ps(thr);
        for (int k = 0; k < K; k += 16) {
            __mmask16 tm = hm_tail16(K - k);
            __m512 a = _mm512_abs_ps(_mm512_maskz_loadu_ps(tm, x + k));
            unsigned m = _mm512_mask_cmp_ps_mask(tm, a, t, _CMP_GT_OQ);
            while (m) {
                int j = __builtin_ctz(m);
                m &= m - 1;
                float v = x[k + j];
                hm_topk_push(&h, v < 0 ? -v : v, k + j);
            }
        }
        /* With a full list, everything left is <= its smallest entry. */
        if (h.n == HM_LOWP_MAX_OUTLIERS) cut = h.key[0];
    }
    /* Pass 3: range of the values that stay on the grid (0 included, so
     * that 0, padding and the removed outliers map exactly to z). */
    __m512 lo = _mm512_setzero_ps(), hi = _mm512_setzero_ps(), c = _mm512_set1_ps(cut);
    for (int k = 0; k < K; k += 16) {
        __mmask16 tm = hm_tail16(K - k);
        __m512 v = _mm512_maskz_loadu_ps(tm, x + k);
        __mmask16 in = _mm512_mask_cmp_ps_mask(tm, _mm512_abs_ps(v), c, _CMP_LE_OQ);
        lo = _mm512_mask_min_ps(lo, in, lo, v);
        hi = _mm512_mask_max_ps(hi, in, hi, v);
    }
    float l = _mm512_reduce_min_ps(lo), u = _mm512_reduce_max_ps(hi);
    float scale = (u - l) / 255.0f;
    int32_t z = 0;
    if (!(scale > 0.0f) || !(scale < 3.0e38f)) { /* all zero, or not finite */
        scale = 1.0f;
    } else {
        z = (int32_t)(-l / scale + 0.5f);
        z = z < 0 ? 0 : z > 255 ? 255 : z;
    }
    /* Pass 4: q = clamp(round(x / scale) + z, 0, 255). */
    __m512 inv = _mm512_set1_ps(1.0f / scale), zf = _mm512_set1_ps((float)z);
    __m512i q0 = _mm512_setzero_si512(), q255 = _mm512_set1_epi32(255);
    for (int k = 0; k < K; k += 16) {
        __mmask16 tm = hm_tail16(K - k);
        __m512 v = _mm512_fmadd_ps(_mm512_maskz_loadu_ps(tm, x + k), inv, zf);
        __m512i qi = _mm512_cvt_roundps_epi32(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
        qi = _mm512_min_epi32(_mm512_max_epi32(qi, q0), q255);
        _mm512_mask_cvtepi32_storeu_epi8(q + k, tm, qi);
    }
    for (int k = K; k < Kp; k++) q[k] = 0;
    for (int j = 0; j < h.n; j++) {
        oidx[j] = h.idx[j];
        oval[j] = x[h.idx[j]];
        q[h.idx[j]] = (uint8_t)z;
    }
    r->scale = scale;
    r->zero = z;
    r->nout = h.n;
    r->grp = 0;
}

/* ---- int8: micro-kernel ----------------------------------------------- */

#define I8_MR HM_LOWP_I8_MR
#define I8_NR HM_LOWP_I8_NR
#define I8_NV (I8_NR / 16)

/* Out of line and shared with the AMX kernel (gemm_lowp_amx.c): both paths
 * then turn the same int32 sums into the same floats, bit for bit. */
void hm_lowp_i8_epi_avx512vnni(int mr, int nr, const int32_t *sums, const hm_lowp_row *rows,
                               const int32_t *oidx, const float *oval, const int8_t *P, const int32_t *cs,
                               const float *sw, float *C, size_t ldc, const hm_lowp_epi *e) {
    __mmask16 mk[I8_NV];
    for (int g = 0; g < I8_NV; g++) mk[g] = nr <= g * 16 ? 0 : hm_tail16(nr - g * 16);
    for (int i = 0; i < mr; i++) {
        const hm_lowp_row *r = &rows[i];
        __m512i z = _mm512_set1_epi32(r->zero);
        __m512 s = _mm512_set1_ps(r->scale), f[I8_NV];
HM_UNROLL(4)
        for (int g = 0; g < I8_NV; g++) {
            __m512i v = _mm512_sub_epi32(_mm512_load_si512(sums + (size_t)i * I8_NR + g * 16),
                                         _mm512_mullo_epi32(z, _mm512_loadu_si512(cs + g * 16)));
            f[g] = _mm512_mul_ps(_mm512_cvtepi32_ps(v), s);
        }
        /* Outliers in fp32 against the same int8 weights: the column is
         * byte k & 3 of each 32-bit lane of group k >> 2. */
        const int32_t *oi = oidx + (size_t)i * HM_LOWP_MAX_OUTLIERS;
        const float *ov = oval + (size_t)i * HM_LOWP_MAX_OUTLIERS;
        for (int j = 0; j < r->nout; j++) {
            const int8_t *src = P + (size_t)(oi[j] >> 2) * I8_NR * 4;
            __m128i sh = _mm_cvtsi32_si128(24 - 8 * (oi[j] & 3));
            __m512 a = _mm512_set1_ps(ov[j]);
HM_UNROLL(4)
            for (int g = 0; g < I8_NV; g++) {
                __m512i wb = _mm512_sll_epi32(_mm512_load_si512(src + g * 64), sh);
                f[g] = _mm512_fmadd_ps(a, _mm512_cvtepi32_ps(_mm512_srai_epi32(wb, 24)), f[g]);
            }
        }
        float *c = C + (size_t)i * ldc;
        /* Centering: the group mean's product (computed like this one,
         * from its two int8 rows), added after the bias. */
        const float *sh = e->shared ? e->shared + (size_t)(r->grp - e->grp0) * I8_NR : NULL;
HM_UNROLL(4)
        for (int g = 0; g < I8_NV; g++) {
            __m512 ws = _mm512_loadu_ps(sw + g * 16);
            f[g] = e->bias ? _mm512_fmadd_ps(f[g], ws, _mm512_loadu_ps(e->bias + g * 16)) : _mm512_mul_ps(f[g], ws);
            if (sh) f[g] = _mm512_add_ps(f[g], _mm512_loadu_ps(sh + g * 16));
            if (e->accum) f[g] = _mm512_add_ps(f[g], _mm512_maskz_loadu_ps(mk[g], c + g * 16));
            _mm512_mask_storeu_ps(c + g * 16, mk[g], f[g]);
        }
        if (e->gelu) hm_gelu_vec_avx512(c, (size_t)nr);
    }
}

/* One mr x NR tile over the whole K (exact int32 sums need no K blocking
 * for accuracy, and at 4 bytes a weight a panel of K = 5120 is 320 KiB, so
 * it stays in L2 while the row tiles pass over it). */
HM_INLINE void hm_i8_tile(const int mr, int nr, int k4, const uint8_t *A, size_t lda,
                          const hm_lowp_row *rows, const int32_t *oidx, const float *oval,
                          const int8_t *P, const int32_t *cs, const float *sw,
                          float *C, size_t ldc, const hm_lowp_epi *e) {
    __m512i acc[I8_MR][I8_NV];
HM_UNROLL(6)
    for (int i = 0; i < mr; i++)
HM_UNROLL(4)
        for (int g = 0; g < I8_NV; g++) acc[i][g] = _mm512_setzero_si512();
    for (int k = 0; k < k4; k++) {
        __m512i w[I8_NV];
HM_UNROLL(4)
        for (int g = 0; g < I8_NV; g++) w[g] = _mm512_load_si512(P + (size_t)k * I8_NR * 4 + g * 64);
HM_UNROLL(6)
        for (int i = 0; i < mr; i++) {
            int32_t a4;
            memcpy(&a4, A + i * lda + (size_t)k * 4, 4);
            __m512i a = _mm512_set1_epi32(a4);
HM_UNROLL(4)
            for (int g = 0; g < I8_NV; g++) acc[i][g] = _mm512_dpbusd_epi32(acc[i][g], a, w[g]);
        }
    }
    /* Spill the sums once: indexing the accumulators by a run-time row in
     * the epilogue would otherwise make the compiler keep them in memory
     * inside the K loop too. */
    _Alignas(64) int32_t sums[I8_MR][I8_NR];
HM_UNROLL(6)
    for (int i = 0; i < mr; i++)
HM_UNROLL(4)
        for (int g = 0; g < I8_NV; g++) _mm512_store_si512(&sums[i][g * 16], acc[i][g]);
    hm_lowp_i8_epi_avx512vnni(mr, nr, &sums[0][0], rows, oidx, oval, P, cs, sw, C, ldc, e);
}

void hm_lowp_i8_block_avx512vnni(int m, int nr, int Kp, const uint8_t *Aq, size_t lda,
                                 const hm_lowp_row *rows, const int32_t *oidx, const float *oval,
                                 const int8_t *P, const int32_t *cs, const float *sw,
                                 float *C, size_t ldc, const hm_lowp_epi *e) {
    int k4 = Kp / 4, i = 0;
    const size_t os = HM_LOWP_MAX_OUTLIERS;
#define HM_I8_TILE(mr)                                                                                    \
    hm_i8_tile(mr, nr, k4, Aq + i * lda, lda, rows + i, oidx + i * os, oval + i * os, P, cs, sw, C + i * ldc, \
               ldc, e)
    const int parts = (m + I8_MR - 1) / I8_MR;
    for (; i + I8_MR <= m; i += I8_MR) {
        hm_prefetch_part(e->next, e->next_bytes, i / I8_MR, parts);
        HM_I8_TILE(I8_MR);
    }
    hm_prefetch_part(e->next, e->next_bytes, i / I8_MR, parts); /* the row tail's part, if any */
    switch (m - i) {
    case 0: break;
    case 1: HM_I8_TILE(1); break;
    case 2: HM_I8_TILE(2); break;
    case 3: HM_I8_TILE(3); break;
    case 4: HM_I8_TILE(4); break;
    case 5: HM_I8_TILE(5); break;
    }
#undef HM_I8_TILE
}

/* ---- bf16 --------------------------------------------------------------- */

void hm_lowp_bf16_row_avx512vnni(const float *x, int K, int Kp, uint16_t *out) {
    for (int k = 0; k < K; k += 16) {
        __mmask16 tm = hm_tail16(K - k);
        __m256bh b = _mm512_cvtneps_pbh(_mm512_maskz_loadu_ps(tm, x + k));
        __m256i bi;
        memcpy(&bi, &b, sizeof bi);
        _mm256_mask_storeu_epi16(out + k, tm, bi);
    }
    for (int k = K; k < Kp; k++) out[k] = 0;
}

#define BF_MR HM_LOWP_BF_MR
#define BF_NR HM_LOWP_BF_NR

HM_INLINE __m512bh hm_as_bh(__m512i v) {
    __m512bh r;
    memcpy(&r, &v, sizeof r);
    return r;
}

HM_INLINE void hm_bf_tile(const int mr, int nr, int k2, const uint16_t *A, size_t lda, const uint16_t *P,
                          float *C, size_t ldc, const hm_lowp_epi *e) {
    __m512 c0[BF_MR], c1[BF_MR];
HM_UNROLL(12)
    for (int i = 0; i < mr; i++) c0[i] = c1[i] = _mm512_setzero_ps();
    for (int k = 0; k < k2; k++) {
        __m512bh b0 = hm_as_bh(_mm512_load_si512(P + (size_t)k * BF_NR * 2));
        __m512bh b1 = hm_as_bh(_mm512_load_si512(P + (size_t)k * BF_NR * 2 + 32));
HM_UNROLL(12)
        for (int i = 0; i < mr; i++) {
            int32_t a2;
            memcpy(&a2, A + i * lda + (size_t)k * 2, 4);
            __m512bh a = hm_as_bh(_mm512_set1_epi32(a2));
            c0[i] = _mm512_dpbf16_ps(c0[i], a, b0);
            c1[i] = _mm512_dpbf16_ps(c1[i], a, b1);
        }
    }
    __mmask16 m0 = hm_tail16(nr), m1 = nr <= 16 ? 0 : hm_tail16(nr - 16);
    __m512 b0 = e->bias ? _mm512_loadu_ps(e->bias) : _mm512_setzero_ps();
    __m512 b1 = e->bias ? _mm512_loadu_ps(e->bias + 16) : _mm512_setzero_ps();
HM_UNROLL(12)
    for (int i = 0; i < mr; i++) {
        float *c = C + (size_t)i * ldc;
        c0[i] = _mm512_add_ps(c0[i], b0);
        c1[i] = _mm512_add_ps(c1[i], b1);
        if (e->accum) {
            c0[i] = _mm512_add_ps(c0[i], _mm512_maskz_loadu_ps(m0, c));
            c1[i] = _mm512_add_ps(c1[i], _mm512_maskz_loadu_ps(m1, c + 16));
        }
        _mm512_mask_storeu_ps(c, m0, c0[i]);
        _mm512_mask_storeu_ps(c + 16, m1, c1[i]);
    }
    if (e->gelu)
        for (int i = 0; i < mr; i++) hm_gelu_vec_avx512(C + (size_t)i * ldc, (size_t)nr);
}

void hm_lowp_bf16_block_avx512vnni(int m, int nr, int Kp, const uint16_t *A, size_t lda,
                                   const uint16_t *P, float *C, size_t ldc, const hm_lowp_epi *e) {
    int k2 = Kp / 2, i = 0;
    const int parts = (m + BF_MR - 1) / BF_MR;
    for (; i + BF_MR <= m; i += BF_MR) {
        hm_prefetch_part(e->next, e->next_bytes, i / BF_MR, parts);
        hm_bf_tile(BF_MR, nr, k2, A + i * lda, lda, P, C + i * ldc, ldc, e);
    }
    hm_prefetch_part(e->next, e->next_bytes, i / BF_MR, parts);
    const uint16_t *a = A + i * lda;
    float *c = C + i * ldc;
    switch (m - i) {
    case 0: break;
    case 1: hm_bf_tile(1, nr, k2, a, lda, P, c, ldc, e); break;
    case 2: hm_bf_tile(2, nr, k2, a, lda, P, c, ldc, e); break;
    case 3: hm_bf_tile(3, nr, k2, a, lda, P, c, ldc, e); break;
    case 4: hm_bf_tile(4, nr, k2, a, lda, P, c, ldc, e); break;
    case 5: hm_bf_tile(5, nr, k2, a, lda, P, c, ldc, e); break;
    case 6: hm_bf_tile(6, nr, k2, a, lda, P, c, ldc, e); break;
    case 7: hm_bf_tile(7, nr, k2, a, lda, P, c, ldc, e); break;
    case 8: hm_bf_tile(8, nr, k2, a, lda, P, c, ldc, e); break;
    case 9: hm_bf_tile(9, nr, k2, a, lda, P, c, ldc, e); break;
    case 10: hm_bf_tile(10, nr, k2, a, lda, P, c, ldc, e); break;
    case 11: hm_bf_tile(11, nr, k2, a, lda, P, c, ldc, e); break;
    }
}
