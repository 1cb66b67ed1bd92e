/* hamer.c - the public API (include/hamer.h) over the internal stages.
 *
 * A forward pass, per batch of crops:
 *   patch_embed -> vit (32 blocks + last_norm) -> mano_head (decoder,
 *   readout, rot6d) -> camera (pred_cam_t) -> mano (LBS, 21 keypoints)
 *   -> camera (2D projection).
 */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "hamer.h"
#include "model/model.h"
#include "format/image.h"
#include "render/overlay.h"
#include "pipeline/predict.h"
#include "format/result_json.h"
#include "core/util.h"

struct hamer_model {
    hm_model *m;
};

struct hamer_state {
    hm_state s;
    const hamer_model *model;
    hm_predict_ws pws;   /* image pipeline buffers (hamer_predict) */
    float *params;   /* [max_batch, 157] when the caller does not want params */
    float *verts;    /* [778*3] scratch for keypoints without vertices */
};

hamer_model_params hamer_model_default_params(void) {
    hamer_model_params p = {NULL, 0, HAMER_PRECISION_FP32};
    return p;
}

const char *hamer_last_error(void) { return hm_errmsg(); }
int hamer_last_error_code(void) { return hm_errcode(); }
const char *hamer_version(void) { return HAMER_VERSION; }

hamer_model *hamer_model_load(const char *path, const hamer_model_params *params) {
    hamer_model_params p = params ? *params : hamer_model_default_params();
    if (!path) {
        hm_err(HM_E_ARG, "%s: model path is NULL", __func__);
        return NULL;
    }
    hamer_model *hm = calloc(1, sizeof *hm);
    if (!hm) {
        hm_err(HM_E_NOMEM, "%s: out of memory", __func__);
        return NULL;
    }
    if (p.precision != HAMER_PRECISION_FP32 && p.precision != HAMER_PRECISION_FAST) {
        hm_err(HM_E_ARG, "%s: unknown precision %d", __func__, p.precision);
        free(hm);
        return NULL;
    }
    if (hm_model_load(path, p.mano_path, p.progress, p.precision, &hm->m)) {
        free(hm);
        return NULL;
    }
    return hm;
}

int hamer_model_save_packed(const hamer_model *model, const char *path) {
    if (!model || !path) return hm_err(HM_E_ARG, "%s: model or path is NULL", __func__);
    return hm_model_save_packed(model->m, path);
}

hamer_model *hm_model_handle(hm_model *m) {
    hamer_model *hm = calloc(1, sizeof *hm);
    if (!hm) {
        hm_model_free(m);
        hm_err(HM_E_NOMEM, "%s: out of memory", __func__);
        return NULL;
    }
    hm->m = m;
    return hm;
}

void hamer_model_free(hamer_model *model) {
    if (!model) return;
    hm_model_free(model->m);
    free(model);
}

void hamer_model_get_info(const hamer_model *model, hamer_model_info *info) {
    const hm_config *c = &model->m->cfg;
    info->vit_depth = c->depth, info->vit_dim = c->dim, info->vit_heads = c->heads;
    info->vit_mlp = c->mlp, info->n_tokens = c->ntok;
    info->head_depth = c->hdepth, info->head_dim = c->hdim, info->head_heads = c->hheads;
    info->head_dim_head = HM_DEC_HEAD_DIM, info->head_mlp = c->hmlp;
    info->has_mano = model->m->has_mano;
    info->isa = hm_isa_name(hm_gemm_isa());
    info->precision = model->m->precision;
    info->scheme = hm_precision_scheme((hm_precision)model->m->precision);
}

const int32_t *hamer_model_faces(const hamer_model *model) {
    return model && model->m->has_mano ? model->m->mano.faces : NULL;
}

hamer_state *hamer_state_new(const hamer_model *model, int max_batch, int n_threads) {
    if (!model || max_batch < 1 || max_batch > 4096 || n_threads < 0 || n_threads > 1024) {
        hm_err(HM_E_ARG, "%s: bad arguments (max_batch %d, n_threads %d)", __func__, max_batch, n_threads);
        return NULL;
    }
    if (n_threads == 0) {
        long n = sysconf(_SC_NPROCESSORS_ONLN);
        n_threads = n > 0 ? (int)n : 1;
    }
    hamer_state *st = calloc(1, sizeof *st);
    if (!st) {
        hm_err(HM_E_NOMEM, "%s: out of memory", __func__);
        return NULL;
    }
    if (hm_state_init(&st->s, model->m, max_batch, n_threads) ||
        !(st->params = hm_alloc((size_t)max_batch * HAMER_N_PARAMS * sizeof(float))) ||
        !(st->verts = hm_alloc(HM_NV * 3 * sizeof(float)))) {
        hamer_state_free(st);
        return NULL;
    }
    st->model = model;
    return st;
}

void hamer_state_free(hamer_state *st) {
    if (!st) return;
    hm_state_release(&st->s);
    hm_predict_ws_free(&st->pws);
    hm_free(st->params);
    hm_free(st->verts);
    free(st);
}

/* Parameters -> camera, mesh and keypoints for crops [0, B). */
static void finalise(hamer_state *st, const float *params, int B, hamer_output *out, int off) {
    const hm_model *m = st->s.m;
    for (int b = 0; b < B; b++) {
        HM_TIC(&st->s);
        const float *p = params + (size_t)b * HAMER_N_PARAMS;
        const float *cam = p + 9 * HM_NJ + HM_NB;
        int i = off + b;
        float cam_t[3];
        hm_camera_cam_t(cam, cam_t);
        if (out->pred_cam) memcpy(out->pred_cam + 3 * i, cam, 3 * sizeof(float));
        if (out->pred_cam_t) memcpy(out->pred_cam_t + 3 * i, cam_t, 3 * sizeof(float));
        if (out->vertices || out->keypoints_3d || out->keypoints_2d) {
            float kp[HM_NKP * 3];
            float *v = out->vertices ? out->vertices + (size_t)i * HM_NV * 3 : st->verts;
            HM_TOC(&st->s, HM_ST_FINALISE);
            hm_mano_forward(&m->mano, p, v, kp);
            HM_TOC(&st->s, HM_ST_MANO);
            if (out->keypoints_3d) memcpy(out->keypoints_3d + (size_t)i * HM_NKP * 3, kp, sizeof kp);
            if (out->keypoints_2d) hm_camera_project(kp, cam_t, out->keypoints_2d + (size_t)i * HM_NKP * 2);
        }
        HM_TOC(&st->s, HM_ST_FINALISE);
    }
}

static int regress(hamer_state *st, const void *crops, int is_u8, int B, hamer_output *out, const char *fn) {
    if (!st || !crops || !out || B < 1)
        return hm_err(HM_E_ARG, "%s: bad arguments (state %p, crops %p, out %p, B %d)", fn, (void *)st, crops, (void *)out, B);
    if ((out->vertices || out->keypoints_3d || out->keypoints_2d) && !st->s.m->has_mano)
        return hm_err(HM_E_NOMANO, "%s: the model has no MANO buffers (checkpoint lacks mano.*; load them with a MANO .npz), so vertices and keypoints cannot be computed", fn);
    hm_state *s = &st->s;
    for (int b0 = 0; b0 < B; b0 += s->max_batch) {
        int nb = B - b0 < s->max_batch ? B - b0 : s->max_batch;
        HM_TIC(s);
        if (is_u8) {
            const uint8_t *c = (const uint8_t *)crops + (size_t)b0 * HAMER_CROP_H * HAMER_CROP_W * 3;
            if (s->plain) {
                hm_u8_to_normalised(c, s->img, nb);
                hm_patch_embed_f32(s, s->img, nb);
            } else {
                hm_patch_embed_u8(s, c, nb);
            }
        } else {
            hm_patch_embed_f32(s, (const float *)crops + (size_t)b0 * 3 * HAMER_CROP_H * HAMER_CROP_W, nb);
        }
        HM_TOC(s, HM_ST_PATCH);
        hm_vit_forward(s, nb);
        hm_tic_ = s->profile ? hm_now() : 0;
        float *params = out->params ? out->params + (size_t)b0 * HAMER_N_PARAMS : st->params;
        hm_head_forward(s, nb, params);
        HM_TOC(s, HM_ST_HEAD);
        finalise(st, params, nb, out, b0);
    }
    return HAMER_OK;
}

int hamer_regress_f32(hamer_state *st, const float *crops, int B, hamer_output *out) {
    return regress(st, crops, 0, B, out, __func__);
}

int hamer_regress_u8(hamer_state *st, const uint8_t *crops, int B, hamer_output *out) {
    return regress(st, crops, 1, B, out, __func__);
}

int hamer_state_set_plain(hamer_state *st, int plain) {
    if (!st) return hm_err(HM_E_ARG, "%s: state is NULL", __func__);
    st->s.plain = plain != 0;
    return HAMER_OK;
}

int hamer_state_set_profile(hamer_state *st, int on) {
    if (!st) return hm_err(HM_E_ARG, "%s: state is NULL", __func__);
    st->s.profile = on != 0;
    memset(st->s.stage_s, 0, sizeof st->s.stage_s);
    return HAMER_OK;
}

int hamer_state_profile(const hamer_state *st, double *seconds, const char **names, int max) {
    if (!st || max < 0) return hm_err(HM_E_ARG, "%s: bad arguments", __func__);
    int n = max < HM_ST_COUNT ? max : HM_ST_COUNT;
    for (int i = 0; i < n; i++) {
        if (seconds) seconds[i] = st->s.stage_s[i];
        if (names) names[i] = hm_stage_names[i];
    }
    return n;
}

int hamer_predict(hamer_state *st, const uint8_t *rgb, int w, int h, const hamer_box *boxes, int n,
                  const hamer_predict_params *params, hamer_hand *hands, hamer_timings *timings) {
    if (!st) return hm_err(HM_E_ARG, "%s: state is NULL", __func__);
    return hm_predict(&st->pws, st, st->model->m, rgb, w, h, boxes, n, params, hands, timings);
}

int hamer_image_decode(const void *buf, size_t len, uint8_t **rgb, int *w, int *h) {
    if (!buf || !rgb || !w || !h) return hm_err(HM_E_ARG, "%s: bad arguments", __func__);
    hm_image img;
    int rc = hm_image_decode(buf, len, "image", &img);
    if (rc) return rc;
    *rgb = img.rgb, *w = img.w, *h = img.h;
    return HAMER_OK;
}

int hamer_image_load(const char *path, uint8_t **rgb, int *w, int *h) {
    if (!path || !rgb || !w || !h) return hm_err(HM_E_ARG, "%s: bad arguments", __func__);
    hm_image img;
    int rc = hm_image_load(path, &img);
    if (rc) return rc;
    *rgb = img.rgb, *w = img.w, *h = img.h;
    return HAMER_OK;
}

char *hamer_result_json(int w, int h, const hamer_hand *hands, int n, int with_vertices, const hamer_timings *tm) {
    if (n < 0 || (n > 0 && !hands)) {
        hm_err(HM_E_ARG, "%s: bad arguments", __func__);
        return NULL;
    }
    return hm_result_json(w, h, hands, n, with_vertices, tm);
}

int hamer_render_png(const hamer_model *model, const uint8_t *rgb, int w, int h, const hamer_hand *hands, int n,
                     int side_view, uint8_t **png, size_t *len) {
    if (!model || !rgb || w < 1 || h < 1 || !png || !len) return hm_err(HM_E_ARG, "%s: bad arguments", __func__);
    if (!model->m->has_mano) return hm_err(HM_E_NOMANO, "%s: the model has no MANO buffers", __func__);
    hm_image img = {w, h, (uint8_t *)rgb}, out;
    int rc = hm_overlay_render(&img, hands, n, model->m->mano.faces, side_view ? NULL : &out, side_view ? &out : NULL);
    if (rc) return rc;
    rc = hm_image_encode_png(&out, png, len);
    hm_image_free(&out);
    return rc;
}

void hamer_free(void *p) { free(p); }
