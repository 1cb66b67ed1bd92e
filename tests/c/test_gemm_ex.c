/* test_gemm_ex.c - hm_gemm_ex's options against float64 references and
 * against the calls they replace:
 *  - the LayerNorm prologue gives, bit for bit, what hm_layernorm then
 *    hm_gemm give, for fp32, int8 and bf16 packings, every epilogue, NULL /
 *    1 / 2 / 3-thread pools, rows wider than the stack buffer (8192), and
 *    stays within the int8 bound of the float64 LayerNorm + product;
 *  - centering (int8): on rows that share a large component per group
 *    (what the attention projection's input looks like), the error against
 *    float64 relative to what differs between the rows stays at plain
 *    int8's ~1 % with fine weights (HM_LOWP_INT8F), where plain int8 and
 *    centering without fine weights are several times worse; the group
 *    mean's product is exact to ~1e-4; results are bit-identical across
 *    pools and do not depend on the other groups; an INT8F packing without
 *    centering is the plain int8 product, bit for bit;
 *  - on AArch64, whose int8 layout has no centering, center changes nothing;
 *  - the argument checks.
 * Error measure as test_gemm_lowp.c: RMS(C - ref) over a normaliser named
 * at each check.
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/pool.h"
#include "core/util.h"
#include "kernels/gemm.h"
#include "kernels/gemm_lowp.h"
#include "kernels/norm.h"

static int n_pass, n_fail;

#define CHECK(cond, ...)                                \
    do {                                                \
        if (cond) {                                     \
            n_pass++;                                   \
        } else {                                        \
            n_fail++;                                   \
            printf("FAIL %s:%d: ", __FILE__, __LINE__); \
            printf(__VA_ARGS__);                        \
            printf("\n");                               \
        }                                               \
    } while (0)

static uint64_t rng = 0x2545F4914F6CDD1Dull;
static double urand(void) {
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

static hm_pool *pools[4]; /* NULL, 1, 2, 3 threads */

/* W ~ N(0, 1/K) (NaN in the padding past K), bias N(0, 0.25). */
static void fill_w(float *W, int N, int K, int ldw, float *b) {
    for (int n = 0; n < N; n++)
        for (int k = 0; k < ldw; k++) W[(size_t)n * ldw + k] = k < K ? (float)(gauss() / sqrt((double)K)) : NAN;
    for (int n = 0; n < N; n++) b[n] = (float)(0.5 * gauss());
}

/* Packings this test runs: fp32, int8, int8f (sensitive), bf16. */
enum { PK_FP32, PK_INT8, PK_INT8F, PK_BF16, PK_N };
static const char *pk_name[PK_N] = {"fp32", "int8", "int8f", "bf16"};

static int pack(int pk, hm_packed *P, const float *W, int ldw, const float *b, int N, int K) {
    int rc;
    if (pk == PK_FP32) return hm_pack_weights(P, W, ldw, b, N, K);
    if (pk == PK_BF16) {
        if (hm_lowp_force_kind(HM_LOWP_BF16) != HM_OK) return -1;
        rc = hm_pack_weights_prec(P, W, ldw, b, N, K, HM_PREC_FAST);
        hm_lowp_force_kind(HM_LOWP_INT8);
        return rc;
    }
    if (pk == PK_INT8F) {
        rc = hm_pack_weights_fast_sensitive(P, W, ldw, b, N, K);
        return rc ? rc : hm_lowp_packed_kind(P) == HM_LOWP_INT8F ? HM_OK : -2;
    }
    return hm_pack_weights_prec(P, W, ldw, b, N, K, HM_PREC_FAST);
}

/* ---- the LayerNorm prologue --------------------------------------------- */

static void test_ln_case(int pk, int M, int N, int K, int lpad) {
    const int lda = K + lpad, ldc = N + 3;
    float *X = xalloc((size_t)M * lda * sizeof(float)), *W = xalloc((size_t)N * K * sizeof(float));
    float *b = xalloc((size_t)N * sizeof(float)), *lw = xalloc((size_t)K * sizeof(float));
    float *lb = xalloc((size_t)K * sizeof(float)), *H = xalloc((size_t)M * lda * sizeof(float));
    float *Ho = xalloc((size_t)M * lda * sizeof(float)), *C0 = xalloc((size_t)M * ldc * sizeof(float));
    float *Cr = xalloc((size_t)M * ldc * sizeof(float)), *C = xalloc((size_t)M * ldc * sizeof(float));
    /* The residual stream: an offset and scale per row, a few x20 channels. */
    for (int i = 0; i < M; i++) {
        double off = 3.0 * gauss(), sc = 1.0 + 4.0 * urand();
        for (int k = 0; k < lda; k++)
            X[(size_t)i * lda + k] = k < K ? (float)(off + sc * gauss() * (k % 331 == 17 ? 20.0 : 1.0)) : NAN;
    }
    for (int k = 0; k < K; k++) lw[k] = (float)(1.0 + 0.1 * gauss()), lb[k] = (float)(0.05 * gauss());
    fill_w(W, N, K, K, b);
    for (size_t i = 0; i < (size_t)M * ldc; i++) C0[i] = (float)gauss();
    hm_packed P;
    int rc = pack(pk, &P, W, K, b, N, K);
    if (rc == -1) {
        printf("ln %s: skipped (not on this CPU)\n", pk_name[pk]);
        goto out;
    }
    CHECK(rc == HM_OK, "ln %s pack: %s", pk_name[pk], hm_errmsg());
    if (rc) goto out;
    for (int i = 0; i < M; i++) hm_layernorm(X + (size_t)i * lda, H + (size_t)i * lda, 1, K, lw, lb, 1e-6f);
    int same = 1, ho_ok = 1;
    for (int epi = HM_EPI_STORE; epi <= HM_EPI_ACCUM; epi++) {
        memcpy(Cr, C0, (size_t)M * ldc * sizeof(float));
        hm_gemm(pools[2], M, H, lda, &P, Cr, ldc, (hm_epilogue)epi);
        for (int pi = 0; pi < 4; pi++) {
            memcpy(C, C0, (size_t)M * ldc * sizeof(float));
            for (size_t i = 0; i < (size_t)M * lda; i++) Ho[i] = -7.0f;
            hm_gemm_opts o = {.epi = (hm_epilogue)epi, .ln_w = lw, .ln_b = lb, .ln_eps = 1e-6f, .ln_out = Ho,
                              .ld_ln = lda};
            rc = hm_gemm_ex(pools[pi], M, X, lda, &P, C, ldc, &o);
            same &= rc == HM_OK && memcmp(C, Cr, (size_t)M * ldc * sizeof(float)) == 0;
            /* fp32 (and rows too wide for the stack) normalise into ln_out:
             * the rows hm_layernorm writes */
            if (pk == PK_FP32 || K > 8192)
                for (int i = 0; i < M; i++) ho_ok &= !memcmp(Ho + (size_t)i * lda, H + (size_t)i * lda, K * sizeof(float));
        }
    }
    CHECK(same, "ln %s M=%d N=%d K=%d: the prologue differs from hm_layernorm + hm_gemm", pk_name[pk], M, N, K);
    CHECK(ho_ok, "ln %s M=%d N=%d K=%d: ln_out is not the normalised rows", pk_name[pk], M, N, K);
    /* Against float64: LayerNorm and product in double (STORE, bias). */
    memset(C, 0, (size_t)M * ldc * sizeof(float));
    hm_gemm_opts o = {.epi = HM_EPI_STORE, .ln_w = lw, .ln_b = lb, .ln_eps = 1e-6f, .ln_out = Ho, .ld_ln = lda};
    hm_gemm_ex(pools[3], M, X, lda, &P, C, ldc, &o);
    double se = 0, sn = 0;
    double *h = xalloc((size_t)K * sizeof(double));
    for (int i = 0; i < M; i++) {
        const float *x = X + (size_t)i * lda;
        double m = 0, v = 0;
        for (int k = 0; k < K; k++) m += x[k];
        m /= K;
        for (int k = 0; k < K; k++) v += (x[k] - m) * (x[k] - m);
        double inv = 1.0 / sqrt(v / K + 1e-6);
        for (int k = 0; k < K; k++) h[k] = (x[k] - m) * inv * lw[k] + lb[k];
        for (int n = 0; n < N; n++) {
            double d = 0;
            for (int k = 0; k < K; k++) d += h[k] * W[(size_t)n * K + k];
            double e = C[(size_t)i * ldc + n] - (d + b[n]);
            se += e != e ? INFINITY : e * e, sn += d * d;
        }
    }
    hm_free(h);
    double rel = sqrt(se / (sn + 1e-300)), bound = pk == PK_FP32 ? 1e-5 : pk == PK_BF16 ? 4e-3 : 2e-2;
    CHECK(rel < bound, "ln %s M=%d N=%d K=%d: rms err %.3g vs float64 (bound %.3g)", pk_name[pk], M, N, K, rel, bound);
    printf("ln %-5s [%d,%d]x[%d,%d]: bit-identical to hm_layernorm + hm_gemm %s; rms err vs float64 %.2g\n",
           pk_name[pk], M, K, K, N, same ? "yes" : "NO", rel);
    hm_packed_free(&P);
out:
    hm_free(X), hm_free(W), hm_free(b), hm_free(lw), hm_free(lb), hm_free(H), hm_free(Ho), hm_free(C0), hm_free(Cr),
        hm_free(C);
}

static void test_ln(void) {
    for (int pk = 0; pk < PK_N; pk++) {
        if (pk == PK_INT8F) continue; /* the same int8 product; centering is its own test */
        test_ln_case(pk, 192, 200, 1280, 0);
        test_ln_case(pk, 37, 70, 300, 5);
    }
    test_ln_case(PK_INT8, 5, 20, 8200, 2); /* wider than the stack row: through ln_out */
}

/* ---- centering ----------------------------------------------------------- */

typedef struct {
    double var, mean; /* rms error / rms of the varying part's product; mean product's rel error */
} cerr;

/* Rows g*G + r = c_g (large, shared) + d_r; C vs float64 for packing pk
 * with (center = G) or without (0) centering. */
static cerr center_case(int pk, int center, int M, int G, int N, int K, int epi, const char *tag) {
    const int lda = K + 1, ldc = N + 2;
    float *A = xalloc((size_t)M * lda * sizeof(float)), *W = xalloc((size_t)N * K * sizeof(float));
    float *b = xalloc((size_t)N * sizeof(float)), *C0 = xalloc((size_t)M * ldc * sizeof(float));
    float *C = xalloc((size_t)M * ldc * sizeof(float)), *Cf = xalloc((size_t)M * ldc * sizeof(float));
    double *D = xalloc((size_t)M * N * sizeof(double)), *c = xalloc((size_t)K * sizeof(double));
    uint64_t seed = rng;
    for (int g = 0; g < M / G; g++) {
        for (int k = 0; k < K; k++) c[k] = 8.0 * gauss();
        for (int r = 0; r < G; r++)
            for (int k = 0; k < lda; k++)
                A[(size_t)(g * G + r) * lda + k] = k < K ? (float)(c[k] + 0.5 * gauss()) : NAN;
    }
    fill_w(W, N, K, K, b);
    for (size_t i = 0; i < (size_t)M * ldc; i++) C0[i] = (float)gauss();
    for (int i = 0; i < M; i++)
        for (int n = 0; n < N; n++) {
            double s = 0;
            for (int k = 0; k < K; k++) s += (double)A[(size_t)i * lda + k] * W[(size_t)n * K + k];
            D[(size_t)i * N + n] = s;
        }
    cerr out = {INFINITY, INFINITY};
    hm_packed P;
    int rc = pack(pk, &P, W, K, b, N, K);
    CHECK(rc == HM_OK, "center %s pack: rc %d %s", pk_name[pk], rc, hm_errmsg());
    if (rc) goto done;
    int same = 1;
    for (int pi = 0; pi < 4; pi++) {
        memcpy(C, C0, (size_t)M * ldc * sizeof(float));
        hm_gemm_opts o = {.epi = (hm_epilogue)epi, .center = center};
        rc = hm_gemm_ex(pools[pi], M, A, lda, &P, C, ldc, &o);
        CHECK(rc == HM_OK, "center %s: %s", tag, hm_errmsg());
        if (pi) same &= !memcmp(C, Cf, (size_t)M * ldc * sizeof(float));
        else memcpy(Cf, C, (size_t)M * ldc * sizeof(float));
    }
    CHECK(same, "center %s M=%d N=%d K=%d: results differ between NULL/1/2/3-thread pools", tag, M, N, K);
    /* Errors against float64: in units of the varying part's product
     * (D minus its group mean), and the group means' products. */
    double se = 0, sv = 0, sme = 0, sm = 0;
    int pad_ok = 1;
    for (int g = 0; g < M / G; g++)
        for (int n = 0; n < N; n++) {
            double dm = 0, cm = 0;
            for (int r = 0; r < G; r++) {
                int i = g * G + r;
                double ref = D[(size_t)i * N + n] + b[n];
                if (epi == HM_EPI_GELU) ref = gelu_ref(ref);
                if (epi == HM_EPI_ACCUM) ref += C0[(size_t)i * ldc + n];
                double e = C[(size_t)i * ldc + n] - ref;
                se += e != e ? INFINITY : e * e;
                dm += D[(size_t)i * N + n], cm += e;
            }
            dm /= G, cm /= G;
            for (int r = 0; r < G; r++) {
                double v = D[(size_t)(g * G + r) * N + n] - dm;
                sv += v * v;
            }
            sme += cm * cm, sm += dm * dm;
        }
    for (int i = 0; i < M; i++)
        for (int n = N; n < ldc; n++) pad_ok &= C[(size_t)i * ldc + n] == C0[(size_t)i * ldc + n];
    CHECK(pad_ok, "center %s: wrote into the ldc padding", tag);
    out.var = sqrt(se / (sv + 1e-300));
    out.mean = sqrt(sme / (sm + 1e-300));
    /* The groups are independent: the last group alone gives its rows. */
    if (M > G) {
        memcpy(C, C0, (size_t)M * ldc * sizeof(float));
        hm_gemm_opts o = {.epi = (hm_epilogue)epi, .center = center};
        size_t off = (size_t)(M - G);
        hm_gemm_ex(pools[2], G, A + off * lda, lda, &P, C + off * ldc, ldc, &o);
        CHECK(!memcmp(C + off * ldc, Cf + off * ldc, (size_t)G * ldc * sizeof(float)),
              "center %s: a group's rows depend on the other groups", tag);
    }
    hm_packed_free(&P);
done:
    rng = seed; /* every variant of a case sees the same data */
    hm_free(A), hm_free(W), hm_free(b), hm_free(C0), hm_free(C), hm_free(Cf), hm_free(D), hm_free(c);
    return out;
}

static void test_center(void) {
    static const struct {
        int M, G, N, K;
    } cs[] = {{384, 192, 1280, 1280}, {48, 16, 100, 130}, {64, 32, 65, 37}, {96, 48, 64, 1283}};
    for (size_t i = 0; i < sizeof cs / sizeof cs[0]; i++) {
        int M = cs[i].M, G = cs[i].G, N = cs[i].N, K = cs[i].K;
        for (int epi = HM_EPI_STORE; epi <= HM_EPI_ACCUM; epi++) {
            if (i == 0 && epi != HM_EPI_ACCUM) continue; /* the projection's own shape: its epilogue */
            cerr plain = center_case(PK_INT8, 0, M, G, N, K, epi, "int8");
            cerr cen = center_case(PK_INT8, G, M, G, N, K, epi, "int8 centred");
            cerr fine = center_case(PK_INT8F, G, M, G, N, K, epi, "int8f centred");
            cerr fplain = center_case(PK_INT8F, 0, M, G, N, K, epi, "int8f");
            /* Bounds: the varying part's error at plain int8's level on
             * ordinary rows (test_gemm_lowp's 2e-2); the group mean's
             * product to two-level accuracy (~1/32000 of the weights'
             * grid, and ~255^-2 of the mean's). The two without fine
             * weights keep the weights' rounding of the mean: several
             * times worse, which is why the projection packs int8f. */
            CHECK(fine.var < 2e-2 && fine.mean < 2e-4,
                  "int8f centred M=%d N=%d K=%d epi=%d: rms err %.3g of the varying part (bound 2e-2), mean's "
                  "product %.3g (bound 2e-4)", M, N, K, epi, fine.var, fine.mean);
            CHECK(plain.var > 4 * fine.var && cen.var > 4 * fine.var,
                  "M=%d N=%d K=%d: plain int8 %.3g and centred int8 %.3g should be far worse than int8f %.3g", M, N,
                  K, plain.var, cen.var, fine.var);
            CHECK(fabs(fplain.var - plain.var) < 1e-12, "int8f without centering must be plain int8 (%.6g vs %.6g)",
                  fplain.var, plain.var);
            printf("center [%d,%d]x[%d,%d] groups of %d epi %d: err / varying part: int8 %.4f, centred %.4f, "
                   "int8f centred %.4f; mean's product %.2g\n", M, K, K, N, G, epi, plain.var, cen.var, fine.var,
                   fine.mean);
        }
    }
}

/* AArch64: its int8 layout takes the plain product whatever center says
 * (its sensitive matmuls are bf16), bit for bit. */
static void test_center_ignored(void) {
    enum { M = 64, N = 40, K = 96 };
    float *A = xalloc((size_t)M * K * sizeof(float)), *W = xalloc((size_t)N * K * sizeof(float));
    float *b = xalloc(N * sizeof(float)), *C1 = xalloc((size_t)M * N * sizeof(float));
    float *C2 = xalloc((size_t)M * N * sizeof(float));
    for (size_t i = 0; i < (size_t)M * K; i++) A[i] = (float)(3.0 + gauss());
    fill_w(W, N, K, K, b);
    hm_packed P;
    CHECK(pack(PK_INT8, &P, W, K, b, N, K) == HM_OK, "pack");
    hm_gemm_opts o = {.epi = HM_EPI_STORE, .center = 32};
    hm_gemm(pools[2], M, A, K, &P, C1, N, HM_EPI_STORE);
    hm_gemm_ex(pools[2], M, A, K, &P, C2, N, &o);
    CHECK(!memcmp(C1, C2, (size_t)M * N * sizeof(float)), "centering must not change a non-x86 int8 product");
    hm_packed_free(&P);
    hm_free(A), hm_free(W), hm_free(b), hm_free(C1), hm_free(C2);
}

/* An int8f packing multiplies like int8 outside centering, bit for bit. */
static void test_int8f_plain(void) {
    enum { M = 29, N = 77, K = 150 };
    float *A = xalloc((size_t)M * K * sizeof(float)), *W = xalloc((size_t)N * K * sizeof(float));
    float *b = xalloc(N * sizeof(float)), *C1 = xalloc((size_t)M * N * sizeof(float));
    float *C2 = xalloc((size_t)M * N * sizeof(float));
    for (size_t i = 0; i < (size_t)M * K; i++) A[i] = (float)gauss();
    fill_w(W, N, K, K, b);
    hm_packed P1, P2;
    CHECK(pack(PK_INT8, &P1, W, K, b, N, K) == HM_OK && pack(PK_INT8F, &P2, W, K, b, N, K) == HM_OK, "packs");
    size_t lp8, lpf, sc, bi;
    CHECK(hm_lowp_sizes(HM_LOWP_INT8, N, K, &lp8, &sc, &bi) == HM_OK &&
              hm_lowp_sizes(HM_LOWP_INT8F, N, K, &lpf, &sc, &bi) == HM_OK && lpf > lp8 && lpf < 2 * lp8 + 512,
          "int8f sizes: %zu vs int8 %zu", lpf, lp8);
    CHECK(hm_lowp_packed_check(&P2, HM_LOWP_INT8F) == HM_OK && hm_lowp_packed_check(&P2, HM_LOWP_INT8) != HM_OK,
          "int8f header check");
    hm_gemm(pools[3], M, A, K, &P1, C1, N, HM_EPI_GELU);
    hm_gemm(pools[3], M, A, K, &P2, C2, N, HM_EPI_GELU);
    CHECK(!memcmp(C1, C2, (size_t)M * N * sizeof(float)), "int8f without centering differs from int8");
    hm_packed_free(&P1), hm_packed_free(&P2);
    hm_free(A), hm_free(W), hm_free(b), hm_free(C1), hm_free(C2);
}

static void test_args(void) {
    float w[16] = {1, 2, 3, 4}, a[64] = {0}, c[64], h[64];
    hm_packed P;
    CHECK(hm_pack_weights_prec(&P, w, 4, NULL, 2, 4, HM_PREC_FAST) == HM_OK, "pack");
    hm_gemm_opts o = {.epi = HM_EPI_STORE, .ln_w = w, .ln_b = w, .ln_eps = 1e-5f};
    CHECK(hm_gemm_ex(NULL, 2, a, 4, &P, c, 2, &o) == HM_E_ARG, "ln without ln_out");
    o.ln_out = h, o.ld_ln = 3;
    CHECK(hm_gemm_ex(NULL, 2, a, 4, &P, c, 2, &o) == HM_E_ARG, "ln_out narrower than K");
    o = (hm_gemm_opts){.center = 8};
    CHECK(hm_gemm_ex(NULL, 16, a, 4, &P, c, 2, &o) == HM_E_ARG, "center below 16");
    o.center = 16;
    CHECK(hm_gemm_ex(NULL, 15, a, 4, &P, c, 2, &o) == HM_E_ARG, "M not a multiple of center");
    o.ln_w = o.ln_b = w, o.ln_out = h, o.ld_ln = 4;
    CHECK(hm_gemm_ex(NULL, 16, a, 4, &P, c, 2, &o) == HM_E_ARG, "center with a LayerNorm");
    o = (hm_gemm_opts){.epi = (hm_epilogue)7};
    CHECK(hm_gemm_ex(NULL, 2, a, 4, &P, c, 2, &o) == HM_E_ARG, "unknown epilogue");
    CHECK(hm_gemm_ex(NULL, 2, a, 4, &P, c, 2, NULL) == HM_OK, "NULL options: a plain product");
    hm_packed_free(&P);
}

int main(void) {
    for (int i = 1; i < 4; i++)
        if (!(pools[i] = hm_pool_create(i))) return 1;
    for (int i = 1; i < 4; i++) hm_pool_reserve(pools[i], 1 << 20);
    float w1[1] = {1};
    hm_packed P;
    int have_vnni = hm_pack_weights_prec(&P, w1, 1, NULL, 1, 1, HM_PREC_FAST) == HM_OK;
    hm_packed_free(&P);
    if (have_vnni) {
        test_args();
        test_ln();
#if defined(__aarch64__)
        test_center_ignored();
        (void)test_center, (void)test_int8f_plain;
        printf("centering: x86's int8 only; AArch64's int8 takes the plain product (checked)\n");
#else
        test_int8f_plain();
        test_center();
#endif
    } else {
        (void)test_center_ignored;
        printf("fast: skipped (no AVX-512 VNNI on this CPU); fp32 prologue only\n");
        test_ln_case(PK_FP32, 37, 70, 300, 5);
    }
    for (int i = 1; i < 4; i++) hm_pool_destroy(pools[i]);
    printf("%d passed, %d failed\n", n_pass, n_fail);
    return n_fail ? 1 : 0;
}
