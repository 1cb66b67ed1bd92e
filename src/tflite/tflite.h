/* tflite/tflite.h - TFLite model files: a bounds-checked FlatBuffer reader
 * and an fp32 NHWC executor for the ops MediaPipe's hand models use.
 *
 * A hm_tfl_model is read-only once loaded (weights decoded to fp32, fp16
 * DEQUANTIZE folded at load, a static memory plan made) and may be shared
 * by any number of threads. Each thread running it owns a hm_tfl_state: the
 * activation arena the plan sized, allocated once; hm_tfl_invoke allocates
 * nothing.
 *
 * Errors: functions return HM_OK or a negative HM_E_* code (core/util.h)
 * after recording a one-line message with hm_err(); on error nothing is
 * returned through out-parameters and nothing leaks.
 */
#ifndef HM_TFLITE_H
#define HM_TFLITE_H

#include <stddef.h>

#include "core/pool.h"

#define HM_TFL_MAX_DIMS 6

typedef struct hm_tfl_model hm_tfl_model;
typedef struct hm_tfl_state hm_tfl_state;

typedef struct {
    int ndim;
    int dims[HM_TFL_MAX_DIMS];
} hm_tfl_shape;

/* Read a .tflite file / an in-memory copy of one (buf is not kept; it may be
 * freed after the call). HM_E_IO, HM_E_FORMAT (malformed or hostile file:
 * the message names the table, field or offset), HM_E_UNSUPPORTED (an op,
 * option or tensor type this executor does not run: the message names it),
 * HM_E_NOMEM. */
int hm_tfl_load(const char *path, hm_tfl_model **out);
int hm_tfl_load_mem(const void *buf, size_t len, hm_tfl_model **out);
void hm_tfl_free(hm_tfl_model *m);

int hm_tfl_n_inputs(const hm_tfl_model *m);
int hm_tfl_n_outputs(const hm_tfl_model *m);
/* Shape / tensor name of graph input or output i; HM_E_ARG if i is out of range. */
int hm_tfl_input_shape(const hm_tfl_model *m, int i, hm_tfl_shape *s);
int hm_tfl_output_shape(const hm_tfl_model *m, int i, hm_tfl_shape *s);
const char *hm_tfl_input_name(const hm_tfl_model *m, int i);
const char *hm_tfl_output_name(const hm_tfl_model *m, int i);

/* Per-thread run state for m (m must outlive it). */
int hm_tfl_state_new(const hm_tfl_model *m, hm_tfl_state **out);
void hm_tfl_state_free(hm_tfl_state *s);

/* The fp32 buffer of graph input i (fill before hm_tfl_invoke) and of
 * output i (valid until the next invoke); NULL if i is out of range. */
float *hm_tfl_input(hm_tfl_state *s, int i);
const float *hm_tfl_output(const hm_tfl_state *s, int i);

/* Run the graph; pool may be NULL (serial). HM_OK or a negative code. */
int hm_tfl_invoke(hm_tfl_state *s, hm_pool *pool);

#endif
