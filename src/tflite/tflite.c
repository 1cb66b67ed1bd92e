/* tflite/tflite.c - loading a .tflite model (read, prepare, plan) and the
 * model's accessors. See tflite/tflite.h.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/fileio.h"
#include "core/util.h"
#include "tflite/tflite_impl.h"

/* Largest file read (the MediaPipe models are 2-6 MB). */
#define HM_TFL_MAX_FILE ((size_t)1 << 30)

/* Also frees a partly read model (the loader's error path). NULL is fine. */
void hm_tfl_free(hm_tfl_model *m) {
    if (!m) return;
    for (int i = 0; i < m->nt; i++) {
        free(m->t[i].name);
        hm_free(m->t[i].f);
        hm_free(m->t[i].i32);
    }
    for (int i = 0; i < m->nops; i++) {
        free(m->ops[i].in);
        free(m->ops[i].out);
        if (m->ops[i].has_W) hm_packed_free(&m->ops[i].W);
    }
    free(m->t);
    free(m->ops);
    free(m->run);
    free(m->inputs);
    free(m->outputs);
    free(m);
}

/* On error, the code is returned, *out is NULL and nothing leaks. */
int hm_tfl_load_mem(const void *buf, size_t len, hm_tfl_model **out) {
    if (!out) return hm_err(HM_E_ARG, "hm_tfl_load_mem: NULL output");
    *out = NULL;
    if (!buf && len) return hm_err(HM_E_ARG, "hm_tfl_load_mem: NULL buffer");
    int rc = hm_isa_status();
    if (rc) return rc;
    hm_tfl_model *m = calloc(1, sizeof *m);
    if (!m) return hm_err(HM_E_NOMEM, "tflite: out of memory");
    m->isa = (int)hm_isa_active();
    m->k = hm_kernels_for(m->isa);
    if ((rc = hm_tfl_read(buf, len, m)) || (rc = hm_tfl_prepare(m)) || (rc = hm_tfl_plan(m))) {
        hm_tfl_free(m);
        return rc;
    }
    *out = m;
    return HM_OK;
}

/* The file is read whole, then parsed as hm_tfl_load_mem; an error
 * message then starts with the path. */
int hm_tfl_load(const char *path, hm_tfl_model **out) {
    if (!path || !out) return hm_err(HM_E_ARG, "hm_tfl_load: NULL argument");
    *out = NULL;
    FILE *f = hm_fopen_regular(path);
    if (!f) return hm_err(HM_E_IO, "tflite: cannot open %s: %s", path, errno == EINVAL ? "not a regular file" : strerror(errno));
    long size = -1;
    if (fseek(f, 0, SEEK_END) == 0) size = ftell(f);
    if (size < 0 || fseek(f, 0, SEEK_SET) != 0) {
        fclose(f);
        return hm_err(HM_E_IO, "tflite: cannot read %s", path);
    }
    if ((unsigned long)size > HM_TFL_MAX_FILE) {
        fclose(f);
        return hm_err(HM_E_UNSUPPORTED, "tflite: %s is %ld bytes (at most %zu)", path, size, HM_TFL_MAX_FILE);
    }
    uint8_t *buf = malloc(size ? (size_t)size : 1);
    if (!buf) {
        fclose(f);
        return hm_err(HM_E_NOMEM, "tflite: out of memory reading %s", path);
    }
    size_t got = fread(buf, 1, (size_t)size, f);
    int bad = ferror(f) || got != (size_t)size;
    fclose(f);
    if (bad) {
        free(buf);
        return hm_err(HM_E_IO, "tflite: cannot read %s", path);
    }
    int rc = hm_tfl_load_mem(buf, (size_t)size, out);
    free(buf);
    if (rc) {
        /* The message names the file (a detector loads two). */
        char msg[512];
        snprintf(msg, sizeof msg, "%s", hm_errmsg());
        rc = hm_err(rc, "%s: %s", path, msg);
    }
    return rc;
}

/* Accessors: 0 / NULL / HM_E_ARG for a NULL model or an index out of range. */
int hm_tfl_n_inputs(const hm_tfl_model *m) { return m ? m->ninputs : 0; }
int hm_tfl_n_outputs(const hm_tfl_model *m) { return m ? m->noutputs : 0; }

static int io_shape(const hm_tfl_model *m, const int *idx, int n, int i, hm_tfl_shape *s, const char *what) {
    if (!m || !s || i < 0 || i >= n) return hm_err(HM_E_ARG, "tflite: no graph %s %d", what, i);
    *s = m->t[idx[i]].shape;
    return HM_OK;
}

int hm_tfl_input_shape(const hm_tfl_model *m, int i, hm_tfl_shape *s) {
    return io_shape(m, m ? m->inputs : NULL, m ? m->ninputs : 0, i, s, "input");
}
int hm_tfl_output_shape(const hm_tfl_model *m, int i, hm_tfl_shape *s) {
    return io_shape(m, m ? m->outputs : NULL, m ? m->noutputs : 0, i, s, "output");
}
const char *hm_tfl_input_name(const hm_tfl_model *m, int i) {
    return m && i >= 0 && i < m->ninputs ? m->t[m->inputs[i]].name : NULL;
}
const char *hm_tfl_output_name(const hm_tfl_model *m, int i) {
    return m && i >= 0 && i < m->noutputs ? m->t[m->outputs[i]].name : NULL;
}
