/* gemm_fp32.h - private interface of the exact fp32 GEMM: the driver in
 * gemm_fp32.c and its per-ISA block kernels (gemm_scalar.c, gemm_avx2.c,
 * gemm_avx512.c).
 */
#ifndef HM_GEMM_FP32_H
#define HM_GEMM_FP32_H

#include <stddef.h>

#include "kernels/gemm.h"

/* Packed panel width (columns) per ISA, and the K block. KC is fixed so the
 * order of every sum is independent of threads and of the task split. */
#define HM_GEMM_NR_SCALAR 8
#define HM_GEMM_NR_AVX2 16
#define HM_GEMM_NR_AVX512 32
#define HM_GEMM_NR_NEON 16
#define HM_GEMM_NR_MAX 32
#define HM_GEMM_KC 256

/* fp32 packing in the active ISA's layout (arguments already checked). */
int hm_pack_fp32(hm_packed *p, const float *W, int ldw, const float *bias, int N, int K);
/* The fp32 driver (W->prec == HM_PREC_FP32). */
int hm_gemm_fp32(hm_pool *pool, int M, const float *A, int lda, const hm_packed *W, float *C, int ldc,
                 hm_epilogue epi);
/* Bytes of the w and (padded) bias arrays of an N x K packing for isa. */
int hm_fp32_sizes(int N, int K, int isa, size_t *w, size_t *bias);

/* What a block call does around its kc-long dot products. */
typedef struct {
    int load_c;          /* add beta * C to the block's sum (else C is not read) */
    float beta;
    const float *bias;   /* NR floats for this panel (zero padded) or NULL */
    int gelu;            /* apply gelu after the bias */
    const float *next;   /* the packed chunk the next block will read, or
                          * NULL: a kernel may prefetch it into L2 */
    size_t next_bytes;
} hm_gemm_epi_args;

/* Part `part` of `parts` of the bytes at next, prefetched into L2: a block
 * asks for one part per row tile, so the next block's weights (which
 * stream from DRAM) arrive while this one computes, where the next block's
 * first row tile would otherwise wait on them. Nothing for next NULL or a
 * part out of range; no effect on any result. Both GEMMs' kernels use it. */
static inline void hm_prefetch_part(const void *next, size_t bytes, int part, int parts) {
    if (!next || part < 0 || part >= parts) return;
    const size_t lines = bytes / 64, a = lines * (size_t)part / (size_t)parts,
                 b = lines * (size_t)(part + 1) / (size_t)parts;
    for (size_t i = a; i < b; i++) __builtin_prefetch((const char *)next + i * 64, 0, 2);
}

/* A block kernel (one per ISA level, kernels.h's gemm_block):
 * C[m, nr] = act(A[m, kc] . P (+ beta C) (+ bias)), the dot products summed
 * from zero before C joins. P is one packed chunk: kc rows of NR floats
 * (k-major, columns beyond nr are zero). nr <= NR; only nr columns of C are
 * read or written. Any m >= 1. */
typedef void (*hm_gemm_block_fn)(int m, int nr, int kc, const float *A, size_t lda, const float *P, float *C,
                                 size_t ldc, const hm_gemm_epi_args *e);
void hm_gemm_block_scalar(int m, int nr, int kc, const float *A, size_t lda,
                          const float *P, float *C, size_t ldc, const hm_gemm_epi_args *e);

#endif
