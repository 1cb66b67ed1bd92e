/* model_check.h - the validation both loaders (checkpoint and packed file)
 * apply, and the MANO buffers they share (mano_load.c). */
#ifndef HM_LOAD_MODEL_CHECK_H
#define HM_LOAD_MODEL_CHECK_H

#include "model/model.h"

struct hm_ckpt;

/* Depth limit of both loaders (a checkpoint's tensor limit bounds its
 * depths the same way). */
#define HM_MAX_DEPTH 65536

/* c is a configuration this code can run: widths, head sizes, the token
 * grid of a 256x192 crop, depths in 1..HM_MAX_DEPTH, derived fields
 * consistent, sizes whose products fit an int. `code` is the error to
 * return (HM_E_SHAPE for a checkpoint, HM_E_FORMAT for a packed file). */
int hm_config_check(const hm_config *c, const char *src, int code);

/* Every MANO value finite, parents a kinematic tree (parents[0] = -1,
 * parents[j] < j), face, fingertip and joint-map indices in range. */
int hm_mano_check(const hm_mano *mn, const char *src);

/* MANO from the checkpoint's mano.* buffers (HM_OK with *found = 0 when it
 * has none) or from an .npz with the same arrays (no prefix). On error
 * nothing is left allocated in mn. */
int hm_mano_from_ckpt(struct hm_ckpt *ck, const char *src, hm_mano *mn, int *found);
int hm_mano_from_npz(const char *path, hm_mano *mn);
void hm_mano_release(hm_mano *mn);

#endif
