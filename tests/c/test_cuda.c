/* test_cuda.c - the CUDA backend's numbers, where a GPU is present: every
 * op it runs against a float64 reference (its column of the op test), the
 * whole forward against the CPU's exact path on the same model (fp32: the
 * exact precision's bar; fast: the fast gate), batches and crop types.
 *
 * Not run (exit 77, reported as not run, never passed) in a build without
 * the CUDA backend or on a machine where it has no device. The models are
 * built in memory (tools/cli/synthetic.c, as `hamer bench --synthetic`):
 * depth 2 / 2 always; the full-size one with HAMER_TEST_CUDA_FULL=1
 * (scripts/gpu_check.sh), whose CPU reference takes a while.
 *
 * Tolerances. Ops, against float64: LayerNorm, softmax, GELU, im2col and
 * the cross-attention 1e-5 relative to the output's scale (fp32 sums of at
 * most a few thousand terms); fp32 matmuls 1e-5 of |X||W| per element
 * (K <= 5120, pedantic fp32: no TF32, which would be 1e-3); bf16 matmuls
 * 1e-2 (both operands rounded to 8 bits of mantissa); the attention 1e-5
 * (fp32) / 2e-2 (bf16). The forward against the CPU's fp32: params max
 * abs <= 1e-5 and PCC >= 0.99999 in fp32 (the bar for the exact
 * precision); in fast, params PCC >= 0.9999 and vertices within 1 mm
 * (the CPU fast precision's gate).
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <dlfcn.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "cli/synthetic.h"
#include "hamer.h"

static void *so;

static void *sym(const char *name) {
    void *p = so ? dlsym(so, name) : NULL;
    CHECKF(p != NULL, "libhamer-cuda.so lacks %s", name);
    return p;
}

static uint64_t rng = 0x9e3779b97f4a7c15ull;
static float urand(void) { /* uniform in [-1, 1) */
    rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
    return (float)((rng >> 11) * (1.0 / 9007199254740992.0)) * 2.0f - 1.0f;
}
static float *randv(size_t n, float scale) {
    float *v = malloc(n * sizeof *v);
    for (size_t i = 0; v && i < n; i++) v[i] = scale * urand();
    return v;
}

/* max |a - b| / (scale), with scale the reference's max |value| (>= 1e-30). */
static double rel_err(const float *a, const double *b, size_t n) {
    double mx = 0, sc = 1e-30;
    for (size_t i = 0; i < n; i++) sc = fabs(b[i]) > sc ? fabs(b[i]) : sc;
    for (size_t i = 0; i < n; i++) mx = fabs(a[i] - b[i]) > mx ? fabs(a[i] - b[i]) : mx;
    return mx / sc;
}

/* ---- ops against float64 ---------------------------------------------------- */

static void op_layernorm(void) {
    int (*f)(const float *, float *, int, int, const float *, const float *, float) = sym("hm_cu_test_layernorm");
    if (!f) return;
    const int n = 37, d = 1280;
    float *x = randv((size_t)n * d, 30.0f), *w = randv(d, 2.0f), *b = randv(d, 0.5f), *y = malloc((size_t)n * d * 4);
    double *r = malloc((size_t)n * d * sizeof *r);
    for (int i = 0; i < n; i++) x[(size_t)i * d] += 500.0f; /* an outlier channel */
    for (int i = 0; i < n; i++) {
        double m = 0, v = 0;
        for (int j = 0; j < d; j++) m += x[(size_t)i * d + j];
        m /= d;
        for (int j = 0; j < d; j++) v += (x[(size_t)i * d + j] - m) * (x[(size_t)i * d + j] - m);
        v = 1.0 / sqrt(v / d + 1e-6);
        for (int j = 0; j < d; j++) r[(size_t)i * d + j] = (x[(size_t)i * d + j] - m) * v * w[j] + b[j];
    }
    CHECK(f(x, y, n, d, w, b, 1e-6f) == HAMER_OK);
    double e = rel_err(y, r, (size_t)n * d);
    CHECKF(e <= 1e-5, "layernorm: %.3g", e);
    printf("  op layernorm      %.2e (bound 1e-5)\n", e);
    free(x), free(w), free(b), free(y), free(r);
}

static void op_softmax_gelu(void) {
    int (*sm)(float *, int, int) = sym("hm_cu_test_softmax");
    int (*gl)(float *, int) = sym("hm_cu_test_gelu");
    if (!sm || !gl) return;
    const int n = 300, m = 192;
    float *p = randv((size_t)n * m, 12.0f);
    double *r = malloc((size_t)n * m * sizeof *r);
    for (int i = 0; i < n; i++) {
        double mx = -1e300, s = 0;
        for (int j = 0; j < m; j++) mx = fmax(mx, p[(size_t)i * m + j]);
        for (int j = 0; j < m; j++) s += exp(p[(size_t)i * m + j] - mx);
        for (int j = 0; j < m; j++) r[(size_t)i * m + j] = exp(p[(size_t)i * m + j] - mx) / s;
    }
    CHECK(sm(p, n, m) == HAMER_OK);
    double e = rel_err(p, r, (size_t)n * m);
    CHECKF(e <= 1e-5, "softmax: %.3g", e);
    printf("  op softmax        %.2e (bound 1e-5)\n", e);
    const int k = 100000;
    float *x = randv(k, 8.0f);
    double *g = malloc((size_t)k * sizeof *g);
    for (int i = 0; i < k; i++) g[i] = 0.5 * x[i] * (1.0 + erf(x[i] / sqrt(2.0)));
    CHECK(gl(x, k) == HAMER_OK);
    e = rel_err(x, g, k);
    CHECKF(e <= 1e-5, "gelu: %.3g", e);
    printf("  op gelu           %.2e (bound 1e-5)\n", e);
    free(p), free(r), free(x), free(g);
}

static void op_im2col(void) {
    int (*f)(const void *, int, float *, int, int, int) = sym("hm_cu_test_im2col");
    if (!f) return;
    const int B = 2, H = HAMER_CROP_H, W = HAMER_CROP_W, gh = 16, gw = 12;
    uint8_t *u = malloc((size_t)B * H * W * 3);
    float *fc = randv((size_t)B * 3 * H * W, 2.0f), *cols = malloc((size_t)B * gh * gw * 768 * sizeof(float));
    for (size_t i = 0; i < (size_t)B * H * W * 3; i++) u[i] = (uint8_t)(i * 2654435761u >> 24);
    for (int is_u8 = 0; is_u8 < 2; is_u8++) {
        CHECK(f(is_u8 ? (const void *)u : fc, is_u8, cols, B, gh, gw) == HAMER_OK);
        size_t bad = 0;
        for (int b = 0; b < B; b++)
            for (int t = 0; t < gh * gw; t++)
                for (int k = 0; k < 768; k++) {
                    int c = k / 256, y = t / gw * 16 - 2 + k / 16 % 16, x = t % gw * 16 - 2 + k % 16;
                    float want = 0;
                    if (y >= 0 && y < H && x >= 0 && x < W)
                        want = is_u8 ? u[(((size_t)b * H + y) * W + x) * 3 + c] : fc[(((size_t)b * 3 + c) * H + y) * W + x];
                    bad += cols[((size_t)b * gh * gw + t) * 768 + k] != want;
                }
        CHECKF(bad == 0, "im2col (%s): %zu values differ", is_u8 ? "u8" : "f32", bad);
    }
    printf("  op im2col         exact (f32 and u8)\n");
    free(u), free(fc), free(cols);
}

static void op_cross_attention(void) {
    int (*f)(const float *, const float *, int, float *, int, int, int, int) = sym("hm_cu_test_cross_attention");
    if (!f) return;
    const int B = 3, n = 192, heads = 8, inner = 512, ldkv = 2 * 2 * inner; /* two layers' K/V side by side */
    float *q = randv((size_t)B * inner, 1.0f), *kv = randv((size_t)B * n * ldkv, 1.0f), *o = malloc((size_t)B * inner * 4);
    double *r = malloc((size_t)B * inner * sizeof *r);
    for (int b = 0; b < B; b++)
        for (int h = 0; h < heads; h++) {
            double s[192], mx = -1e300, sum = 0;
            for (int t = 0; t < n; t++) {
                double a = 0;
                for (int d = 0; d < 64; d++) a += (double)q[b * inner + h * 64 + d] * kv[((size_t)b * n + t) * ldkv + h * 64 + d];
                s[t] = a / 8.0;
                mx = fmax(mx, s[t]);
            }
            for (int t = 0; t < n; t++) sum += s[t] = exp(s[t] - mx);
            for (int d = 0; d < 64; d++) {
                double a = 0;
                for (int t = 0; t < n; t++) a += s[t] * kv[((size_t)b * n + t) * ldkv + inner + h * 64 + d];
                r[b * inner + h * 64 + d] = a / sum;
            }
        }
    CHECK(f(q, kv, ldkv, o, B, n, heads, inner) == HAMER_OK);
    double e = rel_err(o, r, (size_t)B * inner);
    CHECKF(e <= 1e-5, "cross attention: %.3g", e);
    printf("  op cross-attn     %.2e (bound 1e-5)\n", e);
    free(q), free(kv), free(o), free(r);
}

static void op_gemm(void) {
    int (*f)(int, int, int, const float *, const float *, const float *, float *, int, int) = sym("hm_cu_test_gemm");
    if (!f) return;
    static const int shapes[][3] = {{192, 3840, 1280}, {37, 1280, 5120}, {1, 109, 1024}, {384, 6144, 1280}};
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++)
        for (int bf16 = 0; bf16 < 2; bf16++)
            for (int accum = 0; accum < 2; accum++) {
                const int M = shapes[s][0], N = shapes[s][1], K = shapes[s][2];
                float *X = randv((size_t)M * K, 1.0f), *W = randv((size_t)N * K, 0.05f), *b = randv(N, 0.1f);
                float *Y = randv((size_t)M * N, 1.0f);
                double *r = malloc((size_t)M * N * sizeof *r), bound = 0;
                for (int i = 0; i < M; i++)
                    for (int j = 0; j < N; j++) {
                        double a = accum ? Y[(size_t)i * N + j] : 0, mag = 0;
                        for (int k = 0; k < K; k++) {
                            a += (double)X[(size_t)i * K + k] * W[(size_t)j * K + k];
                            mag += fabs((double)X[(size_t)i * K + k] * W[(size_t)j * K + k]);
                        }
                        r[(size_t)i * N + j] = a + b[j];
                        bound = mag > bound ? mag : bound;
                    }
                CHECK(f(M, N, K, X, W, b, Y, accum, bf16) == HAMER_OK);
                double mx = 0;
                for (size_t i = 0; i < (size_t)M * N; i++) mx = fmax(mx, fabs(Y[i] - r[i]));
                double tol = (bf16 ? 1e-2 : 1e-5) * bound;
                CHECKF(mx <= tol, "gemm %dx%dx%d %s%s: max err %.3g > %.3g", M, N, K, bf16 ? "bf16" : "fp32",
                       accum ? " accum" : "", mx, tol);
                if (s == 0 && !accum)
                    printf("  op gemm %s     %.2e of sum|x w| (bound %g)\n", bf16 ? "bf16" : "fp32", mx / bound,
                           bf16 ? 1e-2 : 1e-5);
                free(X), free(W), free(b), free(Y), free(r);
            }
}

static void op_attention(void) {
    int (*f)(const float *, float *, int, int, int, int, int) = sym("hm_cu_test_attention");
    if (!f) return;
    const int B = 2, n = 192, dim = 1280, H = 16, hd = 80, ld = 3 * dim;
    float *qkv = randv((size_t)B * n * ld, 1.0f), *o = malloc((size_t)B * n * dim * 4);
    double *r = malloc((size_t)B * n * dim * sizeof *r), *s = malloc((size_t)n * sizeof *s);
    for (int b = 0; b < B; b++)
        for (int h = 0; h < H; h++)
            for (int i = 0; i < n; i++) {
                const float *q = qkv + ((size_t)b * n + i) * ld + h * hd;
                double mx = -1e300, sum = 0;
                for (int j = 0; j < n; j++) {
                    const float *k = qkv + ((size_t)b * n + j) * ld + dim + h * hd;
                    double a = 0;
                    for (int d = 0; d < hd; d++) a += (double)q[d] * k[d];
                    s[j] = a / sqrt((double)hd);
                    mx = fmax(mx, s[j]);
                }
                for (int j = 0; j < n; j++) sum += s[j] = exp(s[j] - mx);
                for (int d = 0; d < hd; d++) {
                    double a = 0;
                    for (int j = 0; j < n; j++) a += s[j] * qkv[((size_t)b * n + j) * ld + 2 * dim + h * hd + d];
                    r[((size_t)b * n + i) * dim + h * hd + d] = a / sum;
                }
            }
    for (int bf16 = 0; bf16 < 2; bf16++) {
        CHECK(f(qkv, o, B, n, dim, H, bf16) == HAMER_OK);
        double e = rel_err(o, r, (size_t)B * n * dim), tol = bf16 ? 2e-2 : 1e-5;
        CHECKF(e <= tol, "attention %s: %.3g > %g", bf16 ? "bf16" : "fp32", e, tol);
        printf("  op attention %s %.2e (bound %g)\n", bf16 ? "bf16" : "fp32", e, tol);
    }
    free(qkv), free(o), free(r), free(s);
}

/* ---- the whole forward against the CPU's exact path -------------------------- */

static double pcc(const float *a, const float *b, size_t n) {
    double ma = 0, mb = 0, sab = 0, saa = 0, sbb = 0;
    for (size_t i = 0; i < n; i++) ma += a[i], mb += b[i];
    ma /= n, mb /= n;
    for (size_t i = 0; i < n; i++) {
        sab += (a[i] - ma) * (b[i] - mb), saa += (a[i] - ma) * (a[i] - ma), sbb += (b[i] - mb) * (b[i] - mb);
    }
    return saa > 0 && sbb > 0 ? sab / sqrt(saa * sbb) : 1.0;
}

static int run(hamer_model *m, int B, int max_batch, const void *crops, int is_u8, float *params, float *verts) {
    hamer_state *st = m ? hamer_state_new(m, max_batch, 0) : NULL;
    hamer_output out = {.params = params, .vertices = verts};
    int rc = !st ? -1 : is_u8 ? hamer_regress_u8(st, crops, B, &out) : hamer_regress_f32(st, crops, B, &out);
    hamer_state_free(st);
    return rc;
}

static void forward(int depth, int hdepth) {
    hm_synthetic *y;
    CHECK(hm_synthetic_new(depth, hdepth, 7, 0, &y) == HAMER_OK);
    const int B = 3;
    const size_t nf = (size_t)B * 3 * HAMER_CROP_H * HAMER_CROP_W, nu = (size_t)B * HAMER_CROP_H * HAMER_CROP_W * 3;
    float *cf = randv(nf, 2.0f);
    uint8_t *cu = malloc(nu);
    for (size_t i = 0; i < nu; i++) cu[i] = (uint8_t)(i * 2246822519u >> 24);
    const size_t np = (size_t)B * HAMER_N_PARAMS, nv = (size_t)B * HAMER_N_VERTS * 3;
    float *rp = malloc(np * 4), *rv = malloc(nv * 4), *p = malloc(np * 4), *v = malloc(nv * 4);
    hamer_model *cpu = hm_synthetic_model(y, HAMER_PRECISION_FP32);
    for (int is_u8 = 0; is_u8 < 2; is_u8++) {
        const void *crops = is_u8 ? (const void *)cu : cf;
        CHECK(run(cpu, B, B, crops, is_u8, rp, rv) == HAMER_OK);
        for (int prec = 0; prec < 2; prec++) {
            hamer_model *gpu = hm_synthetic_model_on(y, prec, "cuda");
            CHECK(gpu != NULL);
            for (int mb = 1; gpu && mb <= B; mb += B - 1) { /* one pass of 3, and passes of 1 */
                CHECK(run(gpu, B, mb, crops, is_u8, p, v) == HAMER_OK);
                double mx = 0, vmx = 0;
                for (size_t i = 0; i < np; i++) mx = fmax(mx, fabs(p[i] - rp[i]));
                for (size_t i = 0; i < nv; i++) vmx = fmax(vmx, fabs(v[i] - rv[i]));
                double c = pcc(p, rp, np);
                if (prec == HAMER_PRECISION_FP32)
                    CHECKF(mx <= 1e-5 && c >= 0.99999, "fp32 depth %d %s batch %d: params max abs %.3g, PCC %.7f", depth,
                           is_u8 ? "u8" : "f32", mb, mx, c);
                else
                    CHECKF(c >= 0.9999 && vmx <= 1e-3, "fast depth %d %s batch %d: params PCC %.7f, vertices max %.3f mm",
                           depth, is_u8 ? "u8" : "f32", mb, c, 1e3 * vmx);
                printf("  forward %d/%d %s %s passes of %d: params max abs %.2e PCC %.7f, vertices max %.4f mm\n", depth,
                       hdepth, prec ? "fast" : "fp32", is_u8 ? "u8 " : "f32", mb, mx, c, 1e3 * vmx);
            }
            hamer_model_free(gpu);
        }
    }
    hamer_model_free(cpu);
    hm_synthetic_free(y);
    free(cf), free(cu), free(rp), free(rv), free(p), free(v);
}

int main(void) {
    int idx = -1;
    hamer_backend_info bi;
    for (int i = 0, n = hamer_backend_count(); i < n; i++)
        if (hamer_backend_get(i, &bi) == HAMER_OK && !strcmp(bi.name, "cuda")) idx = i;
    if (idx < 0) {
        printf("test_cuda: not run: this build has no CUDA backend\n");
        return 77;
    }
    hamer_backend_get(idx, &bi);
    if (bi.n_devices < 1) {
        printf("test_cuda: not run: no GPU (%s)\n", bi.why);
        return 77;
    }
    printf("test_cuda: %s\n", bi.info);
    const char *path = getenv("HAMER_CUDA_LIB");
    so = dlopen(path && *path ? path : "libhamer-cuda.so", RTLD_NOW | RTLD_LOCAL);
    CHECK(so != NULL);
    op_layernorm();
    op_softmax_gelu();
    op_im2col();
    op_cross_attention();
    op_gemm();
    op_attention();
    forward(2, 2);
    const char *full = getenv("HAMER_TEST_CUDA_FULL");
    if (full && !strcmp(full, "1")) forward(32, 6);
    return check_summary();
}
