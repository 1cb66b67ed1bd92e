/* cli_render.c - the pictures of `hamer run`: overlay and side view.
 *
 * Overlay: every hand's closed mesh (the checkpoint's faces + the demo's 14
 * wrist faces) in the full-image camera (vertices + cam_t_full, focal
 * 5000/256 * max(W, H), principal point at the image centre), drawn opaquely
 * over the photo. Side view: each mesh turned 90 degrees about the vertical
 * axis through its own centre (so hands stay where they are in the picture
 * even when far apart in depth), on white, same camera.
 */
#include <stdlib.h>
#include <string.h>
#include "cli.h"
#include "image.h"
#include "mesh_io.h"
#include "render.h"
#include "util.h"

int hm_cli_render_hands(const hm_image *img, const hamer_hand *hands, int n, const int32_t *faces,
                        const char *overlay_path, const char *side_path, const float color[3]) {
    int nf = HAMER_N_FACES + HM_MESH_EXTRA_FACES, rc = HM_OK, nm = 0;
    int32_t *closed = malloc(sizeof(int32_t) * 3 * (size_t)nf);
    float *verts = malloc(sizeof(float) * 3 * HAMER_N_VERTS * (size_t)(n > 0 ? n : 1));
    hm_mesh *meshes = calloc(n > 0 ? n : 1, sizeof *meshes);
    hm_image canvas = {img->w, img->h, malloc((size_t)img->w * img->h * 3)};
    if (!closed || !verts || !meshes || !canvas.rgb) {
        rc = hm_err(HM_E_NOMEM, "out of memory rendering");
        goto done;
    }
    hm_mesh_close_hand(faces, HAMER_N_FACES, HAMER_N_VERTS, closed);
    float focal = 0;
    for (int i = 0; i < n; i++) {
        const hamer_hand *H = &hands[i];
        if (!H->ok) continue;
        float *v = verts + (size_t)nm * 3 * HAMER_N_VERTS;
        for (int q = 0; q < HAMER_N_VERTS; q++)
            for (int k = 0; k < 3; k++) v[3 * q + k] = H->vertices[3 * q + k] + H->cam_t_full[k];
        meshes[nm] = (hm_mesh){v, HAMER_N_VERTS, closed, nf, {color[0], color[1], color[2]}};
        focal = H->focal_length;
        nm++;
    }
    if (focal == 0) focal = 5000.0f / 256.0f * (float)(img->w > img->h ? img->w : img->h);
    float cx = img->w / 2.0f, cy = img->h / 2.0f;
    if (overlay_path) {
        memcpy(canvas.rgb, img->rgb, (size_t)img->w * img->h * 3);
        if ((rc = hm_render_overlay(canvas.rgb, canvas.w, canvas.h, meshes, nm, focal, cx, cy, 1.0f))) goto done;
        if ((rc = hm_image_save_png(overlay_path, &canvas))) goto done;
    }
    if (side_path) {
        for (int i = 0; i < nm; i++) hm_mesh_rotate_y(meshes[i].verts, HAMER_N_VERTS, 90.0f, verts + (size_t)i * 3 * HAMER_N_VERTS);
        if ((rc = hm_render_side_view(canvas.rgb, canvas.w, canvas.h, meshes, nm, focal, cx, cy, 0.0f, NULL, NULL)))
            goto done;
        rc = hm_image_save_png(side_path, &canvas);
    }
done:
    free(closed);
    free(verts);
    free(meshes);
    free(canvas.rgb);
    return rc;
}
