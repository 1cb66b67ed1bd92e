/* load.h - model files -> hm_model: checkpoints (model_load.c: the plain
 * weights, MANO from mano_load.c, then the backend packs them), packed
 * model files (model_pack*.c), the cache between them (model_cache.c), and
 * the entry that tells them apart (model_open.c). */
#ifndef HM_LOAD_H
#define HM_LOAD_H

#include <stddef.h>
#include <stdint.h>

#include "backend/backend.h"
#include "model/model.h"

/* What a load is asked for. */
typedef struct {
    const char *mano_npz;        /* MANO buffers when the file has none, or NULL */
    int progress;                /* report progress (hm_log) */
    int precision;               /* hm_precision */
    int no_cache;                /* a checkpoint bypasses the model cache */
    const hm_backend *be;        /* where the model runs (NULL: the CPU) */
    int dev;                     /* its device index */
} hm_load_opts;

/* Checkpoint or packed file, told apart by the first bytes. A checkpoint
 * goes through the packed-model cache (model_cache.c) unless no_cache is
 * set or HAMER_NO_CACHE is, or the backend has no packed files. */
int hm_model_load(const char *path, const hm_load_opts *o, hm_model **out);
/* Same from an open checkpoint (any tensor source; `src` names it in messages). */
struct hm_ckpt;
int hm_model_from_ckpt(struct hm_ckpt *ck, const char *src, const hm_load_opts *o, hm_model **out);
/* The checkpoint's plain weights (model_load.c): config, views and the
 * folded constants; the views stay valid while ck is open. */
int hm_weights_from_ckpt(struct hm_ckpt *ck, hm_weights *w);

/* The packed model file (model_pack.c; format described there).
 * hm_pack_sniff: 1 if the file at path starts with the packed magic, 0 if
 *   with a zip's (a checkpoint) or it is unreadable or tiny, -1 otherwise.
 * hm_model_load_packed: mmap path read-only, verify it and point the
 *   model's arrays into the mapping; refuses a file packed for another
 *   backend, in another precision, ISA, low-precision variant or scheme.
 *   o->mano_npz is used only when the file has no MANO buffers.
 * hm_model_from_packed_mem: the same over a caller-owned, 64-byte aligned
 *   buffer that must outlive the model (src names it in messages).
 * hm_model_save_packed: write m to path (temporary file + rename); a model
 *   of a backend without packed files is refused. */
int hm_pack_sniff(const char *path);
int hm_model_load_packed(const char *path, const hm_load_opts *o, hm_model **out);
int hm_model_from_packed_mem(const void *buf, size_t len, const char *src, const hm_load_opts *o, hm_model **out);
int hm_model_save_packed(const hm_model *m, const char *path);
/* The same with a tag in the header (covered by its checksum): the model
 * cache stores its key there, so a file under another entry's name is
 * told apart. hm_pack_tag reads it back from a model loaded from a packed
 * file (HM_E_ARG for any other model). */
#define HM_PACK_TAG_BYTES 16
int hm_model_save_packed_tagged(const hm_model *m, const char *path, const uint8_t tag[HM_PACK_TAG_BYTES]);
int hm_pack_tag(const hm_model *m, uint8_t tag[HM_PACK_TAG_BYTES]);
/* The checkpoint path through the cache (model_cache.c): an entry for
 * this checkpoint, backend, precision and build is loaded (checked in full,
 * as any packed file); without one, or with one that fails any check, the
 * checkpoint is loaded and a new entry written. Problems with the cache
 * itself are warnings (hm_log), never load failures.
 * hm_model_cache_enabled: 0 when HAMER_NO_CACHE is set (not "0"). */
int hm_model_cache_enabled(void);
int hm_model_load_cached(const char *path, const hm_load_opts *o, hm_model **out);
/* Tests and fuzzing: recompute the checksums of a packed file in memory
 * (every section inside the buffer, then the header's), so an edited
 * header or table reaches the checks behind them. */
void hm_pack_reseal(void *buf, size_t len);
#endif
