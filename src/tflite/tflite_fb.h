/* tflite/tflite_fb.h - bounds-checked reading of a FlatBuffer (internal to
 * the TFLite reader).
 *
 * Every accessor validates what it touches against the buffer: a table's
 * soffset and vtable, a field's slot against the table's inline size, an
 * uoffset's target, a vector's length times its element size, a string's
 * bytes. Nothing is assumed about alignment (values are read with memcpy,
 * little-endian as the format defines). A failure records one line with
 * hm_err(HM_E_FORMAT, ...) naming `what` (the caller's path to the object,
 * e.g. "Model.subgraphs[0].tensors[3]") and the byte offset, and returns
 * HM_E_FORMAT; out-parameters are then untouched.
 */
#ifndef HM_TFLITE_FB_H
#define HM_TFLITE_FB_H

#include <stddef.h>
#include <stdint.h>

typedef struct {
    const uint8_t *b;
    size_t n;
} hm_fb;

/* A validated table: its position, its vtable and their sizes. */
typedef struct {
    size_t pos, vt;
    unsigned vtsize, tsize;
} hm_fb_table;

/* A validated vector: element data position and count. */
typedef struct {
    size_t data;
    uint32_t len;
} hm_fb_vec;

uint32_t hm_fb_rd_u32(const hm_fb *f, size_t pos);

/* The table at pos (e.g. an uoffset target). */
int hm_fb_table_at(const hm_fb *f, size_t pos, const char *what, hm_fb_table *t);

/* Position of field `id` holding `size` inline bytes, or 0 when the field is
 * absent (not in the vtable, or slot 0). */
int hm_fb_field(const hm_fb *f, const hm_fb_table *t, int id, size_t size, const char *what, size_t *pos);

/* Scalars: the field's value, or def when absent. */
int hm_fb_u8(const hm_fb *f, const hm_fb_table *t, int id, uint8_t def, const char *what, uint8_t *v);
int hm_fb_i8(const hm_fb *f, const hm_fb_table *t, int id, int8_t def, const char *what, int8_t *v);
int hm_fb_i32(const hm_fb *f, const hm_fb_table *t, int id, int32_t def, const char *what, int32_t *v);
int hm_fb_u32(const hm_fb *f, const hm_fb_table *t, int id, uint32_t def, const char *what, uint32_t *v);
int hm_fb_u64(const hm_fb *f, const hm_fb_table *t, int id, uint64_t def, const char *what, uint64_t *v);

/* Sub-table of field id; *present = 0 (and t untouched) when absent. */
int hm_fb_subtable(const hm_fb *f, const hm_fb_table *t, int id, const char *what, hm_fb_table *out, int *present);

/* Vector of elem-byte elements (uoffset elements for vectors of tables or
 * strings: elem 4); absent -> len 0. */
int hm_fb_vector(const hm_fb *f, const hm_fb_table *t, int id, size_t elem, const char *what, hm_fb_vec *v);

/* Element i (< v->len) of a vector of tables. */
int hm_fb_vec_table(const hm_fb *f, const hm_fb_vec *v, uint32_t i, const char *what, hm_fb_table *out);

/* String field: its bytes (not NUL-terminated in general) and length;
 * absent -> s = NULL, len 0. */
int hm_fb_string(const hm_fb *f, const hm_fb_table *t, int id, const char *what, const uint8_t **s, uint32_t *len);

/* Element i of a validated vector of 4-byte little-endian integers. */
int32_t hm_fb_vec_i32(const hm_fb *f, const hm_fb_vec *v, uint32_t i);

#endif
