/* hamer.c - the public API (include/hamer.h): argument and handle checks,
 * then the internal stages (model/forward.c, pipeline/, render/, detect/,
 * video/). */
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "api.h"
#include "core/cpu.h"
#include "core/fileio.h"
#include "core/log.h"
#include "core/util.h"
#include "detect/detect.h"
#include "format/image.h"
#include "format/mesh_io.h"
#include "hamer.h"
#include "backend/backend.h"
#include "kernels/gemm.h"
#include "load/load.h"
#include "model/model.h"
#include "pipeline/boxes.h"
#include "pipeline/conventions.h"
#include "pipeline/glb.h"
#include "pipeline/predict.h"
#include "pipeline/result_json.h"
#include "render/draw.h"
#include "render/overlay.h"
#include "video/tracker.h"
#include "video/video.h"

/* The public constants are the internal ones. */
#define SAME(a, b) _Static_assert((int)(a) == (int)(b), #a " == " #b)
SAME(HAMER_OK, HM_OK);
SAME(HAMER_E_ARG, HM_E_ARG);
SAME(HAMER_E_IO, HM_E_IO);
SAME(HAMER_E_FORMAT, HM_E_FORMAT);
SAME(HAMER_E_SHAPE, HM_E_SHAPE);
SAME(HAMER_E_NOMEM, HM_E_NOMEM);
SAME(HAMER_E_UNSUPPORTED, HM_E_UNSUPPORTED);
SAME(HAMER_E_NOMANO, HM_E_NOMANO);
SAME(HAMER_E_CANCELLED, HM_E_CANCELLED);
SAME(HAMER_N_STATUS, 1 - HM_E_CANCELLED);
SAME(HAMER_N_PARAMS, HM_NPARAMS);
SAME(HAMER_N_VERTS, HM_NV);
SAME(HAMER_N_FACES, HM_NF);
SAME(HAMER_N_KP, HM_NKP);
SAME(HAMER_FOCAL, HM_FOCAL);
SAME(HAMER_N_STAGES, HM_ST_COUNT);
SAME(HAMER_PRECISION_FP32, HM_PREC_FP32);
SAME(HAMER_PRECISION_FAST, HM_PREC_FAST);
SAME(HAMER_LOG_ERROR, HM_LOG_ERROR);
SAME(HAMER_LOG_WARN, HM_LOG_WARN);
SAME(HAMER_LOG_INFO, HM_LOG_INFO);
SAME(HAMER_LOG_PROGRESS, HM_LOG_PROGRESS);
SAME(sizeof(hm_out), sizeof(hamer_output));
#undef SAME

struct hamer_model {
    hm_model *m;
    char device[32];     /* hm_device_name of its device (hamer_model_info.device) */
};

struct hamer_state {
    hm_state s;
    hm_predict_ws pws;   /* image pipeline buffers (hamer_predict) */
    const hamer_model *model; /* the handle it was made from (hamer_job's documents) */
};

const hamer_model *hm_state_model(const hamer_state *st) { return st ? st->model : NULL; }
const hm_model *hm_model_of(const hamer_model *model) { return model ? model->m : NULL; }

hamer_model_params hamer_model_default_params(void) {
    hamer_model_params p = {.mano_path = NULL, .progress = false, .precision = HAMER_PRECISION_FP32, .no_cache = false,
                            .device = NULL};
    return p;
}

hamer_predict_params hamer_predict_default_params(void) {
    hamer_predict_params p = {.rescale = 2.0, .crop_mode = HAMER_CROP_WARP};
    return p;
}

const char *hamer_last_error(void) { return hm_errmsg(); }
int hamer_last_error_code(void) { return hm_errcode(); }
const char *hamer_version(void) { return HAMER_VERSION_STRING; }

static char hm_sysinfo[768];
static pthread_once_t hm_sysinfo_once = PTHREAD_ONCE_INIT;

static void sysinfo_init(void) {
    int n = snprintf(hm_sysinfo, sizeof hm_sysinfo, "%s; backends:", hm_backend_cpu.describe());
    int count;
    const hm_backend *const *all = hm_backends(&count);
    for (int i = 0; i < count && n > 0 && (size_t)n < sizeof hm_sysinfo; i++) {
        int devs = all[i]->devices();
        n += snprintf(hm_sysinfo + n, sizeof hm_sysinfo - n, " %s%s", all[i]->name, devs > 0 ? "" : " (unavailable)");
    }
}

const char *hamer_system_info(void) {
    pthread_once(&hm_sysinfo_once, sysinfo_init);
    return hm_sysinfo;
}

/* ---- backends ---- */

/* Each backend's availability, asked once (a backend that loads a runtime
 * asks the driver: not on every call). */
static struct {
    int n;
    char why[1600];
} hm_be_state[8];
static pthread_once_t hm_be_once = PTHREAD_ONCE_INIT;

static void backends_init(void) {
    int count;
    const hm_backend *const *all = hm_backends(&count);
    for (int i = 0; i < count && i < 8; i++) {
        hm_be_state[i].n = all[i]->devices();
        if (hm_be_state[i].n < 0) snprintf(hm_be_state[i].why, sizeof hm_be_state[i].why, "%s", hm_errmsg());
        else if (hm_be_state[i].n == 0) snprintf(hm_be_state[i].why, sizeof hm_be_state[i].why, "no device found");
    }
    hm_errclear();
}

int hamer_backend_count(void) {
    int count;
    hm_backends(&count);
    return count;
}

int hamer_backend_get(int i, hamer_backend_info *info) {
    int count;
    const hm_backend *const *all = hm_backends(&count);
    if (!info || i < 0 || i >= count || i >= 8) return hm_err(HM_E_ARG, "%s: bad arguments (index %d of %d)", __func__, i, count);
    pthread_once(&hm_be_once, backends_init);
    memset(info, 0, sizeof *info);
    info->name = all[i]->name;
    info->n_devices = hm_be_state[i].n > 0 ? hm_be_state[i].n : 0;
    info->why = hm_be_state[i].n > 0 ? NULL : hm_be_state[i].why;
    info->info = all[i]->describe();
    return HAMER_OK;
}

const char *hamer_strerror(int code) {
    switch (code) {
    case HAMER_OK: return "success";
    case HAMER_E_ARG: return "bad argument";
    case HAMER_E_IO: return "file missing or unreadable";
    case HAMER_E_FORMAT: return "malformed file";
    case HAMER_E_SHAPE: return "tensor of the wrong shape, dtype or layout";
    case HAMER_E_NOMEM: return "out of memory";
    case HAMER_E_UNSUPPORTED: return "not supported by this build or CPU";
    case HAMER_E_NOMANO: return "no MANO buffers";
    case HAMER_E_CANCELLED: return "cancelled";
    }
    return "unknown error";
}

void hamer_log_set(hamer_log_fn fn, void *user) { hm_log_set((hm_log_fn)fn, user); }

hamer_model *hamer_model_load(const char *path, const hamer_model_params *params) {
    hamer_model_params p = params ? *params : hamer_model_default_params();
    if (!path) {
        hm_err(HM_E_ARG, "%s: model path is NULL", __func__);
        return NULL;
    }
    if (HM_CHECK_RESERVED(&p, "hamer_model_params")) return NULL;
    if (p.precision != HAMER_PRECISION_FP32 && p.precision != HAMER_PRECISION_FAST) {
        hm_err(HM_E_ARG, "%s: unknown precision %d", __func__, p.precision);
        return NULL;
    }
    hm_load_opts o = {.mano_npz = p.mano_path, .progress = p.progress, .precision = p.precision, .no_cache = p.no_cache};
    if (hm_device_parse(p.device, &o.be, &o.dev)) return NULL;
    hm_model *m;
    if (hm_model_load(path, &o, &m)) return NULL;
    return hm_model_handle(m);
}

int hamer_model_save_packed(const hamer_model *model, const char *path) {
    if (!model || !path) return hm_err(HM_E_ARG, "%s: model or path is NULL", __func__);
    /* The packed writer renames its temp file over the path it is given:
     * give it the symlink-followed target, after core/fileio has refused a
     * directory or device node there, so neither a link nor /dev/full is
     * ever replaced. The probe's own temp file goes at once. */
    hm_outfile probe;
    int rc = hm_outfile_open(&probe, path);
    if (rc) return rc;
    char *target = strdup(probe.target);
    hm_outfile_abort(&probe);
    if (!target) return hm_err(HM_E_NOMEM, "%s: out of memory", __func__);
    rc = hm_model_save_packed(model->m, target);
    free(target);
    return rc;
}

hamer_model *hm_model_handle(hm_model *m) {
    hamer_model *hm = calloc(1, sizeof *hm);
    if (!hm) {
        hm_model_free(m);
        hm_err(HM_E_NOMEM, "%s: out of memory", __func__);
        return NULL;
    }
    hm->m = m;
    hm_device_name(m->be, m->device, hm->device, sizeof hm->device);
    return hm;
}

void hamer_model_free(hamer_model *model) {
    if (!model) return;
    hm_model_free(model->m);
    free(model);
}

int hamer_model_get_info(const hamer_model *model, hamer_model_info *info) {
    if (!model || !info) return hm_err(HM_E_ARG, "%s: model or info is NULL", __func__);
    const hm_config *c = &model->m->cfg;
    info->vit_depth = c->depth, info->vit_dim = c->dim, info->vit_heads = c->heads;
    info->vit_mlp = c->mlp, info->n_tokens = c->ntok;
    info->head_depth = c->hdepth, info->head_dim = c->hdim, info->head_heads = c->hheads;
    info->head_dim_head = HM_DEC_HEAD_DIM, info->head_mlp = c->hmlp;
    info->has_mano = model->m->has_mano;
    info->isa = hm_isa_name(hm_isa_active());
    info->precision = model->m->precision;
    info->scheme = model->m->be->scheme(model->m->precision);
    info->device = model->device;
    memset(info->reserved, 0, sizeof info->reserved);
    return HAMER_OK;
}

const int32_t *hamer_model_get_faces(const hamer_model *model) {
    if (!model) {
        hm_err(HM_E_ARG, "%s: model is NULL", __func__);
        return NULL;
    }
    return model->m->has_mano ? model->m->mano.faces : NULL;
}

hamer_state_params hamer_state_default_params(void) {
    hamer_state_params p = {.max_batch = 16, .n_threads = 0, .device = NULL};
    return p;
}

hamer_state *hamer_state_new(const hamer_model *model, int max_batch, int n_threads) {
    hamer_state_params p = hamer_state_default_params();
    p.max_batch = max_batch;
    p.n_threads = n_threads;
    return hamer_state_new_with_params(model, &p);
}

hamer_state *hamer_state_new_with_params(const hamer_model *model, const hamer_state_params *params) {
    hamer_state_params p = params ? *params : hamer_state_default_params();
    if (HM_CHECK_RESERVED(&p, "hamer_state_params")) return NULL;
    if (!model || p.max_batch < 1 || p.max_batch > 4096 || p.n_threads < 0 || p.n_threads > 1024) {
        hm_err(HM_E_ARG, "hamer_state_new: bad arguments (model %p, max_batch %d, n_threads %d)", (const void *)model,
               p.max_batch, p.n_threads);
        return NULL;
    }
    if (p.device) {
        /* The weights live on the model's device: a state elsewhere would
         * need its own copy, which is a model of its own. */
        const hm_backend *be;
        int dev;
        char name[32];
        if (hm_device_parse(p.device, &be, &dev)) return NULL;
        if (be != model->m->be || dev != model->m->device) {
            hm_err(HM_E_ARG, "hamer_state_new: device '%s' is not the model's (%s); load the model with that device",
                   hm_device_name(be, dev, name, sizeof name), model->device);
            return NULL;
        }
    }
    int n_threads = p.n_threads == 0 ? hm_cpu_online() : p.n_threads;
    hamer_state *st = calloc(1, sizeof *st);
    if (!st) {
        hm_err(HM_E_NOMEM, "hamer_state_new: out of memory");
        return NULL;
    }
    if (hm_state_init(&st->s, model->m, p.max_batch, n_threads)) {
        free(st);
        return NULL;
    }
    st->model = model;
    return st;
}

void hamer_state_free(hamer_state *st) {
    if (!st) return;
    hm_state_release(&st->s);
    hm_predict_ws_free(&st->pws);
    free(st);
}

/* HM_E_ARG naming the first crop holding a NaN or an infinity: the forward
 * would turn it into non-finite outputs without any sign of it. The test
 * is on the exponent bits (integer ops the compiler vectorises), ~0.1 ms a
 * crop against ~1 s of forward. */
static int check_finite(const float *crops, int B, const char *fn) {
    const size_t per = (size_t)3 * HAMER_CROP_H * HAMER_CROP_W;
    for (int b = 0; b < B; b++) {
        const float *c = crops + per * (size_t)b;
        uint32_t bad = 0;
        for (size_t i = 0; i < per; i++) {
            uint32_t u;
            memcpy(&u, c + i, 4);
            bad |= (uint32_t)((u & 0x7f800000u) == 0x7f800000u);
        }
        if (!bad) continue;
        for (size_t i = 0; i < per; i++)
            if (!isfinite(c[i])) {
                size_t ch = i / ((size_t)HAMER_CROP_H * HAMER_CROP_W), r = i / HAMER_CROP_W % HAMER_CROP_H;
                return hm_err(HM_E_ARG, "%s: crop %d has a non-finite value (%s at channel %zu, row %zu, column %zu)",
                              fn, b, isnan(c[i]) ? "NaN" : "Inf", ch, r, i % HAMER_CROP_W);
            }
    }
    return HM_OK;
}

static int regress(hamer_state *st, const void *crops, int is_u8, int B, hamer_output *out, const char *fn) {
    if (!st || !crops || !out || B < 1)
        return hm_err(HM_E_ARG, "%s: bad arguments (state %p, crops %p, out %p, B %d)", fn, (void *)st, crops,
                      (void *)out, B);
    if (!is_u8) {
        int rc = check_finite(crops, B, fn);
        if (rc) return rc;
    }
    hm_out o = {out->params, out->pred_cam, out->pred_cam_t, out->vertices, out->keypoints_3d, out->keypoints_2d};
    return hm_forward(&st->s, crops, is_u8, B, &o);
}

int hamer_regress_f32(hamer_state *st, const float *crops, int B, hamer_output *out) {
    return regress(st, crops, 0, B, out, __func__);
}

int hamer_regress_u8(hamer_state *st, const uint8_t *crops, int B, hamer_output *out) {
    return regress(st, crops, 1, B, out, __func__);
}

int hamer_state_set_plain(hamer_state *st, int plain) {
    if (!st) return hm_err(HM_E_ARG, "%s: state is NULL", __func__);
    st->s.ctl.plain = plain != 0;
    return HAMER_OK;
}

int hamer_state_set_cancel(hamer_state *st, hamer_cancel_fn cancel, void *user) {
    if (!st) return hm_err(HM_E_ARG, "%s: state is NULL", __func__);
    st->s.ctl.cancel = cancel;
    st->s.ctl.cancel_user = user;
    return HAMER_OK;
}

int hamer_state_set_profile(hamer_state *st, int on) {
    if (!st) return hm_err(HM_E_ARG, "%s: state is NULL", __func__);
    st->s.ctl.profile = on != 0;
    memset(st->s.ctl.stage_s, 0, sizeof st->s.ctl.stage_s);
    return HAMER_OK;
}

int hamer_state_get_profile(const hamer_state *st, double *seconds, const char **names, int max) {
    if (!st || max < 0) return hm_err(HM_E_ARG, "%s: bad arguments", __func__);
    int n = max < HM_ST_COUNT ? max : HM_ST_COUNT;
    for (int i = 0; i < n; i++) {
        if (seconds) seconds[i] = st->s.ctl.stage_s[i];
        if (names) names[i] = hm_stage_names[i];
    }
    return n;
}

int hamer_predict(hamer_state *st, const uint8_t *rgb, int w, int h, const hamer_box *boxes, int n,
                  const hamer_predict_params *params, hamer_hand *hands, hamer_timings *timings) {
    if (!st) return hm_err(HM_E_ARG, "%s: state is NULL", __func__);
    hamer_predict_params p = params ? *params : hamer_predict_default_params();
    if (HM_CHECK_RESERVED(&p, "hamer_predict_params")) return HM_E_ARG;
    return hm_predict(&st->pws, &st->s, rgb, w, h, boxes, n, &p, hands, timings);
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

char *hamer_result_json_source(int w, int h, const hamer_hand *hands, int n, int with_vertices,
                               const hamer_timings *tm, hamer_boxes_source source) {
    if (n < 0 || (n > 0 && !hands) || (source != HAMER_BOXES_GIVEN && source != HAMER_BOXES_DETECTED)) {
        hm_err(HM_E_ARG, "%s: bad arguments (n %d, source %d)", __func__, n, (int)source);
        return NULL;
    }
    /* A document saying "given" over detected hands would contradict itself. */
    for (int i = 0; source == HAMER_BOXES_GIVEN && i < n; i++)
        if (hands[i].detection.detected) {
            hm_err(HM_E_ARG, "%s: hand %d carries a detection but the boxes are said to be given", __func__, i);
            return NULL;
        }
    return hm_result_json(w, h, hands, n, with_vertices, tm, source == HAMER_BOXES_DETECTED);
}

char *hamer_result_json(int w, int h, const hamer_hand *hands, int n, int with_vertices, const hamer_timings *tm) {
    if (n < 0 || (n > 0 && !hands)) {
        hm_err(HM_E_ARG, "%s: bad arguments", __func__);
        return NULL;
    }
    int detected = 0;
    for (int i = 0; i < n; i++) detected |= hands[i].detection.detected;
    return hm_result_json(w, h, hands, n, with_vertices, tm, detected);
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

int hamer_hand_obj(const hamer_model *model, const hamer_hand *hand, char **obj, size_t *len) {
    if (!model || !hand || !obj || !len) return hm_err(HM_E_ARG, "%s: bad arguments", __func__);
    *obj = NULL, *len = 0;
    if (!model->m->has_mano) return hm_err(HM_E_NOMANO, "%s: the model has no MANO buffers", __func__);
    if (!hand->ok) return hm_err(HM_E_ARG, "%s: the hand has no result (%s)", __func__, hand->error);
    int32_t closed[(HM_NF + HM_MESH_EXTRA_FACES) * 3];
    int nf = hm_mesh_close_hand(model->m->mano.faces, HM_NF, HM_NV, closed);
    if (nf < 0) return nf;
    return hm_obj_text(hand->vertices, HM_NV, closed, nf, hand->cam_t_full, hand->box.is_right != 0, obj, len);
}

int hamer_hands_obj(const hamer_model *model, const hamer_hand *hands, int n, char **obj, size_t *len) {
    if (!model || (n > 0 && !hands) || n < 0 || n > HAMER_MAX_HANDS || !obj || !len)
        return hm_err(HM_E_ARG, "%s: bad arguments", __func__);
    *obj = NULL, *len = 0;
    if (!model->m->has_mano) return hm_err(HM_E_NOMANO, "%s: the model has no MANO buffers", __func__);
    int32_t closed[(HM_NF + HM_MESH_EXTRA_FACES) * 3];
    int nf = hm_mesh_close_hand(model->m->mano.faces, HM_NF, HM_NV, closed);
    if (nf < 0) return nf;
    const float *verts[HAMER_MAX_HANDS], *cam[HAMER_MAX_HANDS];
    int right[HAMER_MAX_HANDS], m = 0;
    char names[HAMER_MAX_HANDS][24];
    const char *name[HAMER_MAX_HANDS];
    for (int i = 0; i < n; i++) {
        if (!hands[i].ok) continue;
        verts[m] = hands[i].vertices, cam[m] = hands[i].cam_t_full, right[m] = hands[i].box.is_right != 0;
        /* the index of the hand in the result, as the GLB's node names */
        snprintf(names[m], sizeof names[m], "hand_%d_%s", i, right[m] ? "right" : "left");
        name[m] = names[m];
        m++;
    }
    return hm_obj_text_multi(m, verts, HM_NV, closed, nf, cam, right, name, obj, len);
}

int hamer_hands_glb(const hamer_model *model, const hamer_hand *hands, int n, uint8_t **glb, size_t *len) {
    if (!model || (n > 0 && !hands) || n < 0 || n > HAMER_MAX_HANDS || !glb || !len)
        return hm_err(HM_E_ARG, "%s: bad arguments", __func__);
    *glb = NULL, *len = 0;
    if (!model->m->has_mano) return hm_err(HM_E_NOMANO, "%s: the model has no MANO buffers", __func__);
    return hm_glb_hands(&model->m->mano, hands, n, "hamer.c " HAMER_VERSION_STRING, glb, len);
}

int hamer_boxes_parse(const char *json, size_t len, hamer_box *boxes, int max) {
    if (!json || (max > 0 && !boxes) || max < 0) return hm_err(HM_E_ARG, "%s: bad arguments", __func__);
    return hm_boxes_parse_json(json, len, boxes, max);
}

int hamer_box_parse(const char *text, hamer_box *box) {
    if (!text || !box) return hm_err(HM_E_ARG, "%s: bad arguments", __func__);
    return hm_box_parse(text, box);
}

/* ---- hand detection ---- */

struct hamer_detector {
    hm_det_model *m;
    int lite;
    int body;          /* the body pass's models are loaded */
    int body_mode;     /* hamer_detector_params.body */
    int props;         /* the proposal pass's model is loaded */
    int props_mode;    /* hamer_detector_params.proposals */
    char dir[4096];
};

struct hamer_detect_state {
    hm_det_state *s;
    hm_pool *pool;
    const hamer_detector *d;
};

hamer_detector_params hamer_detector_default_params(void) {
    hamer_detector_params p = {.dir = NULL, .lite = false, .body = HAMER_BODY_AUTO, .proposals = HAMER_PROPOSALS_AUTO};
    return p;
}

hamer_detect_params hamer_detect_default_params(void) {
    hm_det_opts o;
    hm_det_opts_default(&o);
    hamer_detect_params p = {.max_hands = o.max_hands, .min_score = o.min_palm, .min_presence = o.min_presence,
                             .tiles = true, .body = HAMER_BODY_AUTO, .body_boxes = true,
                             .proposals = HAMER_PROPOSALS_AUTO};
    return p;
}

hamer_detector *hamer_detector_load(const hamer_detector_params *params) {
    hamer_detector_params p = params ? *params : hamer_detector_default_params();
    if (HM_CHECK_RESERVED(&p, "hamer_detector_params")) return NULL;
    hamer_detector *d = calloc(1, sizeof *d);
    if (!d) {
        hm_err(HM_E_NOMEM, "%s: out of memory", __func__);
        return NULL;
    }
    d->lite = p.lite;
    if (p.body != HAMER_BODY_AUTO && p.body != HAMER_BODY_ON && p.body != HAMER_BODY_OFF) {
        hm_err(HM_E_ARG, "%s: body %d is not HAMER_BODY_AUTO, _ON or _OFF", __func__, (int)p.body);
        free(d);
        return NULL;
    }
    if (p.proposals != HAMER_PROPOSALS_AUTO && p.proposals != HAMER_PROPOSALS_ON && p.proposals != HAMER_PROPOSALS_OFF) {
        hm_err(HM_E_ARG, "%s: proposals %d is not HAMER_PROPOSALS_AUTO, _ON or _OFF", __func__, (int)p.proposals);
        free(d);
        return NULL;
    }
    d->body_mode = p.body;
    d->props_mode = p.proposals;
    if (hm_det_find_dir(p.dir, d->lite, d->dir, sizeof d->dir) || hm_det_model_load(d->dir, d->lite, &d->m)) {
        free(d);
        return NULL;
    }
    if (p.body != HAMER_BODY_OFF) {
        /* AUTO: missing body models mean the palm pass only (the detector's
         * description says so); a malformed one is still an error */
        int rc = hm_det_model_load_body(d->m, d->dir);
        if (rc == HM_E_IO && p.body == HAMER_BODY_AUTO) {
            hm_errclear();
        } else if (rc) {
            hamer_detector_free(d);
            return NULL;
        } else {
            d->body = 1;
        }
    }
    if (p.proposals != HAMER_PROPOSALS_OFF) {
        /* AUTO: the hand-box model when installed and the body models (its
         * re-crop) are loaded; ON: both required */
        int rc = d->body || p.proposals == HAMER_PROPOSALS_ON ? hm_det_model_load_proposals(d->m, d->dir) : HM_E_IO;
        if ((rc == HM_E_IO || (rc == HM_E_ARG && !d->body)) && p.proposals == HAMER_PROPOSALS_AUTO) {
            hm_errclear();
        } else if (rc) {
            hamer_detector_free(d);
            return NULL;
        } else {
            d->props = 1;
        }
    }
    return d;
}

int hamer_detector_get_proposals(const hamer_detector *d) {
    if (!d) return hm_err(HM_E_ARG, "%s: detector is NULL", __func__);
    return d->props;
}

void hamer_detector_free(hamer_detector *d) {
    if (!d) return;
    hm_det_model_free(d->m);
    free(d);
}

int hamer_detector_get_body(const hamer_detector *d) {
    if (!d) return hm_err(HM_E_ARG, "%s: detector is NULL", __func__);
    return d->body;
}

const char *hamer_detector_get_dir(const hamer_detector *d) {
    if (!d) {
        hm_err(HM_E_ARG, "%s: detector is NULL", __func__);
        return NULL;
    }
    return d->dir;
}

hamer_detect_state *hamer_detect_state_new(const hamer_detector *d, int n_threads) {
    if (!d || n_threads < 0 || n_threads > 1024) {
        hm_err(HM_E_ARG, "%s: bad arguments (detector %p, n_threads %d)", __func__, (const void *)d, n_threads);
        return NULL;
    }
    if (n_threads == 0) n_threads = hm_cpu_online();
    hamer_detect_state *st = calloc(1, sizeof *st);
    if (!st) {
        hm_err(HM_E_NOMEM, "%s: out of memory", __func__);
        return NULL;
    }
    st->d = d;
    if (hm_det_state_new(d->m, &st->s) || hm_det_state_reserve(st->s, n_threads) ||
        !(st->pool = hm_pool_create(n_threads))) {
        hamer_detect_state_free(st);
        return NULL;
    }
    return st;
}

void hamer_detect_state_free(hamer_detect_state *st) {
    if (!st) return;
    hm_det_state_free(st->s);
    hm_pool_destroy(st->pool);
    free(st);
}

/* Public parameters -> the pipeline's options (defaults for the rest). */
static int det_opts(const hamer_detect_params *p, hm_det_opts *o) {
    hm_det_opts_default(o);
    if (p) {
        if (HM_CHECK_RESERVED(p, "hamer_detect_params")) return HM_E_ARG;
        if (p->max_hands < 1 || p->max_hands > HAMER_MAX_HANDS)
            return hm_err(HM_E_ARG, "detect: max_hands %d outside 1..%d", p->max_hands, HAMER_MAX_HANDS);
        o->max_hands = p->max_hands;
        o->min_palm = p->min_score;
        o->min_presence = p->min_presence;
        if (!p->tiles) o->n_levels = 0;
        switch (p->body) {
        case HAMER_BODY_AUTO: o->body = HM_DET_BODY_AUTO; break;
        case HAMER_BODY_ON: o->body = HM_DET_BODY_ON; break;
        case HAMER_BODY_OFF: o->body = HM_DET_BODY_OFF; break;
        default: return hm_err(HM_E_ARG, "detect: body %d is not HAMER_BODY_AUTO, _ON or _OFF", (int)p->body);
        }
        o->body_boxes = p->body_boxes;
        switch (p->proposals) {
        case HAMER_PROPOSALS_AUTO: o->proposals = HM_DET_BODY_AUTO; break;
        case HAMER_PROPOSALS_ON: o->proposals = HM_DET_BODY_ON; break;
        case HAMER_PROPOSALS_OFF: o->proposals = HM_DET_BODY_OFF; break;
        default: return hm_err(HM_E_ARG, "detect: proposals %d is not HAMER_PROPOSALS_AUTO, _ON or _OFF", (int)p->proposals);
        }
    }
    return hm_det_opts_check(o);
}

int hamer_detect(hamer_detect_state *st, const uint8_t *rgb, int w, int h, const hamer_detect_params *params,
                 hamer_detection *out, int max, double *detect_ms) {
    if (!st || !rgb || w < 1 || h < 1 || max < 0 || (max > 0 && !out))
        return hm_err(HM_E_ARG, "%s: bad arguments (state %p, image %dx%d, max %d)", __func__, (void *)st, w, h, max);
    hm_det_opts o;
    int rc = det_opts(params, &o), n = 0;
    if (rc) return rc;
    if (o.body == HM_DET_BODY_ON && !st->d->body)
        return hm_err(HM_E_ARG, "detect: the body pass is on but its models are not loaded (%s; bash "
                      "scripts/get_detector.sh installs them)",
                      st->d->body_mode == HAMER_BODY_OFF ? "the detector was loaded with body off" : "not installed");
    if (o.proposals == HM_DET_BODY_ON && !st->d->props)
        return hm_err(HM_E_ARG, "detect: the proposal pass is on but its model is not loaded (%s; bash "
                      "scripts/get_detector.sh installs it)",
                      st->d->props_mode == HAMER_PROPOSALS_OFF ? "the detector was loaded with proposals off"
                      : !st->d->body ? "it needs the body models, which are not loaded" : "not installed");
    hm_det_hand hands[HM_DET_MAX_HANDS];
    hm_det_stats stats;
    double t0 = hm_now();
    rc = hm_det_run(st->s, rgb, w, h, &o, st->pool, hands, max < HM_DET_MAX_HANDS ? max : HM_DET_MAX_HANDS, &n,
                    &stats);
    if (detect_ms) *detect_ms = 1e3 * (hm_now() - t0);
    if (rc) return rc;
    for (int i = 0; i < n; i++) {
        hamer_detection *d = &out[i];
        memcpy(d->box.bbox, hands[i].box, sizeof d->box.bbox);
        d->box.is_right = hands[i].is_right;
        d->score = hands[i].palm_score, d->presence = hands[i].presence, d->handedness = hands[i].handedness;
        memcpy(d->landmarks, hands[i].landmarks, sizeof d->landmarks);
        d->pass = hands[i].level;
        d->source = hands[i].pass == HM_DET_PASS_BODY        ? HAMER_SOURCE_BODY
                    : hands[i].pass == HM_DET_PASS_KEYPOINTS ? HAMER_SOURCE_BODY_KEYPOINTS
                    : hands[i].pass == HM_DET_PASS_PROPOSAL  ? HAMER_SOURCE_PROPOSAL
                                                             : HAMER_SOURCE_PALM;
        d->body = (hands[i].passes >> HM_DET_PASS_BODY) & 1u || d->source == HAMER_SOURCE_BODY_KEYPOINTS;
        d->person = d->body ? hands[i].person : -1;
    }
    return n;
}

int hamer_predict_detections(hamer_state *st, const uint8_t *rgb, int w, int h, const hamer_detection *dets, int n,
                             const hamer_predict_params *params, hamer_hand *hands, hamer_timings *timings) {
    if (!st || n < 0 || (n > 0 && (!dets || !hands))) return hm_err(HM_E_ARG, "%s: bad arguments", __func__);
    if (n > HAMER_MAX_HANDS) return hm_err(HM_E_ARG, "%s: %d hands, at most %d per image", __func__, n, HAMER_MAX_HANDS);
    hamer_box boxes[HAMER_MAX_HANDS];
    memset(boxes, 0, sizeof boxes);
    for (int i = 0; i < n; i++) boxes[i] = dets[i].box;
    int rc = hamer_predict(st, rgb, w, h, boxes, n, params, hands, timings);
    if (rc) return rc;
    for (int i = 0; i < n; i++) {
        __typeof__(hands[i].detection) *d = &hands[i].detection;
        d->detected = 1;
        d->score = dets[i].score, d->presence = dets[i].presence, d->handedness = dets[i].handedness;
        memcpy(d->landmarks, dets[i].landmarks, sizeof d->landmarks);
        d->pass = dets[i].pass;
        d->source = dets[i].source, d->body = dets[i].body, d->person = dets[i].person;
    }
    return HAMER_OK;
}

/* The detector's "body" line: whether the body pass runs, and why not. */
static const char *hm_body_desc(const hamer_detector *d, const hamer_detect_params *p) {
    const int mode = p ? p->body : HAMER_BODY_AUTO, tiles = p ? p->tiles : 1;
    if (!d->body)
        return d->body_mode == HAMER_BODY_OFF ? "off (not loaded)"
                                             : "off: models not installed, palm pass only (bash scripts/get_detector.sh)";
    if (mode == HAMER_BODY_OFF) return "off";
    if (mode == HAMER_BODY_ON) return "on";
    return tiles ? "auto: with the tiles, when the palm pass found fewer than 2 hands" : "auto: off (single pass)";
}

/* The detector's "proposals" line: whether the proposal pass runs, and why not. */
static const char *hm_proposals_desc(const hamer_detector *d, const hamer_detect_params *p) {
    const int mode = p ? p->proposals : HAMER_PROPOSALS_AUTO, tiles = p ? p->tiles : 1;
    if (!d->props)
        return d->props_mode == HAMER_PROPOSALS_OFF ? "off (not loaded)"
               : !d->body ? "off: it needs the body pass's models, not loaded"
                          : "off: model not installed (bash scripts/get_detector.sh)";
    if (mode == HAMER_PROPOSALS_OFF) return "off";
    if (mode == HAMER_PROPOSALS_ON) return "on";
    return tiles ? "auto: with the tiles, when the other passes found fewer than 2 hands" : "auto: off (single pass)";
}

char *hamer_detections_json(int w, int h, const hamer_detection *dets, int n, const hamer_detector *detector,
                            const hamer_detect_params *params, double detect_ms) {
    if (w < 1 || h < 1 || n < 0 || (n > 0 && !dets)) {
        hm_err(HM_E_ARG, "%s: bad arguments", __func__);
        return NULL;
    }
    if (params && HM_CHECK_RESERVED(params, "hamer_detect_params")) return NULL;
    return hm_detections_json(w, h, dets, n, detector ? detector->dir : NULL, detector ? detector->lite : 0,
                              params ? params->tiles : 1, detector ? hm_body_desc(detector, params) : NULL,
                              detector ? hm_proposals_desc(detector, params) : NULL, detect_ms);
}

int hamer_render_detections_png(const uint8_t *rgb, int w, int h, const hamer_detection *dets, int n, uint8_t **png,
                                 size_t *len) {
    if (!rgb || w < 1 || h < 1 || n < 0 || (n > 0 && !dets) || !png || !len)
        return hm_err(HM_E_ARG, "%s: bad arguments", __func__);
    if ((double)w * h > HM_IMAGE_MAX_PIXELS) return hm_err(HM_E_ARG, "%s: image of %dx%d is too large", __func__, w, h);
    hm_image img = {w, h, hm_alloc((size_t)w * h * 3)};
    if (!img.rgb) return HM_E_NOMEM;
    memcpy(img.rgb, rgb, (size_t)w * h * 3);
    /* Marks scale with the picture so they stay visible on large photos. */
    float lw = (w > h ? w : h) / 400.0f;
    lw = lw < 1.5f ? 1.5f : lw;
    for (int i = 0; i < n; i++) {
        static const uint8_t right[3] = {40, 220, 60}, left[3] = {255, 150, 20}, joint[3] = {240, 30, 30};
        const uint8_t *c = dets[i].box.is_right ? right : left;
        const float *b = dets[i].box.bbox, *L = dets[i].landmarks;
        const float corner[5][2] = {{b[0], b[1]}, {b[2], b[1]}, {b[2], b[3]}, {b[0], b[3]}, {b[0], b[1]}};
        for (int k = 0; k < 4; k++)
            hm_draw_line(img.rgb, w, h, corner[k][0], corner[k][1], corner[k + 1][0], corner[k + 1][1], lw, c);
        if (dets[i].source == HAMER_SOURCE_BODY_KEYPOINTS) continue; /* a box, no landmarks */
        for (int k = 0; k < HM_DRAW_HAND_BONES; k++) {
            const float *p = L + 3 * hm_draw_hand_bones[k][0], *q = L + 3 * hm_draw_hand_bones[k][1];
            hm_draw_line(img.rgb, w, h, p[0], p[1], q[0], q[1], lw, c);
        }
        for (int k = 0; k < 21; k++) hm_draw_dot(img.rgb, w, h, L[3 * k], L[3 * k + 1], 1.2f * lw, joint);
    }
    int rc = hm_image_encode_png(&img, png, len);
    hm_image_free(&img);
    return rc;
}

void hamer_free(void *p) { free(p); }

/* ---- video and tracking (src/video/) ---- */

hamer_video_params hamer_video_default_params(void) { return hm_video_default_params(); }
int hamer_video_check_params(const hamer_video_params *p) { return hm_video_check_params(p); }
hamer_video *hamer_video_open(const char *path, const hamer_video_params *p) { return hm_video_open(path, p); }
int hamer_video_get_info(const hamer_video *v, hamer_video_info *info) { return hm_video_info(v, info); }
int hamer_video_next(hamer_video *v, hamer_video_frame *frame) { return hm_video_next(v, frame); }
void hamer_video_close(hamer_video *v) { hm_video_close(v); }

hamer_video_writer *hamer_video_writer_open(const char *path, int w, int h, int tb_num, int tb_den, double fps) {
    return hm_video_writer_open(path, w, h, tb_num, tb_den, fps);
}
const char *hamer_video_writer_get_codec(const hamer_video_writer *wr) { return hm_video_writer_codec(wr); }
int hamer_video_writer_write(hamer_video_writer *wr, const uint8_t *rgb, long long pts) {
    return hm_video_writer_write(wr, rgb, pts);
}
int hamer_video_writer_close(hamer_video_writer *wr, int abort) { return hm_video_writer_close(wr, abort); }

hamer_tracker_params hamer_tracker_default_params(void) { return hm_tracker_default_params(); }

hamer_tracker *hamer_tracker_new(const hamer_detector *d, const hamer_tracker_params *p, int n_threads) {
    if (!d) {
        hm_err(HM_E_ARG, "%s: detector is NULL", __func__);
        return NULL;
    }
    if (p && HM_CHECK_RESERVED(p, "hamer_tracker_params")) return NULL;
    if (n_threads == 0) n_threads = hm_cpu_online();
    if (p && p->body != HAMER_BODY_AUTO && p->body != HAMER_BODY_ON && p->body != HAMER_BODY_OFF) {
        hm_err(HM_E_ARG, "%s: body %d is not HAMER_BODY_AUTO, _ON or _OFF", __func__, (int)p->body);
        return NULL;
    }
    if (p && p->body == HAMER_BODY_ON && !d->body) {
        hm_err(HM_E_ARG, "%s: the body pass is on but its models are not loaded (bash scripts/get_detector.sh "
               "installs them)", __func__);
        return NULL;
    }
    return hm_tracker_new(d->m, p, n_threads);
}

void hamer_tracker_free(hamer_tracker *t) { hm_tracker_free(t); }
int hamer_tracker_reset(hamer_tracker *t) { return hm_tracker_reset(t); }

int hamer_tracker_push(hamer_tracker *t, const uint8_t *rgb, int w, int h, double time_s, hamer_track *out, int max,
                       hamer_track_stats *stats) {
    return hm_tracker_push(t, rgb, w, h, time_s, out, max, stats);
}

int hamer_tracker_smooth(hamer_tracker *t, const hamer_track *tracks, int n, const hamer_hand *raw,
                         hamer_hand *smoothed) {
    return hm_tracker_smooth(t, tracks, n, raw, smoothed);
}

int hamer_tracker_frame(hamer_tracker *t, hamer_state *st, const uint8_t *rgb, int w, int h, double time_s,
                        const hamer_predict_params *params) {
    if (!t) return hm_err(HM_E_ARG, "%s: tracker is NULL", __func__);
    /* before the push: a refused request leaves the tracks as they were */
    if (params && HM_CHECK_RESERVED(params, "hamer_predict_params")) return HM_E_ARG;
    hm_tracker_frame *f = hm_tracker_frame_buf(t);
    int rc = hm_tracker_push(t, rgb, w, h, time_s, NULL, 0, NULL);
    if (rc < 0) return rc;
    const int n = f->n;
    if (!st) return n;
    for (int i = 0; i < n; i++) f->dets[i] = f->tracks[i].det;
    /* every hand of the frame in one batch */
    if ((rc = hamer_predict_detections(st, rgb, w, h, f->dets, n, params, f->raw, &f->stats.predict))) return rc;
    const double t0 = hm_now();
    if ((rc = hm_tracker_smooth(t, f->tracks, n, f->raw, f->smoothed))) return rc;
    /* the smoothed rotations' PCA coefficients and SMPL-X pose (the smoother has no model) */
    if (hm_tracker_smoothing(t) != HAMER_SMOOTH_NONE)
        for (int i = 0; i < n; i++)
            if (f->smoothed[i].ok) hm_hand_pca(&st->model->m->mano, &f->smoothed[i]);
    f->stats.smooth_ms = 1e3 * (hm_now() - t0);
    f->regressed = 1;
    return n;
}

int hamer_tracker_get_results(const hamer_tracker *t, const hamer_track **tracks, const hamer_hand **raw,
                          const hamer_hand **smoothed, hamer_track_stats *stats) {
    if (!t) return hm_err(HM_E_ARG, "%s: tracker is NULL", __func__);
    const hm_tracker_frame *f = hm_tracker_frame_get(t);
    if (tracks) *tracks = f->tracks;
    if (raw) *raw = f->regressed ? f->raw : NULL;
    if (smoothed) *smoothed = f->regressed ? f->smoothed : NULL;
    if (stats) *stats = f->stats;
    return f->n;
}

char *hamer_tracker_frame_json(const hamer_tracker *t, long long frame, int with_vertices, double decode_ms) {
    return hm_tracker_json(t, frame, with_vertices, decode_ms);
}

int hamer_render_rgb(const hamer_model *model, const uint8_t *rgb, int w, int h, const hamer_hand *hands, int n,
                     uint8_t *out) {
    if (!model || !rgb || w < 1 || h < 1 || n < 0 || (n > 0 && !hands) || !out)
        return hm_err(HM_E_ARG, "%s: bad arguments", __func__);
    if (!model->m->has_mano) return hm_err(HM_E_NOMANO, "%s: the model has no MANO buffers", __func__);
    hm_image img = {w, h, (uint8_t *)rgb}, ov;
    int rc = hm_overlay_render(&img, hands, n, model->m->mano.faces, &ov, NULL);
    if (rc) return rc;
    memcpy(out, ov.rgb, (size_t)w * h * 3);
    hm_image_free(&ov);
    return HAMER_OK;
}
