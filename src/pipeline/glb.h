/* glb.h - the hands of a photo as a binary glTF 2.0 file: skinned MANO
 * meshes with the joint hierarchy and keypoints (glb.c says what is in it). */
#ifndef HM_GLB_H
#define HM_GLB_H

#include <stddef.h>
#include <stdint.h>
#include "hamer.h"
#include "model/model.h"
#include "pipeline/anim.h"

/* hands[0..n) (those with ok = 0 left out; none: a valid file with an empty
 * scene) into *out (malloc'd, *out_len bytes). 0, or HM_E_NOMEM with *out
 * NULL. generator: the asset's generator string. */
int hm_glb_hands(const hm_mano *mano, const hamer_hand *hands, int n, const char *generator, uint8_t **out,
                 size_t *out_len);

/* The animated GLB of a recording (anim.h): one skinned hand per track
 * (bind shape from the track's betas, no pose correctives), one animation
 * "video" with every joint's rotation and each hand node's translation
 * (LINEAR) and scale (STEP: 0 outside the frames it was tracked); the
 * recording's fps, when given, in the scene's and the animation's extras. */
int hm_glb_anim_write(hm_anim *a, const hm_mano *mn, const char *generator, uint8_t **out, size_t *out_len);

#endif
