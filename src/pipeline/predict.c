/* predict.c - image + boxes -> per-hand results (the demo's pipeline).
 *
 * For each box: validate, crop (preprocess.c: the official affine warp or the
 * padded resize), then one batched regression of the valid crops, then per
 * hand: the full-image camera, left hands mirrored back, 2D keypoints in
 * image pixels, then the hand in the photo's camera (camera_fit.c) and its
 * rotations in other conventions (conventions.c). A bad box fails only its
 * own hand.
 */
#include <math.h>
#include <stdio.h>
#include <string.h>
#include "hamer.h"
#include "format/image.h"
#include "backend/backend.h"
#include "model/model.h"
#include "pipeline/camera_fit.h"
#include "pipeline/conventions.h"
#include "pipeline/predict.h"
#include "pipeline/preprocess.h"
#include "core/util.h"

/* M R M with M = diag(-1, 1, 1): the mirror image of a rotation. */
static void mirror_rot(const float *R, float *out) {
    static const float sg[9] = {1, -1, -1, -1, 1, 1, -1, 1, 1};
    for (int i = 0; i < 9; i++) out[i] = R[i] * sg[i];
}

int hm_predict(hm_predict_ws *ws, hm_state *st, const uint8_t *rgb, int w, int h, const hamer_box *boxes, int n,
               const hamer_predict_params *pp, hamer_hand *hands, hamer_timings *tm) {
    const hm_model *m = st->m;
    hamer_predict_params p = *pp;
    if (!rgb || w < 1 || h < 1 || (n > 0 && (!boxes || !hands)) || n < 0)
        return hm_err(HM_E_ARG, "predict: bad arguments (image %dx%d, %d boxes)", w, h, n);
    if (n > HAMER_MAX_HANDS) return hm_err(HM_E_ARG, "predict: %d hands requested, at most %d per image", n, HAMER_MAX_HANDS);
    if ((double)w * h > HM_IMAGE_MAX_PIXELS) return hm_err(HM_E_ARG, "predict: image of %dx%d pixels is over the 100-megapixel limit", w, h);
    if (!(p.rescale > 0 && p.rescale <= HAMER_MAX_RESCALE))
        return hm_err(HM_E_ARG, "predict: rescale %g out of range (0, %g]", p.rescale, HAMER_MAX_RESCALE);
    if (p.crop_mode != HAMER_CROP_WARP && p.crop_mode != HAMER_CROP_PAD) return hm_err(HM_E_ARG, "predict: unknown crop mode");
    double focal;
    hamer_focal_source fsrc;
    if (hm_focal_resolve(&p, w, h, &focal, &fsrc)) return HM_E_ARG;
    if (!m->has_mano) return hm_err(HM_E_NOMANO, "predict: the model has no MANO buffers (its checkpoint lacks mano.*, "
                                              "which the released hamer.ckpt has; or load a MANO .npz: docs/models.md)");
    if (ws->cap < n && hm_predict_ws_reserve(ws, n)) return HM_E_NOMEM;

    double t0 = hm_now();
    hm_image img = {w, h, (uint8_t *)rgb};
    int nv = 0;
    for (int i = 0; i < n; i++) {
        hamer_hand *H = &hands[i];
        memset(H, 0, sizeof *H);
        H->box = boxes[i];
        hm_box b = {boxes[i].bbox[0], boxes[i].bbox[1], boxes[i].bbox[2], boxes[i].bbox[3], boxes[i].is_right != 0};
        hm_crop_info info;
        hm_errclear();
        if (hm_box_check(&b, w, h) ||
            hm_crop(&img, &b, p.rescale, p.crop_mode == HAMER_CROP_PAD ? HM_CROP_PAD : HM_CROP_WARP,
                    ws->crops + (size_t)nv * 3 * HAMER_CROP_H * HAMER_CROP_W, &info)) {
            snprintf(H->error, sizeof H->error, "hand %d: %s", i, hm_errmsg());
            continue;
        }
        H->box_center[0] = info.cx, H->box_center[1] = info.cy, H->box_size = info.size;
        ws->index[nv++] = i;
    }
    double t1 = hm_now();
    if (nv > 0) {
        hm_out out = {ws->params, NULL, NULL, ws->verts, ws->kp3d, NULL};
        int rc = hm_forward(st, ws->crops, 0, nv, &out);
        if (rc) return rc;
    }
    double t2 = hm_now();
    for (int j = 0; j < nv; j++) {
        hamer_hand *H = &hands[ws->index[j]];
        const float *pr = ws->params + (size_t)j * HM_NPARAMS;
        const float *v = ws->verts + (size_t)j * HM_NV * 3, *k = ws->kp3d + (size_t)j * HM_NKP * 3;
        int right = H->box.is_right != 0;
        float sx = right ? 1.0f : -1.0f;
        if (right) {
            memcpy(H->global_orient, pr, 9 * sizeof(float));
            memcpy(H->hand_pose, pr + 9, 15 * 9 * sizeof(float));
        } else {
            for (int r = 0; r < 16; r++) mirror_rot(pr + 9 * r, r ? H->hand_pose + 9 * (r - 1) : H->global_orient);
        }
        memcpy(H->betas, pr + 9 * HM_NJ, HM_NB * sizeof(float));
        memcpy(H->pred_cam, pr + 9 * HM_NJ + HM_NB, 3 * sizeof(float));
        for (int q = 0; q < HM_NV; q++) {
            H->vertices[3 * q] = sx * v[3 * q];
            H->vertices[3 * q + 1] = v[3 * q + 1];
            H->vertices[3 * q + 2] = v[3 * q + 2];
        }
        for (int q = 0; q < HM_NKP; q++) {
            H->keypoints_3d[3 * q] = sx * k[3 * q];
            H->keypoints_3d[3 * q + 1] = k[3 * q + 1];
            H->keypoints_3d[3 * q + 2] = k[3 * q + 2];
        }
        hm_camera_full(H->pred_cam, right, (float)H->box_center[0], (float)H->box_center[1], (float)H->box_size, w, h,
                       H->cam_t_full, &H->focal_length);
        hm_camera_project_full(H->keypoints_3d, HM_NKP, H->cam_t_full, H->focal_length, w, h, H->keypoints_2d);
        hm_hand_camera(H, w, h, focal, fsrc);
        hm_hand_rotations(H);
        hm_hand_pca(&m->mano, H);
        H->ok = 1;
    }
    double t3 = hm_now();
    if (tm) {
        tm->crop_ms = 1e3 * (t1 - t0);
        tm->regress_ms = 1e3 * (t2 - t1);
        tm->finalise_ms = 1e3 * (t3 - t2);
        memset(tm->reserved, 0, sizeof tm->reserved);
    }
    return HM_OK;
}

int hm_predict_ws_reserve(hm_predict_ws *ws, int n) {
    hm_predict_ws_free(ws);
    if (n < 1) n = 1;
    ws->crops = hm_alloc((size_t)n * 3 * HAMER_CROP_H * HAMER_CROP_W * sizeof(float));
    ws->params = hm_alloc((size_t)n * HM_NPARAMS * sizeof(float));
    ws->verts = hm_alloc((size_t)n * HM_NV * 3 * sizeof(float));
    ws->kp3d = hm_alloc((size_t)n * HM_NKP * 3 * sizeof(float));
    ws->index = hm_alloc((size_t)n * sizeof(int));
    if (!ws->crops || !ws->params || !ws->verts || !ws->kp3d || !ws->index) {
        hm_predict_ws_free(ws);
        return HM_E_NOMEM;
    }
    ws->cap = n;
    return HM_OK;
}

void hm_predict_ws_free(hm_predict_ws *ws) {
    hm_free(ws->crops);
    hm_free(ws->params);
    hm_free(ws->verts);
    hm_free(ws->kp3d);
    hm_free(ws->index);
    memset(ws, 0, sizeof *ws);
}
