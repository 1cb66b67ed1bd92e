/* test_norm.c - LayerNorm and softmax rows against float64 references, on
 * every ISA this CPU runs (the AVX-512 bodies and the portable C), at the
 * model's widths (1280 ViT, 1024 head, 192 keys) and at odd widths that
 * exercise the vector tails.
 *
 * Bounds: outputs are O(1) (LayerNorm with gains ~1; softmax in [0, 1]);
 * float32 storage of each output alone costs ~6e-8 relative, and the float
 * formula after the double statistics a few ulp more, so 2e-6 absolute on
 * LayerNorm (inputs up to ~100 with a mean offset) leaves ~10x headroom.
 * Softmax entries share one float sum of n terms (relative error up to
 * ~n/2 ulp in the worst order; 2e-7 is measured at n = 192), hence 1e-6
 * relative plus 1e-12 absolute. Either bound fails
 * on a wrong mean, variance, eps, tail lane or a missing normalisation.
 */
#include <math.h>
#include <stdlib.h>

#include "check.h"
#include "kernels/gemm.h"
#include "kernels/norm.h"
#include "model/model.h"

static double urand(unsigned *s) {
    *s = *s * 1103515245u + 12345u;
    return ((*s >> 8) & 0xFFFFFF) / 16777216.0;
}

static void check_layernorm(const char *isa, int n, int d, unsigned seed) {
    float *x = malloc(sizeof(float) * n * d), *y = malloc(sizeof(float) * n * d);
    float *w = malloc(sizeof(float) * d), *b = malloc(sizeof(float) * d);
    for (int i = 0; i < d; i++) {
        w[i] = (float)(0.5 + urand(&seed));
        b[i] = (float)(urand(&seed) - 0.5);
    }
    for (int i = 0; i < n * d; i++) x[i] = (float)(40.0 + 60.0 * (urand(&seed) - 0.5)); /* offset mean */
    hm_layernorm(x, y, n, d, w, b, 1e-6f);
    double worst = 0;
    for (int r = 0; r < n; r++) {
        const float *xr = x + (size_t)r * d;
        double mean = 0, var = 0;
        for (int i = 0; i < d; i++) mean += xr[i];
        mean /= d;
        for (int i = 0; i < d; i++) var += (xr[i] - mean) * (xr[i] - mean);
        var /= d;
        for (int i = 0; i < d; i++) {
            double ref = (xr[i] - mean) / sqrt(var + 1e-6) * w[i] + b[i];
            double e = fabs(y[(size_t)r * d + i] - ref);
            worst = e > worst ? e : worst;
        }
    }
    CHECKF(worst <= 2e-6, "%s layernorm n=%d d=%d: max abs error %.3g > 2e-6", isa, n, d, worst);
    /* in place (the ViT's last_norm) gives the same values */
    hm_layernorm(x, x, n, d, w, b, 1e-6f);
    CHECKF(!memcmp(x, y, sizeof(float) * n * d), "%s layernorm n=%d d=%d: in place differs", isa, n, d);
    free(x), free(y), free(w), free(b);
}

static void check_softmax(const char *isa, int n, unsigned seed) {
    float *x = malloc(sizeof(float) * n);
    double *ref = malloc(sizeof(double) * n);
    for (int i = 0; i < n; i++) x[i] = (float)(30.0 * (urand(&seed) - 0.5));
    x[n / 2] = -200.0f; /* far below the row's maximum: underflows to ~0 */
    double mx = -INFINITY, sum = 0;
    for (int i = 0; i < n; i++) mx = x[i] > mx ? x[i] : mx;
    for (int i = 0; i < n; i++) sum += (ref[i] = exp((double)x[i] - mx));
    hm_softmax(x, n);
    int bad = -1;
    double total = 0;
    for (int i = 0; i < n; i++) {
        double r = ref[i] / sum;
        if (!(fabs(x[i] - r) <= 1e-6 * r + 1e-12) && bad < 0) bad = i;
        total += x[i];
    }
    CHECKF(bad < 0, "%s softmax n=%d: entry %d is %.9g, reference %.9g", isa, n, bad, bad < 0 ? 0 : x[bad],
           bad < 0 ? 0 : ref[bad] / sum);
    CHECKF(fabs(total - 1.0) < 1e-5, "%s softmax n=%d: sums to %.8f", isa, n, total);
    /* a NaN score makes the row NaN rather than vanishing */
    for (int i = 0; i < n; i++) x[i] = 0.0f;
    x[n - 1] = NAN;
    hm_softmax(x, n);
    CHECKF(isnan(x[0]), "%s softmax n=%d: a NaN input did not propagate", isa, n);
    free(x), free(ref);
}

int main(void) {
    static const hm_isa isas[] = {HM_ISA_AVX512, HM_ISA_AVX2, HM_ISA_SCALAR};
    int ran = 0;
    for (int k = 0; k < 3; k++) {
        if (isas[k] > hm_cpu_isa()) continue;
        CHECK(hm_isa_force(isas[k]) == HM_OK);
        const char *name = hm_isa_name(isas[k]);
        ran++;
        check_layernorm(name, 192, 1280, 1);
        check_layernorm(name, 3, 1024, 2);
        check_layernorm(name, 5, 37, 3);
        check_layernorm(name, 2, 1, 4);
        check_softmax(name, 192, 5);
        check_softmax(name, 193, 6);
        check_softmax(name, 7, 7);
        check_softmax(name, 1, 8);
    }
    CHECK(ran >= 1);
    return check_summary();
}
