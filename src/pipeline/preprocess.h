/* preprocess.h - image + hand box -> the normalised crop the backbone sees.
 *
 * Output of hm_crop: float32 [3,256,192] (RGB planes), (x/255 - mean)/std
 * computed in float32 as ((float)x - 255*mean) / (255*std) with mean
 * (0.485,0.456,0.406), std (0.229,0.224,0.225) - the official
 * ViTDetDataset's arithmetic.
 *
 * Two crop modes:
 *
 * HM_CROP_WARP (the official demo, hamer/datasets/vitdet_dataset.py):
 *   centre c = (p1+p2)/2 in float32, box size bb = rescale * max(h, w*256/192)
 *   with the demo's float32/float64 mix; if bb/512 > 1.1 the image is blurred
 *   (scikit-image gaussian, sigma (bb/512-1)/2, truncate 4, mode nearest,
 *   float64); left hands mirror the image; then OpenCV 4.6's getAffineTransform
 *   (its 6x6 LU solve, replayed) and warpAffine INTER_LINEAR with a zero
 *   border (inverse map, 1/32-pixel fixed-point coordinates, integer weights
 *   and rounding on uint8 pixels, a float64 sum on blurred ones); columns
 *   32..223 of the 256x256 patch. Without the blur the crop is bit-identical
 *   to the official pipeline. With it the sums are scipy's, term by term, but
 *   the Gaussian weights come from the C library's exp, which differs from
 *   NumPy's AVX-512 exp in the last bit for about a quarter of arguments;
 *   after rounding to float32 that has not shown in the tests (bound
 *   checked: 1e-5). One more departure, for huge boxes on thin images: where
 *   the kernel reaches over 256 pixels past both image edges, the doubly
 *   clamped tail is added as one product (relative difference ~1e-15).
 *   Source coordinates are exact 64-bit integers: OpenCV saturates its maps
 *   to 16 bits, so beyond 32767 pixels from the origin it differs, and is
 *   wrong.
 *
 * HM_CROP_PAD (the seed port's): n = round(bb) (bb as above, at least 1); the
 *   n x n square whose top-left pixel is (round(cx - n/2), round(cy - n/2))
 *   (rounding halves up; cx, cy the float32 box centre), pixels outside the
 *   image filled with grey HM_CROP_PAD_GREY_R/G/B; resized to 256x256 exactly as
 *   Pillow 9.4's Image.resize((256, 256), BILINEAR) does (fixed-point
 *   separable passes, horizontal first, 8-bit intermediate); mirrored for
 *   left hands; columns 32..223. Bit-identical to doing that with Pillow.
 *
 * Workspace: hm_crop allocates per call and frees before returning (a few
 * MB: the blurred samples and one image row of float64; pad mode 576 bytes
 * per image row the crop covers). The blur evaluates only the pixels the
 * warp reads, never the whole image, so its cost follows the crop, not the
 * image.
 */
#ifndef HM_PREPROCESS_H
#define HM_PREPROCESS_H

#include <stdint.h>
#include "format/image.h"
#include "hamer.h"

/* The square patch is HAMER_CROP_H on a side; the crop is its centre
 * HAMER_CROP_W columns (32..223). */
#define HM_CROP_RESCALE_MAX HAMER_MAX_RESCALE
#define HM_CROP_PAD_GREY_R 124  /* round(255*mean): normalises to about 0 */
#define HM_CROP_PAD_GREY_G 116
#define HM_CROP_PAD_GREY_B 104

typedef struct {
    float x1, y1, x2, y2; /* pixels, float32 as the official demo holds them */
    int is_right;         /* 0: left hand (the crop is mirrored) */
} hm_box;

typedef enum { HM_CROP_WARP, HM_CROP_PAD } hm_crop_mode;

/* Where the crop came from, for the full-image camera: crop pixel column u
 * (0..255 in the 256-wide patch; row likewise) shows image point
 *   x = cx + (u - 128) * size / 256      (right hands)
 *   x = cx - (u - 128) * size / 256      (left hands, mirrored)
 *   y = cy + (v - 128) * size / 256
 * in pixel-index coordinates of the original, unmirrored image.
 * WARP: cx, cy = the float32 box centre, size = bb - exactly the demo's
 * box_center and box_size. PAD: the same relation for the square actually
 * cropped: size = n, cx = x0 - 0.5 + (right ? 128.5 : 127.5) * n/256,
 * cy = y0 - 0.5 + 128.5 * n/256 (Pillow samples pixel centres). */
typedef struct {
    double cx, cy, size;
} hm_crop_info;

/* Validate a box against a w x h image: finite coordinates, x2 > x1,
 * y2 > y1, overlapping the image, each side at most 16 times the larger
 * image side. HM_OK or HM_E_ARG with a one-line message quoting the box. */
int hm_box_check(const hm_box *b, int w, int h);

/* Crop one hand. rescale in (0, 16] (the demo uses 2.0). out: 3*256*192
 * floats; info may be NULL. Checks the box first (hm_box_check). */
int hm_crop(const hm_image *img, const hm_box *box, double rescale, hm_crop_mode mode, float *out,
            hm_crop_info *info);

/* Normalised [3,256,192] crop -> uint8 [256,192,3] RGB: each value is
 * v = x*(255*std) + 255*mean in double with the same float32 constants
 * hm_crop divides by, then floor(v + 0.5) clamped to 0..255 (half rounds
 * up). Exact inverse of hm_crop on crops made from uint8 pixels. */
int hm_crop_to_u8(const float *crop, uint8_t *out);

#endif
