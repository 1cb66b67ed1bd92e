/* vit.c - the ViT-H/16 backbone blocks (pre-norm), then last_norm.
 *
 *   x += proj(attn(LN1(x)))       attn: 16 heads of 80, softmax(q k^T / sqrt 80) v
 *   x += fc2(GELU(fc1(LN2(x))))   exact erf GELU, fused into fc1's epilogue
 *
 * The residual adds are fused into the proj and fc2 GEMM epilogues, LN1
 * and LN2 into the qkv and fc1 GEMMs' prologues. The
 * output (192 tokens x dim per crop, after last_norm) is left in s->x: it is
 * the context the MANO head cross-attends to.
 */
#include <math.h>
#include "core/util.h"
#include "kernels/attn.h"
#include "backend/cpu/cpu.h"

typedef struct {
    hm_cpu_state *s;
    const float *w, *b;
    const float *in;
    float *out;
    int rows, d;
    float eps;
} ln_job;

#define LN_CHUNK 16

static void ln_task(void *ctx, int task, int tid) {
    ln_job *j = ctx;
    int r0 = task * LN_CHUNK, n = j->rows - r0 < LN_CHUNK ? j->rows - r0 : LN_CHUNK;
    hm_layernorm(j->in + (size_t)r0 * j->d, j->out + (size_t)r0 * j->d, n, j->d, j->w, j->b, j->eps);
}

/* LayerNorm of `rows` rows, spread over the pool. */
static void layernorm_par(hm_cpu_state *s, const float *in, float *out, int rows, int d,
                          const float *w, const float *b, float eps) {
    ln_job j = {s, w, b, in, out, rows, d, eps};
    hm_pool_run(s->pool, ln_task, &j, (rows + LN_CHUNK - 1) / LN_CHUNK);
}

typedef struct {
    hm_cpu_state *s;
    int B, mode; /* HM_ATTN_* */
} attn_job;

/* One (crop, head): S = (q k^T) / sqrt(80); softmax rows; out = S v. */
static void attn_task(void *ctx, int task, int tid) {
    attn_job *j = ctx;
    hm_cpu_state *s = j->s;
    const hm_config *c = &s->m->cfg;
    int b = task / c->heads, hd = task % c->heads;
    int n = c->ntok, ld = 3 * c->dim;
    const float *q = s->qkv + (size_t)b * n * ld + hd * HM_VIT_HEAD_DIM;
    const float *k = q + c->dim, *v = q + 2 * c->dim;
    float *S = s->scores + (size_t)tid * n * n;
    float *o = s->att + (size_t)b * n * c->dim + hd * HM_VIT_HEAD_DIM;
    float scale = 1.0f / sqrtf((float)HM_VIT_HEAD_DIM);
    hm_attention_head_fast(j->mode, n, HM_VIT_HEAD_DIM, scale, q, k, v, (size_t)ld, o, (size_t)c->dim, S,
                           (size_t)n * n);
}

int hm_vit_forward(hm_cpu_state *s, int B) {
    const hm_cpu_model *m = s->m;
    const hm_config *c = &m->cfg;
    int T = B * c->ntok, rc;
    /* bf16 dot products (vdpbf16ps or AMX tiles) and an fp32 softmax where
     * the state chose them (fast precision; kernels/attn.h says where and
     * why), inside the per-thread scores buffer. */
    const int mode = s->attn_mode;
    HM_TIC(s->ctl);
    for (int l = 0; l < c->depth; l++) {
        const hm_vit_block *bl = &m->blocks[l];
        if (hm_ctl_cancelled(s->ctl)) return HM_E_CANCELLED;
        /* LN1 and LN2 are qkv's and fc1's prologue (kernels/gemm.h): inside
         * the low-precision GEMMs' activation rounding, or into s->h first
         * for fp32 packings; their time is the GEMM's stage's. */
        hm_gemm_opts o = {.epi = HM_EPI_STORE, .ln_w = bl->norm1_w, .ln_b = bl->norm1_b, .ln_eps = 1e-6f,
                          .ln_out = s->h, .ld_ln = c->dim};
        if ((rc = hm_gemm_ex(s->pool, T, s->x, c->dim, &bl->qkv, s->qkv, 3 * c->dim, &o))) return rc;
        HM_TOC(s->ctl, HM_ST_QKV);
        attn_job aj = {s, B, mode};
        hm_pool_run(s->pool, attn_task, &aj, B * c->heads);
        HM_TOC(s->ctl, HM_ST_ATTN);
        /* The residual add is proj's and fc2's epilogue. An int8 proj takes
         * each crop's mean token out of its input (kernels/gemm.h: center):
         * attention outputs share most of their content across tokens. */
        o = (hm_gemm_opts){.epi = HM_EPI_ACCUM, .center = c->ntok};
        if ((rc = hm_gemm_ex(s->pool, T, s->att, c->dim, &bl->proj, s->x, c->dim, &o))) return rc;
        HM_TOC(s->ctl, HM_ST_PROJ);
        o = (hm_gemm_opts){.epi = HM_EPI_GELU, .ln_w = bl->norm2_w, .ln_b = bl->norm2_b, .ln_eps = 1e-6f,
                           .ln_out = s->h, .ld_ln = c->dim};
        if ((rc = hm_gemm_ex(s->pool, T, s->x, c->dim, &bl->fc1, s->mlp, s->mlp_ld, &o))) return rc;
        HM_TOC(s->ctl, HM_ST_FC1);
        if ((rc = hm_gemm(s->pool, T, s->mlp, s->mlp_ld, &bl->fc2, s->x, c->dim, HM_EPI_ACCUM))) return rc;
        HM_TOC(s->ctl, HM_ST_FC2);
    }
    layernorm_par(s, s->x, s->x, T, c->dim, m->last_norm_w, m->last_norm_b, 1e-6f);
    HM_TOC(s->ctl, HM_ST_NORM);
    return HM_OK;
}
