/* api.h - what the public layer (hamer.c) offers the programs built with
 * the static library beyond include/hamer.h: wrapping an internal model in
 * a public handle (the bench's in-memory synthetic model). Not exported
 * from the shared library. */
#ifndef HM_API_H
#define HM_API_H

#include "hamer.h"
#include "model/model.h"

/* The public handle owning m (freed by hamer_model_free); NULL (and m
 * freed) on allocation failure. */
hamer_model *hm_model_handle(hm_model *m);

/* The model handle a state was made from (NULL for NULL): what the photo
 * job (src/hamer_job.c) renders and writes meshes with. */
const hamer_model *hm_state_model(const hamer_state *st);
/* The internal model behind a handle (NULL for NULL): the tests of the
 * backend seam, and what the public files beside hamer.c (hamer_scene.c)
 * reach MANO through. */
const hm_model *hm_model_of(const hamer_model *model);

#endif
