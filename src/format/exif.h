/* exif.h - the camera tags of a photo's EXIF block (JPEG APP1 "Exif",
 * PNG eXIf): what a focal length in pixels can be computed from.
 *
 * The reader never fails: a missing, truncated or malformed block gives
 * "no tags" (an EXIF block never fails a photo, as in image.c's
 * orientation). It reads IFD0 and the Exif IFD it points to, nothing else
 * (no next-IFD chains, so no loops), every offset and count checked
 * against the buffer; it looks at no more than HM_EXIF_SCAN bytes. */
#ifndef HM_EXIF_H
#define HM_EXIF_H

#include <stddef.h>
#include <stdint.h>

#define HM_EXIF_SCAN ((size_t)1 << 20)   /* = HAMER_EXIF_SCAN */
#define HM_EXIF_MAX_ENTRIES 1024         /* entries read per IFD */
#define HM_EXIF_35MM_DIAG 43.266615305567875 /* mm: the diagonal of a 36 x 24 mm frame */

typedef struct {
    double focal_mm;           /* FocalLength (0x920A); 0 absent */
    double focal_35mm;         /* FocalLengthIn35mmFilm (0xA405); 0 absent */
    double plane_xres;         /* FocalPlaneXResolution (0xA20E), pixels per unit; 0 absent */
    double plane_yres;         /* FocalPlaneYResolution (0xA20F) */
    int plane_unit;            /* FocalPlaneResolutionUnit (0xA210): 2 inch (the default), 3 cm, 4 mm, 5 um;
                                  -1 present but none of 1..5 (no focal length from it) */
    uint32_t pixel_x, pixel_y; /* PixelXDimension / PixelYDimension (0xA002 / 0xA003); 0 absent */
} hm_exif;

/* The tags of the EXIF block in JPEG or PNG bytes (format from the magic
 * bytes; anything else has none). 1 when a TIFF-structured block was found
 * (tags absent from it are 0), 0 when none; *out is always set. */
int hm_exif_read(const uint8_t *buf, size_t len, hm_exif *out);

/* The focal length in pixels of the photo as decoded (W x H, orientation
 * applied): FocalLengthIn35mmFilm over the 35 mm frame's diagonal times
 * the image's diagonal; else FocalLength times the focal-plane
 * resolution, scaled from the PixelX/YDimension image to this one (which
 * must have its aspect ratio within 1 %, either way round). 1 with *f set
 * when that gives a value in [0.05, 100] x max(W, H), else 0. */
int hm_exif_focal_px(const hm_exif *e, int W, int H, double *f);

#endif
