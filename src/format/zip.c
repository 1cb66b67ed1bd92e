/* zip.c - zip index: EOCD, ZIP64 locator/record, central directory, local
 * headers. All multi-byte fields are little-endian. */
#include "format/zip.h"
#include "core/util.h"

#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

enum {
    SIG_LOCAL = 0x04034b50, SIG_CENTRAL = 0x02014b50, SIG_EOCD = 0x06054b50,
    SIG_EOCD64 = 0x06064b50, SIG_LOC64 = 0x07064b50,
    LOCAL_LEN = 30, CENTRAL_LEN = 46, EOCD_LEN = 22, EOCD64_LEN = 56, LOC64_LEN = 20,
};
#define MAX_ENTRIES (1 << 24)
/* A member name made safe for a one-line error message. */
#define PNAME(e) hm_zip_printable((char[96]){0}, 96, (e)->name, (e)->name_len)

static uint16_t rd16(const uint8_t *p) { return (uint16_t)(p[0] | p[1] << 8); }
static uint32_t rd32(const uint8_t *p) {
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}
static uint64_t rd64(const uint8_t *p) { return rd32(p) | (uint64_t)rd32(p + 4) << 32; }

/* True if [off, off+n) lies inside [0, lim). Written to avoid overflow. */
static int fits(uint64_t off, uint64_t n, uint64_t lim) { return off <= lim && n <= lim - off; }

/* The EOCD record: the last signature whose comment length reaches exactly
 * to the end, so a stray signature inside member data is not taken. */
static int find_eocd(const hm_zip *z, size_t *pos) {
    if (z->len < EOCD_LEN)
        return hm_err(HM_E_FORMAT, "%s: not a zip file (%zu bytes, no end of central directory)", z->what, z->len);
    size_t lo = z->len - EOCD_LEN > 65535 ? z->len - EOCD_LEN - 65535 : 0;
    for (size_t p = z->len - EOCD_LEN + 1; p-- > lo;) {
        if (rd32(z->buf + p) == SIG_EOCD && p + EOCD_LEN + rd16(z->buf + p + 20) == z->len) {
            *pos = p;
            return HM_OK;
        }
    }
    return hm_err(HM_E_FORMAT, "%s: not a zip file or truncated (no end of central directory in the last %zu bytes)",
                  z->what, z->len - lo);
}

/* Central directory location and entry count, from the EOCD or, when it is
 * present, the ZIP64 end record that the locator points to. */
static int find_cd(const hm_zip *z, uint64_t *cd_off, uint64_t *cd_size, uint64_t *count) {
    size_t eocd = 0;
    int rc = find_eocd(z, &eocd);
    if (rc) return rc;
    const uint8_t *e = z->buf + eocd;
    uint64_t end = eocd; /* the directory must end before its end record */
    *count = rd16(e + 10);
    *cd_size = rd32(e + 12);
    *cd_off = rd32(e + 16);
    uint64_t disk = rd16(e + 4), cd_disk = rd16(e + 6);
    int wants64 = *count == 0xFFFF || *cd_size == 0xFFFFFFFFu || *cd_off == 0xFFFFFFFFu;
    if (eocd >= LOC64_LEN && rd32(e - LOC64_LEN) == SIG_LOC64) {
        uint64_t r = rd64(e - LOC64_LEN + 8);
        if (!fits(r, EOCD64_LEN, eocd - LOC64_LEN) || rd32(z->buf + r) != SIG_EOCD64)
            return hm_err(HM_E_FORMAT, "%s: bad zip64 end of central directory offset %llu (locator at byte %zu)",
                          z->what, (unsigned long long)r, eocd - LOC64_LEN);
        const uint8_t *q = z->buf + r;
        *count = rd64(q + 32);
        *cd_size = rd64(q + 40);
        *cd_off = rd64(q + 48);
        disk = rd32(q + 16);
        cd_disk = rd32(q + 20);
        end = r;
    } else if (wants64) {
        return hm_err(HM_E_FORMAT, "%s: zip end record at byte %zu needs a zip64 locator, none found", z->what, eocd);
    }
    if (disk != 0 || cd_disk != 0)
        return hm_err(HM_E_FORMAT, "%s: multi-disk zip archives are not supported (end record at byte %zu)", z->what, eocd);
    if (!fits(*cd_off, *cd_size, end))
        return hm_err(HM_E_FORMAT, "%s: truncated zip central directory at byte %llu (%llu bytes declared, archive end record at byte %llu)",
                      z->what, (unsigned long long)*cd_off, (unsigned long long)*cd_size, (unsigned long long)end);
    if (*count > *cd_size / CENTRAL_LEN || *count > MAX_ENTRIES)
        return hm_err(HM_E_FORMAT, "%s: zip declares %llu entries, more than its central directory at byte %llu can hold",
                      z->what, (unsigned long long)*count, (unsigned long long)*cd_off);
    return HM_OK;
}

/* Replace saturated 32-bit fields with the values of the zip64 extra field
 * (id 1), which lists only the saturated ones, in this fixed order. */
static int apply_zip64(const hm_zip *z, const uint8_t *x, size_t xlen, uint64_t at, hm_zip_entry *e,
                       uint64_t *hdr_off) {
    int need_u = e->usize == 0xFFFFFFFFu, need_c = e->csize == 0xFFFFFFFFu, need_o = *hdr_off == 0xFFFFFFFFu;
    for (size_t q = 0; q + 4 <= xlen;) {
        unsigned id = rd16(x + q), sz = rd16(x + q + 2);
        if (sz > xlen - q - 4)
            return hm_err(HM_E_FORMAT, "%s: zip extra field overruns its entry at byte %llu", z->what,
                          (unsigned long long)(at + q));
        if (id == 1) {
            const uint8_t *f = x + q + 4;
            size_t left = sz;
            uint64_t *dst[3] = {need_u ? &e->usize : NULL, need_c ? &e->csize : NULL, need_o ? hdr_off : NULL};
            for (int k = 0; k < 3; k++) {
                if (!dst[k]) continue;
                if (left < 8)
                    return hm_err(HM_E_FORMAT, "%s: zip64 extra field too short at byte %llu", z->what,
                                  (unsigned long long)(at + q));
                *dst[k] = rd64(f);
                f += 8;
                left -= 8;
            }
            return HM_OK;
        }
        q += 4 + (size_t)sz;
    }
    if (need_u || need_c || need_o)
        return hm_err(HM_E_FORMAT, "%s: zip entry needs a zip64 extra field, none at byte %llu", z->what,
                      (unsigned long long)at);
    return HM_OK;
}

/* qsort has no context argument; the index being sorted, per thread. */
static _Thread_local const hm_zip *tl_zip;

static int cmp_name(const void *a, const void *b) {
    const hm_zip_entry *x = &tl_zip->ent[*(const int *)a], *y = &tl_zip->ent[*(const int *)b];
    size_t n = x->name_len < y->name_len ? x->name_len : y->name_len;
    int c = memcmp(x->name, y->name, n);
    if (c) return c;
    if (x->name_len != y->name_len) return x->name_len < y->name_len ? -1 : 1;
    return *(const int *)a - *(const int *)b; /* duplicates: first entry first */
}

/* Parse every central directory entry and its local header. */
static int read_entries(hm_zip *z, uint64_t cd_off, uint64_t cd_size, uint64_t count) {
    uint64_t cd_end = cd_off + cd_size, names_len = 0;
    /* First pass: validate the records and size the name pool. */
    for (uint64_t i = 0, p = cd_off; i < count; i++) {
        if (!fits(p, CENTRAL_LEN, cd_end))
            return hm_err(HM_E_FORMAT, "%s: truncated zip central directory at byte %llu", z->what, (unsigned long long)p);
        const uint8_t *c = z->buf + p;
        if (rd32(c) != SIG_CENTRAL)
            return hm_err(HM_E_FORMAT, "%s: bad zip central directory entry signature at byte %llu", z->what,
                          (unsigned long long)p);
        uint64_t var = (uint64_t)rd16(c + 28) + rd16(c + 30) + rd16(c + 32);
        if (!fits(p + CENTRAL_LEN, var, cd_end))
            return hm_err(HM_E_FORMAT, "%s: truncated zip central directory at byte %llu", z->what, (unsigned long long)p);
        names_len += rd16(c + 28) + 1;
        p += CENTRAL_LEN + var;
    }
    z->ent = calloc(count ? count : 1, sizeof *z->ent);
    z->by_name = malloc((count ? count : 1) * sizeof *z->by_name);
    z->names = malloc(names_len ? names_len : 1);
    if (!z->ent || !z->by_name || !z->names)
        return hm_err(HM_E_NOMEM, "%s: out of memory indexing %llu zip entries", z->what, (unsigned long long)count);
    char *np = z->names;
    for (uint64_t i = 0, p = cd_off; i < count; i++) {
        const uint8_t *c = z->buf + p;
        hm_zip_entry *e = &z->ent[i];
        unsigned nlen = rd16(c + 28), xlen = rd16(c + 30), clen = rd16(c + 32);
        e->flags = rd16(c + 8);
        e->method = rd16(c + 10);
        e->crc = rd32(c + 16);
        e->csize = rd32(c + 20);
        e->usize = rd32(c + 24);
        uint64_t hdr = rd32(c + 42);
        memcpy(np, c + CENTRAL_LEN, nlen);
        np[nlen] = 0;
        e->name = np;
        e->name_len = nlen;
        np += nlen + 1;
        int rc = apply_zip64(z, c + CENTRAL_LEN + nlen, xlen, p + CENTRAL_LEN + nlen, e, &hdr);
        if (rc) return rc;
        /* The local header's extra field can differ from the central one
         * (torch pads it to align data), so the data offset comes from it. */
        if (!fits(hdr, LOCAL_LEN, z->len) || rd32(z->buf + hdr) != SIG_LOCAL)
            return hm_err(HM_E_FORMAT, "%s: bad zip local header offset %llu for '%s'", z->what,
                          (unsigned long long)hdr, PNAME(e));
        const uint8_t *l = z->buf + hdr;
        e->data_off = hdr + LOCAL_LEN + rd16(l + 26) + rd16(l + 28);
        if (!fits(e->data_off, e->csize, z->len))
            return hm_err(HM_E_FORMAT, "%s: zip member '%s' truncated (data at byte %llu, %llu bytes, file has %zu)",
                          z->what, PNAME(e), (unsigned long long)e->data_off, (unsigned long long)e->csize, z->len);
        if (e->method == 0 && e->csize != e->usize)
            return hm_err(HM_E_FORMAT, "%s: stored zip member '%s' has different sizes (%llu vs %llu) at byte %llu",
                          z->what, PNAME(e), (unsigned long long)e->csize, (unsigned long long)e->usize,
                          (unsigned long long)p);
        z->by_name[i] = (int)i;
        p += CENTRAL_LEN + nlen + xlen + clen;
    }
    z->n = (int)count;
    tl_zip = z;
    qsort(z->by_name, count, sizeof *z->by_name, cmp_name);
    return HM_OK;
}

int hm_zip_open(const void *buf, size_t len, const char *what, hm_zip *z) {
    memset(z, 0, sizeof *z);
    z->buf = buf;
    z->len = len;
    z->what = what ? what : "zip";
    if (!buf && len) return hm_err(HM_E_ARG, "%s: NULL buffer", z->what);
    uint64_t cd_off, cd_size, count;
    int rc = find_cd(z, &cd_off, &cd_size, &count);
    if (!rc) rc = read_entries(z, cd_off, cd_size, count);
    if (rc) hm_zip_close(z);
    return rc;
}

void hm_zip_close(hm_zip *z) {
    if (!z) return;
    free(z->ent);
    free(z->by_name);
    free(z->names);
    z->ent = NULL;
    z->by_name = NULL;
    z->names = NULL;
    z->n = 0;
}

const char *hm_zip_printable(char *out, size_t out_size, const char *s, size_t n) {
    if (!out_size) return out;
    size_t k = 0;
    for (; k < n && k + 1 < out_size; k++) out[k] = (s[k] >= 0x20 && s[k] < 0x7f) ? s[k] : '?';
    if (k < n && out_size >= 4) memcpy(out + out_size - 4, "...", 3), k = out_size - 1;
    out[k] = 0;
    return out;
}

int hm_zip_find(const hm_zip *z, const char *name) {
    size_t len = strlen(name);
    int lo = 0, hi = z->n - 1;
    while (lo <= hi) {
        int mid = lo + (hi - lo) / 2;
        const hm_zip_entry *e = &z->ent[z->by_name[mid]];
        size_t n = e->name_len < len ? e->name_len : len;
        int c = memcmp(e->name, name, n);
        if (!c && e->name_len != len) c = e->name_len < len ? -1 : 1;
        if (!c) {
            while (mid > 0 && z->ent[z->by_name[mid - 1]].name_len == len &&
                   !memcmp(z->ent[z->by_name[mid - 1]].name, name, len))
                mid--; /* first of any duplicates */
            return z->by_name[mid];
        }
        if (c < 0) lo = mid + 1;
        else hi = mid - 1;
    }
    return -1;
}

/* zlib's length arguments are 32-bit; feed it in slices. */
static uint32_t crc_of(const uint8_t *p, uint64_t n) {
    uLong c = crc32(0L, Z_NULL, 0);
    while (n) {
        uInt k = n > (1u << 30) ? (1u << 30) : (uInt)n;
        c = crc32(c, p, k);
        p += k;
        n -= k;
    }
    return (uint32_t)c;
}

static int inflate_member(const hm_zip *z, const hm_zip_entry *e, uint8_t *out) {
    z_stream s;
    memset(&s, 0, sizeof s);
    if (inflateInit2(&s, -MAX_WBITS) != Z_OK)
        return hm_err(HM_E_NOMEM, "%s: cannot initialise zlib for '%s'", z->what, PNAME(e));
    const uint8_t *in = z->buf + e->data_off;
    uint64_t in_left = e->csize, out_left = e->usize;
    int zr = Z_OK;
    s.next_out = out;
    while (zr == Z_OK) {
        if (s.avail_in == 0 && in_left) {
            s.next_in = (Bytef *)in;
            s.avail_in = in_left > UINT_MAX ? UINT_MAX : (uInt)in_left;
            in += s.avail_in;
            in_left -= s.avail_in;
        }
        if (s.avail_out == 0 && out_left) {
            s.avail_out = out_left > UINT_MAX ? UINT_MAX : (uInt)out_left;
            out_left -= s.avail_out;
        }
        uInt before_in = s.avail_in, before_out = s.avail_out;
        zr = inflate(&s, Z_NO_FLUSH);
        if (zr == Z_BUF_ERROR && (s.avail_in != before_in || s.avail_out != before_out)) zr = Z_OK;
        if (zr == Z_OK && s.avail_in == before_in && s.avail_out == before_out) zr = Z_BUF_ERROR;
    }
    uint64_t produced = s.total_out;
    inflateEnd(&s);
    if (zr != Z_STREAM_END)
        return hm_err(HM_E_FORMAT, "%s: corrupt deflate data in zip member '%s' at byte %llu", z->what, PNAME(e),
                      (unsigned long long)e->data_off);
    if (produced != e->usize)
        return hm_err(HM_E_FORMAT, "%s: zip member '%s' inflates to %llu bytes, %llu declared", z->what, PNAME(e),
                      (unsigned long long)produced, (unsigned long long)e->usize);
    return HM_OK;
}

int hm_zip_read(const hm_zip *z, int i, uint64_t cap, int check_crc,
                const void **data, size_t *len, void **owned) {
    *data = NULL;
    *len = 0;
    *owned = NULL;
    if (i < 0 || i >= z->n) return hm_err(HM_E_ARG, "%s: zip member index %d out of range", z->what, i);
    const hm_zip_entry *e = &z->ent[i];
    if (e->flags & 1) return hm_err(HM_E_UNSUPPORTED, "%s: zip member '%s' is encrypted", z->what, PNAME(e));
    if (e->usize > cap || e->usize > SIZE_MAX - 64)
        return hm_err(HM_E_FORMAT, "%s: zip member '%s' is %llu bytes, over the %llu byte limit", z->what, PNAME(e),
                      (unsigned long long)e->usize, (unsigned long long)cap);
    if (e->method == 0) {
        const uint8_t *p = z->buf + e->data_off;
        if (check_crc && crc_of(p, e->usize) != e->crc)
            return hm_err(HM_E_FORMAT, "%s: CRC mismatch in zip member '%s'", z->what, PNAME(e));
        *data = p;
        *len = (size_t)e->usize;
        return HM_OK;
    }
    if (e->method != 8)
        return hm_err(HM_E_UNSUPPORTED, "%s: zip member '%s' uses compression method %d (only stored and deflate)",
                      z->what, PNAME(e), e->method);
    /* Deflate expands at most ~1032:1: a larger declared size is a lie that
     * would only make us allocate memory the data can never fill. */
    if (e->usize > e->csize * 1032 + 1024)
        return hm_err(HM_E_FORMAT, "%s: zip member '%s' declares %llu bytes from %llu compressed (impossible ratio)",
                      z->what, PNAME(e), (unsigned long long)e->usize, (unsigned long long)e->csize);
    uint8_t *out = hm_alloc((size_t)e->usize);
    if (!out) return HM_E_NOMEM;
    int rc = inflate_member(z, e, out);
    if (!rc && crc_of(out, e->usize) != e->crc)
        rc = hm_err(HM_E_FORMAT, "%s: CRC mismatch in zip member '%s'", z->what, PNAME(e));
    if (rc) {
        hm_free(out);
        return rc;
    }
    *data = out;
    *len = (size_t)e->usize;
    *owned = out;
    return HM_OK;
}
