// cuda_kernels.cu - the CUDA backend's own kernels (cuda.h): everything of
// the forward that is not a matmul. Plain, one thread per output element
// or one block / warp per row: the matmuls (cuBLASLt) are the time.
//
// Arithmetic follows the CPU's exact path where it matters for parity:
// LayerNorm statistics in double, then y = (x - mean) * inv * w + b in
// float; GELU with the exact erf; softmax max-subtracted in float.
#include <cuda_bf16.h>
#include <cuda_runtime.h>
#include <math.h>
#include <stdio.h>

#include "backend/cuda/cuda.h"

#define PATCH 16
#define PAD 2
#define CROP_H 256
#define CROP_W 192
#define KPATCH (3 * PATCH * PATCH)

static __thread char last_error[256];

// 0, or -1 with the launch's error in last_error.
static int launched(const char *what) {
    cudaError_t e = cudaGetLastError();
    if (e == cudaSuccess) return 0;
    snprintf(last_error, sizeof last_error, "%s: %s", what, cudaGetErrorString(e));
    return -1;
}

extern "C" const char *hm_cu_last_launch_error(void) { return last_error; }

static unsigned blocks_for(size_t n, unsigned per) { return (unsigned)((n + per - 1) / per); }

__device__ static inline unsigned short to_bf16(float v) {
    __nv_bfloat16 b = __float2bfloat16_rn(v);  // round to nearest even, as the CPU's packing
    return *reinterpret_cast<unsigned short *>(&b);
}

// ---- patch embedding ----------------------------------------------------

__global__ void im2col_kernel(const void *crops, int is_u8, float *cols, size_t total, int ntok, int gw) {
    size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= total) return;
    int k = (int)(i % KPATCH);
    size_t row = i / KPATCH;
    int t = (int)(row % ntok), b = (int)(row / ntok);
    int c = k / (PATCH * PATCH), kh = (k / PATCH) % PATCH, kw = k % PATCH;
    int y = (t / gw) * PATCH - PAD + kh, x = (t % gw) * PATCH - PAD + kw;
    float v = 0.0f;
    if (y >= 0 && y < CROP_H && x >= 0 && x < CROP_W) {
        if (is_u8)
            v = (float)((const unsigned char *)crops)[(((size_t)b * CROP_H + y) * CROP_W + x) * 3 + c];
        else
            v = ((const float *)crops)[(((size_t)b * 3 + c) * CROP_H + y) * CROP_W + x];
    }
    cols[i] = v;
}

extern "C" int hm_cu_im2col(const void *crops, int is_u8, float *cols, int B, int gh, int gw, void *stream) {
    size_t total = (size_t)B * gh * gw * KPATCH;
    im2col_kernel<<<blocks_for(total, 256), 256, 0, (cudaStream_t)stream>>>(crops, is_u8, cols, total, gh * gw, gw);
    return launched("im2col");
}

__global__ void tile_kernel(float *dst, const float *src, size_t per, size_t total) {
    size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < total) dst[i] = src[i % per];
}

extern "C" int hm_cu_tile_rows(float *dst, const float *src, int rows, int cols, int B, void *stream) {
    size_t per = (size_t)rows * cols, total = per * B;
    tile_kernel<<<blocks_for(total, 256), 256, 0, (cudaStream_t)stream>>>(dst, src, per, total);
    return launched("tile rows");
}

// ---- LayerNorm: one block of 256 per row ----------------------------------

__device__ static double block_sum(double v, double *sh) {
    for (int o = 16; o > 0; o >>= 1) v += __shfl_down_sync(0xffffffffu, v, o);
    int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    if (lane == 0) sh[warp] = v;
    __syncthreads();
    double s = 0;
    if (threadIdx.x == 0) {
        for (int w = 0; w < (int)(blockDim.x >> 5); w++) s += sh[w];
        sh[32] = s;
    }
    __syncthreads();
    s = sh[32];
    __syncthreads();
    return s;
}

__global__ void layernorm_kernel(const float *x, float *y, unsigned short *yb, int d, const float *w, const float *b,
                                 float eps) {
    __shared__ double sh[33];
    const float *xr = x + (size_t)blockIdx.x * d;
    double s = 0;
    for (int i = threadIdx.x; i < d; i += blockDim.x) s += xr[i];
    double mean = block_sum(s, sh) / d;
    double ss = 0;
    for (int i = threadIdx.x; i < d; i += blockDim.x) {
        double t = xr[i] - mean;
        ss += t * t;
    }
    ss = block_sum(ss, sh);
    float inv = (float)(1.0 / sqrt(ss / d + eps)), mf = (float)mean;
    float *yr = y + (size_t)blockIdx.x * d;
    unsigned short *ybr = yb ? yb + (size_t)blockIdx.x * d : NULL;
    for (int i = threadIdx.x; i < d; i += blockDim.x) {
        float v = (xr[i] - mf) * inv * w[i] + b[i];
        yr[i] = v;
        if (ybr) ybr[i] = to_bf16(v);
    }
}

extern "C" int hm_cu_layernorm(const float *x, float *y, uint16_t *yb, int n, int d, const float *w, const float *b,
                               float eps, void *stream) {
    if (n < 1) return 0;
    layernorm_kernel<<<n, 256, 0, (cudaStream_t)stream>>>(x, y, yb, d, w, b, eps);
    return launched("layernorm");
}

// ---- elementwise --------------------------------------------------------------

__global__ void gelu_kernel(float *x, unsigned short *xb, int cols, int ld, size_t total) {
    size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= total) return;
    size_t at = i / cols * ld + i % cols;
    float v = x[at];
    v = 0.5f * v * (1.0f + erff(v * 0.70710678f));
    x[at] = v;
    if (xb) xb[at] = to_bf16(v);
}

extern "C" int hm_cu_gelu(float *x, uint16_t *xb, int rows, int cols, int ld, void *stream) {
    size_t total = (size_t)rows * cols;
    gelu_kernel<<<blocks_for(total, 256), 256, 0, (cudaStream_t)stream>>>(x, xb, cols, ld, total);
    return launched("gelu");
}

__global__ void bf16_kernel(const float *src, int lds, unsigned short *dst, int ldd, int cols, size_t total) {
    size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= total) return;
    size_t r = i / cols, c = i % cols;
    dst[r * ldd + c] = to_bf16(src[r * lds + c]);
}

extern "C" int hm_cu_to_bf16(const float *src, int lds, uint16_t *dst, int ldd, int rows, int cols, void *stream) {
    size_t total = (size_t)rows * cols;
    bf16_kernel<<<blocks_for(total, 256), 256, 0, (cudaStream_t)stream>>>(src, lds, dst, ldd, cols, total);
    return launched("to bf16");
}

__global__ void add_rows_kernel(float *raw, const float *init, int n, size_t total) {
    size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < total) raw[i] += init[i % n];
}

extern "C" int hm_cu_add_rows(float *raw, const float *init, int B, int n, void *stream) {
    size_t total = (size_t)B * n;
    add_rows_kernel<<<blocks_for(total, 128), 128, 0, (cudaStream_t)stream>>>(raw, init, n, total);
    return launched("add rows");
}

// ---- softmax: one warp per row ----------------------------------------------

__global__ void softmax_kernel(float *p, unsigned short *pb, int n, int m) {
    int row = blockIdx.x * (blockDim.x >> 5) + (threadIdx.x >> 5), lane = threadIdx.x & 31;
    if (row >= n) return;
    float *r = p + (size_t)row * m;
    float mx = -INFINITY;
    for (int j = lane; j < m; j += 32) mx = fmaxf(mx, r[j]);
    for (int o = 16; o > 0; o >>= 1) mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, o));
    float s = 0.0f;
    for (int j = lane; j < m; j += 32) {
        float e = expf(r[j] - mx);
        r[j] = e;
        s += e;
    }
    for (int o = 16; o > 0; o >>= 1) s += __shfl_xor_sync(0xffffffffu, s, o);
    float inv = 1.0f / s;
    unsigned short *rb = pb ? pb + (size_t)row * m : NULL;
    for (int j = lane; j < m; j += 32) {
        float v = r[j] * inv;
        r[j] = v;
        if (rb) rb[j] = to_bf16(v);
    }
}

extern "C" int hm_cu_softmax(float *p, uint16_t *pb, int n, int m, void *stream) {
    const int warps = 8;
    softmax_kernel<<<blocks_for((size_t)n, warps), warps * 32, 0, (cudaStream_t)stream>>>(p, pb, n, m);
    return launched("softmax");
}

// ---- the head's cross-attention: one block per (crop, head) ------------------

#define HEAD_DIM 64
#define MAX_TOK 1024

__global__ void cross_attention_kernel(const float *q, const float *kv, int ldkv, float *out, int ntok, int inner) {
    __shared__ float qs[HEAD_DIM];
    __shared__ float p[MAX_TOK];
    __shared__ float red[33];
    const int b = blockIdx.x, h = blockIdx.y;
    if (threadIdx.x < HEAD_DIM) qs[threadIdx.x] = q[(size_t)b * inner + h * HEAD_DIM + threadIdx.x];
    __syncthreads();
    const float scale = 0.125f;  // 64^-0.5
    float mx = -INFINITY;
    for (int t = threadIdx.x; t < ntok; t += blockDim.x) {
        const float *k = kv + ((size_t)b * ntok + t) * ldkv + h * HEAD_DIM;
        float s = 0.0f;
        for (int d = 0; d < HEAD_DIM; d++) s += qs[d] * k[d];
        s *= scale;
        p[t] = s;
        mx = fmaxf(mx, s);
    }
    for (int o = 16; o > 0; o >>= 1) mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, o));
    if ((threadIdx.x & 31) == 0) red[threadIdx.x >> 5] = mx;
    __syncthreads();
    if (threadIdx.x == 0) {
        float m = red[0];
        for (int w = 1; w < (int)(blockDim.x >> 5); w++) m = fmaxf(m, red[w]);
        red[32] = m;
    }
    __syncthreads();
    mx = red[32];
    __syncthreads();
    float s = 0.0f;
    for (int t = threadIdx.x; t < ntok; t += blockDim.x) {
        float e = expf(p[t] - mx);
        p[t] = e;
        s += e;
    }
    for (int o = 16; o > 0; o >>= 1) s += __shfl_xor_sync(0xffffffffu, s, o);
    if ((threadIdx.x & 31) == 0) red[threadIdx.x >> 5] = s;
    __syncthreads();
    if (threadIdx.x == 0) {
        float t = 0;
        for (int w = 0; w < (int)(blockDim.x >> 5); w++) t += red[w];
        red[32] = t;
    }
    __syncthreads();
    const float inv = 1.0f / red[32];
    if (threadIdx.x < HEAD_DIM) {
        float o = 0.0f;
        for (int t = 0; t < ntok; t++) o += p[t] * kv[((size_t)b * ntok + t) * ldkv + inner + h * HEAD_DIM + threadIdx.x];
        out[(size_t)b * inner + h * HEAD_DIM + threadIdx.x] = o * inv;
    }
}

extern "C" int hm_cu_cross_attention(const float *q, const float *kv, int ldkv, float *out, int B, int ntok, int heads,
                                     int inner, void *stream) {
    if (ntok > MAX_TOK || heads * HEAD_DIM != inner) {
        snprintf(last_error, sizeof last_error, "cross attention: %d tokens / %d heads of %d unsupported", ntok,
                 heads, inner / (heads ? heads : 1));
        return -1;
    }
    cross_attention_kernel<<<dim3(B, heads), 256, 0, (cudaStream_t)stream>>>(q, kv, ldkv, out, ntok, inner);
    return launched("cross attention");
}
