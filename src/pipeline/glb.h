/* glb.h - the hands of a photo as a binary glTF 2.0 file: skinned MANO
 * meshes with the joint hierarchy and keypoints (glb.c says what is in it). */
#ifndef HM_GLB_H
#define HM_GLB_H

#include <stddef.h>
#include <stdint.h>
#include "hamer.h"
#include "model/model.h"

/* hands[0..n) (those with ok = 0 left out; none: a valid file with an empty
 * scene) into *out (malloc'd, *out_len bytes). 0, or HM_E_NOMEM with *out
 * NULL. generator: the asset's generator string. */
int hm_glb_hands(const hm_mano *mano, const hamer_hand *hands, int n, const char *generator, uint8_t **out,
                 size_t *out_len);

/* An animation being recorded: per track (a hand followed through a video)
 * its joint rotations and place at each frame, as hm_glb_anim_add receives
 * them (samples kept in a temporary file). On error NULL (message set). */
typedef struct hm_glb_anim hm_glb_anim;
hm_glb_anim *hm_glb_anim_new(void);
void hm_glb_anim_free(hm_glb_anim *a);
/* Hand h of track `track` at time_s (seconds; later than the track's last
 * sample, else left out). A hand without a result is skipped. 0 or HM_E_IO. */
int hm_glb_anim_add(hm_glb_anim *a, double time_s, int track, const hamer_hand *h);
/* The animated GLB: one skinned hand per track (bind shape from its first
 * sample's betas, no pose correctives), one animation "video" with every
 * joint's rotation and each hand node's translation (LINEAR) and scale
 * (STEP: 0 outside the frames it was tracked). */
int hm_glb_anim_write(hm_glb_anim *a, const hm_mano *mano, const char *generator, uint8_t **out, size_t *out_len);

#endif
