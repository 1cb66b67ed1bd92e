/* hamer_video.c - the public API of video and tracking (include/hamer.h):
 * argument and handle checks, then src/video/. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/cpu.h"
#include "core/util.h"
#include "format/image.h"
#include "hamer.h"
#include "hamer_impl.h"
#include "pipeline/conventions.h"
#include "render/overlay.h"
#include "track/tracker.h"
#include "video/video.h"

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
