/* hamer_scene.c - the public API of the hands in the photo's camera and in
 * animation tools (include/hamer.h): the focal length from EXIF, the
 * hands as BVH, the recorder of a video's tracks (animated GLB, BVH). */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api.h"
#include "core/fileio.h"
#include "core/util.h"
#include "format/exif.h"
#include "hamer.h"
#include "pipeline/anim.h"
#include "pipeline/bvh.h"
#include "pipeline/glb.h"

_Static_assert(HAMER_EXIF_SCAN == HM_EXIF_SCAN, "HAMER_EXIF_SCAN");

int hamer_exif_focal(const void *data, size_t len, int width, int height, float *focal_px) {
    if ((!data && len) || width < 1 || height < 1 || !focal_px)
        return hm_err(HM_E_ARG, "%s: bad arguments (image %dx%d)", __func__, width, height);
    hm_exif e;
    double f;
    if (!hm_exif_read(data, len, &e) || !hm_exif_focal_px(&e, width, height, &f)) return 0;
    *focal_px = (float)f;
    return 1;
}

int hamer_exif_focal_file(const char *path, int width, int height, float *focal_px) {
    if (!path || width < 1 || height < 1 || !focal_px)
        return hm_err(HM_E_ARG, "%s: bad arguments (image %dx%d)", __func__, width, height);
    FILE *fp = fopen(path, "rb");
    if (!fp) return hm_err(HM_E_IO, "%s: cannot open: %s", path, strerror(errno));
    uint8_t *buf = malloc(HM_EXIF_SCAN);
    if (!buf) {
        fclose(fp);
        return hm_err(HM_E_NOMEM, "%s: out of memory", __func__);
    }
    const size_t n = fread(buf, 1, HM_EXIF_SCAN, fp);
    const int bad = ferror(fp);
    fclose(fp);
    int rc = bad ? hm_err(HM_E_IO, "%s: read error", path) : hamer_exif_focal(buf, n, width, height, focal_px);
    free(buf);
    return rc;
}

/* ---- BVH and the animation recorder ---- */

/* The model's MANO, or NULL with the error set. */
static const hm_mano *mano_of(const hamer_model *model, const char *fn) {
    const hm_model *m = hm_model_of(model);
    if (!m) {
        hm_err(HM_E_ARG, "%s: model is NULL", fn);
        return NULL;
    }
    if (!m->has_mano) {
        hm_err(HM_E_NOMANO, "%s: the model has no MANO buffers", fn);
        return NULL;
    }
    return &m->mano;
}

int hamer_hands_bvh(const hamer_model *model, const hamer_hand *hands, int n, char **bvh, size_t *len) {
    if ((n > 0 && !hands) || n < 0 || n > HAMER_MAX_HANDS || !bvh || !len)
        return hm_err(HM_E_ARG, "%s: bad arguments", __func__);
    const hm_mano *mn = mano_of(model, __func__);
    if (!mn) return hm_errcode();
    return hm_bvh_hands(mn, hands, n, bvh, len);
}

struct hamer_anim {
    const hm_mano *mano;
    hm_anim *a;
};

hamer_anim_params hamer_anim_default_params(void) {
    hamer_anim_params p;
    memset(&p, 0, sizeof p);
    p.shape = HAMER_ANIM_SHAPE_TRACK;
    return p;
}

hamer_anim *hamer_anim_new(const hamer_model *model, const hamer_anim_params *params) {
    hamer_anim_params p = params ? *params : hamer_anim_default_params();
    if (HM_CHECK_RESERVED(&p, "hamer_anim_params")) return NULL;
    if (!(p.fps >= 0 && p.fps <= 1e4)) {
        hm_err(HM_E_ARG, "hamer_anim_params: fps %g outside 0..10000", p.fps);
        return NULL;
    }
    if (p.shape != HAMER_ANIM_SHAPE_TRACK && p.shape != HAMER_ANIM_SHAPE_FIRST) {
        hm_err(HM_E_ARG, "hamer_anim_params: unknown shape %d", (int)p.shape);
        return NULL;
    }
    const hm_mano *mn = mano_of(model, __func__);
    if (!mn) return NULL;
    hamer_anim *an = calloc(1, sizeof *an);
    if (!an) {
        hm_err(HM_E_NOMEM, "out of memory");
        return NULL;
    }
    an->mano = mn;
    if (!(an->a = hm_anim_new(p.fps, p.shape))) {
        free(an);
        return NULL;
    }
    return an;
}

int hamer_anim_add(hamer_anim *anim, double time_s, const hamer_track *tracks, const hamer_hand *hands, int n) {
    if (!anim || n < 0 || n > HAMER_MAX_HANDS || (n > 0 && (!tracks || !hands)) || !isfinite(time_s))
        return hm_err(HM_E_ARG, "%s: bad arguments", __func__);
    return hm_anim_add(anim->a, time_s, tracks, hands, n);
}

int hamer_anim_write_glb(hamer_anim *anim, const char *path) {
    if (!anim || !path) return hm_err(HM_E_ARG, "%s: bad arguments", __func__);
    uint8_t *glb;
    size_t len;
    int rc = hm_glb_anim_write(anim->a, anim->mano, "hamer.c " HAMER_VERSION_STRING, &glb, &len);
    if (rc) return rc;
    rc = hm_file_write_atomic(path, glb, len);
    free(glb);
    return rc;
}

int hamer_anim_write_bvh(hamer_anim *anim, const char *path) {
    if (!anim || !path) return hm_err(HM_E_ARG, "%s: bad arguments", __func__);
    hm_outfile o;
    int rc = hm_outfile_open(&o, path);
    if (rc) return rc;
    if (!(rc = hm_bvh_anim(anim->a, anim->mano, o.f))) rc = hm_outfile_commit(&o);
    hm_outfile_abort(&o);  /* frees o; removes the temporary file unless committed */
    return rc;
}

void hamer_anim_free(hamer_anim *anim) {
    if (!anim) return;
    hm_anim_free(anim->a);
    free(anim);
}
