/* format/image_ext.h - the decoders of image_ext.c (WebP, and the formats
 * read through FFmpeg), for image.c's dispatch. Internal. */
#ifndef HM_FORMAT_IMAGE_EXT_H
#define HM_FORMAT_IMAGE_EXT_H

#include <stddef.h>
#include <stdint.h>

#include "format/image.h"

/* The size limits of image.h (HM_E_FORMAT for no pixels, HM_E_UNSUPPORTED
 * over a limit), one line naming `what` and the format. */
int hm_image_check_size(const char *what, const char *fmt, long long w, long long h);

/* A still WebP (VP8, VP8L, with or without alpha) to RGB. */
int hm_image_decode_webp(const uint8_t *buf, size_t len, const char *what, hm_image *out);

/* The first frame of an image FFmpeg reads: the demuxer named (chosen by
 * the caller from the file's bytes), its video stream's decoder; fmt names
 * the format in messages. */
int hm_image_decode_ff(const uint8_t *buf, size_t len, const char *what, const char *fmt, const char *demuxer,
                       hm_image *out);

#endif
