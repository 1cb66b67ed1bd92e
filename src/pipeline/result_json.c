/* result_json.c - RESULT.json writing (jansson); the box lists are read by
 * boxes.c. */
#include <jansson.h>
#include <math.h>
#include <stdlib.h>
#include "model/model.h"
#include "pipeline/result_json.h"
#include "core/util.h"

static json_t *floats(const float *v, int n) {
    json_t *a = json_array();
    /* JSON has no NaN/inf: a non-finite number (only possible in a caller's
     * box) is written as null rather than dropped. */
    for (int i = 0; i < n; i++) json_array_append_new(a, isfinite(v[i]) ? json_real(v[i]) : json_null());
    return a;
}

/* rows x cols nested array */
static json_t *matrix(const float *v, int rows, int cols) {
    json_t *a = json_array();
    for (int r = 0; r < rows; r++) json_array_append_new(a, floats(v + (size_t)r * cols, cols));
    return a;
}

static const char *focal_source_name(hamer_focal_source s) {
    return s == HAMER_FOCAL_GIVEN ? "given" : s == HAMER_FOCAL_EXIF ? "exif" : "default";
}

/* The hand in the photo's camera: the camera, the translation, the
 * camera-frame keypoints (and vertices) and the reprojection error. */
static void add_camera(json_t *o, const hamer_hand *H, int with_vertices) {
    json_t *cam = json_object();
    json_object_set_new(cam, "focal_length", json_real(H->focal_px));
    json_object_set_new(cam, "source", json_string(focal_source_name(H->focal_source)));
    json_object_set_new(cam, "principal_point", floats(H->principal_point, 2));
    json_object_set_new(o, "camera", cam);
    json_object_set_new(o, "cam_t", floats(H->cam_t, 3));
    json_object_set_new(o, "keypoints_3d_cam", matrix(H->keypoints_3d_cam, 21, 3));
    if (with_vertices) {
        json_t *a = json_array();
        for (int v = 0; v < HAMER_N_VERTS; v++) {
            float p[3];
            for (int k = 0; k < 3; k++) p[k] = H->vertices[3 * v + k] + H->cam_t[k];
            json_array_append_new(a, floats(p, 3));
        }
        json_object_set_new(o, "vertices_cam", a);
    }
    json_object_set_new(o, "reprojection_error", json_pack("{s:f,s:f}", "mean", (double)H->reproj_error, "max",
                                                           (double)H->reproj_error_max));
}

/* Quaternions, PCA coefficients and SMPL-X's hand pose. */
static void add_conventions(json_t *o, const hamer_hand *H) {
    json_object_set_new(o, "global_orient_quaternion", floats(H->quaternion, 4));
    json_object_set_new(o, "hand_pose_quaternion", matrix(H->quaternion + 4, 15, 4));
    if (H->n_pca < 1 || H->n_pca > 45) return;
    json_object_set_new(o, "hand_pose_pca", floats(H->pca, H->n_pca));
    json_t *sx = json_object();
    json_object_set_new(sx, "param", json_string(H->box.is_right ? "right_hand_pose" : "left_hand_pose"));
    json_object_set_new(sx, "flat_hand_mean_false", floats(H->smplx_hand_pose, 45));
    json_object_set_new(sx, "flat_hand_mean_true", floats(H->axis_angle + 3, 45));
    json_object_set_new(o, "smplx", sx);
}

json_t *hm_result_hand_json(const hamer_hand *H, int with_vertices) {
    json_t *o = json_object();
    json_object_set_new(o, "bbox", floats(H->box.bbox, 4));
    json_object_set_new(o, "is_right", json_boolean(H->box.is_right));
    if (!H->ok) {
        json_object_set_new(o, "error", json_string(H->error));
        return o;
    }
    json_object_set_new(o, "global_orient", matrix(H->global_orient, 3, 3));
    json_t *hp = json_array();
    for (int j = 0; j < 15; j++) json_array_append_new(hp, matrix(H->hand_pose + 9 * j, 3, 3));
    json_object_set_new(o, "hand_pose", hp);
    float aa[3];
    hm_rotmat_to_axis_angle(H->global_orient, aa);
    json_object_set_new(o, "global_orient_axis_angle", floats(aa, 3));
    json_t *hpa = json_array();
    for (int j = 0; j < 15; j++) {
        hm_rotmat_to_axis_angle(H->hand_pose + 9 * j, aa);
        json_array_append_new(hpa, floats(aa, 3));
    }
    json_object_set_new(o, "hand_pose_axis_angle", hpa);
    json_object_set_new(o, "betas", floats(H->betas, 10));
    json_object_set_new(o, "pred_cam", floats(H->pred_cam, 3));
    json_object_set_new(o, "cam_t_full", floats(H->cam_t_full, 3));
    json_object_set_new(o, "focal_length", json_real(H->focal_length));
    json_t *box = json_object();
    json_object_set_new(box, "center", json_pack("[f,f]", H->box_center[0], H->box_center[1]));
    json_object_set_new(box, "size", json_real(H->box_size));
    json_object_set_new(o, "crop", box);
    json_object_set_new(o, "keypoints_3d", matrix(H->keypoints_3d, 21, 3));
    json_object_set_new(o, "keypoints_2d", matrix(H->keypoints_2d, 21, 2));
    if (with_vertices) json_object_set_new(o, "vertices", matrix(H->vertices, 778, 3));
    if (H->focal_source != HAMER_FOCAL_NONE) add_camera(o, H, with_vertices);
    add_conventions(o, H);
    return o;
}

/* The body pass's part in a hand, when it had one (palm-only hands keep
 * their bytes): which pass's result it is and the person. A box from the
 * body keypoints alone has no landmarks: null, not 21 zeros. */
void hm_result_detection_body(json_t *o, int source, int body, int person) {
    if (!body && source == HAMER_SOURCE_PALM) return;
    const char *name = source == HAMER_SOURCE_BODY             ? "body"
                       : source == HAMER_SOURCE_BODY_KEYPOINTS ? "body-keypoints"
                       : source == HAMER_SOURCE_PROPOSAL       ? "proposal"
                                                               : "palm";
    json_object_set_new(o, "source", json_string(name));
    json_object_set_new(o, "person", json_integer(person));
    if (source == HAMER_SOURCE_BODY_KEYPOINTS) json_object_set_new(o, "landmarks", json_null());
}

/* The detector's view of one hand: scores, pass and landmarks. */
json_t *hm_result_detection_json(float score, float presence, float handedness, int pass, const float *landmarks) {
    return json_pack("{s:f,s:f,s:f,s:i,s:o}", "score", score, "presence", presence, "handedness", handedness, "pass",
                     pass, "landmarks", matrix(landmarks, 21, 3));
}

char *hm_result_json(int W, int H, const hamer_hand *hands, int n, int with_vertices, const hamer_timings *tm,
                     int detected) {
    json_t *root = json_object();
    json_object_set_new(root, "image", json_pack("{s:i,s:i}", "width", W, "height", H));
    json_t *arr = json_array();
    for (int i = 0; i < n; i++) {
        json_t *o = hm_result_hand_json(&hands[i], with_vertices);
        const __typeof__(hands[i].detection) *d = &hands[i].detection;
        if (d->detected) {
            json_t *dj = hm_result_detection_json(d->score, d->presence, d->handedness, d->pass, d->landmarks);
            if (dj) hm_result_detection_body(dj, d->source, d->body, d->person);
            json_object_set_new(o, "detection", dj);
        }
        json_array_append_new(arr, o);
    }
    /* Which boxes the hands came from: the caller's, or the detector's. */
    json_object_set_new(root, "boxes", json_string(detected ? "detected" : "given"));
    json_object_set_new(root, "hands", arr);
    if (tm) {
        json_t *t = json_pack("{s:f}", "decode", tm->decode_ms);
        if (detected) json_object_set_new(t, "detect", json_real(tm->detect_ms));
        json_object_set_new(t, "crop", json_real(tm->crop_ms));
        json_object_set_new(t, "regress", json_real(tm->regress_ms));
        json_object_set_new(t, "finalise", json_real(tm->finalise_ms));
        json_object_set_new(root, "timings_ms", t);
    }
    char *s = json_dumps(root, JSON_REAL_PRECISION(9) | JSON_COMPACT | JSON_PRESERVE_ORDER);
    json_decref(root);
    if (!s) hm_err(HM_E_NOMEM, "out of memory writing JSON");
    return s;
}

char *hm_detections_json(int W, int H, const hamer_detection *d, int n, const char *models, int lite, int tiles,
                         const char *body, const char *proposals, double detect_ms) {
    json_t *root = json_object();
    json_object_set_new(root, "image", json_pack("{s:i,s:i}", "width", W, "height", H));
    json_object_set_new(root, "detector", json_pack("{s:s,s:s,s:s}", "models", models ? models : "", "variant",
                                                    lite ? "lite" : "full", "passes", tiles ? "full frame + tiles" : "full frame"));
    if (body) json_object_set_new(json_object_get(root, "detector"), "body", json_string(body));
    if (proposals) json_object_set_new(json_object_get(root, "detector"), "proposals", json_string(proposals));
    json_t *arr = json_array();
    for (int i = 0; i < n; i++) {
        json_t *o = hm_result_detection_json(d[i].score, d[i].presence, d[i].handedness, d[i].pass, d[i].landmarks);
        hm_result_detection_body(o, d[i].source, d[i].body, d[i].person);
        json_object_set_new(o, "bbox", floats(d[i].box.bbox, 4));
        json_object_set_new(o, "is_right", json_boolean(d[i].box.is_right));
        json_array_append_new(arr, o);
    }
    json_object_set_new(root, "hands", arr);
    json_object_set_new(root, "timings_ms", json_pack("{s:f}", "detect", detect_ms));
    char *s = json_dumps(root, JSON_REAL_PRECISION(9) | JSON_COMPACT | JSON_PRESERVE_ORDER);
    json_decref(root);
    if (!s) hm_err(HM_E_NOMEM, "out of memory writing JSON");
    return s;
}
