/* fuzz_image - the image path of a request: decode (hm_image_decode: JPEG,
 * PNG, EXIF orientation, size limits; WebP through libwebp; AVIF, BMP, TIFF,
 * GIF through FFmpeg from memory), then check a box and crop it
 * (hm_box_check, hm_crop in the mode the input picks).
 *
 * Input: an 18-byte header, then the image file.
 *   byte 0      bit 0: crop mode (0 warp, 1 pad); bit 1: left hand
 *   byte 1      rescale = (b + 1) / 16, so (0, 16]
 *   bytes 2-17  x1, y1, x2, y2 as little-endian float32 (any bits: NaN, inf)
 * Inputs under 18 bytes are decoded whole (no crop).
 *
 * The size the header declares (hm_image_header_size, the server's bound on
 * a body's pixels before it decodes) is read first: a JPEG, PNG or WebP
 * that decodes must have that size (a JPEG's EXIF orientation may turn
 * it), and so must any other image whose header states one.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include "format/image.h"
#include "pipeline/preprocess.h"
#include "core/util.h"

#define HDR 18

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    hm_image img;
    if (size < HDR) {
        if (hm_image_decode(data, size, "fuzz", &img) == HM_OK) hm_image_free(&img);
        return 0;
    }
    const char *fmt = NULL;
    long long hw = 0, hh = 0;
    const int declared = hm_image_header_size(data + HDR, size - HDR, &fmt, &hw, &hh);
    if (hm_image_decode(data + HDR, size - HDR, "fuzz", &img) != HM_OK) return 0;
    if (img.w < 1 || img.h < 1 || (long long)img.w * img.h > HM_IMAGE_MAX_PIXELS) __builtin_trap();
    /* JPEG, PNG, WebP: the header read as their libraries read it, so one that decodes has its size there.
     * The FFmpeg formats' containers may hold none that FFmpeg needs (an AVIF's boxes damaged, its AV1
     * header whole): the decoder's own max_pixels bounds them; a size stated must be the one decoded. */
    const int own = fmt && (!strcmp(fmt, "JPEG") || !strcmp(fmt, "PNG") || !strcmp(fmt, "WebP"));
    if ((own && !declared) ||
        (declared && !((hw == img.w && hh == img.h) || (!strcmp(fmt, "JPEG") && hw == img.h && hh == img.w))))
        __builtin_trap();
    volatile uint8_t sink = img.rgb[0] ^ img.rgb[(size_t)img.w * img.h * 3 - 1];
    (void)sink;
    float c[4];
    memcpy(c, data + 2, sizeof c);
    hm_box box = {c[0], c[1], c[2], c[3], !(data[0] & 2)};
    double rescale = (data[1] + 1) / 16.0;
    float *out = malloc(sizeof(float) * 3 * HAMER_CROP_H * HAMER_CROP_W);
    hm_crop_info info;
    if (out && hm_crop(&img, &box, rescale, (data[0] & 1) ? HM_CROP_PAD : HM_CROP_WARP, out, &info) == HM_OK) {
        uint8_t *u8 = malloc(3 * HAMER_CROP_H * HAMER_CROP_W);
        if (u8 && hm_crop_to_u8(out, u8)) __builtin_trap();
        free(u8);
    }
    free(out);
    hm_image_free(&img);
    return 0;
}
