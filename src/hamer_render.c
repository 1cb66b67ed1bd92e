/* hamer_render.c - pictures of the hands with marks (include/hamer.h:
 * hamer_render_overlay_*): the meshes as hamer_render_rgb draws them, then
 * each hand's box, keypoints and label (render/marks.h). */
#include <stdlib.h>
#include <string.h>

#include "core/util.h"
#include "format/image.h"
#include "hamer.h"
#include "render/marks.h"

_Static_assert((int)HAMER_DRAW_MESH == (int)HM_MARK_MESH && (int)HAMER_DRAW_BOXES == (int)HM_MARK_BOXES &&
                   (int)HAMER_DRAW_KEYPOINTS == (int)HM_MARK_KEYPOINTS && (int)HAMER_DRAW_LABELS == (int)HM_MARK_LABELS,
               "the public draw bits are the marks' bits");

hamer_render_params hamer_render_default_params(void) {
    hamer_render_params p;
    memset(&p, 0, sizeof p);
    return p;
}

int hamer_render_overlay_rgb(const hamer_model *model, const uint8_t *rgb, int w, int h, const hamer_hand *hands,
                             int n, const hamer_render_params *params, uint8_t *out) {
    if (!rgb || w < 1 || h < 1 || n < 0 || n > HAMER_MAX_HANDS || (n > 0 && !hands) || !out)
        return hm_err(HM_E_ARG, "%s: bad arguments", __func__);
    if ((double)w * h > HM_IMAGE_MAX_PIXELS) return hm_err(HM_E_ARG, "%s: image of %dx%d is too large", __func__, w, h);
    const hamer_render_params p = params ? *params : hamer_render_default_params();
    if (params && HM_CHECK_RESERVED(params, "hamer_render_params")) return HM_E_ARG;
    if (p.hide & ~(unsigned)HAMER_DRAW_ALL)
        return hm_err(HM_E_ARG, "%s: hide 0x%x has bits outside HAMER_DRAW_ALL", __func__, p.hide);
    const unsigned draw = HAMER_DRAW_ALL & ~p.hide;
    if (draw & HAMER_DRAW_MESH) {
        if (!model) return hm_err(HM_E_ARG, "%s: the meshes need the model", __func__);
        int rc = hamer_render_rgb(model, rgb, w, h, hands, n, out);
        if (rc) return rc;
    } else if (out != rgb) {
        memmove(out, rgb, (size_t)w * h * 3);
    }
    hm_marks_draw(out, w, h, hands, n, draw);
    return HAMER_OK;
}

int hamer_render_overlay_png(const hamer_model *model, const uint8_t *rgb, int w, int h, const hamer_hand *hands,
                             int n, const hamer_render_params *params, uint8_t **png, size_t *len) {
    if (!png || !len || w < 1 || h < 1) return hm_err(HM_E_ARG, "%s: bad arguments", __func__);
    if ((double)w * h > HM_IMAGE_MAX_PIXELS) return hm_err(HM_E_ARG, "%s: image of %dx%d is too large", __func__, w, h);
    hm_image img = {w, h, hm_alloc((size_t)w * h * 3)};
    if (!img.rgb) return hm_err(HM_E_NOMEM, "%s: out of memory", __func__);
    int rc = hamer_render_overlay_rgb(model, rgb, w, h, hands, n, params, img.rgb);
    if (!rc) rc = hm_image_encode_png(&img, png, len);
    hm_image_free(&img);
    return rc;
}
