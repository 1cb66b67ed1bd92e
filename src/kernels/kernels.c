/* kernels.c - the portable kernel table and the switch from an ISA level
 * to its table (kernels.h). */
#include "kernels/kernels.h"

#include "kernels/norm.h"

const hm_kernels hm_kernels_scalar = {
    .isa = HM_ISA_SCALAR,
    .gemm_nr = HM_GEMM_NR_SCALAR,
    .gemm_block = hm_gemm_block_scalar,
    .gelu = hm_gelu_vec_c,
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

const hm_kernels *hm_kernels_for(int isa) {
    switch (isa) {
#if defined(__x86_64__)
    case HM_ISA_AVX2: return &hm_kernels_avx2;
    case HM_ISA_AVX512: return &hm_kernels_avx512;
#elif defined(__aarch64__)
    case HM_ISA_NEON: return &hm_kernels_neon;
#endif
    default: return &hm_kernels_scalar;
    }
}
