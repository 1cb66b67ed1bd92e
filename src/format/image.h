/* image.h - photo decoding to 8-bit RGB (JPEG, PNG; WebP, AVIF, BMP, TIFF,
 * GIF's first frame in image_ext.c), PNG encoding.
 *
 * Decoding follows what the official HaMeR demo gets from cv2.imread
 * (IMREAD_COLOR), except that channels come out RGB, not BGR:
 * - JPEG (libjpeg-turbo, default IDCT and fancy upsampling, as both OpenCV
 *   and Pillow use it): EXIF orientation (all 8 values) is applied; grey
 *   images are replicated to RGB; CMYK/YCCK use OpenCV's CMYK->RGB formula.
 * - PNG (libpng): palette expanded, grey (any depth) replicated, alpha and
 *   tRNS dropped (no compositing), 16-bit samples truncated to their high
 *   byte (png_set_strip_16, like OpenCV); gamma and colour chunks ignored.
 * - WebP (libwebp), AVIF (FFmpeg's mov demuxer, libdav1d), BMP, TIFF (the
 *   first image) and GIF (the first frame) through FFmpeg: image_ext.c.
 * The format comes from the bytes, never from a file name.
 * Corrupt or truncated data (a JPEG missing any byte, its EOI included; a PNG
 * missing any chunk up to IEND; whatever libwebp or FFmpeg report) is an
 * error, never a partial image.
 * Images over HM_IMAGE_MAX_PIXELS pixels or HM_IMAGE_MAX_DIM on a side are
 * refused before any pixel memory is allocated, and a JPEG with more than
 * 256 scans, or scans adding up to more than 64 passes over its blocks (a
 * progressive JPEG has about 10 scans, 5 passes), before those scans are
 * decoded (HM_E_UNSUPPORTED).
 */
#ifndef HM_IMAGE_H
#define HM_IMAGE_H

#include <stddef.h>
#include <stdint.h>

#define HM_IMAGE_MAX_PIXELS 100000000LL
#define HM_IMAGE_MAX_DIM 65535 /* JPEG's own limit; PNG is held to the same */

typedef struct {
    int w, h;
    uint8_t *rgb; /* w*h*3 bytes, RGB interleaved, row-major; hm_alloc'd */
} hm_image;

/* Read and decode an image file (format from its magic bytes). On error
 * *out is zeroed and the one-line message names `path`. */
int hm_image_load(const char *path, hm_image *out);
/* Decode image bytes; `what` names the source in error messages. */
int hm_image_decode(const void *buf, size_t len, const char *what, hm_image *out);
/* The size an image's header declares (the formats hm_image_decode reads),
 * without decoding: 1 with *w, *h (and *fmt, its name, when not NULL), 0
 * when the bytes are no such image or the header holds no size. */
int hm_image_header_size(const void *buf, size_t len, const char **fmt, long long *w, long long *h);
/* Encode as an 8-bit RGB PNG into a malloc'd buffer (caller frees). */
int hm_image_encode_png(const hm_image *img, uint8_t **buf, size_t *len);
/* Write an 8-bit RGB PNG file. */
int hm_image_save_png(const char *path, const hm_image *img);
/* Free the pixels and zero the struct (safe on a zeroed struct). */
void hm_image_free(hm_image *img);

#endif
