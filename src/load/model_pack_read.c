/* model_pack_read.c - the packed model file's reader: hm_model_load_packed
 * (mmap), hm_model_from_packed_mem (the checks and the binding),
 * hm_pack_sniff, and hm_pack_reseal for tests and fuzzing. The layout is
 * described in model_pack.c.
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
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>
#include <xxhash.h>

#include "format/ckpt.h"
#include "kernels/gemm_lowp.h"
#include "load/model_check.h"
#include "load/load.h"
#include "backend/backend.h"
#include "model/model.h"
#include "load/model_pack.h"
#include "core/fileio.h"
#include "core/util.h"

#define PACK_MAX_SECTIONS (1u << 20)

typedef struct {
    hm_visitor v;
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

static int bind_array(hm_visitor *v, const char *name, void *field, size_t bytes) {
    const uint8_t *p = take((bind_visitor *)v, name, bytes);
    if (!p) return HM_E_FORMAT;
    hm_pack_set_ptr(field, p);
    return HM_OK;
}

static int bind_embedded(hm_visitor *v, const char *name, void *data, size_t bytes) {
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

static int bind_matrix(hm_visitor *v, const char *name, hm_packed *p, int N, int K, int bias, slot_kind kind) {
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
    else if (kind == SLOT_SENSITIVE && h->lowp_kind == HM_LOWP_INT8) /* x86 int8: int8 with fine weights */
        ok = ok && r.prec == HM_PREC_FAST && r.lowp_kind == HM_LOWP_INT8F;
    else /* the other sensitive matmuls and SLOT_BF16: bf16 where the CPU has it, else fp32 */
        ok = ok && (r.prec == HM_PREC_FP32 || hm_lowp_kind_is_bf16(r.lowp_kind));
    if (!ok)
        return hm_err(HM_E_FORMAT, "%s: matrix '%s' has precision %d / low-precision kind %d, not what a %s model packs there",
                      bv->src, name, r.prec, r.lowp_kind, prec_name(h->precision));
    memset(p, 0, sizeof *p);
    p->N = N, p->K = K, p->prec = r.prec;
    p->isa = h->isa; /* the fp32 and the low-precision packings are the same ISA level's */
    hm_packed_sizes s;
    int rc = hm_packed_sizes_for(N, K, p->isa, p->prec, r.lowp_kind, &s);
    if (rc) return matrix_err(HM_E_FORMAT, bv->src, name);
    if ((rc = hm_pack_matrix_arrays(v, name, p, bias, &s))) return rc;
    if (p->prec == HM_PREC_FAST && (rc = hm_lowp_packed_check(p, r.lowp_kind)))
        return matrix_err(rc, bv->src, name);
    return HM_OK;
}

/* Header fields and whether this process can run what they describe. */
static int check_header(const pack_header *h, const uint8_t *table, size_t len, const char *src, const hm_backend *be,
                        int precision) {
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
    if (hm_pack_meta_checksum(h, table, (size_t)h->n_sections * sizeof(pack_entry)) != h->meta_checksum)
        return hm_err(HM_E_FORMAT, "%s: checksum mismatch in the header or section table (file corrupted)", src);
    if (memchr(h->scheme, 0, sizeof h->scheme) == NULL) return hm_err(HM_E_FORMAT, "%s: scheme name not terminated", src);
    if (memchr(h->backend, 0, sizeof h->backend) == NULL || !h->backend[0])
        return hm_err(HM_E_FORMAT, "%s: backend name missing or not terminated", src);
    if ((h->precision != HM_PREC_FP32 && h->precision != HM_PREC_FAST) || (unsigned)h->has_mano > 1 ||
        (h->precision == HM_PREC_FAST && (h->lowp_kind < 0 || h->lowp_kind >= HM_LOWP_KINDS)))
        return hm_err(HM_E_FORMAT, "%s: precision %d / low-precision kind %d / has_mano %d invalid", src,
                      h->precision, h->lowp_kind, h->has_mano);
    if (!hm_isa_known(h->isa)) return hm_err(HM_E_FORMAT, "%s: layout ISA %d invalid", src, h->isa);
    hm_config cfg;
    memcpy(&cfg, h->cfg, sizeof cfg);
    int rc = hm_config_check(&cfg, src, HM_E_FORMAT);
    if (rc) return rc;

    /* Valid file; can this process use it as it is? */
    if (strcmp(h->backend, be->name))
        return hm_err(HM_E_UNSUPPORTED, "%s: packed for the %s backend, not %s; load the checkpoint on %s, or convert it again with --device %s",
                      src, h->backend, be->name, be->name, be->name);
    if (h->precision != precision)
        return hm_err(HM_E_UNSUPPORTED, "%s: packed in precision %s but %s was requested; convert the checkpoint again with --precision %s",
                      src, prec_name(h->precision), prec_name(precision), prec_name(precision));
    if ((rc = hm_isa_status())) return rc;
    hm_isa cpu = hm_cpu_isa(), active = hm_isa_active();
    if (!hm_isa_runs(h->isa))
        return hm_err(HM_E_UNSUPPORTED, "%s: packed for ISA %s, which this CPU (%s) cannot run; convert the checkpoint again on this machine",
                      src, hm_isa_name((hm_isa)h->isa), hm_isa_name(cpu));
    if (h->isa != (int)active)
        return hm_err(HM_E_UNSUPPORTED, "%s: packed for ISA %s but the active ISA is %s (HAMER_ISA); convert the checkpoint again under the same ISA",
                      src, hm_isa_name((hm_isa)h->isa), hm_isa_name(active));
    if (h->precision == HM_PREC_FAST && h->lowp_kind != (int)hm_lowp_kind_active())
        return hm_err(HM_E_UNSUPPORTED, "%s: packed with low-precision kind %s but this process uses %s (HAMER_LOWP); convert the checkpoint again",
                      src, hm_lowp_kind_is_bf16(h->lowp_kind) ? "bf16" : "int8",
                      hm_lowp_kind_is_bf16((int)hm_lowp_kind_active()) ? "bf16" : "int8");
    const char *scheme = be->scheme(h->precision);
    if (strcmp(h->scheme, scheme))
        return hm_err(HM_E_UNSUPPORTED, "%s: packed for scheme '%s' but this machine runs '%s'; convert the checkpoint again",
                      src, h->scheme, scheme);
    return HM_OK;
}

/* Section table: named, inside the file, aligned, in order, no overlap. */
static int check_table(const pack_header *h, const pack_entry *t, size_t len, const char *src) {
    uint64_t prev_end = hm_pack_round_up(sizeof *h + (uint64_t)h->n_sections * sizeof *t);
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
    int rc = hm_pack_hash_sections(s, (int)n);
    for (uint32_t i = 0; !rc && i < n; i++)
        if (s[i].sum != t[i].checksum)
            rc = hm_err(HM_E_FORMAT, "%s: section '%s': checksum mismatch (file corrupted)", src, t[i].name);
    free(s);
    return rc;
}

int hm_model_from_packed_mem(const void *buf, size_t len, const char *src, const hm_load_opts *o, hm_model **out) {
    *out = NULL;
    const uint8_t *base = buf;
    const hm_backend *be = o->be ? o->be : &hm_backend_cpu;
    pack_header h;
    if (!buf || len < sizeof PACK_MAGIC || memcmp(base, PACK_MAGIC, sizeof PACK_MAGIC))
        return hm_err(HM_E_FORMAT, "%s: not a packed model file (bad magic)", src);
    if (len < sizeof h) return hm_err(HM_E_FORMAT, "%s: truncated packed model (%zu bytes, the header alone is %zu)", src, len, sizeof h);
    if ((uintptr_t)buf % PACK_ALIGN) return hm_err(HM_E_ARG, "%s: packed model buffer is not %d-byte aligned", src, PACK_ALIGN);
    memcpy(&h, base, sizeof h);
    int rc = check_header(&h, base + sizeof h, len, src, be, o->precision);
    const pack_entry *table = (const pack_entry *)(base + sizeof h);
    if (!rc) rc = check_table(&h, table, len, src);
    if (!rc) rc = verify_checksums(base, table, h.n_sections, src);
    if (rc) return rc;
    if (!be->visit || !be->blank)
        return hm_err(HM_E_UNSUPPORTED, "%s: the %s backend has no packed model files; load the checkpoint", src, be->name);

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
    m->be = be;
    m->device = o->dev;
    m->pack_map = base;
    m->pack_len = len;
    if ((rc = be->blank(&cfg, h.precision, &m->bm))) {
        hm_model_free(m);
        return rc;
    }
    bind_visitor bv = {{bind_matrix, bind_array, bind_embedded}, src, base, &h, table, 1,
                       (const pack_matrix *)(base + e0->offset), (int)(e0->bytes / sizeof(pack_matrix)), 0};
    rc = hm_pack_visit_model(m, &bv.v);
    if (!rc && bv.next != (int)h.n_sections)
        rc = hm_err(HM_E_FORMAT, "%s: unexpected section '%s' after the model's last array", src, table[bv.next].name);
    if (!rc && bv.next_mat != bv.nmat)
        rc = hm_err(HM_E_FORMAT, "%s: section 'matrices' has %d records for %d matrices", src, bv.nmat, bv.next_mat);
    if (!rc && m->has_mano) rc = hm_mano_check(&m->mano, src);
    if (!rc && !m->has_mano && o->mano_npz && !(rc = hm_mano_from_npz(o->mano_npz, &m->mano))) m->has_mano = 1;
    if (rc) {
        hm_model_free(m);
        return rc;
    }
    *out = m;
    return HM_OK;
}

int hm_pack_sniff(const char *path) {
    char magic[sizeof PACK_MAGIC];
    int fd = hm_open_read(path);
    if (fd < 0) return 0;
    ssize_t n = read(fd, magic, sizeof magic);
    close(fd);
    if (n != (ssize_t)sizeof magic) return 0;
    if (!memcmp(magic, PACK_MAGIC, sizeof magic)) return 1;
    return memcmp(magic, "PK\3\4", 4) ? -1 : 0;
}

int hm_model_load_packed(const char *path, const hm_load_opts *o, hm_model **out) {
    *out = NULL;
    int fd = hm_open_read(path);
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
    int rc = hm_model_from_packed_mem(map, len, path, o, out);
    if (rc) {
        munmap(map, len);
        return rc;
    }
    (*out)->pack_unmap = 1;
    return HM_OK;
}

int hm_pack_tag(const hm_model *m, uint8_t tag[HM_PACK_TAG_BYTES]) {
    if (!m || !m->pack_map || m->pack_len < sizeof(pack_header)) return hm_err(HM_E_ARG, "model was not loaded from a packed file");
    memcpy(tag, (const uint8_t *)m->pack_map + offsetof(pack_header, reserved), HM_PACK_TAG_BYTES);
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
    h.meta_checksum = hm_pack_meta_checksum(&h, table, (size_t)h.n_sections * sizeof(pack_entry));
    memcpy(buf, &h, sizeof h);
}
