/* attn_amx.c - one attention head on AMX tiles (tdpbf16ps): bf16 operands,
 * fp32 sums, fp32 softmax; the fast precision's attention where AMX-BF16 is
 * active (kernels/attn.h says when). Built with AMX-TILE + AMX-BF16 (+
 * AVX-512 BF16 for the conversions); a stub where the compiler lacks them.
 *
 * The operands are rounded to bf16 as the vdpbf16ps head rounds them
 * (attn_avx512vnni.c: q scaled first, k, v, and the softmax weights e^(s -
 * max), normalised on the output row), so both heads compute the same
 * products; their fp32 sums are added in other orders. Layouts (pair words: two bf16 of adjacent k in one 32-bit word):
 *   q: [n][hdp] bf16, hdp = hd rounded up to 32, zero padded: A tiles;
 *   k: [hdp/2][n] pair words (dims 2i, 2i+1 of token t at [i][t]): B tiles;
 *   v: [n/2][hd] pair words (tokens 2t, 2t+1 of dim d at [t][d]): B tiles;
 *   p: [32][n] bf16, the softmax weights of 32 query rows: A tiles.
 * Per 32 query rows: their scores (2 x 2 output tiles at a time, 32
 * columns), the softmax rows in fp32, then the output 16 rows at a time
 * (one output tile per 16 dims). n must be a multiple of 32, hd of 16.
 *
 * Tiles (palette 1, all 16 rows x 64 bytes): scores: 0..3 sums, 4, 5 q,
 * 6, 7 k; output: 0..4 sums (80 dims; 16 * HM_ATTN_AMX_OT at most), 5 p,
 * 6 v. */
#include <immintrin.h>
#include <stdint.h>
#include <string.h>

#include "core/sanitize.h"
#include "kernels/x86/amx_tiles.h"
#include "kernels/attn.h"
#include "kernels/x86/bf16_avx512.h"
#include "kernels/x86/vmath_avx512.h"

#if defined(__AMX_TILE__) && defined(__AMX_BF16__) && defined(__AVX512BF16__)

int hm_attention_amx_built(void) { return 1; }

/* All eight tiles 16 x 64 bytes. Static: the compiler cannot see that
 * ldtilecfg reads the whole object, and may drop stores to a local one. */
static const _Alignas(64) hm_tilecfg tiles16 = {
    .palette = 1,
    .colsb = {64, 64, 64, 64, 64, 64, 64, 64},
    .rows = {16, 16, 16, 16, 16, 16, 16, 16},
};

/* Room for 32 rows of scores (fp32) and weights (bf16), which first holds
 * k's bf16 rows ([n][hdp]). */
static size_t score_room(int n, size_t hdp) {
    const size_t s = 32 * (size_t)n * 6, k = (size_t)n * hdp * 2;
    return s > k ? s : k;
}

size_t hm_attention_amx_scratch(int n, int hd) {
    const size_t hdp = ((size_t)hd + 31) / 32 * 32;
    /* q and k (hdp dims), v bf16; the scores' room; one output tile, 64-byte
     * aligned */
    return ((size_t)n * hdp * 4 + (size_t)n * hd * 2 + score_room(n, hdp) + 16 * 16 * 4 + 64) / 4;
}

void hm_attention_head_amx(int n, int hd, float scale, const float *q, const float *k, const float *v, size_t ld,
                           float *o, size_t ldo, float *scratch) {
    const int hdp = (hd + 31) / 32 * 32, hp = hdp / 2, np = n / 2;
    uint16_t *qb = (uint16_t *)scratch;                      /* [n][hdp] */
    uint32_t *kp = (uint32_t *)(qb + (size_t)n * hdp);       /* [hp][n] */
    uint32_t *vp = kp + (size_t)hp * n;                      /* [np][hd] */
    float *S = (float *)(vp + (size_t)np * hd);              /* [32][n] */
    uint16_t *pb = (uint16_t *)(S + 32 * (size_t)n);         /* [32][n] */
    float *T = (float *)((char *)S + score_room(n, (size_t)hdp)); /* [16][16] */
    T = (float *)(((uintptr_t)T + 63) & ~(uintptr_t)63);
    const __m512 sc = _mm512_set1_ps(scale), one = _mm512_set1_ps(1.0f);
    /* ASan does not see tile loads and stores: the regions they touch are
     * checked whole here (core/sanitize.h) */
    hm_asan_region(q, ((size_t)(n - 1) * ld + (size_t)hd) * sizeof(float), 0);
    hm_asan_region(k, ((size_t)(n - 1) * ld + (size_t)hd) * sizeof(float), 0);
    hm_asan_region(v, ((size_t)(n - 1) * ld + (size_t)hd) * sizeof(float), 0);
    hm_asan_region(o, ((size_t)(n - 1) * ldo + (size_t)hd) * sizeof(float), 1);
    hm_asan_region(scratch, hm_attention_amx_scratch(n, hd) * sizeof(float), 1);

    /* q (scaled) and k rounded to bf16 as the vdpbf16ps head rounds them
     * (bf16_avx512.h), zero padded to hdp dims; k's dims paired per token;
     * v's tokens paired per dim */
    uint16_t *kb = (uint16_t *)S; /* [n][hdp] k rows, before the scores need the room */
    for (int t = 0; t < n; t++) {
        uint16_t *qr = qb + (size_t)t * hdp, *kr = kb + (size_t)t * hdp;
        for (int d = 0; d < hd; d += 16) {
            hm_bf16x16_avx512(q + (size_t)t * ld + d, sc, qr + d);
            hm_bf16x16_avx512(k + (size_t)t * ld + d, one, kr + d);
        }
        for (int d = hd; d < hdp; d++) qr[d] = 0, kr[d] = 0;
    }
    /* kb as [n][hp] pair words, transposed 16 x 16 words at a time */
    for (int t = 0; t < n; t += 16)
        for (int i = 0; i < hp; i += 16)
            hm_transpose16_avx512((const float *)kb + (size_t)t * hp + i, (size_t)hp, (float *)kp + (size_t)i * n + t,
                                  (size_t)n);
    hm_bf16_pair_rows_avx512(v, ld, np, hd, vp);

    _tile_loadconfig(&tiles16);
    const size_t qs = (size_t)hdp * 2, ks = (size_t)n * 4, ss = (size_t)n * 4, ps = (size_t)n * 2, vs = (size_t)hd * 4;
    for (int r0 = 0; r0 < n; r0 += 32) {
        /* scores of rows r0..r0+31, 32 columns at a time */
        for (int c0 = 0; c0 < n; c0 += 32) {
            _tile_zero(0);
            _tile_zero(1);
            _tile_zero(2);
            _tile_zero(3);
            for (int kk = 0; kk < hp; kk += 16) {
                _tile_loadd(4, qb + (size_t)r0 * hdp + 2 * kk, qs);
                _tile_loadd(5, qb + (size_t)(r0 + 16) * hdp + 2 * kk, qs);
                _tile_loadd(6, kp + (size_t)kk * n + c0, ks);
                _tile_loadd(7, kp + (size_t)kk * n + c0 + 16, ks);
                _tile_dpbf16ps(0, 4, 6);
                _tile_dpbf16ps(1, 4, 7);
                _tile_dpbf16ps(2, 5, 6);
                _tile_dpbf16ps(3, 5, 7);
            }
            _tile_stored(0, S + c0, ss);
            _tile_stored(1, S + c0 + 16, ss);
            _tile_stored(2, S + (size_t)16 * n + c0, ss);
            _tile_stored(3, S + (size_t)16 * n + c0 + 16, ss);
        }
        /* softmax rows in fp32, rounded to bf16 as the vdpbf16ps head rounds
         * them (bf16_avx512.h): e^(s - max), each row's 1 / sum applied to
         * its output row */
        float inv[32];
        for (int r = 0; r < 32; r++) {
            const float *sr = S + (size_t)r * n;
            __m512 m = _mm512_loadu_ps(sr);
            for (int t = 16; t < n; t += 16) m = _mm512_max_ps(m, _mm512_loadu_ps(sr + t));
            inv[r] = hm_softmax_bf16_avx512(sr, n, _mm512_reduce_max_ps(m), pb + (size_t)r * n);
        }
        /* output: 16 rows at a time, one tile per 16 dims */
        for (int h = 0; h < 32; h += 16) {
            for (int d0 = 0; d0 < hd; d0 += 16 * HM_ATTN_AMX_OT) {
                const int nt = (hd - d0) / 16 < HM_ATTN_AMX_OT ? (hd - d0) / 16 : HM_ATTN_AMX_OT;
                for (int j = 0; j < nt; j++) {
                    switch (j) { /* tile numbers are immediates */
                    case 0: _tile_zero(0); break;
                    case 1: _tile_zero(1); break;
                    case 2: _tile_zero(2); break;
                    case 3: _tile_zero(3); break;
                    default: _tile_zero(4); break;
                    }
                }
                for (int kk = 0; kk < np; kk += 16) {
                    _tile_loadd(5, pb + (size_t)h * n + 2 * kk, ps);
                    const uint32_t *vb = vp + (size_t)kk * hd + d0;
                    /* output tile J += p . v's dims J (tile numbers are immediates) */
#define PV_TILE(J)                                      \
    if (nt > J) {                                       \
        _tile_loadd(6, vb + 16 * J, vs);                \
        _tile_dpbf16ps(J, 5, 6);                        \
    }
                    PV_TILE(0)
                    PV_TILE(1)
                    PV_TILE(2)
                    PV_TILE(3)
                    PV_TILE(4)
#undef PV_TILE
                }
                for (int j = 0; j < nt; j++) {
                    switch (j) {
                    case 0: _tile_stored(0, T, 64); break;
                    case 1: _tile_stored(1, T, 64); break;
                    case 2: _tile_stored(2, T, 64); break;
                    case 3: _tile_stored(3, T, 64); break;
                    default: _tile_stored(4, T, 64); break;
                    }
                    for (int r = 0; r < 16; r++)
                        _mm512_storeu_ps(o + (size_t)(r0 + h + r) * ldo + d0 + 16 * j,
                                         _mm512_mul_ps(_mm512_loadu_ps(T + 16 * r), _mm512_set1_ps(inv[h + r])));
                }
            }
        }
    }
    _tile_release();
}

#else

/* Never chosen (hm_attention_amx_built is 0); the fp32 head keeps the
 * contract should anything call it. */
int hm_attention_amx_built(void) { return 0; }
size_t hm_attention_amx_scratch(int n, int hd) { return (size_t)n * n + (size_t)0 * hd; }
void hm_attention_head_amx(int n, int hd, float scale, const float *q, const float *k, const float *v, size_t ld,
                           float *o, size_t ldo, float *scratch) {
    hm_attention_head_f32_gemm(n, hd, scale, q, k, v, ld, o, ldo, scratch);
}

#endif
