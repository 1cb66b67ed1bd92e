/* hamer_live.c - hands at a frame source's pace (include/hamer.h:
 * hamer_live_*, hamer_capture_*, hamer_clock).
 *
 * Three stages on three threads (the capture and the tracker are started
 * by hamer_live_run, the regressor is the calling thread) hand frames on
 * through two one-frame slots:
 *
 *   source --read--> capture --slot A--> tracker --slot B--> regressor
 *
 * A stage puts its frame in the next slot and goes on at once; a frame
 * still in the slot is replaced (dropped, counted). A stage takes the slot's
 * frame when it is free. So each stage runs at its own pace on the newest
 * frame and nothing queues. Frames live in a pool of five buffers (one per
 * stage and one per slot: the most that can be in use), the tracks and
 * hands with them; each buffer is sized at its first frame.
 *
 * Smoothing: the regressor regresses some of the tracked frames only, so
 * it keeps One Euro filters of its own per track id (the tracker's filters
 * belong to hamer_tracker_frame's every-frame use), at the regressed
 * frames' times; a track that changes side starts its filters again.
 */
#include <jansson.h>
#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/util.h"
#include "hamer.h"
#include "track/smooth.h"
#include "track/tracker.h"
#include "video/video.h"

#define NBUF 5
/* Latency histogram: bins 1% wide (log-spaced) from 0.05 ms to ~10 hours
 * (a full-size model on a small CPU takes seconds a frame), bin 0 below;
 * a quantile is its bin's geometric middle, within 0.5% of the sample's. */
#define NHIST 2048
#define HIST_LO_MS 0.05
#define HIST_RATIO 1.01

typedef struct {
    uint8_t *rgb;
    size_t cap;              /* bytes allocated */
    int w, h, n;
    long long index, dropped_src;
    double time_s, capture_s;
    hamer_track *tracks;     /* max_hands each */
    hamer_detection *dets;
    hamer_hand *raw, *smoothed;
    hamer_track_stats stats;
} frame;

typedef struct {
    int id, is_right, used;
    long long last;          /* the record count when last used */
    hm_smooth_state sm;
} filter;

struct hamer_live {
    const hamer_detector *det;
    hamer_state *state;
    hamer_live_params p;
    int n_threads;
    hamer_tracker *tracker;
    frame buf[NBUF];
    filter *filters;         /* 2 * max_hands: the live tracks and some just ended */
    int nfilters;

    pthread_mutex_t mu;
    pthread_cond_t cv;
    pthread_mutex_t emit_mu; /* the callback, never two at once */
    int free_list[NBUF], nfree;
    int slot_a, slot_b;      /* buffer index or -1 */
    int capture_done, track_done;
    atomic_int stop;
    int status;              /* the first error (0 none) */
    char msg[1024];
    const hamer_frame_source *src;
    hamer_live_fn fn;
    void *user;

    hamer_live_stats st;
    long long hist[2][NHIST]; /* latency: [0] records with hands regressed (all without a state), [1] tracked-only */
    long long nhist[2];
    double maxhist[2];
    double t_start;
};

double hamer_clock(void) { return hm_now(); }

hamer_capture_params hamer_capture_default_params(void) { return hm_capture_default_params(); }

int hamer_capture_open(const char *url, const hamer_capture_params *params, hamer_frame_source *out) {
    return hm_capture_open(url, params, out);
}

hamer_live_params hamer_live_default_params(void) {
    hamer_live_params p;
    memset(&p, 0, sizeof p);
    p.tracker = hamer_tracker_default_params();
    p.predict = hamer_predict_default_params();
    return p;
}

void hamer_live_free(hamer_live *L) {
    if (!L) return;
    hamer_tracker_free(L->tracker);
    for (int i = 0; i < NBUF; i++) {
        hm_free(L->buf[i].rgb);
        free(L->buf[i].tracks), free(L->buf[i].dets), free(L->buf[i].raw), free(L->buf[i].smoothed);
    }
    free(L->filters);
    pthread_mutex_destroy(&L->mu);
    pthread_mutex_destroy(&L->emit_mu);
    pthread_cond_destroy(&L->cv);
    free(L);
}

hamer_live *hamer_live_new(const hamer_detector *det, hamer_state *state, const hamer_live_params *params,
                           int n_threads) {
    if (!det) {
        hm_err(HM_E_ARG, "%s: detector is NULL", __func__);
        return NULL;
    }
    if (params && (HM_CHECK_RESERVED(params, "hamer_live_params") ||
                   HM_CHECK_RESERVED(&params->predict, "hamer_predict_params")))
        return NULL;
    if (n_threads < 0 || n_threads > 1024) {
        hm_err(HM_E_ARG, "%s: n_threads %d outside 0..1024", __func__, n_threads);
        return NULL;
    }
    hamer_live *L = calloc(1, sizeof *L);
    if (!L) {
        hm_err(HM_E_NOMEM, "%s: out of memory", __func__);
        return NULL;
    }
    pthread_mutex_init(&L->mu, NULL);
    pthread_mutex_init(&L->emit_mu, NULL);
    pthread_cond_init(&L->cv, NULL);
    L->det = det, L->state = state;
    L->p = params ? *params : hamer_live_default_params();
    L->n_threads = n_threads;
    /* the tracker checks its own parameters (the message names the field) */
    if (!(L->tracker = hamer_tracker_new(det, &L->p.tracker, n_threads))) goto fail;
    const int m = L->p.tracker.max_hands;
    for (int i = 0; i < NBUF; i++) {
        frame *f = &L->buf[i];
        f->tracks = calloc((size_t)m, sizeof *f->tracks);
        f->dets = calloc((size_t)m, sizeof *f->dets);
        f->raw = calloc((size_t)m, sizeof *f->raw);
        f->smoothed = calloc((size_t)m, sizeof *f->smoothed);
        if (!f->tracks || !f->dets || !f->raw || !f->smoothed) goto nomem;
    }
    L->nfilters = 2 * m;
    if (!(L->filters = calloc((size_t)L->nfilters, sizeof *L->filters))) goto nomem;
    return L;
nomem:
    hm_err(HM_E_NOMEM, "%s: out of memory", __func__);
fail:
    hamer_live_free(L);
    return NULL;
}

void hamer_live_stop(hamer_live *L) {
    if (!L) return;
    atomic_store(&L->stop, 1);
    pthread_mutex_lock(&L->mu);
    const hamer_frame_source *src = L->src;
    pthread_cond_broadcast(&L->cv);
    pthread_mutex_unlock(&L->mu);
    if (src && src->stop) src->stop(src->ctx);
}

/* The first error stops everything; its message is kept for the caller. */
static void fail_run(hamer_live *L, int code, const char *msg) {
    pthread_mutex_lock(&L->mu);
    if (!L->status) {
        L->status = code;
        snprintf(L->msg, sizeof L->msg, "%s", msg);
    }
    pthread_mutex_unlock(&L->mu);
    hamer_live_stop(L);
}

static int take_free(hamer_live *L) { return L->nfree ? L->free_list[--L->nfree] : -1; }

static void give_back(hamer_live *L, int b) {
    if (b >= 0) L->free_list[L->nfree++] = b;
}

/* Put b into *slot (under mu): the frame there, unread, is dropped. */
static void put(hamer_live *L, int *slot, int b, long long *dropped) {
    if (*slot >= 0) {
        give_back(L, *slot);
        (*dropped)++;
    }
    *slot = b;
    const int waiting = (L->slot_a >= 0) + (L->slot_b >= 0);
    if (waiting > L->st.waiting_max) L->st.waiting_max = waiting;
    pthread_cond_broadcast(&L->cv);
}

/* ---- the callback ---- */

static void record_latency(hamer_live *L, double ms, int tracked_only) {
    const int h = L->state && tracked_only;
    const double k = !(ms >= HIST_LO_MS) ? 0 : 1 + floor(log(ms / HIST_LO_MS) / log(HIST_RATIO));
    L->hist[h][k >= NHIST - 1 ? NHIST - 1 : (int)k]++;
    L->nhist[h]++;
    if (ms > L->maxhist[h]) L->maxhist[h] = ms;
    L->st.records++;
}

static void emit(hamer_live *L, const frame *f, int regressed) {
    pthread_mutex_lock(&L->emit_mu);
    hamer_live_record r;
    memset(&r, 0, sizeof r);
    r.frame = f->index, r.time_s = f->time_s, r.capture_s = f->capture_s;
    r.width = f->w, r.height = f->h, r.regressed = regressed, r.n = f->n;
    r.tracks = f->tracks;
    r.raw = regressed ? f->raw : NULL;
    r.hands = regressed ? f->smoothed : NULL;
    r.stats = f->stats;
    pthread_mutex_lock(&L->mu);
    r.captured = L->st.captured, r.tracked = L->st.tracked, r.regressed_frames = L->st.regressed_frames;
    r.dropped_source = L->st.dropped_source, r.dropped_track = L->st.dropped_track;
    r.dropped_regress = L->st.dropped_regress, r.waiting_max = L->st.waiting_max;
    pthread_mutex_unlock(&L->mu);
    r.latency_ms = 1e3 * (hm_now() - f->capture_s);
    pthread_mutex_lock(&L->mu);
    record_latency(L, r.latency_ms, !regressed);
    pthread_mutex_unlock(&L->mu);
    const int stop = L->fn ? L->fn(L->user, &r) : 0;
    pthread_mutex_unlock(&L->emit_mu);
    if (stop) hamer_live_stop(L);
}

/* ---- capture: the source into slot A ---- */

static int fit(frame *f, int w, int h) {
    const size_t need = (size_t)w * h * 3;
    if (need > f->cap) {
        hm_free(f->rgb);
        if (!(f->rgb = hm_alloc(need))) {
            f->cap = 0;
            return -1;
        }
        f->cap = need;
    }
    f->w = w, f->h = h;
    return 0;
}

static void *capture_main(void *arg) {
    hamer_live *L = arg;
    const hamer_frame_source *src = L->src;
    while (!atomic_load(&L->stop)) {
        hamer_source_frame sf;
        const int r = src->read(src->ctx, &sf);
        if (r <= 0) {
            if (r < 0 && !atomic_load(&L->stop)) fail_run(L, r, hamer_last_error());
            break;
        }
        if (!sf.rgb || sf.width < 1 || sf.height < 1 || (double)sf.width * sf.height > 1e8) {
            fail_run(L, HAMER_E_ARG, "live: the source delivered a frame without pixels or over 100 megapixels");
            break;
        }
        pthread_mutex_lock(&L->mu);
        const int b = take_free(L);
        pthread_mutex_unlock(&L->mu);
        frame *f = &L->buf[b]; /* five buffers for at most five holders: one is free */
        if (fit(f, sf.width, sf.height)) {
            pthread_mutex_lock(&L->mu);
            give_back(L, b);
            pthread_mutex_unlock(&L->mu);
            fail_run(L, HAMER_E_NOMEM, "live: out of memory for a frame");
            break;
        }
        memcpy(f->rgb, sf.rgb, (size_t)sf.width * sf.height * 3);
        f->index = sf.index, f->time_s = sf.time_s, f->capture_s = sf.capture_s, f->n = 0;
        pthread_mutex_lock(&L->mu);
        L->st.captured++;
        L->st.dropped_source = sf.dropped;
        put(L, &L->slot_a, b, &L->st.dropped_track);
        pthread_mutex_unlock(&L->mu);
    }
    pthread_mutex_lock(&L->mu);
    L->capture_done = 1;
    pthread_cond_broadcast(&L->cv);
    pthread_mutex_unlock(&L->mu);
    return NULL;
}

/* ---- tracker: slot A into slot B ---- */

static void *track_main(void *arg) {
    hamer_live *L = arg;
    double last_t = -INFINITY;
    for (;;) {
        pthread_mutex_lock(&L->mu);
        while (L->slot_a < 0 && !L->capture_done && !atomic_load(&L->stop)) pthread_cond_wait(&L->cv, &L->mu);
        const int b = atomic_load(&L->stop) ? -1 : L->slot_a; /* a stop leaves it there: counted at the end */
        if (b >= 0) L->slot_a = -1, L->st.tracked++;
        pthread_mutex_unlock(&L->mu);
        if (b < 0) break;
        frame *f = &L->buf[b];
        /* the tracker's times must increase: a source repeating a time is nudged on */
        double t = f->time_s > last_t ? f->time_s : last_t + 1e-6;
        last_t = t;
        const int n = hamer_tracker_push(L->tracker, f->rgb, f->w, f->h, t, f->tracks, L->p.tracker.max_hands,
                                         &f->stats);
        if (n < 0) {
            fail_run(L, n, hamer_last_error());
            pthread_mutex_lock(&L->mu);
            give_back(L, b);
            pthread_mutex_unlock(&L->mu);
            break;
        }
        f->n = n;
        f->time_s = t;
        if (!L->state) {
            emit(L, f, 0);
            pthread_mutex_lock(&L->mu);
            give_back(L, b);
            pthread_mutex_unlock(&L->mu);
            continue;
        }
        /* a tracked-only record for this frame, before the regressor may
         * take it (and give it a regressed record too) */
        if (L->p.every_frame) emit(L, f, 0);
        pthread_mutex_lock(&L->mu);
        put(L, &L->slot_b, b, &L->st.dropped_regress);
        pthread_mutex_unlock(&L->mu);
    }
    pthread_mutex_lock(&L->mu);
    L->track_done = 1;
    pthread_cond_broadcast(&L->cv);
    pthread_mutex_unlock(&L->mu);
    return NULL;
}

/* ---- regressor: slot B, on the calling thread ---- */

static filter *filter_for(hamer_live *L, const hamer_track *t) {
    filter *best = &L->filters[0];
    for (int i = 0; i < L->nfilters; i++) {
        filter *q = &L->filters[i];
        if (q->used && q->id == t->track_id) {
            if (q->is_right != t->det.box.is_right) hm_smooth_reset(&q->sm); /* another side: start again */
            q->is_right = t->det.box.is_right;
            return q;
        }
        if (!q->used || (best->used && q->last < best->last)) best = q;
    }
    hm_smooth_reset(&best->sm);
    best->used = 1, best->id = t->track_id, best->is_right = t->det.box.is_right;
    return best;
}

static int regress(hamer_live *L, frame *f) {
    for (int i = 0; i < f->n; i++) f->dets[i] = f->tracks[i].det;
    int rc = hamer_predict_detections(L->state, f->rgb, f->w, f->h, f->dets, f->n, &L->p.predict, f->raw,
                                      &f->stats.predict);
    if (rc) return rc;
    const double t0 = hm_now();
    const hamer_tracker_params *tp = &L->p.tracker;
    const hm_smooth_opts o = {tp->min_cutoff, tp->beta, tp->d_cutoff, tp->betas_frames, tp->betas_min};
    for (int i = 0; i < f->n; i++) {
        f->smoothed[i] = f->raw[i];
        if (tp->smooth == HAMER_SMOOTH_NONE || !f->raw[i].ok) continue;
        filter *q = filter_for(L, &f->tracks[i]);
        q->last = L->st.regressed_frames;
        if (q->sm.started && !(f->time_s > q->sm.t_prev)) continue; /* not later than its last: as regressed */
        hm_smooth_hand(&q->sm, &o, f->time_s, &f->raw[i], &f->smoothed[i]);
    }
    f->stats.smooth_ms = 1e3 * (hm_now() - t0);
    return HAMER_OK;
}

static void regress_loop(hamer_live *L) {
    for (;;) {
        pthread_mutex_lock(&L->mu);
        while (L->slot_b < 0 && !L->track_done && !atomic_load(&L->stop)) pthread_cond_wait(&L->cv, &L->mu);
        const int b = atomic_load(&L->stop) ? -1 : L->slot_b;
        if (b >= 0) L->slot_b = -1;
        pthread_mutex_unlock(&L->mu);
        if (b < 0) break;
        frame *f = &L->buf[b];
        const int rc = regress(L, f);
        if (rc) {
            fail_run(L, rc, hamer_last_error());
        } else {
            pthread_mutex_lock(&L->mu);
            L->st.regressed_frames++;
            pthread_mutex_unlock(&L->mu);
            emit(L, f, 1);
        }
        pthread_mutex_lock(&L->mu);
        give_back(L, b);
        pthread_mutex_unlock(&L->mu);
        if (rc) break;
    }
}

/* ---- the run ---- */

/* The q-quantile (nearest rank) of histogram h: its bin's geometric
 * middle, never over the maximum seen (which the last, open bin gives). */
static double percentile(const hamer_live *L, int h, double q) {
    const long long want = (long long)ceil(q * (double)L->nhist[h]);
    long long seen = 0;
    for (int k = 0; k < NHIST && want > 0; k++)
        if ((seen += L->hist[h][k]) >= want)
            return k == NHIST - 1 ? L->maxhist[h]
                                  : fmin(k == 0 ? HIST_LO_MS / 2 : HIST_LO_MS * pow(HIST_RATIO, k - 0.5), L->maxhist[h]);
    return 0;
}

int hamer_live_run(hamer_live *L, const hamer_frame_source *src, hamer_live_fn fn, void *user) {
    if (!L || !src || !src->read) return hm_err(HM_E_ARG, "%s: live, source or its read is NULL", __func__);
    memset(&L->st, 0, sizeof L->st);
    memset(L->hist, 0, sizeof L->hist);
    memset(L->nhist, 0, sizeof L->nhist);
    memset(L->maxhist, 0, sizeof L->maxhist);
    for (int i = 0; i < L->nfilters; i++) L->filters[i].used = 0;
    hamer_tracker_reset(L->tracker);
    L->nfree = 0;
    for (int i = NBUF - 1; i >= 0; i--) L->free_list[L->nfree++] = i;
    L->slot_a = L->slot_b = -1;
    L->capture_done = L->track_done = 0;
    L->status = 0;
    L->msg[0] = 0;
    atomic_store(&L->stop, 0);
    L->fn = fn, L->user = user;
    L->t_start = hm_now();
    pthread_mutex_lock(&L->mu);
    L->src = src;
    pthread_mutex_unlock(&L->mu);
    pthread_t cap, trk;
    if (pthread_create(&cap, NULL, capture_main, L)) return hm_err(HM_E_NOMEM, "%s: cannot start a thread", __func__);
    if (pthread_create(&trk, NULL, track_main, L)) {
        hamer_live_stop(L);
        pthread_join(cap, NULL);
        return hm_err(HM_E_NOMEM, "%s: cannot start a thread", __func__);
    }
    if (L->state) regress_loop(L);
    pthread_join(trk, NULL);
    hamer_live_stop(L); /* the tracker is done: the capture too */
    pthread_join(cap, NULL);
    pthread_mutex_lock(&L->mu);
    L->src = NULL;
    /* frames a stop left in the slots were never taken: dropped */
    if (L->slot_a >= 0) L->st.dropped_track++, give_back(L, L->slot_a), L->slot_a = -1;
    if (L->slot_b >= 0) L->st.dropped_regress++, give_back(L, L->slot_b), L->slot_b = -1;
    pthread_mutex_unlock(&L->mu);
    L->st.seconds = hm_now() - L->t_start;
    L->st.latency_p50_ms = percentile(L, 0, 0.5);
    L->st.latency_p90_ms = percentile(L, 0, 0.9);
    L->st.latency_max_ms = L->maxhist[0];
    L->st.track_latency_p50_ms = percentile(L, 1, 0.5);
    L->st.track_latency_p90_ms = percentile(L, 1, 0.9);
    L->st.track_latency_max_ms = L->maxhist[1];
    return L->status ? hm_err(L->status, "%s", L->msg) : HAMER_OK;
}

int hamer_live_get_stats(const hamer_live *L, hamer_live_stats *out) {
    if (!L || !out) return hm_err(HM_E_ARG, "%s: live or stats is NULL", __func__);
    pthread_mutex_lock((pthread_mutex_t *)&L->mu);
    *out = L->st;
    if (L->src) { /* a run in progress: its figures so far */
        out->seconds = hm_now() - L->t_start;
        out->latency_p50_ms = percentile(L, 0, 0.5), out->latency_p90_ms = percentile(L, 0, 0.9);
        out->latency_max_ms = L->maxhist[0];
        out->track_latency_p50_ms = percentile(L, 1, 0.5), out->track_latency_p90_ms = percentile(L, 1, 0.9);
        out->track_latency_max_ms = L->maxhist[1];
    }
    pthread_mutex_unlock((pthread_mutex_t *)&L->mu);
    return HAMER_OK;
}

char *hamer_live_record_json(const hamer_live_record *r, int with_vertices) {
    if (!r || r->n < 0 || (r->n > 0 && !r->tracks) || (r->regressed && r->n > 0 && (!r->raw || !r->hands))) {
        hm_err(HM_E_ARG, "%s: bad record", __func__);
        return NULL;
    }
    struct timespec real;
    clock_gettime(CLOCK_REALTIME, &real);
    const double unix_now = (double)real.tv_sec + real.tv_nsec * 1e-9;
    /* integer milliseconds: a double's 9 significant digits would round Unix
     * seconds to tens of seconds */
    const long long capture_ms = (long long)llround(1e3 * (unix_now - (hm_now() - r->capture_s)));
    const int smoothing = r->regressed && r->hands != r->raw;
    json_t *o = json_object();
    json_object_set_new(o, "frame", json_integer(r->frame));
    json_object_set_new(o, "time_s", json_real(r->time_s));
    json_object_set_new(o, "capture_time_ms", json_integer(capture_ms));
    json_object_set_new(o, "latency_ms", json_real(r->latency_ms));
    json_object_set_new(o, "regressed", json_boolean(r->regressed));
    json_object_set_new(o, "hands", hm_track_hands_json(r->tracks, r->regressed ? r->raw : NULL, r->hands, r->n,
                                                        smoothing, with_vertices));
    json_t *tm = json_object();
    json_object_set_new(tm, "track", json_real(r->stats.track_ms));
    json_object_set_new(tm, "detect", json_real(r->stats.detect_ms));
    if (r->regressed) {
        json_object_set_new(tm, "crop", json_real(r->stats.predict.crop_ms));
        json_object_set_new(tm, "regress", json_real(r->stats.predict.regress_ms));
        json_object_set_new(tm, "finalise", json_real(r->stats.predict.finalise_ms));
        json_object_set_new(tm, "smooth", json_real(r->stats.smooth_ms));
    }
    json_object_set_new(o, "timings_ms", tm);
    json_object_set_new(o, "frames", json_pack("{s:I,s:I,s:I}", "captured", (json_int_t)r->captured, "tracked",
                                               (json_int_t)r->tracked, "regressed", (json_int_t)r->regressed_frames));
    json_object_set_new(o, "dropped", json_pack("{s:I,s:I,s:I}", "source", (json_int_t)r->dropped_source, "track",
                                                (json_int_t)r->dropped_track, "regress",
                                                (json_int_t)r->dropped_regress));
    char *s = json_dumps(o, JSON_REAL_PRECISION(9) | JSON_COMPACT | JSON_PRESERVE_ORDER);
    json_decref(o);
    if (!s) hm_err(HM_E_NOMEM, "out of memory writing JSON");
    return s;
}
