/* gemm_fp32.c - the exact fp32 GEMM: weight packing and the driver around
 * the per-ISA block kernels (kernels.h: gemm_scalar.c, x86/gemm_avx2.c,
 * x86/gemm_avx512.c, arm/gemm_neon.c).
 *
 * Packed layout (per ISA level, its table's NR: 8 / 16 / 32 for scalar /
 * avx2 / avx512):
 * W [N, K] is cut into ceil(N / NR) panels of NR output columns; panel p is
 * K rows of NR floats, element (k, j) at w[p*K*NR + k*NR + j] = W[p*NR+j, k],
 * zero for columns past N. A K block of a panel is therefore one contiguous,
 * 64-byte aligned chunk, which the micro-kernels stream with aligned loads.
 * The bias copy is zero padded to a whole number of panels for the same
 * reason.
 *
 * Work split: tasks are (M block x a group of panels). Inside a task the K
 * loop runs in fixed HM_GEMM_KC steps; each step's dot products start from zero and
 * are then added to the running total kept in C (two-level summation, which
 * also keeps fp32 error low at K = 5120). Every output element thus sees the
 * same sequence of operations whatever the thread count: 1- and N-thread
 * results are bit-identical.
 */
#include "kernels/gemm_fp32.h"

#include <string.h>

#include "core/util.h"
#include "kernels/kernels.h"

/* Rows per M block: A block (MC x KC floats, 384 KiB) stays in L2 while
 * every panel's K chunk streams past it; 192-token batches fit in one. */
#define HM_GEMM_MC 384
/* Panels per task: 4 x 32 columns share each A chunk while it is in L2;
 * the model's N (1280..6144) still gives 10+ tasks to balance. */
#define HM_GEMM_GROUP 4

static int hm_nr(int isa) { return hm_kernels_for(isa)->gemm_nr; }

typedef hm_gemm_block_fn hm_block_fn;

static hm_block_fn hm_block_for(int isa) { return hm_kernels_for(isa)->gemm_block; }

/* ---- packing ----------------------------------------------------------- */

int hm_pack_fp32(hm_packed *p, const float *W, int ldw, const float *bias, int N, int K) {
    int isa = (int)hm_isa_active();
    size_t nr = (size_t)hm_nr(isa), np = ((size_t)N + nr - 1) / nr;
    float *w = hm_alloc(np * nr * (size_t)K * sizeof(float));
    float *b = NULL;
    if (!w) return HM_E_NOMEM;
    if (bias) {
        b = hm_alloc(np * nr * sizeof(float));
        if (!b) {
            hm_free(w);
            return HM_E_NOMEM;
        }
        memset(b, 0, np * nr * sizeof(float));
        memcpy(b, bias, (size_t)N * sizeof(float));
    }
    for (size_t pn = 0; pn < np; pn++) {
        float *dst = w + pn * (size_t)K * nr;
        for (size_t j = 0; j < nr; j++) {
            size_t n = pn * nr + j;
            if (n < (size_t)N) {
                const float *src = W + n * (size_t)ldw;
                for (size_t k = 0; k < (size_t)K; k++) dst[k * nr + j] = src[k];
            } else {
                for (size_t k = 0; k < (size_t)K; k++) dst[k * nr + j] = 0.0f;
            }
        }
    }
    p->N = N;
    p->K = K;
    p->isa = isa;
    p->w = w;
    p->bias = b;
    return HM_OK;
}

/* ---- packed GEMM driver ------------------------------------------------ */

typedef struct {
    int M, nmb, nr_isa;
    const float *A;
    size_t lda;
    const hm_packed *W;
    float *C;
    size_t ldc;
    hm_epilogue epi;
    hm_block_fn block;
} hm_gemm_job;

/* Task t: M block t % nmb of the group of HM_GEMM_GROUP panels t / nmb.
 * The whole K loop for those tiles runs here, so the summation order never
 * depends on the thread count. K chunks go outside the group's panels: the
 * A chunk (M block x KC floats) stays in L2 while every panel of the group
 * uses it, where a panel at a time streamed all of A once per panel (at K
 * 5120, fc2's 3.9 MB, from L3 each time). Each output element still sees
 * the same chunks in the same order, so the results are the same. */
static void hm_gemm_task(void *ctx, int t, int tid) {
    const hm_gemm_job *j = ctx;
    int nr = j->nr_isa, K = j->W->K;
    int mb = t % j->nmb, p0 = t / j->nmb * HM_GEMM_GROUP, np = (j->W->N + nr - 1) / nr;
    int p1 = p0 + HM_GEMM_GROUP < np ? p0 + HM_GEMM_GROUP : np;
    int i0 = mb * HM_GEMM_MC, m = j->M - i0 < HM_GEMM_MC ? j->M - i0 : HM_GEMM_MC;
    const float *A = j->A + (size_t)i0 * j->lda;
    for (int k0 = 0; k0 < K; k0 += HM_GEMM_KC) {
        int kc = K - k0 < HM_GEMM_KC ? K - k0 : HM_GEMM_KC;
        int last = k0 + kc == K;
        for (int pn = p0; pn < p1; pn++) {
            int n0 = pn * nr, ncols = j->W->N - n0 < nr ? j->W->N - n0 : nr;
            /* the next block's chunk: the next panel, else the group's first
             * at the next K chunk (none after the task's last block) */
            int nk0 = pn + 1 < p1 ? k0 : k0 + kc, npn = pn + 1 < p1 ? pn + 1 : p0;
            int nkc = K - nk0 < HM_GEMM_KC ? K - nk0 : HM_GEMM_KC;
            hm_gemm_epi_args e = {
                .load_c = k0 > 0 || j->epi == HM_EPI_ACCUM,
                .beta = 1.0f,
                .bias = last && j->W->bias ? j->W->bias + n0 : NULL,
                .gelu = last && j->epi == HM_EPI_GELU,
                .next = nk0 < K ? j->W->w + (size_t)npn * K * nr + (size_t)nk0 * nr : NULL,
                .next_bytes = nk0 < K ? (size_t)nkc * nr * sizeof(float) : 0,
            };
            j->block(m, ncols, kc, A + k0, j->lda, j->W->w + (size_t)pn * K * nr + (size_t)k0 * nr,
                     j->C + (size_t)i0 * j->ldc + n0, j->ldc, &e);
        }
    }
}

int hm_gemm_fp32(hm_pool *pool, int M, const float *A, int lda, const hm_packed *W, float *C, int ldc,
                 hm_epilogue epi) {
    if (!W->w || lda < W->K || ldc < W->N) return hm_err(HM_E_ARG, "hm_gemm: bad arguments (M=%d)", M);
    if (!hm_isa_runs(W->isa))
        return hm_err(HM_E_UNSUPPORTED, "hm_gemm: weights packed for ISA %d, which this CPU lacks", W->isa);
    hm_gemm_job j = {
        .M = M, .nmb = (M + HM_GEMM_MC - 1) / HM_GEMM_MC, .nr_isa = hm_nr(W->isa),
        .A = A, .lda = (size_t)lda, .W = W, .C = C, .ldc = (size_t)ldc,
        .epi = epi, .block = hm_block_for(W->isa),
    };
    int np = (W->N + j.nr_isa - 1) / j.nr_isa, ng = (np + HM_GEMM_GROUP - 1) / HM_GEMM_GROUP;
    hm_pool_run(pool, hm_gemm_task, &j, j.nmb * ng);
    return HM_OK;
}

int hm_fp32_sizes(int N, int K, int isa, size_t *w, size_t *bias) {
    if (N < 1 || K < 1 || !hm_isa_known(isa))
        return hm_err(HM_E_ARG, "fp32 packing of %d x %d for ISA %d", N, K, isa);
    size_t nr = (size_t)hm_nr(isa), np = ((size_t)N + nr - 1) / nr;
    *w = np * nr * (size_t)K * sizeof(float);
    *bias = np * nr * sizeof(float);
    return HM_OK;
}

/* ---- unpacked helpers for attention ------------------------------------ */

/* Both helpers pack B one K chunk of one NR-column panel at a time into a
 * stack buffer (alpha folded in, zero padded), then reuse the packed-GEMM
 * block kernel. alpha is applied to B rather than to the sum: the results
 * differ from alpha * (A.B) only by rounding. */
static void hm_sgemm_any(int transb, int M, int N, int K, float alpha, const float *A, int lda,
                         const float *B, int ldb, float beta, float *C, int ldc) {
    if (M < 1 || N < 1) return;
    int isa = (int)hm_isa_active();
    int nr = hm_nr(isa);
    hm_block_fn block = hm_block_for(isa);
    _Alignas(64) float buf[HM_GEMM_KC * HM_GEMM_NR_MAX];
    if (K < 1) { /* C = beta * C */
        for (int i = 0; i < M; i++)
            for (int jj = 0; jj < N; jj++) {
                float *c = C + (size_t)i * ldc + jj;
                *c = beta == 0.0f ? 0.0f : beta * *c;
            }
        return;
    }
    for (int n0 = 0; n0 < N; n0 += nr) {
        int ncols = N - n0 < nr ? N - n0 : nr;
        for (int k0 = 0; k0 < K; k0 += HM_GEMM_KC) {
            int kc = K - k0 < HM_GEMM_KC ? K - k0 : HM_GEMM_KC;
            /* Read B along its rows (contiguous) in both cases. */
            if (transb) {
                for (int jj = 0; jj < ncols; jj++) {
                    const float *src = B + (size_t)(n0 + jj) * ldb + k0;
                    for (int k = 0; k < kc; k++) buf[(size_t)k * nr + jj] = alpha * src[k];
                }
            } else {
                for (int k = 0; k < kc; k++) {
                    const float *src = B + (size_t)(k0 + k) * ldb + n0;
                    for (int jj = 0; jj < ncols; jj++) buf[(size_t)k * nr + jj] = alpha * src[jj];
                }
            }
            if (ncols < nr)
                for (int k = 0; k < kc; k++)
                    for (int jj = ncols; jj < nr; jj++) buf[(size_t)k * nr + jj] = 0.0f;
            hm_gemm_epi_args e = {
                .load_c = k0 > 0 || beta != 0.0f, .beta = k0 > 0 ? 1.0f : beta, .bias = NULL, .gelu = 0,
            };
            block(M, ncols, kc, A + k0, (size_t)lda, buf, C + n0, (size_t)ldc, &e);
        }
    }
}

void hm_sgemm_nt(int M, int N, int K, float alpha, const float *A, int lda,
                 const float *B, int ldb, float beta, float *C, int ldc) {
    hm_sgemm_any(1, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
}

void hm_sgemm_nn(int M, int N, int K, float alpha, const float *A, int lda,
                 const float *B, int ldb, float beta, float *C, int ldc) {
    hm_sgemm_any(0, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
}

