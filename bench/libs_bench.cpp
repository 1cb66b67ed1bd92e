// libs_bench.cpp - hm_gemm against oneDNN's matmul (weights pre-packed in its
// preferred layout) and OpenBLAS's sgemm on the model's exact shapes, fp32,
// one library per process so each runs with its own threading runtime.
// Not part of the build or the tests. Build from the repository root:
//
//   g++ -O2 -std=c++17 -Isrc -Isrc/kernels bench/libs_bench.cpp build/libhamer.a \
//       -o /tmp/libs_bench -ldnnl -lopenblas -lpthread -lm -ljpeg -lpng -lz
//
// Usage: libs_bench hamer|dnnl|openblas THREADS [seconds per case, default 1]
// Environment: LIBS_M=rows (default 192: one crop), LIBS_LDPAD=floats added
// to A's row stride (16 = what the model's state does for the 5120-wide
// fc2 input; 0 shows the L1 set-conflict cost of a 20 KiB stride).
// Prints one line per shape: median microseconds over repetitions and
// GFLOP/s (1 thread: thread CPU time; more: wall time). Threads: hamer uses its pool; oneDNN (OpenMP build in Debian)
// takes omp_set_num_threads; OpenBLAS openblas_set_num_threads. Set
// OPENBLAS_CORETYPE=SkylakeX, or Debian's OpenBLAS 0.3.21 runs AVX2 kernels
// on this CPU.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <time.h>
#include <vector>

#include <omp.h>
#include <oneapi/dnnl/dnnl.hpp>
extern "C" {
#include <cblas.h>
void openblas_set_num_threads(int);
#include "kernels/gemm.h"
#include "core/pool.h"
}

struct shape { const char *name; int M, N, K; };
static const shape shapes[] = {
    {"qkv  192x3840x1280", 192, 3840, 1280}, {"proj 192x1280x1280", 192, 1280, 1280},
    {"fc1  192x5120x1280", 192, 5120, 1280}, {"fc2  192x1280x5120", 192, 1280, 5120},
    {"kv   192x6144x1280", 192, 6144, 1280},
};

// With THREADS = 1 the clock is the thread's CPU time, which a busy
// machine's other processes do not inflate; otherwise wall time.
static bool cpu_clock;
static double now() {
    if (cpu_clock) {
        timespec ts;
        clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
        return ts.tv_sec + 1e-9 * ts.tv_nsec;
    }
    return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

template <class F> static double median_us(F f, double secs) {
    f();
    std::vector<double> t;
    double t0 = now();
    while (now() - t0 < secs || t.size() < 5) {
        double a = now();
        f();
        t.push_back((now() - a) * 1e6);
    }
    std::sort(t.begin(), t.end());
    return t[t.size() / 2];
}

int main(int argc, char **argv) {
    if (argc < 3) {
        fprintf(stderr, "usage: libs_bench hamer|dnnl|openblas THREADS [seconds]\n");
        return 2;
    }
    std::string lib = argv[1];
    int threads = atoi(argv[2]);
    double secs = argc > 3 ? atof(argv[3]) : 1.0;
    cpu_clock = threads == 1;
    omp_set_num_threads(threads);
    openblas_set_num_threads(threads);
    hm_pool *pool = hm_pool_create(threads);
    dnnl::engine eng(dnnl::engine::kind::cpu, 0);
    dnnl::stream strm(eng);
    for (const shape &s0 : shapes) {
        shape s = s0;
        if (getenv("LIBS_M")) s.M = atoi(getenv("LIBS_M"));
        int lda = s.K + (getenv("LIBS_LDPAD") ? atoi(getenv("LIBS_LDPAD")) : 0);
        std::vector<float> A((size_t)s.M * lda), W((size_t)s.N * s.K), b(s.N), C((size_t)s.M * s.N);
        for (auto &v : A) v = (float)rand() / RAND_MAX - 0.5f;
        for (auto &v : W) v = (float)rand() / RAND_MAX - 0.5f;
        for (auto &v : b) v = (float)rand() / RAND_MAX - 0.5f;
        double us;
        if (lib == "hamer") {
            hm_packed P;
            if (hm_pack_weights(&P, W.data(), s.K, b.data(), s.N, s.K) != 0) return 1;
            us = median_us([&] { hm_gemm(pool, s.M, A.data(), lda, &P, C.data(), s.N, HM_EPI_STORE); }, secs);
            hm_packed_free(&P);
        } else if (lib == "openblas") {
            // C = A . W^T (+ bias folded in as beta = 1 on a bias-filled C, as a Linear would)
            us = median_us([&] {
                for (int i = 0; i < s.M; i++) memcpy(&C[(size_t)i * s.N], b.data(), s.N * sizeof(float));
                cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, s.M, s.N, s.K, 1.0f, A.data(), s.K,
                            W.data(), s.K, 1.0f, C.data(), s.N);
            }, secs);
        } else if (lib == "dnnl") {
            using md = dnnl::memory::desc;
            using dt = dnnl::memory::data_type;
            using tag = dnnl::memory::format_tag;
            md a_md({s.M, s.K}, dt::f32, tag::ab), c_md({s.M, s.N}, dt::f32, tag::ab);
            md w_any({s.K, s.N}, dt::f32, tag::any), w_user({s.K, s.N}, dt::f32, tag::ba);
            md b_md({1, s.N}, dt::f32, tag::ab);
            dnnl::matmul::primitive_desc pd(dnnl::matmul::desc(a_md, w_any, b_md, c_md), eng);
            dnnl::memory a_m(a_md, eng, A.data()), c_m(c_md, eng, C.data()), b_m(b_md, eng, b.data());
            dnnl::memory w_u(w_user, eng, W.data()), w_p(pd.weights_desc(), eng);
            dnnl::reorder(w_u, w_p).execute(strm, w_u, w_p); // pre-pack once, like our load
            dnnl::matmul mm(pd);
            us = median_us([&] {
                mm.execute(strm, {{DNNL_ARG_SRC, a_m}, {DNNL_ARG_WEIGHTS, w_p}, {DNNL_ARG_BIAS, b_m}, {DNNL_ARG_DST, c_m}});
                strm.wait();
            }, secs);
        } else {
            fprintf(stderr, "unknown library %s\n", lib.c_str());
            return 2;
        }
        printf("%-9s %dT %-20s %9.1f us %7.1f GFLOP/s\n", lib.c_str(), threads, s.name, us,
               2.0 * s.M * s.N * s.K / us * 1e-3);
    }
    hm_pool_destroy(pool);
    return 0;
}
