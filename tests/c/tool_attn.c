/* tool_attn.c - one attention head through the library's kernels, for
 * tests/test_attention.py (which holds the reference).
 *
 *   tool_attn MODE < in > out
 * in: int32 n, int32 hd, then n rows of [q | k | v] (3*hd float32 each);
 * out: n rows of hd float32. MODE bf16: hm_attention_head_bf16; amx: the
 * same on AMX tiles (hm_attention_head_amx);
 * fp32-fused: the fused fp32 head; fp32-gemm: the two GEMMs around the
 * softmax (exit 3 when this machine cannot run the mode); fp32: what
 * vit.c runs in fp32 (hm_attention_head_f32: fused where it can);
 * time: the three, alternately, 200 times each, and prints the minimum and
 * median thread CPU time per head of each (a measure that other processes
 * on the machine disturb less than wall time). */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "kernels/attn.h"
#include "kernels/gemm.h"
#include "kernels/norm.h"
#include "kernels/kernels.h"
#if defined(__x86_64__)
#include "kernels/x86/x86.h"
#endif

/* The modes' heads: 0 the two fp32 GEMMs, 1 the fused fp32 head, 2 bf16
 * (vdpbf16ps), 3 bf16 on AMX tiles. */
enum { NM = 4 };
static const char *const names[NM] = {"fp32-gemm", "fp32-fused", "bf16", "amx"};

static void head(int m, int n, int hd, float scale, const float *x, float *o, float *scratch) {
    const size_t ld = (size_t)3 * hd;
    if (m == 0) hm_attention_head_f32_gemm(n, hd, scale, x, x + hd, x + 2 * hd, ld, o, (size_t)hd, scratch);
    else if (m == 1) hm_kernels_active()->attn_f32_fused(n, hd, scale, x, x + hd, x + 2 * hd, ld, o, (size_t)hd, scratch);
#if defined(__x86_64__)
    else if (m == 2) hm_attention_head_bf16(n, hd, scale, x, x + hd, x + 2 * hd, ld, o, (size_t)hd, scratch);
    else hm_attention_head_amx(n, hd, scale, x, x + hd, x + 2 * hd, ld, o, (size_t)hd, scratch);
#endif
}

/* One mode on the n x hd head in x ([n, 3*hd]: q, k, v); exit status. */
static int tool(const char *mode, int n, int hd, float *x, float *o, float *scratch) {
    size_t ld = (size_t)3 * hd;
    if (fread(x, sizeof *x, (size_t)n * ld, stdin) != (size_t)n * ld) return 2;
    float scale = 1.0f / sqrtf((float)hd);
    const int can[NM] = {1, hm_attention_f32_fused_usable(n, hd, hm_attention_f32_fused_scratch(n, hd)),
                         hm_attention_bf16_usable(n, hd, hm_attention_bf16_scratch(n, hd)),
#if defined(__x86_64__)
                         hm_attention_amx_usable(n, hd, hm_attention_amx_scratch(n, hd))};
#else
                         0};
#endif
    if (!strcmp(mode, "time")) {
        enum { R = 200 };
        static double t[NM][R];
        for (int i = 0; i < R; i++)
            for (int m = 0; m < NM; m++) {
                struct timespec a, b;
                clock_gettime(CLOCK_THREAD_CPUTIME_ID, &a);
                if (can[m]) head(m, n, hd, scale, x, o, scratch);
                clock_gettime(CLOCK_THREAD_CPUTIME_ID, &b);
                t[m][i] = (b.tv_sec - a.tv_sec) * 1e6 + (b.tv_nsec - a.tv_nsec) * 1e-3;
            }
        for (int m = 0; m < NM; m++) {
            if (!can[m]) {
                printf("%s: not on this machine\n", names[m]);
                continue;
            }
            for (int i = 1; i < R; i++)
                for (int j = i; j > 0 && t[m][j - 1] > t[m][j]; j--) {
                    double w = t[m][j];
                    t[m][j] = t[m][j - 1], t[m][j - 1] = w;
                }
            double flop = 4.0 * n * n * hd;
            printf("%s: min %.1f us, median %.1f us per head (%.1f GFLOP/s at the median)\n", names[m], t[m][0],
                   t[m][R / 2], flop / t[m][R / 2] * 1e-3);
        }
        return 0;
    }
    if (!strcmp(mode, "fp32")) { /* what vit.c runs in fp32 */
        hm_attention_head_f32(n, hd, scale, x, x + hd, x + 2 * hd, ld, o, (size_t)hd, scratch, (size_t)n * n);
    } else {
        int m = 0;
        while (m < NM && strcmp(mode, names[m])) m++;
        if (m == NM) return 2;
        if (!can[m]) return 3;
        head(m, n, hd, scale, x, o, scratch);
    }
    fwrite(o, sizeof *o, (size_t)n * hd, stdout);
    return 0;
}

int main(int argc, char **argv) {
    int32_t hdr[2];
    if (argc != 2 || fread(hdr, sizeof hdr, 1, stdin) != 1) return 2;
    int n = hdr[0], hd = hdr[1];
    if (n < 1 || n > 4096 || hd < 1 || hd > HM_ATTN_MAX_HD) return 2;
    float *x = malloc((size_t)n * 3 * hd * sizeof *x), *o = calloc((size_t)n * hd, sizeof *o);
    size_t sb = ((size_t)n * n + hm_attention_bf16_scratch(n, hd) + hm_attention_f32_fused_scratch(n, hd) + 16) *
                sizeof(float);
#if defined(__x86_64__)
    sb += hm_attention_amx_scratch(n, hd) * sizeof(float);
#endif
    float *scratch = aligned_alloc(64, (sb + 63) / 64 * 64);
    int rc = x && o && scratch ? tool(argv[1], n, hd, x, o, scratch) : 2;
    free(x);
    free(o);
    free(scratch);
    return rc;
}
