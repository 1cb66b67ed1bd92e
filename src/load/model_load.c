/* model_load.c - checkpoint -> hm_model: validate, pack, fold constants.
 *
 * The architecture is read off the checkpoint: depths by counting block keys,
 * widths from tensor shapes. Every tensor inference needs is checked for
 * presence, dtype, shape and contiguity; a problem is reported naming the key.
 * Linear weights are packed into the GEMM layout; small vectors are copied,
 * so the checkpoint mapping is closed when loading ends. Each weight's pages
 * of the mapping are dropped once it is packed, so the peak is about the
 * packed model, not packed model + checkpoint. MANO comes from
 * mano_load.c; model_open.c decides between this and the packed reader.
 */
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "format/ckpt.h"
#include "kernels/gemm_lowp.h"
#include "load/model_check.h"
#include "load/load.h"
#include "model/model.h"
#include "core/log.h"
#include "core/util.h"

typedef struct {
    hm_ckpt *ck;
    hm_model *m;
    int progress;
    size_t packed, total;   /* bytes packed so far / expected, for progress */
    int last_pct;
    hm_precision prec;      /* for the ViT blocks' four matmuls */
} loader;

/* Tensor `key` as contiguous fp32 with exactly the given shape, or NULL
 * (error recorded). */
static const float *get_f32(loader *L, const char *key, int ndim, const int64_t *shape) {
    const hm_tensor *t = hm_ckpt_find(L->ck, key);
    if (!t) {
        hm_err(HM_E_SHAPE, "checkpoint: missing tensor '%s' (not HaMeR's released checkpoint, or a damaged copy: "
               "docs/models.md says where to get hamer.ckpt)", key);
        return NULL;
    }
    char want[96] = "", got[96] = "";
    for (int i = 0, n = 0; i < ndim; i++) n += snprintf(want + n, sizeof want - n, i ? ",%lld" : "%lld", (long long)shape[i]);
    for (int i = 0, n = 0; i < t->ndim; i++) n += snprintf(got + n, sizeof got - n, i ? ",%lld" : "%lld", (long long)t->shape[i]);
    int ok = t->ndim == ndim;
    for (int i = 0; ok && i < ndim; i++) ok = t->shape[i] == shape[i];
    if (!ok) {
        hm_err(HM_E_SHAPE, "checkpoint: tensor '%s' has shape [%s], expected [%s]", key, got, want);
        return NULL;
    }
    if (t->dtype != HM_DT_F32) {
        hm_err(HM_E_SHAPE, "checkpoint: tensor '%s' has dtype %s, expected float32", key, hm_dtype_name(t->dtype));
        return NULL;
    }
    if (!t->contiguous) {
        hm_err(HM_E_SHAPE, "checkpoint: tensor '%s' is not contiguous", key);
        return NULL;
    }
    return (const float *)t->data;
}

#define S1(a) ((const int64_t[]){a})
#define S2(a, b) ((const int64_t[]){a, b})
#define S3(a, b, c) ((const int64_t[]){a, b, c})
#define S4(a, b, c, d) ((const int64_t[]){a, b, c, d})

static float *copy_vec(loader *L, const char *key, int64_t n) {
    const float *src = get_f32(L, key, 1, S1(n));
    if (!src) return NULL;
    float *dst = hm_alloc((size_t)n * sizeof(float));
    if (dst) memcpy(dst, src, (size_t)n * sizeof(float));
    return dst;
}

static void progress(loader *L, size_t bytes) {
    L->packed += bytes;
    if (!L->progress || L->total == 0) return;
    int pct = (int)(100.0 * L->packed / L->total);
    if (pct > 100) pct = 100;
    if (pct != L->last_pct) {
        hm_log(HM_LOG_PROGRESS, "loading weights %3d%%", pct);
        L->last_pct = pct;
    }
}

/* How a Linear is packed: exact fp32, the model's precision, or the
 * model's precision for a matmul that low precision hurts most (see
 * hm_pack_weights_fast_sensitive). */
typedef enum { PACK_FP32, PACK_MODEL, PACK_SENSITIVE } pack_kind;

/* Pack Linear `prefix.weight` [N, K] (+ `prefix.bias` [N] if with_bias). */
static int pack_linear_kind(loader *L, hm_packed *p, const char *prefix, int N, int K, int with_bias, pack_kind kind) {
    char key[256];
    snprintf(key, sizeof key, "%s.weight", prefix);
    const float *w = get_f32(L, key, 2, S2(N, K));
    if (!w) return HM_E_SHAPE;
    const float *b = NULL;
    if (with_bias) {
        snprintf(key, sizeof key, "%s.bias", prefix);
        if (!(b = get_f32(L, key, 1, S1(N)))) return HM_E_SHAPE;
    }
    int rc;
    if (kind == PACK_FP32 || L->prec == HM_PREC_FP32) rc = hm_pack_weights(p, w, K, b, N, K);
    else if (kind == PACK_SENSITIVE) rc = hm_pack_weights_fast_sensitive(p, w, K, b, N, K);
    else rc = hm_pack_weights_prec(p, w, K, b, N, K, L->prec);
    if (rc) return rc;
    hm_ckpt_release_range(L->ck, w, (size_t)N * K * sizeof(float));
    progress(L, (size_t)N * K * 4);
    return HM_OK;
}

/* fp32 packing: every matmul outside the ViT blocks stays exact. */
static int pack_linear(loader *L, hm_packed *p, const char *prefix, int N, int K, int with_bias) {
    return pack_linear_kind(L, p, prefix, N, K, with_bias, PACK_FP32);
}

/* Number of consecutive indices i with "<fmt % i>" present. */
static int count_keys(loader *L, const char *fmt) {
    char key[256];
    int n = 0;
    for (;; n++) {
        snprintf(key, sizeof key, fmt, n);
        if (!hm_ckpt_find(L->ck, key)) return n;
    }
}

/* Shape of `key`, which must be present with ndim dimensions; NULL (error
 * recorded) otherwise. */
static const int64_t *shape_of(loader *L, const char *key, int ndim) {
    const hm_tensor *t = hm_ckpt_find(L->ck, key);
    if (!t || t->ndim != ndim) {
        hm_err(HM_E_SHAPE, "checkpoint: missing or malformed '%s'%s", key,
               !strcmp(key, "backbone.patch_embed.proj.weight") ? " (is this a HaMeR checkpoint?)" : "");
        return NULL;
    }
    return t->shape;
}

/* An int from a tensor dimension; values no int holds become -1, which
 * hm_config_check refuses. */
static int dim_of(int64_t v) { return v >= 0 && v <= INT_MAX ? (int)v : -1; }

/* m->u8_tok_bias[t, o] = pos[t, o] - sum over the taps of token t that fall
 * inside the crop of W[o, tap] * mean_c / std_c. A token's sum depends only
 * on which rows and columns of its 16 x 16 window are inside, and all but
 * the border tokens have the whole window inside: each distinct window is
 * summed once (in the same order, so the values are the ones a per-token
 * loop gives) and shared, instead of 192 x 1280 x 768 terms per load. */
static int token_bias(hm_model *m, const hm_config *c, const float *pw, int K) {
    enum { MAXW = 9 };              /* first / inner / last row x the same for columns */
    int key[MAXW][4], nkey = 0;
    double *sums = hm_alloc((size_t)MAXW * c->dim * sizeof(double));
    if (!sums) return HM_E_NOMEM;
    for (int i = 0; i < c->gh; i++)
        for (int j = 0; j < c->gw; j++) {
            int y0 = i * HM_PATCH - HM_PATCH_PAD, x0 = j * HM_PATCH - HM_PATCH_PAD;
            int kh0 = y0 < 0 ? -y0 : 0, kw0 = x0 < 0 ? -x0 : 0;
            int kh1 = y0 + HM_PATCH > HAMER_CROP_H ? HAMER_CROP_H - y0 : HM_PATCH;
            int kw1 = x0 + HM_PATCH > HAMER_CROP_W ? HAMER_CROP_W - x0 : HM_PATCH;
            int w = 0;
            while (w < nkey && !(key[w][0] == kh0 && key[w][1] == kh1 && key[w][2] == kw0 && key[w][3] == kw1)) w++;
            if (w == nkey) {
                if (nkey == MAXW) {
                    hm_free(sums);
                    return hm_err(HM_E_SHAPE, "patch embedding: more than %d distinct border windows", MAXW);
                }
                key[w][0] = kh0, key[w][1] = kh1, key[w][2] = kw0, key[w][3] = kw1, nkey++;
                for (int o = 0; o < c->dim; o++) {
                    double acc = 0;
                    const float *wo = pw + (size_t)o * K;
                    for (int ch = 0; ch < 3; ch++) {
                        double f = hm_norm_mean[ch] / hm_norm_std[ch];
                        for (int kh = kh0; kh < kh1; kh++)
                            for (int kw = kw0; kw < kw1; kw++) acc += wo[(ch * HM_PATCH + kh) * HM_PATCH + kw] * f;
                    }
                    sums[(size_t)w * c->dim + o] = acc;
                }
            }
            size_t t = (size_t)i * c->gw + j;
            for (int o = 0; o < c->dim; o++)
                m->u8_tok_bias[t * c->dim + o] = (float)(m->pos[t * c->dim + o] - sums[(size_t)w * c->dim + o]);
        }
    hm_free(sums);
    return HM_OK;
}

/* The architecture, read off the keys (depths) and shapes (widths), then
 * checked with the limits the packed-file reader applies. */
static int read_config(loader *L, hm_config *c) {
    const int64_t *sh = shape_of(L, "backbone.patch_embed.proj.weight", 4);
    if (!sh) return HM_E_SHAPE;
    if (sh[1] != 3 || sh[2] != HM_PATCH || sh[3] != HM_PATCH)
        return hm_err(HM_E_SHAPE, "checkpoint: tensor 'backbone.patch_embed.proj.weight' must be [dim,3,16,16]");
    c->dim = dim_of(sh[0]);
    c->heads = c->dim / HM_VIT_HEAD_DIM;
    c->gh = (HAMER_CROP_H + 2 * HM_PATCH_PAD - HM_PATCH) / HM_PATCH + 1;
    c->gw = (HAMER_CROP_W + 2 * HM_PATCH_PAD - HM_PATCH) / HM_PATCH + 1;
    c->ntok = c->gh * c->gw;
    c->depth = count_keys(L, "backbone.blocks.%d.norm1.weight");
    if (c->depth < 1) return hm_err(HM_E_SHAPE, "checkpoint: no backbone blocks (missing 'backbone.blocks.0.norm1.weight')");
    if (!(sh = shape_of(L, "backbone.blocks.0.mlp.fc1.weight", 2))) return HM_E_SHAPE;
    if (sh[1] != c->dim)
        return hm_err(HM_E_SHAPE, "checkpoint: tensor 'backbone.blocks.0.mlp.fc1.weight' has shape [%lld,%lld], expected [mlp,%d]",
                      (long long)sh[0], (long long)sh[1], c->dim);
    c->mlp = dim_of(sh[0]);
    c->hdepth = count_keys(L, "mano_head.transformer.transformer.layers.%d.0.norm.weight");
    if (c->hdepth < 1) return hm_err(HM_E_SHAPE, "checkpoint: no decoder layers (missing 'mano_head.transformer.transformer.layers.0.0.norm.weight')");
    if (!(sh = shape_of(L, "mano_head.transformer.pos_embedding", 3))) return HM_E_SHAPE;
    c->hdim = dim_of(sh[2]);
    if (!(sh = shape_of(L, "mano_head.transformer.transformer.layers.0.1.fn.to_q.weight", 2))) return HM_E_SHAPE;
    c->hinner = dim_of(sh[0]);
    c->hheads = c->hinner / HM_DEC_HEAD_DIM;
    if (!(sh = shape_of(L, "mano_head.transformer.transformer.layers.0.2.fn.net.0.weight", 2))) return HM_E_SHAPE;
    c->hmlp = dim_of(sh[0]);
    return hm_config_check(c, "checkpoint", HM_E_SHAPE);
}

static int load_backbone(loader *L) {
    hm_model *m = L->m;
    const hm_config *c = &m->cfg;
    char p[256];
    const float *pe = get_f32(L, "backbone.pos_embed", 3, S3(1, c->ntok + 1, c->dim));
    if (!pe) return HM_E_SHAPE;
    const float *pw = get_f32(L, "backbone.patch_embed.proj.weight", 4, S4(c->dim, 3, HM_PATCH, HM_PATCH));
    const float *pb = get_f32(L, "backbone.patch_embed.proj.bias", 1, S1(c->dim));
    if (!pw || !pb) return HM_E_SHAPE;
    int K = 3 * HM_PATCH * HM_PATCH, rc;
    if ((rc = hm_pack_weights(&m->patch, pw, K, pb, c->dim, K))) return rc;

    m->pos = hm_alloc((size_t)c->ntok * c->dim * sizeof(float));
    m->u8_tok_bias = hm_alloc((size_t)c->ntok * c->dim * sizeof(float));
    float *wu8 = hm_alloc((size_t)c->dim * K * sizeof(float));
    if (!m->pos || !m->u8_tok_bias || !wu8) {
        hm_free(wu8);
        return HM_E_NOMEM;
    }
    for (int t = 0; t < c->ntok; t++)
        for (int o = 0; o < c->dim; o++) m->pos[(size_t)t * c->dim + o] = pe[(size_t)(t + 1) * c->dim + o] + pe[o];

    /* uint8 folding: W' = W / (255 std_c); per-token bias subtracts W.mean/std
     * over the taps that fall inside the image. */
    const double *stdv = hm_norm_std;
    for (int o = 0; o < c->dim; o++)
        for (int k = 0; k < K; k++) wu8[(size_t)o * K + k] = (float)(pw[(size_t)o * K + k] / (255.0 * stdv[k / 256]));
    rc = hm_pack_weights(&m->patch_u8, wu8, K, pb, c->dim, K);
    hm_free(wu8);
    hm_ckpt_release_range(L->ck, pe, (size_t)(c->ntok + 1) * c->dim * sizeof(float));
    if (rc) return rc;
    if ((rc = token_bias(m, c, pw, K))) return rc;
    hm_ckpt_release_range(L->ck, pw, (size_t)c->dim * K * sizeof(float));
    progress(L, (size_t)c->dim * K * 4);

    m->blocks = calloc(c->depth, sizeof *m->blocks);
    if (!m->blocks) return hm_err(HM_E_NOMEM, "out of memory");
    for (int l = 0; l < c->depth; l++) {
        hm_vit_block *b = &m->blocks[l];
#define BK(name) (snprintf(p, sizeof p, "backbone.blocks.%d.%s", l, name), p)
        if (!(b->norm1_w = copy_vec(L, BK("norm1.weight"), c->dim))) return HM_E_SHAPE;
        if (!(b->norm1_b = copy_vec(L, BK("norm1.bias"), c->dim))) return HM_E_SHAPE;
        if (!(b->norm2_w = copy_vec(L, BK("norm2.weight"), c->dim))) return HM_E_SHAPE;
        if (!(b->norm2_b = copy_vec(L, BK("norm2.bias"), c->dim))) return HM_E_SHAPE;
        if ((rc = pack_linear_kind(L, &b->qkv, BK("attn.qkv"), 3 * c->dim, c->dim, 1, PACK_MODEL))) return rc;
        if ((rc = pack_linear_kind(L, &b->proj, BK("attn.proj"), c->dim, c->dim, 1, PACK_SENSITIVE))) return rc;
        if ((rc = pack_linear_kind(L, &b->fc1, BK("mlp.fc1"), c->mlp, c->dim, 1, PACK_MODEL))) return rc;
        if ((rc = pack_linear_kind(L, &b->fc2, BK("mlp.fc2"), c->dim, c->mlp, 1, PACK_MODEL))) return rc;
#undef BK
    }
    if (!(m->last_norm_w = copy_vec(L, "backbone.last_norm.weight", c->dim))) return HM_E_SHAPE;
    if (!(m->last_norm_b = copy_vec(L, "backbone.last_norm.bias", c->dim))) return HM_E_SHAPE;
    return HM_OK;
}

/* y[N] = W[N,K] . x[K] with double accumulation (load-time constants only). */
static void matvec(const float *W, const float *x, float *y, int N, int K) {
    for (int n = 0; n < N; n++) {
        double a = 0;
        for (int k = 0; k < K; k++) a += (double)W[(size_t)n * K + k] * x[k];
        y[n] = (float)a;
    }
}

static int load_head(loader *L) {
    hm_model *m = L->m;
    const hm_config *c = &m->cfg;
    int d = c->hdim, in = c->hinner, rc;
    char p[256];
    const float *tw = get_f32(L, "mano_head.transformer.to_token_embedding.weight", 2, S2(d, 1));
    const float *tb = get_f32(L, "mano_head.transformer.to_token_embedding.bias", 1, S1(d));
    const float *pe = get_f32(L, "mano_head.transformer.pos_embedding", 3, S3(1, 1, d));
    if (!tw || !tb || !pe) return HM_E_SHAPE;
    /* Every layer's to_kv must be present before the stacked copy is
     * allocated: its size comes from the layer count, which a hostile file
     * can inflate with stray norm keys. */
    for (int l = 0; l < c->hdepth; l++) {
        snprintf(p, sizeof p, "mano_head.transformer.transformer.layers.%d.1.fn.to_kv.weight", l);
        if (!get_f32(L, p, 2, S2(2 * in, c->dim))) return HM_E_SHAPE;
    }
    m->token0 = hm_alloc(d * sizeof(float));
    m->x1 = hm_alloc(d * sizeof(float));
    m->q1 = hm_alloc(in * sizeof(float));
    float *kv = hm_alloc((size_t)c->hdepth * 2 * in * c->dim * sizeof(float));
    float *tmp = hm_alloc((size_t)(d + in) * sizeof(float));
    m->layers = calloc(c->hdepth, sizeof *m->layers);
    if (!m->token0 || !m->x1 || !m->q1 || !kv || !tmp || !m->layers) {
        hm_free(kv);
        hm_free(tmp);
        return hm_err(HM_E_NOMEM, "out of memory");
    }
    /* The input token is Linear(1, d) of a zero: its bias (0 * weight is 0). */
    for (int i = 0; i < d; i++) m->token0[i] = 0.0f * tw[i] + tb[i] + pe[i];

    rc = HM_OK;
    for (int l = 0; l < c->hdepth && rc == HM_OK; l++) {
        hm_head_layer *H = &m->layers[l];
#define HK(name) (snprintf(p, sizeof p, "mano_head.transformer.transformer.layers.%d.%s", l, name), p)
        rc = HM_E_SHAPE;
        if (!(H->sa_norm_w = copy_vec(L, HK("0.norm.weight"), d)) || !(H->sa_norm_b = copy_vec(L, HK("0.norm.bias"), d)) ||
            !(H->ca_norm_w = copy_vec(L, HK("1.norm.weight"), d)) || !(H->ca_norm_b = copy_vec(L, HK("1.norm.bias"), d)) ||
            !(H->ff_norm_w = copy_vec(L, HK("2.norm.weight"), d)) || !(H->ff_norm_b = copy_vec(L, HK("2.norm.bias"), d)))
            break;
        const float *qkv = get_f32(L, HK("0.fn.to_qkv.weight"), 2, S2(3 * in, d));
        if (!qkv) break;
        if (!(H->sa_qkv_full = hm_alloc((size_t)3 * in * d * sizeof(float)))) { rc = HM_E_NOMEM; break; }
        memcpy(H->sa_qkv_full, qkv, (size_t)3 * in * d * sizeof(float));
        /* Single token: softmax is 1, only the V third of to_qkv matters. */
        if ((rc = hm_pack_weights(&H->sa_v, qkv + (size_t)2 * in * d, d, NULL, in, d))) break;
        hm_ckpt_release_range(L->ck, qkv, (size_t)3 * in * d * sizeof(float));
        if ((rc = pack_linear(L, &H->sa_out, HK("0.fn.to_out.0"), d, in, 1))) break;
        if ((rc = pack_linear(L, &H->ca_q, HK("1.fn.to_q"), in, d, 0))) break;
        if ((rc = pack_linear(L, &H->ca_out, HK("1.fn.to_out.0"), d, in, 1))) break;
        if ((rc = pack_linear(L, &H->ca_kv, HK("1.fn.to_kv"), 2 * in, c->dim, 0))) break;
        const float *kvw = get_f32(L, HK("1.fn.to_kv.weight"), 2, S2(2 * in, c->dim));
        memcpy(kv + (size_t)l * 2 * in * c->dim, kvw, (size_t)2 * in * c->dim * sizeof(float));
        hm_ckpt_release_range(L->ck, kvw, (size_t)2 * in * c->dim * sizeof(float));
        if ((rc = pack_linear(L, &H->ff1, HK("2.fn.net.0"), c->hmlp, d, 1))) break;
        if ((rc = pack_linear(L, &H->ff2, HK("2.fn.net.3"), d, c->hmlp, 1))) break;
        rc = HM_OK;
#undef HK
    }
    /* The context's K/V projection is most of the head's FLOPs (one
     * [T, dim] x [dim, hdepth*2*inner] GEMM): in the model's precision, as
     * the blocks' matmuls are; the rest of the head works on one token. */
    if (rc == HM_OK)
        rc = hm_pack_weights_prec(&m->kv_all, kv, c->dim, NULL, c->hdepth * 2 * in, c->dim, L->prec);
    hm_free(kv);
    if (rc) {
        hm_free(tmp);
        return rc;
    }

    /* Layer 0 on the constant token: x1 = t0 + to_out(Wv LN(t0)); q1 = Wq LN(x1). */
    const hm_head_layer *H0 = &m->layers[0];
    float *h = tmp, *v = tmp + d;
    hm_layernorm(m->token0, h, 1, d, H0->sa_norm_w, H0->sa_norm_b, 1e-5f);
    matvec(H0->sa_qkv_full + (size_t)2 * in * d, h, v, in, d);
    const float *ow = get_f32(L, "mano_head.transformer.transformer.layers.0.0.fn.to_out.0.weight", 2, S2(d, in));
    const float *ob = get_f32(L, "mano_head.transformer.transformer.layers.0.0.fn.to_out.0.bias", 1, S1(d));
    matvec(ow, v, m->x1, d, in);
    for (int i = 0; i < d; i++) m->x1[i] += ob[i] + m->token0[i];
    hm_layernorm(m->x1, h, 1, d, H0->ca_norm_w, H0->ca_norm_b, 1e-5f);
    matvec(get_f32(L, "mano_head.transformer.transformer.layers.0.1.fn.to_q.weight", 2, S2(in, d)), h, m->q1, in, d);
    hm_free(tmp);

    if ((rc = pack_linear(L, &m->decpose, "mano_head.decpose", HM_NJ * 6, d, 1))) return rc;
    if ((rc = pack_linear(L, &m->decshape, "mano_head.decshape", HM_NB, d, 1))) return rc;
    if ((rc = pack_linear(L, &m->deccam, "mano_head.deccam", 3, d, 1))) return rc;
    const float *ip = get_f32(L, "mano_head.init_hand_pose", 2, S2(1, HM_NJ * 6));
    const float *ib = get_f32(L, "mano_head.init_betas", 2, S2(1, HM_NB));
    const float *ic = get_f32(L, "mano_head.init_cam", 2, S2(1, 3));
    if (!ip || !ib || !ic) return HM_E_SHAPE;
    memcpy(m->init_pose, ip, sizeof m->init_pose);
    memcpy(m->init_betas, ib, sizeof m->init_betas);
    memcpy(m->init_cam, ic, sizeof m->init_cam);
    return HM_OK;
}

static int attach_mano(loader *L, const char *path, const char *mano_npz) {
    hm_model *m = L->m;
    int found = 0, rc = hm_mano_from_ckpt(L->ck, path, &m->mano, &found);
    if (rc) return rc;
    if (!found && mano_npz) {
        if ((rc = hm_mano_from_npz(mano_npz, &m->mano))) return rc;
        found = 1;
    }
    m->has_mano = found;
    return HM_OK;
}

/* ---- top level ---- */

int hm_model_from_ckpt(hm_ckpt *ck, const char *src, const char *mano_npz, int progress_on, int precision,
                       hm_model **out) {
    *out = NULL;
    hm_model *m = calloc(1, sizeof *m);
    if (!m) return hm_err(HM_E_NOMEM, "out of memory");
    loader L = {.ck = ck, .m = m, .progress = progress_on && hm_log_enabled(), .last_pct = -1, .prec = (hm_precision)precision};
    m->precision = precision;
    int rc;
    if ((rc = read_config(&L, &m->cfg))) goto fail;
    const hm_config *c = &m->cfg;
    L.total = (size_t)4 * c->dim * 768 +
              (size_t)4 * c->depth * ((size_t)4 * c->dim * c->dim + (size_t)2 * c->dim * c->mlp) +
              (size_t)4 * c->hdepth * ((size_t)3 * c->hinner * c->hdim + (size_t)2 * c->hinner * c->dim + (size_t)2 * c->hdim * c->hmlp) +
              (size_t)4 * c->hdim * (HM_NJ * 6 + HM_NB + 3);
    if ((rc = load_backbone(&L))) goto fail;
    if ((rc = load_head(&L))) goto fail;
    if ((rc = attach_mano(&L, src, mano_npz))) goto fail;
    *out = m;
    return HM_OK;
fail:
    hm_model_free(m);
    return rc;
}
