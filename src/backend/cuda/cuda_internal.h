/* cuda_internal.h - what the CUDA plugin's C files share: the host's
 * services, error helpers, the model on a device and the state. */
#ifndef HM_BACKEND_CUDA_INTERNAL_H
#define HM_BACKEND_CUDA_INTERNAL_H

#include <cublasLt.h>
#include <cublas_v2.h>
#include <cuda_runtime.h>

#include "backend/cuda/cuda.h"
#include "backend/plugin.h"

extern const hm_host *hm_cu_host;

/* Record an error through the host (hm_err's contract): returns code. */
int hm_cu_err(int code, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* A CUDA runtime / cuBLAS status as a library error naming what failed. */
int hm_cu_check(cudaError_t e, const char *what);
int hm_cu_check_blas(cublasStatus_t s, const char *what);
/* A kernel launcher's result (cuda.h) as a library error. */
int hm_cu_check_launch(int rc);

/* ---- the model on a device ---------------------------------------------- */

typedef struct {
    const float *n1w, *n1b, *n2w, *n2b;     /* [dim] */
    const void *qkv, *proj, *fc1, *fc2;     /* weights [N, K], bf16 when wide (fast) */
    const float *qkv_b, *proj_b, *fc1_b, *fc2_b;
} hm_cu_block;

typedef struct {
    const float *sa_nw, *sa_nb, *ca_nw, *ca_nb, *ff_nw, *ff_nb;  /* [hdim] */
    const float *sa_v, *sa_out, *sa_out_b, *ca_q, *ca_out, *ca_out_b, *ff1, *ff1_b, *ff2, *ff2_b;
} hm_cu_layer;

typedef struct hm_cu_model {
    int cfg[12];                 /* hm_config's ints */
    int prec, dev;
    int wide_bf16;               /* the blocks' matmuls and kv_all stored as bf16 */
    void *block;                 /* one device allocation for every array */
    size_t block_bytes;
    const float *patch, *patch_b, *patch_u8, *pos, *tokb;  /* [dim, 768], [dim], .., [ntok, dim] x2 */
    hm_cu_block *blocks;         /* host array [depth] of device pointers */
    const float *ln_w, *ln_b;
    const float *x1, *q1;        /* [hdim], [inner] */
    const void *kv_all;          /* [hdepth*2*inner, dim] */
    hm_cu_layer *layers;         /* host array [hdepth] */
    const float *dec[3], *dec_b[3];  /* decpose [96, hdim], decshape [10, hdim], deccam [3, hdim] */
    const float *init;           /* [109] init_pose, init_betas, init_cam */
} hm_cu_model;

/* cuda_model.c */
int hm_cu_pack(const hm_weights *w, int prec, int dev, void **bm);
void hm_cu_model_free(void *bm);

/* cuda_forward.c */
int hm_cu_state_new(const void *bm, const hm_config *c, int prec, int dev, int max_batch, int nthreads,
                    hm_run_ctl *ctl, void **bs);
void hm_cu_state_free(void *bs);
int hm_cu_forward(void *bs, const void *crops, int is_u8, int B, float *params);

#endif
