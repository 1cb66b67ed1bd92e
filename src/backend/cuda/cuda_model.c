/* cuda_model.c - the weights uploaded once per model to one block of
 * device memory (hm_cu_layout's order), fp32 or, for the wide matmuls of
 * the fast precision, bf16 rounded on the host (nearest even, as the CPU
 * packs bf16). Each checkpoint view is reported done once uploaded. */
#include <stdlib.h>
#include <string.h>

#include "backend/cuda/cuda_internal.h"

typedef struct {
    hm_cu_model *m;
    const hm_weights *w;
    hm_cu_slot *slots;
    int n, next;
    uint16_t *stage;             /* host buffer for bf16 rounding */
    size_t stage_floats;
} uploader;

static uint16_t to_bf16(float v) {
    uint32_t u;
    memcpy(&u, &v, sizeof u);
    if ((u & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((u >> 16) | 0x40);
    u += 0x7fffu + ((u >> 16) & 1);
    return (uint16_t)(u >> 16);
}

/* The next slot gets n floats from src (rounded to bf16 if the slot is);
 * its device address in *dst. */
static int put(uploader *U, const float *src, size_t n, const void **dst) {
    if (U->next >= U->n) return hm_cu_err(HM_E_ARG, "cuda: layout has %d arrays, the model more", U->n);
    const hm_cu_slot *s = &U->slots[U->next++];
    if (s->bytes != n * (s->bf16 ? 2 : 4))
        return hm_cu_err(HM_E_ARG, "cuda: array '%s' has %zu bytes in the layout, %zu values given", s->name, s->bytes, n);
    char *d = (char *)U->m->block + s->offset;
    *dst = d;
    if (!s->bf16) return hm_cu_check(cudaMemcpy(d, src, s->bytes, cudaMemcpyHostToDevice), s->name);
    for (size_t i = 0; i < n; i += U->stage_floats) {
        size_t k = n - i < U->stage_floats ? n - i : U->stage_floats;
        for (size_t j = 0; j < k; j++) U->stage[j] = to_bf16(src[i + j]);
        int rc = hm_cu_check(cudaMemcpy(d + 2 * i, U->stage, 2 * k, cudaMemcpyHostToDevice), s->name);
        if (rc) return rc;
    }
    return HM_OK;
}

#define PUT(src, n, dst)                                                             \
    do {                                                                             \
        const void *p_;                                                              \
        int rc_ = put(U, src, n, &p_);                                               \
        if (rc_) return rc_;                                                         \
        memcpy(&(dst), &p_, sizeof p_);                                              \
    } while (0)
/* A checkpoint view: uploaded, then reported done. */
#define PUT_VIEW(lin, dst)                                                           \
    do {                                                                             \
        PUT((lin).w, (size_t)(lin).N * (lin).K, dst);                                \
        hm_weights_done(U->w, (lin).w, (size_t)(lin).N * (lin).K * sizeof(float));   \
    } while (0)

static int upload(uploader *U) {
    hm_cu_model *m = U->m;
    const hm_weights *w = U->w;
    const hm_config *c = &w->cfg;
    const size_t dim = (size_t)c->dim;
    PUT_VIEW(w->patch, m->patch);
    PUT(w->patch.b, dim, m->patch_b);
    PUT(w->patch_u8.w, dim * 768, m->patch_u8);
    PUT(w->pos, (size_t)c->ntok * dim, m->pos);
    PUT(w->u8_tok_bias, (size_t)c->ntok * dim, m->tokb);
    for (int l = 0; l < c->depth; l++) {
        const hm_vit_block_w *s = &w->blocks[l];
        hm_cu_block *b = &m->blocks[l];
        PUT(s->norm1_w, dim, b->n1w);
        PUT(s->norm1_b, dim, b->n1b);
        PUT_VIEW(s->qkv, b->qkv);
        PUT(s->qkv.b, 3 * dim, b->qkv_b);
        PUT_VIEW(s->proj, b->proj);
        PUT(s->proj.b, dim, b->proj_b);
        PUT(s->norm2_w, dim, b->n2w);
        PUT(s->norm2_b, dim, b->n2b);
        PUT_VIEW(s->fc1, b->fc1);
        PUT(s->fc1.b, (size_t)c->mlp, b->fc1_b);
        PUT_VIEW(s->fc2, b->fc2);
        PUT(s->fc2.b, dim, b->fc2_b);
    }
    PUT(w->last_norm_w, dim, m->ln_w);
    PUT(w->last_norm_b, dim, m->ln_b);
    PUT(w->x1, (size_t)c->hdim, m->x1);
    PUT(w->q1, (size_t)c->hinner, m->q1);
    PUT(w->kv_all.w, (size_t)w->kv_all.N * w->kv_all.K, m->kv_all);
    for (int l = 0; l < c->hdepth; l++) {
        const hm_head_layer_w *s = &w->layers[l];
        hm_cu_layer *H = &m->layers[l];
        const size_t d = (size_t)c->hdim;
        PUT(s->sa_norm_w, d, H->sa_nw);
        PUT(s->sa_norm_b, d, H->sa_nb);
        PUT(s->sa_v.w, (size_t)s->sa_v.N * s->sa_v.K, H->sa_v);
        hm_weights_done(w, s->sa_qkv_full, (size_t)3 * c->hinner * d * sizeof(float));
        PUT_VIEW(s->sa_out, H->sa_out);
        PUT(s->sa_out.b, d, H->sa_out_b);
        PUT(s->ca_norm_w, d, H->ca_nw);
        PUT(s->ca_norm_b, d, H->ca_nb);
        PUT_VIEW(s->ca_q, H->ca_q);
        PUT_VIEW(s->ca_out, H->ca_out);
        PUT(s->ca_out.b, d, H->ca_out_b);
        hm_weights_done(w, s->ca_kv.w, (size_t)s->ca_kv.N * s->ca_kv.K * sizeof(float)); /* stacked in kv_all */
        PUT(s->ff_norm_w, d, H->ff_nw);
        PUT(s->ff_norm_b, d, H->ff_nb);
        PUT_VIEW(s->ff1, H->ff1);
        PUT(s->ff1.b, (size_t)c->hmlp, H->ff1_b);
        PUT_VIEW(s->ff2, H->ff2);
        PUT(s->ff2.b, d, H->ff2_b);
    }
    const hm_linear *dec[3] = {&w->decpose, &w->decshape, &w->deccam};
    for (int i = 0; i < 3; i++) {
        PUT_VIEW(*dec[i], m->dec[i]);
        PUT(dec[i]->b, (size_t)dec[i]->N, m->dec_b[i]);
    }
    float init[HM_NRAW];
    memcpy(init, w->init_pose, sizeof w->init_pose);
    memcpy(init + HM_NJ * 6, w->init_betas, sizeof w->init_betas);
    memcpy(init + HM_NJ * 6 + HM_NB, w->init_cam, sizeof w->init_cam);
    PUT(init, HM_NRAW, m->init);
    if (U->next != U->n) return hm_cu_err(HM_E_ARG, "cuda: %d arrays uploaded, the layout has %d", U->next, U->n);
    return HM_OK;
}

void hm_cu_model_free(void *bm) {
    hm_cu_model *m = bm;
    if (!m) return;
    if (m->block) {
        cudaSetDevice(m->dev);
        cudaFree(m->block);
    }
    free(m->blocks);
    free(m->layers);
    free(m);
}

int hm_cu_pack(const hm_weights *w, int prec, int dev, void **bm) {
    *bm = NULL;
    int rc = hm_cu_check(cudaSetDevice(dev), "cudaSetDevice");
    if (rc) return rc;
    hm_cu_model *m = calloc(1, sizeof *m);
    uploader U = {.m = m, .w = w, .stage_floats = (size_t)1 << 20};
    if (m) {
        memcpy(m->cfg, &w->cfg, sizeof m->cfg);
        m->prec = prec, m->dev = dev, m->wide_bf16 = prec == HM_PREC_FAST;
        m->blocks = calloc((size_t)w->cfg.depth, sizeof *m->blocks);
        m->layers = calloc((size_t)w->cfg.hdepth, sizeof *m->layers);
        U.n = hm_cu_layout(m->cfg, prec, NULL, 0, &m->block_bytes);
        U.slots = calloc((size_t)U.n, sizeof *U.slots);
        U.stage = malloc(U.stage_floats * sizeof *U.stage);
    }
    if (!m || !m->blocks || !m->layers || !U.slots || !U.stage) {
        rc = hm_cu_err(HM_E_NOMEM, "cuda: out of host memory");
        goto out;
    }
    hm_cu_layout(m->cfg, prec, U.slots, U.n, &m->block_bytes);
    cudaError_t e = cudaMalloc(&m->block, m->block_bytes);
    if (e != cudaSuccess) {
        size_t free_b = 0, total_b = 0;
        cudaMemGetInfo(&free_b, &total_b);
        m->block = NULL;
        rc = hm_cu_err(e == cudaErrorMemoryAllocation ? HM_E_NOMEM : HM_E_UNSUPPORTED,
                       "cuda: uploading the model needs %zu bytes of device memory; cuda:%d has %zu free of %zu (%s)",
                       m->block_bytes, dev, free_b, total_b, cudaGetErrorString(e));
        goto out;
    }
    rc = upload(&U);
out:
    free(U.slots);
    free(U.stage);
    if (rc) hm_cu_model_free(m);
    else *bm = m;
    return rc;
}
