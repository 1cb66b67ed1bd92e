/* det_model.c - where the detector's models live, loading them (shape
 * checks) and the per-thread state. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/fileio.h"
#include "core/util.h"
#include "detect/det_internal.h"

static int shape_is(const hm_tfl_shape *s, int n, const int *d) {
    if (s->ndim != n) return 0;
    for (int i = 0; i < n; i++)
        if (s->dims[i] != d[i]) return 0;
    return 1;
}

static long shape_numel(const hm_tfl_shape *s) {
    long n = 1;
    for (int i = 0; i < s->ndim; i++) n *= s->dims[i];
    return n;
}

/* The palm model: one [1,192,192,3] input; outputs told apart by size. */
static int check_palm(hm_det_model *m, const char *path) {
    hm_tfl_shape s;
    static const int in[4] = {1, HM_PALM_SIZE, HM_PALM_SIZE, 3};
    if (hm_tfl_n_inputs(m->palm) != 1 || hm_tfl_input_shape(m->palm, 0, &s) || !shape_is(&s, 4, in))
        return hm_err(HM_E_SHAPE, "%s: not the palm detector (expected one [1,192,192,3] input)", path);
    m->palm_boxes = m->palm_scores = -1;
    for (int i = 0; i < hm_tfl_n_outputs(m->palm); i++) {
        if (hm_tfl_output_shape(m->palm, i, &s)) return HM_E_SHAPE;
        const long n = shape_numel(&s);
        if (n == (long)HM_PALM_ANCHORS * HM_PALM_COORDS && m->palm_boxes < 0) m->palm_boxes = i;
        else if (n == HM_PALM_ANCHORS && m->palm_scores < 0) m->palm_scores = i;
    }
    if (m->palm_boxes < 0 || m->palm_scores < 0 || hm_tfl_n_outputs(m->palm) != 2)
        return hm_err(HM_E_SHAPE, "%s: not the palm detector (expected outputs [1,2016,18] and [1,2016,1])", path);
    return HM_OK;
}

/* The landmark model: [1,224,224,3] in; out: two 63-vectors (image, then
 * world landmarks) and two scalars (presence, then handedness), in file
 * order. */
static int check_landmark(hm_det_model *m, const char *path) {
    hm_tfl_shape s;
    static const int in[4] = {1, HM_LM_SIZE, HM_LM_SIZE, 3};
    if (hm_tfl_n_inputs(m->lm) != 1 || hm_tfl_input_shape(m->lm, 0, &s) || !shape_is(&s, 4, in))
        return hm_err(HM_E_SHAPE, "%s: not the hand landmark model (expected one [1,224,224,3] input)", path);
    int v63[2], nv = 0, sc[2], ns = 0;
    for (int i = 0; i < hm_tfl_n_outputs(m->lm); i++) {
        if (hm_tfl_output_shape(m->lm, i, &s)) return HM_E_SHAPE;
        const long n = shape_numel(&s);
        if (n == 63 && nv < 2) v63[nv++] = i;
        else if (n == 1 && ns < 2) sc[ns++] = i;
        else return hm_err(HM_E_SHAPE, "%s: unexpected output %d of %ld values (hand landmark model?)", path, i, n);
    }
    if (nv != 2 || ns != 2)
        return hm_err(HM_E_SHAPE, "%s: not the hand landmark model (expected 2 outputs of 63 values and 2 scalars)", path);
    m->lm_landmarks = v63[0];
    m->lm_presence = sc[0];
    m->lm_handedness = sc[1];
    return HM_OK;
}

int hm_det_model_load_files(const char *palm_path, const char *lm_path, hm_det_model **out) {
    if (!out || !palm_path || !lm_path) return hm_err(HM_E_ARG, "hm_det_model_load_files: NULL argument");
    *out = NULL;
    hm_det_model *m = calloc(1, sizeof *m);
    if (!m) return hm_err(HM_E_NOMEM, "out of memory loading the hand detector");
    int rc = hm_tfl_load(palm_path, &m->palm);
    if (!rc) rc = check_palm(m, palm_path);
    if (!rc) rc = hm_tfl_load(lm_path, &m->lm);
    if (!rc) rc = check_landmark(m, lm_path);
    if (rc) {
        hm_det_model_free(m);
        return rc;
    }
    hm_palm_anchors(m->anchors);
    *out = m;
    return HM_OK;
}

int hm_det_model_load(const char *dir, int lite, hm_det_model **out) {
    char d[2048], pp[2300], lp[2300];
    if (!out) return hm_err(HM_E_ARG, "hm_det_model_load: NULL output");
    *out = NULL;
    int rc = hm_det_find_dir(dir, lite, d, sizeof d);
    if (rc) return rc;
    snprintf(pp, sizeof pp, "%s/palm_detection_%s.tflite", d, lite ? "lite" : "full");
    snprintf(lp, sizeof lp, "%s/hand_landmark_%s.tflite", d, lite ? "lite" : "full");
    return hm_det_model_load_files(pp, lp, out);
}

int hm_det_model_load_body(hm_det_model *m, const char *dir) {
    if (!m) return hm_err(HM_E_ARG, "hm_det_model_load_body: NULL model");
    if (m->body) return HM_OK;
    return hm_body_model_load(dir, &m->body);
}

int hm_det_model_load_proposals(hm_det_model *m, const char *dir) {
    if (!m) return hm_err(HM_E_ARG, "hm_det_model_load_proposals: NULL model");
    if (!m->body)
        return hm_err(HM_E_ARG, "the proposal pass verifies with the body pass's hand_recrop model: load the body "
                      "models first (hm_det_model_load_body)");
    if (m->ht) return HM_OK;
    char d[2048], p[2300];
    int rc = hm_det_find_dir(dir, 0, d, sizeof d);
    if (rc) return rc;
    snprintf(p, sizeof p, "%s/handtrack.json", d);
    FILE *f = hm_fopen_regular(p);
    if (!f)
        return hm_err(HM_E_IO, "hand-box detector handtrack.json not in %s; run scripts/get_detector.sh %s", d,
                      dir && dir[0] ? dir : "");
    fclose(f);
    return hm_ht_model_load_file(p, &m->ht);
}

void hm_det_model_free(hm_det_model *m) {
    if (!m) return;
    hm_ht_model_free(m->ht);
    hm_body_model_free(m->body);
    hm_tfl_free(m->palm);
    hm_tfl_free(m->lm);
    free(m);
}

static void worker_free(hm_det_worker *w) {
    if (!w) return;
    hm_tfl_state_free(w->palm);
    hm_tfl_state_free(w->lm);
    hm_free(w);
}

static int worker_new(const hm_det_model *m, hm_det_worker **out) {
    hm_det_worker *w = hm_alloc(sizeof *w);
    if (!w) return hm_err(HM_E_NOMEM, "out of memory for the hand detector state");
    memset(w, 0, sizeof *w);
    int rc = hm_tfl_state_new(m->palm, &w->palm);
    if (!rc) rc = hm_tfl_state_new(m->lm, &w->lm);
    if (rc) {
        worker_free(w);
        return rc;
    }
    *out = w;
    return HM_OK;
}

int hm_det_state_new(const hm_det_model *m, hm_det_state **out) {
    if (!m || !out) return hm_err(HM_E_ARG, "hm_det_state_new: NULL argument");
    *out = NULL;
    hm_det_state *s = hm_alloc(sizeof *s);
    if (!s) return hm_err(HM_E_NOMEM, "out of memory for the hand detector state");
    memset(s, 0, sizeof *s);
    s->m = m;
    int rc = worker_new(m, &s->w[0]);
    if (!rc && m->body) rc = hm_body_state_new(m->body, &s->body);
    if (!rc && m->ht) rc = hm_ht_state_new(m->ht, &s->ht);
    if (rc) {
        hm_det_state_free(s);
        return rc;
    }
    s->nworkers = 1;
    *out = s;
    return HM_OK;
}

int hm_det_state_reserve(hm_det_state *s, int n) {
    if (!s || n < 1) return hm_err(HM_E_ARG, "hm_det_state_reserve: bad arguments");
    if (n > HM_DET_MAX_WORKERS) n = HM_DET_MAX_WORKERS;
    for (; s->nworkers < n; s->nworkers++) {
        int rc = worker_new(s->m, &s->w[s->nworkers]);
        if (rc) return rc;
    }
    return HM_OK;
}

void hm_det_state_free(hm_det_state *s) {
    if (!s) return;
    for (int i = 0; i < s->nworkers; i++) worker_free(s->w[i]);
    hm_body_state_free(s->body);
    hm_ht_state_free(s->ht);
    hm_free(s);
}
