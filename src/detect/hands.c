/* hands.c - the detector's orchestration: palm passes (full frame, then
 * tiles), cross-pass palm suppression, landmarks, merge (see detect.h). */
#include <math.h>
#include <string.h>
#include <time.h>

#include "core/util.h"
#include "detect/det_internal.h"
#include "format/image.h"

static double now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec * 1e-6;
}

/* Candidates arrive pass by pass; past the cap the worst one gives way. */
static void add_cand(hm_det_state *s, const hm_palm_px *p) {
    const int seq = s->seq++;
    int at = s->ncand;
    if (s->ncand == HM_DET_MAX_CANDIDATES) {
        at = 0;
        for (int i = 1; i < s->ncand; i++)
            if (s->cand[i].score < s->cand[at].score) at = i;
        if (!(p->score > s->cand[at].score)) return;
    } else {
        s->ncand++;
    }
    s->cand[at] = *p;
    s->cand[at].seq = seq;
}

static int palm_pass(hm_det_state *s, const uint8_t *rgb, int w, int h, hm_det_rect roi, int level,
                     const hm_det_opts *o, hm_pool *pool, hm_det_stats *st) {
    const hm_det_model *m = s->m;
    float pad[4];
    const hm_det_rect lroi = hm_det_pad_roi(roi, HM_PALM_SIZE, HM_PALM_SIZE, pad);
    double t0 = now_ms();
    hm_det_warp(rgb, w, h, &lroi, HM_PALM_SIZE, HM_PALM_SIZE, 0, hm_tfl_input(s->palm, 0));
    double t1 = now_ms();
    int rc = hm_tfl_invoke(s->palm, pool);
    double t2 = now_ms();
    if (rc) return rc;
    const int nd = hm_palm_decode(hm_tfl_output(s->palm, m->palm_boxes), hm_tfl_output(s->palm, m->palm_scores),
                                  m->anchors, o->min_palm, s->dec);
    const int nk = hm_palm_wnms(s->dec, nd, 0.3f, s->nms, s->idx);
    for (int i = 0; i < nk; i++) {
        hm_palm_px p;
        hm_palm_to_image(&s->nms[i], &lroi, pad, &p);
        p.level = level;
        p.levels = 1u << level;
        add_cand(s, &p);
    }
    st->palm_calls++;
    st->warp_ms += t1 - t0;
    st->palm_ms += t2 - t1;
    st->post_ms += now_ms() - t2;
    return HM_OK;
}

static int landmark(hm_det_state *s, const uint8_t *rgb, int w, int h, const hm_palm_px *p, const hm_det_opts *o,
                    hm_pool *pool, hm_det_stats *st, hm_det_hand *out, int *keep) {
    const hm_det_model *m = s->m;
    const hm_det_rect rect = hm_palm_hand_rect(p);
    float pad[4];
    *keep = 0;
    /* ValidateRoi: a degenerate palm gives no crop */
    if (!(rect.w > 0) || !(rect.h > 0) || !isfinite(rect.cx) || !isfinite(rect.cy) || !isfinite(rect.rot))
        return HM_OK;
    const hm_det_rect lroi = hm_det_pad_roi(rect, HM_LM_SIZE, HM_LM_SIZE, pad);
    double t0 = now_ms();
    hm_det_warp(rgb, w, h, &lroi, HM_LM_SIZE, HM_LM_SIZE, 1, hm_tfl_input(s->lm, 0));
    double t1 = now_ms();
    int rc = hm_tfl_invoke(s->lm, pool);
    double t2 = now_ms();
    if (rc) return rc;
    st->landmark_calls++;
    st->warp_ms += t1 - t0;
    st->landmark_ms += t2 - t1;
    const float pres = hm_tfl_output(s->lm, m->lm_presence)[0];
    const float hand = hm_tfl_output(s->lm, m->lm_handedness)[0];
    const float need = p->level == 0 ? o->min_presence : fmaxf(o->min_presence, o->tile_presence);
    if (!(pres >= need)) return HM_OK;
    hm_lm_project(hm_tfl_output(s->lm, m->lm_landmarks), &lroi, pad, out->landmarks);
    hm_lm_box(out->landmarks, out->box);
    out->is_right = hand > 0.5f;
    out->palm_score = (float)p->score;
    out->presence = pres;
    out->handedness = hand;
    out->roi = rect;
    out->level = p->level;
    out->levels = p->levels;
    for (int k = 0; k < 4; k++)
        if (!isfinite(out->box[k])) return HM_OK;
    *keep = 1;
    st->post_ms += now_ms() - t2;
    return HM_OK;
}

int hm_det_run(hm_det_state *s, const uint8_t *rgb, int w, int h, const hm_det_opts *opts, hm_pool *pool,
               hm_det_hand *out, int cap, int *n, hm_det_stats *stats) {
    hm_det_opts def;
    hm_det_stats st;
    memset(&st, 0, sizeof st);
    if (n) *n = 0;
    if (!s || !rgb || !n || (!out && cap > 0) || cap < 0) return hm_err(HM_E_ARG, "hm_det_run: bad arguments");
    if (w < 1 || h < 1 || w > HM_IMAGE_MAX_DIM || h > HM_IMAGE_MAX_DIM || (long long)w * h > HM_IMAGE_MAX_PIXELS)
        return hm_err(HM_E_ARG, "image %dx%d out of range for the hand detector", w, h);
    if (!opts) {
        hm_det_opts_default(&def);
        opts = &def;
    }
    int rc = hm_det_opts_check(opts);
    if (rc) return rc;
    const double t_start = now_ms();
    s->ncand = 0;
    s->seq = 0;

    /* 1. palm passes: the full frame (level 0), then each tile level */
    rc = palm_pass(s, rgb, w, h, (hm_det_rect){0.5 * w, 0.5 * h, w, h, 0.0}, 0, opts, pool, &st);
    const int L = w > h ? w : h;
    for (int li = 0; li < opts->n_levels && !rc; li++) {
        const int side = (int)lround(L / (double)opts->levels[li]);
        if (side < opts->min_tile) continue;
        double cx[64], cy[64];
        const int nx = hm_det_tile_axis(w, side, opts->overlap, cx, 64);
        const int ny = hm_det_tile_axis(h, side, opts->overlap, cy, 64);
        for (int iy = 0; iy < ny && !rc; iy++)
            for (int ix = 0; ix < nx && !rc; ix++)
                rc = palm_pass(s, rgb, w, h, (hm_det_rect){cx[ix], cy[iy], side, side, 0.0}, li + 1, opts, pool, &st);
    }
    if (rc) return rc;
    st.candidates = s->ncand;

    /* 2. cross-pass palm suppression, best score first */
    double t0 = now_ms();
    const int nkept = hm_det_suppress(s->cand, s->ncand, opts->palm_iou, s->order);
    st.post_ms += now_ms() - t0;

    /* 3. landmarks of each kept palm */
    int nh = 0;
    for (int k = 0; k < nkept; k++) {
        int keep;
        rc = landmark(s, rgb, w, h, &s->cand[s->order[k]], opts, pool, &st, &s->hands[nh], &keep);
        if (rc) return rc;
        nh += keep;
    }

    /* 4. merge repeats (kept is in palm-score order) */
    t0 = now_ms();
    const int nout = hm_det_merge(s->hands, nh, opts->merge_iou, opts->merge_contain);
    int lim = opts->max_hands < cap ? opts->max_hands : cap;
    if (nout < lim) lim = nout;
    for (int i = 0; i < lim; i++) out[i] = s->hands[i];
    *n = lim;
    st.hands = lim;
    st.post_ms += now_ms() - t0;
    st.total_ms = now_ms() - t_start;
    if (stats) *stats = st;
    return HM_OK;
}
