/* test_detect.c - the hand detector's pure stages and configuration on
 * synthetic inputs (no model runs; tests/test_detect_*.py compare with the
 * reference on real tensors). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "check.h"
#include "detect/body.h"
#include "detect/stages.h"

static float anchors[HM_PALM_ANCHORS][2];
static float raw_boxes[HM_PALM_ANCHORS * HM_PALM_COORDS], raw_scores[HM_PALM_ANCHORS];
static hm_palm_det dec[HM_PALM_ANCHORS], nms[HM_PALM_ANCHORS];
static int idx[HM_PALM_ANCHORS];

static void test_anchors(void) {
    hm_palm_anchors(anchors);
    CHECK(fabsf(anchors[0][0] - 0.5f / 24) < 1e-7f && fabsf(anchors[1][0] - 0.5f / 24) < 1e-7f);
    CHECK(fabsf(anchors[2][0] - 1.5f / 24) < 1e-7f);       /* 2 per cell on the 24 grid */
    CHECK(fabsf(anchors[1151][1] - 23.5f / 24) < 1e-7f);
    CHECK(fabsf(anchors[1152][0] - 0.5f / 12) < 1e-7f && fabsf(anchors[1157][0] - 0.5f / 12) < 1e-7f);
    CHECK(fabsf(anchors[1158][0] - 1.5f / 12) < 1e-7f);    /* 6 per cell on the 12 grid */
    CHECK(fabsf(anchors[2015][0] - 11.5f / 12) < 1e-7f && fabsf(anchors[2015][1] - 11.5f / 12) < 1e-7f);
}

/* One palm at anchor i: box w x h (192-px units) offset (dx, dy), keypoint 2 above keypoint 0. */
static void put_palm(int i, float score, float dx, float dy, float w, float h) {
    float *r = raw_boxes + i * HM_PALM_COORDS;
    r[0] = dx, r[1] = dy, r[2] = w, r[3] = h;
    for (int k = 0; k < HM_PALM_KP; k++) r[4 + 2 * k] = dx, r[5 + 2 * k] = dy;
    r[5 + 0] = dy + 10; /* wrist below */
    r[5 + 4] = dy - 10; /* middle MCP above */
    raw_scores[i] = score;
}

static void test_decode_nms(void) {
    memset(raw_boxes, 0, sizeof raw_boxes);
    for (int i = 0; i < HM_PALM_ANCHORS; i++) raw_scores[i] = -5.0f;
    put_palm(300, 3.0f, 0, 0, 40, 40);
    put_palm(301, 1.0f, 4, 0, 40, 40);    /* same cell, overlapping: merged */
    put_palm(1500, 2.0f, 0, 0, 30, 30);   /* elsewhere */
    put_palm(1600, 1e9f, 0, 0, -5, 10);   /* negative size: dropped; score clipped */
    raw_scores[1700] = NAN;               /* NaN score: dropped */
    int n = hm_palm_decode(raw_boxes, raw_scores, anchors, 0.5f, dec);
    CHECK(n == 3);
    CHECK(dec[0].anchor == 300 && fabsf(dec[0].score - 1.0f / (1.0f + expf(-3.0f))) < 1e-7f);
    CHECK(fabsf(dec[0].box[2] - dec[0].box[0] - 40.0f / 192) < 1e-6f);
    const float w0 = dec[0].score, w1 = dec[1].score;
    int k = hm_palm_wnms(dec, n, 0.3f, nms, idx);
    CHECK(k == 2);
    CHECK(nms[0].anchor == 300 && nms[0].score == w0); /* the best keeps its score */
    const float want = (dec[0].box[0] * w0 + dec[1].box[0] * w1) / (w0 + w1);
    CHECK(fabsf(nms[0].box[0] - want) < 1e-6f);
    CHECK(nms[1].anchor == 1500);
    CHECK(hm_palm_wnms(dec, 0, 0.3f, nms, idx) == 0);
}

static void test_rects(void) {
    float pad[4];
    hm_det_rect r = hm_det_pad_roi((hm_det_rect){400, 300, 800, 600, 0}, 192, 192, pad);
    CHECK(r.w == 800 && r.h == 800 && pad[0] == 0 && fabsf(pad[1] - 0.125f) < 1e-7f);
    r = hm_det_pad_roi((hm_det_rect){300, 400, 600, 800, 0}, 192, 192, pad);
    CHECK(r.w == 800 && r.h == 800 && fabsf(pad[0] - 0.125f) < 1e-7f && pad[1] == 0);

    /* a palm box in tensor units on the letterboxed 800x600 frame */
    hm_palm_det d = {0.9f, {0.25f, 0.25f, 0.5f, 0.5f}, {{0}}, 0};
    d.kp[0][0] = 0.375f, d.kp[0][1] = 0.45f; /* wrist below */
    d.kp[2][0] = 0.375f, d.kp[2][1] = 0.30f; /* fingers up */
    r = hm_det_pad_roi((hm_det_rect){400, 300, 800, 600, 0}, 192, 192, pad);
    hm_palm_px p;
    hm_palm_to_image(&d, &r, pad, &p);
    CHECK(fabs(p.box[0] - 200) < 1e-9 && fabs(p.box[1] - 100) < 1e-9 && fabs(p.box[3] - 300) < 1e-9);
    hm_det_rect hr = hm_palm_hand_rect(&p);
    CHECK(fabs(hr.rot) < 1e-12);                        /* upright hand: no rotation */
    CHECK(fabs(hr.w - 2.6 * 200) < 1e-9 && hr.w == hr.h);
    CHECK(fabs(hr.cy - (200 - 100)) < 1e-9 && fabs(hr.cx - 300) < 1e-9); /* shifted up half the box */
    /* fingers pointing right: rotation +90 degrees, shift towards +x */
    p.kp[2][0] = p.kp[0][0] + 50, p.kp[2][1] = p.kp[0][1];
    hr = hm_palm_hand_rect(&p);
    CHECK(fabs(hr.rot - M_PI / 2) < 1e-12 && fabs(hr.cx - (300 + 100)) < 1e-9 && fabs(hr.cy - 200) < 1e-9);

    /* projection: the crop centre maps to the roi centre; +u along the rotated x */
    float raw[63], lm[HM_DET_LANDMARKS][3];
    for (int i = 0; i < 21; i++) raw[3 * i] = 112, raw[3 * i + 1] = 112, raw[3 * i + 2] = 0;
    raw[3] = 224, raw[5] = 224 * 0.4f;
    const float zero[4] = {0, 0, 0, 0};
    const hm_det_rect roi = {100, 50, 80, 80, M_PI / 2};
    hm_lm_project(raw, &roi, zero, lm);
    CHECK(fabsf(lm[0][0] - 100) < 1e-4f && fabsf(lm[0][1] - 50) < 1e-4f);
    CHECK(fabsf(lm[1][0] - 100) < 1e-4f && fabsf(lm[1][1] - 90) < 1e-4f && fabsf(lm[1][2] - 80) < 1e-4f);
    float box[4];
    hm_lm_box(lm, box);
    CHECK(box[1] <= 50.001f && box[3] >= 89.999f);
}

static void test_warp(void) {
    const int W = 40, H = 30;
    uint8_t *img = malloc((size_t)W * H * 3);
    for (int i = 0; i < W * H * 3; i++) img[i] = 200;
    float *out = malloc(sizeof(float) * 16 * 16 * 3);
    /* inside the image: constant; outside with a zero border: zero */
    hm_det_rect r = {20, 15, 10, 10, 0.3};
    hm_det_warp(img, W, H, &r, 16, 16, 0, out);
    int ok = 1;
    for (int i = 0; i < 16 * 16 * 3; i++) ok &= out[i] == 200.0f * (1.0f / 255.0f); /* convertTo: v * (1/255) */
    CHECK(ok);
    r = (hm_det_rect){-100, -100, 10, 10, 0};
    hm_det_warp(img, W, H, &r, 16, 16, 0, out);
    ok = 1;
    for (int i = 0; i < 16 * 16 * 3; i++) ok &= out[i] == 0.0f;
    CHECK(ok);
    hm_det_warp(img, W, H, &r, 16, 16, 1, out); /* replicate: the edge colour */
    ok = 1;
    for (int i = 0; i < 16 * 16 * 3; i++) ok &= out[i] == 200.0f * (1.0f / 255.0f); /* convertTo: v * (1/255) */
    CHECK(ok);
    /* a horizontal ramp sampled at integer positions is exact */
    for (int y = 0; y < H; y++)
        for (int x = 0; x < W; x++)
            for (int c = 0; c < 3; c++) img[(y * W + x) * 3 + c] = (uint8_t)(x * 5);
    r = (hm_det_rect){8, 8, 16, 16, 0}; /* tensor pixel u samples x = u */
    hm_det_warp(img, W, H, &r, 16, 16, 0, out);
    CHECK(out[(3 * 16 + 7) * 3] == 35.0f * (1.0f / 255.0f));
    /* huge coordinates do not overflow */
    r = (hm_det_rect){1e12, -1e12, 1e9, 1e9, 1.0};
    hm_det_warp(img, W, H, &r, 16, 16, 1, out);
    CHECK(out[0] >= 0.0f && out[0] <= 1.0f);
    free(img);
    free(out);
}

static void test_tiles_merge(void) {
    double c[64];
    CHECK(hm_det_tile_axis(100, 200, 0.25, c, 64) == 1 && c[0] == 50);
    CHECK(hm_det_tile_axis(200, 200, 0.25, c, 64) == 1 && c[0] == 100);
    const int k = hm_det_tile_axis(848, 212, 0.25, c, 64); /* step <= 159 */
    CHECK(k == 5 && c[0] == 106 && fabs(c[4] - (848 - 106)) < 1e-9 && c[1] - c[0] <= 159);
    CHECK(hm_det_tile_axis(848, 212, 0.25, c, 3) == 3);

    /* the prior: each point asks for the one tile it lies most centrally in,
     * and none when it lies outside that tile */
    {
        const double tx[3] = {50, 120, 190}, ty[2] = {50, 110}; /* side 100 */
        const float pts[5][2] = {{84, 20}, {86, 20}, {85, 20}, {250, 40}, {189, 149}};
        unsigned char want[6];
        CHECK(hm_det_tiles_wanted(pts, 1, tx, 3, ty, 2, 100, want) == 1 && want[0] && !want[1]);
        CHECK(hm_det_tiles_wanted(pts + 1, 1, tx, 3, ty, 2, 100, want) == 1 && want[1] && !want[0]);
        CHECK(hm_det_tiles_wanted(pts + 2, 1, tx, 3, ty, 2, 100, want) == 1 && want[0]); /* a tie: the first */
        CHECK(hm_det_tiles_wanted(pts + 3, 1, tx, 3, ty, 2, 100, want) == 0);           /* outside its nearest */
        CHECK(hm_det_tiles_wanted(pts, 5, tx, 3, ty, 2, 100, want) == 3 && want[0] && want[1] && want[5] && !want[2]);
    }
    /* a tile palm mostly inside a full-frame hand's palm is that hand again */
    {
        hm_palm_px c[3];
        memset(c, 0, sizeof c);
        const double cb[3][4] = {{0, 0, 100, 100}, {500, 500, 600, 600}, {50, 0, 150, 100}};
        for (int i = 0; i < 3; i++) memcpy(c[i].box, cb[i], sizeof cb[i]);
        const int idx[2] = {1, 2}; /* the hands' palms: c[1], c[2] */
        const double in[4] = {60, 10, 100, 50}, half[4] = {0, 0, 100, 100}, off[4] = {700, 700, 720, 720};
        CHECK(hm_det_in_palm(in, c, idx, 2, 0.6f) == 1);   /* inside c[2] (k = 1), c[0] is not a hand's */
        CHECK(hm_det_in_palm(half, c, idx, 2, 0.6f) == -1 && hm_det_in_palm(half, c, idx, 2, 0.5f) == 1);
        CHECK(hm_det_in_palm(off, c, idx, 2, 0.0f) == -1 && hm_det_in_palm(in, c, idx, 0, 0.6f) == -1);
    }

    hm_palm_px p[4];
    memset(p, 0, sizeof p);
    const double boxes[4][4] = {{0, 0, 10, 10}, {1, 1, 11, 11}, {50, 50, 60, 60}, {0, 0, 10, 10}};
    const double scores[4] = {0.6, 0.9, 0.7, 0.9};
    for (int i = 0; i < 4; i++) {
        memcpy(p[i].box, boxes[i], sizeof boxes[i]);
        p[i].score = scores[i];
        p[i].level = i;
        p[i].levels = 1u << i;
        p[i].seq = i;
    }
    int order[4];
    const int nk = hm_det_suppress(p, 4, 0.5f, order);
    /* the full frame's palm (level 0) first though scored lower: the
     * tiles' repeats of it (1, 3) are not landmarked */
    CHECK(nk == 2 && order[0] == 0 && order[1] == 2);
    CHECK(p[0].levels == (1u | 2u | 8u) && p[2].levels == 4u);
    for (int i = 0; i < 4; i++) p[i].level = 1 + (i & 1), p[i].levels = 2u << (i & 1);
    CHECK(hm_det_suppress(p, 4, 0.5f, order) == 2 && order[0] == 1 && order[1] == 2); /* ties by arrival: 1 before 3 */
    CHECK(p[1].levels == (2u | 4u));

}

/* A synthetic hand: wrist at (x, y), pointing along angle a (radians),
 * `size` from the wrist to the middle fingertip; the finger bases at 0.45
 * of it, spread across; landmarks, box and wrist filled. */
static hm_det_hand synth_hand(double x, double y, double a, double size, int pass, int level, int person, int right) {
    hm_det_hand h;
    memset(&h, 0, sizeof h);
    const double ux = cos(a), uy = sin(a), vx = -uy, vy = ux;
    for (int f = 0; f < 5; f++)
        for (int j = 0; j < 4; j++) {
            const double along = size * (0.45 + 0.14 * j) * (f == 0 ? 0.7 : f == 2 ? 1.0 : 0.9);
            const double across = size * 0.12 * (f - 2);
            h.landmarks[1 + 4 * f + j][0] = (float)(x + along * ux + across * vx);
            h.landmarks[1 + 4 * f + j][1] = (float)(y + along * uy + across * vy);
        }
    h.landmarks[0][0] = (float)x, h.landmarks[0][1] = (float)y;
    hm_lm_box(h.landmarks, h.box);
    h.wrist[0] = (float)x, h.wrist[1] = (float)y;
    h.pass = pass;
    h.passes = 1u << pass;
    h.level = level;
    h.levels = pass == HM_DET_PASS_PALM ? 1u << level : 0;
    h.person = person;
    h.is_right = right;
    return h;
}

static double box_iou_d(const float *a, const float *b) {
    const double iw = fmin(a[2], b[2]) - fmax(a[0], b[0]), ih = fmin(a[3], b[3]) - fmax(a[1], b[1]);
    const double in = fmax(iw, 0) * fmax(ih, 0);
    return in / ((a[2] - a[0]) * (a[3] - a[1]) + (b[2] - b[0]) * (b[3] - b[1]) - in);
}

static void test_merge(void) {
    hm_det_hand h[8];
    int rep[16];
    /* two interlocked hands (wrists 120 px apart, fingers reaching into each
     * other's palm: boxes overlapping by IoU > 0.5), each seen by the palm
     * pass and by the body pass from its own wrist: two hands */
    h[0] = synth_hand(100, 200, 0.0, 160, HM_DET_PASS_PALM, 0, -1, 1);
    h[1] = synth_hand(220, 210, M_PI, 160, HM_DET_PASS_PALM, 0, -1, 0);
    h[2] = synth_hand(103, 198, 0.05, 150, HM_DET_PASS_BODY, 0, 0, 1);
    h[3] = synth_hand(217, 212, M_PI - 0.05, 150, HM_DET_PASS_BODY, 0, 0, 0);
    CHECK(box_iou_d(h[0].box, h[1].box) > 0.5);
    CHECK(hm_det_merge(h, 4, 0.25f, rep) == 2);
    CHECK(h[0].passes == 3u && h[1].passes == 3u && h[0].person == 0 && h[1].person == 0);
    CHECK(h[0].is_right == 1 && h[1].is_right == 0 && h[0].wrist[0] == 100 && h[1].wrist[0] == 220);
    /* one hand seen by three sources (full frame, a tile, the body pass, a
     * proposal; a few pixels apart): one hand, the full frame's landmarks,
     * every pass and level recorded; listed out of priority order */
    h[0] = synth_hand(302, 400, 1.0, 120, HM_DET_PASS_PROPOSAL, 0, -1, 1);
    h[1] = synth_hand(300, 403, 1.05, 118, HM_DET_PASS_PALM, 2, -1, 1);
    h[2] = synth_hand(300, 400, 1.02, 121, HM_DET_PASS_PALM, 0, -1, 1);
    h[3] = synth_hand(297, 399, 0.98, 125, HM_DET_PASS_BODY, 0, 1, 0);
    CHECK(hm_det_merge(h, 4, 0.25f, rep) == 1);
    CHECK(h[0].pass == HM_DET_PASS_PALM && h[0].level == 0 && h[0].levels == 5u && h[0].wrist[0] == 300);
    CHECK(h[0].passes == ((1u << HM_DET_PASS_PALM) | (1u << HM_DET_PASS_BODY) | (1u << HM_DET_PASS_PROPOSAL)));
    CHECK(h[0].person == 1 && h[0].is_right == 0); /* the body pass's side */
    /* a body hand from a person's other wrist whose box lies inside a palm
     * hand's box stays a hand of its own; the palm hand takes the person's
     * left from the body hand of its own wrist */
    h[0] = synth_hand(500, 500, -M_PI / 2, 300, HM_DET_PASS_PALM, 0, -1, 1);
    h[1] = synth_hand(505, 498, -M_PI / 2, 290, HM_DET_PASS_BODY, 0, 0, 0);
    h[2] = synth_hand(520, 420, -M_PI / 2, 80, HM_DET_PASS_BODY, 0, 0, 1);
    CHECK(h[2].box[0] > h[0].box[0] && h[2].box[2] < h[0].box[2] && h[2].box[1] > h[0].box[1] && h[2].box[3] < h[0].box[3]);
    CHECK(hm_det_merge(h, 3, 0.25f, rep) == 2 && h[0].person == 0 && h[0].is_right == 0 && h[1].is_right == 1);
    /* the same wrists from the same person's two sides are still two hands */
    h[0] = synth_hand(500, 500, 0, 100, HM_DET_PASS_BODY, 0, 2, 0);
    h[1] = synth_hand(500, 500, 0, 100, HM_DET_PASS_BODY, 0, 2, 1);
    CHECK(hm_det_merge(h, 2, 0.25f, rep) == 2);
    /* a keypoint-only box: its pose wrist on a landmarked hand's wrist is
     * that hand; the person's other wrist's box is another */
    h[0] = synth_hand(100, 100, 0, 100, HM_DET_PASS_PALM, 0, -1, 1);
    h[1] = synth_hand(105, 104, 0.3, 90, HM_DET_PASS_KEYPOINTS, 0, 3, 1);
    h[2] = synth_hand(160, 110, 0.3, 90, HM_DET_PASS_KEYPOINTS, 0, 3, 0);
    memset(h[1].landmarks, 0, sizeof h[1].landmarks);
    memset(h[2].landmarks, 0, sizeof h[2].landmarks);
    CHECK(hm_det_merge(h, 3, 0.25f, rep) == 2 && h[0].passes == 5u && h[0].person == -1 && h[1].wrist[0] == 160);
    /* wrists close but palms apart (a hand and one crossing it from the
     * same side): two */
    h[0] = synth_hand(100, 100, 0, 100, HM_DET_PASS_PALM, 0, -1, 1);
    h[1] = synth_hand(110, 100, M_PI / 2, 100, HM_DET_PASS_PALM, 1, -1, 1);
    CHECK(hm_det_merge(h, 2, 0.25f, rep) == 2);
    CHECK(hm_det_same_hand(&h[0], &h[0], 0.25f) == 1);
}

static void test_body_stages(void) {
    static float a[HM_POSE_ANCHORS][2];
    hm_pose_anchors(a);
    CHECK(fabsf(a[0][0] - 0.5f / 28) < 1e-7f && fabsf(a[1][0] - 0.5f / 28) < 1e-7f && fabsf(a[2][0] - 1.5f / 28) < 1e-7f);
    CHECK(fabsf(a[1568][0] - 0.5f / 14) < 1e-7f && fabsf(a[1959][1] - 13.5f / 14) < 1e-7f);
    CHECK(fabsf(a[1960][0] - 0.5f / 7) < 1e-7f && fabsf(a[1965][0] - 0.5f / 7) < 1e-7f); /* 6 per cell */
    CHECK(fabsf(a[2253][0] - 6.5f / 7) < 1e-7f && fabsf(a[2253][1] - 6.5f / 7) < 1e-7f);
    /* a point straight above the centre at 90 degrees: upright, side twice the distance */
    hm_det_rect r = hm_align_rect(100, 200, 100, 190, 90.0);
    CHECK(r.cx == 100 && r.cy == 200 && fabs(r.w - 20) < 1e-12 && fabs(r.rot) < 1e-12);
    r = hm_rect_transform(r, 2.0, 0.0, -0.5);
    CHECK(fabs(r.cy - 190) < 1e-9 && fabs(r.w - 40) < 1e-9 && r.w == r.h);
    /* pointing right at -90 degrees: turned a quarter, the shift along the rotated y */
    r = hm_rect_transform(hm_align_rect(0, 0, 10, 0, -90.0), 1.0, 0.0, -0.1);
    CHECK(fabs(r.rot + M_PI / 2) < 1e-9 && fabs(r.cx + 2.0) < 1e-9 && fabs(r.cy) < 1e-9);
    /* the hand rectangle from the pose: centre (2 index + pinky) / 3, wrist below it */
    const float wr[2] = {50, 100}, pk[2] = {47, 70}, ix[2] = {51.5f, 70};
    r = hm_pose_hand_rect(wr, pk, ix);
    CHECK(fabs(r.cx - 50) < 1e-5 && fabs(r.cy - 70) < 1e-5 && fabs(r.w - 60) < 1e-4 && fabs(r.rot) < 1e-6);
    hm_body_opts bo;
    hm_body_opts_default(&bo);
    CHECK(hm_body_opts_check(&bo) == HM_OK && bo.max_persons == 1);
    bo.max_persons = HM_BODY_MAX_PERSONS + 1;
    CHECK(clean_error(hm_body_opts_check(&bo)));
    hm_body_opts_default(&bo);
    bo.min_pose = NAN;
    CHECK(clean_error(hm_body_opts_check(&bo)));
}

static void test_config(void) {
    hm_det_opts o;
    hm_det_opts_default(&o);
    CHECK(hm_det_opts_check(&o) == HM_OK && o.n_levels == 1 && o.levels[0] == 4.0f && o.tile_prior == 0.02f);
    CHECK(o.body == HM_DET_BODY_AUTO && o.body_persons == 1);
    o.body = 3;
    CHECK(clean_error(hm_det_opts_check(&o)));
    hm_det_opts_default(&o);
    o.body_persons = 0;
    CHECK(clean_error(hm_det_opts_check(&o)));
    hm_det_opts_default(&o);
    o.max_hands = 0;
    CHECK(clean_error(hm_det_opts_check(&o)));
    hm_det_opts_default(&o);
    o.tile_presence = NAN;
    CHECK(clean_error(hm_det_opts_check(&o)));
    hm_det_opts_default(&o);
    o.overlap = 0.95f;
    CHECK(clean_error(hm_det_opts_check(&o)));

    char dir[] = "/tmp/hm_det_dirXXXXXX", out[4096], path[4200];
    CHECK(mkdtemp(dir) != NULL);
    int rc = hm_det_find_dir(dir, 0, out, sizeof out);
    CHECK(rc == HM_E_IO && clean_error(rc) && strstr(hm_errmsg(), "get_detector.sh") && strstr(hm_errmsg(), dir));
    const char *files[2] = {"palm_detection_full.tflite", "hand_landmark_full.tflite"};
    for (int i = 0; i < 2; i++) {
        snprintf(path, sizeof path, "%s/%s", dir, files[i]);
        FILE *f = fopen(path, "wb");
        CHECK(f != NULL);
        if (f) fclose(f);
    }
    CHECK(hm_det_find_dir(dir, 0, out, sizeof out) == HM_OK && !strcmp(out, dir));
    CHECK(hm_det_find_dir(dir, 1, out, sizeof out) == HM_E_IO); /* lite files absent */
    CHECK(hm_det_find_dir(dir, 0, out, 4) == HM_E_ARG);
    /* the body models are looked for beside the hand models, by name */
    hm_body_model *bm = NULL;
    rc = hm_body_model_load(dir, &bm);
    CHECK(rc == HM_E_IO && bm == NULL && strstr(hm_errmsg(), "pose_detection.tflite") &&
          strstr(hm_errmsg(), "get_detector.sh"));
    /* search order: $HAMER_DETECTOR_DIR, then XDG_DATA_HOME/hamer/detector */
    char xdg[] = "/tmp/hm_det_xdgXXXXXX", sub[4200];
    CHECK(mkdtemp(xdg) != NULL);
    snprintf(sub, sizeof sub, "%s/hamer", xdg);
    mkdir(sub, 0700);
    snprintf(sub, sizeof sub, "%s/hamer/detector", xdg);
    CHECK(symlink(dir, sub) == 0);
    setenv("XDG_DATA_HOME", xdg, 1);
    setenv("HAMER_DETECTOR_DIR", "/nonexistent/hm_det", 1);
    CHECK(hm_det_find_dir(NULL, 0, out, sizeof out) == HM_OK && !strcmp(out, sub));
    setenv("HAMER_DETECTOR_DIR", dir, 1);
    CHECK(hm_det_find_dir(NULL, 0, out, sizeof out) == HM_OK && !strcmp(out, dir));
    unsetenv("HAMER_DETECTOR_DIR");
    setenv("XDG_DATA_HOME", "/nonexistent/hm_xdg", 1);
    rc = hm_det_find_dir(NULL, 0, out, sizeof out);
    if (access("/usr/local/share/hamer/detector/palm_detection_full.tflite", R_OK) != 0)
        CHECK(rc == HM_E_IO && strstr(hm_errmsg(), "/nonexistent/hm_xdg/hamer/detector") &&
              strstr(hm_errmsg(), "/usr/local/share/hamer/detector"));
    unlink(sub);
    snprintf(sub, sizeof sub, "%s/hamer", xdg);
    rmdir(sub);
    rmdir(xdg);
    for (int i = 0; i < 2; i++) {
        snprintf(path, sizeof path, "%s/%s", dir, files[i]);
        unlink(path);
    }
    rmdir(dir);
}

int main(void) {
    test_anchors();
    test_decode_nms();
    test_rects();
    test_warp();
    test_tiles_merge();
    test_merge();
    test_body_stages();
    test_config();
    return check_summary();
}
