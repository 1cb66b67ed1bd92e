/* exif.c - a photo's camera tags from its EXIF block (exif.h).
 *
 * The block is a TIFF structure: a byte-order mark ("II" little endian,
 * "MM" big endian), 42, the offset of IFD0; an IFD is a 16-bit count of
 * 12-byte entries (tag, type, count, value or offset of the value when it
 * is over 4 bytes). IFD0's tag 0x8769 holds the offset of the Exif IFD,
 * where the camera tags are. Offsets are from the start of the TIFF
 * header. Every read below checks its bytes lie inside the block.
 */
#include <math.h>
#include <string.h>

#include "format/exif.h"

typedef struct {
    const uint8_t *p;
    size_t n;
    int le;
} tiff;

static uint32_t rd16(const tiff *t, size_t at) {
    const uint8_t *q = t->p + at;
    return t->le ? (uint32_t)q[0] | (uint32_t)q[1] << 8 : (uint32_t)q[0] << 8 | q[1];
}

static uint32_t rd32(const tiff *t, size_t at) {
    const uint8_t *q = t->p + at;
    return t->le ? (uint32_t)q[0] | (uint32_t)q[1] << 8 | (uint32_t)q[2] << 16 | (uint32_t)q[3] << 24
                 : (uint32_t)q[0] << 24 | (uint32_t)q[1] << 16 | (uint32_t)q[2] << 8 | q[3];
}

/* [at, at + len) inside the block. */
static int inside(const tiff *t, size_t at, size_t len) { return at <= t->n && len <= t->n - at; }

/* An entry's single numeric value (SHORT, LONG or RATIONAL, count >= 1:
 * the first), as a double; 0 for another type, a value outside the block
 * or a zero denominator. */
static double entry_value(const tiff *t, size_t e) {
    const uint32_t type = rd16(t, e + 2), count = rd32(t, e + 4);
    if (count < 1) return 0;
    if (type == 3) return rd16(t, e + 8);  /* SHORT: inline */
    if (type == 4) return rd32(t, e + 8);  /* LONG: inline */
    if (type == 5) {                       /* RATIONAL: two LONGs at the offset */
        const size_t at = rd32(t, e + 8);
        if (!inside(t, at, 8)) return 0;
        const uint32_t num = rd32(t, at), den = rd32(t, at + 4);
        return den ? (double)num / den : 0;
    }
    return 0;
}

/* entry_value as a 32-bit count (pixels, a unit code); `bad` when it is
 * not a whole number in 0 .. 2^32 - 1 (a RATIONAL can be anything). */
static uint32_t entry_count(const tiff *t, size_t e, uint32_t bad) {
    const double v = entry_value(t, e);
    return v >= 0 && v <= 4294967295.0 && v == (double)(uint32_t)v ? (uint32_t)v : bad;
}

/* The IFD at offset `at`: the Exif IFD pointer (IFD0) into *exif_ifd, the
 * camera tags (Exif IFD) into out. */
static void read_ifd(const tiff *t, size_t at, hm_exif *out, size_t *exif_ifd) {
    if (!inside(t, at, 2)) return;
    size_t count = rd16(t, at);
    if (count > HM_EXIF_MAX_ENTRIES) count = HM_EXIF_MAX_ENTRIES;
    for (size_t i = 0; i < count; i++) {
        const size_t e = at + 2 + 12 * i;
        if (!inside(t, e, 12)) return;  /* truncated: the entries before it stand */
        const uint32_t tag = rd16(t, e);
        switch (tag) {
        case 0x8769:
            if (exif_ifd && (rd16(t, e + 2) == 4 || rd16(t, e + 2) == 13)) *exif_ifd = rd32(t, e + 8);
            break;
        case 0x920A: out->focal_mm = entry_value(t, e); break;
        case 0xA405: out->focal_35mm = entry_value(t, e); break;
        case 0xA20E: out->plane_xres = entry_value(t, e); break;
        case 0xA20F: out->plane_yres = entry_value(t, e); break;
        case 0xA210: {
            const uint32_t u = entry_count(t, e, 0);
            out->plane_unit = u >= 1 && u <= 5 ? (int)u : -1;  /* -1: present, but no unit */
            break;
        }
        case 0xA002: out->pixel_x = entry_count(t, e, 0); break;
        case 0xA003: out->pixel_y = entry_count(t, e, 0); break;
        default: break;
        }
    }
}

/* The tags of a TIFF-structured block; 1 when its header is one. */
static int read_tiff(const uint8_t *p, size_t n, hm_exif *out) {
    tiff t = {p, n, 0};
    if (n < 8) return 0;
    if (p[0] == 'I' && p[1] == 'I') t.le = 1;
    else if (!(p[0] == 'M' && p[1] == 'M')) return 0;
    if (rd16(&t, 2) != 42) return 0;
    size_t exif_ifd = 0;
    hm_exif ifd0;  /* IFD0's camera tags are not standard: only the pointer is taken from it */
    memset(&ifd0, 0, sizeof ifd0);
    read_ifd(&t, rd32(&t, 4), &ifd0, &exif_ifd);
    if (exif_ifd) read_ifd(&t, exif_ifd, out, NULL);
    return 1;
}

/* JPEG: the markers from SOI up to the first scan, each segment's length
 * checked; the first APP1 holding "Exif\0\0" is the block. */
static int find_jpeg(const uint8_t *p, size_t n, hm_exif *out) {
    size_t at = 2;
    while (at + 4 <= n) {
        if (p[at] != 0xFF) return 0;
        const uint8_t m = p[at + 1];
        if (m == 0xFF) {  /* fill byte */
            at++;
            continue;
        }
        if (m == 0xD9 || m == 0xDA) return 0;  /* EOI, SOS: no EXIF before the image data */
        if (m == 0x01 || (m >= 0xD0 && m <= 0xD7)) {  /* no length */
            at += 2;
            continue;
        }
        const size_t len = (size_t)p[at + 2] << 8 | p[at + 3];
        if (len < 2 || len > n - at - 2) return 0;
        const uint8_t *seg = p + at + 4;
        const size_t sn = len - 2;
        if (m == 0xE1 && sn >= 6 && !memcmp(seg, "Exif\0\0", 6)) return read_tiff(seg + 6, sn - 6, out);
        at += 2 + len;
    }
    return 0;
}

/* PNG: the chunks after the signature up to IEND; the eXIf chunk's data is
 * the block. */
static int find_png(const uint8_t *p, size_t n, hm_exif *out) {
    size_t at = 8;
    while (at + 12 <= n) {
        const size_t len = (size_t)p[at] << 24 | (size_t)p[at + 1] << 16 | (size_t)p[at + 2] << 8 | p[at + 3];
        const uint8_t *type = p + at + 4;
        if (len > n - at - 12) return 0;
        if (!memcmp(type, "eXIf", 4)) return read_tiff(p + at + 8, len, out);
        if (!memcmp(type, "IEND", 4)) return 0;
        at += 12 + len;
    }
    return 0;
}

int hm_exif_read(const uint8_t *buf, size_t len, hm_exif *out) {
    memset(out, 0, sizeof *out);
    if (!buf) return 0;
    if (len > HM_EXIF_SCAN) len = HM_EXIF_SCAN;
    int found = 0;
    if (len >= 4 && buf[0] == 0xFF && buf[1] == 0xD8) found = find_jpeg(buf, len, out);
    else if (len >= 8 && !memcmp(buf, "\x89PNG\r\n\x1a\n", 8)) found = find_png(buf, len, out);
    if (found && !out->plane_unit) out->plane_unit = 2;  /* the standard's default: inches */
    return found;
}

int hm_exif_focal_px(const hm_exif *e, int W, int H, double *f) {
    if (W < 1 || H < 1) return 0;
    const double longer = W > H ? W : H, diag = sqrt((double)W * W + (double)H * H);
    double v = 0;
    if (e->focal_35mm > 0) {
        v = e->focal_35mm / HM_EXIF_35MM_DIAG * diag;
    } else if (e->focal_mm > 0 && e->plane_xres > 0 && e->pixel_x > 0 && e->pixel_y > 0) {
        const double unit_mm = e->plane_unit == 2 ? 25.4 : e->plane_unit == 3 ? 10.0 : e->plane_unit == 4 ? 1.0
                               : e->plane_unit == 5 ? 1e-3 : 0;
        const double a = e->pixel_x > e->pixel_y ? e->pixel_x : e->pixel_y;
        const double b = e->pixel_x > e->pixel_y ? e->pixel_y : e->pixel_x;
        const double shorter = W > H ? H : W;
        /* the tags describe this picture rescaled, not another crop of it */
        if (unit_mm > 0 && fabs((b / a) / (shorter / longer) - 1.0) <= 0.01)
            v = e->focal_mm * (e->plane_xres / unit_mm) * (longer / a);
    }
    if (!(v >= 0.05 * longer && v <= 100.0 * longer)) return 0;
    *f = v;
    return 1;
}
