/* mano_head.c - the MANO transformer-decoder head and its readout.
 *
 * One query token cross-attends to the 192 backbone tokens through 6 layers
 *   x += SA(LN(x)); x += CA(LN(x), ctx); x += FF(LN(x))      (LN eps 1e-5)
 * then decpose / decshape / deccam are added to the init_* buffers and the
 * 6D pose becomes 16 rotation matrices.
 *
 * Exact shortcuts (each checked against the textbook form, s->ctl->plain):
 *  - the input token is constant (Linear(1,.) of a zero), and so is layer 0's
 *    self-attention and layer 0's cross-attention query: precomputed at load;
 *  - with one token, softmax over one score is exactly 1, so SA(h) is
 *    to_out(h . Wv^T): the q and k projections are dead work;
 *  - the context is the same for every layer, so the K/V projections of all
 *    layers are one [T, dim] x [dim, 6*2*inner] GEMM.
 */
#include <math.h>
#include <string.h>
#include "core/util.h"
#include "backend/cpu/cpu.h"

#define LN_EPS 1e-5f

typedef struct {
    hm_cpu_state *s;
    const float *kv;   /* K of this layer at kv[t*ldkv], V at kv[t*ldkv + inner] */
    int ldkv;
} ca_job;

/* One (crop, head) of cross-attention: softmax(q.K^T / 8) . V over ntok. */
static void ca_task(void *ctx, int task, int tid) {
    ca_job *j = ctx;
    hm_cpu_state *s = j->s;
    const hm_config *c = &s->m->cfg;
    int b = task / c->hheads, hd = task % c->hheads, n = c->ntok;
    const float *q = s->hq + (size_t)b * c->hinner + hd * HM_DEC_HEAD_DIM;
    const float *K = j->kv + (size_t)b * n * j->ldkv + hd * HM_DEC_HEAD_DIM;
    const float *V = K + c->hinner;
    float *sc = s->hscore + (size_t)tid * n;
    float *o = s->ha + (size_t)b * c->hinner + hd * HM_DEC_HEAD_DIM;
    float scale = 1.0f / sqrtf((float)HM_DEC_HEAD_DIM);
    hm_sgemm_nt(1, n, HM_DEC_HEAD_DIM, scale, q, HM_DEC_HEAD_DIM, K, j->ldkv, 0.0f, sc, n);
    hm_softmax(sc, n);
    hm_sgemm_nn(1, HM_DEC_HEAD_DIM, n, 1.0f, sc, n, V, j->ldkv, 0.0f, o, HM_DEC_HEAD_DIM);
}

/* Textbook single-token self-attention: q, k, v, softmax over one score. */
static void sa_plain(hm_cpu_state *s, const hm_head_layer *L, int B) {
    const hm_config *c = &s->m->cfg;
    int in = c->hinner, hd = HM_DEC_HEAD_DIM;
    for (int b = 0; b < B; b++) {
        const float *h = s->hh + (size_t)b * c->hdim;
        float *qkv = s->hsa + (size_t)b * 3 * in;
        hm_sgemm_nt(1, 3 * in, c->hdim, 1.0f, h, c->hdim, L->sa_qkv_full, c->hdim, 0.0f, qkv, 3 * in);
        for (int head = 0; head < c->hheads; head++) {
            const float *q = qkv + head * hd, *k = qkv + in + head * hd, *v = qkv + 2 * in + head * hd;
            float score = 0;
            for (int i = 0; i < hd; i++) score += q[i] * k[i];
            score /= sqrtf((float)hd);
            hm_softmax(&score, 1);
            for (int i = 0; i < hd; i++) s->ha[(size_t)b * in + head * hd + i] = score * v[i];
        }
    }
}

int hm_head_forward(hm_cpu_state *s, int B, float *params) {
    const hm_cpu_model *m = s->m;
    const hm_config *c = &m->cfg;
    int T = B * c->ntok, in = c->hinner, d = c->hdim;
    const float *kv;
    int ldkv, rc;
    if (!s->ctl->plain) {
        if ((rc = hm_gemm(s->pool, T, s->x, c->dim, &m->kv_all, s->kv, c->hdepth * 2 * in, HM_EPI_STORE))) return rc;
        ldkv = c->hdepth * 2 * in;
    } else {
        ldkv = 2 * in;
    }
    for (int b = 0; b < B; b++) memcpy(s->hx + (size_t)b * d, s->ctl->plain ? m->token0 : m->x1, d * sizeof(float));

    for (int l = 0; l < c->hdepth; l++) {
        const hm_head_layer *L = &m->layers[l];
        int first = l == 0 && !s->ctl->plain;
        /* The LayerNorms are their matmul's prologue (kernels/gemm.h; s->hh
         * holds the normalised rows where a packing needs them written). */
        hm_gemm_opts o = {.epi = HM_EPI_STORE, .ln_w = L->sa_norm_w, .ln_b = L->sa_norm_b, .ln_eps = LN_EPS,
                          .ln_out = s->hh, .ld_ln = d};
        if (!first) {
            if (s->ctl->plain) {
                hm_layernorm(s->hx, s->hh, B, d, L->sa_norm_w, L->sa_norm_b, LN_EPS);
                sa_plain(s, L, B);
                if ((rc = hm_gemm(s->pool, B, s->ha, in, &L->sa_out, s->hx, d, HM_EPI_ACCUM))) return rc;
            } else {
                if ((rc = hm_gemm_ex(s->pool, B, s->hx, d, &L->sa_v, s->ha, in, &o))) return rc;
                if ((rc = hm_gemm(s->pool, B, s->ha, in, &L->sa_out, s->hx, d, HM_EPI_ACCUM))) return rc;
            }
        }
        if (first) {
            for (int b = 0; b < B; b++) memcpy(s->hq + (size_t)b * in, m->q1, in * sizeof(float));
        } else {
            o.ln_w = L->ca_norm_w, o.ln_b = L->ca_norm_b;
            if ((rc = hm_gemm_ex(s->pool, B, s->hx, d, &L->ca_q, s->hq, in, &o))) return rc;
        }
        if (s->ctl->plain) {
            if ((rc = hm_gemm(s->pool, T, s->x, c->dim, &L->ca_kv, s->hkv1, 2 * in, HM_EPI_STORE))) return rc;
            kv = s->hkv1;
        } else {
            kv = s->kv + (size_t)l * 2 * in;
        }
        ca_job cj = {s, kv, ldkv};
        hm_pool_run(s->pool, ca_task, &cj, B * c->hheads);
        if ((rc = hm_gemm(s->pool, B, s->ha, in, &L->ca_out, s->hx, d, HM_EPI_ACCUM))) return rc;

        o.epi = HM_EPI_GELU, o.ln_w = L->ff_norm_w, o.ln_b = L->ff_norm_b;
        if ((rc = hm_gemm_ex(s->pool, B, s->hx, d, &L->ff1, s->hf, c->hmlp, &o))) return rc;
        if ((rc = hm_gemm(s->pool, B, s->hf, c->hmlp, &L->ff2, s->hx, d, HM_EPI_ACCUM))) return rc;
    }

    /* Readout: [pose 96 | betas 10 | cam 3] per crop. */
    const int ld = HM_NRAW;
    if ((rc = hm_gemm(s->pool, B, s->hx, d, &m->decpose, s->pose6d, ld, HM_EPI_STORE))) return rc;
    if ((rc = hm_gemm(s->pool, B, s->hx, d, &m->decshape, s->pose6d + HM_NJ * 6, ld, HM_EPI_STORE))) return rc;
    if ((rc = hm_gemm(s->pool, B, s->hx, d, &m->deccam, s->pose6d + HM_NJ * 6 + HM_NB, ld, HM_EPI_STORE))) return rc;
    for (int b = 0; b < B; b++) {
        float *r = s->pose6d + (size_t)b * ld;
        for (int i = 0; i < HM_NJ * 6; i++) r[i] += m->init_pose[i];
        for (int i = 0; i < HM_NB; i++) r[HM_NJ * 6 + i] += m->init_betas[i];
        for (int i = 0; i < 3; i++) r[HM_NJ * 6 + HM_NB + i] += m->init_cam[i];
    }
    hm_raw_to_params(s->pose6d, params, B);
    return HM_OK;
}
