/* model.h - the HaMeR model: configuration, weights, per-request state.
 *
 * hm_model is read-only after hm_model_load and may be shared by threads.
 * hm_state holds every activation buffer for up to max_batch crops and a
 * thread pool; a forward pass allocates nothing.
 *
 * Weight fields name the checkpoint key they come from. Linear weights are
 * packed (hm_packed, kernels/gemm.h); vectors are owned float copies, so the
 * checkpoint mapping can be released once loading is done. A model loaded
 * from a packed model file points into that file's read-only mapping.
 */
#ifndef HM_MODEL_H
#define HM_MODEL_H

#include <stddef.h>
#include <stdint.h>
#include "kernels/gemm.h"
#include "kernels/norm.h"
#include "core/pool.h"
#include "core/util.h"
#include "hamer.h"

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
#define HM_FOCAL 5000.0f     /* pixels, for a crop of HAMER_CROP_H */

/* The crops' normalisation (x/255 - mean) / std, RGB (patch_embed.c). */
extern const double hm_norm_mean[3], hm_norm_std[3];

typedef struct {
    int depth, dim, heads, mlp;      /* ViT: 32, 1280, 16, 5120 */
    int gh, gw, ntok;                /* token grid 16 x 12 = 192 */
    int hdepth, hdim, hheads, hinner, hmlp;  /* decoder: 6, 1024, 8, 512, 1024 */
} hm_config;

typedef struct {                 /* backbone.blocks.{i}. */
    float *norm1_w, *norm1_b;    /* norm1.{weight,bias} [dim] */
    hm_packed qkv;               /* attn.qkv [3*dim, dim] + bias */
    hm_packed proj;              /* attn.proj [dim, dim] + bias */
    float *norm2_w, *norm2_b;    /* norm2.{weight,bias} [dim] */
    hm_packed fc1;               /* mlp.fc1 [mlp, dim] + bias */
    hm_packed fc2;               /* mlp.fc2 [dim, mlp] + bias */
} hm_vit_block;

typedef struct {                 /* mano_head.transformer.transformer.layers.{j}. */
    float *sa_norm_w, *sa_norm_b;/* 0.norm.{weight,bias} [hdim] */
    hm_packed sa_v;              /* 0.fn.to_qkv.weight rows [2*inner, 3*inner) (the V third) */
    hm_packed sa_out;            /* 0.fn.to_out.0 [hdim, inner] + bias */
    float *sa_qkv_full;          /* 0.fn.to_qkv.weight [3*inner, hdim], kept for the plain path */
    float *ca_norm_w, *ca_norm_b;/* 1.norm.* */
    hm_packed ca_q;              /* 1.fn.to_q.weight [inner, hdim] */
    hm_packed ca_out;            /* 1.fn.to_out.0 [hdim, inner] + bias */
    hm_packed ca_kv;             /* 1.fn.to_kv.weight [2*inner, dim] (plain path only) */
    float *ff_norm_w, *ff_norm_b;/* 2.norm.* */
    hm_packed ff1;               /* 2.fn.net.0 [hmlp, hdim] + bias */
    hm_packed ff2;               /* 2.fn.net.3 [hdim, hmlp] + bias */
} hm_head_layer;

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
} hm_mano;

typedef struct hm_model {
    hm_config cfg;
    int precision;               /* hm_precision of the backbone's block matmuls */
    /* backbone */
    hm_packed patch;             /* backbone.patch_embed.proj [dim, 3*16*16] + bias */
    hm_packed patch_u8;          /* same, divided by 255*std[c]; bias folded into u8_tok_bias */
    float *pos;                  /* [ntok, dim] = pos_embed[1:] + pos_embed[0] */
    float *u8_tok_bias;          /* [ntok, dim] = pos - sum_valid W.mean/std (u8 path) */
    hm_vit_block *blocks;        /* [depth] */
    float *last_norm_w, *last_norm_b;  /* backbone.last_norm.* [dim] */
    /* decoder head */
    float *token0;               /* [hdim] to_token_embedding.bias + pos_embedding (input is 0) */
    float *x1;                   /* [hdim] token after layer 0's self-attention (constant) */
    float *q1;                   /* [inner] layer 0 cross-attention query (constant) */
    hm_packed kv_all;            /* all layers' to_kv stacked [hdepth*2*inner, dim] */
    hm_head_layer *layers;       /* [hdepth] */
    hm_packed decpose, decshape, deccam;  /* [96|10|3, hdim] + bias */
    float init_pose[HM_NJ * 6], init_betas[HM_NB], init_cam[3];
    /* MANO */
    int has_mano;
    hm_mano mano;
    /* Loaded from a packed model file: the arrays inside [pack_map,
     * pack_map + pack_len) belong to that mapping, not to the heap, and
     * free unmaps it when pack_unmap is set (model_pack.c). */
    const void *pack_map;
    size_t pack_len;
    int pack_unmap;
} hm_model;

/* Per-stage wall time, accumulated when hm_state.profile is set. */
typedef enum {
    HM_ST_PATCH, HM_ST_NORM, HM_ST_QKV, HM_ST_ATTN, HM_ST_PROJ, HM_ST_FC1, HM_ST_FC2,
    HM_ST_HEAD, HM_ST_MANO, HM_ST_FINALISE, HM_ST_COUNT
} hm_stage;
extern const char *const hm_stage_names[HM_ST_COUNT];
#define HM_TIC(s) double hm_tic_ = (s)->profile ? hm_now() : 0
#define HM_TOC(s, st) do { if ((s)->profile) { double t_ = hm_now(); (s)->stage_s[st] += t_ - hm_tic_; hm_tic_ = t_; } } while (0)

typedef struct hm_state {
    const hm_model *m;
    int max_batch;
    int plain;                   /* 1: textbook formulation (verification) */
    int profile;                 /* 1: accumulate stage_s */
    int (*cancel)(void *);       /* asked between blocks and passes; NULL: never */
    void *cancel_user;
    double stage_s[HM_ST_COUNT];
    hm_pool *pool;
    int nthreads;
    /* backbone activations, T = max_batch * ntok rows */
    float *cols;                 /* [T, 768] im2col */
    float *x;                    /* [T, dim] residual stream / context */
    float *h;                    /* [T, dim] normalised */
    float *qkv;                  /* [T, 3*dim] */
    float *att;                  /* [T, dim] attention output (heads concatenated) */
    float *mlp;                  /* [T, mlp], row stride mlp_ld */
    int mlp_ld;
    float *scores;               /* [nthreads, ntok, ntok] attention scratch */
    int attn_mode;               /* fast precision: its attention head, HM_ATTN_* (kernels/attn.h) */
    /* head */
    float *kv;                   /* [T, hdepth*2*inner] */
    float *hx, *hh, *hq, *ha, *hf;   /* [B, hdim] / [B, inner] / [B, hmlp] */
    float *hscore;               /* [nthreads, ntok] */
    float *hkv1;                 /* [T, 2*inner] plain path */
    float *hsa;                  /* [B, 3*inner] plain path */
    float *pose6d;               /* [B, 96+10+3] raw readout */
    float *img;                  /* [B, 3, 256, 192] plain path: u8 crops normalised */
    float *params;               /* [B, 157] when the caller wants none */
    float *verts;                /* [778, 3] for keypoints without vertices */
} hm_state;

/* The cancel callback asked to stop (records the error when so). */
static inline int hm_state_cancelled(const hm_state *s) {
    return s->cancel && s->cancel(s->cancel_user) ? hm_err(HM_E_CANCELLED, "cancelled") : 0;
}

/* What a forward writes per crop; every pointer may be NULL (not wanted).
 * Sizes as hamer_output in include/hamer.h. */
typedef struct {
    float *params, *pred_cam, *pred_cam_t, *vertices, *keypoints_3d, *keypoints_2d;
} hm_out;

/* The one regression entry (forward.c): B crops, float [B,3,256,192]
 * normalised (any alignment) or uint8 [B,256,192,3] RGB, in passes of at
 * most max_batch. HM_OK or the first failing stage's code (outputs then
 * partly written); HM_E_NOMANO if mesh outputs are asked of a model
 * without MANO. */
int hm_forward(hm_state *s, const void *crops, int is_u8, int B, const hm_out *out);

/* Stage entry points (one file each). B = crops in this pass. HM_OK or the
 * code of the kernel call that failed. */
int hm_patch_embed_f32(hm_state *s, const void *crops, int B);        /* patch_embed.c */
int hm_patch_embed_u8(hm_state *s, const uint8_t *crops, int B);
/* uint8 HWC RGB crops -> float CHW normalised, as torchvision does it. */
void hm_u8_to_normalised(const uint8_t *crops, float *out, int B);
int hm_vit_forward(hm_state *s, int B);                                /* vit.c */
int hm_head_forward(hm_state *s, int B, float *params);                /* mano_head.c */
void hm_rot6d_to_rotmat(const float *x6, float *R);                    /* mano_head.c */
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

/* Per-request state (state.c): buffers for max_batch crops, a pool of
 * nthreads, the pool scratch reserved. */
int hm_state_init(hm_state *s, const hm_model *m, int max_batch, int nthreads);
void hm_state_release(hm_state *s);

#endif
