/* mano_load.c - MANO buffers from a checkpoint's mano.* entries or from an
 * .npz holding the same arrays: shapes and dtypes checked, copied to float,
 * then validated (model_check.c) as a packed file's are. */
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "core/util.h"
#include "format/ckpt.h"
#include "format/npy.h"
#include "load/model_check.h"

#define S1(a) ((const int64_t[]){a})
#define S2(a, b) ((const int64_t[]){a, b})
#define S3(a, b, c) ((const int64_t[]){a, b, c})

typedef struct {
    hm_ckpt *ck;        /* read "mano.<name>" from the checkpoint when npz is NULL */
    hm_npz *npz;
    const char *src;    /* for messages */
    hm_array held[16];  /* npz arrays kept alive while copying */
    int nheld;
} mano_src;

/* Fetch `name` with the given shape as a numeric array view; returns the
 * data pointer and dtype, or NULL (error recorded). Missing optional arrays
 * return NULL without error when optional is set. */
static const void *mano_get(mano_src *ms, const char *name, int ndim, const int64_t *shape, hm_dtype *dt, int optional) {
    const void *data = NULL;
    int tnd;
    const int64_t *tsh;
    char key[128];
    snprintf(key, sizeof key, "mano.%s", name);
    if (!ms->npz) {
        const hm_tensor *t = hm_ckpt_find(ms->ck, key);
        if (!t) {
            if (!optional) hm_err(HM_E_NOMANO, "checkpoint: missing MANO buffer '%s'", key);
            return NULL;
        }
        if (!t->contiguous) {
            hm_err(HM_E_SHAPE, "checkpoint: tensor '%s' is not contiguous", key);
            return NULL;
        }
        *dt = t->dtype, tnd = t->ndim, tsh = t->shape, data = t->data;
    } else {
        if (!hm_npz_has(ms->npz, name)) {
            if (!optional) hm_err(HM_E_NOMANO, "%s: missing MANO array '%s'", ms->src, name);
            return NULL;
        }
        if (ms->nheld == 16 || hm_npz_get(ms->npz, name, &ms->held[ms->nheld])) return NULL;
        hm_array *a = &ms->held[ms->nheld++];
        *dt = a->dtype, tnd = a->ndim, tsh = a->shape, data = a->data;
        snprintf(key, sizeof key, "%s", name);
    }
    int ok = tnd == ndim;
    for (int i = 0; ok && i < ndim; i++) ok = tsh[i] == shape[i];
    if (!ok) {
        hm_err(HM_E_SHAPE, "%s: MANO array '%s' has the wrong shape", ms->src, key);
        return NULL;
    }
    return data;
}

static float *mano_floats(mano_src *ms, const char *name, int ndim, const int64_t *shape) {
    hm_dtype dt;
    const void *d = mano_get(ms, name, ndim, shape, &dt, 0);
    if (!d) return NULL;
    size_t n = 1;
    for (int i = 0; i < ndim; i++) n *= (size_t)shape[i];
    if (dt != HM_DT_F32 && dt != HM_DT_F64) {
        hm_err(HM_E_SHAPE, "%s: MANO array '%s' must be float32 or float64, not %s", ms->src, name, hm_dtype_name(dt));
        return NULL;
    }
    float *out = hm_alloc(n * sizeof(float));
    if (!out) return NULL;
    for (size_t i = 0; i < n; i++) {
        out[i] = dt == HM_DT_F32 ? ((const float *)d)[i] : (float)((const double *)d)[i];
        if (!isfinite(out[i])) {
            hm_free(out);
            hm_err(HM_E_FORMAT, "%s: MANO array '%s' has a non-finite value", ms->src, name);
            return NULL;
        }
    }
    return out;
}

/* Integer array -> int64 values; 1 ok, 0 missing (optional), -1 error. */
static int mano_ints(mano_src *ms, const char *name, int ndim, const int64_t *shape, int64_t *out, int optional) {
    hm_dtype dt;
    const void *d = mano_get(ms, name, ndim, shape, &dt, optional);
    if (!d) return optional && hm_errmsg()[0] == 0 ? 0 : -1;
    size_t n = 1;
    for (int i = 0; i < ndim; i++) n *= (size_t)shape[i];
    for (size_t i = 0; i < n; i++) {
        if (dt == HM_DT_I64) out[i] = ((const int64_t *)d)[i];
        else if (dt == HM_DT_I32) out[i] = ((const int32_t *)d)[i];
        else {
            hm_err(HM_E_SHAPE, "%s: MANO array '%s' must be int64 or int32, not %s", ms->src, name, hm_dtype_name(dt));
            return -1;
        }
    }
    return 1;
}

/* An index read from the file as an int; values no int holds become -2,
 * which every index check refuses. */
static int as_index(int64_t v) { return v >= -1 && v <= INT_MAX ? (int)v : -2; }

/* The PCA pose space, optional: hand_components [k, 45] (smplx keeps the
 * first num_pca_comps rows: 6 in the released checkpoint) and hand_mean
 * [45], both or neither (then n_pca 0). */
static int load_pca(mano_src *ms, hm_mano *mn) {
    mn->n_pca = 0;
    int k = 0;
    if (!ms->npz) {
        const hm_tensor *t = hm_ckpt_find(ms->ck, "mano.hand_components");
        if (t && t->ndim == 2) k = (int)(t->shape[0] >= 1 && t->shape[0] <= 45 ? t->shape[0] : -1);
        else if (t) k = -1;
    } else if (hm_npz_has(ms->npz, "hand_components")) {
        hm_array a;
        if (hm_npz_get(ms->npz, "hand_components", &a)) return HM_E_FORMAT;
        k = a.ndim == 2 && a.shape[0] >= 1 && a.shape[0] <= 45 ? (int)a.shape[0] : -1;
        hm_array_free(&a);
    }
    if (k < 0) return hm_err(HM_E_SHAPE, "%s: MANO array 'hand_components' must be [1..45, 45]", ms->src);
    if (k == 0) return HM_OK;
    float *c = mano_floats(ms, "hand_components", 2, S2(k, 45));
    float *mean = c ? mano_floats(ms, "hand_mean", 1, S1(45)) : NULL;
    if (mean) {
        memcpy(mn->hand_components, c, sizeof(float) * 45 * (size_t)k);
        memcpy(mn->hand_mean, mean, sizeof mn->hand_mean);
        mn->n_pca = k;
    }
    hm_free(c), hm_free(mean);
    return mean ? HM_OK : hm_errcode() ? hm_errcode() : HM_E_SHAPE;
}

static int load_mano(mano_src *ms, hm_mano *mn) {
    static const int tips[5] = {744, 320, 443, 554, 671};
    static const int jmap[HM_NKP] = {0, 13, 14, 15, 16, 1, 2, 3, 17, 4, 5, 6, 18, 10, 11, 12, 19, 7, 8, 9, 20};
    int64_t iv[HM_NF * 3];
    hm_errclear();
    if (!(mn->v_template = mano_floats(ms, "v_template", 2, S2(HM_NV, 3)))) return HM_E_NOMANO;
    if (!(mn->shapedirs = mano_floats(ms, "shapedirs", 3, S3(HM_NV, 3, HM_NB)))) return HM_E_SHAPE;
    if (!(mn->posedirs = mano_floats(ms, "posedirs", 2, S2((HM_NJ - 1) * 9, HM_NV * 3)))) return HM_E_SHAPE;
    if (!(mn->j_regressor = mano_floats(ms, "J_regressor", 2, S2(HM_NJ, HM_NV)))) return HM_E_SHAPE;
    if (!(mn->lbs_weights = mano_floats(ms, "lbs_weights", 2, S2(HM_NV, HM_NJ)))) return HM_E_SHAPE;
    if (mano_ints(ms, "parents", 1, S1(HM_NJ), iv, 0) < 0) return HM_E_SHAPE;
    for (int j = 0; j < HM_NJ; j++) mn->parents[j] = as_index(iv[j]);
    if (mano_ints(ms, "faces_tensor", 2, S2(HM_NF, 3), iv, 0) < 0) return HM_E_SHAPE;
    if (!(mn->faces = hm_alloc(sizeof(int32_t) * HM_NF * 3))) return HM_E_NOMEM;
    for (int i = 0; i < HM_NF * 3; i++) mn->faces[i] = as_index(iv[i]);
    memcpy(mn->tips, tips, sizeof tips);
    memcpy(mn->joint_map, jmap, sizeof jmap);
    hm_errclear();
    int r = mano_ints(ms, "extra_joints_idxs", 1, S1(5), iv, 1);
    if (r < 0) return HM_E_SHAPE;
    for (int i = 0; r == 1 && i < 5; i++) mn->tips[i] = as_index(iv[i]);
    r = mano_ints(ms, "joint_map", 1, S1(HM_NKP), iv, 1);
    if (r < 0) return HM_E_SHAPE;
    for (int i = 0; r == 1 && i < HM_NKP; i++) mn->joint_map[i] = as_index(iv[i]);
    if ((r = load_pca(ms, mn))) return r;
    return hm_mano_check(mn, ms->src);
}

void hm_mano_release(hm_mano *mn) {
    hm_free(mn->v_template);
    hm_free(mn->shapedirs);
    hm_free(mn->posedirs);
    hm_free(mn->j_regressor);
    hm_free(mn->lbs_weights);
    hm_free(mn->faces);
    memset(mn, 0, sizeof *mn);
}

int hm_mano_from_npz(const char *path, hm_mano *mn) {
    mano_src ms = {.src = path};
    int rc = hm_npz_open(path, &ms.npz);
    if (rc) return rc;
    rc = load_mano(&ms, mn);
    for (int i = 0; i < ms.nheld; i++) hm_array_free(&ms.held[i]);
    hm_npz_close(ms.npz);
    if (rc) hm_mano_release(mn);
    return rc;
}

int hm_mano_from_ckpt(hm_ckpt *ck, const char *src, hm_mano *mn, int *found) {
    *found = 0;
    if (!hm_ckpt_find(ck, "mano.v_template")) return HM_OK;
    mano_src ms = {.ck = ck, .src = src};
    int rc = load_mano(&ms, mn);
    if (rc) {
        hm_mano_release(mn);
        return rc;
    }
    *found = 1;
    return HM_OK;
}
