/* tool_body - run the body pass (detect/body.h) on an image; JSON on stdout.
 *
 *   tool_body [--models DIR] [--max-persons N] [--threads N] [--repeat N] IMAGE
 *
 * Output:
 *   {"image": {"width", "height"},
 *    "persons": [{"score", "kp": [[x,y] x4], "box", "roi": [cx,cy,w,h,rot], "presence",
 *                 "landmarks": [[x,y,z,visibility,presence] x39]}],
 *    "hands": [{"person", "is_right", "body_only", "bbox", "presence", "handedness",
 *               "wrist_visibility", "pose_roi", "roi", "landmarks": [[x,y,z] x21]}],
 *    "timings_ms": {load, pose, pose_landmark, recrop, hand, total, median_total}}
 * Errors: one line on stderr, exit 1 (2: usage).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/pool.h"
#include "core/util.h"
#include "detect/body.h"
#include "detect/detect.h"
#include "format/image.h"

static double now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec * 1e-6;
}

static int usage(const char *msg) {
    fprintf(stderr, "tool_body: %s\nusage: tool_body [--models DIR] [--max-persons N] [--threads N] [--repeat N] IMAGE\n",
            msg);
    return 2;
}

static int cmp_d(const void *a, const void *b) {
    const double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static void rect(const hm_det_rect *r) { printf("[%.17g, %.17g, %.17g, %.17g, %.17g]", r->cx, r->cy, r->w, r->h, r->rot); }

int main(int argc, char **argv) {
    const char *dir = NULL, *image = NULL;
    int threads = 1, repeat = 1;
    hm_body_opts o;
    hm_body_opts_default(&o);
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (a[0] == '-' && a[1] == '-' && !v) return usage("option needs a value");
        else if (!strcmp(a, "--models")) dir = v, i++;
        else if (!strcmp(a, "--threads")) threads = atoi(v), i++;
        else if (!strcmp(a, "--repeat")) repeat = atoi(v), i++;
        else if (!strcmp(a, "--max-persons")) o.max_persons = atoi(v), i++;
        else if (a[0] == '-') return usage("unknown option");
        else if (!image) image = a;
        else return usage("more than one image");
    }
    if (!image) return usage("no image");
    if (threads < 1 || repeat < 1) return usage("--threads and --repeat must be >= 1");
    double t0 = now_ms();
    hm_det_model *dm = NULL;
    hm_det_state *ds = NULL;
    hm_body_model *bm = NULL;
    hm_body_state *bs = NULL;
    hm_pool *pool = NULL;
    hm_image img = {0, 0, NULL};
    int rc = hm_det_model_load(dir, 0, &dm);
    if (!rc) rc = hm_det_state_new(dm, &ds);
    if (!rc) rc = hm_body_model_load(dir, &bm);
    if (!rc) rc = hm_body_state_new(bm, &bs);
    if (!rc && threads > 1 && !(pool = hm_pool_create(threads))) rc = HM_E_NOMEM;
    const double t_load = now_ms() - t0;
    if (!rc) rc = hm_image_load(image, &img);
    hm_body_hand hands[2 * HM_BODY_MAX_PERSONS];
    hm_body_person persons[HM_BODY_MAX_PERSONS];
    hm_body_stats st;
    int n = 0, np = 0;
    double *tot = calloc((size_t)repeat, sizeof *tot);
    if (!tot) rc = HM_E_NOMEM;
    for (int r = 0; r < repeat && !rc; r++) {
        rc = hm_body_run(bs, ds, img.rgb, img.w, img.h, &o, pool, hands, 2 * HM_BODY_MAX_PERSONS, &n, persons, &np, &st);
        tot[r] = st.total_ms;
    }
    if (rc) {
        fprintf(stderr, "tool_body: %s\n", hm_errmsg()[0] ? hm_errmsg() : "out of memory");
        return 1;
    }
    qsort(tot, (size_t)repeat, sizeof *tot, cmp_d);
    printf("{\"image\": {\"width\": %d, \"height\": %d},\n \"persons\": [", img.w, img.h);
    for (int i = 0; i < np; i++) {
        const hm_body_person *p = &persons[i];
        printf("%s\n  {\"score\": %.9g, \"presence\": %.9g, \"kp\": [", i ? "," : "", p->score, p->presence);
        for (int k = 0; k < HM_POSE_KP; k++) printf("%s[%.9g, %.9g]", k ? ", " : "", p->kp[k][0], p->kp[k][1]);
        printf("], \"box\": [%.9g, %.9g, %.9g, %.9g], \"roi\": ", p->box[0], p->box[1], p->box[2], p->box[3]);
        rect(&p->roi);
        printf(", \"landmarks\": [");
        for (int k = 0; k < HM_POSE_LM; k++)
            printf("%s[%.9g, %.9g, %.9g, %.9g, %.9g]", k ? ", " : "", p->lm[k][0], p->lm[k][1], p->lm[k][2], p->lm[k][3],
                   p->lm[k][4]);
        printf("]}");
    }
    printf("],\n \"hands\": [");
    for (int i = 0; i < n; i++) {
        const hm_body_hand *b = &hands[i];
        const hm_det_hand *h = &b->hand;
        printf("%s\n  {\"person\": %d, \"is_right\": %s, \"body_only\": %s, \"bbox\": [%.9g, %.9g, %.9g, %.9g], "
               "\"presence\": %.9g, \"handedness\": %.9g, \"wrist_visibility\": %.9g, \"pose_roi\": ",
               i ? "," : "", b->person, b->is_right ? "true" : "false", b->body_only ? "true" : "false", h->box[0],
               h->box[1], h->box[2], h->box[3], h->presence, h->handedness, b->wrist_visibility);
        rect(&b->pose_roi);
        printf(", \"roi\": ");
        rect(&h->roi);
        printf(", \"landmarks\": [");
        for (int k = 0; k < HM_DET_LANDMARKS; k++)
            printf("%s[%.9g, %.9g, %.9g]", k ? ", " : "", h->landmarks[k][0], h->landmarks[k][1], h->landmarks[k][2]);
        printf("]}");
    }
    printf("],\n \"timings_ms\": {\"load\": %.3f, \"pose\": %.3f, \"pose_landmark\": %.3f, \"recrop\": %.3f, "
           "\"hand\": %.3f, \"total\": %.3f, \"median_total\": %.3f}}\n",
           t_load, st.pose_ms, st.pose_lm_ms, st.recrop_ms, st.hand_ms, st.total_ms, tot[repeat / 2]);
    free(tot);
    hm_image_free(&img);
    hm_pool_destroy(pool);
    hm_body_state_free(bs);
    hm_body_model_free(bm);
    hm_det_state_free(ds);
    hm_det_model_free(dm);
    return 0;
}
