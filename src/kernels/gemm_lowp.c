/* gemm_lowp.c - the low-precision ("fast") GEMM scheme.
 *
 * Not implemented yet: requesting it is an explicit error, never a silent
 * fallback to fp32.
 */
#include "gemm.h"
#include "../util.h"

int hm_pack_weights_prec(hm_packed *p, const float *W, int ldw, const float *bias, int N, int K, hm_precision prec) {
    if (prec == HM_PREC_FP32) return hm_pack_weights(p, W, ldw, bias, N, K);
    return hm_err(HM_E_UNSUPPORTED, "precision 'fast' is not available in this build");
}

const char *hm_precision_scheme(hm_precision prec) {
    return prec == HM_PREC_FP32 ? "fp32" : "unavailable";
}
