/* test_job.c - the photo job (hamer_job_*): the same hands, RESULT.json,
 * pictures and meshes as the separate calls it replaces (decode, detect,
 * predict, hamer_result_json_source, hamer_render_png, hamer_hand_obj),
 * from file, bytes or RGB; every error path (NULL arguments, bad bytes,
 * a missing file, an absurd box, too many boxes, no detection state, bad
 * parameters, cancellation) a negative code with a one-line message, the
 * failed stage named and no stale result left.
 *
 * The model is the small checkpoint of the fuzz corpus (2 blocks with
 * MANO buffers); the detector part runs where the detector models are
 * installed (scripts/get_detector.sh) and is skipped elsewhere. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "check.h"
#include "hamer.h"

static const char *model_path;

/* A w x h RGB picture with some structure (gradients and a bright square). */
static uint8_t *make_image(int w, int h) {
    uint8_t *p = malloc((size_t)w * h * 3);
    for (int y = 0; y < h; y++)
        for (int x = 0; x < w; x++) {
            uint8_t *q = p + 3 * ((size_t)y * w + x);
            int in = x > w / 3 && x < w / 2 && y > h / 3 && y < 2 * h / 3;
            q[0] = (uint8_t)(in ? 230 : x * 255 / w);
            q[1] = (uint8_t)(in ? 190 : y * 255 / h);
            q[2] = (uint8_t)((x * 7 + y * 3) & 255);
        }
    return p;
}

static int cancel_always(void *user) {
    (void)user;
    return 1;
}

static void null_args(void) {
    hamer_job_input in;
    memset(&in, 0, sizeof in);
    hamer_job_result r;
    uint8_t *png = NULL;
    char *obj = NULL;
    size_t len = 0;
    CHECK(hamer_job_new(NULL, NULL, NULL) == NULL && hamer_last_error_code() == HAMER_E_ARG && clean_error(HAMER_E_ARG));
    CHECK(hamer_job_run(NULL, &in) == HAMER_E_ARG && clean_error(HAMER_E_ARG));
    CHECK(hamer_job_get_result(NULL, &r) == HAMER_E_ARG);
    CHECK(hamer_job_result_json(NULL, 0) == NULL && hamer_last_error_code() == HAMER_E_ARG);
    CHECK(hamer_job_render_png(NULL, 0, &png, &len) == HAMER_E_ARG && png == NULL);
    CHECK(hamer_job_hand_obj(NULL, 0, &obj, &len) == HAMER_E_ARG && obj == NULL);
    hamer_job_free(NULL); /* a no-op */
    hamer_job_params p = hamer_job_default_params();
    hamer_predict_params pp = hamer_predict_default_params();
    hamer_detect_params dp = hamer_detect_default_params();
    CHECK(p.predict.rescale == pp.rescale && p.predict.crop_mode == pp.crop_mode);
    CHECK(!memcmp(&p.detect, &dp, sizeof dp));
}

/* The job's hands equal hamer_predict's, its documents the separate calls'. */
static void same_as_separate_calls(hamer_model *m, hamer_state *st) {
    const int W = 320, H = 240;
    uint8_t *rgb = make_image(W, H), *png = NULL;
    size_t png_len = 0;
    CHECK(hamer_render_detections_png(rgb, W, H, NULL, 0, &png, &png_len) == HAMER_OK && png_len > 0);
    /* The PNG decodes to exactly the picture (lossless). */
    uint8_t *dec = NULL;
    int dw = 0, dh = 0;
    CHECK(hamer_image_decode(png, png_len, &dec, &dw, &dh) == HAMER_OK && dw == W && dh == H &&
          !memcmp(dec, rgb, (size_t)W * H * 3));
    hamer_free(dec);

    hamer_box boxes[3] = {{{100, 60, 180, 160}, 1}, {{150, 80, 260, 200}, 0}, {{1e9f, 1e9f, 2e9f, 2e9f}, 1}};
    hamer_hand want[3];
    hamer_timings wtm;
    memset(&wtm, 0, sizeof wtm);
    CHECK(hamer_predict(st, rgb, W, H, boxes, 3, NULL, want, &wtm) == HAMER_OK);
    CHECK(want[0].ok && want[1].ok && !want[2].ok);

    hamer_job *job = hamer_job_new(st, NULL, NULL);
    CHECK(job != NULL);
    if (!job) goto out;
    hamer_job_result r;
    /* No run yet: no documents. */
    CHECK(hamer_job_result_json(job, 0) == NULL && hamer_last_error_code() == HAMER_E_ARG && clean_error(HAMER_E_ARG));

    /* Bytes in. */
    hamer_job_input in;
    memset(&in, 0, sizeof in);
    in.data = png, in.len = png_len, in.boxes = boxes, in.n_boxes = 3, in.source = HAMER_BOXES_GIVEN;
    CHECK(hamer_job_run(job, &in) == HAMER_OK);
    CHECK(hamer_job_get_result(job, &r) == HAMER_OK);
    CHECK(r.width == W && r.height == H && r.n_hands == 3 && r.n_failed == 1 && r.source == HAMER_BOXES_GIVEN);
    CHECK(r.detections == NULL && r.failed_stage == HAMER_JOB_STAGE_NONE && r.rgb && !memcmp(r.rgb, rgb, (size_t)W * H * 3));
    CHECK(r.timings.decode_ms > 0 && r.timings.detect_ms == 0 && r.timings.regress_ms > 0);
    CHECK(!memcmp(r.hands, want, sizeof want));
    CHECK(!r.hands[2].ok && strstr(r.hands[2].error, "hand 2") != NULL);
    const hamer_hand *first_hands = r.hands;

    /* RESULT.json: the existing writer with the run's timings and source. */
    char *json = hamer_job_result_json(job, 1);
    char *ref = hamer_result_json_source(W, H, want, 3, 1, &r.timings, HAMER_BOXES_GIVEN);
    CHECK(json && ref && !strcmp(json, ref));
    CHECK(json && strstr(json, "\"boxes\":\"given\"") && strstr(json, "\"decode\":") && !strstr(json, "\"detect\":"));
    hamer_free(json);
    hamer_free(ref);

    /* Overlay, side view, OBJ: the same bytes as the separate calls. */
    for (int k = 0; k < 2; k++) {
        uint8_t *a = NULL, *b = NULL;
        size_t la = 0, lb = 0;
        CHECK(hamer_job_render_png(job, k, &a, &la) == HAMER_OK);
        CHECK(hamer_render_png(m, rgb, W, H, want, 3, k, &b, &lb) == HAMER_OK);
        CHECK(a && b && la == lb && !memcmp(a, b, la));
        hamer_free(a);
        hamer_free(b);
    }
    for (int i = 0; i < 2; i++) {
        char *a = NULL, *b = NULL;
        size_t la = 0, lb = 0;
        CHECK(hamer_job_hand_obj(job, i, &a, &la) == HAMER_OK);
        CHECK(hamer_hand_obj(m, &want[i], &b, &lb) == HAMER_OK);
        CHECK(a && b && la == lb && !memcmp(a, b, la));
        hamer_free(a);
        hamer_free(b);
    }
    char *obj = NULL;
    size_t olen = 0;
    /* All hands in one OBJ: the job's equals the model's call; the failed
     * hand 2 is left out; hand 0's part is its own OBJ with the "o" line. */
    {
        char *a = NULL, *b = NULL, *h0 = NULL;
        size_t la = 0, lb = 0, l0 = 0;
        CHECK(hamer_job_obj(job, &a, &la) == HAMER_OK);
        CHECK(hamer_hands_obj(m, want, 3, &b, &lb) == HAMER_OK);
        CHECK(a && b && la == lb && !memcmp(a, b, la));
        CHECK(hamer_hand_obj(m, &want[0], &h0, &l0) == HAMER_OK);
        const char *nl = h0 ? memchr(h0, '\n', l0) : NULL;
        size_t head = nl ? (size_t)(nl - h0) + 1 : 0;
        const char *o = "o hand_0_right\n";
        CHECK(a && nl && la > l0 && !memcmp(a, h0, head) && !memcmp(a + head, o, strlen(o)));
        int objects = 0;
        for (size_t i = 0; a && i + 8 < la; i++) objects += !memcmp(a + i, "\no hand_", 8);
        CHECK(objects == 2);
        hamer_free(a);
        hamer_free(b);
        hamer_free(h0);
        CHECK(hamer_hands_obj(m, want, 0, &a, &la) == HAMER_OK && la == 0);
        hamer_free(a);
        CHECK(hamer_hands_obj(NULL, want, 1, &a, &la) == HAMER_E_ARG && clean_error(HAMER_E_ARG));
        CHECK(hamer_hands_obj(m, want, -1, &a, &la) == HAMER_E_ARG);
        CHECK(hamer_job_obj(job, NULL, &la) == HAMER_E_ARG);
    }
    CHECK(hamer_job_hand_obj(job, 2, &obj, &olen) == HAMER_E_ARG && obj == NULL && clean_error(HAMER_E_ARG));
    CHECK(hamer_job_hand_obj(job, 3, &obj, &olen) == HAMER_E_ARG && obj == NULL);
    CHECK(hamer_job_hand_obj(job, -1, &obj, &olen) == HAMER_E_ARG && obj == NULL);
    CHECK(hamer_job_render_png(job, 0, NULL, &olen) == HAMER_E_ARG);

    /* RGB in: the same hands, the caller's decode time. */
    memset(&in, 0, sizeof in);
    in.rgb = rgb, in.width = W, in.height = H, in.decode_ms = 12.5;
    in.boxes = boxes, in.n_boxes = 3, in.source = HAMER_BOXES_GIVEN;
    CHECK(hamer_job_run(job, &in) == HAMER_OK && hamer_job_get_result(job, &r) == HAMER_OK);
    CHECK(r.n_hands == 3 && !memcmp(r.hands, want, sizeof want) && r.timings.decode_ms == 12.5 && r.rgb == rgb);
    CHECK(r.hands == first_hands); /* the job's buffers, reused */

    /* A file in; a missing one names itself. */
    char path[64];
    snprintf(path, sizeof path, "/tmp/test_job_%d.png", (int)getpid());
    FILE *f = fopen(path, "wb");
    CHECK(f && fwrite(png, 1, png_len, f) == png_len);
    if (f) fclose(f);
    memset(&in, 0, sizeof in);
    in.path = path, in.boxes = boxes, in.n_boxes = 2, in.source = HAMER_BOXES_GIVEN;
    CHECK(hamer_job_run(job, &in) == HAMER_OK && hamer_job_get_result(job, &r) == HAMER_OK);
    CHECK(r.n_hands == 2 && r.n_failed == 0 && !memcmp(r.hands, want, 2 * sizeof *want));
    unlink(path);
    int rc = hamer_job_run(job, &in);
    CHECK(rc == HAMER_E_IO && clean_error(rc) && strstr(hamer_last_error(), path));
    CHECK(hamer_job_get_result(job, &r) == HAMER_OK && r.failed_stage == HAMER_JOB_STAGE_DECODE && r.n_hands == 0);
    CHECK(hamer_job_result_json(job, 0) == NULL); /* no stale document */

    /* Bad bytes. */
    static const char junk[] = "this is not a JPEG or a PNG";
    memset(&in, 0, sizeof in);
    in.data = junk, in.len = sizeof junk, in.source = HAMER_BOXES_GIVEN;
    rc = hamer_job_run(job, &in);
    CHECK(rc < 0 && clean_error(rc));
    CHECK(hamer_job_get_result(job, &r) == HAMER_OK && r.failed_stage == HAMER_JOB_STAGE_DECODE && r.n_hands == 0);
    uint8_t *p2 = NULL;
    size_t l2 = 0;
    CHECK(hamer_job_render_png(job, 0, &p2, &l2) == HAMER_E_ARG && p2 == NULL);
    /* A truncated PNG. */
    in.data = png, in.len = png_len / 2;
    rc = hamer_job_run(job, &in);
    CHECK(rc < 0 && clean_error(rc) && hamer_job_get_result(job, &r) == HAMER_OK && r.failed_stage == HAMER_JOB_STAGE_DECODE);

    /* No image, two images, too many boxes, an unknown source. */
    memset(&in, 0, sizeof in);
    CHECK(hamer_job_run(job, &in) == HAMER_E_ARG && clean_error(HAMER_E_ARG));
    in.data = png, in.len = png_len, in.rgb = rgb, in.width = W, in.height = H;
    CHECK(hamer_job_run(job, &in) == HAMER_E_ARG && clean_error(HAMER_E_ARG));
    in.rgb = NULL;
    hamer_box many[HAMER_MAX_HANDS + 1];
    for (int i = 0; i <= HAMER_MAX_HANDS; i++) many[i] = boxes[0];
    in.boxes = many, in.n_boxes = HAMER_MAX_HANDS + 1;
    CHECK(hamer_job_run(job, &in) == HAMER_E_ARG && clean_error(HAMER_E_ARG));
    in.n_boxes = -1;
    CHECK(hamer_job_run(job, &in) == HAMER_E_ARG);
    in.n_boxes = 2, in.boxes = NULL;
    CHECK(hamer_job_run(job, &in) == HAMER_E_ARG);
    in.boxes = boxes, in.source = (hamer_boxes_source)7;
    CHECK(hamer_job_run(job, &in) == HAMER_E_ARG && clean_error(HAMER_E_ARG));
    memset(&in, 0, sizeof in);
    in.rgb = rgb, in.width = 0, in.height = H;
    CHECK(hamer_job_run(job, &in) == HAMER_E_ARG && clean_error(HAMER_E_ARG));

    /* Only absurd boxes: the request stands, every hand failed. */
    memset(&in, 0, sizeof in);
    hamer_box absurd[2] = {{{NAN, 0, 10, 10}, 1}, {{50, 50, 40, 40}, 0}};
    in.rgb = rgb, in.width = W, in.height = H, in.boxes = absurd, in.n_boxes = 2, in.source = HAMER_BOXES_GIVEN;
    CHECK(hamer_job_run(job, &in) == HAMER_OK && hamer_job_get_result(job, &r) == HAMER_OK);
    CHECK(r.n_hands == 2 && r.n_failed == 2 && !r.hands[0].ok && !r.hands[1].ok && r.hands[0].error[0]);
    json = hamer_job_result_json(job, 0);
    CHECK(json && strstr(json, "\"error\":") && strstr(json, "null")); /* NaN written as null */
    hamer_free(json);
    /* No boxes given (n 0): an empty, "given" result. */
    in.n_boxes = 0;
    CHECK(hamer_job_run(job, &in) == HAMER_OK && hamer_job_get_result(job, &r) == HAMER_OK && r.n_hands == 0);
    json = hamer_job_result_json(job, 0);
    CHECK(json && strstr(json, "\"boxes\":\"given\",\"hands\":[]"));
    hamer_free(json);

    /* Detection asked for without a detection state. */
    in.source = HAMER_BOXES_DETECTED;
    rc = hamer_job_run(job, &in);
    CHECK(rc == HAMER_E_ARG && clean_error(rc) && hamer_job_get_result(job, &r) == HAMER_OK &&
          r.failed_stage == HAMER_JOB_STAGE_DETECT);

    /* Bad parameters: the predict stage refuses the request. */
    hamer_job_params bad = hamer_job_default_params();
    bad.predict.rescale = 0;
    in.source = HAMER_BOXES_GIVEN, in.boxes = boxes, in.n_boxes = 1, in.params = &bad;
    rc = hamer_job_run(job, &in);
    CHECK(rc == HAMER_E_ARG && clean_error(rc) && hamer_job_get_result(job, &r) == HAMER_OK &&
          r.failed_stage == HAMER_JOB_STAGE_PREDICT && r.n_hands == 0);
    /* The params given per run are used; the job's own stay. */
    hamer_job_params pad = hamer_job_default_params();
    pad.predict.crop_mode = HAMER_CROP_PAD;
    hamer_predict_params ppad = pad.predict;
    hamer_hand want_pad;
    CHECK(hamer_predict(st, rgb, W, H, boxes, 1, &ppad, &want_pad, NULL) == HAMER_OK);
    in.params = &pad;
    CHECK(hamer_job_run(job, &in) == HAMER_OK && hamer_job_get_result(job, &r) == HAMER_OK &&
          !memcmp(&r.hands[0], &want_pad, sizeof want_pad));
    in.params = NULL;
    CHECK(hamer_job_run(job, &in) == HAMER_OK && hamer_job_get_result(job, &r) == HAMER_OK &&
          !memcmp(&r.hands[0], &want[0], sizeof want[0]));

    /* The state's cancel callback stops the job. */
    hamer_state_set_cancel(st, cancel_always, NULL);
    rc = hamer_job_run(job, &in);
    CHECK(rc == HAMER_E_CANCELLED && hamer_job_get_result(job, &r) == HAMER_OK &&
          r.failed_stage == HAMER_JOB_STAGE_PREDICT && r.n_hands == 0);
    hamer_state_set_cancel(st, NULL, NULL);
    CHECK(hamer_job_run(job, &in) == HAMER_OK);

    /* Bad parameters of the job's own: refused by the run that uses them,
     * with hamer_predict's message. */
    bad.predict.rescale = 20;
    hamer_job *job2 = hamer_job_new(st, NULL, &bad);
    CHECK(job2 != NULL);
    in.params = NULL;
    rc = job2 ? hamer_job_run(job2, &in) : HAMER_E_ARG;
    CHECK(rc == HAMER_E_ARG && clean_error(rc) && strstr(hamer_last_error(), "rescale 20 out of range (0, 16]"));
    hamer_job_free(job2);
out:
    hamer_job_free(job);
    free(rgb);
    hamer_free(png);
}

/* Detected boxes: the job equals hamer_detect + hamer_predict_detections
 * + hamer_result_json_source(DETECTED). Where the detector is installed. */
static void detected(hamer_state *st) {
    hamer_detector *det = hamer_detector_load(NULL);
    if (!det) {
        printf("detector not installed: the detection part is skipped (%s)\n", hamer_last_error());
        return;
    }
    hamer_detect_state *ds = hamer_detect_state_new(det, 1);
    CHECK(ds != NULL);
    const int W = 256, H = 192;
    uint8_t *rgb = make_image(W, H);
    hamer_detection dets[HAMER_MAX_HANDS];
    hamer_detect_params dp = hamer_detect_default_params();
    int n = hamer_detect(ds, rgb, W, H, &dp, dets, HAMER_MAX_HANDS, NULL);
    CHECK(n >= 0);
    hamer_hand *want = calloc(HAMER_MAX_HANDS, sizeof *want);
    CHECK(hamer_predict_detections(st, rgb, W, H, dets, n > 0 ? n : 0, NULL, want, NULL) == HAMER_OK);
    hamer_job *job = hamer_job_new(st, ds, NULL);
    hamer_job_input in;
    memset(&in, 0, sizeof in);
    in.rgb = rgb, in.width = W, in.height = H, in.source = HAMER_BOXES_DETECTED;
    in.boxes = NULL, in.n_boxes = 99; /* ignored when detecting */
    hamer_job_result r;
    CHECK(job && hamer_job_run(job, &in) == HAMER_OK && hamer_job_get_result(job, &r) == HAMER_OK);
    CHECK(r.n_hands == n && r.source == HAMER_BOXES_DETECTED && r.detections != NULL);
    CHECK(n <= 0 || (!memcmp(r.hands, want, (size_t)n * sizeof *want) && !memcmp(r.detections, dets, (size_t)n * sizeof *dets)));
    char *json = hamer_job_result_json(job, 0);
    char *ref = hamer_result_json_source(W, H, want, n, 0, &r.timings, HAMER_BOXES_DETECTED);
    CHECK(json && ref && !strcmp(json, ref) && strstr(json, "\"boxes\":\"detected\"") && strstr(json, "\"detect\":"));
    hamer_free(json);
    hamer_free(ref);
    /* Bad detector options: the detect stage. */
    hamer_job_params bad = hamer_job_default_params();
    bad.detect.max_hands = 0;
    in.params = &bad;
    int rc = hamer_job_run(job, &in);
    CHECK(rc == HAMER_E_ARG && clean_error(rc) && hamer_job_get_result(job, &r) == HAMER_OK &&
          r.failed_stage == HAMER_JOB_STAGE_DETECT);
    hamer_job_free(job);
    free(want);
    free(rgb);
    hamer_detect_state_free(ds);
    hamer_detector_free(det);
}

int main(void) {
    model_path = check_tiny_model();
    null_args();
    hamer_model_params p = hamer_model_default_params();
    p.no_cache = 1;
    hamer_model *m = hamer_model_load(model_path, &p);
    CHECK(m != NULL);
    hamer_state *st = m ? hamer_state_new(m, 4, 2) : NULL;
    CHECK(st != NULL);
    if (st) {
        same_as_separate_calls(m, st);
        detected(st);
    }
    hamer_state_free(st);
    hamer_model_free(m);
    return check_summary();
}
