/* arm/arm.h - the AArch64 kernels' entry points that the portable drivers
 * reach through the kernel table (kernels.h, filled in arm/kernels_arm.c)
 * or, for the fast precision's variants, through gemm_lowp.c and attn.c.
 * Compiled for AArch64 only; the file name gives the extension a file
 * needs (CMakeLists.txt), and code of an extension runs only where
 * core/cpu.h reports it (HM_CPU_DOTPROD / HM_CPU_I8MM / HM_CPU_ARM_BF16).
 */
#ifndef HM_KERNELS_ARM_H
#define HM_KERNELS_ARM_H

#include <stddef.h>
#include <stdint.h>

#include "kernels/attn.h"
#include "kernels/gemm_fp32.h"
#include "kernels/norm.h"
#include "kernels/vec.h"

/* ---- fp32 GEMM (gemm_neon.c): gemm_fp32.h's block kernel, and GELU in
 * place over n floats (hm_gelu's contract, within a few ulp) ---- */
void hm_gemm_block_neon(int m, int nr, int kc, const float *A, size_t lda, const float *P, float *C, size_t ldc,
                        const hm_gemm_epi_args *e);
void hm_gelu_vec_neon(float *x, size_t n);

/* ---- LayerNorm and softmax rows (norm_neon.c): norm.h's contracts ---- */
void hm_layernorm_neon(const float *x, float *y, int n, int d, const float *w, const float *b, float eps);
void hm_softmax_neon(float *x, int n);

/* ---- the fused fp32 attention head (attn_neon.c) ---- */
void hm_attention_head_f32_neon(int n, int hd, float scale, const float *q, const float *k, const float *v,
                                size_t ld, float *o, size_t ldo, float *scratch);

/* ---- the TFLite executor's kernels (vec_neon.c): vec.h's contracts ---- */
void hm_vec_act_neon(float *x, size_t n, int act);
void hm_vec_add_neon(const float *a, const float *b, float *y, size_t n, int act);
void hm_vec_prelu_neon(const float *x, const float *alpha, float *y, size_t rows, size_t c);
void hm_vec_add_prelu_neon(float *y, const float *r, const float *alpha, size_t rows, size_t c, int act);
void hm_vec_copy_neon(float *dst, const float *src, size_t n);
void hm_vec_copy_strided_neon(float *dst, size_t dstep, const float *src, size_t sstep, size_t len, int n);
void hm_vec_max_neon(float *o, const float *x, size_t n);
void hm_vec_dw_rows_neon(const hm_dw_geom *g, const float *x, float *y, int r0, int r1, int c0, int c1);

#endif
