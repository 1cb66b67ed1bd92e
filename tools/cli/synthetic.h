/* synthetic.h - a random HaMeR model built in memory (`hamer bench --synthetic`).
 *
 * The tensors carry the official state-dict key names and shapes (fp32) and
 * go through the normal loader (hm_model_from_ckpt), so a synthetic model
 * exercises exactly the code a released checkpoint does; only the values are
 * random: Linear weights ~N(0, 0.02), LayerNorm weights ~1, small biases,
 * small readouts (std 0.002) around an identity pose and init_cam (0.9, 0, 0),
 * and plausible hand-shaped MANO buffers.
 */
#ifndef HM_SYNTHETIC_H
#define HM_SYNTHETIC_H

#include <stdint.h>
#include "hamer.h"

typedef struct hm_synthetic hm_synthetic;

/* Generate depth ViT blocks and head_depth decoder layers at the release
 * widths (32/6 is the full model, ~2.7 GB), plus MANO buffers. Values depend
 * on seed only (not on nthreads, which only spreads the work). HM_OK or an
 * error code (message via hm_errmsg()). */
int hm_synthetic_new(int depth, int head_depth, uint64_t seed, int nthreads, hm_synthetic **out);
void hm_synthetic_free(hm_synthetic *s);

/* Load the public model from s, as hamer_model_load does from a file
 * (precision: HAMER_PRECISION_*). NULL on failure (hamer_last_error()).
 * The model does not reference s afterwards. */
hamer_model *hm_synthetic_model(const hm_synthetic *s, int precision);
/* The same on a device ("cpu", "cuda:0"; NULL: the CPU). */
hamer_model *hm_synthetic_model_on(const hm_synthetic *s, int precision, const char *device);

#endif
