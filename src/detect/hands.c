/* hands.c - the detector's orchestration: palm passes (full frame, then
 * tiles), cross-pass palm suppression, landmarks, merge (see detect.h). */
#include <math.h>
#include <string.h>
#include <time.h>

#include "core/util.h"
#include "detect/det_internal.h"
#include "format/image.h"

/* Candidates arrive pass by pass; past the cap the worst one gives way. */
static void add_cand(hm_det_state *s, const hm_palm_px *p) {
    const int seq = s->seq++;
    int at = s->ncand;
    if (s->ncand == HM_DET_MAX_CANDIDATES) {
        /* never a full-frame palm: those are landmarked before any tile
         * runs (hm_det_run step 2) and must stay where they are */
        at = -1;
        for (int i = 0; i < s->ncand; i++)
            if (s->cand[i].level > 0 && (at < 0 || s->cand[i].score < s->cand[at].score)) at = i;
        if (at < 0 || !(p->score > s->cand[at].score)) return;
    } else {
        s->ncand++;
    }
    s->cand[at] = *p;
    s->cand[at].seq = seq;
}

/* One palm pass of roi on worker w (its own model state and scratch):
 * the palms found, in image pixels, into out (at most cap, best scores
 * first: weighted NMS orders them). Returns their count or an error. */
static int palm_pass(const hm_det_model *m, hm_det_worker *w, const uint8_t *rgb, int iw, int ih, hm_det_rect roi,
                     int level, const hm_det_opts *o, hm_pool *pool, hm_palm_px *out, int cap) {
    float pad[4];
    const hm_det_rect lroi = hm_det_pad_roi(roi, HM_PALM_SIZE, HM_PALM_SIZE, pad);
    double t0 = 1e3 * hm_now();
    hm_det_warp(rgb, iw, ih, &lroi, HM_PALM_SIZE, HM_PALM_SIZE, 0, hm_tfl_input(w->palm, 0));
    double t1 = 1e3 * hm_now();
    int rc = hm_tfl_invoke(w->palm, pool);
    double t2 = 1e3 * hm_now();
    if (rc) return rc;
    const int nd = hm_palm_decode(hm_tfl_output(w->palm, m->palm_boxes), hm_tfl_output(w->palm, m->palm_scores),
                                  m->anchors, o->min_palm, w->dec);
    int nk = hm_palm_wnms(w->dec, nd, 0.3f, w->nms, w->idx);
    if (nk > cap) nk = cap;
    for (int i = 0; i < nk; i++) {
        hm_palm_to_image(&w->nms[i], &lroi, pad, &out[i]);
        out[i].level = level;
        out[i].levels = 1u << level;
    }
    w->st.palm_calls++;
    w->st.warp_ms += t1 - t0;
    w->st.palm_ms += t2 - t1;
    w->st.post_ms += 1e3 * hm_now() - t2;
    return nk;
}

static int landmark(const hm_det_model *m, hm_det_worker *w, const uint8_t *rgb, int iw, int ih, const hm_palm_px *p,
                    const hm_det_opts *o, hm_pool *pool, hm_det_hand *out, int *keep) {
    const hm_det_rect rect = hm_palm_hand_rect(p);
    float pad[4];
    *keep = 0;
    /* ValidateRoi: a degenerate palm gives no crop */
    if (!(rect.w > 0) || !(rect.h > 0) || !isfinite(rect.cx) || !isfinite(rect.cy) || !isfinite(rect.rot))
        return HM_OK;
    const hm_det_rect lroi = hm_det_pad_roi(rect, HM_LM_SIZE, HM_LM_SIZE, pad);
    double t0 = 1e3 * hm_now();
    hm_det_warp(rgb, iw, ih, &lroi, HM_LM_SIZE, HM_LM_SIZE, 1, hm_tfl_input(w->lm, 0));
    double t1 = 1e3 * hm_now();
    int rc = hm_tfl_invoke(w->lm, pool);
    double t2 = 1e3 * hm_now();
    if (rc) return rc;
    w->st.landmark_calls++;
    w->st.warp_ms += t1 - t0;
    w->st.landmark_ms += t2 - t1;
    const float pres = hm_tfl_output(w->lm, m->lm_presence)[0];
    const float hand = hm_tfl_output(w->lm, m->lm_handedness)[0];
    const float need = p->level == 0 ? o->min_presence : fmaxf(o->min_presence, o->tile_presence);
    if (!(pres >= need)) return HM_OK;
    hm_lm_project(hm_tfl_output(w->lm, m->lm_landmarks), &lroi, pad, out->landmarks);
    hm_lm_box(out->landmarks, out->box);
    out->is_right = hand > 0.5f;
    out->palm_score = (float)p->score;
    out->presence = pres;
    out->handedness = hand;
    out->roi = rect;
    out->level = p->level;
    out->levels = p->levels;
    out->pass = HM_DET_PASS_PALM;
    out->passes = 1u << HM_DET_PASS_PALM;
    out->person = -1;
    out->wrist[0] = out->landmarks[0][0], out->wrist[1] = out->landmarks[0][1];
    for (int k = 0; k < 4; k++)
        if (!isfinite(out->box[k])) return HM_OK;
    *keep = 1;
    w->st.post_ms += 1e3 * hm_now() - t2;
    return HM_OK;
}

/* A batch of tile passes or landmark calls spread over the pool: each task
 * runs whole model calls on the worker of the thread that takes it (a
 * worker per thread; every result lands in its task's own slot). */
typedef struct {
    hm_det_state *s;
    const uint8_t *rgb;
    int w, h;
    const hm_det_opts *o;
    int at;                       /* landmark_task: the first output slot */
    int rc[HM_DET_MAX_WORKERS];   /* first error per thread */
} batch_job;

static void tile_task(void *ctx, int t, int tid) {
    batch_job *j = ctx;
    if (j->rc[tid]) return;
    hm_det_tile *tl = &j->s->tiles[t];
    int n = palm_pass(j->s->m, j->s->w[tid], j->rgb, j->w, j->h, tl->roi, tl->level, j->o, NULL, tl->p,
                      HM_DET_TILE_CANDS);
    if (n < 0) j->rc[tid] = n;
    else tl->n = n;
}

/* Landmarks of the palm s->lmq[k] into hands[j->at + k] (and keep). */
static void landmark_task(void *ctx, int k, int tid) {
    batch_job *j = ctx;
    hm_det_state *s = j->s;
    if (j->rc[tid]) return;
    int rc = landmark(s->m, s->w[tid], j->rgb, j->w, j->h, &s->cand[s->lmq[k]], j->o, NULL, &s->hands[j->at + k],
                      &s->keep[j->at + k]);
    if (rc) j->rc[tid] = rc;
}

/* Run ntasks of fn, coarse (one task a thread) when the state has a worker
 * for every thread of the pool, else on worker 0 with the pool inside each
 * model call. The first error, if any. */
static int run_batch(batch_job *j, hm_task_fn fn, int ntasks, hm_pool *pool) {
    const int nt = hm_pool_size(pool);
    memset(j->rc, 0, sizeof j->rc);
    if (nt > 1 && ntasks > 1 && j->s->nworkers >= nt) {
        hm_pool_run(pool, fn, j, ntasks);
    } else {
        for (int t = 0; t < ntasks && !j->rc[0]; t++) fn(j, t, 0);
    }
    for (int i = 0; i < nt && i < HM_DET_MAX_WORKERS; i++)
        if (j->rc[i]) return j->rc[i];
    return HM_OK;
}

/* Landmarks of the n palms s->lmq[0..n) into s->hands[at..] (one palm: the
 * pool inside the model call; more: a palm per thread). The hands that pass
 * are compacted to hands[at..at + kept), their candidates to lmq[0..kept).
 * Returns kept or an error. */
static int landmark_palms(hm_det_state *s, batch_job *j, int at, int n, hm_pool *pool) {
    j->at = at;
    const int rc = n == 1 ? landmark(s->m, s->w[0], j->rgb, j->w, j->h, &s->cand[s->lmq[0]], j->o, pool, &s->hands[at],
                                     &s->keep[at])
                          : run_batch(j, landmark_task, n, pool);
    if (rc) return rc;
    int kept = 0;
    for (int k = 0; k < n; k++)
        if (s->keep[at + k]) s->lmq[kept] = s->lmq[k], s->hands[at + kept++] = s->hands[at + k];
    return kept;
}

/* Run the nt tiles gathered and add their palms to the candidates in tile
 * order, so the result is the same however the batch was spread. */
static int flush_tiles(hm_det_state *s, batch_job *j, hm_pool *pool, int nt) {
    int rc = run_batch(j, tile_task, nt, pool);
    if (rc) return rc;
    for (int t = 0; t < nt; t++)
        for (int i = 0; i < s->tiles[t].n; i++) add_cand(s, &s->tiles[t].p[i]);
    return HM_OK;
}

/* The tile passes of every level, in batches, except those the prior
 * rules out; *ntiles counts them all. */
static int tile_passes(hm_det_state *s, batch_job *j, hm_pool *pool, int *ntiles) {
    const hm_det_opts *o = j->o;
    const int L = j->w > j->h ? j->w : j->h;
    int nt = 0;
    for (int li = 0; li < o->n_levels; li++) {
        const int side = (int)lround(L / (double)o->levels[li]);
        if (side < o->min_tile) continue;
        double cx[HM_DET_TILE_AXIS], cy[HM_DET_TILE_AXIS];
        const int nx = hm_det_tile_axis(j->w, side, o->overlap, cx, HM_DET_TILE_AXIS);
        const int ny = hm_det_tile_axis(j->h, side, o->overlap, cy, HM_DET_TILE_AXIS);
        if (s->use_prior) hm_det_tiles_wanted((const float(*)[2])s->prior, s->nprior, cx, nx, cy, ny, side, s->wanted);
        for (int iy = 0; iy < ny; iy++)
            for (int ix = 0; ix < nx; ix++) {
                const hm_det_rect roi = {cx[ix], cy[iy], side, side, 0.0};
                ++*ntiles;
                /* no full-frame score outside the palms that pass found
                 * reaches the prior in the middle of this tile: a hand
                 * there is another tile's, or none */
                if (s->use_prior && !s->wanted[iy * nx + ix]) continue;
                s->tiles[nt].roi = roi;
                s->tiles[nt].level = li + 1;
                s->tiles[nt].n = 0;
                if (++nt < HM_DET_TILE_BATCH) continue;
                int rc = flush_tiles(s, j, pool, nt);
                if (rc) return rc;
                nt = 0;
            }
    }
    return nt ? flush_tiles(s, j, pool, nt) : HM_OK;
}

static void add_stats(hm_det_stats *st, const hm_det_stats *w) {
    st->palm_calls += w->palm_calls, st->landmark_calls += w->landmark_calls;
    st->warp_ms += w->warp_ms, st->palm_ms += w->palm_ms, st->landmark_ms += w->landmark_ms;
    st->post_ms += w->post_ms;
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
    const double t_start = 1e3 * hm_now();
    double t0;
    s->ncand = 0;
    s->seq = 0;
    for (int i = 0; i < s->nworkers; i++) memset(&s->w[i]->st, 0, sizeof s->w[i]->st);
    batch_job job = {.s = s, .rgb = rgb, .w = w, .h = h, .o = opts};

    /* 1. the full frame's palm pass (level 0, the pool inside the model call) */
    hm_palm_px *full = s->tiles[0].p;
    int nf = palm_pass(s->m, s->w[0], rgb, w, h, (hm_det_rect){0.5 * w, 0.5 * h, w, h, 0.0}, 0, opts, pool, full,
                       HM_DET_TILE_CANDS);
    if (nf < 0) return nf;
    for (int i = 0; i < nf; i++) add_cand(s, &full[i]);
    /* 2. the full frame's hands first (its palms deduplicated, then
     * landmarked; one palm: the pool inside the call): a tile palm that
     * repeats one of their palms is that hand again and is not looked at */
    t0 = 1e3 * hm_now();
    const int nk0 = hm_det_suppress(s->cand, s->ncand, opts->palm_iou, s->order);
    for (int k = 0; k < nk0; k++) s->lmq[k] = s->order[k];
    st.post_ms += 1e3 * hm_now() - t0;
    const int nh0 = landmark_palms(s, &job, 0, nk0, pool);
    if (nh0 < 0) return nh0;
    for (int i = 0; i < nh0; i++) s->hcand[i] = s->lmq[i];

    /* the tile prior: the full frame's tensors, still in worker 0's palm
     * state, decoded again at the prior's threshold; what lies inside the
     * palm of a hand step 2 found is that hand's and asks for no tile */
    s->use_prior = opts->n_levels > 0 && opts->tile_prior > 0.0f;
    s->nprior = 0;
    if (s->use_prior) {
        t0 = 1e3 * hm_now();
        float pad[4];
        const hm_det_rect lroi = hm_det_pad_roi((hm_det_rect){0.5 * w, 0.5 * h, w, h, 0.0}, HM_PALM_SIZE, HM_PALM_SIZE, pad);
        const int nd = hm_palm_decode(hm_tfl_output(s->w[0]->palm, s->m->palm_boxes),
                                      hm_tfl_output(s->w[0]->palm, s->m->palm_scores), s->m->anchors, opts->tile_prior,
                                      s->w[0]->dec);
        s->nprior = hm_det_prior(s->w[0]->dec, nd, &lroi, pad, full, nf, opts->prior_mask, s->cand, s->hcand, nh0,
                                 opts->tile_repeat, s->prior);
        st.post_ms += 1e3 * hm_now() - t0;
    }

    /* 3. the tile passes the prior asks for */
    rc = tile_passes(s, &job, pool, &st.tiles);
    if (rc) return rc;
    st.candidates = s->ncand;

    /* 4. the tiles' palms: repeats of a palm kept before them go (the full
     * frame's are kept first, in the same order as in step 2), and so do
     * those lying mostly inside the palm of a full-frame hand (tile_repeat:
     * that hand seen again; its levels join the hand's); the rest are
     * landmarked */
    t0 = 1e3 * hm_now();
    const int nkept = hm_det_suppress(s->cand, s->ncand, opts->palm_iou, s->order);
    for (int i = 0; i < nh0; i++) s->hands[i].levels = s->cand[s->hcand[i]].levels;
    int nq = 0;
    for (int k = nk0; k < nkept; k++) {
        const hm_palm_px *p = &s->cand[s->order[k]];
        const int in = hm_det_in_palm(p->box, s->cand, s->hcand, nh0, opts->tile_repeat);
        if (in >= 0) s->hands[in].levels |= p->levels;
        else s->lmq[nq++] = s->order[k];
    }
    st.post_ms += 1e3 * hm_now() - t0;
    const int ntile = landmark_palms(s, &job, nh0, nq, pool);
    if (ntile < 0) return ntile;
    int nh = nh0 + ntile;
    for (int i = 0; i < s->nworkers; i++) add_stats(&st, &s->w[i]->st);
    st.tiles_run = st.palm_calls - 1;
    /* the palm hands in palm-score order (the merge's priority and the
     * output's order; the full frame's came first) */
    for (int i = 1; i < nh; i++) {
        const hm_det_hand x = s->hands[i];
        int j = i;
        for (; j > 0 && s->hands[j - 1].palm_score < x.palm_score; j--) s->hands[j] = s->hands[j - 1];
        s->hands[j] = x;
    }

    /* 3b. the body pass's hands after the palm pass's */
    if (opts->body == HM_DET_BODY_ON && !s->body)
        return hm_err(HM_E_ARG, "the body pass is on but its models were not loaded (hm_det_model_load_body, "
                      "before the detector state is made)");
    const int run_body = s->body && (opts->body == HM_DET_BODY_ON ||
                                     (opts->body == HM_DET_BODY_AUTO && opts->n_levels > 0 && nh < 2 * opts->body_persons));
    st.body_run = run_body;
    if (run_body && (rc = hm_det_add_body(s, rgb, w, h, opts, pool, &nh, &st))) return rc;

    /* 3c. the proposals, each verified by the hand landmark model. AUTO:
     * with the tiles, where the palm and body passes found fewer than two
     * hands (a person's two; measured in docs/detector.md: the proposals
     * added hands only there) */
    if (opts->proposals == HM_DET_BODY_ON && !s->ht)
        return hm_err(HM_E_ARG, "the proposal pass is on but its model was not loaded (hm_det_model_load_proposals, "
                      "before the detector state is made)");
    int with_lm = 0;
    for (int i = 0; i < nh; i++) with_lm += s->hands[i].pass != HM_DET_PASS_KEYPOINTS;
    const int run_props = s->ht && (opts->proposals == HM_DET_BODY_ON ||
                                    (opts->proposals == HM_DET_BODY_AUTO && opts->n_levels > 0 && with_lm < 2));
    st.proposals_run = run_props;
    if (run_props && (rc = hm_det_add_proposals(s, rgb, w, h, opts, pool, &nh, &st))) return rc;

    /* 4. merge repeats by identity; 5. no box too small to crop */
    t0 = 1e3 * hm_now();
    int nout = hm_det_merge(s->hands, nh, opts->same_hand, s->rep);
    int lim = opts->max_hands < cap ? opts->max_hands : cap, nk = 0;
    for (int i = 0; i < nout && nk < lim; i++) {
        const float *b = s->hands[i].box;
        if (!(b[2] - b[0] >= opts->min_box || b[3] - b[1] >= opts->min_box)) {
            st.dropped++;
            continue;
        }
        out[nk++] = s->hands[i];
    }
    *n = nk;
    lim = nk;
    st.hands = lim;
    st.post_ms += 1e3 * hm_now() - t0;
    st.total_ms = 1e3 * hm_now() - t_start;
    if (stats) *stats = st;
    return HM_OK;
}
