/* gemm_lowp.c - the low-precision ("fast") GEMM: packing, CPU checks and
 * the driver around the kernels (x86/gemm_lowp_avx512vnni.c,
 * x86/gemm_lowp_amx.c; arm/gemm_lowp_neon.c, _dotprod.c, _i8mm.c, _bf16.c).
 *
 * Scheme (HM_LOWP_INT8, the default FAST):
 *   weights      per-output-channel symmetric int8, s_w[n] = max|W[n,:]| / 127,
 *                packed in NR = 64 column panels, 4 k per 32-bit lane
 *                (the vpdpbusd operand layout), plus colsum[n] = sum_k q[n,k];
 *   activations  quantised inside hm_gemm, per row (token), asymmetric u8:
 *                x ~= s_a (q - z) over [min(x, 0), max(x, 0)]. Up to
 *                HM_LOWP_MAX_OUTLIERS values per row that exceed 8 x the
 *                row's mean |x| are taken off the grid and applied in fp32
 *                against the same int8 weights (per-token scales handle
 *                outlier tokens; this handles outlier channels such as a
 *                LayerNorm gain of 20, without calibration data and
 *                without making a row depend on the other rows in the call);
 *   product      int32 sums (exact), then
 *                C = s_w[n] (s_a (acc - z colsum[n]) + outliers) + bias,
 *                with the usual STORE / GELU / ACCUM epilogue.
 * bf16 (HM_LOWP_BF16): W and A rounded to bf16, vdpbf16ps with fp32
 * accumulation. It is what hm_pack_weights_fast_sensitive packs (fp32 on
 * CPUs without AVX512-BF16): the model loader uses it for the attention
 * output projection, whose input is mostly a component shared by all
 * tokens; int8 there doubled the end-to-end error on the synthetic model
 * (worst crop: vertices 1.03 -> 0.59 mm, keypoints 1.26 -> 0.72 mm) for
 * ~2-3% of the run time. HAMER_LOWP=bf16 makes every FAST matmul bf16.
 *
 * Why int8 (AMD Zen 4, measured with register-only loops and
 * bench/lowp_bench.c): per core, vpdpbusd peaks at ~440 Gop/s and
 * vdpbf16ps at ~230 GFLOP/s against ~108 GFLOP/s of fp32 FMA, and these
 * kernels reach ~360-435 Gop/s (int8) and ~200-230 GFLOP/s (bf16) on the
 * ViT shapes, i.e. 3.5-4.2x and ~2x the fp32 path. The target, 2.3x ONNX
 * Runtime fp32 at ~75% of the fp32 peak, is ~1.7x the fp32 peak end to
 * end: bf16 would need > 86% of its peak with nothing else taking time.
 * AVX512-FP16 does not exist on Zen 4. int8 costs accuracy (~1% relative
 * RMS per matmul, against ~0.2% for bf16), which the end-to-end gate
 * still clears (see docs/benchmarks.md, "The fast precision").
 *
 * Scratch: the quantised activations live in the pool's scratch buffer
 * (core/pool.h), which the model state reserves for its largest call
 * (hm_gemm_scratch_bytes), so hm_gemm allocates nothing in a forward. A
 * call that finds too little scratch grows it, and fails with HM_E_NOMEM,
 * C untouched, if that is impossible. Without a pool (tests, tools) each
 * call allocates its own.
 *
 * Results do not depend on the thread count (int32 sums are exact, every
 * epilogue value is computed by one thread in a fixed order) nor on the
 * other rows of A (every row has its own scale, zero and outliers).
 *
 * AArch64 (HM_LOWP_INT8_NEON / HM_LOWP_BF16_NEON, gemm_lowp.h): the same
 * scheme in its own panel layout, int8 on SDOT (dot product) or, where the
 * CPU has i8mm, SMMLA (twice the multiply-adds per instruction), chosen per
 * call: both read one packing and give the same int32 sums. Activations are
 * quantised as on x86 (the same scale, zero point and outliers, from the
 * same float operations) and stored as q - 128, a signed byte (SDOT and
 * SMMLA multiply signed by signed); the epilogue folds the 128 back into
 * the zero point: sum (q - 128) w - (z - 128) colsum = sum q w - z colsum,
 * exact in int32. So an int8 matmul gives the same floats as x86's, except
 * where its GELU epilogue runs (the AVX-512 GELU takes its reciprocal from
 * vrcp14ps; the NEON one divides, as AVX2's). bf16: BFMMLA, where the CPU
 * has BF16 (BFDOT is not used: every CPU with BF16 has BFMMLA, which does
 * twice its multiply-adds per instruction); sensitive matmuls fp32 without.
 */
#define _POSIX_C_SOURCE 200809L
#include "kernels/gemm_lowp.h"

#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "core/cpu.h"
#include "core/util.h"
#include "kernels/gemm_fp32.h"

/* Rows per GEMM task (with the panel, the unit of work) at most: 192 = one
 * crop, so each panel is fetched once per crop. With few panels and many
 * threads the blocks shrink (see hm_gemm_lowp) so every thread has work. */
#define HM_LOWP_MC 192
/* Rows per quantisation task. */
#define HM_LOWP_QROWS 8

/* Packed block behind hm_packed.lp: this header, then (int8) colsum[Np]
 * int32 and the panels, or (bf16) the panels. Offsets are 64-byte aligned. */
typedef struct {
    int32_t kind;  /* hm_lowp_kind */
    int32_t nr;    /* panel width */
    int32_t kp;    /* K padded to the kernel's k group (4 or 2) */
    int32_t np;    /* number of panels */
    size_t cs_off; /* byte offset of colsum (int8 only) */
    size_t w_off;  /* byte offset of panel 0 */
    size_t panel;  /* bytes per panel */
} hm_lowp_hdr;

#define HM_LOWP_HDR_BYTES 64
_Static_assert(sizeof(hm_lowp_hdr) <= HM_LOWP_HDR_BYTES, "header must fit its slot");

/* ---- CPU support and variant selection --------------------------------- */

/* The kernels are AVX-512 F/BW/VL/DQ code: they need the same detection
 * (and OS zmm state) as the fp32 AVX-512 path, plus the extensions
 * (AArch64: the dot product for int8, BF16 for bf16). */
static int hm_lowp_cpu_bits(void) {
    int f = hm_cpu_features();
#if defined(__aarch64__)
    return f & (HM_CPU_DOTPROD | HM_CPU_I8MM | HM_CPU_ARM_BF16);
#else
    return f & HM_CPU_AVX512 ? f & (HM_CPU_VNNI | HM_CPU_BF16) : 0;
#endif
}

/* This build's architecture's layouts, the feature bit each needs, and
 * the ISA level its kernels run under. */
#if defined(__aarch64__)
#define HM_LOWP_OWN_INT8 HM_LOWP_INT8_NEON
#define HM_LOWP_OWN_BF16 HM_LOWP_BF16_NEON
#define HM_LOWP_NEED_INT8 HM_CPU_DOTPROD
#define HM_LOWP_NEED_BF16 HM_CPU_ARM_BF16
#define HM_LOWP_ISA HM_ISA_NEON
#else
#define HM_LOWP_OWN_INT8 HM_LOWP_INT8
#define HM_LOWP_OWN_BF16 HM_LOWP_BF16
#define HM_LOWP_NEED_INT8 HM_CPU_VNNI
#define HM_LOWP_NEED_BF16 HM_CPU_BF16
#define HM_LOWP_ISA HM_ISA_AVX512
#endif

static int hm_kind_own(int kind) { return kind == HM_LOWP_OWN_INT8 || kind == HM_LOWP_OWN_BF16; }
static int hm_kind_valid(int kind) { return kind >= 0 && kind < HM_LOWP_KINDS; }
static int hm_kind_neon(int kind) { return kind == HM_LOWP_INT8_NEON || kind == HM_LOWP_BF16_NEON; }

const char *hm_lowp_kind_name(int kind) {
    static const char *const names[HM_LOWP_KINDS] = {"int8", "bf16", "int8-neon", "bf16-neon"};
    return hm_kind_valid(kind) ? names[kind] : "unknown";
}

static pthread_once_t hm_kind_once = PTHREAD_ONCE_INIT;
static atomic_int hm_kind;     /* hm_lowp_kind new packings use */
static atomic_int hm_kind_bad; /* HAMER_LOWP named something unknown */

static void hm_kind_init(void) {
    const char *env = getenv("HAMER_LOWP");
    atomic_store(&hm_kind, HM_LOWP_OWN_INT8);
    if (!env || !*env || !strcasecmp(env, "int8")) return;
    if (!strcasecmp(env, "bf16")) atomic_store(&hm_kind, HM_LOWP_OWN_BF16);
    else atomic_store(&hm_kind_bad, 1);
}

int hm_lowp_force_kind(hm_lowp_kind kind) {
    pthread_once(&hm_kind_once, hm_kind_init);
    if (kind == HM_LOWP_INT8) kind = HM_LOWP_OWN_INT8; /* int8 / bf16: this build's */
    else if (kind == HM_LOWP_BF16) kind = HM_LOWP_OWN_BF16;
    if (!hm_kind_own((int)kind))
        return hm_err(HM_E_ARG, "hm_lowp_force_kind: invalid kind %d for this build", (int)kind);
    atomic_store(&hm_kind, (int)kind);
    atomic_store(&hm_kind_bad, 0);
    return HM_OK;
}

hm_lowp_kind hm_lowp_kind_active(void) {
    pthread_once(&hm_kind_once, hm_kind_init);
    return (hm_lowp_kind)atomic_load(&hm_kind);
}

/* The scheme's name: the layout's, not the kernel's (SDOT and SMMLA read
 * one packing and give the same results, as do VNNI and AMX), so a
 * packed model file's scheme names what it needs. */
static const char *hm_kind_scheme(int kind) {
    switch (kind) {
    case HM_LOWP_BF16: return "bf16 (w, a: bf16; fp32 accumulate; vdpbf16ps)";
    case HM_LOWP_BF16_NEON: return "bf16-neon (w, a: bf16; fp32 accumulate; bfmmla)";
    case HM_LOWP_INT8_NEON: return "int8-neon (w: per-channel s8; a: per-token u8 + fp32 outliers; sdot / smmla)";
    default: return "int8-vnni (w: per-channel s8; a: per-token u8 + fp32 outliers)";
    }
}

const char *hm_precision_scheme(hm_precision prec) {
    if (prec == HM_PREC_FP32) return "fp32";
    if (prec != HM_PREC_FAST) return "unknown";
    int kind = (int)hm_lowp_kind_active(), bits = hm_lowp_cpu_bits();
    int need = hm_lowp_kind_is_bf16(kind) ? HM_LOWP_NEED_BF16 : HM_LOWP_NEED_INT8;
    if (atomic_load(&hm_kind_bad) || !(bits & need)) return "unavailable";
    if (hm_lowp_kind_is_bf16(kind)) return hm_kind_scheme(kind);
    /* What hm_pack_weights_fast_sensitive gives the sensitive matmuls. */
#if defined(__aarch64__)
    return bits & HM_LOWP_NEED_BF16
               ? "int8-neon (w: per-channel s8; a: per-token u8 + fp32 outliers; sdot / smmla); sensitive matmuls: bf16"
               : "int8-neon (w: per-channel s8; a: per-token u8 + fp32 outliers; sdot / smmla); sensitive matmuls: fp32";
#else
    return bits & HM_CPU_BF16
               ? "int8-vnni (w: per-channel s8; a: per-token u8 + fp32 outliers); sensitive matmuls: bf16"
               : "int8-vnni (w: per-channel s8; a: per-token u8 + fp32 outliers); sensitive matmuls: fp32";
#endif
}

int hm_lowp_amx_in_use(void) {
#if defined(__x86_64__)
    return hm_lowp_amx_built() && hm_amx_active();
#else
    return 0;
#endif
}

/* HM_OK if FAST of this kind can run now, else HM_E_UNSUPPORTED + message. */
static int hm_lowp_check(int kind) {
    if (atomic_load(&hm_kind_bad))
        return hm_err(HM_E_UNSUPPORTED, "HAMER_LOWP=%s: not one of int8|bf16", getenv("HAMER_LOWP"));
    if (!hm_kind_own(kind))
        return hm_err(HM_E_UNSUPPORTED, "precision 'fast': low-precision layout %s is %s's; this build runs %s's",
                      hm_lowp_kind_name(kind), hm_kind_neon(kind) ? "AArch64" : "x86",
                      hm_kind_neon(HM_LOWP_OWN_INT8) ? "AArch64" : "x86");
#if defined(__aarch64__)
    int need = hm_lowp_kind_is_bf16(kind) ? HM_CPU_ARM_BF16 : HM_CPU_DOTPROD;
    const char *what = hm_lowp_kind_is_bf16(kind) ? "the BF16 extension (BFMMLA)" : "the dot product (SDOT, ARMv8.2)";
#else
    int need = kind == HM_LOWP_BF16 ? HM_CPU_BF16 : HM_CPU_VNNI;
    const char *what = kind == HM_LOWP_BF16 ? "AVX-512 BF16" : "AVX-512 VNNI";
#endif
    if (!(hm_lowp_cpu_bits() & need))
        return hm_err(HM_E_UNSUPPORTED, "precision 'fast' (%s) needs %s, which this CPU lacks; use fp32",
                      hm_kind_scheme(kind), what);
    /* A forced narrower ISA (HAMER_ISA / hm_gemm_force_isa) is a request
     * not to run AVX-512 (AArch64: Advanced SIMD) code: honour it rather
     * than ignore it. */
    if (hm_isa_active() != HM_LOWP_ISA)
        return hm_err(HM_E_UNSUPPORTED, "precision 'fast' needs %s but the active ISA is forced to %s",
                      HM_LOWP_ISA == HM_ISA_NEON ? "the neon kernels" : "AVX-512", hm_isa_name(hm_isa_active()));
    return HM_OK;
}

/* ---- packing ----------------------------------------------------------- */

static size_t hm_round64(size_t n) { return (n + 63) & ~(size_t)63; }

/* Round half away from zero, |v| <= 127 (v is clamped first, so the cast
 * is always defined). */
static int8_t hm_q8(float v) {
    v = v > 127.0f ? 127.0f : v < -127.0f ? -127.0f : v;
    return (int8_t)(int)(v + (v >= 0.0f ? 0.5f : -0.5f));
}

/* The block header of an N x K packing of `kind`: the one place its layout
 * is computed (packing, sizes and the packed-file check all use it). */
static void hm_lowp_hdr_for(int kind, int N, int K, hm_lowp_hdr *h) {
    int i8 = !hm_lowp_kind_is_bf16(kind);
    /* k group: x86 4 bytes (vpdpbusd) / 2 bf16; AArch64 8 bytes / 4 bf16 */
    int kg = hm_kind_neon(kind) ? (i8 ? 8 : 4) : (i8 ? 4 : 2);
    memset(h, 0, sizeof *h);
    h->kind = kind;
    h->nr = hm_kind_neon(kind) ? HM_LOWP_NEON_NR : i8 ? HM_LOWP_I8_NR : HM_LOWP_BF_NR;
    h->kp = (K + kg - 1) / kg * kg;
    h->np = (N + h->nr - 1) / h->nr;
    size_t npad = (size_t)h->np * h->nr;
    h->panel = hm_round64((size_t)h->kp * h->nr * (i8 ? 1 : 2));
    h->cs_off = HM_LOWP_HDR_BYTES;
    h->w_off = h->cs_off + (i8 ? hm_round64(npad * sizeof(int32_t)) : 0);
}

/* Byte offset of W[n, k] in its int8 panel (column j = n % nr):
 * x86: k groups of 4, columns side by side (vpdpbusd's operand);
 * AArch64: k groups of 8, column pairs side by side (gemm_lowp.h). */
static size_t hm_i8_at(const hm_lowp_hdr *h, int j, int k) {
    if (hm_kind_neon(h->kind))
        return (size_t)(k >> 3) * h->nr * 8 + (size_t)(j >> 1) * 16 + (size_t)(j & 1) * 8 + (size_t)(k & 7);
    return (size_t)(k >> 2) * h->nr * 4 + (size_t)j * 4 + (size_t)(k & 3);
}

/* The same for bf16, in 2-byte values: x86 k pairs, AArch64 k groups of 4. */
static size_t hm_bf_at(const hm_lowp_hdr *h, int j, int k) {
    if (hm_kind_neon(h->kind))
        return (size_t)(k >> 2) * h->nr * 4 + (size_t)(j >> 1) * 8 + (size_t)(j & 1) * 4 + (size_t)(k & 3);
    return (size_t)(k >> 1) * h->nr * 2 + (size_t)j * 2 + (size_t)(k & 1);
}

static int hm_pack_int8(hm_packed *p, const float *W, int ldw, int N, int K, hm_lowp_hdr *h, uint8_t *blk) {
    int32_t *cs = (int32_t *)(blk + h->cs_off);
    float *sw = p->lp_scale;
    for (int n = 0; n < N; n++) {
        const float *row = W + (size_t)n * ldw;
        float amax = 0.0f;
        int finite = 1;
        for (int k = 0; k < K; k++) {
            float a = fabsf(row[k]);
            finite &= a <= 3.4e38f; /* false for inf and NaN */
            amax = a > amax ? a : amax;
        }
        if (!finite)
            return hm_err(HM_E_ARG, "precision 'fast': weight row %d is not finite", n);
        float inv = amax > 0.0f ? 127.0f / amax : 0.0f;
        sw[n] = amax / 127.0f;
        int8_t *dst = (int8_t *)(blk + h->w_off + (size_t)(n / h->nr) * h->panel);
        int32_t sum = 0;
        for (int k = 0; k < K; k++) {
            int8_t q = hm_q8(row[k] * inv);
            dst[hm_i8_at(h, n % h->nr, k)] = q;
            sum += q;
        }
        cs[n] = sum;
    }
    return HM_OK;
}

/* Round to nearest even bf16 (finite inputs; NaN stays NaN). */
static uint16_t hm_to_bf16(float v) {
    uint32_t u;
    memcpy(&u, &v, sizeof u);
    if ((u & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((u >> 16) | 0x40);
    u += 0x7fffu + ((u >> 16) & 1);
    return (uint16_t)(u >> 16);
}

static void hm_pack_bf16(const float *W, int ldw, int N, int K, hm_lowp_hdr *h, uint8_t *blk) {
    for (int n = 0; n < N; n++) {
        const float *row = W + (size_t)n * ldw;
        uint16_t *dst = (uint16_t *)(blk + h->w_off + (size_t)(n / h->nr) * h->panel);
        for (int k = 0; k < K; k++) dst[hm_bf_at(h, n % h->nr, k)] = hm_to_bf16(row[k]);
    }
}

int hm_pack_lowp(hm_packed *p, const float *W, int ldw, const float *bias, int N, int K, int kind) {
    int rc = hm_lowp_check(kind);
    if (rc != HM_OK) return rc;
    /* int32 sums stay exact while K * 255 * 127 < 2^31 (AArch64's signed
     * q - 128: K * 128 * 127, and the final sum is the same). */
    if (!hm_lowp_kind_is_bf16(kind) && K > 65536)
        return hm_err(HM_E_UNSUPPORTED, "precision 'fast': K = %d exceeds the int8 kernel's limit of 65536", K);

    hm_lowp_hdr h;
    hm_lowp_hdr_for(kind, N, K, &h);
    int i8 = !hm_lowp_kind_is_bf16(kind);
    size_t npad = (size_t)h.np * h.nr;
    size_t bytes = h.w_off + (size_t)h.np * h.panel;

    uint8_t *blk = hm_alloc(bytes);
    float *sw = i8 ? hm_alloc(npad * sizeof(float)) : NULL;
    float *b = bias ? hm_alloc(npad * sizeof(float)) : NULL;
    if (!blk || (i8 && !sw) || (bias && !b)) {
        hm_free(blk), hm_free(sw), hm_free(b);
        return HM_E_NOMEM;
    }
    /* Zero padding: panel columns past N and k past K contribute nothing. */
    memset(blk, 0, bytes);
    if (sw) memset(sw, 0, npad * sizeof(float));
    if (b) {
        memset(b, 0, npad * sizeof(float));
        memcpy(b, bias, (size_t)N * sizeof(float));
    }
    memcpy(blk, &h, sizeof h);
    p->lp = blk;
    p->lp_scale = sw;
    p->bias = b;
    p->N = N;
    p->K = K;
    p->isa = HM_LOWP_ISA;
    p->prec = HM_PREC_FAST;
    if (i8) rc = hm_pack_int8(p, W, ldw, N, K, &h, blk);
    else hm_pack_bf16(W, ldw, N, K, &h, blk);
    if (rc != HM_OK) {
        hm_free(p->lp), hm_free(p->lp_scale), hm_free(p->bias);
        memset(p, 0, sizeof *p);
    }
    return rc;
}

int hm_lowp_sensitive_kind(void) {
    int rc = hm_lowp_check((int)hm_lowp_kind_active());
    if (rc != HM_OK) return rc;
    return hm_lowp_cpu_bits() & HM_LOWP_NEED_BF16 ? HM_LOWP_OWN_BF16 : HM_LOWP_FP32;
}

/* ---- driver ------------------------------------------------------------ */

/* The kernels one call runs, decided once per call so that every block of
 * it uses the same ones: the architecture's, with the AMX blocks where
 * they are in use (the same int8 results, bf16 to float rounding; see
 * gemm_lowp_amx.c), and on AArch64 SMMLA where the CPU has i8mm, else SDOT
 * (the same results). mr: the rows of the kernel's register tile. pairs:
 * quantised rows are stored as interleaved pairs (AArch64, gemm_lowp.h). */
typedef struct {
    void (*quant_row)(const float *x, int K, int Kp, uint8_t *q, hm_lowp_row *r, int32_t *oidx, float *oval);
    void (*i8_block)(int m, int nr, int Kp, const uint8_t *Aq, size_t lda, const hm_lowp_row *rows,
                     const int32_t *oidx, const float *oval, const int8_t *P, const int32_t *cs, const float *sw,
                     float *C, size_t ldc, const hm_lowp_epi *e);
    void (*bf16_row)(const float *x, int K, int Kp, uint16_t *out);
    void (*bf16_block)(int m, int nr, int Kp, const uint16_t *A, size_t lda, const uint16_t *P, float *C,
                       size_t ldc, const hm_lowp_epi *e);
    int mr;
    int pairs;
} hm_lowp_kern;

/* The kernels for a call of variant `kind` (hm_lowp_check passed). */
static void hm_lowp_kern_for(int kind, hm_lowp_kern *k) {
    memset(k, 0, sizeof *k);
#if defined(__x86_64__)
    const int i8 = kind == HM_LOWP_INT8;
    const int amx = i8 && hm_lowp_amx_in_use();
    const int amx_bf = !i8 && hm_lowp_amx_in_use() && hm_lowp_amx_bf16_built() && (hm_cpu_features() & HM_CPU_AMX_BF16);
    k->quant_row = hm_lowp_quant_row_avx512vnni;
    k->i8_block = amx ? hm_lowp_i8_block_amx : hm_lowp_i8_block_avx512vnni;
    k->bf16_row = hm_lowp_bf16_row_avx512vnni;
    k->bf16_block = amx_bf ? hm_lowp_bf16_block_amx : hm_lowp_bf16_block_avx512vnni;
    k->mr = amx || amx_bf ? 32 : i8 ? HM_LOWP_I8_MR : HM_LOWP_BF_MR; /* AMX: two 16-row tiles */
#elif defined(__aarch64__)
    const int i8 = kind == HM_LOWP_INT8_NEON, f = hm_cpu_features();
    const int mmla = (f & (HM_CPU_I8MM | HM_CPU_DOTPROD)) == (HM_CPU_I8MM | HM_CPU_DOTPROD);
    k->quant_row = hm_lowp_quant_row_neon;
    k->i8_block = !(f & HM_CPU_DOTPROD) ? NULL : mmla ? hm_lowp_i8_block_i8mm : hm_lowp_i8_block_dotprod;
    k->bf16_row = f & HM_CPU_ARM_BF16 ? hm_lowp_bf16_row_neon : NULL;
    k->bf16_block = f & HM_CPU_ARM_BF16 ? hm_lowp_bf16_block_bfmmla : NULL;
    k->mr = i8 && !mmla ? HM_LOWP_DOT_MR : HM_LOWP_MMLA_MR;
    k->pairs = 1;
#else
    (void)kind;
#endif
}

typedef struct {
    int M, K, mc, nmb;
    const float *A;
    size_t lda;
    const hm_packed *W;
    const hm_lowp_hdr *h;
    float *C;
    size_t ldc;
    hm_epilogue epi;
    uint8_t *aq;          /* quantised A: M rows of aq_ld bytes (pairs: see hm_lowp_qrow) */
    size_t aq_ld;
    hm_lowp_row *rows;    /* int8: per-row scale / zero / outlier count */
    int32_t *oidx;        /* int8: M x HM_LOWP_MAX_OUTLIERS */
    float *oval;
    const hm_lowp_kern *k;/* this call's kernels (hm_lowp_kern_for) */
    int group;            /* consecutive panels per task */
} hm_lowp_job;

/* Where quantised row i starts: row i * aq_ld, or with pairs (AArch64)
 * its pair's block of 2 aq_ld bytes, 8 bytes in for the odd row (the
 * rows' 8-byte groups alternate). */
static uint8_t *hm_lowp_qrow(const hm_lowp_job *j, int i) {
    if (!j->k->pairs) return j->aq + (size_t)i * j->aq_ld;
    return j->aq + (size_t)(i >> 1) * 2 * j->aq_ld + (size_t)(i & 1) * 8;
}

static void hm_lowp_quant_task(void *ctx, int t, int tid) {
    const hm_lowp_job *j = ctx;
    int i0 = t * HM_LOWP_QROWS, i1 = i0 + HM_LOWP_QROWS < j->M ? i0 + HM_LOWP_QROWS : j->M;
    const int i8 = !hm_lowp_kind_is_bf16(j->h->kind);
    for (int i = i0; i < i1; i++) {
        const float *x = j->A + (size_t)i * j->lda;
        uint8_t *q = hm_lowp_qrow(j, i);
        if (i8)
            j->k->quant_row(x, j->K, j->h->kp, q, &j->rows[i], j->oidx + (size_t)i * HM_LOWP_MAX_OUTLIERS,
                            j->oval + (size_t)i * HM_LOWP_MAX_OUTLIERS);
        else
            j->k->bf16_row(x, j->K, j->h->kp, (uint16_t *)q);
        /* An odd M's last pair has no second row: zero its half, which the
         * pair kernels multiply (and whose results they drop). */
        if (j->k->pairs && i == j->M - 1 && !(i & 1))
            for (size_t g = 0; g < (size_t)j->h->kp * (i8 ? 1 : 2) / 8; g++) memset(q + 8 + 16 * g, 0, 8);
    }
}

/* Row block mb x panel pn; prefetch: the next panel is this task's next. */
static void hm_lowp_gemm_block(const hm_lowp_job *j, int mb, int pn, int prefetch) {
    const hm_lowp_hdr *h = j->h;
    int i0 = mb * j->mc, m = j->M - i0 < j->mc ? j->M - i0 : j->mc;
    int n0 = pn * h->nr, nr = j->W->N - n0 < h->nr ? j->W->N - n0 : h->nr;
    const uint8_t *blk = j->W->lp;
    const uint8_t *panel = blk + h->w_off + (size_t)pn * h->panel;
    hm_lowp_epi e = {
        .bias = j->W->bias ? j->W->bias + n0 : NULL,
        .accum = j->epi == HM_EPI_ACCUM,
        .gelu = j->epi == HM_EPI_GELU,
        .next = prefetch ? panel + h->panel : NULL,
        .next_bytes = prefetch ? h->panel : 0,
    };
    float *C = j->C + (size_t)i0 * j->ldc + n0;
    if (!hm_lowp_kind_is_bf16(h->kind)) {
        const int32_t *cs = (const int32_t *)(blk + h->cs_off) + n0;
        size_t os = (size_t)i0 * HM_LOWP_MAX_OUTLIERS;
        j->k->i8_block(
            m, nr, h->kp, j->aq + (size_t)i0 * j->aq_ld, j->aq_ld, j->rows + i0, j->oidx + os, j->oval + os,
            (const int8_t *)panel, cs, j->W->lp_scale + n0, C, j->ldc, &e);
    } else {
        j->k->bf16_block(m, nr, h->kp, (const uint16_t *)(j->aq + (size_t)i0 * j->aq_ld), j->aq_ld / 2,
                         (const uint16_t *)panel, C, j->ldc, &e);
    }
}

/* Task t: row block t % nmb of the group of j->group panels t / nmb, one
 * panel after the other (each block prefetches the next one's panel). */
static void hm_lowp_gemm_task(void *ctx, int t, int tid) {
    const hm_lowp_job *j = ctx;
    const int p0 = t / j->nmb * j->group, p1 = p0 + j->group < j->h->np ? p0 + j->group : j->h->np;
    for (int pn = p0; pn < p1; pn++) hm_lowp_gemm_block(j, t % j->nmb, pn, pn + 1 < p1);
}

/* Scratch layout of one call: quantised rows, then (int8) the per-row
 * records and the outlier lists. */
typedef struct {
    size_t aq_ld, aq, rows, outl, total;
} hm_lowp_scr;

static void hm_lowp_scr_for(const hm_lowp_hdr *h, int M, hm_lowp_scr *l) {
    int i8 = !hm_lowp_kind_is_bf16(h->kind);
    l->aq_ld = hm_round64((size_t)h->kp * (i8 ? 1 : 2));
    /* row pairs (AArch64): an odd M's last pair is whole too */
    l->aq = (size_t)(hm_kind_neon(h->kind) ? (M + 1) & ~1 : M) * l->aq_ld;
    l->rows = i8 ? hm_round64((size_t)M * sizeof(hm_lowp_row)) : 0;
    l->outl = i8 ? hm_round64((size_t)M * HM_LOWP_MAX_OUTLIERS * sizeof(int32_t)) : 0;
    l->total = l->aq + l->rows + 2 * l->outl;
}

size_t hm_lowp_scratch_bytes(const hm_packed *W, int M) {
    if (!W || !W->lp || M < 1) return 0;
    hm_lowp_scr l;
    hm_lowp_scr_for(W->lp, M, &l);
    return l.total;
}

int hm_gemm_lowp(hm_pool *pool, int M, const float *A, int lda, const hm_packed *W, float *C, int ldc,
                 hm_epilogue epi) {
    if (!W->lp || lda < W->K || ldc < W->N) return hm_err(HM_E_ARG, "hm_gemm (fast): bad arguments (M=%d)", M);
    const hm_lowp_hdr *h = W->lp;
    int i8 = !hm_lowp_kind_is_bf16(h->kind);
    hm_lowp_kern kern;
    hm_lowp_kern_for(h->kind, &kern);
    if (!hm_kind_own(h->kind) || !(i8 ? (void *)kern.i8_block : (void *)kern.bf16_block))
        return hm_err(HM_E_UNSUPPORTED, "hm_gemm (fast): no %s kernel for this build and CPU (cpu: %s)",
                      hm_lowp_kind_name(h->kind), hm_cpu_feature_names());
    hm_lowp_scr l;
    hm_lowp_scr_for(h, M, &l);
    /* The pool's scratch (reserved by the state, so no allocation here);
     * without a pool, a buffer for this call only. */
    uint8_t *s = pool ? hm_pool_scratch(pool, l.total) : hm_alloc(l.total);
    if (!s) return HM_E_NOMEM; /* message recorded */
    size_t aq_ld = l.aq_ld, aq_bytes = l.aq, rows_bytes = l.rows, out_bytes = l.outl;
    /* Row blocks: at most HM_LOWP_MC rows, and enough blocks for ~4 tasks
     * per thread, in whole register tiles. Each output element is computed
     * the same way whatever block it falls in, so this choice (which
     * depends on the pool size) cannot change a result. */
    int mr = kern.mr;
    int want = (4 * hm_pool_size(pool) + h->np - 1) / h->np;
    int nmb = (M + HM_LOWP_MC - 1) / HM_LOWP_MC;
    if (nmb < want) nmb = want;
    int mc = (M + nmb - 1) / nmb;
    mc = (mc + mr - 1) / mr * mr;
    hm_lowp_job j = {
        .M = M, .K = W->K, .mc = mc, .nmb = (M + mc - 1) / mc,
        .A = A, .lda = (size_t)lda, .W = W, .h = h, .C = C, .ldc = (size_t)ldc, .epi = epi,
        .aq = s, .aq_ld = aq_ld,
        .rows = i8 ? (hm_lowp_row *)(s + aq_bytes) : NULL,
        .oidx = i8 ? (int32_t *)(s + aq_bytes + rows_bytes) : NULL,
        .oval = i8 ? (float *)(s + aq_bytes + rows_bytes + out_bytes) : NULL,
        .k = &kern,
    };
    hm_pool_run(pool, hm_lowp_quant_task, &j, (M + HM_LOWP_QROWS - 1) / HM_LOWP_QROWS);
    /* Panels per task: up to 4 in a row (each block prefetches the next),
     * while there are still ~4 tasks per thread to balance. */
    j.group = h->np / (j.nmb * 4 * hm_pool_size(pool));
    j.group = j.group < 1 ? 1 : j.group > 4 ? 4 : j.group;
    hm_pool_run(pool, hm_lowp_gemm_task, &j, j.nmb * ((h->np + j.group - 1) / j.group));
    if (!pool) hm_free(s);
    return HM_OK;
}

/* ---- packings read back from a file (model_pack.c) --------------------- */

int hm_lowp_sizes(int kind, int N, int K, size_t *lp, size_t *scale, size_t *bias) {
    if (!hm_kind_valid(kind) || N < 1 || K < 1 || K > (1 << 30))
        return hm_err(HM_E_ARG, "low-precision packing: bad kind %d or size %d x %d", kind, N, K);
    hm_lowp_hdr h;
    hm_lowp_hdr_for(kind, N, K, &h);
    size_t npad = (size_t)h.np * h.nr;
    *lp = h.w_off + (size_t)h.np * h.panel;
    *scale = !hm_lowp_kind_is_bf16(kind) ? npad * sizeof(float) : 0;
    *bias = npad * sizeof(float);
    return HM_OK;
}

int hm_lowp_packed_kind(const hm_packed *p) {
    return p && p->prec == HM_PREC_FAST && p->lp ? ((const hm_lowp_hdr *)p->lp)->kind : -1;
}

int hm_lowp_packed_check(const hm_packed *p, int kind) {
    const hm_lowp_hdr *got = p->lp;
    hm_lowp_hdr want;
    if (!hm_kind_valid(kind))
        return hm_err(HM_E_FORMAT, "low-precision kind %d is not one of int8 (0), bf16 (1), int8-neon (2), bf16-neon (3)",
                      kind);
    hm_lowp_hdr_for(kind, p->N, p->K, &want);
    /* The kernels index panels and column sums with these fields. */
    if (got->kind != want.kind || got->nr != want.nr || got->kp != want.kp || got->np != want.np ||
        got->cs_off != want.cs_off || got->w_off != want.w_off || got->panel != want.panel)
        return hm_err(HM_E_FORMAT, "low-precision block header does not match a %s packing of %d x %d",
                      hm_lowp_kind_name(kind), p->N, p->K);
    if (!hm_lowp_kind_is_bf16(kind) && p->K > 65536)
        return hm_err(HM_E_FORMAT, "int8 packing with K = %d exceeds the kernel's limit of 65536", p->K);
    return hm_lowp_check(kind);
}
