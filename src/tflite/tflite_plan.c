/* tflite/tflite_plan.c - the static memory plan: one arena per state, every
 * activation at a fixed offset chosen at load.
 *
 * Each storage (a tensor, with the RESHAPE outputs that alias it) lives from
 * the op that writes it to the last op that reads it, inclusive at both
 * ends, so an op's output never shares bytes with its inputs. Graph inputs
 * live from before the first op, graph outputs to after the last (they stay
 * readable after invoke). Storages are placed largest first, each at the
 * lowest 64-byte aligned offset that no storage alive at the same time
 * occupies: the usual greedy-by-size heuristic, within a few percent of
 * the peak live size on these feed-forward graphs.
 */
#include <stdlib.h>
#include <string.h>

#include "core/util.h"
#include "tflite/tflite_impl.h"

#define ALIGN_FLOATS 16

typedef struct {
    int t;            /* root tensor */
    int first, last;
    size_t size, off; /* floats */
} item;

static int root_of(const hm_tfl_model *m, int t) {
    /* Aliases point at tensors computed earlier, so the chain ends. */
    while (m->t[t].alias >= 0) t = m->t[t].alias;
    return t;
}

static int by_size(const void *a, const void *b) {
    const item *x = a, *y = b;
    if (x->size != y->size) return x->size > y->size ? -1 : 1;
    return x->first - y->first;
}

/* See tflite_impl.h. On error (HM_E_NOMEM, or HM_E_UNSUPPORTED past the
 * arena limit) the offsets are meaningless and the model is freed. */
int hm_tfl_plan(hm_tfl_model *m) {
    for (int i = 0; i < m->nt; i++) {
        m->t[i].first = m->nrun + 1;
        m->t[i].last = -2;
        m->t[i].planned = 0;
    }
    /* Liveness, on the roots. A graph output that is a constant gets
     * storage too (filled when a state is made). */
    for (int k = 0; k < m->ninputs; k++) {
        hm_tfl_tensor *t = &m->t[m->inputs[k]];
        t->first = -1;
        if (t->last < -1) t->last = -1;
    }
    for (int r = 0; r < m->nrun; r++) {
        const hm_tfl_op *op = &m->ops[m->run[r]];
        for (int k = 0; k < op->nin; k++) {
            /* Constants need no storage; INT32 inputs are constants whose
             * values the op took at load. */
            if (op->in[k] < 0 || m->t[op->in[k]].f || m->t[op->in[k]].type != HM_TFL_FLOAT32) continue;
            hm_tfl_tensor *t = &m->t[root_of(m, op->in[k])];
            if (t->last < r) t->last = r;
        }
        for (int k = 0; k < op->nout; k++) {
            hm_tfl_tensor *t = &m->t[root_of(m, op->out[k])];
            if (t->first > r) t->first = r;
            if (t->last < r) t->last = r;
        }
    }
    for (int k = 0; k < m->noutputs; k++) {
        hm_tfl_tensor *t = &m->t[root_of(m, m->outputs[k])];
        if (t->f) t->first = -1;
        t->last = m->nrun;
    }
    int n = 0;
    for (int i = 0; i < m->nt; i++)
        if (m->t[i].alias < 0 && m->t[i].last >= -1) n++;
    item *it = malloc(((size_t)n + 1) * sizeof *it);
    item **placed = malloc(((size_t)n + 1) * sizeof *placed);
    if (!it || !placed) {
        free(it);
        free(placed);
        return hm_err(HM_E_NOMEM, "tflite: out of memory");
    }
    n = 0;
    for (int i = 0; i < m->nt; i++) {
        const hm_tfl_tensor *t = &m->t[i];
        if (t->alias >= 0 || t->last < -1) continue;
        size_t sz = ((size_t)t->numel + ALIGN_FLOATS - 1) / ALIGN_FLOATS * ALIGN_FLOATS;
        it[n++] = (item){.t = i, .first = t->first, .last = t->last, .size = sz};
    }
    qsort(it, (size_t)n, sizeof *it, by_size);
    /* placed: the storages placed so far, kept sorted by offset, so each
     * placement is one pass (O(n^2) in all, whatever the lifetimes). */
    size_t top = 0;
    for (int i = 0; i < n; i++) {
        size_t off = 0;
        int at = 0;
        for (int j = 0; j < i; j++) {
            const item *p = placed[j];
            if (p->first > it[i].last || it[i].first > p->last) continue; /* not alive together */
            if (p->off >= off + it[i].size) break;                       /* the gap before p fits */
            if (p->off + p->size > off) off = p->off + p->size;
        }
        it[i].off = off;
        while (at < i && placed[at]->off <= off) at++;
        memmove(placed + at + 1, placed + at, (size_t)(i - at) * sizeof *placed);
        placed[at] = &it[i];
        if (off + it[i].size > top) top = off + it[i].size;
    }
    for (int i = 0; i < n; i++) {
        m->t[it[i].t].off = it[i].off;
        m->t[it[i].t].planned = 1;
    }
    for (int i = 0; i < m->nt; i++) {
        if (m->t[i].alias < 0) continue;
        const hm_tfl_tensor *r = &m->t[root_of(m, i)];
        m->t[i].off = r->off;
        m->t[i].planned = r->planned;
    }
    free(it);
    free(placed);
    size_t scratch = 0;
    for (int r = 0; r < m->nrun; r++)
        if (m->ops[m->run[r]].scratch > scratch) scratch = m->ops[m->run[r]].scratch;
    m->arena = top;
    m->scratch = (scratch + ALIGN_FLOATS - 1) / ALIGN_FLOATS * ALIGN_FLOATS;
    if ((m->arena + m->scratch) > HM_TFL_MAX_ARENA / sizeof(float))
        return hm_err(HM_E_UNSUPPORTED, "tflite: the graph needs %zu MiB of activations and scratch (at most %zu MiB)",
                      (m->arena + m->scratch) * sizeof(float) >> 20, HM_TFL_MAX_ARENA >> 20);
    return HM_OK;
}
