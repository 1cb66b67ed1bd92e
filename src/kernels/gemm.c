/* gemm.c - ISA detection and selection, weight packing, and the dispatching
 * drivers around the per-ISA block kernels (gemm_scalar.c, gemm_avx2.c,
 * gemm_avx512.c).
 *
 * Packed layout (per ISA, NR = 8 / 16 / 32 for scalar / avx2 / avx512):
 * W [N, K] is cut into ceil(N / NR) panels of NR output columns; panel p is
 * K rows of NR floats, element (k, j) at w[p*K*NR + k*NR + j] = W[p*NR+j, k],
 * zero for columns past N. A K block of a panel is therefore one contiguous,
 * 64-byte aligned chunk, which the micro-kernels stream with aligned loads.
 * The bias copy is zero padded to a whole number of panels for the same
 * reason.
 *
 * Work split: tasks are (M block x one panel). Inside a task the K loop runs
 * in fixed HM_GEMM_KC steps; each step's dot products start from zero and
 * are then added to the running total kept in C (two-level summation, which
 * also keeps fp32 error low at K = 5120). Every output element thus sees the
 * same sequence of operations whatever the thread count: 1- and N-thread
 * results are bit-identical.
 */
#define _POSIX_C_SOURCE 200809L
#include "kernels/gemm.h"
#include "kernels/gemm_lowp.h"

#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "core/util.h"

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#define HM_X86 1
#endif

/* Rows per M block: A block (MC x KC floats, 384 KiB) stays in L2 while
 * every panel's K chunk streams past it; 192-token batches fit in one. */
#define HM_GEMM_MC 384

/* ---- ISA detection and selection --------------------------------------- */

#ifdef HM_X86
/* XCR0: which register states the OS saves on context switch. */
static uint64_t hm_xgetbv0(void) {
    uint32_t lo, hi;
    __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
    return ((uint64_t)hi << 32) | lo;
}

static hm_isa hm_detect_isa(void) {
    unsigned a, b, c, d;
    if (!__get_cpuid(1, &a, &b, &c, &d)) return HM_ISA_SCALAR;
    int fma = (c >> 12) & 1, osxsave = (c >> 27) & 1, avx = (c >> 28) & 1;
    if (!osxsave || !avx || !fma) return HM_ISA_SCALAR;
    uint64_t xcr0 = hm_xgetbv0();
    if ((xcr0 & 0x6) != 0x6) return HM_ISA_SCALAR; /* XMM + YMM state */
    if (!__get_cpuid_count(7, 0, &a, &b, &c, &d)) return HM_ISA_SCALAR;
    if (!((b >> 5) & 1)) return HM_ISA_SCALAR; /* AVX2 */
    int f = (b >> 16) & 1, dq = (b >> 17) & 1, bw = (b >> 30) & 1, vl = (b >> 31) & 1;
    /* opmask + upper halves of zmm0-15 + zmm16-31 */
    if (f && dq && bw && vl && (xcr0 & 0xe0) == 0xe0) return HM_ISA_AVX512;
    return HM_ISA_AVX2;
}
#else
static hm_isa hm_detect_isa(void) { return HM_ISA_SCALAR; }
#endif

static pthread_once_t hm_isa_once = PTHREAD_ONCE_INIT;
static hm_isa hm_cpu;                 /* written once under hm_isa_once */
static atomic_int hm_active;          /* the ISA new packs use */
static atomic_int hm_env_bad;         /* HAMER_ISA asked for something we lack */
static char hm_env_val[32];           /* its value, for the message */

static int hm_isa_from_name(const char *s) {
    if (!strcasecmp(s, "avx512")) return HM_ISA_AVX512;
    if (!strcasecmp(s, "avx2")) return HM_ISA_AVX2;
    if (!strcasecmp(s, "scalar")) return HM_ISA_SCALAR;
    return -1;
}

/* Detect the CPU, then apply HAMER_ISA once. A bad value is remembered and
 * reported by hm_gemm_status rather than silently replaced. */
static void hm_isa_init(void) {
    hm_cpu = hm_detect_isa();
    atomic_store(&hm_active, (int)hm_cpu);
    const char *env = getenv("HAMER_ISA");
    if (!env || !*env) return;
    int want = hm_isa_from_name(env);
    if (want < 0 || want > (int)hm_cpu) {
        snprintf(hm_env_val, sizeof hm_env_val, "%s", env);
        atomic_store(&hm_env_bad, 1);
    } else {
        atomic_store(&hm_active, want);
    }
}

hm_isa hm_cpu_isa(void) {
    pthread_once(&hm_isa_once, hm_isa_init);
    return hm_cpu;
}

hm_isa hm_gemm_isa(void) {
    pthread_once(&hm_isa_once, hm_isa_init);
    return (hm_isa)atomic_load(&hm_active);
}

const char *hm_isa_name(hm_isa isa) {
    switch (isa) {
    case HM_ISA_SCALAR: return "scalar";
    case HM_ISA_AVX2: return "avx2";
    case HM_ISA_AVX512: return "avx512";
    }
    return "unknown";
}

int hm_gemm_force_isa(hm_isa isa) {
    hm_isa cpu = hm_cpu_isa();
    if ((int)isa < HM_ISA_SCALAR || (int)isa > HM_ISA_AVX512)
        return hm_err(HM_E_ARG, "hm_gemm_force_isa: invalid ISA value %d", (int)isa);
    if (isa > cpu)
        return hm_err(HM_E_UNSUPPORTED, "ISA %s forced but this CPU supports at most %s",
                      hm_isa_name(isa), hm_isa_name(cpu));
    atomic_store(&hm_active, (int)isa);
    atomic_store(&hm_env_bad, 0); /* an explicit choice overrides HAMER_ISA */
    return HM_OK;
}

int hm_gemm_status(void) {
    hm_isa cpu = hm_cpu_isa();
    if (!atomic_load(&hm_env_bad)) return HM_OK;
    return hm_err(HM_E_UNSUPPORTED, "HAMER_ISA=%s: not one of avx512|avx2|scalar that this CPU (%s) supports",
                  hm_env_val, hm_isa_name(cpu));
}

static int hm_nr(int isa) {
    return isa == HM_ISA_AVX512 ? HM_GEMM_NR_AVX512 : isa == HM_ISA_AVX2 ? HM_GEMM_NR_AVX2 : HM_GEMM_NR_SCALAR;
}

typedef void (*hm_block_fn)(int, int, int, const float *, size_t, const float *, float *, size_t,
                            const hm_gemm_epi_args *);

static hm_block_fn hm_block_for(int isa) {
    return isa == HM_ISA_AVX512 ? hm_gemm_block_avx512 : isa == HM_ISA_AVX2 ? hm_gemm_block_avx2 : hm_gemm_block_scalar;
}

/* ---- packing ----------------------------------------------------------- */

int hm_pack_weights(hm_packed *p, const float *W, int ldw, const float *bias, int N, int K) {
    if (!p) return hm_err(HM_E_ARG, "hm_pack_weights: NULL output");
    memset(p, 0, sizeof *p);
    if (!W || N < 1 || K < 1 || ldw < K)
        return hm_err(HM_E_ARG, "hm_pack_weights: bad arguments (N=%d K=%d ldw=%d)", N, K, ldw);
    int rc = hm_gemm_status();
    if (rc != HM_OK) return rc;
    int isa = (int)hm_gemm_isa();
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

void hm_packed_free(hm_packed *p) {
    if (!p) return;
    hm_free(p->w);
    hm_free(p->bias);
    hm_free(p->lp);
    hm_free(p->lp_scale);
    memset(p, 0, sizeof *p);
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

/* Task t: M block t % nmb of panel t / nmb. The whole K loop for that tile
 * runs here, so the summation order never depends on the thread count. */
static void hm_gemm_task(void *ctx, int t, int tid) {
    const hm_gemm_job *j = ctx;
    int nr = j->nr_isa, K = j->W->K;
    int mb = t % j->nmb, pn = t / j->nmb;
    int i0 = mb * HM_GEMM_MC, m = j->M - i0 < HM_GEMM_MC ? j->M - i0 : HM_GEMM_MC;
    int n0 = pn * nr, ncols = j->W->N - n0 < nr ? j->W->N - n0 : nr;
    const float *panel = j->W->w + (size_t)pn * K * nr;
    const float *A = j->A + (size_t)i0 * j->lda;
    float *C = j->C + (size_t)i0 * j->ldc + n0;
    for (int k0 = 0; k0 < K; k0 += HM_GEMM_KC) {
        int kc = K - k0 < HM_GEMM_KC ? K - k0 : HM_GEMM_KC;
        int last = k0 + kc == K;
        hm_gemm_epi_args e = {
            .load_c = k0 > 0 || j->epi == HM_EPI_ACCUM,
            .beta = 1.0f,
            .bias = last && j->W->bias ? j->W->bias + n0 : NULL,
            .gelu = last && j->epi == HM_EPI_GELU,
        };
        j->block(m, ncols, kc, A + k0, j->lda, panel + (size_t)k0 * nr, C, j->ldc, &e);
    }
}

void hm_gemm(hm_pool *pool, int M, const float *A, int lda, const hm_packed *W, float *C, int ldc,
             hm_epilogue epi) {
    if (W && W->prec == HM_PREC_FAST) {
        hm_gemm_lowp(pool, M, A, lda, W, C, ldc, epi);
        return;
    }
    if (M < 1 || !A || !C || !W || !W->w) {
        hm_err(HM_E_ARG, "hm_gemm: bad arguments (M=%d)", M);
        return;
    }
    if (W->isa < HM_ISA_SCALAR || W->isa > (int)hm_cpu_isa()) {
        hm_err(HM_E_UNSUPPORTED, "hm_gemm: weights packed for ISA %d, which this CPU lacks", W->isa);
        return;
    }
    hm_gemm_job j = {
        .M = M, .nmb = (M + HM_GEMM_MC - 1) / HM_GEMM_MC, .nr_isa = hm_nr(W->isa),
        .A = A, .lda = (size_t)lda, .W = W, .C = C, .ldc = (size_t)ldc,
        .epi = epi, .block = hm_block_for(W->isa),
    };
    int np = (W->N + j.nr_isa - 1) / j.nr_isa;
    hm_pool_run(pool, hm_gemm_task, &j, j.nmb * np);
}

/* ---- unpacked helpers for attention ------------------------------------ */

/* Both helpers pack B one K chunk of one NR-column panel at a time into a
 * stack buffer (alpha folded in, zero padded), then reuse the packed-GEMM
 * block kernel. alpha is applied to B rather than to the sum: the results
 * differ from alpha * (A.B) only by rounding. */
static void hm_sgemm_any(int transb, int M, int N, int K, float alpha, const float *A, int lda,
                         const float *B, int ldb, float beta, float *C, int ldc) {
    if (M < 1 || N < 1) return;
    int isa;
    if (hm_gemm_status() != HM_OK) isa = (int)hm_cpu_isa(); /* error recorded; still compute */
    else isa = (int)hm_gemm_isa();
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

float hm_gelu(float x) { return 0.5f * x * (1.0f + erff(x * 0.70710678f)); }

/* ---- sizes of packed arrays (the packed model file) -------------------- */

int hm_packed_sizes_for(int N, int K, int isa, int prec, int lp_kind, hm_packed_sizes *s) {
    memset(s, 0, sizeof *s);
    if (N < 1 || K < 1) return hm_err(HM_E_ARG, "packed matrix of %d x %d", N, K);
    if (prec == HM_PREC_FAST) return hm_lowp_sizes(lp_kind, N, K, &s->lp, &s->lp_scale, &s->bias);
    if (prec != HM_PREC_FP32 || isa < HM_ISA_SCALAR || isa > HM_ISA_AVX512)
        return hm_err(HM_E_ARG, "packed matrix with precision %d, ISA %d", prec, isa);
    size_t nr = (size_t)hm_nr(isa), np = ((size_t)N + nr - 1) / nr;
    s->w = np * nr * (size_t)K * sizeof(float);
    s->bias = np * nr * sizeof(float);
    return HM_OK;
}
