/* tflite/tflite_read.c - the .tflite FlatBuffer -> hm_tfl_model (tensors with
 * their constant data decoded to fp32 / int32, operators with their options).
 *
 * Only what the executor needs is read: Model.version, operator_codes,
 * buffers and the first subgraph (tensors, inputs, outputs, operators).
 * Everything read is bounds-checked by tflite_fb.c; here the values are
 * checked: indices against their tables, shapes against the limits in
 * tflite_impl.h, constant sizes against shapes. Field ids are those of
 * tensorflow/lite/schema/schema.fbs (schema version 3, with the
 * builtin_code extension and buffers stored after the FlatBuffer).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/util.h"
#include "tflite/tflite_fb.h"
#include "tflite/tflite_impl.h"
#include "tflite/tflite_sparse.h"

/* Field ids. A union takes two ids: its type (ubyte), then its value. */
enum { MODEL_VERSION = 0, MODEL_OPCODES = 1, MODEL_SUBGRAPHS = 2, MODEL_BUFFERS = 4 };
enum { OPCODE_DEPRECATED = 0, OPCODE_CUSTOM = 1, OPCODE_VERSION = 2, OPCODE_BUILTIN = 3 };
enum { SUB_TENSORS = 0, SUB_INPUTS = 1, SUB_OUTPUTS = 2, SUB_OPERATORS = 3 };
enum { TENSOR_SHAPE = 0, TENSOR_TYPE = 1, TENSOR_BUFFER = 2, TENSOR_NAME = 3, TENSOR_VARIABLE = 5,
       TENSOR_SPARSITY = 6 };
enum { OP_OPCODE = 0, OP_INPUTS = 1, OP_OUTPUTS = 2, OP_OPTIONS_TYPE = 3, OP_OPTIONS = 4 };
enum { BUFFER_DATA = 0, BUFFER_OFFSET = 1, BUFFER_SIZE = 2 };

/* BuiltinOptions union members. */
enum { OPT_CONV = 1, OPT_DEPTHWISE = 2, OPT_POOL = 5, OPT_FC = 8, OPT_CONCAT = 10, OPT_ADD = 11,
       OPT_RESIZE_BILINEAR = 15, OPT_RESHAPE = 17, OPT_PAD = 22, OPT_REDUCER = 27, OPT_STRIDED_SLICE = 32,
       OPT_DEQUANTIZE = 38, OPT_DEPTH_TO_SPACE = 94, OPT_DENSIFY = 99 };

#define BUILTIN_CUSTOM 32

const char *hm_tfl_op_name(int code) {
    switch (code) {
    case HM_TFL_OP_ADD: return "ADD";
    case HM_TFL_OP_CONCATENATION: return "CONCATENATION";
    case HM_TFL_OP_CONV_2D: return "CONV_2D";
    case HM_TFL_OP_DEPTHWISE_CONV_2D: return "DEPTHWISE_CONV_2D";
    case HM_TFL_OP_DEPTH_TO_SPACE: return "DEPTH_TO_SPACE";
    case HM_TFL_OP_DEQUANTIZE: return "DEQUANTIZE";
    case HM_TFL_OP_STRIDED_SLICE: return "STRIDED_SLICE";
    case HM_TFL_OP_DENSIFY: return "DENSIFY";
    case HM_TFL_OP_FULLY_CONNECTED: return "FULLY_CONNECTED";
    case HM_TFL_OP_LOGISTIC: return "LOGISTIC";
    case HM_TFL_OP_MAX_POOL_2D: return "MAX_POOL_2D";
    case HM_TFL_OP_RESHAPE: return "RESHAPE";
    case HM_TFL_OP_RESIZE_BILINEAR: return "RESIZE_BILINEAR";
    case HM_TFL_OP_PAD: return "PAD";
    case HM_TFL_OP_MEAN: return "MEAN";
    case HM_TFL_OP_PRELU: return "PRELU";
    case BUILTIN_CUSTOM: return "CUSTOM";
    default: return NULL;
    }
}

/* The options union member each supported op carries (0: none), and the
 * highest op version whose float semantics this executor implements (the
 * versions the TFLite runtime registers for these kernels). */
static int expected_options(int code, int *max_version) {
    switch (code) {
    case HM_TFL_OP_ADD: *max_version = 5; return OPT_ADD;
    case HM_TFL_OP_CONCATENATION: *max_version = 4; return OPT_CONCAT;
    case HM_TFL_OP_CONV_2D: *max_version = 8; return OPT_CONV;
    case HM_TFL_OP_DEPTHWISE_CONV_2D: *max_version = 7; return OPT_DEPTHWISE;
    case HM_TFL_OP_DEQUANTIZE: *max_version = 6; return OPT_DEQUANTIZE;
    case HM_TFL_OP_DEPTH_TO_SPACE: *max_version = 2; return OPT_DEPTH_TO_SPACE;
    case HM_TFL_OP_STRIDED_SLICE: *max_version = 8; return OPT_STRIDED_SLICE;
    case HM_TFL_OP_DENSIFY: *max_version = 1; return OPT_DENSIFY;
    case HM_TFL_OP_FULLY_CONNECTED: *max_version = 13; return OPT_FC;
    case HM_TFL_OP_LOGISTIC: *max_version = 3; return 0;
    case HM_TFL_OP_MAX_POOL_2D: *max_version = 3; return OPT_POOL;
    case HM_TFL_OP_RESHAPE: *max_version = 1; return OPT_RESHAPE;
    case HM_TFL_OP_RESIZE_BILINEAR: *max_version = 4; return OPT_RESIZE_BILINEAR;
    case HM_TFL_OP_PAD: *max_version = 4; return OPT_PAD;
    case HM_TFL_OP_MEAN: *max_version = 3; return OPT_REDUCER;
    case HM_TFL_OP_PRELU: *max_version = 1; return 0;
    default: *max_version = 0; return -1;
    }
}

static const char *type_name(int t) {
    static const char *names[] = {"FLOAT32", "FLOAT16", "INT32", "UINT8", "INT64", "STRING", "BOOL", "INT16",
                                  "COMPLEX64", "INT8", "FLOAT64", "COMPLEX128", "UINT64", "RESOURCE", "VARIANT",
                                  "UINT32", "UINT16", "INT4"};
    return t >= 0 && t < (int)(sizeof names / sizeof *names) ? names[t] : "unknown";
}

/* IEEE binary16 -> binary32, exact for every value (subnormals, inf, NaN). */
static float half_to_float(uint16_t h) {
    uint32_t sign = (uint32_t)(h >> 15) << 31, e = (h >> 10) & 31, man = h & 1023, bits;
    if (e == 31) {
        bits = sign | 0x7f800000u | man << 13;
    } else if (e) {
        bits = sign | (e + 112) << 23 | man << 13;
    } else if (man) {
        /* Subnormal: normalise the mantissa. */
        int shift = 0;
        while (!(man & 1024)) {
            man <<= 1;
            shift++;
        }
        bits = sign | (uint32_t)(113 - shift) << 23 | (man & 1023) << 13;
    } else {
        bits = sign;
    }
    float f;
    memcpy(&f, &bits, 4);
    return f;
}

/* A copy of a FlatBuffer string, cut at HM_TFL_NAME_MAX, every byte outside
 * printable ASCII replaced by '?' so names are safe in one-line messages. */
static char *clean_name(const uint8_t *s, uint32_t len) {
    size_t n = len > HM_TFL_NAME_MAX ? HM_TFL_NAME_MAX : len;
    char *out = malloc(n + 1);
    if (!out) return NULL;
    for (size_t i = 0; i < n; i++) out[i] = s[i] >= 0x20 && s[i] < 0x7f ? (char)s[i] : '?';
    out[n] = 0;
    return out;
}

typedef struct {
    hm_fb f;
    hm_fb_vec buffers;
    hm_fb_vec codes;
} reader;

/* The bytes of buffer bi: inline data, else the range after the FlatBuffer
 * (offset > 1 by the schema's convention); *len 0 when it holds none. */
static int buffer_bytes(const reader *r, uint32_t bi, const uint8_t **data, size_t *len) {
    char what[64];
    snprintf(what, sizeof what, "Model.buffers[%u]", bi);
    hm_fb_table bt;
    int rc = hm_fb_vec_table(&r->f, &r->buffers, bi, what, &bt);
    if (rc) return rc;
    hm_fb_vec v;
    if ((rc = hm_fb_vector(&r->f, &bt, BUFFER_DATA, 1, what, &v))) return rc;
    if (v.len) {
        *data = r->f.b + v.data;
        *len = v.len;
        return HM_OK;
    }
    uint64_t off, size;
    if ((rc = hm_fb_u64(&r->f, &bt, BUFFER_OFFSET, 0, what, &off))) return rc;
    if ((rc = hm_fb_u64(&r->f, &bt, BUFFER_SIZE, 0, what, &size))) return rc;
    if (off > 1) {
        if (off > r->f.n || size > r->f.n - off)
            return hm_err(HM_E_FORMAT, "tflite: %s: external data [%llu, +%llu) is outside the %zu-byte file", what,
                          (unsigned long long)off, (unsigned long long)size, r->f.n);
        *data = r->f.b + off;
        *len = (size_t)size;
        return HM_OK;
    }
    *data = NULL;
    *len = 0;
    return HM_OK;
}

/* fp32 value k of `data` holding FLOAT32 or FLOAT16 values. */
static float value_at(const uint8_t *data, int type, size_t k) {
    if (type == HM_TFL_FLOAT16) return half_to_float((uint16_t)(data[2 * k] | data[2 * k + 1] << 8));
    float v;
    memcpy(&v, data + 4 * k, 4);
    return v;
}

/* A constant stored sparse: its values scattered into the dense fp32
 * layout its SparsityParameters give (zeros elsewhere). */
static int read_sparse(const reader *r, const hm_fb_table *tt, int i, hm_tfl_tensor *t, const uint8_t *data,
                       size_t len, size_t es) {
    char what[96];
    snprintf(what, sizeof what, "Model.subgraphs[0].tensors[%d].sparsity", i);
    hm_fb_table sp;
    int present = 0, rc;
    if ((rc = hm_fb_subtable(&r->f, tt, TENSOR_SPARSITY, what, &sp, &present))) return rc;
    if (!present) return HM_OK;
    if (t->type == HM_TFL_INT32)
        return hm_err(HM_E_UNSUPPORTED, "tflite: tensor %d '%s': sparse INT32 tensors are not supported", i, t->name);
    if (!len) return hm_err(HM_E_FORMAT, "tflite: tensor %d '%s': sparse but without constant data", i, t->name);
    if (len % es)
        return hm_err(HM_E_FORMAT, "tflite: tensor %d '%s': sparse data of %zu bytes is not whole values", i, t->name,
                      len);
    int64_t *off = NULL, stored = (int64_t)(len / es);
    if ((rc = hm_tfl_sparse_layout(&r->f, &sp, i, t, stored, &off))) return rc;
    float *dst = hm_alloc((size_t)t->numel * sizeof(float));
    if (!dst) {
        free(off);
        return hm_err(HM_E_NOMEM, "tflite: out of memory");
    }
    memset(dst, 0, (size_t)t->numel * sizeof(float));
    for (int64_t k = 0; k < stored; k++) dst[off[k]] = value_at(data, t->type, (size_t)k);
    free(off);
    t->f = dst;
    t->sparse = 1;
    return HM_OK;
}

/* Tensor i: name, shape, type, and its constant data decoded (fp16 to
 * fp32). On error the code is returned; what t already owns is freed with
 * the model. */
static int read_tensor(const reader *r, const hm_fb_vec *tv, int i, hm_tfl_tensor *t) {
    const hm_fb *f = &r->f;
    char what[80];
    snprintf(what, sizeof what, "Model.subgraphs[0].tensors[%d]", i);
    hm_fb_table tt;
    int rc = hm_fb_vec_table(f, tv, (uint32_t)i, what, &tt);
    if (rc) return rc;
    const uint8_t *s;
    uint32_t slen;
    if ((rc = hm_fb_string(f, &tt, TENSOR_NAME, what, &s, &slen))) return rc;
    t->name = clean_name(s ? s : (const uint8_t *)"", s ? slen : 0);
    if (!t->name) return hm_err(HM_E_NOMEM, "tflite: out of memory");

    hm_fb_vec sv;
    if ((rc = hm_fb_vector(f, &tt, TENSOR_SHAPE, 4, what, &sv))) return rc;
    if (sv.len > HM_TFL_MAX_DIMS)
        return hm_err(HM_E_UNSUPPORTED, "tflite: tensor %d '%s': rank %u (at most %d)", i, t->name, sv.len,
                      HM_TFL_MAX_DIMS);
    t->shape.ndim = (int)sv.len;
    t->numel = 1;
    for (uint32_t d = 0; d < sv.len; d++) {
        int32_t v = hm_fb_vec_i32(f, &sv, d);
        if (v < 0 || v > HM_TFL_MAX_DIM)
            return hm_err(HM_E_FORMAT, "tflite: tensor %d '%s': dimension %u is %d", i, t->name, d, v);
        if (v == 0) return hm_err(HM_E_UNSUPPORTED, "tflite: tensor %d '%s': empty (dimension %u is 0)", i, t->name, d);
        t->shape.dims[d] = v;
        t->numel *= v;
        if (t->numel > HM_TFL_MAX_NUMEL)
            return hm_err(HM_E_UNSUPPORTED, "tflite: tensor %d '%s': more than %lld elements", i, t->name,
                          (long long)HM_TFL_MAX_NUMEL);
    }

    int8_t type;
    uint8_t var;
    uint32_t bi;
    size_t p;
    if ((rc = hm_fb_i8(f, &tt, TENSOR_TYPE, 0, what, &type))) return rc;
    if ((rc = hm_fb_u8(f, &tt, TENSOR_VARIABLE, 0, what, &var))) return rc;
    if ((rc = hm_fb_u32(f, &tt, TENSOR_BUFFER, 0, what, &bi))) return rc;
    if ((rc = hm_fb_field(f, &tt, TENSOR_SPARSITY, 4, what, &p))) return rc;
    if (type != HM_TFL_FLOAT32 && type != HM_TFL_FLOAT16 && type != HM_TFL_INT32)
        return hm_err(HM_E_UNSUPPORTED, "tflite: tensor %d '%s': type %s (only FLOAT32, FLOAT16 weights, INT32 "
                      "constants)", i, t->name, type_name(type));
    if (var) return hm_err(HM_E_UNSUPPORTED, "tflite: tensor %d '%s': variable tensors are not supported", i, t->name);
    if (bi >= r->buffers.len)
        return hm_err(HM_E_FORMAT, "tflite: tensor %d '%s': buffer %u of %u", i, t->name, bi, r->buffers.len);
    t->type = type;

    const uint8_t *data = NULL;
    size_t len = 0;
    if (bi && (rc = buffer_bytes(r, bi, &data, &len))) return rc;
    size_t es = type == HM_TFL_FLOAT16 ? 2 : 4, need = (size_t)t->numel * es;
    if (p) return read_sparse(r, &tt, i, t, data, len, es);
    if (!len) return HM_OK; /* an activation */
    if (len != need)
        return hm_err(HM_E_FORMAT, "tflite: tensor %d '%s': buffer %u holds %zu bytes, its shape needs %zu", i,
                      t->name, bi, len, need);
    void *dst = hm_alloc((size_t)t->numel * 4);
    if (!dst) return HM_E_NOMEM;
    if (type == HM_TFL_INT32) {
        memcpy(dst, data, need);
        t->i32 = dst;
    } else if (type == HM_TFL_FLOAT32) {
        memcpy(dst, data, need);
        t->f = dst;
    } else {
        float *o = dst;
        for (int64_t k = 0; k < t->numel; k++) o[k] = half_to_float((uint16_t)(data[2 * k] | data[2 * k + 1] << 8));
        t->f = dst;
    }
    return HM_OK;
}

/* A tensor-index vector (op or graph inputs/outputs) into a fresh int array.
 * -1 (an omitted optional input) only where allow_omitted. */
static int read_indices(const reader *r, const hm_fb_table *tt, int id, int nt, int allow_omitted, const char *what,
                        int **out, int *n) {
    hm_fb_vec v;
    int rc = hm_fb_vector(&r->f, tt, id, 4, what, &v);
    if (rc) return rc;
    if (v.len > HM_TFL_MAX_OP_IO) return hm_err(HM_E_UNSUPPORTED, "tflite: %s: %u tensors listed", what, v.len);
    int *a = malloc((v.len ? v.len : 1) * sizeof *a);
    if (!a) return hm_err(HM_E_NOMEM, "tflite: out of memory");
    for (uint32_t k = 0; k < v.len; k++) {
        int32_t x = hm_fb_vec_i32(&r->f, &v, k);
        if (x >= nt || x < -1 || (x == -1 && !allow_omitted)) {
            free(a);
            return hm_err(HM_E_FORMAT, "tflite: %s: tensor index %d (of %d tensors)", what, x, nt);
        }
        a[k] = x;
    }
    *out = a;
    *n = (int)v.len;
    return HM_OK;
}

/* The fields of options table ot (union member otype) into op; unset fields
 * take the schema's defaults. On error op's options are unchanged. */
static int read_options(const reader *r, const hm_fb_table *ot, int otype, const char *what, hm_tfl_op *op) {
    const hm_fb *f = &r->f;
    int8_t pad = 0, act = 0;
    int32_t sw = 0, sh = 0, dw = 1, dh = 1, fw = 0, fh = 0, dm = 0, axis = 0;
    uint8_t b0 = 0, b1 = 0;
    int8_t wf = 0;
    int rc = HM_OK;
    switch (otype) {
    case OPT_CONV:
        if ((rc = hm_fb_i8(f, ot, 0, 0, what, &pad)) || (rc = hm_fb_i32(f, ot, 1, 0, what, &sw)) ||
            (rc = hm_fb_i32(f, ot, 2, 0, what, &sh)) || (rc = hm_fb_i8(f, ot, 3, 0, what, &act)) ||
            (rc = hm_fb_i32(f, ot, 4, 1, what, &dw)) || (rc = hm_fb_i32(f, ot, 5, 1, what, &dh)))
            return rc;
        break;
    case OPT_DEPTHWISE:
        if ((rc = hm_fb_i8(f, ot, 0, 0, what, &pad)) || (rc = hm_fb_i32(f, ot, 1, 0, what, &sw)) ||
            (rc = hm_fb_i32(f, ot, 2, 0, what, &sh)) || (rc = hm_fb_i32(f, ot, 3, 0, what, &dm)) ||
            (rc = hm_fb_i8(f, ot, 4, 0, what, &act)) || (rc = hm_fb_i32(f, ot, 5, 1, what, &dw)) ||
            (rc = hm_fb_i32(f, ot, 6, 1, what, &dh)))
            return rc;
        break;
    case OPT_POOL:
        if ((rc = hm_fb_i8(f, ot, 0, 0, what, &pad)) || (rc = hm_fb_i32(f, ot, 1, 0, what, &sw)) ||
            (rc = hm_fb_i32(f, ot, 2, 0, what, &sh)) || (rc = hm_fb_i32(f, ot, 3, 0, what, &fw)) ||
            (rc = hm_fb_i32(f, ot, 4, 0, what, &fh)) || (rc = hm_fb_i8(f, ot, 5, 0, what, &act)))
            return rc;
        break;
    case OPT_FC:
        if ((rc = hm_fb_i8(f, ot, 0, 0, what, &act)) || (rc = hm_fb_i8(f, ot, 1, 0, what, &wf)) ||
            (rc = hm_fb_u8(f, ot, 2, 0, what, &b0)))
            return rc;
        break;
    case OPT_CONCAT:
        if ((rc = hm_fb_i32(f, ot, 0, 0, what, &axis)) || (rc = hm_fb_i8(f, ot, 1, 0, what, &act))) return rc;
        break;
    case OPT_ADD:
        if ((rc = hm_fb_i8(f, ot, 0, 0, what, &act))) return rc;
        break;
    case OPT_RESIZE_BILINEAR:
        if ((rc = hm_fb_u8(f, ot, 2, 0, what, &b0)) || (rc = hm_fb_u8(f, ot, 3, 0, what, &b1))) return rc;
        break;
    case OPT_REDUCER:
        if ((rc = hm_fb_u8(f, ot, 0, 0, what, &b0))) return rc;
        break;
    case OPT_DEPTH_TO_SPACE: {
        int32_t bs;
        if ((rc = hm_fb_i32(f, ot, 0, 0, what, &bs))) return rc;
        op->block_size = bs;
        break;
    }
    case OPT_STRIDED_SLICE: {
        int32_t v[5];
        uint8_t o;
        for (int k = 0; k < 5; k++)
            if ((rc = hm_fb_i32(f, ot, k, 0, what, &v[k]))) return rc;
        if ((rc = hm_fb_u8(f, ot, 5, 0, what, &o))) return rc;
        op->begin_mask = v[0];
        op->end_mask = v[1];
        op->ellipsis_mask = v[2];
        op->new_axis_mask = v[3];
        op->shrink_axis_mask = v[4];
        op->slice_offset = o != 0;
        break;
    }
    case OPT_RESHAPE: {
        hm_fb_vec v;
        if ((rc = hm_fb_vector(f, ot, 0, 4, what, &v))) return rc;
        if (v.data) {
            if (v.len > HM_TFL_MAX_DIMS)
                return hm_err(HM_E_UNSUPPORTED, "tflite: %s: new_shape of rank %u", what, v.len);
            op->has_new_shape = 1;
            op->new_shape.ndim = (int)v.len;
            for (uint32_t k = 0; k < v.len; k++) op->new_shape.dims[k] = hm_fb_vec_i32(f, &v, k);
        }
        break;
    }
    default: /* PadOptions, DequantizeOptions, DensifyOptions: no fields */
        break;
    }
    op->padding = pad;
    op->act = act;
    op->stride_w = sw;
    op->stride_h = sh;
    op->dil_w = dw;
    op->dil_h = dh;
    op->filter_w = fw;
    op->filter_h = fh;
    op->depth_mult = dm;
    op->axis = axis;
    op->weights_format = wf;
    op->keep_num_dims = otype == OPT_FC ? b0 != 0 : 0;
    op->keep_dims = otype == OPT_REDUCER ? b0 != 0 : 0;
    op->align_corners = otype == OPT_RESIZE_BILINEAR ? b0 != 0 : 0;
    op->half_pixel = otype == OPT_RESIZE_BILINEAR ? b1 != 0 : 0;
    return HM_OK;
}

/* Operator i: its op code resolved (custom and unknown ops refused), version,
 * tensor indices and options. */
static int read_op(const reader *r, const hm_fb_vec *ov, int i, int nt, hm_tfl_op *op) {
    const hm_fb *f = &r->f;
    char what[80];
    snprintf(what, sizeof what, "Model.subgraphs[0].operators[%d]", i);
    hm_fb_table ot;
    int rc = hm_fb_vec_table(f, ov, (uint32_t)i, what, &ot);
    if (rc) return rc;
    uint32_t oc;
    if ((rc = hm_fb_u32(f, &ot, OP_OPCODE, 0, what, &oc))) return rc;
    if (oc >= r->codes.len)
        return hm_err(HM_E_FORMAT, "tflite: %s: opcode_index %u (of %u operator codes)", what, oc, r->codes.len);

    char cwhat[64];
    snprintf(cwhat, sizeof cwhat, "Model.operator_codes[%u]", oc);
    hm_fb_table ct;
    int8_t dep;
    int32_t code, version;
    if ((rc = hm_fb_vec_table(f, &r->codes, oc, cwhat, &ct)) || (rc = hm_fb_i8(f, &ct, OPCODE_DEPRECATED, 0, cwhat, &dep)) ||
        (rc = hm_fb_i32(f, &ct, OPCODE_BUILTIN, 0, cwhat, &code)) ||
        (rc = hm_fb_i32(f, &ct, OPCODE_VERSION, 1, cwhat, &version)))
        return rc;
    /* Old files set only the byte field, new ones both (the byte saturating
     * at PLACEHOLDER_FOR_GREATER_OP_CODES = 127): the larger one is the op. */
    if (dep > code) code = dep;
    if (code < 0) return hm_err(HM_E_FORMAT, "tflite: %s: builtin code %d", cwhat, code);
    if (code == BUILTIN_CUSTOM) {
        const uint8_t *s;
        uint32_t slen;
        if ((rc = hm_fb_string(f, &ct, OPCODE_CUSTOM, cwhat, &s, &slen))) return rc;
        char *name = clean_name(s ? s : (const uint8_t *)"", s ? slen : 0);
        rc = hm_err(HM_E_UNSUPPORTED, "tflite: op %d: custom op '%s' is not supported", i, name ? name : "");
        free(name);
        return rc;
    }
    int maxv, want = expected_options(code, &maxv);
    if (want < 0) return hm_err(HM_E_UNSUPPORTED, "tflite: op %d: builtin op %d is not supported", i, code);
    const char *name = hm_tfl_op_name(code);
    if (version < 1) return hm_err(HM_E_FORMAT, "tflite: op %d (%s): version %d", i, name, version);
    if (version > maxv)
        return hm_err(HM_E_UNSUPPORTED, "tflite: op %d (%s): version %d (versions 1..%d are supported)", i, name,
                      version, maxv);
    op->code = code;
    op->version = version;

    if ((rc = read_indices(r, &ot, OP_INPUTS, nt, 1, what, &op->in, &op->nin))) return rc;
    if ((rc = read_indices(r, &ot, OP_OUTPUTS, nt, 0, what, &op->out, &op->nout))) return rc;

    uint8_t otype;
    if ((rc = hm_fb_u8(f, &ot, OP_OPTIONS_TYPE, 0, what, &otype))) return rc;
    if (otype && otype != want)
        return hm_err(HM_E_FORMAT, "tflite: op %d (%s): builtin_options is union member %u, expected %d", i, name,
                      otype, want);
    /* Options absent: every field takes its schema default (the dilations 1). */
    op->dil_w = op->dil_h = 1;
    hm_fb_table opt;
    int present = 0;
    if (otype && (rc = hm_fb_subtable(f, &ot, OP_OPTIONS, what, &opt, &present))) return rc;
    if (present) return read_options(r, &opt, otype, what, op);
    return HM_OK;
}

/* See tflite_impl.h: on error m holds what was read so far, for hm_tfl_free. */
int hm_tfl_read(const uint8_t *buf, size_t len, hm_tfl_model *m) {
    reader r = {.f = {buf, len}};
    const hm_fb *f = &r.f;
    if (len < 8) return hm_err(HM_E_FORMAT, "tflite: file of %zu bytes is too short", len);
    if (memcmp(buf + 4, "TFL3", 4))
        return hm_err(HM_E_FORMAT, "tflite: not a TFLite model (no \"TFL3\" file identifier at offset 4)");
    hm_fb_table root;
    int rc = hm_fb_table_at(f, hm_fb_rd_u32(f, 0), "Model", &root);
    if (rc) return rc;
    uint32_t version;
    if ((rc = hm_fb_u32(f, &root, MODEL_VERSION, 0, "Model", &version))) return rc;
    if (version != 3) return hm_err(HM_E_UNSUPPORTED, "tflite: Model.version is %u (schema version 3 is read)", version);
    hm_fb_vec subs;
    if ((rc = hm_fb_vector(f, &root, MODEL_OPCODES, 4, "Model.operator_codes", &r.codes)) ||
        (rc = hm_fb_vector(f, &root, MODEL_BUFFERS, 4, "Model.buffers", &r.buffers)) ||
        (rc = hm_fb_vector(f, &root, MODEL_SUBGRAPHS, 4, "Model.subgraphs", &subs)))
        return rc;
    if (!subs.len) return hm_err(HM_E_FORMAT, "tflite: Model.subgraphs is empty");
    hm_fb_table sg;
    const char *sw = "Model.subgraphs[0]";
    if ((rc = hm_fb_vec_table(f, &subs, 0, sw, &sg))) return rc;

    hm_fb_vec tv, ov;
    if ((rc = hm_fb_vector(f, &sg, SUB_TENSORS, 4, "Model.subgraphs[0].tensors", &tv)) ||
        (rc = hm_fb_vector(f, &sg, SUB_OPERATORS, 4, "Model.subgraphs[0].operators", &ov)))
        return rc;
    if (tv.len > HM_TFL_MAX_TENSORS)
        return hm_err(HM_E_UNSUPPORTED, "tflite: %u tensors (at most %d)", tv.len, HM_TFL_MAX_TENSORS);
    if (ov.len > HM_TFL_MAX_OPS) return hm_err(HM_E_UNSUPPORTED, "tflite: %u operators (at most %d)", ov.len, HM_TFL_MAX_OPS);

    m->t = calloc(tv.len ? tv.len : 1, sizeof *m->t);
    m->ops = calloc(ov.len ? ov.len : 1, sizeof *m->ops);
    if (!m->t || !m->ops) return hm_err(HM_E_NOMEM, "tflite: out of memory");
    for (uint32_t i = 0; i < tv.len; i++) {
        m->t[i].producer = -1;
        m->t[i].alias = -1;
    }
    m->nt = (int)tv.len;
    for (int i = 0; i < m->nt; i++)
        if ((rc = read_tensor(&r, &tv, i, &m->t[i]))) return rc;
    m->nops = (int)ov.len;
    for (int i = 0; i < m->nops; i++)
        if ((rc = read_op(&r, &ov, i, m->nt, &m->ops[i]))) return rc;
    if ((rc = read_indices(&r, &sg, SUB_INPUTS, m->nt, 0, "Model.subgraphs[0].inputs", &m->inputs, &m->ninputs)) ||
        (rc = read_indices(&r, &sg, SUB_OUTPUTS, m->nt, 0, "Model.subgraphs[0].outputs", &m->outputs, &m->noutputs)))
        return rc;
    return HM_OK;
}
