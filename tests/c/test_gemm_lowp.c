/* test_gemm_lowp.c - the low-precision ("fast") hm_gemm against float64
 * references: the ViT-H shapes with realistic activations (Gaussian
 * LayerNorm-like rows with a few x20 channels, post-GELU rows), odd shapes
 * and padding, every epilogue, NULL / 1 / 2 / 3-thread pools (bit-identical),
 * concurrent callers, the int8 default, the bf16 variant and the packing of
 * sensitive matmuls, and the refusal paths (no VNNI, forced narrower ISA,
 * bad arguments).
 *
 * Error measure: e = RMS(C - ref) / RMS(A.W^T), over the whole output (ref
 * includes bias, GELU and the accumulated C0; the normaliser is the matmul
 * alone, so bias and C0 cannot hide errors). Also reported: the largest
 * single |C - ref| in the same units.
 * Bounds, int8 (per-channel s8 weights, per-token u8 activations): a
 * uniform grid of step h adds noise of RMS h / sqrt 12. For Gaussian
 * weights the s8 grid step is 2 max|W_n| / 254 with max ~3.3-3.9 sigma over
 * K = 1280-5120, i.e. 0.75-0.9% of sigma; the u8 activation grid has step
 * (max - min) / 255 ~ 6.6-7.8 sigma / 255, again ~0.75-0.9%. Independent
 * errors add in quadrature: ~1.1-1.3% expected on the products (~0.6% for
 * uniform data, whose max is only sqrt 3 sigma). The bound 2e-2 sits above
 * that with margin while any real defect (a wrong zero point, a lost
 * outlier, a misplaced panel column) costs several %: plain per-token
 * int8 without the outlier split measures 3.5-4% RMS (max 0.3) on the x20
 * rows below, and 1.0-1.1% with it. Max: 1.2e-1
 * (5-6 sigma of the ~1.2% error over ~10^6 outputs, plus rows whose grid is
 * set by an extreme value).
 * bf16: both operands rounded to 8 significant bits (unit roundoff 2^-8):
 * ~0.15% relative RMS each, ~0.22% together (measured 0.23%); bounds
 * 4e-3 RMS, 3e-2 max.
 */
#define _POSIX_C_SOURCE 200809L
#include <math.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "kernels/gemm.h"
#include "kernels/gemm_lowp.h"
#include "core/cpu.h"
#include "core/pool.h"
#include "core/util.h"

static int n_pass, n_fail;

/* The architecture's names for the same things: the int8 feature (VNNI /
 * the dot product), the bf16 one, the fast precision's ISA level and a
 * narrower one to force, and what the refusals say. On AArch64 the int8
 * kernel is SMMLA where the CPU has i8mm, SDOT otherwise (test_sdot below
 * runs the other one too); bf16 is BFMMLA. */
#if defined(__aarch64__)
#define INT8_BIT HM_CPU_DOTPROD
#define BF16_BIT HM_CPU_ARM_BF16
#define WIDE_ISA HM_ISA_NEON
#define NARROW_ISA HM_ISA_SCALAR
#define INT8_WORD "dot product"
#define SCHEME_INT8 "int8-neon"
#else
#define INT8_BIT HM_CPU_VNNI
#define BF16_BIT HM_CPU_BF16
#define WIDE_ISA HM_ISA_AVX512
#define NARROW_ISA HM_ISA_AVX2
#define INT8_WORD "VNNI"
#define SCHEME_INT8 "int8-vnni"
#endif

#define CHECK(cond, ...)                                  \
    do {                                                  \
        if (cond) {                                       \
            n_pass++;                                     \
        } else {                                          \
            n_fail++;                                     \
            printf("FAIL %s:%d: ", __FILE__, __LINE__);   \
            printf(__VA_ARGS__);                          \
            printf("\n");                                 \
        }                                                 \
    } while (0)

static uint64_t rng = 0x9E3779B97F4A7C15ull;

static double urand(void) { /* (0, 1) */
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return ((double)(rng >> 11) + 0.5) / 9007199254740992.0;
}
static double gauss(void) { return sqrt(-2.0 * log(urand())) * cos(6.283185307179586 * urand()); }
static double gelu_ref(double x) { return 0.5 * x * (1.0 + erf(x / sqrt(2.0))); }

static void *xalloc(size_t bytes) {
    void *p = hm_alloc(bytes);
    if (!p) {
        printf("out of memory\n");
        exit(2);
    }
    return p;
}

/* Activation patterns. */
enum {
    ACT_UNIFORM,  /* U(-1, 1) */
    ACT_LN,       /* N(0, 1) rows (LayerNorm output), 4 channels x20 */
    ACT_LN_PLAIN, /* N(0, 1) rows, no outlier channels */
    ACT_GELU,     /* GELU(N(0, 1)), a few pre-GELU channels x20 (fc2 input) */
    ACT_MANY,     /* N(0, 1) with 80 channels x20: more than the per-row cap */
};

static void fill_act(float *A, int M, int K, int lda, int kind) {
    for (int i = 0; i < M; i++)
        for (int k = 0; k < lda; k++) {
            float *a = &A[(size_t)i * lda + k];
            if (k >= K) { /* padding is NaN: reading past K poisons the output */
                *a = NAN;
                continue;
            }
            double g = kind == ACT_UNIFORM ? 2.0 * urand() - 1.0 : gauss();
            int hot = (kind == ACT_LN || kind == ACT_GELU) ? (k % 331 == 17) : kind == ACT_MANY ? (k % 16 == 3) : 0;
            if (hot) g *= 20.0;
            *a = (float)(kind == ACT_GELU ? gelu_ref(g) : g);
        }
}

static const char *act_name(int kind) {
    static const char *n[] = {"uniform", "ln+x20", "ln", "gelu+x20", "ln+80 x20"};
    return n[kind];
}

/* ref[i, n] = sum_k A[i,k] W[n,k] in float64 (four partial sums for speed;
 * the order does not matter at float64 against errors of 1e-2). */
static void ref_product(const float *A, int lda, const float *W, int ldw, int M, int N, int K, double *D) {
    for (int i = 0; i < M; i++) {
        const float *a = A + (size_t)i * lda;
        for (int n = 0; n < N; n++) {
            const float *w = W + (size_t)n * ldw;
            double s0 = 0, s1 = 0, s2 = 0, s3 = 0;
            int k = 0;
            for (; k + 4 <= K; k += 4) {
                s0 += (double)a[k] * w[k];
                s1 += (double)a[k + 1] * w[k + 1];
                s2 += (double)a[k + 2] * w[k + 2];
                s3 += (double)a[k + 3] * w[k + 3];
            }
            for (; k < K; k++) s0 += (double)a[k] * w[k];
            D[(size_t)i * N + n] = (s0 + s1) + (s2 + s3);
        }
    }
}

typedef struct {
    int M, N, K, lpad, cpad, act, withb;
} tcase;

typedef struct {
    double rms, max; /* worst over the epilogues */
} errs;

static hm_pool *pools[4]; /* NULL, 1, 2, 3 threads */
static int pack_sensitive;  /* run_case packs with hm_pack_weights_fast_sensitive */
static int pack_fast_bf16;  /* run_case packs with hm_pack_weights_fast_bf16 */

/* Run one case under the active lowp kind; returns the worst errors. */
static errs run_case(const tcase *t, double bound_rms, double bound_max, const char *tag) {
    int M = t->M, N = t->N, K = t->K, lda = K + t->lpad, ldc = N + t->cpad;
    float *A = xalloc((size_t)M * lda * sizeof(float)), *W = xalloc((size_t)N * lda * sizeof(float));
    float *b = xalloc((size_t)N * sizeof(float));
    float *C0 = xalloc((size_t)M * ldc * sizeof(float)), *C = xalloc((size_t)M * ldc * sizeof(float));
    float *Cfirst = xalloc((size_t)M * ldc * sizeof(float));
    double *D = xalloc((size_t)M * N * sizeof(double));
    errs out = {0, 0};
    fill_act(A, M, K, lda, t->act);
    /* Weights ~ N(0, 1/K) like a trained Linear; NaN past K. */
    for (int n = 0; n < N; n++)
        for (int k = 0; k < lda; k++)
            W[(size_t)n * lda + k] = k < K ? (float)(gauss() / sqrt((double)K)) : NAN;
    for (int n = 0; n < N; n++) b[n] = (float)(0.5 * gauss());
    for (size_t i = 0; i < (size_t)M * ldc; i++) C0[i] = (float)gauss();
    ref_product(A, lda, W, lda, M, N, K, D);
    double norm = 0;
    for (size_t i = 0; i < (size_t)M * N; i++) norm += D[i] * D[i];
    norm = sqrt(norm / ((double)M * N)) + 1e-30;

    hm_packed P;
    int rc = pack_sensitive   ? hm_pack_weights_fast_sensitive(&P, W, lda, t->withb ? b : NULL, N, K)
             : pack_fast_bf16 ? hm_pack_weights_fast_bf16(&P, W, lda, t->withb ? b : NULL, N, K)
                            : hm_pack_weights_prec(&P, W, lda, t->withb ? b : NULL, N, K, HM_PREC_FAST);
    CHECK(rc == HM_OK && (P.prec == HM_PREC_FAST || pack_sensitive || pack_fast_bf16), "%s pack M=%d N=%d K=%d: rc=%d %s", tag, M,
          N, K, rc, hm_errmsg());
    if (rc == HM_OK) {
        for (int epi = HM_EPI_STORE; epi <= HM_EPI_ACCUM; epi++) {
            int same = 1;
            for (int pi = 0; pi < 4; pi++) {
                memcpy(C, C0, (size_t)M * ldc * sizeof(float));
                hm_gemm(pools[pi], M, A, lda, &P, C, ldc, (hm_epilogue)epi);
                if (pi > 0) {
                    same &= memcmp(C, Cfirst, (size_t)M * ldc * sizeof(float)) == 0;
                    continue;
                }
                double se = 0, mx = 0;
                int pad_ok = 1;
                for (int i = 0; i < M; i++) {
                    for (int n = 0; n < N; n++) {
                        double r = D[(size_t)i * N + n] + (t->withb ? b[n] : 0.0);
                        if (epi == HM_EPI_GELU) r = gelu_ref(r);
                        if (epi == HM_EPI_ACCUM) r += C0[(size_t)i * ldc + n];
                        double e = fabs(C[(size_t)i * ldc + n] - r);
                        if (e != e) e = INFINITY; /* NaN counts as failure */
                        se += e * e;
                        mx = e > mx ? e : mx;
                    }
                    for (int n = N; n < ldc; n++) pad_ok &= C[(size_t)i * ldc + n] == C0[(size_t)i * ldc + n];
                }
                double rms = sqrt(se / ((double)M * N)) / norm;
                mx /= norm;
                out.rms = fmax(out.rms, rms);
                out.max = fmax(out.max, mx);
                CHECK(rms < bound_rms && mx < bound_max,
                      "%s %s M=%d N=%d K=%d lda=%d ldc=%d bias=%d epi=%d: rms %.3g (bound %.3g) max %.3g (bound %.3g)",
                      tag, act_name(t->act), M, N, K, lda, ldc, t->withb, epi, rms, bound_rms, mx, bound_max);
                CHECK(pad_ok, "%s M=%d N=%d K=%d: wrote into the ldc padding", tag, M, N, K);
                memcpy(Cfirst, C, (size_t)M * ldc * sizeof(float));
            }
            CHECK(same, "%s M=%d N=%d K=%d epi=%d: results differ between NULL/1/2/3-thread pools", tag, M, N, K,
                  epi);
        }
        hm_packed_free(&P);
        CHECK(P.lp == NULL && P.lp_scale == NULL && P.bias == NULL, "hm_packed_free must clear the packing");
    }
    hm_free(A), hm_free(W), hm_free(b), hm_free(C0), hm_free(C), hm_free(Cfirst), hm_free(D);
    return out;
}

static void test_shapes(const char *tag, double bound_rms, double bound_max) {
    /* The four ViT-H matmuls (qkv, proj, fc1, fc2) with their inputs'
     * statistics, then the tile / panel / k-group edges (MR 6 or 12, NR 64
     * or 32, K groups of 4 or 2), several M blocks (MC = 192), padding. */
    static const tcase real[] = {
        {192, 3840, 1280, 0, 0, ACT_LN, 1},
        {192, 1280, 1280, 0, 0, ACT_LN_PLAIN, 1},
        {192, 5120, 1280, 0, 0, ACT_LN, 1},
        {192, 1280, 5120, 0, 0, ACT_GELU, 1},
    };
    static const char *real_name[] = {"qkv", "proj", "fc1", "fc2"};
    for (size_t i = 0; i < sizeof real / sizeof real[0]; i++) {
        errs e = run_case(&real[i], bound_rms, bound_max, tag);
        printf("%s %-4s [%d,%d]x[%d,%d] %-9s rms err %.4f  max err %.4f\n", tag, real_name[i], real[i].M,
               real[i].K, real[i].K, real[i].N, act_name(real[i].act), e.rms, e.max);
    }
    static const tcase odd[] = {
        {1, 1, 1, 0, 0, ACT_UNIFORM, 1},      {2, 3, 7, 1, 2, ACT_UNIFORM, 0},
        {5, 17, 80, 0, 0, ACT_LN, 1},        {7, 63, 5, 3, 1, ACT_UNIFORM, 1},
        {13, 65, 130, 2, 3, ACT_GELU, 1},    {193, 100, 1283, 1, 0, ACT_LN, 1},
        {400, 40, 300, 0, 5, ACT_LN, 0},     {12, 31, 512, 0, 0, ACT_UNIFORM, 1},
        {6, 64, 4, 0, 0, ACT_UNIFORM, 1},    {11, 129, 6, 0, 0, ACT_UNIFORM, 1},
        {37, 200, 1280, 0, 0, ACT_MANY, 1},
    };
    double wr = 0, wm = 0;
    for (size_t i = 0; i < sizeof odd / sizeof odd[0]; i++) {
        /* Tiny K: the grid of a handful of values has no averaging, so only
         * the per-element bound applies (RMS over a few terms == max). */
        double br = odd[i].K < 16 ? bound_max : bound_rms;
        errs e = run_case(&odd[i], br, bound_max, tag);
        if (odd[i].K >= 16) wr = fmax(wr, e.rms);
        wm = fmax(wm, e.max);
    }
    printf("%s odd shapes: worst rms err %.4f (K >= 16), worst max err %.4f\n", tag, wr, wm);
}

/* The outlier split must make x20 channels (nearly) free, and rows that are
 * exactly representable must come out exactly. */
static void test_outliers(void) {
    tcase with = {192, 1280, 1280, 0, 0, ACT_LN, 0}, without = {192, 1280, 1280, 0, 0, ACT_LN_PLAIN, 0};
    errs ew = run_case(&with, 2e-2, 1.2e-1, "int8"), eo = run_case(&without, 2e-2, 1.2e-1, "int8");
    printf("int8 x20 channels: rms err %.4f vs %.4f without them\n", ew.rms, eo.rms);
    CHECK(ew.rms < 1.5 * eo.rms, "x20 channels cost too much: rms %.4f vs %.4f", ew.rms, eo.rms);

    /* Rows: all zero; constant 3; negative ramp; one huge value among zeros;
     * every value huge except one. */
    enum { M = 5, N = 70, K = 37 };
    float A[M * K], W[N * K], b[N], C[M * N];
    for (int n = 0; n < N; n++) {
        b[n] = (float)n;
        for (int k = 0; k < K; k++) W[n * K + k] = (float)((n * 7 + k * 3) % 11 - 5) / 5.0f;
    }
    for (int k = 0; k < K; k++) {
        A[0 * K + k] = 0.0f;
        A[1 * K + k] = 3.0f;
        A[2 * K + k] = -(float)k / 36.0f;
        A[3 * K + k] = k == 20 ? 1.0e4f : 0.0f;
        A[4 * K + k] = k == 5 ? 0.5f : 1.0e3f;
    }
    hm_packed P;
    int rc = hm_pack_weights_prec(&P, W, K, b, N, K, HM_PREC_FAST);
    CHECK(rc == HM_OK, "pack special rows: %s", hm_errmsg());
    if (rc != HM_OK) return;
    hm_gemm(pools[2], M, A, K, &P, C, N, HM_EPI_STORE);
    int zero_ok = 1;
    double worst[M] = {0};
    for (int n = 0; n < N; n++) {
        zero_ok &= C[n] == b[n];
        double wmax = 0;
        for (int k = 0; k < K; k++) wmax = fmax(wmax, fabs(W[n * K + k]));
        for (int i = 1; i < M; i++) {
            double r = b[n], s = 0;
            for (int k = 0; k < K; k++) {
                r += (double)A[i * K + k] * W[n * K + k];
                s += fabs((double)A[i * K + k]) * wmax;
            }
            worst[i] = fmax(worst[i], fabs(C[i * N + n] - r) / s);
        }
    }
    CHECK(zero_ok, "an all-zero row must give exactly the bias");
    /* In units of sum_k |A_k| max|W_n|: weight rounding costs at most
     * 1/254. Rows 1 and 3 are exact on the activation side (constant row:
     * q = 255; one outlier among zeros: fp32), so 1/254 (+ float rounding)
     * bounds them; the others add at most K range / 510 / sum|A| < 1/254. */
    CHECK(worst[1] < 4.5e-3 && worst[3] < 4.5e-3, "exact rows: err %.3g %.3g", worst[1], worst[3]);
    CHECK(worst[2] < 1e-2 && worst[4] < 1e-2, "ramp / mostly-huge rows: err %.3g %.3g", worst[2], worst[4]);
    printf("int8 special rows: err (units of sum|A| max|W|) const %.2g ramp %.2g one-huge %.2g mostly-huge %.2g\n",
           worst[1], worst[2], worst[3], worst[4]);
    hm_packed_free(&P);
}

/* ---- concurrent callers ------------------------------------------------ */

/* Each calling thread quantises into its own scratch: threads that call
 * hm_gemm at the same time (with growing M, so the scratch is reallocated
 * under way) must get exactly the serial results. */
enum { CC_THREADS = 3, CC_M = 96, CC_N = 70, CC_K = 300 };
static hm_packed cc_P;
static float *cc_A, *cc_ref;

static void *cc_worker(void *arg) {
    int id = (int)(intptr_t)arg, ok = 1;
    float *C = malloc((size_t)CC_M * CC_N * sizeof(float));
    if (!C) return (void *)0;
    for (int it = 0; it < 12; it++) {
        int m = 1 + (it * 8 + id * 3) % CC_M; /* varies, grows and shrinks */
        hm_gemm(NULL, m, cc_A, CC_K, &cc_P, C, CC_N, HM_EPI_STORE);
        ok &= memcmp(C, cc_ref, (size_t)m * CC_N * sizeof(float)) == 0;
    }
    free(C);
    return (void *)(intptr_t)ok;
}

static void test_concurrent_callers(void) {
    cc_A = xalloc((size_t)CC_M * CC_K * sizeof(float));
    cc_ref = xalloc((size_t)CC_M * CC_N * sizeof(float));
    float *W = xalloc((size_t)CC_N * CC_K * sizeof(float));
    fill_act(cc_A, CC_M, CC_K, CC_K, ACT_LN);
    for (size_t i = 0; i < (size_t)CC_N * CC_K; i++) W[i] = (float)gauss();
    int rc = hm_pack_weights_prec(&cc_P, W, CC_K, NULL, CC_N, CC_K, HM_PREC_FAST);
    CHECK(rc == HM_OK, "pack: %s", hm_errmsg());
    if (rc == HM_OK) {
        hm_gemm(NULL, CC_M, cc_A, CC_K, &cc_P, cc_ref, CC_N, HM_EPI_STORE);
        pthread_t th[CC_THREADS];
        int started = 0, all_ok = 1;
        for (int i = 0; i < CC_THREADS; i++)
            if (pthread_create(&th[i], NULL, cc_worker, (void *)(intptr_t)i) == 0) started++;
        for (int i = 0; i < started; i++) {
            void *r = NULL;
            pthread_join(th[i], &r);
            all_ok &= r != NULL;
        }
        CHECK(started == CC_THREADS && all_ok, "concurrent callers: %d threads started, results %s", started,
              all_ok ? "identical" : "DIFFER");
        hm_packed_free(&cc_P);
    }
    hm_free(cc_A), hm_free(cc_ref), hm_free(W);
}

/* ---- sensitive matmuls ------------------------------------------------- */

/* hm_pack_weights_fast_sensitive: on x86 int8 with fine weights
 * (HM_LOWP_INT8F: without centering its product is plain int8's, so
 * int8's bounds; the centred product is tests/c/test_gemm_ex.c's), with or
 * without BF16, and bf16 in a bf16 model; on AArch64 bf16 where the CPU has
 * it, else fp32 (then exact to fp32 rounding). Refused exactly when FAST
 * is. hm_pack_weights_fast_bf16 (the decoder's one-token matmuls): bf16
 * with BF16 (bf16 bounds on a decoder shape, 3 rows), fp32 without. */
static void test_sensitive(int have_vnni, int have_bf16) {
    float w[8] = {1, 2, 3, 4, 5, 6, 7, 8};
    hm_packed P;
#if defined(__aarch64__)
    const int fine = 0;
#else
    const int fine = 1;
#endif
    if (have_vnni) {
        tcase proj = {192, 1280, 1280, 0, 0, ACT_LN_PLAIN, 1}, odd = {13, 65, 130, 2, 3, ACT_GELU, 1};
        pack_sensitive = 1;
        double bound = fine ? 2e-2 : have_bf16 ? 4e-3 : 1e-5, bmax = fine ? 1.2e-1 : 10 * bound;
        errs e = run_case(&proj, bound, bmax, "sensitive");
        run_case(&odd, bound, bmax, "sensitive");
        pack_sensitive = 0;
        printf("sensitive (%s) proj [192,1280]x[1280,1280]: rms err %.4f  max err %.4f\n",
               fine ? "int8f" : have_bf16 ? "bf16" : "fp32", e.rms, e.max);
        const char *want = fine ? "proj: int8 centred" : have_bf16 ? "sensitive matmuls: bf16" : "sensitive matmuls: fp32";
        CHECK(strstr(hm_precision_scheme(HM_PREC_FAST), want) != NULL, "scheme '%s' must say '%s'",
              hm_precision_scheme(HM_PREC_FAST), want);
        int rc = hm_pack_weights_fast_sensitive(&P, w, 4, NULL, 2, 4);
        CHECK(rc == HM_OK && (fine ? hm_lowp_packed_kind(&P) == HM_LOWP_INT8F : P.prec == (have_bf16 ? HM_PREC_FAST : HM_PREC_FP32)),
              "sensitive pack: rc=%d prec=%d kind %d", rc, P.prec, hm_lowp_packed_kind(&P));
        hm_packed_free(&P);
        rc = hm_pack_weights_fast_bf16(&P, w, 4, NULL, 2, 4);
        CHECK(rc == HM_OK && P.prec == (have_bf16 ? HM_PREC_FAST : HM_PREC_FP32) &&
                  (!have_bf16 || hm_lowp_kind_is_bf16(hm_lowp_packed_kind(&P))),
              "fast_bf16 pack: rc=%d prec=%d", rc, P.prec);
        hm_packed_free(&P);
        tcase dec = {3, 1024, 1024, 0, 0, ACT_LN_PLAIN, 1};
        pack_fast_bf16 = 1;
        run_case(&dec, have_bf16 ? 4e-3 : 1e-5, have_bf16 ? 3e-2 : 1e-4, "fast_bf16");
        pack_fast_bf16 = 0;
    }
    if (have_vnni && have_bf16) {
        /* VNNI without BF16 (Ice Lake, Cascade Lake), simulated: the
         * sensitive matmuls as before on x86 (int8f needs no BF16), fp32 on
         * AArch64; the decoder's fp32. */
        hm_cpu_test_hide(BF16_BIT);
        if (!fine) {
            tcase proj = {37, 130, 300, 1, 1, ACT_LN, 1};
            pack_sensitive = 1;
            run_case(&proj, 1e-5, 1e-4, "sensitive-fp32");
            pack_sensitive = 0;
        }
        int rc = hm_pack_weights_fast_sensitive(&P, w, 4, NULL, 2, 4);
        CHECK(rc == HM_OK && (fine ? hm_lowp_packed_kind(&P) == HM_LOWP_INT8F : P.prec == HM_PREC_FP32 && P.w != NULL),
              "sensitive pack without BF16: %s", fine ? "int8f" : "fp32");
        hm_packed_free(&P);
        rc = hm_pack_weights_fast_bf16(&P, w, 4, NULL, 2, 4);
        CHECK(rc == HM_OK && P.prec == HM_PREC_FP32 && P.w, "fast_bf16 pack without BF16 must be fp32");
        hm_packed_free(&P);
        const char *want = fine ? "decoder: fp32" : "sensitive matmuls: fp32";
        CHECK(strstr(hm_precision_scheme(HM_PREC_FAST), want) != NULL, "scheme '%s'", hm_precision_scheme(HM_PREC_FAST));
        rc = hm_pack_weights_prec(&P, w, 4, NULL, 2, 4, HM_PREC_FAST);
        CHECK(rc == HM_OK && P.prec == HM_PREC_FAST, "int8 FAST needs no BF16");
        hm_packed_free(&P);
        hm_cpu_test_hide(0);
        if (fine) {
            CHECK(strstr(hm_precision_scheme(HM_PREC_FAST), "decoder: bf16") != NULL, "scheme '%s'",
                  hm_precision_scheme(HM_PREC_FAST));
            /* A bf16 model's sensitive matmuls are bf16. */
            hm_lowp_force_kind(HM_LOWP_BF16);
            rc = hm_pack_weights_fast_sensitive(&P, w, 4, NULL, 2, 4);
            CHECK(rc == HM_OK && hm_lowp_packed_kind(&P) == HM_LOWP_BF16, "sensitive pack in a bf16 model: bf16");
            hm_packed_free(&P);
            hm_lowp_force_kind(HM_LOWP_INT8);
            CHECK(hm_lowp_force_kind(HM_LOWP_INT8F) == HM_E_ARG, "int8f is no model variant");
        }
    }
    hm_cpu_test_hide(INT8_BIT);
    int rc = hm_pack_weights_fast_sensitive(&P, w, 4, NULL, 2, 4);
    CHECK(rc == HM_E_UNSUPPORTED && P.lp == NULL && P.w == NULL,
          "sensitive pack without VNNI must be refused like FAST (rc=%d)", rc);
    hm_cpu_test_hide(0);
    CHECK(hm_pack_weights_fast_sensitive(&P, w, 3, NULL, 2, 4) == HM_E_ARG, "sensitive: ldw<K must be rejected");
    CHECK(hm_pack_weights_fast_sensitive(NULL, w, 4, NULL, 2, 4) == HM_E_ARG, "sensitive: NULL output");
}

/* ---- refusal paths ----------------------------------------------------- */

/* Child process with HAMER_LOWP=val (read once, so this must run before
 * the parent touches the module): exit 0 if FAST packs and the scheme name
 * starts with want, 1 if the pack fails with HM_E_UNSUPPORTED naming
 * HAMER_LOWP, 3 if it fails as unsupported by the CPU, 2 otherwise. */
static int child_lowp_env(const char *val, const char *want) {
    fflush(stdout);
    pid_t pid = fork();
    if (pid == 0) {
        setenv("HAMER_LOWP", val, 1);
        float w[4] = {1, 2, 3, 4};
        hm_packed P;
        int rc = hm_pack_weights_prec(&P, w, 2, NULL, 2, 2, HM_PREC_FAST);
        if (rc == HM_OK) _exit(strncmp(hm_precision_scheme(HM_PREC_FAST), want, strlen(want)) == 0 ? 0 : 2);
        if (rc == HM_E_UNSUPPORTED) _exit(strstr(hm_errmsg(), "HAMER_LOWP") ? 1 : 3);
        _exit(2);
    }
    int st = 0;
    if (pid < 0 || waitpid(pid, &st, 0) != pid || !WIFEXITED(st)) return -1;
    return WEXITSTATUS(st);
}

static void test_refusals(int have_vnni, int have_bf16) {
    float w[8] = {1, 2, 3, 4, 5, 6, 7, 8};
    hm_packed P;
    /* No VNNI (simulated): an explicit error, never a silent fp32 packing. */
    hm_cpu_test_hide(INT8_BIT | BF16_BIT | HM_CPU_I8MM);
    hm_errclear();
    memset(&P, 0x55, sizeof P);
    int rc = hm_pack_weights_prec(&P, w, 4, NULL, 2, 4, HM_PREC_FAST);
    CHECK(rc == HM_E_UNSUPPORTED && strstr(hm_errmsg(), INT8_WORD) && P.lp == NULL && P.w == NULL,
          "FAST without VNNI: rc=%d msg='%s'", rc, hm_errmsg());
    CHECK(!strcmp(hm_precision_scheme(HM_PREC_FAST), "unavailable"), "scheme without VNNI: '%s'",
          hm_precision_scheme(HM_PREC_FAST));
    rc = hm_pack_weights_prec(&P, w, 4, NULL, 2, 4, HM_PREC_FP32);
    CHECK(rc == HM_OK && P.prec == HM_PREC_FP32 && P.w, "FP32 must still pack without VNNI");
    hm_packed_free(&P);
    hm_cpu_test_hide(0);

    if (have_vnni) {
        /* A forced narrower ISA is honoured. */
        CHECK(hm_isa_force(NARROW_ISA) == HM_OK, "force a narrower ISA");
        rc = hm_pack_weights_prec(&P, w, 4, NULL, 2, 4, HM_PREC_FAST);
        CHECK(rc == HM_E_UNSUPPORTED && strstr(hm_errmsg(), hm_isa_name(NARROW_ISA)), "FAST under forced %s: rc=%d '%s'",
              hm_isa_name(NARROW_ISA), rc, hm_errmsg());
        CHECK(hm_isa_force(WIDE_ISA) == HM_OK, "restore the widest ISA");
        CHECK(!strncmp(hm_precision_scheme(HM_PREC_FAST), SCHEME_INT8, 9), "scheme: '%s'",
              hm_precision_scheme(HM_PREC_FAST));
    } else {
        rc = hm_pack_weights_prec(&P, w, 4, NULL, 2, 4, HM_PREC_FAST);
        CHECK(rc == HM_E_UNSUPPORTED, "this CPU lacks VNNI: FAST must be refused (rc=%d)", rc);
    }
    CHECK(!strcmp(hm_precision_scheme(HM_PREC_FP32), "fp32"), "fp32 scheme name");
    CHECK(hm_pack_weights_prec(&P, w, 4, NULL, 0, 4, HM_PREC_FAST) == HM_E_ARG, "N=0 must be rejected");
    CHECK(hm_pack_weights_prec(&P, w, 3, NULL, 2, 4, HM_PREC_FAST) == HM_E_ARG, "ldw<K must be rejected");
    CHECK(hm_pack_weights_prec(&P, w, 4, NULL, 2, 4, (hm_precision)7) == HM_E_ARG, "unknown precision");
    CHECK(hm_lowp_force_kind((hm_lowp_kind)9) == HM_E_ARG, "unknown lowp kind");
    if (have_vnni) {
        float bad[4] = {1, NAN, 3, 4};
        CHECK(hm_pack_weights_prec(&P, bad, 2, NULL, 2, 2, HM_PREC_FAST) == HM_E_ARG && P.lp == NULL,
              "non-finite weights must be rejected, not quantised");
        CHECK(hm_pack_weights_prec(&P, w, 4, NULL, 2, 4, HM_PREC_FAST) == HM_OK, "pack");
        float A[4] = {1, 1, 1, 1}, C[2] = {7, 7};
        hm_errclear();
        hm_gemm(NULL, 0, A, 4, &P, C, 2, HM_EPI_STORE);
        CHECK(hm_errmsg()[0] && C[0] == 7 && C[1] == 7, "M=0 must be an error that leaves C alone");
        hm_gemm(NULL, 1, A, 4, &P, C, 2, HM_EPI_STORE);
        CHECK(fabsf(C[0] - 10) < 0.1f && fabsf(C[1] - 26) < 0.2f, "tiny gemm: %g %g", C[0], C[1]);
        /* Non-finite activations poison their row, as in fp32. */
        float An[8] = {1, INFINITY, 1, 1, 1, 1, 1, 1};
        float Cn[4];
        hm_gemm(NULL, 2, An, 4, &P, Cn, 2, HM_EPI_STORE);
        CHECK(isnan(Cn[0]) && isnan(Cn[1]) && fabsf(Cn[2] - 10) < 0.1f && fabsf(Cn[3] - 26) < 0.2f,
              "inf in a row: %g %g, clean row: %g %g", Cn[0], Cn[1], Cn[2], Cn[3]);
        An[1] = NAN;
        hm_gemm(NULL, 2, An, 4, &P, Cn, 2, HM_EPI_STORE);
        CHECK(isnan(Cn[0]) && isnan(Cn[1]), "NaN in a row: %g %g", Cn[0], Cn[1]);
        hm_packed_free(&P);
    }
}

#if defined(__x86_64__)
/* ---- AMX against VNNI and an int64 reference --------------------------- */

/* Raw int32 sums of the AMX kernel against int64 sums of the same bytes:
 * row counts around the 16-row tiles, K around the 64-k tile step, the
 * extreme byte values (255 x -128, the largest products) and random ones. */
static void test_amx_sums(void) {
    static const int ms[] = {1, 5, 15, 16, 17, 31, 32};
    static const int kps[] = {4, 8, 60, 64, 68, 124, 132, 1284, 5120};
    int bad = 0, cases = 0;
    for (size_t a = 0; a < sizeof kps / sizeof kps[0]; a++) {
        int Kp = kps[a];
        size_t lda = (size_t)Kp + 64 + 4; /* not a multiple of 64: tile loads take any stride */
        uint8_t *A = xalloc(32 * lda);
        int8_t *P = xalloc((size_t)Kp * HM_LOWP_I8_NR);
        int32_t *S = xalloc(32 * HM_LOWP_I8_NR * sizeof(int32_t));
        for (int pat = 0; pat < 2; pat++) {
            for (size_t i = 0; i < 32 * lda; i++) A[i] = pat ? 255 : (uint8_t)(urand() * 256);
            for (size_t i = 0; i < (size_t)Kp * HM_LOWP_I8_NR; i++)
                P[i] = pat ? (int8_t)(i % 3 == 0 ? -128 : -127) : (int8_t)((int)(urand() * 256) - 128);
            for (size_t b = 0; b < sizeof ms / sizeof ms[0]; b++) {
                int m = ms[b];
                memset(S, 0x5a, 32 * HM_LOWP_I8_NR * sizeof(int32_t));
                hm_lowp_i8_sums_amx(m, Kp, A, lda, P, S);
                cases++;
                for (int i = 0; i < m; i++)
                    for (int n = 0; n < HM_LOWP_I8_NR; n++) {
                        int64_t r = 0;
                        for (int k = 0; k < Kp; k++)
                            r += (int64_t)A[(size_t)i * lda + k] *
                                 P[(size_t)(k >> 2) * HM_LOWP_I8_NR * 4 + (size_t)n * 4 + (k & 3)];
                        if (r != S[(size_t)i * HM_LOWP_I8_NR + n] && bad++ < 5)
                            printf("amx sums m=%d Kp=%d pat=%d [%d,%d]: %lld, int64 %lld\n", m, Kp, pat, i, n,
                                   (long long)S[(size_t)i * HM_LOWP_I8_NR + n], (long long)r);
                    }
            }
        }
        hm_free(A), hm_free(P), hm_free(S);
    }
    CHECK(bad == 0, "AMX int32 sums differ from the int64 reference in %d places", bad);
    printf("amx: raw sums of %d (m, K, pattern) cases equal the int64 reference\n", cases);
}

/* hm_gemm with AMX and with VNNI: bit-identical outputs for every shape,
 * epilogue and pool (the odd shapes miss every tile size: M vs 16 / 32, N vs
 * 16 / 64, K vs 4 / 64). */
static void test_amx_vs_vnni(void) {
    static const tcase cs[] = {
        {1, 1, 1, 0, 0, ACT_UNIFORM, 1},    {2, 3, 7, 1, 2, ACT_UNIFORM, 0},   {5, 17, 80, 0, 0, ACT_LN, 1},
        {7, 63, 5, 3, 1, ACT_UNIFORM, 1},   {13, 65, 130, 2, 3, ACT_GELU, 1}, {17, 33, 65, 0, 0, ACT_LN, 1},
        {31, 64, 64, 0, 0, ACT_LN, 0},      {33, 100, 1283, 1, 0, ACT_MANY, 1}, {193, 100, 1283, 1, 0, ACT_LN, 1},
        {400, 40, 300, 0, 5, ACT_LN, 0},    {37, 200, 1280, 0, 0, ACT_MANY, 1},
        {192, 1280, 5120, 0, 0, ACT_GELU, 1}, {192, 3840, 1280, 0, 0, ACT_LN, 1},
    };
    int diff = 0, runs = 0;
    for (size_t c = 0; c < sizeof cs / sizeof cs[0]; c++) {
        const tcase *t = &cs[c];
        int M = t->M, N = t->N, K = t->K, lda = K + t->lpad, ldc = N + t->cpad;
        float *A = xalloc((size_t)M * lda * sizeof(float)), *W = xalloc((size_t)N * lda * sizeof(float));
        float *b = xalloc((size_t)N * sizeof(float)), *C0 = xalloc((size_t)M * ldc * sizeof(float));
        float *Cv = xalloc((size_t)M * ldc * sizeof(float)), *Ca = xalloc((size_t)M * ldc * sizeof(float));
        fill_act(A, M, K, lda, t->act);
        for (size_t i = 0; i < (size_t)N * lda; i++) W[i] = (float)(gauss() / sqrt((double)K));
        for (int n = 0; n < N; n++) b[n] = (float)(0.5 * gauss());
        for (size_t i = 0; i < (size_t)M * ldc; i++) C0[i] = (float)gauss();
        hm_packed P;
        CHECK(hm_pack_weights_prec(&P, W, lda, t->withb ? b : NULL, N, K, HM_PREC_FAST) == HM_OK, "pack: %s",
              hm_errmsg());
        for (int epi = HM_EPI_STORE; epi <= HM_EPI_ACCUM; epi++)
            for (int pi = 0; pi < 4; pi++) {
                memcpy(Cv, C0, (size_t)M * ldc * sizeof(float));
                memcpy(Ca, C0, (size_t)M * ldc * sizeof(float));
                hm_amx_force(0);
                CHECK(!hm_amx_active(), "hm_amx_force(0) must select VNNI");
                hm_gemm(pools[pi], M, A, lda, &P, Cv, ldc, (hm_epilogue)epi);
                hm_amx_force(1);
                CHECK(hm_amx_active(), "hm_amx_force(1) must select AMX");
                hm_gemm(pools[pi], M, A, lda, &P, Ca, ldc, (hm_epilogue)epi);
                runs++;
                if (memcmp(Cv, Ca, (size_t)M * ldc * sizeof(float)) && diff++ < 5)
                    printf("amx != vnni: M=%d N=%d K=%d epi=%d pool %d\n", M, N, K, epi, pi);
            }
        hm_packed_free(&P);
        hm_free(A), hm_free(W), hm_free(b), hm_free(C0), hm_free(Cv), hm_free(Ca);
    }
    CHECK(diff == 0, "AMX and VNNI outputs differ in %d of %d runs", diff, runs);
    printf("amx: %d hm_gemm runs (shapes x epilogues x pools) bit-identical to VNNI\n", runs);
}

/* bf16 on AMX tiles against the VNNI bf16 kernel: the same bf16 products
 * summed in fp32 in another order, so they agree to fp32 rounding of the
 * sums (bound 1e-5 of the output RMS), not bit for bit. */
static void test_amx_bf16(void) {
    if (!(hm_cpu_features() & HM_CPU_AMX_BF16) || !hm_lowp_amx_bf16_built()) {
        printf("amx-bf16: NOT TESTED - no AMX-BF16 here (or compiler); only the VNNI bf16 kernel ran\n");
        return;
    }
    static const tcase cs[] = {
        {1, 1, 1, 0, 0, ACT_UNIFORM, 1}, {7, 63, 5, 3, 1, ACT_UNIFORM, 1}, {17, 33, 65, 0, 0, ACT_LN, 1},
        {33, 100, 1283, 1, 0, ACT_MANY, 1}, {193, 1280, 1280, 0, 0, ACT_LN, 1},
    };
    hm_lowp_force_kind(HM_LOWP_BF16);
    double worst = 0;
    for (size_t c = 0; c < sizeof cs / sizeof cs[0]; c++) {
        const tcase *t = &cs[c];
        int M = t->M, N = t->N, K = t->K, lda = K + t->lpad, ldc = N + t->cpad;
        float *A = xalloc((size_t)M * lda * sizeof(float)), *W = xalloc((size_t)N * lda * sizeof(float));
        float *b = xalloc((size_t)N * sizeof(float)), *C0 = xalloc((size_t)M * ldc * sizeof(float));
        float *Cv = xalloc((size_t)M * ldc * sizeof(float)), *Ca = xalloc((size_t)M * ldc * sizeof(float));
        fill_act(A, M, K, lda, t->act);
        for (size_t i = 0; i < (size_t)N * lda; i++) W[i] = (float)(gauss() / sqrt((double)K));
        for (int n = 0; n < N; n++) b[n] = (float)(0.5 * gauss());
        for (size_t i = 0; i < (size_t)M * ldc; i++) C0[i] = (float)gauss();
        hm_packed P;
        CHECK(hm_pack_weights_prec(&P, W, lda, b, N, K, HM_PREC_FAST) == HM_OK, "bf16 pack: %s", hm_errmsg());
        for (int epi = HM_EPI_STORE; epi <= HM_EPI_ACCUM; epi++) {
            memcpy(Cv, C0, (size_t)M * ldc * sizeof(float));
            memcpy(Ca, C0, (size_t)M * ldc * sizeof(float));
            hm_amx_force(0);
            hm_gemm(pools[2], M, A, lda, &P, Cv, ldc, (hm_epilogue)epi);
            hm_amx_force(1);
            hm_gemm(pools[2], M, A, lda, &P, Ca, ldc, (hm_epilogue)epi);
            double se = 0, sd = 0;
            int pad_ok = 1;
            for (int i = 0; i < M; i++) {
                for (int n = 0; n < N; n++) {
                    double v = Cv[(size_t)i * ldc + n], d = Ca[(size_t)i * ldc + n] - v;
                    se += v * v, sd += d != d ? INFINITY : d * d;
                }
                for (int n = N; n < ldc; n++) pad_ok &= Ca[(size_t)i * ldc + n] == C0[(size_t)i * ldc + n];
            }
            double rel = sqrt(sd / (se + 1e-30));
            worst = fmax(worst, rel);
            CHECK(rel < 1e-5 && pad_ok, "amx-bf16 vs vnni-bf16 M=%d N=%d K=%d epi=%d: rel rms diff %.3g pad %d", M,
                  N, K, epi, rel, pad_ok);
        }
        hm_packed_free(&P);
        hm_free(A), hm_free(W), hm_free(b), hm_free(C0), hm_free(Cv), hm_free(Ca);
    }
    hm_lowp_force_kind(HM_LOWP_INT8);
    printf("amx-bf16: TESTED - AMX-BF16 path ran; worst relative RMS difference to VNNI bf16 %.2g\n", worst);
}

/* Child with HAMER_ISA=val (read once): exit 10 + hm_amx_active(), or 1 if
 * FAST packing is refused naming HAMER_ISA. */
static int child_isa_amx(const char *val) {
    fflush(stdout);
    pid_t pid = fork();
    if (pid == 0) {
        setenv("HAMER_ISA", val, 1);
        float w[4] = {1, 2, 3, 4};
        hm_packed P;
        int rc = hm_pack_weights_prec(&P, w, 2, NULL, 2, 2, HM_PREC_FAST);
        if (rc != HM_OK) _exit(strstr(hm_errmsg(), "HAMER_ISA") ? 1 : 2);
        _exit(10 + hm_amx_active());
    }
    int st = 0;
    if (pid < 0 || waitpid(pid, &st, 0) != pid || !WIFEXITED(st)) return -1;
    return WEXITSTATUS(st);
}

/* HAMER_ISA=amx / avx512 in children, forked before this process reads
 * HAMER_ISA (the parent's detection would otherwise be inherited). */
static int child_amx_r, child_avx512_r;

static void test_amx(int have_vnni) {
    int hw = (hm_cpu_features() & HM_CPU_AMX) != 0, built = hm_lowp_amx_built();
    printf("amx: cpu+os %s, kernel %s, default fast int8 kernel: %s\n", hw ? "yes" : "no",
           built ? "built" : "not built (compiler)", hm_amx_active() && built ? "amx" : "vnni");
    if (!hw) {
        CHECK(hm_amx_force(1) == HM_E_UNSUPPORTED && !hm_amx_active(), "forcing AMX without it must fail");
        int r = have_vnni ? child_amx_r : 1;
        CHECK(r == 1, "HAMER_ISA=amx without AMX must be refused (child said %d)", r);
    }
    if (!have_vnni || !hw || !built) {
        printf("amx: NOT TESTED - the AMX path did not run here (%s); only the VNNI path was tested\n",
               !have_vnni ? "no VNNI" : !hw ? "no AMX-INT8 tiles or no OS permission" : "compiler lacks AMX");
        return;
    }
    int r = child_amx_r;
    CHECK(r == 11, "HAMER_ISA=amx must select AMX (child said %d)", r);
    r = child_avx512_r;
    CHECK(r == 10, "HAMER_ISA=avx512 must select VNNI (child said %d)", r);
    hm_cpu_test_hide(HM_CPU_AMX);
    CHECK(!hm_amx_active(), "hidden AMX must not be used");
    hm_cpu_test_hide(0);
    /* Own random stream: the later tests' data (and their measured
     * errors) stay what they were without this one. */
    uint64_t saved = rng;
    test_amx_sums();
    test_amx_vs_vnni();
    test_amx_bf16();
    rng = saved;
    hm_amx_force(1);
    printf("amx: TESTED - AMX path ran\n");
}

#endif

/* Before anything else reads HAMER_LOWP in this process. */
static void test_env(void) {
    int r = child_lowp_env("bogus", "");
    CHECK(r == 1, "HAMER_LOWP=bogus must make FAST packing fail (child said %d)", r);
    r = child_lowp_env("int8", SCHEME_INT8);
    CHECK(r == 0 || r == 3, "HAMER_LOWP=int8 (child said %d)", r);
    r = child_lowp_env("bf16", "bf16");
    CHECK(r == 0 || r == 3, "HAMER_LOWP=bf16 (child said %d)", r);
}

int main(void) {
#if defined(__x86_64__)
    child_amx_r = child_isa_amx("amx");
    child_avx512_r = child_isa_amx("avx512");
#endif
    test_env();
    pools[0] = NULL;
    for (int i = 1; i < 4; i++)
        if (!(pools[i] = hm_pool_create(i))) {
            printf("pool: %s\n", hm_errmsg());
            return 1;
        }
    /* What this CPU offers, seen through the packing itself. */
    float w1[1] = {1};
    hm_packed P;
    int have_vnni = hm_pack_weights_prec(&P, w1, 1, NULL, 1, 1, HM_PREC_FAST) == HM_OK;
    hm_packed_free(&P);
    int have_bf16 = 0;
    if (hm_lowp_force_kind(HM_LOWP_BF16) == HM_OK) {
        have_bf16 = hm_pack_weights_prec(&P, w1, 1, NULL, 1, 1, HM_PREC_FAST) == HM_OK;
        hm_packed_free(&P);
    }
    hm_lowp_force_kind(HM_LOWP_INT8);
    printf("cpu isa %s; fast scheme: %s; bf16 variant %s\n", hm_isa_name(hm_cpu_isa()),
           hm_precision_scheme(HM_PREC_FAST), have_bf16 ? "available" : "unavailable");

    test_refusals(have_vnni, have_bf16);
#if defined(__x86_64__)
    test_amx(have_vnni);
#endif
    test_sensitive(have_vnni, have_bf16);
    if (have_vnni) {
        test_shapes("int8", 2e-2, 1.2e-1);
        test_outliers();
        test_concurrent_callers();
    } else {
        printf("int8: skipped (no AVX-512 VNNI on this CPU)\n");
    }
    if (have_bf16) {
        hm_lowp_force_kind(HM_LOWP_BF16);
        test_shapes("bf16", 4e-3, 3e-2);
        hm_lowp_force_kind(HM_LOWP_INT8);
    } else {
        printf("bf16: skipped (no AVX-512 BF16 on this CPU)\n");
    }
    for (int i = 1; i < 4; i++) hm_pool_destroy(pools[i]);
    printf("%d passed, %d failed\n", n_pass, n_fail);
    return n_fail ? 1 : 0;
}
