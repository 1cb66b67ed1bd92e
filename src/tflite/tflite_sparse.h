/* tflite/tflite_sparse.h - the dense layout of a sparse constant (internal
 * to the TFLite reader; see tflite_sparse.c). */
#ifndef HM_TFLITE_SPARSE_H
#define HM_TFLITE_SPARSE_H

#include <stdint.h>

#include "tflite/tflite_fb.h"
#include "tflite/tflite_impl.h"

/* Check tensor ti's SparsityParameters table sp against its dense shape
 * (t->shape) and the `stored` values its buffer holds; on success
 * *offsets (malloc'd, `stored` entries) gives the dense element offset of
 * each stored value, in storage order. HM_E_FORMAT for metadata that is
 * inconsistent or out of bounds (the message names the field),
 * HM_E_UNSUPPORTED for a layout the reader does not densify, HM_E_NOMEM. */
int hm_tfl_sparse_layout(const hm_fb *f, const hm_fb_table *sp, int ti, const hm_tfl_tensor *t, int64_t stored,
                         int64_t **offsets);

#endif
