/* load.h - model files -> hm_model: checkpoints (model_load.c, MANO from
 * mano_load.c), packed model files (model_pack*.c), and the entry that
 * tells them apart (model_open.c). */
#ifndef HM_LOAD_H
#define HM_LOAD_H

#include <stddef.h>
#include <stdint.h>

#include "model/model.h"

/* Checkpoint or packed file, told apart by the first bytes. A checkpoint
 * goes through the packed-model cache (model_cache.c) unless no_cache is
 * set or HAMER_NO_CACHE is. */
int hm_model_load(const char *path, const char *mano_npz, int progress, int precision, int no_cache, hm_model **out);
/* Same from an open checkpoint (any tensor source; `src` names it in messages). */
struct hm_ckpt;
int hm_model_from_ckpt(struct hm_ckpt *ck, const char *src, const char *mano_npz, int progress, int precision,
                       hm_model **out);
void hm_model_free(hm_model *m);   /* model_pack.c: frees what hm_pack_visit_model lists */

/* The packed model file (model_pack.c; format described there).
 * hm_pack_sniff: 1 if the file at path starts with the packed magic, 0 if
 *   with a zip's (a checkpoint) or it is unreadable or tiny, -1 otherwise.
 * hm_model_load_packed: mmap path read-only, verify it and point the
 *   model's arrays into the mapping; refuses a file packed in another
 *   precision, ISA, low-precision variant or scheme. mano_npz is used only
 *   when the file has no MANO buffers.
 * hm_model_from_packed_mem: the same over a caller-owned, 64-byte aligned
 *   buffer that must outlive the model (src names it in messages).
 * hm_model_save_packed: write m to path (temporary file + rename). */
int hm_pack_sniff(const char *path);
int hm_model_load_packed(const char *path, const char *mano_npz, int precision, hm_model **out);
int hm_model_from_packed_mem(const void *buf, size_t len, const char *src, const char *mano_npz, int precision,
                             hm_model **out);
int hm_model_save_packed(const hm_model *m, const char *path);
/* The same with a tag in the header (covered by its checksum): the model
 * cache stores its key there, so a file under another entry's name is
 * told apart. hm_pack_tag reads it back from a model loaded from a packed
 * file (HM_E_ARG for any other model). */
#define HM_PACK_TAG_BYTES 16
int hm_model_save_packed_tagged(const hm_model *m, const char *path, const uint8_t tag[HM_PACK_TAG_BYTES]);
int hm_pack_tag(const hm_model *m, uint8_t tag[HM_PACK_TAG_BYTES]);
/* The checkpoint path through the cache (model_cache.c): an entry for
 * this checkpoint, precision and build is loaded (checked in full, as any
 * packed file); without one, or with one that fails any check, the
 * checkpoint is loaded and a new entry written. Problems with the cache
 * itself are warnings (hm_log), never load failures.
 * hm_model_cache_enabled: 0 when HAMER_NO_CACHE is set (not "0"). */
int hm_model_cache_enabled(void);
int hm_model_load_cached(const char *path, const char *mano_npz, int progress, int precision, hm_model **out);
/* Tests and fuzzing: recompute the checksums of a packed file in memory
 * (every section inside the buffer, then the header's), so an edited
 * header or table reaches the checks behind them. */
void hm_pack_reseal(void *buf, size_t len);
#endif
