/* kernels/peak.c - the machine's fp32 peak: independent FMAs on registers
 * only, on the widest vector the kernels can use. See kernels/peak.h. */
#include <pthread.h>
#include <time.h>

#include "core/util.h"
#include "kernels/peak.h"

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>

typedef struct {
    double seconds;
    long iters;
    int avx512;
    float sink;
} peak_arg;

#define FMA12(FMA, a, b, c)                                                                          \
    a##0 = FMA(a##0, b, c), a##1 = FMA(a##1, b, c), a##2 = FMA(a##2, b, c), a##3 = FMA(a##3, b, c), \
    a##4 = FMA(a##4, b, c), a##5 = FMA(a##5, b, c), a##6 = FMA(a##6, b, c), a##7 = FMA(a##7, b, c), \
    a##8 = FMA(a##8, b, c), a##9 = FMA(a##9, b, c), a##10 = FMA(a##10, b, c), a##11 = FMA(a##11, b, c)

/* Twelve separate accumulators (not an array) so -O2 keeps them in
 * registers: the loop then measures FMA issue rate, not latency or memory.
 * The empty volatile asm gives the loops a side effect: otherwise the
 * compiler may treat them as pure and move them past the clock reads. */
__attribute__((target("avx512f,fma"))) static float peak_loop512(long n) {
    __m512 b = _mm512_set1_ps(1.0000001f), c = _mm512_set1_ps(1e-7f);
    __m512 a0 = _mm512_set1_ps(0), a1 = _mm512_set1_ps(1), a2 = _mm512_set1_ps(2), a3 = _mm512_set1_ps(3);
    __m512 a4 = _mm512_set1_ps(4), a5 = _mm512_set1_ps(5), a6 = _mm512_set1_ps(6), a7 = _mm512_set1_ps(7);
    __m512 a8 = _mm512_set1_ps(8), a9 = _mm512_set1_ps(9), a10 = _mm512_set1_ps(10), a11 = _mm512_set1_ps(11);
    __asm__ volatile("" ::: "memory");
    for (long i = 0; i < n; i++) FMA12(_mm512_fmadd_ps, a, b, c);
    __m512 s = _mm512_add_ps(_mm512_add_ps(_mm512_add_ps(a0, a1), _mm512_add_ps(a2, a3)),
                             _mm512_add_ps(_mm512_add_ps(a4, a5), _mm512_add_ps(a6, a7)));
    s = _mm512_add_ps(s, _mm512_add_ps(_mm512_add_ps(a8, a9), _mm512_add_ps(a10, a11)));
    return _mm512_reduce_add_ps(s);
}

__attribute__((target("avx2,fma"))) static float peak_loop256(long n) {
    __m256 b = _mm256_set1_ps(1.0000001f), c = _mm256_set1_ps(1e-7f);
    __m256 a0 = _mm256_set1_ps(0), a1 = _mm256_set1_ps(1), a2 = _mm256_set1_ps(2), a3 = _mm256_set1_ps(3);
    __m256 a4 = _mm256_set1_ps(4), a5 = _mm256_set1_ps(5), a6 = _mm256_set1_ps(6), a7 = _mm256_set1_ps(7);
    __m256 a8 = _mm256_set1_ps(8), a9 = _mm256_set1_ps(9), a10 = _mm256_set1_ps(10), a11 = _mm256_set1_ps(11);
    __asm__ volatile("" ::: "memory");
    for (long i = 0; i < n; i++) FMA12(_mm256_fmadd_ps, a, b, c);
    __m256 s = _mm256_add_ps(_mm256_add_ps(_mm256_add_ps(a0, a1), _mm256_add_ps(a2, a3)),
                             _mm256_add_ps(_mm256_add_ps(a4, a5), _mm256_add_ps(a6, a7)));
    s = _mm256_add_ps(s, _mm256_add_ps(_mm256_add_ps(a8, a9), _mm256_add_ps(a10, a11)));
    float v[8];
    _mm256_storeu_ps(v, s);
    return v[0] + v[1] + v[2] + v[3] + v[4] + v[5] + v[6] + v[7];
}

static void *peak_thread(void *p) {
    peak_arg *a = p;
    double t0 = hm_now();
    a->sink = a->avx512 ? peak_loop512(a->iters) : peak_loop256(a->iters);
    a->seconds = hm_now() - t0;
    return NULL;
}

double hm_peak_fp32_gflops(int nthreads) {
    __builtin_cpu_init();
    int avx512 = __builtin_cpu_supports("avx512f");
    if (!avx512 && !(__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma"))) return 0;
    if (nthreads > 64) nthreads = 64;
    double lanes = avx512 ? 16 : 8, best = 0;
    /* Calibrate on one thread to ~0.1 s, then time all threads twice. */
    peak_arg cal = {0, 1L << 20, avx512, 0};
    peak_thread(&cal);
    long iters = cal.seconds > 0 ? (long)(cal.iters * (0.1 / cal.seconds)) + 1 : cal.iters;
    for (int rep = 0; rep < 2; rep++) {
        pthread_t th[64];
        peak_arg arg[64];
        int started = 0;
        double t0 = hm_now();
        for (int i = 0; i < nthreads; i++) {
            arg[i] = (peak_arg){0, iters, avx512, 0};
            if (pthread_create(&th[i], NULL, peak_thread, &arg[i]) == 0) started++;
            else break;
        }
        for (int i = 0; i < started; i++) pthread_join(th[i], NULL);
        double dt = hm_now() - t0;
        double g = (double)iters * 12 * lanes * 2 * started / dt / 1e9;
        if (g > best) best = g;
    }
    return best;
}
#else
double hm_peak_fp32_gflops(int nthreads) {
    (void)nthreads;
    return 0;
}
#endif
