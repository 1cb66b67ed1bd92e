/* x86/vec_avx512.c - AVX-512 twins of the TFLite executor's depthwise and
 * elementwise kernels (kernels/vec.h; compiled with -mavx512f ..., reached
 * only through the avx512 kernel table, kernels.h).
 *
 * Same arithmetic as the portable kernels in the same order, except that
 * multiply-adds are fused: results agree to float rounding.
 */
#include <immintrin.h>
#include <string.h>

#include "kernels/x86/x86.h"

static inline __mmask16 tail_mask(int rem) { return rem >= 16 ? (__mmask16)0xFFFF : (__mmask16)((1u << rem) - 1); }

static inline __m512 act_vec(__m512 v, int act) {
    switch (act) {
    case HM_ACT_RELU: return _mm512_max_ps(v, _mm512_setzero_ps());
    case HM_ACT_RELU6: return _mm512_min_ps(_mm512_max_ps(v, _mm512_setzero_ps()), _mm512_set1_ps(6.0f));
    case HM_ACT_RELU_N1_TO_1: return _mm512_min_ps(_mm512_max_ps(v, _mm512_set1_ps(-1.0f)), _mm512_set1_ps(1.0f));
    default: return v;
    }
}

/* hm_vec_act in place. */
void hm_vec_act_avx512(float *x, size_t n, int act) {
    if (act == HM_ACT_NONE) return;
    size_t i = 0;
    for (; i + 16 <= n; i += 16) _mm512_storeu_ps(x + i, act_vec(_mm512_loadu_ps(x + i), act));
    if (i < n) {
        __mmask16 k = tail_mask((int)(n - i));
        _mm512_mask_storeu_ps(x + i, k, act_vec(_mm512_maskz_loadu_ps(k, x + i), act));
    }
}

/* y = act(a + b) over n floats; y may be a or b. */
void hm_vec_add_avx512(const float *a, const float *b, float *y, size_t n, int act) {
    size_t i = 0;
    for (; i + 16 <= n; i += 16)
        _mm512_storeu_ps(y + i, act_vec(_mm512_add_ps(_mm512_loadu_ps(a + i), _mm512_loadu_ps(b + i)), act));
    if (i < n) {
        __mmask16 k = tail_mask((int)(n - i));
        __m512 v = _mm512_add_ps(_mm512_maskz_loadu_ps(k, a + i), _mm512_maskz_loadu_ps(k, b + i));
        _mm512_mask_storeu_ps(y + i, k, act_vec(v, act));
    }
}

/* dst[0, n) = src[0, n), or zeros when src is NULL. */
void hm_vec_copy_avx512(float *dst, const float *src, size_t n) {
    size_t i = 0;
    for (; i + 16 <= n; i += 16) _mm512_storeu_ps(dst + i, src ? _mm512_loadu_ps(src + i) : _mm512_setzero_ps());
    if (i < n) {
        __mmask16 k = tail_mask((int)(n - i));
        _mm512_mask_storeu_ps(dst + i, k, src ? _mm512_maskz_loadu_ps(k, src + i) : _mm512_setzero_ps());
    }
}

/* n segments of len floats: segment i from src + i * sstep (zeros when src
 * is NULL) to dst + i * dstep. Segments of up to 16 floats (a stem
 * convolution's window rows) are one masked load and store each. */
void hm_vec_copy_strided_avx512(float *dst, size_t dstep, const float *src, size_t sstep, size_t len, int n) {
    if (len <= 16) {
        const __mmask16 k = tail_mask((int)len);
        for (int i = 0; i < n; i++, dst += dstep)
            _mm512_mask_storeu_ps(dst, k, src ? _mm512_maskz_loadu_ps(k, src + (size_t)i * sstep) : _mm512_setzero_ps());
        return;
    }
    for (int i = 0; i < n; i++, dst += dstep) hm_vec_copy_avx512(dst, src ? src + (size_t)i * sstep : NULL, len);
}

/* o = max(o, x) over n floats. */
void hm_vec_max_avx512(float *o, const float *x, size_t n) {
    size_t i = 0;
    for (; i + 16 <= n; i += 16) _mm512_storeu_ps(o + i, _mm512_max_ps(_mm512_loadu_ps(o + i), _mm512_loadu_ps(x + i)));
    if (i < n) {
        __mmask16 k = tail_mask((int)(n - i));
        _mm512_mask_storeu_ps(o + i, k, _mm512_max_ps(_mm512_maskz_loadu_ps(k, o + i), _mm512_maskz_loadu_ps(k, x + i)));
    }
}

/* rows x c: y = x >= 0 ? x : x * alpha[c] (alpha repeats every row). */
void hm_vec_prelu_avx512(const float *x, const float *alpha, float *y, size_t rows, size_t c) {
    const __m512 zero = _mm512_setzero_ps();
    for (size_t r = 0; r < rows; r++, x += c, y += c) {
        for (size_t i = 0; i < c; i += 16) {
            __mmask16 k = tail_mask((int)(c - i < 16 ? c - i : 16));
            __m512 v = _mm512_maskz_loadu_ps(k, x + i);
            __mmask16 neg = _mm512_cmp_ps_mask(v, zero, _CMP_LT_OQ);
            v = _mm512_mask_mul_ps(v, neg, v, _mm512_maskz_loadu_ps(k, alpha + i));
            _mm512_mask_storeu_ps(y + i, k, v);
        }
    }
}

/* rows x c in place: y = prelu(act(y + r)) with alpha per channel, one
 * pass (a convolution's fused ADD and PRELU while its rows are in cache;
 * the same operations, in the same order, as add then prelu). */
void hm_vec_add_prelu_avx512(float *y, const float *r, const float *alpha, size_t rows, size_t c, int act) {
    const __m512 zero = _mm512_setzero_ps();
    for (size_t i = 0; i < rows; i++, y += c, r += c) {
        for (size_t j = 0; j < c; j += 16) {
            __mmask16 k = tail_mask((int)(c - j < 16 ? c - j : 16));
            __m512 v = act_vec(_mm512_add_ps(_mm512_maskz_loadu_ps(k, y + j), _mm512_maskz_loadu_ps(k, r + j)), act);
            __mmask16 neg = _mm512_cmp_ps_mask(v, zero, _CMP_LT_OQ);
            v = _mm512_mask_mul_ps(v, neg, v, _mm512_maskz_loadu_ps(k, alpha + j));
            _mm512_mask_storeu_ps(y + j, k, v);
        }
    }
}

/* One output pixel of a depthwise row, 64 channels at a time in four
 * accumulators (independent FMA chains), the taps in (ky, kx) order,
 * clipped to the input (addresses are formed only for taps inside it).
 * img: the image index; iy0 / ix0: the window's top-left input position. */
static void dw_pixel(const hm_dw_geom *op, const float *x, size_t img, int H, int W, int C, int c0, int c1, int iy0,
                     int ky0, int ky1, int ix0, float *o) {
    int KW = op->kw;
    int kx0 = ix0 < 0 ? -ix0 : 0, kx1 = W - ix0 < KW ? W - ix0 : KW;
    for (int c = c0; c < c1; c += 64) {
        __mmask16 k0 = tail_mask(c1 - c), k1 = tail_mask(c1 - c - 16 > 0 ? c1 - c - 16 : 0),
                  k2 = tail_mask(c1 - c - 32 > 0 ? c1 - c - 32 : 0), k3 = tail_mask(c1 - c - 48 > 0 ? c1 - c - 48 : 0);
        __m512 a0 = _mm512_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;
        if (op->bias) {
            a0 = _mm512_maskz_loadu_ps(k0, op->bias + c);
            if (k1) a1 = _mm512_maskz_loadu_ps(k1, op->bias + c + 16);
            if (k2) a2 = _mm512_maskz_loadu_ps(k2, op->bias + c + 32);
            if (k3) a3 = _mm512_maskz_loadu_ps(k3, op->bias + c + 48);
        }
        for (int ky = ky0; ky < ky1; ky++) {
            const float *row = x + (img * H + (size_t)(iy0 + ky)) * W * C + c;
            const float *w = op->w + (size_t)ky * KW * C + c;
            for (int kx = kx0; kx < kx1; kx++) {
                const float *ip = row + (size_t)(ix0 + kx) * C, *wp = w + (size_t)kx * C;
                a0 = _mm512_fmadd_ps(_mm512_maskz_loadu_ps(k0, ip), _mm512_maskz_loadu_ps(k0, wp), a0);
                if (k1) a1 = _mm512_fmadd_ps(_mm512_maskz_loadu_ps(k1, ip + 16), _mm512_maskz_loadu_ps(k1, wp + 16), a1);
                if (k2) a2 = _mm512_fmadd_ps(_mm512_maskz_loadu_ps(k2, ip + 32), _mm512_maskz_loadu_ps(k2, wp + 32), a2);
                if (k3) a3 = _mm512_fmadd_ps(_mm512_maskz_loadu_ps(k3, ip + 48), _mm512_maskz_loadu_ps(k3, wp + 48), a3);
            }
        }
        _mm512_mask_storeu_ps(o + c, k0, act_vec(a0, op->act));
        if (k1) _mm512_mask_storeu_ps(o + c + 16, k1, act_vec(a1, op->act));
        if (k2) _mm512_mask_storeu_ps(o + c + 32, k2, act_vec(a2, op->act));
        if (k3) _mm512_mask_storeu_ps(o + c + 48, k3, act_vec(a3, op->act));
    }
}

#define TILE 8

/* The eight accumulators of a tile (TILE consecutive pixels, channels
 * [c, c + 16) under mask k), activated, to their pixels of o. */
#define DW_STORE8()                                                                                    \
    do {                                                                                               \
        const int act_ = op->act;                                                                      \
        _mm512_mask_storeu_ps(o + c, k, act_vec(a0, act_));                                            \
        _mm512_mask_storeu_ps(o + 1 * (size_t)C + c, k, act_vec(a1, act_));                            \
        _mm512_mask_storeu_ps(o + 2 * (size_t)C + c, k, act_vec(a2, act_));                            \
        _mm512_mask_storeu_ps(o + 3 * (size_t)C + c, k, act_vec(a3, act_));                            \
        _mm512_mask_storeu_ps(o + 4 * (size_t)C + c, k, act_vec(a4, act_));                            \
        _mm512_mask_storeu_ps(o + 5 * (size_t)C + c, k, act_vec(a5, act_));                            \
        _mm512_mask_storeu_ps(o + 6 * (size_t)C + c, k, act_vec(a6, act_));                            \
        _mm512_mask_storeu_ps(o + 7 * (size_t)C + c, k, act_vec(a7, act_));                            \
    } while (0)

/* TILE consecutive output pixels whose windows lie inside the input along
 * x: one weight load serves TILE multiply-adds. Same tap order. The
 * accumulators are spelled out: as an array, the compiler keeps them in
 * memory. */
static void dw_tile(const hm_dw_geom *op, const float *x, size_t img, int H, int W, int C, int c0, int c1, int iy0,
                    int ky0, int ky1, int ix0, float *o) {
    int KW = op->kw;
    size_t step = (size_t)op->sw * C;
    for (int c = c0; c < c1; c += 16) {
        __mmask16 k = tail_mask(c1 - c);
        __m512 b = op->bias ? _mm512_maskz_loadu_ps(k, op->bias + c) : _mm512_setzero_ps();
        __m512 a0 = b, a1 = b, a2 = b, a3 = b, a4 = b, a5 = b, a6 = b, a7 = b;
        for (int ky = ky0; ky < ky1; ky++) {
            const float *ip = x + ((img * H + (size_t)(iy0 + ky)) * W + (size_t)ix0) * C + c;
            const float *wp = op->w + (size_t)ky * KW * C + c;
            for (int kx = 0; kx < KW; kx++, ip += C, wp += C) {
                __m512 w = _mm512_maskz_loadu_ps(k, wp);
#define DW_TAP(p, a) a = _mm512_fmadd_ps(_mm512_maskz_loadu_ps(k, ip + (p) * step), w, a)
                DW_TAP(0, a0);
                DW_TAP(1, a1);
                DW_TAP(2, a2);
                DW_TAP(3, a3);
                DW_TAP(4, a4);
                DW_TAP(5, a5);
                DW_TAP(6, a6);
                DW_TAP(7, a7);
#undef DW_TAP
            }
        }
        DW_STORE8();
    }
}

/* Tiles of the common filters (3x3 and 5x5, stride 1 or 2): each input
 * vector of a filter row is loaded once, into a register, for every tap
 * that reads it ((TILE - 1) * S + KW loads per row instead of TILE * KW).
 * Same arithmetic and tap order as dw_tile. The _edge twins serve the
 * row's first and last tiles, whose windows reach past the input's left
 * or right edge: a column outside is a zero vector, so its taps add zero
 * products and each sum is dw_pixel's (which skips them), in the same
 * order, at the cost of an interior tile rather than dw_pixel's one FMA
 * chain per 16 channels of a pixel. */
#define DW_FMA8(w, i, S)                                                                               \
    do {                                                                                               \
        a0 = _mm512_fmadd_ps(v[(i) + 0 * (S)], w, a0), a1 = _mm512_fmadd_ps(v[(i) + 1 * (S)], w, a1); \
        a2 = _mm512_fmadd_ps(v[(i) + 2 * (S)], w, a2), a3 = _mm512_fmadd_ps(v[(i) + 3 * (S)], w, a3); \
        a4 = _mm512_fmadd_ps(v[(i) + 4 * (S)], w, a4), a5 = _mm512_fmadd_ps(v[(i) + 5 * (S)], w, a5); \
        a6 = _mm512_fmadd_ps(v[(i) + 6 * (S)], w, a6), a7 = _mm512_fmadd_ps(v[(i) + 7 * (S)], w, a7); \
    } while (0)

#define DW_TILE_KS(NAME, KW_, S_, EDGE_)                                                               \
    static void NAME(const hm_dw_geom *op, const float *x, size_t img, int H, int W, int C, int c0,    \
                     int c1, int iy0, int ky0, int ky1, int ix0, float *o) {                           \
        enum { SPAN = (TILE - 1) * (S_) + (KW_) };                                                     \
        /* edge: column j of the span loads under in[j] (all lanes or                                  \
         * none) from off[j] floats into the row (0 outside the input) */                              \
        __mmask16 in[SPAN];                                                                            \
        size_t off[SPAN];                                                                              \
        for (int j = 0; (EDGE_) && j < SPAN; j++) {                                                    \
            const int inside = ix0 + j >= 0 && ix0 + j < W;                                            \
            in[j] = inside ? (__mmask16)0xFFFF : 0;                                                    \
            off[j] = inside ? (size_t)(ix0 + j) * C : 0;                                               \
        }                                                                                              \
        for (int c = c0; c < c1; c += 16) {                                                            \
            __mmask16 k = tail_mask(c1 - c);                                                           \
            __m512 b = op->bias ? _mm512_maskz_loadu_ps(k, op->bias + c) : _mm512_setzero_ps();        \
            __m512 a0 = b, a1 = b, a2 = b, a3 = b, a4 = b, a5 = b, a6 = b, a7 = b;                     \
            for (int ky = ky0; ky < ky1; ky++) {                                                       \
                const float *ip = x + (img * H + (size_t)(iy0 + ky)) * W * C + c;                      \
                const float *wp = op->w + (size_t)ky * (KW_) * C + c;                                 \
                __m512 v[SPAN];                                                                        \
                /* Unrolled, so v and the accumulators live in registers. */                            \
                _Pragma("GCC unroll 24") for (int j = 0; j < SPAN; j++)                                \
                    v[j] = (EDGE_) ? _mm512_maskz_loadu_ps(k & in[j], ip + off[j])                     \
                                   : _mm512_maskz_loadu_ps(k, ip + (size_t)(ix0 + j) * C);             \
                _Pragma("GCC unroll 8") for (int kx = 0; kx < (KW_); kx++) {                           \
                    __m512 w = _mm512_maskz_loadu_ps(k, wp + (size_t)kx * C);                           \
                    DW_FMA8(w, kx, S_);                                                                \
                }                                                                                      \
            }                                                                                          \
            DW_STORE8();                                                                               \
        }                                                                                              \
    }

DW_TILE_KS(dw_tile_s1_k3, 3, 1, 0)
DW_TILE_KS(dw_tile_s1_k5, 5, 1, 0)
DW_TILE_KS(dw_tile_s2_k3, 3, 2, 0)
DW_TILE_KS(dw_tile_s2_k5, 5, 2, 0)
DW_TILE_KS(dw_tile_s1_k3_edge, 3, 1, 1)
DW_TILE_KS(dw_tile_s1_k5_edge, 5, 1, 1)
DW_TILE_KS(dw_tile_s2_k3_edge, 3, 2, 1)
DW_TILE_KS(dw_tile_s2_k5_edge, 5, 2, 1)

typedef void (*dw_tile_fn)(const hm_dw_geom *op, const float *x, size_t img, int H, int W, int C, int c0, int c1,
                           int iy0, int ky0, int ky1, int ix0, float *o);

/* [stride - 1][KW == 5][edge] */
static const dw_tile_fn dw_tiles[2][2][2] = {
    {{dw_tile_s1_k3, dw_tile_s1_k3_edge}, {dw_tile_s1_k5, dw_tile_s1_k5_edge}},
    {{dw_tile_s2_k3, dw_tile_s2_k3_edge}, {dw_tile_s2_k5, dw_tile_s2_k5_edge}},
};

/* Depthwise rows [r0, r1), channels [c0, c1), as hm_vec_dw_rows: tiles of
 * TILE pixels (edge tiles where a window leaves the input along x), single
 * pixels only in rows narrower than a tile. */
void hm_vec_dw_rows_avx512(const hm_dw_geom *op, const float *x, float *y, int r0, int r1, int c0,
                           int c1) {
    const int H = op->H, W = op->W, C = op->C, OH = op->OH, OW = op->OW;
    int KH = op->kh, KW = op->kw, sx = op->sw, pl = op->pad_left;
    int oxa, oxb; /* the interior along x */
    hm_inside_cols(W, OW, KW, sx, pl, &oxa, &oxb);
    const int fast = (sx == 1 || sx == 2) && (KW == 3 || KW == 5);
    for (int r = r0; r < r1; r++) {
        size_t n = (size_t)(r / OH);
        int oy = r % OH;
        int iy0 = oy * op->sh - op->pad_top;
        int ky0 = iy0 < 0 ? -iy0 : 0, ky1 = H - iy0 < KH ? H - iy0 : KH;
        float *orow = y + (size_t)r * OW * C;
        if (OW < TILE) { /* too narrow for a tile */
            for (int ox = 0; ox < OW; ox++)
                dw_pixel(op, x, n, H, W, C, c0, c1, iy0, ky0, ky1, ox * sx - pl, orow + (size_t)ox * C);
            continue;
        }
        /* tiles from the left; the last one ends at the row's end,
         * overlapping its neighbour (its pixels get the same values again) */
        for (int t = 0; t < OW; t += TILE) {
            const int ox = t + TILE <= OW ? t : OW - TILE, ix0 = ox * sx - pl, edge = ox < oxa || ox + TILE > oxb;
            float *o = orow + (size_t)ox * C;
            if (fast) {
                dw_tiles[sx - 1][KW == 5][edge](op, x, n, H, W, C, c0, c1, iy0, ky0, ky1, ix0, o);
            } else if (!edge) {
                dw_tile(op, x, n, H, W, C, c0, c1, iy0, ky0, ky1, ix0, o);
            } else {
                for (int p = 0; p < TILE; p++)
                    dw_pixel(op, x, n, H, W, C, c0, c1, iy0, ky0, ky1, ix0 + p * sx, o + (size_t)p * C);
            }
        }
    }
}
