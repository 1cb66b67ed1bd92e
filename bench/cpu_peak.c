/* cpu_peak.c - register-only peak throughput of this CPU's vector units, 1..T threads.
 * Not part of the build. Build and run from the repository root:
 *
 *   gcc -O3 -march=native -pthread bench/cpu_peak.c -o build/cpu_peak && build/cpu_peak [max_threads]
 *
 * (-O2 may spill the accumulator array: the numbers then halve.) Each loop
 * keeps 12 independent accumulators in registers, so it measures issue
 * throughput, not latency. Kernels the CPU lacks are skipped (AVX-512 FP16
 * is absent on AMD Zen 4, for instance). `hamer bench` measures the fp32 line
 * itself, the same way, for its "% of peak". AMX tiles (tdpbusd, tdpbf16ps:
 * four independent accumulator tiles, 16 x 16 x 64 bytes each) where the CPU
 * has them and Linux grants the tile state; bench/peers/peers.py reads these
 * lines for its per-stage "% of peak".
 */
#include <immintrin.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

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

/* AMX: 1 when the tile data state is granted to this process (Linux asks
 * programs to request it: arch_prctl ARCH_REQ_XCOMP_PERM, XTILEDATA). */
static int amx_granted(void) {
    return __builtin_cpu_supports("amx-tile") && syscall(SYS_arch_prctl, 0x1023, 18) == 0;
}

#define AMX_ITERS 4000000L
typedef struct {
    uint8_t palette, start;
    uint8_t pad[14];
    uint16_t colsb[16];
    uint8_t rows[16];
} amx_cfg;

/* Eight 16 x 64-byte tiles. A static object: GCC 12 drops the stores to a
 * local one, not seeing that ldtilecfg reads all 64 bytes. */
static const _Alignas(64) amx_cfg amx_tiles = {
    .palette = 1,
    .colsb = {64, 64, 64, 64, 64, 64, 64, 64},
    .rows = {16, 16, 16, 16, 16, 16, 16, 16},
};

__attribute__((target("amx-tile"))) static void amx_config(void) {
    _tile_loadconfig(&amx_tiles);
    _tile_zero(0);
    _tile_zero(1);
    _tile_zero(2);
    _tile_zero(3);
    _tile_zero(4);
    _tile_zero(5);
    _tile_zero(6);
    _tile_zero(7);
}

/* Four independent accumulator tiles per step, as the kernels use them. */
#define AMX_LOOP(NAME, TARGET, OP)                                   \
    __attribute__((target(TARGET))) static void *NAME(void *out) {   \
        amx_config();                                                \
        for (long i = 0; i < AMX_ITERS / 4; i++) {                   \
            OP(0, 4, 6);                                             \
            OP(1, 4, 7);                                             \
            OP(2, 5, 6);                                             \
            OP(3, 5, 7);                                             \
        }                                                            \
        _tile_release();                                             \
        *(float *)out = 0;                                           \
        return NULL;                                                 \
    }
AMX_LOOP(int8_amx, "amx-tile,amx-int8", _tile_dpbusd)
AMX_LOOP(bf16_amx, "amx-tile,amx-bf16", _tile_dpbf16ps)

int main(int argc, char **argv) {
    int maxth = argc > 1 ? atoi(argv[1]) : 2;
    if (maxth < 1 || maxth > 256) maxth = 2;
    __builtin_cpu_init();
    const int amx = amx_granted();
    struct {
        const char *name;
        void *(*fn)(void *);
        double ops_per_insn;
        int ok;
        long iters;
    } k[] = {
        {"fp32 FMA zmm   GFLOP/s", fp32_fma512, 16 * 2, __builtin_cpu_supports("avx512f")},
        {"fp32 FMA ymm   GFLOP/s", fp32_fma256, 8 * 2, __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")},
        {"bf16 dpbf16ps  GFLOP/s", bf16_dot, 32 * 2, __builtin_cpu_supports("avx512bf16")},
        {"int8 dpbusd    Gop/s  ", int8_vnni, 64 * 2, __builtin_cpu_supports("avx512vnni")},
        {"int8 amx tdpbusd Gop/s", int8_amx, 16 * 16 * 64 * 2, amx && __builtin_cpu_supports("amx-int8"), AMX_ITERS},
        {"bf16 amx tdpbf16ps GFLOP/s", bf16_amx, 16 * 16 * 32 * 2, amx && __builtin_cpu_supports("amx-bf16"), AMX_ITERS},
    };
    for (int th = 1; th <= maxth; th++)
        for (unsigned i = 0; i < sizeof k / sizeof *k; i++) {
            if (!k[i].ok) continue;
            pthread_t t[256];
            float r[256];
            double t0 = now();
            for (int j = 0; j < th; j++) pthread_create(&t[j], NULL, k[i].fn, &r[j]);
            for (int j = 0; j < th; j++) pthread_join(t[j], NULL);
            const double n = k[i].iters ? (double)(k[i].iters / 4 * 4) : (double)(ITERS / 12 * 12);
            printf("%s threads=%d  %7.1f\n", k[i].name, th, n * k[i].ops_per_insn * th / (now() - t0) / 1e9);
        }
    return 0;
}
