/* x86/kernels_x86.c - the kernel tables of the x86 levels (kernels.h).
 * avx2 has its own fp32 GEMM block only; avx512 its own everything. */
#include "kernels/kernels.h"
#include "kernels/x86/x86.h"

const hm_kernels hm_kernels_avx2 = {
    .isa = HM_ISA_AVX2,
    .gemm_nr = HM_GEMM_NR_AVX2,
    .gemm_block = hm_gemm_block_avx2,
    .gelu = hm_gelu_vec_avx2,
    .layernorm = hm_layernorm_c,
    .softmax = hm_softmax_c,
    .attn_f32_fused = NULL,
    .act = hm_vec_act,
    .add = hm_vec_add,
    .prelu = hm_vec_prelu,
    .add_prelu = hm_vec_add_prelu,
    .copy = hm_vec_copy,
    .copy_strided = hm_vec_copy_strided,
    .max = hm_vec_max,
    .dw_rows = hm_vec_dw_rows,
};

const hm_kernels hm_kernels_avx512 = {
    .isa = HM_ISA_AVX512,
    .gemm_nr = HM_GEMM_NR_AVX512,
    .gemm_block = hm_gemm_block_avx512,
    .gelu = hm_gelu_vec_avx512,
    .layernorm = hm_layernorm_avx512,
    .softmax = hm_softmax_avx512,
    .attn_f32_fused = hm_attention_head_f32_avx512,
    .act = hm_vec_act_avx512,
    .add = hm_vec_add_avx512,
    .prelu = hm_vec_prelu_avx512,
    .add_prelu = hm_vec_add_prelu_avx512,
    .copy = hm_vec_copy_avx512,
    .copy_strided = hm_vec_copy_strided_avx512,
    .max = hm_vec_max_avx512,
    .dw_rows = hm_vec_dw_rows_avx512,
};
