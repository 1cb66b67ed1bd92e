/* gemm.c - the GEMM interface (kernels/gemm.h): argument checks, then
 * dispatch on the packing's precision to the exact fp32 driver
 * (gemm_fp32.c) or the low-precision one (gemm_lowp.c).
 */
#include "kernels/gemm.h"

#include <stdatomic.h>
#include <string.h>

#include "core/util.h"
#include "kernels/gemm_fp32.h"
#include "kernels/gemm_lowp.h"
#include "kernels/norm.h"

/* Argument checks shared by every packing entry; zeroes *p. */
static int pack_args(const char *fn, hm_packed *p, const float *W, int ldw, int N, int K) {
    if (!p) return hm_err(HM_E_ARG, "%s: NULL output", fn);
    memset(p, 0, sizeof *p);
    if (!W || N < 1 || K < 1 || ldw < K)
        return hm_err(HM_E_ARG, "%s: bad arguments (N=%d K=%d ldw=%d)", fn, N, K, ldw);
    return hm_isa_status();
}

int hm_pack_weights(hm_packed *p, const float *W, int ldw, const float *bias, int N, int K) {
    int rc = pack_args(__func__, p, W, ldw, N, K);
    return rc ? rc : hm_pack_fp32(p, W, ldw, bias, N, K);
}

int hm_pack_weights_prec(hm_packed *p, const float *W, int ldw, const float *bias, int N, int K, hm_precision prec) {
    int rc = pack_args(__func__, p, W, ldw, N, K);
    if (rc) return rc;
    if (prec == HM_PREC_FP32) return hm_pack_fp32(p, W, ldw, bias, N, K);
    if (prec != HM_PREC_FAST) return hm_err(HM_E_ARG, "%s: unknown precision %d", __func__, (int)prec);
    return hm_pack_lowp(p, W, ldw, bias, N, K, (int)hm_lowp_kind_active());
}

int hm_pack_weights_fast_sensitive(hm_packed *p, const float *W, int ldw, const float *bias, int N, int K) {
    int rc = pack_args(__func__, p, W, ldw, N, K);
    if (rc) return rc;
    int kind = hm_lowp_sensitive_kind();
    if (kind == HM_LOWP_FP32) return hm_pack_fp32(p, W, ldw, bias, N, K); /* AArch64 without BF16 */
    if (kind < 0) return kind; /* message recorded */
    return hm_pack_lowp(p, W, ldw, bias, N, K, kind);
}

int hm_pack_weights_fast_bf16(hm_packed *p, const float *W, int ldw, const float *bias, int N, int K) {
    int rc = pack_args(__func__, p, W, ldw, N, K);
    if (rc) return rc;
    int kind = hm_lowp_bf16_kind();
    if (kind == HM_LOWP_FP32) return hm_pack_fp32(p, W, ldw, bias, N, K);
    if (kind < 0) return kind; /* message recorded */
    return hm_pack_lowp(p, W, ldw, bias, N, K, kind);
}

void hm_packed_free(hm_packed *p) {
    if (!p) return;
    hm_free(p->w);
    hm_free(p->bias);
    hm_free(p->lp);
    hm_free(p->lp_scale);
    memset(p, 0, sizeof *p);
}

/* ---- fault injection (tests) ------------------------------------------- */

static atomic_int hm_fault_after = -1, hm_fault_code;

void hm_gemm_test_fail(int after, int code) {
    atomic_store(&hm_fault_code, code);
    atomic_store(&hm_fault_after, after);
}

static int hm_gemm_test_fault(void) {
    int n = atomic_load(&hm_fault_after);
    if (n < 0) return HM_OK;
    if (n > 0) {
        atomic_fetch_sub(&hm_fault_after, 1);
        return HM_OK;
    }
    atomic_store(&hm_fault_after, -1);
    int code = atomic_load(&hm_fault_code);
    return hm_err(code, "hm_gemm: injected failure (test)");
}

int hm_gemm(hm_pool *pool, int M, const float *A, int lda, const hm_packed *W, float *C, int ldc, hm_epilogue epi) {
    const hm_gemm_opts o = {.epi = epi};
    return hm_gemm_ex(pool, M, A, lda, W, C, ldc, &o);
}

typedef struct {
    const float *x;
    float *y;
    int M, K;
    size_t ldx, ldy;
    const hm_gemm_opts *o;
} ln_job;

#define LN_ROWS 16

static void ln_task(void *ctx, int t, int tid) {
    const ln_job *j = ctx;
    int r0 = t * LN_ROWS, n = j->M - r0 < LN_ROWS ? j->M - r0 : LN_ROWS;
    if (j->ldx == (size_t)j->K && j->ldy == (size_t)j->K) {
        hm_layernorm(j->x + (size_t)r0 * j->K, j->y + (size_t)r0 * j->K, n, j->K, j->o->ln_w, j->o->ln_b, j->o->ln_eps);
        return;
    }
    for (int i = r0; i < r0 + n; i++)
        hm_layernorm(j->x + (size_t)i * j->ldx, j->y + (size_t)i * j->ldy, 1, j->K, j->o->ln_w, j->o->ln_b, j->o->ln_eps);
}

int hm_gemm_ex(hm_pool *pool, int M, const float *A, int lda, const hm_packed *W, float *C, int ldc,
               const hm_gemm_opts *o) {
    const hm_gemm_opts plain = {.epi = HM_EPI_STORE};
    if (!o) o = &plain;
    if (M < 1 || !A || !C || !W) return hm_err(HM_E_ARG, "hm_gemm: bad arguments (M=%d)", M);
    if ((unsigned)o->epi > HM_EPI_ACCUM) return hm_err(HM_E_ARG, "hm_gemm: unknown epilogue %d", (int)o->epi);
    if (o->ln_w && (!o->ln_b || !o->ln_out || o->ld_ln < W->K))
        return hm_err(HM_E_ARG, "hm_gemm: a LayerNorm prologue needs its bias and an output buffer of K columns");
    if (o->center && (o->center < 16 || M % o->center || o->ln_w))
        return hm_err(HM_E_ARG, "hm_gemm: centering groups of %d rows do not fit (M=%d; >= 16 rows, no LayerNorm)",
                      o->center, M);
    int rc = hm_gemm_test_fault();
    if (rc) return rc;
    if (W->prec == HM_PREC_FAST) return hm_gemm_lowp(pool, M, A, lda, W, C, ldc, o);
    if (o->ln_w) {
        /* The rows normalised in ld_ln-wide rows, as hm_layernorm writes
         * them, then the exact product of those. */
        if (lda < W->K) return hm_err(HM_E_ARG, "hm_gemm: bad arguments (M=%d)", M);
        ln_job j = {A, o->ln_out, M, W->K, (size_t)lda, (size_t)o->ld_ln, o};
        hm_pool_run(pool, ln_task, &j, (M + LN_ROWS - 1) / LN_ROWS);
        return hm_gemm_fp32(pool, M, o->ln_out, o->ld_ln, W, C, ldc, o->epi);
    }
    return hm_gemm_fp32(pool, M, A, lda, W, C, ldc, o->epi);
}

size_t hm_gemm_scratch_bytes(const hm_packed *W, int M) {
    return W && W->prec == HM_PREC_FAST ? hm_lowp_scratch_bytes(W, M) : 0;
}

int hm_packed_sizes_for(int N, int K, int isa, int prec, int lp_kind, hm_packed_sizes *s) {
    memset(s, 0, sizeof *s);
    if (N < 1 || K < 1) return hm_err(HM_E_ARG, "packed matrix of %d x %d", N, K);
    if (prec == HM_PREC_FAST) return hm_lowp_sizes(lp_kind, N, K, &s->lp, &s->lp_scale, &s->bias);
    if (prec != HM_PREC_FP32) return hm_err(HM_E_ARG, "packed matrix with precision %d", prec);
    return hm_fp32_sizes(N, K, isa, &s->w, &s->bias);
}
