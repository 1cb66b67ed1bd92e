/* cpu.c - feature detection (x86: CPUID / XGETBV; AArch64: the kernel's
 * hardware capabilities) and the process-wide ISA choice. */
#define _POSIX_C_SOURCE 200809L
#include "core/cpu.h"

#include <pthread.h>
#include <limits.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "core/util.h"

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#define HM_X86 1
#endif
#if defined(__linux__) && defined(__x86_64__)
#include <sys/syscall.h>
#include <unistd.h>
#endif
#if defined(__aarch64__) && defined(__linux__)
#include <sys/auxv.h>
#endif
#if defined(__aarch64__) && defined(__APPLE__)
#include <sys/sysctl.h>
#endif

#ifdef HM_X86
/* XCR0: which register states the OS saves on a context switch. */
static uint64_t hm_xgetbv0(void) {
    uint32_t lo, hi;
    __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
    return ((uint64_t)hi << 32) | lo;
}

/* Linux (5.16+) keeps the 8 KiB tile data out of a process's XSAVE area
 * until the process asks for it; a tile instruction before that faults
 * (SIGILL). The permission is process-wide and inherited by fork, so one
 * request at detection covers every thread. Refused, or an older kernel
 * (EINVAL), or another OS: no AMX. */
static int hm_amx_permit(void) {
#if defined(__linux__) && defined(__x86_64__) && defined(SYS_arch_prctl)
    enum { ARCH_REQ_XCOMP_PERM = 0x1023, XFEATURE_XTILEDATA = 18 };
    return syscall(SYS_arch_prctl, ARCH_REQ_XCOMP_PERM, XFEATURE_XTILEDATA) == 0;
#else
    return 0;
#endif
}

static int hm_detect(void) {
    unsigned a, b, c, d;
    if (!__get_cpuid(1, &a, &b, &c, &d)) return 0;
    int fma = (c >> 12) & 1, osxsave = (c >> 27) & 1, avx = (c >> 28) & 1;
    if (!osxsave || !avx || !fma) return 0;
    uint64_t xcr0 = hm_xgetbv0();
    if ((xcr0 & 0x6) != 0x6) return 0; /* XMM + YMM state */
    if (!__get_cpuid_count(7, 0, &a, &b, &c, &d)) return 0;
    if (!((b >> 5) & 1)) return 0; /* AVX2 */
    int bits = HM_CPU_AVX2;
    int f = (b >> 16) & 1, dq = (b >> 17) & 1, bw = (b >> 30) & 1, vl = (b >> 31) & 1;
    /* opmask + upper halves of zmm0-15 + zmm16-31 */
    if (!(f && dq && bw && vl && (xcr0 & 0xe0) == 0xe0)) return bits;
    bits |= HM_CPU_AVX512;
    if ((c >> 11) & 1) bits |= HM_CPU_VNNI;
    if ((d >> 23) & 1) bits |= HM_CPU_FP16;
    /* AMX-TILE and AMX-INT8, XCR0 bits 17-18 (XTILECFG, XTILEDATA), and
     * the OS's permission; the kernels also need VNNI (K tails, epilogue). */
    if ((bits & HM_CPU_VNNI) && ((d >> 24) & 1) && ((d >> 25) & 1) && (xcr0 & 0x60000) == 0x60000 &&
        hm_amx_permit())
        bits |= HM_CPU_AMX;
    unsigned d7 = d;
    unsigned max7 = a;
    if (max7 >= 1 && __get_cpuid_count(7, 1, &a, &b, &c, &d) && ((a >> 5) & 1)) bits |= HM_CPU_BF16;
    /* AMX-BF16 on top of the tiles; its K tails use AVX512-BF16. */
    if ((bits & HM_CPU_AMX) && (bits & HM_CPU_BF16) && ((d7 >> 22) & 1)) bits |= HM_CPU_AMX_BF16;
    return bits;
}
#elif defined(__aarch64__) && defined(__linux__)
/* Linux's AArch64 hwcap bits (arch/arm64/include/uapi/asm/hwcap.h),
 * spelled out so an older libc's headers do not matter. */
static int hm_detect(void) {
    enum { HWCAP_ASIMD_ = 1 << 1, HWCAP_ASIMDDP_ = 1 << 20, HWCAP_SVE_ = 1 << 22 };
    enum { HWCAP2_I8MM_ = 1 << 13, HWCAP2_BF16_ = 1 << 14 };
    unsigned long hw = getauxval(AT_HWCAP), hw2 = getauxval(AT_HWCAP2);
    int bits = 0;
    if (hw & HWCAP_ASIMD_) bits |= HM_CPU_NEON;
    if (!bits) return 0;
    if (hw & HWCAP_ASIMDDP_) bits |= HM_CPU_DOTPROD;
    if (hw & HWCAP_SVE_) bits |= HM_CPU_SVE;
    if (hw2 & HWCAP2_I8MM_) bits |= HM_CPU_I8MM;
    if (hw2 & HWCAP2_BF16_) bits |= HM_CPU_ARM_BF16;
    return bits;
}
#elif defined(__aarch64__) && defined(__APPLE__)
static int hm_sysctl_on(const char *name) {
    int v = 0;
    size_t n = sizeof v;
    return sysctlbyname(name, &v, &n, NULL, 0) == 0 && v != 0;
}

/* Every Apple-silicon CPU has Advanced SIMD; the rest is asked by name. */
static int hm_detect(void) {
    int bits = HM_CPU_NEON;
    if (hm_sysctl_on("hw.optional.arm.FEAT_DotProd")) bits |= HM_CPU_DOTPROD;
    if (hm_sysctl_on("hw.optional.arm.FEAT_I8MM")) bits |= HM_CPU_I8MM;
    if (hm_sysctl_on("hw.optional.arm.FEAT_BF16")) bits |= HM_CPU_ARM_BF16;
    return bits;
}
#elif defined(__aarch64__)
/* Another OS: Advanced SIMD is part of AArch64; nothing else is assumed. */
static int hm_detect(void) { return HM_CPU_NEON; }
#else
static int hm_detect(void) { return 0; }
#endif

static pthread_once_t hm_once = PTHREAD_ONCE_INIT;
static int hm_bits;            /* written once under hm_once */
static int hm_amd;             /* likewise: vendor AuthenticAMD */
static atomic_int hm_hidden;
static atomic_int hm_active;   /* the ISA new packings and kernels use */
static atomic_int hm_env_bad;  /* HAMER_ISA asked for something we lack */
static char hm_env_val[32];    /* its value, for the message */
static char hm_names[96];
static atomic_int hm_amx_on;   /* AMX kernels wanted (HAMER_ISA / hm_amx_force) */

static hm_isa hm_isa_of(int bits) {
    return bits & HM_CPU_AVX512 ? HM_ISA_AVX512
           : bits & HM_CPU_AVX2 ? HM_ISA_AVX2
           : bits & HM_CPU_NEON ? HM_ISA_NEON
                                : HM_ISA_SCALAR;
}

/* Whether a CPU with feature bits `bits` runs level isa. */
static int hm_isa_runs_on(int isa, int bits) {
    switch (isa) {
    case HM_ISA_SCALAR: return 1;
    case HM_ISA_AVX2: return (bits & HM_CPU_AVX2) != 0;
    case HM_ISA_AVX512: return (bits & HM_CPU_AVX512) != 0;
    case HM_ISA_NEON: return (bits & HM_CPU_NEON) != 0;
    }
    return 0;
}

static int hm_isa_from_name(const char *s) {
    if (!strcasecmp(s, "amx") || !strcasecmp(s, "avx512")) return HM_ISA_AVX512;
    if (!strcasecmp(s, "avx2")) return HM_ISA_AVX2;
    if (!strcasecmp(s, "neon")) return HM_ISA_NEON;
    if (!strcasecmp(s, "scalar")) return HM_ISA_SCALAR;
    return -1;
}

/* Detect, then apply HAMER_ISA once; a bad value is remembered and reported
 * by hm_isa_status rather than silently replaced. */
static int hm_detect_amd(void) {
#ifdef HM_X86
    unsigned a, b, c, d;
    if (!__get_cpuid(0, &a, &b, &c, &d)) return 0;
    /* the vendor string is EBX, EDX, ECX: "Auth" "enti" "cAMD" */
    return b == 0x68747541u && d == 0x69746e65u && c == 0x444d4163u;
#else
    return 0;
#endif
}

static void hm_init(void) {
    hm_bits = hm_detect();
    hm_amd = hm_detect_amd();
    hm_isa cpu = hm_isa_of(hm_bits);
    atomic_store(&hm_active, (int)cpu);
    static const struct { int bit; const char *name; } names[] = {
        {HM_CPU_AVX2, "avx2"}, {HM_CPU_AVX512, "avx512"}, {HM_CPU_VNNI, "vnni"},
        {HM_CPU_BF16, "bf16"}, {HM_CPU_FP16, "fp16"}, {HM_CPU_AMX, "amx"}, {HM_CPU_AMX_BF16, "amx-bf16"},
        {HM_CPU_NEON, "neon"}, {HM_CPU_DOTPROD, "dotprod"}, {HM_CPU_I8MM, "i8mm"}, {HM_CPU_ARM_BF16, "bf16"},
        {HM_CPU_SVE, "sve"},
    };
    size_t n = 0;
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
        if (hm_bits & names[i].bit)
            n += (size_t)snprintf(hm_names + n, sizeof hm_names - n, n ? " %s" : "%s", names[i].name);
    const char *env = getenv("HAMER_ISA");
    int amx = (hm_bits & HM_CPU_AMX) != 0;
    /* AMX is the level above avx512: on by default, HAMER_ISA=amx insists on
     * it, and any narrower HAMER_ISA (avx512 included) turns it off. */
    atomic_store(&hm_amx_on, amx && (!env || !*env || !strcasecmp(env, "amx")));
    if (!env || !*env) return;
    int want = hm_isa_from_name(env);
    if (want < 0 || !hm_isa_runs_on(want, hm_bits) || (!strcasecmp(env, "amx") && !amx)) {
        snprintf(hm_env_val, sizeof hm_env_val, "%s", env);
        atomic_store(&hm_env_bad, 1);
    } else {
        atomic_store(&hm_active, want);
    }
}

int hm_cpu_features(void) {
    pthread_once(&hm_once, hm_init);
    return hm_bits & ~atomic_load(&hm_hidden);
}

hm_isa hm_cpu_isa(void) {
    pthread_once(&hm_once, hm_init);
    return hm_isa_of(hm_bits);
}

int hm_cpu_vendor_amd(void) {
    pthread_once(&hm_once, hm_init);
    return hm_amd;
}

const char *hm_cpu_feature_names(void) {
    pthread_once(&hm_once, hm_init);
    return hm_names;
}

void hm_cpu_test_hide(int mask) {
    const int hideable = HM_CPU_VNNI | HM_CPU_BF16 | HM_CPU_AMX | HM_CPU_AMX_BF16 | HM_CPU_DOTPROD | HM_CPU_I8MM |
                         HM_CPU_ARM_BF16;
    atomic_store(&hm_hidden, mask & hideable);
}

int hm_isa_known(int isa) { return isa >= 0 && isa < HM_ISA_COUNT; }

int hm_isa_runs(int isa) {
    pthread_once(&hm_once, hm_init);
    return hm_isa_runs_on(isa, hm_bits);
}

int hm_amx_active(void) {
    pthread_once(&hm_once, hm_init);
    return atomic_load(&hm_amx_on) && (hm_cpu_features() & HM_CPU_AMX) && hm_isa_active() == HM_ISA_AVX512;
}

int hm_amx_force(int on) {
    pthread_once(&hm_once, hm_init);
    if (on && !(hm_bits & HM_CPU_AMX))
        return hm_err(HM_E_UNSUPPORTED, "AMX forced but this CPU or OS does not offer AMX-INT8 tiles (cpu: %s)",
                      hm_names[0] ? hm_names : "none");
    atomic_store(&hm_amx_on, on != 0);
    return HM_OK;
}

hm_isa hm_isa_active(void) {
    pthread_once(&hm_once, hm_init);
    return (hm_isa)atomic_load(&hm_active);
}

const char *hm_isa_name(hm_isa isa) {
    switch (isa) {
    case HM_ISA_SCALAR: return "scalar";
    case HM_ISA_AVX2: return "avx2";
    case HM_ISA_AVX512: return "avx512";
    case HM_ISA_NEON: return "neon";
    }
    return "unknown";
}

int hm_isa_force(hm_isa isa) {
    hm_isa cpu = hm_cpu_isa();
    if (!hm_isa_known((int)isa)) return hm_err(HM_E_ARG, "hm_isa_force: invalid ISA value %d", (int)isa);
    if (!hm_isa_runs((int)isa))
        return hm_err(HM_E_UNSUPPORTED, "ISA %s forced but this CPU supports at most %s", hm_isa_name(isa),
                      hm_isa_name(cpu));
    atomic_store(&hm_active, (int)isa);
    atomic_store(&hm_env_bad, 0); /* an explicit choice overrides HAMER_ISA */
    return HM_OK;
}

int hm_isa_status(void) {
    hm_isa cpu = hm_cpu_isa();
    if (!atomic_load(&hm_env_bad)) return HM_OK;
#if defined(__aarch64__)
    return hm_err(HM_E_UNSUPPORTED, "HAMER_ISA=%s: not one of neon|scalar that this CPU (%s%s) supports",
#else
    return hm_err(HM_E_UNSUPPORTED, "HAMER_ISA=%s: not one of amx|avx512|avx2|scalar that this CPU (%s%s) supports",
#endif
                  hm_env_val, hm_isa_name(cpu), hm_bits & HM_CPU_AMX ? " + amx" : "");
}

int hm_cpu_online(void) {
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    return n < 1 ? 1 : n > INT_MAX ? INT_MAX : (int)n;
}
