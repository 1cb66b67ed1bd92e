/* image.c - JPEG (libjpeg-turbo) and PNG (libpng) to 8-bit RGB; PNG writing.
 *
 * Both libraries report fatal errors through callbacks that must not return;
 * each decoder installs one that records the message and longjmps back, so a
 * corrupt file yields an error code, never an exit() or a crash. Everything
 * allocated after setjmp is reached through volatile pointers so the error
 * path can free it.
 */
#include "format/image.h"
#include "core/fileio.h"
#include "format/image_ext.h"

#include <setjmp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include <jpeglib.h>
#include <jerror.h>
#include <png.h>

#include "core/util.h"

#define HM_IMAGE_MAX_FILE_BYTES (1LL << 30)

void hm_image_free(hm_image *img) {
    if (!img) return;
    hm_free(img->rgb);
    img->rgb = NULL;
    img->w = img->h = 0;
}

/* ------------------------------------------------------------------------ */
/* EXIF orientation                                                          */
/* ------------------------------------------------------------------------ */

static unsigned rd16(const uint8_t *p, int le) { return le ? p[0] | p[1] << 8 : p[0] << 8 | p[1]; }
static uint32_t rd32(const uint8_t *p, int le) {
    return le ? (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24
              : (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | (uint32_t)p[3];
}

/* Orientation tag (0x0112) of IFD0 in a TIFF-structured EXIF block; 1 when
 * absent, malformed or out of range (a bad EXIF block never fails a decode,
 * as with OpenCV and Pillow). */
static int exif_orientation(const uint8_t *t, size_t n) {
    if (n < 8) return 1;
    int le;
    if (t[0] == 'I' && t[1] == 'I') le = 1;
    else if (t[0] == 'M' && t[1] == 'M') le = 0;
    else return 1;
    if (rd16(t + 2, le) != 42) return 1;
    uint32_t ifd = rd32(t + 4, le);
    if (ifd > n - 2) return 1;
    unsigned count = rd16(t + ifd, le);
    for (unsigned i = 0; i < count; i++) {
        size_t e = (size_t)ifd + 2 + (size_t)i * 12;
        if (e + 12 > n) return 1;
        if (rd16(t + e, le) != 0x0112) continue;
        unsigned type = rd16(t + e + 2, le);
        unsigned v;
        if (type == 3) v = rd16(t + e + 8, le);        /* SHORT, as the standard says */
        else if (type == 4) v = rd32(t + e + 8, le);   /* LONG, seen in the wild */
        else return 1;
        return v >= 1 && v <= 8 ? (int)v : 1;
    }
    return 1;
}

/* Turn the stored image into the displayed one for EXIF orientation o, as
 * Pillow's ImageOps.exif_transpose and OpenCV's imread do: 2 mirror, 3 rotate
 * 180, 4 flip, 5 transpose, 6 rotate 90 clockwise, 7 transverse, 8 rotate 90
 * counter-clockwise. */
static int apply_orientation(hm_image *im, int o) {
    if (o < 2 || o > 8) return HM_OK;
    const int w = im->w, h = im->h;
    const int ow = o >= 5 ? h : w, oh = o >= 5 ? w : h;
    uint8_t *dst = hm_alloc((size_t)ow * oh * 3);
    if (!dst) return HM_E_NOMEM;
    for (int y = 0; y < oh; y++) {
        uint8_t *d = dst + (size_t)y * ow * 3;
        for (int x = 0; x < ow; x++, d += 3) {
            int sx, sy;
            switch (o) {
            case 2: sx = w - 1 - x; sy = y; break;
            case 3: sx = w - 1 - x; sy = h - 1 - y; break;
            case 4: sx = x; sy = h - 1 - y; break;
            case 5: sx = y; sy = x; break;
            case 6: sx = y; sy = h - 1 - x; break;
            case 7: sx = w - 1 - y; sy = h - 1 - x; break;
            default: sx = w - 1 - y; sy = x; break; /* 8 */
            }
            memcpy(d, im->rgb + ((size_t)sy * w + sx) * 3, 3);
        }
    }
    hm_free(im->rgb);
    im->rgb = dst;
    im->w = ow;
    im->h = oh;
    return HM_OK;
}

/* ------------------------------------------------------------------------ */
/* JPEG                                                                      */
/* ------------------------------------------------------------------------ */

typedef struct {
    struct jpeg_error_mgr pub;
    jmp_buf jb;
    char msg[JMSG_LENGTH_MAX + 128];
    int limit; /* msg is a limit of ours, not libjpeg's */
} jpg_err;

/* Decoding-time limits. A progressive JPEG's scans each make a pass over
 * the coefficients of their components, and a scan can be 10 bytes with no
 * data (libjpeg-turbo warns, fills nothing and goes on), so a 1 MB file
 * could ask for 100,000 passes over a 4 MP image (44 s). libjpeg-turbo's
 * documentation (djpeg -maxscans, TJPARAM_SCANLIMIT) recommends a scan
 * limit through the progress monitor against exactly this. Encoders write
 * about 10 scans (libjpeg's and mozjpeg's progressions, Pillow's,
 * Photoshop's), 5.3 passes over the blocks for 4:2:0 colour: 256 scans and
 * 64 passes are far above any real file and bound the work of a hostile
 * one to a small multiple of an ordinary decode of its pixel count. */
#define HM_JPEG_MAX_SCANS 256
#define HM_JPEG_MAX_PASSES 64

typedef struct {
    struct jpeg_progress_mgr pub;
    int scan;                     /* the last scan counted */
    unsigned long long blocks;    /* of every component of every scan so far */
    unsigned long long budget;    /* HM_JPEG_MAX_PASSES x the image's blocks */
} jpg_progress;

static void jpg_error_exit(j_common_ptr c) {
    jpg_err *e = (jpg_err *)c->err;
    c->err->format_message(c, e->msg);
    longjmp(e->jb, 1);
}

/* Called by libjpeg before each step of absorbing a multi-scan file (a
 * marker segment, or one row of blocks of the current scan) and per output
 * row: a new scan is counted, and refused past the limits, before any of
 * its data is decoded. */
static void jpg_progress_monitor(j_common_ptr c) {
    j_decompress_ptr d = (j_decompress_ptr)c;
    jpg_progress *p = (jpg_progress *)c->progress;
    if (d->input_scan_number == p->scan) return;
    p->scan = d->input_scan_number;
    jpg_err *e = (jpg_err *)c->err;
    if (p->scan > HM_JPEG_MAX_SCANS) {
        snprintf(e->msg, sizeof e->msg, "JPEG has more than %d scans (the limit; a progressive JPEG has about 10)",
                 HM_JPEG_MAX_SCANS);
        e->limit = 1;
        longjmp(e->jb, 1);
    }
    for (int i = 0; i < d->comps_in_scan && i < MAX_COMPS_IN_SCAN; i++)
        p->blocks += (unsigned long long)d->cur_comp_info[i]->width_in_blocks * d->cur_comp_info[i]->height_in_blocks;
    if (p->blocks > p->budget) {
        snprintf(e->msg, sizeof e->msg, "JPEG's %d scans decode more than %d times the image's blocks (the limit; "
                 "a progressive JPEG decodes about 5)", p->scan, HM_JPEG_MAX_PASSES);
        e->limit = 1;
        longjmp(e->jb, 1);
    }
}

/* libjpeg answers a missing end of data with a warning, an invented EOI and
 * grey pixels; here that is a truncated file and an error. Other warnings
 * (extraneous bytes between markers, ...) are tolerated, as OpenCV and
 * Pillow tolerate them. */
static void jpg_emit_message(j_common_ptr c, int level) {
    if (level < 0) {
        if (c->err->msg_code == JWRN_JPEG_EOF) jpg_error_exit(c);
        c->err->num_warnings++;
    }
}

/* OpenCV's CMYK -> BGR (icvCvt_CMYK2BGR_8u_C4C3R), written out as RGB; the
 * samples are used as libjpeg delivers them (Adobe files inverted). */
static void cmyk_row_to_rgb(const uint8_t *s, uint8_t *d, int w) {
    for (int x = 0; x < w; x++, s += 4, d += 3) {
        int k = s[3];
        d[0] = (uint8_t)(k - ((255 - s[0]) * k >> 8));
        d[1] = (uint8_t)(k - ((255 - s[1]) * k >> 8));
        d[2] = (uint8_t)(k - ((255 - s[2]) * k >> 8));
    }
}

static int decode_jpeg(const uint8_t *buf, size_t len, const char *what, hm_image *out) {
    struct jpeg_decompress_struct ci;
    jpg_err je;
    jpg_progress prog;
    uint8_t *volatile pix = NULL;
    uint8_t *volatile row = NULL;
    volatile int rc_size = HM_OK;
    memset(&ci, 0, sizeof ci);
    ci.err = jpeg_std_error(&je.pub);
    je.pub.error_exit = jpg_error_exit;
    je.pub.emit_message = jpg_emit_message;
    je.msg[0] = 0;
    je.limit = 0;
    if (setjmp(je.jb)) {
        jpeg_destroy_decompress(&ci);
        hm_free(pix);
        free(row);
        if (je.limit) return hm_err(HM_E_UNSUPPORTED, "%s: %s", what, je.msg);
        return hm_err(HM_E_FORMAT, "%s: corrupt or truncated JPEG: %s", what, je.msg);
    }
    jpeg_create_decompress(&ci);
    jpeg_mem_src(&ci, buf, (unsigned long)len);
    jpeg_save_markers(&ci, JPEG_APP0 + 1, 0xFFFF);
    jpeg_read_header(&ci, TRUE);
    rc_size = hm_image_check_size(what, "JPEG", ci.image_width, ci.image_height);
    if (rc_size) {
        jpeg_destroy_decompress(&ci);
        return rc_size;
    }
    const int cmyk = ci.num_components == 4;
    if (ci.num_components != 1 && ci.num_components != 3 && !cmyk) {
        int nc = ci.num_components;
        jpeg_destroy_decompress(&ci);
        return hm_err(HM_E_UNSUPPORTED, "%s: JPEG with %d colour components is not supported", what, nc);
    }
    ci.out_color_space = cmyk ? JCS_CMYK : JCS_RGB;
    /* The header read the first SOS, so the components' sizes are known. */
    memset(&prog, 0, sizeof prog);
    prog.pub.progress_monitor = jpg_progress_monitor;
    for (int i = 0; i < ci.num_components; i++)
        prog.budget += (unsigned long long)ci.comp_info[i].width_in_blocks * ci.comp_info[i].height_in_blocks;
    prog.budget *= HM_JPEG_MAX_PASSES;
    ci.progress = &prog.pub;
    jpeg_start_decompress(&ci);
    const int w = (int)ci.output_width, h = (int)ci.output_height;
    if (ci.output_components != (cmyk ? 4 : 3)) ERREXIT(&ci, JERR_CONVERSION_NOTIMPL);
    pix = hm_alloc((size_t)w * h * 3);
    if (cmyk) row = malloc((size_t)w * 4);
    if (!pix || (cmyk && !row)) {
        jpeg_destroy_decompress(&ci);
        hm_free(pix);
        free(row);
        return hm_err(HM_E_NOMEM, "%s: out of memory for a %dx%d image", what, w, h);
    }
    while (ci.output_scanline < ci.output_height) {
        uint8_t *dst = pix + (size_t)ci.output_scanline * w * 3;
        JSAMPROW rp = cmyk ? row : dst;
        if (jpeg_read_scanlines(&ci, &rp, 1) != 1) ERREXIT(&ci, JERR_INPUT_EOF);
        if (cmyk) cmyk_row_to_rgb(row, dst, w);
    }
    int orient = 1;
    for (jpeg_saved_marker_ptr m = ci.marker_list; m; m = m->next) {
        if (m->marker == JPEG_APP0 + 1 && m->data_length >= 6 && !memcmp(m->data, "Exif\0\0", 6)) {
            orient = exif_orientation(m->data + 6, m->data_length - 6);
            break;
        }
    }
    /* Reads up to EOI: a file cut anywhere after the last scan fails here. */
    jpeg_finish_decompress(&ci);
    jpeg_destroy_decompress(&ci);
    free(row);
    out->w = w;
    out->h = h;
    out->rgb = pix;
    if (apply_orientation(out, orient)) {
        hm_image_free(out);
        return hm_err(HM_E_NOMEM, "%s: out of memory applying the EXIF orientation", what);
    }
    return HM_OK;
}

/* ------------------------------------------------------------------------ */
/* PNG                                                                       */
/* ------------------------------------------------------------------------ */

typedef struct {
    const uint8_t *p;
    size_t len, pos;
    char msg[256];
} png_io;

static void png_error_cb(png_structp png, png_const_charp msg) {
    png_io *io = png_get_error_ptr(png);
    snprintf(io->msg, sizeof io->msg, "%s", msg);
    png_longjmp(png, 1);
}

static void png_warn_cb(png_structp png, png_const_charp msg) {
    (void)png;
    (void)msg;
}

static void png_read_cb(png_structp png, png_bytep dst, size_t n) {
    png_io *io = png_get_io_ptr(png);
    if (n > io->len - io->pos) png_error(png, "file ends early");
    memcpy(dst, io->p + io->pos, n);
    io->pos += n;
}

static int decode_png(const uint8_t *buf, size_t len, const char *what, hm_image *out) {
    png_io io = {buf, len, 0, ""};
    png_structp png = png_create_read_struct(PNG_LIBPNG_VER_STRING, &io, png_error_cb, png_warn_cb);
    png_infop info = png ? png_create_info_struct(png) : NULL;
    uint8_t *volatile pix = NULL;
    png_bytep *volatile rows = NULL;
    if (!info) {
        png_destroy_read_struct(&png, NULL, NULL);
        return hm_err(HM_E_NOMEM, "%s: out of memory starting the PNG decoder", what);
    }
    if (setjmp(png_jmpbuf(png))) {
        png_destroy_read_struct(&png, &info, NULL);
        hm_free(pix);
        free(rows);
        return hm_err(HM_E_FORMAT, "%s: corrupt or truncated PNG: %s", what, io.msg);
    }
    png_set_read_fn(png, &io, png_read_cb);
    png_read_info(png, info);
    png_uint_32 w, h;
    int depth, ctype, interlace;
    png_get_IHDR(png, info, &w, &h, &depth, &ctype, &interlace, NULL, NULL);
    int rc = hm_image_check_size(what, "PNG", w, h);
    if (rc) {
        png_destroy_read_struct(&png, &info, NULL);
        return rc;
    }
    /* The transforms OpenCV's PNG reader asks for with IMREAD_COLOR. */
    if (ctype == PNG_COLOR_TYPE_PALETTE) png_set_palette_to_rgb(png);
    if (!(ctype & PNG_COLOR_MASK_COLOR) && depth < 8) png_set_expand_gray_1_2_4_to_8(png);
    if (depth == 16) png_set_strip_16(png);
    if (ctype & PNG_COLOR_MASK_ALPHA || png_get_valid(png, info, PNG_INFO_tRNS)) png_set_strip_alpha(png);
    if (!(ctype & PNG_COLOR_MASK_COLOR)) png_set_gray_to_rgb(png);
    png_set_interlace_handling(png);
    png_read_update_info(png, info);
    if (png_get_channels(png, info) != 3 || png_get_bit_depth(png, info) != 8 ||
        png_get_rowbytes(png, info) != (size_t)w * 3)
        png_error(png, "unexpected pixel layout after conversion to 8-bit RGB");
    pix = hm_alloc((size_t)w * h * 3);
    rows = malloc(sizeof(png_bytep) * h);
    if (!pix || !rows) {
        snprintf(io.msg, sizeof io.msg, "out of memory for a %ux%u image", (unsigned)w, (unsigned)h);
        png_destroy_read_struct(&png, &info, NULL);
        hm_free(pix);
        free(rows);
        return hm_err(HM_E_NOMEM, "%s: %s", what, io.msg);
    }
    for (png_uint_32 y = 0; y < h; y++) rows[y] = pix + (size_t)y * w * 3;
    png_read_image(png, rows);
    /* Reads the chunks after the image data up to IEND: a cut file fails. */
    png_read_end(png, NULL);
    png_destroy_read_struct(&png, &info, NULL);
    free(rows);
    out->w = (int)w;
    out->h = (int)h;
    out->rgb = pix;
    return HM_OK;
}

typedef struct {
    uint8_t *p;
    size_t len, cap;
    char msg[256];
} png_wbuf;

static void png_write_cb(png_structp png, png_bytep src, size_t n) {
    png_wbuf *b = png_get_io_ptr(png);
    if (n > b->cap - b->len) {
        size_t cap = b->cap ? b->cap : 65536;
        while (cap - b->len < n) cap *= 2;
        uint8_t *q = realloc(b->p, cap);
        if (!q) png_error(png, "out of memory");
        b->p = q;
        b->cap = cap;
    }
    memcpy(b->p + b->len, src, n);
    b->len += n;
}

static void png_flush_cb(png_structp png) { (void)png; }

static void png_werror_cb(png_structp png, png_const_charp msg) {
    png_wbuf *b = png_get_error_ptr(png);
    snprintf(b->msg, sizeof b->msg, "%s", msg);
    png_longjmp(png, 1);
}

int hm_image_encode_png(const hm_image *img, uint8_t **buf, size_t *len) {
    if (!img || !img->rgb || img->w <= 0 || img->h <= 0 || !buf || !len)
        return hm_err(HM_E_ARG, "hm_image_encode_png: empty image or NULL output");
    *buf = NULL;
    *len = 0;
    png_wbuf b = {NULL, 0, 0, ""};
    png_bytep *volatile rows = NULL;
    png_structp png = png_create_write_struct(PNG_LIBPNG_VER_STRING, &b, png_werror_cb, png_warn_cb);
    png_infop info = png ? png_create_info_struct(png) : NULL;
    if (!info) {
        png_destroy_write_struct(&png, NULL);
        return hm_err(HM_E_NOMEM, "out of memory starting the PNG encoder");
    }
    if (setjmp(png_jmpbuf(png))) {
        png_destroy_write_struct(&png, &info);
        free(rows);
        free(b.p);
        return hm_err(HM_E_NOMEM, "PNG encoding failed: %s", b.msg);
    }
    rows = malloc(sizeof(png_bytep) * img->h);
    if (!rows) png_error(png, "out of memory");
    for (int y = 0; y < img->h; y++) rows[y] = img->rgb + (size_t)y * img->w * 3;
    png_set_write_fn(png, &b, png_write_cb, png_flush_cb);
    png_set_IHDR(png, info, (png_uint_32)img->w, (png_uint_32)img->h, 8, PNG_COLOR_TYPE_RGB, PNG_INTERLACE_NONE,
                 PNG_COMPRESSION_TYPE_DEFAULT, PNG_FILTER_TYPE_DEFAULT);
    png_write_info(png, info);
    png_write_image(png, rows);
    png_write_end(png, NULL);
    png_destroy_write_struct(&png, &info);
    free(rows);
    *buf = b.p;
    *len = b.len;
    return HM_OK;
}

int hm_image_save_png(const char *path, const hm_image *img) {
    uint8_t *buf;
    size_t len;
    int rc = hm_image_encode_png(img, &buf, &len);
    if (rc) return rc;
    rc = hm_file_write_atomic(path, buf, len); /* never removes what was at path */
    free(buf);
    return rc;
}

/* ------------------------------------------------------------------------ */
/* Entry points                                                              */
/* ------------------------------------------------------------------------ */

/* The child box `type` of the ISO BMFF boxes in [p, end) (header skipped:
 * its payload range in *b, *e), or 0. */
static int bmff_child(const uint8_t *p, const uint8_t *end, const char *type, const uint8_t **b, const uint8_t **e) {
    for (int guard = 0; end - p >= 8 && guard < 4096; guard++) {
        uint64_t size = rd32(p, 0);
        size_t hdr = 8;
        if (size == 1) {
            if (end - p < 16) return 0;
            size = (uint64_t)rd32(p + 8, 0) << 32 | rd32(p + 12, 0);
            hdr = 16;
        } else if (size == 0) {
            size = (uint64_t)(end - p);
        }
        if (size < hdr || size > (uint64_t)(end - p)) return 0;
        if (!memcmp(p + 4, type, 4)) {
            *b = p + hdr, *e = p + size;
            return 1;
        }
        p += size;
    }
    return 0;
}

/* An AVIF's declared size: meta (a full box) > iprp > ipco > ispe (a full
 * box: width, height). The AV1 bitstream's own size is what FFmpeg decodes
 * (under max_pixels either way); a declared size over the limits is
 * refused here first. */
static int avif_size(const uint8_t *buf, size_t n, long long *w, long long *h) {
    const uint8_t *b, *e, *b2, *e2;
    if (!bmff_child(buf, buf + n, "meta", &b, &e) || e - b < 4) return 0;
    if (!bmff_child(b + 4, e, "iprp", &b2, &e2) || !bmff_child(b2, e2, "ipco", &b, &e) ||
        !bmff_child(b, e, "ispe", &b2, &e2) || e2 - b2 < 12)
        return 0;
    *w = rd32(b2 + 4, 0), *h = rd32(b2 + 8, 0);
    return 1;
}

/* The size a BMP, GIF, TIFF or AVIF header declares (the first image's), so that
 * an oversized one is named before FFmpeg sees it; 0 when the header is too
 * short or has none (FFmpeg's max_pixels then still bounds the decode). */
static int header_size(const uint8_t *b, size_t n, const char *fmt, long long *w, long long *h) {
    if (!strcmp(fmt, "BMP") && n >= 26) {
        const uint32_t hs = rd32(b + 14, 1);
        if (hs == 12) {
            *w = rd16(b + 18, 1), *h = rd16(b + 20, 1);
        } else {
            *w = (int32_t)rd32(b + 18, 1), *h = (int32_t)rd32(b + 22, 1);
            if (*h < 0) *h = -*h; /* top-down rows */
        }
        return 1;
    }
    if (!strcmp(fmt, "AVIF")) return avif_size(b, n, w, h);
    if (!strcmp(fmt, "GIF") && n >= 10) {
        *w = rd16(b + 6, 1), *h = rd16(b + 8, 1);
        return 1;
    }
    if (!strcmp(fmt, "TIFF") && n >= 8) {
        const int le = b[0] == 'I';
        const uint32_t ifd = rd32(b + 4, le);
        if (ifd > n - 2 || n < 2) return 0;
        const unsigned cnt = rd16(b + ifd, le);
        *w = *h = 0;
        for (unsigned i = 0; i < cnt; i++) {
            const size_t e = (size_t)ifd + 2 + (size_t)i * 12;
            if (e + 12 > n) break;
            const unsigned tag = rd16(b + e, le), type = rd16(b + e + 2, le);
            const long long v = type == 3 ? (long long)rd16(b + e + 8, le) : type == 4 ? (long long)rd32(b + e + 8, le) : -1;
            if (tag == 256) *w = v;
            if (tag == 257) *h = v;
        }
        return *w > 0 && *h > 0;
    }
    return 0;
}

/* What the bytes are: a format this file decodes (its demuxer for FFmpeg's,
 * "" for the ones decoded here), or one named only for the error message
 * (demuxer NULL). The file's content decides, never its name. */
typedef struct {
    const char *name, *demuxer;
} kind;

static kind kind_of(const uint8_t *b, size_t n) {
    if (n >= 3 && b[0] == 0xFF && b[1] == 0xD8 && b[2] == 0xFF) return (kind){"JPEG", ""};
    if (n >= 8 && !memcmp(b, "\x89PNG\r\n\x1a\n", 8)) return (kind){"PNG", ""};
    if (n >= 12 && !memcmp(b, "RIFF", 4) && !memcmp(b + 8, "WEBP", 4)) return (kind){"WebP", ""};
    if (n >= 6 && (!memcmp(b, "GIF87a", 6) || !memcmp(b, "GIF89a", 6))) return (kind){"GIF", "gif"};
    if (n >= 2 && b[0] == 'B' && b[1] == 'M') return (kind){"BMP", "bmp_pipe"};
    if (n >= 4 && (!memcmp(b, "II*\0", 4) || !memcmp(b, "MM\0*", 4))) return (kind){"TIFF", "tiff_pipe"};
    if (n >= 12 && !memcmp(b + 4, "ftyp", 4)) {
        /* ISO BMFF: AVIF when the major brand or a compatible one says so */
        const uint32_t box = rd32(b, 0);
        const size_t end = box >= 16 && box <= n ? (size_t)box : (n < 64 ? n : 64);
        if (!memcmp(b + 8, "avif", 4) || !memcmp(b + 8, "avis", 4)) return (kind){"AVIF", "mov"};
        for (size_t o = 16; o + 4 <= end; o += 4)
            if (!memcmp(b + o, "avif", 4) || !memcmp(b + o, "avis", 4)) return (kind){"AVIF", "mov"};
        return (kind){"HEIF/MP4", NULL};
    }
    if (n >= 6 && !memcmp(b, "\x93NUMPY", 6)) return (kind){"NumPy .npy", NULL};
    return (kind){NULL, NULL};
}

/* A WebP's canvas size from its first chunk (VP8X, VP8 or VP8L). */
static int webp_size(const uint8_t *b, size_t n, long long *w, long long *h) {
    if (n >= 30 && !memcmp(b + 12, "VP8X", 4)) {
        *w = 1 + (long long)(b[24] | b[25] << 8 | b[26] << 16), *h = 1 + (long long)(b[27] | b[28] << 8 | b[29] << 16);
        return 1;
    }
    if (n >= 30 && !memcmp(b + 12, "VP8 ", 4) && b[23] == 0x9d && b[24] == 0x01 && b[25] == 0x2a) {
        *w = rd16(b + 26, 1) & 0x3fff, *h = rd16(b + 28, 1) & 0x3fff;
        return 1;
    }
    if (n >= 25 && !memcmp(b + 12, "VP8L", 4) && b[20] == 0x2f) {
        const uint32_t v = rd32(b + 21, 1);
        *w = 1 + (v & 0x3fff), *h = 1 + (v >> 14 & 0x3fff);
        return 1;
    }
    return 0;
}

int hm_image_header_size(const void *buf, size_t len, const char **fmt, long long *w, long long *h) {
    const uint8_t *b = buf;
    const kind k = b ? kind_of(b, len) : (kind){NULL, NULL};
    if (fmt) *fmt = k.name;
    if (!k.name || !k.demuxer) return 0;
    if (!strcmp(k.name, "WebP")) return webp_size(b, len, w, h);
    if (!strcmp(k.name, "PNG")) {
        if (len < 24 || memcmp(b + 12, "IHDR", 4)) return 0;
        *w = rd32(b + 16, 0), *h = rd32(b + 20, 0);
        return 1;
    }
    if (!strcmp(k.name, "JPEG")) { /* the first SOF marker's */
        for (size_t i = 2; i + 9 < len;) {
            /* bytes between segments are skipped up to the next 0xFF, as libjpeg does (with a warning) */
            if (b[i] != 0xFF) { i++; continue; }
            const unsigned m = b[i + 1];
            if (m == 0xFF) { i++; continue; }
            if (m == 0x00) { i += 2; continue; } /* a stuffed zero, not a marker: libjpeg skips it too */
            if (m == 0xD8 || (m >= 0xD0 && m <= 0xD7) || m == 0x01) { i += 2; continue; } /* no length */
            if (m == 0xDA || m == 0xD9) return 0;
            const size_t seg = (size_t)(b[i + 2] << 8 | b[i + 3]);
            if (m >= 0xC0 && m <= 0xCF && m != 0xC4 && m != 0xC8 && m != 0xCC) {
                *h = rd16(b + i + 5, 0), *w = rd16(b + i + 7, 0);
                return 1;
            }
            i += 2 + (seg < 2 ? 2 : seg); /* a length under 2 skips nothing after it, as in libjpeg */
        }
        return 0;
    }
    return header_size(b, len, k.name, w, h);
}

int hm_image_decode(const void *buf, size_t len, const char *what, hm_image *out) {
    if (!out) return hm_err(HM_E_ARG, "hm_image_decode: NULL output");
    memset(out, 0, sizeof *out);
    if (!what) what = "image";
    const uint8_t *b = buf;
    if (!b || len == 0) return hm_err(HM_E_FORMAT, "%s: empty file", what);
    const kind k = kind_of(b, len);
    if (!k.name) return hm_err(HM_E_UNSUPPORTED, "%s: not an image this program reads (JPEG, PNG, WebP, AVIF, BMP, TIFF, GIF)", what);
    if (!k.demuxer)
        return hm_err(HM_E_UNSUPPORTED, "%s: %s files are not supported (JPEG, PNG, WebP, AVIF, BMP, TIFF, GIF are)", what,
                      k.name);
    if (!strcmp(k.name, "JPEG")) return decode_jpeg(b, len, what, out);
    if (!strcmp(k.name, "PNG")) return decode_png(b, len, what, out);
    if (!strcmp(k.name, "WebP")) return hm_image_decode_webp(b, len, what, out);
    long long w, h;
    if (header_size(b, len, k.name, &w, &h)) {
        int rc = hm_image_check_size(what, k.name, w, h);
        if (rc) return rc;
    }
    return hm_image_decode_ff(b, len, what, k.name, k.demuxer, out);
}

int hm_image_load(const char *path, hm_image *out) {
    if (!out) return hm_err(HM_E_ARG, "hm_image_load: NULL output");
    memset(out, 0, sizeof *out);
    if (!path) return hm_err(HM_E_ARG, "hm_image_load: NULL path");
    FILE *f = fopen(path, "rb");
    if (!f) return hm_err(HM_E_IO, "%s: cannot open file", path);
    struct stat st;
    if (fstat(fileno(f), &st) == 0 && S_ISDIR(st.st_mode)) {
        fclose(f);
        return hm_err(HM_E_IO, "%s: is a directory", path);
    }
    /* Read to EOF in growing chunks, so pipes work as well as files. */
    size_t cap = fstat(fileno(f), &st) == 0 && S_ISREG(st.st_mode) ? (size_t)st.st_size + 1 : 1 << 20, len = 0;
    uint8_t *buf = NULL;
    for (;;) {
        if (cap > (size_t)HM_IMAGE_MAX_FILE_BYTES + 1) {
            free(buf);
            fclose(f);
            return hm_err(HM_E_UNSUPPORTED, "%s: file over %lld bytes is too large for an image", path,
                          HM_IMAGE_MAX_FILE_BYTES);
        }
        uint8_t *nb = realloc(buf, cap);
        if (!nb) {
            free(buf);
            fclose(f);
            return hm_err(HM_E_NOMEM, "%s: out of memory reading the file", path);
        }
        buf = nb;
        len += fread(buf + len, 1, cap - len, f);
        if (len < cap) break;
        cap *= 2;
    }
    int err = ferror(f);
    fclose(f);
    if (err) {
        free(buf);
        return hm_err(HM_E_IO, "%s: read error", path);
    }
    int rc = hm_image_decode(buf, len, path, out);
    free(buf);
    return rc;
}
