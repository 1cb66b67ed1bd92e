/* arm/kernels_arm.c - the kernel table of the AArch64 level (kernels.h):
 * Advanced SIMD for everything. The fast precision's dot-product, i8mm and
 * BF16 kernels are chosen per call in gemm_lowp.c / attn.c. */
#include "kernels/arm/arm.h"
#include "kernels/kernels.h"

const hm_kernels hm_kernels_neon = {
    .isa = HM_ISA_NEON,
    .gemm_nr = HM_GEMM_NR_NEON,
    .gemm_block = hm_gemm_block_neon,
    .gelu = hm_gelu_vec_neon,
    .layernorm = hm_layernorm_neon,
    .softmax = hm_softmax_neon,
    .attn_f32_fused = hm_attention_head_f32_neon,
    .act = hm_vec_act_neon,
    .add = hm_vec_add_neon,
    .prelu = hm_vec_prelu_neon,
    .add_prelu = hm_vec_add_prelu_neon,
    .copy = hm_vec_copy_neon,
    .copy_strided = hm_vec_copy_strided_neon,
    .max = hm_vec_max_neon,
    .dw_rows = hm_vec_dw_rows_neon,
};
