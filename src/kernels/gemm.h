/* gemm.h - the one matrix-multiply interface every model stage uses.
 *
 * Weights are PyTorch Linear weights W [N, K] (out, in). They are packed once
 * at load time into the kernel's layout; a forward computes
 *     C[M, N] (op)= A[M, K] . W^T + bias
 * with A and C row-major (leading dimensions lda, ldc in floats).
 * The ISA is chosen at run time from CPUID (avx512 > avx2 > scalar) and can
 * be forced with hm_gemm_force_isa() or the environment variable
 * HAMER_ISA=avx512|avx2|scalar (read once, at the first call). Forcing an ISA
 * the CPU lacks is an error, not a silent fallback.
 */
#ifndef HM_GEMM_H
#define HM_GEMM_H

#include <stddef.h>
#include "core/pool.h"

typedef enum { HM_ISA_SCALAR = 0, HM_ISA_AVX2 = 1, HM_ISA_AVX512 = 2 } hm_isa;

typedef enum {
    HM_EPI_STORE = 0,      /* C  = A.W^T + b */
    HM_EPI_GELU = 1,       /* C  = gelu_erf(A.W^T + b) */
    HM_EPI_ACCUM = 2,      /* C += A.W^T + b   (residual add) */
} hm_epilogue;

/* Weight precision of a packed matrix. FP32 is exact; FAST is the gated
 * low-precision scheme (see hm_precision_scheme; kernels/gemm_lowp.c). */
typedef enum { HM_PREC_FP32 = 0, HM_PREC_FAST = 1 } hm_precision;

typedef struct {
    int N, K;
    int isa;               /* hm_isa the layout was packed for */
    int prec;              /* hm_precision of this packing */
    float *w;              /* packed weights (hm_alloc'd, layout private) */
    float *bias;           /* [N] or NULL (hm_alloc'd copy) */
    void *lp;              /* low-precision weights (FAST only; layout private) */
    float *lp_scale;       /* FAST: per-output-channel scales */
} hm_packed;

/* Best ISA this CPU supports (CPUID + XGETBV); cached. */
hm_isa hm_cpu_isa(void);
/* Active ISA (forced or detected). */
hm_isa hm_gemm_isa(void);
const char *hm_isa_name(hm_isa isa);
/* Force an ISA; HM_E_UNSUPPORTED if this CPU cannot run it. Must be called
 * before any hm_pack_weights (packed layouts are tied to the ISA). */
int hm_gemm_force_isa(hm_isa isa);

/* Pack W [N, K] row-major (row stride ldw floats) and bias [N] (may be NULL).
 * HM_OK or HM_E_NOMEM. */
int hm_pack_weights(hm_packed *p, const float *W, int ldw, const float *bias, int N, int K);
void hm_packed_free(hm_packed *p);

/* Pack for a precision: FP32 is hm_pack_weights; FAST packs the low-precision
 * scheme, or returns HM_E_UNSUPPORTED (with a message) where this CPU or
 * build cannot run it. hm_gemm dispatches on p->prec. */
int hm_pack_weights_prec(hm_packed *p, const float *W, int ldw, const float *bias, int N, int K, hm_precision prec);
/* Human-readable name of the scheme behind a precision, e.g. "fp32". */
const char *hm_precision_scheme(hm_precision prec);

/* Byte sizes of the arrays a packing of W [N, K] owns, for a packed model
 * file that stores them as they are: fp32 (w, bias) in `isa`'s layout, or
 * FAST (lp with its block header, lp_scale, bias) of low-precision variant
 * lp_kind (hm_lowp_kind). bias is the padded size a packing with a bias
 * has; the other fields are 0 where the packing has no such array. */
typedef struct {
    size_t w, bias, lp, lp_scale;
} hm_packed_sizes;
int hm_packed_sizes_for(int N, int K, int isa, int prec, int lp_kind, hm_packed_sizes *s);

/* C (op)= A . W^T + bias over M rows, parallel over the pool (may be NULL).
 * No allocation. Requires M >= 1. */
void hm_gemm(hm_pool *pool, int M, const float *A, int lda,
             const hm_packed *W, float *C, int ldc, hm_epilogue epi);

/* Unpacked helpers for attention (small, operands in activation layout):
 *   hm_sgemm_nt: C[M,N] = alpha * A[M,K] . B[N,K]^T  (+ beta*C)
 *   hm_sgemm_nn: C[M,N] = alpha * A[M,K] . B[K,N]    (+ beta*C)
 * Single-threaded (the caller parallelises over heads). */
void hm_sgemm_nt(int M, int N, int K, float alpha, const float *A, int lda,
                 const float *B, int ldb, float beta, float *C, int ldc);
void hm_sgemm_nn(int M, int N, int K, float alpha, const float *A, int lda,
                 const float *B, int ldb, float beta, float *C, int ldc);

/* Exact GELU: 0.5 x (1 + erf(x / sqrt 2)), float. */
float hm_gelu(float x);

/* ---- Status and kernel interface (gemm.c and the gemm_<isa>.c files) ---- */

/* HM_OK, or HM_E_UNSUPPORTED (with an hm_err message) when HAMER_ISA names an
 * unknown ISA or one this CPU lacks and no hm_gemm_force_isa overrode it. */
int hm_gemm_status(void);

/* Packed panel width (columns) per ISA, and the K block. KC is fixed so the
 * order of every sum is independent of threads and of the task split. */
#define HM_GEMM_NR_SCALAR 8
#define HM_GEMM_NR_AVX2 16
#define HM_GEMM_NR_AVX512 32
#define HM_GEMM_NR_MAX 32
#define HM_GEMM_KC 256

/* What a block call does around its kc-long dot products. */
typedef struct {
    int load_c;          /* add beta * C to the block's sum (else C is not read) */
    float beta;
    const float *bias;   /* NR floats for this panel (zero padded) or NULL */
    int gelu;            /* apply gelu after the bias */
} hm_gemm_epi_args;

/* C[m, nr] = act(A[m, kc] . P (+ beta C) (+ bias)), the dot products summed
 * from zero before C joins. P is one packed chunk: kc rows of NR floats
 * (k-major, columns beyond nr are zero). nr <= NR; only nr columns of C are
 * read or written. Any m >= 1. */
void hm_gemm_block_scalar(int m, int nr, int kc, const float *A, size_t lda,
                          const float *P, float *C, size_t ldc, const hm_gemm_epi_args *e);
void hm_gemm_block_avx2(int m, int nr, int kc, const float *A, size_t lda,
                        const float *P, float *C, size_t ldc, const hm_gemm_epi_args *e);
void hm_gemm_block_avx512(int m, int nr, int kc, const float *A, size_t lda,
                          const float *P, float *C, size_t ldc, const hm_gemm_epi_args *e);

/* Vectorised exact GELU in place over n floats (per ISA; same contract as
 * hm_gelu, within a few ulp). */
void hm_gelu_vec_avx2(float *x, size_t n);
void hm_gelu_vec_avx512(float *x, size_t n);

#endif
