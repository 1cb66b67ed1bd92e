/* tool_body_stages IN.npz OUT.npz - the body pass's pure stages
 * (detect/body.h) on tensors given in IN.npz, for the tests that compare
 * them with tests/detect/body_reference.py. No model runs here. Every group
 * of inputs is optional; OUT.npz always holds "pose_anchors" [2254,2].
 *
 *   pose_raw_boxes f4 [2254,12], pose_raw_scores f4 [2254], pose_roi f8 [5]
 *       (the full frame before letterboxing), pose_min f8 [1]
 *       -> pdec f8 [n,14] (score, box 4, kp 8, anchor), pnms f8 [k,14],
 *          ppx f8 [k,13] (score, box 4, kp 8 in image px), prect f8 [k,5]
 *   plm_raw f4 [Q,195], plm_heat f4 [Q,64,64,39], plm_rects f8 [Q,5]
 *       -> plm_proj f4 [Q,39,5], plm_next f8 [Q,5]
 *   phand f4 [S,3,2] (wrist, pinky, index) -> phand_rect f8 [S,5], phand_big f8 [S,5]
 *   rc_raw f4 [S,4], rc_rects f8 [S,5] -> rc_out f8 [S,5]
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/util.h"
#include "detect/body.h"
#include "format/npy.h"
#define STAGE_TOOL "tool_body_stages"
#include "stage_io.h"


static void det_row(const hm_palm_det *d, double *r) {
    r[0] = d->score;
    for (int k = 0; k < 4; k++) r[1 + k] = d->box[k];
    for (int k = 0; k < HM_POSE_KP; k++) r[5 + 2 * k] = d->kp[k][0], r[6 + 2 * k] = d->kp[k][1];
    r[13] = d->anchor;
}

static void do_pose(const float a[HM_POSE_ANCHORS][2]) {
    hm_array rb, rs, roi, mn;
    if (get("pose_raw_boxes", HM_DT_F32, &rb) != 1 || get("pose_raw_scores", HM_DT_F32, &rs) != 1 ||
        get("pose_roi", HM_DT_F64, &roi) != 1 || get("pose_min", HM_DT_F64, &mn) != 1)
        return;
    static hm_palm_det dec[HM_POSE_ANCHORS], nms[HM_POSE_ANCHORS];
    static int idx[HM_POSE_ANCHORS];
    const int n = hm_pose_decode(rb.data, rs.data, a, (float)((double *)mn.data)[0], dec);
    const int k = hm_palm_wnms(dec, n, 0.3f, nms, idx);
    double *d = calloc((size_t)n + 1, 14 * sizeof *d), *q = calloc((size_t)k + 1, 14 * sizeof *q);
    double *px = calloc((size_t)k + 1, 13 * sizeof *px), *rc = calloc((size_t)k + 1, 5 * sizeof *rc);
    for (int i = 0; i < n; i++) det_row(&dec[i], d + 14 * i);
    float pad[4];
    const hm_det_rect l = hm_det_pad_roi(rect_of(roi.data), HM_POSE_SIZE, HM_POSE_SIZE, pad);
    for (int i = 0; i < k; i++) {
        det_row(&nms[i], q + 14 * i);
        hm_palm_px p;
        hm_palm_to_image(&nms[i], &l, pad, &p);
        double *r = px + 13 * i;
        r[0] = p.score;
        for (int j = 0; j < 4; j++) r[1 + j] = p.box[j];
        for (int j = 0; j < HM_POSE_KP; j++) r[5 + 2 * j] = p.kp[j][0], r[6 + 2 * j] = p.kp[j][1];
        const hm_det_rect pr = hm_rect_transform(hm_align_rect(p.kp[0][0], p.kp[0][1], p.kp[1][0], p.kp[1][1], 90.0),
                                                 1.25, 0.0, 0.0);
        rect_to(&pr, rc + 5 * i);
    }
    put("pdec", HM_DT_F64, 2, (int64_t[]){n, 14}, d);
    put("pnms", HM_DT_F64, 2, (int64_t[]){k, 14}, q);
    put("ppx", HM_DT_F64, 2, (int64_t[]){k, 13}, px);
    put("prect", HM_DT_F64, 2, (int64_t[]){k, 5}, rc);
    free(d), free(q), free(px), free(rc);
    hm_array_free(&rb), hm_array_free(&rs), hm_array_free(&roi), hm_array_free(&mn);
}

static void do_pose_landmarks(void) {
    hm_array raw, heat, rects;
    if (get("plm_raw", HM_DT_F32, &raw) != 1 || get("plm_heat", HM_DT_F32, &heat) != 1 ||
        get("plm_rects", HM_DT_F64, &rects) != 1)
        return;
    const int64_t q = raw.shape[0];
    float(*out)[HM_POSE_LM][5] = calloc((size_t)q + 1, sizeof *out);
    double *next = calloc((size_t)q + 1, 5 * sizeof *next);
    for (int64_t i = 0; i < q; i++) {
        float pad[4];
        const hm_det_rect l = hm_det_pad_roi(rect_of((const double *)rects.data + 5 * i), HM_POSE_LM_SIZE,
                                             HM_POSE_LM_SIZE, pad);
        hm_pose_project((const float *)raw.data + 195 * i,
                        (const float *)heat.data + (size_t)i * HM_POSE_HEATMAP * HM_POSE_HEATMAP * HM_POSE_LM, &l, pad,
                        out[i]);
        const hm_det_rect nr = hm_pose_next_roi((const float(*)[5])out[i]);
        rect_to(&nr, next + 5 * i);
    }
    put("plm_proj", HM_DT_F32, 3, (int64_t[]){q, HM_POSE_LM, 5}, out);
    put("plm_next", HM_DT_F64, 2, (int64_t[]){q, 5}, next);
    free(out), free(next);
    hm_array_free(&raw), hm_array_free(&heat), hm_array_free(&rects);
}

static void do_hands(void) {
    hm_array ph, rr, rrects;
    if (get("phand", HM_DT_F32, &ph) == 1) {
        const int64_t s = ph.shape[0];
        double *r = calloc((size_t)s + 1, 5 * sizeof *r), *b = calloc((size_t)s + 1, 5 * sizeof *b);
        for (int64_t i = 0; i < s; i++) {
            const float *p = (const float *)ph.data + 6 * i;
            const hm_det_rect hr = hm_pose_hand_rect(p, p + 2, p + 4);
            const hm_det_rect big = hm_rect_transform(hr, 2.7, 0.0, -0.1);
            rect_to(&hr, r + 5 * i);
            rect_to(&big, b + 5 * i);
        }
        put("phand_rect", HM_DT_F64, 2, (int64_t[]){s, 5}, r);
        put("phand_big", HM_DT_F64, 2, (int64_t[]){s, 5}, b);
        free(r), free(b);
        hm_array_free(&ph);
    }
    if (get("rc_raw", HM_DT_F32, &rr) == 1 && get("rc_rects", HM_DT_F64, &rrects) == 1) {
        const int64_t s = rr.shape[0];
        double *o = calloc((size_t)s + 1, 5 * sizeof *o);
        for (int64_t i = 0; i < s; i++) {
            float pad[4];
            const hm_det_rect l = hm_det_pad_roi(rect_of((const double *)rrects.data + 5 * i), HM_RECROP_SIZE,
                                                 HM_RECROP_SIZE, pad);
            const hm_det_rect r = hm_recrop_rect((const float *)rr.data + 4 * i, &l, pad);
            rect_to(&r, o + 5 * i);
        }
        put("rc_out", HM_DT_F64, 2, (int64_t[]){s, 5}, o);
        free(o);
        hm_array_free(&rr), hm_array_free(&rrects);
    }
}

int main(int argc, char **argv) {
    if (argc != 3) {
        fprintf(stderr, "usage: tool_body_stages IN.npz OUT.npz\n");
        return 2;
    }
    if (hm_npz_open(argv[1], &in) || hm_npz_write_begin(argv[2], &wr)) {
        fprintf(stderr, "tool_body_stages: %s\n", hm_errmsg());
        return 1;
    }
    static float anchors[HM_POSE_ANCHORS][2];
    hm_pose_anchors(anchors);
    put("pose_anchors", HM_DT_F32, 2, (int64_t[]){HM_POSE_ANCHORS, 2}, anchors);
    do_pose((const float(*)[2])anchors);
    do_pose_landmarks();
    do_hands();
    hm_npz_close(in);
    if (hm_npz_write_finish(wr)) {
        fprintf(stderr, "tool_body_stages: %s\n", hm_errmsg());
        return 1;
    }
    return 0;
}
