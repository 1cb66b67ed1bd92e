/* model_check.c - configuration and MANO checks shared by both loaders. */
#include "load/model_check.h"

#include <limits.h>
#include <math.h>
#include <stdint.h>

#include "core/util.h"

int hm_config_check(const hm_config *c, const char *src, int code) {
    int gh = (HAMER_CROP_H + 2 * HM_PATCH_PAD - HM_PATCH) / HM_PATCH + 1;
    int gw = (HAMER_CROP_W + 2 * HM_PATCH_PAD - HM_PATCH) / HM_PATCH + 1;
    if (c->dim <= 0 || c->dim % HM_VIT_HEAD_DIM || c->dim > 65536 || c->heads != c->dim / HM_VIT_HEAD_DIM)
        return hm_err(code, "%s: backbone width %d (heads %d) is not a positive multiple of the head size 80", src,
                      c->dim, c->heads);
    if (c->gh != gh || c->gw != gw || c->ntok != gh * gw)
        return hm_err(code, "%s: token grid %d x %d (%d tokens) is not %d x %d", src, c->gh, c->gw, c->ntok, gh, gw);
    if (c->depth < 1 || c->depth > HM_MAX_DEPTH || c->hdepth < 1 || c->hdepth > HM_MAX_DEPTH)
        return hm_err(code, "%s: depths %d / %d outside 1..%d", src, c->depth, c->hdepth, HM_MAX_DEPTH);
    if (c->mlp <= 0 || c->mlp > 1 << 20 || c->hmlp <= 0 || c->hmlp > 1 << 20)
        return hm_err(code, "%s: MLP widths %d / %d outside 1..%d", src, c->mlp, c->hmlp, 1 << 20);
    if (c->hdim <= 0 || c->hdim > 65536 || c->hinner <= 0 || c->hinner % HM_DEC_HEAD_DIM || c->hinner > 65536 ||
        c->hheads != c->hinner / HM_DEC_HEAD_DIM)
        return hm_err(code, "%s: decoder widths %d / %d (heads %d) invalid (inner must be a multiple of 64)", src,
                      c->hdim, c->hinner, c->hheads);
    if ((int64_t)c->hdepth * 2 * c->hinner > INT_MAX)
        return hm_err(code, "%s: %d decoder layers of width %d are too many", src, c->hdepth, c->hinner);
    return HM_OK;
}

int hm_mano_check(const hm_mano *mn, const char *src) {
    static const char *const names[] = {"v_template", "shapedirs", "posedirs", "J_regressor", "lbs_weights"};
    const float *fl[] = {mn->v_template, mn->shapedirs, mn->posedirs, mn->j_regressor, mn->lbs_weights};
    const size_t nfl[] = {HM_NV * 3, HM_NV * 3 * HM_NB, (HM_NJ - 1) * 9 * HM_NV * 3, HM_NJ * HM_NV, HM_NV * HM_NJ};
    for (int a = 0; a < 5; a++)
        for (size_t i = 0; i < nfl[a]; i++)
            if (!isfinite(fl[a][i])) return hm_err(HM_E_FORMAT, "%s: MANO array '%s' has a non-finite value", src, names[a]);
    for (int j = 0; j < HM_NJ; j++)
        if (j == 0 ? mn->parents[0] != -1 : (mn->parents[j] < 0 || mn->parents[j] >= j))
            return hm_err(HM_E_FORMAT, "%s: MANO parents[%d] = %d is not a valid kinematic tree", src, j, mn->parents[j]);
    for (int i = 0; i < HM_NF * 3; i++)
        if (mn->faces[i] < 0 || mn->faces[i] >= HM_NV)
            return hm_err(HM_E_FORMAT, "%s: MANO face index %d out of range", src, (int)mn->faces[i]);
    for (int i = 0; i < 5; i++)
        if (mn->tips[i] < 0 || mn->tips[i] >= HM_NV)
            return hm_err(HM_E_FORMAT, "%s: MANO extra_joints_idxs[%d] = %d out of range", src, i, mn->tips[i]);
    for (int i = 0; i < HM_NKP; i++)
        if (mn->joint_map[i] < 0 || mn->joint_map[i] >= HM_NKP)
            return hm_err(HM_E_FORMAT, "%s: MANO joint_map[%d] = %d out of range", src, i, mn->joint_map[i]);
    if (mn->n_pca < 0 || mn->n_pca > 45)
        return hm_err(HM_E_FORMAT, "%s: MANO hand_components has %d rows, not 0..45", src, mn->n_pca);
    for (int i = 0; i < 45 * (mn->n_pca + 1); i++)
        if (!isfinite(i < 45 * mn->n_pca ? mn->hand_components[i] : mn->hand_mean[i - 45 * mn->n_pca]))
            return hm_err(HM_E_FORMAT, "%s: MANO hand_components / hand_mean has a non-finite value", src);
    return HM_OK;
}
