/* tiles.c - the multi-pass scheme's geometry: the tiles the image is cut
 * into for the palm passes, and the merge of the hands the passes found
 * (see detect.h). */
#include <math.h>

#include "detect/stages.h"

int hm_det_tile_axis(int n, int side, double overlap, double *c, int cap) {
    if (cap < 1) return 0;
    if (n <= side) {
        c[0] = n / 2.0;
        return 1;
    }
    const double step_max = side * (1.0 - overlap);
    int k = (int)ceil((double)(n - side) / step_max - 1e-9) + 1;
    if (k > cap) k = cap;
    const double step = (double)(n - side) / (k - 1);
    for (int i = 0; i < k; i++) c[i] = side / 2.0 + i * step;
    return k;
}

static int same_hand(const float fa[4], const float fb[4], float merge_iou, float merge_contain) {
    const double a[4] = {fa[0], fa[1], fa[2], fa[3]}, b[4] = {fb[0], fb[1], fb[2], fb[3]};
    const double iw = fmin(a[2], b[2]) - fmax(a[0], b[0]), ih = fmin(a[3], b[3]) - fmax(a[1], b[1]);
    const double inter = (iw > 0 ? iw : 0) * (ih > 0 ? ih : 0);
    const double aa = (a[2] - a[0]) * (a[3] - a[1]), ab = (b[2] - b[0]) * (b[3] - b[1]);
    const double uni = aa + ab - inter, mn = fmin(aa, ab);
    const double iou = uni > 0 ? inter / uni : 0.0, cont = mn > 0 ? inter / mn : 0.0;
    return iou > merge_iou || cont > merge_contain;
}

int hm_det_prior(const hm_palm_det *d, int n, const hm_det_rect *roi, const float pad[4], const hm_palm_px *found,
                 int nfound, float mask_iou, const hm_palm_px *c, const int *hidx, int nh, float contain,
                 float (*pts)[2]) {
    int np = 0;
    for (int i = 0; i < n; i++) {
        hm_palm_px p;
        hm_palm_to_image(&d[i], roi, pad, &p);
        int masked = 0;
        for (int k = 0; k < nfound && !masked; k++) masked = hm_det_iou_px(p.box, found[k].box) > mask_iou;
        if (masked || hm_det_in_palm(p.box, c, hidx, nh, contain) >= 0) continue;
        pts[np][0] = (float)(0.5 * (p.box[0] + p.box[2]));
        pts[np][1] = (float)(0.5 * (p.box[1] + p.box[3]));
        np++;
    }
    return np;
}

static int nearest(const double *c, int n, double v) {
    int best = 0;
    for (int i = 1; i < n; i++)
        if (fabs(v - c[i]) < fabs(v - c[best])) best = i;
    return best;
}

int hm_det_tiles_wanted(const float (*pts)[2], int n, const double *cx, int nx, const double *cy, int ny, double side,
                        unsigned char *wanted) {
    int set = 0;
    for (int i = 0; i < nx * ny; i++) wanted[i] = 0;
    for (int i = 0; i < n; i++) {
        const double x = pts[i][0], y = pts[i][1];
        const int ix = nearest(cx, nx, x), iy = nearest(cy, ny, y);
        if (!(x >= cx[ix] - side / 2 && x < cx[ix] + side / 2 && y >= cy[iy] - side / 2 && y < cy[iy] + side / 2))
            continue;
        set += !wanted[iy * nx + ix];
        wanted[iy * nx + ix] = 1;
    }
    return set;
}

int hm_det_in_palm(const double box[4], const hm_palm_px *c, const int *idx, int n, float contain) {
    const double area = (box[2] - box[0]) * (box[3] - box[1]);
    if (!(area > 0)) return -1;
    for (int k = 0; k < n; k++) {
        const double *b = c[idx[k]].box;
        const double iw = fmin(box[2], b[2]) - fmax(box[0], b[0]), ih = fmin(box[3], b[3]) - fmax(box[1], b[1]);
        if (iw > 0 && ih > 0 && iw * ih / area >= contain) return k;
    }
    return -1;
}

static double box_iou(const float a[4], const float b[4]) {
    const double iw = fmin(a[2], b[2]) - fmax(a[0], b[0]), ih = fmin(a[3], b[3]) - fmax(a[1], b[1]);
    const double inter = (iw > 0 ? iw : 0) * (ih > 0 ? ih : 0);
    const double uni = (double)(a[2] - a[0]) * (a[3] - a[1]) + (double)(b[2] - b[0]) * (b[3] - b[1]) - inter;
    return uni > 0 ? inter / uni : 0.0;
}

/* 0 the full frame's palm hands, 1 the tiles', 2 the body pass's (with
 * landmarks or, last, its keypoint-only boxes) */
static int group(const hm_det_hand *h) { return h->pass != HM_DET_PASS_PALM ? 2 : h->level > 0; }

int hm_det_merge(hm_det_hand *h, int n, float merge_iou, float merge_contain, int *rep) {
    for (int i = 0; i < n; i++) rep[i] = -1;
    /* repeats within the full frame's hands and within the tiles' */
    for (int i = 0; i < n; i++) {
        if (group(&h[i]) == 2) continue;
        for (int j = 0; j < i && rep[i] < 0; j++)
            if (rep[j] < 0 && group(&h[j]) == group(&h[i]) && same_hand(h[j].box, h[i].box, merge_iou, merge_contain))
                rep[i] = j;
    }
    /* a full-frame hand absorbs the tile hand repeating it best (one: the
     * tile hands left are distinct, so a second one is another hand) and
     * keeps its own landmarks: MediaPipe's pass, the more faithful crop */
    for (int i = 0; i < n; i++) {
        if (rep[i] >= 0 || group(&h[i]) != 0) continue;
        int best = -1;
        double bv = -1.0;
        for (int j = 0; j < n; j++) {
            if (rep[j] >= 0 || group(&h[j]) != 1) continue;
            const double v = box_iou(h[i].box, h[j].box);
            if (v > merge_iou && v > bv) bv = v, best = j;
        }
        if (best >= 0) rep[best] = i;
    }
    /* a body hand repeating any hand kept before it joins that one */
    for (int i = 0; i < n; i++) {
        if (group(&h[i]) != 2) continue;
        for (int j = 0; j < i && rep[i] < 0; j++)
            if (rep[j] < 0 && same_hand(h[j].box, h[i].box, merge_iou, merge_contain)) rep[i] = j;
    }
    for (int i = 0; i < n; i++) {
        if (rep[i] < 0) continue;
        int r = rep[i];
        while (rep[r] >= 0) r = rep[r]; /* a tile hand's keeper may itself be absorbed */
        hm_det_hand *k = &h[r];
        k->levels |= h[i].levels;
        k->passes |= h[i].passes;
        /* a body hand merged into a palm hand: the person and its side (not
         * from a keypoint-only box: the hand stage did not confirm it) */
        if (k->person < 0 && h[i].person >= 0 && h[i].pass == HM_DET_PASS_BODY) {
            k->person = h[i].person;
            k->is_right = h[i].is_right;
        }
    }
    int nout = 0;
    for (int i = 0; i < n; i++) {
        if (rep[i] >= 0) continue;
        if (nout != i) h[nout] = h[i];
        nout++;
    }
    return nout;
}
