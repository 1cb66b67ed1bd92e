/* attn_avx512.c - one attention head in fp32, fused: the scores of four
 * query rows, their softmax and their output are done before the next four,
 * so the scores never leave L1 and neither matmul goes through the generic
 * GEMM (whose packing and n x n scores buffer cost as much as the
 * arithmetic at 192 tokens x 80 dims). Compiled with AVX-512F; reached
 * through hm_attention_head_f32 (attn.c) when the AVX-512 kernels are
 * active and the shape fits (kernels/attn.h).
 *
 * k is transposed once per head to [dim][token], so a vector holds 16
 * tokens' values of one dim; q and the softmax weights are broadcast per
 * row; v is read in place ([token][dim]). Every sum is a plain fp32 sum in
 * index order (dims for the scores, tokens for the output), scaled after
 * the sum (by 1/sqrt(hd), by the softmax row's 1/sum); the two-GEMM head
 * scales k and the weights instead, which differs only by rounding.
 */
#include <immintrin.h>
#include <stddef.h>

#include "kernels/attn.h"
#include "kernels/x86/vmath_avx512.h"
#include "kernels/x86/x86.h"

#define RB 4 /* query rows per block */

/* The register tiles are written out with named sums (GCC moves arrays of
 * vectors through the stack). */
#define FMA4(a0, a1, a2, a3, x, b0, b1, b2, b3)                                        \
    a0 = _mm512_fmadd_ps(x, b0, a0), a1 = _mm512_fmadd_ps(x, b1, a1),                   \
    a2 = _mm512_fmadd_ps(x, b2, a2), a3 = _mm512_fmadd_ps(x, b3, a3)

/* S[r][0..n) = scale * q_r . k for RB rows (q rows ld apart), 64 tokens at
 * a time, then 16. kt: [hd][n]. */
static void scores(const float *q, size_t ld, const float *kt, int n, int hd, __m512 scale, float *S) {
    const float *q0 = q, *q1 = q + ld, *q2 = q + 2 * ld, *q3 = q + 3 * ld;
    int c = 0;
    for (; c + 64 <= n; c += 64) {
        __m512 a00 = _mm512_setzero_ps(), a01 = a00, a02 = a00, a03 = a00;
        __m512 a10 = a00, a11 = a00, a12 = a00, a13 = a00;
        __m512 a20 = a00, a21 = a00, a22 = a00, a23 = a00;
        __m512 a30 = a00, a31 = a00, a32 = a00, a33 = a00;
        for (int d = 0; d < hd; d++) {
            const float *kr = kt + (size_t)d * n + c;
            const __m512 b0 = _mm512_loadu_ps(kr), b1 = _mm512_loadu_ps(kr + 16);
            const __m512 b2 = _mm512_loadu_ps(kr + 32), b3 = _mm512_loadu_ps(kr + 48);
            __m512 x = _mm512_set1_ps(q0[d]);
            FMA4(a00, a01, a02, a03, x, b0, b1, b2, b3);
            x = _mm512_set1_ps(q1[d]);
            FMA4(a10, a11, a12, a13, x, b0, b1, b2, b3);
            x = _mm512_set1_ps(q2[d]);
            FMA4(a20, a21, a22, a23, x, b0, b1, b2, b3);
            x = _mm512_set1_ps(q3[d]);
            FMA4(a30, a31, a32, a33, x, b0, b1, b2, b3);
        }
        float *s0 = S + c, *s1 = s0 + n, *s2 = s1 + n, *s3 = s2 + n;
        _mm512_storeu_ps(s0, _mm512_mul_ps(a00, scale)), _mm512_storeu_ps(s0 + 16, _mm512_mul_ps(a01, scale));
        _mm512_storeu_ps(s0 + 32, _mm512_mul_ps(a02, scale)), _mm512_storeu_ps(s0 + 48, _mm512_mul_ps(a03, scale));
        _mm512_storeu_ps(s1, _mm512_mul_ps(a10, scale)), _mm512_storeu_ps(s1 + 16, _mm512_mul_ps(a11, scale));
        _mm512_storeu_ps(s1 + 32, _mm512_mul_ps(a12, scale)), _mm512_storeu_ps(s1 + 48, _mm512_mul_ps(a13, scale));
        _mm512_storeu_ps(s2, _mm512_mul_ps(a20, scale)), _mm512_storeu_ps(s2 + 16, _mm512_mul_ps(a21, scale));
        _mm512_storeu_ps(s2 + 32, _mm512_mul_ps(a22, scale)), _mm512_storeu_ps(s2 + 48, _mm512_mul_ps(a23, scale));
        _mm512_storeu_ps(s3, _mm512_mul_ps(a30, scale)), _mm512_storeu_ps(s3 + 16, _mm512_mul_ps(a31, scale));
        _mm512_storeu_ps(s3 + 32, _mm512_mul_ps(a32, scale)), _mm512_storeu_ps(s3 + 48, _mm512_mul_ps(a33, scale));
    }
    for (; c < n; c += 16) {
        __m512 a0 = _mm512_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;
        for (int d = 0; d < hd; d++) {
            const __m512 b = _mm512_loadu_ps(kt + (size_t)d * n + c);
            FMA4(a0, a1, a2, a3, b, _mm512_set1_ps(q0[d]), _mm512_set1_ps(q1[d]), _mm512_set1_ps(q2[d]),
                 _mm512_set1_ps(q3[d]));
        }
        _mm512_storeu_ps(S + c, _mm512_mul_ps(a0, scale)), _mm512_storeu_ps(S + n + c, _mm512_mul_ps(a1, scale));
        _mm512_storeu_ps(S + 2 * n + c, _mm512_mul_ps(a2, scale));
        _mm512_storeu_ps(S + 3 * n + c, _mm512_mul_ps(a3, scale));
    }
}

/* o_r[d0..d0 + 80) = inv[r] sum_t P[r][t] v_t for RB rows: five vectors
 * of dims. */
static void weighted80(const float *P, int n, const float *v, size_t ld, int d0, const float inv[RB], float *o,
                       size_t ldo) {
    const float *p0 = P, *p1 = P + n, *p2 = P + 2 * n, *p3 = P + 3 * n;
    __m512 a00 = _mm512_setzero_ps(), a01 = a00, a02 = a00, a03 = a00, a04 = a00;
    __m512 a10 = a00, a11 = a00, a12 = a00, a13 = a00, a14 = a00;
    __m512 a20 = a00, a21 = a00, a22 = a00, a23 = a00, a24 = a00;
    __m512 a30 = a00, a31 = a00, a32 = a00, a33 = a00, a34 = a00;
    for (int t = 0; t < n; t++) {
        const float *vr = v + (size_t)t * ld + d0;
        const __m512 b0 = _mm512_loadu_ps(vr), b1 = _mm512_loadu_ps(vr + 16), b2 = _mm512_loadu_ps(vr + 32);
        const __m512 b3 = _mm512_loadu_ps(vr + 48), b4 = _mm512_loadu_ps(vr + 64);
        __m512 x = _mm512_set1_ps(p0[t]);
        FMA4(a00, a01, a02, a03, x, b0, b1, b2, b3), a04 = _mm512_fmadd_ps(x, b4, a04);
        x = _mm512_set1_ps(p1[t]);
        FMA4(a10, a11, a12, a13, x, b0, b1, b2, b3), a14 = _mm512_fmadd_ps(x, b4, a14);
        x = _mm512_set1_ps(p2[t]);
        FMA4(a20, a21, a22, a23, x, b0, b1, b2, b3), a24 = _mm512_fmadd_ps(x, b4, a24);
        x = _mm512_set1_ps(p3[t]);
        FMA4(a30, a31, a32, a33, x, b0, b1, b2, b3), a34 = _mm512_fmadd_ps(x, b4, a34);
    }
    /* row r's five sums times inv[r] */
#define STORE5(r, a0, a1, a2, a3, a4)                                                                   \
    do {                                                                                               \
        float *orow = o + (size_t)(r) * ldo + d0;                                                      \
        const __m512 w = _mm512_set1_ps(inv[r]);                                                       \
        _mm512_storeu_ps(orow, _mm512_mul_ps(a0, w)), _mm512_storeu_ps(orow + 16, _mm512_mul_ps(a1, w)); \
        _mm512_storeu_ps(orow + 32, _mm512_mul_ps(a2, w)), _mm512_storeu_ps(orow + 48, _mm512_mul_ps(a3, w)); \
        _mm512_storeu_ps(orow + 64, _mm512_mul_ps(a4, w));                                             \
    } while (0)
    STORE5(0, a00, a01, a02, a03, a04);
    STORE5(1, a10, a11, a12, a13, a14);
    STORE5(2, a20, a21, a22, a23, a24);
    STORE5(3, a30, a31, a32, a33, a34);
#undef STORE5
}

/* The same for one vector of 16 dims (heads that are not a multiple of 80). */
static void weighted16(const float *P, int n, const float *v, size_t ld, int d0, const float inv[RB], float *o,
                       size_t ldo) {
    __m512 a0 = _mm512_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;
    for (int t = 0; t < n; t++) {
        const __m512 b = _mm512_loadu_ps(v + (size_t)t * ld + d0);
        FMA4(a0, a1, a2, a3, b, _mm512_set1_ps(P[t]), _mm512_set1_ps(P[n + t]), _mm512_set1_ps(P[2 * n + t]),
             _mm512_set1_ps(P[3 * n + t]));
    }
    _mm512_storeu_ps(o + d0, _mm512_mul_ps(a0, _mm512_set1_ps(inv[0])));
    _mm512_storeu_ps(o + ldo + d0, _mm512_mul_ps(a1, _mm512_set1_ps(inv[1])));
    _mm512_storeu_ps(o + 2 * ldo + d0, _mm512_mul_ps(a2, _mm512_set1_ps(inv[2])));
    _mm512_storeu_ps(o + 3 * ldo + d0, _mm512_mul_ps(a3, _mm512_set1_ps(inv[3])));
}

void hm_attention_head_f32_avx512(int n, int hd, float scale, const float *q, const float *k, const float *v,
                                  size_t ld, float *o, size_t ldo, float *scratch) {
    float *kt = scratch;                   /* [hd][n] */
    float *S = kt + (size_t)hd * n;        /* [RB][n] */
    for (int t = 0; t < n; t += 16)
        for (int d = 0; d < hd; d += 16) hm_transpose16_avx512(k + (size_t)t * ld + d, ld, kt + (size_t)d * n + t, (size_t)n);
    const __m512 sc = _mm512_set1_ps(scale);
    for (int r0 = 0; r0 < n; r0 += RB) {
        scores(q + (size_t)r0 * ld, ld, kt, n, hd, sc, S);
        float inv[RB];
        hm_softmax4_avx512(S, n, inv);
        int d = 0;
        for (; d + 80 <= hd; d += 80) weighted80(S, n, v, ld, d, inv, o + (size_t)r0 * ldo, ldo);
        for (; d < hd; d += 16) weighted16(S, n, v, ld, d, inv, o + (size_t)r0 * ldo, ldo);
    }
}
