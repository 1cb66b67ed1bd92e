/* tfjs/tfjs_read.c - reading a TF.js graph model: model.json (jansson) and
 * its weights manifest over the binary (see tfjs/tfjs.h). Node attributes
 * stay in the parsed JSON and are read, type-checked, where the compiler
 * needs them (tfjs_attr.c).
 */
#include <math.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/fileio.h"
#include "core/util.h"
#include "tfjs/tfjs_impl.h"

#define FAIL(...) hm_err(HM_E_FORMAT, "tfjs: " __VA_ARGS__)

/* Name order for the lookup tables (binary search over indices). */
static int cmp_node(const void *a, const void *b, void *g) {
    const hm_tfjs_graph *G = g;
    return strcmp(G->nodes[*(const int *)a].name, G->nodes[*(const int *)b].name);
}
static int cmp_const(const void *a, const void *b, void *g) {
    const hm_tfjs_graph *G = g;
    return strcmp(G->consts[*(const int *)a].name, G->consts[*(const int *)b].name);
}

static int find_in(const int *idx, int n, const char *name, const char *(*key)(const hm_tfjs_graph *, int),
                   const hm_tfjs_graph *g) {
    int lo = 0, hi = n - 1;
    while (lo <= hi) {
        int mid = lo + (hi - lo) / 2, c = strcmp(key(g, idx[mid]), name);
        if (!c) return idx[mid];
        if (c < 0) lo = mid + 1;
        else hi = mid - 1;
    }
    return -1;
}
static const char *node_key(const hm_tfjs_graph *g, int i) { return g->nodes[i].name; }
static const char *const_key(const hm_tfjs_graph *g, int i) { return g->consts[i].name; }

int hm_tfjs_find(const hm_tfjs_graph *g, const char *name) {
    return g && name ? find_in(g->node_idx, g->n, name, node_key, g) : -1;
}

static int find_const(const hm_tfjs_graph *g, const char *name) {
    return find_in(g->const_idx, g->nc, name, const_key, g);
}

int hm_tfjs_n_nodes(const hm_tfjs_graph *g) { return g ? g->n : 0; }
const char *hm_tfjs_node_op(const hm_tfjs_graph *g, int i) { return g && i >= 0 && i < g->n ? g->nodes[i].op : NULL; }
const char *hm_tfjs_node_name(const hm_tfjs_graph *g, int i) { return g && i >= 0 && i < g->n ? g->nodes[i].name : NULL; }

int hm_tfjs_node_input(const hm_tfjs_graph *g, int i, int k, int *port) {
    if (!g || i < 0 || i >= g->n || k < 0 || k >= g->nodes[i].nin) return -1;
    if (port) *port = g->nodes[i].port[k];
    return g->nodes[i].in[k];
}

int hm_tfjs_const_of(const hm_tfjs_graph *g, const char *name, hm_tfjs_const *out) {
    int i = hm_tfjs_find(g, name);
    if (i < 0 || g->nodes[i].cst < 0) return hm_err(HM_E_ARG, "tfjs: no constant named '%s'", name ? name : "(null)");
    const hm_tfjs_wt *w = &g->consts[g->nodes[i].cst];
    if (!w->f && !w->i32) return hm_err(HM_E_ARG, "tfjs: constant '%s' is of a type not kept (bool)", name);
    *out = (hm_tfjs_const){w->name, w->i32 != NULL, w->shape, w->numel, w->f, w->i32};
    return HM_OK;
}

void hm_tfjs_free(hm_tfjs_graph *g) {
    if (!g) return;
    for (int i = 0; i < g->n; i++) free(g->nodes[i].in);
    for (int i = 0; i < g->nc; i++) {
        hm_free(g->consts[i].f);
        hm_free(g->consts[i].i32);
    }
    free(g->nodes);
    free(g->consts);
    free(g->node_idx);
    free(g->const_idx);
    json_decref(g->root);
    free(g);
}

/* A name: a JSON string of 1..HM_TFJS_MAX_NAME bytes without NUL or
 * control characters (it goes into one-line messages). */
static int get_name(json_t *v, const char *what, int i, const char **out) {
    const char *s = json_string_value(v);
    if (!s) return FAIL("%s %d: name is not a string", what, i);
    size_t n = json_string_length(v);
    if (n == 0 || n > HM_TFJS_MAX_NAME || strlen(s) != n)
        return FAIL("%s %d: name of %zu bytes (1..%d, no NUL)", what, i, n, HM_TFJS_MAX_NAME);
    for (size_t k = 0; k < n; k++)
        if ((unsigned char)s[k] < 0x20 || s[k] == 0x7f) return FAIL("%s %d: name has a control character", what, i);
    *out = s;
    return HM_OK;
}

/* ---- weights ---- */

static float half_to_float(uint16_t h) {
    const int sign = h >> 15, e = (h >> 10) & 31, m = h & 1023;
    float v;
    if (e == 0) v = ldexpf((float)m, -24);
    else if (e == 31) v = m ? NAN : INFINITY;
    else v = ldexpf((float)(m | 1024), e - 25);
    return sign ? -v : v;
}

/* A string of the file for a message: at most 32 bytes, each outside
 * printable ASCII as '?'. */
static const char *printable(const char *s, char *buf, size_t cap) {
    size_t n = 0;
    for (; s[n] && n + 1 < cap && n < 32; n++) buf[n] = (unsigned char)s[n] < 0x20 || (unsigned char)s[n] > 0x7e ? '?' : s[n];
    buf[n] = 0;
    return buf;
}

/* Stored bytes per element of a manifest entry: its quantization's dtype
 * when quantized, else its own. 0 for a type not read. */
static int stored_size(const char *dtype, const char *qtype) {
    if (qtype) return !strcmp(qtype, "uint8") ? 1 : !strcmp(qtype, "uint16") || !strcmp(qtype, "float16") ? 2 : 0;
    return !strcmp(dtype, "float32") || !strcmp(dtype, "int32") ? 4 : !strcmp(dtype, "bool") ? 1 : 0;
}

static int get_shape(json_t *a, int wi, const char *name, hm_tfl_shape *s, int64_t *numel) {
    if (!json_is_array(a)) return FAIL("weight %d ('%s'): shape is not an array", wi, name);
    size_t r = json_array_size(a);
    if (r > HM_TFL_MAX_DIMS) return FAIL("weight %d ('%s'): rank %zu (at most %d)", wi, name, r, HM_TFL_MAX_DIMS);
    s->ndim = (int)r;
    int64_t n = 1;
    for (size_t d = 0; d < r; d++) {
        json_t *v = json_array_get(a, d);
        if (!json_is_integer(v) || json_integer_value(v) < 0 || json_integer_value(v) > HM_TFJS_MAX_DIM)
            return FAIL("weight %d ('%s'): dimension %zu is not an integer in 0..%d", wi, name, d, HM_TFJS_MAX_DIM);
        s->dims[d] = (int)json_integer_value(v);
        n *= s->dims[d];
        if (n > HM_TFJS_MAX_NUMEL) return FAIL("weight %d ('%s'): more than %lld elements", wi, name, (long long)HM_TFJS_MAX_NUMEL);
    }
    *numel = n;
    return HM_OK;
}

/* Decode one manifest entry from p (avail bytes) into w; *used = its
 * bytes. */
static int read_weight(json_t *e, int wi, const uint8_t *p, size_t avail, hm_tfjs_wt *w, size_t *used) {
    if (!json_is_object(e)) return FAIL("weight %d is not an object", wi);
    int rc = get_name(json_object_get(e, "name"), "weight", wi, &w->name);
    if (rc) return rc;
    const char *dtype = json_string_value(json_object_get(e, "dtype"));
    if (!dtype) return FAIL("weight %d ('%s'): no dtype", wi, w->name);
    if ((rc = get_shape(json_object_get(e, "shape"), wi, w->name, &w->shape, &w->numel))) return rc;
    json_t *q = json_object_get(e, "quantization");
    const char *qtype = NULL;
    double scale = 1.0, qmin = 0.0;
    if (q && !json_is_null(q)) {
        if (!json_is_object(q) || !(qtype = json_string_value(json_object_get(q, "dtype"))))
            return FAIL("weight %d ('%s'): quantization without a dtype", wi, w->name);
        if (strcmp(qtype, "float16")) {
            json_t *sv = json_object_get(q, "scale"), *mv = json_object_get(q, "min");
            if (!json_is_number(sv) || !json_is_number(mv))
                return FAIL("weight %d ('%s'): quantization without a numeric scale and min", wi, w->name);
            scale = json_number_value(sv), qmin = json_number_value(mv);
            if (!isfinite(scale) || !isfinite(qmin)) return FAIL("weight %d ('%s'): scale or min not finite", wi, w->name);
        }
    }
    const int es = stored_size(dtype, qtype);
    char b1[40], b2[40];
    if (!es)
        return hm_err(HM_E_UNSUPPORTED, "tfjs: weight %d ('%s'): dtype %s%s%s is not supported", wi, w->name,
                      printable(dtype, b1, sizeof b1), qtype ? " quantized as " : "",
                      qtype ? printable(qtype, b2, sizeof b2) : "");
    const int is_int = !strcmp(dtype, "int32"), is_bool = !strcmp(dtype, "bool");
    if (qtype && !is_int && strcmp(dtype, "float32"))
        return hm_err(HM_E_UNSUPPORTED, "tfjs: weight %d ('%s'): quantized %s", wi, w->name, printable(dtype, b1, sizeof b1));
    if (qtype && is_int && !strcmp(qtype, "float16"))
        return hm_err(HM_E_UNSUPPORTED, "tfjs: weight %d ('%s'): int32 quantized as float16", wi, w->name);
    const size_t bytes = (size_t)w->numel * (size_t)es;
    if (bytes > avail)
        return FAIL("weight %d ('%s'): needs %zu bytes, the weight files have %zu left", wi, w->name, bytes, avail);
    *used = bytes;
    if (is_bool) return HM_OK; /* read past, not kept */
    const size_t n = (size_t)w->numel;
    if (is_int) {
        w->i32 = hm_alloc((n ? n : 1) * sizeof(int32_t));
        if (!w->i32) return HM_E_NOMEM;
    } else {
        w->f = hm_alloc((n ? n : 1) * sizeof(float));
        if (!w->f) return HM_E_NOMEM;
    }
    for (size_t k = 0; k < n; k++) {
        double v;
        if (!qtype) {
            uint32_t u = (uint32_t)p[4 * k] | (uint32_t)p[4 * k + 1] << 8 | (uint32_t)p[4 * k + 2] << 16 |
                         (uint32_t)p[4 * k + 3] << 24;
            if (is_int) w->i32[k] = (int32_t)u;
            else memcpy(&w->f[k], &u, 4);
            continue;
        }
        if (!strcmp(qtype, "float16")) {
            w->f[k] = half_to_float((uint16_t)(p[2 * k] | p[2 * k + 1] << 8));
            continue;
        }
        unsigned qv = es == 1 ? p[k] : (unsigned)(p[2 * k] | p[2 * k + 1] << 8);
        v = qv * scale + qmin; /* TF.js: Float32Array(q * scale + min), in double */
        if (is_int) {
            double r = round(v);
            if (!(r >= -2147483648.0 && r <= 2147483647.0))
                return FAIL("weight %d ('%s'): dequantized value %g is not an int32", wi, w->name, v);
            w->i32[k] = (int32_t)r;
        } else {
            w->f[k] = (float)v;
        }
    }
    return HM_OK;
}

static int read_manifest(hm_tfjs_graph *g, json_t *man, const uint8_t *bin, size_t blen) {
    if (!json_is_array(man)) return FAIL("weightsManifest is not an array");
    size_t total = 0;
    for (size_t gi = 0; gi < json_array_size(man); gi++) {
        json_t *ws = json_object_get(json_array_get(man, gi), "weights");
        if (!json_is_array(ws)) return FAIL("weightsManifest[%zu] has no weights array", gi);
        total += json_array_size(ws);
        if (total > HM_TFJS_MAX_NODES) return FAIL("more than %d weights", HM_TFJS_MAX_NODES);
    }
    g->consts = calloc(total + 1, sizeof *g->consts);
    g->const_idx = malloc((total + 1) * sizeof *g->const_idx);
    if (!g->consts || !g->const_idx) return hm_err(HM_E_NOMEM, "tfjs: out of memory");
    size_t off = 0;
    for (size_t gi = 0; gi < json_array_size(man); gi++) {
        json_t *ws = json_object_get(json_array_get(man, gi), "weights");
        for (size_t k = 0; k < json_array_size(ws); k++) {
            size_t used = 0;
            hm_tfjs_wt *w = &g->consts[g->nc];
            int rc = read_weight(json_array_get(ws, k), g->nc, bin + off, blen - off, w, &used);
            g->nc++;
            if (rc) return rc;
            off += used;
        }
    }
    if (off != blen) return FAIL("the weights take %zu bytes, the weight files have %zu", off, blen);
    for (int i = 0; i < g->nc; i++) g->const_idx[i] = i;
    qsort_r(g->const_idx, (size_t)g->nc, sizeof *g->const_idx, cmp_const, g);
    for (int i = 1; i < g->nc; i++)
        if (!strcmp(g->consts[g->const_idx[i]].name, g->consts[g->const_idx[i - 1]].name))
            return FAIL("weight '%s' is listed twice", g->consts[g->const_idx[i]].name);
    return HM_OK;
}

/* ---- topology ---- */

/* "name", "name:k" (k < 1024) or "^name" (control: *ctrl = 1). The name
 * part is copied into buf. */
static int split_input(const char *s, size_t n, char *buf, int *port, int *ctrl) {
    *ctrl = s[0] == '^';
    if (*ctrl) s++, n--;
    *port = 0;
    size_t c = n;
    while (c > 0 && s[c - 1] >= '0' && s[c - 1] <= '9') c--;
    if (c > 0 && c < n && s[c - 1] == ':' && n - c <= 4) {
        *port = atoi(s + c);
        n = c - 1;
    }
    if (n == 0 || *port > 1023) return -1;
    memcpy(buf, s, n);
    buf[n] = 0;
    return 0;
}

static int read_nodes(hm_tfjs_graph *g, json_t *nodes) {
    if (!json_is_array(nodes)) return FAIL("modelTopology.node is not an array");
    size_t n = json_array_size(nodes);
    if (n > HM_TFJS_MAX_NODES) return FAIL("%zu nodes (at most %d)", n, HM_TFJS_MAX_NODES);
    g->nodes = calloc(n + 1, sizeof *g->nodes);
    g->node_idx = malloc((n + 1) * sizeof *g->node_idx);
    if (!g->nodes || !g->node_idx) return hm_err(HM_E_NOMEM, "tfjs: out of memory");
    g->n = (int)n;
    for (int i = 0; i < g->n; i++) {
        json_t *o = json_array_get(nodes, (size_t)i);
        hm_tfjs_node *nd = &g->nodes[i];
        if (!json_is_object(o)) return FAIL("node %d is not an object", i);
        int rc = get_name(json_object_get(o, "name"), "node", i, &nd->name);
        if (rc) return rc;
        if ((rc = get_name(json_object_get(o, "op"), "node", i, &nd->op))) return FAIL("node %d ('%s'): no op", i, nd->name);
        nd->attr = json_object_get(o, "attr");
        if (nd->attr && !json_is_object(nd->attr)) return FAIL("node %d ('%s'): attr is not an object", i, nd->name);
        nd->cst = -1;
        g->node_idx[i] = i;
    }
    qsort_r(g->node_idx, n, sizeof *g->node_idx, cmp_node, g);
    for (size_t i = 1; i < n; i++)
        if (!strcmp(g->nodes[g->node_idx[i]].name, g->nodes[g->node_idx[i - 1]].name))
            return FAIL("node '%s' is defined twice", g->nodes[g->node_idx[i]].name);
    char buf[HM_TFJS_MAX_NAME + 1];
    for (int i = 0; i < g->n; i++) {
        hm_tfjs_node *nd = &g->nodes[i];
        json_t *in = json_object_get(json_array_get(nodes, (size_t)i), "input");
        if (!in) continue;
        if (!json_is_array(in)) return FAIL("node %d ('%s'): input is not an array", i, nd->name);
        size_t k = json_array_size(in);
        if (k > HM_TFJS_MAX_NODE_INPUTS) return FAIL("node %d ('%s'): %zu inputs (at most %d)", i, nd->name, k, HM_TFJS_MAX_NODE_INPUTS);
        nd->in = malloc(2 * (k + 1) * sizeof *nd->in);
        if (!nd->in) return hm_err(HM_E_NOMEM, "tfjs: out of memory");
        nd->port = nd->in + k + 1;
        for (size_t j = 0; j < k; j++) {
            json_t *v = json_array_get(in, j);
            const char *s = json_string_value(v);
            int port, ctrl;
            if (!s || json_string_length(v) == 0 || json_string_length(v) > HM_TFJS_MAX_NAME + 5 ||
                strlen(s) != json_string_length(v) || split_input(s, strlen(s), buf, &port, &ctrl) ||
                strlen(buf) > HM_TFJS_MAX_NAME)
                return FAIL("node %d ('%s'): input %zu is not a node reference", i, nd->name, j);
            if (ctrl) continue;
            int src = hm_tfjs_find(g, buf);
            if (src < 0) return FAIL("node %d ('%s'): input %zu names no node", i, nd->name, j);
            nd->port[nd->nin] = port;
            nd->in[nd->nin++] = src;
        }
    }
    return HM_OK;
}

int hm_tfjs_read(const void *json, size_t jlen, const void *bin, size_t blen, hm_tfjs_graph **out) {
    if (!out) return hm_err(HM_E_ARG, "hm_tfjs_read: NULL output");
    *out = NULL;
    if ((!json && jlen) || (!bin && blen)) return hm_err(HM_E_ARG, "hm_tfjs_read: NULL buffer");
    if (jlen > HM_TFJS_MAX_JSON)
        return hm_err(HM_E_UNSUPPORTED, "tfjs: model.json of %zu bytes (at most %zu)", jlen, HM_TFJS_MAX_JSON);
    if (blen > HM_TFJS_MAX_WEIGHTS)
        return hm_err(HM_E_UNSUPPORTED, "tfjs: %zu bytes of weights (at most %zu)", blen, HM_TFJS_MAX_WEIGHTS);
    hm_tfjs_graph *g = calloc(1, sizeof *g);
    if (!g) return hm_err(HM_E_NOMEM, "tfjs: out of memory");
    json_error_t e;
    g->root = json_loadb(json ? json : "", jlen, JSON_REJECT_DUPLICATES, &e);
    int rc;
    if (!g->root) {
        /* jansson quotes the offending bytes: keep the message one printable line */
        for (char *c = e.text; *c; c++)
            if ((unsigned char)*c < 0x20 || *c == 0x7f) *c = '?';
        rc = FAIL("model.json is not JSON (line %d: %.120s)", e.line, e.text);
    } else if (!json_is_object(g->root)) {
        rc = FAIL("model.json is not an object");
    } else {
        json_t *topo = json_object_get(g->root, "modelTopology");
        if (!json_is_object(topo)) rc = FAIL("no modelTopology object");
        else if (!(rc = read_nodes(g, json_object_get(topo, "node"))))
            rc = read_manifest(g, json_object_get(g->root, "weightsManifest"), bin, blen);
    }
    if (!rc)
        for (int i = 0; i < g->n; i++)
            if (!strcmp(g->nodes[i].op, "Const")) g->nodes[i].cst = find_const(g, g->nodes[i].name);
    if (rc) {
        hm_tfjs_free(g);
        return rc;
    }
    *out = g;
    return HM_OK;
}

/* Read a whole file of at most cap bytes, appending to *buf (grown). */
static int read_file(const char *path, size_t cap, uint8_t **buf, size_t *len) {
    FILE *f = hm_fopen_regular(path);
    if (!f) return hm_err(HM_E_IO, "tfjs: cannot open %s: %s", path, errno == EINVAL ? "not a regular file" : strerror(errno));
    long size = -1;
    if (fseek(f, 0, SEEK_END) == 0) size = ftell(f);
    if (size < 0 || fseek(f, 0, SEEK_SET) != 0) {
        fclose(f);
        return hm_err(HM_E_IO, "tfjs: cannot read %s", path);
    }
    if ((size_t)size > cap - *len) {
        fclose(f);
        return hm_err(HM_E_UNSUPPORTED, "tfjs: %s makes the model over %zu bytes", path, cap);
    }
    uint8_t *nb = realloc(*buf, *len + (size_t)size + 1);
    if (!nb) {
        fclose(f);
        return hm_err(HM_E_NOMEM, "tfjs: out of memory reading %s", path);
    }
    *buf = nb;
    size_t got = fread(nb + *len, 1, (size_t)size, f);
    int bad = ferror(f) || got != (size_t)size;
    fclose(f);
    if (bad) return hm_err(HM_E_IO, "tfjs: cannot read %s", path);
    *len += (size_t)size;
    return HM_OK;
}

int hm_tfjs_load(const char *json_path, hm_tfjs_graph **out) {
    if (!json_path || !out) return hm_err(HM_E_ARG, "hm_tfjs_load: NULL argument");
    *out = NULL;
    uint8_t *js = NULL, *bin = NULL;
    size_t jlen = 0, blen = 0;
    int rc = read_file(json_path, HM_TFJS_MAX_JSON, &js, &jlen);
    json_t *root = NULL;
    if (!rc) {
        root = json_loadb((const char *)js, jlen, JSON_REJECT_DUPLICATES, NULL);
        if (!root) rc = hm_err(HM_E_FORMAT, "tfjs: %s is not JSON", json_path);
    }
    /* The weight files: plain names beside model.json, in manifest order. */
    const char *slash = strrchr(json_path, '/');
    const size_t dlen = slash ? (size_t)(slash - json_path) + 1 : 0;
    json_t *man = root ? json_object_get(root, "weightsManifest") : NULL;
    if (!rc && !json_is_array(man)) rc = hm_err(HM_E_FORMAT, "tfjs: %s: weightsManifest is not an array", json_path);
    for (size_t gi = 0; !rc && gi < json_array_size(man); gi++) {
        json_t *paths = json_object_get(json_array_get(man, gi), "paths");
        if (!json_is_array(paths)) rc = hm_err(HM_E_FORMAT, "tfjs: %s: weightsManifest[%zu] has no paths", json_path, gi);
        for (size_t k = 0; !rc && k < json_array_size(paths); k++) {
            const char *p = json_string_value(json_array_get(paths, k));
            if (!p || !p[0] || strchr(p, '/') || strchr(p, '\\') || !strcmp(p, "..") || !strcmp(p, ".") ||
                strlen(p) > 255) {
                rc = hm_err(HM_E_FORMAT, "tfjs: %s: weight path %zu of group %zu is not a plain file name", json_path,
                            k, gi);
                break;
            }
            char *full = malloc(dlen + strlen(p) + 1);
            if (!full) {
                rc = hm_err(HM_E_NOMEM, "tfjs: out of memory");
                break;
            }
            memcpy(full, json_path, dlen);
            strcpy(full + dlen, p);
            rc = read_file(full, HM_TFJS_MAX_WEIGHTS, &bin, &blen);
            free(full);
        }
    }
    json_decref(root);
    if (!rc) rc = hm_tfjs_read(js, jlen, bin, blen, out);
    free(js);
    free(bin);
    if (rc) {
        char msg[512];
        snprintf(msg, sizeof msg, "%s", hm_errmsg());
        if (!strstr(msg, json_path)) rc = hm_err(rc, "%s: %s", json_path, msg);
    }
    return rc;
}
