/* attn.c - when the bf16 attention head (attn_avx512vnni.c) may run. */
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "core/cpu.h"
#include "kernels/attn.h"

size_t hm_attention_bf16_scratch(int n, int hd) {
    /* q and k pairs, v pairs, 4 rows of p pairs and of scores (attn_avx512vnni.c). */
    return (size_t)n * hd / 2 * 2 + (size_t)n / 2 * hd + 4 * ((size_t)n / 2 + n);
}

int hm_attention_bf16_enabled(void) {
    static atomic_int on = -1;
    int v = atomic_load(&on);
    if (v < 0) {
        const char *e = getenv("HAMER_ATTN");
        v = e && !strcmp(e, "bf16");
        atomic_store(&on, v);
    }
    return v;
}

int hm_attention_bf16_usable(int n, int hd, size_t avail) {
    int need = HM_CPU_AVX512 | HM_CPU_BF16;
    if ((hm_cpu_features() & need) != need || hm_isa_active() != HM_ISA_AVX512) return 0;
    if (n < 16 || n % 16 || hd < 16 || hd % 16 || hd > HM_ATTN_MAX_HD) return 0;
    return hm_attention_bf16_scratch(n, hd) <= avail;
}
