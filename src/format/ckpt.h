/* ckpt.h - read a PyTorch checkpoint (torch.save zip + pickle) without Python.
 *
 * The file is mmapped read-only; tensors point into the mapping (no copies).
 * The pickle is interpreted by a small, non-executing VM: GLOBAL/REDUCE of
 * unknown classes become opaque objects; only torch's tensor rebuild
 * functions (torch._utils._rebuild_tensor_v2 and the storage persistent ids)
 * are understood. Every byte offset and size is bounds-checked.
 *
 * hm_ckpt_open finds the tensor dictionary: the top-level dict's
 * "state_dict" entry when present (Lightning), else the top-level dict itself.
 */
#ifndef HM_CKPT_H
#define HM_CKPT_H

#include <stddef.h>
#include <stdint.h>

typedef enum {
    HM_DT_F32, HM_DT_F64, HM_DT_F16, HM_DT_BF16,
    HM_DT_I64, HM_DT_I32, HM_DT_I16, HM_DT_I8, HM_DT_U8, HM_DT_BOOL,
} hm_dtype;

#define HM_MAX_DIMS 8
/* Hostile-input limits: the release has 563 tensors in a 2.7 GB file. */
#define HM_CKPT_MAX_TENSORS 65536
#define HM_CKPT_MAX_BYTES ((uint64_t)1 << 36)   /* 64 GiB */

typedef struct {
    const char *name;              /* state_dict key, e.g. "backbone.pos_embed" */
    hm_dtype dtype;
    int ndim;
    int64_t shape[HM_MAX_DIMS];
    int64_t stride[HM_MAX_DIMS];   /* in elements, as torch stores them */
    int64_t numel;
    int contiguous;                /* 1 if strides are the row-major ones */
    const void *data;              /* first element (storage base + offset), inside the mapping */
} hm_tensor;

typedef struct hm_ckpt hm_ckpt;

/* Open and index a checkpoint file. Returns HM_OK or an error code (message
 * via hm_errmsg(), naming the byte offset or key that was wrong). */
int hm_ckpt_open(const char *path, hm_ckpt **out);
/* Same over a caller-owned buffer (must outlive the handle). */
int hm_ckpt_open_mem(const void *buf, size_t len, hm_ckpt **out);
void hm_ckpt_close(hm_ckpt *c);

int hm_ckpt_count(const hm_ckpt *c);
const hm_tensor *hm_ckpt_at(const hm_ckpt *c, int i);
/* NULL if absent. */
const hm_tensor *hm_ckpt_find(const hm_ckpt *c, const char *key);

size_t hm_dtype_size(hm_dtype t);
const char *hm_dtype_name(hm_dtype t);

/* An index over caller-owned tensors (e.g. built in memory). Each entry
 * needs name, dtype, ndim, shape and data (row-major contiguous); strides,
 * numel and contiguous are filled in here. Names are copied; the data must
 * outlive the handle. A repeated name keeps its last entry, as for files. */
int hm_ckpt_from_tensors(const hm_tensor *tensors, int n, hm_ckpt **out);

/* Hint that the mapping is no longer needed in RAM (after weights are packed). */
void hm_ckpt_release_pages(hm_ckpt *c);
/* The same for the whole pages inside [p, p + bytes) (a tensor just
 * packed), so a loading model's peak memory is about its packed copy rather
 * than packed copy + checkpoint. A later read just faults them back in. */
void hm_ckpt_release_range(hm_ckpt *c, const void *p, size_t bytes);

#endif
