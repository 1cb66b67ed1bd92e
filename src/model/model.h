/* model.h - the HaMeR model as every backend sees it: configuration, the
 * loaded weights as plain tensors, MANO, the model handle, the per-request
 * state, and the one regression entry.
 *
 * Layering: the loader (load/) reads a checkpoint into hm_weights (plain
 * row-major tensors, PyTorch's layout, with the load-time constants folded
 * in), and a backend (backend/backend.h) packs them into its own layout.
 * hm_model is that pairing: the config, the backend and its packed model,
 * and MANO, which every backend shares (finalise runs on the host). It is
 * read-only after loading and may be shared by threads.
 *
 * hm_state holds, per request, the backend's state (activations for up to
 * max_batch crops, its threads) and the host buffers the finalise step
 * uses; a forward allocates nothing. The functions that make and run them
 * are the backend layer's (backend/backend.h), which knows the backends.
 */
#ifndef HM_MODEL_H
#define HM_MODEL_H

#include <stddef.h>
#include <stdint.h>
#include "core/pool.h"
#include "core/util.h"
#include "hamer.h"
#include "kernels/gemm.h" /* hm_precision: FP32 exact, FAST a backend's gated low-precision scheme */

#define HM_PATCH 16
#define HM_PATCH_PAD 2
#define HM_VIT_HEAD_DIM 80   /* ViT-H: heads = dim / 80 (not stored in the checkpoint) */
#define HM_DEC_HEAD_DIM 64   /* decoder: heads = inner / 64 */
#define HM_NJ 16             /* MANO joints (incl. global orient) */
#define HM_NV 778
#define HM_NF 1538
#define HM_NB 10             /* betas */
#define HM_NKP 21
#define HM_NPARAMS (9 * HM_NJ + HM_NB + 3)  /* 16 rotations, betas, pred_cam = 157 */
#define HM_NRAW (6 * HM_NJ + HM_NB + 3)     /* the head's readout: 6D pose, betas, cam = 109 */
#define HM_FOCAL 5000.0f     /* pixels, for a crop of HAMER_CROP_H */

/* The crops' normalisation (x/255 - mean) / std, RGB (normalise.c). */
extern const double hm_norm_mean[3], hm_norm_std[3];

typedef struct {
    int depth, dim, heads, mlp;      /* ViT: 32, 1280, 16, 5120 */
    int gh, gw, ntok;                /* token grid 16 x 12 = 192 */
    int hdepth, hdim, hheads, hinner, hmlp;  /* decoder: 6, 1024, 8, 512, 1024 */
} hm_config;

/* ---- the loaded weights, plain ------------------------------------------ */

/* A Linear: W [N, K] row-major (out, in), bias [N] or NULL. */
typedef struct {
    const float *w, *b;
    int N, K;
} hm_linear;

typedef struct {                 /* backbone.blocks.{i}. */
    const float *norm1_w, *norm1_b;  /* norm1.{weight,bias} [dim] */
    hm_linear qkv;               /* attn.qkv [3*dim, dim] + bias */
    hm_linear proj;              /* attn.proj [dim, dim] + bias */
    const float *norm2_w, *norm2_b;  /* norm2.{weight,bias} [dim] */
    hm_linear fc1;               /* mlp.fc1 [mlp, dim] + bias */
    hm_linear fc2;               /* mlp.fc2 [dim, mlp] + bias */
} hm_vit_block_w;

typedef struct {                 /* mano_head.transformer.transformer.layers.{j}. */
    const float *sa_norm_w, *sa_norm_b;  /* 0.norm.{weight,bias} [hdim] */
    hm_linear sa_v;              /* 0.fn.to_qkv.weight rows [2*inner, 3*inner) (the V third) */
    hm_linear sa_out;            /* 0.fn.to_out.0 [hdim, inner] + bias */
    const float *sa_qkv_full;    /* 0.fn.to_qkv.weight [3*inner, hdim] (the plain path) */
    const float *ca_norm_w, *ca_norm_b;  /* 1.norm.* */
    hm_linear ca_q;              /* 1.fn.to_q.weight [inner, hdim] */
    hm_linear ca_out;            /* 1.fn.to_out.0 [hdim, inner] + bias */
    hm_linear ca_kv;             /* 1.fn.to_kv.weight [2*inner, dim] (the plain path) */
    const float *ff_norm_w, *ff_norm_b;  /* 2.norm.* */
    hm_linear ff1;               /* 2.fn.net.0 [hmlp, hdim] + bias */
    hm_linear ff2;               /* 2.fn.net.3 [hdim, hmlp] + bias */
} hm_head_layer_w;

/* Everything a backend packs, as the checkpoint holds it plus the exact
 * load-time reformulations (docs/internals.md, "Exact reformulations").
 * Most pointers are views into the checkpoint's mapping; the folded ones
 * are owned (freed by hm_weights_release). A packer calls hm_weights_done
 * on each view it has packed, so the mapping's pages can go and the load
 * reports progress: the peak is then about the packed model. */
typedef struct hm_weights {
    hm_config cfg;
    hm_linear patch;             /* backbone.patch_embed.proj [dim, 3*16*16] + bias */
    hm_linear patch_u8;          /* the same divided by 255*std[c] (owned); its bias folded into u8_tok_bias */
    const float *pos;            /* [ntok, dim] = pos_embed[1:] + pos_embed[0] (owned) */
    const float *u8_tok_bias;    /* [ntok, dim] = pos - sum_valid W.mean/std (owned) */
    hm_vit_block_w *blocks;      /* [depth] (owned array of views) */
    const float *last_norm_w, *last_norm_b;  /* backbone.last_norm.* [dim] */
    const float *token0;         /* [hdim] to_token_embedding.bias + pos_embedding (owned) */
    const float *x1;             /* [hdim] token after layer 0's self-attention (owned) */
    const float *q1;             /* [inner] layer 0's cross-attention query (owned) */
    hm_linear kv_all;            /* every layer's to_kv stacked [hdepth*2*inner, dim] (owned) */
    hm_head_layer_w *layers;     /* [hdepth] (owned array of views) */
    hm_linear decpose, decshape, deccam;  /* [96|10|3, hdim] + bias */
    float init_pose[HM_NJ * 6], init_betas[HM_NB], init_cam[3];
    /* hm_weights_done: the loader's hook (may be NULL). */
    void (*done)(void *ctx, const void *p, size_t bytes);
    void *done_ctx;
    void *owned[12];              /* what hm_weights_release frees */
} hm_weights;

/* A packer is done with the view p of `bytes` bytes. */
static inline void hm_weights_done(const hm_weights *w, const void *p, size_t bytes) {
    if (w->done) w->done(w->done_ctx, p, bytes);
}
/* Frees what w owns (weights.c); w is zeroed. */
void hm_weights_release(hm_weights *w);
/* The bytes of the checkpoint views a packer reports done, each once: every
 * matrix view (patch, the blocks', the head's with to_qkv whole, the
 * readouts); what a load's progress counts up to. */
size_t hm_weights_view_bytes(const hm_weights *w);

/* ---- MANO --------------------------------------------------------------- */

typedef struct {                 /* mano.* buffers (or --mano npz) */
    float *v_template;           /* [778,3] */
    float *shapedirs;            /* [778*3, 10] */
    float *posedirs;             /* [135, 778*3] */
    float *j_regressor;          /* [16, 778] */
    int parents[HM_NJ];          /* parents[0] = -1 */
    float *lbs_weights;          /* [778, 16] */
    int32_t *faces;              /* [1538, 3] */
    int tips[5];                 /* extra_joints_idxs: fingertip vertices */
    int joint_map[HM_NKP];       /* 21 output joints in OpenPose order */
    /* The PCA pose space (hand_components [n_pca, 45], hand_mean [45]; not
     * used by the forward): the pose's PCA coefficients and SMPL-X's
     * mean-relative pose. n_pca 0: the file has none. */
    int n_pca;
    float hand_components[45 * 45];
    float hand_mean[45];
} hm_mano;

/* ---- the model ------------------------------------------------------------ */

struct hm_backend;

typedef struct hm_model {
    hm_config cfg;
    int precision;               /* hm_precision of the backbone's block matmuls */
    const struct hm_backend *be; /* the backend it was packed for (backend/backend.h) */
    int device;                  /* that backend's device index */
    void *bm;                    /* the backend's packed model */
    int has_mano;
    hm_mano mano;
    /* Loaded from a packed model file: the arrays inside [pack_map,
     * pack_map + pack_len) belong to that mapping, not to the heap, and
     * free unmaps it when pack_unmap is set (load/model_pack.c). */
    const void *pack_map;
    size_t pack_len;
    int pack_unmap;
} hm_model;

/* ---- per request ------------------------------------------------------------ */

/* Per-stage wall time, accumulated when profiling. */
typedef enum {
    HM_ST_PATCH, HM_ST_NORM, HM_ST_QKV, HM_ST_ATTN, HM_ST_PROJ, HM_ST_FC1, HM_ST_FC2,
    HM_ST_HEAD, HM_ST_MANO, HM_ST_FINALISE, HM_ST_COUNT
} hm_stage;
extern const char *const hm_stage_names[HM_ST_COUNT];

/* What the caller asks of a forward, shared by the state and its backend
 * state (which keeps a pointer to it). */
typedef struct {
    int plain;                   /* 1: textbook formulation (verification) */
    int profile;                 /* 1: accumulate stage_s; 2: also sim_s */
    int (*cancel)(void *);       /* asked between blocks and passes; NULL: never */
    void *cancel_user;
    double stage_s[HM_ST_COUNT];
    /* profile 2, the critical-path model (core/pool.h): sim_pool is the
     * pool whose runs the backend models; each stage's serial time plus its
     * runs' simulated times on 1 << k threads */
    hm_pool *sim_pool;
    int sim_split;               /* the work split's thread count (0: the pool's) */
    double sim_cpu;              /* the calling thread's CPU time at the last stage's end */
    double sim_s[HM_ST_COUNT][HM_POOL_SIM_N];
} hm_run_ctl;

/* The stage that ends now into the model: the calling thread's CPU time
 * since the last stage outside the pool's runs stays serial on every
 * thread count; the runs count as simulated (core/pool.h). */
static inline void hm_ctl_sim_toc(hm_run_ctl *c, int st) {
    double in_runs, sim[HM_POOL_SIM_N], now = hm_thread_cpu();
    hm_pool_sim_take(c->sim_pool, &in_runs, sim);
    double serial = now - c->sim_cpu - in_runs;
    serial = serial > 0 ? serial : 0;
    c->sim_cpu = now;
    for (int k = 0; k < HM_POOL_SIM_N; k++) c->sim_s[st][k] += serial + sim[k];
}

#define HM_TIC(ctl) double hm_tic_ = (ctl)->profile ? hm_now() : 0
#define HM_TOC(ctl, st)                                                    \
    do {                                                                   \
        if ((ctl)->profile) {                                              \
            double t_ = hm_now();                                          \
            (ctl)->stage_s[st] += t_ - hm_tic_;                            \
            if ((ctl)->sim_pool) hm_ctl_sim_toc((ctl), (st));              \
            hm_tic_ = t_;                                                  \
        }                                                                  \
    } while (0)

/* The cancel callback asked to stop (records the error when so). */
static inline int hm_ctl_cancelled(const hm_run_ctl *c) {
    return c->cancel && c->cancel(c->cancel_user) ? hm_err(HM_E_CANCELLED, "cancelled") : 0;
}

typedef struct hm_state {
    const hm_model *m;
    int max_batch;
    int nthreads;
    hm_run_ctl ctl;
    void *bs;                    /* the backend's state */
    float *params;               /* [max_batch, 157] when the caller wants none */
    float *verts;                /* [778, 3] for keypoints without vertices */
} hm_state;

/* What a forward writes per crop; every pointer may be NULL (not wanted).
 * Sizes as hamer_output in include/hamer.h. */
typedef struct {
    float *params, *pred_cam, *pred_cam_t, *vertices, *keypoints_3d, *keypoints_2d;
} hm_out;

/* ---- shared maths (host) ------------------------------------------------- */

/* uint8 HWC RGB crops -> float CHW normalised, as torchvision does it (normalise.c). */
void hm_u8_to_normalised(const uint8_t *crops, float *out, int B);
/* 6D -> rotation matrix, row-major (rot6d.c). */
void hm_rot6d_to_rotmat(const float *x6, float *R);
/* The readout [B, 109] (6D pose, betas, cam; init_* already added) -> params [B, 157]. */
void hm_raw_to_params(const float *raw, float *params, int B);
void hm_mano_forward(const hm_mano *mano, const float *params, float *verts, float *joints21); /* mano.c */
/* The unposed stages of hm_mano_forward: v_shaped [778*3], the rest joints
 * J [16*3] and v_posed (v_shaped + the pose correctives) [778*3]. */
void hm_mano_rest(const hm_mano *mano, const float *params, double *vs, double *J, double *vp); /* mano.c */
void hm_camera_cam_t(const float *pred_cam, float *cam_t);             /* camera.c */
/* Focal length of the full image's camera: HM_FOCAL / HAMER_CROP_H * max(W, H). */
float hm_camera_focal_full(int W, int H);
void hm_camera_project(const float *kp3d, const float *cam_t, float *kp2d);
void hm_camera_full(const float *pred_cam, int is_right, float cx, float cy, float box_size, int W, int H,
                    float *cam_t_full, float *focal);
void hm_camera_project_full(const float *pts, int n, const float *cam_t, float focal, int W, int H, float *px);
void hm_rotmat_to_axis_angle(const float *R, float *aa);

#endif
