/* track/tracker.h - the internal side of hamer_tracker_* (include/hamer.h
 * describes the behaviour; these check their arguments the same way).
 *
 * Per frame (hm_tracker_push):
 *   1. scene cut: 16x16 RGB thumbnails of this and the previous frame
 *      differ by more than cut_threshold -> every track ends;
 *   2. each live track: the landmark model on its rectangle (the previous
 *      frame's landmarks through hm_lm_hand_roi); presence below
 *      track_presence, or a rectangle gone degenerate, ends it; of two
 *      tracks that landed on the same hand the younger ends;
 *   3. palm detection (hm_det_run) when a track ended, on a cut, or when
 *      fewer than max_hands are live and redetect_every frames have passed
 *      since the last detection (so on the first frame); a detected hand
 *      that is one of the live tracks (landmark boxes overlapping by IoU >
 *      0.5 or one inside the other by 80 %) is dropped; one that overlaps a
 *      track ended in this same frame by IoU > 0.3 takes that track back
 *      (same id); the others start tracks, best palm score first, while
 *      fewer than max_hands are live;
 *   4. each track: handedness vote updated, next rectangle computed.
 * Everything lives in fixed buffers sized at hm_tracker_new.
 */
#ifndef HM_TRACK_TRACKER_H
#define HM_TRACK_TRACKER_H

#include "detect/detect.h"
#include "hamer.h"

hamer_tracker_params hm_tracker_default_params(void);
/* NULL on failure (hm_err naming the bad parameter). */
hamer_tracker *hm_tracker_new(const hm_det_model *m, const hamer_tracker_params *p, int n_threads);
void hm_tracker_free(hamer_tracker *t);
int hm_tracker_reset(hamer_tracker *t);
int hm_tracker_push(hamer_tracker *t, const uint8_t *rgb, int w, int h, double time_s, hamer_track *out, int max,
                    hamer_track_stats *stats);
int hm_tracker_smooth(hamer_tracker *t, const hamer_track *tracks, int n, const hamer_hand *raw, hamer_hand *smoothed);

/* What hamer_tracker_frame fills and hamer_tracker_get_results reads: the last
 * frame's tracks, their detections (for hamer_predict_detections), raw and
 * smoothed hands; cap = max_hands. */
typedef struct {
    hamer_track *tracks;
    hamer_detection *dets;
    hamer_hand *raw, *smoothed;
    int cap, n, regressed;
    hamer_track_stats stats;
    double time_s;
    int w, h;
} hm_tracker_frame;

hm_tracker_frame *hm_tracker_frame_buf(hamer_tracker *t);
const hm_tracker_frame *hm_tracker_frame_get(const hamer_tracker *t);
/* smooth = the tracker's smoothing mode. */
int hm_tracker_smoothing(const hamer_tracker *t);

/* The "hands" of a tracked frame's record (track_json.c): per track its
 * hand as RESULT.json writes it (raw NULL: not regressed, the box only;
 * smoothing: the smoothed one, with "raw"), its track and detection. A
 * jansson array, or NULL out of memory. */
typedef struct json_t json_t;
json_t *hm_track_hands_json(const hamer_track *tracks, const hamer_hand *raw, const hamer_hand *smoothed, int n,
                            int smoothing, int with_vertices);
/* The last frame's JSON Lines record (track_json.c); malloc'd or NULL. */
char *hm_tracker_json(const hamer_tracker *t, long long frame, int with_vertices, double decode_ms);

#endif
