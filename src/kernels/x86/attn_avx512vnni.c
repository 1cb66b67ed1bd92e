/* attn_avx512vnni.c - one attention head with bf16 dot products
 * (vdpbf16ps) and an fp32 softmax; compiled with AVX-512 BF16 and reached
 * only when kernels/attn.h says it may (the default on AMD, HAMER_ATTN=bf16).
 *
 * Operands are rounded to bf16 (round to nearest even) as vdpbf16ps takes
 * them: pairs of bf16 in one 32-bit lane, the even element in the low half.
 *   q (scaled first, as the reference scales q before q k^T): one pair word
 *     per two dims, broadcast per row;
 *   k: transposed to [dim pair][token] so a vector holds 16 tokens' pairs;
 *   v: [token pair][dim], the two tokens' values interleaved per dim;
 *   p: e^(s - max) rounded to bf16, one pair word per two tokens; the sum
 *     of the fp32 values normalises the output row instead
 *     (bf16_avx512.h: hm_softmax_bf16_avx512).
 * Sums are fp32. Rows go 4 at a time, fused: their scores (with the rows'
 * running maxima), weights and output are done before the next 4, so the
 * scores never leave L1. q, k and v are read once per head, their rows
 * (3 x dim floats apart in the model: L3, not L2) prefetched ahead of the
 * packing. One 192 x 80 head on AMD EPYC Zen 4 (tests/c/tool_attn time,
 * thread CPU time): 63 us, of which the dot products 52 (scores 26.5, output
 * 25.5: at the unit's rate), the weights 4.8 and the packing 5.6.
 */
#include <immintrin.h>
#include <stdint.h>
#include <string.h>

#include "kernels/attn.h"
#include "kernels/x86/bf16_avx512.h"
#include "kernels/x86/vmath_avx512.h"
#include <math.h>

#define RB 4   /* query rows per block */
#define PF 3   /* rows ahead the packing prefetches */

static inline __m512bh as_bh(__m512i x) { return (__m512bh)x; }

/* S[r][0..n) = q_r . k for RB rows, 4 vectors of 16 tokens at a time;
 * mx[r]: the largest of row r. */
static void scores(const uint32_t *qb, int hp, const uint32_t *kp, int n, float *S, float mx[RB]) {
    __m512 m0 = _mm512_set1_ps(-INFINITY), m1 = m0, m2 = m0, m3 = m0;
    for (int c = 0; c < n; c += 64) {
        __m512 a00 = _mm512_setzero_ps(), a01 = a00, a02 = a00, a03 = a00;
        __m512 a10 = a00, a11 = a00, a12 = a00, a13 = a00;
        __m512 a20 = a00, a21 = a00, a22 = a00, a23 = a00;
        __m512 a30 = a00, a31 = a00, a32 = a00, a33 = a00;
        if (n - c >= 64) {
            for (int p = 0; p < hp; p++) {
                const uint32_t *kr = kp + (size_t)p * n + c;
                __m512bh b0 = as_bh(_mm512_loadu_si512(kr)), b1 = as_bh(_mm512_loadu_si512(kr + 16));
                __m512bh b2 = as_bh(_mm512_loadu_si512(kr + 32)), b3 = as_bh(_mm512_loadu_si512(kr + 48));
                __m512bh q;
                q = as_bh(_mm512_set1_epi32((int)qb[p]));
                a00 = _mm512_dpbf16_ps(a00, q, b0), a01 = _mm512_dpbf16_ps(a01, q, b1);
                a02 = _mm512_dpbf16_ps(a02, q, b2), a03 = _mm512_dpbf16_ps(a03, q, b3);
                q = as_bh(_mm512_set1_epi32((int)qb[hp + p]));
                a10 = _mm512_dpbf16_ps(a10, q, b0), a11 = _mm512_dpbf16_ps(a11, q, b1);
                a12 = _mm512_dpbf16_ps(a12, q, b2), a13 = _mm512_dpbf16_ps(a13, q, b3);
                q = as_bh(_mm512_set1_epi32((int)qb[2 * hp + p]));
                a20 = _mm512_dpbf16_ps(a20, q, b0), a21 = _mm512_dpbf16_ps(a21, q, b1);
                a22 = _mm512_dpbf16_ps(a22, q, b2), a23 = _mm512_dpbf16_ps(a23, q, b3);
                q = as_bh(_mm512_set1_epi32((int)qb[3 * hp + p]));
                a30 = _mm512_dpbf16_ps(a30, q, b0), a31 = _mm512_dpbf16_ps(a31, q, b1);
                a32 = _mm512_dpbf16_ps(a32, q, b2), a33 = _mm512_dpbf16_ps(a33, q, b3);
            }
            float *s0 = S + c, *s1 = s0 + n, *s2 = s1 + n, *s3 = s2 + n;
            _mm512_storeu_ps(s0, a00), _mm512_storeu_ps(s0 + 16, a01), _mm512_storeu_ps(s0 + 32, a02), _mm512_storeu_ps(s0 + 48, a03);
            _mm512_storeu_ps(s1, a10), _mm512_storeu_ps(s1 + 16, a11), _mm512_storeu_ps(s1 + 32, a12), _mm512_storeu_ps(s1 + 48, a13);
            _mm512_storeu_ps(s2, a20), _mm512_storeu_ps(s2 + 16, a21), _mm512_storeu_ps(s2 + 32, a22), _mm512_storeu_ps(s2 + 48, a23);
            _mm512_storeu_ps(s3, a30), _mm512_storeu_ps(s3 + 16, a31), _mm512_storeu_ps(s3 + 32, a32), _mm512_storeu_ps(s3 + 48, a33);
            m0 = _mm512_max_ps(m0, _mm512_max_ps(_mm512_max_ps(a00, a01), _mm512_max_ps(a02, a03)));
            m1 = _mm512_max_ps(m1, _mm512_max_ps(_mm512_max_ps(a10, a11), _mm512_max_ps(a12, a13)));
            m2 = _mm512_max_ps(m2, _mm512_max_ps(_mm512_max_ps(a20, a21), _mm512_max_ps(a22, a23)));
            m3 = _mm512_max_ps(m3, _mm512_max_ps(_mm512_max_ps(a30, a31), _mm512_max_ps(a32, a33)));
        } else {
            for (int cc = c; cc < n; cc += 16) {
                a00 = a10 = a20 = a30 = _mm512_setzero_ps();
                for (int p = 0; p < hp; p++) {
                    __m512bh b = as_bh(_mm512_loadu_si512(kp + (size_t)p * n + cc));
                    a00 = _mm512_dpbf16_ps(a00, as_bh(_mm512_set1_epi32((int)qb[p])), b);
                    a10 = _mm512_dpbf16_ps(a10, as_bh(_mm512_set1_epi32((int)qb[hp + p])), b);
                    a20 = _mm512_dpbf16_ps(a20, as_bh(_mm512_set1_epi32((int)qb[2 * hp + p])), b);
                    a30 = _mm512_dpbf16_ps(a30, as_bh(_mm512_set1_epi32((int)qb[3 * hp + p])), b);
                }
                _mm512_storeu_ps(S + cc, a00), _mm512_storeu_ps(S + n + cc, a10);
                _mm512_storeu_ps(S + 2 * n + cc, a20), _mm512_storeu_ps(S + 3 * n + cc, a30);
                m0 = _mm512_max_ps(m0, a00), m1 = _mm512_max_ps(m1, a10);
                m2 = _mm512_max_ps(m2, a20), m3 = _mm512_max_ps(m3, a30);
            }
        }
    }
    mx[0] = _mm512_reduce_max_ps(m0), mx[1] = _mm512_reduce_max_ps(m1);
    mx[2] = _mm512_reduce_max_ps(m2), mx[3] = _mm512_reduce_max_ps(m3);
}

/* o_r = inv_r (p_r . v) for RB rows and the 80 dims from d (5 vectors): the
 * 20 sums are named so that they stay in registers. */
static void weighted80(const uint32_t *pb, int np, const uint32_t *vp, int hd, int d, const float inv[RB], float *o,
                       size_t ldo) {
    __m512 a00 = _mm512_setzero_ps(), a01 = a00, a02 = a00, a03 = a00, a04 = a00;
    __m512 a10 = a00, a11 = a00, a12 = a00, a13 = a00, a14 = a00;
    __m512 a20 = a00, a21 = a00, a22 = a00, a23 = a00, a24 = a00;
    __m512 a30 = a00, a31 = a00, a32 = a00, a33 = a00, a34 = a00;
    for (int p = 0; p < np; p++) {
        const uint32_t *vr = vp + (size_t)p * hd + d;
        __m512bh b0 = as_bh(_mm512_loadu_si512(vr)), b1 = as_bh(_mm512_loadu_si512(vr + 16));
        __m512bh b2 = as_bh(_mm512_loadu_si512(vr + 32)), b3 = as_bh(_mm512_loadu_si512(vr + 48));
        __m512bh b4 = as_bh(_mm512_loadu_si512(vr + 64)), q;
        q = as_bh(_mm512_set1_epi32((int)pb[p]));
        a00 = _mm512_dpbf16_ps(a00, q, b0), a01 = _mm512_dpbf16_ps(a01, q, b1), a02 = _mm512_dpbf16_ps(a02, q, b2);
        a03 = _mm512_dpbf16_ps(a03, q, b3), a04 = _mm512_dpbf16_ps(a04, q, b4);
        q = as_bh(_mm512_set1_epi32((int)pb[np + p]));
        a10 = _mm512_dpbf16_ps(a10, q, b0), a11 = _mm512_dpbf16_ps(a11, q, b1), a12 = _mm512_dpbf16_ps(a12, q, b2);
        a13 = _mm512_dpbf16_ps(a13, q, b3), a14 = _mm512_dpbf16_ps(a14, q, b4);
        q = as_bh(_mm512_set1_epi32((int)pb[2 * np + p]));
        a20 = _mm512_dpbf16_ps(a20, q, b0), a21 = _mm512_dpbf16_ps(a21, q, b1), a22 = _mm512_dpbf16_ps(a22, q, b2);
        a23 = _mm512_dpbf16_ps(a23, q, b3), a24 = _mm512_dpbf16_ps(a24, q, b4);
        q = as_bh(_mm512_set1_epi32((int)pb[3 * np + p]));
        a30 = _mm512_dpbf16_ps(a30, q, b0), a31 = _mm512_dpbf16_ps(a31, q, b1), a32 = _mm512_dpbf16_ps(a32, q, b2);
        a33 = _mm512_dpbf16_ps(a33, q, b3), a34 = _mm512_dpbf16_ps(a34, q, b4);
    }
    float *o0 = o + d, *o1 = o0 + ldo, *o2 = o1 + ldo, *o3 = o2 + ldo;
    __m512 i0 = _mm512_set1_ps(inv[0]), i1 = _mm512_set1_ps(inv[1]), i2 = _mm512_set1_ps(inv[2]), i3 = _mm512_set1_ps(inv[3]);
    _mm512_storeu_ps(o0, _mm512_mul_ps(a00, i0)), _mm512_storeu_ps(o0 + 16, _mm512_mul_ps(a01, i0));
    _mm512_storeu_ps(o0 + 32, _mm512_mul_ps(a02, i0)), _mm512_storeu_ps(o0 + 48, _mm512_mul_ps(a03, i0));
    _mm512_storeu_ps(o0 + 64, _mm512_mul_ps(a04, i0));
    _mm512_storeu_ps(o1, _mm512_mul_ps(a10, i1)), _mm512_storeu_ps(o1 + 16, _mm512_mul_ps(a11, i1));
    _mm512_storeu_ps(o1 + 32, _mm512_mul_ps(a12, i1)), _mm512_storeu_ps(o1 + 48, _mm512_mul_ps(a13, i1));
    _mm512_storeu_ps(o1 + 64, _mm512_mul_ps(a14, i1));
    _mm512_storeu_ps(o2, _mm512_mul_ps(a20, i2)), _mm512_storeu_ps(o2 + 16, _mm512_mul_ps(a21, i2));
    _mm512_storeu_ps(o2 + 32, _mm512_mul_ps(a22, i2)), _mm512_storeu_ps(o2 + 48, _mm512_mul_ps(a23, i2));
    _mm512_storeu_ps(o2 + 64, _mm512_mul_ps(a24, i2));
    _mm512_storeu_ps(o3, _mm512_mul_ps(a30, i3)), _mm512_storeu_ps(o3 + 16, _mm512_mul_ps(a31, i3));
    _mm512_storeu_ps(o3 + 32, _mm512_mul_ps(a32, i3)), _mm512_storeu_ps(o3 + 48, _mm512_mul_ps(a33, i3));
    _mm512_storeu_ps(o3 + 64, _mm512_mul_ps(a34, i3));
}

/* The same for one vector of 16 dims (heads that are not a multiple of 80). */
static void weighted16(const uint32_t *pb, int np, const uint32_t *vp, int hd, int d, const float inv[RB], float *o,
                       size_t ldo) {
    __m512 a0 = _mm512_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;
    for (int p = 0; p < np; p++) {
        __m512bh b = as_bh(_mm512_loadu_si512(vp + (size_t)p * hd + d));
        a0 = _mm512_dpbf16_ps(a0, as_bh(_mm512_set1_epi32((int)pb[p])), b);
        a1 = _mm512_dpbf16_ps(a1, as_bh(_mm512_set1_epi32((int)pb[np + p])), b);
        a2 = _mm512_dpbf16_ps(a2, as_bh(_mm512_set1_epi32((int)pb[2 * np + p])), b);
        a3 = _mm512_dpbf16_ps(a3, as_bh(_mm512_set1_epi32((int)pb[3 * np + p])), b);
    }
    _mm512_storeu_ps(o + d, _mm512_mul_ps(a0, _mm512_set1_ps(inv[0])));
    _mm512_storeu_ps(o + ldo + d, _mm512_mul_ps(a1, _mm512_set1_ps(inv[1])));
    _mm512_storeu_ps(o + 2 * ldo + d, _mm512_mul_ps(a2, _mm512_set1_ps(inv[2])));
    _mm512_storeu_ps(o + 3 * ldo + d, _mm512_mul_ps(a3, _mm512_set1_ps(inv[3])));
}

static void weighted(const uint32_t *pb, int np, const uint32_t *vp, int hd, const float inv[RB], float *o,
                     size_t ldo) {
    int d = 0;
    for (; d + 80 <= hd; d += 80) weighted80(pb, np, vp, hd, d, inv, o, ldo);
    for (; d < hd; d += 16) weighted16(pb, np, vp, hd, d, inv, o, ldo);
}

/* The hd floats of row t of x (rows ld apart), into L1 ahead of use. */
static inline void prefetch_row(const float *x, size_t ld, int t, int hd) {
    for (int d = 0; d < hd; d += 16) _mm_prefetch((const char *)(x + (size_t)t * ld + d), _MM_HINT_T0);
}

void hm_attention_head_bf16(int n, int hd, float scale, const float *q, const float *k, const float *v, size_t ld,
                            float *o, size_t ldo, float *scratch) {
    int hp = hd / 2, np = n / 2;
    uint32_t *qb = (uint32_t *)scratch;             /* [n][hp] */
    uint32_t *kp = qb + (size_t)n * hp;             /* [hp][n] */
    uint32_t *vp = kp + (size_t)hp * n;             /* [np][hd] */
    uint32_t *pb = vp + (size_t)np * hd;            /* [RB][np] */
    float *S = (float *)(pb + (size_t)RB * np);     /* [RB][n] */
    __m512 one = _mm512_set1_ps(1.0f), sc = _mm512_set1_ps(scale);
    /* k's pair words of 16 tokens, then transposed 16 x 16 at a time (the
     * columns past hp are zero and never stored) */
    _Alignas(64) uint32_t kt[16][HM_ATTN_MAX_HD / 2 + 16], tmp[16][16];
    memset(kt, 0, sizeof kt);
    for (int t = 0; t < PF && t < n; t++) prefetch_row(q, ld, t, hd), prefetch_row(k, ld, t, hd), prefetch_row(v, ld, t, hd);
    for (int t0 = 0; t0 < n; t0 += 16) {
        for (int t = t0; t < t0 + 16; t++) {
            if (t + PF < n) prefetch_row(q, ld, t + PF, hd), prefetch_row(k, ld, t + PF, hd), prefetch_row(v, ld, t + PF, hd);
            for (int d = 0; d < hd; d += 16) hm_bf16x16_avx512(q + (size_t)t * ld + d, sc, qb + (size_t)t * hp + d / 2);
            for (int d = 0; d < hd; d += 16) hm_bf16x16_avx512(k + (size_t)t * ld + d, one, &kt[t - t0][d / 2]);
            /* two tokens' bf16 values interleaved per dim: words (v[2t][d], v[2t+1][d]) */
            if (t & 1) hm_bf16_pair_rows_avx512(v + (size_t)(t - 1) * ld, ld, 1, hd, vp + (size_t)(t / 2) * hd);
        }
        for (int i = 0; i < hp; i += 16) {
            if (i + 16 <= hp) {
                hm_transpose16_avx512((const float *)&kt[0][i], HM_ATTN_MAX_HD / 2 + 16, (float *)kp + (size_t)i * n + t0, (size_t)n);
                continue;
            }
            hm_transpose16_avx512((const float *)&kt[0][i], HM_ATTN_MAX_HD / 2 + 16, (float *)&tmp[0][0], 16);
            for (int j = 0; i + j < hp; j++) memcpy(kp + (size_t)(i + j) * n + t0, tmp[j], sizeof tmp[j]);
        }
    }
    for (int r0 = 0; r0 < n; r0 += RB) {
        float mx[RB], inv[RB];
        scores(qb + (size_t)r0 * hp, hp, kp, n, S, mx);
        for (int r = 0; r < RB; r++) inv[r] = hm_softmax_bf16_avx512(S + (size_t)r * n, n, mx[r], pb + (size_t)r * np);
        weighted(pb, np, vp, hd, inv, o + (size_t)r0 * ldo, ldo);
    }
}
