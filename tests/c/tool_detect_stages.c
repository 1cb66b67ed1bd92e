/* tool_detect_stages IN.npz OUT.npz - the hand detector's pure stages
 * (detect/stages.h) on tensors given in IN.npz, for the tests that compare
 * them with the numpy reference. No model runs here. Every group of inputs
 * is optional; OUT.npz always holds "anchors" [2016,2].
 *
 *   image u8 [H,W,3], warp_rects f8 [N,5] (cx,cy,w,h,rot), warp_cfg i8 [N,3]
 *       (ow, oh, replicate)                          -> warp_<i> f4 [oh,ow,3]
 *   palm_raw_boxes f4 [P,2016,18], palm_raw_scores f4 [P,2016], palm_rois f8
 *       [P,5] (the pass's roi before letterboxing), palm_min f8 [1]
 *       -> dec_<p> f8 [n,20] (score, box 4, kp 14, anchor), nms_<p> [k,20],
 *          px_<p> f8 [k,19] (score, box 4, kp 14, image px), rect_<p> f8 [k,5]
 *   lm_raw f4 [Q,63], lm_rects f8 [Q,5] -> lm_proj f4 [Q,21,3], lm_box f4 [Q,4]
 *   sup_boxes f8 [C,4], sup_scores f8 [C], sup_levels i8 [C], sup_iou f8 [1]
 *       -> sup_order i8 [k], sup_levels_out i8 [k]
 *   mrg_boxes f4 [H,4], mrg_landmarks f4 [H,21,3], mrg_levels i8 [H], mrg_cfg f8 [1] (same_hand)
 *       -> mrg_index i8 [k], mrg_levels_out i8 [k]
 *   tile_cfg f8 [T,3] (n, side, overlap) -> tile_<t> f8 [k]
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/util.h"
#include "detect/stages.h"
#include "format/npy.h"
#define STAGE_TOOL "tool_detect_stages"
#include "stage_io.h"


static void do_warp(void) {
    hm_array img, rects, cfg;
    if (get("image", HM_DT_U8, &img) != 1 || get("warp_rects", HM_DT_F64, &rects) != 1 || get("warp_cfg", HM_DT_I64, &cfg) != 1)
        return;
    const int H = (int)img.shape[0], W = (int)img.shape[1];
    for (int64_t i = 0; i < rects.shape[0]; i++) {
        const int64_t *c = (const int64_t *)cfg.data + 3 * i;
        const hm_det_rect r = rect_of((const double *)rects.data + 5 * i);
        float *out = malloc(sizeof(float) * (size_t)(c[0] * c[1] * 3));
        hm_det_warp(img.data, W, H, &r, (int)c[0], (int)c[1], (int)c[2], out);
        char name[32];
        snprintf(name, sizeof name, "warp_%d", (int)i);
        put(name, HM_DT_F32, 3, (int64_t[]){c[1], c[0], 3}, out);
        free(out);
    }
    hm_array_free(&img);
    hm_array_free(&rects);
    hm_array_free(&cfg);
}

static void det_row(const hm_palm_det *d, double *r) {
    r[0] = d->score;
    for (int k = 0; k < 4; k++) r[1 + k] = d->box[k];
    for (int k = 0; k < HM_PALM_KP; k++) r[5 + 2 * k] = d->kp[k][0], r[6 + 2 * k] = d->kp[k][1];
    r[19] = d->anchor;
}

static void do_palm(const float a[HM_PALM_ANCHORS][2]) {
    hm_array rb, rs, rois, mn;
    if (get("palm_raw_boxes", HM_DT_F32, &rb) != 1 || get("palm_raw_scores", HM_DT_F32, &rs) != 1 ||
        get("palm_rois", HM_DT_F64, &rois) != 1 || get("palm_min", HM_DT_F64, &mn) != 1)
        return;
    static hm_palm_det dec[HM_PALM_ANCHORS], nms[HM_PALM_ANCHORS];
    static int idx[HM_PALM_ANCHORS];
    static double rows[HM_PALM_ANCHORS * 20], px[HM_PALM_ANCHORS * 19], rects[HM_PALM_ANCHORS * 5];
    for (int64_t p = 0; p < rb.shape[0]; p++) {
        const float *b = (const float *)rb.data + p * HM_PALM_ANCHORS * HM_PALM_COORDS;
        const float *s = (const float *)rs.data + p * HM_PALM_ANCHORS;
        const int nd = hm_palm_decode(b, s, a, (float)((double *)mn.data)[0], dec);
        const int nk = hm_palm_wnms(dec, nd, 0.3f, nms, idx);
        char name[32];
        for (int i = 0; i < nd; i++) det_row(&dec[i], rows + 20 * i);
        snprintf(name, sizeof name, "dec_%d", (int)p);
        put(name, HM_DT_F64, 2, (int64_t[]){nd, 20}, rows);
        for (int i = 0; i < nk; i++) det_row(&nms[i], rows + 20 * i);
        snprintf(name, sizeof name, "nms_%d", (int)p);
        put(name, HM_DT_F64, 2, (int64_t[]){nk, 20}, rows);
        float pad[4];
        const hm_det_rect lroi = hm_det_pad_roi(rect_of((const double *)rois.data + 5 * p), HM_PALM_SIZE, HM_PALM_SIZE, pad);
        for (int i = 0; i < nk; i++) {
            hm_palm_px q;
            hm_palm_to_image(&nms[i], &lroi, pad, &q);
            double *r = px + 19 * i;
            r[0] = q.score;
            for (int k = 0; k < 4; k++) r[1 + k] = q.box[k];
            for (int k = 0; k < HM_PALM_KP; k++) r[5 + 2 * k] = q.kp[k][0], r[6 + 2 * k] = q.kp[k][1];
            const hm_det_rect hr = hm_palm_hand_rect(&q);
            const double v[5] = {hr.cx, hr.cy, hr.w, hr.h, hr.rot};
            memcpy(rects + 5 * i, v, sizeof v);
        }
        snprintf(name, sizeof name, "px_%d", (int)p);
        put(name, HM_DT_F64, 2, (int64_t[]){nk, 19}, px);
        snprintf(name, sizeof name, "rect_%d", (int)p);
        put(name, HM_DT_F64, 2, (int64_t[]){nk, 5}, rects);
    }
    hm_array_free(&rb);
    hm_array_free(&rs);
    hm_array_free(&rois);
    hm_array_free(&mn);
}

static void do_landmarks(void) {
    hm_array raw, rects;
    if (get("lm_raw", HM_DT_F32, &raw) != 1 || get("lm_rects", HM_DT_F64, &rects) != 1) return;
    const int64_t q = raw.shape[0];
    float *proj = malloc(sizeof(float) * (size_t)(q * 63 + 1)), *box = malloc(sizeof(float) * (size_t)(q * 4 + 1));
    for (int64_t i = 0; i < q; i++) {
        float pad[4];
        const hm_det_rect r = hm_det_pad_roi(rect_of((const double *)rects.data + 5 * i), HM_LM_SIZE, HM_LM_SIZE, pad);
        float lm[HM_DET_LANDMARKS][3];
        hm_lm_project((const float *)raw.data + 63 * i, &r, pad, lm);
        memcpy(proj + 63 * i, lm, sizeof lm);
        hm_lm_box(lm, box + 4 * i);
    }
    put("lm_proj", HM_DT_F32, 3, (int64_t[]){q, 21, 3}, proj);
    put("lm_box", HM_DT_F32, 2, (int64_t[]){q, 4}, box);
    free(proj);
    free(box);
    hm_array_free(&raw);
    hm_array_free(&rects);
}

static void do_suppress(void) {
    hm_array b, s, l, thr;
    if (get("sup_boxes", HM_DT_F64, &b) != 1 || get("sup_scores", HM_DT_F64, &s) != 1 || get("sup_levels", HM_DT_I64, &l) != 1 ||
        get("sup_iou", HM_DT_F64, &thr) != 1)
        return;
    const int n = (int)b.shape[0];
    hm_palm_px *c = calloc((size_t)n + 1, sizeof *c);
    int *order = calloc((size_t)n + 1, sizeof *order);
    for (int i = 0; i < n; i++) {
        memcpy(c[i].box, (const double *)b.data + 4 * i, 4 * sizeof(double));
        c[i].score = ((const double *)s.data)[i];
        c[i].level = (int)((const int64_t *)l.data)[i];
        c[i].levels = 1u << c[i].level;
        c[i].seq = i;
    }
    const int k = hm_det_suppress(c, n, (float)((double *)thr.data)[0], order);
    int64_t *o = calloc((size_t)k + 1, sizeof *o), *lv = calloc((size_t)k + 1, sizeof *lv);
    for (int i = 0; i < k; i++) o[i] = order[i], lv[i] = c[order[i]].levels;
    put("sup_order", HM_DT_I64, 1, (int64_t[]){k}, o);
    put("sup_levels_out", HM_DT_I64, 1, (int64_t[]){k}, lv);
    free(c);
    free(order);
    free(o);
    free(lv);
    hm_array_free(&b);
    hm_array_free(&s);
    hm_array_free(&l);
    hm_array_free(&thr);
}

static void do_merge(void) {
    hm_array b, l, cfg, lm;
    if (get("mrg_boxes", HM_DT_F32, &b) != 1 || get("mrg_levels", HM_DT_I64, &l) != 1 || get("mrg_cfg", HM_DT_F64, &cfg) != 1 ||
        get("mrg_landmarks", HM_DT_F32, &lm) != 1)
        return;
    const int n = (int)b.shape[0];
    hm_det_hand *h = calloc((size_t)n + 1, sizeof *h);
    for (int i = 0; i < n; i++) {
        memcpy(h[i].box, (const float *)b.data + 4 * i, 4 * sizeof(float));
        memcpy(h[i].landmarks, (const float *)lm.data + 63 * i, 63 * sizeof(float));
        h[i].wrist[0] = h[i].landmarks[0][0], h[i].wrist[1] = h[i].landmarks[0][1];
        h[i].levels = (unsigned)((const int64_t *)l.data)[i];
        while (!((h[i].levels >> h[i].level) & 1u) && h[i].level < 31) h[i].level++; /* the level of its one bit */
        h[i].roi.cx = i; /* carries the index through */
        h[i].person = -1;
    }
    const double *c = cfg.data;
    int *rep = calloc(2 * (size_t)n + 1, sizeof *rep);
    const int k = hm_det_merge(h, n, (float)c[0], rep);
    free(rep);
    int64_t *o = calloc((size_t)k + 1, sizeof *o), *lv = calloc((size_t)k + 1, sizeof *lv);
    for (int i = 0; i < k; i++) o[i] = (int64_t)h[i].roi.cx, lv[i] = h[i].levels;
    put("mrg_index", HM_DT_I64, 1, (int64_t[]){k}, o);
    put("mrg_levels_out", HM_DT_I64, 1, (int64_t[]){k}, lv);
    free(h);
    free(o);
    free(lv);
    hm_array_free(&b);
    hm_array_free(&l);
    hm_array_free(&cfg);
    hm_array_free(&lm);
}

static void do_tiles(void) {
    hm_array cfg;
    if (get("tile_cfg", HM_DT_F64, &cfg) != 1) return;
    for (int64_t t = 0; t < cfg.shape[0]; t++) {
        const double *c = (const double *)cfg.data + 3 * t;
        double cs[64];
        const int k = hm_det_tile_axis((int)c[0], (int)c[1], c[2], cs, 64);
        char name[32];
        snprintf(name, sizeof name, "tile_%d", (int)t);
        put(name, HM_DT_F64, 1, (int64_t[]){k}, cs);
    }
    hm_array_free(&cfg);
}

int main(int argc, char **argv) {
    if (argc != 3) {
        fprintf(stderr, "usage: tool_detect_stages IN.npz OUT.npz\n");
        return 2;
    }
    if (hm_npz_open(argv[1], &in) || hm_npz_write_begin(argv[2], &wr)) {
        fprintf(stderr, "tool_detect_stages: %s\n", hm_errmsg());
        return 1;
    }
    static float anchors[HM_PALM_ANCHORS][2];
    hm_palm_anchors(anchors);
    put("anchors", HM_DT_F32, 2, (int64_t[]){HM_PALM_ANCHORS, 2}, anchors);
    do_warp();
    do_palm((const float(*)[2])anchors);
    do_landmarks();
    do_suppress();
    do_merge();
    do_tiles();
    hm_npz_close(in);
    if (hm_npz_write_finish(wr)) {
        fprintf(stderr, "tool_detect_stages: %s\n", hm_errmsg());
        return 1;
    }
    return 0;
}
