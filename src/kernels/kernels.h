/* kernels.h - the CPU kernels of one ISA level as a table: the one place
 * where an ISA level (core/cpu.h) becomes the functions both engines call,
 * the ViT's (gemm_fp32.c, norm.c, attn.c) and the TFLite executor's
 * (vec.h, through tflite/).
 *
 * Each architecture's folder fills the tables of its levels (x86/: avx2,
 * avx512; arm/: neon); kernels.c holds the portable (scalar) table and the
 * switch. A level without its own body for an entry points at the portable
 * one, so every entry is always callable. The fast precision's variants
 * (int8 / bf16, VNNI / AMX / dot product / i8mm) are chosen inside
 * gemm_lowp.c and attn.c, from the CPU's features, because one ISA level
 * has several of them.
 */
#ifndef HM_KERNELS_H
#define HM_KERNELS_H

#include <stddef.h>

#include "core/cpu.h"
#include "kernels/gemm_fp32.h"
#include "kernels/vec.h"

typedef struct hm_kernels {
    int isa;                     /* hm_isa of this level */
    /* fp32 GEMM (gemm_fp32.h): packed panel width and block kernel */
    int gemm_nr;
    hm_gemm_block_fn gemm_block;
    /* exact GELU in place over n floats (vmath.h's hm_gelu, within a few
     * ulp): what the block kernels' GELU epilogue applies */
    void (*gelu)(float *x, size_t n);
    /* rows (norm.h): LayerNorm (statistics in double) and softmax */
    void (*layernorm)(const float *x, float *y, int n, int d, const float *w, const float *b, float eps);
    void (*softmax)(float *x, int n);
    /* the fused fp32 attention head (attn.h; needs n and hd multiples of
     * 16), or NULL: two GEMMs around the softmax rows */
    void (*attn_f32_fused)(int n, int hd, float scale, const float *q, const float *k, const float *v, size_t ld,
                           float *o, size_t ldo, float *scratch);
    /* the TFLite executor's (vec.h) */
    void (*act)(float *x, size_t n, int act);
    void (*add)(const float *a, const float *b, float *y, size_t n, int act);
    void (*prelu)(const float *x, const float *alpha, float *y, size_t rows, size_t c);
    void (*add_prelu)(float *y, const float *r, const float *alpha, size_t rows, size_t c, int act);
    void (*copy)(float *dst, const float *src, size_t n);
    void (*copy_strided)(float *dst, size_t dstep, const float *src, size_t sstep, size_t len, int n);
    void (*max)(float *o, const float *x, size_t n);
    void (*dw_rows)(const hm_dw_geom *g, const float *x, float *y, int r0, int r1, int c0, int c1);
} hm_kernels;

/* The table of ISA level isa: its own where this build has it (a level of
 * another architecture, or one this build lacks, gives the portable table;
 * callers pass levels hm_isa_runs accepted). Never NULL. */
const hm_kernels *hm_kernels_for(int isa);
/* The active level's (hm_isa_active). */
static inline const hm_kernels *hm_kernels_active(void) { return hm_kernels_for((int)hm_isa_active()); }

/* Tables the architecture folders define (kernels.c picks among them). */
extern const hm_kernels hm_kernels_scalar;
#if defined(__x86_64__)
extern const hm_kernels hm_kernels_avx2, hm_kernels_avx512;
#elif defined(__aarch64__)
extern const hm_kernels hm_kernels_neon;
#endif

/* The portable bodies of the rows entries (norm.c). */
void hm_layernorm_c(const float *x, float *y, int n, int d, const float *w, const float *b, float eps);
void hm_softmax_c(float *x, int n);
/* The portable GELU row (gemm_scalar.c): hm_gelu per element. */
void hm_gelu_vec_c(float *x, size_t n);

#endif
