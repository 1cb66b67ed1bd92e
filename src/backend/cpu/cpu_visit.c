/* cpu_visit.c - the one enumeration of a CPU model's arrays, in the packed
 * model file's order: the packed file's writer and reader and the model's
 * freeing all walk it (load/model_pack*.c, backend/state.c), so a new
 * field cannot be written but not read, or read but not freed. */
#include <stdio.h>

#include "backend/cpu/cpu.h"

/* Sizes come from the config alone (the reader checks the file against
 * them); N values are computed in int, which the config check
 * (load/model_check.c) keeps from overflowing. */
int hm_cpu_visit(hm_cpu_model *m, const hm_config *c, hm_visitor *v) {
    const size_t F = sizeof(float), K0 = 3 * HM_PATCH * HM_PATCH;
    char n[64];
    int rc;
#define NAME(...) (snprintf(n, sizeof n, __VA_ARGS__), n)
#define MAT(p, N, K, bias, kind, ...) \
    if ((rc = v->matrix(v, NAME(__VA_ARGS__), p, N, K, bias, kind))) return rc
#define ARR(field, bytes, ...) \
    if ((rc = v->array(v, NAME(__VA_ARGS__), &(field), bytes))) return rc
#define EMB(arr, ...) \
    if ((rc = v->embedded(v, NAME(__VA_ARGS__), arr, sizeof(arr)))) return rc
    MAT(&m->patch, c->dim, (int)K0, 1, SLOT_FP32, "patch");
    MAT(&m->patch_u8, c->dim, (int)K0, 1, SLOT_FP32, "patch_u8");
    ARR(m->pos, (size_t)c->ntok * c->dim * F, "pos");
    ARR(m->u8_tok_bias, (size_t)c->ntok * c->dim * F, "u8_tok_bias");
    for (int l = 0; m->blocks && l < c->depth; l++) {
        hm_vit_block *b = &m->blocks[l];
        ARR(b->norm1_w, c->dim * F, "blocks.%d.norm1_w", l);
        ARR(b->norm1_b, c->dim * F, "blocks.%d.norm1_b", l);
        MAT(&b->qkv, 3 * c->dim, c->dim, 1, SLOT_MODEL, "blocks.%d.qkv", l);
        MAT(&b->proj, c->dim, c->dim, 1, SLOT_SENSITIVE, "blocks.%d.proj", l);
        ARR(b->norm2_w, c->dim * F, "blocks.%d.norm2_w", l);
        ARR(b->norm2_b, c->dim * F, "blocks.%d.norm2_b", l);
        MAT(&b->fc1, c->mlp, c->dim, 1, SLOT_MODEL, "blocks.%d.fc1", l);
        MAT(&b->fc2, c->dim, c->mlp, 1, SLOT_MODEL, "blocks.%d.fc2", l);
    }
    ARR(m->last_norm_w, c->dim * F, "last_norm_w");
    ARR(m->last_norm_b, c->dim * F, "last_norm_b");
    ARR(m->token0, c->hdim * F, "token0");
    ARR(m->x1, c->hdim * F, "x1");
    ARR(m->q1, c->hinner * F, "q1");
    MAT(&m->kv_all, c->hdepth * 2 * c->hinner, c->dim, 0, SLOT_MODEL, "kv_all");
    for (int l = 0; m->layers && l < c->hdepth; l++) {
        hm_head_layer *H = &m->layers[l];
        ARR(H->sa_norm_w, c->hdim * F, "layers.%d.sa_norm_w", l);
        ARR(H->sa_norm_b, c->hdim * F, "layers.%d.sa_norm_b", l);
        MAT(&H->sa_v, c->hinner, c->hdim, 0, SLOT_BF16, "layers.%d.sa_v", l);
        MAT(&H->sa_out, c->hdim, c->hinner, 1, SLOT_BF16, "layers.%d.sa_out", l);
        ARR(H->sa_qkv_full, (size_t)3 * c->hinner * c->hdim * F, "layers.%d.sa_qkv_full", l);
        ARR(H->ca_norm_w, c->hdim * F, "layers.%d.ca_norm_w", l);
        ARR(H->ca_norm_b, c->hdim * F, "layers.%d.ca_norm_b", l);
        MAT(&H->ca_q, c->hinner, c->hdim, 0, SLOT_BF16, "layers.%d.ca_q", l);
        MAT(&H->ca_out, c->hdim, c->hinner, 1, SLOT_BF16, "layers.%d.ca_out", l);
        MAT(&H->ca_kv, 2 * c->hinner, c->dim, 0, SLOT_FP32, "layers.%d.ca_kv", l);
        ARR(H->ff_norm_w, c->hdim * F, "layers.%d.ff_norm_w", l);
        ARR(H->ff_norm_b, c->hdim * F, "layers.%d.ff_norm_b", l);
        MAT(&H->ff1, c->hmlp, c->hdim, 1, SLOT_BF16, "layers.%d.ff1", l);
        MAT(&H->ff2, c->hdim, c->hmlp, 1, SLOT_BF16, "layers.%d.ff2", l);
    }
    MAT(&m->decpose, HM_NJ * 6, c->hdim, 1, SLOT_FP32, "decpose");
    MAT(&m->decshape, HM_NB, c->hdim, 1, SLOT_FP32, "decshape");
    MAT(&m->deccam, 3, c->hdim, 1, SLOT_FP32, "deccam");
    EMB(m->init_pose, "init_pose");
    EMB(m->init_betas, "init_betas");
    EMB(m->init_cam, "init_cam");
    return HM_OK;
#undef NAME
#undef MAT
#undef ARR
#undef EMB
}

