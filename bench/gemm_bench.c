/* gemm_bench.c - GFLOP/s of hm_gemm on the model's shapes, 1 and 2 threads.
 * Not part of the build or the tests. Build from the repository root:
 *
 *   cmake -B build && cmake --build build -j
 *   gcc -std=c11 -O2 -fno-math-errno -D_GNU_SOURCE -Isrc -Iinclude -Ibuild/include bench/gemm_bench.c build/libhamer.a \
 *       $(pkg-config --libs jansson libxxhash libavformat libavcodec libswscale libavutil libpng zlib) \
 *       -ljpeg -lpthread -lm -o /tmp/gemm_bench
 *
 * Usage: gemm_bench [avx512|avx2|scalar] [seconds per case, default 0.5]
 */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "kernels/gemm.h"
#include "core/pool.h"
#include "core/util.h"

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + 1e-9 * ts.tv_nsec;
}

static float *rnd(size_t n) {
    float *p = hm_alloc(n * sizeof(float));
    for (size_t i = 0; i < n; i++) p[i] = (float)rand() / RAND_MAX - 0.5f;
    return p;
}

int main(int argc, char **argv) {
    if (argc > 1) {
        hm_isa want = !strcmp(argv[1], "avx512") ? HM_ISA_AVX512 : !strcmp(argv[1], "avx2") ? HM_ISA_AVX2 : HM_ISA_SCALAR;
        if (hm_isa_force(want) != HM_OK) {
            fprintf(stderr, "%s\n", hm_errmsg());
            return 1;
        }
    }
    double secs = argc > 2 ? atof(argv[2]) : 0.5;
    static const struct { const char *name; int M, N, K; hm_epilogue epi; } cases[] = {
        {"qkv  192x3840x1280", 192, 3840, 1280, HM_EPI_STORE},
        {"proj 192x1280x1280", 192, 1280, 1280, HM_EPI_STORE},
        {"fc1  192x5120x1280 gelu", 192, 5120, 1280, HM_EPI_GELU},
        {"fc2  192x1280x5120 accum", 192, 1280, 5120, HM_EPI_ACCUM},
        {"kv   192x6144x1280", 192, 6144, 1280, HM_EPI_STORE},
        {"head 1x1024x1024", 1, 1024, 1024, HM_EPI_STORE},
    };
    hm_pool *pools[2] = {hm_pool_create(1), hm_pool_create(2)};
    printf("isa %s\n", hm_isa_name(hm_isa_active()));
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        int M = cases[c].M, N = cases[c].N, K = cases[c].K;
        float *A = rnd((size_t)M * K), *W = rnd((size_t)N * K), *b = rnd(N), *C = rnd((size_t)M * N);
        hm_packed P;
        if (hm_pack_weights(&P, W, K, b, N, K) != HM_OK) {
            fprintf(stderr, "%s\n", hm_errmsg());
            return 1;
        }
        printf("%-26s", cases[c].name);
        for (int t = 0; t < 2; t++) {
            hm_gemm(pools[t], M, A, K, &P, C, N, cases[c].epi); /* warm up */
            int reps = 0;
            double t0 = now(), t1;
            do {
                hm_gemm(pools[t], M, A, K, &P, C, N, cases[c].epi);
                reps++;
                t1 = now();
            } while (t1 - t0 < secs);
            double gf = 2.0 * M * N * K * reps / (t1 - t0) * 1e-9;
            printf("  %dT %7.1f GFLOP/s (%7.1f us)", t + 1, gf, (t1 - t0) / reps * 1e6);
        }
        printf("\n");
        hm_packed_free(&P);
        hm_free(A), hm_free(W), hm_free(b), hm_free(C);
    }
    /* Attention helpers (single-threaded by contract): one head's
     * Q.K^T (192x192x80) and P.V (192x80x192). */
    for (int nn = 0; nn < 2; nn++) {
        int M = 192, N = nn ? 80 : 192, K = nn ? 192 : 80;
        float *A = rnd((size_t)M * K), *B = rnd((size_t)N * K), *C = rnd((size_t)M * N);
        int reps = 0;
        double t0 = now(), t1;
        do {
            if (nn) hm_sgemm_nn(M, N, K, 1.0f, A, K, B, N, 0.0f, C, N);
            else hm_sgemm_nt(M, N, K, 0.1118f, A, K, B, K, 0.0f, C, N);
            reps++;
            t1 = now();
        } while (t1 - t0 < secs);
        printf("%-26s  1T %7.1f GFLOP/s (%7.1f us)\n", nn ? "sgemm_nn 192x80x192" : "sgemm_nt 192x192x80",
               2.0 * M * N * K * reps / (t1 - t0) * 1e-9, (t1 - t0) / reps * 1e6);
        hm_free(A), hm_free(B), hm_free(C);
    }
    hm_pool_destroy(pools[0]);
    hm_pool_destroy(pools[1]);
    return 0;
}
