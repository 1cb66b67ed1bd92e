/* model_pack.h - what the packed model file's writer (model_pack_write.c),
 * reader (model_pack_read.c) and hm_model_free (model_pack.c) share: the
 * on-disk records, the one enumeration of a model's arrays, and the
 * checksums. The layout is described at the top of model_pack.c. Internal
 * to those three files; the public entry points are declared in model.h.
 */
#ifndef HM_MODEL_PACK_H
#define HM_MODEL_PACK_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "load/load.h"
#include "backend/backend.h"
#include "model/model.h"

#define PACK_MAGIC "HAMERPK"     /* + NUL: 8 bytes */
#define PACK_VERSION 5u   /* 2: the head's kv_all in the model's precision; 3: the backend's name; 4: MANO's PCA
                             pose space; 5: fast's attention projection int8 with fine weights (was bf16),
                             its decoder's one-token matmuls bf16 (were fp32) */
#define PACK_ALIGN 64

typedef struct {
    char magic[8];
    uint32_t version;
    uint32_t header_bytes;       /* sizeof(pack_header) */
    uint64_t file_bytes;
    uint64_t table_offset;
    uint32_t n_sections;
    uint32_t entry_bytes;        /* sizeof(pack_entry) */
    uint64_t meta_checksum;      /* XXH3 of this header (this field 0) and the table */
    int32_t precision;           /* hm_precision */
    int32_t isa;                 /* hm_isa of the fp32 packings */
    int32_t lowp_kind;           /* hm_lowp_kind of the FAST packings (FAST only) */
    int32_t has_mano;
    int32_t cfg[12];             /* hm_config, field order */
    char scheme[112];            /* the backend's scheme of the precision when packed */
    char backend[16];            /* the backend it was packed for ("cpu"), NUL-terminated */
    uint8_t reserved[16];        /* the model cache's key (model_cache.c); zero otherwise */
} pack_header;

typedef struct {
    char name[64];
    uint64_t offset, bytes, checksum, reserved;
} pack_entry;

typedef struct {
    char name[48];
    int32_t N, K, prec, lowp_kind, has_bias, reserved[3];
} pack_matrix;

_Static_assert(sizeof(pack_header) == 256, "header layout");
_Static_assert(sizeof(((pack_header *)0)->reserved) == HM_PACK_TAG_BYTES, "tag size");
_Static_assert(sizeof(pack_entry) == 96, "entry layout");
_Static_assert(sizeof(pack_matrix) == 80, "matrix record layout");
_Static_assert(sizeof(hm_config) == 12 * sizeof(int32_t), "hm_config is 12 ints");
_Static_assert(offsetof(pack_header, precision) == 48, "fuzz/fuzz_packed.c reads the precision there");

static inline uint64_t hm_pack_round_up(uint64_t n) { return (n + PACK_ALIGN - 1) & ~(uint64_t)(PACK_ALIGN - 1); }

/* ---- the enumeration (model_pack.c) -------------------------------------- */

/* Every array m owns, in file order; stops at the first callback that
 * returns nonzero and returns that. */
int hm_pack_visit_model(hm_model *m, hm_visitor *v);

/* The arrays behind one packed matrix, sized by s, in file order, each
 * passed to v->array. */
int hm_pack_matrix_arrays(hm_visitor *v, const char *name, hm_packed *p, int bias, const hm_packed_sizes *s);

/* A visitor's `field` is the address of a pointer member of unknown type. */
static inline void *hm_pack_get_ptr(const void *field) {
    void *p;
    memcpy(&p, field, sizeof p);
    return p;
}

static inline void hm_pack_set_ptr(void *field, const void *p) { memcpy(field, &p, sizeof p); }

/* ---- checksums (model_pack.c) -------------------------------------------- */

/* One array to write or verify. */
typedef struct {
    char name[64];
    const uint8_t *ptr;
    uint64_t bytes;
    uint64_t sum;                /* XXH3-64, filled by hm_pack_hash_sections */
} section;

/* Fills s[i].sum for n sections; HM_E_NOMEM if no thread pool. */
int hm_pack_hash_sections(section *s, int n);
/* The header's meta_checksum over h (that field taken as 0) and the table. */
uint64_t hm_pack_meta_checksum(const pack_header *h, const void *table, size_t table_bytes);

#endif
