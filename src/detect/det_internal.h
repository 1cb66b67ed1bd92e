/* detect/det_internal.h - the detector's model and state layouts, shared by
 * det_model.c and hands.c. */
#ifndef HM_DETECT_DET_INTERNAL_H
#define HM_DETECT_DET_INTERNAL_H

#include "detect/detect.h"
#include "detect/stages.h"
#include "detect/tflite.h"

struct hm_det_model {
    hm_tfl_model *palm, *lm;
    int palm_boxes, palm_scores;                  /* output indices */
    int lm_landmarks, lm_presence, lm_handedness; /* output indices */
    float anchors[HM_PALM_ANCHORS][2];
};

struct hm_det_state {
    const hm_det_model *m;
    hm_tfl_state *palm, *lm;
    /* one palm pass */
    hm_palm_det dec[HM_PALM_ANCHORS], nms[HM_PALM_ANCHORS];
    int idx[HM_PALM_ANCHORS];
    /* all passes */
    hm_palm_px cand[HM_DET_MAX_CANDIDATES];
    int ncand, seq;
    int order[HM_DET_MAX_CANDIDATES];
    hm_det_hand hands[HM_DET_MAX_CANDIDATES]; /* landmarked, then merged in place */
};

#endif
