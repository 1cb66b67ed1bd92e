/* gemm.h - the one matrix-multiply interface every model stage uses.
 *
 * Weights are PyTorch Linear weights W [N, K] (out, in). They are packed once
 * at load time into the kernel's layout; a forward computes
 *     C[M, N] (op)= A[M, K] . W^T + bias
 * with A and C row-major (leading dimensions lda, ldc in floats).
 * The ISA is the process's active one (core/cpu.h: CPUID, HAMER_ISA,
 * hm_isa_force); a packing keeps the ISA it was made for.
 *
 * Files: gemm.c (this interface: dispatch on precision), gemm_fp32.c (the
 * exact driver and its block kernels gemm_{scalar,avx2,avx512}.c),
 * gemm_lowp.c (the "fast" driver, kernels in gemm_lowp_avx512vnni.c).
 */
#ifndef HM_GEMM_H
#define HM_GEMM_H

#include <stddef.h>
#include "core/cpu.h"
#include "core/pool.h"

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

/* Pack W [N, K] row-major (row stride ldw floats) and bias [N] (may be NULL).
 * HM_OK or HM_E_NOMEM. */
int hm_pack_weights(hm_packed *p, const float *W, int ldw, const float *bias, int N, int K);
void hm_packed_free(hm_packed *p);

/* Pack for a precision: FP32 is hm_pack_weights; FAST packs the low-precision
 * scheme, or returns HM_E_UNSUPPORTED (with a message) where this CPU or
 * build cannot run it. hm_gemm dispatches on p->prec. */
int hm_pack_weights_prec(hm_packed *p, const float *W, int ldw, const float *bias, int N, int K, hm_precision prec);
/* FAST packing for a matmul whose int8 error the model amplifies (in the
 * ViT: the attention output projection, whose input is mostly a component
 * shared by all tokens, so the weights' int8 rounding of that component
 * is an error common to every token): int8 with fine weights (a second
 * int8 panel of the first one's rounding residue), which a call with
 * hm_gemm_opts.center uses for each group's mean, where the model's
 * variant is int8; bf16 where it is bf16. Fails (HM_E_UNSUPPORTED) exactly
 * when hm_pack_weights_prec(FAST) does. */
int hm_pack_weights_fast_sensitive(hm_packed *p, const float *W, int ldw, const float *bias, int N, int K);
/* FAST packing in bf16 where the CPU has AVX512-BF16, else fp32 (prec
 * FP32): for matmuls whose weights stream for a few rows (the decoder's
 * one-token matmuls), where int8 costs too much accuracy. Fails exactly
 * when hm_pack_weights_prec(FAST) does. */
int hm_pack_weights_fast_bf16(hm_packed *p, const float *W, int ldw, const float *bias, int N, int K);
/* Whether FAST's int8 matmuls run on AMX tiles now (core/cpu.h
 * hm_amx_active, and a build with the AMX kernel); results are the same. */
int hm_lowp_amx_in_use(void);
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
 * HM_OK, or a negative code with a message (bad arguments, weights packed
 * for an ISA this CPU lacks, scratch that cannot be had); on error C may be
 * partly written. With a pool whose scratch was reserved for
 * hm_gemm_scratch_bytes(W, M) (hm_pool_reserve), nothing is allocated. */
int hm_gemm(hm_pool *pool, int M, const float *A, int lda,
            const hm_packed *W, float *C, int ldc, hm_epilogue epi);
/* Pool scratch bytes hm_gemm needs for M rows of W (0 for fp32 packings);
 * also enough for any hm_gemm_ex call of M rows. */
size_t hm_gemm_scratch_bytes(const hm_packed *W, int M);

/* What hm_gemm_ex does around the product; zero-initialise, then set:
 *  epi         the epilogue, as hm_gemm's;
 *  ln_w, ln_b  a LayerNorm prologue: the product takes LN(A row) (weights
 *              ln_w, ln_b, epsilon ln_eps; hm_layernorm's arithmetic)
 *              instead of the row. Low-precision packings normalise each
 *              row inside their activation rounding and write nothing
 *              else; fp32 packings normalise the rows into ln_out (M rows,
 *              ld_ln floats apart, required) over the pool first, then
 *              multiply those: the result is what hm_layernorm then
 *              hm_gemm give, bit for bit, either way;
 *  center      int8 packings only (others ignore it): the rows come in
 *              groups of `center` rows (one crop's tokens; >= 16); each
 *              group's column mean is taken out of its rows before they
 *              are quantised, and its product is added back at ~16-bit
 *              precision (the mean as two int8 rows: its grid and the
 *              residue). The int8 grid then spans what differs between
 *              the rows rather than what they share (see gemm_lowp.c);
 *              results depend on the other rows of the same group, never
 *              on other groups or the thread count. Not with ln_w. */
typedef struct {
    hm_epilogue epi;
    const float *ln_w, *ln_b;
    float ln_eps;
    float *ln_out;
    int ld_ln;
    int center;
} hm_gemm_opts;

/* hm_gemm with the options above (o NULL: plain STORE). Same errors, and
 * HM_E_ARG for options that do not fit (ln without ln_out on an fp32
 * packing, center < 16 or with ln, M not a multiple of center). */
int hm_gemm_ex(hm_pool *pool, int M, const float *A, int lda, const hm_packed *W, float *C, int ldc,
               const hm_gemm_opts *o);
/* Tests: the hm_gemm call after `after` more successful ones fails with
 * `code` (and a message) before touching C; after < 0 disarms. */
void hm_gemm_test_fail(int after, int code);

/* Unpacked helpers for attention (small, operands in activation layout):
 *   hm_sgemm_nt: C[M,N] = alpha * A[M,K] . B[N,K]^T  (+ beta*C)
 *   hm_sgemm_nn: C[M,N] = alpha * A[M,K] . B[K,N]    (+ beta*C)
 * Single-threaded (the caller parallelises over heads). */
void hm_sgemm_nt(int M, int N, int K, float alpha, const float *A, int lda,
                 const float *B, int ldb, float beta, float *C, int ldc);
void hm_sgemm_nn(int M, int N, int K, float alpha, const float *A, int lda,
                 const float *B, int ldb, float beta, float *C, int ldc);

#endif
