/* cpu_state.c - the CPU backend's per-request buffers: everything a
 * forward writes, allocated once, and its thread pool. */
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "backend/cpu/cpu.h"
#include "core/util.h"
#include "kernels/attn.h"

int hm_cpu_state_init(hm_cpu_state *s, const hm_cpu_model *m, int max_batch, int nthreads, hm_run_ctl *ctl) {
    memset(s, 0, sizeof *s);
    const hm_config *c = &m->cfg;
    s->m = m;
    s->ctl = ctl;
    s->max_batch = max_batch;
    s->nthreads = nthreads;
    size_t T = (size_t)max_batch * c->ntok, B = max_batch;
    /* A row stride that is a multiple of 2 KiB (5120 floats = 5 x 4 KiB)
     * puts the same k of every row of a 12-row GEMM tile in one L1 set,
     * more rows than the cache has ways: fc2 ran ~10% slower for it. */
    s->mlp_ld = c->mlp % 512 == 0 ? c->mlp + 16 : c->mlp;
    struct {
        float **p;
        size_t n;
    } bufs[] = {
        {&s->cols, T * 3 * HM_PATCH * HM_PATCH},
        {&s->x, T * c->dim},
        {&s->h, T * c->dim},
        {&s->qkv, T * 3 * c->dim},
        {&s->att, T * c->dim},
        {&s->mlp, T * s->mlp_ld},
        {&s->scores, (size_t)nthreads * c->ntok * c->ntok},
        {&s->kv, T * c->hdepth * 2 * c->hinner},
        {&s->hx, B * c->hdim},
        {&s->hh, B * c->hdim},
        {&s->hq, B * c->hinner},
        {&s->ha, B * c->hinner},
        {&s->hf, B * c->hmlp},
        {&s->hscore, (size_t)nthreads * c->ntok},
        {&s->hkv1, T * 2 * c->hinner},
        {&s->hsa, B * 3 * c->hinner},
        {&s->pose6d, B * (HM_NJ * 6 + HM_NB + 3)},
        {&s->img, B * 3 * HAMER_CROP_H * HAMER_CROP_W},
    };
    for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++) {
        if (!(*bufs[i].p = hm_alloc(bufs[i].n * sizeof(float)))) {
            hm_cpu_state_release(s);
            return HM_E_NOMEM;
        }
        memset(*bufs[i].p, 0, bufs[i].n * sizeof(float));
    }
    /* The attention kernel is chosen once per state (an error here, e.g. a
     * bad HAMER_ATTN, is the caller's before any forward runs). The exact
     * precision keeps its only path. */
    if (m->precision == HM_PREC_FAST) {
        int rc = hm_attention_fast_choose(c->ntok, HM_VIT_HEAD_DIM, (size_t)c->ntok * c->ntok, &s->attn_mode);
        if (rc) {
            hm_cpu_state_release(s);
            return rc;
        }
    }
    if (!(s->pool = hm_pool_create(nthreads))) {
        hm_cpu_state_release(s);
        return HM_E_NOMEM;
    }
    /* The low-precision matmuls quantise their input into the pool's
     * scratch: reserve the largest now, so a forward allocates nothing. */
    size_t scratch = 0;
    for (int l = 0; l < c->depth; l++) {
        const hm_packed *mats[] = {&m->blocks[l].qkv, &m->blocks[l].proj, &m->blocks[l].fc1, &m->blocks[l].fc2};
        for (int k = 0; k < 4; k++) {
            size_t n = hm_gemm_scratch_bytes(mats[k], (int)T);
            scratch = n > scratch ? n : scratch;
        }
    }
    {
        size_t n = hm_gemm_scratch_bytes(&m->kv_all, (int)T);
        scratch = n > scratch ? n : scratch;
    }
    if (hm_pool_reserve(s->pool, scratch)) {
        hm_cpu_state_release(s);
        return HM_E_NOMEM;
    }
    return HM_OK;
}

void hm_cpu_state_release(hm_cpu_state *s) {
    float *bufs[] = {s->cols, s->x, s->h, s->qkv, s->att, s->mlp, s->scores, s->kv, s->hx, s->hh,
                     s->hq, s->ha, s->hf, s->hscore, s->hkv1, s->hsa, s->pose6d, s->img};
    for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++) hm_free(bufs[i]);
    hm_pool_destroy(s->pool);
    memset(s, 0, sizeof *s);
}
