/* npy.c - .npy parse/load, .npz read (via zip.c) and stored-zip .npz write. */
#define _DEFAULT_SOURCE /* fileno, strdup */
#include "format/npy.h"
#include "core/fileio.h"
#include "core/util.h"
#include "format/zip.h"

#include <errno.h>
#include <stdio.h>
#include <unistd.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <zlib.h>

#define NPZ_MEMBER_CAP ((uint64_t)1 << 36)

static const struct { const char *descr; hm_dtype dt; } descrs[] = {
    {"<f4", HM_DT_F32}, {"<f8", HM_DT_F64}, {"<f2", HM_DT_F16}, {"<i8", HM_DT_I64}, {"<i4", HM_DT_I32},
    {"<i2", HM_DT_I16}, {"|i1", HM_DT_I8}, {"<i1", HM_DT_I8}, {"|u1", HM_DT_U8}, {"<u1", HM_DT_U8},
    {"|b1", HM_DT_BOOL}, {"<b1", HM_DT_BOOL},
};

/* ---- header dict: {'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), } ---- */

typedef struct {
    const char *p, *end, *what;
} lexer;

static int bad(const lexer *l, const char *why) {
    return hm_err(HM_E_FORMAT, "%s: bad .npy header (%s)", l->what, why);
}

static void ws(lexer *l) {
    while (l->p < l->end && (*l->p == ' ' || *l->p == '\t' || *l->p == '\n' || *l->p == '\r')) l->p++;
}

static int eat(lexer *l, char c) {
    ws(l);
    if (l->p < l->end && *l->p == c) {
        l->p++;
        return 1;
    }
    return 0;
}

static int quoted(lexer *l, const char **s, size_t *n) {
    ws(l);
    if (l->p >= l->end || (*l->p != '\'' && *l->p != '"')) return bad(l, "expected a string");
    char q = *l->p++;
    const char *start = l->p;
    while (l->p < l->end && *l->p != q) {
        if (*l->p == '\\') return bad(l, "escaped string");
        l->p++;
    }
    if (l->p >= l->end) return bad(l, "unterminated string");
    *s = start;
    *n = (size_t)(l->p++ - start);
    return HM_OK;
}

static int word(lexer *l, const char *w) {
    size_t n = strlen(w);
    ws(l);
    if ((size_t)(l->end - l->p) >= n && !memcmp(l->p, w, n)) {
        l->p += n;
        return 1;
    }
    return 0;
}

static int shape_tuple(lexer *l, hm_array *a) {
    if (!eat(l, '(')) return bad(l, "shape is not a tuple");
    a->ndim = 0;
    for (;;) {
        if (eat(l, ')')) return HM_OK;
        ws(l);
        if (l->p >= l->end || *l->p < '0' || *l->p > '9') return bad(l, "shape entry is not a non-negative integer");
        int64_t v = 0;
        while (l->p < l->end && *l->p >= '0' && *l->p <= '9') {
            if (v > (INT64_MAX - 9) / 10) return bad(l, "shape entry too large");
            v = v * 10 + (*l->p++ - '0');
        }
        if (l->p < l->end && *l->p == 'L') l->p++; /* Python 2 longs */
        if (a->ndim >= HM_MAX_DIMS) return bad(l, "too many dimensions");
        a->shape[a->ndim++] = v;
        if (!eat(l, ',')) {
            if (eat(l, ')')) return HM_OK;
            return bad(l, "malformed shape tuple");
        }
    }
}

static int parse_header(lexer *l, hm_array *a) {
    int have_descr = 0, have_order = 0, have_shape = 0;
    if (!eat(l, '{')) return bad(l, "not a dict");
    while (!eat(l, '}')) {
        const char *k, *v;
        size_t kn, vn;
        int rc = quoted(l, &k, &kn);
        if (rc) return rc;
        if (!eat(l, ':')) return bad(l, "missing ':'");
        if (kn == 5 && !memcmp(k, "descr", 5)) {
            if ((rc = quoted(l, &v, &vn))) return bad(l, "descr is not a simple type string");
            size_t i = 0, nd = sizeof descrs / sizeof *descrs;
            while (i < nd && !(strlen(descrs[i].descr) == vn && !memcmp(descrs[i].descr, v, vn))) i++;
            if (i == nd)
                return hm_err(HM_E_UNSUPPORTED, "%s: unsupported .npy dtype '%s'", l->what,
                              hm_zip_printable((char[32]){0}, 32, v, vn));
            a->dtype = descrs[i].dt;
            have_descr = 1;
        } else if (kn == 13 && !memcmp(k, "fortran_order", 13)) {
            if (word(l, "True"))
                return hm_err(HM_E_UNSUPPORTED, "%s: Fortran-order .npy arrays are not supported", l->what);
            if (!word(l, "False")) return bad(l, "fortran_order is not a boolean");
            have_order = 1;
        } else if (kn == 5 && !memcmp(k, "shape", 5)) {
            if ((rc = shape_tuple(l, a))) return rc;
            have_shape = 1;
        } else {
            return bad(l, "unexpected key");
        }
        if (!eat(l, ',')) {
            if (!eat(l, '}')) return bad(l, "expected ',' or '}'");
            break;
        }
    }
    ws(l);
    if (l->p != l->end) return bad(l, "trailing text after the dict");
    if (!have_descr || !have_order || !have_shape) return bad(l, "missing descr, fortran_order or shape");
    return HM_OK;
}

int hm_npy_parse(const void *buf, size_t len, const char *what, hm_array *out) {
    const uint8_t *b = buf;
    memset(out, 0, sizeof *out);
    what = what ? what : ".npy";
    if (!b || len < 10 || memcmp(b, "\x93NUMPY", 6))
        return hm_err(HM_E_FORMAT, "%s: not a .npy file (bad magic)", what);
    size_t start, hlen;
    if (b[6] == 1) {
        start = 10;
        hlen = (size_t)b[8] | (size_t)b[9] << 8;
    } else if ((b[6] == 2 || b[6] == 3) && len >= 12) {
        start = 12;
        hlen = (size_t)b[8] | (size_t)b[9] << 8 | (size_t)b[10] << 16 | (size_t)b[11] << 24;
    } else {
        return hm_err(HM_E_FORMAT, "%s: unsupported .npy version %d.%d", what, b[6], b[7]);
    }
    if (hlen > len - start) return hm_err(HM_E_FORMAT, "%s: truncated .npy header (%zu bytes declared)", what, hlen);
    hm_array a;
    memset(&a, 0, sizeof a);
    lexer l = {(const char *)b + start, (const char *)b + start + hlen, what};
    int rc = parse_header(&l, &a);
    if (rc) return rc;
    uint64_t numel = 1, bytes;
    for (int d = 0; d < a.ndim; d++)
        if (__builtin_mul_overflow(numel, (uint64_t)a.shape[d], &numel))
            return hm_err(HM_E_FORMAT, "%s: .npy shape overflows", what);
    size_t es = hm_dtype_size(a.dtype), have = len - start - hlen;
    if (__builtin_mul_overflow(numel, (uint64_t)es, &bytes) || numel > (uint64_t)INT64_MAX || bytes > have)
        return hm_err(HM_E_FORMAT, "%s: truncated .npy data (%zu bytes, shape needs %llu)", what, have,
                      (unsigned long long)(numel * es));
    if (bytes < have)
        return hm_err(HM_E_FORMAT, "%s: .npy has %zu bytes of data, shape needs %llu", what, have,
                      (unsigned long long)bytes);
    a.numel = (int64_t)numel;
    if (!(a.data = hm_alloc((size_t)bytes))) return HM_E_NOMEM;
    if (bytes) memcpy(a.data, b + start + hlen, (size_t)bytes);
    *out = a;
    return HM_OK;
}

/* Whole file into a malloc'd buffer. */
static int slurp(const char *path, const char *what, uint8_t **buf, size_t *len) {
    *buf = NULL;
    *len = 0;
    int fd = hm_open_read(path);
    FILE *f = fd < 0 ? NULL : fdopen(fd, "rb");
    if (!f) {
        int err = errno;
        if (fd >= 0) close(fd);
        return hm_err(HM_E_IO, "%s: cannot open: %s", what, strerror(err));
    }
    struct stat st;
    if (fstat(fileno(f), &st) != 0 || !S_ISREG(st.st_mode)) {
        fclose(f);
        return hm_err(HM_E_IO, "%s: not a regular file", what);
    }
    uint8_t *p = malloc(st.st_size ? (size_t)st.st_size : 1);
    if (!p) {
        fclose(f);
        return hm_err(HM_E_NOMEM, "%s: out of memory reading %lld bytes", what, (long long)st.st_size);
    }
    size_t got = fread(p, 1, (size_t)st.st_size, f);
    fclose(f);
    if (got != (size_t)st.st_size) {
        free(p);
        return hm_err(HM_E_IO, "%s: read error", what);
    }
    *buf = p;
    *len = got;
    return HM_OK;
}

int hm_npy_load(const char *path, hm_array *out) {
    uint8_t *buf;
    size_t len;
    memset(out, 0, sizeof *out);
    int rc = slurp(path, path, &buf, &len);
    if (rc) return rc;
    rc = hm_npy_parse(buf, len, path, out);
    free(buf);
    return rc;
}

void hm_array_free(hm_array *a) {
    if (!a) return;
    hm_free(a->data);
    memset(a, 0, sizeof *a);
}

/* ---- npz reading ---- */

struct hm_npz {
    uint8_t *buf;
    size_t len;
    char *what;    /* "npz '<path>'" */
    hm_zip zip;
    char **names;  /* member names without ".npy", in archive order */
};

int hm_npz_open(const char *path, hm_npz **out) {
    *out = NULL;
    hm_npz *z = calloc(1, sizeof *z);
    if (!z) return hm_err(HM_E_NOMEM, "npz: out of memory");
    size_t wl = strlen(path) + 8;
    int rc = HM_OK;
    if (!(z->what = malloc(wl))) rc = hm_err(HM_E_NOMEM, "npz: out of memory");
    if (!rc) snprintf(z->what, wl, "npz '%s'", path);
    if (!rc) rc = slurp(path, z->what, &z->buf, &z->len);
    if (!rc) rc = hm_zip_open(z->buf, z->len, z->what, &z->zip);
    if (!rc && !(z->names = calloc((size_t)z->zip.n + 1, sizeof *z->names)))
        rc = hm_err(HM_E_NOMEM, "npz: out of memory");
    for (int i = 0; !rc && i < z->zip.n; i++) {
        const hm_zip_entry *e = &z->zip.ent[i];
        size_t n = strlen(e->name);
        if (n >= 4 && !strcmp(e->name + n - 4, ".npy")) n -= 4;
        if (!(z->names[i] = malloc(n + 1))) rc = hm_err(HM_E_NOMEM, "npz: out of memory");
        else memcpy(z->names[i], e->name, n), z->names[i][n] = 0;
    }
    if (rc) {
        hm_npz_close(z);
        return rc;
    }
    *out = z;
    return HM_OK;
}

static int member_of(const hm_npz *z, const char *name) {
    size_t n = strlen(name);
    char *full = malloc(n + 5);
    if (!full) return -1;
    memcpy(full, name, n);
    memcpy(full + n, ".npy", 5);
    int i = hm_zip_find(&z->zip, full);
    free(full);
    return i >= 0 ? i : hm_zip_find(&z->zip, name);
}

int hm_npz_get(hm_npz *z, const char *name, hm_array *out) {
    memset(out, 0, sizeof *out);
    if (!z || !name) return hm_err(HM_E_ARG, "npz: NULL handle or name");
    int i = member_of(z, name);
    if (i < 0) return hm_err(HM_E_ARG, "%s: no array '%s'", z->what, name);
    const void *data;
    size_t len;
    void *owned;
    int rc = hm_zip_read(&z->zip, i, NPZ_MEMBER_CAP, 1, &data, &len, &owned);
    if (rc) return rc;
    size_t wl = strlen(z->what) + strlen(z->zip.ent[i].name) + 16;
    char *what = malloc(wl);
    if (!what) rc = hm_err(HM_E_NOMEM, "npz: out of memory");
    else {
        snprintf(what, wl, "%s member '%s'", z->what, z->zip.ent[i].name);
        rc = hm_npy_parse(data, len, what, out);
    }
    free(what);
    hm_free(owned);
    return rc;
}

int hm_npz_has(const hm_npz *z, const char *name) { return z && name && member_of(z, name) >= 0; }

int hm_npz_count(const hm_npz *z) { return z ? z->zip.n : 0; }

const char *hm_npz_name(const hm_npz *z, int i) { return z && i >= 0 && i < z->zip.n ? z->names[i] : NULL; }

void hm_npz_close(hm_npz *z) {
    if (!z) return;
    for (int i = 0; z->names && i < z->zip.n; i++) free(z->names[i]);
    free(z->names);
    hm_zip_close(&z->zip);
    free(z->buf);
    free(z->what);
    free(z);
}

/* ---- npz writing: a stored zip, CRCs computed before each local header ---- */

typedef struct {
    char *name;          /* with ".npy" */
    uint32_t crc, size, off;
} npz_member;

struct hm_npz_writer {
    hm_outfile o;        /* the temp file beside the target (core/fileio) */
    int open;            /* o holds a temp file */
    char *path;
    int rc;              /* first error; the temp file is already removed */
    uint64_t off;        /* bytes written so far */
    npz_member *m;
    size_t n, cap;
};

static void put16(uint8_t *p, unsigned v) { p[0] = (uint8_t)v, p[1] = (uint8_t)(v >> 8); }
static void put32(uint8_t *p, uint32_t v) { put16(p, v & 0xFFFF), put16(p + 2, v >> 16); }

/* Record the first error and drop the temp file; whatever was at the path
 * before stays as it was. */
static int writer_fail(hm_npz_writer *w, int rc) {
    if (!w->rc) w->rc = rc;
    if (w->open) {
        hm_outfile_abort(&w->o);
        w->open = 0;
    }
    return w->rc;
}

static int wr(hm_npz_writer *w, const void *p, size_t n) {
    int rc = hm_outfile_write(&w->o, p, n);
    if (rc) return writer_fail(w, rc);
    w->off += n;
    return HM_OK;
}

int hm_npz_write_begin(const char *path, hm_npz_writer **out) {
    *out = NULL;
    if (!path) return hm_err(HM_E_ARG, "npz: NULL path");
    hm_npz_writer *w = calloc(1, sizeof *w);
    if (!w || !(w->path = strdup(path))) {
        free(w);
        return hm_err(HM_E_NOMEM, "npz: out of memory");
    }
    int rc = hm_outfile_open(&w->o, path);
    if (rc) {
        free(w->path);
        free(w);
        return rc;
    }
    w->open = 1;
    *out = w;
    return HM_OK;
}

/* Name flag bit 11 marks UTF-8 names so readers do not assume cp437. */
static unsigned name_flags(const char *s) {
    for (; *s; s++)
        if ((unsigned char)*s >= 0x80) return 0x800;
    return 0;
}

/* Element type -> .npy descr, for the types the writers support. */
static const char *write_descr(hm_dtype dt) {
    return dt == HM_DT_F32 ? "<f4" : dt == HM_DT_F64 ? "<f8" : dt == HM_DT_U8 ? "|u1"
         : dt == HM_DT_I32 ? "<i4" : dt == HM_DT_I64 ? "<i8" : NULL;
}

int hm_npy_header(hm_dtype dt, int ndim, const int64_t *shape, char *hdr, size_t *len) {
    const char *descr = write_descr(dt);
    if (!descr || ndim < 0 || ndim > HM_MAX_DIMS || (ndim && !shape))
        return hm_err(HM_E_ARG, "npy: unsupported dtype or rank %d", ndim);
    /* .npy v1.0 header, padded with spaces so the data starts 64-aligned. */
    int k = snprintf(hdr + 10, HM_NPY_HEADER_MAX - 10, "{'descr': '%s', 'fortran_order': False, 'shape': (", descr);
    for (int d = 0; d < ndim; d++)
        k += snprintf(hdr + 10 + k, HM_NPY_HEADER_MAX - 10 - (size_t)k, "%lld%s", (long long)shape[d],
                      ndim == 1 ? "," : d + 1 < ndim ? ", " : "");
    k += snprintf(hdr + 10 + k, HM_NPY_HEADER_MAX - 10 - (size_t)k, "), }");
    size_t total = ((size_t)10 + (size_t)k + 1 + 63) / 64 * 64;
    memcpy(hdr, "\x93NUMPY\x01\x00", 8);
    put16((uint8_t *)hdr + 8, (unsigned)(total - 10));
    memset(hdr + 10 + k, ' ', total - 10 - (size_t)k - 1);
    hdr[total - 1] = '\n';
    *len = total;
    return HM_OK;
}

int hm_npz_write_add(hm_npz_writer *w, const char *name, hm_dtype dt,
                     int ndim, const int64_t *shape, const void *data) {
    if (!w) return hm_err(HM_E_ARG, "npz: NULL writer");
    if (w->rc) return hm_err(w->rc, "npz '%s': writer already failed", w->path);
    const char *descr = write_descr(dt);
    size_t nlen = name ? strlen(name) : 0;
    if (!descr || !name || !nlen || nlen > 1000 || ndim < 0 || ndim > HM_MAX_DIMS || (ndim && !shape))
        return writer_fail(w, hm_err(HM_E_ARG, "npz '%s': bad array '%s' (dtype, name or rank)", w->path,
                                     name ? name : "(null)"));
    for (size_t i = 0; i < w->n; i++)
        if (strlen(w->m[i].name) == nlen + 4 && !memcmp(w->m[i].name, name, nlen))
            return writer_fail(w, hm_err(HM_E_ARG, "npz '%s': duplicate array '%s'", w->path, name));
    uint64_t numel = 1, bytes;
    for (int d = 0; d < ndim; d++)
        if (shape[d] < 0 || __builtin_mul_overflow(numel, (uint64_t)shape[d], &numel))
            return writer_fail(w, hm_err(HM_E_ARG, "npz '%s': bad shape for '%s'", w->path, name));
    if (__builtin_mul_overflow(numel, (uint64_t)hm_dtype_size(dt), &bytes) || (bytes && !data))
        return writer_fail(w, hm_err(HM_E_ARG, "npz '%s': bad data for '%s'", w->path, name));

    char hdr[HM_NPY_HEADER_MAX];
    size_t total;
    hm_npy_header(dt, ndim, shape, hdr, &total);

    uint64_t size = total + bytes;
    if (w->off + 30 + nlen + 4 + size >= 0xFFFFFFFFull)
        return writer_fail(w, hm_err(HM_E_UNSUPPORTED, "npz '%s': archives over 4 GiB are not supported", w->path));
    uLong crc = crc32(0L, (const Bytef *)hdr, (uInt)total);
    for (uint64_t done = 0; done < bytes;) {
        uInt c = bytes - done > (1u << 30) ? (1u << 30) : (uInt)(bytes - done);
        crc = crc32(crc, (const Bytef *)data + done, c);
        done += c;
    }
    int rc = HM_OK;
    if (w->n == w->cap) {
        size_t nc = w->cap ? w->cap * 2 : 16;
        npz_member *p = realloc(w->m, nc * sizeof *p);
        if (!p) return writer_fail(w, hm_err(HM_E_NOMEM, "npz: out of memory"));
        w->m = p;
        w->cap = nc;
    }
    npz_member *m = &w->m[w->n];
    if (!(m->name = malloc(nlen + 5))) return writer_fail(w, hm_err(HM_E_NOMEM, "npz: out of memory"));
    memcpy(m->name, name, nlen);
    memcpy(m->name + nlen, ".npy", 5);
    m->crc = (uint32_t)crc;
    m->size = (uint32_t)size;
    m->off = (uint32_t)w->off;
    w->n++;
    uint8_t lh[30] = {0};
    put32(lh, 0x04034b50);
    put16(lh + 4, 20);
    put16(lh + 6, name_flags(m->name));
    put16(lh + 12, 0x21); /* 1980-01-01: fixed so output is reproducible */
    put32(lh + 14, m->crc);
    put32(lh + 18, m->size);
    put32(lh + 22, m->size);
    put16(lh + 26, (unsigned)(nlen + 4));
    if ((rc = wr(w, lh, sizeof lh)) || (rc = wr(w, m->name, nlen + 4)) || (rc = wr(w, hdr, total)) ||
        (rc = wr(w, data, (size_t)bytes)))
        return rc;
    return HM_OK;
}

static void writer_free(hm_npz_writer *w) {
    for (size_t i = 0; i < w->n; i++) free(w->m[i].name);
    free(w->m);
    free(w->path);
    free(w);
}

int hm_npz_write_finish(hm_npz_writer *w) {
    if (!w) return hm_err(HM_E_ARG, "npz: NULL writer");
    int rc = w->rc ? hm_err(w->rc, "npz '%s': writer already failed", w->path) : HM_OK;
    uint64_t cd_off = w->off;
    if (!rc && w->n > 0xFFFF) rc = writer_fail(w, hm_err(HM_E_UNSUPPORTED, "npz '%s': too many arrays", w->path));
    for (size_t i = 0; !rc && i < w->n; i++) {
        const npz_member *m = &w->m[i];
        size_t nlen = strlen(m->name);
        uint8_t ch[46] = {0};
        put32(ch, 0x02014b50);
        put16(ch + 4, 20);
        put16(ch + 6, 20);
        put16(ch + 8, name_flags(m->name));
        put16(ch + 14, 0x21);
        put32(ch + 16, m->crc);
        put32(ch + 20, m->size);
        put32(ch + 24, m->size);
        put16(ch + 28, (unsigned)nlen);
        put32(ch + 42, m->off);
        if (!(rc = wr(w, ch, sizeof ch))) rc = wr(w, m->name, nlen);
    }
    if (!rc && w->off >= 0xFFFFFFFFull)
        rc = writer_fail(w, hm_err(HM_E_UNSUPPORTED, "npz '%s': archives over 4 GiB are not supported", w->path));
    if (!rc) {
        uint8_t e[22] = {0};
        put32(e, 0x06054b50);
        put16(e + 8, (unsigned)w->n);
        put16(e + 10, (unsigned)w->n);
        put32(e + 12, (uint32_t)(w->off - cd_off));
        put32(e + 16, (uint32_t)cd_off);
        rc = wr(w, e, sizeof e);
    }
    if (!rc) {
        rc = hm_outfile_commit(&w->o); /* removes the temp file on failure */
        w->open = 0;
    }
    writer_fail(w, rc);
    writer_free(w);
    return rc;
}

void hm_npz_write_abort(hm_npz_writer *w) {
    if (!w) return;
    writer_fail(w, HM_OK);
    writer_free(w);
}
