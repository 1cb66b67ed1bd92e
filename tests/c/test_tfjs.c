/* test_tfjs - the TF.js graph-model reader and compiler (src/tfjs/)
 * in-process, on the tiny graphs of fuzz/corpus/tfjs/ (fuzz_tfjs's layout:
 * fed shape, model.json length, model.json, weights):
 *
 *   - argument checks of the API;
 *   - every seed reads, compiles from its Placeholder to its last node,
 *     runs, and gives the same bits twice and with a pool;
 *   - every truncation of each seed's model.json and weights, and a
 *     corruption of every byte (three patterns): a read or compile either
 *     succeeds (and then a run must too) or fails with a negative code,
 *     nothing returned and a one-line message. Under ASan/UBSan this is the
 *     byte-level hostile-file test.
 */
#include <dirent.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "core/pool.h"
#include "tfjs/tfjs.h"
#include "tfjs/tfjs_impl.h"
#include "tflite/tflite.h"

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

typedef struct {
    hm_tfl_shape in;
    const uint8_t *json, *bin;
    size_t jlen, blen;
} seed;

static int split(const uint8_t *b, size_t n, seed *s) {
    if (n < 7) return -1;
    s->in = (hm_tfl_shape){4, {1, 1 + b[0] % 16, 1 + b[1] % 16, 1 + b[2] % 16}};
    s->jlen = (size_t)b[3] | (size_t)b[4] << 8 | (size_t)b[5] << 16 | (size_t)b[6] << 24;
    if (s->jlen > n - 7) return -1;
    s->json = b + 7;
    s->bin = b + 7 + s->jlen;
    s->blen = n - 7 - s->jlen;
    return 0;
}

/* Read + compile (Placeholder -> last node); the model or NULL with rc. */
static hm_tfl_model *compile(const seed *s, int *rc) {
    uint8_t *js = malloc(s->jlen ? s->jlen : 1), *bin = malloc(s->blen ? s->blen : 1);
    memcpy(js, s->json, s->jlen);
    memcpy(bin, s->bin, s->blen);
    hm_tfjs_graph *g = (hm_tfjs_graph *)js;
    hm_errclear();
    *rc = hm_tfjs_read(js, s->jlen, bin, s->blen, &g);
    free(js);
    free(bin);
    if (*rc) {
        CHECKF(g == NULL && *rc < 0 && clean_error(*rc), "failed read: rc %d, graph %p, '%s'", *rc, (void *)g,
               hm_errmsg());
        return NULL;
    }
    int feed = -1;
    for (int i = 0; i < g->n && feed < 0; i++)
        if (!strcmp(g->nodes[i].op, "Placeholder")) feed = i;
    hm_tfl_model *m = NULL;
    if (feed < 0) {
        *rc = hm_err(HM_E_FORMAT, "no Placeholder");
    } else {
        const char *out[1] = {g->nodes[g->n - 1].name};
        m = (hm_tfl_model *)g;
        *rc = hm_tfjs_compile(g, g->nodes[feed].name, &s->in, out, 1, &m);
        if (*rc) CHECKF(m == NULL && *rc < 0 && clean_error(*rc), "failed compile: rc %d, '%s'", *rc, hm_errmsg());
    }
    hm_tfjs_free(g);
    return *rc ? NULL : m;
}

static float *run(const hm_tfl_model *m, hm_pool *pool, size_t *n) {
    hm_tfl_state *s;
    if (hm_tfl_state_new(m, &s)) return NULL;
    hm_tfl_shape sh;
    hm_tfl_input_shape(m, 0, &sh);
    size_t k = 1;
    for (int d = 0; d < sh.ndim; d++) k *= (size_t)sh.dims[d];
    float *x = hm_tfl_input(s, 0);
    for (size_t i = 0; i < k; i++) x[i] = sinf((float)i * 0.7f);
    float *out = NULL;
    if (!hm_tfl_invoke(s, pool)) {
        hm_tfl_output_shape(m, 0, &sh);
        *n = 1;
        for (int d = 0; d < sh.ndim; d++) *n *= (size_t)sh.dims[d];
        out = malloc(*n * sizeof *out);
        memcpy(out, hm_tfl_output(s, 0), *n * sizeof *out);
    }
    hm_tfl_state_free(s);
    return out;
}

static void test_api(void) {
    hm_tfjs_graph *g = (hm_tfjs_graph *)&g;
    CHECK(hm_tfjs_read(NULL, 3, NULL, 0, &g) == HM_E_ARG && g == NULL);
    CHECK(hm_tfjs_read("{}", 2, NULL, 0, NULL) == HM_E_ARG);
    CHECK(hm_tfjs_read("{}", 2, NULL, 0, &g) == HM_E_FORMAT && g == NULL && clean_error(HM_E_FORMAT));
    CHECK(hm_tfjs_load("/nonexistent/model.json", &g) == HM_E_IO && g == NULL);
    const char *doc = "{\"modelTopology\":{\"node\":[{\"name\":\"x\",\"op\":\"Placeholder\"}]},\"weightsManifest\":[]}";
    CHECK(hm_tfjs_read(doc, strlen(doc), NULL, 0, &g) == HM_OK && g != NULL);
    hm_tfl_model *m = (hm_tfl_model *)&m;
    hm_tfl_shape sh = {4, {1, 2, 2, 1}}, bad = {4, {1, 0, 2, 1}};
    const char *out[1] = {"x"}, *none[1] = {"y"};
    CHECK(hm_tfjs_compile(g, "x", &bad, out, 1, &m) == HM_E_ARG && m == NULL);
    CHECK(hm_tfjs_compile(g, "nope", &sh, out, 1, &m) == HM_E_ARG && m == NULL);
    CHECK(hm_tfjs_compile(g, "x", &sh, none, 1, &m) == HM_E_ARG && m == NULL);
    CHECK(hm_tfjs_compile(g, "x", &sh, out, 0, &m) == HM_E_ARG && m == NULL);
    CHECK(hm_tfjs_find(g, "x") == 0 && hm_tfjs_find(g, "y") == -1 && hm_tfjs_n_nodes(g) == 1);
    hm_tfjs_const c;
    CHECK(hm_tfjs_const_of(g, "x", &c) == HM_E_ARG);
    hm_tfjs_free(g);
    hm_tfjs_free(NULL);
}

static int nok, nrefused;

static void hostile(const uint8_t *buf, size_t len, const char *name, const char *what, size_t at) {
    uint8_t *copy = malloc(len ? len : 1);
    memcpy(copy, buf, len);
    seed s;
    if (split(copy, len, &s)) {
        free(copy);
        return;
    }
    int rc;
    hm_tfl_model *m = compile(&s, &rc);
    free(copy);
    if (!m) {
        nrefused++;
        return;
    }
    nok++;
    size_t n = 0;
    float *y = run(m, NULL, &n);
    CHECKF(y != NULL, "%s %s at %zu: compiled but does not run: %s", name, what, at, hm_errmsg());
    free(y);
    hm_tfl_free(m);
}

/* Truncations of the JSON (keeping the weights) and of the weights, then
 * three corruptions of every byte. */
static void test_hostile(const char *name, const uint8_t *buf, size_t len) {
    seed s;
    if (split(buf, len, &s)) return;
    uint8_t *v = malloc(len);
    for (size_t k = 0; k < s.jlen; k++) {
        memcpy(v, buf, 7);
        v[3] = (uint8_t)k, v[4] = (uint8_t)(k >> 8), v[5] = (uint8_t)(k >> 16), v[6] = (uint8_t)(k >> 24);
        memcpy(v + 7, s.json, k);
        memcpy(v + 7 + k, s.bin, s.blen);
        hostile(v, 7 + k + s.blen, name, "model.json truncated", k);
    }
    for (size_t k = 0; k < s.blen; k++) hostile(buf, 7 + s.jlen + k, name, "weights truncated", k);
    static const uint8_t flips[] = {0xFF, 0x01, 0x80};
    for (size_t k = 7; k < len; k++)
        for (size_t f = 0; f < sizeof flips; f++) {
            memcpy(v, buf, len);
            v[k] ^= flips[f];
            hostile(v, len, name, "byte flipped", k);
        }
    free(v);
}

int main(void) {
    char corpus[4200];
    const char *f = __FILE__, *slash = strrchr(f, '/');
    snprintf(corpus, sizeof corpus, "%.*s/../../fuzz/corpus/tfjs", slash ? (int)(slash - f) : 1, slash ? f : ".");
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
        seed s;
        CHECKF(buf && !split(buf, len, &s), "cannot read %s", path);
        if (!buf) continue;
        nseeds++;
        int rc;
        hm_tfl_model *m = compile(&s, &rc);
        CHECKF(m != NULL, "%s: does not compile: %s", e->d_name, hm_errmsg());
        if (m) {
            size_t n1 = 0, n2 = 0, n3 = 0;
            float *a = run(m, NULL, &n1), *b = run(m, NULL, &n2), *c = run(m, pool, &n3);
            CHECKF(a && b && c && n1 == n2 && n1 == n3 && !memcmp(a, b, n1 * 4) && !memcmp(a, c, n1 * 4),
                   "%s: runs differ or fail", e->d_name);
            free(a), free(b), free(c);
            hm_tfl_free(m);
        }
        test_hostile(e->d_name, buf, len);
        free(buf);
    }
    if (d) closedir(d);
    CHECKF(nseeds >= 5, "only %d seeds in %s", nseeds, corpus);
    printf("test_tfjs: %d seeds; hostile variants: %d refused, %d compiled and ran\n", nseeds, nrefused, nok);
    hm_pool_destroy(pool);
    return check_summary();
}
