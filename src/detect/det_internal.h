/* detect/det_internal.h - the detector's model and state layouts, shared by
 * det_model.c and hands.c. */
#ifndef HM_DETECT_DET_INTERNAL_H
#define HM_DETECT_DET_INTERNAL_H

#include "detect/body.h"
#include "detect/detect.h"
#include "detect/handtrack.h"
#include "detect/stages.h"
#include "tflite/tflite.h"

struct hm_det_model {
    hm_tfl_model *palm, *lm;
    int palm_boxes, palm_scores;                  /* output indices */
    int lm_landmarks, lm_presence, lm_handedness; /* output indices */
    float anchors[HM_PALM_ANCHORS][2];
    hm_body_model *body;                          /* optional: hm_det_model_load_body */
    hm_ht_model *ht;                              /* optional: hm_det_model_load_proposals */
};

/* What one thread needs to run a palm pass or a landmark call on its own:
 * its model states and the pass's scratch. */
typedef struct {
    hm_tfl_state *palm, *lm;
    hm_palm_det dec[HM_PALM_ANCHORS], nms[HM_PALM_ANCHORS];
    int idx[HM_PALM_ANCHORS];
    hm_det_stats st;         /* this thread's share of the call's counts and times */
} hm_det_worker;

/* Tiles of one batch of palm passes and what each found (kept before the
 * candidates of all passes are merged in tile order, so the result does
 * not depend on which thread ran which tile). */
#define HM_DET_TILE_BATCH 64
#define HM_DET_TILE_AXIS 64  /* tiles per axis of one level, at most */
#define HM_DET_TILE_CANDS 32 /* palms kept per tile, best scores (weighted NMS leaves a few) */
typedef struct {
    hm_det_rect roi;
    int level, n;
    hm_palm_px p[HM_DET_TILE_CANDS];
} hm_det_tile;

struct hm_det_state {
    const hm_det_model *m;
    int nworkers;
    hm_det_worker *w[HM_DET_MAX_WORKERS];      /* w[0] always; more from hm_det_state_reserve */
    hm_det_tile tiles[HM_DET_TILE_BATCH];
    /* all passes */
    hm_palm_px cand[HM_DET_MAX_CANDIDATES];
    int ncand, seq;
    int order[HM_DET_MAX_CANDIDATES];
#define HM_DET_MAX_ALL (HM_DET_MAX_CANDIDATES + 2 * HM_BODY_MAX_PERSONS + HM_HT_MAX_OUT)
    hm_det_hand hands[HM_DET_MAX_ALL];        /* landmarked, then merged in place */
    int keep[HM_DET_MAX_CANDIDATES];
    int lmq[HM_DET_MAX_CANDIDATES];           /* the candidates a landmark batch looks at */
    int hcand[HM_DET_MAX_CANDIDATES];         /* the full frame's hands' candidates */
    unsigned char wanted[HM_DET_TILE_AXIS * HM_DET_TILE_AXIS]; /* the tiles of one level the prior asks for */
    int rep[2 * HM_DET_MAX_ALL];              /* the merge's scratch */
    float prior[HM_PALM_ANCHORS][2];          /* the tile prior's points (pixels) */
    int nprior, use_prior;
    hm_body_state *body;                      /* when the model has the body models */
    hm_body_hand body_hands[2 * HM_BODY_MAX_PERSONS];
    hm_body_person persons[HM_BODY_MAX_PERSONS];
    hm_ht_state *ht;                          /* when the model has the hand-box detector */
    hm_ht_box props[HM_HT_MAX_OUT];
};

/* sources.c: the passes besides the palm passes, each appending hands to
 * s->hands[*nh..] (at most their capacity) with its statistics in st:
 * the body pass (detect/body.h; its keypoint-only boxes checked against
 * their person) and the proposal pass (detect/handtrack.h, each proposal
 * verified with the hand landmark model). */
int hm_det_add_body(hm_det_state *s, const uint8_t *rgb, int w, int h, const hm_det_opts *o, hm_pool *pool, int *nh,
                    hm_det_stats *st);
int hm_det_add_proposals(hm_det_state *s, const uint8_t *rgb, int w, int h, const hm_det_opts *o, hm_pool *pool,
                         int *nh, hm_det_stats *st);

#endif
