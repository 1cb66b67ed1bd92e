/* cuda_plugin.c - the CUDA backend's entry (backend/plugin.h): the host's
 * services, errors, which devices there are, what each precision is here,
 * and the weights' layout on a device (hm_cu_layout).
 */
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "backend/cuda/cuda_internal.h"

const hm_host *hm_cu_host;

int hm_cu_err(int code, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    int rc = hm_cu_host->verr(code, fmt, ap);
    va_end(ap);
    return rc;
}

int hm_cu_check(cudaError_t e, const char *what) {
    if (e == cudaSuccess) return HM_OK;
    int code = e == cudaErrorMemoryAllocation ? HM_E_NOMEM : HM_E_UNSUPPORTED;
    return hm_cu_err(code, "cuda: %s: %s (%s)", what, cudaGetErrorString(e), cudaGetErrorName(e));
}

int hm_cu_check_blas(cublasStatus_t s, const char *what) {
    if (s == CUBLAS_STATUS_SUCCESS) return HM_OK;
    int code = s == CUBLAS_STATUS_ALLOC_FAILED ? HM_E_NOMEM : HM_E_UNSUPPORTED;
    return hm_cu_err(code, "cuda: %s: %s", what, cublasGetStatusString(s));
}

int hm_cu_check_launch(int rc) {
    return rc ? hm_cu_err(HM_E_UNSUPPORTED, "cuda: kernel %s", hm_cu_last_launch_error()) : HM_OK;
}

/* ---- devices -------------------------------------------------------------- */

static int cu_devices(void) {
    int n = 0;
    cudaError_t e = cudaGetDeviceCount(&n);
    if (e != cudaSuccess)
        return hm_cu_err(HM_E_UNSUPPORTED, "no usable CUDA driver or GPU: %s (%s)", cudaGetErrorString(e),
                         cudaGetErrorName(e));
    return n;
}

/* sm_80 and later: bf16 tensor cores, the oldest target the plugin is
 * built for (CMake's CUDA_ARCHITECTURES). */
static int cu_check(int dev, int prec) {
    int n = cu_devices();
    if (n < 0) return n;
    if (dev < 0 || dev >= n) return hm_cu_err(HM_E_UNSUPPORTED, "cuda device %d does not exist (%d here)", dev, n);
    struct cudaDeviceProp p;
    int rc = hm_cu_check(cudaGetDeviceProperties(&p, dev), "cudaGetDeviceProperties");
    if (rc) return rc;
    if (p.major < 8)
        return hm_cu_err(HM_E_UNSUPPORTED, "cuda device %d (%s) is sm_%d%d; the CUDA backend is built for sm_80 and later",
                         dev, p.name, p.major, p.minor);
    if (prec != HM_PREC_FP32 && prec != HM_PREC_FAST) return hm_cu_err(HM_E_ARG, "unknown precision %d", prec);
    return HM_OK;
}

static const char *cu_scheme(int prec) {
    return prec == HM_PREC_FAST ? "bf16 (w, a: bf16; fp32 accumulate; cuBLASLt) for the blocks' matmuls and the head's K/V"
                                : "fp32 (cuBLAS pedantic math: no TF32)";
}

static char line[256];
static pthread_once_t line_once = PTHREAD_ONCE_INIT;

static void line_init(void) {
    int n = 0, rt = 0, drv = 0;
    cudaRuntimeGetVersion(&rt);
    cudaDriverGetVersion(&drv);
    if (cudaGetDeviceCount(&n) != cudaSuccess) n = 0;
    size_t used = (size_t)snprintf(line, sizeof line, "cuda runtime %d.%d, driver %d.%d", rt / 1000, rt % 1000 / 10,
                                   drv / 1000, drv % 1000 / 10);
    for (int i = 0; i < n && used < sizeof line; i++) {
        struct cudaDeviceProp p;
        if (cudaGetDeviceProperties(&p, i) == cudaSuccess)
            used += (size_t)snprintf(line + used, sizeof line - used, "; cuda:%d %s (sm_%d%d, %.0f GiB)", i, p.name,
                                     p.major, p.minor, p.totalGlobalMem / 1073741824.0);
    }
}

static const char *cu_describe(void) {
    pthread_once(&line_once, line_init);
    return line;
}

static const hm_backend cuda_backend = {
    .name = "cuda",
    .devices = cu_devices,
    .check = cu_check,
    .scheme = cu_scheme,
    .describe = cu_describe,
    .pack = hm_cu_pack,
    .visit = NULL,
    .blank = NULL,
    .model_free = hm_cu_model_free,
    .state_new = hm_cu_state_new,
    .state_free = hm_cu_state_free,
    .forward = hm_cu_forward,
};

__attribute__((visibility("default"))) const hm_backend *hm_backend_plugin(const hm_host *host) {
    if (!host || !host->verr) return NULL;
    hm_cu_host = host;
    if (host->abi != HM_PLUGIN_ABI || host->backend_size != sizeof(hm_backend) ||
        host->weights_size != sizeof(hm_weights) || host->ctl_size != sizeof(hm_run_ctl) ||
        host->config_size != sizeof(hm_config)) {
        hm_cu_err(HM_E_UNSUPPORTED, "libhamer-cuda.so was built from another version of hamer.c (plugin ABI %d, library %d)",
                  HM_PLUGIN_ABI, host->abi);
        return NULL;
    }
    return &cuda_backend;
}

/* ---- the layout of the weights on a device -------------------------------- */

static size_t align256(size_t n) { return (n + 255) & ~(size_t)255; }

__attribute__((visibility("default"))) int hm_cu_layout(const int cfg[12], int prec, hm_cu_slot *slots, int max,
                                                      size_t *total) {
    const int depth = cfg[0], dim = cfg[1], mlp = cfg[3], ntok = cfg[6], hdepth = cfg[7], hdim = cfg[8];
    const int inner = cfg[10], hmlp = cfg[11], K0 = 768;
    const int wide = prec == HM_PREC_FAST;
    int n = 0;
    size_t off = 0;
#define SLOT(nm, count, bf)                                                                   \
    do {                                                                                      \
        size_t b_ = (size_t)(count) * ((bf) ? 2 : 4);                                         \
        if (n < max) slots[n] = (hm_cu_slot){nm, off, b_, (bf)};                              \
        n++;                                                                                  \
        off = align256(off + b_);                                                             \
    } while (0)
    SLOT("patch", (size_t)dim * K0, 0);
    SLOT("patch_b", dim, 0);
    SLOT("patch_u8", (size_t)dim * K0, 0);
    SLOT("pos", (size_t)ntok * dim, 0);
    SLOT("u8_tok_bias", (size_t)ntok * dim, 0);
    for (int l = 0; l < depth; l++) {
        SLOT("norm1_w", dim, 0);
        SLOT("norm1_b", dim, 0);
        SLOT("qkv", (size_t)3 * dim * dim, wide);
        SLOT("qkv_b", 3 * dim, 0);
        SLOT("proj", (size_t)dim * dim, wide);
        SLOT("proj_b", dim, 0);
        SLOT("norm2_w", dim, 0);
        SLOT("norm2_b", dim, 0);
        SLOT("fc1", (size_t)mlp * dim, wide);
        SLOT("fc1_b", mlp, 0);
        SLOT("fc2", (size_t)dim * mlp, wide);
        SLOT("fc2_b", dim, 0);
    }
    SLOT("last_norm_w", dim, 0);
    SLOT("last_norm_b", dim, 0);
    SLOT("x1", hdim, 0);
    SLOT("q1", inner, 0);
    SLOT("kv_all", (size_t)hdepth * 2 * inner * dim, wide);
    for (int l = 0; l < hdepth; l++) {
        SLOT("sa_norm_w", hdim, 0);
        SLOT("sa_norm_b", hdim, 0);
        SLOT("sa_v", (size_t)inner * hdim, 0);
        SLOT("sa_out", (size_t)hdim * inner, 0);
        SLOT("sa_out_b", hdim, 0);
        SLOT("ca_norm_w", hdim, 0);
        SLOT("ca_norm_b", hdim, 0);
        SLOT("ca_q", (size_t)inner * hdim, 0);
        SLOT("ca_out", (size_t)hdim * inner, 0);
        SLOT("ca_out_b", hdim, 0);
        SLOT("ff_norm_w", hdim, 0);
        SLOT("ff_norm_b", hdim, 0);
        SLOT("ff1", (size_t)hmlp * hdim, 0);
        SLOT("ff1_b", hmlp, 0);
        SLOT("ff2", (size_t)hdim * hmlp, 0);
        SLOT("ff2_b", hdim, 0);
    }
    SLOT("decpose", (size_t)HM_NJ * 6 * hdim, 0);
    SLOT("decpose_b", HM_NJ * 6, 0);
    SLOT("decshape", (size_t)HM_NB * hdim, 0);
    SLOT("decshape_b", HM_NB, 0);
    SLOT("deccam", (size_t)3 * hdim, 0);
    SLOT("deccam_b", 3, 0);
    SLOT("init", HM_NRAW, 0);
#undef SLOT
    *total = off;
    return n;
}
