/* bvh.h - hands as BVH motion files (Biovision hierarchy): a photo's hands
 * as one frame, a recording's tracks (anim.h) as one frame per video
 * frame. include/hamer.h (hamer_anim_*) describes the file. */
#ifndef HM_BVH_H
#define HM_BVH_H

#include <stddef.h>
#include <stdio.h>

#include "hamer.h"
#include "model/model.h"
#include "pipeline/anim.h"

/* hands[0..n) with a result, skeleton hand<i>_<side>; one frame. *out is
 * malloc'd text (*len bytes, NUL-terminated). 0 or HM_E_NOMEM. */
int hm_bvh_hands(const hm_mano *mn, const hamer_hand *hands, int n, char **out, size_t *len);
/* A recording's tracks, skeleton hand<track>_<side>, written to f (the
 * caller checks its errors). 0, HM_E_IO or HM_E_NOMEM. */
int hm_bvh_anim(hm_anim *a, const hm_mano *mn, FILE *f);

/* R (row-major) = Rz(z) Rx(x) Ry(y): the angles in radians, BVH's
 * "Zrotation Xrotation Yrotation" order (exposed for the tests). */
void hm_bvh_euler_zxy(const double R[9], double *z, double *x, double *y);

#endif
