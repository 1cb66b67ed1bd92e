/* attn.c - the fp32 head's dispatch (fused AVX-512 or two GEMMs), and
 * when the bf16 attention head (attn_avx512vnni.c) may run and when it
 * does by default. */
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "core/cpu.h"
#include "core/util.h"
#include "kernels/attn.h"
#include "kernels/gemm.h"
#include "kernels/kernels.h"
#include "kernels/norm.h"

size_t hm_attention_bf16_scratch(int n, int hd) {
    /* q and k pairs, v pairs, 4 rows of p pairs and of scores (attn_avx512vnni.c). */
    return (size_t)n * hd / 2 * 2 + (size_t)n / 2 * hd + 4 * ((size_t)n / 2 + n);
}

/* HAMER_ATTN, read once: -1 unset/auto, 0 fp32, 1 bf16, 2 amx, 3 unknown. */
static int attn_env(void) {
    static atomic_int v = -2;
    int e = atomic_load(&v);
    if (e == -2) {
        const char *s = getenv("HAMER_ATTN");
        if (!s || !*s || !strcasecmp(s, "auto")) e = -1;
        else if (!strcasecmp(s, "fp32")) e = HM_ATTN_FP32;
        else if (!strcasecmp(s, "bf16")) e = HM_ATTN_BF16;
        else if (!strcasecmp(s, "amx")) e = HM_ATTN_AMX;
        else e = 3;
        atomic_store(&v, e);
    }
    return e;
}

int hm_attention_fast_choose(int n, int hd, size_t avail, int *mode) {
    *mode = HM_ATTN_FP32;
    const int env = attn_env();
    if (env == 3)
        return hm_err(HM_E_UNSUPPORTED, "HAMER_ATTN=%s: not one of auto|fp32|bf16|amx", getenv("HAMER_ATTN"));
    const int bf = hm_attention_bf16_usable(n, hd, avail), amx = hm_attention_amx_usable(n, hd, avail);
#if !defined(__x86_64__)
    /* AArch64: the fast precision's attention is the fp32 head (no bf16
     * head there; docs/internals.md says why). */
    if (env == HM_ATTN_BF16)
        return hm_err(HM_E_UNSUPPORTED, "HAMER_ATTN=bf16: this build has no bf16 attention head (this CPU: %s); use fp32",
                      hm_cpu_feature_names()[0] ? hm_cpu_feature_names() : "none");
#endif
    if (env == HM_ATTN_BF16 && !bf)
        return hm_err(HM_E_UNSUPPORTED,
                      "HAMER_ATTN=bf16 needs AVX-512 BF16 with the AVX-512 kernels active (this CPU: %s, kernels %s)",
                      hm_cpu_feature_names()[0] ? hm_cpu_feature_names() : "baseline x86-64",
                      hm_isa_name(hm_isa_active()));
#if defined(__x86_64__)
    if (env == HM_ATTN_AMX && !amx)
        return hm_err(HM_E_UNSUPPORTED, "HAMER_ATTN=amx needs AMX-BF16 tiles in use (this CPU: %s, kernels %s%s)",
                      hm_cpu_feature_names()[0] ? hm_cpu_feature_names() : "baseline x86-64",
                      hm_isa_name(hm_isa_active()), hm_attention_amx_built() ? "" : "; built without AMX");
#else
    if (env == HM_ATTN_AMX && !amx)
        return hm_err(HM_E_UNSUPPORTED, "HAMER_ATTN=amx: AMX tiles are x86's (this CPU: %s)",
                      hm_cpu_feature_names()[0] ? hm_cpu_feature_names() : "none");
#endif
    if (env >= 0) *mode = env;
    else if (amx) *mode = HM_ATTN_AMX;
    else if (bf && hm_cpu_vendor_amd()) *mode = HM_ATTN_BF16;
    return HM_OK;
}

int hm_attention_amx_usable(int n, int hd, size_t avail) {
#if defined(__x86_64__)
    const int need = HM_CPU_AMX | HM_CPU_AMX_BF16;
    if (!hm_attention_amx_built() || (hm_cpu_features() & need) != need || !hm_amx_active()) return 0;
    if (n < 32 || n % 32 || hd < 16 || hd % 16 || hd > HM_ATTN_MAX_HD) return 0;
    return hm_attention_amx_scratch(n, hd) <= avail;
#else
    return 0;
#endif
}

int hm_attention_bf16_usable(int n, int hd, size_t avail) {
#if defined(__x86_64__)
    int need = HM_CPU_AVX512 | HM_CPU_BF16;
    if ((hm_cpu_features() & need) != need || hm_isa_active() != HM_ISA_AVX512) return 0;
    if (n < 16 || n % 16 || hd < 16 || hd % 16 || hd > HM_ATTN_MAX_HD) return 0;
    return hm_attention_bf16_scratch(n, hd) <= avail;
#else
    return 0;
#endif
}

void hm_attention_head_fast(int mode, int n, int hd, float scale, const float *q, const float *k, const float *v,
                            size_t ld, float *o, size_t ldo, float *scratch, size_t avail) {
#if defined(__x86_64__)
    if (mode == HM_ATTN_AMX) {
        hm_attention_head_amx(n, hd, scale, q, k, v, ld, o, ldo, scratch);
        return;
    }
    if (mode == HM_ATTN_BF16) {
        hm_attention_head_bf16(n, hd, scale, q, k, v, ld, o, ldo, scratch);
        return;
    }
#endif
    hm_attention_head_f32(n, hd, scale, q, k, v, ld, o, ldo, scratch, avail);
}

size_t hm_attention_f32_fused_scratch(int n, int hd) { return (size_t)hd * n + 4 * (size_t)n; }

int hm_attention_f32_fused_usable(int n, int hd, size_t avail) {
    if (!hm_kernels_active()->attn_f32_fused) return 0;
    if (n < 16 || n % 16 || hd < 16 || hd % 16) return 0;
    return hm_attention_f32_fused_scratch(n, hd) <= avail;
}

void hm_attention_head_f32_gemm(int n, int hd, float scale, const float *q, const float *k, const float *v,
                                size_t ld, float *o, size_t ldo, float *scratch) {
    hm_sgemm_nt(n, n, hd, scale, q, (int)ld, k, (int)ld, 0.0f, scratch, n);
    for (int r = 0; r < n; r++) hm_softmax(scratch + (size_t)r * n, n);
    hm_sgemm_nn(n, hd, n, 1.0f, scratch, n, v, (int)ld, 0.0f, o, (int)ldo);
}

void hm_attention_head_f32(int n, int hd, float scale, const float *q, const float *k, const float *v, size_t ld,
                           float *o, size_t ldo, float *scratch, size_t avail) {
    if (hm_attention_f32_fused_usable(n, hd, avail))
        hm_kernels_active()->attn_f32_fused(n, hd, scale, q, k, v, ld, o, ldo, scratch);
    else
        hm_attention_head_f32_gemm(n, hd, scale, q, k, v, ld, o, ldo, scratch);
}
