/* attn.h - one ViT attention head with bf16 dot products and an fp32
 * softmax (attn_avx512vnni.c), for the fast precision. The fp32 path
 * (vit.c: two unpacked GEMMs around hm_softmax) stays the portable one and
 * fp32's only one.
 *
 * hm_attention_bf16_choose: whether the fast precision's attention uses it,
 * into *use_bf16. HAMER_ATTN=fp32|bf16 decides when set (bf16 where the
 * CPU cannot run it is an error, as is any other value); unset or "auto",
 * it is on where usable on AMD CPUs and off elsewhere. Why by vendor: the
 * choice depends on the bf16 unit's throughput, which no CPUID bit tells.
 * On the Intel Xeon (AMX/FP16 generation) measured, vdpbf16ps zmm issues at
 * a quarter of the FMA rate (0.86 against 0.21 ns per instruction, 24
 * independent chains), i.e. half fp32's FLOP rate, and one head took 172 us
 * against fp32's 113 us (tests/c/tool_attn time). On AMD Zen 4 the bf16 rate
 * is twice fp32's (bench/cpu_peak.c: 464 against 230 GFLOP/s on 2 cores)
 * and a full-size crop's attention takes 25 ms against 46 ms, with the
 * accuracy against fp32 unchanged (docs/benchmarks.md). Returns HM_OK or
 * HM_E_UNSUPPORTED with a message.
 *
 * hm_attention_bf16_usable: 1 when this CPU has AVX-512 BF16, the active
 * ISA is AVX-512, and the shape is one the kernel handles: n a multiple of
 * 16, hd a multiple of 16 up to HM_ATTN_MAX_HD, and its scratch
 * (hm_attention_bf16_scratch floats) within `avail`.
 *
 * hm_attention_head_bf16: o[t][0..hd) = softmax_t'(scale q_t . k_t') v_t'
 * for n tokens; q, k, v rows ld floats apart, o rows ldo apart; scratch
 * 64-byte aligned. Only when usable. */
#ifndef HM_ATTN_H
#define HM_ATTN_H

#include <stddef.h>

#define HM_ATTN_MAX_HD 256

/* The fp32 head, both precisions' (fast: where bf16 is not chosen):
 * o[t][0..hd) = softmax_t'(scale q_t . k_t') v_t', as above, in fp32.
 * Fused (attn_avx512.c: four query rows' scores, softmax and output at a
 * time, k transposed once) when the AVX-512 kernels are active, n and hd
 * are multiples of 16 and hm_attention_f32_fused_scratch(n, hd) <= avail;
 * otherwise two GEMMs around the softmax rows (n * n scratch floats). At
 * 192 x 80 the fused head took a full-size crop's attention from 49.7 to
 * 39 ms (Intel Xeon with AMX, 2 threads; docs/benchmarks.md); both are
 * plain fp32 sums, in other orders. scratch: avail floats, 64-byte
 * aligned, at least n * n. */
size_t hm_attention_f32_fused_scratch(int n, int hd);
int hm_attention_f32_fused_usable(int n, int hd, size_t avail);
void hm_attention_head_f32(int n, int hd, float scale, const float *q, const float *k, const float *v, size_t ld,
                           float *o, size_t ldo, float *scratch, size_t avail);
/* The unfused one, for comparisons (tests/c/tool_attn). */
void hm_attention_head_f32_gemm(int n, int hd, float scale, const float *q, const float *k, const float *v,
                                size_t ld, float *o, size_t ldo, float *scratch);
void hm_attention_head_f32_avx512(int n, int hd, float scale, const float *q, const float *k, const float *v,
                                  size_t ld, float *o, size_t ldo, float *scratch);

size_t hm_attention_bf16_scratch(int n, int hd);
int hm_attention_bf16_choose(int n, int hd, size_t avail, int *use_bf16);
int hm_attention_bf16_usable(int n, int hd, size_t avail);
void hm_attention_head_bf16(int n, int hd, float scale, const float *q, const float *k, const float *v, size_t ld,
                            float *o, size_t ldo, float *scratch);

#endif
