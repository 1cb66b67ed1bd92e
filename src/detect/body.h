/* detect/body.h - the body-guided hand pass: MediaPipe Holistic's CPU
 * graphs for one image (static mode), on Holistic's TFLite models run by
 * tflite/tflite.h, with the hand landmark model of detect/detect.h.
 *
 * Per image (hm_body_run):
 *   1. Pose detection (pose_detection_cpu.pbtxt): the whole image
 *      letterboxed into 224x224 in [-1, 1] (zero border), 2254 SSD anchors
 *      (5 layers, strides 8, 16, 32, 32, 32), boxes and 4 keypoints decoded
 *      at scale 224, sigmoid scores >= min_pose, weighted NMS at IoU 0.3.
 *   2. Each of the best max_persons detections (MediaPipe takes only the
 *      first) -> the alignment rectangle (pose_detection_to_roi.pbtxt):
 *      centred on keypoint 0 (the hips' centre), side twice the distance to
 *      keypoint 1, rotation from 0 towards 1 at 90 degrees, scale 1.25.
 *   3. Pose landmarks (pose_landmark_by_roi_cpu.pbtxt): that rectangle to
 *      256x256 in [0, 1] (replicated border), the full pose model: 39
 *      points (33 body landmarks + 2 for the next ROI + 4 unused) with
 *      sigmoid visibility and presence, refined by the 64x64 heatmap
 *      (kernel 7, confidence 0.5), back to image pixels; the pose flag must
 *      reach min_pose_presence.
 *   4. Per side (hand_landmarks_left_and_right_cpu.pbtxt): the person's
 *      wrist, pinky and index (15, 17, 19 left; 16, 18, 20 right; the thumb
 *      is not used by the graph). The wrist's visibility must exceed 0.1
 *      (hand_visibility_from_hand_landmarks_from_pose.pbtxt). The hand
 *      rectangle from the pose (HandDetectionsFromPoseToRectsCalculator):
 *      centre the estimated middle-finger knuckle m = (2 index + pinky) / 3,
 *      side twice |m - wrist|, rotation from the wrist towards m at 90
 *      degrees; scaled 2.7 with shift_y -0.1 (square) for the re-crop.
 *   5. Hand re-crop (hand_recrop_by_roi_cpu.pbtxt): that rectangle to
 *      256x256 in [0, 1], the hand_recrop model: 2 points (256-pixel
 *      units), projected back;
 *      the rectangle centred on the first, side twice the distance to the
 *      second, rotation from the first to the second at -90 degrees, then
 *      shift_y -0.1 (square).
 *   6. The hand landmark model (detect.h step 3) on the re-cropped
 *      rectangle: presence >= min_presence gives the hand's 21 landmarks and
 *      their tight box. Below it, the hand is still reported with
 *      body_only = 1: box = the axis-aligned box of the step 4 rectangle
 *      before the 2.7 scaling (about the hand's size, from the body
 *      keypoints alone), no landmarks.
 *
 * Handedness comes from the body side (the person's left / right on a
 * non-mirrored photo), not from the landmark model (its output is kept).
 *
 * Memory: hm_body_model (the three models, the anchors) is read-only and
 * shareable; hm_body_state holds their run states and fixed scratch:
 * hm_body_run allocates nothing. The hand landmark calls use the given
 * hm_det_state's first worker.
 */
#ifndef HM_DETECT_BODY_H
#define HM_DETECT_BODY_H

#include "detect/detect.h"
#include "detect/stages.h"

#define HM_POSE_SIZE 224
#define HM_POSE_ANCHORS 2254
#define HM_POSE_COORDS 12
#define HM_POSE_KP 4
#define HM_POSE_LM_SIZE 256
#define HM_POSE_LM 39   /* points the pose landmark model gives */
#define HM_POSE_BODY 33 /* of them, the body landmarks */
#define HM_POSE_HEATMAP 64
#define HM_RECROP_SIZE 256
#define HM_BODY_MAX_PERSONS 8

typedef struct hm_body_model hm_body_model;
typedef struct hm_body_state hm_body_state;

typedef struct {
    int max_persons;         /* pose detections landmarked, best first; default 1 (MediaPipe's) */
    float min_pose;          /* pose detection score, default 0.5 */
    float min_pose_presence; /* pose landmark flag, default 0.5 */
    float min_wrist_visibility; /* default 0.1 (strictly above) */
    float min_presence;      /* hand landmark presence, default 0.5 */
} hm_body_opts;

/* A hand found by the body pass. */
typedef struct {
    hm_det_hand hand;      /* box, landmarks, presence, handedness (model output), roi (the re-crop's) */
    int person;            /* index of the person (pose detection order) */
    int is_right;          /* the body side: 1 the person's right hand */
    int body_only;         /* 1: the hand stage rejected it; box from the body keypoints, no landmarks */
    float pose_score;      /* the person's pose detection score */
    float wrist_visibility;
    hm_det_rect pose_roi;  /* the hand rectangle from the pose (step 4, before scaling) */
    float wrist[2];        /* the pose's wrist (pixels) */
} hm_body_hand;

typedef struct {
    int persons, hands;
    double pose_ms, pose_lm_ms, recrop_ms, hand_ms, total_ms; /* warps included */
} hm_body_stats;

/* A person: the pose detection and its landmarks (for tests and tools). */
typedef struct {
    float score;
    float kp[HM_POSE_KP][2];     /* image pixels */
    float box[4];
    hm_det_rect roi;             /* the alignment rectangle the landmarks came from */
    float presence;              /* pose flag */
    float lm[HM_POSE_LM][5];     /* x, y, z image pixels (z in x's scale), visibility, presence */
} hm_body_person;

void hm_body_opts_default(hm_body_opts *o);
int hm_body_opts_check(const hm_body_opts *o);

/* pose_detection.tflite, pose_landmark_full.tflite and hand_recrop.tflite
 * from dir (NULL: where hm_det_find_dir looks), shapes checked. */
int hm_body_model_load(const char *dir, hm_body_model **out);
int hm_body_model_load_files(const char *pose_det, const char *pose_lm, const char *recrop, hm_body_model **out);
void hm_body_model_free(hm_body_model *m);
int hm_body_state_new(const hm_body_model *m, hm_body_state **out);
void hm_body_state_free(hm_body_state *s);

/* The body pass on an RGB image (see above). ds: a hand detector state
 * (its hand landmark model). Up to cap hands, person by person, left hand
 * first; persons (may be NULL) gets up to max_persons entries and *np
 * their count. */
int hm_body_run(hm_body_state *s, hm_det_state *ds, const uint8_t *rgb, int w, int h, const hm_body_opts *o,
                hm_pool *pool, hm_body_hand *out, int cap, int *n, hm_body_person *persons, int *np,
                hm_body_stats *stats);

/* Steps 5-6 on a given re-crop rectangle `big` (pixels; step 4's
 * rectangle scaled 2.7 in the body pass): the hand_recrop model, its
 * rectangle, the hand landmark model of ds on it. out->roi, presence and
 * handedness are set; with presence >= min_presence also the landmarks and
 * their box, and *ok = 1. The times are added to *recrop_ms / *hand_ms
 * when not NULL. Allocates nothing. */
int hm_body_recrop_hand(hm_body_state *s, hm_det_state *ds, const uint8_t *rgb, int w, int h, hm_det_rect big,
                        float min_presence, hm_pool *pool, hm_det_hand *out, int *ok, double *recrop_ms,
                        double *hand_ms);

/* ---- pure stages (tested against tests/detect/body_reference.py) ---- */

/* SsdAnchorsCalculator with pose_detection's options: the anchor centres. */
void hm_pose_anchors(float a[HM_POSE_ANCHORS][2]);

/* TensorsToDetections: raw [2254,12] boxes and [2254] scores -> the
 * detections (tensor units; the 4 keypoints in kp[0..3], the rest 0) with
 * sigmoid(clip(score, +-100)) >= min_score. Returns their count. */
int hm_pose_decode(const float *raw_boxes, const float *raw_scores, const float a[HM_POSE_ANCHORS][2],
                   float min_score, hm_palm_det *out);

/* AlignmentPointsRects (centre p0, side 2 |p1 - p0|, rotation p0 -> p1 at
 * target_deg) in pixels. */
hm_det_rect hm_align_rect(double x0, double y0, double x1, double y1, double target_deg);

/* RectTransformation in pixels: shift (of the unsquared size, along the
 * rotated axes), square_long, scale. */
hm_det_rect hm_rect_transform(hm_det_rect r, double scale, double shift_x, double shift_y);

/* TensorsToLandmarks (/256, sigmoid visibility and presence) +
 * RefineLandmarksFromHeatmap (kernel 7, 0.5) + LandmarkLetterboxRemoval +
 * LandmarkProjection: raw [195] and heatmap [64,64,39] -> 39 x (x, y, z,
 * visibility, presence), image pixels. */
void hm_pose_project(const float *raw, const float *heatmap, const hm_det_rect *roi, const float pad[4],
                     float out[HM_POSE_LM][5]);

/* pose_landmarks_to_roi.pbtxt: the next frame's rectangle from the two
 * auxiliary landmarks (33, 34): alignment at 90 degrees, scale 1.25. */
hm_det_rect hm_pose_next_roi(const float lm[HM_POSE_LM][5]);

/* Step 4's rectangle from one side's wrist, pinky, index (pixels). */
hm_det_rect hm_pose_hand_rect(const float wrist[2], const float pinky[2], const float index[2]);

/* Step 5: the hand_recrop output (4 values: two points in 256-px tensor units)
 * through the letterbox removal and projection of roi -> the rectangle the
 * hand landmark model gets. */
hm_det_rect hm_recrop_rect(const float raw[4], const hm_det_rect *roi, const float pad[4]);

#endif
