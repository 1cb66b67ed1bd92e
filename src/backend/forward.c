/* forward.c - the one regression entry: crops -> parameters, camera, mesh
 * and keypoints.
 *
 *   the backend's forward (patch embedding, ViT, MANO head, readout,
 *   rot6d) -> camera (pred_cam_t) -> mano (LBS, 21 keypoints)
 *   -> camera (2D projection), the last three on the host
 *
 * Batches larger than the state's max_batch run in passes. The first
 * stage that fails ends the call with its code.
 */
#include <string.h>

#include "core/util.h"
#include "backend/backend.h"

/* Parameters -> camera, mesh and keypoints for crops [off, off + B). */
static void finalise(hm_state *s, const float *params, int B, const hm_out *out, int off) {
    const hm_model *m = s->m;
    for (int b = 0; b < B; b++) {
        HM_TIC(&s->ctl);
        const float *p = params + (size_t)b * HM_NPARAMS;
        const float *cam = p + 9 * HM_NJ + HM_NB;
        int i = off + b;
        float cam_t[3];
        hm_camera_cam_t(cam, cam_t);
        if (out->pred_cam) memcpy(out->pred_cam + 3 * i, cam, 3 * sizeof(float));
        if (out->pred_cam_t) memcpy(out->pred_cam_t + 3 * i, cam_t, 3 * sizeof(float));
        if (out->vertices || out->keypoints_3d || out->keypoints_2d) {
            float kp[HM_NKP * 3];
            float *v = out->vertices ? out->vertices + (size_t)i * HM_NV * 3 : s->verts;
            HM_TOC(&s->ctl, HM_ST_FINALISE);
            hm_mano_forward(&m->mano, p, v, kp);
            HM_TOC(&s->ctl, HM_ST_MANO);
            if (out->keypoints_3d) memcpy(out->keypoints_3d + (size_t)i * HM_NKP * 3, kp, sizeof kp);
            if (out->keypoints_2d) hm_camera_project(kp, cam_t, out->keypoints_2d + (size_t)i * HM_NKP * 2);
        }
        HM_TOC(&s->ctl, HM_ST_FINALISE);
    }
}

/* One pass of nb <= max_batch crops starting at crop b0. */
static int pass(hm_state *s, const void *crops, int is_u8, int b0, int nb, const hm_out *out) {
    const size_t bytes = is_u8 ? (size_t)HAMER_CROP_H * HAMER_CROP_W * 3
                               : (size_t)3 * HAMER_CROP_H * HAMER_CROP_W * sizeof(float);
    float *params = out->params ? out->params + (size_t)b0 * HM_NPARAMS : s->params;
    int rc = s->m->be->forward(s->bs, (const unsigned char *)crops + (size_t)b0 * bytes, is_u8, nb, params);
    if (rc) return rc;
    finalise(s, params, nb, out, b0);
    return HM_OK;
}

int hm_forward(hm_state *s, const void *crops, int is_u8, int B, const hm_out *out) {
    if ((out->vertices || out->keypoints_3d || out->keypoints_2d) && !s->m->has_mano)
        return hm_err(HM_E_NOMANO, "the model has no MANO buffers (checkpoint lacks mano.*; load them with a MANO .npz), so vertices and keypoints cannot be computed");
    for (int b0 = 0; b0 < B; b0 += s->max_batch) {
        int nb = B - b0 < s->max_batch ? B - b0 : s->max_batch;
        if (hm_ctl_cancelled(&s->ctl)) return HM_E_CANCELLED;
        int rc = pass(s, crops, is_u8, b0, nb, out);
        if (rc) return rc;
    }
    return HM_OK;
}
