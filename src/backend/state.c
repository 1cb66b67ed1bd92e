/* state.c - a model and a per-request state over their backend
 * (backend/backend.h): the host buffers here, the rest the backend's. */
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "backend/backend.h"
#include "core/util.h"

const char *const hm_stage_names[HM_ST_COUNT] = {
    "patch_embed", "layernorm", "qkv", "attention", "proj", "fc1_gelu", "fc2", "head", "mano", "finalise",
};

int hm_state_init(hm_state *s, const hm_model *m, int max_batch, int nthreads) {
    memset(s, 0, sizeof *s);
    s->m = m;
    s->max_batch = max_batch;
    s->nthreads = nthreads;
    s->params = hm_alloc((size_t)max_batch * HM_NPARAMS * sizeof(float));
    s->verts = hm_alloc((size_t)HM_NV * 3 * sizeof(float));
    if (!s->params || !s->verts) {
        hm_state_release(s);
        return HM_E_NOMEM;
    }
    memset(s->params, 0, (size_t)max_batch * HM_NPARAMS * sizeof(float));
    memset(s->verts, 0, (size_t)HM_NV * 3 * sizeof(float));
    int rc = m->be->state_new(m->bm, &m->cfg, m->precision, m->device, max_batch, nthreads, &s->ctl, &s->bs);
    if (rc) {
        s->bs = NULL;
        hm_state_release(s);
        return rc;
    }
    return HM_OK;
}

void hm_state_release(hm_state *s) {
    if (s->bs) s->m->be->state_free(s->bs);
    hm_free(s->params);
    hm_free(s->verts);
    memset(s, 0, sizeof *s);
}

/* ---- freeing a model ---------------------------------------------------- */

/* Arrays inside the packed file's mapping belong to the mapping. */
static void release(const hm_model *m, void *p) {
    const uint8_t *u = p, *b = m->pack_map;
    if (p && !(b && u >= b && u < b + m->pack_len)) hm_free(p);
}

typedef struct {
    hm_visitor v;
    const hm_model *m;
} free_visitor;

static int free_matrix(hm_visitor *v, const char *name, hm_packed *p, int N, int K, int bias, slot_kind kind) {
    const hm_model *m = ((free_visitor *)v)->m;
    release(m, p->w), release(m, p->bias), release(m, p->lp), release(m, p->lp_scale);
    memset(p, 0, sizeof *p);
    return HM_OK;
}

static int free_array(hm_visitor *v, const char *name, void *field, size_t bytes) {
    void *p;
    memcpy(&p, field, sizeof p);
    release(((free_visitor *)v)->m, p);
    memset(field, 0, sizeof p);
    return HM_OK;
}

static int free_embedded(hm_visitor *v, const char *name, void *data, size_t bytes) { return HM_OK; }

void hm_model_free(hm_model *m) {
    if (!m) return;
    free_visitor fv = {.v = {free_matrix, free_array, free_embedded}, .m = m};
    if (m->bm) {
        if (m->be->visit) m->be->visit(m->bm, &m->cfg, &fv.v);
        m->be->model_free(m->bm);
    }
    if (m->has_mano) {
        hm_mano *mn = &m->mano;
        void *arrays[] = {mn->v_template, mn->shapedirs, mn->posedirs, mn->j_regressor, mn->lbs_weights, mn->faces};
        for (size_t i = 0; i < sizeof arrays / sizeof arrays[0]; i++) release(m, arrays[i]);
    }
    if (m->pack_map && m->pack_unmap) munmap((void *)m->pack_map, m->pack_len);
    free(m);
}
