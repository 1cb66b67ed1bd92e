/* model_pack.c - the packed model file (`hamer convert`): every array of an
 * hm_model stored as it lies in memory, so loading is an mmap, a checksum
 * pass and pointer assignments.
 *
 * Layout (little-endian, 64-bit; the packed layouts are ISA-specific anyway):
 *   [0, 256)       pack_header: magic, format version, sizes, the model's
 *                  config, precision, the backend it was packed for, the
 *                  layout ISA, the low-precision variant, the scheme
 *                  string, and an XXH3 checksum of the header and the
 *                  section table;
 *   [256, ...)     the section table: name, offset, bytes, XXH3-64 checksum;
 *   sections       64-byte aligned, in table order, zero padding between.
 * Section 0, "matrices", holds one pack_matrix record per packed matrix
 * (shape, precision, low-precision variant); the others are the model's
 * arrays in the order hm_pack_visit_model lists them. The records are in
 * model_pack.h.
 *
 * One enumeration, hm_pack_visit_model (the backend's own, then MANO's),
 * names every array the model owns; the writer (model_pack_write.c), the
 * reader (model_pack_read.c) and hm_model_free (backend/state.c) all walk
 * it, so a new field cannot be written but not read, or read but not
 * freed. This file holds that enumeration and the checksums both
 * directions compute.
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
#include "backend/backend.h"
#include "model/model.h"
#include "load/model_pack.h"
#include "core/util.h"

/* Hashing runs on a thread pool only when there is enough of it. */
#define PACK_PARALLEL_BYTES ((uint64_t)64 << 20)

/* ---- the enumeration ---------------------------------------------------- */

/* Every array m owns, in file order: its backend's, then MANO's. */
int hm_pack_visit_model(hm_model *m, hm_visitor *v) {
    const size_t F = sizeof(float);
    char n[64];
    int rc;
    if (!m->be->visit) return hm_err(HM_E_UNSUPPORTED, "the %s backend has no packed model files", m->be->name);
    if ((rc = m->be->visit(m->bm, &m->cfg, v))) return rc;
#define NAME(...) (snprintf(n, sizeof n, __VA_ARGS__), n)
#define ARR(field, bytes, ...) \
    if ((rc = v->array(v, NAME(__VA_ARGS__), &(field), bytes))) return rc
#define EMB(arr, ...) \
    if ((rc = v->embedded(v, NAME(__VA_ARGS__), arr, sizeof(arr)))) return rc
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
        if ((rc = v->embedded(v, "mano.n_pca", &mn->n_pca, sizeof mn->n_pca))) return rc;
        EMB(mn->hand_components, "mano.hand_components");
        EMB(mn->hand_mean, "mano.hand_mean");
    }
    return HM_OK;
#undef NAME
#undef ARR
#undef EMB
}

int hm_pack_matrix_arrays(hm_visitor *v, const char *name, hm_packed *p, int bias, const hm_packed_sizes *s) {
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
