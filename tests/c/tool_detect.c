/* tool_detect - run the built-in hand detector on an image; JSON on stdout.
 *
 *   tool_detect [--models DIR] [--lite] [--single] [--levels 2,4] [--overlap F]
 *               [--max-hands N] [--min-score F] [--threads N] [--repeat N]
 *               [--prior F] [--prior-mask F] [--body auto|on|off] [--body-boxes]
 *               [--proposals auto|on|off] IMAGE
 *
 * --body: the body pass (detect/body.h) merged in. Without it the body
 * models are not loaded, so hm_det_run's default (auto) does not run it;
 * auto: loaded when present; on: they must be. --body-boxes: the body
 * pass's keypoint-only boxes too (hm_det_opts.body_boxes; "pass": "keypoints").
 * --proposals: the hand-box proposals (detect/handtrack.h; they need the
 * body models too, loaded with them); as --body for the models; "pass":
 * "proposal".
 *
 * --single: MediaPipe's own full-frame pass only. --min-score: the palm
 * score threshold. --prior F / --prior-mask F: hm_det_opts.tile_prior /
 * prior_mask (--prior 0: every tile). --repeat N: run N times (timings are the last run's,
 * "median_total_ms" the median). Output:
 *   {"image": {"width", "height"}, "models": DIR,
 *    "hands": [{"bbox": [x1,y1,x2,y2], "is_right", "palm_score", "presence",
 *               "handedness", "landmarks": [[x,y,z] x21], "roi": [cx,cy,w,h,rot],
 *               "level", "levels", "pass" ("palm" / "body" / "keypoints" / "proposal"), "passes" (bits: 1 palm, 2 body, 4 keypoints, 8 proposal)}],
 *    "stats": {palm_calls, landmark_calls, candidates, tiles, tiles_run, ...},
 *    "timings_ms": {load, decode, warp, palm, landmark, post, detect}}
 * Errors: one line on stderr, exit 1 (2: usage).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/pool.h"
#include "core/util.h"
#include "detect/detect.h"
#include "format/image.h"

static double now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec * 1e-6;
}

static int usage(const char *msg) {
    fprintf(stderr, "tool_detect: %s\nusage: tool_detect [--models DIR] [--lite] [--single] [--levels A,B] [--overlap F] "
                    "[--max-hands N] [--min-score F] [--threads N] [--repeat N] [--prior F] [--prior-mask F] [--body auto|on|off] [--body-boxes] "
                    "[--proposals auto|on|off] IMAGE\n", msg);
    return 2;
}

static int cmp_d(const void *a, const void *b) {
    const double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

int main(int argc, char **argv) {
    const char *dir = NULL, *image = NULL;
    int lite = 0, threads = 1, repeat = 1, load_body = 0, load_props = 0;
    hm_det_opts o;
    hm_det_opts_default(&o);
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "--lite")) lite = 1;
        else if (!strcmp(a, "--single")) o.n_levels = 0;
        else if (!strcmp(a, "--body-boxes")) o.body_boxes = 1;
        else if (a[0] == '-' && a[1] == '-' && !v) return usage("option needs a value");
        else if (!strcmp(a, "--models")) dir = v, i++;
        else if (!strcmp(a, "--threads")) threads = atoi(v), i++;
        else if (!strcmp(a, "--repeat")) repeat = atoi(v), i++;
        else if (!strcmp(a, "--max-hands")) o.max_hands = atoi(v), i++;
        else if (!strcmp(a, "--body")) {
            i++;
            if (!strcmp(v, "auto")) o.body = HM_DET_BODY_AUTO, load_body = 1;
            else if (!strcmp(v, "on")) o.body = HM_DET_BODY_ON, load_body = 2;
            else if (!strcmp(v, "off")) o.body = HM_DET_BODY_OFF;
            else return usage("--body takes auto, on or off");
        } else if (!strcmp(a, "--proposals")) {
            i++;
            if (!strcmp(v, "auto")) o.proposals = HM_DET_BODY_AUTO, load_props = 1;
            else if (!strcmp(v, "on")) o.proposals = HM_DET_BODY_ON, load_props = 2;
            else if (!strcmp(v, "off")) o.proposals = HM_DET_BODY_OFF;
            else return usage("--proposals takes auto, on or off");
        }
        else if (!strcmp(a, "--min-score")) o.min_palm = (float)atof(v), i++;
        else if (!strcmp(a, "--overlap")) o.overlap = (float)atof(v), i++;
        else if (!strcmp(a, "--prior")) o.tile_prior = (float)atof(v), i++;
        else if (!strcmp(a, "--prior-mask")) o.prior_mask = (float)atof(v), i++;
        else if (!strcmp(a, "--levels")) {
            o.n_levels = 0;
            for (char *s = argv[++i], *e; *s && o.n_levels < HM_DET_MAX_LEVELS; s = *e ? e + 1 : e) {
                o.levels[o.n_levels++] = strtof(s, &e);
                if (e == s) return usage("bad --levels");
            }
        } else if (a[0] == '-') return usage("unknown option");
        else if (!image) image = a;
        else return usage("more than one image");
    }
    if (!image) return usage("no image");
    if (threads < 1 || repeat < 1) return usage("--threads and --repeat must be >= 1");

    char mdir[2048];
    double t0 = now_ms();
    hm_det_model *m = NULL;
    hm_det_state *s = NULL;
    hm_pool *pool = NULL;
    hm_image img = {0, 0, NULL};
    int rc = hm_det_find_dir(dir, lite, mdir, sizeof mdir);
    if (!rc) rc = hm_det_model_load(mdir, lite, &m);
    if (!rc && (load_body || load_props)) {
        rc = hm_det_model_load_body(m, mdir);
        if (rc && load_body < 2 && load_props < 2) rc = HM_OK; /* auto: absent models leave the pass off */
    }
    if (!rc && load_props) {
        rc = hm_det_model_load_proposals(m, mdir);
        if (rc && load_props == 1) rc = HM_OK;
    }
    if (!rc) rc = hm_det_state_new(m, &s);
    if (!rc && getenv("TOOL_DETECT_FINE") == NULL) rc = hm_det_state_reserve(s, threads);
    if (!rc && threads > 1 && !(pool = hm_pool_create(threads))) rc = HM_E_NOMEM;
    const double t_load = now_ms() - t0;
    t0 = now_ms();
    if (!rc) rc = hm_image_load(image, &img);
    const double t_decode = now_ms() - t0;
    hm_det_hand hands[HM_DET_MAX_HANDS];
    hm_det_stats st;
    int n = 0;
    double *tot = calloc((size_t)repeat, sizeof *tot);
    if (!tot) rc = HM_E_NOMEM;
    for (int r = 0; r < repeat && !rc; r++) {
        rc = hm_det_run(s, img.rgb, img.w, img.h, &o, pool, hands, HM_DET_MAX_HANDS, &n, &st);
        tot[r] = st.total_ms;
    }
    if (rc) {
        fprintf(stderr, "tool_detect: %s\n", hm_errmsg()[0] ? hm_errmsg() : "out of memory");
        free(tot);
        hm_image_free(&img);
        hm_pool_destroy(pool);
        hm_det_state_free(s);
        hm_det_model_free(m);
        return 1;
    }
    qsort(tot, (size_t)repeat, sizeof *tot, cmp_d);
    printf("{\"image\": {\"width\": %d, \"height\": %d}, \"models\": \"%s\", \"hands\": [", img.w, img.h, mdir);
    for (int i = 0; i < n; i++) {
        const hm_det_hand *hd = &hands[i];
        printf("%s\n  {\"bbox\": [%.9g, %.9g, %.9g, %.9g], \"is_right\": %s, \"palm_score\": %.9g, \"presence\": %.9g, "
               "\"handedness\": %.9g, \"level\": %d, \"levels\": %u, \"pass\": \"%s\", \"passes\": %u, \"roi\": [%.17g, %.17g, %.17g, %.17g, %.17g], "
               "\"landmarks\": [",
               i ? "," : "", hd->box[0], hd->box[1], hd->box[2], hd->box[3], hd->is_right ? "true" : "false",
               hd->palm_score, hd->presence, hd->handedness, hd->level, hd->levels,
               hd->pass == HM_DET_PASS_BODY ? "body" : hd->pass == HM_DET_PASS_KEYPOINTS ? "keypoints"
               : hd->pass == HM_DET_PASS_PROPOSAL ? "proposal" : "palm", hd->passes, hd->roi.cx, hd->roi.cy, hd->roi.w,
               hd->roi.h, hd->roi.rot);
        for (int k = 0; k < HM_DET_LANDMARKS; k++)
            printf("%s[%.9g, %.9g, %.9g]", k ? ", " : "", hd->landmarks[k][0], hd->landmarks[k][1], hd->landmarks[k][2]);
        printf("]}");
    }
    printf("],\n \"stats\": {\"palm_calls\": %d, \"landmark_calls\": %d, \"candidates\": %d, \"tiles\": %d, "
           "\"tiles_run\": %d, \"body_persons\": %d, \"body_hands\": %d, \"body_boxes\": %d, \"body_run\": %d, "
           "\"body_ms\": %.3f, \"proposals_run\": %d, \"proposals\": %d, \"proposal_calls\": %d, \"proposal_hands\": %d, "
           "\"dropped\": %d, \"proposal_ms\": %.3f},\n", st.palm_calls,
           st.landmark_calls, st.candidates, st.tiles, st.tiles_run, st.body_persons, st.body_hands, st.body_boxes,
           st.body_run, st.body_ms, st.proposals_run, st.proposals, st.proposal_calls, st.proposal_hands, st.dropped,
           st.proposal_ms);
    printf(" \"timings_ms\": {\"load\": %.3f, \"decode\": %.3f, \"warp\": %.3f, \"palm\": %.3f, \"landmark\": %.3f, "
           "\"post\": %.3f, \"detect\": %.3f, \"median_detect\": %.3f}}\n",
           t_load, t_decode, st.warp_ms, st.palm_ms, st.landmark_ms, st.post_ms, st.total_ms, tot[repeat / 2]);
    free(tot);
    hm_image_free(&img);
    hm_pool_destroy(pool);
    hm_det_state_free(s);
    hm_det_model_free(m);
    return 0;
}
