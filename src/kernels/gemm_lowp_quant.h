/* gemm_lowp_quant.h - what every architecture's int8 activation
 * quantiser shares (x86/gemm_lowp_avx512vnni.c, arm/gemm_lowp_neon.c): the
 * outlier threshold and the heap that keeps a row's largest values. The
 * quantisers must make the same choices from the same row (scale, zero
 * point, outliers, bytes), so that the int32 sums, and from them the
 * results, are the same on every architecture; this is the part they
 * share as code rather than by construction.
 */
#ifndef HM_GEMM_LOWP_QUANT_H
#define HM_GEMM_LOWP_QUANT_H

#include <stdint.h>

#include "kernels/gemm_lowp.h"

/* A value is an outlier when |x| > TAU * mean|x| of its row. For a Gaussian
 * row the largest of 5120 values is ~4.9 mean|x|, so 8 leaves ordinary rows
 * alone (no fp32 work) while channels amplified x20 by a LayerNorm gain, or
 * the rare huge post-GELU value, leave the grid. Taking them out shrinks the
 * row's scale to that of the bulk: a single x20 channel would otherwise cost
 * the other values four of their eight bits. */
#define HM_LOWP_TAU 8.0f

/* Min-heap on |value| of the (up to) HM_LOWP_MAX_OUTLIERS largest. */
typedef struct {
    int n;
    float key[HM_LOWP_MAX_OUTLIERS];
    int32_t idx[HM_LOWP_MAX_OUTLIERS];
} hm_topk;

static inline void hm_topk_sift(hm_topk *h, int i) {
    for (;;) {
        int l = 2 * i + 1, r = l + 1, s = i;
        if (l < h->n && h->key[l] < h->key[s]) s = l;
        if (r < h->n && h->key[r] < h->key[s]) s = r;
        if (s == i) return;
        float tk = h->key[i];
        int32_t ti = h->idx[i];
        h->key[i] = h->key[s], h->idx[i] = h->idx[s];
        h->key[s] = tk, h->idx[s] = ti;
        i = s;
    }
}

static inline void hm_topk_push(hm_topk *h, float key, int32_t idx) {
    if (h->n < HM_LOWP_MAX_OUTLIERS) {
        int i = h->n++;
        h->key[i] = key, h->idx[i] = idx;
        while (i > 0) { /* sift up */
            int p = (i - 1) / 2;
            if (h->key[p] <= h->key[i]) break;
            float tk = h->key[i];
            int32_t ti = h->idx[i];
            h->key[i] = h->key[p], h->idx[i] = h->idx[p];
            h->key[p] = tk, h->idx[p] = ti;
            i = p;
        }
    } else if (key > h->key[0]) {
        h->key[0] = key, h->idx[0] = idx;
        hm_topk_sift(h, 0);
    }
}

#endif
