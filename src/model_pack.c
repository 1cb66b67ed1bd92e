/* model_pack.c - the packed model file (`hamer convert`): every array of an
 * hm_model stored as it lies in memory, so loading is an mmap, a checksum
 * pass and pointer assignments.
 *
 * Layout (little-endian, x86-64; the packed layouts are ISA-specific anyway):
 *   [0, 256)       pack_header: magic, format version, sizes, the model's
 *                  config, precision, the layout ISA, the low-precision
 *                  variant, the scheme string, and an XXH3 checksum of the
 *                  header and the section table;
 *   [256, ...)     the section table: name, offset, bytes, XXH3-64 checksum;
 *   sections       64-byte aligned, in table order, zero padding between.
 * Section 0, "matrices", holds one pack_matrix record per packed matrix
 * (shape, precision, low-precision variant); the others are the model's
 * arrays in the order visit_model lists them.
 *
 * One enumeration, visit_model, names every array the model owns; the
 * writer, the reader and hm_model_free all walk it, so a new field cannot
 * be written but not read, or read but not freed.
 *
 * The reader treats the file as hostile: every header field is range
 * checked (the same limits as the checkpoint loader's), every section must
 * lie inside the file, aligned and in order, every checksum must match, and
 * the section sequence must be exactly the one the header's config implies,
 * with the sizes it implies. The model's arrays then point into the
 * read-only mapping (no copy); free unmaps it. Nothing is repacked: a file
 * for another ISA, precision, low-precision variant or scheme is refused
 * with a line saying to convert again.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <math.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>
#define XXH_STATIC_LINKING_ONLY /* XXH3_state_t on the stack */
#include <xxhash.h>

#include "ckpt.h"
#include "kernels/gemm_lowp.h"
#include "model.h"
#include "util.h"

#define PACK_MAGIC "HAMERPK"     /* + NUL: 8 bytes */
#define PACK_VERSION 1u
#define PACK_ALIGN 64
#define PACK_MAX_SECTIONS (1u << 20)
#define PACK_MAX_DEPTH 65536     /* the checkpoint's tensor limit bounds its depths the same way */
/* Hashing runs on a thread pool only when there is enough of it. */
#define PACK_PARALLEL_BYTES ((uint64_t)64 << 20)

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
    char scheme[128];            /* hm_precision_scheme when packed */
    uint8_t reserved[16];
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
_Static_assert(sizeof(pack_entry) == 96, "entry layout");
_Static_assert(sizeof(pack_matrix) == 80, "matrix record layout");
_Static_assert(sizeof(hm_config) == 12 * sizeof(int32_t), "hm_config is 12 ints");
_Static_assert(offsetof(pack_header, precision) == 48, "fuzz/fuzz_packed.c reads the precision there");

static uint64_t round_up(uint64_t n) { return (n + PACK_ALIGN - 1) & ~(uint64_t)(PACK_ALIGN - 1); }

/* ---- the enumeration ---------------------------------------------------- */

/* How a matrix is packed, as model_load.c decides it: always fp32, in the
 * model's precision, or as hm_pack_weights_fast_sensitive does. */
typedef enum { SLOT_FP32, SLOT_MODEL, SLOT_SENSITIVE } slot_kind;

typedef struct visitor visitor;
struct visitor {
    /* A packed matrix W [N, K] (+ bias [N] if bias). */
    int (*matrix)(visitor *v, const char *name, hm_packed *p, int N, int K, int bias, slot_kind kind);
    /* A heap array: field is the address of the model's pointer member. */
    int (*array)(visitor *v, const char *name, void *field, size_t bytes);
    /* An array stored inside the model struct itself. */
    int (*embedded)(visitor *v, const char *name, void *data, size_t bytes);
};

/* Every array hm_model owns, in file order. Sizes come from the config
 * alone (the reader checks the file against them); N values are computed
 * in int, which pack_check_config keeps from overflowing. */
static int visit_model(hm_model *m, visitor *v) {
    const hm_config *c = &m->cfg;
    const size_t F = sizeof(float), K0 = 3 * HM_PATCH * HM_PATCH;
    char n[64];
    int rc;
#define NAME(...) (snprintf(n, sizeof n, __VA_ARGS__), n)
#define MAT(p, N, K, bias, kind, ...) \
    if ((rc = v->matrix(v, NAME(__VA_ARGS__), p, N, K, bias, kind))) return rc
#define ARR(field, bytes, ...) \
    if ((rc = v->array(v, NAME(__VA_ARGS__), &(field), bytes))) return rc
#define EMB(arr, ...) \
    if ((rc = v->embedded(v, NAME(__VA_ARGS__), arr, sizeof(arr)))) return rc
    MAT(&m->patch, c->dim, (int)K0, 1, SLOT_FP32, "patch");
    MAT(&m->patch_u8, c->dim, (int)K0, 1, SLOT_FP32, "patch_u8");
    ARR(m->pos, (size_t)c->ntok * c->dim * F, "pos");
    ARR(m->u8_tok_bias, (size_t)c->ntok * c->dim * F, "u8_tok_bias");
    for (int l = 0; m->blocks && l < c->depth; l++) {
        hm_vit_block *b = &m->blocks[l];
        ARR(b->norm1_w, c->dim * F, "blocks.%d.norm1_w", l);
        ARR(b->norm1_b, c->dim * F, "blocks.%d.norm1_b", l);
        MAT(&b->qkv, 3 * c->dim, c->dim, 1, SLOT_MODEL, "blocks.%d.qkv", l);
        MAT(&b->proj, c->dim, c->dim, 1, SLOT_SENSITIVE, "blocks.%d.proj", l);
        ARR(b->norm2_w, c->dim * F, "blocks.%d.norm2_w", l);
        ARR(b->norm2_b, c->dim * F, "blocks.%d.norm2_b", l);
        MAT(&b->fc1, c->mlp, c->dim, 1, SLOT_MODEL, "blocks.%d.fc1", l);
        MAT(&b->fc2, c->dim, c->mlp, 1, SLOT_MODEL, "blocks.%d.fc2", l);
    }
    ARR(m->last_norm_w, c->dim * F, "last_norm_w");
    ARR(m->last_norm_b, c->dim * F, "last_norm_b");
    ARR(m->token0, c->hdim * F, "token0");
    ARR(m->x1, c->hdim * F, "x1");
    ARR(m->q1, c->hinner * F, "q1");
    MAT(&m->kv_all, c->hdepth * 2 * c->hinner, c->dim, 0, SLOT_FP32, "kv_all");
    for (int l = 0; m->layers && l < c->hdepth; l++) {
        hm_head_layer *H = &m->layers[l];
        ARR(H->sa_norm_w, c->hdim * F, "layers.%d.sa_norm_w", l);
        ARR(H->sa_norm_b, c->hdim * F, "layers.%d.sa_norm_b", l);
        MAT(&H->sa_v, c->hinner, c->hdim, 0, SLOT_FP32, "layers.%d.sa_v", l);
        MAT(&H->sa_out, c->hdim, c->hinner, 1, SLOT_FP32, "layers.%d.sa_out", l);
        ARR(H->sa_qkv_full, (size_t)3 * c->hinner * c->hdim * F, "layers.%d.sa_qkv_full", l);
        ARR(H->ca_norm_w, c->hdim * F, "layers.%d.ca_norm_w", l);
        ARR(H->ca_norm_b, c->hdim * F, "layers.%d.ca_norm_b", l);
        MAT(&H->ca_q, c->hinner, c->hdim, 0, SLOT_FP32, "layers.%d.ca_q", l);
        MAT(&H->ca_out, c->hdim, c->hinner, 1, SLOT_FP32, "layers.%d.ca_out", l);
        MAT(&H->ca_kv, 2 * c->hinner, c->dim, 0, SLOT_FP32, "layers.%d.ca_kv", l);
        ARR(H->ff_norm_w, c->hdim * F, "layers.%d.ff_norm_w", l);
        ARR(H->ff_norm_b, c->hdim * F, "layers.%d.ff_norm_b", l);
        MAT(&H->ff1, c->hmlp, c->hdim, 1, SLOT_FP32, "layers.%d.ff1", l);
        MAT(&H->ff2, c->hdim, c->hmlp, 1, SLOT_FP32, "layers.%d.ff2", l);
    }
    MAT(&m->decpose, HM_NJ * 6, c->hdim, 1, SLOT_FP32, "decpose");
    MAT(&m->decshape, HM_NB, c->hdim, 1, SLOT_FP32, "decshape");
    MAT(&m->deccam, 3, c->hdim, 1, SLOT_FP32, "deccam");
    EMB(m->init_pose, "init_pose");
    EMB(m->init_betas, "init_betas");
    EMB(m->init_cam, "init_cam");
    if (m->has_mano) {
        hm_mano *mn = &m->mano;
        ARR(mn->v_template, HM_NV * 3 * F, "mano.v_template");
        ARR(mn->shapedirs, HM_NV * 3 * HM_NB * F, "mano.shapedirs");
        ARR(mn->posedirs, (size_t)(HM_NJ - 1) * 9 * HM_NV * 3 * F, "mano.posedirs");
        ARR(mn->j_regressor, HM_NJ * HM_NV * F, "mano.j_regressor");
        ARR(mn->lbs_weights, HM_NV * HM_NJ * F, "mano.lbs_weights");
        ARR(mn->faces, HM_NF * 3 * sizeof(int32_t), "mano.faces");
        EMB(mn->parents, "mano.parents");
        EMB(mn->tips, "mano.tips");
        EMB(mn->joint_map, "mano.joint_map");
    }
    return HM_OK;
#undef NAME
#undef MAT
#undef ARR
#undef EMB
}

static void *get_ptr(const void *field) {
    void *p;
    memcpy(&p, field, sizeof p);
    return p;
}

static void set_ptr(void *field, const void *p) { memcpy(field, &p, sizeof p); }

/* The arrays behind one packed matrix, sized by s, in file order. */
static int matrix_arrays(visitor *v, const char *name, hm_packed *p, int bias, const hm_packed_sizes *s) {
    char n[80];
    int rc = 0;
#define SUB(field, bytes, suffix) \
    if (!rc && (bytes)) rc = (snprintf(n, sizeof n, "%s." suffix, name), v->array(v, n, &(field), bytes))
    SUB(p->w, s->w, "w");
    SUB(p->lp, s->lp, "lp");
    SUB(p->lp_scale, s->lp_scale, "lp_scale");
    if (bias) SUB(p->bias, s->bias, "bias");
#undef SUB
    return rc;
}

/* ---- freeing ------------------------------------------------------------ */

/* Arrays inside the packed file's mapping belong to the mapping. */
static int owned(const hm_model *m, const void *p) {
    const uint8_t *u = p, *b = m->pack_map;
    return p && !(b && u >= b && u < b + m->pack_len);
}

static void release(const hm_model *m, void *p) {
    if (owned(m, p)) hm_free(p);
}

typedef struct {
    visitor v;
    hm_model *m;
} free_visitor;

static int free_matrix(visitor *v, const char *name, hm_packed *p, int N, int K, int bias, slot_kind kind) {
    const hm_model *m = ((free_visitor *)v)->m;
    release(m, p->w), release(m, p->bias), release(m, p->lp), release(m, p->lp_scale);
    memset(p, 0, sizeof *p);
    return HM_OK;
}

static int free_array(visitor *v, const char *name, void *field, size_t bytes) {
    release(((free_visitor *)v)->m, get_ptr(field));
    set_ptr(field, NULL);
    return HM_OK;
}

static int free_embedded(visitor *v, const char *name, void *data, size_t bytes) { return HM_OK; }

void hm_model_free(hm_model *m) {
    if (!m) return;
    free_visitor fv = {.v = {free_matrix, free_array, free_embedded}, .m = m};
    visit_model(m, &fv.v);
    free(m->blocks);
    free(m->layers);
    if (m->pack_map && m->pack_unmap) munmap((void *)m->pack_map, m->pack_len);
    free(m);
}

/* ---- checksums ---------------------------------------------------------- */

/* One array to write or verify. */
typedef struct {
    char name[64];
    const uint8_t *ptr;
    uint64_t bytes;
    uint64_t sum;                /* XXH3-64, filled by hash_sections */
} section;

static void hash_task(void *ctx, int t, int tid) {
    section *s = (section *)ctx + t;
    s->sum = XXH3_64bits(s->ptr, (size_t)s->bytes);
}

/* XXH3 of n sections, on a short-lived pool when the total is large: one
 * core hashes a few GB/s out of the page cache, and load time is bounded
 * by this pass. */
static int hash_sections(section *s, int n) {
    uint64_t total = 0;
    for (int i = 0; i < n; i++) total += s[i].bytes;
    hm_pool *pool = NULL;
    if (total >= PACK_PARALLEL_BYTES) {
        long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
        int nt = ncpu < 1 ? 1 : ncpu > 16 ? 16 : (int)ncpu;
        if (nt > 1 && !(pool = hm_pool_create(nt))) return HM_E_NOMEM;
    }
    hm_pool_run(pool, hash_task, s, n);
    hm_pool_destroy(pool);
    return HM_OK;
}

static uint64_t meta_checksum(const pack_header *h, const void *table, size_t table_bytes) {
    pack_header z = *h;
    z.meta_checksum = 0;
    XXH3_state_t st;
    XXH3_64bits_reset(&st);
    XXH3_64bits_update(&st, &z, sizeof z);
    XXH3_64bits_update(&st, table, table_bytes);
    return XXH3_64bits_digest(&st);
}

/* ---- writing ------------------------------------------------------------ */

typedef struct {
    visitor v;
    const hm_model *m;
    section *sec;                /* [0] is the matrix table */
    int n, cap;
    pack_matrix *mats;
    int nmat, matcap;
} collect_visitor;

static int grow(void **p, int *cap, int need, size_t elem) {
    if (need <= *cap) return HM_OK;
    int nc = *cap ? *cap * 2 : 256;
    while (nc < need) nc *= 2;
    void *q = realloc(*p, (size_t)nc * elem);
    if (!q) return hm_err(HM_E_NOMEM, "packed model: out of memory");
    *p = q;
    *cap = nc;
    return HM_OK;
}

static int collect_add(collect_visitor *cv, const char *name, const void *p, size_t bytes) {
    if (strlen(name) >= sizeof cv->sec[0].name)
        return hm_err(HM_E_ARG, "packed model: section name '%s' too long", name);
    if (!p || !bytes) return hm_err(HM_E_ARG, "packed model: array '%s' is missing", name);
    int rc = grow((void **)&cv->sec, &cv->cap, cv->n + 1, sizeof *cv->sec);
    if (rc) return rc;
    section *s = &cv->sec[cv->n++];
    memset(s, 0, sizeof *s); /* the name's padding is written to the file */
    snprintf(s->name, sizeof s->name, "%s", name);
    s->ptr = p;
    s->bytes = bytes;
    return HM_OK;
}

static int collect_array(visitor *v, const char *name, void *field, size_t bytes) {
    return collect_add((collect_visitor *)v, name, get_ptr(field), bytes);
}

static int collect_embedded(visitor *v, const char *name, void *data, size_t bytes) {
    return collect_add((collect_visitor *)v, name, data, bytes);
}

static int collect_matrix(visitor *v, const char *name, hm_packed *p, int N, int K, int bias, slot_kind kind) {
    collect_visitor *cv = (collect_visitor *)v;
    int lk = hm_lowp_packed_kind(p), rc;
    hm_packed_sizes s;
    if (p->N != N || p->K != K || !!p->bias != bias)
        return hm_err(HM_E_ARG, "packed model: matrix '%s' is %d x %d%s, expected %d x %d%s", name, p->N, p->K,
                      p->bias ? " + bias" : "", N, K, bias ? " + bias" : "");
    if (p->prec == HM_PREC_FP32 && p->isa != cv->m->patch.isa)
        return hm_err(HM_E_ARG, "packed model: matrix '%s' is packed for %s, the model for %s", name,
                      hm_isa_name((hm_isa)p->isa), hm_isa_name((hm_isa)cv->m->patch.isa));
    if ((rc = hm_packed_sizes_for(N, K, p->isa, p->prec, lk, &s))) return rc;
    if ((rc = grow((void **)&cv->mats, &cv->matcap, cv->nmat + 1, sizeof *cv->mats))) return rc;
    pack_matrix *r = &cv->mats[cv->nmat++];
    memset(r, 0, sizeof *r);
    snprintf(r->name, sizeof r->name, "%s", name);
    r->N = N, r->K = K, r->prec = p->prec, r->lowp_kind = lk < 0 ? 0 : lk, r->has_bias = bias;
    return matrix_arrays(v, name, p, bias, &s);
}

static int write_all(int fd, const void *p, size_t n, const char *path) {
    const uint8_t *b = p;
    while (n) {
        ssize_t w = write(fd, b, n > ((size_t)1 << 30) ? (size_t)1 << 30 : n);
        if (w < 0 && errno == EINTR) continue;
        if (w <= 0) return hm_err(HM_E_IO, "%s: write failed: %s", path, w < 0 ? strerror(errno) : "no progress");
        b += w, n -= (size_t)w;
    }
    return HM_OK;
}

/* Header, table and sections into fd (positioned at 0). */
static int write_packed(int fd, const char *path, const collect_visitor *cv, const pack_header *h,
                        const pack_entry *table) {
    static const uint8_t zeros[PACK_ALIGN];
    int rc;
    uint64_t pos = 0;
    if ((rc = write_all(fd, h, sizeof *h, path))) return rc;
    if ((rc = write_all(fd, table, (size_t)cv->n * sizeof *table, path))) return rc;
    pos = sizeof *h + (uint64_t)cv->n * sizeof *table;
    for (int i = 0; i < cv->n; i++) {
        if ((rc = write_all(fd, zeros, (size_t)(table[i].offset - pos), path))) return rc;
        if ((rc = write_all(fd, cv->sec[i].ptr, (size_t)cv->sec[i].bytes, path))) return rc;
        pos = table[i].offset + table[i].bytes;
    }
    return HM_OK;
}

/* Through a temporary name beside path, renamed at the end: a failed or
 * interrupted convert never leaves a partial file under path. */
static int write_atomically(const char *path, const collect_visitor *cv, const pack_header *h, const pack_entry *table) {
    static atomic_uint counter;
    size_t tlen = strlen(path) + 48;
    char *tmp = malloc(tlen);
    if (!tmp) return hm_err(HM_E_NOMEM, "packed model: out of memory");
    int fd = -1, rc;
    for (int tries = 0; fd < 0 && tries < 100; tries++) {
        snprintf(tmp, tlen, "%s.tmp.%ld.%u", path, (long)getpid(), atomic_fetch_add(&counter, 1));
        fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
        if (fd < 0 && errno != EEXIST) break;
    }
    if (fd < 0) {
        rc = hm_err(HM_E_IO, "%s: cannot create the output file: %s", path, strerror(errno));
        free(tmp);
        return rc;
    }
    rc = write_packed(fd, path, cv, h, table);
    if (!rc && fsync(fd) != 0) rc = hm_err(HM_E_IO, "%s: fsync failed: %s", path, strerror(errno));
    if (close(fd) != 0 && !rc) rc = hm_err(HM_E_IO, "%s: close failed: %s", path, strerror(errno));
    if (!rc && rename(tmp, path) != 0) rc = hm_err(HM_E_IO, "%s: cannot rename %s to it: %s", path, tmp, strerror(errno));
    if (rc) unlink(tmp);
    free(tmp);
    return rc;
}

int hm_model_save_packed(const hm_model *m, const char *path) {
    if (!m || !path) return hm_err(HM_E_ARG, "hm_model_save_packed: NULL model or path");
    collect_visitor cv = {.v = {collect_matrix, collect_array, collect_embedded}, .m = m};
    pack_entry *table = NULL;
    int rc;
    /* Section 0 is the matrix table; its contents are known after the walk. */
    if ((rc = collect_add(&cv, "matrices", "", 1))) goto out;
    if ((rc = visit_model((hm_model *)m, &cv.v))) goto out;
    cv.sec[0].ptr = (const uint8_t *)cv.mats;
    cv.sec[0].bytes = (uint64_t)cv.nmat * sizeof *cv.mats;

    pack_header h;
    memset(&h, 0, sizeof h);
    memcpy(h.magic, PACK_MAGIC, sizeof h.magic);
    h.version = PACK_VERSION;
    h.header_bytes = sizeof h;
    h.entry_bytes = sizeof(pack_entry);
    h.n_sections = (uint32_t)cv.n;
    h.table_offset = sizeof h;
    h.precision = m->precision;
    h.isa = m->patch.isa;
    h.lowp_kind = m->precision == HM_PREC_FAST ? hm_lowp_packed_kind(&m->blocks[0].qkv) : 0;
    h.has_mano = m->has_mano;
    memcpy(h.cfg, &m->cfg, sizeof h.cfg);
    snprintf(h.scheme, sizeof h.scheme, "%s", hm_precision_scheme((hm_precision)m->precision));

    if (!(table = calloc((size_t)cv.n, sizeof *table))) {
        rc = hm_err(HM_E_NOMEM, "packed model: out of memory");
        goto out;
    }
    if ((rc = hash_sections(cv.sec, cv.n))) goto out;
    uint64_t off = round_up(h.table_offset + (uint64_t)cv.n * sizeof *table);
    for (int i = 0; i < cv.n; i++) {
        memcpy(table[i].name, cv.sec[i].name, sizeof table[i].name);
        table[i].offset = off;
        table[i].bytes = cv.sec[i].bytes;
        table[i].checksum = cv.sec[i].sum;
        off = round_up(off + cv.sec[i].bytes);
    }
    h.file_bytes = table[cv.n - 1].offset + table[cv.n - 1].bytes;
    h.meta_checksum = meta_checksum(&h, table, (size_t)cv.n * sizeof *table);

    rc = write_atomically(path, &cv, &h, table);
out:
    free(table);
    free(cv.sec);
    free(cv.mats);
    return rc;
}

/* ---- reading ------------------------------------------------------------ */

typedef struct {
    visitor v;
    const char *src;
    const uint8_t *base;
    const pack_header *h;
    const pack_entry *table;
    int next;                    /* next section */
    const pack_matrix *mats;
    int nmat, next_mat;
} bind_visitor;

/* The next section must be `name` with exactly `bytes` bytes. */
static const uint8_t *take(bind_visitor *bv, const char *name, size_t bytes) {
    if (bv->next >= (int)bv->h->n_sections) {
        hm_err(HM_E_FORMAT, "%s: section '%s' is missing (the table ends after %d sections)", bv->src, name, bv->next);
        return NULL;
    }
    const pack_entry *e = &bv->table[bv->next++];
    if (strcmp(e->name, name)) {
        hm_err(HM_E_FORMAT, "%s: section %d is '%s', expected '%s'", bv->src, bv->next - 1, e->name, name);
        return NULL;
    }
    if (e->bytes != bytes) {
        hm_err(HM_E_FORMAT, "%s: section '%s' has %llu bytes, the model's config needs %zu", bv->src, name,
               (unsigned long long)e->bytes, bytes);
        return NULL;
    }
    return bv->base + e->offset;
}

static int bind_array(visitor *v, const char *name, void *field, size_t bytes) {
    const uint8_t *p = take((bind_visitor *)v, name, bytes);
    if (!p) return HM_E_FORMAT;
    set_ptr(field, p);
    return HM_OK;
}

static int bind_embedded(visitor *v, const char *name, void *data, size_t bytes) {
    const uint8_t *p = take((bind_visitor *)v, name, bytes);
    if (!p) return HM_E_FORMAT;
    memcpy(data, p, bytes);
    return HM_OK;
}

/* Re-report the current error with the file and matrix in front (the
 * message buffer cannot be formatted into itself). */
static int matrix_err(int rc, const char *src, const char *name) {
    char why[384];
    snprintf(why, sizeof why, "%s", hm_errmsg());
    return hm_err(rc, "%s: matrix '%s': %s", src, name, why);
}

static const char *prec_name(int prec) { return prec == HM_PREC_FAST ? "fast" : "fp32"; }

static int bind_matrix(visitor *v, const char *name, hm_packed *p, int N, int K, int bias, slot_kind kind) {
    bind_visitor *bv = (bind_visitor *)v;
    const pack_header *h = bv->h;
    if (bv->next_mat >= bv->nmat)
        return hm_err(HM_E_FORMAT, "%s: section 'matrices' has no record for matrix '%s'", bv->src, name);
    pack_matrix r = bv->mats[bv->next_mat++];
    r.name[sizeof r.name - 1] = 0;
    if (strcmp(r.name, name) || r.N != N || r.K != K || r.has_bias != bias)
        return hm_err(HM_E_FORMAT, "%s: matrix record '%s' (%d x %d, bias %d) does not match '%s' (%d x %d, bias %d)",
                      bv->src, r.name, r.N, r.K, r.has_bias, name, N, K, bias);
    /* The precision each matrix may have is what model_load.c packs. */
    int ok = r.prec == HM_PREC_FP32 || r.prec == HM_PREC_FAST;
    if (kind == SLOT_FP32 || h->precision == HM_PREC_FP32) ok = ok && r.prec == HM_PREC_FP32;
    else if (kind == SLOT_MODEL) ok = ok && r.prec == HM_PREC_FAST && r.lowp_kind == h->lowp_kind;
    else ok = ok && (r.prec == HM_PREC_FP32 || r.lowp_kind == HM_LOWP_BF16);
    if (!ok)
        return hm_err(HM_E_FORMAT, "%s: matrix '%s' has precision %d / low-precision kind %d, not what a %s model packs there",
                      bv->src, name, r.prec, r.lowp_kind, prec_name(h->precision));
    memset(p, 0, sizeof *p);
    p->N = N, p->K = K, p->prec = r.prec;
    p->isa = r.prec == HM_PREC_FAST ? HM_ISA_AVX512 : h->isa;
    hm_packed_sizes s;
    int rc = hm_packed_sizes_for(N, K, p->isa, p->prec, r.lowp_kind, &s);
    if (rc) return matrix_err(HM_E_FORMAT, bv->src, name);
    if ((rc = matrix_arrays(v, name, p, bias, &s))) return rc;
    if (p->prec == HM_PREC_FAST && (rc = hm_lowp_packed_check(p, r.lowp_kind)))
        return matrix_err(rc, bv->src, name);
    return HM_OK;
}

/* The same limits as the checkpoint loader's read_config, plus the derived
 * fields it computes, plus what keeps visit_model's int sizes in range. */
static int check_config(const hm_config *c, const char *src) {
    int gh = (HM_IMG_H + 2 * HM_PATCH_PAD - HM_PATCH) / HM_PATCH + 1;
    int gw = (HM_IMG_W + 2 * HM_PATCH_PAD - HM_PATCH) / HM_PATCH + 1;
    if (c->dim <= 0 || c->dim % HM_VIT_HEAD_DIM || c->dim > 65536 || c->heads != c->dim / HM_VIT_HEAD_DIM)
        return hm_err(HM_E_FORMAT, "%s: backbone width %d / heads %d invalid", src, c->dim, c->heads);
    if (c->gh != gh || c->gw != gw || c->ntok != gh * gw)
        return hm_err(HM_E_FORMAT, "%s: token grid %d x %d (%d tokens) is not %d x %d", src, c->gh, c->gw, c->ntok, gh, gw);
    if (c->depth < 1 || c->depth > PACK_MAX_DEPTH || c->hdepth < 1 || c->hdepth > PACK_MAX_DEPTH)
        return hm_err(HM_E_FORMAT, "%s: depths %d / %d outside 1..%d", src, c->depth, c->hdepth, PACK_MAX_DEPTH);
    if (c->mlp <= 0 || c->mlp > 1 << 20 || c->hmlp <= 0 || c->hmlp > 1 << 20)
        return hm_err(HM_E_FORMAT, "%s: MLP widths %d / %d outside 1..%d", src, c->mlp, c->hmlp, 1 << 20);
    if (c->hdim <= 0 || c->hdim > 65536 || c->hinner <= 0 || c->hinner % HM_DEC_HEAD_DIM || c->hinner > 65536 ||
        c->hheads != c->hinner / HM_DEC_HEAD_DIM)
        return hm_err(HM_E_FORMAT, "%s: decoder widths %d / %d / heads %d invalid", src, c->hdim, c->hinner, c->hheads);
    if ((int64_t)c->hdepth * 2 * c->hinner > INT_MAX)
        return hm_err(HM_E_FORMAT, "%s: %d decoder layers of width %d are too many", src, c->hdepth, c->hinner);
    return HM_OK;
}

static int check_mano(const hm_mano *mn, const char *src) {
    const float *fl[] = {mn->v_template, mn->shapedirs, mn->posedirs, mn->j_regressor, mn->lbs_weights};
    const size_t nfl[] = {HM_NV * 3, HM_NV * 3 * HM_NB, (HM_NJ - 1) * 9 * HM_NV * 3, HM_NJ * HM_NV, HM_NV * HM_NJ};
    for (int a = 0; a < 5; a++)
        for (size_t i = 0; i < nfl[a]; i++)
            if (!isfinite(fl[a][i])) return hm_err(HM_E_FORMAT, "%s: MANO array %d has a non-finite value", src, a);
    for (int j = 0; j < HM_NJ; j++)
        if (j == 0 ? mn->parents[0] != -1 : (mn->parents[j] < 0 || mn->parents[j] >= j))
            return hm_err(HM_E_FORMAT, "%s: MANO parents[%d] = %d is not a valid kinematic tree", src, j, mn->parents[j]);
    for (int i = 0; i < HM_NF * 3; i++)
        if (mn->faces[i] < 0 || mn->faces[i] >= HM_NV)
            return hm_err(HM_E_FORMAT, "%s: MANO face index %d out of range", src, (int)mn->faces[i]);
    for (int i = 0; i < 5; i++)
        if (mn->tips[i] < 0 || mn->tips[i] >= HM_NV) return hm_err(HM_E_FORMAT, "%s: MANO tips out of range", src);
    for (int i = 0; i < HM_NKP; i++)
        if (mn->joint_map[i] < 0 || mn->joint_map[i] >= HM_NKP)
            return hm_err(HM_E_FORMAT, "%s: MANO joint_map out of range", src);
    return HM_OK;
}

/* Header fields and whether this process can run what they describe. */
static int check_header(const pack_header *h, const uint8_t *table, size_t len, const char *src, int precision) {
    if (h->version != PACK_VERSION)
        return hm_err(HM_E_FORMAT, "%s: packed format version %u is not supported (this build reads version %u); convert the checkpoint again",
                      src, h->version, PACK_VERSION);
    if (h->header_bytes != sizeof *h || h->entry_bytes != sizeof(pack_entry) || h->table_offset != sizeof *h)
        return hm_err(HM_E_FORMAT, "%s: header sizes %u / %u / table at %llu are not this version's", src,
                      h->header_bytes, h->entry_bytes, (unsigned long long)h->table_offset);
    if (h->file_bytes != len)
        return hm_err(HM_E_FORMAT, "%s: file is %zu bytes but its header says %llu (%s)", src, len,
                      (unsigned long long)h->file_bytes, len < h->file_bytes ? "truncated" : "trailing data");
    if (h->n_sections < 1 || h->n_sections > PACK_MAX_SECTIONS ||
        (uint64_t)h->n_sections * sizeof(pack_entry) > len - sizeof *h)
        return hm_err(HM_E_FORMAT, "%s: section count %u does not fit the file", src, h->n_sections);
    if (meta_checksum(h, table, (size_t)h->n_sections * sizeof(pack_entry)) != h->meta_checksum)
        return hm_err(HM_E_FORMAT, "%s: checksum mismatch in the header or section table (file corrupted)", src);
    if (memchr(h->scheme, 0, sizeof h->scheme) == NULL) return hm_err(HM_E_FORMAT, "%s: scheme name not terminated", src);
    if ((h->precision != HM_PREC_FP32 && h->precision != HM_PREC_FAST) || (unsigned)h->has_mano > 1 ||
        (h->precision == HM_PREC_FAST && h->lowp_kind != HM_LOWP_INT8 && h->lowp_kind != HM_LOWP_BF16))
        return hm_err(HM_E_FORMAT, "%s: precision %d / low-precision kind %d / has_mano %d invalid", src,
                      h->precision, h->lowp_kind, h->has_mano);
    if (h->isa < HM_ISA_SCALAR || h->isa > HM_ISA_AVX512) return hm_err(HM_E_FORMAT, "%s: layout ISA %d invalid", src, h->isa);
    int rc = check_config((const hm_config *)h->cfg, src);
    if (rc) return rc;

    /* Valid file; can this process use it as it is? */
    if (h->precision != precision)
        return hm_err(HM_E_UNSUPPORTED, "%s: packed in precision %s but %s was requested; convert the checkpoint again with --precision %s",
                      src, prec_name(h->precision), prec_name(precision), prec_name(precision));
    if ((rc = hm_gemm_status())) return rc;
    hm_isa cpu = hm_cpu_isa(), active = hm_gemm_isa();
    if (h->isa > (int)cpu)
        return hm_err(HM_E_UNSUPPORTED, "%s: packed for ISA %s, which this CPU (%s) cannot run; convert the checkpoint again on this machine",
                      src, hm_isa_name((hm_isa)h->isa), hm_isa_name(cpu));
    if (h->isa != (int)active)
        return hm_err(HM_E_UNSUPPORTED, "%s: packed for ISA %s but the active ISA is %s (HAMER_ISA); convert the checkpoint again under the same ISA",
                      src, hm_isa_name((hm_isa)h->isa), hm_isa_name(active));
    if (h->precision == HM_PREC_FAST && h->lowp_kind != (int)hm_lowp_kind_active())
        return hm_err(HM_E_UNSUPPORTED, "%s: packed with low-precision kind %s but this process uses %s (HAMER_LOWP); convert the checkpoint again",
                      src, h->lowp_kind == HM_LOWP_BF16 ? "bf16" : "int8", hm_lowp_kind_active() == HM_LOWP_BF16 ? "bf16" : "int8");
    const char *scheme = hm_precision_scheme((hm_precision)h->precision);
    if (strcmp(h->scheme, scheme))
        return hm_err(HM_E_UNSUPPORTED, "%s: packed for scheme '%s' but this machine runs '%s'; convert the checkpoint again",
                      src, h->scheme, scheme);
    return HM_OK;
}

/* Section table: named, inside the file, aligned, in order, no overlap. */
static int check_table(const pack_header *h, const pack_entry *t, size_t len, const char *src) {
    uint64_t prev_end = round_up(sizeof *h + (uint64_t)h->n_sections * sizeof *t);
    for (uint32_t i = 0; i < h->n_sections; i++) {
        const pack_entry *e = &t[i];
        if (!memchr(e->name, 0, sizeof e->name) || !e->name[0])
            return hm_err(HM_E_FORMAT, "%s: section %u has no valid name", src, i);
        if (e->offset % PACK_ALIGN)
            return hm_err(HM_E_FORMAT, "%s: section '%s' at offset %llu is not %d-byte aligned", src, e->name,
                          (unsigned long long)e->offset, PACK_ALIGN);
        if (e->offset > len || e->bytes > len - e->offset || e->bytes == 0)
            return hm_err(HM_E_FORMAT, "%s: section '%s' (offset %llu, %llu bytes) is empty or extends past the end of the file (%zu bytes)",
                          src, e->name, (unsigned long long)e->offset, (unsigned long long)e->bytes, len);
        if (e->offset < prev_end)
            return hm_err(HM_E_FORMAT, "%s: section '%s' at offset %llu overlaps %s", src, e->name,
                          (unsigned long long)e->offset, i ? t[i - 1].name : "the section table");
        prev_end = e->offset + e->bytes;
    }
    return HM_OK;
}

static int verify_checksums(const uint8_t *base, const pack_entry *t, uint32_t n, const char *src) {
    section *s = calloc(n, sizeof *s);
    if (!s) return hm_err(HM_E_NOMEM, "%s: out of memory", src);
    for (uint32_t i = 0; i < n; i++) s[i].ptr = base + t[i].offset, s[i].bytes = t[i].bytes;
    int rc = hash_sections(s, (int)n);
    for (uint32_t i = 0; !rc && i < n; i++)
        if (s[i].sum != t[i].checksum)
            rc = hm_err(HM_E_FORMAT, "%s: section '%s': checksum mismatch (file corrupted)", src, t[i].name);
    free(s);
    return rc;
}

int hm_model_from_packed_mem(const void *buf, size_t len, const char *src, const char *mano_npz, int precision,
                             hm_model **out) {
    *out = NULL;
    const uint8_t *base = buf;
    pack_header h;
    if (!buf || len < sizeof PACK_MAGIC || memcmp(base, PACK_MAGIC, sizeof PACK_MAGIC))
        return hm_err(HM_E_FORMAT, "%s: not a packed model file (bad magic)", src);
    if (len < sizeof h) return hm_err(HM_E_FORMAT, "%s: truncated packed model (%zu bytes, the header alone is %zu)", src, len, sizeof h);
    if ((uintptr_t)buf % PACK_ALIGN) return hm_err(HM_E_ARG, "%s: packed model buffer is not %d-byte aligned", src, PACK_ALIGN);
    memcpy(&h, base, sizeof h);
    int rc = check_header(&h, base + sizeof h, len, src, precision);
    const pack_entry *table = (const pack_entry *)(base + sizeof h);
    if (!rc) rc = check_table(&h, table, len, src);
    if (!rc) rc = verify_checksums(base, table, h.n_sections, src);
    if (rc) return rc;

    hm_config cfg;
    memcpy(&cfg, h.cfg, sizeof cfg);
    /* Each block has at least 8 sections and each layer 13: allocations
     * below stay proportional to the file. */
    if ((uint64_t)cfg.depth * 8 + (uint64_t)cfg.hdepth * 13 > h.n_sections)
        return hm_err(HM_E_FORMAT, "%s: %u sections cannot hold %d blocks and %d decoder layers", src, h.n_sections,
                      cfg.depth, cfg.hdepth);
    const pack_entry *e0 = &table[0];
    if (strcmp(e0->name, "matrices") || e0->bytes % sizeof(pack_matrix))
        return hm_err(HM_E_FORMAT, "%s: section 0 is not the matrix table", src);
    hm_model *m = calloc(1, sizeof *m);
    if (!m) return hm_err(HM_E_NOMEM, "out of memory");
    m->cfg = cfg;
    m->precision = h.precision;
    m->has_mano = h.has_mano;
    m->blocks = calloc((size_t)cfg.depth, sizeof *m->blocks);
    m->layers = calloc((size_t)cfg.hdepth, sizeof *m->layers);
    if (!m->blocks || !m->layers) {
        hm_model_free(m);
        return hm_err(HM_E_NOMEM, "out of memory");
    }
    m->pack_map = base;
    m->pack_len = len;
    bind_visitor bv = {{bind_matrix, bind_array, bind_embedded}, src, base, &h, table, 1,
                       (const pack_matrix *)(base + e0->offset), (int)(e0->bytes / sizeof(pack_matrix)), 0};
    rc = visit_model(m, &bv.v);
    if (!rc && bv.next != (int)h.n_sections)
        rc = hm_err(HM_E_FORMAT, "%s: unexpected section '%s' after the model's last array", src, table[bv.next].name);
    if (!rc && bv.next_mat != bv.nmat)
        rc = hm_err(HM_E_FORMAT, "%s: section 'matrices' has %d records for %d matrices", src, bv.nmat, bv.next_mat);
    if (!rc && m->has_mano) rc = check_mano(&m->mano, src);
    if (!rc && !m->has_mano && mano_npz) rc = hm_model_attach_mano_npz(m, mano_npz);
    if (rc) {
        hm_model_free(m);
        return rc;
    }
    *out = m;
    return HM_OK;
}

int hm_pack_sniff(const char *path) {
    char magic[sizeof PACK_MAGIC];
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return 0;
    ssize_t n = read(fd, magic, sizeof magic);
    close(fd);
    if (n != (ssize_t)sizeof magic) return 0;
    if (!memcmp(magic, PACK_MAGIC, sizeof magic)) return 1;
    return memcmp(magic, "PK\3\4", 4) ? -1 : 0;
}

int hm_model_load_packed(const char *path, const char *mano_npz, int precision, hm_model **out) {
    *out = NULL;
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return hm_err(HM_E_IO, "%s: cannot open: %s", path, strerror(errno));
    struct stat st;
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        close(fd);
        return hm_err(HM_E_IO, "%s: not a regular file", path);
    }
    if ((uint64_t)st.st_size > HM_CKPT_MAX_BYTES || st.st_size < (off_t)sizeof(pack_header)) {
        close(fd);
        return hm_err(HM_E_FORMAT, "%s: %lld bytes is %s for a packed model", path, (long long)st.st_size,
                      st.st_size < (off_t)sizeof(pack_header) ? "truncated" : "over the size limit");
    }
    size_t len = (size_t)st.st_size;
    void *map = mmap(NULL, len, PROT_READ, MAP_PRIVATE | MAP_POPULATE, fd, 0);
    int err = errno;
    close(fd);
    if (map == MAP_FAILED) return hm_err(HM_E_IO, "%s: cannot map: %s", path, strerror(err));
    int rc = hm_model_from_packed_mem(map, len, path, mano_npz, precision, out);
    if (rc) {
        munmap(map, len);
        return rc;
    }
    (*out)->pack_unmap = 1;
    return HM_OK;
}

void hm_pack_reseal(void *buf, size_t len) {
    pack_header h;
    if (!buf || len < sizeof h) return;
    memcpy(&h, buf, sizeof h);
    if (h.n_sections > PACK_MAX_SECTIONS || (uint64_t)h.n_sections * sizeof(pack_entry) > len - sizeof h) return;
    uint8_t *table = (uint8_t *)buf + sizeof h;
    for (uint32_t i = 0; i < h.n_sections; i++) {
        pack_entry e;
        memcpy(&e, table + (size_t)i * sizeof e, sizeof e);
        if (e.offset > len || e.bytes > len - e.offset) continue;
        e.checksum = XXH3_64bits((const uint8_t *)buf + e.offset, (size_t)e.bytes);
        memcpy(table + (size_t)i * sizeof e, &e, sizeof e);
    }
    h.meta_checksum = meta_checksum(&h, table, (size_t)h.n_sections * sizeof(pack_entry));
    memcpy(buf, &h, sizeof h);
}
