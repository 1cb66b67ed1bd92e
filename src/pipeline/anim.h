/* anim.h - a video's tracked hands recorded for the animation files (the
 * animated GLB, glb.c; BVH, bvh.c): per track its samples, its shape and
 * the frames they fall on.
 *
 * Samples go to a temporary file as they come (one record per hand and
 * frame), so a long video holds no more than one frame's hands in memory
 * while it runs; the writers read them back one track at a time. */
#ifndef HM_ANIM_H
#define HM_ANIM_H

#include <stdint.h>
#include <stdio.h>

#include "hamer.h"
#include "model/model.h"

/* One hand at one frame. */
typedef struct {
    int32_t track, is_right;
    int64_t frame;               /* the frame it falls on (fps > 0), else its index in the order added */
    double time;                 /* seconds: frame / fps (fps > 0), else as given */
    float R[HM_NJ * 9];          /* global orient, then hand pose (as hamer_hand) */
    float betas[HM_NB];
    float cam_t[3];              /* the hand's place in the photo's camera (cam_t) */
    float kp3d[HM_NKP * 3];      /* keypoints_3d */
} hm_anim_rec;

typedef struct hm_anim hm_anim;

/* fps > 0: each sample lands on the whole frame round(time * fps) (a
 * second one on the same frame of a track is left out); 0: times as
 * given. shape: HAMER_ANIM_SHAPE_*. NULL on error (message set). */
hm_anim *hm_anim_new(double fps, int shape);
void hm_anim_free(hm_anim *a);
/* A frame at time_s (later than the previous frame's) with its tracked
 * hands (hands without a result are skipped; n may be 0: the frame still
 * counts for the BVH's frame step). 0 or HM_E_IO / HM_E_ARG. */
int hm_anim_add(hm_anim *a, double time_s, const hamer_track *tracks, const hamer_hand *hands, int n);

/* What the writers need. */
double hm_anim_fps(const hm_anim *a);       /* the fps given (0: none) */
int hm_anim_tracks(const hm_anim *a);       /* largest track id + 1 */
/* The frames recorded: the first and last frame number and the smallest
 * step between two recorded frames (1 when fewer than two); 0 when no
 * frame was added. */
int hm_anim_frames(const hm_anim *a, int64_t *first, int64_t *last, int64_t *step);
/* The samples of track tr in time order into *s (grown as needed; free
 * with free()), their count in *n (0: a track with no sample), the track's
 * shape into betas and, with the TRACK shape, each sample's kp3d again for
 * it. 0, or HM_E_IO / HM_E_NOMEM. */
int hm_anim_track(hm_anim *a, const hm_mano *mn, int tr, hm_anim_rec **s, size_t *cap, int *n, float betas[HM_NB]);

#endif
