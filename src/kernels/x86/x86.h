/* x86/x86.h - the x86 kernels' entry points that the portable drivers reach
 * through the kernel tables (kernels.h, filled in x86/kernels_x86.c) or,
 * for the fast precision's variants, through gemm_lowp.c and attn.c.
 * Each is compiled for its ISA only (CMake picks the flags from the file
 * name) and must run only where core/cpu.h reports that ISA.
 */
#ifndef HM_KERNELS_X86_H
#define HM_KERNELS_X86_H

#include <stddef.h>
#include <stdint.h>

#include "kernels/attn.h"
#include "kernels/gemm_fp32.h"
#include "kernels/norm.h"
#include "kernels/vec.h"

/* ---- fp32 GEMM (gemm_avx2.c, gemm_avx512.c): block kernels of
 * gemm_fp32.h's contract, and the vectorised GELU ---- */
void hm_gemm_block_avx2(int m, int nr, int kc, const float *A, size_t lda,
                        const float *P, float *C, size_t ldc, const hm_gemm_epi_args *e);
void hm_gemm_block_avx512(int m, int nr, int kc, const float *A, size_t lda,
                          const float *P, float *C, size_t ldc, const hm_gemm_epi_args *e);

/* Vectorised exact GELU in place over n floats (per ISA; same contract as
 * hm_gelu in vmath.h, within a few ulp). */
void hm_gelu_vec_avx2(float *x, size_t n);
void hm_gelu_vec_avx512(float *x, size_t n);
/* The same over mr rows of nr floats, ldc apart (a GEMM tile): rows of at
 * most 32 go two at a time, so that four vectors' polynomials overlap. */
void hm_gelu_rows_avx512(float *C, size_t ldc, int mr, int nr);

/* ---- LayerNorm and softmax rows (norm_avx512.c): norm.h's contracts ---- */
void hm_layernorm_avx512(const float *x, float *y, int n, int d, const float *w, const float *b, float eps);
void hm_softmax_avx512(float *x, int n);

/* ---- the fused fp32 attention head (attn_avx512.c): the contract of
 * hm_attention_head_f32 ---- */
void hm_attention_head_f32_avx512(int n, int hd, float scale, const float *q, const float *k, const float *v,
                                  size_t ld, float *o, size_t ldo, float *scratch);

/* ---- the TFLite executor's kernels (vec_avx512.c): vec.h's contracts ---- */
void hm_vec_act_avx512(float *x, size_t n, int act);
void hm_vec_add_avx512(const float *a, const float *b, float *y, size_t n, int act);
void hm_vec_prelu_avx512(const float *x, const float *alpha, float *y, size_t rows, size_t c);
void hm_vec_add_prelu_avx512(float *y, const float *r, const float *alpha, size_t rows, size_t c, int act);
void hm_vec_copy_avx512(float *dst, const float *src, size_t n);
void hm_vec_copy_strided_avx512(float *dst, size_t dstep, const float *src, size_t sstep, size_t len, int n);
void hm_vec_max_avx512(float *o, const float *x, size_t n);
void hm_vec_dw_rows_avx512(const hm_dw_geom *g, const float *x, float *y, int r0, int r1, int c0, int c1);

#endif
