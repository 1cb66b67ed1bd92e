/* attn.h - one ViT attention head with bf16 dot products and an fp32
 * softmax (attn_avx512vnni.c), for the fast precision. The fp32 path
 * (vit.c: two unpacked GEMMs around hm_softmax) stays the portable one and
 * fp32's only one.
 *
 * hm_attention_bf16_usable: 1 when this CPU has AVX-512 BF16, the active
 * ISA is AVX-512, HAMER_ATTN is not "fp32" (read once; a switch for
 * measuring and for ruling the kernel out), and the shape is one the kernel
 * handles: n a multiple of 16, hd a multiple of 16 up to HM_ATTN_MAX_HD,
 * and its scratch (hm_attention_bf16_scratch floats) within `avail`.
 *
 * hm_attention_head_bf16: o[t][0..hd) = softmax_t'(scale q_t . k_t') v_t'
 * for n tokens; q, k, v rows ld floats apart, o rows ldo apart; scratch
 * 64-byte aligned. Only when usable. */
#ifndef HM_ATTN_H
#define HM_ATTN_H

#include <stddef.h>

#define HM_ATTN_MAX_HD 256

size_t hm_attention_bf16_scratch(int n, int hd);
int hm_attention_bf16_usable(int n, int hd, size_t avail);
void hm_attention_head_bf16(int n, int hd, float scale, const float *q, const float *k, const float *v, size_t ld,
                            float *o, size_t ldo, float *scratch);

#endif
