/* cuda.h - the CUDA backend's shared declarations: the packed model on a
 * device, the per-request state, and the kernels' launchers
 * (cuda_kernels.cu), which the C host code (cuda_plugin.c, cuda_model.c,
 * cuda_forward.c) calls on the state's stream.
 *
 * Built into libhamer-cuda.so only (CMake's HAMER_CUDA); the library loads
 * it on first use (backend/backend_dl.c). It links the CUDA runtime
 * statically and cuBLAS / cuBLASLt dynamically, never libhamer: what it
 * needs of the library comes through hm_host (backend/plugin.h).
 *
 * Layouts on the device are PyTorch's: a Linear's weight is W [N, K]
 * row-major, activations are row-major [rows, features]. Precision fp32
 * keeps every matmul in fp32 with cuBLAS's pedantic math (no TF32); fast
 * stores the backbone blocks' four matmuls and the head's K/V projection
 * in bf16 and feeds them bf16 activations, fp32 accumulation, as the CPU's
 * sensitive-matmul scheme does everywhere (gemm_lowp.c: ~0.2 % relative RMS
 * per matmul); everything else stays fp32.
 */
#ifndef HM_BACKEND_CUDA_H
#define HM_BACKEND_CUDA_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* ---- weights on the device ---------------------------------------------- */

/* One array of the model's device block: where it goes and what it holds. */
typedef struct {
    const char *name;            /* static string */
    size_t offset, bytes;        /* 256-byte aligned offset into the block */
    int bf16;                    /* stored as bf16 (else fp32) */
} hm_cu_slot;

/* The block's layout for config c (hm_config's 12 ints: depth, dim, heads,
 * mlp, gh, gw, ntok, hdepth, hdim, hheads, hinner, hmlp) in precision
 * prec (0 fp32, 1 fast): every array in a fixed order, its size from the
 * config. Fills up to max slots; returns the count needed (call with
 * max 0 to size), *total the block's bytes. Host code only (tested without
 * a GPU: tests/c/test_cuda_host.c). */
int hm_cu_layout(const int cfg[12], int prec, hm_cu_slot *slots, int max, size_t *total);

/* ---- kernels (cuda_kernels.cu), all asynchronous on `stream` ------------ */

/* im2col of B crops into cols [B*ntok, 768] ((c, kh, kw) order, zero
 * outside the crop): float crops [B,3,256,192] normalised, or uint8
 * [B,256,192,3] RGB read as their values 0..255. */
int hm_cu_im2col(const void *crops, int is_u8, float *cols, int B, int gh, int gw, void *stream);
/* dst rows [b*rows + r] = src rows [r] for b < B (rows x cols floats). */
int hm_cu_tile_rows(float *dst, const float *src, int rows, int cols, int B, void *stream);
/* LayerNorm of n rows of d (statistics in double, as the CPU's); y may be
 * x; yb (bf16 copy of y) may be NULL. */
int hm_cu_layernorm(const float *x, float *y, uint16_t *yb, int n, int d, const float *w, const float *b, float eps,
                    void *stream);
/* x = gelu_erf(x) over n floats; xb (bf16 copy) may be NULL. rows x cols
 * with row stride ld. */
int hm_cu_gelu(float *x, uint16_t *xb, int rows, int cols, int ld, void *stream);
/* In-place softmax of n rows of m floats; pb (bf16 copy) may be NULL. */
int hm_cu_softmax(float *p, uint16_t *pb, int n, int m, void *stream);
/* dst (bf16) = src (fp32), rows x cols, row strides lds / ldd. */
int hm_cu_to_bf16(const float *src, int lds, uint16_t *dst, int ldd, int rows, int cols, void *stream);
/* The head's cross-attention of B single-token queries q [B, inner] to
 * the ntok context rows: K at kv[(b*ntok + t)*ldkv + head*64], V inner
 * floats further, heads of 64; scale 1/8. out [B, inner]. */
int hm_cu_cross_attention(const float *q, const float *kv, int ldkv, float *out, int B, int ntok, int heads,
                          int inner, void *stream);
/* raw [B, 109] += init [109]. */
int hm_cu_add_rows(float *raw, const float *init, int B, int n, void *stream);
/* Text of the last launch's error (cudaGetLastError), "" when none. */
const char *hm_cu_last_launch_error(void);

#ifdef __cplusplus
}
#endif

#endif
