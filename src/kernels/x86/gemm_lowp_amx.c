/* gemm_lowp_amx.c - the int8 GEMM block on AMX tiles (built with AVX-512
 * F/BW/VL/DQ + VNNI + AMX-TILE + AMX-INT8; only called after core/cpu.c has
 * seen the CPUID bits, the OS tile state and the Linux permission).
 *
 * tdpbusd is vpdpbusd on a 16 x 16 x 64 block: the same unsigned-by-signed
 * byte products summed in int32 lanes, so the sums are exactly those of the
 * VNNI kernel (int32 additions of products that cannot overflow are exact in
 * any order), and the epilogue is the VNNI file's own function. Results are
 * therefore bit-identical to the VNNI path; only the speed differs.
 *
 * Tiles (palette 1, 8 tiles of at most 16 rows x 64 bytes):
 *   0..3  C: int32 sums, [row tile 0|1] x [column tile 0|1] = 32 x 32
 *   4, 5  A: the row tiles' activation bytes, 64 k each
 *   6, 7  B: two 16-column tiles of the panel, 64 k each
 * A 64-column panel is done as two 32-column halves. The K tail (k groups
 * past the last whole 16) and the sums are finished with vpdpbusd on the
 * spilled sums, so no tile reads past Kp; the row tail uses a tile
 * configuration with fewer rows, so no tile reads past row m either.
 */
#include <immintrin.h>
#include <stdint.h>
#include <string.h>

#include "kernels/x86/amx_tiles.h"
#include "kernels/gemm_fp32.h"
#include "kernels/gemm_lowp.h"
#include "kernels/x86/x86.h"

#if defined(__AMX_TILE__) && defined(__AMX_INT8__) && defined(__AVX512VNNI__)

#define NR HM_LOWP_I8_NR
#define KG 16             /* k groups (of 4 bytes) per tile step */
#define PSTRIDE (NR * 4)  /* bytes between k groups of a panel */
#define ROWS 32           /* rows per tile group: two row tiles */

int hm_lowp_amx_built(void) { return 1; }


/* r0, r1: rows of row tile 0 and 1 (r1 == 0: tiles 2, 3, 5 unused). */
static void hm_amx_config(int r0, int r1) {
    _Alignas(64) hm_tilecfg c;
    memset(&c, 0, sizeof c);
    c.palette = 1;
    const int rows[8] = {r0, r0, r1, r1, r0, r1, KG, KG};
    for (int t = 0; t < 8; t++)
        if (rows[t]) {
            c.rows[t] = (uint8_t)rows[t];
            c.colsb[t] = 64;
        }
    _tile_loadconfig(&c);
}

/* Sums of one tile group over the kb whole tile steps; `two` is a constant
 * after inlining, so the one-row-tile case has no branch in its loop. */
static inline __attribute__((always_inline)) void hm_amx_steps(const int two, int kb, const uint8_t *A,
                                                               size_t lda, const int8_t *P, int32_t *S) {
    for (int h = 0; h < 2; h++) {
        const int8_t *B = P + h * 128;
        _tile_zero(0);
        _tile_zero(1);
        if (two) {
            _tile_zero(2);
            _tile_zero(3);
        }
        for (int b = 0; b < kb; b++) {
            const int8_t *Bb = B + (size_t)b * KG * PSTRIDE;
            _tile_loadd(4, A + (size_t)b * 64, lda);
            _tile_loadd(6, Bb, PSTRIDE);
            _tile_loadd(7, Bb + 64, PSTRIDE);
            _tile_dpbusd(0, 4, 6);
            _tile_dpbusd(1, 4, 7);
            if (two) {
                _tile_loadd(5, A + 16 * lda + (size_t)b * 64, lda);
                _tile_dpbusd(2, 5, 6);
                _tile_dpbusd(3, 5, 7);
            }
        }
        int32_t *s = S + h * 32;
        _tile_stored(0, s, NR * 4);
        _tile_stored(1, s + 16, NR * 4);
        if (two) {
            _tile_stored(2, s + 16 * NR, NR * 4);
            _tile_stored(3, s + 16 * NR + 16, NR * 4);
        }
    }
}

/* S (m <= 32 rows of NR) for the current tile configuration. */
static void hm_amx_sums(int m, int k4, const uint8_t *A, size_t lda, const int8_t *P, int32_t *S) {
    int kb = k4 / KG;
    if (m > 16) hm_amx_steps(1, kb, A, lda, P, S);
    else hm_amx_steps(0, kb, A, lda, P, S);
    for (int i = 0; i < m; i++) {
        const uint8_t *a = A + i * lda;
        int32_t *s = S + (size_t)i * NR;
        __m512i acc[4];
        for (int g = 0; g < 4; g++) acc[g] = _mm512_load_si512(s + g * 16);
        for (int k = kb * KG; k < k4; k++) {
            int32_t a4;
            memcpy(&a4, a + (size_t)k * 4, 4);
            __m512i av = _mm512_set1_epi32(a4);
            for (int g = 0; g < 4; g++)
                acc[g] = _mm512_dpbusd_epi32(acc[g], av, _mm512_load_si512(P + (size_t)k * PSTRIDE + g * 64));
        }
        for (int g = 0; g < 4; g++) _mm512_store_si512(s + g * 16, acc[g]);
    }
}

static void hm_amx_config_rows(int m) {
    int r0 = m < 16 ? m : 16;
    hm_amx_config(r0, m - r0);
}

void hm_lowp_i8_sums_amx(int m, int Kp, const uint8_t *Aq, size_t lda, const int8_t *P, int32_t *S) {
    hm_amx_config_rows(m);
    hm_amx_sums(m, Kp / 4, Aq, lda, P, S);
    _tile_release();
}

void hm_lowp_i8_block_amx(int m, int nr, int Kp, const uint8_t *Aq, size_t lda, const hm_lowp_row *rows,
                          const int32_t *oidx, const float *oval, const int8_t *P, const int32_t *cs,
                          const float *sw, float *C, size_t ldc, const hm_lowp_epi *e) {
    _Alignas(64) int32_t S[ROWS * NR];
    int shape = 0; /* rows of the loaded configuration; 0: none yet */
    for (int i = 0; i < m; i += ROWS) {
        int r = m - i < ROWS ? m - i : ROWS;
        hm_prefetch_part(e->next, e->next_bytes, i / ROWS, (m + ROWS - 1) / ROWS);
        if (r != shape) {
            hm_amx_config_rows(r);
            shape = r;
        }
        hm_amx_sums(r, Kp / 4, Aq + (size_t)i * lda, lda, P, S);
        size_t os = (size_t)i * HM_LOWP_MAX_OUTLIERS;
        hm_lowp_i8_epi_avx512vnni(r, nr, S, rows + i, oidx + os, oval + os, P, cs, sw, C + (size_t)i * ldc, ldc,
                                  e);
    }
    /* Released so that the thread's tile state is not saved and restored
     * on every context switch between calls. */
    _tile_release();
}

/* ---- bf16 (AMX-BF16) ----------------------------------------------------
 * The same tile roles with fp32 C tiles; a 32-column bf16 panel is exactly
 * two column tiles, and a tile step is 16 k pairs (32 k). The K tail is
 * finished with vdpbf16ps on the spilled sums. */
#if defined(__AMX_BF16__) && defined(__AVX512BF16__)

#define BNR HM_LOWP_BF_NR
#define BPSTRIDE (BNR * 4) /* bytes between k pairs of a panel */

int hm_lowp_amx_bf16_built(void) { return 1; }

static inline __attribute__((always_inline)) void hm_amxbf_steps(const int two, int kb, const uint8_t *A,
                                                                 size_t ldab, const uint8_t *P, float *S) {
    _tile_zero(0);
    _tile_zero(1);
    if (two) {
        _tile_zero(2);
        _tile_zero(3);
    }
    for (int b = 0; b < kb; b++) {
        const uint8_t *Bb = P + (size_t)b * KG * BPSTRIDE;
        _tile_loadd(4, A + (size_t)b * 64, ldab);
        _tile_loadd(6, Bb, BPSTRIDE);
        _tile_loadd(7, Bb + 64, BPSTRIDE);
        _tile_dpbf16ps(0, 4, 6);
        _tile_dpbf16ps(1, 4, 7);
        if (two) {
            _tile_loadd(5, A + 16 * ldab + (size_t)b * 64, ldab);
            _tile_dpbf16ps(2, 5, 6);
            _tile_dpbf16ps(3, 5, 7);
        }
    }
    _tile_stored(0, S, BNR * 4);
    _tile_stored(1, S + 16, BNR * 4);
    if (two) {
        _tile_stored(2, S + 16 * BNR, BNR * 4);
        _tile_stored(3, S + 16 * BNR + 16, BNR * 4);
    }
}

static inline __m512bh hm_bh(__m512i v) {
    __m512bh r;
    memcpy(&r, &v, sizeof r);
    return r;
}

void hm_lowp_bf16_block_amx(int m, int nr, int Kp, const uint16_t *A, size_t lda, const uint16_t *P, float *C,
                            size_t ldc, const hm_lowp_epi *e) {
    _Alignas(64) float S[ROWS * BNR];
    int k2 = Kp / 2, kb = k2 / KG, shape = 0;
    size_t ldab = lda * 2;
    const uint8_t *Pb = (const uint8_t *)P;
    __mmask16 m0 = nr >= 16 ? (__mmask16)0xFFFF : (__mmask16)((1u << nr) - 1);
    __mmask16 m1 = nr <= 16 ? 0 : nr >= 32 ? (__mmask16)0xFFFF : (__mmask16)((1u << (nr - 16)) - 1);
    __m512 b0 = e->bias ? _mm512_loadu_ps(e->bias) : _mm512_setzero_ps();
    __m512 b1 = e->bias ? _mm512_loadu_ps(e->bias + 16) : _mm512_setzero_ps();
    for (int i = 0; i < m; i += ROWS) {
        int r = m - i < ROWS ? m - i : ROWS;
        hm_prefetch_part(e->next, e->next_bytes, i / ROWS, (m + ROWS - 1) / ROWS);
        if (r != shape) {
            hm_amx_config_rows(r);
            shape = r;
        }
        const uint8_t *Ai = (const uint8_t *)(A + (size_t)i * lda);
        if (r > 16) hm_amxbf_steps(1, kb, Ai, ldab, Pb, S);
        else hm_amxbf_steps(0, kb, Ai, ldab, Pb, S);
        for (int t = 0; t < r; t++) {
            const uint16_t *a = A + (size_t)(i + t) * lda;
            __m512 c0 = _mm512_load_ps(S + (size_t)t * BNR), c1 = _mm512_load_ps(S + (size_t)t * BNR + 16);
            for (int k = kb * KG; k < k2; k++) {
                int32_t a2;
                memcpy(&a2, a + (size_t)k * 2, 4);
                __m512bh av = hm_bh(_mm512_set1_epi32(a2));
                c0 = _mm512_dpbf16_ps(c0, av, hm_bh(_mm512_load_si512(P + (size_t)k * BNR * 2)));
                c1 = _mm512_dpbf16_ps(c1, av, hm_bh(_mm512_load_si512(P + (size_t)k * BNR * 2 + 32)));
            }
            float *c = C + (size_t)(i + t) * ldc;
            c0 = _mm512_add_ps(c0, b0);
            c1 = _mm512_add_ps(c1, b1);
            if (e->accum) {
                c0 = _mm512_add_ps(c0, _mm512_maskz_loadu_ps(m0, c));
                c1 = _mm512_add_ps(c1, _mm512_maskz_loadu_ps(m1, c + 16));
            }
            _mm512_mask_storeu_ps(c, m0, c0);
            _mm512_mask_storeu_ps(c + 16, m1, c1);
            if (e->gelu) hm_gelu_vec_avx512(c, (size_t)nr);
        }
    }
    _tile_release();
}

#else

int hm_lowp_amx_bf16_built(void) { return 0; }

void hm_lowp_bf16_block_amx(int m, int nr, int Kp, const uint16_t *A, size_t lda, const uint16_t *P, float *C,
                            size_t ldc, const hm_lowp_epi *e) {
    hm_lowp_bf16_block_avx512vnni(m, nr, Kp, A, lda, P, C, ldc, e);
}

#endif

#else /* the compiler cannot emit AMX: never selected (hm_lowp_amx_built) */

int hm_lowp_amx_built(void) { return 0; }

void hm_lowp_i8_block_amx(int m, int nr, int Kp, const uint8_t *Aq, size_t lda, const hm_lowp_row *rows,
                          const int32_t *oidx, const float *oval, const int8_t *P, const int32_t *cs,
                          const float *sw, float *C, size_t ldc, const hm_lowp_epi *e) {
    hm_lowp_i8_block_avx512vnni(m, nr, Kp, Aq, lda, rows, oidx, oval, P, cs, sw, C, ldc, e);
}

void hm_lowp_i8_sums_amx(int m, int Kp, const uint8_t *Aq, size_t lda, const int8_t *P, int32_t *S) {
    memset(S, 0, (size_t)m * HM_LOWP_I8_NR * sizeof(int32_t));
}

int hm_lowp_amx_bf16_built(void) { return 0; }

void hm_lowp_bf16_block_amx(int m, int nr, int Kp, const uint16_t *A, size_t lda, const uint16_t *P, float *C,
                            size_t ldc, const hm_lowp_epi *e) {
    hm_lowp_bf16_block_avx512vnni(m, nr, Kp, A, lda, P, C, ldc, e);
}

#endif
