/* weights.c - the plain weights' bookkeeping (model/model.h: hm_weights). */
#include <stdlib.h>
#include <string.h>

#include "model/model.h"

void hm_weights_release(hm_weights *w) {
    for (size_t i = 0; i < sizeof w->owned / sizeof w->owned[0]; i++) hm_free(w->owned[i]);
    free(w->blocks);
    free(w->layers);
    memset(w, 0, sizeof *w);
}

size_t hm_weights_view_bytes(const hm_weights *w) {
    const hm_config *c = &w->cfg;
    size_t n = (size_t)w->patch.N * w->patch.K;
    for (int l = 0; w->blocks && l < c->depth; l++) {
        const hm_vit_block_w *b = &w->blocks[l];
        n += (size_t)b->qkv.N * b->qkv.K + (size_t)b->proj.N * b->proj.K + (size_t)b->fc1.N * b->fc1.K +
             (size_t)b->fc2.N * b->fc2.K;
    }
    for (int l = 0; w->layers && l < c->hdepth; l++) {
        const hm_head_layer_w *H = &w->layers[l];
        n += (size_t)3 * c->hinner * c->hdim + (size_t)H->sa_out.N * H->sa_out.K + (size_t)H->ca_q.N * H->ca_q.K +
             (size_t)H->ca_out.N * H->ca_out.K + (size_t)H->ca_kv.N * H->ca_kv.K + (size_t)H->ff1.N * H->ff1.K +
             (size_t)H->ff2.N * H->ff2.K;
    }
    n += (size_t)(w->decpose.N + w->decshape.N + w->deccam.N) * c->hdim;
    return n * sizeof(float);
}
