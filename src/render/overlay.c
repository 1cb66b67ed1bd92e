/* overlay.c - pictures of a hamer_predict result (see overlay.h).
 *
 * The side view turns each hand about its own centre (not the hands' common
 * centre) so that hands far apart in depth stay where they are in the frame.
 */
#include <stdlib.h>
#include <string.h>
#include "format/mesh_io.h"
#include "render/overlay.h"
#include "render/render.h"
#include "core/util.h"
#include "model/model.h"

int hm_overlay_render(const hm_image *img, const hamer_hand *hands, int n, const int32_t *faces, hm_image *overlay,
                      hm_image *side) {
    if (overlay) memset(overlay, 0, sizeof *overlay);
    if (side) memset(side, 0, sizeof *side);
    if (!img || !img->rgb || (n > 0 && (!hands || !faces)) || n < 0)
        return hm_err(HM_E_ARG, "render: bad arguments");
    int nf = HAMER_N_FACES + HM_MESH_EXTRA_FACES, rc = HM_OK, nm = 0;
    size_t npix = (size_t)img->w * img->h * 3;
    int32_t *closed = hm_alloc(sizeof(int32_t) * 3 * (size_t)nf);
    float *verts = hm_alloc(sizeof(float) * 3 * HAMER_N_VERTS * (size_t)(n > 0 ? n : 1));
    hm_mesh *meshes = calloc(n > 0 ? n : 1, sizeof *meshes);
    if (!closed || !verts || !meshes) {
        rc = hm_err(HM_E_NOMEM, "out of memory rendering");
        goto done;
    }
    hm_mesh_close_hand(faces, HAMER_N_FACES, HAMER_N_VERTS, closed);
    float focal = hm_camera_focal_full(img->w, img->h);
    for (int i = 0; i < n; i++) {
        const hamer_hand *H = &hands[i];
        if (!H->ok) continue;
        float *v = verts + (size_t)nm * 3 * HAMER_N_VERTS;
        for (int q = 0; q < HAMER_N_VERTS; q++)
            for (int k = 0; k < 3; k++) v[3 * q + k] = H->vertices[3 * q + k] + H->cam_t_full[k];
        meshes[nm] = (hm_mesh){v, HAMER_N_VERTS, closed, nf, {hm_render_light_blue[0], hm_render_light_blue[1], hm_render_light_blue[2]}};
        focal = H->focal_length;
        nm++;
    }
    float cx = img->w / 2.0f, cy = img->h / 2.0f;
    if (overlay) {
        *overlay = (hm_image){img->w, img->h, hm_alloc(npix)};
        if (!overlay->rgb) {
            rc = HM_E_NOMEM;
            goto done;
        }
        memcpy(overlay->rgb, img->rgb, npix);
        if ((rc = hm_render_overlay(overlay->rgb, img->w, img->h, meshes, nm, focal, cx, cy, 1.0f))) goto done;
    }
    if (side) {
        *side = (hm_image){img->w, img->h, hm_alloc(npix)};
        if (!side->rgb) {
            rc = HM_E_NOMEM;
            goto done;
        }
        for (int i = 0; i < nm; i++)
            hm_mesh_rotate_y(meshes[i].verts, HAMER_N_VERTS, 90.0f, verts + (size_t)i * 3 * HAMER_N_VERTS);
        rc = hm_render_side_view(side->rgb, img->w, img->h, meshes, nm, focal, cx, cy, 0.0f, NULL, NULL);
    }
done:
    if (rc) {
        if (overlay) hm_image_free(overlay);
        if (side) hm_image_free(side);
    }
    hm_free(closed);
    hm_free(verts);
    free(meshes);
    return rc;
}
