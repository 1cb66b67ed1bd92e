/* gemm_lowp.h - private interface of the low-precision ("fast") GEMM:
 * the driver in gemm_lowp.c and its kernels (x86/gemm_lowp_avx512vnni.c,
 * x86/gemm_lowp_amx.c; arm/gemm_lowp_neon.c, _dotprod.c, _i8mm.c, _bf16.c).
 *
 * FAST = int8 (see gemm_lowp.c for the scheme and why it won over bf16;
 * the bf16 variant stays selectable for measurements and tests).
 */
#ifndef HM_GEMM_LOWP_H
#define HM_GEMM_LOWP_H

#include <stddef.h>
#include <stdint.h>

#include "kernels/gemm.h"
#include "kernels/gemm_fp32.h"

/* Variants behind HM_PREC_FAST, each a packed layout of one architecture
 * (values are stored in packed model files: never renumber):
 *   HM_LOWP_INT8 / HM_LOWP_BF16            x86 (AVX-512 VNNI / BF16, AMX)
 *   HM_LOWP_INT8_NEON / HM_LOWP_BF16_NEON  AArch64 (SDOT or SMMLA / BFMMLA)
 *   HM_LOWP_INT8F                          x86 int8 with fine weights: each
 *       panel followed by a second int8 panel of what the first one's grid
 *       missed (W ~= s (q + q' / 254)), which only the product of a
 *       centred GEMM's group means reads (the attention projection's;
 *       gemm_lowp.c); the rest of its product is plain HM_LOWP_INT8's.
 * A build runs its own architecture's; hm_lowp_force_kind and HAMER_LOWP
 * speak of int8 / bf16 and mean this build's (never int8f, a packing of
 * single matmuls). */
typedef enum {
    HM_LOWP_INT8 = 0,
    HM_LOWP_BF16 = 1,
    HM_LOWP_INT8_NEON = 2,
    HM_LOWP_BF16_NEON = 3,
    HM_LOWP_INT8F = 4
} hm_lowp_kind;
#define HM_LOWP_KINDS 5
/* Whether kind is a bf16 layout (of either architecture), and its name
 * ("int8", "bf16", "int8-neon", "bf16-neon", "int8f"; "unknown" outside the
 * enum). */
static inline int hm_lowp_kind_is_bf16(int kind) { return kind == HM_LOWP_BF16 || kind == HM_LOWP_BF16_NEON; }
const char *hm_lowp_kind_name(int kind);

/* AArch64 panels: NR = 8 columns, in groups of 16 bytes that hold two
 * columns' 8 int8 (or 4 bf16) consecutive k each, column pairs side by side
 * per k group: the B operand of SMMLA / BFMMLA as it is, and of SDOT with
 * the activation's 8 bytes in both halves. Quantised activations are
 * stored the same way, two rows' 8-byte groups interleaved (a row pair's
 * 16-byte group is SMMLA's / BFMMLA's A operand). Register tiles: SDOT 4
 * rows, SMMLA and BFMMLA 10 (5 row pairs), each by the panel's 8 columns
 * (24 accumulators or more made the compiler spill them in the K loop). */
#define HM_LOWP_NEON_NR 8
#define HM_LOWP_DOT_MR 4
#define HM_LOWP_MMLA_MR 10

/* Register tiles: int8 is MR 6 x NR 64 (24 zmm accumulators of 16 int32,
 * each vpdpbusd covering 4 k); bf16 is MR 12 x NR 32 (vdpbf16ps, 2 k). */
#define HM_LOWP_I8_MR 6
#define HM_LOWP_I8_NR 64
#define HM_LOWP_BF_MR 12
#define HM_LOWP_BF_NR 32

/* At most this many activations per row are taken out of the int8 grid and
 * applied in fp32 (the largest ones; see gemm_lowp.c). */
#define HM_LOWP_MAX_OUTLIERS 32

/* How one quantised activation row maps back to floats:
 *   x[k] ~= scale * (q[k] - zero)   for k not in the outlier list,
 *   x[oidx[j]] = oval[j] exactly     (their q is set to zero). */
typedef struct {
    float scale;
    int32_t zero;
    int32_t nout;
    int32_t grp;     /* the row's group under centering (hm_gemm_opts.center),
                      * set by the driver; the quantisers write 0 */
} hm_lowp_row;

/* Epilogue of a lowp block: C (=|+=) act(sum + bias). */
typedef struct {
    const float *bias;   /* NR floats for the panel (zero padded) or NULL */
    int accum;           /* C += result (else C is only written) */
    int gelu;            /* gelu after the bias, before the accumulate */
    const void *next;    /* the panel the next block will read, or NULL
                          * (hm_prefetch_part) */
    size_t next_bytes;
    const float *shared; /* centering (x86 int8): row i adds shared[(rows[i].grp
                          * - grp0) * NR + n] after the bias (its group's
                          * mean through W), or NULL */
    int grp0;
} hm_lowp_epi;

/* ---- int8 kernels (gemm_lowp_avx512vnni.c) ----
 * Quantise one row of K floats into Kp (multiple of 4) unsigned bytes,
 * per-token asymmetric, zero padded past K; fills *r and the outlier list
 * (oidx/oval, HM_LOWP_MAX_OUTLIERS entries of room). */
void hm_lowp_quant_row_avx512vnni(const float *x, int K, int Kp, uint8_t *q, hm_lowp_row *r,
                                  int32_t *oidx, float *oval);

/* C[m, nr] = epi( sw[n] * (r.scale * (sum_k q[i,k] W[n,k] - r.zero * cs[n])
 *                         + sum_j oval[i,j] W[n, oidx[i,j]]) )
 * P: one packed panel, Kp/4 groups of NR columns x 4 bytes (column j's four k
 * adjacent). cs, sw: NR column sums / scales. Rows i use rows[i] and the
 * outlier arrays at oidx + i * HM_LOWP_MAX_OUTLIERS. Any m >= 1, nr <= NR. */
void hm_lowp_i8_block_avx512vnni(int m, int nr, int Kp, const uint8_t *Aq, size_t lda,
                                 const hm_lowp_row *rows, const int32_t *oidx, const float *oval,
                                 const int8_t *P, const int32_t *cs, const float *sw,
                                 float *C, size_t ldc, const hm_lowp_epi *e);

/* The epilogue above on int32 sums already computed: sums is mr rows of NR
 * int32 (64-byte aligned), i.e. sum_k q[i,k] W[n,k] before the zero point.
 * Both int8 kernels end in this one function, so AMX and VNNI results are
 * bit-identical whenever their sums are. */
void hm_lowp_i8_epi_avx512vnni(int mr, int nr, const int32_t *sums, const hm_lowp_row *rows,
                               const int32_t *oidx, const float *oval, const int8_t *P, const int32_t *cs,
                               const float *sw, float *C, size_t ldc, const hm_lowp_epi *e);

/* ---- int8 AMX kernel (gemm_lowp_amx.c) ----
 * The VNNI panel is already the AMX B-tile layout: a 16 x 64-byte tile of
 * 16 columns and 64 k is 16 consecutive k groups at a 256-byte stride, so
 * both kernels read the same packing. hm_lowp_amx_built: whether this build
 * has the kernel (compiler support); callers must also check
 * hm_amx_active() (core/cpu.h) before calling anything below. */
int hm_lowp_amx_built(void);
/* Same contract and results as hm_lowp_i8_block_avx512vnni. Configures the
 * calling thread's tiles and releases them before returning. */
void hm_lowp_i8_block_amx(int m, int nr, int Kp, const uint8_t *Aq, size_t lda, const hm_lowp_row *rows,
                          const int32_t *oidx, const float *oval, const int8_t *P, const int32_t *cs,
                          const float *sw, float *C, size_t ldc, const hm_lowp_epi *e);
/* bf16 on tiles (tdpbf16ps; AMX-BF16): same contract as
 * hm_lowp_bf16_block_avx512vnni and the same packing (a 16-column B tile is
 * 16 k pairs at a 128-byte stride), fp32 sums in another order, so the
 * results agree to float rounding, not bit for bit. hm_lowp_amx_bf16_built:
 * whether this build has it. */
int hm_lowp_amx_bf16_built(void);
void hm_lowp_bf16_block_amx(int m, int nr, int Kp, const uint16_t *A, size_t lda, const uint16_t *P, float *C,
                            size_t ldc, const hm_lowp_epi *e);
/* Tests: the raw sums S[i, n] = sum_k Aq[i,k] W[n,k] of m <= 32 rows against
 * one panel (S: m rows of NR int32, 64-byte aligned), as the block uses them. */
void hm_lowp_i8_sums_amx(int m, int Kp, const uint8_t *Aq, size_t lda, const int8_t *P, int32_t *S);

/* ---- bf16 kernels ----
 * Round one row of K floats to bf16 (nearest even), zero padded to Kp
 * (even). */
void hm_lowp_bf16_row_avx512vnni(const float *x, int K, int Kp, uint16_t *out);
/* C[m, nr] = epi(A . W^T + bias); P: Kp/2 groups of NR columns x 2 bf16. */
void hm_lowp_bf16_block_avx512vnni(int m, int nr, int Kp, const uint16_t *A, size_t lda,
                                   const uint16_t *P, float *C, size_t ldc, const hm_lowp_epi *e);

/* ---- AArch64 kernels (arm/) ----
 * The quantiser (gemm_lowp_neon.c): hm_lowp_quant_row's row record and
 * choices (the same scale, zero point and outliers as x86's, from the same
 * float operations), bytes stored as signed q - 128 (SDOT and SMMLA
 * multiply signed by signed) in the pair layout: q points at the row's
 * first 8-byte group, group g at q + 16 g; Kp a multiple of 8. */
void hm_lowp_quant_row_neon(const float *x, int K, int Kp, uint8_t *q, hm_lowp_row *r, int32_t *oidx, float *oval);
/* The int8 epilogue of both AArch64 int8 kernels (gemm_lowp_neon.c), x86's
 * float operations in x86's order: sums is mr rows of 8 int32, the sums of
 * (q - 128) W before the zero point. */
void hm_lowp_i8_epi_neon(int mr, int nr, const int32_t *sums, const hm_lowp_row *rows, const int32_t *oidx,
                         const float *oval, const int8_t *P, const int32_t *cs, const float *sw, float *C, size_t ldc,
                         const hm_lowp_epi *e);
/* int8 blocks (the contract of hm_lowp_i8_block_avx512vnni on the AArch64
 * layouts; lda: bytes per quantised row, a row pair 2 lda apart; the block
 * starts at an even row): SDOT (gemm_lowp_dotprod.c, needs HM_CPU_DOTPROD)
 * and SMMLA (gemm_lowp_i8mm.c, needs HM_CPU_I8MM). Same int32 sums, so
 * the same results. */
void hm_lowp_i8_block_dotprod(int m, int nr, int Kp, const uint8_t *Aq, size_t lda, const hm_lowp_row *rows,
                              const int32_t *oidx, const float *oval, const int8_t *P, const int32_t *cs,
                              const float *sw, float *C, size_t ldc, const hm_lowp_epi *e);
void hm_lowp_i8_block_i8mm(int m, int nr, int Kp, const uint8_t *Aq, size_t lda, const hm_lowp_row *rows,
                           const int32_t *oidx, const float *oval, const int8_t *P, const int32_t *cs,
                           const float *sw, float *C, size_t ldc, const hm_lowp_epi *e);
/* bf16 (gemm_lowp_bf16.c, needs HM_CPU_ARM_BF16): one row rounded to bf16
 * (nearest even, BFCVTN) into the pair layout (out at the row's first
 * 4-value group, group g at out + 8 g; Kp a multiple of 4), and the BFMMLA
 * block (lda in bf16 values, a row pair 2 lda apart). */
void hm_lowp_bf16_row_neon(const float *x, int K, int Kp, uint16_t *out);
void hm_lowp_bf16_block_bfmmla(int m, int nr, int Kp, const uint16_t *A, size_t lda, const uint16_t *P, float *C,
                               size_t ldc, const hm_lowp_epi *e);

/* ---- driver (gemm_lowp.c) ---- */

/* Pack W as low-precision variant `kind` (arguments checked by gemm.c, p
 * zeroed); HM_E_UNSUPPORTED where this CPU or the active ISA cannot run it. */
int hm_pack_lowp(hm_packed *p, const float *W, int ldw, const float *bias, int N, int K, int kind);
/* What hm_pack_weights_fast_sensitive packs: on x86 HM_LOWP_INT8F where the
 * model's variant is int8, HM_LOWP_BF16 where it is bf16; on AArch64 its
 * bf16 with the BF16 extension, else HM_LOWP_FP32 (exact); a negative code
 * (message recorded) exactly where plain FAST would be refused.
 * What hm_pack_weights_fast_bf16 packs: this build's bf16 where the CPU
 * has it, else HM_LOWP_FP32; refused likewise. */
#define HM_LOWP_FP32 (-100)
int hm_lowp_sensitive_kind(void);
int hm_lowp_bf16_kind(void);

/* hm_gemm_ex for W->prec == HM_PREC_FAST (hm_gemm and hm_gemm_ex forward
 * here after their argument checks; o is never NULL), and the pool scratch
 * it needs for M rows (any options). */
int hm_gemm_lowp(hm_pool *pool, int M, const float *A, int lda, const hm_packed *W, float *C, int ldc,
                 const hm_gemm_opts *o);
size_t hm_lowp_scratch_bytes(const hm_packed *W, int M);

/* Variant that hm_pack_weights_prec(FAST) packs: the environment variable
 * HAMER_LOWP=int8|bf16 (read once) or hm_lowp_force_kind; default int8.
 * HM_LOWP_INT8 / HM_LOWP_BF16 mean this build's architecture's int8 / bf16
 * (hm_lowp_kind_active returns the layout, e.g. HM_LOWP_INT8_NEON on
 * AArch64); HM_E_ARG for an unknown kind or another architecture's.
 * Packings keep their own kind. */
int hm_lowp_force_kind(hm_lowp_kind kind);
hm_lowp_kind hm_lowp_kind_active(void);

/* Packings stored in a packed model file (model_pack.c).
 * hm_lowp_sizes: bytes of the lp block, lp_scale and padded bias of an
 * N x K packing of `kind` (HM_E_ARG for a bad kind or size).
 * hm_lowp_packed_kind: the variant of a FAST packing, from its block
 * header (-1 if p is not FAST).
 * hm_lowp_packed_check: p (N, K and an lp block of hm_lowp_sizes bytes
 * read from outside) carries exactly the header packing N x K as `kind`
 * writes (HM_E_FORMAT if not), and this build, CPU and active ISA can run
 * that variant (HM_E_UNSUPPORTED if not: another architecture's layout,
 * a missing CPU feature). */
int hm_lowp_sizes(int kind, int N, int K, size_t *lp, size_t *scale, size_t *bias);
int hm_lowp_packed_kind(const hm_packed *p);
int hm_lowp_packed_check(const hm_packed *p, int kind);

#endif
