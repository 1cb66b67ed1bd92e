/* test_api.c - the public API's contract: every handle checked, failures
 * inside a forward reaching the caller, no allocation in a forward,
 * unaligned input, the log callback, the version and status tables.
 *
 * The model is the small checkpoint of the fuzz corpus (2 blocks with
 * MANO buffers), loaded through hamer_model_load like a user's file. */
#include <stdint.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "check.h"
#include "hamer.h"
#include "kernels/gemm.h"

static const char *model_path;

static float *random_crops(int B, uint32_t seed) {
    size_t n = (size_t)B * 3 * HAMER_CROP_H * HAMER_CROP_W;
    float *c = malloc(n * sizeof(float));
    for (size_t i = 0; i < n; i++) {
        seed = seed * 1664525u + 1013904223u;
        c[i] = (float)((seed >> 8) / 16777216.0 * 4.0 - 2.0);
    }
    return c;
}

/* Every entry point given a NULL handle or pointer: HAMER_E_ARG, a message,
 * no crash. */
static void null_handles(void) {
    hamer_model_info info;
    hamer_output out = {0};
    float f[4] = {0};
    uint8_t u8[4] = {0}, *png = NULL, *rgb = NULL;
    size_t len = 0;
    int w, h;
    hamer_hand hand;
    hamer_box box = {{0, 0, 1, 1}, 1};
    CHECK(hamer_model_get_info(NULL, &info) == HAMER_E_ARG && clean_error(HAMER_E_ARG));
    CHECK(hamer_last_error_code() == HAMER_E_ARG);
    CHECK(hamer_model_get_faces(NULL) == NULL && hamer_last_error_code() == HAMER_E_ARG);
    CHECK(hamer_model_load(NULL, NULL) == NULL && hamer_last_error_code() == HAMER_E_ARG);
    CHECK(hamer_model_save_packed(NULL, "x.hpk") == HAMER_E_ARG);
    CHECK(hamer_state_new(NULL, 1, 1) == NULL && hamer_last_error_code() == HAMER_E_ARG);
    CHECK(hamer_regress_f32(NULL, f, 1, &out) == HAMER_E_ARG);
    CHECK(hamer_regress_u8(NULL, u8, 1, &out) == HAMER_E_ARG);
    CHECK(hamer_predict(NULL, u8, 1, 1, &box, 1, NULL, &hand, NULL) == HAMER_E_ARG);
    CHECK(hamer_render_png(NULL, u8, 1, 1, &hand, 1, 0, &png, &len) == HAMER_E_ARG);
    CHECK(hamer_state_set_plain(NULL, 1) == HAMER_E_ARG);
    CHECK(hamer_state_set_profile(NULL, 1) == HAMER_E_ARG);
    CHECK(hamer_state_set_profile_sim(NULL, 16) == HAMER_E_ARG);
    CHECK(hamer_state_get_profile_sim(NULL, NULL, 1) == HAMER_E_ARG);
    CHECK(hamer_state_get_profile(NULL, NULL, NULL, 1) == HAMER_E_ARG);
    CHECK(hamer_image_load(NULL, &rgb, &w, &h) == HAMER_E_ARG);
    CHECK(hamer_image_decode(NULL, 0, &rgb, &w, &h) == HAMER_E_ARG);
    CHECK(hamer_result_json(1, 1, NULL, 1, 0, NULL) == NULL && hamer_last_error_code() == HAMER_E_ARG);
    hamer_model_free(NULL);
    hamer_state_free(NULL);
    hamer_free(NULL);
}

/* RESULT.json's "boxes" and "detect" timing follow the source the caller
 * names, also with no hand (the detector ran and found none); a "given"
 * document over detected hands, or an unknown source, is refused. */
static void result_json_source(void) {
    hamer_timings tm = {.decode_ms = 1, .crop_ms = 2, .regress_ms = 3, .finalise_ms = 4, .detect_ms = 5};
    char *j = hamer_result_json_source(8, 6, NULL, 0, 0, &tm, HAMER_BOXES_DETECTED);
    CHECKF(j && strstr(j, "\"boxes\":\"detected\"") && strstr(j, "\"detect\":5"), "%s", j ? j : hamer_last_error());
    hamer_free(j);
    j = hamer_result_json_source(8, 6, NULL, 0, 0, &tm, HAMER_BOXES_GIVEN);
    CHECKF(j && strstr(j, "\"boxes\":\"given\"") && !strstr(j, "\"detect\""), "%s", j ? j : hamer_last_error());
    hamer_free(j);
    j = hamer_result_json(8, 6, NULL, 0, 0, &tm); /* inferred: no hand says "given" */
    CHECKF(j && strstr(j, "\"boxes\":\"given\"") && !strstr(j, "\"detect\""), "%s", j ? j : hamer_last_error());
    hamer_free(j);
    static hamer_hand hand; /* ~10 KB: off the stack */
    memset(&hand, 0, sizeof hand);
    hand.box = (hamer_box){{1, 1, 4, 4}, 1};
    snprintf(hand.error, sizeof hand.error, "not regressed");
    hand.detection.detected = 1;
    CHECK(hamer_result_json_source(8, 6, &hand, 1, 0, NULL, HAMER_BOXES_GIVEN) == NULL &&
          hamer_last_error_code() == HAMER_E_ARG && clean_error(HAMER_E_ARG));
    CHECK(hamer_result_json_source(8, 6, &hand, 1, 0, NULL, (hamer_boxes_source)2) == NULL &&
          hamer_last_error_code() == HAMER_E_ARG && clean_error(HAMER_E_ARG));
    j = hamer_result_json_source(8, 6, &hand, 1, 0, NULL, HAMER_BOXES_DETECTED);
    CHECKF(j && strstr(j, "\"boxes\":\"detected\"") && strstr(j, "\"detection\""), "%s", j ? j : hamer_last_error());
    hamer_free(j);
}

static void status_table(void) {
    const char *seen[HAMER_N_STATUS];
    for (int i = 0; i < HAMER_N_STATUS; i++) {
        seen[i] = hamer_strerror(-i);
        CHECKF(seen[i] && strcmp(seen[i], "unknown error") != 0, "strerror(%d) = '%s'", -i, seen[i]);
        for (int j = 0; j < i; j++) CHECKF(strcmp(seen[i], seen[j]) != 0, "strerror(%d) == strerror(%d)", -i, -j);
    }
    CHECK(!strcmp(hamer_strerror(-HAMER_N_STATUS), "unknown error") && !strcmp(hamer_strerror(1), "unknown error"));
    char v[64];
    snprintf(v, sizeof v, "%d.%d.%d", HAMER_VERSION_MAJOR, HAMER_VERSION_MINOR, HAMER_VERSION_PATCH);
    CHECKF(!strcmp(v, hamer_version()) && !strcmp(HAMER_VERSION_STRING, hamer_version()), "version %s / %s / %s", v,
           HAMER_VERSION_STRING, hamer_version());
    CHECK(HAMER_VERSION_NUMBER == HAMER_VERSION_MAJOR * 10000 + HAMER_VERSION_MINOR * 100 + HAMER_VERSION_PATCH);
    CHECK(strstr(hamer_system_info(), "kernels: ") == hamer_system_info());
}

typedef struct {
    int progress, other, last_pct;
} log_seen;

static void on_log(void *user, hamer_log_level level, const char *msg) {
    log_seen *s = user;
    int pct;
    if (level == HAMER_LOG_PROGRESS && sscanf(msg, "loading weights %d%%", &pct) == 1 && !strchr(msg, '\n')) {
        s->progress++;
        s->last_pct = pct;
    } else {
        s->other++;
    }
}

/* Load progress goes to the callback, and without one the library writes
 * nothing to stderr. */
static void logging(void) {
    hamer_model_params p = hamer_model_default_params();
    p.progress = 1;
    log_seen seen = {0, 0, -1};
    hamer_log_set(on_log, &seen);
    hamer_model *m = hamer_model_load(model_path, &p);
    hamer_log_set(NULL, NULL);
    CHECK(m != NULL);
    CHECKF(seen.progress > 1 && seen.last_pct == 100 && seen.other == 0, "progress %d, last %d%%, other %d",
           seen.progress, seen.last_pct, seen.other);
    hamer_model_free(m);

    fflush(stderr);
    int saved = dup(2);
    FILE *tmp = tmpfile();
    dup2(fileno(tmp), 2);
    m = hamer_model_load(model_path, &p);
    hamer_model_free(m);
    fflush(stderr);
    dup2(saved, 2);
    close(saved);
    long n = ftell(tmp) > 0 ? ftell(tmp) : (fseek(tmp, 0, SEEK_END), ftell(tmp));
    fclose(tmp);
    CHECKF(m != NULL && n == 0, "the library wrote %ld bytes to stderr with no log callback", n);
}

static int cancel_after, cancel_asked;
static int cancel_at(void *user) {
    (void)user;
    return cancel_asked++ >= cancel_after;
}

static int same(const float *a, const float *b, size_t n) { return memcmp(a, b, n * sizeof(float)) == 0; }

/* A failing kernel call anywhere in a forward must reach the caller; a
 * forward must not allocate; unaligned crops give the aligned answer. */
static void forward_contract(int precision) {
    hamer_model_params p = hamer_model_default_params();
    p.precision = precision;
    hamer_model *m = hamer_model_load(model_path, &p);
    CHECK(m != NULL);
    if (!m) return;
    hamer_state *st = hamer_state_new(m, 2, 2);
    CHECK(st != NULL);
    const int B = 3; /* two passes of a max_batch-2 state */
    float *crops = random_crops(B, 7), params[3 * HAMER_N_PARAMS], verts[3 * HAMER_N_VERTS * 3];
    float params2[3 * HAMER_N_PARAMS], verts2[3 * HAMER_N_VERTS * 3], kp2d[3 * 42];
    hamer_output out = {params, NULL, NULL, verts, NULL, kp2d};
    CHECK(hamer_regress_f32(st, crops, B, &out) == HAMER_OK);

    /* A non-finite value in any crop is refused, naming that crop. */
    const size_t per = (size_t)3 * HAMER_CROP_H * HAMER_CROP_W;
    const float bad_values[2] = {NAN, -INFINITY};
    for (int k = 0; k < 2; k++) {
        float keep = crops[per * 2 + 1000];
        crops[per * 2 + 1000] = bad_values[k];
        CHECK(hamer_regress_f32(st, crops, B, &out) == HAMER_E_ARG && strstr(hamer_last_error(), "crop 2 ") &&
              strstr(hamer_last_error(), k ? "Inf" : "NaN"));
        crops[per * 2 + 1000] = keep;
    }

    /* Count the GEMM calls of one forward, then fail each in turn. */
    int calls = 0;
    for (;; calls++) {
        hm_gemm_test_fail(calls, HAMER_E_NOMEM);
        hm_errclear();
        int rc = hamer_regress_f32(st, crops, B, &out);
        if (rc == HAMER_OK) break;
        CHECKF(rc == HAMER_E_NOMEM && strstr(hamer_last_error(), "injected") && hamer_last_error_code() == rc,
               "failure at gemm call %d: rc %d '%s'", calls, rc, hamer_last_error());
        if (calls > 10000) break;
    }
    hm_gemm_test_fail(-1, 0);
    CHECKF(calls > 10, "a forward of %d crops made %d GEMM calls", B, calls);

    /* No allocation in a forward: the next hm_alloc would fail. */
    hamer_output out2 = {params2, NULL, NULL, verts2, NULL, NULL};
    hm_alloc_test_fail(0);
    int rc = hamer_regress_f32(st, crops, B, &out2);
    hm_alloc_test_fail(-1);
    CHECKF(rc == HAMER_OK, "forward with allocation disabled: %d %s", rc, hamer_last_error());
    CHECK(same(params, params2, (size_t)B * HAMER_N_PARAMS) && same(verts, verts2, (size_t)B * HAMER_N_VERTS * 3));

    /* Cancellation: stop at the k-th question for every k a forward asks
     * (between blocks and passes), then let it run: same bits as before. */
    int asks = 0;
    for (int k = 0;; k++) {
        cancel_after = k, cancel_asked = 0;
        CHECK(hamer_state_set_cancel(st, cancel_at, NULL) == HAMER_OK);
        int rc2 = hamer_regress_f32(st, crops, B, &out2);
        if (rc2 == HAMER_OK) {
            asks = cancel_asked;
            break;
        }
        CHECKF(rc2 == HAMER_E_CANCELLED && hamer_last_error_code() == HAMER_E_CANCELLED,
               "cancel at question %d: rc %d '%s'", k, rc2, hamer_last_error());
        if (k > 10000) break;
    }
    hamer_model_info info;
    CHECK(hamer_model_get_info(m, &info) == HAMER_OK);
    /* Two passes (B = 3, max_batch 2), each asking once and once per block. */
    CHECKF(asks == 2 * (1 + info.vit_depth), "a forward of %d crops (2 passes, %d blocks) asked its cancel callback %d times",
           B, info.vit_depth, asks);
    CHECK(hamer_state_set_cancel(st, NULL, NULL) == HAMER_OK && hamer_state_set_cancel(NULL, NULL, NULL) == HAMER_E_ARG);
    memset(params2, 0, sizeof params2);
    CHECK(hamer_regress_f32(st, crops, B, &out2) == HAMER_OK);
    CHECK(same(params, params2, (size_t)B * HAMER_N_PARAMS) && same(verts, verts2, (size_t)B * HAMER_N_VERTS * 3));

    /* Unaligned crops (a numpy view at a byte offset): same bits. */
    size_t nf = (size_t)B * 3 * HAMER_CROP_H * HAMER_CROP_W;
    unsigned char *raw = malloc(nf * sizeof(float) + 1);
    memcpy(raw + 1, crops, nf * sizeof(float));
    memset(params2, 0, sizeof params2);
    CHECK(hamer_regress_f32(st, (const float *)(const void *)(raw + 1), B, &out2) == HAMER_OK);
    CHECK(same(params, params2, (size_t)B * HAMER_N_PARAMS) && same(verts, verts2, (size_t)B * HAMER_N_VERTS * 3));
    free(raw);

    /* An allocation failure at any point of hamer_state_new: NULL, the
     * code, nothing leaked (the sanitizer build checks the last part). */
    for (int k = 0;; k++) {
        hm_alloc_test_fail(k);
        hamer_state *s2 = hamer_state_new(m, 2, 2);
        hm_alloc_test_fail(-1);
        if (s2) {
            hamer_state_free(s2);
            CHECKF(k > 5, "hamer_state_new made only %d allocations", k);
            break;
        }
        CHECKF(hamer_last_error_code() == HAMER_E_NOMEM, "state_new with allocation %d failing: code %d", k,
               hamer_last_error_code());
    }
    hamer_state_free(st);
    hamer_model_free(m);
    free(crops);
}

int main(void) {
    model_path = check_tiny_model();
    null_handles();
    status_table();
    result_json_source();
    logging();
    forward_contract(HAMER_PRECISION_FP32);
    if (strstr(hamer_system_info(), "fast: unavailable")) {
        printf("fast precision: unavailable on this CPU (its forward contract is not run)\n");
    } else {
        forward_contract(HAMER_PRECISION_FAST);
    }
    return check_summary();
}
