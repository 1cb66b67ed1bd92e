/* detect/stages.h - the detector's stages as pure functions (no model
 * calls), so that each one can be tested on tensors dumped from the real
 * TFLite runtime. Units are stated per function; "tensor units" are [0,1]
 * across the model input. */
#ifndef HM_DETECT_STAGES_H
#define HM_DETECT_STAGES_H

#include <stdint.h>

#include "detect/detect.h"

#define HM_PALM_SIZE 192
#define HM_PALM_ANCHORS 2016
#define HM_PALM_COORDS 18
#define HM_PALM_KP 7
#define HM_LM_SIZE 224

/* A decoded palm in tensor units (floats, as TensorsToDetections keeps it). */
typedef struct {
    float score;
    float box[4]; /* xmin, ymin, xmax, ymax */
    float kp[HM_PALM_KP][2];
    int anchor;
} hm_palm_det;

/* A palm in image pixels. */
typedef struct {
    double score;
    double box[4];
    double kp[HM_PALM_KP][2];
    int level;       /* pass level that found it */
    unsigned levels; /* bit per level of it and the repeats it absorbed */
    int seq;         /* arrival order over all passes: the tie-break */
} hm_palm_px;

/* SsdAnchorsCalculator with fixed anchor sizes, as MediaPipe's palm and
 * pose detectors configure it: for each of ngrids square grids (cells a
 * side, layers of one stride merged), per_cell anchors at each cell centre
 * (x, y in [0,1]), row by row. Returns the count written to a. */
int hm_ssd_anchors(const int *grid, const int *per_cell, int ngrids, float (*a)[2]);
/* The palm graph's options: 2016 anchors (24x24 cells x 2, then 12x12 cells x 6). */
void hm_palm_anchors(float a[HM_PALM_ANCHORS][2]);

/* TensorsToDetectionsCalculator for an SSD head of nanchors anchors: raw
 * boxes [nanchors, ncoords] (x, y, w, h, then nkp (<= HM_PALM_KP) keypoints
 * x, y, in size-pixel units relative to the anchor) and raw scores ->
 * the detections with sigmoid(clip(score, +-100)) >= min_score and a
 * non-negative size, in anchor order (keypoints past nkp are 0). Returns
 * their count. */
int hm_ssd_decode(const float *raw_boxes, const float *raw_scores, const float (*a)[2], int nanchors, int ncoords,
                  int size, int nkp, float min_score, hm_palm_det *out);

/* TensorsToDetectionsCalculator: raw [2016,18] boxes (x, y, w, h, then 7
 * keypoints x, y; 192-pixel units relative to the anchor) and [2016] raw
 * scores -> the detections with sigmoid(clip(score, +-100)) >= min_score
 * and a non-negative size, in anchor order. Returns their count. */
int hm_palm_decode(const float *raw_boxes, const float *raw_scores, const float a[HM_PALM_ANCHORS][2],
                   float min_score, hm_palm_det *out);

/* NonMaxSuppressionCalculator, WEIGHTED, IoU > thr: out gets the weighted
 * detections, best score first. idx: n ints of scratch. Returns the count. */
int hm_palm_wnms(const hm_palm_det *d, int n, float thr, hm_palm_det *out, int *idx);

/* ImageToTensor's PadRoi (keep_aspect_ratio): r grown to the ow:oh aspect;
 * pad = left, top, right, bottom fractions of the tensor. */
hm_det_rect hm_det_pad_roi(hm_det_rect r, int ow, int oh, float pad[4]);

/* DetectionLetterboxRemoval + the pass's placement: tensor units -> image
 * pixels; roi is the padded (unrotated) rectangle the pass warped. */
void hm_palm_to_image(const hm_palm_det *d, const hm_det_rect *roi, const float pad[4], hm_palm_px *out);

/* DetectionsToRects (box, rotation from keypoint 0 to 2, target 90 deg) +
 * RectTransformation (scale 2.6, shift_y -0.5, square_long), in pixels. */
hm_det_rect hm_palm_hand_rect(const hm_palm_px *p);

/* ImageToTensor's OpenCV CPU path: the rectangle r of the RGB image to an
 * ow x oh float tensor in [0,1] (NHWC), as boxPoints + getPerspectiveTransform
 * + warpPerspective(INTER_LINEAR) + convertTo(1/255): tensor pixel (u, v)
 * samples r.c + R(rot) ((u/ow - 1/2) w, (v/oh - 1/2) h), quantised to 1/32
 * pixel, 15-bit bilinear weights on the 8-bit pixels; outside the image zero
 * (replicate = 0) or the nearest edge pixel (replicate = 1). */
void hm_det_warp(const uint8_t *rgb, int w, int h, const hm_det_rect *r, int ow, int oh, int replicate,
                 float *out);

/* TensorsToLandmarks (/224, z /224/0.4) + LandmarkLetterboxRemoval +
 * LandmarkProjection: 63 raw values -> 21 x (x, y, z) image pixels (z times
 * the roi width, the scale of x). */
void hm_lm_project(const float *raw, const hm_det_rect *roi, const float pad[4], float out[HM_DET_LANDMARKS][3]);

/* HandLandmarkLandmarksToRoi (hand_landmark_landmarks_to_roi.pbtxt), in
 * pixels: over the 12 steadier landmarks (0-3, 5, 6, 9, 10, 13, 14, 17,
 * 18) the rotation from the wrist (0) towards the mean of the middle MCP
 * (9) and the mean of the index and ring MCPs (5, 13), target 90 degrees;
 * their box in that rotated frame; then RectTransformation with scale 2.0,
 * shift_y -0.1, square_long: the crop the next video frame's landmarks
 * are looked for in. */
hm_det_rect hm_lm_hand_roi(const float lm[HM_DET_LANDMARKS][3]);

/* Tight box of the landmarks' x, y. */
void hm_lm_box(const float lm[HM_DET_LANDMARKS][3], float box[4]);

/* Cross-pass palm suppression (detect.h step 2): order gets the indices of
 * c[0..n), the full frame's (level 0) first, then best score first (ties:
 * lower seq first), then only those kept;
 * a palm overlapping a kept one by IoU > iou is a repeat and its levels are
 * OR-ed into the keeper's. Returns the kept count. */
int hm_det_suppress(hm_palm_px *c, int n, float iou, int *order);

/* IoU of two x1,y1,x2,y2 boxes (float, as OverlapSimilarity), 0 if apart. */
float hm_det_iou(const float a[4], const float b[4]);
/* The same for boxes in image pixels (double). */
double hm_det_iou_px(const double a[4], const double b[4]);

/* tiles.c: the tiles of the multi-pass scheme and the merge of the hands. */

/* Tile centres along one axis of n pixels for tiles of `side` px
 * overlapping by at least `overlap`: the fewest tiles, evenly spread, the
 * outer ones flush with the edges; one centred tile when n <= side.
 * Returns the count (at most cap). */
int hm_det_tile_axis(int n, int side, double overlap, double *c, int cap);

/* The tile prior (detect.h step 1): of the full frame's decoded palms d
 * (scored at the prior's threshold, tensor units of the padded roi the
 * pass warped), those whose pixel box overlaps none of the nfound palms
 * that pass kept by IoU > mask_iou (the same palm: weighted NMS clusters
 * at 0.3) and lies inside none of the nh palms c[hidx[k]] of the hands it
 * found by `contain` of its area (hm_det_in_palm) -> their box centres in
 * pixels into pts. Returns the count. */
int hm_det_prior(const hm_palm_det *d, int n, const hm_det_rect *roi, const float pad[4], const hm_palm_px *found,
                 int nfound, float mask_iou, const hm_palm_px *c, const int *hidx, int nh, float contain,
                 float (*pts)[2]);

/* The tiles of one level the n prior points ask for (tile centres cx[0..nx)
 * x cy[0..ny), squares of `side`): each point asks for one tile, the one
 * whose centre is nearest it along each axis (ties: the lower index), i.e.
 * the tile it lies most centrally in, where a hand around it is least
 * likely cut by an edge; and only when it lies inside that tile, [x0, x1)
 * x [y0, y1). wanted: nx * ny flags, row-major, all written. Returns how
 * many are set. */
int hm_det_tiles_wanted(const float (*pts)[2], int n, const double *cx, int nx, const double *cy, int ny, double side,
                        unsigned char *wanted);

/* A tile's palm seen again (hm_det_run step 4): the first k of the n
 * palms c[idx[k]] (the full frame's, whose hands were found) holding at
 * least `contain` of the area of box (a tile palm's, pixels). -1 if none. */
int hm_det_in_palm(const double box[4], const hm_palm_px *c, const int *idx, int n, float contain);

/* Two hands are one (detect.h step 4): not when the body pass took them
 * from one person's two wrists (person equal, sides differ); else when
 * their wrists and their palm centres (the mean of landmarks 0, 5, 9, 13,
 * 17) both lie within same x the larger box side (a keypoint-only box: the
 * wrists alone). */
int hm_det_same_hand(const hm_det_hand *a, const hm_det_hand *b, float same);

/* The merge (detect.h step 4) of h[0..n): hands are taken in priority
 * order (the full frame's palm hands, the tiles', the body pass's, the
 * proposals', the keypoint-only boxes; within each, their order in h) and
 * each that is the same hand as an earlier kept one joins it: its levels
 * and passes are OR-ed into the keeper's, and a body-pass hand gives the
 * keeper its person and side when it had none. The kept hands stay in
 * their order in h. rep: 2n ints of scratch. Returns the count. */
int hm_det_merge(hm_det_hand *h, int n, float same, int *rep);

#endif
