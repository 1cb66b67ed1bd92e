/* test_lowp_exact.c - the int8 fast GEMM equals, bit for bit, a scalar
 * emulation of its scheme, on every architecture and with every int8
 * kernel this CPU has (x86: VNNI, and AMX where present; AArch64: SDOT,
 * and SMMLA where the CPU has i8mm).
 *
 * The emulation is written from the scheme's definition (gemm_lowp.c's
 * comment), with x86's float operations in x86's order: the row's sum of
 * |x| in sixteen lanes reduced as _mm512_reduce_add_ps does, the outlier
 * threshold 8 mean|x|, up to 32 outliers (the shared heap,
 * gemm_lowp_quant.h, decides which and in what order they are applied),
 * scale = range / 255, z = round(-min / scale), q = nearest-even of
 * x / scale + z (fused), int32 sums in int64, then per output
 * f = (sum - z colsum) * scale, the outliers' fmaf in list order,
 * fmaf(f, s_w, bias) (or f s_w), + C. Equal outputs here on both
 * architectures mean an int8 matmul gives the same floats on x86 and ARM
 * for the same input. The GELU epilogue is left out: its polynomial takes
 * its reciprocal from vrcp14ps on AVX-512 and from a division on NEON, so
 * there the architectures agree to a few ulp, not bit for bit (the op
 * test, test_kernels.c, holds both to the float64 GELU).
 */
#define _POSIX_C_SOURCE 200809L
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "core/cpu.h"
#include "core/pool.h"
#include "kernels/gemm.h"
#include "kernels/gemm_lowp.h"
#include "kernels/gemm_lowp_quant.h"

static uint64_t rng = 0x2545F4914F6CDD1Dull;
static double urand(void) {
    rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
    return ((double)(rng >> 11) + 0.5) / 9007199254740992.0;
}
static double gauss(void) { return sqrt(-2.0 * log(urand())) * cos(6.283185307179586 * urand()); }

/* gemm_lowp.c's weight rounding: half away from zero, |v| <= 127. */
static int8_t q8(float v) {
    v = v > 127.0f ? 127.0f : v < -127.0f ? -127.0f : v;
    return (int8_t)(int)(v + (v >= 0.0f ? 0.5f : -0.5f));
}

typedef struct {
    float scale;
    int32_t zero;
    int n;
    int32_t idx[HM_LOWP_MAX_OUTLIERS];
    float val[HM_LOWP_MAX_OUTLIERS];
} row_q;

/* One activation row -> u8 bytes q[0..K) and its record. */
static void quant_row(const float *x, int K, uint8_t *q, row_q *r) {
    float lane[16] = {0}, amax = 0;
    for (int k = 0; k < K; k++) {
        float a = fabsf(x[k]);
        lane[k % 16] = lane[k % 16] + a;
        amax = a > amax ? a : amax;
    }
    float t[8];
    for (int l = 0; l < 8; l++) t[l] = lane[8 + l] + lane[l]; /* upper 8 + lower 8 */
    float u4[4];
    for (int l = 0; l < 4; l++) u4[l] = t[4 + l] + t[l]; /* upper 4 + lower 4 */
    float total = (u4[0] + u4[2]) + (u4[1] + u4[3]);
    float thr = HM_LOWP_TAU * total / (float)K, cut = thr;
    hm_topk h;
    h.n = 0;
    if (amax > thr) {
        for (int k = 0; k < K; k++)
            if (fabsf(x[k]) > thr) hm_topk_push(&h, fabsf(x[k]), k);
        if (h.n == HM_LOWP_MAX_OUTLIERS) cut = h.key[0];
    }
    float lo = 0, hi = 0;
    for (int k = 0; k < K; k++)
        if (fabsf(x[k]) <= cut) lo = x[k] < lo ? x[k] : lo, hi = x[k] > hi ? x[k] : hi;
    float scale = (hi - lo) / 255.0f;
    int32_t z = 0;
    if (!(scale > 0.0f) || !(scale < 3.0e38f)) scale = 1.0f;
    else {
        z = (int32_t)(-lo / scale + 0.5f);
        z = z < 0 ? 0 : z > 255 ? 255 : z;
    }
    float inv = 1.0f / scale;
    for (int k = 0; k < K; k++) {
        float v = nearbyintf(fmaf(x[k], inv, (float)z));
        q[k] = (uint8_t)(v < 0 ? 0 : v > 255 ? 255 : v);
    }
    r->scale = scale, r->zero = z, r->n = h.n;
    for (int j = 0; j < h.n; j++) r->idx[j] = h.idx[j], r->val[j] = x[h.idx[j]], q[h.idx[j]] = (uint8_t)z;
}

/* The emulated C (op)= A W^T + b for accum 0/1; then hm_gemm's, compared
 * bit for bit. Returns the number of differing outputs. */
static int run(hm_pool *pool, int M, int N, int K, int hot, int accum, const char *kernel) {
    float *A = malloc(sizeof(float) * M * K), *W = malloc(sizeof(float) * N * K), *b = malloc(sizeof(float) * N);
    float *C = malloc(sizeof(float) * M * N), *E = malloc(sizeof(float) * M * N);
    int8_t *wq = malloc((size_t)N * K);
    float *sw = malloc(sizeof(float) * N);
    int32_t *cs = malloc(sizeof(int32_t) * N);
    uint8_t *q = malloc((size_t)K);
    for (int i = 0; i < M * K; i++) A[i] = (float)(gauss() * (i % K % hot == 5 ? 20.0 : 1.0));
    for (int i = 0; i < N * K; i++) W[i] = (float)(gauss() / sqrt((double)K));
    for (int n = 0; n < N; n++) b[n] = (float)gauss();
    for (int i = 0; i < M * N; i++) C[i] = E[i] = (float)gauss();
    for (int n = 0; n < N; n++) {
        float amax = 0;
        for (int k = 0; k < K; k++) amax = fabsf(W[n * K + k]) > amax ? fabsf(W[n * K + k]) : amax;
        float inv = amax > 0 ? 127.0f / amax : 0;
        sw[n] = amax / 127.0f, cs[n] = 0;
        for (int k = 0; k < K; k++) cs[n] += wq[n * K + k] = q8(W[n * K + k] * inv);
    }
    for (int i = 0; i < M; i++) {
        row_q r;
        quant_row(A + (size_t)i * K, K, q, &r);
        for (int n = 0; n < N; n++) {
            int64_t s = 0;
            for (int k = 0; k < K; k++) s += (int64_t)q[k] * wq[n * K + k];
            float f = (float)(int32_t)(s - (int64_t)r.zero * cs[n]) * r.scale;
            for (int j = 0; j < r.n; j++) f = fmaf(r.val[j], (float)wq[n * K + r.idx[j]], f);
            f = fmaf(f, sw[n], b[n]);
            E[i * N + n] = accum ? f + E[i * N + n] : f;
        }
    }
    hm_packed P;
    int rc = hm_pack_weights_prec(&P, W, K, b, N, K, HM_PREC_FAST);
    int bad = -1;
    if (rc == HM_OK && hm_gemm(pool, M, A, K, &P, C, N, accum ? HM_EPI_ACCUM : HM_EPI_STORE) == HM_OK) {
        bad = 0;
        for (int i = 0; i < M * N; i++) bad += memcmp(&C[i], &E[i], sizeof(float)) != 0;
        if (bad)
            for (int i = 0; i < M * N; i++)
                if (memcmp(&C[i], &E[i], sizeof(float))) {
                    printf("  %s M=%d N=%d K=%d: first difference at [%d,%d]: %.9g, emulation %.9g\n", kernel, M,
                           N, K, i / N, i % N, C[i], E[i]);
                    break;
                }
    }
    hm_packed_free(&P);
    free(A), free(W), free(b), free(C), free(E), free(wq), free(sw), free(cs), free(q);
    return bad;
}

static void all_shapes(hm_pool *pool, const char *kernel) {
    static const int shapes[][4] = {
        /* M, N, K, every hot-th channel x20 */
        {1, 8, 8, 1000},  {3, 7, 13, 1000}, {13, 70, 300, 7}, {37, 64, 1280, 331},
        {25, 17, 2048, 16}, {192, 24, 1280, 331}, {12, 40, 64, 3},
    };
    int bad = 0, runs = 0;
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++)
        for (int accum = 0; accum < 2; accum++) {
            int d = run(pool, shapes[s][0], shapes[s][1], shapes[s][2], shapes[s][3], accum, kernel);
            CHECKF(d == 0, "%s: M=%d N=%d K=%d accum %d: %d outputs differ from the emulation", kernel, shapes[s][0],
                   shapes[s][1], shapes[s][2], accum, d);
            bad += d != 0, runs++;
        }
    printf("%s: %d of %d runs bit-identical to the scalar emulation\n", kernel, runs - bad, runs);
}

int main(void) {
    float w1[1] = {1};
    hm_packed P;
    if (hm_pack_weights_prec(&P, w1, 1, NULL, 1, 1, HM_PREC_FAST) != HM_OK) {
        printf("int8 fast precision unavailable here (%s): NOT TESTED\n", hm_errmsg());
        hm_errclear();
        CHECK(hm_errmsg()[0] == 0);
        return check_summary();
    }
    hm_packed_free(&P);
    hm_pool *pool = hm_pool_create(2);
    if (!pool) return 2;
    const int f = hm_cpu_features();
#if defined(__aarch64__)
    all_shapes(pool, f & HM_CPU_I8MM ? "smmla" : "sdot");
    if (f & HM_CPU_I8MM) {
        hm_cpu_test_hide(HM_CPU_I8MM);
        all_shapes(pool, "sdot");
        hm_cpu_test_hide(0);
    } else {
        printf("smmla: NOT TESTED (no i8mm on this CPU)\n");
    }
#else
    if (hm_lowp_amx_in_use()) {
        all_shapes(pool, "amx");
        hm_amx_force(0);
    }
    all_shapes(pool, "vnni");
#endif
    all_shapes(NULL, "no pool");
    hm_pool_destroy(pool);
    (void)f;
    return check_summary();
}
