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

int hm_det_merge(hm_det_hand *h, int n, float merge_iou, float merge_contain) {
    int nout = 0;
    for (int i = 0; i < n; i++) {
        int rep = -1;
        for (int j = 0; j < nout && rep < 0; j++)
            if (same_hand(h[j].box, h[i].box, merge_iou, merge_contain)) rep = j;
        if (rep >= 0) {
            h[rep].levels |= h[i].levels;
            h[rep].passes |= h[i].passes;
            /* a body hand merged into a palm hand: the person and its side */
            if (h[rep].person < 0 && h[i].person >= 0) {
                h[rep].person = h[i].person;
                h[rep].is_right = h[i].is_right;
            }
        } else {
            if (nout != i) h[nout] = h[i];
            nout++;
        }
    }
    return nout;
}
