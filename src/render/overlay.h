/* overlay.h - pictures of a hamer_predict result: overlay and side view. */
#ifndef HM_OVERLAY_H
#define HM_OVERLAY_H

#include <stdint.h>
#include "hamer.h"
#include "format/image.h"

/* Render the hands that succeeded (ok = 1) of an image:
 *  overlay: a copy of img with every hand's closed mesh (the checkpoint's
 *    faces + the demo's 14 wrist faces) drawn opaquely in the full-image
 *    camera (vertices + cam_t_full, focal_length, principal point at the
 *    image centre);
 *  side: each mesh turned 90 degrees about the vertical axis through its own
 *    centre, on white, same camera and size.
 * Either output may be NULL; outputs are hm_alloc'd images (hm_image_free).
 * HM_OK or an error (hm_err). */
int hm_overlay_render(const hm_image *img, const hamer_hand *hands, int n, const int32_t *faces, hm_image *overlay,
                      hm_image *side);

#endif
