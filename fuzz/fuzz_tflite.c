/* fuzz_tflite - the TFLite model reader and executor (src/tflite/):
 * hm_tfl_load_mem on the input, then, for a model that loaded and is small
 * enough to run in a few milliseconds, a run state and one invoke, so every
 * shape the reader accepts is also one the kernels handle.
 *
 * Trapped invariants: a failed load returns no model and leaves one
 * printable line; a loaded model has sane shapes; state creation and invoke
 * of a loaded model succeed.
 *
 * The seeds (fuzz/make_tflite_corpus.py) are tiny models written by
 * tests/tflite_fb.py, one or two per op, plus a small palm-style graph, never
 * the real MediaPipe files (megabytes of weights the fuzzer would only
 * flip bits in).
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include "core/util.h"
#include "tflite/tflite.h"
#include "tflite/tflite_impl.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* Work bounds of the invoke: keep each input fast under ASan. */
#define FZ_TFL_MAX_COST 20000000.0
#define FZ_TFL_MAX_ARENA_FLOATS ((size_t)16 << 20)

static int fz_tfl_printable_line(const char *s) {
    if (!s[0]) return 0;
    for (; *s; s++)
        if ((unsigned char)*s < 0x20 || (unsigned char)*s == 0x7f) return 0;
    return 1;
}

/* A rough count of the element operations one invoke does. */
static double fz_tfl_cost(const hm_tfl_model *m) {
    double cost = 0;
    for (int r = 0; r < m->nrun; r++) {
        const hm_tfl_op *op = &m->ops[m->run[r]];
        double out = (double)m->t[op->out[0]].numel, f = 1;
        if (op->has_W) f = op->W.K;
        else if (op->code == HM_TFL_OP_DEPTHWISE_CONV_2D) f = (double)op->kh * op->kw;
        else if (op->code == HM_TFL_OP_MAX_POOL_2D) f = (double)op->filter_h * op->filter_w;
        cost += out * f;
        for (int k = 0; k < op->nin; k++)
            if (op->in[k] >= 0) cost += (double)m->t[op->in[k]].numel;
    }
    return cost;
}

static void fz_tfl_run(const hm_tfl_model *m) {
    if (m->arena + m->scratch > FZ_TFL_MAX_ARENA_FLOATS || fz_tfl_cost(m) > FZ_TFL_MAX_COST) return;
    hm_tfl_state *s = NULL;
    if (hm_tfl_state_new(m, &s) != HM_OK || !s) __builtin_trap();
    for (int i = 0; i < hm_tfl_n_inputs(m); i++) {
        hm_tfl_shape sh;
        if (hm_tfl_input_shape(m, i, &sh) != HM_OK) __builtin_trap();
        size_t n = 1;
        for (int d = 0; d < sh.ndim; d++) n *= (size_t)sh.dims[d];
        float *x = hm_tfl_input(s, i);
        if (!x) __builtin_trap();
        for (size_t k = 0; k < n; k++) x[k] = (float)(k % 17) * 0.125f - 1.0f;
    }
    if (hm_tfl_invoke(s, NULL) != HM_OK) __builtin_trap();
    volatile float sink = 0;
    for (int i = 0; i < hm_tfl_n_outputs(m); i++) {
        hm_tfl_shape sh;
        if (hm_tfl_output_shape(m, i, &sh) != HM_OK) __builtin_trap();
        size_t n = 1;
        for (int d = 0; d < sh.ndim; d++) n *= (size_t)sh.dims[d];
        const float *y = hm_tfl_output(s, i);
        if (!y) __builtin_trap();
        sink += y[0] + y[n - 1];
    }
    (void)sink;
    hm_tfl_state_free(s);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    /* An exactly sized copy: ASan reports a read one byte past the end. */
    uint8_t *buf = malloc(size ? size : 1);
    if (!buf) return 0;
    if (size) memcpy(buf, data, size);
    hm_tfl_model *m = (hm_tfl_model *)buf; /* must be overwritten with NULL on failure */
    int rc = hm_tfl_load_mem(buf, size, &m);
    free(buf); /* the model keeps no pointer into the file */
    if (rc != HM_OK) {
        if (m || rc >= 0 || !fz_tfl_printable_line(hm_errmsg())) __builtin_trap();
        return 0;
    }
    if (!m) __builtin_trap();
    for (int i = 0; i < hm_tfl_n_inputs(m) + hm_tfl_n_outputs(m); i++) {
        hm_tfl_shape sh;
        int in = i < hm_tfl_n_inputs(m);
        int k = in ? i : i - hm_tfl_n_inputs(m);
        if ((in ? hm_tfl_input_shape(m, k, &sh) : hm_tfl_output_shape(m, k, &sh)) != HM_OK) __builtin_trap();
        if (sh.ndim < 0 || sh.ndim > HM_TFL_MAX_DIMS) __builtin_trap();
        for (int d = 0; d < sh.ndim; d++)
            if (sh.dims[d] < 1) __builtin_trap();
        const char *name = in ? hm_tfl_input_name(m, k) : hm_tfl_output_name(m, k);
        if (!name || strchr(name, '\n')) __builtin_trap();
    }
    fz_tfl_run(m);
    hm_tfl_free(m);
    return 0;
}
