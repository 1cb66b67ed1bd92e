/* fuzz_exif - the camera tags of a photo's EXIF block (hm_exif_read: JPEG
 * markers to APP1 "Exif", PNG chunks to eXIf, the TIFF IFDs), the focal
 * length computed from them (hm_exif_focal_px) and the public
 * hamer_exif_focal on the same bytes.
 *
 * Input: a 4-byte header, then the file.
 *   bytes 0-1   the decoded image's width - 1, little-endian (1..65536)
 *   bytes 2-3   its height - 1
 * Traps when a focal length comes out that is not finite, or outside the
 * documented 0.05 .. 100 times the longer side. */
#include <math.h>
#include <stdint.h>
#include <string.h>
#include "format/exif.h"
#include "hamer.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 4) return 0;
    const int w = (data[0] | data[1] << 8) + 1, h = (data[2] | data[3] << 8) + 1;
    const double longer = w > h ? w : h;
    hm_exif e;
    double f = 0;
    const int found = hm_exif_read(data + 4, size - 4, &e);
    if (!found && (e.focal_mm != 0 || e.focal_35mm != 0 || e.pixel_x != 0)) __builtin_trap();
    if (hm_exif_focal_px(&e, w, h, &f) && !(isfinite(f) && f >= 0.05 * longer && f <= 100 * longer)) __builtin_trap();
    float pf = -1;
    const int rc = hamer_exif_focal(data + 4, size - 4, w, h, &pf);
    if (rc < 0 || rc > 1 || (rc == 1 && !(pf > 0)) || (rc == 0 && pf != -1)) __builtin_trap();
    return 0;
}
