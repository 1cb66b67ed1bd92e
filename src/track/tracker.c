/* tracker.c - hands followed through a stream of frames (tracker.h). */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/pool.h"
#include "core/util.h"
#include "detect/stages.h"
#include "format/image.h"
#include "track/smooth.h"
#include "track/tracker.h"

#define THUMB 16

typedef struct {
    int live, id, frames, is_right;
    int detected_now;     /* this frame's landmarks came from palm detection */
    double hand_sum;      /* sum of the raw handedness over the track */
    float palm_score;
    int pass;
    int source, body, person; /* the starting detection's (hamer_detection's fields) */
    int body_right;       /* person >= 0: the side of the person's wrist it came from */
    hm_det_rect roi;      /* where to look in the next frame */
    hm_det_hand hand;     /* this frame's landmarks */
    hm_smooth_state sm;
} track;

struct hamer_tracker {
    hamer_tracker_params p;
    hm_det_opts dopts;
    hm_det_state *ds;
    hm_pool *pool;
    track *tr;            /* p.max_hands slots */
    int *ended;           /* slots ended in the current frame */
    int next_id, since_detect, have_thumb, pushed;
    double time_s;
    float thumb[THUMB * THUMB * 3], prev_thumb[THUMB * THUMB * 3];
    hm_det_hand det[HM_DET_MAX_HANDS];
    hm_tracker_frame fr;
};

hamer_tracker_params hm_tracker_default_params(void) {
    hamer_tracker_params p;
    memset(&p, 0, sizeof p);
    p.max_hands = 2;
    p.min_score = 0.5f;
    p.min_presence = 0.5f;
    p.track_presence = 0.5f;
    p.tiles = false;
    p.redetect_every = 10;
    p.cut_threshold = 0.15f;
    p.smooth = HAMER_SMOOTH_ONE_EURO;
    p.min_cutoff = 1.0;
    p.beta = 1.0;
    p.d_cutoff = 1.0;
    p.betas_frames = 30;
    p.betas_min = 5;
    return p;
}

static int check(const hamer_tracker_params *p) {
    const char *bad = NULL;
    if (p->max_hands < 1 || p->max_hands > HAMER_MAX_HANDS) bad = "max_hands outside 1..64";
    else if (!(p->min_score > 0 && p->min_score < 1)) bad = "min_score outside (0, 1)";
    else if (!(p->min_presence >= 0 && p->min_presence <= 1)) bad = "min_presence outside [0, 1]";
    else if (!(p->track_presence >= 0 && p->track_presence <= 1)) bad = "track_presence outside [0, 1]";
    else if (p->redetect_every < 1 || p->redetect_every > 10000) bad = "redetect_every outside 1..10000";
    else if (!(p->cut_threshold >= 0) || !isfinite(p->cut_threshold)) bad = "cut_threshold must be >= 0";
    else if (p->smooth != HAMER_SMOOTH_NONE && p->smooth != HAMER_SMOOTH_ONE_EURO) bad = "unknown smooth mode";
    else if (!(p->min_cutoff > 0 && p->min_cutoff <= 1e6)) bad = "min_cutoff must be in (0, 1e6] Hz";
    else if (!(p->beta >= 0 && p->beta <= 1e6)) bad = "beta must be in [0, 1e6]";
    else if (!(p->d_cutoff > 0 && p->d_cutoff <= 1e6)) bad = "d_cutoff must be in (0, 1e6] Hz";
    else if (p->betas_frames < 1 || p->betas_frames > HM_SMOOTH_MAX_BETAS) bad = "betas_frames outside 1..256";
    else if (p->betas_min < 1 || p->betas_min > p->betas_frames) bad = "betas_min outside 1..betas_frames";
    return bad ? hm_err(HM_E_ARG, "tracker: %s", bad) : HM_OK;
}

hamer_tracker *hm_tracker_new(const hm_det_model *m, const hamer_tracker_params *params, int n_threads) {
    hamer_tracker_params p = params ? *params : hm_tracker_default_params();
    if (!m || n_threads < 1 || n_threads > 1024) {
        hm_err(HM_E_ARG, "hamer_tracker_new: bad arguments (detector %p, n_threads %d)", (const void *)m, n_threads);
        return NULL;
    }
    if (check(&p)) return NULL;
    hamer_tracker *t = calloc(1, sizeof *t);
    if (!t) goto nomem;
    t->p = p;
    hm_det_opts_default(&t->dopts);
    t->dopts.max_hands = HM_DET_MAX_HANDS; /* every hand: the live ones are matched out */
    t->dopts.min_palm = p.min_score;
    t->dopts.min_presence = p.min_presence;
    if (!p.tiles) t->dopts.n_levels = 0;
    t->dopts.body = p.body == HAMER_BODY_ON ? HM_DET_BODY_ON : p.body == HAMER_BODY_OFF ? HM_DET_BODY_OFF
                                                                                       : HM_DET_BODY_AUTO;
    t->dopts.proposals = p.proposals == HAMER_PROPOSALS_ON    ? HM_DET_BODY_ON
                         : p.proposals == HAMER_PROPOSALS_OFF ? HM_DET_BODY_OFF
                                                              : HM_DET_BODY_AUTO;
    const int cap = p.max_hands;
    t->tr = calloc((size_t)cap, sizeof *t->tr);
    t->ended = calloc((size_t)cap, sizeof *t->ended);
    t->fr.tracks = calloc((size_t)cap, sizeof *t->fr.tracks);
    t->fr.dets = calloc((size_t)cap, sizeof *t->fr.dets);
    t->fr.raw = calloc((size_t)cap, sizeof *t->fr.raw);
    t->fr.smoothed = calloc((size_t)cap, sizeof *t->fr.smoothed);
    if (!t->tr || !t->ended || !t->fr.tracks || !t->fr.dets || !t->fr.raw || !t->fr.smoothed) goto nomem;
    t->fr.cap = cap;
    if (hm_det_state_new(m, &t->ds)) goto fail;
    if (!(t->pool = hm_pool_create(n_threads))) goto fail;
    hm_tracker_reset(t);
    return t;
nomem:
    hm_err(HM_E_NOMEM, "hamer_tracker_new: out of memory");
fail:
    hm_tracker_free(t);
    return NULL;
}

void hm_tracker_free(hamer_tracker *t) {
    if (!t) return;
    hm_det_state_free(t->ds);
    hm_pool_destroy(t->pool);
    free(t->tr);
    free(t->ended);
    free(t->fr.tracks);
    free(t->fr.dets);
    free(t->fr.raw);
    free(t->fr.smoothed);
    free(t);
}

int hm_tracker_reset(hamer_tracker *t) {
    if (!t) return hm_err(HM_E_ARG, "hamer_tracker_reset: tracker is NULL");
    for (int i = 0; i < t->p.max_hands; i++) t->tr[i].live = 0;
    t->since_detect = t->p.redetect_every; /* detect on the next frame */
    t->have_thumb = 0;
    t->pushed = 0;
    t->fr.n = 0;
    t->fr.regressed = 0;
    return HM_OK;
}

/* Mean RGB of a 16x16 grid of cells, sampling at most ~256 points a side. */
static void thumbnail(const uint8_t *rgb, int w, int h, float *out) {
    const int step = (w > h ? w : h) / 256 + 1;
    double acc[THUMB * THUMB * 3] = {0};
    int cnt[THUMB * THUMB] = {0};
    for (int y = 0; y < h; y += step) {
        const int cy = (int)((long long)y * THUMB / h);
        const uint8_t *row = rgb + (size_t)y * w * 3;
        for (int x = 0; x < w; x += step) {
            const int c = cy * THUMB + (int)((long long)x * THUMB / w);
            acc[3 * c] += row[3 * x], acc[3 * c + 1] += row[3 * x + 1], acc[3 * c + 2] += row[3 * x + 2];
            cnt[c]++;
        }
    }
    for (int c = 0; c < THUMB * THUMB; c++)
        for (int k = 0; k < 3; k++) out[3 * c + k] = cnt[c] ? (float)(acc[3 * c + k] / cnt[c] / 255.0) : 0.0f;
}

/* Landmark-box overlap: IoU, and the intersection over the smaller area. */
static void overlap(const float a[4], const float b[4], double *iou, double *contain) {
    const double iw = fmin(a[2], b[2]) - fmax(a[0], b[0]), ih = fmin(a[3], b[3]) - fmax(a[1], b[1]);
    const double inter = (iw > 0 ? iw : 0) * (ih > 0 ? ih : 0);
    const double aa = ((double)a[2] - a[0]) * ((double)a[3] - a[1]), ab = ((double)b[2] - b[0]) * ((double)b[3] - b[1]);
    const double uni = aa + ab - inter, mn = fmin(aa, ab);
    *iou = uni > 0 ? inter / uni : 0.0;
    *contain = mn > 0 ? inter / mn : 0.0;
}

static int same_hand(const float a[4], const float b[4]) {
    double iou, contain;
    overlap(a, b, &iou, &contain);
    return iou > 0.5 || contain > 0.8;
}

/* A rectangle the next frame can be cropped with: finite, at least 8 px,
 * at most 4 image sides, its centre within one side of the image. */
static int usable_roi(const hm_det_rect *r, int w, int h) {
    const double L = w > h ? w : h;
    return isfinite(r->cx) && isfinite(r->cy) && isfinite(r->rot) && r->w >= 8 && r->w <= 4 * L &&
           r->cx > -r->w && r->cx < w + r->w && r->cy > -r->w && r->cy < h + r->w;
}

static void start_track(track *k, const hm_det_hand *d, int id) {
    memset(k, 0, sizeof *k);
    k->live = 1;
    k->id = id;
    k->palm_score = d->palm_score;
    k->pass = d->level;
    k->source = d->pass == HM_DET_PASS_BODY       ? HAMER_SOURCE_BODY
                : d->pass == HM_DET_PASS_PROPOSAL ? HAMER_SOURCE_PROPOSAL
                                                  : HAMER_SOURCE_PALM;
    k->body = (d->passes >> HM_DET_PASS_BODY) & 1u;
    k->person = k->body ? d->person : -1;
    k->body_right = d->is_right;
    k->hand = *d;
}

/* This frame's landmarks into the track: vote, next rectangle. */
static void update_track(track *k, int w, int h) {
    k->frames++;
    k->hand_sum += k->hand.handedness;
    /* A hand found from a person's wrist is that side, as in hamer_detect;
     * the classifier's vote decides for the others. */
    const int right = k->person >= 0 ? k->body_right : k->hand_sum / k->frames > 0.5;
    if (k->frames > 1 && right != k->is_right) hm_smooth_reset(&k->sm); /* the other side's results: start over */
    k->is_right = right;
    k->roi = hm_lm_hand_roi(k->hand.landmarks);
    if (!usable_roi(&k->roi, w, h)) k->live = 0;
}

/* A free slot for a new track: one not ended in this frame if there is
 * one (those may still come back), else any free one; -1 if none. */
static int free_slot(const hamer_tracker *t, int nended) {
    int any = -1;
    for (int k = 0; k < t->p.max_hands; k++) {
        if (t->tr[k].live) continue;
        int ended = 0;
        for (int e = 0; e < nended; e++) ended |= t->ended[e] == k;
        if (!ended) return k;
        if (any < 0) any = k;
    }
    return any;
}

/* Palm detection, and its hands matched to the tracks (tracker.h step 3). */
static int detect(hamer_tracker *t, const uint8_t *rgb, int w, int h, int nended, hamer_track_stats *st) {
    int n = 0;
    hm_det_stats ds;
    double t0 = hm_now();
    int rc = hm_det_run(t->ds, rgb, w, h, &t->dopts, t->pool, t->det, HM_DET_MAX_HANDS, &n, &ds);
    st->detect_ms += 1e3 * (hm_now() - t0);
    if (rc) return rc;
    st->detected = 1;
    t->since_detect = 0;
    for (int i = 0; i < n; i++) { /* best palm score first */
        const hm_det_hand *d = &t->det[i];
        int taken = 0, nlive = 0;
        for (int k = 0; k < t->p.max_hands; k++)
            if (t->tr[k].live) {
                nlive++;
                taken |= same_hand(t->tr[k].hand.box, d->box);
            }
        if (taken) continue;
        /* a track ended in this frame comes back when this is its hand */
        int back = -1;
        for (int e = 0; e < nended && back < 0; e++) {
            const track *k = &t->tr[t->ended[e]];
            double iou, contain;
            overlap(k->hand.box, d->box, &iou, &contain);
            if (!k->live && k->id >= 0 && iou > 0.3) back = t->ended[e];
        }
        if (back < 0 && nlive >= t->p.max_hands) continue;
        track *k = &t->tr[back >= 0 ? back : free_slot(t, nended)];
        if (back >= 0) {
            k->live = 1;
            k->hand = *d;
            k->palm_score = d->palm_score;
            k->pass = d->level;
            st->lost--;
        } else {
            start_track(k, d, t->next_id++);
            st->new_tracks++;
        }
        k->detected_now = 1;
    }
    return HM_OK;
}

int hm_tracker_push(hamer_tracker *t, const uint8_t *rgb, int w, int h, double time_s, hamer_track *out, int max,
                    hamer_track_stats *stats) {
    hamer_track_stats st;
    memset(&st, 0, sizeof st);
    if (stats) *stats = st;
    if (!t || !rgb || max < 0 || (max > 0 && !out) || !isfinite(time_s))
        return hm_err(HM_E_ARG, "hamer_tracker_push: bad arguments");
    if (w < 1 || h < 1 || w > HM_IMAGE_MAX_DIM || h > HM_IMAGE_MAX_DIM || (long long)w * h > HM_IMAGE_MAX_PIXELS)
        return hm_err(HM_E_ARG, "hamer_tracker_push: frame %dx%d out of range", w, h);
    if (t->pushed && !(time_s > t->time_s))
        return hm_err(HM_E_ARG, "hamer_tracker_push: time %.6f s does not increase (previous frame %.6f s)", time_s,
                      t->time_s);
    if (t->pushed && (w != t->fr.w || h != t->fr.h)) hm_tracker_reset(t); /* another stream */
    const double t0 = hm_now();

    /* 1. scene cut */
    thumbnail(rgb, w, h, t->thumb);
    if (t->have_thumb) {
        double diff = 0;
        for (int i = 0; i < THUMB * THUMB * 3; i++) diff += fabs((double)t->thumb[i] - t->prev_thumb[i]);
        st.cut = diff / (THUMB * THUMB * 3) > t->p.cut_threshold;
    }
    memcpy(t->prev_thumb, t->thumb, sizeof t->thumb);
    t->have_thumb = 1;
    int nended = 0;
    for (int k = 0; k < t->p.max_hands; k++)
        if (st.cut && t->tr[k].live) t->tr[k].live = 0; /* a cut ends tracks; no comeback across it */

    /* 2. the live tracks, landmarks only */
    for (int k = 0; k < t->p.max_hands; k++) {
        track *tk = &t->tr[k];
        tk->detected_now = 0;
        if (!tk->live) continue;
        int found = 0;
        hm_det_hand hand;
        int rc = hm_det_track(t->ds, rgb, w, h, &tk->roi, t->p.track_presence, t->pool, &hand, &found, NULL);
        if (rc) return rc;
        if (found) {
            hand.palm_score = tk->palm_score;
            hand.level = tk->pass;
            tk->hand = hand;
        } else {
            tk->live = 0;
            t->ended[nended++] = k;
            st.lost++;
        }
    }
    for (int a = 0; a < t->p.max_hands; a++) /* two tracks on one hand: the younger goes */
        for (int b = 0; b < t->p.max_hands; b++) {
            track *A = &t->tr[a], *B = &t->tr[b];
            if (a == b || !A->live || !B->live || A->id > B->id) continue;
            if (same_hand(A->hand.box, B->hand.box)) {
                B->live = 0;
                st.lost++;
            }
        }
    st.track_ms = 1e3 * (hm_now() - t0);

    /* 3. palm detection when needed */
    int nlive = 0;
    for (int k = 0; k < t->p.max_hands; k++) nlive += t->tr[k].live;
    t->since_detect++;
    if (st.cut || st.lost || !t->pushed || (nlive < t->p.max_hands && t->since_detect >= t->p.redetect_every)) {
        int rc = detect(t, rgb, w, h, nended, &st);
        if (rc) return rc;
    }

    /* 4. votes and next rectangles; the output in id order */
    int n = 0;
    for (int k = 0; k < t->p.max_hands; k++) {
        track *tk = &t->tr[k];
        if (!tk->live) continue;
        update_track(tk, w, h);
        if (!tk->live) t->since_detect = t->p.redetect_every; /* its rectangle left the picture: look again */
        if (n >= t->fr.cap) continue;
        hamer_track *o = &t->fr.tracks[n++];
        memset(o, 0, sizeof *o);
        memcpy(o->det.box.bbox, tk->hand.box, sizeof o->det.box.bbox);
        o->det.box.is_right = tk->is_right;
        o->det.score = tk->palm_score;
        o->det.presence = tk->hand.presence;
        o->det.handedness = tk->hand.handedness;
        memcpy(o->det.landmarks, tk->hand.landmarks, sizeof o->det.landmarks);
        o->det.pass = tk->pass;
        o->det.source = tk->source, o->det.body = tk->body, o->det.person = tk->person;
        o->track_id = tk->id;
        o->tracked = !tk->detected_now;
        o->frames = tk->frames;
        o->handedness_vote = (float)(tk->hand_sum / tk->frames);
    }
    for (int i = 0; i < n; i++) /* insertion sort by id */
        for (int j = i; j > 0 && t->fr.tracks[j].track_id < t->fr.tracks[j - 1].track_id; j--) {
            hamer_track tmp = t->fr.tracks[j];
            t->fr.tracks[j] = t->fr.tracks[j - 1];
            t->fr.tracks[j - 1] = tmp;
        }
    t->fr.n = n;
    t->fr.regressed = 0;
    t->fr.time_s = time_s;
    t->fr.w = w, t->fr.h = h;
    t->time_s = time_s;
    t->pushed = 1;
    t->fr.stats = st;
    const int m = n < max ? n : max;
    for (int i = 0; i < m; i++) out[i] = t->fr.tracks[i];
    if (stats) *stats = st;
    return m;
}

static track *find(hamer_tracker *t, int id) {
    for (int k = 0; k < t->p.max_hands; k++)
        if (t->tr[k].live && t->tr[k].id == id) return &t->tr[k];
    return NULL;
}

int hm_tracker_smooth(hamer_tracker *t, const hamer_track *tracks, int n, const hamer_hand *raw, hamer_hand *smoothed) {
    if (!t || n < 0 || (n > 0 && (!tracks || !raw || !smoothed)))
        return hm_err(HM_E_ARG, "hamer_tracker_smooth: bad arguments");
    const hm_smooth_opts o = {t->p.min_cutoff, t->p.beta, t->p.d_cutoff, t->p.betas_frames, t->p.betas_min};
    for (int i = 0; i < n; i++) {
        track *k = find(t, tracks[i].track_id);
        if (!k) return hm_err(HM_E_ARG, "hamer_tracker_smooth: track %d is not live", tracks[i].track_id);
        if (smoothed != raw) smoothed[i] = raw[i];
        if (t->p.smooth == HAMER_SMOOTH_NONE || !raw[i].ok) continue;
        hm_smooth_hand(&k->sm, &o, t->time_s, &raw[i], &smoothed[i]);
    }
    return HM_OK;
}

hm_tracker_frame *hm_tracker_frame_buf(hamer_tracker *t) { return &t->fr; }
const hm_tracker_frame *hm_tracker_frame_get(const hamer_tracker *t) { return &t->fr; }
int hm_tracker_smoothing(const hamer_tracker *t) { return t->p.smooth; }
