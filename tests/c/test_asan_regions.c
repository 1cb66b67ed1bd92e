/* test_asan_regions.c - the AVX-512 fp32 block kernel, which AddressSanitizer
 * builds check by whole operand regions instead of per access
 * (core/sanitize.h), still reports every operand it would overrun.
 *
 * Each case runs the kernel in a child process on heap buffers sized exactly
 * as the contract in kernels/gemm_fp32.h says, with one operand one float
 * short; the child must die with an AddressSanitizer heap-buffer-overflow
 * report of the right kind (READ or WRITE). The exactly-sized case must run
 * clean and give A.P within 1e-5 of a float64 sum. Only meaningful in an
 * ASan build on an AVX-512 CPU: elsewhere it exits 77, which ctest reports
 * as skipped (as it does on other architectures, whose kernels check
 * every access the ordinary way). */
#define _POSIX_C_SOURCE 200809L
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "core/cpu.h"
#include "core/sanitize.h"
#include "kernels/gemm_fp32.h"
#if defined(__x86_64__)
#include "kernels/x86/x86.h"
#else
#undef HM_ASAN /* the checked kernel is x86's: nothing to run elsewhere */
#endif

#include "check.h"

#define M 5
#define NRW 20          /* columns written: fewer than the panel's 32 */
#define KC 37
#define NR HM_GEMM_NR_AVX512

enum { FULL, SHORT_A, SHORT_P, SHORT_C, SHORT_BIAS };

#ifdef HM_ASAN
static float *alloc_f(size_t n) {
    void *p = NULL;
    return posix_memalign(&p, 64, n * sizeof(float)) == 0 ? p : NULL;
}

/* The child's work: returns 0 when the product is right. */
static int run_case(int which) {
    size_t na = (size_t)M * KC - (which == SHORT_A), np = (size_t)KC * NR - (which == SHORT_P);
    size_t nc = (size_t)(M - 1) * NRW + NRW - (which == SHORT_C), nb = NR - (which == SHORT_BIAS);
    float *A = alloc_f(na), *P = alloc_f(np), *C = alloc_f(nc), *bias = alloc_f(nb);
    if (!A || !P || !C || !bias) return 2;
    for (size_t i = 0; i < na; i++) A[i] = (float)((i * 7 % 13) - 6) / 8.0f;
    for (size_t i = 0; i < np; i++) P[i] = (i % NR) < NRW ? (float)((i * 5 % 11) - 5) / 4.0f : 0.0f;
    for (size_t i = 0; i < nb; i++) bias[i] = (float)i / 16.0f;
    hm_gemm_epi_args e = {.load_c = 0, .beta = 0.0f, .bias = bias, .gelu = 0};
    hm_gemm_block_avx512(M, NRW, KC, A, KC, P, C, NRW, &e);
    double worst = 0;
    for (int i = 0; i < M; i++)
        for (int j = 0; j < NRW; j++) {
            double ref = bias[j];
            for (int k = 0; k < KC; k++) ref += (double)A[i * KC + k] * P[k * NR + j];
            worst = fmax(worst, fabs(ref - C[i * NRW + j]));
        }
    free(A), free(P), free(C), free(bias);
    return worst < 1e-5 ? 0 : 1;
}

/* Runs case `which` in a child; *out gets its stderr (truncated to cap). */
static int in_child(int which, char *out, size_t cap) {
    int fd[2];
    if (pipe(fd)) return -1;
    fflush(NULL);
    pid_t pid = fork();
    if (pid == 0) {
        dup2(fd[1], 2);
        close(fd[0]);
        _exit(run_case(which));
    }
    close(fd[1]);
    size_t got = 0;
    ssize_t r;
    while (got < cap - 1 && (r = read(fd[0], out + got, cap - 1 - got)) > 0) got += (size_t)r;
    out[got] = 0;
    while (read(fd[0], &(char){0}, 1) > 0) {}
    close(fd[0]);
    int st = 0;
    waitpid(pid, &st, 0);
    return st;
}
#endif

int main(void) {
#ifndef HM_ASAN
    puts("test_asan_regions: not an AddressSanitizer build; the region checks compile to nothing here");
    return 77;
#else
    if (hm_isa_active() != HM_ISA_AVX512) {
        puts("test_asan_regions: this CPU has no AVX-512; the checked kernel does not run here");
        return 77;
    }
    static char log[1 << 16];
    int st = in_child(FULL, log, sizeof log);
    CHECKF(WIFEXITED(st) && WEXITSTATUS(st) == 0, "exact sizes: status %d, stderr: %.300s", st, log);
    const struct { int which; const char *name, *kind; } bad[] = {
        {SHORT_A, "A's last row", "READ"},
        {SHORT_P, "the packed chunk", "READ"},
        {SHORT_C, "C's last row", "WRITE"},
        {SHORT_BIAS, "the bias", "READ"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        st = in_child(bad[i].which, log, sizeof log);
        CHECKF(!(WIFEXITED(st) && WEXITSTATUS(st) == 0), "%s one float short: the kernel ran clean", bad[i].name);
        CHECKF(strstr(log, "AddressSanitizer: heap-buffer-overflow") && strstr(log, bad[i].kind),
               "%s one float short: no %s heap-buffer-overflow report; stderr: %.300s", bad[i].name, bad[i].kind,
               log);
    }
    return check_summary();
#endif
}
