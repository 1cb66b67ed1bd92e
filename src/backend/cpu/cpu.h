/* cpu.h - the CPU backend: the packed model, the per-request state and the
 * stages of its forward (one file each).
 *
 * Linear weights are packed (hm_packed, kernels/gemm.h) in the layout of
 * the ISA level active when they were packed; vectors are owned float
 * copies, so the checkpoint mapping can be released once loading is done.
 * A model bound to a packed model file points into that file's read-only
 * mapping instead (load/model_pack_read.c).
 */
#ifndef HM_BACKEND_CPU_H
#define HM_BACKEND_CPU_H

#include <stddef.h>
#include <stdint.h>

#include "backend/backend.h"
#include "core/pool.h"
#include "kernels/gemm.h"
#include "kernels/norm.h"
#include "model/model.h"

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

typedef struct hm_cpu_model {
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
} hm_cpu_model;

typedef struct hm_cpu_state {
    const hm_cpu_model *m;
    hm_run_ctl *ctl;             /* the caller's switches (plain, profile, cancel) */
    int max_batch;
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
} hm_cpu_state;

/* Packing (cpu_pack.c): hm_weights -> a new hm_cpu_model. */
int hm_cpu_pack(const hm_weights *w, int precision, hm_cpu_model **out);
/* Every array of m in file order (cpu_visit.c). */
int hm_cpu_visit(hm_cpu_model *m, const hm_config *c, hm_visitor *v);

/* The state (cpu_state.c). */
int hm_cpu_state_init(hm_cpu_state *s, const hm_cpu_model *m, int max_batch, int nthreads, hm_run_ctl *ctl);
void hm_cpu_state_release(hm_cpu_state *s);

/* Stage entry points (one file each). B = crops in this pass. HM_OK or the
 * code of the kernel call that failed. */
int hm_patch_embed_f32(hm_cpu_state *s, const void *crops, int B);    /* patch_embed.c */
int hm_patch_embed_u8(hm_cpu_state *s, const uint8_t *crops, int B);
int hm_vit_forward(hm_cpu_state *s, int B);                            /* vit.c */
int hm_head_forward(hm_cpu_state *s, int B, float *params);            /* mano_head.c */

#endif
