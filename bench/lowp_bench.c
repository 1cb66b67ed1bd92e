/* lowp_bench.c - fp32 vs the low-precision GEMM variants (int8 VNNI = FAST,
 * and bf16 for comparison) on the four ViT-H matmul shapes, 1 and 2
 * threads; time includes the per-call activation quantisation. Not part of
 * the build or the tests. Build from the repository root:
 *
 *   cmake -B build && cmake --build build -j
 *   gcc -std=c11 -O2 -fno-math-errno -D_GNU_SOURCE -Isrc -Iinclude -Ibuild/include bench/lowp_bench.c build/libhamer.a \
 *       $(pkg-config --libs jansson libxxhash libavformat libavcodec libswscale libavutil libpng zlib) \
 *       -ljpeg -lpthread -lm -o /tmp/lowp_bench
 *
 * Usage: lowp_bench [rounds, default 7] [seconds per round, default 0.25]
 * Prints the median over rounds (the machine is shared: single runs are
 * noisy). Activations are Gaussian with 4 columns x20 (LayerNorm-gain
 * outliers) for qkv/fc1/proj and GELU(Gaussian) for fc2, so the fp32
 * outlier path is timed too. Ops are counted as 2 M N K for every variant.
 */
#define _POSIX_C_SOURCE 200809L
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "kernels/gemm.h"
#include "kernels/gemm_lowp.h"
#include "core/pool.h"
#include "core/util.h"

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + 1e-9 * ts.tv_nsec;
}

static unsigned long long rng_state = 88172645463325252ull;
static double gauss(void) { /* Box-Muller on xorshift64 */
    double u[2];
    for (int i = 0; i < 2; i++) {
        rng_state ^= rng_state << 13, rng_state ^= rng_state >> 7, rng_state ^= rng_state << 17;
        u[i] = ((rng_state >> 11) + 0.5) / 9007199254740992.0;
    }
    return sqrt(-2.0 * log(u[0])) * cos(6.283185307179586 * u[1]);
}

static int cmp_d(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* Median GFLOP/s of hm_gemm over `rounds` rounds of >= secs each; *best
 * gets the fastest round (the least disturbed by other load). */
static double bench(hm_pool *pool, int M, int N, int K, const float *A, const hm_packed *P, float *C,
                    hm_epilogue epi, int rounds, double secs, double *best) {
    double r[32];
    hm_gemm(pool, M, A, K, P, C, N, epi); /* warm up (and first-call scratch) */
    for (int q = 0; q < rounds; q++) {
        int reps = 0;
        double t0 = now(), t1;
        do {
            hm_gemm(pool, M, A, K, P, C, N, epi);
            reps++;
            t1 = now();
        } while (t1 - t0 < secs);
        r[q] = 2.0 * M * N * K * reps / (t1 - t0) * 1e-9;
    }
    qsort(r, (size_t)rounds, sizeof r[0], cmp_d);
    *best = r[rounds - 1];
    return r[rounds / 2];
}

int main(int argc, char **argv) {
    int rounds = argc > 1 ? atoi(argv[1]) : 7;
    double secs = argc > 2 ? atof(argv[2]) : 0.25;
    if (rounds < 1) rounds = 1;
    if (rounds > 31) rounds = 31;
    static const struct { const char *name; int M, N, K; hm_epilogue epi; int gelu_in; } cases[] = {
        {"qkv  192x3840x1280", 192, 3840, 1280, HM_EPI_STORE, 0},
        {"proj 192x1280x1280 accum", 192, 1280, 1280, HM_EPI_ACCUM, 0},
        {"fc1  192x5120x1280 gelu", 192, 5120, 1280, HM_EPI_GELU, 0},
        {"fc2  192x1280x5120 accum", 192, 1280, 5120, HM_EPI_ACCUM, 1},
    };
    hm_pool *pools[2] = {hm_pool_create(1), hm_pool_create(2)};
    const char *vname[3] = {"fp32", "int8", "bf16"};
    printf("GFLOP/s (int8: Gop/s; 2 M N K per call): median of %d rounds x %.2f s (best round)\n", rounds, secs);
    printf("%-26s %27s %27s %27s   2T speedup vs fp32\n", "", "fp32 1T / 2T", "int8 1T / 2T", "bf16 1T / 2T");
    double tot[3] = {0, 0, 0}, totb[3] = {0, 0, 0}, flops = 0;
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        int M = cases[c].M, N = cases[c].N, K = cases[c].K;
        float *A = hm_alloc((size_t)M * K * sizeof(float)), *W = hm_alloc((size_t)N * K * sizeof(float));
        float *b = hm_alloc((size_t)N * sizeof(float)), *C = hm_alloc((size_t)M * N * sizeof(float));
        for (size_t i = 0; i < (size_t)M * K; i++) {
            double v = gauss();
            A[i] = (float)(cases[c].gelu_in ? 0.5 * v * (1.0 + erf(v / sqrt(2.0))) : v);
        }
        if (!cases[c].gelu_in)
            for (int i = 0; i < M; i++)
                for (int k = 7; k < K; k += K / 4) A[(size_t)i * K + k] *= 20.0f;
        for (size_t i = 0; i < (size_t)N * K; i++) W[i] = (float)(gauss() / sqrt((double)K));
        for (int i = 0; i < N; i++) b[i] = (float)(0.1 * gauss());
        memset(C, 0, (size_t)M * N * sizeof(float));
        printf("%-26s", cases[c].name);
        double g2[3];
        for (int v = 0; v < 3; v++) {
            hm_packed P;
            int rc = v == 0 ? hm_pack_weights(&P, W, K, b, N, K)
                            : (hm_lowp_force_kind(v == 1 ? HM_LOWP_INT8 : HM_LOWP_BF16),
                               hm_pack_weights_prec(&P, W, K, b, N, K, HM_PREC_FAST));
            if (rc != HM_OK) {
                printf("  %s: %s", vname[v], hm_errmsg());
                g2[v] = 0;
                continue;
            }
            double g[2], gb[2];
            for (int t = 0; t < 2; t++)
                g[t] = bench(pools[t], M, N, K, A, &P, C, cases[c].epi, rounds, secs, &gb[t]);
            printf("  %5.0f (%4.0f) / %5.0f (%4.0f)", g[0], gb[0], g[1], gb[1]);
            g2[v] = g[1];
            tot[v] += 2.0 * M * N * K / (g[1] * 1e9);
            totb[v] += 2.0 * M * N * K / (gb[1] * 1e9);
            hm_packed_free(&P);
        }
        printf("   int8 %4.2fx  bf16 %4.2fx\n", g2[1] / g2[0], g2[2] / g2[0]);
        flops += 2.0 * M * N * K;
        hm_free(A), hm_free(W), hm_free(b), hm_free(C);
    }
    for (int b = 0; b < 2; b++) {
        const double *t = b ? totb : tot;
        printf("one ViT block's 4 matmuls, 2T, %-6s fp32 %6.2f ms, int8 %6.2f ms (%.2fx), bf16 %6.2f ms (%.2fx); "
               "%.0f / %.0f / %.0f GFLOP/s\n", b ? "best:" : "median:", t[0] * 1e3, t[1] * 1e3, t[0] / t[1],
               t[2] * 1e3, t[0] / t[2], flops / t[0] * 1e-9, flops / t[1] * 1e-9, flops / t[2] * 1e-9);
    }
    hm_pool_destroy(pools[0]);
    hm_pool_destroy(pools[1]);
    return 0;
}
