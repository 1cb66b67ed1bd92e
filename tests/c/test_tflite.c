/* test_tflite - the TFLite reader and executor (src/tflite/) in-process, on
 * the tiny models of fuzz/corpus/tflite/:
 *
 *   - argument checks of the API, a missing file;
 *   - every seed loads, runs, and gives the same bits twice, with a pool,
 *     and from two threads sharing one model (each with its own state);
 *   - the memory plan: storages alive at the same time never overlap;
 *   - the work estimates: every op charged, the sums within the limits;
 *   - every truncation and a corruption of every byte (three patterns) of
 *     every seed: a load either succeeds (and then a run state and invoke
 *     must too) or fails with a negative code, no model and a one-line
 *     message. Under ASan/UBSan this is the byte-level hostile-file test.
 */
#include <dirent.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "core/pool.h"
#include "tflite/tflite.h"
#include "tflite/tflite_impl.h"

static char corpus[4200];

static uint8_t *slurp(const char *path, size_t *len) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    uint8_t *p = malloc(n > 0 ? (size_t)n : 1);
    if (p && fread(p, 1, (size_t)n, f) != (size_t)n) {
        free(p);
        p = NULL;
    }
    fclose(f);
    *len = (size_t)n;
    return p;
}

static size_t numel(const hm_tfl_shape *s) {
    size_t n = 1;
    for (int d = 0; d < s->ndim; d++) n *= (size_t)s->dims[d];
    return n;
}

static void fill_inputs(const hm_tfl_model *m, hm_tfl_state *s) {
    for (int i = 0; i < hm_tfl_n_inputs(m); i++) {
        hm_tfl_shape sh;
        hm_tfl_input_shape(m, i, &sh);
        float *x = hm_tfl_input(s, i);
        for (size_t k = 0; k < numel(&sh); k++) x[k] = sinf((float)(k * 7 + i));
    }
}

/* All outputs of one invoke, concatenated (malloc'd). */
static float *run(const hm_tfl_model *m, hm_pool *pool, size_t *n) {
    hm_tfl_state *s;
    if (hm_tfl_state_new(m, &s)) return NULL;
    fill_inputs(m, s);
    float *out = NULL;
    if (hm_tfl_invoke(s, pool) == HM_OK) {
        size_t total = 0;
        for (int i = 0; i < hm_tfl_n_outputs(m); i++) {
            hm_tfl_shape sh;
            hm_tfl_output_shape(m, i, &sh);
            total += numel(&sh);
        }
        out = malloc((total ? total : 1) * sizeof *out);
        size_t at = 0;
        for (int i = 0; out && i < hm_tfl_n_outputs(m); i++) {
            hm_tfl_shape sh;
            hm_tfl_output_shape(m, i, &sh);
            memcpy(out + at, hm_tfl_output(s, i), numel(&sh) * sizeof *out);
            at += numel(&sh);
        }
        *n = total;
    }
    hm_tfl_state_free(s);
    return out;
}

typedef struct {
    const hm_tfl_model *m;
    float *out;
    size_t n;
} thread_arg;

static void *thread_run(void *p) {
    thread_arg *a = p;
    for (int k = 0; k < 20; k++) {
        free(a->out);
        a->out = run(a->m, NULL, &a->n);
    }
    return NULL;
}

static void test_api(void) {
    hm_tfl_model *m = (hm_tfl_model *)1;
    CHECK(hm_tfl_load("/nonexistent/model.tflite", &m) == HM_E_IO && m == NULL && clean_error(HM_E_IO));
    CHECK(hm_tfl_load(NULL, &m) == HM_E_ARG);
    CHECK(hm_tfl_load_mem(NULL, 10, &m) == HM_E_ARG && m == NULL);
    CHECK(hm_tfl_load_mem("x", 1, NULL) == HM_E_ARG);
    CHECK(hm_tfl_load_mem("", 0, &m) == HM_E_FORMAT && m == NULL && clean_error(HM_E_FORMAT));
    hm_tfl_state *s = (hm_tfl_state *)1;
    CHECK(hm_tfl_state_new(NULL, &s) == HM_E_ARG);
    CHECK(hm_tfl_invoke(NULL, NULL) == HM_E_ARG);
    CHECK(hm_tfl_input(NULL, 0) == NULL && hm_tfl_output(NULL, 0) == NULL);
    CHECK(hm_tfl_n_inputs(NULL) == 0 && hm_tfl_input_name(NULL, 0) == NULL);
    hm_tfl_free(NULL);
    hm_tfl_state_free(NULL);
}

/* Storages alive at the same time do not overlap in the arena. */
static int plan_ok(const hm_tfl_model *m) {
    for (int i = 0; i < m->nt; i++) {
        const hm_tfl_tensor *a = &m->t[i];
        if (!a->planned || a->alias >= 0) continue;
        if (a->off + (size_t)a->numel > m->arena) return 0;
        for (int j = i + 1; j < m->nt; j++) {
            const hm_tfl_tensor *b = &m->t[j];
            if (!b->planned || b->alias >= 0) continue;
            if (a->first > b->last || b->first > a->last) continue;
            if (a->off < b->off + (size_t)b->numel && b->off < a->off + (size_t)a->numel) return 0;
        }
    }
    return 1;
}

static void test_seed(const char *path, const uint8_t *buf, size_t len, hm_pool *pool) {
    hm_tfl_model *m = NULL;
    int rc = hm_tfl_load_mem(buf, len, &m);
    CHECKF(rc == HM_OK, "%s: %s", path, hm_errmsg());
    if (rc) return;
    CHECKF(plan_ok(m), "%s: overlapping storages in the plan", path);
    /* Every op is charged work (the limits are not vacuous for any op
     * kind), the run ops' part of it included, all within the limits. */
    int64_t sum = 0;
    for (int i = 0; i < m->nops; i++) {
        CHECKF(m->ops[i].work > 0 && m->ops[i].work <= HM_TFL_MAX_OP_WORK, "%s: op %d (%s) charged %lld", path, i,
               hm_tfl_op_name(m->ops[i].code), (long long)m->ops[i].work);
        sum += m->ops[i].work;
    }
    CHECKF(sum == m->work && m->run_work <= m->work && m->work <= HM_TFL_MAX_WORK &&
           m->folded_bytes <= HM_TFL_MAX_FOLD_BYTES, "%s: work %lld (ops %lld), run %lld, folded %lld", path,
           (long long)m->work, (long long)sum, (long long)m->run_work, (long long)m->folded_bytes);
    size_t n1 = 0, n2 = 0, n3 = 0;
    float *a = run(m, NULL, &n1), *b = run(m, NULL, &n2), *c = run(m, pool, &n3);
    CHECKF(a && b && c && n1 == n2 && n1 == n3, "%s: invoke failed: %s", path, hm_errmsg());
    if (a && b && c) {
        CHECKF(!memcmp(a, b, n1 * sizeof *a), "%s: two invokes differ", path);
        CHECKF(!memcmp(a, c, n1 * sizeof *a), "%s: the pool changes the result", path);
        int finite = 1;
        for (size_t k = 0; k < n1; k++) finite &= isfinite(a[k]) != 0;
        CHECKF(finite, "%s: non-finite output", path);
    }
    thread_arg t[2] = {{m, NULL, 0}, {m, NULL, 0}};
    pthread_t th[2];
    for (int k = 0; k < 2; k++) pthread_create(&th[k], NULL, thread_run, &t[k]);
    for (int k = 0; k < 2; k++) pthread_join(th[k], NULL);
    for (int k = 0; k < 2; k++)
        CHECKF(a && t[k].out && t[k].n == n1 && !memcmp(t[k].out, a, n1 * sizeof *a), "%s: thread %d differs", path, k);
    free(t[0].out);
    free(t[1].out);
    free(a);
    free(b);
    free(c);
    hm_tfl_free(m);
}

/* One hostile variant: exactly sized, so ASan sees any read past the end. */
static int nloaded, nrefused;

static void hostile(const char *path, const uint8_t *buf, size_t len, const char *what, size_t at) {
    uint8_t *copy = malloc(len ? len : 1);
    memcpy(copy, buf, len);
    hm_tfl_model *m = (hm_tfl_model *)copy;
    hm_errclear();
    int rc = hm_tfl_load_mem(copy, len, &m);
    free(copy);
    if (rc != HM_OK) {
        nrefused++;
        if (!(rc < 0 && m == NULL && clean_error(rc)))
            CHECKF(0, "%s %s at %zu: rc %d, model %p, message '%s'", path, what, at, rc, (void *)m, hm_errmsg());
        return;
    }
    nloaded++;
    hm_tfl_state *s;
    if (m->arena + m->scratch < ((size_t)4 << 20)) {
        rc = hm_tfl_state_new(m, &s);
        if (rc == HM_OK) {
            fill_inputs(m, s);
            rc = hm_tfl_invoke(s, NULL);
            hm_tfl_state_free(s);
        }
        if (rc) CHECKF(0, "%s %s at %zu: loaded but does not run: %s", path, what, at, hm_errmsg());
    }
    hm_tfl_free(m);
}

static void test_hostile(const char *path, const uint8_t *buf, size_t len) {
    for (size_t k = 0; k < len; k++) hostile(path, buf, k, "truncated", k);
    uint8_t *v = malloc(len);
    static const uint8_t flips[] = {0xFF, 0x01, 0x80};
    for (size_t k = 0; k < len; k++)
        for (size_t f = 0; f < sizeof flips; f++) {
            memcpy(v, buf, len);
            v[k] ^= flips[f];
            hostile(path, v, len, "byte flipped", k);
        }
    free(v);
}

int main(void) {
    const char *f = __FILE__, *slash = strrchr(f, '/');
    snprintf(corpus, sizeof corpus, "%.*s/../../fuzz/corpus/tflite", slash ? (int)(slash - f) : 1, slash ? f : ".");
    test_api();
    hm_pool *pool = hm_pool_create(2);
    DIR *d = opendir(corpus);
    CHECKF(d != NULL, "no seed directory %s", corpus);
    int nseeds = 0;
    struct dirent *e;
    while (d && (e = readdir(d))) {
        if (e->d_name[0] == '.') continue;
        char path[8400];
        snprintf(path, sizeof path, "%s/%s", corpus, e->d_name);
        size_t len;
        uint8_t *buf = slurp(path, &len);
        CHECKF(buf != NULL, "cannot read %s", path);
        if (!buf) continue;
        nseeds++;
        test_seed(e->d_name, buf, len, pool);
        test_hostile(e->d_name, buf, len);
        free(buf);
    }
    if (d) closedir(d);
    CHECKF(nseeds >= 5, "only %d seeds in %s", nseeds, corpus);
    printf("test_tflite: %d seeds; hostile variants: %d refused, %d loaded\n", nseeds, nrefused, nloaded);
    hm_pool_destroy(pool);
    return check_summary();
}
