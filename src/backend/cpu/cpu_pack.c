/* cpu_pack.c - the CPU backend's packing: plain weights (hm_weights) ->
 * hm_cpu_model, every Linear in the kernels' layout of the active ISA
 * level (kernels/gemm.h), vectors copied, so nothing points into the
 * checkpoint afterwards.
 *
 * Precision: the backbone blocks' four matmuls and the head's stacked K/V
 * projection in the model's precision (the attention output projection as
 * hm_pack_weights_fast_sensitive packs it: int8 with fine weights, which
 * vit.c's centred call uses), the decoder layers' one-token matmuls in
 * bf16 where the CPU has it (hm_pack_weights_fast_bf16); the patch
 * embedding and the readout exact fp32.
 */
#include <stdlib.h>
#include <string.h>

#include "backend/cpu/cpu.h"
#include "core/util.h"

/* How a Linear is packed: exact fp32, the model's precision, or the
 * model's precision for a matmul that low precision hurts most. */
typedef enum { PACK_FP32, PACK_MODEL, PACK_SENSITIVE, PACK_BF16 } pack_kind;

typedef struct {
    const hm_weights *w;
    hm_precision prec;
} packer;

static int pack_as(const packer *P, hm_packed *p, const hm_linear *lin, pack_kind kind) {
    int rc;
    if (kind == PACK_FP32 || P->prec == HM_PREC_FP32) rc = hm_pack_weights(p, lin->w, lin->K, lin->b, lin->N, lin->K);
    else if (kind == PACK_BF16) rc = hm_pack_weights_fast_bf16(p, lin->w, lin->K, lin->b, lin->N, lin->K);
    else if (kind == PACK_SENSITIVE) rc = hm_pack_weights_fast_sensitive(p, lin->w, lin->K, lin->b, lin->N, lin->K);
    else rc = hm_pack_weights_prec(p, lin->w, lin->K, lin->b, lin->N, lin->K, P->prec);
    return rc;
}

/* Pack a checkpoint view and report it done. */
static int pack_view(const packer *P, hm_packed *p, const hm_linear *lin, pack_kind kind) {
    int rc = pack_as(P, p, lin, kind);
    if (!rc) hm_weights_done(P->w, lin->w, (size_t)lin->N * lin->K * sizeof(float));
    return rc;
}

/* An owned copy of n floats into *dst. */
static int copy(float **dst, const float *src, size_t n) {
    if (!(*dst = hm_alloc(n * sizeof(float)))) return HM_E_NOMEM;
    memcpy(*dst, src, n * sizeof(float));
    return HM_OK;
}

static int pack_backbone(const packer *P, hm_cpu_model *m) {
    const hm_weights *w = P->w;
    const hm_config *c = &w->cfg;
    int rc;
    if ((rc = pack_as(P, &m->patch, &w->patch, PACK_FP32))) return rc;
    if ((rc = pack_as(P, &m->patch_u8, &w->patch_u8, PACK_FP32))) return rc;
    hm_weights_done(w, w->patch.w, (size_t)w->patch.N * w->patch.K * sizeof(float));
    if ((rc = copy(&m->pos, w->pos, (size_t)c->ntok * c->dim))) return rc;
    if ((rc = copy(&m->u8_tok_bias, w->u8_tok_bias, (size_t)c->ntok * c->dim))) return rc;
    if (!(m->blocks = calloc(c->depth, sizeof *m->blocks))) return hm_err(HM_E_NOMEM, "out of memory");
    for (int l = 0; l < c->depth; l++) {
        const hm_vit_block_w *s = &w->blocks[l];
        hm_vit_block *b = &m->blocks[l];
        if ((rc = copy(&b->norm1_w, s->norm1_w, c->dim)) || (rc = copy(&b->norm1_b, s->norm1_b, c->dim)) ||
            (rc = copy(&b->norm2_w, s->norm2_w, c->dim)) || (rc = copy(&b->norm2_b, s->norm2_b, c->dim)))
            return rc;
        if ((rc = pack_view(P, &b->qkv, &s->qkv, PACK_MODEL))) return rc;
        if ((rc = pack_view(P, &b->proj, &s->proj, PACK_SENSITIVE))) return rc;
        if ((rc = pack_view(P, &b->fc1, &s->fc1, PACK_MODEL))) return rc;
        if ((rc = pack_view(P, &b->fc2, &s->fc2, PACK_MODEL))) return rc;
    }
    if ((rc = copy(&m->last_norm_w, w->last_norm_w, c->dim)) || (rc = copy(&m->last_norm_b, w->last_norm_b, c->dim)))
        return rc;
    return HM_OK;
}

static int pack_head(const packer *P, hm_cpu_model *m) {
    const hm_weights *w = P->w;
    const hm_config *c = &w->cfg;
    int d = c->hdim, in = c->hinner, rc;
    if ((rc = copy(&m->token0, w->token0, d)) || (rc = copy(&m->x1, w->x1, d)) || (rc = copy(&m->q1, w->q1, in)))
        return rc;
    if (!(m->layers = calloc(c->hdepth, sizeof *m->layers))) return hm_err(HM_E_NOMEM, "out of memory");
    for (int l = 0; l < c->hdepth; l++) {
        const hm_head_layer_w *s = &w->layers[l];
        hm_head_layer *H = &m->layers[l];
        if ((rc = copy(&H->sa_norm_w, s->sa_norm_w, d)) || (rc = copy(&H->sa_norm_b, s->sa_norm_b, d)) ||
            (rc = copy(&H->ca_norm_w, s->ca_norm_w, d)) || (rc = copy(&H->ca_norm_b, s->ca_norm_b, d)) ||
            (rc = copy(&H->ff_norm_w, s->ff_norm_w, d)) || (rc = copy(&H->ff_norm_b, s->ff_norm_b, d)))
            return rc;
        if ((rc = copy(&H->sa_qkv_full, s->sa_qkv_full, (size_t)3 * in * d))) return rc;
        /* The one-token matmuls stream their weights once per pass for a
         * few rows: in bf16, half the bytes. Not int8: with them in int8
         * the keypoints of one full-size synthetic crop in eight went
         * over the fast gate's 1 mm (1.02; vertices 0.37 -> 0.45 mm mean),
         * in bf16 0.39 mm (worst crop 0.58). */
        if ((rc = pack_as(P, &H->sa_v, &s->sa_v, PACK_BF16))) return rc;
        hm_weights_done(w, s->sa_qkv_full, (size_t)3 * in * d * sizeof(float));
        if ((rc = pack_view(P, &H->sa_out, &s->sa_out, PACK_BF16))) return rc;
        if ((rc = pack_view(P, &H->ca_q, &s->ca_q, PACK_BF16))) return rc;
        if ((rc = pack_view(P, &H->ca_out, &s->ca_out, PACK_BF16))) return rc;
        if ((rc = pack_view(P, &H->ca_kv, &s->ca_kv, PACK_FP32))) return rc;
        if ((rc = pack_view(P, &H->ff1, &s->ff1, PACK_BF16))) return rc;
        if ((rc = pack_view(P, &H->ff2, &s->ff2, PACK_BF16))) return rc;
    }
    /* The context's K/V projection is most of the head's FLOPs (one
     * [T, dim] x [dim, hdepth*2*inner] GEMM): in the model's precision, as
     * the blocks' matmuls are; the rest of the head works on one token. */
    if ((rc = pack_as(P, &m->kv_all, &w->kv_all, PACK_MODEL))) return rc;
    if ((rc = pack_view(P, &m->decpose, &w->decpose, PACK_FP32))) return rc;
    if ((rc = pack_view(P, &m->decshape, &w->decshape, PACK_FP32))) return rc;
    if ((rc = pack_view(P, &m->deccam, &w->deccam, PACK_FP32))) return rc;
    memcpy(m->init_pose, w->init_pose, sizeof m->init_pose);
    memcpy(m->init_betas, w->init_betas, sizeof m->init_betas);
    memcpy(m->init_cam, w->init_cam, sizeof m->init_cam);
    return HM_OK;
}

/* A failed packing's arrays, freed through the enumeration (a matrix or
 * array not reached yet is still zero). */
static int free_matrix(hm_visitor *v, const char *name, hm_packed *p, int N, int K, int bias, slot_kind kind) {
    hm_packed_free(p);
    return HM_OK;
}

static int free_array(hm_visitor *v, const char *name, void *field, size_t bytes) {
    void *p;
    memcpy(&p, field, sizeof p);
    hm_free(p);
    memset(field, 0, sizeof p);
    return HM_OK;
}

static int free_embedded(hm_visitor *v, const char *name, void *data, size_t bytes) { return HM_OK; }

int hm_cpu_pack(const hm_weights *w, int precision, hm_cpu_model **out) {
    *out = NULL;
    hm_cpu_model *m = calloc(1, sizeof *m);
    if (!m) return hm_err(HM_E_NOMEM, "out of memory");
    m->cfg = w->cfg;
    m->precision = precision;
    packer P = {w, (hm_precision)precision};
    int rc = pack_backbone(&P, m);
    if (!rc) rc = pack_head(&P, m);
    if (rc) {
        hm_visitor fv = {free_matrix, free_array, free_embedded};
        hm_cpu_visit(m, &m->cfg, &fv);
        free(m->blocks);
        free(m->layers);
        free(m);
        return rc;
    }
    *out = m;
    return HM_OK;
}
