/* hamer_impl.h - the insides of the public handles, shared by the files
 * of the public API (src/hamer.c, hamer_detect.c, hamer_video.c, ...):
 * internal, never installed. */
#ifndef HM_HAMER_IMPL_H
#define HM_HAMER_IMPL_H

#include "core/pool.h"
#include "detect/detect.h"
#include "hamer.h"
#include "model/model.h"
#include "pipeline/predict.h"

struct hamer_model {
    hm_model *m;
    char device[32];     /* hm_device_name of its device (hamer_model_info.device) */
};

struct hamer_state {
    hm_state s;
    hm_predict_ws pws;   /* image pipeline buffers (hamer_predict) */
    const hamer_model *model; /* the handle it was made from (hamer_job's documents) */
};

struct hamer_detector {
    hm_det_model *m;
    int lite;
    int body;          /* the body pass's models are loaded */
    int body_mode;     /* hamer_detector_params.body */
    int props;         /* the proposal pass's model is loaded */
    int props_mode;    /* hamer_detector_params.proposals */
    char dir[4096];
};

struct hamer_detect_state {
    hm_det_state *s;
    hm_pool *pool;
    const hamer_detector *d;
};

#endif
