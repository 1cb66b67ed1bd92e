/* fuzz_tfjs - the TF.js graph-model reader and compiler (src/tfjs/):
 * hm_tfjs_read on a model.json and its weights, then hm_tfjs_compile from
 * the first Placeholder node (fed [1, h, w, c]) to the last node, and, for
 * a graph that compiled and is small, a run state and one invoke.
 *
 * Input: 3 bytes h, w, c (each 1 + byte % 16), a little-endian uint32
 * length L of model.json, L bytes of model.json, then the weights (the
 * rest of the input).
 *
 * Trapped invariants: a failed read or compile returns nothing and leaves
 * one printable line; a compiled model's inputs and outputs have sane
 * shapes; state creation and invoke of a compiled model succeed.
 *
 * The seeds (fuzz/make_tfjs_corpus.py) are tiny graphs written by
 * tests/tfjs_model.py, one or two per op the compiler translates, with
 * float32 and quantized weights, never the 3 MB hand-box detector.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "core/util.h"
#include "tfjs/tfjs.h"
#include "tfjs/tfjs_impl.h"
#include "tflite/tflite_impl.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define FZ_TFJS_MAX_COST 20000000.0
#define FZ_TFJS_MAX_ARENA_FLOATS ((size_t)16 << 20)

static int fz_tfjs_printable_line(const char *s) {
    if (!s[0]) return 0;
    for (; *s; s++)
        if ((unsigned char)*s < 0x20 || (unsigned char)*s == 0x7f) return 0;
    return 1;
}

static double fz_tfjs_cost(const hm_tfl_model *m) {
    double cost = 0;
    for (int r = 0; r < m->nrun; r++) {
        const hm_tfl_op *op = &m->ops[m->run[r]];
        double out = (double)m->t[op->out[0]].numel, f = 1;
        if (op->has_W) f = op->W.K;
        else if (op->code == HM_TFL_OP_DEPTHWISE_CONV_2D) f = (double)op->kh * op->kw;
        cost += out * f;
        for (int k = 0; k < op->nin; k++)
            if (op->in[k] >= 0) cost += (double)m->t[op->in[k]].numel;
    }
    return cost;
}

static void fz_tfjs_run(const hm_tfl_model *m) {
    if (m->arena + m->scratch > FZ_TFJS_MAX_ARENA_FLOATS || fz_tfjs_cost(m) > FZ_TFJS_MAX_COST) return;
    hm_tfl_state *s = NULL;
    if (hm_tfl_state_new(m, &s) != HM_OK || !s) __builtin_trap();
    hm_tfl_shape sh;
    if (hm_tfl_input_shape(m, 0, &sh) != HM_OK) __builtin_trap();
    size_t n = 1;
    for (int d = 0; d < sh.ndim; d++) n *= (size_t)sh.dims[d];
    float *x = hm_tfl_input(s, 0);
    for (size_t k = 0; k < n; k++) x[k] = (float)(k % 13) * 0.25f - 1.5f;
    if (hm_tfl_invoke(s, NULL) != HM_OK) __builtin_trap();
    for (int i = 0; i < hm_tfl_n_outputs(m); i++) {
        if (hm_tfl_output_shape(m, i, &sh) != HM_OK || !hm_tfl_output(s, i)) __builtin_trap();
        for (int d = 0; d < sh.ndim; d++)
            if (sh.dims[d] < 1) __builtin_trap();
    }
    hm_tfl_state_free(s);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 7) return 0;
    const hm_tfl_shape in = {4, {1, 1 + data[0] % 16, 1 + data[1] % 16, 1 + data[2] % 16}};
    size_t jlen = (size_t)data[3] | (size_t)data[4] << 8 | (size_t)data[5] << 16 | (size_t)data[6] << 24;
    if (jlen > size - 7) jlen = size - 7;
    /* Exactly sized copies: ASan reports a read one byte past either end. */
    const size_t blen = size - 7 - jlen;
    uint8_t *js = malloc(jlen ? jlen : 1), *bin = malloc(blen ? blen : 1);
    if (!js || !bin) {
        free(js);
        free(bin);
        return 0;
    }
    memcpy(js, data + 7, jlen);
    memcpy(bin, data + 7 + jlen, blen);
    hm_tfjs_graph *g = (hm_tfjs_graph *)js; /* must be overwritten with NULL on failure */
    int rc = hm_tfjs_read(js, jlen, bin, blen, &g);
    free(js);
    free(bin);
    if (rc != HM_OK) {
        if (g || rc >= 0 || !fz_tfjs_printable_line(hm_errmsg())) __builtin_trap();
        return 0;
    }
    if (!g) __builtin_trap();
    int feed = -1;
    for (int i = 0; i < g->n && feed < 0; i++)
        if (!strcmp(g->nodes[i].op, "Placeholder")) feed = i;
    if (feed >= 0 && g->n > 0) {
        const char *out[1] = {g->nodes[g->n - 1].name};
        hm_tfl_model *m = (hm_tfl_model *)g;
        rc = hm_tfjs_compile(g, g->nodes[feed].name, &in, out, 1, &m);
        if (rc != HM_OK) {
            if (m || rc >= 0 || !fz_tfjs_printable_line(hm_errmsg())) __builtin_trap();
        } else {
            if (!m || hm_tfl_n_inputs(m) != 1 || hm_tfl_n_outputs(m) != 1) __builtin_trap();
            fz_tfjs_run(m);
            hm_tfl_free(m);
        }
    }
    hm_tfjs_free(g);
    return 0;
}
