/* cuda_forward.c - the whole forward on one device: the state's buffers
 * (allocated once), the matmuls through cuBLASLt with the bias and the
 * residual add in their epilogue, the attention as strided batched cuBLAS
 * matmuls around a softmax kernel, and the rest as the kernels of
 * cuda_kernels.cu, all on the state's stream; one synchronisation at the
 * end (and one per stage when profiling).
 *
 *   crops (pinned) -> device -> im2col -> patch matmul (+ pos or the u8
 *   token bias) -> 32 x [LN, qkv, attention, proj (+x), LN, fc1, GELU,
 *   fc2 (+x)] -> LN -> K/V of every decoder layer -> 6 x [LN, V, out (+x),
 *   LN, q, cross-attention, out (+x), LN, ff1, GELU, ff2 (+x)] -> readouts
 *   (+ init) -> host -> rot6d (the host's hm_raw_to_params)
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "backend/cuda/cuda_internal.h"

#define WORKSPACE_BYTES ((size_t)32 << 20)
#define MAX_PLANS 96

/* One cached cuBLASLt matmul: Y[M,N] (=|+=) X[M,K] . W[N,K]^T (+ bias). */
typedef struct {
    int M, N, K, ldx, ldy, wbf, xbf, bias, accum;
    cublasLtMatmulDesc_t desc;
    cublasLtMatrixLayout_t a, b, c;
    cublasLtMatmulAlgo_t algo;
} plan;

typedef struct {
    const hm_cu_model *m;
    hm_run_ctl *ctl;
    int max_batch, prec;
    cudaStream_t stream;
    cublasLtHandle_t lt;
    cublasHandle_t blas;
    void *ws;
    plan plans[MAX_PLANS];
    int nplans;
    /* device buffers (T = max_batch * ntok rows) */
    void *crops;
    float *cols, *x, *h, *qkv, *scores, *att, *mlp, *kv, *hx, *hh, *hq, *ha, *hf, *raw;
    uint16_t *hb, *qkvb, *scoresb, *attb, *mlpb, *xb;  /* bf16 copies (fast) */
    /* pinned host buffers */
    void *crops_host;
    float *raw_host;
} cu_state;

static int ok(cudaError_t e, const char *what) { return hm_cu_check(e, what); }
static int okb(cublasStatus_t s, const char *what) { return hm_cu_check_blas(s, what); }

/* ---- matmuls ---------------------------------------------------------------- */

static int plan_make(cu_state *s, plan *p) {
    const int fp32 = !p->wbf && !p->xbf && s->prec == HM_PREC_FP32;
    cublasComputeType_t ct = fp32 ? CUBLAS_COMPUTE_32F_PEDANTIC : CUBLAS_COMPUTE_32F;
    cublasOperation_t ta = CUBLAS_OP_T, tb = CUBLAS_OP_N;
    cublasLtEpilogue_t epi = p->bias ? CUBLASLT_EPILOGUE_BIAS : CUBLASLT_EPILOGUE_DEFAULT;
    int rc;
    if ((rc = okb(cublasLtMatmulDescCreate(&p->desc, ct, CUDA_R_32F), "cublasLtMatmulDescCreate")) ||
        (rc = okb(cublasLtMatmulDescSetAttribute(p->desc, CUBLASLT_MATMUL_DESC_TRANSA, &ta, sizeof ta), "transa")) ||
        (rc = okb(cublasLtMatmulDescSetAttribute(p->desc, CUBLASLT_MATMUL_DESC_TRANSB, &tb, sizeof tb), "transb")) ||
        (rc = okb(cublasLtMatmulDescSetAttribute(p->desc, CUBLASLT_MATMUL_DESC_EPILOGUE, &epi, sizeof epi), "epilogue")))
        return rc;
    /* column-major view: W [N,K] row-major is K x N (ld K), X is K x M (ld
     * ldx), Y is N x M (ld ldy); D = op(W)^T... i.e. Y^T = W . X^T */
    if ((rc = okb(cublasLtMatrixLayoutCreate(&p->a, p->wbf ? CUDA_R_16BF : CUDA_R_32F, p->K, p->N, p->K), "layout W")) ||
        (rc = okb(cublasLtMatrixLayoutCreate(&p->b, p->xbf ? CUDA_R_16BF : CUDA_R_32F, p->K, p->M, p->ldx), "layout X")) ||
        (rc = okb(cublasLtMatrixLayoutCreate(&p->c, CUDA_R_32F, p->N, p->M, p->ldy), "layout Y")))
        return rc;
    cublasLtMatmulPreference_t pref;
    uint64_t wsb = WORKSPACE_BYTES;
    if ((rc = okb(cublasLtMatmulPreferenceCreate(&pref), "cublasLtMatmulPreferenceCreate"))) return rc;
    rc = okb(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &wsb, sizeof wsb),
             "workspace preference");
    cublasLtMatmulHeuristicResult_t h;
    int found = 0;
    if (!rc)
        rc = okb(cublasLtMatmulAlgoGetHeuristic(s->lt, p->desc, p->a, p->b, p->c, p->c, pref, 1, &h, &found),
                 "cublasLtMatmulAlgoGetHeuristic");
    cublasLtMatmulPreferenceDestroy(pref);
    if (!rc && !found)
        rc = hm_cu_err(HM_E_UNSUPPORTED, "cuda: cuBLASLt has no algorithm for a %d x %d x %d matmul (%s)", p->M, p->N,
                       p->K, p->wbf ? "bf16" : "fp32");
    if (!rc) p->algo = h.algo;
    return rc;
}

static void plan_free(plan *p) {
    if (p->desc) cublasLtMatmulDescDestroy(p->desc);
    if (p->a) cublasLtMatrixLayoutDestroy(p->a);
    if (p->b) cublasLtMatrixLayoutDestroy(p->b);
    if (p->c) cublasLtMatrixLayoutDestroy(p->c);
}

/* Y[M, N] (ld ldy) (=|+=) X[M, K] (ld ldx) . W[N, K]^T (+ bias[N]); W and X
 * bf16 when wbf / xbf. Plans are made on first use of a shape and kept:
 * after a state's first forward of each batch size nothing is created. */
static int gemm(cu_state *s, int M, int N, int K, const void *X, int ldx, int xbf, const void *W, int wbf,
                const float *bias, float *Y, int ldy, int accum) {
    plan key = {.M = M, .N = N, .K = K, .ldx = ldx, .ldy = ldy, .wbf = wbf, .xbf = xbf, .bias = bias != NULL,
                .accum = accum};
    plan *p = NULL;
    for (int i = 0; i < s->nplans && !p; i++) {
        plan *q = &s->plans[i];
        if (q->M == M && q->N == N && q->K == K && q->ldx == ldx && q->ldy == ldy && q->wbf == wbf && q->xbf == xbf &&
            q->bias == key.bias && q->accum == accum)
            p = q;
    }
    if (!p) {
        if (s->nplans == MAX_PLANS) return hm_cu_err(HM_E_NOMEM, "cuda: more than %d matmul shapes", MAX_PLANS);
        p = &s->plans[s->nplans];
        *p = key;
        int rc = plan_make(s, p);
        if (rc) {
            plan_free(p);
            memset(p, 0, sizeof *p);
            return rc;
        }
        s->nplans++;
    }
    if (bias) {
        int rc = okb(cublasLtMatmulDescSetAttribute(p->desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias, sizeof bias),
                     "bias pointer");
        if (rc) return rc;
    }
    const float one = 1.0f, beta = accum ? 1.0f : 0.0f;
    return okb(cublasLtMatmul(s->lt, p->desc, &one, W, p->a, X, p->b, &beta, Y, p->c, Y, p->c, &p->algo, s->ws,
                              WORKSPACE_BYTES, s->stream),
               "cublasLtMatmul");
}

/* ---- state -------------------------------------------------------------------- */

void hm_cu_state_free(void *bs) {
    cu_state *s = bs;
    if (!s) return;
    cudaSetDevice(s->m->dev);
    if (s->stream) cudaStreamSynchronize(s->stream);
    for (int i = 0; i < s->nplans; i++) plan_free(&s->plans[i]);
    void *dev[] = {s->ws, s->crops, s->cols, s->x, s->h, s->qkv, s->scores, s->att, s->mlp, s->kv, s->hx, s->hh,
                   s->hq, s->ha, s->hf, s->raw, s->hb, s->qkvb, s->scoresb, s->attb, s->mlpb, s->xb};
    for (size_t i = 0; i < sizeof dev / sizeof dev[0]; i++)
        if (dev[i]) cudaFree(dev[i]);
    if (s->crops_host) cudaFreeHost(s->crops_host);
    if (s->raw_host) cudaFreeHost(s->raw_host);
    if (s->blas) cublasDestroy(s->blas);
    if (s->lt) cublasLtDestroy(s->lt);
    if (s->stream) cudaStreamDestroy(s->stream);
    free(s);
}

int hm_cu_state_new(const void *bm, const hm_config *c, int prec, int dev, int max_batch, int nthreads,
                    hm_run_ctl *ctl, void **bs) {
    *bs = NULL;
    const hm_cu_model *m = bm;
    if (ctl->plain)
        return hm_cu_err(HM_E_UNSUPPORTED, "the textbook formulation (plain) runs on the cpu backend only");
    cu_state *s = calloc(1, sizeof *s);
    if (!s) return hm_cu_err(HM_E_NOMEM, "cuda: out of host memory");
    s->m = m, s->ctl = ctl, s->max_batch = max_batch, s->prec = prec;
    int rc = ok(cudaSetDevice(dev), "cudaSetDevice");
    if (!rc) rc = ok(cudaStreamCreateWithFlags(&s->stream, cudaStreamNonBlocking), "cudaStreamCreate");
    if (!rc) rc = okb(cublasLtCreate(&s->lt), "cublasLtCreate");
    if (!rc) rc = okb(cublasCreate(&s->blas), "cublasCreate");
    if (!rc) rc = okb(cublasSetStream(s->blas, s->stream), "cublasSetStream");
    /* fp32 is the exact precision: no TF32, whatever NVIDIA_TF32_OVERRIDE says */
    if (!rc)
        rc = okb(cublasSetMathMode(s->blas, prec == HM_PREC_FP32 ? CUBLAS_PEDANTIC_MATH : CUBLAS_DEFAULT_MATH),
                 "cublasSetMathMode");
    const size_t T = (size_t)max_batch * c->ntok, B = (size_t)max_batch, F = sizeof(float);
    const size_t crop_bytes = (size_t)3 * HAMER_CROP_H * HAMER_CROP_W * F; /* the float crops: the larger */
    const int fast = prec == HM_PREC_FAST;
    struct {
        void **p;
        size_t bytes;
        int want;
    } bufs[] = {
        {&s->ws, WORKSPACE_BYTES, 1},
        {&s->crops, B * crop_bytes, 1},
        {(void **)&s->cols, T * 768 * F, 1},
        {(void **)&s->x, T * c->dim * F, 1},
        {(void **)&s->h, T * c->dim * F, 1},
        {(void **)&s->qkv, T * 3 * c->dim * F, 1},
        {(void **)&s->scores, B * c->heads * c->ntok * c->ntok * F, 1},
        {(void **)&s->att, T * c->dim * F, 1},
        {(void **)&s->mlp, T * c->mlp * F, 1},
        {(void **)&s->kv, T * c->hdepth * 2 * c->hinner * F, 1},
        {(void **)&s->hx, B * c->hdim * F, 1},
        {(void **)&s->hh, B * c->hdim * F, 1},
        {(void **)&s->hq, B * c->hinner * F, 1},
        {(void **)&s->ha, B * c->hinner * F, 1},
        {(void **)&s->hf, B * c->hmlp * F, 1},
        {(void **)&s->raw, B * HM_NRAW * F, 1},
        {(void **)&s->hb, T * c->dim * 2, fast},
        {(void **)&s->qkvb, T * 3 * c->dim * 2, fast},
        {(void **)&s->scoresb, B * c->heads * c->ntok * c->ntok * 2, fast},
        {(void **)&s->attb, T * c->dim * 2, fast},
        {(void **)&s->mlpb, T * c->mlp * 2, fast},
        {(void **)&s->xb, T * c->dim * 2, fast},
    };
    for (size_t i = 0; !rc && i < sizeof bufs / sizeof bufs[0]; i++) {
        if (!bufs[i].want) continue;
        cudaError_t e = cudaMalloc(bufs[i].p, bufs[i].bytes);
        if (e != cudaSuccess) {
            size_t free_b = 0, total_b = 0;
            cudaMemGetInfo(&free_b, &total_b);
            *bufs[i].p = NULL;
            rc = hm_cu_err(HM_E_NOMEM, "cuda: a state for %d crops needs %zu more bytes of device memory; cuda:%d has %zu free of %zu (%s)",
                           max_batch, bufs[i].bytes, dev, free_b, total_b, cudaGetErrorString(e));
        }
    }
    if (!rc) rc = ok(cudaHostAlloc(&s->crops_host, B * crop_bytes, cudaHostAllocDefault), "cudaHostAlloc (crops)");
    if (!rc) rc = ok(cudaHostAlloc((void **)&s->raw_host, B * HM_NRAW * F, cudaHostAllocDefault), "cudaHostAlloc");
    if (rc) {
        hm_cu_state_free(s);
        return rc;
    }
    *bs = s;
    return HM_OK;
}

/* ---- the forward -------------------------------------------------------------- */

/* The wall time of stage st so far (when profiling: the stream is waited
 * for, so the time is the stage's own). */
static int stage_done(cu_state *s, double *t0, int st) {
    if (!s->ctl->profile) return HM_OK;
    int rc = ok(cudaStreamSynchronize(s->stream), "cudaStreamSynchronize");
    double t = hm_cu_host->now();
    s->ctl->stage_s[st] += t - *t0;
    *t0 = t;
    return rc;
}

static int cancelled(cu_state *s) {
    if (!s->ctl->cancel || !s->ctl->cancel(s->ctl->cancel_user)) return 0;
    cudaStreamSynchronize(s->stream);
    return hm_cu_err(HM_E_CANCELLED, "cancelled");
}

#define K(call) \
    if ((rc = hm_cu_check_launch(call))) return rc
#define G(call) \
    if ((rc = (call))) return rc

/* Attention of one block: S = scale q k^T per (crop, head), softmax, S v;
 * the heads of one crop are one strided batched matmul (head h's columns
 * start at h * 80 in the qkv rows). */
static int attention(cu_state *s, int B) {
    const int *c = s->m->cfg;
    const int dim = c[1], H = c[2], n = c[6], hd = dim / H, ld = 3 * dim;
    const int fast = s->prec == HM_PREC_FAST;
    const float scale = 1.0f / sqrtf((float)hd), one = 1.0f, zero = 0.0f;
    int rc;
    if (fast) K(hm_cu_to_bf16(s->qkv, ld, s->qkvb, ld, B * n, ld, s->stream));
    const cudaDataType_t in = fast ? CUDA_R_16BF : CUDA_R_32F;
    const size_t esz = fast ? 2 : 4;
    const char *qkv = fast ? (const char *)s->qkvb : (const char *)s->qkv;
    for (int b = 0; b < B; b++) {
        const char *q = qkv + (size_t)b * n * ld * esz, *k = q + (size_t)dim * esz;
        float *S = s->scores + (size_t)b * H * n * n;
        /* S^T (column-major n x n, ld n) = K (n x hd) . Q^T */
        G(okb(cublasGemmStridedBatchedEx(s->blas, CUBLAS_OP_T, CUBLAS_OP_N, n, n, hd, &scale, k, in, ld, hd, q, in, ld,
                                         hd, &zero, S, CUDA_R_32F, n, (long long)n * n, H, CUBLAS_COMPUTE_32F,
                                         CUBLAS_GEMM_DEFAULT),
              "attention scores"));
    }
    uint16_t *Sb = fast ? s->scoresb : NULL;
    K(hm_cu_softmax(s->scores, Sb, B * H * n, n, s->stream));
    for (int b = 0; b < B; b++) {
        const char *v = qkv + ((size_t)b * n * ld + 2 * (size_t)dim) * esz;
        const void *P = fast ? (const void *)(Sb + (size_t)b * H * n * n) : (const void *)(s->scores + (size_t)b * H * n * n);
        float *O = s->att + (size_t)b * n * dim;
        /* O^T (hd x n, ld dim) = V^T (hd x n) . P^T (n x n) */
        G(okb(cublasGemmStridedBatchedEx(s->blas, CUBLAS_OP_N, CUBLAS_OP_N, hd, n, n, &one, v, in, ld, hd, P, in, n,
                                         (long long)n * n, &zero, O, CUDA_R_32F, dim, hd, H, CUBLAS_COMPUTE_32F,
                                         CUBLAS_GEMM_DEFAULT),
              "attention output"));
    }
    if (fast) K(hm_cu_to_bf16(s->att, dim, s->attb, dim, B * n, dim, s->stream));
    return HM_OK;
}

static int backbone(cu_state *s, int B, double *t0) {
    const hm_cu_model *m = s->m;
    const int *c = m->cfg;
    const int depth = c[0], dim = c[1], mlp = c[3], n = c[6], T = B * n, wb = m->wide_bf16;
    int rc;
    for (int l = 0; l < depth; l++) {
        const hm_cu_block *bl = &m->blocks[l];
        if ((rc = cancelled(s))) return rc;
        K(hm_cu_layernorm(s->x, s->h, wb ? s->hb : NULL, T, dim, bl->n1w, bl->n1b, 1e-6f, s->stream));
        G(stage_done(s, t0, HM_ST_NORM));
        G(gemm(s, T, 3 * dim, dim, wb ? (const void *)s->hb : s->h, dim, wb, bl->qkv, wb, bl->qkv_b, s->qkv, 3 * dim, 0));
        G(stage_done(s, t0, HM_ST_QKV));
        G(attention(s, B));
        G(stage_done(s, t0, HM_ST_ATTN));
        G(gemm(s, T, dim, dim, wb ? (const void *)s->attb : s->att, dim, wb, bl->proj, wb, bl->proj_b, s->x, dim, 1));
        G(stage_done(s, t0, HM_ST_PROJ));
        K(hm_cu_layernorm(s->x, s->h, wb ? s->hb : NULL, T, dim, bl->n2w, bl->n2b, 1e-6f, s->stream));
        G(stage_done(s, t0, HM_ST_NORM));
        G(gemm(s, T, mlp, dim, wb ? (const void *)s->hb : s->h, dim, wb, bl->fc1, wb, bl->fc1_b, s->mlp, mlp, 0));
        K(hm_cu_gelu(s->mlp, wb ? s->mlpb : NULL, T, mlp, mlp, s->stream));
        G(stage_done(s, t0, HM_ST_FC1));
        G(gemm(s, T, dim, mlp, wb ? (const void *)s->mlpb : s->mlp, mlp, wb, bl->fc2, wb, bl->fc2_b, s->x, dim, 1));
        G(stage_done(s, t0, HM_ST_FC2));
    }
    K(hm_cu_layernorm(s->x, s->x, wb ? s->xb : NULL, T, dim, m->ln_w, m->ln_b, 1e-6f, s->stream));
    return stage_done(s, t0, HM_ST_NORM);
}

/* The decoder on the B single-token queries, then the readouts (+ init). */
static int head(cu_state *s, int B) {
    const hm_cu_model *m = s->m;
    const int *c = m->cfg;
    const int dim = c[1], n = c[6], hdepth = c[7], d = c[8], heads = c[9], in = c[10], hmlp = c[11], T = B * n;
    const int wb = m->wide_bf16, ldkv = hdepth * 2 * in;
    const float eps = 1e-5f;
    int rc;
    G(gemm(s, T, ldkv, dim, wb ? (const void *)s->xb : s->x, dim, wb, m->kv_all, wb, NULL, s->kv, ldkv, 0));
    K(hm_cu_tile_rows(s->hx, m->x1, 1, d, B, s->stream));
    for (int l = 0; l < hdepth; l++) {
        const hm_cu_layer *L = &m->layers[l];
        if (l > 0) { /* layer 0's self-attention is folded into x1 */
            K(hm_cu_layernorm(s->hx, s->hh, NULL, B, d, L->sa_nw, L->sa_nb, eps, s->stream));
            G(gemm(s, B, in, d, s->hh, d, 0, L->sa_v, 0, NULL, s->ha, in, 0));
            G(gemm(s, B, d, in, s->ha, in, 0, L->sa_out, 0, L->sa_out_b, s->hx, d, 1));
            K(hm_cu_layernorm(s->hx, s->hh, NULL, B, d, L->ca_nw, L->ca_nb, eps, s->stream));
            G(gemm(s, B, in, d, s->hh, d, 0, L->ca_q, 0, NULL, s->hq, in, 0));
        } else {
            K(hm_cu_tile_rows(s->hq, m->q1, 1, in, B, s->stream));
        }
        K(hm_cu_cross_attention(s->hq, s->kv + (size_t)l * 2 * in, ldkv, s->ha, B, n, heads, in, s->stream));
        G(gemm(s, B, d, in, s->ha, in, 0, L->ca_out, 0, L->ca_out_b, s->hx, d, 1));
        K(hm_cu_layernorm(s->hx, s->hh, NULL, B, d, L->ff_nw, L->ff_nb, eps, s->stream));
        G(gemm(s, B, hmlp, d, s->hh, d, 0, L->ff1, 0, L->ff1_b, s->hf, hmlp, 0));
        K(hm_cu_gelu(s->hf, NULL, B, hmlp, hmlp, s->stream));
        G(gemm(s, B, d, hmlp, s->hf, hmlp, 0, L->ff2, 0, L->ff2_b, s->hx, d, 1));
    }
    const int outs[3] = {HM_NJ * 6, HM_NB, 3}, at[3] = {0, HM_NJ * 6, HM_NJ * 6 + HM_NB};
    for (int i = 0; i < 3; i++) G(gemm(s, B, outs[i], d, s->hx, d, 0, m->dec[i], 0, m->dec_b[i], s->raw + at[i], HM_NRAW, 0));
    K(hm_cu_add_rows(s->raw, m->init, B, HM_NRAW, s->stream));
    return HM_OK;
}

int hm_cu_forward(void *bs, const void *crops, int is_u8, int B, float *params) {
    cu_state *s = bs;
    const hm_cu_model *m = s->m;
    const int *c = m->cfg;
    const int dim = c[1], n = c[6], T = B * n;
    int rc;
    if (B < 1 || B > s->max_batch) return hm_cu_err(HM_E_ARG, "cuda: %d crops in a pass of at most %d", B, s->max_batch);
    G(ok(cudaSetDevice(m->dev), "cudaSetDevice"));
    double t0 = s->ctl->profile ? hm_cu_host->now() : 0;
    /* crops: through the pinned buffer, one copy */
    const size_t bytes = (size_t)B * HAMER_CROP_H * HAMER_CROP_W * 3 * (is_u8 ? 1 : sizeof(float));
    memcpy(s->crops_host, crops, bytes);
    G(ok(cudaMemcpyAsync(s->crops, s->crops_host, bytes, cudaMemcpyHostToDevice, s->stream), "crops upload"));
    K(hm_cu_im2col(s->crops, is_u8, s->cols, B, c[4], c[5], s->stream));
    K(hm_cu_tile_rows(s->x, is_u8 ? m->tokb : m->pos, n, dim, B, s->stream));
    G(gemm(s, T, dim, 768, s->cols, 768, 0, is_u8 ? m->patch_u8 : m->patch, 0, m->patch_b, s->x, dim, 1));
    G(stage_done(s, &t0, HM_ST_PATCH));
    G(backbone(s, B, &t0));
    G(head(s, B));
    G(ok(cudaMemcpyAsync(s->raw_host, s->raw, (size_t)B * HM_NRAW * sizeof(float), cudaMemcpyDeviceToHost, s->stream),
         "readout download"));
    G(ok(cudaStreamSynchronize(s->stream), "the forward"));
    hm_cu_host->raw_to_params(s->raw_host, params, B);
    if (s->ctl->profile) s->ctl->stage_s[HM_ST_HEAD] += hm_cu_host->now() - t0;
    return HM_OK;
}

/* ---- single ops for the op test (tests/c/test_cuda.c) ---------------------- */

/* A state with the handles and workspace only, on device 0. */
static int test_state(cu_state *s, int prec) {
    memset(s, 0, sizeof *s);
    s->prec = prec;
    int rc = ok(cudaStreamCreate(&s->stream), "cudaStreamCreate");
    if (!rc) rc = okb(cublasLtCreate(&s->lt), "cublasLtCreate");
    if (!rc) rc = okb(cublasCreate(&s->blas), "cublasCreate");
    if (!rc) rc = okb(cublasSetStream(s->blas, s->stream), "cublasSetStream");
    if (!rc) rc = okb(cublasSetMathMode(s->blas, prec == HM_PREC_FP32 ? CUBLAS_PEDANTIC_MATH : CUBLAS_DEFAULT_MATH), "math");
    if (!rc) rc = ok(cudaMalloc(&s->ws, WORKSPACE_BYTES), "cudaMalloc (workspace)");
    return rc;
}

static void test_state_free(cu_state *s) {
    for (int i = 0; i < s->nplans; i++) plan_free(&s->plans[i]);
    void *dev[] = {s->ws, s->qkv, s->qkvb, s->scores, s->scoresb, s->att, s->attb};
    for (size_t i = 0; i < sizeof dev / sizeof dev[0]; i++)
        if (dev[i]) cudaFree(dev[i]);
    if (s->blas) cublasDestroy(s->blas);
    if (s->lt) cublasLtDestroy(s->lt);
    if (s->stream) cudaStreamDestroy(s->stream);
}

/* Y[M,N] (=|+=) X[M,K] . W[N,K]^T (+ bias) as the forward's matmuls run:
 * bf16 rounds W and X to bf16 on the device first (fp32 accumulation). */
__attribute__((visibility("default"))) int hm_cu_test_gemm(int M, int N, int K, const float *X, const float *W,
                                                           const float *bias, float *Y, int accum, int bf16) {
    cu_state s;
    int rc = test_state(&s, bf16 ? HM_PREC_FAST : HM_PREC_FP32);
    float *dx = NULL, *dw = NULL, *db = NULL, *dy = NULL;
    uint16_t *xb = NULL, *wb = NULL;
    const size_t F = sizeof(float);
    if (!rc) rc = ok(cudaMalloc((void **)&dx, (size_t)M * K * F), "cudaMalloc");
    if (!rc) rc = ok(cudaMalloc((void **)&dw, (size_t)N * K * F), "cudaMalloc");
    if (!rc) rc = ok(cudaMalloc((void **)&db, (size_t)N * F), "cudaMalloc");
    if (!rc) rc = ok(cudaMalloc((void **)&dy, (size_t)M * N * F), "cudaMalloc");
    if (!rc && bf16) rc = ok(cudaMalloc((void **)&xb, (size_t)M * K * 2), "cudaMalloc");
    if (!rc && bf16) rc = ok(cudaMalloc((void **)&wb, (size_t)N * K * 2), "cudaMalloc");
    if (!rc) rc = ok(cudaMemcpy(dx, X, (size_t)M * K * F, cudaMemcpyHostToDevice), "upload");
    if (!rc) rc = ok(cudaMemcpy(dw, W, (size_t)N * K * F, cudaMemcpyHostToDevice), "upload");
    if (!rc && bias) rc = ok(cudaMemcpy(db, bias, (size_t)N * F, cudaMemcpyHostToDevice), "upload");
    if (!rc) rc = ok(cudaMemcpy(dy, Y, (size_t)M * N * F, cudaMemcpyHostToDevice), "upload");
    if (!rc && bf16) rc = hm_cu_check_launch(hm_cu_to_bf16(dx, K, xb, K, M, K, s.stream));
    if (!rc && bf16) rc = hm_cu_check_launch(hm_cu_to_bf16(dw, K, wb, K, N, K, s.stream));
    if (!rc)
        rc = gemm(&s, M, N, K, bf16 ? (const void *)xb : dx, K, bf16, bf16 ? (const void *)wb : dw, bf16,
                  bias ? db : NULL, dy, N, accum);
    if (!rc) rc = ok(cudaStreamSynchronize(s.stream), "test gemm");
    if (!rc) rc = ok(cudaMemcpy(Y, dy, (size_t)M * N * F, cudaMemcpyDeviceToHost), "download");
    void *all[] = {dx, dw, db, dy, xb, wb};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
        if (all[i]) cudaFree(all[i]);
    test_state_free(&s);
    return rc;
}

/* One block's attention as the forward runs it: qkv [B*n, 3*dim] in, the
 * heads' outputs [B*n, dim] out (bf16 dot products when bf16). */
__attribute__((visibility("default"))) int hm_cu_test_attention(const float *qkv, float *out, int B, int n, int dim,
                                                                int heads, int bf16) {
    cu_state s;
    hm_cu_model m;
    memset(&m, 0, sizeof m);
    m.cfg[1] = dim, m.cfg[2] = heads, m.cfg[6] = n;
    int rc = test_state(&s, bf16 ? HM_PREC_FAST : HM_PREC_FP32);
    s.m = &m;
    const size_t T = (size_t)B * n, F = sizeof(float), SS = (size_t)B * heads * n * n;
    if (!rc) rc = ok(cudaMalloc((void **)&s.qkv, T * 3 * dim * F), "cudaMalloc");
    if (!rc) rc = ok(cudaMalloc((void **)&s.scores, SS * F), "cudaMalloc");
    if (!rc) rc = ok(cudaMalloc((void **)&s.att, T * dim * F), "cudaMalloc");
    if (!rc && bf16) rc = ok(cudaMalloc((void **)&s.qkvb, T * 3 * dim * 2), "cudaMalloc");
    if (!rc && bf16) rc = ok(cudaMalloc((void **)&s.scoresb, SS * 2), "cudaMalloc");
    if (!rc && bf16) rc = ok(cudaMalloc((void **)&s.attb, T * dim * 2), "cudaMalloc");
    if (!rc) rc = ok(cudaMemcpy(s.qkv, qkv, T * 3 * dim * F, cudaMemcpyHostToDevice), "upload");
    if (!rc) rc = attention(&s, B);
    if (!rc) rc = ok(cudaStreamSynchronize(s.stream), "test attention");
    if (!rc) rc = ok(cudaMemcpy(out, s.att, T * dim * F, cudaMemcpyDeviceToHost), "download");
    test_state_free(&s);
    return rc;
}
