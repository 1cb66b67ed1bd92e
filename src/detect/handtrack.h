/* detect/handtrack.h - the hand-box proposals: the SSD of npm
 * @vladmandic/human@3.3.6 (models/handtrack.json + handtrack.bin, MIT; a
 * TensorFlow Object Detection API SSD MobileNetV2-FPNLite 320x320 trained on
 * hands, converted to a TF.js graph model), run by tfjs/tfjs.h on the
 * TFLite executor's kernels, with the graph's pre- and post-processing
 * written here (checked against TensorFlow.js, tests/test_handtrack.py).
 *
 * Per image (hm_ht_run):
 *   1. The model's Preprocessor: the RGB image as float, x * 0.0078431377
 *      - 1 (float32, as the graph computes it), resized to 320x320 by TF's
 *      legacy bilinear rule (align_corners and half_pixel_centers false:
 *      source = dst * in / out, floor and ceil clamped, weights in double,
 *      as TF.js's CPU kernel) - the aspect is not kept, as in training.
 *   2. The network (tfjs_build.c) to its raw box encodings [12804, 4]
 *      (ty, tx, th, tw) and class logits [12804, 8].
 *   3. Decoding as the graph's Postprocessor/Decode does with its own
 *      anchors (the constants of the file, 8-bit quantized there):
 *      y = ty * (ha / 10) + ya, x = tx * (wa / 10) + xa,
 *      h = exp(th / 5) * ha, w = exp(tw / 5) * wa; boxes y, x +- h / 2, w / 2,
 *      in [0, 1] of the image. Scores: sigmoid of the logits, the
 *      background column dropped: hand, fist, pinch, point, face, tip,
 *      pinchtip. A box's score is the best class but face (human's
 *      handtrack.ts drops the face class: the model also scores faces and
 *      heads as fists; the face score is kept beside it).
 *   4. NMS as tf.image.nonMaxSuppression: scores > min_score, best first
 *      (ties: lower anchor first), a box goes when its IoU with a kept one
 *      is >= iou; at most max_out.
 * The boxes are proposals, not hands: detect/hands.c verifies each with the
 * hand landmark model before it becomes one.
 *
 * Memory: hm_ht_model (the compiled network, anchors) is read-only and
 * shareable; hm_ht_state holds its run state and the decode scratch:
 * hm_ht_run allocates nothing.
 */
#ifndef HM_DETECT_HANDTRACK_H
#define HM_DETECT_HANDTRACK_H

#include <stdint.h>

#include "core/pool.h"

#define HM_HT_SIZE 320
#define HM_HT_ANCHORS 12804
#define HM_HT_CLASSES 7
#define HM_HT_FACE 4
#define HM_HT_MAX_OUT 64

typedef struct hm_ht_model hm_ht_model;
typedef struct hm_ht_state hm_ht_state;

/* A decoded box: corners in [0, 1] of the image (y1, x1, y2, x2 as the
 * graph orders them), class scores, the proposal score (best non-face class)
 * and that class. */
typedef struct {
    float yx[4];
    float cls[HM_HT_CLASSES];
    float score;
    int label;
    int anchor;
} hm_ht_det;

/* A proposal in image pixels. */
typedef struct {
    float box[4];   /* x1, y1, x2, y2 */
    float score;    /* best class but face */
    float face;     /* the face class's score */
    int label;      /* 0 hand, 1 fist, 2 pinch, 3 point, 5 tip, 6 pinchtip */
} hm_ht_box;

typedef struct {
    float min_score; /* default 0.2 */
    float iou;       /* default 0.3 */
    int max_out;     /* 1..HM_HT_MAX_OUT, default 16 */
} hm_ht_opts;

typedef struct {
    double prep_ms, net_ms, post_ms;
} hm_ht_stats;

void hm_ht_opts_default(hm_ht_opts *o);

/* handtrack.json (and its handtrack.bin) from dir; the network compiled,
 * the preprocessing and anchor constants read and checked (HM_E_FORMAT
 * naming what is not the hand-box detector). */
int hm_ht_model_load(const char *dir, hm_ht_model **out);
int hm_ht_model_load_file(const char *json_path, hm_ht_model **out);
void hm_ht_model_free(hm_ht_model *m);
int hm_ht_state_new(const hm_ht_model *m, hm_ht_state **out);
void hm_ht_state_free(hm_ht_state *s);

/* Steps 1-4 on an RGB image: up to o->max_out proposals into out, best
 * first; *n their count. o NULL = defaults; stats may be NULL. */
int hm_ht_run(hm_ht_state *s, const uint8_t *rgb, int w, int h, const hm_ht_opts *o, hm_pool *pool, hm_ht_box *out,
              int *n, hm_ht_stats *stats);

/* ---- pure stages (tested against TF.js) ---- */

/* Step 1: out gets HM_HT_SIZE^2 x 3 floats. */
void hm_ht_preprocess(const uint8_t *rgb, int w, int h, float mul, float sub, float *out);
/* Step 3 on the raw outputs with the model's anchors: all HM_HT_ANCHORS
 * boxes into d (with their scores, label and anchor index). */
void hm_ht_decode(const hm_ht_model *m, const float *enc, const float *logits, hm_ht_det *d);
/* Step 4: the kept indices of d[0..n) into keep (at most max_out, best
 * first); order: n ints of scratch. Returns the count. */
int hm_ht_nms(const hm_ht_det *d, int n, float min_score, float iou, int max_out, int *keep, int *order);
/* The network's outputs of the last hm_ht_run (for the stage tests). */
const float *hm_ht_raw(const hm_ht_state *s, int which);
/* The preprocessing constants the file holds. */
void hm_ht_prep_consts(const hm_ht_model *m, float *mul, float *sub);

#endif
