/* ckpt.c - torch.save checkpoint index: zip + pickle -> flat tensor table.
 *
 * The table is sorted by key so lookups are a binary search; a key that
 * appears twice keeps its last value, as a Python dict would.
 */
#define _DEFAULT_SOURCE /* madvise */
#include "format/ckpt.h"
#include "format/pickle.h"
#include "core/fileio.h"
#include "core/util.h"
#include "format/zip.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#define MAX_PICKLE_BYTES ((uint64_t)1 << 31)

struct hm_ckpt {
    void *map;           /* our mmap, or NULL for hm_ckpt_open_mem */
    size_t map_len;
    const uint8_t *buf;
    size_t len;
    hm_tensor *t;
    int n;
    char *names;
};

size_t hm_dtype_size(hm_dtype t) {
    switch (t) {
    case HM_DT_F64: case HM_DT_I64: return 8;
    case HM_DT_F32: case HM_DT_I32: return 4;
    case HM_DT_F16: case HM_DT_BF16: case HM_DT_I16: return 2;
    case HM_DT_I8: case HM_DT_U8: case HM_DT_BOOL: return 1;
    }
    return 0;
}

const char *hm_dtype_name(hm_dtype t) {
    static const char *const names[] = {"f32", "f64", "f16", "bf16", "i64", "i32", "i16", "i8", "u8", "bool"};
    return (unsigned)t < sizeof names / sizeof *names ? names[t] : "?";
}

/* Row-major strides, ignoring size-1 dims; empty tensors count as
 * contiguous (torch's is_contiguous agrees on both). */
static int is_contiguous(const hm_tensor *t) {
    if (t->numel == 0) return 1;
    int64_t want = 1;
    for (int d = t->ndim - 1; d >= 0; d--) {
        if (t->shape[d] == 1) continue;
        if (t->stride[d] != want) return 0;
        want *= t->shape[d];
    }
    return 1;
}

typedef struct {
    const hm_zip *zip;
    const char *prefix;
    size_t prefix_len;
    char *member;        /* scratch for "<prefix>/data/<key>" */
} ctx;

#define PRINTABLE(p, n) hm_zip_printable((char[96]){0}, 96, (p), (n))

/* Fill *out from a pickled tensor: dtype, layout, and a data pointer whose
 * whole strided extent lies inside its stored zip member. */
static int resolve(ctx *cx, const char *name, const hm_pk_tensor *pt, hm_tensor *out) {
    const hm_pk_obj *st = pt->storage;
    char key[96];
    hm_zip_printable(key, sizeof key, name, strlen(name));
    if (pt->ndim > HM_MAX_DIMS)
        return hm_err(HM_E_UNSUPPORTED, "checkpoint: tensor '%s' has %d dimensions (max %d)", key, pt->ndim, HM_MAX_DIMS);
    if (st->u.storage.dtype < 0)
        return hm_err(HM_E_UNSUPPORTED, "checkpoint: tensor '%s' has an unsupported storage type", key);
    sprintf(cx->member, "%.*s/data/%.*s", (int)cx->prefix_len, cx->prefix, (int)st->u.storage.key_len,
            st->u.storage.key);
    size_t mlen = strlen(cx->member); /* a key holding a NUL was cut there */
    int idx = memchr(st->u.storage.key, 0, st->u.storage.key_len) ? -1 : hm_zip_find(cx->zip, cx->member);
    if (idx < 0)
        return hm_err(HM_E_FORMAT, "checkpoint: tensor '%s' storage '%s' missing from the archive", key,
                      PRINTABLE(cx->member, mlen));
    const hm_zip_entry *e = &cx->zip->ent[idx];
    if (e->method != 0 || (e->flags & 1))
        return hm_err(HM_E_FORMAT, "checkpoint: tensor '%s' storage '%s' is compressed or encrypted (method %d)", key,
                      PRINTABLE(cx->member, mlen), e->method);
    out->dtype = (hm_dtype)st->u.storage.dtype;
    out->ndim = pt->ndim;
    size_t es = hm_dtype_size(out->dtype);
    /* numel and the last element's index; overflow means "too big". */
    uint64_t numel = 1, last = 0, t;
    int bad = 0;
    for (int d = 0; d < pt->ndim; d++) {
        out->shape[d] = pt->shape[d];
        out->stride[d] = pt->stride[d];
        bad |= __builtin_mul_overflow(numel, (uint64_t)pt->shape[d], &numel);
        if (pt->shape[d] > 0) {
            bad |= __builtin_mul_overflow((uint64_t)(pt->shape[d] - 1), (uint64_t)pt->stride[d], &t);
            bad |= __builtin_add_overflow(last, t, &last);
        }
    }
    if (bad || numel > (uint64_t)INT64_MAX || last >= (uint64_t)INT64_MAX)
        return hm_err(HM_E_FORMAT, "checkpoint: tensor '%s' has an impossible shape", key);
    out->numel = (int64_t)numel;
    const uint8_t *base = cx->zip->buf + e->data_off;
    out->data = base;
    if (numel) {
        uint64_t end;
        if (__builtin_add_overflow((uint64_t)pt->offset, last + 1, &end) || __builtin_mul_overflow(end, es, &end) ||
            end > e->usize)
            return hm_err(HM_E_FORMAT,
                          "checkpoint: tensor '%s' storage '%s' too small (offset %lld, extent %llu elements of %zu bytes, "
                          "storage has %llu bytes)",
                          key, PRINTABLE(cx->member, mlen), (long long)pt->offset, (unsigned long long)(last + 1), es,
                          (unsigned long long)e->usize);
        out->data = base + (size_t)pt->offset * es;
        /* Other modules read elements through typed pointers. */
        if ((uintptr_t)out->data % es)
            return hm_err(HM_E_FORMAT, "checkpoint: tensor '%s' data at byte %llu is not aligned to %zu bytes", key,
                          (unsigned long long)(e->data_off + (uint64_t)pt->offset * es), es);
    }
    out->contiguous = is_contiguous(out);
    return HM_OK;
}

typedef struct {
    hm_tensor t;
    size_t pos; /* position in the dict, to keep the last duplicate */
} ranked;

static int cmp_ranked(const void *a, const void *b) {
    const ranked *x = a, *y = b;
    int c = strcmp(x->t.name, y->t.name);
    return c ? c : (x->pos > y->pos) - (x->pos < y->pos);
}

/* The archive prefix: the first entry's name up to its first '/'. */
static int find_prefix(const hm_zip *z, size_t *len) {
    if (z->n == 0) return hm_err(HM_E_FORMAT, "checkpoint: the zip archive is empty");
    const hm_zip_entry *e = &z->ent[0];
    const char *slash = memchr(e->name, '/', e->name_len);
    if (!slash || slash == e->name || memchr(e->name, 0, (size_t)(slash - e->name)))
        return hm_err(HM_E_FORMAT, "checkpoint: first zip entry '%s' has no archive prefix",
                      hm_zip_printable((char[96]){0}, 96, e->name, e->name_len));
    *len = (size_t)(slash - e->name);
    return HM_OK;
}

/* Build c->t from the state dict (or top-level dict) of the pickle. */
static int collect(hm_ckpt *c, ctx *cx, const hm_pk_obj *dict) {
    size_t count = 0, names_len = 0;
    for (size_t i = 0; i + 1 < dict->u.seq.n; i += 2) {
        const hm_pk_obj *k = dict->u.seq.v[i], *v = dict->u.seq.v[i + 1];
        if (k->kind == HM_PK_STR && v->kind == HM_PK_TENSOR) count++, names_len += k->u.str.len + 1;
    }
    if (count > HM_CKPT_MAX_TENSORS)
        return hm_err(HM_E_FORMAT, "checkpoint: %zu tensors, over the limit of %d tensors", count, HM_CKPT_MAX_TENSORS);
    ranked *r = malloc((count ? count : 1) * sizeof *r);
    c->names = malloc(names_len ? names_len : 1);
    c->t = malloc((count ? count : 1) * sizeof *c->t);
    if (!r || !c->names || !c->t) {
        free(r);
        return hm_err(HM_E_NOMEM, "checkpoint: out of memory for %zu tensor entries", count);
    }
    char *np = c->names;
    size_t m = 0;
    int rc = HM_OK;
    for (size_t i = 0; !rc && i + 1 < dict->u.seq.n; i += 2) {
        const hm_pk_obj *k = dict->u.seq.v[i], *v = dict->u.seq.v[i + 1];
        if (k->kind != HM_PK_STR || v->kind != HM_PK_TENSOR) continue;
        memcpy(np, k->u.str.p, k->u.str.len);
        np[k->u.str.len] = 0;
        memset(&r[m], 0, sizeof r[m]);
        r[m].t.name = np;
        r[m].pos = i;
        np += k->u.str.len + 1;
        rc = resolve(cx, r[m].t.name, v->u.tensor, &r[m].t);
        m++;
    }
    if (!rc) {
        qsort(r, m, sizeof *r, cmp_ranked);
        int n = 0;
        for (size_t i = 0; i < m; i++) {
            if (n && !strcmp(c->t[n - 1].name, r[i].t.name)) n--; /* the later one wins */
            c->t[n++] = r[i].t;
        }
        c->n = n;
    }
    free(r);
    return rc;
}

/* Index the archive in c->buf. */
static int index_ckpt(hm_ckpt *c) {
    hm_zip z;
    hm_pickle *pk = NULL;
    hm_pk_obj *root = NULL;
    void *owned = NULL;
    ctx cx = {&z, NULL, 0, NULL};
    int rc = hm_zip_open(c->buf, c->len, "checkpoint", &z);
    if (rc) return rc;
    if ((rc = find_prefix(&z, &cx.prefix_len))) goto out;
    cx.prefix = z.ent[0].name;
    if (!(cx.member = malloc(cx.prefix_len + 32))) {
        rc = hm_err(HM_E_NOMEM, "checkpoint: out of memory");
        goto out;
    }
    sprintf(cx.member, "%.*s/byteorder", (int)cx.prefix_len, cx.prefix);
    int bo = hm_zip_find(&z, cx.member);
    if (bo >= 0) {
        const hm_zip_entry *e = &z.ent[bo];
        if (e->method != 0 || e->usize != 6 || memcmp(z.buf + e->data_off, "little", 6)) {
            rc = hm_err(HM_E_UNSUPPORTED, "checkpoint: only little-endian checkpoints are supported");
            goto out;
        }
    }
    sprintf(cx.member, "%.*s/data.pkl", (int)cx.prefix_len, cx.prefix);
    int pi = hm_zip_find(&z, cx.member);
    if (pi < 0) {
        rc = hm_err(HM_E_FORMAT, "checkpoint: no '%s' in the archive",
                    hm_zip_printable((char[96]){0}, 96, cx.member, strlen(cx.member)));
        goto out;
    }
    const void *pkl;
    size_t pkl_len;
    if ((rc = hm_zip_read(&z, pi, MAX_PICKLE_BYTES, 1, &pkl, &pkl_len, &owned))) goto out;
    /* Room for "<prefix>/data/<key>" with any key the pickle can hold. */
    char *grown = realloc(cx.member, cx.prefix_len + 32 + pkl_len);
    if (!grown) {
        rc = hm_err(HM_E_NOMEM, "checkpoint: out of memory");
        goto out;
    }
    cx.member = grown;
    char what[128];
    snprintf(what, sizeof what, "checkpoint: %s", hm_zip_printable((char[96]){0}, 96, cx.member, strlen(cx.member)));
    if ((rc = hm_pickle_load(pkl, pkl_len, what, &pk, &root))) goto out;
    if (root->kind != HM_PK_DICT) {
        rc = hm_err(HM_E_FORMAT, "checkpoint: top-level pickled object is not a dict");
        goto out;
    }
    const hm_pk_obj *sd = hm_pk_dict_get(root, "state_dict");
    rc = collect(c, &cx, sd && sd->kind == HM_PK_DICT ? sd : root);
out:
    hm_pickle_free(pk);
    hm_free(owned);
    free(cx.member);
    hm_zip_close(&z);
    return rc;
}

static int finish_open(hm_ckpt *c, hm_ckpt **out) {
    int rc = index_ckpt(c);
    if (rc) {
        hm_ckpt_close(c);
        return rc;
    }
    *out = c;
    return HM_OK;
}

int hm_ckpt_open_mem(const void *buf, size_t len, hm_ckpt **out) {
    if (!out) return hm_err(HM_E_ARG, "checkpoint: NULL output handle");
    *out = NULL;
    if (!buf && len) return hm_err(HM_E_ARG, "checkpoint: NULL buffer");
    hm_ckpt *c = calloc(1, sizeof *c);
    if (!c) return hm_err(HM_E_NOMEM, "checkpoint: out of memory");
    c->buf = buf;
    c->len = len;
    return finish_open(c, out);
}

int hm_ckpt_open(const char *path, hm_ckpt **out) {
    if (!out || !path) return hm_err(HM_E_ARG, "checkpoint: NULL path or output handle");
    *out = NULL;
    int fd = hm_open_read(path);
    if (fd < 0) return hm_err(HM_E_IO, "checkpoint: cannot open '%s': %s", path, strerror(errno));
    struct stat st;
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        close(fd);
        return hm_err(HM_E_IO, "checkpoint: '%s' is not a regular file", path);
    }
    if (st.st_size == 0) {
        close(fd);
        return hm_err(HM_E_FORMAT, "checkpoint: '%s' is empty", path);
    }
    if ((uint64_t)st.st_size > HM_CKPT_MAX_BYTES) {
        close(fd);
        return hm_err(HM_E_FORMAT, "checkpoint: '%s' is %lld bytes, over the byte limit of %llu", path,
                      (long long)st.st_size, (unsigned long long)HM_CKPT_MAX_BYTES);
    }
    void *map = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
    int err = errno;
    close(fd); /* the mapping keeps the file alive */
    if (map == MAP_FAILED) return hm_err(HM_E_IO, "checkpoint: cannot map '%s': %s", path, strerror(err));
    hm_ckpt *c = calloc(1, sizeof *c);
    if (!c) {
        munmap(map, (size_t)st.st_size);
        return hm_err(HM_E_NOMEM, "checkpoint: out of memory");
    }
    c->map = map;
    c->map_len = (size_t)st.st_size;
    c->buf = map;
    c->len = c->map_len;
    return finish_open(c, out);
}

void hm_ckpt_close(hm_ckpt *c) {
    if (!c) return;
    if (c->map) munmap(c->map, c->map_len);
    free(c->t);
    free(c->names);
    free(c);
}

int hm_ckpt_count(const hm_ckpt *c) { return c ? c->n : 0; }

const hm_tensor *hm_ckpt_at(const hm_ckpt *c, int i) {
    return c && i >= 0 && i < c->n ? &c->t[i] : NULL;
}

const hm_tensor *hm_ckpt_find(const hm_ckpt *c, const char *key) {
    if (!c || !key) return NULL;
    int lo = 0, hi = c->n - 1;
    while (lo <= hi) {
        int mid = lo + (hi - lo) / 2, k = strcmp(c->t[mid].name, key);
        if (!k) return &c->t[mid];
        if (k < 0) lo = mid + 1;
        else hi = mid - 1;
    }
    return NULL;
}

void hm_ckpt_release_pages(hm_ckpt *c) {
    /* Clean file-backed pages: dropping them only costs a re-read. */
    if (c && c->map) madvise(c->map, c->map_len, MADV_DONTNEED);
}

void hm_ckpt_release_range(hm_ckpt *c, const void *p, size_t bytes) {
    if (!c || !c->map || !p) return;
    uintptr_t lo = (uintptr_t)p, hi = lo + bytes, map = (uintptr_t)c->map;
    if (lo < map || hi > map + c->map_len || hi < lo) return;
    long pg = sysconf(_SC_PAGESIZE);
    uintptr_t mask = (uintptr_t)(pg > 0 ? pg : 4096) - 1;
    lo = (lo + mask) & ~mask; /* whole pages only: neighbours may still be needed */
    hi &= ~mask;
    if (hi > lo) madvise((void *)lo, hi - lo, MADV_DONTNEED);
}

int hm_ckpt_from_tensors(const hm_tensor *tensors, int n, hm_ckpt **out) {
    if (!out) return hm_err(HM_E_ARG, "checkpoint: NULL output handle");
    *out = NULL;
    if (n < 0 || (n && !tensors)) return hm_err(HM_E_ARG, "checkpoint: bad tensor list (%d entries)", n);
    size_t names_len = 0;
    for (int i = 0; i < n; i++) {
        const hm_tensor *t = &tensors[i];
        if (!t->name || t->ndim < 0 || t->ndim > HM_MAX_DIMS || hm_dtype_size(t->dtype) == 0)
            return hm_err(HM_E_ARG, "checkpoint: tensor %d has no name, a bad rank or a bad dtype", i);
        for (int d = 0; d < t->ndim; d++)
            if (t->shape[d] < 0) return hm_err(HM_E_ARG, "checkpoint: tensor '%s' has a negative dimension", t->name);
        names_len += strlen(t->name) + 1;
    }
    hm_ckpt *c = calloc(1, sizeof *c);
    ranked *r = malloc((n ? n : 1) * sizeof *r);
    if (!c || !r || !(c->names = malloc(names_len ? names_len : 1)) || !(c->t = malloc((n ? n : 1) * sizeof *c->t))) {
        free(r);
        hm_ckpt_close(c);
        return hm_err(HM_E_NOMEM, "checkpoint: out of memory for %d tensor entries", n);
    }
    char *np = c->names;
    for (int i = 0; i < n; i++) {
        hm_tensor t = tensors[i];
        size_t len = strlen(t.name) + 1;
        memcpy(np, t.name, len);
        t.name = np;
        np += len;
        int64_t numel = 1;
        for (int d = t.ndim - 1; d >= 0; d--) {
            t.stride[d] = numel;
            numel *= t.shape[d];
        }
        t.numel = numel;
        t.contiguous = 1;
        r[i].t = t;
        r[i].pos = (size_t)i;
    }
    qsort(r, (size_t)n, sizeof *r, cmp_ranked);
    int m = 0;
    for (int i = 0; i < n; i++) {
        if (m && !strcmp(c->t[m - 1].name, r[i].t.name)) m--; /* the later one wins */
        c->t[m++] = r[i].t;
    }
    c->n = m;
    free(r);
    *out = c;
    return HM_OK;
}
