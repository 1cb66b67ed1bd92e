/* cli_bench_video.c - `hamer bench --video IN`: `hamer video`'s per-frame
 * job (decode, track, detect, regress, smooth) on the first frames of a
 * video, timed per stage, with a full palm detection of every frame timed
 * apart for comparison with tracking. Public API only. */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "cli/cli.h"
#include "hamer.h"

enum { DECODE, TRACK, DETECT, DETECT_FULL, CROP, REGRESS, SMOOTH, FRAME, NST };
static const char *const names[NST] = {"decode", "track", "detect", "detect_every_frame", "crop", "regress", "smooth",
                                       "frame"};

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double median(double *v, int n) {
    if (n < 1) return 0;
    qsort(v, (size_t)n, sizeof *v, cmp_double);
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

static double mean(const double *v, int n) {
    double s = 0;
    for (int i = 0; i < n; i++) s += v[i];
    return n > 0 ? s / n : 0;
}

int hm_cli_bench_video(hamer_model *model, const char *path, const hm_tool_detect_args *det, int threads, int frames,
                       int json) {
    int rc = 1, n = 0, hands = 0, detections = 0;
    hamer_video_params vp = hamer_video_default_params();
    hamer_tracker_params tp = hamer_tracker_default_params();
    tp.max_hands = det->params.max_hands;
    tp.min_score = det->params.min_score;
    hamer_detect_params single = det->params;
    single.tiles = 0;
    hamer_video *v = hamer_video_open(path, &vp);
    hamer_detector *d = v ? hm_tool_load_detector(det) : NULL;
    hamer_tracker *t = d ? hamer_tracker_new(d, &tp, threads) : NULL;
    hamer_detect_state *ds = t ? hamer_detect_state_new(d, threads) : NULL;
    hamer_state *st = ds ? hamer_state_new(model, tp.max_hands, threads) : NULL;
    double *col[NST] = {0};
    for (int k = 0; k < NST; k++) col[k] = calloc((size_t)frames, sizeof(double));
    static hamer_detection dets[HAMER_MAX_HANDS];
    int ok = st != NULL;
    for (int k = 0; k < NST; k++) ok &= col[k] != NULL;
    if (!ok) {
        fprintf(stderr, "hamer: %s\n", st ? "out of memory" : hamer_last_error());
        goto done;
    }
    double wait = 0;
    for (; n < frames; n++) {
        hamer_video_frame f;
        double t0 = hm_now();
        int got = hamer_video_next(v, &f);
        wait += hm_now() - t0;
        if (got < 0) goto fail;
        if (got == 0) break;
        double t1 = hm_now();
        int nh = hamer_tracker_frame(t, st, f.rgb, f.width, f.height, f.time_s, NULL);
        double t2 = hm_now();
        if (nh < 0) goto fail;
        hamer_track_stats s;
        hamer_tracker_get_results(t, NULL, NULL, NULL, &s);
        double full = 0;
        if (hamer_detect(ds, f.rgb, f.width, f.height, &single, dets, HAMER_MAX_HANDS, &full) < 0) goto fail;
        col[DECODE][n] = f.decode_ms, col[TRACK][n] = s.track_ms, col[DETECT][n] = s.detect_ms;
        col[DETECT_FULL][n] = full, col[CROP][n] = s.predict.crop_ms, col[REGRESS][n] = s.predict.regress_ms;
        col[SMOOTH][n] = s.smooth_ms, col[FRAME][n] = 1e3 * (t2 - t1);
        hands += nh;
        detections += s.detected;
    }
    /* the frame loop's wall time without the comparison detections */
    double loop_s = 0;
    for (int i = 0; i < n; i++) loop_s += col[FRAME][i] / 1e3;
    loop_s += wait;
    double avg[NST], med[NST];
    for (int k = 0; k < NST; k++) avg[k] = mean(col[k], n);
    for (int k = 0; k < NST; k++) med[k] = median(col[k], n);
    /* the budget: everything but the regression against the regression */
    const double overhead = avg[DECODE] + avg[TRACK] + avg[DETECT] + avg[SMOOTH];
    const double pct = avg[REGRESS] > 0 ? 100 * overhead / avg[REGRESS] : 0;
    const double fps = loop_s > 0 ? n / loop_s : 0;
    hamer_model_info info;
    hamer_model_get_info(model, &info);
    hamer_video_info vi;
    hamer_video_get_info(v, &vi);
    const char *prec = info.precision == HAMER_PRECISION_FAST ? "fast" : "fp32";
    if (json) {
        json_t *o = json_pack("{s:s,s:i,s:i,s:i,s:f,s:i,s:s,s:i,s:i,s:f,s:f}", "video", path, "width", vi.width,
                              "height", vi.height, "frames", n, "hands_per_frame", n ? (double)hands / n : 0.0,
                              "max_hands", tp.max_hands, "precision", prec, "threads", threads, "detections",
                              detections, "fps", fps, "overhead_pct_of_regression", pct);
        json_t *m = json_object(), *a = json_object();
        for (int k = 0; k < NST; k++) {
            json_object_set_new(m, names[k], json_real(med[k]));
            json_object_set_new(a, names[k], json_real(avg[k]));
        }
        json_object_set_new(o, "median_ms", m);
        json_object_set_new(o, "mean_ms", a);
        char *s = json_dumps(o, JSON_INDENT(1) | JSON_PRESERVE_ORDER);
        json_decref(o);
        if (s) puts(s);
        free(s);
    } else {
        printf("hamer bench --video %s (%dx%d): %d frames, %.2f hands/frame (max %d), precision %s, %d threads\n",
               path, vi.width, vi.height, n, n ? (double)hands / n : 0.0, tp.max_hands, prec, threads);
        printf("  %-20s %10s %10s\n", "stage", "median ms", "mean ms");
        for (int k = 0; k < NST; k++) printf("  %-20s %10.2f %10.2f\n", names[k], med[k], avg[k]);
        printf("  palm detection ran on %d of %d frames; detect_every_frame: a full single-pass\n"
               "  detection of each frame, timed apart (not in frame)\n", detections, n);
        printf("  decode + track + detect + smooth = %.2f ms = %.2f%% of the regression (%.1f ms)\n", overhead, pct,
               avg[REGRESS]);
        printf("  end to end: %.3f frames/s (decode on its own thread)\n", fps);
    }
    rc = 0;
    goto done;
fail:
    fprintf(stderr, "hamer: %s\n", hamer_last_error());
done:
    for (int k = 0; k < NST; k++) free(col[k]);
    hamer_state_free(st);
    hamer_detect_state_free(ds);
    hamer_tracker_free(t);
    hamer_detector_free(d);
    hamer_video_close(v);
    return rc;
}
