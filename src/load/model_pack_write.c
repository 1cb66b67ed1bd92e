/* model_pack_write.c - hm_model_save_packed: the model's arrays, as
 * hm_pack_visit_model lists them, written in the layout model_pack.c
 * describes.
 *
 * The walk refuses a model that is not what its config implies (an array
 * missing, a matrix of another shape, an fp32 packing for another ISA):
 * the reader checks the file against the config and would refuse it.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "kernels/gemm_lowp.h"
#include "load/load.h"
#include "model/model.h"
#include "load/model_pack.h"
#include "core/util.h"

typedef struct {
    hm_visitor v;
    const hm_model *m;
    section *sec;                /* [0] is the matrix table */
    int n, cap;
    pack_matrix *mats;
    int nmat, matcap;
    int isa;                     /* of the fp32 packings (the first one's; all must agree), -1 before it */
    int lowp_kind;               /* of the model-precision packings (the first one's) */
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

static int collect_array(hm_visitor *v, const char *name, void *field, size_t bytes) {
    return collect_add((collect_visitor *)v, name, hm_pack_get_ptr(field), bytes);
}

static int collect_embedded(hm_visitor *v, const char *name, void *data, size_t bytes) {
    return collect_add((collect_visitor *)v, name, data, bytes);
}

static int collect_matrix(hm_visitor *v, const char *name, hm_packed *p, int N, int K, int bias, slot_kind kind) {
    collect_visitor *cv = (collect_visitor *)v;
    int lk = hm_lowp_packed_kind(p), rc;
    hm_packed_sizes s;
    if (p->N != N || p->K != K || !!p->bias != bias)
        return hm_err(HM_E_ARG, "packed model: matrix '%s' is %d x %d%s, expected %d x %d%s", name, p->N, p->K,
                      p->bias ? " + bias" : "", N, K, bias ? " + bias" : "");
    if (p->prec == HM_PREC_FP32 && cv->isa < 0) cv->isa = p->isa;
    if (p->prec == HM_PREC_FP32 && p->isa != cv->isa)
        return hm_err(HM_E_ARG, "packed model: matrix '%s' is packed for %s, the model for %s", name,
                      hm_isa_name((hm_isa)p->isa), hm_isa_name((hm_isa)cv->isa));
    if (kind == SLOT_MODEL && lk >= 0 && cv->lowp_kind < 0) cv->lowp_kind = lk;
    if ((rc = hm_packed_sizes_for(N, K, p->isa, p->prec, lk, &s))) return rc;
    if ((rc = grow((void **)&cv->mats, &cv->matcap, cv->nmat + 1, sizeof *cv->mats))) return rc;
    pack_matrix *r = &cv->mats[cv->nmat++];
    memset(r, 0, sizeof *r);
    snprintf(r->name, sizeof r->name, "%s", name);
    r->N = N, r->K = K, r->prec = p->prec, r->lowp_kind = lk < 0 ? 0 : lk, r->has_bias = bias;
    return hm_pack_matrix_arrays(v, name, p, bias, &s);
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

/* The rename is durable only once the directory is on disk too; a failure
 * here leaves a complete file under one of the two names, so it is not
 * reported. */
static void sync_parent_dir(const char *path) {
    const char *slash = strrchr(path, '/');
    char *dir = slash ? strndup(path, slash == path ? 1 : (size_t)(slash - path)) : strdup(".");
    if (!dir) return;
    int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd >= 0) {
        fsync(fd);
        close(fd);
    }
    free(dir);
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
    if (!rc) sync_parent_dir(path);
    return rc;
}

int hm_model_save_packed(const hm_model *m, const char *path) { return hm_model_save_packed_tagged(m, path, NULL); }

int hm_model_save_packed_tagged(const hm_model *m, const char *path, const uint8_t tag[HM_PACK_TAG_BYTES]) {
    if (!m || !path) return hm_err(HM_E_ARG, "hm_model_save_packed: NULL model or path");
    collect_visitor cv = {.v = {collect_matrix, collect_array, collect_embedded}, .m = m, .isa = -1, .lowp_kind = -1};
    pack_entry *table = NULL;
    int rc;
    /* Section 0 is the matrix table; its contents are known after the walk. */
    if ((rc = collect_add(&cv, "matrices", "", 1))) goto out;
    if ((rc = hm_pack_visit_model((hm_model *)m, &cv.v))) goto out;
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
    h.isa = cv.isa < 0 ? 0 : cv.isa;
    h.lowp_kind = m->precision == HM_PREC_FAST && cv.lowp_kind >= 0 ? cv.lowp_kind : 0;
    h.has_mano = m->has_mano;
    memcpy(h.cfg, &m->cfg, sizeof h.cfg);
    snprintf(h.scheme, sizeof h.scheme, "%s", m->be->scheme(m->precision));
    snprintf(h.backend, sizeof h.backend, "%s", m->be->name);
    if (tag) memcpy(h.reserved, tag, sizeof h.reserved);

    if (!(table = calloc((size_t)cv.n, sizeof *table))) {
        rc = hm_err(HM_E_NOMEM, "packed model: out of memory");
        goto out;
    }
    if ((rc = hm_pack_hash_sections(cv.sec, cv.n))) goto out;
    uint64_t off = hm_pack_round_up(h.table_offset + (uint64_t)cv.n * sizeof *table);
    for (int i = 0; i < cv.n; i++) {
        memcpy(table[i].name, cv.sec[i].name, sizeof table[i].name);
        table[i].offset = off;
        table[i].bytes = cv.sec[i].bytes;
        table[i].checksum = cv.sec[i].sum;
        off = hm_pack_round_up(off + cv.sec[i].bytes);
    }
    h.file_bytes = table[cv.n - 1].offset + table[cv.n - 1].bytes;
    h.meta_checksum = hm_pack_meta_checksum(&h, table, (size_t)cv.n * sizeof *table);

    rc = write_atomically(path, &cv, &h, table);
out:
    free(table);
    free(cv.sec);
    free(cv.mats);
    return rc;
}
