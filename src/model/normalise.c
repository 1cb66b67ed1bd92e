/* normalise.c - the crops' normalisation, (x/255 - mean) / std per RGB
 * channel, as torchvision's Normalize does it (float32). */
#include "model/model.h"

const double hm_norm_mean[3] = {0.485, 0.456, 0.406};
const double hm_norm_std[3] = {0.229, 0.224, 0.225};

void hm_u8_to_normalised(const uint8_t *crops, float *out, int B) {
    const float mean[3] = {(float)hm_norm_mean[0], (float)hm_norm_mean[1], (float)hm_norm_mean[2]};
    const float stdv[3] = {(float)hm_norm_std[0], (float)hm_norm_std[1], (float)hm_norm_std[2]};
    const size_t hw = (size_t)HAMER_CROP_H * HAMER_CROP_W;
    for (int b = 0; b < B; b++)
        for (size_t p = 0; p < hw; p++)
            for (int c = 0; c < 3; c++)
                out[((size_t)b * 3 + c) * hw + p] = ((float)crops[((size_t)b * hw + p) * 3 + c] / 255.0f - mean[c]) / stdv[c];
}
