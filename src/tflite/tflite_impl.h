/* tflite/tflite_impl.h - the loaded TFLite graph, shared by the reader
 * (tflite_read.c), the load-time preparation (tflite_prep.c), the memory
 * plan (tflite_plan.c), the executor (tflite_exec.c) and the kernels
 * (tflite_ops*.c). Internal: nothing here is part of tflite/tflite.h.
 */
#ifndef HM_TFLITE_IMPL_H
#define HM_TFLITE_IMPL_H

#include <stddef.h>
#include <stdint.h>

#include "tflite/tflite.h"
#include "kernels/gemm.h"
#include "kernels/kernels.h"

/* TensorType values (schema.fbs). */
enum { HM_TFL_FLOAT32 = 0, HM_TFL_FLOAT16 = 1, HM_TFL_INT32 = 2 };

/* BuiltinOperator values of the ops this executor knows (schema.fbs). */
enum {
    HM_TFL_OP_ADD = 0,
    HM_TFL_OP_CONCATENATION = 2,
    HM_TFL_OP_CONV_2D = 3,
    HM_TFL_OP_DEPTHWISE_CONV_2D = 4,
    HM_TFL_OP_DEPTH_TO_SPACE = 5,
    HM_TFL_OP_DEQUANTIZE = 6,
    HM_TFL_OP_FULLY_CONNECTED = 9,
    HM_TFL_OP_LOGISTIC = 14,
    HM_TFL_OP_MAX_POOL_2D = 17,
    HM_TFL_OP_RESHAPE = 22,
    HM_TFL_OP_RESIZE_BILINEAR = 23,
    HM_TFL_OP_PAD = 34,
    HM_TFL_OP_MEAN = 40,
    HM_TFL_OP_STRIDED_SLICE = 45,
    HM_TFL_OP_PRELU = 54,
    HM_TFL_OP_DENSIFY = 124,
};

/* Fused activations (ActivationFunctionType); TANH and SIGN_BIT are refused. */
enum { HM_TFL_ACT_NONE = HM_ACT_NONE, HM_TFL_ACT_RELU = HM_ACT_RELU, HM_TFL_ACT_RELU_N1_TO_1 = HM_ACT_RELU_N1_TO_1, HM_TFL_ACT_RELU6 = HM_ACT_RELU6 };

/* Limits a file must respect. They bound memory and time for hostile files
 * (a few hundred bytes can declare any shape) while leaving the MediaPipe
 * models (at most 1.2 M elements per tensor, 30 MB of activations) far
 * inside. */
#define HM_TFL_MAX_DIM (1 << 24)                    /* one dimension */
#define HM_TFL_MAX_NUMEL ((int64_t)1 << 28)         /* elements of one tensor */
#define HM_TFL_MAX_ARENA ((size_t)1 << 30)          /* bytes of activations + scratch */
#define HM_TFL_MAX_TENSORS 65536
#define HM_TFL_MAX_OPS 65536
#define HM_TFL_MAX_OP_IO 4096                       /* inputs (or outputs) of one op */
#define HM_TFL_MAX_WINDOW 4096                      /* pool filter, stride */
#define HM_TFL_NAME_MAX 255                         /* longer names are cut */
#define HM_TFL_MAX_FOLD ((int64_t)1 << 22)          /* elements of one output folded at load */
/* Work (multiply-adds for CONV_2D and FULLY_CONNECTED, element visits with
 * per-row charges for the rest: op_work in tflite_prep.c) and the constants
 * made at load, checked op by op before the work is done: a file of a few
 * hundred bytes can otherwise ask for hours of folding at load, seconds per
 * invoke or gigabytes of folded copies, all within the shape limits above.
 * The MediaPipe models need at most 0.39 G of work (palm_detection_full,
 * 1/11 of the graph limit), 23 M in their largest op (1/46 of the op limit)
 * and 10.4 MiB of folded constants (hand_landmark_full, 1/24 of the limit). */
#define HM_TFL_MAX_OP_WORK ((int64_t)1 << 30)       /* one op */
#define HM_TFL_MAX_WORK ((int64_t)1 << 32)          /* all ops: folded at load, plus one invoke */
#define HM_TFL_MAX_FOLD_BYTES ((int64_t)1 << 28)    /* all constants folded at load */

typedef struct {
    char *name;            /* printable ASCII (other bytes become '?'), owned */
    int type;              /* HM_TFL_FLOAT32 / FLOAT16 / INT32 */
    hm_tfl_shape shape;
    int64_t numel;
    int sparse;            /* stored sparse (SparsityParameters): densified at read */
    /* Constant data, decoded at read: FLOAT32 and FLOAT16 as fp32 in f,
     * INT32 in i32 (hm_alloc'd, owned). Both NULL for an activation. */
    float *f;
    int32_t *i32;
    /* Graph roles and the plan. */
    int producer;          /* op index, or -1 */
    int is_input, is_output;
    int alias;             /* RESHAPE output: the tensor whose storage it shares; -1 */
    int first, last;       /* liveness in run order: -1 = before the first op, nrun = after the last */
    size_t off;            /* arena offset in floats */
    int planned;           /* has arena storage */
} hm_tfl_tensor;

typedef struct {
    int code;              /* builtin operator */
    int version;
    int nin, nout;
    int *in, *out;         /* tensor indices; -1 = an omitted optional input */
    /* Options, decoded (defaults as the schema gives them). */
    int padding;           /* 0 SAME, 1 VALID */
    int stride_w, stride_h, dil_w, dil_h, act;
    int filter_w, filter_h, depth_mult;
    int axis, keep_dims, keep_num_dims, weights_format;
    int align_corners, half_pixel;
    int block_size;        /* DEPTH_TO_SPACE */
    int begin_mask, end_mask, ellipsis_mask, new_axis_mask, shrink_axis_mask, slice_offset; /* STRIDED_SLICE */
    int has_new_shape;     /* ReshapeOptions.new_shape present */
    hm_tfl_shape new_shape;
    /* Prepared at load. */
    int folded;            /* evaluated at load: not run */
    int fused;             /* merged into the CONV_2D before it: not run */
    int post_act;          /* CONV_2D with a fused ADD: that ADD's activation */
    int pad_top, pad_left; /* CONV / DEPTHWISE / MAX_POOL */
    int kh, kw;            /* CONV / DEPTHWISE filter size */
    /* A CONV_2D's epilogue, when the ADD and / or PRELU reading its output
     * were fused into it: in[3] the ADD's other operand (same shape) or -1,
     * in[4] the PRELU's per-channel alpha or -1; out[0] is then the last
     * fused op's output. y = prelu(act_add(act(conv) + in[3]), in[4]). */
    hm_packed W;           /* CONV_2D and FULLY_CONNECTED weights (+ bias) */
    int has_W;
    int direct;            /* CONV_2D: 1x1 stride 1, the input is the GEMM's A */
    const float *dw, *bias;/* DEPTHWISE weights [kh*kw][C] and bias [C] (into tensors' f) */
    int reduce[HM_TFL_MAX_DIMS]; /* MEAN: 1 for each reduced axis */
    int pads[HM_TFL_MAX_DIMS][2];/* PAD: before/after per axis */
    int sl_begin[HM_TFL_MAX_DIMS], sl_stride[HM_TFL_MAX_DIMS]; /* STRIDED_SLICE: per input axis; */
    int sl_size[HM_TFL_MAX_DIMS];/* the count taken (the output before shrinking) */
    size_t scratch;        /* floats of scratch this op needs while it runs */
    int64_t work;          /* its work estimate (tflite_prep.c), checked at load */
} hm_tfl_op;

struct hm_tfl_model {
    hm_tfl_tensor *t;
    int nt;
    hm_tfl_op *ops;
    int nops;
    int *run;              /* indices of the ops invoke runs, in order */
    int nrun;
    int *inputs, *outputs;
    int ninputs, noutputs;
    size_t arena;          /* floats: activations */
    size_t scratch;        /* floats: the largest op scratch, after the activations */
    int isa;               /* hm_isa the kernels and packings use */
    const hm_kernels *k;   /* that level's kernel table (kernels/kernels.h) */
    int64_t work;          /* of every op, folded ones included (HM_TFL_MAX_WORK) */
    int64_t run_work;      /* of the ops one invoke runs */
    int64_t folded_bytes;  /* of the constants folded at load (HM_TFL_MAX_FOLD_BYTES) */
};

struct hm_tfl_state {
    const hm_tfl_model *m;
    float *arena;          /* m->arena + m->scratch floats */
};

/* ---- tflite_read.c ---- */
/* Parse the FlatBuffer into m (tensors with constant data decoded, ops with
 * options). On error the code is returned; m may be partly filled and is
 * released by hm_tfl_free. */
int hm_tfl_read(const uint8_t *buf, size_t len, hm_tfl_model *m);
const char *hm_tfl_op_name(int code);

/* ---- tflite_shapes.c ---- */
/* Check op oi against its inputs and options; its output shape in *os. */
int hm_tfl_op_shape(hm_tfl_model *m, int oi, hm_tfl_shape *os);
/* "[d0,d1,...]" into buf. */
void hm_tfl_shape_str(const hm_tfl_shape *s, char *buf, size_t n);

/* ---- tflite_prep.c ---- */
/* Check every op against its inputs, infer and verify shapes, fold
 * constants (fp16 DEQUANTIZE first), pack weights, build m->run. */
int hm_tfl_prepare(hm_tfl_model *m);

/* ---- tflite_plan.c ---- */
/* Liveness-based arena offsets for every activation; sets m->arena. */
int hm_tfl_plan(hm_tfl_model *m);

/* ---- tflite_exec.c ---- */
/* Run op o with its tensors' data at in[i] / out[i] (NULL for omitted
 * inputs) and `scratch` of at least op->scratch floats. */
int hm_tfl_run_op(const hm_tfl_model *m, const hm_tfl_op *op, const float *const *in, float *const *out,
                  float *scratch, hm_pool *pool);

/* hm_tfl_invoke, adding each run op's wall time to seconds[r] (r < nrun)
 * when seconds is not NULL: for profiles. */
int hm_tfl_invoke_timed(hm_tfl_state *s, hm_pool *pool, double *seconds);


/* ---- tflite_ops.c, tflite_conv.c: the ops, on the model's kernel table ---- */
int hm_tfl_conv(const hm_tfl_model *m, const hm_tfl_op *op, const float *const *in, float *y, float *scratch,
                hm_pool *pool);
int hm_tfl_fc(const hm_tfl_model *m, const hm_tfl_op *op, const float *x, float *y, hm_pool *pool);
void hm_tfl_depthwise(const hm_tfl_model *m, const hm_tfl_op *op, const float *x, float *y, hm_pool *pool);
void hm_tfl_maxpool(const hm_tfl_model *m, const hm_tfl_op *op, const float *x, float *y, hm_pool *pool);
void hm_tfl_binary(const hm_tfl_model *m, const hm_tfl_op *op, const float *a, const float *b, float *y, hm_pool *pool);
void hm_tfl_pad(const hm_tfl_model *m, const hm_tfl_op *op, const float *x, float *y);
void hm_tfl_resize(const hm_tfl_model *m, const hm_tfl_op *op, const float *x, float *y, hm_pool *pool);
void hm_tfl_concat(const hm_tfl_model *m, const hm_tfl_op *op, const float *const *in, float *y);
void hm_tfl_mean(const hm_tfl_model *m, const hm_tfl_op *op, const float *x, float *y);
void hm_tfl_logistic(const float *x, float *y, size_t n);
void hm_tfl_depth_to_space(const hm_tfl_model *m, const hm_tfl_op *op, const float *x, float *y);
void hm_tfl_strided_slice(const hm_tfl_model *m, const hm_tfl_op *op, const float *x, float *y);

#endif
