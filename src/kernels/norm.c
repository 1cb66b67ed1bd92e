/* norm.c - LayerNorm and softmax rows in portable C: the scalar and avx2
 * levels' bodies (kernels.h; norm.h dispatches).
 *
 * LayerNorm statistics are accumulated in double: the residual stream of a
 * 32-block ViT reaches magnitudes where a float running sum of squares loses
 * the digits the 1e-4 parity budget needs.
 */
#include <math.h>
#include "kernels/norm.h"
#include "kernels/kernels.h"

void hm_layernorm_c(const float *x, float *y, int n, int d, const float *w, const float *b, float eps) {
    for (int r = 0; r < n; r++) {
        const float *xr = x + (size_t)r * d;
        float *yr = y + (size_t)r * d;
        double s = 0, ss = 0;
        for (int i = 0; i < d; i++) s += xr[i];
        double mean = s / d;
        for (int i = 0; i < d; i++) {
            double t = xr[i] - mean;
            ss += t * t;
        }
        float inv = (float)(1.0 / sqrt(ss / d + eps));
        float mf = (float)mean;
        for (int i = 0; i < d; i++) yr[i] = (xr[i] - mf) * inv * w[i] + b[i];
    }
}

void hm_softmax_c(float *x, int n) {
    float mx = x[0];
    for (int i = 1; i < n; i++) mx = x[i] > mx ? x[i] : mx;
    float sum = 0;
    for (int i = 0; i < n; i++) {
        x[i] = expf(x[i] - mx);
        sum += x[i];
    }
    float inv = 1.0f / sum;
    for (int i = 0; i < n; i++) x[i] *= inv;
}
