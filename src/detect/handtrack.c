/* handtrack.c - the hand-box proposals (detect/handtrack.h): loading the
 * TF.js graph and its constants, the Preprocessor, the box decoding and
 * the NMS of the graph, run around the compiled network. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/util.h"
#include "detect/handtrack.h"
#include "format/image.h"
#include "tfjs/tfjs.h"
#include "tflite/tflite.h"

#define P "StatefulPartitionedCall/"
#define PRE_NODE P "map/TensorArrayV2Stack/TensorListStack"
#define PREP P "map/while/body/_410/map/while/Preprocessor/"
#define DEC P "Postprocessor/Decode/"
#define FOLD "ConstantFolding/" P "Postprocessor/Decode/"

/* The anchor constants of Postprocessor/Decode, by role. */
enum { A_YH10, A_XW10, A_YC, A_XC, A_H, A_W, A_N };

struct hm_ht_model {
    hm_tfl_model *net;
    float mul, sub;           /* Preprocessor: x * mul - sub */
    float th_scale, tw_scale; /* 1 / the box coder's h and w scale factors (0.2) */
    float half;               /* 0.5 */
    float *a[A_N];            /* HM_HT_ANCHORS each */
};

struct hm_ht_state {
    const hm_ht_model *m;
    hm_tfl_state *net;
    hm_ht_det det[HM_HT_ANCHORS];
    int order[HM_HT_ANCHORS], keep[HM_HT_MAX_OUT];
};

void hm_ht_opts_default(hm_ht_opts *o) {
    o->min_score = 0.2f;
    o->iou = 0.3f;
    o->max_out = 16;
}

void hm_ht_model_free(hm_ht_model *m) {
    if (!m) return;
    hm_tfl_free(m->net);
    for (int k = 0; k < A_N; k++) hm_free(m->a[k]);
    free(m);
}

/* A float constant of n values (n = 1: a scalar of any rank-0/1 shape). */
static int get_const(const hm_tfjs_graph *g, const char *name, int64_t n, const float **v) {
    hm_tfjs_const c;
    if (hm_tfjs_const_of(g, name, &c) || !c.f || c.numel != n)
        return hm_err(HM_E_FORMAT, "handtrack: not the hand-box detector (no %lld-value float constant '%s')",
                      (long long)n, name);
    *v = c.f;
    return HM_OK;
}

/* The wiring of Postprocessor/Decode and of the scores that the decoding
 * below re-states: node, then its inputs "name" or "name:port" (names
 * relative to DEC unless they start with P or FOLD's "C"). Checked at load,
 * so a graph whose names match but whose arithmetic differs is refused. */
static const char *const WIRING[][3] = {
    {"transpose", P "Postprocessor/Reshape_1", NULL},
    {P "Postprocessor/Reshape_1", P "concat", NULL},
    {"unstack", "transpose", NULL},
    {"mul_2", "unstack", "truediv"},
    {"mul_3", "unstack:1", "truediv_1"},
    {"add", "mul_2", "get_center_coordinates_and_sizes/add"},
    {"add_1", "mul_3", "get_center_coordinates_and_sizes/add_1"},
    {"truediv_2", "unstack:2", FOLD "truediv_2_recip"},
    {"truediv_3", "unstack:3", FOLD "truediv_3_recip"},
    {"Exp_1", "truediv_2", NULL},
    {"Exp", "truediv_3", NULL},
    {"mul_1", "Exp_1", "get_center_coordinates_and_sizes/sub_1"},
    {"mul", "Exp", "get_center_coordinates_and_sizes/sub"},
    {"truediv_4", "mul_1", FOLD "truediv_4_recip"},
    {"truediv_5", "mul", FOLD "truediv_5_recip"},
    {"truediv_6", "mul_1", FOLD "truediv_6_recip"},
    {"truediv_7", "mul", FOLD "truediv_7_recip"},
    {"sub", "add", "truediv_4"},
    {"sub_1", "add_1", "truediv_5"},
    {"add_2", "add", "truediv_6"},
    {"add_3", "add_1", "truediv_7"},
    {"stack", "sub", "sub_1"},
    {P "Postprocessor/convert_scores", P "concat_1", NULL},
    {P "Postprocessor/Slice", P "Postprocessor/convert_scores", P "Postprocessor/Slice/begin"},
};

static void full_name(const char *rel, char *buf, size_t cap) {
    snprintf(buf, cap, "%s%s", rel[0] == 'S' || rel[0] == 'C' ? "" : DEC, rel);
}

static int check_wiring(const hm_tfjs_graph *g, const char *path) {
    char name[256], want[256];
    for (size_t r = 0; r < sizeof WIRING / sizeof *WIRING; r++) {
        full_name(WIRING[r][0], name, sizeof name);
        const int node = hm_tfjs_find(g, name);
        for (int k = 0; k < 2 && node >= 0; k++) {
            if (!WIRING[r][k + 1]) continue;
            full_name(WIRING[r][k + 1], want, sizeof want);
            char *colon = strrchr(want, ':');
            int wport = 0, port = -1;
            if (colon && colon[1] >= '0' && colon[1] <= '9') wport = atoi(colon + 1), *colon = 0;
            const int src = hm_tfjs_node_input(g, node, k, &port);
            if (src < 0 || port != wport || strcmp(hm_tfjs_node_name(g, src), want))
                return hm_err(HM_E_FORMAT, "handtrack: %s: not the hand-box detector (%s input %d is not %s)", path,
                              name, k, WIRING[r][k + 1]);
        }
        if (node < 0) return hm_err(HM_E_FORMAT, "handtrack: %s: not the hand-box detector (no node %s)", path, name);
    }
    return HM_OK;
}

int hm_ht_model_load_file(const char *json_path, hm_ht_model **out) {
    if (!json_path || !out) return hm_err(HM_E_ARG, "hm_ht_model_load_file: NULL argument");
    *out = NULL;
    hm_tfjs_graph *g;
    int rc = hm_tfjs_load(json_path, &g);
    if (rc) return rc;
    hm_ht_model *m = calloc(1, sizeof *m);
    if (!m) {
        hm_tfjs_free(g);
        return hm_err(HM_E_NOMEM, "handtrack: out of memory");
    }
    const float *v = NULL;
    hm_tfjs_const rs;
    static const char *anchors[A_N] = {DEC "truediv", DEC "truediv_1", DEC "get_center_coordinates_and_sizes/add",
                                       DEC "get_center_coordinates_and_sizes/add_1",
                                       DEC "get_center_coordinates_and_sizes/sub_1",
                                       DEC "get_center_coordinates_and_sizes/sub"};
    if (!(rc = get_const(g, PREP "mul/x", 1, &v))) m->mul = v[0];
    if (!rc && !(rc = get_const(g, PREP "sub/y", 1, &v))) m->sub = v[0];
    if (!rc && !(rc = get_const(g, FOLD "truediv_2_recip", 1, &v))) m->th_scale = v[0];
    if (!rc && !(rc = get_const(g, FOLD "truediv_3_recip", 1, &v))) m->tw_scale = v[0];
    if (!rc && !(rc = get_const(g, FOLD "truediv_4_recip", 1, &v))) m->half = v[0];
    if (!rc && (hm_tfjs_const_of(g, PREP "ResizeImage/stack", &rs) || !rs.i32 || rs.numel != 2 ||
                rs.i32[0] != HM_HT_SIZE || rs.i32[1] != HM_HT_SIZE))
        rc = hm_err(HM_E_FORMAT, "handtrack: %s: the Preprocessor does not resize to %dx%d", json_path, HM_HT_SIZE,
                    HM_HT_SIZE);
    for (int k = 0; k < A_N && !rc; k++) {
        if ((rc = get_const(g, anchors[k], HM_HT_ANCHORS, &v))) break;
        if (!(m->a[k] = hm_alloc(HM_HT_ANCHORS * sizeof(float)))) rc = HM_E_NOMEM;
        else memcpy(m->a[k], v, HM_HT_ANCHORS * sizeof(float));
    }
    if (!rc) rc = check_wiring(g, json_path);
    /* the four halves of the box sizes, the score slice: background out */
    for (int k = 5; k <= 7 && !rc; k++) {
        char nm[160];
        snprintf(nm, sizeof nm, FOLD "truediv_%d_recip", k);
        if (!(rc = get_const(g, nm, 1, &v)) && v[0] != m->half)
            rc = hm_err(HM_E_FORMAT, "handtrack: %s: %s is %g, not %g", json_path, nm, v[0], m->half);
    }
    if (!rc && (hm_tfjs_const_of(g, P "Postprocessor/Slice/begin", &rs) || !rs.i32 || rs.numel != 3 ||
                rs.i32[0] != 0 || rs.i32[1] != 0 || rs.i32[2] != 1))
        rc = hm_err(HM_E_FORMAT, "handtrack: %s: the score slice does not drop exactly the background column", json_path);
    if (!rc) {
        const hm_tfl_shape in = {4, {1, HM_HT_SIZE, HM_HT_SIZE, 3}};
        const char *outs[2] = {P "concat", P "concat_1"};
        rc = hm_tfjs_compile(g, PRE_NODE, &in, outs, 2, &m->net);
    }
    hm_tfjs_free(g);
    if (!rc) {
        hm_tfl_shape s0, s1;
        hm_tfl_output_shape(m->net, 0, &s0);
        hm_tfl_output_shape(m->net, 1, &s1);
        if (s0.ndim != 3 || s0.dims[1] != HM_HT_ANCHORS || s0.dims[2] != 4 || s1.ndim != 3 ||
            s1.dims[1] != HM_HT_ANCHORS || s1.dims[2] != HM_HT_CLASSES + 1)
            rc = hm_err(HM_E_FORMAT, "handtrack: %s: the network's outputs are not [1,%d,4] and [1,%d,%d]", json_path,
                        HM_HT_ANCHORS, HM_HT_ANCHORS, HM_HT_CLASSES + 1);
    }
    if (rc) {
        hm_ht_model_free(m);
        return rc;
    }
    *out = m;
    return HM_OK;
}

int hm_ht_model_load(const char *dir, hm_ht_model **out) {
    if (!dir || !out) return hm_err(HM_E_ARG, "hm_ht_model_load: NULL argument");
    char p[4200];
    snprintf(p, sizeof p, "%s/handtrack.json", dir);
    return hm_ht_model_load_file(p, out);
}

int hm_ht_state_new(const hm_ht_model *m, hm_ht_state **out) {
    if (!m || !out) return hm_err(HM_E_ARG, "hm_ht_state_new: NULL argument");
    *out = NULL;
    hm_ht_state *s = hm_alloc(sizeof *s);
    if (!s) return HM_E_NOMEM;
    memset(s, 0, sizeof *s);
    s->m = m;
    int rc = hm_tfl_state_new(m->net, &s->net);
    if (rc) {
        hm_free(s);
        return rc;
    }
    *out = s;
    return HM_OK;
}

void hm_ht_state_free(hm_ht_state *s) {
    if (!s) return;
    hm_tfl_state_free(s->net);
    hm_free(s);
}

const float *hm_ht_raw(const hm_ht_state *s, int which) { return hm_tfl_output(s->net, which); }
void hm_ht_prep_consts(const hm_ht_model *m, float *mul, float *sub) {
    *mul = m->mul;
    *sub = m->sub;
}

/* Source index, floor, ceil and fraction of output position o along an axis
 * of n input pixels, as TF's legacy rule computes them (in double). */
static void legacy_coord(int o, double ratio, int n, int *lo, int *hi, double *f) {
    const double src = ratio * o;
    const double fl = floor(src);
    *lo = fl > 0 ? (int)fl : 0;
    *f = src - *lo;
    const double c = ceil(src);
    *hi = c < n - 1 ? (int)c : n - 1;
}

void hm_ht_preprocess(const uint8_t *rgb, int w, int h, float mul, float sub, float *out) {
    const double ry = (double)h / HM_HT_SIZE, rx = (double)w / HM_HT_SIZE;
    int x0[HM_HT_SIZE], x1[HM_HT_SIZE];
    double fx[HM_HT_SIZE];
    for (int c = 0; c < HM_HT_SIZE; c++) legacy_coord(c, rx, w, &x0[c], &x1[c], &fx[c]);
    for (int r = 0; r < HM_HT_SIZE; r++) {
        int y0, y1;
        double fy;
        legacy_coord(r, ry, h, &y0, &y1, &fy);
        const uint8_t *top = rgb + (size_t)y0 * w * 3, *bot = rgb + (size_t)y1 * w * 3;
        float *o = out + (size_t)r * HM_HT_SIZE * 3;
        for (int c = 0; c < HM_HT_SIZE; c++)
            for (int k = 0; k < 3; k++) {
                /* the graph scales before it resizes: each corner in float32 */
                const float tl = (float)top[x0[c] * 3 + k] * mul - sub, tr = (float)top[x1[c] * 3 + k] * mul - sub;
                const float bl = (float)bot[x0[c] * 3 + k] * mul - sub, br = (float)bot[x1[c] * 3 + k] * mul - sub;
                const double t = tl + (tr - (double)tl) * fx[c], b = bl + (br - (double)bl) * fx[c];
                o[c * 3 + k] = (float)(t + (b - t) * fy);
            }
    }
}

void hm_ht_decode(const hm_ht_model *m, const float *enc, const float *logits, hm_ht_det *d) {
    for (int i = 0; i < HM_HT_ANCHORS; i++) {
        const float *t = enc + 4 * i;
        /* the graph's float32 ops, in its order */
        const float yc = t[0] * m->a[A_YH10][i] + m->a[A_YC][i], xc = t[1] * m->a[A_XW10][i] + m->a[A_XC][i];
        const float hh = (float)exp((double)(t[2] * m->th_scale)) * m->a[A_H][i] * m->half;
        const float hw = (float)exp((double)(t[3] * m->tw_scale)) * m->a[A_W][i] * m->half;
        hm_ht_det *o = &d[i];
        o->yx[0] = yc - hh, o->yx[1] = xc - hw, o->yx[2] = yc + hh, o->yx[3] = xc + hw;
        o->score = -1.0f;
        o->label = 0;
        o->anchor = i;
        for (int k = 0; k < HM_HT_CLASSES; k++) {
            /* TF.js: 1 / (1 + exp(-x)) in double, stored as float32 */
            o->cls[k] = (float)(1.0 / (1.0 + exp(-(double)logits[(HM_HT_CLASSES + 1) * i + 1 + k])));
            if (k != HM_HT_FACE && o->cls[k] > o->score) o->score = o->cls[k], o->label = k;
        }
    }
}

/* TF.js's intersectionOverUnion: corners in any order, 0 for an empty box. */
static double iou_yx(const float *a, const float *b) {
    const double ay0 = fmin(a[0], a[2]), ax0 = fmin(a[1], a[3]), ay1 = fmax(a[0], a[2]), ax1 = fmax(a[1], a[3]);
    const double by0 = fmin(b[0], b[2]), bx0 = fmin(b[1], b[3]), by1 = fmax(b[0], b[2]), bx1 = fmax(b[1], b[3]);
    const double aa = (ay1 - ay0) * (ax1 - ax0), ab = (by1 - by0) * (bx1 - bx0);
    if (aa <= 0 || ab <= 0) return 0.0;
    const double in = fmax(fmin(ay1, by1) - fmax(ay0, by0), 0.0) * fmax(fmin(ax1, bx1) - fmax(ax0, bx0), 0.0);
    return in / (aa + ab - in);
}

static int by_score(const void *pa, const void *pb, void *ctx) {
    const hm_ht_det *d = ctx;
    const int a = *(const int *)pa, b = *(const int *)pb;
    if (d[a].score != d[b].score) return d[a].score > d[b].score ? -1 : 1;
    return a - b;
}

int hm_ht_nms(const hm_ht_det *d, int n, float min_score, float iou, int max_out, int *keep, int *order) {
    int nc = 0, nk = 0;
    for (int i = 0; i < n; i++)
        if (d[i].score > min_score) order[nc++] = i;
    qsort_r(order, (size_t)nc, sizeof *order, by_score, (void *)d);
    for (int k = 0; k < nc && nk < max_out; k++) {
        int drop = 0;
        for (int j = nk - 1; j >= 0 && !drop; j--) drop = iou_yx(d[order[k]].yx, d[keep[j]].yx) >= iou;
        if (!drop) keep[nk++] = order[k];
    }
    return nk;
}

int hm_ht_run(hm_ht_state *s, const uint8_t *rgb, int w, int h, const hm_ht_opts *opts, hm_pool *pool, hm_ht_box *out,
              int *n, hm_ht_stats *stats) {
    hm_ht_opts def;
    if (n) *n = 0;
    if (!s || !rgb || !out || !n) return hm_err(HM_E_ARG, "hm_ht_run: bad arguments");
    if (w < 1 || h < 1 || w > HM_IMAGE_MAX_DIM || h > HM_IMAGE_MAX_DIM || (long long)w * h > HM_IMAGE_MAX_PIXELS)
        return hm_err(HM_E_ARG, "image %dx%d out of range for the hand-box detector", w, h);
    if (!opts) {
        hm_ht_opts_default(&def);
        opts = &def;
    }
    if (opts->max_out < 1 || opts->max_out > HM_HT_MAX_OUT || !(opts->min_score >= 0 && opts->min_score < 1) ||
        !(opts->iou > 0 && opts->iou <= 1))
        return hm_err(HM_E_ARG, "hand-box detector options out of range (max_out %d in 1..%d, min_score %g in [0,1), "
                      "iou %g in (0,1])", opts->max_out, HM_HT_MAX_OUT, opts->min_score, opts->iou);
    const double t0 = 1e3 * hm_now();
    hm_ht_preprocess(rgb, w, h, s->m->mul, s->m->sub, hm_tfl_input(s->net, 0));
    const double t1 = 1e3 * hm_now();
    int rc = hm_tfl_invoke(s->net, pool);
    if (rc) return rc;
    const double t2 = 1e3 * hm_now();
    hm_ht_decode(s->m, hm_tfl_output(s->net, 0), hm_tfl_output(s->net, 1), s->det);
    const int nk = hm_ht_nms(s->det, HM_HT_ANCHORS, opts->min_score, opts->iou, opts->max_out, s->keep, s->order);
    for (int k = 0; k < nk; k++) {
        const hm_ht_det *d = &s->det[s->keep[k]];
        out[k] = (hm_ht_box){{d->yx[1] * w, d->yx[0] * h, d->yx[3] * w, d->yx[2] * h}, d->score,
                             d->cls[HM_HT_FACE], d->label};
    }
    *n = nk;
    if (stats) *stats = (hm_ht_stats){t1 - t0, t2 - t1, 1e3 * hm_now() - t2};
    return HM_OK;
}
