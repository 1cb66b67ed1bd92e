/* test_params_abi.c - the growth rule of include/hamer.h's parameter
 * structs: each *_params ends with HAMER_PARAMS_RESERVED reserved bytes
 * (sizes as docs/library.md lists them), its default function zeroes them,
 * and every function taking it accepts the defaults and refuses a non-zero
 * reserved byte with HAMER_E_ARG, a one-line message naming the struct,
 * and nothing else done: no object made, no file touched or written, out
 * arguments and the tracker's tracks as they were. The result structs
 * (hamer_hand, hamer_timings) end with their own reserved space, which the
 * library writes as zero.
 *
 * The model is the small checkpoint of the fuzz corpus; the detector parts
 * need the installed detector models (scripts/get_detector.sh) and are
 * reported as not run elsewhere. */
#define _POSIX_C_SOURCE 200809L
#include <stdalign.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "check.h"
#include "hamer.h"

/* The two reserved bytes each refusal is tried with: the first and the last. */
/* the first and the last reserved byte of a struct (k = 0, 1) */
#define PROBE(res, k) ((k) ? sizeof(res) - 1 : 0)

/* rc (and the thread's last error) is the refusal of type's reserved bytes. */
static int refused(int rc, const char *type) {
    char want[160];
    size_t n = strlen(type) - strlen("_params");
    snprintf(want, sizeof want, "%s: reserved bytes must be zero (use %.*s_default_params; ", type, (int)n, type);
    return rc == HAMER_E_ARG && hamer_last_error_code() == HAMER_E_ARG && clean_error(rc) &&
           !strncmp(hamer_last_error(), want, strlen(want));
}

static int all_zero(const uint8_t *b, size_t n) {
    for (size_t i = 0; i < n; i++)
        if (b[i]) return 0;
    return 1;
}

/* reserved is the last member, HAMER_PARAMS_RESERVED bytes less those later
 * fields took from its front (`taken`): only tail padding after it. */
#define RESERVED_TAIL(T, bytes)                                                                            \
    (sizeof(((T *)0)->reserved) == (bytes) &&                                                              \
     offsetof(T, reserved) + sizeof(((T *)0)->reserved) <= sizeof(T) &&                                    \
     sizeof(T) - (offsetof(T, reserved) + sizeof(((T *)0)->reserved)) < alignof(T))
#define RESERVED_LAST_N(T, taken) RESERVED_TAIL(T, HAMER_PARAMS_RESERVED - (taken))
#define RESERVED_LAST(T) RESERVED_LAST_N(T, 0)

/* Sizes and reserved offsets on x86-64 Linux (the table in docs/library.md),
 * the reserved space last, and each default function's reserved bytes zero
 * (the destination filled with another byte first). */
static void layouts_and_defaults(void) {
    /* hamer_model_params grew device (7 bytes of alignment and a pointer) */
    CHECK(RESERVED_LAST_N(hamer_model_params, 15));
    /* hamer_predict_params grew focal_px and fov_deg from its reserved space */
    CHECK(RESERVED_LAST_N(hamer_predict_params, 8) && RESERVED_LAST(hamer_anim_params));
    CHECK(RESERVED_LAST(hamer_state_params));
    /* hamer_detect_params grew body_boxes and proposals from its reserved
     * space (8 bytes with the alignment of the enum), hamer_detector_params
     * and hamer_tracker_params proposals */
    CHECK(RESERVED_LAST_N(hamer_detector_params, 4) && RESERVED_LAST_N(hamer_detect_params, 8));
    CHECK(RESERVED_LAST(hamer_video_params) && RESERVED_LAST_N(hamer_tracker_params, 4));
    /* hamer_folder_params grew render_draw and bvh from its reserved space */
    CHECK(RESERVED_LAST(hamer_job_params) && RESERVED_LAST_N(hamer_folder_params, 5));
    CHECK(RESERVED_LAST(hamer_render_params) && RESERVED_LAST(hamer_capture_params) &&
          RESERVED_LAST(hamer_live_params));
#if defined(__x86_64__) && defined(__LP64__)
    /* the size and every older offset as before device took bytes 17..31 */
    CHECK(sizeof(hamer_model_params) == 88 && offsetof(hamer_model_params, no_cache) == 16 &&
          offsetof(hamer_model_params, device) == 24 && offsetof(hamer_model_params, reserved) == 32);
    CHECK(sizeof(hamer_state_params) == 80 && offsetof(hamer_state_params, reserved) == 16);
    /* the size and every older offset as before focal_px and fov_deg took bytes 12..19 */
    CHECK(sizeof(hamer_predict_params) == 80 && offsetof(hamer_predict_params, focal_px) == 12 &&
          offsetof(hamer_predict_params, fov_deg) == 16 && offsetof(hamer_predict_params, reserved) == 20);
    CHECK(sizeof(hamer_anim_params) == 80 && offsetof(hamer_anim_params, reserved) == 12);
    CHECK(sizeof(hamer_detector_params) == 80 && offsetof(hamer_detector_params, proposals) == 16 &&
          offsetof(hamer_detector_params, reserved) == 20);
    /* the size and every older offset as before body_boxes took byte 20
     * and proposals bytes 24..27 (21..23: padding) */
    CHECK(sizeof(hamer_detect_params) == 84 && offsetof(hamer_detect_params, body_boxes) == 20 &&
          offsetof(hamer_detect_params, proposals) == 24 && offsetof(hamer_detect_params, reserved) == 28);
    CHECK(sizeof(hamer_video_params) == 96 && offsetof(hamer_video_params, reserved) == 28);
    CHECK(sizeof(hamer_tracker_params) == 136 && offsetof(hamer_tracker_params, proposals) == 68 &&
          offsetof(hamer_tracker_params, reserved) == 72);
    CHECK(sizeof(hamer_job_params) == 232 && offsetof(hamer_job_params, reserved) == 164);
    CHECK(sizeof(hamer_folder_params) == 128 && offsetof(hamer_folder_params, render_draw) == 64 &&
          offsetof(hamer_folder_params, bvh) == 68 && offsetof(hamer_folder_params, reserved) == 69);
    CHECK(sizeof(hamer_render_params) == 68 && offsetof(hamer_render_params, reserved) == 4);
#endif
    /* bool fields are one byte; enums an int (what the bindings assume) */
    CHECK(sizeof(((hamer_detect_params *)0)->tiles) == 1 && sizeof(((hamer_model_params *)0)->precision) == sizeof(int));
#define DEFAULT_ZERO(T, fn)                                                                                \
    do {                                                                                                   \
        T p_;                                                                                              \
        memset(&p_, 0xa5, sizeof p_);                                                                      \
        p_ = fn();                                                                                         \
        CHECKF(all_zero(p_.reserved, sizeof p_.reserved), "%s: reserved bytes not zero", #fn);            \
    } while (0)
    DEFAULT_ZERO(hamer_model_params, hamer_model_default_params);
    DEFAULT_ZERO(hamer_state_params, hamer_state_default_params);
    DEFAULT_ZERO(hamer_predict_params, hamer_predict_default_params);
    DEFAULT_ZERO(hamer_detector_params, hamer_detector_default_params);
    DEFAULT_ZERO(hamer_detect_params, hamer_detect_default_params);
    DEFAULT_ZERO(hamer_video_params, hamer_video_default_params);
    DEFAULT_ZERO(hamer_tracker_params, hamer_tracker_default_params);
    DEFAULT_ZERO(hamer_job_params, hamer_job_default_params);
    DEFAULT_ZERO(hamer_folder_params, hamer_folder_default_params);
    DEFAULT_ZERO(hamer_render_params, hamer_render_default_params);
    DEFAULT_ZERO(hamer_anim_params, hamer_anim_default_params);
    DEFAULT_ZERO(hamer_capture_params, hamer_capture_default_params);
    DEFAULT_ZERO(hamer_live_params, hamer_live_default_params);
    hamer_job_params jp = hamer_job_default_params();
    CHECK(all_zero(jp.predict.reserved, sizeof jp.predict.reserved) && all_zero(jp.detect.reserved, sizeof jp.detect.reserved));
    hamer_predict_params pp = hamer_predict_default_params();
    CHECK(pp.focal_px == 0 && pp.fov_deg == 0);
}

/* hamer_model_load: the defaults load; a reserved byte is refused before
 * the path is looked at (a missing file would be HAMER_E_IO). */
static hamer_model *model_params(const char *path) {
    hamer_model_params mp = hamer_model_default_params();
    hamer_model *m = hamer_model_load(path, &mp);
    CHECK(m != NULL);
    for (int k = 0; k < 2; k++) {
        hamer_model_params bad = mp;
        bad.reserved[PROBE(bad.reserved, k)] = 1;
        CHECK(hamer_model_load(path, &bad) == NULL && refused(hamer_last_error_code(), "hamer_model_params"));
        CHECK(hamer_model_load("/nonexistent/hamer.ckpt", &bad) == NULL &&
              refused(hamer_last_error_code(), "hamer_model_params"));
    }
    CHECK(hamer_model_load("/nonexistent/hamer.ckpt", &mp) == NULL && hamer_last_error_code() == HAMER_E_IO);
    return m;
}

/* hamer_state_new_with_params: the defaults make a state; a reserved byte
 * is refused, with or without a model. */
static void state_params(const hamer_model *m) {
    hamer_state_params sp = hamer_state_default_params();
    hamer_state *st = hamer_state_new_with_params(m, &sp);
    CHECK(st != NULL);
    hamer_state_free(st);
    for (int k = 0; k < 2; k++) {
        hamer_state_params bad = sp;
        bad.reserved[PROBE(bad.reserved, k)] = 1;
        CHECK(hamer_state_new_with_params(m, &bad) == NULL && refused(hamer_last_error_code(), "hamer_state_params"));
        CHECK(hamer_state_new_with_params(NULL, &bad) == NULL && refused(hamer_last_error_code(), "hamer_state_params"));
    }
}

/* hamer_predict, hamer_predict_detections: the defaults regress the box;
 * a reserved byte is refused with the hands and timings untouched. */
static void predict_params(hamer_state *st, const uint8_t *rgb, int w, int h) {
    static hamer_hand hands[1], before[1];
    hamer_timings tm, tm_before;
    hamer_box box = {{20, 30, 120, 150}, 1};
    hamer_detection det;
    memset(&det, 0, sizeof det);
    det.box = box, det.person = -1;
    hamer_predict_params pp = hamer_predict_default_params();
    CHECK(hamer_predict(st, rgb, w, h, &box, 1, &pp, hands, &tm) == HAMER_OK && hands[0].ok);
    CHECK(hamer_predict_detections(st, rgb, w, h, &det, 1, &pp, hands, &tm) == HAMER_OK && hands[0].ok);
    for (int k = 0; k < 2; k++) {
        hamer_predict_params bad = pp;
        bad.reserved[PROBE(bad.reserved, k)] = 0x80;
        memset(hands, 0x3c, sizeof hands), memset(&tm, 0x3c, sizeof tm);
        memcpy(before, hands, sizeof hands), memcpy(&tm_before, &tm, sizeof tm);
        CHECK(refused(hamer_predict(st, rgb, w, h, &box, 1, &bad, hands, &tm), "hamer_predict_params"));
        CHECK(!memcmp(hands, before, sizeof hands) && !memcmp(&tm, &tm_before, sizeof tm));
        CHECK(refused(hamer_predict_detections(st, rgb, w, h, &det, 1, &bad, hands, &tm), "hamer_predict_params"));
        CHECK(!memcmp(hands, before, sizeof hands) && !memcmp(&tm, &tm_before, sizeof tm));
    }
}

/* hamer_video_check_params / hamer_video_open: every reserved byte; the
 * refusal comes before the file is opened (missing: HAMER_E_IO). */
static void video_params(void) {
    hamer_video_params vp = hamer_video_default_params();
    CHECK(hamer_video_check_params(&vp) == HAMER_OK);
    CHECK(hamer_video_open("/nonexistent/v.mp4", &vp) == NULL && hamer_last_error_code() == HAMER_E_IO);
    for (int i = 0; i < HAMER_PARAMS_RESERVED; i++) {
        hamer_video_params bad = vp;
        bad.reserved[i] = (uint8_t)(1u << (i % 8));
        CHECKF(refused(hamer_video_check_params(&bad), "hamer_video_params"), "byte %d: %s", i, hamer_last_error());
        CHECKF(hamer_video_open("/nonexistent/v.mp4", &bad) == NULL &&
                   refused(hamer_last_error_code(), "hamer_video_params"),
               "open, byte %d: %s", i, hamer_last_error());
    }
}

/* hamer_job_new, hamer_job_run: the job's own reserved bytes and those of
 * the predict and detect params it holds; a refused run decodes nothing
 * (its missing file would be HAMER_E_IO) and names no stage but PREDICT. */
static void job_params(hamer_state *st, const uint8_t *rgb, int w, int h) {
    hamer_job_params jp = hamer_job_default_params();
    hamer_job *job = hamer_job_new(st, NULL, &jp);
    CHECK(job != NULL);
    hamer_box box = {{20, 30, 120, 150}, 0};
    hamer_job_input in = {.rgb = rgb, .width = w, .height = h, .boxes = &box, .n_boxes = 1,
                          .source = HAMER_BOXES_GIVEN, .params = &jp};
    hamer_job_result r;
    CHECK(job && hamer_job_run(job, &in) == HAMER_OK && hamer_job_get_result(job, &r) == HAMER_OK &&
          r.n_hands == 1 && r.hands[0].ok);
    const char *types[3] = {"hamer_job_params", "hamer_predict_params", "hamer_detect_params"};
    for (int which = 0; which < 3; which++)
        for (int k = 0; k < 2; k++) {
            hamer_job_params bad = jp;
            uint8_t *res = which == 0 ? bad.reserved : which == 1 ? bad.predict.reserved : bad.detect.reserved;
            const size_t len = which == 0 ? sizeof bad.reserved : which == 1 ? sizeof bad.predict.reserved
                                                                             : sizeof bad.detect.reserved;
            res[k ? len - 1 : 0] = 2;
            CHECK(hamer_job_new(st, NULL, &bad) == NULL && refused(hamer_last_error_code(), types[which]));
            hamer_job_input bin = {.path = "/nonexistent/photo.jpg", .source = HAMER_BOXES_GIVEN, .params = &bad};
            CHECK(job && refused(hamer_job_run(job, &bin), types[which]));
            CHECK(job && hamer_job_get_result(job, &r) == HAMER_OK && r.failed_stage == HAMER_JOB_STAGE_PREDICT &&
                  r.n_hands == 0);
            char *json = job ? hamer_job_result_json(job, 0) : NULL;
            CHECK(json == NULL);  /* no result stands after a refused run */
            hamer_free(json);
        }
    hamer_job_free(job);
}

/* hamer_anim_new: the defaults make a recorder; a reserved byte is refused
 * before the model is looked at (NULL would be HAMER_E_ARG too, so a model
 * without MANO, HAMER_E_NOMANO, is not the check here: the message is). */
static void anim_params(const hamer_model *m) {
    hamer_anim_params ap = hamer_anim_default_params();
    hamer_anim *a = hamer_anim_new(m, &ap);
    CHECK(a != NULL);
    hamer_anim_free(a);
    for (int k = 0; k < 2; k++) {
        hamer_anim_params bad = ap;
        bad.reserved[PROBE(bad.reserved, k)] = 4;
        CHECK(hamer_anim_new(m, &bad) == NULL && refused(hamer_last_error_code(), "hamer_anim_params"));
        CHECK(hamer_anim_new(NULL, &bad) == NULL && refused(hamer_last_error_code(), "hamer_anim_params"));
    }
}

/* hamer_folder_open: the defaults open an empty folder; a reserved byte is
 * refused with *out NULL, the missing input folder not looked at (that
 * would be HAMER_E_IO) and the output folder not created. */
static void folder_params(void) {
    char in[] = "/tmp/hamer_params_abi_XXXXXX", out[sizeof in + 8];
    CHECK(mkdtemp(in) != NULL);
    snprintf(out, sizeof out, "%s/out", in);
    hamer_folder_params fp = hamer_folder_default_params();
    fp.input_dir = in;
    hamer_folder *f = NULL;
    CHECK(hamer_folder_open(&fp, &f) == HAMER_OK && f && hamer_folder_get_count(f) == 0);
    hamer_folder_close(f);
    for (int k = 0; k < 2; k++) {
        hamer_folder_params bad = fp;
        bad.reserved[PROBE(bad.reserved, k)] = 0xff;
        bad.out_dir = out;
        static char sentinel;
        f = (hamer_folder *)(void *)&sentinel;  /* not NULL: the refusal must clear it */
        CHECK(refused(hamer_folder_open(&bad, &f), "hamer_folder_params") && f == NULL);
        struct stat st;
        CHECK(stat(out, &st) != 0);
        bad.input_dir = "/nonexistent/photos";
        CHECK(refused(hamer_folder_open(&bad, &f), "hamer_folder_params") && f == NULL);
    }
    fp.input_dir = "/nonexistent/photos";
    CHECK(hamer_folder_open(&fp, &f) == HAMER_E_IO && f == NULL);
    rmdir(in);
}

/* The detector's params, the detection's, the tracker's, and the predict
 * params of hamer_tracker_frame (refused before the frame is pushed: the
 * same time is then accepted, which a pushed frame would not allow). */
static void detector_params(hamer_state *st, const uint8_t *rgb, int w, int h) {
    hamer_detector_params dp = hamer_detector_default_params();
    for (int k = 0; k < 2; k++) {
        hamer_detector_params bad = dp;
        bad.reserved[PROBE(bad.reserved, k)] = 1;
        CHECK(hamer_detector_load(&bad) == NULL && refused(hamer_last_error_code(), "hamer_detector_params"));
        bad.dir = "/nonexistent/detector";  /* not searched (HAMER_E_IO) */
        CHECK(hamer_detector_load(&bad) == NULL && refused(hamer_last_error_code(), "hamer_detector_params"));
    }
    hamer_detector *det = hamer_detector_load(&dp);
    if (!det) {
        printf("detector not installed: detect and tracker params not run (%s)\n", hamer_last_error());
        return;
    }
    hamer_detect_state *ds = hamer_detect_state_new(det, 1);
    CHECK(ds != NULL);
    hamer_detect_params qp = hamer_detect_default_params();
    hamer_detection dets[4], before[4];
    double ms = -1;
    CHECK(ds && hamer_detect(ds, rgb, w, h, &qp, dets, 4, &ms) >= 0 && ms >= 0);
    char *json = hamer_detections_json(w, h, dets, 0, det, &qp, ms);
    CHECK(json != NULL);
    hamer_free(json);
    hamer_tracker_params tp = hamer_tracker_default_params();
    hamer_tracker *t = hamer_tracker_new(det, &tp, 1);
    CHECK(t != NULL);
    for (int k = 0; k < 2; k++) {
        hamer_detect_params bad = qp;
        bad.reserved[PROBE(bad.reserved, k)] = 1;
        memset(dets, 0x77, sizeof dets), memcpy(before, dets, sizeof dets), ms = -7;
        CHECK(ds && refused(hamer_detect(ds, rgb, w, h, &bad, dets, 4, &ms), "hamer_detect_params"));
        CHECK(!memcmp(dets, before, sizeof dets) && ms == -7);
        CHECK(hamer_detections_json(w, h, dets, 0, det, &bad, 1.0) == NULL &&
              refused(hamer_last_error_code(), "hamer_detect_params"));
        hamer_tracker_params tbad = tp;
        tbad.reserved[PROBE(tbad.reserved, k)] = 1;
        CHECK(hamer_tracker_new(det, &tbad, 1) == NULL && refused(hamer_last_error_code(), "hamer_tracker_params"));
    }
    hamer_predict_params pp = hamer_predict_default_params();
    CHECK(t && hamer_tracker_frame(t, st, rgb, w, h, 0.0, &pp) >= 0);
    for (int k = 0; k < 2; k++) {
        hamer_predict_params bad = pp;
        bad.reserved[PROBE(bad.reserved, k)] = 1;
        CHECK(t && refused(hamer_tracker_frame(t, st, rgb, w, h, 0.5, &bad), "hamer_predict_params"));
    }
    CHECK(t && hamer_tracker_frame(t, st, rgb, w, h, 0.5, &pp) >= 0);
    hamer_tracker_free(t);
    hamer_detect_state_free(ds);
    hamer_detector_free(det);
}

/* The result structs (hamer_hand, hamer_timings): reserved space last, its
 * size and the offsets of the fields before it fixed (x86-64), and the
 * library writing it as zero: hamer_predict into hands and timings filled
 * with another byte first, and the job's result. */
static void results(hamer_state *st, const uint8_t *rgb, int w, int h) {
    /* hamer_hand's camera and rotation fields took 1100 bytes from its front */
    CHECK(RESERVED_TAIL(hamer_hand, HAMER_HAND_RESERVED - 1100) && RESERVED_TAIL(hamer_timings, HAMER_TIMINGS_RESERVED));
#if defined(__x86_64__) && defined(__LP64__)
    /* the fields before the rule at their offsets; its space where the tail padding began, the
     * fields taken from it in order from its front */
    CHECK(offsetof(hamer_hand, vertices) == 1344 && offsetof(hamer_hand, detection) == 10704);
    CHECK(sizeof(hamer_hand) == 15088 && offsetof(hamer_hand, focal_source) == 10988 &&
          offsetof(hamer_hand, reserved) == 10988 + 1100 &&
          offsetof(hamer_hand, smplx_hand_pose) + sizeof(((hamer_hand *)0)->smplx_hand_pose) == 10988 + 1100);
    CHECK(sizeof(hamer_timings) == 40 + HAMER_TIMINGS_RESERVED && offsetof(hamer_timings, reserved) == 40);
    CHECK(sizeof(hamer_model_info) == 144 && offsetof(hamer_model_info, reserved) == 80);
    CHECK(sizeof(hamer_backend_info) == 96 && offsetof(hamer_backend_info, reserved) == 32);
#endif
    static hamer_hand hands[2];
    hamer_timings tm;
    hamer_box boxes[2] = {{{20, 30, 120, 150}, 1}, {{-50, -50, -10, -10}, 0}};  /* the second fails */
    memset(hands, 0x5a, sizeof hands), memset(&tm, 0x5a, sizeof tm);
    hamer_predict_params pp = hamer_predict_default_params();
    CHECK(hamer_predict(st, rgb, w, h, boxes, 2, &pp, hands, &tm) == HAMER_OK && hands[0].ok && !hands[1].ok);
    for (int i = 0; i < 2; i++) CHECKF(all_zero(hands[i].reserved, sizeof hands[i].reserved), "hand %d", i);
    CHECK(all_zero(tm.reserved, sizeof tm.reserved));
    hamer_job *job = hamer_job_new(st, NULL, NULL);
    hamer_job_input in = {.rgb = rgb, .width = w, .height = h, .boxes = boxes, .n_boxes = 2,
                          .source = HAMER_BOXES_GIVEN};
    hamer_job_result r;
    memset(&r, 0x5a, sizeof r);
    CHECK(job && hamer_job_run(job, &in) == HAMER_OK && hamer_job_get_result(job, &r) == HAMER_OK && r.n_hands == 2);
    CHECK(job && all_zero(r.timings.reserved, sizeof r.timings.reserved) &&
          all_zero(r.hands[0].reserved, sizeof r.hands[0].reserved));
    hamer_job_free(job);
}

int main(void) {
    layouts_and_defaults();
    video_params();
    folder_params();
    hamer_model *m = model_params(check_tiny_model());
    if (m) state_params(m);
    hamer_state *st = m ? hamer_state_new(m, 1, 1) : NULL;
    CHECK(st != NULL);
    const int w = 160, h = 200;
    uint8_t *rgb = malloc((size_t)w * h * 3);
    for (int i = 0; i < w * h * 3; i++) rgb[i] = (uint8_t)(i * 37 + (i / 480) * 11);
    if (st) {
        predict_params(st, rgb, w, h);
        job_params(st, rgb, w, h);
        results(st, rgb, w, h);
        anim_params(m);
        detector_params(st, rgb, w, h);
    }
    free(rgb);
    hamer_state_free(st);
    hamer_model_free(m);
    return check_summary();
}
