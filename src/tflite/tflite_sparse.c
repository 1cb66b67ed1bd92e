/* tflite/tflite_sparse.c - a constant stored sparse (Tensor.sparsity) mapped
 * to its dense layout, so the reader can densify it at load.
 *
 * SparsityParameters (schema.fbs) describe the stored values as the leaves
 * of a tree walked level by level: the "expanded" tensor has the original
 * dimensions (each blocked one divided by its block size) followed by one
 * dimension per block (block_map[b] names the original dimension block b
 * splits); traversal_order lists the expanded dimensions from the outermost
 * level to the innermost; dim_metadata[l] stores level l either DENSE
 * (dense_size positions under each parent position) or SPARSE_CSR (parent
 * position p owns array_indices[array_segments[p] .. array_segments[p+1]),
 * each index a coordinate along that level's dimension). Positions are
 * numbered level by level (dense: parent * dense_size + i; sparse: the
 * index into array_indices), and the stored values are the positions of
 * the innermost level, in order.
 *
 * Everything is checked before it is used: the permutation, the block
 * sizes (dense levels, dividing their dimension), every dense_size against
 * its dimension, every segment vector (0 first, non-decreasing, one entry
 * per parent position plus one, ending at the index count) and every
 * index against its dimension; the number of positions is bounded at each
 * level, so the walk costs at most the stored vectors plus the values.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/util.h"
#include "tflite/tflite_impl.h"
#include "tflite/tflite_sparse.h"

enum { SP_TRAVERSAL = 0, SP_BLOCK_MAP = 1, SP_DIM_METADATA = 2 };
enum { DM_FORMAT = 0, DM_DENSE_SIZE = 1, DM_SEGMENTS_TYPE = 2, DM_SEGMENTS = 3, DM_INDICES_TYPE = 4, DM_INDICES = 5 };
enum { FMT_DENSE = 0, FMT_SPARSE_CSR = 1 };
/* SparseIndexVector members: Int32Vector, Uint16Vector, Uint8Vector (each a table with values: [T], id 0). */
enum { SIV_INT32 = 1, SIV_UINT16 = 2, SIV_UINT8 = 3 };

#define MAX_LEVELS (2 * HM_TFL_MAX_DIMS)

typedef struct {
    const hm_fb *f;
    hm_fb_vec v;
    size_t elem;
} index_vec;

static uint32_t iv_get(const index_vec *iv, uint32_t i) {
    const uint8_t *p = iv->f->b + iv->v.data + (size_t)i * iv->elem;
    if (iv->elem == 1) return p[0];
    if (iv->elem == 2) return (uint32_t)(p[0] | p[1] << 8);
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

/* The SparseIndexVector union at ids (type_id, type_id + 1) of table dm. */
static int read_index_vec(const hm_fb *f, const hm_fb_table *dm, int type_id, const char *what, index_vec *iv) {
    uint8_t type;
    int rc = hm_fb_u8(f, dm, type_id, 0, what, &type);
    if (rc) return rc;
    if (type < SIV_INT32 || type > SIV_UINT8)
        return hm_err(HM_E_FORMAT, "tflite: %s: %s is union member %u (Int32Vector, Uint16Vector or Uint8Vector "
                      "expected)", what, type_id == DM_SEGMENTS_TYPE ? "array_segments" : "array_indices", type);
    hm_fb_table vt;
    int present = 0;
    if ((rc = hm_fb_subtable(f, dm, type_id + 1, what, &vt, &present))) return rc;
    if (!present)
        return hm_err(HM_E_FORMAT, "tflite: %s: %s is missing", what,
                      type_id == DM_SEGMENTS_TYPE ? "array_segments" : "array_indices");
    iv->f = f;
    iv->elem = type == SIV_INT32 ? 4 : type == SIV_UINT16 ? 2 : 1;
    if ((rc = hm_fb_vector(f, &vt, 0, iv->elem, what, &iv->v))) return rc;
    if (type == SIV_INT32)
        for (uint32_t i = 0; i < iv->v.len; i++)
            if (iv_get(iv, i) > 0x7fffffffu) return hm_err(HM_E_FORMAT, "tflite: %s: negative index value", what);
    return HM_OK;
}

typedef struct {
    int fmt, size;        /* size: positions along the level's dimension */
    int dim;              /* expanded dimension of the level */
    index_vec seg, idx;   /* SPARSE_CSR */
} level;

typedef struct {
    const hm_tfl_tensor *t;
    int rank, nb, n;
    int block_dim[HM_TFL_MAX_DIMS], block_size[HM_TFL_MAX_DIMS];
    int blocked_by[HM_TFL_MAX_DIMS]; /* original dimension -> block, or -1 */
    level lv[MAX_LEVELS];
    int coord[MAX_LEVELS];           /* by expanded dimension */
    int64_t *offsets, next;
} walker;

/* The dense offset of the current coordinates. */
static int64_t dense_offset(const walker *w) {
    int64_t off = 0;
    for (int d = 0; d < w->rank; d++) {
        int64_t c = w->coord[d];
        int b = w->blocked_by[d];
        if (b >= 0) c = c * w->block_size[b] + w->coord[w->rank + b];
        off = off * w->t->shape.dims[d] + c;
    }
    return off;
}

static void walk(walker *w, int l, int64_t pos) {
    const level *L = &w->lv[l];
    int64_t lo, hi;
    if (L->fmt == FMT_DENSE) {
        lo = pos * L->size;
        hi = lo + L->size;
    } else {
        lo = iv_get(&L->seg, (uint32_t)pos);
        hi = iv_get(&L->seg, (uint32_t)pos + 1);
    }
    for (int64_t p = lo; p < hi; p++) {
        w->coord[L->dim] = L->fmt == FMT_DENSE ? (int)(p - lo) : (int)iv_get(&L->idx, (uint32_t)p);
        if (l + 1 < w->n) walk(w, l + 1, p);
        else w->offsets[w->next++] = dense_offset(w);
    }
}

int hm_tfl_sparse_layout(const hm_fb *f, const hm_fb_table *sp, int ti, const hm_tfl_tensor *t, int64_t stored,
                         int64_t **offsets) {
    char what[96];
    snprintf(what, sizeof what, "Model.subgraphs[0].tensors[%d].sparsity", ti);
    walker w = {.t = t, .rank = t->shape.ndim};
    hm_fb_vec to, bm, dm;
    int rc;
    if ((rc = hm_fb_vector(f, sp, SP_TRAVERSAL, 4, what, &to)) || (rc = hm_fb_vector(f, sp, SP_BLOCK_MAP, 4, what, &bm)) ||
        (rc = hm_fb_vector(f, sp, SP_DIM_METADATA, 4, what, &dm)))
        return rc;
    if (bm.len > (uint32_t)w.rank)
        return hm_err(HM_E_FORMAT, "tflite: tensor %d '%s': %u blocks for rank %d", ti, t->name, bm.len, w.rank);
    w.nb = (int)bm.len;
    w.n = w.rank + w.nb;
    if (w.n < 1) return hm_err(HM_E_FORMAT, "tflite: tensor %d '%s': sparse with rank 0", ti, t->name);
    if (to.len != (uint32_t)w.n || dm.len != (uint32_t)w.n)
        return hm_err(HM_E_FORMAT, "tflite: tensor %d '%s': sparsity with %u traversal entries and %u dim_metadata for "
                      "%d dimensions", ti, t->name, to.len, dm.len, w.n);
    for (int d = 0; d < w.rank; d++) w.blocked_by[d] = -1;
    for (int b = 0; b < w.nb; b++) {
        int32_t d = hm_fb_vec_i32(f, &bm, (uint32_t)b);
        if (d < 0 || d >= w.rank || w.blocked_by[d] >= 0)
            return hm_err(HM_E_FORMAT, "tflite: tensor %d '%s': block_map[%d] is %d (rank %d, each dimension once)", ti,
                          t->name, b, d, w.rank);
        w.blocked_by[d] = b;
        w.block_dim[b] = d;
    }
    int seen[MAX_LEVELS] = {0};
    hm_fb_table dmt[MAX_LEVELS];
    for (int l = 0; l < w.n; l++) {
        int32_t e = hm_fb_vec_i32(f, &to, (uint32_t)l);
        if (e < 0 || e >= w.n || seen[e])
            return hm_err(HM_E_FORMAT, "tflite: tensor %d '%s': traversal_order is not a permutation of 0..%d", ti,
                          t->name, w.n - 1);
        seen[e] = 1;
        w.lv[l].dim = e;
        char lw[120];
        snprintf(lw, sizeof lw, "%.90s.dim_metadata[%d]", what, l);
        int8_t fmt;
        int32_t ds;
        if ((rc = hm_fb_vec_table(f, &dm, (uint32_t)l, lw, &dmt[l])) ||
            (rc = hm_fb_i8(f, &dmt[l], DM_FORMAT, 0, lw, &fmt)) || (rc = hm_fb_i32(f, &dmt[l], DM_DENSE_SIZE, 0, lw, &ds)))
            return rc;
        if (fmt != FMT_DENSE && fmt != FMT_SPARSE_CSR)
            return hm_err(HM_E_FORMAT, "tflite: tensor %d '%s': dim_metadata[%d].format is %d", ti, t->name, l, fmt);
        w.lv[l].fmt = fmt;
        w.lv[l].size = ds;
        if (e >= w.rank) { /* a block dimension: its size is the block size */
            if (fmt != FMT_DENSE)
                return hm_err(HM_E_UNSUPPORTED, "tflite: tensor %d '%s': sparse block dimension (level %d)", ti,
                              t->name, l);
            int d = w.block_dim[e - w.rank];
            if (ds < 1 || t->shape.dims[d] % ds)
                return hm_err(HM_E_FORMAT, "tflite: tensor %d '%s': block size %d for dimension %d of %d", ti, t->name,
                              ds, d, t->shape.dims[d]);
            w.block_size[e - w.rank] = ds;
        }
    }
    /* Each level's extent along its dimension, then its vectors. */
    int64_t count = 1; /* positions at the level above */
    for (int l = 0; l < w.n; l++) {
        level *L = &w.lv[l];
        int e = L->dim, extent;
        if (e >= w.rank) extent = w.block_size[e - w.rank];
        else extent = t->shape.dims[e] / (w.blocked_by[e] >= 0 ? w.block_size[w.blocked_by[e]] : 1);
        char lw[120];
        snprintf(lw, sizeof lw, "%.90s.dim_metadata[%d]", what, l);
        if (L->fmt == FMT_DENSE) {
            if (L->size != extent)
                return hm_err(HM_E_FORMAT, "tflite: tensor %d '%s': dim_metadata[%d].dense_size is %d, dimension %d "
                              "has %d", ti, t->name, l, L->size, e, extent);
            count *= extent;
        } else {
            L->size = extent;
            if ((rc = read_index_vec(f, &dmt[l], DM_SEGMENTS_TYPE, lw, &L->seg)) ||
                (rc = read_index_vec(f, &dmt[l], DM_INDICES_TYPE, lw, &L->idx)))
                return rc;
            if ((int64_t)L->seg.v.len != count + 1)
                return hm_err(HM_E_FORMAT, "tflite: tensor %d '%s': dim_metadata[%d].array_segments has %u entries, "
                              "%lld expected", ti, t->name, l, L->seg.v.len, (long long)(count + 1));
            uint32_t prev = 0;
            for (uint32_t k = 0; k < L->seg.v.len; k++) {
                uint32_t s = iv_get(&L->seg, k);
                if ((k == 0 && s != 0) || s < prev)
                    return hm_err(HM_E_FORMAT, "tflite: tensor %d '%s': dim_metadata[%d].array_segments[%u] is %u "
                                  "(must start at 0 and not decrease)", ti, t->name, l, k, s);
                prev = s;
            }
            if (prev != L->idx.v.len)
                return hm_err(HM_E_FORMAT, "tflite: tensor %d '%s': dim_metadata[%d].array_segments ends at %u, "
                              "array_indices has %u", ti, t->name, l, prev, L->idx.v.len);
            for (uint32_t k = 0; k < L->idx.v.len; k++)
                if (iv_get(&L->idx, k) >= (uint32_t)extent)
                    return hm_err(HM_E_FORMAT, "tflite: tensor %d '%s': dim_metadata[%d].array_indices[%u] is %u, "
                                  "dimension %d has %d", ti, t->name, l, k, iv_get(&L->idx, k), e, extent);
            count = L->idx.v.len;
        }
        if (count > HM_TFL_MAX_NUMEL)
            return hm_err(HM_E_UNSUPPORTED, "tflite: tensor %d '%s': sparsity with more than %lld positions", ti,
                          t->name, (long long)HM_TFL_MAX_NUMEL);
    }
    if (count != stored)
        return hm_err(HM_E_FORMAT, "tflite: tensor %d '%s': the sparsity describes %lld values, its buffer holds %lld",
                      ti, t->name, (long long)count, (long long)stored);
    int64_t *off = malloc((size_t)(count ? count : 1) * sizeof *off);
    if (!off) return hm_err(HM_E_NOMEM, "tflite: out of memory");
    w.offsets = off;
    if (count) walk(&w, 0, 0);
    *offsets = off;
    return HM_OK;
}
