/* tflite/tflite_ops.c - the data-movement and elementwise kernels: MAX_POOL_2D,
 * ADD / PRELU (numpy broadcasting), PAD, RESIZE_BILINEAR, CONCATENATION,
 * MEAN, LOGISTIC. NHWC fp32; shapes were checked at load (tflite_prep.c).
 */
#include <float.h>
#include <math.h>
#include <string.h>

#include "core/util.h"
#include "tflite/tflite_impl.h"

/* Elements per elementwise task: below this a job runs on the caller. */
#define ELEMS_PER_TASK 32768

static const hm_tfl_shape *in_shape(const hm_tfl_model *m, const hm_tfl_op *op, int k) {
    return &m->t[op->in[k]].shape;
}
static const hm_tfl_shape *out_shape(const hm_tfl_model *m, const hm_tfl_op *op) { return &m->t[op->out[0]].shape; }

/* ---- MAX_POOL_2D ------------------------------------------------------------ */

typedef struct {
    const hm_tfl_model *m;
    const hm_tfl_op *op;
    const float *x;
    float *y;
} row_job;

/* One output row (n, oy): the max over the window's part inside the input
 * (TFLite skips padding rather than reading it as a value). */
static void maxpool_task(void *ctx, int r, int tid) {
    const row_job *j = ctx;
    const hm_tfl_op *op = j->op;
    const hm_tfl_shape *xs = in_shape(j->m, op, 0), *ys = out_shape(j->m, op);
    int H = xs->dims[1], W = xs->dims[2], C = xs->dims[3], OH = ys->dims[1], OW = ys->dims[2];
    int n = r / OH, oy = r % OH;
    int y0 = oy * op->stride_h - op->pad_top, y1 = y0 + op->filter_h;
    if (y0 < 0) y0 = 0;
    if (y1 > H) y1 = H;
    for (int ox = 0; ox < OW; ox++) {
        int x0 = ox * op->stride_w - op->pad_left, x1 = x0 + op->filter_w;
        if (x0 < 0) x0 = 0;
        if (x1 > W) x1 = W;
        float *o = j->y + ((size_t)r * OW + ox) * C;
        /* The window is never empty (SAME padding is at most half the
         * filter): start from its first element. */
        memcpy(o, j->x + (((size_t)n * H + y0) * W + x0) * C, (size_t)C * sizeof(float));
        for (int iy = y0; iy < y1; iy++)
            for (int ix = iy == y0 ? x0 + 1 : x0; ix < x1; ix++) {
                const float *in = j->x + (((size_t)n * H + iy) * W + ix) * C;
                j->m->k->max(o, in, (size_t)C);
            }
        j->m->k->act(o, (size_t)C, op->act);
    }
}

/* One task per output row. */
void hm_tfl_maxpool(const hm_tfl_model *m, const hm_tfl_op *op, const float *x, float *y, hm_pool *pool) {
    row_job j = {m, op, x, y};
    const hm_tfl_shape *ys = out_shape(m, op);
    hm_pool_run(pool, maxpool_task, &j, ys->dims[0] * ys->dims[1]);
}

/* ---- ADD / PRELU ----------------------------------------------------------- */

typedef struct {
    const hm_tfl_model *m;
    const hm_tfl_op *op;
    const float *a, *b;
    float *y;
    int r;                             /* output rank */
    int dims[HM_TFL_MAX_DIMS];         /* output shape */
    size_t sa[HM_TFL_MAX_DIMS], sb[HM_TFL_MAX_DIMS]; /* element strides, 0 on broadcast axes */
    size_t inner, rows, rows_per_task;
    int flat;                          /* same shapes: one row of numel, split in chunks */
} bin_job;

/* y[i] = a[i*sa] (op) b[i*sb] for i < n, sa and sb 0 or 1. */
static void bin_row(const bin_job *j, const float *a, size_t sa, const float *b, size_t sb, float *y, size_t n) {
    int prelu = j->op->code == HM_TFL_OP_PRELU;
    if (sa == 1 && sb == 1) {
        if (prelu) j->m->k->prelu(a, b, y, 1, n);
        else j->m->k->add(a, b, y, n, j->op->act);
        return;
    }
    if (prelu) {
        for (size_t i = 0; i < n; i++) {
            float x = a[i * sa];
            y[i] = x >= 0.0f ? x : x * b[i * sb];
        }
    } else {
        for (size_t i = 0; i < n; i++) y[i] = a[i * sa] + b[i * sb];
        j->m->k->act(y, n, j->op->act);
    }
}

static void bin_task(void *ctx, int task, int tid) {
    const bin_job *j = ctx;
    if (j->flat) {
        size_t i0 = (size_t)task * ELEMS_PER_TASK, n = j->inner - i0 < ELEMS_PER_TASK ? j->inner - i0 : ELEMS_PER_TASK;
        bin_row(j, j->a + i0, 1, j->b + i0, 1, j->y + i0, n);
        return;
    }
    size_t r0 = (size_t)task * j->rows_per_task, r1 = r0 + j->rows_per_task;
    if (r1 > j->rows) r1 = j->rows;
    int R = j->r;
    for (size_t row = r0; row < r1; row++) {
        /* Offsets of this row from its index over the outer axes. */
        size_t rem = row, oa = 0, ob = 0;
        for (int d = R - 2; d >= 0; d--) {
            size_t i = rem % (size_t)j->dims[d];
            rem /= (size_t)j->dims[d];
            oa += i * j->sa[d];
            ob += i * j->sb[d];
        }
        bin_row(j, j->a + oa, j->sa[R - 1], j->b + ob, j->sb[R - 1], j->y + row * j->inner, j->inner);
    }
}

/* Strides of `s` broadcast to the job's output shape (aligned at the end). */
static void bcast_strides(const bin_job *j, const hm_tfl_shape *s, size_t *st) {
    size_t stride = 1;
    for (int d = j->r - 1; d >= 0; d--) {
        int sd = d - (j->r - s->ndim);
        int dim = sd >= 0 ? s->dims[sd] : 1;
        st[d] = dim == 1 ? 0 : stride;
        stride *= (size_t)dim;
    }
}

/* ADD (with its activation) or PRELU of a and b broadcast to y's shape. */
void hm_tfl_binary(const hm_tfl_model *m, const hm_tfl_op *op, const float *a, const float *b, float *y, hm_pool *pool) {
    const hm_tfl_shape *as = in_shape(m, op, 0), *bs = in_shape(m, op, 1), *ys = out_shape(m, op);
    bin_job j = {.m = m, .op = op, .a = a, .b = b, .y = y};
    size_t numel = (size_t)m->t[op->out[0]].numel;
    if (m->t[op->in[0]].numel == (int64_t)numel && m->t[op->in[1]].numel == (int64_t)numel) {
        /* Equal element counts under broadcasting means equal shapes up to
         * leading ones: elementwise over the flat arrays. */
        j.flat = 1;
        j.inner = numel;
        hm_pool_run(numel >= 2 * ELEMS_PER_TASK ? pool : NULL, bin_task, &j,
                    (int)((numel + ELEMS_PER_TASK - 1) / ELEMS_PER_TASK));
        return;
    }
    if (ys->ndim == 0) { /* both scalars: handled above */
        return;
    }
    j.r = ys->ndim;
    memcpy(j.dims, ys->dims, sizeof j.dims);
    bcast_strides(&j, as, j.sa);
    bcast_strides(&j, bs, j.sb);
    j.inner = (size_t)ys->dims[j.r - 1];
    j.rows = numel / j.inner;
    j.rows_per_task = ELEMS_PER_TASK / j.inner ? ELEMS_PER_TASK / j.inner : 1;
    int ntasks = (int)((j.rows + j.rows_per_task - 1) / j.rows_per_task);
    hm_pool_run(ntasks > 1 ? pool : NULL, bin_task, &j, ntasks);
}

/* ---- PAD ---------------------------------------------------------------- */

/* Zeros, then each input row (last axis) copied to its padded place. */
void hm_tfl_pad(const hm_tfl_model *m, const hm_tfl_op *op, const float *x, float *y) {
    const hm_tfl_shape *xs = in_shape(m, op, 0), *ys = out_shape(m, op);
    int r = xs->ndim;
    memset(y, 0, (size_t)m->t[op->out[0]].numel * sizeof(float));
    if (r == 0) {
        y[0] = x[0];
        return;
    }
    size_t ostride[HM_TFL_MAX_DIMS], s = 1;
    for (int d = r - 1; d >= 0; d--) {
        ostride[d] = s;
        s *= (size_t)ys->dims[d];
    }
    size_t inner = (size_t)xs->dims[r - 1], rows = (size_t)m->t[op->in[0]].numel / inner;
    for (size_t row = 0; row < rows; row++) {
        size_t rem = row, o = (size_t)op->pads[r - 1][0];
        for (int d = r - 2; d >= 0; d--) {
            size_t i = rem % (size_t)xs->dims[d];
            rem /= (size_t)xs->dims[d];
            o += (i + (size_t)op->pads[d][0]) * ostride[d];
        }
        memcpy(y + o, x + row * inner, inner * sizeof(float));
    }
}

/* ---- RESIZE_BILINEAR ------------------------------------------------------ */

/* Source coordinate of output index i as TFLite computes it (in float), the
 * two neighbours clamped into the input. */
static void resize_coord(int i, float scale, int half_pixel, int in, float *v, int *lo, int *hi) {
    *v = half_pixel ? ((float)i + 0.5f) * scale - 0.5f : (float)i * scale;
    int f = (int)floorf(*v), c = (int)ceilf(*v);
    *lo = f > 0 ? f : 0;
    *hi = c < in - 1 ? c : in - 1;
}

static float resize_scale(int in, int out, int align_corners) {
    return align_corners && out > 1 ? (float)(in - 1) / (float)(out - 1) : (float)in / (float)out;
}

static void resize_task(void *ctx, int r, int tid) {
    const row_job *j = ctx;
    const hm_tfl_op *op = j->op;
    const hm_tfl_shape *xs = in_shape(j->m, op, 0), *ys = out_shape(j->m, op);
    int H = xs->dims[1], W = xs->dims[2], C = xs->dims[3], OH = ys->dims[1], OW = ys->dims[2];
    int n = r / OH, oy = r % OH, y0, y1;
    float fy;
    resize_coord(oy, resize_scale(H, OH, op->align_corners), op->half_pixel, H, &fy, &y0, &y1);
    float dy = fy - (float)y0, sx = resize_scale(W, OW, op->align_corners);
    const float *r0 = j->x + ((size_t)n * H + y0) * W * C, *r1 = j->x + ((size_t)n * H + y1) * W * C;
    for (int ox = 0; ox < OW; ox++) {
        int x0, x1;
        float fx;
        resize_coord(ox, sx, op->half_pixel, W, &fx, &x0, &x1);
        float dx = fx - (float)x0;
        float w00 = (1 - dy) * (1 - dx), w10 = dy * (1 - dx), w01 = (1 - dy) * dx, w11 = dy * dx;
        const float *p00 = r0 + (size_t)x0 * C, *p01 = r0 + (size_t)x1 * C, *p10 = r1 + (size_t)x0 * C,
                    *p11 = r1 + (size_t)x1 * C;
        float *o = j->y + ((size_t)r * OW + ox) * C;
        for (int c = 0; c < C; c++) o[c] = p00[c] * w00 + p10[c] * w10 + p01[c] * w01 + p11[c] * w11;
    }
}

/* One task per output row. */
void hm_tfl_resize(const hm_tfl_model *m, const hm_tfl_op *op, const float *x, float *y, hm_pool *pool) {
    row_job j = {m, op, x, y};
    const hm_tfl_shape *ys = out_shape(m, op);
    hm_pool_run(pool, resize_task, &j, ys->dims[0] * ys->dims[1]);
}

/* ---- CONCATENATION -------------------------------------------------------- */

/* in: the op's nin input pointers, in order along op->axis. */
void hm_tfl_concat(const hm_tfl_model *m, const hm_tfl_op *op, const float *const *in, float *y) {
    const hm_tfl_shape *ys = out_shape(m, op);
    size_t outer = 1, inner = 1;
    for (int d = 0; d < op->axis; d++) outer *= (size_t)ys->dims[d];
    for (int d = op->axis + 1; d < ys->ndim; d++) inner *= (size_t)ys->dims[d];
    size_t orow = (size_t)ys->dims[op->axis] * inner;
    size_t at = 0;
    for (int k = 0; k < op->nin; k++) {
        size_t len = (size_t)in_shape(m, op, k)->dims[op->axis] * inner;
        for (size_t o = 0; o < outer; o++) memcpy(y + o * orow + at, in[k] + o * len, len * sizeof(float));
        at += len;
    }
    m->k->act(y, (size_t)m->t[op->out[0]].numel, op->act);
}

/* ---- MEAN ----------------------------------------------------------------- */

/* Float sums in input order, divided by the count (as TFLite's kernel). */
void hm_tfl_mean(const hm_tfl_model *m, const hm_tfl_op *op, const float *x, float *y) {
    const hm_tfl_shape *xs = in_shape(m, op, 0);
    int r = xs->ndim;
    size_t ny = (size_t)m->t[op->out[0]].numel, nx = (size_t)m->t[op->in[0]].numel;
    /* Output strides per input axis (0 on the reduced ones). */
    size_t ost[HM_TFL_MAX_DIMS], s = 1, count = 1;
    for (int d = r - 1; d >= 0; d--) {
        ost[d] = op->reduce[d] ? 0 : s;
        if (op->reduce[d]) count *= (size_t)xs->dims[d];
        else s *= (size_t)xs->dims[d];
    }
    memset(y, 0, ny * sizeof(float));
    int idx[HM_TFL_MAX_DIMS] = {0};
    size_t o = 0;
    for (size_t i = 0; i < nx; i++) {
        y[o] += x[i];
        /* Advance the input index, keeping the output offset in step. */
        for (int d = r - 1; d >= 0; d--) {
            o += ost[d];
            if (++idx[d] < xs->dims[d]) break;
            o -= ost[d] * (size_t)xs->dims[d];
            idx[d] = 0;
        }
    }
    for (size_t i = 0; i < ny; i++) y[i] /= (float)count;
}

/* ---- LOGISTIC ------------------------------------------------------------- */

void hm_tfl_logistic(const float *x, float *y, size_t n) {
    /* expf(-x) overflows to inf for x < -88.7, giving exactly 0. */
    for (size_t i = 0; i < n; i++) y[i] = 1.0f / (1.0f + expf(-x[i]));
}

/* ---- DEPTH_TO_SPACE ------------------------------------------------------- */

/* y[n][h*b+i][w*b+j][c] = x[n][h][w][(i*b+j)*Cout + c]: each input pixel's
 * channels are b*b runs of Cout, one per output pixel of its block. */
void hm_tfl_depth_to_space(const hm_tfl_model *m, const hm_tfl_op *op, const float *x, float *y) {
    const hm_tfl_shape *xs = in_shape(m, op, 0);
    int N = xs->dims[0], H = xs->dims[1], W = xs->dims[2], C = xs->dims[3], b = op->block_size, Co = C / (b * b);
    size_t orow = (size_t)W * b * Co;
    for (int n = 0; n < N; n++)
        for (int h = 0; h < H; h++)
            for (int w = 0; w < W; w++) {
                const float *px = x + (((size_t)n * H + h) * W + w) * C;
                for (int i = 0; i < b; i++) {
                    float *py = y + ((size_t)n * H * b + (size_t)h * b + i) * orow + (size_t)w * b * Co;
                    memcpy(py, px + (size_t)i * b * Co, (size_t)b * Co * sizeof(float));
                }
            }
}

/* ---- STRIDED_SLICE -------------------------------------------------------- */

/* Each output element in order, the input index advanced like an odometer
 * over the sliced axes (sl_begin + k * sl_stride on axis d). */
void hm_tfl_strided_slice(const hm_tfl_model *m, const hm_tfl_op *op, const float *x, float *y) {
    const hm_tfl_shape *xs = in_shape(m, op, 0);
    int r = xs->ndim;
    int64_t stride[HM_TFL_MAX_DIMS], s = 1;
    for (int d = r - 1; d >= 0; d--) {
        stride[d] = s;
        s *= xs->dims[d];
    }
    int64_t start = 0;
    for (int d = 0; d < r; d++) start += (int64_t)op->sl_begin[d] * stride[d];
    int k[HM_TFL_MAX_DIMS] = {0};
    int64_t n = m->t[op->out[0]].numel, at = start;
    for (int64_t o = 0; o < n; o++) {
        y[o] = x[at];
        for (int d = r - 1; d >= 0; d--) {
            at += (int64_t)op->sl_stride[d] * stride[d];
            if (++k[d] < op->sl_size[d]) break;
            at -= (int64_t)op->sl_stride[d] * stride[d] * k[d];
            k[d] = 0;
        }
    }
}
