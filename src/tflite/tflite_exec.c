/* tflite/tflite_exec.c - per-thread run states and invoke.
 *
 * A state owns one arena: the activations at the offsets the plan chose,
 * then the scratch the largest op needs, and the input / output pointer
 * table of every op, all allocated when the state is made. invoke walks the
 * ops and allocates nothing.
 */
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/util.h"
#include "tflite/tflite_impl.h"

/* See tflite_impl.h. Only the GEMM can fail at run time; its code is
 * returned and the output is then undefined. */
int hm_tfl_run_op(const hm_tfl_model *m, const hm_tfl_op *op, const float *const *in, float *const *out,
                  float *scratch, hm_pool *pool) {
    float *y = out[0];
    size_t n = (size_t)m->t[op->out[0]].numel;
    switch (op->code) {
    case HM_TFL_OP_CONV_2D: return hm_tfl_conv(m, op, in, y, scratch, pool);
    case HM_TFL_OP_FULLY_CONNECTED: return hm_tfl_fc(m, op, in[0], y, pool);
    case HM_TFL_OP_DEPTHWISE_CONV_2D: hm_tfl_depthwise(m, op, in[0], y, pool); return HM_OK;
    case HM_TFL_OP_MAX_POOL_2D: hm_tfl_maxpool(m, op, in[0], y, pool); return HM_OK;
    case HM_TFL_OP_ADD:
    case HM_TFL_OP_PRELU: hm_tfl_binary(m, op, in[0], in[1], y, pool); return HM_OK;
    case HM_TFL_OP_PAD: hm_tfl_pad(m, op, in[0], y); return HM_OK;
    case HM_TFL_OP_RESIZE_BILINEAR: hm_tfl_resize(m, op, in[0], y, pool); return HM_OK;
    case HM_TFL_OP_CONCATENATION: hm_tfl_concat(m, op, in, y); return HM_OK;
    case HM_TFL_OP_MEAN: hm_tfl_mean(m, op, in[0], y); return HM_OK;
    case HM_TFL_OP_LOGISTIC: hm_tfl_logistic(in[0], y, n); return HM_OK;
    case HM_TFL_OP_DEPTH_TO_SPACE: hm_tfl_depth_to_space(m, op, in[0], y); return HM_OK;
    case HM_TFL_OP_STRIDED_SLICE: hm_tfl_strided_slice(m, op, in[0], y); return HM_OK;
    case HM_TFL_OP_RESHAPE:
    case HM_TFL_OP_DENSIFY:
    case HM_TFL_OP_DEQUANTIZE:
        /* A RESHAPE output shares its input's storage; otherwise a copy. */
        if (y != in[0]) memmove(y, in[0], n * sizeof(float));
        return HM_OK;
    default: return hm_err(HM_E_UNSUPPORTED, "tflite: builtin op %d cannot run", op->code);
    }
}

/* The state: the arena, then per run op its input and output pointers. */
typedef struct {
    const float **in;
    float **out;
} op_ptrs;

struct hm_tfl_state_priv {
    struct hm_tfl_state pub;
    op_ptrs *ops;
    void *ptrs;
};

static float *tensor_ptr(const hm_tfl_model *m, float *arena, int t) {
    return arena + m->t[t].off;
}

/* On error, HM_E_ARG / HM_E_NOMEM is returned, *out is NULL and nothing
 * is kept. */
int hm_tfl_state_new(const hm_tfl_model *m, hm_tfl_state **out) {
    if (!m || !out) return hm_err(HM_E_ARG, "hm_tfl_state_new: NULL argument");
    *out = NULL;
    size_t nptr = 0;
    for (int r = 0; r < m->nrun; r++) nptr += (size_t)m->ops[m->run[r]].nin + (size_t)m->ops[m->run[r]].nout;
    struct hm_tfl_state_priv *s = calloc(1, sizeof *s);
    if (!s) return hm_err(HM_E_NOMEM, "tflite: out of memory");
    s->pub.m = m;
    s->pub.arena = hm_alloc((m->arena + m->scratch + 16) * sizeof(float));
    s->ops = malloc(((size_t)m->nrun + 1) * sizeof *s->ops);
    s->ptrs = malloc((nptr + 1) * sizeof(float *));
    if (!s->pub.arena || !s->ops || !s->ptrs) {
        hm_tfl_state_free(&s->pub);
        return hm_err(HM_E_NOMEM, "tflite: out of memory for a run state of %zu MiB",
                      (m->arena + m->scratch) * sizeof(float) >> 20);
    }
    /* Zeroed so that an input left unfilled reads as zeros, not garbage. */
    memset(s->pub.arena, 0, (m->arena + m->scratch + 16) * sizeof(float));
    void **p = s->ptrs;
    for (int r = 0; r < m->nrun; r++) {
        const hm_tfl_op *op = &m->ops[m->run[r]];
        s->ops[r].in = (const float **)p;
        for (int k = 0; k < op->nin; k++) {
            int t = op->in[k];
            if (t < 0 || m->t[t].type == HM_TFL_INT32) s->ops[r].in[k] = NULL; /* taken at load */
            else s->ops[r].in[k] = m->t[t].f ? m->t[t].f : tensor_ptr(m, s->pub.arena, t);
        }
        p += op->nin;
        s->ops[r].out = (float **)p;
        for (int k = 0; k < op->nout; k++) s->ops[r].out[k] = tensor_ptr(m, s->pub.arena, op->out[k]);
        p += op->nout;
    }
    /* Graph outputs that are constants (the whole graph folded at load). */
    for (int k = 0; k < m->noutputs; k++) {
        const hm_tfl_tensor *t = &m->t[m->outputs[k]];
        if (t->f) memcpy(tensor_ptr(m, s->pub.arena, m->outputs[k]), t->f, (size_t)t->numel * sizeof(float));
    }
    *out = &s->pub;
    return HM_OK;
}

/* NULL is fine. */
void hm_tfl_state_free(hm_tfl_state *st) {
    if (!st) return;
    struct hm_tfl_state_priv *s = (struct hm_tfl_state_priv *)st;
    hm_free(s->pub.arena);
    free(s->ops);
    free(s->ptrs);
    free(s);
}

/* NULL for a NULL state or an index out of range. */
float *hm_tfl_input(hm_tfl_state *s, int i) {
    if (!s || i < 0 || i >= s->m->ninputs) return NULL;
    return tensor_ptr(s->m, s->arena, s->m->inputs[i]);
}

const float *hm_tfl_output(const hm_tfl_state *s, int i) {
    if (!s || i < 0 || i >= s->m->noutputs) return NULL;
    return tensor_ptr(s->m, s->arena, s->m->outputs[i]);
}

/* Stops at the first failing op and returns its code (outputs undefined). */
int hm_tfl_invoke_timed(hm_tfl_state *st, hm_pool *pool, double *seconds) {
    if (!st) return hm_err(HM_E_ARG, "hm_tfl_invoke: NULL state");
    struct hm_tfl_state_priv *s = (struct hm_tfl_state_priv *)st;
    const hm_tfl_model *m = st->m;
    float *scratch = st->arena + m->arena;
    for (int r = 0; r < m->nrun; r++) {
        double t0 = seconds ? hm_now() : 0.0;
        int rc = hm_tfl_run_op(m, &m->ops[m->run[r]], s->ops[r].in, s->ops[r].out, scratch, pool);
        if (rc) return rc;
        if (seconds) seconds[r] += hm_now() - t0;
    }
    return HM_OK;
}

int hm_tfl_invoke(hm_tfl_state *st, hm_pool *pool) { return hm_tfl_invoke_timed(st, pool, NULL); }
