/* kernels/peak.h - the machine's fp32 FMA peak, measured: the yardstick of
 * `hamer bench`'s "% of peak" (bench/cpu_peak.c prints the bf16 and int8
 * peaks too, outside the build). */
#ifndef HM_PEAK_H
#define HM_PEAK_H

/* fp32 GFLOP/s of nthreads threads (at most 64) each running a
 * register-only FMA loop (12 independent accumulators: issue rate, not
 * latency or memory), calibrated to ~0.1 s on one thread, then all threads
 * timed twice, the better kept; AVX-512 where the CPU has it, else AVX2.
 * 0 when this CPU has no FMA (or is not x86). */
double hm_peak_fp32_gflops(int nthreads);

#endif
