/* predict.h - image + boxes -> hands (internal side of hamer_predict). */
#ifndef HM_PREDICT_H
#define HM_PREDICT_H

#include "hamer.h"
#include "model/model.h"

/* Per-state buffers for up to `cap` hands, grown once to the largest request
 * seen (at most HAMER_MAX_HANDS), then reused. */
typedef struct {
    int cap;
    float *crops;    /* [cap, 3, 256, 192] */
    float *params;   /* [cap, 157] */
    float *verts;    /* [cap, 778, 3] */
    float *kp3d;     /* [cap, 21, 3] */
    int *index;      /* crop j -> hand index */
} hm_predict_ws;

int hm_predict_ws_reserve(hm_predict_ws *ws, int n);
void hm_predict_ws_free(hm_predict_ws *ws);
/* hamer_predict's body: crops of every valid box, one forward on st, the
 * full-image results. p must not be NULL. */
int hm_predict(hm_predict_ws *ws, hm_state *st, const uint8_t *rgb, int w, int h, const hamer_box *boxes, int n,
               const hamer_predict_params *p, hamer_hand *hands, hamer_timings *tm);

#endif
