/* tfjs/tfjs_build.c - compiling part of a TF.js graph into the TFLite
 * executor's graph (see tfjs/tfjs.h): the nodes between the fed input and
 * the requested outputs, in dependency order, each translated to TFLite
 * ops (TF's HWIO filters transposed to OHWI, Pack as RESHAPEs and a
 * CONCATENATION), every output shape computed here and then verified op by
 * op by the executor's own preparation (tflite_prep.c), which also packs
 * the weights and plans the memory.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/cpu.h"
#include "core/util.h"
#include "tfjs/tfjs_impl.h"
#include "tflite/tflite_impl.h"

#define FAIL(...) hm_err(HM_E_FORMAT, "tfjs: " __VA_ARGS__)
#define UNSUP(...) hm_err(HM_E_UNSUPPORTED, "tfjs: " __VA_ARGS__)
#define MAX_OUTPUTS 64

typedef struct {
    const hm_tfjs_graph *g;
    hm_tfl_model *m;
    int cap_t, cap_o;
    int *tensor; /* per node: the TFLite tensor of its output 0, -1 before */
} bld;

/* ---- attributes: {"i": "N"}, {"s": base64}, {"b": bool}, {"list": {"i"|"s": [...]}} ---- */

static json_t *attr(const hm_tfjs_node *nd, const char *key) { return nd->attr ? json_object_get(nd->attr, key) : NULL; }

/* An int64 given as a JSON integer or a decimal string; 0 on success. */
static int as_int(json_t *v, long long *out) {
    if (json_is_integer(v)) {
        *out = json_integer_value(v);
        return 0;
    }
    const char *s = json_string_value(v);
    if (!s || !s[0] || strlen(s) > 20) return -1;
    char *end;
    *out = strtoll(s, &end, 10);
    return *end ? -1 : 0;
}

/* Integer attribute `key` in [lo, hi]; def when absent. */
static int attr_int(const hm_tfjs_node *nd, const char *key, long long lo, long long hi, long long def, long long *out) {
    json_t *a = attr(nd, key);
    *out = def;
    if (!a) return HM_OK;
    if (!json_is_object(a) || as_int(json_object_get(a, "i"), out) || *out < lo || *out > hi)
        return FAIL("node '%s': attribute %s is not an integer in %lld..%lld", nd->name, key, lo, hi);
    return HM_OK;
}

static int b64val(int c) {
    if (c >= 'A' && c <= 'Z') return c - 'A';
    if (c >= 'a' && c <= 'z') return c - 'a' + 26;
    if (c >= '0' && c <= '9') return c - '0' + 52;
    return c == '+' || c == '-' ? 62 : c == '/' || c == '_' ? 63 : -1;
}

/* Base64 text (standard or URL alphabet, '=' padding optional) into buf
 * (cap bytes, NUL-terminated); -1 if malformed, too long or not printable
 * ASCII once decoded (the values name options and go into messages). */
static int b64(const char *s, char *buf, size_t cap) {
    size_t n = 0;
    unsigned acc = 0;
    int bits = 0;
    for (; *s && *s != '='; s++) {
        int v = b64val((unsigned char)*s);
        if (v < 0) return -1;
        acc = (acc << 6 | (unsigned)v) & 0xffffff;
        bits += 6;
        if (bits >= 8) {
            bits -= 8;
            const unsigned c = acc >> bits & 0xff;
            if (n + 1 >= cap || c < 0x20 || c > 0x7e) return -1;
            buf[n++] = (char)c;
        }
    }
    buf[n] = 0;
    return 0;
}

/* String attribute `key` ({"s": base64}); def when absent. */
static int attr_str(const hm_tfjs_node *nd, const char *key, const char *def, char *buf, size_t cap) {
    json_t *a = attr(nd, key);
    if (!a) {
        snprintf(buf, cap, "%s", def);
        return HM_OK;
    }
    const char *s = json_is_object(a) ? json_string_value(json_object_get(a, "s")) : NULL;
    if (!s || strlen(s) > 4 * cap || b64(s, buf, cap))
        return FAIL("node '%s': attribute %s is not a short base64 string", nd->name, key);
    return HM_OK;
}

/* List attribute `key` of ints ({"list": {"i": [...]}}): exactly n values
 * (a missing attribute gives def[0..n)). */
static int attr_ints(const hm_tfjs_node *nd, const char *key, int n, const int *def, int *out) {
    json_t *a = attr(nd, key);
    if (!a) {
        memcpy(out, def, (size_t)n * sizeof *out);
        return HM_OK;
    }
    json_t *l = json_is_object(a) ? json_object_get(json_object_get(a, "list"), "i") : NULL;
    if (!json_is_array(l) || json_array_size(l) != (size_t)n)
        return FAIL("node '%s': attribute %s is not a list of %d integers", nd->name, key, n);
    for (int k = 0; k < n; k++) {
        long long v;
        if (as_int(json_array_get(l, (size_t)k), &v) || v < -HM_TFJS_MAX_DIM || v > HM_TFJS_MAX_DIM)
            return FAIL("node '%s': attribute %s[%d] is not a small integer", nd->name, key, k);
        out[k] = (int)v;
    }
    return HM_OK;
}

/* The fused_ops of a _Fused* node: "BiasAdd", then optionally "Relu" or
 * "Relu6" -> *act (HM_TFL_ACT_*). Anything else is unsupported. */
static int fused_ops(const hm_tfjs_node *nd, int *act) {
    json_t *l = json_object_get(json_object_get(attr(nd, "fused_ops"), "list"), "s");
    size_t n = json_is_array(l) ? json_array_size(l) : 0;
    char op[2][32] = {"", ""};
    if (n < 1 || n > 2) return UNSUP("node '%s' (%s): fused_ops must be BiasAdd [+ Relu | Relu6]", nd->name, nd->op);
    for (size_t k = 0; k < n; k++) {
        const char *s = json_string_value(json_array_get(l, k));
        if (!s || strlen(s) > 64 || b64(s, op[k], sizeof op[k]))
            return FAIL("node '%s': fused_ops[%zu] is not a base64 string", nd->name, k);
    }
    *act = HM_TFL_ACT_NONE;
    if (n == 2) *act = !strcmp(op[1], "Relu6") ? HM_TFL_ACT_RELU6 : !strcmp(op[1], "Relu") ? HM_TFL_ACT_RELU : -1;
    if (strcmp(op[0], "BiasAdd") || *act < 0)
        return UNSUP("node '%s' (%s): fused ops %s%s%s (BiasAdd [+ Relu | Relu6] is supported)", nd->name, nd->op,
                     op[0], n == 2 ? ", " : "", n == 2 ? op[1] : "");
    long long nargs;
    int rc = attr_int(nd, "num_args", 0, 16, 1, &nargs);
    if (rc) return rc;
    if (nargs != 1) return UNSUP("node '%s' (%s): num_args %lld (1 is supported)", nd->name, nd->op, nargs);
    return HM_OK;
}

/* ---- the model under construction ---- */

static int64_t numel_of(const hm_tfl_shape *s) {
    int64_t n = 1;
    for (int d = 0; d < s->ndim; d++) {
        n *= s->dims[d];
        if (n > HM_TFJS_MAX_NUMEL) return HM_TFJS_MAX_NUMEL + 1;
    }
    return n;
}

/* A new float32 tensor of shape s named `name` + suffix; its index or an
 * error. data (numel floats), when given, is taken over (hm_alloc'd). */
static int add_tensor(bld *b, const char *name, const char *suffix, const hm_tfl_shape *s, float *data) {
    hm_tfl_model *m = b->m;
    if (m->nt == b->cap_t) {
        int cap = b->cap_t ? 2 * b->cap_t : 64;
        hm_tfl_tensor *t = cap <= HM_TFL_MAX_TENSORS ? realloc(m->t, (size_t)cap * sizeof *t) : NULL;
        if (!t) {
            hm_free(data);
            return cap > HM_TFL_MAX_TENSORS ? UNSUP("the compiled graph needs over %d tensors", HM_TFL_MAX_TENSORS)
                                            : hm_err(HM_E_NOMEM, "tfjs: out of memory");
        }
        m->t = t;
        b->cap_t = cap;
    }
    hm_tfl_tensor *t = &m->t[m->nt];
    memset(t, 0, sizeof *t);
    t->producer = -1;
    t->alias = -1;
    t->type = HM_TFL_FLOAT32;
    t->shape = *s;
    t->numel = numel_of(s);
    t->f = data;
    size_t n = strlen(name), k = strlen(suffix);
    t->name = malloc(n + k + 1);
    if (!t->name) {
        hm_free(data);
        return hm_err(HM_E_NOMEM, "tfjs: out of memory");
    }
    memcpy(t->name, name, n);
    memcpy(t->name + n, suffix, k + 1);
    if (t->numel > HM_TFJS_MAX_NUMEL) {
        m->nt++;
        return FAIL("tensor '%s%s' would have more than %lld elements", name, suffix, (long long)HM_TFJS_MAX_NUMEL);
    }
    return m->nt++;
}

/* A new op (code) reading in[0..nin) and writing tensor out; its index
 * (the options are set by the caller). */
static int add_op(bld *b, int code, const int *in, int nin, int out) {
    hm_tfl_model *m = b->m;
    if (m->nops == b->cap_o) {
        int cap = b->cap_o ? 2 * b->cap_o : 64;
        hm_tfl_op *o = cap <= HM_TFL_MAX_OPS ? realloc(m->ops, (size_t)cap * sizeof *o) : NULL;
        if (!o)
            return cap > HM_TFL_MAX_OPS ? UNSUP("the compiled graph needs over %d ops", HM_TFL_MAX_OPS)
                                        : hm_err(HM_E_NOMEM, "tfjs: out of memory");
        m->ops = o;
        b->cap_o = cap;
    }
    hm_tfl_op *op = &m->ops[m->nops];
    memset(op, 0, sizeof *op);
    op->in = malloc((size_t)(nin + 1) * sizeof *op->in);
    op->out = malloc(sizeof *op->out);
    if (!op->in || !op->out) {
        free(op->in);
        free(op->out);
        return hm_err(HM_E_NOMEM, "tfjs: out of memory");
    }
    memcpy(op->in, in, (size_t)nin * sizeof *in);
    op->nin = nin;
    op->out[0] = out;
    op->nout = 1;
    op->code = code;
    op->version = 1;
    op->dil_w = op->dil_h = 1;
    return m->nops++;
}

/* The constant of node ni (a Const with a weight) or an error. */
static int const_of(const bld *b, int ni, const char *user, const hm_tfjs_wt **w) {
    const hm_tfjs_node *nd = &b->g->nodes[ni];
    if (strcmp(nd->op, "Const") || nd->cst < 0)
        return UNSUP("node '%s': input '%s' must be a constant with a weight", user, nd->name);
    *w = &b->g->consts[nd->cst];
    return HM_OK;
}

/* Input k of node ni as a tensor: its producer's (port 0), a Const's copy. */
static int input_tensor(bld *b, int ni, int k, int *t) {
    const hm_tfjs_node *nd = &b->g->nodes[ni];
    if (k >= nd->nin) return FAIL("node '%s' (%s): input %d is missing", nd->name, nd->op, k);
    const int src = nd->in[k];
    if (nd->port[k] != 0)
        return UNSUP("node '%s': input %d reads output %d of '%s' (only single-output ops are compiled)", nd->name, k,
                     nd->port[k], b->g->nodes[src].name);
    if (b->tensor[src] >= 0) {
        *t = b->tensor[src];
        return HM_OK;
    }
    const hm_tfjs_wt *w;
    int rc = const_of(b, src, nd->name, &w);
    if (rc) return rc;
    if (!w->f) return UNSUP("node '%s': constant input '%s' is not float32", nd->name, w->name);
    float *copy = hm_alloc((size_t)(w->numel ? w->numel : 1) * sizeof(float));
    if (!copy) return HM_E_NOMEM;
    memcpy(copy, w->f, (size_t)w->numel * sizeof(float));
    if ((rc = add_tensor(b, w->name, "", &w->shape, copy)) < 0) return rc;
    *t = b->tensor[src] = rc;
    return HM_OK;
}

/* The window of one spatial axis by TF's rules (those of TFLite too). */
static int window(const hm_tfjs_node *nd, int in, int k, int stride, int valid, int *out) {
    if (stride < 1) return FAIL("node '%s': stride %d", nd->name, stride);
    if (valid && k > in) return FAIL("node '%s': VALID window of %d on an input of %d", nd->name, k, in);
    *out = valid ? (in - k) / stride + 1 : (in + stride - 1) / stride;
    return HM_OK;
}

/* Conv2D, _FusedConv2D, DepthwiseConv2dNative, FusedDepthwiseConv2dNative. */
static int conv(bld *b, int ni, int depthwise, int fused) {
    const hm_tfjs_node *nd = &b->g->nodes[ni];
    int act = HM_TFL_ACT_NONE, rc, x, strides[4], dil[4];
    static const int ones[4] = {1, 1, 1, 1};
    char pad[16], fmt[16];
    if ((fused && (rc = fused_ops(nd, &act))) || (rc = attr_ints(nd, "strides", 4, ones, strides)) ||
        (rc = attr_ints(nd, "dilations", 4, ones, dil)) || (rc = attr_str(nd, "padding", "", pad, sizeof pad)) ||
        (rc = attr_str(nd, "data_format", "NHWC", fmt, sizeof fmt)))
        return rc;
    if (strcmp(fmt, "NHWC") || strides[0] != 1 || strides[3] != 1)
        return UNSUP("node '%s' (%s): data format %s, strides [%d,%d,%d,%d] (NHWC, [1,h,w,1] supported)", nd->name,
                     nd->op, fmt, strides[0], strides[1], strides[2], strides[3]);
    if (dil[0] != 1 || dil[1] != 1 || dil[2] != 1 || dil[3] != 1)
        return UNSUP("node '%s' (%s): dilation is not supported", nd->name, nd->op);
    const int valid = !strcmp(pad, "VALID");
    if (!valid && strcmp(pad, "SAME")) return UNSUP("node '%s' (%s): padding '%s' (SAME, VALID supported)", nd->name, nd->op, pad);
    if (nd->nin != (fused ? 3 : 2)) return FAIL("node '%s' (%s): %d inputs", nd->name, nd->op, nd->nin);
    if ((rc = input_tensor(b, ni, 0, &x))) return rc;
    const hm_tfjs_wt *w, *bias = NULL;
    if ((rc = const_of(b, nd->in[1], nd->name, &w)) || (fused && (rc = const_of(b, nd->in[2], nd->name, &bias))))
        return rc;
    const hm_tfl_shape xs = b->m->t[x].shape; /* a copy: add_tensor may move the tensors */
    if (w->shape.ndim != 4 || !w->f || xs.ndim != 4)
        return FAIL("node '%s' (%s): filter '%s' and input must be 4-d float32", nd->name, nd->op, w->name);
    const int KH = w->shape.dims[0], KW = w->shape.dims[1], I = w->shape.dims[2], O = w->shape.dims[3];
    if (I != xs.dims[3] || KH < 1 || KW < 1 || O < 1)
        return FAIL("node '%s' (%s): filter %dx%dx%dx%d on %d channels", nd->name, nd->op, KH, KW, I, O, xs.dims[3]);
    if (depthwise && O != 1) return UNSUP("node '%s' (%s): depth multiplier %d (1 is supported)", nd->name, nd->op, O);
    const int OC = depthwise ? I : O;
    if (bias && (!bias->f || bias->numel != OC))
        return FAIL("node '%s' (%s): bias '%s' is not %d float32 values", nd->name, nd->op, bias->name, OC);
    /* The filter in TFLite's layout: CONV_2D [O][KH][KW][I] from TF's
     * [KH][KW][I][O]; DEPTHWISE_CONV_2D [1][KH][KW][C], TF's memory as is. */
    const size_t n = (size_t)w->numel;
    float *f = hm_alloc(n * sizeof(float));
    if (!f) return HM_E_NOMEM;
    if (depthwise) {
        memcpy(f, w->f, n * sizeof(float));
    } else {
        for (int ky = 0; ky < KH; ky++)
            for (int kx = 0; kx < KW; kx++)
                for (int i = 0; i < I; i++)
                    for (int o = 0; o < O; o++)
                        f[(((size_t)o * KH + ky) * KW + kx) * I + i] = w->f[(((size_t)ky * KW + kx) * I + i) * O + o];
    }
    hm_tfl_shape fs = {4, {depthwise ? 1 : O, KH, KW, depthwise ? I : I}};
    int ft = add_tensor(b, nd->name, depthwise ? "/filter" : "/filter_ohwi", &fs, f), bt = -1;
    if (ft < 0) return ft;
    if (bias) {
        float *bc = hm_alloc((size_t)OC * sizeof(float));
        if (!bc) return HM_E_NOMEM;
        memcpy(bc, bias->f, (size_t)OC * sizeof(float));
        hm_tfl_shape bs = {1, {OC}};
        if ((bt = add_tensor(b, nd->name, "/bias", &bs, bc)) < 0) return bt;
    }
    int oh, ow;
    if ((rc = window(nd, xs.dims[1], KH, strides[1], valid, &oh)) || (rc = window(nd, xs.dims[2], KW, strides[2], valid, &ow)))
        return rc;
    hm_tfl_shape ys = {4, {xs.dims[0], oh, ow, OC}};
    int y = add_tensor(b, nd->name, "", &ys, NULL);
    if (y < 0) return y;
    const int in[3] = {x, ft, bt};
    int oi = add_op(b, depthwise ? HM_TFL_OP_DEPTHWISE_CONV_2D : HM_TFL_OP_CONV_2D, in, 3, y);
    if (oi < 0) return oi;
    hm_tfl_op *op = &b->m->ops[oi];
    op->padding = valid;
    op->stride_h = strides[1];
    op->stride_w = strides[2];
    op->act = act;
    op->depth_mult = 1;
    b->tensor[ni] = y;
    return HM_OK;
}

/* numpy broadcasting (the executor checks it again). */
static hm_tfl_shape broadcast(const hm_tfl_shape *a, const hm_tfl_shape *c) {
    hm_tfl_shape o;
    o.ndim = a->ndim > c->ndim ? a->ndim : c->ndim;
    for (int d = 0; d < o.ndim; d++) {
        int da = d - (o.ndim - a->ndim) >= 0 ? a->dims[d - (o.ndim - a->ndim)] : 1;
        int dc = d - (o.ndim - c->ndim) >= 0 ? c->dims[d - (o.ndim - c->ndim)] : 1;
        o.dims[d] = da > dc ? da : dc;
    }
    return o;
}

/* A unary or binary elementwise op (ADD, LOGISTIC). */
static int elementwise(bld *b, int ni, int code, int nin) {
    const hm_tfjs_node *nd = &b->g->nodes[ni];
    int in[2], rc;
    if (nd->nin != nin) return FAIL("node '%s' (%s): %d inputs", nd->name, nd->op, nd->nin);
    for (int k = 0; k < nin; k++)
        if ((rc = input_tensor(b, ni, k, &in[k]))) return rc;
    hm_tfl_shape ys = nin == 2 ? broadcast(&b->m->t[in[0]].shape, &b->m->t[in[1]].shape) : b->m->t[in[0]].shape;
    int y = add_tensor(b, nd->name, "", &ys, NULL);
    if (y < 0) return y;
    if ((rc = add_op(b, code, in, nin, y)) < 0) return rc;
    b->tensor[ni] = y;
    return HM_OK;
}

/* RESHAPE of tensor x to s (one -1 allowed), into a new tensor. */
static int reshape_to(bld *b, const char *name, const char *suffix, int x, hm_tfl_shape s) {
    int64_t known = 1, infer = -1;
    for (int d = 0; d < s.ndim; d++) {
        if (s.dims[d] == -1 && infer < 0) infer = d;
        else if (s.dims[d] < 1 || s.dims[d] > HM_TFJS_MAX_DIM) return FAIL("node '%s': reshape to dimension %d", name, s.dims[d]);
        else if ((known *= s.dims[d]) > HM_TFJS_MAX_NUMEL) return FAIL("node '%s': reshape too large", name);
    }
    const hm_tfl_shape req = s;
    if (infer >= 0) {
        if (b->m->t[x].numel % known) return FAIL("node '%s': %lld elements do not reshape by %lld", name,
                                                  (long long)b->m->t[x].numel, (long long)known);
        s.dims[infer] = (int)(b->m->t[x].numel / known);
    }
    int y = add_tensor(b, name, suffix, &s, NULL);
    if (y < 0) return y;
    int oi = add_op(b, HM_TFL_OP_RESHAPE, &x, 1, y);
    if (oi < 0) return oi;
    b->m->ops[oi].has_new_shape = 1;
    b->m->ops[oi].new_shape = req;
    return y;
}

static int reshape(bld *b, int ni) {
    const hm_tfjs_node *nd = &b->g->nodes[ni];
    int x, rc;
    const hm_tfjs_wt *w;
    if (nd->nin != 2) return FAIL("node '%s' (Reshape): %d inputs", nd->name, nd->nin);
    if ((rc = input_tensor(b, ni, 0, &x)) || (rc = const_of(b, nd->in[1], nd->name, &w))) return rc;
    if (!w->i32 || w->shape.ndim > 1 || w->numel > HM_TFL_MAX_DIMS)
        return UNSUP("node '%s' (Reshape): shape '%s' is not a constant int32 vector of at most %d values", nd->name,
                     w->name, HM_TFL_MAX_DIMS);
    hm_tfl_shape s = {(int)w->numel, {0}};
    for (int d = 0; d < s.ndim; d++) s.dims[d] = w->i32[d];
    if ((rc = reshape_to(b, nd->name, "", x, s)) < 0) return rc;
    b->tensor[ni] = rc;
    return HM_OK;
}

/* CONCATENATION of ts[0..n) along axis (negative: from the end). */
static int concat_of(bld *b, int ni, const int *ts, int n, int axis) {
    const hm_tfjs_node *nd = &b->g->nodes[ni];
    hm_tfl_shape ys = b->m->t[ts[0]].shape;
    if (axis < 0) axis += ys.ndim;
    if (axis < 0 || axis >= ys.ndim) return FAIL("node '%s' (%s): axis out of range for rank %d", nd->name, nd->op, ys.ndim);
    int64_t total = 0;
    for (int k = 0; k < n; k++) {
        if (b->m->t[ts[k]].shape.ndim != ys.ndim) return FAIL("node '%s' (%s): inputs of different ranks", nd->name, nd->op);
        total += b->m->t[ts[k]].shape.dims[axis];
    }
    if (total > HM_TFJS_MAX_DIM) return FAIL("node '%s' (%s): concatenated dimension too large", nd->name, nd->op);
    ys.dims[axis] = (int)total;
    int y = add_tensor(b, nd->name, "", &ys, NULL);
    if (y < 0) return y;
    int oi = add_op(b, HM_TFL_OP_CONCATENATION, ts, n, y);
    if (oi < 0) return oi;
    b->m->ops[oi].axis = axis;
    b->tensor[ni] = y;
    return HM_OK;
}

static int concat(bld *b, int ni) {
    const hm_tfjs_node *nd = &b->g->nodes[ni];
    const hm_tfjs_wt *w;
    int rc, *ts;
    if (nd->nin < 2) return FAIL("node '%s' (ConcatV2): %d inputs", nd->name, nd->nin);
    if ((rc = const_of(b, nd->in[nd->nin - 1], nd->name, &w))) return rc;
    if (!w->i32 || w->numel != 1) return UNSUP("node '%s' (ConcatV2): axis is not a constant int32 scalar", nd->name);
    if (!(ts = malloc((size_t)nd->nin * sizeof *ts))) return hm_err(HM_E_NOMEM, "tfjs: out of memory");
    for (int k = 0; k < nd->nin - 1 && !rc; k++) rc = input_tensor(b, ni, k, &ts[k]);
    if (!rc) rc = concat_of(b, ni, ts, nd->nin - 1, w->i32[0]);
    free(ts);
    return rc;
}

/* Pack: each input given a dimension of 1 at axis, then concatenated. */
static int pack(bld *b, int ni) {
    const hm_tfjs_node *nd = &b->g->nodes[ni];
    long long axis;
    int rc, *ts;
    if (nd->nin < 1) return FAIL("node '%s' (Pack): no inputs", nd->name);
    if ((rc = attr_int(nd, "axis", -HM_TFL_MAX_DIMS, HM_TFL_MAX_DIMS, 0, &axis))) return rc;
    if (!(ts = malloc((size_t)nd->nin * sizeof *ts))) return hm_err(HM_E_NOMEM, "tfjs: out of memory");
    for (int k = 0; k < nd->nin && !rc; k++) {
        int x;
        if ((rc = input_tensor(b, ni, k, &x))) break;
        hm_tfl_shape s = b->m->t[x].shape;
        int a = axis < 0 ? (int)axis + s.ndim + 1 : (int)axis;
        if (a < 0 || a > s.ndim || s.ndim >= HM_TFL_MAX_DIMS) {
            rc = FAIL("node '%s' (Pack): axis %lld for inputs of rank %d", nd->name, axis, s.ndim);
            break;
        }
        memmove(&s.dims[a + 1], &s.dims[a], (size_t)(s.ndim - a) * sizeof(int));
        s.dims[a] = 1;
        s.ndim++;
        char suffix[32];
        snprintf(suffix, sizeof suffix, "/pack_%d", k);
        if ((ts[k] = reshape_to(b, nd->name, suffix, x, s)) < 0) rc = ts[k];
    }
    if (!rc) {
        int a = axis < 0 ? (int)axis + b->m->t[ts[0]].shape.ndim : (int)axis;
        rc = concat_of(b, ni, ts, nd->nin, a);
    }
    free(ts);
    return rc;
}

static int translate(bld *b, int ni) {
    const hm_tfjs_node *nd = &b->g->nodes[ni];
    const char *op = nd->op;
    if (!strcmp(op, "Const")) return HM_OK; /* made where an op reads it */
    if (!strcmp(op, "Identity")) {
        int x, rc = input_tensor(b, ni, 0, &x);
        if (!rc) b->tensor[ni] = x;
        return rc;
    }
    if (!strcmp(op, "_FusedConv2D")) return conv(b, ni, 0, 1);
    if (!strcmp(op, "Conv2D")) return conv(b, ni, 0, 0);
    if (!strcmp(op, "FusedDepthwiseConv2dNative")) return conv(b, ni, 1, 1);
    if (!strcmp(op, "DepthwiseConv2dNative")) return conv(b, ni, 1, 0);
    if (!strcmp(op, "AddV2") || !strcmp(op, "Add")) return elementwise(b, ni, HM_TFL_OP_ADD, 2);
    if (!strcmp(op, "Sigmoid")) return elementwise(b, ni, HM_TFL_OP_LOGISTIC, 1);
    if (!strcmp(op, "Reshape")) return reshape(b, ni);
    if (!strcmp(op, "ConcatV2")) return concat(b, ni);
    if (!strcmp(op, "Pack")) return pack(b, ni);
    return UNSUP("node '%s': op %s is not supported", nd->name, op);
}

/* The nodes outputs depend on, stopping at `input`, dependencies first
 * (iterative depth-first search: a hostile graph may be 65536 deep). */
static int schedule(const hm_tfjs_graph *g, int input, const int *outs, int nout, int *order, int *norder) {
    unsigned char *st = calloc((size_t)g->n + 1, 1); /* 0 new, 1 on the path, 2 done */
    int *stack = malloc(((size_t)g->n + 1) * sizeof *stack), *next = calloc((size_t)g->n + 1, sizeof *next);
    int rc = HM_OK, n = 0;
    if (!st || !stack || !next) rc = hm_err(HM_E_NOMEM, "tfjs: out of memory");
    for (int o = 0; o < nout && !rc; o++) {
        if (st[outs[o]]) continue;
        int sp = 0;
        stack[sp++] = outs[o];
        st[outs[o]] = 1;
        while (sp && !rc) {
            const int v = stack[sp - 1];
            const hm_tfjs_node *nd = &g->nodes[v];
            if (v != input && next[v] < nd->nin) {
                const int u = nd->in[next[v]++];
                if (st[u] == 1) rc = FAIL("the graph has a cycle through node '%s'", g->nodes[u].name);
                else if (!st[u]) st[u] = 1, stack[sp++] = u;
                continue;
            }
            st[v] = 2;
            order[n++] = v;
            sp--;
        }
    }
    free(st);
    free(stack);
    free(next);
    *norder = n;
    return rc;
}

int hm_tfjs_compile(const hm_tfjs_graph *g, const char *input, const hm_tfl_shape *in_shape,
                    const char *const *outputs, int nout, hm_tfl_model **out) {
    if (!out) return hm_err(HM_E_ARG, "hm_tfjs_compile: NULL output");
    *out = NULL;
    if (!g || !input || !in_shape || !outputs || nout < 1 || nout > MAX_OUTPUTS)
        return hm_err(HM_E_ARG, "hm_tfjs_compile: bad arguments");
    if (in_shape->ndim < 1 || in_shape->ndim > HM_TFL_MAX_DIMS) return hm_err(HM_E_ARG, "tfjs: input rank %d", in_shape->ndim);
    for (int d = 0; d < in_shape->ndim; d++)
        if (in_shape->dims[d] < 1 || in_shape->dims[d] > HM_TFJS_MAX_DIM)
            return hm_err(HM_E_ARG, "tfjs: input dimension %d is %d", d, in_shape->dims[d]);
    if (numel_of(in_shape) > HM_TFJS_MAX_NUMEL) return hm_err(HM_E_ARG, "tfjs: input too large");
    int rc = hm_isa_status();
    if (rc) return rc;
    const int in_node = hm_tfjs_find(g, input);
    if (in_node < 0) return hm_err(HM_E_ARG, "tfjs: no node named '%s' to feed", input);
    int outs[MAX_OUTPUTS];
    for (int k = 0; k < nout; k++)
        if (!outputs[k] || (outs[k] = hm_tfjs_find(g, outputs[k])) < 0)
            return hm_err(HM_E_ARG, "tfjs: no output node named '%s'", outputs[k] ? outputs[k] : "(null)");
    bld b = {.g = g};
    int *order = malloc(((size_t)g->n + 1) * sizeof *order), norder = 0;
    b.tensor = malloc(((size_t)g->n + 1) * sizeof *b.tensor);
    b.m = calloc(1, sizeof *b.m);
    if (!order || !b.tensor || !b.m) {
        rc = hm_err(HM_E_NOMEM, "tfjs: out of memory");
        goto done;
    }
    b.m->isa = (int)hm_isa_active();
    b.m->k = hm_kernels_for(b.m->isa); /* as hm_tfl_load_mem: that level's kernel table */
    for (int i = 0; i < g->n; i++) b.tensor[i] = -1;
    if ((rc = schedule(g, in_node, outs, nout, order, &norder))) goto done;
    int it = add_tensor(&b, g->nodes[in_node].name, "", in_shape, NULL);
    if (it < 0) {
        rc = it;
        goto done;
    }
    b.tensor[in_node] = it;
    for (int k = 0; k < norder && !rc; k++)
        if (order[k] != in_node) rc = translate(&b, order[k]);
    if (rc) goto done;
    b.m->inputs = malloc(sizeof *b.m->inputs);
    b.m->outputs = malloc((size_t)nout * sizeof *b.m->outputs);
    if (!b.m->inputs || !b.m->outputs) {
        rc = hm_err(HM_E_NOMEM, "tfjs: out of memory");
        goto done;
    }
    b.m->inputs[0] = it;
    b.m->ninputs = 1;
    for (int k = 0; k < nout; k++) {
        if (b.tensor[outs[k]] < 0) {
            rc = UNSUP("output '%s' is a constant, not computed", outputs[k]);
            goto done;
        }
        b.m->outputs[b.m->noutputs++] = b.tensor[outs[k]];
    }
    if ((rc = hm_tfl_prepare(b.m)) || (rc = hm_tfl_plan(b.m))) goto done;
    *out = b.m;
    b.m = NULL;
done:
    hm_tfl_free(b.m);
    free(order);
    free(b.tensor);
    return rc;
}
