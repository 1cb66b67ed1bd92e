/* detect/detect.h - the built-in hand detector: MediaPipe Hands' palm
 * detector + hand landmark model (TFLite, run by tflite/tflite.h), their
 * published CPU graphs re-implemented, and a multi-pass scheme for small
 * hands in large photos.
 *
 * Pipeline per image (hm_det_run):
 *   1. Palm passes. Level 0 is MediaPipe's own: the whole image letterboxed
 *      into 192x192. Levels 1..n: square tiles of side round(L / levels[i])
 *      (L = the longer image side; a level is skipped when its tiles would
 *      be under min_tile px), overlapping by at least `overlap` of a side.
 *      Each pass: the bilinear warp to [0,1], the palm model, SSD decoding
 *      against 2016 anchors, sigmoid scores >= min_palm, weighted NMS at
 *      IoU 0.3, back to image pixels. The full frame's palms are
 *      landmarked (step 3) before any tile runs. The prior: a tile runs
 *      only when one of the full frame's decoded palms scoring >=
 *      tile_prior (its tensors read again, no model call) asks for it:
 *      each asks for the one tile it lies most centrally in (nearest
 *      centre along each axis), and none when its box lies inside the palm
 *      of a hand the full frame found by tile_repeat of its area (that
 *      hand's); elsewhere the full frame saw nothing hand-like, so no tile
 *      there can hold a hand.
 *   2. Across passes, palm boxes overlapping a kept one by IoU > palm_iou
 *      are repeats and are not landmarked; the full frame's palms are kept
 *      first (MediaPipe's crop is landmarked, not a tile's), then the
 *      tiles' by score. A tile's palm lying inside a full-frame hand's palm
 *      by tile_repeat of its area is that hand again: not landmarked
 *      either (its level joins the hand's levels).
 *   3. Each remaining palm -> rotated hand rectangle (keypoint 0 -> 2 at 90
 *      degrees, scale 2.6, shift -0.5, square) -> 224x224 crop -> landmark
 *      model: 21 landmarks, presence, handedness. Presence must reach
 *      min_presence for a level-0 palm, tile_presence for a tile's (many
 *      more windows are looked at, so the bar is higher; measured: tile
 *      false positives reached 0.85, tile true hands 0.95+).
 *   4. Merge by identity (hm_det_merge), in priority order (the full
 *      frame's palm hands by palm score, the tiles', the body pass's, the
 *      proposals', the body keypoints' boxes last): a hand is a repeat of
 *      an earlier kept one when their wrists and their palm centres (the
 *      mean of the wrist and the four finger bases) both lie within
 *      same_hand x the larger landmark box side (a keypoint-only box: its
 *      pose wrist against the other's wrist); two hands the body pass took
 *      from the same person's two wrists are never the same hand. Box
 *      overlap alone says nothing: two interlocked hands overlap almost
 *      completely. The keeper keeps its own landmarks (the full frame's:
 *      MediaPipe's crop). A hand is never returned twice.
 *   5. What cannot be a hand goes: a box with a side under min_box pixels
 *      (see detect.h's opts), a keypoint-only box inconsistent with its
 *      person (body.h).
 *
 * Handedness: the landmark model's binary output s is the score of label 0
 * ("Left") for a MIRRORED (selfie) image. On ordinary photos it is the
 * other way round, measured on the annotated photos: s > 0.5 is a right
 * hand. is_right below is that (s > 0.5); `handedness` keeps s itself.
 *
 * Memory: hm_det_model holds the two loaded models and the anchors
 * (read-only, shareable between threads). hm_det_state holds the two
 * TFLite run states and fixed-size scratch (candidate lists; the warps read
 * the caller's image directly, so nothing depends on the image size):
 * allocated once by hm_det_state_new, hm_det_run allocates nothing.
 *
 * Errors: HM_OK or a negative HM_E_* code after hm_err() (core/util.h).
 *
 * Proposed public API (for include/hamer.h, not there yet):
 *
 *   typedef struct hamer_detector hamer_detector;  // models, shareable
 *   typedef struct {
 *       hamer_box box;           // tight box of the 21 landmarks + is_right
 *       float palm_score, presence_score, handedness_score;
 *       float landmarks[21][3];  // image pixels; z in the same scale as x
 *       int pass;                // 0 full frame, k tile level k
 *   } hamer_detection;
 *   int hamer_detector_load(const char *dir, int lite, hamer_detector **out); // dir may be NULL
 *   int hamer_detect(hamer_detector *d, const uint8_t *rgb, int w, int h,
 *                    int max_hands, float min_score, int multi_pass,
 *                    hamer_detection *out, int *n);
 *   void hamer_detector_free(hamer_detector *d);
 * (one hm_det_state per thread inside hamer_detector, or a separate
 * hamer_detector_state if the public API keeps model/state apart).
 */
#ifndef HM_DETECT_DETECT_H
#define HM_DETECT_DETECT_H

#include <stddef.h>
#include <stdint.h>

#include "core/pool.h"

#define HM_DET_LANDMARKS 21
#define HM_DET_MAX_LEVELS 4
#define HM_DET_MAX_HANDS 64
#define HM_DET_MAX_CANDIDATES 256 /* palm candidates kept over all passes (best scores) */

typedef struct hm_det_model hm_det_model;
typedef struct hm_det_state hm_det_state;

/* A rectangle in image pixels: centre, size, rotation (radians, clockwise
 * on screen, i.e. from +x towards +y). */
typedef struct {
    double cx, cy, w, h, rot;
} hm_det_rect;

typedef struct {
    float box[4];      /* x1, y1, x2, y2: tight box of the 21 landmarks (the box HaMeR takes) */
    int is_right;      /* handedness > 0.5 (see the note above) */
    float palm_score;  /* palm detector score of the representative candidate */
    float presence;    /* hand presence (landmark model) */
    float handedness;  /* raw handedness output: > 0.5 right hand on a non-mirrored photo */
    float landmarks[HM_DET_LANDMARKS][3]; /* x, y image pixels; z relative depth, x's pixel scale */
    hm_det_rect roi;   /* the rotated crop the landmarks came from */
    int level;         /* pass level of the representative: 0 full frame, k tile level k */
    unsigned levels;   /* bit k set: a candidate from level k merged into this hand */
    int pass;          /* the pass that found the representative: HM_DET_PASS_PALM or _BODY */
    unsigned passes;   /* bit per pass (1 << HM_DET_PASS_*) of it and the repeats merged into it */
    int person;        /* the body pass's person index when it found the hand (or a repeat merged
                          into it; is_right is then that person's side), else -1 */
    float wrist[2];    /* the wrist (pixels): landmark 0, or the pose's wrist for a keypoint-only
                          box: the hand's identity in the merge (with the palm centre) */
} hm_det_hand;

enum { HM_DET_PASS_PALM = 0, HM_DET_PASS_BODY = 1, HM_DET_PASS_KEYPOINTS = 2, HM_DET_PASS_PROPOSAL = 3 };

/* The body pass in hm_det_run (detect/body.h: MediaPipe Holistic's hands
 * from the pose). AUTO (the default): run it when the body models were
 * loaded into the detector's model (hm_det_model_load_body) before the
 * state was made, the palm search is the multi-pass one (n_levels > 0) and
 * the palm pass found fewer than two hands per person it may look at
 * (2 x body_persons): a person has two hands, so where the palm pass has
 * them the body pass can only repeat them (measured in docs/detector.md:
 * on nine photos it added a hand only where the palm pass had found one
 * hand of the person, and it costs 50-80 ms with a person in view); ON:
 * run it, an error if the models were not loaded; OFF: never. Its hands
 * with landmarks join the palm pass's before the merge (step 4), after
 * them, so a hand both passes find keeps the palm pass's landmarks and gets
 * both bits in `passes`. Hands the hand landmark model rejected (body_only)
 * are returned only with body_boxes = 1 and a wrist visibility of at least
 * body_box_visibility (0.5: the keypoint confidence HaMeR's own demo asks
 * of the body keypoints it boxes hands with; measured in docs/detector.md,
 * it keeps basketball1's hidden clapping hand, 0.92, and drops astronaut's
 * two false ones, 0.13 and 0.32): pass HM_DET_PASS_KEYPOINTS, the box from
 * the body keypoints alone (body.h step 6), no landmarks (zeros),
 * palm_score the wrist's visibility, presence the rejected presence; they
 * come last and go as repeats of any other hand they overlap. */
enum { HM_DET_BODY_AUTO = 0, HM_DET_BODY_OFF = 1, HM_DET_BODY_ON = 2 };

typedef struct {
    int max_hands;          /* 1..HM_DET_MAX_HANDS, default 8 */
    float min_palm;         /* palm score threshold, default 0.5 (MediaPipe's) */
    float min_presence;     /* presence threshold, level 0, default 0.5 (MediaPipe's) */
    float tile_presence;    /* presence threshold, tile levels, default 0.9 */
    int n_levels;           /* 0 = MediaPipe's single pass; default 1 */
    float levels[HM_DET_MAX_LEVELS]; /* tile side = L / levels[i]; default 4 */
    float overlap;          /* minimum tile overlap, fraction of the side, default 0.25 */
    int min_tile;           /* smallest tile side in pixels, default 192 */
    float tile_prior;       /* a tile runs only where the full frame's palm scores reach this
                               (outside the palms it found, see prior_mask); 0 = every tile;
                               default 0.02 */
    float prior_mask;       /* full-frame scores whose box overlaps a palm that pass found by
                               IoU > this are that palm's, not a prior; default 1 = none masked
                               (0.3 loses hamer_example_1's hidden hand: its scores lie in the
                               cluster of the fist next to it) */
    float palm_iou;         /* cross-pass palm repeat IoU, default 0.5 */
    float tile_repeat;      /* a tile palm lying inside a full-frame hand's palm by at least this
                               share of its area is that hand again: not landmarked; default 0.6
                               (measured: repeats 0.61-1.0, the hidden hand next to a fist
                               0.52-0.53; docs/detector.md) */
    int body;               /* HM_DET_BODY_AUTO (default), _OFF, _ON: see above */
    int body_persons;       /* persons the body pass landmarks, 1..8, default 1 (MediaPipe's) */
    int body_boxes;         /* 1: also the body keypoints' boxes the hand stage rejected; default 0
                               here (a tracker cannot follow a box without landmarks), 1 in
                               hamer_detect_default_params */
    float body_box_visibility; /* ... whose wrist's visibility reaches this; default 0.5 */
    float body_box_shoulder;/* ... whose side is at least this fraction of the person's shoulder
                               width (a hand is about 0.4 of it; default 0.2) */
    int proposals;          /* the hand-box proposals (detect/handtrack.h): HM_DET_BODY_AUTO
                               (default; see hm_det_run's rule), _OFF or _ON */
    float proposal_score;   /* proposal score threshold (best class but face), default 0.2 */
    float proposal_presence;/* landmark presence a proposal needs to become a hand, default 0.5
                               (the full-frame palm pass's) */
    int proposal_max;       /* proposals verified at most, best first, default 8 */
    float same_hand;        /* merge: wrist and palm-centre distance, fraction of the hand size,
                               under which two hands are one, default 0.25 */
    int min_box;            /* no box with a side under this many pixels is returned, default 16 */
} hm_det_opts;

typedef struct {
    int palm_calls, landmark_calls, candidates, hands;
    int tiles, tiles_run;   /* the tile passes of the levels, and those the prior let run */
    double warp_ms, palm_ms, landmark_ms, post_ms, total_ms;
    int body_persons, body_hands; /* the body pass: persons, hands with landmarks (before the merge) */
    int body_boxes;         /* its keypoint-only boxes kept (body_boxes = 1; before the merge) */
    int body_run;           /* 1: the body pass ran (ON, or AUTO's rule above) */
    double body_ms;
    int proposals_run;      /* 1: the proposal pass ran */
    int proposals;          /* its proposals (after NMS) */
    int proposal_calls;     /* of them, verified with the landmark model (the rest repeat a hand) */
    int proposal_hands;     /* of those, that passed (before the merge) */
    int dropped;            /* boxes dropped as impossible (min_box, keypoint-box checks) */
    double proposal_ms;
} hm_det_stats;

void hm_det_opts_default(hm_det_opts *o);
/* HM_E_ARG with a message for out-of-range options. */
int hm_det_opts_check(const hm_det_opts *o);

/* The models directory: dir if given (it must hold the files), else the
 * first of $HAMER_DETECTOR_DIR, ${XDG_DATA_HOME:-$HOME/.local/share}/hamer/detector,
 * /usr/local/share/hamer/detector that holds palm_detection_<v>.tflite and
 * hand_landmark_<v>.tflite (v = lite or full). HM_E_IO naming every place
 * looked at and scripts/get_detector.sh; HM_E_ARG if out is too small. */
int hm_det_find_dir(const char *dir, int lite, char *out, size_t cap);

/* Load both models from dir (found as above when dir is NULL) and check
 * their input/output shapes. */
int hm_det_model_load(const char *dir, int lite, hm_det_model **out);
/* The same from explicit file paths. */
int hm_det_model_load_files(const char *palm_path, const char *landmark_path, hm_det_model **out);
void hm_det_model_free(hm_det_model *m);
/* Also load the body pass's models (pose_detection.tflite,
 * pose_landmark_full.tflite, hand_recrop.tflite) from dir (NULL: found as
 * above), for the states made after this call. */
int hm_det_model_load_body(hm_det_model *m, const char *dir);
/* Also load the hand-box detector (handtrack.json + handtrack.bin) from dir
 * (NULL: found as above) for the proposal pass, which also needs the body
 * models' hand_recrop (load those first). */
int hm_det_model_load_proposals(hm_det_model *m, const char *dir);

int hm_det_state_new(const hm_det_model *m, hm_det_state **out);
void hm_det_state_free(hm_det_state *s);
/* Give the state model states for n threads (at most HM_DET_MAX_WORKERS),
 * so that hm_det_run can hand whole tile passes and landmark calls to the
 * pool's threads instead of splitting each model call (coarser work,
 * better scaling). Allocates now, never in hm_det_run; results do not
 * depend on n. */
#define HM_DET_MAX_WORKERS 64
int hm_det_state_reserve(hm_det_state *s, int n);

/* Detect hands in an RGB image (w x h, interleaved, row-major, 8-bit).
 * Writes up to min(cap, o->max_hands) hands, best palm score first, and
 * their count to *n; o NULL = defaults; pool may be NULL; stats may be NULL. */
int hm_det_run(hm_det_state *s, const uint8_t *rgb, int w, int h, const hm_det_opts *o, hm_pool *pool,
               hm_det_hand *out, int cap, int *n, hm_det_stats *stats);

/* Tracking (MediaPipe's video mode): the landmark model alone on a given
 * rotated rectangle (a hand's roi from the previous frame's landmarks,
 * hm_lm_hand_roi), no palm detection. *found = 1 and out filled (box,
 * landmarks, handedness, presence; roi = the rectangle used; palm_score,
 * level and levels left 0) when presence >= min_presence; *found = 0
 * with out->presence set otherwise. Allocates nothing. */
int hm_det_track(hm_det_state *s, const uint8_t *rgb, int w, int h, const hm_det_rect *roi, float min_presence,
                 hm_pool *pool, hm_det_hand *out, int *found, hm_det_stats *stats);

#endif
