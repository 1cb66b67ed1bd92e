/* hamer.c - the public API (include/hamer.h): argument and handle checks,
 * then the internal stages: models, states and devices (load/, backend/),
 * the regressor and the photo pipeline (pipeline/, render/), documents.
 * Detection is hamer_detect.c's, video and tracking hamer_video.c's; the
 * handles' insides are in hamer_impl.h. */
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "api.h"
#include "backend/backend.h"
#include "core/cpu.h"
#include "core/fileio.h"
#include "core/log.h"
#include "core/util.h"
#include "format/image.h"
#include "format/mesh_io.h"
#include "hamer.h"
#include "hamer_impl.h"
#include "load/load.h"
#include "model/model.h"
#include "pipeline/boxes.h"
#include "pipeline/glb.h"
#include "pipeline/predict.h"
#include "pipeline/result_json.h"
#include "render/overlay.h"

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
    if (on < 0 || on > 2) return hm_err(HM_E_ARG, "%s: mode %d is not 0, 1 or 2", __func__, on);
    st->s.ctl.profile = on;
    st->s.ctl.sim_split = 0;
    memset(st->s.ctl.stage_s, 0, sizeof st->s.ctl.stage_s);
    memset(st->s.ctl.sim_s, 0, sizeof st->s.ctl.sim_s);
    return HAMER_OK;
}

int hamer_state_set_profile_sim(hamer_state *st, int split) {
    if (!st || split < 0 || split > 1024) return hm_err(HM_E_ARG, "%s: bad arguments", __func__);
    int rc = hamer_state_set_profile(st, 2);
    st->s.ctl.sim_split = split;
    return rc;
}

_Static_assert(HAMER_SIM_THREADS == HM_POOL_SIM_N, "the public and the pool's thread counts agree");

int hamer_state_get_profile_sim(const hamer_state *st, double *seconds, int max_stages) {
    if (!st || max_stages < 0 || (max_stages && !seconds)) return hm_err(HM_E_ARG, "%s: bad arguments", __func__);
    int n = max_stages < HM_ST_COUNT ? max_stages : HM_ST_COUNT;
    for (int i = 0; i < n; i++)
        for (int k = 0; k < HAMER_SIM_THREADS; k++) seconds[i * HAMER_SIM_THREADS + k] = st->s.ctl.sim_s[i][k];
    return n;
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
