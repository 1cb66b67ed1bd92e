/* track_json.c - a tracked frame as one JSON Lines record: the hands as
 * RESULT.json writes them (pipeline/result_json.c) plus their track. */
#include <jansson.h>
#include <math.h>
#include <stdlib.h>

#include "core/util.h"
#include "pipeline/result_json.h"
#include "track/tracker.h"

/* The fields smoothing changes; "raw" keeps them as regressed. */
static const char *const filtered[] = {"global_orient", "hand_pose", "global_orient_axis_angle",
                                       "hand_pose_axis_angle", "betas", "cam_t_full", "keypoints_3d", "keypoints_2d",
                                       "vertices", "cam_t", "keypoints_3d_cam", "vertices_cam", "reprojection_error",
                                       "global_orient_quaternion", "hand_pose_quaternion", "hand_pose_pca", "smplx"};

static json_t *hand_record(const hamer_track *tk, const hamer_hand *raw, const hamer_hand *smoothed, int regressed,
                           int smoothing, int with_vertices) {
    json_t *o;
    if (regressed) {
        o = hm_result_hand_json(smoothing ? smoothed : raw, with_vertices);
    } else {
        o = json_object();
        json_object_set_new(o, "bbox", json_pack("[f,f,f,f]", tk->det.box.bbox[0], tk->det.box.bbox[1],
                                                 tk->det.box.bbox[2], tk->det.box.bbox[3]));
        json_object_set_new(o, "is_right", json_boolean(tk->det.box.is_right));
    }
    if (!o) return NULL;
    json_object_set_new(o, "track_id", json_integer(tk->track_id));
    json_object_set_new(o, "tracked", json_boolean(tk->tracked));
    json_object_set_new(o, "frames", json_integer(tk->frames));
    json_object_set_new(o, "detector_score", json_real(tk->det.score));
    json_object_set_new(o, "handedness_vote", json_real(tk->handedness_vote));
    json_t *dj = hm_result_detection_json(tk->det.score, tk->det.presence, tk->det.handedness, tk->det.pass,
                                          tk->det.landmarks);
    if (dj) hm_result_detection_body(dj, tk->det.source, tk->det.body, tk->det.person);
    json_object_set_new(o, "detection", dj);
    if (regressed && smoothing && raw->ok) {
        json_t *all = hm_result_hand_json(raw, with_vertices), *rj = json_object();
        for (size_t k = 0; all && k < sizeof filtered / sizeof *filtered; k++) {
            json_t *v = json_object_get(all, filtered[k]);
            if (v) json_object_set(rj, filtered[k], v);
        }
        json_decref(all);
        json_object_set_new(o, "raw", rj);
    }
    return o;
}

json_t *hm_track_hands_json(const hamer_track *tracks, const hamer_hand *raw, const hamer_hand *smoothed, int n,
                            int smoothing, int with_vertices) {
    json_t *hands = json_array();
    for (int i = 0; hands && i < n; i++)
        json_array_append_new(hands, hand_record(&tracks[i], raw ? &raw[i] : NULL, smoothed ? &smoothed[i] : NULL,
                                                 raw != NULL, smoothing, with_vertices));
    return hands;
}

char *hm_tracker_json(const hamer_tracker *t, long long frame, int with_vertices, double decode_ms) {
    if (!t) {
        hm_err(HM_E_ARG, "hamer_tracker_frame_json: tracker is NULL");
        return NULL;
    }
    const hm_tracker_frame *f = hm_tracker_frame_get(t);
    const int smoothing = hm_tracker_smoothing(t) != HAMER_SMOOTH_NONE;
    json_t *root = json_object(), *hands;
    json_object_set_new(root, "frame", json_integer(frame));
    json_object_set_new(root, "time_s", json_real(f->time_s));
    json_object_set_new(root, "detected", json_boolean(f->stats.detected));
    json_object_set_new(root, "cut", json_boolean(f->stats.cut));
    hands = hm_track_hands_json(f->tracks, f->regressed ? f->raw : NULL, f->smoothed, f->n, smoothing, with_vertices);
    json_object_set_new(root, "hands", hands);
    json_t *tm = json_object();
    if (decode_ms >= 0) json_object_set_new(tm, "decode", json_real(decode_ms));
    json_object_set_new(tm, "track", json_real(f->stats.track_ms));
    json_object_set_new(tm, "detect", json_real(f->stats.detect_ms));
    if (f->regressed) {
        json_object_set_new(tm, "crop", json_real(f->stats.predict.crop_ms));
        json_object_set_new(tm, "regress", json_real(f->stats.predict.regress_ms));
        json_object_set_new(tm, "finalise", json_real(f->stats.predict.finalise_ms));
        json_object_set_new(tm, "smooth", json_real(f->stats.smooth_ms));
    }
    json_object_set_new(root, "timings_ms", tm);
    char *s = json_dumps(root, JSON_REAL_PRECISION(9) | JSON_COMPACT | JSON_PRESERVE_ORDER);
    json_decref(root);
    if (!s) hm_err(HM_E_NOMEM, "out of memory writing JSON");
    return s;
}
