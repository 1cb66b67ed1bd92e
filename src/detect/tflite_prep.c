/* detect/tflite_prep.c - load-time preparation of a read graph.
 *
 * In op order: every input must exist already (a constant, a graph input or
 * the output of an earlier op), so the file's order is a valid schedule and
 * the graph has no cycles; each op's inputs are checked (count, types,
 * ranks, constness where the kernels need it) and its output shape is
 * computed and must equal the one the file declares, so the kernels never
 * see a shape they did not agree to. fp16 DEQUANTIZE outputs become fp32
 * constants, and any other op whose inputs are all constant is evaluated
 * here, once. CONV_2D and FULLY_CONNECTED weights are packed for the GEMM.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/util.h"
#include "detect/tflite_impl.h"

#define OPNAME(op) hm_tfl_op_name((op)->code)

static void shape_str(const hm_tfl_shape *s, char *buf, size_t n) {
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

static int is_const(const hm_tfl_tensor *t) { return t->f || t->i32; }

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
            shape_str(a, sa, sizeof sa);
            shape_str(b, sb, sizeof sb);
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

static int prep_shape(hm_tfl_model *m, int oi, hm_tfl_shape *os) {
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
    default: return hm_err(HM_E_UNSUPPORTED, "tflite: op %d: builtin op %d is not supported", oi, m->ops[oi].code);
    }
}

/* Evaluate op oi (all inputs constant) into a new constant output. */
static int fold(hm_tfl_model *m, int oi) {
    hm_tfl_op *op = &m->ops[oi];
    hm_tfl_tensor *y = &m->t[op->out[0]];
    y->f = hm_alloc((size_t)y->numel * sizeof(float));
    if (!y->f) return HM_E_NOMEM;
    op->folded = 1;
    if (op->code == HM_TFL_OP_DEQUANTIZE || op->code == HM_TFL_OP_RESHAPE) {
        memcpy(y->f, m->t[op->in[0]].f, (size_t)y->numel * sizeof(float));
        return HM_OK;
    }
    const float **in = calloc((size_t)op->nin, sizeof *in);
    float *scratch = op->scratch ? hm_alloc(op->scratch * sizeof(float)) : NULL;
    int rc = HM_OK;
    if (!in || (op->scratch && !scratch)) {
        rc = hm_err(HM_E_NOMEM, "tflite: out of memory");
    } else {
        for (int k = 0; k < op->nin; k++) in[k] = op->in[k] >= 0 ? m->t[op->in[k]].f : NULL;
        rc = hm_tfl_run_op(m, op, in, &y->f, scratch, NULL);
    }
    free(in);
    hm_free(scratch);
    if (op->has_W) {
        hm_packed_free(&op->W);
        op->has_W = 0;
    }
    return rc;
}

static int prep_op(hm_tfl_model *m, int oi) {
    hm_tfl_op *op = &m->ops[oi];
    /* Inputs first, outputs after: an op can never read what it writes. */
    for (int k = 0; k < op->nin; k++) {
        int ti = op->in[k];
        if (ti < 0) continue;
        hm_tfl_tensor *t = &m->t[ti];
        if (!is_const(t) && !t->is_input && t->producer < 0)
            return hm_err(HM_E_FORMAT, "tflite: op %d (%s): input %d ('%s') is not computed before it is read", oi,
                          OPNAME(op), k, t->name);
        t->used = 1;
    }
    if (op->nout < 1) return hm_err(HM_E_FORMAT, "tflite: op %d (%s): no outputs", oi, OPNAME(op));
    hm_tfl_shape os = {0, {0}};
    int rc = prep_shape(m, oi, &os);
    if (rc) return rc;
    hm_tfl_tensor *y = &m->t[op->out[0]];
    if (is_const(y) || y->is_input || y->producer >= 0)
        return hm_err(HM_E_FORMAT, "tflite: op %d (%s): output '%s' is %s", oi, OPNAME(op), y->name,
                      is_const(y) ? "a constant" : y->is_input ? "a graph input" : "written twice");
    if (y->type != HM_TFL_FLOAT32)
        return hm_err(HM_E_UNSUPPORTED, "tflite: op %d (%s): output '%s' is not FLOAT32", oi, OPNAME(op), y->name);
    if (os.ndim != y->shape.ndim || memcmp(os.dims, y->shape.dims, sizeof(int) * (size_t)os.ndim)) {
        char a[96], b[96];
        shape_str(&os, a, sizeof a);
        shape_str(&y->shape, b, sizeof b);
        return hm_err(HM_E_FORMAT, "tflite: op %d (%s): output '%s' is declared %s, the op computes %s", oi, OPNAME(op),
                      y->name, b, a);
    }
    y->producer = oi;
    /* A RESHAPE of an activation shares its storage; of a constant it is
     * folded, or copied at invoke when too large to fold. */
    if (op->code == HM_TFL_OP_RESHAPE && !m->t[op->in[0]].f) y->alias = op->in[0];
    int all_const = 1;
    for (int k = 0; k < op->nin; k++)
        if (op->in[k] >= 0 && !m->t[op->in[k]].f && m->t[op->in[k]].type != HM_TFL_INT32) all_const = 0;
    /* Folding is skipped for outputs far larger than the inputs could
     * justify (broadcasts, pads, resizes of constants): those run at invoke
     * within the arena limit instead of growing the model. */
    if (all_const && y->numel <= HM_TFL_MAX_FOLD) return fold(m, oi);
    return HM_OK;
}

/* Fuse into each CONV_2D the ADD that alone reads its output (the other
 * operand of the same shape and computed before the CONV_2D runs) and the
 * PRELU with a per-channel alpha that alone reads the result: the palm
 * detector's conv -> residual add -> PRELU blocks become one pass over
 * each chunk of rows instead of three over the whole tensor. Same
 * arithmetic in the same order as unfused. */
static int fuse_epilogues(hm_tfl_model *m) {
    int *uses = calloc((size_t)m->nt + 1, sizeof *uses), *reader = malloc(((size_t)m->nt + 1) * sizeof *reader);
    if (!uses || !reader) {
        free(uses);
        free(reader);
        return hm_err(HM_E_NOMEM, "tflite: out of memory");
    }
    for (int oi = 0; oi < m->nops; oi++) {
        const hm_tfl_op *op = &m->ops[oi];
        if (op->folded) continue;
        for (int k = 0; k < op->nin; k++)
            if (op->in[k] >= 0) uses[op->in[k]]++, reader[op->in[k]] = oi;
    }
    for (int k = 0; k < m->noutputs; k++) uses[m->outputs[k]] += 2; /* kept as they are */
    int rc = HM_OK;
    for (int oi = 0; oi < m->nops && !rc; oi++) {
        hm_tfl_op *op = &m->ops[oi];
        if (op->code != HM_TFL_OP_CONV_2D || op->folded || op->nin > 3) continue;
        int cur = op->out[0], res = -1, alpha = -1, post_act = 0;
        const hm_tfl_shape *ys = &m->t[cur].shape;
        if (uses[cur] == 1 && m->ops[reader[cur]].code == HM_TFL_OP_ADD && !m->ops[reader[cur]].folded) {
            hm_tfl_op *a = &m->ops[reader[cur]];
            int r = a->in[0] == cur ? a->in[1] : a->in[0];
            const hm_tfl_tensor *rt = &m->t[r];
            int ready = rt->f || rt->is_input || (rt->producer >= 0 && rt->producer < oi);
            if (r != cur && ready && rt->shape.ndim == ys->ndim &&
                !memcmp(rt->shape.dims, ys->dims, sizeof(int) * (size_t)ys->ndim)) {
                res = r;
                post_act = a->act;
                a->fused = 1;
                cur = a->out[0];
            }
        }
        if (uses[cur] == 1 && m->ops[reader[cur]].code == HM_TFL_OP_PRELU && !m->ops[reader[cur]].folded &&
            m->ops[reader[cur]].in[0] == cur) {
            hm_tfl_op *p = &m->ops[reader[cur]];
            const hm_tfl_tensor *at = &m->t[p->in[1]];
            int C = ys->dims[ys->ndim - 1], channel = at->f && at->numel == C && at->shape.ndim <= ys->ndim;
            for (int d = 0; channel && d < at->shape.ndim; d++)
                channel = at->shape.dims[d] == (d == at->shape.ndim - 1 ? C : 1);
            if (channel) {
                alpha = p->in[1];
                p->fused = 1;
                cur = p->out[0];
            }
        }
        if (res < 0 && alpha < 0) continue;
        int *in = malloc(5 * sizeof *in);
        if (!in) {
            rc = hm_err(HM_E_NOMEM, "tflite: out of memory");
            break;
        }
        for (int k = 0; k < 3; k++) in[k] = k < op->nin ? op->in[k] : -1;
        in[3] = res;
        in[4] = alpha;
        free(op->in);
        op->in = in;
        op->nin = 5;
        op->post_act = post_act;
        op->out[0] = cur;
    }
    free(uses);
    free(reader);
    return rc;
}

/* Constant data only the load needed (fp16 originals, packed weights,
 * shape / axis / padding tensors): released once prepared. */
static void drop_load_only(hm_tfl_model *m) {
    char *keep = calloc((size_t)m->nt + 1, 1);
    if (!keep) return; /* keeping them costs memory only */
    for (int r = 0; r < m->nrun; r++) {
        const hm_tfl_op *op = &m->ops[m->run[r]];
        int packed = op->has_W; /* the weights and bias, inputs 1 and 2, are in W */
        for (int k = 0; k < op->nin; k++)
            if (op->in[k] >= 0 && !(packed && (k == 1 || k == 2))) keep[op->in[k]] = 1;
    }
    for (int k = 0; k < m->noutputs; k++) keep[m->outputs[k]] = 1;
    for (int i = 0; i < m->nt; i++) {
        hm_tfl_tensor *t = &m->t[i];
        hm_free(t->i32); /* shapes, axes, paddings: decoded into the ops */
        t->i32 = NULL;
        if (keep[i]) continue;
        hm_free(t->f);
        t->f = NULL;
    }
    free(keep);
}

int hm_tfl_prepare(hm_tfl_model *m) {
    int rc;
    for (int k = 0; k < m->ninputs; k++) {
        hm_tfl_tensor *t = &m->t[m->inputs[k]];
        if (t->is_input) return hm_err(HM_E_FORMAT, "tflite: graph input '%s' is listed twice", t->name);
        if (t->type != HM_TFL_FLOAT32) return hm_err(HM_E_UNSUPPORTED, "tflite: graph input '%s' is not FLOAT32", t->name);
        if (is_const(t)) return hm_err(HM_E_FORMAT, "tflite: graph input '%s' has constant data", t->name);
        t->is_input = 1;
    }
    for (int oi = 0; oi < m->nops; oi++)
        if ((rc = prep_op(m, oi))) return rc;
    for (int k = 0; k < m->noutputs; k++) {
        hm_tfl_tensor *t = &m->t[m->outputs[k]];
        if (t->type != HM_TFL_FLOAT32 || t->i32)
            return hm_err(HM_E_UNSUPPORTED, "tflite: graph output '%s' is not FLOAT32", t->name);
        if (!t->f && !t->is_input && t->producer < 0)
            return hm_err(HM_E_FORMAT, "tflite: graph output '%s' is never computed", t->name);
        t->is_output = 1;
        t->used = 1;
    }
    if ((rc = fuse_epilogues(m))) return rc;
    m->run = malloc(((size_t)m->nops + 1) * sizeof *m->run);
    if (!m->run) return hm_err(HM_E_NOMEM, "tflite: out of memory");
    m->nrun = 0;
    for (int oi = 0; oi < m->nops; oi++)
        if (!m->ops[oi].folded && !m->ops[oi].fused) m->run[m->nrun++] = oi;
    drop_load_only(m);
    return HM_OK;
}
