/* tfjs/tfjs.h - TensorFlow.js graph models (a model.json of topology and
 * weights manifest, plus its binary weight files): a bounds-checked reader,
 * and a compiler of the convolutional part of such a graph into the TFLite
 * executor's graph (tflite/tflite.h), so it runs on the same kernels,
 * memory plan, threads and ISA dispatch as the MediaPipe models.
 *
 * Reading (hm_tfjs_read): the JSON is parsed with jansson; every node's
 * name, op, inputs ("name", "name:k", control inputs "^name" dropped) and
 * attributes are checked for type; the weights manifest's groups are
 * walked in order over the concatenation of their files, each weight
 * consuming numel x its stored size (float32 / int32 4 bytes, bool 1;
 * quantized uint8 1, uint16 2, float16 2), and the bytes must add up to the
 * binary's length exactly. Values are decoded as TF.js decodes them:
 * uint8 / uint16 to float32 as q * scale + min (computed in double, stored
 * as float32), to int32 as round(q * scale + min); float16 widened. Every
 * count, shape, offset and name is checked before it is used; a malformed
 * file is one line (HM_E_FORMAT) naming the node, weight or field.
 *
 * Compiling (hm_tfjs_compile): the nodes the requested outputs depend on,
 * walked back from them and stopped at the named input node (fed with a
 * given shape), in an order where every input comes first (a cycle is an
 * error). Supported there: _FusedConv2D and FusedDepthwiseConv2dNative
 * (fused BiasAdd, then optionally Relu or Relu6), Conv2D,
 * DepthwiseConv2dNative (depth multiplier 1), AddV2 / Add, Reshape,
 * ConcatV2, Pack, Identity, Sigmoid, Const; NHWC, SAME / VALID padding,
 * dilation 1. Anything else is HM_E_UNSUPPORTED naming the node and op. The result
 * is an hm_tfl_model (run with hm_tfl_state_new / hm_tfl_invoke; free with
 * hm_tfl_free) whose inputs and outputs are in the order given.
 *
 * Limits for hostile files: JSON <= 64 MiB, weights <= 256 MiB, <= 65536
 * nodes and weights, <= 4096 inputs per node, names <= 1024 bytes, rank
 * <= 6, dimensions <= 2^24, <= 2^28 elements per tensor; the compiled graph
 * then meets the TFLite executor's own limits (tflite_impl.h).
 *
 * Errors: HM_OK or a negative HM_E_* code after hm_err() (core/util.h); on
 * error nothing is returned and nothing leaks.
 */
#ifndef HM_TFJS_TFJS_H
#define HM_TFJS_TFJS_H

#include <stddef.h>
#include <stdint.h>

#include "tflite/tflite.h"

#define HM_TFJS_MAX_JSON ((size_t)64 << 20)
#define HM_TFJS_MAX_WEIGHTS ((size_t)256 << 20)
#define HM_TFJS_MAX_NODES 65536
#define HM_TFJS_MAX_NODE_INPUTS 4096
#define HM_TFJS_MAX_NAME 1024

typedef struct hm_tfjs_graph hm_tfjs_graph;

/* A constant of the graph, decoded (float32 in f, int32 in i32; bool
 * weights are read past but not kept: both NULL). */
typedef struct {
    const char *name;
    int is_int;
    hm_tfl_shape shape;
    int64_t numel;
    const float *f;
    const int32_t *i32;
} hm_tfjs_const;

/* Parse model.json (json, jlen bytes) with its weights: bin, the
 * concatenation of every manifest group's files in order (blen bytes).
 * Neither buffer is kept. */
int hm_tfjs_read(const void *json, size_t jlen, const void *bin, size_t blen, hm_tfjs_graph **out);

/* The same from a model.json path: the weight files are the manifest's
 * paths, which must be plain file names (no directory part, no "..") in
 * the JSON's own directory. */
int hm_tfjs_load(const char *json_path, hm_tfjs_graph **out);

void hm_tfjs_free(hm_tfjs_graph *g);

int hm_tfjs_n_nodes(const hm_tfjs_graph *g);
/* Node index by name, or -1. */
int hm_tfjs_find(const hm_tfjs_graph *g, const char *name);
/* The constant of node `name` (a Const node with a weight), or HM_E_ARG. */
int hm_tfjs_const_of(const hm_tfjs_graph *g, const char *name, hm_tfjs_const *out);
/* Op and name of a node (NULL if out of range). */
const char *hm_tfjs_node_op(const hm_tfjs_graph *g, int i);
const char *hm_tfjs_node_name(const hm_tfjs_graph *g, int i);
/* Data input k of node i: the node it reads (and which of its outputs, in
 * *port when not NULL), or -1 when there is no such input. */
int hm_tfjs_node_input(const hm_tfjs_graph *g, int i, int k, int *port);

/* Compile the part of g between the node `input` (fed a float32 tensor of
 * in_shape) and the nodes outputs[0..nout) into a TFLite-executor model
 * (see above). The graph may be freed afterwards. */
int hm_tfjs_compile(const hm_tfjs_graph *g, const char *input, const hm_tfl_shape *in_shape,
                    const char *const *outputs, int nout, hm_tfl_model **out);

#endif
