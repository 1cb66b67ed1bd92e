/* cpu_peak.c - register-only peak throughput of this CPU's vector units, 1..T threads.
 * Not part of the build. Build and run from the repository root:
 *
 *   gcc -O3 -march=native -pthread bench/cpu_peak.c -o build/cpu_peak && build/cpu_peak [max_threads]
 *
 * (-O2 may spill the accumulator array: the numbers then halve.) Each loop
 * keeps 12 independent accumulators in registers, so it measures issue
 * throughput, not latency. Kernels the CPU lacks are skipped (AVX-512 FP16
 * is absent on AMD Zen 4, for instance). `hamer bench` measures the fp32 line
 * itself, the same way, for its "% of peak".
 */
#include <immintrin.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#define ITERS 50000000L

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + t.tv_nsec * 1e-9;
}

__attribute__((target("avx512f,fma"))) static void *fp32_fma512(void *out) {
    __m512 a[12], b = _mm512_set1_ps(1.0000001f), c = _mm512_set1_ps(1e-7f);
    for (int i = 0; i < 12; i++) a[i] = _mm512_set1_ps((float)i);
    for (long i = 0; i < ITERS / 12; i++)
        for (int j = 0; j < 12; j++) a[j] = _mm512_fmadd_ps(a[j], b, c);
    float s = 0;
    for (int i = 0; i < 12; i++) s += _mm512_reduce_add_ps(a[i]);
    *(float *)out = s;
    return NULL;
}

__attribute__((target("avx2,fma"))) static void *fp32_fma256(void *out) {
    __m256 a[12], b = _mm256_set1_ps(1.0000001f), c = _mm256_set1_ps(1e-7f);
    for (int i = 0; i < 12; i++) a[i] = _mm256_set1_ps((float)i);
    for (long i = 0; i < ITERS / 12; i++)
        for (int j = 0; j < 12; j++) a[j] = _mm256_fmadd_ps(a[j], b, c);
    float s = 0, v[8];
    for (int i = 0; i < 12; i++) {
        _mm256_storeu_ps(v, a[i]);
        for (int k = 0; k < 8; k++) s += v[k];
    }
    *(float *)out = s;
    return NULL;
}

__attribute__((target("avx512f,avx512bf16"))) static void *bf16_dot(void *out) {
    __m512 a[12];
    __m512bh b = (__m512bh)_mm512_set1_epi16(0x3f80), c = (__m512bh)_mm512_set1_epi16(0x3380);
    for (int i = 0; i < 12; i++) a[i] = _mm512_set1_ps((float)i);
    for (long i = 0; i < ITERS / 12; i++)
        for (int j = 0; j < 12; j++) a[j] = _mm512_dpbf16_ps(a[j], b, c);
    float s = 0;
    for (int i = 0; i < 12; i++) s += _mm512_reduce_add_ps(a[i]);
    *(float *)out = s;
    return NULL;
}

__attribute__((target("avx512f,avx512vnni"))) static void *int8_vnni(void *out) {
    __m512i a[12], b = _mm512_set1_epi8(1), c = _mm512_set1_epi8(2);
    for (int i = 0; i < 12; i++) a[i] = _mm512_set1_epi32(i);
    for (long i = 0; i < ITERS / 12; i++)
        for (int j = 0; j < 12; j++) a[j] = _mm512_dpbusd_epi32(a[j], b, c);
    int s = 0;
    for (int i = 0; i < 12; i++) s += _mm512_reduce_add_epi32(a[i]);
    *(float *)out = (float)s;
    return NULL;
}

int main(int argc, char **argv) {
    int maxth = argc > 1 ? atoi(argv[1]) : 2;
    if (maxth < 1 || maxth > 256) maxth = 2;
    __builtin_cpu_init();
    struct {
        const char *name;
        void *(*fn)(void *);
        double ops_per_insn;
        int ok;
    } k[] = {
        {"fp32 FMA zmm   GFLOP/s", fp32_fma512, 16 * 2, __builtin_cpu_supports("avx512f")},
        {"fp32 FMA ymm   GFLOP/s", fp32_fma256, 8 * 2, __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")},
        {"bf16 dpbf16ps  GFLOP/s", bf16_dot, 32 * 2, __builtin_cpu_supports("avx512bf16")},
        {"int8 dpbusd    Gop/s  ", int8_vnni, 64 * 2, __builtin_cpu_supports("avx512vnni")},
    };
    for (int th = 1; th <= maxth; th++)
        for (unsigned i = 0; i < sizeof k / sizeof *k; i++) {
            if (!k[i].ok) continue;
            pthread_t t[256];
            float r[256];
            double t0 = now();
            for (int j = 0; j < th; j++) pthread_create(&t[j], NULL, k[i].fn, &r[j]);
            for (int j = 0; j < th; j++) pthread_join(t[j], NULL);
            printf("%s threads=%d  %7.1f\n", k[i].name, th, (double)(ITERS / 12 * 12) * k[i].ops_per_insn * th / (now() - t0) / 1e9);
        }
    return 0;
}
