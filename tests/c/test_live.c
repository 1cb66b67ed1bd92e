/* test_live - hamer_live through the frame-source interface, with sources
 * written here (no FFmpeg, no camera): a flood (frames as fast as read is
 * called: the tracker is slower, so frames are dropped and counted and
 * the slots never hold more than one frame each), a source that blocks
 * until stopped (hamer_live_stop from another thread ends it through the
 * source's stop), one that fails, a callback that stops the run; the
 * counters' invariants; the record's JSON; argument checks. Tracking only
 * (no model): the regressor's path is tests/test_live.py's, with a model.
 * Needs the installed detector (scripts/get_detector.sh). */
#include <jansson.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "hamer.h"

#include "check.h"

/* ---- a flood: n frames of one picture, delivered at once ---- */

typedef struct {
    const uint8_t *rgb;
    int w, h, n, next, fail_at, fail_code, stops, delay_us;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int block, stopped;
} source;

static int flood_read(void *ctx, hamer_source_frame *f) {
    source *s = ctx;
    memset(f, 0, sizeof *f);
    pthread_mutex_lock(&s->mu);
    while (s->block && !s->stopped) pthread_cond_wait(&s->cv, &s->mu);
    const int stopped = s->stopped;
    pthread_mutex_unlock(&s->mu);
    if (stopped || s->next >= s->n) return 0;
    if (s->delay_us) usleep((useconds_t)s->delay_us);
    if (s->fail_at && s->next == s->fail_at) {
        /* a source reports through the library's error (any HAMER_E_*): an
         * image that fails to decode gives one with its message */
        uint8_t *rgb = NULL;
        int w, h;
        return hamer_image_decode("not an image", 12, &rgb, &w, &h);
    }
    *f = (hamer_source_frame){.rgb = s->rgb, .width = s->w, .height = s->h, .index = s->next,
                              .time_s = s->next / 30.0, .capture_s = hamer_clock()};
    s->next++;
    return 1;
}

static void flood_stop(void *ctx) {
    source *s = ctx;
    pthread_mutex_lock(&s->mu);
    s->stopped = 1;
    s->stops++;
    pthread_cond_broadcast(&s->cv);
    pthread_mutex_unlock(&s->mu);
}

static hamer_frame_source make(source *s) { return (hamer_frame_source){s, flood_read, flood_stop, NULL}; }

typedef struct {
    int records, bad_order, stop_after;
    long long last_frame, max_waiting;
    double max_latency;
    char *json;
} counter;

static int on_record(void *user, const hamer_live_record *r) {
    counter *c = user;
    c->records++;
    if (r->frame <= c->last_frame) c->bad_order++;
    c->last_frame = r->frame;
    if (r->waiting_max > c->max_waiting) c->max_waiting = r->waiting_max;
    if (r->latency_ms > c->max_latency) c->max_latency = r->latency_ms;
    if (!c->json) c->json = hamer_live_record_json(r, 0);
    return c->stop_after && c->records >= c->stop_after;
}

static void *stop_later(void *arg) {
    usleep(200000);
    hamer_live_stop(arg);
    return NULL;
}

int main(void) {
    hamer_detector *det = hamer_detector_load(NULL);
    if (!det) {
        fprintf(stderr, "test_live: the hand detector's models are needed (scripts/get_detector.sh): %s\n",
                hamer_last_error());
        return 1;
    }
    /* a plain picture (no hand needed: the flow is what is tested), 320 x 240 */
    const int W = 320, H = 240;
    uint8_t *rgb = malloc((size_t)W * H * 3);
    for (int i = 0; i < W * H * 3; i++) rgb[i] = (uint8_t)(i * 7 % 251);

    /* arguments */
    CHECK(hamer_live_new(NULL, NULL, NULL, 0) == NULL && hamer_last_error_code() == HAMER_E_ARG);
    hamer_live_params lp = hamer_live_default_params();
    lp.reserved[0] = 1;
    CHECK(hamer_live_new(det, NULL, &lp, 0) == NULL && strstr(hamer_last_error(), "hamer_live_params: reserved"));
    lp = hamer_live_default_params();
    lp.tracker.max_hands = 0;
    CHECK(hamer_live_new(det, NULL, &lp, 0) == NULL && strstr(hamer_last_error(), "max_hands"));
    lp = hamer_live_default_params();
    hamer_live *live = hamer_live_new(det, NULL, &lp, 1);
    CHECK(live != NULL);
    CHECK(hamer_live_run(live, NULL, NULL, NULL) == HAMER_E_ARG);

    int rc;
    /* a flood of 120 frames: every one read, the tracker's drops counted */
    source s = {.rgb = rgb, .w = W, .h = H, .n = 120};
    pthread_mutex_init(&s.mu, NULL);
    pthread_cond_init(&s.cv, NULL);
    hamer_frame_source src = make(&s);
    counter c = {.last_frame = -1};
    CHECK(hamer_live_run(live, &src, on_record, &c) == HAMER_OK);
    hamer_live_stats st;
    CHECK(hamer_live_get_stats(live, &st) == HAMER_OK);
    CHECKF(st.captured == 120 && st.captured == st.tracked + st.dropped_track, "captured %lld tracked %lld dropped %lld",
           st.captured, st.tracked, st.dropped_track);
    CHECKF(st.dropped_track > 0, "a source faster than the tracker: some frames dropped (%lld)", st.dropped_track);
    CHECK(st.regressed_frames == 0 && st.dropped_regress == 0 && st.dropped_source == 0);
    CHECKF(c.records == st.tracked && st.records == st.tracked, "records %d tracked %lld", c.records, st.tracked);
    CHECK(c.bad_order == 0 && c.max_waiting <= 2 && st.waiting_max <= 2);
    CHECK(st.latency_p50_ms <= st.latency_p90_ms && st.latency_p90_ms <= st.latency_max_ms + 0.25 &&
          st.latency_max_ms >= c.max_latency - 1e-9 && st.latency_max_ms > 0);
    json_t *j = c.json ? json_loads(c.json, 0, NULL) : NULL;
    CHECK(j && json_is_integer(json_object_get(j, "frame")) && json_is_integer(json_object_get(j, "capture_time_ms")) &&
          json_is_real(json_object_get(j, "latency_ms")) && json_is_false(json_object_get(j, "regressed")) &&
          json_is_array(json_object_get(j, "hands")) &&
          json_is_integer(json_object_get(json_object_get(j, "dropped"), "track")));
    json_decref(j);
    hamer_free(c.json);

    /* the callback stops the run (each run ends by stopping its source: reset) */
    s.next = 0, s.stopped = 0, s.delay_us = 30000; /* a camera's pace: the tracker keeps up */
    counter c2 = {.last_frame = -1, .stop_after = 3};
    rc = hamer_live_run(live, &src, on_record, &c2);
    CHECKF(rc == HAMER_OK && c2.records == 3, "rc %d records %d", rc, c2.records);
    /* stopped mid-run: a frame left in the slot counts as dropped */
    CHECK(hamer_live_get_stats(live, &st) == HAMER_OK && st.captured == st.tracked + st.dropped_track);

    /* a source that blocks: stopped from another thread through its stop */
    s.next = 0, s.block = 1, s.stopped = 0, s.stops = 0, s.delay_us = 0;
    pthread_t t;
    pthread_create(&t, NULL, stop_later, live);
    const double t0 = hamer_clock();
    CHECK(hamer_live_run(live, &src, on_record, &c2) == HAMER_OK);
    pthread_join(t, NULL);
    CHECKF(hamer_clock() - t0 < 5.0 && s.stops >= 1, "stop took %.2f s, %d stops", hamer_clock() - t0, s.stops);

    /* a source that fails: its error is the run's, with its message */
    s.next = 0, s.block = 0, s.stopped = 0, s.fail_at = 5;
    rc = hamer_live_run(live, &src, NULL, NULL);
    CHECKF(rc < 0 && clean_error(rc) && strstr(hamer_last_error(), "not an image"), "rc %d: %s", rc,
           hamer_last_error());

    /* a frame without pixels */
    source bad = {.rgb = NULL, .w = W, .h = H, .n = 2};
    pthread_mutex_init(&bad.mu, NULL);
    pthread_cond_init(&bad.cv, NULL);
    hamer_frame_source bsrc = make(&bad);
    CHECK(hamer_live_run(live, &bsrc, NULL, NULL) == HAMER_E_ARG && strstr(hamer_last_error(), "without pixels"));

    /* the FFmpeg source's checks, before anything is opened */
    hamer_frame_source cs;
    hamer_capture_params cp = hamer_capture_default_params();
    CHECK(cp.pace == HAMER_PACE_AUTO && cp.threads == 1 && !cp.format && !cp.options);
    cp.reserved[HAMER_PARAMS_RESERVED - 1] = 1;
    CHECK(hamer_capture_open("x.mp4", &cp, &cs) == HAMER_E_ARG && strstr(hamer_last_error(), "hamer_capture_params") &&
          !cs.read);
    cp = hamer_capture_default_params();
    cp.pace = 7;
    CHECK(hamer_capture_open("x.mp4", &cp, &cs) == HAMER_E_ARG && strstr(hamer_last_error(), "pace 7"));
    cp = hamer_capture_default_params();
    cp.threads = 65;
    CHECK(hamer_capture_open("x.mp4", &cp, &cs) == HAMER_E_ARG && strstr(hamer_last_error(), "threads 65"));
    cp = hamer_capture_default_params();
    cp.format = "no-such-format";
    CHECK(hamer_capture_open("x.mp4", &cp, &cs) == HAMER_E_UNSUPPORTED && strstr(hamer_last_error(), "no-such-format"));
    cp = hamer_capture_default_params();
    cp.options = "novalue";
    CHECK(hamer_capture_open("x.mp4", &cp, &cs) == HAMER_E_ARG && strstr(hamer_last_error(), "key=value"));
    CHECK(hamer_capture_open("/nonexistent/x.mp4", NULL, &cs) == HAMER_E_IO &&
          strstr(hamer_last_error(), "/nonexistent/x.mp4: cannot open") && !cs.read);
    CHECK(hamer_capture_open(NULL, NULL, &cs) == HAMER_E_ARG && hamer_capture_open("x", NULL, NULL) == HAMER_E_ARG);

    /* a record's JSON: bad records refused */
    hamer_live_record r;
    memset(&r, 0, sizeof r);
    r.n = 1;
    CHECK(hamer_live_record_json(&r, 0) == NULL && hamer_last_error_code() == HAMER_E_ARG);
    CHECK(hamer_live_record_json(NULL, 0) == NULL);

    hamer_free(c2.json);
    hamer_live_free(live);
    hamer_live_free(NULL);
    hamer_live_stop(NULL);
    hamer_detector_free(det);
    free(rgb);
    printf("%d passed, %d failed\n", npass, nfail);
    return nfail ? 1 : 0;
}
