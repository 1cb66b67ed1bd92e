/* tflite/tflite_prep.c - load-time preparation of a read graph.
 *
 * In op order: every input must exist already (a constant, a graph input or
 * the output of an earlier op), so the file's order is a valid schedule and
 * the graph has no cycles; each op's inputs are checked (count, types,
 * ranks, constness where the kernels need it) and its output shape is
 * computed (tflite_shapes.c) and must equal the one the file declares, so
 * the kernels never see a shape they did not agree to. fp16 DEQUANTIZE
 * outputs become fp32 constants, and any other op whose inputs are all
 * constant is evaluated here, once; then CONV_2D epilogues are fused and
 * the constants only the load needed are released. Each op's work and each
 * folded output's bytes are checked against the limits (tflite_impl.h)
 * before the op is folded, so a hostile file is refused before it costs.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/util.h"
#include "tflite/tflite_impl.h"

#define OPNAME(op) hm_tfl_op_name((op)->code)

static int is_const(const hm_tfl_tensor *t) { return t->f || t->i32; }

/* Evaluate op oi (all inputs constant) into a new constant output. */
static int fold(hm_tfl_model *m, int oi) {
    hm_tfl_op *op = &m->ops[oi];
    hm_tfl_tensor *y = &m->t[op->out[0]];
    y->f = hm_alloc((size_t)y->numel * sizeof(float));
    if (!y->f) return HM_E_NOMEM;
    op->folded = 1;
    if (op->code == HM_TFL_OP_DEQUANTIZE || op->code == HM_TFL_OP_RESHAPE || op->code == HM_TFL_OP_DENSIFY) {
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

/* Charges in element visits, from timing each kernel on its worst shapes
 * (C = 1, where the cost per position does not shrink with the channel
 * count): per row or window position of index arithmetic, and per call
 * (a MAX_POOL_2D window tap, a CONCATENATION row copy). With them, a graph
 * at HM_TFL_MAX_WORK runs in at most about a second and a half on one core
 * whatever its ops (the GEMM ops, ~90 G multiply-adds/s, in far less). */
#define POS_COST 16
#define CALL_COST 32

/* An estimate of op oi's work, its shapes checked: multiply-adds for the
 * GEMM ops and DEPTHWISE_CONV_2D, element visits (outputs, window taps,
 * rows, calls) for the rest. At most ~2^58, so the sum over 65536 ops does
 * not overflow once each is under HM_TFL_MAX_OP_WORK. */
static int64_t op_work(const hm_tfl_model *m, const hm_tfl_op *op) {
    const hm_tfl_tensor *y = &m->t[op->out[0]];
    const hm_tfl_shape *ys = &y->shape, *xs = &m->t[op->in[0]].shape;
    int64_t out = y->numel, in = m->t[op->in[0]].numel;
    int64_t pos = out / (ys->ndim ? ys->dims[ys->ndim - 1] : 1); /* output rows of the last axis */
    switch (op->code) {
    case HM_TFL_OP_CONV_2D: {
        const hm_tfl_shape *w = &m->t[op->in[1]].shape;
        int64_t K = (int64_t)w->dims[1] * w->dims[2] * w->dims[3];
        return out * K + (op->direct ? 0 : pos * K) + 2 * out; /* GEMM, im2col, epilogue */
    }
    case HM_TFL_OP_FULLY_CONNECTED: return out * m->t[op->in[1]].shape.dims[1] + 2 * out;
    case HM_TFL_OP_DEPTHWISE_CONV_2D: return (out + pos * POS_COST) * op->kh * op->kw + 2 * out;
    case HM_TFL_OP_MAX_POOL_2D: return (out + pos * CALL_COST) * op->filter_h * op->filter_w + 2 * out;
    case HM_TFL_OP_ADD:
    case HM_TFL_OP_PRELU: return 2 * out + pos * POS_COST;
    case HM_TFL_OP_PAD: return out + in + in / (xs->ndim ? xs->dims[xs->ndim - 1] : 1) * POS_COST; /* zeros, rows */
    case HM_TFL_OP_RESIZE_BILINEAR: return 4 * out + pos * POS_COST;
    case HM_TFL_OP_CONCATENATION: {
        int64_t outer = 1;
        for (int d = 0; d < op->axis; d++) outer *= ys->dims[d];
        return 2 * out + outer * op->nin * CALL_COST;
    }
    case HM_TFL_OP_MEAN: return 6 * in + out;   /* an index step per input element */
    case HM_TFL_OP_LOGISTIC: return 12 * out;   /* expf */
    case HM_TFL_OP_RESHAPE: return y->alias >= 0 ? 1 : 2 * out;
    case HM_TFL_OP_DEPTH_TO_SPACE:
    case HM_TFL_OP_STRIDED_SLICE: return 2 * out + pos * POS_COST;
    default: return 2 * out;                    /* DEQUANTIZE: a copy */
    }
}

/* Op oi's work within the per-op and whole-graph limits (checked before
 * anything is folded or run); the total so far in m->work. */
static int charge_work(hm_tfl_model *m, int oi) {
    hm_tfl_op *op = &m->ops[oi];
    op->work = op_work(m, op);
    if (op->work > HM_TFL_MAX_OP_WORK)
        return hm_err(HM_E_UNSUPPORTED, "tflite: op %d (%s) needs %lld operations, over the limit of %lld per op", oi,
                      OPNAME(op), (long long)op->work, (long long)HM_TFL_MAX_OP_WORK);
    if (m->work + op->work > HM_TFL_MAX_WORK)
        return hm_err(HM_E_UNSUPPORTED, "tflite: op %d (%s) takes the graph to %lld operations, over the limit of %lld "
                      "for the whole graph", oi, OPNAME(op), (long long)(m->work + op->work),
                      (long long)HM_TFL_MAX_WORK);
    m->work += op->work;
    return HM_OK;
}

/* Op oi, in file order: its inputs exist, its output is new and has the
 * shape the op computes; folded when its inputs are all constant. */
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
    }
    if (op->nout < 1) return hm_err(HM_E_FORMAT, "tflite: op %d (%s): no outputs", oi, OPNAME(op));
    hm_tfl_shape os = {0, {0}};
    int rc = hm_tfl_op_shape(m, oi, &os);
    if (rc) return rc;
    hm_tfl_tensor *y = &m->t[op->out[0]];
    if (is_const(y) || y->is_input || y->producer >= 0)
        return hm_err(HM_E_FORMAT, "tflite: op %d (%s): output '%s' is %s", oi, OPNAME(op), y->name,
                      is_const(y) ? "a constant" : y->is_input ? "a graph input" : "written twice");
    /* DENSIFY keeps its input's type (FLOAT16 before a DEQUANTIZE). */
    if (y->type != HM_TFL_FLOAT32 && op->code != HM_TFL_OP_DENSIFY)
        return hm_err(HM_E_UNSUPPORTED, "tflite: op %d (%s): output '%s' is not FLOAT32", oi, OPNAME(op), y->name);
    if (os.ndim != y->shape.ndim || memcmp(os.dims, y->shape.dims, sizeof(int) * (size_t)os.ndim)) {
        char a[96], b[96];
        hm_tfl_shape_str(&os, a, sizeof a);
        hm_tfl_shape_str(&y->shape, b, sizeof b);
        return hm_err(HM_E_FORMAT, "tflite: op %d (%s): output '%s' is declared %s, the op computes %s", oi, OPNAME(op),
                      y->name, b, a);
    }
    y->producer = oi;
    /* A RESHAPE of an activation shares its storage; of a constant it is
     * folded, or copied at invoke when too large to fold. */
    if (op->code == HM_TFL_OP_RESHAPE && !m->t[op->in[0]].f) y->alias = op->in[0];
    if ((rc = charge_work(m, oi))) return rc;
    int all_const = 1;
    for (int k = 0; k < op->nin; k++)
        if (op->in[k] >= 0 && !m->t[op->in[k]].f && m->t[op->in[k]].type != HM_TFL_INT32) all_const = 0;
    /* Folding is skipped for outputs that can be far larger than their
     * inputs (broadcasts, pads, resizes of constants): those run at invoke
     * within the arena limit instead of growing the model. DEQUANTIZE and
     * RESHAPE keep the size, and weights must be constants: always folded. */
    int same_size = op->code == HM_TFL_OP_DEQUANTIZE || op->code == HM_TFL_OP_RESHAPE || op->code == HM_TFL_OP_DENSIFY;
    if (!all_const || (y->numel > HM_TFL_MAX_FOLD && !same_size)) return HM_OK;
    /* Folded outputs are new memory each (a chain of RESHAPEs copies its
     * constant once per op): their sum is bounded before allocating. */
    int64_t bytes = y->numel * (int64_t)sizeof(float);
    if (m->folded_bytes + bytes > HM_TFL_MAX_FOLD_BYTES)
        return hm_err(HM_E_UNSUPPORTED, "tflite: op %d (%s): folding it at load takes the constants made at load to "
                      "%lld MiB, over the limit of %lld MiB", oi, OPNAME(op), (long long)((m->folded_bytes + bytes) >> 20),
                      (long long)(HM_TFL_MAX_FOLD_BYTES >> 20));
    m->folded_bytes += bytes;
    return fold(m, oi);
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

/* See tflite_impl.h; on error the model is only fit for hm_tfl_free. */
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
    }
    if ((rc = fuse_epilogues(m))) return rc;
    m->run = malloc(((size_t)m->nops + 1) * sizeof *m->run);
    if (!m->run) return hm_err(HM_E_NOMEM, "tflite: out of memory");
    m->nrun = 0;
    m->run_work = 0;
    for (int oi = 0; oi < m->nops; oi++) {
        if (!m->ops[oi].folded) m->run_work += m->ops[oi].work; /* fused ones run inside their CONV_2D */
        if (!m->ops[oi].folded && !m->ops[oi].fused) m->run[m->nrun++] = oi;
    }
    drop_load_only(m);
    return HM_OK;
}
