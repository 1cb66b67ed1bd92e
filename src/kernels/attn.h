/* attn.h - one ViT attention head: in fp32 (fused with AVX-512,
 * attn_avx512.c, else two GEMMs around hm_softmax: the exact precision's
 * only head), and for the fast precision with bf16 dot products and an fp32
 * softmax (vdpbf16ps, attn_avx512vnni.c, or AMX tiles, attn_amx.c).
 *
 * hm_attention_fast_choose: what the fast precision's attention runs, into
 * *mode (HM_ATTN_*). HAMER_ATTN=fp32|bf16|amx decides when set (a head the
 * CPU cannot run is an error, as is any other value); unset or "auto": the
 * AMX head where AMX-BF16 is active (tiles at ~35x vdpbf16ps's peak rate
 * there: a full-size crop's attention 29.5 -> 14.6 ms on the Intel Xeon
 * measured, docs/benchmarks.md), else the vdpbf16ps head where usable on AMD CPUs,
 * else fp32. Why by vendor: the choice depends on the bf16 unit's
 * throughput, which no CPUID bit tells.
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

/* What the fast precision's attention runs (hm_attention_fast_choose). */
enum { HM_ATTN_FP32 = 0, HM_ATTN_BF16 = 1, HM_ATTN_AMX = 2 };

/* The head of a mode hm_attention_fast_choose returned (scratch as that
 * head's: avail floats, at least what its usable check asked). */
void hm_attention_head_fast(int mode, int n, int hd, float scale, const float *q, const float *k, const float *v,
                            size_t ld, float *o, size_t ldo, float *scratch, size_t avail);
size_t hm_attention_bf16_scratch(int n, int hd);
int hm_attention_fast_choose(int n, int hd, size_t avail, int *mode);
int hm_attention_bf16_usable(int n, int hd, size_t avail);
void hm_attention_head_bf16(int n, int hd, float scale, const float *q, const float *k, const float *v, size_t ld,
                            float *o, size_t ldo, float *scratch);

/* The same head on AMX tiles (attn_amx.c): the same bf16 operands and
 * fp32 softmax as hm_attention_head_bf16, tdpbf16ps sums (fp32, in another
 * order). Usable when this build has it (hm_attention_amx_built), AMX-BF16
 * is active (core/cpu.h), n is a multiple of 32, hd of 16 up to
 * HM_ATTN_MAX_HD and hm_attention_amx_scratch(n, hd) floats fit in avail. */
#define HM_ATTN_AMX_OT 5 /* output tiles (16 dims each) per pass */
int hm_attention_amx_built(void);
size_t hm_attention_amx_scratch(int n, int hd);
int hm_attention_amx_usable(int n, int hd, size_t avail);
void hm_attention_head_amx(int n, int hd, float scale, const float *q, const float *k, const float *v, size_t ld,
                           float *o, size_t ldo, float *scratch);

#endif
