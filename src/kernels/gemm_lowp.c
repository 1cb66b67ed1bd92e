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
 * Prologue (hm_gemm_opts.ln_w): each row is LayerNorm'd on the stack right
 * before it is quantised, the row hm_layernorm would write, so qkv and fc1
 * read the residual stream itself: no normalised copy is written and read
 * back, and no pass over the pool of its own.
 * Centering (hm_gemm_opts.center; x86 int8): the attention projection's
 * input is mostly a component all tokens of a crop share (near-uniform
 * attention averages v). Per-token int8 then spends its grid on that
 * component, and the weights' int8 rounding of it is one error common to
 * every token: with proj in plain int8, vertices against fp32 went from
 * 0.36 to 0.66 mm on the full-size synthetic model (8 crops; keypoints
 * over the 1 mm gate on one). So each group's (crop's) column mean c is
 * taken out of its rows before they are quantised, and c W^T is added
 * back in the epilogue: c as two int8 rows (its own grid, and the residue
 * on a second grid) against the panel and, for HM_LOWP_INT8F packings
 * (what hm_pack_weights_fast_sensitive packs), a fine panel holding
 * round(254 (W / s_w - q)): W to ~1/32000 of s_w. Centred alone, 0.69 mm
 * (the weights' rounding of c remains); centred with the exact fp32 c W^T,
 * 0.37; as built, 0.37 mm (worst crop 0.55 against bf16's 0.57): proj's
 * accuracy in bf16 at int8's speed, all 32 blocks. The mean rows cost ~2%
 * of the projection's products.
 * bf16 (HM_LOWP_BF16, HAMER_LOWP=bf16): W and A rounded to bf16, vdpbf16ps
 * with fp32 accumulation, every FAST matmul (kept for comparison); bf16 is
 * also what hm_pack_weights_fast_bf16 packs, for the decoder's one-token
 * matmuls, which stream their weights for a few rows (fp32 on CPUs
 * without AVX512-BF16).
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
 * other rows of A (every row has its own scale, zero and outliers), except,
 * under centering, on the other rows of its own group.
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
 * Centering is x86's (AArch64's sensitive matmuls are bf16): an AArch64
 * packing takes the plain product.
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
#include "kernels/norm.h"

/* Rows per GEMM task (with the panel, the unit of work) at most: 192 = one
 * crop, so each panel is fetched once per crop. With few panels and many
 * threads the blocks shrink (see hm_gemm_lowp) so every thread has work. */
#define HM_LOWP_MC 192
/* Rows per quantisation task. */
#define HM_LOWP_QROWS 8

/* Packed block behind hm_packed.lp: this header, then (int8) colsum[Np]
 * int32 and the panels, or (bf16) the panels; int8f then the fine part:
 * its colsum[Np] and panels, laid out the same way. Offsets are 64-byte
 * aligned. */
typedef struct {
    int32_t kind;  /* hm_lowp_kind */
    int32_t nr;    /* panel width */
    int32_t kp;    /* K padded to the kernel's k group (4 or 2) */
    int32_t np;    /* number of panels */
    size_t cs_off; /* byte offset of colsum (int8 only) */
    size_t w_off;  /* byte offset of panel 0 */
    size_t panel;  /* bytes per panel */
    size_t f_off;  /* int8f: byte offset of the fine colsum (its panels at
                    * f_off + w_off - cs_off); 0 otherwise */
    size_t bytes;  /* the whole block */
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

static int hm_kind_own(int kind) {
    return kind == HM_LOWP_OWN_INT8 || kind == HM_LOWP_OWN_BF16 || (HM_LOWP_OWN_INT8 == HM_LOWP_INT8 && kind == HM_LOWP_INT8F);
}
static int hm_kind_valid(int kind) { return kind >= 0 && kind < HM_LOWP_KINDS; }
static int hm_kind_neon(int kind) { return kind == HM_LOWP_INT8_NEON || kind == HM_LOWP_BF16_NEON; }

const char *hm_lowp_kind_name(int kind) {
    static const char *const names[HM_LOWP_KINDS] = {"int8", "bf16", "int8-neon", "bf16-neon", "int8f"};
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
    if (kind != HM_LOWP_OWN_INT8 && kind != HM_LOWP_OWN_BF16)
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
    return bits & HM_CPU_BF16 ? "int8-vnni (w: per-channel s8; a: per-token u8 + fp32 outliers); proj: int8 centred; decoder: bf16"
                              : "int8-vnni (w: per-channel s8; a: per-token u8 + fp32 outliers); proj: int8 centred; decoder: fp32";
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
    h->bytes = h->w_off + (size_t)h->np * h->panel;
    if (kind == HM_LOWP_INT8F) {
        h->f_off = h->bytes;
        h->bytes += h->w_off - h->cs_off + (size_t)h->np * h->panel;
    }
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
        /* int8f: the fine panel holds round(254 (W / s - q)), |.| <= 127. */
        int8_t *fine = h->f_off ? (int8_t *)(blk + h->f_off + (h->w_off - h->cs_off) + (size_t)(n / h->nr) * h->panel)
                                : NULL;
        int32_t sum = 0, fsum = 0;
        for (int k = 0; k < K; k++) {
            float v = row[k] * inv;
            int8_t q = hm_q8(v);
            size_t at = hm_i8_at(h, n % h->nr, k);
            dst[at] = q;
            sum += q;
            if (fine) {
                int8_t f = hm_q8((v - (float)q) * 254.0f);
                fine[at] = f;
                fsum += f;
            }
        }
        cs[n] = sum;
        if (fine) ((int32_t *)(blk + h->f_off))[n] = fsum;
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
    size_t bytes = h.bytes;

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
#if !defined(__aarch64__)
    if (hm_lowp_kind_active() == HM_LOWP_INT8) return HM_LOWP_INT8F; /* centred with fine weights */
#endif
    return hm_lowp_cpu_bits() & HM_LOWP_NEED_BF16 ? HM_LOWP_OWN_BF16 : HM_LOWP_FP32;
}

int hm_lowp_bf16_kind(void) {
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
    const int i8 = !hm_lowp_kind_is_bf16(kind);
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

/* Rows a fused LayerNorm prologue normalises on the stack; wider rows are
 * normalised into the caller's ln_out first (hm_gemm_opts). */
#define HM_LOWP_LN_MAXK 8192
/* Smallest centering group (hm_gemm_opts.center): a block's groups then
 * fit the task's stack buffer. */
#define HM_LOWP_CENTER_MIN 16
#define HM_LOWP_MAX_GROUPS (HM_LOWP_MC / HM_LOWP_CENTER_MIN + 2)

typedef struct {
    int M, K, mc, nmb;
    const float *A;
    size_t lda;
    const hm_packed *W;
    const hm_lowp_hdr *h;
    float *C;
    size_t ldc;
    const hm_gemm_opts *o;
    int ln_fused;         /* the LayerNorm prologue runs inside the quantisation */
    int G, ngroups;       /* centering: rows per group and groups (G 0: off) */
    float *mean;          /* centering: ngroups x K column means */
    uint8_t *aq;          /* quantised A: M (+ 2 per group) rows of aq_ld bytes (pairs: see hm_lowp_qrow) */
    size_t aq_ld;
    hm_lowp_row *rows;    /* int8: per-row scale / zero / outlier count */
    int32_t *oidx;        /* int8: rows x HM_LOWP_MAX_OUTLIERS */
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

/* Quantise one row (or round it to bf16) into row slot i. */
static void hm_lowp_quant_one(const hm_lowp_job *j, const float *x, int i) {
    uint8_t *q = hm_lowp_qrow(j, i);
    if (!hm_lowp_kind_is_bf16(j->h->kind))
        j->k->quant_row(x, j->K, j->h->kp, q, &j->rows[i], j->oidx + (size_t)i * HM_LOWP_MAX_OUTLIERS,
                        j->oval + (size_t)i * HM_LOWP_MAX_OUTLIERS);
    else
        j->k->bf16_row(x, j->K, j->h->kp, (uint16_t *)q);
}

/* Centering, group g: its mean as two int8 rows at M + 2g (the mean's own
 * grid) and M + 2g + 1 (what that grid missed, on a grid ~255x finer). */
static void hm_lowp_quant_mean(const hm_lowp_job *j, int g) {
    const int K = j->K, r0 = j->M + 2 * g;
    const float *c = j->mean + (size_t)g * K;
    float res[HM_LOWP_LN_MAXK];
    hm_lowp_quant_one(j, c, r0);
    const hm_lowp_row *r = &j->rows[r0];
    const uint8_t *q = hm_lowp_qrow(j, r0);
    for (int k = 0; k < K; k++) res[k] = c[k] - r->scale * (float)((int32_t)q[k] - r->zero);
    const int32_t *oi = j->oidx + (size_t)r0 * HM_LOWP_MAX_OUTLIERS;
    for (int t = 0; t < r->nout; t++) res[oi[t]] = 0.0f; /* applied exactly in fp32 */
    hm_lowp_quant_one(j, res, r0 + 1);
    j->rows[r0].grp = j->rows[r0 + 1].grp = 0;
}

static void hm_lowp_quant_task(void *ctx, int t, int tid) {
    const hm_lowp_job *j = ctx;
    const int nq = (j->M + HM_LOWP_QROWS - 1) / HM_LOWP_QROWS;
    if (t >= nq) {
        hm_lowp_quant_mean(j, t - nq);
        return;
    }
    const hm_gemm_opts *o = j->o;
    const int i8 = !hm_lowp_kind_is_bf16(j->h->kind);
    int i0 = t * HM_LOWP_QROWS, i1 = i0 + HM_LOWP_QROWS < j->M ? i0 + HM_LOWP_QROWS : j->M;
    float buf[HM_LOWP_LN_MAXK];
    for (int i = i0; i < i1; i++) {
        const float *x = j->A + (size_t)i * j->lda;
        if (j->ln_fused) {
            /* The prologue: the same row hm_layernorm writes, kept on the stack. */
            hm_layernorm(x, buf, 1, j->K, o->ln_w, o->ln_b, o->ln_eps);
            x = buf;
        } else if (j->G) {
            const float *c = j->mean + (size_t)(i / j->G) * j->K;
            for (int k = 0; k < j->K; k++) buf[k] = x[k] - c[k];
            x = buf;
        }
        hm_lowp_quant_one(j, x, i);
        if (j->G) j->rows[i].grp = i / j->G;
        /* An odd M's last pair has no second row: zero its half, which the
         * pair kernels multiply (and whose results they drop). */
        uint8_t *q = hm_lowp_qrow(j, i);
        if (j->k->pairs && i == j->M - 1 && !(i & 1))
            for (size_t g = 0; g < (size_t)j->h->kp * (i8 ? 1 : 2) / 8; g++) memset(q + 8 + 16 * g, 0, 8);
    }
}

/* Centering: column means of group t / nch over the 256 columns t % nch,
 * rows added in order (so the sums never depend on the split). */
#define HM_LOWP_MEAN_COLS 256
static void hm_lowp_mean_task(void *ctx, int t, int tid) {
    const hm_lowp_job *j = ctx;
    const int nch = (j->K + HM_LOWP_MEAN_COLS - 1) / HM_LOWP_MEAN_COLS, g = t / nch;
    const int k0 = t % nch * HM_LOWP_MEAN_COLS, k1 = k0 + HM_LOWP_MEAN_COLS < j->K ? k0 + HM_LOWP_MEAN_COLS : j->K;
    float *c = j->mean + (size_t)g * j->K;
    const float inv = 1.0f / (float)j->G;
    for (int k = k0; k < k1; k++) c[k] = 0.0f;
    for (int r = 0; r < j->G; r++) {
        const float *x = j->A + (size_t)(g * j->G + r) * j->lda;
        for (int k = k0; k < k1; k++) c[k] += x[k];
    }
    for (int k = k0; k < k1; k++) c[k] *= inv;
}

/* Centering, the block's groups' means through panel pn: both rows of
 * each against the panel and (int8f) its fine panel, whose scales are
 * 1/254 of the panel's; the four summed into shared[g - g0]. */
static void hm_lowp_mean_product(const hm_lowp_job *j, int pn, int nr, int g0, int g1,
                                 float shared[][HM_LOWP_I8_NR]) {
    const hm_lowp_hdr *h = j->h;
    const uint8_t *blk = j->W->lp;
    const int n0 = pn * h->nr;
    const int32_t *cs = (const int32_t *)(blk + h->cs_off) + n0;
    const float *sw = j->W->lp_scale + n0;
    const int8_t *panel = (const int8_t *)(blk + h->w_off + (size_t)pn * h->panel);
    _Alignas(64) float four[4][HM_LOWP_I8_NR], fsw[HM_LOWP_I8_NR];
    const hm_lowp_epi store = {0};
    const int fine = h->f_off != 0;
    const int8_t *fpanel = (const int8_t *)(blk + h->f_off + (h->w_off - h->cs_off) + (size_t)pn * h->panel);
    const int32_t *fcs = (const int32_t *)(blk + h->f_off) + n0;
    if (fine)
        for (int n = 0; n < HM_LOWP_I8_NR; n++) fsw[n] = sw[n] * (1.0f / 254.0f);
    for (int g = g0; g <= g1; g++) {
        size_t r = (size_t)j->M + 2 * (size_t)g, os = r * HM_LOWP_MAX_OUTLIERS;
        memset(four, 0, sizeof four);
        j->k->i8_block(2, nr, h->kp, j->aq + r * j->aq_ld, j->aq_ld, j->rows + r, j->oidx + os, j->oval + os, panel,
                       cs, sw, &four[0][0], HM_LOWP_I8_NR, &store);
        if (fine)
            j->k->i8_block(2, nr, h->kp, j->aq + r * j->aq_ld, j->aq_ld, j->rows + r, j->oidx + os, j->oval + os,
                           fpanel, fcs, fsw, &four[2][0], HM_LOWP_I8_NR, &store);
        for (int n = 0; n < HM_LOWP_I8_NR; n++) shared[g - g0][n] = (four[0][n] + four[1][n]) + (four[2][n] + four[3][n]);
    }
}

/* Row block mb x panel pn; prefetch: the next panel is this task's next. */
static void hm_lowp_gemm_block(const hm_lowp_job *j, int mb, int pn, int prefetch) {
    const hm_lowp_hdr *h = j->h;
    int i0 = mb * j->mc, m = j->M - i0 < j->mc ? j->M - i0 : j->mc;
    int n0 = pn * h->nr, nr = j->W->N - n0 < h->nr ? j->W->N - n0 : h->nr;
    const uint8_t *blk = j->W->lp;
    const uint8_t *panel = blk + h->w_off + (size_t)pn * h->panel;
    const hm_epilogue epi = j->o->epi;
    hm_lowp_epi e = {
        .bias = j->W->bias ? j->W->bias + n0 : NULL,
        .accum = epi == HM_EPI_ACCUM,
        .gelu = epi == HM_EPI_GELU,
        .next = prefetch ? panel + h->panel : NULL,
        .next_bytes = prefetch ? h->panel : 0,
    };
    float *C = j->C + (size_t)i0 * j->ldc + n0;
    if (!hm_lowp_kind_is_bf16(h->kind)) {
        const int32_t *cs = (const int32_t *)(blk + h->cs_off) + n0;
        _Alignas(64) float shared[HM_LOWP_MAX_GROUPS][HM_LOWP_I8_NR];
        if (j->G) {
            e.grp0 = i0 / j->G;
            e.shared = &shared[0][0];
            hm_lowp_mean_product(j, pn, nr, e.grp0, (i0 + m - 1) / j->G, shared);
        }
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

/* Whether centering applies to a packing: x86's int8 layouts. */
static int hm_lowp_centres(int kind) { return kind == HM_LOWP_INT8 || kind == HM_LOWP_INT8F; }

/* Scratch layout of one call of M rows: quantised rows, then (int8) the
 * per-row records, the outlier lists and (x86 int8) the centering means;
 * x86 int8 has room for the two rows of every possible group (center >=
 * 16) after the M rows. */
typedef struct {
    size_t aq_ld, aq, rows, outl, mean, total;
} hm_lowp_scr;

static void hm_lowp_scr_for(const hm_lowp_hdr *h, int M, hm_lowp_scr *l) {
    int i8 = !hm_lowp_kind_is_bf16(h->kind), cen = hm_lowp_centres(h->kind);
    size_t G = cen ? ((size_t)M + HM_LOWP_CENTER_MIN - 1) / HM_LOWP_CENTER_MIN : 0, R = (size_t)M + 2 * G;
    l->aq_ld = hm_round64((size_t)h->kp * (i8 ? 1 : 2));
    /* row pairs (AArch64): an odd M's last pair is whole too */
    l->aq = (hm_kind_neon(h->kind) ? (R + 1) & ~(size_t)1 : R) * l->aq_ld;
    l->rows = i8 ? hm_round64(R * sizeof(hm_lowp_row)) : 0;
    l->outl = i8 ? hm_round64(R * HM_LOWP_MAX_OUTLIERS * sizeof(int32_t)) : 0;
    l->mean = hm_round64(G * (size_t)h->kp * sizeof(float));
    l->total = l->aq + l->rows + 2 * l->outl + l->mean;
}

size_t hm_lowp_scratch_bytes(const hm_packed *W, int M) {
    if (!W || !W->lp || M < 1) return 0;
    hm_lowp_scr l;
    hm_lowp_scr_for(W->lp, M, &l);
    return l.total;
}

typedef struct {
    const float *x;
    float *y;
    int M, K;
    size_t ldx, ldy;
    const hm_gemm_opts *o;
} hm_lowp_ln_job;

static void hm_lowp_ln_task(void *ctx, int t, int tid) {
    const hm_lowp_ln_job *j = ctx;
    int i0 = t * HM_LOWP_QROWS, i1 = i0 + HM_LOWP_QROWS < j->M ? i0 + HM_LOWP_QROWS : j->M;
    for (int i = i0; i < i1; i++)
        hm_layernorm(j->x + (size_t)i * j->ldx, j->y + (size_t)i * j->ldy, 1, j->K, j->o->ln_w, j->o->ln_b, j->o->ln_eps);
}

int hm_gemm_lowp(hm_pool *pool, int M, const float *A, int lda, const hm_packed *W, float *C, int ldc,
                 const hm_gemm_opts *o) {
    if (!W->lp || lda < W->K || ldc < W->N) return hm_err(HM_E_ARG, "hm_gemm (fast): bad arguments (M=%d)", M);
    const hm_lowp_hdr *h = W->lp;
    int i8 = !hm_lowp_kind_is_bf16(h->kind);
    hm_lowp_kern kern;
    hm_lowp_kern_for(h->kind, &kern);
    if (!hm_kind_own(h->kind) || !(i8 ? (void *)kern.i8_block : (void *)kern.bf16_block))
        return hm_err(HM_E_UNSUPPORTED, "hm_gemm (fast): no %s kernel for this build and CPU (cpu: %s)",
                      hm_lowp_kind_name(h->kind), hm_cpu_feature_names());
    if (o->ln_w && W->K > HM_LOWP_LN_MAXK) {
        /* Rows too wide for the stack: normalise into ln_out, then the plain call. */
        hm_lowp_ln_job lj = {A, o->ln_out, M, W->K, (size_t)lda, (size_t)o->ld_ln, o};
        hm_pool_run(pool, hm_lowp_ln_task, &lj, (M + HM_LOWP_QROWS - 1) / HM_LOWP_QROWS);
        hm_gemm_opts plain = *o;
        plain.ln_w = plain.ln_b = NULL;
        return hm_gemm_lowp(pool, M, o->ln_out, o->ld_ln, W, C, ldc, &plain);
    }
    const int G = hm_lowp_centres(h->kind) && o->center ? o->center : 0;
    if (G && W->K > HM_LOWP_LN_MAXK)
        return hm_err(HM_E_ARG, "hm_gemm (fast): centering rows of K = %d > %d", W->K, HM_LOWP_LN_MAXK);
    hm_lowp_scr l;
    hm_lowp_scr_for(h, M, &l);
    /* The pool's scratch (reserved by the state, so no allocation here);
     * without a pool, a buffer for this call only. */
    uint8_t *s = pool ? hm_pool_scratch(pool, l.total) : hm_alloc(l.total);
    if (!s) return HM_E_NOMEM; /* message recorded */
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
        .A = A, .lda = (size_t)lda, .W = W, .h = h, .C = C, .ldc = (size_t)ldc, .o = o,
        .ln_fused = o->ln_w != NULL, .G = G, .ngroups = G ? M / G : 0,
        .mean = G ? (float *)(s + l.aq + l.rows + 2 * l.outl) : NULL,
        .aq = s, .aq_ld = l.aq_ld,
        .rows = i8 ? (hm_lowp_row *)(s + l.aq) : NULL,
        .oidx = i8 ? (int32_t *)(s + l.aq + l.rows) : NULL,
        .oval = i8 ? (float *)(s + l.aq + l.rows + l.outl) : NULL,
        .k = &kern,
    };
    if (G) hm_pool_run(pool, hm_lowp_mean_task, &j, j.ngroups * ((W->K + HM_LOWP_MEAN_COLS - 1) / HM_LOWP_MEAN_COLS));
    hm_pool_run(pool, hm_lowp_quant_task, &j, (M + HM_LOWP_QROWS - 1) / HM_LOWP_QROWS + j.ngroups);
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
    *lp = h.bytes;
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
        return hm_err(HM_E_FORMAT,
                      "low-precision kind %d is not one of int8 (0), bf16 (1), int8-neon (2), bf16-neon (3), int8f (4)",
                      kind);
    hm_lowp_hdr_for(kind, p->N, p->K, &want);
    /* The kernels index panels and column sums with these fields. */
    if (got->kind != want.kind || got->nr != want.nr || got->kp != want.kp || got->np != want.np ||
        got->cs_off != want.cs_off || got->w_off != want.w_off || got->panel != want.panel ||
        got->f_off != want.f_off || got->bytes != want.bytes)
        return hm_err(HM_E_FORMAT, "low-precision block header does not match a %s packing of %d x %d",
                      hm_lowp_kind_name(kind), p->N, p->K);
    if (!hm_lowp_kind_is_bf16(kind) && p->K > 65536)
        return hm_err(HM_E_FORMAT, "int8 packing with K = %d exceeds the kernel's limit of 65536", p->K);
    return hm_lowp_check(kind);
}
