/* cuda_testops.c - the CUDA backend's ops one at a time on host arrays, for
 * the op test (tests/c/test_cuda.c): each uploads its inputs, runs the
 * kernel or matmul the forward runs, and downloads the result. Exported
 * from libhamer-cuda.so under hm_cu_test_* (dlsym); not used by the
 * forward. HM_OK or a code with the message recorded. */
#include <stdlib.h>
#include <string.h>

#include "backend/cuda/cuda_internal.h"

#define EXPORT __attribute__((visibility("default")))

/* Device copies of up to 4 host arrays (bytes[i] each; NULL src: zeros). */
typedef struct {
    void *d[4];
} devs;

static int up(devs *D, int i, const void *src, size_t bytes) {
    int rc = hm_cu_check(cudaMalloc(&D->d[i], bytes ? bytes : 1), "cudaMalloc (test)");
    if (rc) return rc;
    return src ? hm_cu_check(cudaMemcpy(D->d[i], src, bytes, cudaMemcpyHostToDevice), "upload (test)")
               : hm_cu_check(cudaMemset(D->d[i], 0, bytes), "memset (test)");
}

static int down(void *dst, const void *src, size_t bytes, int rc) {
    if (rc) return rc;
    rc = hm_cu_check(cudaDeviceSynchronize(), "test op");
    return rc ? rc : hm_cu_check(cudaMemcpy(dst, src, bytes, cudaMemcpyDeviceToHost), "download (test)");
}

static void release(devs *D) {
    for (int i = 0; i < 4; i++)
        if (D->d[i]) cudaFree(D->d[i]);
}

EXPORT int hm_cu_test_layernorm(const float *x, float *y, int n, int d, const float *w, const float *b, float eps) {
    devs D = {{0}};
    size_t bytes = (size_t)n * d * sizeof(float);
    int rc = up(&D, 0, x, bytes);
    if (!rc) rc = up(&D, 1, w, d * sizeof(float));
    if (!rc) rc = up(&D, 2, b, d * sizeof(float));
    if (!rc) rc = hm_cu_check_launch(hm_cu_layernorm(D.d[0], D.d[0], NULL, n, d, D.d[1], D.d[2], eps, NULL));
    rc = down(y, D.d[0], bytes, rc);
    release(&D);
    return rc;
}

EXPORT int hm_cu_test_softmax(float *p, int n, int m) {
    devs D = {{0}};
    size_t bytes = (size_t)n * m * sizeof(float);
    int rc = up(&D, 0, p, bytes);
    if (!rc) rc = hm_cu_check_launch(hm_cu_softmax(D.d[0], NULL, n, m, NULL));
    rc = down(p, D.d[0], bytes, rc);
    release(&D);
    return rc;
}

EXPORT int hm_cu_test_gelu(float *x, int n) {
    devs D = {{0}};
    int rc = up(&D, 0, x, (size_t)n * sizeof(float));
    if (!rc) rc = hm_cu_check_launch(hm_cu_gelu(D.d[0], NULL, 1, n, n, NULL));
    rc = down(x, D.d[0], (size_t)n * sizeof(float), rc);
    release(&D);
    return rc;
}

/* B uint8 or float crops -> cols [B*ntok, 768]. */
EXPORT int hm_cu_test_im2col(const void *crops, int is_u8, float *cols, int B, int gh, int gw) {
    devs D = {{0}};
    size_t in = (size_t)B * HAMER_CROP_H * HAMER_CROP_W * 3 * (is_u8 ? 1 : sizeof(float));
    size_t out = (size_t)B * gh * gw * 768 * sizeof(float);
    int rc = up(&D, 0, crops, in);
    if (!rc) rc = up(&D, 1, NULL, out);
    if (!rc) rc = hm_cu_check_launch(hm_cu_im2col(D.d[0], is_u8, D.d[1], B, gh, gw, NULL));
    rc = down(cols, D.d[1], out, rc);
    release(&D);
    return rc;
}

EXPORT int hm_cu_test_cross_attention(const float *q, const float *kv, int ldkv, float *out, int B, int ntok, int heads,
                                      int inner) {
    devs D = {{0}};
    int rc = up(&D, 0, q, (size_t)B * inner * sizeof(float));
    if (!rc) rc = up(&D, 1, kv, (size_t)B * ntok * ldkv * sizeof(float));
    if (!rc) rc = up(&D, 2, NULL, (size_t)B * inner * sizeof(float));
    if (!rc) rc = hm_cu_check_launch(hm_cu_cross_attention(D.d[0], D.d[1], ldkv, D.d[2], B, ntok, heads, inner, NULL));
    rc = down(out, D.d[2], (size_t)B * inner * sizeof(float), rc);
    release(&D);
    return rc;
}
