/* test_gemm.c - hm_gemm / hm_sgemm_* / hm_gelu against float64 references,
 * for every ISA this CPU can run (each forced in turn, weights re-packed).
 *
 * Tolerance: errors are divided by scale = sqrt(K) * max|A| * max|W|
 * (+ max|bias| + max|C0| where the epilogue adds them) and must stay below
 * 2e-6. Why: the kernels sum each K block of up to KC = 256 terms in one fp32
 * running sum and then add the block sums. With random-sign terms a running
 * sum of n terms has a rounding error of about 0.14 * 2^-24 * n * rms(term),
 * i.e. 0.14 * 2^-24 * sqrt(n) in these units; its maximum over ~10^5
 * outputs at n = 256 is ~8e-7 (what the test measures and prints). 2e-6
 * leaves headroom for that while any indexing, padding or epilogue bug
 * shows up as an error of order 0.1-1.
 */
#define _POSIX_C_SOURCE 200809L
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "kernels/gemm.h"
#include "kernels/gemm_fp32.h"
#include "kernels/vmath.h"
#include "kernels/kernels.h"
#include "core/pool.h"
#include "core/util.h"

#define TOL 2e-6

#include "check.h"
static double worst_gemm, worst_sgemm; /* largest err/scale seen, per ISA */


static uint64_t rng = 0x9E3779B97F4A7C15ull;

/* Uniform in [-1, 1). */
static float frand(void) {
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return (float)((double)(rng >> 40) / (double)(1ull << 23) - 1.0);
}

static float *falloc(size_t n) {
    float *p = hm_alloc(n * sizeof(float));
    if (!p) {
        printf("out of memory\n");
        exit(2);
    }
    return p;
}

static double gelu_ref(double x) { return 0.5 * x * (1.0 + erf(x / sqrt(2.0))); }

static double maxabs(const float *x, size_t n) {
    double m = 0;
    for (size_t i = 0; i < n; i++) m = fmax(m, fabs(x[i]));
    return m;
}

/* ---- packed GEMM ------------------------------------------------------- */

typedef struct {
    int M, N, K, lpad, cpad; /* lda = K + lpad (also ldw), ldc = N + cpad */
} shape;

/* One shape under the active ISA: both bias/NULL, all epilogues, NULL /
 * 1-thread / 2-thread pools; outputs must agree bit for bit across pools. */
static void check_shape(shape s, hm_pool *p1, hm_pool *p2) {
    int M = s.M, N = s.N, K = s.K, lda = K + s.lpad, ldc = N + s.cpad;
    const char *isa = hm_isa_name(hm_isa_active());
    float *A = falloc((size_t)M * lda), *W = falloc((size_t)N * lda), *b = falloc(N);
    float *C0 = falloc((size_t)M * ldc), *C = falloc((size_t)M * ldc), *Cfirst = falloc((size_t)M * ldc);
    double *D = malloc((size_t)M * N * sizeof(double));
    if (!D) exit(2);
    /* Padding is NaN: a kernel that reads past K poisons its output. */
    for (size_t i = 0; i < (size_t)M * lda; i++) A[i] = (int)(i % lda) < K ? frand() : NAN;
    for (size_t i = 0; i < (size_t)N * lda; i++) W[i] = (int)(i % lda) < K ? frand() : NAN;
    for (int j = 0; j < N; j++) b[j] = frand();
    for (size_t i = 0; i < (size_t)M * ldc; i++) C0[i] = frand();
    for (int i = 0; i < M; i++)
        for (int j = 0; j < N; j++) {
            double acc = 0;
            for (int k = 0; k < K; k++) acc += (double)A[(size_t)i * lda + k] * W[(size_t)j * lda + k];
            D[(size_t)i * N + j] = acc;
        }
    double base = sqrt((double)K) * maxabs(A, (size_t)M * lda) * maxabs(W, (size_t)N * lda);
    /* maxabs skips NaN (fmax), so the padding does not affect the scale. */

    for (int withb = 0; withb < 2; withb++) {
        hm_packed P;
        int rc = hm_pack_weights(&P, W, lda, withb ? b : NULL, N, K);
        CHECKF(rc == HM_OK && P.isa == (int)hm_isa_active(), "pack %s rc=%d %s", isa, rc, hm_errmsg());
        if (rc != HM_OK) continue;
        for (int epi = HM_EPI_STORE; epi <= HM_EPI_ACCUM; epi++) {
            double scale = base + (withb ? maxabs(b, N) : 0) + (epi == HM_EPI_ACCUM ? maxabs(C0, (size_t)M * ldc) : 0);
            hm_pool *pools[3] = {NULL, p1, p2};
            int same = 1;
            for (int pi = 0; pi < 3; pi++) {
                memcpy(C, C0, (size_t)M * ldc * sizeof(float));
                hm_gemm(pools[pi], M, A, lda, &P, C, ldc, (hm_epilogue)epi);
                if (pi == 0) {
                    double err = 0;
                    int pad_ok = 1;
                    for (int i = 0; i < M; i++) {
                        for (int j = 0; j < N; j++) {
                            double r = D[(size_t)i * N + j] + (withb ? b[j] : 0.0);
                            if (epi == HM_EPI_GELU) r = gelu_ref(r);
                            if (epi == HM_EPI_ACCUM) r += C0[(size_t)i * ldc + j];
                            double e = fabs(C[(size_t)i * ldc + j] - r);
                            err = e > err || e != e ? e : err;
                        }
                        for (int j = N; j < ldc; j++)
                            pad_ok &= C[(size_t)i * ldc + j] == C0[(size_t)i * ldc + j];
                    }
                    worst_gemm = fmax(worst_gemm, err / scale);
                    CHECKF(err / scale < TOL, "%s M=%d N=%d K=%d lda=%d ldc=%d bias=%d epi=%d: err/scale=%.3g",
                          isa, M, N, K, lda, ldc, withb, epi, err / scale);
                    CHECKF(pad_ok, "%s M=%d N=%d K=%d: wrote past N into the ldc padding", isa, M, N, K);
                    memcpy(Cfirst, C, (size_t)M * ldc * sizeof(float));
                } else {
                    same &= memcmp(C, Cfirst, (size_t)M * ldc * sizeof(float)) == 0;
                }
            }
            CHECKF(same, "%s M=%d N=%d K=%d epi=%d: results differ between NULL/1/2-thread pools", isa, M, N,
                  K, epi);
        }
        hm_packed_free(&P);
    }
    free(D);
    hm_free(A), hm_free(W), hm_free(b), hm_free(C0), hm_free(C), hm_free(Cfirst);
}

static void test_gemm_shapes(hm_pool *p1, hm_pool *p2) {
    /* The awkward sizes from the model's neighbourhood plus the tile and
     * block edges of every ISA (MR 4/6/12, NR 8/16/32, KC 256, MC 384), and
     * both A paths (read in place, or packed when large). */
    static const shape shapes[] = {
        {1, 1, 1, 0, 0},      {2, 3, 7, 1, 2},       {5, 17, 80, 0, 0},     {193, 96, 80, 3, 5},
        {1, 1280, 1280, 0, 0}, {2, 17, 5120, 4, 0},  {193, 3, 1280, 0, 1},  {5, 96, 5120, 0, 0},
        {193, 1280, 7, 2, 0}, {13, 33, 257, 1, 3},   {24, 48, 256, 0, 0},   {12, 31, 512, 0, 0},
        {400, 40, 300, 0, 0}, {193, 96, 1280, 0, 0}, {7, 1, 80, 0, 0},
        /* the ViT's fc2 with a padded A stride; two M blocks with a K tail */
        {192, 40, 5120, 16, 2}, {400, 33, 3000, 0, 1},
    };
    for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++) check_shape(shapes[i], p1, p2);
}

/* ---- unpacked helpers -------------------------------------------------- */

static void check_sgemm(int nt, int M, int N, int K, float alpha, float beta) {
    int lda = K + 3, ldb = (nt ? K : N) + 2, ldc = N + 1;
    int brows = nt ? N : K;
    float *A = falloc((size_t)M * lda), *B = falloc((size_t)brows * ldb);
    float *C0 = falloc((size_t)M * ldc), *C = falloc((size_t)M * ldc);
    for (size_t i = 0; i < (size_t)M * lda; i++) A[i] = frand();
    for (size_t i = 0; i < (size_t)brows * ldb; i++) B[i] = frand();
    /* With beta = 0, C must not be read: NaN there would leak through. */
    for (size_t i = 0; i < (size_t)M * ldc; i++) C0[i] = beta == 0.0f ? NAN : frand();
    memcpy(C, C0, (size_t)M * ldc * sizeof(float));
    if (nt) hm_sgemm_nt(M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
    else hm_sgemm_nn(M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
    double scale = sqrt((double)K) * fabs(alpha) + (beta != 0.0f ? fabs(beta) : 0.0);
    double err = 0;
    int pad_ok = 1;
    for (int i = 0; i < M; i++) {
        for (int j = 0; j < N; j++) {
            double acc = 0;
            for (int k = 0; k < K; k++)
                acc += (double)A[(size_t)i * lda + k] * (nt ? B[(size_t)j * ldb + k] : B[(size_t)k * ldb + j]);
            double r = alpha * acc + (beta != 0.0f ? beta * (double)C0[(size_t)i * ldc + j] : 0.0);
            double e = fabs(C[(size_t)i * ldc + j] - r);
            err = e > err || e != e ? e : err;
        }
        pad_ok &= memcmp(&C[(size_t)i * ldc + N], &C0[(size_t)i * ldc + N], sizeof(float)) == 0;
    }
    worst_sgemm = fmax(worst_sgemm, err / scale);
    CHECKF(err / scale < TOL, "%s sgemm_%s M=%d N=%d K=%d alpha=%g beta=%g: err/scale=%.3g",
          hm_isa_name(hm_isa_active()), nt ? "nt" : "nn", M, N, K, alpha, beta, err / scale);
    CHECKF(pad_ok, "sgemm_%s wrote past N", nt ? "nt" : "nn");
    hm_free(A), hm_free(B), hm_free(C0), hm_free(C);
}

static void test_sgemm(void) {
    static const int sh[][3] = {{192, 192, 80}, {192, 80, 192}, {7, 5, 3}, {33, 65, 300}, {1, 1, 1}, {13, 40, 80}};
    static const float ab[][2] = {{1.0f, 0.0f}, {0.11180340f, 0.0f}, {1.0f, 1.0f}, {0.37f, 0.5f}};
    for (int nt = 0; nt < 2; nt++)
        for (size_t s = 0; s < sizeof sh / sizeof sh[0]; s++)
            for (size_t a = 0; a < sizeof ab / sizeof ab[0]; a++)
                check_sgemm(nt, sh[s][0], sh[s][1], sh[s][2], ab[a][0], ab[a][1]);
}

/* ---- GELU -------------------------------------------------------------- */

/* GELU tolerance: 2^-22 |x| (+ a denormal floor), i.e. a few ulp of the
 * 0.5|x| scale of the result. Near the negative tail the float reference
 * formula itself only has absolute accuracy (1 + erf cancels), so the bound
 * is absolute in that sense, not relative to the tiny result. */
static double gelu_tol(double x) { return ldexp(fabs(x), -22) + 1e-38; }

typedef void (*gelu_vec_fn)(float *, size_t);

static void test_gelu(void) {
    /* every ISA level's vector GELU (kernels.h), the ones this CPU runs */
    enum { NV = HM_ISA_COUNT };
    double worst = 0, worst_vec[NV] = {0};
    int bad = 0, bad_vec[NV] = {0}, have[NV];
    gelu_vec_fn vec[NV];
    for (int v = 0; v < NV; v++) {
        vec[v] = hm_kernels_for(v)->gelu;
        have[v] = v != HM_ISA_SCALAR && hm_isa_runs(v) && hm_kernels_for(v)->isa == v;
    }
    enum { NX = 4096 };
    float xs[NX], ys[NX];
    /* Dense sweep over [-16, 16] plus the tiny-|x| and far-tail regime. */
    for (int blk = 0; blk < 24; blk++) {
        for (int i = 0; i < NX; i++) {
            double x;
            if (blk < 20) x = -16.0 + 32.0 * ((double)blk * NX + i) / (20.0 * NX);
            else if (blk < 22) x = (blk == 20 ? 1 : -1) * ldexp(1.0 + i % 97 / 97.0, -(i % 120));
            else x = (blk == 22 ? 1 : -1) * (16.0 + i * 0.05);
            xs[i] = (float)x;
        }
        for (int i = 0; i < NX; i++) {
            double e = fabs(hm_gelu(xs[i]) - gelu_ref(xs[i]));
            if (e > gelu_tol(xs[i])) bad++;
            worst = fmax(worst, e / gelu_tol(xs[i]));
        }
        for (int v = 0; v < NV; v++) {
            if (!have[v]) continue;
            memcpy(ys, xs, sizeof ys);
            vec[v](ys, NX);
            for (int i = 0; i < NX; i++) {
                double e = fabs(ys[i] - gelu_ref(xs[i]));
                if (!(e <= gelu_tol(xs[i]))) bad_vec[v]++;
                worst_vec[v] = fmax(worst_vec[v], e / gelu_tol(xs[i]));
            }
        }
    }
    CHECKF(bad == 0, "hm_gelu: %d values off by more than 2^-22|x| (worst %.2f x tol)", bad, worst);
    for (int v = 0; v < NV; v++) {
        if (!have[v]) continue;
        CHECKF(bad_vec[v] == 0, "gelu (%s): %d values off (worst %.2f x tol)", hm_isa_name((hm_isa)v),
              bad_vec[v], worst_vec[v]);
        /* Tails: exactly n elements touched, special values sane. */
        for (int n = 0; n <= 17; n++) {
            float buf[20];
            for (int i = 0; i < 20; i++) buf[i] = 1.0f + i;
            vec[v](buf, (size_t)n);
            int ok = 1;
            for (int i = 0; i < n; i++) ok &= fabs(buf[i] - gelu_ref(1.0 + i)) <= gelu_tol(1.0 + i);
            for (int i = n; i < 20; i++) ok &= buf[i] == 1.0f + i;
            CHECKF(ok, "hm_gelu_vec n=%d touched elements past n", n);
        }
        float sp[4] = {INFINITY, -INFINITY, NAN, 0.0f};
        vec[v](sp, 4);
        CHECKF(sp[0] == INFINITY && sp[1] == 0.0f && isnan(sp[2]) && sp[3] == 0.0f,
              "hm_gelu_vec specials: gelu(inf)=%g gelu(-inf)=%g gelu(nan)=%g gelu(0)=%g", sp[0], sp[1], sp[2], sp[3]);
    }
    printf("gelu: worst error / tol: scalar %.3f", worst);
    for (int v = 0; v < NV; v++)
        if (have[v]) printf(", %s %.3f", hm_isa_name((hm_isa)v), worst_vec[v]);
    printf("\n");
}

/* ---- ISA selection ----------------------------------------------------- */

/* HAMER_ISA is read once, so each value is tried in a fresh child process
 * that has not touched the gemm module yet. Returns the child's exit code:
 * 0 if hm_pack_weights succeeded, 1 if it failed with HM_E_UNSUPPORTED and
 * a message naming HAMER_ISA, 2 otherwise. */
static int child_pack_with_env(const char *val) {
    fflush(stdout);
    pid_t pid = fork();
    if (pid == 0) {
        setenv("HAMER_ISA", val, 1);
        float w[4] = {1, 2, 3, 4};
        hm_packed P;
        int rc = hm_pack_weights(&P, w, 2, NULL, 2, 2);
        if (rc == HM_OK) _exit(0);
        _exit(rc == HM_E_UNSUPPORTED && strstr(hm_errmsg(), "HAMER_ISA") ? 1 : 2);
    }
    int st = 0;
    if (pid < 0 || waitpid(pid, &st, 0) != pid || !WIFEXITED(st)) return -1;
    return WEXITSTATUS(st);
}

static void test_isa_selection(void) {
    CHECKF(child_pack_with_env("bogus") == 1, "HAMER_ISA=bogus must make hm_pack_weights fail");
    CHECKF(child_pack_with_env("scalar") == 0, "HAMER_ISA=scalar must work everywhere");
    /* the children first: this process must not have read HAMER_ISA yet */
    const int r_avx512 = child_pack_with_env("avx512"), r_neon = child_pack_with_env("neon");
    CHECKF(r_avx512 == (hm_isa_runs(HM_ISA_AVX512) ? 0 : 1), "HAMER_ISA=avx512: child said %d", r_avx512);
    CHECKF(r_neon == (hm_isa_runs(HM_ISA_NEON) ? 0 : 1), "HAMER_ISA=neon: child said %d", r_neon);

    hm_errclear();
    CHECKF(hm_isa_force((hm_isa)7) != HM_OK && hm_errmsg()[0], "forcing an invalid ISA value must fail");
    CHECKF(hm_isa_force((hm_isa)-1) != HM_OK, "forcing ISA -1 must fail");
    for (int isa = 0; isa < HM_ISA_COUNT; isa++)
        if (!hm_isa_runs(isa))
            CHECKF(hm_isa_force((hm_isa)isa) == HM_E_UNSUPPORTED, "forcing unsupported %s must fail",
                   hm_isa_name((hm_isa)isa));
    CHECKF(!strcmp(hm_isa_name(HM_ISA_AVX512), "avx512") && !strcmp(hm_isa_name(HM_ISA_AVX2), "avx2") &&
              !strcmp(hm_isa_name(HM_ISA_SCALAR), "scalar") && !strcmp(hm_isa_name(HM_ISA_NEON), "neon"),
          "hm_isa_name");
    hm_packed P;
    float w[1] = {1};
    CHECKF(hm_pack_weights(&P, w, 1, NULL, 0, 1) == HM_E_ARG, "N=0 must be rejected");
    CHECKF(hm_pack_weights(&P, w, 0, NULL, 1, 1) == HM_E_ARG, "ldw<K must be rejected");
}

int main(void) {
    test_isa_selection(); /* first: the children must see an untouched module */
    printf("cpu isa: %s\n", hm_isa_name(hm_cpu_isa()));
    hm_pool *p1 = hm_pool_create(1), *p2 = hm_pool_create(2);
    if (!p1 || !p2) {
        printf("pool: %s\n", hm_errmsg());
        return 1;
    }
    test_gelu();
    for (int isa = HM_ISA_SCALAR; isa < HM_ISA_COUNT; isa++) {
        if (!hm_isa_runs(isa)) continue;
        int rc = hm_isa_force((hm_isa)isa);
        CHECKF(rc == HM_OK && hm_isa_active() == (hm_isa)isa, "force %s", hm_isa_name((hm_isa)isa));
        if (rc != HM_OK) continue;
        int before = nfail;
        worst_gemm = worst_sgemm = 0;
        test_gemm_shapes(p1, p2);
        test_sgemm();
        printf("%s: %s (worst err/scale: gemm %.2g, sgemm %.2g)\n", hm_isa_name((hm_isa)isa),
               nfail == before ? "ok" : "FAILED", worst_gemm, worst_sgemm);
    }
    hm_pool_destroy(p1);
    hm_pool_destroy(p2);
    printf("%d passed, %d failed\n", npass, nfail);
    return nfail != 0;
}
