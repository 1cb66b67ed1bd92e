/* tflite/tflite_shapes.c - per-op checks and output shapes, at load.
 *
 * For each op: the input count, each input's type, rank and constness
 * where the kernel needs it, the options' values (strides, padding,
 * activation, dilation, axes), and the output shape by TFLite's rules. The
 * op's load-time fields (padding offsets, filter sizes, packed weights,
 * decoded axes and paddings) are filled here. Anything this executor does
 * not implement is HM_E_UNSUPPORTED naming the op and option; a value no
 * valid file has is HM_E_FORMAT.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/util.h"
#include "tflite/tflite_impl.h"

#define OPNAME(op) hm_tfl_op_name((op)->code)

void hm_tfl_shape_str(const hm_tfl_shape *s, char *buf, size_t n) {
    size_t k = 0;
    k += (size_t)snprintf(buf + k, n - k, "[");
    for (int d = 0; d < s->ndim && k < n; d++) k += (size_t)snprintf(buf + k, n - k, d ? ",%d" : "%d", s->dims[d]);
    if (k < n) snprintf(buf + k, n - k, "]");
}

/* Element count, saturating just above the limit (dims are at most 2^24,
 * so the product of a few would overflow). */
static int64_t shape_numel(const hm_tfl_shape *s) {
    int64_t n = 1;
    for (int d = 0; d < s->ndim; d++) {
        n *= s->dims[d];
        if (n > HM_TFL_MAX_NUMEL) return HM_TFL_MAX_NUMEL + 1;
    }
    return n;
}


/* Input k of op oi, which must be present. */
static int need_input(const hm_tfl_model *m, int oi, int k, hm_tfl_tensor **t) {
    const hm_tfl_op *op = &m->ops[oi];
    if (k >= op->nin || op->in[k] < 0)
        return hm_err(HM_E_FORMAT, "tflite: op %d (%s): input %d is missing", oi, OPNAME(op), k);
    *t = &m->t[op->in[k]];
    return HM_OK;
}

static int need_float(const hm_tfl_model *m, int oi, int k, hm_tfl_tensor **t) {
    int rc = need_input(m, oi, k, t);
    if (rc) return rc;
    if ((*t)->type != HM_TFL_FLOAT32 || ((*t)->i32))
        return hm_err(HM_E_UNSUPPORTED, "tflite: op %d (%s): input %d ('%s') is not FLOAT32", oi, OPNAME(&m->ops[oi]), k,
                      (*t)->name);
    return HM_OK;
}

static int need_const_float(const hm_tfl_model *m, int oi, int k, const char *role, hm_tfl_tensor **t) {
    int rc = need_float(m, oi, k, t);
    if (rc) return rc;
    if (!(*t)->f)
        return hm_err(HM_E_UNSUPPORTED, "tflite: op %d (%s): %s ('%s') must be constant", oi, OPNAME(&m->ops[oi]), role,
                      (*t)->name);
    return HM_OK;
}

static int need_const_i32(const hm_tfl_model *m, int oi, int k, const char *role, hm_tfl_tensor **t) {
    int rc = need_input(m, oi, k, t);
    if (rc) return rc;
    if ((*t)->type != HM_TFL_INT32 || !(*t)->i32)
        return hm_err(HM_E_UNSUPPORTED, "tflite: op %d (%s): %s ('%s') must be a constant INT32 tensor", oi,
                      OPNAME(&m->ops[oi]), role, (*t)->name);
    return HM_OK;
}

static int check_act(const hm_tfl_model *m, int oi) {
    int a = m->ops[oi].act;
    if (a >= 0 && a <= HM_TFL_ACT_RELU6) return HM_OK;
    if (a == 4 || a == 5)
        return hm_err(HM_E_UNSUPPORTED, "tflite: op %d (%s): fused activation %s is not supported", oi,
                      OPNAME(&m->ops[oi]), a == 4 ? "TANH" : "SIGN_BIT");
    return hm_err(HM_E_FORMAT, "tflite: op %d (%s): fused_activation_function %d", oi, OPNAME(&m->ops[oi]), a);
}

/* Output size and leading padding of one spatial axis (TFLite's rules:
 * SAME: ceil(in / stride), padding split with the extra at the end;
 * VALID: (in - k) / stride + 1). */
static int window(const hm_tfl_model *m, int oi, const char *axis, int in, int k, int stride, int *out, int *pad) {
    const hm_tfl_op *op = &m->ops[oi];
    if (stride < 1 || stride > HM_TFL_MAX_WINDOW)
        return hm_err(HM_E_FORMAT, "tflite: op %d (%s): stride_%s is %d", oi, OPNAME(op), axis, stride);
    if (op->padding == 0) {
        *out = (int)(((int64_t)in + stride - 1) / stride);
        int64_t total = (int64_t)(*out - 1) * stride + k - in;
        *pad = total > 0 ? (int)(total / 2) : 0;
    } else if (op->padding == 1) {
        if (k > in)
            return hm_err(HM_E_FORMAT, "tflite: op %d (%s): VALID window of %d on an input of %d along %s", oi,
                          OPNAME(op), k, in, axis);
        *out = (in - k) / stride + 1;
        *pad = 0;
    } else {
        return hm_err(HM_E_FORMAT, "tflite: op %d (%s): padding %d", oi, OPNAME(op), op->padding);
    }
    return HM_OK;
}

static int check_dilation(const hm_tfl_model *m, int oi) {
    const hm_tfl_op *op = &m->ops[oi];
    if (op->dil_w < 1 || op->dil_h < 1)
        return hm_err(HM_E_FORMAT, "tflite: op %d (%s): dilation %dx%d", oi, OPNAME(op), op->dil_h, op->dil_w);
    if (op->dil_w != 1 || op->dil_h != 1)
        return hm_err(HM_E_UNSUPPORTED, "tflite: op %d (%s): dilation %dx%d is not supported", oi, OPNAME(op),
                      op->dil_h, op->dil_w);
    return HM_OK;
}

static int need_rank(const hm_tfl_model *m, int oi, const hm_tfl_tensor *t, int rank, const char *role) {
    if (t->shape.ndim == rank) return HM_OK;
    return hm_err(HM_E_UNSUPPORTED, "tflite: op %d (%s): %s ('%s') has rank %d, not %d", oi, OPNAME(&m->ops[oi]),
                  role, t->name, t->shape.ndim, rank);
}

/* Optional bias input 2: absent, or constant FLOAT32 with n elements. */
static int bias_input(const hm_tfl_model *m, int oi, int n, hm_tfl_tensor **b) {
    const hm_tfl_op *op = &m->ops[oi];
    *b = NULL;
    if (op->nin < 3 || op->in[2] < 0) return HM_OK;
    int rc = need_const_float(m, oi, 2, "bias", b);
    if (rc) return rc;
    if ((*b)->numel != n)
        return hm_err(HM_E_FORMAT, "tflite: op %d (%s): bias has %lld elements for %d outputs", oi, OPNAME(op),
                      (long long)(*b)->numel, n);
    return HM_OK;
}

static int io_count(const hm_tfl_model *m, int oi, int lo, int hi) {
    const hm_tfl_op *op = &m->ops[oi];
    if (op->nin < lo || op->nin > hi || op->nout != 1)
        return hm_err(HM_E_FORMAT, "tflite: op %d (%s): %d inputs and %d outputs", oi, OPNAME(op), op->nin, op->nout);
    return HM_OK;
}

/* prep_<op>(m, oi, os): check op oi, fill its load-time fields, and write
 * the shape it computes to *os. On error the code is returned with a
 * message naming the op and what is wrong. */

static int prep_conv(hm_tfl_model *m, int oi, hm_tfl_shape *os) {
    hm_tfl_op *op = &m->ops[oi];
    hm_tfl_tensor *x, *w, *b;
    int rc;
    if ((rc = io_count(m, oi, 2, 3)) || (rc = need_float(m, oi, 0, &x)) ||
        (rc = need_const_float(m, oi, 1, "the filter", &w)) || (rc = need_rank(m, oi, x, 4, "the input")) ||
        (rc = need_rank(m, oi, w, 4, "the filter")) || (rc = check_act(m, oi)) || (rc = check_dilation(m, oi)))
        return rc;
    int O = w->shape.dims[0], KH = w->shape.dims[1], KW = w->shape.dims[2], I = w->shape.dims[3];
    int C = x->shape.dims[3];
    if (I != C)
        return hm_err(C % I ? HM_E_FORMAT : HM_E_UNSUPPORTED, "tflite: op %d (CONV_2D): filter of %d input channels on "
                      "an input of %d (grouped convolution is not supported)", oi, I, C);
    if ((rc = bias_input(m, oi, O, &b))) return rc;
    int oh, ow;
    if ((rc = window(m, oi, "h", x->shape.dims[1], KH, op->stride_h, &oh, &op->pad_top)) ||
        (rc = window(m, oi, "w", x->shape.dims[2], KW, op->stride_w, &ow, &op->pad_left)))
        return rc;
    *os = (hm_tfl_shape){4, {x->shape.dims[0], oh, ow, O}};
    op->kh = KH;
    op->kw = KW;
    op->direct = KH == 1 && KW == 1 && op->stride_h == 1 && op->stride_w == 1;
    int64_t K = (int64_t)KH * KW * I, rows = (int64_t)x->shape.dims[0] * oh * ow;
    if (K > HM_TFL_MAX_NUMEL)
        return hm_err(HM_E_UNSUPPORTED, "tflite: op %d (CONV_2D): filter of %lld taps per output", oi, (long long)K);
    if (!op->direct) {
        if (rows * K > (int64_t)(HM_TFL_MAX_ARENA / sizeof(float)))
            return hm_err(HM_E_UNSUPPORTED, "tflite: op %d (CONV_2D): im2col of %lld x %lld floats is too large", oi,
                          (long long)rows, (long long)K);
        op->scratch = (size_t)(rows * K);
    }
    /* The filter [O][KH][KW][I] is already the GEMM's W [N = O][K], k in
     * the (ky, kx, c) order im2col writes. */
    if ((rc = hm_pack_weights(&op->W, w->f, (int)K, b ? b->f : NULL, O, (int)K))) return rc;
    op->has_W = 1;
    return HM_OK;
}

static int prep_depthwise(hm_tfl_model *m, int oi, hm_tfl_shape *os) {
    hm_tfl_op *op = &m->ops[oi];
    hm_tfl_tensor *x, *w, *b;
    int rc;
    if ((rc = io_count(m, oi, 2, 3)) || (rc = need_float(m, oi, 0, &x)) ||
        (rc = need_const_float(m, oi, 1, "the filter", &w)) || (rc = need_rank(m, oi, x, 4, "the input")) ||
        (rc = need_rank(m, oi, w, 4, "the filter")) || (rc = check_act(m, oi)) || (rc = check_dilation(m, oi)))
        return rc;
    int C = x->shape.dims[3], OC = w->shape.dims[3];
    if (w->shape.dims[0] != 1)
        return hm_err(HM_E_FORMAT, "tflite: op %d (DEPTHWISE_CONV_2D): filter's first dimension is %d, not 1", oi,
                      w->shape.dims[0]);
    if (OC != C)
        return hm_err(OC % C ? HM_E_FORMAT : HM_E_UNSUPPORTED, "tflite: op %d (DEPTHWISE_CONV_2D): %d output channels "
                      "for %d input channels (only depth multiplier 1 is supported)", oi, OC, C);
    if ((rc = bias_input(m, oi, OC, &b))) return rc;
    op->kh = w->shape.dims[1];
    op->kw = w->shape.dims[2];
    int oh, ow;
    if ((rc = window(m, oi, "h", x->shape.dims[1], op->kh, op->stride_h, &oh, &op->pad_top)) ||
        (rc = window(m, oi, "w", x->shape.dims[2], op->kw, op->stride_w, &ow, &op->pad_left)))
        return rc;
    *os = (hm_tfl_shape){4, {x->shape.dims[0], oh, ow, C}};
    op->dw = w->f;
    op->bias = b ? b->f : NULL;
    return HM_OK;
}

static int prep_maxpool(hm_tfl_model *m, int oi, hm_tfl_shape *os) {
    hm_tfl_op *op = &m->ops[oi];
    hm_tfl_tensor *x;
    int rc;
    if ((rc = io_count(m, oi, 1, 1)) || (rc = need_float(m, oi, 0, &x)) || (rc = need_rank(m, oi, x, 4, "the input")) ||
        (rc = check_act(m, oi)))
        return rc;
    if (op->filter_w < 1 || op->filter_h < 1 || op->filter_w > HM_TFL_MAX_WINDOW || op->filter_h > HM_TFL_MAX_WINDOW)
        return hm_err(HM_E_FORMAT, "tflite: op %d (MAX_POOL_2D): filter %dx%d", oi, op->filter_h, op->filter_w);
    int oh, ow;
    if ((rc = window(m, oi, "h", x->shape.dims[1], op->filter_h, op->stride_h, &oh, &op->pad_top)) ||
        (rc = window(m, oi, "w", x->shape.dims[2], op->filter_w, op->stride_w, &ow, &op->pad_left)))
        return rc;
    *os = (hm_tfl_shape){4, {x->shape.dims[0], oh, ow, x->shape.dims[3]}};
    return HM_OK;
}

/* numpy broadcasting of two shapes, aligned at the last axis. */
static int broadcast(const hm_tfl_model *m, int oi, const hm_tfl_shape *a, const hm_tfl_shape *b, hm_tfl_shape *o) {
    int r = a->ndim > b->ndim ? a->ndim : b->ndim;
    o->ndim = r;
    for (int d = 0; d < r; d++) {
        int da = d - (r - a->ndim) >= 0 ? a->dims[d - (r - a->ndim)] : 1;
        int db = d - (r - b->ndim) >= 0 ? b->dims[d - (r - b->ndim)] : 1;
        if (da != db && da != 1 && db != 1) {
            char sa[96], sb[96];
            hm_tfl_shape_str(a, sa, sizeof sa);
            hm_tfl_shape_str(b, sb, sizeof sb);
            return hm_err(HM_E_FORMAT, "tflite: op %d (%s): shapes %s and %s do not broadcast", oi, OPNAME(&m->ops[oi]),
                          sa, sb);
        }
        o->dims[d] = da > db ? da : db;
    }
    return HM_OK;
}

static int prep_binary(hm_tfl_model *m, int oi, hm_tfl_shape *os) {
    hm_tfl_tensor *a, *b;
    int rc;
    if ((rc = io_count(m, oi, 2, 2)) || (rc = need_float(m, oi, 0, &a)) || (rc = need_float(m, oi, 1, &b)) ||
        (rc = check_act(m, oi)))
        return rc;
    return broadcast(m, oi, &a->shape, &b->shape, os);
}

static int prep_reshape(hm_tfl_model *m, int oi, hm_tfl_shape *os) {
    hm_tfl_op *op = &m->ops[oi];
    hm_tfl_tensor *x, *s;
    int rc;
    if ((rc = io_count(m, oi, 1, 2)) || (rc = need_float(m, oi, 0, &x))) return rc;
    hm_tfl_shape want;
    if (op->nin == 2 && op->in[1] >= 0) {
        if ((rc = need_const_i32(m, oi, 1, "the shape", &s))) return rc;
        if (s->shape.ndim > 1 || s->numel > HM_TFL_MAX_DIMS)
            return hm_err(HM_E_UNSUPPORTED, "tflite: op %d (RESHAPE): shape tensor of %lld values", oi,
                          (long long)s->numel);
        want.ndim = (int)s->numel;
        for (int d = 0; d < want.ndim; d++) want.dims[d] = s->i32[d];
    } else if (op->has_new_shape) {
        want = op->new_shape;
    } else {
        /* TFLite then reshapes to a scalar, which fails for any input with
         * more than one element; refuse it the same way. */
        want.ndim = 0;
    }
    int infer = -1;
    int64_t known = 1;
    for (int d = 0; d < want.ndim; d++) {
        if (want.dims[d] == -1 && infer < 0) {
            infer = d;
        } else if (want.dims[d] < 1 || want.dims[d] > HM_TFL_MAX_DIM) {
            return hm_err(HM_E_FORMAT, "tflite: op %d (RESHAPE): new shape has dimension %d = %d", oi, d, want.dims[d]);
        } else {
            known *= want.dims[d];
            if (known > HM_TFL_MAX_NUMEL) return hm_err(HM_E_FORMAT, "tflite: op %d (RESHAPE): new shape too large", oi);
        }
    }
    if (infer >= 0) {
        if (x->numel % known)
            return hm_err(HM_E_FORMAT, "tflite: op %d (RESHAPE): %lld elements do not split by %lld", oi,
                          (long long)x->numel, (long long)known);
        want.dims[infer] = (int)(x->numel / known);
        known = x->numel;
    }
    if (known != x->numel)
        return hm_err(HM_E_FORMAT, "tflite: op %d (RESHAPE): %lld elements into a shape of %lld", oi,
                      (long long)x->numel, (long long)known);
    *os = want;
    return HM_OK;
}

static int prep_concat(hm_tfl_model *m, int oi, hm_tfl_shape *os) {
    hm_tfl_op *op = &m->ops[oi];
    hm_tfl_tensor *x;
    int rc;
    if ((rc = io_count(m, oi, 1, HM_TFL_MAX_OP_IO)) || (rc = check_act(m, oi)) || (rc = need_float(m, oi, 0, &x)))
        return rc;
    /* TFLite's float kernel refuses a fused activation here too. */
    if (op->act != HM_TFL_ACT_NONE)
        return hm_err(HM_E_UNSUPPORTED, "tflite: op %d (CONCATENATION): fused activation %d is not supported", oi, op->act);
    int r = x->shape.ndim;
    if (op->axis < -r || op->axis >= r || r == 0)
        return hm_err(HM_E_FORMAT, "tflite: op %d (CONCATENATION): axis %d for rank %d", oi, op->axis, r);
    if (op->axis < 0) op->axis += r;
    *os = x->shape;
    int64_t total = 0;
    for (int k = 0; k < op->nin; k++) {
        hm_tfl_tensor *t;
        if ((rc = need_float(m, oi, k, &t))) return rc;
        if (t->shape.ndim != r) return hm_err(HM_E_FORMAT, "tflite: op %d (CONCATENATION): inputs of ranks %d and %d", oi, r, t->shape.ndim);
        for (int d = 0; d < r; d++)
            if (d != op->axis && t->shape.dims[d] != x->shape.dims[d])
                return hm_err(HM_E_FORMAT, "tflite: op %d (CONCATENATION): input %d differs in dimension %d", oi, k, d);
        total += t->shape.dims[op->axis];
    }
    if (total > HM_TFL_MAX_DIM) return hm_err(HM_E_UNSUPPORTED, "tflite: op %d (CONCATENATION): output too large", oi);
    os->dims[op->axis] = (int)total;
    return HM_OK;
}

static int prep_pad(hm_tfl_model *m, int oi, hm_tfl_shape *os) {
    hm_tfl_op *op = &m->ops[oi];
    hm_tfl_tensor *x, *p;
    int rc;
    if ((rc = io_count(m, oi, 2, 2)) || (rc = need_float(m, oi, 0, &x)) ||
        (rc = need_const_i32(m, oi, 1, "the paddings", &p)))
        return rc;
    int r = x->shape.ndim;
    if (p->shape.ndim != 2 || p->shape.dims[0] != r || p->shape.dims[1] != 2)
        return hm_err(HM_E_FORMAT, "tflite: op %d (PAD): paddings must be [%d, 2]", oi, r);
    *os = x->shape;
    int64_t n = 1;
    for (int d = 0; d < r; d++) {
        int32_t lo = p->i32[2 * d], hi = p->i32[2 * d + 1];
        if (lo < 0 || hi < 0)
            return hm_err(HM_E_UNSUPPORTED, "tflite: op %d (PAD): negative padding %d,%d on axis %d", oi, lo, hi, d);
        int64_t dim = (int64_t)x->shape.dims[d] + lo + hi;
        if (dim > HM_TFL_MAX_DIM) return hm_err(HM_E_UNSUPPORTED, "tflite: op %d (PAD): axis %d padded to %lld", oi, d, (long long)dim);
        n *= dim;
        if (n > HM_TFL_MAX_NUMEL) return hm_err(HM_E_UNSUPPORTED, "tflite: op %d (PAD): output too large", oi);
        op->pads[d][0] = lo;
        op->pads[d][1] = hi;
        os->dims[d] = (int)dim;
    }
    return HM_OK;
}

static int prep_resize(hm_tfl_model *m, int oi, hm_tfl_shape *os) {
    hm_tfl_op *op = &m->ops[oi];
    hm_tfl_tensor *x, *s;
    int rc;
    if ((rc = io_count(m, oi, 2, 2)) || (rc = need_float(m, oi, 0, &x)) || (rc = need_rank(m, oi, x, 4, "the input")) ||
        (rc = need_const_i32(m, oi, 1, "the size", &s)))
        return rc;
    if (s->numel != 2) return hm_err(HM_E_FORMAT, "tflite: op %d (RESIZE_BILINEAR): size has %lld values", oi, (long long)s->numel);
    if (op->align_corners && op->half_pixel)
        return hm_err(HM_E_UNSUPPORTED, "tflite: op %d (RESIZE_BILINEAR): align_corners with half_pixel_centers", oi);
    int h = s->i32[0], w = s->i32[1];
    if (h < 1 || w < 1 || h > HM_TFL_MAX_DIM || w > HM_TFL_MAX_DIM)
        return hm_err(HM_E_FORMAT, "tflite: op %d (RESIZE_BILINEAR): size %dx%d", oi, h, w);
    *os = (hm_tfl_shape){4, {x->shape.dims[0], h, w, x->shape.dims[3]}};
    if (shape_numel(os) > HM_TFL_MAX_NUMEL) return hm_err(HM_E_UNSUPPORTED, "tflite: op %d (RESIZE_BILINEAR): output too large", oi);
    return HM_OK;
}

static int prep_mean(hm_tfl_model *m, int oi, hm_tfl_shape *os) {
    hm_tfl_op *op = &m->ops[oi];
    hm_tfl_tensor *x, *a;
    int rc;
    if ((rc = io_count(m, oi, 2, 2)) || (rc = need_float(m, oi, 0, &x)) || (rc = need_const_i32(m, oi, 1, "the axes", &a)))
        return rc;
    int r = x->shape.ndim;
    memset(op->reduce, 0, sizeof op->reduce);
    for (int64_t k = 0; k < a->numel; k++) {
        int32_t ax = a->i32[k];
        if (ax < -r || ax >= r) return hm_err(HM_E_FORMAT, "tflite: op %d (MEAN): axis %d for rank %d", oi, ax, r);
        op->reduce[ax < 0 ? ax + r : ax] = 1;
    }
    os->ndim = 0;
    for (int d = 0; d < r; d++) {
        if (!op->reduce[d]) os->dims[os->ndim++] = x->shape.dims[d];
        else if (op->keep_dims) os->dims[os->ndim++] = 1;
    }
    return HM_OK;
}

static int prep_fc(hm_tfl_model *m, int oi, hm_tfl_shape *os) {
    hm_tfl_op *op = &m->ops[oi];
    hm_tfl_tensor *x, *w, *b;
    int rc;
    if ((rc = io_count(m, oi, 2, 3)) || (rc = need_float(m, oi, 0, &x)) ||
        (rc = need_const_float(m, oi, 1, "the weights", &w)) || (rc = need_rank(m, oi, w, 2, "the weights")) ||
        (rc = check_act(m, oi)))
        return rc;
    if (op->weights_format != 0)
        return hm_err(HM_E_UNSUPPORTED, "tflite: op %d (FULLY_CONNECTED): weights_format %d", oi, op->weights_format);
    int N = w->shape.dims[0], K = w->shape.dims[1];
    if ((rc = bias_input(m, oi, N, &b))) return rc;
    if (x->shape.ndim < 1 || x->numel % K)
        return hm_err(HM_E_FORMAT, "tflite: op %d (FULLY_CONNECTED): input of %lld elements for weights of depth %d", oi,
                      (long long)x->numel, K);
    if (op->keep_num_dims) {
        if (x->shape.dims[x->shape.ndim - 1] != K)
            return hm_err(HM_E_FORMAT, "tflite: op %d (FULLY_CONNECTED): keep_num_dims with a last dimension of %d, "
                          "not %d", oi, x->shape.dims[x->shape.ndim - 1], K);
        *os = x->shape;
        os->dims[os->ndim - 1] = N;
    } else {
        *os = (hm_tfl_shape){2, {(int)(x->numel / K), N}};
    }
    if (shape_numel(os) > HM_TFL_MAX_NUMEL) return hm_err(HM_E_UNSUPPORTED, "tflite: op %d (FULLY_CONNECTED): output too large", oi);
    if ((rc = hm_pack_weights(&op->W, w->f, K, b ? b->f : NULL, N, K))) return rc;
    op->has_W = 1;
    return HM_OK;
}

static int prep_dequantize(hm_tfl_model *m, int oi, hm_tfl_shape *os) {
    hm_tfl_tensor *x;
    int rc;
    if ((rc = io_count(m, oi, 1, 1)) || (rc = need_input(m, oi, 0, &x))) return rc;
    if (x->type != HM_TFL_FLOAT16 || !x->f)
        return hm_err(HM_E_UNSUPPORTED, "tflite: op %d (DEQUANTIZE): only constant FLOAT16 inputs are supported ('%s')",
                      oi, x->name);
    *os = x->shape;
    return HM_OK;
}

static int prep_logistic(hm_tfl_model *m, int oi, hm_tfl_shape *os) {
    hm_tfl_tensor *x;
    int rc;
    if ((rc = io_count(m, oi, 1, 1)) || (rc = need_float(m, oi, 0, &x))) return rc;
    *os = x->shape;
    return HM_OK;
}

/* DENSIFY: a constant stored sparse (densified by the reader) to a plain
 * constant of the same type; folded at load. */
static int prep_densify(hm_tfl_model *m, int oi, hm_tfl_shape *os) {
    hm_tfl_tensor *x;
    int rc;
    if ((rc = io_count(m, oi, 1, 1)) || (rc = need_input(m, oi, 0, &x))) return rc;
    if (!x->sparse || !x->f)
        return hm_err(HM_E_UNSUPPORTED, "tflite: op %d (DENSIFY): input '%s' is not a sparse constant", oi, x->name);
    if (m->t[m->ops[oi].out[0]].type != x->type)
        return hm_err(HM_E_FORMAT, "tflite: op %d (DENSIFY): output type differs from the input's", oi);
    *os = x->shape;
    return HM_OK;
}

static int prep_depth_to_space(hm_tfl_model *m, int oi, hm_tfl_shape *os) {
    hm_tfl_op *op = &m->ops[oi];
    hm_tfl_tensor *x;
    int rc;
    if ((rc = io_count(m, oi, 1, 1)) || (rc = need_float(m, oi, 0, &x)) || (rc = need_rank(m, oi, x, 4, "the input")))
        return rc;
    int b = op->block_size, C = x->shape.dims[3];
    if (b < 1 || b > HM_TFL_MAX_WINDOW || C % (b * b))
        return hm_err(HM_E_FORMAT, "tflite: op %d (DEPTH_TO_SPACE): block size %d for %d channels", oi, b, C);
    int64_t h = (int64_t)x->shape.dims[1] * b, w = (int64_t)x->shape.dims[2] * b;
    if (h > HM_TFL_MAX_DIM || w > HM_TFL_MAX_DIM)
        return hm_err(HM_E_UNSUPPORTED, "tflite: op %d (DEPTH_TO_SPACE): output too large", oi);
    *os = (hm_tfl_shape){4, {x->shape.dims[0], (int)h, (int)w, C / (b * b)}};
    return HM_OK;
}

/* STRIDED_SLICE with TFLite's rules for begin / end (negative values count
 * from the end, then clamped; masks take the whole axis; offset: end is
 * relative to begin; shrink: one element, the axis dropped). Ellipsis and
 * new axes are refused. */
static int prep_strided_slice(hm_tfl_model *m, int oi, hm_tfl_shape *os) {
    hm_tfl_op *op = &m->ops[oi];
    hm_tfl_tensor *x, *bt, *et, *st;
    int rc;
    if ((rc = io_count(m, oi, 4, 4)) || (rc = need_float(m, oi, 0, &x)) ||
        (rc = need_const_i32(m, oi, 1, "begin", &bt)) || (rc = need_const_i32(m, oi, 2, "end", &et)) ||
        (rc = need_const_i32(m, oi, 3, "strides", &st)))
        return rc;
    int r = x->shape.ndim;
    if (op->ellipsis_mask || op->new_axis_mask)
        return hm_err(HM_E_UNSUPPORTED, "tflite: op %d (STRIDED_SLICE): ellipsis_mask / new_axis_mask", oi);
    if (bt->numel != r || et->numel != r || st->numel != r)
        return hm_err(HM_E_FORMAT, "tflite: op %d (STRIDED_SLICE): begin, end and strides must have %d values", oi, r);
    os->ndim = 0;
    for (int d = 0; d < r; d++) {
        int64_t dim = x->shape.dims[d], s = st->i32[d], b = bt->i32[d], e = et->i32[d];
        int shrink = op->shrink_axis_mask >> d & 1;
        if (s == 0 || s < -HM_TFL_MAX_DIM || s > HM_TFL_MAX_DIM)
            return hm_err(HM_E_FORMAT, "tflite: op %d (STRIDED_SLICE): stride %lld on axis %d", oi, (long long)s, d);
        if (op->slice_offset) e += b;
        if (op->begin_mask >> d & 1 && !shrink) {
            b = s > 0 ? 0 : dim - 1;
        } else {
            if (b < 0) b += dim;
            if (shrink) {
                if (b < 0 || b >= dim)
                    return hm_err(HM_E_FORMAT, "tflite: op %d (STRIDED_SLICE): index %d out of range on axis %d", oi,
                                  bt->i32[d], d);
            } else {
                b = s > 0 ? (b < 0 ? 0 : b > dim ? dim : b) : (b < -1 ? -1 : b > dim - 1 ? dim - 1 : b);
            }
        }
        int64_t count;
        if (shrink) {
            s = 1;
            count = 1;
        } else {
            if (op->end_mask >> d & 1) {
                e = s > 0 ? dim : -1;
            } else {
                if (e < 0) e += dim;
                e = s > 0 ? (e < 0 ? 0 : e > dim ? dim : e) : (e < -1 ? -1 : e > dim - 1 ? dim - 1 : e);
            }
            count = s > 0 ? (e - b + s - 1) / s : (b - e - s - 1) / -s;
            if (count < 1)
                return hm_err(HM_E_UNSUPPORTED, "tflite: op %d (STRIDED_SLICE): empty slice on axis %d", oi, d);
        }
        op->sl_begin[d] = (int)b;
        op->sl_stride[d] = (int)s;
        op->sl_size[d] = (int)count;
        if (!shrink) os->dims[os->ndim++] = (int)count;
    }
    return HM_OK;
}

/* See tflite_impl.h. On error the code is returned (the op's load-time
 * fields may be partly set; the model is then freed). */
int hm_tfl_op_shape(hm_tfl_model *m, int oi, hm_tfl_shape *os) {
    switch (m->ops[oi].code) {
    case HM_TFL_OP_CONV_2D: return prep_conv(m, oi, os);
    case HM_TFL_OP_DEPTHWISE_CONV_2D: return prep_depthwise(m, oi, os);
    case HM_TFL_OP_MAX_POOL_2D: return prep_maxpool(m, oi, os);
    case HM_TFL_OP_ADD: return prep_binary(m, oi, os);
    case HM_TFL_OP_PRELU: m->ops[oi].act = 0; return prep_binary(m, oi, os);
    case HM_TFL_OP_RESHAPE: return prep_reshape(m, oi, os);
    case HM_TFL_OP_CONCATENATION: return prep_concat(m, oi, os);
    case HM_TFL_OP_PAD: return prep_pad(m, oi, os);
    case HM_TFL_OP_RESIZE_BILINEAR: return prep_resize(m, oi, os);
    case HM_TFL_OP_MEAN: return prep_mean(m, oi, os);
    case HM_TFL_OP_FULLY_CONNECTED: return prep_fc(m, oi, os);
    case HM_TFL_OP_DEQUANTIZE: return prep_dequantize(m, oi, os);
    case HM_TFL_OP_LOGISTIC: return prep_logistic(m, oi, os);
    case HM_TFL_OP_DENSIFY: return prep_densify(m, oi, os);
    case HM_TFL_OP_DEPTH_TO_SPACE: return prep_depth_to_space(m, oi, os);
    case HM_TFL_OP_STRIDED_SLICE: return prep_strided_slice(m, oi, os);
    default: return hm_err(HM_E_UNSUPPORTED, "tflite: op %d: builtin op %d is not supported", oi, m->ops[oi].code);
    }
}

