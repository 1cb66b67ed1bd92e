/* synthetic.c - random full-size HaMeR weights in memory (see synthetic.h).
 *
 * The big tensors are filled in 1M-element chunks, each chunk with its own
 * generator seeded by (seed, key, chunk index): the values do not depend on
 * how chunks are spread over threads, and two threads fill the ~670M floats
 * of the full model in about a second. The normal deviates are Irwin-Hall
 * sums of four 16-bit uniforms (mean 0, variance 1, tails cut at 3.46
 * sigma): plenty for random weights and ~20x cheaper than Box-Muller.
 */
#include "cli/synthetic.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "format/ckpt.h"
#include "api.h"
#include "load/load.h"
#include "model/model.h"
#include "core/pool.h"
#include "core/util.h"

/* The release's widths (only the depths vary). */
enum { VIT_DIM = 1280, VIT_MLP = 5120, VIT_TOK = 192, HEAD_DIM = 1024, HEAD_INNER = 512, HEAD_MLP = 1024 };

#define CHUNK (1 << 20)
#define MAX_TENSORS 4096

typedef enum { FILL_NORMAL, FILL_MANO } fill_kind;

typedef struct {
    hm_tensor t;
    fill_kind kind;
    float mean, std;   /* FILL_NORMAL */
    void *owned;       /* hm_alloc'd data */
} spec;

struct hm_synthetic {
    spec *s;
    int n;
    uint64_t seed;
    hm_ckpt *ck;
    char *names;       /* all key strings, one block */
    size_t names_len, names_cap;
};

static uint64_t splitmix64(uint64_t *x) {
    uint64_t z = (*x += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

static uint64_t fnv1a(const char *s) {
    uint64_t h = 0xcbf29ce484222325ull;
    for (; *s; s++) h = (h ^ (unsigned char)*s) * 0x100000001b3ull;
    return h;
}

/* Approximately N(0,1): the sum of four 16-bit uniforms, standardised. */
static inline float approx_normal(uint64_t r) {
    uint32_t s = (uint32_t)(r & 0xffff) + (uint32_t)((r >> 16) & 0xffff) + (uint32_t)((r >> 32) & 0xffff) +
                 (uint32_t)(r >> 48);
    return ((float)s - 131070.0f) * (float)(1.7320508075688772 / 65536.0);
}

/* ---- tensor table ---- */

static const char *intern(hm_synthetic *y, const char *name) {
    size_t len = strlen(name) + 1;
    if (y->names_len + len > y->names_cap) return NULL; /* sized up front; never happens */
    char *p = y->names + y->names_len;
    memcpy(p, name, len);
    y->names_len += len;
    return p;
}

/* Add a tensor of the given shape; NULL (error recorded) on failure. */
static spec *add(hm_synthetic *y, const char *name, hm_dtype dt, int ndim, const int64_t *shape, fill_kind kind,
                 float mean, float std) {
    if (y->n == MAX_TENSORS) {
        hm_err(HM_E_ARG, "synthetic model: too many tensors");
        return NULL;
    }
    spec *s = &y->s[y->n];
    memset(s, 0, sizeof *s);
    s->t.name = intern(y, name);
    s->t.dtype = dt;
    s->t.ndim = ndim;
    size_t numel = 1;
    for (int d = 0; d < ndim; d++) s->t.shape[d] = shape[d], numel *= (size_t)shape[d];
    s->kind = kind, s->mean = mean, s->std = std;
    if (!s->t.name || !(s->owned = hm_alloc(numel * hm_dtype_size(dt)))) {
        if (s->t.name) hm_err(HM_E_NOMEM, "synthetic model: out of memory for '%s' (%zu elements)", name, numel);
        else hm_err(HM_E_ARG, "synthetic model: key table overflow");
        return NULL;
    }
    s->t.data = s->owned;
    s->t.numel = (int64_t)numel;
    y->n++;
    return s;
}

#define SH(...) ((const int64_t[]){__VA_ARGS__})
#define NARGS(...) ((int)(sizeof((const int64_t[]){__VA_ARGS__}) / sizeof(int64_t)))
#define NORMAL(name, mean, std, ...) \
    do { if (!add(y, name, HM_DT_F32, NARGS(__VA_ARGS__), SH(__VA_ARGS__), FILL_NORMAL, mean, std)) return HM_E_NOMEM; } while (0)

static int add_linear(hm_synthetic *y, const char *prefix, int out_f, int in_f, int bias, float std, float bias_std) {
    char k[320];
    snprintf(k, sizeof k, "%s.weight", prefix);
    NORMAL(k, 0.0f, std, out_f, in_f);
    if (bias) {
        snprintf(k, sizeof k, "%s.bias", prefix);
        NORMAL(k, 0.0f, bias_std, out_f);
    }
    return HM_OK;
}

static int add_norm(hm_synthetic *y, const char *prefix, int dim) {
    char k[320];
    snprintf(k, sizeof k, "%s.weight", prefix);
    NORMAL(k, 1.0f, 0.02f, dim);
    snprintf(k, sizeof k, "%s.bias", prefix);
    NORMAL(k, 0.0f, 0.01f, dim);
    return HM_OK;
}

static int build_table(hm_synthetic *y, int depth, int head_depth) {
    char p[256];
    int rc;
    NORMAL("backbone.pos_embed", 0.0f, 0.02f, 1, VIT_TOK + 1, VIT_DIM);
    NORMAL("backbone.patch_embed.proj.weight", 0.0f, 0.02f, VIT_DIM, 3, HM_PATCH, HM_PATCH);
    NORMAL("backbone.patch_embed.proj.bias", 0.0f, 0.02f, VIT_DIM);
    for (int i = 0; i < depth; i++) {
#define L(fmt, ...) (snprintf(p, sizeof p, fmt, __VA_ARGS__), p)
        if ((rc = add_norm(y, L("backbone.blocks.%d.norm1", i), VIT_DIM))) return rc;
        if ((rc = add_linear(y, L("backbone.blocks.%d.attn.qkv", i), 3 * VIT_DIM, VIT_DIM, 1, 0.02f, 0.01f))) return rc;
        if ((rc = add_linear(y, L("backbone.blocks.%d.attn.proj", i), VIT_DIM, VIT_DIM, 1, 0.02f, 0.01f))) return rc;
        if ((rc = add_norm(y, L("backbone.blocks.%d.norm2", i), VIT_DIM))) return rc;
        if ((rc = add_linear(y, L("backbone.blocks.%d.mlp.fc1", i), VIT_MLP, VIT_DIM, 1, 0.02f, 0.01f))) return rc;
        if ((rc = add_linear(y, L("backbone.blocks.%d.mlp.fc2", i), VIT_DIM, VIT_MLP, 1, 0.02f, 0.01f))) return rc;
    }
    if ((rc = add_norm(y, "backbone.last_norm", VIT_DIM))) return rc;

    const char *t = "mano_head.transformer";
    NORMAL("mano_head.transformer.pos_embedding", 0.0f, 0.5f, 1, 1, HEAD_DIM);
    if ((rc = add_linear(y, "mano_head.transformer.to_token_embedding", HEAD_DIM, 1, 1, 0.5f, 0.5f))) return rc;
    for (int j = 0; j < head_depth; j++) {
        if ((rc = add_norm(y, L("%s.transformer.layers.%d.0.norm", t, j), HEAD_DIM))) return rc;
        if ((rc = add_linear(y, L("%s.transformer.layers.%d.0.fn.to_qkv", t, j), 3 * HEAD_INNER, HEAD_DIM, 0, 0.02f, 0))) return rc;
        if ((rc = add_linear(y, L("%s.transformer.layers.%d.0.fn.to_out.0", t, j), HEAD_DIM, HEAD_INNER, 1, 0.02f, 0.01f))) return rc;
        if ((rc = add_norm(y, L("%s.transformer.layers.%d.1.norm", t, j), HEAD_DIM))) return rc;
        if ((rc = add_linear(y, L("%s.transformer.layers.%d.1.fn.to_kv", t, j), 2 * HEAD_INNER, VIT_DIM, 0, 0.02f, 0))) return rc;
        if ((rc = add_linear(y, L("%s.transformer.layers.%d.1.fn.to_q", t, j), HEAD_INNER, HEAD_DIM, 0, 0.02f, 0))) return rc;
        if ((rc = add_linear(y, L("%s.transformer.layers.%d.1.fn.to_out.0", t, j), HEAD_DIM, HEAD_INNER, 1, 0.02f, 0.01f))) return rc;
        if ((rc = add_norm(y, L("%s.transformer.layers.%d.2.norm", t, j), HEAD_DIM))) return rc;
        if ((rc = add_linear(y, L("%s.transformer.layers.%d.2.fn.net.0", t, j), HEAD_MLP, HEAD_DIM, 1, 0.02f, 0.01f))) return rc;
        if ((rc = add_linear(y, L("%s.transformer.layers.%d.2.fn.net.3", t, j), HEAD_DIM, HEAD_MLP, 1, 0.02f, 0.01f))) return rc;
#undef L
    }
    /* Small readouts keep the camera scale near init_cam (s ~ 0.9), so tz
     * and the projected keypoints stay finite. */
    if ((rc = add_linear(y, "mano_head.decpose", HM_NJ * 6, HEAD_DIM, 1, 0.002f, 0.002f))) return rc;
    if ((rc = add_linear(y, "mano_head.decshape", HM_NB, HEAD_DIM, 1, 0.002f, 0.002f))) return rc;
    if ((rc = add_linear(y, "mano_head.deccam", 3, HEAD_DIM, 1, 0.002f, 0.002f))) return rc;

    /* Mean parameters and MANO buffers: filled by fill_mano(). */
    static const struct { const char *name; hm_dtype dt; int ndim; int64_t shape[3]; } fixed[] = {
        {"mano_head.init_hand_pose", HM_DT_F32, 2, {1, HM_NJ * 6}},
        {"mano_head.init_betas", HM_DT_F32, 2, {1, HM_NB}},
        {"mano_head.init_cam", HM_DT_F32, 2, {1, 3}},
        {"mano.v_template", HM_DT_F32, 2, {HM_NV, 3}},
        {"mano.shapedirs", HM_DT_F32, 3, {HM_NV, 3, HM_NB}},
        {"mano.posedirs", HM_DT_F32, 2, {(HM_NJ - 1) * 9, HM_NV * 3}},
        {"mano.J_regressor", HM_DT_F32, 2, {HM_NJ, HM_NV}},
        {"mano.parents", HM_DT_I64, 1, {HM_NJ}},
        {"mano.lbs_weights", HM_DT_F32, 2, {HM_NV, HM_NJ}},
        {"mano.faces_tensor", HM_DT_I64, 2, {HM_NF, 3}},
        {"mano.extra_joints_idxs", HM_DT_I64, 1, {5}},
        {"mano.joint_map", HM_DT_I64, 1, {HM_NKP}},
    };
    for (size_t i = 0; i < sizeof fixed / sizeof *fixed; i++)
        if (!add(y, fixed[i].name, fixed[i].dt, fixed[i].ndim, fixed[i].shape, FILL_MANO, 0, 0)) return HM_E_NOMEM;
    return HM_OK;
}

/* ---- parallel fill of the random tensors ---- */

typedef struct {
    hm_synthetic *y;
    int *tensor;       /* per task: tensor index */
    int *chunk;        /* per task: chunk index within the tensor */
} fill_ctx;

static void fill_task(void *ctx, int task, int tid) {
    fill_ctx *f = ctx;
    const spec *s = &f->y->s[f->tensor[task]];
    size_t c = (size_t)f->chunk[task], n = (size_t)s->t.numel;
    size_t lo = c * CHUNK, hi = lo + CHUNK < n ? lo + CHUNK : n;
    uint64_t st = f->y->seed ^ fnv1a(s->t.name) ^ (c * 0xd1b54a32d192ed03ull);
    splitmix64(&st);
    float *d = (float *)s->owned;
    const float mean = s->mean, std = s->std;
    for (size_t i = lo; i < hi; i++) d[i] = mean + std * approx_normal(splitmix64(&st));
}

static int fill_random(hm_synthetic *y, hm_pool *pool) {
    size_t ntasks = 0;
    for (int i = 0; i < y->n; i++)
        if (y->s[i].kind == FILL_NORMAL) ntasks += ((size_t)y->s[i].t.numel + CHUNK - 1) / CHUNK;
    fill_ctx f = {y, malloc((ntasks ? ntasks : 1) * sizeof(int)), malloc((ntasks ? ntasks : 1) * sizeof(int))};
    if (!f.tensor || !f.chunk) {
        free(f.tensor), free(f.chunk);
        return hm_err(HM_E_NOMEM, "synthetic model: out of memory");
    }
    size_t k = 0;
    for (int i = 0; i < y->n; i++) {
        if (y->s[i].kind != FILL_NORMAL) continue;
        size_t nc = ((size_t)y->s[i].t.numel + CHUNK - 1) / CHUNK;
        for (size_t c = 0; c < nc; c++) f.tensor[k] = i, f.chunk[k] = (int)c, k++;
    }
    hm_pool_run(pool, fill_task, &f, (int)ntasks);
    free(f.tensor), free(f.chunk);
    return HM_OK;
}

/* ---- mean parameters and MANO buffers ---- */

static void *data_of(hm_synthetic *y, const char *name) {
    for (int i = 0; i < y->n; i++)
        if (!strcmp(y->s[i].t.name, name)) return y->s[i].owned;
    return NULL;
}

static void vsub(const float *a, const float *b, float *o) { for (int i = 0; i < 3; i++) o[i] = a[i] - b[i]; }

static void vnorm(float *v) {
    float n = sqrtf(v[0] * v[0] + v[1] * v[1] + v[2] * v[2]);
    for (int i = 0; i < 3; i++) v[i] /= n;
}

/* A flat right hand in metres (fingers along -x, MANO joint order): joint
 * positions J and, per joint, the end point E of the bone it drives. */
static void hand_skeleton(float J[HM_NJ][3], float E[HM_NJ][3]) {
    static const struct { int first; float mcp[3], len[3], dir[3]; } fingers[5] = {
        {1, {-0.066f, 0.004f, 0.024f}, {0.036f, 0.024f, 0.020f}, {-1.0f, -0.05f, 0.019f}},   /* index */
        {4, {-0.068f, 0.004f, 0.004f}, {0.040f, 0.026f, 0.021f}, {-1.0f, -0.05f, 0.003f}},   /* middle */
        {7, {-0.058f, 0.000f, -0.034f}, {0.028f, 0.019f, 0.017f}, {-1.0f, -0.05f, -0.027f}}, /* pinky */
        {10, {-0.064f, 0.002f, -0.015f}, {0.036f, 0.024f, 0.020f}, {-1.0f, -0.05f, -0.012f}},/* ring */
        {13, {-0.020f, -0.008f, 0.022f}, {0.032f, 0.030f, 0.026f}, {-0.6f, -0.25f, 0.75f}},  /* thumb */
    };
    memset(J, 0, sizeof(float) * HM_NJ * 3);
    E[0][0] = -0.066f, E[0][1] = 0.003f, E[0][2] = -0.005f; /* palm centre line */
    for (int f = 0; f < 5; f++) {
        float d[3] = {fingers[f].dir[0], fingers[f].dir[1], fingers[f].dir[2]}, p[3];
        vnorm(d);
        memcpy(p, fingers[f].mcp, sizeof p);
        for (int k = 0; k < 3; k++) {
            int j = fingers[f].first + k;
            memcpy(J[j], p, sizeof p);
            for (int i = 0; i < 3; i++) p[i] += d[i] * fingers[f].len[k];
            memcpy(E[j], p, sizeof p);
        }
    }
}

static void fill_mano(hm_synthetic *y) {
    static const int64_t parents[HM_NJ] = {-1, 0, 1, 2, 0, 4, 5, 0, 7, 8, 0, 10, 11, 0, 13, 14};
    static const int64_t tips[5] = {744, 320, 443, 554, 671}, tip_bone[5] = {15, 3, 6, 12, 9};
    static const int64_t jmap[HM_NKP] = {0, 13, 14, 15, 16, 1, 2, 3, 17, 4, 5, 6, 18, 10, 11, 12, 19, 7, 8, 9, 20};
    uint64_t st = y->seed ^ 0x6d616e6f; /* "mano" */
    splitmix64(&st);
#define UNIF() ((float)(splitmix64(&st) >> 40) * (1.0f / 16777216.0f))

    float *pose = data_of(y, "mano_head.init_hand_pose");
    for (int j = 0; j < HM_NJ; j++) {   /* identity rotation: columns (1,0,0), (0,1,0) */
        static const float id6[6] = {1, 0, 0, 0, 1, 0};
        memcpy(pose + 6 * j, id6, sizeof id6);
    }
    memset(data_of(y, "mano_head.init_betas"), 0, HM_NB * sizeof(float));
    float *cam = data_of(y, "mano_head.init_cam");
    cam[0] = 0.9f, cam[1] = 0.0f, cam[2] = 0.0f;

    float J[HM_NJ][3], E[HM_NJ][3];
    hand_skeleton(J, E);
    /* Vertex v lies on bone v % 16 at fraction t along it, 8 mm off its
     * axis; the fingertip vertices sit on the tips of the distal bones. The
     * first six vertices of each bone sit at its joint: the regressor uses them. */
    float *vt = data_of(y, "mano.v_template"), *lbs = data_of(y, "mano.lbs_weights");
    int bone[HM_NV];
    float tt[HM_NV];
    memset(lbs, 0, sizeof(float) * HM_NV * HM_NJ);
    for (int v = 0; v < HM_NV; v++) bone[v] = v % HM_NJ, tt[v] = v / HM_NJ < 6 ? 0.0f : UNIF();
    for (int i = 0; i < 5; i++) bone[tips[i]] = (int)tip_bone[i], tt[tips[i]] = 1.0f;
    for (int v = 0; v < HM_NV; v++) {
        int j = bone[v], is_tip = 0;
        for (int i = 0; i < 5; i++) is_tip |= v == tips[i];
        float axis[3], r[3] = {UNIF() - 0.5f, UNIF() - 0.5f, UNIF() - 0.5f};
        vsub(E[j], J[j], axis);
        float aa = axis[0] * axis[0] + axis[1] * axis[1] + axis[2] * axis[2];
        float ra = (r[0] * axis[0] + r[1] * axis[1] + r[2] * axis[2]) / aa;
        for (int i = 0; i < 3; i++) r[i] -= ra * axis[i];
        vnorm(r);
        for (int i = 0; i < 3; i++) vt[3 * v + i] = J[j][i] + tt[v] * axis[i] + (is_tip ? 0.0f : 0.008f * r[i]);
        /* Skinning: blend the bone's joint with its parent along the bone. */
        float *w = lbs + (size_t)v * HM_NJ;
        if (j == 0) w[0] = 1.0f;
        else w[j] = 0.5f + 0.5f * tt[v], w[parents[j]] = 0.5f - 0.5f * tt[v];
    }
    float *jr = data_of(y, "mano.J_regressor");
    memset(jr, 0, sizeof(float) * HM_NJ * HM_NV);
    for (int j = 0; j < HM_NJ; j++)
        for (int k = 0; k < 6; k++) jr[(size_t)j * HM_NV + j + HM_NJ * k] = 1.0f / 6.0f;
    float *sd = data_of(y, "mano.shapedirs"), *pd = data_of(y, "mano.posedirs");
    for (size_t i = 0; i < (size_t)HM_NV * 3 * HM_NB; i++) sd[i] = 1e-3f * approx_normal(splitmix64(&st));
    for (size_t i = 0; i < (size_t)(HM_NJ - 1) * 9 * HM_NV * 3; i++) pd[i] = 1e-3f * approx_normal(splitmix64(&st));
    memcpy(data_of(y, "mano.parents"), parents, sizeof parents);
    memcpy(data_of(y, "mano.extra_joints_idxs"), tips, sizeof tips);
    memcpy(data_of(y, "mano.joint_map"), jmap, sizeof jmap);
    /* Triangles between vertices of the same bone (v, v+16, v+32). */
    int64_t *faces = data_of(y, "mano.faces_tensor");
    for (int f = 0; f < HM_NF; f++) {
        int a = f % HM_NV;
        faces[3 * f] = a, faces[3 * f + 1] = (a + HM_NJ) % HM_NV, faces[3 * f + 2] = (a + 2 * HM_NJ) % HM_NV;
    }
#undef UNIF
}

/* ---- public ---- */

void hm_synthetic_free(hm_synthetic *y) {
    if (!y) return;
    hm_ckpt_close(y->ck);
    for (int i = 0; y->s && i < y->n; i++) hm_free(y->s[i].owned);
    free(y->s);
    free(y->names);
    free(y);
}

int hm_synthetic_new(int depth, int head_depth, uint64_t seed, int nthreads, hm_synthetic **out) {
    if (!out) return hm_err(HM_E_ARG, "synthetic model: NULL output");
    *out = NULL;
    if (depth < 1 || depth > 256 || head_depth < 1 || head_depth > 64 || nthreads < 1 || nthreads > 1024)
        return hm_err(HM_E_ARG, "synthetic model: bad depth %d / head depth %d / threads %d", depth, head_depth, nthreads);
    hm_synthetic *y = calloc(1, sizeof *y);
    if (!y) return hm_err(HM_E_NOMEM, "synthetic model: out of memory");
    y->seed = seed;
    y->names_cap = (size_t)MAX_TENSORS * 80;
    y->s = calloc(MAX_TENSORS, sizeof *y->s);
    y->names = malloc(y->names_cap);
    hm_pool *pool = NULL;
    int rc = !y->s || !y->names ? hm_err(HM_E_NOMEM, "synthetic model: out of memory") : HM_OK;
    if (!rc) rc = build_table(y, depth, head_depth);
    if (!rc && nthreads > 1 && !(pool = hm_pool_create(nthreads))) rc = HM_E_NOMEM;
    if (!rc) rc = fill_random(y, pool);
    hm_pool_destroy(pool);
    if (!rc) {
        fill_mano(y);
        hm_tensor *tab = malloc((size_t)y->n * sizeof *tab);
        if (!tab) rc = hm_err(HM_E_NOMEM, "synthetic model: out of memory");
        for (int i = 0; !rc && i < y->n; i++) tab[i] = y->s[i].t;
        if (!rc) rc = hm_ckpt_from_tensors(tab, y->n, &y->ck);
        free(tab);
    }
    if (rc) {
        hm_synthetic_free(y);
        return rc;
    }
    *out = y;
    return HM_OK;
}

hamer_model *hm_synthetic_model_on(const hm_synthetic *y, int precision, const char *device) {
    if (!y) {
        hm_err(HM_E_ARG, "%s: NULL synthetic model", __func__);
        return NULL;
    }
    if (precision != HAMER_PRECISION_FP32 && precision != HAMER_PRECISION_FAST) {
        hm_err(HM_E_ARG, "%s: unknown precision %d", __func__, precision);
        return NULL;
    }
    hm_model *m;
    hm_load_opts o = {.precision = precision};
    if (hm_device_parse(device, &o.be, &o.dev)) return NULL;
    if (hm_model_from_ckpt(y->ck, "synthetic model", &o, &m)) return NULL;
    return hm_model_handle(m);
}

hamer_model *hm_synthetic_model(const hm_synthetic *y, int precision) { return hm_synthetic_model_on(y, precision, NULL); }
