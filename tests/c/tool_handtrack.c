/* tool_handtrack - the hand-box proposals (detect/handtrack.h) on an image,
 * and their stages, for tests/test_handtrack.py.
 *
 *   tool_handtrack [--models DIR] [--min-score F] [--iou F] [--max N]
 *                  [--threads N] [--repeat N] [--dump OUT.npz] IMAGE
 *   tool_handtrack [--models DIR] [--min-score F] [--iou F] [--max N]
 *                  --decode RAW.npz --dump OUT.npz
 *
 * IMAGE: the whole pass; prints {"image": {width, height}, "proposals":
 * [{"box": [x1,y1,x2,y2], "score", "face", "label"}], "timings_ms":
 * {prep, net, post, total, median_total}}. --dump writes the stages: "pre"
 * (the 1x320x320x3 network input), "enc" and "logits" (the raw outputs),
 * "boxes" ([12804,4] y1,x1,y2,x2 in [0,1]), "scores" ([12804,7]), "max"
 * ([12804], best class but face) and "nms" (the kept anchors, in order).
 * --decode: decoding and NMS alone on "enc" and "logits" from RAW.npz
 * (e.g. TF.js's own raw outputs), the same members dumped.
 * Errors: one line on stderr, exit 1 (2: usage).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/pool.h"
#include "core/util.h"
#include "detect/detect.h"
#include "detect/handtrack.h"
#include "format/image.h"
#include "format/npy.h"

static int usage(const char *msg) {
    fprintf(stderr, "tool_handtrack: %s\nusage: tool_handtrack [--models DIR] [--min-score F] [--iou F] [--max N] "
                    "[--threads N] [--repeat N] [--dump OUT.npz] (IMAGE | --decode RAW.npz)\n", msg);
    return 2;
}

static int cmp_d(const void *a, const void *b) {
    const double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static hm_ht_det det[HM_HT_ANCHORS];
static float boxes[HM_HT_ANCHORS][4], scores[HM_HT_ANCHORS][HM_HT_CLASSES], maxs[HM_HT_ANCHORS];
static int order[HM_HT_ANCHORS];

static int dump(const char *path, const float *pre, const float *enc, const float *logits, const hm_ht_opts *o) {
    int keep[HM_HT_MAX_OUT];
    const int nk = hm_ht_nms(det, HM_HT_ANCHORS, o->min_score, o->iou, o->max_out, keep, order);
    for (int i = 0; i < HM_HT_ANCHORS; i++) {
        memcpy(boxes[i], det[i].yx, sizeof boxes[i]);
        memcpy(scores[i], det[i].cls, sizeof scores[i]);
        maxs[i] = det[i].score;
    }
    hm_npz_writer *w;
    int rc = hm_npz_write_begin(path, &w);
    if (rc) return rc;
    const int64_t sp[4] = {1, HM_HT_SIZE, HM_HT_SIZE, 3}, se[2] = {HM_HT_ANCHORS, 4}, sl[2] = {HM_HT_ANCHORS, 8},
                  sb[2] = {HM_HT_ANCHORS, 4}, ss[2] = {HM_HT_ANCHORS, HM_HT_CLASSES}, sm[1] = {HM_HT_ANCHORS},
                  sn[1] = {nk};
    if (pre) rc = hm_npz_write_add(w, "pre", HM_DT_F32, 4, sp, pre);
    if (!rc) rc = hm_npz_write_add(w, "enc", HM_DT_F32, 2, se, enc);
    if (!rc) rc = hm_npz_write_add(w, "logits", HM_DT_F32, 2, sl, logits);
    if (!rc) rc = hm_npz_write_add(w, "boxes", HM_DT_F32, 2, sb, boxes);
    if (!rc) rc = hm_npz_write_add(w, "scores", HM_DT_F32, 2, ss, scores);
    if (!rc) rc = hm_npz_write_add(w, "max", HM_DT_F32, 1, sm, maxs);
    if (!rc) rc = hm_npz_write_add(w, "nms", HM_DT_I32, 1, sn, keep);
    if (rc) {
        hm_npz_write_abort(w);
        return rc;
    }
    return hm_npz_write_finish(w);
}

static int fail(void) {
    fprintf(stderr, "tool_handtrack: %s\n", hm_errmsg()[0] ? hm_errmsg() : "failed");
    return 1;
}

int main(int argc, char **argv) {
    const char *dir = NULL, *image = NULL, *out = NULL, *raw = NULL;
    int threads = 1, repeat = 1;
    hm_ht_opts o;
    hm_ht_opts_default(&o);
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (a[0] == '-' && a[1] == '-' && !v) return usage("option needs a value");
        if (!strcmp(a, "--models")) dir = v, i++;
        else if (!strcmp(a, "--min-score")) o.min_score = (float)atof(v), i++;
        else if (!strcmp(a, "--iou")) o.iou = (float)atof(v), i++;
        else if (!strcmp(a, "--max")) o.max_out = atoi(v), i++;
        else if (!strcmp(a, "--threads")) threads = atoi(v), i++;
        else if (!strcmp(a, "--repeat")) repeat = atoi(v), i++;
        else if (!strcmp(a, "--dump")) out = v, i++;
        else if (!strcmp(a, "--decode")) raw = v, i++;
        else if (a[0] == '-') return usage("unknown option");
        else if (!image) image = a;
        else return usage("more than one image");
    }
    if (!image == !raw) return usage("give an IMAGE or --decode RAW.npz");
    if (raw && !out) return usage("--decode needs --dump");
    if (threads < 1 || repeat < 1) return usage("--threads and --repeat must be >= 1");
    char mdir[2048];
    hm_ht_model *m = NULL;
    hm_ht_state *s = NULL;
    int rc = HM_OK;
    if (dir) snprintf(mdir, sizeof mdir, "%s", dir);
    else rc = hm_det_find_dir(NULL, 0, mdir, sizeof mdir);
    if (!rc) rc = hm_ht_model_load(mdir, &m);
    if (!rc) rc = hm_ht_state_new(m, &s);
    if (rc) return fail();
    if (raw) {
        hm_npz *z;
        hm_array e = {0}, l = {0};
        rc = hm_npz_open(raw, &z);
        if (!rc) {
            rc = hm_npz_get(z, "enc", &e);
            if (!rc) rc = hm_npz_get(z, "logits", &l);
            hm_npz_close(z);
        }
        if (!rc && (e.dtype != HM_DT_F32 || l.dtype != HM_DT_F32 || e.numel != HM_HT_ANCHORS * 4 ||
                    l.numel != HM_HT_ANCHORS * 8))
            rc = hm_err(HM_E_SHAPE, "%s: enc must be %d and logits %d float32 values", raw, HM_HT_ANCHORS * 4,
                        HM_HT_ANCHORS * 8);
        if (!rc) {
            hm_ht_decode(m, e.data, l.data, det);
            rc = dump(out, NULL, e.data, l.data, &o);
        }
        hm_array_free(&e);
        hm_array_free(&l);
        hm_ht_state_free(s);
        hm_ht_model_free(m);
        return rc ? fail() : 0;
    }
    hm_image img = {0, 0, NULL};
    hm_pool *pool = threads > 1 ? hm_pool_create(threads) : NULL;
    rc = hm_image_load(image, &img);
    hm_ht_box props[HM_HT_MAX_OUT];
    hm_ht_stats st = {0, 0, 0};
    int n = 0;
    double *tot = calloc((size_t)repeat, sizeof *tot);
    for (int r = 0; r < repeat && !rc; r++) {
        const double t0 = 1e3 * hm_now();
        rc = hm_ht_run(s, img.rgb, img.w, img.h, &o, pool, props, &n, &st);
        tot[r] = 1e3 * hm_now() - t0;
    }
    if (!rc && out) {
        /* the network's input again (the run state's arena reuses it) */
        static float pre[HM_HT_SIZE * HM_HT_SIZE * 3];
        float mul, sub;
        hm_ht_prep_consts(m, &mul, &sub);
        hm_ht_preprocess(img.rgb, img.w, img.h, mul, sub, pre);
        hm_ht_decode(m, hm_ht_raw(s, 0), hm_ht_raw(s, 1), det);
        rc = dump(out, pre, hm_ht_raw(s, 0), hm_ht_raw(s, 1), &o);
    }
    if (!rc) {
        const double last = tot[repeat - 1];
        qsort(tot, (size_t)repeat, sizeof *tot, cmp_d);
        printf("{\"image\": {\"width\": %d, \"height\": %d}, \"proposals\": [", img.w, img.h);
        for (int i = 0; i < n; i++)
            printf("%s\n  {\"box\": [%.9g, %.9g, %.9g, %.9g], \"score\": %.9g, \"face\": %.9g, \"label\": %d}", i ? "," : "",
                   props[i].box[0], props[i].box[1], props[i].box[2], props[i].box[3], props[i].score, props[i].face,
                   props[i].label);
        printf("],\n \"timings_ms\": {\"prep\": %.3f, \"net\": %.3f, \"post\": %.3f, \"total\": %.3f, "
               "\"median_total\": %.3f}}\n", st.prep_ms, st.net_ms, st.post_ms, last, tot[repeat / 2]);
    }
    free(tot);
    hm_image_free(&img);
    hm_pool_destroy(pool);
    hm_ht_state_free(s);
    hm_ht_model_free(m);
    return rc ? fail() : 0;
}
