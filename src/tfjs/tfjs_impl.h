/* tfjs/tfjs_impl.h - the read graph's layout, shared by the reader
 * (tfjs_read.c) and the compiler (tfjs_build.c). Internal. */
#ifndef HM_TFJS_IMPL_H
#define HM_TFJS_IMPL_H

#include <jansson.h>

#include "tfjs/tfjs.h"

#define HM_TFJS_MAX_DIM (1 << 24)
#define HM_TFJS_MAX_NUMEL ((int64_t)1 << 28)

/* A weight of the manifest, decoded. Its name points into the parsed JSON. */
typedef struct {
    const char *name;
    hm_tfl_shape shape;
    int64_t numel;
    float *f;       /* float32 weights (hm_alloc'd) */
    int32_t *i32;   /* int32 weights (hm_alloc'd) */
} hm_tfjs_wt;

/* A node; name, op and attr point into the parsed JSON. */
typedef struct {
    const char *name, *op;
    json_t *attr;   /* object or NULL */
    int nin;        /* data inputs (control inputs dropped) */
    int *in;        /* node indices */
    int *port;      /* output index of each ("name:k") */
    int cst;        /* Const: its weight, else -1 */
} hm_tfjs_node;

struct hm_tfjs_graph {
    json_t *root;
    hm_tfjs_node *nodes;
    int n;
    hm_tfjs_wt *consts;
    int nc;
    int *node_idx, *const_idx; /* indices sorted by name */
};

#endif
