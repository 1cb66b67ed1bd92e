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

/* Merge priority: the full frame's palm hands, the tiles', the body
 * pass's, the proposals', the body keypoints' boxes. */
static int group(const hm_det_hand *h) {
    switch (h->pass) {
    case HM_DET_PASS_PALM: return h->level > 0;
    case HM_DET_PASS_BODY: return 2;
    case HM_DET_PASS_PROPOSAL: return 3;
    default: return 4;
    }
}

static double side_of(const float b[4]) { return fmax(b[2] - b[0], b[3] - b[1]); }

/* The palm centre: the mean of the wrist and the four finger bases. */
static void palm_centre(const hm_det_hand *h, double c[2]) {
    static const int k[5] = {0, 5, 9, 13, 17};
    c[0] = c[1] = 0.0;
    for (int i = 0; i < 5; i++) c[0] += h->landmarks[k[i]][0] / 5.0, c[1] += h->landmarks[k[i]][1] / 5.0;
}

int hm_det_same_hand(const hm_det_hand *a, const hm_det_hand *b, float same) {
    /* the body pass took them from one person's two wrists */
    if (a->person >= 0 && a->person == b->person && a->is_right != b->is_right) return 0;
    const double lim = same * fmax(side_of(a->box), side_of(b->box));
    if (!(hypot(a->wrist[0] - b->wrist[0], a->wrist[1] - b->wrist[1]) < lim)) return 0;
    if (a->pass == HM_DET_PASS_KEYPOINTS || b->pass == HM_DET_PASS_KEYPOINTS) return 1; /* a wrist only */
    double ca[2], cb[2];
    palm_centre(a, ca);
    palm_centre(b, cb);
    return hypot(ca[0] - cb[0], ca[1] - cb[1]) < lim;
}

int hm_det_merge(hm_det_hand *h, int n, float same, int *rep) {
    int *prio = rep + n; /* the second half of the scratch */
    int np = 0;
    for (int g = 0; g <= 4; g++)
        for (int i = 0; i < n; i++)
            if (group(&h[i]) == g) prio[np++] = i;
    for (int i = 0; i < n; i++) rep[i] = -1;
    for (int a = 0; a < np; a++) {
        const int i = prio[a];
        for (int b = 0; b < a && rep[i] < 0; b++) {
            const int j = prio[b];
            if (rep[j] >= 0 || !hm_det_same_hand(&h[j], &h[i], same)) continue;
            rep[i] = j;
            hm_det_hand *k = &h[j];
            k->levels |= h[i].levels;
            k->passes |= h[i].passes;
            /* a body hand merged into another: the person and its side (not
             * from a keypoint-only box: the hand stage did not confirm it) */
            if (k->person < 0 && h[i].person >= 0 && h[i].pass == HM_DET_PASS_BODY) {
                k->person = h[i].person;
                k->is_right = h[i].is_right;
            }
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
