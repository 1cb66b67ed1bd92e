/* palm.c - palm detector post-processing: anchors, box decoding, weighted
 * NMS, letterbox removal, palm -> hand rectangle. Follows MediaPipe's
 * palm_detection_cpu.pbtxt and palm_detection_detection_to_roi.pbtxt. */
#include <math.h>
#include <stdlib.h>

#include "detect/stages.h"

int hm_ssd_anchors(const int *grid, const int *per_cell, int ngrids, float (*a)[2]) {
    int k = 0;
    for (int g = 0; g < ngrids; g++)
        for (int y = 0; y < grid[g]; y++)
            for (int x = 0; x < grid[g]; x++)
                for (int j = 0; j < per_cell[g]; j++) {
                    a[k][0] = (x + 0.5f) * 1.0f / grid[g];
                    a[k][1] = (y + 0.5f) * 1.0f / grid[g];
                    k++;
                }
    return k;
}

void hm_palm_anchors(float a[HM_PALM_ANCHORS][2]) {
    /* strides 8, 16, 16, 16: layers of equal stride share one grid; each
     * layer adds 2 anchors per cell (aspect 1 and the interpolated scale) */
    static const int grid[2] = {24, 12}, per_cell[2] = {2, 6};
    hm_ssd_anchors(grid, per_cell, 2, a);
}

int hm_ssd_decode(const float *rb, const float *rs, const float (*a)[2], int nanchors, int ncoords, int size,
                  int nkp, float min_score, hm_palm_det *out) {
    const float s = (float)size;
    int n = 0;
    for (int i = 0; i < nanchors; i++) {
        float sc = rs[i];
        sc = sc < -100.0f ? -100.0f : sc;
        sc = sc > 100.0f ? 100.0f : sc;
        sc = 1.0f / (1.0f + expf(-sc));
        if (!(sc >= min_score)) continue;
        const float *r = rb + (size_t)i * ncoords;
        const float xc = r[0] / s + a[i][0], yc = r[1] / s + a[i][1];
        const float w = r[2] / s, h = r[3] / s;
        hm_palm_det *d = &out[n];
        d->box[0] = xc - w / 2.0f;
        d->box[1] = yc - h / 2.0f;
        d->box[2] = xc + w / 2.0f;
        d->box[3] = yc + h / 2.0f;
        /* the calculator drops negative (or NaN) sizes */
        if (!(d->box[2] - d->box[0] >= 0.0f) || !(d->box[3] - d->box[1] >= 0.0f)) continue;
        d->score = sc;
        d->anchor = i;
        for (int k = 0; k < HM_PALM_KP; k++) {
            d->kp[k][0] = k < nkp ? r[4 + 2 * k] / s + a[i][0] : 0.0f;
            d->kp[k][1] = k < nkp ? r[5 + 2 * k] / s + a[i][1] : 0.0f;
        }
        n++;
    }
    return n;
}

int hm_palm_decode(const float *rb, const float *rs, const float a[HM_PALM_ANCHORS][2], float min_score,
                   hm_palm_det *out) {
    return hm_ssd_decode(rb, rs, a, HM_PALM_ANCHORS, HM_PALM_COORDS, HM_PALM_SIZE, HM_PALM_KP, min_score, out);
}

float hm_det_iou(const float a[4], const float b[4]) {
    if (b[0] > a[2] || b[2] < a[0] || b[1] > a[3] || b[3] < a[1]) return 0.0f;
    const float iw = fminf(a[2], b[2]) - fmaxf(a[0], b[0]);
    const float ih = fminf(a[3], b[3]) - fmaxf(a[1], b[1]);
    const float inter = iw * ih;
    const float uni = (a[2] - a[0]) * (a[3] - a[1]) + (b[2] - b[0]) * (b[3] - b[1]) - inter;
    return uni > 0.0f ? inter / uni : 0.0f;
}

/* qsort context: C11 has no qsort_r, so the scores travel in the keys */
typedef struct {
    float score;
    int i;
} score_key;

static int by_score_desc(const void *pa, const void *pb) {
    const score_key *a = pa, *b = pb;
    if (a->score != b->score) return a->score > b->score ? -1 : 1;
    return (a->i > b->i) - (a->i < b->i); /* ties: anchor order (std::sort would be unstable) */
}

int hm_palm_wnms(const hm_palm_det *d, int n, float thr, hm_palm_det *out, int *idx) {
    if (n <= 0) return 0;
    score_key *keys = (score_key *)(void *)out; /* out is at least n detections: ample room */
    for (int i = 0; i < n; i++) keys[i] = (score_key){d[i].score, i};
    qsort(keys, (size_t)n, sizeof *keys, by_score_desc);
    for (int i = 0; i < n; i++) idx[i] = keys[i].i;
    int remain = n, nout = 0;
    while (remain > 0) {
        const hm_palm_det *top = &d[idx[0]];
        hm_palm_det wd = *top;
        float tot = 0, bx[4] = {0, 0, 0, 0}, kp[HM_PALM_KP][2] = {{0}};
        int rest = 0;
        for (int j = 0; j < remain; j++) {
            const hm_palm_det *c = &d[idx[j]];
            if (hm_det_iou(c->box, top->box) > thr) {
                tot += c->score;
                for (int k = 0; k < 4; k++) bx[k] += c->box[k] * c->score;
                for (int k = 0; k < HM_PALM_KP; k++) {
                    kp[k][0] += c->kp[k][0] * c->score;
                    kp[k][1] += c->kp[k][1] * c->score;
                }
            } else {
                idx[rest++] = idx[j]; /* compacts in place: rest <= j */
            }
        }
        /* the top box always overlaps itself, so tot > 0 */
        for (int k = 0; k < 4; k++) wd.box[k] = bx[k] / tot;
        for (int k = 0; k < HM_PALM_KP; k++) {
            wd.kp[k][0] = kp[k][0] / tot;
            wd.kp[k][1] = kp[k][1] / tot;
        }
        out[nout++] = wd;
        if (rest == remain) break; /* nothing absorbed (a NaN box): stop as the calculator does */
        remain = rest;
    }
    return nout;
}

hm_det_rect hm_det_pad_roi(hm_det_rect r, int ow, int oh, float pad[4]) {
    const float ta = (float)oh / (float)ow, ra = (float)r.h / (float)r.w;
    float hp = 0.0f, vp = 0.0f;
    if (ta > ra) {
        r.h = r.w * ta;
        vp = (1.0f - ra / ta) / 2.0f;
    } else {
        r.w = r.h / ta;
        hp = (1.0f - ta / ra) / 2.0f;
    }
    pad[0] = pad[2] = hp;
    pad[1] = pad[3] = vp;
    return r;
}

void hm_palm_to_image(const hm_palm_det *d, const hm_det_rect *roi, const float pad[4], hm_palm_px *o) {
    /* letterbox removal: tensor units -> units of the un-padded roi */
    const double sx = 1.0 - pad[0] - pad[2], sy = 1.0 - pad[1] - pad[3];
    const double uw = roi->w * sx, uh = roi->h * sy;
    const double x0 = roi->cx - uw / 2, y0 = roi->cy - uh / 2;
#define PX(u) (x0 + (((double)(u) - pad[0]) / sx) * uw)
#define PY(v) (y0 + (((double)(v) - pad[1]) / sy) * uh)
    o->score = d->score;
    o->box[0] = PX(d->box[0]);
    o->box[1] = PY(d->box[1]);
    o->box[2] = PX(d->box[2]);
    o->box[3] = PY(d->box[3]);
    for (int k = 0; k < HM_PALM_KP; k++) {
        o->kp[k][0] = PX(d->kp[k][0]);
        o->kp[k][1] = PY(d->kp[k][1]);
    }
#undef PX
#undef PY
    o->level = 0;
    o->levels = 0;
}

static double normalize_radians(double a) { return a - 2 * M_PI * floor((a + M_PI) / (2 * M_PI)); }

hm_det_rect hm_palm_hand_rect(const hm_palm_px *p) {
    const double w = p->box[2] - p->box[0], h = p->box[3] - p->box[1];
    double cx = p->box[0] + w / 2, cy = p->box[1] + h / 2;
    const double dx = p->kp[2][0] - p->kp[0][0], dy = p->kp[2][1] - p->kp[0][1];
    const double rot = normalize_radians(M_PI / 2 - atan2(-dy, dx));
    /* RectTransformation: shift_y -0.5 of the height along the rotated y */
    const double shift_y = -0.5, scale = 2.6;
    if (rot == 0.0) {
        cy += h * shift_y;
    } else {
        cx += -h * shift_y * sin(rot);
        cy += h * shift_y * cos(rot);
    }
    const double side = (w > h ? w : h) * scale;
    return (hm_det_rect){cx, cy, side, side, rot};
}

double hm_det_iou_px(const double a[4], const double b[4]) {
    const double iw = fmin(a[2], b[2]) - fmax(a[0], b[0]), ih = fmin(a[3], b[3]) - fmax(a[1], b[1]);
    if (!(iw >= 0) || !(ih >= 0)) return 0.0;
    const double inter = iw * ih;
    const double uni = (a[2] - a[0]) * (a[3] - a[1]) + (b[2] - b[0]) * (b[3] - b[1]) - inter;
    return uni > 0 ? inter / uni : 0.0;
}

/* the full frame's palms first (a tile's repeat of one is not
 * landmarked: the full-frame crop is MediaPipe's own), then by score */
static int before(const hm_palm_px *a, const hm_palm_px *b) {
    if ((a->level == 0) != (b->level == 0)) return a->level == 0;
    if (a->score != b->score) return a->score > b->score;
    return a->seq < b->seq;
}

int hm_det_suppress(hm_palm_px *c, int n, float iou, int *order) {
    for (int i = 0; i < n; i++) { /* insertion sort: n is small (capped) */
        int j = i;
        while (j > 0 && before(&c[i], &c[order[j - 1]])) {
            order[j] = order[j - 1];
            j--;
        }
        order[j] = i;
    }
    int nk = 0;
    for (int k = 0; k < n; k++) {
        hm_palm_px *p = &c[order[k]];
        int rep = -1;
        for (int j = 0; j < nk && rep < 0; j++)
            if (hm_det_iou_px(c[order[j]].box, p->box) > iou) rep = j;
        if (rep < 0) order[nk++] = order[k];
        else c[order[rep]].levels |= p->levels;
    }
    return nk;
}
