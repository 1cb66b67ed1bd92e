/* det_config.c - the detector's options and where its models live. Kept
 * apart from the model code so that programs using only these need no
 * TFLite executor. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/util.h"
#include "detect/detect.h"

void hm_det_opts_default(hm_det_opts *o) {
    memset(o, 0, sizeof *o);
    o->max_hands = 8;
    o->min_palm = 0.5f;
    o->min_presence = 0.5f;
    o->tile_presence = 0.9f;
    o->n_levels = 1;
    o->levels[0] = 4.0f;
    o->overlap = 0.25f;
    o->min_tile = 192;
    o->tile_prior = 0.02f;
    o->prior_mask = 1.0f;
    o->palm_iou = 0.5f;
    o->tile_repeat = 0.6f;
    o->body = HM_DET_BODY_AUTO;
    o->body_persons = 1;
    o->body_box_visibility = 0.5f;
    o->body_box_shoulder = 0.2f;
    o->proposals = HM_DET_BODY_AUTO;
    o->proposal_score = 0.2f;
    o->proposal_presence = 0.5f;
    o->proposal_max = 8;
    o->same_hand = 0.25f;
    o->min_box = 16;
}

static int in01(float v) { return v >= 0.0f && v <= 1.0f; }

int hm_det_opts_check(const hm_det_opts *o) {
    if (o->max_hands < 1 || o->max_hands > HM_DET_MAX_HANDS)
        return hm_err(HM_E_ARG, "max_hands %d out of range 1..%d", o->max_hands, HM_DET_MAX_HANDS);
    if (!in01(o->min_palm) || !in01(o->min_presence) || !in01(o->tile_presence))
        return hm_err(HM_E_ARG, "detector score thresholds must lie in [0,1] (palm %g, presence %g, tile presence %g)",
                      o->min_palm, o->min_presence, o->tile_presence);
    if (o->n_levels < 0 || o->n_levels > HM_DET_MAX_LEVELS)
        return hm_err(HM_E_ARG, "%d tile levels (at most %d)", o->n_levels, HM_DET_MAX_LEVELS);
    for (int i = 0; i < o->n_levels; i++)
        if (!(o->levels[i] >= 1.0f && o->levels[i] <= 16.0f))
            return hm_err(HM_E_ARG, "tile level %g out of range [1, 16] (tile side = image side / level)", o->levels[i]);
    /* these two bounds keep a level under 64 tiles per axis */
    if (!(o->overlap >= 0.0f && o->overlap <= 0.75f))
        return hm_err(HM_E_ARG, "tile overlap %g out of range [0, 0.75]", o->overlap);
    if (o->min_tile < 16) return hm_err(HM_E_ARG, "min_tile %d under 16 pixels", o->min_tile);
    if (!in01(o->tile_repeat)) return hm_err(HM_E_ARG, "tile_repeat %g must lie in [0,1]", o->tile_repeat);
    if (!in01(o->tile_prior) || !in01(o->prior_mask))
        return hm_err(HM_E_ARG, "tile prior %g and its mask %g must lie in [0,1]", o->tile_prior, o->prior_mask);
    if (!in01(o->palm_iou)) return hm_err(HM_E_ARG, "palm_iou %g must lie in [0,1]", o->palm_iou);
    if (!(o->same_hand > 0.0f && o->same_hand <= 1.0f))
        return hm_err(HM_E_ARG, "same_hand %g must lie in (0,1]", o->same_hand);
    if (o->min_box < 1 || o->min_box > 4096) return hm_err(HM_E_ARG, "min_box %d out of range 1..4096", o->min_box);
    if (o->body < HM_DET_BODY_AUTO || o->body > HM_DET_BODY_ON)
        return hm_err(HM_E_ARG, "body pass mode %d (auto 0, off 1, on 2)", o->body);
    if (o->body_persons < 1 || o->body_persons > 8)
        return hm_err(HM_E_ARG, "body_persons %d out of range 1..8", o->body_persons);
    if (o->body_boxes != 0 && o->body_boxes != 1) return hm_err(HM_E_ARG, "body_boxes %d is not 0 or 1", o->body_boxes);
    if (!in01(o->body_box_visibility) || !in01(o->body_box_shoulder))
        return hm_err(HM_E_ARG, "body_box_visibility %g and body_box_shoulder %g must lie in [0,1]",
                      o->body_box_visibility, o->body_box_shoulder);
    if (o->proposals < HM_DET_BODY_AUTO || o->proposals > HM_DET_BODY_ON)
        return hm_err(HM_E_ARG, "proposal pass mode %d (auto 0, off 1, on 2)", o->proposals);
    if (!in01(o->proposal_score) || !in01(o->proposal_presence))
        return hm_err(HM_E_ARG, "proposal_score %g and proposal_presence %g must lie in [0,1]", o->proposal_score,
                      o->proposal_presence);
    if (o->proposal_max < 0 || o->proposal_max > 64)
        return hm_err(HM_E_ARG, "proposal_max %d out of range 0..64", o->proposal_max);
    return HM_OK;
}

static int has_models(const char *dir, int lite) {
    char p[4096];
    const char *v = lite ? "lite" : "full";
    snprintf(p, sizeof p, "%s/palm_detection_%s.tflite", dir, v);
    if (access(p, R_OK) != 0) return 0;
    snprintf(p, sizeof p, "%s/hand_landmark_%s.tflite", dir, v);
    return access(p, R_OK) == 0;
}

static int put(char *out, size_t cap, const char *s) {
    if (strlen(s) + 1 > cap) return hm_err(HM_E_ARG, "models directory path too long (%zu bytes)", strlen(s));
    memcpy(out, s, strlen(s) + 1);
    return HM_OK;
}

int hm_det_find_dir(const char *dir, int lite, char *out, size_t cap) {
    const char *v = lite ? "lite" : "full";
    if (!out || cap == 0) return hm_err(HM_E_ARG, "hm_det_find_dir: no output buffer");
    if (dir && dir[0]) {
        /* an explicit directory is what the caller asked for: no fallback */
        if (has_models(dir, lite)) return put(out, cap, dir);
        return hm_err(HM_E_IO, "hand detector models (palm_detection_%s.tflite, hand_landmark_%s.tflite) not in %s; run scripts/get_detector.sh %s",
                      v, v, dir, dir);
    }
    char tried[4][2048];
    int nt = 0;
    const char *env = getenv("HAMER_DETECTOR_DIR");
    if (env && env[0]) snprintf(tried[nt++], sizeof tried[0], "%s", env);
    const char *xdg = getenv("XDG_DATA_HOME"), *home = getenv("HOME");
    if (xdg && xdg[0]) snprintf(tried[nt++], sizeof tried[0], "%s/hamer/detector", xdg);
    else if (home && home[0]) snprintf(tried[nt++], sizeof tried[0], "%s/.local/share/hamer/detector", home);
    snprintf(tried[nt++], sizeof tried[0], "/usr/local/share/hamer/detector");
    for (int i = 0; i < nt; i++)
        if (has_models(tried[i], lite)) return put(out, cap, tried[i]);
    char list[4 * 2048 + 16] = "";
    for (int i = 0; i < nt; i++) {
        strcat(list, i ? ", " : "");
        strcat(list, tried[i]);
    }
    return hm_err(HM_E_IO, "hand detector models (palm_detection_%s.tflite, hand_landmark_%s.tflite) not found in %s; run scripts/get_detector.sh to install them",
                  v, v, list);
}
