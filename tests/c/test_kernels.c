/* test_kernels.c - the op test: every kernel of every executor this
 * machine runs, against float64 references, from one table.
 *
 * Columns are executors: the ISA levels of the exact precision (scalar,
 * avx2, avx512, neon: each level's kernel table, kernels.h) and the fast
 * precision's variants (x86: int8 on VNNI, int8 on AMX, bf16 on
 * vdpbf16ps, bf16 on AMX; AArch64: int8 on SDOT, int8 on SMMLA, bf16 on
 * BFMMLA). An executor is a name, whether it runs here, how to make it
 * the current one (force the ISA, hide CPU features, pick the low-
 * precision kind, AMX on or off) and `ops`, the table of its op entry
 * points; every CPU executor's ops are cpu_ops below. A backend that is
 * not the CPU (a GPU) adds a column by giving its own exec_ops, whose
 * entries run the op through the backend's interface; an entry left NULL
 * is an op the executor does not offer ("-" in the table).
 *
 * Rows are ops with shapes; each states its tolerance (TOL_* below, with
 * the reason) and returns its worst error divided by that tolerance, so a
 * cell passes at <= 1. The table is printed; a failing cell also prints
 * its case. Cells that cannot run here print "n/a" and are not counted.
 */
#define _POSIX_C_SOURCE 200809L
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "core/cpu.h"
#include "kernels/attn.h"
#include "kernels/gemm.h"
#include "kernels/gemm_lowp.h"
#include "kernels/kernels.h"
#include "kernels/norm.h"

/* ---- data ---------------------------------------------------------------- */

static uint64_t rng = 0x9E3779B97F4A7C15ull;
static double urand(void) {
    rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
    return ((double)(rng >> 11) + 0.5) / 9007199254740992.0;
}
static double gauss(void) { return sqrt(-2.0 * log(urand())) * cos(6.283185307179586 * urand()); }
static double gelu64(double x) { return 0.5 * x * (1.0 + erf(x / sqrt(2.0))); }

static float *fvec(size_t n, double sd) {
    float *v = hm_alloc(n * sizeof(float) + 64);
    if (!v) exit(2);
    for (size_t i = 0; i < n; i++) v[i] = (float)(sd * gauss());
    return v;
}

/* ---- executors ----------------------------------------------------------- */

typedef struct exec exec;
typedef struct exec_ops exec_ops;

struct exec {
    const char *name;
    int isa;        /* the ISA level it runs under */
    int lowp;       /* -1: exact precision; else HM_LOWP_INT8 / HM_LOWP_BF16 (this build's) */
    int hide;       /* CPU feature bits hidden while it runs */
    int amx;        /* x86: 1 AMX tiles, 0 not; -1 no matter */
    int need;       /* feature bits it needs */
    const exec_ops *ops;
};

/* The op entry points (one executor's). Each returns 0 when it ran. */
typedef struct {
    int M, N, K, epi, withb;
    const float *A, *W, *b, *C0; /* A [M, K], W [N, K], b [N], C0 [M, N] */
} gemm_args;

struct exec_ops {
    /* C [M, N] = epi(A W^T + b), in the executor's precision */
    int (*gemm)(const exec *x, const gemm_args *g, float *C);
    /* the rows of the exact precision's kernel table (kernels.h) */
    const hm_kernels *(*table)(const exec *x);
    /* o = softmax(scale q k^T) v for one head, the executor's head */
    int (*attention)(const exec *x, int n, int hd, const float *qkv, float *o);
};

static int x_usable(const exec *x) {
    if (!hm_isa_runs(x->isa) || (hm_cpu_features() & x->need) != x->need) return 0;
#if defined(__x86_64__)
    if (x->amx == 1 && !hm_lowp_amx_in_use()) return 0;
    if (x->amx == 1 && x->lowp == HM_LOWP_BF16 && !(hm_lowp_amx_bf16_built() && (hm_cpu_features() & HM_CPU_AMX_BF16)))
        return 0;
#endif
    return 1;
}

/* Make x the current executor (and undo it). */
static void x_begin(const exec *x) {
    hm_isa_force((hm_isa)x->isa);
    hm_cpu_test_hide(x->hide);
#if defined(__x86_64__)
    if (x->amx >= 0 && (hm_cpu_features() & HM_CPU_AMX)) hm_amx_force(x->amx);
#endif
    hm_lowp_force_kind(x->lowp == HM_LOWP_BF16 ? HM_LOWP_BF16 : HM_LOWP_INT8);
}
static void x_end(void) {
    hm_isa_force(hm_cpu_isa());
    hm_cpu_test_hide(0);
#if defined(__x86_64__)
    if (hm_cpu_features() & HM_CPU_AMX) hm_amx_force(1);
#endif
    hm_lowp_force_kind(HM_LOWP_INT8);
}

static int cpu_gemm(const exec *x, const gemm_args *g, float *C) {
    hm_packed P;
    int rc = x->lowp < 0 ? hm_pack_weights(&P, g->W, g->K, g->withb ? g->b : NULL, g->N, g->K)
                         : hm_pack_weights_prec(&P, g->W, g->K, g->withb ? g->b : NULL, g->N, g->K, HM_PREC_FAST);
    if (rc) return rc;
    if (g->epi == HM_EPI_ACCUM) memcpy(C, g->C0, sizeof(float) * g->M * g->N);
    rc = hm_gemm(NULL, g->M, g->A, g->K, &P, C, g->N, (hm_epilogue)g->epi);
    hm_packed_free(&P);
    return rc;
}

static const hm_kernels *cpu_table(const exec *x) { return hm_kernels_for(x->isa); }

static int cpu_attention(const exec *x, int n, int hd, const float *qkv, float *o) {
    const size_t ld = (size_t)3 * hd, avail = (size_t)n * n + hm_attention_f32_fused_scratch(n, hd) +
                                                hm_attention_bf16_scratch(n, hd) + (size_t)8 * n * hd;
    float *scratch = hm_alloc(avail * sizeof(float));
    if (!scratch) return HM_E_NOMEM;
    const float scale = 1.0f / sqrtf((float)hd);
    int mode = HM_ATTN_FP32, rc = HM_OK;
    if (x->lowp >= 0) rc = hm_attention_fast_choose(n, hd, avail, &mode);
    if (!rc) hm_attention_head_fast(mode, n, hd, scale, qkv, qkv + hd, qkv + 2 * hd, ld, o, (size_t)hd, scratch, avail);
    hm_free(scratch);
    return rc;
}

/* Every CPU executor's ops; the exact levels also offer their tables. */
static const exec_ops cpu_exact_ops = {cpu_gemm, cpu_table, cpu_attention};
static const exec_ops cpu_fast_ops = {cpu_gemm, NULL, NULL};
#if defined(__x86_64__) /* the fast precision's attention heads are x86's */
static const exec_ops cpu_fast_attn_ops = {cpu_gemm, NULL, cpu_attention};
#endif

static const exec executors[] = {
    {"scalar", HM_ISA_SCALAR, -1, 0, -1, 0, &cpu_exact_ops},
#if defined(__x86_64__)
    {"avx2", HM_ISA_AVX2, -1, 0, -1, 0, &cpu_exact_ops},
    {"avx512", HM_ISA_AVX512, -1, 0, -1, 0, &cpu_exact_ops},
    {"vnni", HM_ISA_AVX512, HM_LOWP_INT8, 0, 0, HM_CPU_VNNI, &cpu_fast_ops},
    {"amx", HM_ISA_AVX512, HM_LOWP_INT8, 0, 1, HM_CPU_AMX, &cpu_fast_ops},
    {"bf16", HM_ISA_AVX512, HM_LOWP_BF16, 0, 0, HM_CPU_BF16, &cpu_fast_attn_ops},
    {"amx-bf16", HM_ISA_AVX512, HM_LOWP_BF16, 0, 1, HM_CPU_AMX_BF16, &cpu_fast_attn_ops},
#elif defined(__aarch64__)
    {"neon", HM_ISA_NEON, -1, 0, -1, 0, &cpu_exact_ops},
    {"dotprod", HM_ISA_NEON, HM_LOWP_INT8, HM_CPU_I8MM, -1, HM_CPU_DOTPROD, &cpu_fast_ops},
    {"i8mm", HM_ISA_NEON, HM_LOWP_INT8, 0, -1, HM_CPU_DOTPROD | HM_CPU_I8MM, &cpu_fast_ops},
    {"bf16", HM_ISA_NEON, HM_LOWP_BF16, 0, -1, HM_CPU_ARM_BF16, &cpu_fast_ops},
#endif
};
#define NX ((int)(sizeof executors / sizeof executors[0]))

/* ---- tolerances ------------------------------------------------------------
 * TOL_GEMM: |C - ref| / (sqrt(K) max|A| max|W| + max|b| + max|C0|) <= 2e-6:
 *   each K block of 256 is one fp32 running sum, then the blocks are added;
 *   with random signs its rounding error is ~0.14 u sqrt(n) in these units,
 *   ~8e-7 at most over 1e5 outputs (tests/c/test_gemm.c measures it); a
 *   wrong index or padding costs 0.1-1.
 * TOL_GELU: 2^-22 |x| + 1e-38: a few ulp of the 0.5|x| scale of the result
 *   (the polynomials' relative error is 1.4e-9; 1 + erf cancels in the
 *   negative tail, so the bound is absolute there).
 * TOL_LN: 2^-21 ((|y^| + 4) |w| + |b|), y^ the normalised value: after the
 *   float64 statistics, four float roundings (x - mean, * inv, * w, + b)
 *   plus the rounding of mean (|mean| <= 3 sd here) and of inv.
 * TOL_SOFTMAX: 1e-5 r + 1e-37: s - max rounds by u |s - max| <= 16 u for
 *   the scores here (a relative 1e-6 in e^s), the polynomial 2.5e-9, the
 *   row sum of n <= 768 positive terms ~ sqrt(n) u; the clamp at e^-87
 *   gives the absolute part. A missing or duplicated term costs >= 1/n.
 * TOL_ATTN: 1e-5 max|v|, the fp32 heads' bound of tests/test_attention.py
 *   (scores from hd-term sums, softmax as above, the output a convex
 *   combination of v).
 * TOL_VEC: 0: the elementwise ops are single float operations (or a
 *   compare); the reference rounds where the kernel rounds.
 * TOL_DW: (taps + 1) u (sum |x w| + |bias|): a chain of taps (fused or
 *   not) rounds by at most u |partial sum| a step.
 * TOL_INT8: relative RMS error 2e-2, max 1.2e-1 (in units of RMS(A W^T)):
 *   s8 weights and u8 per-token activations add ~1.1-1.3 % RMS noise on
 *   these data, the outlier split keeps x20 channels off the grid
 *   (tests/c/test_gemm_lowp.c derives both bounds).
 * TOL_BF16: relative RMS 4e-3, max 5e-2: both operands rounded to 8
 *   significant bits, ~0.22 % RMS together (test_gemm_lowp.c, whose max
 *   is 3e-2); here the x20 channels (two in a 640-term row) carry 20x
 *   their products' rounding error, which grows a row's error by up to
 *   sqrt(1 + 2 * 400 / 640) = 1.5x.
 * TOL_ATTN_BF16: 2^-7 (max|S| + 1) max|v|: q, k, v and the softmax rounded
 *   to bf16 (tests/test_attention.py). */

/* ---- rows ----------------------------------------------------------------- */

typedef struct {
    int M, N, K, epi, withb, act; /* act 1: x20 channels in A (LayerNorm-like outliers) */
} gemm_case;

/* One GEMM cell: ratio of the worst error to the row's tolerance. */
static double row_gemm(const exec *x, const gemm_case *c, int fast, char *why, size_t nwhy) {
    const int M = c->M, N = c->N, K = c->K;
    float *A = fvec((size_t)M * K, 1.0), *W = fvec((size_t)N * K, 1.0 / sqrt(K)), *b = fvec((size_t)N, 0.5);
    float *C0 = fvec((size_t)M * N, 1.0), *C = fvec((size_t)M * N, 0.0);
    if (c->act)
        for (int i = 0; i < M * K; i++)
            if (i % K % 331 == 17) A[i] *= 20.0f;
    gemm_args g = {M, N, K, c->epi, c->withb, A, W, b, C0};
    double ratio = INFINITY;
    if (x->ops->gemm(x, &g, C) == HM_OK) {
        double amax = 0, wmax = 0, bmax = 0, cmax = 0, se = 0, sr = 0, emax = 0;
        for (int i = 0; i < M * K; i++) amax = fmax(amax, fabs(A[i]));
        for (int i = 0; i < N * K; i++) wmax = fmax(wmax, fabs(W[i]));
        for (int i = 0; i < N; i++) bmax = fmax(bmax, c->withb ? fabs(b[i]) : 0);
        for (int i = 0; i < M * N; i++) cmax = fmax(cmax, c->epi == HM_EPI_ACCUM ? fabs(C0[i]) : 0);
        double worst = 0;
        for (int i = 0; i < M; i++)
            for (int n = 0; n < N; n++) {
                double s = 0;
                for (int k = 0; k < K; k++) s += (double)A[(size_t)i * K + k] * W[(size_t)n * K + k];
                double r = s + (c->withb ? b[n] : 0);
                if (c->epi == HM_EPI_GELU) r = gelu64(r);
                if (c->epi == HM_EPI_ACCUM) r += C0[(size_t)i * N + n];
                double e = fabs(C[(size_t)i * N + n] - r);
                if (!(e == e)) e = INFINITY;
                worst = fmax(worst, e), se += e * e, sr += s * s, emax = fmax(emax, e);
            }
        if (!fast) {
            ratio = worst / (2e-6 * (sqrt(K) * amax * wmax + bmax + cmax));
        } else {
            const double rms = sqrt(sr / ((double)M * N)), erms = sqrt(se / ((double)M * N)) / rms;
            const int bf = x->lowp == HM_LOWP_BF16;
            ratio = fmax(erms / (bf ? 4e-3 : 2e-2), emax / rms / (bf ? 5e-2 : 1.2e-1));
        }
        snprintf(why, nwhy, "gemm M=%d N=%d K=%d epi %d", M, N, K, c->epi);
    } else {
        snprintf(why, nwhy, "gemm failed: %s", hm_errmsg());
    }
    hm_free(A), hm_free(W), hm_free(b), hm_free(C0), hm_free(C);
    return ratio;
}

/* The table rows: GELU, LayerNorm, softmax, the TFLite ops. */
static double row_gelu(const hm_kernels *k) {
    enum { N = 4099 };
    float x[N], y[N];
    for (int i = 0; i < N; i++) x[i] = i < N - 3 ? -16.0f + 32.0f * i / (N - 4) : (i == N - 3 ? 1e-30f : -7e-3f);
    memcpy(y, x, sizeof y);
    k->gelu(y, N);
    double w = 0;
    for (int i = 0; i < N; i++) w = fmax(w, fabs(y[i] - gelu64(x[i])) / (ldexp(fabs(x[i]), -22) + 1e-38));
    return w;
}

static double row_layernorm(const hm_kernels *k, int n, int d) {
    float *x = fvec((size_t)n * d, 2.0), *y = fvec((size_t)n * d, 0), *w = fvec(d, 1.0), *b = fvec(d, 0.5);
    for (int r = 0; r < n; r++)
        for (int i = 0; i < d; i++) x[(size_t)r * d + i] += (float)(r % 7 - 3); /* row means up to 3 sd */
    k->layernorm(x, y, n, d, w, b, 1e-6f);
    double worst = 0;
    for (int r = 0; r < n; r++) {
        const float *xr = x + (size_t)r * d;
        double s = 0, ss = 0;
        for (int i = 0; i < d; i++) s += xr[i];
        double mean = s / d;
        for (int i = 0; i < d; i++) ss += (xr[i] - mean) * (xr[i] - mean);
        double inv = 1.0 / sqrt(ss / d + 1e-6);
        for (int i = 0; i < d; i++) {
            double yh = (xr[i] - mean) * inv, ref = yh * w[i] + b[i];
            worst = fmax(worst, fabs(y[(size_t)r * d + i] - ref) / (ldexp((fabs(yh) + 4) * fabs(w[i]) + fabs(b[i]), -21)));
        }
    }
    hm_free(x), hm_free(y), hm_free(w), hm_free(b);
    return worst;
}

static double row_softmax(const hm_kernels *k, int n) {
    float *x = fvec(n, 3.0);
    double *r = malloc(sizeof(double) * n), mx = -INFINITY, s = 0, worst = 0;
    for (int i = 0; i < n; i++) mx = fmax(mx, x[i]);
    for (int i = 0; i < n; i++) s += r[i] = exp(x[i] - mx);
    k->softmax(x, n);
    for (int i = 0; i < n; i++) worst = fmax(worst, fabs(x[i] - r[i] / s) / (1e-5 * r[i] / s + 1e-37));
    hm_free(x), free(r);
    return worst;
}

/* Elementwise ops: exact. Returns 0 or INFINITY. */
static double row_vec(const hm_kernels *k, size_t n) {
    const size_t rows = 3, c = n / 3;
    float *a = fvec(n, 2.0), *b = fvec(n, 2.0), *y = fvec(n, 0), *al = fvec(c, 0.3), *t = fvec(n, 0);
    int bad = 0, seen = 0;
#define NOTE(what) (bad != seen ? (printf("  elementwise n=%zu: %s differs\n", n, what), seen = bad) : 0)
    for (int act = 0; act <= 3; act++) {
        float lo = act == HM_ACT_RELU_N1_TO_1 ? -1.0f : 0.0f, hi = act == HM_ACT_RELU6 ? 6.0f : 1.0f;
        memcpy(y, a, n * sizeof(float));
        k->act(y, n, act);
        for (size_t i = 0; i < n; i++) {
            float v = a[i];
            float r = act == HM_ACT_NONE ? v : act == HM_ACT_RELU ? (v > 0 ? v : 0) : v < lo ? lo : v > hi ? hi : v;
            bad += y[i] != r;
        }
        NOTE("act");
        k->add(a, b, y, n, act);
        for (size_t i = 0; i < n; i++) {
            float v = (float)((double)a[i] + b[i]);
            float r = act == HM_ACT_NONE ? v : act == HM_ACT_RELU ? (v > 0 ? v : 0) : v < lo ? lo : v > hi ? hi : v;
            bad += y[i] != r;
            t[i] = r < 0 ? (float)((double)r * al[i % c]) : r; /* add then prelu */
        }
        NOTE("add");
        memcpy(y, a, n * sizeof(float));
        k->add_prelu(y, b, al, rows, c, act);
        for (size_t i = 0; i < rows * c; i++) bad += y[i] != t[i];
        NOTE("add_prelu");
    }
    k->prelu(a, al, y, rows, c);
    for (size_t i = 0; i < rows * c; i++) bad += y[i] != (a[i] < 0 ? (float)((double)a[i] * al[i % c]) : a[i]);
    NOTE("prelu");
    memcpy(y, b, n * sizeof(float));
    k->max(y, a, n);
    for (size_t i = 0; i < n; i++) bad += y[i] != (a[i] > b[i] ? a[i] : b[i]);
    NOTE("max");
    memcpy(y, b, n * sizeof(float));
    k->copy(y, a, n - 1); /* n - 1 floats: the last stays b's */
    bad += memcmp(y, a, (n - 1) * sizeof(float)) != 0 || y[n - 1] != b[n - 1];
    NOTE("copy");
    k->copy(y, NULL, n / 2);
    for (size_t i = 0; i < n / 2; i++) bad += y[i] != 0.0f;
    NOTE("copy NULL");
    k->copy_strided(y, 7, a, 5, 3, (int)(n / 8));
    for (size_t s = 0; s < n / 8; s++)
        for (size_t j = 0; j < 3; j++) bad += y[s * 7 + j] != a[s * 5 + j];
    NOTE("copy_strided");
#undef NOTE
    hm_free(a), hm_free(b), hm_free(y), hm_free(al), hm_free(t);
    return bad ? INFINITY : 0;
}

/* Depthwise rows: H x W x C, a kh x kw filter, stride s, padding p. */
static double row_dw(const hm_kernels *k, int H, int W, int C, int kh, int s, int p, int act) {
    const int OH = (H + 2 * p - kh) / s + 1, OW = (W + 2 * p - kh) / s + 1;
    float *x = fvec((size_t)2 * H * W * C, 1.0), *w = fvec((size_t)kh * kh * C, 0.5), *b = fvec(C, 0.5);
    float *y = fvec((size_t)2 * OH * OW * C, 0);
    hm_dw_geom g = {H, W, C, OH, OW, kh, kh, s, s, p, p, act, w, b};
    const int c0 = 1, c1 = C - 1; /* channels [1, C-1): the others untouched */
    k->dw_rows(&g, x, y, 0, 2 * OH, c0, c1);
    double worst = 0;
    for (int r = 0; r < 2 * OH; r++)
        for (int ox = 0; ox < OW; ox++)
            for (int c = 0; c < C; c++) {
                float got = y[((size_t)r * OW + ox) * C + c];
                if (c < c0 || c >= c1) {
                    worst = got == 0.0f ? worst : INFINITY;
                    continue;
                }
                double acc = b[c], mag = fabs(b[c]);
                int taps = 0, img = r / OH, oy = r % OH;
                for (int ky = 0; ky < kh; ky++)
                    for (int kx = 0; kx < kh; kx++) {
                        int iy = oy * s - p + ky, ix = ox * s - p + kx;
                        if (iy < 0 || iy >= H || ix < 0 || ix >= W) continue;
                        double t = (double)x[(((size_t)img * H + iy) * W + ix) * C + c] * w[((size_t)ky * kh + kx) * C + c];
                        acc += t, mag += fabs(t), taps++;
                    }
                if (act == HM_ACT_RELU6) acc = acc < 0 ? 0 : acc > 6 ? 6 : acc;
                worst = fmax(worst, fabs(got - acc) / ((taps + 1) * ldexp(mag, -24) + 1e-30));
            }
    hm_free(x), hm_free(w), hm_free(b), hm_free(y);
    return worst;
}

/* One head: q, k, v rows of [q | k | v]; float64 softmax(scale q k^T) v. */
static double row_attention(const exec *x, int n, int hd, int bf16) {
    float *qkv = fvec((size_t)n * 3 * hd, 1.0), *o = fvec((size_t)n * hd, 0);
    double worst = INFINITY;
    if (x->ops->attention(x, n, hd, qkv, o) == HM_OK) {
        const double scale = 1.0 / sqrt(hd);
        double *S = malloc(sizeof(double) * n), vmax = 0, smax = 0;
        for (int i = 0; i < n * 3 * hd; i++)
            if (i % (3 * hd) >= 2 * hd) vmax = fmax(vmax, fabs(qkv[i]));
        worst = 0;
        for (int t = 0; t < n; t++) {
            double mx = -INFINITY, sum = 0;
            for (int u = 0; u < n; u++) {
                double s = 0;
                for (int d = 0; d < hd; d++) s += (double)qkv[(size_t)t * 3 * hd + d] * qkv[(size_t)u * 3 * hd + hd + d];
                S[u] = s * scale, mx = fmax(mx, S[u]), smax = fmax(smax, fabs(S[u]));
            }
            for (int u = 0; u < n; u++) sum += S[u] = exp(S[u] - mx);
            for (int d = 0; d < hd; d++) {
                double r = 0;
                for (int u = 0; u < n; u++) r += S[u] / sum * qkv[(size_t)u * 3 * hd + 2 * hd + d];
                worst = fmax(worst, fabs(o[(size_t)t * hd + d] - r));
            }
        }
        worst /= bf16 ? ldexp(smax + 1, -7) * vmax : 1e-5 * vmax;
        free(S);
    }
    hm_free(qkv), hm_free(o);
    return worst;
}

/* ---- the table --------------------------------------------------------------- */

enum { R_GEMM, R_GELU, R_LN, R_SOFTMAX, R_VEC, R_DW, R_ATTN, R_GEMM_FAST, R_ATTN_FAST };

typedef struct {
    const char *name, *tol;
    int kind;
    gemm_case g; /* R_GEMM / R_GEMM_FAST */
    int v[7];    /* the other rows' shape arguments */
} row;

#define GEMM(n, t, k, ...) {.name = n, .tol = t, .kind = k, .g = {__VA_ARGS__}}
#define ROW(n, t, k, ...) {.name = n, .tol = t, .kind = k, .v = {__VA_ARGS__}}
static const row rows[] = {
    GEMM("gemm fp32 13x70x300 store", "TOL_GEMM", R_GEMM, 13, 70, 300, HM_EPI_STORE, 1, 0),
    GEMM("gemm fp32 37x100x600 gelu", "TOL_GEMM", R_GEMM, 37, 100, 600, HM_EPI_GELU, 1, 0),
    GEMM("gemm fp32 50x33x1030 accum", "TOL_GEMM", R_GEMM, 50, 33, 1030, HM_EPI_ACCUM, 0, 0),
    GEMM("gemm fp32 7x40x27 store", "TOL_GEMM", R_GEMM, 7, 40, 27, HM_EPI_STORE, 1, 0),
    ROW("gelu 4099", "TOL_GELU", R_GELU, 0),
    ROW("layernorm 9x1280", "TOL_LN", R_LN, 9, 1280),
    ROW("layernorm 5x37", "TOL_LN", R_LN, 5, 37),
    ROW("softmax 192", "TOL_SOFTMAX", R_SOFTMAX, 192),
    ROW("softmax 765", "TOL_SOFTMAX", R_SOFTMAX, 765),
    ROW("elementwise 3x37 (8 ops)", "TOL_VEC", R_VEC, 111),
    ROW("elementwise 3x256 (8 ops)", "TOL_VEC", R_VEC, 768),
    ROW("depthwise 9x11x37 3x3 s1", "TOL_DW", R_DW, 9, 11, 37, 3, 1, 1, HM_ACT_NONE),
    ROW("depthwise 12x10x24 5x5 s2 relu6", "TOL_DW", R_DW, 12, 10, 24, 5, 2, 2, HM_ACT_RELU6),
    ROW("attention fp32 64x32", "TOL_ATTN", R_ATTN, 64, 32),
    ROW("attention fp32 48x80", "TOL_ATTN", R_ATTN, 48, 80),
    GEMM("gemm fast 64x96x640 store x20", "TOL_INT8/BF16", R_GEMM_FAST, 64, 96, 640, HM_EPI_STORE, 1, 1),
    GEMM("gemm fast 13x70x300 gelu", "TOL_INT8/BF16", R_GEMM_FAST, 13, 70, 300, HM_EPI_GELU, 1, 0),
    GEMM("gemm fast 25x17x1030 accum", "TOL_INT8/BF16", R_GEMM_FAST, 25, 17, 1030, HM_EPI_ACCUM, 0, 1),
    ROW("attention fast 64x32", "TOL_ATTN_BF16", R_ATTN_FAST, 64, 32),
};
#define NR ((int)(sizeof rows / sizeof rows[0]))

/* One cell: the ratio, or -1 when the executor does not offer the op. */
static double cell(const exec *x, const row *r, char *why, size_t nwhy) {
    const hm_kernels *k = x->ops->table ? x->ops->table(x) : NULL;
    snprintf(why, nwhy, "%s", r->name);
    switch (r->kind) {
    case R_GEMM: return x->lowp < 0 && x->ops->gemm ? row_gemm(x, &r->g, 0, why, nwhy) : -1;
    case R_GEMM_FAST: return x->lowp >= 0 && x->ops->gemm ? row_gemm(x, &r->g, 1, why, nwhy) : -1;
    case R_GELU: return k ? row_gelu(k) : -1;
    case R_LN: return k ? row_layernorm(k, r->v[0], r->v[1]) : -1;
    case R_SOFTMAX: return k ? row_softmax(k, r->v[0]) : -1;
    case R_VEC: return k ? row_vec(k, (size_t)r->v[0]) : -1;
    case R_DW: return k ? row_dw(k, r->v[0], r->v[1], r->v[2], r->v[3], r->v[4], r->v[5], r->v[6]) : -1;
    case R_ATTN: return x->lowp < 0 && x->ops->attention ? row_attention(x, r->v[0], r->v[1], 0) : -1;
    case R_ATTN_FAST: return x->lowp >= 0 && x->ops->attention ? row_attention(x, r->v[0], r->v[1], 1) : -1;
    }
    return -1;
}

int main(void) {
    int usable[NX];
    printf("cpu: %s\n%-34s", hm_cpu_feature_names(), "op \\ executor (worst err / tol)");
    for (int j = 0; j < NX; j++) {
        usable[j] = x_usable(&executors[j]);
        printf(" %9s", executors[j].name);
    }
    printf("\n");
    static double res[NR][NX];
    static char why[NR][NX][160];
    for (int j = 0; j < NX; j++) {
        if (!usable[j]) continue;
        x_begin(&executors[j]);
        for (int i = 0; i < NR; i++) res[i][j] = cell(&executors[j], &rows[i], why[i][j], sizeof why[i][j]);
        x_end();
    }
    int ran = 0;
    for (int i = 0; i < NR; i++) {
        printf("%-34s", rows[i].name);
        for (int j = 0; j < NX; j++) {
            if (!usable[j]) printf(" %9s", "n/a");
            else if (res[i][j] < 0) printf(" %9s", "-");
            else printf(" %8.3f%s", res[i][j], res[i][j] <= 1.0 ? " " : "!"), ran++;
        }
        printf("  %s\n", rows[i].tol);
    }
    for (int i = 0; i < NR; i++)
        for (int j = 0; j < NX; j++)
            if (usable[j] && res[i][j] >= 0)
                CHECKF(res[i][j] <= 1.0, "%s on %s: worst error %.3g x its tolerance (%s; %s)", rows[i].name,
                       executors[j].name, res[i][j], rows[i].tol, why[i][j]);
    printf("%d cells ran; n/a: executors this CPU does not run; -: ops an executor does not offer\n", ran);
    return check_summary();
}
