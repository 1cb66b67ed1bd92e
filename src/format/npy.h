/* npy.h - NumPy .npy arrays and .npz archives (read and write).
 *
 * Reading accepts little-endian '<f4', '<f8', '|u1', '<i8', '<i4' (and
 * '|b1'), C order only (fortran_order True is rejected), format versions
 * 1.0/2.0/3.0. An npz is a zip of .npy members, stored or deflated.
 * Writing produces .npy v1.0 and stored (uncompressed) zip npz files that
 * numpy.load reads.
 */
#ifndef HM_NPY_H
#define HM_NPY_H

#include <stddef.h>
#include <stdint.h>
#include "format/ckpt.h"

typedef struct {
    hm_dtype dtype;
    int ndim;
    int64_t shape[HM_MAX_DIMS];
    int64_t numel;
    void *data;        /* owned, hm_alloc'd, 64-byte aligned */
} hm_array;

/* Parse .npy bytes; `what` names the source in error messages. */
int hm_npy_parse(const void *buf, size_t len, const char *what, hm_array *out);
int hm_npy_load(const char *path, hm_array *out);
void hm_array_free(hm_array *a);

/* npz reading: open, then fetch members by name (without ".npy"). */
typedef struct hm_npz hm_npz;
int hm_npz_open(const char *path, hm_npz **out);
/* HM_OK, or an error (HM_E_FORMAT if malformed; missing -> HM_E_ARG). */
int hm_npz_get(hm_npz *z, const char *name, hm_array *out);
int hm_npz_has(const hm_npz *z, const char *name);
void hm_npz_close(hm_npz *z);
/* Members in archive order; names without ".npy" (owned by z). */
int hm_npz_count(const hm_npz *z);
const char *hm_npz_name(const hm_npz *z, int i);

/* The .npy v1.0 header of a C-order f32/f64/u8/i32/i64 array, padded so
 * the data that follows starts 64-byte aligned: *len bytes written to hdr
 * (HM_NPY_HEADER_MAX of room). HM_E_ARG for another dtype or a bad rank. */
#define HM_NPY_HEADER_MAX 512
int hm_npy_header(hm_dtype dt, int ndim, const int64_t *shape, char *hdr, size_t *len);

/* npz writing: begin, add arrays (data copied into the file immediately),
 * finish writes the central directory. The archive is written to a temp
 * file beside the target (core/fileio: symlinks followed, non-regular
 * targets refused) and renamed over it by finish: on any error the temp
 * file is removed and what was at the path is untouched. Only
 * f32/f64/u8/i32/i64 arrays. */
typedef struct hm_npz_writer hm_npz_writer;
int hm_npz_write_begin(const char *path, hm_npz_writer **out);
/* A failed add (bad argument or I/O) removes the temp file at once; later calls
 * report the failure and the writer must still be finished or aborted. */
int hm_npz_write_add(hm_npz_writer *w, const char *name, hm_dtype dt,
                     int ndim, const int64_t *shape, const void *data);
int hm_npz_write_finish(hm_npz_writer *w);   /* always frees w */
void hm_npz_write_abort(hm_npz_writer *w);   /* frees w, removes the temp file */

#endif
