/* bf16_avx512.h - how the bf16 attention heads (attn_avx512vnni.c,
 * attn_amx.c) round their operands, one piece of code for both so that
 * they compute the same products. Include only from files compiled with
 * AVX-512 BF16. */
#ifndef HM_BF16_AVX512_H
#define HM_BF16_AVX512_H

#include <immintrin.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

/* 16 floats times scale -> 16 bf16 (nearest even) at out: 8 pair words,
 * the even element in the low half, as vdpbf16ps and tdpbf16ps take them. */
static inline void hm_bf16x16_avx512(const float *x, __m512 scale, void *out) {
    __m256bh b = _mm512_cvtneps_pbh(_mm512_mul_ps(_mm512_loadu_ps(x), scale));
    memcpy(out, &b, sizeof b);
}

/* v's rows paired: vp[t][d] = the words (v[2t][d], v[2t+1][d]), t < np, d
 * < hd (a multiple of 16); v rows ld floats apart. Two rows are rounded side
 * by side, then their 16-bit halves interleaved. */
static inline void hm_bf16_pair_rows_avx512(const float *v, size_t ld, int np, int hd, uint32_t *vp) {
    const __m512i inter = _mm512_set_epi16(31, 15, 30, 14, 29, 13, 28, 12, 27, 11, 26, 10, 25, 9, 24, 8, 23, 7, 22, 6,
                                           21, 5, 20, 4, 19, 3, 18, 2, 17, 1, 16, 0);
    for (int t = 0; t < np; t++)
        for (int d = 0; d < hd; d += 16) {
            const __m512 lo = _mm512_loadu_ps(v + (size_t)(2 * t) * ld + d);
            const __m512 hi = _mm512_loadu_ps(v + (size_t)(2 * t + 1) * ld + d);
            __m512bh both = _mm512_cvtne2ps_pbh(hi, lo); /* [0,16): lo, [16,32): hi */
            __m512i w;
            memcpy(&w, &both, sizeof w);
            _mm512_storeu_si512(vp + (size_t)t * hd + d, _mm512_permutexvar_epi16(inter, w));
        }
}

/* 2^x (x <= 0 here; any finite x works): x = n + f, |f| <= 1/2, 2^f by a
 * degree-5 polynomial (relative error 2.2e-7 in fp32, 2e3 times below
 * bf16's rounding of the result), 2^n by vscalefps, which also takes
 * underflow to 0 and keeps NaN. Nine instructions against hm_exp512's
 * fourteen (and its clamp): the softmax is a tenth of the attention head's
 * work on Zen 4, on the same FMA pipes as the dot products. */
static inline __attribute__((always_inline)) __m512 hm_exp2_bf16_avx512(__m512 x) {
    const __m512 n = _mm512_roundscale_ps(x, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    const __m512 f = _mm512_sub_ps(x, n);
    __m512 p = _mm512_set1_ps(1.3267007e-03f);
    p = _mm512_fmadd_ps(p, f, _mm512_set1_ps(9.6754683e-03f));
    p = _mm512_fmadd_ps(p, f, _mm512_set1_ps(5.5507433e-02f));
    p = _mm512_fmadd_ps(p, f, _mm512_set1_ps(2.4022122e-01f));
    p = _mm512_fmadd_ps(p, f, _mm512_set1_ps(6.9314694e-01f));
    p = _mm512_fmadd_ps(p, f, _mm512_set1_ps(1.0000001f));
    return _mm512_scalef_ps(p, n);
}

/* The softmax weights of one row of n scores (n a multiple of 16) whose
 * largest is top, as the bf16 heads take them: e = e^(s - top) rounded to
 * bf16 into pb (n values: n / 2 pair words), not normalised; returns
 * 1 / sum(e) over the fp32 e, which the head applies to its output row
 * (80 multiplies instead of a pass over the 192 weights). Both bf16 heads
 * (attn_avx512vnni.c, attn_amx.c) round their weights here. */
static inline float hm_softmax_bf16_avx512(const float *s, int n, float top, void *pb) {
    const __m512 l2e = _mm512_set1_ps(1.44269504f), off = _mm512_set1_ps(top * 1.44269504f);
    __m512 sum = _mm512_setzero_ps();
    for (int t = 0; t < n; t += 16) {
        const __m512 e = hm_exp2_bf16_avx512(_mm512_fmsub_ps(_mm512_loadu_ps(s + t), l2e, off));
        sum = _mm512_add_ps(sum, e);
        __m256bh b = _mm512_cvtneps_pbh(e);
        memcpy((uint16_t *)pb + t, &b, sizeof b);
    }
    return 1.0f / _mm512_reduce_add_ps(sum);
}

#endif
