/* stage_io.h - the npz in/out of the stage tools (tool_detect_stages,
 * tool_body_stages): one input archive and one output writer per process.
 * Define STAGE_TOOL (the tool's name, for messages) before including. */
#ifndef STAGE_IO_H
#define STAGE_IO_H

#include <stdio.h>
#include <stdlib.h>

#include "core/util.h"
#include "detect/stages.h"
#include "format/npy.h"

static hm_npz *in;
static hm_npz_writer *wr;

/* 1 with *a filled, 0 when IN.npz has no such array, -1 on a read error;
 * a wrong dtype ends the tool. */
static inline int get(const char *name, hm_dtype dt, hm_array *a) {
    if (!hm_npz_has(in, name)) return 0;
    if (hm_npz_get(in, name, a)) return -1;
    if (a->dtype != dt) {
        fprintf(stderr, STAGE_TOOL ": %s has the wrong dtype\n", name);
        exit(1);
    }
    return 1;
}

static inline void put(const char *name, hm_dtype dt, int nd, const int64_t *shape, const void *data) {
    if (hm_npz_write_add(wr, name, dt, nd, shape, data)) {
        fprintf(stderr, STAGE_TOOL ": writing %s: %s\n", name, hm_errmsg());
        exit(1);
    }
}

static inline hm_det_rect rect_of(const double *r) { return (hm_det_rect){r[0], r[1], r[2], r[3], r[4]}; }
static inline void rect_to(const hm_det_rect *r, double *o) {
    o[0] = r->cx, o[1] = r->cy, o[2] = r->w, o[3] = r->h, o[4] = r->rot;
}

#endif
