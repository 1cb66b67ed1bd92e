/* model_pack.c - the packed model file (`hamer convert`): every array of an
 * hm_model stored as it lies in memory, so loading is an mmap, a checksum
 * pass and pointer assignments.
 *
 * Layout (little-endian, x86-64; the packed layouts are ISA-specific anyway):
 *   [0, 256)       pack_header: magic, format version, sizes, the model's
 *                  config, precision, the layout ISA, the low-precision
 *                  variant, the scheme string, and an XXH3 checksum of the
 *                  header and the section table;
 *   [256, ...)     the section table: name, offset, bytes, XXH3-64 checksum;
 *   sections       64-byte aligned, in table order, zero padding between.
 * Section 0, "matrices", holds one pack_matrix record per packed matrix
 * (shape, precision, low-precision variant); the others are the model's
 * arrays in the order hm_pack_visit_model lists them. The records are in
 * model_pack.h.
 *
 * One enumeration, hm_pack_visit_model, names every array the model owns;
 * the writer (model_pack_write.c), the reader (model_pack_read.c) and
 * hm_model_free (here) all walk it, so a new field cannot be written but
 * not read, or read but not freed. This file holds that enumeration, the
 * freeing and the checksums both directions compute.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>
#define XXH_STATIC_LINKING_ONLY /* XXH3_state_t on the stack */
#include <xxhash.h>

#include "core/cpu.h"
#include "load/load.h"
#include "model/model.h"
#include "load/model_pack.h"
#include "core/util.h"

/* Hashing runs on a thread pool only when there is enough of it. */
#define PACK_PARALLEL_BYTES ((uint64_t)64 << 20)

/* ---- the enumeration ---------------------------------------------------- */

/* Every array hm_model owns, in file order. Sizes come from the config
 * alone (the reader checks the file against them); N values are computed
 * in int, which check_config (model_pack_read.c) keeps from overflowing. */
int hm_pack_visit_model(hm_model *m, visitor *v) {
    const hm_config *c = &m->cfg;
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
        MAT(&H->sa_v, c->hinner, c->hdim, 0, SLOT_FP32, "layers.%d.sa_v", l);
        MAT(&H->sa_out, c->hdim, c->hinner, 1, SLOT_FP32, "layers.%d.sa_out", l);
        ARR(H->sa_qkv_full, (size_t)3 * c->hinner * c->hdim * F, "layers.%d.sa_qkv_full", l);
        ARR(H->ca_norm_w, c->hdim * F, "layers.%d.ca_norm_w", l);
        ARR(H->ca_norm_b, c->hdim * F, "layers.%d.ca_norm_b", l);
        MAT(&H->ca_q, c->hinner, c->hdim, 0, SLOT_FP32, "layers.%d.ca_q", l);
        MAT(&H->ca_out, c->hdim, c->hinner, 1, SLOT_FP32, "layers.%d.ca_out", l);
        MAT(&H->ca_kv, 2 * c->hinner, c->dim, 0, SLOT_FP32, "layers.%d.ca_kv", l);
        ARR(H->ff_norm_w, c->hdim * F, "layers.%d.ff_norm_w", l);
        ARR(H->ff_norm_b, c->hdim * F, "layers.%d.ff_norm_b", l);
        MAT(&H->ff1, c->hmlp, c->hdim, 1, SLOT_FP32, "layers.%d.ff1", l);
        MAT(&H->ff2, c->hdim, c->hmlp, 1, SLOT_FP32, "layers.%d.ff2", l);
    }
    MAT(&m->decpose, HM_NJ * 6, c->hdim, 1, SLOT_FP32, "decpose");
    MAT(&m->decshape, HM_NB, c->hdim, 1, SLOT_FP32, "decshape");
    MAT(&m->deccam, 3, c->hdim, 1, SLOT_FP32, "deccam");
    EMB(m->init_pose, "init_pose");
    EMB(m->init_betas, "init_betas");
    EMB(m->init_cam, "init_cam");
    if (m->has_mano) {
        hm_mano *mn = &m->mano;
        ARR(mn->v_template, HM_NV * 3 * F, "mano.v_template");
        ARR(mn->shapedirs, HM_NV * 3 * HM_NB * F, "mano.shapedirs");
        ARR(mn->posedirs, (size_t)(HM_NJ - 1) * 9 * HM_NV * 3 * F, "mano.posedirs");
        ARR(mn->j_regressor, HM_NJ * HM_NV * F, "mano.j_regressor");
        ARR(mn->lbs_weights, HM_NV * HM_NJ * F, "mano.lbs_weights");
        ARR(mn->faces, HM_NF * 3 * sizeof(int32_t), "mano.faces");
        EMB(mn->parents, "mano.parents");
        EMB(mn->tips, "mano.tips");
        EMB(mn->joint_map, "mano.joint_map");
    }
    return HM_OK;
#undef NAME
#undef MAT
#undef ARR
#undef EMB
}

int hm_pack_matrix_arrays(visitor *v, const char *name, hm_packed *p, int bias, const hm_packed_sizes *s) {
    char n[80];
    int rc = 0;
#define SUB(field, bytes, suffix) \
    if (!rc && (bytes)) rc = (snprintf(n, sizeof n, "%s." suffix, name), v->array(v, n, &(field), bytes))
    SUB(p->w, s->w, "w");
    SUB(p->lp, s->lp, "lp");
    SUB(p->lp_scale, s->lp_scale, "lp_scale");
    if (bias) SUB(p->bias, s->bias, "bias");
#undef SUB
    return rc;
}

/* ---- freeing ------------------------------------------------------------ */

/* Arrays inside the packed file's mapping belong to the mapping. */
static int owned(const hm_model *m, const void *p) {
    const uint8_t *u = p, *b = m->pack_map;
    return p && !(b && u >= b && u < b + m->pack_len);
}

static void release(const hm_model *m, void *p) {
    if (owned(m, p)) hm_free(p);
}

typedef struct {
    visitor v;
    hm_model *m;
} free_visitor;

static int free_matrix(visitor *v, const char *name, hm_packed *p, int N, int K, int bias, slot_kind kind) {
    const hm_model *m = ((free_visitor *)v)->m;
    release(m, p->w), release(m, p->bias), release(m, p->lp), release(m, p->lp_scale);
    memset(p, 0, sizeof *p);
    return HM_OK;
}

static int free_array(visitor *v, const char *name, void *field, size_t bytes) {
    release(((free_visitor *)v)->m, hm_pack_get_ptr(field));
    hm_pack_set_ptr(field, NULL);
    return HM_OK;
}

static int free_embedded(visitor *v, const char *name, void *data, size_t bytes) { return HM_OK; }

void hm_model_free(hm_model *m) {
    if (!m) return;
    free_visitor fv = {.v = {free_matrix, free_array, free_embedded}, .m = m};
    hm_pack_visit_model(m, &fv.v);
    free(m->blocks);
    free(m->layers);
    if (m->pack_map && m->pack_unmap) munmap((void *)m->pack_map, m->pack_len);
    free(m);
}

/* ---- checksums ---------------------------------------------------------- */

static void hash_task(void *ctx, int t, int tid) {
    section *s = (section *)ctx + t;
    s->sum = XXH3_64bits(s->ptr, (size_t)s->bytes);
}

/* XXH3 of n sections, on a short-lived pool when the total is large: one
 * core hashes a few GB/s out of the page cache, and load time is bounded
 * by this pass. */
int hm_pack_hash_sections(section *s, int n) {
    uint64_t total = 0;
    for (int i = 0; i < n; i++) total += s[i].bytes;
    hm_pool *pool = NULL;
    if (total >= PACK_PARALLEL_BYTES) {
        int ncpu = hm_cpu_online();
        int nt = ncpu > 16 ? 16 : ncpu;
        if (nt > 1 && !(pool = hm_pool_create(nt))) return HM_E_NOMEM;
    }
    hm_pool_run(pool, hash_task, s, n);
    hm_pool_destroy(pool);
    return HM_OK;
}

uint64_t hm_pack_meta_checksum(const pack_header *h, const void *table, size_t table_bytes) {
    pack_header z = *h;
    z.meta_checksum = 0;
    XXH3_state_t st;
    XXH3_64bits_reset(&st);
    XXH3_64bits_update(&st, &z, sizeof z);
    XXH3_64bits_update(&st, table, table_bytes);
    return XXH3_64bits_digest(&st);
}
