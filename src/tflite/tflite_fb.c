/* tflite/tflite_fb.c - bounds-checked FlatBuffer access (see tflite_fb.h).
 *
 * All position arithmetic is done in uint64_t on values that are at most
 * the buffer length plus a 32-bit quantity, so it cannot wrap; a range is
 * inside the buffer when pos <= n and len <= n - pos.
 */
#include "tflite/tflite_fb.h"

#include <string.h>

#include "core/util.h"

static int in_range(const hm_fb *f, uint64_t pos, uint64_t len) {
    return pos <= f->n && len <= f->n - pos;
}

uint32_t hm_fb_rd_u32(const hm_fb *f, size_t pos) {
    uint8_t b[4];
    memcpy(b, f->b + pos, 4);
    return (uint32_t)b[0] | (uint32_t)b[1] << 8 | (uint32_t)b[2] << 16 | (uint32_t)b[3] << 24;
}

static unsigned rd_u16(const hm_fb *f, size_t pos) {
    return (unsigned)f->b[pos] | (unsigned)f->b[pos + 1] << 8;
}

/* On error, HM_E_FORMAT is returned and *t is unchanged. */
int hm_fb_table_at(const hm_fb *f, size_t pos, const char *what, hm_fb_table *t) {
    if (!in_range(f, pos, 4))
        return hm_err(HM_E_FORMAT, "tflite: %s: table at offset %zu is outside the %zu-byte file", what, pos, f->n);
    /* soffset: the vtable lies at pos - soffset (either side of the table). */
    int32_t so = (int32_t)hm_fb_rd_u32(f, pos);
    int64_t vt = (int64_t)pos - (int64_t)so;
    if (vt < 0 || !in_range(f, (uint64_t)vt, 4))
        return hm_err(HM_E_FORMAT, "tflite: %s: vtable of the table at offset %zu points outside the file", what, pos);
    unsigned vts = rd_u16(f, (size_t)vt), ts = rd_u16(f, (size_t)vt + 2);
    if (vts < 4 || (vts & 1) || !in_range(f, (uint64_t)vt, vts))
        return hm_err(HM_E_FORMAT, "tflite: %s: bad vtable size %u at offset %lld", what, vts, (long long)vt);
    if (ts < 4 || !in_range(f, pos, ts))
        return hm_err(HM_E_FORMAT, "tflite: %s: table at offset %zu has inline size %u, beyond the file", what, pos, ts);
    t->pos = pos;
    t->vt = (size_t)vt;
    t->vtsize = vts;
    t->tsize = ts;
    return HM_OK;
}

int hm_fb_field(const hm_fb *f, const hm_fb_table *t, int id, size_t size, const char *what, size_t *pos) {
    unsigned slot = 4 + 2 * (unsigned)id;
    if (slot + 2 > t->vtsize) {
        *pos = 0;
        return HM_OK;
    }
    unsigned off = rd_u16(f, t->vt + slot);
    if (off == 0) {
        *pos = 0;
        return HM_OK;
    }
    if (off < 4 || (uint64_t)off + size > t->tsize)
        return hm_err(HM_E_FORMAT, "tflite: %s: field %d at table offset %zu: slot %u+%zu outside the table's %u bytes",
                      what, id, t->pos, off, size, t->tsize);
    *pos = t->pos + off;
    return HM_OK;
}

int hm_fb_u8(const hm_fb *f, const hm_fb_table *t, int id, uint8_t def, const char *what, uint8_t *v) {
    size_t p = 0;
    int rc = hm_fb_field(f, t, id, 1, what, &p);
    if (rc) return rc;
    *v = p ? f->b[p] : def;
    return HM_OK;
}

int hm_fb_i8(const hm_fb *f, const hm_fb_table *t, int id, int8_t def, const char *what, int8_t *v) {
    uint8_t u;
    int rc = hm_fb_u8(f, t, id, (uint8_t)def, what, &u);
    if (rc) return rc;
    *v = (int8_t)u;
    return HM_OK;
}

int hm_fb_u32(const hm_fb *f, const hm_fb_table *t, int id, uint32_t def, const char *what, uint32_t *v) {
    size_t p = 0;
    int rc = hm_fb_field(f, t, id, 4, what, &p);
    if (rc) return rc;
    *v = p ? hm_fb_rd_u32(f, p) : def;
    return HM_OK;
}

int hm_fb_i32(const hm_fb *f, const hm_fb_table *t, int id, int32_t def, const char *what, int32_t *v) {
    uint32_t u;
    int rc = hm_fb_u32(f, t, id, (uint32_t)def, what, &u);
    if (rc) return rc;
    *v = (int32_t)u;
    return HM_OK;
}

int hm_fb_u64(const hm_fb *f, const hm_fb_table *t, int id, uint64_t def, const char *what, uint64_t *v) {
    size_t p = 0;
    int rc = hm_fb_field(f, t, id, 8, what, &p);
    if (rc) return rc;
    *v = p ? (uint64_t)hm_fb_rd_u32(f, p) | (uint64_t)hm_fb_rd_u32(f, p + 4) << 32 : def;
    return HM_OK;
}

/* The uoffset in field id: target position, or 0 when absent. */
static int ref(const hm_fb *f, const hm_fb_table *t, int id, const char *what, size_t *target) {
    size_t p = 0;
    int rc = hm_fb_field(f, t, id, 4, what, &p);
    if (rc) return rc;
    if (!p) {
        *target = 0;
        return HM_OK;
    }
    uint64_t q = (uint64_t)p + hm_fb_rd_u32(f, p);
    /* An uoffset of 0 would point at itself: never valid. */
    if (q == p || !in_range(f, q, 4))
        return hm_err(HM_E_FORMAT, "tflite: %s: field %d at offset %zu refers to offset %llu, outside the file",
                      what, id, p, (unsigned long long)q);
    *target = (size_t)q;
    return HM_OK;
}

int hm_fb_subtable(const hm_fb *f, const hm_fb_table *t, int id, const char *what, hm_fb_table *out, int *present) {
    size_t q = 0;
    int rc = ref(f, t, id, what, &q);
    if (rc) return rc;
    *present = q != 0;
    return q ? hm_fb_table_at(f, q, what, out) : HM_OK;
}

int hm_fb_vector(const hm_fb *f, const hm_fb_table *t, int id, size_t elem, const char *what, hm_fb_vec *v) {
    size_t q = 0;
    int rc = ref(f, t, id, what, &q);
    if (rc) return rc;
    if (!q) {
        v->data = 0;
        v->len = 0;
        return HM_OK;
    }
    uint32_t len = hm_fb_rd_u32(f, q);
    if (!in_range(f, (uint64_t)q + 4, (uint64_t)len * elem))
        return hm_err(HM_E_FORMAT, "tflite: %s: vector at offset %zu of %u x %zu bytes runs past the end of the file",
                      what, q, len, elem);
    v->data = q + 4;
    v->len = len;
    return HM_OK;
}

int hm_fb_vec_table(const hm_fb *f, const hm_fb_vec *v, uint32_t i, const char *what, hm_fb_table *out) {
    size_t p = v->data + (size_t)i * 4;
    uint64_t q = (uint64_t)p + hm_fb_rd_u32(f, p);
    if (q == p || !in_range(f, q, 4))
        return hm_err(HM_E_FORMAT, "tflite: %s: element at offset %zu refers to offset %llu, outside the file", what, p,
                      (unsigned long long)q);
    return hm_fb_table_at(f, (size_t)q, what, out);
}

int hm_fb_string(const hm_fb *f, const hm_fb_table *t, int id, const char *what, const uint8_t **s, uint32_t *len) {
    hm_fb_vec v;
    int rc = hm_fb_vector(f, t, id, 1, what, &v);
    if (rc) return rc;
    *s = v.data ? f->b + v.data : NULL;
    *len = v.len;
    return HM_OK;
}

int32_t hm_fb_vec_i32(const hm_fb *f, const hm_fb_vec *v, uint32_t i) {
    return (int32_t)hm_fb_rd_u32(f, v->data + (size_t)i * 4);
}
