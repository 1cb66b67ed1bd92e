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

#endif
