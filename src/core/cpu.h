/* cpu.h - what this CPU can run, read once, and which kernel ISA level the
 * process uses (the one place HAMER_ISA is read): the one CPU-feature
 * dispatch of both engines, the ViT's kernels and the TFLite executor's
 * (kernels/kernels.h turns the level into their functions).
 *
 * x86: features are CPUID bits AND the OS's XSAVE state (XGETBV): AVX-512
 * code needs both. AArch64: the kernel's hardware capabilities
 * (getauxval(AT_HWCAP / AT_HWCAP2) on Linux, sysctlbyname("hw.optional.
 * arm.FEAT_*") on macOS). The vendor is read for one choice only, where no
 * feature bit tells what was measured: hm_cpu_vendor_amd.
 */
#ifndef HM_CORE_CPU_H
#define HM_CORE_CPU_H

/* Kernel ISA levels. x86's are ordered (AVX2 < AVX512); NEON is
 * AArch64's; SCALAR (portable C) runs everywhere. A level runs only on its
 * architecture: use hm_isa_runs, never compare the values. */
typedef enum { HM_ISA_SCALAR = 0, HM_ISA_AVX2 = 1, HM_ISA_AVX512 = 2, HM_ISA_NEON = 3 } hm_isa;
#define HM_ISA_COUNT 4

/* Feature bits of hm_cpu_features(). AVX512 means F+BW+VL+DQ with the OS
 * saving zmm/opmask state; VNNI and BF16 are reported only on top of it. */
enum {
    HM_CPU_AVX2 = 1 << 0,      /* AVX2 + FMA, OS saves ymm */
    HM_CPU_AVX512 = 1 << 1,
    HM_CPU_VNNI = 1 << 2,      /* AVX512_VNNI */
    HM_CPU_BF16 = 1 << 3,      /* AVX512_BF16 */
    HM_CPU_FP16 = 1 << 4,      /* AVX512_FP16 (reported, not used) */
    HM_CPU_AMX = 1 << 5,       /* AMX-TILE + AMX-INT8 (+ VNNI), OS tile state and Linux's
                                * ARCH_REQ_XCOMP_PERM granted (asked for at detection) */
    HM_CPU_AMX_BF16 = 1 << 6,  /* AMX-BF16 on top of HM_CPU_AMX and HM_CPU_BF16 */
    /* AArch64 */
    HM_CPU_NEON = 1 << 8,      /* Advanced SIMD (every AArch64 CPU) */
    HM_CPU_DOTPROD = 1 << 9,   /* SDOT / UDOT (ARMv8.2 dot product) */
    HM_CPU_I8MM = 1 << 10,     /* SMMLA / USMMLA / USDOT (int8 matrix multiply) */
    HM_CPU_ARM_BF16 = 1 << 11, /* BFDOT / BFMMLA */
    HM_CPU_SVE = 1 << 12,      /* SVE (reported, not used) */
};

/* hm_cpu_features: the bits above this CPU has, minus any hidden with
 * hm_cpu_test_hide. hm_cpu_isa: the widest ISA it supports. */
int hm_cpu_features(void);
hm_isa hm_cpu_isa(void);
/* hm_isa_known: isa is one of the enum's values. hm_isa_runs: this CPU
 * can run kernels of level isa (its architecture's, up to its widest, or
 * SCALAR). */
int hm_isa_known(int isa);
int hm_isa_runs(int isa);

/* The ISA kernels and packings use: detected, or HAMER_ISA (read once):
 * amx|avx512|avx2|scalar on x86 (amx is avx512 plus AMX tiles for the
 * int8 GEMM, see hm_amx_active), neon|scalar on AArch64; or hm_isa_force. A HAMER_ISA this CPU lacks or that names
 * nothing is not replaced silently: hm_isa_status reports it. */
hm_isa hm_isa_active(void);
const char *hm_isa_name(hm_isa isa);
/* HM_E_UNSUPPORTED (with a message) if isa exceeds this CPU; HM_E_ARG for a
 * value outside the enum. Overrides HAMER_ISA. Call before packing weights:
 * packed layouts are tied to the ISA. */
int hm_isa_force(hm_isa isa);
/* HM_OK, or HM_E_UNSUPPORTED + message when HAMER_ISA is bad (and no
 * hm_isa_force overrode it). */
int hm_isa_status(void);

/* Whether the int8 fast GEMM runs on AMX tiles: HM_CPU_AMX present (and not
 * hidden), the active ISA avx512, and AMX wanted: by default yes;
 * HAMER_ISA=amx insists (hm_isa_status reports a CPU without it), and
 * HAMER_ISA=avx512 (or narrower) means the VNNI kernel. hm_amx_force(0|1)
 * overrides either (HM_E_UNSUPPORTED to turn it on without AMX). Packings
 * are the same for both, so it may change between calls; results do not. */
int hm_amx_active(void);
int hm_amx_force(int on);

/* 1 on an AMD CPU (CPUID vendor "AuthenticAMD"). Used where a unit's
 * throughput, which no feature bit gives, decides between two kernels that
 * both run (kernels/attn.h: bf16 dot products run at twice the fp32 FMA
 * rate on Zen 4, at half of it on the Intel Xeons measured). */
int hm_cpu_vendor_amd(void);

/* Tests: make this CPU look as if it lacked the given feature bits
 * (HM_CPU_VNNI / HM_CPU_BF16 / HM_CPU_AMX / HM_CPU_AMX_BF16 on x86,
 * HM_CPU_DOTPROD / HM_CPU_I8MM / HM_CPU_ARM_BF16 on AArch64); 0 restores
 * the truth. */
void hm_cpu_test_hide(int mask);

/* Space-separated names of the features present ("avx2 avx512 vnni bf16",
 * "neon dotprod i8mm bf16"). */
const char *hm_cpu_feature_names(void);

/* Online CPUs (sysconf(_SC_NPROCESSORS_ONLN)), at least 1: what a thread
 * count of 0 ("all CPUs") means everywhere. */
int hm_cpu_online(void);

#endif
