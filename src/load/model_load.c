/* model_load.c - checkpoint -> hm_weights (validated views, folded
 * constants) -> the backend's packing -> hm_model.
 *
 * The architecture is read off the checkpoint: depths by counting block keys,
 * widths from tensor shapes. Every tensor inference needs is checked for
 * presence, dtype, shape and contiguity; a problem is reported naming the key.
 * The backend packs the views into its layout (the CPU's: backend/cpu/
 * cpu_pack.c) and reports each one done, whereupon its pages of the mapping
 * are dropped, so the peak is about the packed model, not packed model +
 * checkpoint. MANO comes from mano_load.c; model_open.c decides between this
 * and the packed reader.
 */
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "format/ckpt.h"
#include "kernels/norm.h"
#include "load/model_check.h"
#include "load/load.h"
#include "model/model.h"
#include "core/log.h"
#include "core/util.h"

typedef struct {
    hm_ckpt *ck;
    hm_weights *w;
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

/* Vector `key` [n] as a view. */
static const float *view_vec(loader *L, const char *key, int64_t n) { return get_f32(L, key, 1, S1(n)); }

/* Linear `prefix.weight` [N, K] (+ `prefix.bias` [N] if with_bias) as views. */
static int view_linear(loader *L, hm_linear *lin, const char *prefix, int N, int K, int with_bias) {
    char key[272];
    snprintf(key, sizeof key, "%s.weight", prefix);
    const float *w = get_f32(L, key, 2, S2(N, K));
    if (!w) return HM_E_SHAPE;
    const float *b = NULL;
    if (with_bias) {
        snprintf(key, sizeof key, "%s.bias", prefix);
        if (!(b = get_f32(L, key, 1, S1(N)))) return HM_E_SHAPE;
    }
    *lin = (hm_linear){w, b, N, K};
    return HM_OK;
}

/* An owned array of n floats, remembered in w->owned for release. */
static float *own(hm_weights *w, size_t n) {
    size_t i = 0;
    while (i < sizeof w->owned / sizeof w->owned[0] && w->owned[i]) i++;
    if (i == sizeof w->owned / sizeof w->owned[0]) {
        hm_err(HM_E_NOMEM, "weights: too many owned arrays");
        return NULL;
    }
    float *p = hm_alloc(n * sizeof(float));
    if (!p) hm_err(HM_E_NOMEM, "out of memory");
    w->owned[i] = p;
    return p;
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

/* tok[t, o] = pos[t, o] - sum over the taps of token t that fall
 * inside the crop of W[o, tap] * mean_c / std_c. A token's sum depends only
 * on which rows and columns of its 16 x 16 window are inside, and all but
 * the border tokens have the whole window inside: each distinct window is
 * summed once (in the same order, so the values are the ones a per-token
 * loop gives) and shared, instead of 192 x 1280 x 768 terms per load. */
static int token_bias(float *tok, const float *pos, const hm_config *c, const float *pw, int K) {
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
                tok[t * c->dim + o] = (float)(pos[t * c->dim + o] - sums[(size_t)w * c->dim + o]);
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
    hm_weights *W = L->w;
    const hm_config *c = &W->cfg;
    char p[256];
    const float *pe = get_f32(L, "backbone.pos_embed", 3, S3(1, c->ntok + 1, c->dim));
    if (!pe) return HM_E_SHAPE;
    const float *pw = get_f32(L, "backbone.patch_embed.proj.weight", 4, S4(c->dim, 3, HM_PATCH, HM_PATCH));
    const float *pb = get_f32(L, "backbone.patch_embed.proj.bias", 1, S1(c->dim));
    if (!pw || !pb) return HM_E_SHAPE;
    int K = 3 * HM_PATCH * HM_PATCH, rc;
    W->patch = (hm_linear){pw, pb, c->dim, K};

    float *pos = own(W, (size_t)c->ntok * c->dim);
    float *tok = own(W, (size_t)c->ntok * c->dim);
    float *wu8 = own(W, (size_t)c->dim * K);
    if (!pos || !tok || !wu8) return HM_E_NOMEM;
    for (int t = 0; t < c->ntok; t++)
        for (int o = 0; o < c->dim; o++) pos[(size_t)t * c->dim + o] = pe[(size_t)(t + 1) * c->dim + o] + pe[o];

    /* uint8 folding: W' = W / (255 std_c); per-token bias subtracts W.mean/std
     * over the taps that fall inside the image. */
    const double *stdv = hm_norm_std;
    for (int o = 0; o < c->dim; o++)
        for (int k = 0; k < K; k++) wu8[(size_t)o * K + k] = (float)(pw[(size_t)o * K + k] / (255.0 * stdv[k / 256]));
    hm_ckpt_release_range(L->ck, pe, (size_t)(c->ntok + 1) * c->dim * sizeof(float));
    if ((rc = token_bias(tok, pos, c, pw, K))) return rc;
    W->pos = pos;
    W->u8_tok_bias = tok;
    W->patch_u8 = (hm_linear){wu8, pb, c->dim, K};

    hm_vit_block_w *blocks = calloc(c->depth, sizeof *blocks);
    if (!blocks) return hm_err(HM_E_NOMEM, "out of memory");
    W->blocks = blocks;
    for (int l = 0; l < c->depth; l++) {
        hm_vit_block_w *b = &blocks[l];
#define BK(name) (snprintf(p, sizeof p, "backbone.blocks.%d.%s", l, name), p)
        if (!(b->norm1_w = view_vec(L, BK("norm1.weight"), c->dim))) return HM_E_SHAPE;
        if (!(b->norm1_b = view_vec(L, BK("norm1.bias"), c->dim))) return HM_E_SHAPE;
        if (!(b->norm2_w = view_vec(L, BK("norm2.weight"), c->dim))) return HM_E_SHAPE;
        if (!(b->norm2_b = view_vec(L, BK("norm2.bias"), c->dim))) return HM_E_SHAPE;
        if ((rc = view_linear(L, &b->qkv, BK("attn.qkv"), 3 * c->dim, c->dim, 1))) return rc;
        if ((rc = view_linear(L, &b->proj, BK("attn.proj"), c->dim, c->dim, 1))) return rc;
        if ((rc = view_linear(L, &b->fc1, BK("mlp.fc1"), c->mlp, c->dim, 1))) return rc;
        if ((rc = view_linear(L, &b->fc2, BK("mlp.fc2"), c->dim, c->mlp, 1))) return rc;
#undef BK
    }
    if (!(W->last_norm_w = view_vec(L, "backbone.last_norm.weight", c->dim))) return HM_E_SHAPE;
    if (!(W->last_norm_b = view_vec(L, "backbone.last_norm.bias", c->dim))) return HM_E_SHAPE;
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
    hm_weights *W = L->w;
    const hm_config *c = &W->cfg;
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
    float *token0 = own(W, d), *x1 = own(W, d), *q1 = own(W, in);
    float *kv = own(W, (size_t)c->hdepth * 2 * in * c->dim);
    float *tmp = own(W, (size_t)(d + in));
    hm_head_layer_w *layers = calloc(c->hdepth, sizeof *layers);
    W->layers = layers;
    if (!token0 || !x1 || !q1 || !kv || !tmp || !layers) return hm_err(HM_E_NOMEM, "out of memory");
    /* The input token is Linear(1, d) of a zero: its bias (0 * weight is 0). */
    for (int i = 0; i < d; i++) token0[i] = 0.0f * tw[i] + tb[i] + pe[i];

    for (int l = 0; l < c->hdepth; l++) {
        hm_head_layer_w *H = &layers[l];
#define HK(name) (snprintf(p, sizeof p, "mano_head.transformer.transformer.layers.%d.%s", l, name), p)
        if (!(H->sa_norm_w = view_vec(L, HK("0.norm.weight"), d)) || !(H->sa_norm_b = view_vec(L, HK("0.norm.bias"), d)) ||
            !(H->ca_norm_w = view_vec(L, HK("1.norm.weight"), d)) || !(H->ca_norm_b = view_vec(L, HK("1.norm.bias"), d)) ||
            !(H->ff_norm_w = view_vec(L, HK("2.norm.weight"), d)) || !(H->ff_norm_b = view_vec(L, HK("2.norm.bias"), d)))
            return HM_E_SHAPE;
        const float *qkv = get_f32(L, HK("0.fn.to_qkv.weight"), 2, S2(3 * in, d));
        if (!qkv) return HM_E_SHAPE;
        H->sa_qkv_full = qkv;
        /* Single token: softmax is 1, only the V third of to_qkv matters. */
        H->sa_v = (hm_linear){qkv + (size_t)2 * in * d, NULL, in, d};
        if ((rc = view_linear(L, &H->sa_out, HK("0.fn.to_out.0"), d, in, 1))) return rc;
        if ((rc = view_linear(L, &H->ca_q, HK("1.fn.to_q"), in, d, 0))) return rc;
        if ((rc = view_linear(L, &H->ca_out, HK("1.fn.to_out.0"), d, in, 1))) return rc;
        if ((rc = view_linear(L, &H->ca_kv, HK("1.fn.to_kv"), 2 * in, c->dim, 0))) return rc;
        memcpy(kv + (size_t)l * 2 * in * c->dim, H->ca_kv.w, (size_t)2 * in * c->dim * sizeof(float));
        if ((rc = view_linear(L, &H->ff1, HK("2.fn.net.0"), c->hmlp, d, 1))) return rc;
        if ((rc = view_linear(L, &H->ff2, HK("2.fn.net.3"), d, c->hmlp, 1))) return rc;
#undef HK
    }
    /* The context's K/V projection of every layer as one matrix (the CPU
     * backend packs it in the model's precision, as the blocks' matmuls). */
    W->kv_all = (hm_linear){kv, NULL, c->hdepth * 2 * in, c->dim};

    /* Layer 0 on the constant token: x1 = t0 + to_out(Wv LN(t0)); q1 = Wq LN(x1). */
    const hm_head_layer_w *H0 = &layers[0];
    float *h = tmp, *v = tmp + d;
    hm_layernorm(token0, h, 1, d, H0->sa_norm_w, H0->sa_norm_b, 1e-5f);
    matvec(H0->sa_qkv_full + (size_t)2 * in * d, h, v, in, d);
    matvec(H0->sa_out.w, v, x1, d, in);
    for (int i = 0; i < d; i++) x1[i] += H0->sa_out.b[i] + token0[i];
    hm_layernorm(x1, h, 1, d, H0->ca_norm_w, H0->ca_norm_b, 1e-5f);
    matvec(H0->ca_q.w, h, q1, in, d);
    W->token0 = token0, W->x1 = x1, W->q1 = q1;

    if ((rc = view_linear(L, &W->decpose, "mano_head.decpose", HM_NJ * 6, d, 1))) return rc;
    if ((rc = view_linear(L, &W->decshape, "mano_head.decshape", HM_NB, d, 1))) return rc;
    if ((rc = view_linear(L, &W->deccam, "mano_head.deccam", 3, d, 1))) return rc;
    const float *ip = get_f32(L, "mano_head.init_hand_pose", 2, S2(1, HM_NJ * 6));
    const float *ib = get_f32(L, "mano_head.init_betas", 2, S2(1, HM_NB));
    const float *ic = get_f32(L, "mano_head.init_cam", 2, S2(1, 3));
    if (!ip || !ib || !ic) return HM_E_SHAPE;
    memcpy(W->init_pose, ip, sizeof W->init_pose);
    memcpy(W->init_betas, ib, sizeof W->init_betas);
    memcpy(W->init_cam, ic, sizeof W->init_cam);
    return HM_OK;
}

/* ---- top level ---- */

int hm_weights_from_ckpt(hm_ckpt *ck, hm_weights *w) {
    memset(w, 0, sizeof *w);
    loader L = {.ck = ck, .w = w};
    int rc;
    if ((rc = read_config(&L, &w->cfg)) || (rc = load_backbone(&L)) || (rc = load_head(&L))) {
        hm_weights_release(w);
        return rc;
    }
    return HM_OK;
}

/* The loader's hm_weights_done: a view of the checkpoint is packed, so
 * its pages can go, and the progress line moves. */
typedef struct {
    hm_ckpt *ck;
    int progress;
    size_t packed, total;        /* bytes packed so far / expected */
    int last_pct;
} progress_ctx;

static void packed_one(void *ctx, const void *p, size_t bytes) {
    progress_ctx *P = ctx;
    hm_ckpt_release_range(P->ck, p, bytes);
    P->packed += bytes;
    if (!P->progress || P->total == 0) return;
    int pct = (int)(100.0 * P->packed / P->total);
    if (pct > 100) pct = 100;
    if (pct != P->last_pct) {
        hm_log(HM_LOG_PROGRESS, "loading weights %3d%%", pct);
        P->last_pct = pct;
    }
}

int hm_model_from_ckpt(hm_ckpt *ck, const char *src, const hm_load_opts *o, hm_model **out) {
    *out = NULL;
    const hm_backend *be = o->be ? o->be : &hm_backend_cpu;
    int rc = be->check(o->dev, o->precision);
    if (rc) return rc;
    hm_model *m = calloc(1, sizeof *m);
    if (!m) return hm_err(HM_E_NOMEM, "out of memory");
    m->be = be;
    m->device = o->dev;
    m->precision = o->precision;
    hm_weights w;
    if ((rc = hm_weights_from_ckpt(ck, &w))) goto fail;
    m->cfg = w.cfg;
    progress_ctx P = {.ck = ck, .progress = o->progress && hm_log_enabled(), .last_pct = -1,
                      .total = hm_weights_view_bytes(&w)};
    w.done = packed_one;
    w.done_ctx = &P;
    rc = be->pack(&w, o->precision, o->dev, &m->bm);
    hm_weights_release(&w);
    if (rc) goto fail;
    int found = 0;
    if ((rc = hm_mano_from_ckpt(ck, src, &m->mano, &found))) goto fail;
    if (!found && o->mano_npz) {
        if ((rc = hm_mano_from_npz(o->mano_npz, &m->mano))) goto fail;
        found = 1;
    }
    m->has_mano = found;
    *out = m;
    return HM_OK;
fail:
    hm_model_free(m);
    return rc;
}
