/* rotate.c - quarter turns of packed RGB pictures (display-matrix rotation). */
#include <string.h>

#include "video/video.h"

void hm_video_rotate(const uint8_t *in, int w, int h, int deg, uint8_t *out) {
    const size_t W = (size_t)w, H = (size_t)h;
    if (deg == 0) {
        memcpy(out, in, W * H * 3);
        return;
    }
    if (deg == 180) {
        for (size_t y = 0; y < H; y++) {
            const uint8_t *src = in + (H - 1 - y) * W * 3;
            uint8_t *dst = out + y * W * 3;
            for (size_t x = 0; x < W; x++) memcpy(dst + x * 3, src + (W - 1 - x) * 3, 3);
        }
        return;
    }
    /* 90 clockwise: the output's row y' is the input's column y' read
     * bottom up; 270: the input's column w-1-y' read top down. Output is
     * H wide and W tall. */
    for (size_t yo = 0; yo < W; yo++) {
        uint8_t *dst = out + yo * H * 3;
        if (deg == 90) {
            for (size_t xo = 0; xo < H; xo++) memcpy(dst + xo * 3, in + ((H - 1 - xo) * W + yo) * 3, 3);
        } else {
            for (size_t xo = 0; xo < H; xo++) memcpy(dst + xo * 3, in + (xo * W + (W - 1 - yo)) * 3, 3);
        }
    }
}
